/* gp_plugin_table.h — a backend table a plugin (or a caller of the public API) hands over:
 * checked against the ABI and copied, behind the CUDA staging adapter when it asks for
 * device memory. gp_backend.c adopts tables in process, gp_plugin_worker.c in its worker. */
#ifndef GP_PLUGIN_TABLE_H
#define GP_PLUGIN_TABLE_H

#include <stddef.h>

#include "../../kernels/gp_plugin_abi.h"

/* Check a plugin's table p (ABI version 2 or 3, accumulate/unscale/adamw present, memory
 * kind, device memory only with a CUDA build and device) and copy it into *table (a
 * version 2 table widened, later entries NULL). Returns the table to call: table itself
 * for host memory, the CUDA staging adapter over it for device memory; NULL with why
 * filled ("ABI version 9, but ...", "leaves accumulate, unscale or adamw NULL", ...). */
const gp_plugin *gp_plugin_table_adopt(const gp_plugin *p, gp_plugin *table, char *why, size_t whylen);

#endif
