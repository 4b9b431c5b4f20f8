/* gp_monitor_report.c — the Markdown and HTML pages of a monitor log (see the header).
 * Values are held as doubles per (tensor, metric, step): memory follows the log's size.
 * Nothing here judges: verdicts, mechanisms and alerts are the log's, written by the
 * runner through the monitor; this file only orders and draws them. */
#include "gp_monitor_report.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/gp_buf.h"
#include "gp_json_in.h"

const char *const gp_monitor_file_names[GP_MONITOR_NFILES] = {"monitor.md", "monitor.html"};

#define FORMAT "gradprec-monitor/1"
#define NMET 11
#define CHART_TENSORS 8 /* tensors drawn per chart beside the overall line: the worst ones */

/* The metrics of a record, in the order the pages show them. Worse is larger, except
 * grad_norm_ratio (farther from 1) and min_loss_scale (smaller), as in gate.md. */
enum { WORSE_LARGER, WORSE_FROM_ONE, WORSE_SMALLER };
static const struct {
    const char *name;
    int worse;
} METS[NMET] = {
    {"stale_update_frac", WORSE_LARGER},     {"underflow_frac", WORSE_LARGER},
    {"absorbed_frac", WORSE_LARGER},         {"normalization_rel_err", WORSE_LARGER},
    {"state_underflow_frac", WORSE_LARGER},  {"grad_norm_ratio", WORSE_FROM_ONE},
    {"grad_rel_err_fullbatch", WORSE_LARGER}, {"weight_rel_err", WORSE_LARGER},
    {"skipped_steps", WORSE_LARGER},         {"min_loss_scale", WORSE_SMALLER},
    {"twin_mismatch_count", WORSE_LARGER},
};

typedef struct {
    char *name;          /* NULL for the overall series (index 0) */
    double *v[NMET];     /* per metric, one value per step (NaN: absent or undefined) */
} series;

typedef struct {
    json_int_t *step;
    char **verdict, **dominant;
    double *scale;       /* the loss scale, NaN without a scaler */
    size_t n, cap;
    series *t;           /* t[0]: overall; then tensors in first-seen order */
    size_t nt, tcap;
    gp_buf alerts_md, alerts_html;
    size_t nalerts;
} mlog;

static void md_esc(gp_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '|' || *s == '\\' || *s == '`' || *s == '*' || *s == '_')
            gp_buf_putc(b, '\\');
        gp_buf_putc(b, *s == '\n' ? ' ' : *s);
    }
}

static void html_esc(gp_buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': gp_buf_puts(b, "&lt;"); break;
        case '>': gp_buf_puts(b, "&gt;"); break;
        case '&': gp_buf_puts(b, "&amp;"); break;
        case '"': gp_buf_puts(b, "&quot;"); break;
        default: gp_buf_putc(b, *s);
        }
    }
}

static void put_num(gp_buf *b, double v)
{
    if (isnan(v))
        gp_buf_puts(b, "\xe2\x80\x94"); /* an em dash: absent or undefined */
    else
        gp_buf_printf(b, "%.6g", v);
}

static double badness(int m, double v)
{
    switch (METS[m].worse) {
    case WORSE_FROM_ONE: return fabs(v - 1.0);
    case WORSE_SMALLER: return -v;
    default: return v;
    }
}

static int grow_steps(mlog *L)
{
    if (L->n < L->cap)
        return 0;
    size_t cap = L->cap ? 2 * L->cap : 64;
    json_int_t *st = realloc(L->step, cap * sizeof *st);
    if (st)
        L->step = st;
    char **vd = realloc(L->verdict, cap * sizeof *vd);
    if (vd)
        L->verdict = vd;
    char **dm = realloc(L->dominant, cap * sizeof *dm);
    if (dm)
        L->dominant = dm;
    double *sc = realloc(L->scale, cap * sizeof *sc);
    if (sc)
        L->scale = sc;
    if (!st || !vd || !dm || !sc)
        return -1;
    for (size_t t = 0; t < L->nt; t++)
        for (int m = 0; m < NMET; m++) {
            double *v = realloc(L->t[t].v[m], cap * sizeof *v);
            if (!v)
                return -1;
            L->t[t].v[m] = v;
        }
    L->cap = cap;
    return 0;
}

/* The series of tensor `name` (NULL: overall), added (NaN for the steps before) when new. */
static series *find_series(mlog *L, const char *name)
{
    for (size_t t = 0; t < L->nt; t++)
        if ((name == NULL && L->t[t].name == NULL) || (name && L->t[t].name && strcmp(L->t[t].name, name) == 0))
            return &L->t[t];
    if (L->nt == L->tcap) {
        size_t cap = L->tcap ? 2 * L->tcap : 16;
        series *t = realloc(L->t, cap * sizeof *t);
        if (!t)
            return NULL;
        L->t = t;
        L->tcap = cap;
    }
    series *s = &L->t[L->nt];
    memset(s, 0, sizeof *s);
    if (name && !(s->name = strdup(name)))
        return NULL;
    L->nt++;
    for (int m = 0; m < NMET; m++) {
        if (!(s->v[m] = malloc((L->cap ? L->cap : 1) * sizeof(double))))
            return NULL;
        for (size_t i = 0; i < L->cap; i++)
            s->v[m][i] = NAN;
    }
    return s;
}

static double num_or_nan(const json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int put_metrics(series *s, size_t i, const json_t *metrics)
{
    for (int m = 0; m < NMET; m++)
        s->v[m][i] = num_or_nan(json_object_get(metrics, METS[m].name));
    return 0;
}

static const char *str_or(const json_t *v, const char *dflt)
{
    return json_is_string(v) ? json_string_value(v) : dflt;
}

static void add_alerts(mlog *L, const json_t *alerts)
{
    size_t k;
    const json_t *a;
    json_array_foreach(alerts, k, a) {
        const char *tensor = str_or(json_object_get(a, "tensor"), "(the step)");
        const char *metric = str_or(json_object_get(a, "metric"), "?");
        const char *mech = str_or(json_object_get(a, "mechanism"), "?");
        double v = num_or_nan(json_object_get(a, "value"));
        double lo = num_or_nan(json_object_get(a, "min")), hi = num_or_nan(json_object_get(a, "max"));
        json_int_t step = json_integer_value(json_object_get(a, "step"));
        gp_buf_printf(&L->alerts_md, "| %" JSON_INTEGER_FORMAT " | ", step);
        md_esc(&L->alerts_md, metric);
        gp_buf_puts(&L->alerts_md, " | ");
        md_esc(&L->alerts_md, tensor);
        gp_buf_puts(&L->alerts_md, " | ");
        put_num(&L->alerts_md, v);
        gp_buf_puts(&L->alerts_md, " | ");
        put_num(&L->alerts_md, lo);
        gp_buf_puts(&L->alerts_md, " | ");
        put_num(&L->alerts_md, hi);
        gp_buf_puts(&L->alerts_md, " | ");
        md_esc(&L->alerts_md, mech);
        gp_buf_puts(&L->alerts_md, " |\n");
        gp_buf_printf(&L->alerts_html, "<tr><td>%" JSON_INTEGER_FORMAT "</td><td>", step);
        html_esc(&L->alerts_html, metric);
        gp_buf_puts(&L->alerts_html, "</td><td>");
        html_esc(&L->alerts_html, tensor);
        gp_buf_puts(&L->alerts_html, "</td><td>");
        put_num(&L->alerts_html, v);
        gp_buf_puts(&L->alerts_html, "</td><td>");
        put_num(&L->alerts_html, lo);
        gp_buf_puts(&L->alerts_html, "</td><td>");
        put_num(&L->alerts_html, hi);
        gp_buf_puts(&L->alerts_html, "</td><td>");
        html_esc(&L->alerts_html, mech);
        gp_buf_puts(&L->alerts_html, "</td></tr>\n");
        L->nalerts++;
    }
}

/* One line: checked, then its values appended as step L->n. */
static int add_record(mlog *L, const json_t *r, const char *where, gp_error *err)
{
    if (!json_is_object(r))
        return gp_error_set(err, "%s: not a JSON object", where);
    const char *fmt = json_string_value(json_object_get(r, "format"));
    if (!fmt || strcmp(fmt, FORMAT) != 0)
        return gp_error_set(err, "%s: format is %s%s%s, not " FORMAT " (a gradprec.torch.monitor log)", where,
                            fmt ? "\"" : "", fmt ? fmt : "missing", fmt ? "\"" : "");
    const json_t *step = json_object_get(r, "step"), *metrics = json_object_get(r, "metrics");
    const json_t *tensors = json_object_get(r, "tensors");
    if (!json_is_integer(step) || json_integer_value(step) < 0)
        return gp_error_set(err, "%s: \"step\" is not an integer >= 0", where);
    if (L->n && json_integer_value(step) <= L->step[L->n - 1])
        return gp_error_set(err, "%s: step %" JSON_INTEGER_FORMAT " does not follow step %" JSON_INTEGER_FORMAT
                                 " (one monitor run per log)", where, json_integer_value(step), L->step[L->n - 1]);
    if (!json_is_object(metrics))
        return gp_error_set(err, "%s: \"metrics\" is not an object", where);
    if (!json_is_array(tensors))
        return gp_error_set(err, "%s: \"tensors\" is not an array", where);
    size_t k;
    const json_t *t;
    json_array_foreach(tensors, k, t) {
        if (!json_is_string(json_object_get(t, "name")) || !json_is_object(json_object_get(t, "metrics")))
            return gp_error_set(err, "%s: tensors[%zu] is not {name, metrics}", where, k);
    }
    if (grow_steps(L) != 0)
        return gp_error_set(err, "out of memory");
    size_t i = L->n;
    series *all = find_series(L, NULL);
    if (!all)
        return gp_error_set(err, "out of memory");
    L->step[i] = json_integer_value(step);
    L->verdict[i] = strdup(str_or(json_object_get(r, "verdict"), "?"));
    L->dominant[i] = strdup(str_or(json_object_get(r, "dominant_mechanism"), "?"));
    L->scale[i] = num_or_nan(json_object_get(r, "loss_scale"));
    L->n++;
    if (!L->verdict[i] || !L->dominant[i])
        return gp_error_set(err, "out of memory");
    for (size_t s = 0; s < L->nt; s++)
        for (int m = 0; m < NMET; m++)
            L->t[s].v[m][i] = NAN;
    put_metrics(all, i, metrics);
    json_array_foreach(tensors, k, t) {
        series *s = find_series(L, json_string_value(json_object_get(t, "name")));
        if (!s)
            return gp_error_set(err, "out of memory");
        put_metrics(s, i, json_object_get(t, "metrics"));
    }
    add_alerts(L, json_object_get(r, "alerts"));
    return 0;
}

static void mlog_free(mlog *L)
{
    for (size_t i = 0; i < L->n; i++) {
        free(L->verdict[i]);
        free(L->dominant[i]);
    }
    free(L->step);
    free(L->verdict);
    free(L->dominant);
    free(L->scale);
    for (size_t t = 0; t < L->nt; t++) {
        free(L->t[t].name);
        for (int m = 0; m < NMET; m++)
            free(L->t[t].v[m]);
    }
    free(L->t);
    free(gp_buf_take(&L->alerts_md));
    free(gp_buf_take(&L->alerts_html));
}

/* The worst value of a series over the steps (NaN when it has none) and its index. */
static double worst(const mlog *L, size_t t, int m, size_t *at)
{
    double w = NAN;
    *at = 0;
    for (size_t i = 0; i < L->n; i++) {
        double v = L->t[t].v[m][i];
        if (!isnan(v) && (isnan(w) || badness(m, v) > badness(m, w))) {
            w = v;
            *at = i;
        }
    }
    return w;
}

static int sort_m;
static const mlog *sort_L;

/* Tensors worst first; those with no value last; ties by name (the same order every run). */
static int by_worst(const void *a, const void *b)
{
    size_t ta = *(const size_t *)a, tb = *(const size_t *)b, ia, ib;
    double wa = worst(sort_L, ta, sort_m, &ia), wb = worst(sort_L, tb, sort_m, &ib);
    if (isnan(wa) != isnan(wb))
        return isnan(wa) ? 1 : -1;
    if (!isnan(wa)) {
        double ba = badness(sort_m, wa), bb = badness(sort_m, wb);
        if (ba != bb)
            return ba > bb ? -1 : 1;
    }
    return strcmp(sort_L->t[ta].name, sort_L->t[tb].name);
}

/* The tensors (indices 1..nt-1) ordered worst first for metric m. */
static size_t *order(const mlog *L, int m)
{
    size_t *o = malloc((L->nt ? L->nt : 1) * sizeof *o);
    if (!o)
        return NULL;
    for (size_t t = 1; t < L->nt; t++)
        o[t - 1] = t;
    sort_m = m;
    sort_L = L;
    if (L->nt > 2)
        qsort(o, L->nt - 1, sizeof *o, by_worst);
    return o;
}

static void md_metric(gp_buf *b, const mlog *L, int m, const size_t *o)
{
    gp_buf_printf(b, "\n## %s\n\n| tensor | worst | at step | last |\n|---|---|---|---|\n", METS[m].name);
    for (size_t k = 0; k < L->nt; k++) {
        size_t t = k == 0 ? 0 : o[k - 1], at;
        double w = worst(L, t, m, &at);
        gp_buf_puts(b, "| ");
        if (t == 0)
            gp_buf_puts(b, "**overall**");
        else
            md_esc(b, L->t[t].name);
        gp_buf_puts(b, " | ");
        put_num(b, w);
        if (isnan(w))
            gp_buf_puts(b, " | \xe2\x80\x94 | ");
        else
            gp_buf_printf(b, " | %" JSON_INTEGER_FORMAT " | ", L->step[at]);
        put_num(b, L->t[t].v[m][L->n - 1]);
        gp_buf_puts(b, " |\n");
    }
}

static const char *const COLOURS[CHART_TENSORS] = {"#d62728", "#1f77b4", "#ff7f0e", "#2ca02c",
                                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};
#define W 720.0
#define H 220.0
#define ML 70.0
#define MR 10.0
#define MT 10.0
#define MB 30.0

static void svg_line(gp_buf *b, const mlog *L, size_t t, int m, double y0, double y1, const char *colour,
                     double width)
{
    double s0 = (double)L->step[0], s1 = (double)L->step[L->n - 1];
    int open = 0;
    for (size_t i = 0; i < L->n; i++) {
        double v = L->t[t].v[m][i];
        if (isnan(v)) {
            if (open)
                gp_buf_puts(b, "\"/>\n");
            open = 0;
            continue;
        }
        double x = ML + (s1 > s0 ? ((double)L->step[i] - s0) / (s1 - s0) : 0.5) * (W - ML - MR);
        double y = MT + (1.0 - (v - y0) / (y1 - y0)) * (H - MT - MB);
        if (!open)
            gp_buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" points=\"", colour, width);
        gp_buf_printf(b, "%s%.1f,%.1f", open ? " " : "", x, y);
        open = 1;
    }
    if (open)
        gp_buf_puts(b, "\"/>\n");
    if (L->n == 1 && !isnan(L->t[t].v[m][0])) /* a single step: a dot */
        gp_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", ML + 0.5 * (W - ML - MR),
                      MT + (1.0 - (L->t[t].v[m][0] - y0) / (y1 - y0)) * (H - MT - MB), colour);
}

static void html_metric(gp_buf *b, const mlog *L, int m, const size_t *o)
{
    size_t shown = L->nt - 1 < CHART_TENSORS ? L->nt - 1 : CHART_TENSORS;
    double y0 = NAN, y1 = NAN;
    for (size_t k = 0; k <= shown; k++) {
        size_t t = k == 0 ? 0 : o[k - 1];
        for (size_t i = 0; i < L->n; i++) {
            double v = L->t[t].v[m][i];
            if (isnan(v) || isinf(v))
                continue;
            if (isnan(y0) || v < y0)
                y0 = v;
            if (isnan(y1) || v > y1)
                y1 = v;
        }
    }
    gp_buf_printf(b, "<h2 id=\"%s\">%s</h2>\n", METS[m].name, METS[m].name);
    if (isnan(y0)) {
        gp_buf_puts(b, "<p>No finite value in the log.</p>\n");
    } else {
        if (y1 == y0) {
            double d = y0 == 0.0 ? 1.0 : fabs(y0) * 0.1;
            y0 -= d;
            y1 += d;
        }
        gp_buf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                         "viewBox=\"0 0 %.0f %.0f\" role=\"img\">\n", W, H, W, H);
        gp_buf_printf(b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\" "
                         "stroke=\"#999\"/>\n", ML, MT, W - ML - MR, H - MT - MB);
        gp_buf_printf(b, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.4g</text>\n", ML - 4, MT + 10, y1);
        gp_buf_printf(b, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.4g</text>\n", ML - 4, H - MB, y0);
        gp_buf_printf(b, "<text x=\"%.0f\" y=\"%.0f\">step %" JSON_INTEGER_FORMAT "</text>\n", ML, H - 8,
                      L->step[0]);
        gp_buf_printf(b, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">step %" JSON_INTEGER_FORMAT "</text>\n",
                      W - MR, H - 8, L->step[L->n - 1]);
        for (size_t k = shown; k >= 1; k--)
            svg_line(b, L, o[k - 1], m, y0, y1, COLOURS[k - 1], 1.5);
        svg_line(b, L, 0, m, y0, y1, "#000", 2.5);
        gp_buf_puts(b, "</svg>\n");
    }
    gp_buf_puts(b, "<table>\n<tr><th></th><th>tensor</th><th>worst</th><th>at step</th><th>last</th></tr>\n");
    for (size_t k = 0; k < L->nt; k++) {
        size_t t = k == 0 ? 0 : o[k - 1], at;
        double w = worst(L, t, m, &at);
        const char *c = k == 0 ? "#000" : k <= shown ? COLOURS[k - 1] : NULL;
        gp_buf_puts(b, "<tr><td>");
        if (c)
            gp_buf_printf(b, "<span style=\"color:%s\">\xe2\x96\xa0</span>", c);
        gp_buf_puts(b, "</td><td>");
        if (t == 0)
            gp_buf_puts(b, "<b>overall</b>");
        else
            html_esc(b, L->t[t].name);
        gp_buf_puts(b, "</td><td>");
        put_num(b, w);
        gp_buf_puts(b, "</td><td>");
        if (isnan(w))
            gp_buf_puts(b, "\xe2\x80\x94");
        else
            gp_buf_printf(b, "%" JSON_INTEGER_FORMAT, L->step[at]);
        gp_buf_puts(b, "</td><td>");
        put_num(b, L->t[t].v[m][L->n - 1]);
        gp_buf_puts(b, "</td></tr>\n");
    }
    gp_buf_puts(b, "</table>\n");
}

static void steps_tables(gp_buf *md, gp_buf *html, const mlog *L)
{
    static const int cols[] = {0, 1, 2, 3, 5};
    gp_buf_puts(md, "\n## Steps\n\n| step | verdict | mechanism |");
    gp_buf_puts(html, "<h2>Steps</h2>\n<table>\n<tr><th>step</th><th>verdict</th><th>mechanism</th>");
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
        gp_buf_printf(md, " %s |", METS[cols[c]].name);
        gp_buf_printf(html, "<th>%s</th>", METS[cols[c]].name);
    }
    gp_buf_puts(md, " loss scale |\n|---|---|---|---|---|---|---|---|---|\n");
    gp_buf_puts(html, "<th>loss scale</th></tr>\n");
    for (size_t i = 0; i < L->n; i++) {
        gp_buf_printf(md, "| %" JSON_INTEGER_FORMAT " | ", L->step[i]);
        md_esc(md, L->verdict[i]);
        gp_buf_puts(md, " | ");
        md_esc(md, L->dominant[i]);
        gp_buf_printf(html, "<tr class=\"%s\"><td>%" JSON_INTEGER_FORMAT "</td><td>",
                      strcmp(L->verdict[i], "fail") == 0 ? "fail" : "ok", L->step[i]);
        html_esc(html, L->verdict[i]);
        gp_buf_puts(html, "</td><td>");
        html_esc(html, L->dominant[i]);
        gp_buf_puts(html, "</td>");
        for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
            gp_buf_puts(md, " | ");
            put_num(md, L->t[0].v[cols[c]][i]);
            gp_buf_puts(html, "<td>");
            put_num(html, L->t[0].v[cols[c]][i]);
            gp_buf_puts(html, "</td>");
        }
        gp_buf_puts(md, " | ");
        put_num(md, L->scale[i]);
        gp_buf_puts(md, " |\n");
        gp_buf_puts(html, "<td>");
        put_num(html, L->scale[i]);
        gp_buf_puts(html, "</td></tr>\n");
    }
    gp_buf_puts(html, "</table>\n");
}

static int render(const mlog *L, const char *name, char *out[GP_MONITOR_NFILES], gp_error *err)
{
    gp_buf md = GP_BUF_INIT, html = GP_BUF_INIT;
    size_t fails = 0;
    for (size_t i = 0; i < L->n; i++)
        fails += strcmp(L->verdict[i], "fail") == 0;
    gp_buf_puts(&md, "# gradprec monitor: ");
    md_esc(&md, name);
    gp_buf_printf(&md, "\n\n%zu monitored steps (step %" JSON_INTEGER_FORMAT " to %" JSON_INTEGER_FORMAT
                       "), %zu tensors, %zu failed their thresholds, %zu alerts. Each metric against the step, "
                       "overall and per tensor, tensors worst first (docs/monitor.md).\n",
                  L->n, L->step[0], L->step[L->n - 1], L->nt - 1, fails, L->nalerts);
    gp_buf_puts(&html, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                       "<title>gradprec monitor: ");
    html_esc(&html, name);
    gp_buf_puts(&html, "</title>\n<style>\nbody{font-family:sans-serif;margin:1.5em;max-width:60em}"
                       "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;"
                       "padding:2px 6px;text-align:left}tr.fail td{background:#fde0e0}svg text{font-size:11px}\n"
                       "</style>\n</head>\n<body>\n<h1>gradprec monitor: ");
    html_esc(&html, name);
    gp_buf_printf(&html, "</h1>\n<p>%zu monitored steps (step %" JSON_INTEGER_FORMAT " to %" JSON_INTEGER_FORMAT
                         "), %zu tensors, %zu failed their thresholds, %zu alerts. Each metric against the step: "
                         "overall in black, the %d worst tensors in colour; the tables list every tensor, worst "
                         "first.</p>\n<p>",
                  L->n, L->step[0], L->step[L->n - 1], L->nt - 1, fails, L->nalerts, CHART_TENSORS);
    for (int m = 0; m < NMET; m++)
        gp_buf_printf(&html, "%s<a href=\"#%s\">%s</a>", m ? " \xc2\xb7 " : "", METS[m].name, METS[m].name);
    gp_buf_puts(&html, "</p>\n");
    gp_buf_puts(&md, "\n## Alerts\n\n");
    gp_buf_puts(&html, "<h2>Alerts</h2>\n");
    if (L->nalerts) {
        gp_buf_puts(&md, "| step | metric | tensor | value | min | max | mechanism |\n|---|---|---|---|---|---|---|\n");
        gp_buf_puts(&md, L->alerts_md.s ? L->alerts_md.s : "");
        gp_buf_puts(&html, "<table>\n<tr><th>step</th><th>metric</th><th>tensor</th><th>value</th><th>min</th>"
                           "<th>max</th><th>mechanism</th></tr>\n");
        gp_buf_puts(&html, L->alerts_html.s ? L->alerts_html.s : "");
        gp_buf_puts(&html, "</table>\n");
    } else {
        gp_buf_puts(&md, "None.\n");
        gp_buf_puts(&html, "<p>None.</p>\n");
    }
    steps_tables(&md, &html, L);
    for (int m = 0; m < NMET; m++) {
        size_t *o = order(L, m);
        if (!o) {
            free(gp_buf_take(&md));
            free(gp_buf_take(&html));
            return gp_error_set(err, "out of memory");
        }
        md_metric(&md, L, m, o);
        html_metric(&html, L, m, o);
        free(o);
    }
    gp_buf_puts(&html, "</body>\n</html>\n");
    out[0] = gp_buf_take(&md);
    out[1] = gp_buf_take(&html);
    if (!out[0] || !out[1] || L->alerts_md.oom || L->alerts_html.oom) {
        free(out[0]);
        free(out[1]);
        out[0] = out[1] = NULL;
        return gp_error_set(err, "out of memory");
    }
    return 0;
}

int gp_monitor_report_render(const char *text, size_t len, const char *name, char *out[GP_MONITOR_NFILES],
                             gp_error *err)
{
    mlog L;
    memset(&L, 0, sizeof L);
    out[0] = out[1] = NULL;
    int rc = 0;
    size_t line = 0;
    for (size_t pos = 0; pos < len && rc == 0;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        line++;
        size_t a = pos;
        while (a < end && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r'))
            a++;
        if (a < end) {
            char where[512];
            snprintf(where, sizeof where, "%.480s:%zu", name, line);
            json_t *r = gp_json_parse(text + pos, end - pos, JSON_REJECT_DUPLICATES, where, err);
            if (!r)
                rc = -1;
            else {
                rc = add_record(&L, r, where, err);
                json_decref(r);
            }
        }
        pos = end + 1;
    }
    if (rc == 0 && L.n == 0)
        rc = gp_error_set(err, "%s: no monitored step in the log", name);
    if (rc == 0)
        rc = render(&L, name, out, err);
    mlog_free(&L);
    return rc;
}
