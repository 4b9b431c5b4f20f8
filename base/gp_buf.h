/* gp_buf.h — a growable text buffer for the writers (report.md, report.html, scenario
 * YAML). Out of memory is sticky: later writes are dropped and gp_buf_take returns
 * NULL, so writers check once at the end. */
#ifndef GP_BUF_H
#define GP_BUF_H

#include <stddef.h>

typedef struct {
    char *s;    /* NUL-terminated text, or NULL before the first write */
    size_t n;   /* length of the text */
    size_t cap; /* allocated bytes */
    int oom;    /* an allocation failed */
} gp_buf;

#define GP_BUF_INIT {NULL, 0, 0, 0}

/* Append n bytes of s. */
void gp_buf_put(gp_buf *b, const char *s, size_t n);

/* Append one character. */
void gp_buf_putc(gp_buf *b, char c);

/* Append a NUL-terminated string. */
void gp_buf_puts(gp_buf *b, const char *s);

/* Append printf-style. */
void gp_buf_printf(gp_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Hand the text over (the caller frees; "" when nothing was written) and reset b; NULL
 * (and everything freed) when an allocation failed. */
char *gp_buf_take(gp_buf *b);

#endif
