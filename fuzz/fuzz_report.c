/* fuzz_report.c — libFuzzer target: the parsers of the other files gradprec reads,
 * under ASan+UBSan in the fuzz build: report.json (gate, report merge, report html) and
 * the gate's tolerances file. The first byte picks the parser; the rest is the text.
 *  - report: gp_report_parse either refuses it with a message or accepts it; an accepted
 *    report must render as HTML and gate against itself with no regression, nothing
 *    improved and nothing missing (a report is always within tolerance of itself).
 *  - tolerances: gp_gate_parse_tolerances either refuses with a message or gives
 *    non-negative finite tolerances. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../reports/gp_gate.h"
#include "../reports/gp_html.h"
#include "../reports/gp_report.h"
#include "gp_fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    gp_error e = {""};
    if (data[0] & 1) {
        gp_gate_tolerances t;
        if (gp_gate_parse_tolerances(text, len, "fuzz", &t, &e) != 0) {
            GP_FUZZ_CHECK(e.msg[0] != '\0', "a refused tolerances file without a message");
            return 0;
        }
        for (int m = 0; m < GP_NMETRICS; m++) {
            gp_gate_tol tol = gp_gate_tolerance(&t, gp_metric_name((gp_metric)m));
            GP_FUZZ_CHECK(tol.rel >= 0 && tol.abs >= 0 && isfinite(tol.rel) && isfinite(tol.abs),
                          "metric %d: tolerance rel %g abs %g", m, tol.rel, tol.abs);
        }
        return 0;
    }
    json_t *r = gp_report_parse(text, len, "fuzz", &e);
    if (!r) {
        GP_FUZZ_CHECK(e.msg[0] != '\0', "a refused report without a message");
        return 0;
    }
    char *html = gp_report_html(r, &e);
    GP_FUZZ_CHECK(html != NULL, "an accepted report does not render: %s", e.msg);
    free(html);
    gp_gate_result g;
    if (gp_gate_compare(r, "base", r, "cur", NULL, &g, &e) == 0) {
        GP_FUZZ_CHECK(g.regressed == 0 && g.changed == 0 && g.improved == 0 && g.added == 0,
                      "a report gated against itself: %zu regressed, %zu changed, %zu improved, %zu new", g.regressed,
                      g.changed, g.improved, g.added);
        gp_gate_free(&g);
    }
    json_decref(r);
    return 0;
}
