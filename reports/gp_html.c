/* gp_html.c — see gp_html.h. The page is built in three layers:
 *   1. a text buffer with HTML escaping and the report's value formatting (%.3g;
 *      "inf"/"-inf"/"nan" strings shown as text, never charted);
 *   2. a small SVG layer: scales (linear or log10) with their ticks, axes, polylines,
 *      bars, vertical marker lines and a legend — every chart is made of these;
 *   3. the page: header, summary table, the four charts (three of them are the same
 *      multi-series line chart), per-scenario details.
 * No scripts, no external resources, no timestamps: the same report gives the same
 * bytes. */
#include "gp_html.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/gp_buf.h"
#include "../kernels/gp_names.h"
#include "../kernels/arith/gp_format.h"

/* ======================================================================== */
/* 1. Text buffer, escaping, values                                          */
/* ======================================================================== */

/* Text as HTML (element content and attribute values alike). */
static void sb_esc(gp_buf *b, const char *s)
{
    for (const char *p = s; *p; p++) {
        switch (*p) {
        case '&': gp_buf_puts(b, "&amp;"); break;
        case '<': gp_buf_puts(b, "&lt;"); break;
        case '>': gp_buf_puts(b, "&gt;"); break;
        case '"': gp_buf_puts(b, "&quot;"); break;
        case '\'': gp_buf_puts(b, "&#39;"); break;
        default: gp_buf_put(b, p, 1);
        }
    }
}

/* Escaped, with a line-break opportunity after each '_' (long metric names in
 * table headings). */
static void sb_esc_wbr(gp_buf *b, const char *s)
{
    char one[2] = {0, 0};
    for (const char *p = s; *p; p++) {
        one[0] = *p;
        sb_esc(b, one);
        if (*p == '_')
            gp_buf_puts(b, "<wbr>");
    }
}

/* At most `max` bytes of s, cut at a UTF-8 character boundary, with "…" if cut. */
static void sb_esc_trunc(gp_buf *b, const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max) {
        sb_esc(b, s);
        return;
    }
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        max--;
    char *cut = malloc(max + 1);
    if (!cut) {
        b->oom = 1;
        return;
    }
    memcpy(cut, s, max);
    cut[max] = '\0';
    sb_esc(b, cut);
    gp_buf_puts(b, "\xe2\x80\xa6");
    free(cut);
}

static const char *fmt_g(double v, char buf[32])
{
    snprintf(buf, 32, "%.3g", v);
    return buf;
}

/* A value as the page shows it: reals %.3g, integers exactly, strings (including
 * "inf"/"nan") escaped, null as a dash. */
static void put_value(gp_buf *b, const json_t *v)
{
    char buf[32];
    if (json_is_integer(v))
        gp_buf_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        gp_buf_puts(b, fmt_g(json_real_value(v), buf));
    else if (json_is_string(v))
        sb_esc(b, json_string_value(v));
    else if (json_is_true(v))
        gp_buf_puts(b, "true");
    else if (json_is_false(v))
        gp_buf_puts(b, "false");
    else
        gp_buf_puts(b, "\xe2\x80\x94"); /* missing or null: an em dash */
}

/* A finite number to chart, or 0 (strings "inf"/"nan", missing, anything else). */
static int chart_num(const json_t *v, double *out)
{
    if (!json_is_number(v))
        return 0;
    double x = json_number_value(v);
    if (!isfinite(x))
        return 0;
    *out = x;
    return 1;
}

static const char *str_at(const json_t *obj, const char *key, const char *fallback)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : fallback;
}

static const char *sc_name(const json_t *sc)
{
    return str_at(sc, "name", "(unnamed)");
}

static const char *sc_precision(const json_t *sc, const char *which)
{
    return str_at(json_object_get(json_object_get(sc, "config"), "precision"), which, "?");
}

static const char *verdict_class(const char *v)
{
    if (strcmp(v, "pass") == 0 || strcmp(v, "warn") == 0 || strcmp(v, "fail") == 0)
        return v;
    return "unknown";
}

static void put_badge(gp_buf *b, const char *verdict)
{
    gp_buf_printf(b, "<span class=\"badge %s\">", verdict_class(verdict));
    sb_esc(b, verdict);
    gp_buf_puts(b, "</span>");
}

/* "2^-24" when v is an exact power of two, else "". */
static const char *pow2_text(double v, char buf[32])
{
    int e;
    double m = frexp(v, &e);
    if (v > 0 && m == 0.5)
        snprintf(buf, 32, "2^%d", e - 1);
    else
        buf[0] = '\0';
    return buf;
}

/* ======================================================================== */
/* 2. SVG layer                                                              */
/* ======================================================================== */

typedef struct {
    int log;       /* 1: log10 of the value; lo > 0 */
    int integer;   /* ticks only at integers (step axes) */
    double lo, hi; /* domain */
    double p0, p1; /* pixels lo and hi map to */
    double gap;    /* the least pixels between two tick labels */
} scale;

static double sc_pos(const scale *s, double v)
{
    double a, z, t;
    if (s->log) {
        a = log10(s->lo);
        z = log10(s->hi);
        t = v > 0 ? (log10(v) - a) / (z - a) : 0;
    } else
        t = (v - s->lo) / (s->hi - s->lo);
    if (t < 0)
        t = 0;
    if (t > 1)
        t = 1;
    return s->p0 + t * (s->p1 - s->p0);
}

/* 1, 2 or 5 times a power of ten, near raw. */
static double nice_step(double raw)
{
    double mag = pow(10, floor(log10(raw)));
    double r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

/* A linear domain [0 or below, above max] with round ends. */
static void lin_domain(scale *s, double min, double max)
{
    if (min > 0)
        min = 0;
    if (max <= min)
        max = min + 1;
    double step = nice_step((max - min) / 5);
    s->log = 0;
    s->lo = floor(min / step) * step;
    s->hi = ceil(max / step) * step;
}

/* A log domain from the decade below minpos to the decade above max. */
static void log_domain(scale *s, double minpos, double max)
{
    s->log = 1;
    s->lo = pow(10, floor(log10(minpos) + 1e-9));
    s->hi = pow(10, ceil(log10(max) - 1e-9));
    if (s->hi <= s->lo)
        s->hi = s->lo * 10;
}

#define MAX_TICKS 40

/* The major ticks of a scale (ascending), as many as fit `gap` pixels apart; returns
 * how many. Log: 1, 2, 5 times the powers of ten when they fit, else the decades
 * (every k-th when there are many). Linear: multiples of a 1-2-5 step. */
static int sc_ticks(const scale *s, double *t)
{
    int n = 0;
    int fit = (int)(fabs(s->p1 - s->p0) / (s->gap > 0 ? s->gap : 50));
    if (fit < 2)
        fit = 2;
    if (fit > MAX_TICKS)
        fit = MAX_TICKS;
    if (s->log) {
        int d0 = (int)ceil(log10(s->lo) - 1e-9), d1 = (int)floor(log10(s->hi) + 1e-9);
        static const double mult[3] = {1, 2, 5};
        for (int d = d0 - 1; d <= d1 && n <= fit; d++)
            for (int m = 0; m < 3 && n <= fit; m++) {
                double v = mult[m] * pow(10, d);
                if (v >= s->lo * (1 - 1e-9) && v <= s->hi * (1 + 1e-9))
                    t[n++] = v;
            }
        if (n > fit || n < 2) {
            int ndec = d1 - d0 + 1, every = (ndec + fit - 1) / fit;
            n = 0;
            for (int d = d0; d <= d1 && n < MAX_TICKS; d++)
                if (((d % every) + every) % every == 0)
                    t[n++] = pow(10, d);
        }
    } else {
        double step = nice_step((s->hi - s->lo) / fit);
        if (s->integer && step < 1)
            step = 1;
        for (double v = ceil(s->lo / step - 1e-9) * step; v <= s->hi + step * 1e-9 && n < MAX_TICKS; v += step)
            t[n++] = fabs(v) < step * 1e-9 ? 0 : v;
    }
    return n;
}

typedef enum { TICK_NUM, TICK_EXP } tick_style;

/* EXP: "1e-8", "2e-3", "1". NUM: plain numbers ("1024", "0.25"), and the EXP form
 * outside [1e-3, 1e4). */
static const char *tick_label(double v, tick_style st, char buf[32])
{
    double a = fabs(v);
    if (v != 0 && (st == TICK_EXP || a < 1e-3 || a >= 1e4)) {
        int d = (int)floor(log10(a) + 1e-9);
        double m = v / pow(10, d);
        if (d == 0)
            snprintf(buf, 32, "%.3g", m);
        else
            snprintf(buf, 32, "%.3ge%d", m, d);
    } else
        snprintf(buf, 32, "%.6g", v);
    return buf;
}

typedef struct {
    double x, y, w, h; /* plot area, pixels */
    scale xs, ys;
} plot;

typedef struct {
    char color[40];
    const char *dash; /* stroke-dasharray, or NULL for solid */
    double width;
} stroke;

static void put_stroke(gp_buf *b, const stroke *st)
{
    gp_buf_printf(b, " stroke=\"%s\" stroke-width=\"%.1f\"", st->color, st->width);
    if (st->dash)
        gp_buf_printf(b, " stroke-dasharray=\"%s\"", st->dash);
}

/* Opens a chart: an <svg> with an accessible <title> and a visible title line. */
static void svg_open(gp_buf *b, int w, int h, const char *title)
{
    gp_buf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"%d\" height=\"%d\" "
                 "viewBox=\"0 0 %d %d\" role=\"img\"><title>", w, h, w, h);
    sb_esc(b, title);
    gp_buf_puts(b, "</title>\n<rect class=\"bg\" x=\"0\" y=\"0\" width=\"100%\" height=\"100%\"/>\n"
               "<text class=\"title\" x=\"12\" y=\"22\">");
    sb_esc_trunc(b, title, 110);
    gp_buf_puts(b, "</text>\n");
}

static void svg_close(gp_buf *b)
{
    gp_buf_puts(b, "</svg>\n");
}

/* The frame, grid, ticks, tick labels and the two axis labels of a plot. */
static void svg_axes(gp_buf *b, const plot *p, const char *xlabel, tick_style xst, const char *ylabel,
                     tick_style yst)
{
    double t[MAX_TICKS];
    char buf[32];
    int n = sc_ticks(&p->xs, t);
    gp_buf_puts(b, "<g class=\"axis x\">");
    for (int i = 0; i < n; i++) {
        double X = sc_pos(&p->xs, t[i]);
        gp_buf_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", X, p->y, X,
                  p->y + p->h);
        gp_buf_printf(b, "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", X, p->y + p->h,
                  X, p->y + p->h + 5);
        gp_buf_printf(b, "<text class=\"ticklabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>", X,
                  p->y + p->h + 18, tick_label(t[i], xst, buf));
    }
    gp_buf_printf(b, "<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", p->x + p->w / 2,
              p->y + p->h + 38);
    sb_esc(b, xlabel);
    gp_buf_puts(b, "</text></g>\n<g class=\"axis y\">");
    n = sc_ticks(&p->ys, t);
    for (int i = 0; i < n; i++) {
        double Y = sc_pos(&p->ys, t[i]);
        gp_buf_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", p->x, Y,
                  p->x + p->w, Y);
        gp_buf_printf(b, "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", p->x - 5, Y, p->x,
                  Y);
        gp_buf_printf(b, "<text class=\"ticklabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", p->x - 8,
                  Y + 4, tick_label(t[i], yst, buf));
    }
    double yx = p->x - 52, yy = p->y + p->h / 2;
    gp_buf_printf(b, "<text class=\"ylabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                 "transform=\"rotate(-90 %.1f %.1f)\">", yx, yy, yx, yy);
    sb_esc(b, ylabel);
    gp_buf_printf(b, "</text></g>\n<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
              p->x, p->y, p->w, p->h);
}

/* A polyline through the finite points; non-finite y breaks the line, values outside
 * the y domain are drawn on its edge (zeros on a log scale: the bottom edge). Dots on
 * the points when there are few. `tip` becomes the hover text. */
static void svg_polyline(gp_buf *b, const plot *p, const double *x, const double *y, int n, const stroke *st,
                         const char *tip)
{
    int open = 0;
    gp_buf_puts(b, "<g class=\"series\"><title>");
    sb_esc(b, tip);
    gp_buf_puts(b, "</title>");
    for (int i = 0; i < n; i++) {
        if (!isfinite(y[i])) {
            if (open)
                gp_buf_puts(b, "\"/>");
            open = 0;
            continue;
        }
        if (!open) {
            gp_buf_puts(b, "<polyline fill=\"none\"");
            put_stroke(b, st);
            gp_buf_puts(b, " points=\"");
            open = 1;
        } else
            gp_buf_puts(b, " ");
        gp_buf_printf(b, "%.1f,%.1f", sc_pos(&p->xs, x[i]), sc_pos(&p->ys, y[i]));
    }
    if (open)
        gp_buf_puts(b, "\"/>");
    if (n <= 16)
        for (int i = 0; i < n; i++)
            if (isfinite(y[i]))
                gp_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.6\" fill=\"%s\"/>", sc_pos(&p->xs, x[i]),
                          sc_pos(&p->ys, y[i]), st->color);
    gp_buf_puts(b, "</g>\n");
}

/* A bar over [x0, x1] from the bottom of the y domain to y. */
static void svg_bar(gp_buf *b, const plot *p, double x0, double x1, double y, const char *fill, const char *tip)
{
    double X0 = sc_pos(&p->xs, x0), X1 = sc_pos(&p->xs, x1);
    double Y = sc_pos(&p->ys, y), base = p->y + p->h;
    gp_buf_printf(b, "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>",
              X0 + 0.5, Y, X1 - X0 > 1.5 ? X1 - X0 - 1 : 0.5, base - Y, fill);
    sb_esc(b, tip);
    gp_buf_puts(b, "</title></rect>");
}

/* A vertical line across the plot at x. */
static void svg_vline(gp_buf *b, const plot *p, double x, const stroke *st)
{
    double X = sc_pos(&p->xs, x);
    gp_buf_printf(b, "<line class=\"marker\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"", X, p->y, X, p->y + p->h);
    put_stroke(b, st);
    gp_buf_puts(b, "/>\n");
}

typedef enum { LEG_LINE, LEG_BOX, LEG_HEAD } legend_kind;

typedef struct {
    legend_kind kind;
    stroke st;        /* LINE: its stroke; BOX/HEAD: st.color fills the swatch */
    char label[200];
} legend_item;

#define LEGEND_ROW 18

/* A legend, one item a row from (x, y); `chars` caps a label's length. Returns its
 * height in pixels. */
static double svg_legend(gp_buf *b, double x, double y, const legend_item *it, int n, size_t chars)
{
    gp_buf_puts(b, "<g class=\"legend\">");
    for (int i = 0; i < n; i++) {
        double Y = y + i * LEGEND_ROW;
        double tx; /* where the label starts: after the swatch */
        if (it[i].kind == LEG_LINE) {
            gp_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"", x + 6, Y + 9, x + 26, Y + 9);
            put_stroke(b, &it[i].st);
            gp_buf_puts(b, "/>");
            tx = x + 32;
        } else {
            double sx = x + (it[i].kind == LEG_HEAD ? 0 : 8); /* items indent under a heading */
            gp_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>", sx, Y + 3,
                      it[i].st.color);
            tx = sx + 18;
        }
        gp_buf_printf(b, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\">", it[i].kind == LEG_HEAD ? "leghead" : "legtext",
                  tx, Y + 13);
        sb_esc_trunc(b, it[i].label, chars);
        gp_buf_puts(b, "</text>");
    }
    gp_buf_puts(b, "</g>\n");
    return n * LEGEND_ROW;
}

/* Notes under a chart (already HTML). */
static void put_notes(gp_buf *b, const gp_buf *notes)
{
    if (notes->n)
        gp_buf_printf(b, "<figcaption>%s</figcaption>\n", notes->s);
}

/* ======================================================================== */
/* 3. Charts                                                                 */
/* ======================================================================== */

/* Colour families by accumulator dtype; unknown names get grey. */
static int dtype_hue(const char *name, int *sat)
{
    static const struct {
        const char *name;
        int hue, sat;
    } tab[] = {{"fp32", 212, 70}, {"bf16", 26, 85}, {"fp16", 350, 70}, {"fp8_e4m3", 280, 55}, {"fp8_e5m2", 160, 65}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(name, tab[i].name) == 0) {
            *sat = tab[i].sat;
            return tab[i].hue;
        }
    *sat = 0;
    return 0;
}

static const char *const series_dash[] = {NULL, "7 3", "2 2", "9 3 2 3", "4 4", "1 3"};
static const int series_light[] = {40, 28, 52, 62};

/* One line of a line chart: a scenario's array, coloured by its group (dtype). */
typedef struct {
    const char *name;
    const char *group;
    const json_t *values;
} series;

typedef struct {
    const char *title, *xlabel, *ylabel;
    int ylog;          /* 1: log y; 0: log y when the positive values span two decades */
    int xlog_above;    /* log x when the longest series is longer than this */
    const char *group_label; /* legend group heading, e.g. "accumulator" */
} line_spec;

#define MAX_POINTS 2000 /* points drawn a series at most */

/* A multi-series line chart over steps 1..K (errors, stale fractions, loss scales). */
static void line_chart(gp_buf *b, const line_spec *sp, const series *s, size_t n)
{
    size_t kmax = 0;
    long zeros = 0, nonfinite = 0, negative = 0;
    double minpos = INFINITY, max = -INFINITY, min = INFINITY;
    for (size_t i = 0; i < n; i++) {
        size_t k = json_array_size(s[i].values);
        if (k > kmax)
            kmax = k;
        for (size_t j = 0; j < k; j++) {
            double v;
            if (!chart_num(json_array_get(s[i].values, j), &v)) {
                nonfinite++;
                continue;
            }
            if (v > 0 && v < minpos)
                minpos = v;
            if (v > max)
                max = v;
            if (v < min)
                min = v;
            zeros += v == 0;
            negative += v < 0;
        }
    }
    /* groups in order of first appearance */
    const char **groups = calloc(n ? n : 1, sizeof *groups);
    size_t ngroups = 0;
    for (size_t i = 0; groups && i < n; i++) {
        size_t g = 0;
        while (g < ngroups && strcmp(groups[g], s[i].group) != 0)
            g++;
        if (g == ngroups)
            groups[ngroups++] = s[i].group;
    }
    legend_item *leg = calloc(n + ngroups, sizeof *leg);
    stroke *st = calloc(n ? n : 1, sizeof *st);
    double *xs = malloc(sizeof(double) * (kmax ? kmax : 1));
    double *ys = malloc(sizeof(double) * (kmax ? kmax : 1));
    if (!groups || !leg || !st || !xs || !ys) {
        b->oom = 1;
        goto done;
    }
    int rows = 0;
    for (size_t g = 0; g < ngroups; g++) {
        int sat, hue = dtype_hue(groups[g], &sat), j = 0;
        leg[rows].kind = LEG_HEAD;
        snprintf(leg[rows].st.color, sizeof leg[rows].st.color, "hsl(%d,%d%%,45%%)", hue, sat);
        snprintf(leg[rows].label, sizeof leg[rows].label, "%s %s", sp->group_label, groups[g]);
        rows++;
        for (size_t i = 0; i < n; i++)
            if (strcmp(s[i].group, groups[g]) == 0) {
                snprintf(st[i].color, sizeof st[i].color, "hsl(%d,%d%%,%d%%)", hue, sat,
                         series_light[j % (int)(sizeof series_light / sizeof series_light[0])]);
                st[i].dash = series_dash[j % (int)(sizeof series_dash / sizeof series_dash[0])];
                st[i].width = 1.8;
                leg[rows].kind = LEG_LINE;
                leg[rows].st = st[i];
                snprintf(leg[rows].label, sizeof leg[rows].label, "%s", s[i].name);
                rows++;
                j++;
            }
    }

    const double PX = 84, PY = 44, PW = 640, PH = 300, LX = PX + PW + 24;
    int H = (int)fmax(PY + PH + 52, PY + rows * LEGEND_ROW + 12);
    plot p = {PX, PY, PW, PH, {.integer = 1, .lo = 1, .hi = 2, .p0 = PX, .p1 = PX + PW, .gap = 56},
              {.lo = 0, .hi = 1, .p0 = PY + PH, .p1 = PY, .gap = 26}};
    int xlog = kmax > (size_t)sp->xlog_above;
    p.xs.log = xlog;
    p.xs.hi = kmax > 1 ? (double)kmax : 2;
    int ylog = negative == 0 && minpos < INFINITY &&
               (sp->ylog || (max / minpos >= 100));
    if (ylog) {
        log_domain(&p.ys, minpos, max);
        if (zeros)
            p.ys.lo /= 10; /* a decade of room so the zeros on the bottom edge stand apart */
    } else
        lin_domain(&p.ys, min < INFINITY ? min : 0, max > -INFINITY ? max : 1);
    char xlabel[200], ylabel[240];
    snprintf(xlabel, sizeof xlabel, "%s%s", sp->xlabel, xlog ? " (log scale)" : "");
    snprintf(ylabel, sizeof ylabel, "%s%s", sp->ylabel, ylog ? " (log)" : "");

    gp_buf_puts(b, "<figure class=\"chart wide\">\n");
    svg_open(b, 1100, H, sp->title);
    svg_axes(b, &p, xlabel, TICK_NUM, ylabel, ylog ? TICK_EXP : TICK_NUM);
    /* very long series: every stride-th step (and the last) */
    size_t stride = kmax > MAX_POINTS ? (kmax + MAX_POINTS - 1) / MAX_POINTS : 1;
    for (size_t i = 0; i < n; i++) {
        size_t k = json_array_size(s[i].values), m = 0;
        for (size_t j = 0; j < k; j += stride) {
            size_t at = j + stride < k ? j : k - 1; /* the last sample is the last step */
            xs[m] = (double)(at + 1);
            if (!chart_num(json_array_get(s[i].values, at), &ys[m]))
                ys[m] = NAN;
            else if (ylog && ys[m] <= 0)
                ys[m] = p.ys.lo;
            m++;
        }
        char tip[300];
        snprintf(tip, sizeof tip, "%s (%s %s)", s[i].name, sp->group_label, s[i].group);
        svg_polyline(b, &p, xs, ys, (int)m, &st[i], tip);
    }
    svg_legend(b, LX, PY, leg, rows, 44);
    svg_close(b);

    gp_buf notes = {NULL, 0, 0, 0};
    if (ylog && zeros)
        gp_buf_printf(&notes, "%ld value%s of exactly 0 drawn on the bottom edge (a log scale has no 0). ", zeros,
                  zeros == 1 ? "" : "s");
    if (nonfinite)
        gp_buf_printf(&notes, "%ld non-finite value%s (inf/nan) not drawn: the line breaks there. ", nonfinite,
                  nonfinite == 1 ? "" : "s");
    if (stride > 1)
        gp_buf_printf(&notes, "One step in %zu drawn (and the last). ", stride);
    put_notes(b, &notes);
    free(notes.s);
    b->oom |= notes.oom;
    gp_buf_puts(b, "</figure>\n");
done:
    free(groups);
    free(leg);
    free(st);
    free(xs);
    free(ys);
}

/* ---- sweeps: a metric against the first swept key ---- */

static const char *sweep_param(const json_t *sc, size_t a, const char *what)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(sc, "sweep"), "params"), a),
                                             what));
}

/* "k=v, k=v" of the swept keys of the axes after the first ("all" when there are none). */
static void sweep_others(const json_t *sc, char *out, size_t n)
{
    const json_t *params = json_object_get(json_object_get(sc, "sweep"), "params");
    size_t np = json_array_size(params), off = 0;
    out[0] = '\0';
    for (size_t a = 1; a < np && off < n; a++) {
        const char *k = sweep_param(sc, a, "key"), *v = sweep_param(sc, a, "value");
        if (json_integer_value(json_object_get(json_array_get(params, a), "axis")) == 0)
            continue; /* swept together with the x key */
        off += (size_t)snprintf(out + off, n - off, "%s%s=%s", off ? ", " : "", k ? k : "?", v ? v : "?");
    }
    if (!out[0])
        snprintf(out, n, "all");
}

static int sweep_is(const json_t *sc, const char *group)
{
    const char *g = json_string_value(json_object_get(json_object_get(sc, "sweep"), "group"));
    return g && (!group || strcmp(g, group) == 0);
}

/* One chart per sweep: grad_rel_err_fullbatch against the first swept key (numeric keys
 * on a numeric axis, log when all are positive and span a factor 8; other keys at
 * positions 1, 2, ...), one line per combination of the other keys. */
static void sweep_chart(gp_buf *b, const json_t *scs, size_t first)
{
    const json_t *g0 = json_array_get(scs, first);
    const char *group = json_string_value(json_object_get(json_object_get(g0, "sweep"), "group"));
    const char *xkey = sweep_param(g0, 0, "key");
    size_t nsc = json_array_size(scs), nm = 0, ncols = 0, i;
    size_t *mem = malloc(nsc * sizeof *mem), *col = malloc(nsc * sizeof *col);
    char(*cols)[256] = malloc(nsc * sizeof *cols);
    double *xv = malloc(nsc * sizeof *xv), *xs = malloc(nsc * sizeof *xs), *ys = malloc(nsc * sizeof *ys);
    legend_item *leg = calloc(nsc, sizeof *leg);
    if (!mem || !col || !cols || !xv || !xs || !ys || !leg || !group || !xkey) {
        b->oom |= !group || !xkey ? 0 : 1;
        goto done;
    }
    int numeric = 1;
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    const json_t *sc;
    json_array_foreach(scs, i, sc) {
        if (i < first || !sweep_is(sc, group))
            continue;
        char c[256], *end;
        sweep_others(sc, c, sizeof c);
        size_t k = 0;
        while (k < ncols && strcmp(cols[k], c) != 0)
            k++;
        if (k == ncols)
            memcpy(cols[ncols++], c, sizeof c);
        const char *xt = sweep_param(sc, 0, "value");
        xv[nm] = xt ? strtod(xt, &end) : NAN;
        if (!xt || end == xt || *end || !isfinite(xv[nm]))
            numeric = 0;
        col[nm] = k;
        mem[nm++] = i;
        double y;
        if (chart_num(json_object_get(json_object_get(sc, "metrics"), "grad_rel_err_fullbatch"), &y) && y > 0) {
            ymin = fmin(ymin, y);
            ymax = fmax(ymax, y);
        }
    }
    if (!numeric) /* positions of the distinct values, in order of appearance */
        for (size_t a = 0; a < nm; a++) {
            const char *va = sweep_param(json_array_get(scs, mem[a]), 0, "value");
            double pos = 0;
            for (size_t q = 0; q <= a; q++) {
                const char *vq = sweep_param(json_array_get(scs, mem[q]), 0, "value");
                int seen = 0;
                for (size_t r = 0; r < q && !seen; r++)
                    seen = strcmp(sweep_param(json_array_get(scs, mem[r]), 0, "value"), vq) == 0;
                if (!seen)
                    pos++;
                if (strcmp(vq, va) == 0)
                    break;
            }
            xv[a] = pos;
        }
    for (size_t a = 0; a < nm; a++) {
        xmin = fmin(xmin, xv[a]);
        xmax = fmax(xmax, xv[a]);
    }
    const double PX = 84, PY = 44, PW = 640, PH = 300, LX = PX + PW + 24;
    int H = (int)fmax(PY + PH + 52, PY + (double)ncols * LEGEND_ROW + 12);
    plot p = {PX, PY, PW, PH, {.p0 = PX, .p1 = PX + PW, .gap = 56}, {.p0 = PY + PH, .p1 = PY, .gap = 26}};
    if (numeric && xmin > 0 && xmax / xmin >= 8) {
        p.xs.log = 1;
        p.xs.lo = xmin;
        p.xs.hi = xmax;
    } else {
        lin_domain(&p.xs, xmin, xmax > xmin ? xmax : xmin + 1);
        p.xs.integer = !numeric;
    }
    int ylog = ymin < INFINITY;
    if (ylog) {
        log_domain(&p.ys, ymin, ymax);
        p.ys.lo /= 10; /* room for exact zeros on the bottom edge */
    } else
        lin_domain(&p.ys, 0, 1);
    char title[300], xlabel[200];
    snprintf(title, sizeof title, "Sweep %s: grad_rel_err_fullbatch against %s", group, xkey);
    snprintf(xlabel, sizeof xlabel, "%s%s", xkey, p.xs.log ? " (log scale)" : numeric ? "" : " (values in order)");
    gp_buf_puts(b, "<figure class=\"chart wide\">\n");
    svg_open(b, 1100, H, title);
    svg_axes(b, &p, xlabel, TICK_NUM, ylog ? "grad_rel_err_fullbatch (log)" : "grad_rel_err_fullbatch",
             ylog ? TICK_EXP : TICK_NUM);
    for (size_t k = 0; k < ncols; k++) {
        int m = 0;
        for (size_t a = 0; a < nm; a++)
            if (col[a] == k) {
                double y;
                xs[m] = xv[a];
                ys[m] = chart_num(json_object_get(json_object_get(json_array_get(scs, mem[a]), "metrics"),
                                                  "grad_rel_err_fullbatch"), &y) ? y : NAN;
                if (ylog && ys[m] == 0)
                    ys[m] = p.ys.lo;
                m++;
            }
        leg[k].kind = LEG_LINE;
        snprintf(leg[k].st.color, sizeof leg[k].st.color, "hsl(%d,70%%,40%%)", (int)((k * 137) % 360));
        leg[k].st.dash = series_dash[k % (sizeof series_dash / sizeof series_dash[0])];
        leg[k].st.width = 1.8;
        snprintf(leg[k].label, sizeof leg[k].label, "%s", cols[k]);
        svg_polyline(b, &p, xs, ys, m, &leg[k].st, cols[k]);
    }
    svg_legend(b, LX, PY, leg, (int)ncols, 44);
    svg_close(b);
    gp_buf_puts(b, "<figcaption>One line per combination of the other swept keys; an error of exactly 0 is drawn "
                   "on the bottom edge.</figcaption>\n</figure>\n");
done:
    free(mem);
    free(col);
    free(cols);
    free(xv);
    free(xs);
    free(ys);
    free(leg);
}

static void sweep_charts(gp_buf *b, const json_t *scs)
{
    size_t i;
    const json_t *sc;
    int any = 0;
    json_array_foreach(scs, i, sc) {
        if (!sweep_is(sc, NULL))
            continue;
        const char *g = json_string_value(json_object_get(json_object_get(sc, "sweep"), "group"));
        int first = 1;
        for (size_t j = 0; j < i && first; j++)
            first = !sweep_is(json_array_get(scs, j), g);
        if (!first)
            continue;
        if (!any)
            gp_buf_puts(b, "<h2>Sweeps</h2>\n");
        any = 1;
        sweep_chart(b, scs, i);
    }
}

/* A labelled panel standing in for a chart whose data the report does not have. */
static void placeholder(gp_buf *b, const char *title, const char *key)
{
    gp_buf_puts(b, "<figure class=\"chart placeholder\"><div class=\"ph-title\">");
    sb_esc(b, title);
    gp_buf_puts(b, "</div><div class=\"ph-body\">no scenario with more than one optimizer step in this report</div>"
               "<figcaption>The chart appears when scenarios carry <code>");
    sb_esc(b, key);
    gp_buf_puts(b, "</code>.</figcaption></figure>\n");
}

/* The line charts over a per-scenario array `key`, or the placeholder. */
static void optimizer_chart(gp_buf *b, const json_t *scs, const char *key, const line_spec *sp)
{
    size_t nsc = json_array_size(scs), n = 0;
    series *s = calloc(nsc ? nsc : 1, sizeof *s);
    if (!s) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < nsc; i++) {
        const json_t *sc = json_array_get(scs, i), *a = json_object_get(sc, key);
        if (json_is_array(a) && json_array_size(a) > 0)
            s[n++] = (series){sc_name(sc), sc_precision(sc, "accumulator"), a};
    }
    if (n == 0)
        placeholder(b, sp->title, key);
    else {
        line_chart(b, sp, s, n);
        if (n < nsc)
            gp_buf_printf(b, "<p class=\"note\">%zu scenario%s without <code>%s</code> not drawn.</p>\n", nsc - n,
                      nsc - n == 1 ? "" : "s", key);
    }
    free(s);
}

/* ---- gradient magnitudes against format thresholds ---- */

typedef struct {
    double v;       /* where the line is drawn, in the histogram's (unscaled) units */
    char who[40];   /* "fp16 grad & acc", "bf16 acc" */
    char what[160]; /* "min normal 6.1e-05 = 2^-14" */
    stroke st;
} threshold;

#define MAX_THR 12
#define HIST_LEGEND_CHARS 74

static const char *const thr_colour[] = {"#c62828", "#ef6c00", "#6a1b9a", "#37474f"};

/* "6.1e-05 = 2^-14", or with a loss scale S != 1: "2^-14 / S = 9.31e-10". */
static void thr_value_text(double v, double S, char *out, size_t n)
{
    char g[32], p2[32], q[32];
    pow2_text(v, p2);
    if (S != 1)
        snprintf(out, n, "%s / S = %s", p2[0] ? p2 : fmt_g(v, g), fmt_g(v / S, q));
    else if (p2[0])
        snprintf(out, n, "%s = %s", fmt_g(v, g), p2);
    else
        snprintf(out, n, "%s", fmt_g(v, g));
}

/* The fixed thresholds of format f (rounds to 0, min subnormal, min normal, max
 * finite), from the format's bit patterns, drawn at value / S (the gradients are
 * stored and accumulated multiplied by the loss scale S). Accumulator lines dashed. */
static int format_thresholds(gp_format f, const char *role, int dashed, double S, threshold *t)
{
    static const char *const what[4] = {"rounds to 0 below", "min subnormal", "min normal", "max finite"};
    gp_fmt_info fi = gp_fmt_get(f);
    double minsub = gp_fmt_to_f64(f, 1u), minnorm = gp_fmt_to_f64(f, 1u << (fi.p - 1));
    double vals[4] = {minsub / 2, minsub, minnorm, gp_fmt_to_f64(f, fi.maxfin)};
    for (int k = 0; k < 4; k++) {
        char v[80];
        thr_value_text(vals[k], S, v, sizeof v);
        t[k].v = vals[k] / S;
        snprintf(t[k].who, sizeof t[k].who, "%s %s", gp_format_name(f), role);
        snprintf(t[k].what, sizeof t[k].what, "%s %s%s", what[k], v, k == 0 ? " (\xc2\xbd min subnormal)" : "");
        snprintf(t[k].st.color, sizeof t[k].st.color, "%s", thr_colour[k]);
        t[k].st.dash = dashed ? "6 3" : NULL;
        t[k].st.width = 1.6;
    }
    return 4;
}

/* The absorption line: an addend below 2^-(p+1)|acc| leaves the accumulator
 * unchanged, drawn for |acc| = mult * the median magnitude. */
static void absorption_threshold(gp_format af, double med, double mult, const char *acc_text, const char *dash,
                                 threshold *t)
{
    int p = gp_fmt_get(af).p;
    char v[32];
    t->v = ldexp(med * mult, -(p + 1));
    snprintf(t->who, sizeof t->who, "%s acc", gp_format_name(af));
    snprintf(t->what, sizeof t->what, "absorbs < 2^-%d\xc2\xb7|acc| at |acc| = %s: %s", p + 1, acc_text,
             fmt_g(t->v, v));
    snprintf(t->st.color, sizeof t->st.color, "#2e7d32");
    t->st.dash = dash;
    t->st.width = 2;
}

/* A histogram's value at j (0 when missing or not a number). */
static double count_at(const json_t *counts, int j)
{
    double c;
    return chart_num(json_array_get(counts, (size_t)j), &c) && c > 0 ? c : 0;
}

static void hist_chart(gp_buf *b, const json_t *sc)
{
    const json_t *h = json_object_get(sc, "grad_magnitude_log2_histogram");
    const json_t *counts = json_object_get(h, "counts"), *config = json_object_get(sc, "config");
    int first = (int)json_integer_value(json_object_get(h, "first_log2"));
    int nb = (int)json_array_size(counts);
    const char *gname = sc_precision(sc, "grad"), *aname = sc_precision(sc, "accumulator");
    char title[300];
    snprintf(title, sizeof title, "%s \xe2\x80\x94 %s grads, %s accumulator", sc_name(sc), gname, aname);

    double total = 0, cmax = 0, cminpos = INFINITY;
    for (int j = 0; j < nb; j++) {
        double c = count_at(counts, j);
        if (c > 0) {
            total += c;
            cmax = fmax(cmax, c);
            cminpos = fmin(cminpos, c);
        }
    }
    gp_buf_puts(b, "<figure class=\"chart small\">\n");
    if (total == 0 || first < -1000 || first > 1000) {
        svg_open(b, 540, 120, title);
        gp_buf_puts(b, "<text class=\"legtext\" x=\"20\" y=\"70\">no non-zero gradient values in this report</text>\n");
        svg_close(b);
        gp_buf_puts(b, "</figure>\n");
        return;
    }

    /* the loss scale S: stored and accumulated values are S times the charted ones */
    double S = 1;
    const json_t *ls = json_object_get(config, "loss_scale");
    if (strcmp(str_at(ls, "mode", "none"), "none") == 0 || !chart_num(json_object_get(ls, "init"), &S) || S <= 0)
        S = 1;
    /* K: the number of additions into the accumulator */
    json_int_t K = json_integer_value(json_object_get(json_object_get(config, "batch"), "microbatches"));
    if (K <= 0)
        K = (json_int_t)json_array_size(json_object_get(sc, "error_by_step"));

    threshold t[MAX_THR];
    int nt = 0;
    double median = 0;
    gp_format gf, af;
    int have_g = gp_format_parse(gname, &gf) == 0, have_a = gp_format_parse(aname, &af) == 0;
    if (have_g)
        nt += format_thresholds(gf, have_a && af == gf ? "grad & acc" : "grad", 0, S, t + nt);
    if (have_a && !(have_g && af == gf))
        nt += format_thresholds(af, "acc", 1, S, t + nt);
    if (have_a) {
        double cum = 0;
        int jm = 0;
        for (jm = 0; jm < nb - 1; jm++)
            if ((cum += count_at(counts, jm)) * 2 >= total)
                break;
        double med = ldexp(sqrt(2.0), first + jm); /* the geometric middle of the median's binade */
        median = med;
        absorption_threshold(af, med, 1, "median |g|", "2 3", &t[nt++]);
        if (K > 1) {
            char mtext[64];
            snprintf(mtext, sizeof mtext, "%" JSON_INTEGER_FORMAT "\xc2\xb7median |g|", K);
            absorption_threshold(af, med, (double)K, mtext, "8 3 2 3", &t[nt++]);
        }
    }

    /* x range: the data plus a binade each side, stretched to the thresholds within
     * ten binades of it; the others are listed under the chart */
    double lo2 = first - 1, hi2 = first + nb + 1;
    int on[MAX_THR];
    for (int k = 0; k < nt; k++) {
        double l2 = log2(t[k].v);
        on[k] = l2 >= first - 10 && l2 <= first + nb + 10;
        if (on[k]) {
            lo2 = fmin(lo2, floor(l2) - 1);
            hi2 = fmax(hi2, ceil(l2) + 1);
        }
    }
    const double PX = 76, PY = 40, PW = 440, PH = 190;
    plot p = {PX, PY, PW, PH, {.log = 1, .lo = ldexp(1, (int)lo2), .hi = ldexp(1, (int)hi2), .p0 = PX, .p1 = PX + PW,
                               .gap = 56},
              {.lo = 0, .hi = 1, .p0 = PY + PH, .p1 = PY, .gap = 24}};
    int ylog = cmax / cminpos >= 100;
    if (ylog) {
        log_domain(&p.ys, cminpos, cmax);
        if (p.ys.lo >= cminpos)
            p.ys.lo = cminpos / 2; /* bars of the smallest count keep some height */
    } else
        lin_domain(&p.ys, 0, cmax);

    legend_item leg[MAX_THR + 1];
    int rows = 0;
    leg[rows].kind = LEG_BOX;
    snprintf(leg[rows].st.color, sizeof leg[rows].st.color, "#7f9cc0");
    snprintf(leg[rows].label, sizeof leg[rows].label, "exact gradients |g| per binade [2^e, 2^(e+1))%s",
             S != 1 ? ", unscaled" : "");
    rows++;
    for (int k = 0; k < nt; k++)
        if (on[k]) {
            leg[rows].kind = LEG_LINE;
            leg[rows].st = t[k].st;
            if (snprintf(leg[rows].label, sizeof leg[rows].label, "%s: %s", t[k].who, t[k].what) >=
                (int)sizeof leg[rows].label) {
                /* a long label is cut: acceptable for a legend */
            }
            rows++;
        }
    int H = (int)(PY + PH + 50 + rows * LEGEND_ROW + 6);
    svg_open(b, 540, H, title);
    svg_axes(b, &p, "|gradient| (log scale, one bar a binade)", TICK_EXP,
             ylog ? "values per binade (log)" : "values per binade", TICK_NUM);
    for (int j = 0; j < nb; j++) {
        double c = count_at(counts, j);
        if (c <= 0)
            continue;
        char tip[96];
        snprintf(tip, sizeof tip, "2^%d <= |g| < 2^%d: %.0f values", first + j, first + j + 1, c);
        svg_bar(b, &p, ldexp(1, first + j), ldexp(1, first + j + 1), c, "#7f9cc0", tip);
    }
    gp_buf_puts(b, "\n");
    for (int k = 0; k < nt; k++)
        if (on[k])
            svg_vline(b, &p, t[k].v, &t[k].st);
    svg_legend(b, 12, PY + PH + 50, leg, rows, HIST_LEGEND_CHARS);
    svg_close(b);

    /* notes: the loss scale, then the thresholds off the chart grouped by format */
    gp_buf notes = {NULL, 0, 0, 0};
    if (S != 1) {
        char p2[32];
        gp_buf_printf(&notes, "Loss scale S = %.10g%s%s: gradients are stored and accumulated multiplied by S, so a "
                          "format threshold t is drawn at t/S. ", S, pow2_text(S, p2)[0] ? " = " : "", p2);
    }
    if (median > 0) {
        char mv[32];
        gp_buf_printf(&notes, "Absorption lines take |acc| as the median |g| \xe2\x89\x88 %s (one addend)", fmt_g(median, mv));
        if (K > 1)
            gp_buf_printf(&notes, " and as K = %" JSON_INTEGER_FORMAT " times it (the end of K same-sign additions)", K);
        gp_buf_puts(&notes, ". ");
    }
    int off = 0;
    for (int k = 0; k < nt; k++) {
        if (on[k])
            continue;
        if (off++ == 0)
            gp_buf_puts(&notes, "Far from these gradients (not drawn): ");
        if (off == 1 || strcmp(t[k].who, t[k - 1].who) != 0 || on[k - 1]) {
            if (off > 1)
                gp_buf_puts(&notes, "; ");
            sb_esc(&notes, t[k].who);
            gp_buf_puts(&notes, ": ");
        } else
            gp_buf_puts(&notes, ", ");
        sb_esc(&notes, t[k].what);
    }
    if (off)
        gp_buf_puts(&notes, ".");
    put_notes(b, &notes);
    b->oom |= notes.oom;
    free(notes.s);
    gp_buf_puts(b, "</figure>\n");
}

/* ======================================================================== */
/* 4. The page                                                               */
/* ======================================================================== */

static const char page_css[] =
    "body{font-family:\"DejaVu Sans\",\"Liberation Sans\",Arial,Helvetica,sans-serif;font-size:14px;"
    "line-height:1.45;color:#1f2328;background:#fff;margin:0 auto;max-width:1140px;padding:16px 20px 40px}\n"
    "h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;"
    "padding-bottom:4px}h4{margin:14px 0 4px}\n"
    ".meta{color:#57606a;margin:0 0 6px}.meta code{color:#1f2328}\n"
    ".counts{font-size:16px;margin:6px 0}\n"
    ".badge{display:inline-block;min-width:34px;text-align:center;border-radius:10px;padding:0 8px;"
    "font-weight:bold;font-size:12px;color:#fff;background:#6e7781}\n"
    ".badge.pass{background:#1a7f37}.badge.warn{background:#bf8700}.badge.fail{background:#cf222e}\n"
    "table{border-collapse:collapse;font-size:13px;margin:4px 0}th,td{border:1px solid #d0d7de;"
    "padding:3px 7px;text-align:left;vertical-align:top}th{background:#f6f8fa}\n"
    "td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
    "td.bad{color:#cf222e;font-weight:bold}.failed{color:#cf222e}td.name,.fi{white-space:nowrap}\n"
    "table.summary th,table.tensors th{font-size:12px}.scroll{overflow-x:auto}\n"
    "figure{margin:12px 0}figure.chart svg{max-width:100%;height:auto;border:1px solid #d0d7de;border-radius:4px}\n"
    "figcaption,.note{color:#57606a;font-size:12px;margin:4px 2px}\n"
    ".grid-2{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:8px 16px;align-items:start}\n"
    ".grid-2 figure{margin:0}\n"
    "svg .bg{fill:#fff}svg text{font-family:inherit;font-size:12px;fill:#24292f}\n"
    "svg .title{font-size:15px;font-weight:bold}svg .xlabel,svg .ylabel{font-size:12.5px;fill:#24292f}\n"
    "svg .ticklabel{font-size:11px;fill:#57606a}svg .grid{stroke:#eaeef2}svg .tick{stroke:#8c959f}\n"
    "svg .frame{fill:none;stroke:#8c959f}svg .leghead{font-weight:bold}svg .legtext{font-size:11.5px}\n"
    ".placeholder{border:2px dashed #afb8c1;border-radius:6px;padding:16px 20px;background:#f6f8fa}\n"
    ".ph-title{font-weight:bold;font-size:15px}.ph-body{font-size:16px;color:#57606a;margin:22px 0;"
    "text-align:center}\n"
    "details{border:1px solid #d0d7de;border-radius:6px;padding:6px 12px;margin:8px 0}\n"
    "summary{cursor:pointer;font-weight:bold}ul{margin:4px 0}\n"
    ".row{display:flex;flex-wrap:wrap;gap:8px 28px;align-items:flex-start}\n"
    "table.kv th{background:none;font-weight:normal;color:#57606a}\n";

static const char *const summary_metrics[] = {"grad_rel_err_fullbatch", "normalization_rel_err", "absorbed_frac",
                                              "underflow_frac", "subnormal_frac"};
#define NSUMMARY (sizeof summary_metrics / sizeof summary_metrics[0])

static void put_failed_list(gp_buf *b, const json_t *failed, const char *sep)
{
    size_t i;
    const json_t *f;
    json_array_foreach(failed, i, f) {
        if (i)
            gp_buf_puts(b, sep);
        gp_buf_puts(b, "<span class=\"fi\">");
        sb_esc(b, str_at(f, "metric", "?"));
        gp_buf_puts(b, " = ");
        put_value(b, json_object_get(f, "value"));
        gp_buf_puts(b, " &gt; ");
        put_value(b, json_object_get(f, "max"));
        gp_buf_puts(b, "</span>");
    }
}

static void put_header(gp_buf *b, const json_t *report, const json_t *scs)
{
    int count[4] = {0, 0, 0, 0}; /* pass, warn, fail, other */
    size_t i;
    const json_t *sc;
    json_array_foreach(scs, i, sc) {
        const char *v = str_at(sc, "verdict", "");
        count[strcmp(v, "pass") == 0 ? 0 : strcmp(v, "warn") == 0 ? 1 : strcmp(v, "fail") == 0 ? 2 : 3]++;
    }
    gp_buf_puts(b, "<h1>gradprec precision report</h1>\n<p class=\"meta\">schema <code>");
    put_value(b, json_object_get(report, "schema"));
    gp_buf_puts(b, "</code> &middot; backend <code>");
    put_value(b, json_object_get(report, "backend"));
    gp_buf_puts(b, "</code> &middot; compared with <code>");
    const json_t *cmp = json_object_get(report, "compare_backend");
    if (json_is_string(cmp))
        sb_esc(b, json_string_value(cmp));
    else
        gp_buf_puts(b, "none");
    gp_buf_printf(b, "</code></p>\n<p class=\"counts\">%zu scenario%s: ", json_array_size(scs),
              json_array_size(scs) == 1 ? "" : "s");
    gp_buf_printf(b, "<span class=\"badge fail\">%d fail</span> <span class=\"badge warn\">%d warn</span> "
                 "<span class=\"badge pass\">%d pass</span>", count[2], count[1], count[0]);
    if (count[3])
        gp_buf_printf(b, " <span class=\"badge unknown\">%d other</span>", count[3]);
    gp_buf_puts(b, "</p>\n");
}

static void put_summary_table(gp_buf *b, const json_t *scs)
{
    gp_buf_puts(b, "<h2>Summary</h2>\n<table class=\"summary\"><thead><tr><th>verdict</th><th>scenario</th>"
               "<th>dominant loss</th>");
    for (size_t m = 0; m < NSUMMARY; m++) {
        gp_buf_puts(b, "<th>");
        sb_esc_wbr(b, summary_metrics[m]);
        gp_buf_puts(b, "</th>");
    }
    gp_buf_puts(b, "<th>failed (value &gt; max)</th></tr></thead>\n<tbody>\n");
    size_t i;
    const json_t *sc;
    json_array_foreach(scs, i, sc) {
        const json_t *metrics = json_object_get(sc, "metrics");
        gp_buf_puts(b, "<tr><td>");
        put_badge(b, str_at(sc, "verdict", "?"));
        gp_buf_printf(b, "</td><td class=\"name\"><a href=\"#scenario-%zu\">", i);
        sb_esc(b, sc_name(sc));
        gp_buf_puts(b, "</a></td><td>");
        sb_esc(b, str_at(sc, "dominant_mechanism", "\xe2\x80\x94"));
        gp_buf_puts(b, "</td>");
        for (size_t m = 0; m < NSUMMARY; m++) {
            gp_buf_puts(b, "<td class=\"num\">");
            put_value(b, json_object_get(metrics, summary_metrics[m]));
            gp_buf_puts(b, "</td>");
        }
        gp_buf_puts(b, "<td class=\"failed\">");
        put_failed_list(b, json_object_get(sc, "failed"), "<br>");
        gp_buf_puts(b, "</td></tr>\n");
    }
    gp_buf_puts(b, "</tbody></table>\n");
}

/* Any JSON value as nested key/value tables; arrays of scalars inline. */
static void put_json(gp_buf *b, const json_t *v)
{
    if (json_is_object(v)) {
        const char *k;
        const json_t *x;
        gp_buf_puts(b, "<table class=\"kv\">");
        json_object_foreach((json_t *)v, k, x) {
            gp_buf_puts(b, "<tr><th>");
            sb_esc(b, k);
            gp_buf_puts(b, "</th><td>");
            put_json(b, x);
            gp_buf_puts(b, "</td></tr>");
        }
        gp_buf_puts(b, "</table>");
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *x;
        int scalars = 1;
        json_array_foreach(v, i, x) scalars &= !json_is_object(x) && !json_is_array(x);
        gp_buf_puts(b, scalars ? "[" : "<ol>");
        json_array_foreach(v, i, x) {
            if (scalars) {
                if (i)
                    gp_buf_puts(b, ", ");
                put_value(b, x);
            } else {
                gp_buf_puts(b, "<li>");
                put_json(b, x);
                gp_buf_puts(b, "</li>");
            }
        }
        gp_buf_puts(b, scalars ? "]" : "</ol>");
    } else
        put_value(b, v);
}

/* A two-column table of an object's scalar members. */
static void put_kv_table(gp_buf *b, const json_t *obj, const char *h1, const char *h2)
{
    const char *k;
    const json_t *x;
    gp_buf_printf(b, "<table><thead><tr><th>%s</th><th>%s</th></tr></thead><tbody>", h1, h2);
    json_object_foreach((json_t *)obj, k, x) {
        gp_buf_puts(b, "<tr><td>");
        sb_esc(b, k);
        gp_buf_puts(b, "</td><td class=\"num\">");
        put_value(b, x);
        gp_buf_puts(b, "</td></tr>");
    }
    gp_buf_puts(b, "</tbody></table>\n");
}

static int metric_failed(const json_t *failed, const char *metric)
{
    size_t i;
    const json_t *f;
    json_array_foreach(failed, i, f) if (strcmp(str_at(f, "metric", ""), metric) == 0) return 1;
    return 0;
}

static void put_details(gp_buf *b, const json_t *sc, size_t i)
{
    const json_t *metrics = json_object_get(sc, "metrics"), *thr = json_object_get(sc, "thresholds");
    const json_t *failed = json_object_get(sc, "failed"), *config = json_object_get(sc, "config");
    const json_t *batch = json_object_get(config, "batch");
    gp_buf_printf(b, "<details id=\"scenario-%zu\"><summary>", i);
    put_badge(b, str_at(sc, "verdict", "?"));
    gp_buf_puts(b, " ");
    sb_esc(b, sc_name(sc));
    if (strcmp(str_at(sc, "verdict", ""), "refused") == 0) { /* nothing was measured: why */
        gp_buf_puts(b, "</summary>\n<p class=\"failed\">");
        sb_esc(b, str_at(sc, "refusal", "refused by the backend"));
        gp_buf_puts(b, "</p>\n</details>\n");
        return;
    }
    gp_buf_puts(b, " \xe2\x80\x94 ");
    sb_esc(b, str_at(sc, "dominant_mechanism", "?"));
    gp_buf_puts(b, "</summary>\n<p>");
    sb_esc(b, sc_precision(sc, "grad"));
    gp_buf_puts(b, " gradients into a ");
    sb_esc(b, sc_precision(sc, "accumulator"));
    gp_buf_puts(b, " accumulator (");
    sb_esc(b, sc_precision(sc, "rounding"));
    gp_buf_puts(b, "), K = ");
    put_value(b, json_object_get(batch, "microbatches"));
    gp_buf_puts(b, " micro-batches, reduction <code>");
    sb_esc(b, str_at(config, "reduction", "?"));
    gp_buf_puts(b, "</code>.</p>\n");
    if (json_array_size(failed)) {
        gp_buf_puts(b, "<p class=\"failed\">Failed: ");
        put_failed_list(b, failed, "; ");
        gp_buf_puts(b, "</p>\n");
    }
    const json_t *notes = json_object_get(sc, "notes"), *x;
    size_t k;
    if (json_array_size(notes)) {
        gp_buf_puts(b, "<ul class=\"notes\">");
        json_array_foreach(notes, k, x) {
            gp_buf_puts(b, "<li>");
            put_value(b, x);
            gp_buf_puts(b, "</li>");
        }
        gp_buf_puts(b, "</ul>\n");
    }

    gp_buf_puts(b, "<div class=\"row\"><div><h4>Metrics</h4>\n<table><thead><tr><th>metric</th><th>value</th><th>max</th></tr></thead><tbody>");
    const char *key;
    json_object_foreach((json_t *)metrics, key, x) {
        int bad = metric_failed(failed, key);
        gp_buf_puts(b, "<tr><td>");
        sb_esc(b, key);
        gp_buf_printf(b, "</td><td class=\"num%s\">", bad ? " bad" : "");
        put_value(b, x);
        gp_buf_puts(b, "</td><td class=\"num\">");
        if (json_object_get(thr, key))
            put_value(b, json_object_get(thr, key));
        gp_buf_puts(b, "</td></tr>");
    }
    gp_buf_puts(b, "</tbody></table></div>\n<div><h4>Loss by mechanism</h4>\n");
    put_kv_table(b, json_object_get(sc, "loss_by_mechanism"), "mechanism", "error norm / full-batch norm");
    gp_buf_puts(b, "</div>\n<div><h4>Events</h4>\n");
    put_kv_table(b, json_object_get(sc, "events"), "event", "count");
    const json_t *coll = json_object_get(sc, "collective");
    if (coll) { /* distributed scenarios: the collective's own share, beside the totals */
        gp_buf_puts(b, "</div>\n<div><h4>Collective: loss by mechanism</h4>\n");
        put_kv_table(b, json_object_get(coll, "loss_by_mechanism"), "mechanism", "error norm / full-batch norm");
        gp_buf_puts(b, "<h4>Collective: events</h4>\n");
        put_kv_table(b, json_object_get(coll, "events"), "event", "count");
    }
    gp_buf_puts(b, "</div></div>\n");

    /* per tensor: one row a tensor, one column a metric (union, first-seen order) */
    const json_t *tensors = json_object_get(sc, "tensors"), *t;
    json_t *cols = json_object();
    json_array_foreach(tensors, k, t) {
        json_object_foreach(json_object_get(t, "metrics"), key, x) json_object_set_new(cols, key, json_null());
    }
    gp_buf_puts(b, "<h4>Per tensor</h4>\n<div class=\"scroll\"><table class=\"tensors\"><thead><tr><th>tensor</th>"
               "<th>size</th>");
    json_object_foreach(cols, key, x) {
        gp_buf_puts(b, "<th>");
        sb_esc_wbr(b, key);
        gp_buf_puts(b, "</th>");
    }
    gp_buf_puts(b, "</tr></thead><tbody>");
    json_array_foreach(tensors, k, t) {
        gp_buf_puts(b, "<tr><td>");
        sb_esc(b, str_at(t, "name", "?"));
        gp_buf_puts(b, "</td><td class=\"num\">");
        put_value(b, json_object_get(t, "size"));
        gp_buf_puts(b, "</td>");
        json_object_foreach(cols, key, x) {
            gp_buf_puts(b, "<td class=\"num\">");
            put_value(b, json_object_get(json_object_get(t, "metrics"), key));
            gp_buf_puts(b, "</td>");
        }
        gp_buf_puts(b, "</tr>");
    }
    gp_buf_puts(b, "</tbody></table></div>\n");
    json_decref(cols);
    gp_buf_puts(b, "<h4>Configuration</h4>\n");
    put_json(b, config);
    gp_buf_puts(b, "\n</details>\n");
}

/* `gradprec advise`'s table, when the report carries one ("advice" at the root). */
static void put_advice(gp_buf *b, const json_t *advice)
{
    static const char *const mech[] = {"normalization", "underflow", "absorption", "rounding", "scaling",
                                       "stale update", "state precision"};
    const json_t *alts = json_object_get(advice, "alternatives"), *a;
    int model = json_is_number(json_object_get(advice, "params"));
    size_t i;
    char buf[32];
    if (!json_is_array(alts))
        return;
    gp_buf_puts(b, "<h2>Advice: alternatives and their cost</h2>\n<table class=\"summary\"><thead><tr>"
                   "<th>alternative</th><th>change</th><th>verdict</th><th>grad_rel_err_fullbatch</th>");
    for (size_t m = 0; m < sizeof mech / sizeof mech[0]; m++)
        gp_buf_printf(b, "<th>%s</th>", mech[m]);
    gp_buf_puts(b, "<th>+bytes / param</th><th>+bytes, scenario</th>");
    if (model)
        gp_buf_puts(b, "<th>+bytes, trainable</th><th>+bytes, all params</th>");
    gp_buf_puts(b, "</tr></thead><tbody>\n");
    json_array_foreach(alts, i, a) {
        gp_buf_puts(b, "<tr><td>");
        sb_esc(b, str_at(a, "label", "?"));
        gp_buf_puts(b, "</td><td><code>");
        sb_esc(b, str_at(a, "change", ""));
        gp_buf_puts(b, "</code></td><td>");
        put_badge(b, str_at(a, "verdict", "?"));
        gp_buf_printf(b, "</td><td>%s</td>", fmt_g(json_number_value(json_object_get(a, "grad_rel_err_fullbatch")), buf));
        for (size_t m = 0; m < sizeof mech / sizeof mech[0]; m++) {
            gp_buf_puts(b, "<td>");
            put_value(b, json_object_get(json_object_get(a, "loss_by_mechanism"), mech[m]));
            gp_buf_puts(b, "</td>");
        }
        static const char *const costs[] = {"bytes_per_param", "extra_bytes_scenario", "extra_bytes_trainable",
                                            "extra_bytes_all_params"};
        for (int k = 0; k < (model ? 4 : 2); k++) {
            gp_buf_puts(b, "<td>");
            put_value(b, json_object_get(a, costs[k]));
            gp_buf_puts(b, "</td>");
        }
        gp_buf_puts(b, "</tr>\n");
    }
    gp_buf_puts(b, "</tbody></table>\n<p class=\"note\">Errors: loss by mechanism relative to the full-batch "
                   "gradient; memory: extra bytes per trainable parameter and in all (docs/advise.md).</p>\n");
}

#define MAX_HISTOGRAMS 12

char *gp_report_html(const json_t *report, gp_error *err)
{
    const json_t *scs = json_object_get(report, "scenarios");
    if (!json_is_object(report)) {
        gp_error_set(err, "report is not a JSON object");
        return NULL;
    }
    if (!json_is_array(scs)) {
        gp_error_set(err, "report has no \"scenarios\" array");
        return NULL;
    }
    size_t nsc = json_array_size(scs), i;
    const json_t *sc;
    json_array_foreach(scs, i, sc) {
        if (!json_is_object(sc)) {
            gp_error_set(err, "report scenario %zu is not an object", i);
            return NULL;
        }
    }

    gp_buf b = {NULL, 0, 0, 0};
    gp_buf_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                "<title>gradprec report</title>\n<style>\n");
    gp_buf_puts(&b, page_css);
    gp_buf_puts(&b, "</style>\n</head>\n<body>\n");
    put_header(&b, report, scs);
    put_summary_table(&b, scs);
    if (json_object_get(report, "advice"))
        put_advice(&b, json_object_get(report, "advice"));

    /* the charts draw the scenarios that ran: a refused one has no data (its details say why) */
    const json_t *all = scs;
    json_t *ran = json_array();
    json_array_foreach(all, i, sc) if (strcmp(str_at(sc, "verdict", ""), "refused") != 0)
        json_array_append(ran, (json_t *)sc);
    scs = ran;
    nsc = json_array_size(ran);
    gp_buf_puts(&b, "<h2>Accumulation error</h2>\n");
    series *s = calloc(nsc ? nsc : 1, sizeof *s);
    if (!s || !ran) {
        free(s);
        json_decref(ran);
        free(b.s);
        gp_error_set(err, "out of memory");
        return NULL;
    }
    json_array_foreach(scs, i, sc) {
        const json_t *a = json_object_get(sc, "error_by_step");
        s[i] = (series){sc_name(sc), sc_precision(sc, "accumulator"), json_is_array(a) ? a : NULL};
    }
    const line_spec err_spec = {"Error against accumulation step",
                                "micro-batch step k (accumulator after k micro-batches)",
                                "relative error of the accumulator", 1, 64, "accumulator"};
    line_chart(&b, &err_spec, s, nsc);
    free(s);
    sweep_charts(&b, scs);

    gp_buf_puts(&b, "<h2>Gradient magnitudes against format thresholds</h2>\n<div class=\"grid-2\">\n");
    json_array_foreach(scs, i, sc) {
        if (i >= MAX_HISTOGRAMS)
            break;
        hist_chart(&b, sc);
    }
    gp_buf_puts(&b, "</div>\n");
    if (nsc > MAX_HISTOGRAMS)
        gp_buf_printf(&b, "<p class=\"note\">Histograms of the first %d scenarios only; the other %zu are in the "
                      "report.json.</p>\n", MAX_HISTOGRAMS, nsc - MAX_HISTOGRAMS);

    gp_buf_puts(&b, "<h2>Optimizer</h2>\n");
    const line_spec stale_spec = {"Stale-update fraction over the LR schedule", "optimizer step (LR schedule)",
                                  "fraction of weights left unchanged", 0, 64, "accumulator"};
    optimizer_chart(&b, scs, "stale_update_by_step", &stale_spec);
    const line_spec ls_spec = {"Loss-scale trajectory", "optimizer step", "loss scale", 1, 64, "accumulator"};
    optimizer_chart(&b, scs, "loss_scale_by_step", &ls_spec);

    json_decref(ran);
    gp_buf_puts(&b, "<h2>Scenarios</h2>\n");
    json_array_foreach(all, i, sc) put_details(&b, sc, i);
    gp_buf_puts(&b, "</body>\n</html>\n");
    if (b.oom) {
        free(b.s);
        gp_error_set(err, "out of memory");
        return NULL;
    }
    return b.s;
}
