/* test_adamw_dd.c — reference/gp_adamw_dd.h (the double-double AdamW trajectory)
 * against the 200-bit MPFR element reference reference/gp_adamw_ref.h: the DD building
 * blocks within their stated bounds; a single step checked by hand; random trajectories
 * (Philox-drawn weights, gradients from 1e-12 to 1e3, hyper-parameters, clipping
 * coefficients, 1..2000 steps) within the error bound derived in gp_adamw_dd.h,
 * evaluated on each case's own values; the check's resolution: a result one binary64
 * ulp off, or a trajectory that keeps its state in binary64, falls outside the bound; and
 * every path of the step (portable, AVX2, AVX-512) equal to the element function bit for
 * bit on edge cases. */
#include <math.h>
#include <string.h>

#include <mpfr.h>

#include "gp_test.h"

#include "kernels/arith/gp_philox.h"
#include "reference/gp_adamw_dd.h"
#include "reference/gp_adamw_ref.h"

#define U 0x1p-53
#define CMP_PREC 1100 /* exact sums and differences of binary64 values 2^-500..2^500 */

/* ---- random numbers: Philox words (seed, stream = case, running index) ---- */

typedef struct {
    uint64_t seed, stream, idx;
} rng;

static double uni(rng *r) /* uniform in [0, 1), 53 bits */
{
    uint64_t a = gp_rand_u32(r->seed, r->stream, r->idx++);
    uint64_t b = gp_rand_u32(r->seed, r->stream, r->idx++);
    return (double)(((a << 32) | b) >> 11) * 0x1p-53;
}

static double uni_in(rng *r, double lo, double hi)
{
    return lo + (hi - lo) * uni(r);
}

static double pick(rng *r, const double *v, int n)
{
    return v[(int)(uni(r) * n)];
}

static double sgn(rng *r)
{
    return uni(r) < 0.5 ? -1.0 : 1.0;
}

/* ---- exact differences ---- */

/* |x - (hi + lo)| rounded to binary64 (x an MPFR value; the difference is exact at
 * CMP_PREC bits, then rounded once). */
static double dd_dist(mpfr_srcptr x, double hi, double lo)
{
    mpfr_t d;
    mpfr_init2(d, CMP_PREC);
    mpfr_set(d, x, MPFR_RNDN);
    mpfr_sub_d(d, d, hi, MPFR_RNDN);
    mpfr_sub_d(d, d, lo, MPFR_RNDN);
    double r = fabs(mpfr_get_d(d, MPFR_RNDN));
    mpfr_clear(d);
    return r;
}

/* c * x (c a DD, scaled state of a clipped run), exact at CMP_PREC bits, into out. */
static void mul_dd(mpfr_ptr out, mpfr_srcptr x, gp_dd c)
{
    mpfr_t cc;
    mpfr_init2(cc, CMP_PREC);
    mpfr_set_d(cc, c.hi, MPFR_RNDN);
    mpfr_add_d(cc, cc, c.lo, MPFR_RNDN);
    mpfr_mul(out, x, cc, MPFR_RNDN);
    mpfr_clear(cc);
}

/* ---- the DD building blocks against MPFR ---- */

/* A normalized DD of magnitude about 2^e: hi random, lo random below ulp(hi)/2. */
static gp_dd rand_dd(rng *r, int e)
{
    double hi = sgn(r) * ldexp(1.0 + uni(r), e);
    double lo = (uni(r) - 0.5) * ldexp(1.0, e - 52); /* |lo| < ulp(hi)/2 = 2^(e-53) */
    return gp_dd_two_sum(hi, lo);                   /* renormalized: exact */
}

static void to_mpfr(mpfr_ptr out, gp_dd x)
{
    mpfr_set_d(out, x.hi, MPFR_RNDN);
    mpfr_add_d(out, out, x.lo, MPFR_RNDN); /* exact at CMP_PREC */
}

/* |z / exact - 1| with exact = e */
static double rel_err(mpfr_srcptr e, gp_dd z)
{
    return dd_dist(e, z.hi, z.lo) / fabs(mpfr_get_d(e, MPFR_RNDN));
}

/* Each gp_dd_* operation on random normalized operands (magnitudes 2^-400..2^400,
 * within assumption (A1)) has relative error within its GP_DD_ERR_* bound, and two_sum
 * and two_prod are exact. The worst observed errors are printed in units of u^2. */
static void test_dd_ops(void **state)
{
    (void)state;
    rng r = {gp_test_seed(4242), 1, 0};
    long n = 500 * gp_test_count("GP_SWEEP_N", 300); /* GP_SWEEP_N: trajectory cases */
    mpfr_t x, y, e;
    mpfr_inits2(CMP_PREC, x, y, e, (mpfr_ptr)0);
    double worst[6] = {0, 0, 0, 0, 0, 0};
    const double bound[6] = {GP_DD_ERR_ADD, GP_DD_ERR_ADD_D, GP_DD_ERR_MUL_D, GP_DD_ERR_MUL, GP_DD_ERR_DIV,
                             GP_DD_ERR_SQRT};
    const char *names[6] = {"add", "add_d", "mul_d", "mul", "div", "sqrt"};
    for (long i = 0; i < n; i++) {
        int ex = (int)(uni(&r) * 800) - 400;
        /* near exponents half the time, so that additions cancel */
        int ey = uni(&r) < 0.5 ? ex + (int)(uni(&r) * 5) - 2 : (int)(uni(&r) * 800) - 400;
        gp_dd a = rand_dd(&r, ex), b = rand_dd(&r, ey);
        if (uni(&r) < 0.25) /* b close to -a: deep cancellation */
            b = gp_dd_add_d(gp_dd_mul_d(a, -1.0), ldexp(uni(&r), ex - 60));
        to_mpfr(x, a);
        to_mpfr(y, b);
        gp_dd z[6];
        z[0] = gp_dd_add(a, b);
        z[1] = gp_dd_add_d(a, b.hi);
        z[2] = gp_dd_mul_d(a, b.hi);
        z[3] = gp_dd_mul(a, b);
        z[4] = gp_dd_div(a, b);
        gp_dd pa = {fabs(a.hi), a.hi < 0 ? -a.lo : a.lo};
        z[5] = gp_dd_sqrt(pa);
        for (int k = 0; k < 6; k++) {
            switch (k) {
            case 0: mpfr_add(e, x, y, MPFR_RNDN); break; /* exact at CMP_PREC */
            case 1: mpfr_add_d(e, x, b.hi, MPFR_RNDN); break;
            case 2: mpfr_mul_d(e, x, b.hi, MPFR_RNDN); break;
            case 3: mpfr_mul(e, x, y, MPFR_RNDN); break;
            case 4: mpfr_div(e, x, y, MPFR_RNDN); break; /* relative error 2^-1100 */
            default: mpfr_abs(e, x, MPFR_RNDN); mpfr_sqrt(e, e, MPFR_RNDN); break;
            }
            if (mpfr_zero_p(e)) {
                if (z[k].hi != 0.0 || z[k].lo != 0.0)
                    fail_msg("%s of %a%+a and %a%+a: exact 0, got %a%+a", names[k], a.hi, a.lo, b.hi, b.lo,
                             z[k].hi, z[k].lo);
                continue;
            }
            double re = rel_err(e, z[k]);
            /* the MPFR quotient and root carry 2^-1099 relative: negligible against 2^-106 */
            if (re > bound[k] * (1 + 0x1p-40))
                fail_msg("%s of %a%+a and %a%+a: relative error %.3g u^2 > %.3g u^2", names[k], a.hi, a.lo,
                         b.hi, b.lo, re / (U * U), bound[k] / (U * U));
            if (re > worst[k])
                worst[k] = re;
            /* normalized: |lo| <= ulp(hi)/2, i.e. hi = RN(hi + lo) */
            if (z[k].hi + z[k].lo != z[k].hi)
                fail_msg("%s: result %a%+a not normalized", names[k], z[k].hi, z[k].lo);
        }
        double p, q;
        gp_dd_two_prod(a.hi, b.hi, &p, &q);
        mpfr_set_d(e, a.hi, MPFR_RNDN);
        mpfr_mul_d(e, e, b.hi, MPFR_RNDN);
        if (dd_dist(e, p, q) != 0.0)
            fail_msg("two_prod(%a, %a) not exact", a.hi, b.hi);
        gp_dd s = gp_dd_two_sum(a.hi, b.hi);
        mpfr_set_d(e, a.hi, MPFR_RNDN);
        mpfr_add_d(e, e, b.hi, MPFR_RNDN);
        if (dd_dist(e, s.hi, s.lo) != 0.0)
            fail_msg("two_sum(%a, %a) not exact", a.hi, b.hi);
    }
    printf("# %ld operand pairs; worst relative errors in u^2 (bound):", n);
    for (int k = 0; k < 6; k++)
        printf(" %s %.3f (%.3f)", names[k], worst[k] / (U * U), bound[k] / (U * U));
    printf("\n");
    mpfr_clears(x, y, e, (mpfr_ptr)0);
}

/* ---- the error bound of gp_adamw_dd.h, evaluated on a case's values ----
 * Every per-operation bound is inflated by 2^-30 relative: that covers the reference's
 * own error, whose per-operation relative errors are <= 2^-146 (the worst is 1 - beta^t
 * at 200 bits: 2^-200 / (1 - beta) with 1 - beta >= 2^-53), under 2^-40 of the DD's
 * (>= 2u^2 = 2^-105), and which propagates along the same recursions. The magnitudes are
 * the reference's values rounded to binary64 and the bound is evaluated in binary64
 * (S and I with libm's pow: relative error <= 2^-38 for 1 - beta >= 1e-4, all cases
 * here; 2000 steps of the recursions: <= 2^-36): relative errors far below 2^-20, which
 * the final factor 1 + 2^-20 covers (the bound grows at most linearly in each input). */
#define INFL(x) ((x) * (1 + 0x1p-30))
#define SAFE (1 + 0x1p-20)

static double comb(double a, double b) /* (1 + a)(1 + b) - 1 */
{
    return a + b + a * b;
}

typedef struct {
    double em, ev, ew, eu; /* bounds on |m|, |v|, |w|, |upd| errors after the last step */
} bound;

typedef struct {
    double beta1, beta2, eps_dd, wd; /* eps_dd: the DD run's eps */
    gp_dd coef;
    int coef_one;
} hyper;

/* One step of the recursions: lr, t of the step; cg = c |g|; m0, w0 the exact m, w
 * before the step (m scaled by c), v1, upd the exact v (scaled by c^2) and update. */
static void bound_step(bound *b, const hyper *h, double lr, long t, double cg, double m0, double w0, double v1,
                       double upd)
{
    const double eA = INFL(GP_DD_ERR_ADD), eF = INFL(GP_DD_ERR_ADD_D), eP = INFL(GP_DD_ERR_MUL_D),
                 eM = INFL(GP_DD_ERR_MUL), eD = INFL(GP_DD_ERR_DIV), eS = INFL(GP_DD_ERR_SQRT),
                 eR = INFL(GP_DD_ERR_ROUND);
    double ec = h->coef_one ? 0 : eM, ec2 = h->coef_one ? 0 : comb(eM, eM);
    double km = comb(fmax(eP, comb(ec, eP)), eA);
    double kv = comb(fmax(eP, comb(comb(ec2, eP), eP)), eA);
    b->em = h->beta1 * (1 + km) * b->em + km * (h->beta1 * fabs(m0) + (1 - h->beta1) * cg);
    b->ev = h->beta2 * (1 + kv) * b->ev + kv * v1;
    double rr = v1 > 0 ? b->ev / v1 : 0;
    double nn = rr / (1 + sqrt(1 - rr));
    double thq = comb(comb(comb(nn, eS), eR), eM);
    double thd = comb(thq, eF);
    double thn = comb(eR, eM);
    double thu = (1 + thn) * (1 + eD) / (1 - thd) - 1;
    double S = lr / (1 - pow(h->beta1, (double)t));
    double I = 1 / sqrt(1 - pow(h->beta2, (double)t));
    double q = sqrt(v1) * I;
    b->eu = thu * fabs(upd) + (1 + thu) * S * b->em / (q + h->eps_dd);
    double D = 1 - lr * h->wd;
    double thw = lr * h->wd == 0.0 ? 0 : comb(eR, eM); /* the product is skipped iff the exact D is 1 */
    double wa = D * (fabs(w0) + b->ew);
    b->ew = D * b->ew + thw * wa + b->eu + eA * ((1 + thw) * wa + fabs(upd) + b->eu);
}

/* ---- the hand-checked step ---- */

/* w = 1, g = 1, lr = 0.1, betas (0.9, 0.999), eps = 1e-8, wd = 0, t = 1. By hand:
 * m = (1 - beta1) g = 1 - 0.9 and v = 1 - 0.999 (both exact binary64 differences,
 * Sterbenz), bc1 = 1 - beta1 and bc2 = 1 - beta2, so m/bc1 = 1 and sqrt(v)/sqrt(bc2) = 1
 * exactly, and w = 1 - lr/(1 + eps) with lr, eps the binary64 values: 0.900000001 to 9
 * digits (0.1/(1 + 1e-8) = 0.1 - 1e-9 + 1e-17 - ...), 0.90000000099999999 to 1e-17 (the
 * binary64 0.1 is 0.1 + 5.6e-18). The exact value is computed below in MPFR from the
 * formula (not from the reference). Error of the DD, by the header's accounting with
 * |w| = 1, |upd| = 0.1 and m exact: <= 3u^2 (the final addition) + th_u |upd| with
 * th_u < 36u^2 (v exact: n = 0): < 7u^2 in all; asserted: 8u^2. */
static void test_hand_step(void **state)
{
    (void)state;
    gp_adamw_dd_state st;
    assert_int_equal(gp_adamw_dd_state_alloc(&st, 3), 0);
    gp_adamw_dd_state_set(&st, 1, 1.0);
    double g = 1.0, upd;
    gp_adamw_dd_scalars s = gp_adamw_dd_scalars_make(0.1, 0.9, 0.999, 1e-8, 0.0, 1);
    assert_int_equal(s.has_decay, 0);
    gp_adamw_dd_step(&s, &st, 1, 1, &g, gp_dd_from_double(1.0), &upd);

    assert_true(st.m_hi[1] == 1.0 - 0.9 && st.m_lo[1] == 0.0);
    assert_true(st.v_hi[1] == 1.0 - 0.999 && st.v_lo[1] == 0.0);
    mpfr_t x, q;
    mpfr_inits2(CMP_PREC, x, q, (mpfr_ptr)0);
    mpfr_set_d(x, 1e-8, MPFR_RNDN);
    mpfr_add_ui(x, x, 1, MPFR_RNDN);    /* 1 + eps, exact */
    mpfr_d_div(q, 0.1, x, MPFR_RNDN);   /* lr / (1 + eps) = -upd */
    mpfr_ui_sub(x, 1, q, MPFR_RNDN);    /* w */
    double err = dd_dist(x, st.w_hi[1], st.w_lo[1]);
    printf("# hand step: w = %.17g %+.3g, error %.3g u^2\n", st.w_hi[1], st.w_lo[1], err / (U * U));
    if (!(err <= 8 * U * U))
        fail_msg("hand step: |w - exact| = %.3g > 8u^2", err);
    assert_true(fabs(st.w_hi[1] - 0.90000000099999999) < 2e-17);
    /* upd_out: the binary64 nearest the DD update, itself within 36u^2 |upd| of the exact
     * one: at most half an ulp of 0.0999... (2^-57) plus 2^-100 from the exact update */
    mpfr_neg(q, q, MPFR_RNDN);
    assert_true(dd_dist(q, upd, 0.0) <= 0x1p-57 + 0x1p-100);
    /* the neighbours are untouched */
    assert_true(st.w_hi[0] == 0.0 && st.w_hi[2] == 0.0 && st.m_hi[2] == 0.0 && st.v_hi[0] == 0.0);
    double w, m, v;
    gp_adamw_dd_state_get(&st, 1, &w, &m, &v);
    assert_true(w == st.w_hi[1] && m == st.m_hi[1] && v == st.v_hi[1]);
    gp_adamw_dd_state_get(&st, 1, NULL, NULL, NULL);
    mpfr_clears(x, q, (mpfr_ptr)0);
    gp_adamw_dd_state_free(&st);
    gp_adamw_dd_state_free(&st); /* a freed state frees again harmlessly */
}

/* ---- random trajectories ---- */

enum { NEL = 4 };

typedef struct {
    long elements, over_bound;   /* element checks, and those over the bound (corrupt runs) */
    long ulp_checked;            /* final results whose bound is below ulp(w)/4 */
    double worst[4];             /* max error / bound of w, m, v, upd */
    long steps;                  /* the last case's number of steps */
} stats;

/* Run case `idx`: NEL elements, same hyper-parameters, T steps; the DD trajectory
 * checked after every step against the MPFR reference within the derived bound. With
 * `corrupt`, the DD state's low words are dropped after every step (a binary64 state):
 * the final weights are compared and the number outside the bound counted, not failed. */
static void run_case(uint64_t seed, uint64_t idx, int corrupt, stats *out)
{
    rng r = {seed, 100 + idx, 0};
    static const double B1[] = {0.0, 0.5, 0.9, 0.9, 0.95, 0.99, 0.999};
    static const double B2[] = {0.9, 0.95, 0.99, 0.999, 0.999, 0.9999};
    static const double EPS[] = {1e-8, 1e-8, 1e-6, 1e-12, 1e-16, 1e-3};
    static const double WD[] = {0.0, 0.0, 0.01, 0.1};
    hyper h;
    h.beta1 = uni(&r) < 0.8 ? pick(&r, B1, 7) : uni_in(&r, 0.0, 0.999);
    h.beta2 = uni(&r) < 0.8 ? pick(&r, B2, 6) : uni_in(&r, 0.5, 0.9999);
    double eps = pick(&r, EPS, 6);
    h.wd = uni(&r) < 0.8 ? pick(&r, WD, 4) : uni(&r);
    double lr0 = pow(10.0, uni_in(&r, -6.0, -0.5));
    double u = uni(&r);
    long T = u < 0.7 ? 1 + (long)(uni(&r) * 50) : u < 0.95 ? 50 + (long)(uni(&r) * 450) : 500 + (long)(uni(&r) * 1501);
    out->steps = T;
    /* clipping coefficient: 0 none; 1 a binary64 c (ref: g and eps / c, DD: c g, eps);
     * 2 a DD c with a low word, eps = 0 (the update is then invariant under g -> c g) */
    int cmode = uni(&r) < 0.7 ? 0 : uni(&r) < 0.5 ? 1 : 2;
    double eps_ref = eps;
    h.coef = gp_dd_from_double(1.0);
    if (cmode == 1) {
        h.coef.hi = uni_in(&r, 0.1, 1.0);
        eps_ref = ldexp(1.0, -10 - (int)(uni(&r) * 30));
        eps = h.coef.hi * eps_ref; /* exact: times a power of two */
    } else if (cmode == 2) {
        h.coef.hi = uni_in(&r, 0.1, 1.0);
        h.coef.lo = (uni(&r) - 0.5) * 0x1p-53 * h.coef.hi; /* |lo| < ulp(hi)/2 */
        eps = eps_ref = 0.0;
    }
    h.coef_one = h.coef.hi == 1.0 && h.coef.lo == 0.0;
    h.eps_dd = eps;
    gp_adamw_ref_hparams hp = {h.beta1, h.beta2, eps_ref, h.wd};

    /* per element: the weight and how the gradients are drawn */
    double w0[NEL], gscale[NEL];
    int wild[NEL];
    gp_adamw_dd_state st;
    assert_int_equal(gp_adamw_dd_state_alloc(&st, NEL + 1), 0);
    gp_adamw_ref ref[NEL];
    bound b[NEL];
    for (int j = 0; j < NEL; j++) {
        w0[j] = uni(&r) < 0.05 ? 0.0 : sgn(&r) * pow(10.0, uni_in(&r, -12.0, 3.0));
        gscale[j] = pow(10.0, uni_in(&r, -12.0, 3.0));
        wild[j] = uni(&r) < 0.5; /* each step's |g| anywhere in 1e-12..1e3 */
        gp_adamw_dd_state_set(&st, (size_t)j + 1, w0[j]); /* element 0 stays unused */
        gp_adamw_ref_init(&ref[j], w0[j]);
        memset(&b[j], 0, sizeof b[j]);
    }
    mpfr_t sc;
    mpfr_init2(sc, CMP_PREC);
    double g[NEL], upd[NEL];
    for (long t = 1; t <= T; t++) {
        double lr = lr0 * uni_in(&r, 0.5, 1.0); /* a schedule's varying lr */
        for (int j = 0; j < NEL; j++) {
            double mag = wild[j] ? pow(10.0, uni_in(&r, -12.0, 3.0)) : gscale[j] * uni_in(&r, 0.01, 1.0);
            g[j] = (cmode != 2 && uni(&r) < 0.03) ? 0.0 : sgn(&r) * mag;
        }
        gp_adamw_dd_scalars s = gp_adamw_dd_scalars_make(lr, h.beta1, h.beta2, eps, h.wd, t);
        /* two calls: elements 1 and 2..NEL, to exercise i0 */
        gp_adamw_dd_step(&s, &st, 1, 1, g, h.coef, upd);
        gp_adamw_dd_step(&s, &st, 2, NEL - 1, g + 1, h.coef, upd + 1);
        if (corrupt)
            for (size_t i = 1; i <= NEL; i++)
                st.w_lo[i] = st.m_lo[i] = st.v_lo[i] = 0.0;
        for (int j = 0; j < NEL; j++) {
            size_t i = (size_t)j + 1;
            double m0 = mpfr_get_d(ref[j].m, MPFR_RNDN), wb = mpfr_get_d(ref[j].w, MPFR_RNDN);
            gp_adamw_ref_step(&ref[j], g[j], lr, &hp, t);
            double cc = h.coef.hi; /* magnitudes: c's low word is below 2^-54 c (SAFE covers it) */
            double v1 = cc * cc * mpfr_get_d(ref[j].v, MPFR_RNDN), u1 = mpfr_get_d(ref[j].upd, MPFR_RNDN);
            bound_step(&b[j], &h, lr, t, cc * fabs(g[j]), cc * fabs(m0), wb, v1, u1);
            if (corrupt && t < T)
                continue;
            double ew = dd_dist(ref[j].w, st.w_hi[i], st.w_lo[i]);
            mul_dd(sc, ref[j].m, h.coef);
            double em = dd_dist(sc, st.m_hi[i], st.m_lo[i]);
            mul_dd(sc, ref[j].v, h.coef);
            mul_dd(sc, sc, h.coef);
            double ev = dd_dist(sc, st.v_hi[i], st.v_lo[i]);
            /* upd_out is the DD update's high word, within u |upd_dd| <= u (|upd| + E_upd) of it */
            double eu = dd_dist(ref[j].upd, upd[j], 0.0), eub = b[j].eu + U * (fabs(u1) + b[j].eu) + 0x1p-1074;
            double bw = SAFE * b[j].ew, bm = SAFE * b[j].em, bv = SAFE * b[j].ev, bu = SAFE * eub;
            if (corrupt) {
                out->elements++;
                out->over_bound += ew > bw;
                continue;
            }
            if (ew > bw || em > bm || ev > bv || eu > bu)
                fail_msg("case %llu (seed %llu) element %d step %ld/%ld: beta1 %.17g beta2 %.17g eps %g wd %g "
                         "lr %g coef %a%+a: |dw| %.3g (bound %.3g), |dm| %.3g (%.3g), |dv| %.3g (%.3g), "
                         "|dupd| %.3g (%.3g)",
                         (unsigned long long)idx, (unsigned long long)seed, j, t, T, h.beta1, h.beta2, eps, h.wd,
                         lr, h.coef.hi, h.coef.lo, ew, bw, em, bm, ev, bv, eu, bu);
            double rat[4] = {ew / bw, bm > 0 ? em / bm : 0, bv > 0 ? ev / bv : 0, eu / bu};
            for (int k = 0; k < 4; k++)
                if (rat[k] > out->worst[k])
                    out->worst[k] = rat[k];
            if (t == T) {
                out->elements++;
                /* one ulp of hi off must show: the bound is far below binary64's ulp */
                double ulp = nextafter(fabs(st.w_hi[i]), INFINITY) - fabs(st.w_hi[i]);
                if (st.w_hi[i] != 0.0 && bw < ulp / 4) {
                    out->ulp_checked++;
                    double ep = dd_dist(ref[j].w, nextafter(st.w_hi[i], INFINITY), st.w_lo[i]);
                    if (!(ep > bw))
                        fail_msg("case %llu element %d: w one ulp off (%a) within the bound %.3g",
                                 (unsigned long long)idx, j, nextafter(st.w_hi[i], INFINITY), bw);
                }
            }
        }
    }
    /* element 0 was never stepped */
    assert_true(st.w_hi[0] == 0.0 && st.m_hi[0] == 0.0 && st.v_hi[0] == 0.0);
    mpfr_clear(sc);
    for (int j = 0; j < NEL; j++)
        gp_adamw_ref_clear(&ref[j]);
    gp_adamw_dd_state_free(&st);
}

static void test_random_trajectories(void **state)
{
    (void)state;
    uint64_t seed = gp_test_seed(20261122);
    long cases = gp_test_count("GP_SWEEP_N", 300);
    stats s = {0, 0, 0, {0, 0, 0, 0}, 0};
    for (long k = 0; k < cases; k++)
        run_case(seed, (uint64_t)k, 0, &s);
    printf("# %ld cases, %ld final weights: worst error/bound w %.3g, m %.3g, v %.3g, upd_out %.3g (its "
           "bound is mostly binary64's half ulp); one ulp off detected in %ld of %ld\n",
           cases, s.elements, s.worst[0], s.worst[1], s.worst[2], s.worst[3], s.ulp_checked, s.elements);
    /* the ulp check must not be vacuous: most final weights have a bound below ulp/4 */
    assert_true(s.ulp_checked * 10 >= s.elements * 9);
}

/* A trajectory whose state is stored in binary64 between steps (the DD arithmetic
 * within each step kept) drifts by about u per step: outside the bound for almost every
 * weight after 20 or more steps. */
static void test_binary64_state_detected(void **state)
{
    (void)state;
    uint64_t seed = gp_test_seed(20261122);
    stats s = {0, 0, 0, {0, 0, 0, 0}, 0};
    long used = 0;
    for (uint64_t k = 0; used < 40; k++) {
        stats one = {0, 0, 0, {0, 0, 0, 0}, 0};
        run_case(seed, k, 1, &one);
        if (one.steps < 20)
            continue;
        s.elements += one.elements;
        s.over_bound += one.over_bound;
        used++;
    }
    printf("# binary64 state: %ld of %ld final weights (cases of >= 20 steps) outside the bound\n", s.over_bound,
           s.elements);
    assert_true(s.over_bound * 10 >= s.elements * 8);
}

/* The step (an FMA clone where the CPU has FMA: hardware fma inline) equals its element
 * function compiled here without FMA (libm's fma), bit for bit: random normalized DD
 * states and gradients of spread magnitudes, with and without a clipping coefficient,
 * with and without decay, several steps. */
static void test_step_equals_element(void **state)
{
    (void)state;
    enum { NE = 2003 };
    uint64_t r = gp_test_seed(31);
    gp_adamw_dd_state st;
    assert_int_equal(gp_adamw_dd_state_alloc(&st, NE), 0);
    static double g[NE], upd[NE];
    static gp_dd w[NE], m[NE], v[NE];
    for (int i = 0; i < NE; i++) {
        double x = ldexp((double)(gp_test_next(&r) >> 11) * 0x1p-53 - 0.5, -(int)(gp_test_next(&r) % 20));
        gp_adamw_dd_state_set(&st, (size_t)i, x);
        st.w_lo[i] = x * 0x1p-58 * ((double)(gp_test_next(&r) % 1000) / 1000 - 0.5); /* below ulp(x)/2 */
        w[i] = (gp_dd){st.w_hi[i], st.w_lo[i]};
        m[i] = v[i] = (gp_dd){0.0, 0.0};
    }
    for (int t = 1; t <= 6; t++) {
        for (int i = 0; i < NE; i++)
            g[i] = ldexp((double)(gp_test_next(&r) >> 11) * 0x1p-53 - 0.5, -(int)(gp_test_next(&r) % 30));
        gp_adamw_dd_scalars s = gp_adamw_dd_scalars_make(1e-3, 0.9, 0.999, 1e-8, t & 1 ? 0.01 : 0.0, t);
        gp_dd gcoef = t % 3 == 0 ? gp_dd_two_sum(0.7, 0x1p-60) : gp_dd_from_double(1.0);
        gp_adamw_dd_step(&s, &st, 0, NE, g, gcoef, upd);
        gp_dd c1, c2;
        gp_adamw_dd_factors(&s, gcoef, &c1, &c2);
        for (int i = 0; i < NE; i++) {
            gp_dd u = gp_adamw_dd_element(&s, c1, c2, g[i], &w[i], &m[i], &v[i]);
            gp_assert_bits(gp_f64_bits(upd[i]), gp_f64_bits(u.hi), "step %d element %d upd", t, i);
            gp_assert_bits(gp_f64_bits(st.w_hi[i]), gp_f64_bits(w[i].hi), "step %d element %d w_hi", t, i);
            gp_assert_bits(gp_f64_bits(st.w_lo[i]), gp_f64_bits(w[i].lo), "step %d element %d w_lo", t, i);
            gp_assert_bits(gp_f64_bits(st.m_hi[i]), gp_f64_bits(m[i].hi), "step %d element %d m_hi", t, i);
            gp_assert_bits(gp_f64_bits(st.m_lo[i]), gp_f64_bits(m[i].lo), "step %d element %d m_lo", t, i);
            gp_assert_bits(gp_f64_bits(st.v_hi[i]), gp_f64_bits(v[i].hi), "step %d element %d v_hi", t, i);
            gp_assert_bits(gp_f64_bits(st.v_lo[i]), gp_f64_bits(v[i].lo), "step %d element %d v_lo", t, i);
        }
    }
#if defined(__x86_64__) && defined(__GNUC__)
    printf("# the step ran its %s clone\n", __builtin_cpu_supports("fma") ? "FMA" : "default");
#endif
    gp_adamw_dd_state_free(&st);
}

/* An edge-case value for the path test: zero of either sign, subnormal, the smallest and
 * largest normal decades, ordinary magnitudes, huge enough for g^2 or the update to
 * overflow, and (with allow_nonfinite) infinities and NaN. */
static double edge_value(uint64_t *r, int allow_nonfinite)
{
    double sg = gp_test_next(r) & 1 ? -1.0 : 1.0;
    double f = 1.0 + (double)(gp_test_next(r) >> 12) * 0x1p-52; /* [1, 2) */
    if (allow_nonfinite && gp_test_next(r) % 64 == 0) /* rare: they spread through the state */
        return gp_test_next(r) & 1 ? sg * INFINITY : NAN;
    switch (gp_test_next(r) % 12) {
    case 0: return 0.0;
    case 1: return -0.0;
    case 2: return sg * ldexp(f, -1023 - (int)(gp_test_next(r) % 52)); /* subnormal */
    case 3: return sg * ldexp(f, -1022 + (int)(gp_test_next(r) % 100)); /* tiny normal */
    case 4: return sg * ldexp(f, 900 + (int)(gp_test_next(r) % 124));   /* huge */
    default: return sg * ldexp(f, -(int)(gp_test_next(r) % 40)); /* ordinary */
    }
}

/* A state DD: hi from edge_value, lo zero or a normalized tail below ulp(hi)/2 (zero
 * when hi is not finite or its tail would be subnormal). nonneg: |hi|, |lo| signed to
 * keep the value >= 0 (v). */
static gp_dd edge_dd(uint64_t *r, int nonneg, int allow_nonfinite)
{
    gp_dd x = {edge_value(r, allow_nonfinite), 0.0};
    if (nonneg)
        x.hi = fabs(x.hi);
    if (isfinite(x.hi) && fabs(x.hi) >= 0x1p-960 && gp_test_next(r) % 4 != 0)
        x.lo = x.hi * 0x1p-54 * ((double)(gp_test_next(r) % 2001) / 1000 - 1.0) * (nonneg ? 0.5 : 1.0);
    return x;
}

/* Bits of x, every NaN as the one canonical quiet NaN. */
static uint64_t bits_nan_as_one(double x)
{
    return x != x ? 0x7ff8000000000000ull : gp_f64_bits(x);
}

/* Every path of the step (gp_adamw_dd_step_path: portable, AVX2, AVX-512, where this CPU
 * has them, and AUTO) on states and gradients drawn from edge_value (zeros of both signs,
 * subnormals, tiny and huge normals, infinities, NaN; v >= 0), eps 0 (0/0 where v = 0)
 * and 1e-8, with and without decay and clipping, over calls of every length 0..19 at
 * offsets of every residue mod 4 and 8 (the vector tails) and a long one:
 *  - equals the portable path (one call over all elements) bit for bit in w, m, v (both
 *    words) and upd, a NaN only as a NaN (the sanitizer build's -O0 portable loop
 *    propagates NaNs of the other sign);
 *  - equals gp_adamw_dd_element compiled here without FMA (libm's fma) bit for bit,
 *    except that a NaN only has to be a NaN: IEEE 754 leaves the sign and payload of an
 *    operation's NaN unspecified, and the FMA clone and libm's fma already differ there
 *    (0/0 gives the x86 default NaN, negative, in one and a positive one in the other). */
static void test_paths_equal_element(void **state)
{
    (void)state;
    enum { NE = 1400 };
    static double g[NE], upd[NE], upd_p[NE];
    static gp_dd w[NE], m[NE], v[NE];
    const gp_adamw_dd_path paths[] = {GP_ADAMW_DD_SCALAR, GP_ADAMW_DD_AVX2, GP_ADAMW_DD_AVX512, GP_ADAMW_DD_AUTO};
    const char *names[] = {"portable", "AVX2", "AVX-512", "auto"};
    for (int p = 0; p < 4; p++) {
        if (!gp_adamw_dd_path_available(paths[p])) {
            printf("# path %s: not on this CPU, skipped\n", names[p]);
            continue;
        }
        uint64_t r = gp_test_seed(37 + (uint64_t)p);
        gp_adamw_dd_state st, sp;
        assert_int_equal(gp_adamw_dd_state_alloc(&st, NE), 0);
        assert_int_equal(gp_adamw_dd_state_alloc(&sp, NE), 0);
        long checked = 0, nans = 0, finite = 0;
        for (int t = 1; t <= 8; t++) {
            int nonfinite = t >= 5; /* the later steps also meet infinities and NaN */
            for (int i = 0; i < NE; i++) {
                if (t == 1 || gp_test_next(&r) % 3 == 0) { /* fresh edge state, else carried */
                    w[i] = edge_dd(&r, 0, nonfinite);
                    m[i] = edge_dd(&r, 0, nonfinite);
                    v[i] = edge_dd(&r, 1, nonfinite);
                }
                st.w_hi[i] = sp.w_hi[i] = w[i].hi, st.w_lo[i] = sp.w_lo[i] = w[i].lo;
                st.m_hi[i] = sp.m_hi[i] = m[i].hi, st.m_lo[i] = sp.m_lo[i] = m[i].lo;
                st.v_hi[i] = sp.v_hi[i] = v[i].hi, st.v_lo[i] = sp.v_lo[i] = v[i].lo;
                g[i] = edge_value(&r, nonfinite);
                upd[i] = upd_p[i] = -1.0;
            }
            double eps = t % 4 == 2 ? 0.0 : 1e-8;
            gp_adamw_dd_scalars s = gp_adamw_dd_scalars_make(t == 3 ? 1e300 : 1e-3, 0.9, 0.999, eps,
                                                             t & 1 ? 0.01 : 0.0, t);
            gp_dd gcoef = t % 3 == 0 ? gp_dd_two_sum(0.7, 0x1p-60) : gp_dd_from_double(1.0);
            /* calls of lengths 0, 1, ..., 19 from offsets 0, 0, 1, 3, 6, 10, ... then the rest */
            size_t i0 = 0;
            for (size_t len = 0; len < 20; i0 += len, len++)
                gp_adamw_dd_step_path(paths[p], &s, &st, i0, len, g + i0, gcoef, upd + i0);
            gp_adamw_dd_step_path(paths[p], &s, &st, i0, NE - i0, g + i0, gcoef, upd + i0);
            if (gp_test_avx_upper_in_use() == 1)
                fail_msg("path %s left the upper halves of the AVX registers in use", names[p]);
            gp_adamw_dd_step_path(GP_ADAMW_DD_SCALAR, &s, &sp, 0, NE, g, gcoef, upd_p);
            gp_dd c1, c2;
            gp_adamw_dd_factors(&s, gcoef, &c1, &c2);
            for (int i = 0; i < NE; i++) {
                gp_dd u = gp_adamw_dd_element(&s, c1, c2, g[i], &w[i], &m[i], &v[i]);
                const double got[7] = {upd[i], st.w_hi[i], st.w_lo[i], st.m_hi[i], st.m_lo[i], st.v_hi[i], st.v_lo[i]};
                const double por[7] = {upd_p[i], sp.w_hi[i], sp.w_lo[i], sp.m_hi[i], sp.m_lo[i], sp.v_hi[i], sp.v_lo[i]};
                const double ele[7] = {u.hi, w[i].hi, w[i].lo, m[i].hi, m[i].lo, v[i].hi, v[i].lo};
                const char *what[7] = {"upd", "w_hi", "w_lo", "m_hi", "m_lo", "v_hi", "v_lo"};
                for (int k = 0; k < 7; k++) {
                    /* a NaN only as a NaN: its sign is not part of the step's definition (x86's
                     * default NaN is negative, a propagated one keeps its operand's sign, and
                     * which operand propagates is the compiler's choice: the -O0 sanitizer
                     * build's portable loop gives +NaN where the AVX2 lanes give -NaN) */
                    gp_assert_bits(bits_nan_as_one(got[k]), bits_nan_as_one(por[k]), "%s vs portable: step %d el %d %s",
                                   names[p], t, i, what[k]);
                    gp_assert_bits(bits_nan_as_one(got[k]), bits_nan_as_one(ele[k]), "%s vs element: step %d el %d %s",
                                   names[p], t, i, what[k]);
                    nans += got[k] != got[k];
                    finite += isfinite(got[k]) && got[k] != 0;
                }
                checked++;
            }
        }
        printf("# path %s: %ld element-steps equal (of their words %ld finite non-zero, %ld NaN)\n", names[p], checked,
               finite, nans);
        gp_adamw_dd_state_free(&st);
        gp_adamw_dd_state_free(&sp);
    }
}

/* gp_dd_sumsq_add (an FMA clone) equals its definition written out here, compiled without
 * FMA, bit for bit (a NaN only as a NaN, see above): 16 lanes, each a loop of gp_dd_add
 * over the TwoProd squares of its elements (i = l mod 16), the lanes added pairwise in the
 * fixed tree, the total to the sum so far:
 * arrays of edge_value (zeros of both signs, subnormals, tiny, ordinary and huge values
 * whose squares overflow), the sum carried over calls of lengths 0..40 (300..340 in every
 * third run), and a run of ordinary values where acc.hi and the square swap order of
 * magnitude (small first). */
static void test_sumsq_equals_loop(void **state)
{
    (void)state;
    enum { NX = 4000 };
    static double x[NX];
    uint64_t r = gp_test_seed(41);
    long compared = 0;
    for (int rep = 0; rep < 40; rep++) {
        for (int i = 0; i < NX; i++) {
            x[i] = edge_value(&r, rep >= 30);
            if (rep < 20 && !(fabs(x[i]) < 0x1p500)) /* most runs keep the sum finite */
                x[i] = ldexp(x[i], -600);
            if (rep % 5 == 0 && i < 64) /* growing terms: the square above acc.hi */
                x[i] = ldexp(1.0 + i / 64.0, i - 40);
        }
        gp_dd got = {0.0, 0.0}, want = {0.0, 0.0};
        size_t i0 = 0;
        for (size_t len = 0; i0 < NX; i0 += len, len = (len + 7) % 41 + (rep % 3 == 0 ? 300 : 0)) {
            size_t k = len < NX - i0 ? len : NX - i0;
            got = gp_dd_sumsq_add(got, x + i0, k);
            gp_dd lane[16];
            for (int l = 0; l < 16; l++)
                lane[l] = (gp_dd){0.0, 0.0};
            for (size_t i = i0; i < i0 + k; i++) {
                double p, e;
                gp_dd_two_prod(x[i], x[i], &p, &e);
                lane[(i - i0) % 16] = gp_dd_add(lane[(i - i0) % 16], (gp_dd){p, e});
            }
            for (int h = 1; h < 16; h *= 2)
                for (int l = 0; l < 16; l += 2 * h)
                    lane[l] = gp_dd_add(lane[l], lane[l + h]);
            want = gp_dd_add(want, lane[0]);
            gp_assert_bits(bits_nan_as_one(got.hi), bits_nan_as_one(want.hi), "run %d after %zu: hi", rep, i0 + k);
            gp_assert_bits(bits_nan_as_one(got.lo), bits_nan_as_one(want.lo), "run %d after %zu: lo", rep, i0 + k);
            compared++;
            if (k == 0 && len != 0)
                break;
        }
    }
    printf("# sumsq: %ld partial sums equal\n", compared);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dd_ops),
        cmocka_unit_test(test_hand_step),
        cmocka_unit_test(test_random_trajectories),
        cmocka_unit_test(test_binary64_state_detected),
        cmocka_unit_test(test_step_equals_element),
        cmocka_unit_test(test_paths_equal_element),
        cmocka_unit_test(test_sumsq_equals_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
