/* gp_optim_lowbit.c — see gp_optim_lowbit.h. */
#include "gp_optim_lowbit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The widest step between neighbouring values of a map (fp8: e4m3's top spacing, 32,
 * over a scale of max/448: 32 in units of the scale). */
static float widest_gap(gp_lowbit f, int sgn)
{
    const float *map = gp_lowbit_map(f, sgn);
    if (!map)
        return 32.0f;
    int k = 1 << gp_lowbit_bits(f);
    float g = sgn ? 0.0f : map[0]; /* an unsigned map without 0 (4-bit): 0 lies map[0] below */
    for (int i = 1; i < k; i++)
        g = fmaxf(g, map[i] - map[i - 1]);
    return g;
}

int gp_optim_lowbit_alloc(gp_optim_lowbit *lb, gp_lowbit f, size_t cap, size_t chunk, int cmp, int models,
                          gp_error *err)
{
    size_t B = gp_lowbit_block(f);
    memset(lb, 0, sizeof *lb);
    lb->f = f;
    lb->block = B;
    lb->gap_m = widest_gap(f, 1);
    lb->gap_v = widest_gap(f, 0);
    size_t c = cap ? cap : B, ch = chunk ? chunk : B, nb = c / B + 1, chb = ch / B + 1;
    int oom = !(lb->mq = calloc(c, 1)) || !(lb->vq = calloc(c, 1)) || !(lb->ms = calloc(nb, 4)) ||
              !(lb->vs = calloc(nb, 4)) || !(lb->old_mq = malloc(ch)) || !(lb->old_vq = malloc(ch)) ||
              !(lb->old_ms = malloc(chb * 4)) || !(lb->old_vs = malloc(chb * 4));
    for (int k = 0; k < 2 && !oom; k++)
        if (k == GP_LOWBIT_CMP ? cmp : models)
            oom = !(lb->sq_m[k] = malloc(ch)) || !(lb->sq_v[k] = malloc(ch)) || !(lb->ss_m[k] = malloc(chb * 4)) ||
                  !(lb->ss_v[k] = malloc(chb * 4));
    return oom ? gp_error_set(err, "out of memory (low-bit optimizer state of %zu elements)", cap) : 0;
}

void gp_optim_lowbit_free(gp_optim_lowbit *lb)
{
    if (!lb)
        return;
    void *p[] = {lb->mq, lb->vq, lb->ms, lb->vs, lb->old_mq, lb->old_vq, lb->old_ms, lb->old_vs};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
    for (int k = 0; k < 2; k++) {
        free(lb->sq_m[k]);
        free(lb->sq_v[k]);
        free(lb->ss_m[k]);
        free(lb->ss_v[k]);
    }
    memset(lb, 0, sizeof *lb);
}

void gp_optim_lowbit_borrow(gp_optim_lowbit *view, const gp_optim_lowbit *lb, const gp_optim_lowbit *scratch)
{
    *view = *lb;
    view->old_mq = scratch->old_mq;
    view->old_vq = scratch->old_vq;
    view->old_ms = scratch->old_ms;
    view->old_vs = scratch->old_vs;
    for (int k = 0; k < 2; k++) {
        view->sq_m[k] = scratch->sq_m[k];
        view->sq_v[k] = scratch->sq_v[k];
        view->ss_m[k] = scratch->ss_m[k];
        view->ss_v[k] = scratch->ss_v[k];
    }
}

void gp_optim_lowbit_init(gp_optim_lowbit *lb, float *m, float *v, size_t off, size_t n)
{
    size_t b0 = off / lb->block;
    gp_lowbit_quantize(lb->f, 1, m + off, n, lb->mq + off, lb->ms + b0);
    gp_lowbit_quantize(lb->f, 0, v + off, n, lb->vq + off, lb->vs + b0);
    gp_optim_lowbit_after(lb, m, v, off, n);
}

void gp_optim_lowbit_args(gp_optim_lowbit *lb, gp_plugin_adamw_args *a, size_t off, size_t n)
{
    size_t b0 = off / lb->block, nb = n / lb->block;
    memcpy(lb->old_mq, lb->mq + off, n);
    memcpy(lb->old_vq, lb->vq + off, n);
    memcpy(lb->old_ms, lb->ms + b0, nb * 4);
    memcpy(lb->old_vs, lb->vs + b0, nb * 4);
    a->state_quant = (int32_t)lb->f;
    a->block = (int32_t)lb->block;
    a->m_codes = lb->mq + off;
    a->v_codes = lb->vq + off;
    a->m_scales = lb->ms + b0;
    a->v_scales = lb->vs + b0;
}

void gp_optim_lowbit_after(const gp_optim_lowbit *lb, float *m, float *v, size_t off, size_t n)
{
    size_t b0 = off / lb->block;
    gp_lowbit_dequantize(lb->f, 1, lb->mq + off, lb->ms + b0, n, m + off);
    gp_lowbit_dequantize(lb->f, 0, lb->vq + off, lb->vs + b0, n, v + off);
}

void gp_optim_lowbit_on_old(gp_optim_lowbit *lb, gp_plugin_adamw_args *a2, size_t n, int slot)
{
    size_t nb = n / lb->block;
    memcpy(lb->sq_m[slot], lb->old_mq, n);
    memcpy(lb->sq_v[slot], lb->old_vq, n);
    memcpy(lb->ss_m[slot], lb->old_ms, nb * 4);
    memcpy(lb->ss_v[slot], lb->old_vs, nb * 4);
    a2->m_codes = lb->sq_m[slot];
    a2->v_codes = lb->sq_v[slot];
    a2->m_scales = lb->ss_m[slot];
    a2->v_scales = lb->ss_v[slot];
}

void gp_optim_lowbit_slot_values(const gp_optim_lowbit *lb, int slot, float *m, float *v, size_t n)
{
    gp_lowbit_dequantize(lb->f, 1, lb->sq_m[slot], lb->ss_m[slot], n, m);
    gp_lowbit_dequantize(lb->f, 0, lb->sq_v[slot], lb->ss_v[slot], n, v);
}

/* Do n floats differ in some bit (NaN-ness for NaNs)? */
static int floats_differ(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0 && !(a[i] != a[i] && b[i] != b[i]))
            return 1;
    return 0;
}

int gp_optim_lowbit_differs(const gp_optim_lowbit *lb, size_t off, size_t n, int slot)
{
    size_t b0 = off / lb->block, nb = n / lb->block;
    return memcmp(lb->mq + off, lb->sq_m[slot], n) != 0 || memcmp(lb->vq + off, lb->sq_v[slot], n) != 0 ||
           floats_differ(lb->ms + b0, lb->ss_m[slot], nb) || floats_differ(lb->vs + b0, lb->ss_v[slot], nb);
}

int gp_optim_lowbit_state_near(const gp_optim_lowbit *lb, size_t e, double m1, double v1, double mx, double vx,
                               double ex, double ev)
{
    if (!isfinite(m1) || !isfinite(v1) || !isfinite(mx) || !isfinite(vx)) /* the non-finite mechanism's */
        return 1;
    double sm = lb->ms[e / lb->block], sv = lb->vs[e / lb->block];
    return fabs(m1 - mx) <= (lb->gap_m + 0x1p-14) * sm + ex && fabs(v1 - vx) <= (lb->gap_v + 0x1p-14) * sv + ev;
}
