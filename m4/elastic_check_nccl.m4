# ELASTIC_CHECK_NCCL: --with-nccl[=DIR] (default: auto, looks beside CUDA too)
AC_DEFUN([ELASTIC_CHECK_NCCL], [
  AS_IF([test "x$with_nccl" = x && test -f /usr/local/cuda/include/nccl.h],
        [with_nccl=/usr/local/cuda])
  ELASTIC_CHECK_LIB([nccl], [], [nccl.h], [ncclCommInitRank], [-lnccl],
                    [libnccl-dev], [NCCL collectives])
  # found, but no code uses it yet (the GPU/NCCL work will): say so
  AS_IF([test "x$elastic_have_nccl" = xyes],
        [elastic_nccl_summary="$elastic_nccl_summary (not used yet)"])
])
