/* gp_cmd_repro.c — `gradprec repro`: the scenario YAML a fuzz input decodes to
 * (harness/scenario/gp_decode.h), so a crash or finding of a fuzz campaign becomes a scenario
 * file that `gradprec run` accepts and a reviewer can read. */
#include <stdlib.h>
#include <string.h>

#include "../harness/scenario/gp_decode.h"
#include "../reports/gp_report.h"
#include "gp_cli_opt.h"
#include "gp_cmd.h"
#include "../base/gp_buf.h"
#include "../base/gp_file.h"
#include "../base/gp_out.h"

static const char repro_usage[] =
    "usage: gradprec repro [--target NAME] [--out FILE.yaml] FUZZ_INPUT\n"
    "\n"
    "Prints the scenario YAML that the fuzz input file FUZZ_INPUT decodes to, ready for\n"
    "`gradprec run`.\n"
    "  --target NAME  the fuzz target the input belongs to:\n"
    "                 decode (default), backend: the whole scenario (gp_decode_scenario);\n"
    "                 accumulate, metamorphic: the accumulation case (gp_decode_accum)\n"
    "                 as a one-element scenario with one token per addend\n"
    "  --out FILE     write the YAML to FILE (atomically) instead of standard output\n"
    "exit: 0 done, 2 bad usage, unreadable input, or an input without a scenario form,\n"
    "      3 the output could not be written\n";

/* The path as printable ASCII for a YAML comment: other bytes (a newline would end the
 * comment and inject YAML) and the backslash become \xNN. */
static void put_escaped(gp_buf *b, const char *path)
{
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        if (*p < 0x20 || *p >= 0x7f || *p == '\\')
            gp_buf_printf(b, "\\x%02x", (unsigned)*p);
        else
            gp_buf_putc(b, (char)*p);
}

int gp_cmd_repro(int argc, char **argv, FILE *out, FILE *err)
{
    const char *target = "decode", *outpath = NULL, *input = NULL, *val;
    for (int i = 1; i < argc; i++) {
        int r;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(repro_usage, out);
            return GP_EXIT_OK;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--target", &val, err, "repro")) != 0) {
            if (r < 0) return GP_EXIT_USAGE;
            target = val;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--out", &val, err, "repro")) != 0) {
            if (r < 0) return GP_EXIT_USAGE;
            outpath = val;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(err, "gradprec repro: unknown option '%s'\n", argv[i]);
            return GP_EXIT_USAGE;
        } else if (input) {
            fprintf(err, "gradprec repro: one FUZZ_INPUT at a time ('%s' and '%s')\n", input, argv[i]);
            return GP_EXIT_USAGE;
        } else {
            input = argv[i];
        }
    }
    /* the fuzz targets whose input is gp_decode_scenario's (whole) or gp_decode_accum's */
    int whole = strcmp(target, "decode") == 0 || strcmp(target, "backend") == 0;
    if (!whole && strcmp(target, "accumulate") != 0 && strcmp(target, "metamorphic") != 0) {
        fprintf(err, "gradprec repro: target '%s' does not decode its input into a scenario "
                     "(decode, backend, accumulate, metamorphic do)\n", target);
        return GP_EXIT_USAGE;
    }
    if (!input) {
        fprintf(err, "gradprec repro: no FUZZ_INPUT given (gradprec repro --help)\n");
        return GP_EXIT_USAGE;
    }

    gp_error e = {""};
    if (outpath && gp_out_check_file("--out", outpath, &input, 1, &e) != 0) {
        fprintf(err, "gradprec repro: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    size_t len = 0;
    char *bytes = gp_file_read(input, GP_FILE_MAX_FUZZ_INPUT, &len, &e);
    if (!bytes) {
        fprintf(err, "gradprec repro: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    gp_scenario s;
    int rc;
    if (whole) {
        rc = gp_decode_scenario((const uint8_t *)bytes, len, &s, &e);
    } else {
        gp_accum_case c;
        gp_decode_accum((const uint8_t *)bytes, len, &c);
        rc = gp_accum_case_scenario(&c, &s, &e);
    }
    free(bytes);
    if (rc != 0) {
        fprintf(err, "gradprec repro: %s: %s\n", input, e.msg);
        return GP_EXIT_USAGE;
    }
    char *yaml = gp_scenario_to_yaml(&s);
    gp_scenario_free(&s);
    gp_buf b = GP_BUF_INIT;
    gp_buf_printf(&b, "# gradprec repro --target %s: ", target);
    put_escaped(&b, input);
    gp_buf_printf(&b, " (%zu bytes)\n", len);
    if (yaml)
        gp_buf_puts(&b, yaml);
    char *text = yaml ? gp_buf_take(&b) : NULL;
    free(yaml);
    free(b.s);
    if (!text) {
        fprintf(err, "gradprec repro: out of memory\n");
        return GP_EXIT_INTERNAL;
    }
    rc = GP_EXIT_OK;
    if (!outpath) {
        fputs(text, out);
    } else if (gp_write_atomic(outpath, text, &e) != 0) {
        fprintf(err, "gradprec repro: %s\n", e.msg);
        rc = GP_EXIT_INTERNAL; /* as `report merge`: the output could not be written */
    }
    free(text);
    return rc;
}
