/* gp_load.c — the loader's whole document: the top-level keys, the dumps a scenario reads
 * (checked against the tensors), the run's size against its limits (gp_budget.h), the
 * libyaml parse, and one scenario from text. The YAML is read with libyaml's document API,
 * so every node keeps its mark and each error names origin:line:column. The tree is
 * walked against a fixed schema into a scratch scenario; then the batch is resolved
 * as a whole (micro-batch count, token counts, explicit values must agree) and the
 * scratch scenario is handed over only on success. On any error it is freed and the
 * caller's scenario is left initialised, owning nothing. */
#include "gp_scenario_internal.h"

#include "../../kernels/cpu/gp_lowbit.h"

#include "../sources/gp_replay.h"
#include "gp_budget.h"
#include "gp_yaml_bound.h"

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
            return gp_load_fail(L, at, "tensors[%zu] '%s': grad.replay: %s", i, t->name, e.msg);
        uint64_t n = 0;
        int rc = 0;
        char name[GP_NAME_MAX * 4];
        for (int st = 0; st < s->steps && rc == 0; st++)
            for (int k = 0; k < gp_scenario_step_mb(s, st) && rc == 0; k++) {
                gp_replay_entry en;
                snprintf(name, sizeof name, "%s/step%d/mb%d", t->grad.replay_key, st, k);
                if (gp_replay_entry_get(r, name, &en, &e) != 0) {
                    rc = gp_load_fail(L, at, "tensors[%zu] '%s': %s", i, t->name, e.msg);
                    break;
                }
                if (en.fmt != s->precision.grad)
                    rc = gp_load_fail(L, at,
                                      "tensors[%zu] '%s': %s: entry '%s' is %s but precision.grad is %s (the dump "
                                      "holds what the backward wrote: say its dtype)", i, t->name, t->grad.replay, name,
                                      gp_format_name(en.fmt), gp_format_name(s->precision.grad));
                else if (st == 0 && k == 0)
                    n = en.n;
                else if (en.n != n)
                    rc = gp_load_fail(L, at,
                                      "tensors[%zu] '%s': %s: entry '%s' has %llu elements, '%s/step0/mb0' has %llu",
                                      i, t->name, t->grad.replay, name, (unsigned long long)en.n, t->grad.replay_key,
                                      (unsigned long long)n);
                gp_replay_entry_release(&en);
            }
        gp_replay_close(r);
        if (rc)
            return -1;
        if (n == 0 || n > GP_MAX_TENSOR_SIZE)
            return gp_load_fail(L, at, "tensors[%zu] '%s': %s: entries of %llu elements (1 to %zu replayed)", i,
                                t->name,
                                t->grad.replay, (unsigned long long)n, GP_MAX_TENSOR_SIZE);
        if (L->tn[i].size && t->size != n)
            return gp_load_fail(L, L->tn[i].size, "tensors[%zu].size is %zu but the dump's entries have %llu elements",
                                i,
                                t->size, (unsigned long long)n);
        t->size = (size_t)n;
        if (t->population && t->population < t->size)
            return gp_load_fail(L, L->tn[i].population,
                                "tensors[%zu].population is %llu, fewer than the dump's %zu elements "
                                "(population: the elements of the tensor the dump's entries were sampled from)", i,
                                (unsigned long long)t->population, t->size);
        if (t->sample > t->size)
            return gp_load_fail(L, L->tn[i].sample, "tensors[%zu].sample is %zu, more than the tensor's %zu elements",
                                i,
                                t->sample, t->size);
        if (t->weight.kind == GP_DIST_REPLAY) {
            at = L->tn[i].weight;
            gp_replay_entry en;
            if (gp_replay_open(t->weight.replay, &r, &e) != 0)
                return gp_load_fail(L, at, "tensors[%zu] '%s': weight.replay: %s", i, t->name, e.msg);
            snprintf(name, sizeof name, "%s/weight", t->weight.replay_key);
            if (gp_replay_entry_get(r, name, &en, &e) != 0)
                rc = gp_load_fail(L, at, "tensors[%zu] '%s': %s", i, t->name, e.msg);
            else if (en.n != n)
                rc = gp_load_fail(L, at, "tensors[%zu] '%s': %s: entry '%s' has %llu elements, the gradients %llu", i,
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
                    return gp_load_fail(L, at, "tensors[%zu]: replaying a `mean` reduction needs batch.tokens[%d] x "
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
        return gp_load_fail(L, at, "tensors[%zu] '%s': %s", i, t->name, e.msg);
    if (en.fmt != fmt)
        rc = gp_load_fail(L, at, "tensors[%zu] '%s': %s: entry '%s' is %s but %s is %s", i, t->name, file, name,
                          gp_format_name(en.fmt), fmt_key, gp_format_name(fmt));
    else if (en.n != t->size)
        rc = gp_load_fail(L, at, "tensors[%zu] '%s': %s: entry '%s' has %llu elements, the gradients %zu", i, t->name,
                          file,
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
/* tensors[i].cols against the tensor's size (a replayed size is known by now): C divides
 * the size and is a multiple of 128 or the size itself, so that a row's blocks of 16, 32
 * and 128 never straddle a row or one of the runner's chunks; a blockwise_128x128 grad
 * needs it on every tensor of more than 128 elements (its tiles span rows). */
static int check_cols(const loader *L, yaml_node_t *prec, const gp_scenario *s)
{
    for (size_t i = 0; i < s->ntensors; i++) {
        const gp_tensor_spec *t = &s->tensors[i];
        if (t->cols && (t->size % t->cols != 0 || (t->cols % 128 != 0 && t->cols != t->size)))
            return gp_load_fail(L, L->tn[i].cols, "tensors[%zu].cols: %zu must divide the tensor's %zu elements and be a "
                                "multiple of 128 (or the size itself)", i, t->cols, t->size);
        if (!t->cols && t->size > 128 && s->precision.grad_scaled &&
            s->precision.grad_sc.kind == GP_SC_BLOCK_128X128)
            return gp_load_fail(L, prec, "precision.grad: blockwise_128x128 tiles a 2-D tensor: tensors[%zu] ('%s') "
                                "needs `cols` (its row length)", i, t->name);
    }
    return 0;
}

static int resolve_carried(loader *L, gp_scenario *s)
{
    int any_lr_steps = s->optimizer.lr_steps != NULL;
    if (s->optimizer.lr_steps && s->optimizer.nlr_steps != s->steps)
        return gp_load_fail(L, L->lr_steps,
                            "optimizer.lr_steps has %d entries, steps is %d (one LR per optimizer step)",
                            s->optimizer.nlr_steps, s->steps);
    for (size_t i = 0; i < s->ntensors; i++) {
        gp_tensor_spec *t = &s->tensors[i];
        any_lr_steps |= t->optimizer.lr_steps != NULL;
        if (t->optimizer.lr_steps && t->optimizer.nlr_steps != s->steps)
            return gp_load_fail(L, L->tn[i].opt_lr_steps,
                                "tensors[%zu].optimizer.lr_steps has %d entries, steps is %d (one "
                                "LR per optimizer step)", i, t->optimizer.nlr_steps, s->steps);
        if (s->optimizer.lr_steps && t->optimizer.set_lr && !t->optimizer.lr_steps)
            return gp_load_fail(L, L->tn[i].opt_lr,
                                "tensors[%zu].optimizer.lr: optimizer.lr_steps gives every step's LR; "
                                "give this tensor's own lr_steps", i);
    }
    if (any_lr_steps && s->schedule.kind != GP_SCHED_CONSTANT)
        return gp_load_fail(L, L->sched_name,
                            "schedule.name is %s but lr_steps gives the LR of every step (it replaces lr x "
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
                return gp_load_fail(L, at,
                                    "tensors[%zu].state: optimizer.kahan keeps a compensation no entry of the dump "
                                    "holds (torch's AdamW has none)", i);
            if (gp_replay_open(t->state.replay, &r, &e) != 0)
                return gp_load_fail(L, at, "tensors[%zu] '%s': state.replay: %s", i, t->name, e.msg);
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
                return gp_load_fail(L, at, "tensors[%zu] '%s': twin.replay: %s", i, t->name, e.msg);
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
/* A low-bit optimizer state (optimizer.state: bnb8_blockwise, ...; harness/run/gp_optim_lowbit.h)
 * keeps one scale per block of a tensor: every tensor's size a multiple of the block, all
 * elements simulated (no sample), no carried state (a capture's m, v are torch's). */
static int check_lowbit(const loader *L, yaml_node_t *opt, yaml_node_t *sample, const gp_scenario *s)
{
    gp_lowbit f = (gp_lowbit)s->optimizer.lowbit;
    size_t B = gp_lowbit_block(f);
    const char *name = gp_lowbit_name(f);
    if (s->sample)
        return gp_load_fail(L, sample, "sample: optimizer.state %s keeps a scale per block of %zu elements, which "
                            "needs every element: drop sample", name, B);
    for (size_t i = 0; i < s->ntensors; i++) {
        const gp_tensor_spec *t = &s->tensors[i];
        yaml_node_t *at = L->tn[i].size ? L->tn[i].size : opt;
        if (t->size % B != 0)
            return gp_load_fail(L, at, "tensors[%zu] '%s': %zu elements, not a multiple of optimizer.state %s's block "
                                "(%zu)", i, t->name, t->size, name, B);
        if (t->sample || t->population)
            return gp_load_fail(L, L->tn[i].sample ? L->tn[i].sample : at, "tensors[%zu] '%s': optimizer.state %s "
                                "needs every element (a scale per block): no sample or population", i, t->name, name);
        if (t->state.replay)
            return gp_load_fail(L, L->tn[i].state, "tensors[%zu] '%s': a carried state is torch's m and v, not "
                                "optimizer.state %s's codes", i, t->name, name);
    }
    return 0;
}

static int check_size(const loader *L, yaml_node_t *root, yaml_node_t *tensors, yaml_node_t *steps,
                      const gp_scenario *s)
{
    uint64_t elems = 0; /* what the run holds: the sampled elements of a sampled tensor */
    for (size_t t = 0; t < s->ntensors; t++)
        elems += gp_run_tensor_elements(s, t);
    uint64_t bpe = gp_run_bytes_per_element(s) + 4; /* + the generated fp32 gradient */
    if (elems > GP_MAX_RUN_BYTES / bpe)
        return gp_load_fail(L, tensors ? tensors : root,
                            "tensors: %llu elements at %llu bytes each for this configuration (steps > 1 keeps the "
                            "optimizer state, clipping or loss scaling the whole step) need %.1f GiB: more than the "
                            "limit of 64 GiB", (unsigned long long)elems, (unsigned long long)bpe,
                            (double)elems * (double)bpe / 1073741824.0);
    uint64_t work = gp_run_work(s);
    if (work > GP_MAX_WORK)
        return gp_load_fail(L, steps ? steps : tensors ? tensors : root,
                            "the run would take %.3g element-accumulations (steps %d x (%llu elements x %d micro-batches "
                            "+ %d)): more than the limit of 2^40 (docs/limits.md)", (double)work, s->steps,
                            (unsigned long long)elems, s->batch.microbatches, GP_RUN_STEP_OVERHEAD);
    return 0;
}

static int parse_scenario(loader *L, yaml_node_t *root, gp_scenario *s)
{
    yaml_node_t *v[K_N], *k[K_N];
    int e = 0;
    if (gp_load_fields(L, root, "", top_keys, K_N, v, k))
        return -1;
    if (v[K_SWEEP] && !L->sweep_ok)
        return gp_load_fail(L, k[K_SWEEP], "sweep: this file declares a sweep (several scenarios); `gradprec run` "
                            "expands it (gp_scenario_load_all_*)");
    if (v[K_NAME] && gp_load_get_name(L, v[K_NAME], "name", s->name))
        return -1;
    if (v[K_SEED] && gp_load_get_u64(L, v[K_SEED], "seed", &s->seed))
        return -1;
    if (v[K_STEPS] && gp_load_get_int(L, v[K_STEPS], "steps", 1, &s->steps))
        return -1;
    long long sample = 0;
    if (v[K_SAMPLE] && gp_load_get_ll(L, v[K_SAMPLE], "sample", 1, (long long)GP_MAX_WORK, &sample))
        return -1;
    s->sample = (uint64_t)sample;
    if (v[K_BATCH] && gp_load_parse_batch(L, v[K_BATCH], s))
        return -1;
    if (v[K_TENSORS]) {
        if (gp_load_parse_tensors(L, v[K_TENSORS], s))
            return -1;
    } else { /* one tensor "grad" of 1024 elements */
        s->tensors = malloc(sizeof *s->tensors);
        L->vnodes = calloc(1, sizeof *L->vnodes);
        if (!s->tensors || !L->vnodes)
            return gp_load_oom(L, root);
        gp_scenario_tensor_init(&s->tensors[0], "grad");
        s->ntensors = 1;
    }
    if (v[K_REDUCTION]) {
        if (gp_load_get_enum(L, v[K_REDUCTION], "reduction", gp_red_names, COUNT(gp_red_names), &e))
            return -1;
        s->reduction = (gp_reduction)e;
    }
    if (v[K_FULLBATCH]) {
        if (gp_load_get_enum(L, v[K_FULLBATCH], "fullbatch", gp_fb_names, COUNT(gp_fb_names), &e))
            return -1;
        s->fullbatch = (gp_fullbatch)e;
    }
    if (v[K_PRECISION] && gp_load_parse_precision(L, v[K_PRECISION], s))
        return -1;
    if (v[K_LOSS_SCALE] && gp_load_parse_loss_scale(L, v[K_LOSS_SCALE], s))
        return -1;
    if (v[K_CLIP] && gp_load_parse_clip(L, v[K_CLIP], s))
        return -1;
    if (v[K_OPTIMIZER] && gp_load_parse_optimizer(L, v[K_OPTIMIZER], s))
        return -1;
    if (v[K_SCHEDULE] && gp_load_parse_schedule(L, v[K_SCHEDULE], s))
        return -1;
    if (!L->total_given)
        s->schedule.total = s->steps;
    if (v[K_THRESHOLDS] && gp_load_parse_thresholds(L, v[K_THRESHOLDS], s))
        return -1;
    if (v[K_EXACT] && gp_load_parse_exact_metrics(L, v[K_EXACT], s))
        return -1;
    if (v[K_EXPECT] && gp_load_parse_expect(L, v[K_EXPECT], s))
        return -1;
    if (v[K_DIST] && gp_load_parse_distributed(L, v[K_DIST], s))
        return -1;
    if (gp_load_resolve_batch(L, root, s))
        return -1;
    if (gp_load_resolve_distributed(L, s))
        return -1;
    if (resolve_replay(L, s))
        return -1;
    if (resolve_carried(L, s))
        return -1;
    if (check_cols(L, v[K_PRECISION], s))
        return -1;
    if (s->precision.grad_scaled || s->precision.acc_scaled) { /* a block needs its neighbours: no sampled elements */
        int sampled = s->sample != 0;
        for (size_t i = 0; i < s->ntensors; i++)
            sampled |= s->tensors[i].sample != 0;
        if (sampled)
            return gp_load_fail(L, v[K_PRECISION], "precision.%s: a scaled format quantizes blocks of neighbouring "
                                "elements; it cannot run with `sample:` (drop one)",
                                s->precision.grad_scaled ? "grad" : "accumulator");
    }
    if (s->precision.acc_scaled && gp_scenario_distributed(s))
        return gp_load_fail(L, v[K_DIST], "distributed: a scaled precision.accumulator is not modelled across ranks "
                            "(each rank's local sum would need its own scale); use a plain accumulator");
    if (s->optimizer.lowbit && check_lowbit(L, v[K_OPTIMIZER], v[K_SAMPLE], s))
        return -1;
    if (s->thresholds.set[GP_M_TWIN_MISMATCH_COUNT] && !gp_scenario_has_twin(s))
        return gp_load_fail(L, v[K_THRESHOLDS],
                            "thresholds.twin_mismatch_count: no tensor has a `twin` (torch's state after "
                            "each step) to compare with");
    if (s->loss_scale.nreplay_scales) {
        int replayed = 0;
        for (size_t i = 0; i < s->ntensors; i++)
            replayed |= s->tensors[i].grad.kind == GP_DIST_REPLAY;
        if (!replayed)
            return gp_load_fail(L, v[K_LOSS_SCALE], "loss_scale.replay_scales: no tensor is replayed (the scales the "
                                "dump's entries carry)");
        if (s->loss_scale.nreplay_scales != s->steps)
            return gp_load_fail(L, v[K_LOSS_SCALE],
                                "loss_scale.replay_scales has %d entries, steps is %d (one scale per "
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
int gp_load_read_doc(const char *text, size_t len, const char *origin, yaml_document_t *doc, gp_error *err)
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
                  gp_load_is_null(gp_load_sval(root)))) {
        gp_error_set(err, "%s:1:1: the scenario is empty (expected a mapping of scenario keys)", origin);
    } else if (!yaml_parser_load(&parser, &extra)) { /* the rest of the stream must be clean */
        parser_error(&parser, origin, text, len, err);
    } else {
        yaml_node_t *r2 = yaml_document_get_root_node(&extra);
        loader L2 = {.origin = origin, .doc = &extra, .err = err};
        if (r2)
            gp_load_fail(&L2, r2, "only one YAML document is allowed in a scenario");
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
int gp_load_parse_doc(yaml_document_t *doc, const char *origin, const char *dir, const char *default_name,
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

int gp_load_text(const char *text, size_t len, const char *origin, const char *dir, const char *default_name,
                 gp_scenario *s, gp_error *err)
{
    yaml_document_t doc;
    gp_scenario_init(s);
    if (!text)
        text = "";
    if (gp_load_read_doc(text, len, origin, &doc, err) != 0)
        return -1;
    int rc = gp_load_parse_doc(&doc, origin, dir, default_name, 0, s, err);
    yaml_document_delete(&doc);
    if (rc == 0 && err)
        err->msg[0] = '\0';
    return rc;
}
