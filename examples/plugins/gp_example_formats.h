/* gp_example_formats.h — the example plugins' own bf16/fp16 <-> fp32 conversions
 * (round to nearest even, by the usual bit tricks; no gradprec arithmetic), shared by
 * the C plugin and the CUDA one (host and device). A user's plugin would have its own. */
#ifndef GP_EXAMPLE_FORMATS_H
#define GP_EXAMPLE_FORMATS_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GP_EX_FN static __host__ __device__ inline
#else
#define GP_EX_FN static inline
#endif

GP_EX_FN float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

GP_EX_FN uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* bf16 <-> fp32 */
GP_EX_FN float bf16_to_f32(uint16_t h)
{
    return bits_to_f32((uint32_t)h << 16);
}

GP_EX_FN uint16_t f32_to_bf16(float f)
{
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN, quiet */
    u += 0x7fffu + ((u >> 16) & 1u);          /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

/* fp16 <-> fp32 */
GP_EX_FN float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31)
        return bits_to_f32(sign | 0x7f800000u | (m << 13));          /* inf, NaN */
    if (e == 0) {
        float v = (float)m * 0x1p-24f;                                 /* subnormal: exact */
        return sign ? -v : v;
    }
    return bits_to_f32(sign | ((e + 112u) << 23) | (m << 13));
}

GP_EX_FN uint16_t f32_to_f16(float f)
{
    uint32_t u = f32_to_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));     /* NaN, quiet */
    if (a >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);                              /* >= 65520: inf */
    if (a >= 0x38800000u) {                                             /* normal: >= 2^-14 */
        uint32_t r = a - 0x38000000u;                                   /* rebias 127 -> 15 */
        return (uint16_t)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    }
    /* subnormal: adding 0.5 makes the hardware round |f| to a multiple of 2^-24 (RNE) */
    float t = bits_to_f32(a) + 0.5f;
    return (uint16_t)(sign | (f32_to_bits(t) - 0x3f000000u));
}

#endif
