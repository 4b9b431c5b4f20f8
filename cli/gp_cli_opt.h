/* gp_cli_opt.h — the option parsing the subcommands share. */
#ifndef GP_CLI_OPT_H
#define GP_CLI_OPT_H

#include <stdint.h>
#include <stdio.h>

/* Option parsing shared by subcommands: if argv[*i] is `--name VALUE` or
 * `--name=VALUE`, store VALUE in *val, advance *i past it and return 1; return 0
 * when argv[*i] is not that option; return -1 (message on err) when VALUE is missing. */
int gp_cli_opt(int argc, char **argv, int *i, const char *name, const char **val, FILE *err,
               const char *cmd);

/* A strict decimal integer option value in [lo, hi] (base/gp_num.h): 0, or -1 after
 * printing "gradprec CMD: OPT 'VAL' is not a decimal integer in LO..HI" on err. */
int gp_cli_u64(const char *cmd, const char *opt, const char *val, uint64_t lo, uint64_t hi, uint64_t *out,
               FILE *err);

#endif
