/* gp_adamw_ref.c — see gp_adamw_ref.h. Independent of kernels/arith/gp_adamw.h: the
 * algorithm as written in torch's documentation of AdamW, in MPFR. */
#include "gp_adamw_ref.h"

#include "gp_mpfr_env.h"

/* ---- the reference ---- */

void gp_adamw_ref_init(gp_adamw_ref *r, double w0)
{
    mpfr_inits2(GP_ADAMW_REF_PREC, r->w, r->m, r->v, r->upd, (mpfr_ptr)0);
    mpfr_set_d(r->w, w0, MPFR_RNDN); /* exact: 53 <= 200 bits */
    mpfr_set_zero(r->m, 1);
    mpfr_set_zero(r->v, 1);
    mpfr_set_zero(r->upd, 1);
}

void gp_adamw_ref_clear(gp_adamw_ref *r)
{
    mpfr_clears(r->w, r->m, r->v, r->upd, (mpfr_ptr)0);
}

/* 1 - beta^t, rounded once from the 200-bit beta^t (correctly rounded power). */
static void one_minus_pow(mpfr_ptr out, double beta, long t)
{
    mpfr_set_d(out, beta, MPFR_RNDN);
    mpfr_pow_ui(out, out, (unsigned long)t, MPFR_RNDN);
    mpfr_ui_sub(out, 1, out, MPFR_RNDN);
}

void gp_adamw_ref_step(gp_adamw_ref *r, double g, double lr, const gp_adamw_ref_hparams *h,
                       long t)
{
    gp_mpfr_env saved;
    gp_mpfr_env_enter(&saved);
    mpfr_t a, b, gg, den;
    mpfr_inits2(GP_ADAMW_REF_PREC, a, b, gg, den, (mpfr_ptr)0);

    /* decoupled weight decay: w <- w * (1 - lr*wd) */
    mpfr_set_d(a, lr, MPFR_RNDN);
    mpfr_mul_d(a, a, h->weight_decay, MPFR_RNDN);
    mpfr_ui_sub(a, 1, a, MPFR_RNDN);
    mpfr_mul(r->w, r->w, a, MPFR_RNDN);

    /* m <- beta1*m + (1 - beta1)*g */
    mpfr_set_d(gg, g, MPFR_RNDN);
    mpfr_mul_d(r->m, r->m, h->beta1, MPFR_RNDN);
    mpfr_set_ui(a, 1, MPFR_RNDN);
    mpfr_sub_d(a, a, h->beta1, MPFR_RNDN); /* 1 - beta1 */
    mpfr_mul(b, a, gg, MPFR_RNDN);
    mpfr_add(r->m, r->m, b, MPFR_RNDN);

    /* v <- beta2*v + (1 - beta2)*g^2 */
    mpfr_mul_d(r->v, r->v, h->beta2, MPFR_RNDN);
    mpfr_set_ui(a, 1, MPFR_RNDN);
    mpfr_sub_d(a, a, h->beta2, MPFR_RNDN); /* 1 - beta2 */
    mpfr_sqr(b, gg, MPFR_RNDN);
    mpfr_mul(b, b, a, MPFR_RNDN);
    mpfr_add(r->v, r->v, b, MPFR_RNDN);

    /* den = sqrt(v) / sqrt(1 - beta2^t) + eps */
    one_minus_pow(a, h->beta2, t);
    mpfr_sqrt(a, a, MPFR_RNDN);
    mpfr_sqrt(den, r->v, MPFR_RNDN);
    mpfr_div(den, den, a, MPFR_RNDN);
    mpfr_add_d(den, den, h->eps, MPFR_RNDN);

    /* upd = -(lr / (1 - beta1^t)) * m / den; w <- w + upd */
    one_minus_pow(a, h->beta1, t);
    mpfr_set_d(b, lr, MPFR_RNDN);
    mpfr_div(b, b, a, MPFR_RNDN);
    mpfr_mul(b, b, r->m, MPFR_RNDN);
    mpfr_div(r->upd, b, den, MPFR_RNDN);
    mpfr_neg(r->upd, r->upd, MPFR_RNDN);
    mpfr_add(r->w, r->w, r->upd, MPFR_RNDN);

    mpfr_clears(a, b, gg, den, (mpfr_ptr)0);
    gp_mpfr_env_leave(&saved);
}

double gp_adamw_ref_param(const gp_adamw_ref *r)
{
    double w;
    gp_adamw_ref_get(r, &w, (double *)0, (double *)0, (double *)0);
    return w;
}

void gp_adamw_ref_get(const gp_adamw_ref *r, double *w, double *m, double *v, double *upd)
{
    gp_mpfr_env saved;
    gp_mpfr_env_enter(&saved);
    if (w)
        *w = mpfr_get_d(r->w, MPFR_RNDN);
    if (m)
        *m = mpfr_get_d(r->m, MPFR_RNDN);
    if (v)
        *v = mpfr_get_d(r->v, MPFR_RNDN);
    if (upd)
        *upd = mpfr_get_d(r->upd, MPFR_RNDN);
    gp_mpfr_env_leave(&saved);
}
