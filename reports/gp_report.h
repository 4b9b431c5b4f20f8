/* gp_report.h — report writers. report.json (schema "gradprec-report/1") is the
 * source of truth; report.md is the pull-request view; the terminal table is one line
 * a scenario. Same inputs and seed give byte-identical JSON and Markdown (no times or
 * paths inside; timing goes to timing.json). Files are written to a temporary name
 * and renamed, so a reader never sees half a report. */
#ifndef GP_REPORT_H
#define GP_REPORT_H

#include <stdio.h>

#include "../harness/gp_error.h"
#include "../harness/gp_runner.h"
#include "../harness/gp_scenario.h"

/* One run: the scenarios (in order), their results and the backend labels. */
typedef struct {
    const gp_scenario *const *scenarios;
    const gp_result *results;
    size_t n;
    const char *backend;         /* label of the backend under test */
    const char *compare_backend; /* label of the compared backend, or NULL */
} gp_run_report;

/* "pass", "warn", "fail". */
const char *gp_verdict_name(gp_verdict v);

/* The whole report as JSON text (malloc'ed, caller frees), or NULL on out of memory. */
char *gp_report_json(const gp_run_report *r);

/* The Markdown report (malloc'ed), or NULL. */
char *gp_report_markdown(const gp_run_report *r);

/* Print the summary table, a line a scenario. */
void gp_report_table(FILE *out, const gp_run_report *r);

/* Write text to path atomically (path.tmp then rename). Returns 0 or -1 with err. */
int gp_write_atomic(const char *path, const char *text, gp_error *err);

#endif
