/* gp_gen_simd.h — the generator's two hot loops a block at a time, on the CPU only:
 * Philox4x32-10 over many counters per vector register, and GSL's inverse normal CDF
 * with its central branch vectorised. Both give exactly the bits of the scalar
 * definitions (kernels/arith/gp_philox.h, gsl_cdf_ugaussian_Pinv) on every path; the
 * path is chosen at run time from the CPU (AVX-512F, AVX2, else portable C). The Philox
 * loop lives with the CPU backend (kernels/cpu/gp_cpu_philox.h), whose stochastic
 * rounding draws from it too. */
#ifndef GP_GEN_SIMD_H
#define GP_GEN_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "../../kernels/cpu/gp_cpu_philox.h" /* gp_gen_path, gp_philox_block */

/* x[j] = gsl_cdf_ugaussian_Pinv(p[j]) bit for bit, j < n (x and p do not overlap):
 * Wichura's AS241 evaluated as GSL evaluates it, the same binary64 operations in the
 * same order, no contraction. The central branch (|p - 0.5| <= 0.425) runs in vector
 * registers; for the other p in (0, 1) -log(pp) is libm's value (GSL calls log once
 * each; gp_neglog_block below) and the rest runs in vector registers; 0, 1, NaN and p
 * outside [0, 1] call GSL.
 * An unavailable path runs the portable one (GSL for every element). */
void gp_ugaussian_pinv_block(gp_gen_path path, const double *p, size_t n, double *x);

/* t[k] = -log(x[k]) with libm's log, bit for bit, k < n, for any x (t and x do not
 * overlap). The AVX-512 path evaluates x in (0, 0.25) in vector registers and returns
 * the rounded value only where libm's log, by its documented error bound, must return
 * it; every other x calls libm (the derivation: gp_gen_simd.c). The other paths call
 * libm for every x. The inverse CDF's tails use it for GSL's -log(pp). */
void gp_neglog_block(gp_gen_path path, const double *x, size_t n, double *t);

#endif
