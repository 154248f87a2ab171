/* heat2d_kernels.cu - the device side of heat2d_cuda: one Jacobi step
 *
 * The same arithmetic as examples/heat2d.c, in the same order:
 *   v = 0.25 * ((up + down) + (left + right))
 * Compiled with -fmad=false (no fused multiply-add), so every point is
 * bit-identical to the CPU's and the checksum to heat2d's.
 */
#include <cuda_runtime.h>

__global__ static void jacobi (const double *u, double *v, unsigned long long rows, int nx)
{
    unsigned long long k = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long i;
    int j;

    if (k >= rows * (unsigned long long)nx)
        return;
    i = k / nx + 1;
    j = (int)(k % nx);
    {
        double left = j > 0 ? u[i * nx + j - 1] : 0.0;
        double right = j < nx - 1 ? u[i * nx + j + 1] : 0.0;
        v[i * nx + j] = 0.25 * ((u[(i - 1) * nx + j] + u[(i + 1) * nx + j]) + (left + right));
    }
}

/* One step on rows interior rows of u (with its two ghost rows) into v,
 * then v's interior copied back into u, on the legacy default stream.
 * Returns a cudaError_t. */
extern "C" int heat2d_cuda_step (double *u, double *v, unsigned long long rows, int nx)
{
    unsigned long long n = rows * (unsigned long long)nx;
    unsigned int threads = 256, blocks = (unsigned int)((n + threads - 1) / threads);

    if (n == 0)
        return cudaSuccess;
    cudaError_t e;

    jacobi<<<blocks, threads>>> (u, v, rows, nx);
    if ((e = cudaGetLastError ()) != cudaSuccess)
        return e;
    return cudaMemcpyAsync (
        u + nx, v + nx, n * sizeof (double), cudaMemcpyDeviceToDevice, 0);
}
