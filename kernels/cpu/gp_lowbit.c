/* gp_lowbit.c — see gp_lowbit.h. */
#include "gp_lowbit.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "../arith/gp_accum.h"
#include "../gp_vocab.h"
#include "gp_lowbit_maps.h"

/* The names and the ABI's GP_PLUGIN_STATE_* values: kernels/gp_vocab.h's
 * GP_VOCAB_LOWBIT_STATES (gp_names.c asserts they agree with gp_lowbit). */
const char *gp_lowbit_name(gp_lowbit f)
{
    return f > GP_LOWBIT_NONE ? gp_vocab_name(GP_VOCAB_LOWBIT_STATE, (int)f) : NULL;
}

gp_lowbit gp_lowbit_parse(const char *name)
{
    int f = gp_vocab_parse(GP_VOCAB_LOWBIT_STATE, name);
    return f > 0 ? (gp_lowbit)f : GP_LOWBIT_NONE;
}

size_t gp_lowbit_block(gp_lowbit f)
{
    return f == GP_LOWBIT_TORCHAO4 ? 128 : 256;
}

int gp_lowbit_bits(gp_lowbit f)
{
    return f == GP_LOWBIT_TORCHAO4 ? 4 : 8;
}

double gp_lowbit_bytes_per_element(gp_lowbit f)
{
    /* two states: codes of bits/8 bytes each, one fp32 scale per block each */
    return 2.0 * ((double)gp_lowbit_bits(f) / 8.0 + 4.0 / (double)gp_lowbit_block(f));
}

const float *gp_lowbit_map(gp_lowbit f, int sgn)
{
    switch (f) {
    case GP_LOWBIT_BNB8:
    case GP_LOWBIT_TORCHAO8:
        return sgn ? gp_lowbit_map8_signed.f : gp_lowbit_map8_unsigned.f;
    case GP_LOWBIT_TORCHAO4:
        return sgn ? gp_lowbit_map4_signed.f : gp_lowbit_map4_unsigned.f;
    default:
        return NULL;
    }
}

/* ---- bitsandbytes' CPU quantizer: a 65536-bin lookup table ---- */

enum { LUT_SIZE = 65536 };

/* The table of csrc/cpu_ops.cpp (build_quantize_lut) for a 256-value map: bin i's left
 * edge -1 + (2i)/65535 (fp32), the first code k whose midpoint to k+1 is not below it. */
static void bnb_lut(const float *map, uint8_t *lut)
{
    float mid[255];
    for (int k = 0; k < 255; k++)
        mid[k] = 0.5f * (map[k] + map[k + 1]);
    int k = 0;
    for (int i = 0; i < LUT_SIZE; i++) {
        float val = -1.0f + (2.0f * (float)i) / (float)(LUT_SIZE - 1);
        while (k < 255 && mid[k] < val)
            k++;
        lut[i] = (uint8_t)k;
    }
}

static uint8_t g_lut_s[LUT_SIZE], g_lut_u[LUT_SIZE];
static pthread_once_t g_lut_once = PTHREAD_ONCE_INIT;

static void luts_make(void)
{
    bnb_lut(gp_lowbit_map(GP_LOWBIT_BNB8, 1), g_lut_s);
    bnb_lut(gp_lowbit_map(GP_LOWBIT_BNB8, 0), g_lut_u);
}

static const uint8_t *bnb_lut_of(int sgn)
{
    pthread_once(&g_lut_once, luts_make);
    return sgn ? g_lut_s : g_lut_u;
}

static void bnb_quantize_block(const float *x, size_t nb, const uint8_t *lut, uint8_t *codes, float *scale)
{
    float am = 0.0f;
    for (size_t j = 0; j < nb; j++)
        am = fmaxf(am, fabsf(x[j]));
    *scale = am;
    if (am == 0.0f) {
        memset(codes, 0, nb);
        return;
    }
    float inv = 1.0f / am;
    for (size_t j = 0; j < nb; j++) {
        /* inv is inf where absmax < 2^-128: 0 * inf is NaN, and the x86-64 build's
         * float -> uint16 conversion (cvttss2si, low 16 bits) makes a NaN bin 0 */
        float u = x[j] * inv;
        if (u != u) {
            codes[j] = lut[0];
            continue;
        }
        u = u < -1.0f ? -1.0f : u > 1.0f ? 1.0f : u;
        float h = (u + 1.0f) * 0.5f;
        float t = h * 65535.0f;
        codes[j] = lut[(uint16_t)(t + 0.5f)];
    }
}

/* ---- torchao's quantizers ---- */

/* quantize_8bit_with_qmap / quantize_4bit_with_qmap on one value u of a 2^bits map */
static uint8_t torchao_code(const float *map, int bits, float u)
{
    int top = (1 << bits) - 1, c = 0;
    for (int step = 1 << (bits - 1); step >= 1; step >>= 1)
        if (u >= map[c + step])
            c += step;
    int up = c + 1 > top ? top : c + 1;
    float lo = map[c], hi = map[up];
    return (uint8_t)(u - lo >= (hi - lo) * 0.5f ? up : c);
}

static float block_absmax(const float *x, size_t nb)
{
    float am = 0.0f;
    for (size_t j = 0; j < nb; j++)
        am = fmaxf(am, fabsf(x[j]));
    return am;
}

void gp_lowbit_quantize(gp_lowbit f, int sgn, const float *x, size_t n, uint8_t *codes, float *scales)
{
    size_t B = gp_lowbit_block(f);
    const float *map = gp_lowbit_map(f, sgn);
    const uint8_t *lut = f == GP_LOWBIT_BNB8 ? bnb_lut_of(sgn) : NULL;
    for (size_t b = 0; b * B < n; b++) {
        const float *xb = x + b * B;
        uint8_t *cb = codes + b * B;
        size_t nb = n - b * B < B ? n - b * B : B;
        if (f == GP_LOWBIT_BNB8) {
            bnb_quantize_block(xb, nb, lut, cb, &scales[b]);
            continue;
        }
        float s = fmaxf(block_absmax(xb, nb), 1e-12f); /* .clip(1e-12) */
        if (f == GP_LOWBIT_TORCHAO_FP8) {
            s = s / 448.0f; /* torch.finfo(float8_e4m3fn).max */
            for (size_t j = 0; j < nb; j++)
                cb[j] = (uint8_t)gp_fmt_from_f32_bits(GP_FP8_E4M3, gp_f32_bits(xb[j] / s), GP_RNE, 0, 0,
                                                      (unsigned *)0);
        } else {
            int bits = gp_lowbit_bits(f);
            for (size_t j = 0; j < nb; j++)
                cb[j] = torchao_code(map, bits, xb[j] / s);
        }
        scales[b] = s;
    }
}

void gp_lowbit_dequantize(gp_lowbit f, int sgn, const uint8_t *codes, const float *scales, size_t n, float *x)
{
    size_t B = gp_lowbit_block(f);
    const float *map = gp_lowbit_map(f, sgn);
    for (size_t i = 0; i < n; i++) {
        float c = map ? map[codes[i]] : (float)gp_fmt_to_f64(GP_FP8_E4M3, codes[i]);
        x[i] = c * scales[i / B];
    }
}

/* ---- the optimizer steps ---- */

/* bitsandbytes' AdamW8bit step on the CPU (_optimizer_update_8bit_blockwise_cpu, "adam"
 * with weight decay: the AdamW8bit class), per element in fp32 with torch's CPU kernels:
 *   m  = map1[c1] * absmax1;  v = map2[c2] * absmax2           (dequantize_blockwise)
 *   m' = fma(g, (float)(1 - b1), m * (float)b1)                (mul_(b1).add_(g, alpha))
 *   v' = fma((float)(1 - b2) * g, g, v * (float)b2)            (mul_(b2).addcmul_(g, g, value))
 *   c1 = 1 - b1^t;  c2 = sqrt(1 - b2^t)                        (Python floats)
 *   den = sqrt(v') / (float)c2 + (float)eps                    (torch's CPU fp32 sqrt)
 *   w = w * (float)(1 - lr wd)                                 (only when wd > 0)
 *   w' = w + ((float)(-lr / c1) * m') / den                    (addcdiv_)
 * then the param stored (RNE) and m', v' quantized (new absmax per block). The update
 * reads the unquantized m', v'. */
static void bnb_step(const gp_lowbit_adamw_args *a, const float *m, const float *v, float *m1, float *v1,
                     float *w)
{
    double c1 = 1.0 - gp_adamw_pow(a->beta1, a->step), c2 = sqrt(1.0 - gp_adamw_pow(a->beta2, a->step));
    float b1 = (float)a->beta1, w1 = (float)(1.0 - a->beta1), b2 = (float)a->beta2, w2 = (float)(1.0 - a->beta2);
    float c2f = (float)c2, epsf = (float)a->eps, decay = (float)(1.0 - a->lr * a->weight_decay);
    float vstep = (float)(-a->lr / c1);
    for (size_t i = 0; i < a->n; i++) {
        float g = a->grad[i];
        m1[i] = fmaf(g, w1, m[i] * b1);
        v1[i] = fmaf(w2 * g, g, v[i] * b2);
        float den = gp_adamw_sqrtf_fp32(a->sqrt_eval, v1[i]) / c2f + epsf;
        float wi = a->weight_decay > 0.0 ? w[i] * decay : w[i];
        w[i] = wi + (vstep * m1[i]) / den;
    }
}

/* torchao's _AdamBase step (adam.py, single_param_adam with IS_ADAMW, under torch.compile;
 * lr and the step count are fp32 tensors), per element in fp32:
 *   w  = w - (lr * (float)wd) * w
 *   bc1 = 1 - (float)b1 ^ t;  bc2 = 1 - (float)b2 ^ t            (fp32 pow)
 *   m' = lerp(m, g, (float)(1 - b1));  v' = lerp(v, g*g, (float)(1 - b2))
 *   den = sqrt(v') / sqrt(bc2) + (float)eps
 *   w' = w - (lr * (m' / bc1)) / den
 * lerp(s, e, x) = |x| < 0.5 ? s + x*(e - s) : e - (e - s)*(1 - x) (torch._refs.lerp). */
static void torchao_step(const gp_lowbit_adamw_args *a, const float *m, const float *v, float *m1, float *v1,
                         float *w)
{
    float lr = (float)a->lr, t = (float)a->step;
    float bc1 = 1.0f - powf((float)a->beta1, t), bc2 = 1.0f - powf((float)a->beta2, t);
    float x1 = (float)(1.0 - a->beta1), x2 = (float)(1.0 - a->beta2), epsf = (float)a->eps;
    float lwd = lr * (float)a->weight_decay, sbc2 = sqrtf(bc2);
    for (size_t i = 0; i < a->n; i++) {
        float g = a->grad[i], gg = g * g;
        float wi = w[i] - lwd * w[i];
        m1[i] = x1 < 0.5f ? m[i] + x1 * (g - m[i]) : g - (g - m[i]) * (1.0f - x1);
        v1[i] = x2 < 0.5f ? v[i] + x2 * (gg - v[i]) : gg - (gg - v[i]) * (1.0f - x2);
        float den = sqrtf(v1[i]) / sbc2 + epsf;
        w[i] = wi - (lr * (m1[i] / bc1)) / den;
    }
}

int gp_lowbit_adamw(const gp_lowbit_adamw_args *a)
{
    if (a->pf != GP_FP32 && a->pf != GP_BF16 && a->pf != GP_FP16)
        return 1;
    if (a->f <= GP_LOWBIT_NONE || a->f >= GP_LOWBIT_COUNT)
        return 1;
    enum { CH = 1024 };
    float m[CH], v[CH], m1[CH], v1[CH], w[CH];
    size_t B = gp_lowbit_block(a->f);
    for (size_t i0 = 0; i0 < a->n; i0 += CH) { /* CH is a multiple of every block */
        size_t n = a->n - i0 < CH ? a->n - i0 : CH;
        gp_lowbit_dequantize(a->f, 1, a->m_codes + i0, a->m_scales + i0 / B, n, m);
        gp_lowbit_dequantize(a->f, 0, a->v_codes + i0, a->v_scales + i0 / B, n, v);
        for (size_t j = 0; j < n; j++)
            w[j] = (float)gp_fmt_to_f64(a->pf, gp_pack_get(a->pf, a->param, i0 + j));
        gp_lowbit_adamw_args s = *a;
        s.n = n;
        s.grad = a->grad + i0;
        if (a->f == GP_LOWBIT_BNB8)
            bnb_step(&s, m, v, m1, v1, w);
        else
            torchao_step(&s, m, v, m1, v1, w);
        for (size_t j = 0; j < n; j++)
            gp_pack_set(a->pf, a->param, i0 + j,
                        gp_fmt_from_f32_bits(a->pf, gp_f32_bits(w[j]), GP_RNE, 0, 0, (unsigned *)0));
        gp_lowbit_quantize(a->f, 1, m1, n, a->m_codes + i0, a->m_scales + i0 / B);
        gp_lowbit_quantize(a->f, 0, v1, n, a->v_codes + i0, a->v_scales + i0 / B);
        if (a->mx)
            memcpy(a->mx + i0, m1, n * sizeof(float));
        if (a->vx)
            memcpy(a->vx + i0, v1, n * sizeof(float));
    }
    return 0;
}
