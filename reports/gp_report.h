/* gp_report.h — report writers. report.json (schema "gradprec-report/1") is the
 * source of truth; report.md is the pull-request view; the terminal table is one line
 * a scenario. Same inputs and seed give byte-identical JSON and Markdown (no times or
 * paths inside; timing goes to timing.json). Files are written through base/gp_out.h,
 * so a reader never sees half a report. */
#ifndef GP_REPORT_H
#define GP_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "../base/gp_error.h"
#include "../harness/run/gp_runner.h"
#include "../harness/scenario/gp_scenario.h"

/* One run: the scenarios (in order), their results and the backend labels. */
typedef struct {
    const gp_scenario *const *scenarios;
    const gp_result *results;
    size_t n;
    const char *backend;         /* label of the backend under test */
    const char *compare_backend; /* label of the compared backend, or NULL */
    const size_t *index;         /* position of each scenario in the unsharded run, or
                                    NULL for 0, 1, 2, ... */
} gp_run_report;

/* The notes that explain a verdict (a skipped step, the clip order, where overflows
 * were, a threshold raised to the format floor, ...), one sentence each, however many:
 * all of them in report.json ("notes") and JUnit; report.md and the terminal table show
 * the first GP_NOTES_SHOWN and say how many more there are. gp_report_notes fills `out`
 * (free it with gp_notes_free); oom is set when a note could not be kept (the writers
 * then fail: out of memory). */
#define GP_NOTES_SHOWN 12
typedef struct {
    int n, oom;
    char **text; /* [n] malloc'ed sentences */
} gp_notes;
void gp_report_notes(const gp_scenario *sc, const gp_result *r, gp_notes *out);
void gp_notes_free(gp_notes *notes);


/* The whole report as JSON text (malloc'ed, caller frees), or NULL on out of memory. */
char *gp_report_json(const gp_run_report *r);

/* The report of shard I of N (`gradprec run --shard I/N`, N > 1) of a run of `total`
 * scenarios: gp_report_json plus "shard": {"index", "count", "scenarios"}, which
 * `gradprec report merge` checks to know the shards cover the whole run. */
char *gp_report_json_shard(const gp_run_report *r, size_t shard_index, size_t shard_count, size_t total);

/* The report root from its parts (steals `scenarios`, a JSON array of scenario
 * objects in index order): schema, backends, the summary recomputed from the
 * scenarios' verdicts, the scenarios. Used by gp_report_json and by shard merging, so
 * a merged report is byte-identical to the unsharded one. */
json_t *gp_report_root(const char *backend, const char *compare_backend, json_t *scenarios);

/* Serialize a report root exactly as report.json is written (malloc'ed, newline at the
 * end), or NULL on out of memory. */
char *gp_report_dump(const json_t *root);

/* Read and check a report.json: readable, well-formed JSON, schema "gradprec-report/1",
 * a "scenarios" array of objects with "name", "index", "verdict". Returns a new
 * reference, or NULL with err naming the file and the problem. */
json_t *gp_report_load(const char *path, gp_error *err);

/* The same checks on report text in memory; `name` labels messages. */
json_t *gp_report_parse(const char *text, size_t len, const char *name, gp_error *err);

/* The Markdown report (malloc'ed), or NULL. */
char *gp_report_markdown(const gp_run_report *r);

/* One line naming the first output on which the compared backends disagreed (entry
 * point, output, step, micro-batch, tensor and element where they apply, both values
 * in hex), or "none". */
void gp_mismatch_describe(const gp_result *r, char *buf, size_t n);

/* Print the summary table, a line a scenario (and, under it, the first difference of
 * the compared backends where there is one). */
void gp_report_table(FILE *out, const gp_run_report *r);

/* Write text to path atomically (base/gp_out.h: an exclusive temporary beside it, then
 * rename). Returns 0 or -1 with err. */
int gp_write_atomic(const char *path, const char *text, gp_error *err);

#endif
