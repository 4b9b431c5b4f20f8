/* gp_scaler.h — the dynamic loss scale of torch's GradScaler: the scale update after
 * each iteration and the unscale multiplier, shared by the CPU emulation and the CUDA
 * kernels (DESIGN.md §3). The per-element unscale itself is gp_unscale_step (gp_accum.h).
 *
 * What torch does, and where it says so (pytorch/pytorch):
 *  - torch/amp/grad_scaler.py: the scale is a 0-d float32 tensor made by
 *    torch.full((), init_scale, dtype=torch.float32) (so the Python float init_scale is
 *    rounded once to binary32), the growth tracker a 0-d int32 tensor starting at 0.
 *    Defaults: init_scale 2.0**16, growth_factor 2.0, backoff_factor 0.5,
 *    growth_interval 2000; the constructor asserts growth_factor > 1 and backoff < 1.
 *  - unscale_(): `inv_scale = self._scale.double().reciprocal().float()` — the
 *    reciprocal taken in binary64 ("FP32 division can be imprecise for certain compile
 *    options"), then rounded to binary32.
 *  - update() with no new_scale sums the found_inf flags (float tensors, 0 or 1) of every
 *    optimizer and device into one float and calls torch._amp_update_scale_(scale,
 *    growth_tracker, found_inf_combined, growth_factor, backoff_factor, growth_interval),
 *    the factors being Python floats (binary64). update(new_scale) instead fills the
 *    scale with the caller's value and leaves the tracker alone; a run that never calls
 *    update() keeps its scale: both are the caller's business, not this header's.
 *  - aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp (_amp_update_scale_cpu_kernel) and
 *    aten/src/ATen/native/cuda/AmpKernels.cu (amp_update_scale_cuda_kernel, one thread)
 *    do the same steps, on a `float` scale, an `int` tracker and double factors:
 *      if found_inf is non-zero: scale = scale * backoff_factor; tracker = 0
 *      else: successful = tracker + 1
 *            if successful == growth_interval:
 *                new_scale = static_cast<float>(scale * growth_factor)
 *                if new_scale is finite: scale = new_scale   ("do not grow past fp32 bounds")
 *                tracker = 0
 *            else: tracker = successful
 *    `scale * factor` is a float times a double: computed in binary64 (rounded there),
 *    then stored into the float (rounded again, RNE). That double rounding can differ
 *    from one correctly rounded float product when the factor is not a short binary
 *    fraction (tests/test_scaler.c has a case); for the default factors 2 and 0.5 every
 *    step is exact until the scale leaves the fp32 range. The backoff has no finiteness
 *    guard: repeated halving goes through the fp32 subnormals down to 0 (2^-150 is a
 *    tie between 0 and 2^-149 and rounds to even, 0), and 0 then stays 0, growth
 *    included (0 * 2 = 0 is finite).
 *
 * gp_scaler_inv: (float)(1 / (double)scale). For every binary32 scale this equals the
 * correctly rounded binary32 reciprocal 1.0f / scale, since double rounding through
 * binary64 is innocuous for a quotient when 53 >= 2*24 + 2 (Figueroa, 1995); the
 * binary64 path is kept because it is torch's. A scale below 2^-127 gives inv = +inf
 * (1/scale >= 2^128), and scale 0 gives +inf. */
#ifndef GP_SCALER_H
#define GP_SCALER_H

#include "gp_arith.h"

typedef struct {
    float scale;     /* torch's _scale: a float32 */
    int32_t tracker; /* torch's _growth_tracker: an int32, consecutive unskipped steps */
} gp_scaler;

/* A fresh scaler: scale = init_scale rounded to binary32 (RNE), tracker 0. */
GP_ARITH gp_scaler gp_scaler_init(double init_scale)
{
    gp_scaler s;
    s.scale = (float)init_scale;
    s.tracker = 0;
    return s;
}

/* One torch._amp_update_scale_: found_inf non-zero for an iteration that saw a non-finite
 * gradient (and skipped its optimizer step). Products are (float)((double)scale * factor).
 * The tracker only climbs past the interval when interval <= 0 or it started above it (a
 * loaded state); then the scale never grows, and tracker + 1 wraps at INT32_MAX (two's
 * complement) where torch's C++ int would overflow. */
GP_ARITH void gp_scaler_update(gp_scaler *s, int found_inf, double growth, double backoff,
                               int32_t interval)
{
    if (found_inf) {
        s->scale = (float)((double)s->scale * backoff);
        s->tracker = 0;
        return;
    }
    int32_t successful = (int32_t)((uint32_t)s->tracker + 1u);
    if (successful == interval) {
        float grown = (float)((double)s->scale * growth);
        if ((gp_f32_bits(grown) & 0x7f800000u) != 0x7f800000u) /* finite */
            s->scale = grown;
        s->tracker = 0;
    } else {
        s->tracker = successful;
    }
}

/* The unscale multiplier torch computes: (float)(1 / (double)scale). */
GP_ARITH float gp_scaler_inv(float scale)
{
    return (float)(1.0 / (double)scale);
}

#endif
