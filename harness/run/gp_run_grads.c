/* gp_run_grads.c — the exact backward outputs a window accumulates: generated micro-batches
 * (the distribution, the exact scaled outputs and their exact sums), replayed ones (a dump's
 * entries), explicit per-token values (exact rationals), and the final gradients' statistics. */
#include "gp_run_internal.h"

#include <gmp.h>
#include <mpfr.h>

/* ---- exact backward outputs ---- */

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
    /* the sums in locals (each in element order, as before): stores through st would
     * otherwise be reloaded every element, since they may alias the arrays; the
     * mechanisms' six by name, so that all of them stay in registers (as an array indexed
     * in a loop they went through memory: a store to load wait in every element's sums);
     * the terms come a block at a time from gp_final_terms (vectorised), so that the loop
     * here is the additions alone; the rare three (chunk.rare) in a loop of their own,
     * only when set */
    _Static_assert(GP_MECH_GRAD_END - GP_MECH_UNDERFLOW == 6, "final_stats names the six mechanisms of a gradient");
    uint64_t nonfinite = st->nonfinite;
    double ss_full = st->ss_full, ss_same = st->ss_same, ss_acc = st->ss_acc, ss_acc_full = st->ss_acc_full;
    double ss_acc_same = st->ss_acc_same, ss_same_full = st->ss_same_full, max_ulp = st->max_ulp;
    const double *eu = c->err[GP_MECH_UNDERFLOW], *ea = c->err[GP_MECH_ABSORPTION], *eo = c->err[GP_MECH_OVERFLOW];
    const double *es = c->err[GP_MECH_SATURATION], *er = c->err[GP_MECH_ROUNDING], *en = c->err[GP_MECH_NONFINITE];
    double su = st->ss_mech[GP_MECH_UNDERFLOW], sa = st->ss_mech[GP_MECH_ABSORPTION];
    double so = st->ss_mech[GP_MECH_OVERFLOW], ssat = st->ss_mech[GP_MECH_SATURATION];
    double sr = st->ss_mech[GP_MECH_ROUNDING], sn = st->ss_mech[GP_MECH_NONFINITE];
    double t[GP_FT_N][GP_ATTRIB_BLOCK]; /* a block's terms (gp_final_terms, vectorised), added in order */
    for (size_t i0 = 0; i0 < c->n; i0 += GP_ATTRIB_BLOCK) {
        size_t n = c->n - i0 < GP_ATTRIB_BLOCK ? c->n - i0 : GP_ATTRIB_BLOCK;
        nonfinite += gp_final_terms(gacc + i0, gsame + i0, gfull + i0, eu + i0, ea + i0, er + i0, n, t);
        for (size_t j = 0; j < n; j++) {
            ss_full += t[GP_FT_FULL][j];
            ss_same += t[GP_FT_SAME][j];
            ss_acc += t[GP_FT_ACC][j];
            ss_acc_full += t[GP_FT_ACC_FULL][j];
            ss_acc_same += t[GP_FT_ACC_SAME][j];
            ss_same_full += t[GP_FT_SAME_FULL][j];
            double u = t[GP_FT_ULP][j];
            if (u > max_ulp || u != u)
                max_ulp = u;
            su += t[GP_FT_UND][j];
            sa += t[GP_FT_ABS][j];
            sr += t[GP_FT_RND][j];
        }
    }
    for (size_t i = 0; i < c->n && c->cnt[0]; i++) { /* this element's y, x of each ratio estimate */
        double a = gacc[i], s = gsame[i], f = gfull[i];
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
    if (c->rare) /* else all +0: the sums (never -0) are as they were */
        for (size_t i = 0; i < c->n; i++) {
            so += eo[i] * eo[i];
            ssat += es[i] * es[i];
            sn += en[i] * en[i];
        }
    st->nonfinite = nonfinite;
    st->ss_full = ss_full;
    st->ss_same = ss_same;
    st->ss_acc = ss_acc;
    st->ss_acc_full = ss_acc_full;
    st->ss_acc_same = ss_acc_same;
    st->ss_same_full = ss_same_full;
    st->max_ulp = max_ulp;
    st->ss_mech[GP_MECH_UNDERFLOW] = su;
    st->ss_mech[GP_MECH_ABSORPTION] = sa;
    st->ss_mech[GP_MECH_OVERFLOW] = so;
    st->ss_mech[GP_MECH_SATURATION] = ssat;
    st->ss_mech[GP_MECH_ROUNDING] = sr;
    st->ss_mech[GP_MECH_NONFINITE] = sn;
    if (c->sc->precision.grad_scaled) /* the stored gradients' bias, this step's element sums */
        for (size_t i = 0; i < c->n; i++) {
            double s = c->qb_s[i], v = c->qb_v[i], d = c->qb_d[i];
            st->qb_ss += s * s;
            st->qb_v += v;
            st->qb_v2 += v * v;
            st->qb_d2 += d * d;
            if (v > st->qb_vmax)
                st->qb_vmax = v;
        }
}

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

static int replay_outputs(chunk *c, int k, gp_error *err);

/* Micro-batch k's exact scaled backward outputs into c->xs: generated (per-token means m
 * from the distribution into c->m, shrunk, divided by the reduction, times the loss
 * scale) or replayed (the dump's entries into c->m, times s / rs). Nothing else changes:
 * the amax pass (gp_run_window.c) calls it before the micro-batch is stored. */
int gp_run_outputs(chunk *c, double N, int k, gp_error *err)
{
    const gp_scenario *sc = c->sc;
    long nk = c->tok[k];
    if (c->dump)
        return replay_outputs(c, k, err);
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
        gp_scale_f32_block(c->m, c->n, c->shrink);
    gp_fill_outputs(c->xs, c->m, c->n, mul, (double)nk, den, c->s); /* exact quotients, nudged; vectorised */
    return 0;
}

static uint32_t replay_weight(const gp_scenario *sc, long nk, double N);

/* Generated or replayed tensor, micro-batch k: the exact outputs (gp_run_outputs), the
 * exact sums of m and n_k*m (replayed: of x_k and w_k x_k = S_k), the stored gradients. */
int gp_run_generate_microbatch(chunk *c, double N, int k, gp_error *err)
{
    int rc = gp_run_outputs(c, N, k, err);
    if (rc != 0)
        return rc;
    uint32_t w = (uint32_t)c->tok[k];
    if (c->dump) {
        c->st->replay_nonfinite += gp_nonfinite_count(c->xs, c->n); /* the exact sums cannot hold them */
        w = replay_weight(c->sc, c->tok[k], N);
    } else if (c->D) {
        dist_same_add(c);
    }
    if (gp_exactsum_add(c->sum_m, c->sp_m, c->m, 1, c->n) + gp_exactsum_add(c->sum_nm, c->sp_nm, c->m, w, c->n))
        *c->sp_used = 1;
    gp_run_store_grads(c, k);
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
 * backward wrote it) into c->m, times the loss scale into c->xs. */
static int replay_outputs(chunk *c, int k, gp_error *err)
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
    gp_mul_f32_block(c->xs, c->m, c->n, f); /* exact: x_k s = entry s / rs */
    return 0;
}

/* Generated tensor, after the window: unscale, then the final gradients (accumulated,
 * exact same-op-sequence, exact full-batch) and their statistics. */
int gp_run_generated_final(chunk *c, double N, int *found_inf, gp_error *err)
{
    const gp_scenario *sc = c->sc;
    int rc;
    if (sc->loss_scale.mode != GP_LS_NONE && (rc = gp_run_unscale(c, found_inf, err)) != 0)
        return rc;
    size_t n = c->n;
    uint64_t Nn = (uint64_t)N, A = (uint64_t)sc->batch.accumulation_steps;
    const gp_fixacc *sp_m = *c->sp_used ? c->sp_m : NULL, *sp_nm = *c->sp_used ? c->sp_nm : NULL; /* NULL: all zero */
    gp_widen_block(c->af, c->acc, 0, n, c->gacc); /* widen of each, vectorised */
    gp_exactsum_div_n(c->gfull, c->sum_nm, sp_nm, sc->fullbatch == GP_FB_MEAN ? Nn : 1, n);
    if (c->dump) { /* the configuration's own formula: the entries' sum (the exact sums
                      hold the entries as stored: unscale exactly, rs a power of two) */
        gp_exactsum_div_n(c->gsame, c->sum_m, sp_m, 1, n);
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
                gp_exactsum_div_n(c->gsame, c->sum_nm, sp_nm, Nn, n);
            break;
        case GP_RED_MEAN: gp_exactsum_div_n(c->gsame, c->sum_m, sp_m, A * W, n); break;
        case GP_RED_MEAN_NO_DIV: gp_exactsum_div_n(c->gsame, c->sum_m, sp_m, W, n); break;
        default: gp_exactsum_div_n(c->gsame, c->sum_nm, sp_nm, W, n); break;
        }
    }
    final_stats(c, c->gacc, c->gsame, c->gfull);
    return 0;
}

/* Explicit per-token values (size 1): everything exact in rationals. */
int gp_run_explicit(chunk *c, const gp_tensor_spec *ts, double N, int *found_inf, gp_error *err)
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
        gp_run_store_grads(c, k);
        int arc = gp_run_accumulate(c, 1, k, err);
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
        rc = gp_run_unscale(c, found_inf, err);
    if (rc == 0) {
        double gacc = widen(c->af, gp_pack_get(c->af, c->acc, 0));
        double gsame = gp_exact_q_nearest(same, &sticky);
        c->gfull[0] = gp_exact_q_nearest(full, &sticky);
        final_stats(c, &gacc, &gsame, c->gfull);
    }
    mpq_clears(S, x, same, full, tmp, NULL);
    return rc;
}
