/* test_accum.c — kernels/arith/gp_accum.h and the CPU backend's fast paths: every fast
 * path equals the generic per-element definition bit for bit (NaN results: NaN-ness,
 * see gp_fmt_agree); events and Kahan
 * compensation on hand-computed cases; unscale's non-finite check. */
#include <fenv.h>
#include <math.h>
#include <string.h>

#include "gp_test.h"

#include "kernels/arith/gp_accum.h"
#include "kernels/arith/gp_philox.h"
#include "kernels/cpu/gp_cpu_backend.h"

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
    const gp_plugin *cpu = gp_cpu_backend();
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
                    gp_plugin_accumulate_args a;
                    memset(&a, 0, sizeof a);
                    a.struct_size = sizeof a;
                    a.grad_format = gf;
                    a.acc_format = af;
                    a.rounding = r;
                    a.ftz = ftz;
                    a.seed = 5;
                    a.stream = 6;
                    a.first_index = 100;
                    a.n = N;
                    a.grad = grad;
                    a.acc = acc;
                    a.comp = comp;
                    assert_int_equal(cpu->accumulate(&a), 0);
                    for (int i = 0; i < N; i++) {
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_fast_conversion),
        cmocka_unit_test(test_from_f64_rne_fast),
        cmocka_unit_test(test_to_f64_fast),
        cmocka_unit_test(test_backend_equals_definition),
        cmocka_unit_test(test_absorption_and_kahan),
        cmocka_unit_test(test_fp32_directed_equals_ieee),
        cmocka_unit_test(test_unscale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
