/* test_distributed.c — the simulated collectives (docs/distributed.md), end to end
 * through gp_run_scenario and the report writers. Every expected value is counted by
 * hand from the documented order (harness/run/gp_collective.h) and written next to its check. */
#include "gp_test.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "../harness/sources/gp_backend.h"
#include "../harness/run/gp_attrib.h"
#include "../harness/run/gp_collective.h"
#include "../harness/run/gp_runner.h"
#include "../harness/scenario/gp_scenario.h"
#include "../reports/gp_html.h"
#include "../reports/gp_junit.h"
#include "../reports/gp_report.h"

static gp_backend cpu;

static void load(const char *text, gp_scenario *s)
{
    gp_error e = {""};
    if (gp_scenario_load_string(text, strlen(text), "test", s, &e) != 0) {
        fprintf(stderr, "load: %s\n", e.msg);
        fail();
    }
}

static void run(const char *text, gp_scenario *s, gp_result *r)
{
    gp_error e = {""};
    load(text, s);
    if (gp_run_scenario(s, &cpu, NULL, r, &e) != 0) {
        fprintf(stderr, "run: %s\n", e.msg);
        fail();
    }
}

/* Every report format of one scenario, concatenated (JSON, Markdown, JUnit, HTML: none
 * of them holds timing when written this way; the CLI adds timing separately). */
static char *reports(const gp_scenario *s, const gp_result *r)
{
    const gp_scenario *sp = s;
    gp_run_report rr = {&sp, r, 1, "cpu", NULL, NULL};
    char *json = gp_report_json(&rr), *md = gp_report_markdown(&rr);
    json_error_t je;
    json_t *root = json_loads(json, 0, &je);
    gp_error e = {""};
    char *junit = gp_report_junit(root, &e), *html = gp_report_html(root, &e);
    assert_non_null(junit);
    assert_non_null(html);
    size_t n = strlen(json) + strlen(md) + strlen(junit) + strlen(html) + 1;
    char *all = malloc(n);
    snprintf(all, n, "%s%s%s%s", json, md, junit, html);
    free(json);
    free(md);
    free(junit);
    free(html);
    json_decref(root);
    return all;
}

/* world_size 1 in the accumulator's dtype is one process: every report byte-identical to
 * the scenario without `distributed`, whatever the collective, average or no_sync say
 * (with one rank there is nothing to add: the collective is the identity). */
static void world_one_is_one_process(void **state)
{
    (void)state;
    static const char *const base[] = {
        "name: w\ntensors: [{name: a, size: 3000, grad: {dist: lognormal, scale: 1.0e-5}}]\n"
        "batch: {tokens: [512, 17, 300, 64]}\nreduction: mean\nprecision: {grad: bf16, accumulator: bf16}\n",
        "name: w\ntensors: [{name: a, size: 20000}, {name: b, size: 5}]\nprecision: {grad: fp16, accumulator: fp32}\n"
        "loss_scale: {mode: dynamic}\nclip: {max_norm: 1.0}\nsteps: 3\n",
        "name: w\ntensors: [{name: a, size: 100, grad: {dist: normal, scale: 1.0, token_snr: 0.5}}]\n"
        "batch: {tokens: {min: 10, max: 100}}\nprecision: {grad: bf16, accumulator: bf16, rounding: stochastic}\n",
    };
    static const char *const dist[] = {
        "distributed: {world_size: 1}\n",
        "distributed: {world_size: 1, collective: tree, average: post, no_sync: false}\n",
        "distributed: {world_size: 1, collective: reduce_scatter, average: op, bucket_elements: 7}\n",
    };
    for (size_t i = 0; i < sizeof base / sizeof *base; i++)
        for (size_t j = 0; j < sizeof dist / sizeof *dist; j++) {
            char text[1024];
            snprintf(text, sizeof text, "%s%s", base[i], dist[j]);
            gp_scenario a, b;
            gp_result ra, rb;
            run(base[i], &a, &ra);
            run(text, &b, &rb);
            char *x = reports(&a, &ra), *y = reports(&b, &rb);
            if (strcmp(x, y) != 0) {
                fprintf(stderr, "scenario %zu with %s: reports differ\n", i, dist[j]);
                fail();
            }
            free(x);
            free(y);
            gp_result_free(&ra);
            gp_result_free(&rb);
            gp_scenario_free(&a);
            gp_scenario_free(&b);
        }
}

/* bf16 ring all-reduce over 8 ranks, one micro-batch each, 8 elements: every rank holds
 * 2^-9 (m = 2^-9, one token) except rank 3, which holds 1.0 (512 tokens of 2^-9; reduction
 * sum: x = n m). The bucket is the tensor: chunk q = element q (ceil(8/8) = 1), whose sum
 * starts at rank q + 1 (gp_coll_ring_rank). Rank 3 comes at position p = (2 - q) mod 8.
 * Before it, p values of 2^-9 add exactly (p 2^-9, 3 bits). Then 1 + p 2^-9 rounds to
 * bf16 (8 bits: ulp(1) = 2^-7 = 4 units of 2^-9): p = 0, 1, 2 -> 1 (p = 2 is a tie, to
 * even); 3, 4, 5 -> 1 + 2^-7; 6 (tie: 1 + 1.5 ulp -> the even 1 + 2 ulp), 7 -> 1 + 2^-6.
 * The remaining 7 - p addends of 2^-9 are below half an ulp: all absorbed. So 28 of the
 * 56 additions are absorbed (sum over p of 7 - p); the final errors, in units of 2^-9,
 * against the exact 519: -7, -7, -7, -3, -3, -3, +1, +1 (average post: then / 8, exact).
 * collective_rel_err = sqrt(sum e^2) / ||g_same|| = sqrt(176) 2^-12 / (sqrt(8) 519 2^-12)
 * = sqrt(22) / 519. Its absorption part: each absorbed addend loses 2^-9 / 8, element q
 * loses 7 - p of them: sqrt(140) 2^-12; rounding part: the 1.0 addition's error
 * 0,-1,-2,+1,0,-1,+2,+1 (units 2^-9): sqrt(12) 2^-12; both over ||g_full|| = sqrt(8) 519
 * 2^-9 (fullbatch sum). The ranks' local additions (0 + x, 64 of them) are exact. */
static void ring8_bf16_hand(void **state)
{
    (void)state;
    const char *text = "name: ring8\ntensors: [{name: g, size: 8, grad: {dist: constant, scale: 1.953125e-3, sign: 0}}]\n"
                       "batch: {microbatches: 1}\nreduction: sum\nfullbatch: sum\n"
                       "precision: {grad: bf16, accumulator: bf16}\n"
                       "distributed: {world_size: 8, average: post, tokens: [1, 1, 1, 512, 1, 1, 1, 1]}\n";
    gp_scenario s;
    gp_result r;
    run(text, &s, &r);
    assert_int_equal(r.st.coll.adds_nonzero, 56);
    assert_int_equal(r.st.coll.absorbed, 28);
    assert_int_equal(r.st.coll.hops, 56);   /* 7 hops x 8 elements */
    assert_int_equal(r.st.adds_nonzero, 120); /* + the 64 local ones */
    assert_int_equal(r.st.absorbed, 28);
    assert_int_equal(r.st.coll.overflow, 0);
    /* the norms: a few binary64 roundings of exact small integers times powers of two, and
     * two square roots: relative error below 1e-15 (each rounding 2^-53) */
    double want = sqrt(22.0) / 519.0;
    assert_true(fabs(r.metric[GP_M_COLLECTIVE_REL_ERR] - want) <= 1e-15 * want);
    assert_true(fabs(r.metric[GP_M_GRAD_REL_ERR_ROUNDING] - want) <= 1e-15 * want); /* all of it */
    assert_true(fabs(r.metric[GP_M_ABSORBED_FRAC] - 28.0 / 120.0) <= 1e-16);
    double gf = sqrt(8.0) * 519.0 * 8.0; /* ||g_full|| in units of 2^-12 */
    assert_true(fabs(r.coll_loss[GP_MECH_ABSORPTION] - sqrt(140.0) / gf) <= 1e-15 * sqrt(140.0) / gf);
    assert_true(fabs(r.coll_loss[GP_MECH_ROUNDING] - sqrt(12.0) / gf) <= 1e-15 * sqrt(12.0) / gf);
    /* the reports say it */
    char *all = reports(&s, &r);
    assert_non_null(strstr(all, "\"collective_rel_err\""));
    assert_non_null(strstr(all, "ring all-reduce over 8 ranks in bf16"));
    assert_non_null(strstr(all, "28 of 56 additions absorbed"));
    free(all);
    gp_result_free(&r);
    gp_scenario_free(&s);
}

/* The collective's additions run on the backend under test: a table whose bf16 add
 * truncates (the CPU emulation asked for RTZ whenever the accumulator is bf16) on the
 * ring8 case above. Truncating, 1 + p 2^-9 becomes 1 for p < 4 and 1 + 2^-7 for p >= 4
 * (exact at 4), the later 2^-9 addends are still all absorbed (28 of 56): errors, in
 * units of 2^-9, -7 four times and -3 four times: sum of squares 232, collective_rel_err
 * = sqrt(232) / (sqrt(8) 519) = sqrt(29) / 519 instead of sqrt(22) / 519 for RNE. */
static gp_backend cpu_for_table;
static int truncating_accumulate(const gp_plugin_accumulate_args *a)
{
    gp_plugin_accumulate_args b = *a;
    if (b.acc_format == GP_PLUGIN_BF16)
        b.rounding = GP_PLUGIN_RTZ;
    return cpu_for_table.ops->accumulate(&b);
}
static int table_unscale(gp_plugin_unscale_args *a)
{
    return cpu_for_table.ops->unscale(a);
}
static int table_adamw(const gp_plugin_adamw_args *a)
{
    return cpu_for_table.ops->adamw(a);
}

static void plugin_add_is_judged(void **state)
{
    (void)state;
    static gp_plugin table = {GP_PLUGIN_ABI_VERSION, "truncating-bf16", GP_PLUGIN_HOST, truncating_accumulate,
                              table_unscale, table_adamw, NULL, NULL, NULL, NULL};
    gp_error e = {""};
    gp_backend tb;
    cpu_for_table = cpu;
    assert_int_equal(gp_backend_from_table(&table, &tb, &e), 0);
    const char *text = "name: ring8\ntensors: [{name: g, size: 8, grad: {dist: constant, scale: 1.953125e-3, sign: 0}}]\n"
                       "batch: {microbatches: 1}\nreduction: sum\nfullbatch: sum\n"
                       "precision: {grad: bf16, accumulator: bf16}\n"
                       "distributed: {world_size: 8, average: post, tokens: [1, 1, 1, 512, 1, 1, 1, 1]}\n";
    gp_scenario s;
    gp_result r;
    load(text, &s);
    assert_int_equal(gp_run_scenario(&s, &tb, NULL, &r, &e), 0);
    assert_int_equal(r.st.coll.absorbed, 28);
    double want = sqrt(29.0) / 519.0; /* relative error of the norms: below 1e-15 as above */
    assert_true(fabs(r.metric[GP_M_COLLECTIVE_REL_ERR] - want) <= 1e-15 * want);
    gp_result_free(&r);
    gp_scenario_free(&s);
    gp_backend_close(&tb);
}

/* The ABI's `microbatch` is the index of the micro-batch in the accumulation window, from
 * 0 (kernels/gp_plugin_abi.h): on every rank too, not the global index r K + k. 4 ranks
 * of K = 3 micro-batches, 2 steps, one chunk: the local additions (grad fp32 into a bf16
 * accumulator; the collective's hops add bf16 to bf16 and are not counted here) are
 * 4 x 2 = 8 windows, each passing 0, 1, 2 once. */
static gp_backend cpu_for_mb;
static long mb_seen[64];
static int mb_recording_accumulate(const gp_plugin_accumulate_args *a)
{
    if (a->grad_format == GP_PLUGIN_FP32 && a->acc_format == GP_PLUGIN_BF16)
        mb_seen[a->microbatch < 63 ? a->microbatch : 63]++;
    return cpu_for_mb.ops->accumulate(a);
}
static int mb_unscale(gp_plugin_unscale_args *a)
{
    return cpu_for_mb.ops->unscale(a);
}
static int mb_adamw(const gp_plugin_adamw_args *a)
{
    return cpu_for_mb.ops->adamw(a);
}

static void microbatch_is_window_index(void **state)
{
    (void)state;
    static gp_plugin table = {GP_PLUGIN_ABI_VERSION, "mb-recording", GP_PLUGIN_HOST, mb_recording_accumulate,
                              mb_unscale, mb_adamw, NULL, NULL, NULL, NULL};
    gp_error e = {""};
    gp_backend tb;
    cpu_for_mb = cpu;
    memset(mb_seen, 0, sizeof mb_seen);
    assert_int_equal(gp_backend_from_table(&table, &tb, &e), 0);
    const char *text = "name: mb\ntensors: [{name: g, size: 16}]\nsteps: 2\nbatch: {microbatches: 3, tokens: 5}\n"
                       "precision: {grad: fp32, accumulator: bf16}\n"
                       "distributed: {world_size: 4, reduce_dtype: bf16}\n";
    gp_scenario s;
    gp_result r;
    load(text, &s);
    assert_int_equal(gp_run_scenario(&s, &tb, NULL, &r, &e), 0);
    for (int k = 0; k < 64; k++)
        assert_int_equal(mb_seen[k], k < 3 ? 8 : 0);
    gp_result_free(&r);
    gp_scenario_free(&s);
    gp_backend_close(&tb);
}

/* fp16 all-reduce of 8 ranks' gradients of 60000 (one token each; token_mean: x = W S / N
 * = 8 * 60000 / 8). Without pre-division (average: post) the ring's first hop makes 120000
 * > 65504: inf, one overflow per element (the later hops add to inf and are counted where
 * it arose); every final gradient is infinite, the verdict fails naming overflow. Divided
 * by 8 first (DDP's default, average: pre), the partial sums stay at most 60000 plus
 * roundings of at most half an ulp (16) per hop: below 65504, no overflow. */
static void fp16_overflow_without_predivide(void **state)
{
    (void)state;
    const char *fmt = "name: fp16-ar\ntensors: [{name: g, size: 64, grad: {dist: constant, scale: 60000.0, sign: 0}}]\n"
                      "batch: {microbatches: 1, tokens: 1}\nprecision: {grad: fp16, accumulator: fp16}\n"
                      "distributed: {world_size: 8, reduce_dtype: fp16, average: %s}\n";
    char text[512];
    gp_scenario s;
    gp_result r;
    snprintf(text, sizeof text, fmt, "post");
    run(text, &s, &r);
    assert_int_equal(r.st.coll.overflow, 64);
    assert_int_equal(r.st.nonfinite, 64);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_OVERFLOW);
    char *all = reports(&s, &r);
    assert_non_null(strstr(all, "the collective overflowed fp16 64 times"));
    assert_non_null(strstr(all, "dividing by the world size before the sum (average: pre) keeps them in range"));
    free(all);
    gp_result_free(&r);
    gp_scenario_free(&s);
    snprintf(text, sizeof text, fmt, "pre");
    run(text, &s, &r);
    assert_int_equal(r.st.coll.overflow, 0);
    assert_int_equal(r.st.overflow, 0);
    assert_int_equal(r.st.nonfinite, 0);
    all = reports(&s, &r);
    assert_null(strstr(all, "overflowed"));
    free(all);
    gp_result_free(&r);
    gp_scenario_free(&s);
}

/* Missing no_sync with a bf16 collective, by hand. Two ranks, two micro-batches, one
 * element, m = 2^-9, reduction sum (x = n m), average post (sum then / 2, exact), ring
 * (the element's chunk 0 starts at rank 1). Rank 0: a0 = 1 (512 tokens), a1 = 2^-9 (1);
 * rank 1: b0 = b1 = 2^-8 (2 tokens). g_same = (1 + 2^-9 + 2^-7) / 2 = 517 2^-10.
 * Correct loop (no_sync: true): rank 0 adds 1 + 2^-9 -> 1 (ulp(1) = 2^-7 in bf16, half
 * of it 2^-8 > 2^-9: absorbed, -2^-9); rank 1: 2^-7 exact; the
 * hop 2^-7 + 1 = 1 + 2^-7 exact; / 2. Error -2^-9 / 2 = -1 2^-10: grad_rel_err_rounding
 * 1/517, collective exact (collective_rel_err 0), 1 of 5 additions absorbed.
 * Without no_sync: micro-batch 0: ranks hold 1 and 2^-8, the hop 2^-8 + 1 = 1 + 2^-8 is a
 * tie -> 1 (-2^-8, /2: -2 2^-10); R = 0.5. Micro-batch 1: rank 0: 0.5 + 2^-9 is a tie at
 * ulp(0.5) = 2^-8 -> 0.5 (absorbed, -2^-9, weight 1/2: -1 2^-10); rank 1: 0.5 + 2^-8
 * exact; the hop (0.5 + 2^-8) + 0.5 = 1 + 2^-8 -> 1 again (-2 2^-10); / 2 = 0.5.
 * Error -5 2^-10: grad_rel_err_rounding 5/517, 4/517 more than the correct loop, all of
 * it the collective's (collective_rel_err 4/517); 1 of 6 additions absorbed. */
static void missing_no_sync_hand(void **state)
{
    (void)state;
    const char *fmt = "name: nosync\ntensors: [{name: g, size: 1, grad: {dist: constant, scale: 1.953125e-3, sign: 0}}]\n"
                      "batch: {microbatches: 2}\nreduction: sum\nfullbatch: sum\n"
                      "precision: {grad: bf16, accumulator: bf16}\n"
                      "distributed: {world_size: 2, average: post, no_sync: %s, tokens: [[512, 1], [2, 2]]}\n";
    char text[512];
    gp_scenario s;
    gp_result good, bad;
    snprintf(text, sizeof text, fmt, "true");
    run(text, &s, &good);
    gp_scenario_free(&s);
    snprintf(text, sizeof text, fmt, "false");
    run(text, &s, &bad);
    gp_scenario_free(&s);
    /* one element: each ratio is |error| / |g_same| of two exact binary64 values, one division */
    assert_true(fabs(good.metric[GP_M_GRAD_REL_ERR_ROUNDING] - 1.0 / 517.0) <= 1e-16);
    assert_true(fabs(bad.metric[GP_M_GRAD_REL_ERR_ROUNDING] - 5.0 / 517.0) <= 1e-16);
    assert_true(good.metric[GP_M_COLLECTIVE_REL_ERR] == 0.0);
    assert_true(fabs(bad.metric[GP_M_COLLECTIVE_REL_ERR] - 4.0 / 517.0) <= 1e-16);
    assert_int_equal(good.st.absorbed, 1);
    assert_int_equal(good.st.adds_nonzero, 5);
    assert_int_equal(bad.st.absorbed, 1);
    assert_int_equal(bad.st.adds_nonzero, 6);
    assert_int_equal(bad.st.coll.hops, 2); /* one hop per collective, two collectives */
    /* the run without no_sync carries the correct loop's figures: 1/517 and 0 */
    assert_true(bad.has_no_sync_twin && !good.has_no_sync_twin);
    assert_true(fabs(bad.twin_rel_err_rounding - 1.0 / 517.0) <= 1e-16);
    assert_true(bad.twin_collective_rel_err == 0.0);
    gp_result_free(&good);
    gp_result_free(&bad);
}

/* Per-rank token normalization against the global one (4 ranks, uneven token counts,
 * independent lognormal micro-batches). Global (all-reduced N): each rank writes
 * W S_rk / N and the average is (1/W) sum W S / N = sum S / N = g_full: the exact
 * references are equal, normalization_rel_err is exactly 0. Per rank: each rank divides by
 * its own N_r, so rank 3's 12 tokens weigh as much as rank 0's 992: the error is of the
 * order of the gradient itself (independent draws), far above 0.1. */
static void rank_vs_global_normalization(void **state)
{
    (void)state;
    const char *fmt = "name: norm\ntensors: [{name: g, size: 512, grad: {dist: lognormal, scale: 1.0e-3}}]\n"
                      "batch: {microbatches: 2}\n"
                      "distributed: {world_size: 4, normalize: %s, tokens: [[512, 480], [17, 64], [512, 512], [3, 9]]}\n";
    char text[512];
    gp_scenario s;
    gp_result r;
    snprintf(text, sizeof text, fmt, "global");
    run(text, &s, &r);
    assert_true(r.metric[GP_M_NORMALIZATION_REL_ERR] == 0.0); /* (1/W) sum W S / N = sum S / N exactly */
    gp_result_free(&r);
    gp_scenario_free(&s);
    snprintf(text, sizeof text, fmt, "rank");
    run(text, &s, &r);
    /* independent lognormal draws per micro-batch: the per-rank means weight rank 3's 12
     * tokens like rank 0's 992; the error is of the order of the gradient itself */
    assert_true(r.metric[GP_M_NORMALIZATION_REL_ERR] > 0.1);
    gp_result_free(&r);
    gp_scenario_free(&s);
}

/* An fp32 collective of exactly representable partial sums is exact, whatever the
 * order: constant gradients +-2^-4 (random signs), token counts 1..1000, reduction sum:
 * every x = +-n 2^-4 has at most 10 significant bits and is a multiple of 2^-4; a partial
 * sum of at most 8 ranks x 4 micro-batches is a multiple of 2^-4 below 32 000 x 2^-4 <
 * 2^11, so it needs at most 15 bits: exact in fp32 (24). Divisions by a power of two
 * (W and the predivide are powers of two) are exact. So the collective loses nothing
 * (collective_rel_err = 0 exactly, grad_rel_err_rounding = 0), for every collective,
 * average, bucket and no_sync drawn here (seeded: GP_TEST_SEED). ACC is the accumulator
 * (fp32; the check fails with a narrower one). */
#define EXACT_ACC "fp32"
static void fp32_exact_partial_sums(void **state)
{
    (void)state;
    uint64_t seed = gp_test_seed(15);
    static const char *const coll[] = {"ring", "tree", "reduce_scatter"};
    static const char *const avg[] = {"pre", "post", "op"};
    for (int it = 0; it < 24; it++) {
        int W = 1 << (1 + (int)(gp_test_next(&seed) % 3)), K = 1 + (int)(gp_test_next(&seed) % 4);
        char tok[512] = "", text[1024];
        size_t used = 0;
        for (int r = 0; r < W; r++) {
            used += (size_t)snprintf(tok + used, sizeof tok - used, "%s[", r ? ", " : "");
            for (int k = 0; k < K; k++)
                used += (size_t)snprintf(tok + used, sizeof tok - used, "%s%d", k ? ", " : "",
                                         1 + (int)(gp_test_next(&seed) % 1000));
            used += (size_t)snprintf(tok + used, sizeof tok - used, "]");
        }
        const char *a = avg[gp_test_next(&seed) % 3];
        snprintf(text, sizeof text,
                 "name: exact\ntensors: [{name: g, size: 200, grad: {dist: constant, scale: 0.0625, sign: 0.5}}]\n"
                 "batch: {microbatches: %d}\nreduction: sum\nfullbatch: sum\nprecision: {accumulator: " EXACT_ACC "}\n"
                 "distributed: {world_size: %d, collective: %s, average: %s, %s no_sync: %s, bucket_elements: %d, "
                 "tokens: [%s]}\n",
                 K, W, coll[gp_test_next(&seed) % 3], a, strcmp(a, "pre") == 0 ? "predivide: 2," : "",
                 gp_test_next(&seed) % 2 ? "true" : "false", 1 + (int)(gp_test_next(&seed) % 300), tok);
        gp_scenario s;
        gp_result r;
        run(text, &s, &r);
        if (r.metric[GP_M_COLLECTIVE_REL_ERR] != 0.0 || r.metric[GP_M_GRAD_REL_ERR_ROUNDING] != 0.0 ||
            r.st.coll.absorbed || r.st.coll.overflow) {
            fprintf(stderr, "not exact (collective_rel_err %a): %s\n", r.metric[GP_M_COLLECTIVE_REL_ERR], text);
            fail();
        }
        gp_result_free(&r);
        gp_scenario_free(&s);
    }
}

/* The ring order as documented: chunk q starts at rank q + 1 and ends at rank q. */
static void ring_order_documented(void **state)
{
    (void)state;
    for (int W = 1; W <= 9; W++)
        for (int q = 0; q < W; q++) {
            assert_int_equal(gp_coll_ring_rank(W, q, 0), (q + 1) % W);
            assert_int_equal(gp_coll_ring_rank(W, q, W - 1), q);
        }
    uint64_t pos;
    assert_int_equal(gp_coll_bucket(10, 25, 8, &pos), 8); /* bucket [8, 16) */
    assert_int_equal(pos, 2);
    assert_int_equal(gp_coll_bucket(24, 25, 8, &pos), 1); /* the last bucket: [24, 25) */
    assert_int_equal(gp_coll_chunk(5, 8, 3), 1);           /* chunks of ceil(8/3) = 3 */
    /* FSDP's predivide factor for W = 8: f = 1 -> 2 -> 4 (8/4 = 2 is not > 4): 4, post 2 */
    gp_scenario s;
    load("distributed: {world_size: 8, collective: reduce_scatter}\n", &s);
    double pre, post;
    gp_coll_factors(&s, &pre, &post);
    assert_true(pre == 4.0 && post == 2.0);
    gp_scenario_free(&s);
}

/* Bad distributed keys: one line naming file:line:column. */
static void bad_keys(void **state)
{
    (void)state;
    static const struct { const char *text, *msg; } cases[] = {
        {"distributed: {world_size: 0}\n", "test:1:27: distributed.world_size must be at least 1"},
        {"distributed: {world_size: 2, collective: star}\n", "test:1:42: unknown distributed.collective 'star'"},
        {"distributed: {wrld_size: 2}\n", "test:1:15: unknown key 'wrld_size' in distributed"},
        {"distributed: {world_size: 4, average: post, predivide: 2}\n",
         "test:1:56: distributed.predivide needs average: pre"},
        {"distributed: {world_size: 4, predivide: 8}\n", "test:1:41: distributed.predivide (8) must be at most"},
        {"distributed: {world_size: 2, reduce_dtype: fp8_e4m3}\n", "test:1:44: distributed.reduce_dtype must be"},
        {"distributed: {world_size: 2, reduce_dtype: \"fp8_e4m3:delayed\"}\n",
         "test:1:44: distributed.reduce_dtype: 'fp8_e4m3:delayed': a collective keeps no amax history"},
        {"distributed: {world_size: 2, reduce_dtype: \"fp8_e4m3:blockwise_128x128\"}\n",
         "test:1:44: distributed.reduce_dtype: 'fp8_e4m3:blockwise_128x128': a message is one row"},
        {"distributed: {world_size: 2, reduce_dtype: \"mxfp8_e4m3:sr\"}\n",
         "test:1:44: distributed.reduce_dtype: 'mxfp8_e4m3:sr': the collective's casts round to nearest"},
        {"distributed: {world_size: 2, reduce_dtype: \"mxfp8_e4m3:up\"}\n",
         "test:1:44: distributed.reduce_dtype: 'mxfp8_e4m3:up': unknown option 'up'"},
        {"tensors: [{name: a, size: 20000}]\ndistributed: {world_size: 2, reduce_dtype: mxfp4}\n",
         "test:2:44: distributed.reduce_dtype: tensors[0] has 20000 elements: a scaled reduce dtype needs"},
        {"tensors: [{name: a, size: 20000}]\ndistributed: {world_size: 2, reduce_dtype: mxfp4, bucket_elements: 3000}\n",
         "test:2:68: distributed.reduce_dtype: tensors[0] has 20000 elements"},
        {"sample: 100\ndistributed: {world_size: 2, reduce_dtype: nvfp4}\n",
         "test:2:44: distributed.reduce_dtype: a scaled format quantizes messages"},
        {"batch: {tokens: [1, 2]}\ndistributed: {world_size: 2, tokens: [1, 2]}\n",
         "test:2:38: distributed.tokens gives every rank's counts"},
        {"batch: {microbatches: 2}\ndistributed: {world_size: 2, tokens: [[1, 2], [3]]}\n",
         "test:2:47: distributed.tokens[1] has 1 entries"},
        {"reduction: mean\ndistributed: {world_size: 2, normalize: rank}\n",
         "test:2:41: distributed.normalize applies to reduction: token_mean"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gp_scenario s;
        gp_error e = {""};
        int rc = gp_scenario_load_string(cases[i].text, strlen(cases[i].text), "test", &s, &e);
        if (rc == 0 || strncmp(e.msg, cases[i].msg, strlen(cases[i].msg)) != 0) {
            fprintf(stderr, "case %zu: got '%s', want '%s...'\n", i, rc ? e.msg : "(loaded)", cases[i].msg);
            fail();
        }
    }
}

/* ---- scaled reduce dtypes (docs/distributed.md, "Scaled reduce dtypes") ---- */

static void run_threads(const char *text, int threads, gp_scenario *s, gp_result *r)
{
    gp_error e = {""};
    gp_run_ctl ctl = {threads, NULL};
    load(text, s);
    if (gp_run_scenario_ctl(s, &ctl, &cpu, NULL, r, &e) != 0) {
        fprintf(stderr, "run: %s\n", e.msg);
        fail();
    }
}

/* A message is a ring chunk of its bucket (the whole bucket for tree), counted by hand:
 * 10 elements over 4 ranks, one bucket: chunks of ceil(10/4) = 3 start at 0, 3, 6, 9;
 * buckets of 4: each chunk one element (ceil(4/4) = 1; the last bucket [8, 10) too);
 * buckets of 5 over 2 ranks: chunks of 3 start at 0, 3 and 5, 8; tree: the bucket. */
static void scaled_messages_hand(void **state)
{
    (void)state;
    static const uint64_t one[10] = {0, 0, 0, 3, 3, 3, 6, 6, 6, 9}, b5[10] = {0, 0, 0, 3, 3, 5, 5, 5, 8, 8};
    for (uint64_t j = 0; j < 10; j++) {
        assert_int_equal(gp_coll_message(j, 10, 0, 4, 0), one[j]);
        assert_int_equal(gp_coll_message(j, 10, 4, 4, 0), j);
        assert_int_equal(gp_coll_message(j, 10, 5, 2, 0), b5[j]);
        assert_int_equal(gp_coll_message(j, 10, 5, 2, 1), j < 5 ? 0 : 5);
        assert_int_equal(gp_coll_message(j, 10, 0, 3, 1), 0);
    }
}

/* Each message gets its sender's own scale. fp8_e4m3:current, 8 elements over 2 ranks: two
 * messages of 4 (ring chunks). Message 0 {1000, 1e-3, 0.5, -2}: amax 1000, s = fp32(448 /
 * 1000) = 0.448000014; 1e-3 s = 4.48e-4 is below half e4m3's smallest subnormal 2^-9
 * (9.77e-4): 0, UNDERFLOW inside the block its amax scaled; 1000 s rounds to 448 and comes
 * back as fp32(448 / s) = 999.999939 (rounding); 0.5 s = 0.224 -> 14 x 2^-6 = 0.21875 ->
 * 0.48828122. Message 1 {1e-3, 2e-3, 3e-3, 4e-3} (fp32 values): amax 4e-3, s = fp32(112000)
 * = 111999.992: 1e-3 s rounds to e4m3's 112 and back to 1e-3's own fp32 value, unchanged,
 * while 3e-3 becomes 0.002857143 (e4m3 96 + 2 x 8: 336 / s). The values were checked with
 * numpy's fp32 arithmetic and ml_dtypes' float8_e4m3fn cast (an independent oracle).
 * MX e4m3 (floor), one block {31, 1}: X = 2^(4 - 8), 31 / X = 496 rounds past 448:
 * clamped to 448 -> 28, SATURATION; 1 / X = 16 exact. */
static void scaled_message_scales_hand(void **state)
{
    (void)state;
    gp_scaled_cfg q;
    char why[128];
    assert_int_equal(gp_scaled_parse("fp8_e4m3:current", &q, why, sizeof why), 0);
    float x[8] = {1000.0f, 1e-3f, 0.5f, -2.0f, 1e-3f, 2e-3f, 3e-3f, 4e-3f}, y[8];
    unsigned ev[8] = {0};
    gp_coll_quantize(&q, x, y, ev, 8, 0, 8, 0, 2, 0);
    assert_true(y[0] == 999.99993896484375f);
    assert_true(y[1] == 0.0f);
    assert_int_equal(gp_attrib_scaled(x[1], y[1], ev[1]), GP_MECH_UNDERFLOW);
    assert_true(y[2] == 0.4882812201976776f);
    assert_true(y[3] == -1.9531248807907104f);
    assert_int_equal(gp_attrib_scaled(x[0], y[0], ev[0]), GP_MECH_ROUNDING);
    assert_true(y[4] == x[4]);
    assert_true(y[5] == x[5] && y[7] == x[7]);
    assert_true(y[6] == 0.002857143059372902f);
    /* one message of the whole tensor (tree): the small ones now share 1000's scale: 1e-3 s
     * and 2e-3 s = 8.96e-4 underflow, 3e-3 s and 4e-3 s (1.34e-3, 1.79e-3) round to 2^-9 and
     * come back as fp32(2^-9 / s) = 0.0043596537 */
    memset(ev, 0, sizeof ev);
    gp_coll_quantize(&q, x, y, ev, 8, 0, 8, 0, 2, 1);
    assert_true(y[4] == 0.0f && y[5] == 0.0f);
    assert_int_equal(gp_attrib_scaled(x[5], y[5], ev[5]), GP_MECH_UNDERFLOW);
    assert_true(y[6] == 0.004359653685241938f && y[7] == 0.004359653685241938f);
    assert_int_equal(gp_scaled_parse("mxfp8_e4m3", &q, why, sizeof why), 0);
    float a[2] = {31.0f, 1.0f}, b[2];
    unsigned eb[2] = {0, 0};
    gp_coll_quantize(&q, a, b, eb, 2, 0, 2, 0, 1, 0);
    assert_true(b[0] == 28.0f && b[1] == 1.0f);
    assert_int_equal(gp_attrib_scaled(a[0], b[0], eb[0]), GP_MECH_SATURATION);
    assert_int_equal(gp_attrib_scaled(a[1], b[1], eb[1]), GP_MECH_ROUNDING);
}

/* An MX e4m3 ring all-reduce, every hop by hand. 4 ranks hold 3, 5, 7, 17 (one micro-batch,
 * tokens 3, 5, 7, 17 of m = 1, reduction sum), 4 elements: chunk q = element q, a
 * one-element message, so each cast is to 4 significant bits with X = 2^(floor(log2 p) -
 * 8): p / X in [256, 512) rounds to a multiple of 32 (ties to even), past 464 it clamps to
 * 448 (saturation: the floor rule's top binade reaches 1.111b, e4m3's largest is 1.110b).
 * average: post (nothing before the sum; / 4 after, exact). Chunk q starts at rank q + 1:
 *   q 0: 5, +7 = 12, +17 = 29 -> 28 (tie 1.1101b -> 1.110b: rounding -1), +3 = 31 -> all-gather
 *        cast 28 (saturation -3): 28 against 32;
 *   q 1: 7, 24, 27 -> 28 (+1), +5 = 33 -> 32 (-1): 32;
 *   q 2: 17 -> 16 (-1), 19 -> 20 (+1), 25 -> 24 (-1), +7 = 31 -> 28 (saturation -3): 28;
 *   q 3: 3, 8, 15 -> 14 (saturation -1), +17 = 31 -> 28 (saturation -3): 28.
 * Errors (units of 1/4 after the division): saturation 3, 0, 3, 4 -> sqrt(34)/4; rounding
 * -1, 0, -1, 0 -> sqrt(2)/4; totals -4, 0, -4, -4. g_same = 8, g_full = 32 (fullbatch
 * sum): collective_rel_err = sqrt(48)/4 / (2 x 8) = sqrt(3)/16; coll_loss[saturation] =
 * sqrt(34)/4 / 64, [rounding] = sqrt(2)/4 / 64. Roundings of non-zero values: 4 casts and
 * 3 additions per element, and the division: 32. fp8_e4m3:current on the same ranks loses
 * nothing: every partial sum p here (5 12 29 7 24 27 17 19 25 3 8 15 32) maps to
 * fp32(p fp32(448 / p)) = 448 and back to p exactly (checked with numpy fp32 and ml_dtypes;
 * not every value does: 23 comes back as 23.0000019). */
static const char *const mx_ring =
    "name: mxring\ntensors: [{name: g, size: 4, grad: {dist: constant, scale: 1.0, sign: 0}}]\n"
    "batch: {microbatches: 1}\nreduction: sum\nfullbatch: sum\nprecision: {grad: fp32, accumulator: fp32}\n"
    "distributed: {world_size: 4, average: post, tokens: [3, 5, 7, 17], reduce_dtype: %s%s}\n";

static void scaled_ring_mx_hand(void **state)
{
    (void)state;
    char text[1024];
    snprintf(text, sizeof text, mx_ring, "mxfp8_e4m3", "");
    gp_scenario s;
    gp_result r;
    run(text, &s, &r);
    double want = sqrt(3.0) / 16.0, sat = sqrt(34.0) / 256.0, rnd = sqrt(2.0) / 256.0;
    assert_true(fabs(r.metric[GP_M_COLLECTIVE_REL_ERR] - want) <= 1e-15 * want);
    assert_true(fabs(r.coll_loss[GP_MECH_SATURATION] - sat) <= 1e-15 * sat);
    assert_true(fabs(r.coll_loss[GP_MECH_ROUNDING] - rnd) <= 1e-15 * rnd);
    assert_true(r.coll_loss[GP_MECH_UNDERFLOW] == 0.0 && r.coll_loss[GP_MECH_ABSORPTION] == 0.0);
    assert_int_equal(r.st.coll.hops, 12);
    assert_int_equal(r.st.coll.adds_nonzero, 12);
    assert_int_equal(r.st.coll.absorbed, 0);
    assert_int_equal(r.st.coll.underflow, 0);
    assert_int_equal(r.st.coll.overflow, 0);
    assert_int_equal(r.st.coll.roundings, 32);
    char *all = reports(&s, &r);
    assert_non_null(strstr(all, "ring all-reduce over 4 ranks in mxfp8_e4m3:floor"));
    assert_non_null(strstr(all, "\"reduce_dtype\": \"mxfp8_e4m3:floor\""));
    free(all);
    gp_result_free(&r);
    gp_scenario_free(&s);
    snprintf(text, sizeof text, mx_ring, "\"fp8_e4m3:current\"", "");
    run(text, &s, &r);
    assert_true(r.metric[GP_M_COLLECTIVE_REL_ERR] == 0.0);
    gp_result_free(&r);
    gp_scenario_free(&s);
}

/* Underflow in the collective, by hand: torchao's amax_to_scale clamps an amax below 1e-12
 * to 1e-12, so a message of values 2^-60 (8.7e-19) gets s = fp32(448 / 1e-12) =
 * 447999985582080 and 2^-60 s = 3.89e-4, below half e4m3's smallest subnormal 2^-9: 0
 * (numpy fp32 and ml_dtypes agree). 2 ranks holding 2^-60 each (tokens 1, 1, m = 2^-60,
 * reduction sum), 2 elements, average post: chunk q's hop cast sends 0 (underflow, -2^-60),
 * the receiver adds its 2^-60, the all-gather cast underflows again (-2^-60): the result is
 * 0 against 2 x 2^-60. 4 underflows, collective_rel_err 1 (all of it), coll_loss[underflow]
 * = sqrt(2) 2^-60 / (sqrt(2) x 2 x 2^-60) = 1/2 (g_full = 2 x 2^-60, fullbatch sum); the
 * verdict names underflow. */
static void scaled_underflow_below_amax_floor(void **state)
{
    (void)state;
    const char *text = "name: tiny\ntensors: [{name: g, size: 2, grad: {dist: constant, scale: 8.673617379884035e-19, "
                       "sign: 0}}]\nbatch: {microbatches: 1}\nreduction: sum\nfullbatch: sum\n"
                       "precision: {grad: fp32, accumulator: fp32}\n"
                       "distributed: {world_size: 2, average: post, tokens: [1, 1], reduce_dtype: \"fp8_e4m3:current\"}\n";
    gp_scenario s;
    gp_result r;
    run(text, &s, &r);
    assert_int_equal(r.st.coll.underflow, 4);
    assert_int_equal(r.st.coll.roundings, 6); /* 2 casts and 1 addition per element; the division is of 0 */
    assert_true(r.metric[GP_M_COLLECTIVE_REL_ERR] == 1.0);
    assert_true(fabs(r.coll_loss[GP_MECH_UNDERFLOW] - 0.5) <= 1e-15);
    assert_true(r.coll_loss[GP_MECH_ROUNDING] == 0.0);
    assert_int_equal(r.dominant, GP_MECH_UNDERFLOW);
    gp_result_free(&r);
    gp_scenario_free(&s);
}

/* The same ranks under the tree (rank 1 into 0, 3 into 2, then 2 into 0) and under
 * reduce_scatter (no all-gather cast: the shard stays fp32 with its owner).
 * tree, ranks 3, 5, 7, 15: 5 exact: 8; 15 -> 14 (saturation -1): 21; 21 = 1.0101b x 16 ->
 * 20 (tie to even: rounding -1): 28; broadcast cast 28 exact: 28 against 30 on every
 * element: errors -1/4 each of saturation and rounding. g_same 7.5, g_full 30:
 * collective_rel_err = (2 x 2/4) / (2 x 7.5) = 1/15, each mechanism (2 x 1/4) / 60 = 1/120.
 * reduce_scatter, ranks 3, 5, 7, 17 (the ring's hops without the last cast): q 0 29 -> 28
 * (-1), ends 31; q 1 27 -> 28 (+1), ends 33; q 2 -1 +1 -1, ends 31; q 3 15 -> 14
 * (saturation -1), ends 31. Totals -1, +1, -1, -1 (units 1/4): collective_rel_err = 1/2 /
 * 16 = 1/32; rounding sqrt(3)/4 / 64, saturation 1/4 / 64. */
static void scaled_tree_and_reduce_scatter_hand(void **state)
{
    (void)state;
    char text[1024];
    gp_scenario s;
    gp_result r;
    snprintf(text, sizeof text,
             "name: mxtree\ntensors: [{name: g, size: 4, grad: {dist: constant, scale: 1.0, sign: 0}}]\n"
             "batch: {microbatches: 1}\nreduction: sum\nfullbatch: sum\nprecision: {grad: fp32, accumulator: fp32}\n"
             "distributed: {world_size: 4, average: post, collective: tree, tokens: [3, 5, 7, 15], "
             "reduce_dtype: mxfp8_e4m3}\n");
    run(text, &s, &r);
    assert_true(fabs(r.metric[GP_M_COLLECTIVE_REL_ERR] - 1.0 / 15.0) <= 1e-15 / 15.0);
    assert_true(fabs(r.coll_loss[GP_MECH_SATURATION] - 1.0 / 120.0) <= 1e-15 / 120.0);
    assert_true(fabs(r.coll_loss[GP_MECH_ROUNDING] - 1.0 / 120.0) <= 1e-15 / 120.0);
    assert_int_equal(r.st.coll.hops, 12);
    gp_result_free(&r);
    gp_scenario_free(&s);
    snprintf(text, sizeof text, mx_ring, "mxfp8_e4m3", ", collective: reduce_scatter");
    run(text, &s, &r);
    double rnd = sqrt(3.0) / 256.0, sat = 1.0 / 256.0;
    assert_true(fabs(r.metric[GP_M_COLLECTIVE_REL_ERR] - 1.0 / 32.0) <= 1e-15 / 32.0);
    assert_true(fabs(r.coll_loss[GP_MECH_ROUNDING] - rnd) <= 1e-15 * rnd);
    assert_true(fabs(r.coll_loss[GP_MECH_SATURATION] - sat) <= 1e-15 * sat);
    assert_int_equal(r.st.coll.roundings, 28); /* 3 casts + 3 additions per element, and the division */
    gp_result_free(&r);
    gp_scenario_free(&s);
}

/* Every report byte-identical for 1 and 2 threads: tensors of 40000 elements in buckets of
 * 4096 (messages of 512) over 8 ranks, three chunks each, for each scaled kind. */
static void scaled_threads_identical(void **state)
{
    (void)state;
    static const char *const kinds[] = {"\"fp8_e4m3:current\"", "\"fp8_e5m2:blockwise_1x128\"", "mxfp8_e4m3",
                                        "\"mxfp4:rceil\"", "nvfp4", "\"nvfp4:single\""};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "name: j\ntensors: [{name: a, size: 40000, grad: {dist: lognormal, scale: 1.0e-3, sigma: 2.0}},\n"
                 "  {name: b, size: 3000}]\nbatch: {microbatches: 2, tokens: [100, 300]}\n"
                 "precision: {grad: bf16, accumulator: fp32}\n"
                 "distributed: {world_size: 8, bucket_elements: 4096, reduce_dtype: %s}\n", kinds[k]);
        gp_scenario a, b;
        gp_result ra, rb;
        run_threads(text, 1, &a, &ra);
        run_threads(text, 2, &b, &rb);
        char *x = reports(&a, &ra), *y = reports(&b, &rb);
        if (strcmp(x, y) != 0) {
            fprintf(stderr, "%s: reports differ between -j1 and -j2\n", kinds[k]);
            fail();
        }
        assert_true(ra.metric[GP_M_COLLECTIVE_REL_ERR] > 0.0);
        free(x);
        free(y);
        gp_result_free(&ra);
        gp_result_free(&rb);
        gp_scenario_free(&a);
        gp_scenario_free(&b);
    }
}

/* show writes distributed keys that load back to the same scenario. */
static void show_round_trip(void **state)
{
    (void)state;
    gp_scenario s, t;
    load("batch: {microbatches: 2}\nprecision: {grad: bf16, accumulator: fp32}\n"
         "distributed: {world_size: 3, collective: tree, reduce_dtype: bf16, predivide: 2, no_sync: false, "
         "bucket_elements: 100, tokens: [[1, 2], 5, [7, 8]]}\n", &s);
    char *y = gp_scenario_to_yaml(&s);
    load(y, &t);
    char *z = gp_scenario_to_yaml(&t);
    assert_string_equal(y, z);
    assert_non_null(strstr(y, "collective: tree"));
    assert_non_null(strstr(y, "- [5, 5]"));
    assert_int_equal(gp_scenario_tokens(&t, 2, 1), 8);
    free(y);
    free(z);
    gp_scenario_free(&s);
    gp_scenario_free(&t);
    /* every scaled kind the collective takes, with its options, written by its canonical name */
    static const char *const kinds[][2] = {
        {"fp8_e4m3:current", "fp8_e4m3:current"}, {"fp8_e5m2:current:pow2:nosat", "fp8_e5m2:current:pow2:nosat"},
        {"fp8_e4m3:blockwise_1x128", "fp8_e4m3:blockwise_1x128"}, {"mxfp8_e5m2", "mxfp8_e5m2:floor"},
        {"mxfp6_e2m3:rceil", "mxfp6_e2m3:rceil"}, {"mxfp4:even:torchao", "mxfp4:even:torchao"},
        {"nvfp4", "nvfp4"}, {"nvfp4:single", "nvfp4:single"},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        char text[256], want[128];
        snprintf(text, sizeof text, "distributed: {world_size: 4, reduce_dtype: \"%s\"}\n", kinds[k][0]);
        load(text, &s);
        y = gp_scenario_to_yaml(&s);
        load(y, &t);
        z = gp_scenario_to_yaml(&t);
        assert_string_equal(y, z);
        snprintf(want, sizeof want, "reduce_dtype: %s\n", kinds[k][1]);
        assert_non_null(strstr(y, want));
        assert_int_equal(t.distributed.reduce_scaled, 1);
        free(y);
        free(z);
        gp_scenario_free(&s);
        gp_scenario_free(&t);
    }
}

int main(void)
{
    gp_error e = {""};
    if (gp_backend_open("cpu", &cpu, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(world_one_is_one_process), cmocka_unit_test(ring8_bf16_hand),
        cmocka_unit_test(plugin_add_is_judged), cmocka_unit_test(microbatch_is_window_index),
        cmocka_unit_test(fp16_overflow_without_predivide), cmocka_unit_test(missing_no_sync_hand),
        cmocka_unit_test(rank_vs_global_normalization), cmocka_unit_test(fp32_exact_partial_sums),
        cmocka_unit_test(ring_order_documented),
        cmocka_unit_test(scaled_messages_hand), cmocka_unit_test(scaled_message_scales_hand),
        cmocka_unit_test(scaled_ring_mx_hand), cmocka_unit_test(scaled_tree_and_reduce_scatter_hand),
        cmocka_unit_test(scaled_underflow_below_amax_floor), cmocka_unit_test(scaled_threads_identical),
        cmocka_unit_test(bad_keys), cmocka_unit_test(show_round_trip),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    gp_backend_close(&cpu);
    return rc;
}
