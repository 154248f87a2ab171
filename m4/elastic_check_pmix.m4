# ELASTIC_CHECK_PMIX: --with-pmix[=DIR], for the PMIx server hosted by elastic-exec
AC_DEFUN([ELASTIC_CHECK_PMIX], [
  ELASTIC_CHECK_LIB([pmix], [pmix >= 4], [pmix_server.h], [PMIx_server_init], [-lpmix],
                    [libpmix-dev], [PMIx server library])
])
