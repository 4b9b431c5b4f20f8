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
 * the SDXL LoRA write-up — and gradprec's default suite fails it, naming absorption. */
#include <stdint.h>
#include <string.h>

#include "gp_plugin_abi.h"

static float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* bf16 <-> fp32 */
static float bf16_to_f32(uint16_t h)
{
    return bits_to_f32((uint32_t)h << 16);
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN, quiet */
    u += 0x7fffu + ((u >> 16) & 1u);          /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

/* fp16 <-> fp32 */
static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31)
        return bits_to_f32(sign | 0x7f800000u | (m << 13));          /* inf, NaN */
    if (e == 0) {
        float v = (float)m * 0x1p-24f;                                 /* subnormal: exact */
        return sign ? -v : v;
    }
    return bits_to_f32(sign | ((e + 112u) << 23) | (m << 13));
}

static uint16_t f32_to_f16(float f)
{
    uint32_t u = f32_to_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));     /* NaN, quiet */
    if (a >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);                              /* >= 65520: inf */
    if (a >= 0x38800000u) {                                             /* normal: >= 2^-14 */
        uint32_t r = a - 0x38000000u;                                   /* rebias 127 -> 15 */
        return (uint16_t)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    }
    /* subnormal: adding 0.5 makes the hardware round |f| to a multiple of 2^-24 (RNE) */
    float t = bits_to_f32(a) + 0.5f;
    return (uint16_t)(sign | (f32_to_bits(t) - 0x3f000000u));
}

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

static int accumulate(const gp_plugin_accumulate_args *a)
{
    if (a->rounding != GP_PLUGIN_RNE || a->ftz || !supported(a->grad_format) || !supported(a->acc_format))
        return 1; /* not implemented here */
    for (uint64_t i = 0; i < a->n; i++) {
        float sum = load(a->acc_format, a->acc, i) + load(a->grad_format, a->grad, i);
#ifdef GP_EXAMPLE_BF16_AS_FP32
        if (a->acc_format == GP_PLUGIN_FP32)
            sum = bf16_to_f32(f32_to_bf16(sum)); /* the bug: a bf16 accumulator in disguise */
#endif
        store(a->acc_format, a->acc, i, sum);
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

const gp_plugin *gp_plugin_entry(void);

static const gp_plugin plugin = {
    GP_PLUGIN_ABI_VERSION,
#ifdef GP_EXAMPLE_BF16_AS_FP32
    "bf16-claiming-fp32",
#else
    "example",
#endif
    GP_PLUGIN_HOST, accumulate, unscale,
};

const gp_plugin *gp_plugin_entry(void)
{
    return &plugin;
}
