/* gp_metrics.h — the metrics of DESIGN.md §5 (GP_METRICS), the mechanisms of §1
 * (GP_MECHANISMS) and the verdicts, each a list spelled once, used by thresholds and
 * expectations, the verdict, report.json, Markdown and the gate. */
#ifndef GP_METRICS_H
#define GP_METRICS_H

#include <stdint.h>
#include <string.h>

/* The loss mechanisms of DESIGN.md §1, each loss is attributed to one; in the order of the
 * verdict's precedence (docs/scenarios.md, The mechanism a verdict names) and of report.json's
 * loss_by_mechanism. X(ENUM, "name"): the names of report.json and `expect: {mechanism: }`.
 * gp_metrics.c asserts each enum value is its position and the count; tests/test_vocab.c
 * checks docs/scenarios.md's precedence list. Adding one: docs/extending.md. */
#define GP_MECHANISMS(X)                                                                           \
    X(GP_MECH_NORMALIZATION, "normalization")                                                      \
    X(GP_MECH_UNDERFLOW, "underflow")                                                              \
    X(GP_MECH_ABSORPTION, "absorption")                                                            \
    X(GP_MECH_OVERFLOW, "overflow")                                                                \
    X(GP_MECH_SATURATION, "saturation")                                                            \
    X(GP_MECH_ROUNDING, "rounding")                                                                \
    X(GP_MECH_NONFINITE, "non-finite")                                                             \
    X(GP_MECH_SCALING, "scaling")                                                                  \
    X(GP_MECH_STALE, "stale update")                                                               \
    X(GP_MECH_STATE, "state precision")                                                            \
    X(GP_MECH_FORMULA, "update formula")

typedef enum {
    GP_MECH_NORMALIZATION = 0,
    GP_MECH_UNDERFLOW,
    GP_MECH_ABSORPTION,
    GP_MECH_OVERFLOW,
    GP_MECH_SATURATION, /* an overflowing sum stored as the format's max finite (+-), where
                           round-to-nearest overflows to inf (NaN in e4m3): a saturating
                           conversion; IEEE's round toward zero stores it so (docs/model.md) */
    GP_MECH_ROUNDING, /* ordinary inexact roundings, no mechanism of the taxonomy */
    GP_MECH_NONFINITE,
    GP_MECH_SCALING,  /* gradients lost to skipped steps, or clipped in the wrong units */
    GP_MECH_STALE,    /* optimizer updates the stored weight did not take */
    GP_MECH_STATE,    /* what rounding m and v changed in the updates */
    GP_MECH_FORMULA,  /* steps no rounding of AdamW explains: the subject's update formula
                         differs from AdamW's (gp_optim.h, "update formula") */
    GP_NMECH
} gp_mechanism;

/* The metrics, one line each, in report order (report.json, report.md, the table; the
 * enum's values): everything said about a metric is said here, and the rest is made from
 * this list: the enum, the names (gp_metric_name/parse), the default thresholds
 * (gp_default_threshold), the mechanism a failed metric names and its level (the
 * verdict), the gate's direction, tolerance class and exact set (reports/gp_gate.c).
 * tests/test_vocab.c checks docs/scenarios.md (thresholds, default thresholds) and
 * docs/model.md's metric table against it. Adding a metric: docs/extending.md.
 *
 * X(ENUM, "name", DIR, TOL, THRESHOLD, VALUE, MECHANISM, LEVEL):
 *  DIR        which way it gets worse for the gate: GP_DIR_LARGER_WORSE, GP_DIR_SMALLER_WORSE,
 *             GP_DIR_AWAY_FROM_ONE (|v - 1| compared)
 *  TOL        the gate's built-in tolerance class: GP_TOL_ERROR (rel 0.10, abs 1e-12),
 *             GP_TOL_FRACTION (abs 1e-4), GP_TOL_EXACT (determined exactly: compared for
 *             equality, any difference CHANGED)
 *  THRESHOLD  the default threshold's rule (docs/scenarios.md, Verdicts): GP_THR_NONE,
 *             GP_THR_FIXED (VALUE), GP_THR_DEFINED (VALUE where the metric is a number, else
 *             none), GP_THR_FLOOR_GRAD / GP_THR_FLOOR_WEIGHT (max(1e-3, 2 x the floor))
 *  MECHANISM  the mechanism it counts by itself, named when it fails; GP_NMECH: several
 *  LEVEL      GP_LEVEL_GRAD (the accumulated gradient) or GP_LEVEL_WEIGHT (the optimizer's
 *             result: judged apart, gp_verdict_judge) */
#define GP_METRICS(X)                                                                              \
    /* ||g_acc - g_full|| / ||g_full|| */                                                          \
    X(GP_M_GRAD_REL_ERR_FULLBATCH, "grad_rel_err_fullbatch", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,    \
      GP_THR_FLOOR_GRAD, 0, GP_NMECH, GP_LEVEL_GRAD)                                               \
    /* ||g_acc - g_same|| / ||g_same|| */                                                          \
    X(GP_M_GRAD_REL_ERR_ROUNDING, "grad_rel_err_rounding", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,      \
      GP_THR_NONE, 0, GP_NMECH, GP_LEVEL_GRAD)                                                     \
    /* ||g_same - g_full|| / ||g_full|| */                                                         \
    X(GP_M_NORMALIZATION_REL_ERR, "normalization_rel_err", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,      \
      GP_THR_NONE, 0, GP_MECH_NORMALIZATION, GP_LEVEL_GRAD)                                        \
    /* max |g_acc - g_same| in fp32 ulps of g_same */                                              \
    X(GP_M_MAX_ULP_ERR, "max_ulp_err", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,                          \
      GP_THR_NONE, 0, GP_NMECH, GP_LEVEL_GRAD)                                                     \
    /* underflow events / non-zero exact values rounded */                                         \
    X(GP_M_UNDERFLOW_FRAC, "underflow_frac", GP_DIR_LARGER_WORSE, GP_TOL_FRACTION,                 \
      GP_THR_FIXED, 0.01, GP_MECH_UNDERFLOW, GP_LEVEL_GRAD)                                        \
    /* absorbed additions / additions of a non-zero addend */                                      \
    X(GP_M_ABSORBED_FRAC, "absorbed_frac", GP_DIR_LARGER_WORSE, GP_TOL_FRACTION,                   \
      GP_THR_FIXED, 0.01, GP_MECH_ABSORPTION, GP_LEVEL_GRAD)                                       \
    /* overflow events */                                                                          \
    X(GP_M_OVERFLOW_COUNT, "overflow_count", GP_DIR_LARGER_WORSE, GP_TOL_EXACT,                    \
      GP_THR_FIXED, 0, GP_MECH_OVERFLOW, GP_LEVEL_GRAD)                                            \
    /* ||g_acc|| / ||g_full|| */                                                                   \
    X(GP_M_GRAD_NORM_RATIO, "grad_norm_ratio", GP_DIR_AWAY_FROM_ONE, GP_TOL_ERROR,                 \
      GP_THR_NONE, 0, GP_NMECH, GP_LEVEL_GRAD)                                                     \
    /* optimizer steps skipped on a non-finite gradient */                                         \
    X(GP_M_SKIPPED_STEPS, "skipped_steps", GP_DIR_LARGER_WORSE, GP_TOL_EXACT,                      \
      GP_THR_NONE, 0, GP_MECH_SCALING, GP_LEVEL_GRAD)                                              \
    /* smallest loss scale reached */                                                              \
    X(GP_M_MIN_LOSS_SCALE, "min_loss_scale", GP_DIR_SMALLER_WORSE, GP_TOL_EXACT,                   \
      GP_THR_NONE, 0, GP_MECH_SCALING, GP_LEVEL_GRAD)                                              \
    /* weights unchanged though the exact update was non-zero */                                   \
    X(GP_M_STALE_UPDATE_FRAC, "stale_update_frac", GP_DIR_LARGER_WORSE, GP_TOL_FRACTION,           \
      GP_THR_FIXED, 0.05, GP_MECH_STALE, GP_LEVEL_WEIGHT)                                          \
    /* ||w_T - w_T,exact|| / ||w_T,exact|| */                                                      \
    X(GP_M_WEIGHT_REL_ERR, "weight_rel_err", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,                    \
      GP_THR_FLOOR_WEIGHT, 0, GP_NMECH, GP_LEVEL_WEIGHT)                                           \
    /* stored gradients that are subnormal / non-zero stored */                                    \
    X(GP_M_SUBNORMAL_FRAC, "subnormal_frac", GP_DIR_LARGER_WORSE, GP_TOL_FRACTION,                 \
      GP_THR_NONE, 0, GP_NMECH, GP_LEVEL_GRAD)                                                     \
    /* non-finite values in the final gradient */                                                  \
    X(GP_M_NONFINITE_COUNT, "nonfinite_count", GP_DIR_LARGER_WORSE, GP_TOL_EXACT,                  \
      GP_THR_FIXED, 0, GP_MECH_NONFINITE, GP_LEVEL_GRAD)                                           \
    /* ||m_T - m_T,exact|| / ||m_T,exact|| (Adam's first moment) */                                \
    X(GP_M_M_REL_ERR, "m_rel_err", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,                              \
      GP_THR_NONE, 0, GP_MECH_STATE, GP_LEVEL_WEIGHT)                                              \
    /* ||v_T - v_T,exact|| / ||v_T,exact|| (second moment) */                                      \
    X(GP_M_V_REL_ERR, "v_rel_err", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,                              \
      GP_THR_NONE, 0, GP_MECH_STATE, GP_LEVEL_WEIGHT)                                              \
    /* m or v stored as 0 from a non-zero value / non-zero values */                               \
    X(GP_M_STATE_UNDERFLOW_FRAC, "state_underflow_frac", GP_DIR_LARGER_WORSE, GP_TOL_FRACTION,     \
      GP_THR_NONE, 0, GP_MECH_STATE, GP_LEVEL_WEIGHT)                                              \
    /* gradient lost to skipped steps or mis-ordered clipping, over all steps / ||g_full|| */      \
    X(GP_M_SCALING_REL_ERR, "scaling_rel_err", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,                  \
      GP_THR_NONE, 0, GP_MECH_SCALING, GP_LEVEL_GRAD)                                              \
    /* stochastic rounding of the accumulator as a random process (gp_runner.h): |sum of         \
       (up - f)| / its derived bound (the bounds: false alarm <= 1e-9 each) */                     \
    X(GP_M_SR_BIAS_SCORE, "sr_bias_score", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,                      \
      GP_THR_FIXED, 1.0, GP_NMECH, GP_LEVEL_GRAD)                                                  \
    /* ... neighbouring elements' roundings: |sum u_i u_(i+1)| / bound */                          \
    X(GP_M_SR_ELEMENT_CORR_SCORE, "sr_element_corr_score", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,      \
      GP_THR_FIXED, 1.0, GP_NMECH, GP_LEVEL_GRAD)                                                  \
    /* ... one element on consecutive micro-batches: / bound */                                    \
    X(GP_M_SR_STEP_CORR_SCORE, "sr_step_corr_score", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,           \
      GP_THR_FIXED, 1.0, GP_NMECH, GP_LEVEL_GRAD)                                                  \
    /* distributed only: ||the simulated collective's own rounding errors, summed per element||  \
       / ||g_same||; absent (NaN) in one process */                                                \
    X(GP_M_COLLECTIVE_REL_ERR, "collective_rel_err", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,            \
      GP_THR_NONE, 0, GP_NMECH, GP_LEVEL_GRAD)                                                     \
    /* replay of a capture with `twin`: element-outputs (param, m, v, master) of the backend     \
       that differ in any bit from torch's after the same step, summed over steps; absent (NaN)  \
       without a twin, where it has no threshold; with one: bit for bit (0) */                     \
    X(GP_M_TWIN_MISMATCH_COUNT, "twin_mismatch_count", GP_DIR_LARGER_WORSE, GP_TOL_EXACT,          \
      GP_THR_DEFINED, 0, GP_NMECH, GP_LEVEL_GRAD)                                                  \
    /* stochastic rounding of the accumulator: the largest |sum u_(j-L) u_j| / its bound over    \
       every lag L of one micro-batch (harness/run/gp_sr_lag.h: false alarm <= 1e-9 a run);      \
       absent (NaN) without a stochastic accumulator */                                            \
    X(GP_M_SR_LAG_CORR_SCORE, "sr_lag_corr_score", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,              \
      GP_THR_DEFINED, 1.0, GP_NMECH, GP_LEVEL_GRAD)                                               \
    /* precision.grad scaled: systematic rounding bias of the stored gradients over a step's     \
       micro-batches: ||per-element accumulated error|| / its bound under unbiased rounding      \
       (gp_verdict.c, gp_grad_bias_score: false alarm <= 1e-9); above 1 a note names the bias;   \
       no default threshold (round to nearest is expected to exceed it); absent without a       \
       scaled grad */                                                                              \
    X(GP_M_GRAD_BIAS_SCORE, "grad_bias_score", GP_DIR_LARGER_WORSE, GP_TOL_ERROR,                  \
      GP_THR_NONE, 0, GP_NMECH, GP_LEVEL_GRAD)

typedef enum { GP_DIR_LARGER_WORSE, GP_DIR_SMALLER_WORSE, GP_DIR_AWAY_FROM_ONE } gp_metric_dir;
typedef enum { GP_TOL_ERROR, GP_TOL_FRACTION, GP_TOL_EXACT } gp_metric_tol;
typedef enum { GP_THR_NONE, GP_THR_FIXED, GP_THR_DEFINED, GP_THR_FLOOR_GRAD, GP_THR_FLOOR_WEIGHT } gp_metric_thr;
typedef enum { GP_LEVEL_GRAD, GP_LEVEL_WEIGHT } gp_metric_level;

#define GP_METRIC_ENUM(E, NAME, DIR, TOL, THR, VALUE, MECH, LEVEL) E,
typedef enum { GP_METRICS(GP_METRIC_ENUM) GP_NMETRICS } gp_metric;

/* The ratios a sampled run estimates with an interval (harness/sources/gp_sample.h): units are
 * elements; y / x per element. */
enum {
    GP_EST_FULL = 0, /* grad_rel_err_fullbatch^2: (g_acc - g_full)^2 / g_full^2 */
    GP_EST_ROUND,    /* grad_rel_err_rounding^2: (g_acc - g_same)^2 / g_same^2 */
    GP_EST_NORM,     /* normalization_rel_err^2: (g_same - g_full)^2 / g_full^2 */
    GP_EST_RATIO,    /* grad_norm_ratio^2: g_acc^2 / g_full^2 */
    GP_EST_ABSORBED, /* absorbed_frac: absorbed additions / additions of a non-zero addend */
    GP_EST_UNDERFLOW,/* underflow_frac: underflows / roundings of a non-zero exact value */
    GP_EST_SUBNORMAL,/* subnormal_frac: subnormal stored gradients / non-zero ones */
    GP_EST_OVERFLOW, /* overflow_count / X (x = 1 per element and step: the estimate of a
                        total is X^ R^, X^ = the element-steps of the population) */
    GP_EST_NONFINITE,/* nonfinite_count / X, likewise */
    GP_NEST
};



/* A scenario's verdict. */
typedef enum { GP_PASS = 0, GP_WARN = 1, GP_FAIL = 2 } gp_verdict;

/* "normalization", "underflow", ...; "none" for GP_NMECH (nothing was lost). */
const char *gp_mechanism_name(gp_mechanism m);
/* Look a mechanism up by name (not "none"); returns 0 and sets *m, or -1. */
int gp_mechanism_parse(const char *name, gp_mechanism *m);
/* "pass", "warn", "fail" ("?" out of range). */
const char *gp_verdict_name(gp_verdict v);
/* Look a verdict up by name; returns 0 and sets *v, or -1. */
int gp_verdict_parse(const char *name, gp_verdict *v);

/* "grad_rel_err_fullbatch", ...; NULL for an out-of-range id. */
const char *gp_metric_name(gp_metric m);
/* Look a metric up by name; returns 0 and sets *m, or -1. */
int gp_metric_parse(const char *name, gp_metric *m);

/* One line of GP_METRICS: the metric's name, gate direction and tolerance class, default
 * threshold rule (and its value), the mechanism it counts, its level. */
typedef struct {
    const char *name;
    gp_metric_dir dir;
    gp_metric_tol tol;
    gp_metric_thr thr;
    double value;
    gp_mechanism mech;
    gp_metric_level level;
} gp_metric_info;

/* Metric m's line of GP_METRICS; NULL for an out-of-range id. */
const gp_metric_info *gp_metric_get(gp_metric m);

/* The spacing of binary32 values at |x|, the unit of GP_M_MAX_ULP_ERR: 2^(e-24) for |x| in
 * [2^(e-1), 2^e), 2^-149 below fp32's normal range (x = 0 included); defined as
 * ldexp(1.0, max(e - 1, -126) - 23) with frexp's e. Computed from the bits: a normal x with
 * biased exponent field E has |x| in [2^(E-1023), 2^(E-1022)), so frexp's e - 1 = E - 1023;
 * a zero or subnormal x (E = 0) lies below 2^-126. The result's exponent lies in
 * [-149, 1000], a binary64 normal: its bits are its biased exponent alone. A non-finite x
 * (E = 2047) gives 2^-24, the definition with glibc's frexp (e = 0; C leaves e
 * unspecified); max_ulp_err never depends on it (|a - x| is then inf or NaN).
 * tests/test_accum.c checks it against the definition bit for bit. */
static inline int gp_f32_ulp_exp(double x) /* gp_f32_ulp(x) = 2^this, in [-149, 1000] */
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    int e = (int)(b >> 52 & 0x7ff) - 1023;
    e = e == 1024 ? -1 : e < -126 ? -126 : e;
    return e - 23;
}

static inline double gp_f32_ulp(double x)
{
    uint64_t b = (uint64_t)(gp_f32_ulp_exp(x) + 1023) << 52;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* 1 / gp_f32_ulp(x), exactly (a power of two in [2^-1000, 2^149]): y * this is y /
 * gp_f32_ulp(x) for every y (both the one rounding of the same real), without a division. */
static inline double gp_f32_ulp_recip(double x)
{
    uint64_t b = (uint64_t)(1023 - gp_f32_ulp_exp(x)) << 52;
    memcpy(&x, &b, sizeof x);
    return x;
}

#endif
