/* gp_oracle.c — see gp_oracle.h. Independent of kernels/arith except for the format
 * table (p, emin, emax, encodings of max finite / inf / NaN), which is the definition
 * of the formats, not of the rounding. */
#include "gp_oracle.h"

#include "gp_mpfr_env.h"

#include <string.h>

/* ---- the format's exponent range ---- */

/* MPFR writes x = 0.1b..b * 2^E, so the format value 1.b..b * 2^X has E = X + 1.
 * Smallest subnormal 2^(emin-p+1) -> E = emin-p+2; top binade X = emax -> E = emax+1. */
static void enter_format_range(const gp_fmt_info *fi)
{
    mpfr_set_emin(fi->emin - fi->p + 2);
    mpfr_set_emax(fi->emax + 1);
}

/* ---- encoding of an MPFR value that is exactly a value of the format ---- */

static uint32_t encode(const gp_fmt_info *fi, mpfr_srcptr y)
{
    uint32_t sign = mpfr_signbit(y) ? 1u << (fi->width - 1) : 0;
    if (mpfr_zero_p(y))
        return sign;
    if (mpfr_inf_p(y))
        return sign | fi->inf;
    mpfr_t t;
    mpfr_init2(t, 64);
    long X = (long)mpfr_get_exp(y) - 1;
    long qmin = fi->emin - (fi->p - 1);
    uint32_t mag;
    if (X < fi->emin) { /* subnormal: |y| / 2^qmin is the whole encoding */
        mpfr_mul_2si(t, y, -qmin, MPFR_RNDN);
        mpfr_abs(t, t, MPFR_RNDN);
        mag = (uint32_t)mpfr_get_ui(t, MPFR_RNDN);
    } else {             /* normal: biased exponent and the fraction field */
        mpfr_mul_2si(t, y, -(X - (fi->p - 1)), MPFR_RNDN);
        mpfr_abs(t, t, MPFR_RNDN);
        uint32_t sig = (uint32_t)mpfr_get_ui(t, MPFR_RNDN);
        uint32_t biased = (uint32_t)(X - fi->emin + 1);
        mag = (biased << (fi->p - 1)) | (sig - (1u << (fi->p - 1)));
    }
    mpfr_clear(t);
    return sign | mag;
}

/* ---- the oracle proper ---- */

/* Input: either an exact mpfr value or a string. */
typedef struct {
    mpfr_srcptr x;
    const char *s;
} source;

/* Round the source to precision of y with rnd, in the current exponent range. */
static int source_round(mpfr_ptr y, const source *src, mpfr_rnd_t rnd)
{
    if (src->x)
        return mpfr_set(y, src->x, rnd);
    return mpfr_strtofr(y, src->s, NULL, 0, rnd);
}

/* The deterministic rounding of src to format f with MPFR rounding rnd:
 * result bits, and INEXACT/OVERFLOW from MPFR's ternary value and flags. */
static uint32_t round_det(const gp_fmt_info *fi, const source *src, mpfr_rnd_t rnd, unsigned *ev)
{
    mpfr_t y;
    mpfr_init2(y, fi->p);
    int t = source_round(y, src, rnd); /* wide range: no overflow/underflow yet */
    enter_format_range(fi);
    mpfr_clear_flags();
    t = mpfr_check_range(y, t, rnd);
    t = mpfr_subnormalize(y, t, rnd);
    unsigned flags = t ? GP_EV_INEXACT : 0;
    if (mpfr_overflow_p())
        flags |= GP_EV_OVERFLOW | GP_EV_INEXACT;
    uint32_t bits;
    if (mpfr_inf_p(y) && !fi->inf) { /* e4m3 has no inf: RNE overflow is NaN */
        bits = (mpfr_signbit(y) ? 1u << (fi->width - 1) : 0) | fi->qnan;
    } else {
        bits = encode(fi, y);
        uint32_t sbit = 1u << (fi->width - 1);
        if (!mpfr_inf_p(y) && (bits & (sbit - 1)) > fi->maxfin) {
            /* e4m3: the top pattern of the top binade is NaN, not a number. */
            flags |= GP_EV_OVERFLOW | GP_EV_INEXACT;
            bits = (bits & sbit) | (rnd == MPFR_RNDZ ? fi->maxfin : fi->qnan);
        }
    }
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
    mpfr_clear(y);
    *ev |= flags;
    return bits;
}

static int oracle_core(gp_format f, const source *src, gp_rmode mode, uint32_t rbits, int ftz,
                       gp_oracle_result *out)
{
    gp_fmt_info fi = gp_fmt_get(f);
    gp_mpfr_env saved;
    gp_mpfr_env_enter(&saved);

    /* x truncated: exact for mpfr inputs (their own precision), 4096 bits for text;
     * decides specials, sign, tininess and the stochastic fraction. */
    mpfr_t xz;
    mpfr_prec_t px = src->x ? mpfr_get_prec(src->x) : 4096;
    mpfr_init2(xz, px > 64 ? px : 64);
    source_round(xz, src, MPFR_RNDZ);
    unsigned ev = 0;
    uint32_t sbit = 1u << (fi.width - 1);
    uint32_t sign = mpfr_signbit(xz) ? sbit : 0;

    if (mpfr_nan_p(xz)) {
        /* MPFR leaves the sign of a NaN it parses or copies unspecified: a NaN keeps the
         * source's sign bit, and text "-nan" is the negation of nan (C's strtod; IEEE
         * 754's negate acts on a NaN's sign), docs/formats.md */
        int neg = src->x ? mpfr_signbit(src->x) : src->s[0] == '-';
        out->bits = (neg ? sbit : 0) | fi.qnan;
    } else if (mpfr_inf_p(xz)) {
        out->bits = sign | (fi.inf ? fi.inf : fi.qnan);
        if (!fi.inf)
            ev |= GP_EV_INVALID;
    } else if (mpfr_zero_p(xz)) {
        /* a truncation is zero only for an exact zero (a non-zero value keeps its
         * leading bit at any precision) */
        out->bits = sign;
    } else {
        /* tiny: 0 < |x| < 2^emin. Exact from the truncation: 2^emin is representable. */
        mpfr_t mn;
        mpfr_init2(mn, 2);
        mpfr_set_ui_2exp(mn, 1, fi.emin, MPFR_RNDN);
        int tiny = mpfr_cmpabs(xz, mn) < 0;
        mpfr_clear(mn);
        if (ftz && tiny) {
            out->bits = sign;
            ev |= GP_EV_UNDERFLOW | GP_EV_INEXACT;
        } else if (mode == GP_RNE || mode == GP_RTZ) {
            out->bits = round_det(&fi, src, mode == GP_RNE ? MPFR_RNDN : MPFR_RNDZ, &ev);
            if (tiny && (ev & GP_EV_INEXACT))
                ev |= GP_EV_UNDERFLOW;
        } else {
            /* Stochastic: lo = round toward zero, hi = the next value away from zero.
             * Up iff rbits < floor(frac * 2^32), frac = (|x| - |lo|) / quantum. */
            unsigned evz = 0;
            uint32_t lo = round_det(&fi, src, MPFR_RNDZ, &evz);
            int exact = !(evz & GP_EV_INEXACT);
            if (evz & GP_EV_OVERFLOW) {          /* both neighbours beyond max finite */
                out->bits = sign | (fi.inf ? fi.inf : fi.qnan);
                ev |= GP_EV_OVERFLOW | GP_EV_INEXACT;
            } else if (exact) {
                out->bits = lo;
            } else {
                /* quantum at x: 2^(max(X, emin) - p + 1) */
                long X = (long)mpfr_get_exp(xz) - 1;
                long qexp = (X < fi.emin ? fi.emin : X) - (fi.p - 1);
                mpfr_t lov, fr;
                mpfr_init2(lov, 64);
                mpfr_init2(fr, px + 128);
                mpfr_set_d(lov, gp_fmt_to_f64(f, lo), MPFR_RNDN); /* exact: lo is a format value */
                mpfr_abs(fr, xz, MPFR_RNDN);
                mpfr_abs(lov, lov, MPFR_RNDN);
                mpfr_sub(fr, fr, lov, MPFR_RNDZ);                 /* exact: lov is within x's binade */
                mpfr_mul_2si(fr, fr, 32 - qexp, MPFR_RNDZ);
                unsigned long F = mpfr_get_ui(fr, MPFR_RNDZ);     /* floor(frac * 2^32) */
                mpfr_clear(lov);
                mpfr_clear(fr);
                ev |= GP_EV_INEXACT;
                if (tiny)
                    ev |= GP_EV_UNDERFLOW;
                if (rbits < F) {
                    uint32_t hi = lo + 1;                        /* next magnitude up */
                    if ((hi & (sbit - 1)) > fi.maxfin) {
                        hi = sign | (fi.inf ? fi.inf : fi.qnan);
                        ev |= GP_EV_OVERFLOW;
                    }
                    out->bits = hi;
                } else {
                    out->bits = lo;
                }
            }
        }
    }
    mpfr_clear(xz);
    gp_mpfr_env_leave(&saved);
    out->ev = ev;
    return 0;
}

int gp_oracle_round(gp_format f, mpfr_srcptr x, gp_rmode mode, uint32_t rbits, int ftz,
                    gp_oracle_result *out)
{
    source src = {x, NULL};
    return oracle_core(f, &src, mode, rbits, ftz, out);
}

int gp_oracle_round_d(gp_format f, double x, gp_rmode mode, uint32_t rbits, int ftz,
                      gp_oracle_result *out)
{
    mpfr_t v;
    mpfr_init2(v, 53);
    mpfr_set_d(v, x, MPFR_RNDN); /* exact */
    int r = gp_oracle_round(f, v, mode, rbits, ftz, out);
    mpfr_clear(v);
    uint64_t u = gp_f64_bits(x);
    if (((u >> 52) & 0x7ff) == 0x7ff && (u & 0xfffffffffffffull) && !((u >> 51) & 1))
        out->ev |= GP_EV_INVALID; /* signalling NaN */
    return r;
}

int gp_oracle_round_str(gp_format f, const char *s, gp_rmode mode, uint32_t rbits, int ftz,
                        gp_oracle_result *out, gp_error *err)
{
    mpfr_t probe;
    char *end = NULL;
    mpfr_flags_t flags = mpfr_flags_save(); /* the probe's inexact is not the caller's */
    mpfr_init2(probe, 8);
    mpfr_strtofr(probe, s, &end, 0, MPFR_RNDN);
    mpfr_clear(probe);
    mpfr_flags_restore(flags, MPFR_FLAGS_ALL);
    if (end == s || *end != '\0' || s[0] == ' ' || s[0] == '\t')
        return gp_error_set(err, "'%s' is not a number", s);
    source src = {NULL, s};
    return oracle_core(f, &src, mode, rbits, ftz, out);
}
