/* gp_run_step.c — the iterations of a run: the per-step inputs (lr schedule, tokens), the
 * coupled step (global-norm clipping, the optimizer chunk by chunk), the loss-scale update,
 * and the loop over all steps (simulate). */
#include "gp_run_internal.h"

/* The table that clips and updates the loss scale for backend b: its own when it has
 * the three optional entries, else the CPU emulation's (the report then says so). */
const gp_plugin *gp_run_clip_ops(const gp_backend *b)
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
        int rc = gp_run_clip_ops(S->b)->grad_sumsq(&a);
        if (rc == 0 && S->cmp) {
            who = S->cmp;
            rc = gp_run_clip_ops(S->cmp)->grad_sumsq(&a2);
        }
        if (rc != 0) {
            free(norms);
            return gp_run_backend_failure(who, "grad_sumsq", rc, err);
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
 * as torch's formula reads, from the double-double sum of squares (gp_dd_sumsq_add's
 * error bound: below 2^-77 relative for 2^40 elements). */
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
    int rc = gp_run_clip_ops(S->cmp)->grad_scale(&a2);
    if (rc != 0) {
        free(copy);
        return gp_run_backend_failure(S->cmp, "grad_scale", rc, err);
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
    gp_run_unit_reset(S, U);
    tensor_state *ts = &S->ts[t];
    U->rc = gp_run_optimize_chunk(S, L, t, U->i0[0], min_size(S->sc->tensors[t].size - U->i0[0], CHUNK),
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
            if ((rc = gp_run_clip_ops(S->b)->grad_scale(&a)) != 0) {
                free(before);
                return gp_run_backend_failure(S->b, "grad_scale", rc, err);
            }
            if (S->cmp && (rc = compare_grad_scale(S, t, &a, before, err)) != 0) {
                free(before);
                return rc;
            }
        }
        /* the sums in locals, in element order as before (a store through st would be
         * reloaded every element: it may alias the arrays) */
        double ss_scaling = st->ss_mech[GP_MECH_SCALING], ss_skipped = st->ss_full_skipped;
#if GP_VECTOR_BLOCKS
        /* Nothing scaled (before NULL: b = after, right = 1, no overflow): each lost below
         * is after - after, +0 (0 for a non-finite after), and adding +0 * +0 leaves the
         * sum of squares (+0 or positive, never -0) as it is, so the loop would change no
         * bit. (The coverage build runs it: there it is the definition.) */
        if (found_inf || before || right != 1.0f)
#endif
        for (uint64_t i = 0; i < n; i++) {
            double lost;
            if (found_inf) { /* the whole gradient the reference used */
                lost = ts->gfull[i] * (S->step.ref_coef.hi + S->step.ref_coef.lo);
                ss_skipped += ts->gfull[i] * ts->gfull[i];
            } else {
                double after = gp_fmt_to_f64_fast(af, gp_pack_get(af, ts->acc, i));
                double b = before ? gp_fmt_to_f64_fast(af, gp_pack_get(af, before, i)) : after;
                lost = after - b * (double)right;
                if (!isfinite(lost))
                    lost = 0; /* non-finite gradients are counted as such */
            }
            ss_scaling += lost * lost;
        }
        st->ss_mech[GP_MECH_SCALING] = ss_scaling;
        st->ss_full_skipped = ss_skipped;
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
        gp_run_par_for(S, nu, optimize_run);
        for (size_t u = 0; u < nu; u++) {
            unit *U = &S->units[u];
            gp_stats *st = &S->res->tensors[U->t[0]].st;
            gp_optim_counts_add(&st->opt, &U->oc[0]);
            gp_optim_sums_add(&st->opt_ss, &U->os[0]);
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
    int rc = gp_run_clip_ops(S->b)->scaler_update(&a);
    if (rc != 0)
        return gp_run_backend_failure(S->b, "scaler_update", rc, err);
    if (S->cmp) {
        a.scale = &s2.scale;
        a.tracker = &s2.tracker;
        if ((rc = gp_run_clip_ops(S->cmp)->scaler_update(&a)) != 0)
            return gp_run_backend_failure(S->cmp, "scaler_update", rc, err);
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
/* Transformer Engine's DelayedScaling after one optimizer step of a tensor (one amax per
 * step: the largest |fp32 gradient| of its micro-batches; TE records one per
 * fp8_autocast region, i.e. per micro-batch under accumulation): the step's amax joins
 * the history (the last q->hist kept), and the next step quantizes with
 * gp_fp8_scale_delayed of its max (or the newest, most_recent), margin, the scale so far. */
static void delayed_update(const gp_scaled_cfg *q, tensor_state *ts, float amax)
{
    if (ts->nhist == q->hist) {
        memmove(ts->amax_hist, ts->amax_hist + 1, (size_t)(q->hist - 1) * sizeof *ts->amax_hist);
        ts->nhist--;
    }
    ts->amax_hist[ts->nhist++] = amax;
    float a = ts->amax_hist[ts->nhist - 1];
    for (int i = 0; !q->most_recent && i < ts->nhist; i++)
        if (ts->amax_hist[i] > a || ts->amax_hist[i] != ts->amax_hist[i])
            a = ts->amax_hist[i];
    ts->dscale = gp_fp8_scale_delayed(q->elem, a, q->margin, ts->dscale != 0 ? ts->dscale : 1.0f, q->pow2);
}

int gp_run_simulate(sim *S, gp_error *err)
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
            return gp_run_time_up(S, err);
        float scale = scaled ? scaler.scale : 1.0f;
        gp_optim_counts before = {0};
        for (size_t t = 0; t < sc->ntensors; t++)
            gp_optim_counts_add(&before, &res->tensors[t].st.opt);
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
        rc = gp_run_accumulate_step(S, &found_inf, err);
        if (rc == 0 && sc->precision.grad_scaled && sc->precision.grad_sc.kind == GP_SC_DELAYED)
            for (size_t t = 0; t < sc->ntensors; t++)
                delayed_update(&sc->precision.grad_sc, &S->ts[t], (float)S->step_st[t].grad_amax);
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
                gp_stats_add(&res->tensors[t].st, &S->step_st[t]);
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
            gp_optim_counts_add(&after, &res->tensors[t].st.opt);
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
        gp_run_progress_add(S, GP_RUN_STEP_OVERHEAD);
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
