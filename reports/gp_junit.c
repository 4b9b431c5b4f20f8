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
static void xml(FILE *f, const char *str, int attr)
{
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned cp;
        int n = utf8_seq(s, &cp);
        if (n == 0) {
            fprintf(f, "\\x%02X", *s);
            s++;
            continue;
        }
        switch (cp) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        case '\t': fputs(attr ? "&#9;" : "\t", f); break;
        case '\n': fputs(attr ? "&#10;" : "\n", f); break;
        case '\r': fputs("&#13;", f); break;
        default:
            if (cp < 0x20)
                fprintf(f, "\\x%02X", cp);
            else if (cp == 0xfffe || cp == 0xffff)
                fprintf(f, "\\u%04X", cp);
            else
                fwrite(s, 1, (size_t)n, f);
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
static void fired(FILE *f, const json_t *sc)
{
    const json_t *ev = json_object_get(sc, "events"), *loss = json_object_get(sc, "loss_by_mechanism");
    const char *sep = "";
    double v;
    if ((v = num_at(ev, "underflow")) > 0) {
        fprintf(f, "%sunderflow (%.0f of %.0f roundings)", sep, v, num_at(ev, "roundings_nonzero"));
        sep = ", ";
    }
    if ((v = num_at(ev, "absorbed")) > 0) {
        fprintf(f, "%sabsorption (%.0f of %.0f additions)", sep, v, num_at(ev, "additions_nonzero"));
        sep = ", ";
    }
    if ((v = num_at(ev, "overflow")) > 0) {
        fprintf(f, "%soverflow (%.0f events)", sep, v);
        sep = ", ";
    }
    if ((v = num_at(ev, "nonfinite")) > 0) {
        fprintf(f, "%snon-finite (%.0f final gradients)", sep, v);
        sep = ", ";
    }
    if ((v = num_at(loss, "normalization")) > 0) {
        fprintf(f, "%snormalization (loss %.6g)", sep, v);
        sep = ", ";
    }
    if ((v = num_at(json_object_get(sc, "metrics"), "skipped_steps")) > 0)
        fprintf(f, "%sskipped steps (%.0f)", sep, v);
}

/* The failure message: dominant mechanism, each failed metric with value and max. */
static void failure_message(FILE *f, const json_t *sc, const char *dominant, int attr)
{
    char a[64], b[64];
    fputs("dominant mechanism ", f);
    xml(f, dominant, attr);
    size_t i;
    const json_t *fm;
    json_array_foreach(json_object_get(sc, "failed"), i, fm) {
        const char *metric = json_string_value(json_object_get(fm, "metric"));
        value_text(json_object_get(fm, "value"), a, sizeof a);
        value_text(json_object_get(fm, "max"), b, sizeof b);
        fputs(attr ? "; " : "\n", f);
        xml(f, metric ? metric : "?", attr);
        fprintf(f, " = ");
        xml(f, a, attr);
        fprintf(f, " exceeds max ");
        xml(f, b, attr);
    }
    double mism = num_at(json_object_get(sc, "events"), "backend_mismatches");
    if (mism > 0)
        fprintf(f, "%s%.0f element results differ between the compared backends", attr ? "; " : "\n", mism);
}

char *gp_report_junit(const json_t *report, gp_error *err)
{
    const json_t *scs = json_object_get(report, "scenarios");
    if (!json_is_array(scs)) {
        gp_error_set(err, "JUnit: the report has no \"scenarios\" array");
        return NULL;
    }
    size_t i, nfail = 0;
    const json_t *sc;
    json_array_foreach(scs, i, sc) {
        const char *name = json_string_value(json_object_get(sc, "name"));
        const char *v = json_string_value(json_object_get(sc, "verdict"));
        if (!name || !v || (strcmp(v, "pass") != 0 && strcmp(v, "warn") != 0 && strcmp(v, "fail") != 0)) {
            gp_error_set(err, "JUnit: scenario %zu has no name or no verdict pass/warn/fail", i);
            return NULL;
        }
        nfail += strcmp(v, "fail") == 0;
    }
    const char *backend = json_string_value(json_object_get(report, "backend"));
    const char *cmp = json_string_value(json_object_get(report, "compare_backend"));
    const char *schema = json_string_value(json_object_get(report, "schema"));
    if (!backend)
        backend = "unknown";

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        gp_error_set(err, "out of memory");
        return NULL;
    }
    size_t n = json_array_size(scs);
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f, "<testsuites name=\"gradprec\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"0\">\n", n, nfail);
    fprintf(f, "  <testsuite name=\"gradprec\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"0\">\n", n,
            nfail);
    fputs("    <properties>\n", f);
    if (schema) {
        fputs("      <property name=\"schema\" value=\"", f);
        xml(f, schema, 1);
        fputs("\"/>\n", f);
    }
    fputs("      <property name=\"backend\" value=\"", f);
    xml(f, backend, 1);
    fputs("\"/>\n", f);
    if (cmp) {
        fputs("      <property name=\"compare_backend\" value=\"", f);
        xml(f, cmp, 1);
        fputs("\"/>\n", f);
    }
    fputs("    </properties>\n", f);
    json_array_foreach(scs, i, sc) {
        const char *name = json_string_value(json_object_get(sc, "name"));
        const char *v = json_string_value(json_object_get(sc, "verdict"));
        const char *dominant = json_string_value(json_object_get(sc, "dominant_mechanism"));
        if (!dominant)
            dominant = "none";
        fputs("    <testcase classname=\"gradprec.", f);
        xml(f, backend, 1);
        fputs("\" name=\"", f);
        xml(f, name, 1);
        fputs("\"", f);
        if (strcmp(v, "pass") == 0) {
            fputs("/>\n", f);
            continue;
        }
        fputs(">\n", f);
        if (strcmp(v, "fail") == 0) {
            int mismatch = json_array_size(json_object_get(sc, "failed")) == 0 &&
                           num_at(json_object_get(sc, "events"), "backend_mismatches") > 0;
            fputs("      <failure message=\"", f);
            failure_message(f, sc, dominant, 1);
            fprintf(f, "\" type=\"%s\">", mismatch ? "mismatch" : "threshold");
            fputs("scenario ", f);
            xml(f, name, 0);
            fputs(" failed\n", f);
            failure_message(f, sc, dominant, 0);
            fputs("</failure>\n", f);
        } else {
            fputs("      <system-out>warn: ", f);
            char *what = NULL;
            size_t wlen = 0;
            FILE *w = open_memstream(&what, &wlen);
            if (w) {
                fired(w, sc);
                if (fclose(w) != 0) {
                    free(what);
                    what = NULL;
                }
            }
            if (what && *what) {
                xml(f, what, 0);
                fputs(" fired; dominant mechanism ", f);
            } else {
                fputs("a mechanism fired; dominant mechanism ", f);
            }
            free(what);
            xml(f, dominant, 0);
            fputs("</system-out>\n", f);
        }
        fputs("    </testcase>\n", f);
    }
    fputs("  </testsuite>\n</testsuites>\n", f);
    if (fclose(f) != 0) {
        free(buf);
        gp_error_set(err, "out of memory");
        return NULL;
    }
    return buf;
}
