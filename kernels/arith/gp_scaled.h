/* gp_scaled.h — scaled and block formats (issue 25), per element and per block, for host
 * and device: fp8 e4m3/e5m2 with a per-tensor or blockwise fp32 scale (torchao.float8,
 * Transformer Engine's DelayedScaling, DeepSeek-V3's 1x128 / 128x128 blocks), the OCP
 * Microscaling formats v1.0 (MXFP8 e4m3/e5m2, MXFP6 e2m3/e3m2, MXFP4 e2m1: 32 elements
 * sharing an E8M0 scale) and NVFP4 (e2m1 elements, an e4m3 scale per 16, an fp32 tensor
 * scale). Every rule does the arithmetic of the implementation it names, operation by
 * operation, in fp32 where that implementation computes in fp32 (each fp32 operation is
 * evaluated exactly in binary64 and rounded once: for + - * / of fp32 operands the
 * binary64 result rounded to fp32 is the correctly rounded fp32 result, since 53 >=
 * 2*24 + 2). docs/formats.md, "Scaled and block formats", says which rule comes from
 * which source; tests/python/test_scaled_formats.py checks them bit for bit against
 * torchao and ml_dtypes. */
#ifndef GP_SCALED_H
#define GP_SCALED_H

#include "gp_format.h"
#include "gp_philox.h"

/* Element formats of the scaled formats. e4m3/e5m2 are gp_format's fp8 (OCP OFP8);
 * e2m3, e3m2 (fp6) and e2m1 (fp4) are OCP MX v1.0 §5.3: no infinity, no NaN. */
typedef enum {
    GP_EL_E4M3 = 0,
    GP_EL_E5M2 = 1,
    GP_EL_E2M3 = 2, /* max 7.5, min normal 1, min subnormal 0.125 */
    GP_EL_E3M2 = 3, /* max 28, min normal 0.25, min subnormal 0.0625 */
    GP_EL_E2M1 = 4, /* max 6, min normal 1, min subnormal 0.5 */
    GP_NELEMS = 5
} gp_elem;

/* The description of element format e (gp_fmt_info: positive bit patterns). */
GP_ARITH gp_fmt_info gp_elem_info(gp_elem e)
{
    gp_fmt_info i;
    switch (e) {
    case GP_EL_E4M3: return gp_fmt_get(GP_FP8_E4M3);
    case GP_EL_E5M2: return gp_fmt_get(GP_FP8_E5M2);
    case GP_EL_E2M3: i.width = 6; i.p = 4; i.emin = 0; i.emax = 2; i.maxfin = 0x1fu; break;
    case GP_EL_E3M2: i.width = 6; i.p = 3; i.emin = -2; i.emax = 4; i.maxfin = 0x1fu; break;
    default:         i.width = 4; i.p = 2; i.emin = 0; i.emax = 2; i.maxfin = 0x7u; break;
    }
    i.inf = 0u;
    i.qnan = 0u;
    return i;
}

/* Binary64 value of code `c` of element format e (exact; e4m3/e5m2 NaN codes give NaN). */
GP_ARITH double gp_elem_to_f64(gp_elem e, uint32_t c)
{
    return gp_f64_from_bits(gp_fmt_widen_info(gp_elem_info(e), c));
}

/* The largest finite value of e, and the exponent of its top binade (emax_elem of the
 * MX spec §6.3: 8, 15, 2, 4, 2). */
GP_ARITH double gp_elem_max(gp_elem e)
{
    return gp_elem_to_f64(e, gp_elem_info(e).maxfin);
}

/* binary64 -> fp32 rounded to nearest even (overflow to inf, NaN kept): one fp32
 * operation whose exact (or binary64) result is d. (gp_fmt_from_f64_rne: the general
 * routine's result, with its fast path for fp32's normal range.) */
GP_ARITH float gp_sc_f32(double d)
{
    return gp_f32_from_bits(gp_fmt_from_f64_rne(GP_FP32, gp_f64_bits(d), 0, (unsigned *)0));
}

/* 2^k as a binary64 (-1074 <= k <= 1023). */
GP_ARITH double gp_sc_pow2(int k)
{
    return k >= -1022 ? gp_f64_from_bits((uint64_t)(k + 1023) << 52) : gp_f64_from_bits(1ull << (k + 1074));
}

/* floor(log2(a)) of a finite fp32 a > 0, exactly (subnormals included). */
GP_ARITH int gp_sc_ilog2_f32(float a)
{
    uint32_t b = gp_f32_bits(a) & 0x7fffffffu;
    if (b >= 0x00800000u)
        return (int)(b >> 23) - 127;
    return (31 - (int)GP_CLZ64((uint64_t)b) + 32) - 149; /* top bit of the subnormal */
}

/* Cast the fp32 value v to element format e: with sat, first clamped to +-max (as
 * torch.clamp: a NaN passes), reporting INEXACT when it clamps and OVERFLOW when the
 * value would have rounded past max without the clamp (saturation); then rounded
 * (mode: GP_RNE, or GP_STOCHASTIC with 32 random bits rbits). Without sat an e4m3 value
 * past max becomes NaN and an e5m2 one inf (OCP OFP8's non-saturating conversion); fp6
 * and fp4 always saturate. Returns the code; events OR-ed into *ev (may be NULL). */
GP_ARITH uint32_t gp_elem_cast(gp_elem e, float v, int sat, gp_rmode mode, uint32_t rbits, unsigned *ev)
{
    gp_fmt_info i = gp_elem_info(e);
    double d = (double)v;
    double mx = gp_elem_max(e);
    if (sat && (d > mx || d < -mx)) {
        unsigned unclamped = 0; /* did the clamp change the result (saturation)? */
        (void)gp_fmt_round_info(i, gp_f64_bits(d), mode, rbits, 0, &unclamped);
        d = d > 0 ? mx : -mx;
        if (ev)
            *ev |= GP_EV_INEXACT | (unclamped & GP_EV_OVERFLOW);
    }
    return gp_fmt_round_info(i, gp_f64_bits(d), mode, rbits, 0, ev);
}

/* amax of n fp32 values: the largest magnitude, NaN when any is NaN (torch.amax). */
GP_ARITH float gp_sc_amax(const float *x, long n, long stride)
{
    float a = 0.0f;
    for (long k = 0; k < n; k++) {
        float v = x[k * stride];
        float m = v < 0 ? -v : v;
        if (m != m)
            return m;
        if (m > a)
            a = m;
    }
    return a;
}

/* ---- fp8 with an fp32 scale: per tensor (current or delayed) and blockwise ---- */

/* The multiplier s of current scaling from an amax (torchao.float8.float8_utils.
 * amax_to_scale, which torchao's blockwise references torch_blockwise_scale_act_quant_lhs
 * and torch_blockwise_scale_weight_quant repeat): s = fp32(max_e / max(amax, 1e-12)),
 * the division in binary64. pow2: s rounded down to a power of two, 2^floor(log2 s),
 * exactly (torchao's round_scales_to_power_of_2 evaluates exp2(floor(log2(s))) in fp32,
 * whose log2 rounds to the integer just above for s a few ulps below a power of two:
 * tests/python/test_scaled_formats.py counts those). NaN amax: NaN. */
GP_ARITH float gp_fp8_scale_current(gp_elem e, float amax, int pow2)
{
    double a = (double)amax;
    if (a < 1e-12)
        a = 1e-12;
    float s = gp_sc_f32(gp_elem_max(e) / a);
    if (pow2 && s == s && s > 0.0f && s < gp_f32_from_bits(0x7f800000u))
        s = (float)gp_sc_pow2(gp_sc_ilog2_f32(s));
    return s;
}

/* Transformer Engine's DelayedScaling (transformer_engine/pytorch/fp8.py,
 * _default_sf_compute): from the amax the recipe chose over its history (the largest of
 * the last L steps' amaxes for amax_compute_algo "max", the last step's for
 * "most_recent"), sf = fp32(fp32(max_e / amax) / 2^margin); an amax that is zero or not
 * finite keeps the previous scale `prev`. pow2: sf rounded down to a power of two (not
 * in DelayedScaling; the option of Float8CurrentScaling/blockwise recipes). */
GP_ARITH float gp_fp8_scale_delayed(gp_elem e, float amax, int margin, float prev, int pow2)
{
    if (!(amax > 0.0f) || amax >= gp_f32_from_bits(0x7f800000u))
        return prev;
    float sf = gp_sc_f32(gp_elem_max(e) / (double)amax);
    sf = gp_sc_f32((double)sf / gp_sc_pow2(margin));
    if (pow2 && sf > 0.0f && sf < gp_f32_from_bits(0x7f800000u))
        sf = (float)gp_sc_pow2(gp_sc_ilog2_f32(sf));
    return sf;
}

/* Quantize x with multiplier s: fp32(x * s), then gp_elem_cast (sat: the clamp of
 * torchao's to_fp8_saturated and TE's satfinite cast). */
GP_ARITH uint32_t gp_fp8_quantize(gp_elem e, float x, float s, int sat, gp_rmode mode, uint32_t rbits,
                                  unsigned *ev)
{
    return gp_elem_cast(e, gp_sc_f32((double)x * (double)s), sat, mode, rbits, ev);
}

/* Dequantize code c with multiplier s: per tensor as torchao's Float8TrainingTensor,
 * fp32(value / s); blockwise as torchao's blockwise references return the scale, the
 * reciprocal r = fp32(1 / s), and fp32(value * r). */
GP_ARITH float gp_fp8_dequant_div(gp_elem e, uint32_t c, float s)
{
    return gp_sc_f32(gp_elem_to_f64(e, c) / (double)s);
}
GP_ARITH float gp_fp8_dequant_mul(gp_elem e, uint32_t c, float s)
{
    float r = gp_sc_f32(1.0 / (double)s);
    return gp_sc_f32(gp_elem_to_f64(e, c) * (double)r);
}

/* ---- OCP MX: block of 32, E8M0 scale ---- */

/* Scale-selection rules. FLOOR is the spec's (OCP MX v1.0 §6.3: X = 2^(floor(log2
 * amax) - emax_elem)); CEIL and EVEN are torchao's alternatives (torchao/prototype/
 * mx_formats/config.py ScaleCalculationMode: EVEN rounds amax to emax_elem's mantissa
 * width first); RCEIL is cuBLAS's and Transformer Engine's (X = 2^ceil(log2(fp32(amax /
 * max_e))), what `cvt.rp.satfinite.ue8m0x2.f32` computes on Blackwell). */
typedef enum { GP_MX_FLOOR = 0, GP_MX_CEIL = 1, GP_MX_EVEN = 2, GP_MX_RCEIL = 3, GP_NMXRULES = 4 } gp_mx_rule;

/* Flags of gp_mx_quantize. GP_MX_TORCHAO: quantize as torchao's to_mx does where it
 * departs from X at the bottom of E8M0: FLOOR/CEIL/EVEN divide by max(X, 2^-126)
 * (torch.clamp(scale_fp32, min=F32_MIN_NORMAL)), so a block with scale code 0 is
 * quantized with 2^-126 and dequantized with 2^-127; RCEIL multiplies by 1 instead of
 * 2^127 for scale code 0 (TE's ptx.cuh exp2f_rcp). Without it, x / X exactly. */
enum { GP_MX_TORCHAO = 1 };

/* The biased E8M0 scale code of a block whose amax is `amax` (>= 0 or NaN): NaN gives
 * 255 (the spec's NaN scale). FLOOR/CEIL/EVEN on amax's fp32 bits as torchao does: the
 * exponent field minus 127 (a subnormal amax counts as 2^-127), CEIL adding one when the
 * mantissa is non-zero, EVEN first adding half of an emax_elem-mantissa ulp; the
 * unbiased scale clamped to [-127, 128] (an infinite amax: its field 255 counts as 2^128).
 * RCEIL: d = fp32(amax / max_e); inf gives 254, else ceil(log2 d) exactly, clamped to
 * [-127, 127] (d = 0: -127). */
GP_ARITH uint32_t gp_mx_scale(gp_elem e, gp_mx_rule r, float amax)
{
    if (amax != amax)
        return 255u;
    gp_fmt_info i = gp_elem_info(e);
    int k;
    if (r == GP_MX_RCEIL) {
        float d = gp_sc_f32((double)amax / gp_elem_max(e));
        if (d >= gp_f32_from_bits(0x7f800000u))
            return 254u;
        if (d == 0.0f) {
            k = -127;
        } else {
            uint32_t b = gp_f32_bits(d);
            k = gp_sc_ilog2_f32(d);
            int pow2 = b >= 0x00800000u ? (b & 0x7fffffu) == 0 : (b & (b - 1u)) == 0;
            k += !pow2;
        }
        if (k > 127)
            k = 127;
    } else {
        uint32_t b = gp_f32_bits(amax) & 0x7fffffffu;
        if (r == GP_MX_EVEN)
            b = (b + (1u << (23 - (i.p - 1) - 1))) & 0x7f800000u;
        k = (int)(b >> 23) - 127;
        if (r == GP_MX_CEIL && (b & 0x7fffffu))
            k += 1;
        k -= i.emax;
        if (k > 128)
            k = 128;
    }
    if (k < -127)
        k = -127;
    return (uint32_t)(k + 127);
}

/* fp32 value of E8M0 code c: 2^(c-127) (2^-127 is an fp32 subnormal), NaN for 255. */
GP_ARITH float gp_e8m0_to_f32(uint32_t c)
{
    return c == 255u ? gp_f32_from_bits(0x7fc00000u) : (float)gp_sc_pow2((int)c - 127);
}

/* The multiplier of an MX block's elements under scale code sc (rule r, flags as
 * gp_mx_quantize's): an element is quantized from fp32(x * this). FLOOR/CEIL/EVEN:
 * 1 / X' (X' = X, or max(X, 2^-126) under GP_MX_TORCHAO); RCEIL: 1 / X (1 for code 0
 * under GP_MX_TORCHAO); a NaN scale (255): 0 (torchao divides by inf; the block is NaN
 * on dequantizing anyway), RCEIL NaN. */
GP_ARITH double gp_mx_mul(gp_mx_rule r, int flags, uint32_t sc)
{
    if (r == GP_MX_RCEIL)
        return sc == 255u ? gp_f64_from_bits(0x7ff8000000000000ull)
               : (sc == 0u && (flags & GP_MX_TORCHAO)) ? 1.0 : gp_sc_pow2(127 - (int)sc);
    if (sc == 255u)
        return 0.0;
    return gp_sc_pow2(127 - ((sc == 0u && (flags & GP_MX_TORCHAO)) ? 1 : (int)sc));
}

/* Quantize one MX block x[0..n) (n <= 32; a tensor's last block may be shorter) to
 * element format e under rule r and flags: writes the elements' codes to codes[0..n)
 * and returns the scale code. Elements: the fp32 quotient (FLOOR/CEIL/EVEN: x / X'
 * with X' = X, or max(X, 2^-126) under GP_MX_TORCHAO; RCEIL: x * (1/X)) cast with
 * saturation (the spec's clamp to the largest normal) under mode, random bits drawn as
 * gp_rand_u32(seed, stream, index0 + k) for element k. A NaN in the block makes the
 * scale NaN (255): every element dequantizes to NaN. ev (may be NULL): element k's
 * events OR-ed into ev[k] (OVERFLOW|INEXACT: saturated). */
GP_ARITH uint32_t gp_mx_quantize(gp_elem e, gp_mx_rule r, int flags, const float *x, int n, gp_rmode mode,
                                 uint64_t seed, uint64_t stream, uint64_t index0, uint8_t *codes, unsigned *ev)
{
    uint32_t sc = gp_mx_scale(e, r, gp_sc_amax(x, n, 1));
    double mul = gp_mx_mul(r, flags, sc); /* x * mul: exact unless the quotient is an fp32 subnormal */
    for (int k = 0; k < n; k++) {
        uint32_t rb = mode == GP_STOCHASTIC ? gp_rand_u32(seed, stream, index0 + (uint64_t)k) : 0u;
        codes[k] = (uint8_t)gp_elem_cast(e, gp_sc_f32((double)x[k] * mul), 1, mode, rb, ev ? ev + k : ev);
    }
    return sc;
}

/* Dequantize: fp32(value(c) * 2^(sc-127)), NaN for scale code 255 (torchao's to_dtype:
 * f32 element times the fp32 scale). */
GP_ARITH float gp_mx_dequant(gp_elem e, uint32_t c, uint32_t sc)
{
    return gp_sc_f32(gp_elem_to_f64(e, c) * (double)gp_e8m0_to_f32(sc));
}

/* ---- NVFP4: e2m1 elements, an e4m3 scale per 16, an fp32 tensor scale ---- */

/* The fp32 tensor scale of two-level NVFP4 from the tensor's amax (torchao
 * nvfp4_tensor.py per_tensor_amax_to_scale): fp32(amax / (448 * 6)). */
GP_ARITH float gp_nvfp4_tensor_scale(float amax)
{
    return gp_sc_f32((double)amax / 2688.0);
}

/* The multiplier of an NVFP4 block's elements under the e4m3 scale s (its value) and the
 * tensor scale ts: fp32(1 / s) single level, fp32(fp32(1 / ts) / s) two level. */
GP_ARITH float gp_nvfp4_mul(double s, int two_level, float ts)
{
    return two_level ? gp_sc_f32((double)gp_sc_f32(1.0 / (double)ts) / s) : gp_sc_f32(1.0 / s);
}

/* The e4m3 scale code of an NVFP4 block x[0..n) (n <= 16) and, in *r, its elements'
 * multiplier, as gp_nvfp4_quantize below computes them (torchao's nvfp4_quantize). */
GP_ARITH uint32_t gp_nvfp4_scale(const float *x, int n, int two_level, float ts, float *r)
{
    float b = gp_sc_f32((double)gp_sc_amax(x, n, 1) / 6.0);
    float bs = two_level ? gp_sc_f32((double)b / (double)ts) : b;
    if (bs < 0.015625f)
        bs = 0.015625f;
    if (bs > 448.0f)
        bs = 448.0f;
    uint32_t sc = gp_fmt_from_f64_bits(GP_FP8_E4M3, gp_f64_bits((double)bs), GP_RNE, 0, 0, (unsigned *)0);
    *r = gp_nvfp4_mul(gp_elem_to_f64(GP_EL_E4M3, sc), two_level, ts);
    return sc;
}

/* Quantize one NVFP4 block x[0..n) (n <= 16) as torchao's nvfp4_quantize: b =
 * fp32(amax / 6); single level (two_level 0): s = e4m3(clamp(b, 2^-6, 448)), elements
 * fp32(x * fp32(1 / s)); two level: s = e4m3(clamp(fp32(b / ts), 2^-6, 448)), elements
 * fp32(x * fp32(fp32(1 / ts) / s)); then clamped to +-6 and rounded to e2m1 under mode
 * (NVIDIA's recipe: stochastic for gradients; bits as gp_mx_quantize). Returns the e4m3
 * code of s (0x7f: NaN, for a block holding a NaN). ev as gp_mx_quantize's. */
GP_ARITH uint32_t gp_nvfp4_quantize(const float *x, int n, int two_level, float ts, gp_rmode mode, uint64_t seed,
                                    uint64_t stream, uint64_t index0, uint8_t *codes, unsigned *ev)
{
    float r;
    uint32_t sc = gp_nvfp4_scale(x, n, two_level, ts, &r);
    for (int k = 0; k < n; k++) {
        uint32_t rb = mode == GP_STOCHASTIC ? gp_rand_u32(seed, stream, index0 + (uint64_t)k) : 0u;
        codes[k] = (uint8_t)gp_elem_cast(GP_EL_E2M1, gp_sc_f32((double)x[k] * (double)r), 1, mode, rb,
                                         ev ? ev + k : ev);
    }
    return sc;
}

/* Dequantize as torchao's NVFP4Tensor.dequantize: fp32(value(c) * s) single level,
 * fp32(value(c) * fp32(ts * s)) two level. */
GP_ARITH float gp_nvfp4_dequant(uint32_t c, uint32_t sc, int two_level, float ts)
{
    double s = gp_elem_to_f64(GP_EL_E4M3, sc);
    if (two_level)
        s = (double)gp_sc_f32((double)ts * s);
    return gp_sc_f32(gp_elem_to_f64(GP_EL_E2M1, c) * s);
}

/* ---- a recipe, and one block along a row ---- */

/* How a tensor is scaled. */
typedef enum {
    GP_SC_CURRENT = 0,   /* fp8, one fp32 scale from this tensor's amax */
    GP_SC_DELAYED = 1,   /* fp8, one fp32 scale given (from an amax history, gp_fp8_scale_delayed) */
    GP_SC_BLOCK_1X128 = 2,   /* fp8, an fp32 scale per 128 consecutive elements of a row */
    GP_SC_BLOCK_128X128 = 3, /* fp8, an fp32 scale per 128x128 tile */
    GP_SC_MX = 4,        /* OCP MX, an E8M0 scale per 32 consecutive elements of a row */
    GP_SC_NVFP4 = 5      /* e2m1, an e4m3 scale per 16 of a row, an fp32 tensor scale */
} gp_scaling;

typedef struct {
    gp_scaling kind;
    gp_elem elem;
    gp_mx_rule rule;  /* GP_SC_MX */
    int torchao;      /* GP_SC_MX: GP_MX_TORCHAO's departures */
    int pow2;         /* fp8 kinds: scales rounded down to powers of two */
    int sat;          /* fp8 kinds: saturating cast (default 1); 0: OCP non-saturating */
    int two_level;    /* GP_SC_NVFP4: with the fp32 tensor scale (default 1) */
    gp_rmode mode;    /* element rounding: GP_RNE or GP_STOCHASTIC ("sr") */
    int hist;         /* GP_SC_DELAYED: amax history length L (default 1024, TE's) */
    int most_recent;  /* GP_SC_DELAYED: amax_compute_algo "most_recent" (default "max") */
    int margin;       /* GP_SC_DELAYED: TE's margin (default 0) */
} gp_scaled_cfg;

/* Dequantize code v of recipe c in a block whose scale is sc (MX: the E8M0 code; NVFP4:
 * the e4m3 code) or s (the fp8 kinds' fp32 multiplier); ts: NVFP4's tensor scale. */
GP_ARITH float gp_scaled_dequant(const gp_scaled_cfg *c, uint32_t v, uint32_t sc, float s, float ts)
{
    switch (c->kind) {
    case GP_SC_MX: return gp_mx_dequant(c->elem, v, sc);
    case GP_SC_NVFP4: return gp_nvfp4_dequant(v, sc, c->two_level, ts);
    case GP_SC_BLOCK_1X128:
    case GP_SC_BLOCK_128X128: return gp_fp8_dequant_mul(c->elem, v, s);
    default: return gp_fp8_dequant_div(c->elem, v, s);
    }
}

/* Quantize the w consecutive elements x[0..w) of one row block of recipe c (MX: w <= 32,
 * NVFP4: w <= 16, GP_SC_BLOCK_1X128: w <= 128, its s from their amax; the per-tensor and
 * 128x128 kinds: a row's part of a block whose multiplier `given` the caller computed):
 * y[k] the dequantized value, codes[k] (may be NULL) the code, ev[k] (may be NULL) the
 * events OR-ed; ts: NVFP4's tensor scale. Random bits gp_rand_u32(seed, stream, index0 +
 * k). Returns the block's scale as an fp32 value (s, 2^(c-127) or NaN, the e4m3 scale). */
GP_ARITH float gp_scaled_row_block(const gp_scaled_cfg *c, const float *x, int w, float ts, float given,
                                   uint64_t seed, uint64_t stream, uint64_t index0, float *y, uint8_t *codes,
                                   unsigned *ev)
{
    uint8_t q[128];
    if (c->kind == GP_SC_MX || c->kind == GP_SC_NVFP4) {
        uint32_t sc;
        float sv;
        if (c->kind == GP_SC_MX) {
            sc = gp_mx_quantize(c->elem, c->rule, c->torchao ? GP_MX_TORCHAO : 0, x, w, c->mode, seed, stream,
                                index0, q, ev);
            sv = gp_e8m0_to_f32(sc);
        } else {
            sc = gp_nvfp4_quantize(x, w, c->two_level, ts, c->mode, seed, stream, index0, q, ev);
            sv = (float)gp_elem_to_f64(GP_EL_E4M3, sc);
        }
        for (int k = 0; k < w; k++) {
            if (codes)
                codes[k] = q[k];
            y[k] = gp_scaled_dequant(c, q[k], sc, 0.0f, ts);
        }
        return sv;
    }
    float s = c->kind == GP_SC_BLOCK_1X128 ? gp_fp8_scale_current(c->elem, gp_sc_amax(x, w, 1), c->pow2) : given;
    for (int k = 0; k < w; k++) {
        uint32_t rb = c->mode == GP_STOCHASTIC ? gp_rand_u32(seed, stream, index0 + (uint64_t)k) : 0u;
        uint32_t v = gp_fp8_quantize(c->elem, x[k], s, c->sat, c->mode, rb, ev ? ev + k : ev);
        if (codes)
            codes[k] = (uint8_t)v;
        y[k] = gp_scaled_dequant(c, v, 0u, s, ts);
    }
    return s;
}

/* The rounding cells of one row block that gp_scaled_row_block quantized under recipe c:
 * x[0..w) its input, codes[0..w) and y[0..w) what it wrote, sv the scale it returned, ts
 * NVFP4's tensor scale. Element k's fp32 value in element units, q = fp32(x[k] * m) with the
 * block's multiplier m (made from sv as the quantizers make it: gp_mx_mul, gp_nvfp4_mul, or
 * the fp8 kinds' s), lies between the codes just toward zero and just away from zero (one
 * of them is codes[k]: a rounding under any mode stores one of the two); lo[k] and hi[k]
 * are those codes dequantized (lo = hi = y[k] where q is a code's value), f[k] in [0, 1)
 * the position of q between them in element units, (|q| - |lo's value|) / (|hi's value| -
 * |lo's value|), exactly (0 where q is a code's value). An unbiased rounding stores hi with
 * probability f; GP_STOCHASTIC does with floor(f 2^32) / 2^32 (gp_fmt_round_info). A q past
 * the element's largest value (saturated or, :nosat, non-finite) or NaN has no cell: lo =
 * hi = NaN, f = 0. */
GP_ARITH void gp_scaled_row_cells(const gp_scaled_cfg *c, const float *x, int w, const uint8_t *codes,
                                  const float *y, float sv, float ts, float *lo, float *hi, double *f)
{
    uint32_t sc = 0u;
    double m = (double)sv;
    if (c->kind == GP_SC_MX) {
        sc = sv != sv ? 255u : (uint32_t)(gp_sc_ilog2_f32(sv) + 127);
        m = gp_mx_mul(c->rule, c->torchao ? GP_MX_TORCHAO : 0, sc);
    } else if (c->kind == GP_SC_NVFP4) {
        sc = gp_fmt_from_f64_bits(GP_FP8_E4M3, gp_f64_bits((double)sv), GP_RNE, 0, 0, (unsigned *)0);
        m = (double)gp_nvfp4_mul((double)sv, c->two_level, ts);
    }
    gp_elem e = c->kind == GP_SC_NVFP4 ? GP_EL_E2M1 : c->elem;
    double mx = gp_elem_max(e);
    for (int k = 0; k < w; k++) {
        double q = (double)gp_sc_f32((double)x[k] * m), a = q < 0 ? -q : q;
        f[k] = 0.0;
        lo[k] = hi[k] = y[k];
        if (!(a <= mx)) {
            lo[k] = hi[k] = gp_f32_from_bits(0x7fc00000u);
            continue;
        }
        double v = gp_elem_to_f64(e, codes[k]);
        v = v < 0 ? -v : v;
        if (v == a)
            continue;
        uint32_t other = v < a ? codes[k] + 1u : codes[k] - 1u; /* sign-magnitude codes, |q| < max */
        double o = gp_elem_to_f64(e, other);
        o = o < 0 ? -o : o;
        float d = gp_scaled_dequant(c, other, sc, sv, ts);
        if (v < a) {
            hi[k] = d;
            f[k] = (a - v) / (o - v);
        } else {
            lo[k] = d;
            f[k] = (a - o) / (v - o);
        }
    }
}

#endif
