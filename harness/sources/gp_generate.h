/* gp_generate.h — input generation. Every generated number is a pure function of
 * (scenario seed, stream, element index) through Philox4x32-10, turned into a
 * distribution by GSL's inverse CDFs, so results do not depend on chunking, sharding
 * or -j. A generated gradient is the per-token-mean gradient of one micro-batch for
 * one element, made an fp32 value (the exact real the references start from). */
#ifndef GP_GENERATE_H
#define GP_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "gp_dist.h"

/* What a stream is for. */
enum { GP_STREAM_GRAD = 0, GP_STREAM_WEIGHT = 1, GP_STREAM_ACCUM_SR = 2, GP_STREAM_PARAM_SR = 3,
       GP_STREAM_NOISE = 4, GP_STREAM_SAMPLE = 5 /* the elements a `sample:` chooses */,
       GP_STREAM_SCALED_SR = 6 /* stochastic rounding of a scaled grad format's elements */ };

/* The micro-batch index of the shared signal's stream (token_snr > 0): above every real
 * micro-batch (GP_MAX_MICROBATCHES = 2^16), inside the stream's 17 bits. */
#define GP_SIGNAL_MICROBATCH 0x1ffffu

/* The stream of (purpose, tensor, optimizer step, micro-batch): 4 + 20 + 23 + 17 bits. */
uint64_t gp_stream_id(unsigned purpose, uint64_t tensor, uint64_t step, uint64_t microbatch);

/* out[j] = element i0 + j of distribution d (not GP_DIST_VALUES) on `stream`, j < n.
 * Uses words 0-1 of Philox(seed, ctr = {element, stream}) for a uniform
 * u = (k + 0.5) 2^-53 with k their top 53 bits (the sum rounded to binary64: for k >= 2^52
 * ties go to even, and k = 2^53 - 1 gives u = 1.0, where the normal's inverse CDF is
 * +inf: one draw in 2^53), word 2 for sparsity, word 3 for the sign (16 bits) and
 * outliers (16 bits). */
void gp_generate(const gp_dist *d, uint64_t seed, uint64_t stream, uint64_t i0, size_t n, float *out);

/* out[j] = element idx[j] of d on `stream`, j < n: the same value gp_generate gives that
 * element (counter-based: an element is generated without the others; sampled runs). */
void gp_generate_at(const gp_dist *d, uint64_t seed, uint64_t stream, const uint64_t *idx, size_t n, float *out);

/* The per-token-mean gradients of micro-batch k (n_k tokens) of a gradient with
 * token_snr > 0 (DESIGN: a shared signal plus per-micro-batch noise):
 *   m_k[i] = fp32( s[i] + (scale / token_snr) / sqrt(n_k) * z_k[i] )
 * with s[i] element i of the distribution d on the stream of (tensor, step,
 * GP_SIGNAL_MICROBATCH) — the same for every micro-batch of the step — and z_k[i] a
 * standard normal on the GP_STREAM_NOISE stream of (tensor, step, k): each token's
 * gradient is s + noise of std scale/token_snr, and their mean over n_k tokens has
 * noise std (scale/token_snr)/sqrt(n_k). `noise` is n floats of scratch. Binary64
 * arithmetic, one rounding to fp32 at the end. Elements i0 .. i0+n-1, or idx[0..n) when
 * idx is not NULL. */
void gp_generate_signal_noise(const gp_dist *d, uint64_t seed, uint64_t tensor, uint64_t step, uint64_t k, long nk,
                              uint64_t i0, const uint64_t *idx, size_t n, float *out, float *noise);

#endif
