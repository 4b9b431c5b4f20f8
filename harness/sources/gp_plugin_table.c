/* gp_plugin_table.c — see gp_plugin_table.h. */
#include "gp_plugin_table.h"

#include <stdio.h>
#include <string.h>

#include "../../base/gp_error.h"
#include "../../kernels/cuda/gp_cuda.h"

const gp_plugin *gp_plugin_table_adopt(const gp_plugin *p, gp_plugin *table, char *why, size_t whylen)
{
    if (p->abi_version != GP_PLUGIN_ABI_VERSION && p->abi_version != 2)
        snprintf(why, whylen, "ABI version %u, but this gradprec speaks versions 2 and %u", (unsigned)p->abi_version,
                 (unsigned)GP_PLUGIN_ABI_VERSION);
    else if (!p->accumulate || !p->unscale || !p->adamw)
        snprintf(why, whylen, "leaves accumulate, unscale or adamw NULL");
    else if (p->memory != GP_PLUGIN_HOST && p->memory != GP_PLUGIN_DEVICE)
        snprintf(why, whylen, "asks for memory %u, neither GP_PLUGIN_HOST nor GP_PLUGIN_DEVICE", (unsigned)p->memory);
    else if (p->memory == GP_PLUGIN_DEVICE && gp_cuda_device_count() == 0)
        snprintf(why, whylen, "asks for device memory (GP_PLUGIN_DEVICE), which needs a CUDA build and a CUDA device");
    else {
        /* A version 2 table ends before accumulate_many: copy only what it has. */
        memset(table, 0, sizeof *table);
        memcpy(table, p, p->abi_version == 2 ? offsetof(gp_plugin, accumulate_many) : sizeof *table);
        if (p->memory != GP_PLUGIN_DEVICE)
            return table;
        gp_error e = {""};
        const gp_plugin *staged = gp_cuda_stage_open(table, &e); /* serves it host memory */
        if (staged)
            return staged;
        snprintf(why, whylen, "%s", e.msg);
    }
    return NULL;
}
