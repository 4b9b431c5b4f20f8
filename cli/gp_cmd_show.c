/* gp_cmd_show.c — `gradprec show PRESET|FILE.yaml`: the scenario as complete YAML, every
 * key spelled out with its value (defaults included), so a preset becomes a file a user
 * can copy and edit; what it prints loads back to the same scenario. A file with a
 * `sweep:` prints each of its points, one YAML document each. */
#include <stdlib.h>
#include <string.h>

#include "../harness/scenario/gp_presets.h"
#include "../harness/scenario/gp_scenario.h"
#include "gp_cmd.h"

static const char show_usage[] =
    "usage: gradprec show PRESET | FILE.yaml\n"
    "\n"
    "Prints the scenario as YAML with every key and its value (defaults included);\n"
    "`gradprec run` reads it back to the same scenario. PRESET: a name from\n"
    "`gradprec run --list`; anything ending in .yaml or .yml, or containing '/', is a file.\n"
    "exit: 0 printed, 2 unknown preset or a file that does not load (file:line:column)\n";

int gp_cmd_show(int argc, char **argv, FILE *out, FILE *err)
{
    const char *what = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(show_usage, out);
            return GP_EXIT_OK;
        }
        if (argv[i][0] == '-' || what) {
            fprintf(err, "gradprec show: %s '%s' (one PRESET or FILE.yaml)\n",
                    argv[i][0] == '-' ? "unknown option" : "unexpected argument", argv[i]);
            return GP_EXIT_USAGE;
        }
        what = argv[i];
    }
    if (!what) {
        fputs(show_usage, err);
        return GP_EXIT_USAGE;
    }
    size_t n = strlen(what);
    int is_file = strchr(what, '/') || (n > 5 && strcmp(what + n - 5, ".yaml") == 0) ||
                  (n > 4 && strcmp(what + n - 4, ".yml") == 0);
    gp_scenario *sc = NULL;
    size_t nsc = 0;
    gp_error e = {""};
    const gp_preset *p = NULL;
    int rc;
    if (is_file) {
        rc = gp_scenario_load_all_file(what, &sc, &nsc, &e);
    } else {
        if (!(p = gp_preset_find(what))) {
            fprintf(err, "gradprec show: unknown preset '%s' (gradprec run --list)\n", what);
            return GP_EXIT_USAGE;
        }
        char origin[160];
        snprintf(origin, sizeof origin, "preset:%s", p->name);
        rc = gp_scenario_load_all_string(p->yaml, strlen(p->yaml), origin, &sc, &nsc, &e);
    }
    if (rc != 0) {
        fprintf(err, "gradprec show: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    if (p)
        fprintf(out, "# preset %s: %s\n", p->name, p->summary);
    if (nsc > 1)
        fprintf(out, "# a sweep: %zu scenarios, one YAML document each\n", nsc);
    rc = GP_EXIT_OK;
    for (size_t i = 0; i < nsc; i++) {
        char *yaml = rc == GP_EXIT_OK ? gp_scenario_to_yaml(&sc[i]) : NULL;
        if (!yaml && rc == GP_EXIT_OK) {
            fprintf(err, "gradprec show: out of memory\n");
            rc = GP_EXIT_INTERNAL;
        }
        if (yaml) {
            fputs(nsc > 1 ? "---\n" : "", out);
            fputs(yaml, out);
        }
        free(yaml);
        gp_scenario_free(&sc[i]);
    }
    free(sc);
    return rc;
}
