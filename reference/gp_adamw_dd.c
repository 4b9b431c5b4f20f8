/* gp_adamw_dd.c — see gp_adamw_dd.h (the DD operations, with their error bounds, are
 * there). Built with -ffp-contract=off (every fma is written out) and -O3. */
#include "gp_adamw_dd.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <mpfr.h>

#include "gp_mpfr_env.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(GP_ADAMW_DD_PORTABLE)
#define GP_ADAMW_DD_HAVE_X86 1
#include <x86intrin.h>
#endif

/* ---- scalars ---- */

/* The DD nearest x: hi = RN(x), lo = RN(x - hi) (x - hi is exact at the precision of x,
 * which is above 106 bits); |x - (hi + lo)| <= u |x - hi| <= u^2 |x|. */
static gp_dd dd_from_mpfr(mpfr_srcptr x, mpfr_ptr tmp)
{
    gp_dd r;
    r.hi = mpfr_get_d(x, MPFR_RNDN);
    mpfr_sub_d(tmp, x, r.hi, MPFR_RNDN);
    r.lo = mpfr_get_d(tmp, MPFR_RNDN);
    return r;
}

gp_adamw_dd_scalars gp_adamw_dd_scalars_make(double lr, double beta1, double beta2, double eps,
                                             double weight_decay, long t)
{
    gp_mpfr_env saved;
    gp_mpfr_env_enter(&saved);
    mpfr_t a, b;
    mpfr_inits2(GP_ADAMW_DD_SCALAR_PREC, a, b, (mpfr_ptr)0);
    gp_adamw_dd_scalars s;

    /* 1 - lr*wd: the product is exact (106 bits), the difference rounded once */
    mpfr_set_d(a, lr, MPFR_RNDN);
    mpfr_mul_d(a, a, weight_decay, MPFR_RNDN);
    mpfr_ui_sub(a, 1, a, MPFR_RNDN);
    s.decay = dd_from_mpfr(a, b);
    s.has_decay = !(s.decay.hi == 1.0 && s.decay.lo == 0.0);

    s.beta1 = beta1;
    s.beta2 = beta2;
    mpfr_set_d(a, beta1, MPFR_RNDN);
    mpfr_ui_sub(a, 1, a, MPFR_RNDN); /* exact */
    s.one_m_beta1 = dd_from_mpfr(a, b);
    mpfr_set_d(a, beta2, MPFR_RNDN);
    mpfr_ui_sub(a, 1, a, MPFR_RNDN); /* exact */
    s.one_m_beta2 = dd_from_mpfr(a, b);

    /* -(lr / (1 - beta1^t)): the power correctly rounded, 1 - beta^t >= 2^-53 loses at
     * most 53 bits: relative error <= 2^-200 before the DD rounding */
    mpfr_set_d(a, beta1, MPFR_RNDN);
    mpfr_pow_ui(a, a, (unsigned long)t, MPFR_RNDN);
    mpfr_ui_sub(a, 1, a, MPFR_RNDN);
    mpfr_set_d(b, lr, MPFR_RNDN);
    mpfr_div(a, b, a, MPFR_RNDN);
    mpfr_neg(a, a, MPFR_RNDN);
    s.neg_step = dd_from_mpfr(a, b);

    /* 1 / sqrt(1 - beta2^t) */
    mpfr_set_d(a, beta2, MPFR_RNDN);
    mpfr_pow_ui(a, a, (unsigned long)t, MPFR_RNDN);
    mpfr_ui_sub(a, 1, a, MPFR_RNDN);
    mpfr_rec_sqrt(a, a, MPFR_RNDN);
    s.inv_sqrt_bc2 = dd_from_mpfr(a, b);

    s.eps = eps;
    mpfr_clears(a, b, (mpfr_ptr)0);
    gp_mpfr_env_leave(&saved);
    return s;
}

/* ---- state ---- */

int gp_adamw_dd_state_alloc(gp_adamw_dd_state *st, size_t n)
{
    st->n = 0;
    st->w_hi = n <= SIZE_MAX / (6 * sizeof(double)) ? calloc(6 * (n ? n : 1), sizeof(double)) : NULL;
    if (!st->w_hi) {
        st->w_lo = st->m_hi = st->m_lo = st->v_hi = st->v_lo = NULL;
        return -1;
    }
    st->n = n;
    st->w_lo = st->w_hi + n;
    st->m_hi = st->w_lo + n;
    st->m_lo = st->m_hi + n;
    st->v_hi = st->m_lo + n;
    st->v_lo = st->v_hi + n;
    return 0;
}

void gp_adamw_dd_state_free(gp_adamw_dd_state *st)
{
    free(st->w_hi);
    st->n = 0;
    st->w_hi = st->w_lo = st->m_hi = st->m_lo = st->v_hi = st->v_lo = NULL;
}

void gp_adamw_dd_state_set(gp_adamw_dd_state *st, size_t i, double w0)
{
    gp_adamw_dd_state_set_mv(st, i, w0, 0.0, 0.0);
}

void gp_adamw_dd_state_set_mv(gp_adamw_dd_state *st, size_t i, double w0, double m0, double v0)
{
    st->w_hi[i] = w0;
    st->w_lo[i] = 0.0;
    st->m_hi[i] = m0;
    st->m_lo[i] = 0.0;
    st->v_hi[i] = v0;
    st->v_lo[i] = 0.0;
}

void gp_adamw_dd_state_get(const gp_adamw_dd_state *st, size_t i, double *w, double *m, double *v)
{
    if (w)
        *w = st->w_hi[i];
    if (m)
        *m = st->m_hi[i];
    if (v)
        *v = st->v_hi[i];
}

/* ---- the clipping norm ---- */

/* The lanes of gp_dd_sumsq_add, each a chain of gp_dd_sumsq_step (gp_adamw_dd.h): the
 * loop over the lanes is the same operations on independent values, which the compiler
 * may put in vector registers without changing a bit; the chains overlap instead of
 * waiting for one another. */
GP_DD_CLONES static gp_dd gp_dd_sumsq_add_clones(gp_dd acc, const double *x, size_t n)
{
    enum { L = GP_DD_SUMSQ_LANES };
    double hi[L], lo[L];
    for (int l = 0; l < L; l++)
        hi[l] = lo[l] = 0.0;
    size_t i = 0;
    for (; n - i >= L; i += L)
        for (int l = 0; l < L; l++) {
            gp_dd a = gp_dd_sumsq_step((gp_dd){hi[l], lo[l]}, x[i + l]);
            hi[l] = a.hi;
            lo[l] = a.lo;
        }
    for (int l = 0; i + (size_t)l < n; l++) {
        gp_dd a = gp_dd_sumsq_step((gp_dd){hi[l], lo[l]}, x[i + (size_t)l]);
        hi[l] = a.hi;
        lo[l] = a.lo;
    }
    gp_dd t[L];
    for (int l = 0; l < L; l++)
        t[l] = (gp_dd){hi[l], lo[l]};
    for (int h = 1; h < L; h *= 2) /* the tree: lane l takes lane l + h */
        for (int l = 0; l < L; l += 2 * h)
            t[l] = gp_dd_add(t[l], t[l + h]);
    return gp_dd_add(acc, t[0]);
}

/* The exported symbol is a plain function: clang 14 gives callers in other files no
 * symbol for a cloned function (its dispatcher is local), so the clones stay static. */
gp_dd gp_dd_sumsq_add(gp_dd acc, const double *x, size_t n)
{
    return gp_dd_sumsq_add_clones(acc, x, n);
}

/* ---- the step ---- */

/* The loop of the step on elements [j0, n) of the arrays (offset by i0), one element at
 * a time: the portable path, and the tail of the vector ones. */
GP_DD_CLONES static void step_scalar(const gp_adamw_dd_scalars *s, gp_dd c1, gp_dd c2, double *restrict whi,
                                     double *restrict wlo, double *restrict mhi, double *restrict mlo,
                                     double *restrict vhi, double *restrict vlo, size_t j0, size_t n,
                                     const double *g, double *upd_out)
{
    const gp_adamw_dd_scalars sc = *s;
    for (size_t j = j0; j < n; j++) {
        gp_dd m = {mhi[j], mlo[j]}, v = {vhi[j], vlo[j]}, w = {whi[j], wlo[j]};
        gp_dd upd = gp_adamw_dd_element(&sc, c1, c2, g[j], &w, &m, &v);
        mhi[j] = m.hi;
        mlo[j] = m.lo;
        vhi[j] = v.hi;
        vlo[j] = v.lo;
        whi[j] = w.hi;
        wlo[j] = w.lo;
        if (upd_out)
            upd_out[j] = upd.hi;
    }
}

#ifdef GP_ADAMW_DD_HAVE_X86
#define GPV_NAME2(x, y) x##_##y
#define GPV_NAME1(x, y) GPV_NAME2(x, y)

/* AVX2 + FMA: four elements at a time. */
#define GPV __m256d
#define GPV_W 4
#define GPV_TARGET __attribute__((target("avx2,fma")))
#define GPV_NAME(x) GPV_NAME1(x, avx2)
#define GPV_SET1(d) _mm256_set1_pd(d)
#define GPV_LOAD(p) _mm256_loadu_pd(p)
#define GPV_STORE(p, x) _mm256_storeu_pd(p, x)
#define GPV_FMA(a, b, c) _mm256_fmadd_pd(a, b, c)
#define GPV_SQRT(x) _mm256_sqrt_pd(x)
#define GPV_KEEP_POS(x, y) _mm256_and_pd(_mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_GT_OQ), y)
#include "gp_adamw_dd_vec.h"
#undef GPV
#undef GPV_W
#undef GPV_TARGET
#undef GPV_NAME
#undef GPV_SET1
#undef GPV_LOAD
#undef GPV_STORE
#undef GPV_FMA
#undef GPV_SQRT
#undef GPV_KEEP_POS

/* AVX-512F + FMA: eight elements at a time. */
#define GPV __m512d
#define GPV_W 8
#define GPV_TARGET __attribute__((target("avx512f,avx2,fma")))
#define GPV_NAME(x) GPV_NAME1(x, avx512)
#define GPV_SET1(d) _mm512_set1_pd(d)
#define GPV_LOAD(p) _mm512_loadu_pd(p)
#define GPV_STORE(p, x) _mm512_storeu_pd(p, x)
#define GPV_FMA(a, b, c) _mm512_fmadd_pd(a, b, c)
#define GPV_SQRT(x) _mm512_sqrt_pd(x)
#define GPV_KEEP_POS(x, y) _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(x, _mm512_setzero_pd(), _CMP_GT_OQ), y)
#include "gp_adamw_dd_vec.h"
#undef GPV
#undef GPV_W
#undef GPV_TARGET
#undef GPV_NAME
#undef GPV_SET1
#undef GPV_LOAD
#undef GPV_STORE
#undef GPV_FMA
#undef GPV_SQRT
#undef GPV_KEEP_POS
#endif

int gp_adamw_dd_path_available(gp_adamw_dd_path path)
{
    switch (path) {
    case GP_ADAMW_DD_AUTO:
    case GP_ADAMW_DD_SCALAR:
        return 1;
#ifdef GP_ADAMW_DD_HAVE_X86
    case GP_ADAMW_DD_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case GP_ADAMW_DD_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    default:
        return 0;
    }
}

void gp_adamw_dd_step_path(gp_adamw_dd_path path, const gp_adamw_dd_scalars *s, gp_adamw_dd_state *st, size_t i0,
                           size_t n, const double *g, gp_dd gcoef, double *upd_out)
{
    gp_dd c1, c2; /* per call: (1 - beta1) c and (1 - beta2) c^2, exact when c == 1 */
    gp_adamw_dd_factors(s, gcoef, &c1, &c2);
    double *whi = st->w_hi + i0, *wlo = st->w_lo + i0;
    double *mhi = st->m_hi + i0, *mlo = st->m_lo + i0;
    double *vhi = st->v_hi + i0, *vlo = st->v_lo + i0;
    size_t j = 0;
#ifdef GP_ADAMW_DD_HAVE_X86
    if (path == GP_ADAMW_DD_AUTO)
        path = gp_adamw_dd_path_available(GP_ADAMW_DD_AVX512) ? GP_ADAMW_DD_AVX512
               : gp_adamw_dd_path_available(GP_ADAMW_DD_AVX2) ? GP_ADAMW_DD_AVX2
                                                               : GP_ADAMW_DD_SCALAR;
    else if (!gp_adamw_dd_path_available(path))
        path = GP_ADAMW_DD_SCALAR;
    if (path == GP_ADAMW_DD_AVX512)
        j = step_avx512(s, c1, c2, whi, wlo, mhi, mlo, vhi, vlo, n, g, upd_out);
    else if (path == GP_ADAMW_DD_AVX2)
        j = step_avx2(s, c1, c2, whi, wlo, mhi, mlo, vhi, vlo, n, g, upd_out);
#else
    (void)path;
#endif
    step_scalar(s, c1, c2, whi, wlo, mhi, mlo, vhi, vlo, j, n, g, upd_out);
}

void gp_adamw_dd_step(const gp_adamw_dd_scalars *s, gp_adamw_dd_state *st, size_t i0, size_t n, const double *g,
                      gp_dd gcoef, double *upd_out)
{
    gp_adamw_dd_step_path(GP_ADAMW_DD_AUTO, s, st, i0, n, g, gcoef, upd_out);
}
