/* gp_advise.h — the alternatives to a configuration that gradprec can price
 * (`gradprec advise`): fp32 accumulator, fp32 master weights, Kahan compensation,
 * stochastic rounding, loss scaling, a token-normalised loss — only those that change
 * something in the scenario — each as a modified scenario to run, with what it costs in
 * memory per trainable parameter under the memory model of docs/advise.md. */
#ifndef GP_ADVISE_H
#define GP_ADVISE_H

#include "gp_scenario.h"

typedef enum {
    GP_ALT_FP32_ACCUMULATOR = 0, /* precision.accumulator: fp32 */
    GP_ALT_KAHAN_ACCUMULATOR,    /* precision.rounding: kahan (a compensation buffer) */
    GP_ALT_SR_ACCUMULATOR,       /* precision.rounding: stochastic */
    GP_ALT_MASTER_WEIGHTS,       /* optimizer.master: fp32 */
    GP_ALT_KAHAN_WEIGHTS,        /* optimizer.kahan: true */
    GP_ALT_SR_WEIGHTS,           /* optimizer.stochastic: true */
    GP_ALT_LOSS_SCALING,         /* loss_scale: {mode: dynamic} (GradScaler's defaults) */
    GP_ALT_TOKEN_MEAN,           /* reduction: token_mean */
    GP_ALT_STATE_FP32,           /* optimizer.state: fp32 (from a low-bit state) */
    GP_ALT_STATE_BNB8,           /* optimizer.state: bnb8_blockwise (bitsandbytes AdamW8bit) */
    GP_ALT_STATE_TORCHAO8,       /* optimizer.state: torchao_8bit */
    GP_ALT_STATE_TORCHAO4,       /* optimizer.state: torchao_4bit */
    GP_ALT_STATE_TORCHAO_FP8,    /* optimizer.state: torchao_fp8 */
    GP_ALT_FP8_BLOCKWISE,        /* plain fp8 grads -> precision.grad: fp8_*:blockwise_1x128 */
    GP_ALT_MXFP8,                /* plain fp8 grads -> precision.grad: mxfp8_*:rceil */
    GP_ALT_MX_RCEIL,             /* MX grads under another rule -> the same with :rceil */
    GP_ALT_SR_GRAD,              /* scaled grads rounded to nearest -> the same with :sr */
    GP_ALT_BF16_REDUCE,          /* a scaled reduce dtype -> distributed.reduce_dtype: bf16 */
    GP_ALT_REDUCE_RCEIL,         /* an MX reduce dtype under another rule -> the same with :rceil */
    GP_NALT
} gp_alt_kind;

typedef struct {
    gp_alt_kind kind;
    const char *label;      /* "fp32 accumulator" */
    const char *change;     /* what changes, in scenario keys: "precision.accumulator: fp32" */
    double bytes_per_param; /* extra bytes per trainable parameter */
    double mv_traffic;      /* extra bytes of Adam's m and v (block scales included) read and written per
                               trainable parameter per optimizer step (gp_advise_mv_traffic); 0 when the
                               alternative leaves the state as it is */
} gp_alternative;

/* Bytes of state per trainable parameter of sc beyond its stored weight: the gradient
 * accumulator (accumulator width), Adam's m and v (2 x state width; a low-bit state: its
 * codes and block scales as the library stores them, gp_lowbit_bytes_per_element), the
 * fp32 master copy (4) and the Kahan compensations (the accumulator's and the weights'). */
double gp_advise_state_bytes(const gp_scenario *sc);

/* Bytes of Adam's m and v moved per trainable parameter per optimizer step: each read once
 * and written once, as one fused step does (bitsandbytes' and torchao's low-bit steps, torch's
 * fused AdamW), so 2 x their stored bytes (codes and block scales for a low-bit state): fp32
 * 16, 8-bit and fp8 2 x 2.03125 = 4.0625, 4-bit 2 x 1.0625 = 2.125. The least traffic of a
 * step; an unfused step (torch's single-tensor AdamW) moves more. */
double gp_advise_mv_traffic(const gp_scenario *sc);

/* The alternatives that apply to sc (a change that leaves sc as it is does not apply;
 * weight alternatives need bf16/fp16 weights; loss scaling needs fp16/fp8 gradients and
 * no scaler; Kahan and stochastic rounding of the accumulator need a non-fp32 one; the
 * low-bit optimizer states need the plain variant (no master, Kahan, stochastic or fused
 * weights), every tensor a whole number of the state's blocks and no sampling, and are
 * offered only from a low-bit state: gp_advise_alternatives_states; a scaled reduce dtype
 * gets bf16's, an MX one under another rule :rceil), in gp_alt_kind order. Returns how many were written to alt (at most GP_NALT). */
int gp_advise_alternatives(const gp_scenario *sc, gp_alternative *alt);

/* gp_advise_alternatives with the low-bit optimizer states offered for any state when
 * states != 0 (`gradprec advise --states`); without it they are offered only when sc's
 * state is low-bit already (then fp32 and the other low-bit states). */
int gp_advise_alternatives_states(const gp_scenario *sc, int states, gp_alternative *alt);

/* out = sc with alternative a applied, named "NAME + LABEL" (an independent copy; free
 * with gp_scenario_free). Returns 0, or -1 with err set (out of memory, a name too long). */
int gp_advise_scenario(const gp_scenario *sc, const gp_alternative *a, gp_scenario *out, gp_error *err);

#endif
