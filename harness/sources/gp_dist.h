/* gp_dist.h — the distribution a tensor's values come from: generated (normal,
 * lognormal, Laplace, Pareto, constant), explicit per-token values, or replayed from a
 * dump. The scenario holds one per gradient and weight; the sources read it. */
#ifndef GP_DIST_H
#define GP_DIST_H

#include <stddef.h>

typedef enum {
    GP_DIST_NORMAL = 0, /* N(0, scale^2) */
    GP_DIST_LOGNORMAL,  /* scale * exp(sigma * N(0,1)), random sign (see `sign`) */
    GP_DIST_LAPLACE,    /* Laplace(0, scale) */
    GP_DIST_PARETO,     /* scale * Pareto(alpha) (>= scale, heavy tail), random sign */
    GP_DIST_CONSTANT,   /* every element = scale, random sign */
    GP_DIST_VALUES,     /* explicit per-token values per micro-batch (size must be 1) */
    GP_DIST_REPLAY      /* real tensors from a dump (harness/sources/gp_replay.h, docs/replay.md) */
} gp_dist_kind;

/* A per-element distribution. Generated values are the per-token-mean gradient of
 * each micro-batch, made fp32 (see harness/sources/gp_generate.h). */
typedef struct {
    gp_dist_kind kind;    /* default normal */
    double scale;         /* default 1.0 */
    double sigma;         /* lognormal sigma, default 1.0 */
    double alpha;         /* pareto shape, default 3.0 */
    double neg_frac;      /* `sign`: probability of a negative value for lognormal,
                             pareto and constant, default 0.5 (0 = all positive) */
    double sparsity;      /* fraction of exact zeros, default 0 */
    double outlier_frac;  /* fraction of elements multiplied by outlier_scale, default 0 */
    double outlier_scale; /* default 1000 */
    double shrink;        /* per optimizer step factor on the magnitude, default 1.0 */
    double token_snr;     /* grad only: 0 (default) = every micro-batch drawn independently;
                             > 0 = a shared signal drawn once per step plus per-token noise
                             of std scale/token_snr averaged over the micro-batch's n_k
                             tokens (harness/sources/gp_generate.h, docs/scenarios.md) */
    /* GP_DIST_VALUES: values[k][0..ntok[k]-1] are the per-token values of micro-batch k */
    size_t nmb;
    size_t *ntok;
    double **values;
    /* GP_DIST_REPLAY: the dump (the path as resolved against the scenario file's folder:
       absolute) and the tensor's key in it; both malloc'ed */
    char *replay;
    char *replay_key;
} gp_dist;

#endif
