# ELASTIC_CHECK_NCCL: --with-nccl[=DIR] (default: auto, looks beside CUDA too)
#
# Headers only for libelastic: libnccl is dlopen'ed when a manager enables
# its NCCL communicator (src/libelastic/gpu_load.c).  It needs 2.28
# (ncclCommRevoke, ncclCommShrink): an older nccl.h is not used.
AC_DEFUN([ELASTIC_CHECK_NCCL], [
  AS_IF([test "x$with_nccl" = x && test -f /usr/local/cuda/include/nccl.h],
        [with_nccl=/usr/local/cuda])
  ELASTIC_CHECK_LIB([nccl], [], [nccl.h], [ncclCommShrink], [-lnccl],
                    [libnccl-dev >= 2.28], [NCCL collectives])
  AS_IF([test "x$elastic_have_nccl" = xyes],
        [elastic_nccl_summary="$elastic_nccl_summary (libnccl dlopen'ed)"])
])
