/* gp_sr_lag.h — stochastic rounding's random bits tested for reuse at every lag (issue 27).
 *
 * The runner's three scores (gp_runner.h, "Stochastic rounding as a random process") see
 * bias, neighbouring elements and consecutive micro-batches; bits that repeat with a long
 * period (element i and i + P drawing the same word) pass them. This test looks at every
 * lag at once. Over one sequence of n stochastic roundings of one micro-batch (element
 * order; an element that was not a draw has u = 0, w = 0), with f_i the position of the
 * rounded value between its neighbours, up_i = 1 when the backend stored the upper one,
 * u_i = up_i - f_i and w_i = f_i (1 - f_i), take for every lag L = 1 .. n - 1
 *   S_L = sum_j u_(j-L) u_j,   V_L = sum_j u_(j-L)^2 w_j   (j = L .. n - 1).
 * With fresh random bits each up_j is a Bernoulli(f_j) draw independent of all earlier
 * ones, so in the order of j the terms X_j = u_(j-L) u_j are martingale differences
 * (u_(j-L) is known before j), |X_j| <= 1, with predictable variance u_(j-L)^2 w_j.
 * Freedman's inequality on the dyadic shells of V (as the runner's scores) gives
 * P(|S_L| >= T(V_L)) <= 130 e^-Lam, T(V) = 2 Lam / 3 + 2 sqrt(max(V, 1) Lam). A union bound
 * over the lags of all sequences tested in a run (at most `lags` of them) with
 * Lam = ln(130 lags / 1e-9) bounds the run's false alarm by 1e-9. The CPU emulation rounds
 * up with probability floor(f 2^32) / 2^32, a drift below 2^-32 per draw: |E X_j| <=
 * 2^-32, so T gets + (n - L) 2^-32. The score is max_L |S_L| / T_L; above 1 fails.
 *
 * Bits repeating with period P (element j + P draws element j's word r): both round up
 * iff r < min(f, f') 2^32, so E[u_j u_(j+P)] = min(f, f') - f f' > 0 (1/12 for f, f'
 * uniform): S_P grows like (n - P) / 12 while T grows like sqrt(n (1/36) Lam) — on
 * 2^20 elements about 87000 against 2200.
 *
 * S and V for all lags come from FFT correlations of zero-padded sequences (length a
 * power of two >= 2n), in binary64: the values are sums of at most n terms of magnitude
 * <= 1, computed with an absolute error far below 1 (tests/test_sr_lag.c compares them
 * with the direct sums); T is at least 2 Lam / 3 > 20, so the score's error is
 * negligible. Deterministic: one thread, a fixed order. */
#ifndef GP_SR_LAG_H
#define GP_SR_LAG_H

#include <stddef.h>
#include <stdint.h>

/* The runner records at most this many elements of a tensor (its first ones: lags up to
 * 2^21 - 1; the FFT then needs 2 arrays of 2^22 complex values, 128 MiB, for a moment). */
#define GP_SR_LAG_MAX ((size_t)1 << 21)

/* The lag statistics of one sequence: S[L] and V[L] for L = 1 .. n - 1 as above (S[0],
 * V[0] untouched; arrays of n). n >= 2. Returns 0, or -1 when out of memory (nothing
 * written). */
int gp_sr_lag_sums(const double *u, const double *w, size_t n, double *S, double *V);

/* The score of one sequence: max over L = 1 .. n - 1 of |S_L| / T_L with the union bound
 * over `lags` lags in the run (lags >= n - 1) and the CPU's drift term when `drift` is
 * set; *worst gets the lag of the maximum (0 when n < 2). Returns the score (0 for n < 2),
 * or a negative value when out of memory. */
double gp_sr_lag_score(const double *u, const double *w, size_t n, uint64_t lags, int drift, size_t *worst);

/* T(V) for a run of `lags` lags (the threshold above, without the drift term). */
double gp_sr_lag_threshold(double V, uint64_t lags);

#endif
