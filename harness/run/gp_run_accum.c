/* gp_run_accum.c — the runner's per-element hot path for one chunk: the stored gradients
 * of a micro-batch (rounded to the grad dtype, counted), their accumulation on the backend
 * (and the compared one), the attribution of every rounding to its mechanism, and the
 * unscale. See gp_runner.h for the model. */
#include "gp_run_internal.h"

/* 1/s for the loss scale s when s is a power of two whose reciprocal is a binary64 normal
 * (x * (1/s) and x / s are then the one correct rounding of the same real x * 2^-k, so
 * the results are equal), else 0: what gp_attrib_unscaled takes. */
static double scale_inverse(double s)
{
    int e;
    double m = frexp(s, &e);
    return m == 0.5 && e - 1 <= 1022 && e - 1 >= -1022 ? ldexp(1.0, 1 - e) : 0.0;
}


/* The binary exponent e of finite non-zero x with |x| in [2^(e-1), 2^e): frexp's, read
 * from the bits for normal x. */
static inline int exp_of(double x)
{
    int e = (int)(gp_f64_bits(x) >> 52 & 0x7ff);
    if (e == 0)
        frexp(x, &e);
    else
        e -= 1022;
    return e;
}

static void note_error(chunk *c, size_t i, gp_mechanism m, double delta)
{
    gp_run_err_add(c, m, i, delta * c->errw);
}

/* An unscaled backward output x (xw: its share of the final gradient) into the histogram
 * of magnitudes when finite; returns its term of the sum of squares ss_x: xw * xw, or +0
 * for a non-finite x (adding +0 leaves ss_x unchanged: it is never -0). The terms are
 * kept in chunk.sqx and summed by the attribution (attribute_fmt), in element order. */
static inline double note_output(double x, double xw, uint64_t *hist)
{
    if (isfinite(x)) {
        if (x != 0) {
            int b = exp_of(x) - 1 - GP_HIST_MIN_EXP; /* |x| in [2^(e-1), 2^e) */
            hist[1 + (b < 0 ? 0 : b >= GP_HIST_BINS ? GP_HIST_BINS - 1 : b)]++; /* copy 0 */
        }
        return xw * xw;
    }
    return 0.0;
}

/* A stored gradient's mechanism m and local error delta: counted (underflow, overflow)
 * and noted (note_error). */
static inline void note_stored(chunk *c, size_t i, gp_mechanism m, double delta)
{
    if (m == GP_MECH_UNDERFLOW) {
        c->st->underflow++;
        CNT_EL(c, CNT_UND, i);
    }
    if (m == GP_MECH_OVERFLOW) {
        c->st->overflow++;
        CNT_EL(c, CNT_OVF, i);
    }
    note_error(c, i, m, delta);
}

/* The stored gradients of elements [i0, i1) of one micro-batch, one at a time: round xs to
 * the grad dtype (RNE, as the backward writes it) with events, and count what happened;
 * the squares of the unscaled outputs into sqx (note_output). */
GP_HOT void store_range(chunk *c, size_t i0, size_t i1, gp_format gf)
{
    int ftz = c->sc->precision.ftz;
    gp_stats *st = c->st;
    double scale = c->s, errw = c->errw, inv = scale_inverse(scale);
    uint64_t *hist = c->hist;
    const uint32_t magmask = (1u << (gp_fmt_get(gf).width - 1)) - 1u, minnormal = 1u << (gp_fmt_get(gf).p - 1);
    for (size_t i = i0; i < i1; i++) {
        unsigned ev = 0;
        double xs = c->xs[i];
        uint32_t g = gp_fmt_from_f64_rne(gf, gp_f64_bits(xs), ftz, &ev);
        double x = gp_attrib_unscaled(xs, scale, inv), xw = x * errw; /* its share of the final gradient */
        c->partial[i] += xw;
        c->sqx[i] = note_output(x, xw, hist);
        gp_pack_set(gf, c->grad, i, g);
        double v = widen(gf, g);
        if (xs != 0) {
            st->rounded_nonzero++;
            CNT_EL(c, CNT_RND, i);
        }
        if (v != 0) {
            st->stored_nonzero++;
            CNT_EL(c, CNT_STORED, i);
            if ((g & magmask) < minnormal) {
                st->subnormal++;
                CNT_EL(c, CNT_SUB, i);
            }
        }
        gp_mechanism m = gp_classify_v(gf, xs, g, v, ev);
        note_stored(c, i, m, gp_attrib_unscaled(v - xs, scale, inv));
    }
}

#if GP_VECTOR_BLOCKS
/* note_output of the outputs xs[0..n) (n <= GP_ATTRIB_BLOCK) unscaled (gp_attrib_unscaled)
 * and weighted by errw: their squares into sq, their magnitudes into hist. The squares
 * and bins come from the vectorised gp_output_terms (the same values; a subnormal
 * output's bin from exp_of here); what is left is the counts. */
static void note_outputs(const double *xs, size_t n, double scale, double inv, double errw, double *sq,
                         uint64_t *hist)
{
    int32_t bin[GP_ATTRIB_BLOCK];
    if (gp_output_terms(xs, n, scale, inv, errw, GP_HIST_MIN_EXP, GP_HIST_BINS, sq, bin))
        for (size_t i = 0; i < n; i++) {
            double x = gp_attrib_unscaled(xs[i], scale, inv);
            if (x != 0 && fabs(x) < 0x1p-1022) {
                int b = exp_of(x) - 1 - GP_HIST_MIN_EXP;
                bin[i] = b < 0 ? 0 : b >= GP_HIST_BINS ? GP_HIST_BINS - 1 : b;
            }
        }
    /* element i in copy i % GP_HIST_WAYS, bin -1 (none) in its discard slot */
    uint64_t *h = hist + 1;
    size_t i = 0;
    for (; i + GP_HIST_WAYS <= n; i += GP_HIST_WAYS)
#pragma GCC unroll 8
        for (size_t w = 0; w < GP_HIST_WAYS; w++)
            h[(ptrdiff_t)(w * GP_HIST_SLOTS) + bin[i + w]]++; /* bin -1: h[-1], the discard */
    for (; i < n; i++)
        h[(ptrdiff_t)((i % GP_HIST_WAYS) * GP_HIST_SLOTS) + bin[i]]++;
}
#endif

/* The stored gradients of one micro-batch (store_range). Blocks whose outputs are zeros or
 * round to normal values (without FTZ or sampling, subnormal ones too) go through the
 * vectorised gp_store_block (the same results),
 * then the squares and the histogram (note_outputs) and the per-element counters. */
GP_HOT void store_grads_fmt(chunk *c, gp_format gf)
{
#if GP_VECTOR_BLOCKS
    gp_stats *st = c->st;
    double scale = c->s, errw = c->errw, inv = scale_inverse(scale);
    uint64_t *hist = c->hist;
    size_t wg = gp_fmt_get(gf).width / 8;
    /* subnormal results too, without FTZ and per-element counters (which count them) */
    int subnormals = !c->sc->precision.ftz && !c->cnt[0];
#endif
    for (size_t i0 = 0; i0 < c->n; i0 += GP_ATTRIB_BLOCK) {
        size_t n = c->n - i0 < GP_ATTRIB_BLOCK ? c->n - i0 : GP_ATTRIB_BLOCK;
#if GP_VECTOR_BLOCKS
        gp_store_counts cnt = {0, 0, 0, 0};
        if (gp_store_block(gf, subnormals, c->xs + i0, n, scale, inv, errw, (char *)c->grad + i0 * wg,
                           c->partial + i0, c->err[GP_MECH_ROUNDING] + i0, c->err[GP_MECH_UNDERFLOW] + i0, &cnt)) {
            st->rounded_nonzero += cnt.rounded_nonzero;
            st->stored_nonzero += cnt.stored_nonzero;
            st->subnormal += cnt.subnormal;
            st->underflow += cnt.underflow;
            note_outputs(c->xs + i0, n, scale, inv, errw, c->sqx + i0, hist);
            if (c->cnt[0]) /* zeros and normal values: store_range counts each non-zero output
                              as rounded and stored, none as subnormal */
                for (size_t i = i0; i < i0 + n; i++) {
                    uint32_t nz = c->xs[i] != 0;
                    c->cnt[CNT_RND][i] += nz;
                    c->cnt[CNT_STORED][i] += nz;
                }
            continue;
        }
#endif
        store_range(c, i0, i0 + n, gf);
    }
}

void gp_run_amax_note(chunk *c, int k)
{
    uint32_t *a = c->amax + (size_t)(c->mb_base + k) * c->namax;
    float x32[CHUNK];
    for (size_t i = 0; i < c->n; i++)
        x32[i] = (float)c->xs[i]; /* the fp32 gradient, as store_scaled makes it */
    gp_run_amax_fold(&a[0], gp_sc_amax(x32, (long)c->n, 1));
    if (c->sc->precision.grad_sc.kind != GP_SC_BLOCK_128X128)
        return;
    uint64_t w;
    for (size_t i = 0; i < c->n; i += (size_t)w) {
        uint64_t tile = gp_run_tile(c->sc, c->t, c->i0 + i, c->i0 + c->n, &w);
        gp_run_amax_fold(&a[1 + tile], gp_sc_amax(x32 + i, (long)w, 1));
    }
}

/* Quantize chunk c's fp32 gradient x of micro-batch k (into y, events into ev) with the
 * amaxes of the whole tensor the amax pass found: current scaling's multiplier from the
 * tensor's amax, a 128x128 tile's from the tile's, two-level NVFP4's tensor scale from the
 * tensor's; each row's piece of a block (at most 128 elements, NVFP4's blocks of 16) as
 * gp_scaled_quantize quantizes it (gp_scaled_row_block, the same global element indices):
 * the result equals the whole tensor's gp_scaled_quantize. Each piece's rounding cells too,
 * from the codes and scale its quantization made (gp_scaled_row_cells into lo, hi, f). */
static void quantize_spanning(chunk *c, int k, const float *x, float *y, unsigned *ev, uint64_t stream, float *lo,
                              float *hi, double *f)
{
    const gp_scaled_cfg *q = &c->sc->precision.grad_sc;
    const uint32_t *a = c->amax + (size_t)(c->mb_base + k) * c->namax;
    float ta = gp_f32_from_bits(a[0]), ts = 1.0f, s = 0.0f;
    if (q->kind == GP_SC_NVFP4)
        ts = gp_nvfp4_tensor_scale(ta);
    if (q->kind == GP_SC_CURRENT)
        s = gp_fp8_scale_current(q->elem, ta, q->pow2);
    uint64_t w, piece = q->kind == GP_SC_NVFP4 ? 16 : 128;
    for (size_t i = 0; i < c->n; i += (size_t)w) {
        uint64_t tile = gp_run_tile(c->sc, c->t, c->i0 + i, c->i0 + c->n, &w);
        if (q->kind == GP_SC_BLOCK_128X128)
            s = gp_fp8_scale_current(q->elem, gp_f32_from_bits(a[1 + tile]), q->pow2);
        for (uint64_t p = 0; p < w; p += piece) {
            uint64_t wp = w - p < piece ? w - p : piece;
            uint8_t codes[128];
            float sv = gp_scaled_row_block(q, x + i + p, (int)wp, ts, s, c->sc->seed, stream, c->i0 + i + p,
                                           y + i + p, codes, ev + i + p);
            gp_scaled_row_cells(q, x + i + p, (int)wp, codes, y + i + p, sv, ts, lo + i + p, hi + i + p, f + i + p);
        }
    }
}

/* A scaled accumulator (precision.acc_sc, per-tensor current scaling): x[0..n) re-quantized
 * in place with the multiplier of amax (fp32 bits of the whole running sum's amax), 128
 * elements per gp_scaled_row_block call as gp_scaled_quantize does; events into ev. */
static void requant_acc(const gp_scaled_cfg *q, float *x, size_t n, uint32_t amax, unsigned *ev)
{
    float s = gp_fp8_scale_current(q->elem, gp_f32_from_bits(amax), q->pow2);
    for (size_t i = 0; i < n; i += 128)
        gp_scaled_row_block(q, x + i, (int)(n - i < 128 ? n - i : 128), 1.0f, s, 0, 0, 0, x + i, NULL, ev + i);
}

void gp_run_acc_model(chunk *c, int k, float *sh, const uint32_t *amax, uint32_t *slot)
{
    unsigned ev[CHUNK];
    if (k == 0)
        memset(sh, 0, c->n * sizeof *sh); /* +0: every step starts from a zero accumulator */
    else
        requant_acc(&c->sc->precision.acc_sc, sh, c->n, amax[k - 1], ev);
    for (size_t i = 0; i < c->n; i++) {
        unsigned e = 0;
        uint32_t g = gp_fmt_from_f64_rne(c->gf, gp_f64_bits(c->xs[i]), c->sc->precision.ftz, &e); /* as stored */
        float gv = gp_f32_from_bits(gp_fmt_to_f32_bits(c->gf, g));
        sh[i] = gp_f32_from_bits(gp_accum_step(GP_FP32, GP_ACC_RNE, c->sc->precision.ftz, gp_f32_bits(sh[i]), NULL, gv,
                                               0, NULL));
    }
    gp_run_amax_fold(slot, gp_sc_amax(sh, (long)c->n, 1));
}

/* After the backend added micro-batch k into a scaled accumulator: re-quantize the chunk's
 * running sum (the whole tensor's amax: the amax pass's, or the chunk's own when it is
 * the whole tensor), events into ev. */
static void requant_chunk(chunk *c, int k, unsigned *ev)
{
    float a[CHUNK];
    memcpy(a, c->acc, c->n * sizeof *a);
    for (size_t i = 0; i < c->n; i++)
        ev[i] = 0;
    if (c->acc_amax) {
        requant_acc(&c->sc->precision.acc_sc, a, c->n, c->acc_amax[k], ev);
    } else {
        float m = gp_sc_amax(a, (long)c->n, 1);
        requant_acc(&c->sc->precision.acc_sc, a, c->n, gp_f32_bits(m) & 0x7fffffffu, ev);
    }
    memcpy(c->acc, a, c->n * sizeof *a);
}

/* The systematic bias of the stored gradients (grad_bias_score; its derivation:
 * gp_verdict.c, gp_verdict_derive). Element i's rounding in this micro-batch, stored y from
 * the exact scaled output x, in the cell whose two values are lo and hi (gp_scaled_row_cells:
 * Delta = |hi - lo|, f the position of the fp32 scaled value) adds, in final units (unscaled,
 * times errw): e = y - x to S_i, Delta^2 / 4 to V_i, and to D_i its deterministic departure
 * from an unbiased rounding onto the cell: |mu - x| with mu = lo + f (hi - lo), the mean of
 * such a rounding (the fp32 roundings of x, of x times the block's multiplier and of the
 * dequantization move mu off x; so does MX :torchao's dequantization at E8M0 code 0 by
 * 2^-127 after quantizing by 2^-126, a factor of 2, which this counts as no bias), plus 2^-32 Delta (stochastic rounding stores hi with
 * probability floor(f 2^32) / 2^32, within 2^-32 of f) and 2^-51 (|lo| + Delta + |e| + |x|)
 * (the binary64 roundings of mu, mu - x, y - x, of the unscaling, and the nudged x). A
 * rounding without a cell (past the element's range: saturation, :nosat's overflow) or of
 * a non-finite value adds nothing (its loss is the other mechanisms'). */
static void bias_note(chunk *c, const float *y, const float *lo, const float *hi, const double *f)
{
    double scale = c->s, inv = scale_inverse(scale), errw = c->errw;
    uint64_t n = 0;
    for (size_t i = 0; i < c->n; i++) {
        double x = c->xs[i], v = (double)y[i], l = (double)lo[i], d = (double)hi[i] - l;
        if (!isfinite(x) || !isfinite(v) || l != l)
            continue;
        double e = v - x, ad = fabs(d), mu = l + f[i] * d;
        double dep = fabs(mu - x) + 0x1p-32 * ad + 0x1p-51 * (fabs(l) + ad + fabs(e) + fabs(x));
        double du = gp_attrib_unscaled(ad, scale, inv) * errw;
        c->qb_s[i] += gp_attrib_unscaled(e, scale, inv) * errw;
        c->qb_v[i] += 0.25 * du * du;
        c->qb_d[i] += gp_attrib_unscaled(dep, scale, inv) * errw;
        n++;
    }
    c->st->qb_n += n;
}

/* The stored gradients of micro-batch k in a scaled or block format (precision.grad_sc):
 * the chunk's exact outputs rounded to fp32 (the backward's fp32 gradient), quantized
 * block by block (a row block never straddles chunks: CHUNK is a multiple of 128, 32 and
 * 16, chunks start at multiples of CHUNK, and a row's length is a multiple of 128 or the
 * tensor's size; scales spanning chunks come from the amax pass: quantize_spanning) and
 * stored as the fp32 values they dequantize to, which the backend accumulates. Mechanisms against the exact output: non-finite
 * outputs are non-finite; a non-finite result of a finite output (fp8 ":nosat" past its
 * max) and a saturated element (clamped to the element's max) are overflow; a non-zero
 * output stored as zero is underflow (below half the smallest subnormal of its block's
 * scale: the block's amax set the scale); the rest rounding. Stochastic rounding draws
 * gp_rand_u32(seed, gp_stream_id(GP_STREAM_SCALED_SR, t, step, micro-batch), element). */
static void store_scaled(chunk *c, int k)
{
    const gp_scaled_cfg *q = &c->sc->precision.grad_sc;
    gp_stats *st = c->st;
    double scale = c->s, errw = c->errw, inv = scale_inverse(scale);
    float x32[CHUNK], y32[CHUNK], lo[CHUNK], hi[CHUNK];
    double f[CHUNK];
    unsigned ev[CHUNK];
    for (size_t i = 0; i < c->n; i++) {
        x32[i] = (float)c->xs[i]; /* round to nearest even: the fp32 gradient */
        ev[i] = 0;
    }
    uint64_t stream = gp_stream_id(GP_STREAM_SCALED_SR, c->t, (uint64_t)c->step, (uint64_t)(c->mb_base + k));
    if (c->amax) { /* a scale spans chunks: from the amax pass */
        quantize_spanning(c, k, x32, y32, ev, stream, lo, hi, f);
    } else { /* scales local to the chunk, or the chunk is the whole tensor (rows x cols) */
        uint64_t cols = c->n == c->sc->tensors[c->t].size ? gp_run_cols(c->sc, c->t) : c->n;
        gp_scaled_quantize_cells(q, c->n / cols, cols, x32, y32, c->given, c->sc->seed, stream, c->i0, ev, lo, hi, f);
    }
    bias_note(c, y32, lo, hi, f);
    float amax = gp_sc_amax(x32, (long)c->n, 1);
    if (amax > st->grad_amax || amax != amax)
        st->grad_amax = amax;
    for (size_t i = 0; i < c->n; i++) {
        double xs = c->xs[i], v = (double)y32[i];
        double x = gp_attrib_unscaled(xs, scale, inv), xw = x * errw;
        c->partial[i] += xw;
        c->sqx[i] = note_output(x, xw, c->hist);
        gp_pack_set(GP_FP32, c->grad, i, gp_f32_bits(y32[i]));
        if (xs != 0) {
            st->rounded_nonzero++;
            CNT_EL(c, CNT_RND, i);
        }
        if (v != 0) {
            st->stored_nonzero++;
            CNT_EL(c, CNT_STORED, i);
        }
        gp_mechanism m = gp_attrib_scaled(xs, v, ev[i]);
        note_stored(c, i, m, gp_attrib_unscaled(v - xs, scale, inv));
        if (m == GP_MECH_SATURATION && q->kind == GP_SC_DELAYED)
            st->stale_sat++;
    }
    /* delayed scaling: the largest amax * scale of a saturating chunk (its scale, the scale its amax needed) */
    double need = gp_elem_max(q->elem) / amax;
    if (q->kind == GP_SC_DELAYED && amax == amax && (double)amax * c->given > gp_elem_max(q->elem) &&
        (double)c->given / need > st->stale_ratio) {
        st->stale_ratio = (double)c->given / need;
        st->stale_scale = c->given;
        st->stale_need = need;
    }
}

__attribute__((flatten, noinline)) void gp_run_store_grads(chunk *c, int k)
{
    if (c->sc->precision.grad_scaled) {
        store_scaled(c, k);
        return;
    }
    switch (c->gf) {
    case GP_BF16: store_grads_fmt(c, GP_BF16); break;
    case GP_FP16: store_grads_fmt(c, GP_FP16); break;
    case GP_FP32: store_grads_fmt(c, GP_FP32); break;
    default: store_grads_fmt(c, c->gf); break;
    }
}

/* A backend call returned rc != 0: 1 means "configuration not supported" (returns
 * GP_RUN_REFUSED, with the backend's reason when it gave one), anything else a failure (-1). */
int gp_run_backend_failure(const gp_backend *b, const char *what, int rc, gp_error *err)
{
    const char *fault = gp_backend_fault(b);
    if (fault) { /* its worker crashed, exited or hung: -3, like a time limit */
        gp_error_set(err, "%s", fault);
        return -3;
    }
    if (rc == 1)
        return gp_backend_refused(b, what, err);
    gp_error_set(err, "backend %s: %s failed (returned %d)", b->label, what, rc);
    return -1;
}

/* The accumulate arguments of chunk c for micro-batch k (acc/comp: which copy). */
static void accumulate_args(const chunk *c, void *acc, void *comp, int k, gp_plugin_accumulate_args *a)
{
    memset(a, 0, sizeof *a);
    a->struct_size = sizeof *a;
    a->grad_format = (int32_t)c->gf;
    a->acc_format = (int32_t)c->af;
    a->rounding = (int32_t)c->sc->precision.rounding;
    a->ftz = c->sc->precision.ftz;
    a->seed = c->sc->seed;
    a->stream = gp_stream_id(GP_STREAM_ACCUM_SR, c->t, (uint64_t)c->step, (uint64_t)(c->mb_base + k));
    a->first_index = c->i0;
    a->n = c->n;
    a->microbatch = (uint32_t)k; /* the index in this rank's window (the ABI's), not the global one */
    a->grad = c->grad;
    a->acc = acc;
    a->comp = comp;
}

/* Micro-batch k of the chunks G[0..ng) on backend b (cmp: its second copies acc2 and
 * comp2): one accumulate_many call when the backend has it and there are several
 * chunks (a CUDA backend: one launch for many tensors), else one call per chunk. */
static int accumulate_on(const gp_backend *b, int cmp, chunk *G, size_t ng, int k, gp_error *err)
{
    gp_plugin_accumulate_args a[GP_PLUGIN_MANY_MAX];
    for (size_t j = 0; j < ng; j++)
        accumulate_args(&G[j], cmp ? G[j].acc2 : G[j].acc, cmp ? G[j].comp2 : G[j].comp, k, &a[j]);
    int rc = 0;
    if (ng > 1 && b->ops->accumulate_many)
        rc = b->ops->accumulate_many(a, (uint32_t)ng);
    else
        for (size_t j = 0; j < ng && rc == 0; j++)
            rc = b->ops->accumulate(&a[j]);
    return rc ? gp_run_backend_failure(b, ng > 1 && b->ops->accumulate_many ? "accumulate_many" : "accumulate", rc,
                                       err) : 0;
}

/* Before a backend accumulates chunk c: keep the old accumulator (and give the
 * compared backend the same starting point). */
static void accumulate_before(chunk *c)
{
    size_t bytes = c->n * width_bytes(c->af);
    memcpy(c->old, c->acc, bytes);
    if (c->cmp) {
        memcpy(c->acc2, c->acc, bytes);
        if (c->comp)
            memcpy(c->comp2, c->comp, bytes);
    }
}

/* Does element i of the accumulator-format arrays a (the backend's) and b (the compared
 * backend's) differ (NaN-ness for NaNs)? Records the first disagreement of the run. */
static int diverged(chunk *c, const char *entry, const char *output, int k, size_t i, const void *a, const void *b)
{
    uint32_t x = gp_pack_get(c->af, a, i), y = gp_pack_get(c->af, b, i);
    if (gp_fmt_agree(c->af, x, y))
        return 0;
    gp_mismatch_note(c->first, entry, output, c->step + 1, k, c->t, (int64_t)(c->i0 + i),
                     gp_fmt_get(c->af).width, x, y);
    return 1;
}

/* The stochastic roundings of elements [i0, i0 + n) (n <= GP_ATTRIB_BLOCK) of chunk c,
 * accumulator format af, grad format gf: each a draw or not (gp_sr_draw_one, a block at a
 * time where gp_sr_draw_block has the case), then in element order the draws' terms added
 * to the three statistics (see gp_runner.h). *prev_u is u of the previous element of this
 * micro-batch (0: none, or no draw), updated. In the recorded micro-batch, u and
 * w = f(1 - f) go to the all-lags record (gp_sr_lag.h). */
static void sr_observe(chunk *c, size_t i0, size_t n, gp_format af, gp_format gf, double *prev_u)
{
    double u[GP_ATTRIB_BLOCK], w[GP_ATTRIB_BLOCK];
    uint8_t draw[GP_ATTRIB_BLOCK];
    int ftz = c->sc->precision.ftz;
    size_t wa = gp_fmt_get(af).width / 8, wg = gp_fmt_get(gf).width / 8;
    if (!GP_VECTOR_BLOCKS || !gp_sr_draw_block(af, gf, ftz, (const char *)c->old + i0 * wa,
                                               (const char *)c->acc + i0 * wa, (const char *)c->grad + i0 * wg, n,
                                               u, w, draw))
        for (size_t j = 0; j < n; j++) {
            uint32_t ob = gp_pack_get(af, c->old, i0 + j), nb = gp_pack_get(af, c->acc, i0 + j);
            draw[j] = (uint8_t)gp_sr_draw_one(af, widen(af, ob), widen(gf, gp_pack_get(gf, c->grad, i0 + j)), nb, ftz,
                                              &u[j], &w[j]);
        }
    gp_stats *st = c->st;
    double *sr_prev = c->sr_prev + i0, p = *prev_u;
    double s0 = st->sr_sum[0], s1 = st->sr_sum[1], s2 = st->sr_sum[2]; /* in locals: sr_prev may alias st */
    double v0 = st->sr_var[0], v1 = st->sr_var[1], v2 = st->sr_var[2];
    uint64_t draws = st->sr_draws;
    for (size_t j = 0; j < n; j++) {
        double uj = u[j];
        if (draw[j]) {
            double wj = w[j], q = sr_prev[j];
            draws++;
            s0 += uj;
            v0 += wj;
            s1 += p * uj;
            v1 += p * p * wj;
            s2 += q * uj;
            v2 += q * q * wj;
        }
        p = uj;
        sr_prev[j] = uj;
    }
    st->sr_sum[0] = s0;
    st->sr_sum[1] = s1;
    st->sr_sum[2] = s2;
    st->sr_var[0] = v0;
    st->sr_var[1] = v1;
    st->sr_var[2] = v2;
    st->sr_draws = draws;
    *prev_u = p;
    for (size_t j = 0; j < n; j++) /* the all-lags record (gp_sr_lag.h): no draw is 0, 0 */
        if (c->lag_rec && i0 + j < c->lag_lim) {
            c->lag_u[i0 + j] = u[j];
            c->lag_w[i0 + j] = w[j];
        }
}

/* The mechanism of an addition into a scaled accumulator (fp32 sum re-quantized: ev its
 * events, m what gp_attrib_one named from the fp32 values, *f its flags, sum ~ the exact
 * sum, nv the value kept): clamped to the element format's largest value: saturation; a
 * non-finite value of a finite sum (:nosat): overflow; a non-zero sum kept as zero
 * (below half the smallest subnormal at the tensor's scale; even from an old zero, which
 * is then not counted as absorbed): underflow; else m (absorption when the sum
 * re-quantized to the old non-zero value, rounding). */
static inline gp_mechanism acc_scaled_mech(unsigned ev, gp_mechanism m, unsigned *f, double sum, double nv)
{
    if (!isfinite(sum))
        return m;
    if (!isfinite(nv))
        return GP_MECH_OVERFLOW;
    if (ev & GP_EV_OVERFLOW)
        return GP_MECH_SATURATION;
    if (sum != 0 && nv == 0) {
        *f &= ~(unsigned)GP_AT_ABSORBED;
        return GP_MECH_UNDERFLOW;
    }
    return m;
}

/* The attribution of elements [i0, i1) of chunk c for micro-batch k, one at a time
 * (gp_attrib_one): accumulator format af, grad format gf (see store_grads_fmt for the
 * instances); adds the trajectory terms to *traj_err and *traj_ref in element order. */
GP_HOT void attribute_range(chunk *c, size_t i0, size_t i1, gp_format af, gp_format gf, double *traj_err,
                            double *traj_ref, double *ss_x)
{
    double scale = c->s, inv = scale_inverse(scale), errw = c->errw;
    gp_stats *st = c->st;
    double *const *err = c->err;
    const double *partial = c->partial;
    gp_run_rare_on(c); /* it reads all six */
    const void *old = c->old, *acc = c->acc, *grad = c->grad;
    const int counting = c->cnt[0] != NULL;
    for (size_t i = i0; i < i1; i++) {
        uint32_t ob = gp_pack_get(af, old, i), nb = gp_pack_get(af, acc, i), gb = gp_pack_get(gf, grad, i);
        double delta;
        unsigned f;
        gp_mechanism m = gp_attrib_one(af, gf, ob, nb, gb, scale, inv, &delta, &f);
        if (c->acc_ev) /* a scaled accumulator's re-quantization: its own saturation and underflow */
            m = acc_scaled_mech(c->acc_ev[i], m, &f, widen(af, ob) + widen(gf, gb), widen(af, nb));
        if (f & GP_AT_ROUNDED) {
            st->rounded_nonzero++;
            if (counting)
                c->cnt[CNT_RND][i]++;
        }
        if (f & GP_AT_ADD) {
            st->adds_nonzero++;
            if (counting)
                c->cnt[CNT_ADD][i]++;
        }
        if (f & GP_AT_ABSORBED) {
            st->absorbed++;
            if (counting)
                c->cnt[CNT_ABS][i]++;
        }
        if (m == GP_MECH_UNDERFLOW) {
            st->underflow++;
            if (counting)
                c->cnt[CNT_UND][i]++;
        }
        if (m == GP_MECH_OVERFLOW) {
            st->overflow++;
            if (counting)
                c->cnt[CNT_OVF][i]++;
        }
        double te = 0; /* classify never names GP_MECH_NORMALIZATION: m is one of these */
        for (int j = GP_MECH_UNDERFLOW; j < GP_MECH_GRAD_END; j++) {
            double x = err[j][i];
            if (j == (int)m) {
                gp_run_err_add(c, m, i, delta * errw); /* note_error */
                x = err[j][i];
            }
            te += x;
        }
        *traj_err += te * te;
        *traj_ref += partial[i] * partial[i];
        *ss_x += c->sqx[i];
    }
}

/* The attribution loop of accumulate_after for accumulator format af and grad format gf:
 * every element's rounding to its mechanism, and this micro-batch's trajectory sums.
 * trajectory: the accumulated error after this step is the sum of every local error so
 * far (unscaled); the reference is the exact partial sum. Element i's terms are added
 * once its local error of this micro-batch is noted: the order of the sums is the
 * element order. Blocks of finite values go through the vectorised gp_attrib_block (the
 * same results, per-element counters included); stochastic roundings are observed a
 * block at a time before (sr_observe: statistics of their own, in element order too). */
GP_HOT void attribute_fmt(chunk *c, int k, gp_format af, gp_format gf)
{
    double prev_u = 0;
    double traj_err = c->traj_err[k], traj_ref = c->traj_ref[k], ss_x = c->st->ss_x;
    int sr = c->sc->precision.rounding == GP_ACC_STOCHASTIC;
    c->lag_rec = c->lag_u && k == c->K - 1 && c->mb_base == 0; /* rank 0's last micro-batch */
#if GP_VECTOR_BLOCKS
    int fast = !c->acc_ev;
    uint32_t *el[GP_ATTRIB_NEL];
    double scale = c->s, inv = scale_inverse(scale), te2[GP_ATTRIB_BLOCK];
    size_t w = gp_fmt_get(af).width / 8, wg = gp_fmt_get(gf).width / 8;
#endif
    for (size_t i0 = 0; i0 < c->n; i0 += GP_ATTRIB_BLOCK) {
        size_t n = c->n - i0 < GP_ATTRIB_BLOCK ? c->n - i0 : GP_ATTRIB_BLOCK;
        if (sr) /* its own statistics, apart from the attribution's */
            sr_observe(c, i0, n, af, gf, &prev_u);
#if GP_VECTOR_BLOCKS
        gp_attrib_counts cnt = {0, 0, 0, 0};
        double *err[GP_MECH_GRAD_END];
        for (int m = 0; m < GP_MECH_GRAD_END; m++)
            err[m] = c->err[m] + i0;
        if (!c->rare) /* all +0: the kernel need not read them */
            err[GP_MECH_OVERFLOW] = err[GP_MECH_SATURATION] = err[GP_MECH_NONFINITE] = NULL;
        if (c->cnt[0]) { /* runs with sampling: the element's own counts */
            el[GP_ATTRIB_EL_ROUNDED] = c->cnt[CNT_RND] + i0;
            el[GP_ATTRIB_EL_ADD] = c->cnt[CNT_ADD] + i0;
            el[GP_ATTRIB_EL_ABSORBED] = c->cnt[CNT_ABS] + i0;
            el[GP_ATTRIB_EL_UNDERFLOW] = c->cnt[CNT_UND] + i0;
        }
        if (fast && gp_attrib_block(af, gf, (const char *)c->old + i0 * w, (const char *)c->acc + i0 * w,
                                    (const char *)c->grad + i0 * wg, n, scale, inv, c->errw, err, te2, &cnt,
                                    c->cnt[0] ? el : NULL)) {
            gp_stats *st = c->st;
            st->rounded_nonzero += cnt.rounded_nonzero;
            st->adds_nonzero += cnt.adds_nonzero;
            st->absorbed += cnt.absorbed;
            st->underflow += cnt.underflow;
            const double *partial = c->partial + i0, *sqx = c->sqx + i0;
            for (size_t i = 0; i < n; i++) {
                traj_err += te2[i];
                traj_ref += partial[i] * partial[i];
                ss_x += sqx[i];
            }
            continue;
        }
#endif
        attribute_range(c, i0, i0 + n, af, gf, &traj_err, &traj_ref, &ss_x);
    }
    c->traj_err[k] = traj_err;
    c->traj_ref[k] = traj_ref;
    c->st->ss_x = ss_x;
}

/* After: count disagreements with the compared backend, attribute every element's
 * rounding to its mechanism, add this micro-batch's trajectory sums. */
__attribute__((flatten, noinline)) static void accumulate_after(chunk *c, int k)
{
    if (c->cmp)
        for (size_t i = 0; i < c->n; i++) {
            int bad_acc = diverged(c, "accumulate", "acc", k, i, c->acc, c->acc2);
            int bad_comp = c->comp && diverged(c, "accumulate", "comp", k, i, c->comp, c->comp2);
            c->st->mismatches += (uint64_t)(bad_acc | bad_comp);
        }
    unsigned ev[CHUNK];
    if (c->sc->precision.acc_scaled) {
        requant_chunk(c, k, ev);
        c->acc_ev = ev;
        attribute_fmt(c, k, GP_FP32, c->gf);
        c->acc_ev = NULL;
        return;
    }
#define GP_PAIR(a, g) ((a) * GP_NFORMATS + (g))
    switch (GP_PAIR(c->af, c->gf)) {
    case GP_PAIR(GP_BF16, GP_BF16): attribute_fmt(c, k, GP_BF16, GP_BF16); break;
    case GP_PAIR(GP_FP32, GP_BF16): attribute_fmt(c, k, GP_FP32, GP_BF16); break;
    case GP_PAIR(GP_FP32, GP_FP16): attribute_fmt(c, k, GP_FP32, GP_FP16); break;
    case GP_PAIR(GP_FP32, GP_FP32): attribute_fmt(c, k, GP_FP32, GP_FP32); break;
    case GP_PAIR(GP_BF16, GP_FP32): attribute_fmt(c, k, GP_BF16, GP_FP32); break;
    case GP_PAIR(GP_FP16, GP_FP16): attribute_fmt(c, k, GP_FP16, GP_FP16); break;
    default: attribute_fmt(c, k, c->af, c->gf); break;
    }
#undef GP_PAIR
}

/* Micro-batch k of the chunks G[0..ng), whose gradients are stored: accumulate on the
 * backend(s), attribute. */
int gp_run_accumulate(chunk *G, size_t ng, int k, gp_error *err)
{
    for (size_t j = 0; j < ng; j++)
        accumulate_before(&G[j]);
    int rc = accumulate_on(G[0].b, 0, G, ng, k, err);
    if (rc == 0 && G[0].cmp)
        rc = accumulate_on(G[0].cmp, 1, G, ng, k, err);
    for (size_t j = 0; j < ng && rc == 0; j++)
        accumulate_after(&G[j], k);
    return rc;
}

/* Unscale on the backend (and the compared one); attribute; report found_inf. */
int gp_run_unscale(chunk *c, int *found_inf, gp_error *err)
{
    float inv = gp_scaler_inv((float)c->s);
    size_t bytes = c->n * width_bytes(c->af);
    gp_plugin_unscale_args u;
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    u.acc_format = (int32_t)c->af;
    u.ftz = c->sc->precision.ftz;
    u.inv_scale = inv;
    u.n = c->n;
    memcpy(c->old, c->acc, bytes);
    u.acc = c->acc;
    int rc = c->b->ops->unscale(&u);
    if (rc != 0)
        return gp_run_backend_failure(c->b, "unscale", rc, err);
    if (c->cmp) {
        gp_plugin_unscale_args u2 = u;
        memcpy(c->acc2, c->old, bytes);
        u2.acc = c->acc2;
        u2.found_inf = 0;
        if ((rc = c->cmp->ops->unscale(&u2)) != 0)
            return gp_run_backend_failure(c->cmp, "unscale", rc, err);
        if ((u.found_inf != 0) != (u2.found_inf != 0)) { /* the flag is an output too */
            c->st->mismatches++;
            gp_mismatch_note(c->first, "unscale", "found_inf", c->step + 1, -1, c->t, -1, 32,
                             (uint32_t)u.found_inf, (uint32_t)u2.found_inf);
        }
        for (size_t i = 0; i < c->n; i++)
            c->st->mismatches += (uint64_t)diverged(c, "unscale", "acc", -1, i, c->acc, c->acc2);
    }
    if (u.found_inf)
        *found_inf = 1;
#if GP_VECTOR_BLOCKS
    if (c->cnt[0] == NULL && /* finite values, no per-element counters: the same, vectorised */
        gp_unscale_block(c->af, c->old, c->acc, c->n, (double)inv, c->errw, c->err, &c->st->rounded_nonzero,
                         &c->st->underflow))
        return 0;
#endif
    for (size_t i = 0; i < c->n; i++) {
        double exact = widen(c->af, gp_pack_get(c->af, c->old, i)) * (double)inv; /* exact */
        uint32_t nb = gp_pack_get(c->af, c->acc, i);
        if (exact != 0) {
            c->st->rounded_nonzero++;
            CNT_EL(c, CNT_RND, i);
        }
        /* an overflow kept at max finite: saturation (gp_attrib.h) */
        gp_mechanism m = gp_attrib_saturated(c->af, nb, exact, 0) ? GP_MECH_SATURATION : classify(c->af, exact, nb, 0);
        if (m == GP_MECH_UNDERFLOW) {
            c->st->underflow++;
            CNT_EL(c, CNT_UND, i);
        }
        note_error(c, i, m, widen(c->af, nb) - exact);
    }
    return 0;
}
