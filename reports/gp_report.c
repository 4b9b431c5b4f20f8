/* gp_report.c — see gp_report.h. */
#include "gp_report.h"

#include "../base/gp_file.h"
#include "../base/gp_out.h"
#include "gp_json_in.h"
#include "../harness/run/gp_collective.h"

#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/gp_buf.h"
#include "../harness/run/gp_optim.h"
#include "../kernels/gp_names.h"


/* JSON has no inf/NaN: those are written as the strings "inf", "-inf", "nan". */
static json_t *number(double v)
{
    if (v != v)
        return json_string("nan");
    if (isinf(v))
        return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

/* ---- notes ---- */

static void note(gp_notes *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(gp_notes *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *t = len >= 0 ? malloc((size_t)len + 1) : NULL;
    char **grown = t ? realloc(o->text, ((size_t)o->n + 1) * sizeof *grown) : NULL;
    if (!grown) {
        free(t);
        o->oom = 1;
        return;
    }
    o->text = grown;
    va_start(ap, fmt);
    vsnprintf(t, (size_t)len + 1, fmt, ap);
    va_end(ap);
    o->text[o->n++] = t;
}

void gp_notes_free(gp_notes *o)
{
    for (int k = 0; k < o->n; k++)
        free(o->text[k]);
    free(o->text);
    o->text = NULL;
    o->n = 0;
}

/* The systematic rounding bias of scaled stored gradients (grad_bias_score above 1, the
 * scenario's or a tensor's): the note names the finding, the tensors above 1 (the first
 * three, then how many more), the score and what to change. */
static void grad_bias_note(const gp_scenario *sc, const gp_result *r, gp_notes *o)
{
    const gp_scaled_cfg *q = &sc->precision.grad_sc;
    char names[400] = "", fmt[128];
    size_t k = 0, above = 0;
    for (size_t t = 0; t < r->ntensors; t++)
        if (r->tensors[t].metric[GP_M_GRAD_BIAS_SCORE] > 1 && ++above <= 3 && k < sizeof names)
            k += (size_t)snprintf(names + k, sizeof names - k, "%s%s (%.3g)", above > 1 ? ", " : "",
                                  r->tensors[t].name, r->tensors[t].metric[GP_M_GRAD_BIAS_SCORE]);
    if (above > 3 && k < sizeof names)
        snprintf(names + k, sizeof names - k, " and %zu more", above - 3);
    if (!above && !(r->metric[GP_M_GRAD_BIAS_SCORE] > 1))
        return;
    gp_scaled_name(q, fmt, sizeof fmt);
    note(o, "systematic rounding bias: the %s gradients of %s round the same way over the micro-batches: their "
         "accumulated rounding error is %.3g times the most an unbiased rounding onto the same grid gives "
         "(grad_bias_score; false alarm 1e-9 a tensor): %s (docs/model.md, Systematic rounding bias)",
         fmt, above ? names : "the tensors together", r->metric[GP_M_GRAD_BIAS_SCORE],
         q->mode == GP_STOCHASTIC ? "under :sr this is not expected: the rounding's random bits are suspect"
                                  : "use :sr (stochastic rounding, unbiased: NVIDIA's recipe for gradients), a "
                                    "finer block, or an element format with more mantissa bits");
}

/* The AdamW models a subject's steps equalled bit for bit (matched != 0) or not, as
 * "a, b" ("" when none). */
static void model_list(const gp_scenario *sc, const gp_result *r, int matched, char *buf, size_t n)
{
    gp_adamw_config cfg = gp_optim_config(sc);
    const gp_optim_counts *c = &r->st.opt;
    size_t k = 0;
    buf[0] = '\0';
    for (int m = 0; m < gp_optim_model_count(&cfg); m++)
        if ((c->models_checked >> m & 1) && (int)(c->models_differ >> m & 1) != matched && k < n)
            k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", gp_optim_model_name(&cfg, m));
}

/* The twin check's note, first of all (tensors with `twin`: docs/replay.md): that the
 * replay equals torch's run, or its first departure: where, which output, both values in
 * decimal and hex. */
static void twin_note(const gp_scenario *sc, const gp_result *r, gp_notes *o)
{
    const gp_mismatch *m = &r->first_twin;
    if (r->st.opt.twin_checked && r->metric[GP_M_TWIN_MISMATCH_COUNT] == 0) {
        note(o, "torch's twin: the replay's %s after each step (%d in all) equal torch's bit for bit (%.0f "
             "element-outputs): the verdicts judge the user's run", sc->optimizer.master ? "param, master, m and v"
             : "param, m and v", sc->steps, (double)r->st.opt.twin_checked);
        return;
    }
    if (!m->set || m->tensor >= sc->ntensors)
        return;
    const char *out = m->output;
    gp_format f = !strcmp(out, "param") ? sc->optimizer.param : !strcmp(out, "master") ? GP_FP32 : sc->optimizer.state;
    const char *entry = !strcmp(out, "m") ? "exp_avg" : !strcmp(out, "v") ? "exp_avg_sq" : out;
    note(o, "not torch's twin: %.0f element-outputs differ; first at step %ld, tensor %s element %lld, %s (%s/step%ld/"
         "%s): torch %.9g (0x%0*x), replay %.9g (0x%0*x); the verdicts judge this replay, not the user's run",
         r->metric[GP_M_TWIN_MISMATCH_COUNT], m->step - 1, sc->tensors[m->tensor].name, (long long)m->element, out,
         sc->tensors[m->tensor].twin.key, m->step - 1, entry, gp_fmt_to_f64(f, m->compared), m->bits / 4,
         (unsigned)m->compared, gp_fmt_to_f64(f, m->value), m->bits / 4, (unsigned)m->value);
}

void gp_report_notes(const gp_scenario *sc, const gp_result *r, gp_notes *o)
{
    o->n = o->oom = 0;
    o->text = NULL;
    twin_note(sc, r, o);
    if (r->st.opt.models_checked) {
        char names[200];
        model_list(sc, r, 1, names, sizeof names);
        if (names[0])
            note(o, "the backend's AdamW steps equal gradprec's model(s) %s bit for bit (optimizer.evaluation "
                 "of the scenario: %s)", names, gp_adamw_eval_name(sc->optimizer.evaluation));
        else {
            model_list(sc, r, 0, names, sizeof names);
            note(o, "the backend's AdamW steps match none of gradprec's models bit for bit (%s): judged against the "
                 "exact reference only", names);
        }
    }
    uint64_t ns = 0, ms = 0;
    size_t nsampled = 0;
    for (size_t t = 0; t < r->ntensors; t++) {
        const gp_tensor_result *tr = &r->tensors[t];
        ns += tr->size;
        ms += tr->population ? tr->population : tr->size;
        nsampled += tr->population != 0;
    }
    if (sc->sample && nsampled) { /* the scenario's sample: one note */
        char iv[160] = "95% intervals in report.json";
        if (r->has_ci[GP_M_GRAD_REL_ERR_FULLBATCH])
            snprintf(iv, sizeof iv, "95%% intervals in report.json; grad_rel_err_fullbatch in [%.3g, %.3g]",
                     r->ci_lo[GP_M_GRAD_REL_ERR_FULLBATCH], r->ci_hi[GP_M_GRAD_REL_ERR_FULLBATCH]);
        note(o, "metrics are estimates over a sample of %llu of %llu elements (%zu of %zu tensors sampled; %s; "
             "docs/scenarios.md)", (unsigned long long)ns, (unsigned long long)ms, nsampled, r->ntensors, iv);
        if (r->clip_by_step)
            note(o, "clipping used the global norm estimated from the sample (step 1: coefficient %.4g, 95%% interval "
                 "[%.4g, %.4g]): weight_rel_err, m_rel_err, v_rel_err, stale_update_frac and state_underflow_frac "
                 "have no interval (docs/scenarios.md)", r->clip_by_step[3], r->clip_by_step[4], r->clip_by_step[5]);
    }
    for (int i = 0; i < GP_NMETRICS; i++)
        if (r->undecided[i])
            note(o, "%s: the threshold %g lies inside the estimate's 95%% interval [%.3g, %.3g]: the sample cannot "
                 "decide (a warning; sample more elements)", gp_metric_name((gp_metric)i),
                 r->has_threshold[i] && !(r->ci_hi[i] <= r->threshold[i]) ? r->threshold[i] : r->threshold_min[i],
                 r->ci_lo[i], r->ci_hi[i]);
    for (size_t t = 0; t < r->ntensors && !sc->sample; t++) {
        const gp_tensor_result *tr = &r->tensors[t];
        if (!tr->population)
            continue;
        char iv[160] = "95% intervals in report.json";
        if (tr->has_ci[GP_M_GRAD_REL_ERR_FULLBATCH])
            snprintf(iv, sizeof iv, "95%% intervals in report.json; grad_rel_err_fullbatch in [%.3g, %.3g]",
                     tr->ci_lo[GP_M_GRAD_REL_ERR_FULLBATCH], tr->ci_hi[GP_M_GRAD_REL_ERR_FULLBATCH]);
        note(o, "tensor %s: metrics are estimates over %llu of %llu elements (%s; docs/replay.md)", tr->name,
             (unsigned long long)tr->size, (unsigned long long)tr->population, iv);
    }
    if (r->nseeds > 1)
        note(o, "metrics are means over %d seeds (%llu..%llu): grad_rel_err_fullbatch %.3g +- %.2g, weight_rel_err "
             "%.3g +- %.2g (sample standard deviations; report.json: metrics_sd)",
             r->nseeds, (unsigned long long)sc->seed, (unsigned long long)(sc->seed + (uint64_t)r->nseeds - 1),
             r->metric[GP_M_GRAD_REL_ERR_FULLBATCH], r->metric_sd[GP_M_GRAD_REL_ERR_FULLBATCH],
             r->metric[GP_M_WEIGHT_REL_ERR], r->metric_sd[GP_M_WEIGHT_REL_ERR]);
    if (gp_scenario_distributed(sc)) {
        const gp_coll_stats *c = &r->st.coll;
        double pre, post;
        char rname[128];
        gp_coll_factors(sc, &pre, &post);
        note(o, "collective: %s over %d ranks in %s (%s%s; divided by %g before the sum, %g after): "
             "collective_rel_err %.3g; %llu of %llu additions absorbed, %llu overflows (docs/distributed.md)",
             sc->distributed.collective == GP_COLL_REDUCE_SCATTER ? "reduce-scatter"
             : sc->distributed.collective == GP_COLL_TREE ? "tree all-reduce" : "ring all-reduce",
             sc->distributed.world_size, gp_scenario_reduce_name(sc, rname, sizeof rname),
             sc->distributed.no_sync ? "once per window" : "on every micro-batch: no no_sync()",
             sc->distributed.average == GP_AVG_OP ? ", NCCL's average op" : "", pre, post,
             r->metric[GP_M_COLLECTIVE_REL_ERR], (unsigned long long)c->absorbed,
             (unsigned long long)c->adds_nonzero, (unsigned long long)c->overflow);
        if (r->has_no_sync_twin)
            note(o, "without no_sync() the collective runs after every micro-batch: grad_rel_err_rounding %.3g "
                 "against %.3g for the same gradients with no_sync() (collective_rel_err %.3g against %.3g)",
                 r->metric[GP_M_GRAD_REL_ERR_ROUNDING], r->twin_rel_err_rounding, r->metric[GP_M_COLLECTIVE_REL_ERR],
                 r->twin_collective_rel_err);
        if (c->overflow)
            note(o, "the collective overflowed %s %llu times: %s", rname, (unsigned long long)c->overflow,
                 sc->distributed.reduce_scaled
                     ? "a non-saturating cast (:nosat) of a partial sum past the element format's largest value; "
                       "drop :nosat (saturate)"
                 : pre < sc->distributed.world_size
                     ? "the partial sums before the division exceed the format's range; dividing by the world size "
                       "before the sum (average: pre) keeps them in range"
                     : "even the pre-divided values exceed the format's range");
    }
    if (r->st.opt.skip_writes)
        note(o, "the backend wrote optimizer state during a skipped step");
    if (r->st.opt.mismatches)
        note(o, "the compared backends' optimizer steps differ");
    if (r->st.opt.formula) {
        const gp_formula_first *f = &r->st.opt.first_formula;
        char first[400] = "";
        if (f->set && f->tensor < r->ntensors)
            snprintf(first, sizeof first, "; the first: step %ld, tensor %s, element %llu: %s departs first, "
                     "stored %.9g (%a) where AdamW gives %.9g (%a)", f->step, r->tensors[f->tensor].name,
                     (unsigned long long)f->element, f->output, f->value, f->value, f->adamw, f->adamw);
        note(o, "%llu optimizer element steps are not AdamW's: no rounding of any AdamW model explains them (update "
             "formula: a dropped bias correction, coupled weight decay, ...; docs/model.md, Update formula)%s",
             (unsigned long long)r->st.opt.formula, first);
    }
    if (r->st.replay_nonfinite)
        note(o, "%llu replayed gradient entries of the applied steps are inf or NaN: every metric measured against "
             "the exact gradient is undefined (absent from report.json, nan in the tables) and the verdict names "
             "non-finite (docs/scenarios.md, Non-finite gradients)", (unsigned long long)r->st.replay_nonfinite);
    if (r->skipped_steps)
        note(o, "%d of %d steps were skipped on a non-finite gradient: their gradients count as lost to scaling",
             r->skipped_steps, r->nopt);
    if (r->st.overflow_skipped)
        note(o, "%llu overflows happened in the skipped steps (the scaler discarded those gradients); "
             "overflow_count counts the applied steps only",
             (unsigned long long)r->st.overflow_skipped);
    if (sc->precision.grad_scaled) { /* precision.grad in a scaled format: what to change */
        const gp_scaled_cfg *q = &sc->precision.grad_sc;
        if (r->st.stale_sat)
            note(o, "stale scale: %llu gradient elements saturated at %g under delayed scaling: the delayed scale "
                 "from the amax history (%d steps) was %g, the current amax needs %g: use current or blockwise "
                 "scaling, or a margin (:margin=M divides the scale by 2^M; docs/formats.md)",
                 (unsigned long long)r->st.stale_sat, gp_elem_max(q->elem), q->hist, r->st.stale_scale,
                 r->st.stale_need);
        else if (r->loss[GP_MECH_SATURATION] > 0)
            note(o, "saturation: gradients clamped to the format's largest value %g lost %.3g of the gradient: "
                 "%s (docs/formats.md)", gp_elem_max(q->elem), r->loss[GP_MECH_SATURATION],
                 q->kind == GP_SC_MX      ? "the MX scale rule puts a block's amax above the element's range: use "
                                            ":rceil, which never saturates"
                : q->kind == GP_SC_NVFP4 ? "a block's e4m3 scale rounded below amax / 6 puts its largest elements "
                                           "past 6 (the recipe clamps them)"
                                         : "the scale puts the amax above the element's range: lower it (a margin)");
        if (r->st.overflow && !q->sat)
            note(o, "the non-saturating cast (:nosat) turned %llu overflowing gradients into NaN or inf: drop :nosat "
                 "(saturate) or lower the scale", (unsigned long long)r->st.overflow);
        grad_bias_note(sc, r, o);
    }
    if (sc->clip.max_norm > 0 && sc->loss_scale.mode != GP_LS_NONE && !sc->loss_scale.unscale_before_clip)
        note(o, "gradients are clipped before unscaling: the clip compares max_norm with the scaled norm");
    if (r->emulated_clip_scaler)
        note(o, "the backend has no grad_sumsq / grad_scale / scaler_update: clipping and the loss-scale update ran "
             "in gradprec's CPU emulation");
    if (sc->loss_scale.mode == GP_LS_DYNAMIC && !sc->loss_scale.update)
        note(o, "the loss scale is never updated");
    if (r->metric[GP_M_SUBNORMAL_FRAC] > 0) {
        gp_fmt_info fi = gp_fmt_get(sc->precision.grad);
        note(o, "%.3g%% of the stored gradients are subnormal in %s (below 2^%d): they keep fewer than %d "
             "significant bits; that loss counts as rounding, as underflow where more than half the bits are lost",
             100.0 * r->metric[GP_M_SUBNORMAL_FRAC], gp_format_name(sc->precision.grad), fi.emin, fi.p);
    }
    double base = 0;
    gp_default_threshold(&(gp_result){.floor_grad = 0, .floor_weight = 0}, GP_M_GRAD_REL_ERR_FULLBATCH, &base);
    if (!sc->thresholds.set[GP_M_GRAD_REL_ERR_FULLBATCH] && r->threshold[GP_M_GRAD_REL_ERR_FULLBATCH] > base)
        note(o, "grad_rel_err_fullbatch is judged against %.3g = 2 x the format floor %.3g of %s gradients in a %s "
             "accumulator (the rounding those formats cannot avoid; docs/scenarios.md, Verdicts)",
             r->threshold[GP_M_GRAD_REL_ERR_FULLBATCH], r->floor_grad, gp_format_name(sc->precision.grad),
             gp_format_name(sc->precision.accumulator));
    if (!sc->thresholds.set[GP_M_WEIGHT_REL_ERR] && r->threshold[GP_M_WEIGHT_REL_ERR] > base)
        note(o, "weight_rel_err is judged against %.3g = 2 x the format floor %.3g of %s weights (one rounding of "
             "the final weights; docs/scenarios.md, Verdicts)",
             r->threshold[GP_M_WEIGHT_REL_ERR], r->floor_weight,
             gp_format_name(sc->optimizer.master ? GP_FP32 : sc->optimizer.param));
}

/* ---- report.json ---- */

static json_t *metrics_json(const double *metric)
{
    json_t *o = json_object();
    for (int i = 0; i < GP_NMETRICS; i++)
        if (metric[i] == metric[i] || i == GP_M_MAX_ULP_ERR)
            json_object_set_new(o, gp_metric_name((gp_metric)i), number(metric[i]));
    return o;
}

/* A sampled run's estimate block: elements (n of M, per tensor), the coverage, and the
 * interval [lo, hi] of every metric that has one (harness/sources/gp_sample.h). */
static json_t *sampling_json(uint64_t n, uint64_t of, const uint8_t *has, const double *lo, const double *hi)
{
    json_t *o = json_object(), *iv = json_object();
    if (of) {
        json_object_set_new(o, "elements", json_integer((json_int_t)n));
        json_object_set_new(o, "of", json_integer((json_int_t)of));
    }
    json_object_set_new(o, "coverage", json_real(GP_SAMPLE_COVERAGE));
    for (int i = 0; i < GP_NMETRICS; i++)
        if (has[i]) {
            json_t *a = json_array();
            json_array_append_new(a, number(lo[i]));
            json_array_append_new(a, number(hi[i]));
            json_object_set_new(iv, gp_metric_name((gp_metric)i), a);
        }
    json_object_set_new(o, "intervals", iv);
    return o;
}

static json_t *loss_json(const double *loss)
{
    json_t *o = json_object();
    for (int m = 0; m < GP_NMECH; m++)
        json_object_set_new(o, gp_mechanism_name((gp_mechanism)m), number(loss[m]));
    return o;
}

static json_t *events_json(const gp_stats *st)
{
    json_t *o = json_object();
    json_object_set_new(o, "roundings_nonzero", json_integer((json_int_t)st->rounded_nonzero));
    json_object_set_new(o, "underflow", json_integer((json_int_t)st->underflow));
    json_object_set_new(o, "additions_nonzero", json_integer((json_int_t)st->adds_nonzero));
    json_object_set_new(o, "absorbed", json_integer((json_int_t)st->absorbed));
    json_object_set_new(o, "overflow", json_integer((json_int_t)st->overflow));
    json_object_set_new(o, "overflow_in_skipped_steps", json_integer((json_int_t)st->overflow_skipped));
    json_object_set_new(o, "stored_nonzero", json_integer((json_int_t)st->stored_nonzero));
    json_object_set_new(o, "stored_subnormal", json_integer((json_int_t)st->subnormal));
    json_object_set_new(o, "nonfinite", json_integer((json_int_t)st->nonfinite));
    json_object_set_new(o, "backend_mismatches", json_integer((json_int_t)st->mismatches));
    json_object_set_new(o, "updates_nonzero", json_integer((json_int_t)st->opt.nonzero));
    json_object_set_new(o, "stale_updates", json_integer((json_int_t)st->opt.stale));
    json_object_set_new(o, "state_values_nonzero", json_integer((json_int_t)st->opt.state_nonzero));
    json_object_set_new(o, "state_underflow", json_integer((json_int_t)st->opt.state_underflow));
    json_object_set_new(o, "writes_in_skipped_steps", json_integer((json_int_t)st->opt.skip_writes));
    json_object_set_new(o, "optimizer_mismatches", json_integer((json_int_t)st->opt.mismatches));
    json_object_set_new(o, "update_formula_steps", json_integer((json_int_t)st->opt.formula));
    return o;
}

static json_t *config_json(const gp_scenario *sc)
{
    json_t *o = json_object();
    /* JSON readers (jansson included) hold integers as int64: a seed of 2^63 or more is
     * written as its decimal string so that it reads back exactly. */
    if (sc->seed <= (uint64_t)INT64_MAX)
        json_object_set_new(o, "seed", json_integer((json_int_t)sc->seed));
    else {
        char digits[24];
        snprintf(digits, sizeof digits, "%llu", (unsigned long long)sc->seed);
        json_object_set_new(o, "seed", json_string(digits));
    }
    json_object_set_new(o, "reduction", json_string(gp_reduction_name(sc->reduction)));
    json_object_set_new(o, "fullbatch", json_string(sc->fullbatch == GP_FB_MEAN ? "mean" : "sum"));
    json_t *p = json_object();
    char gname[128], aname[128];
    gp_scenario_precision_names(sc, gname, aname, sizeof gname);
    json_object_set_new(p, "grad", json_string(gname));
    json_object_set_new(p, "accumulator", json_string(aname));
    json_object_set_new(p, "rounding", json_string(gp_acc_rounding_name(sc->precision.rounding)));
    json_object_set_new(p, "ftz", json_boolean(sc->precision.ftz));
    json_object_set_new(o, "precision", p);
    json_t *b = json_object(), *tok = json_array();
    json_object_set_new(b, "accumulation_steps", json_integer(sc->batch.accumulation_steps));
    json_object_set_new(b, "microbatches", json_integer(sc->batch.microbatches));
    for (int k = 0; k < sc->batch.microbatches; k++)
        json_array_append_new(tok, json_integer(sc->batch.tokens[k]));
    json_object_set_new(b, "tokens", tok);
    if (sc->batch.step_tokens) { /* per-step counts: step s's K_s (tokens: the first step with K) */
        json_t *steps = json_array();
        for (int st = 0; st < sc->steps; st++) {
            json_t *row = json_array();
            for (int k = 0; k < sc->batch.step_mb[st]; k++)
                json_array_append_new(row, json_integer(sc->batch.step_tokens[st][k]));
            json_array_append_new(steps, row);
        }
        json_object_set_new(b, "step_tokens", steps);
    }
    json_object_set_new(o, "batch", b);
    json_t *ls = json_object();
    json_object_set_new(ls, "mode", json_string(gp_ls_mode_name(sc->loss_scale.mode)));
    if (sc->loss_scale.mode != GP_LS_NONE) {
        json_object_set_new(ls, "init", number(sc->loss_scale.init));
        json_object_set_new(ls, "unscale_before_clip", json_boolean(sc->loss_scale.unscale_before_clip));
    }
    if (sc->loss_scale.mode == GP_LS_DYNAMIC) {
        json_object_set_new(ls, "growth", number(sc->loss_scale.growth));
        json_object_set_new(ls, "backoff", number(sc->loss_scale.backoff));
        json_object_set_new(ls, "interval", json_integer(sc->loss_scale.interval));
        json_object_set_new(ls, "update", json_boolean(sc->loss_scale.update));
    }
    json_object_set_new(o, "loss_scale", ls);
    json_t *clip = json_object();
    json_object_set_new(clip, "max_norm", number(sc->clip.max_norm));
    json_object_set_new(o, "clip", clip);
    json_t *op = json_object();
    json_object_set_new(op, "name", json_string("adamw"));
    json_object_set_new(op, "lr", number(sc->optimizer.lr));
    json_t *betas = json_array();
    json_array_append_new(betas, number(sc->optimizer.beta1));
    json_array_append_new(betas, number(sc->optimizer.beta2));
    json_object_set_new(op, "betas", betas);
    json_object_set_new(op, "eps", number(sc->optimizer.eps));
    json_object_set_new(op, "weight_decay", number(sc->optimizer.weight_decay));
    json_object_set_new(op, "param", json_string(gp_format_name(sc->optimizer.param)));
    json_object_set_new(op, "master", sc->optimizer.master ? json_string("fp32") : json_null());
    json_object_set_new(op, "state", json_string(gp_format_name(sc->optimizer.state)));
    json_object_set_new(op, "kahan", json_boolean(sc->optimizer.kahan));
    json_object_set_new(op, "stochastic", json_boolean(sc->optimizer.stochastic));
    json_object_set_new(op, "fused", sc->optimizer.fused ? json_string("torch_cpu") : json_null());
    json_object_set_new(op, "evaluation", json_string(gp_adamw_eval_name(sc->optimizer.evaluation)));
    json_object_set_new(o, "optimizer", op);
    json_object_set_new(o, "schedule", json_string(gp_schedule_name(sc->schedule.kind)));
    json_object_set_new(o, "steps", json_integer(sc->steps));
    if (gp_scenario_distributed(sc)) { /* only then: one process's report stays as it was */
        json_t *d = json_object();
        double pre, post;
        gp_coll_factors(sc, &pre, &post);
        json_object_set_new(d, "world_size", json_integer(sc->distributed.world_size));
        json_object_set_new(d, "collective", json_string(gp_collective_name(sc->distributed.collective)));
        char rname[128];
        json_object_set_new(d, "reduce_dtype", json_string(gp_scenario_reduce_name(sc, rname, sizeof rname)));
        json_object_set_new(d, "average", json_string(gp_average_name(sc->distributed.average)));
        json_object_set_new(d, "predivide", number(pre));
        json_object_set_new(d, "postdivide", number(post));
        json_object_set_new(d, "no_sync", json_boolean(sc->distributed.no_sync));
        json_object_set_new(d, "bucket_elements", json_integer(sc->distributed.bucket_elements));
        json_object_set_new(d, "normalize", json_string(sc->distributed.normalize == GP_NORM_RANK ? "rank" : "global"));
        if (sc->distributed.tokens) {
            json_t *rows = json_array();
            for (int r = 0; r < sc->distributed.world_size; r++) {
                json_t *row = json_array();
                for (int k = 0; k < sc->batch.microbatches; k++)
                    json_array_append_new(row, json_integer(gp_scenario_tokens(sc, r, k)));
                json_array_append_new(rows, row);
            }
            json_object_set_new(d, "tokens", rows);
        }
        json_object_set_new(o, "distributed", d);
    }
    return o;
}

/* The simulated collective's share (distributed scenarios only). */
static json_t *collective_json(const gp_result *r)
{
    json_t *o = json_object(), *ev = json_object();
    const gp_coll_stats *c = &r->st.coll;
    json_object_set_new(o, "collective_rel_err", number(r->metric[GP_M_COLLECTIVE_REL_ERR]));
    json_object_set_new(o, "loss_by_mechanism", loss_json(r->coll_loss));
    json_object_set_new(ev, "element_hops", json_integer((json_int_t)c->hops));
    json_object_set_new(ev, "additions_nonzero", json_integer((json_int_t)c->adds_nonzero));
    json_object_set_new(ev, "absorbed", json_integer((json_int_t)c->absorbed));
    json_object_set_new(ev, "roundings_nonzero", json_integer((json_int_t)c->roundings));
    json_object_set_new(ev, "underflow", json_integer((json_int_t)c->underflow));
    json_object_set_new(ev, "overflow", json_integer((json_int_t)c->overflow));
    json_object_set_new(o, "events", ev);
    if (r->has_no_sync_twin) { /* the same run with no_sync(): what its absence costs */
        json_t *ns = json_object();
        json_object_set_new(ns, "grad_rel_err_rounding_with_no_sync", number(r->twin_rel_err_rounding));
        json_object_set_new(ns, "collective_rel_err_with_no_sync", number(r->twin_collective_rel_err));
        json_object_set_new(ns, "extra_grad_rel_err_rounding",
                            number(r->metric[GP_M_GRAD_REL_ERR_ROUNDING] - r->twin_rel_err_rounding));
        json_object_set_new(o, "missing_no_sync", ns);
    }
    return o;
}

void gp_mismatch_describe(const gp_result *r, char *buf, size_t n)
{
    const gp_mismatch *m = &r->first_mismatch;
    if (!m->set) {
        snprintf(buf, n, "none");
        return;
    }
    int digits = m->bits / 4;
    char where[GP_NAME_MAX + 64] = "";
    if (m->element >= 0)
        snprintf(where, sizeof where, ", tensor %s element %lld",
                 m->tensor < r->ntensors ? r->tensors[m->tensor].name : "?", (long long)m->element);
    else if (strcmp(m->entry, "scaler_update") != 0)
        snprintf(where, sizeof where, ", tensor %s", m->tensor < r->ntensors ? r->tensors[m->tensor].name : "?");
    char mb[32] = "";
    if (m->microbatch >= 0) /* a collective's addition: its hop */
        snprintf(mb, sizeof mb, " %s %d", strcmp(m->entry, "accumulate (collective)") == 0 ? "hop" : "micro-batch",
                 m->microbatch);
    snprintf(buf, n, "%s %s, step %ld%s%s: 0x%0*x (backend) vs 0x%0*x (compared)", m->entry, m->output, m->step, mb,
             where, digits, (unsigned)m->value, digits, (unsigned)m->compared);
}

/* The scenario's expectation and whether the run met it, or null when it has none. */
static json_t *expect_json(const gp_scenario *sc, const gp_result *r)
{
    if (!sc->expect.set)
        return json_null();
    json_t *o = json_object();
    json_object_set_new(o, "verdict", json_string(gp_verdict_name(sc->expect.verdict)));
    json_object_set_new(o, "mechanism", sc->expect.has_mechanism ? json_string(gp_mechanism_name(sc->expect.mechanism))
                                                                 : json_null());
    json_object_set_new(o, "met", json_boolean(r->expect_met));
    return o;
}

/* The first disagreement of the compared backends, or null. */
static json_t *mismatch_json(const gp_result *r)
{
    const gp_mismatch *m = &r->first_mismatch;
    if (!m->set)
        return json_null();
    json_t *o = json_object();
    char hex[16];
    json_object_set_new(o, "entry_point", json_string(m->entry));
    json_object_set_new(o, "output", json_string(m->output));
    json_object_set_new(o, "step", json_integer(m->step));
    json_object_set_new(o, "microbatch", m->microbatch >= 0 ? json_integer(m->microbatch) : json_null());
    json_object_set_new(o, "tensor", strcmp(m->entry, "scaler_update") != 0 && m->tensor < r->ntensors
                                         ? json_string(r->tensors[m->tensor].name) : json_null());
    json_object_set_new(o, "element", m->element >= 0 ? json_integer((json_int_t)m->element) : json_null());
    snprintf(hex, sizeof hex, "0x%0*x", m->bits / 4, (unsigned)m->value);
    json_object_set_new(o, "value", json_string(hex));
    snprintf(hex, sizeof hex, "0x%0*x", m->bits / 4, (unsigned)m->compared);
    json_object_set_new(o, "compared_value", json_string(hex));
    char text[512];
    gp_mismatch_describe(r, text, sizeof text);
    json_object_set_new(o, "text", json_string(text));
    return o;
}

static json_t *expect_json(const gp_scenario *sc, const gp_result *r);

static json_t *scenario_json(const gp_scenario *sc, const gp_result *r, size_t index)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(sc->name));
    json_object_set_new(o, "index", json_integer((json_int_t)index));
    if (r->refused) { /* the backend refused its configuration: nothing was measured */
        json_object_set_new(o, "verdict", json_string("refused"));
        json_object_set_new(o, "refusal", json_string(r->refusal));
        json_object_set_new(o, "expect", expect_json(sc, r));
        return o;
    }
    json_object_set_new(o, "verdict", json_string(gp_verdict_name(r->verdict)));
    json_object_set_new(o, "dominant_mechanism", json_string(gp_mechanism_name(r->dominant)));
    json_t *failed = json_array();
    for (int i = 0; i < GP_NMETRICS; i++)
        if (r->failed[i]) {
            json_t *f = json_object();
            json_object_set_new(f, "metric", json_string(gp_metric_name((gp_metric)i)));
            json_object_set_new(f, "value", number(r->metric[i]));
            if (r->has_threshold[i])
                json_object_set_new(f, "max", number(r->threshold[i]));
            if (r->has_min[i])
                json_object_set_new(f, "min", number(r->threshold_min[i]));
            json_array_append_new(failed, f);
        }
    json_object_set_new(o, "failed", failed);
    json_t *th = json_object(), *thmin = json_object();
    for (int i = 0; i < GP_NMETRICS; i++) {
        if (r->has_threshold[i])
            json_object_set_new(th, gp_metric_name((gp_metric)i), number(r->threshold[i]));
        if (r->has_min[i])
            json_object_set_new(thmin, gp_metric_name((gp_metric)i), number(r->threshold_min[i]));
    }
    json_object_set_new(o, "thresholds", th);
    if (sc->sweep.naxes) {
        json_t *sw = json_object(), *params = json_array();
        json_object_set_new(sw, "group", json_string(sc->sweep.group));
        for (int q = 0; q < sc->sweep.nkeys; q++) {
            json_t *kv = json_object();
            json_object_set_new(kv, "key", json_string(sc->sweep.key[q]));
            json_object_set_new(kv, "value", json_string(sc->sweep.value[q]));
            json_object_set_new(kv, "axis", json_integer(sc->sweep.axis[q]));
            json_array_append_new(params, kv);
        }
        json_object_set_new(sw, "params", params);
        json_object_set_new(o, "sweep", sw);
    }
    if (json_object_size(thmin))
        json_object_set_new(o, "thresholds_min", thmin);
    else
        json_decref(thmin);
    json_object_set_new(o, "expect", expect_json(sc, r));
    json_t *exact = json_array(); /* exact_metrics: the gate compares them for equality */
    for (int m = 0; m < GP_NMETRICS; m++)
        if (sc->exact_metrics[m])
            json_array_append_new(exact, json_string(gp_metric_name((gp_metric)m)));
    if (json_array_size(exact))
        json_object_set_new(o, "exact_metrics", exact);
    else
        json_decref(exact);
    json_object_set_new(o, "config", config_json(sc));
    json_object_set_new(o, "metrics", metrics_json(r->metric));
    if (r->nseeds > 1) { /* the metrics are means over the seeds; the gate reads the spread */
        json_t *seeds = json_object();
        json_object_set_new(seeds, "n", json_integer(r->nseeds));
        json_object_set_new(seeds, "first", json_integer((json_int_t)sc->seed));
        json_object_set_new(o, "seeds", seeds);
        json_object_set_new(o, "metrics_sd", metrics_json(r->metric_sd));
    }
    if (r->sampled) { /* the metrics are estimates over sampled elements */
        json_t *smp = sampling_json(0, 0, r->has_ci, r->ci_lo, r->ci_hi);
        if (r->clip_by_step) { /* the estimated clipping norm and coefficient of each step */
            json_t *norm = json_array(), *coef = json_array();
            for (int k = 0; k < r->nopt; k++)
                for (int q = 0; q < 2; q++) {
                    json_t *a = json_array();
                    for (int j = 0; j < 3; j++)
                        json_array_append_new(a, number(r->clip_by_step[k * 6 + q * 3 + j]));
                    json_array_append_new(q ? coef : norm, a);
                }
            json_t *clip = json_object();
            json_object_set_new(clip, "norm_by_step", norm);
            json_object_set_new(clip, "coef_by_step", coef);
            json_object_set_new(smp, "clip", clip);
        }
        json_object_set_new(o, "sampling", smp);
    }
    json_object_set_new(o, "loss_by_mechanism", loss_json(r->loss));
    json_object_set_new(o, "events", events_json(&r->st));
    if (gp_scenario_distributed(sc))
        json_object_set_new(o, "collective", collective_json(r));
    json_object_set_new(o, "first_mismatch", mismatch_json(r));
    json_object_set_new(o, "optimizer_steps_taken", json_integer(r->adam_steps));
    json_t *fl = json_object();
    json_object_set_new(fl, "grad", number(r->floor_grad));
    json_object_set_new(fl, "weight", number(r->floor_weight));
    json_object_set_new(o, "format_floor", fl);
    json_t *ts = json_array();
    for (size_t t = 0; t < r->ntensors; t++) {
        const gp_tensor_result *tr = &r->tensors[t];
        json_t *to = json_object();
        json_object_set_new(to, "name", json_string(tr->name));
        json_object_set_new(to, "size", json_integer((json_int_t)tr->size));
        json_object_set_new(to, "metrics", metrics_json(tr->metric));
        if (r->nseeds > 1)
            json_object_set_new(to, "metrics_sd", metrics_json(tr->metric_sd));
        if (tr->population)
            json_object_set_new(to, "sampling", sampling_json(tr->size, tr->population, tr->has_ci, tr->ci_lo,
                                                              tr->ci_hi));
        json_object_set_new(to, "loss_by_mechanism", loss_json(tr->loss));
        json_object_set_new(to, "events", events_json(&tr->st));
        json_array_append_new(ts, to);
    }
    json_object_set_new(o, "tensors", ts);
    /* chart data: relative error of the accumulator after each micro-batch, and the
     * binade histogram of the exact backward outputs (non-empty range only) */
    json_t *traj = json_array();
    for (int k = 0; k < r->nsteps; k++)
        json_array_append_new(traj, number(r->traj_ref_ss[k] > 0 ? sqrt(r->traj_err_ss[k]) / sqrt(r->traj_ref_ss[k])
                                                                 : (r->traj_err_ss[k] > 0 ? INFINITY : 0)));
    json_object_set_new(o, "error_by_step", traj);
    int lo = GP_HIST_BINS, hi = -1;
    for (int b = 0; b < GP_HIST_BINS; b++)
        if (r->hist[b]) {
            if (b < lo) lo = b;
            hi = b;
        }
    json_t *hist = json_object(), *counts = json_array();
    json_object_set_new(hist, "first_log2", json_integer(hi >= 0 ? lo + GP_HIST_MIN_EXP : 0));
    for (int b = lo; b <= hi; b++)
        json_array_append_new(counts, json_integer((json_int_t)r->hist[b]));
    json_object_set_new(hist, "counts", counts);
    json_object_set_new(o, "grad_magnitude_log2_histogram", hist);
    /* per optimizer iteration, for multi-step scenarios (the charts' data) */
    if (r->nopt > 1) {
        json_t *stale = json_array(), *scale = json_array(), *lr = json_array(), *skipped = json_array();
        for (int k = 0; k < r->nopt; k++) {
            json_array_append_new(stale, number(r->stale_by_step[k]));
            json_array_append_new(scale, number(r->loss_scale_by_step[k]));
            json_array_append_new(lr, number(r->lr_by_step[k]));
            json_array_append_new(skipped, json_boolean(r->skipped_by_step[k]));
        }
        json_object_set_new(o, "stale_update_by_step", stale);
        json_object_set_new(o, "loss_scale_by_step", scale);
        json_object_set_new(o, "lr_by_step", lr);
        json_object_set_new(o, "skipped_by_step", skipped);
    }
    if (r->st.opt.models_checked) { /* a subject: which of gradprec's AdamW models it equalled */
        gp_adamw_config cfg = gp_optim_config(sc);
        json_t *matched = json_array(), *differ = json_array();
        for (int m = 0; m < gp_optim_model_count(&cfg); m++)
            if (r->st.opt.models_checked >> m & 1)
                json_array_append_new(r->st.opt.models_differ >> m & 1 ? differ : matched,
                                      json_string(gp_optim_model_name(&cfg, m)));
        json_t *am = json_object();
        json_object_set_new(am, "matched", matched);
        json_object_set_new(am, "differ", differ);
        json_object_set_new(o, "adamw_models", am);
    }
    json_t *notes = json_array();
    gp_notes nt;
    gp_report_notes(sc, r, &nt);
    for (int k = 0; k < nt.n; k++)
        json_array_append_new(notes, json_string(nt.text[k]));
    json_object_set_new(o, "notes", notes);
    gp_notes_free(&nt);
    if (nt.oom) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *gp_report_root(const char *backend, const char *compare_backend, json_t *scenarios)
{
    json_t *root = json_object();
    json_object_set_new(root, "schema", json_string("gradprec-report/1"));
    json_object_set_new(root, "backend", json_string(backend));
    json_object_set_new(root, "compare_backend", compare_backend ? json_string(compare_backend) : json_null());
    int count[3] = {0, 0, 0}, refused = 0;
    int worst = GP_PASS;
    size_t i;
    json_t *sc;
    json_array_foreach(scenarios, i, sc) {
        const char *v = json_string_value(json_object_get(sc, "verdict"));
        refused += v && strcmp(v, "refused") == 0;
        for (int k = 0; k < 3; k++)
            if (v && strcmp(v, gp_verdict_name((gp_verdict)k)) == 0) {
                count[k]++;
                if (k > worst)
                    worst = k;
            }
    }
    json_t *sum = json_object();
    json_object_set_new(sum, "scenarios", json_integer((json_int_t)json_array_size(scenarios)));
    json_object_set_new(sum, "pass", json_integer(count[GP_PASS]));
    json_object_set_new(sum, "warn", json_integer(count[GP_WARN]));
    json_object_set_new(sum, "fail", json_integer(count[GP_FAIL]));
    if (refused) /* scenarios whose configuration the backend refused (absent when none) */
        json_object_set_new(sum, "refused", json_integer(refused));
    json_object_set_new(sum, "verdict", json_string(gp_verdict_name((gp_verdict)worst)));
    json_object_set_new(root, "summary", sum);
    json_object_set_new(root, "scenarios", scenarios);
    return root;
}

char *gp_report_dump(const json_t *root)
{
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    if (!text)
        return NULL;
    size_t n = strlen(text);
    char *withnl = realloc(text, n + 2);
    if (!withnl) {
        free(text);
        return NULL;
    }
    withnl[n] = '\n';
    withnl[n + 1] = '\0';
    return withnl;
}

char *gp_report_json(const gp_run_report *r)
{
    return gp_report_json_shard(r, 0, 1, r->n);
}

char *gp_report_json_shard(const gp_run_report *r, size_t shard_index, size_t shard_count, size_t total)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < r->n; i++) {
        json_t *one = scenario_json(r->scenarios[i], &r->results[i], r->index ? r->index[i] : i);
        if (!one || json_array_append_new(arr, one) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    json_t *root = gp_report_root(r->backend, r->compare_backend, arr);
    if (shard_count > 1) { /* what `report merge` needs to know the shards cover the run */
        json_t *sh = json_object();
        json_object_set_new(sh, "index", json_integer((json_int_t)shard_index));
        json_object_set_new(sh, "count", json_integer((json_int_t)shard_count));
        json_object_set_new(sh, "scenarios", json_integer((json_int_t)total));
        json_object_set_new(root, "shard", sh);
    }
    char *text = gp_report_dump(root);
    json_decref(root);
    return text;
}

/* The checks of gp_report_load on a parsed root (NULL: err already says why). */
static json_t *report_check(json_t *root, const char *path, gp_error *err)
{
    if (!root)
        return NULL;
    const char *schema = json_string_value(json_object_get(root, "schema"));
    json_t *scs = json_object_get(root, "scenarios");
    const char *why = NULL;
    if (!json_is_object(root))
        why = "not a JSON object";
    else if (!schema || strcmp(schema, "gradprec-report/1") != 0)
        why = "schema is not gradprec-report/1";
    else if (!json_is_array(scs))
        why = "no \"scenarios\" array";
    else {
        size_t i;
        json_t *sc;
        json_array_foreach(scs, i, sc) {
            if (!json_is_object(sc) || !json_is_string(json_object_get(sc, "name")) ||
                !json_is_integer(json_object_get(sc, "index")) || !json_is_string(json_object_get(sc, "verdict"))) {
                why = "a scenario lacks name, index or verdict";
                break;
            }
        }
    }
    if (why) {
        gp_error_set(err, "%s: %s", path, why);
        json_decref(root);
        return NULL;
    }
    return root;
}

json_t *gp_report_load(const char *path, gp_error *err)
{
    size_t len = 0;
    char *text = gp_file_read(path, GP_FILE_MAX_REPORT, &len, err);
    if (!text)
        return NULL;
    json_t *root = gp_report_parse(text, len, path, err);
    free(text);
    return root;
}

json_t *gp_report_parse(const char *text, size_t len, const char *name, gp_error *err)
{
    return report_check(gp_json_parse(text, len, 0, name, err), name, err);
}

/* ---- Markdown ---- */

/* v, a NaN of either sign as the positive one (printed "nan", never "-nan"). */
static double nan_plain(double v)
{
    return v == v ? v : NAN;
}

static const char *g(double v, char *buf)
{
    snprintf(buf, 32, "%.3g", nan_plain(v));
    return buf;
}

/* "k=v, k=v" of the keys of the sweep axes after the first ("all" when there are none). */
static void other_axes(const gp_scenario *sc, char *out, size_t n)
{
    size_t off = 0;
    out[0] = '\0';
    for (int q = 0; q < sc->sweep.nkeys && off < n; q++)
        if (sc->sweep.axis[q] > 0)
            off += (size_t)snprintf(out + off, n - off, "%s%s=%s", off ? ", " : "", sc->sweep.key[q],
                                    sc->sweep.value[q]);
    if (!out[0])
        snprintf(out, n, "all");
}

/* Each sweep as a table: grad_rel_err_fullbatch against the first swept key (rows, in
 * the file's order), one column per combination of the other keys. */
static void markdown_sweeps(gp_buf *b, const gp_run_report *r)
{
    char x1[32];
    for (size_t i = 0; i < r->n; i++) {
        const gp_scenario *g = r->scenarios[i];
        if (!g->sweep.naxes)
            continue;
        int first = 1; /* the group's first scenario in the report */
        for (size_t j = 0; j < i && first; j++)
            first = !(r->scenarios[j]->sweep.naxes && strcmp(r->scenarios[j]->sweep.group, g->sweep.group) == 0);
        if (!first)
            continue;
        size_t *mem = malloc(r->n * sizeof *mem), nm = 0;
        char(*cols)[256] = malloc(r->n * sizeof *cols);
        size_t ncols = 0;
        if (!mem || !cols) {
            b->oom = 1;
            free(mem);
            free(cols);
            return;
        }
        for (size_t j = i; j < r->n; j++)
            if (r->scenarios[j]->sweep.naxes && strcmp(r->scenarios[j]->sweep.group, g->sweep.group) == 0) {
                mem[nm++] = j;
                char c[256];
                other_axes(r->scenarios[j], c, sizeof c);
                size_t k = 0;
                while (k < ncols && strcmp(cols[k], c) != 0)
                    k++;
                if (k == ncols)
                    memcpy(cols[ncols++], c, sizeof c);
            }
        gp_buf_printf(b, "\n### sweep %s: grad_rel_err_fullbatch against %s\n\n| %s |", g->sweep.group,
                      g->sweep.key[0], g->sweep.key[0]);
        for (size_t k = 0; k < ncols; k++)
            gp_buf_printf(b, " %s |", cols[k]);
        gp_buf_puts(b, "\n|---|");
        for (size_t k = 0; k < ncols; k++)
            gp_buf_puts(b, "---|");
        gp_buf_puts(b, "\n");
        for (size_t a = 0; a < nm; a++) { /* one row per x value, at its first appearance */
            const gp_scenario *sa = r->scenarios[mem[a]];
            int seen = 0;
            for (size_t q = 0; q < a && !seen; q++)
                seen = strcmp(r->scenarios[mem[q]]->sweep.value[0], sa->sweep.value[0]) == 0;
            if (seen)
                continue;
            gp_buf_printf(b, "| %s |", sa->sweep.value[0]);
            for (size_t k = 0; k < ncols; k++) {
                const char *cell = "";
                for (size_t q = 0; q < nm; q++) {
                    const gp_scenario *sq = r->scenarios[mem[q]];
                    char c[256];
                    other_axes(sq, c, sizeof c);
                    if (strcmp(sq->sweep.value[0], sa->sweep.value[0]) == 0 && strcmp(c, cols[k]) == 0) {
                        const gp_result *res = &r->results[mem[q]];
                        if (res->refused)
                            snprintf(x1, sizeof x1, "refused");
                        else
                            snprintf(x1, sizeof x1, "%.3g%s", res->metric[GP_M_GRAD_REL_ERR_FULLBATCH],
                                     res->verdict == GP_FAIL ? " (fail)" : "");
                        cell = x1;
                        break;
                    }
                }
                gp_buf_printf(b, " %s |", cell);
            }
            gp_buf_puts(b, "\n");
        }
        free(mem);
        free(cols);
    }
}

char *gp_report_markdown(const gp_run_report *r)
{
    gp_buf b = GP_BUF_INIT;
    char x1[32], x2[32], x3[32], x4[32], x5[32];
    int count[3] = {0, 0, 0}, refused = 0;
    for (size_t i = 0; i < r->n; i++) {
        refused += r->results[i].refused;
        count[r->results[i].verdict] += !r->results[i].refused;
    }
    gp_buf_printf(&b, "## gradprec: %d fail, %d warn, %d pass", count[GP_FAIL], count[GP_WARN], count[GP_PASS]);
    if (refused)
        gp_buf_printf(&b, ", %d refused by the backend", refused);
    gp_buf_puts(&b, "\n\n");
    gp_buf_printf(&b, "Backend `%s`%s%s%s.\n\n", r->backend, r->compare_backend ? ", compared bit for bit with `" : "",
              r->compare_backend ? r->compare_backend : "", r->compare_backend ? "`" : "");
    gp_buf_printf(&b, "| verdict | scenario | dominant loss | grad_rel_err_fullbatch | normalization_rel_err | "
                  "absorbed_frac | underflow_frac | subnormal_frac |\n|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < r->n; i++) {
        const gp_result *res = &r->results[i];
        if (res->refused) {
            gp_buf_printf(&b, "| refused | %s | - | | | | | |\n", r->scenarios[i]->name);
            continue;
        }
        gp_buf_printf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", gp_verdict_name(res->verdict),
                  r->scenarios[i]->name, gp_mechanism_name(res->dominant),
                  g(res->metric[GP_M_GRAD_REL_ERR_FULLBATCH], x1), g(res->metric[GP_M_NORMALIZATION_REL_ERR], x2),
                  g(res->metric[GP_M_ABSORBED_FRAC], x3), g(res->metric[GP_M_UNDERFLOW_FRAC], x4),
                  g(res->metric[GP_M_SUBNORMAL_FRAC], x5));
    }
    markdown_sweeps(&b, r);
    for (size_t i = 0; i < r->n; i++) {
        const gp_result *res = &r->results[i];
        const gp_scenario *sc = r->scenarios[i];
        if (res->refused) {
            gp_buf_printf(&b, "\n### %s: refused\n\n- %s\n", sc->name, res->refusal);
            if (sc->expect.set)
                gp_buf_printf(&b, "- expected: %s — **NOT MET**\n", gp_verdict_name(sc->expect.verdict));
            continue;
        }
        gp_buf_printf(&b, "\n### %s: %s\n\n", sc->name, gp_verdict_name(res->verdict));
        char gname[128], aname[128];
        gp_scenario_precision_names(sc, gname, aname, sizeof gname);
        gp_buf_printf(&b, "%s gradients into a %s accumulator (%s), K = %d micro-batches, reduction `%s`.\n\n",
                  gname, aname,
                  gp_acc_rounding_name(sc->precision.rounding), sc->batch.microbatches, gp_reduction_name(sc->reduction));
        if (sc->expect.set)
            gp_buf_printf(&b, "- expected: %s%s%s — %s\n", gp_verdict_name(sc->expect.verdict),
                          sc->expect.has_mechanism ? ", naming " : "",
                          sc->expect.has_mechanism ? gp_mechanism_name(sc->expect.mechanism) : "",
                          res->expect_met ? "met" : "**NOT MET**");
        for (int m = 0; m < GP_NMETRICS; m++)
            if (res->failed[m] && res->has_min[m] && !(res->metric[m] >= res->threshold_min[m]))
                gp_buf_printf(&b, "- **%s = %s** is below %s\n", gp_metric_name((gp_metric)m), g(res->metric[m], x1),
                          g(res->threshold_min[m], x2));
            else if (res->failed[m] && res->metric[m] != res->metric[m])
                gp_buf_printf(&b, "- **%s** is undefined (nan), which fails its threshold %s\n",
                              gp_metric_name((gp_metric)m), g(res->threshold[m], x2));
            else if (res->failed[m])
                gp_buf_printf(&b, "- **%s = %s** exceeds %s\n", gp_metric_name((gp_metric)m), g(res->metric[m], x1),
                          g(res->threshold[m], x2));
        gp_buf_printf(&b, "- loss by mechanism (error norm / full-batch norm):");
        for (int m = 0; m < GP_NMECH; m++)
            gp_buf_printf(&b, " %s %s%s", gp_mechanism_name((gp_mechanism)m), g(res->loss[m], x1),
                      m + 1 < GP_NMECH ? "," : "\n");
        if (gp_scenario_distributed(sc)) {
            gp_buf_printf(&b, "- collective: collective_rel_err %s; its loss by mechanism:",
                          g(res->metric[GP_M_COLLECTIVE_REL_ERR], x1));
            for (int m = GP_MECH_UNDERFLOW; m <= GP_MECH_ROUNDING; m++)
                gp_buf_printf(&b, " %s %s%s", gp_mechanism_name((gp_mechanism)m), g(res->coll_loss[m], x1),
                              m < GP_MECH_ROUNDING ? "," : "\n");
        }
        gp_buf_printf(&b, "- events: %llu of %llu additions absorbed, %llu of %llu roundings underflowed, "
                      "%llu overflows, %llu of %llu stored gradients subnormal\n",
                  (unsigned long long)res->st.absorbed, (unsigned long long)res->st.adds_nonzero,
                  (unsigned long long)res->st.underflow, (unsigned long long)res->st.rounded_nonzero,
                  (unsigned long long)res->st.overflow, (unsigned long long)res->st.subnormal,
                  (unsigned long long)res->st.stored_nonzero);
        if (res->st.mismatches || res->st.opt.mismatches) {
            char first[512];
            gp_mismatch_describe(res, first, sizeof first);
            gp_buf_printf(&b, "- **%llu results differ between the backends**; the first: %s\n",
                      (unsigned long long)(res->st.mismatches + res->st.opt.mismatches), first);
        }
        gp_notes nt;
        gp_report_notes(sc, res, &nt);
        for (int k = 0; k < nt.n && k < GP_NOTES_SHOWN; k++)
            gp_buf_printf(&b, "- note: %s\n", nt.text[k]);
        if (nt.n > GP_NOTES_SHOWN)
            gp_buf_printf(&b, "- %d more notes in report.json\n", nt.n - GP_NOTES_SHOWN);
        b.oom |= nt.oom;
        gp_notes_free(&nt);
        gp_buf_printf(&b, "\n<details><summary>per tensor</summary>\n\n| tensor | size | grad_rel_err_fullbatch | "
                      "absorbed_frac | underflow_frac |\n|---|---|---|---|---|\n");
        for (size_t t = 0; t < res->ntensors; t++) {
            const gp_tensor_result *tr = &res->tensors[t];
            gp_buf_printf(&b, "| %s | %llu | %s | %s | %s |\n", tr->name, (unsigned long long)tr->size,
                      g(tr->metric[GP_M_GRAD_REL_ERR_FULLBATCH], x1), g(tr->metric[GP_M_ABSORBED_FRAC], x2),
                      g(tr->metric[GP_M_UNDERFLOW_FRAC], x3));
        }
        gp_buf_printf(&b, "\n</details>\n");
    }
    return gp_buf_take(&b);
}

void gp_report_table(FILE *out, const gp_run_report *r)
{
    int w = 8; /* the name column fits the longest name: two rows never read the same */
    for (size_t i = 0; i < r->n; i++) {
        int len = (int)strlen(r->scenarios[i]->name);
        if (len > w)
            w = len;
    }
    fprintf(out, "%-4s  %-*s %-15s %9s %9s %9s %9s %9s %9s %7s\n", "", w, "scenario", "dominant", "err_full",
            "err_norm", "absorbed", "underflow", "stale", "w_err", "skipped");
    for (size_t i = 0; i < r->n; i++) {
        const gp_result *res = &r->results[i];
        if (res->refused) {
            fprintf(out, "%-4s  %-*s refused: %s\n", "-", w, r->scenarios[i]->name, res->refusal);
            if (r->scenarios[i]->expect.set)
                fprintf(out, "      NOT AS EXPECTED\n");
            continue;
        }
        fprintf(out, "%-4s  %-*s %-15s %9.3g %9.3g %9.3g %9.3g %9.3g %9.3g %7d\n", gp_verdict_name(res->verdict), w,
                r->scenarios[i]->name, res->dominant == GP_NMECH ? "-" : gp_mechanism_name(res->dominant),
                nan_plain(res->metric[GP_M_GRAD_REL_ERR_FULLBATCH]), nan_plain(res->metric[GP_M_NORMALIZATION_REL_ERR]),
                nan_plain(res->metric[GP_M_ABSORBED_FRAC]), nan_plain(res->metric[GP_M_UNDERFLOW_FRAC]),
                nan_plain(res->metric[GP_M_STALE_UPDATE_FRAC]), nan_plain(res->metric[GP_M_WEIGHT_REL_ERR]),
                res->skipped_steps);
        gp_notes nt;
        gp_report_notes(r->scenarios[i], res, &nt);
        for (int k = 0; k < nt.n && k < GP_NOTES_SHOWN; k++)
            fprintf(out, "%-4s  note: %s\n", "", nt.text[k]);
        if (nt.n > GP_NOTES_SHOWN)
            fprintf(out, "%-4s  %d more notes in report.json\n", "", nt.n - GP_NOTES_SHOWN);
        gp_notes_free(&nt);
        if (r->scenarios[i]->expect.set) /* only a stated `expect:` is met or not */
            fprintf(out, "      %s\n", res->expect_met ? "as expected" : "NOT AS EXPECTED");
        if (res->first_mismatch.set) {
            char first[512];
            gp_mismatch_describe(res, first, sizeof first);
            fprintf(out, "      first difference: %s\n", first);
        }
    }
    fprintf(out, "columns: dominant = mechanism that lost most beyond its format floor (- none); err_full = "
                 "grad_rel_err_fullbatch; err_norm = normalization_rel_err; absorbed = absorbed_frac; underflow = "
                 "underflow_frac; stale = stale_update_frac; w_err = weight_rel_err; skipped = skipped_steps "
                 "(docs/scenarios.md)\n");
}

int gp_write_atomic(const char *path, const char *text, gp_error *err)
{
    return gp_out_write_file(path, text, strlen(text), err);
}
