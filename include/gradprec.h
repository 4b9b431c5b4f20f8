/* gradprec.h — the public C API of libgradprec (docs/api.md): load scenarios (a file or
 * YAML text), run them on a backend (the built-in cpu/cuda, a plugin .so, or a gp_plugin
 * table the caller fills at run time), read verdicts and metrics, write the reports.
 * The `gradprec` command goes through these same calls. Plain C, no structs to lay out:
 * easy to bind from ctypes/cffi. Version GRADPREC_API_VERSION; link with -lgradprec. */
#ifndef GRADPREC_H
#define GRADPREC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised on any incompatible change of this header; additions keep it. */
#define GRADPREC_API_VERSION 1
/* Raised on each addition (reset when GRADPREC_API_VERSION is raised): 1 added the
 * streaming session (gradprec_stream_*). */
#define GRADPREC_API_MINOR 1

#if defined(__GNUC__)
#define GRADPREC_API __attribute__((visibility("default")))
#else
#define GRADPREC_API
#endif

/* Status codes; they equal the `gradprec` exit codes. */
enum {
    GRADPREC_OK = 0,
    GRADPREC_BAD_INPUT = 2, /* bad scenario, dump, backend spec, unsupported configuration */
    GRADPREC_INTERNAL = 3   /* a backend call failed, out of memory, a file not written */
};

/* The plugin ABI table (kernels/gp_plugin_abi.h: include it to fill one). */
struct gp_plugin;

typedef struct gradprec_set gradprec_set;       /* loaded scenarios (opaque) */
typedef struct gradprec_result gradprec_result; /* one run's results (opaque) */
typedef struct gradprec_stream gradprec_stream; /* a streaming session (opaque; minor 1) */

/* GRADPREC_API_VERSION of the library actually loaded (compare with the header's). */
GRADPREC_API int gradprec_api_version(void);

/* GRADPREC_API_MINOR of the library actually loaded: the calls of a minor are there when
 * it is at least that minor. */
GRADPREC_API int gradprec_api_minor(void);

/* The library's version, "MAJOR.MINOR.PATCH" (static string). */
GRADPREC_API const char *gradprec_version(void);

/* The names of a vocabulary, in the order of their values (the plugin ABI's values where
 * kernels/gp_plugin_abi.h has them): kind "format", "rounding" (a conversion's mode),
 * "acc_rounding" (an accumulator's policy), "adamw_variant", "adamw_evaluation" or
 * "state" (optimizer state storage, GP_PLUGIN_STATE_*: "plain", then the low-bit states),
 * "metric" (report.json's metric names, in report order) or "mechanism" (the loss
 * mechanisms, in the verdict's precedence order).
 * Returns the name of value i (a static string), NULL past the last value or for an
 * unknown kind. */
GRADPREC_API const char *gradprec_vocab_name(const char *kind, int i);

/* Storage bits of the format whose value is i (gradprec_vocab_name("format", i)), 0 past
 * the last. */
GRADPREC_API int gradprec_format_bits(int i);

/* ---- scenarios ---- */

/* Load the scenario file at path (a `sweep:` expands into one scenario per point;
 * relative replay paths resolve against the file's folder). Returns a new set, or NULL
 * with a one-line message "file:line:column: what" copied into err[0..errlen) (err may
 * be NULL). Never exits or prints. */
GRADPREC_API gradprec_set *gradprec_load_file(const char *path, char *err, size_t errlen);

/* The same from YAML text of len bytes; `origin` names it in messages and gives the
 * default scenario name ("scenario" when NULL). Relative replay paths resolve against
 * the current directory. */
GRADPREC_API gradprec_set *gradprec_load_yaml(const char *text, size_t len, const char *origin, char *err,
                                              size_t errlen);

/* Number of scenarios in s. */
GRADPREC_API size_t gradprec_set_count(const gradprec_set *s);

/* Name of scenario i (owned by s), NULL when i is out of range. */
GRADPREC_API const char *gradprec_set_name(const gradprec_set *s, size_t i);

/* Give every scenario of s this seed (as `gradprec run --seed`). */
GRADPREC_API void gradprec_set_seed(gradprec_set *s, uint64_t seed);

/* Free s. Results made from it stay valid (they hold their own reference). NULL is fine. */
GRADPREC_API void gradprec_set_free(gradprec_set *s);

/* ---- sampling ---- */

/* The elements a `sample: n` on tensor number `tensor` (0-based position in the
 * scenario's `tensors` list) of a scenario with seed `seed` replays, out of the tensor's
 * M elements: idx[0..n) (caller's array), distinct, increasing; the same choice the
 * runner makes (docs/replay.md, "Sampling"), so a capture can keep only these elements.
 * 1 <= n <= M < 2^63. Returns GRADPREC_OK, GRADPREC_BAD_INPUT for n or M out of range,
 * GRADPREC_INTERNAL when out of memory; err as for the other calls. */
GRADPREC_API int gradprec_sample_indices(uint64_t seed, size_t tensor, uint64_t M, uint64_t n, uint64_t *idx,
                                         char *err, size_t errlen);

/* ---- running ---- */

/* Run every scenario of s on one backend:
 *   table != NULL: the caller's table (abi_version 2 or 3, host memory or, with a CUDA
 *                  build, device memory), used in place: it must stay valid during the
 *                  call, and its functions may be called from `jobs` threads at once;
 *   else backend:  "cpu" (also when NULL), "cuda", "auto" or "plugin:PATH.so".
 * compare (NULL: none) names a second backend run on identical inputs and compared bit
 * for bit, as `gradprec run --compare`. jobs: threads (<= 0: 1), as `gradprec run -j`:
 * scenarios run in parallel, and each splits its windows over the threads left; results
 * do not depend on it. On GRADPREC_OK *out is a new result; otherwise *out is
 * NULL and err holds one line: GRADPREC_BAD_INPUT for a bad backend spec or table, a
 * configuration the backend does not support (its function returned 1), an unreadable or
 * malformed replay dump; GRADPREC_INTERNAL when a backend call failed or memory ran out. */
GRADPREC_API int gradprec_run(const gradprec_set *s, const char *backend, const struct gp_plugin *table,
                              const char *compare, int jobs, gradprec_result **out, char *err, size_t errlen);

/* ---- one optimizer step ---- */

/* One AdamW step of the built-in CPU backend on n elements, in place: what `--backend
 * cpu` does to one chunk of a tensor (one plugin `adamw` call: torch's tensor, for the
 * fused variant's remainder rule), to check a variant against another implementation
 * element by element. variant: "plain" (torch eager, single-tensor), "one_store" or
 * "torch_fused_cpu" (the scenario's `fused: torch_cpu`; state_format must equal
 * param_format); docs/model.md. Formats by name: param "fp32", "bf16" or "fp16"; state
 * the same three; grad any format name. Arrays hold n elements packed in their format
 * (2 bytes for bf16/fp16, native byte order), host memory; grad is only read. lr, betas,
 * eps, weight_decay as the Python floats of torch.optim.AdamW; step >= 1 is the step
 * count after its increment. RNE stores. Returns GRADPREC_OK, or GRADPREC_BAD_INPUT with
 * one line in err (unknown name, unsupported combination, step < 1, a NULL array). */
GRADPREC_API int gradprec_adamw_step(const char *variant, const char *param_format, const char *state_format,
                                     const char *grad_format, double lr, double beta1, double beta2, double eps,
                                     double weight_decay, int64_t step, uint64_t n, const void *grad, void *param,
                                     void *m, void *v, char *err, size_t errlen);

/* The fp32 sqrt of gradprec's AdamW operation order `evaluation` (optimizer.evaluation's
 * names: "torch_cpu_zen4" and "torch_cpu_intel_avx512" are torch's CPU sqrt as MKL
 * computes it on those CPUs, "torch_cpu_host" as it computes it on this host's CPU,
 * kernels/arith/gp_torch_sqrt.h; the others the IEEE sqrt) of
 * n floats x into y (may be x), to tell which order matches a host's torch. Returns
 * GRADPREC_OK, or GRADPREC_BAD_INPUT with one line in err (unknown name, a NULL array,
 * torch_cpu_host where gp_torch_sqrt.h does not model the host). */
GRADPREC_API int gradprec_torch_sqrtf(const char *evaluation, uint64_t n, const float *x, float *y, char *err,
                                      size_t errlen);

/* ---- scaled and block formats (docs/formats.md, "Scaled and block formats") ---- */

/* Quantize the rows x cols fp32 tensor x (row-major, host memory) to the scaled format
 * `format` ("fp8_e4m3:current", "fp8_e5m2:blockwise_1x128:pow2", "mxfp4:rceil",
 * "nvfp4:sr", ...: the names of docs/formats.md) and write what it dequantizes to into y
 * (may be x). codes (rows*cols bytes, may be NULL): each element's code (fp6/fp4 in the
 * low bits). scales (may be NULL): the blocks' scales as fp32 values, row-major over the
 * blocks, nscales of room (gradprec_format_info says how many): the multiplier s of
 * fp8 (x*s is cast), 2^(E8M0-127) or NaN of MX, the e4m3 block scale of NVFP4.
 * tensor_scale (may be NULL): NVFP4's fp32 tensor scale (1 for ":single"). scale_in:
 * the multiplier of "…:delayed" (gradprec_fp8_delayed_scale); ignored otherwise. seed:
 * the Philox seed of ":sr" (element i draws gp_rand_u32(seed, 0, i)). Returns
 * GRADPREC_OK, or GRADPREC_BAD_INPUT with one line in err (unknown name or option, a NULL
 * array, too few scales, rows*cols above 2^40). */
GRADPREC_API int gradprec_quantize(const char *format, uint64_t rows, uint64_t cols, const float *x, float *y,
                                   uint8_t *codes, float *scales, uint64_t nscales, float *tensor_scale,
                                   float scale_in, uint64_t seed, char *err, size_t errlen);

/* Transformer Engine's DelayedScaling scale from the amax its history chose (max or
 * most recent of the last L steps), margin and the previous scale: fp32(fp32(max/amax) /
 * 2^margin), `prev` when amax is 0 or not finite; pow2 rounds it down to a power of two.
 * format: "fp8_e4m3" or "fp8_e5m2" (options allowed). NaN for a bad format or |margin| >
 * 126. */
GRADPREC_API float gradprec_fp8_delayed_scale(const char *format, float amax, int margin, float prev, int pow2);

/* The canonical name of a scaled format (every non-default option spelled, e.g. "mxfp4"
 * -> "mxfp4:floor") into canonical[0..n) (may be NULL), and the number of scales of a
 * rows x cols tensor into *nscales (may be NULL). GRADPREC_OK or GRADPREC_BAD_INPUT. */
GRADPREC_API int gradprec_format_info(const char *format, char *canonical, size_t n, uint64_t rows, uint64_t cols,
                                      uint64_t *nscales, char *err, size_t errlen);
/* Low-bit optimizer state (optimizer.state: bnb8_blockwise, torchao_8bit, torchao_4bit,
 * torchao_fp8; kernels/cpu/gp_lowbit.h gives each rule and its source), to check
 * gradprec's models against the libraries they model. quantize: n finite floats x (n a
 * multiple of the state's block, 256 or 128) to n codes (one byte each, also for 4-bit
 * codes) and n / block fp32 scales, by the rule of m (is_signed 1) or v (0); dequantize:
 * the reverse, into x. adamw_step: one step of the library's AdamW over n elements, in
 * place: params (param_format fp32, bf16 or fp16, RNE), the quantized m and v; grad n
 * floats; evaluation names the fp32 sqrt the step takes where it takes torch's
 * ("torch_cpu": IEEE, "torch_cpu_host": this host's MKL, as gradprec_torch_sqrtf).
 * Return GRADPREC_OK, or GRADPREC_BAD_INPUT with one line in err (unknown name, n not
 * a multiple of the block, a NULL array, step < 1). */
GRADPREC_API int gradprec_lowbit_quantize(const char *state, int is_signed, uint64_t n, const float *x,
                                          uint8_t *codes, float *scales, char *err, size_t errlen);
GRADPREC_API int gradprec_lowbit_dequantize(const char *state, int is_signed, uint64_t n, const uint8_t *codes,
                                            const float *scales, float *x, char *err, size_t errlen);
GRADPREC_API int gradprec_lowbit_adamw_step(const char *state, const char *param_format, const char *evaluation,
                                            double lr, double beta1, double beta2, double eps, double weight_decay,
                                            int64_t step, uint64_t n, const float *grad, void *param,
                                            uint8_t *m_codes, float *m_scales, uint8_t *v_codes, float *v_scales,
                                            char *err, size_t errlen);

/* Serve `table` to a gradprec process over the connected socket fd: the worker side of
 * a `python:MODULE:NAME` backend (gradprec's run forks a worker that execs
 * `$GP_PYTHON -m gradprec._serve MODULE:NAME FD`, docs/python.md). The table is checked
 * as gradprec_run checks one; table NULL: the backend is refused and `refusal` (one
 * line) is what gradprec prints. fault: faultlen bytes (may be NULL) that the table's
 * functions may fill with one line before returning a failure (neither 0 nor 1):
 * gradprec then reports that line (exit 3) instead of the code; a line left there with
 * 1 (the configuration refused) is the refusal's reason, which gradprec prints with the
 * refused scenario. Serves calls one at a
 * time until gradprec closes the connection: returns GRADPREC_OK then, else
 * GRADPREC_BAD_INPUT (refused) or GRADPREC_INTERNAL (the connection broke). */
GRADPREC_API int gradprec_serve(int fd, const struct gp_plugin *table, const char *refusal, char *fault,
                                size_t faultlen);

/* Serve device-memory plugins (plugin:PATH with memory GP_PLUGIN_DEVICE) from a fresh
 * program: CUDA cannot be used in a child forked after its parent used CUDA (a host
 * whose framework, torch say, already initialised CUDA), so their worker, forked, execs
 * argv[0] (searched in PATH) with argv[1..] and then "plugin:PATH" and the number of
 * the connected socket; that program calls gradprec_serve_plugin. argv: NULL-terminated,
 * at most 8 strings, copied. The gradprec command registers itself, the Python package
 * `INTERPRETER -m gradprec._serve` when it loads the library. argv NULL or empty: none
 * (the default: the worker is only forked, and when CUDA cannot be initialised there
 * the plugin is refused with one line naming the cause). Host-memory plugins' workers
 * are only forked either way. Process-wide. Returns GRADPREC_OK, or GRADPREC_BAD_INPUT
 * (more than 8 strings) or GRADPREC_INTERNAL (out of memory), nothing changed then. */
GRADPREC_API int gradprec_set_worker_program(const char *const *argv);

/* The worker side of a program set by gradprec_set_worker_program: load the plugin at
 * path and serve it over the connected socket fd until gradprec closes the connection.
 * Returns GRADPREC_OK then, GRADPREC_BAD_INPUT when the plugin was refused (gradprec
 * prints why), GRADPREC_INTERNAL when the connection broke. */
GRADPREC_API int gradprec_serve_plugin(int fd, const char *path);

/* ---- streaming (API minor 1; docs/monitor.md, "The streaming C API") ----
 *
 * A session judges a training run step by step without a dump on disk: open it with a
 * scenario skeleton, then for each optimizer step feed each micro-batch's gradients
 * (gradprec_stream_grad per tensor, then gradprec_stream_tokens), optionally the
 * optimizer's inputs and outputs (gradprec_stream_optimizer), and close the step
 * (gradprec_stream_close): the step is run as the one-step scenario a replay of it would
 * be (its data in memory, registered under a name in place of a dump file), by
 * gradprec_load_yaml and gradprec_run, so its metrics, mechanisms and verdicts are
 * those `gradprec run` gives for the same data, bit for bit, read with the
 * gradprec_result_* calls. Memory: one step's fed data, freed when the step closes.
 * Every call returns GRADPREC_OK, or GRADPREC_BAD_INPUT with one line in err (starting
 * "stream: ") for a call out of order or an array of the wrong size or format; a call
 * that fails changes nothing (a failed close drops the step being fed). One session is
 * used by one thread at a time; sessions are independent. */

/* Open a session. yaml (len bytes): a scenario (docs/scenarios.md) whose tensors give
 * `name`, `size` (elements) and optionally `sample: n` (feed n elements: those
 * gradprec_stream_tensor_indices lists, gradprec_sample_indices of the scenario's seed and
 * the tensor's position, as gradprec.torch.capture(sample=) keeps) and `optimizer`; no
 * grad, weight, state, twin or population (the session writes them), and no `steps`,
 * `sample`, `sweep`, `batch.microbatches`, `batch.tokens` (ditto). The rest (precision,
 * reduction, optimizer, loss_scale, thresholds, batch.accumulation_steps...) is the
 * scenario's, checked by the loader now. backend (NULL: "cpu") and jobs as gradprec_run.
 * Returns the session, or NULL with err. */
GRADPREC_API gradprec_stream *gradprec_stream_open(const char *yaml, size_t len, const char *backend, int jobs,
                                                   char *err, size_t errlen);

/* Free a session (and the step being fed). NULL is fine. */
GRADPREC_API void gradprec_stream_free(gradprec_stream *st);

/* The skeleton's tensors: how many; tensor t's name (owned by st), elements M, elements
 * fed per array (its sample's n, or M), and its sampled elements (n increasing indices
 * into the flattened tensor, owned by st; NULL when whole). NULL / 0 out of range. */
GRADPREC_API size_t gradprec_stream_tensor_count(const gradprec_stream *st);
GRADPREC_API const char *gradprec_stream_tensor_name(const gradprec_stream *st, size_t t);
GRADPREC_API uint64_t gradprec_stream_tensor_size(const gradprec_stream *st, size_t t);
GRADPREC_API uint64_t gradprec_stream_tensor_fed(const gradprec_stream *st, size_t t);
GRADPREC_API const uint64_t *gradprec_stream_tensor_indices(const gradprec_stream *st, size_t t);

/* Tensor t's gradient of the open micro-batch (the backward's output, as the loss scale
 * left it): n elements in `format` (precision.grad's name), packed as
 * gradprec_adamw_step's arrays; n = the tensor's fed count (its sampled elements,
 * gathered) or its size M (the whole tensor: the session gathers the sample). Copied.
 * Each tensor at most once per micro-batch; a tensor not fed in a micro-batch got an
 * exact zero gradient. */
GRADPREC_API int gradprec_stream_grad(gradprec_stream *st, size_t t, const char *format, const void *data,
                                      uint64_t n, char *err, size_t errlen);

/* End the open micro-batch: its token count n_k (1 .. 2^31-1; what the loss divides by
 * under `mean`). Refused when no gradient was fed since the last one. */
GRADPREC_API int gradprec_stream_tokens(gradprec_stream *st, int64_t tokens, char *err, size_t errlen);

/* Tensor t's optimizer quantity `what` ("param", "exp_avg", "exp_avg_sq", "master")
 * before the step (after = 0) or after it (after = 1, torch's result: compared bit for bit
 * as a replay's twin, metric twin_mismatch_count). Before: "param" is the weights the
 * step starts from (fp32, bf16 or fp16), the state is the optimizer's at entry (the
 * skeleton's optimizer.state format; master fp32) and `step` torch's state['step'] then
 * (the same for each quantity of t; ignored otherwise). After: param in optimizer.param's
 * format. n and data as gradprec_stream_grad; each (t, what, after) once per step. A
 * tensor with no state fed starts from none (m = v = 0, step 0), as a replay does. */
GRADPREC_API int gradprec_stream_optimizer(gradprec_stream *st, size_t t, int after, const char *what,
                                           const char *format, const void *data, uint64_t n, int64_t step,
                                           char *err, size_t errlen);

/* Close the step and run it. overrides (len bytes, may be NULL): a YAML mapping of the
 * step's own settings merged over the skeleton (mappings merge key by key, other values
 * replace), e.g. `{optimizer: {lr: 3.0e-4, lr_steps: [3.0e-4]}, loss_scale: {init:
 * 1024, tracker: 5, replay_scales: [1024]}}`; its `tensors` maps a tensor's name to keys
 * merged into that tensor (`{w1: {optimizer: {lr: 1.0e-4, lr_steps: [1.0e-4]}}}`).
 * On GRADPREC_OK *out is the step's result (one scenario; gradprec_result_free it). When
 * scenario is not NULL, *scenario is the one-step scenario run (YAML text naming the
 * step's memory dump; gradprec_stream_text_free it), also on a failed run. Returns
 * GRADPREC_BAD_INPUT for a close out of order (a micro-batch with gradients but no
 * tokens, no micro-batch), bad overrides, or a step the loader or the run refuses (err
 * says where); GRADPREC_INTERNAL as gradprec_run. Either way the step's data is freed and
 * the next feed begins the next step. */
GRADPREC_API int gradprec_stream_close(gradprec_stream *st, const char *overrides, size_t len,
                                       gradprec_result **out, char **scenario, char *err, size_t errlen);

/* Drop the step being fed (its data freed; the next feed begins the step again), as a
 * training loop does when its step failed. Steps closed so far are kept. NULL is fine. */
GRADPREC_API void gradprec_stream_discard(gradprec_stream *st);

/* Free a text gradprec_stream_close returned. NULL is fine. */
GRADPREC_API void gradprec_stream_text_free(char *text);

/* ---- results ---- */

/* Number of scenarios, and how many failed their thresholds. */
GRADPREC_API size_t gradprec_result_count(const gradprec_result *r);
GRADPREC_API size_t gradprec_result_failed(const gradprec_result *r);

/* Scenario i's name, verdict ("pass", "warn", "fail") and dominant mechanism
 * ("absorption", "underflow", ..., "none"); static or owned by r; NULL out of range. */
GRADPREC_API const char *gradprec_result_name(const gradprec_result *r, size_t i);
GRADPREC_API const char *gradprec_result_verdict(const gradprec_result *r, size_t i);
GRADPREC_API const char *gradprec_result_dominant(const gradprec_result *r, size_t i);

/* Scenario i's metric by its report name ("grad_rel_err_fullbatch", "absorbed_frac",
 * ... docs/scenarios.md); NaN for an unknown name or index (a metric may also be NaN or
 * infinite by itself: report.json writes those as strings). */
GRADPREC_API double gradprec_result_metric(const gradprec_result *r, size_t i, const char *metric);

/* Scenario i's tensors: how many, each one's name, and its metrics (as above). */
GRADPREC_API size_t gradprec_result_tensor_count(const gradprec_result *r, size_t i);
GRADPREC_API const char *gradprec_result_tensor_name(const gradprec_result *r, size_t i, size_t t);
GRADPREC_API double gradprec_result_tensor_metric(const gradprec_result *r, size_t i, size_t t, const char *metric);

/* The whole report as report.json text (schema gradprec-report/1: every scenario's
 * configuration, verdict, metrics, per-tensor metrics, sampling estimates); owned by r.
 * The same bytes `gradprec run` writes for the same scenarios, seed and backend. */
GRADPREC_API const char *gradprec_result_json(const gradprec_result *r);

/* Write report.json, report.md, report.xml, report.html and timing.json into folder dir
 * (created with its parents), each file atomically, by the code `gradprec run` uses.
 * Returns GRADPREC_OK, or GRADPREC_INTERNAL with err set. */
GRADPREC_API int gradprec_result_write(const gradprec_result *r, const char *dir, char *err, size_t errlen);

/* Free r (and its reference to the set). NULL is fine. */
GRADPREC_API void gradprec_result_free(gradprec_result *r);

#ifdef __cplusplus
}
#endif

#endif
