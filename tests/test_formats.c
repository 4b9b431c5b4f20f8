/* test_formats.c — kernels/arith/gp_format.h on values whose results are worked out
 * by hand from the format definitions (IEEE 754, OCP OFP8), and every 8- and 16-bit
 * pattern round-tripping through binary32 and binary64. */
#include <math.h>
#include <string.h>

#include "gp_test.h"

#include "kernels/arith/gp_format.h"

#define EV_IX GP_EV_INEXACT
#define EV_UF (GP_EV_UNDERFLOW | GP_EV_INEXACT)
#define EV_OF (GP_EV_OVERFLOW | GP_EV_INEXACT)

typedef struct {
    gp_format f;
    double x;
    gp_rmode mode;
    int ftz;
    uint32_t bits;
    unsigned ev;
} hand_case;

/* Each row: the exact input, the result worked out by hand, and why. */
static const hand_case hand[] = {
    {GP_BF16, 1.0, GP_RNE, 0, 0x3f80, 0},
    {GP_BF16, 1.00390625, GP_RNE, 0, 0x3f80, EV_IX},   /* 1+2^-8: tie, even is 1.0 */
    {GP_BF16, 1.01171875, GP_RNE, 0, 0x3f82, EV_IX},   /* 1+3*2^-8: tie between 0x3f81/0x3f82 */
    {GP_BF16, 1.0078125, GP_RTZ, 0, 0x3f81, 0},        /* 1+2^-7: exact */
    {GP_BF16, 1.0156249, GP_RTZ, 0, 0x3f81, EV_IX},    /* truncation */
    {GP_BF16, 0x1p-126, GP_RNE, 0, 0x0080, 0},         /* min normal */
    {GP_BF16, 0x1p-133, GP_RNE, 0, 0x0001, 0},         /* min subnormal, exact: no event */
    {GP_BF16, 0x1p-134, GP_RNE, 0, 0x0000, EV_UF},     /* half min subnormal: tie to even 0 */
    {GP_BF16, 0x1.8p-134, GP_RNE, 0, 0x0001, EV_UF},   /* above the tie */
    {GP_BF16, 0x1p-127, GP_RNE, 1, 0x0000, EV_UF},     /* FTZ: subnormal flushed */
    {GP_BF16, -0x1p-127, GP_RNE, 1, 0x8000, EV_UF},    /* ... keeping the sign */
    {GP_BF16, 0x1.fep127, GP_RNE, 0, 0x7f7f, 0},       /* max finite 3.39e38 */
    {GP_BF16, 0x1.ffp127, GP_RNE, 0, 0x7f80, EV_OF},   /* max + half ulp: tie -> even = inf */
    {GP_BF16, 0x1.ffp127, GP_RTZ, 0, 0x7f7f, EV_IX},   /* truncates to max finite: no overflow (IEEE) */
    {GP_BF16, 0x1p128, GP_RTZ, 0, 0x7f7f, EV_OF},      /* beyond the range: saturates, overflow */
    {GP_BF16, 3e-6, GP_RNE, 0, 0x3649, EV_IX},         /* LoRA-sized gradient: a normal bf16 */
    {GP_FP16, 1.0, GP_RNE, 0, 0x3c00, 0},
    {GP_FP16, 65504.0, GP_RNE, 0, 0x7bff, 0},          /* max finite */
    {GP_FP16, 65519.0, GP_RNE, 0, 0x7bff, EV_IX},      /* below max + half ulp (65520) */
    {GP_FP16, 65520.0, GP_RNE, 0, 0x7c00, EV_OF},      /* tie: even is inf */
    {GP_FP16, 1e6, GP_RTZ, 0, 0x7bff, EV_OF},
    {GP_FP16, 0x1p-24, GP_RNE, 0, 0x0001, 0},          /* min subnormal, exact: no event */
    {GP_FP16, 0x1p-25, GP_RNE, 0, 0x0000, EV_UF},      /* tie -> even zero */
    {GP_FP16, 0x1.000002p-25, GP_RNE, 0, 0x0001, EV_UF},
    {GP_FP16, 0x1p-26, GP_RNE, 0, 0x0000, EV_UF},      /* below half: gone */
    {GP_FP16, 3e-6, GP_RNE, 0, 0x0032, EV_UF},         /* 3e-6/2^-24 = 50.33 -> subnormal 50 */
    {GP_FP16, 0x1p-14, GP_RNE, 0, 0x0400, 0},          /* min normal */
    {GP_FP16, 0x1.ffcp-15, GP_RNE, 0, 0x0400, EV_UF},  /* 1023.5 quanta: tie up to min normal; tiny before rounding */
    {GP_FP16, 0x1.ff8p-15, GP_RNE, 0, 0x03ff, 0},      /* exactly subnormal 1023 */
    {GP_FP16, 0x1p-15, GP_RNE, 1, 0x0000, EV_UF},
    {GP_FP8_E4M3, 448.0, GP_RNE, 0, 0x7e, 0},          /* max finite S.1111.110 */
    {GP_FP8_E4M3, 464.0, GP_RNE, 0, 0x7e, EV_IX},      /* tie 448/480: even mantissa 110 */
    {GP_FP8_E4M3, 465.0, GP_RNE, 0, 0x7f, EV_OF},      /* would be 480 = the NaN pattern */
    {GP_FP8_E4M3, 500.0, GP_RTZ, 0, 0x7e, EV_OF},      /* toward zero saturates */
    {GP_FP8_E4M3, -1e9, GP_RNE, 0, 0xff, EV_OF},
    {GP_FP8_E4M3, INFINITY, GP_RNE, 0, 0x7f, GP_EV_INVALID}, /* no inf in e4m3 */
    {GP_FP8_E4M3, 0x1p-9, GP_RNE, 0, 0x01, 0},         /* min subnormal */
    {GP_FP8_E4M3, 0x1p-6, GP_RNE, 0, 0x08, 0},         /* min normal */
    {GP_FP8_E4M3, 0.3, GP_RNE, 0, 0x2a, EV_IX},        /* 0.3 = 1.2*2^-2: 1.010 (0.3125) vs 1.001 */
    {GP_FP8_E5M2, 57344.0, GP_RNE, 0, 0x7b, 0},        /* max finite */
    {GP_FP8_E5M2, 61440.0, GP_RNE, 0, 0x7c, EV_OF},    /* tie 57344/65536: even is inf */
    {GP_FP8_E5M2, 0x1p-16, GP_RNE, 0, 0x01, 0},        /* min subnormal */
    {GP_FP8_E5M2, INFINITY, GP_RNE, 0, 0x7c, 0},
    {GP_FP32, 0x1.000001p0, GP_RNE, 0, 0x3f800000, EV_IX}, /* 1+2^-24: tie to even */
    {GP_FP32, 0x1.000003p0, GP_RNE, 0, 0x3f800002, EV_IX}, /* 1+3*2^-24: tie to even (up) */
    {GP_FP32, 0x1p-149, GP_RNE, 0, 0x00000001, 0},
    {GP_FP32, 0x1p-150, GP_RNE, 0, 0x00000000, EV_UF},
    {GP_FP32, 1e300, GP_RNE, 0, 0x7f800000, EV_OF},
    {GP_FP32, -1e300, GP_RTZ, 0, 0xff7fffff, EV_OF},
    {GP_FP32, -0.0, GP_RNE, 0, 0x80000000, 0},
    {GP_FP16, -0.0, GP_RTZ, 0, 0x8000, 0},
    {GP_FP16, -0x1p-30, GP_RNE, 0, 0x8000, EV_UF},     /* tiny negative -> -0 */
};

static void test_hand_cases(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof hand / sizeof hand[0]; k++) {
        const hand_case *h = &hand[k];
        unsigned ev = 0;
        uint32_t b = gp_fmt_from_f64(h->f, h->x, h->mode, 0, h->ftz, &ev);
        gp_assert_bits(b, h->bits, "row %zu: %a", k, h->x);
        gp_assert_bits(ev, h->ev, "events of row %zu: %a", k, h->x);
    }
}

/* NaN handling: sign and top payload bits kept, quiet bit set; sNaN reports INVALID. */
static void test_nan_payloads(void **state)
{
    (void)state;
    unsigned ev = 0;
    gp_assert_bits(gp_fmt_from_f32_bits(GP_BF16, 0x7fc12345u, GP_RNE, 0, 0, &ev), 0x7fc1, "qNaN");
    gp_assert_bits(ev, 0, "qNaN events");
    ev = 0;
    gp_assert_bits(gp_fmt_from_f32_bits(GP_BF16, 0xff812345u, GP_RNE, 0, 0, &ev), 0xffc1, "sNaN");
    gp_assert_bits(ev, GP_EV_INVALID, "sNaN events");
    ev = 0;
    gp_assert_bits(gp_fmt_from_f32_bits(GP_FP8_E4M3, 0x7fc00000u, GP_RNE, 0, 0, &ev), 0x7f, "e4m3 NaN");
    gp_assert_bits(gp_fmt_from_f32_bits(GP_FP16, 0x7fc00000u, GP_RTZ, 0, 0, &ev), 0x7e00, "fp16 NaN");
    gp_assert_bits(gp_fmt_isnan(GP_FP8_E4M3, 0x7f), 1, "e4m3 0x7f is NaN");
    gp_assert_bits(gp_fmt_isnan(GP_FP8_E4M3, 0x7e), 0, "e4m3 0x7e is 448");
    gp_assert_bits(gp_fmt_isinf(GP_FP8_E5M2, 0xfc), 1, "e5m2 -inf");
}

/* gp_fmt_agree's contract (gp_format.h): equal bits, or both NaN. The bit patterns by hand
 * from the format definitions (IEEE 754 binary32/binary16, bf16 = binary32's top half, OCP
 * OFP8: e4m3's only NaN is S.1111.111, e5m2's NaNs are S.11111.{01,10,11}). In each format: two
 * different NaNs agree (either sign); a NaN and a number do not, in either order (a NaN
 * against 1.0, against the largest finite value, against an infinity); +0 and -0 do not
 * (different bits); a value agrees with itself. 5 formats, 11 pairs each. */
static void test_agree(void **state)
{
    (void)state;
    static const struct {
        gp_format f;
        uint32_t nan1, nan2, one, maxfin, inf, negzero; /* inf 0: none (e4m3) */
    } c[] = {
        {GP_FP32, 0x7fc00000u, 0xff800001u, 0x3f800000u, 0x7f7fffffu, 0x7f800000u, 0x80000000u},
        {GP_BF16, 0x7fc0u, 0xff81u, 0x3f80u, 0x7f7fu, 0x7f80u, 0x8000u},
        {GP_FP16, 0x7e00u, 0xfc01u, 0x3c00u, 0x7bffu, 0x7c00u, 0x8000u},
        {GP_FP8_E4M3, 0x7fu, 0xffu, 0x38u, 0x7eu, 0, 0x80u},
        {GP_FP8_E5M2, 0x7eu, 0xfdu, 0x3cu, 0x7bu, 0x7cu, 0x80u},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        gp_format f = c[k].f;
        assert_true(gp_fmt_agree(f, c[k].nan1, c[k].nan2));
        assert_true(gp_fmt_agree(f, c[k].nan2, c[k].nan1));
        assert_false(gp_fmt_agree(f, c[k].nan1, c[k].one));
        assert_false(gp_fmt_agree(f, c[k].one, c[k].nan1));
        assert_false(gp_fmt_agree(f, c[k].maxfin, c[k].nan2));
        assert_false(gp_fmt_agree(f, c[k].nan2, c[k].maxfin));
        assert_false(gp_fmt_agree(f, 0, c[k].negzero));
        assert_true(gp_fmt_agree(f, c[k].one, c[k].one));
        assert_true(gp_fmt_agree(f, c[k].negzero, c[k].negzero));
        if (c[k].inf) {
            assert_false(gp_fmt_agree(f, c[k].inf, c[k].nan1));
            assert_false(gp_fmt_agree(f, c[k].nan1, c[k].inf));
        } else { /* e4m3 has no infinity: the max against the other-signed NaN instead */
            assert_false(gp_fmt_agree(f, c[k].maxfin, c[k].nan1));
            assert_false(gp_fmt_agree(f, c[k].nan1, c[k].maxfin));
        }
    }
}

/* Typed values: conversions keep the type; widening is exact. */
static void test_typed(void **state)
{
    (void)state;
    gp_bf16 b = gp_bf16_from_f32(3.0f, GP_RNE, 0, 0, NULL);
    gp_assert_bits(b.bits, 0x4040, "bf16(3)");
    assert_true(gp_bf16_to_f32(b) == 3.0f);
    gp_fp16 h = gp_fp16_from_f64(0x1p-24, GP_RNE, 0, 0, NULL);
    assert_true(gp_fp16_to_f64(h) == 0x1p-24);
    gp_e4m3 e = gp_e4m3_from_f32(-448.0f, GP_RNE, 0, 0, NULL);
    gp_assert_bits(e.bits, 0xfe, "e4m3(-448)");
    assert_true(gp_e4m3_to_f32(e) == -448.0f);
}

/* Every pattern of an 8/16-bit format widens exactly to fp32 and fp64 and comes back
 * unchanged under every mode, with no event; a signalling NaN comes back quieted with
 * INVALID. */
static void roundtrip_all(gp_format f)
{
    gp_fmt_info fi = gp_fmt_get(f);
    uint32_t n = 1u << fi.width;
    uint32_t qbit = 1u << (fi.p - 2);
    for (uint32_t b = 0; b < n; b++) {
        int nan = gp_fmt_isnan(f, b);
        int snan = nan && fi.inf && !(b & qbit);
        uint32_t want = snan ? (b | qbit) : b;
        unsigned want_ev = snan ? GP_EV_INVALID : 0;
        for (int mode = GP_RNE; mode <= GP_STOCHASTIC; mode++) {
            unsigned ev = 0;
            uint32_t r64 = gp_fmt_from_f64_bits(f, gp_fmt_to_f64_bits(f, b), (gp_rmode)mode,
                                                0xffffffffu, 0, &ev);
            gp_assert_bits(r64, want, "%s via fp64, pattern 0x%x mode %d", "format", b, mode);
            gp_assert_bits(ev, want_ev, "events via fp64, pattern 0x%x", b);
            ev = 0;
            uint32_t r32 = gp_fmt_from_f32_bits(f, gp_fmt_to_f32_bits(f, b), (gp_rmode)mode, 0, 0, &ev);
            gp_assert_bits(r32, want, "via fp32, pattern 0x%x mode %d", b, mode);
            gp_assert_bits(ev, want_ev, "events via fp32, pattern 0x%x", b);
        }
        if (!nan) { /* the widened value is the decoded value (independent decode) */
            uint32_t sbit = 1u << (fi.width - 1), mag = b & (sbit - 1);
            uint32_t be = mag >> (fi.p - 1), mant = mag & (qbit * 2 - 1);
            double v = (fi.inf && mag == fi.inf) ? INFINITY
                       : be ? ldexp(1.0 + ldexp(mant, 1 - fi.p), (int)be - 1 + fi.emin)
                            : ldexp(mant, fi.emin - fi.p + 1);
            if (b & sbit)
                v = -v;
            gp_assert_bits(gp_fmt_to_f64_bits(f, b), gp_f64_bits(v), "decode of 0x%x", b);
        }
    }
}

static void test_roundtrip_bf16(void **s) { (void)s; roundtrip_all(GP_BF16); }
static void test_roundtrip_fp16(void **s) { (void)s; roundtrip_all(GP_FP16); }
static void test_roundtrip_e4m3(void **s) { (void)s; roundtrip_all(GP_FP8_E4M3); }
static void test_roundtrip_e5m2(void **s) { (void)s; roundtrip_all(GP_FP8_E5M2); }

/* fp32 patterns (every 257th, all exponents and signs): fp32 -> fp64 -> fp32 is the
 * identity for numbers and quiet NaNs; and the generic fp32 rounding of a binary64
 * agrees with the C cast (RNE, IEEE) on numbers. */
static void test_roundtrip_fp32(void **state)
{
    (void)state;
    for (uint64_t b = 0; b <= 0xffffffffull; b += 257) {
        uint32_t x = (uint32_t)b;
        int snan = (x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu) && !(x & 0x400000u);
        unsigned ev = 0;
        uint32_t r = gp_fmt_from_f64_bits(GP_FP32, gp_fmt_to_f64_bits(GP_FP32, x), GP_RNE, 0, 0, &ev);
        gp_assert_bits(r, snan ? (x | 0x400000u) : x, "fp32 pattern 0x%08x", x);
        gp_assert_bits(ev, snan ? GP_EV_INVALID : 0, "events of 0x%08x", x);
    }
    uint64_t s = 12345;
    for (int k = 0; k < 200000; k++) {
        double d = gp_f64_from_bits(gp_test_next(&s));
        if (d != d)
            continue;
        float c = (float)d;
        gp_assert_bits(gp_fmt_from_f64(GP_FP32, d, GP_RNE, 0, 0, NULL), gp_f32_bits(c), "%a", d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_cases),
        cmocka_unit_test(test_nan_payloads),
        cmocka_unit_test(test_agree),
        cmocka_unit_test(test_typed),
        cmocka_unit_test(test_roundtrip_bf16),
        cmocka_unit_test(test_roundtrip_fp16),
        cmocka_unit_test(test_roundtrip_e4m3),
        cmocka_unit_test(test_roundtrip_e5m2),
        cmocka_unit_test(test_roundtrip_fp32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
