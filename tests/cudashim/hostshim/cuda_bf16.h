/* cuda_bf16.h (host launch shim) — the subset of CUDA's cuda_bf16.h the kernels use: the __nv_bfloat16
 * type and its conversions to and from fp32. Here every conversion is gradprec's own
 * rounding (gp_shim_fmt_from_f32 / _to_f32: kernels/arith/gp_format.h), so a shim run
 * checks the kernels' structure, indexing and synchronisation, not the GPU's rounding
 * (that needs a GPU: scripts/gpu-check.sh). Not a GPU: see docs/cuda.md. */
#ifndef GP_SHIM_CUDA_BF16_H
#define GP_SHIM_CUDA_BF16_H

#include "cuda_runtime.h"

struct __nv_bfloat16 {
    unsigned short __x; /* the bit pattern */
};
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 h; h.__x = u; return h; }
static inline __nv_bfloat16 __float2bfloat16_rn(float a)
{
    return __ushort_as_bfloat16((unsigned short)gp_shim_fmt_from_f32(1, __float_as_uint(a), 0));
}
static inline __nv_bfloat16 __float2bfloat16_rz(float a)
{
    return __ushort_as_bfloat16((unsigned short)gp_shim_fmt_from_f32(1, __float_as_uint(a), 1));
}
static inline __nv_bfloat16 __float2bfloat16(float a) { return __float2bfloat16_rn(a); }
static inline float __bfloat162float(__nv_bfloat16 h) { return __uint_as_float(gp_shim_fmt_to_f32(1, h.__x)); }

#endif
