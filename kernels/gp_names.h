/* gp_names.h — the user-facing names of formats, rounding modes and events, used by
 * the CLI, the scenario loader and every report, so a name is spelled once. */
#ifndef GP_NAMES_H
#define GP_NAMES_H

#include <stddef.h>

#include "arith/gp_format.h"

/* The name of f in GP_VOCAB_FORMATS (kernels/gp_vocab.h): "fp32", "bf16", ... */
const char *gp_format_name(gp_format f);
/* Parse a format name (also accepts "e4m3"/"e5m2"); returns 0 or -1. */
int gp_format_parse(const char *s, gp_format *f);
/* The name of m in GP_VOCAB_RMODES (kernels/gp_vocab.h): "rne", "rtz", ... */
const char *gp_rmode_name(gp_rmode m);
int gp_rmode_parse(const char *s, gp_rmode *m);
/* The name of one event bit: "inexact", "underflow", "overflow", "invalid", "absorbed". */
const char *gp_event_name(unsigned bit);
/* Write the set events as "inexact,underflow" (or "none") into buf. */
void gp_events_format(unsigned ev, char *buf, size_t n);

#endif
