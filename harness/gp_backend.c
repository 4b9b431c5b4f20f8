/* gp_backend.c — see gp_backend.h. */
#include "gp_backend.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../kernels/cpu/gp_cpu_backend.h"
#include "../kernels/cuda/gp_cuda.h"

static int open_plugin(const char *path, gp_backend *b, gp_error *err)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return gp_error_set(err, "plugin %s: cannot load: %s", path, dlerror());
    gp_plugin_entry_fn entry;
    void *sym = dlsym(dl, GP_PLUGIN_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry); /* object -> function pointer, POSIX-sanctioned */
    const gp_plugin *p = sym ? entry() : NULL;
    const char *why = NULL;
    char buf[160];
    if (!sym)
        why = "does not export the symbol " GP_PLUGIN_ENTRY_SYMBOL;
    else if (!p)
        why = GP_PLUGIN_ENTRY_SYMBOL "() returned NULL";
    else if (p->abi_version != GP_PLUGIN_ABI_VERSION && p->abi_version != 2) {
        snprintf(buf, sizeof buf, "ABI version %u, but this gradprec speaks versions 2 and %u",
                 (unsigned)p->abi_version, (unsigned)GP_PLUGIN_ABI_VERSION);
        why = buf;
    } else if (!p->accumulate || !p->unscale || !p->adamw)
        why = "leaves accumulate, unscale or adamw NULL";
    else if (p->memory != GP_PLUGIN_HOST && p->memory != GP_PLUGIN_DEVICE) {
        snprintf(buf, sizeof buf, "asks for memory %u, neither GP_PLUGIN_HOST nor GP_PLUGIN_DEVICE",
                 (unsigned)p->memory);
        why = buf;
    } else if (p->memory == GP_PLUGIN_DEVICE && gp_cuda_device_count() == 0)
        why = "asks for device memory (GP_PLUGIN_DEVICE), which needs a CUDA build and a CUDA device";
    if (why) {
        dlclose(dl);
        return gp_error_set(err, "plugin %s: %s", path, why);
    }
    /* A version 2 table ends before accumulate_many: copy only what it has. */
    memset(&b->table, 0, sizeof b->table);
    memcpy(&b->table, p, p->abi_version == 2 ? offsetof(gp_plugin, accumulate_many) : sizeof b->table);
    b->ops = &b->table;
    if (p->memory == GP_PLUGIN_DEVICE) { /* the staging adapter serves it host memory */
        gp_error e = {""};
        b->ops = gp_cuda_stage_open(&b->table, &e);
        if (!b->ops) {
            dlclose(dl);
            memset(b, 0, sizeof *b);
            return gp_error_set(err, "plugin %s: %s", path, e.msg);
        }
    }
    b->dl = dl;
    snprintf(b->label, sizeof b->label, "plugin:%s (%s)", path, p->name ? p->name : "unnamed");
    return 0;
}

int gp_backend_open(const char *spec, gp_backend *b, gp_error *err)
{
    memset(b, 0, sizeof *b);
    if (strcmp(spec, "cpu") == 0 || (strcmp(spec, "auto") == 0 && !gp_cuda_backend())) {
        b->ops = gp_cpu_backend();
        snprintf(b->label, sizeof b->label, "cpu");
        return 0;
    }
    if (strcmp(spec, "cuda") == 0 || strcmp(spec, "auto") == 0) {
        b->ops = gp_cuda_backend();
        if (!b->ops)
            return gp_error_set(err, "backend cuda: %s",
                                gp_cuda_device_count() ? "not usable" : "no CUDA device (or CUDA not built)");
        snprintf(b->label, sizeof b->label, "cuda");
        return 0;
    }
    if (strncmp(spec, "plugin:", 7) == 0 && spec[7])
        return open_plugin(spec + 7, b, err);
    return gp_error_set(err, "unknown backend '%s' (cpu, cuda, auto, plugin:PATH)", spec);
}

void gp_backend_close(gp_backend *b)
{
    if (b->dl && b->table.memory == GP_PLUGIN_DEVICE)
        gp_cuda_stage_close(b->ops);
    if (b->dl)
        dlclose(b->dl);
    memset(b, 0, sizeof *b);
}
