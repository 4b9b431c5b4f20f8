/* test_threads.c — threads inside a scenario (issue 16, item 2): every preset of the
 * default suite, and the ten-tensor scenarios of tests/data/threads (windows of several
 * tensors, several chunks of one tensor, coupled and independent steps, stochastic
 * rounding, a compared backend) and a distributed one (4 ranks, buckets across chunks,
 * no_sync false), run with 1, 2 and 3 threads splitting the scenario
 * (gp_run_scenario_ctl) must give byte-identical report.json and report.md text. The
 * progress counter must end at gp_run_work (the units the progress line divides by). */
#include <string.h>

#include "gp_test.h"

#include "harness/sources/gp_backend.h"
#include "harness/scenario/gp_presets.h"
#include "harness/run/gp_runner.h"
#include "reports/gp_report.h"

static const char *data_dir;

/* The JSON and Markdown reports of sc run on `threads` threads (cmp: --compare cpu). */
static void report_of(const gp_scenario *sc, int threads, int cmp, char **json, char **md)
{
    gp_error e = {""};
    gp_backend b, c;
    gp_result r;
    uint64_t done = 0;
    gp_run_ctl ctl = {threads, &done};
    if (gp_backend_open("cpu", &b, &e) != 0 || (cmp && gp_backend_open("cpu", &c, &e) != 0))
        fail_msg("backend: %s", e.msg);
    if (gp_run_scenario_ctl(sc, &ctl, &b, cmp ? &c : NULL, &r, &e) != 0)
        fail_msg("%s, %d threads: %s", sc->name, threads, e.msg);
    if (done != gp_run_work(sc))
        fail_msg("%s: progress counted %llu, gp_run_work says %llu", sc->name, (unsigned long long)done,
                 (unsigned long long)gp_run_work(sc));
    const gp_scenario *p = sc;
    gp_run_report rep = {&p, &r, 1, b.label, cmp ? c.label : NULL, NULL};
    *json = gp_report_json(&rep);
    *md = gp_report_markdown(&rep);
    assert_non_null(*json);
    assert_non_null(*md);
    gp_result_free(&r);
    gp_backend_close(&b);
    if (cmp)
        gp_backend_close(&c);
}

static void same_for_1_2_3(const gp_scenario *sc, int cmp)
{
    char *j1, *m1;
    report_of(sc, 1, cmp, &j1, &m1);
    for (int n = 2; n <= 3; n++) {
        char *j, *m;
        report_of(sc, n, cmp, &j, &m);
        if (strcmp(j, j1) != 0 || strcmp(m, m1) != 0)
            fail_msg("%s: the report with %d threads differs from the one with 1", sc->name, n);
        free(j);
        free(m);
    }
    free(j1);
    free(m1);
}

static void test_default_suite(void **state)
{
    (void)state;
    int n = 0;
    for (const gp_preset *p = gp_presets(); p->name; p++, n++) {
        gp_scenario sc;
        gp_error e = {""};
        if (gp_scenario_load_string(p->yaml, strlen(p->yaml), p->name, &sc, &e) != 0)
            fail_msg("%s: %s", p->name, e.msg);
        same_for_1_2_3(&sc, 0);
        gp_scenario_free(&sc);
    }
    printf("# %d presets: the same reports with 1, 2 and 3 threads\n", n);
    assert_true(n >= 10);
}

static void ten_tensors(const char *file, int cmp)
{
    char path[4096];
    gp_scenario sc;
    gp_error e = {""};
    snprintf(path, sizeof path, "%s/%s", data_dir, file);
    if (gp_scenario_load_file(path, &sc, &e) != 0)
        fail_msg("%s", e.msg);
    assert_int_equal(sc.ntensors, 10);
    same_for_1_2_3(&sc, cmp);
    gp_scenario_free(&sc);
}

static void test_ten_tensors(void **state)
{
    (void)state;
    ten_tensors("ten_tensors.yaml", 0);
}

static void test_ten_tensors_coupled(void **state)
{
    (void)state;
    ten_tensors("ten_tensors_coupled.yaml", 0);
}

/* With a compared backend the per-element comparisons and the first mismatch's record
 * run on the threads too. */
static void test_ten_tensors_compared(void **state)
{
    (void)state;
    ten_tensors("ten_tensors_coupled.yaml", 1);
}

/* Data parallelism: the ranks' buffers per thread, the collective per window. */
static void test_distributed(void **state)
{
    (void)state;
    char path[4096];
    gp_scenario sc;
    gp_error e = {""};
    snprintf(path, sizeof path, "%s/distributed.yaml", data_dir);
    if (gp_scenario_load_file(path, &sc, &e) != 0)
        fail_msg("%s", e.msg);
    assert_true(gp_scenario_distributed(&sc));
    same_for_1_2_3(&sc, 0);
    same_for_1_2_3(&sc, 1); /* with a compared backend */
    gp_scenario_free(&sc);
}

int main(int argc, char **argv)
{
    data_dir = argc > 1 ? argv[1] : "tests/data/threads";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ten_tensors),
        cmocka_unit_test(test_ten_tensors_coupled),
        cmocka_unit_test(test_ten_tensors_compared),
        cmocka_unit_test(test_distributed),
        cmocka_unit_test(test_default_suite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
