/* gp_advice.c — see gp_advice.h. */
#include "gp_advice.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/gp_buf.h"
#include "gp_report.h"

/* The mechanisms shown per alternative (the rest are rarely non-zero; report.json has all). */
static const gp_mechanism shown[] = {GP_MECH_NORMALIZATION, GP_MECH_UNDERFLOW, GP_MECH_ABSORPTION, GP_MECH_ROUNDING,
                                     GP_MECH_SCALING,       GP_MECH_STALE,     GP_MECH_STATE};
#define NSHOWN (sizeof shown / sizeof shown[0])

static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_string(v != v ? "nan" : v > 0 ? "inf" : "-inf");
}

static json_t *entry(const char *label, const char *change, double bpp, double traffic, const gp_result *r,
                     double S, const gp_advice_model *m, double base_bytes)
{
    json_t *o = json_object(), *loss = json_object();
    json_object_set_new(o, "label", json_string(label));
    json_object_set_new(o, "change", json_string(change));
    json_object_set_new(o, "verdict", json_string(gp_verdict_name(r->verdict)));
    json_object_set_new(o, "dominant_mechanism", json_string(gp_mechanism_name(r->dominant)));
    json_object_set_new(o, "grad_rel_err_fullbatch", num(r->metric[GP_M_GRAD_REL_ERR_FULLBATCH]));
    json_object_set_new(o, "weight_rel_err", num(r->metric[GP_M_WEIGHT_REL_ERR]));
    for (int m2 = 0; m2 < GP_NMECH; m2++)
        json_object_set_new(loss, gp_mechanism_name((gp_mechanism)m2), num(r->loss[m2]));
    json_object_set_new(o, "loss_by_mechanism", loss);
    json_object_set_new(o, "bytes_per_param", json_real(bpp));
    json_object_set_new(o, "mv_traffic_per_param", json_real(traffic));
    json_object_set_new(o, "extra_bytes_scenario", json_real(bpp * S));
    if (m->params > 0) {
        double T = m->trainable > 0 ? m->trainable : m->params;
        json_object_set_new(o, "extra_bytes_trainable", json_real(bpp * T));
        json_object_set_new(o, "extra_bytes_all_params", json_real(bpp * m->params));
        json_object_set_new(o, "percent_trainable", json_real(100 * bpp * T / base_bytes));
        json_object_set_new(o, "percent_all_params", json_real(100 * bpp * m->params / base_bytes));
    }
    return o;
}

json_t *gp_advice_json(const gp_scenario *sc, const gp_alternative *alt, int nalt, const gp_result *res,
                       const gp_advice_model *m)
{
    double S = 0;
    for (size_t t = 0; t < sc->ntensors; t++)
        S += (double)sc->tensors[t].size;
    double wbytes = gp_fmt_get(sc->optimizer.param).width / 8.0, sbytes = gp_advise_state_bytes(sc);
    double T = m->trainable > 0 ? m->trainable : m->params;
    double base = m->memory > 0 ? m->memory : m->params * wbytes + T * sbytes;
    json_t *o = json_object(), *arr = json_array();
    json_object_set_new(o, "scenario", json_string(sc->name));
    json_object_set_new(o, "scenario_params", json_real(S));
    json_object_set_new(o, "weight_bytes_per_param", json_real(wbytes));
    json_object_set_new(o, "state_bytes_per_param", json_real(sbytes));
    json_object_set_new(o, "mv_traffic_per_param", json_real(gp_advise_mv_traffic(sc)));
    json_object_set_new(o, "params", m->params > 0 ? json_real(m->params) : json_null());
    json_object_set_new(o, "trainable_params", m->params > 0 ? json_real(T) : json_null());
    json_object_set_new(o, "memory_bytes", m->memory > 0 ? json_real(m->memory) : json_null());
    json_object_set_new(o, "percent_of", json_string(m->memory > 0 ? "memory" : "training state"));
    if (m->params > 0)
        json_object_set_new(o, "baseline_bytes", json_real(base));
    json_array_append_new(arr, entry("as configured", "", 0, 0, &res[0], S, m, base));
    for (int k = 0; k < nalt; k++)
        json_array_append_new(arr, entry(alt[k].label, alt[k].change, alt[k].bytes_per_param, alt[k].mv_traffic, &res[k + 1], S,
                                                    m, base));
    json_object_set_new(o, "alternatives", arr);
    return o;
}

static double dnum(const json_t *o, const char *k)
{
    const json_t *x = json_object_get(o, k);
    return json_is_number(x) ? json_number_value(x) : NAN;
}

/* 1.5 GB style (decimal units), or bytes below 1 kB. */
static const char *bytes_text(double b, char buf[32])
{
    static const char *const unit[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    double a = fabs(b);
    while (a >= 1000 && u < 4) {
        a /= 1000;
        b /= 1000;
        u++;
    }
    if (b != b)
        snprintf(buf, 32, "-");
    else
        snprintf(buf, 32, u ? "%+.3g %s" : "%+.0f %s", b, unit[u]);
    return buf;
}

/* The cells of one row: mechanisms, then the costs. */
static void cells(const json_t *a, int with_model, char out[][32], int *n)
{
    const json_t *loss = json_object_get(a, "loss_by_mechanism");
    int k = 0;
    snprintf(out[k++], 32, "%.3g", dnum(a, "grad_rel_err_fullbatch"));
    for (size_t i = 0; i < NSHOWN; i++)
        snprintf(out[k++], 32, "%.3g", dnum(loss, gp_mechanism_name(shown[i])));
    snprintf(out[k++], 32, "%+g", dnum(a, "bytes_per_param"));
    bytes_text(dnum(a, "extra_bytes_scenario"), out[k++]);
    if (with_model) {
        char b[32];
        snprintf(out[k++], 32, "%.16s (%+.2f%%)", bytes_text(dnum(a, "extra_bytes_trainable"), b),
                 dnum(a, "percent_trainable"));
        snprintf(out[k++], 32, "%.16s (%+.2f%%)", bytes_text(dnum(a, "extra_bytes_all_params"), b),
                 dnum(a, "percent_all_params"));
    }
    *n = k;
}

/* The m and v traffic line (docs/advise.md, malloc'ed; "" when no alternative changes
 * optimizer.state; NULL when out of memory): bytes read and written per trainable parameter
 * per optimizer step, as configured and for each alternative of another state. */
static char *traffic_line(const json_t *advice)
{
    gp_buf buf = GP_BUF_INIT, *b = &buf;
    size_t i;
    const json_t *a;
    double base = dnum(advice, "mv_traffic_per_param");
    int any = 0;
    json_array_foreach(json_object_get(advice, "alternatives"), i, a) {
        double d = dnum(a, "mv_traffic_per_param");
        if (strncmp(json_string_value(json_object_get(a, "change")), "optimizer.state:", 16) != 0)
            continue;
        if (!any++)
            gp_buf_printf(b, "m and v traffic (bytes read and written per trainable parameter per optimizer step, "
                             "a fused step): as configured %g", base);
        gp_buf_printf(b, "; %s %g", json_string_value(json_object_get(a, "label")), base + d);
    }
    if (any)
        gp_buf_puts(b, "\n");
    return gp_buf_take(b);
}

static const char *const heads[] = {"err_full", "norm", "underflow", "absorb", "rounding", "scaling", "stale",
                                    "state", "+B/param", "+scenario", "+trainable", "+all params"};

char *gp_advice_markdown(const json_t *advice)
{
    gp_buf b = GP_BUF_INIT;
    int with_model = json_is_number(json_object_get(advice, "params"));
    size_t i;
    const json_t *a;
    char c[16][32];
    int n;
    gp_buf_printf(&b, "## gradprec advise: %s\n\n", json_string_value(json_object_get(advice, "scenario")));
    gp_buf_printf(&b, "Errors relative to the full-batch gradient (`grad_rel_err_fullbatch`, split by mechanism). "
                      "Memory: extra bytes per trainable parameter, for this scenario's %.0f parameters",
                  dnum(advice, "scenario_params"));
    if (with_model)
        gp_buf_printf(&b, ", for %.4g trainable and for all %.4g parameters of the model (percent of %s: %.4g GB)",
                      dnum(advice, "trainable_params"), dnum(advice, "params"),
                      json_string_value(json_object_get(advice, "percent_of")), dnum(advice, "baseline_bytes") / 1e9);
    gp_buf_puts(&b, ".\n\n| alternative | change | verdict |");
    for (size_t h = 0; h < (with_model ? 12u : 10u); h++)
        gp_buf_printf(&b, " %s |", heads[h]);
    gp_buf_puts(&b, "\n|---|---|---|");
    for (size_t h = 0; h < (with_model ? 12u : 10u); h++)
        gp_buf_puts(&b, "---|");
    gp_buf_puts(&b, "\n");
    json_array_foreach(json_object_get(advice, "alternatives"), i, a) {
        const char *ch = json_string_value(json_object_get(a, "change"));
        gp_buf_printf(&b, "| %s | %s%s%s | %s |", json_string_value(json_object_get(a, "label")), *ch ? "`" : "", ch,
                      *ch ? "`" : "", json_string_value(json_object_get(a, "verdict")));
        cells(a, with_model, c, &n);
        for (int k = 0; k < n; k++)
            gp_buf_printf(&b, " %s |", c[k]);
        gp_buf_puts(&b, "\n");
    }
    char *t = traffic_line(advice);
    if (t && *t) {
        gp_buf_puts(&b, "\n");
        gp_buf_puts(&b, t);
    }
    free(t);
    return gp_buf_take(&b);
}

void gp_advice_table(FILE *out, const json_t *advice)
{
    int with_model = json_is_number(json_object_get(advice, "params"));
    size_t i, nh = with_model ? 12 : 10;
    const json_t *a;
    char c[16][32];
    int n, w = 13;
    json_array_foreach(json_object_get(advice, "alternatives"), i, a) {
        int len = (int)strlen(json_string_value(json_object_get(a, "label")));
        w = len > w ? len : w;
    }
    fprintf(out, "%-*s %-4s", w, "alternative", "");
    for (size_t h = 0; h < nh; h++)
        fprintf(out, h < 8 ? " %9s" : h < 10 ? " %10s" : " %20s", heads[h]);
    fputc('\n', out);
    json_array_foreach(json_object_get(advice, "alternatives"), i, a) {
        fprintf(out, "%-*s %-4s", w, json_string_value(json_object_get(a, "label")),
                json_string_value(json_object_get(a, "verdict")));
        cells(a, with_model, c, &n);
        for (int k = 0; k < n; k++)
            fprintf(out, k < 8 ? " %9s" : k < 10 ? " %10s" : " %20s", c[k]);
        fputc('\n', out);
    }
    fprintf(out, "columns: err_full = grad_rel_err_fullbatch; norm ... state = its loss by mechanism (error norm / "
                 "full-batch norm); +B/param = extra bytes per trainable parameter; +scenario = for this scenario's "
                 "%.0f parameters",
            dnum(advice, "scenario_params"));
    if (with_model)
        fprintf(out, "; +trainable / +all params = for %.4g trainable / all %.4g parameters (%% of %s, %.4g GB)",
                dnum(advice, "trainable_params"), dnum(advice, "params"),
                json_string_value(json_object_get(advice, "percent_of")), dnum(advice, "baseline_bytes") / 1e9);
    fputs(" (docs/advise.md)\n", out);
    char *t = traffic_line(advice);
    if (t)
        fputs(t, out);
    free(t);
}
