/* cuda_fp16.h (host launch shim) — the subset of CUDA's cuda_fp16.h the kernels use: the __half
 * type and its conversions to and from fp32. Here every conversion is gradprec's own
 * rounding (gp_shim_fmt_from_f32 / _to_f32: kernels/arith/gp_format.h), so a shim run
 * checks the kernels' structure, indexing and synchronisation, not the GPU's rounding
 * (that needs a GPU: scripts/gpu-check.sh). Not a GPU: see docs/cuda.md. */
#ifndef GP_SHIM_CUDA_FP16_H
#define GP_SHIM_CUDA_FP16_H

#include "cuda_runtime.h"

struct __half {
    unsigned short __x; /* the bit pattern */
};
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __ushort_as_half(unsigned short u) { __half h; h.__x = u; return h; }
static inline __half __float2half_rn(float a)
{
    return __ushort_as_half((unsigned short)gp_shim_fmt_from_f32(2, __float_as_uint(a), 0));
}
static inline __half __float2half_rz(float a)
{
    return __ushort_as_half((unsigned short)gp_shim_fmt_from_f32(2, __float_as_uint(a), 1));
}
static inline __half __float2half(float a) { return __float2half_rn(a); }
static inline float __half2float(__half h) { return __uint_as_float(gp_shim_fmt_to_f32(2, h.__x)); }

#endif
