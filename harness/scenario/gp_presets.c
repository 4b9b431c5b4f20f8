/* gp_presets.c — the default suite: each known incident as a scenario, with numbers a
 * reviewer can check by hand (see each summary). Thresholds not given fall back to the
 * defaults of gp_default_threshold. */
#include "gp_presets.h"

#include <string.h>

/* The outcome a preset that reproduces an incident must have: verdict fail, naming the
 * mechanism (`gradprec run` exits 0 when every scenario meets its expectation; the gate
 * treats an expected failure that stops failing as a regression). */
#define EXPECT_FAIL(MECH) "expect: {verdict: fail, mechanism: " MECH "}\n"
#define EXPECT(VERDICT, MECH) "expect: {verdict: " VERDICT ", mechanism: " MECH "}\n"
#define EXPECT_VERDICT(VERDICT) "expect: {verdict: " VERDICT "}\n"

/* LoRA-like: per-micro-batch gradients (what the backward writes, after the 1/N of
 * token_mean over K = 8 equal micro-batches) of about 1e-6 to 4e-6: per-token-mean
 * magnitudes lognormal around 1.6e-5, divided by 8. Judged by the format-aware default
 * (docs/scenarios.md, Verdicts): bf16 gradients into a bf16 accumulator have a format
 * floor of about 3.2e-3, so 2 x floor = 6.4e-3 is allowed; the bf16 accumulator's
 * 4.05e-3 (fp32 accumulator: 1.64e-3) passes: over 8 micro-batches it costs about one
 * more bf16 rounding, nothing is absorbed or underflows. The write-up's collapse is not
 * what 8-step bf16 accumulation of these magnitudes does (long-accum-bf16-* is where a
 * bf16 accumulator fails). */
#define LORA(NAME, GRAD, ACC)                                                           \
    "name: " NAME "\n"                                                                  \
    "seed: 42\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: blocks.7.attn1.lora_A\n"                                                 \
    "    size: 65536\n"                                                                 \
    "    grad: {dist: lognormal, scale: 1.6e-5, sigma: 0.5, sign: 0.5}\n"               \
    "batch: {microbatches: 8, tokens: 512}\n"                                           \
    "reduction: token_mean\n"                                                           \
    "precision: {grad: " GRAD ", accumulator: " ACC ", rounding: rne}\n"

#define LONG_ACCUM(NAME, K, ACC) LONG_ACCUM_R(NAME, K, ACC, "rne")
#define LONG_ACCUM_R(NAME, K, ACC, R)                                                   \
    "name: " NAME "\n"                                                                  \
    "seed: 7\n"                                                                         \
    "tensors:\n"                                                                        \
    "  - name: mlp.w1\n"                                                                \
    "    size: 4096\n"                                                                  \
    "    grad: {dist: lognormal, scale: 1.0e-3, sigma: 0.5, sign: 0.1}\n"               \
    "batch: {microbatches: " K ", tokens: 64}\n"                                        \
    "reduction: sum\n"                                                                  \
    "fullbatch: sum\n"                                                                  \
    "precision: {grad: fp32, accumulator: " ACC ", rounding: " R "}\n"

#define UNEVEN(NAME, RED)                                                               \
    "name: " NAME "\n"                                                                  \
    "seed: 3\n"                                                                         \
    "tensors:\n"                                                                        \
    "  - name: lm_head\n"                                                               \
    "    size: 16384\n"                                                                 \
    "    grad: {dist: normal, scale: 1.0e-3}\n"                                         \
    "batch: {microbatches: 8, tokens: [512, 480, 17, 512, 512, 300, 512, 64]}\n"        \
    "reduction: " RED "\n"                                                              \
    "precision: {grad: fp32, accumulator: fp32}\n"

#define FP16_TINY(NAME, LS) FP16_TINY_ACC(NAME, LS, "fp32")
#define FP16_TINY_ACC(NAME, LS, ACC)                                                    \
    "name: " NAME "\n"                                                                  \
    "seed: 11\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: embed\n"                                                                 \
    "    size: 16384\n"                                                                 \
    "    grad: {dist: lognormal, scale: 1.0e-7, sigma: 1.0, sign: 0.5}\n"               \
    "batch: {microbatches: 8, tokens: 512}\n"                                           \
    "reduction: token_mean\n"                                                           \
    "precision: {grad: fp16, accumulator: " ACC "}\n"                                   \
    "loss_scale: " LS "\n"

/* bf16 weights at 1.0 pushed up by steady gradients (-1e-3 every step) under a cosine
 * schedule from lr 8e-3 to 0 over 100 steps. Adam's normalised step is lr_t * |g|/(|g| +
 * eps) = lr_t (1 - 1e-5). In [1, 2) a bf16 ulp is 2^-7, so an update below 2^-8 =
 * 3.906e-3 rounds away: lr_t = 4e-3 (1 + cos(pi t/100)) is 4.0e-3 at t = 50 and 3.874e-3
 * at t = 51, so steps 51..99 are stale; step 100 has lr 0 and no update to lose:
 * stale_update_frac = 49/99 = 0.495. Steps 1..50 move one ulp each (lr_t in (0.5, 1.5)
 * ulps), so w stays below 1.4. */
#define BF16_COSINE(NAME, OPT, THR) BF16_SCHED(NAME, OPT, "{name: cosine, total: 100}", "100", THR)

/* Gradients N(0, 1e-4^2), 10 AdamW steps at lr 1e-3 with m and v in STATE. In fp16,
 * v = 0.001 g^2 ~ 1e-11 lies far below half the smallest subnormal (2^-25 = 2.98e-8):
 * every v is stored as 0 while m = 0.1 g ~ 1e-5 survives (as a subnormal) unless
 * |g| < 3e-7 (0.2% of them), so state_underflow_frac is just above 1/2; eps = 1e-8 itself rounds to 0 in the fp16
 * denominator, m / 0 is infinite and the weights blow up at the first step. */
#define ADAM_STATE(NAME, STATE) ADAM_STATE_OPT(NAME, "state: " STATE)
#define ADAM_STATE_OPT(NAME, OPT)                                                       \
    "name: " NAME "\n"                                                                  \
    "seed: 13\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: embed.weight\n"                                                          \
    "    size: 4096\n"                                                                  \
    "    grad: {dist: normal, scale: 1.0e-4}\n"                                         \
    "batch: {microbatches: 1, tokens: 1}\n"                                             \
    "reduction: sum\n"                                                                  \
    "fullbatch: sum\n"                                                                  \
    "optimizer: {lr: 1.0e-3, " OPT "}\n"                                                \
    "steps: 10\n"

/* fp16 gradients N(0, 1e-5^2) of 4096 elements under a GradScaler (2^16) and clipping at
 * max_norm 1: the true norm is about 1e-5 * 64 = 6.4e-4, nothing to clip. Clipped before
 * unscaling, the scaled norm 2^16 * 6.4e-4 = 41.9 is compared with 1, and every gradient
 * is multiplied by about 1/41.9: scaling_rel_err = 1 - 1/41.9 = 0.976. */
#define CLIP_ORDER(NAME, UNSCALE_FIRST)                                                 \
    "name: " NAME "\n"                                                                  \
    "seed: 17\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: attn.proj\n"                                                             \
    "    size: 4096\n"                                                                  \
    "    grad: {dist: normal, scale: 1.0e-5}\n"                                         \
    "batch: {microbatches: 1, tokens: 1}\n"                                             \
    "reduction: sum\n"                                                                  \
    "fullbatch: sum\n"                                                                  \
    "precision: {grad: fp16, accumulator: fp32}\n"                                      \
    "loss_scale: {mode: dynamic, init: 65536, unscale_before_clip: " UNSCALE_FIRST "}\n" \
    "clip: {max_norm: 1.0}\n"                                                           \
    "steps: 10\n"                                                                       \
    "thresholds: {scaling_rel_err: 0.01}\n"

/* fp16 gradients of +-1.5 under a GradScaler starting at 2^16: 1.5 * 2^16 = 98304 is
 * above fp16's 65504, so step 1 overflows and is skipped; the scale backs off to 2^15
 * (1.5 * 2^15 = 49152 fits) and steps 2..10 run: skipped_steps = 1, min_loss_scale =
 * 32768, and one step's gradient of ten equal ones is lost: scaling_rel_err =
 * sqrt(1/10) = 0.316. With the update forgotten the scale stays at 2^16 and all ten steps
 * are skipped: skipped_steps = 10, scaling_rel_err = 1. */
#define FP16_OVERFLOW(NAME, UPDATE)                                                     \
    "name: " NAME "\n"                                                                  \
    "seed: 19\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: lm_head\n"                                                               \
    "    size: 4096\n"                                                                  \
    "    grad: {dist: constant, scale: 1.5}\n"                                          \
    "batch: {microbatches: 1, tokens: 1}\n"                                             \
    "reduction: sum\n"                                                                  \
    "fullbatch: sum\n"                                                                  \
    "precision: {grad: fp16, accumulator: fp32}\n"                                      \
    "loss_scale: {mode: dynamic, init: 65536, update: " UPDATE "}\n"                     \
    "steps: 10\n"                                                                       \
    "thresholds: {skipped_steps: 1, scaling_rel_err: 0.5, weight_rel_err: 1.0}\n"


/* A non-finite gradient of one kind (issue 18): fp16 gradients under a GradScaler
 * (init 2^16, fp32 accumulator) that overflow when scaled: +-1.5 * 2^16 = +-98304 >
 * 65504 is stored as +-inf. Step 1 is skipped, the scale backs off to 2^15 and step 2
 * runs (1.5 * 2^15 = 49152 fits): skipped_steps = 1 exactly (two-sided), half the steps'
 * gradient lost: scaling_rel_err = sqrt(1/2). A check that misses this kind of value
 * lets the infinity into AdamW. */
#define NONFINITE_GRAD(NAME, SIGN)                                                      \
    "name: " NAME "\n"                                                                  \
    "seed: 37\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: lm_head\n"                                                               \
    "    size: 1024\n"                                                                  \
    "    grad: {dist: constant, scale: 1.5, sign: " SIGN "}\n"                          \
    "batch: {microbatches: 1, tokens: 1}\n"                                             \
    "reduction: sum\n"                                                                  \
    "fullbatch: sum\n"                                                                  \
    "precision: {grad: fp16, accumulator: fp32}\n"                                      \
    "loss_scale: {mode: dynamic, init: 65536}\n"                                        \
    "steps: 2\n"                                                                        \
    "thresholds: {skipped_steps: {min: 1, max: 1}, scaling_rel_err: 0.75, weight_rel_err: 1.0}\n"

/* Non-finite in the accumulator from finite gradients: fp16 gradients of +-1.5 stored
 * at scale 2^15 (+-49152, finite) summed over 2 micro-batches into an fp16 accumulator:
 * +-98304 overflows to +-inf there. Skip, back off to 2^14 (2 * 24576 = 49152 fits). */
#define NONFINITE_ACC(NAME, SIGN)                                                       \
    "name: " NAME "\n"                                                                  \
    "seed: 41\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: lm_head\n"                                                               \
    "    size: 1024\n"                                                                  \
    "    grad: {dist: constant, scale: 1.5, sign: " SIGN "}\n"                          \
    "batch: {microbatches: 2, tokens: 1}\n"                                             \
    "reduction: sum\n"                                                                  \
    "fullbatch: sum\n"                                                                  \
    "precision: {grad: fp16, accumulator: fp16}\n"                                      \
    "loss_scale: {mode: dynamic, init: 32768}\n"                                        \
    "steps: 2\n"                                                                        \
    "thresholds: {skipped_steps: {min: 1, max: 1}, scaling_rel_err: 0.75, weight_rel_err: 1.0}\n"

/* Non-finite after unscaling: a static loss scale of 2^-4 (a scale below 1), fp16
 * gradients of +-70000 stored as +-4375, accumulated in fp16: finite, so torch's check
 * (before the multiply) finds nothing, and the unscale by 16 gives +-70000 > 65504:
 * +-inf reaches the optimizer. Expected to fail, naming non-finite. */
#define NONFINITE_UNSCALED(NAME, SIGN)                                                  \
    "name: " NAME "\n"                                                                  \
    "seed: 43\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: lm_head\n"                                                               \
    "    size: 256\n"                                                                   \
    "    grad: {dist: constant, scale: 70000.0, sign: " SIGN "}\n"                      \
    "batch: {microbatches: 1, tokens: 1}\n"                                             \
    "reduction: sum\n"                                                                  \
    "fullbatch: sum\n"                                                                  \
    "precision: {grad: fp16, accumulator: fp16}\n"                                      \
    "loss_scale: {mode: static, init: 0.0625}\n" EXPECT_FAIL("non-finite")

/* A partial last window under each reduction: K = 5 micro-batches of 512 tokens in a
 * window of A = 8, against the exact full batch of the 2560 tokens seen (the mean of
 * the 5 per-token means m_k, or their sum x 512 for fullbatch sum). token_mean:
 * normalization 0; mean: (1/8) sum m_k vs (1/5) sum m_k: 3/8; mean_no_div: sum m_k vs
 * (1/5) sum m_k: 4; sum vs the full-batch sum: 0. Where the result must equal the full
 * batch, grad_norm_ratio is checked on both sides (fp32: within 2^-20). */
#define PARTIAL(NAME, RED, FB, EXTRA)                                                   \
    "name: " NAME "\n"                                                                  \
    "seed: 5\n"                                                                         \
    "tensors:\n"                                                                        \
    "  - name: attn.qkv\n"                                                              \
    "    size: 4096\n"                                                                  \
    "    grad: {dist: normal, scale: 1.0e-3}\n"                                         \
    "batch: {accumulation_steps: 8, microbatches: 5, tokens: 512}\n"                    \
    "reduction: " RED "\n"                                                              \
    "fullbatch: " FB "\n"                                                               \
    "precision: {grad: fp32, accumulator: fp32}\n" EXTRA

/* Data parallelism (docs/distributed.md): W ranks of K micro-batches of LoRA-sized fp32
 * gradients, all-reduced by a ring in REDUCE with the division by W before the sum. */
#define DDP(NAME, W, K, GRAD, ACC, REDUCE, EXTRA)                                       \
    "name: " NAME "\n"                                                                  \
    "seed: 97\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: blocks.3.attn.lora_A\n"                                                  \
    "    size: 4096\n"                                                                  \
    "    grad: {dist: lognormal, scale: 1.6e-5, sigma: 0.5, sign: 0.5}\n"               \
    "batch: {microbatches: " K ", tokens: 512}\n"                                       \
    "reduction: token_mean\n"                                                           \
    "precision: {grad: " GRAD ", accumulator: " ACC "}\n"                               \
    "distributed: {world_size: " W ", reduce_dtype: " REDUCE EXTRA "}\n"

/* fp16 gradients of 60000 (one token a rank; token_mean writes W S / N = 60000) summed by
 * 8 ranks: 120000 > 65504 at the ring's first hop without the division first. */
#define FP16_AR(NAME, AVG)                                                              \
    "name: " NAME "\n"                                                                  \
    "seed: 101\n"                                                                       \
    "tensors:\n"                                                                        \
    "  - name: head\n"                                                                  \
    "    size: 1024\n"                                                                  \
    "    grad: {dist: constant, scale: 60000.0, sign: 0}\n"                             \
    "batch: {microbatches: 1, tokens: 1}\n"                                             \
    "precision: {grad: fp16, accumulator: fp16}\n"                                      \
    "distributed: {world_size: 8, reduce_dtype: fp16, average: " AVG "}\n"
/* bf16 weights at 1.0 pushed by steady gradients as BF16_COSINE (Adam's normalised step
 * lr_t (1 - 1e-5); an update below half a bf16 ulp in [1, 2), 2^-8 = 3.906e-3, rounds
 * away), under other schedules (issue 18: every schedule of gp_schedule.h reached from
 * the suite). */
#define BF16_SCHED(NAME, OPT, SCHED, STEPS, THR)                                        \
    "name: " NAME "\n"                                                                  \
    "seed: 21\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: norm.weight\n"                                                           \
    "    size: 4096\n"                                                                  \
    "    grad: {dist: constant, scale: 1.0e-3, sign: 1.0}\n"                            \
    "    weight: {dist: constant, scale: 1.0, sign: 0.0}\n"                             \
    "batch: {microbatches: 1, tokens: 1}\n"                                             \
    "reduction: sum\n"                                                                  \
    "fullbatch: sum\n"                                                                  \
    "optimizer: {lr: 8.0e-3, weight_decay: 0.0, param: bf16" OPT "}\n"                  \
    "schedule: " SCHED "\n"                                                             \
    "steps: " STEPS "\n" THR

/* Tiny gradients where the format has no subnormals (FTZ): lognormal around 1e-38 (fp32's
 * min normal is 2^-126 = 1.18e-38), fp32 gradients summed over 8 micro-batches. FTZ flushes
 * every stored gradient and every sum below 2^-126 to 0: the underflow a kernel built
 * with --use_fast_math (fp32) or a TPU-style bf16 unit (no bf16 subnormals) causes. */
#define FTZ_TINY_PREC(NAME, SEED, PREC)                                                 \
    "name: " NAME "\n"                                                                  \
    "seed: " SEED "\n"                                                                  \
    "tensors:\n"                                                                        \
    "  - name: embed\n"                                                                 \
    "    size: 4096\n"                                                                  \
    "    grad: {dist: lognormal, scale: 1.0e-38, sigma: 1.0}\n"                         \
    "batch: {microbatches: 8, tokens: 1}\n"                                             \
    "reduction: sum\n"                                                                  \
    "fullbatch: sum\n"                                                                  \
    "precision: {" PREC ", ftz: true}\n" EXPECT_FAIL("underflow")
#define FTZ_TINY(NAME, SEED, ACC) FTZ_TINY_PREC(NAME, SEED, "grad: fp32, accumulator: " ACC)

#define NORM_RATIO_ONE "thresholds: {grad_norm_ratio: {min: 0.99999905, max: 1.00000095}}\n"

/* Issue 25's scaled formats (docs/model.md): lognormal gradients in an MXFP8 format (GRAD,
 * DIST: more keys of the distribution), judged against 2^-4; fp8 e4m3 under delayed scaling
 * (history 16) on gradients growing 4x per step (OPT: more options of the format); an 8-rank
 * ring all-reduce of one-signed gradients in the scaled reduce dtype REDUCE, judged against
 * 8 casts at bf16's 2^-8. */
#define MXFP8_GRADS(NAME, GRAD, DIST)                                                   \
    "name: " NAME "\n"                                                                  \
    "seed: 149\n"                                                                       \
    "tensors:\n"                                                                        \
    "  - name: mlp.w2\n"                                                                \
    "    size: 4096\n"                                                                  \
    "    grad: {dist: lognormal, scale: 3.0e-5, sigma: 1.5" DIST "}\n"                  \
    "batch: {microbatches: 4, tokens: 64}\n"                                            \
    "reduction: mean\n"                                                                 \
    "precision: {grad: " GRAD ", accumulator: fp32}\n"                                  \
    "thresholds: {grad_rel_err_fullbatch: 0.0625}\n"
#define FP8_DELAYED_GROWING(NAME, OPT)                                                  \
    "name: " NAME "\n"                                                                  \
    "seed: 151\n"                                                                       \
    "tensors:\n"                                                                        \
    "  - name: mlp.w2\n"                                                                \
    "    size: 4096\n"                                                                  \
    "    grad: {dist: normal, scale: 1.0e-3, shrink: 4.0}\n"                            \
    "batch: {microbatches: 4, tokens: 64}\n"                                            \
    "reduction: mean\n"                                                                 \
    "steps: 3\n"                                                                        \
    "precision: {grad: \"fp8_e4m3:delayed:hist=16" OPT "\", accumulator: fp32}\n"
#define DDP_SCALED(NAME, REDUCE)                                                        \
    "name: " NAME "\n"                                                                  \
    "seed: 163\n"                                                                       \
    "tensors:\n"                                                                        \
    "  - name: mlp.w2\n"                                                                \
    "    size: 4096\n"                                                                  \
    "    grad: {dist: lognormal, scale: 3.0e-5, sigma: 1.5, sign: 0.0}\n"               \
    "batch: {microbatches: 2, tokens: 64}\n"                                            \
    "reduction: mean\n"                                                                 \
    "precision: {grad: fp32, accumulator: fp32}\n"                                      \
    "distributed: {world_size: 8, reduce_dtype: " REDUCE "}\n"                          \
    "thresholds: {collective_rel_err: 0.03125}\n"

/* A 65536-element tensor of normal gradients of 1e-3 (COLS: its cols line or ""; DIST: more
 * keys of the distribution) in GRAD accumulated in ACC over MB micro-batches ("K, tokens:
 * T"), STEPS steps, with the thresholds THR: the scales of issue 25 that span the runner's
 * chunks (presets fp8-e4m3-grads-current-growing ... fp8-e4m3-current-accumulator). */
#define FP8_SPAN(NAME, COLS, GRAD, ACC, MB, STEPS, DIST, THR)                           \
    "name: " NAME "\n"                                                                  \
    "seed: 25\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: blocks.11.mlp.fc2.weight\n"                                              \
    "    size: 65536\n" COLS                                                            \
    "    grad: {dist: normal, scale: 1.0e-3" DIST "}\n"                                 \
    "batch: {accumulation_steps: " MB "}\n"                                             \
    "reduction: mean\n"                                                                 \
    "steps: " STEPS "\n"                                                                \
    "precision: {grad: " GRAD ", accumulator: " ACC "}\n"                               \
    "thresholds: {" THR "}\n"

static const gp_preset presets[] = {
    {"lora-bf16-accum",
     "LoRA gradients (1e-6..4e-6) stored bf16, accumulated in bf16: 4e-3 of rounding error, within twice what "
     "bf16 storage itself costs (passes); no underflow, nothing absorbed",
     LORA("lora-bf16-accum", "bf16", "bf16")},
    {"lora-fp32-accum", "the same gradients accumulated in fp32: only the bf16 storage error remains",
     LORA("lora-fp32-accum", "bf16", "fp32")},
    {"lora-fp16-accum",
     "the same gradients in fp16: stored as subnormals (below 6.1e-5), many keeping under half their bits",
     LORA("lora-fp16-accum", "fp16", "fp16") EXPECT_FAIL("underflow")},
    {"long-accum-bf16-k64", "64 micro-batches summed in bf16: rounding error grows; the first addends are absorbed",
     LONG_ACCUM("long-accum-bf16-k64", "64", "bf16") EXPECT_FAIL("rounding")},
    {"long-accum-bf16-k1024", "1024 micro-batches summed in bf16: absorption dominates",
     LONG_ACCUM("long-accum-bf16-k1024", "1024", "bf16") EXPECT_FAIL("absorption")},
    {"long-accum-fp32-k1024", "the same 1024 micro-batches in fp32: nothing absorbed",
     LONG_ACCUM("long-accum-fp32-k1024", "1024", "fp32")},
    {"uneven-tokens-mean",
     "mean of per-micro-batch means with token counts 512..17: a normalization error, in exact arithmetic",
     UNEVEN("uneven-tokens-mean", "mean") EXPECT_FAIL("normalization")},
    {"uneven-tokens-token-mean", "the same batch with token_mean: equals the full batch",
     UNEVEN("uneven-tokens-token-mean", "token_mean")},
    {"partial-window-mean",
     "5 micro-batches in a window of 8, divided by 8: normalization_rel_err = 3/8 exactly",
     "name: partial-window-mean\n"
     "seed: 5\n"
     "tensors:\n"
     "  - name: attn.qkv\n"
     "    size: 16384\n"
     "    grad: {dist: normal, scale: 1.0e-3}\n"
     "batch: {accumulation_steps: 8, microbatches: 5, tokens: 512}\n"
     "reduction: mean\n"
     "precision: {grad: fp32, accumulator: fp32}\n" EXPECT_FAIL("normalization")},
    {"fp16-tiny-grads-noscale", "fp16 gradients around 1e-8 without loss scaling: most underflow to 0",
     FP16_TINY("fp16-tiny-grads-noscale", "{mode: none}") EXPECT_FAIL("underflow")},
    {"fp16-tiny-grads-scaled", "the same with a static loss scale of 2^16, unscaled in fp32: nothing lost",
     FP16_TINY("fp16-tiny-grads-scaled", "{mode: static, init: 65536}")},
    {"lora-bf16-gradscaler",
     "lora-bf16-accum under a dynamic GradScaler: scaling bf16 by 2^16 is exact (fp32's range), so every "
     "gradient metric equals lora-bf16-accum's: pointless, harmless",
     "name: lora-bf16-gradscaler\n"
     "seed: 42\n"
     "tensors:\n"
     "  - name: blocks.7.attn1.lora_A\n"
     "    size: 65536\n"
     "    grad: {dist: lognormal, scale: 1.6e-5, sigma: 0.5, sign: 0.5}\n"
     "batch: {microbatches: 8, tokens: 512}\n"
     "reduction: token_mean\n"
     "precision: {grad: bf16, accumulator: bf16, rounding: rne}\n"
     "loss_scale: {mode: dynamic, init: 65536}\n"},
    {"bf16-weights-cosine-no-master",
     "bf16 weights at 1.0, steady gradients, cosine lr 8e-3 -> 0 over 100 steps, no master copy: updates "
     "below 2^-8 round away from step 51 on: stale_update_frac = 49/99",
     BF16_COSINE("bf16-weights-cosine-no-master", "", "") EXPECT_FAIL("stale update")},
    {"bf16-weights-cosine-master", "the same with fp32 master weights: stale_update_frac = 0",
     BF16_COSINE("bf16-weights-cosine-master", ", master: fp32", "")},
    {"bf16-weights-cosine-kahan",
     "the same with Kahan-compensated bf16 weights: the stored weights within one bf16 rounding (2^-8 "
     "relative) of the exact trajectory; only step 99 (lr 2e-6, below half an ulp of the bf16 compensation) "
     "is stale: 1/99",
     BF16_COSINE("bf16-weights-cosine-kahan", ", kahan: true", "thresholds: {weight_rel_err: 3.90625e-3}\n")},
    {"adam-state-fp16-tiny-grads",
     "gradients ~1e-4 with Adam's m and v in fp16: every v underflows to 0 (state_underflow_frac ~ 0.5), eps = 1e-8 "
     "rounds to 0 in the fp16 denominator, the update divides by zero",
     ADAM_STATE("adam-state-fp16-tiny-grads", "fp16") EXPECT_FAIL("state precision")},
    {"adam-state-fp32-tiny-grads", "the same gradients with fp32 state: nothing underflows",
     ADAM_STATE("adam-state-fp32-tiny-grads", "fp32")},
    {"clip-before-unscale",
     "clipping at max_norm 1 applied to 2^16-scaled gradients: the scaled norm (41.9) is clipped instead of the "
     "true one (6.4e-4): scaling_rel_err = 0.976",
     CLIP_ORDER("clip-before-unscale", "false") EXPECT_FAIL("scaling")},
    {"clip-after-unscale", "the same, unscaled first: the norm is below max_norm, nothing is clipped",
     CLIP_ORDER("clip-after-unscale", "true")},
    {"fp16-overflow-scale-backoff",
     "fp16 gradients of 1.5 times 2^16 overflow: step 1 is skipped, the scale backs off to 2^15, the other 9 "
     "steps run (skipped_steps = 1, scaling_rel_err = sqrt(1/10))",
     FP16_OVERFLOW("fp16-overflow-scale-backoff", "true")},
    {"fp16-scale-update-forgotten",
     "the same with scaler.update() never called: the scale stays at 2^16 and all 10 steps are skipped",
     FP16_OVERFLOW("fp16-scale-update-forgotten", "false") EXPECT_FAIL("scaling")},
    {"fp16-scale-collapse",
     "one tensor's gradients (1e5) overflow fp16 at any scale >= 1: the scale backs off 17 times to 2^-1, where "
     "the other tensor's 1e-7 gradients underflow",
     "name: fp16-scale-collapse\n"
     "seed: 23\n"
     "tensors:\n"
     "  - name: exploding\n"
     "    size: 256\n"
     "    grad: {dist: constant, scale: 1.0e5}\n"
     "  - name: embed\n"
     "    size: 4096\n"
     "    grad: {dist: lognormal, scale: 1.0e-7, sigma: 0.5}\n"
     "batch: {microbatches: 1, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp16, accumulator: fp32}\n"
     "loss_scale: {mode: dynamic, init: 65536}\n"
     "steps: 20\n"
     "thresholds: {skipped_steps: 2}\n" EXPECT_FAIL("scaling")},
    {"nonfinite-posinf-grad",
     "fp16 gradients of +1.5 scaled by 2^16 are stored as +inf: the step is skipped, the scale backs off to 2^15 "
     "(skipped_steps = 1 exactly)",
     NONFINITE_GRAD("nonfinite-posinf-grad", "0.0")},
    {"nonfinite-neginf-grad", "the same with -1.5: -inf, skipped, backed off", NONFINITE_GRAD("nonfinite-neginf-grad", "1.0")},
    {"nonfinite-nan-accum",
     "+inf and -inf gradients (1.5 and -1.25 scaled by 2^16) of two micro-batches sum to NaN in the fp32 "
     "accumulator: skipped, backed off to 2^15, where 49152 - 40960 = 8192 is finite",
     "name: nonfinite-nan-accum\n"
     "seed: 39\n"
     "tensors:\n"
     "  - name: bias\n"
     "    size: 1\n"
     "    grad: {values: [[1.5], [-1.25]]}\n"
     "batch: {microbatches: 2, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp16, accumulator: fp32}\n"
     "loss_scale: {mode: dynamic, init: 65536}\n"
     "steps: 2\n"
     "thresholds: {skipped_steps: {min: 1, max: 1}, scaling_rel_err: 0.9, weight_rel_err: 1.0}\n"},
    {"nonfinite-posinf-accum",
     "finite fp16 gradients (49152) overflow the fp16 accumulator to +inf: skipped, backed off to 2^14",
     NONFINITE_ACC("nonfinite-posinf-accum", "0.0")},
    {"nonfinite-neginf-accum", "the same overflowing to -inf", NONFINITE_ACC("nonfinite-neginf-accum", "1.0")},
    {"nonfinite-posinf-after-unscale",
     "a loss scale of 2^-4: finite fp16 values become +inf only when unscaled (after torch's check): +inf reaches "
     "AdamW",
     NONFINITE_UNSCALED("nonfinite-posinf-after-unscale", "0.0")},
    {"nonfinite-neginf-after-unscale", "the same with -inf", NONFINITE_UNSCALED("nonfinite-neginf-after-unscale", "1.0")},
    {"scaler-backoff-then-growth",
     "fp16 gradients growing 10% a step (0.75 x 1.1^(t-1)) under a GradScaler (2^15, interval 3): growth at step 3, "
     "backoff at steps 5 (tracker 1), 9 (tracker 0) and 12 (tracker 2, to 2^14), a full interval then growth "
     "at step 8: skipped_steps = 3, min_loss_scale = 2^14",
     "name: scaler-backoff-then-growth\n"
     "seed: 47\n"
     "tensors:\n"
     "  - name: lm_head\n"
     "    size: 1024\n"
     "    grad: {dist: constant, scale: 0.75, sign: 0.0, shrink: 1.1}\n"
     "batch: {microbatches: 1, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp16, accumulator: fp32}\n"
     "loss_scale: {mode: dynamic, init: 32768, interval: 3}\n"
     "steps: 12\n"
     "thresholds: {skipped_steps: {min: 3, max: 3}, min_loss_scale: {min: 16384, max: 16384}, "
     "scaling_rel_err: 1.0, weight_rel_err: 1.0}\n"},
    {"loss-scale-growth-at-fp32-max",
     "a GradScaler at 2^126 with interval 1: it grows to 2^127, and the growth to 2^128 (inf in fp32) is refused; "
     "the inverse 2^-127 is an fp32 subnormal",
     "name: loss-scale-growth-at-fp32-max\n"
     "seed: 53\n"
     "tensors:\n"
     "  - name: w\n"
     "    size: 1024\n"
     "    grad: {dist: lognormal, scale: 1.0e-30, sigma: 0.5}\n"
     "batch: {microbatches: 2, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp32, accumulator: fp32}\n"
     "loss_scale: {mode: dynamic, init: 8.5070591730234616e+37, interval: 1}\n"
     "steps: 3\n"},
    {"loss-scale-2p40-static",
     "fp32 gradients under a static loss scale of 2^40: its inverse 2^-40 is beyond fp16's range (below 2^-24): "
     "unscaling must multiply by the fp32 inverse; exact",
     "name: loss-scale-2p40-static\n"
     "seed: 59\n"
     "tensors:\n"
     "  - name: w\n"
     "    size: 4096\n"
     "    grad: {dist: lognormal, scale: 1.0e-20, sigma: 1.0}\n"
     "batch: {microbatches: 4, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp32, accumulator: fp32}\n"
     "loss_scale: {mode: static, init: 1099511627776}\n"},
    {"bf16-sr-accum",
     "16 micro-batches of positive fp32 gradients summed in bf16 with stochastic rounding: unbiased and independent "
     "across elements and micro-batches (sr_*_score <= 1, false alarm <= 1e-9 each); error within sqrt(16) x 2^-8",
     "name: bf16-sr-accum\n"
     "seed: 31\n"
     "tensors:\n"
     "  - name: w\n"
     "    size: 16384\n"
     "    grad: {dist: lognormal, scale: 1.0e-3, sigma: 1.0, sign: 0.0}\n"
     "batch: {microbatches: 16, tokens: 64}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp32, accumulator: bf16, rounding: stochastic}\n"
     "thresholds: {grad_rel_err_fullbatch: 0.015625}\n"},
    {"partial-window-token-mean", "5 micro-batches in a window of 8 with token_mean: equals the full batch of the "
     "tokens seen", PARTIAL("partial-window-token-mean", "token_mean", "mean", NORM_RATIO_ONE)},
    {"partial-window-mean-no-div", "5 micro-batches in a window of 8, per-micro-batch means summed without 1/8: "
     "normalization_rel_err = 4 exactly", PARTIAL("partial-window-mean-no-div", "mean_no_div", "mean",
                                                 EXPECT_FAIL("normalization"))},
    {"partial-window-sum", "5 micro-batches in a window of 8, summed, against the full-batch sum: equal",
     PARTIAL("partial-window-sum", "sum", "sum", NORM_RATIO_ONE)},
    {"long-accum-bf16-kahan-k1024", "the 1024 micro-batches of long-accum-bf16-k1024 summed in bf16 with a Kahan "
     "compensation (bf16 too): within one bf16 rounding (2^-8) of the full batch; the accumulator stays put on "
     "about half the additions while the compensation carries the addend (absorbed_frac is no loss here)", LONG_ACCUM_R("long-accum-bf16-kahan-k1024", "1024", "bf16", "kahan")
     "thresholds: {grad_rel_err_fullbatch: 3.90625e-3, absorbed_frac: 1.0}\n"},
    {"rtz-bf16-accum",
     "64 positive micro-batches summed in bf16 rounding toward zero (a bit-truncating cast): every rounding loses "
     "magnitude, grad_norm_ratio falls below 1 (two-sided check); small addends truncate away (absorption)",
     "name: rtz-bf16-accum\n"
     "seed: 61\n"
     "tensors:\n"
     "  - name: mlp.w1\n"
     "    size: 4096\n"
     "    grad: {dist: lognormal, scale: 1.0e-3, sigma: 0.5, sign: 0.0}\n"
     "batch: {microbatches: 64, tokens: 64}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp32, accumulator: bf16, rounding: rtz}\n"
     "thresholds: {grad_norm_ratio: {min: 0.999, max: 1.001}}\n" EXPECT_FAIL("absorption")},
    {"ftz-fp16-accum",
     "fp32 gradients around 1e-6 summed into fp16 with flush-to-zero: sums below 6.1e-5 are flushed, so the "
     "accumulator stays at 0 (absorption) or loses the sum (underflow)",
     "name: ftz-fp16-accum\n"
     "seed: 67\n"
     "tensors:\n"
     "  - name: embed\n"
     "    size: 4096\n"
     "    grad: {dist: lognormal, scale: 1.0e-6, sigma: 1.0}\n"
     "batch: {microbatches: 8, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp32, accumulator: fp16, ftz: true}\n" EXPECT_FAIL("absorption")},
    {"fp8-e4m3-grads",
     "gradients stored in fp8 e4m3 (unit roundoff 2^-4), accumulated in fp32: within one e4m3 rounding",
     "name: fp8-e4m3-grads\n"
     "seed: 71\n"
     "tensors:\n"
     "  - name: mlp.w2\n"
     "    size: 4096\n"
     "    grad: {dist: lognormal, scale: 0.1, sigma: 0.5}\n"
     "batch: {microbatches: 4, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp8_e4m3, accumulator: fp32}\n"
     "thresholds: {grad_rel_err_fullbatch: 0.0625}\n"},
    {"fp8-e5m2-grads-bf16-accum",
     "gradients stored in fp8 e5m2 (unit roundoff 2^-3), accumulated in bf16: within one e5m2 rounding",
     "name: fp8-e5m2-grads-bf16-accum\n"
     "seed: 73\n"
     "tensors:\n"
     "  - name: mlp.w2\n"
     "    size: 4096\n"
     "    grad: {dist: lognormal, scale: 0.1, sigma: 0.5}\n"
     "batch: {microbatches: 4, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp8_e5m2, accumulator: bf16}\n"
     "thresholds: {grad_rel_err_fullbatch: 0.125, weight_rel_err: 0.125}\n"},
    {"adamw-large-decay",
     "fp32 AdamW with lr x weight_decay = 0.1: decay before the update (torch's order) matters by 10% of each update",
     "name: adamw-large-decay\n"
     "seed: 79\n"
     "tensors:\n"
     "  - name: w\n"
     "    size: 4096\n"
     "    grad: {dist: normal, scale: 1.0e-2}\n"
     "batch: {microbatches: 1, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "optimizer: {lr: 1.0e-2, weight_decay: 10.0}\n"
     "steps: 10\n"},
    {"clip-active-after-unscale",
     "fp16 gradients N(0, 1e-2^2) under a GradScaler, norm about 0.64 clipped to 0.1 after unscaling: the per-tensor "
     "sum of squares and the clip multiply run on the backend",
     "name: clip-active-after-unscale\n"
     "seed: 83\n"
     "tensors:\n"
     "  - name: attn.proj\n"
     "    size: 4096\n"
     "    grad: {dist: normal, scale: 1.0e-2}\n"
     "batch: {microbatches: 1, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp16, accumulator: fp32}\n"
     "loss_scale: {mode: dynamic, init: 1024}\n"
     "clip: {max_norm: 0.1}\n"
     "steps: 3\n"},
    {"ddp-bf16-compress-hook-w8",
     "DDP with bf16_compress_hook at 8 ranks: fp32 gradients cast to bf16, divided by 8, ring-summed in bf16",
     DDP("ddp-bf16-compress-hook-w8", "8", "4", "fp32", "fp32", "bf16", "")},
    {"ddp-bf16-compress-hook-w64", "the same hook at 64 ranks: 63 bf16 roundings on every element's ring",
     DDP("ddp-bf16-compress-hook-w64", "64", "1", "fp32", "fp32", "bf16", "") EXPECT_FAIL("rounding")},
    {"ddp-fp32-allreduce-w64", "the same 64 ranks all-reducing fp32: the collective's loss is fp32 rounding",
     DDP("ddp-fp32-allreduce-w64", "64", "1", "fp32", "fp32", "fp32", "")},
    {"ddp-fp16-allreduce-overflow",
     "fp16 gradients of 60000 summed by 8 ranks before dividing: the first hop overflows, every gradient is inf",
     FP16_AR("ddp-fp16-allreduce-overflow", "post") EXPECT_FAIL("overflow")},
    {"ddp-fp16-allreduce-predivide", "the same divided by 8 first (DDP's default): the sums stay in range",
     FP16_AR("ddp-fp16-allreduce-predivide", "pre")},
    {"ddp-missing-no-sync-bf16-k16",
     "bf16 gradients all-reduced in bf16 after each of 16 micro-batches (no no_sync()): the running gradient is "
     "rounded by every collective",
     DDP("ddp-missing-no-sync-bf16-k16", "8", "16", "bf16", "bf16", "bf16", ", no_sync: false")
         EXPECT_FAIL("rounding")},
    {"ddp-no-sync-bf16-k16", "the same with no_sync(): one collective per window",
     DDP("ddp-no-sync-bf16-k16", "8", "16", "bf16", "bf16", "bf16", "")},
    {"ddp-uneven-tokens-rank-mean",
     "4 ranks with 992, 81, 1024 and 12 tokens, each dividing by its own count: a mean of rank means",
     "name: ddp-uneven-tokens-rank-mean\n"
     "seed: 103\n"
     "tensors:\n"
     "  - name: lm_head\n"
     "    size: 4096\n"
     "    grad: {dist: normal, scale: 1.0e-3, token_snr: 0.05}\n"
     "batch: {microbatches: 2}\n"
     "reduction: token_mean\n"
     "distributed: {world_size: 4, normalize: rank, tokens: [[512, 480], [17, 64], [512, 512], [3, 9]]}\n"
     EXPECT_FAIL("normalization")},
    {"ddp-uneven-tokens-global-mean", "the same divided by the all-reduced token count: the full batch",
     "name: ddp-uneven-tokens-global-mean\n"
     "seed: 103\n"
     "tensors:\n"
     "  - name: lm_head\n"
     "    size: 4096\n"
     "    grad: {dist: normal, scale: 1.0e-3, token_snr: 0.05}\n"
     "batch: {microbatches: 2}\n"
     "reduction: token_mean\n"
     "distributed: {world_size: 4, normalize: global, tokens: [[512, 480], [17, 64], [512, 512], [3, 9]]}\n"},
    {"fsdp-reduce-scatter-bf16",
     "FSDP reduce-scatter in bf16 at 8 ranks with its default divisions (4 before, 2 after)",
     DDP("fsdp-reduce-scatter-bf16", "8", "4", "fp32", "fp32", "bf16", ", collective: reduce_scatter")},
    /* ---- issue 18, item 1: presets that reach the branches tests/coverage.py lists ---- */
    {"rtz-fp32-accum",
     "64 positive micro-batches (lognormal, sigma 3: ten decades) summed in fp32 rounding toward zero (a truncating "
     "fp32 accumulator, as measured on some tensor cores): every rounding loses magnitude, at most 64 fp32 ulps in "
     "all: grad_norm_ratio in [1 - 2^-17 - 2^-24, 1 + 2^-24]; the smallest addends truncate away",
     /* K = 64 RTZ roundings of a growing positive sum each lose less than ulp(S) <= 2^-23 S (S the final
      * sum): the accumulated value lies in ((1 - 64 * 2^-23) S, S] = ((1 - 2^-17) S, S]; the stored fp32
      * gradients (one RNE rounding each, relative 2^-24 either way) widen it by 2^-24 on both sides. */
     "name: rtz-fp32-accum\n"
     "seed: 89\n"
     "tensors:\n"
     "  - name: mlp.w1\n"
     "    size: 4096\n"
     "    grad: {dist: lognormal, scale: 1.0e-3, sigma: 3.0, sign: 0.0}\n"
     "batch: {microbatches: 64, tokens: 64}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp32, accumulator: fp32, rounding: rtz}\n"
     "thresholds: {grad_norm_ratio: {min: 0.99999231, max: 1.0000000596}}\n"},
    {"ftz-fp32-accum",
     "fp32 gradients around 1e-38 summed in fp32 with flush-to-zero (a kernel built with --use_fast_math): "
     "everything below 2^-126 = 1.18e-38 is flushed to 0 (underflow)",
     FTZ_TINY("ftz-fp32-accum", "97", "fp32")},
    {"bf16-ftz-accum",
     "the same gradients summed in bf16 with flush-to-zero (a bf16 unit without subnormals, as on TPUs): "
     "bf16 has fp32's exponent range, so the same values underflow",
     FTZ_TINY("bf16-ftz-accum", "101", "bf16")},
    {"fp16-tiny-grads-unscaled-in-fp16",
     "fp16-tiny-grads-scaled with the gradients accumulated and unscaled in fp16 (fp16 params, no fp32 "
     "master grads): unscaling by 2^-16 in place puts the 1e-8 values back below fp16's subnormals",
     FP16_TINY_ACC("fp16-tiny-grads-unscaled-in-fp16", "{mode: static, init: 65536}", "fp16") EXPECT_FAIL("underflow")},
    {"explicit-tokens-mean",
     "the classic example with explicit per-token values: one micro-batch of 1 token with gradient 4, one of 3 "
     "tokens of 0; the mean of per-micro-batch means is 2, the full batch 1: normalization_rel_err = 1 "
     "(beside a generated tensor with the same token counts)",
     "name: explicit-tokens-mean\n"
     "seed: 103\n"
     "tensors:\n"
     "  - name: lm_head\n"
     "    size: 1024\n"
     "    grad: {dist: normal, scale: 1.0e-3}\n"
     "  - name: bias\n"
     "    size: 1\n"
     "    grad: {values: [[4.0], [0.0, 0.0, 0.0]]}\n"
     "batch: {microbatches: 2, tokens: [1, 3]}\n"
     "reduction: mean\n"
     "precision: {grad: fp32, accumulator: fp32}\n" EXPECT_FAIL("normalization")},
    {"clip-global-norm-three-tensors",
     "three tensors (4096, 1000 and 96 elements, N(0, 1e-2^2)) clipped together at max_norm 0.1: the global "
     "norm (about 0.72) is summed over tensors of sizes that are not powers of two; nothing lost but the clip",
     "name: clip-global-norm-three-tensors\n"
     "seed: 107\n"
     "tensors:\n"
     "  - name: attn.q\n"
     "    size: 4096\n"
     "    grad: {dist: normal, scale: 1.0e-2}\n"
     "  - name: attn.k\n"
     "    size: 1000\n"
     "    grad: {dist: normal, scale: 1.0e-2}\n"
     "  - name: attn.bias\n"
     "    size: 96\n"
     "    grad: {dist: normal, scale: 1.0e-2}\n"
     "batch: {microbatches: 1, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "clip: {max_norm: 0.1}\n"
     "steps: 3\n"},
    {"embedding-padding-row-kahan",
     "embedding gradients, sparse (90% of rows not in the batch are exactly 0) and heavy-tailed (lognormal, "
     "sigma 3), in bf16 with a Kahan-compensated bf16 accumulator, beside the padding row (weights 0, gradient 0) "
     "under weight decay: it must stay 0; the compensation carries the small addends (absorbed_frac is no loss "
     "here, as in long-accum-bf16-kahan-k1024)",
     "name: embedding-padding-row-kahan\n"
     "seed: 109\n"
     "tensors:\n"
     "  - name: embed\n"
     "    size: 4096\n"
     "    grad: {dist: lognormal, scale: 1.0e-3, sigma: 3.0, sparsity: 0.9}\n"
     "  - name: embed.padding_row\n"
     "    size: 64\n"
     "    grad: {dist: constant, scale: 1.0e-3, sparsity: 0.999999}\n"
     "    weight: {dist: constant, scale: 0.0}\n"
     "batch: {microbatches: 8, tokens: 64}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: bf16, accumulator: bf16, rounding: kahan}\n"
     "optimizer: {weight_decay: 0.1}\n"
     "steps: 2\n"
     "thresholds: {absorbed_frac: 1.0}\n"},
    {"bf16-weights-cosine-sr",
     "bf16-weights-cosine-no-master with stochastic rounding of the stored weights and a cosine schedule that "
     "ends at step 80 of 100: updates below half an ulp move the weight with their probability, so the "
     "trajectory stays within sqrt(79)/2 bf16 ulps RMS of the exact one (weight_rel_err <= 0.0625)",
     /* Each of the 79 non-zero updates is one stochastic rounding: an error in (-ulp, ulp), mean 0 given the
      * past, variance <= ulp^2/4 (ulp = 2^-7 in [1, 2), where w stays: it moves at most 0.5 in 79 steps of
      * lr <= 8e-3). Adam's update here does not depend on w (weight_decay 0), so the final error is their sum,
      * a martingale: E[err^2] <= 79 ulp^2 / 4, RMS <= 4.44 * 2^-7 = 0.0347 absolute, and relative (w >= 1);
      * weight_rel_err is that RMS over 4096 independent elements, so it stays near its expectation: 0.0625
      * (1.8 x the bound) fails a biased rounding (RTZ: about 79 ulps / 2 = 0.31) and not a correct one.
      * stale_update_frac is no loss under stochastic rounding (an unchanged weight is a draw): bound 1. */
     BF16_SCHED("bf16-weights-cosine-sr", ", stochastic: true", "{name: cosine, total: 80}", "100",
                "thresholds: {weight_rel_err: 0.0625, stale_update_frac: 1.0}\n")},
    {"bf16-weights-linear-warmup-no-master",
     "the bf16 weights under 10 warmup steps then a linear decay to 0 at step 90 (of 100): updates below 2^-8 "
     "round away at steps 1..4 (warmup) and 51..89: stale_update_frac = 43/89",
     /* lr_t = 8e-3 t/10 for t <= 10: 3.2e-3 < 3.906e-3 at t = 4, 4e-3 at t = 5; then 8e-3 (90 - t)/80: 4e-3 at
      * t = 50, 3.9e-3 at t = 51; 0 from t = 90 (no update to lose): 4 + 39 stale of 89 non-zero updates. */
     BF16_SCHED("bf16-weights-linear-warmup-no-master", "", "{name: linear, warmup: 10, total: 90}", "100", "")
     EXPECT_FAIL("stale update")},
    {"bf16-weights-invsqrt-no-master",
     "the bf16 weights under an inverse-square-root schedule without warmup (lr 8e-3 / sqrt(t)): from step 5 "
     "on the update is below 2^-8 and rounds away: stale_update_frac = 16/20",
     /* 8e-3 / sqrt(4) = 4e-3 > 3.906e-3 > 8e-3 / sqrt(5) = 3.58e-3. */
     BF16_SCHED("bf16-weights-invsqrt-no-master", "", "{name: inverse_sqrt}", "20", "")
     EXPECT_FAIL("stale update")},
    {"bf16-weights-invsqrt-warmup-master",
     "the same weights with fp32 master weights under 10 warmup steps then the inverse square root (the "
     "Transformer's schedule): nothing stale",
     BF16_SCHED("bf16-weights-invsqrt-warmup-master", ", master: fp32", "{name: inverse_sqrt, warmup: 10}", "40", "")},
    {"bf16-weights-step-decay-no-master",
     "the bf16 weights under a step schedule (x0.1 every 20 steps): after the first decay the update 8e-4 is "
     "below 2^-8 and rounds away: stale_update_frac = 20/40",
     BF16_SCHED("bf16-weights-step-decay-no-master", "", "{name: step, step_size: 20, gamma: 0.1}", "40", "")
     EXPECT_FAIL("stale update")},
    {"adamw-sign-descent",
     "AdamW with betas (0, 0): m = g and v = g^2, so every weight moves by lr x sign(g) (times |g| / (|g| + eps)): "
     "sign descent, as the exact reference computes it",
     "name: adamw-sign-descent\n"
     "seed: 113\n"
     "tensors:\n"
     "  - name: w\n"
     "    size: 4096\n"
     "    grad: {dist: normal, scale: 1.0e-3}\n"
     "batch: {microbatches: 1, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "optimizer: {lr: 1.0e-3, betas: [0.0, 0.0], weight_decay: 0.0}\n"
     "steps: 5\n"},
    {"nonfinite-nan-bf16-accum",
     "fp32 gradients of 2e38 and -1e38 under a GradScaler at 4: both overflow fp32 when scaled and meet as "
     "+inf + -inf = NaN in the bf16 accumulator; at scale 2 +inf alone; at 1 the step runs: skipped_steps = 2",
     /* scale 4: 8e38 and -4e38 are beyond fp32's 3.4e38 (+-inf), their sum NaN; scale 2: 4e38 (inf) and
      * -2e38; scale 1: finite. Two of three equal steps lost: scaling_rel_err = sqrt(2/3) = 0.816. */
     "name: nonfinite-nan-bf16-accum\n"
     "seed: 131\n"
     "tensors:\n"
     "  - name: bias\n"
     "    size: 1\n"
     "    grad: {values: [[2.0e38], [-1.0e38]]}\n"
     "batch: {microbatches: 2, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp32, accumulator: bf16}\n"
     "loss_scale: {mode: dynamic, init: 4}\n"
     "steps: 3\n"
     "thresholds: {skipped_steps: {min: 2, max: 2}, scaling_rel_err: 0.9, weight_rel_err: 1.0}\n"},
    {"fp32-accum-gradient-spike",
     "a loss spike: 1% of the per-micro-batch gradients are 1e9 times the rest (1e-3); after a spike the later "
     "micro-batches' gradients of that element are absorbed even in fp32 (below 2^-25 of the sum): "
     "absorbed_frac about 3.5%, invisible in the norm (error 1e-8)",
     /* An element's addition k (k = 0..7) is absorbed when an earlier micro-batch spiked on it: probability
      * 1 - 0.99^k; the mean over k is 1 - (1 - 0.99^8) / (8 x 0.01) = 0.0347 (measured 0.0374), above the
      * default 0.01. */
     "name: fp32-accum-gradient-spike\n"
     "seed: 137\n"
     "tensors:\n"
     "  - name: mlp.w1\n"
     "    size: 4096\n"
     "    grad: {dist: normal, scale: 1.0e-3, outliers: {frac: 0.01, scale: 1.0e9}}\n"
     "batch: {microbatches: 8, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp32, accumulator: fp32}\n" EXPECT_FAIL("absorption")},
    {"fp16-overflow-backoff-clipped",
     "fp16-overflow-scale-backoff with clipping at max_norm 1: the overflowing step 1 is skipped before any "
     "clipping (no norm of an infinite gradient), the scale backs off, the 9 other steps are clipped: "
     "skipped_steps = 1 exactly, scaling_rel_err = sqrt(1/10)",
     "name: fp16-overflow-backoff-clipped\n"
     "seed: 19\n"
     "tensors:\n"
     "  - name: lm_head\n"
     "    size: 4096\n"
     "    grad: {dist: constant, scale: 1.5}\n"
     "batch: {microbatches: 1, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp16, accumulator: fp32}\n"
     "loss_scale: {mode: dynamic, init: 65536}\n"
     "clip: {max_norm: 1.0}\n"
     "steps: 10\n"
     "thresholds: {skipped_steps: {min: 1, max: 1}, scaling_rel_err: 0.5, weight_rel_err: 1.0}\n"},
    {"bf16-weights-master-tiny-lr",
     "bf16 weights at 1.0 with fp32 master weights and lr 1e-8 (the tail of a decayed schedule): the update "
     "1e-8 is below half an fp32 ulp at 1 (2^-24 = 6e-8), so even the master weights never move: "
     "stale_update_frac = 1",
     "name: bf16-weights-master-tiny-lr\n"
     "seed: 21\n"
     "tensors:\n"
     "  - name: norm.weight\n"
     "    size: 4096\n"
     "    grad: {dist: constant, scale: 1.0e-3, sign: 1.0}\n"
     "    weight: {dist: constant, scale: 1.0, sign: 0.0}\n"
     "batch: {microbatches: 1, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "optimizer: {lr: 1.0e-8, weight_decay: 0.0, param: bf16, master: fp32}\n"
     "steps: 10\n" EXPECT_FAIL("stale update")},
    /* The FTZ presets with the gradients stored in bf16, as autocast writes them, and a Kahan-compensated
     * accumulator: the same tiny values (bf16 has fp32's exponent range, min normal 2^-126), the same
     * flushes, so each fails naming underflow; the bf16 stores and Kahan steps take other code (the CPU
     * backend's bf16-gradient loops; the compensated step's flushing stores). */
    {"ftz-fp32-accum-bf16-grads",
     "ftz-fp32-accum with the gradients stored in bf16 (autocast's dtype) before the --use_fast_math fp32 "
     "accumulator: the stores below 2^-126 are flushed as well (underflow)",
     FTZ_TINY_PREC("ftz-fp32-accum-bf16-grads", "97", "grad: bf16, accumulator: fp32")},
    {"bf16-ftz-grads-and-accum",
     "bf16-ftz-accum with bf16 gradients too: a unit without bf16 subnormals stores and sums them (TPU-style): "
     "underflow",
     FTZ_TINY_PREC("bf16-ftz-grads-and-accum", "101", "grad: bf16, accumulator: bf16")},
    {"bf16-kahan-ftz-accum",
     "bf16-ftz-accum with a Kahan-compensated bf16 accumulator: the compensation carries what the rounding "
     "drops, not what flush-to-zero drops: still underflow",
     FTZ_TINY_PREC("bf16-kahan-ftz-accum", "101", "grad: fp32, accumulator: bf16, rounding: kahan")},
    {"rtz-fp32-accum-bf16-grads",
     "rtz-fp32-accum fed bf16 gradients, as a tensor core takes them (bf16 inputs, a truncating fp32 "
     "accumulator): the bf16 stores cost up to 2^-8 either way, the truncation at most 2^-17 more: "
     "grad_norm_ratio in [(1 - 2^-8)(1 - 2^-17), 1 + 2^-8]",
     /* Each stored gradient is the RNE bf16 rounding of a positive x: within a factor 1 +- 2^-8 of x (u =
      * 2^-8), so the exact sum of the stored values lies in [(1 - 2^-8) S, (1 + 2^-8) S], S the exact sum;
      * the 64 RTZ roundings of a growing positive sum lose less than 64 ulps of the final sum, < 2^-17 of it
      * (rtz-fp32-accum). Per element, and so for the norms: the ratio is in ((1 - 2^-8)(1 - 2^-17),
      * 1 + 2^-8] = (0.9960861..., 1.00390625]; thresholds 0.99608 and 1.0039063 (rounded outwards). */
     "name: rtz-fp32-accum-bf16-grads\n"
     "seed: 89\n"
     "tensors:\n"
     "  - name: mlp.w1\n"
     "    size: 4096\n"
     "    grad: {dist: lognormal, scale: 1.0e-3, sigma: 3.0, sign: 0.0}\n"
     "batch: {microbatches: 64, tokens: 64}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: bf16, accumulator: fp32, rounding: rtz}\n"
     "thresholds: {grad_norm_ratio: {min: 0.99608, max: 1.0039063}}\n"},
    {"bf16-weights-cosine-master-sr",
     "bf16-weights-cosine-master with the bf16 copy of the fp32 master weights stochastically rounded (each "
     "stored weight within one bf16 ulp of the master): the next step reads the master, so the trajectory, "
     "stale_update_frac = 0 and weight_rel_err (of the master) are bf16-weights-cosine-master's",
     BF16_COSINE("bf16-weights-cosine-master-sr", ", master: fp32, stochastic: true", "")},
    {"fp16-grads-just-below-one-overflow",
     "fp16 gradients of 0.9999 under a GradScaler at 2^16: 0.9999 x 65536 = 65529.4 is below 2^16 but above "
     "65520 (fp16's largest finite 65504 plus half its ulp of 32), so it rounds to +inf: step 1 is skipped, the "
     "scale backs off to 2^15 (32764.7 rounds to 32768, finite), 4 steps run: skipped_steps = 1, "
     "scaling_rel_err = sqrt(1/5)",
     "name: fp16-grads-just-below-one-overflow\n"
     "seed: 113\n"
     "tensors:\n"
     "  - name: lm_head\n"
     "    size: 1024\n"
     "    grad: {dist: constant, scale: 0.9999}\n"
     "batch: {microbatches: 1, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp16, accumulator: fp32}\n"
     "loss_scale: {mode: dynamic, init: 65536}\n"
     "steps: 5\n"
     "thresholds: {skipped_steps: {min: 1, max: 1}, scaling_rel_err: 0.5, weight_rel_err: 1.0}\n"},
    /* Embedding rows that get almost no gradient (rare tokens), under weight decay, with bf16 params and
     * fp32 master weights at 0.02 (in [2^-6, 2^-5): fp32 ulp 2^-29, bf16 ulp 2^-13). With g = 1e-16 (bf16
     * and fp32 normals), m = 1e-17 and v >= 1e-3 g^2 = 1e-35 stay normal in fp32 (min 2^-126 = 1.2e-38), and
     * the Adam update, about lr * g / eps = 1e-3 * 1e-16 / 1e-8 = 1e-11, is below half an ulp of the master
     * (2^-30 = 9.3e-10): the decay lr * wd * w = 1e-4 * 0.02 = 2e-6 is the whole step, far above it, so every
     * master takes it: stale_update_frac = 0, and 20 steps of fp32 rounding keep weight_rel_err near 20 x
     * 2^-24. An optimizer that decays the bf16 copy instead (2e-6 is below its half ulp 2^-14 = 6.1e-5) and
     * copies the master back loses every step: stale_update_frac = 1 (tests/python/test_backends.py). */
    {"bf16-master-decay-frozen-rows",
     "embedding rows with almost no gradient (1e-16) under weight decay 0.1 at lr 1e-3, bf16 params with fp32 "
     "master weights at 0.02: the Adam update (1e-11) is below half an ulp of the master, the decay (2e-6) is "
     "not: every master takes its decay (stale_update_frac = 0); decayed on the bf16 copy instead it is lost",
     "name: bf16-master-decay-frozen-rows\n"
     "seed: 127\n"
     "tensors:\n"
     "  - name: embed.weight\n"
     "    size: 4096\n"
     "    grad: {dist: constant, scale: 1.0e-16}\n"
     "    weight: {dist: constant, scale: 0.02}\n"
     "batch: {microbatches: 1, tokens: 1}\n"
     "precision: {grad: bf16, accumulator: bf16}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "optimizer: {lr: 1.0e-3, weight_decay: 0.1, param: bf16, master: fp32}\n"
     "steps: 20\n"
     "thresholds: {stale_update_frac: 0.0}\n"},
    /* adam-state-fp32-tiny-grads with fp16 params and an fp32 master, the state in fp32 as asked, without
     * weight decay (the step is Adam's alone): v = 1e-3 g^2 ~ 1e-11 is an fp32 normal, nothing underflows
     * in the state. The same m and v kept in the
     * param's fp16 would underflow: every v (below fp16's half-smallest subnormal 2^-25 = 3e-8) and the m
     * below 2^-25, state_underflow_frac > 1/2 (tests/python/test_backends.py). */
    {"adam-state-fp32-fp16-master-tiny-grads",
     "adam-state-fp32-tiny-grads with fp16 params and an fp32 master (mixed precision's layout), m and v in fp32 "
     "as asked: nothing underflows in the state; kept in the param's fp16 instead, every v (1e-11) would be "
     "stored as 0",
     ADAM_STATE_OPT("adam-state-fp32-fp16-master-tiny-grads",
                    "state: fp32, param: fp16, master: fp32, weight_decay: 0.0")},
    {"fp16-overflow-sparse-embedding",
     "fp16-overflow-scale-backoff on a sparse embedding: 90% of the rows are not in the batch (gradient exactly 0), "
     "the others 1.5, which overflow fp16 at 2^16: the overflow is found among the zeros, step 1 is skipped, the "
     "scale backs off to 2^15 (49152 fits), 9 steps run: skipped_steps = 1, scaling_rel_err about sqrt(1/10)",
     /* 4096 rows at sparsity 0.9: about 410 non-zero rows a step (P(none) = 0.9^4096), each 1.5; step 1 stores
      * them as +inf (98304 > 65504), steps 2..10 at 2^15 store 49152 (exact). The skipped step's share of the
      * gradient is sqrt(n_1 / (n_1 + ... + n_10)) with n_t the non-zero rows of step t: about sqrt(1/10) =
      * 0.32, below 0.5 unless step 1 drew 1/3 of all non-zero rows (impossible with these counts). */
     "name: fp16-overflow-sparse-embedding\n"
     "seed: 127\n"
     "tensors:\n"
     "  - name: embed\n"
     "    size: 4096\n"
     "    grad: {dist: constant, scale: 1.5, sparsity: 0.9}\n"
     "batch: {microbatches: 1, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp16, accumulator: fp32}\n"
     "loss_scale: {mode: dynamic, init: 65536}\n"
     "steps: 10\n"
     "thresholds: {skipped_steps: {min: 1, max: 1}, scaling_rel_err: 0.5, weight_rel_err: 1.0}\n"},
    /* A partial window whose micro-batches hold different token counts: token_mean divides
     * each S_k by N = 512 + 17 + 300 + 64 + 480 = 1373, the tokens seen, so g_same = g_full
     * exactly (normalization_rel_err 0) and grad_norm_ratio is 1 within the fp32 roundings
     * (the band of the equal-token partial-window presets). A window that takes another
     * micro-batch's count (the next slot's, the equal-count default's) weighs S_k by the
     * wrong n and leaves the band. */
    {"partial-window-uneven-token-mean",
     "5 micro-batches of 512, 17, 300, 64 and 480 tokens in a window of 8 with token_mean: equals the full batch "
     "of the 1373 tokens seen",
     "name: partial-window-uneven-token-mean\n"
     "seed: 5\n"
     "tensors:\n"
     "  - name: attn.qkv\n"
     "    size: 4096\n"
     "    grad: {dist: normal, scale: 1.0e-3}\n"
     "batch: {accumulation_steps: 8, microbatches: 5, tokens: [512, 17, 300, 64, 480]}\n"
     "reduction: token_mean\n"
     "fullbatch: mean\n"
     "precision: {grad: fp32, accumulator: fp32}\n" NORM_RATIO_ONE},
    /* Estimates at scale (`sample:`, docs/scenarios.md): 4.3e9 parameters judged from 90112
     * sampled elements, fp16 gradients without loss scaling. The embedding table (2^30,
     * its own sample of 65536: weight M/n = 16384) has gradients N(0, 1e-9^2), |g| < 6e-9
     * below half fp16's min subnormal (2^-25 = 3e-8): each element's one rounding of a
     * non-zero value (its fp16 store) goes to 0, an underflow, and adding the stored 0
     * rounds nothing. The layers (2^31 + 2^30, lognormal 1e-2, sigma 0.5: below fp16's min
     * normal only beyond 10 sigma; the scenario's 24576 spread as 16384 + 8192: weight
     * 131072 each) have two roundings each (the store and the fp32 accumulator's add), none
     * an underflow. underflow_frac = 2^30 / (2^30 + 2 (2^31 + 2^30)) = 1/7 exactly, and
     * the estimate is exact too: every element of a stratum counts alike, so
     * sum_h w_h sum y / sum_h w_h sum x is the population's ratio and its interval has
     * width 0. A stratum weight of 1 instead of M_h/n_h gives 65536 / (65536 + 2 * 24576)
     * = 4/7. The embedding's lost gradients (1e-9 beside 1e-2) do not move the norm:
     * warn, not fail. */
    {"fp16-embed-underflow-sampled",
     "4.3e9 parameters sampled (90112 elements), fp16 gradients without loss scaling: the embedding table's 1e-9 "
     "gradients all flush to 0: underflow_frac = 1/7 exactly, estimated exactly from the sample",
     "name: fp16-embed-underflow-sampled\n"
     "seed: 61\n"
     "sample: 24576\n"
     "tensors:\n"
     "  - name: embed\n"
     "    size: 1073741824\n"
     "    sample: 65536\n"
     "    grad: {dist: normal, scale: 1.0e-9}\n"
     "  - name: layers.attn\n"
     "    size: 2147483648\n"
     "    grad: {dist: lognormal, scale: 1.0e-2, sigma: 0.5, sign: 0.5}\n"
     "  - name: layers.mlp\n"
     "    size: 1073741824\n"
     "    grad: {dist: lognormal, scale: 1.0e-2, sigma: 0.5, sign: 0.5}\n"
     "batch: {microbatches: 1, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp16, accumulator: fp32}\n"
     "thresholds: {underflow_frac: {min: 0.142857142857, max: 0.142857142858}}\n"},
    /* Issue 27: every format a backend stores into. fp8 accumulators (OCP OFP8, non-saturating:
     * e4m3 overflows to NaN, e5m2 to inf; docs/formats.md): a backend that saturates at max
     * finite instead fails each of these three, naming saturation. */
    {"fp8-e4m3-accum-overflow",
     "8 micro-batches of fp32 gradients of about 64 (lognormal, sigma 0.5) summed in an fp8 e4m3 accumulator: "
     "sums past 464 (448 + half its ulp 32) overflow to e4m3's NaN and stay NaN: fail naming non-finite (e4m3 "
     "has no infinity: its overflow is a NaN, test_attribution)",
     "name: fp8-e4m3-accum-overflow\n"
     "seed: 113\n"
     "tensors:\n"
     "  - name: router.logits\n"
     "    size: 4096\n"
     "    grad: {dist: lognormal, scale: 64, sigma: 0.5}\n"
     "batch: {microbatches: 8, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp32, accumulator: fp8_e4m3}\n" EXPECT_FAIL("non-finite")},
    /* Scaled gradients 1 x 128, summed in e4m3: 128, 256, 384, then 512 > 464 overflows to NaN
     * in every element: step 1 is skipped and the scale backs off to 64 (sums up to 256,
     * unscaled to exactly 4); after 2 clean steps it grows to 128 and step 4 is skipped
     * again: skipped steps 1 and 4, scales 128, 64, 64, 128, 64, 64. Two of six updates
     * lost: weight_rel_err fails, naming scaling. */
    {"fp8-e4m3-accum-loss-scale",
     "fp32 gradients of 1 under a dynamic loss scale of 128 summed in fp8 e4m3 (4 micro-batches) and unscaled "
     "there: 512 overflows to NaN, steps 1 and 4 are skipped (scales 128, 64, 64, 128, 64, 64): fail naming scaling",
     "name: fp8-e4m3-accum-loss-scale\n"
     "seed: 131\n"
     "tensors:\n"
     "  - name: w\n"
     "    size: 4096\n"
     "    grad: {dist: constant, scale: 1.0, sign: 0.0}\n"
     "batch: {microbatches: 4, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "steps: 6\n"
     "precision: {grad: fp32, accumulator: fp8_e4m3}\n"
     "loss_scale: {mode: dynamic, init: 128, growth: 2, backoff: 0.5, interval: 2}\n" EXPECT_FAIL("scaling")},
    /* The same in e5m2 at scale 2^14: 16384, 32768, 49152 (1.5 x 2^15), then 65536 > 61440
     * (57344 + half its ulp 8192) overflows to inf: skipped steps 1 and 4, scales 2^14,
     * 2^13, 2^13, 2^14, 2^13, 2^13. Clipping stores into e5m2 too: each unscaled gradient
     * is 4, the norm 4 x 64 = 256, the coefficient 64 / 256 = 1/4: every clipped value 1. */
    {"fp8-e5m2-accum-loss-scale",
     "fp32 gradients of 1 under a dynamic loss scale of 2^14 summed in fp8 e5m2, unscaled and clipped there: "
     "65536 overflows to inf, steps 1 and 4 are skipped (scales 2^14, 2^13, 2^13, 2^14, 2^13, 2^13): fail naming "
     "scaling",
     "name: fp8-e5m2-accum-loss-scale\n"
     "seed: 137\n"
     "tensors:\n"
     "  - name: w\n"
     "    size: 4096\n"
     "    grad: {dist: constant, scale: 1.0, sign: 0.0}\n"
     "batch: {microbatches: 4, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "steps: 6\n"
     "precision: {grad: fp32, accumulator: fp8_e5m2}\n"
     "loss_scale: {mode: dynamic, init: 16384, growth: 2, backoff: 0.5, interval: 2}\n"
     "clip: {max_norm: 64}\n" EXPECT_FAIL("scaling")},
    /* Issue 27: stochastic rounding on a tensor of more than 2^20 elements, so that random
     * bits reused at any lag below the tensor size show (sr_lag_corr_score, gp_sr_lag.h).
     * 2 micro-batches (the second's roundings are the draws the lag test reads). */
    {"bf16-sr-accum-2p20",
     "2 micro-batches of positive fp32 gradients summed in bf16 with stochastic rounding over 1,114,112 "
     "(2^20 + 2^16) elements: no correlation between the roundings at any lag (sr_lag_corr_score <= 1, false "
     "alarm <= 1e-9); error within sqrt(2) x 2^-8",
     "name: bf16-sr-accum-2p20\n"
     "seed: 139\n"
     "tensors:\n"
     "  - name: embed\n"
     "    size: 1114112\n"
     "    grad: {dist: lognormal, scale: 1.0e-3, sigma: 1.0, sign: 0.0}\n"
     "batch: {microbatches: 2, tokens: 64}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp32, accumulator: bf16, rounding: stochastic}\n"
     "thresholds: {grad_rel_err_fullbatch: 0.015625}\n"},
    /* Issue 25 in the default suite: scaled gradient formats (precision.grad), a scaled
     * collective with per-rank scales (distributed.reduce_dtype) and saturation (issue 27's
     * mechanism, by an RTZ accumulator). The runner stores a scaled gradient as the fp32
     * values it dequantizes to, and the collective adds in fp32: every backend runs them
     * (the example plugin with --compare cpu too). Verdicts reasoned in docs/model.md. */
    {"mxfp8-e4m3-grads-floor",
     "MXFP8 e4m3 gradients under the OCP floor rule: blocks whose amax mantissa passes 1.1101b clamp to 448 x X "
     "(saturation, about 14% of blocks); the rms error stays below 2^-4: warn naming saturation",
     MXFP8_GRADS("mxfp8-e4m3-grads-floor", "mxfp8_e4m3", "") EXPECT("warn", "saturation")},
    {"mxfp8-e4m3-grads-rceil", "the same gradients under the rceil rule (cuBLAS, Transformer Engine): no clamp, "
     "e4m3's rounding alone (rms about 2^-4 x 0.425): passes 2^-4; a quarter of the gradients are exact zeros "
     "(sparsity), stored as 0",
     MXFP8_GRADS("mxfp8-e4m3-grads-rceil", "\"mxfp8_e4m3:rceil\"", ", sparsity: 0.25")},
    {"fp8-e4m3-grads-delayed-stale",
     "fp8 e4m3 gradients under delayed scaling (amax history of 16 steps) growing 4x per step: the scale the "
     "history chose is 4x too large, x*s reaches 4 x 448 and clamps (saturation, with a stale-scale note)",
     FP8_DELAYED_GROWING("fp8-e4m3-grads-delayed-stale", "") EXPECT_FAIL("saturation")},
    {"fp8-e4m3-grads-delayed-nosat", "the same with OCP's non-saturating cast: past 448 e4m3 has only NaN "
     "(no infinity): the accumulated gradient is NaN (non-finite)",
     FP8_DELAYED_GROWING("fp8-e4m3-grads-delayed-nosat", ":nosat") EXPECT_FAIL("non-finite")},
    {"nvfp4-grads-sr",
     "NVFP4 gradients (e2m1, an e4m3 scale per 16, no tensor scale) with stochastic rounding: elements below a "
     "quarter of their block's scale (half e2m1's 0.5) underflow, about 6% of normal values: underflow_frac fails",
     "name: nvfp4-grads-sr\n"
     "seed: 157\n"
     "tensors:\n"
     "  - name: mlp.w2\n"
     "    size: 4096\n"
     "    grad: {dist: normal, scale: 0.3, token_snr: 3.0}\n"
     "batch: {microbatches: 16, tokens: 64}\n"
     "reduction: mean\n"
     "precision: {grad: \"nvfp4:single:sr\", accumulator: fp32}\n" EXPECT_FAIL("underflow")},
    {"ddp-fp8-allreduce-per-rank-scales",
     "an fp8 e4m3 ring all-reduce over 8 ranks, each rank scaling what it sends by its own amax, partial sums in "
     "fp32: 8 casts of 4 significant bits, collective_rel_err about 0.76 x 2^-4 = 0.047 > 8 x bf16's 2^-8",
     DDP_SCALED("ddp-fp8-allreduce-per-rank-scales", "\"fp8_e4m3:current\"") EXPECT_FAIL("rounding")},
    {"ddp-mxfp8-allreduce-floor", "the same all-reduce in MXFP8 e4m3 (floor rule): partial sums past 1.1101b in "
     "a block's top binade clamp at every hop (saturation)",
     DDP_SCALED("ddp-mxfp8-allreduce-floor", "mxfp8_e4m3") EXPECT_FAIL("saturation")},
    {"rtz-fp16-accum-saturation",
     "gradients of +-30000 summed in fp16 rounding toward zero: a running sum past 65504 stays at 65504 (RTZ "
     "never rounds to infinity): saturation",
     "name: rtz-fp16-accum-saturation\n"
     "seed: 167\n"
     "tensors:\n"
     "  - name: mlp.w2\n"
     "    size: 4096\n"
     "    grad: {dist: constant, scale: 30000.0, sign: 0.5}\n"
     "batch: {microbatches: 4, tokens: 1}\n"
     "reduction: sum\n"
     "fullbatch: sum\n"
     "precision: {grad: fp32, accumulator: fp16, rounding: rtz}\n" EXPECT_FAIL("saturation")},
    /* Scales that span the runner's chunks (a 65536-element tensor: 4 chunks): per-tensor
     * current scaling, 128x128 tiles, two-level NVFP4, and a scaled accumulator; the same
     * configurations, thresholds and reasoning as the examples named (docs/model.md). */
    {"fp8-e4m3-grads-current-growing",
     "the gradients that saturate delayed scaling (4x larger every step) under per-tensor current scaling: "
     "s = 448 / this micro-batch's amax follows the growth, nothing clamps; e4m3's rounding stays below 2^-4 and a "
     "few of the smallest gradients underflow: warn (examples/scenarios/fp8-current-scaling-survives-growth.yaml)",
     FP8_SPAN("fp8-e4m3-grads-current-growing", "", "\"fp8_e4m3:current\"", "fp32", "4, tokens: 512", "4",
              ", shrink: 4.0", "grad_rel_err_fullbatch: 0.0625") EXPECT_VERDICT("warn")},
    {"fp8-e4m3-grads-128x128-growing",
     "the same gradients under DeepSeek-V3's 128x128 tiles of the tensor's [256, 256] view, each tile scaled by "
     "its own amax: as current scaling, rounding below 2^-4, a few underflows: warn "
     "(examples/scenarios/fp8-delayed-scaling-growing-grads.yaml, point 6)",
     FP8_SPAN("fp8-e4m3-grads-128x128-growing", "    cols: 256\n", "\"fp8_e4m3:blockwise_128x128\"", "fp32",
              "4, tokens: 512", "4", ", shrink: 4.0", "grad_rel_err_fullbatch: 0.0625") EXPECT_VERDICT("warn")},
    {"nvfp4-grads-two-level",
     "NVFP4 as NVIDIA's recipe stores gradients: an fp32 tensor scale amax / (448 x 6) under each block's e4m3 "
     "scale keeps gradients of 1e-3 in range; errors within the derived bounds, some elements underflow: warn "
     "(examples/scenarios/nvfp4-two-level-small-grads.yaml)",
     FP8_SPAN("nvfp4-grads-two-level", "", "nvfp4", "fp32", "1, tokens: 512", "1", "",
              "grad_rel_err_fullbatch: 0.38, underflow_frac: 0.075, weight_rel_err: 0.0014") EXPECT_VERDICT("warn")},
    {"fp8-e4m3-current-accumulator",
     "bf16 gradients accumulated in fp8 e4m3 with one scale per tensor (FP8-LM / MS-AMP): the sum re-quantized "
     "from its own amax after each of 8 micro-batches, error at most 2^-4 sqrt((K + 1) / 2) = 0.133; a few "
     "elements of the sum underflow: warn (examples/scenarios/fp8-e4m3-current-accumulator.yaml)",
     FP8_SPAN("fp8-e4m3-current-accumulator", "", "bf16", "\"fp8_e4m3:current\"", "8, tokens: 512", "1", "",
              "grad_rel_err_fullbatch: 0.133") EXPECT_VERDICT("warn")},
    {NULL, NULL, NULL},
};

const gp_preset *gp_presets(void)
{
    return presets;
}

const gp_preset *gp_preset_find(const char *name)
{
    for (const gp_preset *p = presets; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}
