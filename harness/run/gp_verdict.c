/* gp_verdict.c — from a run's statistics to its judgement: the format floors and default
 * thresholds, the metrics and losses (derive), the merging of statistics, and the verdict
 * with its dominant mechanism (judge). */
#include "gp_run_internal.h"

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
    const gp_metric_info *mi = gp_metric_get(m); /* its rule: GP_METRICS (gp_metrics.h) */
    switch (mi ? mi->thr : GP_THR_NONE) {
    case GP_THR_FLOOR_GRAD: *max = fmax(GP_BASE_REL_ERR, GP_FLOOR_FACTOR * r->floor_grad); return 0;
    case GP_THR_FLOOR_WEIGHT: *max = fmax(GP_BASE_REL_ERR, GP_FLOOR_FACTOR * r->floor_weight); return 0;
    case GP_THR_DEFINED:
        if (r->metric[m] != r->metric[m])
            return -1;
        *max = mi->value;
        return 0;
    case GP_THR_FIXED: *max = mi->value; return 0;
    default: return -1;
    }
}

/* ---- metrics and verdict ---- */

double gp_verdict_ratio(double num_ss, double den_ss)
{
    if (num_ss == 0)
        return 0;
    return sqrt(num_ss) / sqrt(den_ss); /* den 0 with num > 0: inf */
}

/* grad_bias_score (precision.grad scaled): does the rounding of the stored gradients add
 * up over a step's micro-batches beyond what any unbiased rounding onto the same grid
 * produces? (store_scaled, bias_note in gp_run_accum.c, collects the sums.)
 *
 * The null: given the exact gradients (they fix every cell: scales come from amaxes of the
 * fp32 gradients, never from a rounding), the roundings are independent and rounding r
 * stores the upper value of its cell with probability f_r (its position in the cell), so
 * its error e_r = y_r - x_r = (y_r - mu_r) + (mu_r - x_r): a zero-mean part lying in an
 * interval of length Delta_r (the cell's width), plus a deterministic part of at most d_r
 * (bias_note: fp32's own roundings, stochastic rounding's 2^-32 drift). Stochastic
 * rounding is this null; round to nearest is not random, and the test asks whether its
 * errors add up as if they were.
 *
 * Element-step i (an element in one optimizer step): S_i = sum of its e_r = Z_i + B_i,
 * |B_i| <= D_i = sum d_r, Z_i a sum of independent zero-mean terms each in an interval of
 * length Delta_r: by Hoeffding's lemma E exp(l Z_i) <= exp(l^2 V_i / 2), V_i = sum
 * Delta_r^2 / 4. Then E exp(t Z_i^2) <= (1 - 2 t V_i)^(-1/2) for 2 t V_i < 1 (exp(t Z^2) =
 * E_G exp(sqrt(2t) Z G) with G ~ N(0, 1) independent; bound the inner expectation, then
 * E exp(t V G^2) = (1 - 2 t V)^(-1/2)). With Q = sum_i Z_i^2 (independent element-steps),
 * M = sum V_i, W = sum V_i^2, Vmax = max V_i, and t <= 1 / (4 Vmax) (so a = 2 t V_i <= 1/2,
 * where -ln(1 - a) <= a + a^2):
 *   ln P(Q >= M + u) <= -t (M + u) + sum_i (t V_i + 2 t^2 V_i^2) = -t u + 2 t^2 W.
 * t = u / (4W), when <= 1 / (4 Vmax), gives -u^2 / (8W); otherwise (u > W / Vmax) t =
 * 1 / (4 Vmax) gives -u / (4 Vmax) + W / (8 Vmax^2) < -u / (8 Vmax). So P(Q >= M + u) <=
 * delta for u = max(sqrt(8 W L), 8 Vmax L), L = ln(1 / delta); and ||S|| <= ||Z|| + ||D||
 * (triangle inequality). Under the null, with probability at least 1 - delta,
 *   ||S|| <= sqrt(M + max(sqrt(8 W L), 8 Vmax L)) + ||D||,
 * and grad_bias_score = ||S|| / that bound, delta = 1e-9 (the other derived scores'
 * false alarm): above 1, the stored gradients' accumulated rounding error is larger than
 * an unbiased rounding produces except with probability 1e-9: a systematic rounding bias.
 * Scale: a rounding that errs by the same fraction c of its cell at each of K micro-batches
 * has S_i^2 / V_i = K (2c)^2, so the score grows as sqrt(K); errors that behave as random
 * have E S_i^2 <= V_i (a rounding's variance is at most Delta^2 / 4). */
double gp_grad_bias_score(double ss, double m, double w, double vmax, double d2)
{
    if (!(ss > 0))
        return ss == 0 ? 0.0 : ss;
    double L = log(1e9);
    return sqrt(ss) / (sqrt(m + fmax(sqrt(8 * w * L), 8 * vmax * L)) + sqrt(d2));
}

/* The metrics and losses of stats st. A non-finite exact gradient (a replayed entry that
 * is inf or NaN in an applied step: ||g_full|| or ||g_same|| is not finite) leaves every
 * metric and loss measured against the exact values undefined: NaN (absent from
 * report.json), never a finite value; nonfinite_count counts it and the non-finite loss
 * is inf (docs/scenarios.md, Non-finite gradients). */
void gp_verdict_derive(const gp_stats *st, double *metric, double *loss)
{
    for (int i = 0; i < GP_NMETRICS; i++)
        metric[i] = NAN;
    metric[GP_M_GRAD_REL_ERR_FULLBATCH] = gp_verdict_ratio(st->ss_acc_full, st->ss_full);
    metric[GP_M_GRAD_REL_ERR_ROUNDING] = gp_verdict_ratio(st->ss_acc_same, st->ss_same);
    metric[GP_M_NORMALIZATION_REL_ERR] = gp_verdict_ratio(st->ss_same_full, st->ss_full);
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
    metric[GP_M_WEIGHT_REL_ERR] = gp_verdict_ratio(os->w_err, os->w_ref);
    metric[GP_M_M_REL_ERR] = gp_verdict_ratio(os->m_err, os->m_ref);
    metric[GP_M_V_REL_ERR] = gp_verdict_ratio(os->v_err, os->v_ref);
    metric[GP_M_STATE_UNDERFLOW_FRAC] = oc->state_nonzero ? (double)oc->state_underflow / (double)oc->state_nonzero : 0;
    if (oc->twin_checked) /* a twin was compared (else the metric stays absent) */
        metric[GP_M_TWIN_MISMATCH_COUNT] = (double)oc->twin_mismatch;
    if (st->sr_lag_lags) /* a stochastic accumulator was tested at every lag (else absent) */
        metric[GP_M_SR_LAG_CORR_SCORE] = st->sr_lag;
    loss[GP_MECH_NORMALIZATION] = metric[GP_M_NORMALIZATION_REL_ERR];
    for (int m = GP_MECH_UNDERFLOW; m < GP_MECH_SCALING; m++)
        loss[m] = gp_verdict_ratio(st->ss_mech[m], st->ss_full);
    /* over every step's full-batch gradient, skipped steps included */
    loss[GP_MECH_SCALING] = gp_verdict_ratio(st->ss_mech[GP_MECH_SCALING], st->ss_full + st->ss_full_skipped);
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
    if (st->qb_n) /* precision.grad scaled: the stored gradients' systematic rounding bias */
        metric[GP_M_GRAD_BIAS_SCORE] = gp_grad_bias_score(st->qb_ss, st->qb_v, st->qb_v2, st->qb_vmax, st->qb_d2);
    /* weight-level losses, relative to the exact final weights as weight_rel_err */
    loss[GP_MECH_STALE] = gp_verdict_ratio(os->lost, os->w_ref);
    loss[GP_MECH_STATE] = gp_verdict_ratio(os->state, os->w_ref);
    loss[GP_MECH_FORMULA] = gp_verdict_ratio(os->formula, os->w_ref);
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
void gp_verdict_all_skipped(double *metric, double *loss)
{
    if (metric[GP_M_SCALING_REL_ERR] != metric[GP_M_SCALING_REL_ERR])
        metric[GP_M_SCALING_REL_ERR] = loss[GP_MECH_SCALING] = 1.0;
}

void gp_optim_counts_add(gp_optim_counts *a, const gp_optim_counts *b)
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

void gp_stats_add(gp_stats *a, const gp_stats *b);

/* a += b with b's sums and counts multiplied by num/den (the expansion weight M/n of a
 * sampled tensor: den = n, num = M; 1/1 adds exactly). Counts are rounded to integers. */
void gp_stats_add_w(gp_stats *a, const gp_stats *b, double den, double num)
{
    if (num == den) {
        gp_stats_add(a, b);
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
    WC(subnormal); WC(nonfinite); WC(stale_sat); WC(replay_nonfinite); WC(overflow_skipped); WC(mismatches);
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
    gp_stats_add(a, &w);
}

void gp_stats_add(gp_stats *a, const gp_stats *b)
{
    if (b->grad_amax > a->grad_amax || b->grad_amax != b->grad_amax)
        a->grad_amax = b->grad_amax;
    a->stale_sat += b->stale_sat;
    if (b->stale_ratio > a->stale_ratio ||
        (b->stale_ratio == a->stale_ratio && b->stale_ratio > 0 && b->stale_scale < a->stale_scale)) {
        a->stale_ratio = b->stale_ratio;
        a->stale_scale = b->stale_scale;
        a->stale_need = b->stale_need;
    }
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
    a->qb_ss += b->qb_ss;
    a->qb_v += b->qb_v;
    a->qb_v2 += b->qb_v2;
    a->qb_d2 += b->qb_d2;
    if (b->qb_vmax > a->qb_vmax)
        a->qb_vmax = b->qb_vmax;
    a->qb_n += b->qb_n;
    if (b->sr_lag_lags && (!a->sr_lag_lags || b->sr_lag > a->sr_lag))
        a->sr_lag = b->sr_lag;
    a->sr_lag_lags += b->sr_lag_lags;
    gp_optim_counts_add(&a->opt, &b->opt);
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

/* The verdict and the dominant mechanism. A failed metric that counts one mechanism
 * (underflow_frac, absorbed_frac, stale_update_frac, scaling_rel_err, ...) names it;
 * several: the one with the largest loss; but a saturation loss (no count of its own)
 * larger than every other loss is named first (gradient failures). Otherwise a mechanism counts as a loss only beyond the
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
void gp_verdict_judge(const gp_scenario *sc, gp_result *r)
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
            if (gp_metric_get((gp_metric)i)->level == GP_LEVEL_WEIGHT)
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
        gp_mechanism m = gp_metric_get((gp_metric)i)->mech; /* GP_NMECH: it sums several */
        /* an undefined (NaN) metric fails closed but names no mechanism */
        if (r->failed[i] && m != GP_NMECH && r->metric[i] == r->metric[i] &&
            (r->dominant == GP_NMECH || r->loss[m] > best)) {
            best = r->loss[m];
            r->dominant = m;
        }
    }
    /* saturation (no count of its own, floor 0) larger than every other loss is named before
     * a failed count and the first mechanism beyond its floor: a saturating scaled format's
     * clamp outweighs the underflow of its blocks (issue 25) */
    int sat_largest = !weights_only && r->loss[GP_MECH_SATURATION] > 0;
    for (int m = 0; m < GP_NMECH && sat_largest; m++)
        if (m != GP_MECH_SATURATION && !(r->loss[m] < r->loss[GP_MECH_SATURATION]))
            sat_largest = 0;
    if (sat_largest) {
        best = r->loss[GP_MECH_SATURATION];
        r->dominant = GP_MECH_SATURATION;
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
                r->skipped_steps || st->opt.stale || st->opt.state_underflow || r->loss[GP_MECH_SCALING] > 0 ||
                r->loss[GP_MECH_SATURATION] > 0;
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

void gp_optim_sums_add(gp_optim_sums *a, const gp_optim_sums *b)
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
