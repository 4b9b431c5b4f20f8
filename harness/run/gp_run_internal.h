/* gp_run_internal.h — the runner's internal pieces shared by harness/run/gp_run_*.c and
 * gp_runner.c (not installed, not included outside harness/run/): the working state of a
 * chunk, a lane, a unit and a run, and the functions one piece calls in another. */
#ifndef GP_RUN_INTERNAL_H
#define GP_RUN_INTERNAL_H

#include "gp_runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/arith/gp_accum.h"
#include "../../kernels/arith/gp_clip.h"
#include "../../kernels/arith/gp_scaler.h"
#include "../../kernels/arith/gp_schedule.h"
#include "../../kernels/cpu/gp_cpu_backend.h"
#include "../../reference/gp_exact.h"
#include "../sources/gp_generate.h"
#include "../sources/gp_replay.h"
#include "gp_attrib.h"
#include "gp_collective.h"

/* The histogram's copies: element i of a block counts in copy i % GP_HIST_WAYS, so that
 * neighbours in one bin do not wait on each other's increment (a store to load chain);
 * integer counts, summed in any order. A copy has GP_HIST_SLOTS slots: bin b in slot
 * 1 + b, and slot 0 the discard of outputs that have no bin (zeros, non-finite values),
 * so that the vectorised blocks count without a branch (gp_run_accum.c, note_outputs). */
#define GP_HIST_WAYS 8
#define GP_HIST_SLOTS (GP_HIST_BINS + 1)
#define CHUNK GP_OPTIM_CHUNK /* elements processed together; results do not depend on it */

/* ---- per-tensor working state for one chunk of elements ---- */

/* The per-element event counters of runs with sampling (chunk.cnt). */
enum { CNT_ABS, CNT_ADD, CNT_UND, CNT_RND, CNT_OVF, CNT_STORED, CNT_SUB, NCNT };

typedef struct {
    const gp_scenario *sc;
    const gp_backend *b, *cmp;
    size_t t;           /* tensor index */
    int step;           /* 0-based optimizer iteration */
    double shrink;      /* gradient magnitude factor of this iteration: shrink^step */
    double s;           /* loss scale (1 without a scaler) */
    double rs;          /* replayed entries of this step carry the scale rs (1: unscaled;
                           loss_scale.replay_scales): the entry is x_k * rs */
    gp_format gf, af;
    size_t n;           /* elements in this chunk */
    uint64_t i0;        /* first element */
    double *xs;         /* [n] exact scaled backward output, nudged (see gp_f64_nudge) */
    double *sqx;        /* [n] this micro-batch's terms of ss_x, written with the stored
                           gradients, added to ss_x by the attribution in element order */
    void *grad, *acc, *old, *comp, *acc2, *comp2;
    double *err[GP_MECH_GRAD_END]; /* [n] signed local errors per mechanism, unscaled units */
    int rare;              /* 1: the errors of overflow, saturation and non-finite values are
                              in their arrays (gp_run_rare_on); 0: they are all +0 and their
                              arrays unset (chunk_begin clears only the other three) */
    double *partial;       /* [n] running binary64 sum of the exact outputs (charts only) */
    double *qb_s, *qb_v, *qb_d; /* [n] precision.grad scaled: this window's S, V, D of each element
                              (gp_runner.h, gp_stats.qb_*), summed over its micro-batches */
    double *sr_prev;       /* [n] u = up - f of the element's previous stochastic rounding in
                              this window (0: none) */
    double *lag_u, *lag_w; /* the tensor's all-lags record (tensor_state) from this chunk's
                              first element, when this iteration is recorded, else NULL */
    size_t lag_lim;        /* elements of this chunk inside the record */
    int lag_rec;           /* the micro-batch being attributed is the recorded one */
    /* generated tensors: [n] this micro-batch's per-token means m, the exact sums of m
     * and of n_k*m (binary64 + spill, reference/gp_exact.h), the final gradients */
    float *m, *noise;      /* noise: scratch of the signal + noise model */
    double *sum_m, *sum_nm, *gacc, *gsame;
    gp_fixacc *sp_m, *sp_nm;
    int *sp_used;          /* the lane's flag: some spill of its pool may be non-zero (else
                              every one is zero: not cleared, not read) */
    double *gfull;         /* [n] out: the exact full-batch gradient, rounded to binary64 */
    gp_stats *st;          /* this step's statistics of the tensor */
    double *traj_err, *traj_ref; /* [K] this step's trajectory sums */
    uint64_t *hist;        /* [GP_HIST_WAYS][GP_HIST_SLOTS] the thread's histogram of the exact
                              outputs, in GP_HIST_WAYS copies summed at the end */
    gp_mismatch *first;    /* where the unit's first disagreement with cmp is noted */
    gp_replay *dump;       /* replayed gradients: the tensor's dump, else NULL */
    const uint64_t *idx;   /* sampled tensor: its chosen elements (element j of the run is
                              idx[j] of the dump), else NULL */
    uint32_t *cnt[NCNT];   /* runs with sampling: per element absorbed additions, additions
                              of a non-zero addend, underflows, roundings of a non-zero
                              value, overflows, non-zero stored gradients, subnormal ones
                              (the units of the fraction and count estimates); else NULL */
    double *el;            /* multi-step runs with sampling: [n][GP_NEST][2] this step's y, x of
                              each ratio estimate per element (summed over the steps before
                              they become units: tensor_state), else NULL */
    /* data-parallel runs (docs/distributed.md); single-process: errw 1, tok the batch's,
     * mb_base 0, tm_mul 1, tm_den N, D NULL */
    double errw;           /* weight of this rank's local errors in the final gradient (1/W) */
    const long *tok;       /* [K] this rank's token counts (this step's: batch.tokens per step) */
    int K;                 /* this step's micro-batches K_s */
    int mb_base;           /* r * K: the global index of the rank's first micro-batch */
    double tm_mul, tm_den; /* token_mean: x = tm_mul * S / tm_den (W and N, or 1 and N_r) */
    struct dist_pool *D;   /* the ranks' buffers, else NULL */
    size_t off;            /* this chunk's offset in the pool's per-element arrays */
    float given;           /* precision.grad ":delayed": this step's multiplier */
    uint32_t *amax;        /* precision.grad whose scale spans chunks (gp_run_spanning):
                              the tensor's amax slots of this step (tensor_state.amax), else NULL */
    size_t namax;          /* ... slots per micro-batch */
    const uint32_t *acc_amax; /* a scaled accumulator on a tensor of more than one chunk: the
                              amax of its running sum after each micro-batch (tensor_state), else NULL */
    const unsigned *acc_ev;   /* while a scaled accumulator's micro-batch is attributed: each
                              element's events of the re-quantization, else NULL */
} chunk;

/* Chunk c's overflow, saturation and non-finite error arrays, set to +0 before their
 * first read or write in a window (most windows never touch them). */
static inline void gp_run_rare_on(chunk *c)
{
    if (c->rare)
        return;
    memset(c->err[GP_MECH_OVERFLOW], 0, c->n * sizeof(double));
    memset(c->err[GP_MECH_SATURATION], 0, c->n * sizeof(double));
    memset(c->err[GP_MECH_NONFINITE], 0, c->n * sizeof(double));
    c->rare = 1;
}

/* Chunk c's error of mechanism m at element i grows by d: every write of err[m] but the
 * vectorised kernels' (gp_attrib.h), which write only underflow, absorption and rounding. */
static inline void gp_run_err_add(chunk *c, gp_mechanism m, size_t i, double d)
{
    if (m == GP_MECH_OVERFLOW || m == GP_MECH_SATURATION || m == GP_MECH_NONFINITE)
        gp_run_rare_on(c);
    c->err[m][i] += d;
}

/* Count an event of element i in the per-element counters (runs with sampling). */
#define CNT_EL(c, k, i)                 \
    do {                                \
        if ((c)->cnt[0])                \
            (c)->cnt[k][i]++;           \
    } while (0)

static inline size_t width_bytes(gp_format f)
{
    return (size_t)gp_fmt_get(f).width / 8;
}

static inline double widen(gp_format f, uint32_t bits)
{
    return gp_fmt_to_f64_fast(f, bits);
}

/* The per-element loops below are written once as always-inline bodies taking the formats
 * as arguments, and instantiated with constant formats for the common configurations
 * (the format tests fold away) plus once with the run's formats for the rest: the same
 * operations in the same order, so the same results. */
#ifdef GP_COVERAGE_BUILD /* tests/coverage.py: one out-of-line copy, whose branches count once over every instance */
#define GP_HOT static
#else
#define GP_HOT static inline __attribute__((always_inline))
#endif

/* The vectorised blocks of gp_attrib.h (1), or only the per-element definitions (0: the
 * coverage build, whose branch counts are the definitions', tests/coverage.py; the blocks
 * are checked equal to them by test_accum). */
#ifndef GP_VECTOR_BLOCKS
#define GP_VECTOR_BLOCKS 1
#endif

/* Which mechanism a rounding of the exact value `exact` to `bits` in format f falls
 * under, and whether it was a loss at all (gp_classify_v). */
static inline gp_mechanism classify(gp_format f, double exact, uint32_t bits, unsigned ev)
{
    return gp_classify_v(f, exact, bits, widen(f, bits), ev);
}

/* Data-parallel buffers for a window of CHUNK elements (docs/distributed.md). */
struct dist_pool {
    int W;
    gp_format rd;             /* the reduce dtype */
    size_t ab, rb;            /* bytes per element: accumulator, reduce dtype */
    char *racc;               /* [W][CHUNK] each rank's local accumulator (accumulator format) */
    char *val;                /* [W][CHUNK] each rank's value in the reduce dtype */
    char *part, *add, *pold;  /* [CHUNK] the travelling partial sum, the addend, its old value */
    char *part2;              /* [CHUNK] the compared backend's result of a hop (--compare) */
    double *cerr[GP_MECH_GRAD_END]; /* [CHUNK] the collective's local errors, final units */
    double *sh, *sl;          /* [CHUNK] normalize: rank: g_same as a double-double sum */
};

/* ---- the simulation ---- */

/* Per-tensor arrays. acc/comp/gfull hold the whole tensor when the step couples tensors
 * (a loss scaler's found_inf, global-norm clipping), else one chunk per thread; the
 * optimizer state holds the whole tensor when there is more than one step (else each
 * thread's lane holds one chunk's state, made again for every chunk). */
typedef struct {
    size_t acc_cap;
    void *acc, *comp;
    double *gfull;
    gp_optim_state opt;
    /* multi-step runs with sampling: per element [size][GP_NEST][2], the y, x of each ratio
     * estimate of this step (el_step) and summed over the steps kept so far (el_tot; the
     * same array when no step can be skipped), made units at the end (docs/scenarios.md,
     * "Estimates at scale": an element's totals over the steps); else NULL */
    double *el_step, *el_tot;
    /* precision.grad ":delayed": the multiplier this step quantizes with (0: none yet, 1
     * is used: TE's initial scale) and the amax of the steps so far, newest last */
    float dscale;
    float amax_hist[1024];
    int nhist;
    /* precision.grad whose scale spans chunks (gp_run_spanning) of a tensor of more than
     * one chunk: this step's amaxes of the fp32 gradient, as fp32 bits of |amax| (a NaN
     * counts above every number), namax slots per global micro-batch r * K + k: the
     * tensor's, then each 128x128 tile's (gp_run_tile order); else NULL */
    uint32_t *amax;
    size_t namax;
    /* a scaled accumulator (precision.acc_sc) on a tensor of more than one chunk: the model
     * of its running sum (fp32, the whole tensor) and, per micro-batch of this step, the
     * amax of the sum after the addition (fp32 bits) from which it is re-quantized; else NULL */
    float *acc_shadow;
    uint32_t *acc_amax;
    /* a stochastic accumulator (not sampled): u and w (gp_sr_lag.h) of the first lag_n
     * elements' roundings in the last micro-batch of iteration 1 (rank 0's), for the
     * all-lags test after the run; else NULL */
    double *lag_u, *lag_w;
    size_t lag_n;
} tensor_state;

/* One thread's working memory (a lane): the per-element arrays of CHUNK elements the
 * chunks of a window share, the chunks themselves, replayed weights of one chunk, the
 * optimizer state of one chunk (a one-step run's whole state; with more steps, the
 * scratch borrowed over the tensor's state), its histogram, and per-tensor accumulators
 * of one chunk when nothing couples the tensors. */
typedef struct {
    chunk c;      /* the pool */
    chunk *grp;   /* [GP_PLUGIN_MANY_MAX] the chunks of the window it runs */
    float *wbuf;  /* [CHUNK] */
    float *sbuf;  /* [4 * CHUNK] runs with a carried state or a twin: its entries of one chunk, else NULL */
    gp_optim_state opt;
    void *acc, *comp; /* [CHUNK] uncoupled runs: the chunk's accumulator (and Kahan's) */
    double *gfull;    /* [CHUNK] uncoupled runs: the chunk's exact full-batch gradient */
    uint64_t hist[GP_HIST_WAYS * GP_HIST_SLOTS];
    int sp_used;  /* some spill of the pool may be non-zero (chunk.sp_used) */
    struct dist_pool *D; /* data-parallel runs: the ranks' buffers of one window, else NULL */
} lane;

/* A unit of work (an accumulation window, or one chunk's optimizer step in a coupled
 * step) and what it produced, kept apart so that units can run on any thread and be
 * merged into the run in unit order: every floating-point sum of the report is then a
 * sum of the units' partial sums in one fixed order, whatever the number of threads. */
typedef struct {
    size_t ng;                             /* chunks */
    size_t t[GP_PLUGIN_MANY_MAX];          /* tensor of chunk j */
    uint64_t i0[GP_PLUGIN_MANY_MAX];       /* its first element */
    size_t off[GP_PLUGIN_MANY_MAX];        /* its place in the lane's pool */
    gp_stats *gst;                         /* [GP_PLUGIN_MANY_MAX] gradient statistics per chunk */
    gp_optim_counts oc[GP_PLUGIN_MANY_MAX]; /* optimizer events per chunk */
    gp_optim_sums os[GP_PLUGIN_MANY_MAX];   /* optimizer final sums per chunk (one-step runs) */
    double *traj_err, *traj_ref;           /* [K] trajectory sums */
    gp_dd ref_ss;                          /* sum of squares of the exact full-batch gradient */
    gp_mismatch first;                     /* the unit's first disagreement with cmp */
    gp_mismatch twin;                      /* the unit's first departure from torch's twin */
    int found_inf;
    int rc;
    gp_error err;
} unit;

typedef struct sim {
    const gp_scenario *sc;
    const gp_backend *b, *cmp;
    gp_result *res;
    tensor_state *ts;
    lane *lanes;  /* [nlanes] lane 0 is the calling thread's */
    int nlanes;
    unit *units;  /* [nunits] a wave of units */
    size_t nunits;
    double N;          /* this iteration's tokens N_s (every rank's) */
    int coupled, persist;
    int sampled;  /* some tensor is sampled: per-element units for the intervals */
    int step_idx; /* 0-based iteration */
    float scale;  /* this iteration's loss scale */
    double rscale; /* the scale this iteration's replayed entries carry (loss_scale.replay_scales; 1: unscaled) */
    gp_optim_step step;
    gp_dd ref_ss; /* this step's sum of squares of the exact full-batch gradient (summed only under clipping) */
    double *traj_err, *traj_ref; /* [K] this step's trajectory sums */
    gp_stats *step_st; /* [ntensors] gradient statistics of the current step: kept only
                          when the step is not skipped (a skipped step's gradient was
                          discarded by design; its loss counts as scaling) */
    gp_replay **dump, **wdump; /* [ntensors] replayed gradients / weights, else NULL */
    gp_replay **sdump, **tdump; /* [ntensors] a carried state / torch's twin, else NULL */
    gp_optim_step *tstep; /* [ntensors] this iteration's per-tensor inputs: t, lr, weight_decay, ref */
    int K;             /* this iteration's micro-batches K_s */
    int acc_wave;      /* the micro-batch the accumulator's amax pass is at (acc_amax_run) */
    uint64_t **idx;    /* [ntensors] a sampled tensor's chosen elements, else NULL */
    const double *w;   /* [ntensors] a sampled tensor's expansion weight M_h / n_h, else 1 */
    const uint64_t *pop; /* [ntensors] a sampled tensor's elements M_h, else 0 */
    uint64_t *done;    /* progress counter (gp_run_ctl), else NULL */
} sim;

static inline size_t min_size(uint64_t a, size_t b)
{
    return a < b ? (size_t)a : b;
}

/* What one run needs for its replayed tensors: the dumps (opened once), the elements a
 * `sample:` chose, and the scenario as the runner sees it: a shallow copy whose sampled
 * tensors have their sample's size (element j of the run is element idx[j] of the dump). */
typedef struct {
    gp_scenario view;
    gp_replay **dump, **wdump; /* [ntensors] */
    gp_replay **sdump, **tdump; /* [ntensors] tensors[t].state's and .twin's dumps, else NULL */
    uint64_t **idx;            /* [ntensors] */
    double *w;                 /* [ntensors] expansion weight M_h / n_h (1: not sampled) */
    uint64_t *pop;             /* [ntensors] a sampled tensor's elements M (by `sample:` or
                                  a dump that holds a sample, `population:`), else 0 */
    int sampled;
} replay_run;

/* ---- precision.grad whose scale spans chunks: per-tensor current scaling, 128x128 tiles,
 * two-level NVFP4's tensor scale (docs/scenarios.md, "Scaled gradients in the runner") ---- */

/* Does sc's grad need amaxes over more than a chunk? */
static inline int gp_run_spanning(const gp_scenario *sc)
{
    const gp_scaled_cfg *q = &sc->precision.grad_sc;
    return sc->precision.grad_scaled &&
           (q->kind == GP_SC_CURRENT || q->kind == GP_SC_BLOCK_128X128 || (q->kind == GP_SC_NVFP4 && q->two_level));
}

/* Tensor t's 2-D view (tensors[t].cols, else one row): elements per row. */
static inline uint64_t gp_run_cols(const gp_scenario *sc, size_t t)
{
    return sc->tensors[t].cols ? sc->tensors[t].cols : sc->tensors[t].size;
}

/* The 128x128 tile of tensor t's element i, row-major over tiles, and in *w the elements
 * from i to the end of its row's 128-column segment of the tile, at most end - i. */
static inline uint64_t gp_run_tile(const gp_scenario *sc, size_t t, uint64_t i, uint64_t end, uint64_t *w)
{
    uint64_t cols = gp_run_cols(sc, t), r = i / cols, col = i % cols, ntc = (cols + 127) / 128;
    uint64_t seg = r * cols + (col / 128 + 1) * 128, row_end = (r + 1) * cols;
    seg = seg < row_end ? seg : row_end;
    *w = (seg < end ? seg : end) - i;
    return (r / 128) * ntc + col / 128;
}

/* Tensor t's amax slots per micro-batch: the tensor's, plus one per 128x128 tile of a
 * blockwise_128x128 grad. */
static inline size_t gp_run_amax_per(const gp_scenario *sc, size_t t)
{
    uint64_t cols = gp_run_cols(sc, t), rows = sc->tensors[t].size / (cols ? cols : 1);
    int tiles = sc->precision.grad_sc.kind == GP_SC_BLOCK_128X128;
    return 1 + (tiles ? (size_t)(((rows + 127) / 128) * ((cols + 127) / 128)) : 0);
}

/* Tensor t's amax slots of a step: gp_run_amax_per for each global micro-batch (ranks x K). */
static inline size_t gp_run_amax_slots(const gp_scenario *sc, size_t t)
{
    int W = gp_scenario_distributed(sc) ? sc->distributed.world_size : 1;
    return gp_run_amax_per(sc, t) * (size_t)W * (size_t)sc->batch.microbatches;
}

/* Fold |m| (fp32) into an amax slot: the larger bit pattern of the two, atomically (as
 * numbers for non-negative floats; a NaN above all): the same for any order of folds. */
static inline void gp_run_amax_fold(uint32_t *slot, float m)
{
    uint32_t b = gp_f32_bits(m) & 0x7fffffffu, cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
    while (b > cur && !__atomic_compare_exchange_n(slot, &cur, b, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* The amaxes of micro-batch k of chunk c (its exact outputs in c->xs) into its slots. */
void gp_run_amax_note(chunk *c, int k);
/* A scaled accumulator's model of micro-batch k of chunk c (its exact outputs in c->xs)
 * on the running sum sh[0..n) of the chunk: re-quantized from micro-batch k-1's amax
 * (k > 0; k == 0: zero), the stored gradients added as the backend adds them
 * (gp_accum_step, fp32 RNE), the amax of the sum folded into *slot. */
void gp_run_acc_model(chunk *c, int k, float *sh, const uint32_t *amax, uint32_t *slot);

/* ---- gp_run_accum.c: the stored gradients, their accumulation on the backend, unscaling ---- */

/* A backend call returned rc != 0: 1 means "configuration not supported" (returns
 * GP_RUN_REFUSED, with the backend's reason when it gave one), anything else a failure (-1). */
int gp_run_backend_failure(const gp_backend *b, const char *what, int rc, gp_error *err);
/* The stored gradients of one micro-batch of chunk c. */
void gp_run_store_grads(chunk *c, int k);
/* Micro-batch k of the chunks G[0..ng), whose gradients are stored: accumulate on the
 * backend(s), attribute. */
int gp_run_accumulate(chunk *G, size_t ng, int k, gp_error *err);
/* Unscale on the backend (and the compared one); attribute; report found_inf. */
int gp_run_unscale(chunk *c, int *found_inf, gp_error *err);

/* ---- gp_run_grads.c: the exact backward outputs of generated, replayed and explicit tensors ---- */

/* Generated (or replayed) tensor, micro-batch k. */
int gp_run_generate_microbatch(chunk *c, double N, int k, gp_error *err);
/* Micro-batch k's exact scaled outputs into c->xs, nothing else (the amax pass). */
int gp_run_outputs(chunk *c, double N, int k, gp_error *err);
/* Generated tensor, after the window: unscale, the final gradients and their statistics. */
int gp_run_generated_final(chunk *c, double N, int *found_inf, gp_error *err);
/* Explicit per-token values (size 1): everything exact in rationals. */
int gp_run_explicit(chunk *c, const gp_tensor_spec *ts, double N, int *found_inf, gp_error *err);

/* ---- gp_run_collective.c: generated tensors across W ranks and the simulated collective ---- */

int gp_run_distributed(chunk *G, size_t ng, double N, int *found_inf, gp_error *err);
/* Rank r's inputs of chunk c: its token counts, first global micro-batch, weight and
 * token-mean normalization (what gp_run_outputs reads). */
void gp_run_rank_inputs(chunk *c, double N, int r);

/* ---- gp_verdict.c: metrics, losses and the verdict from the statistics ---- */

double gp_verdict_ratio(double num_ss, double den_ss);
/* The metrics and losses of stats st. */
void gp_verdict_derive(const gp_stats *st, double *metric, double *loss);
/* Every step skipped: scaling_rel_err (and the scaling loss) 1 where left undefined. */
void gp_verdict_all_skipped(double *metric, double *loss);
/* The verdict and the dominant mechanism of r. */
void gp_verdict_judge(const gp_scenario *sc, gp_result *r);
void gp_optim_counts_add(gp_optim_counts *a, const gp_optim_counts *b);
void gp_optim_sums_add(gp_optim_sums *a, const gp_optim_sums *b);
void gp_stats_add(gp_stats *a, const gp_stats *b);
/* a += b with b's sums and counts multiplied by num/den. */
void gp_stats_add_w(gp_stats *a, const gp_stats *b, double den, double num);

/* ---- gp_run_window.c: a step's accumulation windows, run in waves on the lanes ---- */

/* The scenario's time limit (gp_deadline_set) has passed: -3. */
int gp_run_time_up(const sim *S, gp_error *err);
/* Clear what unit U produces (its chunks stay). */
void gp_run_unit_reset(const sim *S, unit *U);
/* Units [0, n) of the wave, each by fn on some lane. */
void gp_run_par_for(sim *S, size_t n, void (*fn)(sim *, lane *, size_t));
void gp_run_progress_add(const sim *S, uint64_t work);
/* Optimizer phase of one chunk on lane L. */
int gp_run_optimize_chunk(sim *S, lane *L, size_t t, uint64_t i0, size_t n, const void *acc, const double *gfull,
                          gp_optim_counts *oc, gp_optim_sums *os, gp_mismatch *first, gp_mismatch *twin,
                          gp_error *err);
/* Accumulate every tensor for the current step, window after window. */
int gp_run_accumulate_step(sim *S, int *found_inf, gp_error *err);

/* ---- gp_run_step.c: the iterations: clipping, the coupled optimizer step, the loss scale ---- */

/* The table that clips and updates the loss scale for backend b. */
const gp_plugin *gp_run_clip_ops(const gp_backend *b);
/* All iterations: accumulate -> unscale -> clip -> AdamW -> scale update. */
int gp_run_simulate(sim *S, gp_error *err);

/* ---- gp_run_sample.c: the replayed dumps and the samples of one run, their intervals ---- */

/* Open the dumps and choose the samples of scenario sc (a dump that fails to open: -3). */
int gp_run_replay_begin(const gp_scenario *sc, replay_run *R, gp_error *err);
void gp_run_replay_end(replay_run *R, size_t nt);
/* Intervals of a sampled run. */
void gp_run_sampled_intervals(const gp_scenario *sc, const replay_run *R, gp_result *res);

#endif
