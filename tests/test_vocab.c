/* test_vocab.c — the docs' tables against the library's lists (kernels/gp_vocab.h, issue
 * 28 item 2): a name added to a list, or to a doc, without the other fails here.
 *   docs/formats.md     the table's rows: every format, in order; p and the s/e/m layout
 *                       as gp_fmt_get says (1 + e + m = width, m = p - 1)
 *   docs/scenarios.md   the *format* type's list; precision.rounding's and
 *                       optimizer.evaluation's rows: every name, in order
 *   docs/commands.md    `round --mode a|b|c`: every conversion rounding mode, in order
 * and optimizer.state's low-bit names (GP_VOCAB_LOWBIT_STATES after "plain"); and the
 * metric and mechanism lists of harness/scenario/gp_metrics.h (GP_METRICS, GP_MECHANISMS):
 *   docs/scenarios.md   `thresholds`: every metric, in report order; the default
 *                       thresholds' table: the metrics with a rule, each rule's value; the
 *                       metric each mechanism counts; the weight-level metrics; the
 *                       mechanisms' precedence: every mechanism, in order
 *   docs/model.md       the metric table: every metric once
 *   docs/gate.md        the direction line: the metrics not larger-worse; the tolerance
 *                       table's exact row: the exact metrics beside *_count
 * and the fuzz decoder (harness/scenario/gp_decode.c) against the lists: over a fixed
 * stream of pseudo-random inputs it produces every format (as a gradient or accumulator
 * dtype), every accumulator rounding policy and every low-bit state, so an entry added to
 * a list that the decoder never picks fails here.
 * argv[1]: the source folder. */
#include "gp_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/scenario/gp_decode.h"
#include "harness/scenario/gp_scenario.h"
#include "harness/scenario/gp_metrics.h"
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
 * kind's list from position `first` on: the same names, in the same order. */
static void expect_backticked_from(const char *where, const char *s, const char *end, gp_vocab_kind kind, int first)
{
    int i = first;
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

static void expect_backticked(const char *where, const char *s, const char *end, gp_vocab_kind kind)
{
    expect_backticked_from(where, s, end, kind, 0);
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
    doc_line("docs/scenarios.md", "| `state` |", 0, line, sizeof line);
    s = strstr(line, "a low-bit state:");
    assert_non_null(s);
    expect_backticked_from("docs/scenarios.md optimizer.state", s, strchr(s, '|'), GP_VOCAB_LOWBIT_STATE, 1);
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

/* ---- metrics and mechanisms (harness/scenario/gp_metrics.h) ---- */

/* SRC/doc whole (static: one at a time). */
static const char *read_doc(const char *doc)
{
    static char whole[1 << 20];
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", src, doc);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(whole, 1, sizeof whole - 1, f);
    fclose(f);
    whole[n] = '\0';
    return whole;
}

/* The text of doc from the first `from` on (its end: the caller's). */
static const char *doc_at(const char *doc, const char *from)
{
    const char *s = strstr(read_doc(doc), from);
    if (!s)
        fail_msg("%s: no text '%s'", doc, from);
    return s;
}

/* Count, per metric, the backticked metric names of [s, end) in seen[] (added); returns
 * how many backticked words were there. */
static int count_metrics(const char *s, const char *end, int *seen)
{
    int words = 0;
    for (const char *p = s; (p = strchr(p, '`')) && p < end; words++) {
        const char *q = strchr(p + 1, '`');
        assert_non_null(q);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(q - p - 1), p + 1);
        gp_metric m;
        if (gp_metric_parse(name, &m) == 0)
            seen[m]++;
        p = q + 1;
    }
    return words;
}

static void test_metric_lists(void **state)
{
    (void)state;
    /* scenarios.md `thresholds`: every metric, in report order (the enum's) */
    const char *s = doc_at("docs/scenarios.md", "report.json can be given, in report.json's order:");
    int i = 0;
    for (const char *p = s; (p = strchr(p, '`')) && p < strchr(s, '('); i++) {
        const char *q = strchr(p + 1, '`');
        const char *want = gp_metric_name((gp_metric)i);
        if (!want || strncmp(p + 1, want, strlen(want)) != 0 || q - p - 1 != (long)strlen(want))
            fail_msg("docs/scenarios.md thresholds: name %d is '%.*s', the list has '%s'", i, (int)(q - p - 1), p + 1,
                     want ? want : "(none)");
        p = q + 1;
    }
    assert_int_equal(i, GP_NMETRICS);

    /* model.md's metric table: every metric in its first column, once */
    int seen[GP_NMETRICS] = {0};
    s = doc_at("docs/model.md", "| metric | meaning |");
    for (const char *row = strchr(s, '\n') + 1; *row == '|'; row = strchr(row, '\n') + 1)
        count_metrics(row, strchr(row + 1, '|'), seen);
    for (i = 0; i < GP_NMETRICS; i++)
        if (seen[i] != 1)
            fail_msg("docs/model.md: metric %s is in the table %d times", gp_metric_name((gp_metric)i), seen[i]);

    /* scenarios.md's default thresholds: the metrics with a rule, once each, with its value */
    memset(seen, 0, sizeof seen);
    s = doc_at("docs/scenarios.md", "| metric | default threshold |");
    for (const char *row = strchr(s, '\n') + 1; *row == '|'; row = strchr(row, '\n') + 1) {
        const char *bar = strchr(row + 1, '|');
        int before[GP_NMETRICS];
        memcpy(before, seen, sizeof seen);
        count_metrics(row, bar, seen);
        for (i = 0; i < GP_NMETRICS; i++) {
            if (seen[i] == before[i])
                continue;
            const gp_metric_info *mi = gp_metric_get((gp_metric)i);
            const char *rule = bar + 2;
            int ok = mi->thr == GP_THR_FLOOR_GRAD     ? strncmp(rule, "max(1e-3, 2 × floor_grad)", 26) == 0
                     : mi->thr == GP_THR_FLOOR_WEIGHT ? strncmp(rule, "max(1e-3, 2 × floor_weight)", 28) == 0
                     : mi->thr == GP_THR_NONE         ? 0
                                                      : strtod(rule, NULL) == mi->value;
            if (!ok)
                fail_msg("docs/scenarios.md default thresholds: %s is '%.30s', the list's rule %d value %g",
                         mi->name, rule, (int)mi->thr, mi->value);
        }
    }
    for (i = 0; i < GP_NMETRICS; i++)
        if (seen[i] != (gp_metric_get((gp_metric)i)->thr != GP_THR_NONE))
            fail_msg("docs/scenarios.md default thresholds: %s is in the table %d times", gp_metric_name((gp_metric)i),
                     seen[i]);

    /* scenarios.md: the metrics that count one mechanism by themselves, "(`a`: mech, `b` / `c`: mech, ...)" */
    int mech[GP_NMETRICS];
    for (i = 0; i < GP_NMETRICS; i++)
        mech[i] = -1;
    s = doc_at("docs/scenarios.md", "counts one mechanism by itself (") + strlen("counts one mechanism by itself (");
    const char *end = strchr(s, ')');
    int pending[GP_NMETRICS], npending = 0;
    for (const char *p = s; p < end;) {
        if (*p == '`') {
            const char *q = strchr(p + 1, '`');
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(q - p - 1), p + 1);
            gp_metric m;
            if (gp_metric_parse(name, &m) != 0)
                fail_msg("docs/scenarios.md mechanisms: '%s' is no metric", name);
            pending[npending++] = (int)m;
            p = q + 1;
        } else if (*p == ':') {
            size_t k = strcspn(p + 2, ",)");
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)k, p + 2);
            gp_mechanism g;
            if (gp_mechanism_parse(name, &g) != 0)
                fail_msg("docs/scenarios.md mechanisms: '%s' is no mechanism", name);
            for (int j = 0; j < npending; j++)
                mech[pending[j]] = (int)g;
            npending = 0;
            p += 2 + k;
        } else
            p++;
    }
    for (i = 0; i < GP_NMETRICS; i++) {
        gp_mechanism want = gp_metric_get((gp_metric)i)->mech;
        if (mech[i] != (want == GP_NMECH ? -1 : (int)want))
            fail_msg("docs/scenarios.md: %s counts mechanism %d, the list's %d", gp_metric_name((gp_metric)i), mech[i],
                     (int)want);
    }

    /* scenarios.md: the weight-level metrics */
    memset(seen, 0, sizeof seen);
    s = doc_at("docs/scenarios.md", "When only\nweight metrics failed (");
    count_metrics(s, strchr(s, ')'), seen);
    for (i = 0; i < GP_NMETRICS; i++)
        if (seen[i] != (gp_metric_get((gp_metric)i)->level == GP_LEVEL_WEIGHT))
            fail_msg("docs/scenarios.md weight metrics: %s listed %d times", gp_metric_name((gp_metric)i), seen[i]);

    /* gate.md: the metrics not larger-worse, and the exact ones (beside *_count) */
    memset(seen, 0, sizeof seen);
    s = doc_at("docs/gate.md", "- **Direction:**");
    count_metrics(s, strchr(s, '\n'), seen);
    for (i = 0; i < GP_NMETRICS; i++)
        if (seen[i] != (gp_metric_get((gp_metric)i)->dir != GP_DIR_LARGER_WORSE))
            fail_msg("docs/gate.md Direction: %s listed %d times", gp_metric_name((gp_metric)i), seen[i]);
    memset(seen, 0, sizeof seen);
    s = doc_at("docs/gate.md", "| counts (`*_count`");
    count_metrics(s, strchr(s, '\n'), seen);
    for (i = 0; i < GP_NMETRICS; i++) {
        const gp_metric_info *mi = gp_metric_get((gp_metric)i);
        size_t n = strlen(mi->name);
        int count = n > 6 && strcmp(mi->name + n - 6, "_count") == 0, frac = n > 5 && strcmp(mi->name + n - 5, "_frac") == 0;
        /* the gate classes a name it does not know by these suffixes: the list keeps to them */
        if ((mi->tol == GP_TOL_EXACT) != (count || seen[i]) || (mi->tol == GP_TOL_FRACTION) != frac)
            fail_msg("docs/gate.md tolerances: %s is class %d, the table's row says otherwise", mi->name, (int)mi->tol);
    }
}

static void test_mechanisms(void **state)
{
    (void)state;
    /* the verdict's precedence: every mechanism, in the list's order */
    const char *s = doc_at("docs/scenarios.md", "first mechanism, in the order ") + strlen("first mechanism, in the order ");
    const char *end = strstr(s, ", whose loss");
    assert_non_null(end);
    int i = 0;
    for (const char *p = s; p < end; i++) {
        char name[64];
        size_t k = 0;
        while (p + k < end && p[k] != ',')
            k++;
        snprintf(name, sizeof name, "%.*s", (int)k, p);
        for (char *c = name; *c; c++)
            if (*c == '\n')
                *c = ' ';
        if (i >= GP_NMECH || strcmp(name, gp_mechanism_name((gp_mechanism)i)) != 0)
            fail_msg("docs/scenarios.md precedence: mechanism %d is '%s', the list's '%s'", i, name,
                     i < GP_NMECH ? gp_mechanism_name((gp_mechanism)i) : "(none)");
        p += k + (p + k < end ? 2 : 0);
    }
    assert_int_equal(i, GP_NMECH);
    gp_mechanism m;
    assert_int_equal(gp_mechanism_parse("none", &m), -1);
    assert_string_equal(gp_mechanism_name(GP_NMECH), "none");
}

/* The decoder's choices cover the lists: 4096 inputs of 512 bytes from a fixed xorshift64
 * stream (deterministic: the same inputs every run, so the test cannot flake). Why 4096
 * inputs reach every entry of a correct decoder with a wide margin: the rarest choice
 * here is one fp8 format of the accumulator or the gradient, a one-in-eight gate then a
 * one-in-two pick (p = 1/16 for an input that reaches the gate with bytes left); even if
 * only one input in four reached it, (1 - 1/64)^4096 < e^-64. The low-bit states are
 * not covered here: they sit behind the two bytes 0x10b1 (1 in 65536 random inputs);
 * the decoder picks among them with gp_vocab_count(GP_VOCAB_LOWBIT_STATE), so a state
 * added to the list is one of its choices. */
static void test_decoder_reaches_lists(void **state)
{
    (void)state;
    int fmt_seen[GP_NFORMATS] = {0}, rnd_seen[16] = {0};
    const int nrnd = gp_vocab_count(GP_VOCAB_ACC_ROUNDING);
    assert_true(nrnd <= 16);
    uint64_t x = 0x9e3779b97f4a7c15u;
    uint8_t buf[512];
    for (int t = 0; t < 4096; t++) {
        for (size_t i = 0; i < sizeof buf; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (uint8_t)(x >> 56);
        }
        gp_scenario s;
        gp_error err;
        assert_int_equal(gp_decode_scenario(buf, sizeof buf, &s, &err), 0);
        fmt_seen[s.precision.grad]++;
        fmt_seen[s.precision.accumulator]++;
        rnd_seen[s.precision.rounding]++;
        gp_scenario_free(&s);
    }
    for (int f = 0; f < GP_NFORMATS; f++)
        if (!fmt_seen[f])
            fail_msg("the decoder never picks format %s", gp_vocab_name(GP_VOCAB_FORMAT, f));
    for (int r = 0; r < nrnd; r++)
        if (!rnd_seen[r])
            fail_msg("the decoder never picks rounding %s", gp_vocab_name(GP_VOCAB_ACC_ROUNDING, r));
}

/* Decode a 512-byte input whose choices (read from the end, gp_decoder_range) are `pre`
 * bytes of `fill`, then the two bytes of `magic` (high byte first), then tail[0..nt), and
 * whose payload bytes (read from the front) are `fill` too. */
static void decode_behind(unsigned fill, unsigned pre, unsigned magic, const uint8_t *tail, size_t nt,
                          gp_scenario *s)
{
    uint8_t buf[512];
    memset(buf, (int)fill, sizeof buf);
    size_t at = sizeof buf - 1 - pre;
    buf[at--] = (uint8_t)(magic >> 8);
    buf[at--] = (uint8_t)magic;
    for (size_t i = 0; i < nt; i++)
        buf[at--] = tail[i];
    gp_error err;
    assert_int_equal(gp_decode_scenario(buf, sizeof buf, s, &err), 0);
}

/* The filler byte and the number of its bytes after which the decoder reads the block
 * behind `magic` (found by trying each; `hit` says whether a decoded scenario took it). */
static unsigned find_block(unsigned magic, int (*hit)(const gp_scenario *), unsigned *fill)
{
    for (unsigned f = 0; f < 256; f++)
        for (unsigned pre = 0; pre < 200; pre++) {
            gp_scenario s;
            uint8_t zero[32] = {0};
            decode_behind(f, pre, magic, zero, sizeof zero, &s);
            int h = hit(&s);
            gp_scenario_free(&s);
            if (h) {
                *fill = f;
                return pre;
            }
        }
    fail_msg("the decoder never reads a block behind 0x%04x", magic);
    return 0;
}

static int hit_scaled(const gp_scenario *s) { return s->precision.grad_scaled; }
static int hit_lowbit(const gp_scenario *s) { return s->optimizer.lowbit != 0; }
static int hit_acc(const gp_scenario *s) { return s->precision.acc_scaled; }

/* The blocks behind two-byte constants (read last, so that the committed corpus decodes
 * as before) reach every entry of their lists: every scaled kind (MX, nvfp4 single and
 * two-level, fp8 current, delayed, blockwise 1x128 and 128x128) with every element
 * format it takes, every MX rule, every option (:torchao, :most_recent, :pow2, :nosat,
 * :sr, a 2-D view `cols`), every low-bit optimizer state, and the scaled accumulator with
 * every element format and option. Fixed inputs: a filler byte up to the block (the first
 * that reaches it), its constant, then 4096 tails of 24 bytes from a fixed xorshift64
 * stream; each decoded scenario's YAML loads back. Why 4096 suffice: the
 * rarest entry is one (kind, element) pair, 1/4 x 1/5 or 1/3 x 1/5 = 1/20; (1 - 1/20)^4096
 * < e^-200. A decoder missing one choice fails it. */
static void test_decoder_reaches_scaled_lists(void **state)
{
    (void)state;
    unsigned fill[4];
    unsigned p1 = find_block(0x5ca1, hit_scaled, &fill[0]), p2 = find_block(0x5ca2, hit_scaled, &fill[1]);
    unsigned p3 = find_block(0x5ca3, hit_acc, &fill[2]), p4 = find_block(0x10b1, hit_lowbit, &fill[3]);
    int kind_elem[6][GP_NELEMS] = {{0}}, rule[GP_NMXRULES] = {0}, two_level[2] = {0}, opt[8][2] = {{0}};
    int acc_elem[GP_NELEMS] = {0}, acc_opt[2][2] = {{0}}, lowbit[16] = {0}, cols_2d = 0;
    const int nlow = gp_vocab_count(GP_VOCAB_LOWBIT_STATE);
    assert_true(nlow <= 16);
    uint64_t x = 0x2545f4914f6cdd1du;
    for (int t = 0; t < 4096; t++) {
        uint8_t tail[24];
        for (size_t i = 0; i < sizeof tail; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            tail[i] = (uint8_t)(x >> 56);
        }
        const unsigned pre[4] = {p1, p2, p3, p4}, magic[4] = {0x5ca1, 0x5ca2, 0x5ca3, 0x10b1};
        for (int b = 0; b < 4; b++) {
            gp_scenario s;
            decode_behind(fill[b], pre[b], magic[b], tail, sizeof tail, &s);
            const gp_scaled_cfg *q = &s.precision.grad_sc, *a = &s.precision.acc_sc;
            if (b < 2) {
                assert_true(s.precision.grad_scaled);
                kind_elem[q->kind][q->elem]++;
                if (q->kind == GP_SC_MX)
                    rule[q->rule]++;
                if (q->kind == GP_SC_NVFP4)
                    two_level[q->two_level]++;
                opt[0][q->torchao]++;
                opt[1][q->most_recent]++;
                opt[2][q->pow2]++;
                opt[3][q->sat]++;
                opt[4][q->mode == GP_STOCHASTIC]++;
                opt[5][q->kind == GP_SC_DELAYED && q->hist > 1]++;
                opt[6][q->kind == GP_SC_DELAYED && q->margin > 0]++;
                cols_2d += s.tensors[0].cols != 0 && s.tensors[0].cols < s.tensors[0].size;
            } else if (b == 2) {
                assert_true(s.precision.acc_scaled);
                assert_int_equal(a->kind, GP_SC_CURRENT);
                acc_elem[a->elem]++;
                acc_opt[0][a->pow2]++;
                acc_opt[1][a->sat]++;
            } else {
                lowbit[s.optimizer.lowbit]++;
            }
            char *y = gp_scenario_to_yaml(&s); /* what `gradprec repro` prints loads back */
            gp_scenario s2;
            gp_error err;
            if (gp_scenario_load_string(y, strlen(y), "decoded", &s2, &err) != 0)
                fail_msg("block 0x%04x: %s\n%s", magic[b], err.msg, y);
            gp_scenario_free(&s2);
            free(y);
            gp_scenario_free(&s);
        }
    }
    static const char *const kinds[6] = {"current", "delayed", "blockwise_1x128", "blockwise_128x128", "MX",
                                         "nvfp4"};
    for (int k = 0; k < 6; k++)
        for (int e = 0; e < GP_NELEMS; e++) {
            int takes = k == 5 ? e == GP_EL_E2M1 : k == 0 || k == 4 || e <= GP_EL_E5M2; /* what the decoder offers */
            if (takes && !kind_elem[k][e])
                fail_msg("the decoder never picks %s with element format %d", kinds[k], e);
        }
    for (int r = 0; r < GP_NMXRULES; r++)
        if (!rule[r])
            fail_msg("the decoder never picks MX rule %d", r);
    for (int v = 0; v < 2; v++) {
        if (!two_level[v])
            fail_msg("the decoder never picks nvfp4 %s", v ? "two-level" : ":single");
        for (int o = 0; o < 7; o++)
            if (!opt[o][v])
                fail_msg("the decoder never gives option %d the value %d", o, v);
        for (int o = 0; o < 2; o++)
            if (!acc_opt[o][v])
                fail_msg("the decoder never gives the accumulator's option %d the value %d", o, v);
    }
    for (int e = 0; e < GP_NELEMS; e++)
        if (!acc_elem[e])
            fail_msg("the decoder never picks a scaled accumulator of element format %d", e);
    for (int l = 1; l < nlow; l++)
        if (!lowbit[l])
            fail_msg("the decoder never picks low-bit state %s", gp_vocab_name(GP_VOCAB_LOWBIT_STATE, l));
    assert_true(cols_2d > 0);
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
        cmocka_unit_test(test_metric_lists),
        cmocka_unit_test(test_mechanisms),
        cmocka_unit_test(test_decoder_reaches_lists),
        cmocka_unit_test(test_decoder_reaches_scaled_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
