/* gp_gen_simd.c — see gp_gen_simd.h. The inverse CDF's vector branch uses only IEEE
 * binary64 multiply, add, subtract and divide (round to nearest), in GSL's order, so each
 * lane rounds exactly as GSL's scalar code does (libgsl is built without FMA contraction,
 * and so is this file: -ffp-contract=off, explicit intrinsics). tests/test_gen.c checks it
 * bit for bit, and the Philox loop (kernels/cpu/gp_cpu_philox.c) too. */
#include "gp_gen_simd.h"

#include <gsl/gsl_cdf.h>
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GP_GEN_HAVE_X86 1
#endif

/* Wichura (1988), AS241 PPND16: the central region's rational function in r = 0.180625 - q^2,
 * numerator A0..A7 and denominator B0..B7 (B0 = 1), as the paper and GSL's cdf/gaussinv.c give them. */
#define PINV_CENTRAL 0.425
#define PINV_R0 0.180625
static const double pinv_a[8] = {3.387132872796366608,  133.14166789178437745, 1971.5909503065514427,
                                 13731.693765509461125, 45921.953931549871457, 67265.770927008700853,
                                 33430.575583588128105, 2509.0809287301226727};
static const double pinv_b[8] = {1.0,
                                 42.313330701600911252,
                                 687.1870074920579083,
                                 5394.1960214247511077,
                                 21213.794301586595867,
                                 39307.89580009271061,
                                 28729.085735721942674,
                                 5226.495278852854561};

/* Wichura's intermediate (r <= 5, in r - 1.6) and tail (r > 5, in r - 5) rational
 * functions, r = sqrt(-log(min(p, 1 - p))), as GSL's cdf/gaussinv.c gives them. */
static const double pinv_ai[8] = {1.42343711074968357734,  4.6303378461565452959,   5.7694972214606914055,
                                  3.64784832476320460504,  1.27045825245236838258,  0.24178072517745061177,
                                  0.0227238449892691845833, 7.7454501427834140764e-4};
static const double pinv_bi[8] = {1.0,
                                  2.05319162663775882187,
                                  1.6763848301838038494,
                                  0.68976733498510000455,
                                  0.14810397642748007459,
                                  0.0151986665636164571966,
                                  5.475938084995344946e-4,
                                  1.05075007164441684324e-9};
static const double pinv_at[8] = {6.6579046435011037772,   5.4637849111641143699,    1.7848265399172913358,
                                  0.29656057182850489123,  0.026532189526576123093,  0.0012426609473880784386,
                                  2.71155556874348757815e-5, 2.01033439929228813265e-7};
static const double pinv_bt[8] = {1.0,
                                  0.59983220655588793769,
                                  0.13692988092273580531,
                                  0.0148753612908506148525,
                                  7.868691311456132591e-4,
                                  1.8463183175100546818e-5,
                                  1.4215117583164458887e-7,
                                  2.04426310338993978564e-15};

/* The portable path: GSL for every input. */
static void pinv_portable(const double *p, size_t n, double *x)
{
    for (size_t j = 0; j < n; j++)
        x[j] = gsl_cdf_ugaussian_Pinv(p[j]);
}

/* The vector paths take PINV_CHUNK inputs at a time: the central branch in registers,
 * the positions of the other inputs listed (AVX-512: packed); of those, the ones in (0, 1) get
 * t = -log(pp) (libm's log, which GSL calls, or on the AVX-512 path the value libm's log
 * must return: neglog_avx512) and r = sqrt(t) and the rest of GSL's branch in registers;
 * 0, 1, NaN and inputs outside [0, 1] call GSL. */
#define PINV_CHUNK 256
typedef void pinv_tails_fn(const double *pv, const double *t, size_t m, double *x);

/* t[k] = -log(pp[k]) by libm, one call each. */
static void neglog_libm(const double *pp, size_t m, double *t)
{
    for (size_t k = 0; k < m; k++)
        t[k] = -log(pp[k]);
}

/* The AVX2 path's tails: the inputs at list[k] (cnt of them) gathered, libm's log. */
static void pinv_outside(const double *p, const uint16_t *list, size_t cnt, double *x, pinv_tails_fn *tails)
{
    double pv[PINV_CHUNK], pp[PINV_CHUNK], t[PINV_CHUNK], xr[PINV_CHUNK];
    uint16_t at[PINV_CHUNK];
    size_t m = 0;
    for (size_t k = 0; k < cnt; k++) {
        double P = p[list[k]];
        if (P > 0.0 && P < 1.0) {
            pv[m] = P;
            pp[m] = P < 0.5 ? P : 1.0 - P;
            at[m++] = list[k];
        } else {
            x[list[k]] = gsl_cdf_ugaussian_Pinv(P);
        }
    }
    if (m) {
        neglog_libm(pp, m, t);
        tails(pv, t, m, xr);
    }
    for (size_t k = 0; k < m; k++)
        x[at[k]] = xr[k];
}

#ifdef GP_GEN_HAVE_X86
/* GSL's rat_eval(a, 8, b, 8, z) per lane: u and v by Horner from the top coefficient
 * (u = z*u + a[i], i = 6..0), then u / v. */
#define PINV_RAT512(a, b, z, out)                                                \
    do {                                                                         \
        __m512d u_ = _mm512_set1_pd((a)[7]), v_ = _mm512_set1_pd((b)[7]);        \
        _Pragma("GCC unroll 7") for (int i_ = 6; i_ >= 0; i_--) {                \
            u_ = _mm512_add_pd(_mm512_mul_pd((z), u_), _mm512_set1_pd((a)[i_])); \
            v_ = _mm512_add_pd(_mm512_mul_pd((z), v_), _mm512_set1_pd((b)[i_])); \
        }                                                                        \
        (out) = _mm512_div_pd(u_, v_);                                           \
    } while (0)
#define PINV_RAT256(a, b, z, out)                                                \
    do {                                                                         \
        __m256d u_ = _mm256_set1_pd((a)[7]), v_ = _mm256_set1_pd((b)[7]);        \
        _Pragma("GCC unroll 7") for (int i_ = 6; i_ >= 0; i_--) {                \
            u_ = _mm256_add_pd(_mm256_mul_pd((z), u_), _mm256_set1_pd((a)[i_])); \
            v_ = _mm256_add_pd(_mm256_mul_pd((z), v_), _mm256_set1_pd((b)[i_])); \
        }                                                                        \
        (out) = _mm256_div_pd(u_, v_);                                           \
    } while (0)

/* gp_neglog_block's AVX-512 path: 8 lanes at a time for x[k] normal in (0, 0.25) (the
 * tails give x < 0.075); other lanes, and lanes whose value is too close to a rounding
 * boundary to be sure of libm's, call libm.
 *
 * Why the value is libm's: each lane computes L = log(x) as y + z (y = L rounded to
 * nearest, z the exact rest) with |y + z - L| <= 0.02 ulp(y) (below), and keeps y only
 * when |z| <= 0.4 ulp(y) and y is not a power of two: then L lies within 0.42 ulp of y and
 * every other double at least 0.58 ulp from L, while glibc's log errs by at most 0.520 ulp
 * where |log x| > 2^-4 (0.519 with FMA: the bound derived in the comments of glibc's
 * sysdeps/ieee754/dbl-64/e_log.c, glibc >= 2.28, as Debian 12 ships; before 2.28 glibc's
 * log was correctly rounded): the only double libm can return is y. About 20% of lanes
 * (|z| roughly uniform in [0, 0.5] ulp) fall back to libm. tests/test_gen.c compares
 * gp_neglog_block with libm's log on the generator's grid, on every binade of (0, 0.25),
 * around the reduction's boundaries and on the inputs that take the fallback.
 *
 * The evaluation: x = 2^e m with m in [sqrt(1/2), sqrt(2)], so e <= -2 and |L| >= 1.04,
 * ulp(y) >= 2^-52; log(m) = 2 atanh(s), s = (m - 1)/(m + 1), |s| <= 0.1716:
 * - m - 1 is exact (Sterbenz), m + 1 = qh + ql exactly (Fast2Sum), s = sh + sl with
 *   sh = (m - 1)/qh rounded, its remainder exact by an FMA, sl = (remainder - sh ql)
 *   times rcp14(qh) (relative error 2^-14 on a term below 2^-52 |s|): |s - sh - sl| <
 *   2^-65 |s| < 2^-13 ulp(y);
 * - 2 atanh(s) = 2s + T, T = 2 s^3 sum_k s^(2k)/(2k+3), k < 12 (the rest is below
 *   2 |s|^27/27 / (1 - s^2) < 2^-70), evaluated in binary64 from sh: relative error
 *   <= 6 2^-53 (s^2, Horner's FMAs, the coefficients, two products, sh for s), so
 *   |error of T| <= 2^-50.4 |T| <= 2^-50.4 * 0.0035 < 2^-58.5 = 2^-6.5 ulp(y);
 * - e ln2 = e LN2_HI + e LN2_LO with e LN2_HI exact (LN2_HI has 32 significant bits)
 *   and |ln2 - LN2_HI - LN2_LO| < 2^-85, so the error is below 2^-74;
 * - hi + lo1 = e LN2_HI + 2 sh exactly (Fast2Sum: |e LN2_HI| >= 1.38 > |2 sh|); lo =
 *   lo1 + (e LN2_LO + (2 sl + T)), three roundings of values below 2^-8, each below
 *   2^-61 = 2^-9 ulp(y); y + z = hi + lo exactly (Fast2Sum).
 * In all |y + z - L| < (2^-6.5 + 3 2^-9 + 2^-13 + 2^-20) ulp(y) < 0.02 ulp(y). */
#define NEGLOG_TERMS 12
#define NEGLOG_LN2_HI 0x1.62e42feep-1 /* ln 2 to 32 significant bits */
#define NEGLOG_LN2_LO 0x1.a39ef35793c76p-33 /* ln 2 - NEGLOG_LN2_HI, rounded */
#define NEGLOG_SQRT2 0x1.6a09e667f3bcdp0
#define NEGLOG_KEEP 0.4 /* |z| <= 0.4 ulp(y) */
#define NEGLOG_LIST 256
static const double neglog_c[NEGLOG_TERMS] = {1.0 / 3,  1.0 / 5,  1.0 / 7,  1.0 / 9,  1.0 / 11, 1.0 / 13,
                                              1.0 / 15, 1.0 / 17, 1.0 / 19, 1.0 / 21, 1.0 / 23, 1.0 / 25};

__attribute__((target("avx512f"))) static void neglog_avx512(const double *x, size_t m, double *t)
{
    const __m512i expmask = _mm512_set1_epi64(0x7ff), mant = _mm512_set1_epi64(0x000fffffffffffffll);
    const __m512i one_exp = _mm512_set1_epi64(0x3ff0000000000000ll);
    const __m512d one = _mm512_set1_pd(1.0);
    const __m512i iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    uint64_t list[NEGLOG_LIST]; /* the lanes left to libm, called in batches */
    size_t cnt = 0;
    for (size_t k = 0; k < m; k += 8) {
        __mmask8 in = (__mmask8)(m - k >= 8 ? 0xff : (1u << (m - k)) - 1);
        __m512d xv = _mm512_mask_loadu_pd(_mm512_set1_pd(0.125), in, x + k);
        __m512i b = _mm512_castpd_si512(xv);
        __m512i ef = _mm512_and_epi64(_mm512_srli_epi64(b, 52), expmask); /* sign 0 below 0.25 */
        __mmask8 ok = _mm512_cmp_pd_mask(xv, _mm512_set1_pd(0.25), _CMP_LT_OQ) &
                      _mm512_cmp_pd_mask(xv, _mm512_set1_pd(0x1p-1022), _CMP_GE_OQ);
        __m512d mv = _mm512_castsi512_pd(_mm512_or_epi64(_mm512_and_epi64(b, mant), one_exp)); /* [1, 2) */
        __mmask8 big = _mm512_cmp_pd_mask(mv, _mm512_set1_pd(NEGLOG_SQRT2), _CMP_GT_OQ);
        mv = _mm512_mask_mul_pd(mv, big, mv, _mm512_set1_pd(0.5));
        __m512i e = _mm512_sub_epi64(ef, _mm512_set1_epi64(1023));
        e = _mm512_mask_add_epi64(e, big, e, _mm512_set1_epi64(1));
        __m512d d = _mm512_sub_pd(mv, one);
        __m512d qh = _mm512_add_pd(one, mv);
        __m512d ql = _mm512_sub_pd(mv, _mm512_sub_pd(qh, one));
        __m512d sh = _mm512_div_pd(d, qh);
        __m512d rem = _mm512_fnmadd_pd(sh, qh, d); /* d - sh qh, exact */
        __m512d sl = _mm512_mul_pd(_mm512_fnmadd_pd(sh, ql, rem), _mm512_rcp14_pd(qh)); /* 2^-14 of a 2^-53 term */
        __m512d s2 = _mm512_mul_pd(sh, sh);
        __m512d pv = _mm512_set1_pd(neglog_c[NEGLOG_TERMS - 1]);
        for (int i = NEGLOG_TERMS - 2; i >= 0; i--)
            pv = _mm512_fmadd_pd(pv, s2, _mm512_set1_pd(neglog_c[i]));
        __m512d B = _mm512_add_pd(sh, sh);
        __m512d T = _mm512_mul_pd(_mm512_mul_pd(B, s2), pv);
        __m512d edv = _mm512_cvtepi32_pd(_mm512_cvtepi64_epi32(e)); /* |e| <= 1022 */
        __m512d A = _mm512_mul_pd(edv, _mm512_set1_pd(NEGLOG_LN2_HI));
        __m512d hi = _mm512_add_pd(A, B);
        __m512d lo1 = _mm512_sub_pd(B, _mm512_sub_pd(hi, A));
        __m512d lo = _mm512_add_pd(lo1, _mm512_add_pd(_mm512_mul_pd(edv, _mm512_set1_pd(NEGLOG_LN2_LO)),
                                                      _mm512_add_pd(_mm512_add_pd(sl, sl), T)));
        __m512d y = _mm512_add_pd(hi, lo);
        __m512d z = _mm512_sub_pd(lo, _mm512_sub_pd(y, hi));
        /* ulp(y) = 2^(E - 52) for y's biased exponent E (|y| >= 1: E >= 1023) */
        __m512i yb = _mm512_castpd_si512(y);
        __m512d ulp = _mm512_castsi512_pd(_mm512_slli_epi64(
            _mm512_sub_epi64(_mm512_and_epi64(_mm512_srli_epi64(yb, 52), expmask), _mm512_set1_epi64(52)), 52));
        ok &= _mm512_cmp_pd_mask(_mm512_abs_pd(z), _mm512_mul_pd(ulp, _mm512_set1_pd(NEGLOG_KEEP)), _CMP_LE_OQ);
        ok &= _mm512_test_epi64_mask(yb, mant); /* not a power of two */
        _mm512_mask_storeu_pd(t + k, in, _mm512_castsi512_pd(_mm512_xor_epi64(yb, _mm512_set1_epi64(
                                                                 (long long)0x8000000000000000ull))));
        _mm512_storeu_si512((void *)(list + cnt), _mm512_maskz_compress_epi64(
                                                       in & ~ok, _mm512_add_epi64(_mm512_set1_epi64((long long)k), iota)));
        cnt += (size_t)__builtin_popcount(in & ~ok);
        /* libm in batches: no registers spilled around each call, the upper halves clean (gp_bench (l)) */
        if (cnt > NEGLOG_LIST - 8 || k + 8 >= m) {
            _mm256_zeroupper();
            for (size_t i = 0; i < cnt; i++)
                t[list[i]] = -log(x[list[i]]);
            cnt = 0;
        }
    }
}

/* GSL past the central branch for P = pv[k] in (0, 1), t[k] = -log(pp): r = sqrt(t);
 * intermediate(r) if r <= 5 else tail(r); negated (sign flip) if P < 0.5. */
__attribute__((target("avx512f"))) static void tails_avx512(const double *pv, const double *t, size_t m, double *x)
{
    const __m512i sign = _mm512_set1_epi64((long long)0x8000000000000000ull);
    for (size_t k = 0; k < m; k += 8) {
        __mmask8 in = (__mmask8)(m - k >= 8 ? 0xff : (1u << (m - k)) - 1);
        __m512d r = _mm512_sqrt_pd(_mm512_maskz_loadu_pd(in, t + k)), xi, xt;
        PINV_RAT512(pinv_ai, pinv_bi, _mm512_sub_pd(r, _mm512_set1_pd(1.6)), xi);
        __mmask8 mid = _mm512_cmp_pd_mask(r, _mm512_set1_pd(5.0), _CMP_LE_OQ);
        if ((mid & in) != in) {
            PINV_RAT512(pinv_at, pinv_bt, _mm512_sub_pd(r, _mm512_set1_pd(5.0)), xt);
            xi = _mm512_mask_blend_pd(mid, xt, xi);
        }
        __mmask8 neg = _mm512_cmp_pd_mask(_mm512_maskz_loadu_pd(in, pv + k), _mm512_set1_pd(0.5), _CMP_LT_OQ);
        __m512i b = _mm512_castpd_si512(xi);
        _mm512_mask_storeu_pd(x + k, in, _mm512_castsi512_pd(_mm512_mask_xor_epi64(b, neg, b, sign)));
    }
    _mm256_zeroupper();
}

__attribute__((target("avx2"))) static void tails_avx2(const double *pv, const double *t, size_t m, double *x)
{
    const __m256d sign = _mm256_set1_pd(-0.0);
    for (size_t k = 0; k < m; k += 4) {
        double tp[4] = {0, 0, 0, 0}, pp[4] = {0, 0, 0, 0}, xo[4];
        size_t c = m - k < 4 ? m - k : 4;
        memcpy(tp, t + k, c * sizeof *tp);
        memcpy(pp, pv + k, c * sizeof *pp);
        __m256d r = _mm256_sqrt_pd(_mm256_loadu_pd(tp)), xi, xt;
        PINV_RAT256(pinv_ai, pinv_bi, _mm256_sub_pd(r, _mm256_set1_pd(1.6)), xi);
        __m256d mid = _mm256_cmp_pd(r, _mm256_set1_pd(5.0), _CMP_LE_OQ);
        if (_mm256_movemask_pd(mid) != 0xf) {
            PINV_RAT256(pinv_at, pinv_bt, _mm256_sub_pd(r, _mm256_set1_pd(5.0)), xt);
            xi = _mm256_blendv_pd(xt, xi, mid);
        }
        __m256d neg = _mm256_cmp_pd(_mm256_loadu_pd(pp), _mm256_set1_pd(0.5), _CMP_LT_OQ);
        _mm256_storeu_pd(xo, _mm256_xor_pd(xi, _mm256_and_pd(neg, sign)));
        memcpy(x + k, xo, c * sizeof *xo);
    }
    _mm256_zeroupper();
}

/* GSL's small(q) per lane, q = p - 0.5: r = 0.180625 - q*q, x = q * rat_eval(r).
 * Lanes outside the central branch compute values that the tails then replace. */
__attribute__((target("avx512f"))) static void pinv_avx512(const double *p, size_t n, double *x)
{
    /* the tails of a chunk, packed by register compression: P, pp = min(P, 1 - P) as GSL
     * forms it, the position; 8 lanes of slack for the last full-register store */
    double pv[PINV_CHUNK + 8], pp[PINV_CHUNK + 8], t[PINV_CHUNK], xr[PINV_CHUNK];
    uint64_t at[PINV_CHUNK + 8];
    const __m512i iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    for (size_t c = 0; c < n; c += PINV_CHUNK) {
        size_t m = n - c < PINV_CHUNK ? n - c : PINV_CHUNK, cnt = 0;
        for (size_t j = 0; j < m; j += 8) {
            __mmask8 in = (__mmask8)(m - j >= 8 ? 0xff : (1u << (m - j)) - 1);
            __m512d P = _mm512_maskz_loadu_pd(in, p + c + j), y;
            __m512d q = _mm512_sub_pd(P, _mm512_set1_pd(0.5));
            __m512d r = _mm512_sub_pd(_mm512_set1_pd(PINV_R0), _mm512_mul_pd(q, q));
            PINV_RAT512(pinv_a, pinv_b, r, y);
            _mm512_mask_storeu_pd(x + c + j, in, _mm512_mul_pd(q, y));
            __mmask8 out = in & ~_mm512_cmp_pd_mask(_mm512_abs_pd(q), _mm512_set1_pd(PINV_CENTRAL), _CMP_LE_OQ);
            __mmask8 tail = out & _mm512_cmp_pd_mask(P, _mm512_setzero_pd(), _CMP_GT_OQ) &
                            _mm512_cmp_pd_mask(P, _mm512_set1_pd(1.0), _CMP_LT_OQ);
            for (unsigned odd = out & ~tail; odd; odd &= odd - 1) /* 0, 1, NaN, outside [0, 1]: GSL */
                x[c + j + (size_t)__builtin_ctz(odd)] = gsl_cdf_ugaussian_Pinv(p[c + j + (size_t)__builtin_ctz(odd)]);
            __mmask8 low = _mm512_cmp_pd_mask(P, _mm512_set1_pd(0.5), _CMP_LT_OQ);
            __m512d ppv = _mm512_mask_blend_pd(low, _mm512_sub_pd(_mm512_set1_pd(1.0), P), P);
            _mm512_storeu_pd(pv + cnt, _mm512_maskz_compress_pd(tail, P));
            _mm512_storeu_pd(pp + cnt, _mm512_maskz_compress_pd(tail, ppv));
            _mm512_storeu_si512((void *)(at + cnt),
                                _mm512_maskz_compress_epi64(tail, _mm512_add_epi64(_mm512_set1_epi64((long long)j), iota)));
            cnt += (size_t)__builtin_popcount(tail);
        }
        if (cnt) {
            neglog_avx512(pp, cnt, t);
            tails_avx512(pv, t, cnt, xr);
        }
        for (size_t k = 0; k < cnt; k++)
            x[c + at[k]] = xr[k];
    }
    _mm256_zeroupper();
}

__attribute__((target("avx2"))) static void pinv_avx2(const double *p, size_t n, double *x)
{
    uint16_t list[PINV_CHUNK + 8];
    const __m256d abs = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
    for (size_t c = 0; c < n; c += PINV_CHUNK) {
        size_t m = n - c < PINV_CHUNK ? n - c : PINV_CHUNK, cnt = 0;
        for (size_t j = 0; j < m; j += 4) {
            size_t k = m - j < 4 ? m - j : 4;
            double pin[4] = {0.5, 0.5, 0.5, 0.5}, xo[4]; /* the last few, padded */
            const double *src = p + c + j;
            double *dst = x + c + j;
            if (k < 4) {
                memcpy(pin, src, k * sizeof *pin);
                src = pin;
                dst = xo;
            }
            __m256d q = _mm256_sub_pd(_mm256_loadu_pd(src), _mm256_set1_pd(0.5)), y;
            __m256d r = _mm256_sub_pd(_mm256_set1_pd(PINV_R0), _mm256_mul_pd(q, q));
            PINV_RAT256(pinv_a, pinv_b, r, y);
            _mm256_storeu_pd(dst, _mm256_mul_pd(q, y));
            if (k < 4)
                memcpy(x + c + j, xo, k * sizeof *xo);
            __m256d central = _mm256_cmp_pd(_mm256_and_pd(q, abs), _mm256_set1_pd(PINV_CENTRAL), _CMP_LE_OQ);
            unsigned out = ~(unsigned)_mm256_movemask_pd(central) & ((1u << k) - 1);
            for (unsigned l = 0; l < 4; l++) { /* branch-free, as pinv_avx512 */
                list[cnt] = (uint16_t)(j + l);
                cnt += out >> l & 1;
            }
        }
        _mm256_zeroupper();
        pinv_outside(p + c, list, cnt, x + c, tails_avx2);
    }
}
#endif

void gp_neglog_block(gp_gen_path path, const double *x, size_t n, double *t)
{
    switch (gp_gen_path_resolve(path)) {
#ifdef GP_GEN_HAVE_X86
    case GP_GEN_AVX512: neglog_avx512(x, n, t); return;
#endif
    default: neglog_libm(x, n, t); return;
    }
}

void gp_ugaussian_pinv_block(gp_gen_path path, const double *p, size_t n, double *x)
{
    switch (gp_gen_path_resolve(path)) {
#ifdef GP_GEN_HAVE_X86
    case GP_GEN_AVX512: pinv_avx512(p, n, x); return;
    case GP_GEN_AVX2: pinv_avx2(p, n, x); return;
#endif
    default: pinv_portable(p, n, x); return;
    }
}
