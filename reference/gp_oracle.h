/* gp_oracle.h — the rounding oracle: MPFR rounding of an exact real (an mpfr_t, a
 * double, or a decimal/hex string parsed exactly) to any gradprec format and mode,
 * the CORE-MATH way: round to p bits in MPFR's wide exponent range, then
 * mpfr_check_range and mpfr_subnormalize inside the format's emin/emax. MPFR's
 * exponent range and flags are saved and restored around every call. */
#ifndef GP_ORACLE_H
#define GP_ORACLE_H

#include <mpfr.h>

#include "../base/gp_error.h"
#include "../kernels/arith/gp_format.h"

typedef struct {
    uint32_t bits; /* result encoding in the target format */
    unsigned ev;   /* GP_EV_* events, same definitions as kernels/arith */
} gp_oracle_result;

/* Round the exact value x (any precision) to format f. mode/rbits/ftz as in
 * gp_fmt_from_f64_bits; the oracle derives the result and every event from MPFR
 * independently of that code. NaN input gives the canonical quiet NaN of f (the
 * oracle does not model payloads; compare NaN-ness) without INVALID (MPFR has no
 * signalling NaNs). Returns 0. */
int gp_oracle_round(gp_format f, mpfr_srcptr x, gp_rmode mode, uint32_t rbits, int ftz,
                    gp_oracle_result *out);

/* The same for a binary64 input; a signalling NaN reports INVALID. */
int gp_oracle_round_d(gp_format f, double x, gp_rmode mode, uint32_t rbits, int ftz,
                      gp_oracle_result *out);

/* The same for a number written as text: decimal ("2.98e-8"), hex float ("0x1p-25"),
 * "inf", "nan", with an optional sign. Rounded directly from the exact decimal value
 * (never through binary64). Stochastic mode takes the fraction from a 4096-bit
 * truncation of the input. Returns 0, or -1 with err set when `s` is not a number. */
int gp_oracle_round_str(gp_format f, const char *s, gp_rmode mode, uint32_t rbits, int ftz,
                        gp_oracle_result *out, gp_error *err);

#endif
