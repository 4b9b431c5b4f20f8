/* fuzz_backend.c — libFuzzer target: whole scenarios on two backends, bit for bit.
 *
 * Bug oracle: the input decodes to a scenario (harness/scenario/gp_decode.h: dtypes, rounding,
 * FTZ, reductions, token counts, loss scaler, clipping and its order, LR schedule,
 * AdamW variant and hyper-parameters, 1-8 steps), which runs on the CPU emulation with
 * the backend under test compared at every accumulation, unscale and AdamW step, and at
 * every hop of a simulated collective (docs/distributed.md). Any
 * element whose bits differ (NaN-ness for NaNs), or a backend that writes during a
 * skipped step, is a crash. The backend under test: $GP_FUZZ_BACKEND (a --backend
 * spec: plugin:PATH.so, cuda), else CUDA when a device is present, else the example
 * plugin built beside this target. A configuration the backend does not implement
 * (its call returns 1) is skipped. A seeded bug planted in a plugin (the tests'
 * fuzz_seeded_bugs) is caught by the first corpus input that reaches its code.
 *
 * Findings: the run's verdict, dominant mechanism and metrics are the finding oracle.
 * Features: the dominant mechanism x the bucket of grad_rel_err_fullbatch, and of
 * weight_rel_err, so the fuzzer keeps inputs reaching new mechanisms and larger
 * divergences; a failing scenario reaching a new (mechanism, bucket) pair is written to
 * $GP_FINDINGS_DIR with its metrics (gp_fuzz_check.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/sources/gp_backend.h"
#include "../harness/run/gp_runner.h"
#include "harness/scenario/gp_decode.h"
#include "gp_fuzz_check.h"

#ifndef GP_FUZZ_DEFAULT_PLUGIN
#define GP_FUZZ_DEFAULT_PLUGIN "libgp_example_plugin.so"
#endif

GP_FUZZ_COUNTERS g_features[2][GP_NMECH + 1][GP_FUZZ_BUCKETS];
static uint8_t g_seen[GP_FUZZ_NMECH * GP_FUZZ_BUCKETS];

static const gp_backend *backends(const gp_backend **cpu)
{
    static gp_backend b, c;
    static int opened;
    if (!opened) {
        gp_error e = {""};
        const char *spec = getenv("GP_FUZZ_BACKEND");
        GP_FUZZ_CHECK(gp_backend_open("cpu", &c, &e) == 0, "%s", e.msg);
        if (!spec || !*spec)
            spec = gp_backend_open("cuda", &b, &e) == 0 ? NULL : "plugin:" GP_FUZZ_DEFAULT_PLUGIN;
        GP_FUZZ_CHECK(!spec || gp_backend_open(spec, &b, &e) == 0, "%s", e.msg);
        opened = 1;
    }
    *cpu = &c;
    return &b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const gp_backend *cpu, *under = backends(&cpu);
    gp_scenario s;
    gp_error e = {""};
    GP_FUZZ_CHECK(gp_decode_scenario(data, size, &s, &e) == 0, "%s", e.msg);
    gp_result r;
    int rc = gp_run_scenario(&s, under, cpu, &r, &e);
    if (rc == GP_RUN_REFUSED) { /* not implemented by the backend under test */
        gp_scenario_free(&s);
        return 0;
    }
    char *yaml = NULL;
    if (rc != 0 || r.st.mismatches || r.st.opt.mismatches || r.st.opt.skip_writes)
        yaml = gp_scenario_to_yaml(&s);
    GP_FUZZ_CHECK(rc == 0, "backend %s failed: %s\n%s", under->label, e.msg, yaml ? yaml : "");
    char first[512];
    gp_mismatch_describe(&r, first, sizeof first);
    GP_FUZZ_CHECK(r.st.mismatches == 0 && r.st.opt.mismatches == 0 && r.st.opt.skip_writes == 0,
                  "backend %s differs from the CPU emulation: %llu accumulation/unscale/clip/scaler, %llu "
                  "optimizer mismatches, %llu writes in skipped steps; first difference: %s\n%s",
                  under->label, (unsigned long long)r.st.mismatches, (unsigned long long)r.st.opt.mismatches,
                  (unsigned long long)r.st.opt.skip_writes, first, yaml ? yaml : "");
    /* stochastic rounding as a random process (gp_runner.h; every lag: gp_sr_lag.h): each
     * score above 1 has a false-alarm probability below 1e-9 for a correct backend */
    for (int j = GP_M_SR_BIAS_SCORE; j <= GP_M_SR_STEP_CORR_SCORE; j++)
        GP_FUZZ_CHECK(!(r.metric[j] > 1.0), "backend %s: stochastic rounding fails %s = %g (> 1)", under->label,
                      gp_metric_name((gp_metric)j), r.metric[j]);
    GP_FUZZ_CHECK(!(r.metric[GP_M_SR_LAG_CORR_SCORE] > 1.0), "backend %s: stochastic rounding fails %s = %g (> 1)",
                  under->label, gp_metric_name(GP_M_SR_LAG_CORR_SCORE), r.metric[GP_M_SR_LAG_CORR_SCORE]);
    unsigned bg = gp_fuzz_bucket(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH]);
    unsigned bw = gp_fuzz_bucket(r.metric[GP_M_WEIGHT_REL_ERR]);
    gp_fuzz_feature(&g_features[0][r.dominant][0], bg);
    gp_fuzz_feature(&g_features[1][r.dominant][0], bw);
    if (r.verdict == GP_FAIL && gp_fuzz_pair_new(g_seen, (unsigned)r.dominant, bg > bw ? bg : bw)) {
        char header[512];
        snprintf(header, sizeof header,
                 "finding of fuzz_backend: verdict fail, dominant mechanism %s\n"
                 "grad_rel_err_fullbatch %.6g, weight_rel_err %.6g, stale_update_frac %.6g, skipped_steps %d\n",
                 gp_mechanism_name(r.dominant), r.metric[GP_M_GRAD_REL_ERR_FULLBATCH], r.metric[GP_M_WEIGHT_REL_ERR],
                 r.metric[GP_M_STALE_UPDATE_FRAC], r.skipped_steps);
        gp_fuzz_finding("backend", data, size, header, &s);
    }
    gp_result_free(&r);
    gp_scenario_free(&s);
    return 0;
}
