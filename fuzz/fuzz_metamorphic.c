/* fuzz_metamorphic.c — libFuzzer target: relations that hold exactly, whatever the
 * numbers, on the accumulate kernel and on the exact references. The input decodes as
 * for the accumulate target (gp_decode_accum, so `gradprec repro --target accumulate`
 * shows it); the loss-scale exponent, the token counts and the permutation are drawn
 * from the case's seed (Philox stream "meta").
 *  (a) Power-of-two loss-scale invariance (RNE and RTZ): accumulating x_k * 2^e and
 *      unscaling by 2^-e gives the bits of accumulating x_k, provided no rounding of
 *      either run meets the subnormal range or overflows: no UNDERFLOW, OVERFLOW or
 *      INVALID event (gp_accum_step reports those of its stores; its fp32 opmath adds
 *      are exact whenever their result is below 2^-126), no subnormal addend or
 *      accumulator, every value finite. Then every rounding is of a normal value, and
 *      round(2^e z) = 2^e round(z) for RNE and RTZ; the unscale multiplies a normal
 *      value by a power of two exactly. So a difference is a kernel bug.
 *  (b) Exact references (reference/gp_exact.h), with per-token-mean gradients m_k =
 *      x_k and token counts n_k (N = sum n_k):
 *      - token_mean = sum_k (n_k m_k / N), summed in GMP rationals, equals the
 *        full-batch mean (sum_k n_k m_k) / N from gp_fixacc, rounded to binary64 with
 *        the same sticky sign; and the fixacc holds exactly sum n_k m_k * 2^149;
 *      - with equal n_k = n and A = K, the `mean` reduction (sum m_k) / K equals the
 *        token mean (sum n m_k) / (n K) exactly (bits and sticky);
 *      - exact sums do not depend on the order: gp_fixacc over a permutation has the
 *        same limbs; gp_exactsum (binary64 plus spill) gives the same rounded results
 *        over the given order, a permutation and the reverse (3 lanes in one call:
 *        the vector path and its tail), all equal to the fixacc's.
 *  (c) An fp32 collective of exactly representable partial sums is exact
 *      (docs/distributed.md): W = 2, 4 or 8 ranks, K = 1..4 micro-batches, token counts
 *      1..1000, constant gradients +-2^e (e in [-40, 40], random signs), reduction sum,
 *      any collective, average (predivide 2), bucket and no_sync, all drawn from the case's
 *      seed: every x = +-n 2^e has at most 10 significant bits, every partial sum of at
 *      most 32 of them is a multiple of 2^e below 2^(e+15): exact in fp32, and divisions
 *      by powers of two are exact, so collective_rel_err and grad_rel_err_rounding must be
 *      exactly 0 and nothing absorbed or overflowed. (World size 1 in the accumulator's
 *      dtype is the one-process run by construction: gp_scenario_distributed is false.)
 *  (d) A partial last window under every reduction (DESIGN.md section 3), judged against
 *      the exact full batch of the tokens actually seen: a scenario S of K micro-batches
 *      in a window of A > K (A in 2..16, K in 1..A-1; token counts 1..4096, equal in half
 *      the cases; reduction, full-batch meaning, dtypes, rounding, tensor size and
 *      gradient scale drawn from the case's seed) run on the CPU backend, and its twin S'
 *      whose window is exactly the K micro-batches seen (accumulation_steps = K):
 *      - every reduction: the exact full-batch gradient depends only on the tokens seen,
 *        so ss_full of S and S' are the same bits;
 *      - token_mean (S_k / N), mean_no_div (S_k / n_k) and sum (S_k) never divide by A:
 *        S and S' are the same computation, so every metric and every sum of squares is
 *        the same bits;
 *      - mean divides by n_k A instead of n_k K: g_same(S) = (K/A) g_same(S') element by
 *        element, each a correctly rounded binary64 quotient of the same exact sum T_i
 *        (fl(T_i/A), fl(T_i/K): relative errors d1, d2 <= u = 2^-53); each ss is a sum of
 *        n rounded squares (any order: relative error <= gamma_n = nu/(1-nu)), so
 *        |A^2 ss_same(S) - K^2 ss_same(S')| <= ((1+u)^3 (1+gamma_n) / ((1-u)^3 (1-gamma_n))
 *        - 1) K^2 ss_same(S') < (2n + 8) u K^2 ss_same(S') (the A^2, K^2 products: one
 *        rounding each; second-order terms covered by the margin of 2u);
 *      - the exact normalization relation: with g_full = t (t_i = T_i / N, or T_i when
 *        the full-batch loss is a sum), g_same = c t for a constant c the semantics fix:
 *        full-batch mean: token_mean 1, mean K/A (equal token counts), mean_no_div K
 *        (equal counts), sum N; full-batch sum: token_mean 1/N, mean 1/(n A), mean_no_div
 *        1/n (equal counts n), sum 1. normalization_rel_err = ||g_same - g_full|| /
 *        ||g_full|| must be |c - 1|: exactly 0 for c = 1 (the same rounded quotient);
 *        otherwise each s_i - f_i = (c - 1) t_i (1 + e_i) with |e_i| <= ((c + 1)/|c - 1| +
 *        1) u + O(u^2), the two sums of squares add gamma_n each (half of it after the
 *        square root), the square roots and the division u each: within
 *        2 ((c + 1)/|c - 1| + n + 8) u relatively (the factor 2 covers the second-order
 *        terms).
 *      - mean with A = 2^a (half the cases draw one) and fp32/bf16 gradients and
 *        accumulators: each stored gradient S_k / (n_k A) is exactly m_k / 2^a, the
 *        mean_no_div one (S_k / n_k = m_k) times 2^-a, and every non-zero value
 *        stays above 2^-126 after the scaling (the generator's normal deviates are at
 *        least about 2^-53 in magnitude, u = (j + 1/2) 2^-53: gradients of scale >= 2^-30
 *        are at least 2^-83, every sum of them a multiple of a quantum >= 2^-106, divided by
 *        at most 16) and far below overflow, so every rounding of the accumulation (RNE, RTZ, Kahan, stochastic: the
 *        same dropped bits, the same random bits) commutes with the scaling: g_acc and
 *        g_same of S are mean_no_div's times 2^-a element by element, and their sums of
 *        squares (binary64, far from underflow) times 4^-a, bit for bit;
 *      A harness that normalises a partial window by the window instead of the tokens seen
 *      (or the reverse) breaks one of these.
 * Features: the mechanisms of run (a) x the bucket of the normalization divergence
 * |mean - token_mean| / |token_mean| (what the `mean` reduction loses with these token
 * counts), and which relations could be checked. */
#include <gmp.h>
#include <math.h>
#include <string.h>

#include "harness/sources/gp_backend.h"
#include "harness/scenario/gp_decode.h"
#include "harness/run/gp_runner.h"
#include "gp_fuzz_check.h"
#include "kernels/gp_names.h"
#include "kernels/gp_vocab.h"
#include "kernels/arith/gp_philox.h"
#include "reference/gp_exact.h"

#define META_STREAM 0x6d657461ull /* "meta" */

GP_FUZZ_COUNTERS counters[GP_FUZZ_NMECH * GP_FUZZ_BUCKETS + 8];

static uint32_t draw(const gp_accum_case *c, uint64_t i)
{
    return gp_rand_u32(c->seed, META_STREAM, i);
}

/* (a) Returns 1 when the relation could be checked; *mech receives what fired. */
static int check_scale_invariance(const gp_accum_case *c, unsigned *mech)
{
    if (c->rounding != GP_ACC_RNE && c->rounding != GP_ACC_RTZ)
        return 0;
    uint32_t w = draw(c, 0);
    int e = (w & 1u) ? (int)((w >> 1) % 33u) - 16 : (int)((w >> 1) % 253u) - 126; /* 2^e, 2^-e normal fp32 */
    double scale = ldexp(1.0, e);
    const gp_format af = c->acc, gf = c->grad;
    uint32_t a0 = 0, a1 = 0, c0 = 0, c1 = 0;
    unsigned ev0 = 0, ev1 = 0;
    int ok = 1;
    for (int k = 0; k < c->n; k++) {
        double x = gp_fmt_to_f64(gf, c->bits[k]);
        if (!isfinite(x) || gp_fuzz_is_subnormal(gf, c->bits[k])) {
            *mech |= isfinite(x) ? GP_FUZZ_SUBNORMAL : GP_FUZZ_OVERFLOW;
            return 0;
        }
        unsigned evs = 0;
        uint32_t yb = gp_fmt_from_f64(gf, x * scale, GP_RNE, 0, 0, &evs); /* x * 2^e is exact in binary64 */
        if (evs || gp_fuzz_is_subnormal(gf, yb))
            ok = 0; /* the scaled grad is not exactly a normal value of gf */
        a0 = gp_accum_step(af, c->rounding, c->ftz, a0, &c0, (float)x, 0, &ev0);
        if (ok)
            a1 = gp_accum_step(af, c->rounding, c->ftz, a1, &c1, gp_f32_from_bits(gp_fmt_to_f32_bits(gf, yb)), 0,
                               &ev1);
        if (gp_fuzz_is_subnormal(af, a0) || gp_fuzz_is_subnormal(af, a1))
            *mech |= GP_FUZZ_SUBNORMAL;
        if (gp_fmt_isinf(af, a0) || gp_fmt_isnan(af, a0) || gp_fmt_isinf(af, a1) || gp_fmt_isnan(af, a1))
            *mech |= GP_FUZZ_OVERFLOW;
    }
    *mech |= gp_fuzz_mech_of_events(ev0);
    if (!ok || ((ev0 | ev1) & (GP_EV_UNDERFLOW | GP_EV_OVERFLOW | GP_EV_INVALID)) ||
        (*mech & (GP_FUZZ_SUBNORMAL | GP_FUZZ_OVERFLOW)))
        return 0;
    int found_inf = 0;
    unsigned evu = 0;
    uint32_t back = gp_unscale_step(af, c->ftz, a1, (float)(1.0 / scale), &found_inf, &evu);
    GP_FUZZ_CHECK(back == a0 && !found_inf,
                  "acc %s grad %s rounding %s ftz %d n %d seed %llu scale 2^%d: unscaled accumulation "
                  "0x%x (%a), scaled-then-unscaled 0x%x (%a; scaled acc 0x%x, events 0x%x/0x%x/0x%x)",
                  gp_format_name(af), gp_format_name(gf), c->rounding == GP_ACC_RNE ? "rne" : "rtz", c->ftz,
                  c->n, (unsigned long long)c->seed, e, a0, gp_fmt_to_f64(af, a0), back, gp_fmt_to_f64(af, back),
                  a1, ev0, ev1, evu);
    return 1;
}

static void check_same(const char *what, double a, int sa, double b, int sb, const gp_accum_case *c)
{
    GP_FUZZ_CHECK(gp_f64_bits(a) == gp_f64_bits(b) && sa == sb,
                  "%s: %a (sticky %d) != %a (sticky %d); grad %s n %d seed %llu", what, a, sa, b, sb,
                  gp_format_name(c->grad), c->n, (unsigned long long)c->seed);
}

/* (b) Returns the normalization divergence |mean - token_mean| / |token_mean|, or -1
 * when an addend is not finite (nothing checked). */
static double check_references(const gp_accum_case *c, int *equal_checked)
{
    int n = c->n;
    float m[GP_DECODE_MAX_ADDENDS];
    uint32_t tok[GP_DECODE_MAX_ADDENDS];
    int perm[GP_DECODE_MAX_ADDENDS];
    int equal = (draw(c, 1) & 3u) == 0; /* 1 in 4: every micro-batch has the same count */
    uint64_t N = 0;
    for (int k = 0; k < n; k++) {
        m[k] = gp_f32_from_bits(gp_fmt_to_f32_bits(c->grad, c->bits[k]));
        if (!isfinite(m[k]))
            return -1;
        uint32_t w = draw(c, equal ? 2 : 2 + (uint64_t)k);
        tok[k] = (w >> 28) == 0xfu ? (w & 0x7fffffffu) | (1u << 29) /* huge: the spill path */
                                   : 1u + (w % 4096u);
        N += tok[k];
        perm[k] = k;
    }
    for (int k = n - 1; k > 0; k--) { /* Fisher-Yates */
        int j = (int)(draw(c, 100 + (uint64_t)k) % (uint32_t)(k + 1));
        int t = perm[k];
        perm[k] = perm[j];
        perm[j] = t;
    }

    gp_fixacc F, P, Fm;
    gp_fixacc_zero(&F);
    gp_fixacc_zero(&P);
    gp_fixacc_zero(&Fm);
    double es[3] = {0, 0, 0}, ew[3] = {0, 0, 0};
    gp_fixacc sp[3], spw[3];
    memset(sp, 0, sizeof sp);
    memset(spw, 0, sizeof spw);
    mpq_t tm, sum, t;
    mpq_inits(tm, sum, t, NULL);
    for (int k = 0; k < n; k++) {
        int j = perm[k], r = n - 1 - k;
        gp_fixacc_add(&F, m[k], tok[k]);
        gp_fixacc_add(&P, m[j], tok[j]);
        gp_fixacc_add(&Fm, m[k], 1);
        float lanes[3] = {m[k], m[j], m[r]};
        gp_exactsum_add(es, sp, lanes, 1, 3);        /* unit weights, 3 lanes */
        gp_exactsum_add(&ew[0], &spw[0], &m[k], tok[k], 1); /* token weights, lane by lane */
        gp_exactsum_add(&ew[1], &spw[1], &m[j], tok[j], 1);
        gp_exactsum_add(&ew[2], &spw[2], &m[r], tok[r], 1);
        mpq_set_d(t, (double)m[k]);
        mpz_mul_ui(mpq_numref(t), mpq_numref(t), tok[k]);
        mpq_canonicalize(t); /* t = n_k m_k */
        mpq_add(sum, sum, t);
        mpz_mul_ui(mpq_denref(t), mpq_denref(t), (unsigned long)N);
        mpq_canonicalize(t); /* t = n_k m_k / N: the token_mean term of micro-batch k */
        mpq_add(tm, tm, t);
    }

    /* the fixacc holds sum n_k m_k * 2^149 exactly */
    mpz_t z, want;
    mpz_inits(z, want, NULL);
    gp_fixacc_get_mpz(z, &F);
    mpz_mul_2exp(want, mpq_numref(sum), 149);
    GP_FUZZ_CHECK(mpz_divisible_p(want, mpq_denref(sum)), "sum n_k m_k is not a multiple of 2^-149");
    mpz_divexact(want, want, mpq_denref(sum));
    GP_FUZZ_CHECK(mpz_cmp(z, want) == 0, "gp_fixacc: sum n_k m_k wrong (n %d seed %llu)", n,
                  (unsigned long long)c->seed);
    GP_FUZZ_CHECK(memcmp(F.limb, P.limb, sizeof F.limb) == 0, "gp_fixacc depends on the order (n %d seed %llu)",
                  n, (unsigned long long)c->seed);

    int s1, s2;
    double full = gp_fixacc_div(&F, N, &s1);
    double tq = gp_exact_q_nearest(tm, &s2);
    check_same("token_mean (mpq, term by term) vs full-batch mean (fixacc)", tq, s2, full, s1, c);
    double total = gp_fixacc_div(&Fm, 1, &s1);
    for (int l = 0; l < 3; l++) {
        double v = gp_exactsum_div(es[l], &sp[l], 1, &s2);
        check_same("gp_exactsum (unit weights, lane) vs gp_fixacc", v, s2, total, s1, c);
    }
    double fullw = gp_fixacc_div(&F, N, &s1);
    for (int l = 0; l < 3; l++) {
        double v = gp_exactsum_div(ew[l], &spw[l], N, &s2);
        check_same("gp_exactsum (token weights) / N vs gp_fixacc", v, s2, fullw, s1, c);
    }
    int sm;
    double mean = gp_fixacc_div(&Fm, (uint64_t)n, &sm); /* (1/K) sum_k S_k/n_k with S_k = n_k m_k */
    *equal_checked = equal;
    if (equal) {
        int st;
        double tmean = gp_fixacc_div(&F, (uint64_t)tok[0] * (uint64_t)n, &st);
        check_same("mean reduction (equal tokens) vs token_mean", mean, sm, tmean, st, c);
    }
    mpz_clears(z, want, NULL);
    mpq_clears(tm, sum, t, NULL);
    return full != 0 ? fabs(mean - full) / fabs(full) : (mean != 0 ? INFINITY : 0.0);
}

/* The CPU backend that checks (c) and (d) run scenarios on, opened on first use and kept
 * open for the fuzzer's life. */
static const gp_backend *cpu_backend(void)
{
    static gp_backend cpu;
    static int opened;
    if (!opened) {
        gp_error e = {""};
        GP_FUZZ_CHECK(gp_backend_open("cpu", &cpu, &e) == 0, "%s", e.msg);
        opened = 1;
    }
    return &cpu;
}

/* (c) Returns 1 when the relation was checked. */
static int check_collective_exact(const gp_accum_case *c)
{
    const gp_backend *cpu = cpu_backend();
    gp_error e = {""};
    static const char *const coll[] = {"ring", "tree", "reduce_scatter"}, *const avg[] = {"pre", "post", "op"};
    uint64_t i = 16;
    int W = 1 << (1 + (int)(draw(c, i++) % 3)), K = 1 + (int)(draw(c, i++) % 4);
    char tok[512] = "", text[1024];
    size_t used = 0;
    for (int r = 0; r < W; r++) {
        used += (size_t)snprintf(tok + used, sizeof tok - used, "%s[", r ? ", " : "");
        for (int k = 0; k < K; k++)
            used += (size_t)snprintf(tok + used, sizeof tok - used, "%s%u", k ? ", " : "", 1 + draw(c, i++) % 1000);
        used += (size_t)snprintf(tok + used, sizeof tok - used, "]");
    }
    const char *a = avg[draw(c, i++) % 3];
    snprintf(text, sizeof text,
             "tensors: [{name: g, size: 64, grad: {dist: constant, scale: %a, sign: 0.5}}]\n"
             "seed: %u\nbatch: {microbatches: %d}\nreduction: sum\nfullbatch: sum\n"
             "distributed: {world_size: %d, collective: %s, average: %s, %s no_sync: %s, bucket_elements: %u, "
             "tokens: [%s]}\n",
             ldexp(1.0, (int)(draw(c, i) % 81) - 40), draw(c, i + 1), K, W, coll[draw(c, i + 2) % 3], a,
             a[1] == 'r' ? "predivide: 2," : "", draw(c, i + 3) % 2 ? "true" : "false", 1 + draw(c, i + 4) % 100, tok);
    gp_scenario s;
    gp_result r;
    GP_FUZZ_CHECK(gp_scenario_load_string(text, strlen(text), "meta", &s, &e) == 0, "%s\n%s", e.msg, text);
    GP_FUZZ_CHECK(gp_run_scenario(&s, cpu, NULL, &r, &e) == 0, "%s", e.msg);
    GP_FUZZ_CHECK(r.metric[GP_M_COLLECTIVE_REL_ERR] == 0.0 && r.metric[GP_M_GRAD_REL_ERR_ROUNDING] == 0.0 &&
                      r.st.coll.absorbed == 0 && r.st.coll.overflow == 0,
                  "an fp32 collective of exact partial sums lost %a:\n%s", r.metric[GP_M_COLLECTIVE_REL_ERR], text);
    gp_result_free(&r);
    gp_scenario_free(&s);
    return 1;
}

/* (d) Returns the reduction checked (0..3). */
static int check_partial_window(const gp_accum_case *c)
{
    const gp_backend *cpu = cpu_backend();
    gp_error e = {""};
    static const char *const red[] = {"token_mean", "mean", "mean_no_div", "sum"}, *const fb[] = {"mean", "sum"};
    static const char *const gf[] = {"fp32", "bf16", "fp16"}, *const af[] = {"fp32", "bf16"};
    /* the policies this relation holds for, in the decoder's order (names: kernels/gp_vocab.h) */
    static const gp_acc_rounding rnd[] = {GP_ACC_RNE, GP_ACC_KAHAN, GP_ACC_RTZ, GP_ACC_STOCHASTIC};
    uint64_t i = 1000;
    uint32_t wa = draw(c, i++);
    int A = (wa & 1u) ? 2 << ((wa >> 1) % 4) : 2 + (int)((wa >> 1) % 15); /* half: a power of two */
    int K = 1 + (int)(draw(c, i++) % (uint32_t)(A - 1));
    int R = (int)(draw(c, i++) % 4), F = (int)(draw(c, i++) % 2), equal = (int)(draw(c, i++) % 2);
    int a = (int)(draw(c, i++) % 2), g = (int)(draw(c, i++) % 3), ro = (int)(draw(c, i++) % (a == 1 ? 4 : 3));
    int size = 1 + (int)(draw(c, i++) % 200), ex = (int)(draw(c, i++) % 41) - 30;
    unsigned sd = draw(c, i++);
    char tok[16 * 12 + 4] = "", text[1024];
    size_t used = 0;
    uint64_t N = 0;
    uint32_t n0 = 1 + draw(c, i) % 4096;
    for (int k = 0; k < K; k++) {
        uint32_t nk = equal ? n0 : 1 + draw(c, i + 1 + (uint64_t)k) % 4096;
        N += nk;
        used += (size_t)snprintf(tok + used, sizeof tok - used, "%s%u", k ? ", " : "", nk);
    }
    /* mean with A = 2^a and fp32/bf16 gradients: a third run, mean_no_div (below) */
    int pow2 = (A & (A - 1)) == 0 && R == 1 && g < 2;
    gp_result r[3];
    for (int twin = 0; twin < 2 + pow2; twin++) { /* S: window A; S': window K; mean_no_div */
        snprintf(text, sizeof text,
                 "tensors: [{name: g, size: %d, grad: {dist: normal, scale: %a}}]\n"
                 "seed: %u\nbatch: {accumulation_steps: %d, microbatches: %d, tokens: [%s]}\n"
                 "reduction: %s\nfullbatch: %s\nprecision: {grad: %s, accumulator: %s, rounding: %s}\n",
                 size, ldexp(1.0, ex), sd, twin == 1 ? K : A, K, tok, red[twin == 2 ? 2 : R], fb[F], gf[g], af[a],
                 gp_vocab_name(GP_VOCAB_ACC_ROUNDING, (int)rnd[ro]));
        gp_scenario s;
        GP_FUZZ_CHECK(gp_scenario_load_string(text, strlen(text), "meta", &s, &e) == 0, "%s\n%s", e.msg, text);
        GP_FUZZ_CHECK(gp_run_scenario(&s, cpu, NULL, &r[twin], &e) == 0, "%s\n%s", e.msg, text);
        gp_scenario_free(&s);
    }
    const gp_stats *p = &r[0].st, *w = &r[1].st;
    GP_FUZZ_CHECK(gp_f64_bits(p->ss_full) == gp_f64_bits(w->ss_full),
                  "partial window: the full batch of the tokens seen depends on the window (A %d, K %d): "
                  "ss_full %a vs %a\n%s", A, K, p->ss_full, w->ss_full, text);
    if (R != 1) { /* no division by A: the same computation */
        const double a0[] = {p->ss_same, p->ss_acc, p->ss_acc_full, p->ss_acc_same, p->ss_same_full};
        const double a1[] = {w->ss_same, w->ss_acc, w->ss_acc_full, w->ss_acc_same, w->ss_same_full};
        for (int j = 0; j < 5; j++)
            GP_FUZZ_CHECK(gp_f64_bits(a0[j]) == gp_f64_bits(a1[j]),
                          "partial window (%s, A %d, K %d): sum of squares %d differs from the window of the "
                          "tokens seen: %a vs %a\n%s", red[R], A, K, j, a0[j], a1[j], text);
        for (int m = 0; m < GP_NMETRICS; m++)
            GP_FUZZ_CHECK(gp_f64_bits(r[0].metric[m]) == gp_f64_bits(r[1].metric[m]),
                          "partial window (%s, A %d, K %d): %s %a vs %a in the window of the tokens seen\n%s",
                          red[R], A, K, gp_metric_name((gp_metric)m), r[0].metric[m], r[1].metric[m], text);
    } else {
        double u = 0x1p-53, lhs = (double)A * A * p->ss_same, rhs = (double)K * K * w->ss_same;
        GP_FUZZ_CHECK(fabs(lhs - rhs) <= (2.0 * size + 8) * u * rhs,
                      "partial window (mean, A %d, K %d): A^2 ss_same %a != K^2 ss_same' %a\n%s", A, K, lhs, rhs,
                      text);
    }
    /* the normalization relation: c where the semantics fix it (mean, mean_no_div: equal counts) */
    double cst = -1, Nd = (double)N, nd = (double)n0;
    if (F == 0)
        cst = R == 0 ? 1.0 : R == 1 ? (equal ? (double)K / A : -1) : R == 2 ? (equal ? (double)K : -1) : Nd;
    else
        cst = R == 0 ? 1.0 / Nd : R == 1 ? (equal ? 1.0 / (nd * A) : -1) : R == 2 ? (equal ? 1.0 / nd : -1) : 1.0;
    if (cst > 0) {
        double got = r[0].metric[GP_M_NORMALIZATION_REL_ERR], want = fabs(cst - 1.0);
        double tol = cst == 1.0 ? 0.0 : 2.0 * ((cst + 1.0) / want + size + 8) * 0x1p-53 * want;
        GP_FUZZ_CHECK(fabs(got - want) <= tol,
                      "partial window (%s, full batch %s, A %d, K %d, N %llu): normalization_rel_err %a, the "
                      "semantics give |c - 1| = %a (tolerance %a)\n%s", red[R], fb[F], A, K, (unsigned long long)N,
                      got, want, tol, text);
    }
    if (pow2) { /* g_acc(mean, window A) = g_acc(mean_no_div) / A exactly, element by element */
        const gp_stats *q = &r[2].st;
        double s2 = (double)A * A;
        const double a0[] = {p->ss_acc, p->ss_same, p->ss_acc_same}, a2[] = {q->ss_acc, q->ss_same, q->ss_acc_same};
        for (int j = 0; j < 3; j++)
            GP_FUZZ_CHECK(gp_f64_bits(s2 * a0[j]) == gp_f64_bits(a2[j]),
                          "partial window (mean, A %d, K %d): A^2 x sum of squares %d is %a, mean_no_div's %a\n%s",
                          A, K, j, s2 * a0[j], a2[j], text);
        gp_result_free(&r[2]);
    }
    gp_result_free(&r[0]);
    gp_result_free(&r[1]);
    return R;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gp_accum_case c;
    gp_decode_accum(data, size, &c);
    unsigned mech = 0;
    int ran_a = check_scale_invariance(&c, &mech);
    int equal = 0;
    double div = check_references(&c, &equal);
    check_collective_exact(&c);
    int red = check_partial_window(&c);
    gp_fuzz_feature(counters, (mech % GP_FUZZ_NMECH) * GP_FUZZ_BUCKETS + gp_fuzz_bucket(div < 0 ? 0 : div));
    gp_fuzz_feature(counters, GP_FUZZ_NMECH * GP_FUZZ_BUCKETS + (unsigned)ran_a);
    gp_fuzz_feature(counters, GP_FUZZ_NMECH * GP_FUZZ_BUCKETS + 2 + (unsigned)equal);
    gp_fuzz_feature(counters, GP_FUZZ_NMECH * GP_FUZZ_BUCKETS + 4 + (unsigned)red);
    return 0;
}
