/* gp_gen_simd.h — the generator's two hot loops a block at a time, on the CPU only:
 * Philox4x32-10 over many counters per vector register, and GSL's inverse normal CDF
 * with its central branch vectorised. Both give exactly the bits of the scalar
 * definitions (kernels/arith/gp_philox.h, gsl_cdf_ugaussian_Pinv) on every path; the
 * path is chosen at run time from the CPU (AVX-512F, AVX2, else portable C). */
#ifndef GP_GEN_SIMD_H
#define GP_GEN_SIMD_H

#include <stddef.h>
#include <stdint.h>

/* A code path; AUTO picks the widest the CPU has. */
typedef enum { GP_GEN_AUTO, GP_GEN_PORTABLE, GP_GEN_AVX2, GP_GEN_AVX512 } gp_gen_path;

/* 1 when `path` can run on this CPU (AUTO and PORTABLE always). */
int gp_gen_path_available(gp_gen_path path);

/* Words per output lane the vector paths may write past n: callers size w[k] to
 * n rounded up to a multiple of GP_GEN_PAD. */
#define GP_GEN_PAD 16

/* w[k][j] = word k of gp_philox4x32_10(ctr = {e lo, e hi, stream lo, stream hi},
 * key = {seed lo, seed hi}) for element e = idx ? idx[j] : i0 + j (mod 2^64), j < n.
 * w[k][n .. round_up(n, GP_GEN_PAD)) may be overwritten with unspecified words. An
 * unavailable path runs the portable one. */
void gp_philox_block(gp_gen_path path, uint64_t seed, uint64_t stream, uint64_t i0, const uint64_t *idx, size_t n,
                     uint32_t *const w[4]);

/* x[j] = gsl_cdf_ugaussian_Pinv(p[j]) bit for bit, j < n (x and p do not overlap):
 * Wichura's AS241 evaluated as GSL evaluates it, the same binary64 operations in the
 * same order, no contraction. The central branch (|p - 0.5| <= 0.425) runs in vector
 * registers; for the other p in (0, 1) libm's log is called once each (as GSL calls
 * it) and the rest runs in vector registers; 0, 1, NaN and p outside [0, 1] call GSL.
 * An unavailable path runs the portable one (GSL for every element). */
void gp_ugaussian_pinv_block(gp_gen_path path, const double *p, size_t n, double *x);

#endif
