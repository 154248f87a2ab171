# ELASTIC_CHECK_CUDA: --with-cuda[=DIR] (default: auto, looks in /usr/local/cuda too)
#
# libelastic's device arrays (src/libelastic/gpu_*.c) use the CUDA runtime's
# headers only: libcudart is dlopen'ed on first use, so CUDA_LIBS is for
# programs (examples/heat2d_cuda) and the link test.  NVCC is set when nvcc
# is found (in DIR/bin, then the PATH): the CUDA example is built with it.
AC_DEFUN([ELASTIC_CHECK_CUDA], [
  AS_IF([test "x$with_cuda" = x && test -f /usr/local/cuda/include/cuda_runtime_api.h],
        [with_cuda=/usr/local/cuda])
  ELASTIC_CHECK_LIB([cuda], [], [cuda_runtime_api.h], [cudaGetDeviceCount], [-lcudart],
                    [nvidia-cuda-toolkit], [CUDA runtime])
  NVCC=
  AS_IF([test "x$elastic_have_cuda" = xyes], [
    elastic_nvcc_path=$PATH
    AS_IF([test -d "$with_cuda/bin"], [elastic_nvcc_path="$with_cuda/bin:$PATH"])
    AC_PATH_PROG([NVCC], [nvcc], [], [$elastic_nvcc_path])
    elastic_cuda_summary="$elastic_cuda_summary (libcudart dlopen'ed; nvcc: ${NVCC:-none})"
  ])
  AC_SUBST([NVCC])
  AM_CONDITIONAL([HAVE_NVCC], [test "x$NVCC" != x])
])
