/* gp_runner.h — runs one scenario on a backend beside the exact references and
 * measures what was lost, by mechanism (DESIGN.md §1, §5): `steps` iterations of
 * accumulate -> unscale -> clip -> AdamW (harness/run/gp_optim.h) -> loss-scale update.
 *
 * Iterations. Gradients are drawn afresh each iteration (streams keyed by it; magnitudes
 * times shrink^(t-1)). Accumulation runs in windows: consecutive chunks (at most 2^14
 * elements each) of several tensors, up to 2^14 elements in all, go to the backend
 * together, one accumulate_many call per micro-batch when it has one (CUDA: one launch
 * for many small tensors); every sum in the report keeps the chunk-after-chunk order,
 * so the windows change no result. Unscaling and AdamW run on the backend chunk by chunk; when a
 * loss scaler or clipping couples the tensors (found_inf, the global norm), the whole
 * step's accumulated gradients are kept, the norm and coefficient computed, and only
 * then do the optimizer steps run. A skipped iteration's gradient statistics are
 * dropped (its loss counts as scaling). The gradient metrics below sum over the
 * iterations that were not skipped.
 *
 * Model of one accumulation. For tensor element i and micro-batch k with n_k tokens (N = sum n_k, A =
 * accumulation_steps; with per-step token counts, step s's own K_s micro-batches, n_k and N = N_s, A
 * the same for every step), the generated per-token-mean gradient m_k (an fp32 value) is
 * exact; the token sum is S_k = n_k m_k (explicit values: S_k = sum of the values).
 * The backward's exact output under each reduction is x_k = S_k/N (token_mean),
 * S_k/(n_k A) (mean), S_k/n_k (mean_no_div), S_k (sum); it is scaled by the loss
 * scale s (a power of two), rounded once (RNE) to the grad dtype, added into the
 * accumulator by the backend, and after K micro-batches unscaled (when a loss scaler
 * is on). References: g_same = sum_k x_k (the configuration's formula, exactly) and
 * g_full = sum_k S_k / N (fullbatch mean) or sum_k S_k (fullbatch sum), each exact
 * and rounded once to binary64.
 *
 * Attribution. Every rounding is observed from the values the backend actually
 * produced (old acc, addend, new acc), so a plugin is judged on what it did, not on
 * what it claims: its local error new - exact goes to absorption (acc unchanged by a
 * non-zero addend), underflow (DESIGN.md §1), overflow, or plain rounding. The local
 * errors of one element add up to g_acc - g_same, so their norms split the rounding
 * error by mechanism; normalization is ||g_same - g_full||.
 *
 * Stochastic rounding as a random process (rounding: stochastic). Each accumulator
 * rounding of a value v (the exact sum for fp32, fl32(acc + g) for narrower formats;
 * DESIGN.md §3) strictly between its neighbours lo (toward zero) and hi is a draw: f =
 * (|v| - |lo|) / (|hi| - |lo|), up = 1 when the backend stored hi, u = up - f. A correct
 * backend rounds up with probability f from fresh random bits, so in the order of the
 * draws (iteration, micro-batch, chunk, element) these are martingale differences in
 * [-1, 1], with predictable variance W: (1) X = u, W = f(1 - f) (unbiasedness);
 * (2) X = u_(i-1) u_i over neighbouring elements of one micro-batch, W = u_(i-1)^2 f_i(1 -
 * f_i); (3) X = u_(k-1) u_k over consecutive micro-batches of one element, W likewise.
 * Freedman's inequality (P(S >= t, V <= s2) <= exp(-t^2 / (2(s2 + t/3))) for increments
 * <= 1), applied on the dyadic shells V in (2^(j-1), 2^j] (j = 1..64, and V <= 1), gives
 * for S = sum X and V = sum W: P(|S| >= T(V)) <= 2 * 65 * e^-L with T(V) = 2L/3 +
 * 2 sqrt(max(V, 1) L) (solve t^2 = 2L(2^j + t/3) and use 2^j < 2V). L = ln(130 / 1e-9):
 * a false alarm per statistic and run of at most 1e-9. The CPU rounds up with probability
 * floor(f 2^32) / 2^32 (README), a drift below 2^-32 per draw, added to (1)'s bound. The
 * metric is |S| / T: a value above 1 fails (a biased rounding, or bits shared by
 * neighbouring elements or reused across micro-batches). (4) sr_lag_corr_score: every lag
 * at once (gp_sr_lag.h: bits reused with any period below the tensor size), on the draws
 * of rank 0's last micro-batch of the first iteration, the first 2^21 elements of each
 * tensor (not in sampled runs); false alarm at most 1e-9 a run.
 *
 * A capture replayed as torch's twin (docs/replay.md): a tensor's `state` sets its initial m, v
 * (and master) and step count T0 (gp_optim.h, "Step counts"); after every optimizer step a
 * tensor with `twin` has its stored m, v, master and param compared with torch's entries of
 * that step bit for bit (gp_optim_twin): twin_mismatch_count, the first departure in
 * gp_result.first_twin. Each tensor's lr (lr_steps, else lr x schedule) and weight decay
 * may be its own (tensors[i].optimizer).
 *
 * Sampled runs (a `sample:`; docs/scenarios.md). Only the sampled elements run; the
 * global clipping norm, of the backend and of the reference, is estimated from them:
 * each sampled tensor's sum of squares counts M_h / n_h times. A loss scaler's found_inf
 * sees only the sampled elements (a non-finite value elsewhere is not seen). */
#ifndef GP_RUNNER_H
#define GP_RUNNER_H

#include <stdint.h>

#include "../sources/gp_backend.h"
#include "../scenario/gp_metrics.h"
#include "gp_optim.h"
#include "../scenario/gp_budget.h"
#include "../scenario/gp_scenario.h"
#include "../sources/gp_sample.h"

/* Mechanisms measured on the accumulated gradient (the rest: on the optimizer step). */
#define GP_MECH_GRAD_END GP_MECH_SCALING


/* What the simulated collectives did (docs/distributed.md); zero in one process. */
typedef struct {
    uint64_t hops;                       /* element-additions performed (one per element a hop) */
    uint64_t adds_nonzero, absorbed;     /* additions of a non-zero addend; absorbed ones */
    uint64_t overflow, underflow;        /* in the casts, divisions and additions */
    uint64_t roundings;                  /* roundings of a non-zero exact value */
    double ss;                           /* sum over elements of (the collective's local errors,
                                            summed, in final units)^2: collective_rel_err's numerator */
    double ss_mech[GP_NMECH];            /* ... of each mechanism's part */
} gp_coll_stats;

/* Raw sums from which every metric follows; add two to merge tensors. */
typedef struct {
    double ss_full, ss_same, ss_acc;                /* sum of squares of g_full, g_same, g_acc */
    double ss_acc_full, ss_acc_same, ss_same_full;  /* ... of the differences */
    double ss_mech[GP_NMECH];                       /* ... of each mechanism's local errors */
    double ss_full_skipped;                         /* sum of squares of g_full in skipped steps */
    double ss_x;                                    /* sum of squares of the exact (unscaled)
                                                       backward outputs x_k (the format floor) */
    double max_ulp;                                 /* max |g_acc - g_same| / ulp32(g_same) */
    uint64_t rounded_nonzero, underflow;            /* roundings of non-zero exact values; losses */
    uint64_t adds_nonzero, absorbed;                /* additions of a non-zero addend; absorbed */
    uint64_t overflow, stored_nonzero, subnormal;   /* overflows; stored grads != 0; subnormal */
    uint64_t nonfinite;                             /* non-finite final gradients */
    uint64_t replay_nonfinite;                      /* replayed entries (element x micro-batch)
                                                       that are inf or NaN in applied steps:
                                                       the exact reference is then undefined */
    uint64_t overflow_skipped;                      /* overflows in skipped steps (their other
                                                       statistics are dropped, not these) */
    uint64_t mismatches;                            /* elements where a compared backend differed */
    double sr_sum[3], sr_var[3];                    /* stochastic rounding: S and V of the bias,
                                                       element and step statistics */
    uint64_t sr_draws;                              /* stochastic roundings observed */
    double grad_amax;                               /* largest |fp32 gradient| quantized to a
                                                       scaled format (delayed scaling's amax;
                                                       merged by max, never weighted) */
    uint64_t stale_sat;                             /* precision.grad ":delayed": saturated elements */
    double stale_ratio, stale_scale, stale_need;    /* the largest (history's scale) / (the scale
                                                       this amax needed) of a saturating chunk, with
                                                       both scales; merged by the largest ratio */
    double sr_lag;                                  /* the all-lags score (gp_sr_lag.h), the
                                                       largest of the tensors tested; merged by max */
    uint64_t sr_lag_lags;                           /* lags it tested (0: none, the metric absent) */
    /* precision.grad scaled: the systematic bias of the stored gradients' rounding (grad_bias_score,
       gp_verdict.c): over element-steps i, with S_i the sum over the step's micro-batches (every
       rank's) of the stored gradient's error (stored - exact), V_i the sum of Delta^2 / 4 (Delta:
       the width of the rounding's cell), D_i the sum of the deterministic departures (gp_run_accum.c,
       store_scaled), all in final units: */
    double qb_ss, qb_v, qb_v2, qb_vmax, qb_d2;      /* sum S_i^2, sum V_i, sum V_i^2, max V_i, sum D_i^2 */
    uint64_t qb_n;                                  /* roundings observed (0: the metric absent) */
    gp_optim_counts opt;                            /* optimizer-phase events */
    gp_optim_sums opt_ss;                           /* optimizer-phase sums of squares */
    gp_ratio_sums est[GP_NEST];                     /* per-element ratio sums (sampled runs) */
    gp_coll_stats coll;                             /* the simulated collectives' share */
} gp_stats;


/* Histogram of |x| of the exact backward outputs (unscaled, non-zero), one bin per
 * binade: bin b counts 2^(b + GP_HIST_MIN_EXP) <= |x| < 2^(b + 1 + GP_HIST_MIN_EXP);
 * values outside the range go to the first / last bin. */
#define GP_HIST_MIN_EXP (-160)
#define GP_HIST_BINS 300

typedef struct {
    char name[GP_NAME_MAX];
    uint64_t size;
    gp_stats st;
    double metric[GP_NMETRICS];
    double metric_sd[GP_NMETRICS]; /* over the seeds (gp_run_scenario_seeds), else 0 */
    double loss[GP_NMECH]; /* each mechanism's error norm / ||g_full|| */
    uint64_t population;   /* sampled: the tensor's elements M (size is the sample n); else 0 */
    uint8_t has_ci[GP_NMETRICS];              /* 1: the metric is an estimate with an interval */
    double ci_lo[GP_NMETRICS], ci_hi[GP_NMETRICS]; /* at GP_SAMPLE_COVERAGE */
} gp_tensor_result;

typedef struct {
    gp_stats st;                 /* all tensors together */
    int nsteps;                  /* K: micro-batches accumulated */
    double *traj_err_ss;         /* [K] sum over elements of (acc_k - exact_k)^2 after step k */
    double *traj_ref_ss;         /* [K] sum over elements of exact_k^2 (exact_k: same-op
                                    partial sum after step k, binary64 running sum) */
    uint64_t hist[GP_HIST_BINS]; /* magnitudes of the exact backward outputs */
    double metric[GP_NMETRICS];  /* scenario-level metrics (global norms) */
    int nseeds;                  /* seeds the metrics are the mean over (1: one run) */
    double metric_sd[GP_NMETRICS]; /* their sample standard deviation over the seeds */
    double loss[GP_NMECH];
    double coll_loss[GP_NMECH];  /* distributed: the collective's part of each mechanism's loss
                                    (error norm / ||g_full||), else 0 */
    int has_no_sync_twin;        /* distributed with no_sync false: the same scenario with
                                    no_sync true was run too (the correct loop) */
    double twin_rel_err_rounding, twin_collective_rel_err; /* its grad_rel_err_rounding and
                                    collective_rel_err: the missing no_sync's extra error is
                                    this run's minus these */
    gp_tensor_result *tensors;
    size_t ntensors;
    int sampled;                 /* some tensor was sampled: metrics are estimates */
    uint8_t has_ci[GP_NMETRICS]; /* scenario-level intervals (stratified over tensors) */
    double ci_lo[GP_NMETRICS], ci_hi[GP_NMETRICS];
    int skipped_steps;
    double min_loss_scale;
    int nopt;                    /* optimizer iterations simulated (the scenario's steps) */
    int adam_steps;              /* AdamW steps taken: nopt - skipped_steps (the step count t) */
    int emulated_clip_scaler;    /* the backend lacks grad_sumsq / grad_scale / scaler_update and
                                    the scenario needed them: the CPU emulation did that part */
    double *stale_by_step;       /* [nopt] stale fraction of each iteration (0 when skipped) */
    double *loss_scale_by_step;  /* [nopt] loss scale used by each iteration (1 without a scaler) */
    double *lr_by_step;          /* [nopt] the schedule's lr of each iteration */
    uint8_t *skipped_by_step;    /* [nopt] 1 where the step was skipped */
    double *clip_by_step;        /* sampled runs with clipping: [nopt][6] the estimated global
                                    norm sqrt(T^) of the exact gradients and its 95% interval,
                                    then the coefficient min(1, max_norm / (norm + 1e-6)) at the
                                    estimate and its interval [lo, hi] (docs/scenarios.md,
                                    "What couples the tensors"); a skipped step's are NaN.
                                    Else NULL */
    double floor_grad;           /* format floor of the gradient: the relative error norm one
                                    RNE rounding per stored value implies (gp_format_floor) */
    double floor_weight;         /* ... of the final weights (the stored weight's format) */
    gp_mismatch first_mismatch;  /* --compare: the first output the backends disagreed on */
    gp_mismatch first_twin;      /* tensors with `twin`: the first output of the backend that differs
                                    from torch's after the same step (gp_optim_twin: step = the
                                    1-based iteration, the dump's step<step-1>; value = the
                                    replay's bits, compared = torch's) */
    gp_verdict verdict;
    gp_mechanism dominant;       /* the mechanism that lost most beyond its floor (see
                                    gp_verdict.c, gp_verdict_judge); GP_NMECH when nothing was lost */
    int failed[GP_NMETRICS];     /* 1 where the metric exceeded its threshold (an estimate with an
                                    interval: where the whole interval is beyond it) */
    uint8_t undecided[GP_NMETRICS]; /* 1 where the threshold lies inside the metric's interval:
                                       the sample cannot tell (the verdict is at least warn) */
    double threshold[GP_NMETRICS]; /* threshold applied (scenario's, else the default) */
    int has_threshold[GP_NMETRICS];
    double threshold_min[GP_NMETRICS]; /* two-sided checks: the lower bound applied */
    int has_min[GP_NMETRICS];
    int expect_met;              /* the verdict (and mechanism) the scenario expects; without an
                                    expectation: any verdict but fail */
    int refused;                 /* the backend refused the scenario's configuration
                                    (GP_RUN_REFUSED, gp_run_all): nothing else is set; an
                                    `expect:` is then not met */
    char refusal[600];           /* ... the refusal's line, the backend's reason included */
} gp_result;

/* grad_bias_score from a run's sums (gp_stats.qb_*: ss = sum S_i^2, m = sum V_i, w = sum
 * V_i^2, vmax = max V_i, d2 = sum D_i^2): ||S|| / (sqrt(m + max(sqrt(8 w L), 8 vmax L)) +
 * ||D||), L = ln(1e9); 0 when ss is 0. Derived in gp_verdict.c. */
double gp_grad_bias_score(double ss, double m, double w, double vmax, double d2);

/* Unit roundoff u = 2^-p of format f (p significant bits): 2^-8 bf16, 2^-11 fp16, 2^-24 fp32. */
double gp_unit_roundoff(gp_format f);

/* The format floor of a gradient (docs/scenarios.md, "Verdicts"): the RMS relative error
 * an ideal implementation with these storage formats cannot avoid: each backward output
 * x_k rounded once to the grad dtype (unit roundoff ug), the exact sum rounded once to the
 * accumulator dtype (ua); an RNE rounding's error is at most u|x| and, modelled as
 * uniform, has RMS at most u|x|/sqrt(3):
 *   floor = sqrt((ug^2 ss_x + ua^2 ss_same) / (3 ss_full)),
 * ss_x = sum of x_k^2, ss_same, ss_full the squared norms of g_same and g_full. 0 when
 * ss_full is 0. */
double gp_format_floor(gp_format grad, gp_format acc, double ss_x, double ss_same, double ss_full);

/* The default threshold of metric m for scenario sc with result r (used where the
 * scenario sets none); returns 0 and sets *max, or -1 when m has no default. Format-aware:
 * grad_rel_err_fullbatch <= max(1e-3, 2 r->floor_grad), weight_rel_err <= max(1e-3,
 * 2 r->floor_weight); the rest are constants (the rule of m's line in GP_METRICS,
 * harness/scenario/gp_metrics.h). */
int gp_default_threshold(const gp_result *r, gp_metric m, double *max);

/* Run scenario sc on backend b; when cmp is non-NULL, run it too on identical inputs
 * at every step and count elements whose results differ in any bit. Fills *res (free
 * with gp_result_free). Returns 0; GP_RUN_REFUSED (gp_backend.h) with err set when a
 * backend does not support the configuration (its call returned 1; err carries the
 * backend's reason when it gave one); -3 on a fault: the thread's time limit passed
 * (gp_deadline_set), a plugin's worker crashed or hung, or a replayed dump changed or was
 * truncated after the scenario was loaded (err names the dump and the entry); -1 when a
 * backend call failed otherwise. */
int gp_run_scenario(const gp_scenario *sc, const gp_backend *b, const gp_backend *cmp, gp_result *res,
                    gp_error *err);

/* How a run is carried out (none of it changes a result). */
#define GP_RUN_MAX_THREADS 64
typedef struct {
    int threads;    /* threads splitting one scenario's windows and optimizer chunks
                       (clamped to 1..GP_RUN_MAX_THREADS) */
    uint64_t *done; /* progress: the run adds the work it finished here (atomically, in
                       gp_run_work's units), or NULL */
} gp_run_ctl;

/* gp_run_scenario with ctl (NULL: one thread, no progress). Threads. The accumulation
 * windows of a step, and in a coupled step the optimizer chunks, are units of work run on
 * up to ctl->threads threads; each unit keeps its own partial sums, merged in unit order,
 * so the report is byte-identical for any number of threads. Generated values, sampled
 * elements and stochastic rounding bits are functions of (seed, tensor, element, step,
 * micro-batch), never of the thread. Backend functions may be called from several
 * threads at once on disjoint arrays (as gradprec_run's `jobs` allows; a plugin's worker
 * serialises its calls). */
int gp_run_scenario_ctl(const gp_scenario *sc, const gp_run_ctl *ctl, const gp_backend *b, const gp_backend *cmp,
                        gp_result *res, gp_error *err);

/* Run sc with seeds sc->seed, sc->seed + 1, ..., sc->seed + nseeds - 1 (nseeds >= 1;
 * token counts drawn from a range stay those of the loaded scenario) and aggregate into
 * *res: metrics, losses and format floors are the means over the seeds (per tensor too),
 * metric_sd their sample standard deviations (n - 1), events the totals, charts and
 * per-step arrays those of the first seed; the verdict and dominant mechanism are judged
 * on the means. nseeds = 1 is gp_run_scenario. Returns as gp_run_scenario. */
int gp_run_scenario_seeds(const gp_scenario *sc, int nseeds, const gp_run_ctl *ctl, const gp_backend *b,
                          const gp_backend *cmp, gp_result *res, gp_error *err);

void gp_result_free(gp_result *res);

#endif
