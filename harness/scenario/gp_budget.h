/* gp_budget.h — what a run of a scenario costs, known before it runs: the AdamW
 * configuration it selects, the bytes it keeps per element, the elements it simulates
 * and its work. The loader refuses a scenario beyond the limits with them (GP_MAX_WORK,
 * GP_MAX_RUN_BYTES); the runner and the suite's progress count with them. */
#ifndef GP_BUDGET_H
#define GP_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "../../kernels/arith/gp_adamw.h"
#include "gp_scenario.h"

/* The AdamW configuration of scenario sc (variant, formats, rounding). */
gp_adamw_config gp_optim_config(const gp_scenario *sc);

/* Bytes gp_optim_state_alloc holds per element of capacity for scenario sc (beyond its
 * one-chunk scratch): what a multi-step run keeps for every element. */
size_t gp_optim_bytes_per_element(const gp_scenario *sc);

/* Bytes gp_run_scenario keeps per tensor element for the whole run (beyond fixed-size
 * chunk buffers): the whole step's accumulators and exact gradients when clipping or a
 * loss scaler couples the tensors, the optimizer state when steps > 1 (and a sampled
 * run's per-element totals over the steps, for its intervals). 0 when every
 * buffer is chunk-sized. */
uint64_t gp_run_bytes_per_element(const gp_scenario *sc);

/* The elements of tensor t a run of sc simulates: all of them, or its sample: the
 * tensor's own `sample` (at most its size), else its share of the scenario's `sample: N`
 * spread over the tensors without their own sample in proportion to their sizes,
 * n_h = max(min(M_h, 2), ceil(N M_h / M)) (M: their elements in all; every M_h when
 * N >= M). Tensors of explicit values are never sampled. */
uint64_t gp_run_tensor_elements(const gp_scenario *sc, size_t t);

/* The work of a run in element-accumulations (of the elements it simulates): the sum over steps of
 * (elements x the step's micro-batches + GP_RUN_STEP_OVERHEAD, what a step costs beyond its elements), saturating. The loader
 * refuses scenarios above GP_MAX_WORK (docs/limits.md). */
#define GP_RUN_STEP_OVERHEAD 4096
uint64_t gp_run_work(const gp_scenario *sc);

/* The work of one element in step `step` (0-based): its micro-batches (every rank's), and in a
 * distributed run each collective's W + 2 passes (W - 1 hops, the casts and divisions). */
uint64_t gp_run_step_work(const gp_scenario *sc, int step);

#endif
