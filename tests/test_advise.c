/* test_advise.c — `gradprec advise` (harness/scenario/gp_advise.h, reports/gp_advice.h): which
 * alternatives apply, their bytes per parameter, the memory costs of the advice against
 * hand computations, and the alternatives' errors against the scenarios they claim to be. */
#include <math.h>
#include <string.h>

#include "gp_test.h"

#include "harness/scenario/gp_advise.h"
#include "harness/sources/gp_backend.h"
#include "harness/scenario/gp_presets.h"
#include "harness/run/gp_runner.h"
#include "reports/gp_advice.h"

static void load(const char *yaml, gp_scenario *sc)
{
    gp_error e = {""};
    if (gp_scenario_load_string(yaml, strlen(yaml), "advise", sc, &e) != 0)
        fail_msg("load: %s", e.msg);
}

static void run(const gp_scenario *sc, gp_result *r)
{
    gp_error e = {""};
    gp_backend b;
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    if (gp_run_scenario(sc, &b, NULL, r, &e) != 0)
        fail_msg("run: %s", e.msg);
    gp_backend_close(&b);
}

/* Everything narrow: all eight apply. Bytes per trainable parameter: an fp32 accumulator
 * replaces a 2-byte bf16 one (+2), a Kahan accumulator adds a bf16 compensation (+2), an
 * fp32 master copy adds 4, Kahan weights a bf16 compensation (+2); stochastic rounding,
 * loss scaling and the loss normalisation cost nothing per parameter. */
static void test_which_apply(void **state)
{
    (void)state;
    gp_scenario sc;
    gp_alternative a[GP_NALT];
    load("precision: {grad: fp16, accumulator: bf16}\nreduction: mean\noptimizer: {param: bf16}\n", &sc);
    assert_int_equal(gp_advise_alternatives(&sc, a), 8);
    static const double bytes[8] = {2, 2, 0, 4, 2, 0, 0, 0};
    for (int k = 0; k < 8; k++) {
        assert_int_equal(a[k].kind, k);
        assert_true(a[k].bytes_per_param == bytes[k]);
    }
    /* state bytes: bf16 accumulator 2 + fp32 m and v 8 */
    assert_true(gp_advise_state_bytes(&sc) == 10);
    gp_scenario_free(&sc);
    load("optimizer: {param: bf16, master: fp32, state: bf16}\n", &sc);
    assert_int_equal(gp_advise_alternatives(&sc, a), 0); /* fp32 everything else, token_mean */
    assert_true(gp_advise_state_bytes(&sc) == 4 + 2 * 2 + 4);
    gp_scenario_free(&sc);
}

/* The SDXL example's numbers by hand: 3 tensors of 20480 = 61440 parameters; the fp32
 * accumulator adds 2 bytes each: 122880 bytes; for a model of P = 2.6e9 with T = 4.8e7
 * trainable: 9.6e7 and 5.2e9 bytes, 0.12% and 6.5% of 80 GB. Without --memory-gb the
 * percentages are of the training state P x 4 (fp32 weights) + T x 10 (bf16 accumulator,
 * fp32 m and v) = 1.04e10 + 4.8e8 = 1.088e10 bytes: 9.6e7 / 1.088e10 = 0.882353%. */
static void test_memory_by_hand(void **state)
{
    (void)state;
    gp_scenario sc;
    gp_error e = {""};
    gp_alternative a[GP_NALT];
    assert_int_equal(gp_scenario_load_file(EXAMPLES "/sdxl-lora-bf16-accum.yaml", &sc, &e), 0);
    int n = gp_advise_alternatives(&sc, a);
    assert_int_equal(n, 3); /* fp32, Kahan, stochastic accumulator; fp32 weights, fp32 grads' loss scale n/a */
    gp_result r[4];
    memset(r, 0, sizeof r); /* the costs do not depend on the results */
    gp_advice_model m = {2.6e9, 4.8e7, 80e9};
    json_t *adv = gp_advice_json(&sc, a, n, r, &m);
    json_t *fp32 = json_array_get(json_object_get(adv, "alternatives"), 1);
    assert_string_equal(json_string_value(json_object_get(fp32, "label")), "fp32 accumulator");
    assert_true(json_real_value(json_object_get(fp32, "extra_bytes_scenario")) == 122880);
    assert_true(json_real_value(json_object_get(fp32, "extra_bytes_trainable")) == 9.6e7);
    assert_true(json_real_value(json_object_get(fp32, "extra_bytes_all_params")) == 5.2e9);
    assert_true(fabs(json_real_value(json_object_get(fp32, "percent_trainable")) - 0.12) < 1e-12);
    assert_true(fabs(json_real_value(json_object_get(fp32, "percent_all_params")) - 6.5) < 1e-12);
    json_decref(adv);
    m.memory = 0;
    adv = gp_advice_json(&sc, a, n, r, &m);
    fp32 = json_array_get(json_object_get(adv, "alternatives"), 1);
    assert_true(json_real_value(json_object_get(adv, "baseline_bytes")) == 1.088e10);
    assert_true(fabs(json_real_value(json_object_get(fp32, "percent_trainable")) - 100 * 9.6e7 / 1.088e10) < 1e-12);
    json_decref(adv);
    gp_scenario_free(&sc);
}

/* The alternatives are what they say: lora-bf16-accum + fp32 accumulator gives exactly
 * lora-fp32-accum's error (same seed, same gradients), and uneven-tokens-mean +
 * token-normalised loss has no normalization error at all (token_mean is the full-batch
 * formula), where the configuration lost 0.476. */
static void test_alternatives_are_what_they_say(void **state)
{
    (void)state;
    gp_scenario sc, alt_sc, ref;
    gp_result r_alt, r_ref, r_base;
    gp_alternative a[GP_NALT];
    gp_error e = {""};
    load(gp_preset_find("lora-bf16-accum")->yaml, &sc);
    assert_true(gp_advise_alternatives(&sc, a) >= 1 && a[0].kind == GP_ALT_FP32_ACCUMULATOR);
    assert_int_equal(gp_advise_scenario(&sc, &a[0], &alt_sc, &e), 0);
    assert_string_equal(alt_sc.name, "lora-bf16-accum + fp32 accumulator");
    load(gp_preset_find("lora-fp32-accum")->yaml, &ref);
    run(&alt_sc, &r_alt);
    run(&ref, &r_ref);
    uint64_t got, want;
    memcpy(&got, &r_alt.metric[GP_M_GRAD_REL_ERR_FULLBATCH], sizeof got);
    memcpy(&want, &r_ref.metric[GP_M_GRAD_REL_ERR_FULLBATCH], sizeof want);
    gp_assert_bits(got, want, "fp32 accumulator alternative");
    gp_result_free(&r_alt);
    gp_result_free(&r_ref);
    gp_scenario_free(&alt_sc);
    gp_scenario_free(&ref);
    gp_scenario_free(&sc);

    load(gp_preset_find("uneven-tokens-mean")->yaml, &sc);
    int n = gp_advise_alternatives(&sc, a);
    assert_int_equal(n, 1);
    assert_int_equal(a[0].kind, GP_ALT_TOKEN_MEAN);
    assert_int_equal(gp_advise_scenario(&sc, &a[0], &alt_sc, &e), 0);
    run(&sc, &r_base);
    run(&alt_sc, &r_alt);
    assert_true(r_base.loss[GP_MECH_NORMALIZATION] > 0.4);
    assert_true(r_alt.loss[GP_MECH_NORMALIZATION] == 0);
    gp_result_free(&r_alt);
    gp_result_free(&r_base);
    gp_scenario_free(&alt_sc);
    gp_scenario_free(&sc);
}

/* A scaled collective (distributed.reduce_dtype with per-rank scales): ddp-mxfp8-allreduce-floor
 * gets the token-normalised loss (reduction mean), a bf16 all-reduce and the rceil rule for its
 * MX reduce, in that order, none with memory (the collective's bytes are bandwidth). Each
 * alternative is the scenario it says: bit for bit the same collective_rel_err as the preset
 * written with `reduce_dtype: bf16` / `"mxfp8_e4m3:rceil"`; rceil never clamps (X = 2^ceil(log2
 * (amax / 448)) keeps amax / X <= 448): no saturation, where floor saturated. */
static void test_reduce_alternatives(void **state)
{
    (void)state;
    gp_scenario sc, alt_sc, ref;
    gp_result r_alt, r_ref, r_base;
    gp_alternative a[GP_NALT];
    gp_error e = {""};
    const char *yaml = gp_preset_find("ddp-mxfp8-allreduce-floor")->yaml;
    load(yaml, &sc);
    assert_int_equal(gp_advise_alternatives(&sc, a), 3);
    assert_int_equal(a[0].kind, GP_ALT_TOKEN_MEAN);
    assert_int_equal(a[1].kind, GP_ALT_BF16_REDUCE);
    assert_int_equal(a[2].kind, GP_ALT_REDUCE_RCEIL);
    assert_true(a[1].bytes_per_param == 0 && a[2].bytes_per_param == 0);
    run(&sc, &r_base);
    assert_true(r_base.coll_loss[GP_MECH_SATURATION] > 0);
    static const char *const to[2] = {"reduce_dtype: bf16", "reduce_dtype: \"mxfp8_e4m3:rceil\""};
    for (int k = 0; k < 2; k++) {
        char text[2048];
        const char *at = strstr(yaml, "reduce_dtype: mxfp8_e4m3");
        assert_non_null(at);
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - yaml), yaml, to[k], at + strlen("reduce_dtype: mxfp8_e4m3"));
        load(text, &ref);
        assert_int_equal(gp_advise_scenario(&sc, &a[1 + k], &alt_sc, &e), 0);
        run(&alt_sc, &r_alt);
        run(&ref, &r_ref);
        uint64_t got, want;
        memcpy(&got, &r_alt.metric[GP_M_COLLECTIVE_REL_ERR], sizeof got);
        memcpy(&want, &r_ref.metric[GP_M_COLLECTIVE_REL_ERR], sizeof want);
        gp_assert_bits(got, want, to[k]);
        assert_true(r_alt.coll_loss[GP_MECH_SATURATION] == 0);
        gp_result_free(&r_alt);
        gp_result_free(&r_ref);
        gp_scenario_free(&alt_sc);
        gp_scenario_free(&ref);
    }
    gp_result_free(&r_base);
    gp_scenario_free(&sc);
}

/* The low-bit optimizer states (optimizer.state; kernels/cpu/gp_lowbit.h), by hand: m and v
 * as the libraries store them are two codes and two fp32 scales per block: 8-bit codes in
 * blocks of 256: 2 + 8/256 = 2.03125 bytes per parameter; 4-bit in blocks of 128:
 * 1 + 8/128 = 1.0625. From fp32 m, v (8 bytes): -5.96875 and -6.9375. Offered with
 * --states (or from a low-bit state: then fp32 state too, +5.96875); not for a tensor that is
 * not a whole number of blocks, nor with a master copy. */
static void test_state_alternatives(void **state)
{
    (void)state;
    gp_scenario sc;
    gp_alternative a[GP_NALT];
    load("tensors:\n  - {name: w, size: 4096}\n", &sc);
    assert_int_equal(gp_advise_alternatives(&sc, a), 0); /* not without --states */
    assert_int_equal(gp_advise_alternatives_states(&sc, 1, a), 4);
    static const int kinds[4] = {GP_ALT_STATE_BNB8, GP_ALT_STATE_TORCHAO8, GP_ALT_STATE_TORCHAO4,
                                 GP_ALT_STATE_TORCHAO_FP8};
    static const double bytes[4] = {-5.96875, -5.96875, -6.9375, -5.96875};
    /* m and v traffic per parameter per step, each read and written once (by hand): fp32
     * 4 arrays x 4 B = 16; 8-bit / fp8: (1 B code + 4 B scale / 256) x 2 states x 2 = 4.0625;
     * 4-bit: (0.5 B + 4 B / 128) x 2 x 2 = 2.125 */
    static const double traffic[4] = {4.0625 - 16, 4.0625 - 16, 2.125 - 16, 4.0625 - 16};
    assert_true(gp_advise_mv_traffic(&sc) == 16);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(a[k].kind, kinds[k]);
        assert_true(a[k].bytes_per_param == bytes[k]);
        assert_true(a[k].mv_traffic == traffic[k]);
    }
    gp_scenario_free(&sc);
    load("optimizer: {state: torchao_8bit}\ntensors:\n  - {name: w, size: 4096}\n", &sc);
    assert_true(gp_advise_state_bytes(&sc) == 4 + 2.03125); /* fp32 accumulator + the 8-bit state */
    assert_true(gp_advise_mv_traffic(&sc) == 4.0625);
    int n = gp_advise_alternatives(&sc, a);
    assert_int_equal(n, 4); /* fp32, bnb8, 4-bit, fp8 */
    assert_int_equal(a[0].kind, GP_ALT_STATE_FP32);
    assert_true(a[0].bytes_per_param == 5.96875);
    assert_true(a[0].mv_traffic == 16 - 4.0625);
    assert_true(a[2].kind == GP_ALT_STATE_TORCHAO4 && a[2].bytes_per_param == 1.0625 - 2.03125);
    gp_scenario out;
    gp_error e = {""};
    assert_int_equal(gp_advise_scenario(&sc, &a[2], &out, &e), 0);
    gp_adamw_config c = gp_optim_config(&out);
    assert_int_equal(c.lowbit, 3);
    assert_int_equal(c.state, GP_FP32);
    gp_scenario_free(&out);
    gp_scenario_free(&sc);
    load("tensors:\n  - {name: w, size: 384}\n", &sc); /* 3 x 128: 4-bit only */
    assert_int_equal(gp_advise_alternatives_states(&sc, 1, a), 1);
    assert_int_equal(a[0].kind, GP_ALT_STATE_TORCHAO4);
    gp_scenario_free(&sc);
    load("optimizer: {param: bf16, master: fp32}\ntensors:\n  - {name: w, size: 4096}\n", &sc);
    assert_int_equal(gp_advise_alternatives_states(&sc, 1, a), 0);
    gp_scenario_free(&sc);
}

/* A scaled accumulator (fp8_e4m3:current: 1 byte per element, its one scale per tensor
 * negligible): the fp32 accumulator is offered at +3 bytes per parameter (4 - 1; the
 * Kahan and stochastic-rounding accumulators are not: they are not modelled with it), and
 * the alternative's scenario has a plain fp32 accumulator: its error equals the same
 * scenario written with `accumulator: fp32`, bit for bit. */
static void test_scaled_accumulator_alternative(void **state)
{
    (void)state;
    static const char base[] = "tensors: [{name: w, size: 4096, grad: {dist: normal, scale: 1.0e-3}}]\n"
                               "batch: {accumulation_steps: 4, tokens: 64}\nreduction: token_mean\n"
                               "precision: {grad: bf16, accumulator: \"%s\"}\n";
    char yaml[512];
    gp_scenario sc, alt_sc, ref;
    gp_alternative a[GP_NALT];
    gp_error e = {""};
    snprintf(yaml, sizeof yaml, base, "fp8_e4m3:current");
    load(yaml, &sc);
    int n = gp_advise_alternatives(&sc, a);
    assert_int_equal(n, 1);
    assert_int_equal(a[0].kind, GP_ALT_FP32_ACCUMULATOR);
    assert_true(a[0].bytes_per_param == 3.0);
    assert_int_equal(gp_advise_scenario(&sc, &a[0], &alt_sc, &e), 0);
    assert_int_equal(alt_sc.precision.acc_scaled, 0);
    snprintf(yaml, sizeof yaml, base, "fp32");
    load(yaml, &ref);
    gp_result r_alt, r_ref;
    run(&alt_sc, &r_alt);
    run(&ref, &r_ref);
    assert_memory_equal(&r_alt.metric[GP_M_GRAD_REL_ERR_FULLBATCH], &r_ref.metric[GP_M_GRAD_REL_ERR_FULLBATCH],
                        sizeof(double));
    gp_result_free(&r_alt);
    gp_result_free(&r_ref);
    gp_scenario_free(&alt_sc);
    gp_scenario_free(&ref);
    gp_scenario_free(&sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_which_apply),
        cmocka_unit_test(test_memory_by_hand),
        cmocka_unit_test(test_alternatives_are_what_they_say),
        cmocka_unit_test(test_state_alternatives),
        cmocka_unit_test(test_reduce_alternatives),
        cmocka_unit_test(test_scaled_accumulator_alternative),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
