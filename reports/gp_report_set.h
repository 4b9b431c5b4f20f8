/* gp_report_set.h — the files of one run, rendered and written together: report.json
 * (the source of truth), report.md, report.xml (JUnit) and report.html (both made from
 * the JSON), and timing.json, swapped into their folder as one set (base/gp_out.h).
 * `gradprec run` and the public API's gradprec_result_write both go through here. */
#ifndef GP_REPORT_SET_H
#define GP_REPORT_SET_H

#include "../base/gp_out.h"
#include "gp_report.h"

#define GP_REPORT_NFILES 5

/* The file names, in the order they are written. */
extern const char *const gp_report_file_names[GP_REPORT_NFILES];

typedef struct {
    char *text[GP_REPORT_NFILES]; /* malloc'ed contents, one per gp_report_file_names entry */
} gp_report_files;

/* Render every file of run r, shard shard_index of shard_count of a run of `total`
 * scenarios (0, 1, r->n: not sharded); seconds and jobs go to timing.json only. Returns
 * 0, or -1 with err set (out of memory, or a view could not be made); f is then empty. */
int gp_report_files_render(const gp_run_report *r, size_t shard_index, size_t shard_count, size_t total,
                           double seconds, int jobs, gp_report_files *f, gp_error *err);

/* Prepare folder dir (option `what` in messages) for the set, before a run, so an
 * unusable place fails before any work (gp_out_set_begin; inputs[0..n) may not be
 * inside it). Returns 0 or -1 with err. */
int gp_report_files_begin(gp_out_set *set, const char *what, const char *dir, const char *const *inputs, size_t n,
                          gp_error *err);

/* Write the rendered files into the prepared set and swap it in. Returns 0, or -1 with
 * err (the set is then aborted: the folder keeps its old contents). */
int gp_report_files_commit(const gp_report_files *f, gp_out_set *set, gp_error *err);

/* Both steps at once, for folder dir. */
int gp_report_files_write(const gp_report_files *f, const char *dir, gp_error *err);

/* Free the texts (f may be half filled). */
void gp_report_files_free(gp_report_files *f);

#endif
