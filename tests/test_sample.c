/* test_sample.c — estimates at scale (issue 16, item 3): the scenario-level `sample: N`
 * over generated tensors. How N is spread over the tensors (by hand); a sampled element
 * is generated as the whole run generates it (gp_generate_at against gp_generate); the
 * loader's checks; the same report for 1 and 3 threads; and the coverage of the
 * stratified intervals against the exact value of the whole run over many seeds. */
#include <gsl/gsl_cdf.h>
#include <math.h>
#include <string.h>

#include "gp_test.h"

#include "harness/sources/gp_backend.h"
#include "harness/sources/gp_generate.h"
#include "harness/run/gp_runner.h"
#include "harness/sources/gp_sample.h"
#include "reports/gp_report.h"

static void load(const char *text, gp_scenario *sc)
{
    gp_error e = {""};
    if (gp_scenario_load_string(text, strlen(text), "test", sc, &e) != 0)
        fail_msg("load: %s", e.msg);
}

static const char three[] = "name: three\nseed: %d\n%s"
                            "tensors:\n"
                            "  - {name: a, size: 3000, grad: {dist: lognormal, scale: 1.0e-3, sigma: 1.0}}\n"
                            "  - {name: b, size: 2000, grad: {dist: normal, scale: 2.0e-2}}\n"
                            "  - {name: c, size: 1000, grad: {dist: laplace, scale: 5.0e-4}}\n"
                            "batch: {accumulation_steps: 16, tokens: [100, 100, 100, 100, 100, 100, 100, 100, "
                            "100, 100, 100, 100, 100, 100, 100, 30]}\n"
                            "reduction: mean\n"
                            "precision: {grad: bf16, accumulator: bf16}\n";

static void three_text(char *buf, size_t len, int seed, const char *extra)
{
    snprintf(buf, len, three, seed, extra);
}

/* ---- the coverage tests' shared steps ---- */

/* A coverage test's acceptance (docs/scenarios.md): if every interval claims 95% and the
 * claim holds, the count C of T intervals holding the exact value is stochastically larger
 * than Binomial(T, 0.95); accept C >= c_min, the smallest c with P(Binomial(T, 0.95) <=
 * c - 1) <= 1e-4 (GSL's binomial CDF; T = 300: c_min = 269), so a true claim fails with
 * probability at most 1e-4 per metric. */
static int coverage_cmin(int T)
{
    int cmin = 0;
    while (gsl_cdf_binomial_P((unsigned)cmin, 0.95, (unsigned)T) <= 1e-4) /* P(C <= cmin) */
        cmin++;
    return cmin; /* P(C <= cmin - 1) <= 1e-4 < P(C <= cmin) */
}

/* The template tmpl (printf arguments: seed, then extra keys) with `extra`, run whole into
 * rf and with `sample: 600` added into rs on b; fails the test on an error. Free both with
 * gp_result_free. */
static void run_whole_and_sampled(const gp_backend *b, const char *tmpl, int seed, const char *extra, gp_result *rf,
                                  gp_result *rs)
{
    char text[1400], keys[256];
    gp_scenario full, smp;
    gp_error e = {""};
    snprintf(text, sizeof text, tmpl, seed, extra);
    load(text, &full);
    snprintf(keys, sizeof keys, "sample: 600\n%s", extra);
    snprintf(text, sizeof text, tmpl, seed, keys);
    load(text, &smp);
    if (gp_run_scenario(&full, b, NULL, rf, &e) != 0 || gp_run_scenario(&smp, b, NULL, rs, &e) != 0)
        fail_msg("seed %d: %s", seed, e.msg);
    gp_scenario_free(&full);
    gp_scenario_free(&smp);
}

/* covered[j] += 1 when rs's interval of ms[j] holds rf's value; every ms[j] must have one. */
static void count_covered(const gp_result *rf, const gp_result *rs, const gp_metric *ms, int nm, int *covered,
                          int seed)
{
    for (int j = 0; j < nm; j++) {
        if (!rs->has_ci[ms[j]])
            fail_msg("seed %d: no interval for %s", seed, gp_metric_name(ms[j]));
        double v = rf->metric[ms[j]];
        covered[j] += rs->ci_lo[ms[j]] <= v && v <= rs->ci_hi[ms[j]];
    }
}

/* Prints each metric's count and requires it to reach coverage_cmin(T). */
static void assert_coverage(const char *what, const gp_metric *ms, int nm, const int *covered, int T)
{
    int cmin = coverage_cmin(T);
    for (int j = 0; j < nm; j++) {
        printf("# %s%s: %d of %d intervals hold the exact value (accept >= %d)\n", what, gp_metric_name(ms[j]),
               covered[j], T, cmin);
        assert_true(covered[j] >= cmin);
    }
}

/* n_h = max(min(M_h, 2), ceil(N M_h / M)), M = 6000 (gp_runner.h). */
static void test_allocation_by_hand(void **state)
{
    (void)state;
    struct { const char *sample; uint64_t n[3]; } cases[] = {
        {"sample: 600\n", {300, 200, 100}},   /* exact shares */
        {"sample: 7\n", {4, 3, 2}},           /* ceil(3.5), ceil(2.33), ceil(1.17) */
        {"sample: 1\n", {2, 2, 2}},           /* at least two units each */
        {"sample: 5999\n", {3000, 2000, 1000}}, /* ceil(2999.5) = 3000, ceil(1999.67), ceil(999.83) */
        {"sample: 6000\n", {3000, 2000, 1000}}, /* N >= M: everything */
        {"", {3000, 2000, 1000}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        gp_scenario sc;
        three_text(text, sizeof text, 1, cases[i].sample);
        load(text, &sc);
        for (size_t t = 0; t < 3; t++)
            if (gp_run_tensor_elements(&sc, t) != cases[i].n[t])
                fail_msg("'%s' tensor %zu: %llu elements, want %llu", cases[i].sample, t,
                         (unsigned long long)gp_run_tensor_elements(&sc, t), (unsigned long long)cases[i].n[t]);
        gp_scenario_free(&sc);
    }
    /* a tensor's own sample stays; the scenario's is spread over the others */
    gp_scenario sc;
    load("name: own\nsample: 100\ntensors:\n  - {name: a, size: 1000, sample: 10}\n  - {name: b, size: 3000}\n"
         "  - {name: c, size: 1000}\n", &sc);
    assert_int_equal(gp_run_tensor_elements(&sc, 0), 10);
    assert_int_equal(gp_run_tensor_elements(&sc, 1), 75);
    assert_int_equal(gp_run_tensor_elements(&sc, 2), 25);
    /* the work and memory limits count the sampled elements: 10^10 elements load */
    gp_scenario_free(&sc);
    load("name: huge\nsample: 100000\ntensors:\n  - {name: a, size: 2000000000}\n  - {name: b, size: 2000000000}\n"
         "  - {name: c, size: 2000000000}\n  - {name: d, size: 2000000000}\n  - {name: e, size: 2000000000}\n"
         "batch: {accumulation_steps: 64}\nsteps: 100\n", &sc);
    assert_int_equal(gp_run_work(&sc), 100ull * (100000ull * 64 + GP_RUN_STEP_OVERHEAD));
    gp_scenario_free(&sc);
}

static void test_loader_checks(void **state)
{
    (void)state;
    const char *bad[] = {
        "name: x\nsample: 0\n",
        "name: x\nsample: -3\n",
        "name: x\nsample: many\n",
        "name: x\ntensors:\n  - {name: a, size: 10, sample: 11}\n",
        "name: x\ntensors:\n  - name: a\n    grad: {values: [[1.0], [2.0]]}\n    sample: 1\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gp_scenario sc;
        gp_error e = {""};
        if (gp_scenario_load_string(bad[i], strlen(bad[i]), "bad", &sc, &e) == 0)
            fail_msg("loaded: %s", bad[i]);
        assert_non_null(strstr(e.msg, "sample"));
        printf("# %s\n", e.msg);
    }
    /* printed back */
    gp_scenario sc;
    load("name: x\nsample: 12345\n", &sc);
    char *y = gp_scenario_to_yaml(&sc);
    assert_non_null(strstr(y, "\nsample: 12345\n"));
    free(y);
    gp_scenario_free(&sc);
}

/* A sampled element is the element of the whole tensor: gp_generate_at(idx) equals
 * gp_generate at those indices, bit for bit, for each distribution. */
static void test_generate_at(void **state)
{
    (void)state;
    gp_dist d;
    memset(&d, 0, sizeof d);
    gp_dist_kind kinds[] = {GP_DIST_NORMAL, GP_DIST_LOGNORMAL, GP_DIST_LAPLACE, GP_DIST_PARETO};
    enum { M = 5000, N = 97 };
    static float all[M], some[N];
    uint64_t idx[N];
    gp_error e = {""};
    assert_int_equal(gp_sample_indices(42, 7, M, N, idx, &e), 0);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        d.kind = kinds[k];
        d.scale = 1e-3;
        d.sigma = 1.5;
        d.alpha = 3;
        d.sparsity = 0.1;
        d.neg_frac = 0.5;
        d.outlier_frac = 0.01;
        d.outlier_scale = 100;
        gp_generate(&d, 99, 12345, 0, M, all);
        gp_generate_at(&d, 99, 12345, idx, N, some);
        for (size_t j = 0; j < N; j++)
            gp_assert_bits(gp_f32_bits(some[j]), gp_f32_bits(all[idx[j]]), "kind %d element %llu", (int)kinds[k],
                           (unsigned long long)idx[j]);
    }
}

/* gp_generate draws Philox in blocks (vectorised) and gp_generate_at one element at a time:
 * equal at every index, bit for bit, over a range that is no multiple of the block and
 * whose counter crosses 2^32 (the high word changes inside a block). */
static void test_generate_blocks(void **state)
{
    (void)state;
    enum { M = 1003 };
    static float all[M], one[M];
    static uint64_t idx[M];
    gp_dist d;
    memset(&d, 0, sizeof d);
    d.kind = GP_DIST_NORMAL;
    d.scale = 1e-3;
    d.sparsity = 0.1;
    d.outlier_frac = 0.01;
    d.outlier_scale = 100;
    const uint64_t starts[] = {0, 5, (1ull << 32) - 300};
    for (size_t s0 = 0; s0 < sizeof starts / sizeof starts[0]; s0++) {
        for (size_t j = 0; j < M; j++)
            idx[j] = starts[s0] + j;
        gp_generate(&d, 0x123456789abcdefull, 777, starts[s0], M, all);
        gp_generate_at(&d, 0x123456789abcdefull, 777, idx, M, one);
        for (size_t j = 0; j < M; j++)
            gp_assert_bits(gp_f32_bits(all[j]), gp_f32_bits(one[j]), "element %llu", (unsigned long long)idx[j]);
    }
}

static char *report_json(const gp_scenario *sc, int threads)
{
    gp_error e = {""};
    gp_backend b;
    gp_result r;
    gp_run_ctl ctl = {threads, NULL};
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    if (gp_run_scenario_ctl(sc, &ctl, &b, NULL, &r, &e) != 0)
        fail_msg("run: %s", e.msg);
    const gp_scenario *p = sc;
    gp_run_report rep = {&p, &r, 1, b.label, NULL, NULL};
    char *j = gp_report_json(&rep);
    gp_result_free(&r);
    gp_backend_close(&b);
    return j;
}

static void test_threads_same_report(void **state)
{
    (void)state;
    char text[1024];
    gp_scenario sc;
    three_text(text, sizeof text, 5, "sample: 2000\n");
    load(text, &sc);
    char *a = report_json(&sc, 1), *b = report_json(&sc, 3);
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "\"sampling\""));
    free(a);
    free(b);
    gp_scenario_free(&sc);
}

/* Verdicts on estimates (docs/scenarios.md): the threshold inside the interval leaves
 * grad_rel_err_fullbatch undecided (no failure, the verdict at least warn, a note); below
 * the whole interval it fails; above it neither. The interval is the run's own, read
 * back, and the thresholds are placed relative to it. */
static void run_sampled(const char *extra, gp_result *r)
{
    char text[1400], more[400];
    snprintf(more, sizeof more, "sample: 600\n%s", extra);
    three_text(text, sizeof text, 3, more);
    gp_scenario sc;
    gp_error e = {""};
    gp_backend b;
    load(text, &sc);
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    if (gp_run_scenario(&sc, &b, NULL, r, &e) != 0)
        fail_msg("run: %s", e.msg);
    gp_notes notes;
    gp_report_notes(&sc, r, &notes);
    int found = 0;
    for (int i = 0; i < notes.n; i++)
        found |= strstr(notes.text[i], "the sample cannot decide") != NULL;
    assert_int_equal(found, r->undecided[GP_M_GRAD_REL_ERR_FULLBATCH]);
    gp_notes_free(&notes);
    gp_backend_close(&b);
    gp_scenario_free(&sc);
}

static void test_verdict_on_interval(void **state)
{
    (void)state;
    const gp_metric m = GP_M_GRAD_REL_ERR_FULLBATCH;
    gp_result r;
    char th[200];
    run_sampled("thresholds: {normalization_rel_err: 1.0, weight_rel_err: 1.0}\n", &r);
    assert_true(r.has_ci[m] && r.ci_lo[m] < r.metric[m] && r.metric[m] < r.ci_hi[m]);
    double lo = r.ci_lo[m], hi = r.ci_hi[m];
    gp_result_free(&r);
    snprintf(th, sizeof th, "thresholds: {normalization_rel_err: 1.0, weight_rel_err: 1.0, grad_rel_err_fullbatch: %.17g}\n",
             (lo + hi) / 2);
    run_sampled(th, &r);
    assert_true(r.undecided[m] && !r.failed[m] && r.verdict == GP_WARN);
    gp_result_free(&r);
    snprintf(th, sizeof th, "thresholds: {normalization_rel_err: 1.0, weight_rel_err: 1.0, grad_rel_err_fullbatch: %.17g}\n", lo * 0.99);
    run_sampled(th, &r);
    assert_true(!r.undecided[m] && r.failed[m] && r.verdict == GP_FAIL);
    gp_result_free(&r);
    snprintf(th, sizeof th, "thresholds: {normalization_rel_err: 1.0, weight_rel_err: 1.0, grad_rel_err_fullbatch: %.17g}\n", hi * 1.01);
    run_sampled(th, &r);
    assert_true(!r.undecided[m] && !r.failed[m]);
    gp_result_free(&r);
}

/* Global-norm clipping in a sampled run uses the estimated norm (docs/scenarios.md,
 * "What couples the tensors"); the gradient metrics are computed before clipping, so its
 * uncertainty does not touch their intervals, and the metrics after the step get none.
 * Checked: the same sampled run with and without `clip` (max_norm far below the norm,
 * about 1: the coefficient is < 1) has bit-identical estimates and intervals, scenario
 * and per tensor, while weight_rel_err (after the clipped step) is a different number. */
static void test_clip_leaves_intervals(void **state)
{
    (void)state;
    static const gp_metric est[] = {GP_M_GRAD_REL_ERR_FULLBATCH, GP_M_GRAD_REL_ERR_ROUNDING,
                                    GP_M_NORMALIZATION_REL_ERR,  GP_M_GRAD_NORM_RATIO,
                                    GP_M_ABSORBED_FRAC,          GP_M_UNDERFLOW_FRAC};
    gp_result a, c;
    run_sampled("", &a);
    run_sampled("clip: {max_norm: 1.0e-3}\n", &c);
    for (size_t k = 0; k < sizeof est / sizeof est[0]; k++) {
        gp_metric m = est[k];
        assert_int_equal(a.has_ci[m], c.has_ci[m]);
        assert_memory_equal(&a.metric[m], &c.metric[m], sizeof(double));
        assert_memory_equal(&a.ci_lo[m], &c.ci_lo[m], sizeof(double));
        assert_memory_equal(&a.ci_hi[m], &c.ci_hi[m], sizeof(double));
        for (size_t t = 0; t < a.ntensors; t++) {
            assert_int_equal(a.tensors[t].has_ci[m], c.tensors[t].has_ci[m]);
            assert_memory_equal(&a.tensors[t].metric[m], &c.tensors[t].metric[m], sizeof(double));
            assert_memory_equal(&a.tensors[t].ci_lo[m], &c.tensors[t].ci_lo[m], sizeof(double));
            assert_memory_equal(&a.tensors[t].ci_hi[m], &c.tensors[t].ci_hi[m], sizeof(double));
        }
    }
    assert_true(a.has_ci[GP_M_GRAD_REL_ERR_FULLBATCH]);
    assert_true(a.metric[GP_M_WEIGHT_REL_ERR] != c.metric[GP_M_WEIGHT_REL_ERR]);
    /* after the step: an interval without clipping, none with the estimated coefficient */
    assert_true(a.has_ci[GP_M_WEIGHT_REL_ERR] && a.has_ci[GP_M_STALE_UPDATE_FRAC]);
    assert_true(!c.has_ci[GP_M_WEIGHT_REL_ERR] && !c.has_ci[GP_M_STALE_UPDATE_FRAC]);
    gp_result_free(&a);
    gp_result_free(&c);
}

/* Coverage. For seeds s = 1..T the three tensors above (6000 elements, 16 bf16
 * micro-batches of unequal token counts into a bf16 accumulator, `mean`: absorption
 * and a normalization error) are run whole (the exact values of the metrics) and with
 * `sample: 600` (300 + 200 + 100 elements); each scenario-level interval claims 95%
 * coverage (stratified ratio estimator, docs/scenarios.md). Each seed draws a new
 * population and a new sample; if every claim holds, the count C of intervals holding
 * the exact value is a sum of T independent indicators each with probability >= 0.95,
 * which is stochastically larger than Binomial(T, 0.95). Accept C >= c_min, the
 * smallest c with P(Binomial(T, 0.95) <= c - 1) <= 1e-4 (GSL's binomial CDF; T = 300:
 * c_min = 269): a true claim fails the check with probability at most 1e-4 per metric,
 * at most 5e-4 for the five metrics together (union bound). The seeds are fixed, so the
 * run is reproducible (GP_TEST_SEED shifts them). */
static void test_coverage(void **state)
{
    (void)state;
    const int T = (int)gp_test_count("GP_COVERAGE_SEEDS", 300);
    uint64_t base = gp_test_seed(1000);
    const gp_metric ms[] = {GP_M_GRAD_REL_ERR_FULLBATCH, GP_M_GRAD_REL_ERR_ROUNDING, GP_M_NORMALIZATION_REL_ERR,
                            GP_M_GRAD_NORM_RATIO, GP_M_ABSORBED_FRAC};
    enum { NM = sizeof ms / sizeof ms[0] };
    int covered[NM] = {0};
    gp_error e = {""};
    gp_backend b;
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    double width = 0;
    for (int s = 0; s < T; s++) {
        gp_result rf, rs;
        int seed = (int)(base + (uint64_t)s);
        run_whole_and_sampled(&b, three, seed, "", &rf, &rs);
        assert_int_equal(rs.tensors[0].size, 300);
        assert_int_equal(rs.tensors[2].population, 1000);
        count_covered(&rf, &rs, ms, NM, covered, seed);
        if (s == 0) {
            printf("# seed %d: grad_rel_err_fullbatch %g exact, %g [%g, %g] sampled; absorbed_frac %g, "
                   "normalization_rel_err %g\n", seed, rf.metric[GP_M_GRAD_REL_ERR_FULLBATCH],
                   rs.metric[GP_M_GRAD_REL_ERR_FULLBATCH], rs.ci_lo[GP_M_GRAD_REL_ERR_FULLBATCH],
                   rs.ci_hi[GP_M_GRAD_REL_ERR_FULLBATCH], rf.metric[GP_M_ABSORBED_FRAC],
                   rf.metric[GP_M_NORMALIZATION_REL_ERR]);
            /* the metrics are not trivial: something is lost, something to estimate */
            assert_true(rf.metric[GP_M_ABSORBED_FRAC] > 1e-3 && rf.metric[GP_M_NORMALIZATION_REL_ERR] > 1e-3);
        }
        width += rs.ci_hi[GP_M_GRAD_REL_ERR_FULLBATCH] - rs.ci_lo[GP_M_GRAD_REL_ERR_FULLBATCH];
        gp_result_free(&rf);
        gp_result_free(&rs);
    }
    printf("# mean interval width of grad_rel_err_fullbatch: %g\n", width / T);
    assert_coverage("", ms, NM, covered, T);
    gp_backend_close(&b);
}

/* Coverage over several optimizer steps (docs/scenarios.md, "Estimates at scale"): the unit
 * is an element, and without clipping or a loss scaler nothing couples two elements, so an
 * element's whole trajectory (its gradients, its AdamW steps, its reference) is a fixed
 * function of the element and every metric that is a ratio of sums over elements and steps
 * is a ratio of population totals of per-element y_i, x_i: the interval's claim is the one
 * step's. Scenario: the three tensors above with weights, 4 bf16 micro-batches, 5 AdamW
 * steps on bf16 params with fp32 state (lr 1e-3: stale updates and a weight error), no
 * clipping; whole (the exact values) and with `sample: 600` under T seeds (each seed a new
 * population and a new sample). Acceptance as in test_coverage: if each claim holds, C is
 * stochastically larger than Binomial(T, 0.95); accept C >= c_min, the smallest c with
 * P(Binomial(T, 0.95) <= c - 1) <= 1e-4 (GSL; T = 300: c_min = 269), a true claim failing
 * with probability at most 1e-4 per metric (8e-4 for the eight metrics, union bound). */
static const char steps5[] = "name: five\nseed: %d\n%s"
                             "tensors:\n"
                             "  - {name: a, size: 3000, grad: {dist: lognormal, scale: 1.0e-3, sigma: 1.0}, "
                             "weight: {dist: normal, scale: 2.0e-2}}\n"
                             "  - {name: b, size: 2000, grad: {dist: normal, scale: 2.0e-2}, weight: {dist: normal, scale: 5.0e-2}}\n"
                             "  - {name: c, size: 1000, grad: {dist: laplace, scale: 5.0e-4}, weight: {dist: normal, scale: 1.0e-2}}\n"
                             "batch: {accumulation_steps: 4, tokens: [100, 100, 100, 30]}\n"
                             "reduction: mean\n"
                             "steps: 5\n"
                             "optimizer: {lr: 1.0e-3, param: bf16, state: fp32}\n";

/* T seeds (from base) of steps5 with the keys `extra`, whole and sampled: covered[j]
 * counts the intervals of ms[j] that hold the whole run's value. Both runs of every seed
 * must skip `skipped` steps; the first seed's values are printed and must be non-trivial
 * (stale updates and a weight error to estimate, absorbed_frac above absorbed_above). */
static void coverage_of_steps(const char *extra, uint64_t base, int skipped, double absorbed_above,
                              const gp_metric *ms, int nm, int *covered, int T)
{
    gp_error e = {""};
    gp_backend b;
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    for (int s = 0; s < T; s++) {
        gp_result rf, rs;
        int seed = (int)(base + (uint64_t)s);
        run_whole_and_sampled(&b, steps5, seed, extra, &rf, &rs);
        if (rf.metric[GP_M_SKIPPED_STEPS] != skipped || rs.metric[GP_M_SKIPPED_STEPS] != skipped)
            fail_msg("seed %d: skipped steps %g whole, %g sampled, not %d", seed, rf.metric[GP_M_SKIPPED_STEPS],
                     rs.metric[GP_M_SKIPPED_STEPS], skipped);
        count_covered(&rf, &rs, ms, nm, covered, seed);
        if (s == 0) {
            printf("# seed %d: weight_rel_err %g exact, %g [%g, %g] sampled; stale_update_frac %g exact, "
                   "%g [%g, %g] sampled\n", seed, rf.metric[GP_M_WEIGHT_REL_ERR], rs.metric[GP_M_WEIGHT_REL_ERR],
                   rs.ci_lo[GP_M_WEIGHT_REL_ERR], rs.ci_hi[GP_M_WEIGHT_REL_ERR], rf.metric[GP_M_STALE_UPDATE_FRAC],
                   rs.metric[GP_M_STALE_UPDATE_FRAC], rs.ci_lo[GP_M_STALE_UPDATE_FRAC],
                   rs.ci_hi[GP_M_STALE_UPDATE_FRAC]);
            assert_true(rf.metric[GP_M_STALE_UPDATE_FRAC] > 1e-2 && rf.metric[GP_M_STALE_UPDATE_FRAC] < 0.99);
            assert_true(rf.metric[GP_M_WEIGHT_REL_ERR] > 0 && rf.metric[GP_M_ABSORBED_FRAC] > absorbed_above);
        }
        gp_result_free(&rf);
        gp_result_free(&rs);
    }
    gp_backend_close(&b);
}

static void test_coverage_steps(void **state)
{
    (void)state;
    const int T = (int)gp_test_count("GP_COVERAGE_SEEDS", 300);
    const gp_metric ms[] = {GP_M_WEIGHT_REL_ERR,         GP_M_STALE_UPDATE_FRAC,     GP_M_M_REL_ERR,
                            GP_M_V_REL_ERR,              GP_M_GRAD_REL_ERR_FULLBATCH, GP_M_GRAD_REL_ERR_ROUNDING,
                            GP_M_NORMALIZATION_REL_ERR, GP_M_ABSORBED_FRAC};
    enum { NM = sizeof ms / sizeof ms[0] };
    int covered[NM] = {0};
    coverage_of_steps("precision: {grad: bf16, accumulator: bf16}\n", gp_test_seed(2000), 0, 1e-3, ms, NM, covered, T);
    assert_coverage("5 steps: ", ms, NM, covered, T);
}

/* The estimated clipping norm's interval (docs/scenarios.md, "What couples the tensors"):
 * T^ = sum_h (M_h/n_h) sum_{S_h} g^2 with its expansion-estimator interval, the norm
 * sqrt(T^). One step of the three tensors of test_coverage with `clip: {max_norm: 1e-3}`:
 * the whole run's exact T is its ss_full (the sum over every element of the exact
 * full-batch gradient squared; binary64 sums, relative error ~1e-15, far inside any
 * interval's width). Over T seeds, count sampled norm intervals holding sqrt(T), and
 * coefficient intervals holding min(1, 1e-3 / (sqrt(T) + 1e-6)) (the same event when
 * the coefficient is below 1: a monotone map). Acceptance as in test_coverage
 * (c_min = 269 for T = 300, 1e-4 per check). */
static void test_coverage_clip_norm(void **state)
{
    (void)state;
    const int T = (int)gp_test_count("GP_COVERAGE_SEEDS", 300);
    uint64_t base = gp_test_seed(3000);
    int cov_norm = 0, cov_coef = 0;
    gp_error e = {""};
    gp_backend b;
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    for (int s = 0; s < T; s++) {
        gp_result rf, rs;
        int seed = (int)(base + (uint64_t)s);
        run_whole_and_sampled(&b, three, seed, "clip: {max_norm: 1.0e-3}\n", &rf, &rs);
        assert_null(rf.clip_by_step);
        assert_non_null(rs.clip_by_step);
        const double *c = rs.clip_by_step;
        double norm = sqrt(rf.st.ss_full), coef = fmin(1.0, 1e-3 / (norm + 1e-6));
        assert_true(c[1] <= c[0] && c[0] <= c[2] && c[4] <= c[3] && c[3] <= c[5] && c[5] < 1);
        cov_norm += c[1] <= norm && norm <= c[2];
        cov_coef += c[4] <= coef && coef <= c[5];
        if (s == 0)
            printf("# seed %d: norm %g exact, %g [%g, %g] sampled; coefficient %g exact, %g [%g, %g]\n", seed, norm,
                   c[0], c[1], c[2], coef, c[3], c[4], c[5]);
        gp_result_free(&rf);
        gp_result_free(&rs);
    }
    int cmin = coverage_cmin(T);
    printf("# clipping norm: %d, coefficient: %d of %d intervals hold the exact value (accept >= %d)\n", cov_norm,
           cov_coef, T, cmin);
    assert_true(cov_norm >= cmin && cov_coef >= cmin);
    gp_backend_close(&b);
}

/* Coverage of the count estimates and the stored-gradient fractions: fp16 gradients of
 * three tensors, one tiny (subnormal and underflowing values), one huge (overflows, and
 * non-finite final gradients where one of its 4 micro-batches overflowed), one moderate,
 * accumulated in fp32, one step; whole and with `sample: 600` under T seeds. The counts
 * are totals over the population: X^ R^ with x = 1 per element (X^ = M exactly), the
 * interval X^ times R^'s (docs/scenarios.md). Acceptance as in test_coverage (c_min = 269
 * for T = 300; 4e-4 for the four metrics). */
static const char fp16three[] = "name: fp16\nseed: %d\n%s"
                                "tensors:\n"
                                "  - {name: a, size: 3000, grad: {dist: lognormal, scale: 2.0e-5, sigma: 1.5}}\n"
                                "  - {name: b, size: 2000, grad: {dist: lognormal, scale: 1.0e+5, sigma: 1.0}}\n"
                                "  - {name: c, size: 1000, grad: {dist: normal, scale: 1.0e-3}}\n"
                                "batch: {accumulation_steps: 4, tokens: [100, 100, 100, 30]}\n"
                                "reduction: mean\n"
                                "precision: {grad: fp16, accumulator: fp32}\n";

static void test_coverage_counts(void **state)
{
    (void)state;
    const int T = (int)gp_test_count("GP_COVERAGE_SEEDS", 300);
    uint64_t base = gp_test_seed(4000);
    const gp_metric ms[] = {GP_M_OVERFLOW_COUNT, GP_M_NONFINITE_COUNT, GP_M_SUBNORMAL_FRAC, GP_M_UNDERFLOW_FRAC};
    enum { NM = sizeof ms / sizeof ms[0] };
    int covered[NM] = {0};
    gp_error e = {""};
    gp_backend b;
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    for (int s = 0; s < T; s++) {
        gp_result rf, rs;
        int seed = (int)(base + (uint64_t)s);
        run_whole_and_sampled(&b, fp16three, seed, "", &rf, &rs);
        count_covered(&rf, &rs, ms, NM, covered, seed);
        if (s == 0) {
            printf("# seed %d: overflow_count %g exact, %g [%g, %g] sampled; subnormal_frac %g exact, %g [%g, %g]\n",
                   seed, rf.metric[GP_M_OVERFLOW_COUNT], rs.metric[GP_M_OVERFLOW_COUNT], rs.ci_lo[GP_M_OVERFLOW_COUNT],
                   rs.ci_hi[GP_M_OVERFLOW_COUNT], rf.metric[GP_M_SUBNORMAL_FRAC], rs.metric[GP_M_SUBNORMAL_FRAC],
                   rs.ci_lo[GP_M_SUBNORMAL_FRAC], rs.ci_hi[GP_M_SUBNORMAL_FRAC]);
            /* not trivial: each count and fraction has events to estimate */
            for (int j = 0; j < NM; j++)
                assert_true(rf.metric[ms[j]] > 0);
        }
        gp_result_free(&rf);
        gp_result_free(&rs);
    }
    assert_coverage("fp16: ", ms, NM, covered, T);
    gp_backend_close(&b);
}

/* Coverage over optimizer steps under a dynamic loss scaler (docs/scenarios.md: the
 * intervals hold when the sample's skipped steps and scales are the whole run's). The
 * scale starts at 2^36, where every fp16 gradient of the three tensors overflows (the
 * smallest, about 1e-3 e^-4 = 2e-5 in tensor a, scales to 1e6 > 65504; tensor b's normal
 * values need |g| < 1e-6 to stay finite): step 1 is skipped in the whole run and in any
 * sample, and the scale backs off by 2^-20 to 2^16, where the largest scaled gradients
 * (about 2e-2 x 3.5 x 2^16 = 4600 in tensor b) stay below 65504: steps 2..5 are taken in
 * both. The test checks that premise per seed (one skipped step on both sides), then
 * counts intervals as test_coverage_steps does (the same scenario with fp16 gradients
 * into fp32 and the scaler; acceptance as in test_coverage: c_min = 269 for T = 300, 1e-4
 * per metric). This runs the per-element totals a sampled run keeps per step under a loss
 * scaler (el_step, added to el_tot when the step is kept). */
static void test_coverage_loss_scale(void **state)
{
    (void)state;
    const int T = (int)gp_test_count("GP_COVERAGE_SEEDS", 300);
    const gp_metric ms[] = {GP_M_WEIGHT_REL_ERR, GP_M_STALE_UPDATE_FRAC, GP_M_M_REL_ERR, GP_M_V_REL_ERR,
                            GP_M_GRAD_REL_ERR_FULLBATCH};
    enum { NM = sizeof ms / sizeof ms[0] };
    int covered[NM] = {0};
    coverage_of_steps("precision: {grad: fp16, accumulator: fp32}\n"
                      "loss_scale: {mode: dynamic, init: 68719476736, backoff: 9.5367431640625e-07}\n",
                      gp_test_seed(5000), 1, -1.0, ms, NM, covered, T);
    assert_coverage("loss scaler, 5 steps: ", ms, NM, covered, T);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocation_by_hand),
        cmocka_unit_test(test_loader_checks),
        cmocka_unit_test(test_generate_at),
        cmocka_unit_test(test_generate_blocks),
        cmocka_unit_test(test_threads_same_report),
        cmocka_unit_test(test_verdict_on_interval),
        cmocka_unit_test(test_clip_leaves_intervals),
        cmocka_unit_test(test_coverage),
        cmocka_unit_test(test_coverage_steps),
        cmocka_unit_test(test_coverage_clip_norm),
        cmocka_unit_test(test_coverage_counts),
        cmocka_unit_test(test_coverage_loss_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
