/* test_gate.c — `gradprec gate` (the CI regression gate) and the JUnit writer.
 * The gate runs in-process (gp_cmd_gate with tmpfile() streams) on copies of
 * tests/data/gate/baseline.json edited with jansson: itself passes; a metric worse
 * beyond its tolerance regresses (exit 1, the line names scenario, metric, old and
 * new values); within tolerance passes; an improvement is reported and passes; a
 * missing scenario / tensor / metric and a "nan" fail closed; bad inputs and bad
 * tolerances files exit 2 with one line; --update-baseline replaces the baseline only
 * when asked; --markdown writes the PR comment with arrows, the same bytes twice.
 * JUnit: well-formed and valid against tests/junit.xsd (xmllint, when installed),
 * failures = failed scenarios, escaping. Last, the built binary end to end.
 * argv[1]: the gradprec binary; argv[2]: the tests/ source directory. */
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gp_test.h"

#include "cli/gp_cli.h"
#include "reports/gp_gate.h"
#include "reports/gp_junit.h"
#include "reports/gp_report.h"

static const char *g_gradprec = "build/gradprec";
static const char *g_src = "tests";
static char g_tmp[256]; /* a private temporary directory */
static int g_have_xmllint;

/* ---- helpers ---- */

static const char *data(const char *name)
{
    static char buf[8][1024];
    static int k;
    k = (k + 1) & 7;
    snprintf(buf[k], sizeof buf[k], "%s/data/gate/%s", g_src, name);
    return buf[k];
}

static const char *tmp(const char *name)
{
    static char buf[8][1024];
    static int k;
    k = (k + 1) & 7;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_tmp, name);
    return buf[k];
}

static char *slurp_stream(FILE *f)
{
    rewind(f);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t k;
    while ((k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The whole file, or NULL when it does not exist. */
static char *slurp_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    return f ? slurp_stream(f) : NULL;
}

typedef struct {
    int rc;
    char *out, *err;
} gate_run;

static void gate_free(gate_run *r)
{
    free(r->out);
    free(r->err);
}

static gate_run gate_argv(int argc, const char **argv)
{
    gate_run r;
    FILE *out = tmpfile(), *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    r.rc = gp_cmd_gate(argc, (char **)argv, out, err);
    r.out = slurp_stream(out);
    r.err = slurp_stream(err);
    return r;
}

#define GATE(...) gate_argv((int)(sizeof((const char *[]){"gate", __VA_ARGS__}) / sizeof(const char *)), \
                            (const char *[]){"gate", __VA_ARGS__})

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static int count_substr(const char *s, const char *sub)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, sub)) != NULL; p += strlen(sub))
        n++;
    return n;
}

#define assert_contains(hay, needle)                                                              \
    do {                                                                                          \
        if (!strstr((hay), (needle)))                                                             \
            fail_msg("expected \"%s\" in:\n%s", (needle), (hay));                                 \
    } while (0)
#define assert_not_contains(hay, needle)                                                          \
    do {                                                                                          \
        if (strstr((hay), (needle)))                                                              \
            fail_msg("did not expect \"%s\" in:\n%s", (needle), (hay));                           \
    } while (0)

/* A bad-input run: exit 2, nothing on stdout, one line on stderr containing `what`. */
static void assert_bad_input(gate_run *r, const char *what)
{
    if (r->rc != GP_EXIT_USAGE)
        fail_msg("exit %d, want 2; stdout:\n%s\nstderr:\n%s", r->rc, r->out, r->err);
    assert_string_equal(r->out, "");
    assert_int_equal(count_lines(r->err), 1);
    assert_contains(r->err, what);
    gate_free(r);
}

static json_t *load_baseline(void)
{
    gp_error e = {""};
    json_t *root = gp_report_load(data("baseline.json"), &e);
    if (!root)
        fail_msg("%s", e.msg);
    return root;
}

static void save(const json_t *root, const char *path)
{
    char *text = gp_report_dump(root);
    gp_error e = {""};
    assert_non_null(text);
    if (gp_write_atomic(path, text, &e) != 0)
        fail_msg("%s", e.msg);
    free(text);
}

static json_t *scenario(json_t *root, const char *name)
{
    size_t i;
    json_t *sc;
    json_array_foreach(json_object_get(root, "scenarios"), i, sc)
        if (strcmp(json_string_value(json_object_get(sc, "name")), name) == 0)
            return sc;
    fail_msg("no scenario %s", name);
    return NULL;
}

static json_t *tensor(json_t *sc, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(sc, "tensors"), i, t)
        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
            return t;
    fail_msg("no tensor %s", name);
    return NULL;
}

static double metric(json_t *obj, const char *m)
{
    json_t *v = json_object_get(json_object_get(obj, "metrics"), m);
    assert_true(json_is_number(v));
    return json_number_value(v);
}

static void set_metric(json_t *obj, const char *m, double v)
{
    json_object_set_new(json_object_get(obj, "metrics"), m, json_real(v));
}

static const char *fmt6(double v)
{
    static char buf[4][32];
    static int k;
    k = (k + 1) & 3;
    snprintf(buf[k], sizeof buf[k], "%.6g", v);
    return buf[k];
}

/* ---- the comparison ---- */

/* The seed-noise allowance by hand: sb = sc = 1 over 8 seeds each: se = sqrt(1/8 + 1/8) =
 * 0.5, Welch dof = 0.25^2 / (2 (1/8)^2 / 7) = 14, t(1e-4 one-sided, 14) = 4.985 (computed
 * independently by integrating the t density), so 2.4925; one side only (sb = 1 over 8,
 * current a single run): se = sqrt(1/8), dof 7, t = 7.063; no spread: 0. */
static void test_seed_noise_by_hand(void **state)
{
    (void)state;
    assert_true(fabs(gp_gate_noise(1, 8, 1, 8) - 0.5 * 4.98501) < 1e-4);
    assert_true(fabs(gp_gate_noise(1, 8, 0, 1) - sqrt(0.125) * 7.06343) < 1e-4);
    assert_true(gp_gate_noise(0, 1, 0, 1) == 0);
    assert_true(gp_gate_noise(0, 8, 0, 8) == 0);
}

static void test_self_passes(void **state)
{
    (void)state;
    gate_run r = GATE("--baseline", data("baseline.json"), "--current", data("baseline.json"));
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "gate: 0 regressed, 0 changed, 0 improved, 4 unchanged, 0 new, 0 failed closed: PASS\n");
    assert_string_equal(r.err, "");
    gate_free(&r);
}

/* grad_rel_err_fullbatch 1.5x worse: beyond rel 0.1 -> regression naming everything. */
static void test_worse_beyond_tolerance_regresses(void **state)
{
    (void)state;
    json_t *cur = load_baseline();
    json_t *sc = scenario(cur, "fp32-pass");
    double old = metric(sc, "grad_rel_err_fullbatch");
    set_metric(sc, "grad_rel_err_fullbatch", old * 1.5);
    save(cur, tmp("worse.json"));
    gate_run r = GATE("--baseline", data("baseline.json"), "--current", tmp("worse.json"));
    assert_int_equal(r.rc, 1);
    char line[512];
    snprintf(line, sizeof line, "REGRESSED     fp32-pass: grad_rel_err_fullbatch %s -> %s (worse by %s, tolerance %s",
             fmt6(old), fmt6(old * 1.5), fmt6(old * 1.5 - old), fmt6(0.1 * old));
    assert_contains(r.out, line);
    assert_contains(r.out, "gate: 1 regressed, 0 changed, 0 improved, 3 unchanged, 0 new, 0 failed closed: FAIL\n");
    assert_int_equal(count_lines(r.out), 2);
    gate_free(&r);

    /* the same change passes under a looser tolerances file (rel 1.0) */
    r = GATE("--baseline", data("baseline.json"), "--current", tmp("worse.json"), "--tolerances", data("tol_loose.json"));
    assert_int_equal(r.rc, 0);
    assert_contains(r.out, "gate: 0 regressed");
    gate_free(&r);
    json_decref(cur);
}

static void test_within_tolerance_passes(void **state)
{
    (void)state;
    json_t *cur = load_baseline();
    json_t *sc = scenario(cur, "lora-two-tensors-bf16");
    set_metric(sc, "grad_rel_err_fullbatch", metric(sc, "grad_rel_err_fullbatch") * 1.05);
    set_metric(sc, "absorbed_frac", metric(sc, "absorbed_frac") + 5e-5); /* abs 1e-4 */
    json_t *t = tensor(sc, "blocks.0.lora_B");
    set_metric(t, "grad_rel_err_rounding", metric(t, "grad_rel_err_rounding") * 0.95);
    save(cur, tmp("within.json"));
    gate_run r = GATE("--baseline", data("baseline.json"), "--current", tmp("within.json"));
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "gate: 0 regressed, 0 changed, 0 improved, 4 unchanged, 0 new, 0 failed closed: PASS\n");
    gate_free(&r);
    json_decref(cur);
}

static void test_improvement_reported(void **state)
{
    (void)state;
    json_t *cur = load_baseline();
    json_t *sc = scenario(cur, "fp16-underflow-fail");
    double old = metric(sc, "underflow_frac");
    set_metric(sc, "underflow_frac", 0.0);
    json_object_set_new(sc, "verdict", json_string("pass"));
    save(cur, tmp("better.json"));
    gate_run r = GATE("--baseline", data("baseline.json"), "--current", tmp("better.json"));
    assert_int_equal(r.rc, 0);
    char line[256];
    snprintf(line, sizeof line, "improved      fp16-underflow-fail: underflow_frac %s -> 0 (better by", fmt6(old));
    assert_contains(r.out, line);
    assert_contains(r.out, "improved      fp16-underflow-fail: verdict fail -> pass\n");
    assert_contains(r.out, "gate: 0 regressed, 0 changed, 1 improved, 3 unchanged, 0 new, 0 failed closed: PASS\n");
    gate_free(&r);
    json_decref(cur);
}

/* Estimates (docs/gate.md, "Estimates"): with intervals, only intervals apart by more
 * than the limit regress. Baseline 0.01 in [0.008, 0.012] (absolute tolerance 1e-12, rel
 * 0.1: limit 0.001). Current 0.0135 in [0.0113, 0.0157]: the point is worse by 0.0035 >
 * 0.001, but 0.0113 - 0.012 < 0.001: unchanged. Current 0.016 in [0.0135, 0.0185]:
 * 0.0135 - 0.012 = 0.0015 > 0.001: regressed, naming the intervals. Without intervals
 * the first change regresses (the control). grad_norm_ratio: baseline 0.99 in [0.97,
 * 1.01] (|v - 1| in [0, 0.03]), current 0.9 in [0.85, 0.95] (|v - 1| in [0.05, 0.15]):
 * 0.05 - 0.03 = 0.02 > limit 0.001 (rel 0.1 x |0.99 - 1|, abs 1e-12): regressed. */
static void set_iv(json_t *sc, const char *m, double lo, double hi)
{
    json_t *smp = json_object_get(sc, "sampling");
    if (!smp) {
        smp = json_object();
        json_object_set_new(smp, "coverage", json_real(0.95));
        json_object_set_new(smp, "intervals", json_object());
        json_object_set_new(sc, "sampling", smp);
    }
    json_t *iv = json_array();
    json_array_append_new(iv, json_real(lo));
    json_array_append_new(iv, json_real(hi));
    json_object_set_new(json_object_get(smp, "intervals"), m, iv);
}

static void test_estimates_by_interval(void **state)
{
    (void)state;
    const char *m = "grad_rel_err_fullbatch";
    json_t *base = load_baseline(), *cur = load_baseline(), *ctl = load_baseline();
    set_metric(scenario(base, "fp32-pass"), m, 0.01);
    set_iv(scenario(base, "fp32-pass"), m, 0.008, 0.012);
    set_metric(scenario(cur, "fp32-pass"), m, 0.0135);
    set_iv(scenario(cur, "fp32-pass"), m, 0.0113, 0.0157);
    set_metric(scenario(ctl, "fp32-pass"), m, 0.0135);
    json_t *cb = load_baseline();
    set_metric(scenario(cb, "fp32-pass"), m, 0.01);
    save(base, tmp("est_base.json"));
    save(cur, tmp("est_overlap.json"));
    save(cb, tmp("est_base_plain.json"));
    save(ctl, tmp("est_plain.json"));
    gate_run r = GATE("--baseline", tmp("est_base.json"), "--current", tmp("est_overlap.json"));
    assert_int_equal(r.rc, 0);
    assert_contains(r.out, "gate: 0 regressed, 0 changed, 0 improved, 4 unchanged");
    gate_free(&r);
    r = GATE("--baseline", tmp("est_base_plain.json"), "--current", tmp("est_plain.json"));
    assert_int_equal(r.rc, 1); /* the control: the same points without intervals regress */
    gate_free(&r);
    set_metric(scenario(cur, "fp32-pass"), m, 0.016);
    set_iv(scenario(cur, "fp32-pass"), m, 0.0135, 0.0185);
    set_metric(scenario(base, "fp32-pass"), "grad_norm_ratio", 0.99);
    set_iv(scenario(base, "fp32-pass"), "grad_norm_ratio", 0.97, 1.01);
    set_metric(scenario(cur, "fp32-pass"), "grad_norm_ratio", 0.9);
    set_iv(scenario(cur, "fp32-pass"), "grad_norm_ratio", 0.85, 0.95);
    save(base, tmp("est_base.json"));
    save(cur, tmp("est_apart.json"));
    r = GATE("--baseline", tmp("est_base.json"), "--current", tmp("est_apart.json"));
    assert_int_equal(r.rc, 1);
    assert_contains(r.out, "REGRESSED     fp32-pass: grad_rel_err_fullbatch 0.01 -> 0.016 (worse by 0.006, 95% intervals "
                           "[0.008, 0.012] -> [0.0135, 0.0185] apart by more than the tolerance 0.001");
    assert_contains(r.out, "REGRESSED     fp32-pass: grad_norm_ratio 0.99 -> 0.9 (|v-1| worse by 0.09, 95% intervals "
                           "[0.97, 1.01] -> [0.85, 0.95] apart by more than the tolerance 0.001");
    gate_free(&r);
    json_decref(base);
    json_decref(cur);
    json_decref(ctl);
    json_decref(cb);
}

/* The optimizer metrics' intervals (sampled multi-step runs, docs/scenarios.md) are
 * compared as every other interval. stale_update_frac (absolute tolerance 1e-4, rel 0):
 * baseline 0.05 in [0.043, 0.059]; current 0.058 in [0.050, 0.066] is worse by 0.008 as
 * points but 0.050 - 0.059 < 1e-4: unchanged; current 0.08 in [0.07, 0.09]: 0.07 - 0.059
 * = 0.011 > 1e-4: regressed, naming the intervals. */
static void test_estimates_optimizer_metric(void **state)
{
    (void)state;
    const char *m = "stale_update_frac";
    json_t *base = load_baseline(), *cur = load_baseline();
    set_metric(scenario(base, "fp32-pass"), m, 0.05);
    set_iv(scenario(base, "fp32-pass"), m, 0.043, 0.059);
    set_metric(scenario(cur, "fp32-pass"), m, 0.058);
    set_iv(scenario(cur, "fp32-pass"), m, 0.050, 0.066);
    save(base, tmp("est_opt_base.json"));
    save(cur, tmp("est_opt_overlap.json"));
    gate_run r = GATE("--baseline", tmp("est_opt_base.json"), "--current", tmp("est_opt_overlap.json"));
    assert_int_equal(r.rc, 0);
    assert_contains(r.out, "gate: 0 regressed, 0 changed, 0 improved, 4 unchanged");
    gate_free(&r);
    set_metric(scenario(cur, "fp32-pass"), m, 0.08);
    set_iv(scenario(cur, "fp32-pass"), m, 0.07, 0.09);
    save(cur, tmp("est_opt_apart.json"));
    r = GATE("--baseline", tmp("est_opt_base.json"), "--current", tmp("est_opt_apart.json"));
    assert_int_equal(r.rc, 1);
    assert_contains(r.out, "REGRESSED     fp32-pass: stale_update_frac 0.05 -> 0.08 (worse by 0.03, 95% intervals "
                           "[0.043, 0.059] -> [0.07, 0.09] apart by more than the tolerance");
    gate_free(&r);
    json_decref(base);
    json_decref(cur);
}

/* Verdicts, per-tensor metrics, counts and the two special directions. */
static void test_directions_and_verdicts(void **state)
{
    (void)state;
    json_t *cur = load_baseline();
    json_t *a = scenario(cur, "fp32-pass");
    json_object_set_new(a, "verdict", json_string("warn")); /* pass -> warn */
    json_t *b = scenario(cur, "absorption-warn");
    json_object_set_new(b, "verdict", json_string("fail")); /* warn -> fail */
    json_t *c = scenario(cur, "lora-two-tensors-bf16");
    json_t *t = tensor(c, "blocks.0.lora_A");
    double old = metric(t, "max_ulp_err");
    set_metric(t, "max_ulp_err", old * 2);
    set_metric(c, "overflow_count", 1); /* a count: exact, any change */
    set_metric(c, "grad_norm_ratio", 0.9); /* farther from 1 */
    json_t *d = scenario(cur, "fp16-underflow-fail");
    set_metric(d, "min_loss_scale", 512); /* exact: any change */
    set_metric(d, "grad_norm_ratio", 1.0); /* closer to 1: better */
    save(cur, tmp("dirs.json"));
    gate_run r = GATE("--baseline", data("baseline.json"), "--current", tmp("dirs.json"));
    assert_int_equal(r.rc, 1);
    assert_contains(r.out, "REGRESSED     fp32-pass: verdict pass -> warn\n");
    assert_contains(r.out, "REGRESSED     absorption-warn: verdict warn -> fail\n");
    char line[256];
    snprintf(line, sizeof line, "REGRESSED     lora-two-tensors-bf16 [tensor blocks.0.lora_A]: max_ulp_err %s -> %s",
             fmt6(old), fmt6(old * 2));
    assert_contains(r.out, line);
    assert_contains(r.out, "CHANGED       lora-two-tensors-bf16: overflow_count 0 -> 1 (determined exactly: any change is "
                           "a change of behaviour to review, in either direction)\n");
    assert_contains(r.out, "REGRESSED     lora-two-tensors-bf16: grad_norm_ratio 1.00003 -> 0.9 (|v-1| worse by");
    assert_contains(r.out, "CHANGED       fp16-underflow-fail: min_loss_scale 1024 -> 512 (determined exactly");
    assert_contains(r.out, "improved      fp16-underflow-fail: grad_norm_ratio 1.00027 -> 1 (|v-1| better by");
    /* lora-two-tensors-bf16 regressed too (max_ulp_err, grad_norm_ratio): its status is the worse */
    assert_contains(r.out, "gate: 3 regressed, 1 changed, 0 improved, 0 unchanged, 0 new, 0 failed closed: FAIL\n");
    gate_free(&r);

    /* the other way round: a larger loss scale, fewer overflows, ratio towards 1, fewer
     * ulps: the exact quantities are CHANGED again, never improved */
    r = GATE("--baseline", tmp("dirs.json"), "--current", data("baseline.json"));
    assert_int_equal(r.rc, 1);
    assert_contains(r.out, "CHANGED       fp16-underflow-fail: min_loss_scale 512 -> 1024 (determined exactly");
    assert_contains(r.out, "CHANGED       lora-two-tensors-bf16: overflow_count 1 -> 0 (determined exactly");
    assert_not_contains(r.out, "improved      fp16-underflow-fail: min_loss_scale");
    assert_not_contains(r.out, "improved      lora-two-tensors-bf16: overflow_count");
    assert_contains(r.out, "improved      fp32-pass: verdict warn -> pass\n");
    assert_contains(r.out, "REGRESSED     fp16-underflow-fail: grad_norm_ratio 1 -> 1.00027");
    gate_free(&r);

    /* a tolerances file that gives a count a tolerance makes it directional again */
    FILE *tf = fopen(tmp("count-tol.json"), "w");
    assert_non_null(tf);
    fputs("{\"metrics\": {\"overflow_count\": {\"abs\": 0.5}, \"min_loss_scale\": {\"abs\": 1}}}", tf);
    fclose(tf);
    r = GATE("--baseline", data("baseline.json"), "--current", tmp("dirs.json"), "--tolerances", tmp("count-tol.json"));
    assert_contains(r.out, "REGRESSED     lora-two-tensors-bf16: overflow_count 0 -> 1 (worse by 1, tolerance 0.5");
    assert_contains(r.out, "REGRESSED     fp16-underflow-fail: min_loss_scale 1024 -> 512 (worse by 512");
    gate_free(&r);
    json_decref(cur);
}

/* The per-step quantities a multi-step scenario reports (loss_scale_by_step,
 * skipped_by_step) are determined exactly: a loss scaler whose growth interval is off by
 * one changes the trajectory, and that is CHANGED naming the first step and both values,
 * never an improvement; a number of steps that differs is CHANGED too. */
static void test_exact_steps_changed(void **state)
{
    (void)state;
    json_t *base = load_baseline();
    json_t *s = scenario(base, "fp16-underflow-fail");
    json_t *sc = json_array(), *sk = json_array();
    for (int k = 0; k < 4; k++) {
        json_array_append_new(sc, json_real(k < 2 ? 1024.0 : 2048.0));
        json_array_append_new(sk, json_boolean(k == 0));
    }
    json_object_set_new(s, "loss_scale_by_step", sc);
    json_object_set_new(s, "skipped_by_step", sk);
    save(base, tmp("steps-base.json"));
    /* the growth one step early: 1024, 2048, 2048, 2048 */
    json_real_set(json_array_get(sc, 1), 2048.0);
    save(base, tmp("steps-cur.json"));
    gate_run r = GATE("--baseline", tmp("steps-base.json"), "--current", tmp("steps-cur.json"));
    assert_int_equal(r.rc, 1);
    assert_contains(r.out, "CHANGED       fp16-underflow-fail: loss_scale_by_step at step 2: 1024 -> 2048 (1 step differ)");
    assert_contains(r.out, "gate: 0 regressed, 1 changed, 0 improved, 3 unchanged, 0 new, 0 failed closed: FAIL\n");
    gate_free(&r);
    r = GATE("--baseline", tmp("steps-cur.json"), "--current", tmp("steps-base.json"));
    assert_int_equal(r.rc, 1);
    assert_contains(r.out, "CHANGED       fp16-underflow-fail: loss_scale_by_step at step 2: 2048 -> 1024 (1 step differ)");
    gate_free(&r);
    /* a step skipped that was taken, and one more step */
    json_array_set_new(sk, 2, json_true());
    json_array_append_new(sc, json_real(2048.0));
    save(base, tmp("steps-cur2.json"));
    r = GATE("--baseline", tmp("steps-base.json"), "--current", tmp("steps-cur2.json"));
    assert_int_equal(r.rc, 1);
    assert_contains(r.out, "CHANGED       fp16-underflow-fail: skipped_by_step at step 3: 0 -> 1 (1 step differ)");
    assert_contains(r.out, "CHANGED       fp16-underflow-fail: loss_scale_by_step: 4 -> 5 steps");
    gate_free(&r);
    /* a metric the scenario marks exact (`exact_metrics:`, report.json "exact_metrics") is
     * compared for equality too: grad_rel_err_fullbatch 5% lower is within the 10% tolerance
     * (unchanged) unless marked, then CHANGED, from either side's list */
    json_t *base2 = load_baseline(), *fp = scenario(base2, "fp32-pass");
    double g0 = metric(fp, "grad_rel_err_fullbatch");
    save(base2, tmp("exact-base.json"));
    set_metric(fp, "grad_rel_err_fullbatch", g0 * 0.95);
    save(base2, tmp("exact-cur.json"));
    r = GATE("--baseline", tmp("exact-base.json"), "--current", tmp("exact-cur.json"));
    assert_int_equal(r.rc, 0);
    gate_free(&r);
    json_t *list = json_array();
    json_array_append_new(list, json_string("grad_rel_err_fullbatch"));
    json_object_set_new(fp, "exact_metrics", list);
    save(base2, tmp("exact-cur.json"));
    r = GATE("--baseline", tmp("exact-base.json"), "--current", tmp("exact-cur.json"));
    assert_int_equal(r.rc, 1);
    char want[256];
    snprintf(want, sizeof want, "CHANGED       fp32-pass: grad_rel_err_fullbatch %s -> %s (determined exactly", fmt6(g0),
             fmt6(g0 * 0.95));
    assert_contains(r.out, want);
    gate_free(&r);
    json_decref(base2);
    /* gone from the current run: fails closed */
    json_object_del(s, "skipped_by_step");
    save(base, tmp("steps-cur3.json"));
    r = GATE("--baseline", tmp("steps-base.json"), "--current", tmp("steps-cur3.json"));
    assert_int_equal(r.rc, 1);
    assert_contains(r.out, "MISSING       fp16-underflow-fail: skipped_by_step (per step) is not in the current run");
    gate_free(&r);
    json_decref(base);
}

static void test_missing_scenario_fails_closed(void **state)
{
    (void)state;
    json_t *cur = load_baseline();
    json_t *arr = json_object_get(cur, "scenarios");
    json_array_remove(arr, 1); /* absorption-warn */
    save(cur, tmp("missing.json"));
    gate_run r = GATE("--baseline", data("baseline.json"), "--current", tmp("missing.json"));
    assert_int_equal(r.rc, 1);
    assert_contains(r.out, "MISSING       absorption-warn: scenario is in the baseline but not in the current run\n");
    assert_contains(r.out, "gate: 0 regressed, 0 changed, 0 improved, 3 unchanged, 0 new, 1 failed closed: FAIL\n");
    gate_free(&r);
    json_decref(cur);
}

/* A missing metric and a missing tensor in one run: both listed, then the summary. */
static void test_missing_metric_and_tensor_all_listed(void **state)
{
    (void)state;
    json_t *cur = load_baseline();
    json_t *sc = scenario(cur, "lora-two-tensors-bf16");
    json_object_del(json_object_get(sc, "metrics"), "subnormal_frac");
    json_array_remove(json_object_get(sc, "tensors"), 1); /* blocks.0.lora_B */
    json_object_del(json_object_get(scenario(cur, "fp32-pass"), "metrics"), "max_ulp_err");
    save(cur, tmp("missing2.json"));
    gate_run r = GATE("--baseline", data("baseline.json"), "--current", tmp("missing2.json"));
    assert_int_equal(r.rc, 1);
    assert_contains(r.out, "MISSING       lora-two-tensors-bf16: metric subnormal_frac (baseline 0) is not in the current run (report.json leaves out NaN metrics)\n");
    assert_contains(r.out, "MISSING       lora-two-tensors-bf16 [tensor blocks.0.lora_B]: tensor is in the baseline");
    assert_contains(r.out, "MISSING       fp32-pass: metric max_ulp_err (baseline 96) is not in the current run (report.json leaves out NaN metrics)\n");
    assert_contains(r.out, "gate: 0 regressed, 0 changed, 0 improved, 2 unchanged, 0 new, 2 failed closed: FAIL\n");
    assert_int_equal(count_lines(r.out), 4);
    gate_free(&r);
    json_decref(cur);
}

static void test_nan_fails_closed(void **state)
{
    (void)state;
    json_t *cur = load_baseline();
    json_t *sc = scenario(cur, "absorption-warn");
    double old = metric(sc, "grad_rel_err_fullbatch");
    json_object_set_new(json_object_get(sc, "metrics"), "grad_rel_err_fullbatch", json_string("nan"));
    json_object_set_new(json_object_get(tensor(sc, "w"), "metrics"), "absorbed_frac", json_null());
    save(cur, tmp("nan.json"));
    gate_run r = GATE("--baseline", data("baseline.json"), "--current", tmp("nan.json"));
    assert_int_equal(r.rc, 1);
    char line[256];
    snprintf(line, sizeof line,
             "NOT-A-NUMBER  absorption-warn: metric grad_rel_err_fullbatch is \"nan\" in the current run where the "
             "baseline had %s\n", fmt6(old));
    assert_contains(r.out, line);
    assert_contains(r.out, "NOT-A-NUMBER  absorption-warn [tensor w]: metric absorbed_frac is null in the current run");
    assert_contains(r.out, "1 failed closed: FAIL\n");
    gate_free(&r);

    /* the other way round: a number again is an improvement */
    r = GATE("--baseline", tmp("nan.json"), "--current", data("baseline.json"));
    assert_int_equal(r.rc, 0);
    snprintf(line, sizeof line, "improved      absorption-warn: grad_rel_err_fullbatch nan -> %s (a number again)\n",
             fmt6(old));
    assert_contains(r.out, line);
    assert_contains(r.out, "improved      absorption-warn [tensor w]: absorbed_frac null -> 0.00915527 (a number again)\n");
    gate_free(&r);

    /* "inf" is a number (report.json's spelling of infinity): a regression, not a problem */
    json_object_set_new(json_object_get(sc, "metrics"), "grad_rel_err_fullbatch", json_string("inf"));
    json_object_set_new(json_object_get(tensor(sc, "w"), "metrics"), "absorbed_frac", json_real(0.0091552734375));
    save(cur, tmp("inf.json"));
    r = GATE("--baseline", data("baseline.json"), "--current", tmp("inf.json"));
    assert_int_equal(r.rc, 1);
    assert_contains(r.out, "REGRESSED     absorption-warn: grad_rel_err_fullbatch");
    assert_contains(r.out, "-> inf (worse by inf, beyond any tolerance)\n");
    assert_contains(r.out, "gate: 1 regressed, 0 changed, 0 improved, 3 unchanged, 0 new, 0 failed closed: FAIL\n");
    gate_free(&r);
    json_decref(cur);
}

static void test_new_scenario_not_gated(void **state)
{
    (void)state;
    json_t *cur = load_baseline();
    json_t *extra = json_deep_copy(scenario(cur, "fp32-pass"));
    json_object_set_new(extra, "name", json_string("brand-new"));
    json_object_set_new(extra, "index", json_integer(4));
    json_object_set_new(extra, "verdict", json_string("fail"));
    json_array_append_new(json_object_get(cur, "scenarios"), extra);
    save(cur, tmp("new.json"));
    gate_run r = GATE("--baseline", data("baseline.json"), "--current", tmp("new.json"));
    assert_int_equal(r.rc, 0);
    assert_contains(r.out, "new           brand-new: scenario only in the current run, verdict fail (not gated)\n");
    assert_contains(r.out, "gate: 0 regressed, 0 changed, 0 improved, 4 unchanged, 1 new, 0 failed closed: PASS\n");
    gate_free(&r);
    json_decref(cur);
}

/* ---- bad input: exit 2, one line, nothing on stdout, nothing written ---- */

static void test_bad_reports_exit2(void **state)
{
    (void)state;
    gate_run r = GATE("--baseline", data("baseline.json"), "--current", data("wrong_schema.json"));
    assert_bad_input(&r, "wrong_schema.json: schema is not gradprec-report/1");
    r = GATE("--baseline", data("truncated.json"), "--current", data("baseline.json"), "--markdown", tmp("bad.md"));
    assert_bad_input(&r, "truncated.json:113:19: ");
    assert_null(slurp_file(tmp("bad.md")));
    r = GATE("--baseline", data("baseline.json"), "--current", tmp("does-not-exist.json"));
    assert_bad_input(&r, "does-not-exist.json");

    /* structure gp_report_load does not check: duplicated names, a verdict nobody knows */
    json_t *cur = load_baseline();
    json_object_set_new(scenario(cur, "fp32-pass"), "name", json_string("absorption-warn"));
    save(cur, tmp("dup.json"));
    r = GATE("--baseline", data("baseline.json"), "--current", tmp("dup.json"));
    assert_bad_input(&r, "dup.json: scenario \"absorption-warn\" appears more than once");
    json_decref(cur);
    cur = load_baseline();
    json_object_set_new(scenario(cur, "fp32-pass"), "verdict", json_string("great"));
    save(cur, tmp("verdict.json"));
    r = GATE("--baseline", tmp("verdict.json"), "--current", data("baseline.json"));
    assert_bad_input(&r, "verdict.json: scenario \"fp32-pass\" has a verdict other than pass, warn, fail");
    json_decref(cur);
    cur = load_baseline();
    json_object_set_new(scenario(cur, "fp32-pass"), "metrics", json_array());
    save(cur, tmp("metrics.json"));
    r = GATE("--baseline", data("baseline.json"), "--current", tmp("metrics.json"));
    assert_bad_input(&r, "has a \"metrics\" that is not an object");
    json_decref(cur);
}

static void test_bad_tolerances_exit2(void **state)
{
    (void)state;
    static const struct {
        const char *file, *msg;
    } cases[] = {
        {"tol_malformed.json", "tol_malformed.json:2:26: "},
        {"tol_truncated.json", "tol_truncated.json:3:"},
        {"tol_nan.json", "tol_nan.json:2:24: "},
        {"tol_duplicate.json", "tol_duplicate.json:3:11: duplicate object key"},
        {"tol_unknown_key.json", "tol_unknown_key.json: defaults: unknown key"},
        {"tol_unknown_field.json", "tol_unknown_field.json: default.relative: unknown key"},
        {"tol_unknown_metric.json", "tol_unknown_metric.json: metrics.grad_rel_err: unknown metric"},
        {"tol_negative.json", "tol_negative.json: metrics.absorbed_frac.abs: must be a non-negative finite number"},
        {"tol_nan_string.json", "tol_nan_string.json: default.rel: must be a non-negative finite number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gate_run r = GATE("--baseline", data("baseline.json"), "--current", data("baseline.json"), "--tolerances",
                          data(cases[i].file));
        assert_bad_input(&r, cases[i].msg);
    }
}

static void test_usage(void **state)
{
    (void)state;
    gate_run r = GATE("--help");
    assert_int_equal(r.rc, 0);
    assert_contains(r.out, "usage: gradprec gate --baseline BASE.json --current CUR.json");
    gate_free(&r);
    r = GATE("--baseline", data("baseline.json"));
    assert_bad_input(&r, "needs --baseline BASE.json and --current CUR.json");
    r = GATE("--baseline", data("baseline.json"), "--current");
    assert_bad_input(&r, "option --current needs a value");
    r = GATE("--baseline", data("baseline.json"), "--current", data("baseline.json"), "--frobnicate");
    assert_bad_input(&r, "unexpected argument '--frobnicate'");
    r = GATE("--baseline", data("baseline.json"), "--baseline=x", "--current", data("baseline.json"));
    assert_bad_input(&r, "--baseline given twice");
}

/* Library-level: the tolerance table and its overrides, field by field. */
static void test_tolerance_precedence(void **state)
{
    (void)state;
    gp_gate_tol t = gp_gate_tolerance(NULL, "grad_rel_err_fullbatch");
    assert_true(t.rel == 0.10 && t.abs == 1e-12);
    t = gp_gate_tolerance(NULL, "absorbed_frac");
    assert_true(t.rel == 0 && t.abs == 1e-4);
    t = gp_gate_tolerance(NULL, "overflow_count");
    assert_true(t.rel == 0 && t.abs == 0);
    t = gp_gate_tolerance(NULL, "skipped_steps");
    assert_true(t.rel == 0 && t.abs == 0);
    gp_gate_tolerances tol;
    gp_error e = {""};
    const char *text = "{\"default\": {\"rel\": 0.5}, \"metrics\": {\"absorbed_frac\": {\"abs\": 0.25}}}";
    assert_int_equal(gp_gate_parse_tolerances(text, strlen(text), "t.json", &tol, &e), 0);
    t = gp_gate_tolerance(&tol, "grad_rel_err_fullbatch"); /* default.rel, built-in abs */
    assert_true(t.rel == 0.5 && t.abs == 1e-12);
    t = gp_gate_tolerance(&tol, "absorbed_frac"); /* default.rel, its own abs */
    assert_true(t.rel == 0.5 && t.abs == 0.25);
    text = "[1, 2]";
    assert_int_equal(gp_gate_parse_tolerances(text, strlen(text), "t.json", &tol, &e), -1);
    assert_string_equal(e.msg, "t.json: must be a JSON object {\"default\": ..., \"metrics\": ...}");
    text = "{\"default\": {\"rel\": 1e999}}";
    assert_int_equal(gp_gate_parse_tolerances(text, strlen(text), "t.json", &tol, &e), -1);
    assert_non_null(strstr(e.msg, "t.json:1:"));
}

/* ---- --update-baseline ---- */

static void test_update_baseline(void **state)
{
    (void)state;
    json_t *cur = load_baseline();
    json_t *sc = scenario(cur, "fp32-pass");
    set_metric(sc, "grad_rel_err_fullbatch", metric(sc, "grad_rel_err_fullbatch") * 3);
    save(cur, tmp("upd-cur.json"));
    char *orig = slurp_file(data("baseline.json"));
    char *curtext = slurp_file(tmp("upd-cur.json"));
    assert_non_null(orig);
    FILE *f = fopen(tmp("upd-base.json"), "wb");
    assert_non_null(f);
    fputs(orig, f);
    fclose(f);

    /* without the flag: the regression fails the gate and the baseline stays */
    gate_run r = GATE("--baseline", tmp("upd-base.json"), "--current", tmp("upd-cur.json"));
    assert_int_equal(r.rc, 1);
    assert_not_contains(r.out, "updated");
    gate_free(&r);
    char *now = slurp_file(tmp("upd-base.json"));
    assert_string_equal(now, orig);
    free(now);

    /* with it: the comparison is printed, the baseline becomes the current report, exit 0 */
    r = GATE("--baseline", tmp("upd-base.json"), "--current", tmp("upd-cur.json"), "--update-baseline");
    assert_int_equal(r.rc, 0);
    assert_contains(r.out, "REGRESSED     fp32-pass: grad_rel_err_fullbatch");
    assert_contains(r.out, "updated from");
    assert_contains(r.out, "gate: 1 regressed");
    gate_free(&r);
    now = slurp_file(tmp("upd-base.json"));
    assert_string_equal(now, curtext);
    free(now);
    assert_null(slurp_file(tmp("upd-base.json.tmp")));

    /* and the next gate against the updated baseline passes */
    r = GATE("--baseline", tmp("upd-base.json"), "--current", tmp("upd-cur.json"));
    assert_int_equal(r.rc, 0);
    gate_free(&r);

    /* bad input: exit 2 and the baseline is not touched, even with the flag */
    r = GATE("--baseline", tmp("upd-base.json"), "--current", data("truncated.json"), "--update-baseline");
    assert_bad_input(&r, "truncated.json:");
    now = slurp_file(tmp("upd-base.json"));
    assert_string_equal(now, curtext);
    free(now);
    free(orig);
    free(curtext);
    json_decref(cur);
}

/* ---- --markdown ---- */

static void test_markdown(void **state)
{
    (void)state;
    json_t *cur = load_baseline();
    json_t *a = scenario(cur, "lora-two-tensors-bf16");
    set_metric(a, "grad_rel_err_fullbatch", metric(a, "grad_rel_err_fullbatch") * 2);
    json_t *t = tensor(a, "blocks.0.lora_B");
    set_metric(t, "grad_rel_err_fullbatch", metric(t, "grad_rel_err_fullbatch") * 2);
    json_t *b = scenario(cur, "fp16-underflow-fail");
    set_metric(b, "underflow_frac", 0.0);
    json_object_set_new(b, "dominant_mechanism", json_string("underflow"));
    json_t *c = scenario(cur, "fp32-pass");
    json_object_set_new(c, "name", json_string("fp32|pass <b>"));
    save(cur, tmp("md-cur.json"));
    gate_run r = GATE("--baseline", data("baseline.json"), "--current", tmp("md-cur.json"), "--markdown",
                      tmp("gate.md"));
    assert_int_equal(r.rc, 1);
    assert_contains(r.out, "wrote ");
    gate_free(&r);
    char *md = slurp_file(tmp("gate.md"));
    assert_non_null(md);
    assert_true(strncmp(md, "## gradprec gate: ❌ fail\n", strlen("## gradprec gate: ❌ fail\n")) == 0);
    assert_contains(md, "| lora-two-tensors-bf16 | fail → fail | rounding | ▲ regressed |\n");
    assert_contains(md, "| fp16-underflow-fail | fail → fail | rounding → underflow | ▼ improved |\n");
    assert_contains(md, "| fp32-pass | pass → — | rounding → — | ❌ failed closed |\n");
    assert_contains(md, "| fp32&#124;pass &lt;b&gt; | — → pass | — → rounding | new (not gated) |\n");
    assert_contains(md, "| lora-two-tensors-bf16 | grad\\_rel\\_err\\_fullbatch | ");
    assert_contains(md, "(+100.0%) | ▲ worse |\n");
    assert_contains(md, "| fp16-underflow-fail | underflow\\_frac | 0.175934 | 0 | -0.176 (-100.0%) | ▼ better |\n");
    assert_contains(md, "| underflow | fp16-underflow-fail |\n");
    assert_contains(md, "<details><summary>lora-two-tensors-bf16: 1 tensor metric changed, 0 problems, 0 new "
                        "tensors</summary>");
    assert_contains(md, "| blocks.0.lora\\_B | grad\\_rel\\_err\\_fullbatch | ");
    assert_contains(md, "- fp32-pass: scenario missing from the current run\n");

    /* the same inputs give the same bytes */
    r = GATE("--baseline", data("baseline.json"), "--current", tmp("md-cur.json"), "--markdown", tmp("gate2.md"));
    gate_free(&r);
    char *md2 = slurp_file(tmp("gate2.md"));
    assert_non_null(md2);
    assert_string_equal(md, md2);
    free(md2);
    free(md);

    /* a passing gate says so */
    r = GATE("--baseline", data("baseline.json"), "--current", data("baseline.json"), "--markdown", tmp("pass.md"));
    assert_int_equal(r.rc, 0);
    gate_free(&r);
    md = slurp_file(tmp("pass.md"));
    assert_non_null(md);
    assert_contains(md, "## gradprec gate: ✅ pass\n");
    assert_contains(md, "0 regressed, 0 changed, 0 improved, 4 unchanged, 0 new, 0 failed closed");
    assert_not_contains(md, "▲ regressed");
    free(md);

    /* a comment that cannot be written: exit 3, one line naming it */
    r = GATE("--baseline", data("baseline.json"), "--current", data("baseline.json"), "--markdown",
             tmp("no-such-dir/gate.md"));
    assert_int_equal(r.rc, 3);
    assert_int_equal(count_lines(r.err), 1);
    assert_contains(r.err, "no-such-dir/gate.md: cannot write");
    gate_free(&r);
    json_decref(cur);
}

/* Hundreds of regressions: the comment stays under GitHub's 65536 characters and
 * says how many rows it left out; stdout still lists every one. */
static void test_markdown_bounded(void **state)
{
    (void)state;
    json_t *base = load_baseline(), *cur = load_baseline();
    json_t *proto = scenario(base, "lora-two-tensors-bf16");
    json_t *bs = json_array(), *cs = json_array();
    for (int i = 0; i < 300; i++) {
        char name[64];
        snprintf(name, sizeof name, "sweep-%03d", i);
        json_t *b = json_deep_copy(proto), *c = json_deep_copy(proto);
        json_object_set_new(b, "name", json_string(name));
        json_object_set_new(c, "name", json_string(name));
        json_object_set_new(b, "index", json_integer(i));
        json_object_set_new(c, "index", json_integer(i));
        set_metric(c, "grad_rel_err_fullbatch", metric(c, "grad_rel_err_fullbatch") * 2);
        if (i >= 150) { /* a mechanism of its own */
            snprintf(name, sizeof name, "mech-%03d", i);
            json_object_set_new(c, "dominant_mechanism", json_string(name));
        }
        json_t *t = tensor(c, "blocks.0.lora_A");
        set_metric(t, "max_ulp_err", metric(t, "max_ulp_err") * 2);
        json_array_append_new(bs, b);
        json_array_append_new(cs, c);
    }
    json_object_set_new(base, "scenarios", bs);
    json_object_set_new(cur, "scenarios", cs);
    save(base, tmp("big-base.json"));
    save(cur, tmp("big-cur.json"));
    gate_run r = GATE("--baseline", tmp("big-base.json"), "--current", tmp("big-cur.json"), "--markdown",
                      tmp("big.md"));
    assert_int_equal(r.rc, 1);
    assert_int_equal(count_substr(r.out, "REGRESSED"), 600);
    assert_contains(r.out, "gate: 300 regressed, 0 changed, 0 improved, 0 unchanged, 0 new, 0 failed closed: FAIL\n");
    gate_free(&r);
    char *md = slurp_file(tmp("big.md"));
    assert_non_null(md);
    assert_true(strlen(md) < 65536);
    assert_contains(md, "| sweep-099 | fail → fail | rounding | ▲ regressed |\n");
    assert_contains(md, "| sweep-000 | fail → fail | rounding | ▲ regressed |\n");
    assert_not_contains(md, "| sweep-100 | fail → fail");
    assert_contains(md, "… and 200 more (the gate's output lists them all).\n");
    assert_contains(md, "… and 250 more per-tensor findings");
    assert_contains(md, "| rounding | sweep-000, ");
    assert_contains(md, "sweep-019 and 130 more |\n");
    assert_contains(md, "| mech-168 | sweep-168 |\n");
    assert_not_contains(md, "| mech-169 |");
    assert_contains(md, "… and 131 more mechanisms.\n");
    free(md);
    json_decref(base);
    json_decref(cur);
}

/* ---- JUnit ---- */

static int xml_valid(const char *path)
{
    if (!g_have_xmllint) {
        printf("# xmllint not found (apt-get install libxml2-utils): schema validation of %s skipped\n", path);
        return 1;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "xmllint --noout --schema '%s/junit.xsd' '%s'", g_src, path);
    return system(cmd) == 0;
}

static char *junit_of(const json_t *root, const char *path)
{
    gp_error e = {""};
    char *xml = gp_report_junit(root, &e);
    if (!xml)
        fail_msg("junit: %s", e.msg);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(xml, f);
    fclose(f);
    return xml;
}

static void test_junit_valid_and_counts(void **state)
{
    (void)state;
    json_t *root = load_baseline();
    char *xml = junit_of(root, tmp("report.xml"));
    assert_true(xml_valid(tmp("report.xml")));
    /* 4 scenarios, 2 failed */
    assert_contains(xml, "<testsuites name=\"gradprec\" tests=\"4\" failures=\"2\" errors=\"0\" skipped=\"0\">");
    assert_contains(xml, "<testsuite name=\"gradprec\" tests=\"4\" failures=\"2\" errors=\"0\" skipped=\"0\">");
    assert_int_equal(count_substr(xml, "<testcase "), 4);
    assert_int_equal(count_substr(xml, "<failure "), 2);
    assert_int_equal(count_substr(xml, "<system-out>"), 1);
    assert_contains(xml, "<testcase classname=\"gradprec.cpu\" name=\"fp32-pass\"/>\n");
    assert_contains(xml, "<failure message=\"dominant mechanism rounding; grad_rel_err_fullbatch = 0.00314295 exceeds max "
                         "0.001; underflow_frac = 0.175934 exceeds max 0.01\" type=\"threshold\">");
    assert_contains(xml, "<system-out>warn: absorption (");
    assert_contains(xml, "fired; dominant mechanism rounding</system-out>");
    assert_not_contains(xml, "time=");
    assert_not_contains(xml, "timestamp");
    /* deterministic */
    gp_error e = {""};
    char *again = gp_report_junit(root, &e);
    assert_non_null(again);
    assert_string_equal(xml, again);
    free(again);
    free(xml);

    /* failures follow the verdicts */
    json_object_set_new(scenario(root, "fp32-pass"), "verdict", json_string("fail"));
    json_object_set_new(scenario(root, "fp32-pass"), "failed", json_array());
    xml = junit_of(root, tmp("report3.xml"));
    assert_true(xml_valid(tmp("report3.xml")));
    assert_contains(xml, "tests=\"4\" failures=\"3\"");
    assert_int_equal(count_substr(xml, "<failure "), 3);
    free(xml);
    json_decref(root);
}

static void test_junit_escaping(void **state)
{
    (void)state;
    json_t *root = load_baseline();
    json_t *sc = scenario(root, "lora-two-tensors-bf16");
    json_object_set_new(sc, "name", json_string("a<&\">'b\x01\tc\xc3\xa9"));
    json_object_set_new(scenario(root, "absorption-warn"), "name", json_string("]]> & <!-- -->"));
    json_object_set_new(root, "backend", json_string("plugin:./lib<x>&.so"));
    char *xml = junit_of(root, tmp("escape.xml"));
    assert_true(xml_valid(tmp("escape.xml")));
    assert_contains(xml, "name=\"a&lt;&amp;&quot;&gt;&apos;b\\x01&#9;c\xc3\xa9\"");
    assert_contains(xml, "scenario a&lt;&amp;&quot;&gt;&apos;b\\x01\tc\xc3\xa9 failed\n");
    assert_contains(xml, "name=\"]]&gt; &amp; &lt;!-- --&gt;\"");
    assert_contains(xml, "classname=\"gradprec.plugin:./lib&lt;x&gt;&amp;.so\"");
    assert_not_contains(xml, "\x01");
    free(xml);

    /* a report without scenarios is refused, not crashed on */
    gp_error e = {""};
    json_t *bad = json_object();
    assert_null(gp_report_junit(bad, &e));
    assert_non_null(strstr(e.msg, "scenarios"));
    json_decref(bad);
    json_decref(root);
}

/* ---- the binary, end to end ---- */

static void test_binary_end_to_end(void **state)
{
    (void)state;
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "'%s' run --quiet --preset partial-window-mean --preset uneven-tokens-token-mean --out '%s/e2e' > /dev/null",
             g_gradprec, g_tmp);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0); /* partial-window-mean fails, as it expects */
    snprintf(cmd, sizeof cmd, "'%s' gate --baseline '%s/e2e/report.json' --current '%s/e2e/report.json' > '%s/e2e.txt'",
             g_gradprec, g_tmp, g_tmp, g_tmp);
    rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    char *txt = slurp_file(tmp("e2e.txt"));
    assert_non_null(txt);
    assert_string_equal(txt, "gate: 0 regressed, 0 changed, 0 improved, 2 unchanged, 0 new, 0 failed closed: PASS\n");
    free(txt);
    /* against the checked-in baseline: nothing in common, all missing -> exit 1 */
    snprintf(cmd, sizeof cmd, "'%s' gate --baseline '%s' --current '%s/e2e/report.json' > /dev/null", g_gradprec,
             data("baseline.json"), g_tmp);
    rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
    snprintf(cmd, sizeof cmd, "'%s' gate --baseline '%s' --current '%s' 2> /dev/null > '%s/e2e2.txt'", g_gradprec,
             data("baseline.json"), data("wrong_schema.json"), g_tmp);
    rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
    txt = slurp_file(tmp("e2e2.txt"));
    assert_string_equal(txt, "");
    free(txt);
    /* JUnit of the fresh report */
    gp_error e = {""};
    json_t *root = gp_report_load(tmp("e2e/report.json"), &e);
    if (!root)
        fail_msg("%s", e.msg);
    char *xml = junit_of(root, tmp("e2e.xml"));
    assert_true(xml_valid(tmp("e2e.xml")));
    assert_contains(xml, "tests=\"2\" failures=\"1\"");
    assert_contains(xml, "<failure message=\"dominant mechanism normalization; grad_rel_err_fullbatch = 0.375");
    free(xml);
    json_decref(root);
    /* `exact_metrics:` reaches report.json, in metric order */
    FILE *f = fopen(tmp("exact.yaml"), "w");
    assert_non_null(f);
    fputs("name: exact\ntensors: [{name: a, size: 64}]\nexact_metrics: [max_ulp_err, grad_rel_err_fullbatch]\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' run --quiet '%s' --out '%s/exact' > /dev/null", g_gradprec, tmp("exact.yaml"), g_tmp);
    rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    txt = slurp_file(tmp("exact/report.json"));
    assert_non_null(txt);
    assert_contains(txt, "\"exact_metrics\": [\n        \"grad_rel_err_fullbatch\",\n        \"max_ulp_err\"\n      ]");
    free(txt);
}

/* Issue 18 item 6: a preset that reproduces an incident expects to fail (partial-window-mean:
 * fail, naming normalization). The same scenario "fixed" (reduction token_mean: the window's
 * tokens, no division by the window) passes: `gradprec run` exits 1 (an expectation not
 * met), and the gate calls it a regression, not an improvement, although the verdict went
 * fail -> pass. */
static void test_expected_failure_that_stops_failing_regresses(void **state)
{
    (void)state;
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "'%s' run --quiet --preset partial-window-mean --out '%s/xf-base' > /dev/null && "
             "'%s' show partial-window-mean | sed 's/^reduction: mean$/reduction: token_mean/' > '%s/xf.yaml' && "
             "grep -q '^reduction: token_mean$' '%s/xf.yaml'",
             g_gradprec, g_tmp, g_gradprec, g_tmp, g_tmp);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0); /* the preset fails, as it expects: exit 0 */
    snprintf(cmd, sizeof cmd, "'%s' run --quiet '%s/xf.yaml' --out '%s/xf-cur' > '%s/xf-run.txt'", g_gradprec, g_tmp,
             g_tmp, g_tmp);
    rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 1); /* passes, against its expectation */
    char *txt = slurp_file(tmp("xf-run.txt"));
    assert_non_null(txt);
    assert_contains(txt, "NOT AS EXPECTED");
    free(txt);
    snprintf(cmd, sizeof cmd, "'%s' gate --baseline '%s/xf-base/report.json' --current '%s/xf-cur/report.json' > '%s/xf.txt'",
             g_gradprec, g_tmp, g_tmp, g_tmp);
    rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
    txt = slurp_file(tmp("xf.txt"));
    assert_non_null(txt);
    assert_contains(txt, "REGRESSED     partial-window-mean: expected verdict fail naming normalization, got pass");
    assert_contains(txt, "(an expectation not met)\n");
    assert_true(strstr(txt, "improved      partial-window-mean: verdict") == NULL);
    assert_contains(txt, ": FAIL\n");
    free(txt);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        g_gradprec = argv[1];
    if (argc > 2)
        g_src = argv[2];
    const char *base = getenv("TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s/gp_test_gate.XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    g_have_xmllint = system("command -v xmllint > /dev/null 2>&1") == 0;
    if (!g_have_xmllint)
        printf("# xmllint not found (apt-get install libxml2-utils): JUnit schema validation is skipped\n");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_noise_by_hand),
        cmocka_unit_test(test_self_passes),
        cmocka_unit_test(test_worse_beyond_tolerance_regresses),
        cmocka_unit_test(test_within_tolerance_passes),
        cmocka_unit_test(test_improvement_reported),
        cmocka_unit_test(test_estimates_by_interval),
        cmocka_unit_test(test_estimates_optimizer_metric),
        cmocka_unit_test(test_directions_and_verdicts),
        cmocka_unit_test(test_exact_steps_changed),
        cmocka_unit_test(test_missing_scenario_fails_closed),
        cmocka_unit_test(test_missing_metric_and_tensor_all_listed),
        cmocka_unit_test(test_nan_fails_closed),
        cmocka_unit_test(test_new_scenario_not_gated),
        cmocka_unit_test(test_bad_reports_exit2),
        cmocka_unit_test(test_bad_tolerances_exit2),
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_tolerance_precedence),
        cmocka_unit_test(test_update_baseline),
        cmocka_unit_test(test_markdown),
        cmocka_unit_test(test_markdown_bounded),
        cmocka_unit_test(test_junit_valid_and_counts),
        cmocka_unit_test(test_junit_escaping),
        cmocka_unit_test(test_binary_end_to_end),
        cmocka_unit_test(test_expected_failure_that_stops_failing_regresses),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (!failed && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_tmp);
    return failed;
}
