/* gp_cli.h — the `gradprec` command line: subcommand dispatch and each subcommand
 * as a function of (argc, argv, out, err) returning the process exit code, so tests
 * can drive them without spawning a process.
 * Exit codes (DESIGN.md §6): 0 all pass, 1 a scenario failed / gate regression,
 * 2 bad usage or bad input, 3 internal error. */
#ifndef GP_CLI_H
#define GP_CLI_H

#include <stdint.h>
#include <stdio.h>

enum { GP_EXIT_OK = 0, GP_EXIT_FAIL = 1, GP_EXIT_USAGE = 2, GP_EXIT_INTERNAL = 3 };

/* argv[0] is the program name, argv[1] the subcommand. */
int gp_cli_main(int argc, char **argv, FILE *out, FILE *err);

/* `gradprec run ...`: argv[0] is "run". */
int gp_cmd_run(int argc, char **argv, FILE *out, FILE *err);
/* `gradprec gate --baseline A.json --current B.json ...`: argv[0] is "gate". */
int gp_cmd_gate(int argc, char **argv, FILE *out, FILE *err);
/* `gradprec report merge|html ...`: argv[0] is "report". */
int gp_cmd_report(int argc, char **argv, FILE *out, FILE *err);
/* `gradprec round ...`: argv[0] is "round". */
int gp_cmd_round(int argc, char **argv, FILE *out, FILE *err);
/* `gradprec explain [FORMAT]`: argv[0] is "explain". */
int gp_cmd_explain(int argc, char **argv, FILE *out, FILE *err);
/* `gradprec advise PRESET|FILE.yaml [...]`: argv[0] is "advise". */
int gp_cmd_advise(int argc, char **argv, FILE *out, FILE *err);
/* `gradprec show PRESET|FILE.yaml`: argv[0] is "show". */
int gp_cmd_show(int argc, char **argv, FILE *out, FILE *err);
/* `gradprec repro [--target NAME] [--out FILE] FUZZ_INPUT`: argv[0] is "repro". */
int gp_cmd_repro(int argc, char **argv, FILE *out, FILE *err);

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
