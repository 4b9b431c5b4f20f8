/* test_cuda_parity.c — CUDA == CPU emulation, bit for bit, events included, for the
 * format conversions run by kernels/cuda: on a GPU the bf16/fp16 conversions (RNE, RTZ,
 * no FTZ) are the hardware's (cvt.rn/rz.bf16/f16.f32), so this checks NVIDIA's rounding
 * against gradprec's model; a NaN result must be a NaN (the hardware may canonicalise
 * the payload: gp_fmt_agree), every other result equal bit for bit; the events are
 * gradprec's on both sides. Through the host shim the intrinsics are gradprec's own
 * rounding (docs/cuda.md). Without a device (or without a CUDA build) it exits 77,
 * which CTest reports as skipped.
 * Default: 16 slices of 2^20 fp32 patterns spread over all signs and exponents, per
 * format, mode and FTZ setting. GP_PARITY_FULL=1: all 2^32 patterns per format and
 * mode (FTZ off), compared on all cores.
 * Then the simulation: every preset of the default suite run on the cuda backend and
 * compared with the CPU emulation at every accumulation, unscale and AdamW step
 * (gp_run_scenario's --compare), which must report no mismatching element and no write
 * during a skipped step.
 * Before that, accumulate_many: 200 segments (every grad and accumulator format, every
 * rounding, FTZ on and off, sizes 1..2^21+5 not all multiples of 8, scattered
 * first_index and stream) in one call on the cuda backend must equal the CPU's accumulate
 * per segment, bit for bit (NaNs as NaNs); then accumulate per segment on a second
 * staged table of the device kernels, open at the same time.
 * Before that too, the low-bit optimizer states (check_lowbit): the cuda backend's AdamW
 * on codes and block scales against the CPU backend's, every param, code and scale bit;
 * and after the presets, the low-bit example scenario with each state through the runner. */
#define _GNU_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN) */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/sources/gp_backend.h"
#include "kernels/gp_scaled_tensor.h"
#include "harness/scenario/gp_presets.h"
#include "harness/run/gp_runner.h"
#include "kernels/arith/gp_accum.h"
#include "kernels/arith/gp_philox.h"
#include "kernels/gp_vocab.h"
#include "kernels/cpu/gp_cpu_backend.h"
#include "kernels/cpu/gp_lowbit.h"
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
        if (!gp_fmt_agree(s->f, b, s->bits[i]) || (uint8_t)e != s->ev[i]) {
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

/* splitmix64: the test's random bits. */
static uint64_t next_u64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define NSEG 200

typedef struct {
    gp_plugin_accumulate_args gpu[NSEG], cpu[NSEG];
    void *mem[NSEG][5]; /* grad; acc, comp for the GPU; acc, comp for the CPU */
} segments;

/* Segment j: formats, rounding and FTZ from j (all 200 combinations), a size from a
 * list, random bit patterns (NaN and inf included) in grad, acc and comp, the same
 * starting values on both sides. */
static void make_segments(segments *S, uint64_t *rng)
{
    static const uint64_t sizes[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 64, 100, 257, 1000, 4099};
    for (int j = 0; j < NSEG; j++) {
        gp_plugin_accumulate_args a;
        memset(&a, 0, sizeof a);
        a.struct_size = sizeof a;
        a.grad_format = j % 5;
        a.acc_format = (j / 5) % 5;
        a.rounding = (j / 25) % 4;
        a.ftz = (j / 100) % 2;
        a.seed = 0x5eed;
        a.stream = next_u64(rng);
        a.first_index = next_u64(rng) >> 20;
        a.n = j == NSEG - 1 ? ((uint64_t)1 << 21) + 5 : sizes[j % 15]; /* the last: more groups than threads */
        a.microbatch = (uint32_t)j % 8;
        size_t gb = a.n * (size_t)(gp_fmt_get((gp_format)a.grad_format).width / 8);
        size_t ab = a.n * (size_t)(gp_fmt_get((gp_format)a.acc_format).width / 8);
        int kahan = a.rounding == GP_PLUGIN_KAHAN;
        for (int k = 0; k < 5; k++) {
            size_t b = k == 0 ? gb : ab;
            S->mem[j][k] = (k == 2 || k == 4) && !kahan ? NULL : malloc(b);
            if (!S->mem[j][k])
                continue;
            if (k < 3)
                for (size_t i = 0; i < b; i++)
                    ((uint8_t *)S->mem[j][k])[i] = (uint8_t)next_u64(rng);
            else
                memcpy(S->mem[j][k], S->mem[j][k - 2], b);
        }
        S->gpu[j] = S->cpu[j] = a;
        S->gpu[j].grad = S->cpu[j].grad = S->mem[j][0];
        S->gpu[j].acc = S->mem[j][1];
        S->gpu[j].comp = S->mem[j][2];
        S->cpu[j].acc = S->mem[j][3];
        S->cpu[j].comp = S->mem[j][4];
    }
}

/* Elements of acc (and comp) where the two sides disagree; the first one is printed. */
static size_t count_mismatches(const segments *S, const char *what)
{
    size_t bad = 0;
    for (int j = 0; j < NSEG; j++) {
        const gp_plugin_accumulate_args *g = &S->gpu[j], *c = &S->cpu[j];
        gp_format af = (gp_format)g->acc_format;
        for (uint64_t i = 0; i < g->n; i++) {
            uint32_t ga = gp_pack_get(af, g->acc, i), ca = gp_pack_get(af, c->acc, i);
            uint32_t gc = g->comp ? gp_pack_get(af, g->comp, i) : 0, cc = c->comp ? gp_pack_get(af, c->comp, i) : 0;
            if (gp_fmt_agree(af, ga, ca) && gp_fmt_agree(af, gc, cc))
                continue;
            if (!bad)
                fprintf(stderr, "%s mismatch: segment %d (grad %d acc %d rounding %d ftz %d n %llu) element %llu: "
                        "GPU acc 0x%x comp 0x%x, CPU acc 0x%x comp 0x%x\n", what, j, g->grad_format, g->acc_format,
                        g->rounding, g->ftz, (unsigned long long)g->n, (unsigned long long)i, ga, gc, ca, cc);
            bad++;
        }
    }
    return bad;
}

/* accumulate_many on the cuda backend == the CPU's accumulate per segment; then
 * accumulate segment by segment on `second` (another staged table). Returns mismatches,
 * or exits 1 when a call fails. */
static size_t check_accumulate_many(const gp_plugin *second)
{
    const gp_plugin *gpu = gp_cuda_backend(), *cpu = gp_cpu_backend();
    segments *S = calloc(1, sizeof *S);
    uint64_t rng = 42;
    if (!S || !gpu || !gpu->accumulate_many)
        exit(1);
    make_segments(S, &rng);
    size_t bad = 0;
    for (int round = 0; round < 2; round++) {
        int rc = round == 0 ? gpu->accumulate_many(S->gpu, NSEG) : 0;
        for (int j = 0; j < NSEG; j++) {
            if (round == 1)
                rc |= second->accumulate(&S->gpu[j]);
            rc |= cpu->accumulate(&S->cpu[j]);
        }
        if (rc != 0) {
            fprintf(stderr, "accumulate failed (round %d): %d\n", round, rc);
            exit(1);
        }
        bad += count_mismatches(S, round == 0 ? "accumulate_many" : "accumulate");
    }
    printf("CUDA parity: accumulate_many over %d segments, then accumulate per segment: %zu mismatches\n", NSEG,
           bad);
    for (int j = 0; j < NSEG; j++)
        for (int k = 0; k < 5; k++)
            free(S->mem[j][k]);
    free(S);
    return bad;
}

/* The scaled formats (gp_cuda_scaled.cu) against the CPU's gp_scaled_quantize: every MX
 * element format and rule (torchao or spec), nvfp4 one and two level, fp8 blockwise 1x128
 * (pow2, nosat) and delayed, round to nearest and stochastic, on 64 x 256 values of every
 * magnitude (2^-140 .. 2^120, zeros, one NaN and one inf row); codes, scales and values
 * bit for bit (NaN: NaN). Returns the mismatches. */
static size_t check_scaled(void)
{
    enum { R = 64, C = 256 };
    static float x[R * C], y1[R * C], y2[R * C], s1[R * C], s2[R * C];
    static uint8_t q1[R * C], q2[R * C];
    uint64_t rng = 2511;
    for (int i = 0; i < R * C; i++) {
        uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z ^= z >> 27;
        int e = (int)(z % 261) - 140, row = i / C;
        x[i] = row % 16 == 3 ? 0.0f : (float)ldexp((double)(int32_t)(z >> 40) / 8388608.0, row % 4 == 1 ? e : e / 8);
    }
    x[5 * C + 7] = NAN;
    x[9 * C + 100] = -INFINITY;
    const char *names[] = {"mxfp8_e4m3", "mxfp8_e5m2:rceil", "mxfp6_e2m3:ceil", "mxfp6_e3m2:even:torchao",
                           "mxfp4:rceil:torchao", "mxfp4:sr", "nvfp4", "nvfp4:single:sr",
                           "fp8_e4m3:blockwise_1x128", "fp8_e5m2:blockwise_1x128:pow2:nosat",
                           "fp8_e4m3:delayed:sr", "fp8_e4m3:delayed:nosat"};
    size_t bad = 0, n = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        gp_scaled_cfg c;
        char why[192];
        gp_error e = {""};
        if (gp_scaled_parse(names[k], &c, why, sizeof why) != 0) {
            fprintf(stderr, "%s\n", why);
            return 1;
        }
        float ts = 1.0f, given = 3.0f;
        gp_scaled_quantize(&c, R, C, x, y1, q1, s1, &ts, given, 9, 4, 0, NULL);
        if (gp_cuda_scaled_quantize(&c, R, C, x, y2, q2, s2, ts, given, 9, 4, &e) != 0) {
            fprintf(stderr, "%s: %s\n", names[k], e.msg);
            return 1;
        }
        uint64_t ns = gp_scaled_nscales(&c, R, C);
        for (int i = 0; i < R * C; i++) {
            uint32_t a = gp_f32_bits(y1[i]), b = gp_f32_bits(y2[i]);
            bad += !(a == b || (y1[i] != y1[i] && y2[i] != y2[i])) || q1[i] != q2[i];
        }
        for (uint64_t i = 0; i < ns; i++)
            bad += !(gp_f32_bits(s1[i]) == gp_f32_bits(s2[i]) || (s1[i] != s1[i] && s2[i] != s2[i]));
        n += R * C;
    }
    printf("CUDA parity: scaled formats, %zu values of 12 recipes: %zu mismatches\n", n, bad);
    return bad;
}

/* Low-bit optimizer states (kernels/arith/gp_lowbit_block.h): the cuda backend's AdamW
 * (gp_adamw_lowbit_kernel, staged) against the CPU backend's (kernels/cpu/gp_lowbit.c),
 * each from the same state, 3 chained steps and a skipped one per case: every state
 * (bnb8_blockwise, torchao_8bit, torchao_4bit, torchao_fp8) x param fp32/bf16/fp16 x
 * grad fp32/bf16 x weight decay 0 / 0.1 x evaluation torch_cuda / torch_cpu, on 37
 * blocks of 256 whose magnitudes span 2^-140 .. 2^19: an all-zero block, a subnormal one
 * with exact zeros (bitsandbytes' 1/absmax overflows: its NaN bin), one outlier among
 * values near 2^-30, mixed signs. Every param (NaN: NaN), m and v code and m and v scale
 * bit is compared (the count is printed); the skipped step must leave all of them as they
 * were; the evaluations with the host's torch CPU sqrt (torch_cpu_zen4, _intel_avx512,
 * _host) and stochastic rounding must be refused (1) by the device. Returns the
 * mismatches and missing refusals. */
enum { LB_N = 37 * 256, LB_STEPS = 3 };
typedef struct {
    uint32_t param[LB_N], grad[LB_N]; /* packed in their formats */
    uint8_t codes[2][LB_N];           /* m, v */
    float scales[2][LB_N / 128];
    float mf[LB_N], vf[LB_N];         /* the dequantized state (the ABI's m[], v[]) */
} lowbit_side;

/* The arguments of step t of state f on side S. */
static gp_plugin_adamw_args lowbit_args(lowbit_side *S, int f, gp_format pf, gp_format gf, int wd, int32_t ev,
                                        int64_t t, const int32_t *skip)
{
    gp_plugin_adamw_args a;
    memset(&a, 0, sizeof a);
    gp_lowbit_dequantize((gp_lowbit)f, 1, S->codes[0], S->scales[0], LB_N, S->mf);
    gp_lowbit_dequantize((gp_lowbit)f, 0, S->codes[1], S->scales[1], LB_N, S->vf);
    a.struct_size = sizeof a;
    a.param_format = pf;
    a.state_format = GP_FP32;
    a.grad_format = gf;
    a.variant = GP_PLUGIN_ADAMW_PLAIN;
    a.rounding = GP_PLUGIN_RNE;
    a.lr = 1e-3;
    a.beta1 = 0.9;
    a.beta2 = 0.999;
    a.eps = 1e-8;
    a.weight_decay = wd ? 0.1 : 0.0;
    a.step = t;
    a.inv_scale = 1.0f;
    a.found_inf = skip;
    a.n = LB_N;
    a.grad = S->grad;
    a.param = S->param;
    a.m = S->mf;
    a.v = S->vf;
    a.evaluation = ev;
    a.state_quant = f;
    a.block = (int32_t)gp_lowbit_block((gp_lowbit)f);
    a.m_codes = S->codes[0];
    a.v_codes = S->codes[1];
    a.m_scales = S->scales[0];
    a.v_scales = S->scales[1];
    return a;
}

static size_t check_lowbit(void)
{
    const gp_plugin *gpu = gp_cuda_backend(), *cpu = gp_cpu_backend();
    static float x[LB_N], g32[LB_N], p32[LB_N], m0[LB_N], v0[LB_N];
    static lowbit_side side[2], before; /* [0] cuda, [1] cpu */
    uint64_t rng = 2525;
    for (int i = 0; i < LB_N; i++) {
        int blk = i / 256, zero = blk == 0 || (blk == 1 && i % 64 == 0);
        int e = blk == 1 ? -140 : blk % 5 == 2 ? -30 : (int)(next_u64(&rng) % 40) - 20;
        x[i] = zero ? 0.0f : (float)ldexp((double)(int32_t)(next_u64(&rng) >> 32) / 2147483648.0, e);
        if (blk == 2 && i % 256 == 17)
            x[i] = 3.0e4f; /* one outlier among values near 2^-30 */
        int eg = blk == 1 ? -140 : (int)(next_u64(&rng) % 50) - 30;
        g32[i] = zero ? 0.0f : (float)ldexp((double)(int32_t)(next_u64(&rng) >> 32) / 2147483648.0, eg);
        p32[i] = (float)ldexp((double)(int32_t)(next_u64(&rng) >> 32) / 2147483648.0, (int)(next_u64(&rng) % 14) - 10);
        m0[i] = x[i] * 0.5f;
        v0[i] = x[i] * x[i];
    }
    static const int32_t pfs[] = {GP_FP32, GP_BF16, GP_FP16}, gfs[] = {GP_FP32, GP_BF16};
    static const int32_t evs[] = {GP_PLUGIN_EVAL_TORCH_CUDA, GP_PLUGIN_EVAL_TORCH_CPU};
    static const int32_t host_only[] = {GP_PLUGIN_EVAL_TORCH_CPU_ZEN4, GP_PLUGIN_EVAL_TORCH_CPU_INTEL_AVX512,
                                        GP_PLUGIN_EVAL_TORCH_CPU_HOST};
    size_t bad = 0, n = 0, refused = 0, refusals = 0;
    for (int f = GP_LOWBIT_BNB8; f < GP_LOWBIT_COUNT; f++)
        for (int c = 0; c < 3 * 2 * 2 * 2; c++) {
            gp_format pf = (gp_format)pfs[c % 3], gf = (gp_format)gfs[c / 3 % 2];
            int wd = c / 6 % 2;
            int32_t ev = evs[c / 12];
            size_t B = gp_lowbit_block((gp_lowbit)f);
            for (int k = 0; k < 2; k++) {
                for (int i = 0; i < LB_N; i++) {
                    gp_pack_set(pf, side[k].param, (uint64_t)i,
                                gp_fmt_from_f32_bits(pf, gp_f32_bits(p32[i]), GP_RNE, 0, 0, NULL));
                    gp_pack_set(gf, side[k].grad, (uint64_t)i,
                                gp_fmt_from_f32_bits(gf, gp_f32_bits(g32[i]), GP_RNE, 0, 0, NULL));
                }
                gp_lowbit_quantize((gp_lowbit)f, 1, m0, LB_N, side[k].codes[0], side[k].scales[0]);
                gp_lowbit_quantize((gp_lowbit)f, 0, v0, LB_N, side[k].codes[1], side[k].scales[1]);
            }
            for (int64_t t = 1; t <= LB_STEPS + 1; t++) {
                int32_t skip = t == LB_STEPS + 1; /* the last call: a skipped step */
                gp_plugin_adamw_args ag = lowbit_args(&side[0], f, pf, gf, wd, ev, t, &skip);
                gp_plugin_adamw_args ac = lowbit_args(&side[1], f, pf, gf, wd, ev, t, &skip);
                before = side[0];
                int rg = gpu->adamw(&ag), rc = cpu->adamw(&ac);
                if (rg != 0 || rc != 0) {
                    fprintf(stderr, "low-bit adamw failed: state %d param %d: cuda %d, cpu %d\n", f, pf, rg, rc);
                    exit(1);
                }
                size_t b0 = bad;
                for (int i = 0; i < LB_N; i++) {
                    bad += !gp_fmt_agree(pf, gp_pack_get(pf, side[0].param, (uint64_t)i),
                                         gp_pack_get(pf, side[1].param, (uint64_t)i));
                    bad += (side[0].codes[0][i] != side[1].codes[0][i]) + (side[0].codes[1][i] != side[1].codes[1][i]);
                }
                for (size_t b = 0; b < LB_N / B; b++)
                    for (int k = 0; k < 2; k++)
                        bad += gp_f32_bits(side[0].scales[k][b]) != gp_f32_bits(side[1].scales[k][b]);
                n += 3 * (size_t)LB_N + 2 * (LB_N / B);
                if (skip)
                    bad += memcmp(before.param, side[0].param, sizeof before.param) != 0 ||
                           memcmp(before.codes, side[0].codes, sizeof before.codes) != 0 ||
                           memcmp(before.scales, side[0].scales, sizeof before.scales) != 0;
                if (bad != b0 && b0 == 0)
                    fprintf(stderr, "low-bit mismatch: state %s param %d grad %d wd %d evaluation %d step %d\n",
                            gp_lowbit_name((gp_lowbit)f), pf, gf, wd, ev, (int)t);
            }
            /* the host-only sqrt orders and stochastic rounding: refused by the device */
            int32_t no = 0;
            for (int h = 0; h < 4; h++) {
                gp_plugin_adamw_args q = lowbit_args(&side[0], f, pf, gf, wd, h < 3 ? host_only[h] : ev, 1, &no);
                if (h == 3)
                    q.rounding = GP_PLUGIN_STOCHASTIC;
                refused += gpu->adamw(&q) == 1;
                refusals++;
            }
        }
    printf("CUDA parity: low-bit optimizer states, %zu values compared (params, m and v codes, m and v scales: "
           "4 states x 3 param x 2 grad formats x 2 weight decays x 2 evaluations x %d steps and a skipped one): "
           "%zu mismatches; %zu of %zu host-only or stochastic configurations refused\n", n, LB_STEPS, bad,
           refused, refusals);
    return bad + (refusals - refused);
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
        for (int mode = 0; mode < gp_vocab_count(GP_VOCAB_RMODE); mode++) /* every mode of kernels/gp_vocab.h */
            for (int ftz = 0; ftz < (full ? 1 : 2); ftz++)
                for (uint64_t s = 0; s < 16; s++) {
                    uint32_t start = (uint32_t)(s << 28);
                    bad += run_range((gp_format)f, (gp_rmode)mode, ftz, start, chunk, bits, ev, nthreads);
                    total += chunk;
                }
    printf("CUDA parity: %zu conversions compared, %zu mismatches (%s)\n", total, bad,
           full ? "all 2^32 fp32 inputs per format and mode" : "sampled slices");
    bad += check_scaled();
    bad += check_lowbit();
    free(bits);
    free(ev);
    gp_error e = {""};
    const gp_plugin *second = gp_cuda_stage_open(gp_cuda_device_plugin(), &e);
    if (!second || gp_cuda_device_plugin()->memory != GP_PLUGIN_DEVICE || gp_cuda_backend()->memory != GP_PLUGIN_HOST ||
        second == gp_cuda_backend()) {
        fprintf(stderr, "staging the device kernels: %s\n", second ? "wrong tables" : e.msg);
        return 1;
    }
    bad += check_accumulate_many(second);
    gp_cuda_stage_close(second);
    gp_backend gpu, cpu;
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
    /* the low-bit states through the runner: examples/scenarios/adamw-8bit-state-tiny-grads.yaml
     * with each state (its tiny gradients underflow v; the runner's --compare checks every
     * param, m and v the cuda backend wrote against the CPU's) */
    for (int f = GP_LOWBIT_BNB8; f < GP_LOWBIT_COUNT; f++) {
        char yaml[1024];
        gp_scenario sc;
        gp_result r;
        snprintf(yaml, sizeof yaml,
                 "name: lowbit-%s\nseed: 13\ntensors:\n  - name: embed.weight\n    size: 4096\n"
                 "    grad: {dist: lognormal, scale: 1.0e-7, sigma: 1.0, outliers: {frac: 0.004, scale: 10000}}\n"
                 "batch: {microbatches: 1, tokens: 1}\nreduction: sum\nfullbatch: sum\n"
                 "optimizer: {lr: 1.0e-3, weight_decay: 0.01, state: %s}\nsteps: 10\n",
                 gp_lowbit_name((gp_lowbit)f), gp_lowbit_name((gp_lowbit)f));
        if (gp_scenario_load_string(yaml, strlen(yaml), "lowbit", &sc, &e) != 0 ||
            gp_run_scenario(&sc, &gpu, &cpu, &r, &e) != 0) {
            fprintf(stderr, "lowbit-%s: %s\n", gp_lowbit_name((gp_lowbit)f), e.msg);
            return 1;
        }
        printf("CUDA parity: %-30s %llu AdamW element mismatches against the CPU, %llu writes in skipped steps\n",
               sc.name, (unsigned long long)r.st.opt.mismatches, (unsigned long long)r.st.opt.skip_writes);
        bad += r.st.mismatches + r.st.opt.mismatches + r.st.opt.skip_writes;
        gp_result_free(&r);
        gp_scenario_free(&sc);
    }
    gp_backend_close(&gpu);
    gp_backend_close(&cpu);
    return bad ? 1 : 0;
}
