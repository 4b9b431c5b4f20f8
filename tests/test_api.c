/* test_api.c — the public C API (include/gradprec.h) from a C program linked against
 * libgradprec.so only: version, load errors, a hand-computed absorption, a caller's
 * gp_plugin table supplied in-process (equal to cpu bit for bit; a wrong one judged on
 * what it did; an unsupported one refused), reports written = report.json of the CLI.
 * Arguments: the gradprec binary, the tests/data/api folder, a scratch folder. */
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "gp_test.h"
#include "../include/gradprec.h"
#include "../kernels/gp_plugin_abi.h"

static const char *gp_bin, *data_dir, *scratch;

static gradprec_set *load(const char *name)
{
    char path[4096], err[512] = "";
    snprintf(path, sizeof path, "%s/%s", data_dir, name);
    gradprec_set *s = gradprec_load_file(path, err, sizeof err);
    if (!s)
        fail_msg("%s: %s", path, err);
    return s;
}

static void test_version(void **state)
{
    (void)state;
    assert_int_equal(gradprec_api_version(), GRADPREC_API_VERSION);
    assert_string_equal(gradprec_version(), "0.1.0");
}

static void test_load_errors(void **state)
{
    (void)state;
    char err[512] = "";
    const char *bad = "name: x\nreduction: median\n";
    assert_null(gradprec_load_yaml(bad, strlen(bad), "mine.yaml", err, sizeof err));
    assert_non_null(strstr(err, "mine.yaml:2:"));
    err[0] = '\0';
    assert_null(gradprec_load_file("/no/such/scenario.yaml", err, sizeof err));
    assert_non_null(strstr(err, "/no/such/scenario.yaml"));
    /* an origin (or a path) holding a newline or another control byte still gives one
     * line: the byte is written as \xNN (issue 27) */
    err[0] = '\0';
    assert_null(gradprec_load_yaml(bad, strlen(bad), "evil\nsteps: 9\r\t.yaml", err, sizeof err));
    assert_null(strchr(err, '\n'));
    assert_null(strchr(err, '\r'));
    assert_null(strchr(err, '\t'));
    assert_non_null(strstr(err, "evil\\x0asteps: 9\\x0d\\x09.yaml:2:"));
    err[0] = '\0';
    assert_null(gradprec_load_file("/no/such\ndir/x.yaml", err, sizeof err));
    assert_null(strchr(err, '\n'));
    assert_non_null(strstr(err, "/no/such\\x0adir/x.yaml"));
    /* a sweep expands into one scenario per point */
    const char *sw = "name: s\nsweep: {batch.microbatches: [2, 4, 8]}\n";
    gradprec_set *s = gradprec_load_yaml(sw, strlen(sw), NULL, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(gradprec_set_count(s), 3);
    assert_non_null(strstr(gradprec_set_name(s, 2), "batch.microbatches=8"));
    assert_null(gradprec_set_name(s, 3));
    gradprec_set_free(s);
}

static void test_absorption_by_hand(void **state)
{
    (void)state;
    gradprec_set *s = load("absorb.yaml");
    gradprec_result *r = NULL;
    char err[512] = "";
    assert_int_equal(gradprec_run(s, "cpu", NULL, NULL, 1, &r, err, sizeof err), GRADPREC_OK);
    gradprec_set_free(s); /* the result keeps what it needs */
    assert_int_equal(gradprec_result_count(r), 1);
    assert_int_equal(gradprec_result_failed(r), 1);
    assert_string_equal(gradprec_result_name(r, 0), "api-absorb");
    assert_string_equal(gradprec_result_verdict(r, 0), "fail");
    assert_string_equal(gradprec_result_dominant(r, 0), "absorption");
    assert_true(gradprec_result_metric(r, 0, "absorbed_frac") == 0.5);
    /* ||g_acc - g_full|| / ||g_full|| = 2^-9 / (1 + 2^-9) = 1/513, rounded once */
    double e = gradprec_result_metric(r, 0, "grad_rel_err_fullbatch");
    assert_true(fabs(e - 1.0 / 513.0) <= 0x1p-52 * (1.0 / 513.0));
    assert_int_equal(gradprec_result_tensor_count(r, 0), 1);
    assert_string_equal(gradprec_result_tensor_name(r, 0, 0), "w");
    assert_true(gradprec_result_tensor_metric(r, 0, 0, "absorbed_frac") == 0.5);
    assert_true(isnan(gradprec_result_metric(r, 0, "no_such_metric")));
    assert_true(isnan(gradprec_result_metric(r, 1, "absorbed_frac")));
    assert_null(gradprec_result_verdict(r, 1));
    assert_non_null(strstr(gradprec_result_json(r), "\"schema\": \"gradprec-report/1\""));
    gradprec_result_free(r);
}

/* ---- a kernel under test supplied in-process: fp32 only, the hardware's float ---- */

static int calls_accumulate;

static int my_accumulate(const gp_plugin_accumulate_args *a)
{
    if (a->grad_format != GP_PLUGIN_FP32 || a->acc_format != GP_PLUGIN_FP32 || a->rounding != GP_PLUGIN_RNE || a->ftz)
        return 1;
    const float *g = a->grad;
    float *acc = a->acc;
    for (uint64_t i = 0; i < a->n; i++)
        acc[i] = acc[i] + g[i];
    __atomic_add_fetch(&calls_accumulate, 1, __ATOMIC_RELAXED);
    return 0;
}

/* Wrong on purpose: keeps only the last micro-batch. */
static int last_only_accumulate(const gp_plugin_accumulate_args *a)
{
    if (a->grad_format != GP_PLUGIN_FP32 || a->acc_format != GP_PLUGIN_FP32 || a->rounding != GP_PLUGIN_RNE)
        return 1;
    memcpy(a->acc, a->grad, a->n * 4);
    return 0;
}

static int my_unscale(gp_plugin_unscale_args *a)
{
    if (a->acc_format != GP_PLUGIN_FP32)
        return 1;
    float *acc = a->acc;
    for (uint64_t i = 0; i < a->n; i++) {
        if (!isfinite(acc[i]))
            a->found_inf = 1;
        acc[i] = acc[i] * a->inv_scale;
    }
    return 0;
}

static int my_adamw(const gp_plugin_adamw_args *a)
{
    if (a->param_format != GP_PLUGIN_FP32 || a->state_format != GP_PLUGIN_FP32 || a->grad_format != GP_PLUGIN_FP32 ||
        (a->variant != GP_PLUGIN_ADAMW_PLAIN && a->variant != GP_PLUGIN_ADAMW_ONE_STORE))
        return 1;
    if (*a->found_inf)
        return 0;
    float *p = a->param, *m = a->m, *v = a->v;
    const float *g = a->grad;
    float b1 = (float)a->beta1, b2 = (float)a->beta2, lr = (float)a->lr;
    float bc1 = 1.0f - (float)pow(a->beta1, (double)a->step), bc2 = 1.0f - (float)pow(a->beta2, (double)a->step);
    for (uint64_t i = 0; i < a->n; i++) {
        float gi = g[i] * a->inv_scale;
        p[i] = p[i] * (1.0f - lr * (float)a->weight_decay);
        m[i] = m[i] + (1.0f - b1) * (gi - m[i]);
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        p[i] = p[i] - (lr / bc1) * m[i] / (sqrtf(v[i]) / sqrtf(bc2) + (float)a->eps);
    }
    return 0;
}

static void test_caller_table_equals_cpu(void **state)
{
    (void)state;
    gp_plugin table = {GP_PLUGIN_ABI_VERSION, "in-process fp32", GP_PLUGIN_HOST, my_accumulate, my_unscale,
                       my_adamw, NULL, NULL, NULL, NULL};
    gradprec_set *s = load("fp32.yaml");
    gradprec_result *rc = NULL, *rt = NULL;
    char err[512] = "";
    assert_int_equal(gradprec_run(s, NULL, NULL, NULL, 1, &rc, err, sizeof err), GRADPREC_OK);
    calls_accumulate = 0;
    assert_int_equal(gradprec_run(s, "ignored when a table is given", &table, NULL, 2, &rt, err, sizeof err),
                     GRADPREC_OK);
    /* 2 tensors of 5000 + 300 elements: 1 window of 5300 elements, one call per
     * micro-batch and tensor (the table has no accumulate_many): 4 x 2 */
    assert_int_equal(calls_accumulate, 8);
    const char *grad_metrics[] = {"grad_rel_err_fullbatch", "grad_rel_err_rounding", "normalization_rel_err",
                                  "max_ulp_err", "absorbed_frac", "underflow_frac", "grad_norm_ratio"};
    for (size_t k = 0; k < sizeof grad_metrics / sizeof *grad_metrics; k++)
        for (size_t t = 0; t < 2; t++) {
            double a = gradprec_result_tensor_metric(rc, 0, t, grad_metrics[k]);
            double b = gradprec_result_tensor_metric(rt, 0, t, grad_metrics[k]);
            uint64_t ab, bb;
            memcpy(&ab, &a, 8);
            memcpy(&bb, &b, 8);
            gp_assert_bits(bb, ab, "%s of tensor %zu: table %a, cpu %a", grad_metrics[k], t,
                           b, a);
        }
    assert_non_null(strstr(gradprec_result_json(rt), "\"backend\": \"table (in-process fp32)\""));
    /* an fp32 rounding error is non-zero here: the check above compared real numbers */
    assert_true(gradprec_result_metric(rc, 0, "grad_rel_err_rounding") > 0);
    gradprec_result_free(rc);
    gradprec_result_free(rt);
    gradprec_set_free(s);
}

static void test_caller_table_judged_on_what_it_did(void **state)
{
    (void)state;
    gp_plugin wrong = {GP_PLUGIN_ABI_VERSION, "last only", GP_PLUGIN_HOST, last_only_accumulate, my_unscale,
                       my_adamw, NULL, NULL, NULL, NULL};
    const char *y = "name: two\ntensors: [{name: w, grad: {values: [[1.0], [0.5]]}}]\n"
                    "batch: {microbatches: 2, tokens: [1, 1]}\nreduction: sum\nfullbatch: sum\n";
    char err[512] = "";
    gradprec_set *s = gradprec_load_yaml(y, strlen(y), "inline", err, sizeof err);
    assert_non_null(s);
    gradprec_result *r = NULL;
    assert_int_equal(gradprec_run(s, NULL, &wrong, NULL, 1, &r, err, sizeof err), GRADPREC_OK);
    /* the accumulator ends at 0.5 instead of 1.5: relative error 1/1.5 = 2/3 */
    double e = gradprec_result_metric(r, 0, "grad_rel_err_fullbatch");
    assert_true(fabs(e - 2.0 / 3.0) <= 0x1p-52);
    assert_string_equal(gradprec_result_verdict(r, 0), "fail");
    gradprec_result_free(r);
    gradprec_set_free(s);
    s = load("absorb.yaml");
    /* unsupported configuration (absorb.yaml's bf16 accumulator): refused as bad input, with its message */
    gp_plugin fp32only = wrong;
    fp32only.accumulate = my_accumulate;
    assert_int_equal(gradprec_run(s, NULL, &fp32only, NULL, 1, &r, err, sizeof err), GRADPREC_BAD_INPUT);
    assert_null(r);
    assert_non_null(strstr(err, "api-absorb"));
    /* a table missing a required function, a wrong ABI version, a bad backend spec */
    gp_plugin broken = fp32only;
    broken.adamw = NULL;
    assert_int_equal(gradprec_run(s, NULL, &broken, NULL, 1, &r, err, sizeof err), GRADPREC_BAD_INPUT);
    assert_non_null(strstr(err, "adamw"));
    broken = fp32only;
    broken.abi_version = 99;
    assert_int_equal(gradprec_run(s, NULL, &broken, NULL, 1, &r, err, sizeof err), GRADPREC_BAD_INPUT);
    assert_non_null(strstr(err, "ABI version 99"));
    assert_int_equal(gradprec_run(s, "gpu9000", NULL, NULL, 1, &r, err, sizeof err), GRADPREC_BAD_INPUT);
    assert_non_null(strstr(err, "unknown backend 'gpu9000'"));
    gradprec_set_free(s);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *s = malloc(n + 1);
    memcpy(s, buf, n + 1);
    return s;
}

/* The API writes the CLI's files: report.json byte-identical to `gradprec run`'s. */
static void test_write_equals_cli(void **state)
{
    (void)state;
    gradprec_set *s = load("fp32.yaml");
    gradprec_result *r = NULL;
    char err[512] = "", dir[4096], cmd[8192], path[4200];
    assert_int_equal(gradprec_run(s, "cpu", NULL, NULL, 2, &r, err, sizeof err), GRADPREC_OK);
    snprintf(dir, sizeof dir, "%s/api-out/nested", scratch);
    assert_int_equal(gradprec_result_write(r, dir, err, sizeof err), GRADPREC_OK);
    const char *names[] = {"report.json", "report.md", "report.xml", "report.html", "timing.json"};
    struct stat st;
    for (size_t k = 0; k < 5; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        assert_int_equal(stat(path, &st), 0);
    }
    snprintf(path, sizeof path, "%s/report.json", dir);
    char *api_json = slurp(path);
    assert_non_null(api_json);
    assert_string_equal(api_json, gradprec_result_json(r));
    snprintf(cmd, sizeof cmd, "%s run --quiet %s/fp32.yaml --out %s/api-cli >/dev/null", gp_bin, data_dir, scratch);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/api-cli/report.json", scratch);
    char *cli_json = slurp(path);
    assert_non_null(cli_json);
    assert_string_equal(api_json, cli_json);
    free(api_json);
    free(cli_json);
    /* an unwritable place: GRADPREC_INTERNAL naming it */
    assert_int_equal(gradprec_result_write(r, "/proc/gradprec-no", err, sizeof err), GRADPREC_INTERNAL);
    assert_non_null(strstr(err, "/proc/gradprec-no"));
    gradprec_result_free(r);
    gradprec_set_free(s);
}

/* gradprec_adamw_step, the fused variant on test_adamw's hand case (bf16 param 1.0,
 * g = 1, lr 2^-9, betas (0, 0.75), eps 2^-30, wd 0.5, step 1: the decayed 1 - 2^-10 is
 * kept in fp32, minus 2^-9 gives 1 - 3*2^-10, stored once: bf16 0x3F7F; m 1.0, v 0.25).
 * The same with an fp32 gradient of 1 + 2^-9: rounded to bf16 first (a quarter of
 * bf16's ulp 2^-7 at 1: to 1.0), the same bits. Bad names and state != param are refused. */
static void test_adamw_step(void **state)
{
    (void)state;
    char err[256] = "";
    uint16_t g = 0x3F80, p = 0x3F80, m = 0, v = 0;
    assert_int_equal(gradprec_adamw_step("torch_fused_cpu", "bf16", "bf16", "bf16", 0x1p-9, 0.0, 0.75, 0x1p-30,
                                         0.5, 1, 1, &g, &p, &m, &v, err, sizeof err), GRADPREC_OK);
    assert_int_equal(p, 0x3F7F);
    assert_int_equal(m, 0x3F80);
    assert_int_equal(v, 0x3E80);
    float g32 = 1.0f + 0x1p-9f;
    p = 0x3F80, m = 0, v = 0;
    assert_int_equal(gradprec_adamw_step("torch_fused_cpu", "bf16", "bf16", "fp32", 0x1p-9, 0.0, 0.75, 0x1p-30,
                                         0.5, 1, 1, &g32, &p, &m, &v, err, sizeof err), GRADPREC_OK);
    assert_int_equal(p, 0x3F7F);
    assert_int_equal(m, 0x3F80);
    float p32 = 1.0f, m32 = 0.0f, v32 = 0.0f;
    assert_int_equal(gradprec_adamw_step("torch_fused_cpu", "bf16", "fp32", "bf16", 1e-3, 0.9, 0.999, 1e-8, 0.0,
                                         1, 1, &g, &p, &m32, &v32, err, sizeof err), GRADPREC_BAD_INPUT);
    assert_non_null(strstr(err, "not supported"));
    assert_int_equal(gradprec_adamw_step("master", "fp32", "fp32", "fp32", 1e-3, 0.9, 0.999, 1e-8, 0.0, 1, 1, &g32,
                                         &p32, &m32, &v32, err, sizeof err), GRADPREC_BAD_INPUT);
    assert_non_null(strstr(err, "variant 'master'"));
    assert_int_equal(gradprec_adamw_step("plain", "fp8_e4m3", "fp32", "fp32", 1e-3, 0.9, 0.999, 1e-8, 0.0, 1, 1,
                                         &g32, &p32, &m32, &v32, err, sizeof err), GRADPREC_BAD_INPUT);
    assert_int_equal(gradprec_adamw_step("plain", "fp32", "fp32", "fp32", 1e-3, 0.9, 0.999, 1e-8, 0.0, 0, 1, &g32,
                                         &p32, &m32, &v32, err, sizeof err), GRADPREC_BAD_INPUT);
    assert_true(p32 == 1.0f); /* nothing written on a refusal */
}

/* gradprec_torch_sqrtf: IEEE for torch_cpu (sqrt 2 = 0x3fb504f3, 4 -> 2); for
 * torch_cpu_intel_avx512 MKL's AVX-512 kernel's result, an ulp off IEEE at 0x40320ef0
 * (kernel 0x3fd58069, tests/test_adamw.c); errors name the call. */
static void test_torch_sqrtf(void **state)
{
    (void)state;
    char err[256];
    uint32_t in[3] = {0x40000000u, 0x40800000u, 0x40320ef0u}, b[3];
    float x[3], y[3];
    memcpy(x, in, sizeof x);
    assert_int_equal(gradprec_torch_sqrtf("torch_cpu", 3, x, y, err, sizeof err), GRADPREC_OK);
    memcpy(b, y, sizeof b);
    assert_true(b[0] == 0x3fb504f3u && y[1] == 2.0f && b[2] == 0x3fd5806au);
    assert_int_equal(gradprec_torch_sqrtf("torch_cpu_intel_avx512", 3, x, y, err, sizeof err), GRADPREC_OK);
    memcpy(b, y, sizeof b);
    assert_true(b[0] == 0x3fb504f3u && y[1] == 2.0f && b[2] == 0x3fd58069u);
    assert_int_equal(gradprec_torch_sqrtf("torch_cpu_avx2", 3, x, y, err, sizeof err), GRADPREC_BAD_INPUT);
    assert_non_null(strstr(err, "torch_sqrtf: unknown evaluation 'torch_cpu_avx2'"));
    assert_int_equal(gradprec_torch_sqrtf("torch_cpu", 1, NULL, y, err, sizeof err), GRADPREC_BAD_INPUT);
    assert_int_equal(gradprec_torch_sqrtf("torch_cpu", 0, NULL, NULL, err, sizeof err), GRADPREC_OK);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_api GRADPREC_BIN DATA_DIR SCRATCH_DIR\n");
        return 2;
    }
    gp_bin = argv[1];
    data_dir = argv[2];
    scratch = argv[3];
    mkdir(scratch, 0777);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_absorption_by_hand),
        cmocka_unit_test(test_caller_table_equals_cpu),
        cmocka_unit_test(test_caller_table_judged_on_what_it_did),
        cmocka_unit_test(test_write_equals_cli),
        cmocka_unit_test(test_adamw_step),
        cmocka_unit_test(test_torch_sqrtf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
