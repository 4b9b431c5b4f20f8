/* gp_arith.h — the one definition of per-element arithmetic shared by the CPU
 * emulation and the CUDA kernels: the portability macro, rounding modes and the
 * event flags every instrumented operation reports (SoftFloat-style).
 * Everything here is pure and works on bit patterns; nothing reads the FP environment. */
#ifndef GP_ARITH_H
#define GP_ARITH_H

#include <stdint.h>

/* GP_ARITH marks every shared function: __host__ __device__ under nvcc,
 * static inline in C. Keep bodies free of host-only calls. */
#if defined(__CUDACC__)
#define GP_ARITH static __host__ __device__ __forceinline__
#else
#define GP_ARITH static inline
#endif

/* Count leading zeros of a non-zero 64-bit word, on host and device. */
#if defined(__CUDA_ARCH__)
#define GP_CLZ64(x) __clzll((long long)(x))
#else
#define GP_CLZ64(x) __builtin_clzll(x)
#endif

/* fp32 operations rounded to nearest even, never contracted: CUDA's IEEE intrinsics in
 * device code and in the host launch shim (whose __fadd_rn ... are the host's IEEE
 * binary32 operations), the plain operators elsewhere (the build has no contraction:
 * -ffp-contract=off, nvcc --fmad=false). sqrtf is IEEE everywhere (no fast math). */
#if defined(__CUDA_ARCH__) || defined(GP_SHIM_CUDA)
#define GP_DEVICE_CODE 1 /* a CUDA kernel's code (on a device, or in the host launch shim) */
#define GP_FADD_RN(a, b) __fadd_rn((a), (b))
#define GP_FSUB_RN(a, b) __fsub_rn((a), (b))
#define GP_FMUL_RN(a, b) __fmul_rn((a), (b))
#define GP_FMAF_RN(a, b, c) __fmaf_rn((a), (b), (c))
#else
#define GP_FADD_RN(a, b) ((a) + (b))
#define GP_FSUB_RN(a, b) ((a) - (b))
#define GP_FMUL_RN(a, b) ((a) * (b))
#define GP_FMAF_RN(a, b, c) fmaf((a), (b), (c))
#endif

/* Rounding modes of a conversion or of a rounded operation. */
typedef enum {
    GP_RNE = 0,        /* round to nearest, ties to even */
    GP_RTZ = 1,        /* round toward zero (what a bit-truncating cast does) */
    GP_STOCHASTIC = 2  /* round up in magnitude with probability floor(f*2^32)/2^32,
                          f = fractional position between the two neighbours */
} gp_rmode;

/* Events (exception flags), OR-ed into an `unsigned *ev` out-parameter.
 * Semantics follow IEEE 754 with tininess detected BEFORE rounding:
 *   INEXACT   the stored value differs from the exact value;
 *   UNDERFLOW the exact value is non-zero, below the min normal in magnitude, and
 *             the result is inexact (or flushed by FTZ);
 *   OVERFLOW  the exact value rounds (unbounded exponent) beyond max finite;
 *             always together with INEXACT;
 *   INVALID   a signalling NaN was converted, or an infinity was converted to a
 *             format without infinities (fp8 e4m3);
 *   ABSORBED  an addition with a non-zero addend left the accumulator unchanged
 *             (reported by accumulate steps, never by conversions). */
enum {
    GP_EV_INEXACT = 1u << 0,
    GP_EV_UNDERFLOW = 1u << 1,
    GP_EV_OVERFLOW = 1u << 2,
    GP_EV_INVALID = 1u << 3,
    GP_EV_ABSORBED = 1u << 4
};

/* Bit-exact reinterpretation between float/double and their encodings. */
GP_ARITH uint32_t gp_f32_bits(float x)
{
#if defined(__CUDA_ARCH__)
    return (uint32_t)__float_as_uint(x);
#else
    union { float f; uint32_t u; } c; c.f = x; return c.u;
#endif
}
GP_ARITH float gp_f32_from_bits(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    union { float f; uint32_t u; } c; c.u = u; return c.f;
#endif
}
GP_ARITH uint64_t gp_f64_bits(double x)
{
#if defined(__CUDA_ARCH__)
    return (uint64_t)__double_as_longlong(x);
#else
    union { double f; uint64_t u; } c; c.f = x; return c.u;
#endif
}
GP_ARITH double gp_f64_from_bits(uint64_t u)
{
#if defined(__CUDA_ARCH__)
    return __longlong_as_double((long long)u);
#else
    union { double f; uint64_t u; } c; c.u = u; return c.f;
#endif
}

/* The exact value x rounded to odd in binary64, given r = RN(x) (finite) and sticky =
 * sign(x - r): r when x = r; else, of the two binary64 neighbours around x, the one
 * whose last significand bit is 1 — r itself when r is odd, else r moved one ulp
 * toward x. Rounding the result to any format with at most 51 significant bits (and
 * exponent range inside binary64's), in any rounding mode, equals rounding x itself
 * (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms
 * using rounding to odd", IEEE TC 2008): an odd binary64 value is never a value or a
 * midpoint of such a format, so it lies strictly inside the same rounding interval
 * as x. (Moving an odd r would put it on the binary64 value next to x, which may be
 * exactly a value of the narrow format: x just below an fp32 value c with r = c - ulp
 * moved up to c rounds toward zero to c, not below it.) */
GP_ARITH double gp_f64_nudge(double r, int sticky)
{
    if (sticky == 0)
        return r;
    uint64_t u = gp_f64_bits(r);
    if (u & 1)
        return r; /* already odd: x lies between r and its even neighbour */
    if (r == 0)
        return gp_f64_from_bits(sticky > 0 ? 1ull : 0x8000000000000001ull);
    int away = (sticky > 0) == !(u >> 63); /* moving away from zero grows the magnitude */
    return gp_f64_from_bits(away ? u + 1 : u - 1);
}

#endif
