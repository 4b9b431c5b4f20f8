/* fuzz_accumulate.c — libFuzzer target: gp_accum_step (kernels/arith/gp_accum.h), the
 * accumulate step every backend shares, over a decoded case (gp_decode_accum: grad and
 * accumulator formats, rounding rne/rtz/stochastic/kahan, ftz, 1..64 addends steered
 * into the subnormal, halfway, overflow and absorption regions), compared with the
 * exact sum (reference/gp_exact.h). It aborts when
 *   - |final accumulator - exact sum| exceeds the rigorous a-priori bound derived below
 *     (checked when every addend is finite and no partial sum overflowed), or
 *   - the production form of the step (no event out-parameter, the native fp32 add on
 *     the common path) gives other bits than the instrumented form.
 * Features (gp_fuzz_check.h): the mechanism set that fired x the bucket of the relative
 * error |A - S| / |S|, and the bucket of the error / bound ratio (inputs that get close
 * to the bound). Findings: with GP_FINDINGS_DIR set, an input reaching a (mechanism set,
 * relative-error bucket) pair new to this process and to the directory (fork-mode jobs
 * share it) is written there as the scenario that replays it in
 * `gradprec run` (gp_accum_case_scenario) under a comment header with its metrics.
 * Build: make fuzz; run: build-fuzz/fuzz/fuzz_accumulate fuzz/corpus/accumulate;
 * `gradprec repro --target accumulate FILE` prints the scenario of an input. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "harness/scenario/gp_decode.h"
#include "gp_fuzz_check.h"
#include "kernels/gp_names.h"
#include "kernels/gp_vocab.h"
#include "reference/gp_exact.h"

/* ==== the a-priori error bound ====
 * Notation: x_1..x_n the addends (values of the grad format, widened exactly to fp32),
 * S = x_1 + ... + x_n exactly, A the final accumulator, w = 2^-24 the unit roundoff of
 * the fp32 opmath (RNE). For the accumulator format af (precision p, min normal 2^emin)
 * and the rounding mode r of the store:
 *   u_r   = 2^-p for RNE; 2^(1-p) for RTZ and for stochastic rounding. Both RTZ and SR
 *           return one of the two neighbours of z, less than one ulp(z) <= 2^(1-p)|z|
 *           away. For SR this holds for EVERY realisation of the random bits, so the
 *           deterministic bound with u replaced by 2u is certain; the tighter
 *           probabilistic bounds (error ~ sqrt(n) u) hold only with a probability and
 *           cannot be asserted.
 *   eta_r = the absolute error of a rounding in af's subnormal range: half the subnormal
 *           quantum, 2^(emin-p), for RNE; the full quantum 2^(emin-p+1) for RTZ and SR.
 *           With FTZ a result below 2^emin is flushed to zero, an error below 2^emin:
 *           eta = 2^emin.
 * Model of one rounding (Higham, Accuracy and Stability of Numerical Algorithms, 2nd
 * ed., §2.2, with gradual underflow): fl(z) = z(1 + d) + e, |d| <= u, |e| <= eta
 * (d serves normal results, e subnormal or flushed ones; adding both bounds is safe).
 * A sum of two fp32 values is a multiple of 2^-149, so an fp32 add whose result lies
 * below 2^-126 is exact: the fp32 opmath adds have e = 0. Overflow is excluded: the
 * check runs only when no step reported OVERFLOW and no value became inf or NaN. */

#define W_FP32 0x1p-24

typedef struct {
    double u, eta;   /* recursive summation: one accumulator update, z = acc + x */
    double us, etas; /* Kahan: one store of an fp32 value to af (RNE) */
} round_model;

static round_model model_of(gp_format af, gp_acc_rounding r, int ftz)
{
    gp_fmt_info fi = gp_fmt_get(af);
    int nearest = r == GP_ACC_RNE || r == GP_ACC_KAHAN;
    double ur = ldexp(1.0, nearest ? -fi.p : 1 - fi.p);
    double eta = ftz ? ldexp(1.0, fi.emin) : ldexp(1.0, fi.emin - fi.p + (nearest ? 0 : 1));
    round_model m;
    if (af == GP_FP32) {
        /* one rounding of the exact acc + x (a multiple of 2^-149: exact below 2^-126
         * unless flushed) */
        m.u = ur;
        m.eta = ftz ? eta : 0.0;
        m.us = 0.0; /* storing an fp32 value as fp32: the identity, except FTZ */
        m.etas = ftz ? eta : 0.0;
    } else {
        /* s = fl32(acc + x) (d1 <= w, e1 = 0), then the store rounds s (d2 <= u_r,
         * e2 <= eta): r - z = z(d1 + d2 + d1 d2) + e2 — a double rounding, on purpose */
        m.u = W_FP32 + ur + W_FP32 * ur;
        m.eta = eta;
        m.us = ldexp(1.0, -fi.p);
        m.etas = ftz ? eta : ldexp(1.0, fi.emin - fi.p);
    }
    return m;
}

/* gamma_m = m u / (1 - m u) (Higham Lemma 3.1: |prod_{j<=m} (1 + d_j) - 1| <= gamma_m
 * when every |d_j| <= u and m u < 1). */
static double gamma_m(int m, double u)
{
    GP_FUZZ_CHECK(m * u < 1.0, "gamma_%d undefined for u = %a", m, u);
    return m <= 0 ? 0.0 : m * u / (1.0 - m * u);
}

/* Recursive summation (RNE, RTZ, stochastic). With s_0 = +0 and
 *   s_k = (s_{k-1} + x_k)(1 + d_k) + e_k,
 * unrolling gives s_n - S = sum_i x_i (prod_{j=i..n} (1 + d_j) - 1)
 *                          + sum_k e_k prod_{j=k+1..n} (1 + d_j), so
 *   |A - S| <= sum_i gamma_{m_i} |x_i| + sum_k eta (1 + gamma_{n-k}),
 * m_i = n - i + 1 the roundings addend i goes through (Higham §4.2, Eq. 4.3 before
 * bounding every m_i by n - 1). Step 1 stores 0 + x_1 = x_1: exact (d_1 = e_1 = 0,
 * m_1 = n - 1, no e_1 term) when x_1 is a value of af that the store keeps (not flushed
 * by FTZ); otherwise a rounding like any other. */
static double bound_recursive(const double *ax, int n, int first_exact, const round_model *m)
{
    double b = 0.0;
    for (int i = 0; i < n; i++)
        b += gamma_m(n - i - (i == 0 && first_exact), m->u) * ax[i];
    for (int k = first_exact ? 1 : 0; k < n; k++)
        b += m->eta * (1.0 + gamma_m(n - k - 1, m->u));
    return b;
}

/* Kahan, as gp_accum_step does it: y = fl32(x - c); s = fl32(a + y); t = st(s);
 * d = fl32(t - a); c' = st(fl32(d - y)); a' = t (fl32: RNE, unit roundoff w; st: the
 * store to af, RNE, relative us, absolute etas). Higham's Eq. 4.8,
 * |E_n| <= (2u + O(n u^2)) sum |x_i|, assumes every operation in one precision and
 * hides the second-order constant; here the compensation is stored in af (bf16: 8
 * bits) and the operations run in fp32, so we derive our own bound, with every term
 * kept (no "n u <= 0.1"-type condition needed, since nothing is dropped).
 * Each combined step has relative error at most sig = w + us + w us:
 *   t  = (a + y)(1 + s1) + e_t,        |s1| <= sig, |e_t| <= etas
 *   c' = (d - y)(1 + s2) + e_c,        |s2| <= sig, |e_c| <= etas
 *   y  = (x - c)(1 + al),  d = (t - a)(1 + ga),  |al|, |ga| <= w.
 * Let D = (a - c) - S_k (how far the compensated sum is from the exact partial sum
 * S_k). Then exactly:
 *   a' - c' = (a + y) - (t - a) ga - (d - y) s2 - e_c, and a + y = S_k + D + (x - c) al,
 * so D' = D + (x - c) al - (t - a) ga - (d - y) s2 - e_c, where
 *   t - a = y + s1 (a + y) + e_t,  d - y = s1 (a + y) + e_t + ga (t - a).
 * With T_k = sum_{i<=k} |x_i| >= |S_k| and bounds D >= |D|, C >= |c| this gives the
 * recurrence below (each line bounds the quantity named), and finally
 *   |A - S| = |a_n - S_n| = |D_n + c_n| <= D_n + C_n.
 * To first order it is (2w + sig) T_n: 3u for fp32 (Higham's 2u uses that fl(t - a) is
 * exact, which needs conditions we do not assume), and about u of af for bf16/fp16
 * (the answer is stored in af), plus O(n sig^2) T_n and O(n etas). */
static double bound_kahan(const double *ax, int n, const round_model *m)
{
    const double w = W_FP32, sig = W_FP32 + m->us + W_FP32 * m->us;
    double T = 0.0, D = 0.0, C = 0.0;
    for (int k = 0; k < n; k++) {
        T += ax[k];
        double Y = (ax[k] + C) * (1.0 + w);          /* |y| */
        double AY = T + D + w * (ax[k] + C);          /* |a + y| */
        double TA = Y + sig * AY + m->etas;           /* |t - a| */
        double DY = sig * AY + m->etas + w * TA;      /* |d - y| */
        D += w * (ax[k] + C) + w * TA + sig * DY + m->etas;
        C = (1.0 + sig) * DY + m->etas;               /* |c'| */
    }
    return D + C;
}

/* The bounds are evaluated in binary64 with round-to-nearest: at most ~1300 chained
 * operations on non-negative numbers (64 steps x ~20), each off by a factor within
 * 1 +- 2^-53, so the computed bound is >= the true one times (1 - 2^-42); the error is
 * read out as the binary64 nearest to it (<= its value times 1 + 2^-53). Comparing
 * with the computed bound times (1 + 2^-40) therefore never fails a correct kernel. */
#define EVAL_MARGIN (1.0 + 0x1p-40)

/* ==== the target ==== */

#define rounding_names(r) gp_vocab_name(GP_VOCAB_ACC_ROUNDING, (int)(r)) /* kernels/gp_vocab.h */

/* (mechanism set x relative-error bucket), then the error/bound bucket */
GP_FUZZ_COUNTERS counters[GP_FUZZ_NMECH * GP_FUZZ_BUCKETS + GP_FUZZ_BUCKETS];
static uint8_t seen[GP_FUZZ_NMECH * GP_FUZZ_BUCKETS]; /* pairs met in this process (findings) */

static void write_finding(const uint8_t *data, size_t size, const gp_accum_case *c, unsigned mech, int checked,
                          double S, uint32_t acc, double err, double rel, double bound)
{
    gp_scenario s;
    gp_error e = {""};
    if (gp_accum_case_scenario(c, &s, &e) != 0)
        return; /* non-finite addends: no scenario holds them */
    char names[64], header[1024];
    gp_fuzz_mech_names(mech, names, sizeof names);
    gp_fmt_info ai = gp_fmt_get(c->acc);
    snprintf(header, sizeof header,
             "gradprec fuzz finding: target accumulate, input fnv1a64 %016" PRIx64 " (%zu bytes)\n"
             "case: grad %s, accumulator %s, rounding %s, ftz %d, %d addends, seed %" PRIu64 "\n"
             "mechanisms: %s\n"
             "exact sum %a, accumulator %a (bits 0x%0*x)\n"
             "%s: |error| %a, relative %.3e (bucket %u), bound %a, error/bound %.3e\n"
             "replay: gradprec run THIS_FILE (cpu backend, same seed)\n",
             gp_fuzz_hash(data, size), size, gp_format_name(c->grad), gp_format_name(c->acc),
             rounding_names(c->rounding), c->ftz, c->n, c->seed, names, S, gp_fmt_to_f64(c->acc, acc),
             ai.width / 4, (unsigned)acc, checked ? "checked" : "not checked (overflow or non-finite)", err, rel,
             gp_fuzz_bucket(rel), bound, bound > 0 ? err / bound : (err > 0 ? INFINITY : 0.0));
    gp_fuzz_finding("accumulate", data, size, header, &s);
    gp_scenario_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gp_accum_case c;
    gp_decode_accum(data, size, &c);
    const gp_format af = c.acc, gf = c.grad;
    double ax[GP_DECODE_MAX_ADDENDS];
    uint32_t acc = 0, comp = 0, pacc = 0, pcomp = 0; /* instrumented / production */
    unsigned ev_all = 0, mech = 0;
    int checked = 1, prod_differs = af == GP_FP32 && c.rounding == GP_ACC_RNE && !c.ftz;
    gp_fixacc fs, fe; /* S exactly; A - S exactly */
    gp_fixacc_zero(&fs);
    gp_fixacc_zero(&fe);
    for (int k = 0; k < c.n; k++) {
        float x = gp_f32_from_bits(gp_fmt_to_f32_bits(gf, c.bits[k]));
        uint32_t rb = c.rounding == GP_ACC_STOCHASTIC ? gp_decode_accum_rbits(&c, k) : 0;
        unsigned ev = 0;
        acc = gp_accum_step(af, c.rounding, c.ftz, acc, &comp, x, rb, &ev);
        /* the production form differs from the instrumented one only on the fp32 RNE
         * path without FTZ (a native add instead of TwoSum + rounding); elsewhere it is
         * the same code with the event out-parameter ignored */
        if (prod_differs)
            pacc = gp_accum_step(af, c.rounding, c.ftz, pacc, &pcomp, x, rb, (unsigned *)0);
        else
            pacc = acc, pcomp = comp;
        GP_FUZZ_CHECK(gp_fmt_agree(af, acc, pacc) && (c.rounding != GP_ACC_KAHAN || gp_fmt_agree(af, comp, pcomp)),
                      "step %d: production 0x%x (comp 0x%x) != instrumented 0x%x (comp 0x%x); acc %s grad %s "
                      "rounding %s ftz %d x=%a",
                      k, pacc, pcomp, acc, comp, gp_format_name(af), gp_format_name(gf),
                      rounding_names(c.rounding), c.ftz, (double)x);
        ev_all |= ev;
        if (gp_fuzz_is_subnormal(gf, c.bits[k]) || gp_fuzz_is_subnormal(af, acc) ||
            (c.rounding == GP_ACC_KAHAN && gp_fuzz_is_subnormal(af, comp)))
            mech |= GP_FUZZ_SUBNORMAL;
        if (!isfinite(x)) {
            checked = 0;
            ax[k] = 0;
            continue;
        }
        ax[k] = fabs((double)x);
        gp_fixacc_add(&fs, x, 1);
        gp_fixacc_add(&fe, -x, 1);
        uint32_t ab = gp_fmt_to_f32_bits(af, acc), cb = gp_fmt_to_f32_bits(af, comp);
        if ((ev & GP_EV_OVERFLOW) || (ab & 0x7f800000u) == 0x7f800000u || (cb & 0x7f800000u) == 0x7f800000u) {
            checked = 0;
            mech |= GP_FUZZ_OVERFLOW;
        }
    }
    mech |= gp_fuzz_mech_of_events(ev_all);

    int st;
    double S = gp_fixacc_div(&fs, 1, &st), err = 0, rel = 0, bound = 0;
    if (checked) {
        gp_fixacc_add(&fe, gp_f32_from_bits(gp_fmt_to_f32_bits(af, acc)), 1);
        err = fabs(gp_fixacc_div(&fe, 1, &st));
        rel = S != 0 ? err / fabs(S) : (err != 0 ? INFINITY : 0.0);
        round_model m = model_of(af, c.rounding, c.ftz);
        if (c.rounding == GP_ACC_KAHAN) {
            bound = bound_kahan(ax, c.n, &m);
        } else {
            unsigned ev1 = 0; /* is step 1 exact: x_1 a value of af that the store keeps? */
            gp_fmt_from_f32_bits(af, gp_fmt_to_f32_bits(gf, c.bits[0]), GP_RNE, 0, c.ftz, &ev1);
            bound = bound_recursive(ax, c.n, !(ev1 & GP_EV_INEXACT), &m);
        }
        GP_FUZZ_CHECK(err <= bound * EVAL_MARGIN,
                      "acc %s grad %s rounding %s ftz %d n %d seed %" PRIu64 ": |A - S| = %a > bound %a "
                      "(A = %a bits 0x%x, S = %a, sum|x| error/bound %.6g)",
                      gp_format_name(af), gp_format_name(gf), rounding_names(c.rounding), c.ftz, c.n, c.seed,
                      err, bound, gp_fmt_to_f64(af, acc), acc, S, err / bound);
        gp_fuzz_feature(counters, GP_FUZZ_NMECH * GP_FUZZ_BUCKETS + gp_fuzz_bucket(bound > 0 ? err / bound : 0));
    }
    unsigned b = gp_fuzz_bucket(rel);
    gp_fuzz_feature(counters, mech * GP_FUZZ_BUCKETS + b);
    if (gp_fuzz_pair_new(seen, mech, b) && gp_fuzz_pair_claim("accumulate", mech, b))
        write_finding(data, size, &c, mech, checked, S, acc, err, rel, bound);
    return 0;
}
