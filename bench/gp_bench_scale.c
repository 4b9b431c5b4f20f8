/* gp_bench_scale.c — `gp_bench --threads` and `gp_bench --sampled` (issue 16):
 * threads inside one scenario: the same scenario run with 1, 2 and 3 threads in this
 * process (gp_run_scenario_ctl), wall-clock times and the speed-up ratios, and a check
 * that the three results agree; estimates at scale: a sampled run (`sample:`) of a
 * 10^9-element and a 7*10^9-element configuration, each in its own child process: its
 * time and the child's peak resident memory. See bench/README.md. */
#define _DEFAULT_SOURCE /* wait4 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/sources/gp_backend.h"
#include "harness/run/gp_runner.h"
#include "harness/scenario/gp_scenario.h"
#include "gp_bench_clock.h"

int gp_bench_scale(int json, int threads, int sampled);

static int load(const char *yaml, gp_scenario *sc)
{
    gp_error e = {""};
    if (gp_scenario_load_string(yaml, strlen(yaml), "bench", sc, &e) != 0) {
        fprintf(stderr, "gp_bench: %s\n", e.msg);
        return -1;
    }
    return 0;
}

/* Run sc on the CPU backend with `threads` threads: seconds, or -1. *r filled; *cpu (if
 * not NULL) the process's CPU seconds over the run (all threads). */
static double run_cpu(const gp_scenario *sc, int threads, gp_result *r, double *cpu);
static double run(const gp_scenario *sc, int threads, gp_result *r)
{
    return run_cpu(sc, threads, r, NULL);
}

static double run_cpu(const gp_scenario *sc, int threads, gp_result *r, double *cpu)
{
    gp_error e = {""};
    gp_backend b;
    gp_run_ctl ctl = {threads, NULL};
    if (gp_backend_open("cpu", &b, &e) != 0)
        return -1;
    double t0 = gp_bench_wall(), c0 = gp_bench_cpu();
    int rc = gp_run_scenario_ctl(sc, &ctl, &b, NULL, r, &e);
    double t = gp_bench_wall() - t0;
    if (cpu)
        *cpu = gp_bench_cpu() - c0;
    gp_backend_close(&b);
    if (rc != 0) {
        fprintf(stderr, "gp_bench: %s\n", e.msg);
        return -1;
    }
    return t;
}

/* The control: what the machine gives n threads right now. A fixed amount of pure
 * arithmetic (a xorshift chain) split over n threads; wall(1) / wall(n) is the speed-up
 * a perfectly parallel program gets at this moment, the ceiling of the runner's. */
static void *spin(void *arg)
{
    uint64_t *x = arg, v = x[0] | 1, n = x[1];
    for (uint64_t i = 0; i < n; i++) {
        v ^= v << 13;
        v ^= v >> 7;
        v ^= v << 17;
    }
    x[0] = v;
    return NULL;
}

static double control(int n, uint64_t total)
{
    pthread_t th[3];
    uint64_t arg[3][2];
    double t0 = gp_bench_wall();
    for (int i = 0; i < n; i++) {
        arg[i][0] = (uint64_t)i + 1;
        arg[i][1] = total / (uint64_t)n;
        if (i > 0 && pthread_create(&th[i], NULL, spin, arg[i]) != 0)
            return -1;
    }
    spin(arg[0]);
    for (int i = 1; i < n; i++)
        pthread_join(th[i], NULL);
    return gp_bench_wall() - t0;
}

/* One big scenario: 8 tensors of 2^20 elements, K = 8, bf16 gradients into an fp32
 * accumulator with the exact references and AdamW, one step (independent chunks). */
static const char threads_yaml[] =
    "name: threads\nseed: 3\ntensors:\n"
    "  - {name: t0, size: 1048576}\n  - {name: t1, size: 1048576}\n  - {name: t2, size: 1048576}\n"
    "  - {name: t3, size: 1048576}\n  - {name: t4, size: 1048576}\n  - {name: t5, size: 1048576}\n"
    "  - {name: t6, size: 1048576}\n  - {name: t7, size: 1048576}\n"
    "batch: {accumulation_steps: 8, tokens: 512}\nprecision: {grad: bf16, accumulator: fp32}\n";

static int bench_threads(int json)
{
    gp_scenario sc;
    if (load(threads_yaml, &sc) != 0)
        return 3;
    double t[4] = {0}, c[4] = {0}, k[4] = {0};
    gp_result r[4];
    for (int n = 1; n <= 3; n++) { /* the control just before each run: the same conditions */
        if ((k[n] = control(n, 3000000000ull)) < 0 || (t[n] = run_cpu(&sc, n, &r[n], &c[n])) < 0)
            return 3;
    }
    int same = 1;
    for (int n = 2; n <= 3; n++)
        for (int m = 0; m < GP_NMETRICS; m++)
            same &= memcmp(&r[1].metric[m], &r[n].metric[m], sizeof(double)) == 0;
    double el = 8.0 * 1048576 * 8;
    /* speed-up = wall(1) / wall(n); cpu(n) / wall(n): how many cores the run had on
     * average (on a loaded machine less than n); cpu(n) / cpu(1): the threads' overhead */
    if (json)
        printf("{\"threads_1_s\": %.3f, \"threads_2_s\": %.3f, \"threads_3_s\": %.3f, \"speedup_2\": %.3f, "
               "\"speedup_3\": %.3f, \"cpu_1_s\": %.3f, \"cpu_2_s\": %.3f, \"cpu_3_s\": %.3f, "
               "\"control_speedup_2\": %.3f, \"control_speedup_3\": %.3f, \"same_metrics\": %s}\n", t[1], t[2],
               t[3], t[1] / t[2], t[1] / t[3], c[1], c[2], c[3], k[1] / k[2], k[1] / k[3], same ? "true" : "false");
    else {
        printf("threads: 8 x 2^20 elements, K = 8 (%.3g element-micro-batches), %ld online cores; metrics %s\n", el,
               sysconf(_SC_NPROCESSORS_ONLN), same ? "bit-identical" : "DIFFER");
        for (int n = 1; n <= 3; n++)
            printf("  %d thread%s: wall %.2f s (speed-up %.2fx; a perfectly parallel control loop run just before: "
                   "%.2fx), cpu %.2f s (%.0f ns per element-micro-batch; %.2f cores busy on average; cpu / cpu(1 "
                   "thread) %.3f)\n", n, n > 1 ? "s" : " ", t[n], t[1] / t[n], k[1] / k[n], c[n], 1e9 * c[n] / el,
                   c[n] / t[n], c[n] / c[1]);
    }
    for (int n = 1; n <= 3; n++)
        gp_result_free(&r[n]);
    gp_scenario_free(&sc);
    return same ? 0 : 1;
}

/* A configuration of `ntensors` tensors of `size` elements, K = 8 bf16 micro-batches into
 * a bf16 accumulator, `sample:` n elements across them. */
static void sampled_yaml(char *buf, size_t len, int ntensors, uint64_t size, uint64_t n)
{
    size_t o = (size_t)snprintf(buf, len, "name: sampled\nseed: 5\nsample: %llu\ntensors:\n", (unsigned long long)n);
    for (int t = 0; t < ntensors && o < len; t++)
        o += (size_t)snprintf(buf + o, len - o, "  - {name: layer%d, size: %llu, grad: {dist: lognormal, "
                              "scale: 1.0e-5, sigma: 1.0}}\n", t, (unsigned long long)size);
    snprintf(buf + o, len - o, "batch: {accumulation_steps: 8, tokens: 512}\nprecision: {grad: bf16, accumulator: "
             "bf16}\n");
}

/* In a child: run the configuration; report seconds, peak RSS (MiB) and the estimate. */
static int sampled_one(int json, int ntensors, uint64_t size, uint64_t n)
{
    static char yaml[1 << 16];
    sampled_yaml(yaml, sizeof yaml, ntensors, size, n);
    int fd[2];
    if (pipe(fd) != 0)
        return 3;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        gp_scenario sc;
        gp_result r;
        double out[4] = {-1, 0, 0, 0};
        if (load(yaml, &sc) == 0 && (out[0] = run(&sc, 1, &r)) >= 0) {
            out[1] = r.metric[GP_M_GRAD_REL_ERR_FULLBATCH];
            out[2] = r.ci_lo[GP_M_GRAD_REL_ERR_FULLBATCH];
            out[3] = r.ci_hi[GP_M_GRAD_REL_ERR_FULLBATCH];
        }
        ssize_t w = write(fd[1], out, sizeof out);
        _exit(w == (ssize_t)sizeof out ? 0 : 3);
    }
    close(fd[1]);
    double out[4];
    ssize_t got = read(fd[0], out, sizeof out);
    close(fd[0]);
    int status = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid || got != (ssize_t)sizeof out || out[0] < 0)
        return 3;
    double peak = ru.ru_maxrss / 1024.0, M = (double)ntensors * (double)size;
    if (json)
        printf("{\"elements\": %.0f, \"sample\": %llu, \"seconds\": %.3f, \"peak_mib\": %.1f, "
               "\"grad_rel_err_fullbatch\": %.6g, \"ci\": [%.6g, %.6g]}\n", M, (unsigned long long)n, out[0], peak,
               out[1], out[2], out[3]);
    else
        printf("sampled: %.3g elements (%d tensors), sample: %llu, K = 8: %.2f s, peak %.1f MiB; "
               "grad_rel_err_fullbatch %.4g in [%.4g, %.4g] (target < 300 s)\n", M, ntensors, (unsigned long long)n,
               out[0], peak, out[1], out[2], out[3]);
    return 0;
}

int gp_bench_scale(int json, int threads, int sampled)
{
    int rc = 0;
    if (threads)
        rc |= bench_threads(json);
    if (sampled) {
        rc |= sampled_one(json, 100, 10000000, 1000000);  /* 10^9 elements */
        rc |= sampled_one(json, 224, 31250000, 1000000);  /* 7 x 10^9 elements */
    }
    return rc;
}
