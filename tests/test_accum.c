/* test_accum.c — kernels/arith/gp_accum.h and the CPU backend's fast paths: every fast
 * path equals the generic per-element definition bit for bit (NaN results: NaN-ness,
 * see gp_fmt_agree); events and Kahan
 * compensation on hand-computed cases; unscale's non-finite check. */
#include <fenv.h>
#include <math.h>
#include <string.h>

#include "gp_test.h"

#include "kernels/arith/gp_accum.h"
#include "kernels/arith/gp_clip.h"
#include "kernels/arith/gp_philox.h"
#include "kernels/cpu/gp_cpu_adamw.h"
#include "kernels/cpu/gp_cpu_backend.h"
#include "harness/run/gp_attrib.h"
#include "reference/gp_mpfr_env.h"

/* The bit trick equals the generic RNE conversion: every bf16 boundary neighbourhood
 * (each high half with low halves 0, 1, tie-1, tie, tie+1, all ones) and a stride
 * through all 2^32 patterns. */
static void test_bf16_fast_conversion(void **state)
{
    (void)state;
    const uint32_t lows[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff};
    for (uint32_t hi = 0; hi < 0x10000u; hi++)
        for (int k = 0; k < 6; k++) {
            uint32_t u = (hi << 16) | lows[k];
            gp_assert_bits(gp_bf16_rne_from_f32_bits(u), gp_fmt_from_f32_bits(GP_BF16, u, GP_RNE, 0, 0, NULL),
                           "fp32 0x%08x", u);
        }
    for (uint64_t u = 0; u <= 0xffffffffull; u += 251)
        gp_assert_bits(gp_bf16_rne_from_f32_bits((uint32_t)u),
                       gp_fmt_from_f32_bits(GP_BF16, (uint32_t)u, GP_RNE, 0, 0, NULL), "fp32 0x%08x", (unsigned)u);
}

/* The fast RNE rounding from binary64 equals the general routine, events included, for
 * fp32, bf16, fp16 (and the formats it hands over): doubles at every format's binade
 * edges (normal range ends, subnormals, overflow threshold) with low bits 0, 1, tie-1,
 * tie, tie+1 and all ones, both signs, ftz on and off; then random bit patterns (every
 * class: zeros, subnormal doubles, infinities, NaNs). */
static void check_from_f64_rne(gp_format f, uint64_t u, int ftz)
{
    unsigned e1 = 0, e2 = 0;
    uint32_t got = gp_fmt_from_f64_rne(f, u, ftz, &e1);
    uint32_t want = gp_fmt_from_f64_bits(f, u, GP_RNE, 0, ftz, &e2);
    gp_assert_bits(got, want, "format %d double 0x%016llx ftz %d", (int)f, (unsigned long long)u, ftz);
    gp_assert_bits(e1, e2, "events: format %d double 0x%016llx ftz %d", (int)f, (unsigned long long)u, ftz);
}

static void test_from_f64_rne_fast(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(77);
    for (int f = 0; f < GP_NFORMATS; f++) {
        int d = 53 - gp_fmt_get((gp_format)f).p;
        if (d > 50)
            d = 50;
        const uint64_t lows[] = {0, 1, (1ull << (d - 1)) - 1, 1ull << (d - 1), (1ull << (d - 1)) + 1, (1ull << d) - 1};
        for (int E = 0; E <= 0x7ff; E++) /* every binary64 exponent: each format's edges included */
            for (int m = 0; m < 8; m++)
                for (int k = 0; k < 6; k++)
                    for (int sg = 0; sg < 2; sg++) {
                        uint64_t top = m == 7 ? ((1ull << (52 - d)) - 1) : (uint64_t)m; /* all-ones: the carry */
                        uint64_t u = (uint64_t)sg << 63 | (uint64_t)E << 52 | top << d | lows[k];
                        check_from_f64_rne((gp_format)f, u, 0);
                        check_from_f64_rne((gp_format)f, u, 1);
                    }
        for (int j = 0; j < 200000; j++) {
            uint64_t u = gp_test_next(&s);
            check_from_f64_rne((gp_format)f, u, j & 1);
        }
    }
}

/* The fast widening equals gp_fmt_to_f64 (bit for bit, NaN payloads and signalling NaNs
 * included): every 8- and 16-bit pattern, fp32 at every exponent with edge mantissas, and
 * random fp32 patterns. */
static void test_to_f64_fast(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(78);
    for (int f = 0; f < GP_NFORMATS; f++) {
        uint32_t lim = gp_fmt_get((gp_format)f).width == 32 ? 0 : 1u << gp_fmt_get((gp_format)f).width;
        for (uint32_t b = 0; b < lim; b++)
            gp_assert_bits(gp_f64_bits(gp_fmt_to_f64_fast((gp_format)f, b)), gp_f64_bits(gp_fmt_to_f64((gp_format)f, b)),
                           "format %d bits 0x%x", f, b);
    }
    const uint32_t mants[] = {0, 1, 0x200000, 0x400000, 0x400001, 0x7fffff};
    for (uint32_t e = 0; e < 256; e++)
        for (int k = 0; k < 6; k++)
            for (uint32_t sg = 0; sg < 2; sg++) {
                uint32_t b = sg << 31 | e << 23 | mants[k];
                gp_assert_bits(gp_f64_bits(gp_fmt_to_f64_fast(GP_FP32, b)), gp_f64_bits(gp_fmt_to_f64(GP_FP32, b)),
                               "fp32 0x%08x", b);
            }
    for (int j = 0; j < 1000000; j++) {
        uint32_t b = (uint32_t)gp_test_next(&s);
        gp_assert_bits(gp_f64_bits(gp_fmt_to_f64_fast(GP_FP32, b)), gp_f64_bits(gp_fmt_to_f64(GP_FP32, b)),
                       "fp32 0x%08x", b);
    }
}

/* gp_widen_block equals gp_fmt_to_f64_fast element by element, bit for bit: every pattern
 * of each 8- and 16-bit format (NaNs among them, so the fallback runs too) in blocks of odd
 * lengths and offsets, and random fp32 blocks with no NaN (the vectorised loop alone) and
 * with one (the fallback). */
static void test_widen_block(void **state)
{
    (void)state;
    enum { NB = 1000 };
    static uint32_t a32[NB + 7];
    static uint16_t a16[1 << 16];
    static double out[1 << 16];
    uint64_t s = gp_test_seed(79);
    for (int f = 0; f < GP_NFORMATS; f++) {
        gp_format ff = (gp_format)f;
        unsigned w = gp_fmt_get(ff).width;
        if (w == 32)
            continue;
        size_t m = (size_t)1 << w;
        for (size_t b = 0; b < m; b++)
            gp_pack_set(ff, a16, b, (uint32_t)b);
        for (size_t i = 0; i < m;) {
            size_t n = 1 + gp_test_next(&s) % 777;
            if (n > m - i)
                n = m - i;
            gp_widen_block(ff, a16, i, n, out);
            for (size_t j = 0; j < n; j++)
                gp_assert_bits(gp_f64_bits(out[j]), gp_f64_bits(gp_fmt_to_f64_fast(ff, (uint32_t)(i + j))),
                               "format %d bits 0x%zx", f, i + j);
            i += n;
        }
    }
    for (int rep = 0; rep < 200; rep++) {
        size_t off = (size_t)(gp_test_next(&s) % 7), n = 1 + gp_test_next(&s) % NB;
        for (size_t j = 0; j < NB + 7; j++) { /* finite or infinite values; a NaN in odd reps */
            uint32_t b = (uint32_t)gp_test_next(&s);
            a32[j] = (b & 0x7fffffffu) > 0x7f800000u ? b & 0xff800000u : b;
        }
        if (rep % 2) /* a NaN, quiet or signalling, either sign */
            a32[off + gp_test_next(&s) % n] = 0x7f800000u | (uint32_t)(gp_test_next(&s) & 0x80000000u) |
                                              (uint32_t)(1 + gp_test_next(&s) % 0x7fffffu);
        gp_widen_block(GP_FP32, a32, off, n, out);
        for (size_t j = 0; j < n; j++)
            gp_assert_bits(gp_f64_bits(out[j]), gp_f64_bits(gp_fmt_to_f64_fast(GP_FP32, a32[off + j])), "fp32 0x%08x",
                           a32[off + j]);
    }
}

/* The CPU backend's accumulate on n elements (asserting success): formats, rounding, FTZ,
 * the random stream (seed, stream) from element `first`, comp for Kahan (else NULL). */
static void cpu_accumulate_n(int af, int gf, int r, int ftz, uint64_t seed, uint64_t stream, uint64_t first, size_t n,
                             void *acc, const void *grad, void *comp)
{
    gp_plugin_accumulate_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.grad_format = gf;
    a.acc_format = af;
    a.rounding = r;
    a.ftz = ftz;
    a.seed = seed;
    a.stream = stream;
    a.first_index = first;
    a.n = n;
    a.grad = grad;
    a.acc = acc;
    a.comp = comp;
    assert_int_equal(gp_cpu_backend()->accumulate(&a), 0);
}

/* Random gradients and accumulators: the CPU backend (fast paths included) equals a
 * loop of gp_accum_step with events requested (the generic, instrumented path). */
static void test_backend_equals_definition(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(99);
    enum { N = 4096 };
    static float gsrc[N];
    static uint32_t accsrc[N], want[N], wcomp[N];
    static uint8_t grad[N * 4], acc[N * 4], comp[N * 4];
    for (int af = 0; af < GP_NFORMATS; af++)
        for (int gf = 0; gf < GP_NFORMATS; gf++)
            for (int r = GP_ACC_RNE; r <= GP_ACC_KAHAN; r++)
                for (int ftz = 0; ftz < 2; ftz++) {
                    for (int i = 0; i < N; i++) {
                        double mag = ldexp(1.0 + (double)(gp_test_next(&s) % 1000) / 1000, (int)(gp_test_next(&s) % 40) - 30);
                        double v = gp_test_next(&s) & 1 ? -mag : mag;
                        uint32_t gb = gp_fmt_from_f64((gp_format)gf, v, GP_RNE, 0, 0, NULL);
                        gp_pack_set((gp_format)gf, grad, (uint64_t)i, gb);
                        gsrc[i] = gp_f32_from_bits(gp_fmt_to_f32_bits((gp_format)gf, gb));
                        accsrc[i] = gp_fmt_from_f64((gp_format)af, ldexp(mag, (int)(gp_test_next(&s) % 12)), GP_RNE, 0, 0, NULL);
                        gp_pack_set((gp_format)af, acc, (uint64_t)i, accsrc[i]);
                        gp_pack_set((gp_format)af, comp, (uint64_t)i, 0);
                        wcomp[i] = 0;
                        unsigned ev = 0;
                        uint32_t rb = r == GP_ACC_STOCHASTIC ? gp_rand_u32(5, 6, 100 + (uint64_t)i) : 0;
                        want[i] = gp_accum_step((gp_format)af, (gp_acc_rounding)r, ftz, accsrc[i], &wcomp[i], gsrc[i], rb, &ev);
                    }
                    /* a length not always a multiple of 8: the vector loops' last few */
                    int n = N - (af * 7 + gf * 3 + r + ftz) % 8;
                    cpu_accumulate_n(af, gf, r, ftz, 5, 6, 100, (uint64_t)n, acc, grad, comp);
                    for (int i = n; i < N; i++) /* past the length: untouched */
                        gp_assert_bits(gp_pack_get((gp_format)af, acc, (uint64_t)i), accsrc[i],
                                       "acc fmt %d grad fmt %d: element %d past %d written", af, gf, i, n);
                    for (int i = 0; i < n; i++) {
                        uint32_t got = gp_pack_get((gp_format)af, acc, (uint64_t)i);
                        if (gp_fmt_agree((gp_format)af, got, want[i]))
                            want[i] = got; /* both NaN: NaN-ness is what is compared */
                        gp_assert_bits(got, want[i],
                                       "acc fmt %d grad fmt %d rounding %d ftz %d element %d", af, gf, r, ftz, i);
                        if (r == GP_ACC_KAHAN) {
                            uint32_t gc = gp_pack_get((gp_format)af, comp, (uint64_t)i);
                            gp_assert_bits(gp_fmt_agree((gp_format)af, gc, wcomp[i]) ? wcomp[i] : gc, wcomp[i],
                                           "comp %d", i);
                        }
                    }
                }
}

/* A random finite value of format f (bits): any finite pattern, or a small
 * magnitude (one in three: zeros, subnormals; one in three: subnormals of at most half
 * the format's bits, where underflow is judged). */
static uint32_t attrib_value(gp_format f, uint64_t *s)
{
    gp_fmt_info fi = gp_fmt_get(f);
    uint32_t sign = (uint32_t)(gp_test_next(s) & 1) << (fi.width - 1);
    uint32_t top = fi.inf ? fi.inf : fi.maxfin + 1; /* finite magnitudes are below */
    uint64_t r = gp_test_next(s);
    int small = r % 3 == 0 ? fi.p + 1 : r % 3 == 1 ? (fi.p + 1) / 2 : 0; /* subnormals; few bits */
    uint32_t mag = (uint32_t)(gp_test_next(s) % (small ? 1u << small : top));
    return sign | mag;
}

/* Stochastic rounding on the CPU backend (its random bits a block of counters at a time,
 * bf16 accumulators of finite values on the bit loop) equals gp_accum_step per element with
 * gp_rand_u32's bits: every accumulator and grad format, FTZ or not, first indices not a
 * multiple of 4 (one Philox counter serves four elements) and near 2^64 (the index wraps),
 * lengths across the backend's blocks of 1024, any bit patterns (sums overflowing to
 * infinity, subnormals, zeros), and in some calls an infinity or a NaN. */
static void test_backend_sr_equals_definition(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(23);
    enum { N = 2600 };
    static uint8_t grad[N * 4], acc[N * 4];
    static uint32_t want[N];
    for (int af = 0; af < GP_NFORMATS; af++)
        for (int gf = 0; gf < GP_NFORMATS; gf++)
            for (int rep = 0; rep < 8; rep++) {
                int ftz = rep % 4 == 3;
                uint64_t first = rep % 4 == 1 ? ~0ull - gp_test_next(&s) % 3000 : gp_test_next(&s) % 100000;
                size_t n = rep % 2 ? N : (size_t)(1 + gp_test_next(&s) % N);
                uint64_t seed = gp_test_next(&s), stream = gp_test_next(&s);
                gp_fmt_info fa = gp_fmt_get((gp_format)af), fg = gp_fmt_get((gp_format)gf);
                for (size_t i = 0; i < n; i++) {
                    uint32_t ab = attrib_value((gp_format)af, &s), gb = attrib_value((gp_format)gf, &s);
                    uint64_t r = gp_test_next(&s);
                    if (r % 8 == 0) /* next to the largest magnitude: sums overflow */
                        ab = (fa.maxfin - (uint32_t)(r >> 8) % 4) | (uint32_t)(r >> 12 & 1) << (fa.width - 1);
                    if (r % 8 == 1)
                        gb = (fg.maxfin - (uint32_t)(r >> 16) % 4) | (uint32_t)(r >> 20 & 1) << (fg.width - 1);
                    gp_pack_set((gp_format)af, acc, i, ab);
                    gp_pack_set((gp_format)gf, grad, i, gb);
                }
                if (rep % 4 == 2 && fa.inf) /* an infinity or a NaN somewhere in the call */
                    gp_pack_set((gp_format)af, acc, gp_test_next(&s) % n, fa.inf + (uint32_t)(gp_test_next(&s) & 1));
                for (size_t i = 0; i < n; i++) {
                    uint32_t comp = 0;
                    float g = gp_f32_from_bits(gp_fmt_to_f32_bits((gp_format)gf, gp_pack_get((gp_format)gf, grad, i)));
                    want[i] = gp_accum_step((gp_format)af, GP_ACC_STOCHASTIC, ftz, gp_pack_get((gp_format)af, acc, i),
                                            &comp, g, gp_rand_u32(seed, stream, first + i), NULL);
                }
                cpu_accumulate_n(af, gf, GP_ACC_STOCHASTIC, ftz, seed, stream, first, n, acc, grad, NULL);
                for (size_t i = 0; i < n; i++) {
                    uint32_t got = gp_pack_get((gp_format)af, acc, i);
                    gp_assert_bits(gp_fmt_agree((gp_format)af, got, want[i]) ? want[i] : got, want[i],
                                   "acc fmt %d grad fmt %d rep %d element %zu", af, gf, rep, i);
                }
            }
}

/* fp16 grads into an fp16 accumulator, RNE, no FTZ (the backend's F16C loop where the CPU
 * has it) equals gp_accum_step per element: finite values of every kind (subnormals,
 * zeros of both signs, values next to the largest finite one whose sums overflow to
 * infinity, arbitrary patterns), lengths that are not a multiple of 8; a call holding an
 * infinity takes the general loop, with the same results. */
static void test_backend_f16_equals_definition(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(29);
    enum { N = 3000 };
    static uint16_t acc[N], grad[N];
    static uint32_t want[N];
    gp_fmt_info fi = gp_fmt_get(GP_FP16);
    uint64_t overflowed = 0, subnormal = 0;
    for (int rep = 0; rep < 60; rep++) {
        size_t n = rep % 2 ? N : (size_t)(1 + gp_test_next(&s) % N);
        for (size_t i = 0; i < n; i++) {
            uint64_t r = gp_test_next(&s);
            acc[i] = (uint16_t)attrib_value(GP_FP16, &s);
            grad[i] = (uint16_t)attrib_value(GP_FP16, &s);
            if (r % 8 == 0) /* next to the largest magnitude, the same sign: overflow */
                acc[i] = (uint16_t)((fi.maxfin - (uint32_t)(r >> 8) % 8) | (grad[i] & 0x8000u));
        }
        if (rep % 10 == 9) /* an infinity: the general loop */
            acc[gp_test_next(&s) % n] = (uint16_t)(fi.inf | (gp_test_next(&s) & 1) << 15);
        for (size_t i = 0; i < n; i++) {
            uint32_t comp = 0;
            want[i] = gp_accum_step(GP_FP16, GP_ACC_RNE, 0, acc[i], &comp,
                                    gp_f32_from_bits(gp_fmt_to_f32_bits(GP_FP16, grad[i])), 0, NULL);
            overflowed += (want[i] & 0x7fffu) == fi.inf;
            subnormal += (want[i] & 0x7fffu) != 0 && (want[i] & 0x7fffu) < 0x400u;
        }
        cpu_accumulate_n(GP_FP16, GP_FP16, GP_ACC_RNE, 0, 0, 0, 0, n, acc, grad, NULL);
        for (size_t i = 0; i < n; i++)
            gp_assert_bits(acc[i], want[i], "rep %d element %zu", rep, i);
    }
    assert_true(overflowed > 100 && subnormal > 100);
}

/* The CPU backend's grad_sumsq (the clipping norm's sum of squares, a perfect tree a
 * chunk of 256 at a time) equals its definition gp_clip_sumsq (the streaming tree T of
 * gp_clip.h) bit for bit: bf16, fp16 and fp32 tensors of lengths around the chunk and
 * power-of-two boundaries and random ones, values over each format's whole range
 * (subnormals; squares that underflow or overflow fp32), zeros of both signs, and now and
 * then an infinity or a NaN (fp16's then take the definition itself). */
static void test_backend_sumsq_equals_definition(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(34);
    enum { N = 5000 };
    static uint32_t g[N]; /* packed in the format (at most 4 bytes) */
    const gp_format fmts[] = {GP_BF16, GP_FP16, GP_FP32};
    const size_t lens[] = {1, 2, 3, 255, 256, 257, 511, 512, 513, 1024, 4096, 4097, N};
    uint64_t compared = 0, nonfinite = 0, finite = 0;
    for (int fi = 0; fi < 3; fi++) {
        gp_format f = fmts[fi];
        for (int rep = 0; rep < 40; rep++) {
            size_t n = rep < 13 ? lens[rep] : (size_t)(1 + gp_test_next(&s) % N);
            int wild = rep % 3 == 2; /* a tenth of the values anywhere: sums often overflow */
            for (size_t i = 0; i < n; i++) { /* else moderate values: finite sums */
                uint64_t r = gp_test_next(&s);
                int e = f == GP_FP16 ? (int)(r % 28) - 20 : (int)(r % 91) - 60;
                float w = ldexpf(1.0f + (float)(r >> 40) * 0x1p-24f, e) * (r & 1 ? -1.0f : 1.0f);
                uint32_t v = wild && r % 10 == 0 ? attrib_value(f, &s) : gp_fmt_rne_from_f32_bits(f, gp_f32_bits(w));
                if (gp_test_next(&s) % 41 == 0)
                    v = (uint32_t)(gp_test_next(&s) & 1) << (gp_fmt_get(f).width - 1); /* +-0 */
                gp_pack_set(f, g, i, v);
            }
            if (rep % 7 == 6) { /* an infinity or a NaN somewhere */
                gp_fmt_info info = gp_fmt_get(f);
                gp_pack_set(f, g, gp_test_next(&s) % n, rep % 2 ? info.inf : info.qnan);
                nonfinite++;
            }
            gp_plugin_sumsq_args a;
            memset(&a, 0, sizeof a);
            a.struct_size = sizeof a;
            a.format = (int32_t)f;
            a.n = n;
            a.grad = g;
            assert_int_equal(gp_cpu_backend()->grad_sumsq(&a), 0);
            float want = gp_clip_sumsq(f, g, n);
            if (isnan(want))
                assert_true(isnan(a.sumsq));
            else
                gp_assert_bits(gp_f32_bits(a.sumsq), gp_f32_bits(want), "format %d, n %zu, rep %d", (int)f, n, rep);
            compared++;
            finite += isfinite(want) != 0;
        }
    }
    assert_true(finite > compared / 2); /* rounding, not overflow, is what most compare */
    print_message("grad_sumsq: %llu tensors compared (%llu with a non-finite value, %llu finite sums)\n",
                  (unsigned long long)compared, (unsigned long long)nonfinite, (unsigned long long)finite);
}

/* The vectorised stochastic-rounding draws equal their definition, gp_sr_draw_one, bit for
 * bit (u, w and the flag): random blocks of both pairs it takes (bf16 accumulator, bf16 or
 * fp32 addend), stored values that are the stochastic rounding itself (gp_accum_step with
 * random bits: a draw whenever the sum lies between two values), the old value or an
 * arbitrary one (neither neighbour: no draw), and among the inputs infinities, NaNs and
 * values next to the largest finite one (hi infinite, sums overflowing fp32). Both
 * outcomes occur. FTZ, another accumulator or addend format is declined, nothing written. */
static void test_sr_draw_block_equals_definition(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(17);
    enum { N = GP_ATTRIB_BLOCK };
    static uint32_t old[N], acc[N], grad[N];
    static double u[N], w[N];
    static uint8_t draw[N];
    const gp_format gfs[] = {GP_BF16, GP_FP32};
    uint64_t drawn = 0, not_drawn = 0;
    for (size_t p = 0; p < 2; p++) {
        gp_format af = GP_BF16, gf = gfs[p];
        gp_fmt_info fa = gp_fmt_get(af), fg = gp_fmt_get(gf);
        for (int rep = 0; rep < 200; rep++) {
            size_t n = rep % 2 ? N : (size_t)(1 + gp_test_next(&s) % N);
            for (size_t i = 0; i < n; i++) {
                uint64_t r = gp_test_next(&s);
                uint32_t ob = attrib_value(af, &s), gb = attrib_value(gf, &s), nb;
                if (r % 16 == 0) /* the largest finite magnitude, either sign: hi infinite, sums overflowing */
                    ob = fa.maxfin | (uint32_t)(r >> 8 & 1) << (fa.width - 1);
                if (r % 16 == 1)
                    gb = fg.maxfin | (uint32_t)(r >> 9 & 1) << (fg.width - 1);
                if (r % 32 == 2) /* infinities and NaNs */
                    ob = r >> 10 & 1 ? fa.inf : fa.inf + 1;
                if (r % 32 == 3)
                    gb = (r >> 11 & 1 ? fg.inf : fg.inf + 1) | (uint32_t)(r >> 12 & 1) << (fg.width - 1);
                unsigned how = (unsigned)(r >> 16) % 4;
                if (how <= 1) { /* the stochastic rounding */
                    uint32_t comp = 0;
                    nb = gp_accum_step(af, GP_ACC_STOCHASTIC, 0, ob, &comp,
                                       gp_f32_from_bits(gp_fmt_to_f32_bits(gf, gb)), (uint32_t)(r >> 32), NULL);
                } else {
                    nb = how == 2 ? ob : attrib_value(af, &s);
                }
                gp_pack_set(af, old, i, ob);
                gp_pack_set(af, acc, i, nb);
                gp_pack_set(gf, grad, i, gb);
            }
            memset(draw, 0xee, sizeof draw);
            assert_int_equal(gp_sr_draw_block(af, gf, 0, old, acc, grad, n, u, w, draw), 1);
            for (size_t i = 0; i < n; i++) {
                double wu, ww;
                uint32_t nb = gp_pack_get(af, acc, i);
                int want = gp_sr_draw_one(af, gp_fmt_to_f64(af, gp_pack_get(af, old, i)),
                                          gp_fmt_to_f64(gf, gp_pack_get(gf, grad, i)), nb, 0, &wu, &ww);
                assert_int_equal(draw[i], want);
                gp_assert_bits(gp_f64_bits(u[i]), gp_f64_bits(wu), "u %zu", i);
                gp_assert_bits(gp_f64_bits(w[i]), gp_f64_bits(ww), "w %zu", i);
                drawn += (uint64_t)want;
                not_drawn += (uint64_t)!want;
            }
        }
    }
    assert_true(drawn > 1000 && not_drawn > 1000);
    memset(draw, 0xee, sizeof draw);
    assert_int_equal(gp_sr_draw_block(GP_BF16, GP_BF16, 1, old, acc, grad, 4, u, w, draw), 0);
    assert_int_equal(gp_sr_draw_block(GP_FP32, GP_BF16, 0, old, acc, grad, 4, u, w, draw), 0);
    assert_int_equal(gp_sr_draw_block(GP_BF16, GP_FP16, 0, old, acc, grad, 4, u, w, draw), 0);
    assert_int_equal(gp_sr_draw_block(GP_FP16, GP_FP16, 0, old, acc, grad, 4, u, w, draw), 0);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(draw[i], 0xee);
}

/* The vectorised attribution equals its definition, gp_attrib_one with the error update,
 * sums and per-element counters of harness/run/gp_run_accum.c's attribute_range, bit for
 * bit (counters: every other block, from 0 and from 7): random blocks of every pair it
 * takes, the loss scale by inverse and by division, errw 1 and 1/3; stored values equal
 * to the old one (absorption when the addend is non-zero), the RNE sum, or arbitrary
 * (a backend is judged on what it stored); errors from earlier additions, -0 included,
 * and blocks whose overflow, saturation and non-finite errors are not given (NULL: +0).
 * Each mechanism it can name occurs. A non-finite value, or another pair, is declined
 * with nothing written. */
static void test_attrib_block_equals_definition(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(16);
    enum { N = GP_ATTRIB_BLOCK };
    static const int pairs[][2] = {{GP_BF16, GP_BF16}, {GP_FP32, GP_BF16}, {GP_FP32, GP_FP16},
                                   {GP_FP32, GP_FP32}, {GP_BF16, GP_FP32}, {GP_FP16, GP_FP16}};
    static uint32_t old[N], acc[N], grad[N]; /* packed in their formats (at most 4 bytes) */
    static double e0[GP_MECH_NONFINITE + 1][N], e1[GP_MECH_NONFINITE + 1][N], te2[N];
    const double scales[][2] = {{1.0, 1.0}, {1024.0, 1.0 / 1024}, {3.0, 0.0}}; /* s, inv (0: divide) */
    const double errws[] = {1.0, 1.0 / 3};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        gp_format af = (gp_format)pairs[p][0], gf = (gp_format)pairs[p][1];
        uint64_t seen[GP_NMECH] = {0};
        for (int rep = 0; rep < 40; rep++) {
            size_t n = rep % 2 ? N : (size_t)(1 + gp_test_next(&s) % N); /* odd lengths: loop tails */
            int rare_null = rep % 5 >= 3; /* overflow, saturation, non-finite errors not given (NULL) */
            for (size_t i = 0; i < n; i++) {
                uint32_t ob = attrib_value(af, &s), gb = attrib_value(gf, &s), nb;
                unsigned how = (unsigned)(gp_test_next(&s) % 3);
                if (how == 0) {
                    nb = ob;
                } else if (how == 1) {
                    uint32_t comp = 0;
                    nb = gp_accum_step(af, GP_ACC_RNE, 0, ob, &comp, gp_f32_from_bits(gp_fmt_to_f32_bits(gf, gb)), 0, NULL);
                    if (!isfinite(gp_fmt_to_f64(af, nb))) /* an overflowing sum: the block declines it */
                        nb = ob;
                } else {
                    nb = attrib_value(af, &s);
                }
                if ((nb & ((1u << (gp_fmt_get(af).width - 1)) - 1u)) == gp_fmt_get(af).maxfin)
                    nb = 0; /* a stored +-max finite (saturation) is declined by contract: tested below */
                gp_pack_set(af, old, i, ob);
                gp_pack_set(af, acc, i, nb);
                gp_pack_set(gf, grad, i, gb);
                for (int m = 0; m < GP_MECH_NONFINITE + 1; m++) {
                    uint64_t r = gp_test_next(&s);
                    e0[m][i] = r % 4 == 0 ? (r & 4 ? -0.0 : 0.0) : ldexp((double)(int64_t)(r >> 8), -80);
                    if (rare_null && (m == GP_MECH_OVERFLOW || m == GP_MECH_SATURATION || m == GP_MECH_NONFINITE))
                        e0[m][i] = 0.0; /* not given: all +0 */
                    e1[m][i] = e0[m][i];
                }
            }
            const double *sc = scales[rep % 3];
            double errw = errws[rep / 3 % 2];
            double *err[GP_MECH_NONFINITE + 1];
            for (int m = 0; m < GP_MECH_NONFINITE + 1; m++)
                err[m] = e1[m];
            if (rare_null)
                err[GP_MECH_OVERFLOW] = err[GP_MECH_SATURATION] = err[GP_MECH_NONFINITE] = NULL;
            gp_attrib_counts got = {0, 0, 0, 0}, want = {0, 0, 0, 0};
            /* every other block with per-element counters (runs with sampling), from 0 or 7 */
            static uint32_t elc[GP_ATTRIB_NEL][N];
            uint32_t *el[GP_ATTRIB_NEL] = {elc[0], elc[1], elc[2], elc[3]}, base = rep & 2 ? 7 : 0;
            for (int k = 0; k < GP_ATTRIB_NEL; k++)
                for (size_t i = 0; i < N; i++)
                    elc[k][i] = base;
            int counting = rep % 4 < 2;
            assert_int_equal(gp_attrib_block(af, gf, old, acc, grad, n, sc[0], sc[1], errw, err, te2, &got,
                                             counting ? el : NULL), 1);
            for (size_t i = 0; i < n; i++) {
                double delta;
                unsigned f;
                gp_mechanism m = gp_attrib_one(af, gf, gp_pack_get(af, old, i), gp_pack_get(af, acc, i),
                                               gp_pack_get(gf, grad, i), sc[0], sc[1], &delta, &f);
                seen[m]++;
                want.rounded_nonzero += (f & GP_AT_ROUNDED) != 0;
                want.adds_nonzero += (f & GP_AT_ADD) != 0;
                want.absorbed += (f & GP_AT_ABSORBED) != 0;
                want.underflow += m == GP_MECH_UNDERFLOW;
                uint32_t one[GP_ATTRIB_NEL] = {(f & GP_AT_ROUNDED) != 0, (f & GP_AT_ADD) != 0, (f & GP_AT_ABSORBED) != 0,
                                               m == GP_MECH_UNDERFLOW};
                for (int k = 0; k < GP_ATTRIB_NEL; k++)
                    assert_int_equal(elc[k][i], base + (counting ? one[k] : 0));
                double te = 0;
                for (int j = GP_MECH_UNDERFLOW; j < GP_MECH_NONFINITE + 1; j++) {
                    if (j == (int)m)
                        e0[j][i] += delta * errw;
                    te += e0[j][i];
                    gp_assert_bits(gp_f64_bits(e1[j][i]), gp_f64_bits(e0[j][i]), "pair %zu rep %d element %zu err %d",
                                   p, rep, i, j);
                }
                gp_assert_bits(gp_f64_bits(te2[i]), gp_f64_bits(te * te), "pair %zu rep %d element %zu te2", p, rep, i);
            }
            assert_int_equal(got.rounded_nonzero, want.rounded_nonzero);
            assert_int_equal(got.adds_nonzero, want.adds_nonzero);
            assert_int_equal(got.absorbed, want.absorbed);
            assert_int_equal(got.underflow, want.underflow);
            /* one non-finite value in any of the three arrays: declined, nothing written */
            const gp_format fm[3] = {af, af, gf};
            void *arr[3] = {old, acc, grad};
            int which = rep % 3;
            size_t at = (size_t)(gp_test_next(&s) % n);
            uint32_t keep = gp_pack_get(fm[which], arr[which], at);
            gp_fmt_info fi = gp_fmt_get(fm[which]);
            gp_pack_set(fm[which], arr[which], at, rep & 4 ? fi.qnan : fi.inf);
            double before = e1[GP_MECH_ROUNDING][0];
            static uint32_t elk[GP_ATTRIB_NEL][N];
            memcpy(elk, elc, sizeof elk);
            gp_attrib_counts none = {0, 0, 0, 0};
            te2[0] = -1;
            assert_int_equal(gp_attrib_block(af, gf, old, acc, grad, n, sc[0], sc[1], errw, err, te2, &none, el), 0);
            gp_assert_bits(gp_f64_bits(e1[GP_MECH_ROUNDING][0]), gp_f64_bits(before), "declined block wrote err");
            assert_true(te2[0] == -1 && none.rounded_nonzero == 0 && none.adds_nonzero == 0);
            for (int k = 0; k < GP_ATTRIB_NEL; k++) /* nor the per-element counters */
                assert_memory_equal(elc[k], elk[k], sizeof elk[k]);
            gp_pack_set(fm[which], arr[which], at, keep);
        }
        assert_true(seen[GP_MECH_UNDERFLOW] > 0 && seen[GP_MECH_ABSORPTION] > 0 && seen[GP_MECH_ROUNDING] > 0);
    }
    double *err[GP_MECH_NONFINITE + 1];
    for (int m = 0; m < GP_MECH_NONFINITE + 1; m++)
        err[m] = e1[m];
    gp_attrib_counts none = {0, 0, 0, 0};
    assert_int_equal(gp_attrib_block(GP_FP8_E4M3, GP_BF16, old, acc, grad, 4, 1.0, 1.0, 1.0, err, te2, &none, NULL), 0);
}

/* The vectorised store of backward outputs equals its definition (harness/run/gp_run_accum.c's
 * store_range: gp_fmt_from_f64_rne with events, the mechanism by gp_classify_v, rounding
 * or underflow here, the error sums and the counts) bit for bit: random zeros, ties,
 * binade and range edges and arbitrary values of the normal range, in bf16, fp16 and fp32,
 * the scale by inverse and by division; normal values give the same with FTZ. With
 * subnormals, also values below the least normal one: arbitrary ones down to below half
 * the least subnormal (stored as zero), ties between subnormals and their neighbours, and
 * values just below the least normal one (which round up to it). A value outside (a
 * subnormal result without subnormals, past the largest finite value, inf, NaN) or another
 * format is declined with nothing written. */
static void test_store_block_equals_definition(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(17);
    enum { N = GP_ATTRIB_BLOCK };
    static double xs[N], p0[N], p1[N], e0[N], e1[N], u0[N], u1[N];
    static uint32_t grad[N];
    const gp_format fmts[] = {GP_BF16, GP_FP16, GP_FP32};
    const double scales[][2] = {{1.0, 1.0}, {65536.0, 1.0 / 65536}, {3.0, 0.0}};
    for (int f = 0; f < 3; f++) {
        gp_format gf = fmts[f];
        gp_fmt_info fi = gp_fmt_get(gf);
        double minn = ldexp(1.0, fi.emin), maxf = gp_fmt_to_f64(gf, fi.maxfin), q = ldexp(minn, 1 - fi.p);
        uint64_t inexact = 0, seen[GP_NMECH] = {0}, subnormal_seen = 0;
        for (int rep = 0; rep < 120; rep++) {
            int sub = rep % 4 >= 2;
            size_t n = rep % 2 ? N : (size_t)(1 + gp_test_next(&s) % N);
            for (size_t i = 0; i < n; i++) {
                uint64_t r = gp_test_next(&s);
                double v;
                switch (r % (sub ? 9 : 6)) {
                case 0: v = r & 8 ? -0.0 : 0.0; break;
                case 1: v = minn; break;
                case 2: v = maxf; break;
                case 3: { /* a tie or its neighbours between two values of gf */
                    uint32_t minb = 1u << (fi.p - 1); /* a normal value a, its successor up */
                    double a = gp_fmt_to_f64(gf, minb + (uint32_t)((r >> 8) % (fi.maxfin - minb)));
                    double up = gp_fmt_to_f64(gf, gp_fmt_from_f64(gf, a, GP_RNE, 0, 0, NULL) + 1u);
                    v = (a + up) / 2; /* exact in binary64 */
                    if (r & 16)
                        v = nextafter(v, r & 32 ? 0.0 : INFINITY);
                    if (v > maxf)
                        v = maxf;
                    break;
                }
                case 6: /* below the least normal value, down to below half the least subnormal */
                    v = ldexp(1.0 + (double)(r >> 12) * 0x1p-52, fi.emin - 1 - (int)((r >> 4) % (unsigned)(fi.p + 2)));
                    break;
                case 7: { /* a tie between subnormals k q and (k + 1) q, or a neighbour */
                    v = ((double)((r >> 8) % (1u << (fi.p - 1))) + 0.5) * q;
                    if (r & 16)
                        v = nextafter(v, r & 32 ? 0.0 : INFINITY);
                    break;
                }
                case 8: v = nextafter(minn, 0.0); break; /* rounds up to the least normal value */
                default: /* random magnitude in the normal range */
                    v = ldexp(1.0 + (double)(r >> 12) * 0x1p-52, fi.emin + (int)((r >> 4) % (unsigned)(fi.emax - fi.emin)));
                }
                xs[i] = r & 64 ? -v : v;
                p0[i] = p1[i] = ldexp((double)(int64_t)gp_test_next(&s), -70);
                e0[i] = e1[i] = r & 128 ? -0.0 : ldexp((double)(int64_t)gp_test_next(&s), -90);
                u0[i] = u1[i] = r & 256 ? -0.0 : ldexp((double)(int64_t)gp_test_next(&s), -90);
            }
            const double *sc = scales[rep % 3];
            double errw = rep / 3 % 2 ? 1.0 / 3 : 1.0;
            gp_store_counts got = {0, 0, 0, 0}, want = {0, 0, 0, 0};
            assert_int_equal(gp_store_block(gf, sub, xs, n, sc[0], sc[1], errw, grad, p1, e1, u1, &got), 1);
            for (size_t i = 0; i < n; i++) {
                for (int ftz = 0; ftz < 2 - sub; ftz++) { /* normal values: FTZ changes nothing */
                    unsigned ev = 0;
                    uint32_t g = gp_fmt_from_f64_rne(gf, gp_f64_bits(xs[i]), ftz, &ev);
                    gp_assert_bits(gp_pack_get(gf, grad, i), g, "fmt %d rep %d element %zu ftz %d", gf, rep, i, ftz);
                    double v = gp_fmt_to_f64(gf, g);
                    gp_mechanism m = gp_classify_v(gf, xs[i], g, v, ev);
                    if (ftz == 0) {
                        assert_true(m == GP_MECH_ROUNDING || m == GP_MECH_UNDERFLOW);
                        seen[m]++;
                        double d = gp_attrib_unscaled(v - xs[i], sc[0], sc[1]) * errw;
                        if (m == GP_MECH_UNDERFLOW)
                            u0[i] += d;
                        else
                            e0[i] += d;
                        want.rounded_nonzero += xs[i] != 0;
                        want.stored_nonzero += v != 0;
                        want.subnormal += v != 0 && (g & ((1u << (fi.width - 1)) - 1u)) < (1u << (fi.p - 1));
                        want.underflow += m == GP_MECH_UNDERFLOW;
                    } else {
                        assert_int_equal(m, GP_MECH_ROUNDING);
                    }
                    inexact += ftz == 0 && v != xs[i];
                }
                p0[i] += gp_attrib_unscaled(xs[i], sc[0], sc[1]) * errw;
                gp_assert_bits(gp_f64_bits(p1[i]), gp_f64_bits(p0[i]), "partial fmt %d rep %d element %zu", gf, rep, i);
                gp_assert_bits(gp_f64_bits(e1[i]), gp_f64_bits(e0[i]), "err fmt %d rep %d element %zu", gf, rep, i);
                gp_assert_bits(gp_f64_bits(u1[i]), gp_f64_bits(u0[i]), "under fmt %d rep %d element %zu", gf, rep, i);
            }
            assert_int_equal(got.rounded_nonzero, want.rounded_nonzero);
            assert_int_equal(got.stored_nonzero, want.stored_nonzero);
            assert_int_equal(got.subnormal, want.subnormal);
            assert_int_equal(got.underflow, want.underflow);
            subnormal_seen += want.subnormal;
            /* one value outside: declined, nothing written */
            const double outside[] = {minn / 2, nextafter(maxf, INFINITY), INFINITY, NAN, 0x1p-1074};
            size_t at = (size_t)(gp_test_next(&s) % n);
            double keep = xs[at], before = p1[0];
            xs[at] = outside[sub ? 1 + rep % 3 : rep % 5];
            uint32_t g0 = grad[0];
            grad[0] = ~g0;
            gp_store_counts again = got;
            assert_int_equal(gp_store_block(gf, sub, xs, n, sc[0], sc[1], errw, grad, p1, e1, u1, &again), 0);
            assert_true(grad[0] == ~g0 && gp_f64_bits(p1[0]) == gp_f64_bits(before) &&
                        again.rounded_nonzero == got.rounded_nonzero && again.underflow == got.underflow);
            xs[at] = keep;
        }
        assert_true(inexact > 0 && seen[GP_MECH_UNDERFLOW] > 0 && seen[GP_MECH_ROUNDING] > 0 && subnormal_seen > 0);
    }
    gp_store_counts none = {0, 0, 0, 0};
    assert_int_equal(gp_store_block(GP_FP8_E5M2, 1, xs, 4, 1.0, 1.0, 1.0, grad, p1, e1, u1, &none), 0);
}

/* bf16: 1 + 2^-9 stays 1 (2^-9 is below half an ulp of 1, 2^-8): ABSORBED. With Kahan
 * compensation, 256 such additions are not lost: the compensation carries them, and the
 * sum reaches 1.5 (exactly representable in bf16). */
static void test_absorption_and_kahan(void **state)
{
    (void)state;
    uint32_t one = 0x3f80, acc = one, comp = 0;
    unsigned ev = 0;
    uint32_t out = gp_accum_step(GP_BF16, GP_ACC_RNE, 0, acc, &comp, 0x1p-9f, 0, &ev);
    gp_assert_bits(out, one, "1 + 2^-9 in bf16");
    gp_assert_bits(ev & GP_EV_ABSORBED, GP_EV_ABSORBED, "absorbed flag");
    for (int k = 0; k < 256; k++)
        acc = gp_accum_step(GP_BF16, GP_ACC_KAHAN, 0, acc, &comp, 0x1p-9f, 0, NULL);
    gp_assert_bits(acc, 0x3fc0, "Kahan bf16 sum of 1 + 256 * 2^-9 = 1.5");
    ev = 0;
    gp_accum_step(GP_FP32, GP_ACC_RNE, 0, gp_f32_bits(1.0f), &comp, 0x1p-30f, 0, &ev);
    gp_assert_bits(ev, GP_EV_INEXACT | GP_EV_ABSORBED, "fp32: 1 + 2^-30 absorbed");
}

/* fp32 accumulation with directed rounding (and RNE with events, the same path) equals
 * the hardware's IEEE binary32 addition in that rounding mode — an independent oracle.
 * The hard cases have the addend far below the accumulator's ulp, so the binary64 sum
 * is inexact and its sticky information decides: 0xc1de001b + 0x2760c87b rounds
 * toward zero to 0xc1de001a (the binary64 sum is one binary64 ulp from the fp32 value
 * 0xc1de001b, and a nudge onto that value would round to it). Random pairs: exponents
 * apart by 0..60, random signs and significands; 10^6 of them per mode. */
static uint32_t hw_add(uint32_t a, uint32_t g, int mode)
{
    volatile float x = gp_f32_from_bits(a), y = gp_f32_from_bits(g);
    fesetround(mode);
    volatile float z = x + y;
    fesetround(FE_TONEAREST);
    return gp_f32_bits(z);
}

static void test_fp32_directed_equals_ieee(void **state)
{
    (void)state;
    gp_assert_bits(gp_accum_step(GP_FP32, GP_ACC_RTZ, 0, 0xc1de001bu, NULL, gp_f32_from_bits(0x2760c87bu), 0, NULL),
                   0xc1de001au, "0xc1de001b + 0x2760c87b toward zero");
    uint64_t s = gp_test_seed(777);
    long checked = 0;
    for (int i = 0; i < 1000000; i++) {
        uint32_t ea = 64 + (uint32_t)(gp_test_next(&s) % 128), d = (uint32_t)(gp_test_next(&s) % 61);
        uint32_t eg = ea > d ? ea - d : 0;
        uint32_t a = (uint32_t)(gp_test_next(&s) & 0x807fffffu) | ea << 23;
        uint32_t g = (uint32_t)(gp_test_next(&s) & 0x807fffffu) | eg << 23;
        unsigned ev = 0;
        uint32_t rtz = gp_accum_step(GP_FP32, GP_ACC_RTZ, 0, a, NULL, gp_f32_from_bits(g), 0, NULL);
        uint32_t rne = gp_accum_step(GP_FP32, GP_ACC_RNE, 0, a, NULL, gp_f32_from_bits(g), 0, &ev);
        gp_assert_bits(rtz, hw_add(a, g, FE_TOWARDZERO), "%08x + %08x toward zero", a, g);
        gp_assert_bits(rne, hw_add(a, g, FE_TONEAREST), "%08x + %08x to nearest", a, g);
        checked += 2;
    }
    printf("# %ld fp32 additions equal the hardware's\n", checked);
}

/* The CPU backend's vectorised fp32 unscale (gp_cpu_unscale_fp32) equals gp_unscale_step
 * per element bit for bit, and sets the flag alike: random bit patterns of every class
 * (normals, subnormals, zeros; a block with an inf or a NaN), multipliers that are powers of
 * two from 2^-149 to 2^127 and random finite ones (results overflowing, subnormal, exact and
 * inexact), lengths with partial blocks. */
static void test_unscale_fp32_fast_equals_step(void **state)
{
    (void)state;
    enum { N = 1000 };
    static uint32_t a[N], want[N];
    uint64_t checked = 0;
    for (int r = 0; r < 400; r++) {
        float inv = r < 277 ? ldexpf(1.0f, r - 149) /* 2^-149 .. 2^127 */
                            : gp_f32_from_bits(gp_rand_u32(11, 1, (uint64_t)r) & 0x7f7fffffu);
        size_t n = r % 3 == 0 ? N : (size_t)(1 + gp_rand_u32(11, 2, (uint64_t)r) % N);
        for (size_t i = 0; i < n; i++) {
            uint32_t b = gp_rand_u32(11, 3 + (uint64_t)r, i);
            /* about a quarter subnormal or zero exponents, some in the non-finite class */
            if ((b & 3) == 0)
                b &= 0x807fffffu;
            else if ((b & 0xff) == 1 && r % 4 == 1)
                b |= 0x7f800000u;
            else if ((b & 0x7f800000u) == 0x7f800000u && r % 4 != 1)
                b &= 0xbfffffffu; /* finite */
            a[i] = b;
        }
        int found_want = 0, found_got = 0;
        for (size_t i = 0; i < n; i++)
            want[i] = gp_unscale_step(GP_FP32, 0, a[i], inv, &found_want, NULL);
        gp_cpu_unscale_fp32(a, n, inv, &found_got);
        for (size_t i = 0; i < n; i++, checked++)
            if (a[i] != want[i])
                fail_msg("round %d, element %zu: %08x, step %08x (inv %a)", r, i, a[i], want[i], (double)inv);
        gp_assert_bits(found_got, found_want, "found_inf");
        if (r % 4 != 1)
            gp_assert_bits(found_got, 0, "finite rounds find nothing");
    }
    assert_true(checked > 100000);
}

static void test_unscale(void **state)
{
    (void)state;
    int found = 0;
    unsigned ev = 0;
    uint32_t r = gp_unscale_step(GP_FP16, 0, 0x3c00 /* 1.0 */, 0x1p-16f, &found, &ev);
    gp_assert_bits(r, 0x0100, "1.0 * 2^-16 in fp16 = 256 * 2^-24 (subnormal, exact)");
    gp_assert_bits(found, 0, "finite");
    gp_unscale_step(GP_FP16, 0, 0x7c00 /* inf */, 0x1p-16f, &found, &ev);
    gp_assert_bits(found, 1, "inf found");
    found = 0;
    gp_unscale_step(GP_BF16, 0, 0x7fc0 /* NaN */, 1.0f, &found, NULL);
    gp_assert_bits(found, 1, "NaN found");
}

/* gp_f32_ulp (the unit of max_ulp_err, computed from the bits) equals its definition
 * ldexp(1.0, max(e - 1, -126) - 23) with frexp's e, bit for bit: every biased exponent
 * field of binary64 with both signs and several significands (zero, subnormals, the
 * smallest and largest significand, Philox bits), +-0, +-inf, NaNs. */
static double ulp32_definition(double x)
{
    int e;
    frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
    e -= 1;
    if (x == 0 || e < -126)
        e = -126;
    return ldexp(1.0, e - 23);
}

static void test_f32_ulp_equals_definition(void **state)
{
    (void)state;
    uint64_t checked = 0;
    for (uint64_t E = 0; E < 2048; E++)
        for (int k = 0; k < 8; k++) {
            uint64_t frac = k == 0 ? 0 : k == 1 ? 1 : k == 2 ? 0xfffffffffffffull
                                                 : (((uint64_t)gp_rand_u32(7, E, (uint64_t)k) << 32 | gp_rand_u32(7, E, (uint64_t)k + 8)) & 0xfffffffffffffull);
            for (uint64_t sign = 0; sign < 2; sign++) {
                double x = gp_f64_from_bits(sign << 63 | E << 52 | frac);
                double got = gp_f32_ulp(x), want = ulp32_definition(x);
                if (gp_f64_bits(got) != gp_f64_bits(want))
                    fail_msg("gp_f32_ulp(%a) = %a, definition %a", x, got, want);
                /* the reciprocal: exactly 1 / ulp, and a product by it equals the quotient by
                 * the ulp (normal, subnormal, overflowing, zero, inf and NaN dividends) */
                double r = gp_f32_ulp_recip(x);
                if (gp_f64_bits(r) != gp_f64_bits(1.0 / want))
                    fail_msg("gp_f32_ulp_recip(%a) = %a, 1/ulp %a", x, r, 1.0 / want);
                const double ys[] = {1.0 + 0x1p-52, 0x1.fffffffffffffp1023, 0x1p-1074, 3 * 0x1p-1070, 0.0, -5.5e-300,
                                     INFINITY, NAN, (double)gp_rand_u32(9, E, (uint64_t)k) * 0x1p-40};
                for (size_t q = 0; q < sizeof ys / sizeof *ys; q++) {
                    double a = ys[q] * r, b = ys[q] / want;
                    if (gp_f64_bits(a) != gp_f64_bits(b) && !(a != a && b != b))
                        fail_msg("%a * recip(%a) = %a, / ulp %a", ys[q], x, a, b);
                }
                checked++;
            }
        }
    assert_int_equal(checked, 2048 * 8 * 2);
    gp_assert_bits(gp_f64_bits(gp_f32_ulp(1.0)), gp_f64_bits(0x1p-23), "ulp of 1 (hand)");
    gp_assert_bits(gp_f64_bits(gp_f32_ulp(0.0)), gp_f64_bits(0x1p-149), "ulp of 0 (hand)");
    gp_assert_bits(gp_f64_bits(gp_f32_ulp(-0x1p-126)), gp_f64_bits(0x1p-149), "ulp of -2^-126 (hand)");
    gp_assert_bits(gp_f64_bits(gp_f32_ulp(0x1.fffffep127)), gp_f64_bits(0x1p104), "ulp of FLT_MAX (hand)");
}

/* gp_fill_outputs against the exact quotient: x = nk * (m * mul) / den in MPFR, rounded
 * once to binary64 with binary64's subnormals (mpfr_get_d), then gp_f64_nudge by the sign
 * of the exact x minus that rounding, times s: bit for bit. For den a power of two the
 * quotient is exact in MPFR (at most 31 + 24 + 3 significant bits over a power of two)
 * and every m is tried (zero, subnormal and sticky results included); for other den
 * (token counts such as 2800 = 300 + 500 + 800 + 1200, odd, prime, 2^31 - 1; nk * mul below
 * 2^29 in the vector path, at or above it in the rational one) MPFR's 256-bit quotient
 * decides the rounding and the
 * remainder's sign unless x lies within 2^-200 relative of a binary64 value or midpoint,
 * which the results of these inputs cannot (x = a/den with a of at most 58 bits and den
 * below 2^32: a non-representable x differs from any 54-bit value by at least
 * 1/(den 2^54) relative), and m keeps x normal (the remainder of a quotient that is not
 * subnormal is exact: gp_attrib.h). */
static void test_fill_outputs_equals_exact(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(29);
    enum { N = 300 };
    static float m[N];
    static double xs[N];
    const double nks[] = {1, 3, 512, 4097, 2147483647.0};
    const double dens[] = {1, 0x1p15, 0x1p40, 0x1p1000, 0x1p1022, 0x1p1023, 2800, 3, 1000003, 2147483647.0};
    enum { NDEN = sizeof dens / sizeof dens[0] };
    const double muls[] = {1, 8}, ss[] = {1, 65536, 0x1p-3};
    gp_mpfr_env env;
    gp_mpfr_env_enter(&env);
    mpfr_t x;
    mpfr_init2(x, 256);
    uint64_t compared = 0, sticky_seen = 0, subnormal_seen = 0, general = 0, rational = 0;
    for (int rep = 0; rep < 400; rep++) {
        size_t n = rep % 2 ? N : (size_t)(1 + gp_test_next(&s) % N);
        double nk = rep % 6 < 5 ? nks[rep % 5] : (double)(1 + gp_test_next(&s) % 2147483647u);
        double den = dens[rep / 6 % NDEN], mul = muls[rep / 60 % 2], sc = ss[rep / 120 % 3];
        int e, pow2 = frexp(den, &e) == 0.5;

        for (size_t i = 0; i < n; i++) {
            uint32_t b = (uint32_t)gp_test_next(&s);
            if ((b & 0x7f800000u) == 0x7f800000u) /* finite fp32 values only */
                b &= 0xbfffffffu;
            if (!pow2) /* a normal quotient: |m| in [2^-60, 2^4) over den < 2^32 */
                b = (b & 0x807fffffu) | (uint32_t)(127 - 60 + (int)(b >> 23 & 0x3f)) << 23;
            if (i % 17 == 0)
                b &= 0x80000000u; /* signed zeros */
            m[i] = gp_f32_from_bits(b);
        }
        gp_fill_outputs(xs, m, n, mul, nk, den, sc);
        for (size_t i = 0; i < n; i++) {
            double mm = (double)m[i] * mul; /* exact */
            mpfr_set_d(x, mm, MPFR_RNDN);
            mpfr_mul_d(x, x, nk, MPFR_RNDN);
            mpfr_div_d(x, x, den, MPFR_RNDN); /* exact for a power of two; else 256 bits (above) */
            double r = mpfr_get_d(x, MPFR_RNDN); /* correctly rounded, subnormals included */
            int sticky = mpfr_cmp_d(x, r);
            sticky = sticky > 0 ? 1 : sticky < 0 ? -1 : 0;
            sticky_seen += sticky != 0;
            subnormal_seen += r != 0 && fabs(r) < 0x1p-1022;
            general += !pow2;
            rational += !pow2 && nk * mul >= 0x1p29;
            gp_assert_bits(gp_f64_bits(xs[i]), gp_f64_bits(gp_f64_nudge(r, sticky) * sc),
                           "m %a nk %.0f den %a mul %g s %g", (double)m[i], nk, den, mul, sc);
            compared++;
        }
    }
    /* A block whose only inexact quotient underflows to zero (no subnormal one beside it):
     * the nudge still applies, x = the least subnormal with the sign of m. */
    {
        const float mz[3] = {1.0f, 0x1p-100f, -0x1.8p-110f};
        gp_fill_outputs(xs, mz, 3, 1.0, 1.0, 0x1p1022, 1.0);
        gp_assert_bits(gp_f64_bits(xs[0]), gp_f64_bits(0x1p-1022), "normal quotient");
        gp_assert_bits(gp_f64_bits(xs[1]), gp_f64_bits(0x1p-1074), "underflow to zero, nudged up");
        gp_assert_bits(gp_f64_bits(xs[2]), gp_f64_bits(-0x1p-1074), "underflow to zero, nudged down");
    }
    mpfr_clear(x);
    gp_mpfr_env_leave(&env);
    assert_true(sticky_seen > 1000 && subnormal_seen > 100 && general > 10000 && rational > 1000); /* every path */
    print_message("gp_fill_outputs: %llu outputs compared with MPFR (%llu sticky, %llu subnormal, %llu of a general den)\n",
                  (unsigned long long)compared, (unsigned long long)sticky_seen, (unsigned long long)subnormal_seen,
                  (unsigned long long)general);
}

/* gp_output_terms against its definition per element: x = xs / s (gp_attrib_unscaled), the
 * square of x * errw when finite, else +0; the bin from frexp's exponent e (|x| in
 * [2^(e-1), 2^e)), e - 1 - min_exp clamped, -1 for zeros and non-finite x; normal x only
 * (the return value says when a subnormal x is present, which the caller bins). */
static void test_output_terms_equal_definition(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(30);
    enum { N = GP_ATTRIB_BLOCK, MIN_EXP = -160, BINS = 300 };
    static double xs[N], sq[N];
    static int32_t bin[N];
    const double scales[][2] = {{1.0, 1.0}, {65536.0, 1.0 / 65536}, {3.0, 0.0}};
    uint64_t compared = 0;
    for (int rep = 0; rep < 60; rep++) {
        size_t n = rep % 2 ? N : (size_t)(1 + gp_test_next(&s) % N);
        int with_sub = rep % 5 == 4;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = gp_test_next(&s);
            int e = (int)(r % 400) - 250; /* past both ends of the bins */
            xs[i] = ldexp(1.0 + (double)(r >> 12) * 0x1p-52, e) * (r & 1 ? -1 : 1);
            if (i % 13 == 0)
                xs[i] = i % 26 ? 0.0 : -0.0;
            if (i % 29 == 0)
                xs[i] = i % 58 ? INFINITY : NAN;
        }
        if (with_sub)
            xs[n / 2] = 0x1p-1060;
        const double *sc = scales[rep % 3];
        double errw = rep % 2 ? 1.0 : 1.0 / 3;
        int sub = gp_output_terms(xs, n, sc[0], sc[1], errw, MIN_EXP, BINS, sq, bin);
        int want_sub = 0;
        for (size_t i = 0; i < n; i++) {
            double x = gp_attrib_unscaled(xs[i], sc[0], sc[1]), xw = x * errw;
            gp_assert_bits(gp_f64_bits(sq[i]), gp_f64_bits(isfinite(x) ? xw * xw : 0.0), "square of %a", xs[i]);
            if (x != 0 && fabs(x) < 0x1p-1022) {
                want_sub = 1;
                continue;
            }
            int32_t want = -1;
            if (isfinite(x) && x != 0) {
                int e;
                frexp(x, &e);
                int b = e - 1 - MIN_EXP;
                want = b < 0 ? 0 : b >= BINS ? BINS - 1 : b;
            }
            assert_int_equal(bin[i], want);
            compared++;
        }
        assert_int_equal(sub, want_sub);
    }
    print_message("gp_output_terms: %llu elements compared\n", (unsigned long long)compared);
}

/* gp_final_terms against its definition per element: the squares and squared differences
 * as written, |a - s| / gp_f32_ulp(s) by the division (the kernel multiplies by the exact
 * reciprocal), the count of non-finite a by isfinite; values over binary64's whole range
 * (fp32's subnormal ulp floor, overflowing squares, subnormal ones), zeros of both signs,
 * infinities and NaNs in every operand, odd lengths. */
static void test_final_terms_equal_definition(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(33);
    enum { N = GP_ATTRIB_BLOCK };
    static double in[6][N], t[GP_FT_N][N];
    uint64_t compared = 0;
    for (int rep = 0; rep < 60; rep++) {
        size_t n = rep % 2 ? N : (size_t)(1 + gp_test_next(&s) % N);
        uint64_t want_nonfinite = 0;
        for (int k = 0; k < 6; k++)
            for (size_t i = 0; i < n; i++) {
                uint64_t r = gp_test_next(&s);
                int e = (int)(r % 2200) - 1100; /* past both ends of binary64 */
                double v = ldexp(1.0 + (double)(r >> 12) * 0x1p-52, e) * (r & 1 ? -1 : 1);
                if (k < 3 && r % 7 == 0) /* a, s, f close together: the differences small */
                    v = in[0][i] * (1.0 + (double)(r % 5) * 0x1p-20);
                in[k][i] = r % 31 == 0 ? (r & 2 ? -0.0 : 0.0) : r % 37 == 0 ? (r & 2 ? INFINITY : NAN) : v;
            }
        for (size_t i = 0; i < n; i++)
            want_nonfinite += !isfinite(in[0][i]);
        uint64_t got = gp_final_terms(in[0], in[1], in[2], in[3], in[4], in[5], n, t);
        assert_int_equal(got, want_nonfinite);
        for (size_t i = 0; i < n; i++) {
            double a = in[0][i], sm = in[1][i], f = in[2][i];
            double want[GP_FT_N] = {f * f, sm * sm, a * a, (a - f) * (a - f), (a - sm) * (a - sm), (sm - f) * (sm - f),
                                    fabs(a - sm) / gp_f32_ulp(sm), in[3][i] * in[3][i], in[4][i] * in[4][i],
                                    in[5][i] * in[5][i]};
            for (int k = 0; k < GP_FT_N; k++) {
                if (isnan(want[k]))
                    assert_true(isnan(t[k][i]));
                else
                    gp_assert_bits(gp_f64_bits(t[k][i]), gp_f64_bits(want[k]), "rep %d element %zu term %d", rep, i, k);
                compared++;
            }
        }
    }
    print_message("gp_final_terms: %llu terms compared\n", (unsigned long long)compared);
}

/* gp_unscale_block against the runner's per-element unscale attribution: exact =
 * widen(old) * inv, gp_classify_v(af, exact, stored, v, no events), the error (v - exact)
 * * errw added to that mechanism's sum, the non-zero and underflow counts; random blocks
 * of the three formats with stored values the RNE product, arbitrary, or equal to old,
 * subnormals among them (underflow); a non-finite value or another format declined. */
static void test_unscale_block_equals_definition(void **state)
{
    (void)state;
    uint64_t s = gp_test_seed(31);
    enum { N = 700 };
    static uint32_t old[N], acc[N];
    static double e0[GP_MECH_NONFINITE + 1][N], e1[GP_MECH_NONFINITE + 1][N];
    const gp_format fmts[] = {GP_BF16, GP_FP16, GP_FP32};
    const double invs[] = {1.0, 1.0 / 65536, 0x1p-24, 4.0};
    uint64_t compared = 0, underflows = 0;
    for (int f = 0; f < 3; f++) {
        gp_format af = fmts[f];
        for (int rep = 0; rep < 40; rep++) {
            size_t n = rep % 2 ? N : (size_t)(1 + gp_test_next(&s) % N);
            double inv = invs[rep % 4], errw = rep / 4 % 2 ? 1.0 / 3 : 1.0;
            for (size_t i = 0; i < n; i++) {
                uint32_t ob = attrib_value(af, &s), nb;
                unsigned how = (unsigned)(gp_test_next(&s) % 3);
                if (how == 0)
                    nb = gp_fmt_from_f64(af, gp_fmt_to_f64(af, ob) * inv, GP_RNE, 0, 0, NULL);
                else
                    nb = how == 1 ? attrib_value(af, &s) : ob;
                if (!isfinite(gp_fmt_to_f64(af, nb)))
                    nb = ob;
                if ((nb & ((1u << (gp_fmt_get(af).width - 1)) - 1u)) == gp_fmt_get(af).maxfin)
                    nb = 0; /* a stored +-max finite (saturation) is declined by contract */
                gp_pack_set(af, old, i, ob);
                gp_pack_set(af, acc, i, nb);
                for (int m = 0; m < GP_MECH_NONFINITE + 1; m++) {
                    uint64_t r = gp_test_next(&s);
                    e0[m][i] = e1[m][i] = r % 4 == 0 ? 0.0 : ldexp((double)(int64_t)(r >> 8), -80);
                }
            }
            double *err[GP_MECH_NONFINITE + 1];
            for (int m = 0; m < GP_MECH_NONFINITE + 1; m++)
                err[m] = e1[m];
            uint64_t rnz = 0, und = 0, wrnz = 0, wund = 0;
            assert_int_equal(gp_unscale_block(af, old, acc, n, inv, errw, err, &rnz, &und), 1);
            for (size_t i = 0; i < n; i++) {
                uint32_t nb = gp_pack_get(af, acc, i);
                double exact = gp_fmt_to_f64(af, gp_pack_get(af, old, i)) * inv, v = gp_fmt_to_f64(af, nb);
                wrnz += exact != 0;
                gp_mechanism m = gp_classify_v(af, exact, nb, v, 0);
                wund += m == GP_MECH_UNDERFLOW;
                e0[m][i] += (v - exact) * errw;
                for (int k = 0; k < GP_MECH_NONFINITE + 1; k++)
                    gp_assert_bits(gp_f64_bits(e1[k][i]), gp_f64_bits(e0[k][i]), "fmt %d element %zu mechanism %d", af,
                                   i, k);
                compared++;
            }
            assert_int_equal(rnz, wrnz);
            assert_int_equal(und, wund);
            underflows += wund;
        }
        uint32_t bad = gp_fmt_get(af).inf; /* +inf: declined, nothing written */
        gp_pack_set(af, acc, 3, bad);
        uint64_t rnz = 0, und = 0;
        double *err[GP_MECH_NONFINITE + 1];
        for (int m = 0; m < GP_MECH_NONFINITE + 1; m++)
            err[m] = e1[m];
        double keep = e1[GP_MECH_ROUNDING][0];
        assert_int_equal(gp_unscale_block(af, old, acc, 10, 1.0, 1.0, err, &rnz, &und), 0);
        assert_true(rnz == 0 && und == 0 && gp_f64_bits(e1[GP_MECH_ROUNDING][0]) == gp_f64_bits(keep));
    }
    uint64_t rnz = 0, und = 0;
    double *err[GP_MECH_NONFINITE + 1] = {0};
    assert_int_equal(gp_unscale_block(GP_FP8_E4M3, old, acc, 4, 1.0, 1.0, err, &rnz, &und), 0);
    assert_true(underflows > 0);
    print_message("gp_unscale_block: %llu elements compared (%llu underflows)\n", (unsigned long long)compared,
                  (unsigned long long)underflows);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_fast_conversion),
        cmocka_unit_test(test_from_f64_rne_fast),
        cmocka_unit_test(test_to_f64_fast),
        cmocka_unit_test(test_widen_block),
        cmocka_unit_test(test_backend_equals_definition),
        cmocka_unit_test(test_backend_sr_equals_definition),
        cmocka_unit_test(test_backend_f16_equals_definition),
        cmocka_unit_test(test_backend_sumsq_equals_definition),
        cmocka_unit_test(test_attrib_block_equals_definition),
        cmocka_unit_test(test_sr_draw_block_equals_definition),
        cmocka_unit_test(test_store_block_equals_definition),
        cmocka_unit_test(test_fill_outputs_equals_exact),
        cmocka_unit_test(test_output_terms_equal_definition),
        cmocka_unit_test(test_final_terms_equal_definition),
        cmocka_unit_test(test_unscale_block_equals_definition),
        cmocka_unit_test(test_absorption_and_kahan),
        cmocka_unit_test(test_fp32_directed_equals_ieee),
        cmocka_unit_test(test_unscale),
        cmocka_unit_test(test_unscale_fp32_fast_equals_step),
        cmocka_unit_test(test_f32_ulp_equals_definition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
