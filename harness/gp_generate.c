/* gp_generate.c — see gp_generate.h. */
#include "gp_generate.h"

#include <gsl/gsl_cdf.h>
#include <math.h>
#include <string.h>

#include "../kernels/arith/gp_philox.h"

uint64_t gp_stream_id(unsigned purpose, uint64_t tensor, uint64_t step, uint64_t microbatch)
{
    return ((uint64_t)purpose << 60) | ((tensor & 0xfffffu) << 40) | ((step & 0x7fffffu) << 17) |
           (microbatch & 0x1ffffu);
}

static double sample(const gp_dist *d, double u)
{
    switch (d->kind) {
    case GP_DIST_NORMAL: return d->scale * gsl_cdf_ugaussian_Pinv(u);
    case GP_DIST_LOGNORMAL: return d->scale * exp(d->sigma * gsl_cdf_ugaussian_Pinv(u));
    case GP_DIST_LAPLACE: return gsl_cdf_laplace_Pinv(u, d->scale);
    case GP_DIST_PARETO: return gsl_cdf_pareto_Pinv(u, d->alpha, d->scale);
    default: return d->scale; /* constant */
    }
}

/* The element of d drawn from the Philox output w (gp_generate's contract). */
static float element_of(const gp_dist *d, gp_philox_ctr w)
{
    int signed_dist = d->kind == GP_DIST_LOGNORMAL || d->kind == GP_DIST_PARETO || d->kind == GP_DIST_CONSTANT;
    uint32_t neg_cut = (uint32_t)(d->neg_frac * 65536.0);
    uint32_t out_cut = (uint32_t)(d->outlier_frac * 65536.0);
    double sparse_cut = d->sparsity * 4294967296.0;
    if ((double)w.v[2] < sparse_cut)
        return 0.0f;
    double u = ((double)(((uint64_t)w.v[0] << 21) | (w.v[1] >> 11)) + 0.5) * 0x1p-53;
    double v = sample(d, u);
    if (signed_dist && (w.v[3] >> 16) < neg_cut)
        v = -v;
    if ((w.v[3] & 0xffffu) < out_cut)
        v *= d->outlier_scale;
    return (float)v;
}

/* Element i of d on `stream` (gp_generate's contract). */
static float element(const gp_dist *d, gp_philox_key key, uint64_t stream, uint64_t i)
{
    gp_philox_ctr c = {{(uint32_t)i, (uint32_t)(i >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)}};
    return element_of(d, gp_philox4x32_10(c, key));
}

/* Philox outputs of elements i0 .. i0+n-1 (n <= GEN_BLOCK) on `stream`, word by word: the
 * same gp_philox4x32_10 per element, over a block of independent counters so that the
 * compiler vectorises the ten rounds (an AVX2 clone chosen at run time; integer
 * arithmetic, so every clone gives the same words). */
#define GEN_BLOCK 256
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx2", "default")))
#endif
static void philox_block(gp_philox_key key, uint64_t stream, uint64_t i0, size_t n, uint32_t w[4][GEN_BLOCK])
{
    for (size_t j = 0; j < n; j++) {
        uint64_t i = i0 + j;
        gp_philox_ctr c = {{(uint32_t)i, (uint32_t)(i >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)}};
        gp_philox_ctr r = gp_philox4x32_10(c, key);
        w[0][j] = r.v[0];
        w[1][j] = r.v[1];
        w[2][j] = r.v[2];
        w[3][j] = r.v[3];
    }
}

void gp_generate(const gp_dist *d, uint64_t seed, uint64_t stream, uint64_t i0, size_t n, float *out)
{
    gp_philox_key key = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    uint32_t w[4][GEN_BLOCK];
    for (size_t b = 0; b < n; b += GEN_BLOCK) {
        size_t m = n - b < GEN_BLOCK ? n - b : GEN_BLOCK;
        philox_block(key, stream, i0 + b, m, w);
        for (size_t j = 0; j < m; j++) {
            gp_philox_ctr r = {{w[0][j], w[1][j], w[2][j], w[3][j]}};
            out[b + j] = element_of(d, r);
        }
    }
}

void gp_generate_at(const gp_dist *d, uint64_t seed, uint64_t stream, const uint64_t *idx, size_t n, float *out)
{
    gp_philox_key key = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    for (size_t j = 0; j < n; j++)
        out[j] = element(d, key, stream, idx[j]);
}

void gp_generate_signal_noise(const gp_dist *d, uint64_t seed, uint64_t tensor, uint64_t step, uint64_t k, long nk,
                              uint64_t i0, const uint64_t *idx, size_t n, float *out, float *noise)
{
    gp_dist z;
    memset(&z, 0, sizeof z);
    z.kind = GP_DIST_NORMAL;
    z.scale = 1.0;
    uint64_t ss = gp_stream_id(GP_STREAM_GRAD, tensor, step, GP_SIGNAL_MICROBATCH);
    uint64_t ns = gp_stream_id(GP_STREAM_NOISE, tensor, step, k);
    if (idx) {
        gp_generate_at(d, seed, ss, idx, n, out);
        gp_generate_at(&z, seed, ns, idx, n, noise);
    } else {
        gp_generate(d, seed, ss, i0, n, out);
        gp_generate(&z, seed, ns, i0, n, noise);
    }
    double sd = d->scale / d->token_snr / sqrt((double)nk);
    for (size_t j = 0; j < n; j++)
        out[j] = (float)((double)out[j] + sd * (double)noise[j]);
}
