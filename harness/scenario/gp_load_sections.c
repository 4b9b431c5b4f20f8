/* gp_load_sections.c — the loader's remaining sections: precision, loss scale, clipping,
 * the optimizer and its schedule, thresholds, exact metrics, the expectation, and the
 * data-parallel section with its resolution. */
#include "gp_scenario_internal.h"

#include "../../kernels/arith/gp_torch_sqrt.h"
#include "../../kernels/cpu/gp_lowbit.h"

/* ---- the remaining sections ---- */

/* A format key `path` that takes a plain format or a scaled or block format by its name
 * (docs/formats.md "Scaled and block formats"): a plain one into *plain (*scaled = 0), a
 * scaled one into *c (*scaled = 1, *plain = fp32: the dequantized values are stored);
 * *name: the text. Returns 0, or -1 with the loader's message. */
static int get_format_or_scaled(const loader *L, const yaml_node_t *n, const char *path, gp_format *plain,
                                int *scaled, gp_scaled_cfg *c, const char **name)
{
    char why[192];
    if (gp_load_get_string(L, n, path, name))
        return -1;
    *scaled = 0;
    if (gp_format_parse(*name, plain) == 0)
        return 0;
    if (!strchr(*name, ':') && strncmp(*name, "mx", 2) != 0 && strncmp(*name, "nvfp4", 5) != 0)
        return gp_load_get_format(L, n, path, plain); /* its message */
    if (gp_scaled_parse(*name, c, why, sizeof why) != 0)
        return gp_load_fail(L, n, "%s: %s", path, why);
    *plain = GP_FP32;
    *scaled = 1;
    return 0;
}

/* precision.accumulator scaled: fp8 with per-tensor current scaling ("fp8_e4m3:current",
 * MS-AMP / FP8-LM's fp8 weight gradients with one scale per tensor): the running sum
 * re-quantized after every micro-batch from its own amax. Other scaled kinds are refused
 * with the reason. (precision.grad takes every kind: the runner finds the amaxes that span
 * chunks, per tensor and per 128x128 tile, before it stores a micro-batch.) */
static int check_scaled_acc(const loader *L, const yaml_node_t *n, const gp_scaled_cfg *c, const char *t)
{
    if (c->kind != GP_SC_CURRENT)
        return gp_load_fail(L, n, "precision.accumulator: '%.60s': a running sum is re-quantized from its own amax "
                            "(per-tensor current scaling, e.g. fp8_e4m3:current); delayed scales follow gradients' "
                            "history and block formats (MX, NVFP4, blockwise) quantize gradients, not sums", t);
    if (c->mode == GP_STOCHASTIC)
        return gp_load_fail(L, n, "precision.accumulator: '%.60s': stochastic rounding of a scaled accumulator is "
                            "not modelled (drop :sr)", t);
    return 0;
}

enum { P_GRAD, P_ACC, P_ROUNDING, P_FTZ, P_N };
static const char *const precision_keys[P_N] = {"grad", "accumulator", "rounding", "ftz"};

int gp_load_parse_precision(const loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *v[P_N], *k[P_N];
    int e = 0;
    if (gp_load_fields(L, n, "precision", precision_keys, P_N, v, k))
        return -1;
    const char *name = NULL;
    if (v[P_GRAD] && get_format_or_scaled(L, v[P_GRAD], "precision.grad", &s->precision.grad,
                                          &s->precision.grad_scaled, &s->precision.grad_sc, &name))
        return -1;
    if (v[P_ACC] && (get_format_or_scaled(L, v[P_ACC], "precision.accumulator", &s->precision.accumulator,
                                          &s->precision.acc_scaled, &s->precision.acc_sc, &name) ||
                     (s->precision.acc_scaled && check_scaled_acc(L, v[P_ACC], &s->precision.acc_sc, name))))
        return -1;
    if (v[P_ROUNDING]) {
        if (gp_load_get_enum(L, v[P_ROUNDING], "precision.rounding", gp_acc_names, COUNT(gp_acc_names), &e))
            return -1;
        s->precision.rounding = (gp_acc_rounding)e;
    }
    if (v[P_FTZ] && gp_load_get_bool(L, v[P_FTZ], "precision.ftz", &s->precision.ftz))
        return -1;
    if (s->precision.acc_scaled && s->precision.rounding != GP_ACC_RNE)
        return gp_load_fail(L, v[P_ROUNDING], "precision.rounding: a scaled accumulator adds in fp32 with round to "
                            "nearest even, then re-quantizes (rounding: rne)");
    if (s->precision.acc_scaled && s->precision.grad_scaled)
        return gp_load_fail(L, v[P_ACC], "precision.accumulator: a scaled accumulator with a scaled grad is not "
                            "modelled yet (use a plain grad: bf16, fp16, fp32)");
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
    if (gp_load_get_double_in(L, n, path, 0.0, 1, INFINITY, 0, &x))
        return -1;
    if (frexp(x, &ex) != 0.5)
        return gp_load_fail(L, n, "%s must be a power of two (got %s)", path, gp_load_sval(n));
    if (ex - 1 < -126 || ex - 1 > 127)
        return gp_load_fail(L, n, "%s must be a power of two between 2^-126 and 2^127, a normal fp32 (got 2^%d)", path,
                            ex - 1);
    *out = x;
    return 0;
}

int gp_load_parse_loss_scale(const loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *v[L_N], *k[L_N];
    int e = 0;
    if (gp_load_fields(L, n, "loss_scale", ls_keys, L_N, v, k))
        return -1;
    if (v[L_MODE]) {
        if (gp_load_get_enum(L, v[L_MODE], "loss_scale.mode", gp_ls_names, COUNT(gp_ls_names), &e))
            return -1;
        s->loss_scale.mode = (gp_ls_mode)e;
    }
    if (v[L_INIT] && get_scale(L, v[L_INIT], "loss_scale.init", &s->loss_scale.init))
        return -1;
    if (v[L_REPLAY]) {
        yaml_node_t *q = v[L_REPLAY];
        size_t len = q->type == YAML_SEQUENCE_NODE ? gp_load_seq_len(q) : 0;
        if (len == 0)
            return gp_load_fail(L, q, "loss_scale.replay_scales: a list of one scale per optimizer step");
        if (len > (size_t)INT_MAX / 2)
            return gp_load_fail(L, q, "loss_scale.replay_scales has too many entries");
        if (!(s->loss_scale.replay_scales = malloc(len * sizeof(double))))
            return gp_load_oom(L, q);
        s->loss_scale.nreplay_scales = (int)len;
        for (size_t i = 0; i < len; i++) {
            char p[PATHLEN];
            gp_load_pathf(p, "loss_scale.replay_scales[%zu]", i);
            if (get_scale(L, gp_load_seq_item(L, q, i), p, &s->loss_scale.replay_scales[i]))
                return -1;
        }
    }
    if (v[L_GROWTH] && gp_load_get_double_in(L, v[L_GROWTH], "loss_scale.growth", 1.0, 1, INFINITY, 0,
                                             &s->loss_scale.growth))
        return -1;
    if (v[L_BACKOFF] && gp_load_get_double_in(L, v[L_BACKOFF], "loss_scale.backoff", 0.0, 1, 1.0, 1,
                                              &s->loss_scale.backoff))
        return -1;
    if (v[L_INTERVAL] && gp_load_get_int(L, v[L_INTERVAL], "loss_scale.interval", 1, &s->loss_scale.interval))
        return -1;
    if (v[L_UNSCALE] && gp_load_get_bool(L, v[L_UNSCALE], "loss_scale.unscale_before_clip",
                                         &s->loss_scale.unscale_before_clip))
        return -1;
    if (v[L_UPDATE] && gp_load_get_bool(L, v[L_UPDATE], "loss_scale.update", &s->loss_scale.update))
        return -1;
    if (v[L_TRACKER] && gp_load_get_int(L, v[L_TRACKER], "loss_scale.tracker", 0, &s->loss_scale.tracker))
        return -1;
    return 0;
}

static const char *const clip_keys[] = {"max_norm"};

int gp_load_parse_clip(const loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *v[1], *k[1];
    if (gp_load_fields(L, n, "clip", clip_keys, 1, v, k))
        return -1;
    if (v[0] && gp_load_get_double_in(L, v[0], "clip.max_norm", 0.0, 0, INFINITY, 0, &s->clip.max_norm))
        return -1;
    return 0;
}

enum { OP_NAME, OP_LR, OP_BETAS, OP_EPS, OP_WD, OP_PARAM, OP_MASTER, OP_STATE, OP_KAHAN, OP_SR, OP_FUSED, OP_EVAL,
       OP_LR_STEPS, OP_N };
static const char *const opt_keys[OP_N] = {"name", "lr", "betas", "eps", "weight_decay", "param", "master",
                                           "state", "kahan", "stochastic", "fused", "evaluation", "lr_steps"};

int gp_load_parse_optimizer(loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *v[OP_N], *k[OP_N];
    int e = 0;
    if (gp_load_fields(L, n, "optimizer", opt_keys, OP_N, v, k))
        return -1;
    if (v[OP_NAME] && gp_load_get_enum(L, v[OP_NAME], "optimizer.name", gp_opt_names, COUNT(gp_opt_names), &e))
        return -1;
    if (v[OP_LR] && gp_load_get_double_in(L, v[OP_LR], "optimizer.lr", 0.0, 0, INFINITY, 0, &s->optimizer.lr))
        return -1;
    if (v[OP_LR_STEPS] &&
        gp_load_get_lr_steps(L, v[OP_LR_STEPS], "optimizer.lr_steps", &s->optimizer.lr_steps, &s->optimizer.nlr_steps))
        return -1;
    L->lr_steps = v[OP_LR_STEPS];
    if (v[OP_BETAS]) {
        yaml_node_t *b = v[OP_BETAS];
        if (b->type != YAML_SEQUENCE_NODE || gp_load_seq_len(b) != 2)
            return gp_load_fail(L, b, "optimizer.betas: expected a list of two numbers [beta1, beta2], got %s",
                                b->type == YAML_SEQUENCE_NODE ? "a list of another length" : gp_load_kind(b));
        if (gp_load_get_double_in(L, gp_load_seq_item(L, b, 0), "optimizer.betas[0]", 0.0, 0, 1.0, 1,
                                  &s->optimizer.beta1) ||
            gp_load_get_double_in(L, gp_load_seq_item(L, b, 1), "optimizer.betas[1]", 0.0, 0, 1.0, 1,
                                  &s->optimizer.beta2))
            return -1;
    }
    if (v[OP_EPS] && gp_load_get_double_in(L, v[OP_EPS], "optimizer.eps", 0.0, 1, INFINITY, 0, &s->optimizer.eps))
        return -1;
    if (v[OP_WD] && gp_load_get_double_in(L, v[OP_WD], "optimizer.weight_decay", 0.0, 0, INFINITY, 0,
                                          &s->optimizer.weight_decay))
        return -1;
    if (v[OP_PARAM] && gp_load_get_format(L, v[OP_PARAM], "optimizer.param", &s->optimizer.param))
        return -1;
    if (v[OP_MASTER] &&
        gp_load_get_enum(L, v[OP_MASTER], "optimizer.master", gp_master_names, COUNT(gp_master_names),
                         &s->optimizer.master))
        return -1;
    const char *state_name = NULL;
    if (v[OP_STATE] && gp_load_get_string(L, v[OP_STATE], "optimizer.state", &state_name))
        return -1;
    if (state_name && (s->optimizer.lowbit = (int)gp_lowbit_parse(state_name)) != 0)
        s->optimizer.state = GP_FP32; /* m[], v[]: the dequantized values */
    else if (v[OP_STATE] && gp_load_get_format(L, v[OP_STATE], "optimizer.state", &s->optimizer.state))
        return -1;
    if (v[OP_KAHAN] && gp_load_get_bool(L, v[OP_KAHAN], "optimizer.kahan", &s->optimizer.kahan))
        return -1;
    if (v[OP_SR] && gp_load_get_bool(L, v[OP_SR], "optimizer.stochastic", &s->optimizer.stochastic))
        return -1;
    if (v[OP_FUSED] &&
        gp_load_get_enum(L, v[OP_FUSED], "optimizer.fused", gp_fused_names, COUNT(gp_fused_names), &s->optimizer.fused))
        return -1;
    if (v[OP_EVAL] && gp_load_get_enum(L, v[OP_EVAL], "optimizer.evaluation", gp_eval_names, COUNT(gp_eval_names),
                                       &s->optimizer.evaluation))
        return -1;
    if (s->optimizer.evaluation == 6 && gp_torch_sqrt_host_kernel() == GP_MKL_SQRT_NONE) /* torch_cpu_host */
        return gp_load_fail(L, v[OP_EVAL],
                            "optimizer.evaluation: torch_cpu_host models torch's x86-64 wheel on this host, %s",
                            GP_TORCH_SQRT_HOST ? "and MKL's sqrt kernel for an Intel CPU without AVX2 and FMA is not modelled"
                                       : "and this is not an x86-64 build");
    /* what the AdamW kernels implement (kernels/arith/gp_adamw.h) */
    if (v[OP_PARAM] && s->optimizer.param != GP_FP32 && s->optimizer.param != GP_BF16 && s->optimizer.param != GP_FP16)
        return gp_load_fail(L, v[OP_PARAM], "optimizer.param: expected fp32, bf16 or fp16");
    if (v[OP_STATE] && s->optimizer.state != GP_FP32 && s->optimizer.state != GP_BF16 && s->optimizer.state != GP_FP16) {
        const char *names[GP_LOWBIT_COUNT]; /* the low-bit states: GP_VOCAB_LOWBIT_STATES after "plain" */
        for (int i = 1; i < GP_LOWBIT_COUNT; i++)
            names[i - 1] = gp_vocab_name(GP_VOCAB_LOWBIT_STATE, i);
        char list[200];
        gp_scenario_join(list, sizeof list, names, GP_LOWBIT_COUNT - 1);
        return gp_load_fail(L, v[OP_STATE], "optimizer.state: expected fp32, bf16 or fp16, or a low-bit state (%s)",
                            list);
    }
    if (s->optimizer.lowbit && (s->optimizer.master || s->optimizer.kahan || s->optimizer.stochastic ||
                                s->optimizer.fused))
        return gp_load_fail(L, v[OP_STATE], "optimizer.state: %s is a library's AdamW on the param itself, rounding "
                            "to nearest (no master, kahan, stochastic or fused); drop one", state_name);
    if (s->optimizer.kahan && s->optimizer.master)
        return gp_load_fail(L, v[OP_KAHAN], "optimizer.kahan: Kahan compensation replaces the master copy; drop one");
    if (s->optimizer.kahan && s->optimizer.stochastic)
        return gp_load_fail(L, v[OP_KAHAN],
                            "optimizer.kahan: the compensated store rounds to nearest, not stochastically");
    if (s->optimizer.fused) { /* torch's fused kernel: one dtype, the param updated in place, RNE */
        if (s->optimizer.master || s->optimizer.kahan || s->optimizer.stochastic)
            return gp_load_fail(L, v[OP_FUSED],
                                "optimizer.fused: torch's fused AdamW updates the param itself, rounding to "
                                        "nearest (no master, kahan or stochastic); drop one");
        if (!v[OP_STATE])
            s->optimizer.state = s->optimizer.param;
        else if (s->optimizer.state != s->optimizer.param)
            return gp_load_fail(L, v[OP_STATE],
                                "optimizer.state: torch's fused AdamW keeps m and v in the param's dtype "
                                        "(%s), got %s", gp_format_name(s->optimizer.param),
                        gp_format_name(s->optimizer.state));
    }
    return 0;
}

enum { S_NAME, S_WARMUP, S_TOTAL, S_MINLR, S_STEPSIZE, S_GAMMA, S_N };
static const char *const sched_keys[S_N] = {"name", "warmup", "total", "min_lr", "step_size", "gamma"};

int gp_load_parse_schedule(loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *v[S_N], *k[S_N];
    int e = 0;
    if (gp_load_fields(L, n, "schedule", sched_keys, S_N, v, k))
        return -1;
    if (v[S_NAME]) {
        if (gp_load_get_enum(L, v[S_NAME], "schedule.name", gp_sched_names, COUNT(gp_sched_names), &e))
            return -1;
        s->schedule.kind = (gp_schedule_kind)e;
    }
    L->sched_name = v[S_NAME];
    if (v[S_WARMUP] && gp_load_get_int(L, v[S_WARMUP], "schedule.warmup", 0, &s->schedule.warmup))
        return -1;
    if (v[S_TOTAL] && gp_load_get_int(L, v[S_TOTAL], "schedule.total", 1, &s->schedule.total))
        return -1;
    L->total_given = v[S_TOTAL] != NULL;
    if (v[S_MINLR] && gp_load_get_double_in(L, v[S_MINLR], "schedule.min_lr", 0.0, 0, INFINITY, 0,
                                            &s->schedule.min_lr))
        return -1;
    if (v[S_STEPSIZE] && gp_load_get_int(L, v[S_STEPSIZE], "schedule.step_size", 1, &s->schedule.step_size))
        return -1;
    if (v[S_GAMMA] && gp_load_get_double_in(L, v[S_GAMMA], "schedule.gamma", 0.0, 1, INFINITY, 0,
                                            &s->schedule.gamma))
        return -1;
    return 0;
}

/* thresholds: {METRIC: number, ...}, any finite number. */
int gp_load_parse_thresholds(const loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *seen[GP_NMETRICS] = {0};
    if (n->type != YAML_MAPPING_NODE)
        return gp_load_fail(L, n, "thresholds: expected a mapping of metric names to numbers, got %s", gp_load_kind(n));
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = gp_load_node(L, p->key), *v = gp_load_node(L, p->value);
        gp_metric m;
        if (k->type != YAML_SCALAR_NODE)
            return gp_load_fail(L, k, "thresholds: a key must be a metric name, got %s", gp_load_kind(k));
        if (gp_metric_parse(gp_load_sval(k), &m) != 0) {
            const char *names[GP_NMETRICS];
            for (int i = 0; i < GP_NMETRICS; i++)
                names[i] = gp_metric_name((gp_metric)i);
            char list[400];
            gp_scenario_join(list, sizeof list, names, GP_NMETRICS);
            return gp_load_fail(L, k, "unknown metric '%.60s' in thresholds (allowed: %s)", gp_load_sval(k), list);
        }
        if (seen[m])
            return gp_load_fail(L, k, "duplicate key '%s' in thresholds (first at %lu:%lu)", gp_load_sval(k),
                                (unsigned long)seen[m]->start_mark.line + 1,
                                (unsigned long)seen[m]->start_mark.column + 1);
        seen[m] = k;
        char path[PATHLEN];
        gp_load_pathf(path, "threshold for %s", gp_load_sval(k));
        if (v->type == YAML_MAPPING_NODE) { /* two-sided: {min: X, max: Y}, either optional */
            static const char *const keys[] = {"min", "max"};
            yaml_node_t *bv[2], *bk[2];
            if (gp_load_fields(L, v, path, keys, 2, bv, bk))
                return -1;
            if (!bv[0] && !bv[1])
                return gp_load_fail(L, v, "%s: give min, max or both", path);
            if (bv[0] && gp_load_get_double(L, bv[0], path, &s->thresholds.min[m]))
                return -1;
            if (bv[1] && gp_load_get_double(L, bv[1], path, &s->thresholds.max[m]))
                return -1;
            s->thresholds.set_min[m] = bv[0] != NULL;
            s->thresholds.set[m] = bv[1] != NULL;
            if (bv[0] && bv[1] && s->thresholds.min[m] > s->thresholds.max[m])
                return gp_load_fail(L, v, "%s: min %g is above max %g", path, s->thresholds.min[m],
                                    s->thresholds.max[m]);
            continue;
        }
        if (gp_load_get_double(L, v, path, &s->thresholds.max[m]))
            return -1;
        s->thresholds.set[m] = 1;
    }
    return 0;
}

/* exact_metrics: [NAME, ...] — metrics the scenario determines exactly (the gate compares
 * them for equality); each a metric name, once. */
int gp_load_parse_exact_metrics(const loader *L, yaml_node_t *n, gp_scenario *s)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return gp_load_fail(L, n, "exact_metrics: expected a list of metric names, got %s", gp_load_kind(n));
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        yaml_node_t *v = gp_load_node(L, *it);
        gp_metric m;
        if (v->type != YAML_SCALAR_NODE || gp_metric_parse(gp_load_sval(v), &m) != 0) {
            const char *names[GP_NMETRICS];
            for (int i = 0; i < GP_NMETRICS; i++)
                names[i] = gp_metric_name((gp_metric)i);
            char list[400];
            gp_scenario_join(list, sizeof list, names, GP_NMETRICS);
            return gp_load_fail(L, v, "exact_metrics: '%.60s' is not a metric (allowed: %s)",
                                v->type == YAML_SCALAR_NODE ? gp_load_sval(v) : gp_load_kind(v), list);
        }
        if (s->exact_metrics[m])
            return gp_load_fail(L, v, "exact_metrics: '%s' is listed twice", gp_load_sval(v));
        s->exact_metrics[m] = 1;
    }
    return 0;
}

/* expect: {verdict: pass|warn|fail, mechanism: NAME} — the outcome the scenario must
 * have (an incident it reproduces: verdict fail, naming the mechanism, which is then
 * required). */
int gp_load_parse_expect(const loader *L, yaml_node_t *n, gp_scenario *s)
{
    static const char *const keys[] = {"verdict", "mechanism"};
    yaml_node_t *v[2], *k[2];
    const char *t = NULL;
    if (gp_load_fields(L, n, "expect", keys, 2, v, k))
        return -1;
    if (!v[0])
        return gp_load_fail(L, n, "expect: the verdict is missing (pass, warn or fail)");
    if (gp_load_get_string(L, v[0], "expect.verdict", &t))
        return -1;
    if (gp_verdict_parse(t, &s->expect.verdict) != 0)
        return gp_load_fail(L, v[0], "unknown expect.verdict '%.40s' (allowed: pass, warn, fail)", t);
    if (v[1]) {
        if (gp_load_get_string(L, v[1], "expect.mechanism", &t))
            return -1;
        if (gp_mechanism_parse(t, &s->expect.mechanism) != 0) {
            const char *names[GP_NMECH];
            for (int i = 0; i < GP_NMECH; i++)
                names[i] = gp_mechanism_name((gp_mechanism)i);
            char list[320];
            gp_scenario_join(list, sizeof list, names, GP_NMECH);
            return gp_load_fail(L, v[1], "unknown expect.mechanism '%.40s' (allowed: %s)", t, list);
        }
        s->expect.has_mechanism = 1;
    } else if (s->expect.verdict == GP_FAIL) {
        return gp_load_fail(L, n, "expect: a scenario expected to fail must name its mechanism (expect.mechanism)");
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

/* distributed.reduce_dtype: fp32, bf16, fp16, or a scaled format whose scales each rank
 * computes from what it sends (docs/distributed.md, "Scaled reduce dtypes"): per message
 * (:current, two-level nvfp4) or per block (:blockwise_1x128, MX, nvfp4); plain fp8 (no
 * scale), :delayed (no amax history of a collective), :blockwise_128x128 (a message is one
 * row) and :sr refused. A scaled one adds its partial sums in fp32 (reduce_dtype fp32). */
static int get_reduce_dtype(const loader *L, const yaml_node_t *n, gp_scenario *s)
{
    const char *t = NULL;
    gp_scaled_cfg *c = &s->distributed.reduce_sc;
    s->distributed.reduce_set = 1;
    if (get_format_or_scaled(L, n, "distributed.reduce_dtype", &s->distributed.reduce_dtype,
                             &s->distributed.reduce_scaled, c, &t))
        return -1;
    if (!s->distributed.reduce_scaled) {
        if (s->distributed.reduce_dtype == GP_FP8_E4M3 || s->distributed.reduce_dtype == GP_FP8_E5M2)
            return gp_load_fail(L, n, "distributed.reduce_dtype must be fp32, bf16, fp16 or a scaled format "
                                "(got %s without a scale: %s:current gives each rank its own scale)",
                                gp_format_name(s->distributed.reduce_dtype), t);
        return 0;
    }
    if (c->kind == GP_SC_DELAYED || c->kind == GP_SC_BLOCK_128X128 || c->mode == GP_STOCHASTIC)
        return gp_load_fail(L, n, "distributed.reduce_dtype: '%.60s': %s", t,
                            c->mode == GP_STOCHASTIC ? "the collective's casts round to nearest (drop :sr)"
                            : c->kind == GP_SC_DELAYED ? "a collective keeps no amax history (use :current)"
                                                       : "a message is one row of elements (use :blockwise_1x128)");
    return 0;
}

int gp_load_parse_distributed(loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t **v = L->dist_v, *k[DI_N];
    int e = 0;
    long long x = 0;
    if (gp_load_fields(L, n, "distributed", dist_keys_, DI_N, v, k))
        return -1;
    L->dist = n;
    if (v[DI_WORLD] && gp_load_get_ll(L, v[DI_WORLD], "distributed.world_size", 1, GP_MAX_WORLD, &x))
        return -1;
    s->distributed.world_size = v[DI_WORLD] ? (int)x : 1;
    if (v[DI_COLL]) {
        if (gp_load_get_enum(L, v[DI_COLL], "distributed.collective", gp_coll_names, COUNT(gp_coll_names), &e))
            return -1;
        s->distributed.collective = (gp_collective)e;
    }
    if (v[DI_RDT] && get_reduce_dtype(L, v[DI_RDT], s))
        return -1;
    if (v[DI_AVG]) {
        if (gp_load_get_enum(L, v[DI_AVG], "distributed.average", gp_avg_names, COUNT(gp_avg_names), &e))
            return -1;
        s->distributed.average = (gp_average)e;
    }
    if (v[DI_PRE] && gp_load_get_double_in(L, v[DI_PRE], "distributed.predivide", 1.0, 0, (double)GP_MAX_WORLD, 0,
                                           &s->distributed.predivide))
        return -1;
    if (v[DI_NOSYNC] && gp_load_get_bool(L, v[DI_NOSYNC], "distributed.no_sync", &s->distributed.no_sync))
        return -1;
    if (v[DI_BUCKET] && gp_load_get_ll(L, v[DI_BUCKET], "distributed.bucket_elements", 1,
                                       (long long)GP_MAX_TENSOR_SIZE, &x))
        return -1;
    if (v[DI_BUCKET])
        s->distributed.bucket_elements = (long)x;
    if (v[DI_NORM]) {
        if (gp_load_get_enum(L, v[DI_NORM], "distributed.normalize", gp_norm_names, COUNT(gp_norm_names), &e))
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
int gp_load_resolve_distributed(loader *L, gp_scenario *s)
{
    yaml_node_t **v = L->dist_v;
    int W = s->distributed.world_size, K = s->batch.microbatches;
    if (!L->dist)
        return 0;
    if ((long long)W * K > GP_MAX_MICROBATCHES)
        return gp_load_fail(L, v[DI_WORLD] ? v[DI_WORLD] : L->dist,
                            "distributed: world_size %d x %d micro-batches a rank is "
                            "more than %d micro-batches in all", W, K, GP_MAX_MICROBATCHES);
    if (v[DI_PRE] && s->distributed.average != GP_AVG_PRE)
        return gp_load_fail(L, v[DI_PRE], "distributed.predivide needs average: pre (average is %s)",
                            gp_average_name(s->distributed.average));
    if (v[DI_PRE] && s->distributed.predivide > W)
        return gp_load_fail(L, v[DI_PRE], "distributed.predivide (%g) must be at most world_size (%d)",
                            s->distributed.predivide, W);
    if (!v[DI_PRE])
        s->distributed.predivide = s->distributed.collective == GP_COLL_REDUCE_SCATTER ? fsdp_predivide(W) : W;
    if (v[DI_NORM] && s->reduction != GP_RED_TOKEN_MEAN)
        return gp_load_fail(L, v[DI_NORM], "distributed.normalize applies to reduction: token_mean (reduction is %s)",
                            gp_reduction_name(s->reduction));
    for (size_t i = 0; i < s->ntensors; i++)
        if (gp_scenario_distributed(s) &&
            (s->tensors[i].grad.kind == GP_DIST_VALUES || s->tensors[i].grad.kind == GP_DIST_REPLAY))
            return gp_load_fail(L, L->dist, "distributed: tensors[%zu] has %s gradients; a simulated collective needs "
                                "generated ones (docs/distributed.md)", i,
                                s->tensors[i].grad.kind == GP_DIST_VALUES ? "explicit" : "replayed");
    if (gp_scenario_distributed(s) && s->precision.rounding == GP_ACC_KAHAN)
        return gp_load_fail(L, L->dist, "distributed: a Kahan-compensated accumulator is not simulated across ranks "
                            "(docs/distributed.md)");
    if (s->distributed.reduce_scaled) {
        int sampled = s->sample != 0;
        for (size_t i = 0; i < s->ntensors; i++)
            sampled |= s->tensors[i].sample != 0;
        if (sampled)
            return gp_load_fail(L, v[DI_RDT], "distributed.reduce_dtype: a scaled format quantizes messages of "
                                "neighbouring elements; it cannot run with `sample:` (drop one)");
        for (size_t i = 0; i < s->ntensors; i++)
            if (s->tensors[i].size > GP_COLL_MESSAGE_BLOCK &&
                (s->distributed.bucket_elements == 0 || GP_COLL_MESSAGE_BLOCK % s->distributed.bucket_elements != 0))
                return gp_load_fail(L, v[DI_BUCKET] ? v[DI_BUCKET] : v[DI_RDT],
                                    "distributed.reduce_dtype: tensors[%zu] has %zu elements: a scaled reduce dtype "
                                    "needs tensors of at most %d elements or bucket_elements dividing %d "
                                    "(docs/distributed.md)", i, s->tensors[i].size, GP_COLL_MESSAGE_BLOCK,
                                    GP_COLL_MESSAGE_BLOCK);
    }
    yaml_node_t *t = v[DI_TOKENS];
    if (!t)
        return 0;
    if (L->tok)
        return gp_load_fail(L, t, "distributed.tokens gives every rank's counts: leave batch.tokens out");
    if (t->type != YAML_SEQUENCE_NODE || gp_load_seq_len(t) != (size_t)W)
        return gp_load_fail(L, t, "distributed.tokens: expected a list of %d entries (one per rank), got %s", W,
                            t->type == YAML_SEQUENCE_NODE ? "another length" : gp_load_kind(t));
    s->distributed.tokens = malloc((size_t)W * (size_t)K * sizeof *s->distributed.tokens);
    if (!s->distributed.tokens)
        return gp_load_oom(L, t);
    uint64_t N = 0;
    for (int r = 0; r < W; r++) {
        yaml_node_t *row = gp_load_seq_item(L, t, (size_t)r);
        char p[PATHLEN];
        long long x = 0;
        for (int k = 0; k < K; k++) {
            yaml_node_t *item = row;
            if (row->type == YAML_SEQUENCE_NODE) {
                if (gp_load_seq_len(row) != (size_t)K)
                    return gp_load_fail(L, row, "distributed.tokens[%d] has %zu entries but batch.microbatches is %d",
                                        r,
                                        gp_load_seq_len(row), K);
                item = gp_load_seq_item(L, row, (size_t)k);
                gp_load_pathf(p, "distributed.tokens[%d][%d]", r, k);
            } else {
                gp_load_pathf(p, "distributed.tokens[%d]", r);
            }
            if (gp_load_get_ll(L, item, p, 1, GP_MAX_TOKENS, &x))
                return -1;
            s->distributed.tokens[(size_t)r * (size_t)K + (size_t)k] = (long)x;
            N += (uint64_t)x;
        }
    }
    if (N > INT32_MAX)
        return gp_load_fail(L, t,
                            "distributed.tokens: the total N = %llu tokens over every rank does not fit in 2^31-1",
                            (unsigned long long)N);
    for (int k = 0; k < K; k++) /* rank 0's counts are the batch's */
        s->batch.tokens[k] = s->distributed.tokens[k];
    return 0;
}
