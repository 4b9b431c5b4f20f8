/* gp_junit.c — see gp_junit.h. The document (valid against tests/junit.xsd):
 *
 *   <testsuites name="gradprec" tests= failures= errors="0" skipped="0">
 *     <testsuite name="gradprec" tests= failures= errors="0" skipped="0">
 *       <properties> schema, backend, compare_backend </properties>
 *       <testcase classname="gradprec.BACKEND" name="SCENARIO">
 *         <failure message="..." type="threshold|mismatch">details</failure>   (fail)
 *         <system-out>warn: MECHANISM fired ...</system-out>                  (warn)
 *       </testcase> ...
 *
 * No times or timestamps: the same report gives the same bytes. Text is escaped for
 * XML 1.0: & < > " ' as entities; in attributes tab, newline and carriage return as
 * character references; characters XML 1.0 cannot carry at all (other C0 controls,
 * U+FFFE, U+FFFF) and invalid UTF-8 bytes as the visible text \xNN / \uFFFE. */
#include "gp_junit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/gp_buf.h"

/* Length of the valid UTF-8 sequence at s (1..4) and its code point, or 0. */
static int utf8_seq(const unsigned char *s, unsigned *cp)
{
    unsigned c = s[0];
    int n;
    unsigned min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xe0) == 0xc0) {
        n = 2;
        c &= 0x1f;
        min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3;
        c &= 0x0f;
        min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4;
        c &= 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return n;
}

/* Escaped text; attr: inside a double-quoted attribute. */
static void xml(gp_buf *f, const char *str, int attr)
{
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned cp;
        int n = utf8_seq(s, &cp);
        if (n == 0) {
            gp_buf_printf(f, "\\x%02X", *s);
            s++;
            continue;
        }
        switch (cp) {
        case '&': gp_buf_puts(f, "&amp;"); break;
        case '<': gp_buf_puts(f, "&lt;"); break;
        case '>': gp_buf_puts(f, "&gt;"); break;
        case '"': gp_buf_puts(f, "&quot;"); break;
        case '\'': gp_buf_puts(f, "&apos;"); break;
        case '\t': gp_buf_puts(f, attr ? "&#9;" : "\t"); break;
        case '\n': gp_buf_puts(f, attr ? "&#10;" : "\n"); break;
        case '\r': gp_buf_puts(f, "&#13;"); break;
        default:
            if (cp < 0x20)
                gp_buf_printf(f, "\\x%02X", cp);
            else if (cp == 0xfffe || cp == 0xffff)
                gp_buf_printf(f, "\\u%04X", cp);
            else
                gp_buf_put(f, (const char *)s, (size_t)n);
        }
        s += n;
    }
}

/* A metric value as written in report.json: a number, or "inf"/"-inf"/"nan". */
static void value_text(const json_t *v, char *buf, size_t n)
{
    if (json_is_number(v))
        snprintf(buf, n, "%.6g", json_number_value(v));
    else if (json_is_string(v))
        snprintf(buf, n, "%s", json_string_value(v));
    else
        snprintf(buf, n, "?");
}

static double num_at(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* "underflow (3 of 1000 roundings), absorption (...)": what made a scenario warn
 * (the runner's rule: underflow, absorption, overflow, non-finite events, a
 * normalization loss, a skipped step). Empty when nothing did. */
static void fired(gp_buf *f, const json_t *sc)
{
    const json_t *ev = json_object_get(sc, "events"), *loss = json_object_get(sc, "loss_by_mechanism");
    const char *sep = "";
    double v;
    if ((v = num_at(ev, "underflow")) > 0) {
        gp_buf_printf(f, "%sunderflow (%.0f of %.0f roundings)", sep, v, num_at(ev, "roundings_nonzero"));
        sep = ", ";
    }
    if ((v = num_at(ev, "absorbed")) > 0) {
        gp_buf_printf(f, "%sabsorption (%.0f of %.0f additions)", sep, v, num_at(ev, "additions_nonzero"));
        sep = ", ";
    }
    if ((v = num_at(ev, "overflow")) > 0) {
        gp_buf_printf(f, "%soverflow (%.0f events)", sep, v);
        sep = ", ";
    }
    if ((v = num_at(ev, "nonfinite")) > 0) {
        gp_buf_printf(f, "%snon-finite (%.0f final gradients)", sep, v);
        sep = ", ";
    }
    if ((v = num_at(loss, "normalization")) > 0) {
        gp_buf_printf(f, "%snormalization (loss %.6g)", sep, v);
        sep = ", ";
    }
    if ((v = num_at(json_object_get(sc, "metrics"), "skipped_steps")) > 0)
        gp_buf_printf(f, "%sskipped steps (%.0f)", sep, v);
}

/* The scenario's notes (report.json "notes"), one "note: ..." line each. */
static void put_notes(gp_buf *f, const json_t *sc)
{
    size_t i;
    const json_t *x;
    json_array_foreach(json_object_get(sc, "notes"), i, x) {
        if (!json_is_string(x))
            continue;
        gp_buf_puts(f, "\nnote: ");
        xml(f, json_string_value(x), 0);
    }
}

/* The failure message: dominant mechanism, each failed metric with value and max. */
static void failure_message(gp_buf *f, const json_t *sc, const char *dominant, int attr)
{
    char a[64], b[64];
    gp_buf_puts(f, "dominant mechanism ");
    xml(f, dominant, attr);
    size_t i;
    const json_t *fm;
    json_array_foreach(json_object_get(sc, "failed"), i, fm) {
        const char *metric = json_string_value(json_object_get(fm, "metric"));
        value_text(json_object_get(fm, "value"), a, sizeof a);
        value_text(json_object_get(fm, "max"), b, sizeof b);
        gp_buf_puts(f, attr ? "; " : "\n");
        xml(f, metric ? metric : "?", attr);
        if (strcmp(a, "nan") == 0) { /* undefined: fails closed */
            gp_buf_printf(f, " is undefined (nan), which fails max ");
        } else {
            gp_buf_printf(f, " = ");
            xml(f, a, attr);
            gp_buf_printf(f, " exceeds max ");
        }
        xml(f, b, attr);
    }
    double mism = num_at(json_object_get(sc, "events"), "backend_mismatches");
    if (mism > 0)
        gp_buf_printf(f, "%s%.0f element results differ between the compared backends", attr ? "; " : "\n", mism);
}

char *gp_report_junit(const json_t *report, gp_error *err)
{
    const json_t *scs = json_object_get(report, "scenarios");
    if (!json_is_array(scs)) {
        gp_error_set(err, "JUnit: the report has no \"scenarios\" array");
        return NULL;
    }
    size_t i, nfail = 0, nskip = 0;
    const json_t *sc;
    json_array_foreach(scs, i, sc) {
        const char *name = json_string_value(json_object_get(sc, "name"));
        const char *v = json_string_value(json_object_get(sc, "verdict"));
        if (!name || !v ||
            (strcmp(v, "pass") != 0 && strcmp(v, "warn") != 0 && strcmp(v, "fail") != 0 && strcmp(v, "refused") != 0)) {
            gp_error_set(err, "JUnit: scenario %zu has no name or no verdict pass/warn/fail/refused", i);
            return NULL;
        }
        nfail += strcmp(v, "fail") == 0;
        nskip += strcmp(v, "refused") == 0;
    }
    const char *backend = json_string_value(json_object_get(report, "backend"));
    const char *cmp = json_string_value(json_object_get(report, "compare_backend"));
    const char *schema = json_string_value(json_object_get(report, "schema"));
    if (!backend)
        backend = "unknown";

    gp_buf b = GP_BUF_INIT, *f = &b;
    size_t n = json_array_size(scs);
    gp_buf_puts(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    gp_buf_printf(f, "<testsuites name=\"gradprec\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\">\n", n,
                  nfail, nskip);
    gp_buf_printf(f, "  <testsuite name=\"gradprec\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\">\n", n,
                  nfail, nskip);
    gp_buf_puts(f, "    <properties>\n");
    if (schema) {
        gp_buf_puts(f, "      <property name=\"schema\" value=\"");
        xml(f, schema, 1);
        gp_buf_puts(f, "\"/>\n");
    }
    gp_buf_puts(f, "      <property name=\"backend\" value=\"");
    xml(f, backend, 1);
    gp_buf_puts(f, "\"/>\n");
    if (cmp) {
        gp_buf_puts(f, "      <property name=\"compare_backend\" value=\"");
        xml(f, cmp, 1);
        gp_buf_puts(f, "\"/>\n");
    }
    gp_buf_puts(f, "    </properties>\n");
    json_array_foreach(scs, i, sc) {
        const char *name = json_string_value(json_object_get(sc, "name"));
        const char *v = json_string_value(json_object_get(sc, "verdict"));
        const char *dominant = json_string_value(json_object_get(sc, "dominant_mechanism"));
        if (!dominant)
            dominant = "none";
        gp_buf_puts(f, "    <testcase classname=\"gradprec.");
        xml(f, backend, 1);
        gp_buf_puts(f, "\" name=\"");
        xml(f, name, 1);
        gp_buf_puts(f, "\"");
        if (strcmp(v, "pass") == 0) {
            gp_buf_puts(f, "/>\n");
            continue;
        }
        gp_buf_puts(f, ">\n");
        if (strcmp(v, "refused") == 0) { /* the backend refused the configuration: skipped, saying why */
            const char *why = json_string_value(json_object_get(sc, "refusal"));
            gp_buf_puts(f, "      <skipped message=\"");
            xml(f, why ? why : "refused by the backend", 1);
            gp_buf_puts(f, "\"/>\n");
        } else if (strcmp(v, "fail") == 0) {
            int mismatch = json_array_size(json_object_get(sc, "failed")) == 0 &&
                           num_at(json_object_get(sc, "events"), "backend_mismatches") > 0;
            gp_buf_puts(f, "      <failure message=\"");
            failure_message(f, sc, dominant, 1);
            gp_buf_printf(f, "\" type=\"%s\">", mismatch ? "mismatch" : "threshold");
            gp_buf_puts(f, "scenario ");
            xml(f, name, 0);
            gp_buf_puts(f, " failed\n");
            failure_message(f, sc, dominant, 0);
            put_notes(f, sc);
            gp_buf_puts(f, "</failure>\n");
        } else {
            gp_buf_puts(f, "      <system-out>warn: ");
            gp_buf wb = GP_BUF_INIT;
            fired(&wb, sc);
            char *what = gp_buf_take(&wb);
            if (what && *what) {
                xml(f, what, 0);
                gp_buf_puts(f, " fired; dominant mechanism ");
            } else {
                gp_buf_puts(f, "a mechanism fired; dominant mechanism ");
            }
            free(what);
            xml(f, dominant, 0);
            put_notes(f, sc);
            gp_buf_puts(f, "</system-out>\n");
        }
        gp_buf_puts(f, "    </testcase>\n");
    }
    gp_buf_puts(f, "  </testsuite>\n</testsuites>\n");
    char *out = gp_buf_take(f);
    if (!out)
        gp_error_set(err, "out of memory");
    return out;
}
