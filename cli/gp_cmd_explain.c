/* gp_cmd_explain.c — `gradprec explain [FORMAT]`: range, precision and the value
 * thresholds at which each loss mechanism of DESIGN.md §1 fires, per format. Every
 * number is decoded from the format's own bit patterns. */
#include <math.h>
#include <string.h>

#include "gp_cmd.h"
#include "../kernels/gp_names.h"

static const char explain_usage[] =
    "usage: gradprec explain [FORMAT]\n"
    "\n"
    "Without FORMAT: a table of every format. With FORMAT (fp32, bf16, fp16, fp8_e4m3,\n"
    "fp8_e5m2): its layout, range, precision and the thresholds of underflow,\n"
    "absorption and overflow under round-to-nearest-even.\n";

typedef struct {
    double min_sub, min_norm, max_fin, ovf, zero_below, u;
} fmt_numbers;

static fmt_numbers numbers(gp_format f)
{
    gp_fmt_info i = gp_fmt_get(f);
    fmt_numbers n;
    n.min_sub = gp_fmt_to_f64(f, 1u);
    n.min_norm = gp_fmt_to_f64(f, 1u << (i.p - 1));
    n.max_fin = gp_fmt_to_f64(f, i.maxfin);
    n.ovf = n.max_fin + ldexp(1.0, i.emax - i.p); /* max finite + half its ulp */
    n.zero_below = n.min_sub / 2;                 /* |x| <= this rounds to 0 (tie to even 0) */
    n.u = ldexp(1.0, -i.p);                       /* unit roundoff */
    return n;
}

static void explain_one(FILE *out, gp_format f)
{
    gp_fmt_info i = gp_fmt_get(f);
    fmt_numbers n = numbers(f);
    int ebits = i.width - i.p;
    fprintf(out, "%s: %d bits = 1 sign + %d exponent + %d fraction; %d significant bits (p)\n",
            gp_format_name(f), i.width, ebits, i.p - 1, i.p);
    fprintf(out, "  unit roundoff u = 2^-%d = %.3g; machine epsilon 2^-%d = %.3g\n", i.p, n.u,
            i.p - 1, 2 * n.u);
    fprintf(out, "  min subnormal  %.2e (%a)\n", n.min_sub, n.min_sub);
    fprintf(out, "  min normal     %.2e (%a)\n", n.min_norm, n.min_norm);
    fprintf(out, "  max finite     %.6g (%a)\n", n.max_fin, n.max_fin);
    fprintf(out, "underflow: a non-zero value with |x| <= %.2e (half the min subnormal) is stored as 0;\n"
                 "  below %.2e it is subnormal and keeps fewer than %d significant bits;\n"
                 "  with FTZ everything below %.2e becomes 0.\n",
            n.zero_below, n.min_norm, i.p, n.min_norm);
    fprintf(out, "absorption: acc + x rounds back to acc when |x| < ulp(acc)/2; that holds for every\n"
                 "  acc once |x| < 2^-%d*|acc|, and never once |x| > 2^-%d*|acc|.\n",
            i.p + 1, i.p);
    if (i.inf)
        fprintf(out, "overflow: |x| >= %.6g (max finite + half an ulp) rounds to inf; toward zero it\n"
                     "  saturates at max finite.\n", n.ovf);
    else
        fprintf(out, "overflow: no infinities (OCP non-saturating): |x| >= %.6g rounds to NaN, as does\n"
                     "  inf; toward zero it saturates at max finite. NaN is S.1111.111.\n", n.ovf);
    if (f == GP_BF16)
        fprintf(out, "note: bf16 has fp32's exponent range, so small gradients are not lost to\n"
                     "  underflow (nothing above 1e-38 underflows); an accumulator in bf16 loses them to\n"
                     "  absorption. The often-quoted \"bf16 floor of 6e-8\" is fp16's min subnormal.\n");
    if (f == GP_FP16)
        fprintf(out, "note: fp16 gradients below 6.10e-05 are subnormal and below 2.98e-08 become 0:\n"
                     "  that is what loss scaling exists for.\n");
}

int gp_cmd_explain(int argc, char **argv, FILE *out, FILE *err)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(explain_usage, out);
        return GP_EXIT_OK;
    }
    if (argc > 2) {
        fprintf(err, "gradprec explain: at most one FORMAT, got %d arguments\n", argc - 1);
        return GP_EXIT_USAGE;
    }
    if (argc == 2) {
        gp_format f;
        if (gp_format_parse(argv[1], &f) != 0) {
            fprintf(err, "gradprec explain: unknown format '%s' (fp32, bf16, fp16, fp8_e4m3, fp8_e5m2)\n",
                    argv[1]);
            return GP_EXIT_USAGE;
        }
        explain_one(out, f);
        return GP_EXIT_OK;
    }
    fprintf(out, "%-9s %4s %5s %3s %10s %10s %10s %10s %10s %12s\n", "format", "bits", "e/m", "p",
            "unit rnd", "min sub", "min normal", "max finite", "overflow", "absorbed if");
    for (int k = 0; k < GP_NFORMATS; k++) {
        gp_format f = (gp_format)k;
        gp_fmt_info i = gp_fmt_get(f);
        fmt_numbers n = numbers(f);
        char em[16], ab[24];
        snprintf(em, sizeof em, "%d/%d", i.width - i.p, i.p - 1);
        snprintf(ab, sizeof ab, "<2^-%d|acc|", i.p + 1);
        fprintf(out, "%-9s %4d %5s %3d %10.3g %10.3g %10.3g %10.6g %10.6g %12s\n", gp_format_name(f),
                i.width, em, i.p, n.u, n.min_sub, n.min_norm, n.max_fin, n.ovf, ab);
    }
    fputs("overflow: the magnitude from which round-to-nearest gives inf (NaN for fp8_e4m3).\n"
          "`gradprec explain FORMAT` gives the details of one format.\n",
          out);
    return GP_EXIT_OK;
}
