/* gp_scaled_tensor.c — see gp_scaled_tensor.h. */
#include "gp_scaled_tensor.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    gp_scaling kind;
    gp_elem elem;
} bases[] = {
    {"fp8_e4m3", GP_SC_CURRENT, GP_EL_E4M3}, {"fp8_e5m2", GP_SC_CURRENT, GP_EL_E5M2},
    {"mxfp8_e4m3", GP_SC_MX, GP_EL_E4M3},    {"mxfp8_e5m2", GP_SC_MX, GP_EL_E5M2},
    {"mxfp6_e2m3", GP_SC_MX, GP_EL_E2M3},    {"mxfp6_e3m2", GP_SC_MX, GP_EL_E3M2},
    {"mxfp4", GP_SC_MX, GP_EL_E2M1},         {"nvfp4", GP_SC_NVFP4, GP_EL_E2M1},
    {"fp6_e2m3", GP_SC_CURRENT, GP_EL_E2M3}, {"fp6_e3m2", GP_SC_CURRENT, GP_EL_E3M2},
    {"fp4_e2m1", GP_SC_CURRENT, GP_EL_E2M1},
};
static const char *const fp8_kinds[] = {"current", "delayed", "blockwise_1x128", "blockwise_128x128"};
static const char *const mx_rules[GP_NMXRULES] = {"floor", "ceil", "even", "rceil"};

int gp_scaled_parse(const char *s, gp_scaled_cfg *c, char *why, size_t n)
{
    char buf[128];
    if (strlen(s) >= sizeof buf) {
        snprintf(why, n, "scaled format name too long");
        return -1;
    }
    strcpy(buf, s);
    char *save = NULL, *tok = strtok_r(buf, ":", &save);
    memset(c, 0, sizeof *c);
    c->sat = 1;
    c->two_level = 1;
    c->mode = GP_RNE;
    c->hist = 1024;
    size_t b = 0;
    while (tok && b < sizeof bases / sizeof bases[0] && strcmp(tok, bases[b].name) != 0)
        b++;
    if (!tok || b == sizeof bases / sizeof bases[0]) {
        snprintf(why, n, "unknown scaled format '%s' (fp8_e4m3, fp8_e5m2, fp6_e2m3, fp6_e3m2, fp4_e2m1, "
                         "mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4, nvfp4)", tok ? tok : "");
        return -1;
    }
    c->kind = bases[b].kind;
    c->elem = bases[b].elem;
    int fp8 = c->kind == GP_SC_CURRENT;
    while ((tok = strtok_r(NULL, ":", &save)) != NULL) {
        int ok = 0;
        if (strcmp(tok, "sr") == 0) {
            c->mode = GP_STOCHASTIC;
            ok = 1;
        }
        for (int k = 0; fp8 && !ok && k < 4; k++)
            if (strcmp(tok, fp8_kinds[k]) == 0) {
                c->kind = (gp_scaling)k;
                ok = 1;
            }
        int v = 0;
        char tail = 0;
        if (c->kind == GP_SC_DELAYED && !ok && strcmp(tok, "most_recent") == 0)
            ok = c->most_recent = 1;
        if (c->kind == GP_SC_DELAYED && !ok && strcmp(tok, "max") == 0) {
            c->most_recent = 0;
            ok = 1;
        }
        if (c->kind == GP_SC_DELAYED && !ok && sscanf(tok, "hist=%d%c", &v, &tail) == 1) {
            if (v < 1 || v > 1024) {
                snprintf(why, n, "'%s': hist=%d: the amax history holds 1 to 1024 steps", s, v);
                return -1;
            }
            c->hist = v;
            ok = 1;
        }
        if (c->kind == GP_SC_DELAYED && !ok && sscanf(tok, "margin=%d%c", &v, &tail) == 1) {
            if (v < 0 || v > 64) {
                snprintf(why, n, "'%s': margin=%d: 0 to 64", s, v);
                return -1;
            }
            c->margin = v;
            ok = 1;
        }
        if (fp8 && !ok && strcmp(tok, "pow2") == 0)
            ok = c->pow2 = 1;
        if (fp8 && !ok && strcmp(tok, "nosat") == 0) {
            c->sat = 0;
            ok = 1;
        }
        for (int k = 0; c->kind == GP_SC_MX && !ok && k < GP_NMXRULES; k++)
            if (strcmp(tok, mx_rules[k]) == 0) {
                c->rule = (gp_mx_rule)k;
                ok = 1;
            }
        if (c->kind == GP_SC_MX && !ok && strcmp(tok, "torchao") == 0)
            ok = c->torchao = 1;
        if (c->kind == GP_SC_NVFP4 && !ok && strcmp(tok, "single") == 0) {
            c->two_level = 0;
            ok = 1;
        }
        if (!ok) {
            snprintf(why, n, "'%s': unknown option '%s' of %s", s, tok, bases[b].name);
            return -1;
        }
    }
    return 0;
}

void gp_scaled_name(const gp_scaled_cfg *c, char *buf, size_t n)
{
    const char *base = "?";
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++)
        if (bases[b].elem == c->elem && (bases[b].kind == c->kind || (bases[b].kind == GP_SC_CURRENT && c->kind < GP_SC_MX)))
            base = bases[b].name;
    int used = snprintf(buf, n, "%s", base);
    char *p = buf;
#define GP_ADD(str) used += snprintf(p + used, (size_t)used < n ? n - (size_t)used : 0, ":%s", (str))
    if (c->kind < GP_SC_MX) {
        GP_ADD(fp8_kinds[c->kind]);
        if (c->kind == GP_SC_DELAYED) {
            char t[32];
            snprintf(t, sizeof t, "hist=%d", c->hist);
            GP_ADD(t);
            GP_ADD(c->most_recent ? "most_recent" : "max");
            snprintf(t, sizeof t, "margin=%d", c->margin);
            GP_ADD(t);
        }
        if (c->pow2)
            GP_ADD("pow2");
        if (!c->sat)
            GP_ADD("nosat");
    } else if (c->kind == GP_SC_MX) {
        GP_ADD(mx_rules[c->rule]);
        if (c->torchao)
            GP_ADD("torchao");
    } else if (!c->two_level) {
        GP_ADD("single");
    }
    if (c->mode == GP_STOCHASTIC)
        GP_ADD("sr");
#undef GP_ADD
}

/* Block shape of c: br rows by bc columns. */
static void block_shape(const gp_scaled_cfg *c, uint64_t rows, uint64_t cols, uint64_t *br, uint64_t *bc)
{
    switch (c->kind) {
    case GP_SC_CURRENT:
    case GP_SC_DELAYED: *br = rows; *bc = cols; break;
    case GP_SC_BLOCK_1X128: *br = 1; *bc = 128; break;
    case GP_SC_BLOCK_128X128: *br = 128; *bc = 128; break;
    case GP_SC_MX: *br = 1; *bc = 32; break;
    default: *br = 1; *bc = 16; break;
    }
    if (*br > rows)
        *br = rows ? rows : 1;
    if (*bc > cols)
        *bc = cols ? cols : 1;
}

uint64_t gp_scaled_block_cols(const gp_scaled_cfg *c)
{
    uint64_t br, bc;
    block_shape(c, 1, UINT64_MAX, &br, &bc);
    return c->kind == GP_SC_CURRENT || c->kind == GP_SC_DELAYED ? 0 : bc;
}

uint64_t gp_scaled_nscales(const gp_scaled_cfg *c, uint64_t rows, uint64_t cols)
{
    uint64_t br, bc;
    block_shape(c, rows, cols, &br, &bc);
    return ((rows + br - 1) / br) * ((cols + bc - 1) / bc);
}

/* What is done with each row's part of a block (at most 128 elements from element i):
 * ts NVFP4's tensor scale, s the multiplier of a block spanning rows, nb the block's
 * index and first 1 for its first part. */
typedef struct {
    const gp_scaled_cfg *c;
    const float *x;
    float *y, *scales, *lo, *hi;
    uint8_t *codes;
    double *f;
    uint64_t seed, stream, index0;
    unsigned *ev;
} part_args;

typedef void (*part_fn)(const part_args *a, uint64_t i, int w, float ts, float s, uint64_t nb, int first);

/* The blocks of rows x cols tensor a->x under a->c, each row's part in turn through fn;
 * returns NVFP4's tensor scale (1 when single level or not NVFP4). */
static float for_parts(const part_args *a, uint64_t rows, uint64_t cols, float given, part_fn fn)
{
    const gp_scaled_cfg *c = a->c;
    const float *x = a->x;
    uint64_t br, bc;
    block_shape(c, rows, cols, &br, &bc);
    float ts = 1.0f;
    if (c->kind == GP_SC_NVFP4 && c->two_level)
        ts = gp_nvfp4_tensor_scale(gp_sc_amax(x, (long)(rows * cols), 1));
    uint64_t nb = 0;
    for (uint64_t r0 = 0; r0 < rows; r0 += br)
        for (uint64_t c0 = 0; c0 < cols; c0 += bc, nb++) {
            uint64_t h = rows - r0 < br ? rows - r0 : br, w = cols - c0 < bc ? cols - c0 : bc;
            float s = given; /* the multiplier of a block spanning rows (per tensor, 128x128) */
            if (c->kind == GP_SC_CURRENT || c->kind == GP_SC_BLOCK_128X128) {
                float am = 0.0f;
                for (uint64_t r = r0; r < r0 + h; r++) {
                    float m = gp_sc_amax(x + r * cols + c0, (long)w, 1);
                    if (m != m || m > am)
                        am = m;
                    if (m != m)
                        break;
                }
                s = gp_fp8_scale_current(c->elem, am, c->pow2);
            }
            /* each row's part of the block; row blocks (MX, NVFP4, 1x128) are one row */
            for (uint64_t r = r0; r < r0 + h; r++)
                for (uint64_t k0 = 0; k0 < w; k0 += 128)
                    fn(a, r * cols + c0 + k0, (int)(w - k0 < 128 ? w - k0 : 128), ts, s, nb, r == r0 && k0 == 0);
        }
    return ts;
}

/* Quantize one part (gp_scaled_row_block); with a->lo, its rounding cells too, from the
 * codes and scale it made (gp_scaled_row_cells). */
static void quantize_part(const part_args *a, uint64_t i, int w, float ts, float s, uint64_t nb, int first)
{
    uint8_t q[128], *codes = a->codes ? a->codes + i : a->lo ? q : NULL;
    float sv = gp_scaled_row_block(a->c, a->x + i, w, ts, s, a->seed, a->stream, a->index0 + i, a->y + i, codes,
                                   a->ev ? a->ev + i : NULL);
    if (a->scales && first)
        a->scales[nb] = sv;
    if (a->lo)
        gp_scaled_row_cells(a->c, a->x + i, w, codes, a->y + i, sv, ts, a->lo + i, a->hi + i, a->f + i);
}

void gp_scaled_quantize(const gp_scaled_cfg *c, uint64_t rows, uint64_t cols, const float *x, float *y,
                        uint8_t *codes, float *scales, float *tensor_scale, float given, uint64_t seed,
                        uint64_t stream, uint64_t index0, unsigned *ev)
{
    part_args a = {c, x, y, scales, NULL, NULL, codes, NULL, seed, stream, index0, ev};
    float ts = for_parts(&a, rows, cols, given, quantize_part);
    if (tensor_scale)
        *tensor_scale = ts;
}

void gp_scaled_quantize_cells(const gp_scaled_cfg *c, uint64_t rows, uint64_t cols, const float *x, float *y,
                              float given, uint64_t seed, uint64_t stream, uint64_t index0, unsigned *ev, float *lo,
                              float *hi, double *f)
{
    part_args a = {c, x, y, NULL, lo, hi, NULL, f, seed, stream, index0, ev};
    for_parts(&a, rows, cols, given, quantize_part);
}
