/* gp_fuzz_check.h — always-on assertion for fuzz targets: prints file, line and the
 * failed condition with a formatted explanation, then aborts (a crash to libFuzzer). */
#ifndef GP_FUZZ_CHECK_H
#define GP_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define GP_FUZZ_CHECK(cond, ...)                                                  \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
            abort();                                                              \
        }                                                                         \
    } while (0)

#endif
