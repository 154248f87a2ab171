# ELASTIC_CHECK_JANSSON: --with-jansson[=DIR], JSON for the tools (not libelastic)
AC_DEFUN([ELASTIC_CHECK_JANSSON], [
  ELASTIC_CHECK_LIB([jansson], [jansson >= 2.10], [jansson.h], [json_loads], [-ljansson],
                    [libjansson-dev], [JSON parsing for the tools])
])
