/* gp_advise.c — see gp_advise.h. */
#include "gp_advise.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/cpu/gp_lowbit.h"

static double width(gp_format f)
{
    return gp_fmt_get(f).width / 8.0;
}

/* Bytes per element of the accumulator: its format's, or a scaled accumulator's element
 * (one fp32 scale per tensor: negligible). */
static double acc_width(const gp_scenario *sc)
{
    return sc->precision.acc_scaled ? gp_elem_info(sc->precision.acc_sc.elem).width / 8.0
                                    : width(sc->precision.accumulator);
}

/* Bytes of m and v per parameter as the state is stored. */
static double mv_bytes(const gp_scenario *sc)
{
    return sc->optimizer.lowbit ? gp_lowbit_bytes_per_element((gp_lowbit)sc->optimizer.lowbit)
                                : 2 * width(sc->optimizer.state);
}

double gp_advise_mv_traffic(const gp_scenario *sc)
{
    return 2 * mv_bytes(sc);
}

double gp_advise_state_bytes(const gp_scenario *sc)
{
    double b = acc_width(sc) + mv_bytes(sc);
    if (sc->optimizer.master)
        b += 4;
    if (sc->optimizer.kahan)
        b += width(sc->optimizer.param);
    if (sc->precision.rounding == GP_ACC_KAHAN)
        b += width(sc->precision.accumulator);
    return b;
}

int gp_advise_alternatives(const gp_scenario *sc, gp_alternative *alt)
{
    return gp_advise_alternatives_states(sc, 0, alt);
}

int gp_advise_alternatives_states(const gp_scenario *sc, int states, gp_alternative *alt)
{
    int n = 0;
    gp_format acc = sc->precision.accumulator, par = sc->optimizer.param, g = sc->precision.grad;
    int narrow_acc = acc != GP_FP32, narrow_par = par != GP_FP32 && !sc->optimizer.master;
    if (narrow_acc || sc->precision.acc_scaled)
        alt[n++] = (gp_alternative){GP_ALT_FP32_ACCUMULATOR, "fp32 accumulator", "precision.accumulator: fp32",
                                    4 - acc_width(sc) - (sc->precision.rounding == GP_ACC_KAHAN ? width(acc) : 0), 0};
    if (narrow_acc && sc->precision.rounding != GP_ACC_KAHAN)
        alt[n++] = (gp_alternative){GP_ALT_KAHAN_ACCUMULATOR, "Kahan accumulator", "precision.rounding: kahan",
                                    width(acc), 0};
    if (narrow_acc && sc->precision.rounding != GP_ACC_STOCHASTIC)
        alt[n++] = (gp_alternative){GP_ALT_SR_ACCUMULATOR, "stochastic-rounding accumulator",
                                    "precision.rounding: stochastic",
                                    sc->precision.rounding == GP_ACC_KAHAN ? -width(acc) : 0, 0};
    if (narrow_par)
        alt[n++] = (gp_alternative){GP_ALT_MASTER_WEIGHTS, "fp32 master weights", "optimizer.master: fp32",
                                    4 - (sc->optimizer.kahan ? width(par) : 0), 0};
    if (narrow_par && !sc->optimizer.kahan)
        alt[n++] = (gp_alternative){GP_ALT_KAHAN_WEIGHTS, "Kahan weights", "optimizer.kahan: true", width(par), 0};
    if (narrow_par && !sc->optimizer.stochastic)
        alt[n++] = (gp_alternative){GP_ALT_SR_WEIGHTS, "stochastic-rounding weights", "optimizer.stochastic: true",
                                    sc->optimizer.kahan ? -width(par) : 0, 0};
    if ((g == GP_FP16 || g == GP_FP8_E4M3 || g == GP_FP8_E5M2) && sc->loss_scale.mode == GP_LS_NONE)
        alt[n++] = (gp_alternative){GP_ALT_LOSS_SCALING, "loss scaling", "loss_scale: {mode: dynamic}", 0, 0};
    if (sc->reduction == GP_RED_MEAN || sc->reduction == GP_RED_MEAN_NO_DIV)
        alt[n++] = (gp_alternative){GP_ALT_TOKEN_MEAN, "token-normalised loss", "reduction: token_mean", 0, 0};
    /* the optimizer state: m and v as a library keeps them (bytes per parameter for both) */
    double mv = mv_bytes(sc);
    if (sc->optimizer.lowbit)
        alt[n++] = (gp_alternative){GP_ALT_STATE_FP32, "fp32 optimizer state", "optimizer.state: fp32", 8 - mv,
                                    2 * (8 - mv)};
    static const struct {
        gp_alt_kind kind;
        gp_lowbit f;
        const char *label, *change;
    } lowbit[] = {{GP_ALT_STATE_BNB8, GP_LOWBIT_BNB8, "8-bit state (bitsandbytes)", "optimizer.state: bnb8_blockwise"},
                  {GP_ALT_STATE_TORCHAO8, GP_LOWBIT_TORCHAO8, "8-bit state (torchao)", "optimizer.state: torchao_8bit"},
                  {GP_ALT_STATE_TORCHAO4, GP_LOWBIT_TORCHAO4, "4-bit state (torchao)", "optimizer.state: torchao_4bit"},
                  {GP_ALT_STATE_TORCHAO_FP8, GP_LOWBIT_TORCHAO_FP8, "fp8 state (torchao)", "optimizer.state: torchao_fp8"}};
    int plain = (states || sc->optimizer.lowbit) && !sc->optimizer.master && !sc->optimizer.kahan && !sc->optimizer.stochastic && !sc->optimizer.fused &&
                !sc->sample;
    for (size_t k = 0; k < sizeof lowbit / sizeof lowbit[0]; k++) {
        int fits = plain && (int)lowbit[k].f != sc->optimizer.lowbit;
        for (size_t t = 0; t < sc->ntensors && fits; t++)
            fits = sc->tensors[t].size % gp_lowbit_block(lowbit[k].f) == 0 && !sc->tensors[t].sample &&
                   !sc->tensors[t].population && !sc->tensors[t].state.replay;
        if (fits)
            alt[n++] = (gp_alternative){lowbit[k].kind, lowbit[k].label, lowbit[k].change,
                                        gp_lowbit_bytes_per_element(lowbit[k].f) - mv,
                                        2 * (gp_lowbit_bytes_per_element(lowbit[k].f) - mv)};
    }
    /* scaled gradients (docs/formats.md): transient per micro-batch, no state bytes; their
     * bytes per element written (the bandwidth) are in docs/advise.md */
    const gp_scaled_cfg *q = &sc->precision.grad_sc;
    int plain_fp8 = !sc->precision.grad_scaled && (g == GP_FP8_E4M3 || g == GP_FP8_E5M2);
    if (plain_fp8)
        alt[n++] = (gp_alternative){GP_ALT_FP8_BLOCKWISE, "fp8 1x128 block scales",
                                    g == GP_FP8_E4M3 ? "precision.grad: fp8_e4m3:blockwise_1x128"
                                                     : "precision.grad: fp8_e5m2:blockwise_1x128", 0, 0};
    if (plain_fp8)
        alt[n++] = (gp_alternative){GP_ALT_MXFP8, "MXFP8 (rceil)",
                                    g == GP_FP8_E4M3 ? "precision.grad: mxfp8_e4m3:rceil"
                                                     : "precision.grad: mxfp8_e5m2:rceil", 0, 0};
    if (sc->precision.grad_scaled && q->kind == GP_SC_MX && q->rule != GP_MX_RCEIL)
        alt[n++] = (gp_alternative){GP_ALT_MX_RCEIL, "rceil scale rule", "precision.grad: the same with :rceil", 0, 0};
    if (sc->precision.grad_scaled && q->mode == GP_RNE)
        alt[n++] = (gp_alternative){GP_ALT_SR_GRAD, "stochastic-rounding gradient",
                                    "precision.grad: the same with :sr", 0, 0};
    /* a scaled collective (docs/distributed.md): its bytes per element sent are in docs/advise.md */
    const gp_scaled_cfg *r = &sc->distributed.reduce_sc;
    if (sc->distributed.reduce_scaled)
        alt[n++] = (gp_alternative){GP_ALT_BF16_REDUCE, "bf16 all-reduce", "distributed.reduce_dtype: bf16", 0, 0};
    if (sc->distributed.reduce_scaled && r->kind == GP_SC_MX && r->rule != GP_MX_RCEIL)
        alt[n++] = (gp_alternative){GP_ALT_REDUCE_RCEIL, "rceil reduce scale rule",
                                    "distributed.reduce_dtype: the same with :rceil", 0, 0};
    return n;
}

int gp_advise_scenario(const gp_scenario *sc, const gp_alternative *a, gp_scenario *out, gp_error *err)
{
    char *yaml = gp_scenario_to_yaml(sc); /* a deep copy through the loader */
    if (!yaml)
        return gp_error_set(err, "out of memory");
    int rc = gp_scenario_load_string(yaml, strlen(yaml), sc->name, out, err);
    free(yaml);
    if (rc != 0)
        return -1;
    switch (a->kind) {
    case GP_ALT_FP32_ACCUMULATOR:
        out->precision.accumulator = GP_FP32;
        out->precision.acc_scaled = 0;
        if (out->precision.rounding == GP_ACC_KAHAN)
            out->precision.rounding = GP_ACC_RNE;
        break;
    case GP_ALT_KAHAN_ACCUMULATOR: out->precision.rounding = GP_ACC_KAHAN; break;
    case GP_ALT_SR_ACCUMULATOR: out->precision.rounding = GP_ACC_STOCHASTIC; break;
    case GP_ALT_MASTER_WEIGHTS: /* each a different optimizer from torch's fused one */
        out->optimizer.master = 1;
        out->optimizer.kahan = out->optimizer.stochastic = out->optimizer.fused = 0;
        break;
    case GP_ALT_KAHAN_WEIGHTS:
        out->optimizer.kahan = 1;
        out->optimizer.stochastic = out->optimizer.fused = 0;
        break;
    case GP_ALT_SR_WEIGHTS:
        out->optimizer.stochastic = 1;
        out->optimizer.kahan = out->optimizer.fused = 0;
        break;
    case GP_ALT_LOSS_SCALING: out->loss_scale.mode = GP_LS_DYNAMIC; break;
    case GP_ALT_TOKEN_MEAN: out->reduction = GP_RED_TOKEN_MEAN; break;
    case GP_ALT_STATE_FP32:
        out->optimizer.lowbit = 0;
        out->optimizer.state = GP_FP32;
        break;
    case GP_ALT_STATE_BNB8: out->optimizer.lowbit = GP_LOWBIT_BNB8; out->optimizer.state = GP_FP32; break;
    case GP_ALT_STATE_TORCHAO8: out->optimizer.lowbit = GP_LOWBIT_TORCHAO8; out->optimizer.state = GP_FP32; break;
    case GP_ALT_STATE_TORCHAO4: out->optimizer.lowbit = GP_LOWBIT_TORCHAO4; out->optimizer.state = GP_FP32; break;
    case GP_ALT_STATE_TORCHAO_FP8:
        out->optimizer.lowbit = GP_LOWBIT_TORCHAO_FP8;
        out->optimizer.state = GP_FP32;
        break;
    case GP_ALT_FP8_BLOCKWISE:
    case GP_ALT_MXFP8: {
        gp_scaled_cfg *q = &out->precision.grad_sc;
        memset(q, 0, sizeof *q);
        q->kind = a->kind == GP_ALT_MXFP8 ? GP_SC_MX : GP_SC_BLOCK_1X128;
        q->elem = out->precision.grad == GP_FP8_E5M2 ? GP_EL_E5M2 : GP_EL_E4M3;
        q->rule = GP_MX_RCEIL;
        q->sat = q->two_level = 1;
        q->mode = GP_RNE;
        out->precision.grad = GP_FP32;
        out->precision.grad_scaled = 1;
        break;
    }
    case GP_ALT_MX_RCEIL: out->precision.grad_sc.rule = GP_MX_RCEIL; break;
    case GP_ALT_SR_GRAD: out->precision.grad_sc.mode = GP_STOCHASTIC; break;
    case GP_ALT_BF16_REDUCE:
        out->distributed.reduce_scaled = 0;
        out->distributed.reduce_dtype = GP_BF16;
        break;
    case GP_ALT_REDUCE_RCEIL: out->distributed.reduce_sc.rule = GP_MX_RCEIL; break;
    default: break;
    }
    char name[2 * GP_NAME_MAX];
    snprintf(name, sizeof name, "%s + %s", sc->name, a->label);
    if (strlen(name) >= GP_NAME_MAX) {
        gp_scenario_free(out);
        return gp_error_set(err, "%s: the name is too long for the alternatives' names", sc->name);
    }
    memcpy(out->name, name, strlen(name) + 1);
    return 0;
}
