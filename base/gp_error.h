/* gp_error.h — the error value library code fills instead of printing or exiting.
 * Input errors carry "file:line:column: " at the front of the message. */
#ifndef GP_ERROR_H
#define GP_ERROR_H

typedef struct {
    char msg[512]; /* one line, no trailing newline; empty when no error */
} gp_error;

#ifdef __cplusplus
extern "C" {
#endif

/* Set err->msg printf-style (truncated to fit), always one line: a control byte the
 * arguments bring (a newline in a path or an origin) is written as \xNN. err may be
 * NULL. Returns -1 so callers can `return gp_error_set(err, ...)`. */
int gp_error_set(gp_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif

#endif
