/* gp_bench_replay.c — `gp_bench --replay [--replay-gib G] [--replay-dense] [--replay-sample N]
 * [--replay-big-only]`: (f) replay throughput next to the synthetic generator on the same
 * sizes, (g) peak resident memory replaying a dump far larger than that memory (read in
 * chunks with pread, never loaded whole), whole or sampled. Dumps are written into $TMPDIR
 * (default /tmp) and removed. See bench/README.md. */
#define _DEFAULT_SOURCE /* posix_fadvise */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/sources/gp_backend.h"
#include "harness/sources/gp_generate.h"
#include "harness/run/gp_runner.h"
#include "harness/scenario/gp_scenario.h"
#include "gp_bench_clock.h"

int gp_bench_replay(int json, double gib, int dense, uint64_t sample, int big_only);

/* How write_dump fills the data area. */
enum {
    DUMP_SPARSE = 0,  /* a hole (ftruncate), read back as zeros without using the disk */
    DUMP_DENSE = 1,   /* every element generated (normal, scale 1e-3, rounded to bf16) */
    DUMP_PATTERN = 2  /* a generated block of 2^16 bf16 values repeated (entry k starts
                         k x 4099 values into it), written to disk and then evicted
                         from the page cache (the replay reads the disk): fast to write
                         at any size */
};

/* A safetensors dump of K BF16 entries "w/step0/mb<k>" of E elements each, filled as
 * `mode` says. */
static int write_dump(const char *path, uint64_t E, int K, int mode)
{
    int dense = mode == DUMP_DENSE;
    char hdr[8192];
    size_t h = (size_t)snprintf(hdr, sizeof hdr, "{");
    for (int k = 0; k < K; k++)
        h += (size_t)snprintf(hdr + h, sizeof hdr - h, "%s\"w/step0/mb%d\":{\"dtype\":\"BF16\",\"shape\":[%llu],"
                              "\"data_offsets\":[%llu,%llu]}", k ? "," : "", k, (unsigned long long)E,
                              (unsigned long long)(2 * E * (uint64_t)k), (unsigned long long)(2 * E * (uint64_t)(k + 1)));
    h += (size_t)snprintf(hdr + h, sizeof hdr - h, "}");
    while (h % 8)
        hdr[h++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    uint64_t hl = h;
    int bad = fwrite(&hl, 8, 1, f) != 1 || fwrite(hdr, 1, h, f) != h;
    if (dense) {
        gp_dist d;
        memset(&d, 0, sizeof d);
        d.kind = GP_DIST_NORMAL;
        d.scale = 1e-3;
        enum { B = 1 << 16 };
        static float v[B];
        static uint16_t b[B];
        for (int k = 0; k < K && !bad; k++)
            for (uint64_t i0 = 0; i0 < E && !bad; i0 += B) {
                size_t n = E - i0 < B ? (size_t)(E - i0) : B;
                gp_generate(&d, 1, gp_stream_id(GP_STREAM_GRAD, 0, 0, (uint64_t)k), i0, n, v);
                for (size_t j = 0; j < n; j++)
                    b[j] = (uint16_t)gp_fmt_from_f32_bits(GP_BF16, gp_f32_bits(v[j]), GP_RNE, 0, 0, (unsigned *)0);
                bad = fwrite(b, 2, n, f) != n;
            }
    }
    if (mode == DUMP_PATTERN) {
        enum { B = 1 << 16, BUF = 1 << 20 };
        static float v[B];
        static uint16_t pat[B], buf[BUF];
        gp_dist d;
        memset(&d, 0, sizeof d);
        d.kind = GP_DIST_NORMAL;
        d.scale = 1e-3;
        gp_generate(&d, 1, gp_stream_id(GP_STREAM_GRAD, 0, 0, 0), 0, B, v);
        for (size_t j = 0; j < B; j++)
            pat[j] = (uint16_t)gp_fmt_from_f32_bits(GP_BF16, gp_f32_bits(v[j]), GP_RNE, 0, 0, (unsigned *)0);
        for (int k = 0; k < K && !bad; k++)
            for (uint64_t i0 = 0; i0 < E && !bad; i0 += BUF) {
                size_t n = E - i0 < BUF ? (size_t)(E - i0) : BUF;
                for (size_t j = 0; j < n; j++)
                    buf[j] = pat[(i0 + j + (uint64_t)k * 4099u) % B];
                bad = fwrite(buf, 2, n, f) != n;
            }
    }
    bad |= fflush(f) != 0;
    if (mode == DUMP_SPARSE)
        bad |= ftruncate(fileno(f), (off_t)(8 + h + 2 * E * (uint64_t)K)) != 0;
    if (mode == DUMP_PATTERN) /* on disk, then out of the page cache */
        bad |= fsync(fileno(f)) != 0 || posix_fadvise(fileno(f), 0, 0, POSIX_FADV_DONTNEED) != 0;
    bad |= fclose(f) != 0;
    return bad ? -1 : 0;
}

/* Run YAML text on the CPU backend; seconds, or -1. */
static double run_text(const char *yaml)
{
    gp_scenario sc;
    gp_error e = {""};
    gp_backend b;
    gp_result r;
    if (gp_scenario_load_string(yaml, strlen(yaml), "bench", &sc, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    gp_backend_open("cpu", &b, &e);
    double t0 = gp_bench_wall();
    int rc = gp_run_scenario(&sc, &b, NULL, &r, &e);
    double t = gp_bench_wall() - t0;
    if (rc != 0)
        fprintf(stderr, "%s\n", e.msg);
    else
        gp_result_free(&r);
    gp_backend_close(&b);
    gp_scenario_free(&sc);
    return rc ? -1 : t;
}

static const char *replay_yaml = "name: replay\ntensors:\n  - name: w\n    grad: {replay: %s, key: w}\n%s"
                                 "batch: {microbatches: %d, tokens: 512}\nprecision: {grad: bf16, accumulator: fp32}\n";
static const char *gen_yaml = "name: generated\ntensors:\n  - name: w\n    size: %llu\n"
                              "    grad: {dist: normal, scale: 1.0e-3}\n"
                              "batch: {microbatches: %d, tokens: 512}\nprecision: {grad: bf16, accumulator: fp32}\n";

/* The replay of `path` (sample: elements, 0 = all) in a child process: its own peak
 * resident memory (MiB) and time. */
static int replay_child(const char *path, int K, uint64_t sample, double *peak_mib, double *secs)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        char y[4700], smp[64] = "";
        if (sample)
            snprintf(smp, sizeof smp, "    sample: %llu\n", (unsigned long long)sample);
        snprintf(y, sizeof y, replay_yaml, path, smp, K);
        double out[2] = {run_text(y), 0};
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        out[1] = (double)ru.ru_maxrss / 1024.0;
        ssize_t w = write(fd[1], out, sizeof out);
        _exit(w == (ssize_t)sizeof out && out[0] >= 0 ? 0 : 1);
    }
    close(fd[1]);
    double in[2] = {-1, 0};
    ssize_t r = read(fd[0], in, sizeof in);
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (r != (ssize_t)sizeof in || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    *secs = in[0];
    *peak_mib = in[1];
    return 0;
}

/* (g) alone: a dump of `gib` GiB (K = 8 bf16 entries; sparse, or written to disk with
 * DUMP_PATTERN) replayed whole or with `sample: N` in its own process; prints its peak
 * resident memory and speed. */
static int bench_big(int json, double gib, int dense, uint64_t sample, const char *huge)
{
    enum { K = 8 };
    uint64_t Eh = (uint64_t)(gib * 1073741824.0 / (2.0 * K));
    if (Eh > ((uint64_t)1 << 31) || Eh < 1 || sample > Eh) {
        fprintf(stderr, "gp_bench: --replay-gib %.2f: 1 to 2^31 elements a tensor with K = 8 (and sample <= that)\n",
                gib);
        return 2;
    }
    double t0 = gp_bench_wall();
    if (write_dump(huge, Eh, K, dense ? DUMP_PATTERN : DUMP_SPARSE) != 0) {
        remove(huge);
        fprintf(stderr, "gp_bench: cannot write %s\n", huge);
        return 3;
    }
    double tw = gp_bench_wall() - t0, peak = -1, th = 0;
    int rc = replay_child(huge, K, sample, &peak, &th);
    remove(huge);
    if (rc != 0) {
        fprintf(stderr, "gp_bench: the replay of %s failed\n", huge);
        return 3;
    }
    double run_el = (double)(sample ? sample : Eh) * K;
    if (json)
        printf("{\"gib\": %.3f, \"dense\": %d, \"elements\": %llu, \"sample\": %llu, \"peak_mib\": %.1f, "
               "\"replay_s\": %.2f, \"write_s\": %.1f, \"element_microbatches_per_s\": %.4g}\n", gib, dense,
               (unsigned long long)Eh, (unsigned long long)sample, peak, th, tw, run_el / th);
    else
        printf("(g) replaying a %s %.2f GiB dump (%llu elements x K = 8, bf16)%s: peak resident memory %.1f MiB, "
               "%.2f s (%.3g element-micro-batches/s%s); writing it took %.1f s\n",
               dense ? "dense (on disk, not cached)" : "sparse", gib, (unsigned long long)Eh,
               sample ? " SAMPLED" : " whole", peak, th, run_el / th, sample ? " of the sample" : "", tw);
    if (sample && !json)
        printf("    sampled: sample: %llu of %llu elements per entry (the report's metrics are estimates)\n",
               (unsigned long long)sample, (unsigned long long)Eh);
    return 0;
}

int gp_bench_replay(int json, double gib, int dense_big, uint64_t sample, int big_only)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dense[4096], small[4096], huge[4096], y[4600];
    snprintf(dense, sizeof dense, "%s/gp_bench_dense.safetensors", tmp);
    snprintf(small, sizeof small, "%s/gp_bench_small.safetensors", tmp);
    snprintf(huge, sizeof huge, "%s/gp_bench_huge.safetensors", tmp);
    if (big_only || dense_big || sample)
        return bench_big(json, gib, dense_big, sample, huge);
    enum { K = 8 };
    /* (f) throughput: the same 2^22 elements x 8 micro-batches, generated vs replayed
     * from a dense dump (64 MiB, in the page cache after writing it). Best of 3. */
    const uint64_t E = (uint64_t)1 << 22;
    if (write_dump(dense, E, K, 1) != 0) {
        fprintf(stderr, "gp_bench: cannot write %s\n", dense);
        return 3;
    }
    double tg = 1e30, tr = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        snprintf(y, sizeof y, gen_yaml, (unsigned long long)E, K);
        double t = run_text(y);
        tg = t >= 0 && t < tg ? t : tg;
        snprintf(y, sizeof y, replay_yaml, dense, "", K);
        t = run_text(y);
        tr = t >= 0 && t < tr ? t : tr;
    }
    remove(dense);
    /* (g) memory: sparse dumps of 1/8 and `gib` GiB, each replayed in its own process */
    uint64_t Eh = (uint64_t)(gib * 1073741824.0 / (2.0 * K)), Es = Eh / 8;
    double peak_s = -1, peak_h = -1, ts = 0, th = 0;
    if (Eh > ((uint64_t)1 << 31)) {
        fprintf(stderr, "gp_bench: --replay-gib %.1f exceeds 2^31 elements a tensor with K = 8\n", gib);
        return 2;
    }
    if (write_dump(small, Es, K, 0) != 0 || write_dump(huge, Eh, K, 0) != 0 ||
        replay_child(small, K, 0, &peak_s, &ts) != 0 || replay_child(huge, K, 0, &peak_h, &th) != 0) {
        remove(small);
        remove(huge);
        fprintf(stderr, "gp_bench: the sparse replay failed\n");
        return 3;
    }
    remove(small);
    remove(huge);
    double el = (double)E * K;
    if (json)
        printf("{\"replay_elements_per_s\": %.4g, \"generator_elements_per_s\": %.4g, \"replay_vs_generator\": %.3f, "
               "\"sparse_gib\": %.3f, \"sparse_peak_mib\": %.1f, \"sparse_s\": %.1f, \"small_gib\": %.3f, "
               "\"small_peak_mib\": %.1f}\n", el / tr, el / tg, tg / tr, gib, peak_h, th, gib / 8, peak_s);
    else {
        printf("(f) replay vs generator, 2^22 elements x K = 8, bf16 grads into fp32: replay %.3g elements/s "
               "(%.2f s), generator %.3g elements/s (%.2f s): replay is %.2fx the generator's speed\n",
               el / tr, tr, el / tg, tg, tg / tr);
        printf("(g) replaying a sparse %.2f GiB dump (%llu elements x K = 8, bf16): peak resident memory %.1f MiB "
               "(%.1f s); a %.2f GiB one: %.1f MiB\n", gib, (unsigned long long)Eh, peak_h, th, gib / 8, peak_s);
    }
    return 0;
}
