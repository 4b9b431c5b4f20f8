/* gp_mpfr_env.h — MPFR's global state (exponent range, flags) saved on entry to a
 * reference computation and restored on exit, so callers never see it change. */
#ifndef GP_MPFR_ENV_H
#define GP_MPFR_ENV_H

#include <mpfr.h>

typedef struct {
    mpfr_exp_t emin, emax; /* the caller's exponent range */
    mpfr_flags_t flags;    /* the caller's flags */
} gp_mpfr_env;

/* Save the range and flags into *s, then widen the range to the largest MPFR allows. */
void gp_mpfr_env_enter(gp_mpfr_env *s);

/* Restore what gp_mpfr_env_enter saved. */
void gp_mpfr_env_leave(const gp_mpfr_env *s);

#endif
