/* gp_metrics.h — the metric names of DESIGN.md §5, the mechanism names of §1 and the
 * verdicts, spelled once, used by thresholds and expectations, report.json, Markdown
 * and the gate. */
#ifndef GP_METRICS_H
#define GP_METRICS_H

#include <stdint.h>
#include <string.h>

typedef enum {
    GP_M_GRAD_REL_ERR_FULLBATCH = 0, /* ||g_acc - g_full|| / ||g_full|| */
    GP_M_GRAD_REL_ERR_ROUNDING,      /* ||g_acc - g_same|| / ||g_same|| */
    GP_M_NORMALIZATION_REL_ERR,      /* ||g_same - g_full|| / ||g_full|| */
    GP_M_MAX_ULP_ERR,                /* max |g_acc - g_same| in fp32 ulps of g_same */
    GP_M_UNDERFLOW_FRAC,             /* underflow events / non-zero exact values rounded */
    GP_M_ABSORBED_FRAC,              /* absorbed additions / additions of a non-zero addend */
    GP_M_OVERFLOW_COUNT,             /* overflow events */
    GP_M_GRAD_NORM_RATIO,            /* ||g_acc|| / ||g_full|| */
    GP_M_SKIPPED_STEPS,              /* optimizer steps skipped on a non-finite gradient */
    GP_M_MIN_LOSS_SCALE,             /* smallest loss scale reached */
    GP_M_STALE_UPDATE_FRAC,          /* weights unchanged though the exact update was non-zero */
    GP_M_WEIGHT_REL_ERR,             /* ||w_T - w_T,exact|| / ||w_T,exact|| */
    GP_M_SUBNORMAL_FRAC,             /* stored gradients that are subnormal / non-zero stored */
    GP_M_NONFINITE_COUNT,            /* non-finite values in the final gradient */
    GP_M_M_REL_ERR,                  /* ||m_T - m_T,exact|| / ||m_T,exact|| (Adam's first moment) */
    GP_M_V_REL_ERR,                  /* ||v_T - v_T,exact|| / ||v_T,exact|| (second moment) */
    GP_M_STATE_UNDERFLOW_FRAC,       /* m or v stored as 0 from a non-zero value / non-zero values */
    GP_M_SCALING_REL_ERR,            /* gradient lost to skipped steps or mis-ordered clipping,
                                        over all steps / ||g_full|| */
    GP_M_SR_BIAS_SCORE,              /* stochastic rounding of the accumulator as a random process
                                        (gp_runner.h): |sum of (up - f)| / its derived bound */
    GP_M_SR_ELEMENT_CORR_SCORE,      /* ... neighbouring elements' roundings: |sum u_i u_(i+1)| / bound */
    GP_M_SR_STEP_CORR_SCORE,         /* ... one element on consecutive micro-batches: / bound */
    GP_M_COLLECTIVE_REL_ERR,         /* distributed only: ||the simulated collective's own rounding
                                        errors, summed per element|| / ||g_same||; absent (NaN) in
                                        one process */
    GP_M_TWIN_MISMATCH_COUNT,        /* replay of a capture with `twin`: element-outputs (param, m, v,
                                        master) of the backend that differ in any bit from torch's
                                        after the same step, summed over steps; absent (NaN) without
                                        a twin */
    GP_M_SR_LAG_CORR_SCORE,          /* stochastic rounding of the accumulator: the largest
                                        |sum u_(j-L) u_j| / its bound over every lag L of one
                                        micro-batch (harness/run/gp_sr_lag.h); absent (NaN) without
                                        a stochastic accumulator */
    GP_NMETRICS
} gp_metric;

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

/* The loss mechanisms of DESIGN.md §1, each loss is attributed to one. */
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
