/* gp_fuzz_check.h — what every fuzz target shares: the always-on assertion (prints
 * file, line and the failed condition with a formatted explanation, then aborts: a
 * crash to libFuzzer); the divergence-guided features (how large a divergence was and
 * which loss mechanisms fired, as libFuzzer extra counters); and findings (inputs that
 * reach a new (mechanism, divergence) pair, written as scenario YAML). */
#ifndef GP_FUZZ_CHECK_H
#define GP_FUZZ_CHECK_H

#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness/scenario/gp_scenario.h"
#include "../kernels/arith/gp_format.h"
#include "../reports/gp_report.h"

#define GP_FUZZ_CHECK(cond, ...)                                                  \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
            abort();                                                              \
        }                                                                         \
    } while (0)

/* The YAML of s (gp_scenario_to_yaml) must load back (origin `what` in messages) and
 * write the same YAML again; returns that YAML (malloc'ed, the caller frees). */
static inline char *gp_fuzz_yaml_roundtrip(const gp_scenario *s, const char *what)
{
    gp_error e = {""};
    char *y1 = gp_scenario_to_yaml(s);
    GP_FUZZ_CHECK(y1 != NULL, "%s: to_yaml failed", what);
    gp_scenario t;
    int rc = gp_scenario_load_string(y1, strlen(y1), what, &t, &e);
    GP_FUZZ_CHECK(rc == 0, "%s: the written YAML does not load back: %s\n%s", what, e.msg, y1);
    char *y2 = gp_scenario_to_yaml(&t);
    GP_FUZZ_CHECK(y2 && strcmp(y1, y2) == 0, "%s: YAML round trip not stable:\n%s\n---\n%s", what, y1,
                  y2 ? y2 : "");
    free(y2);
    gp_scenario_free(&t);
    return y1;
}

/* ---- divergence-guided features ----
 * A target reports per input: a divergence (a relative error, an error/bound ratio...)
 * bucketed by binade, and the set of mechanisms that fired. Under libFuzzer
 * (GP_LIBFUZZER, defined by fuzz/CMakeLists.txt for the libFuzzer executables) the
 * counters live in the `__libfuzzer_extra_counters` section: libFuzzer clears them
 * before each input and treats every non-zero counter as a feature, so it keeps inputs
 * that reach a new mechanism set, a larger divergence, or an error closer to its bound.
 * In the plain regression driver they are an ordinary array nobody reads. */
#if defined(GP_LIBFUZZER)
#define GP_FUZZ_COUNTERS __attribute__((section("__libfuzzer_extra_counters"), used)) static uint8_t
#else
#define GP_FUZZ_COUNTERS static uint8_t
#endif

#define GP_FUZZ_BUCKETS 40 /* divergence buckets, see gp_fuzz_bucket */

/* The bucket of a divergence r >= 0: 0 when r == 0; 1 + clamp(floor(log2 r) + 37, 0, 37)
 * for finite r > 0 (1: r < 2^-36, ..., 37: r in [2^-1, 1), 38: r in [1, 2)); 39 when
 * r >= 2, infinite or NaN. */
static inline unsigned gp_fuzz_bucket(double r)
{
    if (r == 0)
        return 0;
    if (!(r < 2.0))
        return GP_FUZZ_BUCKETS - 1;
    int b = ilogb(r) + 37;
    return 1u + (unsigned)(b < 0 ? 0 : b > 37 ? 37 : b);
}

/* Mechanisms of the taxonomy (DESIGN.md §1) a target can see fire, as bits. */
enum {
    GP_FUZZ_ABSORBED = 1u,  /* an addition with a non-zero addend left acc unchanged */
    GP_FUZZ_UNDERFLOW = 2u, /* a rounding reported UNDERFLOW (tiny and inexact, or flushed) */
    GP_FUZZ_OVERFLOW = 4u,  /* a rounding reported OVERFLOW, or a value became inf */
    GP_FUZZ_SUBNORMAL = 8u, /* an input or a stored result was subnormal */
    GP_FUZZ_NMECH = 16      /* number of mechanism sets */
};

/* The mechanism bits that GP_EV_* events imply. */
static inline unsigned gp_fuzz_mech_of_events(unsigned ev)
{
    return ((ev & GP_EV_ABSORBED) ? GP_FUZZ_ABSORBED : 0u) | ((ev & GP_EV_UNDERFLOW) ? GP_FUZZ_UNDERFLOW : 0u) |
           ((ev & GP_EV_OVERFLOW) ? GP_FUZZ_OVERFLOW : 0u);
}

/* Is `bits` a non-zero subnormal of format f? */
static inline int gp_fuzz_is_subnormal(gp_format f, uint32_t bits)
{
    gp_fmt_info i = gp_fmt_get(f);
    uint32_t mag = bits & ((1u << (i.width - 1)) - 1u);
    return mag != 0 && mag < (1u << (i.p - 1));
}

/* "absorbed,underflow" (or "none") into buf. */
static inline void gp_fuzz_mech_names(unsigned mech, char *buf, size_t n)
{
    static const char *const names[] = {"absorbed", "underflow", "overflow", "subnormal"};
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < 4; i++)
        if ((mech >> i) & 1u) {
            int w = snprintf(buf + used, n - used, "%s%s", used ? "," : "", names[i]);
            if (w < 0 || (size_t)w >= n - used)
                return;
            used += (size_t)w;
        }
    if (!used)
        snprintf(buf, n, "none");
}

/* Mark feature i of a counter array (saturating). */
static inline void gp_fuzz_feature(uint8_t *counters, size_t i)
{
    if (counters[i] < 255)
        counters[i]++;
}

/* ---- findings ----
 * With the environment variable GP_FINDINGS_DIR set, a target calls gp_fuzz_finding for
 * an input that reached a (mechanism set, divergence bucket) pair not seen before in
 * this process (gp_fuzz_pair_new) nor by another process writing to the same directory
 * (gp_fuzz_pair_claim). The file DIR/TARGET-HASH.yaml (HASH: FNV-1a 64 of the input, 16 hex
 * digits) holds `header` as '#' comment lines, then the scenario YAML the input decodes
 * to; it is written atomically (a temporary name, then rename), so parallel fuzzing
 * jobs never leave half a file. Returns 1 when written, 0 when not asked or on error
 * (a message on stderr: a finding is never worth a crash). */

/* FNV-1a, 64 bits. */
static inline uint64_t gp_fuzz_hash(const uint8_t *data, size_t size)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 0x100000001b3ull;
    return h;
}

/* Is (mech, bucket) new in this process? Marks it seen. `seen` has GP_FUZZ_NMECH *
 * GP_FUZZ_BUCKETS entries, zero-initialised by the caller (one table per target). */
static inline int gp_fuzz_pair_new(uint8_t *seen, unsigned mech, unsigned bucket)
{
    uint8_t *p = &seen[(mech % GP_FUZZ_NMECH) * GP_FUZZ_BUCKETS + bucket % GP_FUZZ_BUCKETS];
    int fresh = !*p;
    *p = 1;
    return fresh;
}

/* Claim (mech, bucket) for `target` in GP_FINDINGS_DIR across processes (libFuzzer's
 * fork and jobs modes run many): creates DIR/.TARGET-mMM-bBB exclusively. Returns 1 when
 * this call created it, 0 when it existed already, the variable is unset, or on error. */
static inline int gp_fuzz_pair_claim(const char *target, unsigned mech, unsigned bucket)
{
    const char *dir = getenv("GP_FINDINGS_DIR");
    char path[4096];
    if (!dir || !*dir ||
        snprintf(path, sizeof path, "%s/.%s-m%02u-b%02u", dir, target, mech, bucket) >= (int)sizeof path)
        return 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

static inline int gp_fuzz_finding(const char *target, const uint8_t *data, size_t size, const char *header,
                                  const gp_scenario *s)
{
    const char *dir = getenv("GP_FINDINGS_DIR");
    if (!dir || !*dir)
        return 0;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s-%016llx.yaml", dir, target,
                 (unsigned long long)gp_fuzz_hash(data, size)) >= (int)sizeof path)
        return 0;
    char *yaml = gp_scenario_to_yaml(s);
    size_t hl = 0, yl = yaml ? strlen(yaml) : 0;
    for (const char *c = header; *c; c++)
        hl += 1 + 2 * (*c == '\n'); /* each line gains "# " */
    char *text = yaml ? malloc(hl + yl + 4) : NULL;
    int ok = 0;
    if (text) {
        char *o = text;
        *o++ = '#';
        *o++ = ' ';
        for (const char *c = header; *c; c++) {
            *o++ = *c;
            if (*c == '\n' && c[1]) {
                *o++ = '#';
                *o++ = ' ';
            }
        }
        if (o[-1] != '\n')
            *o++ = '\n';
        memcpy(o, yaml, yl + 1);
        gp_error e = {""};
        ok = gp_write_atomic(path, text, &e) == 0;
        if (!ok)
            fprintf(stderr, "gp_fuzz_finding: %s\n", e.msg);
    }
    free(text);
    free(yaml);
    return ok;
}

#endif
