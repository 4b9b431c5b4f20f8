/* gp_exact.h — exact (error-free) accumulation for the references. A gp_fixacc is a
 * 384-bit two's-complement fixed-point number with its lowest bit worth 2^-149 (the
 * fp32 min subnormal): it holds exactly every sum of up to 2^31 terms of the form
 * n * x with x an fp32 value and 0 <= n < 2^31 — which is every term the gradient
 * references add (per-token-mean gradients are fp32, token counts are integers).
 * Adding is a few integer operations; reading out rounds once, correctly. */
#ifndef GP_EXACT_H
#define GP_EXACT_H

#include <gmp.h>
#include <stdint.h>

#define GP_FIXACC_LIMBS 6

typedef struct {
    uint64_t limb[GP_FIXACC_LIMBS]; /* little-endian limbs; value = signed integer * 2^-149 */
} gp_fixacc;

/* Set to zero. */
void gp_fixacc_zero(gp_fixacc *a);

/* a += n * x exactly, for x a finite fp32 value (given as a float) and 0 <= n < 2^31.
 * Non-finite x is the caller's to exclude (undefined here). */
void gp_fixacc_add(gp_fixacc *a, float x, uint32_t n);

/* a += b exactly. */
void gp_fixacc_add_acc(gp_fixacc *a, const gp_fixacc *b);

/* The value a / d rounded to binary64 (round to nearest even), for 1 <= d < 2^53, and
 * the sign of the residual: *sticky = sign(a/d - result) in {-1, 0, 1}. With the
 * sticky sign, a later rounding of the result to any format with at most 51 bits is
 * the correct rounding of a/d (see gp_f64_nudge in kernels/arith/gp_arith.h). */
double gp_fixacc_div(const gp_fixacc *a, uint64_t d, int *sticky);

/* Set z to the integer a * 2^149 (exact; for cross-checks against GMP/MPFR). */
void gp_fixacc_get_mpz(mpz_t z, const gp_fixacc *a);

/* The binary64 nearest to the rational q (RNE), and where q lies relative to it in
 * *sticky: 1 above, -1 below, 0 equal (for gp_f64_nudge). */
double gp_exact_q_nearest(const mpq_t q, int *sticky);


/* ---- gp_exactsum: exact per-element sums, fast ----
 * The same sums (terms n * x, x fp32) over arrays of elements, for the references'
 * hot path. Element i's exact sum is spill[i] + s[i]: s[i] takes the terms while
 * binary64 holds the sum exactly (checked per term, see gp_exact.c), and moves into
 * spill[i] (a gp_fixacc) when a term would make it round. Start with s = 0 and the
 * spills zeroed (calloc). Memory per element: 8 + 48 bytes; the spill is touched only
 * when needed. */

/* s[i] (+ spill[i]) += n * x[i] exactly for i < count (x finite fp32; any n < 2^31).
 * Returns how many elements' spills it wrote (0: spill untouched, so a caller that knows
 * its spills are zero need not clear or read them: gp_exactsum_div_n with NULL). */
size_t gp_exactsum_add(double *s, gp_fixacc *spill, const float *x, uint32_t n, size_t count);

/* The same with a chosen instruction-set path (for tests and bench/): AUTO is what
 * gp_exactsum_add uses (AVX-512 where the CPU has it, else AVX2, else SSE2 on x86-64,
 * else portable C). Every path gives the same s and spill bit for bit. Only call with a path for
 * which gp_exactsum_path_available returns 1; an unavailable one falls back to C. */
typedef enum {
    GP_EXACTSUM_AUTO,
    GP_EXACTSUM_PORTABLE,
    GP_EXACTSUM_SSE2,
    GP_EXACTSUM_AVX2,
    GP_EXACTSUM_AVX512
} gp_exactsum_path;
int gp_exactsum_path_available(gp_exactsum_path path);
size_t gp_exactsum_add_path(gp_exactsum_path path, double *s, gp_fixacc *spill, const float *x, uint32_t n,
                            size_t count);

/* One element's sum / d rounded to binary64 with the sticky sign (as gp_fixacc_div). */
double gp_exactsum_div(double s, const gp_fixacc *spill, uint64_t d, int *sticky);

/* q[i] = gp_exactsum_div(s[i], &spill[i], d, ...) for i < count, without the sticky
 * signs (1 <= d < 2^53): one call for a whole array. spill NULL: every spill is zero
 * (the same quotients, without reading 48 bytes an element). */
void gp_exactsum_div_n(double *q, const double *s, const gp_fixacc *spill, uint64_t d, size_t count);

#endif
