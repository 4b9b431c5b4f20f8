/* test_scenario.c — the scenario loader: the DESIGN.md §4 example, every default,
 * explicit values, the three forms of batch.tokens, the YAML round trip, and bad
 * inputs, each rejected with its exact origin:line:column and a telling word.
 * argv[1] is the directory of the data files (tests/data/scenarios). */
#include <string.h>

#include "gp_test.h"

#include "harness/scenario/gp_scenario.h"
#include "kernels/arith/gp_philox.h"

static const char *data_dir = "tests/data/scenarios";

static void data_path(char *buf, size_t n, const char *file)
{
    snprintf(buf, n, "%s/%s", data_dir, file);
}

static int load_str(const char *text, gp_scenario *s, gp_error *err)
{
    return gp_scenario_load_string(text, strlen(text), "inline", s, err);
}

/* A failed load leaves *s initialised and owning nothing. */
static void assert_pristine(const gp_scenario *s)
{
    assert_null(s->tensors);
    assert_int_equal(s->ntensors, 0);
    assert_null(s->batch.tokens);
    assert_string_equal(s->name, "scenario");
    assert_int_equal(s->batch.microbatches, 8);
    assert_int_equal(s->steps, 1);
}

/* The message starts with `prefix` (origin:line:column: ) and contains `word`. */
static void assert_error(int rc, const gp_scenario *s, const gp_error *err, const char *prefix,
                         const char *word)
{
    if (rc != -1 || strncmp(err->msg, prefix, strlen(prefix)) != 0 || !strstr(err->msg, word)) {
        fprintf(stderr, "rc %d, message \"%s\"; want prefix \"%s\" and \"%s\"\n", rc, err->msg,
                prefix, word);
        fail();
    }
    assert_pristine(s);
}

/* Load the data file and expect an error at "PATH:line:column: " mentioning word. */
static void expect_file_error(const char *file, const char *where, const char *word)
{
    char path[512], prefix[600];
    gp_scenario s;
    gp_error err = {{0}};
    data_path(path, sizeof path, file);
    snprintf(prefix, sizeof prefix, "%s:%s: ", path, where);
    int rc = gp_scenario_load_file(path, &s, &err);
    printf("# %s -> %s\n", file, err.msg);
    assert_error(rc, &s, &err, prefix, word);
    gp_scenario_free(&s);
}

/* The same for inline text (origin "inline"). */
static void expect_str_error(const char *text, const char *where, const char *word)
{
    char prefix[64];
    gp_scenario s;
    gp_error err = {{0}};
    snprintf(prefix, sizeof prefix, "inline:%s: ", where);
    int rc = load_str(text, &s, &err);
    printf("# %s\n", err.msg);
    assert_error(rc, &s, &err, prefix, word);
    gp_scenario_free(&s);
}

/* Every field equal, bit for bit for doubles. */
static void assert_dist_equal(const gp_dist *a, const gp_dist *b)
{
    assert_int_equal(a->kind, b->kind);
    gp_assert_bits(gp_f64_bits(a->scale), gp_f64_bits(b->scale), "scale");
    gp_assert_bits(gp_f64_bits(a->sigma), gp_f64_bits(b->sigma), "sigma");
    gp_assert_bits(gp_f64_bits(a->alpha), gp_f64_bits(b->alpha), "alpha");
    gp_assert_bits(gp_f64_bits(a->neg_frac), gp_f64_bits(b->neg_frac), "sign");
    gp_assert_bits(gp_f64_bits(a->sparsity), gp_f64_bits(b->sparsity), "sparsity");
    gp_assert_bits(gp_f64_bits(a->outlier_frac), gp_f64_bits(b->outlier_frac), "outlier frac");
    gp_assert_bits(gp_f64_bits(a->outlier_scale), gp_f64_bits(b->outlier_scale), "outlier scale");
    gp_assert_bits(gp_f64_bits(a->shrink), gp_f64_bits(b->shrink), "shrink");
    assert_int_equal(a->nmb, b->nmb);
    for (size_t k = 0; k < a->nmb; k++) {
        assert_int_equal(a->ntok[k], b->ntok[k]);
        for (size_t t = 0; t < a->ntok[k]; t++)
            gp_assert_bits(gp_f64_bits(a->values[k][t]), gp_f64_bits(b->values[k][t]),
                           "values[%zu][%zu]", k, t);
    }
}

static void assert_scenario_equal(const gp_scenario *a, const gp_scenario *b)
{
    assert_string_equal(a->name, b->name);
    assert_true(a->seed == b->seed);
    assert_int_equal(a->ntensors, b->ntensors);
    for (size_t i = 0; i < a->ntensors; i++) {
        assert_string_equal(a->tensors[i].name, b->tensors[i].name);
        assert_int_equal(a->tensors[i].size, b->tensors[i].size);
        assert_dist_equal(&a->tensors[i].grad, &b->tensors[i].grad);
        assert_dist_equal(&a->tensors[i].weight, &b->tensors[i].weight);
    }
    assert_int_equal(a->batch.accumulation_steps, b->batch.accumulation_steps);
    assert_int_equal(a->batch.microbatches, b->batch.microbatches);
    for (int k = 0; k < a->batch.microbatches; k++)
        assert_int_equal(a->batch.tokens[k], b->batch.tokens[k]);
    assert_int_equal(a->reduction, b->reduction);
    assert_int_equal(a->fullbatch, b->fullbatch);
    assert_int_equal(a->precision.grad, b->precision.grad);
    assert_int_equal(a->precision.accumulator, b->precision.accumulator);
    assert_int_equal(a->precision.rounding, b->precision.rounding);
    assert_int_equal(a->precision.ftz, b->precision.ftz);
    assert_int_equal(a->loss_scale.mode, b->loss_scale.mode);
    gp_assert_bits(gp_f64_bits(a->loss_scale.init), gp_f64_bits(b->loss_scale.init), "init");
    gp_assert_bits(gp_f64_bits(a->loss_scale.growth), gp_f64_bits(b->loss_scale.growth), "growth");
    gp_assert_bits(gp_f64_bits(a->loss_scale.backoff), gp_f64_bits(b->loss_scale.backoff), "backoff");
    assert_int_equal(a->loss_scale.interval, b->loss_scale.interval);
    assert_int_equal(a->loss_scale.unscale_before_clip, b->loss_scale.unscale_before_clip);
    assert_int_equal(a->loss_scale.update, b->loss_scale.update);
    gp_assert_bits(gp_f64_bits(a->clip.max_norm), gp_f64_bits(b->clip.max_norm), "max_norm");
    gp_assert_bits(gp_f64_bits(a->optimizer.lr), gp_f64_bits(b->optimizer.lr), "lr");
    gp_assert_bits(gp_f64_bits(a->optimizer.beta1), gp_f64_bits(b->optimizer.beta1), "beta1");
    gp_assert_bits(gp_f64_bits(a->optimizer.beta2), gp_f64_bits(b->optimizer.beta2), "beta2");
    gp_assert_bits(gp_f64_bits(a->optimizer.eps), gp_f64_bits(b->optimizer.eps), "eps");
    gp_assert_bits(gp_f64_bits(a->optimizer.weight_decay), gp_f64_bits(b->optimizer.weight_decay), "wd");
    assert_int_equal(a->optimizer.param, b->optimizer.param);
    assert_int_equal(a->optimizer.master, b->optimizer.master);
    assert_int_equal(a->optimizer.state, b->optimizer.state);
    assert_int_equal(a->optimizer.kahan, b->optimizer.kahan);
    assert_int_equal(a->optimizer.stochastic, b->optimizer.stochastic);
    assert_int_equal(a->optimizer.fused, b->optimizer.fused);
    assert_int_equal(a->schedule.kind, b->schedule.kind);
    assert_int_equal(a->schedule.warmup, b->schedule.warmup);
    assert_int_equal(a->schedule.total, b->schedule.total);
    gp_assert_bits(gp_f64_bits(a->schedule.min_lr), gp_f64_bits(b->schedule.min_lr), "min_lr");
    assert_int_equal(a->schedule.step_size, b->schedule.step_size);
    gp_assert_bits(gp_f64_bits(a->schedule.gamma), gp_f64_bits(b->schedule.gamma), "gamma");
    assert_int_equal(a->steps, b->steps);
    for (int m = 0; m < GP_NMETRICS; m++) {
        assert_int_equal(a->exact_metrics[m], b->exact_metrics[m]);
        assert_int_equal(a->thresholds.set[m], b->thresholds.set[m]);
        if (a->thresholds.set[m])
            gp_assert_bits(gp_f64_bits(a->thresholds.max[m]), gp_f64_bits(b->thresholds.max[m]),
                           "threshold %d", m);
    }
}

/* to_yaml, load it back, compare. */
static void assert_round_trip(const gp_scenario *s)
{
    char *y = gp_scenario_to_yaml(s);
    assert_non_null(y);
    gp_scenario r;
    gp_error err = {{0}};
    if (gp_scenario_load_string(y, strlen(y), "round-trip", &r, &err) != 0) {
        fprintf(stderr, "%s\n---\n%s", err.msg, y);
        fail();
    }
    assert_scenario_equal(s, &r);
    /* and the second generation is the same text */
    char *y2 = gp_scenario_to_yaml(&r);
    assert_non_null(y2);
    assert_string_equal(y, y2);
    free(y2);
    free(y);
    gp_scenario_free(&r);
}

/* ---- tests ---- */

static void test_design_example(void **state)
{
    (void)state;
    char path[512];
    gp_scenario s;
    gp_error err = {{0}};
    data_path(path, sizeof path, "design_example.yaml");
    if (gp_scenario_load_file(path, &s, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        fail();
    }
    assert_string_equal(s.name, "lora-bf16-accum");
    assert_true(s.seed == 42);
    assert_int_equal(s.ntensors, 1);
    assert_string_equal(s.tensors[0].name, "blocks.7.attn1.lora_A");
    assert_int_equal(s.tensors[0].size, 65536);
    assert_int_equal(s.tensors[0].grad.kind, GP_DIST_LOGNORMAL);
    assert_true(s.tensors[0].grad.scale == 4.0e-6);
    assert_true(s.tensors[0].grad.sigma == 1.0);
    assert_int_equal(s.tensors[0].weight.kind, GP_DIST_NORMAL);
    assert_true(s.tensors[0].weight.scale == 0.02);
    assert_int_equal(s.batch.accumulation_steps, 8);
    assert_int_equal(s.batch.microbatches, 8);
    const long tokens[8] = {512, 480, 17, 512, 512, 300, 512, 64};
    for (int k = 0; k < 8; k++)
        assert_int_equal(s.batch.tokens[k], tokens[k]);
    assert_int_equal(s.reduction, GP_RED_MEAN);
    assert_int_equal(s.fullbatch, GP_FB_MEAN);
    assert_int_equal(s.precision.grad, GP_BF16);
    assert_int_equal(s.precision.accumulator, GP_BF16);
    assert_int_equal(s.precision.rounding, GP_ACC_RNE);
    assert_int_equal(s.precision.ftz, 0);
    assert_int_equal(s.loss_scale.mode, GP_LS_DYNAMIC);
    assert_true(s.loss_scale.init == 65536.0);
    assert_true(s.loss_scale.growth == 2.0);
    assert_true(s.loss_scale.backoff == 0.5);
    assert_int_equal(s.loss_scale.interval, 2000);
    assert_int_equal(s.loss_scale.unscale_before_clip, 1);
    assert_int_equal(s.loss_scale.update, 1);
    assert_true(s.clip.max_norm == 1.0);
    assert_true(s.optimizer.lr == 1.0e-4);
    assert_true(s.optimizer.beta1 == 0.9);
    assert_true(s.optimizer.beta2 == 0.999);
    assert_true(s.optimizer.eps == 1.0e-8);
    assert_true(s.optimizer.weight_decay == 0.01);
    assert_int_equal(s.optimizer.param, GP_BF16);
    assert_int_equal(s.optimizer.master, 1);
    assert_int_equal(s.optimizer.state, GP_FP32);
    assert_int_equal(s.schedule.kind, GP_SCHED_COSINE);
    assert_int_equal(s.schedule.warmup, 100);
    assert_int_equal(s.schedule.total, 1000);
    assert_true(s.schedule.min_lr == 0.0);
    assert_int_equal(s.steps, 50);
    assert_int_equal(s.thresholds.set[GP_M_GRAD_REL_ERR_FULLBATCH], 1);
    assert_true(s.thresholds.max[GP_M_GRAD_REL_ERR_FULLBATCH] == 1.0e-3);
    assert_int_equal(s.thresholds.set[GP_M_UNDERFLOW_FRAC], 1);
    assert_true(s.thresholds.max[GP_M_UNDERFLOW_FRAC] == 0.0);
    assert_true(s.thresholds.max[GP_M_ABSORBED_FRAC] == 0.01);
    assert_true(s.thresholds.max[GP_M_STALE_UPDATE_FRAC] == 0.05);
    int nset = 0;
    for (int m = 0; m < GP_NMETRICS; m++)
        nset += s.thresholds.set[m];
    assert_int_equal(nset, 4);
    assert_round_trip(&s);
    gp_scenario_free(&s);
    assert_pristine(&s);
    gp_scenario_free(&s); /* twice is harmless */
}

/* DESIGN.md's example verbatim: its 'tiny' tensor has 2 micro-batches of explicit
 * values, but the batch says 8. */
static void test_design_example_verbatim(void **state)
{
    (void)state;
    expect_file_error("design_example_verbatim.yaml", "9:20", "micro-batches");
}

static void test_defaults(void **state)
{
    (void)state;
    gp_scenario s;
    gp_error err = {{0}};
    assert_int_equal(load_str("name: x\n", &s, &err), 0);
    assert_string_equal(err.msg, "");
    assert_string_equal(s.name, "x");
    assert_true(s.seed == 0);
    assert_int_equal(s.ntensors, 1);
    const gp_tensor_spec *t = &s.tensors[0];
    assert_string_equal(t->name, "grad");
    assert_int_equal(t->size, 1024);
    assert_int_equal(t->grad.kind, GP_DIST_NORMAL);
    assert_true(t->grad.scale == 1.0 && t->grad.sigma == 1.0 && t->grad.alpha == 3.0);
    assert_true(t->grad.neg_frac == 0.5 && t->grad.sparsity == 0.0 && t->grad.outlier_frac == 0.0);
    assert_true(t->grad.outlier_scale == 1000.0 && t->grad.shrink == 1.0);
    assert_int_equal(t->grad.nmb, 0);
    assert_null(t->grad.values);
    assert_int_equal(t->weight.kind, GP_DIST_NORMAL);
    assert_true(t->weight.scale == 0.02);
    assert_int_equal(s.batch.microbatches, 8);
    assert_int_equal(s.batch.accumulation_steps, 8);
    for (int k = 0; k < 8; k++)
        assert_int_equal(s.batch.tokens[k], 512);
    assert_int_equal(s.reduction, GP_RED_TOKEN_MEAN);
    assert_int_equal(s.fullbatch, GP_FB_MEAN);
    assert_int_equal(s.precision.grad, GP_FP32);
    assert_int_equal(s.precision.accumulator, GP_FP32);
    assert_int_equal(s.precision.rounding, GP_ACC_RNE);
    assert_int_equal(s.precision.ftz, 0);
    assert_int_equal(s.loss_scale.mode, GP_LS_NONE);
    assert_true(s.loss_scale.init == 65536.0 && s.loss_scale.growth == 2.0);
    assert_true(s.loss_scale.backoff == 0.5);
    assert_int_equal(s.loss_scale.interval, 2000);
    assert_int_equal(s.loss_scale.unscale_before_clip, 1);
    assert_int_equal(s.loss_scale.update, 1);
    assert_true(s.clip.max_norm == 0.0);
    assert_true(s.optimizer.lr == 1e-4 && s.optimizer.beta1 == 0.9 && s.optimizer.beta2 == 0.999);
    assert_true(s.optimizer.eps == 1e-8 && s.optimizer.weight_decay == 0.01);
    assert_int_equal(s.optimizer.param, GP_FP32);
    assert_int_equal(s.optimizer.master, 0);
    assert_int_equal(s.optimizer.state, GP_FP32);
    assert_int_equal(s.optimizer.kahan, 0);
    assert_int_equal(s.optimizer.stochastic, 0);
    assert_int_equal(s.schedule.kind, GP_SCHED_CONSTANT);
    assert_int_equal(s.schedule.warmup, 0);
    assert_int_equal(s.schedule.total, 1);
    assert_true(s.schedule.min_lr == 0.0);
    assert_int_equal(s.schedule.step_size, 100);
    assert_true(s.schedule.gamma == 0.1);
    assert_int_equal(s.steps, 1);
    for (int m = 0; m < GP_NMETRICS; m++)
        assert_int_equal(s.thresholds.set[m], 0);
    assert_round_trip(&s);
    gp_scenario_free(&s);

    /* {} is all defaults too; schedule.total follows steps */
    assert_int_equal(load_str("{}", &s, &err), 0);
    assert_string_equal(s.name, "scenario");
    assert_int_equal(s.ntensors, 1);
    gp_scenario_free(&s);
    assert_int_equal(load_str("steps: 77\n", &s, &err), 0);
    assert_int_equal(s.schedule.total, 77);
    gp_scenario_free(&s);

    /* init alone owns nothing */
    gp_scenario_init(&s);
    assert_pristine(&s);
    gp_scenario_free(&s);
}

static void test_explicit_values(void **state)
{
    (void)state;
    gp_scenario s;
    gp_error err = {{0}};
    assert_int_equal(load_str("tensors: [{name: tiny, grad: {values: [[4.0], [0.0, 0.0, 0.0]]}}]", &s, &err), 0);
    assert_int_equal(s.ntensors, 1);
    const gp_tensor_spec *t = &s.tensors[0];
    assert_string_equal(t->name, "tiny");
    assert_int_equal(t->size, 1);
    assert_int_equal(t->grad.kind, GP_DIST_VALUES);
    assert_int_equal(t->grad.nmb, 2);
    assert_int_equal(t->grad.ntok[0], 1);
    assert_int_equal(t->grad.ntok[1], 3);
    assert_true(t->grad.values[0][0] == 4.0);
    for (int i = 0; i < 3; i++)
        assert_true(t->grad.values[1][i] == 0.0);
    assert_int_equal(s.batch.microbatches, 2);
    assert_int_equal(s.batch.accumulation_steps, 2);
    assert_int_equal(s.batch.tokens[0], 1);
    assert_int_equal(s.batch.tokens[1], 3);
    assert_round_trip(&s);
    gp_scenario_free(&s);

    /* explicit size 1, matching batch, a second values tensor, a partial window,
     * negative zero and a subnormal survive the round trip */
    const char *ok =
        "tensors:\n"
        "  - {name: a, size: 1, grad: {values: [[-0.0, 4.9e-324], [1, 2]]}}\n"
        "  - {name: b, grad: {values: [[0.1, 0.2], [0.3, 1e300]]}, weight: {dist: constant, scale: 0}}\n"
        "  - {name: c, size: 7, grad: {dist: pareto, alpha: 2.5, sign: 0, outliers: {frac: 0.01, scale: 64}}}\n"
        "batch: {microbatches: 2, accumulation_steps: 4, tokens: [2, 2]}\n";
    assert_int_equal(load_str(ok, &s, &err), 0);
    assert_int_equal(s.batch.accumulation_steps, 4);
    assert_true(gp_f64_bits(s.tensors[0].grad.values[0][0]) == 0x8000000000000000ull);
    assert_true(gp_f64_bits(s.tensors[0].grad.values[0][1]) == 1);
    assert_true(s.tensors[1].weight.scale == 0.0);
    assert_int_equal(s.tensors[2].grad.kind, GP_DIST_PARETO);
    assert_true(s.tensors[2].grad.outlier_frac == 0.01 && s.tensors[2].grad.outlier_scale == 64);
    assert_round_trip(&s);
    gp_scenario_free(&s);

    /* inconsistencies */
    expect_str_error("tensors: [{name: t, size: 2, grad: {values: [[1.0]]}}]", "1:27", "must be 1");
    expect_str_error("batch: {microbatches: 3}\ntensors: [{name: t, grad: {values: [[1.0], [2.0]]}}]",
                     "2:36", "micro-batches");
    expect_str_error("batch: {tokens: 4}\ntensors: [{name: t, grad: {values: [[1.0], [2.0, 3.0]]}}]",
                     "2:37", "tokens");
    expect_str_error("tensors:\n  - {name: t, grad: {values: [[1.0], [2.0, 3.0]]}}\n"
                     "  - {name: u, grad: {values: [[1.0], [2.0]]}}\n",
                     "3:38", "tensors[0].grad.values[1] has 2");
    expect_str_error("tensors: [{name: t, grad: {values: [[1.0], []]}}]", "1:44", "empty");
    expect_str_error("tensors: [{name: t, grad: {values: []}}]", "1:36", "empty");
    expect_str_error("tensors: [{name: t, grad: {values: [[1.0], [.inf]]}}]", "1:45", "infinite");
    expect_str_error("tensors: [{name: t, grad: {values: [[1.0]], scale: 2}}]", "1:45", "combined");
    expect_str_error("tensors: [{name: t, weight: {values: [[1.0]]}}]", "1:30", "unknown key 'values'");
}

static void test_tokens_forms(void **state)
{
    (void)state;
    gp_scenario s, s2;
    gp_error err = {{0}};
    assert_int_equal(load_str("batch: {microbatches: 3, tokens: 100}", &s, &err), 0);
    for (int k = 0; k < 3; k++)
        assert_int_equal(s.batch.tokens[k], 100);
    gp_scenario_free(&s);

    assert_int_equal(load_str("batch: {microbatches: 3, tokens: [1, 20, 300]}", &s, &err), 0);
    assert_int_equal(s.batch.tokens[0], 1);
    assert_int_equal(s.batch.tokens[1], 20);
    assert_int_equal(s.batch.tokens[2], 300);
    gp_scenario_free(&s);

    /* a list alone sets the micro-batch count */
    assert_int_equal(load_str("batch: {tokens: [5, 6]}", &s, &err), 0);
    assert_int_equal(s.batch.microbatches, 2);
    assert_int_equal(s.batch.accumulation_steps, 2);
    gp_scenario_free(&s);

    /* {min, max}: the same seed gives the same counts, all within bounds, not all equal */
    const char *range = "seed: 7\nbatch: {microbatches: 64, tokens: {min: 10, max: 20}}";
    assert_int_equal(load_str(range, &s, &err), 0);
    assert_int_equal(load_str(range, &s2, &err), 0);
    int distinct = 0;
    for (int k = 0; k < 64; k++) {
        assert_int_equal(s.batch.tokens[k], s2.batch.tokens[k]);
        assert_in_range(s.batch.tokens[k], 10, 20);
        distinct |= s.batch.tokens[k] != s.batch.tokens[0];
    }
    assert_true(distinct);
    /* ... and equals the documented draw */
    for (int k = 0; k < 64; k++)
        assert_int_equal(s.batch.tokens[k], 10 + (long)(gp_rand_u32(7, 0x746f6b656e73ull, (uint64_t)k) % 11u));
    assert_round_trip(&s);
    gp_scenario_free(&s2);
    assert_int_equal(load_str("seed: 8\nbatch: {microbatches: 64, tokens: {min: 10, max: 20}}", &s2, &err), 0);
    assert_memory_not_equal(s.batch.tokens, s2.batch.tokens, 64 * sizeof(long));
    gp_scenario_free(&s2);
    gp_scenario_free(&s);

    assert_int_equal(load_str("batch: {microbatches: 2, tokens: {min: 5, max: 5}}", &s, &err), 0);
    assert_int_equal(s.batch.tokens[0], 5);
    assert_int_equal(s.batch.tokens[1], 5);
    gp_scenario_free(&s);

    expect_str_error("batch: {tokens: {min: 5}}", "1:17", "both");
    expect_str_error("batch: {tokens: {min: 5, max: 4}}", "1:31", "at least min");
    expect_str_error("batch: {tokens: 1000000001}", "1:17", "too large");
    expect_str_error("batch: {tokens: 0}", "1:17", "at least 1");
    expect_str_error("batch: {tokens: 12.5}", "1:17", "integer");
    expect_str_error("batch: {tokens: []}", "1:17", "empty");
    expect_str_error("batch: {microbatches: 3, tokens: 1000000000}", "1:34", "2^31-1");
    expect_str_error("batch: {microbatches: 0}", "1:23", "at least 1");
    expect_str_error("batch: {microbatches: 65537}", "1:23", "too large");
    expect_str_error("batch: {microbatches: 4, accumulation_steps: 3}", "1:46", "partial");
}

/* Everything set away from its default survives to_yaml -> load. */
static void test_round_trip(void **state)
{
    (void)state;
    const char *text =
        "name: \"odd \\\"name\\\" with \\\\ and: colon\"\n"
        "seed: 18446744073709551615\n"
        "tensors:\n"
        "  - name: w1\n"
        "    size: 3\n"
        "    grad: {dist: laplace, scale: 1.0e-7, sparsity: 0.25, shrink: 0.999, sign: 0.1,\n"
        "           outliers: {frac: 0.001, scale: 1e4}}\n"
        "    weight: {dist: lognormal, scale: 0.5, sigma: 0.3}\n"
        "  - name: '#2'\n"
        "    grad: {dist: constant, scale: 3.0e-38}\n"
        "batch: {accumulation_steps: 5, microbatches: 3, tokens: [7, 1, 999999999]}\n"
        "reduction: mean_no_div\n"
        "fullbatch: sum\n"
        "precision: {grad: fp16, accumulator: e5m2, rounding: kahan, ftz: true}\n"
        "loss_scale: {mode: static, init: 0.125, growth: 1.5, backoff: 0.25, interval: 7,\n"
        "             unscale_before_clip: false, update: false}\n"
        "clip: {max_norm: 0.1}\n"
        "optimizer: {name: adamw, lr: 3e-3, betas: [0, 0.95], eps: 1e-12, weight_decay: 0,\n"
        "            param: fp16, master: fp32, state: bf16, kahan: false, stochastic: true}\n"
        "schedule: {name: step, warmup: 3, total: 9, min_lr: 1e-6, step_size: 2, gamma: 0.5}\n"
        "steps: 12\n"
        "thresholds: {nonfinite_count: 0, max_ulp_err: 4, min_loss_scale: -1, weight_rel_err: 1e-300}\n"
        "exact_metrics: [weight_rel_err, grad_norm_ratio]\n";
    gp_scenario s;
    gp_error err = {{0}};
    if (load_str(text, &s, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        fail();
    }
    assert_string_equal(s.name, "odd \"name\" with \\ and: colon");
    assert_true(s.seed == UINT64_MAX);
    assert_string_equal(s.tensors[1].name, "#2");
    assert_int_equal(s.tensors[1].size, 1024);
    assert_int_equal(s.precision.accumulator, GP_FP8_E5M2);
    assert_int_equal(s.precision.rounding, GP_ACC_KAHAN);
    assert_true(s.loss_scale.init == 0.125);
    assert_int_equal(s.loss_scale.update, 0);
    assert_int_equal(s.schedule.kind, GP_SCHED_STEP);
    assert_true(s.thresholds.max[GP_M_MIN_LOSS_SCALE] == -1.0);
    for (int m = 0; m < GP_NMETRICS; m++)
        assert_int_equal(s.exact_metrics[m], m == GP_M_WEIGHT_REL_ERR || m == GP_M_GRAD_NORM_RATIO);
    assert_round_trip(&s);
    char *y = gp_scenario_to_yaml(&s);
    assert_non_null(strstr(y, "exact_metrics: [grad_norm_ratio, weight_rel_err]\n")); /* metric order */
    assert_non_null(strstr(y, "tokens: [7, 1, 999999999]")); /* integers as integers */
    assert_non_null(strstr(y, "betas: [0, 0.95]"));
    free(y);
    gp_scenario_free(&s);
}

/* precision.grad with a scaled or block format (docs/formats.md): every kind the runner
 * takes, each rule and option, loaded, printed back under its canonical name and reloaded
 * equal; the kinds it does not take and bad options refused at the value. */
static void test_scaled_grad(void **state)
{
    (void)state;
    static const char *const names[][2] = {
        {"mxfp8_e4m3", "mxfp8_e4m3:floor"},      {"mxfp8_e5m2:rceil", NULL},
        {"mxfp6_e2m3:ceil:torchao", NULL},       {"mxfp6_e3m2:even:sr", NULL},
        {"mxfp4", "mxfp4:floor"},                {"nvfp4:single", NULL},
        {"nvfp4:sr:single", "nvfp4:single:sr"},  {"fp8_e4m3:blockwise_1x128", NULL},
        {"fp8_e5m2:blockwise_1x128:pow2:nosat:sr", NULL},
        {"fp8_e4m3:delayed", "fp8_e4m3:delayed:hist=1024:max:margin=0"},
        {"fp8_e5m2:delayed:most_recent:hist=4:margin=2:nosat", "fp8_e5m2:delayed:hist=4:most_recent:margin=2:nosat"},
        {"fp8_e4m3:current", NULL},              {"fp8_e5m2:current:pow2:sr", NULL},
        {"fp8_e4m3:blockwise_128x128", NULL},     {"fp8_e5m2:blockwise_128x128:pow2:nosat", NULL},
        {"nvfp4", NULL},                          {"nvfp4:sr", NULL},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char text[256], want[128];
        snprintf(text, sizeof text, "tensors: [{name: w, size: 1024, cols: 256}]\n"
                 "precision: {grad: \"%s\", accumulator: bf16}\n", names[i][0]);
        snprintf(want, sizeof want, "  grad: %s\n", names[i][1] ? names[i][1] : names[i][0]);
        gp_scenario s;
        gp_error err = {{0}};
        if (load_str(text, &s, &err) != 0) {
            fprintf(stderr, "%s: %s\n", names[i][0], err.msg);
            fail();
        }
        assert_int_equal(s.precision.grad_scaled, 1);
        assert_int_equal(s.precision.grad, GP_FP32); /* stored: the dequantized values */
        char *y = gp_scenario_to_yaml(&s);
        if (!strstr(y, want)) {
            fprintf(stderr, "%s printed as:\n%s", names[i][0], y);
            fail();
        }
        assert_non_null(strstr(y, "    cols: 256\n"));
        free(y);
        assert_round_trip(&s);
        gp_scenario_free(&s);
    }
    expect_str_error("precision: {grad: \"mxfp4:bogus\"}", "1:19", "unknown option 'bogus' of mxfp4");
    expect_str_error("precision: {grad: mxfp5}", "1:19", "unknown scaled format 'mxfp5'");
    expect_str_error("precision: {grad: \"fp8_e4m3:delayed:hist=0\"}", "1:19", "1 to 1024 steps");
    expect_str_error("precision: {grad: \"fp8_e4m3:delayed:margin=99\"}", "1:19", "0 to 64");
    expect_str_error("precision: {grad: \"fp8_e4m3:hist=4\"}", "1:19", "unknown option 'hist=4'");
    /* 128x128 tiles need the tensor's 2-D view; cols divides the size, a multiple of 128 or the size */
    expect_str_error("precision: {grad: \"fp8_e4m3:blockwise_128x128\"}", "1:12", "tensors[0] ('grad') needs `cols`");
    expect_str_error("tensors: [{name: w, size: 1024, cols: 96}]\n", "1:39", "tensors[0].cols: 96 must divide");
    expect_str_error("tensors: [{name: w, size: 1024, cols: 64}]\n", "1:39", "be a multiple of 128 (or the size");
    expect_str_error("precision: {grad: \"mxfp4:pow2\"}", "1:19", "unknown option 'pow2' of mxfp4");
    expect_str_error("sample: 10\nprecision: {grad: mxfp4}", "2:12", "cannot run with `sample:`");
}

/* precision.accumulator with per-tensor current scaling: loaded, printed back with every
 * option, round-tripped; the kinds and combinations not modelled refused with one line. */
static void test_scaled_accumulator(void **state)
{
    (void)state;
    static const char *const names[][2] = {{"fp8_e4m3:current", NULL}, {"fp8_e5m2:current:pow2:nosat", NULL}};
    for (size_t i = 0; i < 2; i++) {
        char text[160], want[128];
        snprintf(text, sizeof text, "precision: {grad: bf16, accumulator: \"%s\"}\n", names[i][0]);
        snprintf(want, sizeof want, "  accumulator: %s\n", names[i][1] ? names[i][1] : names[i][0]);
        gp_scenario s;
        gp_error err = {{0}};
        if (load_str(text, &s, &err) != 0)
            fail_msg("%s: %s", names[i][0], err.msg);
        assert_int_equal(s.precision.acc_scaled, 1);
        assert_int_equal(s.precision.accumulator, GP_FP32);
        char *y = gp_scenario_to_yaml(&s);
        assert_non_null(strstr(y, want));
        free(y);
        assert_round_trip(&s);
        gp_scenario_free(&s);
    }
    expect_str_error("precision: {accumulator: \"fp8_e4m3:delayed\"}", "1:26", "re-quantized from its own amax");
    expect_str_error("precision: {accumulator: mxfp8_e4m3}", "1:26", "block formats (MX, NVFP4, blockwise)");
    expect_str_error("precision: {accumulator: \"fp8_e4m3:current:sr\"}", "1:26", "stochastic rounding of a scaled");
    expect_str_error("precision: {accumulator: \"fp8_e4m3:current\", rounding: kahan}", "1:56", "rounding: rne");
    expect_str_error("precision: {grad: mxfp4, accumulator: \"fp8_e4m3:current\"}", "1:39", "with a scaled grad");
    expect_str_error("precision: {accumulator: \"fp8_e4m3:current\"}\ndistributed: {world_size: 2}\n", "2:14",
                     "not modelled across ranks");
}

/* optimizer.fused: torch_cpu: the state follows the param when not given; printed back. */
static void test_fused_optimizer(void **state)
{
    (void)state;
    gp_scenario s;
    gp_error err = {{0}};
    assert_int_equal(load_str("optimizer: {param: bf16, fused: torch_cpu}\n", &s, &err), 0);
    assert_int_equal(s.optimizer.fused, 1);
    assert_int_equal(s.optimizer.state, GP_BF16);
    assert_round_trip(&s);
    char *y = gp_scenario_to_yaml(&s);
    assert_non_null(strstr(y, "  state: bf16\n"));
    assert_non_null(strstr(y, "  fused: torch_cpu\n"));
    free(y);
    gp_scenario_free(&s);
    assert_int_equal(load_str("optimizer: {param: fp16, state: fp16, fused: torch_cpu}\n", &s, &err), 0);
    assert_int_equal(s.optimizer.state, GP_FP16);
    gp_scenario_free(&s);
    assert_int_equal(load_str("optimizer: {param: bf16}\n", &s, &err), 0);
    assert_int_equal(s.optimizer.fused, 0);
    assert_int_equal(s.optimizer.state, GP_FP32); /* without fused the default stays fp32 */
    gp_scenario_free(&s);
}

static void test_bad_files(void **state)
{
    (void)state;
    /* libyaml's mark: the plain scalar "unclosed seed" runs on until the ':' of line 2 */
    expect_file_error("bad_malformed.yaml", "2:5", "while parsing a flow sequence at 1:7");
    expect_file_error("bad_unknown_key.yaml", "3:1", "unknown top-level key 'learning_rate'");
    expect_file_error("bad_unknown_nested_key.yaml", "4:3", "unknown key 'acumulator' in precision");
    expect_file_error("bad_wrong_type.yaml", "3:33", "expected a number");
    expect_file_error("bad_nan_threshold.yaml", "4:19", "threshold for underflow_frac is NaN");
    expect_file_error("bad_unknown_metric.yaml", "2:46", "unknown metric 'absorbtion_frac'");
    expect_file_error("bad_size_too_large.yaml", "3:11", "too large");
    expect_file_error("bad_tokens_length.yaml", "3:11", "has 3 entries but batch.microbatches is 4");
    expect_file_error("bad_negative_tokens.yaml", "1:40", "batch.tokens[1] must be at least 1");
    expect_file_error("bad_loss_scale_init.yaml", "3:9", "loss_scale.init must be a power of two");
    expect_file_error("bad_duplicate_tensor.yaml", "4:11", "duplicate tensor name 'a' (first at 2:11)");
    expect_file_error("bad_reduction.yaml", "2:12", "unknown reduction 'median'");
    expect_file_error("bad_truncated.yaml", "4:1", "flow mapping");
    expect_file_error("bad_empty.yaml", "1:1", "empty");
}

static void test_bad_inline(void **state)
{
    (void)state;
    /* types */
    expect_str_error("steps: [1]", "1:8", "expected an integer, got a list");
    expect_str_error("steps: \"5\"", "1:8", "got the string \"5\"");
    expect_str_error("steps: 5x", "1:8", "expected an integer");
    expect_str_error("steps: 0", "1:8", "at least 1");
    expect_str_error("steps:", "1:7", "got nothing");
    expect_str_error("tensors: {name: a}", "1:10", "expected a list");
    expect_str_error("tensors: []", "1:10", "at least one tensor");
    expect_str_error("tensors: [{size: 4}]", "1:11", "missing required key 'name'");
    expect_str_error("tensors: [a]", "1:11", "expected a mapping");
    expect_str_error("precision: [bf16]", "1:12", "expected a mapping");
    expect_str_error("precision: {ftz: yes}", "1:18", "true or false");
    expect_str_error("precision: {grad: fp12}", "1:19", "fp8_e4m3");
    expect_str_error("precision: {rounding: nearest}", "1:23", "kahan");
    /* numbers */
    expect_str_error("clip: {max_norm: .inf}", "1:18", "clip.max_norm is infinite");
    expect_str_error("clip: {max_norm: 1e999}", "1:18", "infinite");
    expect_str_error("clip: {max_norm: -1}", "1:18", ">= 0");
    expect_str_error("optimizer: {lr: nan}", "1:17", "NaN");
    expect_str_error("optimizer: {lr: 0.1.2}", "1:17", "expected a number");
    expect_str_error("optimizer: {betas: [0.9, 1.0]}", "1:26", "[0, 1)");
    expect_str_error("optimizer: {betas: [0.9]}", "1:20", "two numbers");
    expect_str_error("optimizer: {eps: 0}", "1:18", "> 0");
    expect_str_error("exact_metrics: weight_rel_err", "1:16", "exact_metrics: expected a list of metric names");
    expect_str_error("exact_metrics: [weight_rel_err, nope]", "1:33", "exact_metrics: 'nope' is not a metric");
    expect_str_error("exact_metrics: [overflow_count, overflow_count]", "1:33", "'overflow_count' is listed twice");
    expect_str_error("optimizer: {name: sgd}", "1:19", "adamw");
    expect_str_error("optimizer: {master: bf16}", "1:21", "none, fp32");
    expect_str_error("optimizer: {param: fp8_e4m3}", "1:20", "fp32, bf16 or fp16");
    expect_str_error("optimizer: {state: e5m2}", "1:20", "fp32, bf16 or fp16");
    expect_str_error("optimizer: {master: fp32, kahan: true}", "1:34", "replaces the master copy");
    expect_str_error("optimizer: {kahan: true, stochastic: true}", "1:20", "rounds to nearest");
    expect_str_error("optimizer: {fused: true}", "1:20", "none, torch_cpu");
    expect_str_error("optimizer: {fused: torch_cpu, master: fp32}", "1:20", "no master, kahan or stochastic");
    expect_str_error("optimizer: {param: bf16, state: fp32, fused: torch_cpu}", "1:33", "param's dtype (bf16)");
    expect_str_error("loss_scale: {growth: 1}", "1:22", "> 1");
    expect_str_error("loss_scale: {backoff: 1}", "1:23", "(0, 1)");
    expect_str_error("loss_scale: {interval: 0}", "1:24", "at least 1");
    expect_str_error("loss_scale: {init: 0}", "1:20", "> 0");
    expect_str_error("loss_scale: {init: 0x1p200}", "1:20", "2^127");
    expect_str_error("tensors: [{name: a, grad: {scale: 0}}]", "1:35", "> 0");
    expect_str_error("tensors: [{name: a, grad: {sigma: -1}}]", "1:35", "> 0");
    expect_str_error("tensors: [{name: a, grad: {sparsity: 1}}]", "1:38", "[0, 1)");
    expect_str_error("tensors: [{name: a, grad: {sign: 1.5}}]", "1:34", "[0, 1]");
    expect_str_error("tensors: [{name: a, grad: {dist: cauchy}}]", "1:34", "lognormal");
    expect_str_error("tensors: [{name: a, grad: {outliers: {fraction: 0.1}}}]", "1:39", "allowed: frac, scale");
    expect_str_error("tensors: [{name: a, size: 0}]", "1:27", "at least 1");
    expect_str_error("tensors: [{name: a, size: -5}]", "1:27", "at least 1");
    expect_str_error("seed: -1", "1:7", "non-negative");
    expect_str_error("seed: 18446744073709551616", "1:7", "too large");
    expect_str_error("schedule: {name: exponential}", "1:18", "inverse_sqrt");
    expect_str_error("schedule: {gamma: 0}", "1:19", "> 0");
    expect_str_error("thresholds: {max_ulp_err: -.inf}", "1:27", "threshold for max_ulp_err is infinite");
    expect_str_error("thresholds: [max_ulp_err]", "1:13", "expected a mapping");
    expect_str_error("thresholds: {max_ulp_err: 1, max_ulp_err: 2}", "1:30", "duplicate key");
    /* names, keys, structure */
    expect_str_error("name: x\nsteps: 2\nname: y\n", "3:1", "duplicate key 'name' (first at 1:1)");
    expect_str_error("clip: {max_norm: 1, max_norm: 2}", "1:21", "duplicate key 'max_norm' in clip");
    expect_str_error("[1, 2]", "1:1", "expected a mapping");
    expect_str_error("just text", "1:1", "expected a mapping");
    expect_str_error("# only a comment\n", "1:1", "empty");
    expect_str_error("a: 1\n---\nb: 2\n", "3:1", "only one YAML document");
    expect_str_error("name: \"\"", "1:7", "got nothing");
    expect_str_error("name: 0123456789012345678901234567890123456789012345678901234567890123456789"
                     "012345678901234567890123456789012345678901234567890123456789",
                     "1:7", "too long");
    expect_str_error("name: \"a\\tb\"", "1:7", "control character");
    expect_str_error("{[1]: 2}", "1:2", "a key must be a name");
    expect_str_error("name: x\n  bad indent: 1\n", "2:13", "mapping values are not allowed");
    expect_str_error("name: \"\\xff\\x01\"\nsteps: \xff\n", "2:8", "invalid");
    /* sizes that cannot fit in memory: 9 tensors of 2^31 elements exceed 64 GiB */
    expect_str_error("tensors: [{name: a, size: 2147483648}, {name: b, size: 2147483648},\n"
                     "  {name: c, size: 2147483648}, {name: d, size: 2147483648},\n"
                     "  {name: e, size: 2147483648}, {name: f, size: 2147483648},\n"
                     "  {name: g, size: 2147483648}, {name: h, size: 2147483648},\n"
                     "  {name: i, size: 2147483648}]\n",
                     "5:19", "cannot fit in memory");
    expect_str_error("tensors: [{name: a, size: 2147483649}]", "1:27", "too large");
}

static void test_file_names(void **state)
{
    (void)state;
    gp_scenario s;
    gp_error err = {{0}};
    char dir[] = "/tmp/gp_scenario_test_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[600];
    snprintf(path, sizeof path, "%s/my-run.yml", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("steps: 2\n", f);
    fclose(f);
    assert_int_equal(gp_scenario_load_file(path, &s, &err), 0);
    assert_string_equal(s.name, "my-run");
    gp_scenario_free(&s);
    remove(path);
    remove(dir);

    assert_int_equal(load_str("steps: 2\n", &s, &err), 0);
    assert_string_equal(s.name, "scenario");
    gp_scenario_free(&s);

    /* an unreadable file names the path */
    data_path(path, sizeof path, "no_such_file.yaml");
    assert_int_equal(gp_scenario_load_file(path, &s, &err), -1);
    assert_int_equal(strncmp(err.msg, path, strlen(path)), 0);
    assert_non_null(strstr(err.msg, "cannot open"));
    assert_pristine(&s);
    assert_int_equal(gp_scenario_load_file(data_dir, &s, &err), -1); /* a directory */
    assert_non_null(strstr(err.msg, ": is a directory"));
    assert_pristine(&s);

    /* the origin of a string is the caller's */
    assert_int_equal(gp_scenario_load_string("steps: x", 8, "preset:tiny", &s, &err), -1);
    assert_int_equal(strncmp(err.msg, "preset:tiny:1:8: ", 17), 0);
    /* len is honoured: the text past it is not read */
    assert_int_equal(gp_scenario_load_string("steps: 3garbage", 8, "inline", &s, &err), 0);
    assert_int_equal(s.steps, 3);
    gp_scenario_free(&s);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        data_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_design_example),
        cmocka_unit_test(test_design_example_verbatim),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_explicit_values),
        cmocka_unit_test(test_tokens_forms),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_fused_optimizer),
        cmocka_unit_test(test_scaled_grad),
        cmocka_unit_test(test_scaled_accumulator),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_bad_inline),
        cmocka_unit_test(test_file_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
