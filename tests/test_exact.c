/* test_exact.c — reference/gp_exact.c against GMP and MPFR. Every expected value is
 * computed independently of the code under test: the integer n*x*2^149 by MPFR from
 * the float (mpfr_set_flt, exact multiplications, mpfr_get_z), sums by mpz, the
 * quotient a/d by MPFR (one correct rounding to 53 bits inside binary64's exponent
 * range, subnormals included) and its residual sign by exact mpq comparison.
 * Hand cases (exact sums, cancellation to zero, the 2^339 extreme, min subnormal,
 * 1/3, binary64 ties), a seeded random sweep (GP_SWEEP_N additions in total, default
 * 200000, over accumulators of 1..300 terms; seed printed, forced with GP_TEST_SEED),
 * and gp_nudge. */
#include <float.h>
#include <math.h>
#include <stdio.h> /* before gmp.h, for gmp_fprintf */
#include <string.h>

#include <gmp.h>
#include <mpfr.h>

#include "gp_test.h"

#include "kernels/arith/gp_arith.h"
#include "reference/gp_exact.h"

/* ---- the independent side: GMP/MPFR ---- */

/* z += n * x * 2^149, exactly (24 + 31 bits fit the 64-bit precision). */
static void ref_add(mpz_t z, float x, uint32_t n)
{
    mpfr_t t;
    mpfr_init2(t, 64);
    mpfr_set_flt(t, x, MPFR_RNDN);
    mpfr_mul_ui(t, t, n, MPFR_RNDN);
    mpfr_mul_2si(t, t, 149, MPFR_RNDN);
    mpz_t p;
    mpz_init(p);
    mpfr_get_z(p, t, MPFR_RNDN);
    mpz_add(z, z, p);
    mpz_clear(p);
    mpfr_clear(t);
}

/* z * 2^-149 / d correctly rounded to binary64 (RNE, subnormals allowed) and the sign
 * of (exact - result) from an exact mpq comparison. */
static double ref_div(const mpz_t z, uint64_t d, int *sticky)
{
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_t num, q;
    mpfr_init2(num, (mpfr_prec_t)mpz_sizeinbase(z, 2) + 8);
    mpfr_set_z(num, z, MPFR_RNDN);           /* exact */
    mpfr_div_2ui(num, num, 149, MPFR_RNDN);  /* exact (wide default range) */
    mpfr_set_emin(-1073);
    mpfr_set_emax(1024);
    mpfr_init2(q, 53);
    int t = mpfr_div_ui(q, num, (unsigned long)d, MPFR_RNDN);
    t = mpfr_check_range(q, t, MPFR_RNDN);
    mpfr_subnormalize(q, t, MPFR_RNDN);
    double r = mpfr_get_d(q, MPFR_RNDN); /* exact: q is a binary64 value */
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    mpfr_clear(q);
    mpfr_clear(num);

    mpq_t exact, got;
    mpq_inits(exact, got, NULL);
    mpz_set(mpq_numref(exact), z);
    mpz_set_ui(mpq_denref(exact), 1);
    mpz_mul_2exp(mpq_denref(exact), mpq_denref(exact), 149);
    mpz_t dz;
    mpz_init(dz);
    mpz_import(dz, 1, -1, sizeof d, 0, 0, &d);
    mpz_mul(mpq_denref(exact), mpq_denref(exact), dz);
    mpq_canonicalize(exact);
    mpq_set_d(got, r);
    int c = mpq_cmp(exact, got);
    *sticky = (c > 0) - (c < 0);
    mpz_clear(dz);
    mpq_clears(exact, got, NULL);
    return r;
}

/* 1 if z * 2^-149 / d is exactly halfway between two binary64 values (statistics
 * only: says whether the sweep reaches round-half-even). */
static int ref_is_tie(const mpz_t z, uint64_t d)
{
    mpfr_t num, q;
    mpfr_init2(num, (mpfr_prec_t)mpz_sizeinbase(z, 2) + 8);
    mpfr_set_z(num, z, MPFR_RNDN);
    mpfr_init2(q, 54);
    int t54 = mpfr_div_ui(q, num, (unsigned long)d, MPFR_RNDN);
    int tie = t54 == 0 && !mpfr_zero_p(q) && mpfr_min_prec(q) == 54;
    mpfr_clear(q);
    mpfr_clear(num);
    return tie;
}

/* ---- checks ---- */

static long g_div_checked, g_ties, g_inexact;

static void check_mpz(const gp_fixacc *a, const mpz_t want, const char *what)
{
    mpz_t got;
    mpz_init(got);
    gp_fixacc_get_mpz(got, a);
    if (mpz_cmp(got, want) != 0) {
        gmp_fprintf(stderr, "%s: got %Zd\n  want %Zd\n", what, got, want);
        mpz_clear(got);
        fail_msg("accumulator differs from GMP (%s)", what);
    }
    mpz_clear(got);
}

static void check_div(const gp_fixacc *a, const mpz_t z, uint64_t d)
{
    int ks = 7, ws = 7;
    double got = gp_fixacc_div(a, d, &ks);
    double want = ref_div(z, d, &ws);
    g_div_checked++;
    g_inexact += ws != 0;
    g_ties += ref_is_tie(z, d);
    gp_assert_bits(gp_f64_bits(got), gp_f64_bits(want), "div by %llu: got %a want %a",
                   (unsigned long long)d, got, want);
    gp_assert_bits((uint64_t)(int64_t)ks, (uint64_t)(int64_t)ws, "sticky, div by %llu, result %a",
                   (unsigned long long)d, want);
}

/* ---- hand cases ---- */

static void test_small_exact(void **state)
{
    (void)state;
    gp_fixacc a;
    int s = 9;
    gp_fixacc_zero(&a);
    gp_fixacc_add(&a, 0.5f, 3);
    gp_fixacc_add(&a, 0.25f, 1);
    gp_assert_bits(gp_f64_bits(gp_fixacc_div(&a, 1, &s)), gp_f64_bits(1.75), "0.5*3 + 0.25");
    gp_assert_bits((uint64_t)(int64_t)s, 0, "sticky of an exact sum");
    gp_assert_bits(gp_f64_bits(gp_fixacc_div(&a, 7, &s)), gp_f64_bits(0.25), "1.75 / 7");
    gp_assert_bits((uint64_t)(int64_t)s, 0, "sticky of an exact quotient");

    /* x then -x: every limb back to zero, for values that borrow across all limbs */
    const float xs[] = {1.0f, -3.5f, FLT_MAX, -FLT_MAX, 0x1p-149f, -0x1p-149f, 0x1.fffffep-127f,
                        1e-20f, -12345.678f};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        for (uint32_t n = 1; n < 0x80000000u; n = n * 5u + 1u) {
            gp_fixacc_zero(&a);
            gp_fixacc_add(&a, xs[i], n);
            gp_fixacc_add(&a, -xs[i], n);
            for (int l = 0; l < GP_FIXACC_LIMBS; l++)
                gp_assert_bits(a.limb[l], 0, "x=%a n=%u then -x: limb %d", (double)xs[i], n, l);
            gp_fixacc_add(&a, -xs[i], n); /* the other order, through a negative value */
            gp_fixacc_add(&a, xs[i], n);
            for (int l = 0; l < GP_FIXACC_LIMBS; l++)
                gp_assert_bits(a.limb[l], 0, "-x=%a n=%u then x: limb %d", (double)xs[i], n, l);
        }
    }

    /* zero terms change nothing */
    gp_fixacc_zero(&a);
    gp_fixacc_add(&a, 0.0f, 5);
    gp_fixacc_add(&a, -0.0f, 0x7fffffffu);
    gp_fixacc_add(&a, FLT_MAX, 0);
    for (int l = 0; l < GP_FIXACC_LIMBS; l++)
        gp_assert_bits(a.limb[l], 0, "zero terms: limb %d", l);
    gp_assert_bits(gp_f64_bits(gp_fixacc_div(&a, 3, &s)), gp_f64_bits(0.0), "0 / 3");
    gp_assert_bits((uint64_t)(int64_t)s, 0, "sticky of zero");
}

/* The largest value the contract allows: (2^31-1) terms of (2^31-1) * FLT_MAX, built
 * as (2^31-1) * t by doubling with gp_fixacc_add_acc (2^31 single additions would take
 * seconds), plus 1000 genuine additions on top; both signs. */
static void test_extreme(void **state)
{
    (void)state;
    const uint32_t nmax = 0x7fffffffu;
    for (int sign = 0; sign < 2; sign++) {
        float x = sign ? -FLT_MAX : FLT_MAX;
        gp_fixacc t, a, acc;
        gp_fixacc_zero(&t);
        gp_fixacc_add(&t, x, nmax);
        /* a = (2^31 - 1) * t = sum of t * 2^i, i < 31 */
        gp_fixacc_zero(&a);
        acc = t;
        for (int i = 0; i < 31; i++) {
            gp_fixacc_add_acc(&a, &acc);
            gp_fixacc_add_acc(&acc, &acc);
        }
        mpz_t z, one;
        mpz_inits(z, one, NULL);
        ref_add(one, x, nmax);
        mpz_mul_ui(z, one, nmax);
        check_mpz(&a, z, "(2^31-1)^2 * FLT_MAX");
        for (int i = 0; i < 1000; i++) {
            gp_fixacc_add(&a, -x, nmax);
            ref_add(z, -x, nmax);
            gp_fixacc_add(&a, 0x1p-149f, 1);
            ref_add(z, 0x1p-149f, 1);
        }
        check_mpz(&a, z, "extreme after 2000 more adds");
        check_div(&a, z, 1);
        check_div(&a, z, 3);
        check_div(&a, z, (1ull << 53) - 1);
        mpz_clears(z, one, NULL);
    }
}

static void test_min_subnormal_and_third(void **state)
{
    (void)state;
    gp_fixacc a;
    int s = 9;
    gp_fixacc_zero(&a);
    gp_fixacc_add(&a, 0x1p-149f, 1);
    gp_assert_bits(gp_f64_bits(gp_fixacc_div(&a, 1, &s)), gp_f64_bits(0x1p-149), "2^-149 / 1");
    gp_assert_bits((uint64_t)(int64_t)s, 0, "sticky of 2^-149");

    /* 1/3: expected result and sticky from MPFR/mpq, then checked against the literal */
    gp_fixacc_zero(&a);
    gp_fixacc_add(&a, 1.0f, 1);
    mpz_t z;
    mpz_init(z);
    ref_add(z, 1.0f, 1);
    int ws;
    double want = ref_div(z, 3, &ws);
    gp_assert_bits(gp_f64_bits(want), gp_f64_bits(0x1.5555555555555p-2), "MPFR's 1/3");
    gp_assert_bits((uint64_t)(int64_t)ws, 1, "1/3 lies above its rounding (mpq)");
    check_div(&a, z, 3);
    mpz_clear(z);

    /* the smallest non-zero quotient, 2^-149 / (2^53 - 1), and its negation */
    mpz_t m;
    mpz_init(m);
    gp_fixacc_zero(&a);
    gp_fixacc_add(&a, -0x1p-149f, 1);
    ref_add(m, -0x1p-149f, 1);
    check_div(&a, m, (1ull << 53) - 1);
    check_div(&a, m, 3);
    mpz_clear(m);
}

/* Binary64 ties at 2^53 + 1 and + 3 (round to even, down and up), a tie broken by the
 * least bit of the accumulator, and the same through division by 2^k and negation. */
static void test_ties(void **state)
{
    (void)state;
    struct {
        float hi, lo, tiny;
        double want;
        int sticky;
    } cases[] = {
        {0x1p53f, 1.0f, 0.0f, 0x1p53, 1},              /* 2^53+1 -> 2^53, below */
        {0x1p53f, 3.0f, 0.0f, 0x1p53 + 4, -1},         /* 2^53+3 -> 2^53+4, above */
        {0x1p53f, 1.0f, 0x1p-149f, 0x1p53 + 2, -1},    /* tie broken upward */
        {0x1p53f, 3.0f, -0x1p-149f, 0x1p53 + 2, 1},    /* tie broken downward */
        {0x1p53f, 2.0f, 0.0f, 0x1p53 + 2, 0},          /* exact */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int neg = 0; neg < 2; neg++) {
            for (int k = 0; k < 60; k += 9) {
                float f = neg ? -1.0f : 1.0f;
                gp_fixacc a;
                gp_fixacc_zero(&a);
                gp_fixacc_add(&a, f * cases[i].hi, 1);
                gp_fixacc_add(&a, f * cases[i].lo, 1);
                if (cases[i].tiny != 0.0f)
                    gp_fixacc_add(&a, f * cases[i].tiny, 1);
                int s = 9;
                double got = gp_fixacc_div(&a, 1ull << k, &s);
                double want = ldexp(neg ? -cases[i].want : cases[i].want, -k);
                gp_assert_bits(gp_f64_bits(got), gp_f64_bits(want), "tie case %zu neg %d k %d", i, neg,
                               k);
                gp_assert_bits((uint64_t)(int64_t)s,
                               (uint64_t)(int64_t)(neg ? -cases[i].sticky : cases[i].sticky),
                               "tie case %zu sticky, neg %d k %d", i, neg, k);
                mpz_t w;
                mpz_init(w);
                ref_add(w, f * cases[i].hi, 1);
                ref_add(w, f * cases[i].lo, 1);
                if (cases[i].tiny != 0.0f)
                    ref_add(w, f * cases[i].tiny, 1);
                check_mpz(&a, w, "tie case");
                check_div(&a, w, 1ull << k);
                mpz_clear(w);
            }
        }
    }
}

/* ---- the random sweep ---- */

static float random_float(uint64_t *s, int window_lo, int window_w)
{
    for (;;) {
        uint32_t u = (uint32_t)gp_test_next(s);
        if (window_w >= 0) { /* biased exponent field in [window_lo, window_lo + window_w] */
            uint32_t e = (uint32_t)window_lo + (uint32_t)(gp_test_next(s) % (uint64_t)(window_w + 1));
            if (e > 254)
                e = 254;
            u = (u & 0x807fffffu) | (e << 23);
        }
        if (((u >> 23) & 0xffu) != 0xffu)
            return gp_f32_from_bits(u);
    }
}

static uint32_t random_n(uint64_t *s)
{
    uint64_t r = gp_test_next(s);
    switch (r % 6) {
    case 0: return 0;
    case 1: return 1;
    case 2: return (uint32_t)(r >> 32) % 16u;
    case 3: return (uint32_t)(r >> 32) % 100000u;
    case 4: return 0x7fffffffu - (uint32_t)((r >> 32) % 4u);
    default: return (uint32_t)(r >> 33); /* < 2^31 */
    }
}

static uint64_t random_d(uint64_t *s, int i)
{
    static const uint64_t fixed[] = {1, 3, 7, 512};
    if (i < 4)
        return fixed[i];
    uint64_t r = gp_test_next(s);
    if (i == 4)
        return 1 + r % (1ull << 40);
    return 1 + r % ((1ull << 53) - 1); /* 1 .. 2^53 - 1 */
}

static void test_random_sweep(void **state)
{
    (void)state;
    uint64_t seed = gp_test_seed(0x6578616374ull);
    long total = gp_test_count("GP_SWEEP_N", 200000);
    uint64_t s = seed;
    long added = 0, accs = 0;
    g_div_checked = g_ties = g_inexact = 0;
    mpz_t z, zprev;
    mpz_inits(z, zprev, NULL);
    gp_fixacc prev;
    gp_fixacc_zero(&prev);
    while (added < total) {
        int terms = 1 + (int)(gp_test_next(&s) % 300);
        /* half the accumulators draw exponents from a narrow window, so sums carry about
         * 54 significant bits and cancel, putting the rounding bits in play */
        int narrow = gp_test_next(&s) % 2 == 0;
        int wlo = (int)(gp_test_next(&s) % 255);
        int ww = narrow ? (int)(gp_test_next(&s) % 41) : -1;
        gp_fixacc a;
        gp_fixacc_zero(&a);
        mpz_set_ui(z, 0);
        for (int t = 0; t < terms; t++) {
            float x = random_float(&s, wlo, ww);
            uint32_t n = random_n(&s);
            gp_fixacc_add(&a, x, n);
            ref_add(z, x, n);
        }
        added += terms;
        accs++;
        check_mpz(&a, z, "random sum");
        for (int i = 0; i < 6; i++)
            check_div(&a, z, random_d(&s, i));
        /* a + previous accumulator, through gp_fixacc_add_acc */
        gp_fixacc b = a;
        gp_fixacc_add_acc(&b, &prev);
        mpz_add(zprev, zprev, z);
        check_mpz(&b, zprev, "add_acc");
        check_div(&b, zprev, random_d(&s, 5));
        prev = a;
        mpz_set(zprev, z);
    }
    printf("# %ld additions in %ld accumulators, %ld divisions checked (%ld inexact, %ld "
           "binary64 ties)\n",
           added, accs, g_div_checked, g_inexact, g_ties);
    mpz_clears(z, zprev, NULL);
}

/* ---- gp_nudge ---- */

static void test_nudge(void **state)
{
    (void)state;
    gp_assert_bits(gp_f64_bits(gp_f64_nudge(1.0, 1)), gp_f64_bits(nextafter(1.0, 2.0)), "up from 1");
    gp_assert_bits(gp_f64_bits(gp_f64_nudge(1.0, -1)), gp_f64_bits(nextafter(1.0, 0.0)), "down from 1");
    gp_assert_bits(gp_f64_bits(gp_f64_nudge(1.0, 0)), gp_f64_bits(1.0), "stay at 1");
    gp_assert_bits(gp_f64_bits(gp_f64_nudge(-1.0, 1)), gp_f64_bits(nextafter(-1.0, 0.0)), "up from -1");
    gp_assert_bits(gp_f64_bits(gp_f64_nudge(-1.0, -1)), gp_f64_bits(nextafter(-1.0, -2.0)), "down from -1");
    gp_assert_bits(gp_f64_bits(gp_f64_nudge(0x1p-149, -1)), gp_f64_bits(0x1.fffffffffffffp-150),
                   "down from 2^-149");
}

/* ---- gp_exactsum against gp_fixacc (itself checked against GMP above) ----
 * Narrow exponent spreads stay in the binary64 path; wide ones and huge token counts
 * spill. Every element's quotients must equal the fixacc's bit for bit. */
static void exactsum_case(uint64_t *s, size_t count, int steps, int spread, uint32_t nmax)
{
    enum { NPATH = 4 };
    const gp_exactsum_path paths[NPATH] = {GP_EXACTSUM_PORTABLE, GP_EXACTSUM_SSE2, GP_EXACTSUM_AVX2,
                                           GP_EXACTSUM_AVX512};
    double *sums[NPATH];
    gp_fixacc *spills[NPATH];
    for (int p = 0; p < NPATH; p++) {
        sums[p] = calloc(count, sizeof *sums[p]);
        spills[p] = calloc(count, sizeof *spills[p]);
    }
    double *sum = calloc(count, sizeof *sum);
    gp_fixacc *spill = calloc(count, sizeof *spill), *ref = calloc(count, sizeof *ref);
    float *x = malloc(count * sizeof *x);
    int e0 = (int)(gp_test_next(s) % 200) - 140;
    size_t spilled = 0, reported = 0;
    unsigned char *wide = malloc(count); /* spread < 0: a random fifth of the elements get spread 40, the rest 2 */
    for (size_t i = 0; i < count; i++)
        wide[i] = gp_test_next(s) % 5 == 0;
    for (int k = 0; k < steps; k++) {
        uint32_t n = 1 + (uint32_t)(gp_test_next(s) % nmax);
        for (size_t i = 0; i < count; i++) {
            int sp = spread >= 0 ? spread : wide[i] ? 40 : 2;
            int e = e0 + (int)(gp_test_next(s) % (uint64_t)(2 * sp + 1)) - sp;
            e = e < -149 ? -149 : e > 100 ? 100 : e;
            float v = ldexpf((float)(((uint32_t)gp_test_next(s) & 0x7fffffu) | 0x800000u), e - 23);
            x[i] = gp_test_next(s) & 1 ? -v : v;
            gp_fixacc_add(&ref[i], x[i], n);
        }
        size_t r = gp_exactsum_add(sum, spill, x, n, count);
        reported += r;
        for (int p = 0; p < NPATH; p++) /* every path reports the same number of spills */
            if (gp_exactsum_path_available(paths[p]))
                assert_int_equal(gp_exactsum_add_path(paths[p], sums[p], spills[p], x, n, count), r);
    }
    /* Every instruction-set path, and the automatic choice, makes the same decisions
     * element by element as portable C (paths[0]); the sums are checked below. */
    for (int p = 1; p <= NPATH; p++) {
        if (p < NPATH && !gp_exactsum_path_available(paths[p]))
            continue;
        const double *ps = p < NPATH ? sums[p] : sum;
        const gp_fixacc *pspill = p < NPATH ? spills[p] : spill;
        for (size_t i = 0; i < count; i++) {
            gp_assert_bits(gp_f64_bits(ps[i]), gp_f64_bits(sums[0][i]), "%s path: s of element %zu",
                           p == 1 ? "SSE2" : p == 2 ? "AVX2" : p == 3 ? "AVX-512" : "automatic", i);
            assert_memory_equal(&pspill[i], &spills[0][i], sizeof spill[i]);
        }
    }
    for (int p = 0; p < NPATH; p++) {
        free(sums[p]);
        free(spills[p]);
    }
    const uint64_t ds[] = {1, 3, 8, 1000003};
    double *qn = malloc(count * sizeof *qn);
    assert_non_null(qn);
    for (int j = 0; j < 4; j++) { /* the array form: each element's quotient, as below */
        gp_exactsum_div_n(qn, sum, spill, ds[j], count);
        for (size_t i = 0; i < count; i++) {
            int s2;
            double b = gp_fixacc_div(&ref[i], ds[j], &s2);
            gp_assert_bits(gp_f64_bits(qn[i]), gp_f64_bits(b), "div_n: element %zu / %llu", i,
                           (unsigned long long)ds[j]);
        }
    }
    free(qn);
    for (size_t i = 0; i < count; i++) {
        int used = 0;
        for (int j = 0; j < GP_FIXACC_LIMBS; j++)
            used |= spill[i].limb[j] != 0;
        spilled += used;
        for (int j = 0; j < 4; j++) {
            int s1, s2;
            double a = gp_exactsum_div(sum[i], &spill[i], ds[j], &s1);
            double b = gp_fixacc_div(&ref[i], ds[j], &s2);
            gp_assert_bits(gp_f64_bits(a), gp_f64_bits(b), "element %zu / %llu", i, (unsigned long long)ds[j]);
            gp_assert_bits((uint64_t)(int64_t)s1, (uint64_t)(int64_t)s2, "sticky of element %zu", i);
        }
    }
    /* the reported spills: none reported means every spill is still zero (and then
     * gp_exactsum_div_n without the spills gives the same quotients); each spilled
     * element was reported at least once */
    assert_true(spilled <= reported);
    if (reported == 0) {
        assert_int_equal(spilled, 0);
        double *q0 = malloc(count * sizeof *q0), *q1 = malloc(count * sizeof *q1);
        assert_true(q0 && q1);
        for (int j = 0; j < 4; j++) {
            gp_exactsum_div_n(q0, sum, spill, ds[j], count);
            gp_exactsum_div_n(q1, sum, NULL, ds[j], count);
            assert_memory_equal(q0, q1, count * sizeof *q0);
        }
        free(q0);
        free(q1);
    }
    printf("# exactsum: %zu elements, %d steps, spread %d: %zu spilled (%zu spills reported)\n", count, steps,
           spread, spilled, reported);
    if (spread < 0) /* the mixed case must mix, or it tests nothing the others do not */
        assert_true(spilled > 0 && spilled < count);
    free(wide);
    free(sum);
    free(spill);
    free(ref);
    free(x);
}

static void test_exactsum(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(4242);
    exactsum_case(&s, 1000, 64, 2, 600);        /* binary64 path, mostly */
    exactsum_case(&s, 1000, 64, 40, 600);       /* many spill */
    exactsum_case(&s, 1000, 64, 14, 600);       /* some spill part-way */
    exactsum_case(&s, 1001, 64, 22, 600);       /* odd count: the scalar tail */
    exactsum_case(&s, 300, 8, 3, 1u << 30);     /* n >= 2^29: the fixacc path */
    exactsum_case(&s, 300, 16, 0, 1);           /* equal exponents */
    exactsum_case(&s, 1003, 64, -1, 600);       /* a random fifth of the lanes spill; a 3-tail */
    printf("# paths tested: portable, SSE2 %s, AVX2 %s, AVX-512 %s\n",
           gp_exactsum_path_available(GP_EXACTSUM_SSE2) ? "yes" : "no",
           gp_exactsum_path_available(GP_EXACTSUM_AVX2) ? "yes" : "no (CPU lacks it)",
           gp_exactsum_path_available(GP_EXACTSUM_AVX512) ? "yes" : "no (CPU lacks it)");
}

/* gp_exactsum_div_n without spills is the IEEE quotient s / d of each element (its
 * definition: gp_exactsum_div's quotient, the correct rounding of s / d). A power-of-two d
 * takes the product by 2^-k, which must give the same bits everywhere: quotients that
 * are subnormal (ties among them), that underflow to zero, signed zeros, infinities, the
 * largest finite values; NaN stays NaN. Random bit patterns cover every exponent. */
static void test_exactsum_div_n_without_spills(void **state)
{
    (void)state;
    uint64_t r = gp_test_seed(4343);
    enum { CNT = 4099 };
    static double sv[CNT], q[CNT];
    const double fixed[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 0x1p-1074, -0x1p-1074, 3 * 0x1p-1074,
                            5 * 0x1p-1074, 0x1p-1022, 0x1.8p-1022, DBL_MAX, -DBL_MAX, 1.0, 3.0, 0x1.fffffffffffffp-1020};
    size_t nf = sizeof fixed / sizeof fixed[0];
    for (size_t i = 0; i < CNT; i++)
        sv[i] = i < nf ? fixed[i] : gp_f64_from_bits(gp_test_next(&r)); /* NaN bit patterns too */
    const uint64_t ds[] = {1, 2, 8, 1ull << 31, 1ull << 52, 3, 1000003, (1ull << 53) - 1};
    for (size_t j = 0; j < sizeof ds / sizeof ds[0]; j++) {
        gp_exactsum_div_n(q, sv, NULL, ds[j], CNT);
        for (size_t i = 0; i < CNT; i++) {
            double want = sv[i] / (double)ds[j];
            if (isnan(want))
                assert_true(isnan(q[i]));
            else
                gp_assert_bits(gp_f64_bits(q[i]), gp_f64_bits(want), "element %zu (%a) / %llu", i, sv[i],
                               (unsigned long long)ds[j]);
        }
    }
}

/* Every SIMD path returns with the AVX upper halves cleared (vzeroupper): otherwise the
 * run's later legacy-SSE code and libm's VEX-coded fma/log/exp variants pay a state
 * transition at each call (measured: 4 ns -> 214 ns per fma call on the development VM,
 * which made end-to-end runs about 7 times slower). */
static void test_exactsum_avx_state(void **state)
{
    (void)state;
    enum { CNT = 1003 };
    static double s[CNT];
    static gp_fixacc sp[CNT];
    static float x[CNT];
    for (size_t i = 0; i < CNT; i++)
        x[i] = (float)i * 0x1p-10f;
    const gp_exactsum_path paths[] = {GP_EXACTSUM_AUTO, GP_EXACTSUM_SSE2, GP_EXACTSUM_AVX2, GP_EXACTSUM_AVX512};
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        if (!gp_exactsum_path_available(paths[p]))
            continue;
        gp_exactsum_add_path(paths[p], s, sp, x, 3, CNT);
        int dirty = gp_test_avx_upper_in_use();
        if (dirty < 0) {
            printf("# AVX state: the CPU cannot report it (XGETBV ECX=1), not checked\n");
            return;
        }
        if (dirty)
            fail_msg("gp_exactsum_add_path(path %zu) returned with the AVX upper halves in use", p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_exact),
        cmocka_unit_test(test_extreme),
        cmocka_unit_test(test_min_subnormal_and_third),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_random_sweep),
        cmocka_unit_test(test_nudge),
        cmocka_unit_test(test_exactsum),
        cmocka_unit_test(test_exactsum_div_n_without_spills),
        cmocka_unit_test(test_exactsum_avx_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
