/* gp_names.h — the user-facing names of formats, rounding modes and events, used by
 * the CLI, the scenario loader and every report, so a name is spelled once. */
#ifndef GP_NAMES_H
#define GP_NAMES_H

#include <stddef.h>

#include "arith/gp_format.h"

/* "fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2". */
const char *gp_format_name(gp_format f);
/* Parse a format name (also accepts "e4m3"/"e5m2"); returns 0 or -1. */
int gp_format_parse(const char *s, gp_format *f);
/* "rne", "rtz", "stochastic". */
const char *gp_rmode_name(gp_rmode m);
int gp_rmode_parse(const char *s, gp_rmode *m);
/* The name of one event bit: "inexact", "underflow", "overflow", "invalid", "absorbed". */
const char *gp_event_name(unsigned bit);
/* Write the set events as "inexact,underflow" (or "none") into buf. */
void gp_events_format(unsigned ev, char *buf, size_t n);

#endif
