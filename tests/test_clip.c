/* test_clip.c — kernels/arith/gp_clip.h: the fixed summation tree on hand cases where the
 * order shows, chunked evaluation equal to whole-array evaluation bit for bit, the
 * definition replayed by an independent recursion and by a zero-padded perfect tree (the
 * GPU shape), the clip coefficient and the bf16 norm stores on hand cases, non-finite
 * propagation, and the total norm against an exact MPFR sum within a derived bound. */
#include <math.h>
#include <string.h>

#include <mpfr.h>

#include "gp_test.h"

#include "kernels/arith/gp_clip.h"
#include "kernels/arith/gp_philox.h"

#define U32 0x1p-24 /* fp32 unit roundoff */
#define U16 0x1p-8  /* bf16 unit roundoff */
#define CHUNK 16384 /* the runner's chunk */

static uint32_t fbits(float x)
{
    return gp_f32_bits(x);
}

/* T by its definition, recursively: split at the largest power of two below n. */
static float ref_tree(const float *x, uint64_t n)
{
    if (n == 0)
        return 0.0f;
    if (n == 1)
        return x[0];
    uint64_t h = 1;
    while (2 * h < n)
        h *= 2;
    return ref_tree(x, h) + ref_tree(x + h, n - h);
}

/* The GPU shape: pad with +0 to a power of two, then add adjacent pairs level by level. */
static float padded_tree(const float *x, uint64_t n)
{
    uint64_t p = 1;
    while (p < n)
        p *= 2;
    float *b = calloc(p, sizeof *b);
    assert_non_null(b);
    memcpy(b, x, n * sizeof *b);
    for (uint64_t w = p; w > 1; w /= 2)
        for (uint64_t i = 0; i < w / 2; i++)
            b[i] = b[2 * i] + b[2 * i + 1];
    float r = b[0];
    free(b);
    return r;
}

/* ±(1 + 23 random bits) * 2^e, e uniform in [emin, emax], from Philox (seed, stream, i). */
static float rnd_float(uint64_t seed, uint64_t stream, uint64_t i, int emin, int emax)
{
    uint32_t a = gp_rand_u32(seed, stream, 2 * i), b = gp_rand_u32(seed, stream, 2 * i + 1);
    int e = emin + (int)(b % (uint32_t)(emax - emin + 1));
    float v = ldexpf(1.0f + (float)(a >> 9) * 0x1p-23f, e);
    return (b >> 31) ? -v : v;
}

/* [1, 2^-24, 2^-24, 2^-24, 2^-24] (n = 5, h = 4):
 *   T = ((1 + 2^-24) + (2^-24 + 2^-24)) + 2^-24
 *     1 + 2^-24 is the midpoint of 1 and 1 + 2^-23: ties to even, 1;
 *     2^-24 + 2^-24 = 2^-23 exactly; 1 + 2^-23 exactly;
 *     (1 + 2^-23) + 2^-24: midpoint of 1 + 2^-23 (odd) and 1 + 2^-22 (even): 1 + 2^-22.
 *   Sequential ((((1 + a) + a) + a) + a): every step ties back to 1, result 1.
 *   A split at ceil(n/2) = 3, ((1 + a) + a) + (a + a): 1 + 2^-23. Three orders, three sums.
 * n = 6, one more 2^-24: T = T(first 4) + (2^-24 + 2^-24) = (1 + 2^-23) + 2^-23 = 1 + 2^-22
 *   (the first four: (1 + a) = 1, (a + a) = 2^-23, sum 1 + 2^-23); sequential still 1.
 * n = 3, [1, a, a]: T = (1 + a) + a = 1 (same as sequential). n = 0: +0; n = 1: x[0],
 * even -0 (no addition happens). The same sums come from gp_clip_sumsq of fp32
 * [1, 2^-12, ...]: the squares are exact (1 and 2^-24). */
static void test_tree_hand(void **state)
{
    (void)state;
    const float a = 0x1p-24f;
    float x[6] = {1.0f, a, a, a, a, a};
    gp_assert_bits(fbits(gp_clip_tree_sum(x, 5)), fbits(1.0f + 0x1p-22f), "n=5");
    float seq = x[0];
    for (int i = 1; i < 5; i++)
        seq = seq + x[i];
    gp_assert_bits(fbits(seq), fbits(1.0f), "n=5 sequential differs");
    gp_assert_bits(fbits(gp_clip_tree_sum(x, 6)), fbits(1.0f + 0x1p-22f), "n=6");
    gp_assert_bits(fbits(gp_clip_tree_sum(x, 3)), fbits(1.0f), "n=3");
    gp_assert_bits(fbits(gp_clip_tree_sum(x, 0)), 0u, "n=0 is +0");
    float mz = -0.0f;
    gp_assert_bits(fbits(gp_clip_tree_sum(&mz, 1)), 0x80000000u, "n=1 is x[0]");
    const float r = 0x1p-12f;
    uint32_t g[5] = {fbits(1.0f), fbits(r), fbits(-r), fbits(r), fbits(-r)}; /* packed fp32 */
    gp_assert_bits(fbits(gp_clip_sumsq(GP_FP32, g, 5)), fbits(1.0f + 0x1p-22f), "sumsq n=5");
    /* streaming: the partial result after each push is T of the prefix */
    gp_clip_tree t;
    gp_clip_tree_init(&t);
    for (int i = 0; i < 6; i++) {
        gp_clip_tree_push(&t, x[i]);
        gp_assert_bits(fbits(gp_clip_tree_result(&t)), fbits(ref_tree(x, (uint64_t)i + 1)),
                       "prefix %d", i + 1);
    }
}

/* Chunked evaluation (aligned power-of-two chunks, chunk sums then T over them) equals
 * whole-array evaluation bit for bit: the property the header proves. Also both equal the
 * recursive definition; for non-negative data (squares) the zero-padded perfect tree too.
 * The data spans 2^-20..2^20 so the order changes sums: checked against sequential. */
static void test_chunked_equals_whole(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5, (1u << 17) + 3};
    static const uint64_t chunks[] = {CHUNK, 1024, 8, 1};
    uint64_t seed = gp_test_seed(0xc11bull);
    int order_mattered = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        uint64_t n = sizes[si];
        float *x = malloc(n * sizeof *x), *sq = malloc(n * sizeof *sq);
        uint16_t *h = malloc(n * sizeof *h);
        uint32_t *xb = malloc(n * sizeof *xb);
        float *part = malloc(n * sizeof *part);
        assert_true(x && sq && h && xb && part);
        for (uint64_t i = 0; i < n; i++) {
            x[i] = rnd_float(seed, si, i, -20, 20);
            sq[i] = x[i] * x[i];
            xb[i] = fbits(x[i]);
            h[i] = (uint16_t)gp_fmt_from_f32_bits(GP_BF16, fbits(x[i]), GP_RNE, 0, 0, NULL);
        }
        float whole = gp_clip_tree_sum(x, n);
        gp_assert_bits(fbits(whole), fbits(ref_tree(x, n)), "n=%llu: definition", (unsigned long long)n);
        float whole_sq = gp_clip_tree_sum(sq, n);
        gp_assert_bits(fbits(whole_sq), fbits(padded_tree(sq, n)), "n=%llu: padded", (unsigned long long)n);
        gp_assert_bits(fbits(gp_clip_sumsq(GP_FP32, xb, n)), fbits(whole_sq), "n=%llu: sumsq fp32",
                       (unsigned long long)n);
        float seq = 0.0f;
        for (uint64_t i = 0; i < n; i++)
            seq = seq + sq[i];
        order_mattered += seq != whole_sq;
        float whole_h = gp_clip_sumsq(GP_BF16, h, n);
        for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++) {
            uint64_t c = chunks[ci], k = (n + c - 1) / c;
            for (uint64_t j = 0; j < k; j++)
                part[j] = gp_clip_tree_sum(x + j * c, n - j * c < c ? n - j * c : c);
            gp_assert_bits(fbits(gp_clip_tree_sum(part, k)), fbits(whole), "n=%llu chunk %llu",
                           (unsigned long long)n, (unsigned long long)c);
            for (uint64_t j = 0; j < k; j++)
                part[j] = gp_clip_sumsq(GP_BF16, h + j * c, n - j * c < c ? n - j * c : c);
            gp_assert_bits(fbits(gp_clip_tree_sum(part, k)), fbits(whole_h), "n=%llu chunk %llu bf16",
                           (unsigned long long)n, (unsigned long long)c);
        }
        free(x);
        free(sq);
        free(h);
        free(xb);
        free(part);
    }
    assert_true(order_mattered >= 2); /* the sizes >= 2^14 at least: a test that can fail */
}

/* fp32 grads [3, 4], max_norm 1. Squares 9, 16 (exact), sum 25, norm sqrtf(25) = 5; the
 * total is sqrtf(fl32(5^2)) = 5.
 *   fl32(1e-6): 1e-6 = 1.048576 * 2^-20; 1.048576 * 2^23 = 8796093.02: 8796093 * 2^-43.
 *   d = fl32(5 + 8796093 * 2^-43): ulp(5) = 2^-21 and 8796093 * 2^-43 = 2.097 ulps: 5 + 2^-20.
 *   r = fl32(1 / d): in units of ulp = 2^-26 on [1/8, 1/4), 2^26 / (5 + 2^-20) =
 *     2^46 / 5242881 = 13421770 + 1258294/5242881 (0.24): 13421770 * 2^-26 = 0x1.999994p-3
 *     (0.2f is 0x1.99999ap-3: the 1e-6 moved it down 3 ulps).
 *   coef = fl32(r * 1) = r < 1: not clamped.
 * Applied: 4 * coef = 13421770 * 2^-24 exactly (0x1.999994p-1); 3 * coef = 40265310 * 2^-26
 *   = 10066327.5 * 2^-24: a tie in [1/2, 1), to even 10066328 * 2^-24 = 0x1.33333p-1.
 * max_norm 3: coef = fl32(3r) = the same tie, 0x1.33333p-1. */
static void test_coef_hand_fp32(void **state)
{
    (void)state;
    uint32_t g[2] = {fbits(3.0f), fbits(4.0f)};
    float s = gp_clip_sumsq(GP_FP32, g, 2);
    gp_assert_bits(fbits(s), fbits(25.0f), "sumsq");
    uint32_t norm = gp_clip_norm_store(GP_FP32, s);
    gp_assert_bits(norm, fbits(5.0f), "norm");
    uint32_t total = gp_clip_total_norm(GP_FP32, &norm, 1);
    gp_assert_bits(total, fbits(5.0f), "total");
    gp_assert_bits(fbits((float)1e-6), fbits(8796093 * 0x1p-43f), "fl32(1e-6)");
    float coef = gp_clip_coef(GP_FP32, total, 1.0, 0);
    gp_assert_bits(fbits(coef), fbits(0x1.999994p-3f), "coef");
    gp_assert_bits(fbits(coef), fbits(13421770 * 0x1p-26f), "coef as integer");
    gp_assert_bits(fbits(gp_clip_coef(GP_FP32, total, 1.0, 1)), fbits(coef), "fp32: cpu = cuda");
    gp_assert_bits(gp_clip_apply(GP_FP32, 0, fbits(4.0f), coef, NULL), fbits(0x1.999994p-1f), "4*coef");
    gp_assert_bits(gp_clip_apply(GP_FP32, 0, fbits(3.0f), coef, NULL), fbits(0x1.33333p-1f), "3*coef");
    gp_assert_bits(fbits(gp_clip_coef(GP_FP32, total, 3.0, 0)), fbits(0x1.33333p-1f), "max_norm 3");
}

/* Clamp and the edge of it, fp32.
 *  - grad [0.5]: total 0.5; d = 0.5 + 17 * 2^-24 (1e-6 is 16.8 ulps of 2^-24); 1/d is just
 *    under 2; times 1 is > 1: clamped to exactly 1, and g * 1 leaves every grad as it was.
 *  - grad [1]: total 1; d = fl32(1 + 1e-6) = 1 + 8 * 2^-23 = 1 + 2^-20 (1e-6 = 8.4 ulps);
 *    1/d = 1 - 2^-20 + 2^-40 - ..., nearest float (ulp 2^-24 on [1/2, 1)) 1 - 2^-20:
 *    under 1, kept (0x3f7ffff0), and the grad 1 becomes 1 - 2^-20. */
static void test_coef_clamp(void **state)
{
    (void)state;
    float c = gp_clip_coef(GP_FP32, fbits(0.5f), 1.0, 0);
    gp_assert_bits(fbits(c), fbits(1.0f), "clamped");
    gp_assert_bits(gp_clip_apply(GP_FP32, 0, fbits(0.3f), c, NULL), fbits(0.3f), "unchanged");
    gp_assert_bits(gp_clip_apply(GP_BF16, 0, 0x3e9au, c, NULL), 0x3e9au, "bf16 unchanged");
    c = gp_clip_coef(GP_FP32, fbits(1.0f), 1.0, 0);
    gp_assert_bits(fbits(c), 0x3f7ffff0u, "just under 1");
    gp_assert_bits(fbits(c), fbits(1.0f - 0x1p-20f), "1 - 2^-20");
    gp_assert_bits(gp_clip_apply(GP_FP32, 0, fbits(1.0f), c, NULL), 0x3f7ffff0u, "applied");
}

/* bf16 grads [1, 1]: squares 1, 1, sum 2 (fp32). The norm is sqrtf(2) = 0x3fb504f3 stored
 * to bf16: the dropped half 0x04f3 is under the tie 0x8000: 0x3fb5 = 1.4140625 = 181/128
 * (fp32 grads keep 0x3fb504f3; fp16: 1.41421354 * 1024 = 1448.15 -> 1448/1024, 0x3da8);
 * bf16 [1, -1, 1] has norm bf16(sqrtf(3)), which rounds up (below).
 * The total squares the bf16 norm: (181/128)^2 = 32761/16384, exact in fp32, whose sqrtf is
 * exactly 181/128 again: total 0x3fb5. Coefficient (max_norm 1):
 *   d: 181/128 + fl32(1e-6) is within 9 fp32 ulps of 181/128, far under bf16's half ulp
 *      (2^-8): back to 181/128;
 *   r: 128/181 = 0.7071823..., bf16 on [1/2, 1) has ulp 2^-8: 0.7071823 * 256 = 181.04:
 *      181/256 = 0.70703125 (0x3f35), not near a tie so the fp32 step cannot matter;
 *   coef = 0.70703125 * 1, under 1. Applied to a bf16 1: 0x3f35.
 * The reciprocal is stored before the multiply (torch's number / tensor is
 * reciprocal() * number). max_norm 0.7485: in units of 2^-8, r * m = 181 * 0.7485 =
 * 135.4785 (the fp32 product and (float)0.7485 move that by < 1e-5): bf16 135/256 =
 * 0.52734375 (0x3f07). One division m / d would be 32768 * 0.7485 / 181 = 135.5075 units:
 * 136/256 = 0.53125. */
static void test_bf16_norm_hand(void **state)
{
    (void)state;
    uint16_t g[2] = {0x3f80u, 0x3f80u};
    float s = gp_clip_sumsq(GP_BF16, g, 2);
    gp_assert_bits(fbits(s), fbits(2.0f), "sumsq");
    gp_assert_bits(fbits(sqrtf(2.0f)), 0x3fb504f3u, "sqrtf(2)");
    uint32_t norm = gp_clip_norm_store(GP_BF16, s);
    gp_assert_bits(norm, 0x3fb5u, "bf16 norm");
    gp_assert_bits(gp_clip_norm_store(GP_FP32, s), 0x3fb504f3u, "fp32 norm");
    gp_assert_bits(gp_clip_norm_store(GP_FP16, s), 0x3da8u, "fp16 norm");
    /* rounding up: sqrtf(3) = 0x3fddb3d7, the dropped half 0xb3d7 is over the tie: 0x3fde
     * (1.734375; 1.7320508 * 128 = 221.7 -> 222) */
    uint16_t g3[3] = {0x3f80u, 0xbf80u, 0x3f80u};
    gp_assert_bits(fbits(sqrtf(3.0f)), 0x3fddb3d7u, "sqrtf(3)");
    gp_assert_bits(gp_clip_norm_store(GP_BF16, gp_clip_sumsq(GP_BF16, g3, 3)), 0x3fdeu, "norm [1,-1,1]");
    uint32_t total = gp_clip_total_norm(GP_BF16, &norm, 1);
    gp_assert_bits(total, 0x3fb5u, "bf16 total");
    float c = gp_clip_coef(GP_BF16, total, 1.0, 0);
    gp_assert_bits(fbits(c), fbits(0.70703125f), "bf16 coef");
    gp_assert_bits(fbits(gp_clip_coef(GP_BF16, total, 1.0, 1)), fbits(c), "cpu: same here");
    gp_assert_bits(gp_clip_apply(GP_BF16, 0, 0x3f80u, c, NULL), 0x3f35u, "applied");
    gp_assert_bits(fbits(gp_clip_coef(GP_BF16, total, 0.7485, 0)), fbits(0.52734375f), "r * m");
}

/* Where torch CPU and CUDA part: bf16 total t = 131 * 2^-27 (1.0234375 * 2^-20, bits
 * 0x3583), max_norm 2^-20.
 *   CUDA: e = fl32(1e-6) = 8796093 * 2^-43; t + e = (131 * 2^16 + 8796093) * 2^-43 =
 *     17381309 * 2^-43, 25 bits: a tie in fp32, to even 8690654 * 2^-42; to bf16 (8 bits):
 *     8690654 / 2^16 = 132.61 -> d = 133 * 2^-26.
 *   CPU: e = bf16(1e-6) = 134 * 2^-27 (1.048576 * 128 = 134.2 -> 134); t + e = 265 * 2^-27
 *     exactly; to bf16: 132.5, a tie, to even: d = 132 * 2^-26.
 *   r = bf16(2^26 / d-units): CPU 2^26/132 = 508400.48, bf16 ulp on [2^18, 2^19) is 2^11:
 *     248.24 -> 248 * 2^11 = 1.9375 * 2^18; CUDA 2^26/133 = 504573.59: 246.37 -> 246 * 2^11 =
 *     1.921875 * 2^18.
 *   coef = r * 2^-20 exactly: CPU 1.9375 * 2^-2 = 0.484375 (0x3ef8), CUDA 1.921875 * 2^-2 =
 *     0.48046875 (0x3ef6). */
static void test_coef_torch_cpu(void **state)
{
    (void)state;
    gp_assert_bits(gp_fmt_from_f64(GP_BF16, 1e-6, GP_RNE, 0, 0, NULL), 0x3586u, "bf16(1e-6)");
    gp_assert_bits(fbits(gp_clip_coef(GP_BF16, 0x3583u, 0x1p-20, 1)), fbits(0.484375f), "cpu");
    gp_assert_bits(fbits(gp_clip_coef(GP_BF16, 0x3583u, 0x1p-20, 0)), fbits(0.48046875f), "cuda");
}

/* error_if_nonfinite=False: an inf grad makes the total +inf, 1/(inf + 1e-6) = 0, coef 0:
 * finite grads become +-0 (sign kept), inf grads NaN; max_norm inf gives 0 * inf = NaN.
 * A finite grad whose square overflows (2^64: 2^128 > FLT_MAX) does the same. A NaN grad
 * makes everything NaN (clamp keeps NaN). */
static void test_nonfinite(void **state)
{
    (void)state;
    uint32_t g[3] = {fbits(1.0f), fbits(INFINITY), fbits(-2.0f)};
    uint32_t norm = gp_clip_norm_store(GP_FP32, gp_clip_sumsq(GP_FP32, g, 3));
    gp_assert_bits(norm, 0x7f800000u, "inf norm");
    uint32_t total = gp_clip_total_norm(GP_FP32, &norm, 1);
    float c = gp_clip_coef(GP_FP32, total, 1.0, 0);
    gp_assert_bits(fbits(c), 0u, "coef 0");
    gp_assert_bits(gp_clip_apply(GP_FP32, 0, fbits(-2.0f), c, NULL), 0x80000000u, "-2 -> -0");
    assert_true(isnan(gp_f32_from_bits(gp_clip_apply(GP_FP32, 0, fbits(INFINITY), c, NULL))));
    assert_true(isnan(gp_clip_coef(GP_FP32, total, INFINITY, 0)));
    uint32_t big[1] = {fbits(0x1p64f)};
    gp_assert_bits(gp_clip_norm_store(GP_FP32, gp_clip_sumsq(GP_FP32, big, 1)), 0x7f800000u, "2^64");
    uint16_t nanb[2] = {0x3f80u, 0x7fc0u};
    uint32_t nn = gp_clip_norm_store(GP_BF16, gp_clip_sumsq(GP_BF16, nanb, 2));
    assert_true(gp_fmt_isnan(GP_BF16, nn));
    float cn = gp_clip_coef(GP_BF16, gp_clip_total_norm(GP_BF16, &nn, 1), 1.0, 0);
    assert_true(isnan(cn));
    assert_true(gp_fmt_isnan(GP_BF16, gp_clip_apply(GP_BF16, 0, 0x3f80u, cn, NULL)));
}

/* gamma_n of Higham: n*u/(1 - n*u), bounding |prod of n factors (1 + d), |d| <= u| - 1. */
static double gamma_n(int n, double u)
{
    return n * u / (1 - n * u);
}

static int ceil_log2(uint64_t n)
{
    int k = 0;
    while ((1ull << k) < n)
        k++;
    return k;
}

/* The total norm against the exact one. Per tensor t with n_t elements, depth
 * h_t = ceil(log2 n_t) <= H; K tensors, depth k = ceil(log2 K); u = 2^-24, v = 2^-8;
 * E_t = sum of x_i^2 (exact), E = sum of E_t; data in 2^-30..2^30, so no square or sum
 * leaves the fp32 normal range and no bf16 store is subnormal.
 *  fp32 grads: each leaf is x^2 (1 + d) and passes at most h_t additions, all terms >= 0,
 *    so S_t = E_t (1 + th), |th| <= gamma_{h_t+1} (Higham, Lemma 3.1). The norm
 *    N_t = sqrt(S_t)(1 + d), its square fl32(N_t^2) = S_t (1 + d)^2 (1 + d'), then at most k
 *    more additions: total_sq = E * F with F in [1 - G, 1 + G], G = gamma_{H+k+4}.
 *  bf16 grads: a square of 8 significant bits is exact in fp32 (no leaf rounding):
 *    S_t = E_t (1 + th), |th| <= gamma_{h_t}; N_t = sqrt(S_t)(1 + d)(1 + e), |e| <= v (the
 *    bf16 store); N_t^2 is exact in fp32 (N_t is a bf16); k more additions:
 *    F in [(1 - G)(1 - u)^2 (1 - v)^2, (1 + G)(1 + u)^2 (1 + v)^2], G = gamma_{H+k}.
 *  total = sqrt(total_sq) (1 + d) [(1 + e) for bf16], so
 *    |total / sqrt(E) - 1| <= max(sqrt(Fmax) * Rmax - 1, 1 - sqrt(Fmin) * Rmin),
 *    R = (1 +- u) for fp32, (1 +- u)(1 +- v) for bf16.
 * The bound is evaluated in binary64 (relative error ~1e-15 of it), inflated by
 * (1 + 2^-30) to cover that. The per-tensor sum is checked too: |S_t - E_t| <=
 * gamma_{h_t+1} E_t (fp32), gamma_{h_t} E_t (bf16). Tensors are read in 2^14 chunks. */
static double rel_bound(double fmin, double fmax, double rmin, double rmax)
{
    double hi = sqrt(fmax) * rmax - 1, lo = 1 - sqrt(fmin) * rmin;
    return (hi > lo ? hi : lo) * (1 + 0x1p-30);
}

/* |a - b| <= rel * |b| with a, b in MPFR (exact enough: 1024 bits), rel in binary64. */
static void check_rel(mpfr_t a, mpfr_t b, double rel, double *worst, const char *what)
{
    mpfr_t d;
    mpfr_init2(d, 1100);
    mpfr_sub(d, a, b, MPFR_RNDN);
    mpfr_abs(d, d, MPFR_RNDN);
    mpfr_div(d, d, b, MPFR_RNDU);
    double r = mpfr_get_d(d, MPFR_RNDU);
    if (r > *worst)
        *worst = r;
    if (!(r <= rel))
        fprintf(stderr, "%s: relative error %.3e > bound %.3e\n", what, r, rel);
    assert_true(r <= rel);
    mpfr_clear(d);
}

static void bound_case(gp_format f, uint64_t seed, int stream)
{
    enum { K = 7 };
    static const uint64_t n_of[K] = {1, 3, CHUNK - 1, CHUNK + 1, 5 * CHUNK + 77, 1000, 2 * CHUNK};
    int w = gp_fmt_get(f).width / 8;
    uint32_t norms[K];
    mpfr_t e_all, e_t, got, tmp;
    mpfr_inits2(1024, e_all, e_t, got, tmp, (mpfr_ptr)0);
    mpfr_set_zero(e_all, 1);
    int H = 0;
    double worst_t = 0, worst = 0;
    for (int t = 0; t < K; t++) {
        uint64_t n = n_of[t];
        unsigned char *g = malloc(n * (size_t)w);
        assert_non_null(g);
        mpfr_set_zero(e_t, 1);
        for (uint64_t i = 0; i < n; i++) {
            float x = rnd_float(seed, (uint64_t)stream * 16 + (uint64_t)t, i, -30, 30);
            uint32_t b = gp_fmt_from_f32_bits(f, fbits(x), GP_RNE, 0, 0, NULL);
            gp_pack_set(f, g, i, b);
            double xv = gp_fmt_to_f64(f, b);
            mpfr_set_d(tmp, xv * xv, MPFR_RNDN); /* exact: 48 significant bits at most */
            mpfr_add(e_t, e_t, tmp, MPFR_RNDN); /* exact: the range fits in 1024 bits */
        }
        uint64_t k = (n + CHUNK - 1) / CHUNK;
        float part[8];
        assert_true(k <= 8);
        for (uint64_t j = 0; j < k; j++) {
            uint64_t len = n - j * CHUNK < CHUNK ? n - j * CHUNK : CHUNK;
            part[j] = gp_clip_sumsq(f, g + j * CHUNK * (uint64_t)w, len);
        }
        float s = gp_clip_tree_sum(part, k);
        int h = ceil_log2(n);
        H = h > H ? h : H;
        mpfr_set_d(got, (double)s, MPFR_RNDN);
        check_rel(got, e_t, gamma_n(f == GP_FP32 ? h + 1 : h, U32), &worst_t, "tensor sumsq");
        norms[t] = gp_clip_norm_store(f, s);
        mpfr_add(e_all, e_all, e_t, MPFR_RNDN);
        free(g);
    }
    uint32_t total = gp_clip_total_norm(f, norms, K);
    int depth = H + ceil_log2(K);
    double fmin, fmax, rmin, rmax;
    if (f == GP_FP32) {
        double G = gamma_n(depth + 4, U32);
        fmin = 1 - G;
        fmax = 1 + G;
        rmin = 1 - U32;
        rmax = 1 + U32;
    } else {
        double G = gamma_n(depth, U32);
        fmin = (1 - G) * (1 - U32) * (1 - U32) * (1 - U16) * (1 - U16);
        fmax = (1 + G) * (1 + U32) * (1 + U32) * (1 + U16) * (1 + U16);
        rmin = (1 - U32) * (1 - U16);
        rmax = (1 + U32) * (1 + U16);
    }
    double rel = rel_bound(fmin, fmax, rmin, rmax);
    mpfr_sqrt(e_all, e_all, MPFR_RNDN);
    mpfr_set_d(got, gp_fmt_to_f64(f, total), MPFR_RNDN);
    check_rel(got, e_all, rel, &worst, "total norm");
    printf("# %s: total norm rel err %.3e (bound %.3e); worst tensor sumsq rel err %.3e\n",
           f == GP_FP32 ? "fp32" : "bf16", worst, rel, worst_t);
    mpfr_clears(e_all, e_t, got, tmp, (mpfr_ptr)0);
}

static void test_total_norm_bound(void **state)
{
    (void)state;
    uint64_t seed = gp_test_seed(0xb0b0ull);
    for (int rep = 0; rep < 4; rep++) {
        bound_case(GP_FP32, seed, rep);
        bound_case(GP_BF16, seed, rep);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_hand),
        cmocka_unit_test(test_chunked_equals_whole),
        cmocka_unit_test(test_coef_hand_fp32),
        cmocka_unit_test(test_coef_clamp),
        cmocka_unit_test(test_bf16_norm_hand),
        cmocka_unit_test(test_coef_torch_cpu),
        cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_total_norm_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
