/* test_gen.c — the generator's block paths (harness/sources/gp_gen_simd.h) bit for bit against
 * their scalar definitions on every path this CPU has: Philox4x32-10 per element
 * (kernels/arith/gp_philox.h, itself checked against Random123's vectors in
 * test_philox) and GSL's gsl_cdf_ugaussian_Pinv over every branch and its boundaries,
 * the tails' -log against libm's;
 * then gp_generate / gp_generate_at against the element formula their header states. */
#include "gp_test.h"

#include <float.h>
#include <gsl/gsl_cdf.h>
#include <math.h>
#include <string.h>

#include "harness/sources/gp_gen_simd.h"
#include "harness/sources/gp_generate.h"
#include "kernels/arith/gp_philox.h"

static const gp_gen_path paths[] = {GP_GEN_PORTABLE, GP_GEN_AVX2, GP_GEN_AVX512, GP_GEN_AUTO};
static const char *const path_names[] = {"portable", "avx2", "avx512", "auto"};
#define NPATHS (sizeof paths / sizeof paths[0])

static uint64_t bits_of(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static double double_of(uint64_t b)
{
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* ---- Philox ---- */

/* One call of gp_philox_block against gp_philox4x32_10 per element; words past
 * round_up(n, GP_GEN_PAD) must stay untouched. */
static void check_philox(gp_gen_path path, uint64_t seed, uint64_t stream, uint64_t i0, const uint64_t *idx, size_t n)
{
    enum { CAP = 96, GUARD = 8 };
    assert_true(n <= CAP - GP_GEN_PAD);
    uint32_t buf[4][CAP + GUARD];
    memset(buf, 0xa5, sizeof buf);
    uint32_t *const w[4] = {buf[0], buf[1], buf[2], buf[3]};
    gp_philox_block(path, seed, stream, i0, idx, n, w);
    gp_philox_key key = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    for (size_t j = 0; j < n; j++) {
        uint64_t e = idx ? idx[j] : i0 + j;
        gp_philox_ctr c = {{(uint32_t)e, (uint32_t)(e >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)}};
        gp_philox_ctr r = gp_philox4x32_10(c, key);
        for (int k = 0; k < 4; k++)
            gp_assert_bits(w[k][j], r.v[k], "path %d element %llu word %d n %zu", (int)path, (unsigned long long)e,
                           k, n);
    }
    size_t pad = (n + GP_GEN_PAD - 1) / GP_GEN_PAD * GP_GEN_PAD;
    for (int k = 0; k < 4; k++)
        for (size_t j = pad; j < CAP + GUARD; j++)
            gp_assert_bits(buf[k][j], 0xa5a5a5a5u, "path %d wrote word %d past the pad at %zu", (int)path, k, j);
}

static void test_philox_block(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(0x5eed1e55);
    /* counters whose low word carries into the high word inside a register, and the
     * 64-bit wrap; keys and streams with both halves non-zero */
    const uint64_t starts[] = {0, 1, 0xfffffff0ull, 0xfffffffbull, 0x1fffffff7ull, 0xfffffffffffffff5ull,
                               0x123456789abcdefull};
    for (size_t p = 0; p < NPATHS; p++) {
        if (!gp_gen_path_available(paths[p])) {
            printf("# path %s not on this CPU: skipped\n", path_names[p]);
            continue;
        }
        for (size_t a = 0; a < sizeof starts / sizeof starts[0]; a++)
            for (size_t n = 0; n <= 70; n++)
                check_philox(paths[p], 0x299f31d0a4093822ull, 0x0370734413198a2eull, starts[a], NULL, n);
        for (int t = 0; t < 2000; t++) {
            uint64_t idx[80];
            size_t n = (size_t)(gp_test_next(&s) % 81);
            for (size_t j = 0; j < n; j++)
                idx[j] = gp_test_next(&s) >> (gp_test_next(&s) % 64); /* small and large indices */
            uint64_t seed = gp_test_next(&s), stream = gp_test_next(&s);
            check_philox(paths[p], seed, stream, 0, idx, n);
            check_philox(paths[p], seed, stream, gp_test_next(&s), NULL, n);
        }
        if (gp_test_avx_upper_in_use() == 1)
            fail_msg("path %s returned with the AVX upper halves in use", path_names[p]);
    }
}

/* ---- inverse normal CDF ---- */

/* x = gp_ugaussian_pinv_block(p) on every available path, each lane against GSL's bits;
 * with offsets = 8 every value is also taken at every position inside a register and
 * in the remainder after the last one. */
static void check_pinv(const double *p, size_t n, size_t offsets)
{
    static double x[4096];
    assert_true(n <= 4096);
    for (size_t q = 0; q < NPATHS; q++) {
        if (!gp_gen_path_available(paths[q]))
            continue;
        for (size_t off = 0; off < offsets && off < n; off++) {
            size_t m = n - off;
            gp_ugaussian_pinv_block(paths[q], p + off, m, x);
            for (size_t j = 0; j < m; j++) {
                double want = gsl_cdf_ugaussian_Pinv(p[off + j]);
                gp_assert_bits(bits_of(x[j]), bits_of(want), "path %s p = %a (offset %zu of %zu)", path_names[q],
                               p[off + j], j, m);
            }
            if (m > 2) { /* a length that leaves a remainder after the last register */
                gp_ugaussian_pinv_block(paths[q], p + off, m - 1 - (m % 3), x);
                for (size_t j = 0; j < m - 1 - (m % 3); j++)
                    gp_assert_bits(bits_of(x[j]), bits_of(gsl_cdf_ugaussian_Pinv(p[off + j])), "path %s p = %a",
                                   path_names[q], p[off + j]);
            }
        }
    }
}

/* Up to `k` neighbours each side of v (inside [0, 1]) appended to p. */
static size_t around(double *p, size_t n, double v, int k)
{
    p[n++] = v;
    double lo = v, hi = v;
    for (int i = 0; i < k; i++) {
        lo = nextafter(lo, -1.0);
        hi = nextafter(hi, 2.0);
        p[n++] = lo;
        p[n++] = hi;
    }
    return n;
}

/* The branch boundaries: |p - 0.5| = 0.425 (where p - 0.5 rounds onto 0.425 from
 * several p), P == 0 and P == 1, p = 0.5, the intermediate/tail switch r = 5
 * (p = exp(-25)) on both sides, the smallest subnormal and DBL_MIN, 1 - 2^-53, and
 * inputs outside [0, 1] (GSL's NaN or its infinities). */
static void test_pinv_boundaries(void **state)
{
    (void)state;
    static double p[4096];
    size_t n = 0;
    n = around(p, n, 0.075, 64);
    n = around(p, n, 0.925, 64);
    n = around(p, n, 0.5, 32);
    n = around(p, n, exp(-25.0), 64);
    n = around(p, n, 1.0 - exp(-25.0), 64);
    n = around(p, n, 0.0, 8);
    n = around(p, n, 1.0, 8);
    n = around(p, n, DBL_MIN, 8);
    n = around(p, n, 1.0 - 0x1p-53, 4);
    n = around(p, n, 0x1p-54, 4);
    const double odd[] = {-0.0, 0x1p-1074, -1.0, 2.0, INFINITY, -INFINITY, NAN, 0.1, 0.9, 0.3, 0.7};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        p[n++] = odd[i];
    /* every p whose p - 0.5 is within 64 ulps of +-0.425, found from the difference */
    for (int sgn = -1; sgn <= 1; sgn += 2) {
        double d = sgn * 0.425;
        for (int i = 0; i < 64; i++)
            d = nextafter(d, 0.0);
        for (int i = 0; i < 128; i++, d = nextafter(d, sgn * 1.0))
            p[n++] = d + 0.5;
    }
    assert_true(n <= 4096);
    /* the set must reach both sides of each branch test */
    int central = 0, outside = 0, tail = 0, mid = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(p[i] > 0.0 && p[i] < 1.0))
            continue;
        if (fabs(p[i] - 0.5) <= 0.425)
            central++;
        else if (sqrt(-log(p[i] < 0.5 ? p[i] : 1.0 - p[i])) <= 5.0)
            mid++;
        else
            tail++;
        outside += fabs(p[i] - 0.5) > 0.425;
    }
    printf("# boundary set: %zu values, %d central, %d intermediate, %d tail\n", n, central, mid, tail);
    assert_true(central > 100 && mid > 100 && tail > 50 && outside == mid + tail);
    check_pinv(p, n, 8);
}

/* Random inputs: uniform bits over (0, 1) the way the generator makes them
 * ((k + 0.5) 2^-53), uniform doubles of random exponent (log-uniform, reaching the
 * tails), and random mantissas inside the central interval. GP_SWEEP_N of each. */
static void test_pinv_sweep(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(0xc0ffee);
    long total = gp_test_count("GP_SWEEP_N", 1000000);
    static double p[4096];
    for (long done = 0; done < total; done += 1024) {
        size_t n = 0;
        for (int i = 0; i < 1024; i++) {
            uint64_t r = gp_test_next(&s);
            p[n++] = ((double)(r >> 11) + 0.5) * 0x1p-53;
            p[n++] = ldexp(0.5 + (double)(gp_test_next(&s) >> 12) * 0x1p-53, -(int)(r % 1075)); /* (0, 1) */
            p[n++] = 0.075 + 0.85 * ((double)(gp_test_next(&s) >> 11) * 0x1p-53);
            p[n++] = double_of((bits_of(0.5) & ~0xfffffffffffffull) | (gp_test_next(&s) & 0xfffffffffffffull));
        }
        check_pinv(p, n, 1);
    }
}

/* ---- -log(pp), the tails' logarithm ---- */

/* t = gp_neglog_block(x) on every available path against -log(x[k]) from libm, bit for
 * bit, at full length and at a length leaving a remainder after the last register. */
static void check_neglog(const double *x, size_t n)
{
    static double t[4096];
    assert_true(n <= 4096);
    for (size_t q = 0; q < NPATHS; q++) {
        if (!gp_gen_path_available(paths[q]))
            continue;
        for (size_t len = n; len + 8 > n && len > 0; len -= len > 5 ? 5 : len) {
            gp_neglog_block(paths[q], x, len, t);
            for (size_t k = 0; k < len; k++)
                gp_assert_bits(bits_of(t[k]), bits_of(-log(x[k])), "path %s x = %a (%zu of %zu)", path_names[q], x[k],
                               k, len);
        }
    }
}

/* The vector path's own cases: the reduction's boundaries (powers of two, sqrt(2) times
 * them, 0.25 where the vector range ends, the smallest normal), and what must go to
 * libm (subnormals, zeros, negatives, infinities, NaN, x >= 0.25). */
static void test_neglog_boundaries(void **state)
{
    (void)state;
    static double x[4096];
    size_t n = 0;
    for (int e = 2; e <= 1022; e += (e < 80 ? 1 : 37)) {
        n = around(x, n, ldexp(1.0, -e), 2);
        n = around(x, n, ldexp(0x1.6a09e667f3bcdp0, -e), 2); /* sqrt(2) rounded */
        if (n > 4000) {
            check_neglog(x, n);
            n = 0;
        }
    }
    n = around(x, n, 0.25, 3);
    n = around(x, n, 0.075, 3);
    n = around(x, n, 0x1p-1022, 3);
    const double special[] = {0.0, -0.0, DBL_TRUE_MIN, 0x1p-1030, -0.01, -INFINITY, INFINITY, NAN, 0.5, 0.9, 1.0, 7.0};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        x[n++] = special[i];
    check_neglog(x, n);
}

/* Random inputs: pp = min(P, 1 - P) of the generator's uniform grid ((k + 0.5) 2^-53),
 * doubles of random exponent over every binade below 1 (subnormals included) and
 * random doubles of (0, 0.075), the tails' range. GP_SWEEP_N of each. */
static void test_neglog_sweep(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(0x10c10c);
    long total = gp_test_count("GP_SWEEP_N", 1000000);
    static double x[3072];
    for (long done = 0; done < total; done += 1024) {
        size_t n = 0;
        for (int i = 0; i < 1024; i++) {
            uint64_t r = gp_test_next(&s);
            double P = ((double)(r >> 11) + 0.5) * 0x1p-53;
            x[n++] = P < 0.5 ? P : 1.0 - P;
            x[n++] = ldexp(0.5 + (double)(gp_test_next(&s) >> 12) * 0x1p-53, -(int)(r % 1075));
            x[n++] = 0.075 * ((double)(gp_test_next(&s) >> 11) * 0x1p-53);
        }
        check_neglog(x, n);
    }
}

/* ---- gp_generate against its header's element formula ---- */

/* Element i of d on stream, computed from the contract in gp_generate.h with the
 * scalar Philox and GSL, one element at a time. */
static float contract_element(const gp_dist *d, uint64_t seed, uint64_t stream, uint64_t i)
{
    gp_philox_ctr c = {{(uint32_t)i, (uint32_t)(i >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)}};
    gp_philox_key k = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    gp_philox_ctr w = gp_philox4x32_10(c, k);
    if ((double)w.v[2] < d->sparsity * 4294967296.0)
        return 0.0f;
    double u = ((double)(((uint64_t)w.v[0] << 21) | (w.v[1] >> 11)) + 0.5) * 0x1p-53;
    double v;
    int signed_dist = 1;
    switch (d->kind) {
    case GP_DIST_NORMAL:
        v = d->scale * gsl_cdf_ugaussian_Pinv(u);
        signed_dist = 0;
        break;
    case GP_DIST_LOGNORMAL: v = d->scale * exp(d->sigma * gsl_cdf_ugaussian_Pinv(u)); break;
    case GP_DIST_LAPLACE:
        v = gsl_cdf_laplace_Pinv(u, d->scale);
        signed_dist = 0;
        break;
    case GP_DIST_PARETO: v = gsl_cdf_pareto_Pinv(u, d->alpha, d->scale); break;
    default: v = d->scale; break;
    }
    if (signed_dist && (w.v[3] >> 16) < (uint32_t)(d->neg_frac * 65536.0))
        v = -v;
    if ((w.v[3] & 0xffffu) < (uint32_t)(d->outlier_frac * 65536.0))
        v *= d->outlier_scale;
    return (float)v;
}

static uint32_t fbits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static void test_generate_contract(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(0xfeed);
    enum { N = 1000 };
    static float out[N], at[N];
    static uint64_t idx[N];
    for (int kind = GP_DIST_NORMAL; kind <= GP_DIST_CONSTANT; kind++) {
        gp_dist d;
        memset(&d, 0, sizeof d);
        d.kind = (gp_dist_kind)kind;
        d.scale = 1e-3;
        d.sigma = 2.0;
        d.alpha = 3.0;
        d.neg_frac = 0.5;
        d.sparsity = 0.25;
        d.outlier_frac = 0.01;
        d.outlier_scale = 1000.0;
        uint64_t seed = gp_test_next(&s), stream = gp_stream_id(GP_STREAM_GRAD, 3, 7, 11);
        uint64_t i0 = 0xffffff00ull; /* the block crosses a carry into the counter's high word */
        gp_generate(&d, seed, stream, i0, N, out);
        for (int j = 0; j < N; j++) {
            idx[j] = gp_test_next(&s) % 0x300000000ull;
            gp_assert_bits(fbits(out[j]), fbits(contract_element(&d, seed, stream, i0 + (uint64_t)j)),
                           "kind %d element %d", kind, j);
        }
        gp_generate_at(&d, seed, stream, idx, N, at);
        for (int j = 0; j < N; j++)
            gp_assert_bits(fbits(at[j]), fbits(contract_element(&d, seed, stream, idx[j])), "kind %d at %llu", kind,
                           (unsigned long long)idx[j]);
    }
}

/* The normal distribution (the generator's vector path end to end) on many elements
 * against the contract, with outliers and sparsity, at scales from 2^-1000 to 2^900:
 * elements past fp32's range (overflow to infinity, fp32 subnormals, zeros) and on its
 * edges. */
static void test_generate_normal_sweep(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(0x9a55);
    long total = gp_test_count("GP_SWEEP_N", 1000000);
    enum { N = 4096 };
    static float out[N];
    const double scales[] = {1e-3, 1.0, 3.7e-5, -2.5, 0x1p-850, 0x1p850, 0x1.8p-851, 0x1p900, 1e-300, 0x1p-1000,
                             0x1p126, 0x1p-128, 0x1p-140, 0x1.fffffp125};
    for (long done = 0; done < total; done += N) {
        gp_dist d;
        memset(&d, 0, sizeof d);
        d.kind = GP_DIST_NORMAL;
        d.scale = scales[(done / N) % (long)(sizeof scales / sizeof scales[0])];
        d.outlier_frac = (done / N) % 3 == 0 ? 0.01 : 0.0;
        d.outlier_scale = (done / N) % 2 ? 1000.0 : (done / N) % 4 == 0 ? 0x1p-700 : 0x1p100;
        d.sparsity = (done / N) % 5 == 0 ? 0.25 : 0.0;
        uint64_t seed = gp_test_next(&s), stream = gp_test_next(&s), i0 = gp_test_next(&s) >> 20;
        gp_generate(&d, seed, stream, i0, N, out);
        for (int j = 0; j < N; j++)
            gp_assert_bits(fbits(out[j]), fbits(contract_element(&d, seed, stream, i0 + (uint64_t)j)),
                           "scale %a element %llu", d.scale, (unsigned long long)(i0 + (uint64_t)j));
    }
}

/* Sparsity at an element's own word 2: with sparsity (w2 + off) 2^-32 (exact) the
 * element is a zero exactly when w2 < w2 + off, off in {-1, -0.5, 0, 0.5, 1}, whatever
 * the path. */
static void test_generate_sparse_edge(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(0x5ba55e);
    const double offs[] = {-1.0, -0.5, 0.0, 0.5, 1.0};
    for (int t = 0; t < 200; t++) {
        uint64_t seed = gp_test_next(&s), stream = gp_test_next(&s), e = gp_test_next(&s) % 100000;
        gp_philox_ctr c = {{(uint32_t)e, (uint32_t)(e >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)}};
        gp_philox_key k = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
        uint32_t w2 = gp_philox4x32_10(c, k).v[2];
        if (w2 < 2 || w2 > 0xfffffffdu)
            continue;
        for (int kind = GP_DIST_NORMAL; kind <= GP_DIST_LAPLACE; kind++)
            for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
                gp_dist d;
                memset(&d, 0, sizeof d);
                d.kind = (gp_dist_kind)kind;
                d.scale = 1.0;
                d.sigma = 1.0;
                d.outlier_scale = 1000.0;
                d.sparsity = ((double)w2 + offs[o]) * 0x1p-32;
                float out[40];
                uint64_t i0 = e >= 17 ? e - 17 : 0; /* e inside a register, not at its start */
                gp_generate(&d, seed, stream, i0, 40, out);
                int zero = offs[o] > 0;
                if (zero)
                    gp_assert_bits(fbits(out[e - i0]), 0, "kind %d w2 %u offset %g", kind, w2, offs[o]);
                else
                    assert_true(out[e - i0] != 0.0f);
                gp_generate_at(&d, seed, stream, &e, 1, out);
                assert_true((out[0] == 0.0f) == zero);
            }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_block),
        cmocka_unit_test(test_pinv_boundaries),
        cmocka_unit_test(test_pinv_sweep),
        cmocka_unit_test(test_neglog_boundaries),
        cmocka_unit_test(test_neglog_sweep),
        cmocka_unit_test(test_generate_contract),
        cmocka_unit_test(test_generate_sparse_edge),
        cmocka_unit_test(test_generate_normal_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
