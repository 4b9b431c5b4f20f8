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
 * the positions of the other inputs listed; of those, the ones in (0, 1) get
 * t = -log(pp) here (libm's log, which GSL calls, one call each) and r = sqrt(t) and
 * the rest of GSL's branch in registers; 0, 1, NaN and inputs outside [0, 1] call GSL. */
#define PINV_CHUNK 256
typedef void pinv_tails_fn(const double *pv, const double *t, size_t m, double *x);

static void pinv_outside(const double *p, const uint16_t *list, size_t cnt, double *x, pinv_tails_fn *tails)
{
    double pv[PINV_CHUNK], t[PINV_CHUNK], xr[PINV_CHUNK];
    uint16_t at[PINV_CHUNK];
    size_t m = 0;
    for (size_t k = 0; k < cnt; k++) {
        double P = p[list[k]];
        if (P > 0.0 && P < 1.0) {
            pv[m] = P;
            t[m] = -log(P < 0.5 ? P : 1.0 - P);
            at[m++] = list[k];
        } else {
            x[list[k]] = gsl_cdf_ugaussian_Pinv(P);
        }
    }
    if (m)
        tails(pv, t, m, xr);
    for (size_t k = 0; k < m; k++)
        x[at[k]] = xr[k];
}

#ifdef GP_GEN_HAVE_X86
/* GSL's rat_eval(a, 8, b, 8, z) per lane: u and v by Horner from the top coefficient
 * (u = z*u + a[i], i = 6..0), then u / v. */
#define PINV_RAT512(a, b, z, out)                                                \
    do {                                                                         \
        __m512d u_ = _mm512_set1_pd((a)[7]), v_ = _mm512_set1_pd((b)[7]);        \
        for (int i_ = 6; i_ >= 0; i_--) {                                        \
            u_ = _mm512_add_pd(_mm512_mul_pd((z), u_), _mm512_set1_pd((a)[i_])); \
            v_ = _mm512_add_pd(_mm512_mul_pd((z), v_), _mm512_set1_pd((b)[i_])); \
        }                                                                        \
        (out) = _mm512_div_pd(u_, v_);                                           \
    } while (0)
#define PINV_RAT256(a, b, z, out)                                                \
    do {                                                                         \
        __m256d u_ = _mm256_set1_pd((a)[7]), v_ = _mm256_set1_pd((b)[7]);        \
        for (int i_ = 6; i_ >= 0; i_--) {                                        \
            u_ = _mm256_add_pd(_mm256_mul_pd((z), u_), _mm256_set1_pd((a)[i_])); \
            v_ = _mm256_add_pd(_mm256_mul_pd((z), v_), _mm256_set1_pd((b)[i_])); \
        }                                                                        \
        (out) = _mm256_div_pd(u_, v_);                                           \
    } while (0)

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
 * Lanes outside the central branch compute values that pinv_outside replaces. */
__attribute__((target("avx512f"))) static void pinv_avx512(const double *p, size_t n, double *x)
{
    uint16_t list[PINV_CHUNK + 8];
    for (size_t c = 0; c < n; c += PINV_CHUNK) {
        size_t m = n - c < PINV_CHUNK ? n - c : PINV_CHUNK, cnt = 0;
        for (size_t j = 0; j < m; j += 8) {
            __mmask8 in = (__mmask8)(m - j >= 8 ? 0xff : (1u << (m - j)) - 1);
            __m512d q = _mm512_sub_pd(_mm512_maskz_loadu_pd(in, p + c + j), _mm512_set1_pd(0.5)), y;
            __m512d r = _mm512_sub_pd(_mm512_set1_pd(PINV_R0), _mm512_mul_pd(q, q));
            PINV_RAT512(pinv_a, pinv_b, r, y);
            _mm512_mask_storeu_pd(x + c + j, in, _mm512_mul_pd(q, y));
            unsigned out = in & ~(unsigned)_mm512_cmp_pd_mask(_mm512_abs_pd(q), _mm512_set1_pd(PINV_CENTRAL), _CMP_LE_OQ);
            for (unsigned l = 0; l < 8; l++) { /* branch-free: the lanes come in at random */
                list[cnt] = (uint16_t)(j + l);
                cnt += out >> l & 1;
            }
        }
        _mm256_zeroupper();
        pinv_outside(p + c, list, cnt, x + c, tails_avx512);
    }
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
