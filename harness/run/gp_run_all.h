/* gp_run_all.h — runs a list of scenarios on a backend with a pool of threads (the
 * `gradprec run` command and the public API's gradprec_run share it). Results do not
 * depend on the number of threads: each scenario is a pure function of its inputs. */
#ifndef GP_RUN_ALL_H
#define GP_RUN_ALL_H

#include <stdio.h>

#include "gp_runner.h"

typedef struct {
    int jobs;           /* threads (1..256): min(jobs, n) scenarios run at once, and each
                           splits its windows over jobs / min(jobs, n) threads */
    int nseeds;         /* seeds per scenario (gp_run_scenario_seeds), >= 1 */
    double max_seconds; /* time limit of each scenario (gp_deadline_set), 0: none */
    FILE *progress;     /* the progress line (gp_progress_line) redrawn here every half
                           second once progress_after seconds passed, then erased; or NULL */
    double progress_after;
} gp_run_opts;

/* The progress line (at most 79 columns): "[sc_done/sc_n] NAME [####......] 42.0%
 * 120M/290M 3.4M/s ETA 49s": work done and total in gp_run_work's units (element-
 * micro-batch accumulations, k/M/G = 10^3/10^6/10^9), the rate over the elapsed
 * seconds, the time left at that rate. */
void gp_progress_line(double done, double total, double elapsed, size_t sc_done, size_t sc_n, const char *name,
                      char *out, size_t len);

/* Run sc[0..n) on backend b (and compared backend cmp, or NULL), filling res[0..n) (the
 * caller frees each with gp_result_free). A scenario whose configuration the backend
 * refuses (GP_RUN_REFUSED) does not stop the others: its result has `refused` set, the
 * refusal's line in `refusal`, and expect_met = !sc->expect.set. Returns 0; or, after
 * every started scenario finished and no new one was started, the first failing code of
 * gp_run_scenario_seeds (-2 bad input, -3 a fault: time limit, crashed plugin, a dump
 * changed while read; -1 a backend failure) with
 * err = "scenario 'NAME': what", or -1 with err when no thread could be started. On
 * failure every res entry is freed. */
int gp_run_all(const gp_scenario *sc, size_t n, const gp_backend *b, const gp_backend *cmp, const gp_run_opts *o,
               gp_result *res, gp_error *err);

#endif
