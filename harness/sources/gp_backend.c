/* gp_backend.c — see gp_backend.h. */
#include "gp_backend.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../../base/gp_file.h"
#include "../../kernels/cpu/gp_cpu_backend.h"
#include "../../kernels/cuda/gp_cuda.h"
#include "gp_plugin_table.h"
#include "gp_plugin_worker.h"

int gp_backend_from_table(const gp_plugin *p, gp_backend *b, gp_error *err)
{
    char why[200];
    memset(b, 0, sizeof *b);
    if (!p)
        return gp_error_set(err, "plugin table: is NULL");
    if (!(b->ops = gp_plugin_table_adopt(p, &b->table, why, sizeof why)))
        return gp_error_set(err, "plugin table: %s", why);
    b->staged = b->ops != &b->table;
    snprintf(b->label, sizeof b->label, "table (%s)", p->name ? p->name : "unnamed");
    return 0;
}

/* Starts the worker that serves `spec` (a plugin path or python:MODULE:NAME) and makes
 * it b's table; b's label is `prefix`, spec and the name the backend gives itself. */
static int open_worker(const char *spec, const char *prefix, gp_backend *b, gp_error *err)
{
    gp_worker *w = NULL;
    const gp_plugin *ops = NULL;
    char name[128];
    int rc = gp_worker_open(spec, &w, &ops, name, sizeof name, err);
    if (rc != 0)
        return rc;
    b->ops = ops;
    b->worker = w;
    snprintf(b->label, sizeof b->label, "%s%s (%s)", prefix, spec, name);
    return 0;
}

/* A user's plugin: checked as an input file when it names one, then loaded and served
 * by a forked worker (gp_plugin_worker.h). */
static int open_plugin(const char *path, gp_backend *b, gp_error *err)
{
    gp_error e = {""};
    if (strchr(path, '/') && gp_file_check_input(path, GP_FILE_MAX_PLUGIN, &e) != 0)
        return gp_error_set(err, "plugin %s", e.msg);
    return open_worker(path, "plugin:", b, err);
}

/* A Python backend object, served by a worker process running the interpreter
 * (gp_plugin_worker.h): spec is "python:MODULE:NAME". */
static int open_python(const char *spec, gp_backend *b, gp_error *err)
{
    const char *mod = spec + 7, *colon = strrchr(mod, ':');
    if (!colon || colon == mod || !colon[1])
        return gp_error_set(err, "backend %s: expected python:MODULE:NAME (e.g. python:gradprec.torch:AdamW)", spec);
    return open_worker(spec, "", b, err);
}

const char *gp_backend_fault(const gp_backend *b)
{
    return b ? gp_worker_fault(b->worker) : NULL;
}

int gp_backend_refused(const gp_backend *b, const char *what, gp_error *err)
{
    const char *why = b->worker                                        ? gp_worker_refusal()
                      : b->builtin && strcmp(b->label, "cuda") == 0 ? gp_cuda_refusal()
                                                                     : NULL;
    gp_error_set(err, "backend %s: %s: this configuration is not supported by the backend%s%.300s%s", b->label, what,
                 why ? " (" : "", why ? why : "", why ? ")" : "");
    return GP_RUN_REFUSED;
}

int gp_backend_open(const char *spec, gp_backend *b, gp_error *err)
{
    memset(b, 0, sizeof *b);
    if (strcmp(spec, "cpu") == 0 || (strcmp(spec, "auto") == 0 && !gp_cuda_backend())) {
        b->ops = gp_cpu_backend();
        b->builtin = 1;
        snprintf(b->label, sizeof b->label, "cpu");
        return 0;
    }
    if (strcmp(spec, "cuda") == 0 || strcmp(spec, "auto") == 0) {
        b->ops = gp_cuda_backend();
        if (!b->ops)
            return gp_error_set(err, "backend cuda: %s",
                                gp_cuda_device_count() ? "not usable" : "no CUDA device (or CUDA not built)");
        b->builtin = 1;
        snprintf(b->label, sizeof b->label, "cuda");
        return 0;
    }
    if (strncmp(spec, "plugin:", 7) == 0 && spec[7])
        return open_plugin(spec + 7, b, err);
    if (strncmp(spec, "python:", 7) == 0)
        return open_python(spec, b, err);
    return gp_error_set(err, "unknown backend '%s' (cpu, cuda, auto, plugin:PATH, python:MODULE:NAME)", spec);
}

void gp_backend_close(gp_backend *b)
{
    gp_worker_close(b->worker);
    if (b->staged)
        gp_cuda_stage_close(b->ops);
    memset(b, 0, sizeof *b);
}
