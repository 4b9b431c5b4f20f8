/* gp_runner.c — see gp_runner.h for the model. */
#include "gp_runner.h"

#include <gmp.h>
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/arith/gp_accum.h"
#include "../reference/gp_exact.h"
#include "gp_generate.h"

#define CHUNK 16384 /* elements processed together; results do not depend on it */

static const char *const mech_names[GP_NMECH] = {"normalization", "underflow", "absorption",
                                                 "overflow", "rounding", "non-finite"};

const char *gp_mechanism_name(gp_mechanism m)
{
    return (unsigned)m < GP_NMECH ? mech_names[m] : "none";
}

int gp_default_threshold(gp_metric m, double *max)
{
    switch (m) {
    case GP_M_GRAD_REL_ERR_FULLBATCH: *max = 1e-3; return 0;
    case GP_M_UNDERFLOW_FRAC: *max = 0.01; return 0;
    case GP_M_ABSORBED_FRAC: *max = 0.01; return 0;
    case GP_M_OVERFLOW_COUNT: *max = 0; return 0;
    case GP_M_NONFINITE_COUNT: *max = 0; return 0;
    default: return -1;
    }
}

/* ---- per-tensor working state for one chunk of elements ---- */

typedef struct {
    const gp_scenario *sc;
    const gp_backend *b, *cmp;
    size_t t;           /* tensor index */
    double s;           /* loss scale (1 without a scaler) */
    gp_format gf, af;
    size_t n;           /* elements in this chunk */
    uint64_t i0;        /* first element */
    double *xs;         /* [n] exact scaled backward output, nudged (see gp_f64_nudge) */
    void *grad, *acc, *old, *comp, *acc2, *comp2;
    double *err[GP_NMECH]; /* [n] signed local errors per mechanism, unscaled units */
    double *partial;       /* [n] running binary64 sum of the exact outputs (charts only) */
    gp_stats *st;
    gp_result *res;        /* trajectory and histogram go here */
} chunk;

static size_t width_bytes(gp_format f)
{
    return (size_t)gp_fmt_get(f).width / 8;
}

static double widen(gp_format f, uint32_t bits)
{
    return gp_fmt_to_f64(f, bits);
}

/* Which mechanism a rounding of the exact value `exact` to `bits` in format f falls
 * under, and whether it was a loss at all. */
static gp_mechanism classify(gp_format f, double exact, uint32_t bits, unsigned ev)
{
    double v = widen(f, bits);
    if (isinf(v) && isfinite(exact))
        return GP_MECH_OVERFLOW;
    if (v != v || isinf(exact) || exact != exact)
        return GP_MECH_NONFINITE;
    if (ev & GP_EV_OVERFLOW)
        return GP_MECH_OVERFLOW;
    if (gp_fmt_underflow_loss(f, bits, exact != 0, v != exact))
        return GP_MECH_UNDERFLOW;
    return GP_MECH_ROUNDING;
}

static void note_error(chunk *c, size_t i, gp_mechanism m, double delta)
{
    c->err[m][i] += delta;
}

/* The stored gradients of one micro-batch: round xs to the grad dtype (RNE, as the
 * backward writes it) with events, and count what happened. */
static void store_grads(chunk *c)
{
    int ftz = c->sc->precision.ftz;
    for (size_t i = 0; i < c->n; i++) {
        unsigned ev = 0;
        uint32_t g = gp_fmt_from_f64(c->gf, c->xs[i], GP_RNE, 0, ftz, &ev);
        double x = c->xs[i] / c->s;
        c->partial[i] += x;
        if (x != 0 && isfinite(x)) {
            int e;
            frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
            int b = e - 1 - GP_HIST_MIN_EXP;
            c->res->hist[b < 0 ? 0 : b >= GP_HIST_BINS ? GP_HIST_BINS - 1 : b]++;
        }
        gp_pack_set(c->gf, c->grad, i, g);
        double v = widen(c->gf, g);
        if (c->xs[i] != 0)
            c->st->rounded_nonzero++;
        if (v != 0) {
            c->st->stored_nonzero++;
            uint32_t mag = g & ((1u << (gp_fmt_get(c->gf).width - 1)) - 1u);
            if (mag < (1u << (gp_fmt_get(c->gf).p - 1)))
                c->st->subnormal++;
        }
        gp_mechanism m = classify(c->gf, c->xs[i], g, ev);
        if (m == GP_MECH_UNDERFLOW)
            c->st->underflow++;
        if (m == GP_MECH_OVERFLOW)
            c->st->overflow++;
        note_error(c, i, m, (v - c->xs[i]) / c->s);
    }
}

/* A backend call returned rc != 0: 1 means "configuration not supported" (returns -2,
 * bad usage), anything else a failure (-1). */
static int backend_failure(const gp_backend *b, const char *what, int rc, gp_error *err)
{
    gp_error_set(err, rc == 1 ? "backend %s: %s: this configuration is not supported by the backend"
                              : "backend %s: %s failed (returned %d)", b->label, what, rc);
    return rc == 1 ? -2 : -1;
}

static int call_accumulate(const gp_backend *b, chunk *c, void *acc, void *comp, uint64_t stream)
{
    gp_plugin_accumulate_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.grad_format = (int32_t)c->gf;
    a.acc_format = (int32_t)c->af;
    a.rounding = (int32_t)c->sc->precision.rounding;
    a.ftz = c->sc->precision.ftz;
    a.seed = c->sc->seed;
    a.stream = stream;
    a.first_index = c->i0;
    a.n = c->n;
    a.grad = c->grad;
    a.acc = acc;
    a.comp = comp;
    return b->ops->accumulate(&a);
}

/* One accumulation step on the backend(s), then attribute every element's rounding. */
static int accumulate(chunk *c, int k, gp_error *err)
{
    size_t bytes = c->n * width_bytes(c->af);
    uint64_t stream = gp_stream_id(GP_STREAM_ACCUM_SR, c->t, 0, (uint64_t)k);
    memcpy(c->old, c->acc, bytes);
    if (c->cmp) {
        memcpy(c->acc2, c->acc, bytes);
        if (c->comp)
            memcpy(c->comp2, c->comp, bytes);
    }
    int rc = call_accumulate(c->b, c, c->acc, c->comp, stream);
    if (rc != 0)
        return backend_failure(c->b, "accumulate", rc, err);
    if (c->cmp) {
        if ((rc = call_accumulate(c->cmp, c, c->acc2, c->comp2, stream)) != 0)
            return backend_failure(c->cmp, "accumulate", rc, err);
        for (size_t i = 0; i < c->n; i++)
            if (!gp_fmt_agree(c->af, gp_pack_get(c->af, c->acc, i), gp_pack_get(c->af, c->acc2, i)) ||
                (c->comp && !gp_fmt_agree(c->af, gp_pack_get(c->af, c->comp, i), gp_pack_get(c->af, c->comp2, i))))
                c->st->mismatches++;
    }
    for (size_t i = 0; i < c->n; i++) {
        uint32_t ob = gp_pack_get(c->af, c->old, i), nb = gp_pack_get(c->af, c->acc, i);
        double a = widen(c->af, ob), g = widen(c->gf, gp_pack_get(c->gf, c->grad, i));
        double nv = widen(c->af, nb);
        double s = a + g, bb = s - a, e = (a - (s - bb)) + (g - bb); /* exact sum s + e */
        if (!isfinite(s))
            e = 0;
        double exact = gp_f64_nudge(s, e > 0 ? 1 : e < 0 ? -1 : 0);
        if (s != 0 || e != 0)
            c->st->rounded_nonzero++;
        double delta = ((nv - s) - e) / c->s;
        if (g != 0) {
            c->st->adds_nonzero++;
            if (nb == ob) {
                c->st->absorbed++;
                note_error(c, i, GP_MECH_ABSORPTION, delta);
                continue;
            }
        }
        gp_mechanism m = classify(c->af, exact, nb, isinf(nv) && isfinite(s) ? GP_EV_OVERFLOW : 0);
        if (m == GP_MECH_UNDERFLOW)
            c->st->underflow++;
        if (m == GP_MECH_OVERFLOW)
            c->st->overflow++;
        note_error(c, i, m, delta);
    }
    /* trajectory: the accumulated error after this step is the sum of every local error
     * so far (unscaled); the reference is the exact partial sum */
    for (size_t i = 0; i < c->n; i++) {
        double e = 0;
        for (int m = GP_MECH_UNDERFLOW; m < GP_NMECH; m++)
            e += c->err[m][i];
        c->res->traj_err_ss[k] += e * e;
        c->res->traj_ref_ss[k] += c->partial[i] * c->partial[i];
    }
    return 0;
}

/* Unscale on the backend (and the compared one); attribute; report found_inf. */
static int unscale(chunk *c, int *found_inf, gp_error *err)
{
    float inv = (float)(1.0 / c->s);
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
        for (size_t i = 0; i < c->n; i++)
            if (!gp_fmt_agree(c->af, gp_pack_get(c->af, c->acc, i), gp_pack_get(c->af, c->acc2, i)))
                c->st->mismatches++;
    }
    if (u.found_inf)
        *found_inf = 1;
    for (size_t i = 0; i < c->n; i++) {
        double exact = widen(c->af, gp_pack_get(c->af, c->old, i)) * (double)inv; /* exact */
        uint32_t nb = gp_pack_get(c->af, c->acc, i);
        if (exact != 0)
            c->st->rounded_nonzero++;
        gp_mechanism m = classify(c->af, exact, nb, 0);
        if (m == GP_MECH_UNDERFLOW)
            c->st->underflow++;
        note_error(c, i, m, widen(c->af, nb) - exact);
    }
    return 0;
}

/* ---- exact backward outputs ---- */

/* Exact x = S/den as a nudged binary64 given S = n * m exactly (n integer, m fp32). */
static double quotient(double m, double n, double den)
{
    double hi = n * m, lo = fma(n, m, -hi); /* n*m = hi + lo exactly */
    double q = hi / den;
    double r = fma(-q, den, hi) + lo;      /* sign of (S - q*den): exact sign */
    return gp_f64_nudge(q, r > 0 ? 1 : r < 0 ? -1 : 0);
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

static double ulp32(double x)
{
    int e;
    frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
    e -= 1;
    if (x == 0 || e < -126)
        e = -126;
    return ldexp(1.0, e - 23);
}

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
        double u = fabs(a - s) / ulp32(s);
        if (u > st->max_ulp || u != u)
            st->max_ulp = u;
        for (int m = GP_MECH_UNDERFLOW; m < GP_NMECH; m++)
            st->ss_mech[m] += c->err[m][i] * c->err[m][i];
    }
}

/* ---- the two ways of producing exact backward outputs ---- */

/* Generated tensor: per-token-mean gradients m from the distribution; references from
 * exact fixed-point sums of m and of n*m. */
static int run_generated(chunk *c, const gp_tensor_spec *ts, double N, int *found_inf, gp_error *err)
{
    const gp_scenario *sc = c->sc;
    int K = sc->batch.microbatches;
    float *m = malloc(c->n * sizeof *m);
    double *sum_m = calloc(c->n, sizeof *sum_m), *sum_nm = calloc(c->n, sizeof *sum_nm);
    gp_fixacc *sp_m = calloc(c->n, sizeof *sp_m), *sp_nm = calloc(c->n, sizeof *sp_nm);
    double *gacc = malloc(c->n * sizeof *gacc), *gsame = malloc(c->n * sizeof *gsame),
           *gfull = malloc(c->n * sizeof *gfull);
    int rc = -1;
    if (!m || !sum_m || !sum_nm || !sp_m || !sp_nm || !gacc || !gsame || !gfull) {
        gp_error_set(err, "out of memory");
        goto done;
    }
    for (int k = 0; k < K; k++) {
        long nk = sc->batch.tokens[k];
        double den = reduction_den(sc, nk, N);
        gp_generate(&ts->grad, sc->seed, gp_stream_id(GP_STREAM_GRAD, c->t, 0, (uint64_t)k), c->i0, c->n, m);
        for (size_t i = 0; i < c->n; i++)
            c->xs[i] = quotient((double)m[i], (double)nk, den) * c->s;
        gp_exactsum_add(sum_m, sp_m, m, 1, c->n);
        gp_exactsum_add(sum_nm, sp_nm, m, (uint32_t)nk, c->n);
        store_grads(c);
        if ((rc = accumulate(c, k, err)) != 0)
            goto done;
    }
    if (sc->loss_scale.mode != GP_LS_NONE && (rc = unscale(c, found_inf, err)) != 0)
        goto done;
    for (size_t i = 0; i < c->n; i++) {
        int sticky;
        uint64_t Nn = (uint64_t)N, A = (uint64_t)sc->batch.accumulation_steps;
        gacc[i] = widen(c->af, gp_pack_get(c->af, c->acc, i));
        gfull[i] = gp_exactsum_div(sum_nm[i], &sp_nm[i], sc->fullbatch == GP_FB_MEAN ? Nn : 1, &sticky);
        switch (sc->reduction) {
        case GP_RED_TOKEN_MEAN: gsame[i] = gp_exactsum_div(sum_nm[i], &sp_nm[i], Nn, &sticky); break;
        case GP_RED_MEAN: gsame[i] = gp_exactsum_div(sum_m[i], &sp_m[i], A, &sticky); break;
        case GP_RED_MEAN_NO_DIV: gsame[i] = gp_exactsum_div(sum_m[i], &sp_m[i], 1, &sticky); break;
        default: gsame[i] = gp_exactsum_div(sum_nm[i], &sp_nm[i], 1, &sticky); break;
        }
    }
    final_stats(c, gacc, gsame, gfull);
    rc = 0;
done:
    free(m);
    free(sum_m);
    free(sum_nm);
    free(sp_m);
    free(sp_nm);
    free(gacc);
    free(gsame);
    free(gfull);
    return rc;
}

/* The binary64 nearest to q, and where q lies relative to it (for gp_f64_nudge). */
static double q_to_double(const mpq_t q, int *sticky)
{
    mpfr_t f;
    mpfr_init2(f, 53);
    int t = mpfr_set_q(f, q, MPFR_RNDN);
    double d = mpfr_get_d(f, MPFR_RNDN);
    mpfr_clear(f);
    *sticky = t > 0 ? -1 : t < 0 ? 1 : 0;
    return d;
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
        mpq_add(full, full, S);
        mpq_set_d(tmp, reduction_den(sc, (long)ts->grad.ntok[k], N));
        mpq_div(x, S, tmp);
        mpq_add(same, same, x);
        mpq_set_d(tmp, c->s);
        mpq_mul(x, x, tmp);
        double d = q_to_double(x, &sticky);
        c->xs[0] = gp_f64_nudge(d, sticky);
        store_grads(c);
        int arc = accumulate(c, k, err);
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
        double gsame = q_to_double(same, &sticky), gfull = q_to_double(full, &sticky);
        final_stats(c, &gacc, &gsame, &gfull);
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
    loss[GP_MECH_NORMALIZATION] = metric[GP_M_NORMALIZATION_REL_ERR];
    for (int m = GP_MECH_UNDERFLOW; m < GP_NMECH; m++)
        loss[m] = ratio(st->ss_mech[m], st->ss_full);
    if (st->nonfinite)
        loss[GP_MECH_NONFINITE] = INFINITY;
}

static void stats_add(gp_stats *a, const gp_stats *b)
{
    a->ss_full += b->ss_full;
    a->ss_same += b->ss_same;
    a->ss_acc += b->ss_acc;
    a->ss_acc_full += b->ss_acc_full;
    a->ss_acc_same += b->ss_acc_same;
    a->ss_same_full += b->ss_same_full;
    for (int m = 0; m < GP_NMECH; m++)
        a->ss_mech[m] += b->ss_mech[m];
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
    a->mismatches += b->mismatches;
}

static void judge(const gp_scenario *sc, gp_result *r)
{
    r->verdict = GP_PASS;
    for (int i = 0; i < GP_NMETRICS; i++) {
        double max = 0;
        r->has_threshold[i] = sc->thresholds.set[i] || gp_default_threshold((gp_metric)i, &max) == 0;
        r->threshold[i] = sc->thresholds.set[i] ? sc->thresholds.max[i] : max;
        double v = r->metric[i];
        r->failed[i] = r->has_threshold[i] && v == v && !(v <= r->threshold[i]);
        if (r->failed[i])
            r->verdict = GP_FAIL;
    }
    r->dominant = GP_NMECH;
    double best = 0;
    for (int m = 0; m < GP_NMECH; m++)
        if (r->loss[m] > best) {
            best = r->loss[m];
            r->dominant = (gp_mechanism)m;
        }
    if (r->st.mismatches)
        r->verdict = GP_FAIL;
    const gp_stats *st = &r->st;
    int fired = st->underflow || st->absorbed || st->overflow || st->nonfinite ||
                r->loss[GP_MECH_NORMALIZATION] > 0 || r->skipped_steps;
    if (r->verdict == GP_PASS && fired)
        r->verdict = GP_WARN;
}

int gp_run_scenario(const gp_scenario *sc, const gp_backend *b, const gp_backend *cmp, gp_result *res,
                    gp_error *err)
{
    memset(res, 0, sizeof *res);
    res->tensors = calloc(sc->ntensors, sizeof *res->tensors);
    if (!res->tensors)
        return gp_error_set(err, "out of memory");
    res->ntensors = sc->ntensors;
    res->nsteps = sc->batch.microbatches;
    res->traj_err_ss = calloc((size_t)res->nsteps, sizeof(double));
    res->traj_ref_ss = calloc((size_t)res->nsteps, sizeof(double));
    if (!res->traj_err_ss || !res->traj_ref_ss) {
        gp_result_free(res);
        return gp_error_set(err, "out of memory");
    }
    double N = 0;
    for (int k = 0; k < sc->batch.microbatches; k++)
        N += (double)sc->batch.tokens[k];
    double s = sc->loss_scale.mode == GP_LS_NONE ? 1.0 : sc->loss_scale.init;
    int found_inf = 0, rc = 0;
    chunk c;
    memset(&c, 0, sizeof c);
    c.sc = sc;
    c.b = b;
    c.cmp = cmp;
    c.res = res;
    c.s = s;
    c.gf = sc->precision.grad;
    c.af = sc->precision.accumulator;
    size_t ab = width_bytes(c.af), gb = width_bytes(c.gf);
    int kahan = sc->precision.rounding == GP_ACC_KAHAN;
    c.xs = malloc(CHUNK * sizeof *c.xs);
    c.partial = malloc(CHUNK * sizeof *c.partial);
    c.grad = malloc(CHUNK * gb);
    c.acc = malloc(CHUNK * ab);
    c.old = malloc(CHUNK * ab);
    c.comp = kahan ? malloc(CHUNK * ab) : NULL;
    c.acc2 = cmp ? malloc(CHUNK * ab) : NULL;
    c.comp2 = cmp && kahan ? malloc(CHUNK * ab) : NULL;
    int oom = !c.xs || !c.partial || !c.grad || !c.acc || !c.old || (kahan && !c.comp) || (cmp && !c.acc2) ||
              (cmp && kahan && !c.comp2);
    for (int m = 0; m < GP_NMECH; m++)
        oom |= !(c.err[m] = malloc(CHUNK * sizeof(double)));
    if (oom)
        rc = gp_error_set(err, "out of memory");
    for (size_t t = 0; t < sc->ntensors && rc == 0; t++) {
        const gp_tensor_spec *ts = &sc->tensors[t];
        gp_tensor_result *tr = &res->tensors[t];
        snprintf(tr->name, sizeof tr->name, "%s", ts->name);
        tr->size = ts->size;
        c.t = t;
        c.st = &tr->st;
        for (uint64_t i0 = 0; i0 < ts->size && rc == 0; i0 += CHUNK) {
            c.i0 = i0;
            c.n = (size_t)(ts->size - i0 < CHUNK ? ts->size - i0 : CHUNK);
            memset(c.acc, 0, c.n * ab); /* +0 in every format */
            if (kahan)
                memset(c.comp, 0, c.n * ab);
            for (int m = 0; m < GP_NMECH; m++)
                memset(c.err[m], 0, c.n * sizeof(double));
            memset(c.partial, 0, c.n * sizeof(double));
            rc = ts->grad.kind == GP_DIST_VALUES ? run_explicit(&c, ts, N, &found_inf, err)
                                                 : run_generated(&c, ts, N, &found_inf, err);
        }
        derive(&tr->st, tr->metric, tr->loss);
        stats_add(&res->st, &tr->st);
    }
    free(c.xs);
    free(c.partial);
    free(c.grad);
    free(c.acc);
    free(c.old);
    free(c.comp);
    free(c.acc2);
    free(c.comp2);
    for (int m = 0; m < GP_NMECH; m++)
        free(c.err[m]);
    if (rc != 0) {
        gp_result_free(res);
        return rc;
    }
    derive(&res->st, res->metric, res->loss);
    res->skipped_steps = found_inf;
    res->min_loss_scale = found_inf && sc->loss_scale.mode == GP_LS_DYNAMIC ? s * sc->loss_scale.backoff : s;
    res->metric[GP_M_SKIPPED_STEPS] = found_inf;
    res->metric[GP_M_MIN_LOSS_SCALE] = res->min_loss_scale;
    for (size_t t = 0; t < res->ntensors; t++) {
        res->tensors[t].metric[GP_M_SKIPPED_STEPS] = found_inf;
        res->tensors[t].metric[GP_M_MIN_LOSS_SCALE] = res->min_loss_scale;
    }
    judge(sc, res);
    return 0;
}

void gp_result_free(gp_result *res)
{
    free(res->tensors);
    free(res->traj_err_ss);
    free(res->traj_ref_ss);
    memset(res, 0, sizeof *res);
}
