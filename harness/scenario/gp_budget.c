/* gp_budget.c — see gp_budget.h. */
#include "gp_budget.h"

#include "../../kernels/cpu/gp_lowbit.h"

static size_t fmt_bytes(gp_format f)
{
    return (size_t)gp_fmt_get(f).width / 8;
}

gp_adamw_config gp_optim_config(const gp_scenario *sc)
{
    gp_adamw_config c;
    c.param = sc->optimizer.param;
    c.state = sc->optimizer.state;
    c.variant = sc->optimizer.fused    ? GP_ADAMW_TORCH_FUSED_CPU
                : sc->optimizer.master ? GP_ADAMW_MASTER
                : sc->optimizer.kahan  ? GP_ADAMW_KAHAN
                                       : GP_ADAMW_PLAIN;
    c.rounding = sc->optimizer.stochastic ? GP_STOCHASTIC : GP_RNE;
    c.eval = (gp_adamw_eval)sc->optimizer.evaluation;
    c.tail = 0; /* set per element by the backend */
    c.lowbit = sc->optimizer.lowbit;
    return c;
}

size_t gp_optim_bytes_per_element(const gp_scenario *sc)
{
    gp_adamw_config c = gp_optim_config(sc);
    size_t pb = fmt_bytes(c.param), sb = fmt_bytes(c.state);
    /* param, m, v, comp (Kahan), master (fp32), lost, state_err, formula_err (doubles), and the
     * double-double reference's six doubles: what gp_optim_state_alloc holds per element */
    /* a low-bit state: its codes (a byte each) and scales beside the fp32 m, v */
    size_t lb = c.lowbit ? 2 + 8 / gp_lowbit_block((gp_lowbit)c.lowbit) + 1 : 0;
    return pb + 2 * sb + (c.variant == GP_ADAMW_KAHAN ? pb : 0) + (c.variant == GP_ADAMW_MASTER ? 4 : 0) +
           3 * sizeof(double) + 6 * sizeof(double) + lb;
}

/* The work of one element in step `step` (0-based): its micro-batches (every rank's), and in a
 * distributed run each collective's W + 2 passes (W - 1 hops, the casts and divisions). */
uint64_t gp_run_step_work(const gp_scenario *sc, int step)
{
    if (!gp_scenario_distributed(sc))
        return (uint64_t)gp_scenario_step_mb(sc, step);
    uint64_t W = (uint64_t)sc->distributed.world_size, K = (uint64_t)sc->batch.microbatches;
    return K * W + (sc->distributed.no_sync ? 1 : K) * (W + 2);
}

uint64_t gp_run_bytes_per_element(const gp_scenario *sc)
{
    int coupled = sc->clip.max_norm > 0 || sc->loss_scale.mode != GP_LS_NONE; /* as gp_run_scenario's S.coupled */
    size_t ab = fmt_bytes(sc->precision.accumulator);
    uint64_t b = 0;
    if (coupled) /* acc, comp (Kahan) and gfull for the whole step: alloc_tensors */
        b += ab + (sc->precision.rounding == GP_ACC_KAHAN ? ab : 0) + sizeof(double);
    if (sc->steps > 1) /* the optimizer state of every element, kept across steps */
        b += gp_optim_bytes_per_element(sc);
    int sampled = sc->sample != 0;
    for (size_t t = 0; t < sc->ntensors; t++)
        sampled |= sc->tensors[t].sample != 0 || sc->tensors[t].population != 0;
    if (sc->steps > 1 && sampled) /* per element: the ratio terms over the steps (alloc_tensors) and
                                     the optimizer's event counts (gp_optim_state.el_cnt) */
        b += 2 * GP_NEST * sizeof(double) * (sc->loss_scale.mode != GP_LS_NONE ? 2 : 1) + 4 * sizeof(uint32_t);
    return b;
}

uint64_t gp_run_tensor_elements(const gp_scenario *sc, size_t t)
{
    const gp_tensor_spec *ts = &sc->tensors[t];
    if (ts->grad.kind == GP_DIST_VALUES)
        return ts->size;
    if (ts->sample)
        return ts->sample < ts->size ? ts->sample : ts->size;
    if (!sc->sample)
        return ts->size;
    uint64_t M = 0; /* the elements the scenario's sample is spread over */
    for (size_t u = 0; u < sc->ntensors; u++)
        if (sc->tensors[u].grad.kind != GP_DIST_VALUES && !sc->tensors[u].sample)
            M += sc->tensors[u].size;
    if (sc->sample >= M)
        return ts->size;
    unsigned __int128 num = (unsigned __int128)sc->sample * ts->size;
    uint64_t n = (uint64_t)((num + M - 1) / M); /* ceil(N M_h / M) <= M_h since N < M */
    uint64_t lo = ts->size < 2 ? ts->size : 2;     /* two units at least: a spread to estimate */
    return n < lo ? lo : n;
}

uint64_t gp_run_work(const gp_scenario *sc)
{
    uint64_t elems = 0;
    for (size_t t = 0; t < sc->ntensors; t++)
        elems += gp_run_tensor_elements(sc, t);
    uint64_t total = 0;
    int steps = sc->steps > 0 ? sc->steps : 1;
    /* steps of equal work (no per-step counts): one multiplication, not a loop over up to
     * 2^31 steps at load */
    int distinct = sc->batch.step_mb && !gp_scenario_distributed(sc) ? steps : 1;
    for (int st = 0; st < distinct; st++) {
        uint64_t w = gp_run_step_work(sc, st), per_step = elems > (UINT64_MAX - GP_RUN_STEP_OVERHEAD) / w
                                                            ? UINT64_MAX : elems * w + GP_RUN_STEP_OVERHEAD;
        uint64_t times = distinct == 1 ? (uint64_t)steps : 1;
        per_step = per_step > UINT64_MAX / times ? UINT64_MAX : per_step * times;
        total = per_step > UINT64_MAX - total ? UINT64_MAX : total + per_step;
    }
    return total;
}
