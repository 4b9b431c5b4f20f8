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
 * The correct plugin implements rne and Kahan accumulation for fp32/bf16/fp16 (fp8
 * gradients read), round-toward-zero into fp32/bf16/fp16, FTZ, and stochastic rounding
 * into bf16 (the accumulator, and AdamW's stored bf16 weights).
 *
 * The wrong plugins of the default suite's net (tests/wrong_plugins.sh; each correct but
 * for one bug, GP_WRONG_<NAME> below): one per compared output, per kind of non-finite
 * value, per loss-scaler transition, per stochastic-rounding property, a partial-window
 * accumulator and the corner cases. Each must fail the default suite with --compare cpu;
 * the stochastic-rounding ones without --compare too. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arith/gp_philox.h"
#include "gp_example_formats.h"
#include "gp_plugin_abi.h"

/* fp8 -> fp32: e5m2 is the top byte of an fp16; e4m3 ("fn": no infinity, S.1111.111 is
 * NaN) has bias 7 and subnormals m * 2^-9. */
static float fp8_to_f32(int32_t fmt, uint8_t b)
{
    if (fmt == GP_PLUGIN_FP8_E5M2)
        return f16_to_f32((uint16_t)(b << 8));
    uint32_t e = (b >> 3) & 0xfu, m = b & 7u;
    float v;
#ifdef GP_WRONG_FP8_E4M3_BIAS
    int bias = 8; /* the bug: e4m3 decoded with bias 8 */
#else
    int bias = 7;
#endif
    if (e == 15 && m == 7)
        v = NAN;
    else if (e == 0)
        v = ldexpf((float)m, 1 - bias - 3);
    else
        v = ldexpf((float)(8 + m), (int)e - bias - 3);
    return (b & 0x80u) ? -v : v;
}

/* fp32 -> fp8, round to nearest even (a plain float computation: the quantum q of v's
 * binade, at least the subnormal quantum, and nearbyintf of v / q, exact by a power of two;
 * the default rounding mode is to nearest even). OCP OFP8: beyond the largest finite value
 * (448 for e4m3, 57344 for e5m2) e4m3 gives its NaN S.1111.111 and e5m2 infinity; a NaN
 * stays NaN; inf gives NaN in e4m3. With rtz the magnitude is truncated and overflow
 * stays at the largest finite value (IEEE). */
static uint8_t f32_to_fp8(int32_t fmt, float v, int rtz)
{
    int e4m3 = fmt == GP_PLUGIN_FP8_E4M3, mbits = e4m3 ? 3 : 2, emin = e4m3 ? -6 : -14;
    float maxfin = e4m3 ? 448.0f : 57344.0f;
    uint8_t sign = signbit(v) ? 0x80u : 0u, nan = e4m3 ? 0x7fu : 0x7eu, inf = e4m3 ? 0x7fu : 0x7cu;
    float a = fabsf(v);
    if (a != a)
        return (uint8_t)(sign | nan);
    if (a == INFINITY)
        return (uint8_t)(sign | inf);
    int ex;
    (void)frexpf(a, &ex); /* a in [2^(ex-1), 2^ex) */
    int eb = ex - 1 < emin ? emin : ex - 1;
    float q = ldexpf(1.0f, eb - mbits), r = (rtz ? truncf(a / q) : nearbyintf(a / q)) * q;
#ifdef GP_WRONG_FP8_SATURATES
    if (r > maxfin)
        r = maxfin; /* the bug: overflow saturates (as CUDA's .satfinite conversions do) */
#endif
    if (r > maxfin)
        return (uint8_t)(sign | (rtz ? (e4m3 ? 0x7eu : 0x7bu) : inf));
    (void)frexpf(r, &ex);
    if (r == 0.0f)
        return sign;
    if (ex - 1 < emin) /* subnormal: r / 2^(emin - mbits) is the significand */
        return (uint8_t)(sign | (uint32_t)(r / ldexpf(1.0f, emin - mbits)));
    uint32_t biased = (uint32_t)(ex - 1 - emin + 1), frac = (uint32_t)(ldexpf(r, mbits - (ex - 1))) - (1u << mbits);
    return (uint8_t)(sign | (biased << mbits) | frac);
}

static float load(int32_t fmt, const void *p, uint64_t i)
{
    switch (fmt) {
    case GP_PLUGIN_FP32: return ((const float *)p)[i];
    case GP_PLUGIN_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case GP_PLUGIN_FP16: return f16_to_f32(((const uint16_t *)p)[i]);
    default: return fp8_to_f32(fmt, ((const uint8_t *)p)[i]);
    }
}

/* Smallest normal of a storable format. */
static float min_normal(int32_t fmt)
{
    return fmt == GP_PLUGIN_FP16 || fmt == GP_PLUGIN_FP8_E5M2 ? 0x1p-14f : fmt == GP_PLUGIN_FP8_E4M3 ? 0x1p-6f : 0x1p-126f;
}

/* fp32 -> fp16 toward zero: the dropped bits are cut; beyond the largest finite value a
 * finite input stays at 65504 (IEEE: round toward zero never overflows to inf). */
static uint16_t f32_to_f16_rtz(float f)
{
    uint32_t u = f32_to_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a >= 0x7f800000u)
        return f32_to_f16(f); /* inf, NaN */
    if (a >= 0x47800000u)
        return (uint16_t)(sign | 0x7bffu); /* >= 65536: saturate */
    if (a >= 0x38800000u)
        return (uint16_t)(sign | ((a - 0x38000000u) >> 13));
    return (uint16_t)(sign | (uint32_t)(bits_to_f32(a) * 0x1p24f)); /* subnormal: truncate to 2^-24 */
}

/* Store v in fmt, round to nearest even, or toward zero (rtz); with ftz a result below
 * the format's min normal becomes a zero of its sign. */
static void store_mode(int32_t fmt, void *p, uint64_t i, float v, int ftz, int rtz)
{
#ifndef GP_WRONG_FTZ_IGNORED
    if (ftz && fabsf(v) < min_normal(fmt))
        v = copysignf(0.0f, v);
#else
    (void)ftz; /* the bug: subnormal results kept under FTZ */
    (void)min_normal;
#endif
#ifdef GP_WRONG_RTZ_AS_RNE
    rtz = 0; /* the bug: rounds to nearest where toward zero was asked */
#endif
    switch (fmt) {
    case GP_PLUGIN_FP32: ((float *)p)[i] = v; break;
    case GP_PLUGIN_BF16: {
        uint32_t u = f32_to_bits(v);
        ((uint16_t *)p)[i] = rtz && (u & 0x7fffffffu) <= 0x7f800000u ? (uint16_t)(u >> 16) : f32_to_bf16(v);
        break;
    }
    case GP_PLUGIN_FP16: ((uint16_t *)p)[i] = rtz ? f32_to_f16_rtz(v) : f32_to_f16(v); break;
    default: ((uint8_t *)p)[i] = f32_to_fp8(fmt, v, rtz); break;
    }
}

static void store(int32_t fmt, void *p, uint64_t i, float v)
{
    store_mode(fmt, p, i, v, 0, 0);
}

/* fl32(v * k) with FTZ: the exact product (24 x 24 bits fit a double) below 2^-126 is
 * flushed before rounding. */
static float mul_ftz(float v, float k, int ftz)
{
    double prod = (double)v * (double)k;
    if (ftz && fabs(prod) < 0x1p-126)
        return (float)copysign(0.0, prod);
    return (float)prod;
}

static int supported(int32_t fmt)
{
    return fmt == GP_PLUGIN_FP32 || fmt == GP_PLUGIN_BF16 || fmt == GP_PLUGIN_FP16;
}

/* Formats this plugin reads gradients in and accumulates, unscales and clips into (fp8
 * too; AdamW's params and states: `supported` only). */
static int readable(int32_t fmt)
{
    return supported(fmt) || fmt == GP_PLUGIN_FP8_E4M3 || fmt == GP_PLUGIN_FP8_E5M2;
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
#elif defined(GP_WRONG_SR_UNSHIFTED)
    int up = r < d; /* the bug: 32 random bits against 16 dropped bits: almost never up */
#else
    int up = (r >> 16) < d;
#endif
    return (uint16_t)((u >> 16) + (uint32_t)up); /* a carry moves into the exponent, up to inf */
}

/* a + b rounded toward zero in fp32: the exact sum is s + err (binary64 TwoSum of two
 * floats); f = (float)s is the nearest float to it (s lies within 2^-53 of the sum), so
 * the truncation is f, or f's neighbour toward zero when f is beyond the sum (the sign
 * of (f - s) - err: f - s is exact). Overflow gives +-FLT_MAX; NaN and inf stay. */
static float f32_add_rtz(float a, float b)
{
    double s = (double)a + (double)b, bb = s - (double)a;
    double err = ((double)a - (s - bb)) + ((double)b - bb);
    float f = (float)s;
    double d = ((double)f - s) - err;
    if ((f > 0.0f && d > 0.0) || (f < 0.0f && d < 0.0))
        f = nextafterf(f, 0.0f);
    return f;
}

/* The 32 random bits of element i of an accumulation. */
static uint32_t sr_bits(const gp_plugin_accumulate_args *a, uint64_t i)
{
#if defined(GP_WRONG_SR_SHARED_PAIRS)
    return gp_rand_u32(a->seed, a->stream, (a->first_index + i) >> 1); /* the bug: one draw per pair */
#elif defined(GP_WRONG_SR_PERIOD_2_16)
    return gp_rand_u32(a->seed, a->stream, (a->first_index + i) & 0xffffu); /* the bug: bits repeat every 2^16 elements */
#elif defined(GP_WRONG_SR_SAME_EACH_MICROBATCH)
    return gp_rand_u32(a->seed, 0, a->first_index + i); /* the bug: the same bits every micro-batch */
#else
    return gp_rand_u32(a->seed, a->stream, a->first_index + i);
#endif
}

static int accumulate(const gp_plugin_accumulate_args *a)
{
    int32_t af = a->acc_format;
    int sr = a->rounding == GP_PLUGIN_STOCHASTIC, kahan = a->rounding == GP_PLUGIN_KAHAN;
    int rtz = a->rounding == GP_PLUGIN_RTZ;
    if (!readable(a->grad_format) || !readable(af) || (sr && (af != GP_PLUGIN_BF16 || a->ftz)) ||
        (kahan && !supported(af)))
        return 1; /* not implemented here */
    for (uint64_t i = 0; i < a->n; i++) {
        float acc = load(af, a->acc, i), g = load(a->grad_format, a->grad, i);
#ifdef GP_WRONG_WINDOW_OF_FOUR
        if (a->microbatch % 4 == 0)
            acc = 0.0f; /* the bug: the accumulator restarts every 4 micro-batches */
#endif
#ifdef GP_EXAMPLE_RUNNING_MEAN
        /* the bug: each micro-batch's gradient averaged into the buffer (a mean of
         * micro-batch means where the loss was already normalised) */
        g = (g - acc) / (float)(a->microbatch + 1);
#endif
        if (kahan) {
#ifdef GP_EXAMPLE_KAHAN_DROPPED
            store_mode(af, a->acc, i, acc + g, a->ftz, 0); /* the bug: the compensation is never used */
#elif defined(GP_WRONG_KAHAN_COMP_NEGATED)
            /* the bug: the compensation kept with the opposite sign (and added back): the
             * sums are the same, the comp buffer is not what the ABI says */
            float c = load(af, a->comp, i), y = g + c, sum = acc + y;
            store_mode(af, a->acc, i, sum, a->ftz, 0);
            store_mode(af, a->comp, i, y - (load(af, a->acc, i) - acc), a->ftz, 0);
#else
            float c = load(af, a->comp, i), y = g - c, sum = acc + y;
            store_mode(af, a->acc, i, sum, a->ftz, 0);
            store_mode(af, a->comp, i, (load(af, a->acc, i) - acc) - y, a->ftz, 0);
#endif
            continue;
        }
        float sum = rtz && af == GP_PLUGIN_FP32 ? f32_add_rtz(acc, g) : acc + g;
#ifdef GP_WRONG_BF16_PAIR_ADD
        if (af == GP_PLUGIN_BF16 && a->grad_format == GP_PLUGIN_BF16 && !sr && !rtz) {
            /* the bug: bf16 + bf16 truncated (an all-reduce's additions in a bf16 reduce dtype) */
            ((uint16_t *)a->acc)[i] = (uint16_t)(f32_to_bits(sum) >> 16);
            continue;
        }
#endif
#ifdef GP_EXAMPLE_BF16_AS_FP32
        if (af == GP_PLUGIN_FP32)
            sum = bf16_to_f32(f32_to_bf16(sum)); /* the bug: a bf16 accumulator in disguise */
#endif
        if (sr)
            ((uint16_t *)a->acc)[i] = f32_to_bf16_sr(sum, sr_bits(a, i));
        else
            store_mode(af, a->acc, i, sum, a->ftz, rtz);
    }
    return 0;
}

/* Is v non-finite, as the unscale's check sees it? */
static int nonfinite(float v)
{
#if defined(GP_WRONG_MISSES_POSINF)
    return v < -FLT_MAX || v != v; /* the bug: +inf passes */
#elif defined(GP_WRONG_MISSES_NEGINF)
    return v > FLT_MAX || v != v; /* the bug: -inf passes */
#elif defined(GP_WRONG_MISSES_NAN)
    return v > FLT_MAX || v < -FLT_MAX; /* the bug: NaN passes */
#else
    return v - v != 0.0f; /* inf or NaN */
#endif
}

static int unscale(gp_plugin_unscale_args *a)
{
    if (!readable(a->acc_format))
        return 1;
    float inv = a->inv_scale;
#ifdef GP_WRONG_INV_SCALE_FP16
    inv = f16_to_f32(f32_to_f16(inv)); /* the bug: the multiplier kept in fp16 */
#endif
    for (uint64_t i = 0; i < a->n; i++) {
        float v = load(a->acc_format, a->acc, i), r = mul_ftz(v, inv, a->ftz);
#ifdef GP_WRONG_FOUND_INF_AFTER_UNSCALE
        store_mode(a->acc_format, a->acc, i, r, a->ftz, 0);
        v = load(a->acc_format, a->acc, i); /* the bug: the check looks at the unscaled, stored value */
#endif
        if (nonfinite(v))
            a->found_inf = 1;
        store_mode(a->acc_format, a->acc, i, r, a->ftz, 0);
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

/* The new weight v of element i stored in the param format: RNE, or (sr) stochastically
 * rounded to bf16 from the fp32 value with the element's bits of the AdamW stream (the
 * rule of f32_to_bf16_sr). */
static void store_param(const gp_plugin_adamw_args *a, uint64_t i, float v, int sr)
{
    if (sr)
        ((uint16_t *)a->param)[i] = f32_to_bf16_sr(v, gp_rand_u32(a->seed, a->stream, a->first_index + i));
    else
        store(a->param_format, a->param, i, v);
}

/* AdamW as torch's CUDA kernels compute it (see the ABI header for the formula):
 * lerp and addcmul/addcdiv as fused multiply-adds, the scalars in double as Python
 * computes them. Round-to-nearest-even only. */
static int adamw(const gp_plugin_adamw_args *a)
{
    int32_t pf = a->param_format, sf = a->state_format;
    int sr = a->rounding == GP_PLUGIN_STOCHASTIC; /* of the stored bf16 weights (not Kahan) */
    if ((a->rounding != GP_PLUGIN_RNE && !(sr && pf == GP_PLUGIN_BF16 && a->variant != GP_PLUGIN_ADAMW_KAHAN)) ||
        !supported(pf) || !readable(a->grad_format) || !supported(sf) ||
        a->variant < GP_PLUGIN_ADAMW_PLAIN || a->variant > GP_PLUGIN_ADAMW_KAHAN ||
        (a->struct_size >= sizeof *a && a->state_quant != GP_PLUGIN_STATE_PLAIN)) /* m, v as arrays only */
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
    float inv_bc2_sqrt = (float)(1.0 / sqrt(bc2)), eps = (float)a->eps, neg_step = (float)(-(a->lr / bc1));
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
#ifdef GP_WRONG_M_UNFUSED
        m = round_to(sf, w1 < 0.5f ? m + w1 * diff : g - diff * (1.0f - w1)); /* the bug: two roundings */
#else
        m = round_to(sf, w1 < 0.5f ? fmaf(w1, diff, m) : fmaf(-diff, 1.0f - w1, g));
#endif
        float vb = round_to(sf, v * beta2);
#ifdef GP_WRONG_V_UNFUSED
        v = round_to(sf, cv == 1.0f ? g * g + vb : cv * (g * g) + vb); /* the bug: two roundings */
#else
        v = round_to(sf, cv == 1.0f ? fmaf(g, g, vb) : fmaf(cv, g * g, vb));
#endif
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
#ifdef GP_WRONG_DECAY_AFTER_UPDATE
            /* the bug: weight decay applied to the updated weight */
            store_param(a, i, round_to(pf, fmaf(neg_step, ratio, w)) * decay, sr);
#else
            store_param(a, i, fmaf(neg_step, ratio, round_to(pf, w * decay)), sr);
#endif
            break;
        case GP_PLUGIN_ADAMW_ONE_STORE:
            store_param(a, i, fmaf(neg_step, ratio, w * decay), sr);
            break;
        case GP_PLUGIN_ADAMW_MASTER: {
            float nm = fmaf(neg_step, ratio, w * decay);
#ifndef GP_WRONG_MASTER_STALE
            ((float *)a->master)[i] = nm; /* (the bug: the master is never written back) */
#endif
            store_param(a, i, nm, sr);
            break;
        }
        default: { /* Kahan: the compensated sum of the decayed weight and the update */
            float d = w * decay, c = load(pf, a->comp, i);
#ifdef GP_WRONG_ADAMW_COMP_NEGATED
            /* the bug: the compensation kept with the opposite sign (the params are the same) */
            float y = fmaf(neg_step, ratio, c), sum = d + y;
            store(pf, a->param, i, sum);
            store(pf, a->comp, i, y - (load(pf, a->param, i) - d));
#else
            float y = fmaf(neg_step, ratio, -c), sum = d + y;
            store(pf, a->param, i, sum);
            store(pf, a->comp, i, (load(pf, a->param, i) - d) - y);
#endif
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
    if (!readable(a->format))
        return 1;
#ifdef GP_WRONG_SUMSQ_SEQUENTIAL
    float acc = 0.0f; /* the bug: left to right instead of gradprec's tree */
    for (uint64_t i = 0; i < a->n; i++) {
        float x = load(a->format, a->grad, i);
        acc += x * x;
    }
    a->sumsq = acc;
    (void)tree_sumsq;
#else
    a->sumsq = a->n ? tree_sumsq(a->format, a->grad, 0, a->n) : 0.0f;
#endif
    return 0;
}

static int grad_scale(const gp_plugin_scale_args *a)
{
    if (!readable(a->format))
        return 1;
    for (uint64_t i = 0; i < a->n; i++) {
#ifdef GP_WRONG_CLIP_DIVIDE
        float r = load(a->format, a->grad, i) / (1.0f / a->coef); /* the bug: divides by 1/coef */
#else
        float r = mul_ftz(load(a->format, a->grad, i), a->coef, a->ftz);
#endif
        store_mode(a->format, a->grad, i, r, a->ftz, 0);
    }
    return 0;
}

/* torch's _amp_update_scale_: products in double, stored as float. */
static int scaler_update(const gp_plugin_scaler_args *a)
{
#ifdef GP_WRONG_SCALER_GROWTH_FIRST
    if (*a->tracker + 1 == a->interval) { /* the bug: growth checked before the non-finite flag */
        *a->scale = (float)((double)*a->scale * a->growth);
        *a->tracker = 0;
        return 0;
    }
#endif
    if (*a->found_inf) {
        *a->scale = (float)((double)*a->scale * a->backoff);
#ifndef GP_WRONG_SCALER_BACKOFF_KEEPS_TRACKER
        *a->tracker = 0; /* (the bug: the tracker survives a backoff) */
#endif
#ifdef GP_WRONG_SCALER_GROWTH_LATE
    } else if (*a->tracker == a->interval) { /* the bug: grows one step late */
#elif defined(GP_WRONG_SCALER_GROWTH_EARLY)
    } else if (*a->tracker + 2 >= a->interval) { /* the bug: grows one step early */
#else
    } else if (*a->tracker + 1 == a->interval) {
#endif
        float grown = (float)((double)*a->scale * a->growth);
#ifdef GP_WRONG_SCALER_GROWTH_TO_INF
        *a->scale = grown; /* the bug: an infinite scale is kept */
#else
        if (grown - grown == 0.0f) /* finite */
            *a->scale = grown;
#endif
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
#elif defined(GP_WRONG_NAME)
    GP_WRONG_NAME,
#else
    "example",
#endif
    GP_PLUGIN_HOST, accumulate, unscale, adamw, grad_sumsq, grad_scale, scaler_update, accumulate_many,
};

const gp_plugin *gp_plugin_entry(void)
{
    return &plugin;
}
