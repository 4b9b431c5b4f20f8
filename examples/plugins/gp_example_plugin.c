/* gp_example_plugin.c — an example of a user's own accumulation kernel under test,
 * written the way a team would write it (no gradprec arithmetic reused): fp32 adds,
 * a bf16 round-to-nearest-even by the usual bit trick, fp16 by the usual rebias-and-
 * round trick (with the +0.5f magic number for subnormals). It supports round-to-nearest-even with fp32 / bf16 / fp16 gradients and
 * accumulators, and says so for anything else.
 *
 * Build (CMake builds both variants into build/examples/plugins/):
 *   cc -O2 -shared -fPIC -I<gradprec>/kernels gp_example_plugin.c -o libgp_example_plugin.so
 * Run:
 *   build/gradprec run --backend plugin:build/examples/plugins/libgp_example_plugin.so
 *
 * Built with -DGP_EXAMPLE_BF16_AS_FP32 it becomes the deliberately wrong plugin of the
 * tests: it claims an fp32 accumulator but rounds every sum to bf16 — the incident of
 * the SDXL LoRA write-up — and gradprec's default suite fails it, naming absorption.
 * -DGP_EXAMPLE_EPS_IN_SQRT puts AdamW's eps under the square root, sqrt(v/bc2 + eps), and
 * -DGP_EXAMPLE_COUPLED_WD applies weight decay as Adam's L2 term (g + wd*w, no decoupled
 * decay): two more wrong optimizers the default suite must fail. The seeded bugs of the
 * fuzzing tests (fuzz/README.md): -DGP_EXAMPLE_BC_OFF_BY_ONE (Adam's bias corrections
 * of step t+1), -DGP_EXAMPLE_KAHAN_DROPPED (a Kahan accumulator that never uses its
 * compensation), -DGP_EXAMPLE_BIASED_SR (stochastic rounding up half as often as it
 * should), -DGP_EXAMPLE_RUNNING_MEAN (each micro-batch averaged into the buffer).
 * The correct plugin implements rne and Kahan accumulation for fp32/bf16/fp16, and
 * stochastic rounding into bf16. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arith/gp_philox.h"
#include "gp_example_formats.h"
#include "gp_plugin_abi.h"

static float load(int32_t fmt, const void *p, uint64_t i)
{
    switch (fmt) {
    case GP_PLUGIN_FP32: return ((const float *)p)[i];
    case GP_PLUGIN_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    default: return f16_to_f32(((const uint16_t *)p)[i]);
    }
}

static void store(int32_t fmt, void *p, uint64_t i, float v)
{
    switch (fmt) {
    case GP_PLUGIN_FP32: ((float *)p)[i] = v; break;
    case GP_PLUGIN_BF16: ((uint16_t *)p)[i] = f32_to_bf16(v); break;
    default: ((uint16_t *)p)[i] = f32_to_f16(v); break;
    }
}

static int supported(int32_t fmt)
{
    return fmt == GP_PLUGIN_FP32 || fmt == GP_PLUGIN_BF16 || fmt == GP_PLUGIN_FP16;
}

/* fp32 -> bf16 with stochastic rounding, gradprec's rule: with d the 16 dropped bits and
 * r the element's 32 random bits, round away from zero iff r < d * 2^16. */
static uint16_t f32_to_bf16_sr(float f, uint32_t r)
{
    uint32_t u = f32_to_bits(f), d = u & 0xffffu;
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return f32_to_bf16(f); /* NaN */
#ifdef GP_EXAMPLE_BIASED_SR
    int up = (r >> 16) < d / 2; /* the bug: rounds up half as often as it should */
#else
    int up = (r >> 16) < d;
#endif
    return (uint16_t)((u >> 16) + (uint32_t)up); /* a carry moves into the exponent, up to inf */
}

static int accumulate(const gp_plugin_accumulate_args *a)
{
    int32_t af = a->acc_format;
    int sr = a->rounding == GP_PLUGIN_STOCHASTIC, kahan = a->rounding == GP_PLUGIN_KAHAN;
    if (a->ftz || !supported(a->grad_format) || !supported(af) || a->rounding == GP_PLUGIN_RTZ ||
        (sr && af != GP_PLUGIN_BF16))
        return 1; /* not implemented here */
    for (uint64_t i = 0; i < a->n; i++) {
        float acc = load(af, a->acc, i), g = load(a->grad_format, a->grad, i);
#ifdef GP_EXAMPLE_RUNNING_MEAN
        /* the bug: each micro-batch's gradient averaged into the buffer (a mean of
         * micro-batch means where the loss was already normalised) */
        g = (g - acc) / (float)(a->microbatch + 1);
#endif
        if (kahan) {
#ifdef GP_EXAMPLE_KAHAN_DROPPED
            store(af, a->acc, i, acc + g); /* the bug: the compensation is never used */
#else
            float c = load(af, a->comp, i), y = g - c, sum = acc + y;
            store(af, a->acc, i, sum);
            store(af, a->comp, i, (load(af, a->acc, i) - acc) - y);
#endif
            continue;
        }
        float sum = acc + g;
#ifdef GP_EXAMPLE_BF16_AS_FP32
        if (af == GP_PLUGIN_FP32)
            sum = bf16_to_f32(f32_to_bf16(sum)); /* the bug: a bf16 accumulator in disguise */
#endif
        if (sr)
            ((uint16_t *)a->acc)[i] = f32_to_bf16_sr(sum, gp_rand_u32(a->seed, a->stream, a->first_index + i));
        else
            store(af, a->acc, i, sum);
    }
    return 0;
}

static int unscale(gp_plugin_unscale_args *a)
{
    if (a->ftz || !supported(a->acc_format))
        return 1;
    for (uint64_t i = 0; i < a->n; i++) {
        float v = load(a->acc_format, a->acc, i);
        if (v - v != 0.0f) /* inf or NaN */
            a->found_inf = 1;
        store(a->acc_format, a->acc, i, v * a->inv_scale);
    }
    return 0;
}

/* fp32 value -> storage format -> fp32: what writing a float result into a tensor of
 * that dtype and reading it back gives. */
static float round_to(int32_t fmt, float v)
{
    switch (fmt) {
    case GP_PLUGIN_FP32: return v;
    case GP_PLUGIN_BF16: return bf16_to_f32(f32_to_bf16(v));
    default: return f16_to_f32(f32_to_f16(v));
    }
}

/* AdamW as torch's CUDA kernels compute it (see the ABI header for the formula):
 * lerp and addcmul/addcdiv as fused multiply-adds, the scalars in double as Python
 * computes them. Round-to-nearest-even only. */
static int adamw(const gp_plugin_adamw_args *a)
{
    int32_t pf = a->param_format, sf = a->state_format;
    if (a->rounding != GP_PLUGIN_RNE || !supported(pf) || !supported(a->grad_format) || !supported(sf))
        return 1;
    if (*a->found_inf)
        return 0; /* a skipped step */
#ifdef GP_EXAMPLE_BC_OFF_BY_ONE
    double t = (double)(a->step + 1); /* the bug: bias corrections of the next step */
#else
    double t = (double)a->step;
#endif
    double bc1 = 1.0 - pow(a->beta1, t), bc2 = 1.0 - pow(a->beta2, t);
    float decay = (float)(1.0 - a->lr * a->weight_decay);
    float w1 = (float)(1.0 - a->beta1), beta2 = (float)a->beta2, cv = (float)(1.0 - a->beta2);
    float inv_bc2_sqrt = 1.0f / (float)sqrt(bc2), eps = (float)a->eps, neg_step = (float)(-(a->lr / bc1));
#ifdef GP_EXAMPLE_COUPLED_WD
    float wd = (float)a->weight_decay; /* the bug: Adam's L2 term in the gradient, no decoupled decay */
    decay = 1.0f;
#endif
    for (uint64_t i = 0; i < a->n; i++) {
        float g = load(a->grad_format, a->grad, i) * a->inv_scale;
        float w = a->variant == GP_PLUGIN_ADAMW_MASTER ? ((const float *)a->master)[i] : load(pf, a->param, i);
#ifdef GP_EXAMPLE_COUPLED_WD
        g = fmaf(wd, w, g);
#endif
        float m = load(sf, a->m, i), v = load(sf, a->v, i);
        float diff = g - m;
        m = round_to(sf, w1 < 0.5f ? fmaf(w1, diff, m) : fmaf(-diff, 1.0f - w1, g));
        float vb = round_to(sf, v * beta2);
        v = round_to(sf, cv == 1.0f ? fmaf(g, g, vb) : fmaf(cv, g * g, vb));
#ifdef GP_EXAMPLE_EPS_IN_SQRT
        float q = round_to(sf, round_to(sf, v * inv_bc2_sqrt) * inv_bc2_sqrt);
        float den = round_to(sf, sqrtf(q + eps)); /* the bug: eps under the square root */
#else
        float q = round_to(sf, round_to(sf, sqrtf(v)) * inv_bc2_sqrt);
        float den = round_to(sf, q + eps);
#endif
        float ratio = m / den;
        store(sf, a->m, i, m);
        store(sf, a->v, i, v);
        switch (a->variant) {
        case GP_PLUGIN_ADAMW_PLAIN:
            store(pf, a->param, i, fmaf(neg_step, ratio, round_to(pf, w * decay)));
            break;
        case GP_PLUGIN_ADAMW_ONE_STORE:
            store(pf, a->param, i, fmaf(neg_step, ratio, w * decay));
            break;
        case GP_PLUGIN_ADAMW_MASTER: {
            float nm = fmaf(neg_step, ratio, w * decay);
            ((float *)a->master)[i] = nm;
            store(pf, a->param, i, nm);
            break;
        }
        default: { /* Kahan: the compensated sum of the decayed weight and the update */
            float d = w * decay, c = load(pf, a->comp, i);
            float y = fmaf(neg_step, ratio, -c), sum = d + y;
            store(pf, a->param, i, sum);
            store(pf, a->comp, i, (load(pf, a->param, i) - d) - y);
            break;
        }
        }
    }
    return 0;
}

/* Clipping's sum of squares over gradprec's tree: halves split at the largest power of
 * two below n, each square and each sum rounded to fp32. */
static float tree_sumsq(int32_t fmt, const void *grad, uint64_t lo, uint64_t n)
{
    if (n == 1) {
        float x = load(fmt, grad, lo);
        return x * x;
    }
    uint64_t h = 1;
    while (h * 2 < n)
        h *= 2;
    float left = tree_sumsq(fmt, grad, lo, h), right = tree_sumsq(fmt, grad, lo + h, n - h);
    return left + right;
}

static int grad_sumsq(gp_plugin_sumsq_args *a)
{
    if (!supported(a->format))
        return 1;
    a->sumsq = a->n ? tree_sumsq(a->format, a->grad, 0, a->n) : 0.0f;
    return 0;
}

static int grad_scale(const gp_plugin_scale_args *a)
{
    if (a->ftz || !supported(a->format))
        return 1;
    for (uint64_t i = 0; i < a->n; i++)
        store(a->format, a->grad, i, load(a->format, a->grad, i) * a->coef);
    return 0;
}

/* torch's _amp_update_scale_: products in double, stored as float. */
static int scaler_update(const gp_plugin_scaler_args *a)
{
    if (*a->found_inf) {
        *a->scale = (float)((double)*a->scale * a->backoff);
        *a->tracker = 0;
    } else if (*a->tracker + 1 == a->interval) {
        float grown = (float)((double)*a->scale * a->growth);
        if (grown - grown == 0.0f) /* finite */
            *a->scale = grown;
        *a->tracker = 0;
    } else {
        *a->tracker += 1;
    }
    return 0;
}

/* Several tensors' chunks for one micro-batch (ABI version 3): each in turn. */
static int accumulate_many(const gp_plugin_accumulate_args *a, uint32_t count)
{
#if defined(GP_EXAMPLE_ABI2)
    (void)a;
    (void)count;
    abort(); /* a version 2 table has no such entry: gradprec must never call it */
#else
    for (uint32_t j = 0; j < count; j++) {
        int rc = accumulate(&a[j]);
        if (rc != 0)
            return rc;
    }
    return 0;
#endif
}

const gp_plugin *gp_plugin_entry(void);

static const gp_plugin plugin = {
#if defined(GP_EXAMPLE_ABI2)
    2u, /* built as an older plugin: the loader reads only the version 2 prefix */
#else
    GP_PLUGIN_ABI_VERSION,
#endif
#if defined(GP_EXAMPLE_BF16_AS_FP32)
    "bf16-claiming-fp32",
#elif defined(GP_EXAMPLE_EPS_IN_SQRT)
    "adamw-eps-inside-sqrt",
#elif defined(GP_EXAMPLE_COUPLED_WD)
    "adamw-coupled-weight-decay",
#elif defined(GP_EXAMPLE_BC_OFF_BY_ONE)
    "adamw-bias-correction-off-by-one",
#elif defined(GP_EXAMPLE_KAHAN_DROPPED)
    "kahan-compensation-dropped",
#elif defined(GP_EXAMPLE_BIASED_SR)
    "biased-stochastic-rounding",
#elif defined(GP_EXAMPLE_RUNNING_MEAN)
    "mean-of-microbatch-means",
#elif defined(GP_EXAMPLE_ABI2)
    "example-abi2",
#else
    "example",
#endif
    GP_PLUGIN_HOST, accumulate, unscale, adamw, grad_sumsq, grad_scale, scaler_update, accumulate_many,
};

const gp_plugin *gp_plugin_entry(void)
{
    return &plugin;
}
