/* gp_adamw_bound.h — a rigorous bound on how far the fp32 AdamW step of
 * kernels/arith/gp_adamw.h (fp32 weights and state, any evaluation order) can drift
 * from the exact trajectory (reference/gp_adamw_ref.h), advanced one step at a time
 * from the exact values around the step. Used by tests/test_adamw.c and the fuzz target
 * fuzz/fuzz_adamw.c, where a violation is a crash.
 *
 * Preconditions (outside them the bound does not hold and callers skip the check):
 * every fp32 quantity of the step (m, v, g*g, sqrt(v), the denominator, the update, the
 * weight) is zero or normal — no underflow, no overflow — so each fp32 operation has a
 * relative error of at most u = 2^-24; 1 - beta1 < 0.5; 0 <= lr*wd <= 1; the host
 * scalars' binary64 errors (below 2^-40 relative for betas in [0.5, 1 - 2^-20]) are
 * counted as one more u on each fp32 scalar. */
#ifndef GP_ADAMW_BOUND_H
#define GP_ADAMW_BOUND_H

#include <math.h>

#define GP_ADAMW_BOUND_U 0x1p-24 /* fp32 unit roundoff */

/* gamma_n of Higham: |prod of n factors (1 + d_i)| - 1 <= gamma_n for |d_i| <= u. */
static inline double gp_adamw_gam(int n)
{
    return n * GP_ADAMW_BOUND_U / (1 - n * GP_ADAMW_BOUND_U);
}

/* (1 + a)(1 + b) - 1 for relative error bounds a, b. */
static inline double gp_adamw_comb(double a, double b)
{
    return a + b + a * b;
}

#include "gp_adamw_ref.h"

/* The exact values around one step, from the reference (rounded to binary64: a relative
 * 2^-53 on quantities that only scale the bound). */
typedef struct {
    double w, m, v;          /* before the step */
    double w1, m1, v1, upd;  /* after */
} gp_adamw_exact_step;

/* Bounds on the kernel's deviation from the exact trajectory: |m^ - m| <= em,
 * |v^ - v| <= ev*v, |w^ - w| <= ew. */
typedef struct {
    double em, ev, ew;
} gp_adamw_err_bound;

/* Advance the bound over one step of an fp32-state, fp32-weight AdamW (any of the three
 * evaluation orders) and return the bound on the update's error |x^ - X|. Derivation
 * (u = 2^-24, theta_n a product of n factors (1 + d), |d| <= u, |theta_n| <= gp_adamw_gam(n);
 * binary64 errors of the host scalars are below 2^-40 relative for these betas and are
 * counted as one more u on each fp32 scalar; the bound assumes 1 - beta1 < 0.5 and
 * 0 <= lr*wd <= 1):
 *  m: m^' = fl(m^ + fl(w1f * fl(g - m^)))  [fused: one rounding less]
 *        = (m^ + w1 (g - m^)(1 + th4))(1 + th1)
 *     the exact lerp of m^ differs from m' by (1 - w1)(m^ - m) = beta1 (m^ - m), so
 *     em' = beta1 em + gam5 w1 (|g - m| + em) + u (|m'| + beta1 em).
 *  v: v^' = fl(fl(v^ b2f) + fl(c2f fl(g g)))  [CPU: (c2f g) g; fused: one rounding less]
 *        = b2 v^ (1 + th3) + c2 g^2 (1 + th4), both terms >= 0, v^ = v (1 + e), |e| <= ev:
 *     ev' = (b2 v (ev (1 + gam3) + gam3) + c2 g^2 gam4) / v'.
 *  denom: r = fl(sqrt(v^')) = sqrt(v')(1 + rho)(1 + th1), |rho| <= ev'/(2 (1 - ev'))
 *     (|sqrt(1 + e) - 1| <= |e| / (1 + sqrt(1 - |e|)));  q = fl(r * fl(1/fl(bc2s)))
 *     [CPU: fl(r / fl(bc2s))] = S (1 + rho)(1 + th5), S = sqrt(v'/bc2);
 *     den = fl(q + eps (1 + th1)) = D (1 + ed), D = S + eps, ed = gp_adamw_comb(rho, gam6).
 *  update: x^ = fl(nsf fl(m^'/den)) [CPU: fl(fl(nsf m^')/den); fused: inside the final
 *     fma] = -(lr/bc1) (m^'/den)(1 + th4), and |m^'/den - m'/D| <= (em' + |m'| ed) / (D (1 - ed)):
 *     ex = (lr/bc1) [(em' + |m'| ed) / (D (1 - ed)) (1 + gam4) + |m'|/D gam4].
 *  weight: d = fl(w^ fl(decay)) = w^ decay (1 + th3): |d - w decay| <= ew + (|w| + ew) gam3;
 *     w^' = fl(d + x^): ew' = (|d - w decay| + ex)(1 + u) + u |w'|. */
static inline double gp_adamw_bound_step(gp_adamw_err_bound *b, const gp_adamw_ref_hparams *h, double lr,
                                         long t, double g, const gp_adamw_exact_step *x)
{
    double b1 = h->beta1, b2 = h->beta2, w1 = 1 - b1, c2 = 1 - b2;
    double em = b1 * b->em + gp_adamw_gam(5) * w1 * (fabs(g - x->m) + b->em) + GP_ADAMW_BOUND_U * (fabs(x->m1) + b1 * b->em);
    double ev = x->v1 > 0
                    ? (b2 * x->v * (b->ev * (1 + gp_adamw_gam(3)) + gp_adamw_gam(3)) + c2 * g * g * gp_adamw_gam(4)) / x->v1
                    : 0.0;
    double bc1 = 1 - pow(b1, (double)t), bc2 = 1 - pow(b2, (double)t);
    double rho = ev / (2 * (1 - ev));
    double ed = gp_adamw_comb(rho, gp_adamw_gam(6));
    double D = sqrt(x->v1 / bc2) + h->eps;
    double ex = (lr / bc1) * ((em + fabs(x->m1) * ed) / (D * (1 - ed)) * (1 + gp_adamw_gam(4)) +
                              fabs(x->m1) / D * gp_adamw_gam(4));
    double dw = b->ew + (fabs(x->w) + b->ew) * gp_adamw_gam(3);
    b->ew = (dw + ex) * (1 + GP_ADAMW_BOUND_U) + GP_ADAMW_BOUND_U * fabs(x->w1);
    b->em = em;
    b->ev = ev;
    return ex;
}

#endif
