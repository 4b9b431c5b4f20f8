/* gp_deadline.c — see gp_deadline.h. */
#include "gp_deadline.h"

#include <time.h>

static _Thread_local double g_deadline, g_limit; /* CLOCK_MONOTONIC seconds; 0: none */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void gp_deadline_set(double seconds)
{
    g_limit = seconds > 0 ? seconds : 0;
    g_deadline = seconds > 0 ? now_s() + seconds : 0;
}

int gp_deadline_passed(void)
{
    return g_deadline > 0 && now_s() > g_deadline;
}

double gp_deadline_left(void)
{
    return g_deadline > 0 ? g_deadline - now_s() : 1e30;
}

double gp_deadline_limit(void)
{
    return g_limit;
}

