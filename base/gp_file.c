/* gp_file.c — see gp_file.h. */
#include "gp_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *gp_file_read(const char *path, size_t max_bytes, size_t *len, gp_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        gp_error_set(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    const char *why = NULL;
    for (;;) {
        if (cap - n < 2) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                why = "out of memory";
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (n > max_bytes) {
            why = "too large";
            break;
        }
        if (k == 0)
            break;
    }
    int eno = errno, bad = !why && ferror(f);
    fclose(f);
    if (why || bad) {
        free(buf);
        if (bad)
            gp_error_set(err, "%s: cannot read: %s", path, strerror(eno));
        else if (strcmp(why, "too large") == 0)
            gp_error_set(err, "%s: larger than %zu bytes", path, max_bytes);
        else
            gp_error_set(err, "%s: %s", path, why);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}
