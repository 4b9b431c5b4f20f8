/* gp_api.c — include/gradprec.h over the core: a set holds loaded scenarios, a result
 * holds one run's gp_results and its report.json. Running and writing go through
 * gp_run_all and gp_report_files, as `gradprec run` does. */
#include "../include/gradprec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../harness/sources/gp_backend.h"
#include "../harness/sources/gp_generate.h"
#include "../harness/sources/gp_plugin_worker.h"
#include "../harness/sources/gp_replay.h"
#include "../harness/run/gp_run_all.h"
#include "../harness/sources/gp_sample.h"
#include "../harness/scenario/gp_scenario.h"
#include "../kernels/arith/gp_adamw.h"
#include "../kernels/cpu/gp_cpu_backend.h"
#include "../kernels/cpu/gp_lowbit.h"
#include "../kernels/gp_names.h"
#include "../kernels/gp_vocab.h"
#include "../reports/gp_report_set.h"

struct gradprec_set {
    int refs;        /* the caller's handle plus one per result */
    gp_scenario *sc;
    size_t n;
};

struct gradprec_result {
    gradprec_set *set;
    gp_result *res;
    size_t n;
    char backend[300], compare[300]; /* labels; compare "" when none */
    int jobs;
    double seconds;
    char *json;
};

static void copy_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
}

int gradprec_api_version(void)
{
    return GRADPREC_API_VERSION;
}

int gradprec_api_minor(void)
{
    return GRADPREC_API_MINOR;
}

const char *gradprec_version(void)
{
    return GP_VERSION_STRING;
}

const char *gradprec_vocab_name(const char *kind, int i)
{
    for (int k = 0; kind && k < GP_VOCAB_NKINDS; k++)
        if (strcmp(kind, gp_vocab_kind_name((gp_vocab_kind)k)) == 0)
            return gp_vocab_name((gp_vocab_kind)k, i);
    if (kind && strcmp(kind, "metric") == 0) /* the harness's lists (gp_metrics.h) */
        return gp_metric_name((gp_metric)i);
    if (kind && strcmp(kind, "mechanism") == 0)
        return i >= 0 && i < GP_NMECH ? gp_mechanism_name((gp_mechanism)i) : NULL;
    return NULL;
}

int gradprec_format_bits(int i)
{
    return i >= 0 && i < GP_NFORMATS ? gp_fmt_get((gp_format)i).width : 0;
}

static gradprec_set *make_set(int rc, gp_scenario *sc, size_t n, const gp_error *e, char *err, size_t errlen)
{
    gradprec_set *s = rc == 0 ? malloc(sizeof *s) : NULL;
    if (!s) {
        copy_err(err, errlen, rc == 0 ? "out of memory" : e->msg);
        for (size_t i = 0; rc == 0 && i < n; i++)
            gp_scenario_free(&sc[i]);
        free(sc);
        return NULL;
    }
    s->refs = 1;
    s->sc = sc;
    s->n = n;
    return s;
}

gradprec_set *gradprec_load_file(const char *path, char *err, size_t errlen)
{
    gp_error e = {""};
    gp_scenario *sc = NULL;
    size_t n = 0;
    int rc = path ? gp_scenario_load_all_file(path, &sc, &n, &e) : gp_error_set(&e, "scenario path is NULL");
    return make_set(rc, sc, n, &e, err, errlen);
}

gradprec_set *gradprec_load_yaml(const char *text, size_t len, const char *origin, char *err, size_t errlen)
{
    gp_error e = {""};
    gp_scenario *sc = NULL;
    size_t n = 0;
    int rc = text ? gp_scenario_load_all_string(text, len, origin ? origin : "scenario", &sc, &n, &e)
                  : gp_error_set(&e, "scenario text is NULL");
    return make_set(rc, sc, n, &e, err, errlen);
}

size_t gradprec_set_count(const gradprec_set *s)
{
    return s ? s->n : 0;
}

const char *gradprec_set_name(const gradprec_set *s, size_t i)
{
    return s && i < s->n ? s->sc[i].name : NULL;
}

void gradprec_set_seed(gradprec_set *s, uint64_t seed)
{
    for (size_t i = 0; s && i < s->n; i++)
        s->sc[i].seed = seed;
}

int gradprec_sample_indices(uint64_t seed, size_t tensor, uint64_t M, uint64_t n, uint64_t *idx, char *err,
                            size_t errlen)
{
    gp_error e = {""};
    if (n < 1 || n > M || M >= ((uint64_t)1 << 63) || !idx) {
        snprintf(e.msg, sizeof e.msg, "sample of %llu from %llu elements (1 <= n <= M < 2^63)",
                 (unsigned long long)n, (unsigned long long)M);
        copy_err(err, errlen, e.msg);
        return GRADPREC_BAD_INPUT;
    }
    if (gp_sample_indices(seed, gp_stream_id(GP_STREAM_SAMPLE, tensor, 0, 0), M, n, idx, &e) != 0) {
        copy_err(err, errlen, e.msg);
        return GRADPREC_INTERNAL;
    }
    return GRADPREC_OK;
}

void gradprec_set_free(gradprec_set *s)
{
    if (!s || --s->refs > 0)
        return;
    for (size_t i = 0; i < s->n; i++)
        gp_scenario_free(&s->sc[i]);
    free(s->sc);
    free(s);
}

/* The run's report, as gp_run_report wants it; ptrs has r->n entries. */
static gp_run_report run_report(const gradprec_result *r, const gp_scenario **ptrs)
{
    for (size_t i = 0; i < r->n; i++)
        ptrs[i] = &r->set->sc[i];
    gp_run_report rep = {ptrs, r->res, r->n, r->backend, r->compare[0] ? r->compare : NULL, NULL};
    return rep;
}

int gradprec_serve(int fd, const struct gp_plugin *table, const char *refusal, char *fault, size_t faultlen)
{
    if (gp_worker_serve(fd, table, refusal, fault, faultlen) == 0)
        return GRADPREC_OK;
    return table ? GRADPREC_INTERNAL : GRADPREC_BAD_INPUT;
}

int gradprec_serve_plugin(int fd, const char *path)
{
    int st = path ? gp_worker_main(fd, path) : 2;
    return st == 0 ? GRADPREC_OK : st == 2 ? GRADPREC_BAD_INPUT : GRADPREC_INTERNAL;
}

int gradprec_set_worker_program(const char *const *argv)
{
    size_t n = 0;
    while (argv && argv[n] && n <= 8)
        n++;
    if (n > 8)
        return GRADPREC_BAD_INPUT;
    return gp_worker_set_program(argv) == 0 ? GRADPREC_OK : GRADPREC_INTERNAL;
}

int gradprec_run(const gradprec_set *s, const char *backend, const struct gp_plugin *table, const char *compare,
                 int jobs, gradprec_result **out, char *err, size_t errlen)
{
    gp_error e = {""};
    gp_backend b, cb;
    int have_cb = 0, rc = GRADPREC_BAD_INPUT;
    gradprec_result *r = NULL;
    const gp_scenario **ptrs = NULL;
    if (out)
        *out = NULL;
    if (!s || !out) {
        copy_err(err, errlen, "gradprec_run: the set or the result pointer is NULL");
        return GRADPREC_BAD_INPUT;
    }
    if ((table ? gp_backend_from_table(table, &b, &e) : gp_backend_open(backend ? backend : "cpu", &b, &e)) != 0) {
        copy_err(err, errlen, e.msg);
        return GRADPREC_BAD_INPUT;
    }
    if (compare) {
        gp_error ce = {""};
        if (gp_backend_open(compare, &cb, &ce) != 0) {
            gp_error_set(&e, "compare: %s", ce.msg);
            goto done;
        }
        have_cb = 1;
    }
    rc = GRADPREC_INTERNAL;
    r = calloc(1, sizeof *r);
    if (!r || !(r->res = calloc(s->n ? s->n : 1, sizeof *r->res)) || !(ptrs = malloc((s->n ? s->n : 1) * sizeof *ptrs))) {
        gp_error_set(&e, "out of memory");
        goto done;
    }
    r->set = (gradprec_set *)s;
    r->n = s->n;
    r->jobs = jobs < 1 ? 1 : jobs;
    snprintf(r->backend, sizeof r->backend, "%s", b.label);
    snprintf(r->compare, sizeof r->compare, "%s", have_cb ? cb.label : "");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    gp_run_opts ro = {r->jobs, 1, 0.0, NULL, 0.0};
    int frc = gp_run_all(s->sc, s->n, &b, have_cb ? &cb : NULL, &ro, r->res, &e);
    gp_replay_forget_idle(); /* a long-lived process keeps no dump open between runs */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (frc != 0) {
        rc = frc == -2 ? GRADPREC_BAD_INPUT : GRADPREC_INTERNAL; /* -3: a crashed plugin, a dump changed while read */
        goto done;
    }
    for (size_t i = 0; i < s->n; i++)
        if (r->res[i].refused) { /* gradprec_run's contract: a refused configuration is bad input */
            gp_error_set(&e, "scenario '%s': %s", s->sc[i].name, r->res[i].refusal);
            rc = GRADPREC_BAD_INPUT;
            goto done;
        }
    gp_run_report rep = run_report(r, ptrs);
    if (!(r->json = gp_report_json(&rep))) {
        gp_error_set(&e, "out of memory");
        goto done;
    }
    r->set->refs++;
    *out = r;
    r = NULL;
    rc = GRADPREC_OK;
done:
    if (rc != GRADPREC_OK)
        copy_err(err, errlen, e.msg);
    if (r) {
        for (size_t i = 0; r->res && i < r->n; i++)
            gp_result_free(&r->res[i]);
        free(r->res);
        free(r);
    }
    free(ptrs);
    gp_backend_close(&b);
    if (have_cb)
        gp_backend_close(&cb);
    return rc;
}

size_t gradprec_result_count(const gradprec_result *r)
{
    return r ? r->n : 0;
}

size_t gradprec_result_failed(const gradprec_result *r)
{
    size_t k = 0;
    for (size_t i = 0; r && i < r->n; i++)
        k += r->res[i].verdict == GP_FAIL;
    return k;
}

const char *gradprec_result_name(const gradprec_result *r, size_t i)
{
    return r && i < r->n ? r->set->sc[i].name : NULL;
}

const char *gradprec_result_verdict(const gradprec_result *r, size_t i)
{
    return r && i < r->n ? gp_verdict_name(r->res[i].verdict) : NULL;
}

const char *gradprec_result_dominant(const gradprec_result *r, size_t i)
{
    return r && i < r->n ? gp_mechanism_name(r->res[i].dominant) : NULL;
}

static double metric_of(const double *metric, const char *name)
{
    gp_metric m;
    return name && gp_metric_parse(name, &m) == 0 ? metric[m] : NAN;
}

double gradprec_result_metric(const gradprec_result *r, size_t i, const char *metric)
{
    return r && i < r->n ? metric_of(r->res[i].metric, metric) : NAN;
}

size_t gradprec_result_tensor_count(const gradprec_result *r, size_t i)
{
    return r && i < r->n ? r->res[i].ntensors : 0;
}

const char *gradprec_result_tensor_name(const gradprec_result *r, size_t i, size_t t)
{
    return r && i < r->n && t < r->res[i].ntensors ? r->res[i].tensors[t].name : NULL;
}

double gradprec_result_tensor_metric(const gradprec_result *r, size_t i, size_t t, const char *metric)
{
    return r && i < r->n && t < r->res[i].ntensors ? metric_of(r->res[i].tensors[t].metric, metric) : NAN;
}

const char *gradprec_result_json(const gradprec_result *r)
{
    return r ? r->json : NULL;
}

int gradprec_result_write(const gradprec_result *r, const char *dir, char *err, size_t errlen)
{
    gp_error e = {""};
    gp_report_files f;
    const gp_scenario **ptrs = r ? malloc((r->n ? r->n : 1) * sizeof *ptrs) : NULL;
    if (!ptrs) {
        copy_err(err, errlen, r ? "out of memory" : "gradprec_result_write: the result is NULL");
        return GRADPREC_INTERNAL;
    }
    gp_run_report rep = run_report(r, ptrs);
    int rc = gp_report_files_render(&rep, 0, 1, r->n, r->seconds, r->jobs, &f, &e) != 0 || gp_report_files_write(&f, dir, &e) != 0;
    gp_report_files_free(&f);
    free(ptrs);
    if (rc) {
        copy_err(err, errlen, e.msg);
        return GRADPREC_INTERNAL;
    }
    return GRADPREC_OK;
}

void gradprec_result_free(gradprec_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        gp_result_free(&r->res[i]);
    free(r->res);
    free(r->json);
    gradprec_set_free(r->set);
    free(r);
}

int gradprec_adamw_step(const char *variant, const char *param_format, const char *state_format,
                        const char *grad_format, double lr, double beta1, double beta2, double eps,
                        double weight_decay, int64_t step, uint64_t n, const void *grad, void *param, void *m,
                        void *v, char *err, size_t errlen)
{
    char msg[256];
    int32_t id = gp_vocab_parse(GP_VOCAB_ADAMW_VARIANT, variant); /* = GP_PLUGIN_ADAMW_* */
    if (id != GP_PLUGIN_ADAMW_PLAIN && id != GP_PLUGIN_ADAMW_ONE_STORE && id != GP_PLUGIN_ADAMW_TORCH_FUSED_CPU)
        id = -1; /* master and kahan need arrays this call does not take */
    gp_format pf, sf, gf;
    if (id < 0) {
        snprintf(msg, sizeof msg, "adamw_step: variant '%s': expected plain, one_store or torch_fused_cpu",
                 variant ? variant : "(null)");
    } else if (!param_format || gp_format_parse(param_format, &pf) != 0 || !state_format ||
               gp_format_parse(state_format, &sf) != 0 || !grad_format || gp_format_parse(grad_format, &gf) != 0) {
        snprintf(msg, sizeof msg, "adamw_step: a format name is unknown (param '%s', state '%s', grad '%s')",
                 param_format ? param_format : "(null)", state_format ? state_format : "(null)",
                 grad_format ? grad_format : "(null)");
    } else if ((pf != GP_FP32 && pf != GP_BF16 && pf != GP_FP16) || (sf != GP_FP32 && sf != GP_BF16 && sf != GP_FP16)) {
        snprintf(msg, sizeof msg, "adamw_step: param and state formats must be fp32, bf16 or fp16 (got %s, %s)",
                 param_format, state_format);
    } else if (step < 1 || (n && (!grad || !param || !m || !v))) {
        snprintf(msg, sizeof msg, "adamw_step: step must be >= 1 and the four arrays non-NULL");
    } else {
        int32_t found_inf = 0;
        gp_plugin_adamw_args a;
        memset(&a, 0, sizeof a);
        a.struct_size = sizeof a;
        a.param_format = (int32_t)pf;
        a.state_format = (int32_t)sf;
        a.grad_format = (int32_t)gf;
        a.variant = id;
        a.rounding = GP_PLUGIN_RNE;
        a.lr = lr;
        a.beta1 = beta1;
        a.beta2 = beta2;
        a.eps = eps;
        a.weight_decay = weight_decay;
        a.step = step;
        a.inv_scale = 1.0f;
        a.found_inf = &found_inf;
        a.n = n;
        a.grad = grad;
        a.param = param;
        a.m = m;
        a.v = v;
        int rc = gp_cpu_backend()->adamw(&a);
        if (rc == 0)
            return GRADPREC_OK;
        snprintf(msg, sizeof msg, "adamw_step: %s params with %s state: not supported by variant %s",
                 param_format, state_format, variant);
    }
    copy_err(err, errlen, msg);
    return GRADPREC_BAD_INPUT;
}

int gradprec_torch_sqrtf(const char *evaluation, uint64_t n, const float *x, float *y, char *err, size_t errlen)
{
    char msg[256];
    int ev = -1;
    for (int i = 0; evaluation && strcmp(gp_adamw_eval_name(i), "?") != 0; i++)
        if (strcmp(evaluation, gp_adamw_eval_name(i)) == 0)
            ev = i;
    if (ev < 0) {
        snprintf(msg, sizeof msg, "torch_sqrtf: unknown evaluation '%s'", evaluation ? evaluation : "(null)");
    } else if (ev == GP_ADAMW_TORCH_CPU_HOST && gp_torch_sqrt_host_kernel() == GP_MKL_SQRT_NONE) {
        snprintf(msg, sizeof msg, "torch_sqrtf: torch_cpu_host is not modelled on this host (%s)",
                 GP_TORCH_SQRT_HOST ? "an Intel CPU without AVX2 and FMA" : "not an x86-64 build");
    } else if (n && (!x || !y)) {
        snprintf(msg, sizeof msg, "torch_sqrtf: x and y must be non-NULL");
    } else {
        for (uint64_t i = 0; i < n; i++)
            y[i] = gp_adamw_sqrtf_fp32((gp_adamw_eval)ev, x[i]);
        return GRADPREC_OK;
    }
    copy_err(err, errlen, msg);
    return GRADPREC_BAD_INPUT;
}

/* The low-bit state named `state` and n a whole number of its blocks, else a message in
 * msg and GP_LOWBIT_NONE. */
static gp_lowbit lowbit_of(const char *what, const char *state, uint64_t n, char *msg, size_t len)
{
    gp_lowbit f = gp_lowbit_parse(state);
    if (f == GP_LOWBIT_NONE)
        snprintf(msg, len, "%s: unknown state '%s' (bnb8_blockwise, torchao_8bit, torchao_4bit, torchao_fp8)", what,
                 state ? state : "(null)");
    else if (n % gp_lowbit_block(f) != 0)
        snprintf(msg, len, "%s: n = %llu is not a multiple of %s's block (%zu)", what, (unsigned long long)n, state,
                 gp_lowbit_block(f));
    else
        return f;
    return GP_LOWBIT_NONE;
}

/* gradprec_lowbit_quantize (quantize != 0) or _dequantize: the state checked, the arrays
 * non-NULL, then the conversion between x and (codes, scales). */
static int lowbit_convert(const char *what, int quantize, const char *state, int is_signed, uint64_t n, float *x,
                          uint8_t *codes, float *scales, char *err, size_t errlen)
{
    char msg[256];
    gp_lowbit f = lowbit_of(what, state, n, msg, sizeof msg);
    if (f != GP_LOWBIT_NONE && n && (!x || !codes || !scales)) {
        snprintf(msg, sizeof msg, "%s: x, codes and scales must be non-NULL", what);
        f = GP_LOWBIT_NONE;
    }
    if (f == GP_LOWBIT_NONE) {
        copy_err(err, errlen, msg);
        return GRADPREC_BAD_INPUT;
    }
    if (quantize)
        gp_lowbit_quantize(f, is_signed != 0, x, (size_t)n, codes, scales);
    else
        gp_lowbit_dequantize(f, is_signed != 0, codes, scales, (size_t)n, x);
    return GRADPREC_OK;
}

int gradprec_lowbit_quantize(const char *state, int is_signed, uint64_t n, const float *x, uint8_t *codes,
                             float *scales, char *err, size_t errlen)
{
    return lowbit_convert("lowbit_quantize", 1, state, is_signed, n, (float *)(uintptr_t)x, codes, scales, err,
                          errlen);
}

int gradprec_lowbit_dequantize(const char *state, int is_signed, uint64_t n, const uint8_t *codes,
                               const float *scales, float *x, char *err, size_t errlen)
{
    return lowbit_convert("lowbit_dequantize", 0, state, is_signed, n, x, (uint8_t *)(uintptr_t)codes,
                          (float *)(uintptr_t)scales, err, errlen);
}

int gradprec_lowbit_adamw_step(const char *state, const char *param_format, const char *evaluation, double lr,
                               double beta1, double beta2, double eps, double weight_decay, int64_t step, uint64_t n,
                               const float *grad, void *param, uint8_t *m_codes, float *m_scales, uint8_t *v_codes,
                               float *v_scales, char *err, size_t errlen)
{
    char msg[256];
    gp_format pf;
    int ev = -1;
    for (int i = 0; evaluation && strcmp(gp_adamw_eval_name(i), "?") != 0; i++)
        if (strcmp(evaluation, gp_adamw_eval_name(i)) == 0)
            ev = i;
    gp_lowbit f = lowbit_of("lowbit_adamw_step", state, n, msg, sizeof msg);
    if (f == GP_LOWBIT_NONE) {
    } else if (!param_format || gp_format_parse(param_format, &pf) != 0 ||
               (pf != GP_FP32 && pf != GP_BF16 && pf != GP_FP16)) {
        snprintf(msg, sizeof msg, "lowbit_adamw_step: param format '%s': expected fp32, bf16 or fp16",
                 param_format ? param_format : "(null)");
    } else if (ev < 0 || (ev == GP_ADAMW_TORCH_CPU_HOST && gp_torch_sqrt_host_kernel() == GP_MKL_SQRT_NONE)) {
        snprintf(msg, sizeof msg, "lowbit_adamw_step: evaluation '%s' unknown or not modelled on this host",
                 evaluation ? evaluation : "(null)");
    } else if (step < 1 || (n && (!grad || !param || !m_codes || !m_scales || !v_codes || !v_scales))) {
        snprintf(msg, sizeof msg, "lowbit_adamw_step: step must be >= 1 and the seven arrays non-NULL");
    } else {
        gp_lowbit_adamw_args a = {f, pf, lr, beta1, beta2, eps, weight_decay, step, (gp_adamw_eval)ev, (size_t)n,
                                  grad, param, m_codes, v_codes, m_scales, v_scales, NULL, NULL};
        if (gp_lowbit_adamw(&a) == 0)
            return GRADPREC_OK;
        snprintf(msg, sizeof msg, "lowbit_adamw_step: not supported");
    }
    copy_err(err, errlen, msg);
    return GRADPREC_BAD_INPUT;
}
