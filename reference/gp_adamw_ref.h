/* gp_adamw_ref.h — the exact-trajectory reference of AdamW for one element: weight,
 * first and second moments kept in MPFR at GP_ADAMW_REF_PREC bits over any number of
 * steps, never rounded to fp32 or binary64, beside the fp32 step of
 * kernels/arith/gp_adamw.h.
 *
 * Inputs are binary64 values taken exactly: the hyper-parameters (beta1 = 0.9 means
 * the binary64 0.9000000000000000222..., the value the user's program holds and
 * passes to the kernels; it differs from the decimal by < 2^-53 relative, far below
 * fp32's 2^-24), the learning rate of the step (the schedule's binary64 value), and
 * the gradient. What is exact: the algorithm (decoupled decay, bias corrections
 * 1 - beta^t computed from the exact powers, sqrt, eps outside the sqrt). What is not:
 * every MPFR operation rounds to nearest at GP_ADAMW_REF_PREC = 200 bits, so each has
 * relative error <= 2^-200 (sqrt included: correctly rounded, not exact). The sums and
 * products of binary64 inputs (1 - lr*wd, g*g, ...) fit in 200 bits and are exact; a
 * step makes about 20 roundings, so after N steps the reference is within about
 * 20*N*2^-200 of the exact trajectory relative to the magnitudes of w, m, v and the
 * updates involved: for N <= 2^20 below 2^-175, some 2^-150 under fp32's unit roundoff. */
#ifndef GP_ADAMW_REF_H
#define GP_ADAMW_REF_H

#include <mpfr.h>

#define GP_ADAMW_REF_PREC 200

typedef struct {
    double beta1, beta2; /* in [0, 1) */
    double eps;          /* added to sqrt(v / bc2), outside the square root */
    double weight_decay; /* decoupled: w <- w * (1 - lr * weight_decay) */
} gp_adamw_ref_hparams;

typedef struct {
    mpfr_t w;   /* the weight */
    mpfr_t m;   /* exp_avg */
    mpfr_t v;   /* exp_avg_sq */
    mpfr_t upd; /* the last step's -(lr / bc1) * m / denom (the decay excluded) */
} gp_adamw_ref;

/* Start at weight w0 with m = v = upd = 0. Allocates; release with gp_adamw_ref_clear.
 * Cannot fail (MPFR aborts on out-of-memory). */
void gp_adamw_ref_init(gp_adamw_ref *r, double w0);
void gp_adamw_ref_clear(gp_adamw_ref *r);

/* One AdamW step t >= 1 (the caller counts steps: a skipped step does not call this)
 * with gradient g and learning rate lr, in exact arithmetic up to the 200-bit rounding:
 *   w <- w * (1 - lr*wd);  m <- beta1*m + (1 - beta1)*g;  v <- beta2*v + (1 - beta2)*g^2;
 *   upd = -(lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps);  w <- w + upd.
 * MPFR's exponent range and flags are saved and restored. */
void gp_adamw_ref_step(gp_adamw_ref *r, double g, double lr, const gp_adamw_ref_hparams *h,
                       long t);

/* The weight rounded to the nearest binary64. */
double gp_adamw_ref_param(const gp_adamw_ref *r);

/* Weight, moments and last update rounded to the nearest binary64; NULLs are skipped. */
void gp_adamw_ref_get(const gp_adamw_ref *r, double *w, double *m, double *v, double *upd);

#endif
