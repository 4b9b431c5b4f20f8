/* gp_cuda_convert.cu — format conversion on the device, for the CUDA parity test: the
 * GPU's conversions against gradprec's model (kernels/arith/gp_format.h), which the CPU
 * emulation runs. One kernel per format (a template: the format is switched on once per
 * launch). Each thread converts one fp32 pattern: the bits by the hardware's conversion
 * where CUDA has one (bf16/fp16, RNE or RTZ, no FTZ: __float2bfloat16_rn/_rz,
 * __float2half_rn/_rz via gp_fmt_store_f32), else by gradprec's rounding (every other
 * mode of kernels/gp_vocab.h, FTZ, fp8, fp32); the events always by gradprec's rounding (the hardware reports none).
 * Random bits come from Philox(seed, 0, pattern), never from thread ids.
 * Build: part of gradprec_core when nvcc is found (nvcc --fmad=false, sm_80/sm_90).
 * Run:   build/tests/test_cuda_parity (skips with CTest code 77 without a device). */
#include <cuda_runtime.h>
#include <stdio.h>

#include "../arith/gp_philox.h"
#include "gp_cuda.h"
#include "gp_cuda_kernels.cuh"

template <int F>
__global__ void gp_convert_range_kernel(gp_rmode mode, int ftz, uint64_t seed, uint32_t start, size_t n,
                                        uint32_t *bits, uint8_t *ev)
{
    constexpr gp_format f = (gp_format)F;
    int hw = gp_fmt_hw(f) && !ftz && (mode == GP_RNE || mode == GP_RTZ); /* the modes cvt has */
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        uint32_t x = start + (uint32_t)i;
        uint32_t r = mode == GP_STOCHASTIC ? gp_rand_u32(seed, 0, x) : 0u;
        unsigned e = 0;
        uint32_t b = gp_fmt_from_f32_bits(f, x, mode, r, ftz, &e);
        bits[i] = hw ? gp_fmt_store_f32(f, gp_f32_from_bits(x), mode == GP_RTZ) : b;
        ev[i] = (uint8_t)e;
    }
}

extern "C" int gp_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky error: no driver / no device */
        return 0;
    }
    return n;
}

extern "C" int gp_cuda_probe(char *why, size_t whylen)
{
    static_assert(cudaErrorInitializationError == GP_CUDA_INIT_ERROR, "gp_cuda.h's copy of the code");
    cudaError_t e = cudaFree(0);
    if (e == cudaSuccess)
        return 0;
    (void)cudaGetLastError();
    snprintf(why, whylen, "cudaFree(0): %s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
    return (int)e;
}


extern "C" int gp_cuda_convert_range(gp_format f, gp_rmode mode, int ftz, uint64_t seed,
                                     uint32_t start, size_t n, uint32_t *out_bits,
                                     uint8_t *out_ev, gp_error *err)
{
    uint32_t *d_bits = NULL;
    uint8_t *d_ev = NULL;
    int rc = -1;
    if (gp_cuda_device_count() == 0)
        return gp_error_set(err, "no CUDA device present");
    GP_CUDA_TRY(cudaMalloc((void **)&d_bits, n * sizeof *d_bits));
    GP_CUDA_TRY(cudaMalloc((void **)&d_ev, n * sizeof *d_ev));
    if (gp_with_format(f, [&](auto F) {
            gp_convert_range_kernel<decltype(F)::value><<<1024, 256>>>(mode, ftz, seed, start, n, d_bits, d_ev);
        }) != 0) {
        gp_error_set(err, "format %d: not a gradprec format", (int)f);
        goto fail;
    }
    GP_CUDA_TRY(cudaGetLastError());
    GP_CUDA_TRY(cudaMemcpy(out_bits, d_bits, n * sizeof *d_bits, cudaMemcpyDeviceToHost));
    GP_CUDA_TRY(cudaMemcpy(out_ev, d_ev, n * sizeof *d_ev, cudaMemcpyDeviceToHost));
    rc = 0;
fail:
    cudaFree(d_bits);
    cudaFree(d_ev);
    return rc;
}
