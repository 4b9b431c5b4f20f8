/* gp_ptx_fixture.cu — two kernels for the PTX check's own test (tests/cudashim): one with a
 * multiply-add pattern written as two operations (nvcc contracts it into an fma only when
 * --fmad=true: gp_ptx_check.py must then fail), and one that asks for the fma with fmaf
 * (one fma whatever --fmad says). Compiled to PTX only, never linked. */
#include <cuda_runtime.h>

__global__ void gp_ptx_axpy_kernel(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i]; /* two roundings, as written */
}

__global__ void gp_ptx_fmaf_kernel(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = fmaf(a, x[i], y[i]); /* one rounding, asked for */
}
