/* test_cuda_parity.c — CUDA == CPU emulation, bit for bit, events included, for the
 * format conversions of kernels/arith run by kernels/cuda. Without a device (or
 * without a CUDA build) it exits 77, which CTest reports as skipped.
 * Default: 16 slices of 2^20 fp32 patterns spread over all signs and exponents, per
 * format, mode and FTZ setting. GP_PARITY_FULL=1: all 2^32 patterns per format and
 * mode (FTZ off), compared on all cores.
 * Then the simulation: every preset of the default suite run on the cuda backend and
 * compared with the CPU emulation at every accumulation, unscale and AdamW step
 * (gp_run_scenario's --compare), which must report no mismatching element and no write
 * during a skipped step. */
#define _GNU_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/gp_backend.h"
#include "harness/gp_presets.h"
#include "harness/gp_runner.h"
#include "kernels/arith/gp_philox.h"
#include "kernels/cuda/gp_cuda.h"

typedef struct {
    gp_format f;
    gp_rmode mode;
    int ftz;
    uint64_t seed;
    uint32_t start;
    size_t lo, hi;
    const uint32_t *bits;
    const uint8_t *ev;
    size_t bad;
    size_t first_bad;
} slice;

static void *compare(void *arg)
{
    slice *s = arg;
    for (size_t i = s->lo; i < s->hi; i++) {
        uint32_t x = s->start + (uint32_t)i;
        uint32_t r = s->mode == GP_STOCHASTIC ? gp_rand_u32(s->seed, 0, x) : 0u;
        unsigned e = 0;
        uint32_t b = gp_fmt_from_f32_bits(s->f, x, s->mode, r, s->ftz, &e);
        if (b != s->bits[i] || (uint8_t)e != s->ev[i]) {
            if (!s->bad)
                s->first_bad = i;
            s->bad++;
        }
    }
    return NULL;
}

static size_t run_range(gp_format f, gp_rmode mode, int ftz, uint32_t start, size_t n,
                        uint32_t *bits, uint8_t *ev, int nthreads)
{
    gp_error err = {""};
    const uint64_t seed = 0x5eed;
    if (gp_cuda_convert_range(f, mode, ftz, seed, start, n, bits, ev, &err) != 0) {
        fprintf(stderr, "CUDA: %s\n", err.msg);
        exit(1);
    }
    slice sl[64];
    pthread_t th[64];
    for (int t = 0; t < nthreads; t++) {
        slice s = {f, mode, ftz, seed, start, n * (size_t)t / (size_t)nthreads,
                   n * (size_t)(t + 1) / (size_t)nthreads, bits, ev, 0, 0};
        sl[t] = s;
        pthread_create(&th[t], NULL, compare, &sl[t]);
    }
    size_t bad = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(th[t], NULL);
        if (sl[t].bad && !bad) {
            uint32_t x = start + (uint32_t)sl[t].first_bad;
            fprintf(stderr, "mismatch: format %d mode %d ftz %d input 0x%08x: GPU 0x%x ev 0x%x\n", f,
                    mode, ftz, x, bits[sl[t].first_bad], ev[sl[t].first_bad]);
        }
        bad += sl[t].bad;
    }
    return bad;
}

int main(void)
{
    int ndev = gp_cuda_device_count();
    if (ndev == 0) {
        printf("no CUDA device (or CUDA not built): skipped\n");
        return 77;
    }
    int full = getenv("GP_PARITY_FULL") != NULL;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nthreads = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (int)ncpu;
    size_t chunk = full ? (size_t)1 << 28 : (size_t)1 << 20;
    uint32_t *bits = malloc(chunk * sizeof *bits);
    uint8_t *ev = malloc(chunk);
    if (!bits || !ev)
        return 1;
    size_t total = 0, bad = 0;
    for (int f = 0; f < GP_NFORMATS; f++)
        for (int mode = GP_RNE; mode <= GP_STOCHASTIC; mode++)
            for (int ftz = 0; ftz < (full ? 1 : 2); ftz++)
                for (uint64_t s = 0; s < 16; s++) {
                    uint32_t start = (uint32_t)(s << 28);
                    bad += run_range((gp_format)f, (gp_rmode)mode, ftz, start, chunk, bits, ev, nthreads);
                    total += chunk;
                }
    printf("CUDA parity: %zu conversions compared, %zu mismatches (%s)\n", total, bad,
           full ? "all 2^32 fp32 inputs per format and mode" : "sampled slices");
    free(bits);
    free(ev);
    gp_backend gpu, cpu;
    gp_error e = {""};
    if (gp_backend_open("cuda", &gpu, &e) != 0 || gp_backend_open("cpu", &cpu, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    for (const gp_preset *p = gp_presets(); p->name; p++) {
        gp_scenario sc;
        gp_result r;
        if (gp_scenario_load_string(p->yaml, strlen(p->yaml), p->name, &sc, &e) != 0 ||
            gp_run_scenario(&sc, &gpu, &cpu, &r, &e) != 0) {
            fprintf(stderr, "%s: %s\n", p->name, e.msg);
            return 1;
        }
        printf("CUDA parity: %-30s %llu accumulation, %llu AdamW element mismatches against the CPU, "
               "%llu writes in skipped steps\n", p->name, (unsigned long long)r.st.mismatches,
               (unsigned long long)r.st.opt.mismatches, (unsigned long long)r.st.opt.skip_writes);
        bad += r.st.mismatches + r.st.opt.mismatches + r.st.opt.skip_writes;
        gp_result_free(&r);
        gp_scenario_free(&sc);
    }
    gp_backend_close(&gpu);
    gp_backend_close(&cpu);
    return bad ? 1 : 0;
}
