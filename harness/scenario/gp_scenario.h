/* gp_scenario.h — the scenario model (DESIGN.md §4) and its YAML loader. A scenario
 * is plain data: every field has a documented default (gp_scenario_init), the loader
 * fills it from YAML with file:line:column errors, presets are YAML text loaded the
 * same way, and gp_scenario_to_yaml writes one back. */
#ifndef GP_SCENARIO_H
#define GP_SCENARIO_H

#include "../../kernels/gp_scaled_tensor.h"
#include <stddef.h>
#include <stdint.h>

#include "../../kernels/arith/gp_accum.h"
#include "../../kernels/arith/gp_format.h"
#include "../../base/gp_error.h"
#include "../sources/gp_dist.h"
#include "gp_metrics.h"

/* A scaled reduce dtype's ranks compute their scales over each message they send (a ring
 * chunk of a bucket, or a tree's bucket); the runner holds a tensor's elements in blocks of
 * this many (its CHUNK, asserted there), so a message must not cross one: tensors of at
 * most this size, or buckets dividing it (checked by the loader). */
#define GP_COLL_MESSAGE_BLOCK 16384

#define GP_NAME_MAX 128
#define GP_MAX_TENSOR_SIZE ((size_t)1 << 31) /* elements per tensor */
#define GP_MAX_MICROBATCHES 65536
#define GP_MAX_TOKENS 1000000000L            /* tokens per micro-batch */
#define GP_MAX_WORK ((uint64_t)1 << 40)      /* steps x (elements x micro-batches + 4096) */
#define GP_MAX_RUN_BYTES ((uint64_t)64 << 30) /* what a run may hold for its elements */
#define GP_SWEEP_MAX_AXES 4                  /* axes one sweep may cross */
#define GP_SWEEP_MAX_ZIP 4                   /* keys one axis may sweep together */
#define GP_SWEEP_MAX_KEYS 8                  /* keys of one sweep in all */
#define GP_SWEEP_MAX_VALUES 256              /* values of one swept key */
#define GP_SWEEP_MAX_POINTS 4096             /* scenarios one sweep may expand to */
#define GP_SWEEP_TEXT 64                     /* bytes of a swept key or value's text */

typedef struct {
    char name[GP_NAME_MAX];
    size_t size;    /* elements, default 1024 (1 for explicit values; a replayed
                       gradient's size comes from its dump) */
    size_t cols;    /* `cols: C`: the tensor's 2-D view, size / C rows of C elements,
                       row-major (the tiles of a blockwise_128x128 grad); C divides size
                       and is a multiple of 128 or equal to size; 0 = one row of size */
    size_t sample;  /* `sample: N`: metrics estimated on N elements chosen from the seed
                       (harness/sources/gp_sample.h); 0 = every element (or the scenario's sample) */
    uint64_t population; /* `population: M`: the dump's entries are already a sample of
                       `size` elements chosen from the tensor's M (gradprec.torch.capture
                       with sample=): metrics are estimates over them; 0 (or M = size):
                       the dump holds the whole tensor */
    gp_dist grad;
    gp_dist weight; /* initial weights, default normal scale 0.02 */
    /* `state: {replay, key, step}`: AdamW's state when the capture began (docs/replay.md,
       "Replaying a capture as torch's twin"): entries KEY/state/exp_avg, KEY/state/exp_avg_sq
       (optimizer.state's dtype) and KEY/state/master (fp32, with optimizer.master); the
       backend's AdamW and the exact reference start from them and from step count `step`
       (torch's state['step'], T0: the first replayed step is T0 + 1). replay NULL: none
       (m = v = 0, step 0). replay (resolved as grad.replay) and key malloc'ed */
    struct {
        char *replay, *key;
        long step;
    } state;
    /* `twin: {replay, key}`: torch's state after each step, entries KEY/step<S>/param,
       exp_avg, exp_avg_sq (and master): compared bit for bit with the backend's after every
       step (metric twin_mismatch_count). replay NULL: none. malloc'ed */
    struct {
        char *replay, *key;
    } twin;
    /* `optimizer: {lr, lr_steps, weight_decay}`: this tensor's overrides of the scenario's
       (a torch param group of its own); set_* 0: the scenario's value */
    struct {
        int set_lr, set_wd;
        double lr, weight_decay;
        double *lr_steps; /* [steps] the LR of each optimizer step, NULL: none. malloc'ed */
        int nlr_steps;
    } optimizer;
} gp_tensor_spec;

typedef enum { GP_RED_TOKEN_MEAN = 0, GP_RED_MEAN, GP_RED_MEAN_NO_DIV, GP_RED_SUM } gp_reduction;
typedef enum { GP_FB_MEAN = 0, GP_FB_SUM } gp_fullbatch;
typedef enum { GP_LS_NONE = 0, GP_LS_STATIC, GP_LS_DYNAMIC } gp_ls_mode;
/* Data-parallel simulation (docs/distributed.md). */
typedef enum { GP_COLL_RING = 0, GP_COLL_TREE, GP_COLL_REDUCE_SCATTER } gp_collective;
typedef enum { GP_AVG_PRE = 0, GP_AVG_POST, GP_AVG_OP } gp_average;
typedef enum { GP_NORM_GLOBAL = 0, GP_NORM_RANK } gp_token_norm;
#define GP_MAX_WORLD 256 /* ranks one scenario may simulate (docs/limits.md) */

typedef enum {
    GP_SCHED_CONSTANT = 0, GP_SCHED_COSINE, GP_SCHED_LINEAR, GP_SCHED_INVSQRT, GP_SCHED_STEP
} gp_schedule_kind;

typedef struct {
    char name[GP_NAME_MAX]; /* default "scenario" (the file name without .yaml) */
    uint64_t seed;          /* default 0 */

    gp_tensor_spec *tensors; /* at least one */
    size_t ntensors;

    struct {
        int accumulation_steps; /* A: the divisor of `mean`; default = microbatches */
        int microbatches;       /* K (< A makes a partial last window), default 8 */
        long *tokens;           /* K token counts; default 512 each. YAML: an integer
                                   (all equal), a list, or {min, max} drawn uniformly
                                   with the scenario seed. With per-step counts: those of
                                   the first step with K micro-batches */
        /* YAML a list of `steps` lists: step s has its own K_s = step_mb[s] micro-batches
           (1 <= K_s <= max K_s = microbatches <= accumulation_steps) with token counts
           step_tokens[s][0..K_s); NULL: every step has K and tokens (use
           gp_scenario_step_mb / gp_scenario_step_tokens). malloc'ed; step_tokens has a
           NULL after its `steps` lists */
        int *step_mb;
        long **step_tokens;
    } batch;

    gp_reduction reduction; /* default token_mean */
    gp_fullbatch fullbatch; /* default mean */

    struct {
        gp_format grad;           /* dtype the backward writes, default fp32 (fp32 when
                                     grad_scaled: the dequantized values) */
        int grad_scaled;          /* the grad is a scaled or block format (grad_sc) */
        gp_scaled_cfg grad_sc;    /* ... its recipe (kernels/gp_scaled_tensor.h) */
        gp_format accumulator;    /* default fp32 (fp32 when acc_scaled: the dequantized values) */
        int acc_scaled;           /* the accumulator is re-quantized to a scaled format (acc_sc)
                                     after every micro-batch: per-tensor current scaling only */
        gp_scaled_cfg acc_sc;     /* ... its recipe */
        gp_acc_rounding rounding; /* default rne */
        int ftz;                  /* default false */
    } precision;

    struct {
        gp_ls_mode mode;         /* default none */
        double init;             /* default 65536 (a power of two) */
        double growth, backoff;  /* defaults 2.0, 0.5 */
        int interval;            /* default 2000 */
        int unscale_before_clip; /* default true */
        int update;              /* default true; false = the scale update is forgotten */
        double *replay_scales;   /* `replay_scales`: [steps] the scale each optimizer step's
                                    replayed entries carry (a GradScaler capture: the
                                    backward's output is the loss scale times the
                                    gradient); the replay divides it out (powers of two:
                                    exact). NULL = the entries are unscaled. malloc'ed */
        int nreplay_scales;
        int tracker;             /* GradScaler's growth tracker when the run begins (a
                                    capture's _growth_tracker), default 0 */
    } loss_scale;

    struct {
        double max_norm; /* default 0 = no clipping */
    } clip;

    struct {
        double lr;                /* default 1e-4 */
        double beta1, beta2, eps; /* defaults 0.9, 0.999, 1e-8 */
        double weight_decay;      /* default 0.01 */
        gp_format param;          /* default fp32 */
        int master;               /* master weights: 0 none (default), else fp32 */
        gp_format state;          /* m and v, default fp32 */
        int lowbit;               /* state: a low-bit state's name (kernels/cpu/gp_lowbit.h's
                                     gp_lowbit; `state` is then fp32, the dequantized values);
                                     0 (default): m and v stored in `state` */
        int kahan;                /* Kahan-compensated params, default false */
        int stochastic;           /* stochastic rounding of the stored param, default false */
        int fused;                /* 0 none (default); 1 torch_cpu: torch.optim.AdamW(fused=True)'s
                                     CPU kernel (GP_ADAMW_TORCH_FUSED_CPU), state = param */
        int evaluation;           /* operation order, a gp_adamw_eval: default torch_cuda */
        double *lr_steps;         /* `lr_steps`: [steps] the LR of each optimizer step (what a
                                     captured run's scheduler set); replaces lr x schedule
                                     (which must be constant). NULL: none. malloc'ed */
        int nlr_steps;
    } optimizer;

    struct {
        gp_schedule_kind kind; /* default constant */
        int warmup;            /* default 0 */
        int total;             /* default = steps */
        double min_lr;         /* default 0 */
        int step_size;         /* step schedule: default 100 */
        double gamma;          /* step schedule: default 0.1 */
    } schedule;

    int steps; /* optimizer steps, default 1 */
    uint64_t sample; /* scenario-level `sample: N`: metrics estimated on about N elements
                        across the tensors (gp_run_tensor_elements); 0 = every element */

    struct {                    /* `distributed:` (docs/distributed.md); inactive by default */
        int world_size;         /* W ranks, default 1 */
        gp_collective collective; /* default ring */
        gp_format reduce_dtype; /* the collective's dtype when reduce_set (else precision.accumulator:
                                   use gp_scenario_reduce_dtype) */
        int reduce_set;         /* reduce_dtype was given */
        int reduce_scaled;      /* reduce_dtype is a scaled format (reduce_sc; then reduce_dtype is
                                   fp32, the precision partial sums are added in) */
        gp_scaled_cfg reduce_sc; /* what each rank quantizes what it sends with, its own scales
                                   (docs/distributed.md, "Scaled reduce dtypes") */
        gp_average average;     /* where the 1/W happens, default pre (DDP's) */
        double predivide;       /* pre: the factor divided before the sum (the rest, W/predivide,
                                   after it); default W, reduce_scatter: FSDP's factor */
        int no_sync;            /* default true: one collective per window; false: one per
                                   micro-batch, on the accumulated gradient (DDP without no_sync) */
        long bucket_elements;   /* elements per bucket, 0 (default) = each tensor one bucket */
        gp_token_norm normalize; /* token_mean: global (all-reduced N, default) or rank (N_r) */
        long *tokens;           /* [W * K] rank-major token counts, NULL = batch.tokens on every rank */
    } distributed;

    struct {
        int set[GP_NMETRICS];     /* 1 when the metric has a threshold */
        double max[GP_NMETRICS];  /* the largest value that passes */
        int set_min[GP_NMETRICS]; /* 1 when the metric has a lower bound too (two-sided:
                                     YAML {min: X, max: Y}; a plain number is the max) */
        double min[GP_NMETRICS];  /* the smallest value that passes */
    } thresholds;

    struct {                      /* one point of a `sweep:` (gp_scenario_load_all_*) */
        char group[GP_NAME_MAX];  /* the file's scenario name; "" when not swept */
        int naxes;                /* crossed axes (keys swept together count once) */
        int nkeys;                /* swept keys in all, in the order the file gives them */
        int axis[GP_SWEEP_MAX_KEYS];                 /* the axis of each key */
        char key[GP_SWEEP_MAX_KEYS][GP_SWEEP_TEXT];   /* "batch.accumulation_steps" */
        char value[GP_SWEEP_MAX_KEYS][GP_SWEEP_TEXT]; /* this point's value, as written */
    } sweep;
    unsigned char exact_metrics[GP_NMETRICS]; /* `exact_metrics: [NAME, ...]`: metrics this
                                                  scenario determines exactly; report.json lists
                                                  them and `gradprec gate` compares them for
                                                  equality (CHANGED, docs/gate.md) */
    struct {
        int set;                /* 0: none given; the scenario then only must not fail */
        gp_verdict verdict;     /* the verdict it must get (YAML expect: {verdict: fail, ...}) */
        int has_mechanism;      /* required for verdict fail */
        gp_mechanism mechanism; /* the dominant mechanism it must name */
    } expect;
} gp_scenario;

/* The YAML names of the enumerations ("token_mean", "kahan", "dynamic", "cosine", ...),
 * the spellings the loader accepts and reports print; "?" out of range. */
const char *gp_reduction_name(gp_reduction r);
const char *gp_acc_rounding_name(gp_acc_rounding r);
const char *gp_ls_mode_name(gp_ls_mode m);
const char *gp_schedule_name(gp_schedule_kind k);
const char *gp_collective_name(gp_collective c);
const char *gp_average_name(gp_average a);

/* 1 when s simulates a collective: world_size > 1, or one rank whose reduce dtype is not
 * the accumulator's (the cast there and back is then all the collective does). A world of
 * one rank in the accumulator's dtype is the single-process scenario, bit for bit. */
int gp_scenario_distributed(const gp_scenario *s);

/* The collective's dtype: distributed.reduce_dtype when given, else the accumulator's. */
gp_format gp_scenario_reduce_dtype(const gp_scenario *s);

/* The collective's dtype as the scenario names it: the scaled format's canonical name
 * (gp_scaled_name) when distributed.reduce_scaled, else gp_scenario_reduce_dtype's name;
 * written into buf[0..n), which is returned. */
const char *gp_scenario_reduce_name(const gp_scenario *s, char *buf, size_t n);

/* Token count of micro-batch k on rank r (batch.tokens when no per-rank counts are given). */
long gp_scenario_tokens(const gp_scenario *s, int r, int k);

/* Micro-batches K_s of optimizer step `step` (0-based): batch.step_mb[step] with per-step
 * token counts, else batch.microbatches. */
int gp_scenario_step_mb(const gp_scenario *s, int step);

/* The token counts of step `step`'s K_s micro-batches (batch.tokens without per-step counts). */
const long *gp_scenario_step_tokens(const gp_scenario *s, int step);

/* 1 when some tensor has a `twin` (the run reports twin_mismatch_count). */
int gp_scenario_has_twin(const gp_scenario *s);

/* "torch_cuda", "torch_cpu", "unfused", "torch_cpu_zen4", "torch_cuda_foreach",
 * "torch_cpu_intel_avx512", "torch_cpu_host", "torch_cpu_foreach" */
const char *gp_adamw_eval_name(int evaluation);

/* Fill s with every default (one tensor named "grad" of 1024 elements, no tokens
 * allocated until needed). s owns nothing yet; gp_scenario_free is still safe. */
void gp_scenario_init(gp_scenario *s);

/* Free what s owns and leave it re-initialised. */
void gp_scenario_free(gp_scenario *s);

/* The files s reads when it runs (every replayed dump: each tensor's grad, weight, state
 * and twin `replay`; a new key that reads a file adds it here), so that an output never replaces
 * one: stores up to cap of them in paths (pointers into s) and returns how many there
 * are. */
size_t gp_scenario_inputs(const gp_scenario *s, const char **paths, size_t cap);

/* Load a scenario from YAML text. `origin` names the text in messages (a path, or
 * "preset:NAME"). On error returns -1, err->msg is "origin:line:column: what is
 * wrong", and *s is left initialised and owning nothing. Checks types, ranges,
 * unknown keys, sizes that cannot fit in memory, NaN/inf numbers, consistency
 * (tokens vs microbatches, explicit values vs size). Returns 0 on success. */
int gp_scenario_load_string(const char *text, size_t len, const char *origin, gp_scenario *s,
                            gp_error *err);

/* Read and load a file (as above; an unreadable file is an error naming the path). */
int gp_scenario_load_file(const char *path, gp_scenario *s, gp_error *err);

/* Load YAML text that may declare a sweep: `sweep: {KEY: [V1, V2, ...], ...}` where KEY
 * is a dotted path to any key of the scenario (`batch.accumulation_steps`, `reduction`,
 * `tensors[0].grad.scale`, `precision.accumulator`), created when the file does not
 * write it; or a list of keys swept together, `[K1, K2]: [[V1, W1], [V2, W2]]`. The
 * axes are crossed, the last one varying fastest; each point is the file
 * with those values put in place, loaded and checked as any scenario (errors point at
 * the sweep's value), named "NAME[KEY=V, KEY=V]" with the sweep fields set. Without a
 * sweep: one scenario, as gp_scenario_load_string. On success *out is a malloc'ed array
 * of *n scenarios (free each, then the array); on error returns -1, err as above, and
 * *out is NULL. gp_scenario_load_string refuses a sweep (it names this function). */
int gp_scenario_load_all_string(const char *text, size_t len, const char *origin, gp_scenario **out, size_t *n,
                                gp_error *err);

/* The same for a file (the default name is the file's basename, as gp_scenario_load_file). */
int gp_scenario_load_all_file(const char *path, gp_scenario **out, size_t *n, gp_error *err);

/* The names of s's gradient and accumulator formats as the YAML writes them: a plain
 * format's, or a scaled one's with every option (gp_scaled_name), into grad and acc (n
 * bytes each). */
void gp_scenario_precision_names(const gp_scenario *s, char *grad, char *acc, size_t n);

/* Write s as YAML that gp_scenario_load_string reads back to an equal scenario.
 * Returns a malloc'ed string (caller frees) or NULL when out of memory. */
char *gp_scenario_to_yaml(const gp_scenario *s);

#endif
