/* gp_attrib.h — the attribution of one accumulator addition (gp_runner.h, "Attribution"):
 * which mechanism the rounding of old + addend to the stored new value falls under, and
 * its local error; and vectorised kernels (gp_attrib.c) that attribute a block of
 * additions of finite values, and store a block of backward outputs as gradients, with
 * the same results as the per-element definitions bit for bit. */
#ifndef GP_ATTRIB_H
#define GP_ATTRIB_H

#include <math.h>
#include <stddef.h>

#include "../../kernels/arith/gp_format.h"
#include "../scenario/gp_metrics.h"

/* x / s for the loss scale s: x * inv when inv != 0 (inv = 1/s, a power of two whose
 * product is the one correct rounding of the same real as the division), else x / s. */
static inline double gp_attrib_unscaled(double x, double s, double inv)
{
    return inv != 0 ? x * inv : x / s;
}

/* Which mechanism a rounding of the exact value `exact` to `bits` (widened: v) in format
 * f falls under, and whether it was a loss at all; ev: the rounding's events. */
static inline gp_mechanism gp_classify_v(gp_format f, double exact, uint32_t bits, double v, unsigned ev)
{
    if (isinf(v) && isfinite(exact))
        return GP_MECH_OVERFLOW;
    if (v != v || isinf(exact) || exact != exact)
        return GP_MECH_NONFINITE;
    if (ev & GP_EV_OVERFLOW)
        return GP_MECH_OVERFLOW;
    if (gp_fmt_underflow_loss(f, bits, exact != 0, v != exact))
        return GP_MECH_UNDERFLOW;
    return GP_MECH_ROUNDING;
}

/* Is the stored nb (format f) a saturated overflow of the exact value s + e (binary64 sum
 * and its error)? Yes when nb is +-max finite of f, of the sign of s, and s + e rounded
 * to nearest (even) in f overflows (to inf; NaN in e4m3): |s + e| >= max finite + half
 * an ulp of it, the tie included when max finite's significand is odd (e4m3's 448 =
 * 1.110b x 2^8 is even: 464 rounds to it; e5m2, fp16, bf16, fp32 have an odd one). The
 * one rounding that may store it so is round toward zero (IEEE 754 7.4: the largest
 * finite number): the attribution names it saturation in every mode (docs/model.md). */
static inline int gp_attrib_saturated(gp_format f, uint32_t nb, double s, double e)
{
    gp_fmt_info fi = gp_fmt_get(f);
    uint32_t sbit = 1u << (fi.width - 1);
    if ((nb & (sbit - 1u)) != fi.maxfin || isnan(s) || ((nb & sbit) != 0) != (s < 0))
        return 0;
    unsigned ev = 0;
    (void)gp_fmt_from_f64(f, gp_f64_nudge(s, e > 0 ? 1 : e < 0 ? -1 : 0), GP_RNE, 0, 0, &ev);
    return (ev & GP_EV_OVERFLOW) != 0 || isinf(s);
}

/* The mechanism of one element x quantized to a scaled or block format and stored as the
 * value y it dequantizes to (ev: the quantizer's events, gp_scaled_quantize): a non-finite
 * x is non-finite (it arose earlier); a non-finite y of a finite x (fp8 ":nosat" past its
 * max) overflow; a clamp to the element format's largest value (GP_EV_OVERFLOW with a
 * finite y) saturation; a non-zero x stored as zero underflow (below half the smallest
 * subnormal of its block's scale: the block's amax set the scale); the rest rounding. */
static inline gp_mechanism gp_attrib_scaled(double x, double y, unsigned ev)
{
    if (!isfinite(x))
        return GP_MECH_NONFINITE;
    if (!isfinite(y))
        return GP_MECH_OVERFLOW;
    if (ev & GP_EV_OVERFLOW)
        return GP_MECH_SATURATION;
    if (x != 0 && y == 0)
        return GP_MECH_UNDERFLOW;
    return GP_MECH_ROUNDING;
}

/* Flags of one attributed addition (gp_attrib_one). */
enum {
    GP_AT_ROUNDED = 1u, /* the exact sum is non-zero (a rounding of a non-zero value) */
    GP_AT_ADD = 2u,     /* the addend is non-zero */
    GP_AT_ABSORBED = 4u /* ... and the accumulator did not change */
};

/* The addition of the addend gb (format gf) to the accumulator value ob (format af) that
 * stored nb: its mechanism (saturation, absorption, or gp_classify_v of the exact sum),
 * *delta = its local error (new - exact sum) / s in binary64 (inv as gp_attrib_unscaled),
 * *flags the
 * GP_AT_ flags. The definition: gp_attrib_block must equal it. */
static inline gp_mechanism gp_attrib_one(gp_format af, gp_format gf, uint32_t ob, uint32_t nb, uint32_t gb,
                                         double scale, double inv, double *delta, unsigned *flags)
{
    double a = gp_fmt_to_f64_fast(af, ob), g = gp_fmt_to_f64_fast(gf, gb), nv = gp_fmt_to_f64_fast(af, nb);
    double s = a + g, bb = s - a, e = (a - (s - bb)) + (g - bb); /* exact sum s + e */
    if (!isfinite(s))
        e = 0;
    unsigned f = s != 0 || e != 0 ? GP_AT_ROUNDED : 0;
    *delta = gp_attrib_unscaled((nv - s) - e, scale, inv);
    if (g != 0)
        f |= GP_AT_ADD;
    gp_mechanism m;
    /* saturated: first, so that a saturated accumulator is not counted as absorbing */
    if (gp_attrib_saturated(af, nb, s, e)) {
        m = GP_MECH_SATURATION;
    } else if (g != 0 && nb == ob && isfinite(a)) {
        /* absorbed: a non-zero addend left a finite sum unchanged (a non-finite one has
         * nothing to absorb into: its result is classified, as non-finite) */
        f |= GP_AT_ABSORBED;
        m = GP_MECH_ABSORPTION;
    } else {
        double exact = gp_f64_nudge(s, e > 0 ? 1 : e < 0 ? -1 : 0);
        m = gp_classify_v(af, exact, nb, nv, isinf(nv) && isfinite(s) ? GP_EV_OVERFLOW : 0);
    }
    *flags = f;
    return m;
}

/* A stochastic rounding of the accumulator value a (format af) plus the addend g that stored
 * nb, as a draw (the bias statistics of gp_runner.h): the sum s rounded is fl32(a + g) for
 * af narrower than fp32 (fp32 opmath, gp_accum.h), the exact sum s + e for fp32. With lo
 * and hi the neighbours of s in af toward and away from zero (lo its rounding toward
 * zero, hi = lo + 1 in sign-magnitude bits), frac = ((s - lo) + e) / (hi - lo): when s is
 * finite (and not flushed under ftz), hi finite, frac in (0, 1) and nb one of lo and hi,
 * the rounding was a draw: returns 1 with *u = [nb == hi] - frac (the draw's deviation
 * from its mean) and *w = frac (1 - frac) (its variance). Else returns 0, *u = *w = 0. */
static inline int gp_sr_draw_one(gp_format af, double a, double g, uint32_t nb, int ftz, double *u, double *w)
{
    double s = a + g, e = 0;
    if (af == GP_FP32) { /* the exact sum s + e */
        double bb = s - a;
        e = (a - (s - bb)) + (g - bb);
    } else {
        s = (double)((float)a + (float)g); /* fl32(acc + g), what is rounded to the narrow format */
    }
    *u = *w = 0;
    if (isfinite(s) && !(ftz && fabs(s) < ldexp(1.0, gp_fmt_get(af).emin))) {
        uint32_t lo = gp_fmt_from_f64(af, gp_f64_nudge(s, e > 0 ? 1 : e < 0 ? -1 : 0), GP_RTZ, 0, 0, (unsigned *)0);
        uint32_t hi = lo + 1; /* one step away from zero: sign-magnitude encodings */
        double vlo = gp_fmt_to_f64_fast(af, lo), vhi = gp_fmt_to_f64_fast(af, hi);
        double frac = ((s - vlo) + e) / (vhi - vlo);
        if (isfinite(vhi) && frac > 0 && frac < 1 && (nb == lo || nb == hi)) {
            *u = (double)(nb == hi) - frac;
            *w = frac * (1 - frac);
            return 1;
        }
    }
    return 0;
}

/* gp_sr_draw_one for the additions i < n of packed arrays old, acc (format af) and grad
 * (format gf) without ftz, for af bf16 and gf bf16 or fp32 (any values, infinities and
 * NaNs included): draw[i] its result, u[i] and w[i] its outputs. Returns 1; returns 0
 * and writes nothing for another case. Vectorised like gp_attrib_block; equal to the
 * definition bit for bit (tests/test_accum.c). */
int gp_sr_draw_block(gp_format af, gp_format gf, int ftz, const void *old, const void *acc, const void *grad,
                     size_t n, double *u, double *w, uint8_t *draw);

/* Counts of a block's additions (gp_attrib_block). */
typedef struct {
    uint64_t rounded_nonzero, adds_nonzero, absorbed, underflow;
} gp_attrib_counts;

/* out[j] = gp_fmt_to_f64_fast(f, element i + j of the packed array a of format f), j < n.
 * fp32 and bf16 take the conversion (exact) in a vectorised loop where no element is a NaN
 * (a NaN's payload, and every other format, go through gp_fmt_to_f64_fast itself). */
void gp_widen_block(gp_format f, const void *a, size_t i, size_t n, double *out);

/* The runner's element-wise loops over a chunk, vectorised (AVX-512 / AVX2 clones; the same
 * IEEE operation on each element, so the same bits on every clone):
 * out[i] = (double)m[i] * f; m[i] = (float)((double)m[i] * f); and the number of x[i] that
 * are not finite, i < n. */
void gp_mul_f32_block(double *out, const float *m, size_t n, double f);
void gp_scale_f32_block(float *m, size_t n, double f);
uint64_t gp_nonfinite_count(const double *x, size_t n);

/* Elements per call of gp_attrib_block at most. */
#define GP_ATTRIB_BLOCK 256

/* gp_attrib_block's per-element counters (el[k][i]): additions rounded with a non-zero
 * exact sum, additions of a non-zero addend, absorbed, underflowed. */
enum { GP_ATTRIB_EL_ROUNDED, GP_ATTRIB_EL_ADD, GP_ATTRIB_EL_ABSORBED, GP_ATTRIB_EL_UNDERFLOW, GP_ATTRIB_NEL };

/* Attribute the additions i < n (n <= GP_ATTRIB_BLOCK) of packed arrays old, acc (format
 * af) and grad (format gf), for the pairs (af, gf) bf16/bf16, fp32/bf16, fp32/fp16,
 * fp32/fp32, bf16/fp32, fp16/fp16, when every old, acc and grad value is finite: as
 * gp_attrib_one for each i, err[m][i] += delta * errw for its mechanism m (err indexed by
 * gp_mechanism, entries GP_MECH_UNDERFLOW..GP_MECH_NONFINITE; the entries of overflow,
 * saturation and non-finite values, which it only reads, may all three be NULL: all +0),
 * te2[i] = te * te with te the sum of err[j][i] over those j in order (starting from +0),
 * and the GP_AT_ flags and underflows added to *cnt, and, with el non-NULL (runs with
 * sampling), each element's to its counters el[k][i] (GP_ATTRIB_EL_*). Returns 1; returns
 * 0 and changes nothing for another pair or when some value is not finite, or a new value
 * is +-max finite (overflow, non-finite and saturation need gp_attrib_one).
 * Vectorised (an AVX2 / AVX-512 clone chosen at run time); results equal the scalar
 * definition bit for bit (tests/test_accum.c). */
int gp_attrib_block(gp_format af, gp_format gf, const void *old, const void *acc, const void *grad, size_t n,
                    double s, double inv, double errw, double *const *err, double *te2, gp_attrib_counts *cnt,
                    uint32_t *const *el);

/* Counts of a stored block (gp_store_block): outputs that are not zero, stored values that
 * are not zero, stored subnormals, underflows. */
typedef struct {
    uint64_t rounded_nonzero, stored_nonzero, subnormal, underflow;
} gp_store_counts;

/* Store the backward outputs xs[0..n) (n <= GP_ATTRIB_BLOCK, binary64, scaled by s) as
 * gradients of format gf (bf16, fp16, fp32) in packed grad, when every one is zero or has
 * a magnitude up to gf's largest finite value and, unless `subnormals` (the run has no
 * FTZ), at least its least normal one: as the one-element definition in gp_run_accum.c
 * (store_range) without FTZ: grad[i] = the RNE rounding (gp_fmt_from_f64_rne; a
 * magnitude below the least normal one rounds to a subnormal, zero or the least normal
 * value), the mechanism gp_classify_v names (underflow where gp_fmt_underflow_loss, else
 * rounding: no overflow in this range), partial[i] += x * errw with x = xs[i] / s,
 * err_round[i] or for an underflow err_under[i] += ((v - xs[i]) / s) * errw with v the
 * stored value (divisions as gp_attrib_unscaled with inv), and the counts added to *cnt.
 * Returns 1; returns 0 and changes nothing when some xs[i] is outside that range, or for
 * another format. Vectorised like gp_attrib_block; equal to the definition bit for bit
 * (tests/test_accum.c). */
int gp_store_block(gp_format gf, int subnormals, const double *xs, size_t n, double s, double inv, double errw,
                   void *grad, double *partial, double *err_round, double *err_under, gp_store_counts *cnt);

/* The backward outputs xs[i] = x * s, i < n, with x = (nk * (m[i] * mul)) / den as a
 * nudged binary64: gp_f64_nudge of hi / den correctly rounded, hi = nk * (m[i] * mul)
 * rounded, by the sign of the exact remainder. That is x exactly (the nudge of its correct
 * rounding) when den is a power of two whose reciprocal is a normal binary64 (which divides
 * as the multiplication by it, the same rounding), or when hi is exact and hi / den is not
 * subnormal: hi is exact for any fp32 m when nk * mul < 2^29 (nk, mul integers: 53 bits
 * hold the product). Otherwise (den not a power of two, nk * mul >= 2^29) x is computed in
 * rationals (GMP), element by element. m[i] * mul and the product by s are binary64
 * operations. Vectorised like gp_attrib_block; checked bit for bit against the exact
 * quotient (MPFR) and gp_f64_nudge (tests/test_accum.c). */
void gp_fill_outputs(double *xs, const float *m, size_t n, double mul, double nk, double den, double s);

/* The terms of the final gradients' statistics (the runner's final_stats, which adds them
 * in element order), i < n (n <= GP_ATTRIB_BLOCK), for a = acc[i] (accumulated), s =
 * same[i] (exact, the same operations), f = full[i] (exact full batch): t[GP_FT_*][i] =
 * f*f, s*s, a*a, (a-f)^2, (a-s)^2, (s-f)^2, |a - s| * gp_f32_ulp_recip(s), and the squares
 * of eu[i], ea[i], er[i] (the underflow, absorption and rounding errors); returns how many
 * a are not finite. The same IEEE operations as those expressions written per element
 * (vectorised like gp_attrib_block; tests/test_accum.c). */
enum {
    GP_FT_FULL,
    GP_FT_SAME,
    GP_FT_ACC,
    GP_FT_ACC_FULL,
    GP_FT_ACC_SAME,
    GP_FT_SAME_FULL,
    GP_FT_ULP,
    GP_FT_UND,
    GP_FT_ABS,
    GP_FT_RND,
    GP_FT_N
};
uint64_t gp_final_terms(const double *acc, const double *same, const double *full, const double *eu, const double *ea,
                        const double *er, size_t n, double (*t)[GP_ATTRIB_BLOCK]);

/* The terms of the outputs' statistics: for x = xs[i] / s (as gp_attrib_unscaled with
 * inv), i < n, sq[i] = (x * errw)^2 when x is finite, else +0 (which leaves a sum of
 * squares unchanged: such a sum is never -0), and bin[i] = the histogram bin of a finite
 * non-zero x: e - 1 - min_exp clamped to [0, bins) with |x| in [2^(e-1), 2^e), else -1.
 * For a subnormal x the bin is not that (its exponent field is 0): the function returns
 * whether some x is subnormal, and the caller bins those itself. Vectorised like
 * gp_attrib_block (tests/test_accum.c). */
int gp_output_terms(const double *xs, size_t n, double scale, double inv, double errw, int min_exp, int bins,
                    double *sq, int32_t *bin);

/* The attribution of an unscale of the packed accumulator values old[0..n) (format af:
 * bf16, fp16, fp32) to acc[0..n) by the multiplier inv (an fp32 value, so each product
 * exact = widen(old[i]) * inv is exact in binary64), when every old and acc value is
 * finite: per element, as the runner's per-element loop (gp_classify_v of exact against
 * the stored value v with no events: underflow when gp_fmt_underflow_loss, else
 * rounding), err[m][i] += (v - exact) * errw for its mechanism m, *rounded_nonzero += the
 * non-zero exact values, *underflow += the underflows. Returns 1; returns 0 and changes
 * nothing for another format, a non-finite value, or a stored value of +-max finite (the
 * runner's loop names a saturated one, gp_attrib_saturated). Vectorised like gp_attrib_block
 * (tests/test_accum.c). */
int gp_unscale_block(gp_format af, const void *old, const void *acc, size_t n, double inv, double errw,
                     double *const *err, uint64_t *rounded_nonzero, uint64_t *underflow);

#endif
