/* gp_cmd.h — the `gradprec` subcommands, each a function of (argc, argv, out, err)
 * returning the process exit code (gp_cli.c dispatches to them; tests call them).
 * Exit codes (DESIGN.md §6): 0 all pass, 1 a scenario failed / gate regression,
 * 2 bad usage or bad input, 3 internal error. */
#ifndef GP_CMD_H
#define GP_CMD_H

#include <stdio.h>

enum { GP_EXIT_OK = 0, GP_EXIT_FAIL = 1, GP_EXIT_USAGE = 2, GP_EXIT_INTERNAL = 3 };

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

#endif
