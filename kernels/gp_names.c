/* gp_names.c — see gp_names.h. */
#include "gp_names.h"

#include <stdio.h>
#include <string.h>

static const char *const format_names[GP_NFORMATS] = {"fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"};
static const char *const rmode_names[] = {"rne", "rtz", "stochastic"};

const char *gp_format_name(gp_format f)
{
    return (unsigned)f < GP_NFORMATS ? format_names[f] : "?";
}

int gp_format_parse(const char *s, gp_format *f)
{
    for (int i = 0; i < GP_NFORMATS; i++)
        if (strcmp(s, format_names[i]) == 0 || strcmp(s, format_names[i] + 4 * (i >= GP_FP8_E4M3)) == 0) {
            *f = (gp_format)i;
            return 0;
        }
    return -1;
}

const char *gp_rmode_name(gp_rmode m)
{
    return (unsigned)m <= GP_STOCHASTIC ? rmode_names[m] : "?";
}

int gp_rmode_parse(const char *s, gp_rmode *m)
{
    for (int i = 0; i <= GP_STOCHASTIC; i++)
        if (strcmp(s, rmode_names[i]) == 0) {
            *m = (gp_rmode)i;
            return 0;
        }
    return -1;
}

const char *gp_event_name(unsigned bit)
{
    switch (bit) {
    case GP_EV_INEXACT: return "inexact";
    case GP_EV_UNDERFLOW: return "underflow";
    case GP_EV_OVERFLOW: return "overflow";
    case GP_EV_INVALID: return "invalid";
    case GP_EV_ABSORBED: return "absorbed";
    default: return "?";
    }
}

void gp_events_format(unsigned ev, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned bit = 1; bit <= GP_EV_ABSORBED; bit <<= 1)
        if (ev & bit)
            used += (size_t)snprintf(buf + used, used < n ? n - used : 0, "%s%s",
                                     used ? "," : "", gp_event_name(bit));
    if (!used)
        snprintf(buf, n, "none");
}
