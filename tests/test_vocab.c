/* test_vocab.c — the docs' tables against the library's lists (kernels/gp_vocab.h, issue
 * 28 item 2): a name added to a list, or to a doc, without the other fails here.
 *   docs/formats.md     the table's rows: every format, in order; p and the s/e/m layout
 *                       as gp_fmt_get says (1 + e + m = width, m = p - 1)
 *   docs/scenarios.md   the *format* type's list; precision.rounding's and
 *                       optimizer.evaluation's rows: every name, in order
 *   docs/commands.md    `round --mode a|b|c`: every conversion rounding mode, in order
 * argv[1]: the source folder. */
#include "gp_test.h"

#include <math.h>
#include <string.h>

#include "kernels/arith/gp_format.h"
#include "kernels/gp_vocab.h"

static const char *src;

/* The line of SRC/doc that starts with (or, contains: anywhere) `key`, copied into buf. */
static void doc_line(const char *doc, const char *key, int anywhere, char *buf, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", src, doc);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    buf[0] = '\0';
    char line[8192];
    while (fgets(line, sizeof line, f))
        if (anywhere ? strstr(line, key) != NULL : strncmp(line, key, strlen(key)) == 0) {
            snprintf(buf, n, "%s", line);
            break;
        }
    fclose(f);
    if (!buf[0])
        fail_msg("%s: no line %s '%s'", doc, anywhere ? "containing" : "starting with", key);
}

/* The names between backticks in s up to `end` (or the end), in order, checked against
 * kind's list: the same names, in the same order. */
static void expect_backticked(const char *where, const char *s, const char *end, gp_vocab_kind kind)
{
    int i = 0;
    const char *p = s;
    while ((p = strchr(p, '`')) && (!end || p < end)) {
        const char *q = strchr(p + 1, '`');
        assert_non_null(q);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(q - p - 1), p + 1);
        const char *want = gp_vocab_name(kind, i);
        if (!want || strcmp(name, want) != 0)
            fail_msg("%s: name %d is '%s', the library's list has '%s'", where, i, name, want ? want : "(none)");
        i++;
        p = q + 1;
    }
    if (i != gp_vocab_count(kind))
        fail_msg("%s: %d names, the library's list has %d", where, i, gp_vocab_count(kind));
}

static void test_formats_table(void **state)
{
    (void)state;
    for (int i = 0; i < gp_vocab_count(GP_VOCAB_FORMAT); i++) {
        char key[80], line[8192];
        snprintf(key, sizeof key, "| %s |", gp_vocab_name(GP_VOCAB_FORMAT, i));
        doc_line("docs/formats.md", key, 0, line, sizeof line);
        int s, e, m, p;
        double sub, norm, max;
        if (sscanf(line + strlen(key), " %d/%d/%d | %d | %lf | %lf | %lf |", &s, &e, &m, &p, &sub, &norm, &max) != 7)
            fail_msg("docs/formats.md: row '%s' has no layout s/e/m, p, min subnormal, min normal, max finite", key);
        gp_fmt_info fi = gp_fmt_get((gp_format)i);
        if (s != 1 || 1 + e + m != fi.width || m != fi.p - 1 || p != fi.p)
            fail_msg("docs/formats.md: %s is %d/%d/%d, p %d; the library: width %d, p %d", key, s, e, m, p,
                     fi.width, fi.p);
        /* the doc's values have 3 significant digits: within half a unit of the third */
        double want[3] = {ldexp(1.0, fi.emin - fi.p + 1), ldexp(1.0, fi.emin), gp_fmt_to_f64((gp_format)i, fi.maxfin)};
        double got[3] = {sub, norm, max};
        for (int k = 0; k < 3; k++)
            if (fabs(got[k] - want[k]) > 0.5 * pow(10.0, floor(log10(want[k])) - 2) * (1 + 1e-9))
                fail_msg("docs/formats.md: %s column %d is %g, the library's value %.6g", key, 4 + k, got[k], want[k]);
    }
    /* and no row of a format the library lacks: the rows between the header and the blank line */
    char path[4096], line[8192];
    snprintf(path, sizeof path, "%s/docs/formats.md", src);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int rows = -2; /* the header and its rule */
    while (fgets(line, sizeof line, f) && line[0] != '|')
        ;
    do
        rows++;
    while (fgets(line, sizeof line, f) && line[0] == '|');
    fclose(f);
    assert_int_equal(rows, gp_vocab_count(GP_VOCAB_FORMAT));
}

static void test_scenario_keys(void **state)
{
    (void)state;
    char line[8192];
    /* the *format* type's list wraps over lines: read the doc whole */
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/scenarios.md", src);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char whole[1 << 20];
    size_t n = fread(whole, 1, sizeof whole - 1, f);
    fclose(f);
    whole[n] = '\0';
    const char *s = strstr(whole, "*format* (");
    assert_non_null(s);
    expect_backticked("docs/scenarios.md *format*", s, strchr(s, ')'), GP_VOCAB_FORMAT);
    doc_line("docs/scenarios.md", "| `rounding` |", 0, line, sizeof line);
    s = line + strlen("| `rounding` |");
    expect_backticked("docs/scenarios.md precision.rounding", s, strchr(s, '|'), GP_VOCAB_ACC_ROUNDING);
    doc_line("docs/scenarios.md", "| `evaluation` |", 0, line, sizeof line);
    s = line + strlen("| `evaluation` |");
    expect_backticked("docs/scenarios.md optimizer.evaluation", s, strchr(s, '|'), GP_VOCAB_ADAMW_EVAL);
}

static void test_round_modes(void **state)
{
    (void)state;
    char line[8192];
    doc_line("docs/commands.md", "- `round --format FMT [--mode ", 0, line, sizeof line);
    const char *s = line + strlen("- `round --format FMT [--mode ");
    int i = 0;
    for (const char *p = s; *p && *p != ']'; i++) {
        size_t k = strcspn(p, "|]");
        const char *want = gp_vocab_name(GP_VOCAB_RMODE, i);
        if (!want || strlen(want) != k || strncmp(p, want, k) != 0)
            fail_msg("docs/commands.md --mode: name %d is '%.*s', the library's is '%s'", i, (int)k, p,
                     want ? want : "(none)");
        p += k + (p[k] == '|');
    }
    assert_int_equal(i, gp_vocab_count(GP_VOCAB_RMODE));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_vocab SOURCE_DIR\n");
        return 2;
    }
    src = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats_table),
        cmocka_unit_test(test_scenario_keys),
        cmocka_unit_test(test_round_modes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
