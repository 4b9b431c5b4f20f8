/* gp_cmd_round.c — `gradprec round`: what a format does to a number. The result
 * comes from the MPFR oracle applied to the exact decimal input; whenever the input
 * is exactly a binary64, the shared kernel arithmetic is run too and must agree bit
 * for bit, events included (a disagreement is an internal error, exit 3). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/arith/gp_philox.h"
#include "../reference/gp_oracle.h"
#include "gp_cli_opt.h"
#include "gp_cmd.h"
#include "../kernels/gp_names.h"

static const char round_usage[] =
    "usage: gradprec round --format FMT [--mode rne|rtz|stochastic] [--ftz] [--seed N] [--json] VALUE...\n"
    "\n"
    "Rounds each VALUE (decimal or hex float, parsed exactly: never through binary64)\n"
    "to FMT (fp32, bf16, fp16, fp8_e4m3, fp8_e5m2) and prints the stored bits, the\n"
    "stored value and the events: inexact, underflow (tininess before rounding),\n"
    "overflow, invalid.\n"
    "  --mode M    rounding mode (default rne); stochastic draws its 32 random bits for\n"
    "              the i-th VALUE from Philox4x32-10(seed, stream 0, index i)\n"
    "  --ftz       flush results below the min normal to zero\n"
    "  --seed N    seed for stochastic rounding (default 0)\n"
    "  --json      one JSON object a line: input, format, mode, bits, value, hex, flags\n";

/* If s is exactly a binary64, store it in *d and return 1. MPFR's exponent range and
 * flags (global state) are the caller's again on return. */
static int exact_double(const char *s, double *d)
{
    mpfr_t v;
    mpfr_init2(v, 53);
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_flags_t flags = mpfr_flags_save();
    mpfr_set_emin(-1073);   /* binary64: smallest subnormal 2^-1074 = 0.1 * 2^-1073 */
    mpfr_set_emax(1024);
    int t = mpfr_strtofr(v, s, NULL, 0, MPFR_RNDN);
    t = mpfr_subnormalize(v, t, MPFR_RNDN);
    int ok = t == 0 && !mpfr_inf_p(v) && !mpfr_nan_p(v);
    if (ok)
        *d = mpfr_get_d(v, MPFR_RNDN);
    mpfr_clear(v);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    mpfr_flags_restore(flags, MPFR_FLAGS_ALL);
    return ok;
}

static void print_value(FILE *out, const char *input, gp_format f, gp_rmode mode,
                        const gp_oracle_result *r, int json)
{
    gp_fmt_info fi = gp_fmt_get(f);
    double v = gp_fmt_to_f64(f, r->bits);
    char bits[16], hex[64], flags[80];
    snprintf(bits, sizeof bits, "0x%0*x", fi.width / 4, (unsigned)r->bits);
    snprintf(hex, sizeof hex, "%a", v);
    gp_events_format(r->ev, flags, sizeof flags);
    if (!json) {
        fprintf(out, "%s -> %s %s = %.9g (%s) [%s]\n", input, gp_format_name(f), bits, v, hex, flags);
        return;
    }
    json_t *o = json_object();
    json_object_set_new(o, "input", json_string(input));
    json_object_set_new(o, "format", json_string(gp_format_name(f)));
    json_object_set_new(o, "mode", json_string(gp_rmode_name(mode)));
    json_object_set_new(o, "bits", json_string(bits));
    if (v != v)
        json_object_set_new(o, "value", json_string("nan"));
    else if (v - v != 0)
        json_object_set_new(o, "value", json_string(v > 0 ? "inf" : "-inf"));
    else
        json_object_set_new(o, "value", json_real(v));
    json_object_set_new(o, "hex", json_string(hex));
    json_t *fl = json_array();
    for (unsigned bit = 1; bit <= GP_EV_INVALID; bit <<= 1)
        if (r->ev & bit)
            json_array_append_new(fl, json_string(gp_event_name(bit)));
    json_object_set_new(o, "flags", fl);
    char *line = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    fprintf(out, "%s\n", line);
    free(line);
    json_decref(o);
}

int gp_cmd_round(int argc, char **argv, FILE *out, FILE *err)
{
    const char *fmt_s = NULL, *mode_s = "rne", *seed_s = "0", *val;
    int json = 0, ftz = 0, first_value = 0;
    for (int i = 1; i < argc; i++) {
        int r;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(round_usage, out);
            return GP_EXIT_OK;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--ftz") == 0) {
            ftz = 1;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--format", &val, err, "round")) != 0) {
            if (r < 0) return GP_EXIT_USAGE;
            fmt_s = val;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--mode", &val, err, "round")) != 0) {
            if (r < 0) return GP_EXIT_USAGE;
            mode_s = val;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--seed", &val, err, "round")) != 0) {
            if (r < 0) return GP_EXIT_USAGE;
            seed_s = val;
        } else if (strcmp(argv[i], "--") == 0) {
            first_value = i + 1;
            break;
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(err, "gradprec round: unknown option '%s'\n", argv[i]);
            return GP_EXIT_USAGE;
        } else {
            first_value = i;
            break;
        }
    }
    gp_format f;
    gp_rmode mode;
    if (!fmt_s) {
        fprintf(err, "gradprec round: --format is required (fp32, bf16, fp16, fp8_e4m3, fp8_e5m2)\n");
        return GP_EXIT_USAGE;
    }
    if (gp_format_parse(fmt_s, &f) != 0) {
        fprintf(err, "gradprec round: unknown format '%s' (fp32, bf16, fp16, fp8_e4m3, fp8_e5m2)\n", fmt_s);
        return GP_EXIT_USAGE;
    }
    if (gp_rmode_parse(mode_s, &mode) != 0) {
        fprintf(err, "gradprec round: unknown mode '%s' (rne, rtz, stochastic)\n", mode_s);
        return GP_EXIT_USAGE;
    }
    uint64_t seed = 0;
    if (gp_cli_u64("round", "--seed", seed_s, 0, UINT64_MAX, &seed, err) != 0)
        return GP_EXIT_USAGE;
    if (first_value == 0 || first_value >= argc) {
        fprintf(err, "gradprec round: no VALUE given\n");
        return GP_EXIT_USAGE;
    }
    /* Validate every value before printing anything: no half-written output. */
    int n = argc - first_value;
    gp_oracle_result *res = calloc((size_t)n, sizeof *res);
    if (!res) {
        fprintf(err, "gradprec round: out of memory\n");
        return GP_EXIT_INTERNAL;
    }
    int rc = GP_EXIT_OK;
    for (int k = 0; k < n && rc == GP_EXIT_OK; k++) {
        const char *s = argv[first_value + k];
        uint32_t rbits = mode == GP_STOCHASTIC ? gp_rand_u32(seed, 0, (uint64_t)k) : 0;
        gp_error e = {""};
        if (gp_oracle_round_str(f, s, mode, rbits, ftz, &res[k], &e) != 0) {
            fprintf(err, "gradprec round: %s\n", e.msg);
            rc = GP_EXIT_USAGE;
            break;
        }
        double d;
        if (exact_double(s, &d)) {
            unsigned kev = 0;
            uint32_t kb = gp_fmt_from_f64(f, d, mode, rbits, ftz, &kev);
            if (kb != res[k].bits || kev != res[k].ev) {
                fprintf(err, "gradprec round: internal error: kernel gives 0x%x events 0x%x, "
                             "oracle 0x%x events 0x%x for %s (%a)\n",
                        (unsigned)kb, kev, (unsigned)res[k].bits, res[k].ev, s, d);
                rc = GP_EXIT_INTERNAL;
            }
        }
    }
    if (rc == GP_EXIT_OK)
        for (int k = 0; k < n; k++)
            print_value(out, argv[first_value + k], f, mode, &res[k], json);
    free(res);
    return rc;
}
