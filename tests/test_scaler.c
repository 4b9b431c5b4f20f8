/* test_scaler.c — kernels/arith/gp_scaler.h: torch GradScaler's dynamic loss scale
 * (defaults init 2^16, growth 2, backoff 0.5, interval 2000) step by step, growth
 * stopping at the fp32 range, backoff down through the subnormals to 0, torch's double
 * rounding of the factor product, and the unscale multiplier. Expected values are powers
 * of two or hand-derived roundings, reasoned in the comments. */
#include <float.h>
#include <math.h>

#include "gp_test.h"

#include "kernels/arith/gp_scaler.h"

#define GROWTH 2.0
#define BACKOFF 0.5
#define INTERVAL 2000

/* `n` default updates, all finite (found_inf 0) or all non-finite (1). */
static void steps(gp_scaler *s, int n, int found_inf)
{
    for (int i = 0; i < n; i++)
        gp_scaler_update(s, found_inf, GROWTH, BACKOFF, INTERVAL);
}

static void expect(const gp_scaler *s, float scale, int32_t tracker, const char *what)
{
    gp_assert_bits(gp_f32_bits(s->scale), gp_f32_bits(scale), "%s: scale %a, want %a", what,
                   (double)s->scale, (double)scale);
    gp_assert_bits((uint32_t)s->tracker, (uint32_t)tracker, "%s: tracker", what);
}

/* A stretch of a trajectory: n default updates with one found_inf, then the state. */
typedef struct {
    int n, found_inf;
    float scale;
    int32_t tracker;
    const char *what;
} leg;

/* From a fresh default scaler (2^16, tracker 0), leg after leg. */
static void run_legs(const leg *l, size_t k)
{
    gp_scaler s = gp_scaler_init(65536.0);
    for (size_t i = 0; i < k; i++) {
        steps(&s, l[i].n, l[i].found_inf);
        expect(&s, l[i].scale, l[i].tracker, l[i].what);
    }
}

/* torch.full((), 2.0**16, dtype=float32) and a zero tracker; a decimal init is rounded
 * once: 0.1 = 0x1.999999...p-4, whose fraction bits are 1001 repeated; the 23 kept end in
 * ...1001 100 and the rest start 1 1001... (above half an ulp): up, 0x1.99999ap-4. */
static void test_init(void **state)
{
    (void)state;
    gp_scaler s = gp_scaler_init(65536.0);
    expect(&s, 65536.0f, 0, "default init");
    s = gp_scaler_init(0.1);
    expect(&s, 0x1.99999ap-4f, 0, "init 0.1");
}

/* Growth: the tracker counts 1..1999 and the 2000th finite update (successful == 2000)
 * doubles the scale, exactly (a power of two times 2), and resets the tracker; the next
 * growth needs another full 2000. */
static void test_default_growth(void **state)
{
    (void)state;
    static const leg l[] = {{1, 0, 65536.0f, 1, "after 1 finite"},
                            {1998, 0, 65536.0f, 1999, "after 1999 finite"},
                            {1, 0, 131072.0f, 0, "after 2000 finite"},
                            {1999, 0, 131072.0f, 1999, "after 3999 finite"},
                            {1, 0, 262144.0f, 0, "after 4000 finite"}};
    run_legs(l, sizeof l / sizeof *l);
}

/* Backoff: an inf step halves (65536 * 0.5 = 32768 exactly) and zeroes the tracker. */
static void test_default_backoff(void **state)
{
    (void)state;
    static const leg l[] = {{1, 1, 32768.0f, 0, "one inf step"},
                            {5, 0, 32768.0f, 5, "5 finite after"},
                            {1, 1, 16384.0f, 0, "inf resets the tracker"}};
    run_legs(l, sizeof l / sizeof *l);
}

/* 1999 finite (tracker 1999, no growth yet), an inf (halved to 2^15, tracker 0: the
 * 1999 successes are lost), then 2000 finite: the growth comes at the 2000th of those,
 * back to 2^16, not at the first (which would have been the 2000th overall). */
static void test_default_interrupted(void **state)
{
    (void)state;
    static const leg l[] = {{1999, 0, 65536.0f, 1999, "1999 finite"},
                            {1, 1, 32768.0f, 0, "then inf"},
                            {1, 0, 32768.0f, 1, "then 1 finite"},
                            {1998, 0, 32768.0f, 1999, "then 1999 finite"},
                            {1, 0, 65536.0f, 0, "then 2000 finite"}};
    run_legs(l, sizeof l / sizeof *l);
}

/* Growth past the fp32 range is refused and the tracker still resets. From 2^16 the
 * k-th growth gives 2^(16+k): 111 growths reach 2^127, the 112th would be 2^128, which
 * rounds to +inf in binary32 (above FLT_MAX = 2^128 - 2^104 by more than half an ulp),
 * so the scale stays 2^127. FLT_MAX * 2 likewise. */
static void test_growth_stops_finite(void **state)
{
    (void)state;
    static const leg l[] = {{111 * INTERVAL, 0, 0x1p127f, 0, "111 growths"},
                            {INTERVAL, 0, 0x1p127f, 0, "112th growth refused"}};
    run_legs(l, sizeof l / sizeof *l);
    gp_scaler s;
    s.scale = FLT_MAX;
    s.tracker = INTERVAL - 1;
    steps(&s, 1, 0);
    expect(&s, FLT_MAX, 0, "FLT_MAX * 2 refused");
}

/* The finiteness test is on the rounded float, as torch's std::isfinite(new_scale):
 * 2^127 * (2 - 3*2^-25) = 2^128 - 3*2^102 (exact in binary64: 26 significant bits) lies
 * between FLT_MAX = 2^128 - 2^104 and the midpoint 2^128 - 2^103, so it rounds down to
 * FLT_MAX: kept. 2^127 * (2 - 2^-24) = 2^128 - 2^103 is the midpoint itself: ties to
 * even, and FLT_MAX's significand is odd (all ones), so it rounds to 2^128 = +inf:
 * refused. */
static void test_growth_near_overflow(void **state)
{
    (void)state;
    gp_scaler s = {0x1p127f, 0};
    gp_scaler_update(&s, 0, 2.0 - 3 * 0x1p-25, 0.5, 1);
    expect(&s, FLT_MAX, 0, "rounds to FLT_MAX: kept");
    s.scale = 0x1p127f;
    gp_scaler_update(&s, 0, 2.0 - 0x1p-24, 0.5, 1);
    expect(&s, 0x1p127f, 0, "tie to +inf: refused");
}

/* The backoff chain: k halvings from 2^16 give 2^(16-k) exactly while that is a float:
 * k = 142 is 2^-126 (min normal), k = 143 the first subnormal 2^-127, k = 165 the least
 * subnormal 2^-149. k = 166 gives 2^-150, exactly halfway between 0 and 2^-149 (odd
 * significand 1): ties to even give +0. Then 0 * 0.5 = 0, and growth keeps 0 (0 * 2 = 0
 * is finite). */
static void test_backoff_chain(void **state)
{
    (void)state;
    gp_scaler s = gp_scaler_init(65536.0);
    for (int k = 1; k <= 165; k++) {
        steps(&s, 1, 1);
        expect(&s, ldexpf(1.0f, 16 - k), 0, "halving");
    }
    expect(&s, 0x1p-149f, 0, "least subnormal");
    steps(&s, 1, 1);
    expect(&s, 0.0f, 0, "2^-150 ties to 0");
    steps(&s, 3, 1);
    expect(&s, 0.0f, 0, "0 stays 0");
    steps(&s, INTERVAL, 0);
    expect(&s, 0.0f, 0, "0 * 2 = 0: kept, tracker reset");
}

/* torch multiplies the float scale by the double factor in binary64 and rounds that to
 * float: two roundings. With m = (2^54 + 2^30 + 1)/3 (an integer: 2^54 and 2^30 are 1
 * mod 3, so the numerator is 0 mod 3; and 2^52 <= m < 2^53):
 *  - backoff b = m * 2^-54 (about 1/3, a double), scale 3: 3b = 1 + 2^-24 + 2^-54.
 *  - growth g = m * 2^-52 (about 4/3, a double), scale 0.75 = 3*2^-2: the same product.
 * In binary64 the 2^-54 is a quarter ulp of [1,2): rounds to 1 + 2^-24. In binary32 that
 * is the midpoint of 1 and 1 + 2^-23: ties to even give 1. A single rounding of the exact
 * product (above the midpoint) would give 1 + 2^-23. torch's answer, and ours: 1.0f. */
static void test_double_rounding(void **state)
{
    (void)state;
    uint64_t num = (1ull << 54) + (1ull << 30) + 1;
    assert_true(num % 3 == 0);
    uint64_t m = num / 3;
    assert_true(m >= (1ull << 52) && m < (1ull << 53));
    gp_scaler s = {3.0f, 7};
    gp_scaler_update(&s, 1, 2.0, (double)m * 0x1p-54, INTERVAL);
    expect(&s, 1.0f, 0, "backoff: double rounding to 1");
    s.scale = 0.75f;
    s.tracker = 0;
    gp_scaler_update(&s, 0, (double)m * 0x1p-52, 0.5, 1);
    expect(&s, 1.0f, 0, "growth: double rounding to 1");
}

/* The product is formed in binary64, not in binary32 with a rounded factor. k = 11184813
 * = (2^25 + 7)/3; b = (32k - 14) * 2^-30 lies 14 * 2^-30 = 0.4375 ulp below the float
 * k * 2^-25, so (float)b = k * 2^-25. Scale 3:
 *  - torch: 3b = (2^30 + 182) * 2^-30 exactly in binary64; the binary32 midpoint above
 *    1 + 2^-23 is 1 + 192 * 2^-30, so it rounds down to 1 + 2^-23;
 *  - all-float arithmetic, 3 * (float)b = 1 + 7 * 2^-25, is above that midpoint: 1 + 2^-22. */
static void test_factor_in_binary64(void **state)
{
    (void)state;
    uint64_t k = ((1ull << 25) + 7) / 3;
    assert_true(k * 3 == (1ull << 25) + 7);
    double b = (double)(32 * k - 14) * 0x1p-30;
    gp_assert_bits(gp_f32_bits((float)b), gp_f32_bits((float)k * 0x1p-25f), "(float)b");
    gp_scaler s = {3.0f, 0};
    gp_scaler_update(&s, 1, 2.0, b, INTERVAL);
    expect(&s, 1.0f + 0x1p-23f, 0, "binary64 product");
}

/* Tracker edge cases torch's kernel allows: interval 1 grows on every finite step; a
 * tracker above the interval never equals it again and keeps counting. */
static void test_tracker_edges(void **state)
{
    (void)state;
    gp_scaler s = {1.0f, 0};
    for (int k = 1; k <= 5; k++) {
        gp_scaler_update(&s, 0, 2.0, 0.5, 1);
        expect(&s, ldexpf(1.0f, k), 0, "interval 1");
    }
    s.tracker = 2500;
    gp_scaler_update(&s, 0, 2.0, 0.5, INTERVAL);
    expect(&s, 32.0f, 2501, "tracker past the interval");
}

/* inv = (float)(1/(double)scale). Powers of two are exact: 2^16 -> 2^-16; down the
 * chain 2^-126 -> 2^126, 2^-127 -> 2^127, 2^-128 -> 2^128 = +inf in binary32, 0 -> +inf.
 * 3 -> 1/3 = 0x1.5555...p-2: the bits after the 23rd fraction bit are 1010... (> half):
 * up to 0x1.555556p-2. Then on random scales it equals the correctly rounded float
 * reciprocal 1.0f/s (double rounding of a quotient through binary64 is innocuous:
 * 53 >= 2*24 + 2). */
static void test_inv(void **state)
{
    (void)state;
    gp_assert_bits(gp_f32_bits(gp_scaler_inv(65536.0f)), gp_f32_bits(0x1p-16f), "inv 2^16");
    gp_assert_bits(gp_f32_bits(gp_scaler_inv(0x1p-126f)), gp_f32_bits(0x1p126f), "inv 2^-126");
    gp_assert_bits(gp_f32_bits(gp_scaler_inv(0x1p-127f)), gp_f32_bits(0x1p127f), "inv 2^-127");
    gp_assert_bits(gp_f32_bits(gp_scaler_inv(0x1p-128f)), 0x7f800000u, "inv 2^-128");
    gp_assert_bits(gp_f32_bits(gp_scaler_inv(0.0f)), 0x7f800000u, "inv 0");
    gp_assert_bits(gp_f32_bits(gp_scaler_inv(3.0f)), gp_f32_bits(0x1.555556p-2f), "inv 3");
    uint64_t seed = gp_test_seed(0x5ca1e5ull);
    long n = gp_test_count("GP_SWEEP_N", 200000);
    for (long i = 0; i < n; i++) {
        uint32_t u = (uint32_t)gp_test_next(&seed) & 0x7fffffffu;
        if (u >= 0x7f800000u)
            continue;
        float s = gp_f32_from_bits(u);
        gp_assert_bits(gp_f32_bits(gp_scaler_inv(s)), gp_f32_bits(1.0f / s), "inv %a", (double)s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_default_growth),
        cmocka_unit_test(test_default_backoff),
        cmocka_unit_test(test_default_interrupted),
        cmocka_unit_test(test_growth_stops_finite),
        cmocka_unit_test(test_growth_near_overflow),
        cmocka_unit_test(test_backoff_chain),
        cmocka_unit_test(test_double_rounding),
        cmocka_unit_test(test_factor_in_binary64),
        cmocka_unit_test(test_tracker_edges),
        cmocka_unit_test(test_inv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
