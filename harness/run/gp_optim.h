/* gp_optim.h — the optimizer phase of the multi-step simulation (DESIGN.md §1 stale
 * update and state precision, §3 AdamW): for one chunk of one tensor, run the backend's
 * AdamW step on the gradient the runner accumulated (unscaled and clipped), replay what
 * it did to attribute losses, and advance the exact reference trajectory.
 *
 * State. Per element: the param (param format), the fp32 master (master variant), the
 * Kahan compensation (param format), m and v (state format), the reference trajectory
 * (reference/gp_adamw_dd.h: weight, m, v in double-double), and two attribution sums
 * over steps. Arrays hold `cap` elements: the whole tensor when the scenario runs more
 * than one step, else one chunk (the state of a one-step run is its initial state, made
 * again for each chunk), so memory is per-parameter state only.
 *
 * Initial state. w0 = the weight distribution's value (fp32) of the element; param =
 * RNE(w0) in the param format; master = w0 (master variant); comp = m = v = 0. The
 * reference starts from the weight the training starts from: w0 with a master, else
 * the stored param. A state carried in (tensors[i].state: a capture's m, v, master at
 * step count T0) replaces m, v and master with the stored values, and the reference
 * starts from their exact values (m, v, and the master, else the param).
 *
 * Step counts. gp_optim_step.iter counts the run's iterations from 1: the LR schedule's
 * argument (a schedule starts at the run's first step, whatever T0) and the stochastic
 * rounding stream. The backend's AdamW step count t is T0 + the steps taken (a skipped
 * step does not count, as torch's state['step']); the reference takes every iteration
 * as a step: its bias corrections are those of step T0 + iter.
 *
 * Attribution, from the values the backend actually wrote (a plugin is judged on what
 * it did). With g the gradient it was given, w the weight before the step (the master,
 * else the param; Kahan: param - comp), and binary64 replays of torch's formulas:
 *  - the exact update is non-zero when m_x = beta1*m + (1-beta1)*g != 0 (from the old
 *    stored m) or weight decay moves a non-zero w;
 *  - stale: the exact update is non-zero but the stored weight state (param, master,
 *    comp) is unchanged; the update lost, (w(1 - lr*wd) + u_s) - w with u_s the update
 *    the stored m', v' give, is added to the element's lost sum;
 *  - state precision: u_s - u_x, where u_x is the update of the binary64 m_x, v_x (the
 *    same formula before m and v were stored), is added to the element's state sum;
 *    m or v stored as 0 from a non-zero m_x / v_x counts as a state underflow;
 *  - update formula: a step that no rounding of any AdamW gradprec models explains
 *    (every variant, operation order and state format: docs/model.md, "Update formula",
 *    derives the bounds). Its m' or v' lies beyond one rounding to the narrowest state
 *    format from m_x, v_x (2^-6 |m_x| + 2^-6 (1-beta1)|g| + 2^-20 (|m|+|g|) + 2^-23;
 *    2^-5 v_x + 2^-23); or the weight was written and its change w' - w(1 - lr*wd) lies
 *    farther than r_c + 2 ulp(max(|w|,|w'|)) (the weight's format) from both updates
 *    u_c = -step_size*m_c/D_c, D_c = sqrt(v_c)/sqrt(bc2) + eps, of the stored state
 *    (c = s: m', v', the denominator rounded in the state format: relative 4 u_state,
 *    absolute 4 sigma_state/sqrt(bc2), sigma = half the smallest subnormal) and of the
 *    exact one (c = x: m_x +- 2^-21(|m|+|g|) + (1-beta1) u_param |g|, v_x, relative
 *    2^-20 + u_param), r_c = step_size*(|m_c| (1/D_lo - 1/D_c) + (eps_m + rho(|m_c| +
 *    eps_m))/D_lo), rho = 2^-20 + (t+2) 2^-24 (beta1^t/bc1 + beta2^t/(2 bc2)) (bias
 *    corrections computed in fp32). The distance beyond the nearer bound, signed, is added to the
 *    element's formula sum; each such element step is counted. A stale weight is not
 *    judged here (the stale update above). Subjects only (GP_OPTIM_WITH_MODELS):
 *    gradprec's own backends are AdamW (test_verdicts checks they stay within).
 * On a skipped step (found_inf) the backend is still called and must write nothing. */
#ifndef GP_OPTIM_H
#define GP_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "../../kernels/arith/gp_adamw.h"
#include "../../reference/gp_adamw_dd.h"
#include "../sources/gp_backend.h"
#include "../../base/gp_error.h"
#include "gp_optim_lowbit.h"
#include "../sources/gp_sample.h"
#include "../scenario/gp_budget.h"
#include "../scenario/gp_scenario.h"

/* Elements the runner processes together (gp_optim_chunk's n never exceeds it); results
 * do not depend on it. */
#define GP_OPTIM_CHUNK 16384

/* The first output on which two compared backends disagreed (--compare): which entry
 * point and output, when, where, and both values as bit patterns of `bits` width. */
typedef struct {
    int set;              /* 0 until the first disagreement */
    const char *entry;    /* "accumulate", "unscale", "grad_sumsq", "grad_scale", "scaler_update", "adamw" */
    const char *output;   /* "acc", "comp", "found_inf", "sumsq", "grad", "scale", "tracker", "param",
                             "master", "m", "v" */
    long step;            /* 1-based optimizer iteration */
    int microbatch;       /* accumulate: 0-based micro-batch; else -1 */
    size_t tensor;        /* tensor index (0 for the scaler, which has no tensor) */
    int64_t element;      /* element within the tensor; -1 for a scalar output */
    int bits;             /* width of the values: 32, 16 or 8 */
    uint32_t value, compared; /* the backend's and the compared backend's bits */
} gp_mismatch;

/* Record a disagreement in *first unless one is recorded already. */
void gp_mismatch_note(gp_mismatch *first, const char *entry, const char *output, long step, int microbatch,
                      size_t tensor, int64_t element, int bits, uint32_t value, uint32_t compared);

/* One step's inputs, the same for every chunk. */
typedef struct {
    long iter;           /* 1-based iteration: the LR schedule's argument (see "Step counts") */
    long t;              /* the backend's AdamW step count: T0 + steps taken (skipped ones do not count) */
    double lr;           /* the tensor's lr of this iteration (lr_steps, else lr x the schedule) */
    double weight_decay; /* the tensor's weight decay (optimizer.weight_decay or its override) */
    int32_t found_inf;   /* the loss scaler found a non-finite gradient: skip */
    gp_adamw_dd_scalars ref; /* the reference's scalars of step T0 + iter */
    gp_dd ref_coef;      /* the reference's exact clip coefficient (1 without clipping) */
    gp_mismatch *first;  /* where the first disagreement of a compared backend is recorded */
} gp_optim_step;

/* The first element step no rounding of AdamW explains (the update formula): which
 * output departs first from AdamW's (torch's convention) — "m" when the stored m' is no
 * rounding of b1 m + (1 - b1) g, else "v" (b2 v + (1 - b2) g^2), else "param" (the weight
 * beyond its bounds around w (1 - lr wd) - lr/bc1 m_x / (sqrt(v_x)/sqrt(bc2) + eps)) —
 * with the subject's stored value and AdamW's in binary64 from the same old state and
 * gradient. "First": the earliest step, then tensor, then element (any -j). */
typedef struct {
    int set;
    const char *output;  /* "m", "v", "param" */
    long step;           /* 1-based optimizer iteration */
    size_t tensor;
    uint64_t element;    /* among the tensor's simulated elements (a sample's position) */
    double value, adamw; /* the subject's stored value, AdamW's */
} gp_formula_first;

/* Keep the earlier of *a and *b (step, tensor, element) in *a. */
void gp_formula_first_merge(gp_formula_first *a, const gp_formula_first *b);

/* Event counts of the optimizer phase. */
typedef struct {
    uint64_t nonzero;        /* element steps whose exact update was non-zero */
    uint64_t stale;          /* ... whose stored weight did not change */
    uint64_t state_nonzero;  /* non-zero m_x and v_x values stored */
    uint64_t state_underflow;/* ... stored as 0 */
    uint64_t skip_writes;    /* elements written during a skipped step (a backend bug) */
    uint64_t mismatches;     /* elements where the compared backend differed */
    uint64_t formula;        /* element steps no rounding of AdamW explains (see above) */
    uint64_t twin_checked;   /* element-outputs compared with torch's after the step (twin) */
    uint64_t twin_mismatch;  /* ... that differ in some bit (NaN-ness for NaNs) */
    gp_formula_first first_formula; /* the first of them */
    /* Which of gradprec's AdamW models (gp_optim_model_name) a subject that is not
     * gradprec's own backend was checked against, and which it differed from in some
     * output bit; combined over chunks with |, never weighted. */
    uint32_t models_checked, models_differ;
} gp_optim_counts;

/* The optimizer metrics that are ratios of sums over elements, in the order of
 * gp_optim_sums.est (docs/scenarios.md, "Estimates at scale"): weight_rel_err^2,
 * m_rel_err^2, v_rel_err^2 (an element's final squared error over its final squared
 * reference), stale_update_frac (the element's stale steps over its steps with a non-zero
 * exact update), state_underflow_frac (its m, v stored as 0 over its non-zero m_x, v_x). */
enum { GP_OPTIM_EST_WEIGHT, GP_OPTIM_EST_M, GP_OPTIM_EST_V, GP_OPTIM_EST_STALE, GP_OPTIM_EST_STATE_UNDERFLOW,
       GP_OPTIM_NEST };

/* Sums of squares at the end of the run (add them over chunks and tensors). */
typedef struct {
    double w_err, w_ref;     /* ||w_T - w_ref||^2, ||w_ref||^2 */
    double m_err, m_ref, v_err, v_ref;
    double lost, state;      /* ||lost updates||^2, ||state errors||^2 */
    double formula;          /* ||unexplained parts of the steps||^2 */
    /* runs with sampling (GP_OPTIM_PER_ELEMENT): one unit per element, its totals over
     * all steps, for the ratio estimates above; else untouched */
    gp_ratio_sums est[GP_OPTIM_NEST];
} gp_optim_sums;

typedef struct {
    size_t cap;
    gp_adamw_config cfg;
    void *param, *comp, *m, *v;
    uint32_t *master;
    gp_adamw_dd_state ref;
    double *lost, *state_err, *formula_err;
    /* scratch for one chunk: old values, the compared backend's copies */
    void *old_param, *old_comp, *old_m, *old_v, *param2, *comp2, *m2, *v2;
    uint32_t *old_master, *master2;
    void *param3, *comp3, *m3, *v3; /* a model's step (GP_OPTIM_WITH_MODELS) */
    uint32_t *master3;
    uint8_t *written, *mv_written; /* per element of the chunk: weight state / m, v changed */
    gp_optim_lowbit *lb; /* a low-bit state (cfg.lowbit; gp_optim_lowbit.h): m, v above are its
                            dequantized values; NULL: m, v are the state. Points at lbx (a
                            view's own lbx: gp_optim_scratch_borrow) */
    gp_optim_lowbit lbx;
    /* GP_OPTIM_PER_ELEMENT: per element, its counts over the steps so far (steps with a
     * non-zero exact update, stale ones, non-zero m_x and v_x, those stored as 0); else NULL */
    uint32_t *el_cnt[4];
} gp_optim_state;

enum { GP_OPTIM_EL_NONZERO, GP_OPTIM_EL_STALE, GP_OPTIM_EL_STATE_NONZERO, GP_OPTIM_EL_STATE_UNDERFLOW };

/* *view = o with the one-chunk scratch arrays (old values, compared copies, written
 * flags) of `scratch` instead of o's own: threads that step disjoint chunks of one
 * whole-tensor state each borrow their own scratch (same configuration and with_cmp).
 * view shares o's arrays: never free it, and use it only while it lives (a low-bit
 * state's view points into the view itself). */
void gp_optim_scratch_borrow(gp_optim_state *view, const gp_optim_state *o, const gp_optim_state *scratch);

/* gp_optim_state_alloc's scratch flags. */
enum { GP_OPTIM_WITH_CMP = 1,    /* a compared backend (--compare) */
       GP_OPTIM_WITH_MODELS = 2, /* the backend is a subject, not gradprec's own (cpu,
                                    * cuda): each step is also run through every AdamW
                                    * model of gp_optim_model_name and compared bit for bit */
       GP_OPTIM_PER_ELEMENT = 4 }; /* runs with sampling: per-element counts (el_cnt) and
                                    * gp_optim_final's per-element units (gp_optim_sums.est) */

/* Allocate state for cap elements (scratch as `with` says: GP_OPTIM_WITH_*). Returns 0,
 * or -1 with err set (out of memory); free with gp_optim_state_free either way. */
int gp_optim_state_alloc(gp_optim_state *o, const gp_scenario *sc, size_t cap, int with, gp_error *err);

/* The AdamW models a subject's steps are compared with, by bit index k <
 * gp_optim_model_count: gradprec's CPU emulation of the scenario's variant in operation
 * order torch_cuda, torch_cpu, unfused (k = 0..2; not for a fused scenario), the one-store
 * variant in each (3..5; plain bf16/fp16 params only), torch's fused CPU kernel (6; plain
 * or fused, state in the param's dtype, RNE), the scenario's variant in order
 * torch_cpu_zen4 (7; fp32 state, not fused), in order torch_cuda_foreach (8; not fused),
 * in order torch_cpu_intel_avx512 (9; fp32 state, not fused) and in order torch_cpu_host
 * (10; fp32 state, not fused; where gp_torch_sqrt_host_kernel models the host). gp_optim_model_name
 * gives the name ("torch_cpu", "one_store/torch_cuda", "torch_fused_cpu", ...; static),
 * NULL for a k out of range or a model that does not apply to cfg. */
int gp_optim_model_count(const gp_adamw_config *cfg);
const char *gp_optim_model_name(const gp_adamw_config *cfg, int k);

void gp_optim_state_free(gp_optim_state *o);

/* n values of each output of the optimizer state as fp32 (exact widenings of stored
 * values), element j of the chunk at [j]; NULL where not given. */
typedef struct {
    const float *param, *m, *v, *master;
} gp_optim_values;

/* Set the initial state of elements i0 .. i0+n-1 of tensor t, stored at off: weights
 * init->param[0..n) (replayed) or, when NULL (or init is NULL), the tensor's weight
 * distribution; m, v (each representable in the state format) and master from init when
 * given (a carried state), else 0 and the weight. */
void gp_optim_init(gp_optim_state *o, const gp_scenario *sc, size_t t, uint64_t i0, size_t n, size_t off,
                   const gp_optim_values *init);

/* The twin check of elements [off, off + n) after a step: each output (m, v, master when
 * the variant has one, param) of element j against torch's torch->X[j] (each representable
 * in the output's format), bit for bit (NaN-ness for NaNs). Adds the element-outputs compared
 * and those that differ to cnt->twin_checked, twin_mismatch; the first that differs, in
 * element order and per element in the order m, v, master, param (a wrong m also moves
 * the param), goes to *first (entry "twin", output "m", "v", "master" or "param", element
 * elem[j] when elem is given, else i0 + j; value: the backend's bits, compared: torch's). */
void gp_optim_twin(const gp_optim_state *o, size_t off, size_t n, const gp_optim_values *torch, long step, size_t t,
                   uint64_t i0, const uint64_t *elem, gp_optim_counts *cnt, gp_mismatch *first);

/* One step on elements i0 .. i0+n-1 of tensor t (state at off): grad[] (n values of format
 * gf) is what the backend's optimizer gets; gfull[] (n binary64) the exact full-batch
 * gradient, which the reference takes times ref_coef. Runs b (and cmp on copies, counting
 * differences), attributes, advances the reference. Returns 0; -2 with err set when a
 * backend does not support the configuration; -1 on another backend failure. */
int gp_optim_chunk(const gp_scenario *sc, const gp_optim_step *s, const gp_backend *b, const gp_backend *cmp,
                   gp_optim_state *o, size_t t, uint64_t i0, size_t n, size_t off, gp_format gf,
                   const void *grad, const double *gfull, gp_optim_counts *cnt, gp_error *err);

/* Add the final sums of elements [off, off+n) to *sums. */
void gp_optim_final(const gp_optim_state *o, size_t off, size_t n, gp_optim_sums *sums);

#endif
