/* test_stream.c — the streaming session of include/gradprec.h (gradprec_stream_*), from a
 * C program linked against libgradprec.so only. A session fed one optimizer step (two
 * tensors, one sampled, two micro-batches, weights, AdamW state at entry, torch's state
 * after) gives the report a replay of the same data from a safetensors file gives: the
 * same report.json bytes (every metric, per tensor, the sampling estimates) once the
 * dump's name is blanked, and each metric bit for bit; the sampled elements are
 * gradprec_sample_indices' (the public call capture(sample=) uses). Bad calls (out of
 * order, wrong sizes or formats, a skeleton holding the session's keys) each give one
 * line and change nothing: the equality holds with failed calls mixed in.
 * Arguments: a scratch folder. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gp_test.h"
#include "gp_test_dump.h"
#include "../include/gradprec.h"

static const char *scratch;

#define MA 1000 /* tensor a: 1000 elements, 100 sampled */
#define NA 100
#define MB 64   /* tensor b: whole */
#define SEED 7

static const char *const COMMON =
    "reduction: mean\n"
    "precision: {grad: bf16, accumulator: fp32}\n"
    "optimizer: {name: adamw, lr: 0.001, betas: [0.9, 0.999], eps: 1.0e-8, weight_decay: 0.01, param: bf16, "
    "state: fp32}\n";

/* bf16 of the float x (truncation: any bits do; both sides get the same ones). */
static uint16_t bf(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)(u >> 16);
}

/* The step's data: grads [mb][elements] (whole tensors), weights, m, v (at entry), param,
 * m, v after. Values spread over many binades (tiny ones underflow or are absorbed). */
typedef struct {
    uint16_t ga[2][MA], gb[2][MB], wa[MA], wb[MB], pa[MA], pb[MB];
    float ma[MA], va[MA], mb_[MB], vb[MB], ma1[MA], va1[MA], mb1[MB], vb1[MB];
} stepdata;

static void make_data(stepdata *d)
{
    uint64_t x = 88172645463325252ull;
    float r[8];
    for (int i = 0; i < MA + MB; i++) {
        for (int q = 0; q < 8; q++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            r[q] = ((float)(x >> 40) / 16777216.0f - 0.5f) * ldexpf(1.0f, (int)(x % 30) - 20);
        }
        if (i < MA) {
            d->ga[0][i] = bf(r[0]), d->ga[1][i] = bf(r[1]), d->wa[i] = bf(1 + r[2]), d->pa[i] = bf(1 + r[3]);
            d->ma[i] = r[4], d->va[i] = fabsf(r[5]), d->ma1[i] = r[6], d->va1[i] = fabsf(r[7]);
        } else {
            int j = i - MA;
            d->gb[0][j] = bf(r[0]), d->gb[1][j] = bf(r[1]), d->wb[j] = bf(1 + r[2]), d->pb[j] = bf(1 + r[3]);
            d->mb_[j] = r[4], d->vb[j] = fabsf(r[5]), d->mb1[j] = r[6], d->vb1[j] = fabsf(r[7]);
        }
    }
}

/* Replace every occurrence of `what` in s by "DUMP" (in place; "DUMP" is shorter). */
static void blank(char *s, const char *what)
{
    size_t l = strlen(what);
    for (char *p; (p = strstr(s, what));) {
        memcpy(p, "DUMP", 4);
        memmove(p + 4, p + l, strlen(p + l) + 1);
    }
}

static gradprec_result *replay_from_file(const stepdata *d, const uint64_t *idx)
{
    static uint16_t ga[2][NA], wa[NA], pa[NA];
    static float ma[NA], va[NA], ma1[NA], va1[NA];
    for (int j = 0; j < NA; j++) {
        uint64_t i = idx[j];
        ga[0][j] = d->ga[0][i], ga[1][j] = d->ga[1][i], wa[j] = d->wa[i], pa[j] = d->pa[i];
        ma[j] = d->ma[i], va[j] = d->va[i], ma1[j] = d->ma1[i], va1[j] = d->va1[i];
    }
    const st_entry e[] = {
        {"t0/step0/mb0", "BF16", NA, ga[0], sizeof ga[0]}, {"t0/step0/mb1", "BF16", NA, ga[1], sizeof ga[1]},
        {"t0/weight", "BF16", NA, wa, sizeof wa},           {"t0/state/exp_avg", "F32", NA, ma, sizeof ma},
        {"t0/state/exp_avg_sq", "F32", NA, va, sizeof va},  {"t0/step0/param", "BF16", NA, pa, sizeof pa},
        {"t0/step0/exp_avg", "F32", NA, ma1, sizeof ma1},   {"t0/step0/exp_avg_sq", "F32", NA, va1, sizeof va1},
        {"t1/step0/mb0", "BF16", MB, d->gb[0], sizeof d->gb[0]}, {"t1/step0/mb1", "BF16", MB, d->gb[1], sizeof d->gb[1]},
        {"t1/weight", "BF16", MB, d->wb, sizeof d->wb},     {"t1/state/exp_avg", "F32", MB, d->mb_, sizeof d->mb_},
        {"t1/state/exp_avg_sq", "F32", MB, d->vb, sizeof d->vb}, {"t1/step0/param", "BF16", MB, d->pb, sizeof d->pb},
        {"t1/step0/exp_avg", "F32", MB, d->mb1, sizeof d->mb1}, {"t1/step0/exp_avg_sq", "F32", MB, d->vb1, sizeof d->vb1},
    };
    char path[1024], yaml[16384], err[512] = "";
    snprintf(path, sizeof path, "%s/grads.safetensors", scratch);
    write_safetensors(path, e, sizeof e / sizeof *e);
    snprintf(yaml, sizeof yaml,
             "name: eq\nseed: %d\ntensors:\n"
             "  - {name: a, population: %d, grad: {replay: %s, key: t0}, weight: {replay: %s, key: t0},\n"
             "     state: {replay: %s, key: t0, step: 4}, twin: {replay: %s, key: t0}}\n"
             "  - {name: b, grad: {replay: %s, key: t1}, weight: {replay: %s, key: t1},\n"
             "     state: {replay: %s, key: t1, step: 4}, twin: {replay: %s, key: t1}}\n"
             "batch: {accumulation_steps: 2, microbatches: 2, tokens: [3, 5]}\nsteps: 1\n%s",
             SEED, MA, path, path, path, path, path, path, path, path, COMMON);
    gradprec_set *s = gradprec_load_yaml(yaml, strlen(yaml), "file", err, sizeof err);
    if (!s)
        fail_msg("%s", err);
    gradprec_result *r = NULL;
    if (gradprec_run(s, "cpu", NULL, NULL, 1, &r, err, sizeof err) != GRADPREC_OK)
        fail_msg("%s", err);
    gradprec_set_free(s);
    return r;
}

static char *skeleton(void)
{
    static char y[2048];
    snprintf(y, sizeof y, "name: eq\nseed: %d\ntensors:\n  - {name: a, size: %d, sample: %d}\n  - {name: b, size: %d}\n"
             "batch: {accumulation_steps: 2}\n%s", SEED, MA, NA, MB, COMMON);
    return y;
}

#define OK(call) do { char e_[512] = ""; (void)e_; if ((call) != GRADPREC_OK) fail_msg("%s", err); } while (0)

/* One bad call: GRADPREC_BAD_INPUT, one line starting "stream: " that holds `says`. */
static void bad(int rc, const char *err, const char *says)
{
    assert_int_equal(rc, GRADPREC_BAD_INPUT);
    assert_true(strncmp(err, "stream: ", 8) == 0);
    assert_null(strchr(err, '\n'));
    if (!strstr(err, says))
        fail_msg("error '%s' does not say '%s'", err, says);
}

static void test_session_equals_replay(void **state)
{
    (void)state;
    static stepdata d;
    make_data(&d);
    uint64_t idx[NA];
    char err[512] = "";
    assert_int_equal(gradprec_sample_indices(SEED, 0, MA, NA, idx, err, sizeof err), GRADPREC_OK);
    gradprec_result *rf = replay_from_file(&d, idx);

    const char *sk = skeleton();
    gradprec_stream *st = gradprec_stream_open(sk, strlen(sk), "cpu", 1, err, sizeof err);
    if (!st)
        fail_msg("%s", err);
    assert_int_equal(gradprec_stream_tensor_count(st), 2);
    assert_string_equal(gradprec_stream_tensor_name(st, 1), "b");
    assert_int_equal(gradprec_stream_tensor_size(st, 0), MA);
    assert_int_equal(gradprec_stream_tensor_fed(st, 0), NA);
    assert_int_equal(gradprec_stream_tensor_fed(st, 1), MB);
    assert_null(gradprec_stream_tensor_indices(st, 1));
    const uint64_t *si = gradprec_stream_tensor_indices(st, 0);
    assert_non_null(si);
    assert_memory_equal(si, idx, sizeof idx); /* the elements gradprec_sample_indices picks */

    static uint16_t ga1[NA];
    for (int j = 0; j < NA; j++)
        ga1[j] = d.ga[1][idx[j]];
    /* micro-batch 0: tensor a whole (the session gathers its sample), b; a wrong size
     * and a second gradient of b are refused in between and change nothing */
    OK(gradprec_stream_optimizer(st, 0, 0, "param", "bf16", d.wa, MA, 0, err, sizeof err));
    OK(gradprec_stream_grad(st, 0, "bf16", d.ga[0], MA, err, sizeof err));
    bad(gradprec_stream_grad(st, 1, "bf16", d.gb[0], MB - 1, err, sizeof err), err, "63 elements");
    bad(gradprec_stream_grad(st, 1, "fp32", d.gb[0], MB, err, sizeof err), err, "is fp32, the skeleton's is bf16");
    OK(gradprec_stream_grad(st, 1, "bf16", d.gb[0], MB, err, sizeof err));
    bad(gradprec_stream_grad(st, 1, "bf16", d.gb[0], MB, err, sizeof err), err, "a second gradient");
    bad(gradprec_stream_tokens(st, 0, err, sizeof err), err, "tokens: 0");
    OK(gradprec_stream_tokens(st, 3, err, sizeof err));
    bad(gradprec_stream_tokens(st, 3, err, sizeof err), err, "no gradient was fed in micro-batch 1");
    /* micro-batch 1: a's sample gathered by the caller */
    OK(gradprec_stream_grad(st, 1, "bf16", d.gb[1], MB, err, sizeof err));
    OK(gradprec_stream_grad(st, 0, "bf16", ga1, NA, err, sizeof err));
    gradprec_result *r = NULL;
    bad(gradprec_stream_close(st, NULL, 0, &r, NULL, err, sizeof err), err, "has gradients but no tokens");
    assert_null(r);
    assert_int_equal(gradprec_stream_tensor_count(st), 2); /* the session goes on: the step was dropped */

    /* the refused close dropped the step: feed it again, with the optimizer's data */
    OK(gradprec_stream_grad(st, 0, "bf16", d.ga[0], MA, err, sizeof err));
    OK(gradprec_stream_grad(st, 1, "bf16", d.gb[0], MB, err, sizeof err));
    OK(gradprec_stream_tokens(st, 3, err, sizeof err));
    OK(gradprec_stream_grad(st, 0, "bf16", ga1, NA, err, sizeof err));
    OK(gradprec_stream_grad(st, 1, "bf16", d.gb[1], MB, err, sizeof err));
    OK(gradprec_stream_tokens(st, 5, err, sizeof err));
    bad(gradprec_stream_optimizer(st, 0, 0, "momentum", "fp32", d.ma, MA, 4, err, sizeof err), err, "'momentum'");
    bad(gradprec_stream_optimizer(st, 0, 0, "master", "fp32", d.ma, MA, 4, err, sizeof err), err, "no master");
    bad(gradprec_stream_optimizer(st, 0, 1, "param", "fp32", d.ma, MA, 4, err, sizeof err), err, "is fp32");
    const void *ins[2][4] = {{d.wa, d.ma, d.va, NULL}, {d.wb, d.mb_, d.vb, NULL}};
    const void *outs[2][4] = {{d.pa, d.ma1, d.va1, NULL}, {d.pb, d.mb1, d.vb1, NULL}};
    const char *what[3] = {"param", "exp_avg", "exp_avg_sq"}, *fmt[3] = {"bf16", "fp32", "fp32"};
    const uint64_t n[2] = {MA, MB};
    for (int t = 0; t < 2; t++)
        for (int q = 0; q < 3; q++) {
            OK(gradprec_stream_optimizer(st, (size_t)t, 0, what[q], fmt[q], ins[t][q], n[t], 4, err, sizeof err));
            OK(gradprec_stream_optimizer(st, (size_t)t, 1, what[q], fmt[q], outs[t][q], n[t], 0, err, sizeof err));
        }
    bad(gradprec_stream_optimizer(st, 1, 0, "exp_avg", "fp32", d.mb_, MB, 4, err, sizeof err), err, "fed twice");
    char *text = NULL;
    if (gradprec_stream_close(st, "{name: eq}", 10, &r, &text, err, sizeof err) != GRADPREC_OK)
        fail_msg("%s\n%s", err, text ? text : "");
    assert_non_null(text);
    assert_non_null(strstr(text, "population: 1000"));

    /* the same report, byte for byte, once the dumps' names are blanked */
    char *jf = strdup(gradprec_result_json(rf)), *js = strdup(gradprec_result_json(r));
    char path[4096], name[128];
    snprintf(path, sizeof path, "%s/grads.safetensors", scratch);
    blank(jf, path);
    const char *at = strstr(text, "gradprec-session:");
    assert_non_null(at);
    size_t l = strcspn(at, ",} \n");
    assert_true(l < sizeof name);
    memcpy(name, at, l);
    name[l] = '\0';
    blank(js, name);
    assert_string_equal(js, jf);
    /* and each metric bit for bit (scenario and tensors) */
    static const char *const metrics[] = {"grad_rel_err_fullbatch", "underflow_frac", "absorbed_frac",
                                          "normalization_rel_err", "weight_rel_err", "stale_update_frac",
                                          "state_underflow_frac", "grad_norm_ratio", "twin_mismatch_count"};
    int finite = 0;
    for (size_t i = 0; i < sizeof metrics / sizeof *metrics; i++) {
        double a = gradprec_result_metric(rf, 0, metrics[i]), b = gradprec_result_metric(r, 0, metrics[i]);
        assert_memory_equal(&a, &b, sizeof a);
        finite += isfinite(a);
        for (size_t t = 0; t < 2; t++) {
            a = gradprec_result_tensor_metric(rf, 0, t, metrics[i]);
            b = gradprec_result_tensor_metric(r, 0, t, metrics[i]);
            assert_memory_equal(&a, &b, sizeof a);
        }
    }
    assert_true(finite >= 6); /* the comparison is of numbers, not of NaNs */
    assert_true(gradprec_result_metric(r, 0, "twin_mismatch_count") > 0); /* the twin was compared */
    assert_string_equal(gradprec_result_verdict(r, 0), gradprec_result_verdict(rf, 0));
    assert_string_equal(gradprec_result_dominant(r, 0), gradprec_result_dominant(rf, 0));
    free(jf);
    free(js);
    gradprec_stream_text_free(text);
    gradprec_result_free(r);

    /* the next step: nothing of the last one is left (a close now has no micro-batch) */
    bad(gradprec_stream_close(st, NULL, 0, &r, NULL, err, sizeof err), err, "no micro-batch");
    gradprec_stream_free(st);
    gradprec_result_free(rf);
}

static void test_bad_skeletons_and_overrides(void **state)
{
    (void)state;
    char err[512] = "", y[1024];
    static const char *const keys[][2] = {
        {"steps: 3\n", "'steps' is the session's"},
        {"sample: 10\n", "'sample' is the session's"},
        {"batch: {tokens: [4]}\n", "batch.tokens is the session's"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        snprintf(y, sizeof y, "tensors: [{name: a, size: 8}]\n%s", keys[i][0]);
        err[0] = '\0';
        assert_null(gradprec_stream_open(y, strlen(y), NULL, 1, err, sizeof err));
        if (!strstr(err, keys[i][1]))
            fail_msg("'%s' not in '%s'", keys[i][1], err);
    }
    snprintf(y, sizeof y, "tensors: [{name: a, size: 8, grad: {replay: x.safetensors, key: a}}]\n");
    assert_null(gradprec_stream_open(y, strlen(y), NULL, 1, err, sizeof err));
    assert_non_null(strstr(err, "tensors[0].grad is the session's"));
    snprintf(y, sizeof y, "tensors: [{name: a, size: 8}]\nreduction: median\n");
    assert_null(gradprec_stream_open(y, strlen(y), NULL, 1, err, sizeof err));
    assert_non_null(strstr(err, "skeleton:2:")); /* the loader's place */

    /* overrides naming no tensor of the skeleton: refused, the step dropped */
    snprintf(y, sizeof y, "tensors: [{name: a, size: 8}]\nprecision: {grad: fp32}\n");
    gradprec_stream *st = gradprec_stream_open(y, strlen(y), NULL, 1, err, sizeof err);
    if (!st)
        fail_msg("%s", err);
    float g[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    gradprec_result *r = NULL;
    OK(gradprec_stream_grad(st, 0, "fp32", g, 8, err, sizeof err));
    OK(gradprec_stream_tokens(st, 4, err, sizeof err));
    const char *ov = "{tensors: {nope: {optimizer: {lr: 0.1}}}}";
    bad(gradprec_stream_close(st, ov, strlen(ov), &r, NULL, err, sizeof err), err, "nope: no tensor of this name");
    bad(gradprec_stream_grad(st, 1, "fp32", g, 8, err, sizeof err), err, "tensor 1 of 1");
    /* a good step after it */
    OK(gradprec_stream_grad(st, 0, "fp32", g, 8, err, sizeof err));
    OK(gradprec_stream_tokens(st, 4, err, sizeof err));
    ov = "{tensors: {a: {optimizer: {lr: 0.1}}}}";
    OK(gradprec_stream_close(st, ov, strlen(ov), &r, NULL, err, sizeof err));
    /* fp32 gradients of integers accumulate exactly: no error */
    assert_true(gradprec_result_metric(r, 0, "grad_rel_err_fullbatch") == 0.0);
    gradprec_result_free(r);
    gradprec_stream_free(st);
    assert_true(gradprec_api_minor() >= 1);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_stream SCRATCH_DIR\n");
        return 2;
    }
    scratch = argv[1];
    mkdir(scratch, 0755);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_equals_replay),
        cmocka_unit_test(test_bad_skeletons_and_overrides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
