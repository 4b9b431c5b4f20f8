/* gp_error.c — see gp_error.h. */
#include "gp_error.h"

#include <stdarg.h>
#include <stdio.h>

int gp_error_set(gp_error *err, const char *fmt, ...)
{
    if (err) {
        char raw[sizeof err->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        /* One line whatever the arguments held (a path or origin with a newline): each
         * control byte becomes \xNN; an escape that does not fit is dropped whole. */
        size_t o = 0;
        for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
            if (*p >= 0x20 && *p != 0x7f) {
                if (o + 1 >= sizeof err->msg)
                    break;
                err->msg[o++] = (char)*p;
            } else {
                if (o + 4 >= sizeof err->msg)
                    break;
                snprintf(err->msg + o, 5, "\\x%02x", *p);
                o += 4;
            }
        }
        err->msg[o] = '\0';
    }
    return -1;
}
