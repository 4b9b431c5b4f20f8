/* gp_gate.c — see gp_gate.h. */
#include "gp_gate.h"

#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/gp_buf.h"
#include "../base/gp_file.h"
#include "gp_json_in.h"

/* ---- metric kinds and tolerances ---- */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A gradprec metric's line of GP_METRICS (harness/scenario/gp_metrics.h), or NULL. */
static const gp_metric_info *known(const char *metric)
{
    gp_metric m;
    return gp_metric_parse(metric, &m) == 0 ? gp_metric_get(m) : NULL;
}

/* Larger is worse for a name gradprec does not know. */
static gp_metric_dir metric_direction(const char *metric)
{
    const gp_metric_info *mi = known(metric);
    return mi ? mi->dir : GP_DIR_LARGER_WORSE;
}

/* The tolerance class of GP_METRICS; for a name gradprec does not know, by its suffix:
 * *_count exact, *_frac a fraction, else an error metric. */
static gp_metric_tol tolerance_class(const char *metric)
{
    const gp_metric_info *mi = known(metric);
    return mi                             ? mi->tol
           : ends_with(metric, "_count") ? GP_TOL_EXACT
           : ends_with(metric, "_frac")  ? GP_TOL_FRACTION
                                         : GP_TOL_ERROR;
}

int gp_gate_exact_metric(const char *metric)
{
    return tolerance_class(metric) == GP_TOL_EXACT;
}

gp_gate_tol gp_gate_builtin_tolerance(const char *metric)
{
    switch (tolerance_class(metric)) {
    case GP_TOL_EXACT: return (gp_gate_tol){0, 0};
    case GP_TOL_FRACTION: return (gp_gate_tol){0, 1e-4};
    default: return (gp_gate_tol){0.10, 1e-12};
    }
}

gp_gate_tol gp_gate_tolerance(const gp_gate_tolerances *t, const char *metric)
{
    gp_gate_tol r = gp_gate_builtin_tolerance(metric);
    if (!t)
        return r;
    const gp_gate_override *o[2] = {&t->def, NULL};
    gp_metric m;
    if (gp_metric_parse(metric, &m) == 0)
        o[1] = &t->metric[m];
    for (int k = 0; k < 2; k++)
        if (o[k]) {
            if (o[k]->rel_set)
                r.rel = o[k]->rel;
            if (o[k]->abs_set)
                r.abs = o[k]->abs;
        }
    return r;
}

/* {"rel": R, "abs": A}: `where` is the key path for messages. */
static int parse_override(const json_t *j, const char *name, const char *where, gp_gate_override *o,
                          gp_error *err)
{
    if (!json_is_object(j))
        return gp_error_set(err, "%s: %s: must be an object {\"rel\": R, \"abs\": A}", name, where);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        int is_rel = strcmp(key, "rel") == 0;
        if (!is_rel && strcmp(key, "abs") != 0)
            return gp_error_set(err, "%s: %s.%s: unknown key (allowed: rel, abs)", name, where, key);
        double x = json_number_value(v);
        if (!json_is_number(v) || !isfinite(x) || x < 0)
            return gp_error_set(err, "%s: %s.%s: must be a non-negative finite number", name, where, key);
        if (is_rel) {
            o->rel = x;
            o->rel_set = 1;
        } else {
            o->abs = x;
            o->abs_set = 1;
        }
    }
    return 0;
}

int gp_gate_parse_tolerances(const char *text, size_t len, const char *name, gp_gate_tolerances *t,
                             gp_error *err)
{
    memset(t, 0, sizeof *t);
    json_t *root = gp_json_parse(text, len, JSON_REJECT_DUPLICATES, name, err);
    if (!root)
        return -1;
    int rc = 0;
    const char *key;
    json_t *v;
    if (!json_is_object(root))
        rc = gp_error_set(err, "%s: must be a JSON object {\"default\": ..., \"metrics\": ...}", name);
    else
        json_object_foreach(root, key, v) {
            if (strcmp(key, "default") == 0) {
                rc = parse_override(v, name, "default", &t->def, err);
            } else if (strcmp(key, "metrics") == 0) {
                if (!json_is_object(v)) {
                    rc = gp_error_set(err, "%s: metrics: must be an object of metric names", name);
                    break;
                }
                const char *mk;
                json_t *mv;
                json_object_foreach(v, mk, mv) {
                    gp_metric m;
                    char where[300];
                    if (gp_metric_parse(mk, &m) != 0) {
                        rc = gp_error_set(err, "%s: metrics.%s: unknown metric", name, mk);
                        break;
                    }
                    snprintf(where, sizeof where, "metrics.%s", mk);
                    if ((rc = parse_override(mv, name, where, &t->metric[m], err)) != 0)
                        break;
                }
            } else {
                rc = gp_error_set(err, "%s: %s: unknown key (allowed: default, metrics)", name, key);
            }
            if (rc)
                break;
        }
    json_decref(root);
    if (rc)
        memset(t, 0, sizeof *t);
    return rc;
}

int gp_gate_load_tolerances(const char *path, gp_gate_tolerances *t, gp_error *err)
{
    memset(t, 0, sizeof *t);
    size_t n;
    char *buf = gp_file_read(path, GP_FILE_MAX_TOLERANCES, &n, err);
    if (!buf)
        return -1;
    int rc = gp_gate_parse_tolerances(buf, n, path, t, err);
    free(buf);
    return rc;
}

/* ---- comparison ---- */

typedef struct {
    int is_num;
    double v;
    const char *text; /* what it is when not a number */
    int quoted;       /* text is a JSON string */
} value;

static value decode(const json_t *j)
{
    value r = {0, NAN, NULL, 0};
    if (json_is_number(j)) {
        r.is_num = 1;
        r.v = json_number_value(j);
    } else if (json_is_string(j)) {
        const char *s = json_string_value(j);
        if (strcmp(s, "inf") == 0 || strcmp(s, "-inf") == 0) {
            r.is_num = 1;
            r.v = s[0] == '-' ? -INFINITY : INFINITY;
        } else {
            r.text = s;
            r.quoted = 1;
        }
    } else {
        r.text = json_is_null(j) ? "null" : json_is_true(j) ? "true" : json_is_false(j) ? "false"
                 : json_is_object(j) ? "an object" : "an array";
    }
    return r;
}

static int verdict_rank(const char *v)
{
    if (!v)
        return -1;
    if (strcmp(v, "pass") == 0)
        return 0;
    if (strcmp(v, "warn") == 0)
        return 1;
    if (strcmp(v, "fail") == 0)
        return 2;
    return -1;
}

typedef struct {
    gp_gate_result *res;
    const gp_gate_tolerances *tol;
    int oom;
    size_t cap;          /* of res->items */
    gp_gate_item dummy;  /* written to instead once out of memory */
    /* what the scenario being compared has seen */
    int seen_regressed, seen_changed, seen_improved, seen_problem;
} ctx;

static gp_gate_item *add_item(ctx *c, gp_gate_status st, const char *scenario, const char *tensor,
                              const char *metric)
{
    gp_gate_result *r = c->res;
    if (c->oom)
        return &c->dummy;
    if (r->nitems == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        gp_gate_item *n = realloc(r->items, cap * sizeof *n);
        if (!n) {
            c->oom = 1;
            return &c->dummy;
        }
        r->items = n;
        c->cap = cap;
    }
    gp_gate_item *it = &r->items[r->nitems++];
    memset(it, 0, sizeof *it);
    it->status = st;
    it->scenario = scenario;
    it->tensor = tensor;
    it->metric = metric;
    it->old_value = it->new_value = NAN;
    it->limit = NAN;
    it->step = -1;
    if (st == GP_GATE_REGRESSED)
        c->seen_regressed = 1;
    else if (st == GP_GATE_CHANGED)
        c->seen_changed = 1;
    else if (st == GP_GATE_IMPROVED)
        c->seen_improved = 1;
    else if (st == GP_GATE_MISSING || st == GP_GATE_NOT_NUMBER)
        c->seen_problem = 1;
    return it;
}

static double badness(gp_metric_dir d, double v)
{
    return d == GP_DIR_AWAY_FROM_ONE ? fabs(v - 1) : d == GP_DIR_SMALLER_WORSE ? -v : v;
}

double gp_gate_noise(double sb, int nb, double sc, int nc)
{
    double vb = nb > 1 && isfinite(sb) ? sb * sb / nb : 0, vc = nc > 1 && isfinite(sc) ? sc * sc / nc : 0;
    double se2 = vb + vc;
    if (!(se2 > 0))
        return 0;
    double den = (nb > 1 ? vb * vb / (nb - 1) : 0) + (nc > 1 ? vc * vc / (nc - 1) : 0);
    double dof = se2 * se2 / den;
    return gsl_cdf_tdist_Qinv(GP_GATE_NOISE_ALPHA, dof) * sqrt(se2);
}

/* The spread of one metric in a report scenario or tensor ("metrics_sd"), 0 if none. */
static double sd_of(const json_t *sd, const char *metric)
{
    const json_t *x = sd ? json_object_get(sd, metric) : NULL;
    return json_is_number(x) ? json_number_value(x) : 0;
}

/* The interval [lo, hi] of a metric from a report's "sampling": {"intervals": {...}}
 * object iv (NULL: none); returns 0 when there is none (or it is malformed). */
static int interval_of(const json_t *iv, const char *metric, double *lo, double *hi)
{
    const json_t *a = iv ? json_object_get(iv, metric) : NULL;
    if (!json_is_array(a) || json_array_size(a) != 2 || !json_is_number(json_array_get(a, 0)) ||
        !json_is_number(json_array_get(a, 1)))
        return 0;
    *lo = json_number_value(json_array_get(a, 0));
    *hi = json_number_value(json_array_get(a, 1));
    return *lo <= *hi;
}

/* The badness (badness()) of every value in [lo, hi]: [*blo, *bhi]. */
static void badness_range(gp_metric_dir d, double lo, double hi, double *blo, double *bhi)
{
    double a = badness(d, lo), b = badness(d, hi);
    *blo = fmin(a, b);
    *bhi = fmax(a, b);
    if (d == GP_DIR_AWAY_FROM_ONE && lo <= 1 && 1 <= hi)
        *blo = 0; /* |v - 1| is 0 inside */
}

/* Compare one metric value of the baseline with the current one (cj NULL: missing).
 * sb/sc: the two sides' standard deviations over nb/nc seeds (1: no spread). biv/civ: the
 * sides' "intervals" objects (sampled runs), or NULL: a metric with an interval on either
 * side regresses only when the current interval lies entirely worse than the baseline's,
 * apart by more than the limit (improves likewise): an estimate's sampling error never
 * makes a regression by itself (docs/gate.md, "Estimates"). */
/* 1 when a report scenario lists metric in its "exact_metrics" (its `exact_metrics:`). */
static int listed_exact(const json_t *sc, const char *metric)
{
    size_t i;
    json_t *x;
    json_array_foreach(sc ? json_object_get(sc, "exact_metrics") : NULL, i, x)
        if (json_is_string(x) && strcmp(json_string_value(x), metric) == 0)
            return 1;
    return 0;
}

static void compare_metric(ctx *c, const char *scenario, const char *tensor, const char *metric,
                           const json_t *bj, const json_t *cj, double sb, int nb, double sc, int nc,
                           const json_t *biv, const json_t *civ, int marked_exact)
{
    value o = decode(bj);
    if (!cj) {
        gp_gate_item *it = add_item(c, GP_GATE_MISSING, scenario, tensor, metric);
        it->old_value = o.v;
        it->old_text = o.text;
        return;
    }
    value n = decode(cj);
    if (!o.is_num) {
        if (n.is_num) { /* a number again: better than none */
            gp_gate_item *it = add_item(c, GP_GATE_IMPROVED, scenario, tensor, metric);
            it->old_text = o.text;
            it->new_value = n.v;
        }
        return;
    }
    if (!n.is_num) {
        gp_gate_item *it = add_item(c, GP_GATE_NOT_NUMBER, scenario, tensor, metric);
        it->old_value = o.v;
        it->new_text = n.text;
        it->new_quoted = n.quoted;
        return;
    }
    gp_metric_dir d = metric_direction(metric);
    gp_gate_tol t = gp_gate_tolerance(c->tol, metric);
    double bo = badness(d, o.v), bn = badness(d, n.v);
    if (bo == bn)
        return;
    double xlo, xhi;
    int exact = marked_exact || (gp_gate_exact_metric(metric) && t.rel == 0 && t.abs == 0);
    if (exact && !(sb > 0) && !(sc > 0) &&
        !interval_of(biv, metric, &xlo, &xhi) && !interval_of(civ, metric, &xlo, &xhi)) {
        /* determined exactly: a difference is a change of behaviour, in either direction */
        gp_gate_item *it = add_item(c, GP_GATE_CHANGED, scenario, tensor, metric);
        it->old_value = o.v;
        it->new_value = n.v;
        it->tol = t;
        return;
    }
    double limit = INFINITY, noise = 0;
    gp_gate_status st;
    if (isinf(bo) || isinf(bn)) {
        st = bn > bo ? GP_GATE_REGRESSED : GP_GATE_IMPROVED;
    } else {
        double basis = d == GP_DIR_AWAY_FROM_ONE ? bo : fabs(o.v);
        noise = gp_gate_noise(sb, nb, sc, nc);
        limit = fmax(fmax(t.abs, t.rel * basis), noise);
        st = bn - bo > limit ? GP_GATE_REGRESSED : bo - bn > limit ? GP_GATE_IMPROVED : GP_GATE_UNCHANGED;
    }
    double olo = o.v, ohi = o.v, nlo = n.v, nhi = n.v;
    int has_iv = interval_of(biv, metric, &olo, &ohi) | interval_of(civ, metric, &nlo, &nhi);
    if (has_iv && !isinf(bo) && !isinf(bn)) {
        double bolo, bohi, bnlo, bnhi;
        badness_range(d, olo, ohi, &bolo, &bohi);
        badness_range(d, nlo, nhi, &bnlo, &bnhi);
        st = bnlo - bohi > limit ? GP_GATE_REGRESSED : bolo - bnhi > limit ? GP_GATE_IMPROVED : GP_GATE_UNCHANGED;
    }
    if (st == GP_GATE_UNCHANGED)
        return;
    gp_gate_item *it = add_item(c, st, scenario, tensor, metric);
    it->has_iv = has_iv;
    it->old_lo = olo;
    it->old_hi = ohi;
    it->new_lo = nlo;
    it->new_hi = nhi;
    it->old_value = o.v;
    it->new_value = n.v;
    it->tol = t;
    it->limit = limit;
    it->noise = noise;
}

/* A scenario's per-step quantities that are determined exactly (report.json writes them
 * for multi-step scenarios): compared step by step, any difference CHANGED. A baseline
 * array the current scenario lacks fails closed. Skipped with seeds (the arrays are the
 * first seed's). */
static void compare_steps(ctx *c, const char *scenario, const json_t *b, const json_t *cur)
{
    static const char *const keys[] = {"loss_scale_by_step", "skipped_by_step"};
    for (int k = 0; k < 2; k++) {
        const json_t *ba = json_object_get(b, keys[k]), *ca = json_object_get(cur, keys[k]);
        if (!json_is_array(ba))
            continue;
        if (!json_is_array(ca)) {
            add_item(c, GP_GATE_MISSING, scenario, NULL, keys[k])->old_text = "an array of steps";
            continue;
        }
        size_t nb = json_array_size(ba), nc = json_array_size(ca), ndiff = 0, first = 0;
        double ov = NAN, nv = NAN;
        for (size_t i = 0; i < nb && i < nc; i++) {
            const json_t *x = json_array_get(ba, i), *y = json_array_get(ca, i);
            double vx = json_is_boolean(x) ? json_is_true(x) : decode(x).v;
            double vy = json_is_boolean(y) ? json_is_true(y) : decode(y).v;
            if (vx == vy || (vx != vx && vy != vy))
                continue;
            if (ndiff++ == 0) {
                first = i;
                ov = vx;
                nv = vy;
            }
        }
        if (nb == nc && ndiff == 0)
            continue;
        gp_gate_item *it = add_item(c, GP_GATE_CHANGED, scenario, NULL, keys[k]);
        it->step = nb != nc ? 0 : (int)first + 1;
        it->old_value = nb != nc ? (double)nb : ov;
        it->new_value = nb != nc ? (double)nc : nv;
        it->nsteps_differ = (int)ndiff;
    }
}

/* Seeds a report scenario's metrics are the mean over (1 without "seeds"). */
static int seeds_of(const json_t *sc)
{
    json_int_t n = json_integer_value(json_object_get(json_object_get(sc, "seeds"), "n"));
    return n > 1 && n <= 1000000 ? (int)n : 1;
}

/* bo, co: the objects holding "metrics" and "metrics_sd" (a scenario or a tensor); nb, nc
 * their scenarios' seeds. */
static void compare_metrics(ctx *c, const char *scenario, const char *tensor, const json_t *bo,
                            const json_t *co, int nb, int nc, int report_new, const json_t *bsc, const json_t *csc)
{
    const json_t *bm = json_object_get(bo, "metrics"), *cm = co ? json_object_get(co, "metrics") : NULL;
    const json_t *bsd = json_object_get(bo, "metrics_sd"), *csd = co ? json_object_get(co, "metrics_sd") : NULL;
    const json_t *biv = json_object_get(json_object_get(bo, "sampling"), "intervals");
    const json_t *civ = co ? json_object_get(json_object_get(co, "sampling"), "intervals") : NULL;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)bm, key, v)
        compare_metric(c, scenario, tensor, key, v, cm ? json_object_get(cm, key) : NULL, sd_of(bsd, key), nb,
                       sd_of(csd, key), nc, biv, civ, listed_exact(bsc, key) || listed_exact(csc, key));
    if (report_new && cm)
        json_object_foreach((json_t *)cm, key, v)
            if (!json_object_get(bm, key)) {
                gp_gate_item *it = add_item(c, GP_GATE_NEW, scenario, tensor, key);
                value n = decode(v);
                it->new_value = n.v;
                it->new_text = n.text;
            }
}

/* A scenario whose configuration the backend refused (verdict "refused"): nothing was
 * measured, so the gate takes it as absent from its report. */
static int is_refused(const json_t *sc)
{
    const char *v = json_string_value(json_object_get(sc, "verdict"));
    return v && strcmp(v, "refused") == 0;
}

/* Structure checks beyond gp_report_load; builds the name -> position index (refused
 * scenarios left out). */
static json_t *check_report(const json_t *root, const char *label, gp_error *err)
{
    json_t *idx = json_object();
    if (!idx) {
        gp_error_set(err, "out of memory");
        return NULL;
    }
    size_t i;
    json_t *sc;
    json_array_foreach(json_object_get(root, "scenarios"), i, sc) {
        const char *name = json_string_value(json_object_get(sc, "name"));
        const char *why = NULL;
        json_t *m = json_object_get(sc, "metrics"), *ts = json_object_get(sc, "tensors");
        if (json_object_get(idx, name))
            why = "appears more than once";
        else if (verdict_rank(json_string_value(json_object_get(sc, "verdict"))) < 0 && !is_refused(sc))
            why = "has a verdict other than pass, warn, fail, refused";
        else if (m && !json_is_object(m))
            why = "has a \"metrics\" that is not an object";
        else if (ts && !json_is_array(ts))
            why = "has a \"tensors\" that is not an array";
        else if (json_object_get(sc, "dominant_mechanism") &&
                 !json_is_string(json_object_get(sc, "dominant_mechanism")))
            why = "has a \"dominant_mechanism\" that is not a string";
        else if (ts) {
            json_t *seen = json_object();
            size_t k;
            json_t *t;
            json_array_foreach(ts, k, t) {
                const char *tn = json_string_value(json_object_get(t, "name"));
                json_t *tm = json_object_get(t, "metrics");
                if (!json_is_object(t) || !tn)
                    why = "has a tensor without a name";
                else if (tm && !json_is_object(tm))
                    why = "has a tensor whose \"metrics\" is not an object";
                else if (json_object_get(seen, tn))
                    why = "has two tensors of the same name";
                else
                    json_object_set_new(seen, tn, json_true());
                if (why)
                    break;
            }
            json_decref(seen);
        }
        if (why) {
            gp_error_set(err, "%s: scenario \"%s\" %s", label, name, why);
            json_decref(idx);
            return NULL;
        }
        if (!is_refused(sc))
            json_object_set_new(idx, name, json_integer((json_int_t)i));
    }
    return idx;
}

static void add_scenario(ctx *c, size_t first, const char *name, const json_t *b, const json_t *cur,
                         gp_gate_status st)
{
    gp_gate_result *r = c->res;
    if (c->oom)
        return;
    gp_gate_scenario *s = &r->scenarios[r->nscenarios++];
    s->first_item = first;
    s->nitems = r->nitems - first;
    s->name = name;
    s->base = b;
    s->cur = cur;
    s->status = st;
    switch (st) {
    case GP_GATE_REGRESSED: r->regressed++; break;
    case GP_GATE_CHANGED: r->changed++; break;
    case GP_GATE_IMPROVED: r->improved++; break;
    case GP_GATE_NEW: r->added++; break;
    case GP_GATE_FAILED_CLOSED: r->failed_closed++; break;
    default: r->unchanged++; break;
    }
}

static const char *mech(const json_t *sc);

static void compare_scenario(ctx *c, const char *name, const json_t *b, const json_t *cur)
{
    c->seen_regressed = c->seen_changed = c->seen_improved = c->seen_problem = 0;
    size_t first = c->res->nitems;
    if (!cur) {
        add_item(c, GP_GATE_MISSING, name, NULL, NULL);
        add_scenario(c, first, name, b, NULL, GP_GATE_FAILED_CLOSED);
        return;
    }
    const char *vb = json_string_value(json_object_get(b, "verdict"));
    const char *vc = json_string_value(json_object_get(cur, "verdict"));
    int rb = verdict_rank(vb), rc = verdict_rank(vc);
    int nb = seeds_of(b), nc = seeds_of(cur);
    /* With seeds, pass <-> warn says only whether a rare event fired in this set of seeds;
     * the metrics that count those events are gated against their spread below. A change
     * to or from fail is still a verdict change. */
    int seed_noise = (nb > 1 || nc > 1) && rb != verdict_rank("fail") && rc != verdict_rank("fail");
    const json_t *ex = json_object_get(cur, "expect");
    int unmet = json_is_object(ex) && !json_is_true(json_object_get(ex, "met"));
    /* an expected failure that stops failing is not an improvement: only the unmet
     * expectation below is listed */
    if (rb != rc && !seed_noise && !(unmet && rc < rb)) {
        gp_gate_item *it = add_item(c, rc > rb ? GP_GATE_REGRESSED : GP_GATE_IMPROVED, name, NULL, "verdict");
        it->is_verdict = 1;
        it->old_text = vb;
        it->new_text = vc;
    }
    if (unmet) {
        gp_gate_item *it = add_item(c, GP_GATE_REGRESSED, name, NULL, "expect");
        it->is_verdict = it->is_expect = 1;
        it->old_text = json_string_value(json_object_get(ex, "verdict"));
        it->expect_mechanism = json_string_value(json_object_get(ex, "mechanism"));
        it->new_text = vc;
        it->got_mechanism = mech(cur);
    }
    if (json_object_get(b, "metrics"))
        compare_metrics(c, name, NULL, b, cur, nb, nc, 1, b, cur);
    if (nb == 1 && nc == 1)
        compare_steps(c, name, b, cur);
    /* tensors, by name */
    json_t *cidx = json_object();
    if (!cidx) {
        c->oom = 1;
        return;
    }
    size_t k;
    json_t *t;
    json_array_foreach(json_object_get(cur, "tensors"), k, t)
        json_object_set(cidx, json_string_value(json_object_get(t, "name")), t);
    json_array_foreach(json_object_get(b, "tensors"), k, t) {
        const char *tn = json_string_value(json_object_get(t, "name"));
        json_t *ct = json_object_get(cidx, tn);
        if (!ct) {
            add_item(c, GP_GATE_MISSING, name, tn, NULL);
            continue;
        }
        if (json_object_get(t, "metrics"))
            compare_metrics(c, name, tn, t, ct, nb, nc, 0, b, cur);
        json_object_del(cidx, tn);
    }
    /* what is left is only in the current run, in its order */
    json_array_foreach(json_object_get(cur, "tensors"), k, t) {
        const char *tn = json_string_value(json_object_get(t, "name"));
        if (json_object_get(cidx, tn))
            add_item(c, GP_GATE_NEW, name, tn, NULL);
    }
    json_decref(cidx);
    add_scenario(c, first, name, b, cur,
                 c->seen_problem ? GP_GATE_FAILED_CLOSED
                 : c->seen_regressed ? GP_GATE_REGRESSED
                 : c->seen_changed ? GP_GATE_CHANGED
                 : c->seen_improved ? GP_GATE_IMPROVED : GP_GATE_UNCHANGED);
}

void gp_gate_free(gp_gate_result *res)
{
    if (!res)
        return;
    free(res->items);
    free(res->scenarios);
    memset(res, 0, sizeof *res);
}

int gp_gate_compare(const json_t *base, const char *base_label, const json_t *cur, const char *cur_label,
                    const gp_gate_tolerances *tol, gp_gate_result *res, gp_error *err)
{
    memset(res, 0, sizeof *res);
    json_t *bidx = check_report(base, base_label, err);
    if (!bidx)
        return -1;
    json_t *cidx = check_report(cur, cur_label, err);
    if (!cidx) {
        json_decref(bidx);
        return -1;
    }
    json_t *bs = json_object_get(base, "scenarios"), *cs = json_object_get(cur, "scenarios");
    res->base_backend = json_string_value(json_object_get(base, "backend"));
    res->cur_backend = json_string_value(json_object_get(cur, "backend"));
    res->scenarios = calloc(json_array_size(bs) + json_array_size(cs) + 1, sizeof *res->scenarios);
    ctx c;
    memset(&c, 0, sizeof c);
    c.res = res;
    c.tol = tol;
    c.oom = res->scenarios == NULL;
    size_t i;
    json_t *sc;
    if (!c.oom) {
        json_array_foreach(bs, i, sc) {
            const char *name = json_string_value(json_object_get(sc, "name"));
            json_t *pos = json_object_get(cidx, name);
            if (is_refused(sc))
                continue; /* no baseline to gate against */
            compare_scenario(&c, name, sc, pos ? json_array_get(cs, (size_t)json_integer_value(pos)) : NULL);
        }
        json_array_foreach(cs, i, sc) {
            const char *name = json_string_value(json_object_get(sc, "name"));
            if (!json_object_get(bidx, name) && !is_refused(sc)) {
                size_t first = res->nitems;
                gp_gate_item *it = add_item(&c, GP_GATE_NEW, name, NULL, NULL);
                it->new_text = json_string_value(json_object_get(sc, "verdict"));
                add_scenario(&c, first, name, NULL, sc, GP_GATE_NEW);
            }
        }
    }
    json_decref(bidx);
    json_decref(cidx);
    if (c.oom) {
        gp_gate_free(res);
        return gp_error_set(err, "out of memory");
    }
    return 0;
}

int gp_gate_passed(const gp_gate_result *res)
{
    return res->regressed == 0 && res->changed == 0 && res->failed_closed == 0;
}

/* ---- text ---- */

static const char *num(double v, char *buf)
{
    snprintf(buf, 32, "%.6g", v);
    return buf;
}

/* "scenario" or "scenario [tensor T]" */
static void put_where(gp_buf *f, const gp_gate_item *it)
{
    gp_buf_puts(f, it->scenario);
    if (it->tensor)
        gp_buf_printf(f, " [tensor %s]", it->tensor);
}

static void tolerance_text(gp_buf *f, const gp_gate_item *it)
{
    char a[32], b[32];
    int away = metric_direction(it->metric) == GP_DIR_AWAY_FROM_ONE;
    double d = fabs(badness(metric_direction(it->metric), it->new_value) -
                    badness(metric_direction(it->metric), it->old_value));
    gp_buf_printf(f, " (%s%s by %s, ", away ? "|v-1| " : "", it->status == GP_GATE_REGRESSED ? "worse" : "better",
            num(d, a));
    if (it->has_iv) {
        char c1[32], c2[32], c3[32], c4[32];
        gp_buf_printf(f, "95%% intervals [%s, %s] -> [%s, %s] apart by more than the ", num(it->old_lo, c1),
                      num(it->old_hi, c2), num(it->new_lo, c3), num(it->new_hi, c4));
    }
    if (isinf(it->limit))
        gp_buf_printf(f, "beyond any tolerance)");
    else if (it->noise > 0)
        gp_buf_printf(f, "tolerance %s = max(abs %g, rel %g x %s, seed noise %s))", num(it->limit, b), it->tol.abs,
                      it->tol.rel, away ? "|old-1|" : "|old|", num(it->noise, a));
    else
        gp_buf_printf(f, "tolerance %s = max(abs %g, rel %g x %s))", num(it->limit, b), it->tol.abs, it->tol.rel,
                away ? "|old-1|" : "|old|");
}

static void item_line(gp_buf *f, const gp_gate_item *it)
{
    char a[32], b[32];
    switch (it->status) {
    case GP_GATE_REGRESSED:
    case GP_GATE_IMPROVED:
        gp_buf_puts(f, it->status == GP_GATE_REGRESSED ? "REGRESSED     " : "improved      ");
        put_where(f, it);
        if (it->is_expect) {
            gp_buf_printf(f, ": expected verdict %s%s%s, got %s naming %s (an expectation not met)\n",
                          it->old_text ? it->old_text : "?", it->expect_mechanism ? " naming " : "",
                          it->expect_mechanism ? it->expect_mechanism : "", it->new_text ? it->new_text : "?",
                          it->got_mechanism ? it->got_mechanism : "?");
        } else if (it->is_verdict) {
            gp_buf_printf(f, ": verdict %s -> %s\n", it->old_text, it->new_text);
        } else if (it->old_text) {
            gp_buf_printf(f, ": %s %s -> %s (a number again)\n", it->metric, it->old_text, num(it->new_value, a));
        } else {
            gp_buf_printf(f, ": %s %s -> %s", it->metric, num(it->old_value, a), num(it->new_value, b));
            tolerance_text(f, it);
            gp_buf_putc(f, (char)('\n'));
        }
        break;
    case GP_GATE_CHANGED:
        gp_buf_puts(f, "CHANGED       ");
        put_where(f, it);
        if (it->step == 0)
            gp_buf_printf(f, ": %s: %s -> %s steps", it->metric, num(it->old_value, a), num(it->new_value, b));
        else if (it->step > 0)
            gp_buf_printf(f, ": %s at step %d: %s -> %s (%d step%s differ)", it->metric, it->step,
                          num(it->old_value, a), num(it->new_value, b), it->nsteps_differ,
                          it->nsteps_differ == 1 ? "" : "s");
        else
            gp_buf_printf(f, ": %s %s -> %s", it->metric, num(it->old_value, a), num(it->new_value, b));
        gp_buf_puts(f, " (determined exactly: any change is a change of behaviour to review, in either "
                       "direction)\n");
        break;
    case GP_GATE_MISSING:
        gp_buf_puts(f, "MISSING       ");
        put_where(f, it);
        if (it->metric && it->old_text && strcmp(it->old_text, "an array of steps") == 0)
            gp_buf_printf(f, ": %s (per step) is not in the current run\n", it->metric);
        else if (it->metric)
            gp_buf_printf(f, ": metric %s (baseline %s) is not in the current run (report.json leaves out NaN metrics)\n",
                    it->metric, it->old_text ? it->old_text : num(it->old_value, a));
        else
            gp_buf_printf(f, ": %s is in the baseline but not in the current run\n", it->tensor ? "tensor" : "scenario");
        break;
    case GP_GATE_NOT_NUMBER:
        gp_buf_puts(f, "NOT-A-NUMBER  ");
        put_where(f, it);
        gp_buf_printf(f, it->new_quoted ? ": metric %s is \"%s\" in the current run where the baseline had %s\n"
                                  : ": metric %s is %s in the current run where the baseline had %s\n",
                it->metric, it->new_text, num(it->old_value, a));
        break;
    case GP_GATE_NEW:
        gp_buf_puts(f, "new           ");
        put_where(f, it);
        if (it->metric)
            gp_buf_printf(f, ": metric %s = %s only in the current run (not gated)\n", it->metric,
                    it->new_text ? it->new_text : num(it->new_value, a));
        else if (it->tensor)
            gp_buf_printf(f, ": tensor only in the current run (not gated)\n");
        else
            gp_buf_printf(f, ": scenario only in the current run, verdict %s (not gated)\n", it->new_text);
        break;
    default:
        break;
    }
}

char *gp_gate_lines(const gp_gate_result *res)
{
    gp_buf b = GP_BUF_INIT, *f = &b;
    for (size_t i = 0; i < res->nitems; i++)
        item_line(f, &res->items[i]);
    if (res->base_backend && res->cur_backend && strcmp(res->base_backend, res->cur_backend) != 0)
        gp_buf_printf(f, "note          the baseline ran on backend %s, the current run on %s\n", res->base_backend,
                res->cur_backend);
    return gp_buf_take(f);
}

void gp_gate_summary(const gp_gate_result *res, char *buf, size_t n)
{
    snprintf(buf, n, "gate: %zu regressed, %zu changed, %zu improved, %zu unchanged, %zu new, %zu failed closed: %s",
             res->regressed, res->changed, res->improved, res->unchanged, res->added, res->failed_closed,
             gp_gate_passed(res) ? "PASS" : "FAIL");
}

/* ---- Markdown ---- */

/* Text safe inside a Markdown table cell: no line breaks, no pipes, no markup, no HTML. */
static void md(gp_buf *f, const char *s)
{
    if (!s) {
        gp_buf_puts(f, "—");
        return;
    }
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        switch (ch) {
        case '&': gp_buf_puts(f, "&amp;"); break;
        case '<': gp_buf_puts(f, "&lt;"); break;
        case '>': gp_buf_puts(f, "&gt;"); break;
        case '"': gp_buf_puts(f, "&quot;"); break;
        case '|': gp_buf_puts(f, "&#124;"); break;
        case '\\': case '`': case '*': case '_': case '[': case ']': case '#': case '~': case '!':
            gp_buf_putc(f, (char)('\\'));
            gp_buf_putc(f, (char)(ch));
            break;
        default:
            gp_buf_putc(f, (char)(ch < 0x20 || ch == 0x7f ? ' ' : ch));
        }
    }
}

/* Text safe inside HTML (the <summary> of a <details>, where Markdown is not parsed). */
static void html(gp_buf *f, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        switch (ch) {
        case '&': gp_buf_puts(f, "&amp;"); break;
        case '<': gp_buf_puts(f, "&lt;"); break;
        case '>': gp_buf_puts(f, "&gt;"); break;
        case '"': gp_buf_puts(f, "&quot;"); break;
        default: gp_buf_putc(f, (char)(ch < 0x20 || ch == 0x7f ? ' ' : ch));
        }
    }
}

static const char *status_cell(gp_gate_status st)
{
    switch (st) {
    case GP_GATE_REGRESSED: return "▲ regressed";
    case GP_GATE_CHANGED: return "≠ changed";
    case GP_GATE_IMPROVED: return "▼ improved";
    case GP_GATE_NEW: return "new (not gated)";
    case GP_GATE_FAILED_CLOSED: return "❌ failed closed";
    default: return "unchanged";
    }
}

static const char *mech(const json_t *sc)
{
    return sc ? json_string_value(json_object_get(sc, "dominant_mechanism")) : NULL;
}

static const char *verdict(const json_t *sc)
{
    return sc ? json_string_value(json_object_get(sc, "verdict")) : NULL;
}

static int is_metric_change(const gp_gate_item *it)
{
    return (it->status == GP_GATE_REGRESSED || it->status == GP_GATE_IMPROVED || it->status == GP_GATE_CHANGED) &&
           !it->is_verdict;
}

/* One row: | [tensor |] metric | baseline | current | delta | arrow | */
static void change_row(gp_buf *f, const gp_gate_item *it, int with_tensor, int with_scenario)
{
    char a[32], b[32], d[64];
    gp_buf_puts(f, "| ");
    if (with_scenario) {
        md(f, it->scenario);
        gp_buf_puts(f, " | ");
    }
    if (with_tensor) {
        md(f, it->tensor);
        gp_buf_puts(f, " | ");
    }
    md(f, it->metric);
    if (it->step > 0)
        gp_buf_printf(f, " (step %d; %d differ)", it->step, it->nsteps_differ);
    else if (it->step == 0)
        gp_buf_puts(f, " (number of steps)");
    if (it->old_text) {
        gp_buf_printf(f, " | ");
        md(f, it->old_text);
        gp_buf_printf(f, " | %s | — | ▼ better |\n", num(it->new_value, b));
        return;
    }
    double delta = it->new_value - it->old_value;
    if (it->old_value != 0 && isfinite(delta) && isfinite(it->old_value))
        snprintf(d, sizeof d, "%+.3g (%+.1f%%)", delta, 100 * delta / fabs(it->old_value));
    else
        snprintf(d, sizeof d, "%+.3g", delta);
    gp_buf_printf(f, " | %s | %s | %s | %s |\n", num(it->old_value, a), num(it->new_value, b), d,
            it->status == GP_GATE_CHANGED ? "≠ changed (exact)" : it->status == GP_GATE_REGRESSED ? "▲ worse" : "▼ better");
}

static void problem_line(gp_buf *f, const gp_gate_item *it)
{
    char a[32];
    gp_buf_puts(f, "- ");
    md(f, it->scenario);
    if (it->tensor) {
        gp_buf_puts(f, ", tensor ");
        md(f, it->tensor);
    }
    if (it->status == GP_GATE_MISSING && !it->metric) {
        gp_buf_printf(f, ": %s missing from the current run\n", it->tensor ? "tensor" : "scenario");
    } else if (it->status == GP_GATE_MISSING) {
        gp_buf_puts(f, ": metric ");
        md(f, it->metric);
        gp_buf_printf(f, " (baseline %s) missing from the current run\n",
                it->old_text ? it->old_text : num(it->old_value, a));
    } else {
        gp_buf_puts(f, ": metric ");
        md(f, it->metric);
        gp_buf_puts(f, " is ");
        md(f, it->new_text);
        gp_buf_printf(f, " where the baseline had %s\n", num(it->old_value, a));
    }
}

/* A pull-request comment must stay short (GitHub refuses comments over 65536
 * characters): each list or table shows at most MD_MAX_ROWS rows, then says how many
 * more there are; the command's output has them all. */
enum { MD_MAX_ROWS = 100, MD_MAX_NAMES = 20 };

static void more(gp_buf *f, size_t n)
{
    if (n)
        gp_buf_printf(f, "\n… and %zu more (the gate's output lists them all).\n", n);
}

char *gp_gate_markdown(const gp_gate_result *res)
{
    gp_buf b = GP_BUF_INIT, *f = &b;
    int pass = gp_gate_passed(res);
    gp_buf_printf(f, "## gradprec gate: %s\n\n", pass ? "✅ pass" : "❌ fail");
    gp_buf_printf(f, "%zu regressed, %zu changed, %zu improved, %zu unchanged, %zu new, %zu failed closed (scenarios",
            res->regressed, res->changed, res->improved, res->unchanged, res->added, res->failed_closed);
    if (res->base_backend && res->cur_backend) {
        gp_buf_puts(f, "; baseline backend `");
        md(f, res->base_backend);
        gp_buf_puts(f, "`, current `");
        md(f, res->cur_backend);
        gp_buf_puts(f, "`");
    }
    gp_buf_puts(f, ").\n");

    size_t nproblems = 0, nchanged = 0;
    for (size_t i = 0; i < res->nitems; i++) {
        const gp_gate_item *it = &res->items[i];
        nproblems += it->status == GP_GATE_MISSING || it->status == GP_GATE_NOT_NUMBER;
        nchanged += is_metric_change(it) && !it->tensor;
    }
    if (nproblems) {
        gp_buf_puts(f, "\n### Failed closed\n\n");
        size_t shown = 0;
        for (size_t i = 0; i < res->nitems && shown < MD_MAX_ROWS; i++)
            if (res->items[i].status == GP_GATE_MISSING || res->items[i].status == GP_GATE_NOT_NUMBER) {
                problem_line(f, &res->items[i]);
                shown++;
            }
        more(f, nproblems - shown);
    }

    gp_buf_puts(f, "\n### Scenarios\n\n| scenario | verdict (baseline → current) | dominant mechanism | gate |\n"
          "|---|---|---|---|\n");
    /* all of them when they fit, else those that did not stay unchanged */
    int all = res->nscenarios <= MD_MAX_ROWS;
    size_t shown = 0, listable = all ? res->nscenarios : res->nscenarios - res->unchanged;
    for (size_t i = 0; i < res->nscenarios && shown < MD_MAX_ROWS; i++) {
        const gp_gate_scenario *s = &res->scenarios[i];
        if (!all && s->status == GP_GATE_UNCHANGED)
            continue;
        shown++;
        const char *vb = verdict(s->base), *vc = verdict(s->cur), *mb = mech(s->base), *mc = mech(s->cur);
        gp_buf_puts(f, "| ");
        md(f, s->name);
        gp_buf_puts(f, " | ");
        md(f, vb);
        gp_buf_puts(f, " → ");
        md(f, vc);
        gp_buf_puts(f, " | ");
        if (mb && mc && strcmp(mb, mc) == 0) {
            md(f, mc);
        } else {
            md(f, mb);
            gp_buf_puts(f, " → ");
            md(f, mc);
        }
        gp_buf_printf(f, " | %s |\n", status_cell(s->status));
    }
    if (!all && res->unchanged)
        gp_buf_printf(f, "\n%zu unchanged scenarios are not listed.\n", res->unchanged);
    more(f, listable - shown);

    gp_buf_puts(f, "\n### Metrics that changed beyond tolerance\n\n");
    if (!nchanged) {
        gp_buf_puts(f, "None.\n");
    } else {
        gp_buf_puts(f, "| scenario | metric | baseline | current | delta | |\n|---|---|---|---|---|---|\n");
        shown = 0;
        for (size_t i = 0; i < res->nitems && shown < MD_MAX_ROWS; i++)
            if (is_metric_change(&res->items[i]) && !res->items[i].tensor) {
                change_row(f, &res->items[i], 0, 1);
                shown++;
            }
        more(f, nchanged - shown);
    }

    /* the dominant mechanisms of the current run, grouped in order of appearance */
    gp_buf_puts(f, "\n### Mechanisms that fired (dominant, current run)\n\n");
    int any = 0;
    size_t nmech = 0, extra_mech = 0;
    json_t *seen = json_object();
    for (size_t i = 0; i < res->nscenarios && seen; i++) {
        const char *m = mech(res->scenarios[i].cur);
        size_t j;
        if (!m || json_object_get(seen, m))
            continue; /* listed already */
        json_object_set_new(seen, m, json_true());
        if (nmech++ >= MD_MAX_NAMES) {
            extra_mech++;
            continue;
        }
        if (!any)
            gp_buf_puts(f, "| mechanism | scenarios |\n|---|---|\n");
        any = 1;
        gp_buf_puts(f, "| ");
        md(f, m);
        gp_buf_puts(f, " |");
        const char *sep = " ";
        size_t named = 0, extra = 0;
        for (j = i; j < res->nscenarios; j++) {
            const char *mj = mech(res->scenarios[j].cur);
            if (mj && strcmp(mj, m) == 0) {
                if (named == MD_MAX_NAMES) {
                    extra++;
                    continue;
                }
                gp_buf_puts(f, sep);
                md(f, res->scenarios[j].name);
                sep = ", ";
                named++;
            }
        }
        if (extra)
            gp_buf_printf(f, " and %zu more", extra);
        gp_buf_puts(f, " |\n");
    }
    json_decref(seen);
    if (extra_mech)
        gp_buf_printf(f, "\n… and %zu more mechanisms.\n", extra_mech);
    if (!any)
        gp_buf_puts(f, "None recorded.\n");

    gp_buf_puts(f, "\n### Per tensor\n\n");
    int anyt = 0;
    size_t budget = MD_MAX_ROWS / 2, skipped = 0; /* rows for the whole section */
    for (size_t i = 0; i < res->nscenarios; i++) {
        const gp_gate_scenario *s = &res->scenarios[i];
        size_t nt = 0, nmiss = 0, nnew = 0;
        const gp_gate_item *its = res->items + s->first_item;
        for (size_t k = 0; k < s->nitems; k++) {
            const gp_gate_item *it = &its[k];
            if (!it->tensor)
                continue;
            nt += is_metric_change(it);
            nmiss += it->status == GP_GATE_MISSING || it->status == GP_GATE_NOT_NUMBER;
            nnew += it->status == GP_GATE_NEW;
        }
        if (!nt && !nmiss && !nnew)
            continue;
        if (!budget) {
            skipped += nt + nmiss + nnew;
            continue;
        }
        anyt = 1;
        gp_buf_puts(f, "<details><summary>");
        html(f, s->name);
        gp_buf_printf(f, ": %zu tensor metric%s changed, %zu problem%s, %zu new tensor%s</summary>\n\n", nt,
                nt == 1 ? "" : "s", nmiss, nmiss == 1 ? "" : "s", nnew, nnew == 1 ? "" : "s");
        if (nt) {
            gp_buf_puts(f, "| tensor | metric | baseline | current | delta | |\n|---|---|---|---|---|---|\n");
            for (size_t k = 0; k < s->nitems; k++)
                if (its[k].tensor && is_metric_change(&its[k])) {
                    if (!budget) {
                        skipped++;
                        continue;
                    }
                    change_row(f, &its[k], 1, 0);
                    budget--;
                }
            if (nmiss || nnew)
                gp_buf_puts(f, "\n");
        }
        for (size_t k = 0; k < s->nitems; k++) {
            const gp_gate_item *it = &its[k];
            if (!it->tensor || !(it->status == GP_GATE_MISSING || it->status == GP_GATE_NOT_NUMBER ||
                                 it->status == GP_GATE_NEW))
                continue;
            if (!budget) {
                skipped++;
                continue;
            }
            budget--;
            if (it->status != GP_GATE_NEW)
                problem_line(f, it);
            else if (it->status == GP_GATE_NEW) {
                gp_buf_puts(f, "- tensor ");
                md(f, it->tensor);
                gp_buf_puts(f, ": only in the current run (not gated)\n");
            }
        }
        gp_buf_puts(f, "\n</details>\n\n");
    }
    if (!anyt)
        gp_buf_puts(f, "No per-tensor metric changed beyond its tolerance.\n\n");
    if (skipped)
        gp_buf_printf(f, "… and %zu more per-tensor findings (the gate's output lists them all).\n\n", skipped);
    gp_buf_puts(f, "<sub>▲ worse, ▼ better, beyond max(abs, rel × |baseline|); "
          "grad_norm_ratio compares |v − 1|, min_loss_scale: smaller is worse.</sub>\n");
    return gp_buf_take(f);
}
