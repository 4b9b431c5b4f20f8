/* gp_decode.c — see gp_decode.h. Every decoded number is constructed inside the
 * loader's accepted range (not clamped after the fact), so no input can decode to a
 * scenario that gp_scenario_load_string would refuse. */
#include "gp_decode.h"

#include "../../kernels/cpu/gp_lowbit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sources/gp_generate.h"
#include "../../kernels/arith/gp_philox.h"
#include "../../kernels/gp_vocab.h" /* the rounding policies the decoder picks among */

/* ---- the byte reader ---- */

void gp_decoder_init(gp_decoder *d, const uint8_t *data, size_t size)
{
    d->data = data;
    d->size = data ? size : 0;
}

uint64_t gp_decoder_range(gp_decoder *d, uint64_t lo, uint64_t hi)
{
    uint64_t span = hi - lo, v = 0;
    for (int shift = 0; shift < 64 && (span >> shift) != 0; shift += 8) {
        uint8_t b = 0;
        if (d->size) {
            b = d->data[d->size - 1];
            d->size--;
        }
        v = (v << 8) | b;
    }
    if (span != UINT64_MAX)
        v %= span + 1;
    return lo + v;
}

int gp_decoder_int(gp_decoder *d, int lo, int hi)
{
    return (int)((int64_t)lo + (int64_t)gp_decoder_range(d, 0, (uint64_t)((int64_t)hi - lo)));
}

int gp_decoder_bool(gp_decoder *d)
{
    return (int)(gp_decoder_range(d, 0, 255) & 1u);
}

unsigned gp_decoder_pick(gp_decoder *d, unsigned n)
{
    return (unsigned)gp_decoder_range(d, 0, n - 1u);
}

uint64_t gp_decoder_bits(gp_decoder *d, int nbytes)
{
    uint64_t v = 0;
    for (int i = 0; i < nbytes; i++)
        if (d->size) {
            v |= (uint64_t)d->data[0] << (8 * i);
            d->data++;
            d->size--;
        }
    return v;
}

/* ---- steered values ---- */

double gp_decode_value(gp_decoder *d, gp_format f, gp_format acc, double ref, int finite,
                       gp_region *region, uint32_t *bits)
{
    gp_fmt_info fi = gp_fmt_get(f);
    gp_region r = (gp_region)gp_decoder_pick(d, GP_NREGIONS);
    uint64_t pay = gp_decoder_bits(d, fi.width / 8);
    int neg = (int)((pay >> (fi.width - 1)) & 1u);
    int fb = fi.p - 1;                                  /* fraction bits */
    uint64_t frac = pay & ((1ull << fb) - 1u);
    int qmin = fi.emin - fb;                            /* exponent of the min subnormal */
    double v;
    if (region)
        *region = r;
    switch (r) {
    case GP_REGION_RAW:
        v = gp_fmt_to_f64(f, (uint32_t)pay);
        if (finite && !isfinite(v)) {
            pay = (pay & (1ull << (fi.width - 1))) | fi.maxfin;
            v = gp_fmt_to_f64(f, (uint32_t)pay);
        }
        if (bits)
            *bits = (uint32_t)pay;
        return v;
    case GP_REGION_ORDINARY:
        v = ldexp((double)((1ull << fb) | frac), gp_decoder_int(d, -12, 4) - fb);
        break;
    case GP_REGION_SUBNORMAL:
        switch (gp_decoder_pick(d, 3)) {
        case 0: /* a subnormal pattern (0 included) */
            v = ldexp((double)frac, qmin);
            break;
        case 1: /* the min normal plus or minus a few quanta */
            v = ldexp((double)(1ull << fb) + (double)gp_decoder_int(d, -3, 3), qmin);
            break;
        default: /* k/4 of the min subnormal, k = 1..8 */
            v = ldexp((double)gp_decoder_int(d, 1, 8), qmin - 2);
            break;
        }
        break;
    case GP_REGION_HALFWAY: {
        /* binade e (e = emin - 1: the subnormal one); midpoint above the value with
         * fraction `frac`: (2 * sig + 1) * 2^(e - p) */
        int e = gp_decoder_int(d, fi.emin - 1, fi.emax);
        if (e < fi.emin)
            v = ldexp(2.0 * (double)frac + 1.0, qmin - 1);
        else
            v = ldexp(2.0 * (double)((1ull << fb) | frac) + 1.0, e - fi.p);
        break;
    }
    case GP_REGION_OVERFLOW:
        v = gp_fmt_to_f64(f, fi.maxfin) + ldexp((double)gp_decoder_int(d, -4, 3), fi.emax - fi.p);
        break;
    default: { /* GP_REGION_ABSORB */
        int pa = gp_fmt_get(acc).p;
        int er = (ref != 0 && isfinite(ref)) ? ilogb(ref) : 0;
        int j = gp_decoder_int(d, -3, 2);
        v = ldexp(8.0 + (double)(frac >> (fb - 3)), er - pa + j - 3); /* (1 + k/8) 2^(er-pa+j) */
        break;
    }
    }
    v = neg ? -v : v;
    if (bits)
        *bits = gp_fmt_from_f64(f, v, GP_RTZ, 0, 0, NULL);
    return v;
}

/* ---- a whole scenario ---- */

/* A power of two 2^e, e in [lo, hi]. */
static double pow2_in(gp_decoder *d, int lo, int hi)
{
    return ldexp(1.0, gp_decoder_int(d, lo, hi));
}

/* One of the given values. */
static double one_of(gp_decoder *d, const double *v, unsigned n)
{
    return v[gp_decoder_pick(d, n)];
}
#define ONE_OF(d, ...) one_of((d), (const double[]){__VA_ARGS__}, \
                              (unsigned)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)))

static gp_format decode_format(gp_decoder *d)
{
    static const gp_format f[] = {GP_FP32, GP_BF16, GP_FP16};
    return f[gp_decoder_pick(d, 3)];
}

/* Where a distribution's scale goes. */
enum { SCALE_ORDINARY, SCALE_FP16_SUB, SCALE_FP16_MINNORMAL, SCALE_FP16_OVERFLOW, SCALE_FP32_UNDERFLOW,
       SCALE_ABSORB, SCALE_N };

/* Every field of a distribution (the loader's ranges: scale > 0, or >= 0 for weights;
 * sigma, alpha, shrink, outlier scale > 0; sign in [0, 1], sparsity in [0, 1)). */
static void decode_dist(gp_decoder *d, gp_dist *g, int is_grad)
{
    memset(g, 0, sizeof *g);
    g->kind = (gp_dist_kind)gp_decoder_pick(d, GP_DIST_VALUES); /* normal .. constant */
    g->sigma = 0.25 * gp_decoder_int(d, 1, 8);
    g->alpha = 0.5 * gp_decoder_int(d, 1, 12);
    g->neg_frac = 0.25 * gp_decoder_int(d, 0, 4);
    g->sparsity = 0.125 * gp_decoder_int(d, 0, 7);
    g->outlier_frac = 0.0;
    g->outlier_scale = 1000.0;
    g->shrink = ONE_OF(d, 1.0, 0.5, 0.9, 0.99, 2.0);
    if (!is_grad) {
        g->scale = gp_decoder_bool(d) ? 0.02 : gp_decoder_bool(d) ? 0.0 : pow2_in(d, -20, 4);
        return;
    }
    switch (gp_decoder_pick(d, SCALE_N)) {
    case SCALE_FP16_SUB: g->scale = pow2_in(d, -27, -22); break;        /* fp16 min subnormal 2^-24 */
    case SCALE_FP16_MINNORMAL: g->scale = pow2_in(d, -17, -12); break;  /* fp16 min normal 2^-14 */
    case SCALE_FP16_OVERFLOW: g->scale = pow2_in(d, 13, 17); break;     /* fp16 max 65504 < 2^16 */
    case SCALE_FP32_UNDERFLOW: g->scale = pow2_in(d, -136, -118); break; /* fp32/bf16 min normal 2^-126 */
    case SCALE_ABSORB: /* a wide spread inside one element's accumulation: small addends
                          meet an accumulator 2^9 and more times larger (bf16: 2^-9 |acc|) */
        g->scale = pow2_in(d, -12, 2);
        if (gp_decoder_bool(d)) {
            g->kind = GP_DIST_LOGNORMAL;
            g->sigma = (double)gp_decoder_int(d, 3, 6);
        } else {
            g->outlier_frac = ONE_OF(d, 0.01, 0.05, 0.125, 0.25);
            g->outlier_scale = pow2_in(d, 9, 16);
        }
        break;
    default: g->scale = pow2_in(d, -12, 4); break;
    }
}

/* An explicit-values distribution with rows of tokens[k] values (uninitialised), k < K;
 * the unused fields hold values the loader accepts. Returns 0, or -1 out of memory (what
 * was allocated stays in g for gp_scenario_free). */
static int values_dist(gp_dist *g, int K, const long *tokens)
{
    memset(g, 0, sizeof *g);
    g->kind = GP_DIST_VALUES;
    g->scale = g->sigma = g->shrink = 1.0;
    g->alpha = 3.0;
    g->neg_frac = 0.5;
    g->outlier_scale = 1000.0;
    g->ntok = calloc((size_t)K, sizeof *g->ntok);
    g->values = calloc((size_t)K, sizeof *g->values);
    if (!g->ntok || !g->values)
        return -1;
    g->nmb = (size_t)K; /* set before the rows so a failure frees what exists */
    for (int k = 0; k < K; k++) {
        if (!(g->values[k] = malloc((size_t)tokens[k] * sizeof(double))))
            return -1;
        g->ntok[k] = (size_t)tokens[k];
    }
    return 0;
}

/* A scaled recipe's defaults, as gp_scaled_parse starts from (saturating, two-level,
 * history 1024, round to nearest even). */
static void scaled_defaults(gp_scaled_cfg *q)
{
    memset(q, 0, sizeof *q);
    q->sat = q->two_level = 1;
    q->hist = 1024;
    q->mode = GP_RNE;
}

/* Explicit per-token values of one size-1 tensor, from gp_decode_value. */
static int decode_values(gp_decoder *d, gp_dist *g, int K, const long *tokens, gp_format gf,
                         gp_format af)
{
    if (values_dist(g, K, tokens))
        return -1;
    double ref = 0;
    for (int k = 0; k < K; k++)
        for (long t = 0; t < tokens[k]; t++) {
            double v = gp_decode_value(d, gf, af, ref, 1, NULL, NULL);
            g->values[k][t] = v;
            ref += v;
        }
    return 0;
}

int gp_decode_scenario(const uint8_t *data, size_t size, gp_scenario *s, gp_error *err)
{
    gp_decoder dd, *d = &dd;
    gp_decoder_init(d, data, size);
    gp_scenario_init(s);
    snprintf(s->name, sizeof s->name, "fuzz");
    s->seed = gp_decoder_range(d, 0, UINT32_MAX);

    s->precision.grad = decode_format(d);
    s->precision.accumulator = decode_format(d);
    s->precision.rounding = (gp_acc_rounding)gp_decoder_pick(d, gp_vocab_count(GP_VOCAB_ACC_ROUNDING));
    s->precision.ftz = gp_decoder_bool(d);
    s->reduction = (gp_reduction)gp_decoder_pick(d, 4);
    s->fullbatch = (gp_fullbatch)gp_decoder_pick(d, 2);

    int K = gp_decoder_int(d, 1, 64);
    s->batch.microbatches = K;
    s->batch.accumulation_steps = gp_decoder_bool(d) ? K : K + gp_decoder_int(d, 0, K);

    size_t nt = (size_t)gp_decoder_int(d, 1, 3);
    int is_values[3] = {0, 0, 0}, any_values = 0;
    for (size_t i = 0; i < nt; i++)
        any_values |= is_values[i] = gp_decoder_pick(d, 4) == 0; /* 1 in 4: explicit values */

    s->batch.tokens = malloc((size_t)K * sizeof *s->batch.tokens);
    s->tensors = calloc(nt, sizeof *s->tensors);
    if (!s->batch.tokens || !s->tensors)
        goto oom;
    s->ntensors = nt;
    for (int k = 0; k < K; k++) /* explicit values are one per token: keep them few */
        s->batch.tokens[k] = any_values ? gp_decoder_int(d, 1, 8) : gp_decoder_int(d, 1, 4096);

    for (size_t i = 0; i < nt; i++) {
        gp_tensor_spec *t = &s->tensors[i];
        snprintf(t->name, sizeof t->name, "t%zu", i);
        decode_dist(d, &t->weight, 0);
        if (is_values[i]) {
            t->size = 1;
            if (decode_values(d, &t->grad, K, s->batch.tokens, s->precision.grad, s->precision.accumulator))
                goto oom;
        } else {
            t->size = (size_t)gp_decoder_int(d, 1, 256);
            decode_dist(d, &t->grad, 1);
        }
    }

    s->loss_scale.mode = (gp_ls_mode)gp_decoder_pick(d, 3);
    s->loss_scale.init = gp_decoder_pick(d, 4) ? pow2_in(d, 0, 24) : pow2_in(d, -126, 127);
    s->loss_scale.growth = ONE_OF(d, 2.0, 1.5, 4.0, 1.0009765625);
    s->loss_scale.backoff = ONE_OF(d, 0.5, 0.25, 0.125, 0.9);
    s->loss_scale.interval = gp_decoder_bool(d) ? gp_decoder_int(d, 1, 8) : gp_decoder_int(d, 1, 2000);
    s->loss_scale.update = gp_decoder_pick(d, 4) != 0;
    s->loss_scale.unscale_before_clip = gp_decoder_pick(d, 4) != 0;

    s->clip.max_norm = gp_decoder_bool(d) ? 0.0 : pow2_in(d, -10, 4);

    s->steps = gp_decoder_int(d, 1, 8);
    s->schedule.kind = (gp_schedule_kind)gp_decoder_pick(d, 5);
    s->schedule.warmup = gp_decoder_int(d, 0, s->steps);
    s->schedule.total = s->steps + gp_decoder_int(d, 0, 8);
    s->schedule.step_size = gp_decoder_int(d, 1, 8);
    s->schedule.gamma = ONE_OF(d, 0.1, 0.5, 0.9);

    s->optimizer.lr = (double)gp_decoder_int(d, 1, 16) * pow2_in(d, -24, -4);
    s->schedule.min_lr = s->optimizer.lr * 0.25 * gp_decoder_int(d, 0, 2);
    s->optimizer.beta1 = ONE_OF(d, 0.9, 0.0, 0.5, 0.95, 0.99);
    s->optimizer.beta2 = ONE_OF(d, 0.999, 0.9, 0.95, 0.98, 0.99, 0.9999);
    s->optimizer.eps = ONE_OF(d, 1e-8, 1e-6, 1e-12, 1e-4, 0x1p-24);
    s->optimizer.weight_decay = ONE_OF(d, 0.01, 0.0, 0.1, 1e-4);
    s->optimizer.param = decode_format(d);
    s->optimizer.state = decode_format(d);
    /* the variants the loader accepts: Kahan compensation excludes a master copy and
     * stochastic rounding of the stored param */
    switch (gp_decoder_pick(d, 5)) {
    case 1: s->optimizer.master = 1; break;
    case 2: s->optimizer.kahan = 1; break;
    case 3: s->optimizer.stochastic = 1; break;
    case 4: s->optimizer.master = s->optimizer.stochastic = 1; break;
    default: break;
    }
    /* data parallelism, read last (older inputs decode as before: exhausted bytes read as
     * one process); only where the loader allows it: generated gradients, no Kahan */
    if (!any_values && s->precision.rounding != GP_ACC_KAHAN && gp_decoder_pick(d, 4) == 1) {
        int W = gp_decoder_int(d, 2, 8);
        s->distributed.world_size = W;
        s->distributed.collective = (gp_collective)gp_decoder_pick(d, 3);
        if ((s->distributed.reduce_set = gp_decoder_bool(d)) != 0)
            s->distributed.reduce_dtype = (gp_format)gp_decoder_pick(d, 3); /* fp32, bf16, fp16 */
        s->distributed.average = (gp_average)gp_decoder_pick(d, 3);
        s->distributed.predivide = s->distributed.average == GP_AVG_PRE ? (double)gp_decoder_int(d, 1, W) : 0;
        if (s->distributed.average == GP_AVG_PRE && s->distributed.collective == GP_COLL_REDUCE_SCATTER &&
            gp_decoder_bool(d)) { /* FSDP's default factor, as the loader gives it */
            int f = 1;
            while (W % f == 0 && W / f > f)
                f *= 2;
            s->distributed.predivide = f;
        }
        s->distributed.no_sync = gp_decoder_pick(d, 4) != 0;
        s->distributed.bucket_elements = gp_decoder_bool(d) ? gp_decoder_int(d, 1, 256) : 0;
        if (s->reduction == GP_RED_TOKEN_MEAN)
            s->distributed.normalize = (gp_token_norm)gp_decoder_pick(d, 2);
        if (gp_decoder_bool(d)) { /* per-rank token counts; rank 0's are the batch's */
            s->distributed.tokens = malloc((size_t)W * (size_t)K * sizeof *s->distributed.tokens);
            if (!s->distributed.tokens)
                goto oom;
            for (int r = 0; r < W; r++)
                for (int k = 0; k < K; k++)
                    s->distributed.tokens[(size_t)r * (size_t)K + (size_t)k] =
                        r == 0 ? s->batch.tokens[k] : gp_decoder_int(d, 1, 4096);
        }
    }
    /* fp8 gradients (e4m3, e5m2), read last as well: one generated scenario in eight where
     * bytes remain (explicit values were chosen for the format above: not those) */
    if (!any_values && gp_decoder_pick(d, 8) == 1)
        s->precision.grad = gp_decoder_bool(d) ? GP_FP8_E5M2 : GP_FP8_E4M3;
    /* fp8 accumulators (issue 27: every format a backend stores into; the unscale and the
     * clipping store into it too, and a collective without a reduce dtype adds in it), read
     * last: one scenario in eight where bytes remain */
    if (gp_decoder_pick(d, 8) == 1)
        s->precision.accumulator = gp_decoder_bool(d) ? GP_FP8_E5M2 : GP_FP8_E4M3;
    /* a scaled or block grad format (docs/formats.md), read last too, behind the two
     * bytes 0x5ca1 (so that the committed corpus, whose inputs may have bytes left here,
     * decodes as before; libFuzzer's comparison tracing finds the constant): every kind
     * the runner takes (MX with each element format and rule, nvfp4:single, fp8
     * blockwise 1x128 and delayed) and every option. The two bytes are only consumed when
     * they match, so that the low-bit state below reads the same bytes with or without it. */
    gp_decoder peek = *d;
    if (!any_values && gp_decoder_range(&peek, 0, 0xffff) == 0x5ca1) {
        *d = peek;
        gp_scaled_cfg *q = &s->precision.grad_sc;
        scaled_defaults(q);
        switch (gp_decoder_pick(d, 4)) {
        case 0:
            q->kind = GP_SC_MX;
            q->elem = (gp_elem)gp_decoder_pick(d, GP_NELEMS);
            q->rule = (gp_mx_rule)gp_decoder_pick(d, GP_NMXRULES);
            q->torchao = gp_decoder_bool(d);
            break;
        case 1:
            q->kind = GP_SC_NVFP4;
            q->elem = GP_EL_E2M1;
            q->two_level = 0;
            break;
        case 3:
            q->kind = GP_SC_DELAYED;
            q->elem = gp_decoder_bool(d) ? GP_EL_E5M2 : GP_EL_E4M3;
            q->hist = gp_decoder_int(d, 1, 4);
            q->most_recent = gp_decoder_bool(d);
            q->margin = gp_decoder_int(d, 0, 3);
            q->sat = !gp_decoder_bool(d);
            break;
        default:
            q->kind = GP_SC_BLOCK_1X128;
            q->elem = gp_decoder_bool(d) ? GP_EL_E5M2 : GP_EL_E4M3;
            q->pow2 = gp_decoder_bool(d);
            q->sat = !gp_decoder_bool(d);
            break;
        }
        q->mode = gp_decoder_bool(d) ? GP_STOCHASTIC : GP_RNE;
        s->precision.grad = GP_FP32;
        s->precision.grad_scaled = 1;
    }
    /* a low-bit optimizer state (optimizer.state: bnb8_blockwise, torchao_*; issue 25), read
     * last, behind the two bytes 0x10b1 (the committed corpus decodes as before) and where
     * the loader allows it (the plain variant, generated gradients); every tensor then one
     * or two of the state's blocks */
    if (!any_values && !s->optimizer.master && !s->optimizer.kahan && !s->optimizer.stochastic &&
        gp_decoder_range(d, 0, 0xffff) == 0x10b1) {
        s->optimizer.lowbit = 1 + (int)gp_decoder_pick(d, (unsigned)gp_vocab_count(GP_VOCAB_LOWBIT_STATE) - 1);
        s->optimizer.state = GP_FP32;
        size_t B = gp_lowbit_block((gp_lowbit)s->optimizer.lowbit);
        for (size_t t = 0; t < s->ntensors; t++)
            s->tensors[t].size = B * (size_t)gp_decoder_int(d, 1, 2);
    }
    /* a grad whose scales span a tensor (per-tensor current scaling with each element
     * format, 128x128 tiles, two-level nvfp4) and every option, read last, behind the two
     * bytes 0x5ca2 (consumed only when they match: the committed corpus decodes as
     * before); each tensor then gets a 2-D view `cols` (128 or 256 where they divide its
     * size, else one row; half of them become two rows of 128) */
    peek = *d;
    if (!any_values && gp_decoder_range(&peek, 0, 0xffff) == 0x5ca2) {
        *d = peek;
        gp_scaled_cfg *q = &s->precision.grad_sc;
        scaled_defaults(q);
        switch (gp_decoder_pick(d, 3)) {
        case 0: q->kind = GP_SC_CURRENT; break;
        case 1: q->kind = GP_SC_BLOCK_128X128; break;
        default: q->kind = GP_SC_NVFP4; break;
        }
        q->elem = q->kind == GP_SC_NVFP4 ? GP_EL_E2M1 : (gp_elem)gp_decoder_pick(d, GP_NELEMS);
        if (q->kind != GP_SC_NVFP4) {
            q->pow2 = gp_decoder_bool(d);
            q->sat = !gp_decoder_bool(d);
        }
        q->mode = gp_decoder_bool(d) ? GP_STOCHASTIC : GP_RNE;
        s->precision.grad = GP_FP32;
        s->precision.grad_scaled = 1;
        s->precision.acc_scaled = 0;
        for (size_t t = 0; t < s->ntensors; t++) {
            if (!s->optimizer.lowbit && gp_decoder_bool(d)) /* two rows of 128 */
                s->tensors[t].size = 256;
            size_t n = s->tensors[t].size, c = gp_decoder_bool(d) ? 256 : 128;
            s->tensors[t].cols = n % c == 0 ? c : n % 128 == 0 ? 128 : n;
        }
    }
    /* a scaled accumulator (fp8 per-tensor current scaling, each element format, :pow2,
     * :nosat), behind the two bytes 0x5ca3 (consumed only when they match), where the
     * loader takes it: a plain grad, round to nearest even, one process, no sample */
    peek = *d;
    if (!s->precision.grad_scaled && s->precision.rounding == GP_ACC_RNE && !gp_scenario_distributed(s) &&
        gp_decoder_range(&peek, 0, 0xffff) == 0x5ca3) {
        *d = peek;
        gp_scaled_cfg *q = &s->precision.acc_sc;
        scaled_defaults(q);
        q->kind = GP_SC_CURRENT;
        q->elem = (gp_elem)gp_decoder_pick(d, GP_NELEMS);
        q->pow2 = gp_decoder_bool(d);
        q->sat = !gp_decoder_bool(d);
        s->precision.accumulator = GP_FP32;
        s->precision.acc_scaled = 1;
    }
    return 0;
oom:
    gp_scenario_free(s);
    return gp_error_set(err, "gp_decode_scenario: out of memory");
}

/* ---- a small accumulation case ---- */

void gp_decode_accum(const uint8_t *data, size_t size, gp_accum_case *c)
{
    gp_decoder dd, *d = &dd;
    gp_decoder_init(d, data, size);
    memset(c, 0, sizeof *c);
    c->grad = decode_format(d);
    c->acc = decode_format(d);
    c->rounding = (gp_acc_rounding)gp_decoder_pick(d, gp_vocab_count(GP_VOCAB_ACC_ROUNDING));
    c->ftz = gp_decoder_bool(d);
    c->seed = gp_decoder_range(d, 0, UINT32_MAX);
    size_t describable = 1 + d->size / 3; /* an addend takes >= 3 bytes: region + payload */
    c->n = gp_decoder_int(d, 1, describable < GP_DECODE_MAX_ADDENDS ? (int)describable : GP_DECODE_MAX_ADDENDS);
    double ref = 0;
    for (int k = 0; k < c->n; k++) {
        gp_region r;
        gp_decode_value(d, c->grad, c->acc, ref, 0, &r, &c->bits[k]);
        c->region[k] = (uint8_t)r;
        double w = gp_fmt_to_f64(c->grad, c->bits[k]);
        if (isfinite(w))
            ref += w;
    }
}

uint32_t gp_decode_accum_rbits(const gp_accum_case *c, int k)
{
    return gp_rand_u32(c->seed, gp_stream_id(GP_STREAM_ACCUM_SR, 0, 0, (uint64_t)k), 0);
}

int gp_accum_case_scenario(const gp_accum_case *c, gp_scenario *s, gp_error *err)
{
    gp_scenario_init(s);
    for (int k = 0; k < c->n; k++)
        if (!isfinite(gp_fmt_to_f64(c->grad, c->bits[k])))
            return gp_error_set(err, "addend %d (bits 0x%x) is not finite: no scenario can hold it", k,
                                (unsigned)c->bits[k]);
    snprintf(s->name, sizeof s->name, "fuzz-accumulate");
    s->seed = c->seed;
    s->precision.grad = c->grad;
    s->precision.accumulator = c->acc;
    s->precision.rounding = c->rounding;
    s->precision.ftz = c->ftz;
    s->reduction = GP_RED_SUM;
    s->fullbatch = GP_FB_SUM;
    s->batch.microbatches = s->batch.accumulation_steps = c->n;
    s->batch.tokens = malloc((size_t)c->n * sizeof *s->batch.tokens);
    s->tensors = calloc(1, sizeof *s->tensors);
    if (!s->batch.tokens || !s->tensors)
        goto oom;
    s->ntensors = 1;
    gp_tensor_spec *t = &s->tensors[0];
    snprintf(t->name, sizeof t->name, "acc");
    t->size = 1;
    for (int k = 0; k < c->n; k++)
        s->batch.tokens[k] = 1;
    if (values_dist(&t->grad, c->n, s->batch.tokens))
        goto oom;
    for (int k = 0; k < c->n; k++)
        t->grad.values[k][0] = gp_fmt_to_f64(c->grad, c->bits[k]);
    t->weight = t->grad; /* the plain fields (weights are not used by accumulation) */
    t->weight.kind = GP_DIST_NORMAL;
    t->weight.scale = 0.02;
    t->weight.nmb = 0;
    t->weight.ntok = NULL;
    t->weight.values = NULL;
    return 0;
oom:
    gp_scenario_free(s);
    return gp_error_set(err, "gp_accum_case_scenario: out of memory");
}
