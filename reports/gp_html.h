/* gp_html.h — the HTML report: one self-contained page (no network, no scripts needed
 * to read it; opens from a CI artifact) with the summary table and inline SVG charts,
 * rendered from a parsed report.json (schema gradprec-report/1). */
#ifndef GP_HTML_H
#define GP_HTML_H

#include <jansson.h>

#include "../base/gp_error.h"

/* The page as malloc'ed text (caller frees), or NULL with err set when the report
 * lacks what the page needs. Same report -> byte-identical page. */
char *gp_report_html(const json_t *report, gp_error *err);

#endif
