/* test_sweep.c — `sweep:` in scenario files (harness/gp_scenario.h): expansion order and
 * names, keys created where the file does not write them, list items, errors pointing
 * at the sweep's value, limits, and the Markdown table of a sweep. */
#include <string.h>

#include "gp_test.h"

#include "harness/gp_runner.h"
#include "harness/gp_scenario.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cross_order_names),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_markdown_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
