/* gp_monitor_report.h — `gradprec report monitor`: the time series of a monitor log
 * (monitor.jsonl, format gradprec-monitor/1, written by gradprec.torch.monitor;
 * docs/monitor.md) as Markdown and as one self-contained HTML page with inline SVG
 * charts: each metric against the step, overall and per tensor, tensors worst first. */
#ifndef GP_MONITOR_REPORT_H
#define GP_MONITOR_REPORT_H

#include <stddef.h>

#include "../base/gp_error.h"

/* The files of the set, in writing order. */
#define GP_MONITOR_NFILES 2
extern const char *const gp_monitor_file_names[GP_MONITOR_NFILES]; /* monitor.md, monitor.html */

/* Render the log text (len bytes; `name` labels messages "NAME:LINE: what") into
 * out[0] (Markdown) and out[1] (HTML), malloc'ed. Every non-empty line must be a JSON
 * object of format gradprec-monitor/1 with an integer step, larger than the previous
 * line's, a metrics object and a tensors array of {name, metrics}. Same log -> the same
 * bytes. Returns 0, or -1 with err (a bad line: an input error; out left NULL). */
int gp_monitor_report_render(const char *text, size_t len, const char *name, char *out[GP_MONITOR_NFILES],
                             gp_error *err);

#endif
