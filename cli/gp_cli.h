/* gp_cli.h — the `gradprec` command line: subcommand dispatch, callable by tests without
 * spawning a process. The subcommands are gp_cmd.h (exit codes there), the option parsing
 * they share gp_cli_opt.h; both come with this header. */
#ifndef GP_CLI_H
#define GP_CLI_H

#include <stdio.h>

#include "gp_cli_opt.h"
#include "gp_cmd.h"

/* argv[0] is the program name, argv[1] the subcommand. */
int gp_cli_main(int argc, char **argv, FILE *out, FILE *err);

#endif
