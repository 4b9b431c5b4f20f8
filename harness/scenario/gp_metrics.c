/* gp_metrics.c — see gp_metrics.h. */
#include "gp_metrics.h"

#include <string.h>

#define GP_METRIC_INFO(E, NAME, DIR, TOL, THR, VALUE, MECH, LEVEL) {NAME, DIR, TOL, THR, VALUE, MECH, LEVEL},
static const gp_metric_info metrics[GP_NMETRICS] = {GP_METRICS(GP_METRIC_INFO)};

const gp_metric_info *gp_metric_get(gp_metric m)
{
    return (unsigned)m < GP_NMETRICS ? &metrics[m] : NULL;
}

const char *gp_metric_name(gp_metric m)
{
    return (unsigned)m < GP_NMETRICS ? metrics[m].name : NULL;
}

int gp_metric_parse(const char *name, gp_metric *m)
{
    for (int i = 0; i < GP_NMETRICS; i++)
        if (strcmp(name, metrics[i].name) == 0) {
            *m = (gp_metric)i;
            return 0;
        }
    return -1;
}

/* Each mechanism's enum value is its position in GP_MECHANISMS, and the list has them all. */
#define GP_MECH_POS(E, NAME) E##_pos_,
#define GP_MECH_CHECK(E, NAME) _Static_assert((int)(E) == (int)E##_pos_, #E " is not at its position in GP_MECHANISMS");
#define GP_MECH_NAME(E, NAME) NAME,
enum { GP_MECHANISMS(GP_MECH_POS) gp_mech_count_ };
GP_MECHANISMS(GP_MECH_CHECK)
_Static_assert((int)gp_mech_count_ == (int)GP_NMECH, "gp_mechanism has a value GP_MECHANISMS lacks");
static const char *const mech_names[GP_NMECH] = {GP_MECHANISMS(GP_MECH_NAME)};

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
