/* gp_adamw_dd.h — the exact-trajectory reference of AdamW for whole arrays, in
 * double-double (DD, "double-word") arithmetic: weight, m and v of every element kept
 * as unevaluated sums hi + lo of two binary64 numbers (about 106 bits), the per-step
 * scalars computed once per step in MPFR and rounded to DD. Same algorithm and inputs as
 * reference/gp_adamw_ref.h (binary64 inputs taken exactly; decoupled decay first; bias
 * corrections from the exact powers; eps outside the square root), 20 to 40 times
 * cheaper per element than the MPFR element reference and about as costly as the
 * instrumented fp32 emulation of the step (bench/README.md, (d)), with a proved
 * error bound (below) far under fp32's and binary64's rounding.
 *
 * The DD operations (gp_dd_*, static inline below) are those analysed by
 * M. Joldes, J.-M. Muller, V. Popescu, "Tight and rigorous error bounds for basic
 * building blocks of double-word arithmetic", ACM TOMS 44(2), 2017 ("JMP"), with FMA:
 * DWPlusFP, AccurateDWPlusDW, DWTimesFP3, DWTimesDW3, DWDivDW2, plus a square root
 * (one Newton step on the correctly rounded binary64 root). u = 2^-53. The relative error
 * bounds the composition uses (each a property of one operation on exact DD operands
 * whose low word is at most u times the high word, which all results here are):
 *   GP_DD_ERR_ADD    AccurateDWPlusDW (x + y):   3u^2 + 13u^3          (JMP)
 *   GP_DD_ERR_ADD_D  DWPlusFP (x + double):      2u^2                  (JMP)
 *   GP_DD_ERR_MUL_D  DWTimesFP3 (x * double):    2u^2 + 4u^3   (JMP: 2u^2; the crude
 *                    argument: the one rounding is of xl*y + cl1, |.| <= 2u|xh*y|)
 *   GP_DD_ERR_MUL    DWTimesDW3 (x * y):         6u^2 + 25u^3  (JMP prove 5u^2 for the
 *                    FMA-based products, later work 4u^2; the composition uses this weaker
 *                    value of the crude argument written at gp_dd_mul, checkable there)
 *   GP_DD_ERR_DIV    DWDivDW2 (x / y):           15u^2 + 56u^3         (JMP; our own
 *                    derivation for the exact sequence, at gp_dd_div: 13u^2 + O(u^3))
 *   GP_DD_ERR_SQRT   square root:                33/8 u^2 + 32u^3      (derived at
 *                    gp_dd_sqrt; Lefevre et al. 2023 give 25/8 u^2 for this algorithm)
 *   GP_DD_ERR_ROUND  an MPFR scalar rounded to DD: u^2 (+ 2^-190 for the MPFR value's
 *                    own error at GP_ADAMW_DD_SCALAR_PREC bits, 1 - beta^t included)
 *
 * ---- The error bound of the trajectory ----
 * Assumptions. (A1) No overflow or underflow inside the DD operations: every non-zero
 * input and intermediate value (w, m, v, g, gcoef*g, g^2 terms, sqrt(v), the update) has
 * magnitude in [2^-915, 2^1000] — so that the low words, about 2^-106 below, and the
 * error terms of TwoProd stay normal. Zeros are exact (a zero gradient, m = v = 0).
 * Below 2^-915 a DD loses its relative accuracy gradually: its low word becomes
 * subnormal, each operation then has an absolute error up to 2^-1074 rather than a
 * relative one, and under 2^-1022 the high word itself is subnormal (binary64 relative
 * accuracy or worse); the bounds below then do not hold (gradients of 1e-12 give v around
 * 1e-27, far inside the range). (A2) Finite inputs, 0 <= beta1, beta2 < 1, eps >= 0,
 * 0 <= lr*weight_decay <= 1, and a positive gcoef (a clipping coefficient). (A3) Round
 * to nearest, no FTZ/DAZ, and a correctly rounded fma and sqrt (IEEE 754).
 *
 * Notation: for step t (1-based) let w, m, v be the exact state after step t-1 and w',
 * m', v', upd the exact values of step t; E_w, E_m, E_v the absolute errors of the DD
 * state before the step, E'_... after; c = gcoef (exact value of the DD), g the step's
 * binary64 gradient, S = lr/(1 - beta1^t), I = 1/sqrt(1 - beta2^t), D = 1 - lr*wd,
 * q = sqrt(v')*I. e_A, e_F, e_P, e_M, e_D, e_S, e_R the per-operation bounds above;
 * x *P y is gp_dd_mul_d (y a binary64), x *M y gp_dd_mul. (1+a)(1+b)-1 is written a (+) b.
 *
 * m (a contraction plus a fresh term): the step computes beta1 *P m (e_P) plus
 * ((1-beta1) *M c) *P g, the per-call factor exact when c == 1 (e_c = 0) else rounded
 * once (e_c = e_M), summed by AccurateDWPlusDW (e_A). With
 * k_m = max(e_P, e_c (+) e_P) (+) e_A (5u^2 + O(u^3) for c == 1, 11u^2 + O(u^3) else):
 *   E'_m <= beta1 (1 + k_m) E_m + k_m (beta1 |m| + (1-beta1) c |g|).
 * Unrolled: E_m after t steps <= k_m (1+k_m)^t sum_k beta1^(t-k) (beta1 |m_(k-1)| +
 * (1-beta1) c |g_k|) <= k_m (1+k_m)^t c max_k |g_k| / (1 - beta1), and also
 * <= k_m (1+k_m)^t t max_k (beta1 |m_(k-1)| + (1-beta1) c |g_k|): the error is a
 * few u^2 times the largest recent gradient magnitude, times min(t, 1/(1-beta1)). It is
 * absolute, not relative to m: m can cancel to near zero while the terms do not.
 *
 * v (terms all >= 0, no cancellation): beta2 *P v + (((1-beta2) *M c) *M c) *P g *P g,
 * k_v = max(e_P, e_c2 (+) e_P (+) e_P) (+) e_A with e_c2 = 0 for c == 1, e_M (+) e_M else
 * (7u^2 + O(u^3) for c == 1, 19u^2 + O(u^3) else):
 *   E'_v <= beta2 (1 + k_v) E_v + k_v v',
 * and since beta2 v <= v', the relative error r = E_v / v obeys r' <= (1+k_v) r + k_v:
 * after t steps |v_dd - v| <= ((1+k_v)^t - 1) v ~ t k_v v (a pure decay, g = 0 after
 * step 1, really loses k_v relative per step), and also <= k_v (1+k_v)^t max_k v_k /
 * (1 - beta2).
 *
 * upd = -S m' / (sqrt(v') I + eps): with r' = E'_v / v' (0 when v' = 0),
 * n = r' / (1 + sqrt(1 - r')) (so |sqrt(v_dd) / sqrt(v') - 1| <= n, about r'/2),
 *   th_q = n (+) e_S (+) e_R (+) e_M          (sqrt, I rounded, the product)
 *   th_d = th_q (+) e_F                      (+ eps: q, eps >= 0, so no cancellation)
 *   th_n = e_R (+) e_M                       (-S rounded, the product with m)
 *   th_u = (1 + th_n)(1 + e_D) / (1 - th_d) - 1       (35.2u^2 + n + O(u^3))
 *   E_upd <= th_u |upd| + (1 + th_u) S E'_m / (q + eps).
 * The second term carries m's absolute error through the division: relative to |upd| it
 * is E'_m / |m'|, large only where m' cancelled.
 *
 * w (accumulates additive errors): w *M D (skipped when D == 1 exactly: th_w = 0; else
 * th_w = e_R (+) e_M), then AccurateDWPlusDW with the update:
 *   E'_w <= D E_w + th_w D (|w| + E_w) + E_upd
 *           + e_A ((1 + th_w) D (|w| + E_w) + |upd| + E_upd).
 * Unrolled over N steps with D <= 1 (G = (1 + th_w (+) e_A)^N, below 1 + 10^-24 for N < 10^6):
 *   |w_dd - w_N| <= G sum_(t<=N) [ (th_w + e_A + th_w e_A) |w_(t-1)| + e_A |upd_t|
 *                                  + (1 + e_A) E_upd,t ]
 *               ~<= sum_t [ 10u^2 |w_(t-1)| + (39u^2 + n_t) |upd_t| + S_t E_m,t / (q_t + eps) ]
 * with n_t <= about r_t/2 <= 3.5u^2 min(t, max_k v_k / ((1 - beta2) v_t)): that is
 * N c u^2 (|w| + |upd|) with c = 49 + 3.5 min(N, ~1/(1-beta2)) for weights and updates of
 * steady size, plus m's error carried through the divisions (about
 * k_m c max|g| / ((1-beta1) rms(g)) times lr per step). Example: N = 10^4, beta2 = 0.999,
 * |w|, |upd| <= 1: <= 2^-81 with gradients of steady size, <= 2^-78 in the worst case
 * (pure decay of v), 25 bits under binary64's unit roundoff. tests/test_adamw_dd.c
 * evaluates exactly these recursions on each case's values and checks the DD trajectory
 * against the 200-bit MPFR reference within them.
 *
 * Getters return the high words: every DD here ends with an error-free (Fast)TwoSum, so
 * hi is the binary64 nearest to hi + lo. No global state is kept (the scalars' MPFR
 * state is saved and restored): distinct element ranges of one state may be stepped
 * from different threads. */
#ifndef GP_ADAMW_DD_H
#define GP_ADAMW_DD_H

#include <math.h>
#include <stddef.h>

/* On a function with fma() calls in its loops (the DD operations below, when inlined): an
 * FMA clone chosen at run time on x86-64, where each fma() is the hardware instruction,
 * inline, instead of a libm call. The same correctly rounded operation, so the same
 * results; -ffp-contract=off still forbids any other contraction. Not under ThreadSanitizer
 * (an ifunc resolver cannot run before its runtime). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define GP_DD_CLONES __attribute__((target_clones("fma", "default")))
#else
#define GP_DD_CLONES
#endif

/* A double-double: the value hi + lo, with |lo| <= ulp(hi)/2 (normalized). */
typedef struct {
    double hi, lo;
} gp_dd;

/* A binary64 value as a DD (exact). */
static inline gp_dd gp_dd_from_double(double x)
{
    gp_dd r = {x, 0.0};
    return r;
}

/* ---- DD operations (relative error bounds: GP_DD_ERR_* below) ----
 * Written for binary64 with round to nearest, without contraction (the project builds
 * with -ffp-contract=off; every fma is explicit). Operands are normalized DDs and
 * assumption (A1) holds. u = 2^-53. */

/* a + b = s + e exactly (Knuth's TwoSum, any a, b). */
static inline gp_dd gp_dd_two_sum(double a, double b)
{
    gp_dd r;
    r.hi = a + b;
    double bb = r.hi - a;
    r.lo = (a - (r.hi - bb)) + (b - bb);
    return r;
}

/* a + b = s + e exactly when a == 0 or exponent(a) >= exponent(b) (Dekker's Fast2Sum);
 * the operations below pass a leading word and a term at most a few u times it. */
static inline gp_dd gp_dd_fast_two_sum(double a, double b)
{
    gp_dd r;
    r.hi = a + b;
    r.lo = b - (r.hi - a);
    return r;
}

/* a * b = *p + *e exactly (the FMA gives the exact remainder of the product). */
static inline void gp_dd_two_prod(double a, double b, double *p, double *e)
{
    *p = a * b;
    *e = fma(a, b, -*p);
}

/* x + y: AccurateDWPlusDW (JMP Alg. 6), <= 3u^2 + 13u^3. */
static inline gp_dd gp_dd_add(gp_dd x, gp_dd y)
{
    gp_dd s = gp_dd_two_sum(x.hi, y.hi);
    gp_dd t = gp_dd_two_sum(x.lo, y.lo);
    gp_dd v = gp_dd_fast_two_sum(s.hi, s.lo + t.hi);
    return gp_dd_fast_two_sum(v.hi, t.lo + v.lo);
}

/* x + y, y a binary64: DWPlusFP (JMP Alg. 4), <= 2u^2. */
static inline gp_dd gp_dd_add_d(gp_dd x, double y)
{
    gp_dd s = gp_dd_two_sum(x.hi, y);
    return gp_dd_fast_two_sum(s.hi, x.lo + s.lo);
}

/* x * y, y a binary64: DWTimesFP3 (JMP Alg. 9), <= 2u^2. The crude argument:
 * c = xh*y exactly as ch + cl1, |cl1| <= u|ch|; the only rounding is that of
 * xl*y + cl1, of magnitude <= u|xh y| + u|ch| <= (2u + u^2)|xh y|, so the error is
 * <= u (2u + u^2)|xh y| <= (2u^2 + 4u^3)|x y| (|x| >= (1-u)|xh|). */
static inline gp_dd gp_dd_mul_d(gp_dd x, double y)
{
    double ch, cl;
    gp_dd_two_prod(x.hi, y, &ch, &cl);
    return gp_dd_fast_two_sum(ch, fma(x.lo, y, cl));
}

/* x * y: DWTimesDW3 (JMP Alg. 12). JMP bound the FMA-based DW products by 5u^2; the
 * crude argument gives 6u^2 + 25u^3, which is what GP_DD_ERR_MUL uses. With
 * P = |xh yh|: xh yh = ch + cl1 exactly (|cl1| <= u(1+u)P); the roundings are
 * tl0 = xl yl (|.| <= u^2 P, error <= u^3 P), tl1 = xh yl + tl0 (|.| <= (u+u^2)(1+u)P,
 * error <= u^2(1+2u)P), cl2 = xl yh + tl1 (|.| <= 2u(1+2u)P, error <= 2u^2(1+2u)P),
 * cl3 = cl1 + cl2 (|.| <= 3u(1+2u)P, error <= 3u^2(1+2u)P), and Fast2Sum is exact:
 * in all <= (6u^2 + 13u^3)P <= (6u^2 + 25u^3)|x y| since |x y| >= (1-u)^2 P. */
static inline gp_dd gp_dd_mul(gp_dd x, gp_dd y)
{
    double ch, cl1;
    gp_dd_two_prod(x.hi, y.hi, &ch, &cl1);
    double tl0 = x.lo * y.lo;
    double tl1 = fma(x.hi, y.lo, tl0);
    double cl2 = fma(x.lo, y.hi, tl1);
    return gp_dd_fast_two_sum(ch, cl1 + cl2);
}

/* x / y, y != 0: DWDivDW2 (JMP Alg. 17), <= 15u^2 + 56u^3 (JMP). Our derivation for this
 * sequence: th = RN(xh/yh) = Q(1 + tau), |tau| <= 3u + O(u^2) (Q = x/y); r = y *P th
 * = y th (1 + eta), |eta| <= 2u^2; rh is within 5u of xh, so xh - rh is exact
 * (Sterbenz) and D = x - r = (xh - rh) + (xl - rl) is computed as
 * (D + (xl - rl) a1)(1 + a2) with |xl - rl| <= 2u|x|; tl = that / yh (1 + a3). Then
 * z - Q = tl - D/y - th eta, bounded by |D/yh| |(1+a2)(1+a3) - yh/y| (<= 3u|Q| * 3u)
 * + 2u^2|Q| + 2u^2|Q| = 13u^2|Q| + O(u^3). */
static inline gp_dd gp_dd_div(gp_dd x, gp_dd y)
{
    double th = x.hi / y.hi;
    gp_dd r = gp_dd_mul_d(y, th);
    double pih = x.hi - r.hi;
    double dl = x.lo - r.lo;
    double d = pih + dl;
    return gp_dd_fast_two_sum(th, d / y.hi);
}

/* sqrt(x), x >= 0: one Newton step on sh = RN(sqrt(xh)). Error (ours; Lefevre, Louvet,
 * Muller, Picot, Rideau 2023 prove 25/8 u^2 for this algorithm):
 * sh = sqrt(xh)(1 + al), |al| <= u. r = xh - sh^2 is a binary64 (the remainder of a
 * correctly rounded square root; the fma gives it exactly). d = r + xl = x - sh^2, so
 * |d| <= xh (3u + u^2) and e = d / sh^2 has |e| <= e0 = (3u + u^2)/(1-u)^2. The two
 * roundings give sl = d (1 + b1)(1 + b2) / (2 sh), and z = sh + sl exactly. With
 * sqrt(x) = sh sqrt(1 + e):
 *   z - sqrt(x) = sh (1 + e/2 - sqrt(1 + e)) + sh (e/2)((1+b1)(1+b2) - 1),
 * where 0 <= 1 + e/2 - sqrt(1+e) = (e/2)^2 / (1 + e/2 + sqrt(1+e)) <= e0^2 (1 + e0) / 8;
 * so |z - sqrt(x)| <= sh (e0^2 (1+e0)/8 + e0 (u + u^2/2)) = sh (9/8 u^2 + 3u^2 + O(u^3)),
 * and sh <= (1 + e0) sqrt(x): <= (33/8 u^2 + 32u^3) sqrt(x). */
static inline gp_dd gp_dd_sqrt(gp_dd x)
{
    if (!(x.hi > 0.0)) {
        gp_dd z = {0.0, 0.0}; /* x == 0 (x < 0 does not occur: v >= 0) */
        return z;
    }
    double sh = sqrt(x.hi);
    double r = fma(-sh, sh, x.hi);
    double sl = (r + x.lo) / (2.0 * sh);
    return gp_dd_fast_two_sum(sh, sl);
}

/* acc + x^2: one term of a lane of gp_dd_sumsq_add (below); acc.hi >= 0. gp_dd_add(acc, {p, e})
 * of the exact square p + e with the first TwoSum, that of acc.hi and p, done as
 * Fast2Sum on the operands ordered by magnitude (both are >= 0: max and min order them):
 * the result of an error-free sum is unique (s = RN(a + b), and a + b - s exactly, +0
 * when it is zero in both: x - x = +0 to nearest), so the pair, and all that follows,
 * are the same; the loop-carried path is two dependent additions shorter. In a
 * function with GP_DD_CLONES, so that its fma is an instruction. */
static inline gp_dd gp_dd_sumsq_step(gp_dd acc, double x)
{
    double p, e;
    gp_dd_two_prod(x, x, &p, &e);
    double big = acc.hi >= p ? acc.hi : p, small = acc.hi >= p ? p : acc.hi;
    gp_dd s;
    s.hi = acc.hi + p;
    s.lo = small - (s.hi - big);
    gp_dd t = gp_dd_two_sum(acc.lo, e);
    gp_dd v = gp_dd_fast_two_sum(s.hi, s.lo + t.hi);
    return gp_dd_fast_two_sum(v.hi, t.lo + v.lo);
}

/* acc + x[0]^2 + ... + x[n-1]^2 in DD (the reference's clipping norm), in
 * GP_DD_SUMSQ_LANES interleaved lanes: lane l is the DD sum, from 0 in increasing i, of
 * the squares of the x[i] with i = l mod GP_DD_SUMSQ_LANES, each square an exact TwoProd
 * (p, e) added by gp_dd_add (gp_dd_sumsq_step); the lanes are then added pairwise in a
 * fixed tree (lane l takes lane l + h for h = 1, 2, 4, 8 and l a multiple of 2h), and the
 * total to acc by gp_dd_add. acc.hi >= 0 (a sum of squares, started at 0). The result
 * depends on n and the order of x only, so a caller that sums a tensor in fixed chunks
 * gets the same bits for any -j. Error: every gp_dd_add here adds two non-negative values
 * with a relative error of at most GP_DD_ERR_ADD (about 3u^2, below), and a value is
 * carried through at most ceil(n / 16) + 5 of them, so the result is within
 * (ceil(n / 16) + 5) GP_DD_ERR_ADD of acc + the exact sum, relatively (to first order):
 * below 2^-94 for the runner's chunks of 16384 elements. Summed over C such chunks (each
 * call's result carried in acc, and the runner's window totals added up: at most 2C more
 * additions), below (2C + 2^10 + 5) GP_DD_ERR_ADD: 2^-77 for 2^40 elements. (Until 2026-11-29 the
 * sum was one chain in element order: the same kind of bound with n in place of n / 16,
 * and a latency of about 20 cycles an element.) An FMA clone where the CPU has FMA;
 * the same results as the lanes written out, bit for bit (test_adamw_dd), a NaN only as a
 * NaN. */
#define GP_DD_SUMSQ_LANES 16
gp_dd gp_dd_sumsq_add(gp_dd acc, const double *x, size_t n);

/* The per-operation relative error bounds of the header comment (u = 2^-53). */
#define GP_DD_U2 0x1p-106
#define GP_DD_ERR_ADD (3.0 * GP_DD_U2 + 13.0 * 0x1p-159)
#define GP_DD_ERR_ADD_D (2.0 * GP_DD_U2)
#define GP_DD_ERR_MUL_D (2.0 * GP_DD_U2 + 4.0 * 0x1p-159)
#define GP_DD_ERR_MUL (6.0 * GP_DD_U2 + 25.0 * 0x1p-159)
#define GP_DD_ERR_DIV (15.0 * GP_DD_U2 + 56.0 * 0x1p-159)
#define GP_DD_ERR_SQRT (4.125 * GP_DD_U2 + 32.0 * 0x1p-159)
#define GP_DD_ERR_ROUND (GP_DD_U2 + 0x1p-190)

/* Precision of the MPFR computation of the scalars (1 - beta^t loses at most 53 bits
 * to cancellation: beta <= 1 - 2^-53). */
#define GP_ADAMW_DD_SCALAR_PREC 256

/* The scalars of one step, each the DD nearest the exact value of the binary64 inputs
 * (relative error <= GP_DD_ERR_ROUND; those marked exact are exact). */
typedef struct {
    gp_dd decay;        /* 1 - lr*weight_decay */
    int has_decay;      /* decay != 1 exactly (else the step skips the product) */
    double beta1;       /* exact */
    gp_dd one_m_beta1;  /* 1 - beta1, exact */
    double beta2;       /* exact */
    gp_dd one_m_beta2;  /* 1 - beta2, exact */
    gp_dd neg_step;     /* -(lr / (1 - beta1^t)) */
    gp_dd inv_sqrt_bc2; /* 1 / sqrt(1 - beta2^t) */
    double eps;         /* exact */
} gp_adamw_dd_scalars;

/* The scalars of step t >= 1 with learning rate lr (the schedule's value for the step),
 * under assumption (A2). Computed in MPFR at GP_ADAMW_DD_SCALAR_PREC bits; MPFR's
 * exponent range and flags are saved and restored. Cannot fail. */
gp_adamw_dd_scalars gp_adamw_dd_scalars_make(double lr, double beta1, double beta2, double eps,
                                             double weight_decay, long t);

/* One element of gp_adamw_dd_step: w, m, v updated in place with the binary64 gradient g,
 * c1 = (1-beta1) gcoef and c2 = (1-beta2) gcoef^2 (the per-call factors, see the step);
 * returns upd. The step's portable loop is this function (in an FMA clone where the CPU
 * has FMA), its vector loops the same operations lane by lane (gp_adamw_dd_vec.h);
 * tests/test_adamw_dd.c compares it, compiled without FMA, with every path bit for bit. */
static inline gp_dd gp_adamw_dd_element(const gp_adamw_dd_scalars *s, gp_dd c1, gp_dd c2, double g, gp_dd *w,
                                        gp_dd *m, gp_dd *v)
{
    *m = gp_dd_add(gp_dd_mul_d(*m, s->beta1), gp_dd_mul_d(c1, g));
    *v = gp_dd_add(gp_dd_mul_d(*v, s->beta2), gp_dd_mul_d(gp_dd_mul_d(c2, g), g));
    gp_dd den = gp_dd_add_d(gp_dd_mul(gp_dd_sqrt(*v), s->inv_sqrt_bc2), s->eps);
    gp_dd upd = gp_dd_div(gp_dd_mul(s->neg_step, *m), den);
    if (s->has_decay)
        *w = gp_dd_mul(*w, s->decay);
    *w = gp_dd_add(*w, upd);
    return upd;
}

/* The per-call factors of gp_adamw_dd_element: c1 = (1 - beta1) gcoef, c2 = (1 - beta2)
 * gcoef^2, exact when gcoef == 1. */
static inline void gp_adamw_dd_factors(const gp_adamw_dd_scalars *s, gp_dd gcoef, gp_dd *c1, gp_dd *c2)
{
    *c1 = s->one_m_beta1;
    *c2 = s->one_m_beta2;
    if (!(gcoef.hi == 1.0 && gcoef.lo == 0.0)) {
        *c1 = gp_dd_mul(*c1, gcoef);
        *c2 = gp_dd_mul(gp_dd_mul(*c2, gcoef), gcoef);
    }
}

/* The state of n elements, struct of arrays: element i is w = w_hi[i] + w_lo[i], etc. */
typedef struct {
    size_t n;
    double *w_hi, *w_lo, *m_hi, *m_lo, *v_hi, *v_lo;
} gp_adamw_dd_state;

/* Allocate the state of n elements (n may be 0), all zero (w = m = v = 0). Returns 0, or
 * -1 when out of memory (then *st is empty). Release with gp_adamw_dd_state_free, which
 * also accepts an empty or zeroed state. */
int gp_adamw_dd_state_alloc(gp_adamw_dd_state *st, size_t n);
void gp_adamw_dd_state_free(gp_adamw_dd_state *st);

/* Element i starts at the binary64 weight w0, m = v = 0 (i < st->n). */
void gp_adamw_dd_state_set(gp_adamw_dd_state *st, size_t i, double w0);

/* Element i starts at w0, m0, v0 exactly (binary64 values: an optimizer state carried in,
 * e.g. a capture's stored m and v; v0 >= 0). The trajectory then continues from step T0 + 1
 * with the scalars of that step (gp_adamw_dd_scalars_make(..., T0 + 1)): the error bounds
 * above hold with E_w = E_m = E_v = 0 at the start, as for a fresh state. */
void gp_adamw_dd_state_set_mv(gp_adamw_dd_state *st, size_t i, double w0, double m0, double v0);

/* Element i's w, m, v rounded to the nearest binary64 (the high words); NULLs skipped. */
void gp_adamw_dd_state_get(const gp_adamw_dd_state *st, size_t i, double *w, double *m, double *v);

/* One AdamW step of elements i0 .. i0+n-1 (i0 + n <= st->n) with the scalars s of the
 * step; element i0+j takes the gradient gcoef * g[j], exactly (g[j] a binary64, gcoef a
 * DD: the clipping coefficient, gp_dd_from_double(1.0) without clipping):
 *   w <- w*(1 - lr*wd); m <- beta1*m + (1-beta1)*grad; v <- beta2*v + (1-beta2)*grad^2;
 *   upd = -(lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps); w <- w + upd,
 * each operation in DD with the error bounds of the header comment. upd_out (may be
 * NULL) gets upd[j] rounded to binary64. eps = 0 with v = 0 gives NaN, as in exact
 * arithmetic. */
void gp_adamw_dd_step(const gp_adamw_dd_scalars *s, gp_adamw_dd_state *st, size_t i0, size_t n,
                      const double *g, gp_dd gcoef, double *upd_out);

/* The paths of gp_adamw_dd_step's loop: AUTO (what gp_adamw_dd_step uses: AVX-512 where
 * the CPU has AVX-512F, AVX2 and FMA, else AVX2 where it has AVX2 and FMA, else the
 * portable element loop, itself an FMA clone where the CPU has FMA), or one named.
 * Every path runs gp_adamw_dd_element's operations on each element and gives the same
 * state and updates bit for bit (tests/test_adamw_dd.c). gp_adamw_dd_path_available
 * says whether this build and CPU have a path; only call gp_adamw_dd_step_path with one
 * it accepts (an unavailable one falls back to the portable loop). */
typedef enum { GP_ADAMW_DD_AUTO, GP_ADAMW_DD_SCALAR, GP_ADAMW_DD_AVX2, GP_ADAMW_DD_AVX512 } gp_adamw_dd_path;
int gp_adamw_dd_path_available(gp_adamw_dd_path path);
void gp_adamw_dd_step_path(gp_adamw_dd_path path, const gp_adamw_dd_scalars *s, gp_adamw_dd_state *st, size_t i0,
                           size_t n, const double *g, gp_dd gcoef, double *upd_out);

#endif
