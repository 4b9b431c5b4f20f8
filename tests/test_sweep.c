/* test_sweep.c — what users write in scenario files beyond the basics: `sweep:`
 * (expansion order and names, keys created where the file does not write them, list
 * items, keys swept together, errors pointing at the sweep's value, limits, the Markdown
 * table), the signal + noise gradient model (token_snr), token counts as sums of
 * sequence lengths. */
#include <string.h>

#include "gp_test.h"

#include "harness/sources/gp_backend.h"
#include "harness/sources/gp_generate.h"
#include "harness/run/gp_runner.h"
#include "harness/scenario/gp_scenario.h"
#include "reports/gp_report.h"

static size_t load(const char *yaml, gp_scenario **out)
{
    size_t n = 0;
    gp_error e = {""};
    if (gp_scenario_load_all_string(yaml, strlen(yaml), "sweep", out, &n, &e) != 0)
        fail_msg("load: %s", e.msg);
    return n;
}

static void free_all(gp_scenario *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gp_scenario_free(&s[i]);
    free(s);
}

static void expect_error(const char *yaml, const char *where, const char *what)
{
    gp_scenario *s = (gp_scenario *)1;
    size_t n = 7;
    gp_error e = {""};
    assert_int_equal(gp_scenario_load_all_string(yaml, strlen(yaml), "sweep", &s, &n, &e), -1);
    assert_null(s);
    if (!strstr(e.msg, where) || !strstr(e.msg, what))
        fail_msg("expected '%s' and '%s' in: %s", where, what, e.msg);
}

/* 3 x 2 points, the last key fastest; accumulation_steps alone sets K = A; the batch
 * mapping did not exist and is created. */
static void test_cross_order_names(void **state)
{
    (void)state;
    gp_scenario *s;
    size_t n = load("name: ga\nsweep:\n  batch.accumulation_steps: [1, 4, 32]\n  reduction: [mean, token_mean]\n", &s);
    assert_int_equal(n, 6);
    static const int A[6] = {1, 1, 4, 4, 32, 32};
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(s[i].batch.accumulation_steps, A[i]);
        assert_int_equal(s[i].batch.microbatches, A[i]);
        assert_int_equal(s[i].reduction, i % 2 ? GP_RED_TOKEN_MEAN : GP_RED_MEAN);
        assert_string_equal(s[i].sweep.group, "ga");
        assert_int_equal(s[i].sweep.naxes, 2);
        assert_string_equal(s[i].sweep.key[0], "batch.accumulation_steps");
    }
    assert_string_equal(s[3].name, "ga[batch.accumulation_steps=4, reduction=token_mean]");
    assert_string_equal(s[3].sweep.value[0], "4");
    assert_string_equal(s[3].sweep.value[1], "token_mean");
    free_all(s, n);
}

/* A key inside a list item, an existing flow mapping, and no sweep at all. */
static void test_paths(void **state)
{
    (void)state;
    gp_scenario *s;
    size_t n = load("tensors:\n  - {name: a, size: 8}\n  - {name: b, size: 8, grad: {scale: 2.0}}\n"
                    "precision: {grad: bf16}\nsweep:\n  tensors[1].grad.scale: [0.5, 3]\n  precision.accumulator: [bf16]\n",
                    &s);
    assert_int_equal(n, 2);
    assert_true(s[0].tensors[1].grad.scale == 0.5 && s[1].tensors[1].grad.scale == 3.0);
    assert_true(s[0].tensors[0].grad.scale == 1.0);
    assert_int_equal(s[1].precision.grad, GP_BF16);
    assert_int_equal(s[1].precision.accumulator, GP_BF16);
    free_all(s, n);
    n = load("name: plain\n", &s);
    assert_int_equal(n, 1);
    assert_int_equal(s[0].sweep.naxes, 0);
    assert_string_equal(s[0].name, "plain");
    free_all(s, n);
}

static void test_errors(void **state)
{
    (void)state;
    /* a bad value is reported where the sweep writes it */
    expect_error("sweep:\n  reduction: [mean, average]\n", "sweep:2:21", "reduction");
    expect_error("sweep:\n  batch.microbatches: [2, 0]\n", "sweep:2:27", "batch.microbatches");
    expect_error("sweep:\n  batch.colour: [1]\n", "sweep:2:3", "unknown key 'colour' in batch");
    expect_error("sweep:\n  tensors[3].size: [1]\n", "sweep:2:3", "no list 'tensors'");
    expect_error("sweep: [1, 2]\n", "sweep:1:8", "expected a mapping");
    expect_error("sweep: {reduction: []}\n", "sweep:1:20", "1 to 256 values");
    expect_error("sweep: {'a..b': [1]}\n", "sweep:1:9", "dotted path");
    expect_error("sweep: {seed: [[1]]}\n", "sweep:1:16", "scalar");
    expect_error("sweep: {seed: [1], steps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, "
                 "21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, "
                 "47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64], "
                 "optimizer.lr: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, "
                 "21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, "
                 "47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65]}\n",
                 "sweep:1:", "4096");
    /* the one-scenario loader refuses a sweep and names the way */
    gp_scenario one;
    gp_error e = {""};
    assert_int_equal(gp_scenario_load_string("sweep: {seed: [1, 2]}\n", 22, "one", &one, &e), -1);
    assert_non_null(strstr(e.msg, "one:1:1: sweep"));
}

/* The Markdown table: rows by the first key, a column per value of the second. */
static void test_markdown_table(void **state)
{
    (void)state;
    gp_scenario *s;
    size_t n = load("name: t\ntensors: [{name: w, size: 16}]\nbatch: {tokens: [1, 3]}\n"
                    "sweep: {seed: [1, 2], reduction: [mean, token_mean]}\n", &s);
    gp_result *r = calloc(n, sizeof *r);
    const gp_scenario **ptr = calloc(n, sizeof *ptr);
    for (size_t i = 0; i < n; i++) {
        r[i].metric[GP_M_GRAD_REL_ERR_FULLBATCH] = (double)(i + 1) / 8; /* 0.125, 0.25, ... */
        r[i].verdict = GP_PASS;
        ptr[i] = &s[i];
    }
    gp_run_report rep = {ptr, r, n, "cpu", NULL, NULL};
    char *md = gp_report_markdown(&rep);
    assert_non_null(strstr(md, "### sweep t: grad_rel_err_fullbatch against seed\n\n"
                               "| seed | reduction=mean | reduction=token_mean |\n|---|---|---|\n"
                               "| 1 | 0.125 | 0.25 |\n| 2 | 0.375 | 0.5 |\n"));
    free(md);
    free(ptr);
    free(r);
    free_all(s, n);
}

/* The signal + noise model: m_k = fp32(s + (scale/token_snr)/sqrt(n_k) z_k) with s shared
 * by the micro-batches of a step and z_k standard normals of the noise stream. By hand
 * with a constant signal 1 (scale 1, all positive), token_snr 2, n_k = 16: m_k = fp32(1 +
 * z_k/8), and the same z drawn directly from the noise stream. */
static void test_signal_noise_model(void **state)
{
    (void)state;
    gp_dist d;
    memset(&d, 0, sizeof d);
    d.kind = GP_DIST_CONSTANT;
    d.scale = 1.0;
    d.token_snr = 2.0;
    gp_dist z;
    memset(&z, 0, sizeof z);
    z.kind = GP_DIST_NORMAL;
    z.scale = 1.0;
    float out[64], scratch[64], zz[64];
    for (uint64_t k = 0; k < 3; k++) {
        gp_generate_signal_noise(&d, 9, 1, 2, k, 16, 100, NULL, 64, out, scratch);
        gp_generate(&z, 9, gp_stream_id(GP_STREAM_NOISE, 1, 2, k), 100, 64, zz);
        for (int j = 0; j < 64; j++)
            assert_true(out[j] == (float)(1.0 + (double)zz[j] / 8.0));
    }
}

/* Uneven token counts (512 ... 17), `mean` against `token_mean`. Drawn independently per
 * micro-batch (no token_snr), the per-micro-batch means differ by their whole size and
 * the normalization error is large (0.476, the preset uneven-tokens-mean). With a shared
 * signal and noise 1e-9 of it (token_snr 1e9) every micro-batch carries the same
 * gradient, any weighting of the same vector gives that vector, and the error is of the
 * order of the noise (below 1e-6): the error comes from the noise, as in training. */
static void test_normalization_follows_noise(void **state)
{
    (void)state;
    static const char base[] = "seed: 3\ntensors:\n  - name: w\n    size: 4096\n    grad: {dist: normal, scale: 1.0e-3%s}\n"
                               "batch: {microbatches: 8, tokens: [512, 480, 17, 512, 512, 300, 512, 64]}\nreduction: mean\n";
    char yaml[512];
    double got[2];
    for (int v = 0; v < 2; v++) {
        snprintf(yaml, sizeof yaml, base, v ? ", token_snr: 1.0e9" : "");
        gp_scenario sc;
        gp_result r;
        gp_error e = {""};
        gp_backend b;
        assert_int_equal(gp_scenario_load_string(yaml, strlen(yaml), "t", &sc, &e), 0);
        assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
        assert_int_equal(gp_run_scenario(&sc, &b, NULL, &r, &e), 0);
        got[v] = r.metric[GP_M_NORMALIZATION_REL_ERR];
        gp_backend_close(&b);
        gp_result_free(&r);
        gp_scenario_free(&sc);
    }
    assert_true(got[0] > 0.1);
    assert_true(got[1] < 1e-6);
}

/* batch.tokens {min, max, sequences: B}: each micro-batch's count is the sum of B lengths
 * drawn in [min, max]; with min = max the sum is exactly B x min. */
static void test_token_sequences(void **state)
{
    (void)state;
    gp_scenario *s;
    size_t n = load("batch: {microbatches: 3, tokens: {min: 100, max: 100, sequences: 7}}\n", &s);
    for (int k = 0; k < 3; k++)
        assert_int_equal(s[0].batch.tokens[k], 700);
    free_all(s, n);
    n = load("batch: {microbatches: 64, tokens: {min: 1, max: 9, sequences: 4}}\n", &s);
    for (int k = 0; k < 64; k++)
        assert_true(s[0].batch.tokens[k] >= 4 && s[0].batch.tokens[k] <= 36);
    free_all(s, n);
}

/* Keys swept together: one axis, values in step. */
static void test_zipped_keys(void **state)
{
    (void)state;
    gp_scenario *s;
    size_t n = load("name: z\nbatch: {tokens: {min: 8, max: 64}}\nsweep:\n"
                    "  [batch.accumulation_steps, batch.tokens.sequences]: [[1, 4], [4, 1]]\n"
                    "  reduction: [mean, sum]\n", &s);
    assert_int_equal(n, 4);
    assert_int_equal(s[2].batch.microbatches, 4);
    assert_int_equal(s[2].sweep.naxes, 2);
    assert_int_equal(s[2].sweep.nkeys, 3);
    assert_int_equal(s[2].sweep.axis[1], 0);
    assert_int_equal(s[2].sweep.axis[2], 1);
    assert_string_equal(s[2].name, "z[batch.accumulation_steps=4, batch.tokens.sequences=1, reduction=mean]");
    free_all(s, n);
    expect_error("sweep:\n  [seed, steps]: [[1, 2], [3]]\n", "sweep:2:27", "list of 2 values");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cross_order_names),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_markdown_table),
        cmocka_unit_test(test_signal_noise_model),
        cmocka_unit_test(test_normalization_follows_noise),
        cmocka_unit_test(test_token_sequences),
        cmocka_unit_test(test_zipped_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
