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

#include "harness/run/gp_attrib.h"
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

/* Saturation (issue 27): an overflowing sum stored as the format's max finite. One element,
 * fp32 gradients 40000 then 30000, sum/sum, an fp8 e5m2 accumulator rounding toward zero
 * (the one rounding that stores an overflow so: IEEE 754 7.4). e5m2's binade [32768, 65536)
 * has ulp 8192, max finite 57344 = 7 x 8192. Micro-batch 1: 0 + 40000 truncates to 32768,
 * local error -7232 (rounding: 40000 < 61440 = 57344 + 4096 does not overflow to nearest).
 * Micro-batch 2: 32768 + 30000 = 62768 truncates to 57344, error -5424; to nearest 62768 >=
 * 61440 overflows: saturation, not rounding or absorption (the accumulator changed anyway).
 * The errors add to 57344 - 70000 = -12656. loss[rounding] = 7232 / 70000, loss[saturation]
 * = 5424 / 70000 (squares and square roots exact in binary64, one rounding of the quotient);
 * no overflow is counted (no inf); grad_rel_err_fullbatch = 12656 / 70000 = 0.18 fails
 * 2 x the e5m2 floor, and the verdict names saturation (its loss is beyond its floor 0, and
 * it comes before rounding in gp_mechanism's order). */
static void test_rtz_saturation(void **state)
{
    (void)state;
    static const char yaml[] = "reduction: sum\nfullbatch: sum\n"
                               "precision: {grad: fp32, accumulator: fp8_e5m2, rounding: rtz}\n"
                               "tensors:\n  - name: w\n    grad: {values: [[40000.0], [30000.0]]}\n";
    gp_result r;
    run_text(yaml, &r);
    assert_true(r.loss[GP_MECH_ROUNDING] == 7232.0 / 70000.0);
    assert_true(r.loss[GP_MECH_SATURATION] == 5424.0 / 70000.0);
    assert_true(r.loss[GP_MECH_ABSORPTION] == 0);
    assert_true(r.loss[GP_MECH_OVERFLOW] == 0);
    assert_true(r.metric[GP_M_OVERFLOW_COUNT] == 0);
    assert_true(r.metric[GP_M_ABSORBED_FRAC] == 0);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_SATURATION);
    gp_result_free(&r);
}

/* Scaled gradients (issue 25 item 2). One element (explicit values: a block of one), one
 * micro-batch of one token 480, sum/sum. MXFP8 e4m3 under the OCP spec's floor rule: the
 * block's shared scale is X = 2^(floor(log2 amax) - 8) (8: e4m3's largest exponent) =
 * 2^(8 - 8) = 1, so 480 / X = 480 lies beyond e4m3's max 448 (= 1.110b x 2^8; 480 would be
 * 1.111b x 2^8, the NaN code of e4m3fn; 480 > 448 + 32 / 2 overflows to nearest): the
 * saturating MX cast stores 448, saturation (not overflow). Error -32: loss[saturation] =
 * sqrt(32^2) / sqrt(480^2) = 32 / 480 (gp_verdict_ratio: sqrt(num) / sqrt(den), both roots
 * exact), nothing else lost, overflow_count 0; grad_rel_err_fullbatch = 1/15 fails the
 * default threshold (1e-3: fp32's floor) and the verdict names saturation. */
static void test_mx_block_saturation(void **state)
{
    (void)state;
    static const char yaml[] = "reduction: sum\nfullbatch: sum\n"
                               "precision: {grad: mxfp8_e4m3, accumulator: fp32}\n"
                               "tensors:\n  - name: w\n    grad: {values: [[480.0]]}\n";
    gp_result r;
    run_text(yaml, &r);
    assert_true(r.loss[GP_MECH_SATURATION] == 32.0 / 480.0);
    assert_true(r.loss[GP_MECH_OVERFLOW] == 0);
    assert_true(r.loss[GP_MECH_ROUNDING] == 0);
    assert_true(r.loss[GP_MECH_UNDERFLOW] == 0);
    assert_true(r.metric[GP_M_OVERFLOW_COUNT] == 0);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] == 32.0 / 480.0);
    assert_true(r.st.stale_sat == 0); /* not delayed scaling: no stale scale */
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_SATURATION);
    gp_result_free(&r);
}

/* fp8 e4m3 with delayed scaling (Transformer Engine: the first step uses the initial
 * scale 1; the history is empty). One element, one token 480, sum/sum. With the saturating
 * cast, 480 x 1 > 448 is clamped to 448: saturation (loss 32 / 480), and it is a stale scale: 1 saturated element, the delayed scale
 * was 1, the current amax 480 needed 448 / 480. With ":nosat" the OCP cast stores 480 as
 * NaN (e4m3 has no inf): overflow_count 1 (a failed count: it names overflow, as before
 * this change), nonfinite_count 1, nothing counts as saturation or stale scale. */
static void test_delayed_stale_saturation(void **state)
{
    (void)state;
    static const char sat[] = "reduction: sum\nfullbatch: sum\n"
                              "precision: {grad: \"fp8_e4m3:delayed:hist=16\", accumulator: fp32}\n"
                              "tensors:\n  - name: w\n    grad: {values: [[480.0]]}\n";
    gp_result r;
    run_text(sat, &r);
    assert_true(r.loss[GP_MECH_SATURATION] == 32.0 / 480.0);
    assert_true(r.loss[GP_MECH_OVERFLOW] == 0);
    assert_true(r.metric[GP_M_OVERFLOW_COUNT] == 0);
    assert_true(r.st.stale_sat == 1);
    assert_true(r.st.stale_scale == 1.0);
    assert_true(r.st.stale_need == 448.0 / 480.0);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_SATURATION);
    gp_result_free(&r);
    static const char nosat[] = "reduction: sum\nfullbatch: sum\n"
                                "precision: {grad: \"fp8_e4m3:delayed:hist=16:nosat\", accumulator: fp32}\n"
                                "tensors:\n  - name: w\n    grad: {values: [[480.0]]}\n";
    run_text(nosat, &r);
    assert_true(r.metric[GP_M_OVERFLOW_COUNT] == 1);
    assert_true(r.metric[GP_M_NONFINITE_COUNT] == 1);
    assert_true(r.loss[GP_MECH_SATURATION] == 0);
    assert_true(r.st.stale_sat == 0);
    assert_int_equal(r.verdict, GP_FAIL);
    assert_int_equal(r.dominant, GP_MECH_OVERFLOW);
    gp_result_free(&r);
}

/* gp_attrib_saturated at the overflow thresholds, by hand: e4m3's max finite 448 =
 * 1.110b x 2^8 (bits 0x7e), its ulp 32: 464 is the tie between 448 (even significand) and
 * 480, so it rounds to 448 (no overflow: not saturated); 464 plus any positive error rounds
 * to 480, beyond 448: saturated. e5m2's 57344 = 1.11b x 2^15 (0x7b), ulp 8192: the tie
 * 61440 goes to 65536 (even), an overflow: saturated; 61439 is not. The sign must match
 * (0xfb is -57344) and a NaN sum is never saturated. 8 cases. */
static void test_saturated_thresholds(void **state)
{
    (void)state;
    assert_false(gp_attrib_saturated(GP_FP8_E4M3, 0x7eu, 464.0, 0.0));
    assert_true(gp_attrib_saturated(GP_FP8_E4M3, 0x7eu, 464.0, 0x1p-40));
    assert_true(gp_attrib_saturated(GP_FP8_E5M2, 0x7bu, 61440.0, 0.0));
    assert_false(gp_attrib_saturated(GP_FP8_E5M2, 0x7bu, 61439.0, 0.0));
    assert_true(gp_attrib_saturated(GP_FP8_E5M2, 0xfbu, -70000.0, 0.0));
    assert_false(gp_attrib_saturated(GP_FP8_E5M2, 0x7bu, -70000.0, 0.0));
    assert_false(gp_attrib_saturated(GP_FP8_E5M2, 0x7bu, NAN, 0.0));
    assert_false(gp_attrib_saturated(GP_FP8_E5M2, 0x7au, 70000.0, 0.0));
}

/* Stale updates count only non-zero exact updates (docs/model.md: stale_update_frac =
 * updates that left the stored weight unchanged / non-zero exact updates). Two tensors of
 * 4 elements, bf16 weights at 1.0 without a master, weight_decay 0, lr 1e-3, 2 steps of one
 * micro-batch of one token (sum/sum). "moves": gradient 1e-3, so Adam's step is
 * lr * m^/(sqrt(v^) + eps) = 1e-3 * |g|/(|g| + 1e-8) ~ 1e-3, below half the bf16 ulp under
 * 1.0 (the next value down is 1 - 2^-8, the rounding boundary 1 - 2^-9 = 1 - 1.95e-3): every
 * non-zero update leaves the weight unchanged, 4 x 2 = 8 stale of 8 non-zero. "still": the
 * same gradient under its own lr 0 (a torch param group with lr 0, docs/scenarios.md), so
 * the exact update lr * m^/(sqrt(v^) + eps) is 0 and there is no decay (lr * wd = 0): no
 * update at all, neither non-zero nor stale though its weight did not change. Totals:
 * nonzero 8, stale 8, stale_update_frac 1 (counting the zero updates as stale: 16 of 8). */
static void test_zero_update_not_stale(void **state)
{
    (void)state;
    static const char yaml[] =
        "tensors:\n"
        "  - {name: moves, size: 4, grad: {dist: constant, scale: 1.0e-3, sign: 0.0},\n"
        "     weight: {dist: constant, scale: 1.0, sign: 0.0}}\n"
        "  - {name: still, size: 4, grad: {dist: constant, scale: 1.0e-3, sign: 0.0},\n"
        "     weight: {dist: constant, scale: 1.0, sign: 0.0}, optimizer: {lr: 0.0}}\n"
        "batch: {microbatches: 1, tokens: 1}\nreduction: sum\nfullbatch: sum\n"
        "optimizer: {lr: 1.0e-3, weight_decay: 0.0, param: bf16}\nsteps: 2\n";
    gp_result r;
    run_text(yaml, &r);
    assert_int_equal(r.st.opt.nonzero, 8);
    assert_int_equal(r.st.opt.stale, 8);
    assert_true(r.metric[GP_M_STALE_UPDATE_FRAC] == 1.0);
    assert_true(r.stale_by_step[0] == 1.0 && r.stale_by_step[1] == 1.0);
    gp_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e4m3_nan_accumulator_not_absorbed),
        cmocka_unit_test(test_fp16_inf_accumulator_not_absorbed),
        cmocka_unit_test(test_unscale_overflow_split),
        cmocka_unit_test(test_rtz_saturation),
        cmocka_unit_test(test_saturated_thresholds),
        cmocka_unit_test(test_mx_block_saturation),
        cmocka_unit_test(test_delayed_stale_saturation),
        cmocka_unit_test(test_zero_update_not_stale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
