/* gp_runner.c — see gp_runner.h for the model. */
#include "gp_runner.h"

#include <gmp.h>
#include <math.h>
#include <mpfr.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/arith/gp_accum.h"
#include "../../kernels/arith/gp_clip.h"
#include "../../kernels/arith/gp_scaler.h"
#include "../../kernels/arith/gp_schedule.h"
#include "../../kernels/cpu/gp_cpu_backend.h"
#include "../../reference/gp_exact.h"
#include "gp_attrib.h"
#include "gp_collective.h"
#include "../sources/gp_generate.h"
#include "../sources/gp_replay.h"

#define CHUNK GP_OPTIM_CHUNK /* elements processed together; results do not depend on it */

double gp_unit_roundoff(gp_format f)
{
    return ldexp(1.0, -gp_fmt_get(f).p);
}

double gp_format_floor(gp_format grad, gp_format acc, double ss_x, double ss_same, double ss_full)
{
    if (!(ss_full > 0))
        return 0;
    double ug = gp_unit_roundoff(grad), ua = gp_unit_roundoff(acc);
    return sqrt((ug * ug * ss_x + ua * ua * ss_same) / (3.0 * ss_full));
}

/* The format-aware part of the default thresholds: at least 1e-3 (the fp32 policy), and
 * twice the floor: a configuration may lose what one more rounding of the floor's size
 * costs (triangle inequality: two roundings, each of RMS at most the floor); beyond
 * that, the arithmetic between the storage roundings loses information of its own. */
#define GP_FLOOR_FACTOR 2.0
#define GP_BASE_REL_ERR 1e-3

int gp_default_threshold(const gp_result *r, gp_metric m, double *max)
{
    switch (m) {
    case GP_M_GRAD_REL_ERR_FULLBATCH: *max = fmax(GP_BASE_REL_ERR, GP_FLOOR_FACTOR * r->floor_grad); return 0;
    case GP_M_UNDERFLOW_FRAC: *max = 0.01; return 0;
    case GP_M_ABSORBED_FRAC: *max = 0.01; return 0;
    case GP_M_OVERFLOW_COUNT: *max = 0; return 0;
    case GP_M_NONFINITE_COUNT: *max = 0; return 0;
    case GP_M_STALE_UPDATE_FRAC: *max = 0.05; return 0;
    case GP_M_WEIGHT_REL_ERR: *max = fmax(GP_BASE_REL_ERR, GP_FLOOR_FACTOR * r->floor_weight); return 0;
    case GP_M_SR_BIAS_SCORE: /* the derived bounds of gp_runner.h: false alarm <= 1e-9 each */
    case GP_M_SR_ELEMENT_CORR_SCORE:
    case GP_M_SR_STEP_CORR_SCORE: *max = 1.0; return 0;
    case GP_M_TWIN_MISMATCH_COUNT: /* only where a twin was compared: bit for bit */
        if (r->metric[m] != r->metric[m])
            return -1;
        *max = 0;
        return 0;
    default: return -1;
    }
}

/* ---- per-tensor working state for one chunk of elements ---- */

/* The per-element event counters of runs with sampling (chunk.cnt). */
enum { CNT_ABS, CNT_ADD, CNT_UND, CNT_RND, CNT_OVF, CNT_STORED, CNT_SUB, NCNT };

typedef struct {
    const gp_scenario *sc;
    const gp_backend *b, *cmp;
    size_t t;           /* tensor index */
    int step;           /* 0-based optimizer iteration */
    double shrink;      /* gradient magnitude factor of this iteration: shrink^step */
    double s;           /* loss scale (1 without a scaler) */
    double rs;          /* replayed entries of this step carry the scale rs (1: unscaled;
                           loss_scale.replay_scales): the entry is x_k * rs */
    gp_format gf, af;
    size_t n;           /* elements in this chunk */
    uint64_t i0;        /* first element */
    double *xs;         /* [n] exact scaled backward output, nudged (see gp_f64_nudge) */
    void *grad, *acc, *old, *comp, *acc2, *comp2;
    double *err[GP_MECH_GRAD_END]; /* [n] signed local errors per mechanism, unscaled units */
    double *partial;       /* [n] running binary64 sum of the exact outputs (charts only) */
    double *sr_prev;       /* [n] u = up - f of the element's previous stochastic rounding in
                              this window (0: none) */
    /* generated tensors: [n] this micro-batch's per-token means m, the exact sums of m
     * and of n_k*m (binary64 + spill, reference/gp_exact.h), the final gradients */
    float *m, *noise;      /* noise: scratch of the signal + noise model */
    double *sum_m, *sum_nm, *gacc, *gsame;
    gp_fixacc *sp_m, *sp_nm;
    double *gfull;         /* [n] out: the exact full-batch gradient, rounded to binary64 */
    gp_stats *st;          /* this step's statistics of the tensor */
    double *traj_err, *traj_ref; /* [K] this step's trajectory sums */
    uint64_t *hist;        /* [GP_HIST_BINS] the thread's histogram of the exact outputs */
    gp_mismatch *first;    /* where the unit's first disagreement with cmp is noted */
    gp_replay *dump;       /* replayed gradients: the tensor's dump, else NULL */
    const uint64_t *idx;   /* sampled tensor: its chosen elements (element j of the run is
                              idx[j] of the dump), else NULL */
    uint32_t *cnt[NCNT];   /* runs with sampling: per element absorbed additions, additions
                              of a non-zero addend, underflows, roundings of a non-zero
                              value, overflows, non-zero stored gradients, subnormal ones
                              (the units of the fraction and count estimates); else NULL */
    double *el;            /* multi-step runs with sampling: [n][GP_NEST][2] this step's y, x of
                              each ratio estimate per element (summed over the steps before
                              they become units: tensor_state), else NULL */
    /* data-parallel runs (docs/distributed.md); single-process: errw 1, tok the batch's,
     * mb_base 0, tm_mul 1, tm_den N, D NULL */
    double errw;           /* weight of this rank's local errors in the final gradient (1/W) */
    const long *tok;       /* [K] this rank's token counts (this step's: batch.tokens per step) */
    int K;                 /* this step's micro-batches K_s */
    int mb_base;           /* r * K: the global index of the rank's first micro-batch */
    double tm_mul, tm_den; /* token_mean: x = tm_mul * S / tm_den (W and N, or 1 and N_r) */
    struct dist_pool *D;   /* the ranks' buffers, else NULL */
    size_t off;            /* this chunk's offset in the pool's per-element arrays */
} chunk;

/* Count an event of element i in the per-element counters (runs with sampling). */
#define CNT_EL(c, k, i)                 \
    do {                                \
        if ((c)->cnt[0])                \
            (c)->cnt[k][i]++;           \
    } while (0)

static size_t width_bytes(gp_format f)
{
    return (size_t)gp_fmt_get(f).width / 8;
}

static inline double widen(gp_format f, uint32_t bits)
{
    return gp_fmt_to_f64_fast(f, bits);
}

/* The per-element loops below are written once as always-inline bodies taking the formats
 * as arguments, and instantiated with constant formats for the common configurations
 * (the format tests fold away) plus once with the run's formats for the rest: the same
 * operations in the same order, so the same results. */
#ifdef GP_COVERAGE_BUILD /* tests/coverage.py: one out-of-line copy, whose branches count once over every instance */
#define GP_HOT static
#else
#define GP_HOT static inline __attribute__((always_inline))
#endif

/* The vectorised blocks of gp_attrib.h (1), or only the per-element definitions (0: the
 * coverage build, whose branch counts are the definitions', tests/coverage.py; the blocks
 * are checked equal to them by test_accum). */
#ifndef GP_VECTOR_BLOCKS
#define GP_VECTOR_BLOCKS 1
#endif

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

/* Which mechanism a rounding of the exact value `exact` to `bits` in format f falls
 * under, and whether it was a loss at all (gp_classify_v). */
static gp_mechanism classify(gp_format f, double exact, uint32_t bits, unsigned ev)
{
    return gp_classify_v(f, exact, bits, widen(f, bits), ev);
}

static void note_error(chunk *c, size_t i, gp_mechanism m, double delta)
{
    c->err[m][i] += delta * c->errw;
}

/* An unscaled backward output x (xw: its share of the final gradient) into the sum of
 * squares ss_x (returned) and the histogram of magnitudes, when finite. */
static inline double note_output(double x, double xw, double ss_x, uint64_t *hist)
{
    if (isfinite(x)) {
        ss_x += xw * xw;
        if (x != 0) {
            int b = exp_of(x) - 1 - GP_HIST_MIN_EXP; /* |x| in [2^(e-1), 2^e) */
            hist[b < 0 ? 0 : b >= GP_HIST_BINS ? GP_HIST_BINS - 1 : b]++;
        }
    }
    return ss_x;
}

/* The stored gradients of elements [i0, i1) of one micro-batch, one at a time: round xs to
 * the grad dtype (RNE, as the backward writes it) with events, and count what happened;
 * the squares of the unscaled outputs are added to ss_x in element order (returned). */
GP_HOT double store_range(chunk *c, size_t i0, size_t i1, gp_format gf, double ss_x)
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
        ss_x = note_output(x, xw, ss_x, hist);
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
        if (m == GP_MECH_UNDERFLOW) {
            st->underflow++;
            CNT_EL(c, CNT_UND, i);
        }
        if (m == GP_MECH_OVERFLOW) {
            st->overflow++;
            CNT_EL(c, CNT_OVF, i);
        }
        note_error(c, i, m, gp_attrib_unscaled(v - xs, scale, inv));
    }
    return ss_x;
}

#if GP_VECTOR_BLOCKS
/* note_output of the outputs xs[0..n) unscaled (gp_attrib_unscaled) and weighted by errw,
 * in order; returns ss_x. Not inlined: its sum stays in a register. */
__attribute__((noinline)) static double note_outputs(const double *xs, size_t n, double scale, double inv,
                                                     double errw, double ss_x, uint64_t *hist)
{
    if (inv != 0)
        for (size_t i = 0; i < n; i++)
            ss_x = note_output(xs[i] * inv, xs[i] * inv * errw, ss_x, hist);
    else
        for (size_t i = 0; i < n; i++)
            ss_x = note_output(xs[i] / scale, xs[i] / scale * errw, ss_x, hist);
    return ss_x;
}
#endif

/* The stored gradients of one micro-batch (store_range). Blocks whose outputs are zeros or
 * round to normal values go through the vectorised gp_store_block (the same results),
 * then the order-dependent sum and the histogram one element at a time. */
GP_HOT void store_grads_fmt(chunk *c, gp_format gf)
{
    double ss_x = c->st->ss_x;
#if GP_VECTOR_BLOCKS
    gp_stats *st = c->st;
    double scale = c->s, errw = c->errw, inv = scale_inverse(scale);
    uint64_t *hist = c->hist;
    size_t wg = gp_fmt_get(gf).width / 8;
#endif
    for (size_t i0 = 0; i0 < c->n; i0 += GP_ATTRIB_BLOCK) {
        size_t n = c->n - i0 < GP_ATTRIB_BLOCK ? c->n - i0 : GP_ATTRIB_BLOCK;
#if GP_VECTOR_BLOCKS
        uint64_t nonzero = 0;
        if (c->cnt[0] == NULL && gp_store_block(gf, c->xs + i0, n, scale, inv, errw, (char *)c->grad + i0 * wg,
                                                c->partial + i0, c->err[GP_MECH_ROUNDING] + i0, &nonzero)) {
            st->rounded_nonzero += nonzero;
            st->stored_nonzero += nonzero;
            ss_x = note_outputs(c->xs + i0, n, scale, inv, errw, ss_x, hist);
            continue;
        }
#endif
        ss_x = store_range(c, i0, i0 + n, gf, ss_x);
    }
    c->st->ss_x = ss_x;
}

__attribute__((flatten, noinline)) static void store_grads(chunk *c)
{
    switch (c->gf) {
    case GP_BF16: store_grads_fmt(c, GP_BF16); break;
    case GP_FP16: store_grads_fmt(c, GP_FP16); break;
    case GP_FP32: store_grads_fmt(c, GP_FP32); break;
    default: store_grads_fmt(c, c->gf); break;
    }
}

/* A backend call returned rc != 0: 1 means "configuration not supported" (returns
 * GP_RUN_REFUSED, with the backend's reason when it gave one), anything else a failure (-1). */
static int backend_failure(const gp_backend *b, const char *what, int rc, gp_error *err)
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
    return rc ? backend_failure(b, ng > 1 && b->ops->accumulate_many ? "accumulate_many" : "accumulate", rc, err) : 0;
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

/* Stochastic rounding of element i from old accumulator a (bits ob) plus addend g to nb
 * (see gp_runner.h): add the draw to the three statistics. *prev_u is u of the previous
 * element of this micro-batch (0: none), updated. */
static void sr_observe(chunk *c, size_t i, double a, double g, uint32_t nb, double *prev_u)
{
    gp_format af = c->af;
    double s = a + g, e = 0;
    if (af == GP_FP32) { /* the exact sum s + e */
        double bb = s - a;
        e = (a - (s - bb)) + (g - bb);
    } else {
        s = (double)((float)a + (float)g); /* fl32(acc + g), what is rounded to the narrow format */
    }
    double u = 0;
    if (isfinite(s) && !(c->sc->precision.ftz && fabs(s) < ldexp(1.0, gp_fmt_get(af).emin))) {
        uint32_t lo = gp_fmt_from_f64(af, gp_f64_nudge(s, e > 0 ? 1 : e < 0 ? -1 : 0), GP_RTZ, 0, 0, (unsigned *)0);
        uint32_t hi = lo + 1; /* one step away from zero: sign-magnitude encodings */
        double vlo = widen(af, lo), vhi = widen(af, hi);
        double frac = ((s - vlo) + e) / (vhi - vlo);
        if (isfinite(vhi) && frac > 0 && frac < 1 && (nb == lo || nb == hi)) {
            u = (double)(nb == hi) - frac;
            double w = frac * (1 - frac), p = *prev_u, q = c->sr_prev[i];
            c->st->sr_draws++;
            c->st->sr_sum[0] += u;
            c->st->sr_var[0] += w;
            c->st->sr_sum[1] += p * u;
            c->st->sr_var[1] += p * p * w;
            c->st->sr_sum[2] += q * u;
            c->st->sr_var[2] += q * q * w;
        }
    }
    *prev_u = u;
    c->sr_prev[i] = u;
}

/* The attribution of elements [i0, i1) of chunk c for micro-batch k, one at a time
 * (gp_attrib_one): accumulator format af, grad format gf (see store_grads_fmt for the
 * instances); adds the trajectory terms to *traj_err and *traj_ref in element order. */
GP_HOT void attribute_range(chunk *c, size_t i0, size_t i1, gp_format af, gp_format gf, double *prev_u,
                            double *traj_err, double *traj_ref)
{
    int sr = c->sc->precision.rounding == GP_ACC_STOCHASTIC;
    double scale = c->s, inv = scale_inverse(scale), errw = c->errw;
    gp_stats *st = c->st;
    double *const *err = c->err;
    const double *partial = c->partial;
    const void *old = c->old, *acc = c->acc, *grad = c->grad;
    const int counting = c->cnt[0] != NULL;
    for (size_t i = i0; i < i1; i++) {
        uint32_t ob = gp_pack_get(af, old, i), nb = gp_pack_get(af, acc, i), gb = gp_pack_get(gf, grad, i);
        if (sr)
            sr_observe(c, i, widen(af, ob), widen(gf, gb), nb, prev_u);
        double delta;
        unsigned f;
        gp_mechanism m = gp_attrib_one(af, gf, ob, nb, gb, scale, inv, &delta, &f);
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
                x += delta * errw; /* note_error */
                err[j][i] = x;
            }
            te += x;
        }
        *traj_err += te * te;
        *traj_ref += partial[i] * partial[i];
    }
}

/* The attribution loop of accumulate_after for accumulator format af and grad format gf:
 * every element's rounding to its mechanism, and this micro-batch's trajectory sums.
 * trajectory: the accumulated error after this step is the sum of every local error so
 * far (unscaled); the reference is the exact partial sum. Element i's terms are added
 * once its local error of this micro-batch is noted: the order of the sums is the
 * element order. Blocks of finite values without stochastic rounding or per-element
 * counters go through the vectorised gp_attrib_block (the same results). */
GP_HOT void attribute_fmt(chunk *c, int k, gp_format af, gp_format gf)
{
    double prev_u = 0;
    double traj_err = c->traj_err[k], traj_ref = c->traj_ref[k];
#if GP_VECTOR_BLOCKS
    int fast = c->sc->precision.rounding != GP_ACC_STOCHASTIC && c->cnt[0] == NULL;
    double scale = c->s, inv = scale_inverse(scale), te2[GP_ATTRIB_BLOCK];
    size_t w = gp_fmt_get(af).width / 8, wg = gp_fmt_get(gf).width / 8;
#endif
    for (size_t i0 = 0; i0 < c->n; i0 += GP_ATTRIB_BLOCK) {
        size_t n = c->n - i0 < GP_ATTRIB_BLOCK ? c->n - i0 : GP_ATTRIB_BLOCK;
#if GP_VECTOR_BLOCKS
        gp_attrib_counts cnt = {0, 0, 0, 0};
        double *err[GP_MECH_GRAD_END];
        for (int m = 0; m < GP_MECH_GRAD_END; m++)
            err[m] = c->err[m] + i0;
        if (fast && gp_attrib_block(af, gf, (const char *)c->old + i0 * w, (const char *)c->acc + i0 * w,
                                    (const char *)c->grad + i0 * wg, n, scale, inv, c->errw, err, te2, &cnt)) {
            gp_stats *st = c->st;
            st->rounded_nonzero += cnt.rounded_nonzero;
            st->adds_nonzero += cnt.adds_nonzero;
            st->absorbed += cnt.absorbed;
            st->underflow += cnt.underflow;
            const double *partial = c->partial + i0;
            for (size_t i = 0; i < n; i++) {
                traj_err += te2[i];
                traj_ref += partial[i] * partial[i];
            }
            continue;
        }
#endif
        attribute_range(c, i0, i0 + n, af, gf, &prev_u, &traj_err, &traj_ref);
    }
    c->traj_err[k] = traj_err;
    c->traj_ref[k] = traj_ref;
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
static int accumulate(chunk *G, size_t ng, int k, gp_error *err)
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
static int unscale(chunk *c, int *found_inf, gp_error *err)
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
        return backend_failure(c->b, "unscale", rc, err);
    if (c->cmp) {
        gp_plugin_unscale_args u2 = u;
        memcpy(c->acc2, c->old, bytes);
        u2.acc = c->acc2;
        u2.found_inf = 0;
        if ((rc = c->cmp->ops->unscale(&u2)) != 0)
            return backend_failure(c->cmp, "unscale", rc, err);
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
    for (size_t i = 0; i < c->n; i++) {
        double exact = widen(c->af, gp_pack_get(c->af, c->old, i)) * (double)inv; /* exact */
        uint32_t nb = gp_pack_get(c->af, c->acc, i);
        if (exact != 0) {
            c->st->rounded_nonzero++;
            CNT_EL(c, CNT_RND, i);
        }
        gp_mechanism m = classify(c->af, exact, nb, 0);
        if (m == GP_MECH_UNDERFLOW) {
            c->st->underflow++;
            CNT_EL(c, CNT_UND, i);
        }
        note_error(c, i, m, widen(c->af, nb) - exact);
    }
    return 0;
}

/* ---- exact backward outputs ---- */

/* Exact x = S/den as a nudged binary64 given S = n * m exactly (n integer, m fp32). */
GP_HOT double quotient(double m, double n, double den)
{
    double hi = n * m, lo = fma(n, m, -hi); /* n*m = hi + lo exactly */
    double q = hi / den;
    double r = fma(-q, den, hi) + lo;      /* sign of (S - q*den): exact sign */
    return gp_f64_nudge(q, r > 0 ? 1 : r < 0 ? -1 : 0);
}

/* xs[i] = quotient(m[i] * mul, nk, den) * s for i < n (an FMA clone: see GP_DD_CLONES). */
GP_DD_CLONES static void fill_xs(double *xs, const float *m, size_t n, double mul, double nk, double den, double s)
{
    for (size_t i = 0; i < n; i++)
        xs[i] = quotient((double)m[i] * mul, nk, den) * s;
}

/* The per-micro-batch divisor of S_k under the configured reduction. */
static double reduction_den(const gp_scenario *sc, long nk, double N)
{
    switch (sc->reduction) {
    case GP_RED_TOKEN_MEAN: return N;
    case GP_RED_MEAN: return (double)nk * sc->batch.accumulation_steps;
    case GP_RED_MEAN_NO_DIV: return (double)nk;
    default: return 1.0;
    }
}

/* ---- statistics of the final gradients ---- */

static void final_stats(chunk *c, const double *gacc, const double *gsame, const double *gfull)
{
    gp_stats *st = c->st;
    for (size_t i = 0; i < c->n; i++) {
        double a = gacc[i], s = gsame[i], f = gfull[i];
        if (!isfinite(a))
            st->nonfinite++;
        st->ss_full += f * f;
        st->ss_same += s * s;
        st->ss_acc += a * a;
        st->ss_acc_full += (a - f) * (a - f);
        st->ss_acc_same += (a - s) * (a - s);
        st->ss_same_full += (s - f) * (s - f);
        double u = fabs(a - s) / gp_f32_ulp(s);
        if (u > st->max_ulp || u != u)
            st->max_ulp = u;
        for (int m = GP_MECH_UNDERFLOW; m < GP_MECH_GRAD_END; m++)
            st->ss_mech[m] += c->err[m][i] * c->err[m][i];
        if (c->cnt[0]) { /* this element's y, x of each ratio estimate */
            double yx[GP_NEST][2] = {{(a - f) * (a - f), f * f}, {(a - s) * (a - s), s * s},
                                     {(s - f) * (s - f), f * f}, {a * a, f * f},
                                     {c->cnt[CNT_ABS][i], c->cnt[CNT_ADD][i]},
                                     {c->cnt[CNT_UND][i], c->cnt[CNT_RND][i]},
                                     {c->cnt[CNT_SUB][i], c->cnt[CNT_STORED][i]},
                                     {c->cnt[CNT_OVF][i], 1},
                                     {!isfinite(a), 1}};
            if (c->el) /* several steps: the element's totals over them are its unit */
                for (int e = 0; e < GP_NEST; e++) {
                    c->el[(i * GP_NEST + (size_t)e) * 2] += yx[e][0];
                    c->el[(i * GP_NEST + (size_t)e) * 2 + 1] += yx[e][1];
                }
            else /* one step: this element is one unit */
                for (int e = 0; e < GP_NEST; e++)
                    gp_ratio_add(&st->est[e], yx[e][0], yx[e][1]);
        }
    }
}

/* ---- the two ways of producing exact backward outputs ---- */

/* Data-parallel buffers for a window of CHUNK elements (docs/distributed.md). */
struct dist_pool {
    int W;
    gp_format rd;             /* the reduce dtype */
    size_t ab, rb;            /* bytes per element: accumulator, reduce dtype */
    char *racc;               /* [W][CHUNK] each rank's local accumulator (accumulator format) */
    char *val;                /* [W][CHUNK] each rank's value in the reduce dtype */
    char *part, *add, *pold;  /* [CHUNK] the travelling partial sum, the addend, its old value */
    double *cerr[GP_MECH_GRAD_END]; /* [CHUNK] the collective's local errors, final units */
    double *sh, *sl;          /* [CHUNK] normalize: rank: g_same as a double-double sum */
};

static void dist_same_add(chunk *c)
{
    if (c->sc->distributed.normalize != GP_NORM_RANK || c->sc->reduction != GP_RED_TOKEN_MEAN)
        return;
    double *sh = c->D->sh + c->off, *sl = c->D->sl + c->off;
    for (size_t i = 0; i < c->n; i++) { /* + x / W, x = S / N_r (binary64, nudged) */
        double x = c->xs[i] / c->s * c->errw, hi = sh[i] + x, bb = hi - sh[i];
        sl[i] += (sh[i] - (hi - bb)) + (x - bb);
        sh[i] = hi;
    }
}

/* Generated tensor, micro-batch k: per-token-mean gradients m from the distribution,
 * the exact scaled outputs, the exact sums of m and n_k*m, the stored gradients. */
static int replay_microbatch(chunk *c, double N, int k, gp_error *err);

static int generate_microbatch(chunk *c, double N, int k, gp_error *err)
{
    const gp_scenario *sc = c->sc;
    long nk = c->tok[k];
    if (c->dump)
        return replay_microbatch(c, N, k, err);
    double den = sc->reduction == GP_RED_TOKEN_MEAN ? c->tm_den : reduction_den(sc, nk, N);
    double mul = sc->reduction == GP_RED_TOKEN_MEAN ? c->tm_mul : 1.0; /* W or 1: m * mul exact */
    uint64_t g = (uint64_t)(c->mb_base + k); /* the global micro-batch: rank 0's are the single process's */
    const gp_dist *gd = &sc->tensors[c->t].grad;
    const uint64_t *at = c->idx ? c->idx + c->i0 : NULL; /* sampled: element j is at[j] */
    uint64_t stream = gp_stream_id(GP_STREAM_GRAD, c->t, (uint64_t)c->step, g);
    if (gd->token_snr > 0)
        gp_generate_signal_noise(gd, sc->seed, c->t, (uint64_t)c->step, g, nk, c->i0, at, c->n, c->m, c->noise);
    else if (at)
        gp_generate_at(gd, sc->seed, stream, at, c->n, c->m);
    else
        gp_generate(gd, sc->seed, stream, c->i0, c->n, c->m);
    if (c->shrink != 1.0) /* the shrunk value, made fp32, is the exact input */
        for (size_t i = 0; i < c->n; i++)
            c->m[i] = (float)((double)c->m[i] * c->shrink);
    fill_xs(c->xs, c->m, c->n, mul, (double)nk, den, c->s);
    if (c->D)
        dist_same_add(c);
    gp_exactsum_add(c->sum_m, c->sp_m, c->m, 1, c->n);
    gp_exactsum_add(c->sum_nm, c->sp_nm, c->m, (uint32_t)nk, c->n);
    store_grads(c);
    return 0;
}

/* The integer w_k with S_k = w_k x_k: how the reduction made the entry x_k from micro-batch
 * k's per-token gradient sum S_k (docs/replay.md); below 2^31 (the loader checks). */
static uint32_t replay_weight(const gp_scenario *sc, long nk, double N)
{
    switch (sc->reduction) {
    case GP_RED_TOKEN_MEAN: return (uint32_t)N;
    case GP_RED_MEAN: return (uint32_t)(nk * sc->batch.accumulation_steps);
    case GP_RED_MEAN_NO_DIV: return (uint32_t)nk;
    default: return 1;
    }
}

/* Replayed tensor, micro-batch k: the dump's entry x_k (already in the grad dtype, as the
 * backward wrote it), times the loss scale; the exact sums of x_k and of w_k x_k = S_k. */
static int replay_microbatch(chunk *c, double N, int k, gp_error *err)
{
    const gp_scenario *sc = c->sc;
    const gp_tensor_spec *ts = &sc->tensors[c->t];
    char name[GP_NAME_MAX * 4];
    gp_replay_entry e;
    gp_error re = {""};
    snprintf(name, sizeof name, "%s/step%d/mb%d", ts->grad.replay_key, c->step, k);
    if (gp_replay_entry_get(c->dump, name, &e, &re) != 0) {
        gp_error_set(err, "tensor '%s': %s", ts->name, re.msg);
        return -3; /* the loader saw it: the dump changed since (a fault, as a read's) */
    }
    if (e.fmt != c->gf || (c->idx ? ts->size > e.n : c->i0 + c->n > e.n)) {
        gp_replay_entry_release(&e);
        gp_error_set(err, "tensor '%s': %s: entry '%s' changed since the scenario was loaded", ts->name,
                     gp_replay_path(c->dump), name);
        return -3;
    }
    int rd = c->idx ? gp_replay_read_idx(&e, c->idx + c->i0, c->n, c->m, &re) : gp_replay_read(&e, c->i0, c->n, c->m, &re);
    gp_replay_entry_release(&e);
    if (rd != 0) { /* truncated or changed while read */
        gp_error_set(err, "tensor '%s': %s", ts->name, re.msg);
        return -3;
    }
    double f = c->s / c->rs; /* exact: s and rs are powers of two */
    for (size_t i = 0; i < c->n; i++) {
        c->xs[i] = (double)c->m[i] * f; /* exact: x_k s = entry s / rs */
        c->st->replay_nonfinite += !isfinite(c->xs[i]); /* the exact sums cannot hold it */
    }
    gp_exactsum_add(c->sum_m, c->sp_m, c->m, 1, c->n);
    gp_exactsum_add(c->sum_nm, c->sp_nm, c->m, replay_weight(sc, c->tok[k], N), c->n);
    store_grads(c);
    return 0;
}

/* Generated tensor, after the window: unscale, then the final gradients (accumulated,
 * exact same-op-sequence, exact full-batch) and their statistics. */
static int generated_final(chunk *c, double N, int *found_inf, gp_error *err)
{
    const gp_scenario *sc = c->sc;
    int rc;
    if (sc->loss_scale.mode != GP_LS_NONE && (rc = unscale(c, found_inf, err)) != 0)
        return rc;
    size_t n = c->n;
    uint64_t Nn = (uint64_t)N, A = (uint64_t)sc->batch.accumulation_steps;
    for (size_t i = 0; i < n; i++)
        c->gacc[i] = widen(c->af, gp_pack_get(c->af, c->acc, i));
    gp_exactsum_div_n(c->gfull, c->sum_nm, c->sp_nm, sc->fullbatch == GP_FB_MEAN ? Nn : 1, n);
    if (c->dump) { /* the configuration's own formula: the entries' sum (the exact sums
                      hold the entries as stored: unscale exactly, rs a power of two) */
        gp_exactsum_div_n(c->gsame, c->sum_m, c->sp_m, 1, n);
        for (size_t i = 0; i < n; i++) {
            c->gsame[i] /= c->rs;
            c->gfull[i] /= c->rs;
        }
    } else {
        uint64_t W = c->D ? (uint64_t)c->D->W : 1; /* the collective's average: 1/W of the ranks' sum */
        switch (sc->reduction) {
        case GP_RED_TOKEN_MEAN:
            if (c->D && sc->distributed.normalize == GP_NORM_RANK)
                for (size_t i = 0; i < n; i++)
                    c->gsame[i] = c->D->sh[c->off + i] + c->D->sl[c->off + i];
            else /* global: (1/W) sum of W S / N */
                gp_exactsum_div_n(c->gsame, c->sum_nm, c->sp_nm, Nn, n);
            break;
        case GP_RED_MEAN: gp_exactsum_div_n(c->gsame, c->sum_m, c->sp_m, A * W, n); break;
        case GP_RED_MEAN_NO_DIV: gp_exactsum_div_n(c->gsame, c->sum_m, c->sp_m, W, n); break;
        default: gp_exactsum_div_n(c->gsame, c->sum_nm, c->sp_nm, W, n); break;
        }
    }
    final_stats(c, c->gacc, c->gsame, c->gfull);
    return 0;
}

/* Generated tensors: the chunks G[0..ng) (of different tensors) micro-batch by
 * micro-batch, all of them in one backend call per micro-batch. */
static int run_distributed(chunk *G, size_t ng, double N, int *found_inf, gp_error *err);

static int run_generated(chunk *G, size_t ng, double N, int *found_inf, gp_error *err)
{
    if (G[0].D)
        return run_distributed(G, ng, N, found_inf, err);
    int rc = 0;
    for (int k = 0; k < G[0].K && rc == 0; k++) {
        for (size_t j = 0; j < ng && rc == 0; j++)
            rc = generate_microbatch(&G[j], N, k, err);
        if (rc == 0)
            rc = accumulate(G, ng, k, err);
    }
    for (size_t j = 0; j < ng && rc == 0; j++)
        rc = generated_final(&G[j], N, found_inf, err);
    return rc;
}

/* ---- the simulated collective (docs/distributed.md, harness/run/gp_collective.h) ---- */

static char *dist_rank(char *base, size_t width, int r, size_t off)
{
    return base + ((size_t)r * CHUNK + off) * width;
}

/* One rounding of the collective (a cast or a division) of the exact value `exact` to
 * bits in format f: counted, attributed to its mechanism with weight w (its share of the
 * final, unscaled gradient), in the run's split and in the collective's own. */
static void coll_round(chunk *c, size_t i, gp_format f, double exact, double lo, uint32_t bits, unsigned ev,
                       double w)
{
    if (!isfinite(exact)) /* already non-finite: counted where it arose */
        return;
    double v = widen(f, bits);
    if (exact != 0) {
        c->st->rounded_nonzero++;
        c->st->coll.roundings++;
        CNT_EL(c, CNT_RND, i);
    }
    gp_mechanism m = classify(f, gp_f64_nudge(exact, lo > 0 ? 1 : lo < 0 ? -1 : 0), bits, ev);
    if (m == GP_MECH_UNDERFLOW) {
        c->st->underflow++;
        c->st->coll.underflow++;
        CNT_EL(c, CNT_UND, i);
    }
    if (m == GP_MECH_OVERFLOW) {
        c->st->overflow++;
        c->st->coll.overflow++;
        CNT_EL(c, CNT_OVF, i);
    }
    double d = ((v - exact) - lo) * w; /* exact: the value rounded, lo: what the binary64 exact missed */
    if (!isfinite(v))
        d = v; /* an overflow loses everything */
    c->err[m][i] += d;
    c->D->cerr[m][c->off + i] += d;
}

/* One hop: X[i] <- X[i] + Y[i] in the reduce dtype on the backend (its accumulate entry,
 * RNE), every element observed as accumulate_after does; w: the weight of its errors. */
static int coll_hop(chunk *c, void *X, const void *Y, int hop, double w, gp_error *err)
{
    struct dist_pool *D = c->D;
    gp_format rd = D->rd;
    memcpy(D->pold + c->off * D->rb, X, c->n * D->rb);
    gp_plugin_accumulate_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.grad_format = (int32_t)rd;
    a.acc_format = (int32_t)rd;
    a.rounding = GP_PLUGIN_RNE;
    a.ftz = c->sc->precision.ftz;
    a.seed = c->sc->seed;
    a.stream = gp_stream_id(GP_STREAM_ACCUM_SR, c->t, (uint64_t)c->step, GP_SIGNAL_MICROBATCH - 1u);
    a.first_index = c->i0;
    a.n = c->n;
    a.microbatch = (uint32_t)hop;
    a.grad = Y;
    a.acc = X;
    int rc = c->b->ops->accumulate(&a);
    if (rc != 0)
        return backend_failure(c->b, "accumulate (collective)", rc, err);
    c->st->coll.hops += c->n;
    const char *old = D->pold + c->off * D->rb;
    for (size_t i = 0; i < c->n; i++) {
        uint32_t ob = gp_pack_get(rd, old, i), nb = gp_pack_get(rd, X, i);
        double av = widen(rd, ob), g = widen(rd, gp_pack_get(rd, Y, i)), nv = widen(rd, nb);
        double s = av + g, bb = s - av, e = (av - (s - bb)) + (g - bb); /* exact sum s + e */
        if (!isfinite(av) || !isfinite(g))
            continue; /* counted where it became non-finite */
        if (!isfinite(s))
            e = 0;
        if (g != 0) {
            c->st->adds_nonzero++;
            c->st->coll.adds_nonzero++;
            CNT_EL(c, CNT_ADD, i);
        }
        if (g != 0 && nb == ob) {
            double d = ((nv - s) - e) * w;
            if (s != 0 || e != 0) {
                c->st->rounded_nonzero++;
                c->st->coll.roundings++;
                CNT_EL(c, CNT_RND, i);
            }
            c->st->absorbed++;
            c->st->coll.absorbed++;
            CNT_EL(c, CNT_ABS, i);
            c->err[GP_MECH_ABSORPTION][i] += d;
            D->cerr[GP_MECH_ABSORPTION][c->off + i] += d;
            continue;
        }
        coll_round(c, i, rd, s, e, nb, isinf(nv) && isfinite(s) ? GP_EV_OVERFLOW : 0, w);
    }
    return 0;
}

/* The collective over the ranks' local accumulators of chunk c (D->racc), result stored
 * into c->acc: cast to the reduce dtype, divide by the pre factor, reduce in the
 * collective's order (ring / reduce_scatter: gp_coll_ring_rank per element's chunk;
 * tree: level l adds rank r + 2^l into rank r for r a multiple of 2^(l+1)), divide by
 * the post factor, cast back to the accumulator dtype. */
static int collective(chunk *c, gp_error *err)
{
    struct dist_pool *D = c->D;
    const gp_scenario *sc = c->sc;
    int W = D->W, ftz = sc->precision.ftz, op = sc->distributed.average == GP_AVG_OP, rc = 0;
    gp_format rd = D->rd, af = c->af;
    double pre, post, ws = 1.0 / c->s;
    gp_coll_factors(sc, &pre, &post);
    for (int r = 0; r < W; r++) {
        const char *ra = dist_rank(D->racc, D->ab, r, c->off);
        char *rv = dist_rank(D->val, D->rb, r, c->off);
        for (size_t i = 0; i < c->n; i++) {
            double a = widen(af, gp_pack_get(af, ra, i));
            unsigned ev = 0;
            uint32_t v = gp_fmt_from_f64(rd, a, GP_RNE, 0, ftz, &ev);
            if (rd != af)
                coll_round(c, i, rd, a, 0, v, ev, ws / (double)W);
            if (pre != 1.0) {
                double vv = widen(rd, v);
                ev = 0;
                v = gp_coll_divide(rd, vv, pre, op, ftz, &ev);
                coll_round(c, i, rd, vv / pre, 0, v, ev, ws / post);
            }
            gp_pack_set(rd, rv, i, v);
        }
    }
    char *part = D->part + c->off * D->rb, *add = D->add + c->off * D->rb;
    if (sc->distributed.collective == GP_COLL_TREE) {
        for (int st = 1; st < W && rc == 0; st *= 2)
            for (int r = 0; r + st < W && rc == 0; r += 2 * st)
                rc = coll_hop(c, dist_rank(D->val, D->rb, r, c->off), dist_rank(D->val, D->rb, r + st, c->off),
                              r + st, ws / post, err);
        memcpy(part, dist_rank(D->val, D->rb, 0, c->off), c->n * D->rb);
    } else {
        uint64_t size = sc->tensors[c->t].size, B = (uint64_t)sc->distributed.bucket_elements;
        for (int h = 0; h < W && rc == 0; h++) {
            char *dst = h == 0 ? part : add;
            for (size_t i = 0; i < c->n; i++) {
                uint64_t pos, blen = gp_coll_bucket(c->i0 + i, size, B, &pos);
                int q = gp_coll_chunk(pos, blen, W);
                const char *src = dist_rank(D->val, D->rb, gp_coll_ring_rank(W, q, h), c->off);
                gp_pack_set(rd, dst, i, gp_pack_get(rd, src, i));
            }
            if (h > 0)
                rc = coll_hop(c, part, add, h, ws / post, err);
        }
    }
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < c->n; i++) {
        uint32_t v = gp_pack_get(rd, part, i);
        unsigned ev = 0;
        if (post != 1.0) {
            double p = widen(rd, v);
            v = gp_coll_divide(rd, p, post, 0, ftz, &ev);
            coll_round(c, i, rd, p / post, 0, v, ev, ws);
        }
        double p = widen(rd, v);
        ev = 0;
        uint32_t nb = gp_fmt_from_f64(af, p, GP_RNE, 0, ftz, &ev);
        if (af != rd)
            coll_round(c, i, af, p, 0, nb, ev, ws);
        gp_pack_set(af, c->acc, i, nb);
    }
    return 0;
}

/* Rank r of chunk c: its local accumulator starts as the chunk's gradient (0 in a window
 * with no_sync; the previous collective's result without it), its tokens, micro-batches
 * and normalization. */
static void rank_begin(chunk *c, void *real, double N, int r)
{
    struct dist_pool *D = c->D;
    const gp_scenario *sc = c->sc;
    int K = sc->batch.microbatches, W = D->W;
    c->acc = dist_rank(D->racc, D->ab, r, c->off);
    memcpy(c->acc, real, c->n * D->ab);
    c->tok = sc->distributed.tokens ? sc->distributed.tokens + (size_t)r * (size_t)K : sc->batch.tokens;
    c->mb_base = r * K;
    c->errw = 1.0 / (double)W;
    if (sc->distributed.normalize == GP_NORM_RANK) {
        double Nr = 0;
        for (int k = 0; k < K; k++)
            Nr += (double)c->tok[k];
        c->tm_mul = 1.0;
        c->tm_den = Nr;
    } else {
        c->tm_mul = (double)W; /* the loss times W, as trainers do that divide by the global N */
        c->tm_den = N;
    }
    memset(c->sr_prev, 0, c->n * sizeof(double));
}

/* Generated tensors across W ranks: each rank accumulates its micro-batches locally on
 * the backend; the collective runs once after the window (no_sync: true) or after every
 * micro-batch on the accumulated gradient (no_sync: false, DDP's reducer without
 * no_sync()); then unscale and the final statistics as in one process. */
static int run_distributed(chunk *G, size_t ng, double N, int *found_inf, gp_error *err)
{
    const gp_scenario *sc = G[0].sc;
    struct dist_pool *D = G[0].D;
    int K = sc->batch.microbatches, W = D->W, rc = 0;
    void *real[GP_PLUGIN_MANY_MAX];
    for (size_t j = 0; j < ng; j++) {
        real[j] = G[j].acc;
        for (int m = 0; m < GP_MECH_GRAD_END; m++)
            memset(D->cerr[m] + G[j].off, 0, G[j].n * sizeof(double));
        memset(D->sh + G[j].off, 0, G[j].n * sizeof(double));
        memset(D->sl + G[j].off, 0, G[j].n * sizeof(double));
    }
    int rounds = sc->distributed.no_sync ? 1 : K, per = sc->distributed.no_sync ? K : 1;
    for (int round = 0; round < rounds && rc == 0; round++) {
        for (int r = 0; r < W && rc == 0; r++) {
            for (size_t j = 0; j < ng; j++)
                rank_begin(&G[j], real[j], N, r);
            for (int k = round * per; k < round * per + per && rc == 0; k++) {
                for (size_t j = 0; j < ng && rc == 0; j++)
                    rc = generate_microbatch(&G[j], N, k, err);
                if (rc == 0)
                    rc = accumulate(G, ng, k, err);
            }
        }
        for (size_t j = 0; j < ng; j++) {
            G[j].acc = real[j];
            G[j].errw = 1.0;
        }
        for (size_t j = 0; j < ng && rc == 0; j++)
            rc = collective(&G[j], err);
    }
    for (size_t j = 0; j < ng && rc == 0; j++) {
        chunk *c = &G[j];
        if ((rc = generated_final(c, N, found_inf, err)) != 0)
            break;
        for (size_t i = 0; i < c->n; i++) {
            double e = 0;
            for (int m = 0; m < GP_MECH_GRAD_END; m++) {
                double d = D->cerr[m][c->off + i];
                e += d;
                c->st->coll.ss_mech[m] += d * d;
            }
            c->st->coll.ss += e * e;
        }
    }
    return rc;
}

/* Explicit per-token values (size 1): everything exact in rationals. */
static int run_explicit(chunk *c, const gp_tensor_spec *ts, double N, int *found_inf, gp_error *err)
{
    const gp_scenario *sc = c->sc;
    int K = sc->batch.microbatches, sticky;
    mpq_t S, x, same, full, tmp;
    mpq_inits(S, x, same, full, tmp, NULL);
    for (int k = 0; k < K; k++) {
        mpq_set_ui(S, 0, 1);
        for (size_t t = 0; t < ts->grad.ntok[k]; t++) {
            mpq_set_d(tmp, ts->grad.values[k][t]);
            mpq_add(S, S, tmp);
        }
        mpq_set_d(tmp, c->shrink); /* the values times shrink^step, exactly */
        mpq_mul(S, S, tmp);
        mpq_add(full, full, S);
        mpq_set_d(tmp, reduction_den(sc, (long)ts->grad.ntok[k], N));
        mpq_div(x, S, tmp);
        mpq_add(same, same, x);
        mpq_set_d(tmp, c->s);
        mpq_mul(x, x, tmp);
        double d = gp_exact_q_nearest(x, &sticky);
        c->xs[0] = gp_f64_nudge(d, sticky);
        store_grads(c);
        int arc = accumulate(c, 1, k, err);
        if (arc != 0) {
            mpq_clears(S, x, same, full, tmp, NULL);
            return arc;
        }
    }
    if (sc->fullbatch == GP_FB_MEAN) {
        mpq_set_d(tmp, N);
        mpq_div(full, full, tmp);
    }
    int rc = 0;
    if (sc->loss_scale.mode != GP_LS_NONE)
        rc = unscale(c, found_inf, err);
    if (rc == 0) {
        double gacc = widen(c->af, gp_pack_get(c->af, c->acc, 0));
        double gsame = gp_exact_q_nearest(same, &sticky);
        c->gfull[0] = gp_exact_q_nearest(full, &sticky);
        final_stats(c, &gacc, &gsame, c->gfull);
    }
    mpq_clears(S, x, same, full, tmp, NULL);
    return rc;
}

/* ---- metrics and verdict ---- */

static double ratio(double num_ss, double den_ss)
{
    if (num_ss == 0)
        return 0;
    return sqrt(num_ss) / sqrt(den_ss); /* den 0 with num > 0: inf */
}

/* The metrics and losses of stats st. A non-finite exact gradient (a replayed entry that
 * is inf or NaN in an applied step: ||g_full|| or ||g_same|| is not finite) leaves every
 * metric and loss measured against the exact values undefined: NaN (absent from
 * report.json), never a finite value; nonfinite_count counts it and the non-finite loss
 * is inf (docs/scenarios.md, Non-finite gradients). */
static void derive(const gp_stats *st, double *metric, double *loss)
{
    for (int i = 0; i < GP_NMETRICS; i++)
        metric[i] = NAN;
    metric[GP_M_GRAD_REL_ERR_FULLBATCH] = ratio(st->ss_acc_full, st->ss_full);
    metric[GP_M_GRAD_REL_ERR_ROUNDING] = ratio(st->ss_acc_same, st->ss_same);
    metric[GP_M_NORMALIZATION_REL_ERR] = ratio(st->ss_same_full, st->ss_full);
    metric[GP_M_MAX_ULP_ERR] = st->max_ulp;
    metric[GP_M_UNDERFLOW_FRAC] = st->rounded_nonzero ? (double)st->underflow / (double)st->rounded_nonzero : 0;
    metric[GP_M_ABSORBED_FRAC] = st->adds_nonzero ? (double)st->absorbed / (double)st->adds_nonzero : 0;
    metric[GP_M_OVERFLOW_COUNT] = (double)st->overflow;
    metric[GP_M_GRAD_NORM_RATIO] = st->ss_full > 0 ? sqrt(st->ss_acc) / sqrt(st->ss_full) : (st->ss_acc > 0 ? INFINITY : 1);
    metric[GP_M_SUBNORMAL_FRAC] = st->stored_nonzero ? (double)st->subnormal / (double)st->stored_nonzero : 0;
    metric[GP_M_NONFINITE_COUNT] = (double)st->nonfinite;
    const gp_optim_counts *oc = &st->opt;
    const gp_optim_sums *os = &st->opt_ss;
    metric[GP_M_STALE_UPDATE_FRAC] = oc->nonzero ? (double)oc->stale / (double)oc->nonzero : 0;
    metric[GP_M_WEIGHT_REL_ERR] = ratio(os->w_err, os->w_ref);
    metric[GP_M_M_REL_ERR] = ratio(os->m_err, os->m_ref);
    metric[GP_M_V_REL_ERR] = ratio(os->v_err, os->v_ref);
    metric[GP_M_STATE_UNDERFLOW_FRAC] = oc->state_nonzero ? (double)oc->state_underflow / (double)oc->state_nonzero : 0;
    if (oc->twin_checked) /* a twin was compared (else the metric stays absent) */
        metric[GP_M_TWIN_MISMATCH_COUNT] = (double)oc->twin_mismatch;
    loss[GP_MECH_NORMALIZATION] = metric[GP_M_NORMALIZATION_REL_ERR];
    for (int m = GP_MECH_UNDERFLOW; m < GP_MECH_SCALING; m++)
        loss[m] = ratio(st->ss_mech[m], st->ss_full);
    /* over every step's full-batch gradient, skipped steps included */
    loss[GP_MECH_SCALING] = ratio(st->ss_mech[GP_MECH_SCALING], st->ss_full + st->ss_full_skipped);
    if (st->nonfinite)
        loss[GP_MECH_NONFINITE] = INFINITY;
    metric[GP_M_SCALING_REL_ERR] = loss[GP_MECH_SCALING];
    double L = log(130.0 / 1e-9); /* gp_runner.h: Freedman's bound on 65 shells, two-sided */
    for (int j = 0; j < 3; j++) {
        double T = 2 * L / 3 + 2 * sqrt(fmax(st->sr_var[j], 1.0) * L);
        if (j == 0)
            T += (double)st->sr_draws * 0x1p-32; /* the CPU's documented drift */
        metric[GP_M_SR_BIAS_SCORE + j] = fabs(st->sr_sum[j]) / T;
    }
    /* weight-level losses, relative to the exact final weights as weight_rel_err */
    loss[GP_MECH_STALE] = ratio(os->lost, os->w_ref);
    loss[GP_MECH_STATE] = ratio(os->state, os->w_ref);
    loss[GP_MECH_FORMULA] = ratio(os->formula, os->w_ref);
    if (st->replay_nonfinite || !isfinite(st->ss_full) || !isfinite(st->ss_same)) { /* no exact reference */
        static const gp_metric undefined[] = {GP_M_GRAD_REL_ERR_FULLBATCH, GP_M_GRAD_REL_ERR_ROUNDING,
                                              GP_M_NORMALIZATION_REL_ERR, GP_M_MAX_ULP_ERR, GP_M_GRAD_NORM_RATIO,
                                              GP_M_WEIGHT_REL_ERR, GP_M_M_REL_ERR, GP_M_V_REL_ERR,
                                              GP_M_SCALING_REL_ERR};
        for (size_t i = 0; i < sizeof undefined / sizeof *undefined; i++)
            metric[undefined[i]] = NAN;
        for (int m = 0; m < GP_NMECH; m++)
            if (m != GP_MECH_NONFINITE)
                loss[m] = NAN;
    }
}

/* Every step skipped: each step's whole gradient was lost to scaling, so scaling_rel_err
 * (and the scaling loss) is 1 where the sums left it undefined (the skipped steps' exact
 * gradients non-finite: a replayed entry that overflowed under the loss scale). */
static void all_skipped(double *metric, double *loss)
{
    if (metric[GP_M_SCALING_REL_ERR] != metric[GP_M_SCALING_REL_ERR])
        metric[GP_M_SCALING_REL_ERR] = loss[GP_MECH_SCALING] = 1.0;
}

static void optim_counts_add(gp_optim_counts *a, const gp_optim_counts *b)
{
    a->nonzero += b->nonzero;
    a->stale += b->stale;
    a->state_nonzero += b->state_nonzero;
    a->state_underflow += b->state_underflow;
    a->skip_writes += b->skip_writes;
    a->mismatches += b->mismatches;
    a->formula += b->formula;
    a->twin_checked += b->twin_checked;
    a->twin_mismatch += b->twin_mismatch;
    gp_formula_first_merge(&a->first_formula, &b->first_formula);
    a->models_checked |= b->models_checked;
    a->models_differ |= b->models_differ;
}

static void stats_add(gp_stats *a, const gp_stats *b);

/* a += b with b's sums and counts multiplied by num/den (the expansion weight M/n of a
 * sampled tensor: den = n, num = M; 1/1 adds exactly). Counts are rounded to integers. */
static void stats_add_w(gp_stats *a, const gp_stats *b, double den, double num)
{
    if (num == den) {
        stats_add(a, b);
        return;
    }
    gp_stats w = *b;
    double f = num / den;
#define W(x) w.x *= f
#define WC(x) w.x = (uint64_t)llround((double)w.x * f)
    W(ss_full); W(ss_same); W(ss_acc); W(ss_acc_full); W(ss_acc_same); W(ss_same_full); W(ss_full_skipped); W(ss_x);
    for (int m = 0; m < GP_NMECH; m++)
        W(ss_mech[m]);
    WC(rounded_nonzero); WC(underflow); WC(adds_nonzero); WC(absorbed); WC(overflow); WC(stored_nonzero);
    WC(subnormal); WC(nonfinite); WC(replay_nonfinite); WC(overflow_skipped); WC(mismatches);
    WC(opt.nonzero); WC(opt.stale); WC(opt.state_nonzero); WC(opt.state_underflow); WC(opt.skip_writes);
    WC(opt.mismatches); WC(opt.formula);
    W(opt_ss.w_err); W(opt_ss.w_ref); W(opt_ss.m_err); W(opt_ss.m_ref); W(opt_ss.v_err); W(opt_ss.v_ref);
    W(opt_ss.lost); W(opt_ss.state); W(opt_ss.formula);
    WC(coll.hops); WC(coll.adds_nonzero); WC(coll.absorbed); WC(coll.overflow); WC(coll.underflow);
    WC(coll.roundings); W(coll.ss);
    for (int m = 0; m < GP_NMECH; m++)
        W(coll.ss_mech[m]);
#undef W
#undef WC
    stats_add(a, &w);
}

static void stats_add(gp_stats *a, const gp_stats *b)
{
    for (int e = 0; e < GP_NEST; e++)
        gp_ratio_merge(&a->est[e], &b->est[e]);
    a->ss_full += b->ss_full;
    a->ss_same += b->ss_same;
    a->ss_acc += b->ss_acc;
    a->ss_acc_full += b->ss_acc_full;
    a->ss_acc_same += b->ss_acc_same;
    a->ss_same_full += b->ss_same_full;
    for (int m = 0; m < GP_NMECH; m++)
        a->ss_mech[m] += b->ss_mech[m];
    a->ss_full_skipped += b->ss_full_skipped;
    a->ss_x += b->ss_x;
    a->overflow_skipped += b->overflow_skipped;
    if (b->max_ulp > a->max_ulp || b->max_ulp != b->max_ulp)
        a->max_ulp = b->max_ulp;
    a->rounded_nonzero += b->rounded_nonzero;
    a->underflow += b->underflow;
    a->adds_nonzero += b->adds_nonzero;
    a->absorbed += b->absorbed;
    a->overflow += b->overflow;
    a->stored_nonzero += b->stored_nonzero;
    a->subnormal += b->subnormal;
    a->nonfinite += b->nonfinite;
    a->replay_nonfinite += b->replay_nonfinite;
    a->mismatches += b->mismatches;
    for (int j = 0; j < 3; j++) {
        a->sr_sum[j] += b->sr_sum[j];
        a->sr_var[j] += b->sr_var[j];
    }
    a->sr_draws += b->sr_draws;
    optim_counts_add(&a->opt, &b->opt);
    a->opt_ss.w_err += b->opt_ss.w_err;
    a->opt_ss.w_ref += b->opt_ss.w_ref;
    a->opt_ss.m_err += b->opt_ss.m_err;
    a->opt_ss.m_ref += b->opt_ss.m_ref;
    a->opt_ss.v_err += b->opt_ss.v_err;
    a->opt_ss.v_ref += b->opt_ss.v_ref;
    a->opt_ss.lost += b->opt_ss.lost;
    for (int e = 0; e < GP_OPTIM_NEST; e++)
        gp_ratio_merge(&a->opt_ss.est[e], &b->opt_ss.est[e]);
    a->opt_ss.state += b->opt_ss.state;
    a->opt_ss.formula += b->opt_ss.formula;
    a->coll.hops += b->coll.hops;
    a->coll.adds_nonzero += b->coll.adds_nonzero;
    a->coll.absorbed += b->coll.absorbed;
    a->coll.overflow += b->coll.overflow;
    a->coll.underflow += b->coll.underflow;
    a->coll.roundings += b->coll.roundings;
    a->coll.ss += b->coll.ss;
    for (int m = 0; m < GP_NMECH; m++)
        a->coll.ss_mech[m] += b->coll.ss_mech[m];
}

/* The mechanism a metric counts by itself (underflow_frac: underflow, ...); GP_NMECH for
 * the metrics that sum several (the error norms, the norm ratio). */
static gp_mechanism metric_mechanism(gp_metric m)
{
    switch (m) {
    case GP_M_NORMALIZATION_REL_ERR: return GP_MECH_NORMALIZATION;
    case GP_M_UNDERFLOW_FRAC: return GP_MECH_UNDERFLOW;
    case GP_M_ABSORBED_FRAC: return GP_MECH_ABSORPTION;
    case GP_M_OVERFLOW_COUNT: return GP_MECH_OVERFLOW;
    case GP_M_NONFINITE_COUNT: return GP_MECH_NONFINITE;
    case GP_M_SKIPPED_STEPS:
    case GP_M_MIN_LOSS_SCALE:
    case GP_M_SCALING_REL_ERR: return GP_MECH_SCALING;
    case GP_M_STALE_UPDATE_FRAC: return GP_MECH_STALE;
    case GP_M_STATE_UNDERFLOW_FRAC:
    case GP_M_M_REL_ERR:
    case GP_M_V_REL_ERR: return GP_MECH_STATE;
    default: return GP_NMECH;
    }
}

/* Metrics judged on the optimizer's result (the rest: on the accumulated gradient). */
static int weight_metric(int m)
{
    return m == GP_M_WEIGHT_REL_ERR || m == GP_M_STALE_UPDATE_FRAC || m == GP_M_M_REL_ERR || m == GP_M_V_REL_ERR ||
           m == GP_M_STATE_UNDERFLOW_FRAC;
}

/* The verdict and the dominant mechanism. A failed metric that counts one mechanism
 * (underflow_frac, absorbed_frac, stale_update_frac, scaling_rel_err, ...) names it;
 * several: the one with the largest loss. Otherwise a mechanism counts as a loss only beyond the
 * floor of its level (gradient mechanisms: floor_grad; stale and state: floor_weight;
 * normalization, scaling and non-finite: beyond 0), so a scenario that lost nothing
 * beyond its formats names none. When only weight metrics failed, the dominant one is
 * looked for among the mechanisms that act on the update (stale update, state
 * precision, scaling: a skipped step, non-finite): a failing Kahan or bf16 weight update
 * is attributed to its stale updates or its state, not to the gradient's rounding; a
 * failed scenario always names one (the largest loss, floors ignored: among the weight
 * mechanisms when only weight metrics failed, then among all). A step that no rounding
 * of an AdamW explains (the update formula: gp_optim.h) fails the scenario, never meets an
 * expectation, and is the mechanism named. */
static void judge(const gp_scenario *sc, gp_result *r)
{
    r->verdict = GP_PASS;
    int grad_failed = 0, weight_failed = 0;
    for (int i = 0; i < GP_NMETRICS; i++) {
        double max = 0;
        r->has_threshold[i] = sc->thresholds.set[i] || gp_default_threshold(r, (gp_metric)i, &max) == 0;
        r->threshold[i] = sc->thresholds.set[i] ? sc->thresholds.max[i] : max;
        double v = r->metric[i];
        /* an estimate with an interval fails only when its whole interval is beyond the
         * threshold; a threshold inside the interval leaves it undecided (a warning) */
        double lo = r->has_ci[i] ? r->ci_lo[i] : v, hi = r->has_ci[i] ? r->ci_hi[i] : v;
        if (v != v)
            lo = hi = v;
        r->has_min[i] = sc->thresholds.set_min[i];
        r->threshold_min[i] = sc->thresholds.min[i];
        r->failed[i] = (r->has_threshold[i] && !(lo <= r->threshold[i])) || /* NaN fails closed */
                       (r->has_min[i] && !(hi >= r->threshold_min[i]));
        r->undecided[i] = !r->failed[i] && ((r->has_threshold[i] && !(hi <= r->threshold[i])) ||
                                            (r->has_min[i] && !(lo >= r->threshold_min[i])));
        if (r->failed[i]) {
            r->verdict = GP_FAIL;
            if (weight_metric(i))
                weight_failed = 1;
            else
                grad_failed = 1;
        }
    }
    int weights_only = weight_failed && !grad_failed;
    r->dominant = GP_NMECH;
    double best = 0;
    /* A failed metric that counts one mechanism names it (the largest loss among those) */
    for (int i = 0; i < GP_NMETRICS; i++) {
        gp_mechanism m = metric_mechanism((gp_metric)i);
        /* an undefined (NaN) metric fails closed but names no mechanism */
        if (r->failed[i] && m != GP_NMECH && r->metric[i] == r->metric[i] &&
            (r->dominant == GP_NMECH || r->loss[m] > best)) {
            best = r->loss[m];
            r->dominant = m;
        }
    }
    for (int m = 0; m < GP_NMECH && r->dominant == GP_NMECH; m++) {
        int weight_mech = m == GP_MECH_STALE || m == GP_MECH_STATE || m == GP_MECH_FORMULA;
        double floor = m == GP_MECH_UNDERFLOW || m == GP_MECH_ABSORPTION || m == GP_MECH_OVERFLOW ||
                               m == GP_MECH_ROUNDING
                           ? r->floor_grad
                           : weight_mech ? r->floor_weight : 0;
        if (weights_only && !weight_mech && m != GP_MECH_NONFINITE && m != GP_MECH_SCALING)
            continue;
        if (r->loss[m] > floor && r->loss[m] > best) {
            best = r->loss[m];
            r->dominant = (gp_mechanism)m;
        }
    }
    const gp_stats *st = &r->st;
    if (st->mismatches || st->opt.mismatches || st->opt.skip_writes || st->opt.formula)
        r->verdict = GP_FAIL;
    if (st->opt.formula) /* the subject is not AdamW: its other losses are not AdamW's */
        r->dominant = GP_MECH_FORMULA;
    int fired = st->underflow || st->absorbed || st->overflow || st->nonfinite || r->loss[GP_MECH_NORMALIZATION] > 0 ||
                r->skipped_steps || st->opt.stale || st->opt.state_underflow || r->loss[GP_MECH_SCALING] > 0;
    if (r->verdict == GP_PASS && fired)
        r->verdict = GP_WARN;
    for (int i = 0; i < GP_NMETRICS; i++)
        if (r->undecided[i] && r->verdict == GP_PASS)
            r->verdict = GP_WARN;
    if (r->verdict != GP_PASS && r->dominant == GP_NMECH) {
        best = 0;
        for (int m = 0; m < GP_NMECH; m++)
            if (r->loss[m] > best &&
                (!weights_only || m == GP_MECH_STALE || m == GP_MECH_STATE || m == GP_MECH_SCALING)) {
                best = r->loss[m];
                r->dominant = (gp_mechanism)m;
            }
        for (int m = 0; m < GP_NMECH && r->dominant == GP_NMECH; m++)
            if (r->loss[m] > best) {
                best = r->loss[m];
                r->dominant = (gp_mechanism)m;
            }
    }
    /* a compared backend that differs, a write in a skipped step, a step no AdamW
     * explains never meets an expectation */
    r->expect_met = st->mismatches || st->opt.mismatches || st->opt.skip_writes || st->opt.formula ? 0
                    : sc->expect.set ? r->verdict == sc->expect.verdict &&
                                         (!sc->expect.has_mechanism || r->dominant == sc->expect.mechanism)
                                   : r->verdict != GP_FAIL;
}

/* ---- the simulation ---- */

/* Per-tensor arrays. acc/comp/gfull hold the whole tensor when the step couples tensors
 * (a loss scaler's found_inf, global-norm clipping), else one chunk per thread; the
 * optimizer state holds the whole tensor when there is more than one step (else each
 * thread's lane holds one chunk's state, made again for every chunk). */
typedef struct {
    size_t acc_cap;
    void *acc, *comp;
    double *gfull;
    gp_optim_state opt;
    /* multi-step runs with sampling: per element [size][GP_NEST][2], the y, x of each ratio
     * estimate of this step (el_step) and summed over the steps kept so far (el_tot; the
     * same array when no step can be skipped), made units at the end (docs/scenarios.md,
     * "Estimates at scale": an element's totals over the steps); else NULL */
    double *el_step, *el_tot;
} tensor_state;

/* One thread's working memory (a lane): the per-element arrays of CHUNK elements the
 * chunks of a window share, the chunks themselves, replayed weights of one chunk, the
 * optimizer state of one chunk (a one-step run's whole state; with more steps, the
 * scratch borrowed over the tensor's state), its histogram, and per-tensor accumulators
 * of one chunk when nothing couples the tensors. */
typedef struct {
    chunk c;      /* the pool */
    chunk *grp;   /* [GP_PLUGIN_MANY_MAX] the chunks of the window it runs */
    float *wbuf;  /* [CHUNK] */
    float *sbuf;  /* [4 * CHUNK] runs with a carried state or a twin: its entries of one chunk, else NULL */
    gp_optim_state opt;
    void *acc, *comp; /* [CHUNK] uncoupled runs: the chunk's accumulator (and Kahan's) */
    double *gfull;    /* [CHUNK] uncoupled runs: the chunk's exact full-batch gradient */
    uint64_t hist[GP_HIST_BINS];
    struct dist_pool *D; /* data-parallel runs: the ranks' buffers of one window, else NULL */
} lane;

/* A unit of work (an accumulation window, or one chunk's optimizer step in a coupled
 * step) and what it produced, kept apart so that units can run on any thread and be
 * merged into the run in unit order: every floating-point sum of the report is then a
 * sum of the units' partial sums in one fixed order, whatever the number of threads. */
typedef struct {
    size_t ng;                             /* chunks */
    size_t t[GP_PLUGIN_MANY_MAX];          /* tensor of chunk j */
    uint64_t i0[GP_PLUGIN_MANY_MAX];       /* its first element */
    size_t off[GP_PLUGIN_MANY_MAX];        /* its place in the lane's pool */
    gp_stats *gst;                         /* [GP_PLUGIN_MANY_MAX] gradient statistics per chunk */
    gp_optim_counts oc[GP_PLUGIN_MANY_MAX]; /* optimizer events per chunk */
    gp_optim_sums os[GP_PLUGIN_MANY_MAX];   /* optimizer final sums per chunk (one-step runs) */
    double *traj_err, *traj_ref;           /* [K] trajectory sums */
    gp_dd ref_ss;                          /* sum of squares of the exact full-batch gradient */
    gp_mismatch first;                     /* the unit's first disagreement with cmp */
    gp_mismatch twin;                      /* the unit's first departure from torch's twin */
    int found_inf;
    int rc;
    gp_error err;
} unit;

typedef struct sim {
    const gp_scenario *sc;
    const gp_backend *b, *cmp;
    gp_result *res;
    tensor_state *ts;
    lane *lanes;  /* [nlanes] lane 0 is the calling thread's */
    int nlanes;
    unit *units;  /* [nunits] a wave of units */
    size_t nunits;
    double N;          /* this iteration's tokens N_s (every rank's) */
    int coupled, persist;
    int sampled;  /* some tensor is sampled: per-element units for the intervals */
    int step_idx; /* 0-based iteration */
    float scale;  /* this iteration's loss scale */
    double rscale; /* the scale this iteration's replayed entries carry (loss_scale.replay_scales; 1: unscaled) */
    gp_optim_step step;
    gp_dd ref_ss; /* this step's sum of squares of the exact full-batch gradient */
    double *traj_err, *traj_ref; /* [K] this step's trajectory sums */
    gp_stats *step_st; /* [ntensors] gradient statistics of the current step: kept only
                          when the step is not skipped (a skipped step's gradient was
                          discarded by design; its loss counts as scaling) */
    gp_replay **dump, **wdump; /* [ntensors] replayed gradients / weights, else NULL */
    gp_replay **sdump, **tdump; /* [ntensors] a carried state / torch's twin, else NULL */
    gp_optim_step *tstep; /* [ntensors] this iteration's per-tensor inputs: t, lr, weight_decay, ref */
    int K;             /* this iteration's micro-batches K_s */
    uint64_t **idx;    /* [ntensors] a sampled tensor's chosen elements, else NULL */
    const double *w;   /* [ntensors] a sampled tensor's expansion weight M_h / n_h, else 1 */
    const uint64_t *pop; /* [ntensors] a sampled tensor's elements M_h, else 0 */
    uint64_t *done;    /* progress counter (gp_run_ctl), else NULL */
} sim;

static size_t min_size(uint64_t a, size_t b)
{
    return a < b ? (size_t)a : b;
}

/* Elements i0 .. i0+n-1 of tensor t (the sampled ones when it is sampled) of entry KEY/what
 * of dump r, as fp32, into out; the entry's dtype must be fmt (-1: any). Returns 0, or -3
 * with err (a fault: the loader checked the entry, so the dump changed since, or was
 * truncated or changed while read). */
static int read_chunk(const sim *S, gp_replay *r, size_t t, const char *key, const char *what, int fmt, uint64_t i0,
                      size_t n, float *out, gp_error *err)
{
    const gp_tensor_spec *spec = &S->sc->tensors[t];
    char name[GP_NAME_MAX * 4];
    gp_replay_entry e;
    gp_error re = {""};
    snprintf(name, sizeof name, "%s/%s", key, what);
    if (gp_replay_entry_get(r, name, &e, &re) != 0) {
        gp_error_set(err, "tensor '%s': %s", spec->name, re.msg);
        return -3;
    }
    if ((fmt >= 0 && e.fmt != (gp_format)fmt) || (S->idx[t] ? n > 0 && S->idx[t][i0 + n - 1] >= e.n : i0 + n > e.n)) {
        gp_replay_entry_release(&e);
        gp_error_set(err, "tensor '%s': %s: entry '%s' changed since the scenario was loaded", spec->name,
                     gp_replay_path(r), name);
        return -3;
    }
    int rd = S->idx[t] ? gp_replay_read_idx(&e, S->idx[t] + i0, n, out, &re) : gp_replay_read(&e, i0, n, out, &re);
    gp_replay_entry_release(&e);
    if (rd != 0) { /* truncated or changed while read */
        gp_error_set(err, "tensor '%s': %s", spec->name, re.msg);
        return -3;
    }
    return 0;
}

/* The initial state of a chunk (the first iteration): replayed or generated weights, and a
 * carried state's m, v (and master) from tensors[t].state. */
static int init_chunk(sim *S, lane *L, gp_optim_state *o, size_t t, uint64_t i0, size_t n, size_t off, gp_error *err)
{
    const gp_tensor_spec *spec = &S->sc->tensors[t];
    gp_optim_values in = {NULL, NULL, NULL, NULL};
    int rc = 0;
    if (S->wdump[t]) { /* replayed initial weights */
        rc = read_chunk(S, S->wdump[t], t, spec->weight.replay_key, "weight", -1, i0, n, L->wbuf, err);
        in.param = L->wbuf;
    } else if (S->idx[t]) { /* sampled: the chosen elements' generated weights */
        gp_generate_at(&spec->weight, S->sc->seed, gp_stream_id(GP_STREAM_WEIGHT, t, 0, 0), S->idx[t] + i0, n,
                       L->wbuf);
        in.param = L->wbuf;
    }
    if (rc == 0 && S->sdump[t]) { /* the optimizer state when the capture began */
        const char *key = spec->state.key;
        int sf = (int)o->cfg.state;
        if ((rc = read_chunk(S, S->sdump[t], t, key, "state/exp_avg", sf, i0, n, L->sbuf, err)) == 0 &&
            (rc = read_chunk(S, S->sdump[t], t, key, "state/exp_avg_sq", sf, i0, n, L->sbuf + CHUNK, err)) == 0 &&
            o->master)
            rc = read_chunk(S, S->sdump[t], t, key, "state/master", GP_FP32, i0, n, L->sbuf + 2 * CHUNK, err);
        in.m = L->sbuf;
        in.v = L->sbuf + CHUNK;
        in.master = o->master ? L->sbuf + 2 * CHUNK : NULL;
    }
    if (rc == 0)
        gp_optim_init(o, S->sc, t, i0, n, off, &in);
    return rc;
}

/* The twin check of a chunk after iteration it's step: torch's KEY/step<it-1>/param,
 * exp_avg, exp_avg_sq (and master) against the state the backend left. */
static int twin_chunk(sim *S, lane *L, const gp_optim_state *o, size_t t, uint64_t i0, size_t n, size_t off,
                      gp_optim_counts *oc, gp_mismatch *twin, gp_error *err)
{
    const char *key = S->sc->tensors[t].twin.key;
    const char *const what[4] = {"param", "exp_avg", "exp_avg_sq", "master"};
    const int fmt[4] = {(int)o->cfg.param, (int)o->cfg.state, (int)o->cfg.state, GP_FP32};
    char name[64];
    int rc = 0;
    for (int q = 0; q < (o->master ? 4 : 3) && rc == 0; q++) {
        snprintf(name, sizeof name, "step%ld/%s", S->step.iter - 1, what[q]);
        rc = read_chunk(S, S->tdump[t], t, key, name, fmt[q], i0, n, L->sbuf + (size_t)q * CHUNK, err);
    }
    if (rc == 0) {
        gp_optim_values torch = {L->sbuf, L->sbuf + CHUNK, L->sbuf + 2 * CHUNK, o->master ? L->sbuf + 3 * CHUNK : NULL};
        gp_optim_twin(o, off, n, &torch, S->step.iter, t, i0, S->idx[t] ? S->idx[t] + i0 : NULL, oc, twin);
    }
    return rc;
}

/* Optimizer phase of one chunk on lane L (acc_off: the chunk's place in the accumulator
 * arrays acc and gfull), its events to *oc, its final sums to *os when the state is per
 * chunk, a disagreement to *first, a departure from torch's twin to *twin. */
static int optimize_chunk(sim *S, lane *L, size_t t, uint64_t i0, size_t n, const void *acc, const double *gfull,
                          gp_optim_counts *oc, gp_optim_sums *os, gp_mismatch *first, gp_mismatch *twin,
                          gp_error *err)
{
    tensor_state *ts = &S->ts[t];
    size_t off = S->persist ? (size_t)i0 : 0;
    gp_optim_state view, *o = &L->opt;
    int rc;
    if (S->persist) { /* the tensor's state, this lane's scratch */
        gp_optim_scratch_borrow(&view, &ts->opt, &L->opt);
        o = &view;
    }
    if (S->step.iter == 1) { /* the state the run starts from */
        rc = init_chunk(S, L, o, t, i0, n, off, err);
        if (rc != 0)
            return rc;
    }
    gp_optim_step step = S->step;
    const gp_optim_step *own = &S->tstep[t]; /* the tensor's step count, lr, decay, reference scalars */
    step.t = own->t;
    step.lr = own->lr;
    step.weight_decay = own->weight_decay;
    step.ref = own->ref;
    step.first = first;
    rc = gp_optim_chunk(S->sc, &step, S->b, S->cmp, o, t, i0, n, off, S->sc->precision.accumulator, acc, gfull, oc,
                        err);
    if (rc == 0 && S->tdump[t])
        rc = twin_chunk(S, L, o, t, i0, n, off, oc, twin, err);
    if (rc == 0 && !S->persist)
        gp_optim_final(o, off, n, os);
    return rc;
}

/* Member j of unit U on lane L: the pool's elements [U->off[j], + n) for tensor U->t[j]'s
 * chunk from U->i0[j]; its accumulator in the tensor state (coupled) or the lane's;
 * per-window state cleared. */
static void chunk_begin(sim *S, lane *L, unit *U, size_t j)
{
    const gp_scenario *sc = S->sc;
    const chunk *p = &L->c; /* the pool: CHUNK elements of every per-element array */
    size_t off = U->off[j], t = U->t[j];
    uint64_t i0 = U->i0[j];
    chunk *c = &L->grp[j];
    tensor_state *ts = &S->ts[t];
    size_t ab = width_bytes(p->af), gb = width_bytes(p->gf);
    *c = *p;
    c->t = t;
    c->step = S->step_idx;
    c->s = S->scale;
    c->rs = S->rscale;
    c->shrink = pow(sc->tensors[t].grad.shrink, c->step); /* binary64 pow: 1 for shrink 1 or step 0 */
    c->st = &U->gst[j];
    c->traj_err = U->traj_err;
    c->traj_ref = U->traj_ref;
    c->first = &U->first;
    c->i0 = i0;
    c->n = min_size(sc->tensors[t].size - i0, CHUNK);
    c->el = ts->el_step ? ts->el_step + (size_t)i0 * 2 * GP_NEST : NULL;
    if (S->coupled) {
        c->acc = (char *)ts->acc + (size_t)i0 * ab;
        c->comp = ts->comp ? (char *)ts->comp + (size_t)i0 * ab : NULL;
        c->gfull = ts->gfull + i0;
    } else {
        c->acc = (char *)L->acc + off * ab;
        c->comp = L->comp ? (char *)L->comp + off * ab : NULL;
        c->gfull = L->gfull + off;
    }
    c->xs = p->xs + off;
    c->grad = (char *)p->grad + off * gb;
    c->old = (char *)p->old + off * ab;
    c->acc2 = p->acc2 ? (char *)p->acc2 + off * ab : NULL;
    c->comp2 = p->comp2 ? (char *)p->comp2 + off * ab : NULL;
    for (int m = 0; m < GP_MECH_GRAD_END; m++) {
        c->err[m] = p->err[m] + off;
        memset(c->err[m], 0, c->n * sizeof(double));
    }
    c->partial = p->partial + off;
    c->sr_prev = p->sr_prev + off;
    memset(c->sr_prev, 0, c->n * sizeof(double));
    c->m = p->m + off;
    c->noise = p->noise + off;
    c->sum_m = p->sum_m + off;
    c->sum_nm = p->sum_nm + off;
    c->gacc = p->gacc + off;
    c->gsame = p->gsame + off;
    c->sp_m = p->sp_m + off;
    c->sp_nm = p->sp_nm + off;
    c->dump = S->dump[t];
    c->idx = S->idx[t];
    c->errw = 1.0;
    c->tok = gp_scenario_step_tokens(sc, S->step_idx);
    c->K = S->K;
    c->mb_base = 0;
    c->tm_mul = 1.0;
    c->tm_den = S->N;
    c->D = L->D;
    c->off = off;
    for (int k = 0; k < NCNT && p->cnt[0]; k++) {
        c->cnt[k] = p->cnt[k] + off;
        memset(c->cnt[k], 0, c->n * sizeof(uint32_t));
    }
    memset(c->acc, 0, c->n * ab); /* +0 in every format */
    if (c->comp)
        memset(c->comp, 0, c->n * ab);
    memset(c->partial, 0, c->n * sizeof(double));
    memset(c->sum_m, 0, c->n * sizeof(double));
    memset(c->sum_nm, 0, c->n * sizeof(double));
    memset(c->sp_m, 0, c->n * sizeof(gp_fixacc));
    memset(c->sp_nm, 0, c->n * sizeof(gp_fixacc));
}

/* The scenario's time limit (gp_deadline_set) has passed: -3. */
static int time_up(const sim *S, gp_error *err)
{
    gp_error_set(err, "ran longer than its time limit of %g s (--max-seconds), stopped in step %ld of %d",
                 gp_deadline_limit(), (long)S->step.iter, S->sc->steps);
    return -3;
}

/* Clear what unit U produces (its chunks stay). */
static void unit_reset(const sim *S, unit *U)
{
    memset(U->gst, 0, U->ng * sizeof *U->gst);
    memset(U->oc, 0, U->ng * sizeof *U->oc);
    memset(U->os, 0, U->ng * sizeof *U->os);
    memset(U->traj_err, 0, (size_t)S->res->nsteps * sizeof(double));
    memset(U->traj_ref, 0, (size_t)S->res->nsteps * sizeof(double));
    U->ref_ss = (gp_dd){0.0, 0.0};
    memset(&U->first, 0, sizeof U->first);
    memset(&U->twin, 0, sizeof U->twin);
    U->found_inf = 0;
    U->rc = 0;
    U->err.msg[0] = 0;
}

/* One accumulation window (unit u) on lane L for the current step; then, chunk by chunk,
 * the reference's clipping norm and (when nothing couples the tensors) the optimizer
 * step. Explicit-valued tensors come alone (ng = 1). */
static void window_run(sim *S, lane *L, size_t u)
{
    unit *U = &S->units[u];
    unit_reset(S, U);
    if (gp_deadline_passed()) {
        U->rc = time_up(S, &U->err);
        return;
    }
    for (size_t j = 0; j < U->ng; j++)
        chunk_begin(S, L, U, j);
    chunk *G = L->grp;
    const gp_tensor_spec *spec = &S->sc->tensors[G[0].t];
    int rc = spec->grad.kind == GP_DIST_VALUES ? run_explicit(&G[0], spec, S->N, &U->found_inf, &U->err)
                                               : run_generated(G, U->ng, S->N, &U->found_inf, &U->err);
    for (size_t j = 0; j < U->ng && rc == 0; j++) {
        chunk *c = &G[j];
        int smp = S->w[c->t] != 1.0;
        gp_dd ss = {0.0, 0.0}, *to = smp ? &ss : &U->ref_ss;
        *to = gp_dd_sumsq_add(*to, c->gfull, c->n); /* the reference's clipping norm */
        /* a sampled tensor's elements stand for M_h / n_h elements each: the estimate of
         * the whole model's norm (gp_runner.h) */
        if (smp)
            U->ref_ss = gp_dd_add(U->ref_ss, gp_dd_mul_d(ss, S->w[c->t]));
        if (!S->coupled)
            rc = optimize_chunk(S, L, c->t, c->i0, c->n, c->acc, c->gfull, &U->oc[j], &U->os[j], &U->first, &U->twin,
                                &U->err);
    }
    U->rc = rc;
}

/* Units [0, n) of the wave, each by fn on some lane: on this thread alone, or on up to
 * nlanes threads (this one included) taking the next unit as they finish one. Which
 * thread runs a unit changes nothing: a unit writes only its own results and the
 * elements of its own chunks. Threads that cannot be started leave their share to the
 * others. Each helper thread runs under this thread's time limit. */
typedef struct {
    sim *S;
    lane *L;
    size_t n;
    void (*fn)(sim *, lane *, size_t);
    size_t *next;    /* shared: the next unit to take */
    double left;     /* seconds of the time limit left, 0: none */
} par_arg;

static void par_loop(par_arg *a)
{
    for (;;) {
        size_t u = __atomic_fetch_add(a->next, 1, __ATOMIC_RELAXED);
        if (u >= a->n)
            return;
        a->fn(a->S, a->L, u);
    }
}

static void *par_thread(void *p)
{
    par_arg *a = p;
    gp_deadline_set(a->left);
    par_loop(a);
    gp_deadline_set(0);
    return NULL;
}

static void par_for(sim *S, size_t n, void (*fn)(sim *, lane *, size_t))
{
    size_t next = 0;
    par_arg a[GP_RUN_MAX_THREADS];
    pthread_t th[GP_RUN_MAX_THREADS];
    int nl = S->nlanes < (int)n ? S->nlanes : (int)n, started[GP_RUN_MAX_THREADS] = {0};
    double left = gp_deadline_limit() > 0 ? fmax(gp_deadline_left(), 1e-9) : 0;
    for (int l = 0; l < nl; l++)
        a[l] = (par_arg){S, &S->lanes[l], n, fn, &next, left};
    for (int l = 1; l < nl; l++)
        started[l] = pthread_create(&th[l], NULL, par_thread, &a[l]) == 0;
    par_loop(&a[0]);
    for (int l = 1; l < nl; l++)
        if (started[l])
            pthread_join(th[l], NULL);
}

/* The next accumulation window of the step from cursor (*t, *i0) into unit U: up to
 * GP_PLUGIN_MANY_MAX chunks of generated tensors whose sizes add up to at most CHUNK
 * (small tensors share a window, so a backend sees them in one accumulate_many call),
 * each explicit-valued tensor on its own. At most one chunk of a tensor per window:
 * only a tensor's last chunk can be shorter than CHUNK. Returns 0 when none is left. */
static int next_window(const sim *S, size_t *t, uint64_t *i0, unit *U)
{
    const gp_scenario *sc = S->sc;
    size_t used = 0;
    U->ng = 0;
    for (;;) {
        while (*t < sc->ntensors && *i0 >= sc->tensors[*t].size) { /* next tensor (skips empty ones) */
            (*t)++;
            *i0 = 0;
        }
        if (*t == sc->ntensors)
            break;
        int alone = sc->tensors[*t].grad.kind == GP_DIST_VALUES;
        size_t n = min_size(sc->tensors[*t].size - *i0, CHUNK);
        if (U->ng > 0 && (alone || used + n > CHUNK || U->ng == GP_PLUGIN_MANY_MAX))
            break; /* the window is full */
        U->t[U->ng] = *t;
        U->i0[U->ng] = *i0;
        U->off[U->ng] = used;
        U->ng++;
        used += n;
        *i0 += CHUNK;
        if (alone)
            break;
    }
    return U->ng > 0;
}

static void optim_sums_add(gp_optim_sums *a, const gp_optim_sums *b)
{
    a->w_err += b->w_err;
    a->w_ref += b->w_ref;
    a->m_err += b->m_err;
    a->m_ref += b->m_ref;
    a->v_err += b->v_err;
    a->v_ref += b->v_ref;
    a->lost += b->lost;
    a->state += b->state;
    for (int e = 0; e < GP_OPTIM_NEST; e++)
        gp_ratio_merge(&a->est[e], &b->est[e]);
}

/* The work of one element in step `step` (0-based): its micro-batches (every rank's), and in a
 * distributed run each collective's W + 2 passes (W - 1 hops, the casts and divisions). */
static uint64_t work_per_element(const gp_scenario *sc, int step)
{
    if (!gp_scenario_distributed(sc))
        return (uint64_t)gp_scenario_step_mb(sc, step);
    uint64_t W = (uint64_t)sc->distributed.world_size, K = (uint64_t)sc->batch.microbatches;
    return K * W + (sc->distributed.no_sync ? 1 : K) * (W + 2);
}

static void progress_add(const sim *S, uint64_t work)
{
    if (S->done)
        __atomic_fetch_add(S->done, work, __ATOMIC_RELAXED);
}

/* Merge unit U into the step, in unit order; its error, if it failed. */
static int unit_merge(sim *S, unit *U, int *found_inf, gp_error *err)
{
    const gp_scenario *sc = S->sc;
    uint64_t elems = 0;
    for (size_t j = 0; j < U->ng; j++) {
        size_t t = U->t[j];
        gp_stats *st = &S->res->tensors[t].st;
        stats_add(&S->step_st[t], &U->gst[j]);
        optim_counts_add(&st->opt, &U->oc[j]);
        optim_sums_add(&st->opt_ss, &U->os[j]);
        elems += min_size(sc->tensors[t].size - U->i0[j], CHUNK);
    }
    for (int k = 0; k < S->res->nsteps; k++) {
        S->traj_err[k] += U->traj_err[k];
        S->traj_ref[k] += U->traj_ref[k];
    }
    S->ref_ss = gp_dd_add(S->ref_ss, U->ref_ss);
    if (U->first.set && !S->res->first_mismatch.set)
        S->res->first_mismatch = U->first;
    if (U->twin.set && !S->res->first_twin.set)
        S->res->first_twin = U->twin;
    *found_inf |= U->found_inf;
    progress_add(S, elems * work_per_element(sc, S->step_idx));
    if (U->rc != 0)
        gp_error_set(err, "%s", U->err.msg);
    return U->rc;
}

/* Accumulate every tensor for the current step, window after window, in waves of up to
 * nunits windows run on the lanes and merged in window order: every sum the report holds
 * adds the windows' partial sums in window order, whatever the number of threads. */
static int accumulate_step(sim *S, int *found_inf, gp_error *err)
{
    size_t t = 0;
    uint64_t i0 = 0;
    for (;;) {
        if (gp_deadline_passed())
            return time_up(S, err);
        size_t nu = 0;
        while (nu < S->nunits && next_window(S, &t, &i0, &S->units[nu]))
            nu++;
        if (nu == 0)
            return 0;
        par_for(S, nu, window_run);
        for (size_t u = 0; u < nu; u++) {
            int rc = unit_merge(S, &S->units[u], found_inf, err);
            if (rc != 0)
                return rc;
        }
    }
}

/* The table that clips and updates the loss scale for backend b: its own when it has
 * the three optional entries, else the CPU emulation's (the report then says so). */
static const gp_plugin *clip_ops(const gp_backend *b)
{
    const gp_plugin *p = b->ops;
    return p->grad_sumsq && p->grad_scale && p->scaler_update ? p : gp_cpu_backend();
}

/* Global-norm clipping of the unscaled gradients: each tensor's sum of squares by the
 * backend (gp_clip.h's fixed tree; the compared backend's must agree bit for bit), the
 * norms and the coefficient on the host as torch's small tensor ops compute them:
 * *coef is the coefficient to apply, *right the one the correct order would apply.
 * Clipping before unscaling compares max_norm with the norm of the scaled gradients,
 * S times the unscaled norm (exact: S is a power of two, barring overflow to inf).
 * Returns 0, -1 when out of memory, or a backend failure's code with err set. */
static int clip_step(sim *S, float scale, float *coef, float *right, gp_error *err)
{
    const gp_scenario *sc = S->sc;
    gp_format af = sc->precision.accumulator; /* the gradients' format: norms are stored in it */
    uint32_t *norms = malloc((sc->ntensors ? sc->ntensors : 1) * sizeof *norms);
    if (!norms)
        return gp_error_set(err, "out of memory");
    for (size_t t = 0; t < sc->ntensors; t++) { /* whole tensors: equal to the chunked tree */
        gp_plugin_sumsq_args a = {sizeof a, (int32_t)af, sc->tensors[t].size, S->ts[t].acc, 0.0f};
        gp_plugin_sumsq_args a2 = a;
        const gp_backend *who = S->b;
        int rc = clip_ops(S->b)->grad_sumsq(&a);
        if (rc == 0 && S->cmp) {
            who = S->cmp;
            rc = clip_ops(S->cmp)->grad_sumsq(&a2);
        }
        if (rc != 0) {
            free(norms);
            return backend_failure(who, "grad_sumsq", rc, err);
        }
        if (S->cmp && !gp_fmt_agree(GP_FP32, gp_f32_bits(a.sumsq), gp_f32_bits(a2.sumsq))) {
            S->res->tensors[t].st.mismatches++;
            gp_mismatch_note(&S->res->first_mismatch, "grad_sumsq", "sumsq", S->step.iter, -1, t, -1, 32,
                             gp_f32_bits(a.sumsq), gp_f32_bits(a2.sumsq));
        }
        if (S->w[t] != 1.0) /* sampled: the estimate of the whole tensor's sum of squares */
            a.sumsq = (float)((double)a.sumsq * S->w[t]);
        norms[t] = gp_clip_norm_store(af, a.sumsq);
    }
    uint32_t total = gp_clip_total_norm(af, norms, sc->ntensors);
    free(norms);
    *right = gp_clip_coef(af, total, sc->clip.max_norm, 0);
    uint32_t scaled = gp_fmt_from_f32_bits(af, gp_f32_bits(gp_f32_from_bits(gp_fmt_to_f32_bits(af, total)) * scale),
                                           GP_RNE, 0, 0, (unsigned *)0);
    *coef = sc->loss_scale.unscale_before_clip ? *right : gp_clip_coef(af, scaled, sc->clip.max_norm, 0);
    return 0;
}

/* The exact clip coefficient of the reference: min(1, max_norm / (||g_full|| + 1e-6))
 * as torch's formula reads, from the double-double sum of squares (relative error of
 * the sum below 2^-100 for fewer than 2^40 elements). */
static gp_dd ref_clip_coef(const gp_scenario *sc, gp_dd ss)
{
    gp_dd one = {1.0, 0.0};
    if (sc->clip.max_norm <= 0)
        return one;
    gp_dd den = gp_dd_add(gp_dd_sqrt(ss), (gp_dd){1e-6, 0.0});
    gp_dd coef = gp_dd_div((gp_dd){sc->clip.max_norm, 0.0}, den);
    return coef.hi > 1.0 || (coef.hi == 1.0 && coef.lo > 0) ? one : coef;
}

/* The compared backend's grad_scale on a copy of the gradients before clipping (`before`),
 * element by element against the backend's result in a->grad. Returns 0, or a failure's
 * code with err set. */
static int compare_grad_scale(sim *S, size_t t, const gp_plugin_scale_args *a, const void *before, gp_error *err)
{
    gp_format af = S->sc->precision.accumulator;
    size_t bytes = (size_t)a->n * width_bytes(af);
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy)
        return gp_error_set(err, "out of memory");
    memcpy(copy, before, bytes);
    gp_plugin_scale_args a2 = *a;
    a2.grad = copy;
    int rc = clip_ops(S->cmp)->grad_scale(&a2);
    if (rc != 0) {
        free(copy);
        return backend_failure(S->cmp, "grad_scale", rc, err);
    }
    for (uint64_t i = 0; i < a->n; i++) {
        uint32_t x = gp_pack_get(af, a->grad, i), y = gp_pack_get(af, copy, i);
        if (!gp_fmt_agree(af, x, y)) {
            S->res->tensors[t].st.mismatches++;
            gp_mismatch_note(&S->res->first_mismatch, "grad_scale", "grad", S->step.iter, -1, t, (int64_t)i,
                             gp_fmt_get(af).width, x, y);
        }
    }
    free(copy);
    return 0;
}

/* The optimizer step of a coupled step's chunk (unit u, one chunk) on lane L. */
static void optimize_run(sim *S, lane *L, size_t u)
{
    unit *U = &S->units[u];
    size_t t = U->t[0], ab = width_bytes(S->sc->precision.accumulator);
    unit_reset(S, U);
    tensor_state *ts = &S->ts[t];
    U->rc = optimize_chunk(S, L, t, U->i0[0], min_size(S->sc->tensors[t].size - U->i0[0], CHUNK),
                           (char *)ts->acc + (size_t)U->i0[0] * ab, ts->gfull + U->i0[0], &U->oc[0], &U->os[0],
                           &U->first, &U->twin, &U->err);
}

/* After the accumulation of a coupled step: clip, count what scaling cost, run the
 * optimizer chunk by chunk. */
static int coupled_step(sim *S, int found_inf, float scale, gp_error *err)
{
    const gp_scenario *sc = S->sc;
    gp_format af = sc->precision.accumulator;
    float coef = 1.0f, right = 1.0f;
    int rc;
    if (sc->clip.max_norm > 0 && !found_inf && (rc = clip_step(S, scale, &coef, &right, err)) != 0)
        return rc;
    size_t ab = width_bytes(af);
    for (size_t t = 0; t < sc->ntensors; t++) {
        tensor_state *ts = &S->ts[t];
        gp_stats *st = &S->res->tensors[t].st;
        uint64_t n = sc->tensors[t].size;
        void *before = NULL;
        if (!found_inf && coef != 1.0f) { /* the backend scales the gradients in place */
            if (!(before = malloc((size_t)n * ab)))
                return gp_error_set(err, "out of memory");
            memcpy(before, ts->acc, (size_t)n * ab);
            gp_plugin_scale_args a = {sizeof a, (int32_t)af, sc->precision.ftz, coef, n, ts->acc};
            if ((rc = clip_ops(S->b)->grad_scale(&a)) != 0) {
                free(before);
                return backend_failure(S->b, "grad_scale", rc, err);
            }
            if (S->cmp && (rc = compare_grad_scale(S, t, &a, before, err)) != 0) {
                free(before);
                return rc;
            }
        }
        for (uint64_t i = 0; i < n; i++) {
            double lost;
            if (found_inf) { /* the whole gradient the reference used */
                lost = ts->gfull[i] * (S->step.ref_coef.hi + S->step.ref_coef.lo);
                st->ss_full_skipped += ts->gfull[i] * ts->gfull[i];
            } else {
                double after = gp_fmt_to_f64(af, gp_pack_get(af, ts->acc, i));
                double b = before ? gp_fmt_to_f64(af, gp_pack_get(af, before, i)) : after;
                lost = after - b * (double)right;
                if (!isfinite(lost))
                    lost = 0; /* non-finite gradients are counted as such */
            }
            st->ss_mech[GP_MECH_SCALING] += lost * lost;
        }
        free(before);
    }
    size_t t = 0;
    uint64_t i0 = 0;
    for (;;) { /* the optimizer, chunk by chunk: one unit each, in waves as the windows */
        size_t nu = 0;
        while (nu < S->nunits) {
            while (t < sc->ntensors && i0 >= sc->tensors[t].size) {
                t++;
                i0 = 0;
            }
            if (t == sc->ntensors)
                break;
            unit *U = &S->units[nu++];
            U->ng = 1;
            U->t[0] = t;
            U->i0[0] = i0;
            U->off[0] = 0;
            i0 += CHUNK;
        }
        if (nu == 0)
            return 0;
        par_for(S, nu, optimize_run);
        for (size_t u = 0; u < nu; u++) {
            unit *U = &S->units[u];
            gp_stats *st = &S->res->tensors[U->t[0]].st;
            optim_counts_add(&st->opt, &U->oc[0]);
            optim_sums_add(&st->opt_ss, &U->os[0]);
            if (U->first.set && !S->res->first_mismatch.set)
                S->res->first_mismatch = U->first;
            if (U->twin.set && !S->res->first_twin.set)
                S->res->first_twin = U->twin;
            if (U->rc != 0) {
                gp_error_set(err, "%s", U->err.msg);
                return U->rc;
            }
        }
    }
}

/* The loss-scale update by the backend (and the compared one, which must agree). */
static int scaler_step(sim *S, gp_scaler *scaler, int found_inf, gp_error *err)
{
    const gp_scenario *sc = S->sc;
    int32_t fi = found_inf;
    gp_scaler s2 = *scaler;
    gp_plugin_scaler_args a = {sizeof a, &scaler->scale, &scaler->tracker, &fi, sc->loss_scale.growth,
                               sc->loss_scale.backoff, sc->loss_scale.interval};
    int rc = clip_ops(S->b)->scaler_update(&a);
    if (rc != 0)
        return backend_failure(S->b, "scaler_update", rc, err);
    if (S->cmp) {
        a.scale = &s2.scale;
        a.tracker = &s2.tracker;
        if ((rc = clip_ops(S->cmp)->scaler_update(&a)) != 0)
            return backend_failure(S->cmp, "scaler_update", rc, err);
        int bad_scale = !gp_fmt_agree(GP_FP32, gp_f32_bits(scaler->scale), gp_f32_bits(s2.scale));
        if (bad_scale)
            gp_mismatch_note(&S->res->first_mismatch, "scaler_update", "scale", S->step.iter, -1, 0, -1, 32,
                             gp_f32_bits(scaler->scale), gp_f32_bits(s2.scale));
        if (s2.tracker != scaler->tracker)
            gp_mismatch_note(&S->res->first_mismatch, "scaler_update", "tracker", S->step.iter, -1, 0, -1, 32,
                             (uint32_t)scaler->tracker, (uint32_t)s2.tracker);
        if (bad_scale || s2.tracker != scaler->tracker)
            S->res->tensors[0].st.mismatches++;
    }
    return 0;
}

uint64_t gp_run_bytes_per_element(const gp_scenario *sc)
{
    int coupled = sc->clip.max_norm > 0 || sc->loss_scale.mode != GP_LS_NONE; /* as gp_run_scenario's S.coupled */
    size_t ab = width_bytes(sc->precision.accumulator);
    uint64_t b = 0;
    if (coupled) /* acc, comp (Kahan) and gfull for the whole step: alloc_tensors */
        b += ab + (sc->precision.rounding == GP_ACC_KAHAN ? ab : 0) + sizeof(double);
    if (sc->steps > 1) /* the optimizer state of every element, kept across steps */
        b += gp_optim_bytes_per_element(sc);
    int sampled = sc->sample != 0;
    for (size_t t = 0; t < sc->ntensors; t++)
        sampled |= sc->tensors[t].sample != 0 || sc->tensors[t].population != 0;
    if (sc->steps > 1 && sampled) /* per element: the ratio terms over the steps (alloc_tensors) and
                                     the optimizer's event counts (gp_optim_state.el_cnt) */
        b += 2 * GP_NEST * sizeof(double) * (sc->loss_scale.mode != GP_LS_NONE ? 2 : 1) + 4 * sizeof(uint32_t);
    return b;
}

uint64_t gp_run_tensor_elements(const gp_scenario *sc, size_t t)
{
    const gp_tensor_spec *ts = &sc->tensors[t];
    if (ts->grad.kind == GP_DIST_VALUES)
        return ts->size;
    if (ts->sample)
        return ts->sample < ts->size ? ts->sample : ts->size;
    if (!sc->sample)
        return ts->size;
    uint64_t M = 0; /* the elements the scenario's sample is spread over */
    for (size_t u = 0; u < sc->ntensors; u++)
        if (sc->tensors[u].grad.kind != GP_DIST_VALUES && !sc->tensors[u].sample)
            M += sc->tensors[u].size;
    if (sc->sample >= M)
        return ts->size;
    unsigned __int128 num = (unsigned __int128)sc->sample * ts->size;
    uint64_t n = (uint64_t)((num + M - 1) / M); /* ceil(N M_h / M) <= M_h since N < M */
    uint64_t lo = ts->size < 2 ? ts->size : 2;     /* two units at least: a spread to estimate */
    return n < lo ? lo : n;
}

uint64_t gp_run_work(const gp_scenario *sc)
{
    uint64_t elems = 0;
    for (size_t t = 0; t < sc->ntensors; t++)
        elems += gp_run_tensor_elements(sc, t);
    uint64_t total = 0;
    int steps = sc->steps > 0 ? sc->steps : 1;
    /* steps of equal work (no per-step counts): one multiplication, not a loop over up to
     * 2^31 steps at load */
    int distinct = sc->batch.step_mb && !gp_scenario_distributed(sc) ? steps : 1;
    for (int st = 0; st < distinct; st++) {
        uint64_t w = work_per_element(sc, st), per_step = elems > (UINT64_MAX - GP_RUN_STEP_OVERHEAD) / w
                                                            ? UINT64_MAX : elems * w + GP_RUN_STEP_OVERHEAD;
        uint64_t times = distinct == 1 ? (uint64_t)steps : 1;
        per_step = per_step > UINT64_MAX / times ? UINT64_MAX : per_step * times;
        total = per_step > UINT64_MAX - total ? UINT64_MAX : total + per_step;
    }
    return total;
}

/* The optimizer state's scratch (gp_optim_state_alloc): a compared backend's copies with
 * --compare, the model check's when the backend is a subject (not gradprec's cpu, cuda). */
static int optim_with(const sim *S)
{
    return (S->cmp ? GP_OPTIM_WITH_CMP : 0) | (S->b->builtin ? 0 : GP_OPTIM_WITH_MODELS) |
           (S->sampled ? GP_OPTIM_PER_ELEMENT : 0);
}

static int alloc_tensors(sim *S, gp_error *err)
{
    const gp_scenario *sc = S->sc;
    int kahan = sc->precision.rounding == GP_ACC_KAHAN;
    size_t ab = width_bytes(sc->precision.accumulator);
    for (size_t t = 0; t < sc->ntensors; t++) {
        tensor_state *ts = &S->ts[t];
        uint64_t size = sc->tensors[t].size;
        if (S->coupled) { /* else the lanes hold one chunk's */
            ts->acc_cap = (size_t)size;
            size_t cap = ts->acc_cap ? ts->acc_cap : 1;
            if (!(ts->acc = malloc(cap * ab)) || (kahan && !(ts->comp = malloc(cap * ab))) ||
                !(ts->gfull = malloc(cap * sizeof(double))))
                return gp_error_set(err, "out of memory (%zu elements)", cap);
        }
        if (S->persist && gp_optim_state_alloc(&ts->opt, sc, (size_t)size, optim_with(S), err) != 0)
            return -1;
        if (S->persist && S->sampled) {
            size_t cells = (size_t)(size ? size : 1) * 2 * GP_NEST;
            if (!(ts->el_tot = calloc(cells, sizeof(double))) ||
                !(ts->el_step = sc->loss_scale.mode != GP_LS_NONE ? calloc(cells, sizeof(double)) : ts->el_tot))
                return gp_error_set(err, "out of memory (%zu elements)", (size_t)size);
        }
    }
    return 0;
}

static void free_tensors(sim *S)
{
    for (size_t t = 0; S->ts && t < S->sc->ntensors; t++) {
        free(S->ts[t].acc);
        free(S->ts[t].comp);
        free(S->ts[t].gfull);
        gp_optim_state_free(&S->ts[t].opt);
        if (S->ts[t].el_step != S->ts[t].el_tot)
            free(S->ts[t].el_step);
        free(S->ts[t].el_tot);
    }
    free(S->ts);
}

static int alloc_chunk(chunk *c, int kahan, int with_cmp, int counters);
static void free_chunk(chunk *c);
static struct dist_pool *dist_alloc(const gp_scenario *sc);
static void dist_free(struct dist_pool *D);

/* The lanes and the units of a wave (two per lane: a thread that finishes early takes
 * another). Returns 0, or -1 with err (out of memory). */
static int alloc_lanes(sim *S, int counters, gp_error *err)
{
    const gp_scenario *sc = S->sc;
    int kahan = sc->precision.rounding == GP_ACC_KAHAN;
    size_t ab = width_bytes(sc->precision.accumulator), K = (size_t)S->res->nsteps, cap = 1;
    int carried = 0; /* a state or a twin is read from a dump */
    for (size_t t = 0; t < sc->ntensors; t++) {
        cap = sc->tensors[t].size > cap ? min_size(sc->tensors[t].size, CHUNK) : cap;
        carried |= S->sdump[t] || S->tdump[t];
    }
    S->lanes = calloc((size_t)S->nlanes, sizeof *S->lanes);
    S->nunits = (size_t)S->nlanes * (S->nlanes > 1 ? 2 : 1);
    S->units = calloc(S->nunits, sizeof *S->units);
    if (!S->lanes || !S->units)
        return gp_error_set(err, "out of memory");
    for (int l = 0; l < S->nlanes; l++) {
        lane *L = &S->lanes[l];
        L->c.sc = sc;
        L->c.b = S->b;
        L->c.cmp = S->cmp;
        L->c.gf = sc->precision.grad;
        L->c.af = sc->precision.accumulator;
        L->c.hist = L->hist;
        if (!(L->grp = calloc(GP_PLUGIN_MANY_MAX, sizeof *L->grp)) || !(L->wbuf = malloc(CHUNK * sizeof *L->wbuf)) ||
            (carried && !(L->sbuf = malloc(4 * CHUNK * sizeof *L->sbuf))) ||
            alloc_chunk(&L->c, kahan, S->cmp != NULL, counters) != 0 ||
            (!S->coupled && (!(L->acc = malloc(CHUNK * ab)) || (kahan && !(L->comp = malloc(CHUNK * ab))) ||
                             !(L->gfull = malloc(CHUNK * sizeof(double))))))
            return gp_error_set(err, "out of memory");
        if (gp_scenario_distributed(sc) && !(L->D = dist_alloc(sc)))
            return gp_error_set(err, "out of memory");
        if (gp_optim_state_alloc(&L->opt, sc, cap, optim_with(S), err) != 0)
            return -1;
    }
    for (size_t u = 0; u < S->nunits; u++) {
        unit *U = &S->units[u];
        if (!(U->gst = malloc(GP_PLUGIN_MANY_MAX * sizeof *U->gst)) || !(U->traj_err = calloc(K ? K : 1, sizeof(double))) ||
            !(U->traj_ref = calloc(K ? K : 1, sizeof(double))))
            return gp_error_set(err, "out of memory");
    }
    return 0;
}

static void free_lanes(sim *S)
{
    for (int l = 0; S->lanes && l < S->nlanes; l++) {
        lane *L = &S->lanes[l];
        free_chunk(&L->c);
        free(L->grp);
        free(L->wbuf);
        free(L->sbuf);
        free(L->acc);
        free(L->comp);
        free(L->gfull);
        dist_free(L->D);
        gp_optim_state_free(&L->opt);
    }
    for (size_t u = 0; S->units && u < S->nunits; u++) {
        free(S->units[u].gst);
        free(S->units[u].traj_err);
        free(S->units[u].traj_ref);
    }
    free(S->lanes);
    free(S->units);
}

static int alloc_chunk(chunk *c, int kahan, int with_cmp, int counters)
{
    for (int k = 0; k < NCNT && counters; k++)
        if (!(c->cnt[k] = malloc(CHUNK * sizeof(uint32_t))))
            return -1;
    size_t ab = width_bytes(c->af), gb = width_bytes(c->gf);
    int ok = (c->xs = malloc(CHUNK * sizeof *c->xs)) && (c->partial = malloc(CHUNK * sizeof *c->partial)) &&
             (c->sr_prev = malloc(CHUNK * sizeof *c->sr_prev)) &&
             (c->grad = malloc(CHUNK * gb)) && (c->old = malloc(CHUNK * ab)) &&
             (!with_cmp || (c->acc2 = malloc(CHUNK * ab))) && (!(with_cmp && kahan) || (c->comp2 = malloc(CHUNK * ab))) &&
             (c->m = malloc(CHUNK * sizeof *c->m)) && (c->noise = malloc(CHUNK * sizeof *c->noise)) && (c->sum_m = malloc(CHUNK * sizeof *c->sum_m)) &&
             (c->sum_nm = malloc(CHUNK * sizeof *c->sum_nm)) && (c->gacc = malloc(CHUNK * sizeof *c->gacc)) &&
             (c->gsame = malloc(CHUNK * sizeof *c->gsame)) && (c->sp_m = malloc(CHUNK * sizeof *c->sp_m)) &&
             (c->sp_nm = malloc(CHUNK * sizeof *c->sp_nm));
    for (int m = 0; m < GP_MECH_GRAD_END; m++)
        ok = ok && (c->err[m] = malloc(CHUNK * sizeof(double)));
    return ok ? 0 : -1;
}

static void free_chunk(chunk *c)
{
    for (int k = 0; k < NCNT; k++)
        free(c->cnt[k]);
    free(c->xs);
    free(c->partial);
    free(c->sr_prev);
    free(c->grad);
    free(c->old);
    free(c->acc2);
    free(c->comp2);
    for (int m = 0; m < GP_MECH_GRAD_END; m++)
        free(c->err[m]);
    free(c->m);
    free(c->noise);
    free(c->sum_m);
    free(c->sum_nm);
    free(c->gacc);
    free(c->gsame);
    free(c->sp_m);
    free(c->sp_nm);
}

static void dist_free(struct dist_pool *D)
{
    if (!D)
        return;
    free(D->racc);
    free(D->val);
    free(D->part);
    free(D->add);
    free(D->pold);
    for (int m = 0; m < GP_MECH_GRAD_END; m++)
        free(D->cerr[m]);
    free(D->sh);
    free(D->sl);
    free(D);
}

static struct dist_pool *dist_alloc(const gp_scenario *sc)
{
    struct dist_pool *D = calloc(1, sizeof *D);
    if (!D)
        return NULL;
    D->W = sc->distributed.world_size;
    D->rd = gp_scenario_reduce_dtype(sc);
    D->ab = width_bytes(sc->precision.accumulator);
    D->rb = width_bytes(D->rd);
    size_t W = (size_t)D->W;
    int ok = (D->racc = malloc(W * CHUNK * D->ab)) && (D->val = malloc(W * CHUNK * D->rb)) &&
             (D->part = malloc(CHUNK * D->rb)) && (D->add = malloc(CHUNK * D->rb)) &&
             (D->pold = malloc(CHUNK * D->rb)) && (D->sh = malloc(CHUNK * sizeof(double))) &&
             (D->sl = malloc(CHUNK * sizeof(double)));
    for (int m = 0; m < GP_MECH_GRAD_END; m++)
        ok = ok && (D->cerr[m] = calloc(CHUNK, sizeof(double)));
    if (!ok) {
        dist_free(D);
        return NULL;
    }
    return D;
}

static gp_schedule_params schedule_of(const gp_scenario *sc)
{
    gp_schedule_params p;
    p.kind = (int)sc->schedule.kind;
    p.warmup = sc->schedule.warmup;
    p.total = sc->schedule.total > 0 ? sc->schedule.total : sc->steps;
    p.base_lr = sc->optimizer.lr;
    p.min_lr = sc->schedule.min_lr;
    p.gamma = sc->schedule.gamma;
    p.step_size = sc->schedule.step_size;
    return p;
}

/* A sampled run with clipping, iteration it: the estimate of the whole model's norm of the
 * exact gradients and of the coefficient, with 95% intervals, into res->clip_by_step. T^ =
 * sum_h (M_h/n_h) sum_{S_h} g^2 is M times the combined ratio estimator of the mean of y = g^2
 * with x = 1 (X = M, known), and its delta-method variance is then T^'s expansion-estimator
 * variance sum_h M_h^2 (1 - n_h/M_h) s_h^2 / n_h (s_h^2 of y - R^ equals that of y), so
 * gp_ratio_interval gives T^'s interval; sqrt and min(1, max_norm / (x + 1e-6)) are
 * monotone, so the ends map to intervals of the norm and the coefficient with the same
 * coverage. Needs the tensors' whole exact gradients (coupled runs keep them). */
static void clip_interval(sim *S, int it)
{
    const gp_scenario *sc = S->sc;
    size_t nt = sc->ntensors;
    double *out = S->res->clip_by_step + (size_t)it * 6;
    gp_ratio_sums *strata = calloc(nt ? nt : 1, sizeof *strata);
    double *pop = malloc((nt ? nt : 1) * sizeof *pop), est, lo, hi, M = 0;
    for (int k = 0; k < 6; k++)
        out[k] = NAN;
    for (size_t t = 0; t < nt && strata && pop; t++) {
        for (uint64_t i = 0; i < sc->tensors[t].size; i++)
            gp_ratio_add(&strata[t], S->ts[t].gfull[i] * S->ts[t].gfull[i], 1.0);
        pop[t] = S->pop[t] ? (double)S->pop[t] : strata[t].n;
        M += pop[t];
    }
    if (strata && pop && gp_ratio_interval(strata, pop, nt, &est, &lo, &hi) == 0) {
        double T[3] = {M * est, M * lo, M * hi};
        for (int k = 0; k < 3; k++)
            out[k] = sqrt(T[k]);
        for (int k = 0; k < 3; k++) /* decreasing in the norm: the ends swap */
            out[3 + k] = fmin(1.0, sc->clip.max_norm / (out[k == 0 ? 0 : 3 - k] + 1e-6));
    }
    free(strata);
    free(pop);
}

/* The LR of iteration it (1-based) for tensor t (t == SIZE_MAX: the scenario's): lr_steps
 * when given (the tensor's, else the scenario's unless the tensor has its own lr), else
 * its lr (the tensor's, else the scenario's) times the schedule. */
static double lr_at(const gp_scenario *sc, size_t t, const gp_schedule_params *sched, int it)
{
    const gp_tensor_spec *ts = t == SIZE_MAX ? NULL : &sc->tensors[t];
    if (ts && ts->optimizer.lr_steps)
        return ts->optimizer.lr_steps[it - 1];
    if (sc->optimizer.lr_steps && !(ts && ts->optimizer.set_lr))
        return sc->optimizer.lr_steps[it - 1];
    gp_schedule_params p = *sched;
    if (ts && ts->optimizer.set_lr)
        p.base_lr = ts->optimizer.lr;
    return gp_schedule_lr(&p, (long)it);
}

/* The iteration's inputs: K_s and N_s (every rank's tokens: the all-reduced count), and
 * each tensor's step (S->tstep): its lr, weight decay, step count T0 + S->step.t and the
 * reference's scalars of step T0 + it (computed once for tensors that share all three). */
static void step_inputs(sim *S, const gp_schedule_params *sched, int it)
{
    const gp_scenario *sc = S->sc;
    S->K = gp_scenario_step_mb(sc, it - 1);
    S->N = 0;
    for (int r = 0; r < (gp_scenario_distributed(sc) ? sc->distributed.world_size : 1); r++)
        for (int k = 0; k < S->K; k++)
            S->N += (double)(sc->batch.step_tokens ? sc->batch.step_tokens[it - 1][k] : gp_scenario_tokens(sc, r, k));
    for (size_t t = 0; t < sc->ntensors; t++) {
        const gp_tensor_spec *ts = &sc->tensors[t];
        gp_optim_step *o = &S->tstep[t];
        o->lr = lr_at(sc, t, sched, it);
        o->weight_decay = ts->optimizer.set_wd ? ts->optimizer.weight_decay : sc->optimizer.weight_decay;
        o->t = ts->state.step + S->step.t;
        size_t q = 0;
        while (q < t && !(S->tstep[q].lr == o->lr && S->tstep[q].weight_decay == o->weight_decay &&
                          sc->tensors[q].state.step == ts->state.step))
            q++;
        o->ref = q < t ? S->tstep[q].ref
                       : gp_adamw_dd_scalars_make(o->lr, sc->optimizer.beta1, sc->optimizer.beta2, sc->optimizer.eps,
                                                  o->weight_decay, ts->state.step + it);
    }
}

/* All iterations: accumulate → unscale → clip → AdamW → scale update. */
static int simulate(sim *S, gp_error *err)
{
    const gp_scenario *sc = S->sc;
    gp_result *res = S->res;
    gp_schedule_params sched = schedule_of(sc);
    gp_scaler scaler = gp_scaler_init(sc->loss_scale.init);
    scaler.tracker = sc->loss_scale.tracker; /* a capture's GradScaler state at entry */
    int scaled = sc->loss_scale.mode != GP_LS_NONE;
    res->min_loss_scale = scaled ? (double)scaler.scale : 1.0;
    long t_backend = 0;
    for (int it = 1; it <= sc->steps; it++) {
        S->step.iter = it;
        if (gp_deadline_passed())
            return time_up(S, err);
        float scale = scaled ? scaler.scale : 1.0f;
        gp_optim_counts before = {0};
        for (size_t t = 0; t < sc->ntensors; t++)
            optim_counts_add(&before, &res->tensors[t].st.opt);
        S->step_idx = it - 1;
        memset(S->step_st, 0, sc->ntensors * sizeof *S->step_st);
        for (size_t t = 0; t < sc->ntensors; t++)
            if (S->ts[t].el_step != S->ts[t].el_tot)
                memset(S->ts[t].el_step, 0, (size_t)sc->tensors[t].size * 2 * GP_NEST * sizeof(double));
        memset(S->traj_err, 0, (size_t)res->nsteps * sizeof(double));
        memset(S->traj_ref, 0, (size_t)res->nsteps * sizeof(double));
        S->scale = scale;
        S->rscale = sc->loss_scale.nreplay_scales ? sc->loss_scale.replay_scales[it - 1] : 1.0;
        S->ref_ss = (gp_dd){0.0, 0.0};
        int found_inf = 0, rc = 0;
        S->step.iter = it;
        S->step.lr = lr_at(sc, SIZE_MAX, &sched, it);
        S->step.weight_decay = sc->optimizer.weight_decay;
        S->step.found_inf = 0;
        S->step.first = &res->first_mismatch;
        S->step.t = t_backend + 1;
        step_inputs(S, &sched, it);
        if (!S->coupled) { /* nothing can skip or clip: each chunk's step follows its accumulation */
            S->step.ref_coef = (gp_dd){1.0, 0.0};
            t_backend++;
        }
        rc = accumulate_step(S, &found_inf, err);
        if (rc == 0 && res->clip_by_step && !found_inf)
            clip_interval(S, it - 1);
        if (rc == 0 && S->coupled) {
            S->step.found_inf = found_inf;
            S->step.ref_coef = ref_clip_coef(sc, S->ref_ss);
            if (!found_inf)
                t_backend++;
            rc = coupled_step(S, found_inf, scale, err);
        }
        if (rc != 0)
            return rc;
        if (found_inf) /* the step's statistics are dropped; where its overflows were is not */
            for (size_t t = 0; t < sc->ntensors; t++)
                res->tensors[t].st.overflow_skipped += S->step_st[t].overflow;
        if (!found_inf) {
            for (size_t t = 0; t < sc->ntensors; t++)
                stats_add(&res->tensors[t].st, &S->step_st[t]);
            for (size_t t = 0; t < sc->ntensors; t++) /* a kept step's per-element terms */
                for (size_t i = 0; S->ts[t].el_step != S->ts[t].el_tot && i < sc->tensors[t].size * 2 * GP_NEST; i++)
                    S->ts[t].el_tot[i] += S->ts[t].el_step[i];
            for (int k = 0; k < res->nsteps; k++) {
                res->traj_err_ss[k] += S->traj_err[k];
                res->traj_ref_ss[k] += S->traj_ref[k];
            }
        }
        gp_optim_counts after = {0};
        for (size_t t = 0; t < sc->ntensors; t++)
            optim_counts_add(&after, &res->tensors[t].st.opt);
        uint64_t nz = after.nonzero - before.nonzero, stale = after.stale - before.stale;
        res->stale_by_step[it - 1] = nz ? (double)stale / (double)nz : 0;
        res->loss_scale_by_step[it - 1] = scale;
        res->lr_by_step[it - 1] = S->step.lr;
        res->skipped_by_step[it - 1] = (uint8_t)found_inf;
        res->skipped_steps += found_inf;
        if (scaled && sc->loss_scale.mode == GP_LS_DYNAMIC && sc->loss_scale.update &&
            (rc = scaler_step(S, &scaler, found_inf, err)) != 0)
            return rc;
        if (scaled && (double)scaler.scale < res->min_loss_scale)
            res->min_loss_scale = scaler.scale;
        progress_add(S, GP_RUN_STEP_OVERHEAD);
    }
    res->adam_steps = (int)t_backend;
    if (S->persist)
        for (size_t t = 0; t < sc->ntensors; t++)
            for (uint64_t i0 = 0; i0 < sc->tensors[t].size; i0 += CHUNK)
                gp_optim_final(&S->ts[t].opt, (size_t)i0, min_size(sc->tensors[t].size - i0, CHUNK),
                               &res->tensors[t].st.opt_ss);
    for (size_t t = 0; t < sc->ntensors; t++) /* each element's totals over the steps: one unit */
        for (uint64_t i = 0; S->ts[t].el_tot && i < sc->tensors[t].size; i++)
            for (int e = 0; e < GP_NEST; e++)
                gp_ratio_add(&res->tensors[t].st.est[e], S->ts[t].el_tot[(i * GP_NEST + (uint64_t)e) * 2],
                             S->ts[t].el_tot[(i * GP_NEST + (uint64_t)e) * 2 + 1]);
    return 0;
}

/* ---- replayed and sampled tensors ---- */

/* What one run needs for its replayed tensors: the dumps (opened once), the elements a
 * `sample:` chose, and the scenario as the runner sees it: a shallow copy whose sampled
 * tensors have their sample's size (element j of the run is element idx[j] of the dump). */
typedef struct {
    gp_scenario view;
    gp_replay **dump, **wdump; /* [ntensors] */
    gp_replay **sdump, **tdump; /* [ntensors] tensors[t].state's and .twin's dumps, else NULL */
    uint64_t **idx;            /* [ntensors] */
    double *w;                 /* [ntensors] expansion weight M_h / n_h (1: not sampled) */
    uint64_t *pop;             /* [ntensors] a sampled tensor's elements M (by `sample:` or
                                  a dump that holds a sample, `population:`), else 0 */
    int sampled;
} replay_run;

static void replay_end(replay_run *R, size_t nt)
{
    for (size_t t = 0; t < nt; t++) {
        if (R->dump)
            gp_replay_close(R->dump[t]);
        if (R->wdump)
            gp_replay_close(R->wdump[t]);
        if (R->sdump)
            gp_replay_close(R->sdump[t]);
        if (R->tdump)
            gp_replay_close(R->tdump[t]);
        if (R->idx)
            free(R->idx[t]);
    }
    free(R->dump);
    free(R->wdump);
    free(R->sdump);
    free(R->tdump);
    free(R->idx);
    free(R->w);
    free(R->pop);
    free(R->view.tensors);
}

/* Open the dumps and choose the samples of scenario sc (a dump that fails to open: -3). */
static int replay_begin(const gp_scenario *sc, replay_run *R, gp_error *err)
{
    size_t nt = sc->ntensors;
    memset(R, 0, sizeof *R);
    R->view = *sc;
    R->view.tensors = malloc((nt ? nt : 1) * sizeof *R->view.tensors);
    R->dump = calloc(nt ? nt : 1, sizeof *R->dump);
    R->wdump = calloc(nt ? nt : 1, sizeof *R->wdump);
    R->sdump = calloc(nt ? nt : 1, sizeof *R->sdump);
    R->tdump = calloc(nt ? nt : 1, sizeof *R->tdump);
    R->idx = calloc(nt ? nt : 1, sizeof *R->idx);
    R->w = malloc((nt ? nt : 1) * sizeof *R->w);
    R->pop = calloc(nt ? nt : 1, sizeof *R->pop);
    if (!R->view.tensors || !R->dump || !R->wdump || !R->sdump || !R->tdump || !R->idx || !R->w || !R->pop) {
        replay_end(R, 0);
        return gp_error_set(err, "out of memory");
    }
    memcpy(R->view.tensors, sc->tensors, nt * sizeof *sc->tensors);
    for (size_t t = 0; t < nt; t++) {
        const gp_tensor_spec *ts = &sc->tensors[t];
        gp_error e = {""};
        /* Shared (gp_replay.h): every tensor, scenario and sweep point of the run reads one
         * parsed dump. The loader opened it: failing now, it changed since (a fault). */
        if (ts->grad.kind == GP_DIST_REPLAY && gp_replay_open(ts->grad.replay, &R->dump[t], &e) != 0) {
            replay_end(R, nt);
            gp_error_set(err, "tensor '%s': %s", ts->name, e.msg);
            return -3;
        }
        if (ts->weight.kind == GP_DIST_REPLAY && gp_replay_open(ts->weight.replay, &R->wdump[t], &e) != 0) {
            replay_end(R, nt);
            gp_error_set(err, "tensor '%s': %s", ts->name, e.msg);
            return -3;
        }
        if ((ts->state.replay && gp_replay_open(ts->state.replay, &R->sdump[t], &e) != 0) ||
            (ts->twin.replay && gp_replay_open(ts->twin.replay, &R->tdump[t], &e) != 0)) {
            replay_end(R, nt);
            gp_error_set(err, "tensor '%s': %s", ts->name, e.msg);
            return -3;
        }
        uint64_t n = gp_run_tensor_elements(sc, t);
        R->w[t] = 1.0;
        if (n < ts->size) {
            R->w[t] = (double)ts->size / (double)n;
            R->sampled = 1;
            if (!(R->idx[t] = malloc(n * sizeof(uint64_t))) ||
                gp_sample_indices(sc->seed, gp_stream_id(GP_STREAM_SAMPLE, t, 0, 0), ts->size, n, R->idx[t], &e) != 0) {
                replay_end(R, nt);
                return gp_error_set(err, "tensor '%s': out of memory choosing its sample", ts->name);
            }
            R->view.tensors[t].size = (size_t)n;
        }
        uint64_t M = ts->population > ts->size ? ts->population : ts->size; /* the tensor's elements */
        if (R->view.tensors[t].size < M) { /* sampled here, or in the dump (population: M) */
            R->sampled = 1;
            R->pop[t] = M;
            R->w[t] = (double)M / (double)R->view.tensors[t].size;
        }
        int how = R->idx[t] ? GP_REPLAY_RANDOM : GP_REPLAY_SEQUENTIAL;
        if (R->dump[t])
            gp_replay_access(R->dump[t], how);
        if (R->wdump[t])
            gp_replay_access(R->wdump[t], how);
        if (R->sdump[t])
            gp_replay_access(R->sdump[t], how);
        if (R->tdump[t])
            gp_replay_access(R->tdump[t], how);
    }
    return 0;
}

/* The metric each ratio estimate gives (its square root for the norm ratios). */
/* The metrics with an interval: a ratio estimate of gp_stats.est (k < GP_NEST, in its
 * order) or of gp_optim_sums.est (k - GP_NEST), reported as R, sqrt(R) (root) or X^ R
 * (total: a count, x = 1 per element-step); `after` marks those computed after the
 * optimizer step. */
enum { NEST_ALL = GP_NEST + GP_OPTIM_NEST };
static const struct { gp_metric m; int root, after, total; } est_metric[NEST_ALL] = {
    {GP_M_GRAD_REL_ERR_FULLBATCH, 1, 0, 0}, {GP_M_GRAD_REL_ERR_ROUNDING, 1, 0, 0},
    {GP_M_NORMALIZATION_REL_ERR, 1, 0, 0},  {GP_M_GRAD_NORM_RATIO, 1, 0, 0},
    {GP_M_ABSORBED_FRAC, 0, 0, 0},          {GP_M_UNDERFLOW_FRAC, 0, 0, 0},
    {GP_M_SUBNORMAL_FRAC, 0, 0, 0},         {GP_M_OVERFLOW_COUNT, 0, 0, 1},
    {GP_M_NONFINITE_COUNT, 0, 0, 1},        {GP_M_WEIGHT_REL_ERR, 1, 1, 0},
    {GP_M_M_REL_ERR, 1, 1, 0},              {GP_M_V_REL_ERR, 1, 1, 0},
    {GP_M_STALE_UPDATE_FRAC, 0, 1, 0},      {GP_M_STATE_UNDERFLOW_FRAC, 0, 1, 0}};

/* The interval [lo, hi] of the ratio R (gp_ratio_interval's) as the metric reports it into
 * lo_out, hi_out; X^ = sum_h (pop_h / n_h) sx_h scales a total's. */
static void est_report(int e, const gp_ratio_sums *s, const double *pop, size_t nh, double lo, double hi,
                       double *lo_out, double *hi_out)
{
    double f = 1;
    if (est_metric[e].total) {
        f = 0;
        for (size_t h = 0; h < nh; h++)
            f += s[h].n > 0 ? pop[h] / s[h].n * s[h].sx : 0;
    }
    *lo_out = est_metric[e].root ? sqrt(lo) : f * lo;
    *hi_out = est_metric[e].root ? sqrt(hi) : f * hi;
}

static const gp_ratio_sums *est_sums(const gp_stats *st, int k)
{
    return k < GP_NEST ? &st->est[k] : &st->opt_ss.est[k - GP_NEST];
}

/* Intervals of a sampled run, for any number of steps: the unit is an element, its y and x
 * its totals over the steps (docs/scenarios.md, "Estimates at scale"). Per tensor from its
 * own sums, per scenario stratified over the tensors. With global-norm clipping the metrics
 * after the step get none: the coefficient every element's step used is itself estimated
 * from the sample (docs/scenarios.md, "What couples the tensors"). */
static void sampled_intervals(const gp_scenario *sc, const replay_run *R, gp_result *res)
{
    size_t nt = res->ntensors;
    res->sampled = 1;
    for (size_t t = 0; t < nt; t++)
        res->tensors[t].population = R->pop[t];
    gp_ratio_sums *strata = malloc((nt ? nt : 1) * sizeof *strata);
    double *pop = malloc((nt ? nt : 1) * sizeof *pop);
    for (int e = 0; e < NEST_ALL && strata && pop; e++) {
        gp_metric m = est_metric[e].m;
        double est, lo, hi;
        if (est_metric[e].after && sc->clip.max_norm > 0)
            continue;
        for (size_t t = 0; t < nt; t++) {
            gp_tensor_result *tr = &res->tensors[t];
            strata[t] = *est_sums(&tr->st, e);
            pop[t] = R->pop[t] ? (double)R->pop[t] : strata[t].n;
            if (R->pop[t] && gp_ratio_interval(&strata[t], &pop[t], 1, &est, &lo, &hi) == 0 && isfinite(hi)) {
                tr->has_ci[m] = 1;
                est_report(e, &strata[t], &pop[t], 1, lo, hi, &tr->ci_lo[m], &tr->ci_hi[m]);
            }
        }
        /* an infinite error in the sample (a non-finite weight or gradient): no interval */
        if (gp_ratio_interval(strata, pop, nt, &est, &lo, &hi) == 0 && isfinite(hi)) {
            res->has_ci[m] = 1;
            est_report(e, strata, pop, nt, lo, hi, &res->ci_lo[m], &res->ci_hi[m]);
        }
    }
    free(strata);
    free(pop);
}

static int run_scenario(const gp_scenario *sc, const replay_run *R, const gp_run_ctl *ctl, const gp_backend *b,
                        const gp_backend *cmp, gp_result *res, gp_error *err);

int gp_run_scenario(const gp_scenario *sc, const gp_backend *b, const gp_backend *cmp, gp_result *res,
                    gp_error *err)
{
    return gp_run_scenario_ctl(sc, NULL, b, cmp, res, err);
}

int gp_run_scenario_ctl(const gp_scenario *sc, const gp_run_ctl *ctl, const gp_backend *b, const gp_backend *cmp,
                        gp_result *res, gp_error *err)
{
    replay_run R;
    memset(res, 0, sizeof *res);
    int rc = replay_begin(sc, &R, err);
    if (rc != 0)
        return rc;
    rc = run_scenario(&R.view, &R, ctl, b, cmp, res, err);
    if (rc == 0 && R.sampled) {
        sampled_intervals(sc, &R, res);
        judge(sc, res); /* again, with the intervals */
    }
    replay_end(&R, sc->ntensors);
    if (rc == 0 && gp_scenario_distributed(sc) && !sc->distributed.no_sync) {
        /* the correct loop on the same gradients, for the missing no_sync's extra error;
         * its work is not counted as progress (gp_run_work counts the scenario's own) */
        gp_scenario twin = *sc; /* shares sc's arrays, read only */
        twin.distributed.no_sync = 1;
        gp_run_ctl c2 = {ctl ? ctl->threads : 1, NULL};
        gp_result tr;
        if ((rc = gp_run_scenario_ctl(&twin, &c2, b, NULL, &tr, err)) != 0) {
            gp_result_free(res);
            return rc;
        }
        res->has_no_sync_twin = 1;
        res->twin_rel_err_rounding = tr.metric[GP_M_GRAD_REL_ERR_ROUNDING];
        res->twin_collective_rel_err = tr.metric[GP_M_COLLECTIVE_REL_ERR];
        gp_result_free(&tr);
    }
    return rc;
}

static int run_scenario(const gp_scenario *sc, const replay_run *R, const gp_run_ctl *ctl, const gp_backend *b,
                        const gp_backend *cmp, gp_result *res, gp_error *err)
{
    memset(res, 0, sizeof *res);
    res->ntensors = sc->ntensors;
    res->nsteps = sc->batch.microbatches;
    res->nopt = sc->steps;
    size_t no = (size_t)sc->steps;
    res->tensors = calloc(sc->ntensors, sizeof *res->tensors);
    res->traj_err_ss = calloc((size_t)res->nsteps, sizeof(double));
    res->traj_ref_ss = calloc((size_t)res->nsteps, sizeof(double));
    res->stale_by_step = calloc(no, sizeof(double));
    res->loss_scale_by_step = calloc(no, sizeof(double));
    res->lr_by_step = calloc(no, sizeof(double));
    res->skipped_by_step = calloc(no, 1);
    sim S;
    memset(&S, 0, sizeof S);
    S.sc = sc;
    S.b = b;
    S.cmp = cmp;
    S.res = res;
    S.coupled = sc->clip.max_norm > 0 || sc->loss_scale.mode != GP_LS_NONE;
    S.persist = sc->steps > 1;
    S.sampled = R->sampled;
    S.ts = calloc(sc->ntensors, sizeof *S.ts);
    S.step_st = calloc(sc->ntensors, sizeof *S.step_st);
    S.traj_err = calloc((size_t)res->nsteps, sizeof(double));
    S.traj_ref = calloc((size_t)res->nsteps, sizeof(double));
    S.dump = R->dump;
    S.wdump = R->wdump;
    S.sdump = R->sdump;
    S.tdump = R->tdump;
    S.tstep = calloc(sc->ntensors, sizeof *S.tstep);
    S.idx = R->idx;
    S.w = R->w;
    S.pop = R->pop;
    S.nlanes = ctl && ctl->threads > 1 ? (ctl->threads < GP_RUN_MAX_THREADS ? ctl->threads : GP_RUN_MAX_THREADS) : 1;
    S.done = ctl ? ctl->done : NULL;
    int dist = gp_scenario_distributed(sc);
    int rc = 0;
    if (!res->tensors || !res->traj_err_ss || !res->traj_ref_ss || !res->stale_by_step || !res->loss_scale_by_step ||
        !res->lr_by_step || !res->skipped_by_step || !S.ts || !S.step_st || !S.traj_err || !S.traj_ref || !S.tstep)
        rc = gp_error_set(err, "out of memory");
    if (rc == 0 && R->sampled && sc->clip.max_norm > 0 && !(res->clip_by_step = malloc(no * 6 * sizeof(double))))
        rc = gp_error_set(err, "out of memory");
    for (size_t k = 0; rc == 0 && res->clip_by_step && k < no * 6; k++)
        res->clip_by_step[k] = NAN;
    if (rc == 0)
        rc = alloc_lanes(&S, R->sampled, err);
    if (rc == 0)
        rc = alloc_tensors(&S, err);
    for (size_t t = 0; t < sc->ntensors && rc == 0; t++) {
        snprintf(res->tensors[t].name, sizeof res->tensors[t].name, "%s", sc->tensors[t].name);
        res->tensors[t].size = sc->tensors[t].size;
    }
    res->emulated_clip_scaler = clip_ops(b) != b->ops && (sc->clip.max_norm > 0 || (sc->loss_scale.mode == GP_LS_DYNAMIC &&
                                                                                   sc->loss_scale.update));
    if (rc == 0)
        rc = simulate(&S, err);
    for (int l = 0; rc == 0 && l < S.nlanes; l++) /* integer counts: any order */
        for (int h = 0; h < GP_HIST_BINS; h++)
            res->hist[h] += S.lanes[l].hist[h];
    free_lanes(&S);
    free_tensors(&S);
    free(S.step_st);
    free(S.tstep);
    free(S.traj_err);
    free(S.traj_ref);
    if (rc != 0) {
        gp_result_free(res);
        return rc;
    }
    for (size_t t = 0; t < res->ntensors; t++) {
        gp_tensor_result *tr = &res->tensors[t];
        derive(&tr->st, tr->metric, tr->loss);
        /* a sampled tensor stands for all its elements: its sums count M/n times */
        stats_add_w(&res->st, &tr->st, R->pop[t] ? (double)R->view.tensors[t].size : 1.0,
                    R->pop[t] ? (double)R->pop[t] : 1.0);
        tr->metric[GP_M_SKIPPED_STEPS] = res->skipped_steps;
        tr->metric[GP_M_MIN_LOSS_SCALE] = res->min_loss_scale;
    }
    derive(&res->st, res->metric, res->loss);
    for (size_t t = 0; t < res->ntensors && res->nopt > 0 && res->skipped_steps == res->nopt; t++)
        all_skipped(res->tensors[t].metric, res->tensors[t].loss);
    if (res->nopt > 0 && res->skipped_steps == res->nopt)
        all_skipped(res->metric, res->loss);
    if (dist) { /* the collective's own loss: one process has none (the metric stays absent) */
        for (size_t t = 0; t < res->ntensors; t++)
            res->tensors[t].metric[GP_M_COLLECTIVE_REL_ERR] = ratio(res->tensors[t].st.coll.ss, res->tensors[t].st.ss_same);
        res->metric[GP_M_COLLECTIVE_REL_ERR] = ratio(res->st.coll.ss, res->st.ss_same);
        for (int m = 0; m < GP_NMECH; m++)
            res->coll_loss[m] = ratio(res->st.coll.ss_mech[m], res->st.ss_full);
    }
    res->metric[GP_M_SKIPPED_STEPS] = res->skipped_steps;
    res->metric[GP_M_MIN_LOSS_SCALE] = res->min_loss_scale;
    res->floor_grad = gp_format_floor(sc->precision.grad, sc->precision.accumulator, res->st.ss_x, res->st.ss_same,
                                      res->st.ss_full);
    if (dist && res->st.ss_full > 0) { /* and the result stored once in the reduce dtype */
        double ur = gp_unit_roundoff(gp_scenario_reduce_dtype(sc));
        res->floor_grad = sqrt(res->floor_grad * res->floor_grad + ur * ur * res->st.ss_same / (3.0 * res->st.ss_full));
    }
    res->floor_weight = gp_unit_roundoff(sc->optimizer.master ? GP_FP32 : sc->optimizer.param) / sqrt(3.0);
    judge(sc, res);
    return 0;
}

/* Mean and sample standard deviation of x[0..n) (two passes; n >= 2). */
static void mean_sd(const double *x, int n, double *mean, double *sd)
{
    double m = 0, ss = 0;
    for (int j = 0; j < n; j++)
        m += x[j];
    m /= n;
    for (int j = 0; j < n; j++)
        ss += (x[j] - m) * (x[j] - m);
    *mean = m;
    *sd = isfinite(m) ? sqrt(ss / (n - 1)) : 0;
}

int gp_run_scenario_seeds(const gp_scenario *sc, int nseeds, const gp_run_ctl *ctl, const gp_backend *b,
                          const gp_backend *cmp, gp_result *res, gp_error *err)
{
    int rc = gp_run_scenario_ctl(sc, ctl, b, cmp, res, err);
    res->nseeds = 1;
    if (rc != 0 || nseeds <= 1)
        return rc;
    size_t nt = res->ntensors, per = (size_t)GP_NMETRICS * (1 + nt) + GP_NMECH + 2;
    double *v = malloc(per * (size_t)nseeds * sizeof *v); /* [seed][values], values as below */
    if (!v) {
        gp_result_free(res);
        return gp_error_set(err, "out of memory");
    }
    for (int j = 0; j < nseeds && rc == 0; j++) {
        gp_result rj, *r = res;
        if (j > 0) {
            gp_scenario t = *sc; /* shares sc's arrays, read only */
            t.seed = sc->seed + (uint64_t)j;
            if ((rc = gp_run_scenario_ctl(&t, ctl, b, cmp, &rj, err)) != 0)
                break;
            r = &rj;
            stats_add(&res->st, &rj.st);
            for (size_t q = 0; q < nt; q++)
                stats_add(&res->tensors[q].st, &rj.tensors[q].st);
        }
        double *o = v + per * (size_t)j;
        memcpy(o, r->metric, GP_NMETRICS * sizeof *o);
        for (size_t q = 0; q < nt; q++)
            memcpy(o + GP_NMETRICS * (1 + q), r->tensors[q].metric, GP_NMETRICS * sizeof *o);
        memcpy(o + GP_NMETRICS * (1 + nt), r->loss, GP_NMECH * sizeof *o);
        o[per - 2] = r->floor_grad;
        o[per - 1] = r->floor_weight;
        if (j > 0)
            gp_result_free(&rj);
    }
    if (rc != 0) {
        free(v);
        gp_result_free(res);
        return rc;
    }
    double *col = malloc((size_t)nseeds * sizeof *col), mean, sd;
    if (!col) {
        free(v);
        gp_result_free(res);
        return gp_error_set(err, "out of memory");
    }
    for (size_t i = 0; i < per; i++) {
        for (int j = 0; j < nseeds; j++)
            col[j] = v[per * (size_t)j + i];
        mean_sd(col, nseeds, &mean, &sd);
        if (i < GP_NMETRICS) {
            res->metric[i] = mean;
            res->metric_sd[i] = sd;
        } else if (i < (size_t)GP_NMETRICS * (1 + nt)) {
            size_t q = i / GP_NMETRICS - 1, m = i % GP_NMETRICS;
            res->tensors[q].metric[m] = mean;
            res->tensors[q].metric_sd[m] = sd;
        } else if (i < per - 2) {
            res->loss[i - (size_t)GP_NMETRICS * (1 + nt)] = mean;
        } else if (i == per - 2) {
            res->floor_grad = mean;
        } else {
            res->floor_weight = mean;
        }
    }
    free(col);
    free(v);
    res->nseeds = nseeds;
    judge(sc, res);
    return 0;
}

void gp_result_free(gp_result *res)
{
    free(res->tensors);
    free(res->traj_err_ss);
    free(res->traj_ref_ss);
    free(res->stale_by_step);
    free(res->loss_scale_by_step);
    free(res->lr_by_step);
    free(res->skipped_by_step);
    free(res->clip_by_step);
    memset(res, 0, sizeof *res);
}
