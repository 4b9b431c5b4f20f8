/* gp_metrics.c — see gp_metrics.h. */
#include "gp_metrics.h"

#include <string.h>

static const char *const names[GP_NMETRICS] = {
    "grad_rel_err_fullbatch", "grad_rel_err_rounding", "normalization_rel_err", "max_ulp_err",
    "underflow_frac", "absorbed_frac", "overflow_count", "grad_norm_ratio", "skipped_steps",
    "min_loss_scale", "stale_update_frac", "weight_rel_err", "subnormal_frac", "nonfinite_count",
    "m_rel_err", "v_rel_err", "state_underflow_frac", "scaling_rel_err",
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
