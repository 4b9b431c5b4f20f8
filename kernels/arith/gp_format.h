/* gp_format.h — the number formats (fp32, bf16, fp16, fp8 e4m3, fp8 e5m2) and the
 * conversions between them and binary32/binary64, on bit patterns, for host and device.
 * One generic rounding routine serves every format and mode; the MPFR oracle in
 * reference/gp_oracle.c checks it bit for bit, events included. */
#ifndef GP_FORMAT_H
#define GP_FORMAT_H

#include "gp_arith.h"

/* Hardware conversions (GP_HW_CONVERT): in a CUDA kernel compiled for a device that has
 * them (nvcc's device pass for sm_80 and later), fp32 <-> bf16/fp16 without FTZ and
 * without events go through CUDA's intrinsics — __float2bfloat16_rn/_rz,
 * __float2half_rn/_rz, __bfloat162float, __half2float, i.e. cvt.{rn,rz}.{bf16,f16}.f32 —
 * instead of gradprec's rounding, so that the device parity test checks the GPU's
 * conversions against this model. The host launch shim (GP_SHIM_CUDA, set by its
 * cuda_runtime.h) takes the same path, but its cuda_bf16.h / cuda_fp16.h implement those
 * intrinsics with gradprec's own rounding (gp_fmt_from_f32_bits), so a shim run checks
 * the kernels' structure, not NVIDIA's rounding. Everywhere else (the CPU emulation, the
 * host pass) only gradprec's rounding. The results are the same bits except a NaN's
 * payload, which the hardware may canonicalise (compare NaN-ness: gp_fmt_agree).
 * Stochastic rounding, FTZ (the hardware flushes after rounding, gradprec before), fp8
 * (sm_80 has no fp8 conversion; sm_89+ converts only with .satfinite, not OCP's
 * non-saturating overflow) and events always use gradprec's rounding. */
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(GP_SHIM_CUDA)
#define GP_HW_CONVERT 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

typedef enum {
    GP_FP32 = 0,
    GP_BF16 = 1,
    GP_FP16 = 2,
    GP_FP8_E4M3 = 3, /* OCP OFP8 E4M3 ("fn"): no infinities, NaN = S.1111.111, max 448 */
    GP_FP8_E5M2 = 4, /* OCP OFP8 E5M2: IEEE-like, inf and NaNs, max 57344 */
    GP_NFORMATS = 5
} gp_format;

/* What a format is, as numbers. All bit patterns are of the positive value. */
typedef struct {
    int width;       /* storage bits */
    int p;           /* significant bits, hidden bit included */
    int emin;        /* exponent of the min normal: 2^emin */
    int emax;        /* exponent of the top binade */
    uint32_t maxfin; /* bits of the largest finite value */
    uint32_t inf;    /* bits of +inf; 0 when the format has no infinity */
    uint32_t qnan;   /* bits of the canonical quiet NaN */
} gp_fmt_info;

GP_ARITH gp_fmt_info gp_fmt_get(gp_format f)
{
    gp_fmt_info i;
    switch (f) {
    case GP_BF16:
        i.width = 16; i.p = 8; i.emin = -126; i.emax = 127;
        i.maxfin = 0x7f7fu; i.inf = 0x7f80u; i.qnan = 0x7fc0u;
        break;
    case GP_FP16:
        i.width = 16; i.p = 11; i.emin = -14; i.emax = 15;
        i.maxfin = 0x7bffu; i.inf = 0x7c00u; i.qnan = 0x7e00u;
        break;
    case GP_FP8_E4M3:
        i.width = 8; i.p = 4; i.emin = -6; i.emax = 8;
        i.maxfin = 0x7eu; i.inf = 0u; i.qnan = 0x7fu;
        break;
    case GP_FP8_E5M2:
        i.width = 8; i.p = 3; i.emin = -14; i.emax = 15;
        i.maxfin = 0x7bu; i.inf = 0x7cu; i.qnan = 0x7eu;
        break;
    default: /* GP_FP32 */
        i.width = 32; i.p = 24; i.emin = -126; i.emax = 127;
        i.maxfin = 0x7f7fffffu; i.inf = 0x7f800000u; i.qnan = 0x7fc00000u;
        break;
    }
    return i;
}

/* Is `bits` a NaN / an infinity of format f? (sign ignored) */
GP_ARITH int gp_fmt_isnan(gp_format f, uint32_t bits)
{
    gp_fmt_info i = gp_fmt_get(f);
    uint32_t mag = bits & ((1u << (i.width - 1)) - 1u) ;
    return mag > (i.inf ? i.inf : i.maxfin);
}
GP_ARITH int gp_fmt_isinf(gp_format f, uint32_t bits)
{
    gp_fmt_info i = gp_fmt_get(f);
    uint32_t mag = bits & ((1u << (i.width - 1)) - 1u);
    return i.inf != 0 && mag == i.inf;
}

/* Widen a value of the format described by i to binary64 bits. Exact for every finite value and
 * infinity; a NaN keeps its sign and payload (a signalling NaN stays signalling:
 * this is a bit move, like PyTorch's bf16->fp32 `<< 16`). Reports nothing. */
GP_ARITH uint64_t gp_fmt_widen_info(gp_fmt_info i, uint32_t bits)
{
    uint32_t sbit = 1u << (i.width - 1);
    uint64_t neg = (bits & sbit) ? (1ull << 63) : 0;
    uint32_t mag = bits & (sbit - 1u);
    uint32_t half = 1u << (i.p - 1);
    if (i.inf && mag == i.inf)
        return neg | 0x7ff0000000000000ull;
    if (mag > (i.inf ? i.inf : i.maxfin))
        return neg | 0x7ff0000000000000ull | ((uint64_t)(mag & (half - 1u)) << (53 - i.p));
    uint32_t biased = mag >> (i.p - 1);
    uint64_t sig = biased ? ((mag & (half - 1u)) | half) : mag;
    int k = (biased ? (int)biased - 1 : 0) + i.emin - (i.p - 1); /* value = sig * 2^k */
    if (sig == 0)
        return neg;
    int l = 63 - GP_CLZ64(sig);                 /* sig in [2^l, 2^(l+1)) */
    uint64_t e = (uint64_t)(k + l + 1023);      /* always a binary64 normal */
    return neg | (e << 52) | ((sig << (52 - l)) & 0xfffffffffffffull);
}
/* gp_fmt_widen_info on format f's description. */
GP_ARITH uint64_t gp_fmt_to_f64_bits(gp_format f, uint32_t bits)
{
    return gp_fmt_widen_info(gp_fmt_get(f), bits);
}

/* Round the binary64 value with bits `u` to the format described by i.
 * mode: GP_RNE, GP_RTZ, or GP_STOCHASTIC with 32 random bits `rbits` (rounds away
 *   from zero iff rbits < floor(f * 2^32), f in [0,1) the position between the
 *   neighbours; exact values never move).
 * ftz: non-zero flushes every non-zero value below the min normal in magnitude to
 *   a zero of the same sign (events UNDERFLOW|INEXACT), before any rounding.
 * Overflow: RNE and stochastic give +-inf (NaN for e4m3, the OCP non-saturating
 *   behaviour); RTZ gives +-max finite (IEEE). Events OVERFLOW|INEXACT.
 * NaN: sign kept, payload's top bits kept, quiet bit set (e4m3: its one NaN); a
 *   signalling NaN reports INVALID. Infinity into e4m3 gives NaN with INVALID.
 * A format with neither infinity nor NaN (inf == qnan == 0: the OCP MX element formats
 *   fp6 e2m3/e3m2, fp4 e2m1 of gp_scaled.h) saturates at max finite on overflow, and a
 *   NaN or infinity becomes a zero of the same sign with INVALID.
 * Events are OR-ed into *ev when ev is non-NULL; returns the bits of the result. */
GP_ARITH uint32_t gp_fmt_round_info(gp_fmt_info i, uint64_t u, gp_rmode mode,
                                    uint32_t rbits, int ftz, unsigned *ev)
{
    uint32_t sign = (uint32_t)(u >> 63) << (i.width - 1);
    uint32_t e = (uint32_t)(u >> 52) & 0x7ffu;
    uint64_t m = u & 0xfffffffffffffull;
    unsigned flags = 0;
    uint32_t out;
    if (e == 0x7ffu) {
        if (m != 0) {
            if (!((m >> 51) & 1u))
                flags |= GP_EV_INVALID;
            out = i.inf ? (sign | i.inf | (1u << (i.p - 2)) | (uint32_t)(m >> (53 - i.p)))
                        : (sign | i.qnan);
            if (!i.inf && !i.qnan)
                flags |= GP_EV_INVALID;
        } else if (i.inf) {
            out = sign | i.inf;
        } else if (i.qnan) {
            out = sign | i.qnan;
            flags |= GP_EV_INVALID;
        } else {                                /* no inf, no NaN: saturate (as ml_dtypes) */
            out = sign | i.maxfin;
            flags |= GP_EV_OVERFLOW | GP_EV_INEXACT;
        }
    } else if (e == 0 && m == 0) {
        out = sign;
    } else {
        uint64_t sig = e ? (m | (1ull << 52)) : m;
        int E = e ? (int)e - 1075 : -1074;      /* |x| = sig * 2^E */
        int X = 63 - GP_CLZ64(sig) + E;         /* |x| in [2^X, 2^(X+1)) */
        int qmin = i.emin - (i.p - 1);          /* quantum of the subnormals */
        if (ftz && X < i.emin) {
            out = sign;
            flags |= GP_EV_UNDERFLOW | GP_EV_INEXACT;
        } else {
            int q = X - (i.p - 1);              /* quantum of the result */
            if (q < qmin)
                q = qmin;
            int shift = q - E;
            uint64_t kept, frac;                /* frac: discarded part, 0.frac in [0,1) */
            int inexact;
            if (shift <= 0) {
                kept = sig << -shift;
                frac = 0;
                inexact = 0;
            } else if (shift < 64) {
                kept = sig >> shift;
                frac = sig << (64 - shift);
                inexact = frac != 0;
            } else {                            /* |x| below a quarter-quantum: kept = 0 */
                kept = 0;
                frac = (shift - 64 < 64) ? sig >> (shift - 64) : 0; /* < 2^53: never a tie */
                inexact = 1;
            }
            int up = 0;
            if (mode == GP_RNE)
                up = frac > 0x8000000000000000ull || (frac == 0x8000000000000000ull && (kept & 1u));
            else if (mode == GP_STOCHASTIC)
                up = rbits < (uint32_t)(frac >> 32);
            kept += (uint64_t)up;
            if (kept >> i.p) {                  /* carried into the next binade */
                kept >>= 1;
                q += 1;
            }
            uint64_t half = 1ull << (i.p - 1);
            uint64_t mag = kept < half ? kept : ((uint64_t)(q - qmin) << (i.p - 1)) + kept;
            if (mag > i.maxfin) {
                flags |= GP_EV_OVERFLOW | GP_EV_INEXACT;
                mag = mode == GP_RTZ ? i.maxfin : (i.inf ? i.inf : (i.qnan ? i.qnan : i.maxfin));
            } else if (inexact) {
                flags |= GP_EV_INEXACT;
                if (X < i.emin)
                    flags |= GP_EV_UNDERFLOW;
            }
            out = sign | (uint32_t)mag;
        }
    }
    if (ev)
        *ev |= flags;
    return out;
}
/* gp_fmt_round_info on format f's description. */
GP_ARITH uint32_t gp_fmt_from_f64_bits(gp_format f, uint64_t u, gp_rmode mode,
                                       uint32_t rbits, int ftz, unsigned *ev)
{
    return gp_fmt_round_info(gp_fmt_get(f), u, mode, rbits, ftz, ev);
}

/* gp_fmt_from_f64_bits(f, u, GP_RNE, 0, ftz, ev) with a fast path for fp32, bf16 and fp16:
 * a finite u whose magnitude lies in the format's normal range is rounded to nearest even
 * on the bits (adding half an ulp minus one plus the lowest kept bit carries exactly when
 * the discarded part is above the tie, or at the tie with an odd kept part; a carry into
 * the exponent field is the next binade) and rebiased; the only event is INEXACT. A
 * result past the largest finite value, and every other input, takes the general routine.
 * Equal to it on every input (tests/test_accum.c: every class, ties, binade edges). */
GP_ARITH uint32_t gp_fmt_from_f64_rne(gp_format f, uint64_t u, int ftz, unsigned *ev)
{
    if (f == GP_FP32 || f == GP_BF16 || f == GP_FP16) {
        gp_fmt_info i = gp_fmt_get(f);
        uint64_t a = u & 0x7fffffffffffffffull;
        int X = (int)(a >> 52) - 1023;          /* |x| in [2^X, 2^(X+1)) for normal x */
        if (X >= i.emin && X <= i.emax) {       /* a normal result, unless it overflows */
            int d = 53 - i.p;                   /* discarded bits */
            uint64_t low = a & ((1ull << d) - 1u);
            uint64_t r = (a + ((1ull << (d - 1)) - 1u) + ((a >> d) & 1u)) >> d;
            uint64_t mag = r - ((uint64_t)(1023 + i.emin - 1) << (i.p - 1));
            if (mag <= i.maxfin) {
                if (ev && low)
                    *ev |= GP_EV_INEXACT;
                return (uint32_t)(u >> 63) << (i.width - 1) | (uint32_t)mag;
            }
        }
    }
    return gp_fmt_from_f64_bits(f, u, GP_RNE, 0, ftz, ev);
}

/* Convenience forms of the two routines above on float/double values. */
GP_ARITH uint32_t gp_fmt_from_f64(gp_format f, double x, gp_rmode mode, uint32_t rbits,
                                  int ftz, unsigned *ev)
{
    return gp_fmt_from_f64_bits(f, gp_f64_bits(x), mode, rbits, ftz, ev);
}
/* From binary32 bits: widened by a bit move (signalling NaNs survive to be reported). */
GP_ARITH uint32_t gp_fmt_from_f32_bits(gp_format f, uint32_t x, gp_rmode mode, uint32_t rbits,
                                       int ftz, unsigned *ev)
{
    return gp_fmt_from_f64_bits(f, gp_fmt_to_f64_bits(GP_FP32, x), mode, rbits, ftz, ev);
}
GP_ARITH double gp_fmt_to_f64(gp_format f, uint32_t bits)
{
    return gp_f64_from_bits(gp_fmt_to_f64_bits(f, bits));
}
/* gp_fmt_to_f64, faster for fp32 and bf16: a non-NaN value converted as a float (exact),
 * a NaN as gp_fmt_to_f64 moves its bits (a float conversion would quiet a signalling NaN).
 * Equal to gp_fmt_to_f64 on every input (tests/test_accum.c checks every bf16 pattern and
 * fp32 samples of every class). */
GP_ARITH double gp_fmt_to_f64_fast(gp_format f, uint32_t bits)
{
    if (f == GP_FP32 && (bits & 0x7fffffffu) <= 0x7f800000u)
        return (double)gp_f32_from_bits(bits);
    if (f == GP_BF16 && (bits & 0x7fffu) <= 0x7f80u)
        return (double)gp_f32_from_bits(bits << 16);
    return gp_fmt_to_f64(f, bits);
}

/* Widen to binary32 bits: exact (every format here fits in fp32); NaNs keep payload
 * (with GP_HW_CONVERT a bf16/fp16 NaN's payload is the hardware's). */
GP_ARITH uint32_t gp_fmt_to_f32_bits(gp_format f, uint32_t bits)
{
    if (f == GP_FP32)
        return bits;
#ifndef GP_HW_CONVERT
    if (f == GP_BF16) /* bf16 is fp32's upper half: every pattern, NaN payloads included */
        return (bits & 0xffffu) << 16;
#endif
#ifdef GP_HW_CONVERT
    if (f == GP_BF16)
        return gp_f32_bits(__bfloat162float(__ushort_as_bfloat16((unsigned short)bits)));
    if (f == GP_FP16)
        return gp_f32_bits(__half2float(__ushort_as_half((unsigned short)bits)));
#endif
    uint64_t d = gp_fmt_to_f64_bits(f, bits);
    if (((d >> 52) & 0x7ffu) == 0x7ffu) /* inf or NaN: move the bits */
        return (uint32_t)(d >> 32 & 0x80000000u) | 0x7f800000u | (uint32_t)((d >> 29) & 0x7fffffu);
    return gp_f32_bits((float)gp_f64_from_bits(d)); /* exact: value is an fp32 */
}

/* Does format f have a hardware conversion from fp32 here (see GP_HW_CONVERT)? A
 * constant once f is. */
GP_ARITH int gp_fmt_hw(gp_format f)
{
#ifdef GP_HW_CONVERT
    return f == GP_BF16 || f == GP_FP16;
#else
    (void)f;
    return 0;
#endif
}

/* The float x stored in format f rounded to nearest even (rtz non-zero: toward zero),
 * no FTZ, no events: gp_fmt_from_f32_bits(f, bits of x, mode, 0, 0, NULL), by the
 * hardware's conversion where gp_fmt_hw(f) (same bits but for a NaN's payload).
 * fp32: x itself (a NaN as it is). */
GP_ARITH uint32_t gp_fmt_store_f32(gp_format f, float x, int rtz)
{
    if (f == GP_FP32)
        return gp_f32_bits(x);
#ifdef GP_HW_CONVERT
    if (f == GP_BF16)
        return __bfloat16_as_ushort(rtz ? __float2bfloat16_rz(x) : __float2bfloat16_rn(x));
    if (f == GP_FP16)
        return __half_as_ushort(rtz ? __float2half_rz(x) : __float2half_rn(x));
#endif
    return gp_fmt_from_f32_bits(f, gp_f32_bits(x), rtz ? GP_RTZ : GP_RNE, 0, 0, (unsigned *)0);
}

/* Do two results of format f agree? Equal bits, or both NaN: NaN bit patterns may
 * differ between implementations (x86 propagates the first operand's NaN, and a
 * compiler may commute an addition), so only NaN-ness is compared. */
GP_ARITH int gp_fmt_agree(gp_format f, uint32_t a, uint32_t b)
{
    return a == b || (gp_fmt_isnan(f, a) && gp_fmt_isnan(f, b));
}

/* fp32 bits -> bf16 bits, round to nearest even, no FTZ, no events: the fast form of
 * gp_fmt_from_f32_bits(GP_BF16, u, GP_RNE, 0, 0, NULL), equal to it on every input
 * (tests/test_accum.c checks). Adding 0x7fff plus the lowest kept bit carries into the
 * kept bits exactly when the discarded half is above the tie, or at the tie with an odd
 * kept part; overflow carries into the exponent and gives inf. */
GP_ARITH uint32_t gp_bf16_rne_from_f32_bits(uint32_t u)
{
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x40u; /* NaN: quiet, sign and top payload kept */
    return (u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded; /* branch-free: vectorises */
}

/* gp_fmt_from_f32_bits(f, u, GP_RNE, 0, 0, NULL), with bf16's fast form above (equal on
 * every input). */
GP_ARITH uint32_t gp_fmt_rne_from_f32_bits(gp_format f, uint32_t u)
{
    return f == GP_BF16 ? gp_bf16_rne_from_f32_bits(u) : gp_fmt_from_f32_bits(f, u, GP_RNE, 0, 0, (unsigned *)0);
}

/* The taxonomy's underflow (DESIGN.md §1), judged on a stored result: a non-zero exact
 * value was stored as zero, or as a subnormal that kept fewer than half of the
 * format's p significant bits. `exact_nonzero` and `inexact` describe the rounding. */
GP_ARITH int gp_fmt_underflow_loss(gp_format f, uint32_t bits, int exact_nonzero, int inexact)
{
    gp_fmt_info i = gp_fmt_get(f);
    uint32_t mag = bits & ((1u << (i.width - 1)) - 1u);
    if (!exact_nonzero || !inexact)
        return 0;
    if (mag == 0)
        return 1;
    if (mag >= (1u << (i.p - 1)))
        return 0; /* normal */
    return 2 * (64 - GP_CLZ64((uint64_t)mag)) < i.p; /* 2 * significant bits < p */
}

/* Typed one-field values, so a bf16 never silently becomes a float. Each type T
 * has T_from_f32 / T_from_f64 (rounding as gp_fmt_from_f64_bits) and T_to_f32 /
 * T_to_f64 (exact widening). */
#define GP_DEFINE_TYPED_FORMAT(T, FMT, STORE)                                                   \
    typedef struct { STORE bits; } T;                                                           \
    GP_ARITH T T##_from_f64(double x, gp_rmode mode, uint32_t rbits, int ftz, unsigned *ev)    \
    {                                                                                           \
        T v; v.bits = (STORE)gp_fmt_from_f64(FMT, x, mode, rbits, ftz, ev); return v;          \
    }                                                                                           \
    GP_ARITH T T##_from_f32(float x, gp_rmode mode, uint32_t rbits, int ftz, unsigned *ev)     \
    {                                                                                           \
        T v; v.bits = (STORE)gp_fmt_from_f32_bits(FMT, gp_f32_bits(x), mode, rbits, ftz, ev);  \
        return v;                                                                               \
    }                                                                                           \
    GP_ARITH double T##_to_f64(T v) { return gp_fmt_to_f64(FMT, v.bits); }                     \
    GP_ARITH float T##_to_f32(T v) { return gp_f32_from_bits(gp_fmt_to_f32_bits(FMT, v.bits)); }

GP_DEFINE_TYPED_FORMAT(gp_bf16, GP_BF16, uint16_t)
GP_DEFINE_TYPED_FORMAT(gp_fp16, GP_FP16, uint16_t)
GP_DEFINE_TYPED_FORMAT(gp_e4m3, GP_FP8_E4M3, uint8_t)
GP_DEFINE_TYPED_FORMAT(gp_e5m2, GP_FP8_E5M2, uint8_t)
GP_DEFINE_TYPED_FORMAT(gp_fp32, GP_FP32, uint32_t)

#endif
