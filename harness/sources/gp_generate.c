/* gp_generate.c — see gp_generate.h. */
#include "gp_generate.h"

#include <gsl/gsl_cdf.h>
#include <math.h>
#include <string.h>

#include "gp_gen_simd.h"

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

/* What element_of needs of d beyond its sample, computed once a call. */
typedef struct {
    int signed_dist;
    uint32_t neg_cut, out_cut;
    uint64_t sparse_below; /* word 2 < this: a zero. (double)w2 < sparse_cut for the integer
                              w2 is w2 < ceil(sparse_cut) (sparse_cut = sparsity 2^32 in [0, 2^32)) */
    double outlier_scale;
} cuts;

static cuts cuts_of(const gp_dist *d)
{
    cuts c;
    c.signed_dist = d->kind == GP_DIST_LOGNORMAL || d->kind == GP_DIST_PARETO || d->kind == GP_DIST_CONSTANT;
    c.neg_cut = (uint32_t)(d->neg_frac * 65536.0);
    c.out_cut = (uint32_t)(d->outlier_frac * 65536.0);
    double sparse_cut = d->sparsity * 4294967296.0;
    c.sparse_below = sparse_cut > 0.0 ? (uint64_t)ceil(fmin(sparse_cut, 0x1p40)) : 0;
    c.outlier_scale = d->outlier_scale;
    return c;
}

/* The element of d from its sample v and Philox words 2-3 (gp_generate's contract). */
static inline float finish(const cuts *c, uint32_t w2, uint32_t w3, double v)
{
    /* Written without branches so that a loop of it vectorises (gcc keeps conditional
     * floating-point operations conditional under -ftrapping-math): the sign flipped on
     * the bits (as -v), a product with 1.0 (exact: v itself) for the elements that are
     * no outliers, a sparse zero's bits cleared (0.0f). */
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    b ^= (uint64_t)(c->signed_dist & ((w3 >> 16) < c->neg_cut)) << 63;
    memcpy(&v, &b, sizeof v);
    v *= (w3 & 0xffffu) < c->out_cut ? c->outlier_scale : 1.0;
    float f = (float)v;
    uint32_t fb;
    memcpy(&fb, &f, sizeof fb);
    fb &= -(uint32_t)((uint64_t)w2 >= c->sparse_below);
    memcpy(&f, &fb, sizeof f);
    return f;
}

/* The element of d drawn from the Philox output w (gp_generate's contract). */
static float element_of(const gp_dist *d, const cuts *c, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3)
{
    if (w2 < c->sparse_below)
        return 0.0f;
    double u = ((double)(((uint64_t)w0 << 21) | (w1 >> 11)) + 0.5) * 0x1p-53;
    return finish(c, w2, w3, sample(d, u));
}

/* Elements are generated GEN_BLOCK at a time: Philox words for the block
 * (gp_philox_block, vector registers), then for the normal and lognormal distributions
 * the uniforms, their inverse CDF (gp_ugaussian_pinv_block: GSL's bits, its central
 * branch in vector registers) and the finish, each a loop over the block. */
#define GEN_BLOCK 256
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define GEN_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define GEN_CLONES
#endif

/* u[j] = the uniform of element_of from words 0-1, j < m (exact integer to binary64,
 * then one rounding each for + 0.5 and the power-of-two scaling: the same on every clone). */
GEN_CLONES static void uniforms(const uint32_t *w0, const uint32_t *w1, size_t m, double *u)
{
    for (size_t j = 0; j < m; j++)
        u[j] = ((double)(((uint64_t)w0[j] << 21) | (w1[j] >> 11)) + 0.5) * 0x1p-53;
}

/* out[j] = the normal element of standard normal x[j], j < m (scale: the distribution's). */
GEN_CLONES static void normal_finish(const cuts *cp, double scale, const uint32_t *w2, const uint32_t *w3,
                                     const double *x, size_t m, float *out)
{
    const cuts c = *cp; /* a local copy: no store through out can change it, so the loop vectorises */
    for (size_t j = 0; j < m; j++)
        out[j] = finish(&c, w2[j], w3[j], scale * x[j]);
}

/* gp_generate (idx NULL) and gp_generate_at. */
static void generate(const gp_dist *d, uint64_t seed, uint64_t stream, uint64_t i0, const uint64_t *idx, size_t n,
                     float *out)
{
    uint32_t wb[4][GEN_BLOCK];
    uint32_t *const w[4] = {wb[0], wb[1], wb[2], wb[3]};
    double u[GEN_BLOCK], x[GEN_BLOCK];
    cuts c = cuts_of(d);
    int gaussian = d->kind == GP_DIST_NORMAL || d->kind == GP_DIST_LOGNORMAL;
    for (size_t b = 0; b < n; b += GEN_BLOCK) {
        size_t m = n - b < GEN_BLOCK ? n - b : GEN_BLOCK;
        gp_philox_block(GP_GEN_AUTO, seed, stream, i0 + b, idx ? idx + b : NULL, m, w);
        if (!gaussian) {
            for (size_t j = 0; j < m; j++)
                out[b + j] = element_of(d, &c, w[0][j], w[1][j], w[2][j], w[3][j]);
            continue;
        }
        uniforms(w[0], w[1], m, u);
        gp_ugaussian_pinv_block(GP_GEN_AUTO, u, m, x);
        if (d->kind == GP_DIST_NORMAL) {
            normal_finish(&c, d->scale, w[2], w[3], x, m, out + b);
            continue;
        }
        for (size_t j = 0; j < m; j++) /* lognormal: sample()'s arithmetic on the same x */
            out[b + j] = w[2][j] < c.sparse_below ? 0.0f
                                                        : finish(&c, w[2][j], w[3][j], d->scale * exp(d->sigma * x[j]));
    }
}

void gp_generate(const gp_dist *d, uint64_t seed, uint64_t stream, uint64_t i0, size_t n, float *out)
{
    generate(d, seed, stream, i0, NULL, n, out);
}

void gp_generate_at(const gp_dist *d, uint64_t seed, uint64_t stream, const uint64_t *idx, size_t n, float *out)
{
    generate(d, seed, stream, 0, idx, n, out);
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
