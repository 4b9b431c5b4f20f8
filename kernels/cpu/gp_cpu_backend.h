/* gp_cpu_backend.h — the CPU emulation backend (always present). */
#ifndef GP_CPU_BACKEND_H
#define GP_CPU_BACKEND_H

#include "../gp_plugin_abi.h"

/* The backend table; static, never freed. */
const gp_plugin *gp_cpu_backend(void);

#endif
