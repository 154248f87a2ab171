# ELASTIC_CHECK_HWLOC: --with-hwloc[=DIR], for rank binding in elastic-exec
AC_DEFUN([ELASTIC_CHECK_HWLOC], [
  ELASTIC_CHECK_LIB([hwloc], [hwloc >= 2.0], [hwloc.h], [hwloc_topology_init], [-lhwloc],
                    [libhwloc-dev], [hwloc topology and binding])
])
