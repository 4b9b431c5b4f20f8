/* gp_session.h — a streaming session (include/gradprec.h, gradprec_stream_*; docs/monitor.md,
 * "The streaming C API"): a scenario skeleton, then per optimizer step the caller feeds
 * each tensor's micro-batch gradients, the tokens and the optimizer's state before and
 * after the step into a memory dump (harness/sources/gp_replay.h, gp_replay_mem_*); closing the
 * step yields the one-step scenario that replays it, as YAML text that names the memory
 * dump, for the loader and runner `gradprec run` uses (no second implementation here).
 *
 * The skeleton is a scenario whose tensors give `name`, `size` (elements) and optionally
 * `sample: n` (per tensor; the elements gp_sample_indices picks for tensor t under the
 * scenario's seed, as gradprec.torch.capture(sample=) keeps) and `optimizer`, and no
 * grad/weight/state/twin/population (the session writes them); the scenario gives no
 * `steps`, `sample`, `batch.microbatches` or `batch.tokens` (the session writes them).
 * One session is used by one thread at a time. */
#ifndef GP_SESSION_H
#define GP_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "../../base/gp_error.h"
#include "../../kernels/arith/gp_format.h"

typedef struct gp_session gp_session;

/* What an optimizer feed is: the parameter, AdamW's m and v, the fp32 master copy. */
enum { GP_FEED_PARAM, GP_FEED_EXP_AVG, GP_FEED_EXP_AVG_SQ, GP_FEED_MASTER, GP_FEED_NQ };

/* Open a session for the skeleton (YAML text of len bytes). 0 with *out, or -1 with err
 * (the loader's "origin:line:column: what", or what the skeleton may not hold). */
int gp_session_open(const char *text, size_t len, gp_session **out, gp_error *err);

/* Free s (and a step being fed). NULL is fine. */
void gp_session_free(gp_session *s);

/* The skeleton's tensors: how many; tensor t's name, elements M, elements fed per array
 * (its sample's n, or M), and the sampled elements (n increasing indices, NULL when
 * whole). t out of range: NULL / 0. */
size_t gp_session_ntensors(const gp_session *s);
const char *gp_session_tensor_name(const gp_session *s, size_t t);
uint64_t gp_session_tensor_size(const gp_session *s, size_t t);
uint64_t gp_session_tensor_count(const gp_session *s, size_t t);
const uint64_t *gp_session_tensor_indices(const gp_session *s, size_t t);

/* Tensor t's gradient of the open micro-batch: n elements of fmt (precision.grad) at
 * data, n the tensor's count (already gathered) or M (whole: the session gathers its
 * sample). Each tensor once per micro-batch. 0, or -1 with err. */
int gp_session_grad(gp_session *s, size_t t, gp_format fmt, const void *data, uint64_t n, gp_error *err);

/* End the open micro-batch: its token count (1 .. 2^31-1). A tensor not fed in it got an
 * exact zero gradient. -1 with err when no tensor was fed. */
int gp_session_tokens(gp_session *s, int64_t tokens, gp_error *err);

/* Tensor t's optimizer quantity q (GP_FEED_*) before the step (after = 0: PARAM is the
 * weights the step starts from; the state's step count `step` = torch's state['step']
 * at entry, the same for every q of t) or after it (after = 1: torch's result, the twin).
 * n and data as gp_session_grad; each (t, q, after) once per step. 0, or -1 with err. */
int gp_session_optim(gp_session *s, size_t t, int q, int after, gp_format fmt, const void *data, uint64_t n,
                    int64_t step, gp_error *err);

/* Close the step: the one-step scenario (NUL-terminated YAML, malloc'ed into *text)
 * that replays what was fed, with the YAML mapping `overrides` (len bytes, may be NULL:
 * the step's own settings, e.g. optimizer.lr, loss_scale.init; its `tensors` is a
 * mapping from a tensor's name to keys merged into that tensor) merged over it. The
 * memory dump stays registered until gp_session_step_end. -1 with err (a micro-batch with
 * gradients but no tokens, no micro-batch, malformed overrides): the step is dropped. */
int gp_session_step_text(gp_session *s, const char *overrides, size_t len, char **text, gp_error *err);

/* Drop the step being fed (its memory dump released). */
void gp_session_discard(gp_session *s);

/* Steps closed so far (gp_session_step_end). */
uint64_t gp_session_steps(const gp_session *s);

/* After the step's run: release its memory dump; the next feed begins the next step.
 * Returns the number of steps closed so far. */
uint64_t gp_session_step_end(gp_session *s);

#endif
