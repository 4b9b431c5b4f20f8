/* fuzz_scaled.c — libFuzzer target: one block of a scaled or block format
 * (kernels/arith/gp_scaled.h through gp_scaled_quantize), two checks:
 *  - differential: every element's dequantized value against a brute-force reference
 *    written here from the definitions (docs/formats.md): the scale from frexp, not from
 *    bits; the element as the nearest of all codes of its format (ties to the even code),
 *    clamped to the largest; for MX (the spec's scale, no ":torchao") and fp8
 *    blockwise_1x128 (s = fp32(max / amax), codes of fp32(x * s));
 *  - metamorphic: the block times 2^k (|k| <= 8), where every value and scale stays
 *    inside its range, has the same codes and its scale times 2^k.
 * Input: byte 0 kind (MX / nvfp4:single / fp8 blockwise_1x128), element format and rule;
 * byte 0 >= 240: the kinds whose scale spans a tensor (the runner's amax pass): fp8
 * per-tensor :current over 128 values, blockwise_128x128 as one 4 x 32 tile, two-level
 * nvfp4 over two blocks of 16 (the tensor scale from both), each against a brute-force
 * reference too, and 2^k changing only the scales (the committed corpus has byte 0 < 60:
 * it keeps its meaning);
 * byte 1 options (torchao, pow2, sr) and k; then the block's fp32 values, 4 bytes each,
 * little-endian (missing bytes are 0). The bitwise check against torchao and ml_dtypes
 * is tests/python/test_scaled_formats.py.
 * Build with clang: make fuzz; run: build-fuzz/fuzz/fuzz_scaled fuzz/corpus/scaled */
#include <math.h>
#include <string.h>

#include "gp_fuzz_check.h"
#include "kernels/gp_scaled_tensor.h"

GP_FUZZ_COUNTERS counters[GP_FUZZ_NMECH * GP_FUZZ_BUCKETS];

/* The nearest value of element format e to v (ties: the even code), clamped: by search. */
static double nearest_code_value(gp_elem e, double v)
{
    gp_fmt_info i = gp_elem_info(e);
    double best = 0, bd = INFINITY;
    uint32_t bc = 0;
    double a = fabs(v), mx = gp_elem_max(e);
    if (a > mx)
        a = mx;
    for (uint32_t c = 0; c <= i.maxfin; c++) {
        double w = gp_elem_to_f64(e, c), d = fabs(w - a);
        if (d < bd || (d == bd && (c & 1u) == 0 && (bc & 1u))) {
            bd = d;
            best = w;
            bc = c;
        }
    }
    return v < 0 ? -best : best;
}

static float f32_le(const uint8_t *d, size_t size, size_t at)
{
    uint32_t u = 0;
    for (int i = 0; i < 4; i++)
        if (at + (size_t)i < size)
            u |= (uint32_t)d[at + (size_t)i] << (8 * i);
    return gp_f32_from_bits(u);
}

static int same(float a, float b)
{
    return gp_f32_bits(a) == gp_f32_bits(b) || (a != a && b != b);
}

/* byte 0 >= 240: per-tensor current scaling, a 128x128 tile (4 x 32 here), two-level
 * NVFP4 (two blocks of 16), differential and metamorphic. */
static int spanning_kinds(const uint8_t *data, size_t size)
{
    unsigned v = data[0] - 240u, kind = v % 3;
    gp_scaled_cfg c;
    memset(&c, 0, sizeof c);
    c.sat = c.two_level = 1;
    c.mode = (data[1] >> 2) & 1 ? GP_STOCHASTIC : GP_RNE;
    c.kind = kind == 0 ? GP_SC_CURRENT : kind == 1 ? GP_SC_BLOCK_128X128 : GP_SC_NVFP4;
    c.elem = kind == 2 ? GP_EL_E2M1 : (v / 3) & 1 ? GP_EL_E5M2 : GP_EL_E4M3;
    c.pow2 = kind != 2 && ((data[1] >> 1) & 1);
    int n = kind == 2 ? 32 : 128, k = (int)((data[1] >> 3) % 17) - 8, finite = 1;
    uint64_t rows = kind == 1 ? 4 : 1, cols = (uint64_t)n / rows;
    float x[128], y[128], sc[2], ts = 0, x2[128], y2[128], sc2[2], ts2 = 0, amax = 0;
    uint8_t q[128], q2[128];
    for (int i = 0; i < n; i++) {
        x[i] = f32_le(data, size, 2 + 4 * (size_t)i);
        finite &= isfinite(x[i]) != 0;
        if (fabsf(x[i]) > amax)
            amax = fabsf(x[i]);
    }
    gp_scaled_quantize(&c, rows, cols, x, y, q, sc, &ts, 1.0f, 7, 1, 0, NULL);
    if (finite && c.mode == GP_RNE && kind < 2 && !c.pow2 && amax > 1e-12f) { /* one scale over all */
        float s = (float)(gp_elem_max(c.elem) / (double)amax);
        GP_FUZZ_CHECK(same(sc[0], s), "kind %u elem %d: scale %a, want %a", kind, c.elem, sc[0], s);
        for (int i = 0; i < n; i++) {
            double want = nearest_code_value(c.elem, (double)(x[i] * s));
            GP_FUZZ_CHECK(gp_elem_to_f64(c.elem, q[i]) == want || (want == 0 && q[i] % 128 == 0),
                          "kind %u elem %d x=%a: code %u, nearest %a", kind, c.elem, x[i], q[i], want);
            float deq = kind == 0 ? (float)(want / (double)s) : (float)(want * (double)(1.0f / s));
            GP_FUZZ_CHECK(same(y[i], deq) || (want == 0 && y[i] == 0), "kind %u x=%a: %a, want %a", kind, x[i], y[i],
                          deq);
        }
    }
    if (finite && c.mode == GP_RNE && kind == 2 && amax > 0x1p-100f) { /* two-level NVFP4 by its definition */
        float t = (float)((double)amax / 2688.0);
        GP_FUZZ_CHECK(same(ts, t), "nvfp4 tensor scale %a, want %a", ts, t);
        for (int b = 0; b < 2; b++) {
            float ab = 0;
            for (int i = 16 * b; i < 16 * b + 16; i++)
                ab = fabsf(x[i]) > ab ? fabsf(x[i]) : ab;
            float bs = (float)((double)(float)((double)ab / 6.0) / (double)t);
            bs = bs < 0x1p-6f ? 0x1p-6f : bs > 448.0f ? 448.0f : bs;
            double s = nearest_code_value(GP_EL_E4M3, (double)bs);
            GP_FUZZ_CHECK((double)sc[b] == s, "nvfp4 block %d scale %a, want %a", b, sc[b], s);
            float r = (float)((double)(float)(1.0 / (double)t) / s), st = (float)((double)t * s);
            for (int i = 16 * b; i < 16 * b + 16; i++) {
                double want = (float)(nearest_code_value(GP_EL_E2M1, (double)(x[i] * r)) * (double)st);
                GP_FUZZ_CHECK(y[i] == want, "nvfp4 x=%a: %a, want %a", x[i], y[i], want);
            }
        }
    }
    /* metamorphic: times 2^k inside the ranges: the same codes; fp8 scales / 2^k, NVFP4's
     * block scales unchanged and its tensor scale * 2^k */
    int ok = finite && amax >= 0x1p-30f && amax <= 0x1p60f && k != 0 && !c.pow2; /* 2^-38 > 1e-12 */
    for (int i = 0; ok && i < n; i++) {
        x2[i] = (float)ldexp((double)x[i], k);
        ok = x[i] == 0 || (fabs((double)x[i]) >= 0x1p-100 && fabs((double)x[i]) <= 0x1p100);
    }
    if (ok) {
        gp_scaled_quantize(&c, rows, cols, x2, y2, q2, sc2, &ts2, 1.0f, 7, 1, 0, NULL);
        GP_FUZZ_CHECK(memcmp(q, q2, (size_t)n) == 0, "kind %u elem %d: codes change under 2^%d", kind + 3, c.elem, k);
        if (kind < 2)
            GP_FUZZ_CHECK((double)sc2[0] == ldexp((double)sc[0], -k), "kind %u: scale %a -> %a under 2^%d", kind + 3,
                          sc[0], sc2[0], k);
        else
            GP_FUZZ_CHECK(same(sc2[0], sc[0]) && same(sc2[1], sc[1]) && (double)ts2 == ldexp((double)ts, k),
                          "nvfp4: tensor scale %a -> %a under 2^%d", ts, ts2, k);
    }
    gp_fuzz_feature(counters, (3 * GP_NELEMS + kind * 2 + (unsigned)(c.elem == GP_EL_E5M2)) * GP_NMXRULES);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    if (data[0] >= 240)
        return spanning_kinds(data, size);
    gp_scaled_cfg c;
    memset(&c, 0, sizeof c);
    c.sat = 1;
    c.mode = GP_RNE;
    unsigned kind = data[0] % 3;
    int n;
    if (kind == 0) {
        c.kind = GP_SC_MX;
        c.elem = (gp_elem)((data[0] / 3) % GP_NELEMS);
        c.rule = (gp_mx_rule)((data[0] / 15) % GP_NMXRULES);
        c.torchao = data[1] & 1;
        n = 32;
    } else if (kind == 1) {
        c.kind = GP_SC_NVFP4;
        c.elem = GP_EL_E2M1;
        n = 16;
    } else {
        c.kind = GP_SC_BLOCK_1X128;
        c.elem = (data[0] / 3) & 1 ? GP_EL_E5M2 : GP_EL_E4M3;
        c.pow2 = (data[1] >> 1) & 1;
        n = 128;
    }
    if (kind == 1)
        c.two_level = 0;
    if ((data[1] >> 2) & 1)
        c.mode = GP_STOCHASTIC;
    int k = (int)((data[1] >> 3) % 17) - 8;
    float x[128], y[128], sc[1], x2[128], y2[128], sc2[1];
    uint8_t q[128], q2[128];
    int finite = 1;
    float amax = 0;
    for (int i = 0; i < n; i++) {
        x[i] = f32_le(data, size, 2 + 4 * (size_t)i);
        finite &= isfinite(x[i]) != 0;
        if (fabsf(x[i]) > amax)
            amax = fabsf(x[i]);
    }
    gp_scaled_quantize(&c, 1, (uint64_t)n, x, y, q, sc, NULL, 1.0f, 7, 1, 0, NULL);

    /* differential: MX under the spec's rounding-to-nearest definition */
    if (finite && c.mode == GP_RNE && kind == 0 && !c.torchao && c.rule == GP_MX_FLOOR && amax > 0) {
        int e2;
        (void)frexp((double)amax, &e2); /* amax in [2^(e2-1), 2^e2) */
        int ks = e2 - 1 - gp_elem_info(c.elem).emax;
        if (ks < -127)
            ks = -127;
        double X = ldexp(1.0, ks);
        GP_FUZZ_CHECK(same(sc[0], (float)X), "mx floor elem %d: scale %a, spec %a", c.elem, sc[0], X);
        for (int i = 0; i < n; i++) {
            double want = (double)(float)(nearest_code_value(c.elem, (double)x[i] / X) * X);
            GP_FUZZ_CHECK(y[i] == want || (y[i] == 0 && want == 0),
                          "mx floor elem %d x=%a: %a, nearest %a", c.elem, x[i], y[i], want);
        }
    }
    /* differential: fp8 blockwise without pow2 */
    if (finite && c.mode == GP_RNE && kind == 2 && !c.pow2 && amax > 1e-12f) {
        float s = (float)(gp_elem_max(c.elem) / (double)amax);
        GP_FUZZ_CHECK(same(sc[0], s), "blockwise elem %d: scale %a, want %a", c.elem, sc[0], s);
        for (int i = 0; i < n; i++) {
            float p = x[i] * s;
            double want = nearest_code_value(c.elem, (double)p);
            GP_FUZZ_CHECK(gp_elem_to_f64(c.elem, q[i]) == want || (want == 0 && q[i] % 128 == 0),
                          "blockwise elem %d x=%a: code %u, nearest %a", c.elem, x[i], q[i], want);
        }
    }
    /* metamorphic: times 2^k, inside the range (values stay normal fp32, the scale inside
     * E8M0 / e4m3 normals / fp32 normals, no amax floor) */
    int ok = finite && amax > 0 && k != 0;
    for (int i = 0; ok && i < n; i++) {
        x2[i] = (float)ldexp((double)x[i], k);
        ok = x[i] == 0 || (fabs((double)x2[i]) >= 0x1p-100 && fabs((double)x2[i]) <= 0x1p100 &&
                           fabs((double)x[i]) >= 0x1p-100 && fabs((double)x[i]) <= 0x1p100);
    }
    if (ok && kind == 1) /* nvfp4: b = amax/6 and b * 2^k between the clamps of e4m3 */
        ok = amax / 6 >= 0x1p-5f && amax / 6 <= 0x1p7f && ldexp(amax / 6, k) >= 0x1p-5 && ldexp(amax / 6, k) <= 0x1p7;
    if (ok && kind == 2)
        ok = amax >= 1e-6f && ldexp(amax, k) >= 1e-6;
    if (ok) {
        gp_scaled_quantize(&c, 1, (uint64_t)n, x2, y2, q2, sc2, NULL, 1.0f, 7, 1, 0, NULL);
        double want_scale = kind == 2 ? ldexp((double)sc[0], -k) : ldexp((double)sc[0], k);
        int codes_same = memcmp(q, q2, (size_t)n) == 0;
        GP_FUZZ_CHECK(codes_same, "kind %u elem %d rule %d: codes change under 2^%d", kind, c.elem, c.rule, k);
        GP_FUZZ_CHECK((double)sc2[0] == want_scale, "kind %u elem %d rule %d: scale %a -> %a under 2^%d", kind,
                      c.elem, c.rule, sc[0], sc2[0], k);
    }
    /* features: the kind x element x rule reached */
    gp_fuzz_feature(counters, (kind * GP_NELEMS + (unsigned)c.elem) * GP_NMXRULES + (unsigned)c.rule);
    return 0;
}
