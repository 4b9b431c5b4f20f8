/* gp_error.c — see gp_error.h. */
#include "gp_error.h"

#include <stdarg.h>
#include <stdio.h>

int gp_error_set(gp_error *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}
