/* gp_presets.c — the default suite: each known incident as a scenario, with numbers a
 * reviewer can check by hand (see each summary). Thresholds not given fall back to the
 * defaults of gp_default_threshold. */
#include "gp_presets.h"

#include <string.h>

/* LoRA-like: per-micro-batch gradients (what the backward writes, after the 1/N of
 * token_mean over K = 8 equal micro-batches) of about 1e-6 to 4e-6: per-token-mean
 * magnitudes lognormal around 1.6e-5, divided by 8. Threshold: no worse than one bf16
 * rounding of the result (2^-8) — the policy for bf16 training. */
#define LORA(NAME, GRAD, ACC)                                                           \
    "name: " NAME "\n"                                                                  \
    "seed: 42\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: blocks.7.attn1.lora_A\n"                                                 \
    "    size: 65536\n"                                                                 \
    "    grad: {dist: lognormal, scale: 1.6e-5, sigma: 0.5, sign: 0.5}\n"               \
    "batch: {microbatches: 8, tokens: 512}\n"                                           \
    "reduction: token_mean\n"                                                           \
    "precision: {grad: " GRAD ", accumulator: " ACC ", rounding: rne}\n"                \
    "thresholds: {grad_rel_err_fullbatch: 3.90625e-3}\n"

#define LONG_ACCUM(NAME, K, ACC)                                                        \
    "name: " NAME "\n"                                                                  \
    "seed: 7\n"                                                                         \
    "tensors:\n"                                                                        \
    "  - name: mlp.w1\n"                                                                \
    "    size: 4096\n"                                                                  \
    "    grad: {dist: lognormal, scale: 1.0e-3, sigma: 0.5, sign: 0.1}\n"               \
    "batch: {microbatches: " K ", tokens: 64}\n"                                        \
    "reduction: sum\n"                                                                  \
    "fullbatch: sum\n"                                                                  \
    "precision: {grad: fp32, accumulator: " ACC ", rounding: rne}\n"

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

#define FP16_TINY(NAME, LS)                                                             \
    "name: " NAME "\n"                                                                  \
    "seed: 11\n"                                                                        \
    "tensors:\n"                                                                        \
    "  - name: embed\n"                                                                 \
    "    size: 16384\n"                                                                 \
    "    grad: {dist: lognormal, scale: 1.0e-7, sigma: 1.0, sign: 0.5}\n"               \
    "batch: {microbatches: 8, tokens: 512}\n"                                           \
    "reduction: token_mean\n"                                                           \
    "precision: {grad: fp16, accumulator: fp32}\n"                                      \
    "loss_scale: " LS "\n"

static const gp_preset presets[] = {
    {"lora-bf16-accum",
     "LoRA gradients (1e-6..4e-6) stored bf16, accumulated in bf16: a few 1e-3 of rounding error, no underflow",
     LORA("lora-bf16-accum", "bf16", "bf16")},
    {"lora-fp32-accum", "the same gradients accumulated in fp32: only the bf16 storage error remains",
     LORA("lora-fp32-accum", "bf16", "fp32")},
    {"lora-fp16-accum",
     "the same gradients in fp16: stored as subnormals (below 6.1e-5), many keeping under half their bits",
     LORA("lora-fp16-accum", "fp16", "fp16")},
    {"long-accum-bf16-k64", "64 micro-batches summed in bf16: rounding error grows; the first addends are absorbed",
     LONG_ACCUM("long-accum-bf16-k64", "64", "bf16")},
    {"long-accum-bf16-k1024", "1024 micro-batches summed in bf16: absorption dominates",
     LONG_ACCUM("long-accum-bf16-k1024", "1024", "bf16")},
    {"long-accum-fp32-k1024", "the same 1024 micro-batches in fp32: nothing absorbed",
     LONG_ACCUM("long-accum-fp32-k1024", "1024", "fp32")},
    {"uneven-tokens-mean",
     "mean of per-micro-batch means with token counts 512..17: a normalization error, in exact arithmetic",
     UNEVEN("uneven-tokens-mean", "mean")},
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
     "precision: {grad: fp32, accumulator: fp32}\n"},
    {"fp16-tiny-grads-noscale", "fp16 gradients around 1e-8 without loss scaling: most underflow to 0",
     FP16_TINY("fp16-tiny-grads-noscale", "{mode: none}")},
    {"fp16-tiny-grads-scaled", "the same with a static loss scale of 2^16, unscaled in fp32: nothing lost",
     FP16_TINY("fp16-tiny-grads-scaled", "{mode: static, init: 65536}")},
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
