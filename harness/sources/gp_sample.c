/* gp_sample.c — see gp_sample.h. */
#include "gp_sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/arith/gp_philox.h"

/* A uniform integer in [0, bound] from 64 Philox bits (multiply-shift; bias below
 * bound / 2^64, far under anything a sample of <= 2^31 elements can show). */
static uint64_t uniform_upto(uint64_t seed, uint64_t stream, uint64_t ctr, uint64_t bound)
{
    gp_philox_key key = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    gp_philox_ctr c = {{(uint32_t)ctr, (uint32_t)(ctr >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)}};
    gp_philox_ctr w = gp_philox4x32_10(c, key);
    uint64_t r = (uint64_t)w.v[0] << 32 | w.v[1];
    if (bound == UINT64_MAX)
        return r;
    return (uint64_t)(((unsigned __int128)r * (bound + 1)) >> 64);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int gp_sample_indices(uint64_t seed, uint64_t stream, uint64_t M, uint64_t n, uint64_t *idx, gp_error *err)
{
    if (n > M)
        return gp_error_set(err, "sample of %llu from %llu elements", (unsigned long long)n, (unsigned long long)M);
    if (n == M) {
        for (uint64_t i = 0; i < n; i++)
            idx[i] = i;
        return 0;
    }
    /* Floyd: for j = M-n .. M-1 draw t in [0, j]; take t unless taken, else j. Every
     * n-subset is equally likely. The set is an open-addressing table of 2^b >= 2n slots. */
    uint64_t cap = 1;
    while (cap < 2 * n)
        cap <<= 1;
    uint64_t *tab = malloc(cap * sizeof *tab);
    if (!tab)
        return gp_error_set(err, "out of memory (sample of %llu elements)", (unsigned long long)n);
    memset(tab, 0xff, cap * sizeof *tab); /* UINT64_MAX: empty (never an element: M <= 2^63) */
    uint64_t k = 0;
    for (uint64_t j = M - n; j < M; j++) {
        uint64_t t = uniform_upto(seed, stream, j, j);
        for (int pass = 0; pass < 2; pass++) {
            uint64_t h = (t * 0x9e3779b97f4a7c15ull) & (cap - 1);
            while (tab[h] != UINT64_MAX && tab[h] != t)
                h = (h + 1) & (cap - 1);
            if (tab[h] == UINT64_MAX) {
                tab[h] = t;
                idx[k++] = t;
                break;
            }
            t = j; /* t was taken: j is new (only j itself can be drawn as j) */
        }
    }
    free(tab);
    qsort(idx, (size_t)n, sizeof *idx, cmp_u64);
    return 0;
}

void gp_ratio_merge(gp_ratio_sums *a, const gp_ratio_sums *b)
{
    a->n += b->n;
    a->sy += b->sy;
    a->sx += b->sx;
    a->syy += b->syy;
    a->sxy += b->sxy;
    a->sxx += b->sxx;
}

int gp_ratio_interval(const gp_ratio_sums *s, const double *pop, size_t nh, double *est, double *lo, double *hi)
{
    double Y = 0, X = 0;
    for (size_t h = 0; h < nh; h++) {
        if (s[h].n <= 0)
            continue;
        double w = pop[h] / s[h].n;
        Y += w * s[h].sy;
        X += w * s[h].sx;
    }
    if (!(X > 0))
        return -1;
    double R = Y / X, var = 0;
    for (size_t h = 0; h < nh; h++) {
        double n = s[h].n;
        if (n < 2 || n >= pop[h])
            continue; /* seen whole (or a single unit, no spread to estimate: see docs) */
        double w = pop[h] / n;
        double se = s[h].sy - R * s[h].sx;
        double se2 = s[h].syy - 2 * R * s[h].sxy + R * R * s[h].sxx;
        double S2 = (se2 - se * se / n) / (n - 1);
        if (S2 < 0)
            S2 = 0; /* cancellation */
        var += w * w * n * (1 - n / pop[h]) * S2;
    }
    double half = GP_SAMPLE_Z * sqrt(var) / X;
    *est = R;
    *lo = R - half > 0 ? R - half : 0;
    *hi = R + half;
    return 0;
}
