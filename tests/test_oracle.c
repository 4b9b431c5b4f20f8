/* test_oracle.c — conformance of kernels/arith/gp_format.h against the MPFR oracle,
 * in the TestFloat spirit: every boundary (each value of the 8/16-bit formats, every
 * halfway point and both its binary64 and binary32 neighbours, min subnormal, min
 * normal, max finite, the overflow threshold, zeros, infinities, NaNs; binade edges
 * of fp32) and a seeded random sweep (GP_SWEEP_N values, default 10^6, per format and
 * mode; seed printed, forced with GP_TEST_SEED). Bits and events must agree exactly;
 * for NaN results NaN-ness and INVALID are compared (the oracle has no payloads).
 * Stochastic rounding: bit-exact against the oracle's own derivation of the rule,
 * always one of the two neighbours, and unbiased within a stated bound. */
#include <float.h>
#include <math.h>

#include "gp_test.h"

#include "kernels/arith/gp_philox.h"
#include "kernels/gp_vocab.h"
#include "reference/gp_oracle.h"

static long g_checked;

/* Kernel vs oracle on one binary64 input; returns nothing, fails the test on mismatch. */
static void check_d(gp_format f, double x, gp_rmode mode, uint32_t rbits, int ftz)
{
    unsigned kev = 0;
    uint32_t kb = gp_fmt_from_f64(f, x, mode, rbits, ftz, &kev);
    gp_oracle_result o;
    gp_oracle_round_d(f, x, mode, rbits, ftz, &o);
    g_checked++;
    if (gp_fmt_isnan(f, o.bits) || gp_fmt_isnan(f, kb)) {
        gp_assert_bits(gp_fmt_isnan(f, kb), gp_fmt_isnan(f, o.bits),
                       "NaN-ness: fmt %d mode %d ftz %d x=%a (0x%016llx)", f, mode, ftz, x,
                       (unsigned long long)gp_f64_bits(x));
        uint32_t sbit = 1u << (gp_fmt_get(f).width - 1);
        if (x == x) /* a NaN made from a number (e4m3 overflow): sign must agree too */
            gp_assert_bits(kb & sbit, o.bits & sbit, "NaN sign: fmt %d x=%a", f, x);
    } else {
        gp_assert_bits(kb, o.bits, "bits: fmt %d mode %d ftz %d rbits 0x%08x x=%a (0x%016llx)", f,
                       mode, ftz, rbits, x, (unsigned long long)gp_f64_bits(x));
    }
    gp_assert_bits(kev, o.ev, "events: fmt %d mode %d ftz %d x=%a (0x%016llx) kernel bits 0x%x", f,
                   mode, ftz, x, (unsigned long long)gp_f64_bits(x), kb);
}

/* The same input through the fp32 entry point as well, when it is a float. */
static void check_both(gp_format f, double x, gp_rmode mode, uint32_t rbits, int ftz)
{
    check_d(f, x, mode, rbits, ftz);
    float xf = (float)x;
    if ((double)xf == x) {
        unsigned e1 = 0, e2 = 0;
        uint32_t a = gp_fmt_from_f32_bits(f, gp_f32_bits(xf), mode, rbits, ftz, &e1);
        uint32_t b = gp_fmt_from_f64(f, x, mode, rbits, ftz, &e2);
        gp_assert_bits(a, b, "fp32 entry vs fp64 entry, x=%a", x);
        gp_assert_bits(e1, e2, "fp32 entry events, x=%a", x);
    }
}

static void check_all_modes(gp_format f, double x)
{
    for (int ftz = 0; ftz < 2; ftz++)
        for (int mode = 0; mode < gp_vocab_count(GP_VOCAB_RMODE); mode++) /* every deterministic mode */
            if (mode != GP_STOCHASTIC) {
                check_both(f, x, (gp_rmode)mode, 0, ftz);
                check_both(f, -x, (gp_rmode)mode, 0, ftz);
            }
}

/* A value, its binary64 neighbours and its binary32 neighbours. */
static void check_around(gp_format f, double x)
{
    check_all_modes(f, x);
    check_all_modes(f, nextafter(x, INFINITY));
    check_all_modes(f, nextafter(x, 0.0));
    float xf = (float)x;
    if ((double)xf == x) {
        check_all_modes(f, (double)nextafterf(xf, INFINITY));
        check_all_modes(f, (double)nextafterf(xf, 0.0f));
    }
}

/* Formats small enough to enumerate: every finite value and every halfway point
 * between consecutive values (exact in binary64: p+1 <= 12 bits), with neighbours. */
static void boundaries_small(gp_format f)
{
    gp_fmt_info fi = gp_fmt_get(f);
    for (uint32_t b = 0; b <= fi.maxfin; b++) {
        double v = gp_fmt_to_f64(f, b);
        check_around(f, v);
        double next = b < fi.maxfin ? gp_fmt_to_f64(f, b + 1)
                                    : v + ldexp(1.0, fi.emax - fi.p + 1); /* first value beyond */
        check_around(f, (v + next) / 2); /* halfway; for b = maxfin: the overflow threshold */
        if (b == fi.maxfin) {
            check_around(f, next);
            check_around(f, 2 * next);
        }
    }
}

static void specials(gp_format f)
{
    const double sp[] = {0.0, INFINITY, NAN, DBL_MAX, DBL_MIN, DBL_TRUE_MIN, FLT_MAX, FLT_MIN,
                         0x1p-149, 0x1p-150, 1.0, 0.1, 65504.0, 448.0, 57344.0};
    for (size_t k = 0; k < sizeof sp / sizeof sp[0]; k++)
        check_around(f, sp[k]);
    /* signalling NaN: INVALID, NaN result */
    double snan = gp_f64_from_bits(0x7ff0000000000001ull);
    check_d(f, snan, GP_RNE, 0, 0);
    check_d(f, -snan, GP_RTZ, 0, 1);
}

static void test_boundaries_bf16(void **s) { (void)s; boundaries_small(GP_BF16); specials(GP_BF16); }
static void test_boundaries_fp16(void **s) { (void)s; boundaries_small(GP_FP16); specials(GP_FP16); }
static void test_boundaries_e4m3(void **s) { (void)s; boundaries_small(GP_FP8_E4M3); specials(GP_FP8_E4M3); }
static void test_boundaries_e5m2(void **s) { (void)s; boundaries_small(GP_FP8_E5M2); specials(GP_FP8_E5M2); }

/* fp32: per binade from below the min subnormal to beyond the overflow threshold: the
 * binade's edges, the first and last values, the halfway points next to them. */
static void test_boundaries_fp32(void **state)
{
    (void)state;
    specials(GP_FP32);
    for (int k = -152; k <= 129; k++) {
        double p2 = ldexp(1.0, k);
        double q = ldexp(1.0, (k < -126 ? -126 : k) - 23); /* fp32 quantum in this binade */
        check_around(GP_FP32, p2);
        check_around(GP_FP32, p2 + q / 2);
        check_around(GP_FP32, p2 + q + q / 2);
        check_around(GP_FP32, 2 * p2 - q / 2);
        check_around(GP_FP32, 2 * p2 - q - q / 2);
    }
}

/* Random inputs steered to where rounding is hard: random exponents across and just
 * beyond the format's range, and low bits set to tie / just-below-tie / just-above-tie
 * patterns at the format's rounding position. */
static double hard_random(gp_format f, uint64_t *s)
{
    gp_fmt_info fi = gp_fmt_get(f);
    uint64_t r = gp_test_next(s);
    int lo = fi.emin - fi.p - 3, hi = fi.emax + 2;
    int X = lo + (int)(gp_test_next(s) % (uint64_t)(hi - lo + 1));
    uint64_t mant = gp_test_next(s) & 0xfffffffffffffull;
    int q = (X < fi.emin ? fi.emin : X) - (fi.p - 1); /* quantum exponent at X */
    int cut = X - q;                                   /* mantissa bits kept below the leading 1 */
    if (cut >= 0 && cut < 52) {
        uint64_t below = (1ull << (52 - cut)) - 1;     /* bits that get rounded away */
        uint64_t tie = (below + 1) >> 1;
        switch (r & 7) {
        case 0: mant = (mant & ~below) | tie; break;          /* exact tie */
        case 1: mant = (mant & ~below) | (tie - 1); break;    /* just below */
        case 2: mant = (mant & ~below) | (tie + 1); break;    /* just above */
        case 3: mant = mant & ~below; break;                  /* exact */
        case 4: mant = (mant & ~below) | below; break;        /* all ones */
        default: break;                                       /* random */
        }
    }
    double x = ldexp(1.0 + ldexp((double)mant, -52), X);
    return (r >> 8) & 1 ? -x : x;
}

static void sweep(gp_format f)
{
    uint64_t seed = gp_test_seed(0x6772616470726563ull + (uint64_t)f);
    long n = gp_test_count("GP_SWEEP_N", 1000000);
    uint64_t s = seed;
    for (int mode = 0; mode < gp_vocab_count(GP_VOCAB_RMODE); mode++) /* every mode of kernels/gp_vocab.h */
        for (long k = 0; k < n; k++) {
            double x;
            uint64_t r = gp_test_next(&s);
            if ((r & 3) == 0) /* a random binary32 through the fp32 path too */
                x = (double)gp_f32_from_bits((uint32_t)(r >> 32));
            else
                x = hard_random(f, &s);
            int ftz = ((r >> 2) & 7) == 0;
            uint32_t rbits = (uint32_t)gp_test_next(&s);
            check_both(f, x, (gp_rmode)mode, rbits, ftz);
        }
}

static void test_sweep_fp32(void **s) { (void)s; sweep(GP_FP32); }
static void test_sweep_bf16(void **s) { (void)s; sweep(GP_BF16); }
static void test_sweep_fp16(void **s) { (void)s; sweep(GP_FP16); }
static void test_sweep_e4m3(void **s) { (void)s; sweep(GP_FP8_E4M3); }
static void test_sweep_e5m2(void **s) { (void)s; sweep(GP_FP8_E5M2); }

/* Stochastic rounding statistics. For x with fraction f between neighbours lo < hi
 * (quantum q), each result is lo or hi, and hi comes with probability
 * P = floor(f*2^32)/2^32, so E[result] = lo + P*q, and |x - E| <= q*2^-32. Over N
 * independent draws the mean's standard deviation is q*sqrt(P(1-P)/N); we require
 * |mean - x| <= 6 q sqrt(f(1-f)/N) + q 2^-32 (a false alarm below 2e-9 per check
 * for ideal random bits; the bound does not depend on the data). */
static void sr_mean(gp_format f, double x, uint64_t seed, uint64_t stream)
{
    const long N = 1 << 20;
    uint32_t lo = gp_fmt_from_f64(f, x, GP_RTZ, 0, 0, NULL);
    double lov = gp_fmt_to_f64(f, lo), hiv = gp_fmt_to_f64(f, lo + 1);
    double q = fabs(hiv - lov), frac = fabs(x - lov) / q;
    double sum = 0;
    for (long i = 0; i < N; i++) {
        uint32_t b = gp_fmt_from_f64(f, x, GP_STOCHASTIC, gp_rand_u32(seed, stream, (uint64_t)i), 0, NULL);
        if (b != lo && b != lo + 1)
            fail_msg("stochastic result 0x%x is not a neighbour (0x%x, 0x%x) of %a", b, lo, lo + 1, x);
        sum += gp_fmt_to_f64(f, b) - lov; /* exact: small multiples of q */
    }
    double mean = lov + sum / N;
    double bound = 6 * q * sqrt(frac * (1 - frac) / N) + q * 0x1p-32;
    if (fabs(mean - x) > bound)
        fail_msg("stochastic rounding biased at %a: mean %a, |mean-x| = %g > bound %g (seed %llu)",
                 x, mean, fabs(mean - x), bound, (unsigned long long)seed);
}

static void test_stochastic_unbiased(void **state)
{
    (void)state;
    uint64_t seed = gp_test_seed(20261122);
    sr_mean(GP_BF16, 1.0 + 0.1 * 0x1p-7, seed, 1);
    sr_mean(GP_BF16, 1.0 + 0.5 * 0x1p-7, seed, 2);
    sr_mean(GP_BF16, -(1.0 + 0.9 * 0x1p-7), seed, 3);
    sr_mean(GP_BF16, 3e-6, seed, 4);
    sr_mean(GP_FP16, 0x1p-26, seed, 5);            /* a quarter of the min subnormal */
    sr_mean(GP_FP16, 1.0 + (1.0 / 3) * 0x1p-10, seed, 6);
    sr_mean(GP_FP8_E4M3, 0.3, seed, 7);
    sr_mean(GP_FP8_E5M2, 0.3, seed, 8);
}

static int report_count(void **state)
{
    (void)state;
    printf("# %ld kernel/oracle comparisons\n", g_checked);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundaries_bf16),
        cmocka_unit_test(test_boundaries_fp16),
        cmocka_unit_test(test_boundaries_e4m3),
        cmocka_unit_test(test_boundaries_e5m2),
        cmocka_unit_test(test_boundaries_fp32),
        cmocka_unit_test(test_sweep_fp32),
        cmocka_unit_test(test_sweep_bf16),
        cmocka_unit_test(test_sweep_fp16),
        cmocka_unit_test(test_sweep_e4m3),
        cmocka_unit_test(test_sweep_e5m2),
        cmocka_unit_test(test_stochastic_unbiased),
    };
    return cmocka_run_group_tests(tests, NULL, report_count);
}
