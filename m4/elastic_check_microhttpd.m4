# ELASTIC_CHECK_MICROHTTPD: --with-microhttpd[=DIR], the health/metrics HTTP server
AC_DEFUN([ELASTIC_CHECK_MICROHTTPD], [
  ELASTIC_CHECK_LIB([microhttpd], [libmicrohttpd], [microhttpd.h], [MHD_start_daemon], [-lmicrohttpd],
                    [libmicrohttpd-dev], [HTTP server for health and metrics])
])
