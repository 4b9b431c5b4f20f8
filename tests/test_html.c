/* test_html.c — the HTML report (reports/gp_html.c): a page from a real run and from
 * hand-made reports; structure (one <svg> a chart, each with axis labels, tick labels
 * and a legend), thresholds computed from the formats, escaping, inf/nan strings, the
 * optimizer placeholders and their charts once the arrays exist, byte-identical
 * output, errors; then the page opened in headless Chromium when it is installed.
 * argv[1]: the tests source directory (render_html.sh); argv[2]: the gradprec binary
 * (the tests that need a run are skipped without it). The pages, screenshots and DOM
 * dumps are written to a scratch directory, removed after a pass unless GP_TEST_KEEP
 * is set. */
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gp_test.h"

#include "reports/gp_html.h"
#include "reports/gp_report.h"

static const char *g_src_dir = ".";
static const char *g_gradprec = NULL;
static char g_tmp[512]; /* this run's scratch directory */

static const char *const NO_OPT = "no scenario with more than one optimizer step in this report";
static const char *const SVG_NS = "xmlns=\"http://www.w3.org/2000/svg\"";

/* ---- helpers ---- */

/* printf into a new string (caller frees). */
static char *strf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static char *strf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* Run a shell command; its exit status, or -1 when it did not exit normally. */
static int shell(char *cmd)
{
    fflush(stdout);
    int rc = system(cmd);
    free(cmd);
    return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    size_t k = strlen(needle);
    for (const char *p = strstr(hay, needle); p; p = strstr(p + k, needle))
        n++;
    return n;
}

static char *render(const json_t *report)
{
    gp_error e = {""};
    char *page = gp_report_html(report, &e);
    if (!page)
        fail_msg("gp_report_html: %s", e.msg);
    return page;
}

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j)
        fail_msg("test JSON line %d: %s", je.line, je.text);
    return j;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

/* The text of the i-th <svg>...</svg> of the page (malloc'ed), or NULL. */
static char *svg_at(const char *page, int i)
{
    const char *p = page;
    for (int k = 0; p && k <= i; k++) {
        p = strstr(p, "<svg");
        if (p && k < i)
            p += 4;
    }
    if (!p)
        return NULL;
    const char *end = strstr(p, "</svg>");
    assert_non_null(end);
    size_t n = (size_t)(end + 6 - p);
    char *s = malloc(n + 1);
    assert_non_null(s);
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

/* Every chart: a title, labelled axes with tick labels, a legend, something drawn. */
static void check_charts(const char *page, int want)
{
    int n = count(page, "<svg");
    assert_int_equal(n, want);
    assert_int_equal(count(page, "</svg>"), want);
    for (int i = 0; i < n; i++) {
        char *svg = svg_at(page, i);
        if (!strstr(svg, "<title>") || !strstr(svg, "class=\"title\"") || !strstr(svg, "class=\"xlabel\"") ||
            !strstr(svg, "class=\"ylabel\"") || count(svg, "class=\"ticklabel\"") < 4 ||
            !strstr(svg, "class=\"legend\"") || count(svg, "<text class=\"leg") < 1 || (!strstr(svg, "<polyline") && !strstr(svg, "class=\"bar\"")))
            fail_msg("chart %d lacks a title, axis labels, ticks, legend or data:\n%.400s", i, svg);
        free(svg);
    }
}

/* Self-contained: nothing fetched, no scripts; the only URL is the SVG namespace. */
static void check_self_contained(const char *page)
{
    char *copy = strdup(page);
    assert_non_null(copy);
    size_t k = strlen(SVG_NS);
    for (char *p = strstr(copy, SVG_NS); p; p = strstr(p, SVG_NS))
        memset(p, '_', k);
    assert_null(strstr(copy, "http://"));
    assert_null(strstr(copy, "https://"));
    assert_null(strstr(copy, "<script"));
    assert_null(strstr(copy, "<link"));
    assert_null(strstr(copy, "<img"));
    assert_null(strstr(copy, "src="));
    assert_null(strstr(copy, "url("));
    assert_null(strstr(copy, "@import"));
    free(copy);
}

/* ---- a report from a real run ---- */

static json_t *g_run_report; /* loaded once by setup_run */

static int setup_run(void **state)
{
    (void)state;
    if (!g_gradprec)
        return 0;
    /* both presets fail their thresholds on purpose: exit 1 */
    int rc = shell(strf("'%s' run --quiet --preset long-accum-bf16-k64 --preset fp16-tiny-grads-noscale "
                        "--out '%s/run' >'%s/run.txt' 2>&1",
                        g_gradprec, g_tmp, g_tmp));
    if (rc != 0 && rc != 1) {
        fprintf(stderr, "gradprec run: exit %d (see %s/run.txt)\n", rc, g_tmp);
        return -1;
    }
    char *path = strf("%s/run/report.json", g_tmp);
    gp_error e = {""};
    g_run_report = gp_report_load(path, &e);
    free(path);
    if (!g_run_report) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    return 0;
}

static int teardown_run(void **state)
{
    (void)state;
    json_decref(g_run_report);
    g_run_report = NULL;
    return 0;
}

#define NEED_RUN()                                                             \
    do {                                                                       \
        if (!g_run_report) {                                                   \
            printf("# no gradprec binary given (argv[2]): skipped\n");         \
            skip();                                                            \
        }                                                                      \
    } while (0)

static void test_run_page_structure(void **state)
{
    (void)state;
    NEED_RUN();
    char *page = render(g_run_report);
    assert_true(strncmp(page, "<!DOCTYPE html>\n", 16) == 0);
    assert_non_null(strstr(page, "<meta charset=\"utf-8\">"));
    assert_non_null(strstr(page, "</html>\n"));
    /* header and summary */
    assert_non_null(strstr(page, "gradprec-report/1"));
    assert_non_null(strstr(page, "<span class=\"badge fail\">2 fail</span>"));
    assert_non_null(strstr(page, "long-accum-bf16-k64"));
    assert_non_null(strstr(page, "fp16-tiny-grads-noscale"));
    assert_non_null(strstr(page, "underflow_frac = "));
    assert_non_null(strstr(page, "<td>underflow</td>")); /* the dominant mechanism */
    /* charts: errors + one histogram a scenario; no optimizer arrays -> placeholders */
    check_charts(page, 1 + 2);
    assert_int_equal(count(page, NO_OPT), 2);
    assert_non_null(strstr(page, "Error against accumulation step"));
    assert_non_null(strstr(page, "Stale-update fraction over the LR schedule"));
    assert_non_null(strstr(page, "Loss-scale trajectory"));
    /* the error chart: one line a scenario, log y, linear x (K = 64 is not > 64),
     * legend by accumulator dtype */
    char *err_chart = svg_at(page, 0);
    assert_int_equal(count(err_chart, "<polyline"), 2);
    assert_non_null(strstr(err_chart, "relative error of the accumulator (log)"));
    assert_null(strstr(err_chart, "micro-batches) (log scale)"));
    assert_non_null(strstr(err_chart, ">accumulator bf16<"));
    assert_non_null(strstr(err_chart, ">accumulator fp32<"));
    free(err_chart);
    /* the fp16 histogram: fp16's thresholds from the format, as values and powers of 2 */
    char *h16 = svg_at(page, 2);
    assert_non_null(strstr(h16, "fp16-tiny-grads-noscale"));
    assert_non_null(strstr(h16, "fp16 grad: rounds to 0 below 2.98e-08 = 2^-25"));
    assert_non_null(strstr(h16, "fp16 grad: min subnormal 5.96e-08 = 2^-24"));
    assert_non_null(strstr(h16, "fp16 grad: min normal 6.1e-05 = 2^-14"));
    assert_int_equal(count(h16, "class=\"marker\""), 3);
    assert_int_equal(count(h16, "class=\"bar\""),
                     (int)json_array_size(json_object_get(
                         json_object_get(json_array_get(json_object_get(g_run_report, "scenarios"), 1),
                                         "grad_magnitude_log2_histogram"),
                         "counts")));
    free(h16);
    /* the bf16-accumulator histogram: the absorption lines, 2^-(8+1) |acc| */
    char *hbf = svg_at(page, 1);
    assert_non_null(strstr(hbf, "bf16 acc: absorbs &lt; 2^-9\xc2\xb7|acc| at |acc| = median |g|"));
    assert_non_null(strstr(hbf, "bf16 acc: absorbs &lt; 2^-9\xc2\xb7|acc| at |acc| = 64\xc2\xb7median |g|"));
    free(hbf);
    /* what is off the chart is still said: bf16's min normal, under the histogram */
    assert_non_null(strstr(page, "min normal 1.18e-38 = 2^-126"));
    /* details, collapsed, one a scenario */
    assert_int_equal(count(page, "<details id=\"scenario-"), 2);
    assert_null(strstr(page, "<details open"));
    assert_non_null(strstr(page, "<h4>Per tensor</h4>"));
    check_self_contained(page);
    free(page);
}

static void test_run_page_byte_identical(void **state)
{
    (void)state;
    NEED_RUN();
    char *a = render(g_run_report), *b = render(g_run_report);
    json_t *copy = json_deep_copy(g_run_report);
    char *c = render(copy);
    assert_string_equal(a, b);
    assert_string_equal(a, c);
    /* and through the CLI: `gradprec report html` twice, same bytes as the library */
    assert_int_equal(shell(strf("'%s' report html --out '%s/p1.html' '%s/run/report.json' && "
                                "'%s' report html --out '%s/p2.html' '%s/run/report.json' && "
                                "cmp '%s/p1.html' '%s/p2.html'",
                                g_gradprec, g_tmp, g_tmp, g_gradprec, g_tmp, g_tmp, g_tmp, g_tmp)),
                     0);
    char *path = strf("%s/p1.html", g_tmp);
    FILE *f = fopen(path, "rb");
    free(path);
    assert_non_null(f);
    size_t n = strlen(a);
    char *d = malloc(n + 2);
    assert_non_null(d);
    assert_int_equal(fread(d, 1, n + 1, f), n);
    d[n] = '\0';
    fclose(f);
    assert_string_equal(a, d);
    free(d);
    json_decref(copy);
    free(a);
    free(b);
    free(c);
}

/* ---- hand-made reports ---- */

/* Scenario 0: a hostile name, fp16 grads into bf16, a dynamic loss scale, inf/nan in
 * the metrics and the error trajectory. Scenario 1: 100 steps of an fp32 accumulator
 * (log x axis). `extra0` is spliced into scenario 0 (optimizer arrays). */
static json_t *handmade(const char *extra0)
{
    char steps[4096];
    int n = 0;
    for (int k = 1; k <= 100; k++)
        n += snprintf(steps + n, sizeof steps - (size_t)n, "%s%g", k > 1 ? ", " : "", 1e-8 * k);
    char *text = malloc(16384);
    assert_non_null(text);
    snprintf(text, 16384,
             "{\"schema\": \"gradprec-report/1\", \"backend\": \"cpu<&>\", \"compare_backend\": null,\n"
             " \"summary\": {\"scenarios\": 2, \"pass\": 1, \"warn\": 0, \"fail\": 1, \"verdict\": \"fail\"},\n"
             " \"scenarios\": [\n"
             "  {\"name\": \"a<b&\\\"c\", \"index\": 0, \"verdict\": \"fail\", \"dominant_mechanism\": \"non-finite\",\n"
             "   \"failed\": [{\"metric\": \"grad_rel_err_fullbatch\", \"value\": \"inf\", \"max\": 0.001}],\n"
             "   \"thresholds\": {\"grad_rel_err_fullbatch\": 0.001},\n"
             "   \"config\": {\"seed\": 7, \"reduction\": \"sum\", \"fullbatch\": \"sum\",\n"
             "     \"precision\": {\"grad\": \"fp16\", \"accumulator\": \"bf16\", \"rounding\": \"rne\", \"ftz\": false},\n"
             "     \"batch\": {\"accumulation_steps\": 6, \"microbatches\": 6, \"tokens\": [1, 2, 3, 4, 5, 6]},\n"
             "     \"loss_scale\": {\"mode\": \"dynamic\", \"init\": 1024.0}},\n"
             "   \"metrics\": {\"grad_rel_err_fullbatch\": \"inf\", \"max_ulp_err\": \"nan\", \"absorbed_frac\": 0.25,\n"
             "     \"underflow_frac\": 0.125, \"subnormal_frac\": 0.5, \"normalization_rel_err\": 0.0},\n"
             "   \"loss_by_mechanism\": {\"underflow\": 0.5, \"non-finite\": \"inf\"},\n"
             "   \"events\": {\"absorbed\": 3, \"overflow\": 1},\n"
             "   \"tensors\": [{\"name\": \"w<1>\", \"size\": 4, \"metrics\": {\"grad_rel_err_fullbatch\": \"inf\"}}],\n"
             "   \"error_by_step\": [0.0, 0.001, \"inf\", 0.002, \"nan\", 0.005],\n"
             "   \"grad_magnitude_log2_histogram\": {\"first_log2\": -20, \"counts\": [1, 10, 100, 0, 50, 5]},\n"
             "   \"notes\": [\"note <with> markup & \\\"quotes\\\"\"]%s},\n"
             "  {\"name\": \"plain\", \"index\": 1, \"verdict\": \"pass\", \"dominant_mechanism\": \"rounding\",\n"
             "   \"failed\": [], \"thresholds\": {},\n"
             "   \"config\": {\"precision\": {\"grad\": \"fp32\", \"accumulator\": \"fp32\"},\n"
             "     \"batch\": {\"microbatches\": 100}, \"loss_scale\": {\"mode\": \"none\"}},\n"
             "   \"metrics\": {\"grad_rel_err_fullbatch\": 1e-6}, \"tensors\": [],\n"
             "   \"error_by_step\": [%s],\n"
             "   \"grad_magnitude_log2_histogram\": {\"first_log2\": -4, \"counts\": [3, 4, 5]}}\n"
             " ]}\n",
             extra0, steps);
    json_t *j = parse(text);
    free(text);
    return j;
}

static void test_escaping_and_nonfinite(void **state)
{
    (void)state;
    json_t *r = handmade("");
    char *page = render(r);
    /* every string escaped: names, tensor names, notes, backend */
    assert_non_null(strstr(page, "a&lt;b&amp;&quot;c"));
    assert_null(strstr(page, "a<b&\"c"));
    assert_null(strstr(page, "a<b"));
    assert_non_null(strstr(page, "w&lt;1&gt;"));
    assert_non_null(strstr(page, "note &lt;with&gt; markup &amp; &quot;quotes&quot;"));
    assert_non_null(strstr(page, "cpu&lt;&amp;&gt;"));
    /* "inf"/"nan" printed as text; numbers %.3g; integers exactly */
    assert_non_null(strstr(page, "grad_rel_err_fullbatch = inf &gt; 0.001"));
    assert_non_null(strstr(page, "<td class=\"num\">inf</td>"));
    assert_non_null(strstr(page, ">nan</td>"));
    assert_non_null(strstr(page, "<td class=\"num\">0.125</td>"));
    /* charts: non-finite points skipped (the line breaks), the zero on the bottom edge */
    check_charts(page, 1 + 2);
    char *err_chart = svg_at(page, 0);
    assert_int_equal(count(err_chart, "<polyline"), 3 + 1); /* 3 pieces + the 100-step line */
    assert_non_null(strstr(err_chart, "micro-batches) (log scale)")); /* K = 100 > 64 */
    free(err_chart);
    assert_non_null(strstr(page, "2 non-finite values (inf/nan) not drawn"));
    assert_non_null(strstr(page, "1 value of exactly 0 drawn on the bottom edge"));
    /* the histogram: one bar a non-zero bin; the dynamic loss scale moves thresholds */
    char *h = svg_at(page, 1);
    assert_int_equal(count(h, "class=\"bar\""), 5);
    assert_non_null(strstr(h, "fp16 grad: min normal 2^-14 / S = 5.96e-08"));
    assert_null(strstr(h, "min subnormal 2^-24 / S")); /* ten binades below the data: */
    free(h);
    assert_non_null(strstr(page, "min subnormal 2^-24 / S = 5.82e-11")); /* listed under it */
    assert_non_null(strstr(page, "Loss scale S = 1024 = 2^10"));
    assert_int_equal(count(page, NO_OPT), 2);
    check_self_contained(page);
    free(page);
    json_decref(r);
}

static void test_optimizer_charts_when_arrays_exist(void **state)
{
    (void)state;
    json_t *r = handmade(",\n   \"stale_update_by_step\": [0.0, 0.001, 0.01, 0.1, 0.5, \"nan\"],\n"
                         "   \"loss_scale_by_step\": [65536, 65536, 32768, 65536, 16384]");
    char *page = render(r);
    assert_null(strstr(page, NO_OPT));
    check_charts(page, 1 + 2 + 2);
    char *stale = svg_at(page, 3), *ls = svg_at(page, 4);
    assert_non_null(strstr(stale, "<title>Stale-update fraction over the LR schedule</title>"));
    assert_non_null(strstr(stale, "optimizer step"));
    assert_non_null(strstr(ls, "<title>Loss-scale trajectory</title>"));
    assert_non_null(strstr(ls, "loss scale (log)"));
    assert_int_equal(count(ls, "<polyline"), 1);
    assert_int_equal(count(ls, "<circle"), 5);
    free(stale);
    free(ls);
    assert_int_equal(count(page, "1 scenario without <code>stale_update_by_step</code> not drawn"), 1);
    char *again = render(r);
    assert_string_equal(page, again);
    free(again);
    free(page);
    json_decref(r);
}

static void test_empty_and_bad_reports(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{\"schema\": \"gradprec-report/1\", \"backend\": \"cpu\"}",
        "{\"scenarios\": 3}",
        "{\"scenarios\": [1]}",
        "[]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *r = parse(bad[i]);
        gp_error e = {""};
        char *page = gp_report_html(r, &e);
        assert_null(page);
        assert_true(e.msg[0] != '\0');
        assert_null(strchr(e.msg, '\n'));
        json_decref(r);
    }
    gp_error e = {""};
    assert_null(gp_report_html(NULL, &e));
    assert_true(e.msg[0] != '\0');
    json_t *r = parse("{\"schema\": \"gradprec-report/1\", \"scenarios\": []}");
    json_t *r2 = parse("{\"scenarios\": [{}]}"); /* a scenario with nothing in it */
    char *page = render(r), *page2 = render(r2);
    assert_true(strncmp(page, "<!DOCTYPE html>", 15) == 0);
    assert_non_null(strstr(page, "0 scenarios"));
    assert_non_null(strstr(page2, "(unnamed)"));
    free(page);
    free(page2);
    json_decref(r);
    json_decref(r2);
}

static void test_many_scenarios(void **state)
{
    (void)state;
    json_t *scs = json_array();
    for (int i = 0; i < 13; i++)
        json_array_append_new(scs, json_pack("{s:s, s:i, s:s, s:{s:{s:s, s:s}}, s:[f, f], s:{s:i, s:[i, i]}}",
                                             "name", i == 12 ? "thirteenth" : "s", "index", i, "verdict", "pass",
                                             "config", "precision", "grad", "bf16", "accumulator", "fp32",
                                             "error_by_step", 1e-3, 2e-3, "grad_magnitude_log2_histogram",
                                             "first_log2", -3, "counts", 2, 1));
    json_t *r = json_pack("{s:s, s:o}", "schema", "gradprec-report/1", "scenarios", scs);
    char *page = render(r);
    check_charts(page, 1 + 12); /* histograms capped at 12, with a note */
    assert_non_null(strstr(page, "Histograms of the first 12 scenarios only; the other 1 "));
    assert_int_equal(count(page, "<details id=\"scenario-"), 13); /* all in the details */
    assert_non_null(strstr(page, "thirteenth"));
    free(page);
    json_decref(r);
}

/* A 5000-step series is thinned to at most 2000 points, the last step kept. */
static void test_long_series_thinned(void **state)
{
    (void)state;
    json_t *steps = json_array();
    for (int k = 1; k <= 5000; k++)
        json_array_append_new(steps, json_real(k == 5000 ? 0.5 : 1e-6 * k));
    json_t *r = json_pack("{s:[{s:s, s:{s:{s:s}}, s:o}]}", "scenarios", "name", "long", "config", "precision",
                          "accumulator", "fp32", "error_by_step", steps);
    char *page = render(r);
    char *chart = svg_at(page, 0);
    const char *pts = strstr(chart, "points=\"");
    assert_non_null(pts);
    int commas = 0;
    for (const char *c = pts; *c != '/'; c++)
        commas += *c == ',';
    assert_int_equal(commas, 1667); /* stride 3: steps 1, 4, ..., 4996 (1666 of them), then 5000 */
    assert_non_null(strstr(page, "One step in 3 drawn (and the last)."));
    assert_non_null(strstr(pts, " 724.0,59.1\"")); /* the last point: x = K (right edge), 0.5 */
    free(chart);
    free(page);
    json_decref(r);
}

/* ---- headless Chromium ---- */

static void render_in_chromium(const char *name, const char *page, int min_svg)
{
    char *path = strf("%s/%s.html", g_tmp, name), *out = strf("%s/%s-chromium", g_tmp, name);
    write_file(path, page);
    int rc = shell(strf("MIN_SVG=%d sh '%s/render_html.sh' '%s' '%s'", min_svg, g_src_dir, path, out));
    if (rc != 0 && rc != 77) /* 77: the script said "chromium not installed: skipped" */
        fail_msg("%s: the page did not render as expected (exit %d, see %s)", name, rc, out);
    free(path);
    free(out);
}

static void test_chromium(void **state)
{
    (void)state;
    json_t *r = handmade(",\n   \"stale_update_by_step\": [0.0, 0.001, 0.01, 0.1, 0.5],\n"
                         "   \"loss_scale_by_step\": [65536, 65536, 32768, 65536, 16384]");
    char *page = render(r);
    render_in_chromium("handmade", page, 5);
    free(page);
    json_decref(r);
    if (g_run_report) {
        page = render(g_run_report);
        render_in_chromium("run", page, 3);
        free(page);
    }
}

/* A real multi-step run: the optimizer charts are drawn from the simulation's own
 * per-step arrays (the stale fraction of the bf16-weight preset, 0 then 1 from step
 * 51; the loss scale of the overflow preset, 65536 then 32768), and Chromium renders
 * all five charts. */
static void test_run_optimizer_charts(void **state)
{
    (void)state;
    NEED_RUN();
    int rc = shell(strf("'%s' run --quiet --preset bf16-weights-cosine-no-master --preset fp16-overflow-scale-backoff "
                        "--out '%s/opt' >'%s/opt.txt' 2>&1",
                        g_gradprec, g_tmp, g_tmp));
    assert_int_equal(rc, 0); /* the no-master preset fails, as it expects (exit 0) */
    char *path = strf("%s/opt/report.json", g_tmp);
    gp_error e = {""};
    json_t *r = gp_report_load(path, &e);
    free(path);
    assert_non_null(r);
    char *page = render(r);
    assert_null(strstr(page, NO_OPT));
    check_charts(page, 1 + 2 + 2);
    char *stale = svg_at(page, 3), *ls = svg_at(page, 4);
    assert_non_null(strstr(stale, "<title>Stale-update fraction over the LR schedule</title>"));
    assert_int_equal(count(stale, "<polyline"), 2);
    assert_non_null(strstr(ls, "<title>Loss-scale trajectory</title>"));
    assert_non_null(strstr(ls, "fp16-overflow-scale-backoff"));
    free(stale);
    free(ls);
    render_in_chromium("optimizer", page, 5);
    free(page);
    json_decref(r);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        g_src_dir = argv[1];
    if (argc > 2)
        g_gradprec = argv[2];
    const char *tmp = getenv("TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s/gp_test_html_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    printf("# scratch directory %s\n", g_tmp);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_page_structure),
        cmocka_unit_test(test_run_page_byte_identical),
        cmocka_unit_test(test_escaping_and_nonfinite),
        cmocka_unit_test(test_optimizer_charts_when_arrays_exist),
        cmocka_unit_test(test_empty_and_bad_reports),
        cmocka_unit_test(test_many_scenarios),
        cmocka_unit_test(test_long_series_thinned),
        cmocka_unit_test(test_chromium),
        cmocka_unit_test(test_run_optimizer_charts),
    };
    int failed = cmocka_run_group_tests(tests, setup_run, teardown_run);
    if (failed == 0 && !getenv("GP_TEST_KEEP")) {
        if (shell(strf("rm -rf '%s'", g_tmp)) != 0)
            fprintf(stderr, "could not remove %s\n", g_tmp);
    } else
        printf("# kept %s for inspection\n", g_tmp);
    return failed;
}
