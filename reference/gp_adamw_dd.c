/* gp_adamw_dd.c — see gp_adamw_dd.h (the DD operations, with their error bounds, are
 * there). Built with -ffp-contract=off (every fma is written out) and -O3. */
#include "gp_adamw_dd.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <mpfr.h>

#include "gp_mpfr_env.h"

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
    st->w_hi[i] = w0;
    st->w_lo[i] = 0.0;
    st->m_hi[i] = st->m_lo[i] = 0.0;
    st->v_hi[i] = st->v_lo[i] = 0.0;
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

/* ---- the step ---- */

GP_DD_CLONES void gp_adamw_dd_step(const gp_adamw_dd_scalars *s, gp_adamw_dd_state *st, size_t i0, size_t n,
                                   const double *g, gp_dd gcoef, double *upd_out)
{
    gp_dd c1, c2; /* per call: (1 - beta1) c and (1 - beta2) c^2, exact when c == 1 */
    gp_adamw_dd_factors(s, gcoef, &c1, &c2);
    const gp_adamw_dd_scalars sc = *s;
    double *restrict whi = st->w_hi + i0, *restrict wlo = st->w_lo + i0;
    double *restrict mhi = st->m_hi + i0, *restrict mlo = st->m_lo + i0;
    double *restrict vhi = st->v_hi + i0, *restrict vlo = st->v_lo + i0;
    for (size_t j = 0; j < n; j++) {
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
