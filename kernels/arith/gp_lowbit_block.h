/* gp_lowbit_block.h — the per-element arithmetic of the low-bit optimizer states, for
 * host and device: the CPU's kernels/cpu/gp_lowbit.c and the CUDA backend's
 * kernels/cuda/gp_cuda_accum.cu (gp_adamw_lowbit_kernel) both call these functions, so
 * the device's codes, scales and params equal the CPU's bit for bit (test_cuda_parity
 * checks them, on a device or through the host shim). kernels/cpu/gp_lowbit.h describes
 * the formats and names each operation's source (bitsandbytes 0.50, torchao 0.18).
 *
 * A block's scale comes from its absmax, max |x| over the block starting from 0 (fmaxf:
 * exact, so any order of the maxima gives the same value; a NaN is skipped), then each
 * element's code from that scale alone: gp_lowbit_scale, gp_lowbit_code. The tables
 * (the maps and bitsandbytes' 65536-bin lookup tables) are built once on the host by
 * gp_lowbit_tables_make; the device gets a copy. The step's scalars are host arithmetic
 * (binary64 as CPython's, and torchao's fp32 powf) computed once per call by
 * gp_lowbit_step_make, as torch computes them on the host; the device gets them by value.
 * Everything is fp32 with IEEE operations (no contraction; subnormals kept). */
#ifndef GP_LOWBIT_BLOCK_H
#define GP_LOWBIT_BLOCK_H

#include <math.h>
#include <string.h>

#include "../gp_plugin_abi.h"
#include "gp_adamw.h"
#include "gp_lowbit_maps.h"

typedef enum {
    GP_LOWBIT_NONE = 0,
    GP_LOWBIT_BNB8 = 1,
    GP_LOWBIT_TORCHAO8 = 2,
    GP_LOWBIT_TORCHAO4 = 3,
    GP_LOWBIT_TORCHAO_FP8 = 4,
    GP_LOWBIT_COUNT
} gp_lowbit;

/* Elements per scale of f: 128 for torchao_4bit, else 256. */
GP_ARITH unsigned gp_lowbit_block_of(gp_lowbit f)
{
    return f == GP_LOWBIT_TORCHAO4 ? 128u : 256u;
}

/* Does a backend's AdamW call with a low-bit state (a->state_quant set) ask for something
 * the libraries do not have: another variant than plain / one-store (their step keeps the
 * decayed weight in fp32), stochastic rounding, scaled gradients, a block other than the
 * state's, n not whole blocks, an unknown state? The cpu and cuda backends refuse those
 * (return 1). Host code. */
static inline int gp_lowbit_plugin_refuses(const gp_plugin_adamw_args *a)
{
    gp_lowbit f = (gp_lowbit)a->state_quant;
    return f <= GP_LOWBIT_NONE || f >= GP_LOWBIT_COUNT || a->block <= 0 || (unsigned)a->block != gp_lowbit_block_of(f) ||
           a->n % (uint64_t)a->block != 0 || a->rounding != GP_PLUGIN_RNE || a->inv_scale != 1.0f ||
           (a->variant != GP_PLUGIN_ADAMW_PLAIN && a->variant != GP_PLUGIN_ADAMW_ONE_STORE);
}

enum { GP_LOWBIT_LUT_SIZE = 65536 };

/* The maps (index sgn: v's unsigned map 0, m's signed map 1) and bitsandbytes' lookup
 * tables of the 8-bit maps. */
typedef struct {
    float map8[2][256];
    float map4[2][16];
    uint8_t lut[2][GP_LOWBIT_LUT_SIZE];
} gp_lowbit_tables;

/* f's map of m (sgn 1) or v (sgn 0) in t; NULL for fp8 and GP_LOWBIT_NONE. */
GP_ARITH const float *gp_lowbit_tables_map(const gp_lowbit_tables *t, gp_lowbit f, int sgn)
{
    if (f == GP_LOWBIT_BNB8 || f == GP_LOWBIT_TORCHAO8)
        return t->map8[sgn != 0];
    return f == GP_LOWBIT_TORCHAO4 ? t->map4[sgn != 0] : (const float *)0;
}

/* *t = the maps of gp_lowbit_maps.h and the table of csrc/cpu_ops.cpp
 * (build_quantize_lut) for each 8-bit map: bin i's left edge -1 + (2i)/65535 (fp32), the
 * first code k whose midpoint to k+1 is not below it. Host code (reads the host's maps). */
static inline void gp_lowbit_tables_make(gp_lowbit_tables *t)
{
    memcpy(t->map8[1], gp_lowbit_map8_signed.f, sizeof t->map8[1]);
    memcpy(t->map8[0], gp_lowbit_map8_unsigned.f, sizeof t->map8[0]);
    memcpy(t->map4[1], gp_lowbit_map4_signed.f, sizeof t->map4[1]);
    memcpy(t->map4[0], gp_lowbit_map4_unsigned.f, sizeof t->map4[0]);
    for (int sgn = 0; sgn < 2; sgn++) {
        const float *map = t->map8[sgn];
        float mid[255];
        for (int k = 0; k < 255; k++)
            mid[k] = 0.5f * (map[k] + map[k + 1]);
        int k = 0;
        for (int i = 0; i < GP_LOWBIT_LUT_SIZE; i++) {
            float val = -1.0f + (2.0f * (float)i) / (float)(GP_LOWBIT_LUT_SIZE - 1);
            while (k < 255 && mid[k] < val)
                k++;
            t->lut[sgn][i] = (uint8_t)k;
        }
    }
}

/* The scale of a block of f whose absmax is am: bitsandbytes am; torchao
 * max(am, 1e-12f) (.clip(1e-12)), over 448 (float8_e4m3fn's max) for fp8. */
GP_ARITH float gp_lowbit_scale(gp_lowbit f, float am)
{
    if (f == GP_LOWBIT_BNB8)
        return am;
    float s = fmaxf(am, 1e-12f);
    return f == GP_LOWBIT_TORCHAO_FP8 ? s / 448.0f : s;
}

/* quantize_8bit_with_qmap / quantize_4bit_with_qmap on one value u of a 2^bits map: the
 * branchless binary search, then the upper neighbour when u is at least half-way to it. */
GP_ARITH uint8_t gp_lowbit_torchao_code(const float *map, int bits, float u)
{
    int top = (1 << bits) - 1, c = 0;
    for (int step = 1 << (bits - 1); step >= 1; step >>= 1)
        if (u >= map[c + step])
            c += step;
    int up = c + 1 > top ? top : c + 1;
    float lo = map[c], hi = map[up];
    return (uint8_t)(GP_FSUB_RN(u, lo) >= GP_FMUL_RN(GP_FSUB_RN(hi, lo), 0.5f) ? up : c);
}

/* The code of x (finite) in a block of f with scale s (gp_lowbit_scale), m's (sgn 1) or
 * v's (sgn 0). bitsandbytes: 0 where s is 0; else u = x * (1/s) clamped to [-1, 1], bin
 * (uint16)((u + 1) * 0.5 * 65535 + 0.5), its table entry; 1/s is inf where s < 2^-128:
 * 0 * inf is NaN, and the x86-64 build's float -> uint16 conversion (cvttss2si, low 16
 * bits) makes a NaN bin 0. torchao: x / s searched in the map, or e4m3(x / s) (RNE). */
GP_ARITH uint8_t gp_lowbit_code(const gp_lowbit_tables *t, gp_lowbit f, int sgn, float s, float x)
{
    if (f == GP_LOWBIT_BNB8) {
        const uint8_t *lut = t->lut[sgn != 0];
        if (s == 0.0f)
            return 0;
        float u = GP_FMUL_RN(x, 1.0f / s);
        if (u != u)
            return lut[0];
        u = u < -1.0f ? -1.0f : u > 1.0f ? 1.0f : u;
        float h = GP_FMUL_RN(GP_FADD_RN(u, 1.0f), 0.5f);
        return lut[(uint16_t)GP_FADD_RN(GP_FMUL_RN(h, 65535.0f), 0.5f)];
    }
    if (f == GP_LOWBIT_TORCHAO_FP8)
        return (uint8_t)gp_fmt_from_f32_bits(GP_FP8_E4M3, gp_f32_bits(x / s), GP_RNE, 0, 0, (unsigned *)0);
    return gp_lowbit_torchao_code(gp_lowbit_tables_map(t, f, sgn), f == GP_LOWBIT_TORCHAO4 ? 4 : 8, x / s);
}

/* The value code c of a block with scale s stands for: map[c] * s, or e4m3(c) * s (one
 * fp32 product, as the libraries dequantize). */
GP_ARITH float gp_lowbit_value(const gp_lowbit_tables *t, gp_lowbit f, int sgn, uint8_t c, float s)
{
    const float *map = gp_lowbit_tables_map(t, f, sgn);
    return GP_FMUL_RN(map ? map[c] : (float)gp_fmt_to_f64(GP_FP8_E4M3, c), s);
}

/* One step's fp32 scalars (gp_lowbit_step_make). */
typedef struct {
    gp_lowbit f;
    gp_adamw_eval ev; /* the sqrt of bitsandbytes' step (gp_adamw_sqrtf_fp32) */
    int decay;        /* bitsandbytes: weight decay > 0 */
    float b1, w1, b2, w2, c2, eps, keep, vstep; /* bitsandbytes */
    float lr, bc1, x1, x2, lwd, sbc2;           /* torchao (and eps) */
} gp_lowbit_step;

/* The scalars of step t (>= 1) of f, as the library computes them on the host:
 *   bitsandbytes (Python floats, then fp32): b1, 1 - b1, b2, 1 - b2, sqrt(1 - b2^t), eps,
 *     1 - lr wd, -lr / (1 - b1^t);
 *   torchao (fp32 tensors): lr, bc1 = 1 - b1^t, bc2 = 1 - b2^t (fp32 powf), 1 - b1,
 *     1 - b2, eps, lr * wd, sqrt(bc2).
 * Host code (libm's powf, binary64). */
static inline gp_lowbit_step gp_lowbit_step_make(gp_lowbit f, double lr, double beta1, double beta2, double eps,
                                                 double wd, int64_t t, gp_adamw_eval ev)
{
    gp_lowbit_step s;
    memset(&s, 0, sizeof s);
    s.f = f;
    s.ev = ev;
    s.eps = (float)eps;
    if (f == GP_LOWBIT_BNB8) {
        double c1 = 1.0 - gp_adamw_pow(beta1, (long)t), c2 = sqrt(1.0 - gp_adamw_pow(beta2, (long)t));
        s.decay = wd > 0.0;
        s.b1 = (float)beta1;
        s.w1 = (float)(1.0 - beta1);
        s.b2 = (float)beta2;
        s.w2 = (float)(1.0 - beta2);
        s.c2 = (float)c2;
        s.keep = (float)(1.0 - lr * wd);
        s.vstep = (float)(-lr / c1);
    } else {
        float tf = (float)t;
        s.lr = (float)lr;
        s.bc1 = 1.0f - powf((float)beta1, tf);
        s.sbc2 = sqrtf(1.0f - powf((float)beta2, tf));
        s.x1 = (float)(1.0 - beta1);
        s.x2 = (float)(1.0 - beta2);
        s.lwd = s.lr * (float)wd;
    }
    return s;
}

/* One element of the library's AdamW step: m, v the dequantized state, g the fp32
 * gradient, w the param; *m1, *v1 the unquantized new state; returns the new weight
 * (fp32, before the param's store).
 * bitsandbytes' step on the CPU (_optimizer_update_8bit_blockwise_cpu, "adam" with
 * weight decay: the AdamW8bit class), with torch's CPU kernels:
 *   m' = fma(g, (float)(1 - b1), m * (float)b1)                (mul_(b1).add_(g, alpha))
 *   v' = fma((float)(1 - b2) * g, g, v * (float)b2)            (mul_(b2).addcmul_(g, g, value))
 *   den = sqrt(v') / (float)c2 + (float)eps                    (torch's CPU fp32 sqrt)
 *   w = w * (float)(1 - lr wd)                                 (only when wd > 0)
 *   w' = w + ((float)(-lr / c1) * m') / den                    (addcdiv_)
 * torchao's _AdamBase step (adam.py, single_param_adam with IS_ADAMW, torch.compile'd):
 *   w  = w - (lr * (float)wd) * w
 *   m' = lerp(m, g, (float)(1 - b1));  v' = lerp(v, g*g, (float)(1 - b2))
 *   den = sqrt(v') / sqrt(bc2) + (float)eps
 *   w' = w - (lr * (m' / bc1)) / den
 * lerp(s, e, x) = |x| < 0.5 ? s + x*(e - s) : e - (e - s)*(1 - x) (torch._refs.lerp). */
GP_ARITH float gp_lowbit_step_one(const gp_lowbit_step *s, float g, float m, float v, float w, float *m1,
                                  float *v1)
{
    if (s->f == GP_LOWBIT_BNB8) {
        float mm = GP_FMAF_RN(g, s->w1, GP_FMUL_RN(m, s->b1));
        float vv = GP_FMAF_RN(GP_FMUL_RN(s->w2, g), g, GP_FMUL_RN(v, s->b2));
        float den = GP_FADD_RN(gp_adamw_sqrtf_fp32(s->ev, vv) / s->c2, s->eps);
        float wi = s->decay ? GP_FMUL_RN(w, s->keep) : w;
        *m1 = mm;
        *v1 = vv;
        return GP_FADD_RN(wi, GP_FMUL_RN(s->vstep, mm) / den);
    }
    float gg = GP_FMUL_RN(g, g);
    float wi = GP_FSUB_RN(w, GP_FMUL_RN(s->lwd, w));
    float mm = s->x1 < 0.5f ? GP_FADD_RN(m, GP_FMUL_RN(s->x1, GP_FSUB_RN(g, m)))
                            : GP_FSUB_RN(g, GP_FMUL_RN(GP_FSUB_RN(g, m), GP_FSUB_RN(1.0f, s->x1)));
    float vv = s->x2 < 0.5f ? GP_FADD_RN(v, GP_FMUL_RN(s->x2, GP_FSUB_RN(gg, v)))
                            : GP_FSUB_RN(gg, GP_FMUL_RN(GP_FSUB_RN(gg, v), GP_FSUB_RN(1.0f, s->x2)));
    float den = GP_FADD_RN(sqrtf(vv) / s->sbc2, s->eps);
    *m1 = mm;
    *v1 = vv;
    return GP_FSUB_RN(wi, GP_FMUL_RN(s->lr, mm / s->bc1) / den);
}

/* gp_lowbit_step_one on a param of format pf (fp32, bf16 or fp16: widened exactly,
 * stored rounded to nearest even; on a device by the hardware's conversions, the same
 * bits but for a NaN's payload): the new param's bits. */
GP_ARITH uint32_t gp_lowbit_param_step(const gp_lowbit_step *s, gp_format pf, uint32_t p, float g, float m, float v,
                                       float *m1, float *v1)
{
    float w = gp_lowbit_step_one(s, g, m, v, gp_f32_from_bits(gp_fmt_to_f32_bits(pf, p)), m1, v1);
    return gp_fmt_store_f32(pf, w, 0);
}

#endif
