/* gp_cmd_gate.c — `gradprec gate`: the CI regression gate. Compares a current
 * report.json with a baseline (reports/gp_gate.h), prints a line per finding and a
 * summary, optionally writes a pull-request comment (--markdown) and replaces the
 * baseline (--update-baseline). Exit: 0 nothing regressed, 1 something regressed,
 * an exact quantity changed or something failed closed, 2 bad usage or bad input (one line on stderr, nothing on stdout,
 * nothing written), 3 a file could not be written. With --update-baseline the
 * comparison is printed but not enforced: exit 0 unless an input is bad. */
#include <stdlib.h>
#include <string.h>

#include "../reports/gp_gate.h"
#include "../reports/gp_report.h"
#include "gp_cli_opt.h"
#include "gp_cmd.h"
#include "../base/gp_out.h"
#include "../base/gp_file.h"

static const char gate_usage[] =
    "usage: gradprec gate --baseline BASE.json --current CUR.json [--tolerances TOL.json]\n"
    "                     [--markdown OUT.md] [--update-baseline]\n"
    "\n"
    "Compare CUR.json (gradprec run's report.json) with BASE.json, scenario by scenario\n"
    "(by name) and metric by metric, per scenario and per tensor. A metric regresses\n"
    "when it got worse by more than max(abs, rel x |old|): larger is worse, except\n"
    "grad_norm_ratio (|v - 1| is compared) and min_loss_scale (smaller is worse). A\n"
    "verdict that got worse (pass -> warn, pass/warn -> fail) regresses too.\n"
    "Default tolerances: error metrics rel 0.1, abs 1e-12; *_frac rel 0, abs 1e-4;\n"
    "*_count, skipped_steps, min_loss_scale rel 0, abs 0: determined exactly, so any\n"
    "difference, in either direction, is CHANGED (fails), never improved; so is any\n"
    "difference in loss_scale_by_step or skipped_by_step (a tolerance given to one in\n"
    "TOL.json makes it directional again), and any metric a scenario lists in its\n"
    "exact_metrics.\n"
    "Fails closed: a scenario, tensor or metric of the baseline missing from CUR, or a\n"
    "metric that is no longer a number (\"nan\"), fails the gate. Scenarios only in CUR\n"
    "are reported as new.\n"
    "\n"
    "  --tolerances TOL.json  {\"default\": {\"rel\": R, \"abs\": A},\n"
    "                          \"metrics\": {\"NAME\": {\"rel\": R, \"abs\": A}}}\n"
    "  --markdown OUT.md      also write a pull-request comment (written atomically)\n"
    "  --update-baseline      after comparing, copy CUR.json over BASE.json (atomically);\n"
    "                         the comparison is then not enforced: exit 0\n"
    "\n"
    "exit: 0 nothing regressed, 1 regressed, changed (an exact quantity: counts,\n"
    "skipped_steps, min_loss_scale, the loss scale and skips per step) or failed closed,\n"
    "2 bad usage or input, 3 a file could not be written\n";

/* The whole file as a NUL-terminated string, or NULL. */
static char *read_all(const char *path, gp_error *e)
{
    size_t n;
    char *buf = gp_file_read(path, GP_FILE_MAX_REPORT, &n, e);
    if (buf && strlen(buf) != n) {
        gp_error_set(e, "%s: contains a NUL byte", path);
        free(buf);
        return NULL;
    }
    return buf;
}

int gp_cmd_gate(int argc, char **argv, FILE *out, FILE *err)
{
    const char *basepath = NULL, *curpath = NULL, *tolpath = NULL, *mdpath = NULL, *val;
    int update = 0, r;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(gate_usage, out);
            return GP_EXIT_OK;
        }
        if (strcmp(argv[i], "--update-baseline") == 0) {
            update = 1;
            continue;
        }
        static const char *const names[] = {"--baseline", "--current", "--tolerances", "--markdown"};
        const char **slots[] = {&basepath, &curpath, &tolpath, &mdpath};
        int k;
        for (k = 0, r = 0; k < 4 && r == 0; k++)
            r = gp_cli_opt(argc, argv, &i, names[k], &val, err, "gate");
        if (r < 0)
            return GP_EXIT_USAGE;
        if (r == 0) {
            fprintf(err, "gradprec gate: unexpected argument '%s' (try gradprec gate --help)\n", argv[i]);
            return GP_EXIT_USAGE;
        }
        const char **slot = slots[k - 1];
        if (*slot) {
            fprintf(err, "gradprec gate: %s given twice\n", names[k - 1]);
            return GP_EXIT_USAGE;
        }
        *slot = val;
    }
    if (!basepath || !curpath) {
        fprintf(err, "gradprec gate: needs --baseline BASE.json and --current CUR.json\n");
        return GP_EXIT_USAGE;
    }

    gp_error e = {""};
    /* --markdown must not name an input (it would overwrite the baseline); the baseline
     * is an output only with --update-baseline, which replaces it on purpose. */
    const char *inputs[3] = {basepath, curpath, tolpath};
    if (mdpath && gp_out_check_file("--markdown", mdpath, inputs, tolpath ? 3 : 2, &e) != 0) {
        fprintf(err, "gradprec gate: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    if (update && gp_out_check_file("--baseline", basepath, inputs + 1, tolpath ? 2 : 1, &e) != 0) {
        fprintf(err, "gradprec gate: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    gp_gate_tolerances tol;
    memset(&tol, 0, sizeof tol);
    if (tolpath && gp_gate_load_tolerances(tolpath, &tol, &e) != 0) {
        fprintf(err, "gradprec gate: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    json_t *base = gp_report_load(basepath, &e);
    if (!base) {
        fprintf(err, "gradprec gate: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    json_t *cur = gp_report_load(curpath, &e);
    if (!cur) {
        fprintf(err, "gradprec gate: %s\n", e.msg);
        json_decref(base);
        return GP_EXIT_USAGE;
    }
    char *curtext = update ? read_all(curpath, &e) : NULL;
    gp_gate_result res;
    int rc = GP_EXIT_OK;
    if (update && !curtext) {
        fprintf(err, "gradprec gate: %s\n", e.msg);
        json_decref(base);
        json_decref(cur);
        return GP_EXIT_USAGE;
    }
    if (gp_gate_compare(base, basepath, cur, curpath, &tol, &res, &e) != 0) {
        fprintf(err, "gradprec gate: %s\n", e.msg);
        free(curtext);
        json_decref(base);
        json_decref(cur);
        return strcmp(e.msg, "out of memory") == 0 ? GP_EXIT_INTERNAL : GP_EXIT_USAGE;
    }

    char *lines = gp_gate_lines(&res);
    char *mdtext = mdpath ? gp_gate_markdown(&res) : NULL;
    char summary[256];
    gp_gate_summary(&res, summary, sizeof summary);
    if (!lines || (mdpath && !mdtext)) {
        fprintf(err, "gradprec gate: out of memory\n");
        rc = GP_EXIT_INTERNAL;
        goto done;
    }
    fputs(lines, out);
    if (mdpath) {
        if (gp_write_atomic(mdpath, mdtext, &e) != 0) {
            fprintf(err, "gradprec gate: %s\n", e.msg);
            rc = GP_EXIT_INTERNAL;
            goto done;
        }
        fprintf(out, "wrote %s\n", mdpath);
    }
    if (update) {
        if (gp_write_atomic(basepath, curtext, &e) != 0) {
            fprintf(err, "gradprec gate: %s\n", e.msg);
            rc = GP_EXIT_INTERNAL;
            goto done;
        }
        fprintf(out, "baseline %s updated from %s (--update-baseline: the comparison above is not enforced)\n",
                basepath, curpath);
    }
    fprintf(out, "%s\n", summary);
    rc = update || gp_gate_passed(&res) ? GP_EXIT_OK : GP_EXIT_FAIL;
done:
    free(lines);
    free(mdtext);
    free(curtext);
    gp_gate_free(&res);
    json_decref(base);
    json_decref(cur);
    return rc;
}
