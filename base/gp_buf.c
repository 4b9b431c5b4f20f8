/* gp_buf.c — see gp_buf.h. */
#include "gp_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gp_buf_put(gp_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->n + n + 1 > cap)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

void gp_buf_putc(gp_buf *b, char c)
{
    gp_buf_put(b, &c, 1);
}

void gp_buf_puts(gp_buf *b, const char *s)
{
    gp_buf_put(b, s, strlen(s));
}

void gp_buf_printf(gp_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)k < sizeof small) {
        gp_buf_put(b, small, (size_t)k);
        return;
    }
    char *big = malloc((size_t)k + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)k + 1, fmt, ap);
    va_end(ap);
    gp_buf_put(b, big, (size_t)k);
    free(big);
}

char *gp_buf_take(gp_buf *b)
{
    char *s = b->s;
    if (b->oom) {
        free(s);
        s = NULL;
    } else if (!s) {
        s = calloc(1, 1);
    }
    b->s = NULL;
    b->n = b->cap = 0;
    b->oom = 0;
    return s;
}
