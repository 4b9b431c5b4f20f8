/* gp_cpu_adamw.c — the CPU backend's vectorised AdamW: gp_adamw_step (kernels/arith/gp_adamw.h)
 * without events, for the common formats, a block of elements at a time, one operation
 * per loop so that every loop vectorises. Each loop is one line of gp_adamw_step (or of
 * gp_adamw_fused_step) applied to a block, with the same IEEE binary32 operations in the
 * same order and the same operands (fmaf where the step writes GP_FMAF_RN, nothing
 * contracted: -ffp-contract=off), so the results are bit for bit the step's;
 * tests/test_adamw.c checks this against the instrumented step on random and special
 * values, every variant and evaluation order, and tails of every length.
 * Built with -fno-math-errno (sqrtf and fmaf then compile to the instructions; errno is
 * the only difference) and cloned for AVX-512 / AVX2+FMA, chosen at load time.
 * Also the unscale of an fp32 accumulator (gp_cpu_unscale_fp32), cloned the same way. */
#include "gp_cpu_adamw.h"

#include "../arith/gp_accum.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) /* ThreadSanitizer cannot run an
                                                             ifunc resolver at load time */
#define GP_ADAMW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GP_ADAMW_CLONES
#endif

#define BLK 256 /* elements per block: the temporaries (a few KiB) stay in L1 */

/* The formats this path covers (a constant per call): fp32, or bf16 stored as uint16. */
static inline float widen(gp_format f, const void *p, size_t i)
{
    return f == GP_FP32 ? ((const float *)p)[i] : gp_f32_from_bits((uint32_t)((const uint16_t *)p)[i] << 16);
}

/* x stored in f (RNE) and widened back: gp_adamw_load(f, gp_adamw_store(f, x, NULL)).
 * gp_bf16_rne_from_f32_bits equals gp_fmt_from_f32_bits(GP_BF16, ., GP_RNE, ...) on every
 * input (tests/test_accum.c), and bf16 -> fp32 is the bit move << 16. */
static inline float round_to(gp_format f, float x)
{
    return f == GP_FP32 ? x : gp_f32_from_bits(gp_bf16_rne_from_f32_bits(gp_f32_bits(x)) << 16);
}

static inline void put(gp_format f, void *p, size_t i, float x)
{
    if (f == GP_FP32)
        ((float *)p)[i] = x;
    else
        ((uint16_t *)p)[i] = (uint16_t)gp_bf16_rne_from_f32_bits(gp_f32_bits(x));
}

int gp_cpu_adamw_fast_ok(gp_adamw_config cfg, gp_format gf)
{
    int fmt_ok = (cfg.param == GP_FP32 || cfg.param == GP_BF16) && (cfg.state == GP_FP32 || cfg.state == GP_BF16) &&
                 (gf == GP_FP32 || gf == GP_BF16);
    /* torch's CPU orders with IEEE sqrt: torch_cpu and torch_cpu_foreach, and the orders
     * with MKL's fp32 sqrt where the state is bf16 (its sqrt is IEEE: gp_adamw_step) */
    int eval_ok = (cfg.eval >= GP_ADAMW_TORCH_CUDA && cfg.eval <= GP_ADAMW_UNFUSED) ||
                  cfg.eval == GP_ADAMW_TORCH_CPU_FOREACH || (gp_adamw_eval_cpu(cfg.eval) && cfg.state == GP_BF16);
    return fmt_ok && eval_ok && cfg.rounding == GP_RNE && cfg.variant >= GP_ADAMW_PLAIN &&
           cfg.variant <= GP_ADAMW_TORCH_FUSED_CPU;
}

typedef struct {
    gp_adamw_config cfg;
    const gp_adamw_scalars *s;
    gp_format gf;
    float inv_scale;
    const void *grad;
    void *param, *m, *v, *comp;
    uint32_t *master;
} job;

/* gp_adamw_fused_step on elements [i0, i0 + nb), all in the scalar remainder (tail) or none. */
static inline __attribute__((always_inline)) void fused_block(const job *J, size_t i0, size_t nb, int tail)
{
    const gp_adamw_scalars *s = J->s;
    gp_format pf = J->cfg.param, sf = J->cfg.state, gf = J->gf;
    float G[BLK], M[BLK], V[BLK];
    for (size_t j = 0; j < nb; j++) /* the kernel reads grad in the param's dtype */
        G[j] = round_to(pf, widen(gf, J->grad, i0 + j) * J->inv_scale);
    float w1 = s->lerp_w;
    if (w1 < 0.5f && w1 > -0.5f) {
        for (size_t j = 0; j < nb; j++) {
            float m0 = widen(sf, J->m, i0 + j);
            M[j] = fmaf(w1, G[j] - m0, m0);
        }
    } else if (!tail) {
        float a = w1 - 1.0f;
        for (size_t j = 0; j < nb; j++)
            M[j] = fmaf(a, G[j] - widen(sf, J->m, i0 + j), G[j]);
    } else {
        float omw = 1.0f - w1;
        for (size_t j = 0; j < nb; j++)
            M[j] = fmaf(-(G[j] - widen(sf, J->m, i0 + j)), omw, G[j]);
    }
    float c2 = s->addcmul_v, b2 = s->beta2;
    if (tail)
        for (size_t j = 0; j < nb; j++) {
            float cgg = (c2 * G[j]) * G[j];
            V[j] = fmaf(widen(sf, J->v, i0 + j), b2, cgg);
        }
    else
        for (size_t j = 0; j < nb; j++) {
            float vb = widen(sf, J->v, i0 + j) * b2;
            V[j] = fmaf(c2 * G[j], G[j], vb);
        }
    float bc = s->bc2_sqrt_f, eps = s->eps, ns = s->neg_step, decay = s->decay;
    for (size_t j = 0; j < nb; j++) {
        float den = sqrtf(V[j]) / bc + eps;
        float q = (ns * M[j]) / den;
        float d = widen(pf, J->param, i0 + j) * decay;
        put(pf, J->param, i0 + j, d + q * 1.0f);
        put(sf, J->m, i0 + j, M[j]);
        put(sf, J->v, i0 + j, V[j]);
    }
}

/* gp_adamw_step (PLAIN, ONE_STORE, MASTER, KAHAN; RNE; no events) on [i0, i0 + nb). */
static inline __attribute__((always_inline)) void step_block(const job *J, size_t i0, size_t nb)
{
    const gp_adamw_scalars *s = J->s;
    gp_format pf = J->cfg.param, sf = J->cfg.state, gf = J->gf;
    int cpu = gp_adamw_eval_cpu(J->cfg.eval), fused = J->cfg.eval != GP_ADAMW_UNFUSED, fused_upd = fused && !cpu;
    int foreach_cpu = J->cfg.eval == GP_ADAMW_TORCH_CPU_FOREACH; /* _foreach_mul_ rounds its scalar first */
    float G[BLK], M[BLK], V[BLK], U[BLK];
    for (size_t j = 0; j < nb; j++)
        G[j] = widen(gf, J->grad, i0 + j) * J->inv_scale;
    /* exp_avg.lerp_(grad, 1 - beta1), stored in the state format */
    float w1 = s->lerp_w;
    if (w1 < 0.5f && w1 > -0.5f) {
        if (fused)
            for (size_t j = 0; j < nb; j++) {
                float m0 = widen(sf, J->m, i0 + j);
                M[j] = round_to(sf, fmaf(w1, G[j] - m0, m0));
            }
        else
            for (size_t j = 0; j < nb; j++) {
                float m0 = widen(sf, J->m, i0 + j);
                M[j] = round_to(sf, m0 + w1 * (G[j] - m0));
            }
    } else if (cpu) { /* vec_form; cpu implies fused */
        float a = w1 - 1.0f;
        for (size_t j = 0; j < nb; j++)
            M[j] = round_to(sf, fmaf(a, G[j] - widen(sf, J->m, i0 + j), G[j]));
    } else {
        float omw = 1.0f - w1;
        if (fused)
            for (size_t j = 0; j < nb; j++)
                M[j] = round_to(sf, fmaf(-(G[j] - widen(sf, J->m, i0 + j)), omw, G[j]));
        else
            for (size_t j = 0; j < nb; j++)
                M[j] = round_to(sf, G[j] + (-(G[j] - widen(sf, J->m, i0 + j))) * omw);
    }
    /* exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2) */
    float b2 = foreach_cpu ? round_to(sf, s->beta2) : s->beta2, c2 = s->addcmul_v;
    for (size_t j = 0; j < nb; j++)
        V[j] = round_to(sf, widen(sf, J->v, i0 + j) * b2);
    if (cpu)
        for (size_t j = 0; j < nb; j++)
            V[j] = round_to(sf, fmaf(c2 * G[j], G[j], V[j]));
    else if (fused && c2 == 1.0f)
        for (size_t j = 0; j < nb; j++)
            V[j] = round_to(sf, fmaf(G[j], G[j], V[j]));
    else if (fused)
        for (size_t j = 0; j < nb; j++)
            V[j] = round_to(sf, fmaf(c2, G[j] * G[j], V[j]));
    else
        for (size_t j = 0; j < nb; j++)
            V[j] = round_to(sf, V[j] + c2 * (G[j] * G[j]));
    /* denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps); the addcdiv term */
    float ns = s->neg_step;
    if (cpu) {
        float bc = s->bc2_sqrt_f, eps = round_to(sf, s->eps);
        for (size_t j = 0; j < nb; j++) {
            float q = round_to(sf, round_to(sf, sqrtf(V[j])) / bc);
            float den = round_to(sf, q + eps);
            U[j] = (ns * M[j]) / den; /* ua; ub = 1 */
        }
    } else {
        float ib = s->inv_bc2_sqrt, eps = s->eps;
        for (size_t j = 0; j < nb; j++) {
            float q = round_to(sf, round_to(sf, sqrtf(V[j])) * ib);
            float den = round_to(sf, q + eps);
            U[j] = M[j] / den; /* ub; ua = neg_step */
        }
    }
    /* the weight: d + ua*ub, fused for CUDA's order (cpu: ua*1 is exact, d + ua) */
    float decay = s->decay;
    switch (J->cfg.variant) {
    case GP_ADAMW_MASTER:
        for (size_t j = 0; j < nb; j++) {
            float d = gp_f32_from_bits(J->master[i0 + j]) * decay;
            float nm = fused_upd ? fmaf(ns, U[j], d) : d + (cpu ? U[j] * 1.0f : ns * U[j]);
            J->master[i0 + j] = gp_f32_bits(nm);
            put(pf, J->param, i0 + j, nm);
        }
        break;
    case GP_ADAMW_KAHAN:
        for (size_t j = 0; j < nb; j++) {
            float d = widen(pf, J->param, i0 + j) * decay;
            float c = widen(pf, J->comp, i0 + j);
            float y = fused_upd ? fmaf(ns, U[j], -c) : (cpu ? U[j] * 1.0f : ns * U[j]) - c;
            float sum = round_to(pf, d + y);
            put(pf, J->param, i0 + j, sum);
            float cn = (sum - d) - y;
            put(pf, J->comp, i0 + j, cn);
        }
        break;
    case GP_ADAMW_PLAIN:
        if (foreach_cpu)
            decay = round_to(pf, decay);
        for (size_t j = 0; j < nb; j++) {
            float d = round_to(pf, widen(pf, J->param, i0 + j) * decay);
            put(pf, J->param, i0 + j, fused_upd ? fmaf(ns, U[j], d) : d + (cpu ? U[j] * 1.0f : ns * U[j]));
        }
        break;
    default: /* GP_ADAMW_ONE_STORE */
        for (size_t j = 0; j < nb; j++) {
            float d = widen(pf, J->param, i0 + j) * decay;
            put(pf, J->param, i0 + j, fused_upd ? fmaf(ns, U[j], d) : d + (cpu ? U[j] * 1.0f : ns * U[j]));
        }
        break;
    }
    for (size_t j = 0; j < nb; j++) {
        put(sf, J->m, i0 + j, M[j]);
        put(sf, J->v, i0 + j, V[j]);
    }
}

GP_ADAMW_CLONES static void run_blocks(const job *J, size_t n, size_t tail)
{
    for (size_t i0 = 0; i0 < n;) {
        size_t nb = n - i0 < BLK ? n - i0 : BLK;
        if (J->cfg.variant == GP_ADAMW_TORCH_FUSED_CPU) {
            int in_tail = i0 >= tail;
            if (!in_tail && i0 + nb > tail)
                nb = tail - i0; /* a block is wholly in or out of the remainder */
            fused_block(J, i0, nb, in_tail);
        } else {
            step_block(J, i0, nb);
        }
        i0 += nb;
    }
}

void gp_cpu_adamw_fast(gp_adamw_config cfg, const gp_adamw_scalars *s, gp_format gf, float inv_scale,
                       const void *grad, void *param, uint32_t *master, void *comp, void *m, void *v, size_t n)
{
    job J = {cfg, s, gf, inv_scale, grad, param, m, v, comp, master};
    run_blocks(&J, n, (size_t)gp_adamw_fused_tail(cfg.param, n));
}

GP_ADAMW_CLONES static void gp_cpu_unscale_fp32_clones(uint32_t *acc, size_t n, float inv_scale, int *found_inf)
{
    for (size_t i0 = 0; i0 < n; i0 += BLK) {
        size_t nb = n - i0 < BLK ? n - i0 : BLK;
        uint32_t *a = acc + i0, nonfinite = 0;
        for (size_t j = 0; j < nb; j++)
            nonfinite |= (uint32_t)((a[j] & 0x7f800000u) == 0x7f800000u);
        if (nonfinite) { /* the definition: the flag, and a NaN's or inf's bits as the step makes them */
            for (size_t j = 0; j < nb; j++)
                a[j] = gp_unscale_step(GP_FP32, 0, a[j], inv_scale, found_inf, (unsigned *)0);
            continue;
        }
        for (size_t j = 0; j < nb; j++)
            a[j] = gp_f32_bits(gp_f32_from_bits(a[j]) * inv_scale);
    }
}

/* The exported symbol is a plain function: clang 14 gives callers in other files no
 * symbol for a cloned function (its dispatcher is local), so the clones stay static. */
void gp_cpu_unscale_fp32(uint32_t *acc, size_t n, float inv_scale, int *found_inf)
{
    gp_cpu_unscale_fp32_clones(acc, n, inv_scale, found_inf);
}
