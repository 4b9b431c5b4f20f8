/* test_sr_lag.c — the all-lags test of stochastic rounding's random bits (harness/run/gp_sr_lag.h):
 * its FFT sums against the direct sums, a correct rounding from fresh bits below the
 * threshold, bits of period 2^16 caught at lag 2^16. */
#include <math.h>
#include <stdlib.h>

#include "gp_test.h"

#include "harness/run/gp_sr_lag.h"
#include "kernels/arith/gp_philox.h"

/* S_L and V_L by their definitions (O(n^2)), against the FFT's, for n = 2, 3, 1000 and
 * 6000 (N = 16384: past the FFT's in-cache block of 8192, so its wide stages run too)
 * pseudo-random u in [-1, 1], w in [0, 1/4]. The FFT's error: each output is a sum of at
 * most n products of magnitude <= 1, through 2 log2(N) butterfly levels of binary64
 * (relative error ~ 2^-53 each) over values of magnitude <= n: below n * 2 log2(N) * 2^-52
 * ~ 4e-11 for n = 6000, N = 16384; the test allows 1e-9 (the score needs far less:
 * T > 20). 2 x 5999 + 2 x 999 + 2 x 2 + 2 x 1 values compared. */
static void test_fft_matches_direct(void **state)
{
    (void)state;
    static const size_t ns[] = {2, 3, 1000, 6000};
    for (size_t c = 0; c < 4; c++) {
        size_t n = ns[c];
        double *u = malloc(n * sizeof *u), *w = malloc(n * sizeof *w), *S = malloc(n * sizeof *S),
               *V = malloc(n * sizeof *V);
        assert_non_null(u && w && S && V);
        for (size_t i = 0; i < n; i++) {
            u[i] = (double)gp_rand_u32(7, 1, i) * 0x1p-31 - 1.0;
            w[i] = (double)gp_rand_u32(7, 2, i) * 0x1p-34;
        }
        assert_int_equal(gp_sr_lag_sums(u, w, n, S, V), 0);
        for (size_t L = 1; L < n; L++) {
            double s = 0, v = 0;
            for (size_t j = L; j < n; j++) {
                s += u[j - L] * u[j];
                v += u[j - L] * u[j - L] * w[j];
            }
            assert_true(fabs(S[L] - s) <= 1e-9);
            assert_true(fabs(V[L] - v) <= 1e-9);
        }
        free(u);
        free(w);
        free(S);
        free(V);
    }
}

/* n roundings with fractions f_i uniform (from one Philox stream) and the decision up_i =
 * (r_i < floor(f_i 2^32)), r_i = the random word of element `index(i)`: fresh bits
 * (index i) or bits of period 2^16 (index i mod 2^16). Returns the score over n - 1 lags. */
static double score_of(size_t n, int periodic, size_t *worst)
{
    double *u = malloc(n * sizeof *u), *w = malloc(n * sizeof *w);
    assert_non_null(u && w);
    for (size_t i = 0; i < n; i++) {
        uint32_t fb = gp_rand_u32(11, 3, i);
        double f = (double)fb * 0x1p-32;
        uint32_t r = gp_rand_u32(11, 4, periodic ? (i & 0xffffu) : i);
        u[i] = (double)(r < fb) - f;
        w[i] = f * (1 - f);
    }
    double z = gp_sr_lag_score(u, w, n, n - 1, 0, worst);
    free(u);
    free(w);
    return z;
}

/* Fresh bits: below 1 (a false alarm has probability <= 1e-9 by gp_sr_lag.h's bound; the
 * seed is fixed, so this run is one draw of it). Period 2^16 over n = 2^17 + 1000: at lag
 * 2^16 there are 66536 pairs sharing a word, each E[u u'] = min(f, f') - f f' = 1/12 for
 * independent uniform f, f' (E min = 1/3, E f f' = 1/4): S ~ 5545 (sd ~ sqrt(66536 / 36)
 * ~ 43 from the fractions' spread), V ~ 66536 / 36 ~ 1848 (E u^2 = E w = 1/6), Lam =
 * ln(130 x 132071 / 1e-9) ~ 37.4, T ~ 2 x 37.4 / 3 + 2 sqrt(1848 x 37.4) ~ 551: a score
 * near 10, at lag 65536 (lag 131072 has 1000 pairs: S ~ 83). */
static void test_fresh_and_periodic(void **state)
{
    (void)state;
    size_t n = (1u << 17) + 1000, worst = 0;
    double fresh = score_of(n, 0, &worst);
    assert_true(fresh >= 0 && fresh < 1);
    double periodic = score_of(n, 1, &worst);
    print_message("sr lag score: fresh bits %.4f, period 2^16 %.2f at lag %zu\n", fresh, periodic, worst);
    assert_true(periodic > 5);
    assert_int_equal(worst, 65536);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fft_matches_direct),
        cmocka_unit_test(test_fresh_and_periodic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
