/* gp_run_sample.c — replayed and sampled tensors of one run: the dumps opened once, the
 * elements a `sample:` chose, and the intervals of the estimates of a sampled run. */
#include "gp_run_internal.h"

void gp_run_replay_end(replay_run *R, size_t nt)
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
int gp_run_replay_begin(const gp_scenario *sc, replay_run *R, gp_error *err)
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
        gp_run_replay_end(R, 0);
        return gp_error_set(err, "out of memory");
    }
    memcpy(R->view.tensors, sc->tensors, nt * sizeof *sc->tensors);
    for (size_t t = 0; t < nt; t++) {
        const gp_tensor_spec *ts = &sc->tensors[t];
        gp_error e = {""};
        /* Shared (gp_replay.h): every tensor, scenario and sweep point of the run reads one
         * parsed dump. The loader opened it: failing now, it changed since (a fault). */
        if (ts->grad.kind == GP_DIST_REPLAY && gp_replay_open(ts->grad.replay, &R->dump[t], &e) != 0) {
            gp_run_replay_end(R, nt);
            gp_error_set(err, "tensor '%s': %s", ts->name, e.msg);
            return -3;
        }
        if (ts->weight.kind == GP_DIST_REPLAY && gp_replay_open(ts->weight.replay, &R->wdump[t], &e) != 0) {
            gp_run_replay_end(R, nt);
            gp_error_set(err, "tensor '%s': %s", ts->name, e.msg);
            return -3;
        }
        if ((ts->state.replay && gp_replay_open(ts->state.replay, &R->sdump[t], &e) != 0) ||
            (ts->twin.replay && gp_replay_open(ts->twin.replay, &R->tdump[t], &e) != 0)) {
            gp_run_replay_end(R, nt);
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
                gp_run_replay_end(R, nt);
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
void gp_run_sampled_intervals(const gp_scenario *sc, const replay_run *R, gp_result *res)
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
