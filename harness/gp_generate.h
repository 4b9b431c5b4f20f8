/* gp_generate.h — input generation. Every generated number is a pure function of
 * (scenario seed, stream, element index) through Philox4x32-10, turned into a
 * distribution by GSL's inverse CDFs, so results do not depend on chunking, sharding
 * or -j. A generated gradient is the per-token-mean gradient of one micro-batch for
 * one element, made an fp32 value (the exact real the references start from). */
#ifndef GP_GENERATE_H
#define GP_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "gp_scenario.h"

/* What a stream is for. */
enum { GP_STREAM_GRAD = 0, GP_STREAM_WEIGHT = 1, GP_STREAM_ACCUM_SR = 2, GP_STREAM_PARAM_SR = 3 };

/* The stream of (purpose, tensor, optimizer step, micro-batch): 4 + 20 + 23 + 17 bits. */
uint64_t gp_stream_id(unsigned purpose, uint64_t tensor, uint64_t step, uint64_t microbatch);

/* out[j] = element i0 + j of distribution d (not GP_DIST_VALUES) on `stream`, j < n.
 * Uses words 0-1 of Philox(seed, ctr = {element, stream}) for a uniform in (0,1) with
 * 53 bits, word 2 for sparsity, word 3 for the sign (16 bits) and outliers (16 bits). */
void gp_generate(const gp_dist *d, uint64_t seed, uint64_t stream, uint64_t i0, size_t n, float *out);

#endif
