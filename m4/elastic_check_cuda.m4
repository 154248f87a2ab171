# ELASTIC_CHECK_CUDA: --with-cuda[=DIR] (default: auto, looks in /usr/local/cuda too)
AC_DEFUN([ELASTIC_CHECK_CUDA], [
  AS_IF([test "x$with_cuda" = x && test -f /usr/local/cuda/include/cuda_runtime_api.h],
        [with_cuda=/usr/local/cuda])
  ELASTIC_CHECK_LIB([cuda], [], [cuda_runtime_api.h], [cudaGetDeviceCount], [-lcudart],
                    [nvidia-cuda-toolkit], [CUDA runtime])
  # found, but no code uses it yet (the GPU/NCCL work will): say so
  AS_IF([test "x$elastic_have_cuda" = xyes],
        [elastic_cuda_summary="$elastic_cuda_summary (not used yet)"])
])
