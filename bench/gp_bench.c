/* gp_bench.c — benchmarks that print ratios measured in one run (never timed tests).
 *   (a) exact reference accumulation (gp_exactsum_add of n_k * m into per-element
 *       accumulators, as the runner does) vs a plain binary64 loop over the same data; target <= 2.0x
 *   (b) the CPU backend's bf16 accumulation (fp32 grads, RNE) vs a native fp32
 *       `acc += g` loop; target <= 2.0x
 *   (c) the whole default suite (-j 1), seconds; target < 60 s on 2 cores
 *   (d) the reference AdamW step in double-double (gp_adamw_dd_step) vs the CPU-emulated
 *       fp32 AdamW step (a gp_adamw_step loop: fp32 param and state, ONE_STORE, torch-CUDA
 *       order, with event pointers as an instrumented run passes them; the figure without
 *       them too) on 10^6 parameters; target <= 50x. Also the MPFR element reference
 *       (gp_adamw_ref_step) per parameter, on 10^4 parameters.
 *   peak resident memory (getrusage), and with --big a 10^8-element tensor, K = 64.
 * (e) one multi-step preset (bf16-weights-cosine-no-master: 100 AdamW steps of 4096
 * weights), and with --big-optimizer alone, 10^7 parameters over 100 steps with a dynamic
 * loss scaler and clipping (the whole-tensor arrays of a coupled step) and its peak memory.
 * (h) --distributed alone: the simulated collective's throughput in element-hops per
 * second (a bf16 ring all-reduce over 8 ranks of 2^18 elements, one micro-batch a rank,
 * against the same 8 micro-batches accumulated in one process: the difference is the
 * collective's time), and the default suite's time with the data-parallel presets
 * against without them (one thread, the same run).
 *   (i) end-to-end accumulation with attribution (the --big configuration on 2^20
 *       elements), ns per element-addition; (j) the --big-optimizer configuration on
 *       2x10^5 parameters x 20 steps, ns per parameter-step (both CPU time, best of 2);
 *   (k) the DD AdamW step as dispatched (FMA clone) vs its element function compiled
 *       without FMA (libm fma calls); (l) a libm fma call with the AVX upper halves clean vs
 *       in use; (m) binary64 -> bf16 RNE with events, the fast path vs the general routine;
 *       (n) generation per element; (o) the attribution block vs its per-element
 *       definition (target <= 0.5: a ratio near 1 says the loop went scalar); (p) the
 *       in-order sums reports define (a binary64 sum, the DD clipping-norm chain), ns per
 *       element: floors no reordering may lower.
 * Usage: build/bench/gp_bench [--json] [--big] [--adamw-only | --throughput | --parts | --big-optimizer |
 * --distributed] (--adamw-only: (d) alone; --throughput: (i)-(p) alone; --parts: (a), (k), (n), (o),
 * (p) alone, the parts whose bits the reports hold, which bench/vs_torch.py sets beside the torch loop).
 * Each timing is the best of 5 runs. The first line names the host (CPU model, family,
 * cores, SIMD flags, load average; on stderr with --json). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "harness/sources/gp_backend.h"
#include "harness/sources/gp_gen_simd.h"
#include "harness/sources/gp_generate.h"
#include "harness/scenario/gp_presets.h"
#include "harness/run/gp_attrib.h"
#include "harness/run/gp_runner.h"
#include "kernels/arith/gp_adamw.h"
#include "reference/gp_adamw_dd.h"
#include "reference/gp_adamw_ref.h"
#include "reference/gp_exact.h"
#include "gp_bench_clock.h"

static double peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

enum { N = 1 << 16, K = 64 };

static volatile double g_sink;

/* The plain loops the ratios are taken against: compiled like the hot paths they are
 * compared with (-O3, bench/CMakeLists.txt) and given the same instruction sets — an
 * AVX2 clone chosen at run time where the CPU has it, as gp_exactsum_add does — so a
 * ratio never flatters the code under test by slowing its baseline. */
__attribute__((target_clones("avx2", "default"))) static void plain_fp64_add(double *d, const float *m, double n,
                                                                             size_t count)
{
    for (size_t i = 0; i < count; i++)
        d[i] += n * (double)m[i];
}

__attribute__((target_clones("avx2", "default"))) static void plain_fp32_add(float *acc, const float *g,
                                                                             size_t count)
{
    for (size_t i = 0; i < count; i++)
        acc[i] += g[i];
}

/* K micro-batches of N gradients, normal with scale 1e-3, one after another. */
static float *microbatches(uint64_t seed)
{
    float *g = malloc((size_t)N * K * sizeof *g);
    gp_dist dist;
    memset(&dist, 0, sizeof dist);
    dist.kind = GP_DIST_NORMAL;
    dist.scale = 1e-3;
    for (int k = 0; k < K; k++)
        gp_generate(&dist, seed, (uint64_t)k, 0, N, g + (size_t)k * N);
    return g;
}

/* (a) */
static void bench_exact(double *t_exact, double *t_plain)
{
    float *m = microbatches(1);
    double *acc = malloc((size_t)N * sizeof *acc);
    gp_fixacc *spill = malloc((size_t)N * sizeof *spill);
    double *d = malloc((size_t)N * sizeof *d);
    *t_exact = *t_plain = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = gp_bench_wall();
        memset(acc, 0, (size_t)N * sizeof *acc);
        memset(spill, 0, (size_t)N * sizeof *spill);
        for (int k = 0; k < K; k++)
            gp_exactsum_add(acc, spill, m + (size_t)k * N, (uint32_t)(100 + k), N);
        double t1 = gp_bench_wall();
        memset(d, 0, (size_t)N * sizeof *d);
        for (int k = 0; k < K; k++)
            plain_fp64_add(d, m + (size_t)k * N, (double)(100 + k), N);
        double t2 = gp_bench_wall();
        g_sink = d[N / 2] + acc[N / 2];
        if (t1 - t0 < *t_exact) *t_exact = t1 - t0;
        if (t2 - t1 < *t_plain) *t_plain = t2 - t1;
    }
    free(m);
    free(acc);
    free(spill);
    free(d);
}

/* (b) */
static void bench_bf16(double *t_bf16, double *t_fp32)
{
    float *g = microbatches(2), *acc32 = malloc((size_t)N * sizeof *acc32);
    uint16_t *acc16 = malloc((size_t)N * sizeof *acc16);
    const gp_plugin *cpu;
    gp_backend b;
    gp_error e;
    gp_backend_open("cpu", &b, &e);
    cpu = b.ops;
    *t_bf16 = *t_fp32 = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        memset(acc16, 0, (size_t)N * sizeof *acc16);
        double t0 = gp_bench_wall();
        for (int k = 0; k < K; k++) {
            gp_plugin_accumulate_args a;
            memset(&a, 0, sizeof a);
            a.struct_size = sizeof a;
            a.grad_format = GP_PLUGIN_FP32;
            a.acc_format = GP_PLUGIN_BF16;
            a.rounding = GP_PLUGIN_RNE;
            a.n = N;
            a.microbatch = (uint32_t)k;
            a.grad = g + (size_t)k * N;
            a.acc = acc16;
            cpu->accumulate(&a);
        }
        double t1 = gp_bench_wall();
        memset(acc32, 0, (size_t)N * sizeof *acc32);
        for (int k = 0; k < K; k++)
            plain_fp32_add(acc32, g + (size_t)k * N, N);
        double t2 = gp_bench_wall();
        g_sink = acc32[N / 3] + acc16[N / 3];
        if (t1 - t0 < *t_bf16) *t_bf16 = t1 - t0;
        if (t2 - t1 < *t_fp32) *t_fp32 = t2 - t1;
    }
    gp_backend_close(&b);
    free(g);
    free(acc32);
    free(acc16);
}

/* (d): seconds per step over NA parameters (best of 5 runs of ASTEPS steps each). */
enum { NA = 1000000, NA_MPFR = 10000, ASTEPS = 3 };

typedef struct {
    double dd, fp32_ev, fp32, mpfr; /* seconds per step per parameter */
} adamw_times;

static void bench_adamw(adamw_times *at)
{
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
    float *gf = malloc((size_t)NA * sizeof *gf), *w0 = malloc((size_t)NA * sizeof *w0);
    double *g = malloc((size_t)NA * sizeof *g);
    uint32_t *p = malloc((size_t)NA * sizeof *p), *m = malloc((size_t)NA * sizeof *m),
             *v = malloc((size_t)NA * sizeof *v);
    gp_adamw_dd_state st;
    if (!gf || !w0 || !g || !p || !m || !v || gp_adamw_dd_state_alloc(&st, NA) != 0) {
        fprintf(stderr, "gp_bench: out of memory\n");
        exit(3);
    }
    gp_dist dist;
    memset(&dist, 0, sizeof dist);
    dist.kind = GP_DIST_NORMAL;
    dist.scale = 1e-3;
    gp_generate(&dist, 3, 0, 0, NA, gf);
    dist.scale = 2e-2;
    gp_generate(&dist, 3, 1, 0, NA, w0);
    for (size_t i = 0; i < NA; i++)
        g[i] = (double)gf[i];
    gp_adamw_config cfg = {GP_FP32, GP_FP32, GP_ADAMW_ONE_STORE, GP_RNE, GP_ADAMW_TORCH_CUDA, 0, 0};
    at->dd = at->fp32_ev = at->fp32 = at->mpfr = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        for (size_t i = 0; i < NA; i++)
            gp_adamw_dd_state_set(&st, i, (double)w0[i]);
        double t0 = gp_bench_wall();
        for (long t = 1; t <= ASTEPS; t++) {
            gp_adamw_dd_scalars s = gp_adamw_dd_scalars_make(lr, b1, b2, eps, wd, t);
            gp_adamw_dd_step(&s, &st, 0, NA, g, gp_dd_from_double(1.0), NULL);
        }
        double t1 = gp_bench_wall();
        unsigned evsum = 0;
        for (int instrumented = 1; instrumented >= 0; instrumented--) {
            for (size_t i = 0; i < NA; i++) {
                p[i] = gp_f32_bits(w0[i]);
                m[i] = v[i] = 0;
            }
            double t2 = gp_bench_wall();
            for (long t = 1; t <= ASTEPS; t++) {
                gp_adamw_scalars s = gp_adamw_scalars_make(lr, b1, b2, eps, wd, t);
                if (instrumented) {
                    for (size_t i = 0; i < NA; i++) {
                        unsigned ev = 0, evs = 0;
                        p[i] = gp_adamw_step(cfg, &s, p[i], NULL, NULL, &m[i], &v[i], gf[i], 0, 0, &ev, &evs);
                        evsum += ev | evs;
                    }
                } else {
                    for (size_t i = 0; i < NA; i++)
                        p[i] = gp_adamw_step(cfg, &s, p[i], NULL, NULL, &m[i], &v[i], gf[i], 0, 0, NULL, NULL);
                }
            }
            double dt = (gp_bench_wall() - t2) / ((double)ASTEPS * NA);
            double *slot = instrumented ? &at->fp32_ev : &at->fp32;
            if (dt < *slot) *slot = dt;
        }
        g_sink = st.w_hi[NA / 2] + st.w_lo[NA / 3] + (double)gp_f32_from_bits(p[NA / 2]) + evsum;
        double dd = (t1 - t0) / ((double)ASTEPS * NA);
        if (dd < at->dd) at->dd = dd;
    }
    /* the MPFR element reference on a sample */
    gp_adamw_ref_hparams h = {b1, b2, eps, wd};
    gp_adamw_ref *r = malloc((size_t)NA_MPFR * sizeof *r);
    if (!r) {
        fprintf(stderr, "gp_bench: out of memory\n");
        exit(3);
    }
    for (int rep = 0; rep < 5; rep++) {
        for (size_t i = 0; i < NA_MPFR; i++)
            gp_adamw_ref_init(&r[i], (double)w0[i]);
        double t0 = gp_bench_wall();
        for (long t = 1; t <= ASTEPS; t++)
            for (size_t i = 0; i < NA_MPFR; i++)
                gp_adamw_ref_step(&r[i], g[i], lr, &h, t);
        double dt = (gp_bench_wall() - t0) / ((double)ASTEPS * NA_MPFR);
        if (dt < at->mpfr) at->mpfr = dt;
        g_sink = gp_adamw_ref_param(&r[NA_MPFR / 2]);
        for (size_t i = 0; i < NA_MPFR; i++)
            gp_adamw_ref_clear(&r[i]);
    }
    free(r);
    gp_adamw_dd_state_free(&st);
    free(gf);
    free(w0);
    free(g);
    free(p);
    free(m);
    free(v);
}

/* (d)'s lines; with json, its keys and the closing brace (the caller opens the object). */
static void print_adamw(const adamw_times *at, int json)
{
    if (json) {
        printf("\"adamw_dd_ns_per_param\": %.3f, \"adamw_fp32_ev_ns_per_param\": %.3f, "
               "\"adamw_fp32_ns_per_param\": %.3f,\n \"adamw_dd_vs_fp32_ev\": %.3f, \"adamw_dd_vs_fp32\": %.3f, "
               "\"adamw_mpfr_ns_per_param\": %.1f}\n",
               1e9 * at->dd, 1e9 * at->fp32_ev, 1e9 * at->fp32, at->dd / at->fp32_ev, at->dd / at->fp32, 1e9 * at->mpfr);
        return;
    }
    printf("(d) reference AdamW step (DD):     %.2f ns/param vs CPU fp32 AdamW %.2f ns/param (events on): %.2fx "
           "(target <= 50x)\n",
           1e9 * at->dd, 1e9 * at->fp32_ev, at->dd / at->fp32_ev);
    printf("    events off:                    fp32 %.2f ns/param: %.2fx; MPFR reference %.0f ns/param (%.0fx the DD)\n",
           1e9 * at->fp32, at->dd / at->fp32, 1e9 * at->mpfr, at->mpfr / at->dd);
}

static double g_last_cpu; /* CPU seconds of the last run_yaml */

/* (c) and --big: run YAML scenarios on the CPU backend; returns seconds (wall clock; the
 * CPU seconds in g_last_cpu). */
static double run_yaml(const char *yaml, const char *origin)
{
    gp_scenario sc;
    gp_error e = {""};
    gp_backend b;
    gp_result r;
    if (gp_scenario_load_string(yaml, strlen(yaml), origin, &sc, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        exit(3);
    }
    gp_backend_open("cpu", &b, &e);
    double t0 = gp_bench_wall(), c0 = gp_bench_cpu();
    if (gp_run_scenario(&sc, &b, NULL, &r, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        exit(3);
    }
    double t = gp_bench_wall() - t0;
    g_last_cpu = gp_bench_cpu() - c0;
    gp_result_free(&r);
    gp_backend_close(&b);
    gp_scenario_free(&sc);
    return t;
}

/* ---- (i)-(n): end-to-end throughput and the fast paths against what they replaced ---- */

/* The --big configuration (bf16 grads into bf16, K = 64, the default one-step AdamW) with
 * `size` elements, and the --big-optimizer configuration with `params` parameters over
 * `steps` steps: the YAML texts. */
static void big_yaml(char *buf, size_t cap, long size)
{
    snprintf(buf, cap,
             "name: big\ntensors:\n  - name: w\n    size: %ld\n    grad: {dist: normal, scale: 1.0e-3}\n"
             "batch: {microbatches: 64, tokens: 512}\nprecision: {grad: bf16, accumulator: bf16}\n",
             size);
}

static void big_optimizer_yaml(char *buf, size_t cap, long params, int steps)
{
    snprintf(buf, cap,
             "name: big-optimizer\ntensors:\n  - name: w\n    size: %ld\n"
             "    grad: {dist: normal, scale: 1.0e-4, shrink: 0.99}\n"
             "batch: {microbatches: 1, tokens: 1}\nreduction: sum\nfullbatch: sum\n"
             "precision: {grad: fp16, accumulator: fp32}\n"
             "loss_scale: {mode: dynamic, init: 65536}\nclip: {max_norm: 1.0}\n"
             "optimizer: {lr: 1.0e-4, param: bf16, master: fp32}\n"
             "schedule: {name: cosine, warmup: 10}\nsteps: %d\n",
             params, steps);
}

/* (l): a libm fma call with the AVX upper halves clean vs in use (what a SIMD path that
 * returns without vzeroupper leaves behind; gp_exactsum_add clears them). ns per call. */
static void dirty_upper(void);

static double fma_calls(int n, int dirty)
{
    static double a[1024], b[1024];
    for (int i = 0; i < 1024; i++) {
        a[i] = 1 + i * 0x1p-30;
        b[i] = 1 - i * 0x1p-30;
    }
    double s = 0, t0 = gp_bench_cpu();
    if (dirty)
        dirty_upper(); /* after the clock's system call, which may leave the state clean */
    for (int r = 0; r < n / 1024; r++)
        for (int i = 0; i < 1024; i++)
            s += fma(a[i], b[i], -a[i]);
#if defined(__x86_64__)
    __asm__ volatile("vzeroupper");
#endif
    double t = gp_bench_cpu() - t0;
    g_sink = s;
    return 1e9 * t / (double)(n / 1024 * 1024);
}

/* Leaves the upper halves in use: no target attribute, so the compiler adds no vzeroupper
 * (it does after an AVX function's own ymm code); the CPU must have AVX (checked). */
__attribute__((noinline)) static void dirty_upper(void)
{
#if defined(__x86_64__)
    __asm__ volatile("vpcmpeqd %%ymm15, %%ymm15, %%ymm15" ::: "xmm15"); /* no vzeroupper after */
#endif
}

typedef struct {
    double add_ns, opt_ns, dd_fma_ns, dd_scalar_ns, dd_libm_ns, fma_clean_ns, fma_dirty_ns, rne_fast_ns, rne_gen_ns;
    double philox_ns, philox_portable_ns, pinv_ns, pinv_gsl_ns, gen_ns; /* (n) */
    double attrib_block_ns, attrib_one_ns, attrib16_block_ns, attrib16_one_ns; /* (o) */
    double sum_f64_ns, sum_dd_sq_ns;                                    /* (p) */
    double exact_add_ns; /* --parts: (a)'s exact reference accumulation, ns per addition */
} tput_times;

/* (o) the attribution of every addition, gp_attrib_block (vectorised) against its
 * definition gp_attrib_one element by element doing the same work (the error into its
 * mechanism's array, te^2, the counts), for addends of format gf into an accumulator of
 * format af (accumulators near 1e-1, addends 2^-18 .. 2^-6 of either sign: rounding,
 * absorption, fp16 subnormals): 2^16 additions in blocks of GP_ATTRIB_BLOCK, interleaved,
 * best of 5, ns per addition (*block, *one). The block runs every lane's whole
 * classification branch-free; what makes it faster than the definition is the vector
 * width alone, so a ratio near 1 says the loop runs scalar (bf16 into bf16 did from
 * a24b955 to 8502304, fp16 addends from 7a08375 until fin_widen lost its branch:
 * bench/README.md). rare = 0: the overflow, saturation and non-finite arrays left out, as
 * the runner passes them while none of those happened (--parts: what a run pays); one
 * NULL: the block alone, the definition not run. */
static inline uint32_t packed(gp_format f, const void *p, size_t i) /* as the block loads them */
{
    return f == GP_FP32 ? ((const uint32_t *)p)[i] : ((const uint16_t *)p)[i];
}

static void bench_attribution_pair(gp_format af, gp_format gf, int rare, double *block, double *one)
{
    enum { NAT = 1 << 16, NM = GP_MECH_NONFINITE + 1 };
    uint32_t *old = malloc(3 * NAT * sizeof *old), *acc = old + NAT, *grad = acc + NAT;
    double *e = calloc((size_t)NM * NAT + NAT, sizeof *e), *te2 = e + (size_t)NM * NAT;
    if (!old || !e) {
        fprintf(stderr, "out of memory\n");
        exit(3);
    }
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < NAT; i++) { /* packed in place: old, acc, grad hold af, af, gf values */
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        double a = 0.1 * (1 + (double)(r >> 40) * 0x1p-24);
        double g = ldexp((double)(r >> 11 & 0xffff) * 0x1p-16 - 0.5, -(int)(r % 12) - 6);
        unsigned ev = 0;
        uint32_t ob = gp_fmt_from_f64_rne(af, gp_f64_bits(a), 0, &ev), gb = gp_fmt_from_f64_rne(gf, gp_f64_bits(g), 0, &ev);
        double sum = gp_fmt_to_f64_fast(af, ob) + gp_fmt_to_f64_fast(gf, gb);
        gp_pack_set(af, old, i, ob);
        gp_pack_set(af, acc, i, gp_fmt_from_f64_rne(af, gp_f64_bits(sum), 0, &ev));
        gp_pack_set(gf, grad, i, gb);
    }
    size_t wa = gp_fmt_get(af).width / 8, wg = gp_fmt_get(gf).width / 8;
    double best[2] = {1e30, 1e30};
    uint64_t total = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = gp_bench_cpu();
        for (size_t i0 = 0; i0 < NAT; i0 += GP_ATTRIB_BLOCK) {
            double *err[NM];
            for (int m = 0; m < NM; m++)
                err[m] = e + (size_t)m * NAT + i0;
            if (!rare)
                err[GP_MECH_OVERFLOW] = err[GP_MECH_SATURATION] = err[GP_MECH_NONFINITE] = NULL;
            gp_attrib_counts cnt = {0, 0, 0, 0};
            if (!gp_attrib_block(af, gf, (const char *)old + i0 * wa, (const char *)acc + i0 * wa,
                                 (const char *)grad + i0 * wg, GP_ATTRIB_BLOCK, 1.0, 1.0, 1.0, err, te2 + i0, &cnt,
                                 NULL)) {
                fprintf(stderr, "gp_attrib_block declined the benchmark's block\n");
                exit(3);
            }
            total += cnt.rounded_nonzero + cnt.absorbed;
        }
        double t1 = gp_bench_cpu();
        if (one) { /* the definition, for the ratio */
            gp_attrib_counts cnt = {0, 0, 0, 0};
            for (size_t i = 0; i < NAT; i++) {
                double delta;
                unsigned f;
                gp_mechanism m = gp_attrib_one(af, gf, packed(af, old, i), packed(af, acc, i), packed(gf, grad, i), 1.0,
                                               1.0, &delta, &f);
                e[(size_t)m * NAT + i] += delta;
                double te = 0;
                for (int j = GP_MECH_UNDERFLOW; j < NM; j++)
                    te += e[(size_t)j * NAT + i];
                te2[i] = te * te;
                cnt.rounded_nonzero += (f & GP_AT_ROUNDED) != 0;
                cnt.adds_nonzero += (f & GP_AT_ADD) != 0;
                cnt.absorbed += (f & GP_AT_ABSORBED) != 0;
                cnt.underflow += m == GP_MECH_UNDERFLOW;
            }
            total += cnt.rounded_nonzero + cnt.absorbed;
        }
        double t2 = gp_bench_cpu();
        if (1e9 * (t1 - t0) / NAT < best[0])
            best[0] = 1e9 * (t1 - t0) / NAT;
        if (1e9 * (t2 - t1) / NAT < best[1])
            best[1] = 1e9 * (t2 - t1) / NAT;
    }
    g_sink = (double)total + te2[NAT - 1];
    *block = best[0];
    if (one)
        *one = best[1];
    free(old);
    free(e);
}

static void bench_attribution(tput_times *tt)
{
    bench_attribution_pair(GP_BF16, GP_BF16, 1, &tt->attrib_block_ns, &tt->attrib_one_ns);
    bench_attribution_pair(GP_FP32, GP_FP16, 1, &tt->attrib16_block_ns, &tt->attrib16_one_ns);
}

/* (p) the sums a report defines, per element: one binary64 sum s += x[i] in element order
 * (each addition waits for the one before: the FP adder's latency per element; the runner
 * keeps several such sums, each of its own elements' terms), which cannot be reordered
 * without changing the bits a report holds, and the reference's clipping norm, the DD sum
 * of squares gp_dd_sumsq_add (16 interleaved lanes since 2026-11-29; one chain in element
 * order before); 2^18 elements, best of 5. */
static void bench_inorder_sums(tput_times *tt)
{
    enum { NS = 1 << 18 };
    double *x = malloc(NS * sizeof *x);
    if (!x) {
        fprintf(stderr, "out of memory\n");
        exit(3);
    }
    for (size_t i = 0; i < NS; i++)
        x[i] = 1e-3 * ((double)(i * 2654435761u % 100003) / 50000 - 1);
    tt->sum_f64_ns = tt->sum_dd_sq_ns = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = gp_bench_cpu(), s = 0;
        for (size_t i = 0; i < NS; i++)
            s += x[i];
        double t1 = gp_bench_cpu();
        gp_dd d = gp_dd_sumsq_add(gp_dd_from_double(0.0), x, NS);
        double t2 = gp_bench_cpu();
        g_sink = s + d.hi;
        if (1e9 * (t1 - t0) / NS < tt->sum_f64_ns)
            tt->sum_f64_ns = 1e9 * (t1 - t0) / NS;
        if (1e9 * (t2 - t1) / NS < tt->sum_dd_sq_ns)
            tt->sum_dd_sq_ns = 1e9 * (t2 - t1) / NS;
    }
    free(x);
}

/* (n) generation a block at a time: Philox as dispatched vs its portable per-element
 * loop, the inverse normal CDF as dispatched vs GSL per element, and gp_generate
 * (normal) whole; 2^16 elements, interleaved, best of 5, ns per element. */
static void bench_generation(tput_times *tt)
{
    enum { NG = 1 << 16 };
    uint32_t *wb = malloc(4 * (NG + GP_GEN_PAD) * sizeof *wb);
    double *u = malloc(2 * NG * sizeof *u), *x = u + NG;
    float *out = malloc(NG * sizeof *out);
    if (!wb || !u || !out) {
        fprintf(stderr, "out of memory\n");
        exit(3);
    }
    uint32_t *const w[4] = {wb, wb + NG + GP_GEN_PAD, wb + 2 * (NG + GP_GEN_PAD), wb + 3 * (NG + GP_GEN_PAD)};
    gp_dist d;
    memset(&d, 0, sizeof d);
    d.kind = GP_DIST_NORMAL;
    d.scale = 1e-3;
    d.outlier_scale = 1000.0;
    double best[5] = {1e30, 1e30, 1e30, 1e30, 1e30};
    for (int r = 0; r < 5; r++) {
        double t[7];
        t[0] = gp_bench_cpu();
        gp_philox_block(GP_GEN_AUTO, 7, (uint64_t)r, 0, NULL, NG, w);
        t[1] = gp_bench_cpu();
        gp_philox_block(GP_GEN_PORTABLE, 7, (uint64_t)r, 0, NULL, NG, w);
        t[2] = gp_bench_cpu();
        for (size_t j = 0; j < NG; j++) /* gp_generate's uniforms, untimed */
            u[j] = ((double)(((uint64_t)w[0][j] << 21) | (w[1][j] >> 11)) + 0.5) * 0x1p-53;
        t[3] = gp_bench_cpu();
        gp_ugaussian_pinv_block(GP_GEN_AUTO, u, NG, x);
        t[4] = gp_bench_cpu();
        gp_ugaussian_pinv_block(GP_GEN_PORTABLE, u, NG, x);
        t[5] = gp_bench_cpu();
        gp_generate(&d, 7, (uint64_t)r, 0, NG, out);
        t[6] = gp_bench_cpu();
        const int from[5] = {0, 1, 3, 4, 5};
        for (int k = 0; k < 5; k++) {
            double ns = 1e9 * (t[from[k] + 1] - t[from[k]]) / NG;
            if (ns < best[k])
                best[k] = ns;
        }
        g_sink = x[r] + out[r];
    }
    tt->philox_ns = best[0];
    tt->philox_portable_ns = best[1];
    tt->pinv_ns = best[2];
    tt->pinv_gsl_ns = best[3];
    tt->gen_ns = best[4];
    free(wb);
    free(u);
    free(out);
}

/* (k) the DD step as dispatched (AVX-512 or AVX2 where the CPU has them) vs its portable
 * one-element loop (an FMA clone where the CPU has FMA) vs its element function compiled
 * here without FMA (libm fma calls): 2^18 parameters, interleaved, best of 5. */
static void bench_dd_step(tput_times *tt)
{
    enum { ND = 1 << 18 };
    gp_adamw_dd_state st;
    double *g = malloc(ND * sizeof *g);
    gp_dd *w = malloc(3 * ND * sizeof *w), *m = w + ND, *v = m + ND;
    if (!g || !w || gp_adamw_dd_state_alloc(&st, ND) != 0) {
        fprintf(stderr, "out of memory\n");
        exit(3);
    }
    for (size_t i = 0; i < ND; i++) {
        g[i] = 1e-3 * ((double)(i % 1000) / 500 - 1);
        gp_adamw_dd_state_set(&st, i, 0.02);
        w[i] = gp_dd_from_double(0.02);
        m[i] = v[i] = gp_dd_from_double(0.0);
    }
    gp_adamw_dd_scalars sc = gp_adamw_dd_scalars_make(1e-3, 0.9, 0.999, 1e-8, 0.01, 3);
    gp_dd c1, c2, one = gp_dd_from_double(1.0);
    gp_adamw_dd_factors(&sc, one, &c1, &c2);
    tt->dd_fma_ns = tt->dd_scalar_ns = tt->dd_libm_ns = 1e30;
    for (int r = 0; r < 5; r++) {
        double k0 = gp_bench_cpu();
        gp_adamw_dd_step(&sc, &st, 0, ND, g, one, NULL);
        double k1 = gp_bench_cpu();
        gp_adamw_dd_step_path(GP_ADAMW_DD_SCALAR, &sc, &st, 0, ND, g, one, NULL);
        double k2 = gp_bench_cpu();
        double acc = 0;
        for (size_t i = 0; i < ND; i++)
            acc += gp_adamw_dd_element(&sc, c1, c2, g[i], &w[i], &m[i], &v[i]).hi;
        double k3 = gp_bench_cpu();
        g_sink = acc;
        if (1e9 * (k1 - k0) / ND < tt->dd_fma_ns)
            tt->dd_fma_ns = 1e9 * (k1 - k0) / ND;
        if (1e9 * (k2 - k1) / ND < tt->dd_scalar_ns)
            tt->dd_scalar_ns = 1e9 * (k2 - k1) / ND;
        if (1e9 * (k3 - k2) / ND < tt->dd_libm_ns)
            tt->dd_libm_ns = 1e9 * (k3 - k2) / ND;
    }
    gp_adamw_dd_state_free(&st);
    free(g);
    free(w);
}

static void bench_throughput(tput_times *tt)
{
    char y[1024];
    /* (i) 2^20 elements x 64 micro-batches, best of 2 */
    big_yaml(y, sizeof y, 1L << 20);
    run_yaml(y, "throughput");
    double t = g_last_cpu;
    run_yaml(y, "throughput");
    double t2 = g_last_cpu;
    tt->add_ns = 1e9 * (t < t2 ? t : t2) / ((double)(1L << 20) * 64);
    /* (j) 2 x 10^5 parameters x 20 steps */
    big_optimizer_yaml(y, sizeof y, 200000, 20);
    run_yaml(y, "throughput-optimizer");
    t = g_last_cpu;
    run_yaml(y, "throughput-optimizer");
    t2 = g_last_cpu;
    tt->opt_ns = 1e9 * (t < t2 ? t : t2) / (200000.0 * 20);
    bench_dd_step(tt);
    /* (l) */
    tt->fma_clean_ns = fma_calls(1 << 22, 0);
#if defined(__x86_64__)
    tt->fma_dirty_ns = __builtin_cpu_supports("avx") ? fma_calls(1 << 16, 1) : 0;
#else
    tt->fma_dirty_ns = 0;
#endif
    /* (m) binary64 -> bf16 RNE with events: the fast path vs the general routine */
    enum { NR = 1 << 20 };
    uint64_t *u = malloc(NR * sizeof *u);
    if (!u) {
        fprintf(stderr, "out of memory\n");
        exit(3);
    }
    for (size_t i = 0; i < NR; i++)
        u[i] = gp_f64_bits(1e-3 * ((double)(i * 2654435761u % 100003) / 50000 - 1));
    tt->rne_fast_ns = tt->rne_gen_ns = 1e30;
    for (int r = 0; r < 5; r++) {
        unsigned ev = 0;
        uint32_t x = 0;
        double t0 = gp_bench_cpu();
        for (size_t i = 0; i < NR; i++)
            x ^= gp_fmt_from_f64_rne(GP_BF16, u[i], 0, &ev);
        double t1 = gp_bench_cpu();
        for (size_t i = 0; i < NR; i++)
            x ^= gp_fmt_from_f64_bits(GP_BF16, u[i], GP_RNE, 0, 0, &ev);
        double t3 = gp_bench_cpu();
        g_sink = (double)(x ^ ev);
        if (1e9 * (t1 - t0) / NR < tt->rne_fast_ns)
            tt->rne_fast_ns = 1e9 * (t1 - t0) / NR;
        if (1e9 * (t3 - t1) / NR < tt->rne_gen_ns)
            tt->rne_gen_ns = 1e9 * (t3 - t1) / NR;
    }
    free(u);
    bench_generation(tt);
    bench_attribution(tt);
    bench_inorder_sums(tt);
}

static void print_throughput(const tput_times *tt, int json)
{
    if (json) {
        printf("\"add_attrib_ns_per_add\": %.3f, \"optimizer_ns_per_param_step\": %.3f, \"dd_fma_ns\": %.3f,"
               " \"dd_scalar_ns\": %.3f, \"dd_libm_ns\": %.3f, \"dd_fma_vs_libm\": %.3f, \"fma_call_clean_ns\": %.3f,"
               " \"fma_call_dirty_ns\": %.3f, \"rne_fast_ns\": %.3f, \"rne_general_ns\": %.3f",
               tt->add_ns, tt->opt_ns, tt->dd_fma_ns, tt->dd_scalar_ns, tt->dd_libm_ns, tt->dd_fma_ns / tt->dd_libm_ns, tt->fma_clean_ns,
               tt->fma_dirty_ns, tt->rne_fast_ns, tt->rne_gen_ns);
        printf(", \"philox_ns\": %.3f, \"philox_portable_ns\": %.3f, \"pinv_ns\": %.3f, \"pinv_gsl_ns\": %.3f,"
               " \"generate_normal_ns\": %.3f",
               tt->philox_ns, tt->philox_portable_ns, tt->pinv_ns, tt->pinv_gsl_ns, tt->gen_ns);
        printf(", \"attrib_block_ns\": %.3f, \"attrib_one_ns\": %.3f, \"attrib_block_vs_one\": %.3f,"
               " \"attrib_fp16_block_ns\": %.3f, \"attrib_fp16_one_ns\": %.3f, \"attrib_fp16_block_vs_one\": %.3f,"
               " \"inorder_sum_f64_ns\": %.3f, \"inorder_sum_dd_sq_ns\": %.3f",
               tt->attrib_block_ns, tt->attrib_one_ns, tt->attrib_block_ns / tt->attrib_one_ns, tt->attrib16_block_ns,
               tt->attrib16_one_ns, tt->attrib16_block_ns / tt->attrib16_one_ns, tt->sum_f64_ns, tt->sum_dd_sq_ns);
        return;
    }
    printf("(i) accumulation with attribution, end to end, CPU time (2^20 x K = 64, bf16/bf16): %.2f ns per element-addition "
           "(target <= 15)\n", tt->add_ns);
    printf("(j) optimizer simulation, end to end (2x10^5 params x 20 steps, --big-optimizer config): %.2f ns per "
           "parameter-step (target <= 60)\n", tt->opt_ns);
    printf("(k) DD AdamW step as dispatched %.2f ns/param vs its one-element FMA loop %.2f (%.2fx) vs its element "
           "function with libm fma calls %.2f: %.2fx\n",
           tt->dd_fma_ns, tt->dd_scalar_ns, tt->dd_fma_ns / tt->dd_scalar_ns, tt->dd_libm_ns,
           tt->dd_fma_ns / tt->dd_libm_ns);
    printf("(l) libm fma call, AVX upper halves clean %.2f ns vs in use %.2f ns: %.1fx\n", tt->fma_clean_ns,
           tt->fma_dirty_ns, tt->fma_dirty_ns / tt->fma_clean_ns);
    printf("(m) binary64 -> bf16 RNE with events: fast path %.2f ns vs general routine %.2f ns: %.2fx\n",
           tt->rne_fast_ns, tt->rne_gen_ns, tt->rne_fast_ns / tt->rne_gen_ns);
    printf("(n) generation per element: Philox block as dispatched %.2f ns vs portable %.2f ns (%.2fx); inverse normal "
           "CDF block %.2f ns vs GSL per element %.2f ns (%.2fx); gp_generate (normal) %.2f ns\n",
           tt->philox_ns, tt->philox_portable_ns, tt->philox_ns / tt->philox_portable_ns, tt->pinv_ns, tt->pinv_gsl_ns,
           tt->pinv_ns / tt->pinv_gsl_ns, tt->gen_ns);
    printf("(o) attribution of an addition, gp_attrib_block vs gp_attrib_one per element (target <= 0.5: vectorised): "
           "bf16 into bf16 %.2f ns vs %.2f ns: %.2fx; fp16 into fp32 %.2f ns vs %.2f ns: %.2fx\n",
           tt->attrib_block_ns, tt->attrib_one_ns, tt->attrib_block_ns / tt->attrib_one_ns, tt->attrib16_block_ns,
           tt->attrib16_one_ns, tt->attrib16_block_ns / tt->attrib16_one_ns);
    printf("(p) sums, per element: binary64 s += x in order %.2f ns (a floor: it cannot be reordered); the reference "
           "clipping norm's DD sum of squares (16 lanes) %.2f ns\n",
           tt->sum_f64_ns, tt->sum_dd_sq_ns);
}

/* --parts: the figures of (a), (k), (n), (o), (p) that price what a report holds bit for
 * bit, ns per element (JSON keys as in --throughput's; exact_add_ns: (a)'s exact
 * accumulation per addition; the attribution as a run without overflow, saturation or
 * non-finite values calls it: rare = 0). */
static void print_parts(const tput_times *tt, int json)
{
    if (json) {
        printf("{\"dd_fma_ns\": %.3f, \"generate_normal_ns\": %.3f, \"attrib_block_ns\": %.3f, "
               "\"attrib_fp16_block_ns\": %.3f, \"inorder_sum_f64_ns\": %.3f, \"inorder_sum_dd_sq_ns\": %.3f, "
               "\"exact_add_ns\": %.3f}\n",
               tt->dd_fma_ns, tt->gen_ns, tt->attrib_block_ns, tt->attrib16_block_ns, tt->sum_f64_ns, tt->sum_dd_sq_ns,
               tt->exact_add_ns);
        return;
    }
    printf("(a) exact reference addition %.2f ns; (k) DD AdamW step %.2f ns/param; (n) gp_generate (normal) %.2f ns; "
           "(o) attribution bf16 into bf16 %.2f ns, fp16 into fp32 %.2f ns; (p) in-order binary64 sum %.2f ns, DD sum "
           "of squares %.2f ns\n",
           tt->exact_add_ns, tt->dd_fma_ns, tt->gen_ns, tt->attrib_block_ns, tt->attrib16_block_ns, tt->sum_f64_ns,
           tt->sum_dd_sq_ns);
}

int gp_bench_replay(int json, double gib, int dense, uint64_t sample, int big_only); /* gp_bench_replay.c */
int gp_bench_scale(int json, int threads, int sampled); /* gp_bench_scale.c */

/* Best of 5 runs of yaml; *hops: the collectives' element-hops of a run. */
static double best_of_5(const char *yaml, const char *origin, uint64_t *hops)
{
    double best = 1e300;
    for (int j = 0; j < 5; j++) {
        gp_scenario sc;
        gp_error e = {""};
        gp_backend b;
        gp_result r;
        if (gp_scenario_load_string(yaml, strlen(yaml), origin, &sc, &e) != 0 || gp_backend_open("cpu", &b, &e) != 0) {
            fprintf(stderr, "%s\n", e.msg);
            exit(3);
        }
        double t0 = gp_bench_wall();
        if (gp_run_scenario(&sc, &b, NULL, &r, &e) != 0) {
            fprintf(stderr, "%s\n", e.msg);
            exit(3);
        }
        double t = gp_bench_wall() - t0;
        if (t < best)
            best = t;
        if (hops)
            *hops = r.st.coll.hops;
        gp_result_free(&r);
        gp_backend_close(&b);
        gp_scenario_free(&sc);
    }
    return best;
}

static int bench_distributed(int json)
{
    uint64_t hops = 0;
    double td = best_of_5("name: ring\ntensors: [{name: w, size: 262144, grad: {dist: normal, scale: 1.0e-3}}]\n"
                          "batch: {microbatches: 1, tokens: 512}\nprecision: {grad: bf16, accumulator: bf16}\n"
                          "distributed: {world_size: 8}\n", "ring", &hops);
    double t1 = best_of_5("name: one\ntensors: [{name: w, size: 262144, grad: {dist: normal, scale: 1.0e-3}}]\n"
                          "batch: {microbatches: 8, tokens: 512}\nprecision: {grad: bf16, accumulator: bf16}\n",
                          "one", NULL);
    double with = 0, without = 0;
    for (const gp_preset *p = gp_presets(); p->name; p++) {
        gp_scenario sc;
        gp_error e = {""};
        if (gp_scenario_load_string(p->yaml, strlen(p->yaml), p->name, &sc, &e) != 0) {
            fprintf(stderr, "%s\n", e.msg);
            return 3;
        }
        int dist = gp_scenario_distributed(&sc);
        gp_scenario_free(&sc);
        double t = run_yaml(p->yaml, p->name);
        with += t;
        if (!dist)
            without += t;
    }
    double coll = td - t1;
    if (json)
        printf("{\"ring_w8_s\": %.4f, \"one_process_k8_s\": %.4f, \"element_hops\": %llu, "
               "\"element_hops_per_s\": %.4g, \"suite_with_s\": %.3f, \"suite_without_s\": %.3f, "
               "\"suite_ratio\": %.3f}\n", td, t1, (unsigned long long)hops, coll > 0 ? (double)hops / coll : 0.0,
               with, without, with / without);
    else {
        printf("(h) bf16 ring all-reduce, W = 8, 2^18 elements: %.3f s vs the same 8 micro-batches in one process "
               "%.3f s: %.2fx; %llu element-hops in %.3f s: %.3g element-hops/s\n", td, t1, td / t1,
               (unsigned long long)hops, coll, coll > 0 ? (double)hops / coll : 0.0);
        printf("    default suite (-j 1) with the data-parallel presets %.2f s, without %.2f s: %.2fx\n", with,
               without, with / without);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int json = 0, big = 0, adamw_only = 0, big_opt = 0, replay = 0, dist = 0, tput_only = 0, parts = 0;
    double replay_gib = 1.0;
    int replay_dense = 0, replay_big_only = 0;
    unsigned long long replay_sample = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 || strcmp(argv[i], "--sampled") == 0) {
            int th = 0, sa = 0;
            for (int j = 1; j < argc; j++) {
                th |= strcmp(argv[j], "--threads") == 0;
                sa |= strcmp(argv[j], "--sampled") == 0;
                json |= strcmp(argv[j], "--json") == 0;
            }
            gp_bench_host_line(json ? stderr : stdout);
            return gp_bench_scale(json, th, sa);
        }
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--replay") == 0) replay = 1;
        else if (strcmp(argv[i], "--replay-gib") == 0 && i + 1 < argc && atof(argv[i + 1]) > 0)
            replay = 1, replay_gib = atof(argv[++i]);
        else if (strcmp(argv[i], "--replay-sample") == 0 && i + 1 < argc && strtoull(argv[i + 1], NULL, 10) > 0)
            replay = 1, replay_sample = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--replay-dense") == 0) replay = 1, replay_dense = 1;
        else if (strcmp(argv[i], "--replay-big-only") == 0) replay = 1, replay_big_only = 1;
        else if (strcmp(argv[i], "--big") == 0) big = 1;
        else if (strcmp(argv[i], "--adamw-only") == 0) adamw_only = 1;
        else if (strcmp(argv[i], "--big-optimizer") == 0) big_opt = 1;
        else if (strcmp(argv[i], "--distributed") == 0) dist = 1;
        else if (strcmp(argv[i], "--throughput") == 0) tput_only = 1;
        else if (strcmp(argv[i], "--parts") == 0) parts = 1;
        else {
            fprintf(stderr, "usage: gp_bench [--json] [--big] [--adamw-only | --throughput | --parts | --big-optimizer | --distributed "
                    "| --replay [--replay-gib G] [--replay-dense] [--replay-sample N] [--replay-big-only]]\n");
            return 2;
        }
    }
    gp_bench_host_line(json ? stderr : stdout); /* first: figures name their host (--json: on stderr) */
    if (replay)
        return gp_bench_replay(json, replay_gib, replay_dense, replay_sample, replay_big_only);
    if (dist)
        return bench_distributed(json);
    if (big_opt) {
        char y[1024];
        big_optimizer_yaml(y, sizeof y, 10000000, 100);
        double wall = run_yaml(y, "big-optimizer"), t = g_last_cpu;
        if (json)
            printf("{\"big_optimizer_cpu_s\": %.3f, \"big_optimizer_wall_s\": %.3f, \"big_optimizer_ns_per_param_step\": %.3f, "
                   "\"big_optimizer_peak_mib\": %.1f}\n", t, wall, t /* 10^9 parameter-steps: s = ns each */, peak_mib());
        else
            printf("10^7 params x 100 steps (scaler, clip, bf16 + fp32 master): %.1f CPU s, %.1f s wall (%.1f ns per "
                   "parameter-step), peak %.1f MiB (target < 60 s, < 2048 MiB)\n", t, wall,
                   t /* 10^9 parameter-steps: s = ns each */, peak_mib());
        return 0;
    }
    tput_times tt;
    if (parts) {
        double te, tp;
        bench_exact(&te, &tp);
        tt.exact_add_ns = 1e9 * te / ((double)N * K);
        bench_dd_step(&tt);
        bench_generation(&tt);
        bench_attribution_pair(GP_BF16, GP_BF16, 0, &tt.attrib_block_ns, NULL);
        bench_attribution_pair(GP_FP32, GP_FP16, 0, &tt.attrib16_block_ns, NULL);
        bench_inorder_sums(&tt);
        print_parts(&tt, json);
        return 0;
    }
    if (tput_only) {
        bench_throughput(&tt);
        if (json)
            printf("{");
        print_throughput(&tt, json);
        printf(json ? ", \"peak_mib\": %.1f}\n" : "peak resident memory: %.1f MiB\n", peak_mib());
        return 0;
    }
    adamw_times at;
    if (adamw_only) {
        bench_adamw(&at);
        if (json)
            printf("{");
        print_adamw(&at, json);
        return 0;
    }
    double te, tp, tb, tf;
    bench_exact(&te, &tp);
    bench_bf16(&tb, &tf);
    double suite = 0, multistep = 0;
    for (const gp_preset *p = gp_presets(); p->name; p++) {
        double t = run_yaml(p->yaml, p->name);
        suite += t;
        if (strcmp(p->name, "bf16-weights-cosine-no-master") == 0)
            multistep = t;
    }
    double tbig = 0, tbig_wall = 0, peak_before = peak_mib(), peak_big = 0;
    if (big) {
        char y[1024];
        big_yaml(y, sizeof y, 100000000);
        tbig_wall = run_yaml(y, "big");
        tbig = g_last_cpu;
        peak_big = peak_mib();
    }
    bench_throughput(&tt);
    bench_adamw(&at); /* last: its 10^6-parameter arrays would count in the peaks above */
    double na = (double)N * K;
    if (json) {
        printf("{\"exact_ns_per_add\": %.3f, \"plain_fp64_ns_per_add\": %.3f, \"exact_vs_fp64\": %.3f,\n"
               " \"cpu_bf16_ns_per_add\": %.3f, \"native_fp32_ns_per_add\": %.3f, \"bf16_vs_fp32\": %.3f,\n"
               " \"default_suite_s\": %.3f, \"multistep_preset_s\": %.3f, \"peak_mib\": %.1f, \"big_cpu_s\": %.3f,"
               " \"big_wall_s\": %.3f, \"big_peak_mib\": %.1f,\n ",
               1e9 * te / na, 1e9 * tp / na, te / tp, 1e9 * tb / na, 1e9 * tf / na, tb / tf, suite, multistep,
               peak_before, tbig, tbig_wall, peak_big);
        print_throughput(&tt, json);
        printf(",\n ");
        print_adamw(&at, json);
        return 0;
    }
    printf("(a) exact reference accumulation: %.2f ns/add vs plain fp64 %.2f ns/add: %.2fx (target <= 2.0x)\n",
           1e9 * te / na, 1e9 * tp / na, te / tp);
    printf("(b) CPU bf16 accumulation:         %.2f ns/add vs native fp32 %.2f ns/add: %.2fx (target <= 2.0x)\n",
           1e9 * tb / na, 1e9 * tf / na, tb / tf);
    printf("(c) default suite (-j 1):          %.2f s (target < 60 s)\n", suite);
    printf("(e) multi-step preset (100 AdamW steps x 4096, bf16-weights-cosine-no-master): %.2f s\n", multistep);
    print_adamw(&at, json);
    printf("peak resident memory:              %.1f MiB\n", peak_before);
    print_throughput(&tt, json);
    if (big)
        printf("10^8 elements, K = 64, bf16:       %.1f CPU s, %.1f s wall (%.2f ns per element-addition), peak "
               "%.1f MiB (target < 150 s, < 2048 MiB)\n", tbig, tbig_wall, 1e9 * tbig / (1e8 * 64), peak_big);
    return 0;
}
