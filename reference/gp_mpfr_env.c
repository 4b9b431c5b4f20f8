/* gp_mpfr_env.c — see gp_mpfr_env.h. */
#include "gp_mpfr_env.h"

void gp_mpfr_env_enter(gp_mpfr_env *s)
{
    s->emin = mpfr_get_emin();
    s->emax = mpfr_get_emax();
    s->flags = mpfr_flags_save();
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
}

void gp_mpfr_env_leave(const gp_mpfr_env *s)
{
    mpfr_set_emin(s->emin);
    mpfr_set_emax(s->emax);
    mpfr_flags_restore(s->flags, MPFR_FLAGS_ALL);
}
