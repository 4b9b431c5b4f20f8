/* test_scaled_run.c — the runner's stored gradients in a scaled format whose scale spans
 * the runner's chunks of 16384 elements (per-tensor current scaling, 128x128 tiles of a
 * tensor's 2-D view `cols`, two-level NVFP4's tensor scale) equal the whole micro-batch
 * tensor quantized at once by gp_scaled_quantize (gradprec_quantize's tensor quantizer,
 * which tests/python/test_scaled_formats.py checks bit for bit against torchao and ml_dtypes),
 * bit for bit, for -j1 and -j2; so do the kinds whose blocks lie in one row (the 2-D view
 * changes nothing for them). The stored gradients are seen by a backend that is the CPU
 * emulation with its accumulate recorded; the inputs are replayed entries (exact: no
 * loss scale), so the fp32 gradient the runner quantizes is the entry itself. The run's
 * counts (stored non-zero gradients, underflows: a non-zero entry stored as zero) equal
 * those counted on the reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp_test.h"
#include "gp_test_dump.h"

#include "harness/run/gp_runner.h"
#include "reports/gp_report.h"
#include "harness/sources/gp_backend.h"
#include "harness/sources/gp_generate.h"
#include "kernels/cpu/gp_cpu_backend.h"
#include "kernels/gp_scaled_tensor.h"

#define ROWS 136
#define COLS 384
#define N (ROWS * COLS) /* 52224: chunks of 16384 end inside rows and inside 128x128 tiles */
#define STEPS 2
#define K 3

static const char *dir;
static float entries[STEPS][K][N];
static float stored[STEPS][K][N];
static uint32_t seen[STEPS][K][N / 16 + 1]; /* per 16 elements: recorded once */

static float acc_in[STEPS][K][N]; /* the accumulator a micro-batch is added to */

static int record(const gp_plugin_accumulate_args *a)
{
    for (int s = 0; s < STEPS; s++)
        if (a->stream == gp_stream_id(GP_STREAM_ACCUM_SR, 0, (uint64_t)s, a->microbatch)) {
            memcpy(&stored[s][a->microbatch][a->first_index], a->grad, a->n * sizeof(float));
            memcpy(&acc_in[s][a->microbatch][a->first_index], a->acc, a->n * sizeof(float));
            for (uint64_t i = a->first_index; i < a->first_index + a->n; i += 16)
                __atomic_fetch_add(&seen[s][a->microbatch][i / 16], 1, __ATOMIC_RELAXED);
        }
    return gp_cpu_backend()->accumulate(a);
}

/* xorshift64*: the test's own values, independent of the library's generators */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dull;
}

/* Entries: magnitudes log-uniform in [2^-30, 2^6) with random signs, and the cases of
 * issue 25 item 3 inside tiles and chunks: an all-zero 128x128 tile (tile 0 of micro-batch
 * 0 of step 0), one huge element (2^14) in a tile of tiny ones (tile 5: rows 128.., cols
 * 256..; its other elements ~2^-20, below the tile's smallest e4m3 step: underflow),
 * fp32 subnormals (row 3), the tensor's amax far from chunk 0 (element 50000, 2^12 in
 * step 1), and values on e4m3's rounding boundaries after scaling (exact multiples). */
static void make_entries(void)
{
    for (int s = 0; s < STEPS; s++)
        for (int k = 0; k < K; k++) {
            float *x = entries[s][k];
            for (int i = 0; i < N; i++) {
                uint64_t u = next_u64();
                double m = ldexp(1.0 + (double)(u >> 40) / 16777216.0, (int)((u >> 8) % 36) - 30);
                x[i] = (float)((u & 1) ? -m : m);
            }
            for (int r = 128; r < ROWS; r++)
                for (int c = 256; c < COLS; c++)
                    x[r * COLS + c] = (float)ldexp((r + c) % 2 ? 1.0 : -1.5, -20);
            x[130 * COLS + 300] = 16384.0f;
            for (int c = 0; c < COLS; c++)
                x[3 * COLS + c] = (float)ldexp(1.0 + c, -140); /* fp32 subnormals */
            if (s == 0 && k == 0)
                for (int r = 0; r < 128; r++)
                    for (int c = 0; c < 128; c++)
                        x[r * COLS + c] = 0.0f;
            if (s == 1)
                x[50000] = 4096.0f;
        }
}

static void write_dump(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/scaled.safetensors", dir);
    st_entry e[STEPS * K];
    static char names[STEPS * K][32];
    for (int s = 0; s < STEPS; s++)
        for (int k = 0; k < K; k++) {
            snprintf(names[s * K + k], sizeof names[0], "w/step%d/mb%d", s, k);
            e[s * K + k] = (st_entry){names[s * K + k], "F32", N, entries[s][k], N * sizeof(float)};
        }
    write_safetensors(path, e, STEPS * K);
}

/* Run the replayed scenario with precision `grad` and `acc` on the recording backend with
 * `threads` threads into *r. */
static void run_recorded(const char *grad, const char *acc, int threads, gp_result *r)
{
    char path[4200], text[1024];
    snprintf(path, sizeof path, "%s/scaled.yaml", dir);
    snprintf(text, sizeof text,
             "name: scaled-run\nseed: 7\ntensors:\n  - name: w\n    cols: %d\n"
             "    grad: {replay: scaled.safetensors, key: w}\n"
             "batch: {microbatches: %d, tokens: 4}\nreduction: sum\nfullbatch: sum\nsteps: %d\n"
             "precision: {grad: \"%s\", accumulator: \"%s\"}\noptimizer: {lr: 0.0, weight_decay: 0.0}\n",
             COLS, K, STEPS, grad, acc);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    gp_scenario sc;
    gp_error e = {""};
    if (gp_scenario_load_file(path, &sc, &e) != 0)
        fail_msg("%s / %s: %s", grad, acc, e.msg);
    gp_backend b;
    memset(&b, 0, sizeof b);
    b.table = *gp_cpu_backend();
    b.table.accumulate = record;
    b.table.accumulate_many = NULL;
    b.ops = &b.table;
    snprintf(b.label, sizeof b.label, "recorded cpu");
    memset(stored, 0xff, sizeof stored);
    memset(seen, 0, sizeof seen);
    gp_run_ctl ctl = {threads, NULL};
    if (gp_run_scenario_ctl(&sc, &ctl, &b, NULL, r, &e) != 0)
        fail_msg("%s / %s: run: %s", grad, acc, e.msg);
    gp_scenario_free(&sc);
    for (int s = 0; s < STEPS; s++)
        for (int k = 0; k < K; k++)
            for (int i = 0; i < N; i += 16)
                assert_int_equal(seen[s][k][i / 16], 1);
}

/* Run with precision.grad `format`; compare every stored gradient with the reference.
 * Returns the values compared. */
static uint64_t check_format(const char *format, int threads)
{
    gp_result r;
    run_recorded(format, "fp32", threads, &r);
    gp_scaled_cfg c;
    char why[192];
    assert_int_equal(gp_scaled_parse(format, &c, why, sizeof why), 0);
    static float want[N];
    uint64_t compared = 0, nonzero = 0, under = 0;
    for (int s = 0; s < STEPS; s++)
        for (int k = 0; k < K; k++) {
            /* gradprec_quantize's quantizer, with the runner's stream of random bits (the
             * API draws stream 0; RNE draws none) */
            gp_scaled_quantize(&c, ROWS, COLS, entries[s][k], want, NULL, NULL, NULL, 1.0f, 7,
                               gp_stream_id(GP_STREAM_SCALED_SR, 0, (uint64_t)s, (uint64_t)k), 0, NULL);
            for (int i = 0; i < N; i++) {
                uint32_t g, w;
                memcpy(&g, &stored[s][k][i], 4);
                memcpy(&w, &want[i], 4);
                if (g != w)
                    fail_msg("%s -j%d: step %d micro-batch %d element %d: stored %a, whole tensor %a", format,
                             threads, s, k, i, (double)stored[s][k][i], (double)want[i]);
                compared++;
                nonzero += want[i] != 0;
                under += entries[s][k][i] != 0 && want[i] == 0;
            }
        }
    assert_int_equal(r.tensors[0].st.stored_nonzero, nonzero);
    assert_int_equal(r.tensors[0].st.underflow, under);
    assert_true(under > 0); /* the tiny tile under its huge element, the subnormal row */
    gp_result_free(&r);
    return compared;
}

static void test_spanning_scales_equal_whole_tensor(void **state)
{
    (void)state;
    static const char *const formats[] = {
        "fp8_e4m3:current", "fp8_e5m2:current:pow2", "fp8_e4m3:current:nosat", "fp8_e4m3:current:sr",
        "fp8_e4m3:blockwise_128x128", "fp8_e5m2:blockwise_128x128:pow2", "fp8_e4m3:blockwise_128x128:sr",
        "nvfp4", "nvfp4:sr",
        /* blocks in one row: the 2-D view changes nothing */
        "fp8_e4m3:blockwise_1x128", "mxfp8_e4m3", "mxfp4:rceil", "nvfp4:single"};
    uint64_t total = 0;
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++)
        for (int j = 1; j <= 2; j++)
            total += check_format(formats[f], j);
    /* 13 formats x 2 thread counts x 2 steps x 3 micro-batches x 52224 elements */
    assert_int_equal(total, (uint64_t)13 * 2 * STEPS * K * N);
    printf("test_scaled_run: %llu stored gradients equal the whole tensor's quantization bit for bit\n",
           (unsigned long long)total);
}

/* precision.accumulator "fp8_e4m3:current" (and e5m2 with :pow2): after every
 * micro-batch the running sum (fp32: acc + stored gradient, round to nearest even) is
 * re-quantized from the whole tensor's amax. The reference: the test's own fp32 sums of
 * the entries, quantized as one 1 x 52224 tensor by gp_scaled_quantize after each
 * micro-batch; the accumulator the backend is handed for micro-batches 1 and 2 must equal
 * it bit for bit (it spans 4 chunks: the amax of the sum is the runner's amax pass's). */
static void test_scaled_accumulator_whole_tensor(void **state)
{
    (void)state;
    static const char *const accs[] = {"fp8_e4m3:current", "fp8_e5m2:current:pow2"};
    static float ref[N];
    uint64_t compared = 0;
    for (size_t a = 0; a < 2; a++)
        for (int j = 1; j <= 2; j++) {
            gp_result r;
            run_recorded("fp32", accs[a], j, &r);
            gp_scaled_cfg c;
            char why[192];
            assert_int_equal(gp_scaled_parse(accs[a], &c, why, sizeof why), 0);
            for (int s = 0; s < STEPS; s++) {
                memset(ref, 0, sizeof ref);
                for (int k = 0; k < K; k++) {
                    for (int i = 0; k > 0 && i < N; i++) {
                        if (memcmp(&acc_in[s][k][i], &ref[i], 4) != 0)
                            fail_msg("%s -j%d: step %d before micro-batch %d element %d: accumulator %a, "
                                     "reference %a", accs[a], j, s, k, i, (double)acc_in[s][k][i], (double)ref[i]);
                        compared++;
                    }
                    for (int i = 0; i < N; i++)
                        ref[i] = ref[i] + entries[s][k][i]; /* fp32 + fp32, round to nearest even */
                    gp_scaled_quantize(&c, 1, N, ref, ref, NULL, NULL, NULL, 1.0f, 0, 0, 0, NULL);
                }
            }
            gp_result_free(&r);
        }
    assert_int_equal(compared, (uint64_t)2 * 2 * STEPS * (K - 1) * N);
    printf("test_scaled_run: %llu accumulator values equal the whole tensor re-quantized bit for bit\n",
           (unsigned long long)compared);
}

/* The attribution of a scaled accumulator, by hand. fp8_e4m3:current:pow2 (the
 * multiplier s = 2^floor(log2(448 / amax)): every scaling exact), one tensor of 3
 * elements, two micro-batches of one token, sum/sum, lr 0:
 *   micro-batch 0 adds [100, 1, 1e-4]: amax 100, s = 4 (448/100 = 4.48): 400 lies
 *     between e4m3's 384 and 416 (ulp 32), a tie: even 384 -> 96: rounding, error -4;
 *     4 -> 4 -> 1 exactly; 1e-4 * 4 = 4e-4 is below 2^-10, half of e4m3's smallest
 *     subnormal 2^-9: 0, underflow, error -1e-4 (the fp32 value);
 *   micro-batch 1 adds [0, 0.01, 0]: sums [96, fp32(1 + 0.01), 0], amax 96, s = 4:
 *     96 -> 384 exactly; 1.01 * 4 = 4.04 rounds to 4 (ulp 0.5 in [4, 8)) -> 1, the old
 *     value: absorbed, error -0.01 (the fp32 0.01 exactly: the exact sum is 1 + 0.01).
 * So: 1 underflow, 1 absorbed of 4 non-zero additions; the losses are each error over
 * ||g_full|| = ||[100, 1 + 0.01, 1e-4]||: rounding 4, underflow 1e-4, absorption 0.01. */
static void test_scaled_accumulator_by_hand(void **state)
{
    (void)state;
    char path[4200];
    static const float e0[3] = {100.0f, 1.0f, 1e-4f}, e1[3] = {0.0f, 0.01f, 0.0f};
    snprintf(path, sizeof path, "%s/hand.safetensors", dir);
    st_entry en[] = {{"w/step0/mb0", "F32", 3, e0, 12}, {"w/step0/mb1", "F32", 3, e1, 12}};
    write_safetensors(path, en, 2);
    snprintf(path, sizeof path, "%s/hand.yaml", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("name: hand\ntensors:\n  - name: w\n    grad: {replay: hand.safetensors, key: w}\n"
          "batch: {microbatches: 2, tokens: 1}\nreduction: sum\nfullbatch: sum\n"
          "precision: {grad: fp32, accumulator: \"fp8_e4m3:current:pow2\"}\n"
          "optimizer: {lr: 0.0, weight_decay: 0.0}\n", f);
    fclose(f);
    gp_scenario sc;
    gp_error e = {""};
    gp_backend b;
    gp_result r;
    if (gp_scenario_load_file(path, &sc, &e) != 0)
        fail_msg("%s", e.msg);
    assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
    assert_int_equal(gp_run_scenario(&sc, &b, NULL, &r, &e), 0);
    double a1 = 1.0 + (double)0.01f, full = sqrt(100.0 * 100.0 + a1 * a1 + (double)1e-4f * (double)1e-4f);
    assert_true(r.st.underflow == 1);
    assert_true(r.st.absorbed == 1);
    assert_true(r.st.adds_nonzero == 4);
    assert_true(r.loss[GP_MECH_ROUNDING] == 4.0 / full);
    assert_true(r.loss[GP_MECH_UNDERFLOW] == (double)1e-4f / full);
    assert_true(r.loss[GP_MECH_ABSORPTION] == (double)0.01f / full);
    assert_true(r.loss[GP_MECH_SATURATION] == 0);
    gp_result_free(&r);
    gp_backend_close(&b);
    gp_scenario_free(&sc);
}

/* A data-parallel run (2 ranks, each quantizing its own micro-batches with their own
 * amaxes: slots r * K + k) of generated gradients over 3 chunks: the metrics and losses
 * are the same bits for -j1 and -j3 (the amax pass's maxima are exact). */
static void test_spanning_distributed_any_j(void **state)
{
    (void)state;
    static const char *const grads[] = {"nvfp4:sr", "fp8_e4m3:blockwise_128x128", "fp8_e5m2:current"};
    for (size_t g = 0; g < 3; g++) {
        char text[512];
        snprintf(text, sizeof text,
                 "seed: 3\ntensors: [{name: w, size: 40960, cols: 256, grad: {dist: normal, scale: 1.0e-3}}]\n"
                 "batch: {accumulation_steps: 4, tokens: 64}\nsteps: 2\ndistributed: {world_size: 2}\n"
                 "precision: {grad: \"%s\", accumulator: fp32}\n", grads[g]);
        gp_result r[2];
        for (int j = 0; j < 2; j++) {
            gp_scenario sc;
            gp_error e = {""};
            gp_backend b;
            if (gp_scenario_load_string(text, strlen(text), "dist", &sc, &e) != 0)
                fail_msg("%s: %s", grads[g], e.msg);
            assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
            gp_run_ctl ctl = {j ? 3 : 1, NULL};
            if (gp_run_scenario_ctl(&sc, &ctl, &b, NULL, &r[j], &e) != 0)
                fail_msg("%s: run: %s", grads[g], e.msg);
            gp_backend_close(&b);
            gp_scenario_free(&sc);
        }
        assert_memory_equal(r[0].metric, r[1].metric, sizeof r[0].metric);
        assert_memory_equal(r[0].loss, r[1].loss, sizeof r[0].loss);
        assert_true(r[0].st.stored_nonzero > 0);
        gp_result_free(&r[0]);
        gp_result_free(&r[1]);
    }
}

/* grad_bias_score (docs/model.md, Systematic rounding bias of scaled gradients), by hand.
 * A replayed tensor of BN elements whose entries are the same in each of BK micro-batches
 * (one step, reduction sum, no loss scale: the exact gradient is the entry), stored in
 * four formats where round to nearest errs by a quarter of its cell the same way every
 * time:
 *  - mxfp4 (floor): every entry 4.5; a block's amax 4.5 = 1.001b x 2^2 gives X = 2^(2 - 2)
 *    = 1; 4.5 lies in e2m1's cell [4, 6] (Delta 2, f = 1/4) and rounds to 4: error -1/2;
 *  - nvfp4:single: 15 entries 2.25 and one 6 per block of 16; amax 6 gives the e4m3 scale
 *    6 / 6 = 1, the multiplier fp32(1 / 1) = 1; 2.25 lies in [2, 3] (Delta 1, f = 1/4) and
 *    rounds to 2: error -1/4; 6 is a code (no cell: Delta 0, error 0);
 *  - fp8_e4m3:delayed: every entry 1.03125 = 1 + 2^-5; the first step's multiplier is 1
 *    (Transformer Engine's initial scale); it lies in e4m3's cell [1, 1.125] (Delta 2^-3,
 *    f = 1/4) and rounds to 1: error -2^-5;
 *  - fp8_e4m3:blockwise_1x128: 127 entries 1.03125 and one 448 per block of 128: s = 448 /
 *    448 = 1, the dequantization's fp32(1 / s) = 1: the delayed case's cells; 448 exact.
 * Per element with a cell: S = BK e, V = BK Delta^2 / 4, so S^2 / V = 4 BK (e / Delta)^2 =
 * BK / 4; the sums below are exact binary values. D per rounding (bias_note): |mu - x| = 0
 * (mu = lo + Delta / 4 = x), plus 2^-32 Delta + 2^-51 (|lo| + Delta + |e| + |x|); the exact
 * value v adds 2^-51 (v + v). Then the score by the bound of gp_verdict.c with L = ln 1e9:
 * mxfp4 1.689, nvfp4 1.681, e4m3 delayed 1.689, 1x128 1.688 > 1 (flagged, a note naming
 * the tensor and :sr).
 * With :sr the same cells are rounded up with probability 1/4: E S^2 = BK Delta^2 f (1 - f)
 * = V x 3/4, a score near sqrt(3/4) x 1.689 / 2 = 0.73, and the derived bound says above
 * 1 only with probability 1e-9: not flagged, no note. 4 x 1024 x 16 = 65536 roundings each. */
#define BN 1024
#define BK 16
static void test_grad_bias_by_hand(void **state)
{
    (void)state;
    static const struct {
        const char *grad;
        double x, lo, delta; /* the entry, its cell's lower value (toward zero), the width */
        int exact_every;     /* every this many elements an exact value (0: none) */
        double exact;        /* ... that value: it sets the block's amax */
    } cases[] = {{"mxfp4", 4.5, 4.0, 2.0, 0, 0}, {"nvfp4:single", 2.25, 2.0, 1.0, 16, 6.0},
                 {"fp8_e4m3:delayed", 1.03125, 1.0, 0.125, 0, 0},
                 {"fp8_e4m3:blockwise_1x128", 1.03125, 1.0, 0.125, 128, 448.0}};
    static float ent[BN];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        for (int i = 0; i < BN; i++)
            ent[i] = (float)(cases[c].exact_every && i % cases[c].exact_every == 0 ? cases[c].exact : cases[c].x);
        char path[4200], names[BK][32];
        st_entry en[BK];
        for (int k = 0; k < BK; k++) {
            snprintf(names[k], sizeof names[k], "w/step0/mb%d", k);
            en[k] = (st_entry){names[k], "F32", BN, ent, sizeof ent};
        }
        snprintf(path, sizeof path, "%s/bias%zu.safetensors", dir, c);
        write_safetensors(path, en, BK);
        for (int sr = 0; sr < 2; sr++) {
            char text[1024];
            snprintf(text, sizeof text,
                     "name: bias\ntensors:\n  - name: w\n    grad: {replay: %s/bias%zu.safetensors, key: w}\n"
                     "batch: {microbatches: %d, tokens: 1}\nreduction: sum\nfullbatch: sum\n"
                     "precision: {grad: \"%s%s\", accumulator: fp32}\noptimizer: {lr: 0.0, weight_decay: 0.0}\n",
                     dir, c, BK, cases[c].grad, sr ? ":sr" : "");
            gp_scenario sc;
            gp_error e = {""};
            gp_backend b;
            gp_result r;
            if (gp_scenario_load_string(text, strlen(text), "bias", &sc, &e) != 0)
                fail_msg("%s: %s", cases[c].grad, e.msg);
            assert_int_equal(gp_backend_open("cpu", &b, &e), 0);
            if (gp_run_scenario(&sc, &b, NULL, &r, &e) != 0)
                fail_msg("%s: run: %s", cases[c].grad, e.msg);
            const gp_stats *st = &r.st;
            int ncell = cases[c].exact_every ? BN - BN / cases[c].exact_every : BN; /* elements with a cell */
            double dl = cases[c].delta, v = BK * dl * dl / 4, err = -dl / 4;
            assert_true(st->qb_n == (uint64_t)BN * BK); /* every rounding has a cell or is exact */
            assert_true(st->qb_v == ncell * v);
            assert_true(st->qb_v2 == ncell * v * v);
            assert_true(st->qb_vmax == v);
            /* D: |e| = Delta / 4 under round to nearest; under :sr 1/4 or 3/4 of Delta, so the
             * sum lies between the two (the binary64 sums: within 1e-12) */
            double d6 = BK * 0x1p-51 * 2 * cases[c].exact, d2 = 0, d2hi = 0;
            for (int up = 0; up < 2; up++) {
                double dep = 0x1p-32 * dl + 0x1p-51 * (cases[c].lo + dl + (up ? dl + err : -err) + cases[c].x);
                *(up ? &d2hi : &d2) = ncell * (BK * dep) * (BK * dep) + (BN - ncell) * d6 * d6;
            }
            if (!(st->qb_d2 >= d2 * (1 - 1e-12) && st->qb_d2 <= (sr ? d2hi : d2) * (1 + 1e-12)))
                fail_msg("%s%s: sum D^2 %.17g, by hand %.17g (..%.17g)", cases[c].grad, sr ? ":sr" : "", st->qb_d2,
                         d2, d2hi);
            double L = log(1e9), M = ncell * v, W = ncell * v * v;
            double bound = sqrt(M + fmax(sqrt(8 * W * L), 8 * v * L)) + sqrt(d2);
            double score = r.metric[GP_M_GRAD_BIAS_SCORE];
            assert_true(r.tensors[0].metric[GP_M_GRAD_BIAS_SCORE] == score);
            gp_notes nt;
            gp_report_notes(&sc, &r, &nt);
            int noted = 0;
            for (int k = 0; k < nt.n; k++)
                noted += strstr(nt.text[k], "systematic rounding bias") && strstr(nt.text[k], "gradients of w (") &&
                         strstr(nt.text[k], "use :sr");
            gp_notes_free(&nt);
            if (!sr) { /* round to nearest: S = BK err exactly, the score by hand */
                assert_true(st->qb_ss == ncell * (BK * err) * (BK * err));
                double want = sqrt(ncell * (BK * err) * (BK * err)) / bound;
                if (!(fabs(score - want) <= 1e-12 * want) || !(score > 1.6))
                    fail_msg("%s: grad_bias_score %.17g, by hand %.17g", cases[c].grad, score, want);
                assert_int_equal(noted, 1);
            } else { /* stochastic rounding: below the derived bound, no note */
                if (!(score < 1.0) || !(score > 0.5))
                    fail_msg("%s:sr: grad_bias_score %.17g: unbiased rounding stays below 1", cases[c].grad, score);
                assert_int_equal(noted, 0);
            }
            printf("test_scaled_run: %s%s: grad_bias_score %.4g over %d roundings (%s)\n", cases[c].grad,
                   sr ? ":sr" : "", score, BN * BK, sr ? "below the bound" : "by hand, flagged");
            gp_result_free(&r);
            gp_backend_close(&b);
            gp_scenario_free(&sc);
        }
    }
}

int main(int argc, char **argv)
{
    dir = argc > 1 ? argv[1] : ".";
    make_entries();
    write_dump();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spanning_scales_equal_whole_tensor),
        cmocka_unit_test(test_scaled_accumulator_whole_tensor),
        cmocka_unit_test(test_scaled_accumulator_by_hand),
        cmocka_unit_test(test_spanning_distributed_any_j),
        cmocka_unit_test(test_grad_bias_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
