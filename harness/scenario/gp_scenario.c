/* gp_scenario.c — see gp_scenario.h. The YAML is read with libyaml's document API, so
 * every node keeps its mark and each error names origin:line:column. The tree is
 * walked against a fixed schema into a scratch scenario; then the batch is resolved
 * as a whole (micro-batch count, token counts, explicit values must agree) and the
 * scratch scenario is handed over only on success. On any error it is freed and the
 * caller's scenario is left initialised, owning nothing. */
#include "gp_scenario.h"
#include "../sources/gp_replay.h"

#include "../../base/gp_buf.h"
#include "../../base/gp_file.h"
#include "../../base/gp_num.h"
#include "../run/gp_runner.h"
#include "gp_yaml_bound.h"
#include "../../kernels/arith/gp_torch_sqrt.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "../../kernels/arith/gp_philox.h"
#include "../../kernels/gp_names.h"

#if defined(__GNUC__)
#define GP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GP_PRINTF(a, b)
#endif

#define PATHLEN 160                            /* "tensors[3].grad.values[2][7]" etc. */
#define MEM_LIMIT_ELEMS (((uint64_t)64 << 30) / 4) /* 64 GiB of fp32 elements */
#define TOKENS_STREAM 0x746f6b656e73ull        /* "tokens": Philox stream of {min, max} */
#define DEFAULT_TOKENS 512
#define DEFAULT_SIZE 1024

/* ---- defaults ---- */

static void dist_init(gp_dist *d, double scale)
{
    memset(d, 0, sizeof *d);
    d->kind = GP_DIST_NORMAL;
    d->scale = scale;
    d->sigma = 1.0;
    d->alpha = 3.0;
    d->neg_frac = 0.5;
    d->sparsity = 0.0;
    d->outlier_frac = 0.0;
    d->outlier_scale = 1000.0;
    d->shrink = 1.0;
}

static void dist_free(gp_dist *d)
{
    if (d->values)
        for (size_t k = 0; k < d->nmb; k++)
            free(d->values[k]);
    free(d->values);
    free(d->ntok);
    free(d->replay);
    free(d->replay_key);
    d->replay = d->replay_key = NULL;
    d->values = NULL;
    d->ntok = NULL;
    d->nmb = 0;
}

static void tensor_init(gp_tensor_spec *t, const char *name)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->size = DEFAULT_SIZE;
    dist_init(&t->grad, 1.0);
    dist_init(&t->weight, 0.02);
}

/* No allocation: the default tensor ("grad", 1024 elements) and the default tokens
 * (512 each) are materialised by the loader when the YAML does not give them. */
void gp_scenario_init(gp_scenario *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "scenario");
    s->seed = 0;
    s->tensors = NULL;
    s->ntensors = 0;
    s->batch.microbatches = 8;
    s->batch.accumulation_steps = 8;
    s->batch.tokens = NULL;
    s->reduction = GP_RED_TOKEN_MEAN;
    s->fullbatch = GP_FB_MEAN;
    s->precision.grad = GP_FP32;
    s->precision.accumulator = GP_FP32;
    s->precision.rounding = GP_ACC_RNE;
    s->precision.ftz = 0;
    s->loss_scale.mode = GP_LS_NONE;
    s->loss_scale.init = 65536.0;
    s->loss_scale.growth = 2.0;
    s->loss_scale.backoff = 0.5;
    s->loss_scale.interval = 2000;
    s->loss_scale.unscale_before_clip = 1;
    s->loss_scale.update = 1;
    s->clip.max_norm = 0.0;
    s->optimizer.lr = 1e-4;
    s->optimizer.beta1 = 0.9;
    s->optimizer.beta2 = 0.999;
    s->optimizer.eps = 1e-8;
    s->optimizer.weight_decay = 0.01;
    s->optimizer.param = GP_FP32;
    s->optimizer.master = 0;
    s->optimizer.state = GP_FP32;
    s->optimizer.kahan = 0;
    s->optimizer.stochastic = 0;
    s->optimizer.fused = 0;
    s->optimizer.evaluation = 0; /* GP_ADAMW_TORCH_CUDA */
    s->schedule.kind = GP_SCHED_CONSTANT;
    s->schedule.warmup = 0;
    s->schedule.total = 1;
    s->schedule.min_lr = 0.0;
    s->schedule.step_size = 100;
    s->schedule.gamma = 0.1;
    s->steps = 1;
    s->distributed.world_size = 1;
    s->distributed.collective = GP_COLL_RING;
    s->distributed.reduce_dtype = GP_FP32;
    s->distributed.average = GP_AVG_PRE;
    s->distributed.predivide = 0;
    s->distributed.no_sync = 1;
    s->distributed.bucket_elements = 0;
    s->distributed.normalize = GP_NORM_GLOBAL;
    s->distributed.tokens = NULL;
}

void gp_scenario_free(gp_scenario *s)
{
    if (s->tensors)
        for (size_t i = 0; i < s->ntensors; i++) {
            gp_tensor_spec *t = &s->tensors[i];
            dist_free(&t->grad);
            dist_free(&t->weight);
            free(t->state.replay);
            free(t->state.key);
            free(t->twin.replay);
            free(t->twin.key);
            free(t->optimizer.lr_steps);
        }
    free(s->tensors);
    free(s->batch.tokens);
    for (size_t st = 0; s->batch.step_tokens && s->batch.step_tokens[st]; st++)
        free(s->batch.step_tokens[st]);
    free(s->batch.step_tokens);
    free(s->batch.step_mb);
    free(s->optimizer.lr_steps);
    free(s->distributed.tokens);
    free(s->loss_scale.replay_scales);
    gp_scenario_init(s);
}

size_t gp_scenario_inputs(const gp_scenario *s, const char **paths, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; s->tensors && i < s->ntensors; i++) {
        const gp_tensor_spec *t = &s->tensors[i];
        const char *f[4] = {t->grad.kind == GP_DIST_REPLAY ? t->grad.replay : NULL,
                            t->weight.kind == GP_DIST_REPLAY ? t->weight.replay : NULL, t->state.replay,
                            t->twin.replay};
        for (int j = 0; j < 4; j++)
            if (f[j]) {
                if (n < cap)
                    paths[n] = f[j];
                n++;
            }
    }
    return n;
}

/* ---- names of the enumerations, in enum order ---- */

static const char *const dist_names[] = {"normal", "lognormal", "laplace", "pareto", "constant"};
static const char *const red_names[] = {"token_mean", "mean", "mean_no_div", "sum"};
static const char *const fb_names[] = {"mean", "sum"};
static const char *const acc_names[] = {"rne", "rtz", "stochastic", "kahan"};
static const char *const ls_names[] = {"none", "static", "dynamic"};
static const char *const master_names[] = {"none", "fp32"};
static const char *const fused_names[] = {"none", "torch_cpu"};
static const char *const opt_names[] = {"adamw"};
static const char *const eval_names[] = {"torch_cuda", "torch_cpu", "unfused", "torch_cpu_zen4",
                                         "torch_cuda_foreach", "torch_cpu_intel_avx512",
                                         "torch_cpu_host", "torch_cpu_foreach"}; /* gp_adamw_eval order */
static const char *const sched_names[] = {"constant", "cosine", "linear", "inverse_sqrt", "step"};
static const char *const coll_names[] = {"ring", "tree", "reduce_scatter"};
static const char *const avg_names[] = {"pre", "post", "op"};
static const char *const norm_names[] = {"global", "rank"};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *name_at(const char *const *names, int n, int i)
{
    return i >= 0 && i < n ? names[i] : "?";
}

const char *gp_reduction_name(gp_reduction r)
{
    return name_at(red_names, COUNT(red_names), (int)r);
}

const char *gp_acc_rounding_name(gp_acc_rounding r)
{
    return name_at(acc_names, COUNT(acc_names), (int)r);
}

const char *gp_ls_mode_name(gp_ls_mode m)
{
    return name_at(ls_names, COUNT(ls_names), (int)m);
}

const char *gp_schedule_name(gp_schedule_kind k)
{
    return name_at(sched_names, COUNT(sched_names), (int)k);
}

const char *gp_collective_name(gp_collective c)
{
    return name_at(coll_names, COUNT(coll_names), (int)c);
}

const char *gp_average_name(gp_average a)
{
    return name_at(avg_names, COUNT(avg_names), (int)a);
}

gp_format gp_scenario_reduce_dtype(const gp_scenario *s)
{
    return s->distributed.reduce_set ? s->distributed.reduce_dtype : s->precision.accumulator;
}

int gp_scenario_distributed(const gp_scenario *s)
{
    return s->distributed.world_size > 1 || gp_scenario_reduce_dtype(s) != s->precision.accumulator;
}

long gp_scenario_tokens(const gp_scenario *s, int r, int k)
{
    return s->distributed.tokens ? s->distributed.tokens[(size_t)r * (size_t)s->batch.microbatches + (size_t)k]
                                 : s->batch.tokens[k];
}

int gp_scenario_step_mb(const gp_scenario *s, int step)
{
    return s->batch.step_mb ? s->batch.step_mb[step] : s->batch.microbatches;
}

const long *gp_scenario_step_tokens(const gp_scenario *s, int step)
{
    return s->batch.step_tokens ? s->batch.step_tokens[step] : s->batch.tokens;
}

int gp_scenario_has_twin(const gp_scenario *s)
{
    for (size_t i = 0; i < s->ntensors; i++)
        if (s->tensors[i].twin.replay)
            return 1;
    return 0;
}

const char *gp_adamw_eval_name(int evaluation)
{
    return name_at(eval_names, COUNT(eval_names), evaluation);
}

static const char *enum_name(const char *const *names, int count, int v)
{
    return v >= 0 && v < count ? names[v] : "?";
}

/* "a, b, c" into buf (truncated to fit). */
static void join(char *buf, size_t n, const char *const *names, int count)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < count && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", names[i]);
}

/* ---- the loader: document, origin, error, and what the batch resolution needs ---- */

typedef struct {
    const char *origin;
    yaml_document_t *doc;
    gp_error *err;
    uint64_t elements;                 /* running total of tensor elements */
    yaml_node_t *mb, *acc, *tok;       /* batch.microbatches / accumulation_steps / tokens */
    enum { TOK_DEFAULT, TOK_INT, TOK_LIST, TOK_RANGE, TOK_STEPS } tok_kind;
    long tok_int, tok_min, tok_max;    /* TOK_INT value; TOK_RANGE bounds */
    long tok_seq;                      /* TOK_RANGE: sequences a micro-batch (0 read as 1) */
    size_t tok_len;                    /* TOK_LIST length (already in s->batch.tokens); TOK_STEPS: max K_s */
    size_t tok_steps;                  /* TOK_STEPS: the lists given (one per optimizer step) */
    yaml_node_t **vnodes;              /* per tensor: its grad.values node, or NULL */
    yaml_node_t **name_nodes;          /* per tensor: its name node */
    struct tensor_nodes { yaml_node_t *grad, *weight, *size, *sample, *population, *state, *twin, *opt_lr,
                                      *opt_lr_steps; } *tn; /* per tensor: the replay nodes of grad and
                                          weight, size, sample, state, twin, optimizer.lr, .lr_steps */
    yaml_node_t *lr_steps, *sched_name; /* optimizer.lr_steps, schedule.name */
    const char *dir;                   /* the scenario file's folder ("" for text: the current one) */
    int total_given;                   /* schedule.total was written */
    int sweep_ok;                      /* a top-level `sweep:` is being expanded */
    yaml_node_t *dist, *dist_v[9];     /* `distributed:` and its values (resolve_distributed) */
} loader;

static int fail(const loader *L, const yaml_node_t *n, const char *fmt, ...) GP_PRINTF(3, 4);
static int fail(const loader *L, const yaml_node_t *n, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return gp_error_set(L->err, "%s:%lu:%lu: %s", L->origin, (unsigned long)n->start_mark.line + 1,
                        (unsigned long)n->start_mark.column + 1, what);
}

/* Write a path or phrase for messages into a PATHLEN buffer (truncated to fit). */
static void pathf(char *out, const char *fmt, ...) GP_PRINTF(2, 3);
static void pathf(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, PATHLEN, fmt, ap);
    va_end(ap);
}

static yaml_node_t *node(const loader *L, int index)
{
    return yaml_document_get_node(L->doc, index);
}

static const char *sval(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static const char *kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE: return "a mapping";
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_SCALAR_NODE:
        return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? "a scalar" : "a quoted string";
    default: return "nothing";
    }
}

static size_t seq_len(const yaml_node_t *n)
{
    return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
}

static yaml_node_t *seq_item(const loader *L, const yaml_node_t *n, size_t i)
{
    return node(L, n->data.sequence.items.start[i]);
}

/* Collect the values of a mapping with a fixed key set: vals[i] is the value of
 * keys[i] (NULL when absent), keyn[i] its key. Rejects a non-mapping, non-scalar
 * keys, unknown keys (listing the allowed ones) and duplicate keys. */
static int fields(const loader *L, yaml_node_t *map, const char *path, const char *const *keys,
                  int nkeys, yaml_node_t **vals, yaml_node_t **keyn)
{
    for (int i = 0; i < nkeys; i++)
        vals[i] = keyn[i] = NULL;
    if (map->type != YAML_MAPPING_NODE)
        return fail(L, map, "%s: expected a mapping, got %s", *path ? path : "the scenario",
                    kind(map));
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(L, p->key), *v = node(L, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return fail(L, k, "%s: a key must be a name, got %s", *path ? path : "the scenario",
                        kind(k));
        int i = 0;
        while (i < nkeys && strcmp(sval(k), keys[i]) != 0)
            i++;
        if (i == nkeys) {
            char list[320];
            join(list, sizeof list, keys, nkeys);
            if (!*path)
                return fail(L, k, "unknown top-level key '%.60s' (allowed: %s)", sval(k), list);
            return fail(L, k, "unknown key '%.60s' in %s (allowed: %s)", sval(k), path, list);
        }
        if (vals[i])
            return fail(L, k, "duplicate key '%s'%s%s (first at %lu:%lu)", keys[i], *path ? " in " : "",
                        path, (unsigned long)keyn[i]->start_mark.line + 1,
                        (unsigned long)keyn[i]->start_mark.column + 1);
        vals[i] = v;
        keyn[i] = k;
    }
    return 0;
}

/* ---- scalars ---- */

static int is_null(const char *t)
{
    return !*t || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") || !strcmp(t, "NULL");
}

/* A number must be a plain scalar: a quoted "1.0" is a string in YAML. */
static int number_node(const loader *L, const yaml_node_t *n, const char *path, const char *what)
{
    if (n->type != YAML_SCALAR_NODE)
        return fail(L, n, "%s: expected %s, got %s", path, what, kind(n));
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return fail(L, n, "%s: expected %s, got the string \"%.40s\"", path, what, sval(n));
    if (is_null(sval(n)))
        return fail(L, n, "%s: expected %s, got nothing", path, what);
    return 0;
}

/* A finite double, fully parsed; YAML's .nan / .inf spellings are recognised so the
 * message says NaN or infinite rather than "not a number". */
static int get_double(const loader *L, const yaml_node_t *n, const char *path, double *out)
{
    if (number_node(L, n, path, "a number"))
        return -1;
    const char *t = sval(n);
    const char *u = (*t == '+' || *t == '-') ? t + 1 : t;
    double v = 0;
    int range = 0;
    if (!strcmp(t, ".nan") || !strcmp(t, ".NaN") || !strcmp(t, ".NAN")) {
        v = NAN;
    } else if (!strcmp(u, ".inf") || !strcmp(u, ".Inf") || !strcmp(u, ".INF")) {
        v = *t == '-' ? -INFINITY : INFINITY;
    } else {
        char *end;
        errno = 0;
        v = strtod(t, &end);
        range = errno == ERANGE;
        if (end == t || *end)
            return fail(L, n, "%s: expected a number, got '%.40s'", path, t);
    }
    if (isnan(v))
        return fail(L, n, "%s is NaN", path);
    if (isinf(v))
        return fail(L, n, "%s is infinite%s", path, range ? " (too large for a double)" : "");
    *out = v;
    return 0;
}

/* A finite double within [lo, hi] (an open end when lo_open / hi_open; hi = INFINITY
 * for no upper bound). */
static int get_double_in(const loader *L, const yaml_node_t *n, const char *path, double lo,
                         int lo_open, double hi, int hi_open, double *out)
{
    double v = 0;
    if (get_double(L, n, path, &v))
        return -1;
    int ok = (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
    if (ok) {
        *out = v;
        return 0;
    }
    if (isinf(hi))
        return fail(L, n, "%s must be %s %g (got %s)", path, lo_open ? ">" : ">=", lo, sval(n));
    return fail(L, n, "%s must be in %c%g, %g%c (got %s)", path, lo_open ? '(' : '[', lo, hi,
                hi_open ? ')' : ']', sval(n));
}

/* A decimal integer in [lo, hi], fully parsed. */
static int get_ll(const loader *L, const yaml_node_t *n, const char *path, long long lo,
                  long long hi, long long *out)
{
    if (number_node(L, n, path, "an integer"))
        return -1;
    const char *t = sval(n);
    char *end;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (end == t || *end)
        return fail(L, n, "%s: expected an integer, got '%.40s'", path, t);
    if (errno == ERANGE && v == LLONG_MIN)
        return fail(L, n, "%s must be at least %lld (got %.40s)", path, lo, t);
    if (errno == ERANGE || v > hi)
        return fail(L, n, "%s is too large: %.40s (at most %lld)", path, t, hi);
    if (v < lo)
        return fail(L, n, "%s must be at least %lld (got %.40s)", path, lo, t);
    *out = v;
    return 0;
}

static int get_int(const loader *L, const yaml_node_t *n, const char *path, long long lo, int *out)
{
    long long v = 0;
    if (get_ll(L, n, path, lo, INT_MAX, &v))
        return -1;
    *out = (int)v;
    return 0;
}

/* An unsigned 64-bit decimal integer (the seed). */
static int get_u64(const loader *L, const yaml_node_t *n, const char *path, uint64_t *out)
{
    if (number_node(L, n, path, "an integer"))
        return -1;
    const char *t = sval(n);
    if (*t == '-')
        return fail(L, n, "%s must be a non-negative integer (got %.40s)", path, t);
    int r = gp_parse_u64(t, 0, UINT64_MAX, out);
    if (r == -1)
        return fail(L, n, "%s: expected an integer, got '%.40s'", path, t);
    if (r == -2)
        return fail(L, n, "%s is too large: %.40s (at most %llu)", path, t, (unsigned long long)UINT64_MAX);
    return 0;
}

static int get_bool(const loader *L, const yaml_node_t *n, const char *path, int *out)
{
    if (n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        const char *t = sval(n);
        if (!strcmp(t, "true") || !strcmp(t, "True") || !strcmp(t, "TRUE")) {
            *out = 1;
            return 0;
        }
        if (!strcmp(t, "false") || !strcmp(t, "False") || !strcmp(t, "FALSE")) {
            *out = 0;
            return 0;
        }
        return fail(L, n, "%s: expected true or false, got '%.40s'", path, t);
    }
    return fail(L, n, "%s: expected true or false, got %s", path, kind(n));
}

/* A non-empty string without NUL bytes (any scalar style). */
static int get_string(const loader *L, const yaml_node_t *n, const char *path, const char **out)
{
    if (n->type != YAML_SCALAR_NODE)
        return fail(L, n, "%s: expected a string, got %s", path, kind(n));
    const char *t = sval(n);
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? is_null(t) : !*t)
        return fail(L, n, "%s: expected a string, got nothing", path);
    if (strlen(t) != n->data.scalar.length)
        return fail(L, n, "%s contains a NUL character", path);
    *out = t;
    return 0;
}

static int get_enum(const loader *L, const yaml_node_t *n, const char *path,
                    const char *const *names, int count, int *out)
{
    const char *t = NULL;
    if (get_string(L, n, path, &t))
        return -1;
    for (int i = 0; i < count; i++)
        if (!strcmp(t, names[i])) {
            *out = i;
            return 0;
        }
    char list[320];
    join(list, sizeof list, names, count);
    return fail(L, n, "unknown %s '%.40s' (allowed: %s)", path, t, list);
}

static int get_format(const loader *L, const yaml_node_t *n, const char *path, gp_format *out)
{
    const char *t = NULL;
    if (get_string(L, n, path, &t))
        return -1;
    if (gp_format_parse(t, out) == 0)
        return 0;
    const char *names[GP_NFORMATS];
    for (int i = 0; i < GP_NFORMATS; i++)
        names[i] = gp_format_name((gp_format)i);
    char list[320];
    join(list, sizeof list, names, GP_NFORMATS);
    return fail(L, n, "unknown %s format '%.40s' (allowed: %s)", path, t, list);
}

/* A scenario or tensor name: 1..GP_NAME_MAX-1 bytes, no control characters. */
static int get_name(const loader *L, const yaml_node_t *n, const char *path, char *out)
{
    const char *t = NULL;
    if (get_string(L, n, path, &t))
        return -1;
    size_t len = strlen(t);
    if (len >= GP_NAME_MAX)
        return fail(L, n, "%s is too long: %zu bytes (at most %d)", path, len, GP_NAME_MAX - 1);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
            return fail(L, n, "%s contains a control character", path);
    memcpy(out, t, len + 1);
    return 0;
}

/* ---- distributions ---- */

enum { D_DIST, D_SCALE, D_SIGMA, D_ALPHA, D_SIGN, D_SPARSITY, D_OUTLIERS, D_SHRINK, D_TOKEN_SNR, D_REPLAY, D_KEY,
       D_VALUES, D_N };
static const char *const dist_keys[D_N] = {"dist", "scale", "sigma", "alpha", "sign", "sparsity", "outliers",
                                           "shrink", "token_snr", "replay", "key", "values"};
enum { O_FRAC, O_SCALE, O_N };
static const char *const outlier_keys[O_N] = {"frac", "scale"};

static int oom(const loader *L, const yaml_node_t *n)
{
    return fail(L, n, "out of memory");
}

/* grad: {values: [[...], ...]}: the per-token values of each micro-batch. Counts are
 * checked before anything is allocated (aliases could otherwise multiply them). */
static int parse_values(const loader *L, yaml_node_t *n, const char *path, gp_dist *d)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(L, n, "%s: expected a list of micro-batches (lists of per-token values), got %s",
                    path, kind(n));
    size_t nmb = seq_len(n);
    if (nmb == 0)
        return fail(L, n, "%s is empty: give at least one micro-batch", path);
    if (nmb > GP_MAX_MICROBATCHES)
        return fail(L, n, "%s has too many micro-batches: %zu (at most %d)", path, nmb,
                    GP_MAX_MICROBATCHES);
    uint64_t total = 0;
    for (size_t k = 0; k < nmb; k++) {
        yaml_node_t *m = seq_item(L, n, k);
        if (m->type != YAML_SEQUENCE_NODE)
            return fail(L, m, "%s[%zu]: expected a list of per-token values, got %s", path, k, kind(m));
        size_t nt = seq_len(m);
        if (nt == 0)
            return fail(L, m, "%s[%zu] is empty: a micro-batch has at least one token", path, k);
        if (nt > (size_t)GP_MAX_TOKENS)
            return fail(L, m, "%s[%zu] has too many tokens: %zu (at most %ld)", path, k, nt, GP_MAX_TOKENS);
        total += nt;
    }
    if (total > INT32_MAX)
        return fail(L, n, "%s has %llu values in all: the total token count must fit in 2^31-1",
                    path, (unsigned long long)total);
    d->ntok = calloc(nmb, sizeof *d->ntok);
    d->values = calloc(nmb, sizeof *d->values);
    if (!d->ntok || !d->values) {
        free(d->ntok);
        free(d->values);
        d->ntok = NULL;
        d->values = NULL;
        return oom(L, n);
    }
    d->nmb = nmb;
    d->kind = GP_DIST_VALUES;
    for (size_t k = 0; k < nmb; k++) {
        yaml_node_t *m = seq_item(L, n, k);
        size_t nt = seq_len(m);
        d->values[k] = malloc(nt * sizeof(double));
        if (!d->values[k])
            return oom(L, m);
        d->ntok[k] = nt;
        for (size_t t = 0; t < nt; t++) {
            char p[PATHLEN];
            pathf(p, "%s[%zu][%zu]", path, k, t);
            if (get_double(L, seq_item(L, m, t), p, &d->values[k][t]))
                return -1;
        }
    }
    return 0;
}

/* {replay: FILE, key: KEY}: FILE resolved against the scenario file's folder (absolute
 * paths kept) into *file, KEY into *key (both malloc'ed); path names the mapping. */
static int get_replay_ref(const loader *L, yaml_node_t *map, yaml_node_t *rn, yaml_node_t *kn, const char *path,
                          char **file_out, char **key_out)
{
    char p[PATHLEN];
    const char *file = NULL, *key = NULL;
    if (!rn || !kn)
        return fail(L, map, "%s: replay needs both 'replay' (the dump) and 'key' (the tensor's name in it)", path);
    pathf(p, "%s.replay", path);
    if (get_string(L, rn, p, &file))
        return -1;
    pathf(p, "%s.key", path);
    if (get_string(L, kn, p, &key))
        return -1;
    if (!*file || !*key)
        return fail(L, !*file ? rn : kn, "%s: empty %s", path, !*file ? "replay path" : "key");
    size_t need = strlen(L->dir) + strlen(file) + 2;
    if (!(*file_out = malloc(need)) || !(*key_out = strdup(key)))
        return oom(L, map);
    if (file[0] == '/' || !L->dir[0])
        snprintf(*file_out, need, "%s", file);
    else
        snprintf(*file_out, need, "%s/%s", L->dir, file);
    return 0;
}

/* A grad or weight distribution. Only grad may hold `values`, and then nothing else.
 * Weights may have scale 0 (zero-initialised, like a LoRA B matrix). */
static int parse_dist(const loader *L, yaml_node_t *n, const char *path, int is_grad, gp_dist *d,
                      yaml_node_t **values_node, yaml_node_t **replay_node)
{
    yaml_node_t *v[D_N] = {0}, *k[D_N] = {0}; /* v[D_VALUES] stays NULL for weights */
    char p[PATHLEN];
    if (fields(L, n, path, dist_keys, is_grad ? D_N : D_N - 1, v, k))
        return -1;
    if (v[D_REPLAY] || v[D_KEY]) { /* {replay: FILE, key: KEY} and nothing else */
        for (int i = 0; i < D_N; i++)
            if (v[i] && i != D_REPLAY && i != D_KEY)
                return fail(L, k[i], "%s: '%s' cannot be combined with replay", path, dist_keys[i]);
        if (get_replay_ref(L, n, v[D_REPLAY], v[D_KEY], path, &d->replay, &d->replay_key))
            return -1;
        d->kind = GP_DIST_REPLAY;
        *replay_node = v[D_REPLAY];
        return 0;
    }
    if (v[D_VALUES]) {
        for (int i = 0; i < D_VALUES; i++)
            if (v[i])
                return fail(L, k[i], "%s: '%s' cannot be combined with explicit values", path,
                            dist_keys[i]);
        *values_node = v[D_VALUES];
        pathf(p, "%s.values", path);
        return parse_values(L, v[D_VALUES], p, d);
    }
    if (v[D_DIST]) {
        int kd = 0;
        pathf(p, "%s.dist", path);
        if (get_enum(L, v[D_DIST], p, dist_names, COUNT(dist_names), &kd))
            return -1;
        d->kind = (gp_dist_kind)kd;
    }
#define DIST_NUM(key, field, lo, lo_open, hi, hi_open)                                   \
    if (v[key]) {                                                                        \
        pathf(p, "%s.%s", path, dist_keys[key]);                           \
        if (get_double_in(L, v[key], p, lo, lo_open, hi, hi_open, &d->field))           \
            return -1;                                                                   \
    }
    DIST_NUM(D_SCALE, scale, 0.0, is_grad, INFINITY, 0)
    DIST_NUM(D_SIGMA, sigma, 0.0, 1, INFINITY, 0)
    DIST_NUM(D_ALPHA, alpha, 0.0, 1, INFINITY, 0)
    DIST_NUM(D_SIGN, neg_frac, 0.0, 0, 1.0, 0)
    DIST_NUM(D_SPARSITY, sparsity, 0.0, 0, 1.0, 1)
    DIST_NUM(D_SHRINK, shrink, 0.0, 1, INFINITY, 0)
    if (v[D_TOKEN_SNR] && !is_grad)
        return fail(L, k[D_TOKEN_SNR], "%s: token_snr describes a gradient, not initial weights", path);
    DIST_NUM(D_TOKEN_SNR, token_snr, 0.0, 1, INFINITY, 0)
#undef DIST_NUM
    if (v[D_OUTLIERS]) {
        yaml_node_t *ov[O_N], *ok[O_N];
        char op[PATHLEN];
        pathf(op, "%s.outliers", path);
        if (fields(L, v[D_OUTLIERS], op, outlier_keys, O_N, ov, ok))
            return -1;
        pathf(p, "%s.frac", op);
        if (ov[O_FRAC] && get_double_in(L, ov[O_FRAC], p, 0.0, 0, 1.0, 0, &d->outlier_frac))
            return -1;
        pathf(p, "%s.scale", op);
        if (ov[O_SCALE] && get_double_in(L, ov[O_SCALE], p, 0.0, 1, INFINITY, 0, &d->outlier_scale))
            return -1;
    }
    return 0;
}

/* ---- tensors ---- */

enum { T_NAME, T_SIZE, T_GRAD, T_WEIGHT, T_SAMPLE, T_POPULATION, T_STATE, T_TWIN, T_OPT, T_N };
static const char *const tensor_keys[T_N] = {"name", "size", "grad", "weight", "sample", "population",
                                             "state", "twin", "optimizer"};

/* A list of `steps` learning rates >= 0 (optimizer.lr_steps, tensors[i].optimizer.lr_steps):
 * the length is checked once steps is known (parse_scenario). */
static int get_lr_steps(const loader *L, yaml_node_t *q, const char *path, double **out, int *n)
{
    size_t len = q->type == YAML_SEQUENCE_NODE ? seq_len(q) : 0;
    if (len == 0)
        return fail(L, q, "%s: expected a list of the LR of each optimizer step, got %s", path,
                    q->type == YAML_SEQUENCE_NODE ? "an empty list" : kind(q));
    if (len > (size_t)INT_MAX / 2)
        return fail(L, q, "%s has too many entries", path);
    if (!(*out = malloc(len * sizeof **out)))
        return oom(L, q);
    *n = (int)len;
    for (size_t i = 0; i < len; i++) {
        char p[PATHLEN];
        pathf(p, "%s[%zu]", path, i);
        if (get_double_in(L, seq_item(L, q, i), p, 0.0, 0, INFINITY, 0, &(*out)[i]))
            return -1;
    }
    return 0;
}

enum { ST_REPLAY, ST_KEY, ST_STEP, ST_N };
static const char *const state_keys[ST_N] = {"replay", "key", "step"};
enum { TO_LR, TO_LR_STEPS, TO_WD, TO_N };
static const char *const topt_keys[TO_N] = {"lr", "lr_steps", "weight_decay"};

/* tensors[i].state {replay, key, step}, .twin {replay, key}, .optimizer {lr, lr_steps,
 * weight_decay}: what a capture carries beyond the gradients (docs/replay.md). */
static int parse_carried(loader *L, yaml_node_t *const *v, const char *path, size_t i, gp_tensor_spec *t)
{
    char p[PATHLEN];
    yaml_node_t *sv[ST_N], *sk[ST_N];
    if (v[T_STATE]) {
        pathf(p, "%s.state", path);
        if (fields(L, v[T_STATE], p, state_keys, ST_N, sv, sk) ||
            get_replay_ref(L, v[T_STATE], sv[ST_REPLAY], sv[ST_KEY], p, &t->state.replay, &t->state.key))
            return -1;
        if (!sv[ST_STEP])
            return fail(L, v[T_STATE], "%s: missing required key 'step' (torch's state['step'] when the capture "
                        "began)", p);
        long long step = 0;
        pathf(p, "%s.state.step", path);
        if (get_ll(L, sv[ST_STEP], p, 0, INT_MAX, &step))
            return -1;
        t->state.step = (long)step;
        if (t->weight.kind != GP_DIST_REPLAY)
            return fail(L, v[T_STATE], "%s.state: the optimizer state at entry needs the weights at entry: replay "
                        "'weight' too", path);
        L->tn[i].state = v[T_STATE];
    }
    if (v[T_TWIN]) {
        pathf(p, "%s.twin", path);
        if (fields(L, v[T_TWIN], p, state_keys, ST_STEP, sv, sk) ||
            get_replay_ref(L, v[T_TWIN], sv[ST_REPLAY], sv[ST_KEY], p, &t->twin.replay, &t->twin.key))
            return -1;
        if (t->grad.kind != GP_DIST_REPLAY)
            return fail(L, v[T_TWIN], "%s.twin: torch's state after each step is compared on a replayed run: "
                        "replay 'grad' too", path);
        L->tn[i].twin = v[T_TWIN];
    }
    if (v[T_OPT]) {
        yaml_node_t *ov[TO_N], *ok[TO_N];
        pathf(p, "%s.optimizer", path);
        if (fields(L, v[T_OPT], p, topt_keys, TO_N, ov, ok))
            return -1;
        pathf(p, "%s.optimizer.lr", path);
        if (ov[TO_LR] && get_double_in(L, ov[TO_LR], p, 0.0, 0, INFINITY, 0, &t->optimizer.lr))
            return -1;
        t->optimizer.set_lr = ov[TO_LR] != NULL;
        pathf(p, "%s.optimizer.weight_decay", path);
        if (ov[TO_WD] && get_double_in(L, ov[TO_WD], p, 0.0, 0, INFINITY, 0, &t->optimizer.weight_decay))
            return -1;
        t->optimizer.set_wd = ov[TO_WD] != NULL;
        pathf(p, "%s.optimizer.lr_steps", path);
        if (ov[TO_LR_STEPS] && get_lr_steps(L, ov[TO_LR_STEPS], p, &t->optimizer.lr_steps, &t->optimizer.nlr_steps))
            return -1;
        L->tn[i].opt_lr = ov[TO_LR];
        L->tn[i].opt_lr_steps = ov[TO_LR_STEPS];
    }
    return 0;
}

static int parse_tensor(loader *L, yaml_node_t *n, size_t i, gp_tensor_spec *t)
{
    yaml_node_t *v[T_N], *k[T_N];
    char path[PATHLEN], p[PATHLEN];
    pathf(path, "tensors[%zu]", i);
    if (fields(L, n, path, tensor_keys, T_N, v, k))
        return -1;
    if (!v[T_NAME])
        return fail(L, n, "%s: missing required key 'name'", path);
    pathf(p, "%s.name", path);
    if (get_name(L, v[T_NAME], p, t->name))
        return -1;
    L->name_nodes[i] = v[T_NAME];
    pathf(p, "%s.grad", path);
    if (v[T_GRAD] && parse_dist(L, v[T_GRAD], p, 1, &t->grad, &L->vnodes[i], &L->tn[i].grad))
        return -1;
    pathf(p, "%s.weight", path);
    if (v[T_WEIGHT] && parse_dist(L, v[T_WEIGHT], p, 0, &t->weight, NULL, &L->tn[i].weight))
        return -1;
    if (t->weight.kind == GP_DIST_REPLAY && t->grad.kind != GP_DIST_REPLAY)
        return fail(L, v[T_WEIGHT], "%s.weight: replayed weights need a replayed grad", path);
    if (parse_carried(L, v, path, i, t))
        return -1;
    L->tn[i].size = v[T_SIZE];
    L->tn[i].sample = v[T_SAMPLE];
    pathf(p, "%s.sample", path);
    long long sample = 0;
    if (v[T_SAMPLE] && get_ll(L, v[T_SAMPLE], p, 1, (long long)GP_MAX_TENSOR_SIZE, &sample))
        return -1;
    if (v[T_SAMPLE] && t->grad.kind == GP_DIST_VALUES)
        return fail(L, v[T_SAMPLE], "%s: a tensor of explicit values is never sampled (it has one element)", p);
    t->sample = (size_t)sample;
    L->tn[i].population = v[T_POPULATION];
    pathf(p, "%s.population", path);
    long long population = 0;
    if (v[T_POPULATION] && get_ll(L, v[T_POPULATION], p, 1, (long long)1 << 62, &population))
        return -1;
    if (v[T_POPULATION] && t->grad.kind != GP_DIST_REPLAY)
        return fail(L, v[T_POPULATION], "%s: population applies to replayed tensors (a dump holding a sample)", p);
    t->population = (uint64_t)population;
    pathf(p, "%s.size", path);
    long long size = t->grad.kind == GP_DIST_VALUES ? 1 : DEFAULT_SIZE;
    if (v[T_SIZE] && get_ll(L, v[T_SIZE], p, 1, (long long)GP_MAX_TENSOR_SIZE, &size))
        return -1;
    if (t->grad.kind == GP_DIST_VALUES && size != 1)
        return fail(L, v[T_SIZE], "%s must be 1 for a tensor with explicit grad values (got %lld)", p, size);
    t->size = (size_t)size;
    if (t->grad.kind != GP_DIST_REPLAY && t->sample > t->size) /* replayed: checked against the dump */
        return fail(L, v[T_SAMPLE], "%s.sample is %zu, more than the tensor's %zu elements", path, t->sample,
                    t->size);
    L->elements += t->size;
    if (L->elements > MEM_LIMIT_ELEMS)
        return fail(L, v[T_SIZE] ? v[T_SIZE] : n,
                    "%s: the tensors reach %llu elements in all (%.1f GiB at the least 4 bytes each): "
                    "cannot fit in memory (limit 64 GiB)",
                    path, (unsigned long long)L->elements, (double)L->elements * 4.0 / 1073741824.0);
    return 0;
}

typedef struct {
    const char *name;
    size_t idx;
} name_ref;

static int cmp_name_ref(const void *a, const void *b)
{
    const name_ref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Tensor names are unique: sort, then report the earliest repeat in file order. */
static int check_unique_names(const loader *L, const gp_scenario *s)
{
    name_ref *r = malloc(s->ntensors * sizeof *r);
    if (!r)
        return oom(L, L->name_nodes[0]);
    for (size_t i = 0; i < s->ntensors; i++) {
        r[i].name = s->tensors[i].name;
        r[i].idx = i;
    }
    qsort(r, s->ntensors, sizeof *r, cmp_name_ref);
    size_t first = 0, dup = SIZE_MAX;
    for (size_t i = 1; i < s->ntensors; i++)
        if (!strcmp(r[i].name, r[i - 1].name) && r[i].idx < dup) {
            dup = r[i].idx;
            first = r[i - 1].idx;
        }
    free(r);
    if (dup == SIZE_MAX)
        return 0;
    const yaml_node_t *f = L->name_nodes[first];
    return fail(L, L->name_nodes[dup], "duplicate tensor name '%s' (first at %lu:%lu)",
                s->tensors[dup].name, (unsigned long)f->start_mark.line + 1,
                (unsigned long)f->start_mark.column + 1);
}

static int parse_tensors(loader *L, yaml_node_t *n, gp_scenario *s)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(L, n, "tensors: expected a list of tensors, got %s", kind(n));
    size_t count = seq_len(n);
    if (count == 0)
        return fail(L, n, "tensors: at least one tensor is required");
    s->tensors = calloc(count, sizeof *s->tensors);
    L->vnodes = calloc(count, sizeof *L->vnodes);
    L->name_nodes = calloc(count, sizeof *L->name_nodes);
    L->tn = calloc(count, sizeof *L->tn);
    if (!s->tensors || !L->vnodes || !L->name_nodes || !L->tn)
        return oom(L, n);
    for (size_t i = 0; i < count; i++)
        tensor_init(&s->tensors[i], "");
    s->ntensors = count;
    for (size_t i = 0; i < count; i++)
        if (parse_tensor(L, seq_item(L, n, i), i, &s->tensors[i]))
            return -1;
    return check_unique_names(L, s);
}

/* ---- batch: parsed here, resolved once the tensors are known ---- */

enum { B_ACC, B_MB, B_TOKENS, B_N };
static const char *const batch_keys[B_N] = {"accumulation_steps", "microbatches", "tokens"};
enum { R_MIN, R_MAX, R_SEQ, R_N };
static const char *const range_keys[R_N] = {"min", "max", "sequences"};

static int parse_batch(loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *v[B_N], *k[B_N];
    if (fields(L, n, "batch", batch_keys, B_N, v, k))
        return -1;
    if (v[B_MB] && get_int(L, v[B_MB], "batch.microbatches", 1, &s->batch.microbatches))
        return -1;
    if (v[B_MB] && s->batch.microbatches > GP_MAX_MICROBATCHES)
        return fail(L, v[B_MB], "batch.microbatches is too large: %d (at most %d)",
                    s->batch.microbatches, GP_MAX_MICROBATCHES);
    if (v[B_ACC] && get_int(L, v[B_ACC], "batch.accumulation_steps", 1, &s->batch.accumulation_steps))
        return -1;
    L->mb = v[B_MB];
    L->acc = v[B_ACC];
    L->tok = v[B_TOKENS];
    yaml_node_t *t = v[B_TOKENS];
    long long x = 0;
    if (!t)
        return 0;
    if (t->type == YAML_SCALAR_NODE) { /* one count for every micro-batch */
        if (get_ll(L, t, "batch.tokens", 1, GP_MAX_TOKENS, &x))
            return -1;
        L->tok_kind = TOK_INT;
        L->tok_int = (long)x;
    } else if (t->type == YAML_SEQUENCE_NODE && seq_len(t) > 0 && seq_item(L, t, 0)->type == YAML_SEQUENCE_NODE) {
        /* one list per optimizer step: step s has its own micro-batches */
        size_t ns = seq_len(t);
        if (ns > (size_t)INT_MAX / 2)
            return fail(L, t, "batch.tokens has too many steps: %zu", ns);
        if (!(s->batch.step_tokens = calloc(ns + 1, sizeof *s->batch.step_tokens)) ||
            !(s->batch.step_mb = calloc(ns, sizeof *s->batch.step_mb)))
            return oom(L, t);
        for (size_t st = 0; st < ns; st++) {
            char p[PATHLEN];
            yaml_node_t *q = seq_item(L, t, st);
            size_t len = q->type == YAML_SEQUENCE_NODE ? seq_len(q) : 0;
            pathf(p, "batch.tokens[%zu]", st);
            if (q->type != YAML_SEQUENCE_NODE)
                return fail(L, q, "%s: expected the list of step %zu's token counts (one per micro-batch), got %s",
                            p, st, kind(q));
            if (len == 0)
                return fail(L, q, "%s is an empty list: a step has at least one micro-batch", p);
            if (len > GP_MAX_MICROBATCHES)
                return fail(L, q, "%s has too many entries: %zu (at most %d)", p, len, GP_MAX_MICROBATCHES);
            if (!(s->batch.step_tokens[st] = malloc(len * sizeof(long))))
                return oom(L, q);
            s->batch.step_mb[st] = (int)len;
            if ((size_t)L->tok_len < len)
                L->tok_len = len; /* max K_s */
            for (size_t j = 0; j < len; j++) {
                pathf(p, "batch.tokens[%zu][%zu]", st, j);
                if (get_ll(L, seq_item(L, q, j), p, 1, GP_MAX_TOKENS, &x))
                    return -1;
                s->batch.step_tokens[st][j] = (long)x;
            }
        }
        L->tok_kind = TOK_STEPS;
        L->tok_steps = ns;
    } else if (t->type == YAML_SEQUENCE_NODE) { /* one count per micro-batch */
        size_t len = seq_len(t);
        if (len == 0)
            return fail(L, t, "batch.tokens is an empty list");
        if (len > GP_MAX_MICROBATCHES)
            return fail(L, t, "batch.tokens has too many entries: %zu (at most %d)", len,
                        GP_MAX_MICROBATCHES);
        s->batch.tokens = malloc(len * sizeof *s->batch.tokens);
        if (!s->batch.tokens)
            return oom(L, t);
        for (size_t i = 0; i < len; i++) {
            char p[PATHLEN];
            pathf(p, "batch.tokens[%zu]", i);
            if (get_ll(L, seq_item(L, t, i), p, 1, GP_MAX_TOKENS, &x))
                return -1;
            s->batch.tokens[i] = (long)x;
        }
        L->tok_kind = TOK_LIST;
        L->tok_len = len;
    } else { /* {min, max}: drawn per micro-batch from the seed */
        yaml_node_t *rv[R_N], *rk[R_N];
        long long lo = 0, hi = 0;
        if (fields(L, t, "batch.tokens", range_keys, R_N, rv, rk))
            return -1;
        if (!rv[R_MIN] || !rv[R_MAX])
            return fail(L, t, "batch.tokens: a range needs both 'min' and 'max'");
        if (get_ll(L, rv[R_MIN], "batch.tokens.min", 1, GP_MAX_TOKENS, &lo) ||
            get_ll(L, rv[R_MAX], "batch.tokens.max", 1, GP_MAX_TOKENS, &hi))
            return -1;
        if (hi < lo)
            return fail(L, rv[R_MAX], "batch.tokens.max (%lld) must be at least min (%lld)", hi, lo);
        long long seqs = 1;
        if (rv[R_SEQ] && get_ll(L, rv[R_SEQ], "batch.tokens.sequences", 1, GP_MAX_MICROBATCHES, &seqs))
            return -1;
        if (seqs * hi > GP_MAX_TOKENS)
            return fail(L, rv[R_SEQ], "batch.tokens: %lld sequences of up to %lld tokens exceed %ld tokens a "
                        "micro-batch", seqs, hi, GP_MAX_TOKENS);
        L->tok_seq = (long)seqs;
        L->tok_kind = TOK_RANGE;
        L->tok_min = (long)lo;
        L->tok_max = (long)hi;
    }
    return 0;
}

/* Per-step token counts (batch.tokens a list of `steps` lists): K = max K_s (a written
 * batch.microbatches must equal it), A = accumulation_steps >= K (default K); batch.tokens
 * gets the counts of the first step with K micro-batches. Refused with explicit values
 * (they fix one batch) and with `distributed:`. Each step's N_s must fit in 2^31-1. */
static int resolve_step_tokens(loader *L, gp_scenario *s, size_t first_v)
{
    size_t K = L->tok_len;
    if (first_v != SIZE_MAX)
        return fail(L, L->tok, "batch.tokens: per-step token counts cannot go with explicit grad values "
                    "(tensors[%zu].grad.values fixes one batch)", first_v);
    if (L->dist)
        return fail(L, L->tok, "batch.tokens: per-step token counts are not simulated with `distributed:` "
                    "(give one list, or distributed.tokens)");
    if (L->tok_steps != (size_t)s->steps)
        return fail(L, L->tok, "batch.tokens has %zu step lists but steps is %d (one list per optimizer step)",
                    L->tok_steps, s->steps);
    if (L->mb && (size_t)s->batch.microbatches != K)
        return fail(L, L->mb, "batch.microbatches is %d but the longest step of batch.tokens has %zu micro-batches "
                    "(with per-step counts, microbatches is the largest K_s)", s->batch.microbatches, K);
    s->batch.microbatches = (int)K;
    if (!L->acc)
        s->batch.accumulation_steps = (int)K;
    else if ((size_t)s->batch.accumulation_steps < K)
        return fail(L, L->acc, "batch.accumulation_steps (%d) must be at least the largest step of batch.tokens "
                    "(%zu micro-batches)", s->batch.accumulation_steps, K);
    for (int st = 0; st < s->steps; st++) {
        uint64_t N = 0;
        for (int k = 0; k < s->batch.step_mb[st]; k++)
            N += (uint64_t)s->batch.step_tokens[st][k];
        if (N > INT32_MAX)
            return fail(L, seq_item(L, L->tok, (size_t)st), "batch.tokens[%d]: the total N = %llu tokens does not "
                        "fit in 2^31-1", st, (unsigned long long)N);
        if ((size_t)s->batch.step_mb[st] == K && !s->batch.tokens) {
            if (!(s->batch.tokens = malloc(K * sizeof *s->batch.tokens)))
                return oom(L, L->tok);
            memcpy(s->batch.tokens, s->batch.step_tokens[st], K * sizeof *s->batch.tokens);
        }
    }
    return 0;
}

/* Settle K, A and the token counts. K comes from batch.microbatches, else the length
 * of a tokens list, else the first tensor with explicit values, else 8; the tokens
 * from batch.tokens, else that first values tensor, else 512 each. Every source given
 * must agree, and N = sum of tokens must fit in 2^31-1. */
static int resolve_batch(loader *L, yaml_node_t *root, gp_scenario *s)
{
    size_t first_v = SIZE_MAX;
    for (size_t i = 0; i < s->ntensors && first_v == SIZE_MAX; i++)
        if (s->tensors[i].grad.kind == GP_DIST_VALUES)
            first_v = i;
    if (L->tok_kind == TOK_STEPS)
        return resolve_step_tokens(L, s, first_v);
    char ksrc[PATHLEN];
    size_t K;
    if (L->mb) {
        K = (size_t)s->batch.microbatches;
        pathf(ksrc, "batch.microbatches is %zu", K);
    } else if (L->tok_kind == TOK_LIST) {
        K = L->tok_len;
        pathf(ksrc, "batch.tokens has %zu entries", K);
    } else if (first_v != SIZE_MAX) {
        K = s->tensors[first_v].grad.nmb;
        pathf(ksrc, "tensors[%zu].grad.values has %zu", first_v, K);
    } else if (L->acc) { /* only the window is given: full windows of it */
        K = (size_t)s->batch.accumulation_steps;
        pathf(ksrc, "batch.accumulation_steps is %zu", K);
    } else {
        K = (size_t)s->batch.microbatches;
        pathf(ksrc, "batch.microbatches is %zu (the default)", K);
    }
    if (L->tok_kind == TOK_LIST && L->tok_len != K)
        return fail(L, L->tok, "batch.tokens has %zu entries but %s", L->tok_len, ksrc);
    for (size_t i = 0; i < s->ntensors; i++)
        if (s->tensors[i].grad.kind == GP_DIST_VALUES && s->tensors[i].grad.nmb != K)
            return fail(L, L->vnodes[i], "tensors[%zu].grad.values has %zu micro-batches but %s", i,
                        s->tensors[i].grad.nmb, ksrc);
    s->batch.microbatches = (int)K;
    if (!L->acc)
        s->batch.accumulation_steps = (int)K;
    else if ((size_t)s->batch.accumulation_steps < K)
        return fail(L, L->acc,
                    "batch.accumulation_steps (%d) must be at least batch.microbatches (%zu); "
                    "fewer micro-batches than accumulation steps make a partial last window",
                    s->batch.accumulation_steps, K);

    if (L->tok_kind != TOK_LIST) {
        s->batch.tokens = malloc(K * sizeof *s->batch.tokens);
        if (!s->batch.tokens)
            return oom(L, root);
        for (size_t k = 0; k < K; k++) {
            if (L->tok_kind == TOK_INT)
                s->batch.tokens[k] = L->tok_int;
            else if (L->tok_kind == TOK_RANGE) { /* the sum of B sequence lengths, each uniform */
                uint64_t B = L->tok_seq > 1 ? (uint64_t)L->tok_seq : 1;
                s->batch.tokens[k] = 0;
                for (uint64_t j = 0; j < B; j++)
                    s->batch.tokens[k] +=
                        L->tok_min + (long)(gp_rand_u32(s->seed, TOKENS_STREAM, B == 1 ? k : k * B + j) %
                                            (uint32_t)(L->tok_max - L->tok_min + 1));
            }
            else if (first_v != SIZE_MAX)
                s->batch.tokens[k] = (long)s->tensors[first_v].grad.ntok[k];
            else
                s->batch.tokens[k] = DEFAULT_TOKENS;
        }
    }
    for (size_t i = 0; i < s->ntensors; i++) {
        const gp_dist *d = &s->tensors[i].grad;
        if (d->kind != GP_DIST_VALUES)
            continue;
        for (size_t k = 0; k < K; k++)
            if (d->ntok[k] != (size_t)s->batch.tokens[k]) {
                if (L->tok_kind == TOK_DEFAULT) /* the counts came from tensors[first_v] */
                    return fail(L, seq_item(L, L->vnodes[i], k),
                                "tensors[%zu].grad.values[%zu] has %zu token(s) but "
                                "tensors[%zu].grad.values[%zu] has %ld",
                                i, k, d->ntok[k], first_v, k, s->batch.tokens[k]);
                return fail(L, seq_item(L, L->vnodes[i], k),
                            "tensors[%zu].grad.values[%zu] has %zu token(s) but batch.tokens[%zu] is %ld",
                            i, k, d->ntok[k], k, s->batch.tokens[k]);
            }
    }
    uint64_t N = 0;
    for (size_t k = 0; k < K; k++)
        N += (uint64_t)s->batch.tokens[k];
    if (N > INT32_MAX)
        return fail(L, L->tok ? L->tok : root,
                    "batch.tokens: the total N = %llu tokens over %zu micro-batches does not fit "
                    "in 2^31-1",
                    (unsigned long long)N, K);
    return 0;
}

/* ---- the remaining sections ---- */

enum { P_GRAD, P_ACC, P_ROUNDING, P_FTZ, P_N };
static const char *const precision_keys[P_N] = {"grad", "accumulator", "rounding", "ftz"};

static int parse_precision(const loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *v[P_N], *k[P_N];
    int e = 0;
    if (fields(L, n, "precision", precision_keys, P_N, v, k))
        return -1;
    if (v[P_GRAD] && get_format(L, v[P_GRAD], "precision.grad", &s->precision.grad))
        return -1;
    if (v[P_ACC] && get_format(L, v[P_ACC], "precision.accumulator", &s->precision.accumulator))
        return -1;
    if (v[P_ROUNDING]) {
        if (get_enum(L, v[P_ROUNDING], "precision.rounding", acc_names, COUNT(acc_names), &e))
            return -1;
        s->precision.rounding = (gp_acc_rounding)e;
    }
    if (v[P_FTZ] && get_bool(L, v[P_FTZ], "precision.ftz", &s->precision.ftz))
        return -1;
    return 0;
}

enum { L_MODE, L_INIT, L_GROWTH, L_BACKOFF, L_INTERVAL, L_UNSCALE, L_UPDATE, L_REPLAY, L_TRACKER, L_N };
static const char *const ls_keys[L_N] = {"mode", "init", "growth", "backoff", "interval", "unscale_before_clip",
                                         "update", "replay_scales", "tracker"};

/* A loss scale: a power of two in [2^-126, 2^127] (scaling by it is exact: the
 * accumulation model relies on it). */
static int get_scale(const loader *L, yaml_node_t *n, const char *path, double *out)
{
    double x = 0;
    int ex = 0;
    if (get_double_in(L, n, path, 0.0, 1, INFINITY, 0, &x))
        return -1;
    if (frexp(x, &ex) != 0.5)
        return fail(L, n, "%s must be a power of two (got %s)", path, sval(n));
    if (ex - 1 < -126 || ex - 1 > 127)
        return fail(L, n, "%s must be a power of two between 2^-126 and 2^127, a normal fp32 (got 2^%d)", path,
                    ex - 1);
    *out = x;
    return 0;
}

static int parse_loss_scale(const loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *v[L_N], *k[L_N];
    int e = 0;
    if (fields(L, n, "loss_scale", ls_keys, L_N, v, k))
        return -1;
    if (v[L_MODE]) {
        if (get_enum(L, v[L_MODE], "loss_scale.mode", ls_names, COUNT(ls_names), &e))
            return -1;
        s->loss_scale.mode = (gp_ls_mode)e;
    }
    if (v[L_INIT] && get_scale(L, v[L_INIT], "loss_scale.init", &s->loss_scale.init))
        return -1;
    if (v[L_REPLAY]) {
        yaml_node_t *q = v[L_REPLAY];
        size_t len = q->type == YAML_SEQUENCE_NODE ? seq_len(q) : 0;
        if (len == 0)
            return fail(L, q, "loss_scale.replay_scales: a list of one scale per optimizer step");
        if (len > (size_t)INT_MAX / 2)
            return fail(L, q, "loss_scale.replay_scales has too many entries");
        if (!(s->loss_scale.replay_scales = malloc(len * sizeof(double))))
            return oom(L, q);
        s->loss_scale.nreplay_scales = (int)len;
        for (size_t i = 0; i < len; i++) {
            char p[PATHLEN];
            pathf(p, "loss_scale.replay_scales[%zu]", i);
            if (get_scale(L, seq_item(L, q, i), p, &s->loss_scale.replay_scales[i]))
                return -1;
        }
    }
    if (v[L_GROWTH] && get_double_in(L, v[L_GROWTH], "loss_scale.growth", 1.0, 1, INFINITY, 0,
                                     &s->loss_scale.growth))
        return -1;
    if (v[L_BACKOFF] && get_double_in(L, v[L_BACKOFF], "loss_scale.backoff", 0.0, 1, 1.0, 1,
                                      &s->loss_scale.backoff))
        return -1;
    if (v[L_INTERVAL] && get_int(L, v[L_INTERVAL], "loss_scale.interval", 1, &s->loss_scale.interval))
        return -1;
    if (v[L_UNSCALE] && get_bool(L, v[L_UNSCALE], "loss_scale.unscale_before_clip",
                                 &s->loss_scale.unscale_before_clip))
        return -1;
    if (v[L_UPDATE] && get_bool(L, v[L_UPDATE], "loss_scale.update", &s->loss_scale.update))
        return -1;
    if (v[L_TRACKER] && get_int(L, v[L_TRACKER], "loss_scale.tracker", 0, &s->loss_scale.tracker))
        return -1;
    return 0;
}

static const char *const clip_keys[] = {"max_norm"};

static int parse_clip(const loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *v[1], *k[1];
    if (fields(L, n, "clip", clip_keys, 1, v, k))
        return -1;
    if (v[0] && get_double_in(L, v[0], "clip.max_norm", 0.0, 0, INFINITY, 0, &s->clip.max_norm))
        return -1;
    return 0;
}

enum { OP_NAME, OP_LR, OP_BETAS, OP_EPS, OP_WD, OP_PARAM, OP_MASTER, OP_STATE, OP_KAHAN, OP_SR, OP_FUSED, OP_EVAL,
       OP_LR_STEPS, OP_N };
static const char *const opt_keys[OP_N] = {"name", "lr", "betas", "eps", "weight_decay", "param", "master",
                                           "state", "kahan", "stochastic", "fused", "evaluation", "lr_steps"};

static int parse_optimizer(loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *v[OP_N], *k[OP_N];
    int e = 0;
    if (fields(L, n, "optimizer", opt_keys, OP_N, v, k))
        return -1;
    if (v[OP_NAME] && get_enum(L, v[OP_NAME], "optimizer.name", opt_names, COUNT(opt_names), &e))
        return -1;
    if (v[OP_LR] && get_double_in(L, v[OP_LR], "optimizer.lr", 0.0, 0, INFINITY, 0, &s->optimizer.lr))
        return -1;
    if (v[OP_LR_STEPS] &&
        get_lr_steps(L, v[OP_LR_STEPS], "optimizer.lr_steps", &s->optimizer.lr_steps, &s->optimizer.nlr_steps))
        return -1;
    L->lr_steps = v[OP_LR_STEPS];
    if (v[OP_BETAS]) {
        yaml_node_t *b = v[OP_BETAS];
        if (b->type != YAML_SEQUENCE_NODE || seq_len(b) != 2)
            return fail(L, b, "optimizer.betas: expected a list of two numbers [beta1, beta2], got %s",
                        b->type == YAML_SEQUENCE_NODE ? "a list of another length" : kind(b));
        if (get_double_in(L, seq_item(L, b, 0), "optimizer.betas[0]", 0.0, 0, 1.0, 1, &s->optimizer.beta1) ||
            get_double_in(L, seq_item(L, b, 1), "optimizer.betas[1]", 0.0, 0, 1.0, 1, &s->optimizer.beta2))
            return -1;
    }
    if (v[OP_EPS] && get_double_in(L, v[OP_EPS], "optimizer.eps", 0.0, 1, INFINITY, 0, &s->optimizer.eps))
        return -1;
    if (v[OP_WD] && get_double_in(L, v[OP_WD], "optimizer.weight_decay", 0.0, 0, INFINITY, 0,
                                  &s->optimizer.weight_decay))
        return -1;
    if (v[OP_PARAM] && get_format(L, v[OP_PARAM], "optimizer.param", &s->optimizer.param))
        return -1;
    if (v[OP_MASTER] &&
        get_enum(L, v[OP_MASTER], "optimizer.master", master_names, COUNT(master_names), &s->optimizer.master))
        return -1;
    if (v[OP_STATE] && get_format(L, v[OP_STATE], "optimizer.state", &s->optimizer.state))
        return -1;
    if (v[OP_KAHAN] && get_bool(L, v[OP_KAHAN], "optimizer.kahan", &s->optimizer.kahan))
        return -1;
    if (v[OP_SR] && get_bool(L, v[OP_SR], "optimizer.stochastic", &s->optimizer.stochastic))
        return -1;
    if (v[OP_FUSED] &&
        get_enum(L, v[OP_FUSED], "optimizer.fused", fused_names, COUNT(fused_names), &s->optimizer.fused))
        return -1;
    if (v[OP_EVAL] && get_enum(L, v[OP_EVAL], "optimizer.evaluation", eval_names, COUNT(eval_names),
                               &s->optimizer.evaluation))
        return -1;
    if (s->optimizer.evaluation == 6 && gp_torch_sqrt_host_kernel() == GP_MKL_SQRT_NONE) /* torch_cpu_host */
        return fail(L, v[OP_EVAL], "optimizer.evaluation: torch_cpu_host models torch's x86-64 wheel on this host, %s",
                    GP_TORCH_SQRT_HOST ? "and MKL's sqrt kernel for an Intel CPU without AVX2 and FMA is not modelled"
                                       : "and this is not an x86-64 build");
    /* what the AdamW kernels implement (kernels/arith/gp_adamw.h) */
    if (v[OP_PARAM] && s->optimizer.param != GP_FP32 && s->optimizer.param != GP_BF16 && s->optimizer.param != GP_FP16)
        return fail(L, v[OP_PARAM], "optimizer.param: expected fp32, bf16 or fp16");
    if (v[OP_STATE] && s->optimizer.state != GP_FP32 && s->optimizer.state != GP_BF16 && s->optimizer.state != GP_FP16)
        return fail(L, v[OP_STATE], "optimizer.state: expected fp32, bf16 or fp16");
    if (s->optimizer.kahan && s->optimizer.master)
        return fail(L, v[OP_KAHAN], "optimizer.kahan: Kahan compensation replaces the master copy; drop one");
    if (s->optimizer.kahan && s->optimizer.stochastic)
        return fail(L, v[OP_KAHAN], "optimizer.kahan: the compensated store rounds to nearest, not stochastically");
    if (s->optimizer.fused) { /* torch's fused kernel: one dtype, the param updated in place, RNE */
        if (s->optimizer.master || s->optimizer.kahan || s->optimizer.stochastic)
            return fail(L, v[OP_FUSED], "optimizer.fused: torch's fused AdamW updates the param itself, rounding to "
                                        "nearest (no master, kahan or stochastic); drop one");
        if (!v[OP_STATE])
            s->optimizer.state = s->optimizer.param;
        else if (s->optimizer.state != s->optimizer.param)
            return fail(L, v[OP_STATE], "optimizer.state: torch's fused AdamW keeps m and v in the param's dtype "
                                        "(%s), got %s", gp_format_name(s->optimizer.param),
                        gp_format_name(s->optimizer.state));
    }
    return 0;
}

enum { S_NAME, S_WARMUP, S_TOTAL, S_MINLR, S_STEPSIZE, S_GAMMA, S_N };
static const char *const sched_keys[S_N] = {"name", "warmup", "total", "min_lr", "step_size", "gamma"};

static int parse_schedule(loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *v[S_N], *k[S_N];
    int e = 0;
    if (fields(L, n, "schedule", sched_keys, S_N, v, k))
        return -1;
    if (v[S_NAME]) {
        if (get_enum(L, v[S_NAME], "schedule.name", sched_names, COUNT(sched_names), &e))
            return -1;
        s->schedule.kind = (gp_schedule_kind)e;
    }
    L->sched_name = v[S_NAME];
    if (v[S_WARMUP] && get_int(L, v[S_WARMUP], "schedule.warmup", 0, &s->schedule.warmup))
        return -1;
    if (v[S_TOTAL] && get_int(L, v[S_TOTAL], "schedule.total", 1, &s->schedule.total))
        return -1;
    L->total_given = v[S_TOTAL] != NULL;
    if (v[S_MINLR] && get_double_in(L, v[S_MINLR], "schedule.min_lr", 0.0, 0, INFINITY, 0,
                                    &s->schedule.min_lr))
        return -1;
    if (v[S_STEPSIZE] && get_int(L, v[S_STEPSIZE], "schedule.step_size", 1, &s->schedule.step_size))
        return -1;
    if (v[S_GAMMA] && get_double_in(L, v[S_GAMMA], "schedule.gamma", 0.0, 1, INFINITY, 0,
                                    &s->schedule.gamma))
        return -1;
    return 0;
}

/* thresholds: {METRIC: number, ...}, any finite number. */
static int parse_thresholds(const loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *seen[GP_NMETRICS] = {0};
    if (n->type != YAML_MAPPING_NODE)
        return fail(L, n, "thresholds: expected a mapping of metric names to numbers, got %s", kind(n));
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(L, p->key), *v = node(L, p->value);
        gp_metric m;
        if (k->type != YAML_SCALAR_NODE)
            return fail(L, k, "thresholds: a key must be a metric name, got %s", kind(k));
        if (gp_metric_parse(sval(k), &m) != 0) {
            const char *names[GP_NMETRICS];
            for (int i = 0; i < GP_NMETRICS; i++)
                names[i] = gp_metric_name((gp_metric)i);
            char list[400];
            join(list, sizeof list, names, GP_NMETRICS);
            return fail(L, k, "unknown metric '%.60s' in thresholds (allowed: %s)", sval(k), list);
        }
        if (seen[m])
            return fail(L, k, "duplicate key '%s' in thresholds (first at %lu:%lu)", sval(k),
                        (unsigned long)seen[m]->start_mark.line + 1,
                        (unsigned long)seen[m]->start_mark.column + 1);
        seen[m] = k;
        char path[PATHLEN];
        pathf(path, "threshold for %s", sval(k));
        if (v->type == YAML_MAPPING_NODE) { /* two-sided: {min: X, max: Y}, either optional */
            static const char *const keys[] = {"min", "max"};
            yaml_node_t *bv[2], *bk[2];
            if (fields(L, v, path, keys, 2, bv, bk))
                return -1;
            if (!bv[0] && !bv[1])
                return fail(L, v, "%s: give min, max or both", path);
            if (bv[0] && get_double(L, bv[0], path, &s->thresholds.min[m]))
                return -1;
            if (bv[1] && get_double(L, bv[1], path, &s->thresholds.max[m]))
                return -1;
            s->thresholds.set_min[m] = bv[0] != NULL;
            s->thresholds.set[m] = bv[1] != NULL;
            if (bv[0] && bv[1] && s->thresholds.min[m] > s->thresholds.max[m])
                return fail(L, v, "%s: min %g is above max %g", path, s->thresholds.min[m], s->thresholds.max[m]);
            continue;
        }
        if (get_double(L, v, path, &s->thresholds.max[m]))
            return -1;
        s->thresholds.set[m] = 1;
    }
    return 0;
}

/* exact_metrics: [NAME, ...] — metrics the scenario determines exactly (the gate compares
 * them for equality); each a metric name, once. */
static int parse_exact_metrics(const loader *L, yaml_node_t *n, gp_scenario *s)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(L, n, "exact_metrics: expected a list of metric names, got %s", kind(n));
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        yaml_node_t *v = node(L, *it);
        gp_metric m;
        if (v->type != YAML_SCALAR_NODE || gp_metric_parse(sval(v), &m) != 0) {
            const char *names[GP_NMETRICS];
            for (int i = 0; i < GP_NMETRICS; i++)
                names[i] = gp_metric_name((gp_metric)i);
            char list[400];
            join(list, sizeof list, names, GP_NMETRICS);
            return fail(L, v, "exact_metrics: '%.60s' is not a metric (allowed: %s)",
                        v->type == YAML_SCALAR_NODE ? sval(v) : kind(v), list);
        }
        if (s->exact_metrics[m])
            return fail(L, v, "exact_metrics: '%s' is listed twice", sval(v));
        s->exact_metrics[m] = 1;
    }
    return 0;
}

/* expect: {verdict: pass|warn|fail, mechanism: NAME} — the outcome the scenario must
 * have (an incident it reproduces: verdict fail, naming the mechanism, which is then
 * required). */
static int parse_expect(const loader *L, yaml_node_t *n, gp_scenario *s)
{
    static const char *const keys[] = {"verdict", "mechanism"};
    yaml_node_t *v[2], *k[2];
    const char *t = NULL;
    if (fields(L, n, "expect", keys, 2, v, k))
        return -1;
    if (!v[0])
        return fail(L, n, "expect: the verdict is missing (pass, warn or fail)");
    if (get_string(L, v[0], "expect.verdict", &t))
        return -1;
    if (gp_verdict_parse(t, &s->expect.verdict) != 0)
        return fail(L, v[0], "unknown expect.verdict '%.40s' (allowed: pass, warn, fail)", t);
    if (v[1]) {
        if (get_string(L, v[1], "expect.mechanism", &t))
            return -1;
        if (gp_mechanism_parse(t, &s->expect.mechanism) != 0) {
            const char *names[GP_NMECH];
            for (int i = 0; i < GP_NMECH; i++)
                names[i] = gp_mechanism_name((gp_mechanism)i);
            char list[320];
            join(list, sizeof list, names, GP_NMECH);
            return fail(L, v[1], "unknown expect.mechanism '%.40s' (allowed: %s)", t, list);
        }
        s->expect.has_mechanism = 1;
    } else if (s->expect.verdict == GP_FAIL) {
        return fail(L, n, "expect: a scenario expected to fail must name its mechanism (expect.mechanism)");
    }
    s->expect.set = 1;
    return 0;
}

/* distributed: {world_size, collective, reduce_dtype, average, predivide, no_sync,
 * bucket_elements, normalize, tokens}. Read here; what depends on the batch and the
 * precision is settled by resolve_distributed. */
enum { DI_WORLD, DI_COLL, DI_RDT, DI_AVG, DI_PRE, DI_NOSYNC, DI_BUCKET, DI_NORM, DI_TOKENS, DI_N };
static const char *const dist_keys_[DI_N] = {"world_size", "collective", "reduce_dtype", "average", "predivide",
                                             "no_sync", "bucket_elements", "normalize", "tokens"};

static int parse_distributed(loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t **v = L->dist_v, *k[DI_N];
    int e = 0;
    long long x = 0;
    if (fields(L, n, "distributed", dist_keys_, DI_N, v, k))
        return -1;
    L->dist = n;
    if (v[DI_WORLD] && get_ll(L, v[DI_WORLD], "distributed.world_size", 1, GP_MAX_WORLD, &x))
        return -1;
    s->distributed.world_size = v[DI_WORLD] ? (int)x : 1;
    if (v[DI_COLL]) {
        if (get_enum(L, v[DI_COLL], "distributed.collective", coll_names, COUNT(coll_names), &e))
            return -1;
        s->distributed.collective = (gp_collective)e;
    }
    if (v[DI_RDT]) {
        if (get_format(L, v[DI_RDT], "distributed.reduce_dtype", &s->distributed.reduce_dtype))
            return -1;
        s->distributed.reduce_set = 1;
        if (s->distributed.reduce_dtype == GP_FP8_E4M3 || s->distributed.reduce_dtype == GP_FP8_E5M2)
            return fail(L, v[DI_RDT], "distributed.reduce_dtype must be fp32, bf16 or fp16 (got %s)",
                        gp_format_name(s->distributed.reduce_dtype));
    }
    if (v[DI_AVG]) {
        if (get_enum(L, v[DI_AVG], "distributed.average", avg_names, COUNT(avg_names), &e))
            return -1;
        s->distributed.average = (gp_average)e;
    }
    if (v[DI_PRE] && get_double_in(L, v[DI_PRE], "distributed.predivide", 1.0, 0, (double)GP_MAX_WORLD, 0,
                                   &s->distributed.predivide))
        return -1;
    if (v[DI_NOSYNC] && get_bool(L, v[DI_NOSYNC], "distributed.no_sync", &s->distributed.no_sync))
        return -1;
    if (v[DI_BUCKET] && get_ll(L, v[DI_BUCKET], "distributed.bucket_elements", 1, (long long)GP_MAX_TENSOR_SIZE, &x))
        return -1;
    if (v[DI_BUCKET])
        s->distributed.bucket_elements = (long)x;
    if (v[DI_NORM]) {
        if (get_enum(L, v[DI_NORM], "distributed.normalize", norm_names, COUNT(norm_names), &e))
            return -1;
        s->distributed.normalize = (gp_token_norm)e;
    }
    return 0;
}

/* FSDP's default pre-division factor (torch.distributed.fsdp, _get_gradient_predivide_factor):
 * the largest power of two f dividing W with f * f < W ... doubled while W % f == 0 and
 * W / f > f; the post-division is W / f. */
static double fsdp_predivide(int W)
{
    int f = 1;
    while (W % f == 0 && W / f > f)
        f *= 2;
    return (double)f;
}

/* After the batch and precision: the reduce dtype's default, predivide's default and
 * its consistency with `average`, the per-rank token counts, N over all ranks. */
static int resolve_distributed(loader *L, gp_scenario *s)
{
    yaml_node_t **v = L->dist_v;
    int W = s->distributed.world_size, K = s->batch.microbatches;
    if (!L->dist)
        return 0;
    if ((long long)W * K > GP_MAX_MICROBATCHES)
        return fail(L, v[DI_WORLD] ? v[DI_WORLD] : L->dist, "distributed: world_size %d x %d micro-batches a rank is "
                    "more than %d micro-batches in all", W, K, GP_MAX_MICROBATCHES);
    if (v[DI_PRE] && s->distributed.average != GP_AVG_PRE)
        return fail(L, v[DI_PRE], "distributed.predivide needs average: pre (average is %s)",
                    gp_average_name(s->distributed.average));
    if (v[DI_PRE] && s->distributed.predivide > W)
        return fail(L, v[DI_PRE], "distributed.predivide (%g) must be at most world_size (%d)",
                    s->distributed.predivide, W);
    if (!v[DI_PRE])
        s->distributed.predivide = s->distributed.collective == GP_COLL_REDUCE_SCATTER ? fsdp_predivide(W) : W;
    if (v[DI_NORM] && s->reduction != GP_RED_TOKEN_MEAN)
        return fail(L, v[DI_NORM], "distributed.normalize applies to reduction: token_mean (reduction is %s)",
                    gp_reduction_name(s->reduction));
    for (size_t i = 0; i < s->ntensors; i++)
        if (gp_scenario_distributed(s) &&
            (s->tensors[i].grad.kind == GP_DIST_VALUES || s->tensors[i].grad.kind == GP_DIST_REPLAY))
            return fail(L, L->dist, "distributed: tensors[%zu] has %s gradients; a simulated collective needs "
                        "generated ones (docs/distributed.md)", i,
                        s->tensors[i].grad.kind == GP_DIST_VALUES ? "explicit" : "replayed");
    if (gp_scenario_distributed(s) && s->precision.rounding == GP_ACC_KAHAN)
        return fail(L, L->dist, "distributed: a Kahan-compensated accumulator is not simulated across ranks "
                    "(docs/distributed.md)");
    yaml_node_t *t = v[DI_TOKENS];
    if (!t)
        return 0;
    if (L->tok)
        return fail(L, t, "distributed.tokens gives every rank's counts: leave batch.tokens out");
    if (t->type != YAML_SEQUENCE_NODE || seq_len(t) != (size_t)W)
        return fail(L, t, "distributed.tokens: expected a list of %d entries (one per rank), got %s", W,
                    t->type == YAML_SEQUENCE_NODE ? "another length" : kind(t));
    s->distributed.tokens = malloc((size_t)W * (size_t)K * sizeof *s->distributed.tokens);
    if (!s->distributed.tokens)
        return oom(L, t);
    uint64_t N = 0;
    for (int r = 0; r < W; r++) {
        yaml_node_t *row = seq_item(L, t, (size_t)r);
        char p[PATHLEN];
        long long x = 0;
        for (int k = 0; k < K; k++) {
            yaml_node_t *item = row;
            if (row->type == YAML_SEQUENCE_NODE) {
                if (seq_len(row) != (size_t)K)
                    return fail(L, row, "distributed.tokens[%d] has %zu entries but batch.microbatches is %d", r,
                                seq_len(row), K);
                item = seq_item(L, row, (size_t)k);
                pathf(p, "distributed.tokens[%d][%d]", r, k);
            } else {
                pathf(p, "distributed.tokens[%d]", r);
            }
            if (get_ll(L, item, p, 1, GP_MAX_TOKENS, &x))
                return -1;
            s->distributed.tokens[(size_t)r * (size_t)K + (size_t)k] = (long)x;
            N += (uint64_t)x;
        }
    }
    if (N > INT32_MAX)
        return fail(L, t, "distributed.tokens: the total N = %llu tokens over every rank does not fit in 2^31-1",
                    (unsigned long long)N);
    for (int k = 0; k < K; k++) /* rank 0's counts are the batch's */
        s->batch.tokens[k] = s->distributed.tokens[k];
    return 0;
}

/* ---- the whole document ---- */

enum { K_NAME, K_SEED, K_TENSORS, K_BATCH, K_REDUCTION, K_FULLBATCH, K_PRECISION, K_LOSS_SCALE,
       K_CLIP, K_OPTIMIZER, K_SCHEDULE, K_STEPS, K_THRESHOLDS, K_SWEEP, K_EXPECT, K_SAMPLE, K_DIST,
       K_EXACT, K_N };
static const char *const top_keys[K_N] = {"name", "seed", "tensors", "batch", "reduction",
                                          "fullbatch", "precision", "loss_scale", "clip",
                                          "optimizer", "schedule", "steps", "thresholds", "sweep", "expect",
                                          "sample", "distributed", "exact_metrics"};

/* Replayed tensors: open each dump and check every entry the run will read
 * (KEY/step<S>/mb<K> for every optimizer step and micro-batch, KEY/weight when the
 * weights are replayed): present, one element count, the grad dtype of
 * precision.grad; the tensor's size is the entries' (a written size must agree);
 * sample at most the size. The exact references multiply each entry by an integer
 * (docs/replay.md) that must stay below 2^31. Errors point at the replay key and name
 * the dump, the tensor and the entry. */
static int resolve_replay(loader *L, gp_scenario *s)
{
    for (size_t i = 0; i < s->ntensors; i++) {
        gp_tensor_spec *t = &s->tensors[i];
        if (t->grad.kind != GP_DIST_REPLAY)
            continue;
        gp_replay *r = NULL;
        gp_error e = {""};
        yaml_node_t *at = L->tn[i].grad;
        if (gp_replay_open(t->grad.replay, &r, &e) != 0)
            return fail(L, at, "tensors[%zu] '%s': grad.replay: %s", i, t->name, e.msg);
        uint64_t n = 0;
        int rc = 0;
        char name[GP_NAME_MAX * 4];
        for (int st = 0; st < s->steps && rc == 0; st++)
            for (int k = 0; k < gp_scenario_step_mb(s, st) && rc == 0; k++) {
                gp_replay_entry en;
                snprintf(name, sizeof name, "%s/step%d/mb%d", t->grad.replay_key, st, k);
                if (gp_replay_entry_get(r, name, &en, &e) != 0) {
                    rc = fail(L, at, "tensors[%zu] '%s': %s", i, t->name, e.msg);
                    break;
                }
                if (en.fmt != s->precision.grad)
                    rc = fail(L, at, "tensors[%zu] '%s': %s: entry '%s' is %s but precision.grad is %s (the dump "
                              "holds what the backward wrote: say its dtype)", i, t->name, t->grad.replay, name,
                              gp_format_name(en.fmt), gp_format_name(s->precision.grad));
                else if (st == 0 && k == 0)
                    n = en.n;
                else if (en.n != n)
                    rc = fail(L, at, "tensors[%zu] '%s': %s: entry '%s' has %llu elements, '%s/step0/mb0' has %llu",
                              i, t->name, t->grad.replay, name, (unsigned long long)en.n, t->grad.replay_key,
                              (unsigned long long)n);
                gp_replay_entry_release(&en);
            }
        gp_replay_close(r);
        if (rc)
            return -1;
        if (n == 0 || n > GP_MAX_TENSOR_SIZE)
            return fail(L, at, "tensors[%zu] '%s': %s: entries of %llu elements (1 to %zu replayed)", i, t->name,
                        t->grad.replay, (unsigned long long)n, GP_MAX_TENSOR_SIZE);
        if (L->tn[i].size && t->size != n)
            return fail(L, L->tn[i].size, "tensors[%zu].size is %zu but the dump's entries have %llu elements", i,
                        t->size, (unsigned long long)n);
        t->size = (size_t)n;
        if (t->population && t->population < t->size)
            return fail(L, L->tn[i].population, "tensors[%zu].population is %llu, fewer than the dump's %zu elements "
                        "(population: the elements of the tensor the dump's entries were sampled from)", i,
                        (unsigned long long)t->population, t->size);
        if (t->sample > t->size)
            return fail(L, L->tn[i].sample, "tensors[%zu].sample is %zu, more than the tensor's %zu elements", i,
                        t->sample, t->size);
        if (t->weight.kind == GP_DIST_REPLAY) {
            at = L->tn[i].weight;
            gp_replay_entry en;
            if (gp_replay_open(t->weight.replay, &r, &e) != 0)
                return fail(L, at, "tensors[%zu] '%s': weight.replay: %s", i, t->name, e.msg);
            snprintf(name, sizeof name, "%s/weight", t->weight.replay_key);
            if (gp_replay_entry_get(r, name, &en, &e) != 0)
                rc = fail(L, at, "tensors[%zu] '%s': %s", i, t->name, e.msg);
            else if (en.n != n)
                rc = fail(L, at, "tensors[%zu] '%s': %s: entry '%s' has %llu elements, the gradients %llu", i,
                          t->name, t->weight.replay, name, (unsigned long long)en.n, (unsigned long long)n);
            if (rc == 0)
                gp_replay_entry_release(&en);
            gp_replay_close(r);
            if (rc)
                return -1;
        }
        for (int st = 0; s->reduction == GP_RED_MEAN && st < s->steps; st++)
            for (int k = 0; k < gp_scenario_step_mb(s, st); k++)
                if ((uint64_t)gp_scenario_step_tokens(s, st)[k] * (uint64_t)s->batch.accumulation_steps > INT32_MAX)
                    return fail(L, at, "tensors[%zu]: replaying a `mean` reduction needs batch.tokens[%d] x "
                                "accumulation_steps below 2^31", i, k);
    }
    return 0;
}

/* One entry a carried state or twin needs: present, of format fmt and n elements. */
static int check_carried_entry(const loader *L, yaml_node_t *at, size_t i, const gp_tensor_spec *t, gp_replay *r,
                               const char *file, const char *name, gp_format fmt, const char *fmt_key)
{
    gp_replay_entry en;
    gp_error e = {""};
    int rc = 0;
    if (gp_replay_entry_get(r, name, &en, &e) != 0)
        return fail(L, at, "tensors[%zu] '%s': %s", i, t->name, e.msg);
    if (en.fmt != fmt)
        rc = fail(L, at, "tensors[%zu] '%s': %s: entry '%s' is %s but %s is %s", i, t->name, file, name,
                  gp_format_name(en.fmt), fmt_key, gp_format_name(fmt));
    else if (en.n != t->size)
        rc = fail(L, at, "tensors[%zu] '%s': %s: entry '%s' has %llu elements, the gradients %zu", i, t->name, file,
                  name, (unsigned long long)en.n, t->size);
    gp_replay_entry_release(&en);
    return rc;
}

/* What a capture carries beyond the gradients (tensors[i].state, .twin, .optimizer, the
 * LR of each step): the state's entries KEY/state/exp_avg, exp_avg_sq (optimizer.state's
 * dtype), master (fp32, with optimizer.master); the twin's KEY/step<S>/param (the param's
 * dtype), exp_avg, exp_avg_sq, master for every step; each as many elements as the
 * gradients. lr_steps: one LR per step, with a constant schedule; a tensor's own lr needs
 * its own lr_steps when the scenario gives lr_steps. */
static int resolve_carried(loader *L, gp_scenario *s)
{
    int any_lr_steps = s->optimizer.lr_steps != NULL;
    if (s->optimizer.lr_steps && s->optimizer.nlr_steps != s->steps)
        return fail(L, L->lr_steps, "optimizer.lr_steps has %d entries, steps is %d (one LR per optimizer step)",
                    s->optimizer.nlr_steps, s->steps);
    for (size_t i = 0; i < s->ntensors; i++) {
        gp_tensor_spec *t = &s->tensors[i];
        any_lr_steps |= t->optimizer.lr_steps != NULL;
        if (t->optimizer.lr_steps && t->optimizer.nlr_steps != s->steps)
            return fail(L, L->tn[i].opt_lr_steps, "tensors[%zu].optimizer.lr_steps has %d entries, steps is %d (one "
                        "LR per optimizer step)", i, t->optimizer.nlr_steps, s->steps);
        if (s->optimizer.lr_steps && t->optimizer.set_lr && !t->optimizer.lr_steps)
            return fail(L, L->tn[i].opt_lr, "tensors[%zu].optimizer.lr: optimizer.lr_steps gives every step's LR; "
                        "give this tensor's own lr_steps", i);
    }
    if (any_lr_steps && s->schedule.kind != GP_SCHED_CONSTANT)
        return fail(L, L->sched_name, "schedule.name is %s but lr_steps gives the LR of every step (it replaces lr x "
                    "schedule): drop one", gp_schedule_name(s->schedule.kind));
    char name[GP_NAME_MAX * 4];
    for (size_t i = 0; i < s->ntensors; i++) {
        gp_tensor_spec *t = &s->tensors[i];
        gp_replay *r = NULL;
        gp_error e = {""};
        int rc = 0;
        if (t->state.replay) {
            yaml_node_t *at = L->tn[i].state;
            if (s->optimizer.kahan)
                return fail(L, at, "tensors[%zu].state: optimizer.kahan keeps a compensation no entry of the dump "
                            "holds (torch's AdamW has none)", i);
            if (gp_replay_open(t->state.replay, &r, &e) != 0)
                return fail(L, at, "tensors[%zu] '%s': state.replay: %s", i, t->name, e.msg);
            const char *const nm[3] = {"exp_avg", "exp_avg_sq", "master"};
            for (int q = 0; q < (s->optimizer.master ? 3 : 2) && rc == 0; q++) {
                snprintf(name, sizeof name, "%s/state/%s", t->state.key, nm[q]);
                rc = check_carried_entry(L, at, i, t, r, t->state.replay, name, q < 2 ? s->optimizer.state : GP_FP32,
                                         q < 2 ? "optimizer.state" : "the fp32 master");
            }
            gp_replay_close(r);
            if (rc)
                return -1;
        }
        if (t->twin.replay) {
            yaml_node_t *at = L->tn[i].twin;
            if (gp_replay_open(t->twin.replay, &r, &e) != 0)
                return fail(L, at, "tensors[%zu] '%s': twin.replay: %s", i, t->name, e.msg);
            const char *const nm[4] = {"param", "exp_avg", "exp_avg_sq", "master"};
            const gp_format f[4] = {s->optimizer.param, s->optimizer.state, s->optimizer.state, GP_FP32};
            const char *const fk[4] = {"optimizer.param", "optimizer.state", "optimizer.state", "the fp32 master"};
            for (int st = 0; st < s->steps && rc == 0; st++)
                for (int q = 0; q < (s->optimizer.master ? 4 : 3) && rc == 0; q++) {
                    snprintf(name, sizeof name, "%s/step%d/%s", t->twin.key, st, nm[q]);
                    rc = check_carried_entry(L, at, i, t, r, t->twin.replay, name, f[q], fk[q]);
                }
            gp_replay_close(r);
            if (rc)
                return -1;
        }
    }
    return 0;
}

/* The run's memory (the configuration's real bytes per element) and total work fit. */
static int check_size(const loader *L, yaml_node_t *root, yaml_node_t *tensors, yaml_node_t *steps,
                      const gp_scenario *s)
{
    uint64_t elems = 0; /* what the run holds: the sampled elements of a sampled tensor */
    for (size_t t = 0; t < s->ntensors; t++)
        elems += gp_run_tensor_elements(s, t);
    uint64_t bpe = gp_run_bytes_per_element(s) + 4; /* + the generated fp32 gradient */
    if (elems > GP_MAX_RUN_BYTES / bpe)
        return fail(L, tensors ? tensors : root,
                    "tensors: %llu elements at %llu bytes each for this configuration (steps > 1 keeps the "
                    "optimizer state, clipping or loss scaling the whole step) need %.1f GiB: more than the "
                    "limit of 64 GiB", (unsigned long long)elems, (unsigned long long)bpe,
                    (double)elems * (double)bpe / 1073741824.0);
    uint64_t work = gp_run_work(s);
    if (work > GP_MAX_WORK)
        return fail(L, steps ? steps : tensors ? tensors : root,
                    "the run would take %.3g element-accumulations (steps %d x (%llu elements x %d micro-batches "
                    "+ %d)): more than the limit of 2^40 (docs/limits.md)", (double)work, s->steps,
                    (unsigned long long)elems, s->batch.microbatches, GP_RUN_STEP_OVERHEAD);
    return 0;
}

static int parse_scenario(loader *L, yaml_node_t *root, gp_scenario *s)
{
    yaml_node_t *v[K_N], *k[K_N];
    int e = 0;
    if (fields(L, root, "", top_keys, K_N, v, k))
        return -1;
    if (v[K_SWEEP] && !L->sweep_ok)
        return fail(L, k[K_SWEEP], "sweep: this file declares a sweep (several scenarios); `gradprec run` "
                    "expands it (gp_scenario_load_all_*)");
    if (v[K_NAME] && get_name(L, v[K_NAME], "name", s->name))
        return -1;
    if (v[K_SEED] && get_u64(L, v[K_SEED], "seed", &s->seed))
        return -1;
    if (v[K_STEPS] && get_int(L, v[K_STEPS], "steps", 1, &s->steps))
        return -1;
    long long sample = 0;
    if (v[K_SAMPLE] && get_ll(L, v[K_SAMPLE], "sample", 1, (long long)GP_MAX_WORK, &sample))
        return -1;
    s->sample = (uint64_t)sample;
    if (v[K_BATCH] && parse_batch(L, v[K_BATCH], s))
        return -1;
    if (v[K_TENSORS]) {
        if (parse_tensors(L, v[K_TENSORS], s))
            return -1;
    } else { /* one tensor "grad" of 1024 elements */
        s->tensors = malloc(sizeof *s->tensors);
        L->vnodes = calloc(1, sizeof *L->vnodes);
        if (!s->tensors || !L->vnodes)
            return oom(L, root);
        tensor_init(&s->tensors[0], "grad");
        s->ntensors = 1;
    }
    if (v[K_REDUCTION]) {
        if (get_enum(L, v[K_REDUCTION], "reduction", red_names, COUNT(red_names), &e))
            return -1;
        s->reduction = (gp_reduction)e;
    }
    if (v[K_FULLBATCH]) {
        if (get_enum(L, v[K_FULLBATCH], "fullbatch", fb_names, COUNT(fb_names), &e))
            return -1;
        s->fullbatch = (gp_fullbatch)e;
    }
    if (v[K_PRECISION] && parse_precision(L, v[K_PRECISION], s))
        return -1;
    if (v[K_LOSS_SCALE] && parse_loss_scale(L, v[K_LOSS_SCALE], s))
        return -1;
    if (v[K_CLIP] && parse_clip(L, v[K_CLIP], s))
        return -1;
    if (v[K_OPTIMIZER] && parse_optimizer(L, v[K_OPTIMIZER], s))
        return -1;
    if (v[K_SCHEDULE] && parse_schedule(L, v[K_SCHEDULE], s))
        return -1;
    if (!L->total_given)
        s->schedule.total = s->steps;
    if (v[K_THRESHOLDS] && parse_thresholds(L, v[K_THRESHOLDS], s))
        return -1;
    if (v[K_EXACT] && parse_exact_metrics(L, v[K_EXACT], s))
        return -1;
    if (v[K_EXPECT] && parse_expect(L, v[K_EXPECT], s))
        return -1;
    if (v[K_DIST] && parse_distributed(L, v[K_DIST], s))
        return -1;
    if (resolve_batch(L, root, s))
        return -1;
    if (resolve_distributed(L, s))
        return -1;
    if (resolve_replay(L, s))
        return -1;
    if (resolve_carried(L, s))
        return -1;
    if (s->thresholds.set[GP_M_TWIN_MISMATCH_COUNT] && !gp_scenario_has_twin(s))
        return fail(L, v[K_THRESHOLDS], "thresholds.twin_mismatch_count: no tensor has a `twin` (torch's state after "
                    "each step) to compare with");
    if (s->loss_scale.nreplay_scales) {
        int replayed = 0;
        for (size_t i = 0; i < s->ntensors; i++)
            replayed |= s->tensors[i].grad.kind == GP_DIST_REPLAY;
        if (!replayed)
            return fail(L, v[K_LOSS_SCALE], "loss_scale.replay_scales: no tensor is replayed (the scales the "
                        "dump's entries carry)");
        if (s->loss_scale.nreplay_scales != s->steps)
            return fail(L, v[K_LOSS_SCALE], "loss_scale.replay_scales has %d entries, steps is %d (one scale per "
                        "optimizer step)", s->loss_scale.nreplay_scales, s->steps);
    }
    return check_size(L, root, v[K_TENSORS], v[K_STEPS], s);
}

/* libyaml's own diagnosis, with its mark (reader errors carry a byte offset). */
static int parser_error(const yaml_parser_t *p, const char *origin, const char *text, size_t len,
                        gp_error *err)
{
    const char *problem = p->problem ? p->problem : "invalid YAML";
    if (p->error == YAML_MEMORY_ERROR)
        return gp_error_set(err, "%s: out of memory while reading YAML", origin);
    if (p->error == YAML_READER_ERROR) {
        unsigned long line = 1, col = 1;
        for (size_t i = 0; i < p->problem_offset && i < len; i++, col++)
            if (text[i] == '\n') {
                line++;
                col = 0;
            }
        if (p->problem_value != -1)
            return gp_error_set(err, "%s:%lu:%lu: %s (byte 0x%02x)", origin, line, col, problem,
                                (unsigned)p->problem_value & 0xffu);
        return gp_error_set(err, "%s:%lu:%lu: %s", origin, line, col, problem);
    }
    unsigned long line = (unsigned long)p->problem_mark.line + 1;
    unsigned long col = (unsigned long)p->problem_mark.column + 1;
    if (p->context)
        return gp_error_set(err, "%s:%lu:%lu: %s (%s at %lu:%lu)", origin, line, col, problem,
                            p->context, (unsigned long)p->context_mark.line + 1,
                            (unsigned long)p->context_mark.column + 1);
    return gp_error_set(err, "%s:%lu:%lu: %s", origin, line, col, problem);
}

/* Parse text into *doc: exactly one document with something in it. Returns 0 (the caller
 * deletes *doc), or -1 with err set. */
static int read_doc(const char *text, size_t len, const char *origin, yaml_document_t *doc, gp_error *err)
{
    yaml_parser_t parser;
    yaml_document_t extra;
    int rc = -1;
    if (gp_yaml_precheck(text, len, origin, NULL, err) < 0) /* depth, aliases, tree size */
        return -1;
    if (!yaml_parser_initialize(&parser))
        return gp_error_set(err, "%s: out of memory while reading YAML", origin);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, doc)) {
        parser_error(&parser, origin, text, len, err);
        yaml_parser_delete(&parser);
        return -1;
    }
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root || (root->type == YAML_SCALAR_NODE && root->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                  is_null(sval(root)))) {
        gp_error_set(err, "%s:1:1: the scenario is empty (expected a mapping of scenario keys)", origin);
    } else if (!yaml_parser_load(&parser, &extra)) { /* the rest of the stream must be clean */
        parser_error(&parser, origin, text, len, err);
    } else {
        yaml_node_t *r2 = yaml_document_get_root_node(&extra);
        loader L2 = {.origin = origin, .doc = &extra, .err = err};
        if (r2)
            fail(&L2, r2, "only one YAML document is allowed in a scenario");
        else
            rc = 0;
        yaml_document_delete(&extra);
    }
    yaml_parser_delete(&parser);
    if (rc)
        yaml_document_delete(doc);
    return rc;
}

/* The scenario of a parsed document (named default_name unless it says otherwise). */
static int parse_doc(yaml_document_t *doc, const char *origin, const char *dir, const char *default_name,
                     int sweep_ok, gp_scenario *s, gp_error *err)
{
    gp_scenario t;
    loader L;
    gp_scenario_init(&t);
    snprintf(t.name, sizeof t.name, "%s", default_name);
    memset(&L, 0, sizeof L);
    L.origin = origin;
    L.dir = dir;
    L.doc = doc;
    L.err = err;
    L.sweep_ok = sweep_ok;
    int rc = parse_scenario(&L, yaml_document_get_root_node(doc), &t);
    free(L.vnodes);
    free(L.name_nodes);
    free(L.tn);
    if (rc) {
        gp_scenario_free(&t);
        return -1;
    }
    *s = t;
    return 0;
}

static int load(const char *text, size_t len, const char *origin, const char *dir, const char *default_name,
                gp_scenario *s, gp_error *err)
{
    yaml_document_t doc;
    gp_scenario_init(s);
    if (!text)
        text = "";
    if (read_doc(text, len, origin, &doc, err) != 0)
        return -1;
    int rc = parse_doc(&doc, origin, dir, default_name, 0, s, err);
    yaml_document_delete(&doc);
    if (rc == 0 && err)
        err->msg[0] = '\0';
    return rc;
}

/* ---- sweeps ---- */

typedef struct {
    int keyn;                               /* node index of the key (for messages) */
    int nkeys;                              /* keys swept together */
    char key[GP_SWEEP_MAX_ZIP][GP_SWEEP_TEXT];
    int nv;
    int value[GP_SWEEP_MAX_VALUES][GP_SWEEP_MAX_ZIP]; /* node indices of the values */
    char text[GP_SWEEP_MAX_VALUES][GP_SWEEP_MAX_ZIP][GP_SWEEP_TEXT];
} sweep_axis;

static yaml_node_pair_t *find_pair(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        if (k->type == YAML_SCALAR_NODE && strcmp(sval(k), key) == 0)
            return p;
    }
    return NULL;
}

/* A swept key: NAME or NAME[INDEX] components joined by '.', names of [A-Za-z0-9_]. */
static int sweep_key_ok(const char *k)
{
    int need_name = 1;
    for (const char *p = k; *p; p++) {
        if (isalnum((unsigned char)*p) || *p == '_') {
            need_name = 0;
        } else if (*p == '.' && !need_name) {
            need_name = 1;
        } else if (*p == '[' && !need_name && isdigit((unsigned char)p[1])) {
            p++;
            while (isdigit((unsigned char)*p))
                p++;
            if (*p != ']' || (p[1] && p[1] != '.'))
                return 0;
        } else {
            return 0;
        }
    }
    return !need_name;
}

/* Check one key node of a sweep (a scalar path) against the keys seen so far. */
static int sweep_key(const loader *L, const yaml_node_t *k, const sweep_axis *ax, int na, const sweep_axis *cur)
{
    if (k->type != YAML_SCALAR_NODE || !sweep_key_ok(sval(k)) || strlen(sval(k)) >= GP_SWEEP_TEXT)
        return fail(L, k, "sweep: a key must be a dotted path such as batch.accumulation_steps or "
                    "tensors[0].grad.scale (at most %d bytes), or a list of such keys", GP_SWEEP_TEXT - 1);
    if (strcmp(sval(k), "sweep") == 0 || strncmp(sval(k), "sweep.", 6) == 0 || strcmp(sval(k), "name") == 0)
        return fail(L, k, "sweep: '%s' cannot be swept", sval(k));
    for (int a = 0; a <= na; a++) {
        const sweep_axis *A = a < na ? &ax[a] : cur;
        for (int j = 0; j < A->nkeys; j++)
            if (strcmp(A->key[j], sval(k)) == 0)
                return fail(L, k, "sweep: duplicate key '%s'", sval(k));
    }
    return 0;
}

/* The document's `sweep:` as axes (*na = 0 when it has none), and the number of points. */
static int sweep_axes(yaml_document_t *doc, const char *origin, sweep_axis *ax, int *na, size_t *npoints,
                      gp_error *err)
{
    loader L = {.origin = origin, .doc = doc, .err = err};
    yaml_node_t *root = yaml_document_get_root_node(doc);
    int nkeys = 0;
    *na = 0;
    *npoints = 1;
    if (root->type != YAML_MAPPING_NODE)
        return 0; /* parse_doc says what is wrong */
    yaml_node_pair_t *sp = find_pair(doc, root, "sweep");
    if (!sp)
        return 0;
    yaml_node_t *m = node(&L, sp->value);
    if (m->type != YAML_MAPPING_NODE || m->data.mapping.pairs.top == m->data.mapping.pairs.start)
        return fail(&L, m, "sweep: expected a mapping of keys to lists of values, e.g. "
                    "{batch.accumulation_steps: [1, 2, 4], reduction: [mean, token_mean]}");
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(&L, p->key), *v = node(&L, p->value);
        if (*na == GP_SWEEP_MAX_AXES)
            return fail(&L, k, "sweep: at most %d axes can be crossed", GP_SWEEP_MAX_AXES);
        sweep_axis *A = &ax[*na];
        A->keyn = p->key;
        A->nkeys = 0;
        int zip = k->type == YAML_SEQUENCE_NODE;
        size_t nk = zip ? seq_len(k) : 1;
        if (nk == 0 || nk > GP_SWEEP_MAX_ZIP || nkeys + (int)nk > GP_SWEEP_MAX_KEYS)
            return fail(&L, k, "sweep: 1 to %d keys an axis, %d in all", GP_SWEEP_MAX_ZIP, GP_SWEEP_MAX_KEYS);
        for (size_t j = 0; j < nk; j++) {
            yaml_node_t *kj = zip ? seq_item(&L, k, j) : k;
            if (sweep_key(&L, kj, ax, *na, A))
                return -1;
            snprintf(A->key[A->nkeys++], GP_SWEEP_TEXT, "%s", sval(kj));
        }
        nkeys += A->nkeys;
        size_t nv = v->type == YAML_SEQUENCE_NODE ? seq_len(v) : 0;
        if (nv == 0 || nv > GP_SWEEP_MAX_VALUES)
            return fail(&L, v, "sweep: %s: expected a list of 1 to %d values", A->key[0], GP_SWEEP_MAX_VALUES);
        A->nv = (int)nv;
        for (size_t i = 0; i < nv; i++) {
            yaml_node_t *x = seq_item(&L, v, i);
            if (zip && (x->type != YAML_SEQUENCE_NODE || seq_len(x) != nk))
                return fail(&L, x, "sweep: %s...: each value must be a list of %zu values, one for each key", A->key[0],
                            nk);
            for (size_t j = 0; j < nk; j++) {
                yaml_node_t *xj = zip ? seq_item(&L, x, j) : x;
                if (xj->type != YAML_SCALAR_NODE || strlen(sval(xj)) >= GP_SWEEP_TEXT)
                    return fail(&L, xj, "sweep: %s: each value must be a scalar of at most %d bytes", A->key[j],
                                GP_SWEEP_TEXT - 1);
                A->value[i][j] = zip ? x->data.sequence.items.start[j] : v->data.sequence.items.start[i];
                snprintf(A->text[i][j], GP_SWEEP_TEXT, "%s", sval(xj));
            }
        }
        (*na)++;
        *npoints *= nv;
        if (*npoints > GP_SWEEP_MAX_POINTS)
            return fail(&L, v, "sweep: %zu points or more (at most %d)", *npoints, GP_SWEEP_MAX_POINTS);
    }
    return 0;
}

/* Put value node `value` at key j of axis A, creating mappings that are missing. */
static int sweep_apply(yaml_document_t *doc, const char *origin, const sweep_axis *A, int j, int value,
                       gp_error *err)
{
    loader L = {.origin = origin, .doc = doc, .err = err};
    yaml_mark_t mark = node(&L, A->keyn)->start_mark;
    int cur = 1; /* the root */
    const char *key = A->key[j], *p = key;
    while (*p) {
        char comp[GP_SWEEP_TEXT];
        size_t c = 0;
        while (*p && *p != '.' && *p != '[')
            comp[c++] = *p++;
        comp[c] = '\0';
        long idx = -1;
        if (*p == '[') {
            idx = strtol(p + 1, (char **)&p, 10);
            p++; /* ']' */
        }
        int last = *p == '\0';
        if (*p == '.')
            p++;
        yaml_node_t *m = node(&L, cur);
        if (m->type != YAML_MAPPING_NODE)
            return fail(&L, node(&L, A->keyn), "sweep: %s: '%s' is inside %s, not a mapping", key, comp, kind(m));
        yaml_node_pair_t *pair = find_pair(doc, m, comp);
        if (!pair) {
            if (idx >= 0)
                return fail(&L, node(&L, A->keyn), "sweep: %s: the file has no list '%s'", key, comp);
            int kn = yaml_document_add_scalar(doc, NULL, (yaml_char_t *)comp, -1, YAML_PLAIN_SCALAR_STYLE);
            int vn = last ? value : yaml_document_add_mapping(doc, NULL, YAML_FLOW_MAPPING_STYLE);
            if (!kn || !vn || !yaml_document_append_mapping_pair(doc, cur, kn, vn))
                return oom(&L, node(&L, A->keyn));
            node(&L, kn)->start_mark = mark;
            node(&L, vn)->start_mark = last ? node(&L, vn)->start_mark : mark;
            cur = vn;
        } else if (idx < 0) {
            if (last)
                pair->value = value;
            cur = pair->value;
        } else {
            yaml_node_t *sq = node(&L, pair->value);
            if (sq->type != YAML_SEQUENCE_NODE || (size_t)idx >= seq_len(sq))
                return fail(&L, node(&L, A->keyn), "sweep: %s: '%s' has no item %ld", key, comp, idx);
            if (last)
                sq->data.sequence.items.start[idx] = value;
            cur = sq->data.sequence.items.start[idx];
        }
    }
    return 0;
}

static void free_all(gp_scenario *arr, size_t n)
{
    for (size_t i = 0; arr && i < n; i++)
        gp_scenario_free(&arr[i]);
    free(arr);
}

/* The bytes a loaded scenario holds (for the bound on a sweep's points). */
static size_t scenario_bytes(const gp_scenario *s)
{
    size_t b = sizeof *s + s->ntensors * sizeof *s->tensors + (size_t)s->batch.microbatches * sizeof(long);
    for (size_t t = 0; t < s->ntensors; t++) {
        for (size_t k = 0; k < s->tensors[t].grad.nmb; k++)
            b += s->tensors[t].grad.ntok[k] * sizeof(double) + sizeof(double *) + sizeof(size_t);
        b += (size_t)s->tensors[t].optimizer.nlr_steps * sizeof(double);
    }
    for (int st = 0; s->batch.step_mb && st < s->steps; st++) /* per-step token counts */
        b += (size_t)s->batch.step_mb[st] * sizeof(long) + sizeof(long *) + sizeof(int);
    return b + (size_t)s->optimizer.nlr_steps * sizeof(double);
}

static int load_all(const char *text, size_t len, const char *origin, const char *dir, const char *default_name,
                    gp_scenario **out,
                    size_t *n, gp_error *err)
{
    yaml_document_t doc;
    *out = NULL;
    *n = 0;
    if (!text)
        text = "";
    if (read_doc(text, len, origin, &doc, err) != 0)
        return -1;
    sweep_axis *ax = calloc(GP_SWEEP_MAX_AXES, sizeof *ax);
    int na = 0;
    size_t np = 1;
    gp_scenario *arr = NULL;
    int rc = -1;
    if (!ax) {
        gp_error_set(err, "%s: out of memory", origin);
    } else if (sweep_axes(&doc, origin, ax, &na, &np, err) == 0 && (arr = calloc(np, sizeof *arr)) != NULL) {
        if (na == 0) {
            rc = parse_doc(&doc, origin, dir, default_name, 0, &arr[0], err);
        } else {
            rc = 0;
            for (size_t c = 0; c < np && rc == 0; c++) {
                yaml_document_t d2;
                size_t pick[GP_SWEEP_MAX_AXES], rest = c;
                for (int a = na - 1; a >= 0; a--) { /* the last key varies fastest */
                    pick[a] = rest % (size_t)ax[a].nv;
                    rest /= (size_t)ax[a].nv;
                }
                if ((rc = read_doc(text, len, origin, &d2, err)) != 0)
                    break;
                for (int a = 0; a < na && rc == 0; a++)
                    for (int j = 0; j < ax[a].nkeys && rc == 0; j++)
                        rc = sweep_apply(&d2, origin, &ax[a], j, ax[a].value[pick[a]][j], err);
                if (rc == 0)
                    rc = parse_doc(&d2, origin, dir, default_name, 1, &arr[c], err);
                if (rc == 0 && c == 0 && (double)np * (double)scenario_bytes(&arr[0]) >
                                             (double)GP_YAML_TREE_FACTOR * (double)len + (double)GP_YAML_TREE_SLACK) {
                    loader L = {.origin = origin, .doc = &d2, .err = err};
                    rc = fail(&L, node(&L, ax[0].keyn), "sweep: %zu points of %zu bytes each would hold more than "
                              "%d times the file's size plus 16 MiB (docs/limits.md)", np, scenario_bytes(&arr[0]),
                              GP_YAML_TREE_FACTOR);
                }
                if (rc == 0) {
                    gp_scenario *s = &arr[c];
                    char name[4 * GP_NAME_MAX];
                    size_t off = (size_t)snprintf(name, sizeof name, "%s[", s->name);
                    memcpy(s->sweep.group, s->name, sizeof s->sweep.group);
                    s->sweep.naxes = na;
                    for (int a = 0; a < na; a++)
                        for (int j = 0; j < ax[a].nkeys; j++) {
                            int q = s->sweep.nkeys++;
                            s->sweep.axis[q] = a;
                            memcpy(s->sweep.key[q], ax[a].key[j], GP_SWEEP_TEXT);
                            memcpy(s->sweep.value[q], ax[a].text[pick[a]][j], GP_SWEEP_TEXT);
                            off += (size_t)snprintf(name + off, sizeof name - off, "%s%s=%s", q ? ", " : "",
                                                    ax[a].key[j], ax[a].text[pick[a]][j]);
                        }
                    snprintf(name + off, sizeof name - off, "]");
                    if (strlen(name) >= GP_NAME_MAX) {
                        loader L = {.origin = origin, .doc = &d2, .err = err};
                        rc = fail(&L, node(&L, ax[0].keyn), "sweep: the point's name '%.40s...' is longer than %d "
                                  "bytes: shorten the scenario's name", name, GP_NAME_MAX - 1);
                    } else {
                        memcpy(s->name, name, strlen(name) + 1);
                    }
                }
                yaml_document_delete(&d2);
            }
        }
    } else if (!arr && ax && err && !err->msg[0]) {
        gp_error_set(err, "%s: out of memory", origin);
    }
    free(ax);
    yaml_document_delete(&doc);
    if (rc != 0) {
        free_all(arr, np);
        return -1;
    }
    *out = arr;
    *n = np;
    if (err)
        err->msg[0] = '\0';
    return 0;
}

int gp_scenario_load_string(const char *text, size_t len, const char *origin, gp_scenario *s,
                            gp_error *err)
{
    return load(text, len, origin, "", "scenario", s, err);
}

/* The default name of a scenario file: its basename without .yaml / .yml. */
static void file_default_name(const char *path, char *name)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".yaml"))
        n -= 5;
    else if (n > 4 && !strcmp(base + n - 4, ".yml"))
        n -= 4;
    if (n >= GP_NAME_MAX)
        n = GP_NAME_MAX - 1;
    memcpy(name, base, n);
    name[n] = '\0';
    if (!n)
        snprintf(name, GP_NAME_MAX, "scenario");
}

/* The folder of a scenario file, against which replay paths resolve ("" for a bare name:
 * the current folder; "/" for a file in the root). */
static void file_dir(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (slash && n == 0)
        n = 1;
    if (n >= cap)
        n = cap - 1;
    memcpy(dir, path, n);
    dir[n] = '\0';
}

/* Read a scenario file, its default name and its folder (NULL with err when unreadable). */
static char *read_scenario_file(const char *path, size_t *len, char *name, char *dir, size_t dircap, gp_error *err)
{
    char *text = gp_file_read(path, GP_FILE_MAX_SCENARIO, len, err);
    if (text) {
        file_default_name(path, name);
        file_dir(path, dir, dircap);
    }
    return text;
}

int gp_scenario_load_file(const char *path, gp_scenario *s, gp_error *err)
{
    gp_scenario_init(s);
    size_t len;
    char name[GP_NAME_MAX], dir[4096];
    char *text = read_scenario_file(path, &len, name, dir, sizeof dir, err);
    if (!text)
        return -1;
    int rc = load(text, len, path, dir, name, s, err);
    free(text);
    return rc;
}

int gp_scenario_load_all_string(const char *text, size_t len, const char *origin, gp_scenario **out, size_t *n,
                                gp_error *err)
{
    return load_all(text, len, origin, "", "scenario", out, n, err);
}

int gp_scenario_load_all_file(const char *path, gp_scenario **out, size_t *n, gp_error *err)
{
    *out = NULL;
    *n = 0;
    size_t len;
    char name[GP_NAME_MAX], dir[4096];
    char *text = read_scenario_file(path, &len, name, dir, sizeof dir, err);
    if (!text)
        return -1;
    int rc = load_all(text, len, path, dir, name, out, n, err);
    free(text);
    return rc;
}

/* ---- writing YAML back ---- */

/* The shortest of %.15g/%.16g/%.17g that reads back to the same bits (so 0.9 stays
 * "0.9"); %.17g always does. */
static void put_double(gp_buf *b, double x)
{
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        double y = strtod(buf, NULL);
        if (memcmp(&x, &y, sizeof x) == 0)
            break;
    }
    gp_buf_printf(b, "%s", buf);
}

/* A double-quoted YAML string. */
static void put_string(gp_buf *b, const char *s)
{
    gp_buf_printf(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            gp_buf_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            gp_buf_printf(b, "\\x%02x", c);
        else
            gp_buf_printf(b, "%c", c);
    }
    gp_buf_printf(b, "\"");
}

static void put_key_double(gp_buf *b, const char *indent, const char *key, double x)
{
    gp_buf_printf(b, "%s%s: ", indent, key);
    put_double(b, x);
    gp_buf_printf(b, "\n");
}

static void put_dist(gp_buf *b, const char *key, const gp_dist *d, int is_grad)
{
    gp_buf_printf(b, "    %s:\n", key);
    if (d->kind == GP_DIST_VALUES && is_grad) {
        gp_buf_printf(b, "      values:\n");
        for (size_t k = 0; k < d->nmb; k++) {
            gp_buf_printf(b, "        - [");
            for (size_t t = 0; t < d->ntok[k]; t++) {
                if (t)
                    gp_buf_printf(b, ", ");
                put_double(b, d->values[k][t]);
            }
            gp_buf_printf(b, "]\n");
        }
        return;
    }
    if (d->kind == GP_DIST_REPLAY) {
        gp_buf_printf(b, "      replay: ");
        put_string(b, d->replay);
        gp_buf_printf(b, "\n      key: ");
        put_string(b, d->replay_key);
        gp_buf_printf(b, "\n");
        return;
    }
    gp_buf_printf(b, "      dist: %s\n", enum_name(dist_names, COUNT(dist_names), (int)d->kind));
    put_key_double(b, "      ", "scale", d->scale);
    put_key_double(b, "      ", "sigma", d->sigma);
    put_key_double(b, "      ", "alpha", d->alpha);
    put_key_double(b, "      ", "sign", d->neg_frac);
    put_key_double(b, "      ", "sparsity", d->sparsity);
    gp_buf_printf(b, "      outliers:\n");
    put_key_double(b, "        ", "frac", d->outlier_frac);
    put_key_double(b, "        ", "scale", d->outlier_scale);
    put_key_double(b, "      ", "shrink", d->shrink);
    if (d->token_snr > 0)
        put_key_double(b, "      ", "token_snr", d->token_snr);
}

static const char *bool_name(int v)
{
    return v ? "true" : "false";
}

/* "[a, b, c]" of n doubles, each read back to the same bits. */
static void put_list(gp_buf *b, const double *x, int n)
{
    gp_buf_printf(b, "[");
    for (int i = 0; i < n; i++) {
        if (i)
            gp_buf_printf(b, ", ");
        put_double(b, x[i]);
    }
    gp_buf_printf(b, "]");
}

/* A tensor's state, twin and optimizer overrides (what a capture carries). */
static void put_carried(gp_buf *b, const gp_tensor_spec *t)
{
    if (t->state.replay) {
        gp_buf_printf(b, "    state:\n      replay: ");
        put_string(b, t->state.replay);
        gp_buf_printf(b, "\n      key: ");
        put_string(b, t->state.key);
        gp_buf_printf(b, "\n      step: %ld\n", t->state.step);
    }
    if (t->twin.replay) {
        gp_buf_printf(b, "    twin:\n      replay: ");
        put_string(b, t->twin.replay);
        gp_buf_printf(b, "\n      key: ");
        put_string(b, t->twin.key);
        gp_buf_printf(b, "\n");
    }
    if (t->optimizer.set_lr || t->optimizer.set_wd || t->optimizer.lr_steps) {
        gp_buf_printf(b, "    optimizer:\n");
        if (t->optimizer.set_lr)
            put_key_double(b, "      ", "lr", t->optimizer.lr);
        if (t->optimizer.lr_steps) {
            gp_buf_printf(b, "      lr_steps: ");
            put_list(b, t->optimizer.lr_steps, t->optimizer.nlr_steps);
            gp_buf_printf(b, "\n");
        }
        if (t->optimizer.set_wd)
            put_key_double(b, "      ", "weight_decay", t->optimizer.weight_decay);
    }
}

char *gp_scenario_to_yaml(const gp_scenario *s)
{
    gp_buf b = GP_BUF_INIT;
    gp_buf_printf(&b, "name: ");
    put_string(&b, s->name);
    gp_buf_printf(&b, "\nseed: %llu\n", (unsigned long long)s->seed);
    if (s->sample)
        gp_buf_printf(&b, "sample: %llu\n", (unsigned long long)s->sample);
    if (s->ntensors) {
        gp_buf_printf(&b, "tensors:\n");
        for (size_t i = 0; i < s->ntensors; i++) {
            const gp_tensor_spec *t = &s->tensors[i];
            gp_buf_printf(&b, "  - name: ");
            put_string(&b, t->name);
            gp_buf_printf(&b, "\n    size: %zu\n", t->size);
            if (t->sample)
                gp_buf_printf(&b, "    sample: %zu\n", t->sample);
            if (t->population)
                gp_buf_printf(&b, "    population: %llu\n", (unsigned long long)t->population);
            put_dist(&b, "grad", &t->grad, 1);
            put_dist(&b, "weight", &t->weight, 0);
            put_carried(&b, t);
        }
    }
    gp_buf_printf(&b, "batch:\n  accumulation_steps: %d\n  microbatches: %d\n", s->batch.accumulation_steps,
        s->batch.microbatches);
    if (s->batch.step_tokens) {
        gp_buf_printf(&b, "  tokens:\n");
        for (int st = 0; st < s->steps; st++) {
            gp_buf_printf(&b, "    - [");
            for (int k = 0; k < s->batch.step_mb[st]; k++)
                gp_buf_printf(&b, "%s%ld", k ? ", " : "", s->batch.step_tokens[st][k]);
            gp_buf_printf(&b, "]\n");
        }
    } else if (s->batch.tokens && !(s->distributed.tokens && gp_scenario_distributed(s))) {
        gp_buf_printf(&b, "  tokens: [");
        for (int k = 0; k < s->batch.microbatches; k++)
            gp_buf_printf(&b, "%s%ld", k ? ", " : "", s->batch.tokens[k]);
        gp_buf_printf(&b, "]\n");
    }
    gp_buf_printf(&b, "reduction: %s\n", enum_name(red_names, COUNT(red_names), (int)s->reduction));
    gp_buf_printf(&b, "fullbatch: %s\n", enum_name(fb_names, COUNT(fb_names), (int)s->fullbatch));
    gp_buf_printf(&b, "precision:\n  grad: %s\n  accumulator: %s\n  rounding: %s\n  ftz: %s\n",
        gp_format_name(s->precision.grad), gp_format_name(s->precision.accumulator),
        enum_name(acc_names, COUNT(acc_names), (int)s->precision.rounding),
        bool_name(s->precision.ftz));
    gp_buf_printf(&b, "loss_scale:\n  mode: %s\n", enum_name(ls_names, COUNT(ls_names), (int)s->loss_scale.mode));
    put_key_double(&b, "  ", "init", s->loss_scale.init);
    put_key_double(&b, "  ", "growth", s->loss_scale.growth);
    put_key_double(&b, "  ", "backoff", s->loss_scale.backoff);
    gp_buf_printf(&b, "  interval: %d\n  unscale_before_clip: %s\n  update: %s\n", s->loss_scale.interval,
        bool_name(s->loss_scale.unscale_before_clip), bool_name(s->loss_scale.update));
    if (s->loss_scale.nreplay_scales) {
        gp_buf_printf(&b, "  replay_scales: [");
        for (int i = 0; i < s->loss_scale.nreplay_scales; i++)
            gp_buf_printf(&b, "%s%.17g", i ? ", " : "", s->loss_scale.replay_scales[i]);
        gp_buf_printf(&b, "]\n");
    }
    gp_buf_printf(&b, "  tracker: %d\n", s->loss_scale.tracker);
    gp_buf_printf(&b, "clip:\n");
    put_key_double(&b, "  ", "max_norm", s->clip.max_norm);
    gp_buf_printf(&b, "optimizer:\n  name: adamw\n");
    put_key_double(&b, "  ", "lr", s->optimizer.lr);
    gp_buf_printf(&b, "  betas: [");
    put_double(&b, s->optimizer.beta1);
    gp_buf_printf(&b, ", ");
    put_double(&b, s->optimizer.beta2);
    gp_buf_printf(&b, "]\n");
    put_key_double(&b, "  ", "eps", s->optimizer.eps);
    put_key_double(&b, "  ", "weight_decay", s->optimizer.weight_decay);
    gp_buf_printf(&b, "  param: %s\n  master: %s\n  state: %s\n  kahan: %s\n  stochastic: %s\n  fused: %s\n",
        gp_format_name(s->optimizer.param), master_names[s->optimizer.master != 0],
        gp_format_name(s->optimizer.state), bool_name(s->optimizer.kahan),
        bool_name(s->optimizer.stochastic), fused_names[s->optimizer.fused != 0]);
    gp_buf_printf(&b, "  evaluation: %s\n", gp_adamw_eval_name(s->optimizer.evaluation)); /* the default too */
    if (s->optimizer.lr_steps) {
        gp_buf_printf(&b, "  lr_steps: ");
        put_list(&b, s->optimizer.lr_steps, s->optimizer.nlr_steps);
        gp_buf_printf(&b, "\n");
    }
    gp_buf_printf(&b, "schedule:\n  name: %s\n  warmup: %d\n  total: %d\n",
        enum_name(sched_names, COUNT(sched_names), (int)s->schedule.kind), s->schedule.warmup,
        s->schedule.total);
    put_key_double(&b, "  ", "min_lr", s->schedule.min_lr);
    gp_buf_printf(&b, "  step_size: %d\n", s->schedule.step_size);
    put_key_double(&b, "  ", "gamma", s->schedule.gamma);
    gp_buf_printf(&b, "steps: %d\n", s->steps);
    int any = 0;
    for (int m = 0; m < GP_NMETRICS; m++)
        any |= s->thresholds.set[m] | s->thresholds.set_min[m];
    gp_buf_printf(&b, "thresholds:%s\n", any ? "" : " {}");
    for (int m = 0; m < GP_NMETRICS; m++)
        if (s->thresholds.set_min[m]) {
            gp_buf_printf(&b, "  %s:\n", gp_metric_name((gp_metric)m));
            put_key_double(&b, "    ", "min", s->thresholds.min[m]);
            if (s->thresholds.set[m])
                put_key_double(&b, "    ", "max", s->thresholds.max[m]);
        } else if (s->thresholds.set[m]) {
            put_key_double(&b, "  ", gp_metric_name((gp_metric)m), s->thresholds.max[m]);
        }
    if (gp_scenario_distributed(s)) {
        gp_buf_printf(&b, "distributed:\n  world_size: %d\n  collective: %s\n  reduce_dtype: %s\n  average: %s\n",
            s->distributed.world_size, gp_collective_name(s->distributed.collective),
            gp_format_name(gp_scenario_reduce_dtype(s)), gp_average_name(s->distributed.average));
        if (s->distributed.average == GP_AVG_PRE)
            put_key_double(&b, "  ", "predivide", s->distributed.predivide);
        gp_buf_printf(&b, "  no_sync: %s\n", bool_name(s->distributed.no_sync));
        if (s->distributed.bucket_elements)
            gp_buf_printf(&b, "  bucket_elements: %ld\n", s->distributed.bucket_elements);
        if (s->reduction == GP_RED_TOKEN_MEAN)
            gp_buf_printf(&b, "  normalize: %s\n", enum_name(norm_names, COUNT(norm_names), (int)s->distributed.normalize));
        if (s->distributed.tokens) {
            gp_buf_printf(&b, "  tokens:\n");
            for (int r = 0; r < s->distributed.world_size; r++) {
                gp_buf_printf(&b, "    - [");
                for (int k = 0; k < s->batch.microbatches; k++)
                    gp_buf_printf(&b, "%s%ld", k ? ", " : "", gp_scenario_tokens(s, r, k));
                gp_buf_printf(&b, "]\n");
            }
        }
    }
    for (int m = 0, first = 1; m < GP_NMETRICS; m++)
        if (s->exact_metrics[m]) {
            gp_buf_printf(&b, "%s%s", first ? "exact_metrics: [" : ", ", gp_metric_name((gp_metric)m));
            first = 0;
            if (m == GP_NMETRICS - 1 || !memchr(s->exact_metrics + m + 1, 1, (size_t)(GP_NMETRICS - m - 1)))
                gp_buf_printf(&b, "]\n");
        }
    if (s->expect.set) {
        gp_buf_printf(&b, "expect:\n  verdict: %s\n", gp_verdict_name(s->expect.verdict));
        if (s->expect.has_mechanism) {
            gp_buf_printf(&b, "  mechanism: ");
            put_string(&b, gp_mechanism_name(s->expect.mechanism));
            gp_buf_printf(&b, "\n");
        }
    }
    return gp_buf_take(&b);
}
