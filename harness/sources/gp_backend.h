/* gp_backend.h — choosing and opening the backend under test: "cpu" (the CPU
 * emulation), "cuda" (needs a CUDA build and a device), "auto" (cuda when usable,
 * else cpu), "plugin:PATH" (a user's shared library exporting gp_plugin_entry) or
 * "python:MODULE:NAME" (a Python backend object, served by a worker process). */
#ifndef GP_BACKEND_H
#define GP_BACKEND_H

#include <stddef.h>

#include "../../kernels/gp_plugin_abi.h"
#include "../../base/gp_error.h"
#include "gp_deadline.h"

struct gp_worker;

typedef struct {
    const gp_plugin *ops;      /* the table: the built-in one (in process), or a plugin
                                * worker's proxy table (gp_plugin_worker.h) */
    gp_plugin table;           /* room for a table the caller fills itself (tests) */
    struct gp_worker *worker;  /* the forked worker serving a plugin, else NULL */
    int staged;                /* ops is the CUDA staging adapter over table (gp_backend_from_table) */
    int builtin;               /* gradprec's own cpu or cuda backend (not a subject under test) */
    char label[300];           /* "cpu", "cuda", "plugin:PATH (NAME)" */
} gp_backend;

/* Open the backend named by spec. cpu and cuda run in this process; a plugin runs in
 * a forked worker process (gp_plugin_worker.h), where a plugin asking for device memory
 * (GP_PLUGIN_DEVICE) is served through the staging adapter (gp_cuda_stage_open).
 * Errors (exit code 2 material, -1): unknown spec, cuda requested without a CUDA build
 * or device, a plugin path that is not a regular file, a plugin that cannot be loaded,
 * lacks the gp_plugin_entry symbol, returns NULL, has an ABI version other than 2 or 3,
 * misses a function, or asks for device memory without a CUDA build and device.
 * Faults (exit code 3 material, -3): the worker crashed or hung while loading the
 * plugin, or could not be started. Returns 0, or -1 / -3 with err set. */
int gp_backend_open(const char *spec, gp_backend *b, gp_error *err);

/* How backend b's plugin worker failed ("plugin PATH: ENTRY: crashed (...)"), or NULL:
 * the runner reports this instead of a return code when a call fails. */
const char *gp_backend_fault(const gp_backend *b);

/* What the runner returns for a scenario whose configuration the backend refused (a
 * call returned 1): the scenario is reported as refused, the others still run. */
#define GP_RUN_REFUSED (-4)

/* A call of backend b named `what` returned 1 (the configuration is not supported): err
 * = "backend LABEL: WHAT: this configuration is not supported by the backend", followed
 * by " (REASON)" when the backend gave one on this thread (a Python backend's
 * NotImplementedError, through its worker: gp_worker_refusal; the cuda backend's
 * gp_cuda_refusal). Returns GP_RUN_REFUSED. */
int gp_backend_refused(const gp_backend *b, const char *what, gp_error *err);

/* Serve a caller's table p, filled at run time (the public API's gradprec_run), in this
 * process: checked and copied by gp_plugin_table_adopt, its functions called as they
 * are (no worker: a crash in it is the caller's). The label is "table (NAME)". Returns
 * 0, or -1 with err = "plugin table: why". */
int gp_backend_from_table(const gp_plugin *p, gp_backend *b, gp_error *err);

/* Release a backend (the staging adapter's table, then dlclose, for plugins). */
void gp_backend_close(gp_backend *b);

#endif
