/* gp_bench_clock.h — the clocks the benchmarks read: wall seconds (monotonic) and this
 * process's CPU seconds (on a shared, loaded machine the wall clock counts other
 * processes' time too, so single-threaded figures use CPU time). */
#ifndef GP_BENCH_CLOCK_H
#define GP_BENCH_CLOCK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double gp_bench_wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline double gp_bench_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The host line every figure needs (bench/README.md): CPU model, family and model number, cores, the
 * SIMD flags the fast paths dispatch on, and the load average now, from /proc. */
static inline void gp_bench_host_line(FILE *out)
{
    char line[4096], model[256] = "?", family[32] = "?", number[32] = "?", simd[128] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    int have_flags = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *v = strchr(line, ':');
        if (!v)
            continue;
        v += 1 + (v[1] == ' ');
        v[strcspn(v, "\n")] = 0;
        if (!strncmp(line, "model name", 10) && model[0] == '?')
            snprintf(model, sizeof model, "%s", v);
        else if (!strncmp(line, "cpu family", 10) && family[0] == '?')
            snprintf(family, sizeof family, "%s", v);
        else if (!strncmp(line, "model", 5) && (line[5] == ' ' || line[5] == '\t') && number[0] == '?')
            snprintf(number, sizeof number, "%s", v);
        else if (!strncmp(line, "flags", 5) && !have_flags) {
            static const char *const want[] = {"avx512f", "avx512bw", "avx512vl", "avx2", "fma", "f16c"};
            have_flags = 1;
            for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
                size_t n = strlen(want[i]);
                for (const char *p = strstr(v, want[i]); p; p = strstr(p + 1, want[i]))
                    if ((p == v || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) {
                        size_t used = strlen(simd);
                        snprintf(simd + used, sizeof simd - used, "%s%s", used ? " " : "", want[i]);
                        break;
                    }
            }
        }
    }
    if (f)
        fclose(f);
    double la[3] = {-1, -1, -1};
    FILE *l = fopen("/proc/loadavg", "r");
    if (!l || fscanf(l, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3)
        la[0] = la[1] = la[2] = -1;
    if (l)
        fclose(l);
    fprintf(out, "host: %s, family %s model %s, %ld cores, flags %s, load average %.2f %.2f %.2f\n", model, family,
            number, sysconf(_SC_NPROCESSORS_ONLN), simd[0] ? simd : "-", la[0], la[1], la[2]);
    fflush(out);
}

#endif
