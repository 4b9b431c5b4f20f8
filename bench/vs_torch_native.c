/* vs_torch_native.c — the native limit beside bench/vs_torch.py: the memory traffic of
 * the two configurations with nothing but the arithmetic a training loop does, compiled
 * by vs_torch.py with `cc -O3 -march=native` (not part of the CMake build).
 *
 *   vs_torch_native accum N K   K passes of acc[i] = bf16(acc[i] + g[i]) (bf16 grads into a
 *                               bf16 accumulator, RNE through fp32) and ref[i] += g[i] in
 *                               binary64 over N elements: the (i) and replay loops' traffic
 *   vs_torch_native optim N S   S mixed steps of N parameters without a reference: fp16
 *                               grads unscaled into fp32 with a non-finite check, the
 *                               global norm, the clip factor, AdamW on fp32 master, m, v,
 *                               the bf16 parameters cast from the master: the (j) loop
 *   vs_torch_native chain N K   K passes of the three sums gradprec's report keeps per
 *                               micro-batch in element order (gp_run_accum.c,
 *                               attribute_fmt: the trajectory's squared error and squared
 *                               reference, the sum of squares of the outputs), each one
 *                               binary64 addition per element, nothing else: a floor for
 *                               (i) and (replay) while the reports stay byte-identical,
 *                               since a sum in element order is a chain of dependent adds
 *
 * Prints the CPU seconds of the timed loops (setup untimed) and a checksum (so the
 * compiler keeps the work). Exit 2 on bad arguments. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) /* xorshift64*, in (-1, 1) */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 0x2545F4914F6CDD1Dull) >> 11) * 0x1p-52 - 1.0;
}

static inline float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f) /* RNE, finite inputs */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static int accum(long n, int K)
{
    uint16_t *g = malloc((size_t)n * 2), *acc = calloc((size_t)n, 2);
    double *ref = calloc((size_t)n, sizeof *ref);
    if (!g || !acc || !ref)
        return 3;
    for (long i = 0; i < n; i++)
        g[i] = f32_to_bf16((float)(1e-3 / 64 * uniform()));
    double t0 = cpu_s();
    for (int k = 0; k < K; k++)
        for (long i = 0; i < n; i++) {
            float x = bf16_to_f32(g[i]);
            acc[i] = f32_to_bf16(bf16_to_f32(acc[i]) + x);
            ref[i] += x;
        }
    double ss = 0, se = 0;
    for (long i = 0; i < n; i++) {
        double d = bf16_to_f32(acc[i]) - ref[i];
        ss += ref[i] * ref[i];
        se += d * d;
    }
    double t = cpu_s() - t0;
    printf("%.6f %.9g\n", t, sqrt(se / ss));
    return 0;
}

static int optim(long n, int steps)
{
    _Float16 *g = malloc((size_t)n * sizeof *g);
    float *master = malloc((size_t)n * 4), *m = calloc((size_t)n, 4), *v = calloc((size_t)n, 4), *gf = malloc((size_t)n * 4);
    uint16_t *p = malloc((size_t)n * 2);
    if (!g || !master || !m || !v || !gf || !p)
        return 3;
    float scale = 65536.0f;
    for (long i = 0; i < n; i++) {
        g[i] = (_Float16)(1e-4 * 65536.0 * uniform());
        master[i] = (float)(0.02 * uniform());
        p[i] = f32_to_bf16(master[i]);
    }
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
    double t0 = cpu_s();
    for (int s = 1; s <= steps; s++) {
        float inv = 1.0f / scale, lr = 1e-4f * (float)s / (float)steps;
        int found_inf = 0;
        float ss = 0;
        for (long i = 0; i < n; i++) {
            float x = (float)g[i] * inv;
            found_inf |= !isfinite(x);
            gf[i] = x;
            ss += x * x;
        }
        if (found_inf) {
            scale *= 0.5f;
            continue;
        }
        float norm = sqrtf(ss), coef = 1.0f / (norm + 1e-6f);
        coef = coef < 1.0f ? coef : 1.0f;
        float bc1 = 1.0f - powf(b1, (float)s), bc2 = sqrtf(1.0f - powf(b2, (float)s));
        for (long i = 0; i < n; i++) {
            float x = gf[i] * coef, w = master[i] * (1.0f - lr * wd);
            m[i] = b1 * m[i] + (1.0f - b1) * x;
            v[i] = b2 * v[i] + (1.0f - b2) * x * x;
            w -= lr / bc1 * m[i] / (sqrtf(v[i]) / bc2 + eps);
            master[i] = w;
            p[i] = f32_to_bf16(w);
        }
    }
    double t = cpu_s() - t0, sum = 0;
    for (long i = 0; i < n; i++)
        sum += bf16_to_f32(p[i]);
    printf("%.6f %.9g\n", t, sum);
    return 0;
}

static int chain(long n, int K)
{
    double *e = malloc((size_t)n * sizeof *e), *p = malloc((size_t)n * sizeof *p), *q = malloc((size_t)n * sizeof *q);
    if (!e || !p || !q)
        return 3;
    for (long i = 0; i < n; i++) {
        e[i] = 1e-12 * uniform() * uniform();
        p[i] = 1e-3 * uniform();
        q[i] = 1e-6 * uniform() * uniform();
    }
    double t0 = cpu_s(), s1 = 0, s2 = 0, s3 = 0;
    for (int k = 0; k < K; k++)
        for (long i = 0; i < n; i++) { /* element order, as the report's sums (no -ffast-math: kept) */
            s1 += e[i];
            s2 += p[i] * p[i];
            s3 += q[i];
        }
    double t = cpu_s() - t0;
    printf("%.6f %.9g\n", t, s1 + s2 + s3);
    return 0;
}

int main(int argc, char **argv)
{
    long n = argc == 4 ? atol(argv[2]) : 0;
    int k = argc == 4 ? atoi(argv[3]) : 0;
    if (n > 0 && k > 0 && strcmp(argv[1], "accum") == 0)
        return accum(n, k);
    if (n > 0 && k > 0 && strcmp(argv[1], "optim") == 0)
        return optim(n, k);
    if (n > 0 && k > 0 && strcmp(argv[1], "chain") == 0)
        return chain(n, k);
    fprintf(stderr, "usage: vs_torch_native accum|optim|chain N K\n");
    return 2;
}
