/* gp_clip.h — global-norm gradient clipping (torch.nn.utils.clip_grad_norm_, norm_type 2,
 * error_if_nonfinite False) with one fixed summation tree, so the CPU emulation and the
 * CUDA kernels give the same bits (DESIGN.md §2, "reductions use a fixed, documented tree").
 *
 * What torch does, and where it says so (pytorch/pytorch):
 *  - torch/nn/utils/clip_grad.py: _get_total_norm takes per-tensor norms with
 *    torch._foreach_norm(grads, 2) (per device and dtype; torch.linalg.vector_norm per
 *    tensor where foreach is unsupported), then total_norm =
 *    torch.linalg.vector_norm(torch.stack(norms), 2). _clip_grads_with_norm_ computes
 *    clip_coef = max_norm / (total_norm + 1e-6) and clip_coef_clamped =
 *    torch.clamp(clip_coef, max=1.0), and multiplies every grad in place by it
 *    (torch._foreach_mul_, or g.mul_), always, even when the coefficient is 1.
 *  - torch/_tensor.py: `number / tensor` is Tensor.__rtruediv__ = __rdiv__, which returns
 *    self.reciprocal() * other. So the coefficient is reciprocal(total + 1e-6) * max_norm:
 *    two roundings, not one division.
 *  - aten/src/ATen/native/cuda/ForeachReduceOp.cu: _foreach_norm's output dtype is the
 *    input's unless a dtype is passed; the sum of squares runs in opmath (float for
 *    bf16/fp16) and the per-tensor result is written as static_cast<out_t>(sqrt(sum)):
 *    the norm of a bf16 tensor is a bf16, a float sqrt rounded once more. The same holds
 *    for vector_norm, so total_norm, total_norm + 1e-6, the reciprocal, the product and
 *    the clamp are all tensors of the grad dtype, each op computed in float and stored.
 *    (torch.stack of norms of different dtypes promotes; gradprec has one grad format.)
 *    The reciprocal (cuda/UnaryFractionKernels.cu, reciprocal_wrapper) is
 *    static_cast<scalar_t>(1) / a, c10's bf16/half arithmetic being float arithmetic.
 *  - A Python float added to a bf16/fp16 tensor: CUDA converts it to float (opmath); CPU
 *    first rounds it to the tensor's dtype (the facts and measurements in gp_adamw.h);
 *    multiplication keeps it in float on both. Hence the `torch_cpu` flag of gp_clip_coef:
 *    1e-6 enters as widen(store(fl32(1e-6))) on CPU, as fl32(1e-6) on CUDA (for 1e-6 the
 *    store from the float and from the double agree). With fp32 grads both are fl32(1e-6).
 *  - Non-finite grads (error_if_nonfinite=False): nothing is checked. An inf grad, or
 *    finite grads whose squares or their sums overflow fp32 (a square does from |g| =
 *    2^64 on), make the sum of squares, the norm and the total +inf; then
 *    reciprocal(inf + 1e-6) = 0, the coefficient is 0 (NaN if max_norm is inf), and every
 *    finite grad becomes +-0 while inf grads become NaN. A NaN grad makes the total and
 *    the coefficient NaN (clamp propagates NaN) and every grad NaN. gradprec does the
 *    same; NaN payloads are not specified (compare NaN-ness).
 *  - torch's own summation order is not fixed: its CUDA kernels accumulate per thread
 *    (contracted into FMAs under nvcc's default --fmad=true) then reduce across threads
 *    and chunks by launch shape; its CPU kernels use vectorised cascades. gradprec does
 *    not claim torch's bits for the sums, only its dtypes and per-op roundings.
 *
 * gradprec's tree. T(x, n), the sum of n fp32 values in index order:
 *   T(x, 0) = +0;  T(x, 1) = x[0];
 *   T(x, n) = fl32(T(x, h) + T(x + h, n - h)),  h = the largest power of two below n.
 * Every addition is one fp32 RNE addition (no FMA, no flush of subnormals); the depth
 * is ceil(log2 n). Properties the callers rely on:
 *  (1) Chunking. For any chunk size C = 2^c and chunks aligned at multiples of C (all full
 *      but the last), T(x, n) = T(p, K) with p[j] = T(chunk j), K = ceil(n / C). Proof by
 *      induction on n: n <= C is K = 1. For n > C, h >= C, so h is a multiple of C, and
 *      h/C is the largest power of two below K (h < n <= 2h gives h/C < K <= 2h/C); the
 *      left part is a perfect tree of h/C perfect chunk trees, the right part starts on a
 *      chunk boundary and has fewer elements. So the runner, which reads tensors in chunks
 *      of 16384 = 2^14, sums each chunk with gp_clip_sumsq and the chunk sums, in order,
 *      with gp_clip_tree_sum, and gets the whole-tensor bits.
 *  (2) GPU replay. T(x, n) equals the perfect tree over x padded with +0 up to any power of
 *      two >= n, when no x[i] is -0: a sum with a +0 operand returns the other operand
 *      exactly (a + (+0) = a for every a except -0), and sums of non-negative values and
 *      NaNs are never -0. A CUDA block owning a 2^14 chunk (1024 threads) can therefore run
 *      a fixed perfect tree: each thread sums its 16 consecutive squares pairwise
 *      ((0+1)+(2+3))+..., then __shfl_xor_sync with lane masks 1, 2, 4, 8, 16 combines
 *      adjacent threads (fp32 addition commutes bit for bit, so both lanes hold the same
 *      sum), then warp sums combine the same way through shared memory; out-of-range
 *      elements load +0.
 * Sum of squares of a tensor (gp_clip_sumsq): T over the leaves fl32(w*w), w = the grad
 * widened exactly to fp32; a square is never -0. Per-tensor norm (gp_clip_norm_store):
 * store(sqrtf(sum)) in the norm format nf (the grad format: fp32, bf16, fp16), sqrtf
 * correctly rounded, the store RNE. Total norm (gp_clip_total_norm): T over the tensors,
 * in order, of fl32(widen(norm)^2), then store(sqrtf(.)) in nf, as vector_norm(stack).
 * Coefficient (gp_clip_coef), every op in fp32 then stored to nf (RNE, no FTZ):
 *   d = store(fl32(total + e)),  e = fl32(1e-6), or widen(store(fl32(1e-6))) for torch_cpu
 *   r = store(fl32(1.0f / d))                          reciprocal
 *   c = store(fl32(r * (float)max_norm))               times the Python float
 *   coef = c > 1 ? 1 : c                               clamp(max=1.0); NaN stays NaN
 * Apply (gp_clip_apply): g <- store_gf(fl32(widen(g) * coef)), the unscale step's
 * arithmetic (gp_unscale_step) without its non-finite flag. */
#ifndef GP_CLIP_H
#define GP_CLIP_H

#include <math.h>

#include "gp_accum.h"

/* Streaming form of T: push values in index order, read the sum at any point. level[k]
 * holds the sum of a perfect subtree of 2^k values exactly while bit k of count is set:
 * pushing carries like a binary counter (each carry is one addition, left + right), and
 * the result adds the pending subtrees from the smallest up, as T's right spine does. */
typedef struct {
    float level[64];
    uint64_t count;
} gp_clip_tree;

GP_ARITH void gp_clip_tree_init(gp_clip_tree *t)
{
    t->count = 0;
}

GP_ARITH void gp_clip_tree_push(gp_clip_tree *t, float v)
{
    uint64_t c = t->count;
    int k = 0;
    for (; c & 1u; c >>= 1, k++)
        v = GP_FADD_RN(t->level[k], v);
    t->level[k] = v;
    t->count++;
}

GP_ARITH float gp_clip_tree_result(const gp_clip_tree *t)
{
    float acc = 0.0f;
    int have = 0;
    uint64_t c = t->count;
    for (int k = 0; c; c >>= 1, k++) {
        if (c & 1u) {
            acc = have ? GP_FADD_RN(t->level[k], acc) : t->level[k];
            have = 1;
        }
    }
    return acc;
}

/* T(x, n) of a whole array; over chunk sums (in order) it completes a chunked sum. */
GP_ARITH float gp_clip_tree_sum(const float *x, uint64_t n)
{
    gp_clip_tree t;
    gp_clip_tree_init(&t);
    for (uint64_t i = 0; i < n; i++)
        gp_clip_tree_push(&t, x[i]);
    return gp_clip_tree_result(&t);
}

/* fl32(w * w), w = the value of `bits` in format f widened exactly to fp32. */
GP_ARITH float gp_clip_square(gp_format f, uint32_t bits)
{
    float w = gp_f32_from_bits(gp_fmt_to_f32_bits(f, bits));
    return GP_FMUL_RN(w, w);
}

/* T over the squares of n packed elements of format f (a tensor, or one aligned chunk). */
GP_ARITH float gp_clip_sumsq(gp_format f, const void *packed, uint64_t n)
{
    gp_clip_tree t;
    gp_clip_tree_init(&t);
    for (uint64_t i = 0; i < n; i++)
        gp_clip_tree_push(&t, gp_clip_square(f, gp_pack_get(f, packed, i)));
    return gp_clip_tree_result(&t);
}

/* fp32 value -> format nf (RNE, no FTZ) -> back to fp32: what storing a float op's
 * result in an nf tensor and reading it again gives. */
GP_ARITH float gp_clip_round(gp_format nf, float x)
{
    return gp_f32_from_bits(gp_fmt_to_f32_bits(nf, gp_fmt_store_f32(nf, x, 0)));
}

/* A norm from its sum of squares: the bits of store_nf(sqrtf(sumsq)). */
GP_ARITH uint32_t gp_clip_norm_store(gp_format nf, float sumsq)
{
    return gp_fmt_store_f32(nf, sqrtf(sumsq), 0);
}

/* The total norm over k per-tensor norms (bits of nf, in tensor order): bits of nf. */
GP_ARITH uint32_t gp_clip_total_norm(gp_format nf, const uint32_t *norms, uint64_t k)
{
    gp_clip_tree t;
    gp_clip_tree_init(&t);
    for (uint64_t i = 0; i < k; i++)
        gp_clip_tree_push(&t, gp_clip_square(nf, norms[i]));
    return gp_clip_norm_store(nf, gp_clip_tree_result(&t));
}

/* The clamped clip coefficient for the total norm `total` (bits of nf), as an nf value
 * widened (exactly) to fp32. torch_cpu: the 1e-6 is rounded to nf first (torch CPU). */
GP_ARITH float gp_clip_coef(gp_format nf, uint32_t total, double max_norm, int torch_cpu)
{
    float tn = gp_f32_from_bits(gp_fmt_to_f32_bits(nf, total));
    float e = (float)1e-6;
    if (torch_cpu)
        e = gp_clip_round(nf, e);
    float d = gp_clip_round(nf, tn + e);
    float r = gp_clip_round(nf, 1.0f / d);
    float c = gp_clip_round(nf, r * (float)max_norm);
    return c > 1.0f ? 1.0f : c;
}

/* One grad element of format gf scaled by the coefficient: store(fl32(widen(g) * coef)),
 * RNE, ftz on the stores; events OR-ed into *ev. Returns the new bits. */
GP_ARITH uint32_t gp_clip_apply(gp_format gf, int ftz, uint32_t g, float coef, unsigned *ev)
{
    int nonfinite = 0; /* clipping checks nothing: the flag is dropped */
    return gp_unscale_step(gf, ftz, g, coef, &nonfinite, ev);
}

#endif
