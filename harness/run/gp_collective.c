/* gp_collective.c — see gp_collective.h. */
#include "gp_collective.h"

int gp_coll_chunk(uint64_t j, uint64_t blen, int W)
{
    uint64_t cs = (blen + (uint64_t)W - 1) / (uint64_t)W;
    return cs ? (int)(j / cs) : 0;
}

int gp_coll_ring_rank(int W, int q, int h)
{
    return (q + 1 + h) % W;
}

uint64_t gp_coll_bucket(uint64_t j, uint64_t n, uint64_t bucket, uint64_t *pos)
{
    if (bucket == 0 || bucket >= n) {
        *pos = j;
        return n;
    }
    uint64_t b0 = j / bucket * bucket;
    *pos = j - b0;
    return n - b0 < bucket ? n - b0 : bucket;
}

uint64_t gp_coll_message(uint64_t j, uint64_t n, uint64_t bucket, int W, int tree)
{
    uint64_t pos, blen = gp_coll_bucket(j, n, bucket, &pos);
    if (tree)
        return j - pos;
    uint64_t cs = (blen + (uint64_t)W - 1) / (uint64_t)W;
    return j - pos + pos / cs * cs;
}

void gp_coll_quantize(const gp_scaled_cfg *q, const float *x, float *y, unsigned *ev, size_t n, uint64_t j0,
                      uint64_t size, uint64_t bucket, int W, int tree)
{
    for (size_t i = 0; i < n;) {
        uint64_t m0 = gp_coll_message(j0 + i, size, bucket, W, tree);
        size_t e = i + 1;
        while (e < n && gp_coll_message(j0 + e, size, bucket, W, tree) == m0)
            e++;
        gp_scaled_quantize(q, 1, e - i, x + i, y + i, NULL, NULL, NULL, 0.0f, 0, 0, 0, ev + i);
        i = e;
    }
}

void gp_coll_factors(const gp_scenario *sc, double *pre, double *post)
{
    double W = (double)sc->distributed.world_size;
    switch (sc->distributed.average) {
    case GP_AVG_PRE: *pre = sc->distributed.predivide; *post = W / sc->distributed.predivide; break;
    case GP_AVG_POST: *pre = 1.0; *post = W; break;
    default: *pre = W; *post = 1.0; break;
    }
}

uint32_t gp_coll_divide(gp_format rd, double v, double F, int op, int ftz, unsigned *ev)
{
    if (op) {
        uint32_t s = gp_fmt_from_f64(rd, 1.0 / F, GP_RNE, 0, 0, (unsigned *)0);
        return gp_fmt_from_f64(rd, v * gp_fmt_to_f64(rd, s), GP_RNE, 0, ftz, ev); /* exact product: <= 48 bits */
    }
    float inv = (float)(1.0 / F);
    float p = (float)(v * (double)inv); /* fl32 of the exact product */
    return gp_fmt_from_f64(rd, (double)p, GP_RNE, 0, ftz, ev);
}
