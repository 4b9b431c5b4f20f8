/* gp_metrics.c — see gp_metrics.h. */
#include "gp_metrics.h"

#include <string.h>

static const char *const names[GP_NMETRICS] = {
    "grad_rel_err_fullbatch", "grad_rel_err_rounding", "normalization_rel_err", "max_ulp_err",
    "underflow_frac", "absorbed_frac", "overflow_count", "grad_norm_ratio", "skipped_steps",
    "min_loss_scale", "stale_update_frac", "weight_rel_err", "subnormal_frac", "nonfinite_count",
    "m_rel_err", "v_rel_err", "state_underflow_frac", "scaling_rel_err",
    "sr_bias_score", "sr_element_corr_score", "sr_step_corr_score", "collective_rel_err",
    "twin_mismatch_count", "sr_lag_corr_score",
};

const char *gp_metric_name(gp_metric m)
{
    return (unsigned)m < GP_NMETRICS ? names[m] : NULL;
}

int gp_metric_parse(const char *name, gp_metric *m)
{
    for (int i = 0; i < GP_NMETRICS; i++)
        if (strcmp(name, names[i]) == 0) {
            *m = (gp_metric)i;
            return 0;
        }
    return -1;
}

static const char *const mech_names[GP_NMECH] = {
    "normalization", "underflow", "absorption", "overflow", "saturation", "rounding", "non-finite", "scaling", "stale update",
    "state precision", "update formula"};

const char *gp_mechanism_name(gp_mechanism m)
{
    return (unsigned)m < GP_NMECH ? mech_names[m] : "none";
}

int gp_mechanism_parse(const char *name, gp_mechanism *m)
{
    for (int i = 0; i < GP_NMECH; i++)
        if (strcmp(name, mech_names[i]) == 0) {
            *m = (gp_mechanism)i;
            return 0;
        }
    return -1;
}

static const char *const verdict_names[] = {"pass", "warn", "fail"};

const char *gp_verdict_name(gp_verdict v)
{
    return (unsigned)v <= GP_FAIL ? verdict_names[v] : "?";
}

int gp_verdict_parse(const char *name, gp_verdict *v)
{
    for (int i = 0; i <= GP_FAIL; i++)
        if (strcmp(name, verdict_names[i]) == 0) {
            *v = (gp_verdict)i;
            return 0;
        }
    return -1;
}
