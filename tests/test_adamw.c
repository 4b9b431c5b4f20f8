/* test_adamw.c — kernels/arith/gp_adamw.h (the fp32 AdamW element step),
 * kernels/arith/gp_schedule.h (LR schedules) and reference/gp_adamw_ref.c (the MPFR exact
 * trajectory): hand-derived single steps, stale bf16 weights against master weights and
 * Kahan compensation, skipped steps, schedules, the step against the reference within a
 * derived error bound (and wrong AdamW variants outside it), stochastic rounding. */
#include <math.h>
#include <string.h>

#include <mpfr.h>

#include "gp_test.h"

#include "kernels/arith/gp_accum.h"
#include "kernels/arith/gp_adamw.h"
#include "kernels/arith/gp_philox.h"
#include "kernels/arith/gp_schedule.h"
#include "kernels/cpu/gp_cpu_adamw.h"
#include "kernels/cpu/gp_cpu_backend.h"
#include "reference/gp_adamw_bound.h"
#include "reference/gp_adamw_ref.h"

static const gp_adamw_eval EVALS[] = {GP_ADAMW_TORCH_CUDA, GP_ADAMW_TORCH_CPU, GP_ADAMW_UNFUSED};
static const char *const EVAL_NAMES[] = {"cuda", "cpu", "unfused"};

#define U GP_ADAMW_BOUND_U

static gp_adamw_config config(gp_format param, gp_format state, gp_adamw_variant var,
                              gp_rmode rounding, gp_adamw_eval eval)
{
    gp_adamw_config c;
    c.param = param;
    c.state = state;
    c.variant = var;
    c.rounding = rounding;
    c.eval = eval;
    c.tail = 0;
    return c;
}

/* One element's complete state in the kernel's formats. */
typedef struct {
    uint32_t p, master, comp, m, v;
} elem;

static elem elem_init(gp_format pf, double w0)
{
    elem e;
    e.p = gp_fmt_from_f64(pf, w0, GP_RNE, 0, 0, NULL);
    e.master = gp_fmt_from_f64(GP_FP32, w0, GP_RNE, 0, 0, NULL);
    e.comp = 0;
    e.m = 0;
    e.v = 0;
    return e;
}

static uint32_t elem_step(gp_adamw_config c, elem *x, float g, double lr, double b1, double b2,
                          double eps, double wd, long t, uint32_t rbits, unsigned *ev,
                          unsigned *evs)
{
    gp_adamw_scalars s = gp_adamw_scalars_make(lr, b1, b2, eps, wd, t);
    x->p = gp_adamw_step(c, &s, x->p, &x->master, &x->comp, &x->m, &x->v, g, 0, rbits, ev, evs);
    return x->p;
}

static double f32v(uint32_t bits)
{
    return (double)gp_f32_from_bits(bits);
}

/* ---- the binary64 scalars ---- */

/* gp_adamw_pow against MPFR's correctly rounded power: equal for every beta and t
 * tried (its double-double error is below 2^-96 relative, so a difference needs beta^t
 * within 2^-96 of a binary64 rounding boundary); and the scalars of step 1 of
 * (lr 0.1, betas (0.9, 0.999), eps 1e-8) are torch's: bc1 = 1 - 0.9 =
 * 0.09999999999999998 (exact in binary64, Sterbenz), 1 - 0.999 rounds to 0.001f, etc. */
static void test_scalars(void **state)
{
    (void)state;
    uint64_t seed = gp_test_seed(11);
    mpfr_t r;
    mpfr_init2(r, 53);
    const double betas[] = {0.9, 0.999, 0.95, 0.98, 0.5, 0.99, 0.9999, 0.0};
    for (int i = 0; i < 2000; i++) {
        double beta = i < 8 ? betas[i] : (double)(gp_test_next(&seed) >> 11) * 0x1p-53;
        for (int k = 0; k < 40; k++) {
            long t = k < 20 ? k + 1 : (long)(gp_test_next(&seed) % 200000) + 1;
            mpfr_set_d(r, beta, MPFR_RNDN);
            mpfr_pow_ui(r, r, (unsigned long)t, MPFR_RNDN);
            double want = mpfr_get_d(r, MPFR_RNDN);
            double got = gp_adamw_pow(beta, t);
            if (want < 0x1p-400)
                want = 0.0; /* documented flush: 1 - x is 1 either way */
            gp_assert_bits(gp_f64_bits(got), gp_f64_bits(want), "%a^%ld = %a, MPFR %a", beta, t,
                           got, want);
        }
    }
    mpfr_clear(r);

    gp_adamw_scalars s = gp_adamw_scalars_make(0.1, 0.9, 0.999, 1e-8, 0.0, 1);
    assert_true(s.bc1 == 1.0 - 0.9 && s.bc1 == 0.09999999999999998);
    assert_true(s.bc2 == 1.0 - 0.999);
    assert_true(s.step_size == 0.1 / (1.0 - 0.9));
    assert_true(s.decay == 1.0f);
    assert_true(s.lerp_w == 0.1f);    /* (float)0.09999999999999998 */
    assert_true(s.addcmul_v == 0.001f); /* (float)0.0010000000000000009 */
    assert_true(s.beta2 == 0.999f);
    assert_true(s.neg_step == -1.0f); /* (float)-1.0000000000000002 */
    assert_true(s.eps == 1e-8f);
    /* torch's single-tensor CUDA division by a Python float multiplies by the binary64
     * reciprocal rounded once (measured on an H100, gp_adamw.h): at t = 1 and t = 3
     * with beta2 = 0.999 that is 0x1.f9f6e4p+4 and 0x1.2443ccp+4 (CPython:
     * struct.pack('f', 1 / (1 - 0.999**t) ** 0.5)), where 1.0f / (float)sqrt(bc2)
     * would give 0x1.f9f6e6p+4 and 0x1.2443cap+4 */
    assert_true(s.inv_bc2_sqrt == 0x1.f9f6e4p+4f);
    assert_true(gp_adamw_scalars_make(0.1, 0.9, 0.999, 1e-8, 0.0, 3).inv_bc2_sqrt == 0x1.2443ccp+4f);
    s = gp_adamw_scalars_make(0.1, 0.9, 0.999, 1e-8, 0.1, 1);
    assert_true(s.decay == (float)(1.0 - 0.1 * 0.1) && s.decay == 0.99f);
}

/* ---- hand-derived single steps ---- */

/* w = 1, g = 1, lr = 0.1, betas (0.9, 0.999), eps 1e-8, wd 0, step 1, m = v = 0:
 *   m = 0 + 0.1*(1 - 0) = 0.1;  v = 0.999*0 + 0.001*1*1 = 0.001;
 *   bc1 = 1 - 0.9 = 0.1, bc2 = 1 - 0.999 = 0.001;
 *   denom = sqrt(0.001)/sqrt(0.001) + 1e-8 = 1 + 1e-8;
 *   update = (lr/bc1) * m/denom = 1 * 0.1/(1 + 1e-8);  w = 1 - 0.1/(1 + 1e-8) = 0.900000001.
 * In fp32: m = 0.1f and v = 0.001f exactly as stored (one rounding each from the exact
 * 0.1, 0.001); sqrt(v)*(1/sqrt(bc2)) is 1 within 2 ulps; + 1e-8f is absorbed (below
 * 2^-25); so m/denom = 0.1 within ~3 ulps of 0.1 (2^-27 each: ulp(0.1) = 2^-27), and the
 * final 1 - x rounds to within half an ulp of 0.9 (2^-25) — the total stays below
 * ulp(0.9) = 2^-24. Asserted: |w - 0.9| <= 2^-24 (one fp32 ulp), every evaluation order. */
static void test_one_step(void **state)
{
    (void)state;
    for (int e = 0; e < 3; e++) {
        elem x = elem_init(GP_FP32, 1.0);
        unsigned ev = 0, evs = 0;
        elem_step(config(GP_FP32, GP_FP32, GP_ADAMW_PLAIN, GP_RNE, EVALS[e]), &x, 1.0f, 0.1, 0.9,
                  0.999, 1e-8, 0.0, 1, 0, &ev, &evs);
        double w = f32v(x.p);
        printf("# %s: w = %a (0x%08x), m = %a, v = %a\n", EVAL_NAMES[e], w, x.p, f32v(x.m), f32v(x.v));
        assert_true(x.m == gp_f32_bits(0.1f) && x.v == gp_f32_bits(0.001f));
        assert_true(fabs(w - 0.9) <= 0x1p-24);
        assert_false(ev & GP_EV_STALE);
    }
}

/* The same with weight_decay 0.1: decay first, w = 1*(1 - 0.1*0.1) = 0.99, then the same
 * update: w = 0.99 - 0.1/(1 + 1e-8) = 0.890000001. In fp32: 0.99f is within 2^-25 of 0.99
 * (half an ulp in [0.5, 1)), the update within ~3*2^-27 of 0.1 as above, the final
 * difference rounds within 2^-25: total < 2*2^-24. Asserted: |w - 0.89| <= 2 ulps. */
static void test_one_step_weight_decay(void **state)
{
    (void)state;
    for (int var = GP_ADAMW_PLAIN; var <= GP_ADAMW_KAHAN; var++)
        for (int e = 0; e < 3; e++) {
            elem x = elem_init(GP_FP32, 1.0);
            elem_step(config(GP_FP32, GP_FP32, (gp_adamw_variant)var, GP_RNE, EVALS[e]), &x, 1.0f, 0.1,
                      0.9, 0.999, 1e-8, 0.1, 1, 0, NULL, NULL);
            double w = f32v(x.p);
            printf("# variant %d %s: w = %a (0x%08x)\n", var, EVAL_NAMES[e], w, x.p);
            assert_true(fabs(w - 0.89) <= 2 * 0x1p-24);
            /* decay applied after the update instead would give (1 - 0.1)*0.99 = 0.891 */
            assert_true(fabs(w - 0.891) > 1e-4);
        }
}

/* Run the reference one step, filling the exact values around it. */
static void ref_step(gp_adamw_ref *r, gp_adamw_exact_step *x, double g, double lr,
                     const gp_adamw_ref_hparams *h, long t)
{
    gp_adamw_ref_get(r, &x->w, &x->m, &x->v, NULL);
    gp_adamw_ref_step(r, g, lr, h, t);
    gp_adamw_ref_get(r, &x->w1, &x->m1, &x->v1, &x->upd);
}

/* ---- bf16 weights: stale without a master, fp32 master, Kahan ---- */

#define BF16_STEPS 900
/* w = 1, g = -1 every step, lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0: every exact
 * update is lr * 1/(1 + 1e-8) ~ +1e-3 (m^ = g, v^ = g^2 exactly in exact arithmetic),
 * so w goes from 1 to ~1.9 after 900 steps, inside the bf16 binade [1, 2) where an ulp is
 * 2^-7 and half an ulp 2^-8 = 3.9e-3 > 1e-3. */

/* Without a master copy each fp32 result 1 + 1e-3 rounds back to the bf16 1.0: the
 * weight never moves and every step reports STALE, while the exact weight reaches 1.9. */
static void test_bf16_stale_without_master(void **state)
{
    (void)state;
    gp_adamw_variant vars[] = {GP_ADAMW_PLAIN, GP_ADAMW_ONE_STORE};
    for (int k = 0; k < 2; k++) {
        elem x = elem_init(GP_BF16, 1.0);
        for (long t = 1; t <= BF16_STEPS; t++) {
            unsigned ev = 0;
            elem_step(config(GP_BF16, GP_FP32, vars[k], GP_RNE, GP_ADAMW_TORCH_CUDA), &x, -1.0f, 1e-3,
                      0.9, 0.999, 1e-8, 0.0, t, 0, &ev, NULL);
            gp_assert_bits(x.p, 0x3f80u, "variant %d step %ld", k, t);
            if (!(ev & GP_EV_STALE) || !(ev & GP_EV_INEXACT))
                fail_msg("variant %d step %ld: events 0x%x lack STALE|INEXACT", k, t, ev);
        }
    }
}

/* torch_cpu_foreach: torch._foreach_mul_ rounds its Python scalar to the tensor's dtype
 * (measured on torch 2.15 CPU, docs/model.md), Tensor.mul_ keeps it in fp32. With g = 0
 * and m = 0 the step leaves the update -0 (m' = 0), so param' = d and v' = v * beta2 alone:
 *  - beta2 = 0.95: bf16(0.95) = 0.94921875 (0.95 lies 0.2 of a step 2^-8 above it);
 *    v = 1.3125: foreach 1.3125 * 0.94921875 = 1.245849609375
 *    = 159.47 x 2^-7 -> 159 x 2^-7 = 1.2421875; single-tensor 1.3125 * 0.95f = 1.2468749...
 *    = 159.6 x 2^-7 -> 160 x 2^-7 = 1.25;
 *  - lr 0.25, weight decay 3/256: decay 1 - 3/1024 = 0.9970703125, bf16 -> 0.99609375
 *    (1 - 2^-8, 0.25 ulp away); w = 1 + 2^-7: foreach 1.0078125 * 0.99609375 = 1.00387573...
 *    = 128.496 x 2^-7 -> 1.0; single-tensor 1.0078125 * 0.9970703125 = 1.00485992... =
 *    128.62 x 2^-7 -> 129 x 2^-7 = 1.0078125.
 * fp32 tensors: the same bits as torch_cpu (the scalar was already fp32). */
static void test_torch_cpu_foreach(void **state)
{
    (void)state;
    const struct { gp_adamw_eval ev; uint32_t p, v; } want[] = {{GP_ADAMW_TORCH_CPU_FOREACH, 0x3f80u, 0x3f9fu},
                                                               {GP_ADAMW_TORCH_CPU, 0x3f81u, 0x3fa0u}};
    for (int k = 0; k < 2; k++) {
        elem x = elem_init(GP_BF16, 1.0078125);
        x.v = gp_fmt_from_f64(GP_BF16, 1.3125, GP_RNE, 0, 0, NULL);
        elem_step(config(GP_BF16, GP_BF16, GP_ADAMW_PLAIN, GP_RNE, want[k].ev), &x, 0.0f, 0.25, 0.9, 0.95, 1e-8,
                  3.0 / 256, 1, 0, NULL, NULL);
        gp_assert_bits(x.p, want[k].p, "param, evaluation %d", (int)want[k].ev);
        gp_assert_bits(x.v, want[k].v, "v, evaluation %d", (int)want[k].ev);
        gp_assert_bits(x.m, 0, "m");
    }
    for (int k = 0; k < 64; k++) { /* fp32: torch_cpu's bits */
        elem a = elem_init(GP_FP32, 1.0 + k / 64.0), b = a;
        a.v = b.v = gp_fmt_from_f64(GP_FP32, 0.01 * (k + 1), GP_RNE, 0, 0, NULL);
        float g = (float)(k - 32) / 16.0f;
        elem_step(config(GP_FP32, GP_FP32, GP_ADAMW_PLAIN, GP_RNE, GP_ADAMW_TORCH_CPU_FOREACH), &a, g, 1e-3, 0.9, 0.95,
                  1e-8, 0.1, 3, 0, NULL, NULL);
        elem_step(config(GP_FP32, GP_FP32, GP_ADAMW_PLAIN, GP_RNE, GP_ADAMW_TORCH_CPU), &b, g, 1e-3, 0.9, 0.95, 1e-8,
                  0.1, 3, 0, NULL, NULL);
        gp_assert_bits(a.p, b.p, "fp32 param %d", k);
        gp_assert_bits(a.v, b.v, "fp32 v %d", k);
    }
}

/* The bf16 param with an fp32 master: the master moves every step (never STALE) and the
 * param follows it: it leaves 1.0 once the master passes the rounding boundary 1 + 2^-8
 * (step 4: 1.004 > 1.00390625), and at the end it is the master rounded, so
 * |param - w_exact| <= 2^-8 (half a bf16 ulp in [1, 2)) + the master's fp32 bound ew. */
static void test_bf16_master(void **state)
{
    (void)state;
    gp_adamw_ref_hparams h = {0.9, 0.999, 1e-8, 0.0};
    gp_adamw_ref r;
    gp_adamw_ref_init(&r, 1.0);
    gp_adamw_err_bound b = {0, 0, 0};
    elem x = elem_init(GP_BF16, 1.0);
    long first_move = 0;
    for (long t = 1; t <= BF16_STEPS; t++) {
        unsigned ev = 0;
        uint32_t master0 = x.master;
        gp_adamw_exact_step es;
        ref_step(&r, &es, -1.0, 1e-3, &h, t);
        gp_adamw_bound_step(&b, &h, 1e-3, t, -1.0, &es);
        elem_step(config(GP_BF16, GP_FP32, GP_ADAMW_MASTER, GP_RNE, GP_ADAMW_TORCH_CUDA), &x, -1.0f,
                  1e-3, 0.9, 0.999, 1e-8, 0.0, t, 0, &ev, NULL);
        assert_true(x.master != master0);
        assert_false(ev & GP_EV_STALE);
        if (!first_move && x.p != 0x3f80u)
            first_move = t;
        gp_assert_bits(x.p, gp_fmt_from_f32_bits(GP_BF16, x.master, GP_RNE, 0, 0, NULL), "step %ld", t);
    }
    double w = gp_fmt_to_f64(GP_BF16, x.p), we = gp_adamw_ref_param(&r);
    printf("# master: param moved at step %ld; param %a, exact %a, |diff| %.3g <= %.3g\n",
           first_move, w, we, fabs(w - we), 0x1p-8 + b.ew);
    assert_int_equal(first_move, 4);
    assert_true(fabs(w - we) <= 0x1p-8 + b.ew);
    assert_true(fabs(f32v(x.master) - we) <= b.ew);
    gp_adamw_ref_clear(&r);
}

/* Kahan-compensated bf16 param (compensation c in bf16). The pair represents R = P - c.
 * With wd = 0 the decayed weight is P exactly, and one step computes y = fl(x - c),
 * s = fl(P + y), P' = bf16(s), c' = bf16(fl(fl(P' - P) - y)), where P' - P is exact
 * (Sterbenz: both in [1, 2)). Writing the roundings out,
 *   R' = P' - c' = R + x + eta1 - d2 (P' - P - y) - eta3,
 * |eta1| <= u (|x| + |c|)          (y),
 * |d2 (P' - P - y)| <= u Z         (the fp32 subtraction),
 * |eta3| <= 2^-8 (1 + u) Z         (c' stored in bf16: half an ulp <= 2^-8 relative),
 * with Z = 2^-8 + 2u >= |P' - P - y| = |P' - s| + |s - (P + y)| for s in [1, 2), and
 * |c| <= Cmax = (1 + 2^-8)(1 + u) Z. With |x - X| <= ex (the fp32 update against the
 * exact one, bound_step), after K steps
 *   |P_K - w_K| <= Cmax + sum_k [u (|X_k| + ex_k + Cmax) + (u + 2^-8 (1 + u)) Z + ex_k],
 * about 2^-8 + K 2^-16 = 0.0176 for K = 900: 2.3 bf16 ulps. The bf16 store of c dominates
 * (it drops up to 2^-8 of c each step); without compensation the error is 0.9. The
 * precondition s in [1, 2) is checked: P stays in [1, 1.95]. */
static void test_bf16_kahan(void **state)
{
    (void)state;
    gp_adamw_ref_hparams h = {0.9, 0.999, 1e-8, 0.0};
    for (int e = 0; e < 3; e++) {
        gp_adamw_ref r;
        gp_adamw_ref_init(&r, 1.0);
        gp_adamw_err_bound b = {0, 0, 0};
        elem x = elem_init(GP_BF16, 1.0);
        const double Z = 0x1p-8 + 2 * U, cmax = (1 + 0x1p-8) * (1 + U) * Z;
        double drift = 0, worst = 0;
        for (long t = 1; t <= BF16_STEPS; t++) {
            gp_adamw_exact_step es;
            ref_step(&r, &es, -1.0, 1e-3, &h, t);
            double ex = gp_adamw_bound_step(&b, &h, 1e-3, t, -1.0, &es);
            unsigned ev = 0;
            elem_step(config(GP_BF16, GP_FP32, GP_ADAMW_KAHAN, GP_RNE, EVALS[e]), &x, -1.0f, 1e-3, 0.9,
                      0.999, 1e-8, 0.0, t, 0, &ev, NULL);
            drift += U * (fabs(es.upd) + ex + cmax) + (U + 0x1p-8 * (1 + U)) * Z + ex;
            double w = gp_fmt_to_f64(GP_BF16, x.p);
            if (!(w >= 1.0 && w <= 1.95))
                fail_msg("%s step %ld: param %a outside the bound's precondition", EVAL_NAMES[e], t, w);
            double err = fabs(w - es.w1), bound = cmax + drift;
            if (err > bound)
                fail_msg("%s step %ld: |%a - %a| = %.3g > bound %.3g", EVAL_NAMES[e], t, w, es.w1, err, bound);
            if (err / bound > worst)
                worst = err / bound;
        }
        printf("# kahan %s: final param %a, exact %a, bound %.4g (%.2f bf16 ulps), worst err/bound %.3f\n",
               EVAL_NAMES[e], gp_fmt_to_f64(GP_BF16, x.p), gp_adamw_ref_param(&r), cmax + drift,
               (cmax + drift) / 0x1p-7, worst);
        gp_adamw_ref_clear(&r);
    }
}

/* ---- skipped steps ---- */

/* found_inf: param, master, compensation, m and v bit-identical, no events, for every
 * variant, format and evaluation order. */
static void test_found_inf(void **state)
{
    (void)state;
    const gp_format pfs[] = {GP_FP32, GP_BF16, GP_FP16};
    const gp_format sfs[] = {GP_FP32, GP_BF16};
    gp_adamw_scalars s = gp_adamw_scalars_make(1e-3, 0.9, 0.999, 1e-8, 0.01, 7);
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 2; q++)
            for (int var = GP_ADAMW_PLAIN; var <= GP_ADAMW_KAHAN; var++)
                for (int e = 0; e < 3; e++)
                    for (int rm = 0; rm < 2; rm++) {
                        gp_adamw_config c = config(pfs[p], sfs[q], (gp_adamw_variant)var,
                                                   rm ? GP_STOCHASTIC : GP_RNE, EVALS[e]);
                        uint32_t param = gp_fmt_from_f64(pfs[p], 0.75, GP_RNE, 0, 0, NULL);
                        uint32_t master = 0x3f400001u, comp = gp_fmt_from_f64(pfs[p], 1e-4, GP_RNE, 0, 0, NULL);
                        uint32_t m = gp_fmt_from_f64(sfs[q], 0.25, GP_RNE, 0, 0, NULL);
                        uint32_t v = gp_fmt_from_f64(sfs[q], 0.0625, GP_RNE, 0, 0, NULL);
                        uint32_t m0 = m, v0 = v, master0 = master, comp0 = comp;
                        unsigned ev = 0, evs = 0;
                        uint32_t out = gp_adamw_step(c, &s, param, &master, &comp, &m, &v, 3.0f, 1,
                                                     0x12345678u, &ev, &evs);
                        gp_assert_bits(out, param, "param fmt %d state %d var %d", p, q, var);
                        gp_assert_bits(m, m0, "m");
                        gp_assert_bits(v, v0, "v");
                        gp_assert_bits(master, master0, "master");
                        gp_assert_bits(comp, comp0, "comp");
                        assert_int_equal(ev, 0);
                        assert_int_equal(evs, 0);
                        /* and without found_inf the same call does change things */
                        out = gp_adamw_step(c, &s, param, &master, &comp, &m, &v, 3.0f, 0, 0x12345678u,
                                            &ev, &evs);
                        assert_true(m != m0 && v != v0);
                    }
}

/* ---- schedules ---- */

static gp_schedule_params sched(int kind, int warmup, int total, double base, double min_lr,
                                double gamma, int step_size)
{
    gp_schedule_params p;
    p.kind = kind;
    p.warmup = warmup;
    p.total = total;
    p.base_lr = base;
    p.min_lr = min_lr;
    p.gamma = gamma;
    p.step_size = step_size;
    return p;
}

/* |got - want| <= 4 binary64 ulps of want (a few roundings of cos/sqrt/products). */
#define assert_lr(p, t, want)                                                                  \
    do {                                                                                       \
        double got_ = gp_schedule_lr(&(p), (t)), want_ = (want);                               \
        if (!(fabs(got_ - want_) <= 4 * 0x1p-52 * fabs(want_)))                                \
            fail_msg("kind %d t %ld: lr %a (%.17g), want %a (%.17g)", (p).kind, (long)(t), got_, \
                     got_, want_, want_);                                                      \
    } while (0)

/* Hand-computed values: warmup 10 on base 1e-3 gives 1e-4 at t = 1, 5e-4 at t = 5, base at
 * t = 10; cosine (warmup 10, total 110, min 1e-4): base at t = 10, (base + min)/2 at the
 * midpoint t = 60, min + (base - min)(1 + cos(pi/4))/2 at t = 35, min at t = 110 and after;
 * linear (total 100, base 1, min 0): 0.5 at t = 50, 0 at t = 100 and after, 0.99 at t = 1;
 * with min 0.2: 0.6 at t = 50; inverse sqrt: warmup 4: t = 2 gives 0.5, t = 4 gives 1,
 * t = 16 gives sqrt(4)/sqrt(16) = 0.5, t = 64 gives 0.25; without warmup 1/sqrt(t): 1 at
 * t = 1, 0.5 at t = 4, 0.1 at t = 100; step (gamma 0.1 every 100): 1 through t = 100,
 * 0.1 from t = 101, 0.1*0.1 from t = 201; with warmup 10 shifted by 10. */
static void test_schedules(void **state)
{
    (void)state;
    gp_schedule_params p = sched(GP_LR_CONSTANT, 0, 100, 3e-4, 0, 0, 0);
    assert_lr(p, 1, 3e-4);
    assert_lr(p, 1000, 3e-4);
    p = sched(GP_LR_CONSTANT, 10, 100, 1e-3, 0, 0, 0);
    assert_lr(p, 1, 1e-4);
    assert_lr(p, 5, 5e-4);
    assert_lr(p, 10, 1e-3);
    assert_lr(p, 11, 1e-3);

    p = sched(GP_LR_COSINE, 10, 110, 1e-3, 1e-4, 0, 0);
    assert_lr(p, 1, 1e-4);
    assert_lr(p, 10, 1e-3);
    assert_lr(p, 60, 5.5e-4);
    assert_lr(p, 35, 1e-4 + 9e-4 * 0.5 * (1 + 0.70710678118654752440));
    assert_lr(p, 110, 1e-4);
    assert_lr(p, 500, 1e-4);
    p = sched(GP_LR_COSINE, 0, 100, 1.0, 0.0, 0, 0);
    assert_lr(p, 50, 0.5);
    assert_true(gp_schedule_lr(&p, 100) == 0.0);

    p = sched(GP_LR_LINEAR, 0, 100, 1.0, 0.0, 0, 0);
    assert_lr(p, 1, 0.99);
    assert_lr(p, 50, 0.5);
    assert_true(gp_schedule_lr(&p, 100) == 0.0 && gp_schedule_lr(&p, 150) == 0.0);
    p = sched(GP_LR_LINEAR, 20, 120, 1.0, 0.2, 0, 0);
    assert_lr(p, 10, 0.5);
    assert_lr(p, 20, 1.0);
    assert_lr(p, 70, 0.6);
    assert_lr(p, 120, 0.2);
    assert_lr(p, 121, 0.2);

    p = sched(GP_LR_INVSQRT, 4, 0, 1.0, 0, 0, 0);
    assert_lr(p, 2, 0.5);
    assert_lr(p, 4, 1.0);
    assert_lr(p, 16, 0.5);
    assert_lr(p, 64, 0.25);
    p = sched(GP_LR_INVSQRT, 0, 0, 1.0, 0, 0, 0);
    assert_lr(p, 1, 1.0);
    assert_lr(p, 4, 0.5);
    assert_lr(p, 100, 0.1);

    p = sched(GP_LR_STEP, 0, 0, 1.0, 0, 0.1, 100);
    assert_lr(p, 1, 1.0);
    assert_lr(p, 100, 1.0);
    assert_lr(p, 101, 0.1);
    assert_lr(p, 200, 0.1);
    assert_lr(p, 201, 0.1 * 0.1);
    p = sched(GP_LR_STEP, 10, 0, 1.0, 0, 0.1, 100);
    assert_lr(p, 5, 0.5);
    assert_lr(p, 10, 1.0);
    assert_lr(p, 110, 1.0);
    assert_lr(p, 111, 0.1);
}

/* ---- torch's own results ---- */

/* One AdamW step of torch 2.15.0 (the PyPI wheel, on x86-64 CPU with AVX2, MKL) per row,
 * captured once with torch.optim.AdamW([p], lr, betas=(b1, b2), eps, weight_decay=wd,
 * foreach=False, fused=False) on a 1-element tensor whose state was set to
 * {step: t - 1, exp_avg: m0, exp_avg_sq: v0} before .step(); inputs random (p in
 * [-2, 2], g, m0 ~ N(0, s^2), v0 ~ s^2 chi-ish, s log-uniform in [1e-6, 10]). Columns:
 * t, lr, wd, beta1, beta2, eps, then bits of p0, g, m0, v0 and torch's p, m, v after.
 * fp32 rows are ones where torch's CPU sqrt of v was correctly rounded: on this wheel
 * it is not in about 1 case in 6 (MKL), and then p can differ from any correctly
 * rounded implementation by an ulp (m and v never do). bf16 rows: params and state in
 * bf16, torch's default for bf16 params; the last row shows eps entering add_ as
 * bf16(1e-6). */
typedef struct {
    long t;
    double lr, wd, b1, b2, eps;
    uint32_t p0, g, m0, v0, p1, m1, v1;
} torch_case;

static const torch_case TORCH_FP32[] = {
    {1707, 0.008525917026338052, 0.1, 0.95, 0.999, 1e-06, 0xbfad3741, 0x3be331e3, 0x3be11c85, 0x38198157, 0xbfae308f, 0x3be13730, 0x38198da9},
    {1391, 1.2807965160544932e-05, 0.003405095776131102, 0.9, 0.999, 1e-08, 0xbfa46aa8, 0x3e55c18c, 0x3e1a4747, 0x3dc6be4c, 0xbfa46ad6, 0x3e2039e8, 0x3dc6a244},
    {953, 0.06929172764182766, 0.1, 0.9, 0.999, 1e-08, 0xbf913696, 0xbf8f7aa8, 0x3f072ddb, 0x3ff30b7c, 0xbf920a2e, 0x3eb9ee47, 0x3ff2f670},
    {203, 1.7521036685428865e-05, 0.002164418769425249, 0.9, 0.999, 1e-06, 0x3d4d2ee6, 0xb69992c5, 0x3807f371, 0x3009bb3d, 0x3d4d24fa, 0x37f0df53, 0x30099974},
    {670, 4.477358572689701e-05, 0.0, 0.8, 0.98, 1e-08, 0x3f2177ff, 0x37c85a0c, 0x377ef18b, 0x2fb720f9, 0x3f21754b, 0x378e0c3a, 0x2fb9bcfd},
    {2123, 0.037438612107014047, 0.07595228727534756, 0.95, 0.999, 1e-08, 0x3f796911, 0x3c4a07ee, 0xbcecfbaf, 0x3ac0c0c2, 0x3f7f011f, 0xbcdc154d, 0x3ac09484},
    {2175, 0.03765689465686113, 0.1, 0.9, 0.98, 1e-08, 0xbe95c20c, 0xb85b1fa9, 0x387bd83d, 0x318ed172, 0xbea3d733, 0x384cbf73, 0x318dd65f},
    {1521, 0.033217561659386406, 0.1, 0.8, 0.95, 1e-06, 0xbe5031cb, 0xb9d7349d, 0xb8c85d7f, 0x35b73202, 0xbe4ac975, 0xb9263a72, 0x35af2a90},
    {1086, 0.0006056654386841096, 0.01, 0.9, 0.98, 1e-08, 0x3ed1d4ac, 0x35280a60, 0x35cc7a9f, 0x2b4f23b3, 0x3ed15095, 0x35c06ee1, 0x2b4d33e6},
    {57, 3.9774849397737e-05, 0.0, 0.95, 0.95, 1e-06, 0xbf846cbf, 0xbfc2a6e6, 0x3e16c7b2, 0x3ba4133e, 0xbf846cfe, 0x3d82c2b4, 0x3df68cf3},
    {1164, 1.41922601627437e-05, 0.0, 0.8, 0.999, 1e-06, 0xbff835e3, 0x41105538, 0xc11b04f8, 0x3fbd487d, 0xbff8340d, 0xc0be4c43, 0x3fc78286},
    {671, 0.0006759246430157616, 0.1, 0.8, 0.999, 1e-06, 0x3fa1ed98, 0xb7fd6efe, 0xb8424f9e, 0x32060d36, 0x3fa1f24b, 0xb834cacb, 0x3205eee9},
    {1223, 3.1757082900473013e-05, 0.0, 0.8, 0.999, 1e-06, 0xbfcea3b1, 0x3e86b772, 0x40a12bcc, 0x42b727b0, 0xbfcea411, 0x40829eee, 0x42b6f8d6},
    {2648, 0.003644787662977374, 0.009583366897076187, 0.8, 0.98, 1e-06, 0x3e184dc0, 0x3b515356, 0xbb9b8698, 0x38adeb0e, 0x3e199aa7, 0xbb4ef9e1, 0x38aade23},
    {316, 0.041027884953722046, 0.01, 0.9, 0.999, 1e-08, 0x3fa7dfb0, 0x3c934e74, 0x3b8b4a71, 0x37a1e17a, 0x3fa454f5, 0x3bb848c7, 0x37a46e69},
    {398, 0.0002922117393477708, 0.0, 0.95, 0.98, 1e-08, 0x3d92fd9e, 0xbf221812, 0xbe6f1c5f, 0x3bc0122e, 0x3d94489a, 0xbe81c97c, 0x3c617cb7},
    {1996, 0.00021398393971497245, 0.1, 0.8, 0.98, 1e-08, 0x3ede9f4d, 0xbe951ed0, 0x3b8b07cd, 0x3b0b6051, 0x3edeb71b, 0xbd60b085, 0x3b77c5eb},
    {214, 0.08172470083748032, 0.01, 0.95, 0.98, 1e-06, 0x3fd552da, 0xbefa2a85, 0x3f54ad58, 0x3e5dd46b, 0x3fc4177a, 0x3f43ca03, 0x3e5e4850},
    {2705, 0.07510226302824523, 0.1, 0.95, 0.98, 1e-08, 0x3f850224, 0x38386b63, 0xb7eb5fd3, 0x2e96acb9, 0x3f9ad7e4, 0xb7cd29e5, 0x2ee8b005},
    {2214, 0.07676940864116417, 0.01, 0.95, 0.999, 1e-06, 0x3eab188c, 0x35ea9398, 0x36f92f07, 0x2cd04b91, 0x3e38f8f5, 0x36efa81f, 0x2cd031c1},
    {1462, 0.0250823594570889, 0.006721428346556675, 0.9, 0.95, 1e-08, 0xbf3c453e, 0xbd8c9eba, 0xbdcdf00f, 0x37afd8ef, 0xbf1522ea, 0xbdc767ed, 0x39860745},
    {320, 0.00013228967607500192, 0.1, 0.8, 0.98, 1e-06, 0x3f7ae91c, 0x40c384c6, 0xc016ea60, 0x3eaa294a, 0x3f7aedd1, 0xbf2a1990, 0x3f894224},
    {2795, 0.01657538908857068, 0.021577531599493105, 0.95, 0.95, 1e-06, 0xbd8bcc3f, 0xbb61a5b7, 0xbc1b350e, 0x37a3b81f, 0xbd092cb0, 0xbc164479, 0x37a0816f},
    {1170, 5.7628131980501267e-05, 0.0, 0.9, 0.95, 1e-08, 0x3f9e9856, 0x3794dfce, 0xb7f6f612, 0x2c8e07cf, 0x3f9ea2dc, 0xb7cf60af, 0x2dac411d},
    {2548, 0.0017226260558904987, 0.01, 0.9, 0.95, 1e-08, 0x3f46f901, 0x389710d1, 0x3810119e, 0x300604bd, 0x3f46581b, 0x381fe005, 0x3046a1fa},
    {731, 0.014850212280463394, 0.0, 0.9, 0.95, 1e-06, 0x3fe0e4fc, 0x3913c49c, 0xb8befc62, 0x30c4bd9e, 0x3fe38019, 0xb88e556c, 0x3121affa},
    {401, 0.0005021188781227443, 0.01, 0.95, 0.999, 1e-08, 0xbfcac2cb, 0x37bd8826, 0x38fd58c0, 0x2ce3f8b8, 0xbfcc6074, 0x38f30c6a, 0x2cf5b46a},
    {2713, 0.07739289733117946, 0.1, 0.95, 0.95, 1e-08, 0x3e6611b3, 0xbe58c089, 0xbe3deb53, 0x3c300b4d, 0x3eb47af4, 0xbe3f42c9, 0x3c4bf23a},
};
static const torch_case TORCH_BF16[] = {
    {1707, 0.008525917026338052, 0.1, 0.95, 0.999, 1e-06, 0xbfad, 0x3be3, 0x3be1, 0x381a, 0xbfae, 0x3be1, 0x381a},
    {1454, 0.008965905554969027, 0.015798251881555075, 0.8, 0.98, 1e-08, 0x3f60, 0xb62c, 0x3676, 0x2e4a, 0x3f5f, 0x3622, 0x2e47},
    {1391, 1.2807965160544932e-05, 0.003405095776131102, 0.9, 0.999, 1e-08, 0xbfa4, 0x3e56, 0x3e1a, 0x3dc7, 0xbfa4, 0x3e20, 0x3dc7},
    {953, 0.06929172764182766, 0.1, 0.9, 0.999, 1e-08, 0xbf91, 0xbf8f, 0x3f07, 0x3ff3, 0xbf92, 0x3eba, 0x3ff3},
    {2411, 0.00054287636410915, 0.01, 0.9, 0.999, 1e-06, 0x3faa, 0x404f, 0x408f, 0x4194, 0x3faa, 0x408b, 0x4194},
    {203, 1.7521036685428865e-05, 0.002164418769425249, 0.9, 0.999, 1e-06, 0x3d4d, 0xb69a, 0x3808, 0x300a, 0x3d4d, 0x37f1, 0x300a},
    {2015, 0.00020092932666542643, 0.006764990834393569, 0.8, 0.999, 1e-06, 0x3f4b, 0xbdbd, 0xbd0c, 0x3db3, 0x3f4b, 0xbd3c, 0x3db3},
    {670, 4.477358572689701e-05, 0.0, 0.8, 0.98, 1e-08, 0x3f21, 0x37c8, 0x377f, 0x2fb7, 0x3f21, 0x378e, 0x2fb9},
    {393, 0.00011405510676915204, 0.0, 0.95, 0.95, 1e-08, 0x3fc2, 0x383b, 0x3701, 0x3082, 0x3fc2, 0x3720, 0x3089},
    {2123, 0.037438612107014047, 0.07595228727534756, 0.95, 0.999, 1e-08, 0x3f79, 0x3c4a, 0xbced, 0x3ac1, 0x3f7e, 0xbcdc, 0x3ac1},
    {2175, 0.03765689465686113, 0.1, 0.9, 0.98, 1e-08, 0xbe96, 0xb85b, 0x387c, 0x318f, 0xbea4, 0x384d, 0x318e},
    {1521, 0.033217561659386406, 0.1, 0.8, 0.95, 1e-06, 0xbe50, 0xb9d7, 0xb8c8, 0x35b7, 0xbe4a, 0xb926, 0x35af},
    {1086, 0.0006056654386841096, 0.01, 0.9, 0.98, 1e-08, 0x3ed2, 0x3528, 0x35cc, 0x2b4f, 0x3ed1, 0x35c0, 0x2b4d},
    {2972, 0.0001824826141006284, 0.1, 0.95, 0.999, 1e-06, 0xbfd6, 0x3797, 0x36d6, 0x2f78, 0xbfd6, 0x36ea, 0x2f78},
    {57, 3.9774849397737e-05, 0.0, 0.95, 0.95, 1e-06, 0xbf84, 0xbfc3, 0x3e17, 0x3ba4, 0xbf84, 0x3d83, 0x3df7},
    {1164, 1.41922601627437e-05, 0.0, 0.8, 0.999, 1e-06, 0xbff8, 0x4110, 0xc11b, 0x3fbd, 0xbff8, 0xc0be, 0x3fc7},
    {671, 0.0006759246430157616, 0.1, 0.8, 0.999, 1e-06, 0x3fa2, 0xb7fd, 0xb842, 0x3206, 0x3fa2, 0xb834, 0x3206},
    {1223, 3.1757082900473013e-05, 0.0, 0.8, 0.999, 1e-06, 0xbfcf, 0x3e87, 0x40a1, 0x42b7, 0xbfcf, 0x4082, 0x42b7},
    {887, 0.0012597879614032225, 0.0024062367019453785, 0.9, 0.95, 1e-08, 0xbf2f, 0x3ee3, 0xc001, 0x42b3, 0xbf2f, 0xbfe3, 0x42aa},
    {1932, 0.0495923578494588, 0.01, 0.9, 0.98, 1e-06, 0xbff9, 0xbf66, 0x3f06, 0x405f, 0xbffa, 0x3ec3, 0x405c},
    {2297, 0.01703567344914334, 0.01, 0.9, 0.95, 1e-08, 0x3f70, 0xbb40, 0x3a85, 0x301f, 0x3f6c, 0x3a23, 0x34e7},
    {2067, 2.7151116245860433e-05, 0.1, 0.9, 0.95, 1e-06, 0xbea1, 0x3d8c, 0x3d14, 0x3a66, 0xbea1, 0x3d21, 0x3a8c},
    {2320, 3.1508428315928654e-05, 0.000450705719989986, 0.95, 0.98, 1e-08, 0x3d87, 0xba86, 0xbbb3, 0x3b80, 0x3d87, 0xbbac, 0x3b7b},
    {1230, 0.004138646503921756, 0.1, 0.95, 0.95, 1e-06, 0xbd00, 0xb715, 0xb6f3, 0x2e0b, 0xbcdb, 0xb6f6, 0x2e15},
};

/* GP_ADAMW_TORCH_CPU reproduces every row bit for bit (param, m and v); the other two
 * orders do not (the table tells the orders apart). */
static void test_torch_cpu_golden(void **state)
{
    (void)state;
    const torch_case *tabs[] = {TORCH_FP32, TORCH_BF16};
    const size_t ns[] = {sizeof TORCH_FP32 / sizeof TORCH_FP32[0], sizeof TORCH_BF16 / sizeof TORCH_BF16[0]};
    const gp_format fmts[] = {GP_FP32, GP_BF16};
    for (int k = 0; k < 2; k++) {
        int differs[3] = {0, 0, 0};
        for (size_t i = 0; i < ns[k]; i++) {
            const torch_case *c = &tabs[k][i];
            gp_adamw_scalars s = gp_adamw_scalars_make(c->lr, c->b1, c->b2, c->eps, c->wd, c->t);
            for (int e = 0; e < 3; e++) {
                uint32_t m = c->m0, v = c->v0, master = 0, comp = 0;
                uint32_t p = gp_adamw_step(config(fmts[k], fmts[k], GP_ADAMW_PLAIN, GP_RNE, EVALS[e]), &s,
                                           c->p0, &master, &comp, &m, &v, gp_adamw_load(fmts[k], c->g), 0, 0,
                                           NULL, NULL);
                int same = p == c->p1 && m == c->m1 && v == c->v1;
                if (EVALS[e] == GP_ADAMW_TORCH_CPU && !same)
                    fail_msg("%s row %zu: p/m/v 0x%x 0x%x 0x%x, torch 0x%x 0x%x 0x%x", k ? "bf16" : "fp32", i,
                             p, m, v, c->p1, c->m1, c->v1);
                differs[e] += !same;
            }
        }
        printf("# %s rows differing from torch: cuda %d, cpu %d, unfused %d of %zu\n", k ? "bf16" : "fp32",
               differs[0], differs[1], differs[2], ns[k]);
        if (k == 0)
            assert_true(differs[0] > 0 && differs[2] > 0);
    }
}

/* ---- gp_torch_sqrtf_zen4: torch's CPU fp32 sqrt on AMD Zen 4 (kernels/arith/gp_torch_sqrt.h) ---- */

/* torch.sqrt of these fp32 inputs as torch 2.15.0 (x86-64 PyPI wheel) computed them on an
 * AMD EPYC Zen 4: normal values of both exponent parities, MKL's scalar-path inputs (a
 * subnormal, the top binade's 0x7f7fc99e is on the vector path, zeros, inf), and the
 * last four, random inputs in [1, 5) where torch is one ulp off the IEEE sqrt
 * (0x4001a22a, 0x3fbde225, 0x3f815745, 0x3fde5fad). tests/python/test_torch_sqrt.py
 * compares the model with torch on 10^7 inputs on the host. */
static const uint32_t TORCH_SQRT_ZEN4[][2] = {
    {0x40000000u, 0x3fb504f3u}, {0x40400000u, 0x3fddb3d7u}, {0x3dcccccdu, 0x3ea1e89bu},
    {0x358637bdu, 0x3a83126fu}, {0x3200d959u, 0x38b59e62u}, {0x71977617u, 0x588b3cc4u},
    {0x7f7fc99eu, 0x5f7fe4ceu}, {0x000ae398u, 0x1f155598u}, {0x00000000u, 0x00000000u},
    {0x80000000u, 0x80000000u}, {0x7f800000u, 0x7f800000u}, {0x408349abu, 0x4001a22bu},
    {0x400cd7b3u, 0x3fbde226u}, {0x3f82b222u, 0x3f815744u}, {0x40412a13u, 0x3fde5facu},
};

static void test_torch_sqrt_zen4(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof TORCH_SQRT_ZEN4 / sizeof TORCH_SQRT_ZEN4[0]; i++) {
        uint32_t got = gp_f32_bits(gp_torch_sqrtf_zen4(gp_f32_from_bits(TORCH_SQRT_ZEN4[i][0])));
        if (got != TORCH_SQRT_ZEN4[i][1])
            fail_msg("sqrt(0x%08x) = 0x%08x, torch 0x%08x", TORCH_SQRT_ZEN4[i][0], got, TORCH_SQRT_ZEN4[i][1]);
    }
    assert_true(isnan(gp_torch_sqrtf_zen4(-1.0f)));
    assert_true(isnan(gp_torch_sqrtf_zen4(gp_f32_from_bits(0x7fc00001u))));
    /* with bf16 state the evaluation is GP_ADAMW_TORCH_CPU's: torch's bf16 sqrt is IEEE */
    for (size_t i = 0; i < sizeof TORCH_BF16 / sizeof TORCH_BF16[0]; i++) {
        const torch_case *c = &TORCH_BF16[i];
        gp_adamw_scalars s = gp_adamw_scalars_make(c->lr, c->b1, c->b2, c->eps, c->wd, c->t);
        uint32_t m = c->m0, v = c->v0, master = 0, comp = 0;
        uint32_t p = gp_adamw_step(config(GP_BF16, GP_BF16, GP_ADAMW_PLAIN, GP_RNE, GP_ADAMW_TORCH_CPU_ZEN4), &s,
                                   c->p0, &master, &comp, &m, &v, gp_adamw_load(GP_BF16, c->g), 0, 0, NULL, NULL);
        assert_true(p == c->p1 && m == c->m1 && v == c->v1);
    }
}

/* ---- gp_torch_sqrtf_intel_avx512: MKL's AVX-512 sqrt kernel (kernels/arith/gp_torch_sqrt.h) ---- */

/* mkl_vml_kernel_sSqrt_Z0HAynn of torch 2.15.0's x86-64 wheel, called directly on an AMD
 * EPYC Zen 4 (scripts/mkl_sqrt_kernels.py): both exponent parities, powers of 4 (exact),
 * FLT_MAX, subnormals and x < 2^-78 (the scaled residual), zeros, inf, and the last four,
 * random inputs in [1, 4) where the kernel is one ulp off the IEEE sqrt.
 * tests/python/test_torch_sqrt.py compares the model with the kernel on 10^7 inputs. */
static const uint32_t MKL_SQRT_Z0[][2] = {
    {0x40000000u, 0x3fb504f3u}, {0x40400000u, 0x3fddb3d7u}, {0x40800000u, 0x40000000u},
    {0x3f800000u, 0x3f800000u}, {0x3dcccccdu, 0x3ea1e89bu}, {0x358637bdu, 0x3a83126fu},
    {0x7f7fffffu, 0x5f7fffffu}, {0x000ae398u, 0x1f155598u}, {0x00000001u, 0x1a3504f3u},
    {0x0d000000u, 0x263504f3u}, {0x1b000000u, 0x2d3504f3u}, {0x19c5e3a1u, 0x2c9f2747u},
    {0x00000000u, 0x00000000u}, {0x80000000u, 0x80000000u}, {0x7f800000u, 0x7f800000u},
    {0x40320ef0u, 0x3fd58069u}, {0x401e33ccu, 0x3fc93ee0u}, {0x3f8260b0u, 0x3f812ef1u},
    {0x3fdd7983u, 0x3fa85ef2u},
};

static void test_torch_sqrt_intel_avx512(void **state)
{
    (void)state;
    /* vrsqrt14ps by Intel's reference algorithm, by hand: 1 and 4 exact; 2 is segment 32
     * at k = -512: (128*367881 + 707*512) >> 9 = 92677, i.e. 92677 * 2^-17 */
    assert_int_equal(gp_f32_bits(gp_torch_rsqrt14(1.0f)), 0x3f800000u);
    assert_int_equal(gp_f32_bits(gp_torch_rsqrt14(4.0f)), 0x3f000000u);
    assert_true(gp_torch_rsqrt14(2.0f) == 92677.0f * 0x1p-17f);
    for (size_t i = 0; i < sizeof MKL_SQRT_Z0 / sizeof MKL_SQRT_Z0[0]; i++) {
        uint32_t got = gp_f32_bits(gp_torch_sqrtf_intel_avx512(gp_f32_from_bits(MKL_SQRT_Z0[i][0])));
        if (got != MKL_SQRT_Z0[i][1])
            fail_msg("sqrt(0x%08x) = 0x%08x, MKL 0x%08x", MKL_SQRT_Z0[i][0], got, MKL_SQRT_Z0[i][1]);
    }
    assert_true(isnan(gp_torch_sqrtf_intel_avx512(-1.0f)));
    assert_true(isnan(gp_torch_sqrtf_intel_avx512(gp_f32_from_bits(0x7fc00001u))));
}

/* ---- gp_torch_sqrtf_host: torch's CPU fp32 sqrt as MKL computes it on this host ---- */

/* On an AMD CPU (MKL's generic SSE kernel, EX) whose rsqrtss equals the Zen 4 table of
 * gp_torch_rsqrtps on all of [1, 4) (the table's whole domain; other binades scale
 * exactly), torch_cpu_host must be gp_torch_sqrtf_zen4, which equals torch's sqrt on
 * that Zen 4 on all 2^32 inputs: on every float of [1, 4), and on every 4093rd positive
 * float plus the edges of MKL's vector path (subnormals, the top 4095 finite values
 * that EX takes to its scalar path and L9 does not), zeros, inf, negatives and NaN.
 * Skipped on any other host (an Intel CPU, another AMD rsqrtps, a non-x86-64 build),
 * where torch_cpu_host is checked against torch itself (tests/python/test_torch_sqrt.py). */
static void test_torch_sqrt_host(void **state)
{
    (void)state;
#if GP_TORCH_SQRT_HOST
    if (!__builtin_cpu_is("amd")) {
        printf("# skipped: not an AMD CPU\n");
        skip();
    }
    for (uint32_t b = 0x3f800000u; b < 0x40800000u; b++) {
        float x = gp_f32_from_bits(b);
        if (gp_f32_bits(_mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(x)))) != gp_f32_bits(gp_torch_rsqrtps(x))) {
            printf("# skipped: this AMD CPU's rsqrtss differs from the Zen 4 table at 0x%08x\n", b);
            skip();
        }
    }
    assert_int_equal(gp_torch_sqrt_host_kernel(), GP_MKL_SQRT_SSE);
    long n = 0, off = 0;
    for (uint32_t b = 0x3f800000u; b < 0x40800000u; b++, n++) {
        float x = gp_f32_from_bits(b), got = gp_torch_sqrtf_host(x), want = gp_torch_sqrtf_zen4(x);
        if (gp_f32_bits(got) != gp_f32_bits(want))
            fail_msg("[1, 4): host sqrt(0x%08x) = 0x%08x, zen4 0x%08x", b, gp_f32_bits(got), gp_f32_bits(want));
        off += got != sqrtf(x);
    }
    /* about 17% of [1, 4) is an ulp off the IEEE sqrt on Zen 4 (gp_torch_sqrt.h): the
     * comparison above is not between two IEEE sqrts */
    printf("# [1, 4): %ld of %ld off the IEEE sqrt\n", off, n);
    assert_true(off > n / 8 && off < n / 4);
    static const uint32_t edges[] = {0x00000001u, 0x007fffffu, 0x00800000u, 0x00800001u, 0x7f7ff000u,
                                     0x7f7ff001u, 0x7f7ffabcu, 0x7f7fffffu, 0x00000000u, 0x80000000u,
                                     0x7f800000u, 0xff800000u, 0xbf800000u, 0x80000001u};
    for (uint64_t i = 0; i < sizeof edges / sizeof edges[0] + 0x80000000u / 4093u; i++) {
        uint32_t b = i < sizeof edges / sizeof edges[0] ? edges[i]
                                                        : (uint32_t)((i - sizeof edges / sizeof edges[0]) * 4093u);
        uint32_t got = gp_f32_bits(gp_torch_sqrtf_host(gp_f32_from_bits(b)));
        uint32_t want = gp_f32_bits(gp_torch_sqrtf_zen4(gp_f32_from_bits(b)));
        if (got != want && !(isnan(gp_f32_from_bits(got)) && isnan(gp_f32_from_bits(want))))
            fail_msg("host sqrt(0x%08x) = 0x%08x, zen4 0x%08x", b, got, want);
    }
    assert_true(isnan(gp_torch_sqrtf_host(gp_f32_from_bits(0x7fc00001u))));
    /* the evaluation: gp_adamw_sqrtf_fp32 takes it for torch_cpu_host */
    assert_int_equal(gp_f32_bits(gp_adamw_sqrtf_fp32(GP_ADAMW_TORCH_CPU_HOST, gp_f32_from_bits(0x400cd7b3u))),
                     0x3fbde226u); /* TORCH_SQRT_ZEN4: torch's value, an ulp above IEEE's */
#else
    printf("# skipped: not an x86-64 host build\n");
    skip();
#endif
}

/* ---- GP_ADAMW_TORCH_FUSED_CPU: torch's CPU fused AdamW (hand-worked cases) ---- */

static gp_adamw_config fused_config(gp_format f, int tail)
{
    gp_adamw_config c = config(f, f, GP_ADAMW_TORCH_FUSED_CPU, GP_RNE, GP_ADAMW_TORCH_CPU);
    c.tail = tail;
    return c;
}

/* The remainder: the last n mod 8 (fp32) or n mod 16 (bf16, fp16) elements. */
static void test_fused_tail_rule(void **state)
{
    (void)state;
    assert_int_equal(gp_adamw_fused_tail(GP_FP32, 21), 16);
    assert_int_equal(gp_adamw_fused_tail(GP_FP32, 24), 24);
    assert_int_equal(gp_adamw_fused_tail(GP_FP32, 7), 0);
    assert_int_equal(gp_adamw_fused_tail(GP_BF16, 21), 16);
    assert_int_equal(gp_adamw_fused_tail(GP_BF16, 47), 32);
    assert_int_equal(gp_adamw_fused_tail(GP_FP16, 15), 0);
    assert_true(gp_adamw_fused_ok(GP_BF16, GP_BF16, GP_RNE, 0));
    assert_false(gp_adamw_fused_ok(GP_BF16, GP_FP32, GP_RNE, 0));
    assert_false(gp_adamw_fused_ok(GP_BF16, GP_BF16, GP_STOCHASTIC, 0));
    assert_false(gp_adamw_fused_ok(GP_BF16, GP_BF16, GP_RNE, 1));
}

/* v' = v*beta2 + ((1 - beta2)*g)*g with beta2 = 0.5, g = 1 + 2^-12, v = 2^-24 (fp32).
 * (1 - beta2)*g = 0.5 + 2^-13 and v*beta2 = 2^-25 are exact; g^2/2 = 0.5 + 2^-12 + 2^-25
 * needs one bit more than fp32 has in [0.5, 1) (ulp 2^-24).
 *  vector code, fma(0.5*g, g, 2^-25): the exact 0.5 + 2^-12 + 2^-24 is an fp32: v' is it.
 *  remainder, fma(v, 0.5, fl(g*g/2)): fl(0.5 + 2^-12 + 2^-25) is a tie, to even 0.5 + 2^-12;
 *    + 2^-25 is a tie again, to even: v' = 0.5 + 2^-12, one ulp lower.
 * The single-tensor CPU order (fma((1 - beta2)*g, g, fl(v*beta2))) agrees with the vector
 * code. m: beta1 = 0.9 (weight 0.1f < 0.5), m = 0: fma(0.1f, g, 0) = fl(0.1f*g) in both. */
static void test_fused_v_fma_by_position(void **state)
{
    (void)state;
    float g = 1.0f + 0x1p-12f;
    uint32_t want_v[2] = {gp_f32_bits(0.5f + 0x1p-12f + 0x1p-24f), gp_f32_bits(0.5f + 0x1p-12f)};
    for (int tail = 0; tail < 2; tail++) {
        elem x = elem_init(GP_FP32, 1.0);
        x.v = gp_f32_bits(0x1p-24f);
        elem_step(fused_config(GP_FP32, tail), &x, g, 1e-3, 0.9, 0.5, 1e-8, 0.0, 2, 0, NULL, NULL);
        printf("# fused %s: v' = %a, m' = %a\n", tail ? "remainder" : "vector", f32v(x.v), f32v(x.m));
        assert_int_equal(x.v, want_v[tail]);
        assert_int_equal(x.m, gp_f32_bits(0.1f * g));
    }
    elem y = elem_init(GP_FP32, 1.0);
    y.v = gp_f32_bits(0x1p-24f);
    elem_step(config(GP_FP32, GP_FP32, GP_ADAMW_PLAIN, GP_RNE, GP_ADAMW_TORCH_CPU), &y, g, 1e-3, 0.9, 0.5,
              1e-8, 0.0, 2, 0, NULL, NULL);
    assert_int_equal(y.v, want_v[0]);
}

/* beta1 = 0: lerp weight 1, m = +0, g = -0 (g - m = -0). Vector code: fma(1 - 1, -0, -0) =
 * (+0 * -0) + -0 = -0 + -0 = -0. Remainder: fma(-(-0), 1 - 1, -0) = (+0 * +0) + -0 = +0.
 * The single-tensor CPU eval writes the vector form (-0); the CUDA eval the other (+0).
 * The param: w*decay + (-lr * m')/den = 1 + (-0) = 1, unchanged and no update to lose. */
static void test_fused_lerp_signed_zero(void **state)
{
    (void)state;
    for (int tail = 0; tail < 2; tail++) {
        elem x = elem_init(GP_FP32, 1.0);
        unsigned ev = 0;
        elem_step(fused_config(GP_FP32, tail), &x, -0.0f, 1e-3, 0.0, 0.999, 1e-8, 0.0, 1, 0, &ev, NULL);
        assert_int_equal(x.m, tail ? 0u : 0x80000000u);
        assert_int_equal(x.p, gp_f32_bits(1.0f));
        assert_false(ev & GP_EV_STALE);
    }
    const gp_adamw_eval evs[2] = {GP_ADAMW_TORCH_CPU, GP_ADAMW_TORCH_CUDA};
    const uint32_t want[2] = {0x80000000u, 0u};
    for (int k = 0; k < 2; k++) {
        elem x = elem_init(GP_FP32, 1.0);
        elem_step(config(GP_FP32, GP_FP32, GP_ADAMW_PLAIN, GP_RNE, evs[k]), &x, -0.0f, 1e-3, 0.0, 0.999, 1e-8,
                  0.0, 1, 0, NULL, NULL);
        assert_int_equal(x.m, want[k]);
    }
}

/* bf16 param 1.0, g = 1, m = v = 0, t = 1, lr = 2^-9, beta1 = 0, beta2 = 0.75,
 * eps = 2^-30, wd = 0.5; every scalar exact: decay = 1 - 2^-10, bc1 = 1 (step_size 2^-9),
 * bc2 = 0.25 (sqrt 0.5). m' = fma(0, 1, 1) = 1; v' = fma(0.25, 1, 0) = 0.25; den =
 * sqrt(0.25)/0.5 + 2^-30 = 1 (2^-30 below half an ulp of 1); update -2^-9.
 *  fused: d = 1 - 2^-10 kept in fp32, d - 2^-9 = 1 - 3*2^-10, stored once: the bf16
 *    neighbours are 1 - 2^-8 (2^-10 away) and 1 (3*2^-10 away): 0x3F7F.
 *  PLAIN (param.mul_ stores first): bf16(1 - 2^-10) = 1 (a quarter ulp below), then
 *    1 - 2^-9, a tie between 0x3F7F and 0x3F80, to even: 0x3F80, the weight is stale.
 * m and v stored as bf16 1.0 (0x3F80) and 0.25 (0x3E80) by both. */
static void test_fused_bf16_one_store(void **state)
{
    (void)state;
    for (int tail = 0; tail < 2; tail++) {
        elem x = elem_init(GP_BF16, 1.0);
        unsigned ev = 0;
        elem_step(fused_config(GP_BF16, tail), &x, 1.0f, 0x1p-9, 0.0, 0.75, 0x1p-30, 0.5, 1, 0, &ev, NULL);
        assert_int_equal(x.p, 0x3F7F);
        assert_int_equal(x.m, 0x3F80);
        assert_int_equal(x.v, 0x3E80);
        assert_false(ev & GP_EV_STALE);
    }
    elem y = elem_init(GP_BF16, 1.0);
    unsigned ev = 0;
    elem_step(config(GP_BF16, GP_BF16, GP_ADAMW_PLAIN, GP_RNE, GP_ADAMW_TORCH_CPU), &y, 1.0f, 0x1p-9, 0.0, 0.75,
              0x1p-30, 0.5, 1, 0, &ev, NULL);
    assert_int_equal(y.p, 0x3F80);
    assert_true(ev & GP_EV_STALE);
}

/* ---- the fp32 step against the exact trajectory, and wrong AdamWs ---- */

#define REF_STEPS 100

/* The test's gradients: magnitudes log-uniform in [1e-7, 1e-6], small enough that eps
 * weighs in the step (sqrt(v) ~ 5e-7 against eps 1e-8: 2% of the denominator, so an
 * eps off by a factor shows) and decides it when moved inside the root (1e-8 against
 * v ~ 3e-13); positive with probability 3/4 so that the weight moves. */
static float test_grad(uint64_t *s)
{
    double mag = 1e-7 * pow(10.0, (double)(gp_test_next(s) >> 11) * 0x1p-53);
    return (float)((gp_test_next(s) & 3) ? mag : -mag);
}

/* Wrong AdamWs, fp32, the CUDA order otherwise: eps inside the square root
 * (sqrt(v/bc2 + eps)), or Adam's coupled L2 decay (g += wd*w, no decoupled decay). */
enum { WRONG_EPS_INSIDE = 0, WRONG_COUPLED_DECAY = 1 };
static float wrong_step(int kind, float w, float *m, float *v, float g, double lr, double b1,
                        double b2, double eps, double wd, long t)
{
    gp_adamw_scalars s = gp_adamw_scalars_make(lr, b1, b2, eps, wd, t);
    if (kind == WRONG_COUPLED_DECAY)
        g = g + (float)wd * w;
    else
        w = w * s.decay;
    *m = *m + s.lerp_w * (g - *m);
    *v = *v * s.beta2 + s.addcmul_v * (g * g);
    float den = kind == WRONG_EPS_INSIDE ? sqrtf(*v * (float)(1.0 / s.bc2) + s.eps)
                                         : sqrtf(*v) * s.inv_bc2_sqrt + s.eps;
    return w + s.neg_step * (*m / den);
}

/* 100 steps of random gradients under a cosine schedule with warmup (10 / 100, base 1e-3,
 * min 1e-4), wd 0.01, w0 = 0.5: at every step and for every evaluation order the fp32
 * step is within bound_step's derived bound of the exact trajectory (ONE_STORE and
 * PLAIN are the same for fp32). The bound grows by about 4u|w| a step (the decay and
 * the final sum), so ~400u|w| after 100 steps; the actual error is far smaller (printed).
 * Then both wrong variants end more than 10 bounds away: detectable. */
static void test_fp32_matches_reference(void **state)
{
    (void)state;
    uint64_t seed0 = gp_test_seed(20240601);
    gp_adamw_ref_hparams h = {0.9, 0.999, 1e-8, 0.01};
    gp_schedule_params sp = sched(GP_LR_COSINE, 10, REF_STEPS, 1e-3, 1e-4, 0, 0);
    static float grads[REF_STEPS + 1];
    static double wex[REF_STEPS + 1], bnd[REF_STEPS + 1];
    uint64_t s = seed0;
    for (long t = 1; t <= REF_STEPS; t++)
        grads[t] = test_grad(&s);

    gp_adamw_ref r;
    gp_adamw_ref_init(&r, 0.5);
    gp_adamw_err_bound b = {0, 0, 0};
    for (long t = 1; t <= REF_STEPS; t++) {
        double lr = gp_schedule_lr(&sp, t);
        gp_adamw_exact_step es;
        ref_step(&r, &es, (double)grads[t], lr, &h, t);
        gp_adamw_bound_step(&b, &h, lr, t, (double)grads[t], &es);
        wex[t] = es.w1;
        bnd[t] = b.ew;
    }
    gp_adamw_ref_clear(&r);
    printf("# exact w: 0.5 -> %.9g; bound after %d steps %.3g (%.0f u|w|)\n", wex[REF_STEPS],
           REF_STEPS, bnd[REF_STEPS], bnd[REF_STEPS] / (U * fabs(wex[REF_STEPS])));

    for (int e = 0; e < 3; e++) {
        elem x = elem_init(GP_FP32, 0.5);
        double worst = 0;
        for (long t = 1; t <= REF_STEPS; t++) {
            unsigned ev = 0;
            elem_step(config(GP_FP32, GP_FP32, GP_ADAMW_ONE_STORE, GP_RNE, EVALS[e]), &x, grads[t],
                      gp_schedule_lr(&sp, t), h.beta1, h.beta2, h.eps, h.weight_decay, t, 0, &ev, NULL);
            double err = fabs(f32v(x.p) - wex[t]);
            if (err > bnd[t])
                fail_msg("%s step %ld (seed %llu): |%a - %a| = %.3g > bound %.3g", EVAL_NAMES[e], t,
                         (unsigned long long)seed0, f32v(x.p), wex[t], err, bnd[t]);
            if (err / bnd[t] > worst)
                worst = err / bnd[t];
        }
        printf("# %s: final %a, error %.3g, worst err/bound %.4f\n", EVAL_NAMES[e], f32v(x.p),
               fabs(f32v(x.p) - wex[REF_STEPS]), worst);
    }

    for (int kind = 0; kind < 2; kind++) {
        float w = 0.5f, m = 0, v = 0;
        for (long t = 1; t <= REF_STEPS; t++)
            w = wrong_step(kind, w, &m, &v, grads[t], gp_schedule_lr(&sp, t), h.beta1, h.beta2, h.eps,
                           h.weight_decay, t);
        double dev = fabs((double)w - wex[REF_STEPS]);
        printf("# wrong variant %s: final %.9g, |w - exact| = %.3g = %.0f bounds\n",
               kind == WRONG_EPS_INSIDE ? "eps-inside-sqrt" : "coupled-decay", (double)w, dev,
               dev / bnd[REF_STEPS]);
        if (!(dev > 10 * bnd[REF_STEPS]))
            fail_msg("wrong variant %d within 10 bounds (seed %llu)", kind, (unsigned long long)seed0);
    }
}

/* ---- stochastic rounding ---- */

/* rbits = 0 rounds up in magnitude whenever the discarded fraction's top 32 bits are
 * non-zero, rbits = 0xffffffff never rounds up: the two results are the neighbours
 * around the value (equal when it is exact or its fraction is below 2^-32 ulp), and the
 * RNE result is one of them; any other rbits gives one of the two. m and v do not depend
 * on the rounding. bf16 (fp32 opmath, then the store) and fp32 (the exact sum) params,
 * PLAIN (with decay stored first) and ONE_STORE. */
static void test_stochastic_neighbours(void **state)
{
    (void)state;
    uint64_t seed = gp_test_seed(77);
    const gp_format pfs[] = {GP_BF16, GP_FP32, GP_FP16};
    int differing[3] = {0, 0, 0};
    for (int i = 0; i < 20000; i++) {
        gp_format pf = pfs[i % 3];
        gp_adamw_variant var = (i / 3) & 1 ? GP_ADAMW_PLAIN : GP_ADAMW_ONE_STORE;
        gp_adamw_eval ev_order = EVALS[(i / 6) % 3];
        double w0 = 0.5 + 1.5 * (double)(gp_test_next(&seed) >> 11) * 0x1p-53;
        float g = test_grad(&seed) * 1e4f;
        long t = (long)(gp_test_next(&seed) % 50) + 1;
        elem base = elem_init(pf, w0);
        base.m = gp_f32_bits(g * 0.5f);
        base.v = gp_f32_bits(g * g * 2.0f);
        uint32_t rb = gp_rand_u32(seed, 3, (uint64_t)i);
        elem a = base, up = base, dn = base, rnd = base;
        uint32_t rne = elem_step(config(pf, GP_FP32, var, GP_RNE, ev_order), &a, g, 1e-2, 0.9, 0.999,
                                 1e-8, 0.1, t, 0, NULL, NULL);
        uint32_t u = elem_step(config(pf, GP_FP32, var, GP_STOCHASTIC, ev_order), &up, g, 1e-2, 0.9,
                               0.999, 1e-8, 0.1, t, 0u, NULL, NULL);
        uint32_t d = elem_step(config(pf, GP_FP32, var, GP_STOCHASTIC, ev_order), &dn, g, 1e-2, 0.9,
                               0.999, 1e-8, 0.1, t, 0xffffffffu, NULL, NULL);
        uint32_t x = elem_step(config(pf, GP_FP32, var, GP_STOCHASTIC, ev_order), &rnd, g, 1e-2, 0.9,
                               0.999, 1e-8, 0.1, t, rb, NULL, NULL);
        if (!(u == d || u == d + 1)) /* positive weights: up is one pattern above down */
            fail_msg("fmt %d: up 0x%x, down 0x%x not neighbours (w0 %a g %a t %ld)", pf, u, d, w0, g, t);
        if (!(rne == u || rne == d))
            fail_msg("fmt %d: rne 0x%x not in {0x%x, 0x%x} (w0 %a g %a t %ld)", pf, rne, d, u, w0, g, t);
        if (!(x == u || x == d))
            fail_msg("fmt %d: rbits 0x%x gives 0x%x not in {0x%x, 0x%x}", pf, rb, x, d, u);
        assert_true(up.m == a.m && up.v == a.v && dn.m == a.m && dn.v == a.v);
        differing[i % 3] += u != d;
    }
    /* each format: most of the 6667 steps are inexact, so the two roundings differ */
    printf("# steps with two distinct neighbours: bf16 %d, fp32 %d, fp16 %d of ~6667 each\n",
           differing[0], differing[1], differing[2]);
    for (int f = 0; f < 3; f++)
        assert_true(differing[f] > 6000);
}

/* ---- events ---- */

/* A gradient of 1e-20: v = 0.001 * 1e-40 ~ 1e-43 underflows in fp32 and in bf16 (same
 * range) — UNDERFLOW in ev_state, and none in the weight's events; a bf16 param store
 * is INEXACT. The three evaluation orders agree on the state's events here. */
static void test_events(void **state)
{
    (void)state;
    const gp_format sfs[] = {GP_FP32, GP_BF16};
    for (int q = 0; q < 2; q++)
        for (int e = 0; e < 3; e++) {
            elem x = elem_init(GP_FP32, 1.0);
            unsigned ev = 0, evs = 0;
            elem_step(config(GP_FP32, sfs[q], GP_ADAMW_PLAIN, GP_RNE, EVALS[e]), &x, 1e-20f, 1e-3, 0.9,
                      0.999, 1e-8, 0.0, 1, 0, &ev, &evs);
            if (!(evs & GP_EV_UNDERFLOW) || (ev & GP_EV_UNDERFLOW))
                fail_msg("state %d %s: ev 0x%x ev_state 0x%x", q, EVAL_NAMES[e], ev, evs);
        }
    elem x = elem_init(GP_BF16, 1.0);
    unsigned ev = 0;
    elem_step(config(GP_BF16, GP_FP32, GP_ADAMW_PLAIN, GP_RNE, GP_ADAMW_TORCH_CUDA), &x, 1.0f, 0.3,
              0.9, 0.999, 1e-8, 0.0, 1, 0, &ev, NULL);
    assert_true((ev & GP_EV_INEXACT) && !(ev & GP_EV_STALE));
    assert_true(x.p == gp_fmt_from_f64(GP_BF16, 0.7, GP_RNE, 0, 0, NULL));
}

/* ---- the CPU backend's vectorised path ---- */

/* A random value for the fast-path test: mostly normal magnitudes over a wide range, and
 * signed zeros, subnormals, values near the bf16/fp32 overflow, infinities and NaNs. */
static double fast_value(uint64_t *s, int positive)
{
    uint64_t r = gp_test_next(s);
    double sign = positive || (r & 1) ? 1.0 : -1.0;
    switch ((r >> 1) % 32) {
    case 0: return sign * 0.0;
    case 1: return sign * ldexp((double)(1 + (r >> 8) % 1000), -150 + (int)((r >> 20) % 12)); /* fp32 subnormal */
    case 2: return sign * 3.3e38;
    case 3: return sign * INFINITY;
    case 4: return NAN;
    default: return sign * ldexp(1.0 + (double)((r >> 8) % 100000) / 100000, (int)((r >> 30) % 80) - 60);
    }
}

/* The orders the fast path takes: zen4 and intel_avx512 only with a bf16 state (last). */
static const gp_adamw_eval FAST_EVALS[] = {GP_ADAMW_TORCH_CUDA, GP_ADAMW_TORCH_CPU, GP_ADAMW_UNFUSED,
                                           GP_ADAMW_TORCH_CPU_FOREACH, GP_ADAMW_TORCH_CPU_ZEN4,
                                           GP_ADAMW_TORCH_CPU_INTEL_AVX512};
static const char *const FAST_EVAL_NAMES[] = {"cuda", "cpu", "unfused", "cpu_foreach", "cpu_zen4", "cpu_intel_avx512"};
enum { NFAST_EVALS = 6 };

/* The CPU backend's adamw on whole arrays (gp_cpu_adamw_fast where gp_cpu_adamw_fast_ok)
 * equals a loop of gp_adamw_step with events requested (the instrumented path, binary64
 * emulation of every rounding): every output bit for bit, NaNs by NaN-ness (x86 returns
 * the first NaN operand, and a compiler may commute an operation, as gp_fmt_agree says).
 * Every variant (torch's fused CPU kernel included) and evaluation order the path takes (torch's CPU
 * orders with MKL's fp32 sqrt only with a bf16 state; with an fp32 one the path refuses), params and
 * state fp32/bf16, grads fp32/bf16, lerp weights below and above 1/2 (beta1 0.9, 0.3, 0),
 * addcmul value 1 (beta2 0), beta2 and a decay factor off the bf16 grid, weight decay on and off, a loss-scale factor, and lengths
 * 1..40 and 4096 + 13 (every n mod 8 and n mod 16: the fused kernel's remainder). */
static void test_cpu_fast_path_equals_step(void **state)
{
    (void)state;
    uint64_t seed = gp_test_seed(2026);
    enum { NMAX = 4096 + 13 };
    static uint8_t grad[NMAX * 4], param[NMAX * 4], m[NMAX * 4], v[NMAX * 4], comp[NMAX * 4];
    static uint32_t master[NMAX];
    static elem want[NMAX];
    static float gval[NMAX];
    const gp_format fmts[] = {GP_FP32, GP_BF16};
    /* beta2 0.95 and a decay of 1 - 0.1 * 0.5 = 0.95 are not bf16 numbers (0.94921875 is
     * the nearest): there torch_cpu_foreach's rounded scalars differ from the others'
     * (0.999 and 1 - 1e-5 round to 1 and change nothing a bf16 product keeps) */
    const double b1s[] = {0.9, 0.3, 0.0}, b2s[] = {0.999, 0.0, 0.95};
    const gp_plugin *cpu = gp_cpu_backend();
    int fast_configs = 0;
    long cases = 0;
    for (int vi = GP_ADAMW_PLAIN; vi <= GP_ADAMW_TORCH_FUSED_CPU; vi++)
        for (int ei = 0; ei < NFAST_EVALS; ei++)
            for (int pfi = 0; pfi < 2; pfi++)
                for (int sfi = 0; sfi < 2; sfi++)
                    for (int gfi = 0; gfi < 2; gfi++) {
                        gp_format pf = fmts[pfi], sf = fmts[sfi], gf = fmts[gfi];
                        gp_adamw_config c = config(pf, sf, (gp_adamw_variant)vi, GP_RNE, FAST_EVALS[ei]);
                        if (vi == GP_ADAMW_TORCH_FUSED_CPU && (sf != pf || ei != 1))
                            continue; /* torch's kernel: one dtype; its order is its own */
                        /* MKL's fp32 sqrt (zen4, intel_avx512) is the scalar path's */
                        if (ei >= 4 && sf == GP_FP32) {
                            assert_false(gp_cpu_adamw_fast_ok(c, gf));
                            continue;
                        }
                        assert_true(gp_cpu_adamw_fast_ok(c, gf)); /* the path under test runs */
                        fast_configs++;
                        for (int h = 0; h < 3 * 3 * 3; h++) {
                            int wdi = (h / 9) % 3;
                            double b1 = b1s[h % 3], b2 = b2s[(h / 3) % 3], wd = wdi == 1 ? 0.01 : wdi == 2 ? 0.5 : 0.0;
                            double lr = wdi == 2 ? 0.1 : 1e-3;
                            float inv = h % 5 == 0 ? 0x1p-16f : 1.0f;
                            long t = 1 + h % 7;
                            gp_adamw_scalars s = gp_adamw_scalars_make(lr, b1, b2, 1e-8, wd, t);
                            for (size_t n = 1; n <= NMAX; n = n == 40 ? NMAX : n + 1) {
                                for (size_t i = 0; i < n; i++) {
                                    uint32_t gb = gp_fmt_from_f64(gf, fast_value(&seed, 0) * 1e-2, GP_RNE, 0, 0, NULL);
                                    gp_pack_set(gf, grad, i, gb);
                                    gval[i] = gp_f32_from_bits(gp_fmt_to_f32_bits(gf, gb)) * inv;
                                    elem x;
                                    x.p = gp_fmt_from_f64(pf, fast_value(&seed, 0), GP_RNE, 0, 0, NULL);
                                    x.master = gp_fmt_from_f64(GP_FP32, fast_value(&seed, 0), GP_RNE, 0, 0, NULL);
                                    x.comp = gp_fmt_from_f64(pf, fast_value(&seed, 0) * 1e-3, GP_RNE, 0, 0, NULL);
                                    x.m = gp_fmt_from_f64(sf, fast_value(&seed, 0) * 1e-3, GP_RNE, 0, 0, NULL);
                                    x.v = gp_fmt_from_f64(sf, fast_value(&seed, 1) * 1e-6, GP_RNE, 0, 0, NULL);
                                    gp_pack_set(pf, param, i, x.p);
                                    gp_pack_set(pf, comp, i, x.comp);
                                    gp_pack_set(sf, m, i, x.m);
                                    gp_pack_set(sf, v, i, x.v);
                                    master[i] = x.master;
                                    want[i] = x;
                                }
                                uint64_t tail = gp_adamw_fused_tail(pf, n);
                                for (size_t i = 0; i < n; i++) {
                                    unsigned ev = 0, evs = 0;
                                    c.tail = i >= tail;
                                    want[i].p = gp_adamw_step(c, &s, want[i].p, &want[i].master, &want[i].comp,
                                                              &want[i].m, &want[i].v, gval[i], 0, 0, &ev, &evs);
                                }
                                gp_plugin_adamw_args a;
                                memset(&a, 0, sizeof a);
                                a.struct_size = sizeof a;
                                a.param_format = (int32_t)pf;
                                a.state_format = (int32_t)sf;
                                a.grad_format = (int32_t)gf;
                                a.variant = vi;
                                a.rounding = GP_PLUGIN_RNE;
                                a.lr = lr;
                                a.beta1 = b1;
                                a.beta2 = b2;
                                a.eps = 1e-8;
                                a.weight_decay = wd;
                                a.step = (int64_t)t;
                                a.inv_scale = inv;
                                int32_t found = 0;
                                a.found_inf = &found;
                                a.n = n;
                                a.grad = grad;
                                a.param = param;
                                a.m = m;
                                a.v = v;
                                a.master = vi == GP_ADAMW_MASTER ? master : NULL;
                                a.comp = vi == GP_ADAMW_KAHAN ? comp : NULL;
                                a.evaluation = (int32_t)FAST_EVALS[ei];
                                assert_int_equal(cpu->adamw(&a), 0);
                                for (size_t i = 0; i < n; i++) {
                                    uint32_t got[5] = {gp_pack_get(pf, param, i), gp_pack_get(sf, m, i),
                                                       gp_pack_get(sf, v, i), master[i], gp_pack_get(pf, comp, i)};
                                    uint32_t exp[5] = {want[i].p, want[i].m, want[i].v, want[i].master, want[i].comp};
                                    gp_format f[5] = {pf, sf, sf, GP_FP32, pf};
                                    for (int k = 0; k < 5; k++)
                                        if (!gp_fmt_agree(f[k], got[k], exp[k]))
                                            gp_assert_bits(got[k], exp[k],
                                                           "variant %d eval %s pf %d sf %d gf %d h %d n %zu i %zu "
                                                           "output %d", vi, FAST_EVAL_NAMES[ei], pf, sf, gf, h, n, i, k);
                                }
                                cases += (long)n;
                            }
                        }
                    }
    /* 4 variants x (4 orders x 8 formats + 2 orders x 4 with a bf16 state) + the fused
     * kernel: pf = sf, either grad format */
    assert_int_equal(fast_configs, 4 * (4 * 8 + 2 * 4) + 2 * 2);
    assert_true(cases > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_one_step),
        cmocka_unit_test(test_one_step_weight_decay),
        cmocka_unit_test(test_torch_cpu_golden),
        cmocka_unit_test(test_torch_sqrt_zen4),
        cmocka_unit_test(test_torch_sqrt_intel_avx512),
        cmocka_unit_test(test_torch_sqrt_host),
        cmocka_unit_test(test_torch_cpu_foreach),
        cmocka_unit_test(test_bf16_stale_without_master),
        cmocka_unit_test(test_bf16_master),
        cmocka_unit_test(test_bf16_kahan),
        cmocka_unit_test(test_found_inf),
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_fp32_matches_reference),
        cmocka_unit_test(test_stochastic_neighbours),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_fused_tail_rule),
        cmocka_unit_test(test_fused_v_fma_by_position),
        cmocka_unit_test(test_fused_lerp_signed_zero),
        cmocka_unit_test(test_fused_bf16_one_store),
        cmocka_unit_test(test_cpu_fast_path_equals_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
