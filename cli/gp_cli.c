/* gp_cli.c — subcommand dispatch for `gradprec` (see gp_cli.h). */
#include "gp_cli.h"

#include <string.h>

static const char usage[] =
    "usage: gradprec COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  run      run scenarios (default: the default suite) and write reports\n"
    "  show     print a preset (or a scenario file) as complete YAML\n"
    "  advise   price the alternatives to a configuration: errors and memory\n"
    "  gate     compare a report with a baseline (CI regression gate)\n"
    "  report   merge shard reports; render report.json as HTML; a monitor log as reports\n"
    "  round    round numbers to a format, exactly, with the events that fire\n"
    "  explain  range, precision and loss thresholds of each format\n"
    "  repro    the scenario YAML a fuzz input decodes to\n"
    "\n"
    "`gradprec COMMAND --help` describes a command.\n"
    "exit codes: 0 as expected (run) or passed (gate), 1 a scenario not as expected or a\n"
    "gate that failed, 2 bad usage or input, 3 internal error\n";

int gp_cli_main(int argc, char **argv, FILE *out, FILE *err)
{
    if (argc < 2) {
        fputs("gradprec: no command given (try gradprec --help)\n", err);
        return GP_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage, out);
        return GP_EXIT_OK;
    }
    if (strcmp(cmd, "run") == 0)
        return gp_cmd_run(argc - 1, argv + 1, out, err);
    if (strcmp(cmd, "gate") == 0)
        return gp_cmd_gate(argc - 1, argv + 1, out, err);
    if (strcmp(cmd, "report") == 0)
        return gp_cmd_report(argc - 1, argv + 1, out, err);
    if (strcmp(cmd, "round") == 0)
        return gp_cmd_round(argc - 1, argv + 1, out, err);
    if (strcmp(cmd, "explain") == 0)
        return gp_cmd_explain(argc - 1, argv + 1, out, err);
    if (strcmp(cmd, "advise") == 0)
        return gp_cmd_advise(argc - 1, argv + 1, out, err);
    if (strcmp(cmd, "show") == 0)
        return gp_cmd_show(argc - 1, argv + 1, out, err);
    if (strcmp(cmd, "repro") == 0)
        return gp_cmd_repro(argc - 1, argv + 1, out, err);
    fprintf(err, "gradprec: unknown command '%s' (try gradprec --help)\n", cmd);
    return GP_EXIT_USAGE;
}
