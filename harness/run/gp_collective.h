/* gp_collective.h — the orders in which a simulated collective adds the ranks' values
 * (docs/distributed.md): pure functions of (world size, rank, chunk, hop), so the same
 * scenario gives the same bits and a reader can replay any element's sum by hand. The
 * runner (harness/run/gp_run_collective.c) performs each addition through the backend's accumulate entry
 * in the reduce dtype and attributes what it lost. */
#ifndef GP_COLLECTIVE_H
#define GP_COLLECTIVE_H

#include <stdint.h>

#include "../../kernels/arith/gp_format.h"
#include "../scenario/gp_scenario.h"

/* The ring chunk of element j of a bucket of blen elements over W ranks: the bucket is cut
 * into W contiguous chunks of ceil(blen / W) elements (the last ones shorter or empty);
 * returns j / ceil(blen / W). */
int gp_coll_chunk(uint64_t j, uint64_t blen, int W);

/* The rank whose value the ring's reduce-scatter adds at hop h (0 <= h < W) to chunk q:
 * NCCL's ring (src/device/all_reduce.h, runRing) has rank r send chunk r - 1 at step 0
 * and finish chunk r at the last step, so chunk q's partial sum starts at rank q + 1 and
 * travels q + 2, ..., ending at rank q: the rank of hop h is (q + 1 + h) mod W; hop 0 is
 * the starting value, hops 1..W-1 are additions rounded to the reduce dtype. FSDP's
 * reduce-scatter uses the same order with chunk q = rank q's shard. */
int gp_coll_ring_rank(int W, int q, int h);

/* Element j's bucket length: buckets of `bucket` elements (0: the whole tensor of n) cut
 * the tensor in order, the last one shorter; *pos is j's position in its bucket. */
uint64_t gp_coll_bucket(uint64_t j, uint64_t n, uint64_t bucket, uint64_t *pos);

/* The first element of element j's message under a scaled reduce dtype: what one rank
 * sends at once and quantizes with its own scales (docs/distributed.md, "Scaled reduce
 * dtypes"): the ring chunk (gp_coll_chunk) of j's bucket (gp_coll_bucket) for ring and
 * reduce_scatter, the whole bucket for tree (tree != 0). A message's blocks (1x128, MX,
 * NVFP4) start at its first element. */
uint64_t gp_coll_message(uint64_t j, uint64_t n, uint64_t bucket, int W, int tree);

/* Quantize x[0..n), elements j0 .. j0 + n - 1 of a tensor of `size` elements, as the
 * ranks send them under the scaled reduce dtype q: message by message (gp_coll_message;
 * j0 must start a message and the last one must end at n), each a 1 x len tensor to
 * gp_scaled_quantize, so its scales (per message for :current and nvfp4's tensor scale,
 * per block from the message's first element otherwise) are the sender's own. y: what
 * they dequantize to; ev[i] gets element i's events OR-ed (saturation, :nosat overflow). */
void gp_coll_quantize(const gp_scaled_cfg *q, const float *x, float *y, unsigned *ev, size_t n, uint64_t j0,
                      uint64_t size, uint64_t bucket, int W, int tree);

/* The divisions around the sum: the factor before (pre) and after (post) it, with
 * pre * post = W: average pre: predivide and W / predivide; post: 1 and W; op (NCCL's
 * ncclAvg, a pre-multiplication by 1/W in the reduce dtype): W and 1. */
void gp_coll_factors(const gp_scenario *sc, double *pre, double *post);

/* Divide v (a value of format rd) by F as the framework does, returning the stored bits:
 * op = 0: torch's tensor.div_(F) (DDP's hooks, FSDP's pre/post-division): the product with
 * the fp32 reciprocal in fp32 (CUDA computes a division by a scalar as a multiplication
 * by its reciprocal), rounded to fp32, then stored in rd (RNE);
 * op = 1: NCCL's ncclAvg on floats: v times 1/F rounded to rd first, one rounding of the
 * exact product. ftz flushes the stored result; *ev gets the events of the last rounding. */
uint32_t gp_coll_divide(gp_format rd, double v, double F, int op, int ftz, unsigned *ev);

#endif
