/* test_replay.c — replayed gradients (harness/sources/gp_replay.h): dumps written here by hand
 * (safetensors and .npy), a run whose references are computed by hand, every malformed
 * dump refused at load naming the dump and the tensor, the CLI's exit 2 with nothing
 * written, and the sampling estimator (harness/sources/gp_sample.h): seeded choice and the
 * coverage of its intervals against the exact value of the whole tensor.
 * Arguments: a scratch folder, the gradprec binary. */
#define _DEFAULT_SOURCE /* wait4, symlink, truncate */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gsl/gsl_cdf.h>

#include "gp_test.h"
#include "gp_test_dump.h"
#include "../harness/sources/gp_backend.h"
#include "../harness/sources/gp_replay.h"
#include "../harness/run/gp_run_all.h"
#include "../harness/run/gp_runner.h"
#include "../harness/sources/gp_sample.h"
#include "../harness/scenario/gp_scenario.h"

static const char *scratch, *gp_bin, *truncate_plugin;

/* ---- writing dumps ---- */

/* A safetensors file with a header given verbatim and `data` bytes of zeros after it. */
static void write_raw_safetensors(const char *path, uint64_t hlen_field, const char *hdr, size_t data)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(&hlen_field, 8, 1, f);
    fwrite(hdr, 1, strlen(hdr), f);
    for (size_t i = 0; i < data; i++)
        fputc(0, f);
    fclose(f);
}

/* An .npy file: version 1 header with the dict text given, then `bytes` of data. */
static void write_npy(const char *path, const char *dict, const void *data, size_t bytes)
{
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr, "%s", dict);
    while ((10 + n + 1) % 64)
        hdr[n++] = ' ';
    hdr[n++] = '\n';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    uint16_t hl = (uint16_t)n;
    fwrite(&hl, 2, 1, f);
    fwrite(hdr, 1, (size_t)n, f);
    if (bytes)
        fwrite(data, 1, bytes, f);
    fclose(f);
}

static void mkdirs(const char *path)
{
    char cmd[4600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    assert_int_equal(system(cmd), 0);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ---- the hand-computed case ----
 * Tensor w, 4 elements, K = 2 micro-batches with n = [1, 3] tokens, reduction mean
 * (A = 2): entry x_k = S_k / (n_k A), so S_0 = 2 x_0, S_1 = 6 x_1.
 *   x_0 = [1, 2, 0.5, -1], x_1 = [0.25, 1, 1, 1]
 *   g_same = x_0 + x_1 = [1.25, 3, 1.5, 0]
 *   g_full = (S_0 + S_1) / N = (2 x_0 + 6 x_1) / 4 = [0.875, 2.5, 1.75, 1]
 *   g_same - g_full = [0.375, 0.5, -0.25, -1]: ||.||^2 = 1.453125, ||g_full||^2 = 11.078125
 * An fp32 (or bf16: every value has at most 3 significant bits) accumulator adds them
 * exactly: grad_rel_err_rounding = 0, grad_rel_err_fullbatch = normalization_rel_err =
 * sqrt(1.453125 / 11.078125). */
static const float X0[4] = {1.0f, 2.0f, 0.5f, -1.0f}, X1[4] = {0.25f, 1.0f, 1.0f, 1.0f};
static const float W0[4] = {0.5f, -0.25f, 1.0f, 2.0f};

static const char *scenario_text =
    "name: replay-hand\n"
    "tensors:\n"
    "  - name: w\n"
    "    grad: {replay: %s, key: w}\n"
    "%s"
    "batch: {microbatches: 2, tokens: [1, 3]}\n"
    "reduction: mean\n"
    "precision: {grad: %s, accumulator: %s}\n"
    "optimizer: {lr: 0.0, weight_decay: 0.0}\n";

static int load_scenario(const char *name, const char *dump, const char *weight, const char *grad, const char *acc,
                         gp_scenario *sc, gp_error *e)
{
    char path[4200], text[8192];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    snprintf(text, sizeof text, scenario_text, dump, weight, grad, acc);
    write_text(path, text);
    return gp_scenario_load_file(path, sc, e);
}

static void check_hand(const gp_scenario *sc)
{
    gp_backend b;
    gp_error e = {""};
    gp_result r;
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    assert_int_equal(gp_run_scenario(sc, &b, NULL, &r, &e), 0);
    double want = sqrt(1.453125 / 11.078125);
    assert_true(fabs(r.metric[GP_M_NORMALIZATION_REL_ERR] - want) <= 0x1p-51 * want);
    assert_true(fabs(r.metric[GP_M_GRAD_REL_ERR_FULLBATCH] - want) <= 0x1p-51 * want);
    assert_true(r.metric[GP_M_GRAD_REL_ERR_ROUNDING] == 0.0);
    assert_int_equal(r.tensors[0].size, 4);
    gp_result_free(&r);
    gp_backend_close(&b);
}

static void test_safetensors_by_hand(void **state)
{
    (void)state;
    char dump[4200];
    snprintf(dump, sizeof dump, "%s/hand.safetensors", scratch);
    st_entry en[] = {{"w/step0/mb0", "F32", 4, X0, 16}, {"w/step0/mb1", "F32", 4, X1, 16},
                     {"w/weight", "F32", 4, W0, 16}};
    write_safetensors(dump, en, 3);
    gp_scenario sc;
    gp_error e = {""};
    /* relative to the scenario's folder */
    assert_int_equal(load_scenario("hand.yaml", "hand.safetensors", "    weight: {replay: hand.safetensors, key: w}\n",
                                   "fp32", "fp32", &sc, &e), 0);
    assert_int_equal(sc.tensors[0].size, 4); /* from the dump */
    check_hand(&sc);
    gp_scenario_free(&sc);
    /* The replayed weights are used: bf16 params W0 = [0.5, -0.25, 1, 2] with lr 1e-4. One
     * AdamW step moves a weight by about lr (|m/sqrt(v)| = 1 on step 1), below half a
     * bf16 ulp of each (2^-10 at 0.25 .. 2^-7 at 2): every non-zero update is stale
     * (element 3's gradient is 0: no update). Generated N(0, 0.02^2) weights: an update of
     * 1e-4 is stale only where |w| >= 2^-5 (half an ulp 2^-14 = 6.1e-5 below that), 1.6
     * standard deviations: with seed 0 not all three are. */
    char path[4200];
    const char *y = "name: w-stale\ntensors:\n  - name: w\n    grad: {replay: hand.safetensors, key: w}\n%s"
                    "batch: {microbatches: 2, tokens: [1, 3]}\nreduction: mean\n"
                    "optimizer: {lr: 1.0e-4, weight_decay: 0.0, param: bf16}\n";
    char text[1024];
    gp_backend b;
    gp_result r;
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    for (int replayed = 1; replayed >= 0; replayed--) {
        snprintf(text, sizeof text, y, replayed ? "    weight: {replay: hand.safetensors, key: w}\n" : "");
        snprintf(path, sizeof path, "%s/stale.yaml", scratch);
        write_text(path, text);
        assert_int_equal(gp_scenario_load_file(path, &sc, &e), 0);
        assert_int_equal(gp_run_scenario(&sc, &b, NULL, &r, &e), 0);
        if (replayed)
            assert_true(r.metric[GP_M_STALE_UPDATE_FRAC] == 1.0);
        else
            assert_true(r.metric[GP_M_STALE_UPDATE_FRAC] < 1.0);
        gp_result_free(&r);
        gp_scenario_free(&sc);
    }
    gp_backend_close(&b);
}

/* The same numbers from a folder of .npy files, the gradients as bf16 bits ('<u2'). */
static void test_npy_bf16_by_hand(void **state)
{
    (void)state;
    char dir[4200], path[4400];
    snprintf(dir, sizeof dir, "%s/npydump/w/step0", scratch);
    mkdirs(dir);
    const float *xs[2] = {X0, X1};
    for (int k = 0; k < 2; k++) {
        uint16_t bits[4];
        for (int i = 0; i < 4; i++) {
            uint32_t u;
            memcpy(&u, &xs[k][i], 4);
            bits[i] = (uint16_t)(u >> 16); /* exact: 3 significant bits at most */
        }
        snprintf(path, sizeof path, "%s/mb%d.npy", dir, k);
        write_npy(path, "{'descr': '<u2', 'fortran_order': False, 'shape': (4,), }", bits, 8);
    }
    gp_scenario sc;
    gp_error e = {""};
    assert_int_equal(load_scenario("npy.yaml", "npydump", "", "bf16", "bf16", &sc, &e), 0);
    check_hand(&sc);
    gp_scenario_free(&sc);
}

/* ---- malformed dumps: refused at load, naming the dump and the tensor ---- */

static void expect_refused(const char *dump, const char *grad, const char *size_line, const char *want)
{
    char path[4200], text[8192];
    snprintf(path, sizeof path, "%s/bad.yaml", scratch);
    snprintf(text, sizeof text,
             "name: bad\ntensors:\n  - name: layer.w\n%s    grad: {replay: %s, key: w}\n"
             "batch: {microbatches: 2, tokens: [1, 3]}\nprecision: {grad: %s}\n",
             size_line, dump, grad);
    write_text(path, text);
    gp_scenario sc;
    gp_error e = {""};
    int rc = gp_scenario_load_file(path, &sc, &e);
    if (rc == 0)
        gp_scenario_free(&sc);
    assert_int_equal(rc, -1);
    if (!strstr(e.msg, want) || !strstr(e.msg, dump) || !strstr(e.msg, "bad.yaml:4:"))
        fail_msg("message '%s' lacks '%s' or the dump '%s' or the position", e.msg, want, dump);
}

static void test_malformed_safetensors(void **state)
{
    (void)state;
    char p[4200];
    float z[8] = {0};
#define BAD(file) (snprintf(p, sizeof p, "%s/%s", scratch, file), p)
    /* header length past the end of the file */
    write_raw_safetensors(BAD("trunc_header.safetensors"), 4096, "{}", 0);
    expect_refused(p, "fp32", "", "truncated");
    /* header length beyond the 100 MB limit */
    write_raw_safetensors(BAD("huge_header.safetensors"), (uint64_t)1 << 40, "{}", 0);
    expect_refused(p, "fp32", "", "more than the limit");
    /* not JSON */
    write_raw_safetensors(BAD("not_json.safetensors"), 8, "{\"w/st  ", 0);
    expect_refused(p, "fp32", "", "not valid JSON");
    /* data_offsets past the end (file truncated after the header) */
    const char *h1 = "{\"w/step0/mb0\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                     "\"w/step0/mb1\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,32]}}";
    write_raw_safetensors(BAD("trunc_data.safetensors"), strlen(h1), h1, 20);
    expect_refused(p, "fp32", "", "entry 'w/step0/mb1': data_offsets [16, 32] end past the data (20 bytes");
    /* a shape that does not match the byte count */
    const char *h2 = "{\"w/step0/mb0\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,16]},"
                     "\"w/step0/mb1\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,32]}}";
    write_raw_safetensors(BAD("lying_shape.safetensors"), strlen(h2), h2, 32);
    expect_refused(p, "fp32", "", "entry 'w/step0/mb0': shape has 5 elements = 20 bytes of F32, but data_offsets span 16");
    /* a dtype gradprec does not replay */
    const char *h3 = "{\"w/step0/mb0\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}";
    write_raw_safetensors(BAD("i64.safetensors"), strlen(h3), h3, 16);
    expect_refused(p, "fp32", "", "dtype 'I64'");
    /* overlapping entries */
    const char *h4 = "{\"w/step0/mb0\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                     "\"w/step0/mb1\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}";
    write_raw_safetensors(BAD("overlap.safetensors"), strlen(h4), h4, 24);
    expect_refused(p, "fp32", "", "overlap");
    /* a missing micro-batch */
    st_entry one[] = {{"w/step0/mb0", "F32", 4, z, 16}};
    write_safetensors(BAD("missing.safetensors"), one, 1);
    expect_refused(p, "fp32", "", "tensors[0] 'layer.w'");
    expect_refused(p, "fp32", "", "entry 'w/step0/mb1': missing");
    /* the dump's dtype is not precision.grad */
    st_entry two[] = {{"w/step0/mb0", "F32", 4, z, 16}, {"w/step0/mb1", "F32", 4, z + 4, 16}};
    write_safetensors(BAD("two.safetensors"), two, 2);
    expect_refused(p, "bf16", "", "is fp32 but precision.grad is bf16");
    /* micro-batches of different sizes */
    st_entry uneven[] = {{"w/step0/mb0", "F32", 4, z, 16}, {"w/step0/mb1", "F32", 3, z + 4, 12}};
    write_safetensors(BAD("uneven.safetensors"), uneven, 2);
    expect_refused(p, "fp32", "", "entry 'w/step0/mb1' has 3 elements, 'w/step0/mb0' has 4");
    /* a written size that disagrees with the dump (the message points at size) */
    char text[1024], path[4200];
    snprintf(path, sizeof path, "%s/badsize.yaml", scratch);
    snprintf(text, sizeof text, "tensors:\n  - name: w\n    size: 5\n    grad: {replay: two.safetensors, key: w}\n"
                                "batch: {microbatches: 2, tokens: [1, 3]}\n");
    write_text(path, text);
    gp_scenario sc;
    gp_error e = {""};
    assert_int_equal(gp_scenario_load_file(path, &sc, &e), -1);
    assert_non_null(strstr(e.msg, "badsize.yaml:3:11: tensors[0].size is 5 but the dump's entries have 4 elements"));
    /* no such file */
    expect_refused(BAD("absent.safetensors"), "fp32", "", "cannot open");
#undef BAD
}

static void test_malformed_npy(void **state)
{
    (void)state;
    char dir[4200], f0[4400], f1[4400];
    float z[4] = {0};
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
    struct {
        const char *name, *dict;
        size_t bytes;
        const char *want;
    } cases[] = {
        {"big_endian", "{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", 16, "dtype '>f4'"},
        {"int_dtype", "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", 16, "dtype '<i4'"},
        {"fortran", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, "fortran_order True"},
        {"truncated", good, 12, "only 12 bytes of data follow (truncated)"},
        {"trailing", good, 16 + 4, "but 20 bytes of data follow"},
        {"shape_lies", "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 16, "shape has 5 elements"},
        {"garbage", "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}", 16, "key other than"},
        {"no_dict", "[1, 2, 3]", 16, "does not start with '{'"},
    };
    float data[5] = {0};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        snprintf(dir, sizeof dir, "%s/npybad_%s", scratch, cases[c].name);
        char sub[4300];
        snprintf(sub, sizeof sub, "%s/w/step0", dir);
        mkdirs(sub);
        snprintf(f0, sizeof f0, "%s/mb0.npy", sub);
        snprintf(f1, sizeof f1, "%s/mb1.npy", sub);
        write_npy(f0, good, z, 16);
        write_npy(f1, cases[c].dict, data, cases[c].bytes);
        expect_refused(dir, "fp32", "", cases[c].want);
        expect_refused(dir, "fp32", "", "mb1.npy");
    }
    /* bad magic */
    snprintf(dir, sizeof dir, "%s/npybad_magic/w/step0", scratch);
    mkdirs(dir);
    snprintf(f0, sizeof f0, "%s/mb0.npy", dir);
    write_text(f0, "PK\x03\x04 this is a zip, not an npy file");
    snprintf(dir, sizeof dir, "%s/npybad_magic", scratch);
    expect_refused(dir, "fp32", "", "no \\x93NUMPY magic");
    /* a missing file */
    snprintf(dir, sizeof dir, "%s/npybad_missing/w/step0", scratch);
    mkdirs(dir);
    snprintf(f0, sizeof f0, "%s/mb0.npy", dir);
    write_npy(f0, good, z, 16);
    snprintf(dir, sizeof dir, "%s/npybad_missing", scratch);
    expect_refused(dir, "fp32", "", "entry 'w/step0/mb1': missing");
}

/* The command line: exit 2, one line naming the dump and the tensor, nothing written. */
static void test_cli_exit2_nothing_written(void **state)
{
    (void)state;
    char cmd[9000];
    const char *dumps[] = {"trunc_data.safetensors", "lying_shape.safetensors", "missing.safetensors"};
    for (size_t i = 0; i < 3; i++) {
        char yaml[4200], text[1024];
        snprintf(yaml, sizeof yaml, "%s/cli%zu.yaml", scratch, i);
        snprintf(text, sizeof text, "name: cli\ntensors:\n  - name: layer.w\n    grad: {replay: %s, key: w}\n"
                                    "batch: {microbatches: 2, tokens: [1, 3]}\n", dumps[i]);
        write_text(yaml, text);
        snprintf(cmd, sizeof cmd, "rm -rf %s/cli-out; %s run %s --out %s/cli-out > %s/cli.out 2> %s/cli.err; "
                 "test $? -eq 2 && test ! -e %s/cli-out && test ! -s %s/cli.out && test $(wc -l < %s/cli.err) -eq 1 && "
                 "grep -q \"%s\" %s/cli.err && grep -q \"layer.w\" %s/cli.err",
                 scratch, gp_bin, yaml, scratch, scratch, scratch, scratch, scratch, scratch, dumps[i], scratch, scratch);
        if (system(cmd) != 0) {
            char show[4400];
            snprintf(show, sizeof show, "cat %s/cli.err", scratch);
            (void)system(show);
            fail_msg("gradprec run on %s: not exit 2 with one line naming the dump and the tensor", dumps[i]);
        }
    }
}

/* ---- a dump of many small tensors: parsed once, bounded memory ---- */

/* The user's case (issue 24): 300 tensors of 64 elements, 3 optimizer steps of K = 7
 * micro-batches plus the weights: 22 fp32 entries a tensor, 1.69 MB of data, a header of
 * 6600 entries. Written here; the scenario replays every tensor's gradients and weights
 * and sweeps two learning rates (each point a scenario of its own that reads the dump). */
enum { MANY_T = 300, MANY_S = 3, MANY_K = 7, MANY_E = 64 };

/* The peak resident memory a replay of it may need: the runner's own buffers and the
 * index of the header (a few MiB) are far below; a parse kept per tensor (the old
 * behaviour: 1.75 GB for the user's dump) far above. A fixed limit (issue 24, docs/replay.md). */
#define MANY_MAX_RSS_KIB (64L * 1024)

static void write_many(const char *dump, const char *yaml)
{
    size_t cap = 1 << 20, h = 0, ne = (size_t)MANY_T * (MANY_S * MANY_K + 1);
    char *hdr = malloc(cap);
    assert_non_null(hdr);
    h += (size_t)snprintf(hdr, cap, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t j = 0; j < ne; j++) {
        size_t t = j / (MANY_S * MANY_K + 1), q = j % (MANY_S * MANY_K + 1);
        char name[64];
        if (q == MANY_S * MANY_K)
            snprintf(name, sizeof name, "t%zu/weight", t);
        else
            snprintf(name, sizeof name, "t%zu/step%zu/mb%zu", t, q / MANY_K, q % MANY_K);
        if (cap - h < 256) {
            cap *= 2;
            assert_non_null(hdr = realloc(hdr, cap));
        }
        h += (size_t)snprintf(hdr + h, cap - h, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
                              name, MANY_E, j * MANY_E * 4, (j + 1) * MANY_E * 4);
    }
    hdr[h++] = '}';
    while (h % 8)
        hdr[h++] = ' ';
    FILE *f = fopen(dump, "wb");
    assert_non_null(f);
    uint64_t hl = h;
    fwrite(&hl, 8, 1, f);
    fwrite(hdr, 1, h, f);
    free(hdr);
    for (size_t j = 0; j < ne; j++) { /* exact binary fractions: (1 + m/16) 2^-(8 + e) */
        float v[MANY_E];
        for (size_t i = 0; i < MANY_E; i++)
            v[i] = ldexpf(1.0f + (float)((i * 7 + j) % 16) / 16.0f, -8 - (int)(j % 4)) * ((i + j) % 3 ? 1.0f : -1.0f);
        fwrite(v, 4, MANY_E, f);
    }
    assert_int_equal(fclose(f), 0);
    f = fopen(yaml, "w");
    assert_non_null(f);
    fprintf(f, "name: many\ntensors:\n");
    for (int t = 0; t < MANY_T; t++)
        fprintf(f, "  - name: t%d\n    grad: {replay: many.safetensors, key: t%d}\n"
                   "    weight: {replay: many.safetensors, key: t%d}\n", t, t, t);
    fprintf(f, "steps: %d\nbatch: {microbatches: %d, tokens: [5, 9, 3, 7, 7, 1, 4]}\nreduction: mean\n"
               "precision: {grad: fp32}\nsweep: {optimizer.lr: [0.001, 0.0001]}\n", MANY_S, MANY_K);
    assert_int_equal(fclose(f), 0);
}

/* Run `gradprec run --quiet -j J many.yaml --out DIR` as a child; its exit status (-1:
 * killed by a signal) and peak resident memory (KiB, wait4's ru_maxrss of that child alone;
 * it includes the resident memory this process had when it forked, which only makes the
 * bound stricter: the test runs first, while this process is small). */
static int run_many(int jobs, const char *out, long *kib)
{
    char j[16], yaml[4200];
    snprintf(j, sizeof j, "%d", jobs);
    snprintf(yaml, sizeof yaml, "%s/many.yaml", scratch);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 1);
        execl(gp_bin, gp_bin, "run", "--quiet", "-j", j, yaml, "--out", out, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    assert_int_equal(wait4(pid, &st, 0, &ru), pid);
    *kib = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The command line replays the 300-tensor dump within MANY_MAX_RSS_KIB, with -j 1 and -j 2
 * (two sweep points at once, sharing the dump), and both write the same reports, byte for
 * byte. */
static void test_many_tensors_memory(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* AddressSanitizer's shadow memory and quarantine are not the program's */
#endif
    char dump[4200], yaml[4200], out[2][4200], cmd[18000];
    snprintf(dump, sizeof dump, "%s/many.safetensors", scratch);
    snprintf(yaml, sizeof yaml, "%s/many.yaml", scratch);
    write_many(dump, yaml);
    for (int j = 0; j < 2; j++) {
        long kib = 0;
        snprintf(out[j], sizeof out[j], "%s/many-j%d", scratch, j + 1);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", out[j]);
        assert_int_equal(system(cmd), 0);
        int rc = run_many(j + 1, out[j], &kib);
        print_message("# 300 tensors x %d entries, -j %d: exit %d, peak %ld KiB (limit %ld)\n", MANY_S * MANY_K + 1,
                      j + 1, rc, kib, MANY_MAX_RSS_KIB);
        assert_true(rc == 0 || rc == 1); /* pass, or a threshold failed: either way it ran */
        if (kib > MANY_MAX_RSS_KIB)
            fail_msg("replaying 300 tensors with -j %d needed %ld KiB, more than %ld", j + 1, kib, MANY_MAX_RSS_KIB);
    }
    snprintf(cmd, sizeof cmd, "cmp '%s/report.json' '%s/report.json' && cmp '%s/report.md' '%s/report.md'", out[0],
             out[1], out[0], out[1]);
    assert_int_equal(system(cmd), 0);
}

/* Loading the two sweep points (300 tensors each, every entry checked) and running them on
 * two threads parses the dump's header once: every other open shares it. */
static void test_many_tensors_parsed_once(void **state)
{
    (void)state;
    char dump[4200], yaml[4200];
    snprintf(dump, sizeof dump, "%s/many1.safetensors", scratch);
    snprintf(yaml, sizeof yaml, "%s/many.yaml", scratch);
    write_many(dump, yaml); /* the scenario names many.safetensors: the same file, through a link */
    snprintf(dump, sizeof dump, "%s/many.safetensors", scratch);
    remove(dump);
    char target[4200];
    snprintf(target, sizeof target, "%s/many1.safetensors", scratch);
    assert_int_equal(symlink(target, dump), 0);
    gp_replay_stats s0, s1;
    gp_replay_stats_get(&s0);
    gp_scenario *sc = NULL;
    size_t n = 0;
    gp_error e = {""};
    assert_int_equal(gp_scenario_load_all_file(yaml, &sc, &n, &e), 0);
    assert_int_equal(n, 2);
    gp_backend b;
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    gp_result res[2];
    gp_run_opts o = {2, 1, 0.0, NULL, 0.0};
    assert_int_equal(gp_run_all(sc, n, &b, NULL, &o, res, &e), 0);
    gp_replay_stats_get(&s1);
    print_message("# headers parsed %llu, opens shared %llu\n", (unsigned long long)(s1.parsed - s0.parsed),
                  (unsigned long long)(s1.shared - s0.shared));
    assert_int_equal(s1.parsed - s0.parsed, 1);
    /* today every tensor's grad and weight, at load and at run, for both points: 2 x 2 x 2 x
     * 300 opens, the first of which parsed; at least each point's run of each tensor shared */
    assert_true(s1.shared - s0.shared >= 2 * MANY_T);
    for (size_t i = 0; i < n; i++) {
        gp_result_free(&res[i]);
        gp_scenario_free(&sc[i]);
    }
    free(sc);
    gp_backend_close(&b);
}

/* ---- a dump that changes while it is read ---- */

/* The file's size (bytes). */
static long long file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (long long)st.st_size;
}

/* Reading an entry of a file truncated, modified or replaced after it was opened fails
 * with one message naming the dump and the entry (and the process is not killed); an
 * unchanged file reads back what was written. */
static void test_read_faults(void **state)
{
    (void)state;
    char dump[4200], other[4200];
    snprintf(dump, sizeof dump, "%s/fault.safetensors", scratch);
    snprintf(other, sizeof other, "%s/fault2.safetensors", scratch);
    st_entry en[] = {{"w/step0/mb0", "F32", 4, X0, 16}, {"w/step0/mb1", "F32", 4, X1, 16},
                     {"w/step0/mb2", "F32", 4, X0, 16}};
    float got[4];
    gp_error e = {""};
    gp_replay *r;
    gp_replay_entry en1;
    for (int how = 0; how < 3; how++) { /* truncated, modified in place, replaced */
        write_safetensors(dump, en, 3);
        assert_int_equal(gp_replay_open(dump, &r, &e), 0);
        assert_int_equal(gp_replay_entry_get(r, "w/step0/mb1", &en1, &e), 0);
        assert_int_equal(gp_replay_read(&en1, 0, 4, got, &e), 0);
        assert_memory_equal(got, X1, sizeof got);
        const char *want = "was truncated";
        if (how == 0) {
            assert_int_equal(truncate(dump, (off_t)(file_size(dump) - 32)), 0); /* mb1 and mb2 gone */
        } else if (how == 1) { /* the same bytes written again, the file's time moved on */
            int fd = open(dump, O_WRONLY);
            assert_true(fd >= 0);
            assert_int_equal(pwrite(fd, X0, 16, (off_t)(file_size(dump) - 32)), 16);
            struct timespec ts[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
            struct stat st;
            assert_int_equal(fstat(fd, &st), 0);
            ts[1].tv_sec = st.st_mtim.tv_sec + 5; /* past any timestamp granularity */
            ts[1].tv_nsec = 0;
            assert_int_equal(futimens(fd, ts), 0);
            close(fd);
            want = "modified since it was opened";
        } else {
            write_safetensors(other, en, 3);
            assert_int_equal(rename(other, dump), 0);
            want = "replaced by another file";
        }
        assert_int_equal(gp_replay_read(&en1, 0, 4, got, &e), -1);
        print_message("# %s\n", e.msg);
        assert_non_null(strstr(e.msg, dump));
        assert_non_null(strstr(e.msg, "entry 'w/step0/mb1'"));
        assert_non_null(strstr(e.msg, want));
        gp_replay_entry_release(&en1);
        gp_replay_close(r);
    }
    /* A .npy entry whose file is truncated after it was opened. */
    char dir[4200], file[4300];
    snprintf(dir, sizeof dir, "%s/npyfault/w/step0", scratch);
    mkdirs(dir);
    snprintf(file, sizeof file, "%s/mb0.npy", dir);
    write_npy(file, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", X0, 16);
    snprintf(dir, sizeof dir, "%s/npyfault", scratch);
    assert_int_equal(gp_replay_open(dir, &r, &e), 0);
    assert_int_equal(gp_replay_entry_get(r, "w/step0/mb0", &en1, &e), 0);
    assert_int_equal(truncate(file, (off_t)(file_size(file) - 8)), 0);
    assert_int_equal(gp_replay_read(&en1, 0, 4, got, &e), -1);
    assert_non_null(strstr(e.msg, dir));
    assert_non_null(strstr(e.msg, "entry 'w/step0/mb0'"));
    assert_non_null(strstr(e.msg, "truncated"));
    gp_replay_entry_release(&en1);
    gp_replay_close(r);
}

/* Sampled reads (elements far apart: one pread each; close together: one for several)
 * return the elements asked for, widened exactly: bf16 bits b are the fp32 bits b << 16. */
static void test_read_idx(void **state)
{
    (void)state;
    enum { E = 20000 };
    static uint16_t v[E];
    for (size_t i = 0; i < E; i++)
        v[i] = (uint16_t)(0x3c00u + (i * 37u) % 0x3000u);
    char dump[4200];
    snprintf(dump, sizeof dump, "%s/idx.safetensors", scratch);
    st_entry en[] = {{"w/step0/mb0", "BF16", E, v, sizeof v}};
    write_safetensors(dump, en, 1);
    const uint64_t idx[] = {0, 1, 5, 8191, 8192, 9000, 19998, 19999};
    enum { NI = sizeof idx / sizeof idx[0] };
    float got[NI];
    gp_error e = {""};
    gp_replay *r;
    gp_replay_entry x;
    assert_int_equal(gp_replay_open(dump, &r, &e), 0);
    assert_int_equal(gp_replay_entry_get(r, "w/step0/mb0", &x, &e), 0);
    assert_int_equal(gp_replay_read_idx(&x, idx, NI, got, &e), 0);
    for (size_t j = 0; j < NI; j++) {
        uint32_t bits;
        memcpy(&bits, &got[j], 4);
        assert_int_equal(bits, (uint32_t)v[idx[j]] << 16);
    }
    gp_replay_entry_release(&x);
    gp_replay_close(r);
}

/* gp_replay_read widens bf16 and fp16 entries to fp32 bit for bit (bf16: the top half;
 * fp16: gp_fmt_to_f32_bits), NaNs and subnormals included, for reads of whole widening
 * blocks (1024 entries), partial ones and odd starts: the entries are read into the top
 * of the output and widened forward, block by block (gp_replay.c). */
static void test_read_widens(void **state)
{
    (void)state;
    enum { E = 5000 };
    static uint16_t v[E];
    static float got[E];
    for (size_t i = 0; i < E; i++) /* every bit pattern's neighbourhood: signs, NaNs, subnormals */
        v[i] = (uint16_t)(i * 40503u + (i >> 3));
    char dump[4200];
    snprintf(dump, sizeof dump, "%s/widen.safetensors", scratch);
    st_entry en[] = {{"w/step0/mb0", "BF16", E, v, sizeof v}, {"w/step0/mb1", "F16", E, v, sizeof v}};
    write_safetensors(dump, en, 2);
    const size_t reads[][2] = {{0, E}, {0, 1024}, {1, 1023}, {3, 2049}, {1000, 3000}, {E - 1, 1}, {17, 4096}};
    gp_error e = {""};
    gp_replay *r;
    assert_int_equal(gp_replay_open(dump, &r, &e), 0);
    for (int k = 0; k < 2; k++) {
        gp_replay_entry x;
        assert_int_equal(gp_replay_entry_get(r, k ? "w/step0/mb1" : "w/step0/mb0", &x, &e), 0);
        for (size_t q = 0; q < sizeof reads / sizeof reads[0]; q++) {
            size_t i0 = reads[q][0], n = reads[q][1];
            memset(got, 0xa5, sizeof got);
            assert_int_equal(gp_replay_read(&x, i0, n, got, &e), 0);
            for (size_t j = 0; j < n; j++) {
                uint32_t bits, want = k ? gp_fmt_to_f32_bits(GP_FP16, v[i0 + j]) : (uint32_t)v[i0 + j] << 16;
                memcpy(&bits, &got[j], 4);
                if (bits != want)
                    fail_msg("%s entry %zu (read %zu at %zu): 0x%08x, want 0x%08x", k ? "F16" : "BF16", i0 + j, n, i0,
                             bits, want);
            }
        }
        gp_replay_entry_release(&x);
    }
    gp_replay_close(r);
}

/* A dump truncated after the scenario was loaded and before it runs: gp_run_scenario
 * returns -3 (a fault) naming the dump and the first entry now past the end. */
static void test_truncated_after_load(void **state)
{
    (void)state;
    char dump[4200];
    snprintf(dump, sizeof dump, "%s/cut.safetensors", scratch);
    st_entry en[] = {{"w/step0/mb0", "F32", 4, X0, 16}, {"w/step0/mb1", "F32", 4, X1, 16}};
    write_safetensors(dump, en, 2);
    gp_scenario sc;
    gp_error e = {""};
    assert_int_equal(load_scenario("cut.yaml", "cut.safetensors", "", "fp32", "fp32", &sc, &e), 0);
    assert_int_equal(truncate(dump, (off_t)(file_size(dump) - 16)), 0);
    gp_backend b;
    gp_result r;
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    assert_int_equal(gp_run_scenario(&sc, &b, NULL, &r, &e), -3);
    print_message("# %s\n", e.msg);
    assert_non_null(strstr(e.msg, "cut.safetensors"));
    assert_non_null(strstr(e.msg, "entry 'w/step0/mb1'"));
    gp_scenario_free(&sc);
    gp_backend_close(&b);
}

/* The command line, a dump truncated while the run reads it (by a plugin that cuts it at
 * its first accumulate call, after micro-batch 0 was read): exit 3, exactly one line on
 * stderr naming the dump and entry w/step0/mb1, nothing on stdout, no report folder. */
static void test_cli_truncated_during_run(void **state)
{
    (void)state;
    char dump[4200], yaml[4200], cmd[12000];
    snprintf(dump, sizeof dump, "%s/during.safetensors", scratch);
    snprintf(yaml, sizeof yaml, "%s/during.yaml", scratch);
    st_entry en[] = {{"w/step0/mb0", "F32", 4, X0, 16}, {"w/step0/mb1", "F32", 4, X1, 16},
                     {"w/step0/mb2", "F32", 4, X0, 16}};
    write_safetensors(dump, en, 3);
    write_text(yaml, "name: during\ntensors:\n  - name: w\n    grad: {replay: during.safetensors, key: w}\n"
                     "batch: {microbatches: 3, tokens: [1, 3, 2]}\nreduction: mean\n"
                     "precision: {grad: fp32, accumulator: fp32}\n");
    long long cut = file_size(dump) - 32; /* the end of mb0's data */
    snprintf(cmd, sizeof cmd, "rm -rf %s/during-out; GP_HOSTILE_TRUNCATE='%lld:%s' %s run -j 1 --backend plugin:%s %s "
             "--out %s/during-out > %s/during.out 2> %s/during.err; rc=$?; cat %s/during.err; test $rc -eq 3 && "
             "test ! -e %s/during-out && test ! -s %s/during.out && test $(wc -l < %s/during.err) -eq 1 && "
             "grep -q \"during.safetensors: entry 'w/step0/mb1'\" %s/during.err && grep -q truncated %s/during.err",
             scratch, cut, dump, gp_bin, truncate_plugin, yaml, scratch, scratch, scratch, scratch, scratch, scratch,
             scratch, scratch, scratch);
    if (system(cmd) != 0)
        fail_msg("gradprec run on a dump truncated during the run: not exit 3 with one line naming dump and entry");
}

/* ---- sampling ---- */

/* The command line on a sampled scenario: report.json says n of M with intervals, and
 * the note is in the terminal table and report.md. (Uses the dump of the coverage test.) */
static void test_cli_sampled_report(void **state)
{
    (void)state;
    char yaml[4200], cmd[9000];
    snprintf(yaml, sizeof yaml, "%s/sampled.yaml", scratch);
    write_text(yaml, "name: sampled\ntensors:\n  - name: g\n    grad: {replay: cov.safetensors, key: g}\n"
                     "    sample: 600\nbatch: {microbatches: 16, tokens: 100}\nreduction: sum\nfullbatch: sum\n"
                     "precision: {grad: bf16, accumulator: bf16}\n");
    snprintf(cmd, sizeof cmd, "%s run --quiet %s --out %s/sampled-out > %s/sampled.txt; test $? -le 1 && "
             "grep -q '\"elements\": 600' %s/sampled-out/report.json && grep -q '\"of\": 6000' %s/sampled-out/report.json && "
             "grep -q '\"absorbed_frac\": \\[' %s/sampled-out/report.json && "
             "grep -q 'tensor g: metrics are estimates over 600 of 6000 elements' %s/sampled.txt && "
             "grep -q 'estimates over 600 of 6000' %s/sampled-out/report.md",
             gp_bin, yaml, scratch, scratch, scratch, scratch, scratch, scratch, scratch);
    assert_int_equal(system(cmd), 0);
}

/* A dump that holds a sample (`population: M`) and one whose entries carry a loss scale
 * (`loss_scale.replay_scales`): the hand case again. With population 8 the 4 entries
 * stand for 8 elements: one tensor, so the ratio estimates equal the ratios of the 4
 * (w = 8/4 cancels) and the report says "4 of 8". Entries stored as 4 x_k with
 * replay_scales [4] are divided back exactly (and, under a scaler of 4, the backend
 * accumulates the stored 4 x_k: every value exact): the hand values again. */
static void test_population_and_replay_scales(void **state)
{
    (void)state;
    char dump[4200], path[4200], text[2048];
    snprintf(dump, sizeof dump, "%s/pop.safetensors", scratch);
    st_entry en[] = {{"w/step0/mb0", "F32", 4, X0, 16}, {"w/step0/mb1", "F32", 4, X1, 16}};
    write_safetensors(dump, en, 2);
    gp_scenario sc;
    gp_error e = {""};
    assert_int_equal(load_scenario("pop.yaml", "pop.safetensors", "    population: 8\n", "fp32", "fp32", &sc, &e), 0);
    assert_int_equal(sc.tensors[0].population, 8);
    check_hand(&sc);
    gp_backend b;
    gp_result r;
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    assert_int_equal(gp_run_scenario(&sc, &b, NULL, &r, &e), 0);
    assert_true(r.sampled);
    assert_int_equal(r.tensors[0].population, 8);
    gp_result_free(&r);
    gp_scenario_free(&sc);
    assert_int_equal(load_scenario("pop3.yaml", "pop.safetensors", "    population: 3\n", "fp32", "fp32", &sc, &e), -1);
    assert_non_null(strstr(e.msg, "population is 3, fewer than the dump's 4 elements"));

    float X0s[4], X1s[4];
    for (int i = 0; i < 4; i++)
        X0s[i] = 4 * X0[i], X1s[i] = 4 * X1[i];
    snprintf(dump, sizeof dump, "%s/scaled.safetensors", scratch);
    st_entry es[] = {{"w/step0/mb0", "F32", 4, X0s, 16}, {"w/step0/mb1", "F32", 4, X1s, 16}};
    write_safetensors(dump, es, 2);
    const char *y = "name: scaled\ntensors:\n  - name: w\n    grad: {replay: scaled.safetensors, key: w}\n"
                    "batch: {microbatches: 2, tokens: [1, 3]}\nreduction: mean\n"
                    "optimizer: {lr: 0.0, weight_decay: 0.0}\nloss_scale: %s\n";
    const char *ok[] = {"{mode: dynamic, init: 4, replay_scales: [4]}", "{mode: none, replay_scales: [4]}",
                        "{mode: static, init: 1024, replay_scales: [4]}"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/scaled.yaml", scratch);
        snprintf(text, sizeof text, y, ok[i]);
        write_text(path, text);
        if (gp_scenario_load_file(path, &sc, &e) != 0)
            fail_msg("%s", e.msg);
        check_hand(&sc);
        gp_scenario_free(&sc);
    }
    const char *bad[][2] = {{"{mode: dynamic, replay_scales: [4, 4]}", "has 2 entries, steps is 1"},
                            {"{mode: dynamic, replay_scales: [3]}", "replay_scales[0] must be a power of two"},
                            {"{mode: dynamic, replay_scales: 4}", "a list of one scale per optimizer step"}};
    for (int i = 0; i < 3; i++) {
        snprintf(text, sizeof text, y, bad[i][0]);
        write_text(path, text);
        assert_int_equal(gp_scenario_load_file(path, &sc, &e), -1);
        if (!strstr(e.msg, bad[i][1]))
            fail_msg("'%s' lacks '%s'", e.msg, bad[i][1]);
    }
    /* Scenario-level metrics weight a sampled tensor by M/n: tensor a (the hand case,
     * population 8 of its 4 entries: weight 2) has sums y = ||g_same - g_full||^2 =
     * 1.453125, x = ||g_full||^2 = 11.078125; tensor b (x_0 = x_1 = X0, whole) has g_same
     * = g_full = 2 X0: y = 0, x = 4 (1 + 4 + 0.25 + 1) = 25. normalization_rel_err =
     * sqrt((2 * 1.453125 + 0) / (2 * 11.078125 + 25)) (every sum exact in binary64; the
     * ratio and the root round: within 2^-50 relative). Unweighted it would be
     * sqrt(1.453125 / 36.078125), 19% lower. */
    snprintf(dump, sizeof dump, "%s/same.safetensors", scratch);
    st_entry eb[] = {{"w/step0/mb0", "F32", 4, X0, 16}, {"w/step0/mb1", "F32", 4, X0, 16}};
    write_safetensors(dump, eb, 2);
    write_text(path, "tensors:\n  - {name: a, population: 8, grad: {replay: pop.safetensors, key: w}}\n"
                     "  - {name: b, grad: {replay: same.safetensors, key: w}}\n"
                     "batch: {microbatches: 2, tokens: [1, 3]}\nreduction: mean\n"
                     "optimizer: {lr: 0.0, weight_decay: 0.0}\n");
    if (gp_scenario_load_file(path, &sc, &e) != 0)
        fail_msg("%s", e.msg);
    assert_int_equal(gp_run_scenario(&sc, &b, NULL, &r, &e), 0);
    double want = sqrt((2 * 1.453125) / (2 * 11.078125 + 25));
    if (!(fabs(r.metric[GP_M_NORMALIZATION_REL_ERR] - want) <= 0x1p-50 * want))
        fail_msg("normalization_rel_err %.17g, want %.17g", r.metric[GP_M_NORMALIZATION_REL_ERR], want);
    gp_result_free(&r);
    gp_scenario_free(&sc);
    write_text(path, "tensors:\n  - name: g\nloss_scale: {mode: dynamic, replay_scales: [4]}\n");
    assert_int_equal(gp_scenario_load_file(path, &sc, &e), -1);
    assert_non_null(strstr(e.msg, "no tensor is replayed"));
    write_text(path, "tensors:\n  - name: g\n    population: 9\n");
    assert_int_equal(gp_scenario_load_file(path, &sc, &e), -1);
    assert_non_null(strstr(e.msg, "population applies to replayed tensors"));
    gp_backend_close(&b);
}

/* Peak resident memory (KiB) of a child process that replays `dump` (K = 2 bf16 entries
 * of E elements, whole or with `sample: S`) on the CPU backend in-process. */
static long replay_peak_kib(const char *dump, uint64_t E, uint64_t S)
{
    char yaml[4200], text[9000];
    snprintf(yaml, sizeof yaml, "%s/peak.yaml", scratch);
    snprintf(text, sizeof text, "name: peak\ntensors:\n  - name: w\n    grad: {replay: %s, key: w}\n%s"
                                "batch: {microbatches: 2, tokens: [1, 3]}\nprecision: {grad: bf16}\n",
             dump, S ? "    sample: 65536\n" : "");
    write_text(yaml, text);
    (void)E;
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gp_scenario sc;
        gp_error e = {""};
        gp_backend b;
        gp_result r;
        struct rusage ru;
        close(fd[0]);
        if (gp_scenario_load_file(yaml, &sc, &e) != 0 || gp_backend_open("cpu", &b, &e) != 0 ||
            gp_run_scenario(&sc, &b, NULL, &r, &e) != 0)
            _exit(1);
        getrusage(RUSAGE_SELF, &ru);
        long kib = ru.ru_maxrss;
        _exit(write(fd[1], &kib, sizeof kib) == (ssize_t)sizeof kib ? 0 : 1);
    }
    close(fd[1]);
    long kib = -1;
    ssize_t got = read(fd[0], &kib, sizeof kib);
    close(fd[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(got == (ssize_t)sizeof kib && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return kib;
}

/* A dense dump 8 times larger must not need more memory: the runner reads each chunk of
 * 16384 elements (whole) or of 16384 chosen elements (sampled, 65536 of each entry) and
 * gives the pages back. Dumps of 2 x 2^22 and 2 x 2^25 bf16 elements (16 and 128 MiB,
 * data starting mid-page, in the page cache after writing); peak resident memory of a
 * child replaying each. A sampled read that gave its pages back only after the chunk
 * held every page the chunk touched (a quarter of an entry here: the larger run needed
 * 16 MiB more, measured); the bound allows 4 MiB for allocator and page-table noise. */
static void test_streaming_memory_does_not_grow(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer's quarantine keeps freed chunk buffers (up to 256 MiB): resident
     * memory grows with the number of chunks whatever the replay does. */
    skip();
#endif
    char dump[2][4200];
    long peak[2][2];
    for (int big = 0; big < 2; big++) {
        uint64_t E = (uint64_t)1 << (big ? 25 : 22);
        snprintf(dump[big], sizeof dump[big], "%s/dense%d.safetensors", scratch, big);
        uint16_t *v = malloc((size_t)E * 2);
        assert_non_null(v);
        for (size_t i = 0; i < E; i++)
            v[i] = (uint16_t)(0x3c00u + (i & 0xffu)); /* bf16 values near 2^-7 */
        st_entry en[] = {{"w/step0/mb0", "BF16", E, v, (size_t)E * 2}, {"w/step0/mb1", "BF16", E, v, (size_t)E * 2}};
        write_safetensors(dump[big], en, 2);
        free(v);
        for (int smp = 0; smp < 2; smp++)
            peak[big][smp] = replay_peak_kib(dump[big], E, (uint64_t)smp);
    }
    for (int smp = 0; smp < 2; smp++) {
        print_message("# %s: peak %ld KiB (16 MiB dump), %ld KiB (128 MiB dump)\n", smp ? "sampled" : "whole",
                      peak[0][smp], peak[1][smp]);
        if (peak[1][smp] - peak[0][smp] > 4096)
            fail_msg("%s replay of a 128 MiB dump needed %ld KiB more than of a 16 MiB one", smp ? "a sampled" : "a whole",
                     peak[1][smp] - peak[0][smp]);
    }
    remove(dump[0]);
    remove(dump[1]);
}

static void test_sample_indices(void **state)
{
    (void)state;
    uint64_t a[1000], b[1000];
    gp_error e = {""};
    assert_int_equal(gp_sample_indices(42, 7, 100000, 1000, a, &e), 0);
    assert_int_equal(gp_sample_indices(42, 7, 100000, 1000, b, &e), 0);
    assert_memory_equal(a, b, sizeof a);
    for (int i = 1; i < 1000; i++)
        assert_true(a[i - 1] < a[i] && a[i] < 100000); /* distinct, sorted, in range */
    assert_int_equal(gp_sample_indices(43, 7, 100000, 1000, b, &e), 0);
    assert_memory_not_equal(a, b, sizeof a);
    /* every element equally likely: over 2000 draws of 5 of 10, each element is chosen
     * Binomial(2000, 1/2) times (not independent across elements, but each count is):
     * mean 1000, sd 22.4; 5.5 sd (3.8e-8 two-sided per element) = 123 */
    int hits[10] = {0};
    for (uint64_t s = 0; s < 2000; s++) {
        uint64_t c[5];
        assert_int_equal(gp_sample_indices(s, 1, 10, 5, c, &e), 0);
        for (int i = 0; i < 5; i++)
            hits[c[i]]++;
    }
    for (int i = 0; i < 10; i++)
        assert_true(abs(hits[i] - 1000) <= 123);
}

/* Coverage: a dump of M = 6000 elements (K = 16 bf16 gradients of magnitudes spread over
 * 12 binades, summed in bf16: 15% of the additions are absorbed) is run whole once (the exact value of every metric), then with `sample: 600`
 * under T = 300 seeds. Each interval claims 95% coverage, so the count C of intervals
 * holding the exact value is Binomial(T, p) with p >= 0.95 if the claim holds. We accept
 * C >= c_min, the smallest c with P(C <= c - 1 | p = 0.95) <= 1e-4 (GSL's binomial CDF):
 * a true claim fails once in 10^4 runs. (The intervals are delta-method intervals: they
 * rely on no handful of elements dominating the sums; docs/replay.md shows the case
 * where they do and the coverage collapses.) */
static void test_sample_coverage(void **state)
{
    (void)state;
    enum { M = 6000, K = 16, T = 300 };
    float *x = malloc((size_t)M * K * sizeof *x);
    assert_non_null(x);
    uint64_t seed = gp_test_seed(20261123);
    for (size_t i = 0; i < (size_t)M * K; i++) { /* heavy-ish tails: magnitudes over 4 binades */
        uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
        h ^= h >> 29;
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 32;
        float mag = ldexpf(1.0f + (float)(h & 0xff) / 256.0f, -(int)((h >> 8) % 12));
        uint32_t u;
        memcpy(&u, &mag, 4);
        u &= 0xffff0000u; /* a bf16 value */
        memcpy(&x[i], &u, 4);
        if ((h >> 16) & 1)
            x[i] = -x[i];
    }
    char dump[4200];
    snprintf(dump, sizeof dump, "%s/cov.safetensors", scratch);
    st_entry en[K];
    char names[K][32];
    uint16_t *bits = malloc((size_t)M * K * 2);
    assert_non_null(bits);
    for (size_t i = 0; i < (size_t)M * K; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        bits[i] = (uint16_t)(u >> 16);
    }
    for (int k = 0; k < K; k++) {
        snprintf(names[k], sizeof names[k], "g/step0/mb%d", k);
        en[k] = (st_entry){names[k], "BF16", M, bits + (size_t)k * M, (size_t)M * 2};
    }
    write_safetensors(dump, en, K);
    free(x);
    free(bits);
    char text[1024];
    const char *fmt = "name: cov\nseed: %d\ntensors:\n  - name: g\n    grad: {replay: cov.safetensors, key: g}\n%s"
                      "batch: {microbatches: 16, tokens: 100}\nreduction: sum\nfullbatch: sum\n"
                      "precision: {grad: bf16, accumulator: bf16}\n";
    snprintf(text, sizeof text, fmt, 0, "");
    gp_scenario full, smp;
    gp_error e = {""};
    assert_int_equal(gp_scenario_load_string(text, strlen(text), scratch, &full, &e), 0);
    gp_backend b;
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    gp_result rf, rs;
    /* the scenario text resolves the dump against the current folder: run from scratch */
    assert_int_equal(gp_run_scenario(&full, &b, NULL, &rf, &e), 0);
    const gp_metric ms[] = {GP_M_GRAD_REL_ERR_FULLBATCH, GP_M_GRAD_REL_ERR_ROUNDING, GP_M_GRAD_NORM_RATIO,
                            GP_M_ABSORBED_FRAC};
    int covered[4] = {0};
    printf("# whole tensor: grad_rel_err_fullbatch %g, absorbed_frac %g\n", rf.metric[GP_M_GRAD_REL_ERR_FULLBATCH],
           rf.metric[GP_M_ABSORBED_FRAC]);
    assert_true(rf.metric[GP_M_ABSORBED_FRAC] > 0.001 && rf.metric[GP_M_GRAD_REL_ERR_FULLBATCH] > 1e-3);
    for (int s = 1; s <= T; s++) {
        snprintf(text, sizeof text, fmt, s, "    sample: 600\n");
        assert_int_equal(gp_scenario_load_string(text, strlen(text), scratch, &smp, &e), 0);
        assert_int_equal(gp_run_scenario(&smp, &b, NULL, &rs, &e), 0);
        assert_int_equal(rs.tensors[0].population, M);
        assert_int_equal(rs.tensors[0].size, 600);
        for (int j = 0; j < 4; j++) {
            assert_true(rs.tensors[0].has_ci[ms[j]] && rs.has_ci[ms[j]]);
            double v = rf.metric[ms[j]];
            covered[j] += rs.tensors[0].ci_lo[ms[j]] <= v && v <= rs.tensors[0].ci_hi[ms[j]];
        }
        gp_result_free(&rs);
        gp_scenario_free(&smp);
    }
    int cmin = 0;
    while (gsl_cdf_binomial_P((unsigned)cmin, 0.95, T) <= 1e-4) /* P(C <= cmin) */
        cmin++;
    /* now P(C <= cmin - 1) <= 1e-4 < P(C <= cmin): accept C >= cmin */
    for (int j = 0; j < 4; j++) {
        printf("# %s: %d of %d intervals hold the exact value %a (accept >= %d)\n", gp_metric_name(ms[j]),
               covered[j], T, rf.metric[ms[j]], cmin);
        assert_true(covered[j] >= cmin);
    }
    gp_result_free(&rf);
    gp_scenario_free(&full);
    gp_backend_close(&b);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_replay SCRATCH_DIR GRADPREC_BIN TRUNCATE_PLUGIN\n");
        return 2;
    }
    scratch = argv[1];
    gp_bin = argv[2];
    truncate_plugin = argv[3];
    mkdirs(scratch);
    if (chdir(scratch) != 0)
        return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_tensors_memory), /* first: this process is still small */
        cmocka_unit_test(test_many_tensors_parsed_once),
        cmocka_unit_test(test_read_faults),
        cmocka_unit_test(test_read_idx),
        cmocka_unit_test(test_read_widens),
        cmocka_unit_test(test_truncated_after_load),
        cmocka_unit_test(test_cli_truncated_during_run),
        cmocka_unit_test(test_safetensors_by_hand),
        cmocka_unit_test(test_npy_bf16_by_hand),
        cmocka_unit_test(test_malformed_safetensors),
        cmocka_unit_test(test_malformed_npy),
        cmocka_unit_test(test_cli_exit2_nothing_written),
        cmocka_unit_test(test_sample_indices),
        cmocka_unit_test(test_population_and_replay_scales),
        cmocka_unit_test(test_streaming_memory_does_not_grow),
        cmocka_unit_test(test_sample_coverage),
        cmocka_unit_test(test_cli_sampled_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
