/* gp_attrib.c — the vectorised attribution kernel (see gp_attrib.h). For finite values the
 * branches of gp_attrib_one fold into selects:
 *  - widening: exact, so a bit move to fp32 (bf16), the fp32 value itself, or for fp16 the
 *    bit move of a normal and mag * 2^-24 (exact in fp32) of a subnormal;
 *  - a, g finite in formats of at most 24 bits: s = a + g is finite (no binary64 overflow),
 *    so e is kept; nv finite: classify_v names neither overflow nor non-finite;
 *  - exact = nudge(s, sign e) is non-zero iff s or e is (s = 0 forces e = 0), and differs
 *    from nv iff e != 0 or nv != s: with e != 0, exact is odd in binary64 (or its least
 *    subnormal), never a value of a format of at most 24 bits whose exponents lie inside
 *    binary64's normal range;
 *  - gp_fmt_underflow_loss(f, bits, nz, inexact) = nz && inexact && mag < 2^((p-1)/2)
 *    (integer division): zero, or 2 * (significant bits of mag) < p.
 * The per-element error sums keep their order; the counts are integers. */
#include "gp_attrib.h"

#include "../../kernels/arith/gp_accum.h"
#include "../../reference/gp_exact.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) /* ThreadSanitizer cannot run an
                                                             ifunc resolver at load time */
#define GP_ATTRIB_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GP_ATTRIB_CLONES
#endif

#define GP_AT_INLINE static inline __attribute__((always_inline))

/* The widening of a finite value of format f (bf16, fp16, fp32) to binary64. */
GP_AT_INLINE double fin_widen(gp_format f, uint32_t b)
{
    if (f == GP_BF16)
        return (double)gp_f32_from_bits(b << 16);
    if (f == GP_FP32)
        return (double)gp_f32_from_bits(b);
    uint32_t mag = b & 0x7fffu, sign = (b & 0x8000u) << 16; /* fp16 */
    uint32_t nrm = sign | (mag + ((127u - 15u) << 10)) << 13;          /* a normal: rebias */
    uint32_t sub = sign | gp_f32_bits((float)(int32_t)mag * 0x1p-24f); /* a subnormal: mag * 2^-24, exact */
    uint32_t is_nrm = 0u - (uint32_t)(mag >= 0x400u); /* a mask, not a branch: the loops stay vectorised */
    return (double)gp_f32_from_bits((nrm & is_nrm) | (sub & ~is_nrm));
}

GP_AT_INLINE uint32_t load(gp_format f, const void *p, size_t i)
{
    return f == GP_FP32 ? ((const uint32_t *)p)[i] : ((const uint16_t *)p)[i];
}

/* Is every value of p[0..n) of format f below lim in magnitude (bits)? lim = the bits of
 * inf: finite; lim = max finite: finite and not +-max finite (a saturated sum, which only
 * gp_attrib_one names). */
GP_AT_INLINE int all_below(gp_format f, const void *p, size_t n, uint32_t lim)
{
    uint32_t bad = 0;
    if (f == GP_FP32) {
        const uint32_t *q = p;
        for (size_t i = 0; i < n; i++)
            bad |= (q[i] & 0x7fffffffu) >= lim;
    } else {
        const uint16_t *q = p;
        for (size_t i = 0; i < n; i++)
            bad |= (uint32_t)(q[i] & 0x7fffu) >= lim;
    }
    return !bad;
}

/* The loop over one block. Every array a parameter of its own, restrict: the arrays do not
 * overlap (gp_attrib.h), and as restrict parameters the compiler can see it (as restrict
 * locals taken from err[] and el[] it could not, and left the loop scalar). */
GP_AT_INLINE void block_arrays(gp_format af, gp_format gf, int divide, int counting, int rare, const void *restrict old,
                               const void *restrict acc, const void *restrict grad, size_t n, double scale,
                               double inv, double errw, double *restrict eu, double *restrict ea,
                               double *restrict er, const double *restrict eo, const double *restrict en,
                               const double *restrict es, double *restrict te2, gp_attrib_counts *cnt,
                               uint32_t *restrict c_rnd, uint32_t *restrict c_add, uint32_t *restrict c_abs,
                               uint32_t *restrict c_und)
{
    gp_fmt_info fi = gp_fmt_get(af);
    const uint32_t magmask = (1u << (fi.width - 1)) - 1u, uthr = 1u << ((fi.p - 1) / 2);
    uint64_t rnz = 0, add = 0, abs = 0, und = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t ob = load(af, old, i), nb = load(af, acc, i), gb = load(gf, grad, i);
        double a = fin_widen(af, ob), g = fin_widen(gf, gb), nv = fin_widen(af, nb);
        double s = a + g, bb = s - a, e = (a - (s - bb)) + (g - bb);
        double d = (nv - s) - e;
        d = divide ? d / scale : d * inv;
        double dw = d * errw;
        int gnz = g != 0, ab = gnz & (nb == ob);
        int nz = (s != 0) | (e != 0), inexact = (e != 0) | (nv != s);
        int un = (ab ^ 1) & nz & inexact & ((nb & magmask) < uthr);
        int rd = (ab | un) ^ 1;
        double xu = eu[i], xa = ea[i], xr = er[i];
        /* without them (rare 0) the three are +0: te, never -0, is unchanged by adding +-0 */
        double xo = rare ? eo[i] : 0, xn = rare ? en[i] : 0, xs = rare ? es[i] : 0;
        xu = un ? xu + dw : xu;
        xa = ab ? xa + dw : xa;
        xr = rd ? xr + dw : xr;
        eu[i] = xu;
        ea[i] = xa;
        er[i] = xr;
        double te = 0;
        te += xu;
        te += xa;
        te += xo;
        te += xs;
        te += xr;
        te += xn;
        te2[i] = te * te;
        rnz += (uint64_t)nz;
        add += (uint64_t)gnz;
        abs += (uint64_t)ab;
        und += (uint64_t)un;
        if (counting) { /* a constant per instance: inlined with and without the counters */
            c_rnd[i] += (uint32_t)nz;
            c_add[i] += (uint32_t)gnz;
            c_abs[i] += (uint32_t)ab;
            c_und[i] += (uint32_t)un;
        }
    }
    cnt->rounded_nonzero += rnz;
    cnt->adds_nonzero += add;
    cnt->absorbed += abs;
    cnt->underflow += und;
}

GP_AT_INLINE void block(gp_format af, gp_format gf, int divide, int rare, const void *old, const void *acc, const void *grad,
                        size_t n, double scale, double inv, double errw, double *const *err, double *te2,
                        gp_attrib_counts *cnt, uint32_t *const *el)
{
    block_arrays(af, gf, divide, el != NULL, rare, old, acc, grad, n, scale, inv, errw, err[GP_MECH_UNDERFLOW],
                 err[GP_MECH_ABSORPTION], err[GP_MECH_ROUNDING], err[GP_MECH_OVERFLOW], err[GP_MECH_NONFINITE],
                 err[GP_MECH_SATURATION], te2, cnt, el ? el[GP_ATTRIB_EL_ROUNDED] : NULL,
                 el ? el[GP_ATTRIB_EL_ADD] : NULL, el ? el[GP_ATTRIB_EL_ABSORBED] : NULL,
                 el ? el[GP_ATTRIB_EL_UNDERFLOW] : NULL);
}

#define GP_AT_PAIR(a, g) ((a) * GP_NFORMATS + (g))

/* Flattened with gcc: every call inlined, gp_fmt_get's included (its switch then folds to
 * constants); gcc 12 left it out of line here once, and a call from a vector clone into
 * default-target code can cost far more than its work (the upper halves of the vector
 * registers are dirty: bench/README.md, (l)). clang refuses flatten beside target_clones. */
#if defined(__GNUC__) && !defined(__clang__)
#define GP_AT_FLATTEN __attribute__((flatten))
#else
#define GP_AT_FLATTEN
#endif
GP_AT_FLATTEN GP_ATTRIB_CLONES static int gp_attrib_block_clones(gp_format af, gp_format gf, const void *old, const void *acc, const void *grad,
                                     size_t n, double s, double inv, double errw, double *const *err, double *te2,
                                     gp_attrib_counts *cnt, uint32_t *const *el)
{
    int pair = GP_AT_PAIR(af, gf), divide = inv == 0;
    switch (pair) {
    case GP_AT_PAIR(GP_BF16, GP_BF16):
    case GP_AT_PAIR(GP_FP32, GP_BF16):
    case GP_AT_PAIR(GP_FP32, GP_FP16):
    case GP_AT_PAIR(GP_FP32, GP_FP32):
    case GP_AT_PAIR(GP_BF16, GP_FP32):
    case GP_AT_PAIR(GP_FP16, GP_FP16): break;
    default: return 0;
    }
    if (n > GP_ATTRIB_BLOCK || !all_below(af, old, n, gp_fmt_get(af).inf) ||
        !all_below(af, acc, n, gp_fmt_get(af).maxfin) || !all_below(gf, grad, n, gp_fmt_get(gf).inf))
        return 0;
    /* the overflow, saturation and non-finite errors: all given, or none (all +0) */
    int rare = err[GP_MECH_OVERFLOW] != NULL;
#define GP_AT_RARE(A, G, DIVIDE, EL)                                                                      \
    do {                                                                                                  \
        if (rare)                                                                                         \
            block(A, G, DIVIDE, 1, old, acc, grad, n, s, inv, errw, err, te2, cnt, EL);                    \
        else                                                                                              \
            block(A, G, DIVIDE, 0, old, acc, grad, n, s, inv, errw, err, te2, cnt, EL);                    \
    } while (0)
#define GP_AT_CASE(A, G)                                                                                  \
    case GP_AT_PAIR(A, G):                                                                                \
        if (el)                                                                                           \
            GP_AT_RARE(A, G, divide, el);                                                                 \
        else if (divide)                                                                                  \
            GP_AT_RARE(A, G, 1, NULL);                                                                    \
        else                                                                                              \
            GP_AT_RARE(A, G, 0, NULL);                                                                    \
        break;
    switch (pair) {
        GP_AT_CASE(GP_BF16, GP_BF16)
        GP_AT_CASE(GP_FP32, GP_BF16)
        GP_AT_CASE(GP_FP32, GP_FP16)
        GP_AT_CASE(GP_FP32, GP_FP32)
        GP_AT_CASE(GP_BF16, GP_FP32)
        GP_AT_CASE(GP_FP16, GP_FP16)
    default: break;
    }
#undef GP_AT_CASE
#undef GP_AT_RARE
    return 1;
}

GP_ATTRIB_CLONES static void gp_widen_block_clones(gp_format f, const void *a, size_t i, size_t n, double *out)
{
    uint32_t nan = 0;
    if (f == GP_FP32) {
        const uint32_t *p = (const uint32_t *)a + i;
        for (size_t j = 0; j < n; j++) {
            nan |= (p[j] & 0x7fffffffu) > 0x7f800000u;
            out[j] = (double)gp_f32_from_bits(p[j]);
        }
    } else if (f == GP_BF16) {
        const uint16_t *p = (const uint16_t *)a + i;
        for (size_t j = 0; j < n; j++) {
            nan |= (p[j] & 0x7fffu) > 0x7f80u;
            out[j] = (double)gp_f32_from_bits((uint32_t)p[j] << 16);
        }
    } else {
        nan = 1;
    }
    if (nan)
        for (size_t j = 0; j < n; j++)
            out[j] = gp_fmt_to_f64_fast(f, gp_pack_get(f, a, i + j));
}

void gp_widen_block(gp_format f, const void *a, size_t i, size_t n, double *out)
{
    gp_widen_block_clones(f, a, i, n, out);
}

GP_ATTRIB_CLONES static void gp_mul_f32_block_clones(double *restrict out, const float *restrict m, size_t n, double f)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (double)m[i] * f;
}

void gp_mul_f32_block(double *out, const float *m, size_t n, double f)
{
    gp_mul_f32_block_clones(out, m, n, f);
}

GP_ATTRIB_CLONES static void gp_scale_f32_block_clones(float *m, size_t n, double f)
{
    for (size_t i = 0; i < n; i++)
        m[i] = (float)((double)m[i] * f);
}

void gp_scale_f32_block(float *m, size_t n, double f)
{
    gp_scale_f32_block_clones(m, n, f);
}

/* Not finite: the exponent field all ones (a test on the bits, which vectorises). */
GP_ATTRIB_CLONES static uint64_t gp_nonfinite_count_clones(const double *x, size_t n)
{
    uint64_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (gp_f64_bits(x[i]) >> 52 & 0x7ffu) == 0x7ffu;
    return k;
}

uint64_t gp_nonfinite_count(const double *x, size_t n)
{
    return gp_nonfinite_count_clones(x, n);
}

/* The exported symbol is a plain function: clang 14 gives callers in other files no
 * symbol for a cloned function (its dispatcher is local), so the clones stay static. */
int gp_attrib_block(gp_format af, gp_format gf, const void *old, const void *acc, const void *grad,
                                     size_t n, double s, double inv, double errw, double *const *err, double *te2,
                                     gp_attrib_counts *cnt, uint32_t *const *el)
{
    return gp_attrib_block_clones(af, gf, old, acc, grad, n, s, inv, errw, err, te2, cnt, el);
}

/* gp_sr_draw_one into bf16 without ftz, folded to selects: a and g are fp32 values, so
 * s = fl32(a + g) is the float sum; for a finite s its rounding toward zero to bf16 is
 * its top 16 bits (the same sign and exponent fields, the significand cut); a NaN or
 * infinite s, an infinite vhi, a frac outside (0, 1) (NaN included) fail the same tests.
 * The definition's + e (0 here) is left out: it changes only the sign of a zero frac,
 * which is no draw either way. */
GP_AT_INLINE void sr_draws(gp_format gf, const uint16_t *restrict old, const uint16_t *restrict acc,
                           const void *restrict grad, size_t n, double *restrict u, double *restrict w,
                           uint8_t *restrict draw)
{
    for (size_t i = 0; i < n; i++) {
        float a = gp_f32_from_bits((uint32_t)old[i] << 16);
        float g = gf == GP_BF16 ? gp_f32_from_bits((uint32_t)((const uint16_t *)grad)[i] << 16)
                                : ((const float *)grad)[i];
        float sf = a + g;
        double s = (double)sf;
        uint32_t nb = acc[i], lo = gp_f32_bits(sf) >> 16, hi = lo + 1;
        double vlo = (double)gp_f32_from_bits(lo << 16), vhi = (double)gp_f32_from_bits(hi << 16);
        double frac = (s - vlo) / (vhi - vlo);
        int ok = (fabs(s) < INFINITY) & (fabs(vhi) < INFINITY) & (frac > 0) & (frac < 1) & ((nb == lo) | (nb == hi));
        double ui = (double)(nb == hi) - frac, wi = frac * (1 - frac);
        u[i] = ok ? ui : 0.0;
        w[i] = ok ? wi : 0.0;
        draw[i] = (uint8_t)ok;
    }
}

GP_ATTRIB_CLONES static int gp_sr_draw_block_clones(gp_format af, gp_format gf, int ftz, const void *old,
                                                    const void *acc, const void *grad, size_t n, double *u,
                                                    double *w, uint8_t *draw)
{
    if (af != GP_BF16 || ftz || (gf != GP_BF16 && gf != GP_FP32))
        return 0;
    if (gf == GP_BF16)
        sr_draws(GP_BF16, old, acc, grad, n, u, w, draw);
    else
        sr_draws(GP_FP32, old, acc, grad, n, u, w, draw);
    return 1;
}

/* See gp_attrib.h; the clones are static as for gp_attrib_block. */
int gp_sr_draw_block(gp_format af, gp_format gf, int ftz, const void *old, const void *acc, const void *grad,
                     size_t n, double *u, double *w, uint8_t *draw)
{
    return gp_sr_draw_block_clones(af, gf, ftz, old, acc, grad, n, u, w, draw);
}

/* The RNE rounding of a zero, or of a magnitude up to gf's largest finite value, as
 * gp_fmt_from_f64_rne rounds it without FTZ (a zero: the signed zero). In the normal range
 * on the bits (gp_fmt_from_f64_rne's fast path); below the least normal value the
 * magnitude in units of the least subnormal q, t = |x| / q (exact: a power of two, t <
 * 2^(p-1)), rounded to an integer by (t + 2^52) - 2^52 (to nearest even, binary64's own
 * rounding at that magnitude): the subnormal's bits, 0, or those of the least normal value
 * when t rounds up to 2^(p-1). The mechanism, as attrib.c's header derives it for
 * gp_attrib_block: underflow = x != 0, v != x and mag below 2^((p-1)/2). */
GP_AT_INLINE void store(gp_format gf, int divide, int sub, const double *restrict xs, size_t n, double scale,
                        double inv, double errw, void *restrict grad, double *restrict partial, double *restrict er,
                        double *restrict eu, gp_store_counts *cnt)
{
    gp_fmt_info fi = gp_fmt_get(gf);
    const int d = 53 - fi.p; /* discarded bits */
    const uint64_t bias = (uint64_t)(1023 + fi.emin - 1) << (fi.p - 1);
    const uint64_t lo = (uint64_t)(1023 + fi.emin) << 52; /* the bits of the least normal value */
    const double q_inv = ldexp(1.0, (fi.p - 1) - fi.emin); /* 1 / the least subnormal */
    const uint32_t uthr = 1u << ((fi.p - 1) / 2), minnormal = 1u << (fi.p - 1);
    uint64_t rnz = 0, snz = 0, nsub = 0, und = 0;
    for (size_t i = 0; i < n; i++) {
        double x = xs[i];
        uint64_t u = gp_f64_bits(x), a = u & 0x7fffffffffffffffull;
        uint64_t r = (a + ((1ull << (d - 1)) - 1u) + ((a >> d) & 1u)) >> d;
        uint32_t mag = a ? (uint32_t)(r - bias) : 0u;
        if (sub) { /* (a constant per instance: without values below the least normal, nothing of this) */
            double t = ((a < lo ? fabs(x) : 0.0) * q_inv + 0x1p52) - 0x1p52; /* (0 for the normal ones: in range) */
            mag = a < lo ? (uint32_t)t : mag;
        }
        uint32_t g = (uint32_t)(u >> 63) << (fi.width - 1) | mag;
        if (gf == GP_FP32)
            ((uint32_t *)grad)[i] = g;
        else
            ((uint16_t *)grad)[i] = (uint16_t)g;
        double v = fin_widen(gf, g);
        double xu = divide ? x / scale : x * inv;
        partial[i] += xu * errw;
        double dl = v - x;
        dl = divide ? dl / scale : dl * inv;
        rnz += a != 0;
        if (!sub) { /* a normal value or zero: rounding, stored non-zero iff non-zero */
            er[i] += dl * errw;
            continue;
        }
        int un = (a != 0) & (v != x) & (mag < uthr);
        double xr = er[i], xd = eu[i];
        xr = un ? xr : xr + dl * errw;
        xd = un ? xd + dl * errw : xd;
        er[i] = xr;
        eu[i] = xd;
        snz += mag != 0;
        nsub += (mag != 0) & (mag < minnormal);
        und += (uint64_t)un;
    }
    cnt->rounded_nonzero += rnz;
    cnt->stored_nonzero += sub ? snz : rnz;
    cnt->subnormal += nsub;
    cnt->underflow += und;
}

GP_ATTRIB_CLONES static int gp_store_block_clones(gp_format gf, int subnormals, const double *xs, size_t n, double s,
                                                  double inv, double errw, void *grad, double *partial,
                                                  double *err_round, double *err_under, gp_store_counts *cnt)
{
    if ((gf != GP_BF16 && gf != GP_FP16 && gf != GP_FP32) || n > GP_ATTRIB_BLOCK)
        return 0;
    gp_fmt_info fi = gp_fmt_get(gf);
    /* the binary64 bits of the least normal (0 with subnormals) and of the largest finite value of gf */
    const uint64_t lo = (uint64_t)(1023 + fi.emin) << 52, hi = gp_fmt_to_f64_bits(gf, fi.maxfin);
    uint64_t big = 0, small = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t a = gp_f64_bits(xs[i]) & 0x7fffffffffffffffull;
        big |= (uint64_t)(a > hi);
        small |= (uint64_t)(a != 0) & (uint64_t)(a < lo);
    }
    if (big || (small && !subnormals))
        return 0;
    int divide = inv == 0;
#define GP_ST_CASE(G)                                                                                  \
    case G:                                                                                            \
        if (small)                                                                                     \
            store(G, divide, 1, xs, n, s, inv, errw, grad, partial, err_round, err_under, cnt);         \
        else if (divide)                                                                               \
            store(G, 1, 0, xs, n, s, inv, errw, grad, partial, err_round, err_under, cnt);              \
        else                                                                                           \
            store(G, 0, 0, xs, n, s, inv, errw, grad, partial, err_round, err_under, cnt);              \
        break;
    switch (gf) {
        GP_ST_CASE(GP_BF16)
        GP_ST_CASE(GP_FP16)
        GP_ST_CASE(GP_FP32)
    default: break;
    }
#undef GP_ST_CASE
    return 1;
}

/* The exported symbol is a plain function: clang 14 gives callers in other files no
 * symbol for a cloned function (its dispatcher is local), so the clones stay static. */
int gp_store_block(gp_format gf, int subnormals, const double *xs, size_t n, double s, double inv, double errw,
                   void *grad, double *partial, double *err_round, double *err_under, gp_store_counts *cnt)
{
    return gp_store_block_clones(gf, subnormals, xs, n, s, inv, errw, grad, partial, err_round, err_under, cnt);
}

/* x = S / den for S = nk * m exactly (nk an integer, m an fp32 value in binary64) as a
 * nudged binary64: hi + lo = nk m exactly (FMA), q = the correct rounding of hi / den (the
 * quotient; with divide 0, hi * inv, its equal when den is a power of two and inv = 1/den
 * exactly), r = hi - q den + lo, whose sign is that of S - q den (hi - q den is exact, the
 * remainder of a correctly rounded quotient, while q is not subnormal); then
 * gp_f64_nudge(q, sign r) with its branches as masks on the bits (the same bits; written
 * so that a loop of it vectorises). */
GP_AT_INLINE double quotient(double m, double nk, double den, double inv, int divide)
{
    double hi = nk * m, lo = fma(nk, m, -hi);
    double q = divide ? hi / den : hi * inv;
    double r = fma(-q, den, hi) + lo;
    uint64_t u = gp_f64_bits(q), rb = gp_f64_bits(r), t = rb << 1;
    uint64_t sticky = t - 1 < 0xffe0000000000000ull ? ~0ull : 0; /* r > 0 or r < 0 (not 0, not NaN) */
    uint64_t pos = sticky & ((rb >> 63) - 1);                    /* r > 0 */
    uint64_t even = (u & 1) - 1;                                 /* q's last bit 0 */
    uint64_t zero = (u << 1) == 0 ? ~0ull : 0;                   /* q = +-0 */
    uint64_t away = pos ^ ((u >> 63) - 1) ^ ~0ull;               /* r > 0 == (q positive): away from 0 */
    uint64_t step = u + ((away & 2) - 1);                        /* u + 1 or u - 1 */
    uint64_t least = 1 | (~pos & 0x8000000000000000ull);         /* +-the least subnormal, r's sign */
    uint64_t moved = (zero & least) | (~zero & step), take = sticky & even;
    return gp_f64_from_bits((take & moved) | (~take & u));
}

/* With an exact product (nk * mul < 2^29: hi = nk * m exact, lo = 0) and den = 2^k, q =
 * hi * 2^-k is exact wherever it is not subnormal (a power-of-two scaling), so r = 0 and
 * quotient() returns q itself: the first loop takes that (NaN and infinite m too: quotient
 * keeps q then), and only a block where some non-zero hi gives a q below 2^-1022 (subnormal
 * or zero: the scaling may lose bits, and the nudge applies) is redone by quotient(). */
GP_ATTRIB_CLONES static void fill_outputs_clones(double *restrict xs, const float *restrict m, size_t n, double mul,
                                                 double nk, double den, double inv, double s, int exact)
{
    if (inv != 0 && exact) {
        uint64_t sub = 0;
        for (size_t i = 0; i < n; i++) {
            double hi = nk * ((double)m[i] * mul), q = hi * inv;
            uint64_t a = gp_f64_bits(q) & 0x7fffffffffffffffull, h = gp_f64_bits(hi) << 1;
            sub |= (uint64_t)(h != 0) & (uint64_t)(a < 0x0010000000000000ull); /* below 2^-1022, 0 included */
            xs[i] = q * s;
        }
        if (!sub)
            return;
    }
    if (inv != 0)
        for (size_t i = 0; i < n; i++)
            xs[i] = quotient((double)m[i] * mul, nk, den, inv, 0) * s;
    else
        for (size_t i = 0; i < n; i++)
            xs[i] = quotient((double)m[i] * mul, nk, den, 0, 1) * s;
}

/* x = (nk * (m[i] * mul)) / den in rationals, nudged: gp_fill_outputs where the product
 * may round, one element at a time. */
static void exact_outputs(double *xs, const float *m, size_t n, double mul, double nk, double den, double s)
{
    mpq_t x, d;
    mpq_inits(x, d, NULL);
    for (size_t i = 0; i < n; i++) {
        int sticky;
        double mm = (double)m[i] * mul; /* the binary64 product, as the vectorised path takes it */
        if (mm == 0) { /* zero: its sign as the binary64 operations give it (rationals have none) */
            xs[i] = nk * mm / den * s;
            continue;
        }
        mpq_set_d(x, mm);
        mpq_set_d(d, nk);
        mpq_mul(x, x, d);
        mpq_set_d(d, den);
        mpq_div(x, x, d);
        double r = gp_exact_q_nearest(x, &sticky); /* then sticky is set */
        xs[i] = gp_f64_nudge(r, sticky) * s;
    }
    mpq_clears(x, d, NULL);
}

void gp_fill_outputs(double *xs, const float *m, size_t n, double mul, double nk, double den, double s)
{
    int e;
    double f = frexp(den, &e);
    if (f != 0.5 && !(nk * mul < 0x1p29)) { /* hi = nk * (m * mul) may round: quotient() would be off */
        exact_outputs(xs, m, n, mul, nk, den, s);
        return;
    }
    /* a power of two whose reciprocal is normal: the product by it */
    fill_outputs_clones(xs, m, n, mul, nk, den, f == 0.5 && e - 1 <= 1022 && e - 1 >= -1022 ? ldexp(1.0, 1 - e) : 0,
                        s, nk * mul < 0x1p29);
}

GP_ATTRIB_CLONES static int gp_output_terms_clones(const double *restrict xs, size_t n, double scale, double inv,
                                                   double errw, int min_exp, int bins, double *restrict sq,
                                                   int32_t *restrict bin)
{
    int sub = 0;
    for (size_t i = 0; i < n; i++) {
        double x = inv != 0 ? xs[i] * inv : xs[i] / scale, xw = x * errw;
        uint64_t u = gp_f64_bits(x);
        int e = (int)(u >> 52 & 0x7ff), fin = e != 0x7ff, nz = (u << 1) != 0;
        int b = e - 1023 - min_exp; /* |x| in [2^(e-1023), 2^(e-1022)) */
        b = b < 0 ? 0 : b >= bins ? bins - 1 : b;
        sq[i] = fin ? xw * xw : 0.0;
        bin[i] = fin & nz ? b : -1;
        sub |= (e == 0) & nz;
    }
    return sub;
}

/* See gp_attrib.h; the clones are static as for gp_attrib_block. */
int gp_output_terms(const double *xs, size_t n, double scale, double inv, double errw, int min_exp, int bins,
                    double *sq, int32_t *bin)
{
    return gp_output_terms_clones(xs, n, scale, inv, errw, min_exp, bins, sq, bin);
}

GP_ATTRIB_CLONES static uint64_t gp_final_terms_clones(const double *restrict acc, const double *restrict same,
                                                       const double *restrict full, const double *restrict eu,
                                                       const double *restrict ea, const double *restrict er, size_t n,
                                                       double (*restrict t)[GP_ATTRIB_BLOCK])
{
    uint64_t nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        double a = acc[i], s = same[i], f = full[i];
        nonfinite += (gp_f64_bits(a) >> 52 & 0x7ff) == 0x7ff; /* !isfinite(a), on the bits: it vectorises */
        t[GP_FT_FULL][i] = f * f;
        t[GP_FT_SAME][i] = s * s;
        t[GP_FT_ACC][i] = a * a;
        t[GP_FT_ACC_FULL][i] = (a - f) * (a - f);
        t[GP_FT_ACC_SAME][i] = (a - s) * (a - s);
        t[GP_FT_SAME_FULL][i] = (s - f) * (s - f);
        t[GP_FT_ULP][i] = fabs(a - s) * gp_f32_ulp_recip(s); /* = fabs(a - s) / gp_f32_ulp(s) */
        t[GP_FT_UND][i] = eu[i] * eu[i];
        t[GP_FT_ABS][i] = ea[i] * ea[i];
        t[GP_FT_RND][i] = er[i] * er[i];
    }
    return nonfinite;
}

/* See gp_attrib.h; the clones are static as for gp_attrib_block. */
uint64_t gp_final_terms(const double *acc, const double *same, const double *full, const double *eu, const double *ea,
                        const double *er, size_t n, double (*t)[GP_ATTRIB_BLOCK])
{
    return gp_final_terms_clones(acc, same, full, eu, ea, er, n, t);
}

/* The unscale's attribution (see gp_attrib.h) for a format af of finite values. */
GP_AT_INLINE void unscale_block(gp_format af, const void *old, const void *acc, size_t n, double inv, double errw,
                                double *restrict eu, double *restrict er, uint64_t *rounded_nonzero,
                                uint64_t *underflow)
{
    gp_fmt_info fi = gp_fmt_get(af);
    const uint32_t magmask = (1u << (fi.width - 1)) - 1u, uthr = 1u << ((fi.p - 1) / 2);
    uint64_t rnz = 0, und = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t ob = load(af, old, i), nb = load(af, acc, i);
        double exact = fin_widen(af, ob) * inv, v = fin_widen(af, nb);
        int nz = exact != 0, un = nz & (v != exact) & ((nb & magmask) < uthr);
        double dw = (v - exact) * errw, xu = eu[i], xr = er[i];
        eu[i] = un ? xu + dw : xu;
        er[i] = un ? xr : xr + dw;
        rnz += (uint64_t)nz;
        und += (uint64_t)un;
    }
    *rounded_nonzero += rnz;
    *underflow += und;
}

GP_ATTRIB_CLONES static int gp_unscale_block_clones(gp_format af, const void *old, const void *acc, size_t n, double inv,
                                                    double errw, double *const *err, uint64_t *rounded_nonzero,
                                                    uint64_t *underflow)
{
    /* a saturated output (+-max finite) takes the per-element path, which names it */
    if ((af != GP_BF16 && af != GP_FP16 && af != GP_FP32) || !all_below(af, old, n, gp_fmt_get(af).inf) ||
        !all_below(af, acc, n, gp_fmt_get(af).maxfin))
        return 0;
    double *eu = err[GP_MECH_UNDERFLOW], *er = err[GP_MECH_ROUNDING];
    switch (af) {
    case GP_BF16: unscale_block(GP_BF16, old, acc, n, inv, errw, eu, er, rounded_nonzero, underflow); break;
    case GP_FP16: unscale_block(GP_FP16, old, acc, n, inv, errw, eu, er, rounded_nonzero, underflow); break;
    default: unscale_block(GP_FP32, old, acc, n, inv, errw, eu, er, rounded_nonzero, underflow); break;
    }
    return 1;
}

/* See gp_attrib.h; the clones are static as for gp_attrib_block. */
int gp_unscale_block(gp_format af, const void *old, const void *acc, size_t n, double inv, double errw,
                     double *const *err, uint64_t *rounded_nonzero, uint64_t *underflow)
{
    return gp_unscale_block_clones(af, old, acc, n, inv, errw, err, rounded_nonzero, underflow);
}
