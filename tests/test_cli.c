/* test_cli.c — the `gradprec` command line driven in-process: the acceptance examples
 * of `round` and `explain`, exit codes, and one-line errors with nothing on stdout. */
#include <string.h>

#include <mpfr.h>

#include "gp_test.h"

#include "cli/gp_cli.h"

typedef struct {
    int rc;
    char out[8192];
    char err[1024];
} run_result;

static void slurp(FILE *f, char *buf, size_t n)
{
    rewind(f);
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = '\0';
    fclose(f);
}

static run_result run(int argc, const char **argv)
{
    run_result r;
    FILE *out = tmpfile(), *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    r.rc = gp_cli_main(argc, (char **)argv, out, err);
    slurp(out, r.out, sizeof r.out);
    slurp(err, r.err, sizeof r.err);
    return r;
}

#define RUN(...) run((int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), \
                     (const char *[]){__VA_ARGS__})

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_round_bf16_ties(void **state)
{
    (void)state;
    run_result r = RUN("gradprec", "round", "--format", "bf16", "--json", "1.00390625", "1.01171875");
    assert_int_equal(r.rc, 0);
    const char *a = strstr(r.out, "\"bits\":\"0x3f80\"");
    const char *b = strstr(r.out, "\"bits\":\"0x3f82\"");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a < b);
    assert_non_null(strstr(r.out, "\"mode\":\"rne\""));
    assert_non_null(strstr(r.out, "\"flags\":[\"inexact\"]"));
    assert_int_equal(count_lines(r.out), 2);
}

/* 2^-25 exactly is a tie between 0 and fp16's min subnormal: even is 0. The second
 * input lies 1e-26 above it; through a binary64 it would become 2^-25 again. */
static void test_round_fp16_exact_decimal(void **state)
{
    (void)state;
    run_result r = RUN("gradprec", "round", "--format", "fp16", "--json", "2.98023223876953125e-08",
                       "2.98023223876953125000000010e-08");
    assert_int_equal(r.rc, 0);
    const char *a = strstr(r.out, "\"bits\":\"0x0000\"");
    const char *b = strstr(r.out, "\"bits\":\"0x0001\"");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a < b);
    assert_non_null(strstr(r.out, "\"flags\":[\"inexact\",\"underflow\"]"));
}

/* `round` parses each VALUE with MPFR in binary64's exponent range (exact_double): the
 * caller's range and flags are as they were (issue 28 item 6). A caller's own range is set
 * first, and a value that underflows and one that is inexact raise flags inside. */
static void test_round_restores_mpfr_state(void **state)
{
    (void)state;
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_set_emin(-5000);
    mpfr_set_emax(5000);
    mpfr_clear_flags();
    mpfr_set_divby0();
    run_result r = RUN("gradprec", "round", "--format", "bf16", "1e-400", "0.1", "1.5");
    assert_int_equal(r.rc, 0);
    assert_int_equal(mpfr_get_emin(), -5000);
    assert_int_equal(mpfr_get_emax(), 5000);
    assert_int_equal(mpfr_flags_save(), MPFR_FLAGS_DIVBY0);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    mpfr_clear_flags();
}

static void test_round_human_and_modes(void **state)
{
    (void)state;
    run_result r = RUN("gradprec", "round", "--format=fp8_e4m3", "--mode", "rtz", "500");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "0x7e = 448"));
    assert_non_null(strstr(r.out, "inexact,overflow"));
    r = RUN("gradprec", "round", "--format", "e4m3", "465");
    assert_non_null(strstr(r.out, "0x7f = nan"));
    r = RUN("gradprec", "round", "--format", "bf16", "--mode", "stochastic", "--seed", "7", "1.001", "1.001");
    assert_int_equal(r.rc, 0);
    assert_int_equal(count_lines(r.out), 2);
}

/* A NaN keeps its sign (docs/formats.md): "-nan" is the negated quiet NaN, the sign bit
 * over each format's quiet pattern (fp32 0x7fc00000, bf16 0x7fc0, fp16 0x7e00, e4m3's
 * only NaN S.1111.111, e5m2 S.11111.10), as C's strtod reads it; "+nan" and "nan" are
 * positive. */
static void test_round_nan_sign(void **state)
{
    (void)state;
    static const char *const fmt[] = {"fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"};
    static const char *const neg[] = {"0xffc00000", "0xffc0", "0xfe00", "0xff", "0xfe"};
    static const char *const pos[] = {"0x7fc00000", "0x7fc0", "0x7e00", "0x7f", "0x7e"};
    for (int k = 0; k < 5; k++) {
        run_result r = RUN("gradprec", "round", "--format", fmt[k], "--json", "--", "-nan", "nan", "+NaN");
        assert_int_equal(r.rc, 0);
        char want[64];
        snprintf(want, sizeof want, "{\"input\":\"-nan\",\"format\":\"%s\",\"mode\":\"rne\",\"bits\":\"%s\"",
                 fmt[k], neg[k]);
        assert_non_null(strstr(r.out, want));
        snprintf(want, sizeof want, "\"input\":\"nan\",\"format\":\"%s\",\"mode\":\"rne\",\"bits\":\"%s\"", fmt[k],
                 pos[k]);
        assert_non_null(strstr(r.out, want));
        snprintf(want, sizeof want, "\"input\":\"+NaN\",\"format\":\"%s\",\"mode\":\"rne\",\"bits\":\"%s\"", fmt[k],
                 pos[k]);
        assert_non_null(strstr(r.out, want));
        assert_non_null(strstr(r.out, "\"hex\":\"-nan\""));
    }
}

static void test_round_errors(void **state)
{
    (void)state;
    run_result r = RUN("gradprec", "round", "--format", "bf16", "abc");
    assert_int_equal(r.rc, 2);
    assert_string_equal(r.out, "");
    assert_int_equal(count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "'abc' is not a number"));
    r = RUN("gradprec", "round", "--format", "bf17", "1");
    assert_int_equal(r.rc, 2);
    assert_int_equal(count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "unknown format 'bf17'"));
    r = RUN("gradprec", "round", "--format", "bf16", "1.0", "1.5x");   /* nothing half-written */
    assert_int_equal(r.rc, 2);
    assert_string_equal(r.out, "");
    r = RUN("gradprec", "round", "1.0");
    assert_int_equal(r.rc, 2);
    r = RUN("gradprec", "round", "--format", "bf16", "--mode", "up", "1");
    assert_int_equal(r.rc, 2);
    r = RUN("gradprec", "round", "--format");
    assert_int_equal(r.rc, 2);
    r = RUN("gradprec", "frobnicate");
    assert_int_equal(r.rc, 2);
    r = RUN("gradprec");
    assert_int_equal(r.rc, 2);
}

static void test_explain(void **state)
{
    (void)state;
    run_result r = RUN("gradprec", "explain", "fp16");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "min subnormal  5.96e-08"));
    assert_non_null(strstr(r.out, "min normal     6.10e-05"));
    r = RUN("gradprec", "explain", "bf16");
    assert_non_null(strstr(r.out, "min normal     1.18e-38"));
    assert_non_null(strstr(r.out, "8 significant bits"));
    assert_non_null(strstr(r.out, "absorption"));
    r = RUN("gradprec", "explain");
    assert_int_equal(r.rc, 0);
    const char *names[] = {"fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"};
    for (int i = 0; i < 5; i++)
        assert_non_null(strstr(r.out, names[i]));
    r = RUN("gradprec", "explain", "fp12");
    assert_int_equal(r.rc, 2);
    assert_int_equal(count_lines(r.err), 1);
}

static void test_help(void **state)
{
    (void)state;
    run_result r = RUN("gradprec", "round", "--help");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "usage: gradprec round"));
    r = RUN("gradprec", "explain", "--help");
    assert_non_null(strstr(r.out, "usage: gradprec explain"));
    r = RUN("gradprec", "--help");
    assert_int_equal(r.rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_bf16_ties),
        cmocka_unit_test(test_round_restores_mpfr_state),
        cmocka_unit_test(test_round_fp16_exact_decimal),
        cmocka_unit_test(test_round_nan_sign),
        cmocka_unit_test(test_round_human_and_modes),
        cmocka_unit_test(test_round_errors),
        cmocka_unit_test(test_explain),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
