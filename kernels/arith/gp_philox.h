/* gp_philox.h — Philox4x32-10 (Salmon et al., SC'11), the counter-based generator
 * behind stochastic rounding. A pure function of (seed, stream, index), so the CPU
 * replays exactly the bits a GPU thread drew, whatever the launch shape. */
#ifndef GP_PHILOX_H
#define GP_PHILOX_H

#include "gp_arith.h"

typedef struct { uint32_t v[4]; } gp_philox_ctr;  /* 128-bit counter / output block */
typedef struct { uint32_t v[2]; } gp_philox_key;  /* 64-bit key */

GP_ARITH void gp_philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

/* Philox4x32 with 10 rounds: multipliers 0xD2511F53/0xCD9E8D57, Weyl key
 * increments 0x9E3779B9/0xBB67AE85 applied between rounds. Matches Random123's
 * known-answer vectors (tests/test_philox.c). */
GP_ARITH gp_philox_ctr gp_philox4x32_10(gp_philox_ctr c, gp_philox_key k)
{
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k.v[0] += 0x9E3779B9u;
            k.v[1] += 0xBB67AE85u;
        }
        uint32_t hi0, lo0, hi1, lo1;
        gp_philox_mulhilo(0xD2511F53u, c.v[0], &hi0, &lo0);
        gp_philox_mulhilo(0xCD9E8D57u, c.v[2], &hi1, &lo1);
        gp_philox_ctr n;
        n.v[0] = hi1 ^ c.v[1] ^ k.v[0];
        n.v[1] = lo1;
        n.v[2] = hi0 ^ c.v[3] ^ k.v[1];
        n.v[3] = lo0;
        c = n;
    }
    return c;
}

/* The 32 random bits for element `index` of stream `stream` under `seed`:
 * word (index mod 4) of Philox(ctr = {index/4 lo, index/4 hi, stream lo, stream hi},
 * key = {seed lo, seed hi}). Streams separate tensors and steps; see callers. */
GP_ARITH uint32_t gp_rand_u32(uint64_t seed, uint64_t stream, uint64_t index)
{
    gp_philox_ctr c;
    gp_philox_key k;
    uint64_t blk = index >> 2;
    c.v[0] = (uint32_t)blk;
    c.v[1] = (uint32_t)(blk >> 32);
    c.v[2] = (uint32_t)stream;
    c.v[3] = (uint32_t)(stream >> 32);
    k.v[0] = (uint32_t)seed;
    k.v[1] = (uint32_t)(seed >> 32);
    return gp_philox4x32_10(c, k).v[index & 3];
}

#endif
