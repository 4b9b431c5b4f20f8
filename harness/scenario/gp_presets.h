/* gp_presets.h — built-in scenarios, as YAML text loaded by the scenario loader. The
 * "default" suite (what `gradprec run` runs with no scenario) is every preset, in order. */
#ifndef GP_PRESETS_H
#define GP_PRESETS_H

#include <stddef.h>

typedef struct {
    const char *name;    /* also the scenario's name */
    const char *summary; /* one line: what it reproduces and what it should show */
    const char *yaml;
} gp_preset;

/* The presets, NULL-name terminated. */
const gp_preset *gp_presets(void);

/* The preset called name, or NULL. */
const gp_preset *gp_preset_find(const char *name);

#endif
