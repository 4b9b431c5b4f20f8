/* gp_runner.c — see gp_runner.h for the model. */
#include "gp_run_internal.h"
#include "gp_sr_lag.h"

#include <pthread.h>

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
        if (gp_run_spanning(sc) && size > CHUNK) { /* scales spanning chunks: the amax pass's slots */
            ts->namax = gp_run_amax_per(sc, t);
            if (!(ts->amax = calloc(gp_run_amax_slots(sc, t), sizeof *ts->amax)))
                return gp_error_set(err, "out of memory (%zu amax slots)", gp_run_amax_slots(sc, t));
        }
        if (sc->precision.acc_scaled && size > CHUNK) { /* a scaled accumulator's model of the sum */
            if (!(ts->acc_shadow = malloc((size_t)size * sizeof *ts->acc_shadow)) ||
                !(ts->acc_amax = calloc((size_t)sc->batch.microbatches, sizeof *ts->acc_amax)))
                return gp_error_set(err, "out of memory (%zu elements)", (size_t)size);
        }
        if (sc->precision.rounding == GP_ACC_STOCHASTIC && !S->sampled && size >= 2) { /* gp_sr_lag.h */
            ts->lag_n = min_size(size, GP_SR_LAG_MAX);
            if (!(ts->lag_u = calloc(ts->lag_n, sizeof(double))) || !(ts->lag_w = calloc(ts->lag_n, sizeof(double))))
                return gp_error_set(err, "out of memory (%zu elements)", ts->lag_n);
        }
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
        free(S->ts[t].lag_u);
        free(S->ts[t].lag_w);
        free(S->ts[t].amax);
        free(S->ts[t].acc_shadow);
        free(S->ts[t].acc_amax);
    }
    free(S->ts);
}

/* The all-lags test of stochastic rounding (gp_sr_lag.h) on each tensor's record, after
 * the run: its score into the tensor's statistics (the union bound over the lags of every
 * tensor tested, so the run's false alarm stays <= 1e-9). Returns 0, or -1 with err. */
static int sr_lag_scores(sim *S, gp_error *err)
{
    uint64_t lags = 0;
    for (size_t t = 0; t < S->sc->ntensors; t++)
        lags += S->ts[t].lag_u ? S->ts[t].lag_n - 1 : 0;
    for (size_t t = 0; t < S->sc->ntensors; t++) {
        const tensor_state *ts = &S->ts[t];
        if (!ts->lag_u)
            continue;
        size_t worst = 0;
        double z = gp_sr_lag_score(ts->lag_u, ts->lag_w, ts->lag_n, lags, 1, &worst);
        if (z < 0)
            return gp_error_set(err, "out of memory (the all-lags test of %zu elements)", ts->lag_n);
        S->res->tensors[t].st.sr_lag = z;
        S->res->tensors[t].st.sr_lag_lags = ts->lag_n - 1;
    }
    return 0;
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
        L->c.sp_used = &L->sp_used;
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
        if (!(U->gst = malloc(GP_PLUGIN_MANY_MAX * sizeof *U->gst)) || !(U->traj_err = calloc(K ? K : 1,
                                                                                              sizeof(double))) ||
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
    int ok = (c->xs = malloc(CHUNK * sizeof *c->xs)) && (c->sqx = malloc(CHUNK * sizeof *c->sqx)) && (c->partial = malloc(CHUNK * sizeof *c->partial)) &&
             (c->sr_prev = malloc(CHUNK * sizeof *c->sr_prev)) && (c->qb_s = malloc(3 * CHUNK * sizeof *c->qb_s)) &&
             (c->grad = malloc(CHUNK * gb)) && (c->old = malloc(CHUNK * ab)) &&
             (!with_cmp || (c->acc2 = malloc(CHUNK * ab))) && (!(with_cmp && kahan) || (c->comp2 = malloc(CHUNK * ab))) &&
             (c->m = malloc(CHUNK * sizeof *c->m)) && (c->noise = malloc(CHUNK * sizeof *c->noise)) && (c->sum_m = malloc(CHUNK * sizeof *c->sum_m)) &&
             (c->sum_nm = malloc(CHUNK * sizeof *c->sum_nm)) && (c->gacc = malloc(CHUNK * sizeof *c->gacc)) &&
             (c->gsame = malloc(CHUNK * sizeof *c->gsame)) && (c->sp_m = calloc(CHUNK, sizeof *c->sp_m)) &&
             (c->sp_nm = calloc(CHUNK, sizeof *c->sp_nm)); /* zero: window_run clears them after a spill */
    for (int m = 0; m < GP_MECH_GRAD_END; m++)
        ok = ok && (c->err[m] = malloc(CHUNK * sizeof(double)));
    if (ok) {
        c->qb_v = c->qb_s + CHUNK;
        c->qb_d = c->qb_s + 2 * CHUNK;
    }
    return ok ? 0 : -1;
}

static void free_chunk(chunk *c)
{
    for (int k = 0; k < NCNT; k++)
        free(c->cnt[k]);
    free(c->xs);
    free(c->partial);
    free(c->sr_prev);
    free(c->qb_s); /* qb_v, qb_d: the same allocation */
    free(c->sqx);
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
    free(D->part2);
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
             (D->pold = malloc(CHUNK * D->rb)) && (D->part2 = malloc(CHUNK * D->rb)) && (D->sh = malloc(CHUNK * sizeof(double))) &&
             (D->sl = malloc(CHUNK * sizeof(double)));
    for (int m = 0; m < GP_MECH_GRAD_END; m++)
        ok = ok && (D->cerr[m] = calloc(CHUNK, sizeof(double)));
    if (!ok) {
        dist_free(D);
        return NULL;
    }
    return D;
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
    int rc = gp_run_replay_begin(sc, &R, err);
    if (rc != 0)
        return rc;
    rc = run_scenario(&R.view, &R, ctl, b, cmp, res, err);
    if (rc == 0 && R.sampled) {
        gp_run_sampled_intervals(sc, &R, res);
        gp_verdict_judge(sc, res); /* again, with the intervals */
    }
    gp_run_replay_end(&R, sc->ntensors);
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
    res->emulated_clip_scaler = gp_run_clip_ops(b) != b->ops && (sc->clip.max_norm > 0 || (sc->loss_scale.mode == GP_LS_DYNAMIC &&
                                                                                   sc->loss_scale.update));
    if (rc == 0)
        rc = gp_run_simulate(&S, err);
    if (rc == 0)
        rc = sr_lag_scores(&S, err);
    for (int l = 0; rc == 0 && l < S.nlanes; l++) /* integer counts: any order */
        for (int w = 0; w < GP_HIST_WAYS; w++) /* slot 0 of a copy: the discard */
            for (int h = 0; h < GP_HIST_BINS; h++)
                res->hist[h] += S.lanes[l].hist[w * GP_HIST_SLOTS + 1 + h];
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
        gp_verdict_derive(&tr->st, tr->metric, tr->loss);
        /* a sampled tensor stands for all its elements: its sums count M/n times */
        gp_stats_add_w(&res->st, &tr->st, R->pop[t] ? (double)R->view.tensors[t].size : 1.0,
                       R->pop[t] ? (double)R->pop[t] : 1.0);
        tr->metric[GP_M_SKIPPED_STEPS] = res->skipped_steps;
        tr->metric[GP_M_MIN_LOSS_SCALE] = res->min_loss_scale;
    }
    gp_verdict_derive(&res->st, res->metric, res->loss);
    for (size_t t = 0; t < res->ntensors && res->nopt > 0 && res->skipped_steps == res->nopt; t++)
        gp_verdict_all_skipped(res->tensors[t].metric, res->tensors[t].loss);
    if (res->nopt > 0 && res->skipped_steps == res->nopt)
        gp_verdict_all_skipped(res->metric, res->loss);
    if (dist) { /* the collective's own loss: one process has none (the metric stays absent) */
        for (size_t t = 0; t < res->ntensors; t++)
            res->tensors[t].metric[GP_M_COLLECTIVE_REL_ERR] = gp_verdict_ratio(res->tensors[t].st.coll.ss,
                                                                               res->tensors[t].st.ss_same);
        res->metric[GP_M_COLLECTIVE_REL_ERR] = gp_verdict_ratio(res->st.coll.ss, res->st.ss_same);
        for (int m = 0; m < GP_NMECH; m++)
            res->coll_loss[m] = gp_verdict_ratio(res->st.coll.ss_mech[m], res->st.ss_full);
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
    gp_verdict_judge(sc, res);
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
            gp_stats_add(&res->st, &rj.st);
            for (size_t q = 0; q < nt; q++)
                gp_stats_add(&res->tensors[q].st, &rj.tensors[q].st);
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
    gp_verdict_judge(sc, res);
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
