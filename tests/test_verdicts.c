/* test_verdicts.c — format-aware verdicts (docs/scenarios.md, Verdicts): the format floor
 * by hand, the default thresholds it implies, which mechanism a verdict names (none when
 * nothing was lost beyond the floor; a weight-only failure among the optimizer's
 * mechanisms), the notes that explain a verdict, and the terminal table (no two names
 * cut to the same text, a legend line). */
#include <math.h>
#include <string.h>

#include <jansson.h>
#include <stdlib.h>

#include "gp_test.h"

#include "harness/sources/gp_backend.h"
#include "harness/scenario/gp_presets.h"
#include "harness/run/gp_runner.h"
#include "reports/gp_gate.h"
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
    gp_notes_free(&nt);
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
    gp_notes_free(&nt);
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

/* ---- replayed gradients that are not finite (issue 24 items 6 and 7) ---- */

/* A folder dump DIR/w/step<S>/mb<k>.npy: little-endian `descr` ('<f4' or '<f2'), n elements
 * of `bytes` each from data. */
static void write_entry(const char *dir, int step, int k, const char *descr, const void *data, size_t n, size_t bytes)
{
    char path[512], hdr[128];
    snprintf(path, sizeof path, "mkdir -p '%s/w/step%d'", dir, step);
    assert_int_equal(system(path), 0);
    snprintf(path, sizeof path, "%s/w/step%d/mb%d.npy", dir, step, k);
    int h = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%zu,), }", descr, n);
    while ((10 + h + 1) % 64)
        hdr[h++] = ' ';
    hdr[h++] = '\n';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint16_t hl = (uint16_t)h;
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fwrite(&hl, 2, 1, f);
    fwrite(hdr, 1, (size_t)h, f);
    fwrite(data, bytes, n, f);
    fclose(f);
}

static char scratch[64];

static void make_scratch(void)
{
    if (!scratch[0]) {
        snprintf(scratch, sizeof scratch, "/tmp/gp_verdicts_XXXXXX");
        assert_non_null(mkdtemp(scratch));
    }
}

/* The report.json text of one result (caller frees). */
static char *report_of(const gp_scenario *sc, const gp_result *r)
{
    const gp_scenario *ptr[1] = {sc};
    gp_run_report rep = {ptr, r, 1, "cpu", NULL, NULL};
    char *text = gp_report_json(&rep);
    assert_non_null(text);
    return text;
}

/* Item 6: one NaN among the entries of an applied step, 8 tokens (1 + 7), reduction mean.
 * Without the NaN, normalization_rel_err would be finite; with it the exact gradient of
 * element 0 is NaN, so every metric measured against the exact gradient is undefined:
 * NaN in the result and absent from report.json (which stays valid JSON), never a finite
 * value (before: normalization_rel_err = N - 1 = 7). The final gradient has one non-finite
 * element (nonfinite_count 1, threshold 0: fail) and the verdict names non-finite, not
 * normalization. Counts that do not use the exact gradient stay defined (absorbed_frac 0:
 * 1, 2, 0.5, 0.25 add exactly in fp32). */
static void test_nonfinite_replay_undefined(void **state)
{
    (void)state;
    make_scratch();
    char dir[128], yaml[512];
    snprintf(dir, sizeof dir, "%s/nan", scratch);
    const float x0[4] = {NAN, 2.0f, 0.5f, -1.0f}, x1[4] = {0.25f, 1.0f, 1.0f, 1.0f};
    write_entry(dir, 0, 0, "<f4", x0, 4, 4);
    write_entry(dir, 0, 1, "<f4", x1, 4, 4);
    snprintf(yaml, sizeof yaml,
             "name: replay-nan\ntensors:\n  - name: w\n    grad: {replay: %s, key: w}\n"
             "batch: {microbatches: 2, tokens: [1, 7]}\nreduction: mean\n"
             "precision: {grad: fp32, accumulator: fp32}\noptimizer: {lr: 0.0, weight_decay: 0.0}\n", dir);
    gp_scenario sc;
    gp_result r;
    run_text(yaml, &sc, &r);
    static const gp_metric undefined[] = {GP_M_GRAD_REL_ERR_FULLBATCH, GP_M_GRAD_REL_ERR_ROUNDING,
                                          GP_M_NORMALIZATION_REL_ERR, GP_M_MAX_ULP_ERR, GP_M_GRAD_NORM_RATIO,
                                          GP_M_WEIGHT_REL_ERR, GP_M_M_REL_ERR, GP_M_V_REL_ERR,
                                          GP_M_SCALING_REL_ERR};
    for (size_t i = 0; i < sizeof undefined / sizeof *undefined; i++)
        if (!isnan(r.metric[undefined[i]]) || !isnan(r.tensors[0].metric[undefined[i]]))
            fail_msg("%s = %g, not NaN", gp_metric_name(undefined[i]), r.metric[undefined[i]]);
    for (int m = 0; m < GP_NMECH; m++)
        if (m != GP_MECH_NONFINITE && !isnan(r.loss[m]))
            fail_msg("loss %s = %g, not NaN", gp_mechanism_name((gp_mechanism)m), r.loss[m]);
    assert_true(r.loss[GP_MECH_NONFINITE] == INFINITY);
    assert_true(r.metric[GP_M_NONFINITE_COUNT] == 1);
    assert_true(r.metric[GP_M_ABSORBED_FRAC] == 0);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_NONFINITE);
    char *text = report_of(&sc, &r);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    assert_non_null(root); /* valid JSON */
    json_t *s0 = json_array_get(json_object_get(root, "scenarios"), 0), *mt = json_object_get(s0, "metrics");
    assert_null(json_object_get(mt, "normalization_rel_err"));
    assert_null(json_object_get(mt, "grad_rel_err_fullbatch"));
    assert_string_equal(json_string_value(json_object_get(s0, "dominant_mechanism")), "non-finite");
    assert_true(json_number_value(json_object_get(mt, "nonfinite_count")) == 1);
    int said = 0;
    size_t k;
    json_t *x;
    json_array_foreach(json_object_get(s0, "notes"), k, x)
        said |= strstr(json_string_value(x), "1 replayed gradient entries of the applied steps are inf or NaN") != NULL;
    assert_true(said);
    /* The gate against the same replay without the NaN (entry 0 of micro-batch 0 = 1): it
     * fails, and no finding blames normalization: the undefined metrics are missing (it
     * fails closed), nonfinite_count is the change (CHANGED: a count is determined exactly,
     * docs/gate.md). */
    const float f0[4] = {1.0f, 2.0f, 0.5f, -1.0f};
    char fin[128], fyaml[512];
    snprintf(fin, sizeof fin, "%s/finite", scratch);
    write_entry(fin, 0, 0, "<f4", f0, 4, 4);
    write_entry(fin, 0, 1, "<f4", x1, 4, 4);
    snprintf(fyaml, sizeof fyaml,
             "name: replay-nan\ntensors:\n  - name: w\n    grad: {replay: %s, key: w}\n"
             "batch: {microbatches: 2, tokens: [1, 7]}\nreduction: mean\n"
             "precision: {grad: fp32, accumulator: fp32}\noptimizer: {lr: 0.0, weight_decay: 0.0}\n", fin);
    gp_scenario fsc;
    gp_result fr;
    run_text(fyaml, &fsc, &fr);
    char *ftext = report_of(&fsc, &fr);
    json_t *base = json_loads(ftext, 0, NULL);
    assert_non_null(base);
    gp_gate_result g;
    gp_error ge = {""};
    assert_int_equal(gp_gate_compare(base, "finite", root, "nan", NULL, &g, &ge), 0);
    assert_false(gp_gate_passed(&g));
    int nonfinite_regressed = 0;
    for (size_t k2 = 0; k2 < g.nitems; k2++) {
        const gp_gate_item *it = &g.items[k2];
        if (it->metric && strcmp(it->metric, "normalization_rel_err") == 0)
            assert_int_equal(it->status, GP_GATE_MISSING);
        nonfinite_regressed |= it->status == GP_GATE_CHANGED && it->metric &&
                               strcmp(it->metric, "nonfinite_count") == 0 && it->old_value == 0 && it->new_value == 1;
    }
    assert_true(nonfinite_regressed);
    gp_gate_free(&g);
    json_decref(base);
    free(ftext);
    gp_result_free(&fr);
    gp_scenario_free(&fsc);
    json_decref(root);
    free(text);
    gp_result_free(&r);
    gp_scenario_free(&sc);
}

/* Item 7: a replay under a dynamic GradScaler whose every step holds an inf (the scaled
 * backward overflowed, as GradScaler's capture records it): both steps are skipped
 * (skipped_steps 2), every step's whole gradient is lost, so scaling_rel_err = 1 by its
 * definition (lost / the whole gradient), present in report.json, and the verdict names
 * scaling. */
static void test_every_step_skipped_names_scaling(void **state)
{
    (void)state;
    make_scratch();
    char dir[128], yaml[640];
    snprintf(dir, sizeof dir, "%s/skip", scratch);
    const uint16_t e[4] = {0x7400 /* 16384 */, 0x7c00 /* inf */, 0x6000 /* 512 */, 0xf000 /* -8192 */};
    write_entry(dir, 0, 0, "<f2", e, 4, 2);
    write_entry(dir, 1, 0, "<f2", e, 4, 2);
    snprintf(yaml, sizeof yaml,
             "name: replay-all-skipped\ntensors:\n  - name: w\n    grad: {replay: %s, key: w}\n"
             "batch: {microbatches: 1, tokens: 1}\nreduction: sum\nsteps: 2\n"
             "precision: {grad: fp16, accumulator: fp32}\n"
             "loss_scale: {mode: dynamic, init: 65536, replay_scales: [65536, 32768]}\n", dir);
    gp_scenario sc;
    gp_result r;
    run_text(yaml, &sc, &r);
    assert_int_equal(r.skipped_steps, 2);
    assert_true(r.metric[GP_M_SCALING_REL_ERR] == 1.0);
    assert_true(r.tensors[0].metric[GP_M_SCALING_REL_ERR] == 1.0);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_SCALING);
    char *text = report_of(&sc, &r);
    json_t *root = json_loads(text, 0, NULL);
    assert_non_null(root);
    json_t *s0 = json_array_get(json_object_get(root, "scenarios"), 0);
    assert_true(json_number_value(json_object_get(json_object_get(s0, "metrics"), "scaling_rel_err")) == 1.0);
    assert_string_equal(json_string_value(json_object_get(s0, "dominant_mechanism")), "scaling");
    json_decref(root);
    free(text);
    gp_result_free(&r);
    gp_scenario_free(&sc);
}

/* max_ulp_err where the exact value is 0: the unit is the fp32 ulp at 0, fp32's smallest
 * subnormal 2^-149 (docs/scenarios.md, Metrics). Entries 1, 2^-30, -1, -2^-30 (sum): the
 * exact sum is 0; the fp32 accumulator absorbs 2^-30 into 1 (1 + 2^-30 rounds to 1), then
 * 1 - 1 = 0 and 0 - 2^-30 = -2^-30: |g_acc - g_same| = 2^-30 = 2^119 ulps at 0. */
static void test_max_ulp_at_exact_zero(void **state)
{
    (void)state;
    make_scratch();
    char dir[128], yaml[512];
    snprintf(dir, sizeof dir, "%s/ulp0", scratch);
    const float x[4] = {1.0f, 0x1p-30f, -1.0f, -0x1p-30f};
    for (int k = 0; k < 4; k++)
        write_entry(dir, 0, k, "<f4", &x[k], 1, 4);
    snprintf(yaml, sizeof yaml,
             "name: ulp-at-zero\ntensors:\n  - name: w\n    grad: {replay: %s, key: w}\n"
             "batch: {microbatches: 4, tokens: 1}\nreduction: sum\nfullbatch: sum\n"
             "precision: {grad: fp32, accumulator: fp32}\noptimizer: {lr: 0.0, weight_decay: 0.0}\n", dir);
    gp_scenario sc;
    gp_result r;
    run_text(yaml, &sc, &r);
    assert_true(r.metric[GP_M_MAX_ULP_ERR] == 0x1p119);
    gp_result_free(&r);
    gp_scenario_free(&sc);
}

/* The terminal table of one result (caller frees). */
static char *table_of(const gp_scenario *sc, const gp_result *r)
{
    const gp_scenario *ptr[1] = {sc};
    gp_run_report rep = {ptr, r, 1, "cpu", NULL, NULL};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    gp_report_table(f, &rep);
    fclose(f);
    return text;
}

static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

/* Item 7: notes are never dropped. Every metric of a run marked undecided gives one note
 * each (GP_NMETRICS of them, more than the 12 shown): report.json holds every note; the
 * table and report.md show 12 and say how many more there are. */
static void test_notes_never_dropped(void **state)
{
    (void)state;
    gp_scenario sc;
    gp_result r;
    run_text("name: many-notes\n", &sc, &r);
    gp_notes base;
    gp_report_notes(&sc, &r, &base);
    int n = base.n + GP_NMETRICS; /* each undecided metric adds its note */
    gp_notes_free(&base);
    for (int i = 0; i < GP_NMETRICS; i++)
        r.undecided[i] = 1;
    char *text = report_of(&sc, &r);
    json_t *root = json_loads(text, 0, NULL);
    assert_non_null(root);
    json_t *notes = json_object_get(json_array_get(json_object_get(root, "scenarios"), 0), "notes");
    assert_int_equal(json_array_size(notes), n);
    assert_true(strstr(json_string_value(json_array_get(notes, (size_t)n - 1)), gp_metric_name(GP_NMETRICS - 1)));
    json_decref(root);
    free(text);
    char more[64];
    snprintf(more, sizeof more, "%d more notes in report.json\n", n - 12);
    text = table_of(&sc, &r);
    assert_int_equal(count_of(text, "  note: "), 12);
    assert_non_null(strstr(text, more));
    free(text);
    const gp_scenario *ptr[1] = {&sc};
    gp_run_report rep = {ptr, &r, 1, "cpu", NULL, NULL};
    text = gp_report_markdown(&rep);
    assert_int_equal(count_of(text, "- note: "), 12);
    assert_non_null(strstr(text, more));
    free(text);
    gp_result_free(&r);
    gp_scenario_free(&sc);
}

/* Item 7: "NOT AS EXPECTED" only for a scenario that states an `expect:`. The NaN replay
 * fails: without `expect:` the table says nothing about expectations; with
 * `expect: {verdict: pass}` it says NOT AS EXPECTED, with `expect: {verdict: fail}` as
 * expected. */
static void test_not_as_expected_needs_expect(void **state)
{
    (void)state;
    static const char *const tail[3] = {"", "expect: {verdict: pass}\n",
                                        "expect: {verdict: fail, mechanism: underflow}\n"};
    static const char *const want[3] = {NULL, "      NOT AS EXPECTED\n", "      as expected\n"};
    for (int j = 0; j < 3; j++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, "name: fails\ntensors:\n  - name: w\n    size: 64\n"
                 "    grad: {dist: constant, scale: 1.0e-9}\nprecision: {grad: fp16}\n%s", tail[j]);
        gp_scenario sc;
        gp_result r;
        run_text(yaml, &sc, &r);
        assert_int_equal(r.verdict, GP_FAIL); /* 1e-9 is below fp16's subnormals: underflow */
        char *text = table_of(&sc, &r);
        if (want[j])
            assert_non_null(strstr(text, want[j]));
        else
            assert_true(strstr(text, "expected") == NULL);
        free(text);
        gp_result_free(&r);
        gp_scenario_free(&sc);
    }
}

/* ---- an update-formula failure says where (issue 24 item 7) ---- */

static int (*cpu_adamw)(const gp_plugin_adamw_args *);
static int bad_output; /* 0: m, 1: v, 2: param */

/* gradprec's AdamW, then element 5's m, v or param set to 1, 1 or 100 at AdamW step 2 (no
 * AdamW stores any of them there). */
static int adamw_bad_m(const gp_plugin_adamw_args *a)
{
    int rc = cpu_adamw(a);
    if (rc == 0 && a->step == 2 && a->first_index <= 5 && 5 < a->first_index + a->n)
        ((float *)(bad_output == 0 ? a->m : bad_output == 1 ? a->v : a->param))[5 - a->first_index] =
            bad_output == 2 ? 100.0f : 1.0f;
    return rc;
}

/* The m, v, param cases of the formula note (the subject of the test below): the first
 * departure named, with the stored value; AdamW's v after two steps of a constant g is
 * (0.999 x 0.001 + 0.001) g^2 = 0.001999 g^2 (g = fp32(1e-3)). */
static void formula_case(int which, gp_formula_first *f)
{
    static const char yaml[] = "name: bad\ntensors:\n"
                               "  - {name: a, size: 4, grad: {dist: constant, scale: 1.0e-3}}\n"
                               "  - {name: b, size: 16, grad: {dist: constant, scale: 1.0e-3}}\n"
                               "batch: {microbatches: 1, tokens: 1}\nreduction: sum\nfullbatch: sum\nsteps: 3\n";
    gp_error e = {""};
    gp_scenario sc;
    gp_backend b;
    gp_result r;
    assert_int_equal(gp_scenario_load_string(yaml, strlen(yaml), "test", &sc, &e), 0);
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    b.table = *b.ops;
    cpu_adamw = b.ops->adamw;
    b.table.adamw = adamw_bad_m;
    b.ops = &b.table;
    b.builtin = 0;
    bad_output = which;
    if (gp_run_scenario(&sc, &b, NULL, &r, &e) != 0)
        fail_msg("run: %s", e.msg);
    *f = r.st.opt.first_formula;
    gp_result_free(&r);
    gp_backend_close(&b);
    gp_scenario_free(&sc);
}

static void test_formula_note_v_and_param(void **state)
{
    (void)state;
    gp_formula_first f;
    formula_case(1, &f);
    assert_true(f.set && f.step == 2 && f.tensor == 1 && f.element == 5);
    assert_string_equal(f.output, "v");
    assert_true(f.value == 1.0);
    double g = (double)1.0e-3f;
    assert_true(fabs(f.adamw - 0.001999 * g * g) <= 1e-6 * 0.001999 * g * g);
    formula_case(2, &f);
    assert_true(f.set && f.step == 2 && f.tensor == 1 && f.element == 5);
    assert_string_equal(f.output, "param");
    assert_true(f.value == 100.0);
}

/* A subject whose second step stores m = 1 for element 5 of tensor `b` (the second tensor):
 * (tensor a has 4 elements, so only b has an element 5): the update formula fails, and
 * the note names the first departure: step 2, tensor b,
 * element 5, output m, stored 1 (0x1p+0), AdamW's b1 m + (1 - b1) g. The gradients are
 * constant 1e-3 (fp32 1e-3 of a random sign), so AdamW's m after two steps is
 * (0.9 x 0.1 + 0.1) g = 0.19 g: |m| = 1.9e-4 within 1e-6 relative. */
static void test_formula_note_names_the_output(void **state)
{
    (void)state;
    static const char yaml[] = "name: bad-m\ntensors:\n"
                               "  - {name: a, size: 4, grad: {dist: constant, scale: 1.0e-3}}\n"
                               "  - {name: b, size: 16, grad: {dist: constant, scale: 1.0e-3}}\n"
                               "batch: {microbatches: 1, tokens: 1}\nreduction: sum\nfullbatch: sum\nsteps: 3\n";
    gp_error e = {""};
    gp_scenario sc;
    gp_backend b;
    gp_result r;
    assert_int_equal(gp_scenario_load_string(yaml, strlen(yaml), "test", &sc, &e), 0);
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    b.table = *b.ops;
    cpu_adamw = b.ops->adamw;
    b.table.adamw = adamw_bad_m;
    b.ops = &b.table;
    b.builtin = 0; /* a subject */
    bad_output = 0; /* m */
    if (gp_run_scenario(&sc, &b, NULL, &r, &e) != 0)
        fail_msg("run: %s", e.msg);
    assert_true(r.st.opt.formula >= 1);
    const gp_formula_first *f = &r.st.opt.first_formula;
    assert_true(f->set);
    assert_string_equal(f->output, "m");
    assert_int_equal(f->step, 2);
    assert_int_equal(f->tensor, 1);
    assert_int_equal(f->element, 5);
    assert_true(f->value == 1.0);
    assert_true(fabs(fabs(f->adamw) - 1.9e-4) <= 1e-6 * 1.9e-4);
    assert_int_equal(r.dominant, GP_MECH_FORMULA);
    gp_notes nt;
    gp_report_notes(&sc, &r, &nt);
    int said = 0;
    for (int k = 0; k < nt.n; k++)
        said |= strstr(nt.text[k], "the first: step 2, tensor b, element 5: m departs first, stored 1 (0x1p+0) where "
                                   "AdamW gives ") != NULL;
    assert_true(said);
    gp_notes_free(&nt);
    gp_result_free(&r);
    gp_backend_close(&b);
    gp_scenario_free(&sc);
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
        cmocka_unit_test(test_nonfinite_replay_undefined),
        cmocka_unit_test(test_every_step_skipped_names_scaling),
        cmocka_unit_test(test_max_ulp_at_exact_zero),
        cmocka_unit_test(test_notes_never_dropped),
        cmocka_unit_test(test_not_as_expected_needs_expect),
        cmocka_unit_test(test_formula_note_names_the_output),
        cmocka_unit_test(test_formula_note_v_and_param),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (scratch[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
        if (system(cmd) != 0)
            rc = rc ? rc : 1;
    }
    return rc;
}
