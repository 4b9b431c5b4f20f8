/* gp_scenario.c — see gp_scenario.h: a scenario's defaults, freeing, the dumps it reads,
 * the names of its enumerations and the questions asked of a loaded scenario. The loader
 * is gp_load*.c and gp_sweep.c; the writer gp_scenario_yaml.c. */
#include "gp_scenario_internal.h"

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

void gp_scenario_tensor_init(gp_tensor_spec *t, const char *name)
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

const char *const gp_dist_names[] = {"normal", "lognormal", "laplace", "pareto", "constant"};
const char *const gp_red_names[] = {"token_mean", "mean", "mean_no_div", "sum"};
const char *const gp_fb_names[] = {"mean", "sum"};
const char *const gp_acc_names[] = {GP_VOCAB_ACC_ROUNDINGS(GP_VOCAB_NAME_ABI)}; /* kernels/gp_vocab.h */
const char *const gp_ls_names[] = {"none", "static", "dynamic"};
const char *const gp_master_names[] = {"none", "fp32"};
const char *const gp_fused_names[] = {"none", "torch_cpu"};
const char *const gp_opt_names[] = {"adamw"};
const char *const gp_eval_names[] = {GP_VOCAB_ADAMW_EVALS(GP_VOCAB_NAME_ABI)}; /* kernels/gp_vocab.h */
const char *const gp_sched_names[] = {"constant", "cosine", "linear", "inverse_sqrt", "step"};
const char *const gp_coll_names[] = {"ring", "tree", "reduce_scatter"};
const char *const gp_avg_names[] = {"pre", "post", "op"};
const char *const gp_norm_names[] = {"global", "rank"};

static const char *name_at(const char *const *names, int n, int i)
{
    return i >= 0 && i < n ? names[i] : "?";
}

const char *gp_reduction_name(gp_reduction r)
{
    return name_at(gp_red_names, COUNT(gp_red_names), (int)r);
}

const char *gp_acc_rounding_name(gp_acc_rounding r)
{
    return name_at(gp_acc_names, COUNT(gp_acc_names), (int)r);
}

const char *gp_ls_mode_name(gp_ls_mode m)
{
    return name_at(gp_ls_names, COUNT(gp_ls_names), (int)m);
}

const char *gp_schedule_name(gp_schedule_kind k)
{
    return name_at(gp_sched_names, COUNT(gp_sched_names), (int)k);
}

const char *gp_collective_name(gp_collective c)
{
    return name_at(gp_coll_names, COUNT(gp_coll_names), (int)c);
}

const char *gp_average_name(gp_average a)
{
    return name_at(gp_avg_names, COUNT(gp_avg_names), (int)a);
}

gp_format gp_scenario_reduce_dtype(const gp_scenario *s)
{
    return s->distributed.reduce_set ? s->distributed.reduce_dtype : s->precision.accumulator;
}

const char *gp_scenario_reduce_name(const gp_scenario *s, char *buf, size_t n)
{
    if (s->distributed.reduce_scaled)
        gp_scaled_name(&s->distributed.reduce_sc, buf, n);
    else
        snprintf(buf, n, "%s", gp_format_name(gp_scenario_reduce_dtype(s)));
    return buf;
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
    return name_at(gp_eval_names, COUNT(gp_eval_names), evaluation);
}

const char *gp_scenario_enum_name(const char *const *names, int count, int v)
{
    return v >= 0 && v < count ? names[v] : "?";
}

/* "a, b, c" into buf (truncated to fit). */
void gp_scenario_join(char *buf, size_t n, const char *const *names, int count)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < count && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", names[i]);
}
