/* test_attribution.c — how the runner splits a loss between mechanisms when a value
 * becomes non-finite (docs/scenarios.md, "The mechanism a verdict names"): a gradient
 * that overflows on its store (e4m3 to NaN, fp16 to +inf) leaves a non-finite
 * accumulator, which later additions do not change but do not count as absorbed; an
 * overflow made by unscaling is attributed to overflow, not to rounding. Every expected
 * value is worked out by hand in the comments. Part of tests/mutate.py's subset (fast:
 * scenarios of one element on the CPU backend). */
#include <math.h>
#include <string.h>

#include "gp_test.h"

#include "harness/sources/gp_backend.h"
#include "harness/run/gp_runner.h"

static void run_text(const char *yaml, gp_result *res)
{
    gp_error e = {""};
    gp_scenario sc;
    gp_backend b;
    if (gp_scenario_load_string(yaml, strlen(yaml), "test", &sc, &e) != 0)
        fail_msg("scenario: %s", e.msg);
    if (gp_backend_open("cpu", &b, &e) != 0)
        fail_msg("backend: %s", e.msg);
    if (gp_run_scenario(&sc, &b, NULL, res, &e) != 0)
        fail_msg("run: %s", e.msg);
    gp_backend_close(&b);
    gp_scenario_free(&sc);
}

/* One element, two micro-batches of one token, values 1000 then 1, sum/sum, e4m3
 * gradients into an fp32 accumulator, no loss scale. e4m3 (OCP "fn", non-saturating,
 * docs/formats.md) has max 448 and no infinity: 1000 is beyond 448 + half its ulp (32 / 2)
 * and is stored as NaN. Micro-batch 1: acc = 0 + NaN = NaN (a non-finite result:
 * non-finite). Micro-batch 2: acc = NaN + 1 = NaN, the same bits as before, but there was
 * no finite sum for the 1 to be absorbed into: non-finite again, not absorption. So:
 * 2 additions of a non-zero addend, none absorbed (absorbed_frac 0); the final gradient
 * is NaN (nonfinite_count 1, loss[non-finite] infinite); nothing rounds, underflows or
 * overflows to infinity (the store's NaN is non-finite); the verdict fails naming
 * non-finite. Before the fix the second addition counted as absorbed (absorbed_frac
 * 1/2 failed its 0.01 threshold first and named absorption). */
static void test_e4m3_nan_accumulator_not_absorbed(void **state)
{
    (void)state;
    static const char yaml[] = "reduction: sum\nfullbatch: sum\n"
                               "precision: {grad: fp8_e4m3, accumulator: fp32}\n"
                               "tensors:\n  - name: w\n    grad: {values: [[1000.0], [1.0]]}\n";
    gp_result r;
    run_text(yaml, &r);
    assert_true(r.metric[GP_M_NONFINITE_COUNT] == 1);
    assert_true(r.metric[GP_M_ABSORBED_FRAC] == 0);
    assert_true(r.metric[GP_M_OVERFLOW_COUNT] == 0);
    assert_true(r.loss[GP_MECH_NONFINITE] == INFINITY);
    assert_true(r.loss[GP_MECH_ABSORPTION] == 0);
    assert_true(r.loss[GP_MECH_ROUNDING] == 0);
    assert_true(r.loss[GP_MECH_UNDERFLOW] == 0);
    assert_true(r.loss[GP_MECH_OVERFLOW] == 0);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_NONFINITE);
    gp_result_free(&r);
}

/* The same with fp16 gradients of 100000 (beyond fp16's max 65504 + half its ulp 32):
 * stored as +inf, an overflow (overflow_count 1, its loss inf - 1e5 = inf under overflow).
 * acc = 0 + inf = +inf (non-finite: the exact sum is infinite), then +inf + 1 = +inf:
 * non-finite, not absorbed. overflow_count and nonfinite_count both fail with an infinite
 * loss; of equal losses the first failed metric in gp_metric's order names the verdict:
 * overflow. */
static void test_fp16_inf_accumulator_not_absorbed(void **state)
{
    (void)state;
    static const char yaml[] = "reduction: sum\nfullbatch: sum\n"
                               "precision: {grad: fp16, accumulator: fp32}\n"
                               "tensors:\n  - name: w\n    grad: {values: [[100000.0], [1.0]]}\n";
    gp_result r;
    run_text(yaml, &r);
    assert_true(r.metric[GP_M_NONFINITE_COUNT] == 1);
    assert_true(r.metric[GP_M_ABSORBED_FRAC] == 0);
    assert_true(r.metric[GP_M_OVERFLOW_COUNT] == 1);
    assert_true(r.loss[GP_MECH_OVERFLOW] == INFINITY);
    assert_true(r.loss[GP_MECH_NONFINITE] == INFINITY);
    assert_true(r.loss[GP_MECH_ABSORPTION] == 0);
    assert_true(r.loss[GP_MECH_ROUNDING] == 0);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_OVERFLOW);
    gp_result_free(&r);
}

/* An overflow made by unscaling (the mechanism of nonfinite-posinf-after-unscale), its
 * loss split by hand. One element, one micro-batch, gradient 70000, sum/sum, fp16
 * gradients and accumulator, a static loss scale 2^-4. Stored: 70000 x 2^-4 = 4375, in
 * [4096, 8192) where fp16's ulp is 4: between 4372 and 4376, nearer 4376 (RNE): a
 * rounding of +1, unscaled +16. Accumulated: 0 + 4376 = 4376 exactly. Unscaled: 4376 x 16 =
 * 70016 exactly, beyond 65504 + 16: +inf, an overflow of a finite exact value, its loss
 * inf. The full-batch gradient is 70000, so loss[rounding] = sqrt(16^2) / sqrt(70000^2) =
 * 16 / 70000 (each step exact in binary64: 256 and 4.9e9 are exact, their square roots
 * exact, the quotient correctly rounded as 16.0 / 70000 is); loss[overflow] = inf;
 * loss[non-finite] = inf (the final gradient is +inf); nothing is absorbed or underflows.
 * Naming this overflow "rounding" (tests/mutate.py's mutant of classify) would make
 * loss[rounding] infinite and loss[overflow] 0. */
static void test_unscale_overflow_split(void **state)
{
    (void)state;
    static const char yaml[] = "reduction: sum\nfullbatch: sum\n"
                               "precision: {grad: fp16, accumulator: fp16}\n"
                               "loss_scale: {mode: static, init: 0.0625}\n"
                               "tensors:\n  - name: w\n    grad: {values: [[70000.0]]}\n";
    gp_result r;
    run_text(yaml, &r);
    assert_true(r.loss[GP_MECH_ROUNDING] == 16.0 / 70000.0);
    assert_true(r.loss[GP_MECH_OVERFLOW] == INFINITY);
    assert_true(r.loss[GP_MECH_NONFINITE] == INFINITY);
    assert_true(r.loss[GP_MECH_ABSORPTION] == 0);
    assert_true(r.loss[GP_MECH_UNDERFLOW] == 0);
    assert_true(r.metric[GP_M_NONFINITE_COUNT] == 1);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_NONFINITE);
    gp_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e4m3_nan_accumulator_not_absorbed),
        cmocka_unit_test(test_fp16_inf_accumulator_not_absorbed),
        cmocka_unit_test(test_unscale_overflow_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
