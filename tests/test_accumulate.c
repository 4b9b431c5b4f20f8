/* test_accumulate.c — the simulation end to end (scenario -> backend -> references ->
 * metrics): gradient accumulation and the optimizer over many steps, on cases whose
 * answers are worked out by hand in the comments, plus the plugin ABI: the example plugin equals the CPU emulation bit for
 * bit, the deliberately wrong one fails naming absorption, broken ones are refused.
 * argv[1]: the directory of the built example plugins. */
#include <math.h>
#include <string.h>

#include "gp_test.h"

#include "harness/sources/gp_backend.h"
#include "harness/scenario/gp_presets.h"
#include "harness/run/gp_runner.h"
#include "kernels/cpu/gp_cpu_backend.h"

static const char *g_plugin_dir = ".";

/* Load YAML text and run it on the open backend b (optionally compared with c). */
static void run_yaml_on(const char *yaml, const gp_backend *b, const gp_backend *c, gp_result *res)
{
    gp_scenario sc;
    gp_error e = {""};
    if (gp_scenario_load_string(yaml, strlen(yaml), "test", &sc, &e) != 0)
        fail_msg("scenario: %s", e.msg);
    if (gp_run_scenario(&sc, b, c, res, &e) != 0)
        fail_msg("run: %s", e.msg);
    gp_scenario_free(&sc);
}

/* The same on backend `spec` (optionally compared with `cmp`). */
static void run_yaml(const char *yaml, const char *spec, const char *cmp, gp_result *res)
{
    gp_error e = {""};
    gp_backend b, c;
    if (gp_backend_open(spec, &b, &e) != 0)
        fail_msg("backend: %s", e.msg);
    if (cmp && gp_backend_open(cmp, &c, &e) != 0)
        fail_msg("backend: %s", e.msg);
    run_yaml_on(yaml, &b, cmp ? &c : NULL, res);
    gp_backend_close(&b);
    if (cmp)
        gp_backend_close(&c);
}

static char *plugin_spec(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) & 3;
    snprintf(buf[k], sizeof buf[k], "plugin:%s/lib%s.so", g_plugin_dir, name);
    return buf[k];
}

/* 1.0 then 256 micro-batches of 2^-9, sum/sum, fp32 grads. bf16 accumulator: after
 * the first addition acc = 1.0 and each 2^-9 is below half an ulp of 1.0 (2^-8), so
 * the sum stays 1.0 (absorbed 256 of 257 non-zero additions) against an exact 1.5:
 * error 0.5 / 1.5 = 1/3. An fp32 accumulator holds 1.5 exactly. */
static char *absorption_yaml(const char *acc)
{
    static char buf[8192];
    int n = snprintf(buf, sizeof buf,
                     "reduction: sum\nfullbatch: sum\nprecision: {grad: fp32, accumulator: %s}\n"
                     "tensors:\n  - name: w\n    grad:\n      values: [[1.0]", acc);
    for (int k = 0; k < 256; k++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, ", [0.001953125]");
    snprintf(buf + n, sizeof buf - (size_t)n, "]\n");
    return buf;
}

static void test_bf16_absorbs(void **state)
{
    (void)state;
    gp_result r;
    run_yaml(absorption_yaml("bf16"), "cpu", NULL, &r);
    assert_true(r.metric[GP_M_ABSORBED_FRAC] == 256.0 / 257.0);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] == 1.0 / 3.0);
    assert_true(r.metric[GP_M_UNDERFLOW_FRAC] == 0.0);
    assert_int_equal(r.dominant, GP_MECH_ABSORPTION);
    assert_int_equal(r.verdict, GP_FAIL);
    gp_result_free(&r);
    run_yaml(absorption_yaml("fp32"), "cpu", NULL, &r);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] == 0.0);
    assert_true(r.metric[GP_M_ABSORBED_FRAC] == 0.0);
    assert_int_equal(r.verdict, GP_PASS);
    gp_result_free(&r);
}

/* Per-token values [[4.0], [0, 0, 0]]: mean of micro-batch means = (4/1 + 0/3)/2 = 2,
 * full-batch mean = 4/4 = 1, so normalization_rel_err = |2 - 1| / 1 = 1; token_mean
 * gives (4 + 0)/4 = 1 exactly: 0. */
static void test_mean_of_means(void **state)
{
    (void)state;
    const char *fmt = "reduction: %s\ntensors:\n  - name: tiny\n    grad: {values: [[4.0], [0.0, 0.0, 0.0]]}\n";
    char y[512];
    gp_result r;
    snprintf(y, sizeof y, fmt, "mean");
    run_yaml(y, "cpu", NULL, &r);
    assert_true(r.metric[GP_M_NORMALIZATION_REL_ERR] == 1.0);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] == 1.0);
    assert_int_equal(r.dominant, GP_MECH_NORMALIZATION);
    gp_result_free(&r);
    snprintf(y, sizeof y, fmt, "token_mean");
    run_yaml(y, "cpu", NULL, &r);
    assert_true(r.metric[GP_M_NORMALIZATION_REL_ERR] == 0.0);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] == 0.0);
    gp_result_free(&r);
}

/* Gradients of 2^-26 stored in fp16: below half of fp16's min subnormal (2^-25), so
 * every store gives 0: underflow_frac = 8 underflows / 8 non-zero roundings = 1
 * (adding zeros rounds nothing non-zero). With a static scale 2^16 they are stored as
 * 2^-10, summed exactly in fp32 (8 * 2^-10) and unscaled exactly: no loss at all. */
static void test_fp16_underflow_and_loss_scale(void **state)
{
    (void)state;
    const char *fmt = "reduction: sum\nfullbatch: sum\nbatch: {microbatches: 8, tokens: 1}\n"
                      "precision: {grad: fp16, accumulator: fp32}\nloss_scale: %s\n"
                      "tensors:\n  - name: e\n    size: 100\n    grad: {dist: constant, scale: 1.490116119384765625e-08, sign: 0}\n";
    char y[1024];
    gp_result r;
    snprintf(y, sizeof y, fmt, "{mode: none}");
    run_yaml(y, "cpu", NULL, &r);
    assert_true(r.metric[GP_M_UNDERFLOW_FRAC] == 1.0);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] == 1.0);
    assert_int_equal(r.dominant, GP_MECH_UNDERFLOW);
    assert_int_equal(r.verdict, GP_FAIL);
    gp_result_free(&r);
    snprintf(y, sizeof y, fmt, "{mode: static, init: 65536}");
    run_yaml(y, "cpu", NULL, &r);
    assert_true(r.metric[GP_M_UNDERFLOW_FRAC] == 0.0);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] == 0.0);
    assert_int_equal(r.verdict, GP_PASS);
    gp_result_free(&r);
}

/* 5 micro-batches of equal tokens in a window of 8, `mean`: the accumulated gradient is
 * sum(m)/8 against a full-batch sum(m)/5, so normalization_rel_err = 1 - 5/8 = 3/8.
 * Bound: both references are correctly rounded (relative 2^-53 each) and the norms
 * sum 16384 squares in binary64 (relative error below 16384 * 2^-53 < 2e-12). */
static void test_partial_window(void **state)
{
    (void)state;
    const gp_preset *p = gp_preset_find("partial-window-mean");
    assert_non_null(p);
    gp_result r;
    run_yaml(p->yaml, "cpu", NULL, &r);
    assert_true(fabs(r.metric[GP_M_NORMALIZATION_REL_ERR] - 0.375) < 1e-11);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_ROUNDING] < 1e-6); /* fp32: rounding only */
    assert_int_equal(r.dominant, GP_MECH_NORMALIZATION);
    gp_result_free(&r);
}

/* The LoRA preset: stored bf16 gradients of about 2e-6 are normal bf16 numbers (bf16's
 * range reaches 1.2e-38), so nothing underflows or is absorbed (8 addends of like
 * magnitude: each is far above 2^-9 of the running sum); the error is plain rounding,
 * of the order of 8 bf16 roundings (unit roundoff 2^-8 = 3.9e-3): between 1e-4 and
 * 1e-2. fp16 stores every one of them as a subnormal (below 6.1e-5). */
static void test_lora_presets(void **state)
{
    (void)state;
    gp_result r;
    run_yaml(gp_preset_find("lora-bf16-accum")->yaml, "cpu", NULL, &r);
    assert_true(r.metric[GP_M_UNDERFLOW_FRAC] == 0.0);
    assert_true(r.metric[GP_M_ABSORBED_FRAC] == 0.0);
    assert_true(r.metric[GP_M_SUBNORMAL_FRAC] == 0.0);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] > 1e-4);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] < 1e-2);
    assert_int_equal(r.dominant, GP_MECH_ROUNDING);
    gp_result_free(&r);
    run_yaml(gp_preset_find("lora-fp16-accum")->yaml, "cpu", NULL, &r);
    assert_true(r.metric[GP_M_SUBNORMAL_FRAC] == 1.0);
    gp_result_free(&r);
}

/* Same scenario twice: bit-identical metrics (results depend on the seed only). */
static void test_deterministic(void **state)
{
    (void)state;
    gp_result a, b;
    const char *y = gp_preset_find("long-accum-bf16-k64")->yaml;
    run_yaml(y, "cpu", NULL, &a);
    run_yaml(y, "cpu", NULL, &b);
    for (int m = 0; m < GP_NMETRICS; m++)
        if (a.metric[m] == a.metric[m])
            gp_assert_bits(gp_f64_bits(a.metric[m]), gp_f64_bits(b.metric[m]), "metric %d", m);
    assert_true(a.st.absorbed > 0); /* the first absorptions appear at K = 64 */
    gp_result_free(&a);
    gp_result_free(&b);
}

/* The example plugin is an independent implementation of the same semantics: compared
 * bit for bit with the CPU emulation on LoRA-like bf16 and fp16 data, no mismatch. */
static void test_example_plugin_matches_cpu(void **state)
{
    (void)state;
    const char *names[] = {"lora-bf16-accum", "lora-fp16-accum", "fp16-tiny-grads-scaled"};
    for (int i = 0; i < 3; i++) {
        gp_result r;
        run_yaml(gp_preset_find(names[i])->yaml, plugin_spec("gp_example_plugin"), "cpu", &r);
        if (r.st.mismatches)
            fail_msg("%s: %llu mismatches", names[i], (unsigned long long)r.st.mismatches);
        gp_result_free(&r);
    }
}

/* A plugin that rounds an "fp32" accumulator to bf16: on 1024 micro-batches it fails,
 * and the dominant mechanism is absorption. Compared with the CPU it mismatches. */
static void test_wrong_plugin_named(void **state)
{
    (void)state;
    gp_result r;
    run_yaml(gp_preset_find("long-accum-fp32-k1024")->yaml, plugin_spec("gp_wrong_bf16_plugin"), NULL, &r);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_ABSORPTION);
    assert_true(r.failed[GP_M_ABSORBED_FRAC]);
    gp_result_free(&r);
    run_yaml(gp_preset_find("long-accum-fp32-k1024")->yaml, "cpu", NULL, &r);
    assert_int_equal(r.verdict, GP_PASS);
    gp_result_free(&r);
}

static void test_plugin_errors(void **state)
{
    (void)state;
    gp_backend b;
    gp_error e = {""};
    assert_int_equal(gp_backend_open(plugin_spec("gp_test_plugin_nosym"), &b, &e), -1);
    assert_non_null(strstr(e.msg, "does not export the symbol gp_plugin_entry"));
    assert_int_equal(gp_backend_open(plugin_spec("gp_test_plugin_abi99"), &b, &e), -1);
    assert_non_null(strstr(e.msg, "ABI version 99"));
    assert_int_equal(gp_backend_open("plugin:/nonexistent/x.so", &b, &e), -1); /* the input-file check */
    assert_string_equal(e.msg, "plugin /nonexistent/x.so: cannot open: No such file or directory");
    assert_int_equal(gp_backend_open("plugin:libgp_no_such_plugin.so", &b, &e), -1); /* dlopen's search */
    assert_non_null(strstr(e.msg, "cannot load"));
    assert_non_null(strstr(e.msg, "write plugin:./libgp_no_such_plugin.so"));
    assert_int_equal(gp_backend_open("gpu", &b, &e), -1);
    assert_non_null(strstr(e.msg, "unknown backend"));
    /* A version 2 plugin loads; its table is read only up to the version 2 fields (the
     * test plugin puts an aborting function where accumulate_many would be). */
    assert_int_equal(gp_backend_open(plugin_spec("gp_abi2_plugin"), &b, &e), 0);
    assert_int_equal(b.ops->abi_version, 2);
    assert_null(b.ops->accumulate_many);
    assert_non_null(b.ops->scaler_update);
    gp_backend_close(&b);
    assert_int_equal(gp_backend_open(plugin_spec("gp_example_plugin"), &b, &e), 0);
    assert_non_null(b.ops->accumulate_many);
    gp_backend_close(&b);
}

/* ---- many tensors in one backend call ---- */

/* A backend that is the CPU emulation with its calls counted. */
static int g_single_calls, g_many_calls, g_many_sizes[64];
static int counting_accumulate(const gp_plugin_accumulate_args *a)
{
    g_single_calls++;
    return gp_cpu_backend()->accumulate(a);
}
static int counting_accumulate_many(const gp_plugin_accumulate_args *a, uint32_t count)
{
    if (g_many_calls < 64)
        g_many_sizes[g_many_calls] = (int)count;
    g_many_calls++;
    return gp_cpu_backend()->accumulate_many(a, count);
}

static void run_counted(const char *yaml, int with_many, gp_result *res)
{
    gp_backend b;
    memset(&b, 0, sizeof b);
    b.table = *gp_cpu_backend();
    b.table.accumulate = counting_accumulate;
    b.table.accumulate_many = with_many ? counting_accumulate_many : NULL;
    b.ops = &b.table;
    snprintf(b.label, sizeof b.label, "counted cpu");
    g_single_calls = g_many_calls = 0;
    run_yaml_on(yaml, &b, NULL, res);
}

/* Tensors of 7, 100, 513, 1000, 16385, 20000 and 3 elements; windows hold chunks (of
 * at most 16384 elements) of consecutive tensors adding up to at most 16384 elements:
 * {7, 100, 513, 1000} (1620; the next chunk, 16384, does not fit), {16384}, {1} (the
 * rest of the 16385; 1 + 16384 does not fit), {16384}, {3616, 3} (the rest of 20000
 * and the last tensor). Per micro-batch: accumulate_many with 4 and with 2 segments,
 * three single calls; 4 micro-batches. Without accumulate_many: 9 single calls per
 * micro-batch. The report is the same bit for bit either way. */
static void test_many_tensors_one_call(void **state)
{
    (void)state;
    const char *yaml = "seed: 11\ntensors:\n"
                       "  - {name: a, size: 7, grad: {dist: normal, scale: 1.0e-3}}\n"
                       "  - {name: b, size: 100, grad: {dist: lognormal, scale: 4.0e-6, sigma: 1.0}}\n"
                       "  - {name: c, size: 513, grad: {dist: laplace, scale: 1.0e-5}}\n"
                       "  - {name: d, size: 1000, grad: {dist: normal, scale: 1.0e-3}}\n"
                       "  - {name: e, size: 16385, grad: {dist: normal, scale: 1.0e-3}}\n"
                       "  - {name: f, size: 20000, grad: {dist: lognormal, scale: 4.0e-6, sigma: 1.0}}\n"
                       "  - {name: g, size: 3, grad: {dist: normal, scale: 1.0e-3}}\n"
                       "batch: {accumulation_steps: 4, microbatches: 4, tokens: [5, 1, 9, 2]}\n"
                       "reduction: mean\nprecision: {grad: fp32, accumulator: bf16, rounding: stochastic}\n"
                       "optimizer: {name: adamw, lr: 1.0e-3, param: bf16, master: fp32}\nsteps: 2\n";
    gp_result many, single;
    run_counted(yaml, 1, &many);
    assert_int_equal(g_many_calls, 2 * 4 * 2); /* two windows of several chunks, 4 micro-batches, 2 steps */
    assert_int_equal(g_single_calls, 3 * 4 * 2);
    for (int i = 0; i < g_many_calls; i++)
        assert_int_equal(g_many_sizes[i], i % 8 < 4 ? 4 : 2); /* per step: window 1 four times, then window 5 */
    run_counted(yaml, 0, &single);
    assert_int_equal(g_many_calls, 0);
    assert_int_equal(g_single_calls, 9 * 4 * 2);
    assert_memory_equal(many.metric, single.metric, sizeof many.metric);
    assert_int_equal(many.ntensors, 7);
    for (size_t t = 0; t < many.ntensors; t++)
        assert_memory_equal(many.tensors[t].metric, single.tensors[t].metric, sizeof many.tensors[t].metric);
    gp_result_free(&many);
    gp_result_free(&single);
}

/* ---- the optimizer over many steps ---- */

/* bf16 weights at 1.0, gradients +1e-3 every step, constant lr 1e-3, 20 steps. Adam's
 * normalised step is lr * g/(|g| + eps) ~ 1e-3 (plus decay 1e-3*0.01*w = 1e-5): the
 * weight moves down from 1.0, where the next bf16 value is 1 - 2^-8 and the rounding
 * boundary 1 - 2^-9 = 1 - 1.95e-3, farther than 1.01e-3: no step ever changes the stored
 * weight, stale_update_frac = 1 exactly. An fp32 master moves by 1e-3 >> ulp32 every
 * step: 0. Kahan-compensated bf16: the stored weight is the compensated sum rounded to
 * bf16, so it stays within one bf16 ulp (2^-8 below 1) of the exact trajectory (which
 * ends near 1 - 0.02 = 0.98); we allow two ulps: weight_rel_err <= 2 * 2^-8 / 0.97. */
#define STEADY_BF16(OPT)                                                                                       \
    "tensors: [{name: w, size: 256, grad: {dist: constant, scale: 1.0e-3, sign: 0.0},\n"                      \
    "            weight: {dist: constant, scale: 1.0, sign: 0.0}}]\n"                                         \
    "batch: {microbatches: 1, tokens: 1}\nreduction: sum\nfullbatch: sum\n"                                   \
    "optimizer: {lr: 1.0e-3, param: bf16" OPT "}\nsteps: 20\n"

static void test_stale_bf16_weights(void **state)
{
    (void)state;
    gp_result r;
    run_yaml(STEADY_BF16(""), "cpu", NULL, &r);
    assert_true(r.metric[GP_M_STALE_UPDATE_FRAC] == 1.0);
    assert_int_equal(r.st.opt.stale, 256 * 20);
    assert_int_equal(r.dominant, GP_MECH_STALE);
    assert_int_equal(r.verdict, GP_FAIL);
    for (int k = 0; k < 20; k++)
        assert_true(r.stale_by_step[k] == 1.0);
    gp_result_free(&r);

    run_yaml(STEADY_BF16(", master: fp32"), "cpu", NULL, &r);
    assert_true(r.metric[GP_M_STALE_UPDATE_FRAC] == 0.0);
    assert_true(r.metric[GP_M_WEIGHT_REL_ERR] < 1e-6); /* fp32 master: ~20 fp32 roundings */
    gp_result_free(&r);

    run_yaml(STEADY_BF16(", kahan: true"), "cpu", NULL, &r);
    assert_true(r.metric[GP_M_STALE_UPDATE_FRAC] == 0.0);
    assert_true(r.metric[GP_M_WEIGHT_REL_ERR] <= 2 * 0x1p-8 / 0.97);
    assert_true(r.metric[GP_M_WEIGHT_REL_ERR] > 0); /* a bf16 weight cannot hold 1 - 0.02 exactly */
    gp_result_free(&r);
}

/* fp16 gradients of +-1.5 under a GradScaler at 2^16: 1.5 * 2^16 = 98304 > 65504
 * overflows, so iteration 1 is skipped; the scale backs off to 2^15 (49152 fits) and
 * iterations 2..5 run. The AdamW step count counts only those: 4. */
static void test_overflow_backs_off(void **state)
{
    (void)state;
    gp_result r;
    run_yaml("tensors: [{name: w, size: 64, grad: {dist: constant, scale: 1.5}}]\n"
             "batch: {microbatches: 1, tokens: 1}\nreduction: sum\nfullbatch: sum\n"
             "precision: {grad: fp16, accumulator: fp32}\n"
             "loss_scale: {mode: dynamic, init: 65536}\nsteps: 5\n",
             "cpu", NULL, &r);
    assert_int_equal(r.skipped_steps, 1);
    assert_int_equal(r.adam_steps, 4);
    assert_true(r.skipped_by_step[0] == 1 && r.skipped_by_step[1] == 0);
    assert_true(r.loss_scale_by_step[0] == 65536.0 && r.loss_scale_by_step[1] == 32768.0);
    assert_true(r.min_loss_scale == 32768.0);
    assert_int_equal(r.dominant, GP_MECH_SCALING);
    /* one iteration's gradient of five equal ones lost: sqrt(1/5) */
    assert_true(fabs(r.metric[GP_M_SCALING_REL_ERR] - sqrt(0.2)) < 1e-14); /* binary64 sums of equal terms */
    assert_int_equal(r.st.opt.skip_writes, 0);
    gp_result_free(&r);
}

/* The wrong AdamW plugins through the ABI: eps inside the square root, and Adam's L2
 * decay, on lora-fp32-accum (one step, lr 1e-4, weights N(0, 0.02^2), accumulated
 * gradients ~1e-6..1e-5). The right first step moves every weight by about lr (Adam's
 * m/sqrt(v) is +-1 at t = 1), i.e. 1e-4 / 0.02 = 5e-3 of the weights' norm. With eps
 * under the root, sqrt(g^2 + 1e-8) ~ 1e-4 >> |g|: the update shrinks 10-100x, nearly all
 * of it is lost; the L2 term 0.01 * w ~ 2e-4 swamps g, so the update follows sign(w)
 * instead of sign(g), wrong for about half the weights. Either way weight_rel_err is
 * well above 3e-3 (threshold 1e-3), where the CPU emulation passes. */
static void test_wrong_optimizer_plugins(void **state)
{
    (void)state;
    const gp_preset *p = gp_preset_find("lora-fp32-accum");
    assert_non_null(p);
    gp_result r;
    run_yaml(p->yaml, "cpu", NULL, &r);
    assert_int_equal(r.verdict, GP_PASS);
    gp_result_free(&r);
    run_yaml(p->yaml, plugin_spec("gp_example_plugin"), "cpu", &r);
    assert_int_equal(r.st.opt.mismatches, 0);
    assert_int_equal(r.verdict, GP_PASS);
    gp_result_free(&r);
    const char *bad[] = {"gp_eps_in_sqrt_plugin", "gp_coupled_wd_plugin"};
    for (int i = 0; i < 2; i++) {
        run_yaml(p->yaml, plugin_spec(bad[i]), NULL, &r);
        assert_int_equal(r.verdict, GP_FAIL);
        assert_true(r.failed[GP_M_WEIGHT_REL_ERR]);
        assert_true(r.metric[GP_M_WEIGHT_REL_ERR] > 3e-3);
        gp_result_free(&r);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1)
        g_plugin_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_absorbs),
        cmocka_unit_test(test_mean_of_means),
        cmocka_unit_test(test_fp16_underflow_and_loss_scale),
        cmocka_unit_test(test_partial_window),
        cmocka_unit_test(test_lora_presets),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_example_plugin_matches_cpu),
        cmocka_unit_test(test_wrong_plugin_named),
        cmocka_unit_test(test_plugin_errors),
        cmocka_unit_test(test_many_tensors_one_call),
        cmocka_unit_test(test_stale_bf16_weights),
        cmocka_unit_test(test_overflow_backs_off),
        cmocka_unit_test(test_wrong_optimizer_plugins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
