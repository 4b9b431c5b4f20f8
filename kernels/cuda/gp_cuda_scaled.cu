/* gp_cuda_scaled.cu — the scaled and block formats on the device (docs/formats.md,
 * "Scaled and block formats"): one thread per row block, each calling
 * gp_scaled_row_block of kernels/arith/gp_scaled.h, the function the CPU runs, so the
 * device's codes, scales and dequantized values equal the CPU's bit for bit (the parity
 * test checks them, on a device or through the host shim). The element conversions are
 * gradprec's rounding, not the hardware's cvt (sm_89+ converts fp8 only with .satfinite,
 * sm_100 has the MX/NVFP4 cvt: not used). Kinds: MX, NVFP4 (the tensor scale given),
 * fp8 blockwise_1x128, and per-tensor fp8 with a given multiplier (delayed scaling). */
#include <cuda_runtime.h>
#include <stdio.h>

#include "gp_cuda.h"

__global__ void gp_scaled_kernel(gp_scaled_cfg c, size_t rows, size_t cols, size_t bc, float ts, float given,
                                 uint64_t seed, uint64_t stream, const float *x, float *y, uint8_t *codes,
                                 float *scales)
{
    size_t nbc = (cols + bc - 1) / bc, nb = rows * nbc;
    size_t b = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (; b < nb; b += stride) {
        size_t r = b / nbc, c0 = (b % nbc) * bc, i = r * cols + c0;
        int w = (int)(cols - c0 < bc ? cols - c0 : bc);
        scales[b] = gp_scaled_row_block(&c, x + i, w, ts, given, seed, stream, i, y + i, codes + i, (unsigned *)0);
    }
}

#define GP_CUDA_TRY(call)                                                                           \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            gp_error_set(err, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            goto fail;                                                                              \
        }                                                                                           \
    } while (0)

extern "C" int gp_cuda_scaled_quantize(const gp_scaled_cfg *c, size_t rows, size_t cols, const float *x, float *y,
                                       uint8_t *codes, float *scales, float ts, float given, uint64_t seed,
                                       uint64_t stream, gp_error *err)
{
    float *d_x = NULL, *d_y = NULL, *d_s = NULL;
    uint8_t *d_q = NULL;
    int rc = -1;
    size_t bc = c->kind == GP_SC_MX ? 32 : c->kind == GP_SC_NVFP4 ? 16 : 128;
    size_t n = rows * cols, nb = rows * ((cols + bc - 1) / bc);
    if (c->kind == GP_SC_CURRENT || c->kind == GP_SC_BLOCK_128X128)
        return gp_error_set(err, "gp_cuda_scaled_quantize: per-tensor current and 128x128 scales are the host's");
    if (gp_cuda_device_count() == 0)
        return gp_error_set(err, "no CUDA device present");
    GP_CUDA_TRY(cudaMalloc((void **)&d_x, n * sizeof *d_x));
    GP_CUDA_TRY(cudaMalloc((void **)&d_y, n * sizeof *d_y));
    GP_CUDA_TRY(cudaMalloc((void **)&d_q, n));
    GP_CUDA_TRY(cudaMalloc((void **)&d_s, nb * sizeof *d_s));
    GP_CUDA_TRY(cudaMemcpy(d_x, x, n * sizeof *d_x, cudaMemcpyHostToDevice));
    gp_scaled_kernel<<<256, 128>>>(*c, rows, cols, bc, ts, given, seed, stream, d_x, d_y, d_q, d_s);
    GP_CUDA_TRY(cudaGetLastError());
    GP_CUDA_TRY(cudaMemcpy(y, d_y, n * sizeof *d_y, cudaMemcpyDeviceToHost));
    GP_CUDA_TRY(cudaMemcpy(codes, d_q, n, cudaMemcpyDeviceToHost));
    GP_CUDA_TRY(cudaMemcpy(scales, d_s, nb * sizeof *d_s, cudaMemcpyDeviceToHost));
    rc = 0;
fail:
    cudaFree(d_x);
    cudaFree(d_y);
    cudaFree(d_q);
    cudaFree(d_s);
    return rc;
}
