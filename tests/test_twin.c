/* test_twin.c — replaying a capture as torch's twin (docs/replay.md): the optimizer state
 * carried in (tensors[i].state), torch's state after each step compared bit for bit
 * (tensors[i].twin, twin_mismatch_count and its note), the LR of each step and per-tensor
 * overrides (optimizer.lr_steps, tensors[i].optimizer), per-step token counts
 * (batch.tokens as a list per step), GradScaler's tracker at entry (loss_scale.tracker),
 * and `gradprec show` writing every one of these keys. Every expected value is computed
 * by hand below, in numbers for which each AdamW operation is exact in fp32 (dyadic
 * values, betas 0.5 / 0.75 / 0, bias corrections whose quotients are exact), so any
 * operation order gives them: the expected bits do not depend on the code under test.
 * Arguments: a scratch folder, the gradprec binary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gp_test.h"
#include "gp_test_dump.h"
#include "../harness/sources/gp_backend.h"
#include "../harness/run/gp_runner.h"
#include "../harness/scenario/gp_scenario.h"
#include "../reports/gp_report.h"

static const char *scratch, *gp_bin;

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

/* Run the scenario text (written to scratch/NAME.yaml) on the cpu backend. */
static void run_text(const char *name, const char *text, gp_result *r)
{
    char path[4200];
    gp_scenario sc;
    gp_error e = {""};
    gp_backend b;
    snprintf(path, sizeof path, "%s/%s.yaml", scratch, name);
    write_text(path, text);
    if (gp_scenario_load_file(path, &sc, &e) != 0)
        fail_msg("%s", e.msg);
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    if (gp_run_scenario(&sc, &b, NULL, r, &e) != 0)
        fail_msg("%s", e.msg);
    gp_backend_close(&b);
    gp_scenario_free(&sc);
}

/* Load the scenario text; it must be refused with a message naming the place
 * (path:line:column) and containing each of the words. */
static void refused(const char *name, const char *text, const char *w1, const char *w2)
{
    char path[4200], where[4300];
    gp_scenario sc;
    gp_error e = {""};
    snprintf(path, sizeof path, "%s/%s.yaml", scratch, name);
    write_text(path, text);
    assert_int_equal(gp_scenario_load_file(path, &sc, &e), -1);
    snprintf(where, sizeof where, "%s:", path);
    if (strncmp(e.msg, where, strlen(where)) != 0 || !strstr(e.msg, w1) || (w2 && !strstr(e.msg, w2)))
        fail_msg("unexpected message: %s", e.msg);
    assert_null(strchr(e.msg, '\n'));
}

/* ---- the carried state: AdamW from m, v, master at step count T0 ----
 * One element, betas (0.5, 0.75), lr 0 (lr_steps [0, 0]), weight decay 0; state at entry
 * m0 = 0.25, v0 = 0.0625, master 1 + 2^-20 (bf16 param 1.0), T0 = 5; gradients 0.5, 0.125:
 *   m1 = 0.5 * 0.25 + 0.5 * 0.5 = 0.375          v1 = 0.75 * 0.0625 + 0.25 * 0.25 = 0.109375
 *   m2 = 0.5 * 0.375 + 0.5 * 0.125 = 0.25        v2 = 0.75 * 0.109375 + 0.25 * 0.015625 = 0.0859375
 * lr 0 moves no weight: master stays 1 + 2^-20, the param RNE_bf16(master) = 1.0. All exact
 * in fp32. From m = v = 0 instead, m2 = 0.1875 and v2 = 0.033203125: m_rel_err, v_rel_err
 * are 0 only when the reference started from the state; weight_rel_err is 0 only when it
 * started from the master (not the bf16 weight 1.0). */
static const float MASTER0 = 1.0f + 0x1p-20f;
static const uint16_t BF16_ONE = 0x3f80;

static void write_carry_dump(const char *path, int with_v, int with_master)
{
    static const float g0 = 0.5f, g1 = 0.125f, m0 = 0.25f, v0 = 0.0625f;
    st_entry en[6] = {{"w/step0/mb0", "F32", 1, &g0, 4}, {"w/step1/mb0", "F32", 1, &g1, 4},
                      {"w/weight", "BF16", 1, &BF16_ONE, 2}, {"w/state/exp_avg", "F32", 1, &m0, 4}};
    size_t ne = 4;
    if (with_v)
        en[ne++] = (st_entry){"w/state/exp_avg_sq", "F32", 1, &v0, 4};
    if (with_master)
        en[ne++] = (st_entry){"w/state/master", "F32", 1, &MASTER0, 4};
    write_safetensors(path, en, ne);
}

/* torch's state after each step as the hand computation above gives it; `off` names one
 * entry ("step1/exp_avg_sq", "step0/param") given one ulp above its value. */
static void write_carry_twin(const char *path, const char *off)
{
    static float m[2] = {0.375f, 0.25f}, v[2] = {0.109375f, 0.0859375f}, ms[2];
    static uint16_t p[2];
    ms[0] = ms[1] = MASTER0;
    p[0] = p[1] = BF16_ONE;
    m[0] = 0.375f, m[1] = 0.25f, v[0] = 0.109375f, v[1] = 0.0859375f;
    if (off && !strcmp(off, "step1/exp_avg_sq"))
        v[1] = nextafterf(v[1], 1.0f);
    if (off && !strcmp(off, "step0/param"))
        p[0] = (uint16_t)(p[0] + 1);
    st_entry en[8] = {{"w/step0/param", "BF16", 1, &p[0], 2}, {"w/step0/exp_avg", "F32", 1, &m[0], 4},
                      {"w/step0/exp_avg_sq", "F32", 1, &v[0], 4}, {"w/step0/master", "F32", 1, &ms[0], 4},
                      {"w/step1/param", "BF16", 1, &p[1], 2}, {"w/step1/exp_avg", "F32", 1, &m[1], 4},
                      {"w/step1/exp_avg_sq", "F32", 1, &v[1], 4}, {"w/step1/master", "F32", 1, &ms[1], 4}};
    write_safetensors(path, en, 8);
}

static const char *carry_yaml = "name: carry\n"
                                "steps: 2\n"
                                "tensors:\n"
                                "  - name: w\n"
                                "    grad: {replay: carry.safetensors, key: w}\n"
                                "    weight: {replay: carry.safetensors, key: w}\n"
                                "    state: {replay: carry.safetensors, key: w, step: 5}\n"
                                "    twin: {replay: %s, key: w}\n"
                                "batch: {microbatches: 1, tokens: 1}\n"
                                "reduction: sum\n"
                                "optimizer: {lr: 0.5, lr_steps: [0.0, 0.0], betas: [0.5, 0.75], eps: 1.0e-30, "
                                "weight_decay: 0.0, param: bf16, master: fp32, state: fp32}\n";

static void test_state_carried_in(void **state)
{
    (void)state;
    char path[4200], text[2048];
    snprintf(path, sizeof path, "%s/carry.safetensors", scratch);
    write_carry_dump(path, 1, 1);
    snprintf(path, sizeof path, "%s/carry-twin.safetensors", scratch);
    write_carry_twin(path, NULL);
    snprintf(text, sizeof text, carry_yaml, "carry-twin.safetensors");
    gp_result r;
    run_text("carry", text, &r);
    assert_true(r.metric[GP_M_TWIN_MISMATCH_COUNT] == 0.0);
    assert_int_equal(r.st.opt.twin_checked, 2 * 4); /* 2 steps x param, m, v, master */
    assert_true(r.metric[GP_M_M_REL_ERR] == 0.0);
    assert_true(r.metric[GP_M_V_REL_ERR] == 0.0);
    assert_true(r.metric[GP_M_WEIGHT_REL_ERR] == 0.0);
    assert_false(r.first_twin.set);
    assert_int_equal(r.verdict != GP_FAIL, 1);
    gp_result_free(&r);
}

/* A twin entry one ulp off: one element-output differs, named first in the notes with
 * both values (torch's and the replay's, decimal and hex), and the threshold 0 fails. */
static void test_twin_one_ulp_off(void **state)
{
    (void)state;
    char path[4200], text[2048];
    snprintf(path, sizeof path, "%s/carry.safetensors", scratch);
    write_carry_dump(path, 1, 1);
    snprintf(path, sizeof path, "%s/carry-off-v.safetensors", scratch);
    write_carry_twin(path, "step1/exp_avg_sq");
    snprintf(text, sizeof text, carry_yaml, "carry-off-v.safetensors");
    gp_result r;
    run_text("carry-off-v", text, &r);
    assert_true(r.metric[GP_M_TWIN_MISMATCH_COUNT] == 1.0);
    assert_true(r.failed[GP_M_TWIN_MISMATCH_COUNT]);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_true(r.first_twin.set);
    assert_string_equal(r.first_twin.output, "v");
    assert_int_equal(r.first_twin.step, 2); /* the second iteration: the dump's step1 */
    assert_int_equal(r.first_twin.element, 0);
    gp_assert_bits(r.first_twin.value, f32_bits(0.0859375f), "the replay's v");
    gp_assert_bits(r.first_twin.compared, f32_bits(0.0859375f) + 1, "torch's v");
    gp_scenario sc;
    gp_error e = {""};
    snprintf(path, sizeof path, "%s/carry-off-v.yaml", scratch);
    assert_int_equal(gp_scenario_load_file(path, &sc, &e), 0);
    gp_notes nt;
    gp_report_notes(&sc, &r, &nt);
    assert_true(nt.n >= 1);
    if (!strstr(nt.text[0], "not torch's twin: 1 element-outputs differ") || !strstr(nt.text[0], "step 1") ||
        !strstr(nt.text[0], "tensor w element 0") || !strstr(nt.text[0], "w/step1/exp_avg_sq") ||
        !strstr(nt.text[0], "torch 0.0859375075 (0x3db00001)") || !strstr(nt.text[0], "replay 0.0859375 (0x3db00000)"))
        fail_msg("first note: %s", nt.text[0]);
    gp_notes_free(&nt);
    gp_scenario_free(&sc);
    gp_result_free(&r);

    /* the bf16 param of step 0 one ulp above 1.0: the param of the first step */
    snprintf(path, sizeof path, "%s/carry-off-p.safetensors", scratch);
    write_carry_twin(path, "step0/param");
    snprintf(text, sizeof text, carry_yaml, "carry-off-p.safetensors");
    run_text("carry-off-p", text, &r);
    assert_true(r.metric[GP_M_TWIN_MISMATCH_COUNT] == 1.0);
    assert_string_equal(r.first_twin.output, "param");
    assert_int_equal(r.first_twin.step, 1);
    assert_int_equal(r.first_twin.bits, 16);
    gp_assert_bits(r.first_twin.value, 0x3f80, "the replay's param");
    gp_assert_bits(r.first_twin.compared, 0x3f81, "torch's param");
    gp_result_free(&r);
}

/* Without `twin` the metric is absent (NaN: report.json leaves it out), and no default
 * threshold applies to it. */
static void test_no_twin_no_metric(void **state)
{
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/carry.safetensors", scratch);
    write_carry_dump(path, 1, 1);
    const char *text = "name: carry-untwinned\nsteps: 2\ntensors:\n  - name: w\n"
                       "    grad: {replay: carry.safetensors, key: w}\n"
                       "    weight: {replay: carry.safetensors, key: w}\n"
                       "    state: {replay: carry.safetensors, key: w, step: 5}\n"
                       "batch: {microbatches: 1, tokens: 1}\nreduction: sum\n"
                       "optimizer: {lr_steps: [0.0, 0.0], betas: [0.5, 0.75], eps: 1.0e-30, weight_decay: 0.0, "
                       "param: bf16, master: fp32}\n";
    gp_result r;
    run_text("carry-untwinned", text, &r);
    assert_true(isnan(r.metric[GP_M_TWIN_MISMATCH_COUNT]));
    assert_false(r.has_threshold[GP_M_TWIN_MISMATCH_COUNT]);
    assert_false(r.failed[GP_M_TWIN_MISMATCH_COUNT]);
    assert_true(r.metric[GP_M_M_REL_ERR] == 0.0 && r.metric[GP_M_V_REL_ERR] == 0.0);
    gp_result_free(&r);
    refused("twin-threshold", "name: x\nthresholds: {twin_mismatch_count: 0}\n", "twin_mismatch_count", "twin");
}

/* A dump whose state entry is missing, or of the wrong dtype, is one clear error naming the
 * entry; the CLI exits 2 with one line and writes nothing. */
static void test_missing_state_entry(void **state)
{
    (void)state;
    char path[4200], text[2048];
    snprintf(path, sizeof path, "%s/carry.safetensors", scratch);
    write_carry_dump(path, 0, 1);
    snprintf(path, sizeof path, "%s/carry-twin.safetensors", scratch);
    write_carry_twin(path, NULL);
    snprintf(text, sizeof text, carry_yaml, "carry-twin.safetensors");
    refused("no-v", text, "entry 'w/state/exp_avg_sq': missing", "tensors[0] 'w'");
    snprintf(path, sizeof path, "%s/carry.safetensors", scratch);
    write_carry_dump(path, 1, 0);
    refused("no-master", text, "entry 'w/state/master': missing", NULL);
    /* state: bf16 in the scenario, fp32 in the dump */
    write_carry_dump(path, 1, 1);
    char t2[2100];
    snprintf(t2, sizeof t2, "%sprecision: {grad: fp32}\n", text);
    char *at = strstr(t2, "state: fp32");
    memcpy(at, "state: bf16", 11);
    refused("state-dtype", t2, "entry 'w/state/exp_avg' is fp32 but optimizer.state is bf16", NULL);
    refused("state-no-weight",
            "name: x\ntensors:\n  - name: w\n    grad: {replay: carry.safetensors, key: w}\n"
            "    state: {replay: carry.safetensors, key: w, step: 5}\n",
            "tensors[0].state", "weight");
    refused("state-no-step",
            "name: x\ntensors:\n  - name: w\n    grad: {replay: carry.safetensors, key: w}\n"
            "    weight: {replay: carry.safetensors, key: w}\n    state: {replay: carry.safetensors, key: w}\n",
            "missing required key 'step'", NULL);

    /* the CLI: exit 2, one line naming the entry, nothing written */
    write_carry_dump(path, 0, 1);
    char cmd[20000], out[4300], err[4300];
    snprintf(out, sizeof out, "%s/no-v-out", scratch);
    snprintf(err, sizeof err, "%s/no-v.err", scratch);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'; '%s' run '%s/no-v.yaml' --out '%s' --quiet 2> '%s'", out, gp_bin, scratch,
             out, err);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
    struct stat sb;
    assert_int_not_equal(stat(out, &sb), 0);
    FILE *f = fopen(err, "r");
    assert_non_null(f);
    char line[2048];
    int lines = 0, named = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        named |= strstr(line, "w/state/exp_avg_sq") != NULL && strstr(line, "no-v.yaml:") != NULL;
    }
    fclose(f);
    assert_int_equal(lines, 1);
    assert_true(named);
}

/* ---- the backend's step count starts at T0 ----
 * fp32, betas (0.5, 0), eps 1e-30, weight decay 0, lr_steps [0, 15/64], T0 = 2, state
 * m0 = 0.25, v0 = 0.0625, w0 = 1; gradients 0.5, 0.125. Step 1 (t = 3, lr 0): m1 = 0.375,
 * v1 = 0.25, w1 = 1. Step 2 (t = 4): m2 = 0.25, v2 = 0.015625; bc1 = 1 - 0.5^4 = 15/16,
 * bc2 = 1 - 0^4 = 1: step size (15/64) / (15/16) = 0.25, denominator sqrt(v2) + eps =
 * 0.125 in fp32, w2 = 1 - 0.25 * 0.25 / 0.125 = 0.5. With T0 = 0 instead, t = 2: bc1 = 3/4,
 * step size 0.3125, w2 = 1 - 0.625 = 0.375 (torch's twin then departs in the param of step 1).
 * The exact reference differs from 0.5 only by eps: weight_rel_err < 1e-20. */
static void test_step_count_from_T0(void **state)
{
    (void)state;
    static const float g0 = 0.5f, g1 = 0.125f, m0 = 0.25f, v0 = 0.0625f, w0 = 1.0f;
    static const float tp[2] = {1.0f, 0.5f}, tm[2] = {0.375f, 0.25f}, tv[2] = {0.25f, 0.015625f};
    char path[4200], text[2048];
    snprintf(path, sizeof path, "%s/t0.safetensors", scratch);
    st_entry en[] = {{"w/step0/mb0", "F32", 1, &g0, 4},     {"w/step1/mb0", "F32", 1, &g1, 4},
                     {"w/weight", "F32", 1, &w0, 4},        {"w/state/exp_avg", "F32", 1, &m0, 4},
                     {"w/state/exp_avg_sq", "F32", 1, &v0, 4}, {"w/step0/param", "F32", 1, &tp[0], 4},
                     {"w/step0/exp_avg", "F32", 1, &tm[0], 4}, {"w/step0/exp_avg_sq", "F32", 1, &tv[0], 4},
                     {"w/step1/param", "F32", 1, &tp[1], 4}, {"w/step1/exp_avg", "F32", 1, &tm[1], 4},
                     {"w/step1/exp_avg_sq", "F32", 1, &tv[1], 4}};
    write_safetensors(path, en, sizeof en / sizeof en[0]);
    const char *y = "name: t0\nsteps: 2\ntensors:\n  - name: w\n"
                    "    grad: {replay: t0.safetensors, key: w}\n    weight: {replay: t0.safetensors, key: w}\n"
                    "    state: {replay: t0.safetensors, key: w, step: %d}\n"
                    "    twin: {replay: t0.safetensors, key: w}\n"
                    "batch: {microbatches: 1, tokens: 1}\nreduction: sum\n"
                    "optimizer: {lr_steps: [0.0, 0.234375], betas: [0.5, 0.0], eps: 1.0e-30, weight_decay: 0.0}\n";
    for (int t0 = 2; t0 >= 0; t0 -= 2) {
        gp_result r;
        snprintf(text, sizeof text, y, t0);
        run_text("t0", text, &r);
        assert_true(r.metric[GP_M_M_REL_ERR] == 0.0 && r.metric[GP_M_V_REL_ERR] == 0.0);
        assert_true(r.metric[GP_M_WEIGHT_REL_ERR] < 1e-20);
        if (t0 == 2) {
            assert_true(r.metric[GP_M_TWIN_MISMATCH_COUNT] == 0.0);
        } else {
            assert_true(r.metric[GP_M_TWIN_MISMATCH_COUNT] == 1.0);
            assert_string_equal(r.first_twin.output, "param");
            gp_assert_bits(r.first_twin.value, f32_bits(0.375f), "the replay's param with T0 = 0");
            gp_assert_bits(r.first_twin.compared, f32_bits(0.5f), "torch's");
        }
        gp_result_free(&r);
    }
}

/* ---- a step the scaler skips does not count ----
 * As above (fp32, betas (0.5, 0), T0 = 2, m0 = 0.25, v0 = 0.0625, w0 = 1) under a dynamic
 * loss scale from 1: step 0's entry is inf, so the scaler skips it (torch's after-entries
 * are the state before it) and backs off to 0.5; step 1's entry 0.125 (stored scaled as
 * 0.0625, unscaled exactly) is the first step taken: t = T0 + 1 = 3, bc1 = 1 - 0.5^3 =
 * 0.875, lr 0.21875 gives the step size 0.25; m1 = 0.5 * 0.25 + 0.5 * 0.125 = 0.1875,
 * v1 = 0.015625 (sqrt 0.125), w1 = 1 - 0.25 * 0.1875 / 0.125 = 0.625. Had the skipped step
 * counted (t = 4), the step size would be 0.21875 / 0.9375 and w1 another value. */
static void test_skipped_step_does_not_count(void **state)
{
    (void)state;
    static const float g0 = INFINITY, g1 = 0.125f, m0 = 0.25f, v0 = 0.0625f, w0 = 1.0f;
    static const float tp[2] = {1.0f, 0.625f}, tm[2] = {0.25f, 0.1875f}, tv[2] = {0.0625f, 0.015625f};
    char path[4200];
    snprintf(path, sizeof path, "%s/skip.safetensors", scratch);
    st_entry en[] = {{"w/step0/mb0", "F32", 1, &g0, 4},     {"w/step1/mb0", "F32", 1, &g1, 4},
                     {"w/weight", "F32", 1, &w0, 4},        {"w/state/exp_avg", "F32", 1, &m0, 4},
                     {"w/state/exp_avg_sq", "F32", 1, &v0, 4}, {"w/step0/param", "F32", 1, &tp[0], 4},
                     {"w/step0/exp_avg", "F32", 1, &tm[0], 4}, {"w/step0/exp_avg_sq", "F32", 1, &tv[0], 4},
                     {"w/step1/param", "F32", 1, &tp[1], 4}, {"w/step1/exp_avg", "F32", 1, &tm[1], 4},
                     {"w/step1/exp_avg_sq", "F32", 1, &tv[1], 4}};
    write_safetensors(path, en, sizeof en / sizeof en[0]);
    gp_result r;
    run_text("skip", "name: skip\nsteps: 2\ntensors:\n  - name: w\n"
                     "    grad: {replay: skip.safetensors, key: w}\n    weight: {replay: skip.safetensors, key: w}\n"
                     "    state: {replay: skip.safetensors, key: w, step: 2}\n"
                     "    twin: {replay: skip.safetensors, key: w}\n"
                     "batch: {microbatches: 1, tokens: 1}\nreduction: sum\nloss_scale: {mode: dynamic, init: 1}\n"
                     "optimizer: {lr_steps: [0.5, 0.21875], betas: [0.5, 0.0], eps: 1.0e-30, weight_decay: 0.0}\n",
             &r);
    assert_int_equal(r.skipped_steps, 1);
    assert_int_equal(r.adam_steps, 1);
    assert_true(r.loss_scale_by_step[1] == 0.5);
    assert_int_equal(r.st.opt.twin_checked, 2 * 3);
    assert_true(r.metric[GP_M_TWIN_MISMATCH_COUNT] == 0.0);
    gp_result_free(&r);
}

/* ---- the LR of each step, per-tensor overrides ----
 * Fresh state, one step (t = 1), betas (0.5, 0), eps 1e-30, gradients 0.5, weights 1:
 * bc1 = 0.5, m1 = 0.25, v1 = 0.25, denominator 0.5. Tensor a: the scenario's lr_steps [0.5]
 * and weight decay 0: step size 1, w = 1 - 0.25 / 0.5 = 0.5. Tensor b: its own lr_steps
 * [0.25] and weight decay 0.5: decay 1 - 0.125 = 0.875, step size 0.5, w = 0.875 - 0.25 =
 * 0.625. */
static void test_lr_steps_and_overrides(void **state)
{
    (void)state;
    static const float g = 0.5f, w0 = 1.0f, m1 = 0.25f, v1 = 0.25f, pa = 0.5f, pb = 0.625f;
    char path[4200];
    snprintf(path, sizeof path, "%s/lr.safetensors", scratch);
    st_entry en[] = {{"a/step0/mb0", "F32", 1, &g, 4},      {"a/weight", "F32", 1, &w0, 4},
                     {"a/step0/param", "F32", 1, &pa, 4},   {"a/step0/exp_avg", "F32", 1, &m1, 4},
                     {"a/step0/exp_avg_sq", "F32", 1, &v1, 4}, {"b/step0/mb0", "F32", 1, &g, 4},
                     {"b/weight", "F32", 1, &w0, 4},        {"b/step0/param", "F32", 1, &pb, 4},
                     {"b/step0/exp_avg", "F32", 1, &m1, 4}, {"b/step0/exp_avg_sq", "F32", 1, &v1, 4}};
    write_safetensors(path, en, sizeof en / sizeof en[0]);
    const char *text = "name: lr\ntensors:\n"
                       "  - name: a\n    grad: {replay: lr.safetensors, key: a}\n"
                       "    weight: {replay: lr.safetensors, key: a}\n    twin: {replay: lr.safetensors, key: a}\n"
                       "  - name: b\n    grad: {replay: lr.safetensors, key: b}\n"
                       "    weight: {replay: lr.safetensors, key: b}\n    twin: {replay: lr.safetensors, key: b}\n"
                       "    optimizer: {lr_steps: [0.25], weight_decay: 0.5}\n"
                       "batch: {microbatches: 1, tokens: 1}\nreduction: sum\n"
                       "optimizer: {lr: 1.0e-3, lr_steps: [0.5], betas: [0.5, 0.0], eps: 1.0e-30, weight_decay: 0.0}\n";
    gp_result r;
    run_text("lr", text, &r);
    assert_true(r.metric[GP_M_TWIN_MISMATCH_COUNT] == 0.0);
    assert_true(r.metric[GP_M_WEIGHT_REL_ERR] < 1e-20);
    assert_true(r.lr_by_step[0] == 0.5); /* the scenario's LR of the step */
    { /* a twin that holds says so first: 2 tensors x (param, m, v) x 1 step */
        gp_scenario sc;
        gp_error e = {""};
        assert_int_equal(gp_scenario_load_string(text, strlen(text), "lr", &sc, &e), 0);
        gp_notes nt;
        gp_report_notes(&sc, &r, &nt);
        assert_true(nt.n >= 1);
        assert_string_equal(nt.text[0], "torch's twin: the replay's param, m and v after each step (1 in all) equal "
                                        "torch's bit for bit (6 element-outputs): the verdicts judge the user's run");
        gp_notes_free(&nt);
        gp_scenario_free(&sc);
    }
    gp_result_free(&r);
    /* refusals: one line each, at the key */
    refused("lr-sched", "name: x\nsteps: 2\noptimizer: {lr_steps: [0.1, 0.2]}\nschedule: {name: cosine}\n",
            "schedule.name is cosine", "lr_steps");
    refused("lr-len", "name: x\nsteps: 2\noptimizer: {lr_steps: [0.1]}\n", "optimizer.lr_steps has 1 entries",
            "steps is 2");
    refused("lr-neg", "name: x\noptimizer: {lr_steps: [-0.1]}\n", "optimizer.lr_steps[0]", NULL);
    refused("lr-tensor", "name: x\noptimizer: {lr_steps: [0.1]}\ntensors:\n  - name: a\n    optimizer: {lr: 0.2}\n",
            "tensors[0].optimizer.lr", "lr_steps");
    refused("opt-key", "name: x\ntensors:\n  - name: a\n    optimizer: {betas: [0.5, 0.5]}\n", "betas", NULL);
}

/* ---- per-step token counts ----
 * reduction mean, accumulation_steps A = 2; step 0 has n = [1, 3] (N = 4), step 1 one
 * micro-batch of n = [2] (a partial window: still divided by A). Entries x_k = S_k / (n_k A):
 *   step 0: x = [1], [0.25]: S = 2, 1.5; g_same = 1.25, g_full = 3.5 / 4 = 0.875
 *   step 1: x = [0.5]: S = 2; g_same = 0.5, g_full = 2 / 2 = 1 (its own N_1 = 2)
 * normalization_rel_err = sqrt((0.375^2 + 0.5^2) / (0.875^2 + 1^2)). The dump has no
 * step1/mb1: step 1 reads only its own K_1 = 1 micro-batch. */
static void test_per_step_tokens(void **state)
{
    (void)state;
    static const float x00 = 1.0f, x01 = 0.25f, x10 = 0.5f;
    char path[4200];
    snprintf(path, sizeof path, "%s/tok.safetensors", scratch);
    st_entry en[] = {{"w/step0/mb0", "F32", 1, &x00, 4}, {"w/step0/mb1", "F32", 1, &x01, 4},
                     {"w/step1/mb0", "F32", 1, &x10, 4}};
    write_safetensors(path, en, 3);
    const char *text = "name: tok\nsteps: 2\ntensors:\n  - name: w\n    grad: {replay: tok.safetensors, key: w}\n"
                       "batch:\n  accumulation_steps: 2\n  tokens:\n    - [1, 3]\n    - [2]\n"
                       "reduction: mean\noptimizer: {lr: 0.0}\n";
    gp_result r;
    run_text("tok", text, &r);
    double want = sqrt((0.375 * 0.375 + 0.5 * 0.5) / (0.875 * 0.875 + 1.0));
    assert_true(fabs(r.metric[GP_M_NORMALIZATION_REL_ERR] - want) <= 0x1p-50 * want);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_ROUNDING] == 0.0);
    gp_result_free(&r);
    /* the work estimate: elements x K_s per step, plus the overhead of each step */
    gp_scenario sc;
    gp_error e = {""};
    snprintf(path, sizeof path, "%s/tok.yaml", scratch);
    assert_int_equal(gp_scenario_load_file(path, &sc, &e), 0);
    assert_int_equal(sc.batch.microbatches, 2);
    assert_int_equal(gp_scenario_step_mb(&sc, 1), 1);
    assert_true(gp_run_work(&sc) == (uint64_t)(1 * 2 + 1 * 1 + 2 * GP_RUN_STEP_OVERHEAD));
    gp_scenario_free(&sc);
    /* generated gradients take per-step counts too (K_s micro-batches drawn per step) */
    run_text("tok-gen", "name: tok-gen\nsteps: 3\ntensors: [{name: g, size: 64}]\n"
                        "batch: {tokens: [[5, 1, 9], [4], [2, 2]]}\nreduction: token_mean\n", &r);
    assert_true(r.metric[GP_M_NORMALIZATION_REL_ERR] < 1e-15); /* token_mean: each step by its own N_s */
    gp_result_free(&r);
    run_text("tok-gen-mean", "name: tok-gen-mean\nsteps: 2\ntensors: [{name: g, size: 64}]\n"
                             "batch: {tokens: [[5, 5], [7, 7]]}\nreduction: mean\n", &r);
    assert_true(r.metric[GP_M_NORMALIZATION_REL_ERR] < 1e-15); /* equal counts within each step: mean is right */
    gp_result_free(&r);
    refused("tok-steps", "name: x\nsteps: 3\nbatch: {tokens: [[1, 2], [3]]}\n", "2 step lists", "steps is 3");
    refused("tok-mb", "name: x\nsteps: 2\nbatch: {microbatches: 3, tokens: [[1, 2], [3]]}\n",
            "batch.microbatches is 3", "longest step");
    refused("tok-acc", "name: x\nsteps: 2\nbatch: {accumulation_steps: 1, tokens: [[1, 2], [3]]}\n",
            "batch.accumulation_steps (1)", NULL);
    refused("tok-empty", "name: x\nsteps: 2\nbatch: {tokens: [[1, 2], []]}\n", "batch.tokens[1] is an empty list",
            NULL);
    refused("tok-dist", "name: x\nsteps: 2\nbatch: {tokens: [[1, 2], [3]]}\ndistributed: {world_size: 2}\n",
            "per-step token counts", "distributed");
}

/* ---- GradScaler's tracker at entry ----
 * dynamic scaling from 1024, growth interval 3, tracker 2 at entry: the first (finite)
 * step brings the tracker to 3 = the interval, so the second step runs at 2048. From
 * tracker 0 it would still run at 1024. */
static void test_loss_scale_tracker(void **state)
{
    (void)state;
    const char *y = "name: tracker\nsteps: 2\ntensors: [{name: g, size: 16}]\nbatch: {microbatches: 1, tokens: 1}\n"
                    "loss_scale: {mode: dynamic, init: 1024, interval: 3%s}\n";
    for (int tr = 2; tr >= 0; tr -= 2) {
        char text[512];
        snprintf(text, sizeof text, y, tr ? ", tracker: 2" : "");
        gp_result r;
        run_text("tracker", text, &r);
        assert_int_equal(r.skipped_steps, 0);
        assert_true(r.loss_scale_by_step[0] == 1024.0);
        assert_true(r.loss_scale_by_step[1] == (tr ? 2048.0 : 1024.0));
        gp_result_free(&r);
    }
    refused("tracker-neg", "name: x\nloss_scale: {mode: dynamic, tracker: -1}\n", "loss_scale.tracker", NULL);
}

/* ---- `sample:` reads the same elements of the state and the twin ----
 * Four elements with distinct states m0 = i/4, v0 = i/16 (i = 0..3), gradients 0.5, one
 * step with lr 0, betas (0.5, 0.75): m1 = 0.125 i + 0.25, v1 = 0.046875 i + 0.0625, the
 * weights unchanged. Two sampled elements: each compared with its own entries. */
static void test_sampled_state(void **state)
{
    (void)state;
    float g[4], w[4], m0[4], v0[4], m1[4], v1[4];
    for (int i = 0; i < 4; i++) {
        g[i] = 0.5f;
        w[i] = 1.0f + (float)i;
        m0[i] = 0.25f * (float)i;
        v0[i] = 0.0625f * (float)i;
        m1[i] = 0.125f * (float)i + 0.25f;
        v1[i] = 0.046875f * (float)i + 0.0625f;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/smp.safetensors", scratch);
    st_entry en[] = {{"w/step0/mb0", "F32", 4, g, 16},       {"w/weight", "F32", 4, w, 16},
                     {"w/state/exp_avg", "F32", 4, m0, 16},  {"w/state/exp_avg_sq", "F32", 4, v0, 16},
                     {"w/step0/param", "F32", 4, w, 16},     {"w/step0/exp_avg", "F32", 4, m1, 16},
                     {"w/step0/exp_avg_sq", "F32", 4, v1, 16}};
    write_safetensors(path, en, sizeof en / sizeof en[0]);
    gp_result r;
    run_text("smp", "name: smp\ntensors:\n  - name: w\n    sample: 2\n    grad: {replay: smp.safetensors, key: w}\n"
                    "    weight: {replay: smp.safetensors, key: w}\n"
                    "    state: {replay: smp.safetensors, key: w, step: 7}\n"
                    "    twin: {replay: smp.safetensors, key: w}\n"
                    "batch: {microbatches: 1, tokens: 1}\nreduction: sum\n"
                    "optimizer: {lr: 0.0, betas: [0.5, 0.75], weight_decay: 0.0}\n",
             &r);
    assert_int_equal(r.st.opt.twin_checked, 2 * 3); /* the 2 sampled elements x param, m, v */
    assert_true(r.metric[GP_M_TWIN_MISMATCH_COUNT] == 0.0);
    gp_result_free(&r);
}

/* ---- `gradprec show` writes every key, and reads back to the same text ---- */
static void test_show_writes_every_key(void **state)
{
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/carry.safetensors", scratch);
    write_carry_dump(path, 1, 1);
    snprintf(path, sizeof path, "%s/carry-twin.safetensors", scratch);
    write_carry_twin(path, NULL);
    const char *text = "name: show\nsteps: 2\ntensors:\n  - name: w\n"
                       "    grad: {replay: carry.safetensors, key: w}\n"
                       "    weight: {replay: carry.safetensors, key: w}\n"
                       "    state: {replay: carry.safetensors, key: w, step: 5}\n"
                       "    twin: {replay: carry-twin.safetensors, key: w}\n"
                       "    optimizer: {lr: 0.25, lr_steps: [0.125, 0.0625], weight_decay: 0.5}\n"
                       "batch: {accumulation_steps: 2, tokens: [[1], [3]]}\nreduction: sum\n"
                       "loss_scale: {mode: dynamic, tracker: 7}\n"
                       "optimizer: {lr_steps: [0.5, 0.25], param: bf16, master: fp32}\n";
    snprintf(path, sizeof path, "%s/show.yaml", scratch);
    write_text(path, text);
    gp_scenario sc, sc2;
    gp_error e = {""};
    assert_int_equal(gp_scenario_load_file(path, &sc, &e), 0);
    char *y = gp_scenario_to_yaml(&sc);
    assert_non_null(y);
    const char *want[] = {"    state:\n      replay: \"", "/carry.safetensors\"\n      key: \"w\"\n      step: 5\n",
                          "    twin:\n      replay: \"", "/carry-twin.safetensors\"\n      key: \"w\"\n",
                          "    optimizer:\n      lr: 0.25\n      lr_steps: [0.125, 0.0625]\n      weight_decay: 0.5\n",
                          "  tokens:\n    - [1]\n    - [3]\n", "  tracker: 7\n", "  lr_steps: [0.5, 0.25]\n"};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        if (!strstr(y, want[k]))
            fail_msg("gp_scenario_to_yaml lacks '%s':\n%s", want[k], y);
    assert_int_equal(gp_scenario_load_string(y, strlen(y), "show-again", &sc2, &e), 0);
    char *y2 = gp_scenario_to_yaml(&sc2);
    assert_string_equal(y, y2);
    free(y);
    free(y2);
    gp_scenario_free(&sc2);
    gp_scenario_free(&sc);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_twin SCRATCH_DIR GRADPREC_BIN\n");
        return 2;
    }
    scratch = argv[1];
    gp_bin = argv[2];
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", scratch);
    if (system(cmd) != 0 || chdir(scratch) != 0)
        return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_carried_in),   cmocka_unit_test(test_twin_one_ulp_off),
        cmocka_unit_test(test_no_twin_no_metric),  cmocka_unit_test(test_missing_state_entry),
        cmocka_unit_test(test_step_count_from_T0), cmocka_unit_test(test_skipped_step_does_not_count),
        cmocka_unit_test(test_lr_steps_and_overrides),
        cmocka_unit_test(test_per_step_tokens),    cmocka_unit_test(test_loss_scale_tracker),
        cmocka_unit_test(test_sampled_state),      cmocka_unit_test(test_show_writes_every_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
