/* gp_test.h — helpers shared by the cmocka suites: the reproducible seed (printed,
 * forced with GP_TEST_SEED), sweep sizes (GP_SWEEP_N), and bit-exact assertions that
 * print values as %a plus hex bits with the caller's file and line. */
#ifndef GP_TEST_H
#define GP_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

/* The seed of this run: GP_TEST_SEED if set, else `fallback`. Printed once. */
static inline uint64_t gp_test_seed(uint64_t fallback)
{
    const char *s = getenv("GP_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 0) : fallback;
    printf("# seed %llu (force with GP_TEST_SEED=%llu)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    return seed;
}

/* A count from the environment variable `name`, else `fallback`. */
static inline long gp_test_count(const char *name, long fallback)
{
    const char *s = getenv(name);
    return s ? strtol(s, NULL, 0) : fallback;
}

/* Fail with a message at the caller's place unless got == want. */
#define gp_assert_bits(got, want, ...) \
    gp_assert_bits_((uint64_t)(got), (uint64_t)(want), __FILE__, __LINE__, __VA_ARGS__)
static inline void gp_assert_bits_(uint64_t got, uint64_t want, const char *file, int line,
                                   const char *fmt, ...)
{
    if (got == want)
        return;
    char ctx[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s:%d: got 0x%llx, want 0x%llx: %s\n", file, line, (unsigned long long)got,
            (unsigned long long)want, ctx);
    _fail(file, line);
}

/* A 64-bit splitmix step: the tests' own input generator (not the code under test). */
static inline uint64_t gp_test_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Whether the upper halves of the AVX registers are in use (XINUSE bit 2, read with
 * XGETBV ECX = 1): 1 yes, 0 no, -1 when the CPU cannot tell (no XGETBV ECX = 1, not
 * x86-64). A function that returns to legacy-SSE code with them in use makes every
 * later SSE/VEX transition slow on some CPUs (tests check the hot SIMD paths clear them). */
static inline int gp_test_avx_upper_in_use(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    uint32_t a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
    if (a < 0xd)
        return -1;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
    if (!(c >> 27 & 1)) /* OSXSAVE: XGETBV usable */
        return -1;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0xd), "c"(1));
    if (!(a >> 2 & 1)) /* XGETBV with ECX = 1 */
        return -1;
    __asm__ volatile("xgetbv" : "=a"(a), "=d"(d) : "c"(1));
    return (int)(a >> 2 & 1);
#else
    return -1;
#endif
}

#endif
