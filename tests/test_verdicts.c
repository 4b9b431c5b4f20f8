/* test_verdicts.c — format-aware verdicts (docs/scenarios.md, Verdicts): the format floor
 * by hand, the default thresholds it implies, which mechanism a verdict names (none when
 * nothing was lost beyond the floor; a weight-only failure among the optimizer's
 * mechanisms), the notes that explain a verdict, and the terminal table (no two names
 * cut to the same text, a legend line). */
#include <math.h>
#include <string.h>

#include "gp_test.h"

#include "harness/gp_backend.h"
#include "harness/gp_presets.h"
#include "harness/gp_runner.h"
#include "reports/gp_report.h"

static void run_text(const char *yaml, gp_scenario *sc, gp_result *res)
{
    gp_error e = {""};
    gp_backend b;
    if (gp_scenario_load_string(yaml, strlen(yaml), "test", sc, &e) != 0)
        fail_msg("scenario: %s", e.msg);
    if (gp_backend_open("cpu", &b, &e) != 0)
        fail_msg("backend: %s", e.msg);
    if (gp_run_scenario(sc, &b, NULL, res, &e) != 0)
        fail_msg("run: %s", e.msg);
    gp_backend_close(&b);
}

static void run_preset(const char *name, gp_result *res)
{
    gp_scenario sc;
    run_text(gp_preset_find(name)->yaml, &sc, res);
    gp_scenario_free(&sc);
}

/* u = 2^-p; floor = sqrt((ug^2 ss_x + ua^2 ss_same) / (3 ss_full)). With every sum 1 and
 * bf16 both ways: 2^-8 sqrt(2/3). */
static void test_floor_by_hand(void **state)
{
    (void)state;
    assert_true(gp_unit_roundoff(GP_BF16) == 0x1p-8);
    assert_true(gp_unit_roundoff(GP_FP16) == 0x1p-11);
    assert_true(gp_unit_roundoff(GP_FP32) == 0x1p-24);
    assert_true(fabs(gp_format_floor(GP_BF16, GP_BF16, 1, 1, 1) - 0x1p-8 * sqrt(2.0 / 3.0)) < 1e-18);
    assert_true(fabs(gp_format_floor(GP_BF16, GP_FP32, 4, 1, 1) - sqrt((0x1p-16 * 4 + 0x1p-48) / 3)) < 1e-18);
    assert_true(gp_format_floor(GP_BF16, GP_BF16, 1, 1, 0) == 0);
}

/* Constant gradients 1 (all positive), 4 micro-batches of one token, sum/sum: x_k = 1,
 * g = 4 per element: ss_x = 4n, ss_same = ss_full = 16n, so with bf16 grads and
 * accumulator floor = 2^-8 sqrt((4 + 16) / 48) = 2^-8 sqrt(5/12) = 2.522e-3 and the default
 * grad_rel_err_fullbatch threshold is 2 x that = 5.04e-3. 1, 2, 3, 4 are exact in bf16:
 * nothing is lost, so the verdict is pass and no mechanism is named. The weights are fp32:
 * weight floor 2^-24/sqrt(3), threshold 1e-3. */
static void test_floor_in_a_run(void **state)
{
    (void)state;
    static const char yaml[] = "tensors:\n"
                               "  - name: w\n"
                               "    size: 64\n"
                               "    grad: {dist: constant, scale: 1.0, sign: 0.0}\n"
                               "batch: {microbatches: 4, tokens: 1}\n"
                               "reduction: sum\n"
                               "fullbatch: sum\n"
                               "precision: {grad: bf16, accumulator: bf16}\n";
    gp_scenario sc;
    gp_result r;
    run_text(yaml, &sc, &r);
    double want = 0x1p-8 * sqrt(5.0 / 12.0);
    assert_true(fabs(r.floor_grad - want) < 1e-15);
    assert_true(fabs(r.threshold[GP_M_GRAD_REL_ERR_FULLBATCH] - 2 * want) < 1e-15);
    assert_true(r.floor_weight == 0x1p-24 / sqrt(3.0));
    assert_true(r.threshold[GP_M_WEIGHT_REL_ERR] == 1e-3);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] == 0);
    assert_int_equal(r.verdict, GP_PASS);
    assert_int_equal(r.dominant, GP_NMECH);
    gp_notes nt;
    gp_report_notes(&sc, &r, &nt);
    int found = 0;
    for (int k = 0; k < nt.n; k++)
        found |= strstr(nt.text[k], "2 x the format floor") != NULL;
    assert_true(found);
    gp_result_free(&r);
    gp_scenario_free(&sc);
}

/* The decisions of the default suite: the LoRA bf16 accumulator passes (its 4.05e-3 is
 * below 2 x its floor), the fp32 accumulator passes naming nothing (its loss, bf16 storage
 * of the gradients, is within the floor), fp16 LoRA gradients fail on underflow_frac and
 * name underflow though plain rounding of the subnormals is the larger loss, the bf16
 * accumulator over 1024 micro-batches
 * fails naming absorption, and the bf16 weights without a master copy fail naming stale
 * updates. */
static void test_suite_decisions(void **state)
{
    (void)state;
    gp_result r;
    run_preset("lora-bf16-accum", &r);
    assert_int_equal(r.verdict, GP_PASS);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] > 2 * 0x1p-8 * sqrt(1.0 / 3.0) / 2);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] <= r.threshold[GP_M_GRAD_REL_ERR_FULLBATCH]);
    assert_true(r.threshold[GP_M_GRAD_REL_ERR_FULLBATCH] == 2 * r.floor_grad);
    assert_int_equal(r.dominant, GP_MECH_ROUNDING);
    gp_result_free(&r);
    run_preset("lora-fp32-accum", &r);
    assert_int_equal(r.verdict, GP_PASS);
    assert_int_equal(r.dominant, GP_NMECH);
    gp_result_free(&r);
    run_preset("lora-fp16-accum", &r); /* underflow_frac fails: it names underflow */
    assert_int_equal(r.verdict, GP_FAIL);
    assert_true(r.failed[GP_M_UNDERFLOW_FRAC]);
    assert_true(r.loss[GP_MECH_ROUNDING] > r.loss[GP_MECH_UNDERFLOW]);
    assert_int_equal(r.dominant, GP_MECH_UNDERFLOW);
    gp_result_free(&r);
    run_preset("long-accum-bf16-k1024", &r);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_ABSORPTION);
    gp_result_free(&r);
    run_preset("bf16-weights-cosine-no-master", &r);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_STALE);
    gp_result_free(&r);
}

/* bf16-weights-cosine-kahan with bf16 gradients of 1.01e-3 (stored as 1.00708e-3: a
 * rounding error of 2.9e-3, above the gradient floor 2^-8/sqrt(3) = 2.26e-3) and a
 * weight_rel_err threshold of 1e-3, which its 1.75e-3 exceeds: only a weight metric
 * fails, so the verdict names an optimizer mechanism (stale update: the step whose
 * update fell below the bf16 compensation's half ulp), not the gradient's rounding. */
static void test_kahan_failure_attributed(void **state)
{
    (void)state;
    static const char yaml[] = "seed: 21\n"
                               "tensors:\n"
                               "  - name: norm.weight\n"
                               "    size: 4096\n"
                               "    grad: {dist: constant, scale: 1.01e-3, sign: 1.0}\n"
                               "    weight: {dist: constant, scale: 1.0, sign: 0.0}\n"
                               "batch: {microbatches: 1, tokens: 1}\n"
                               "reduction: sum\n"
                               "fullbatch: sum\n"
                               "precision: {grad: bf16, accumulator: fp32}\n"
                               "optimizer: {lr: 8.0e-3, weight_decay: 0.0, param: bf16, kahan: true}\n"
                               "schedule: {name: cosine, total: 100}\n"
                               "steps: 100\n"
                               "thresholds: {weight_rel_err: 1.0e-3}\n";
    gp_scenario sc;
    gp_result r;
    run_text(yaml, &sc, &r);
    assert_true(r.loss[GP_MECH_ROUNDING] > r.floor_grad);
    assert_true(r.failed[GP_M_WEIGHT_REL_ERR]);
    assert_false(r.failed[GP_M_GRAD_REL_ERR_FULLBATCH]);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_STALE);
    gp_result_free(&r);
    gp_scenario_free(&sc);
}

/* fp16-scale-update-forgotten: 4096 gradients of 1.5 x 2^16 overflow fp16 in each of the
 * 10 steps, all skipped: the applied steps saw no overflow, the skipped ones 40960, and a
 * note says where they were. */
static void test_overflow_counts_agree(void **state)
{
    (void)state;
    gp_scenario sc;
    gp_result r;
    run_text(gp_preset_find("fp16-scale-update-forgotten")->yaml, &sc, &r);
    assert_int_equal(r.skipped_steps, 10);
    assert_true(r.metric[GP_M_OVERFLOW_COUNT] == 0);
    assert_int_equal(r.st.overflow_skipped, 40960);
    gp_notes nt;
    gp_report_notes(&sc, &r, &nt);
    int where = 0, never = 0;
    for (int k = 0; k < nt.n; k++) {
        where |= strstr(nt.text[k], "40960 overflows happened in the skipped steps") != NULL;
        never |= strcmp(nt.text[k], "the loss scale is never updated") == 0;
    }
    assert_true(where && never);
    gp_result_free(&r);
    gp_scenario_free(&sc);
}

/* Two scenarios whose names share their first 40 characters keep distinct rows, and the
 * table ends with its legend. */
static void test_table_names_and_legend(void **state)
{
    (void)state;
    static const char a[] = "name: a-very-long-scenario-name-that-goes-on-and-on-variant-one\n";
    static const char b[] = "name: a-very-long-scenario-name-that-goes-on-and-on-variant-two\n";
    gp_scenario sc[2];
    gp_result r[2];
    run_text(a, &sc[0], &r[0]);
    run_text(b, &sc[1], &r[1]);
    const gp_scenario *ptr[2] = {&sc[0], &sc[1]};
    gp_run_report rep = {ptr, r, 2, "cpu", NULL, NULL};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    gp_report_table(f, &rep);
    fclose(f);
    assert_non_null(strstr(text, "variant-one "));
    assert_non_null(strstr(text, "variant-two "));
    assert_non_null(strstr(text, "\ncolumns: dominant = "));
    free(text);
    for (int i = 0; i < 2; i++) {
        gp_result_free(&r[i]);
        gp_scenario_free(&sc[i]);
    }
}

/* gradprec's own AdamW models judged as a subject (the cpu backend with builtin = 0: the
 * update-formula check and the model check run, as for a plugin or a Python backend): in
 * every configuration the scenarios allow — params and state fp32 / bf16 / fp16; plain,
 * fp32 master, Kahan, stochastic rounding, torch's fused kernel; every evaluation
 * orders — and four regimes (ordinary, lr*wd = 0.1, tiny gradients with betas 0, large
 * steady gradients at lr 8e-3), no step falls outside the update-formula bound
 * (docs/model.md, "Update formula"): its derivation covers every rounding they make. */
static void test_own_models_never_an_update_formula(void **state)
{
    (void)state;
    static const char *const regimes[] = {
        "grad: {dist: normal, scale: 1.0e-3}\n    weight: {dist: normal, scale: 0.02}\n",
        "grad: {dist: normal, scale: 1.0e-4}\n    weight: {dist: normal, scale: 1.0}\n",
        "grad: {dist: normal, scale: 1.0e-6}\n    weight: {dist: normal, scale: 0.02}\n",
        "grad: {dist: constant, scale: 1.0e-3}\n    weight: {dist: constant, scale: 1.0}\n"};
    static const char *const opts[] = {"lr: 1.0e-3, weight_decay: 0.01", "lr: 1.0e-2, weight_decay: 10.0",
                                       "lr: 1.0e-3, weight_decay: 0.1, betas: [0.0, 0.0]",
                                       "lr: 8.0e-3, weight_decay: 0.0"};
    static const char *const fmts[] = {"fp32", "bf16", "fp16"};
    static const char *const variants[] = {"", ", master: fp32", ", kahan: true", ", stochastic: true",
                                           ", fused: torch_cpu"};
    static const char *const evals[] = {"torch_cuda", "torch_cpu", "unfused", "torch_cpu_zen4", "torch_cuda_foreach",
                                        "torch_cpu_intel_avx512", "torch_cpu_host"};
    int runs = 0;
    for (int rg = 0; rg < 4; rg++)
        for (int p = 0; p < 3; p++)
            for (int st = 0; st < 3; st++)
                for (int v = 0; v < 5; v++)
                    for (int ev = 0; ev < (int)(sizeof evals / sizeof evals[0]); ev++) {
                        char yaml[1024];
                        snprintf(yaml, sizeof yaml,
                                 "tensors:\n  - name: w\n    size: 512\n    %s"
                                 "batch: {microbatches: 1, tokens: 1}\nreduction: sum\nfullbatch: sum\n"
                                 "optimizer: {%s, param: %s, state: %s%s, evaluation: %s}\nsteps: 6\n",
                                 regimes[rg], opts[rg], fmts[p], fmts[st], variants[v], evals[ev]);
                        gp_error e = {""};
                        gp_scenario sc;
                        if (gp_scenario_load_string(yaml, strlen(yaml), "test", &sc, &e) != 0)
                            continue; /* a combination the scenarios do not allow */
                        gp_backend b;
                        if (gp_backend_open("cpu", &b, &e) != 0)
                            fail_msg("backend: %s", e.msg);
                        b.builtin = 0; /* judged as a subject */
                        gp_result r;
                        if (gp_run_scenario(&sc, &b, NULL, &r, &e) != 0)
                            fail_msg("run: %s\n%s", e.msg, yaml);
                        if (r.st.opt.formula != 0)
                            fail_msg("%llu update-formula steps:\n%s", (unsigned long long)r.st.opt.formula, yaml);
                        assert_true(r.st.opt.models_checked != 0); /* the subject path ran */
                        assert_true(r.dominant != GP_MECH_FORMULA);
                        runs++;
                        gp_result_free(&r);
                        gp_backend_close(&b);
                        gp_scenario_free(&sc);
                    }
    assert_true(runs >= 300);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_floor_by_hand),
        cmocka_unit_test(test_floor_in_a_run),
        cmocka_unit_test(test_suite_decisions),
        cmocka_unit_test(test_kahan_failure_attributed),
        cmocka_unit_test(test_overflow_counts_agree),
        cmocka_unit_test(test_table_names_and_legend),
        cmocka_unit_test(test_own_models_never_an_update_formula),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
