/* gp_bench_clock.h — the clocks the benchmarks read: wall seconds (monotonic) and this
 * process's CPU seconds (on a shared, loaded machine the wall clock counts other
 * processes' time too, so single-threaded figures use CPU time). */
#ifndef GP_BENCH_CLOCK_H
#define GP_BENCH_CLOCK_H

#include <time.h>

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

#endif
