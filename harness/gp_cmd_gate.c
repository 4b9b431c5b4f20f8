/* gp_cmd_gate.c — placeholder until `gradprec gate` lands (being written now). */
#include "gp_cli.h"

int gp_cmd_gate(int argc, char **argv, FILE *out, FILE *err)
{
    (void)argc;
    (void)argv;
    (void)out;
    fprintf(err, "gradprec gate: not available in this build\n");
    return GP_EXIT_INTERNAL;
}
