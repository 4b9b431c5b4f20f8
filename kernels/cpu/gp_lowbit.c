/* gp_lowbit.c — see gp_lowbit.h. */
#include "gp_lowbit.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "../arith/gp_accum.h"
#include "../gp_vocab.h"

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
    return gp_lowbit_block_of(f);
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

/* The maps and bitsandbytes' tables, built at first use. */
static gp_lowbit_tables g_tables;
static pthread_once_t g_tables_once = PTHREAD_ONCE_INIT;

static void tables_make(void)
{
    gp_lowbit_tables_make(&g_tables);
}

static const gp_lowbit_tables *host_tables(void)
{
    pthread_once(&g_tables_once, tables_make);
    return &g_tables;
}

const float *gp_lowbit_map(gp_lowbit f, int sgn)
{
    return f > GP_LOWBIT_NONE && f < GP_LOWBIT_COUNT ? gp_lowbit_tables_map(host_tables(), f, sgn) : NULL;
}

void gp_lowbit_quantize(gp_lowbit f, int sgn, const float *x, size_t n, uint8_t *codes, float *scales)
{
    const gp_lowbit_tables *t = host_tables();
    size_t B = gp_lowbit_block(f);
    for (size_t b = 0; b * B < n; b++) {
        const float *xb = x + b * B;
        size_t nb = n - b * B < B ? n - b * B : B;
        float am = 0.0f;
        for (size_t j = 0; j < nb; j++)
            am = fmaxf(am, fabsf(xb[j]));
        float s = gp_lowbit_scale(f, am);
        for (size_t j = 0; j < nb; j++)
            codes[b * B + j] = gp_lowbit_code(t, f, sgn, s, xb[j]);
        scales[b] = s;
    }
}

void gp_lowbit_dequantize(gp_lowbit f, int sgn, const uint8_t *codes, const float *scales, size_t n, float *x)
{
    const gp_lowbit_tables *t = host_tables();
    size_t B = gp_lowbit_block(f);
    for (size_t i = 0; i < n; i++)
        x[i] = gp_lowbit_value(t, f, sgn, codes[i], scales[i / B]);
}

/* The library's step (gp_lowbit_step_one, ../arith/gp_lowbit_block.h, names each
 * operation's source) per chunk: the state dequantized, each element stepped and its
 * param stored, then m', v' quantized (new absmax per block). The update reads the
 * unquantized m', v'. */
int gp_lowbit_adamw(const gp_lowbit_adamw_args *a)
{
    if (a->pf != GP_FP32 && a->pf != GP_BF16 && a->pf != GP_FP16)
        return 1;
    if (a->f <= GP_LOWBIT_NONE || a->f >= GP_LOWBIT_COUNT)
        return 1;
    enum { CH = 1024 };
    float m[CH], v[CH], m1[CH], v1[CH];
    size_t B = gp_lowbit_block(a->f);
    gp_lowbit_step s = gp_lowbit_step_make(a->f, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->step,
                                           a->sqrt_eval);
    for (size_t i0 = 0; i0 < a->n; i0 += CH) { /* CH is a multiple of every block */
        size_t n = a->n - i0 < CH ? a->n - i0 : CH;
        gp_lowbit_dequantize(a->f, 1, a->m_codes + i0, a->m_scales + i0 / B, n, m);
        gp_lowbit_dequantize(a->f, 0, a->v_codes + i0, a->v_scales + i0 / B, n, v);
        for (size_t j = 0; j < n; j++)
            gp_pack_set(a->pf, a->param, i0 + j,
                        gp_lowbit_param_step(&s, a->pf, gp_pack_get(a->pf, a->param, i0 + j), a->grad[i0 + j], m[j],
                                             v[j], &m1[j], &v1[j]));
        gp_lowbit_quantize(a->f, 1, m1, n, a->m_codes + i0, a->m_scales + i0 / B);
        gp_lowbit_quantize(a->f, 0, v1, n, a->v_codes + i0, a->v_scales + i0 / B);
        if (a->mx)
            memcpy(a->mx + i0, m1, n * sizeof(float));
        if (a->vx)
            memcpy(a->vx + i0, v1, n * sizeof(float));
    }
    return 0;
}
