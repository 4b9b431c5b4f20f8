/* gp_run_window.c — one step's accumulation: the windows of chunks (small tensors share
 * one), each run as a unit on some lane (thread) and merged in window order, the chunk's
 * initial state and its optimizer phase when nothing couples the tensors. */
#include "gp_run_internal.h"

#include <pthread.h>

/* Generated tensors: the chunks G[0..ng) (of different tensors) micro-batch by
 * micro-batch, all of them in one backend call per micro-batch. */
static int run_generated(chunk *G, size_t ng, double N, int *found_inf, gp_error *err)
{
    if (G[0].D)
        return gp_run_distributed(G, ng, N, found_inf, err);
    int rc = 0;
    for (int k = 0; k < G[0].K && rc == 0; k++) {
        for (size_t j = 0; j < ng && rc == 0; j++)
            rc = gp_run_generate_microbatch(&G[j], N, k, err);
        if (rc == 0)
            rc = gp_run_accumulate(G, ng, k, err);
    }
    for (size_t j = 0; j < ng && rc == 0; j++)
        rc = gp_run_generated_final(&G[j], N, found_inf, err);
    return rc;
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
int gp_run_optimize_chunk(sim *S, lane *L, size_t t, uint64_t i0, size_t n, const void *acc, const double *gfull,
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
    c->given = ts->dscale != 0 ? ts->dscale : 1.0f;
    c->amax = ts->amax;
    c->namax = ts->namax;
    c->acc_amax = ts->acc_amax;
    c->acc_ev = NULL;
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
    c->sqx = p->sqx + off;
    c->grad = (char *)p->grad + off * gb;
    c->old = (char *)p->old + off * ab;
    c->acc2 = p->acc2 ? (char *)p->acc2 + off * ab : NULL;
    c->comp2 = p->comp2 ? (char *)p->comp2 + off * ab : NULL;
    for (int m = 0; m < GP_MECH_GRAD_END; m++) /* the rare three: gp_run_rare_on; 0 (normalization): unused */
        c->err[m] = p->err[m] + off;
    memset(c->err[GP_MECH_UNDERFLOW], 0, c->n * sizeof(double));
    memset(c->err[GP_MECH_ABSORPTION], 0, c->n * sizeof(double));
    memset(c->err[GP_MECH_ROUNDING], 0, c->n * sizeof(double));
    c->rare = 0;
    c->partial = p->partial + off;
    c->sr_prev = p->sr_prev + off;
    c->qb_s = p->qb_s + off;
    c->qb_v = p->qb_v + off;
    c->qb_d = p->qb_d + off;
    if (sc->precision.grad_scaled) { /* read by the stored gradients' bias (store_scaled) only */
        memset(c->qb_s, 0, c->n * sizeof(double));
        memset(c->qb_v, 0, c->n * sizeof(double));
        memset(c->qb_d, 0, c->n * sizeof(double));
    }
    if (sc->precision.rounding == GP_ACC_STOCHASTIC) /* read by stochastic rounding's statistics only */
        memset(c->sr_prev, 0, c->n * sizeof(double));
    c->lag_u = c->lag_w = NULL; /* recorded: the first iteration (its last micro-batch) */
    c->lag_lim = 0;
    c->lag_rec = 0;
    if (ts->lag_u && S->step_idx == 0 && i0 < ts->lag_n) {
        c->lag_u = ts->lag_u + i0;
        c->lag_w = ts->lag_w + i0;
        c->lag_lim = min_size(ts->lag_n - i0, c->n);
    }
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
    memset(c->sum_nm, 0, c->n * sizeof(double)); /* the spills: window_run */
}

/* The scenario's time limit (gp_deadline_set) has passed: -3. */
int gp_run_time_up(const sim *S, gp_error *err)
{
    gp_error_set(err, "ran longer than its time limit of %g s (--max-seconds), stopped in step %ld of %d",
                 gp_deadline_limit(), (long)S->step.iter, S->sc->steps);
    return -3;
}

/* Clear what unit U produces (its chunks stay). */
void gp_run_unit_reset(const sim *S, unit *U)
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
    gp_run_unit_reset(S, U);
    if (gp_deadline_passed()) {
        U->rc = gp_run_time_up(S, &U->err);
        return;
    }
    if (L->sp_used) { /* a spill of an earlier window: clear the pool's (else all are zero) */
        memset(L->c.sp_m, 0, CHUNK * sizeof *L->c.sp_m);
        memset(L->c.sp_nm, 0, CHUNK * sizeof *L->c.sp_nm);
        L->sp_used = 0;
    }
    for (size_t j = 0; j < U->ng; j++)
        chunk_begin(S, L, U, j);
    chunk *G = L->grp;
    const gp_tensor_spec *spec = &S->sc->tensors[G[0].t];
    int explicit_values = spec->grad.kind == GP_DIST_VALUES;
    int norm = S->sc->clip.max_norm > 0; /* the reference's clipping norm: only ref_clip_coef reads it */
    int rc = explicit_values ? gp_run_explicit(&G[0], spec, S->N, &U->found_inf, &U->err)
                             : run_generated(G, U->ng, S->N, &U->found_inf, &U->err);
    for (size_t j = 0; j < U->ng && rc == 0; j++) {
        chunk *c = &G[j];
        int smp = S->w[c->t] != 1.0;
        gp_dd ss = {0.0, 0.0}, *to = smp ? &ss : &U->ref_ss;
        if (norm) /* the reference's clipping norm, chunk by chunk (fixed bounds: the same for any -j) */
            *to = gp_dd_sumsq_add(*to, c->gfull, c->n);
        /* a sampled tensor's elements stand for M_h / n_h elements each: the estimate of
         * the whole model's norm (gp_runner.h) */
        if (smp)
            U->ref_ss = gp_dd_add(U->ref_ss, gp_dd_mul_d(ss, S->w[c->t]));
        if (!S->coupled)
            rc = gp_run_optimize_chunk(S, L, c->t, c->i0, c->n, c->acc, c->gfull, &U->oc[j], &U->os[j], &U->first,
                                       &U->twin,
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

void gp_run_par_for(sim *S, size_t n, void (*fn)(sim *, lane *, size_t))
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

void gp_run_progress_add(const sim *S, uint64_t work)
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
        gp_stats_add(&S->step_st[t], &U->gst[j]);
        gp_optim_counts_add(&st->opt, &U->oc[j]);
        gp_optim_sums_add(&st->opt_ss, &U->os[j]);
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
    gp_run_progress_add(S, elems * gp_run_step_work(sc, S->step_idx));
    if (U->rc != 0)
        gp_error_set(err, "%s", U->err.msg);
    return U->rc;
}

/* The amax pass of one window (unit u) on lane L: for each chunk of a tensor with amax
 * slots (tensor_state.amax), every micro-batch's exact outputs (of every rank), made
 * again as the window will make them, folded into the slots (gp_run_amax_note). The
 * cost: the outputs of such tensors are generated (or read) twice per step. */
static void amax_run(sim *S, lane *L, size_t u)
{
    unit *U = &S->units[u];
    gp_run_unit_reset(S, U);
    for (size_t j = 0; j < U->ng; j++) {
        if (!S->ts[U->t[j]].amax)
            continue;
        chunk_begin(S, L, U, j);
        chunk *c = &L->grp[j];
        for (int r = 0; r < (c->D ? c->D->W : 1) && U->rc == 0; r++) {
            if (c->D)
                gp_run_rank_inputs(c, S->N, r);
            for (int k = 0; k < c->K && U->rc == 0; k++)
                if ((U->rc = gp_run_outputs(c, S->N, k, &U->err)) == 0)
                    gp_run_amax_note(c, k);
        }
    }
}

/* The scaled accumulator's amax pass of one window (unit u) on lane L at micro-batch
 * S->acc_wave: for each chunk of a tensor with a model of its sum (tensor_state.acc_shadow),
 * the micro-batch's exact outputs made again, added to the model (gp_run_acc_model). The
 * cost: one more generation (or read) of every micro-batch, in K waves. */
static void acc_amax_run(sim *S, lane *L, size_t u)
{
    unit *U = &S->units[u];
    gp_run_unit_reset(S, U);
    for (size_t j = 0; j < U->ng && U->rc == 0; j++) {
        tensor_state *ts = &S->ts[U->t[j]];
        if (!ts->acc_shadow)
            continue;
        chunk_begin(S, L, U, j);
        chunk *c = &L->grp[j];
        int k = S->acc_wave;
        if (k < c->K && (U->rc = gp_run_outputs(c, S->N, k, &U->err)) == 0)
            gp_run_acc_model(c, k, ts->acc_shadow + c->i0, ts->acc_amax, &ts->acc_amax[k]);
    }
}

/* The windows of the step in waves of up to nunits run by fn on the lanes; merged in
 * window order (merge: the accumulation's unit_merge), else only their failures. */
static int waves(sim *S, void (*fn)(sim *, lane *, size_t), int merge, int *found_inf, gp_error *err)
{
    size_t t = 0;
    uint64_t i0 = 0;
    for (;;) {
        if (gp_deadline_passed())
            return gp_run_time_up(S, err);
        size_t nu = 0;
        while (nu < S->nunits && next_window(S, &t, &i0, &S->units[nu]))
            nu++;
        if (nu == 0)
            return 0;
        gp_run_par_for(S, nu, fn);
        for (size_t u = 0; u < nu; u++) {
            int rc = merge ? unit_merge(S, &S->units[u], found_inf, err) : S->units[u].rc;
            if (rc != 0) {
                if (!merge)
                    gp_error_set(err, "%s", S->units[u].err.msg);
                return rc;
            }
        }
    }
}

/* Accumulate every tensor for the current step, window after window, in waves of up to
 * nunits windows run on the lanes and merged in window order: every sum the report holds
 * adds the windows' partial sums in window order, whatever the number of threads. A grad
 * whose scales span chunks (gp_run_spanning) first has its amaxes found (amax_run; a
 * maximum is exact, so the slots hold the same bits for any number of threads), and a
 * scaled accumulator the amaxes of its running sum (acc_amax_run, one wave per
 * micro-batch: each depends on the re-quantization before it). */
int gp_run_accumulate_step(sim *S, int *found_inf, gp_error *err)
{
    int spanning = 0;
    for (size_t t = 0; t < S->sc->ntensors; t++)
        if (S->ts[t].amax) {
            memset(S->ts[t].amax, 0, gp_run_amax_slots(S->sc, t) * sizeof *S->ts[t].amax);
            spanning = 1;
        }
    int rc = spanning ? waves(S, amax_run, 0, found_inf, err) : 0;
    int acc_model = 0;
    for (size_t t = 0; t < S->sc->ntensors; t++)
        if (S->ts[t].acc_shadow) {
            memset(S->ts[t].acc_amax, 0, (size_t)S->sc->batch.microbatches * sizeof *S->ts[t].acc_amax);
            acc_model = 1;
        }
    for (S->acc_wave = 0; acc_model && rc == 0 && S->acc_wave < S->K; S->acc_wave++) /* micro-batch by micro-batch */
        rc = waves(S, acc_amax_run, 0, found_inf, err);
    return rc ? rc : waves(S, window_run, 1, found_inf, err);
}
