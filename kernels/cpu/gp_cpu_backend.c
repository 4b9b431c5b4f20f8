/* gp_cpu_backend.c — the CPU emulation backend: the per-element steps of
 * kernels/arith applied in a loop. The reference implementation every other backend
 * (CUDA, plugins) is compared with bit for bit. */
#include "gp_cpu_backend.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../arith/gp_accum.h"
#include "../arith/gp_adamw.h"
#include "../arith/gp_clip.h"
#include "../arith/gp_scaler.h"
#include "../arith/gp_philox.h"
#include "gp_cpu_adamw.h"
#include "gp_cpu_philox.h"
#include "gp_lowbit.h"

/* 0 (the coverage build): AdamW runs its definition, gp_adamw_step, per element */
#ifndef GP_VECTOR_BLOCKS
#define GP_VECTOR_BLOCKS 1
#endif

/* Widen a stored gradient of format gf to an fp32 value (exact). */
static inline float grad_value(gp_format gf, const void *grad, uint64_t i)
{
    return gp_f32_from_bits(gp_fmt_to_f32_bits(gf, gp_pack_get(gf, grad, i)));
}

/* The two common cases get vectorised loops, with AVX-512 and AVX2 clones chosen at run
 * time on x86-64 (the same IEEE operations in wider registers: -ffp-contract=off, so
 * nothing contracts, and the results are bit for bit those of the general loop below). */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) /* ThreadSanitizer cannot run an
                                                             ifunc resolver at load time */
#define GP_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define GP_CPU_CLONES
#endif

/* fp32 grads into fp32, RNE, no FTZ: plain IEEE adds. */
GP_CPU_CLONES static void accumulate_f32_rne(float *acc, const float *g, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        acc[i] = acc[i] + g[i];
}

/* fp32 grads into bf16, RNE, no FTZ: widen, add, round back. */
GP_CPU_CLONES static void accumulate_bf16_rne(uint16_t *acc, const float *g, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        float s = gp_f32_from_bits((uint32_t)acc[i] << 16) + g[i];
        acc[i] = (uint16_t)gp_bf16_rne_from_f32_bits(gp_f32_bits(s));
    }
}

/* bf16 grads: widened to fp32 by the bit move << 16, which is gp_fmt_to_f32_bits(GP_BF16, .)
 * on every input, NaNs included. Into fp32 and into bf16, as the two loops above. */
GP_CPU_CLONES static void accumulate_f32_rne_bf16g(float *acc, const uint16_t *g, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        acc[i] = acc[i] + gp_f32_from_bits((uint32_t)g[i] << 16);
}

GP_CPU_CLONES static void accumulate_bf16_rne_bf16g(uint16_t *acc, const uint16_t *g, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        float s = gp_f32_from_bits((uint32_t)acc[i] << 16) + gp_f32_from_bits((uint32_t)g[i] << 16);
        acc[i] = (uint16_t)gp_bf16_rne_from_f32_bits(gp_f32_bits(s));
    }
}

/* Is any of the fp16 codes g[0..n) infinite or NaN (its exponent field all ones)? A loop
 * without a branch, which vectorises in the callers' clones. */
__attribute__((always_inline)) static inline int f16_any_nonfinite(const uint16_t *g, uint64_t n)
{
    uint32_t bad = 0;
    for (uint64_t j = 0; j < n; j++) /* j: the one loop of this text, named by tests/coverage.py */
        bad |= (uint32_t)((g[j] & 0x7fffu) >= 0x7c00u);
    return bad != 0;
}

/* The fp32 value of the finite fp16 code h, exactly (gp_fmt_to_f32_bits's value): a normal
 * by moving its bits into fp32's fields, a subnormal as its integer magnitude times
 * 2^-24; both computed and one selected, so that a loop of them vectorises. */
__attribute__((always_inline)) static inline float f16_widen_finite(uint16_t h)
{
    uint32_t mag = h & 0x7fffu, sign = (uint32_t)(h & 0x8000u) << 16;
    float nrm = gp_f32_from_bits(sign | (mag + ((127u - 15u) << 10)) << 13);
    float sub = gp_f32_from_bits(sign | gp_f32_bits((float)(int32_t)mag * 0x1p-24f));
    return mag >= 0x400u ? nrm : sub;
}

#if GP_VECTOR_BLOCKS && defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#define GP_CPU_F16C 1
#else
#define GP_CPU_F16C 0
#endif

#if GP_VECTOR_BLOCKS && GP_CPU_F16C
/* Can this CPU run the F16C loops (add_f16_rne_f16c, add_f32_f16g_f16c)? AVX2 (which the
 * OS must enable for the ymm registers) and F16C (CPUID leaf 1, ECX; clang 14's
 * __builtin_cpu_supports does not know it), asked once. */
static int f16c_usable(void)
{
    static _Atomic int known = -1; /* -1: not asked yet */
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (k < 0) {
        unsigned a, b, c, d;
        k = __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k;
}

/* acc[i] = fl32(acc[i] + g[i]) for finite fp16 g: F16C's widening (exact, subnormals
 * included: f16_widen_finite's value) and the IEEE fp32 add, 8 a register; the last few
 * one at a time. (GCC leaves the portable loop below scalar: the subnormal arm's fp32
 * product may not be evaluated unconditionally under -ftrapping-math.) */
__attribute__((target("avx2,f16c"))) static void add_f32_f16g_f16c(float *acc, const uint16_t *g, uint64_t n)
{
    uint64_t i = 0;
    for (; n - i >= 8; i += 8) {
        __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + i)));
        _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), x));
    }
    for (; i < n; i++)
        acc[i] = acc[i] + f16_widen_finite(g[i]);
    _mm256_zeroupper();
}
#endif

/* fp16 grads into fp32, RNE, no FTZ, when every grad is finite (returns 0 and changes
 * nothing otherwise): each widened exactly, then the plain IEEE add as above. */
GP_CPU_CLONES static int accumulate_f32_rne_f16g(float *acc, const uint16_t *g, uint64_t n)
{
    if (f16_any_nonfinite(g, n))
        return 0;
#if GP_VECTOR_BLOCKS && GP_CPU_F16C
    if (f16c_usable()) {
        add_f32_f16g_f16c(acc, g, n);
        return 1;
    }
#endif
    for (uint64_t i = 0; i < n; i++)
        acc[i] = acc[i] + f16_widen_finite(g[i]);
    return 1;
}

#if GP_VECTOR_BLOCKS
#if GP_CPU_F16C
/* acc[i] = fp16(fl32(acc[i] + g[i])), RNE, for finite fp16 acc and g, 8 a register. */
__attribute__((target("avx2,f16c"))) static void add_f16_rne_f16c(uint16_t *acc, const uint16_t *g, uint64_t n)
{
    uint64_t i = 0;
    for (; n - i >= 8; i += 8) {
        __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(acc + i)));
        __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + i)));
        _mm_storeu_si128((__m128i *)(acc + i), _mm256_cvtps_ph(_mm256_add_ps(a, b), _MM_FROUND_TO_NEAREST_INT));
    }
    if (i < n) { /* the last few, through a padded block */
        uint16_t pa[8] = {0}, pg[8] = {0};
        memcpy(pa, acc + i, (size_t)(n - i) * sizeof *pa);
        memcpy(pg, g + i, (size_t)(n - i) * sizeof *pg);
        add_f16_rne_f16c(pa, pg, 8);
        memcpy(acc + i, pa, (size_t)(n - i) * sizeof *pa);
    }
    _mm256_zeroupper();
}
#endif

/* fp16 grads into fp16, RNE, no FTZ, when every acc and grad value is finite (returns 0
 * and changes nothing otherwise): F16C's conversions, fp16 to fp32 exact and fp32 to
 * fp16 rounded to nearest even as IEEE 754 defines it (subnormal results and the overflow
 * to infinity included), around the plain fp32 add: gp_accum_step's fl32(a + g) stored
 * by gp_fmt_store_f32 (tests/test_accum.c checks them equal). */
static int accumulate_f16_rne_f16g(uint16_t *acc, const uint16_t *g, uint64_t n)
{
#if GP_CPU_F16C
    if (!f16c_usable())
        return 0;
    if (f16_any_nonfinite(acc, n) || f16_any_nonfinite(g, n))
        return 0;
    add_f16_rne_f16c(acc, g, n);
    return 1;
#else
    (void)acc, (void)g, (void)n;
    return 0;
#endif
}
#endif

#if GP_VECTOR_BLOCKS
/* Stochastic rounding of fl32(acc + g) into bf16 without FTZ, acc and g finite (gf bf16
 * or fp32), rb[i] the element's random bits: the rounding of gp_fmt_round_info on the
 * bits. s = fl32(acc + g) is finite or an infinity of overflow (never a NaN); bf16 keeps
 * its top 16 bits (fp32's sign and exponent fields: its quantum is 2^16 of fp32's in
 * every binade, subnormals included), the discarded 16 bits are the position f = low / 2^16
 * between the neighbours, and the draw goes away from zero iff rb < floor(f 2^32) =
 * low << 16. Adding 1 to the kept bits is the next magnitude, carrying into the exponent
 * field, and past the largest finite one 0x7f80 (infinity, as the general routine gives);
 * an infinite s has low = 0 and stays. */
GP_CPU_CLONES static void accumulate_bf16_sr(uint16_t *acc, const void *grad, gp_format gf, const uint32_t *rb, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gf == GP_BF16 ? gp_f32_from_bits((uint32_t)((const uint16_t *)grad)[i] << 16) : ((const float *)grad)[i];
        uint32_t x = gp_f32_bits(gp_f32_from_bits((uint32_t)acc[i] << 16) + g);
        acc[i] = (uint16_t)((x >> 16) + (uint32_t)(rb[i] < x << 16));
    }
}

/* Are acc[0..n) (bf16) and grad[0..n) (bf16 or fp32) all finite? */
static int bf16_sr_inputs_finite(const uint16_t *acc, const void *grad, gp_format gf, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= (uint32_t)((acc[i] & 0x7fffu) >= 0x7f80u);
    if (gf == GP_BF16)
        for (size_t i = 0; i < n; i++)
            bad |= (uint32_t)((((const uint16_t *)grad)[i] & 0x7fffu) >= 0x7f80u);
    else
        for (size_t i = 0; i < n; i++)
            bad |= (uint32_t)((((const uint32_t *)grad)[i] & 0x7fffffffu) >= 0x7f800000u);
    return !bad;
}

/* Stochastic rounding, the general loop's steps with its random bits drawn a block at a
 * time: element e's gp_rand_u32 is word e mod 4 of Philox counter e / 4, so one counter
 * serves four elements, and gp_philox_block computes a block's counters in vector
 * registers (the same words: tests/test_gen.c). bf16 accumulators of finite values
 * without FTZ take accumulate_bf16_sr, the rest the per-element step. */
#define SR_BLOCK 1024
static void accumulate_sr(const gp_plugin_accumulate_args *a, gp_format af, gp_format gf)
{
    uint32_t wb[4][SR_BLOCK / 4 + GP_GEN_PAD], rb[SR_BLOCK]; /* the counters of SR_BLOCK elements: at most SR_BLOCK / 4 + 1 */
    uint32_t *const w[4] = {wb[0], wb[1], wb[2], wb[3]};
    size_t wg = gp_fmt_get(gf).width / 8;
    int fast = af == GP_BF16 && (gf == GP_BF16 || gf == GP_FP32) && !a->ftz;
    for (uint64_t i0 = 0; i0 < a->n; i0 += SR_BLOCK) {
        size_t m = (size_t)(a->n - i0 < SR_BLOCK ? a->n - i0 : SR_BLOCK);
        uint64_t e0 = a->first_index + i0, c0 = e0 >> 2;
        if (e0 + (m - 1) >= e0) {
            gp_philox_block(GP_GEN_AUTO, a->seed, a->stream, c0, NULL, (size_t)((e0 & 3) + m + 3) >> 2, w);
            for (size_t j = 0; j < m; j++) {
                uint64_t e = e0 + j;
                rb[j] = w[e & 3][(e >> 2) - c0];
            }
        } else { /* the index wraps past 2^64 inside the block (the counter e / 4 with it) */
            for (size_t j = 0; j < m; j++)
                rb[j] = gp_rand_u32(a->seed, a->stream, e0 + j);
        }
        uint16_t *acc16 = (uint16_t *)a->acc + i0;
        const char *g = (const char *)a->grad + i0 * wg;
        if (fast && bf16_sr_inputs_finite(acc16, g, gf, m)) {
            accumulate_bf16_sr(acc16, g, gf, rb, m);
            continue;
        }
        for (size_t j = 0; j < m; j++) {
            uint32_t comp = 0;
            uint64_t i = i0 + j;
            gp_pack_set(af, a->acc, i,
                        gp_accum_step(af, GP_ACC_STOCHASTIC, a->ftz, gp_pack_get(af, a->acc, i), &comp,
                                      grad_value(gf, a->grad, i), rb[j], (unsigned *)0));
        }
    }
}
#endif

static int cpu_accumulate(const gp_plugin_accumulate_args *a)
{
    gp_format gf = (gp_format)a->grad_format, af = (gp_format)a->acc_format;
    gp_acc_rounding r = (gp_acc_rounding)a->rounding;
    if (af == GP_FP32 && gf == GP_FP32 && r == GP_ACC_RNE && !a->ftz) {
        accumulate_f32_rne(a->acc, a->grad, a->n);
        return 0;
    }
    if (af == GP_BF16 && gf == GP_FP32 && r == GP_ACC_RNE && !a->ftz) {
        accumulate_bf16_rne(a->acc, a->grad, a->n);
        return 0;
    }
    if (af == GP_FP32 && gf == GP_BF16 && r == GP_ACC_RNE && !a->ftz) {
        accumulate_f32_rne_bf16g(a->acc, a->grad, a->n);
        return 0;
    }
    if (af == GP_BF16 && gf == GP_BF16 && r == GP_ACC_RNE && !a->ftz) {
        accumulate_bf16_rne_bf16g(a->acc, a->grad, a->n);
        return 0;
    }
    if (af == GP_FP32 && gf == GP_FP16 && r == GP_ACC_RNE && !a->ftz && accumulate_f32_rne_f16g(a->acc, a->grad, a->n))
        return 0;
#if GP_VECTOR_BLOCKS
    if (af == GP_FP16 && gf == GP_FP16 && r == GP_ACC_RNE && !a->ftz && accumulate_f16_rne_f16g(a->acc, a->grad, a->n))
        return 0;
    if (r == GP_ACC_STOCHASTIC) {
        accumulate_sr(a, af, gf);
        return 0;
    }
#endif
    for (uint64_t i = 0; i < a->n; i++) {
        uint32_t rb = r == GP_ACC_STOCHASTIC ? gp_rand_u32(a->seed, a->stream, a->first_index + i) : 0;
        uint32_t comp = r == GP_ACC_KAHAN ? gp_pack_get(af, a->comp, i) : 0;
        uint32_t out = gp_accum_step(af, r, a->ftz, gp_pack_get(af, a->acc, i), &comp,
                                     grad_value(gf, a->grad, i), rb, (unsigned *)0);
        gp_pack_set(af, a->acc, i, out);
        if (r == GP_ACC_KAHAN)
            gp_pack_set(af, a->comp, i, comp);
    }
    return 0;
}

static int cpu_unscale(gp_plugin_unscale_args *a)
{
    gp_format af = (gp_format)a->acc_format;
    int found = 0;
    if (GP_VECTOR_BLOCKS && af == GP_FP32 && !a->ftz && isfinite(a->inv_scale)) { /* the same, vectorised */
        gp_cpu_unscale_fp32((uint32_t *)a->acc, (size_t)a->n, a->inv_scale, &found);
        if (found)
            a->found_inf = 1;
        return 0;
    }
    for (uint64_t i = 0; i < a->n; i++)
        gp_pack_set(af, a->acc, i,
                    gp_unscale_step(af, a->ftz, gp_pack_get(af, a->acc, i), a->inv_scale, &found, (unsigned *)0));
    if (found)
        a->found_inf = 1;
    return 0;
}

/* A low-bit optimizer state (a->state_quant): the library's AdamW step of
 * kernels/cpu/gp_lowbit.h on the codes and scales, the gradient widened to fp32 (the
 * libraries take .grad.float()); sqrt as order ev takes it. 1 for what the libraries do
 * not have (gp_lowbit_plugin_refuses). */
static int cpu_adamw_lowbit(const gp_plugin_adamw_args *a, gp_adamw_eval ev)
{
    gp_lowbit f = (gp_lowbit)a->state_quant;
    if (gp_lowbit_plugin_refuses(a))
        return 1;
    float *g = malloc((a->n ? a->n : 1) * sizeof *g);
    if (!g)
        return -1;
    gp_format gf = (gp_format)a->grad_format;
    for (uint64_t i = 0; i < a->n; i++)
        g[i] = (float)gp_fmt_to_f64(gf, gp_pack_get(gf, a->grad, i));
    gp_lowbit_adamw_args l = {f, (gp_format)a->param_format, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay,
                              a->step, ev, (size_t)a->n, g, a->param, a->m_codes, a->v_codes, a->m_scales,
                              a->v_scales, NULL, NULL};
    int rc = gp_lowbit_adamw(&l);
    free(g);
    return rc;
}

static int cpu_adamw(const gp_plugin_adamw_args *a)
{
    /* torch's fused kernel: one rounding mode, state in the param's dtype, no extra arrays */
    if (a->variant == GP_PLUGIN_ADAMW_TORCH_FUSED_CPU &&
        !gp_adamw_fused_ok((gp_format)a->param_format, (gp_format)a->state_format,
                           a->rounding == GP_PLUGIN_RNE ? GP_RNE : GP_STOCHASTIC, a->master || a->comp))
        return 1;
    if (*a->found_inf)
        return 0;
    gp_adamw_config cfg = {(gp_format)a->param_format, (gp_format)a->state_format,
                           (gp_adamw_variant)a->variant,
                           a->rounding == GP_PLUGIN_STOCHASTIC ? GP_STOCHASTIC : GP_RNE, GP_ADAMW_TORCH_CUDA, 0, 0};
    uint64_t tail = gp_adamw_fused_tail(cfg.param, a->n); /* this call is torch's tensor */
    /* the operation order, in callers that know the field (older ones: torch's CUDA order) */
    if (a->struct_size >= offsetof(gp_plugin_adamw_args, evaluation) + sizeof a->evaluation &&
        a->evaluation >= GP_PLUGIN_EVAL_TORCH_CUDA && a->evaluation <= GP_PLUGIN_EVAL_TORCH_CPU_FOREACH)
        cfg.eval = (gp_adamw_eval)a->evaluation;
    if (cfg.eval == GP_ADAMW_TORCH_CPU_HOST && gp_torch_sqrt_host_kernel() == GP_MKL_SQRT_NONE)
        return 1; /* torch_cpu_host: not modelled on this build or CPU (gp_torch_sqrt.h) */
    if (a->struct_size >= sizeof *a && a->state_quant != GP_PLUGIN_STATE_PLAIN)
        return cpu_adamw_lowbit(a, cfg.eval);
    gp_adamw_scalars s = gp_adamw_scalars_make(a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, (long)a->step);
    gp_format gf = (gp_format)a->grad_format, pf = cfg.param, sf = cfg.state;
    if (GP_VECTOR_BLOCKS && gp_cpu_adamw_fast_ok(cfg, gf)) { /* the same steps, vectorised */
        gp_cpu_adamw_fast(cfg, &s, gf, a->inv_scale, a->grad, a->param, a->master, a->comp, a->m, a->v, a->n);
        return 0;
    }
    for (uint64_t i = 0; i < a->n; i++) {
        uint32_t master = a->master ? ((const uint32_t *)a->master)[i] : 0;
        uint32_t comp = a->comp ? gp_pack_get(pf, a->comp, i) : 0;
        uint32_t m = gp_pack_get(sf, a->m, i), v = gp_pack_get(sf, a->v, i);
        uint32_t rb = cfg.rounding == GP_STOCHASTIC ? gp_rand_u32(a->seed, a->stream, a->first_index + i) : 0;
        float g = grad_value(gf, a->grad, i) * a->inv_scale;
        cfg.tail = i >= tail;
        uint32_t p = gp_adamw_step(cfg, &s, gp_pack_get(pf, a->param, i), &master, &comp, &m, &v, g, 0, rb,
                                   (unsigned *)0, (unsigned *)0);
        gp_pack_set(pf, a->param, i, p);
        gp_pack_set(sf, a->m, i, m);
        gp_pack_set(sf, a->v, i, v);
        if (a->master)
            ((uint32_t *)a->master)[i] = master;
        if (a->comp)
            gp_pack_set(pf, a->comp, i, comp);
    }
    return 0;
}

/* gp_clip_sumsq a chunk of SUMSQ_BLOCK elements at a time. By property (1) of gp_clip.h
 * (chunking), T over the n squares equals T over the sums of the aligned chunks of 2^8,
 * the last one partial; a full chunk's T is the perfect tree, summed level by level as
 * pair sums of neighbours (each one fp32 RNE addition, in loops that vectorise), the
 * partial one by gp_clip_sumsq itself. The squares are gp_clip_square's, fl32(w * w) of
 * the exact widening: bf16 by the bit move, fp32 as is, fp16 by f16_widen_finite when
 * no value is infinite or NaN;
 * other formats, and fp16 with such a value, take gp_clip_sumsq whole. */
#define SUMSQ_BLOCK 256
GP_CPU_CLONES static float sumsq_perfect(gp_format f, const void *packed, uint64_t i0)
{
    float a[SUMSQ_BLOCK], b[SUMSQ_BLOCK / 2];
    if (f == GP_BF16) {
        const uint16_t *h = (const uint16_t *)packed + i0;
        for (size_t i = 0; i < SUMSQ_BLOCK; i++) {
            float w = gp_f32_from_bits((uint32_t)h[i] << 16);
            a[i] = w * w;
        }
    } else if (f == GP_FP32) {
        const float *x = (const float *)packed + i0;
        for (size_t i = 0; i < SUMSQ_BLOCK; i++)
            a[i] = x[i] * x[i];
    } else { /* fp16, every value finite */
        const uint16_t *h = (const uint16_t *)packed + i0;
        for (size_t i = 0; i < SUMSQ_BLOCK; i++) {
            float w = f16_widen_finite(h[i]);
            a[i] = w * w;
        }
    }
    _Static_assert(SUMSQ_BLOCK == 256, "four passes of two levels each: 256 -> 1");
    for (size_t w = SUMSQ_BLOCK / 2; w >= 2; w /= 4) { /* two levels a pass: a -> b -> a */
        for (size_t i = 0; i < w; i++)
            b[i] = a[2 * i] + a[2 * i + 1];
        for (size_t i = 0; i < w / 2; i++)
            a[i] = b[2 * i] + b[2 * i + 1];
    }
    return a[0];
}

static int cpu_grad_sumsq(gp_plugin_sumsq_args *a)
{
    gp_format f = (gp_format)a->format;
    int fast = f == GP_BF16 || f == GP_FP32 || (f == GP_FP16 && !f16_any_nonfinite(a->grad, a->n));
    if (!fast) {
        a->sumsq = gp_clip_sumsq(f, a->grad, a->n);
        return 0;
    }
    gp_clip_tree t;
    gp_clip_tree_init(&t);
    uint64_t i0 = 0, w = gp_fmt_get(f).width / 8;
    for (; i0 + SUMSQ_BLOCK <= a->n; i0 += SUMSQ_BLOCK)
        gp_clip_tree_push(&t, sumsq_perfect(f, a->grad, i0));
    if (i0 < a->n)
        gp_clip_tree_push(&t, gp_clip_sumsq(f, (const char *)a->grad + i0 * w, a->n - i0));
    a->sumsq = gp_clip_tree_result(&t);
    return 0;
}

static int cpu_grad_scale(const gp_plugin_scale_args *a)
{
    gp_format f = (gp_format)a->format;
    for (uint64_t i = 0; i < a->n; i++)
        gp_pack_set(f, a->grad, i, gp_clip_apply(f, a->ftz, gp_pack_get(f, a->grad, i), a->coef, (unsigned *)0));
    return 0;
}

static int cpu_scaler_update(const gp_plugin_scaler_args *a)
{
    gp_scaler s = {*a->scale, *a->tracker};
    gp_scaler_update(&s, *a->found_inf, a->growth, a->backoff, a->interval);
    *a->scale = s.scale;
    *a->tracker = s.tracker;
    return 0;
}

/* Segments in turn: on a CPU one call per segment costs nothing worth fusing. */
static int cpu_accumulate_many(const gp_plugin_accumulate_args *a, uint32_t count)
{
    for (uint32_t j = 0; j < count; j++) {
        int rc = cpu_accumulate(&a[j]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static const gp_plugin cpu_plugin = {
    GP_PLUGIN_ABI_VERSION, "cpu", GP_PLUGIN_HOST, cpu_accumulate, cpu_unscale, cpu_adamw,
    cpu_grad_sumsq, cpu_grad_scale, cpu_scaler_update, cpu_accumulate_many,
};

const gp_plugin *gp_cpu_backend(void)
{
    return &cpu_plugin;
}
