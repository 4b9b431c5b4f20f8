/* gp_gate.h — the regression gate behind `gradprec gate`: compare a current
 * report.json with a baseline, scenario by scenario (matched by name) and metric by
 * metric (the scenario's "metrics" and each tensor's, matched by tensor name), and
 * classify every change as unchanged (within tolerance), improved or regressed, or, for a
 * quantity determined exactly (gp_gate_exact_metric), as changed in either direction.
 *
 * Direction, tolerance class and the exact set: each metric's line of GP_METRICS
 * (harness/scenario/gp_metrics.h). Larger is worse for every metric except grad_norm_ratio
 * (worse = farther from 1: |v - 1| is compared) and min_loss_scale (smaller is worse), and
 * for any name gradprec does not know. A change is a
 * regression when the new value is worse than the old by more than
 * max(abs, rel * |old|) (for grad_norm_ratio, old is |old - 1|); an improvement when
 * it is better by more than that. A verdict that got worse (pass -> warn,
 * pass/warn -> fail) is a regression too.
 *
 * Fails closed: a scenario, tensor or metric of the baseline missing from the current
 * run, or a metric that is a number in the baseline and not one now (the string
 * "nan", null, ...), is a problem that fails the gate. "inf" and "-inf" (how
 * report.json writes infinities) are compared as numbers. A scenario only in the
 * current run is "new" and not gated.
 *
 * Library code: nothing is printed, nothing exits. The result borrows strings from
 * the two report roots, which must outlive it. */
#ifndef GP_GATE_H
#define GP_GATE_H

#include <jansson.h>
#include <stddef.h>

#include "../base/gp_error.h"
#include "../harness/scenario/gp_metrics.h"

typedef struct {
    double rel, abs;
} gp_gate_tol;

/* Overrides read from a tolerances file; a field applies only where its flag is set. */
typedef struct {
    double rel, abs;
    int rel_set, abs_set;
} gp_gate_override;

/* Per-metric tolerances: the built-in table (by metric name), then the file's
 * "default", then the file's "metrics" entry, field by field. All zero = built-ins. */
typedef struct {
    gp_gate_override def;
    gp_gate_override metric[GP_NMETRICS];
} gp_gate_tolerances;

/* 1 for a quantity the configuration determines exactly (no sampling error, no
 * tolerance makes sense; GP_TOL_EXACT in GP_METRICS, and any other name ending in _count):
 * counts (*_count), skipped_steps and min_loss_scale (and, per
 * scenario, the per-step loss_scale_by_step and skipped_by_step, compared step by step).
 * With the built-in tolerance (0) and no spread over seeds or sampling interval on either
 * side, any difference is CHANGED with both values, never improved; a tolerances file
 * that gives one a tolerance makes it an ordinary directional metric again. A scenario
 * also marks metrics exact with `exact_metrics:` (report.json "exact_metrics", read from
 * either side): those are compared for equality whatever the tolerance. */
int gp_gate_exact_metric(const char *metric);

/* The built-in tolerance of a metric name, by its class in GP_METRICS (a name gradprec
 * does not know: by its suffix, *_count exact, *_frac a fraction, else an error metric):
 * exact (counts *_count, skipped_steps, min_loss_scale) rel 0 abs 0; fractions (*_frac)
 * rel 0 abs 1e-4; the error metrics rel 0.10 abs 1e-12. */
gp_gate_tol gp_gate_builtin_tolerance(const char *metric);

/* The tolerance applied to a metric under t (NULL: built-ins only). */
gp_gate_tol gp_gate_tolerance(const gp_gate_tolerances *t, const char *metric);

/* Parse a tolerances file's text: {"default": {"rel": R, "abs": A},
 * "metrics": {"NAME": {"rel": R, "abs": A}, ...}}; every key optional, rel/abs
 * non-negative finite numbers, NAME a gradprec metric. `name` labels messages
 * ("FILE:LINE:COLUMN: ..." for syntax errors, "FILE: KEY: ..." otherwise). Returns 0,
 * or -1 with err set (one line). */
int gp_gate_parse_tolerances(const char *text, size_t len, const char *name, gp_gate_tolerances *t,
                             gp_error *err);
/* The same from a file. */
int gp_gate_load_tolerances(const char *path, gp_gate_tolerances *t, gp_error *err);

typedef enum {
    GP_GATE_UNCHANGED = 0, /* within tolerance */
    GP_GATE_IMPROVED,
    GP_GATE_REGRESSED,
    GP_GATE_MISSING,       /* in the baseline, not in the current run: fails closed */
    GP_GATE_NOT_NUMBER,    /* a number in the baseline, not a number now: fails closed */
    GP_GATE_NEW,           /* only in the current run: reported, not gated */
    GP_GATE_FAILED_CLOSED, /* scenario status only: it has a MISSING / NOT_NUMBER item */
    GP_GATE_CHANGED        /* an exactly determined quantity differs (either direction):
                              fails the gate, never an improvement (gp_gate_exact_metric) */
} gp_gate_status;

/* One finding (unchanged values are counted, not listed). */
typedef struct {
    gp_gate_status status;
    const char *scenario;
    const char *tensor;     /* NULL: the scenario itself */
    const char *metric;     /* metric name, "verdict", or NULL: the scenario / tensor itself */
    int is_verdict;         /* the scenario's verdict changed: old_text -> new_text */
    int is_expect;          /* the current run does not meet the scenario's `expect:` (an
                               expected failure that stopped failing is a regression):
                               expected verdict old_text naming mechanism `expect_mechanism`
                               (NULL: any), got verdict new_text naming `got_mechanism` */
    const char *expect_mechanism, *got_mechanism;
    double old_value, new_value; /* metrics; NAN where not a number */
    const char *old_text, *new_text; /* verdicts; a value that is not a number ("nan", "null") */
    int new_quoted;         /* new_text was a JSON string */
    gp_gate_tol tol;        /* the tolerance applied */
    double limit;           /* max(tol.abs, tol.rel * |old|, noise) (|old - 1| for grad_norm_ratio) */
    double noise;           /* the seed-noise part of limit: t * standard error of the difference
                               of the means (reports run with --seeds), else 0 */
    int has_iv;             /* a side is an estimate with an interval (sampled runs): the
                               intervals were compared, [old_lo, old_hi] and [new_lo, new_hi]
                               (a side without one: [v, v]) */
    double old_lo, old_hi, new_lo, new_hi;
    int step;               /* CHANGED per-step quantity (loss_scale_by_step, skipped_by_step):
                               the first step (from 1) whose values differ, old_value and
                               new_value its values; 0: the run's number of steps differs
                               (old_value, new_value: the counts); -1 otherwise */
    int nsteps_differ;      /* CHANGED per-step quantity: how many steps differ */
} gp_gate_item;

/* The seed-noise allowance for a metric whose baseline is the mean of nb seeds with
 * sample standard deviation sb and whose current value the mean of nc seeds with sc
 * (n = 1: a single run, no spread): t * se, se = sqrt(sb^2/nb + sc^2/nc) the standard
 * error of the difference of two independent means, t the one-sided Student-t quantile
 * of probability GP_GATE_NOISE_ALPHA at the Welch-Satterthwaite degrees of freedom.
 * 0 when neither side has a spread. */
#define GP_GATE_NOISE_ALPHA 1e-4
double gp_gate_noise(double sb, int nb, double sc, int nc);

typedef struct {
    const char *name;
    const json_t *base, *cur; /* the scenario objects; either may be NULL */
    gp_gate_status status;    /* UNCHANGED, IMPROVED, REGRESSED, CHANGED, FAILED_CLOSED or NEW */
    size_t first_item, nitems; /* its findings: items[first_item .. first_item + nitems) */
} gp_gate_scenario;

typedef struct {
    gp_gate_item *items; /* in baseline order, then the new scenarios */
    size_t nitems;
    gp_gate_scenario *scenarios; /* baseline order, then the new ones in current order */
    size_t nscenarios;
    /* scenario counts by status */
    size_t regressed, changed, improved, unchanged, added, failed_closed;
    const char *base_backend, *cur_backend; /* NULL when absent */
} gp_gate_result;

/* Compare two loaded reports (gp_report_load). base_label / cur_label name them in
 * messages. Returns 0 and fills *res (free with gp_gate_free), or -1 with err set
 * when an input is malformed beyond what gp_report_load checks (a "metrics" that is
 * not an object, a tensor without a name, duplicated names, an unknown verdict) or
 * on out of memory; *res is then empty. tol may be NULL (built-ins). */
int gp_gate_compare(const json_t *base, const char *base_label, const json_t *cur, const char *cur_label,
                    const gp_gate_tolerances *tol, gp_gate_result *res, gp_error *err);

/* 1 when nothing regressed, nothing exact changed and nothing failed closed. */
int gp_gate_passed(const gp_gate_result *res);

/* The findings, one line each (malloc'ed; "" when there are none), or NULL on out
 * of memory. */
char *gp_gate_lines(const gp_gate_result *res);

/* The summary line "gate: N regressed, C changed, M improved, K unchanged, J new, P
 * failed closed: PASS|FAIL" (counts are scenarios; no newline). */
void gp_gate_summary(const gp_gate_result *res, char *buf, size_t n);

/* The pull-request comment in Markdown (malloc'ed), or NULL on out of memory.
 * Byte-identical for the same reports and tolerances (no paths, no times). */
char *gp_gate_markdown(const gp_gate_result *res);

void gp_gate_free(gp_gate_result *res);

#endif
