/* gp_backend.h — choosing and opening the backend under test: "cpu" (the CPU
 * emulation), "cuda" (needs a CUDA build and a device), "auto" (cuda when usable,
 * else cpu) or "plugin:PATH" (a user's shared library exporting gp_plugin_entry). */
#ifndef GP_BACKEND_H
#define GP_BACKEND_H

#include "../kernels/gp_plugin_abi.h"
#include "../base/gp_error.h"

typedef struct {
    const gp_plugin *ops; /* the table; owned by the backend / library, or &table, or (a
                           * device-memory plugin) the staging adapter's table wrapping &table */
    gp_plugin table;      /* a plugin's table, widened to this ABI version (do not copy a gp_backend) */
    void *dl;             /* dlopen handle of a plugin, else NULL */
    char label[300];      /* "cpu", "cuda", "plugin:PATH (NAME)" */
} gp_backend;

/* Open the backend named by spec. A plugin asking for device memory (GP_PLUGIN_DEVICE)
 * is served through the staging adapter (gp_cuda_stage_open). Errors (exit code 2
 * material): unknown spec, cuda requested without a CUDA build or device, a plugin that
 * cannot be loaded, lacks the gp_plugin_entry symbol, returns NULL, has an ABI version
 * other than 2 or 3, misses a function, or asks for device memory without a CUDA build
 * and device. Returns 0, or -1 with err set. */
int gp_backend_open(const char *spec, gp_backend *b, gp_error *err);

/* Release a backend (the staging adapter's table, then dlclose, for plugins). */
void gp_backend_close(gp_backend *b);

#endif
