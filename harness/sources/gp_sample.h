/* gp_sample.h — metrics estimated on a sample of elements (docs/replay.md, "Sampling"):
 * a seeded choice of n of M elements (simple random sampling without replacement,
 * reproducible for any -j), and the ratio estimator with its delta-method confidence
 * interval, stratified over tensors. Every metric of a report is a ratio of two sums
 * over elements (sums of squares, or event counts), so one estimator serves them all. */
#ifndef GP_SAMPLE_H
#define GP_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "../../base/gp_error.h"

/* The two-sided coverage of the intervals, and its normal quantile z = Phi^-1(0.975). */
#define GP_SAMPLE_COVERAGE 0.95
#define GP_SAMPLE_Z 1.959963984540054

/* idx[0..n) = n distinct elements of 0..M-1 in increasing order, chosen uniformly among
 * all n-subsets (Floyd's algorithm) from Philox4x32-10 of (seed, stream). n <= M.
 * Returns 0, or -1 with err when out of memory. */
int gp_sample_indices(uint64_t seed, uint64_t stream, uint64_t M, uint64_t n, uint64_t *idx, gp_error *err);

/* Sums over the sampled units of one stratum (a tensor) for a ratio R = sum y / sum x. */
typedef struct {
    double n;                 /* units added */
    double sy, sx;            /* sum y, sum x */
    double syy, sxy, sxx;     /* sum y^2, sum x y, sum x^2 */
} gp_ratio_sums;

/* Add one unit (y, x). Inline: the runner adds every sampled element to several sums. */
static inline void gp_ratio_add(gp_ratio_sums *s, double y, double x)
{
    s->n += 1;
    s->sy += y;
    s->sx += x;
    s->syy += y * y;
    s->sxy += x * y;
    s->sxx += x * x;
}

/* Add b's sums to a's. */
void gp_ratio_merge(gp_ratio_sums *a, const gp_ratio_sums *b);

/* The estimate of R = (sum over strata of Y_h) / (sum of X_h) from strata h < nh, each a
 * simple random sample of s[h].n of pop[h] units (s[h].n = pop[h]: the stratum was seen
 * whole), and its delta-method interval at GP_SAMPLE_COVERAGE:
 *   R^ = sum_h w_h sy_h / sum_h w_h sx_h,   w_h = pop_h / n_h,
 *   Var(R^) ~ sum_h w_h^2 n_h (1 - n_h/pop_h) S_h^2 / X^2,   X = sum_h w_h sx_h,
 *   S_h^2 = (sum e^2 - (sum e)^2 / n_h) / (n_h - 1),   e = y - R^ x,
 * interval R^ -/+ z sqrt(Var), clamped below at 0. Returns 0 with *est, *lo, *hi; -1 when
 * X is 0 (no denominator: the metric is 0 or undefined). */
int gp_ratio_interval(const gp_ratio_sums *s, const double *pop, size_t nh, double *est, double *lo, double *hi);

#endif
