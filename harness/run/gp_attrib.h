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

/* Flags of one attributed addition (gp_attrib_one). */
enum {
    GP_AT_ROUNDED = 1u, /* the exact sum is non-zero (a rounding of a non-zero value) */
    GP_AT_ADD = 2u,     /* the addend is non-zero */
    GP_AT_ABSORBED = 4u /* ... and the accumulator did not change */
};

/* The addition of the addend gb (format gf) to the accumulator value ob (format af) that
 * stored nb: its mechanism (absorption, or gp_classify_v of the exact sum), *delta = its
 * local error (new - exact sum) / s in binary64 (inv as gp_attrib_unscaled), *flags the
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
    /* absorbed: a non-zero addend left a finite sum unchanged (a non-finite one has
     * nothing to absorb into: its result is classified, as non-finite) */
    if (g != 0 && nb == ob && isfinite(a)) {
        f |= GP_AT_ABSORBED;
        m = GP_MECH_ABSORPTION;
    } else {
        double exact = gp_f64_nudge(s, e > 0 ? 1 : e < 0 ? -1 : 0);
        m = gp_classify_v(af, exact, nb, nv, isinf(nv) && isfinite(s) ? GP_EV_OVERFLOW : 0);
    }
    *flags = f;
    return m;
}

/* Counts of a block's additions (gp_attrib_block). */
typedef struct {
    uint64_t rounded_nonzero, adds_nonzero, absorbed, underflow;
} gp_attrib_counts;

/* Elements per call of gp_attrib_block at most. */
#define GP_ATTRIB_BLOCK 256

/* Attribute the additions i < n (n <= GP_ATTRIB_BLOCK) of packed arrays old, acc (format
 * af) and grad (format gf), for the pairs (af, gf) bf16/bf16, fp32/bf16, fp32/fp16,
 * fp32/fp32, bf16/fp32, fp16/fp16, when every old, acc and grad value is finite: as
 * gp_attrib_one for each i, err[m][i] += delta * errw for its mechanism m (err indexed by
 * gp_mechanism, entries GP_MECH_UNDERFLOW..GP_MECH_NONFINITE), te2[i] = te * te with te
 * the sum of err[j][i] over those j in order (starting from +0), and the GP_AT_ flags
 * and underflows added to *cnt. Returns 1; returns 0 and changes nothing for another
 * pair or when some value is not finite (overflow and non-finite need gp_attrib_one).
 * Vectorised (an AVX2 / AVX-512 clone chosen at run time); results equal the scalar
 * definition bit for bit (tests/test_attrib.c). */
int gp_attrib_block(gp_format af, gp_format gf, const void *old, const void *acc, const void *grad, size_t n,
                    double s, double inv, double errw, double *const *err, double *te2, gp_attrib_counts *cnt);

/* Store the backward outputs xs[0..n) (n <= GP_ATTRIB_BLOCK, binary64, scaled by s) as
 * gradients of format gf (bf16, fp16, fp32) in packed grad, when every one is zero or has
 * a magnitude in gf's normal range up to its largest finite value: grad[i] = the RNE
 * rounding (gp_fmt_from_f64_rne: for these, no event but inexact, never overflow or
 * underflow, so the mechanism is rounding), partial[i] += x * errw with x = xs[i] / s,
 * err_round[i] += ((v - xs[i]) / s) * errw with v the stored value (divisions as
 * gp_attrib_unscaled with inv), *nonzero += the non-zero xs (each stored non-zero). Returns
 * 1; returns 0 and changes nothing when some xs[i] is outside that range, or for another
 * format. Vectorised like gp_attrib_block; equal to the one-element definition in
 * gp_run_accum.c (store_range) bit for bit (tests/test_accum.c). */
int gp_store_block(gp_format gf, const double *xs, size_t n, double s, double inv, double errw, void *grad,
                   double *partial, double *err_round, uint64_t *nonzero);

#endif
