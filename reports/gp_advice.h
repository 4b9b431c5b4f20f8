/* gp_advice.h — what `gradprec advise` reports: the configuration and each alternative
 * that applies (harness/scenario/gp_advise.h) with its verdict, error by mechanism and memory
 * cost, as JSON (the "advice" object, also put at the root of the advice run's
 * report.json, where report.html shows it), a Markdown table and a terminal table. */
#ifndef GP_ADVICE_H
#define GP_ADVICE_H

#include <jansson.h>
#include <stdio.h>

#include "../harness/scenario/gp_advise.h"
#include "../harness/run/gp_runner.h"

/* The model the memory costs refer to: params (P, 0 = not given), trainable (T, 0 =
 * P), memory (a device's or a run's peak memory in bytes, 0 = not given). */
typedef struct {
    double params, trainable, memory;
} gp_advice_model;

/* The advice object. sc/res[0]: the configuration as given; alt[k]/res[k + 1]: the
 * alternatives. Costs: extra bytes per trainable parameter (alt[k].bytes_per_param),
 * times the scenario's parameter count (the sum of its tensor sizes), times T, times P;
 * percentages of m->memory when given, else of the model's training state
 * P x weight bytes + T x gp_advise_state_bytes(sc). NULL when out of memory. */
json_t *gp_advice_json(const gp_scenario *sc, const gp_alternative *alt, int nalt, const gp_result *res,
                       const gp_advice_model *m);

/* The advice as a Markdown section (malloc'ed), or NULL when out of memory. */
char *gp_advice_markdown(const json_t *advice);

/* The advice as a terminal table with a legend line. */
void gp_advice_table(FILE *out, const json_t *advice);

#endif
