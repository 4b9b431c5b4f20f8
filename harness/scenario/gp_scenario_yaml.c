/* gp_scenario_yaml.c — a scenario written back as YAML (gp_scenario_to_yaml) that loads
 * to the same scenario. */
#include "gp_scenario_internal.h"

#include "../../base/gp_buf.h"
#include "../../kernels/cpu/gp_lowbit.h"

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
    gp_buf_printf(b, "      dist: %s\n", gp_scenario_enum_name(gp_dist_names, COUNT(gp_dist_names), (int)d->kind));
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

void gp_scenario_precision_names(const gp_scenario *s, char *grad, char *acc, size_t n)
{
    if (s->precision.grad_scaled)
        gp_scaled_name(&s->precision.grad_sc, grad, n);
    else
        snprintf(grad, n, "%s", gp_format_name(s->precision.grad));
    if (s->precision.acc_scaled)
        gp_scaled_name(&s->precision.acc_sc, acc, n);
    else
        snprintf(acc, n, "%s", gp_format_name(s->precision.accumulator));
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
            if (t->cols)
                gp_buf_printf(&b, "    cols: %zu\n", t->cols);
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
    gp_buf_printf(&b, "reduction: %s\n", gp_scenario_enum_name(gp_red_names, COUNT(gp_red_names), (int)s->reduction));
    gp_buf_printf(&b, "fullbatch: %s\n", gp_scenario_enum_name(gp_fb_names, COUNT(gp_fb_names), (int)s->fullbatch));
    char grad_name[128], acc_name[128];
    gp_scenario_precision_names(s, grad_name, acc_name, sizeof grad_name);
    gp_buf_printf(&b, "precision:\n  grad: %s\n  accumulator: %s\n  rounding: %s\n  ftz: %s\n",
        grad_name, acc_name,
        gp_scenario_enum_name(gp_acc_names, COUNT(gp_acc_names), (int)s->precision.rounding),
        bool_name(s->precision.ftz));
    gp_buf_printf(&b, "loss_scale:\n  mode: %s\n", gp_scenario_enum_name(gp_ls_names, COUNT(gp_ls_names),
                                                                         (int)s->loss_scale.mode));
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
        gp_format_name(s->optimizer.param), gp_master_names[s->optimizer.master != 0],
        s->optimizer.lowbit ? gp_lowbit_name((gp_lowbit)s->optimizer.lowbit) : gp_format_name(s->optimizer.state),
        bool_name(s->optimizer.kahan),
        bool_name(s->optimizer.stochastic), gp_fused_names[s->optimizer.fused != 0]);
    gp_buf_printf(&b, "  evaluation: %s\n", gp_adamw_eval_name(s->optimizer.evaluation)); /* the default too */
    if (s->optimizer.lr_steps) {
        gp_buf_printf(&b, "  lr_steps: ");
        put_list(&b, s->optimizer.lr_steps, s->optimizer.nlr_steps);
        gp_buf_printf(&b, "\n");
    }
    gp_buf_printf(&b, "schedule:\n  name: %s\n  warmup: %d\n  total: %d\n",
        gp_scenario_enum_name(gp_sched_names, COUNT(gp_sched_names), (int)s->schedule.kind), s->schedule.warmup,
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
        /* an fp8 accumulator's collective adds in fp8 when no reduce_dtype is given, which
         * the key itself cannot say (it takes fp32, bf16, fp16): left out then */
        gp_format rd = gp_scenario_reduce_dtype(s);
        int fp8_default = !s->distributed.reduce_set && (rd == GP_FP8_E4M3 || rd == GP_FP8_E5M2);
        gp_buf_printf(&b, "distributed:\n  world_size: %d\n  collective: %s\n", s->distributed.world_size,
                      gp_collective_name(s->distributed.collective));
        char rname[128];
        if (!fp8_default)
            gp_buf_printf(&b, "  reduce_dtype: %s\n", gp_scenario_reduce_name(s, rname, sizeof rname));
        gp_buf_printf(&b, "  average: %s\n", gp_average_name(s->distributed.average));
        if (s->distributed.average == GP_AVG_PRE)
            put_key_double(&b, "  ", "predivide", s->distributed.predivide);
        gp_buf_printf(&b, "  no_sync: %s\n", bool_name(s->distributed.no_sync));
        if (s->distributed.bucket_elements)
            gp_buf_printf(&b, "  bucket_elements: %ld\n", s->distributed.bucket_elements);
        if (s->reduction == GP_RED_TOKEN_MEAN)
            gp_buf_printf(&b, "  normalize: %s\n", gp_scenario_enum_name(gp_norm_names, COUNT(gp_norm_names),
                                                                         (int)s->distributed.normalize));
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
