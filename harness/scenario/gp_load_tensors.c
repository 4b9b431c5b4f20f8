/* gp_load_tensors.c — the loader's tensors: each tensor's distributions (generated,
 * explicit values, replayed), sample, carried state and twin, and the batch (micro-batches,
 * token counts: parsed here, resolved once the tensors are known). */
#include "gp_scenario_internal.h"

/* ---- distributions ---- */

enum { D_DIST, D_SCALE, D_SIGMA, D_ALPHA, D_SIGN, D_SPARSITY, D_OUTLIERS, D_SHRINK, D_TOKEN_SNR, D_REPLAY, D_KEY,
       D_VALUES, D_N };
static const char *const dist_keys[D_N] = {"dist", "scale", "sigma", "alpha", "sign", "sparsity", "outliers",
                                           "shrink", "token_snr", "replay", "key", "values"};
enum { O_FRAC, O_SCALE, O_N };
static const char *const outlier_keys[O_N] = {"frac", "scale"};

int gp_load_oom(const loader *L, const yaml_node_t *n)
{
    return gp_load_fail(L, n, "out of memory");
}

/* grad: {values: [[...], ...]}: the per-token values of each micro-batch. Counts are
 * checked before anything is allocated (aliases could otherwise multiply them). */
static int parse_values(const loader *L, yaml_node_t *n, const char *path, gp_dist *d)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return gp_load_fail(L, n, "%s: expected a list of micro-batches (lists of per-token values), got %s",
                            path, gp_load_kind(n));
    size_t nmb = gp_load_seq_len(n);
    if (nmb == 0)
        return gp_load_fail(L, n, "%s is empty: give at least one micro-batch", path);
    if (nmb > GP_MAX_MICROBATCHES)
        return gp_load_fail(L, n, "%s has too many micro-batches: %zu (at most %d)", path, nmb,
                            GP_MAX_MICROBATCHES);
    uint64_t total = 0;
    for (size_t k = 0; k < nmb; k++) {
        yaml_node_t *m = gp_load_seq_item(L, n, k);
        if (m->type != YAML_SEQUENCE_NODE)
            return gp_load_fail(L, m, "%s[%zu]: expected a list of per-token values, got %s", path, k, gp_load_kind(m));
        size_t nt = gp_load_seq_len(m);
        if (nt == 0)
            return gp_load_fail(L, m, "%s[%zu] is empty: a micro-batch has at least one token", path, k);
        if (nt > (size_t)GP_MAX_TOKENS)
            return gp_load_fail(L, m, "%s[%zu] has too many tokens: %zu (at most %ld)", path, k, nt, GP_MAX_TOKENS);
        total += nt;
    }
    if (total > INT32_MAX)
        return gp_load_fail(L, n, "%s has %llu values in all: the total token count must fit in 2^31-1",
                            path, (unsigned long long)total);
    d->ntok = calloc(nmb, sizeof *d->ntok);
    d->values = calloc(nmb, sizeof *d->values);
    if (!d->ntok || !d->values) {
        free(d->ntok);
        free(d->values);
        d->ntok = NULL;
        d->values = NULL;
        return gp_load_oom(L, n);
    }
    d->nmb = nmb;
    d->kind = GP_DIST_VALUES;
    for (size_t k = 0; k < nmb; k++) {
        yaml_node_t *m = gp_load_seq_item(L, n, k);
        size_t nt = gp_load_seq_len(m);
        d->values[k] = malloc(nt * sizeof(double));
        if (!d->values[k])
            return gp_load_oom(L, m);
        d->ntok[k] = nt;
        for (size_t t = 0; t < nt; t++) {
            char p[PATHLEN];
            gp_load_pathf(p, "%s[%zu][%zu]", path, k, t);
            if (gp_load_get_double(L, gp_load_seq_item(L, m, t), p, &d->values[k][t]))
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
        return gp_load_fail(L, map, "%s: replay needs both 'replay' (the dump) and 'key' (the tensor's name in it)",
                            path);
    gp_load_pathf(p, "%s.replay", path);
    if (gp_load_get_string(L, rn, p, &file))
        return -1;
    gp_load_pathf(p, "%s.key", path);
    if (gp_load_get_string(L, kn, p, &key))
        return -1;
    if (!*file || !*key)
        return gp_load_fail(L, !*file ? rn : kn, "%s: empty %s", path, !*file ? "replay path" : "key");
    size_t need = strlen(L->dir) + strlen(file) + 2;
    if (!(*file_out = malloc(need)) || !(*key_out = strdup(key)))
        return gp_load_oom(L, map);
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
    if (gp_load_fields(L, n, path, dist_keys, is_grad ? D_N : D_N - 1, v, k))
        return -1;
    if (v[D_REPLAY] || v[D_KEY]) { /* {replay: FILE, key: KEY} and nothing else */
        for (int i = 0; i < D_N; i++)
            if (v[i] && i != D_REPLAY && i != D_KEY)
                return gp_load_fail(L, k[i], "%s: '%s' cannot be combined with replay", path, dist_keys[i]);
        if (get_replay_ref(L, n, v[D_REPLAY], v[D_KEY], path, &d->replay, &d->replay_key))
            return -1;
        d->kind = GP_DIST_REPLAY;
        *replay_node = v[D_REPLAY];
        return 0;
    }
    if (v[D_VALUES]) {
        for (int i = 0; i < D_VALUES; i++)
            if (v[i])
                return gp_load_fail(L, k[i], "%s: '%s' cannot be combined with explicit values", path,
                                    dist_keys[i]);
        *values_node = v[D_VALUES];
        gp_load_pathf(p, "%s.values", path);
        return parse_values(L, v[D_VALUES], p, d);
    }
    if (v[D_DIST]) {
        int kd = 0;
        gp_load_pathf(p, "%s.dist", path);
        if (gp_load_get_enum(L, v[D_DIST], p, gp_dist_names, COUNT(gp_dist_names), &kd))
            return -1;
        d->kind = (gp_dist_kind)kd;
    }
#define DIST_NUM(key, field, lo, lo_open, hi, hi_open)                                   \
    if (v[key]) {                                                                        \
        gp_load_pathf(p, "%s.%s", path, dist_keys[key]);                           \
        if (gp_load_get_double_in(L, v[key], p, lo, lo_open, hi, hi_open, &d->field))           \
            return -1;                                                                   \
    }
    DIST_NUM(D_SCALE, scale, 0.0, is_grad, INFINITY, 0)
    DIST_NUM(D_SIGMA, sigma, 0.0, 1, INFINITY, 0)
    DIST_NUM(D_ALPHA, alpha, 0.0, 1, INFINITY, 0)
    DIST_NUM(D_SIGN, neg_frac, 0.0, 0, 1.0, 0)
    DIST_NUM(D_SPARSITY, sparsity, 0.0, 0, 1.0, 1)
    DIST_NUM(D_SHRINK, shrink, 0.0, 1, INFINITY, 0)
    if (v[D_TOKEN_SNR] && !is_grad)
        return gp_load_fail(L, k[D_TOKEN_SNR], "%s: token_snr describes a gradient, not initial weights", path);
    DIST_NUM(D_TOKEN_SNR, token_snr, 0.0, 1, INFINITY, 0)
#undef DIST_NUM
    if (v[D_OUTLIERS]) {
        yaml_node_t *ov[O_N], *ok[O_N];
        char op[PATHLEN];
        gp_load_pathf(op, "%s.outliers", path);
        if (gp_load_fields(L, v[D_OUTLIERS], op, outlier_keys, O_N, ov, ok))
            return -1;
        gp_load_pathf(p, "%s.frac", op);
        if (ov[O_FRAC] && gp_load_get_double_in(L, ov[O_FRAC], p, 0.0, 0, 1.0, 0, &d->outlier_frac))
            return -1;
        gp_load_pathf(p, "%s.scale", op);
        if (ov[O_SCALE] && gp_load_get_double_in(L, ov[O_SCALE], p, 0.0, 1, INFINITY, 0, &d->outlier_scale))
            return -1;
    }
    return 0;
}

/* ---- tensors ---- */

enum { T_NAME, T_SIZE, T_GRAD, T_WEIGHT, T_SAMPLE, T_POPULATION, T_STATE, T_TWIN, T_OPT, T_COLS, T_N };
static const char *const tensor_keys[T_N] = {"name", "size", "grad", "weight", "sample", "population",
                                             "state", "twin", "optimizer", "cols"};

/* A list of `steps` learning rates >= 0 (optimizer.lr_steps, tensors[i].optimizer.lr_steps):
 * the length is checked once steps is known (parse_scenario). */
int gp_load_get_lr_steps(const loader *L, yaml_node_t *q, const char *path, double **out, int *n)
{
    size_t len = q->type == YAML_SEQUENCE_NODE ? gp_load_seq_len(q) : 0;
    if (len == 0)
        return gp_load_fail(L, q, "%s: expected a list of the LR of each optimizer step, got %s", path,
                            q->type == YAML_SEQUENCE_NODE ? "an empty list" : gp_load_kind(q));
    if (len > (size_t)INT_MAX / 2)
        return gp_load_fail(L, q, "%s has too many entries", path);
    if (!(*out = malloc(len * sizeof **out)))
        return gp_load_oom(L, q);
    *n = (int)len;
    for (size_t i = 0; i < len; i++) {
        char p[PATHLEN];
        gp_load_pathf(p, "%s[%zu]", path, i);
        if (gp_load_get_double_in(L, gp_load_seq_item(L, q, i), p, 0.0, 0, INFINITY, 0, &(*out)[i]))
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
        gp_load_pathf(p, "%s.state", path);
        if (gp_load_fields(L, v[T_STATE], p, state_keys, ST_N, sv, sk) ||
            get_replay_ref(L, v[T_STATE], sv[ST_REPLAY], sv[ST_KEY], p, &t->state.replay, &t->state.key))
            return -1;
        if (!sv[ST_STEP])
            return gp_load_fail(L, v[T_STATE],
                                "%s: missing required key 'step' (torch's state['step'] when the capture "
                                "began)", p);
        long long step = 0;
        gp_load_pathf(p, "%s.state.step", path);
        if (gp_load_get_ll(L, sv[ST_STEP], p, 0, INT_MAX, &step))
            return -1;
        t->state.step = (long)step;
        if (t->weight.kind != GP_DIST_REPLAY)
            return gp_load_fail(L, v[T_STATE],
                                "%s.state: the optimizer state at entry needs the weights at entry: replay "
                                "'weight' too", path);
        L->tn[i].state = v[T_STATE];
    }
    if (v[T_TWIN]) {
        gp_load_pathf(p, "%s.twin", path);
        if (gp_load_fields(L, v[T_TWIN], p, state_keys, ST_STEP, sv, sk) ||
            get_replay_ref(L, v[T_TWIN], sv[ST_REPLAY], sv[ST_KEY], p, &t->twin.replay, &t->twin.key))
            return -1;
        if (t->grad.kind != GP_DIST_REPLAY)
            return gp_load_fail(L, v[T_TWIN], "%s.twin: torch's state after each step is compared on a replayed run: "
                                "replay 'grad' too", path);
        L->tn[i].twin = v[T_TWIN];
    }
    if (v[T_OPT]) {
        yaml_node_t *ov[TO_N], *ok[TO_N];
        gp_load_pathf(p, "%s.optimizer", path);
        if (gp_load_fields(L, v[T_OPT], p, topt_keys, TO_N, ov, ok))
            return -1;
        gp_load_pathf(p, "%s.optimizer.lr", path);
        if (ov[TO_LR] && gp_load_get_double_in(L, ov[TO_LR], p, 0.0, 0, INFINITY, 0, &t->optimizer.lr))
            return -1;
        t->optimizer.set_lr = ov[TO_LR] != NULL;
        gp_load_pathf(p, "%s.optimizer.weight_decay", path);
        if (ov[TO_WD] && gp_load_get_double_in(L, ov[TO_WD], p, 0.0, 0, INFINITY, 0, &t->optimizer.weight_decay))
            return -1;
        t->optimizer.set_wd = ov[TO_WD] != NULL;
        gp_load_pathf(p, "%s.optimizer.lr_steps", path);
        if (ov[TO_LR_STEPS] && gp_load_get_lr_steps(L, ov[TO_LR_STEPS], p, &t->optimizer.lr_steps,
                                                    &t->optimizer.nlr_steps))
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
    gp_load_pathf(path, "tensors[%zu]", i);
    if (gp_load_fields(L, n, path, tensor_keys, T_N, v, k))
        return -1;
    if (!v[T_NAME])
        return gp_load_fail(L, n, "%s: missing required key 'name'", path);
    gp_load_pathf(p, "%s.name", path);
    if (gp_load_get_name(L, v[T_NAME], p, t->name))
        return -1;
    L->name_nodes[i] = v[T_NAME];
    gp_load_pathf(p, "%s.grad", path);
    if (v[T_GRAD] && parse_dist(L, v[T_GRAD], p, 1, &t->grad, &L->vnodes[i], &L->tn[i].grad))
        return -1;
    gp_load_pathf(p, "%s.weight", path);
    if (v[T_WEIGHT] && parse_dist(L, v[T_WEIGHT], p, 0, &t->weight, NULL, &L->tn[i].weight))
        return -1;
    if (t->weight.kind == GP_DIST_REPLAY && t->grad.kind != GP_DIST_REPLAY)
        return gp_load_fail(L, v[T_WEIGHT], "%s.weight: replayed weights need a replayed grad", path);
    if (parse_carried(L, v, path, i, t))
        return -1;
    L->tn[i].size = v[T_SIZE];
    L->tn[i].sample = v[T_SAMPLE];
    gp_load_pathf(p, "%s.sample", path);
    long long sample = 0;
    if (v[T_SAMPLE] && gp_load_get_ll(L, v[T_SAMPLE], p, 1, (long long)GP_MAX_TENSOR_SIZE, &sample))
        return -1;
    if (v[T_SAMPLE] && t->grad.kind == GP_DIST_VALUES)
        return gp_load_fail(L, v[T_SAMPLE], "%s: a tensor of explicit values is never sampled (it has one element)", p);
    t->sample = (size_t)sample;
    L->tn[i].population = v[T_POPULATION];
    gp_load_pathf(p, "%s.population", path);
    long long population = 0;
    if (v[T_POPULATION] && gp_load_get_ll(L, v[T_POPULATION], p, 1, (long long)1 << 62, &population))
        return -1;
    if (v[T_POPULATION] && t->grad.kind != GP_DIST_REPLAY)
        return gp_load_fail(L, v[T_POPULATION], "%s: population applies to replayed tensors (a dump holding a sample)",
                            p);
    t->population = (uint64_t)population;
    gp_load_pathf(p, "%s.size", path);
    long long size = t->grad.kind == GP_DIST_VALUES ? 1 : DEFAULT_SIZE;
    if (v[T_SIZE] && gp_load_get_ll(L, v[T_SIZE], p, 1, (long long)GP_MAX_TENSOR_SIZE, &size))
        return -1;
    if (t->grad.kind == GP_DIST_VALUES && size != 1)
        return gp_load_fail(L, v[T_SIZE], "%s must be 1 for a tensor with explicit grad values (got %lld)", p, size);
    t->size = (size_t)size;
    L->tn[i].cols = v[T_COLS];
    gp_load_pathf(p, "%s.cols", path);
    long long cols = 0;
    if (v[T_COLS] && gp_load_get_ll(L, v[T_COLS], p, 1, (long long)GP_MAX_TENSOR_SIZE, &cols))
        return -1;
    t->cols = (size_t)cols; /* against the size once a replayed size is known: gp_load_check_cols */
    if (t->grad.kind != GP_DIST_REPLAY && t->sample > t->size) /* replayed: checked against the dump */
        return gp_load_fail(L, v[T_SAMPLE], "%s.sample is %zu, more than the tensor's %zu elements", path, t->sample,
                            t->size);
    L->elements += t->size;
    if (L->elements > MEM_LIMIT_ELEMS)
        return gp_load_fail(L, v[T_SIZE] ? v[T_SIZE] : n,
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
        return gp_load_oom(L, L->name_nodes[0]);
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
    return gp_load_fail(L, L->name_nodes[dup], "duplicate tensor name '%s' (first at %lu:%lu)",
                        s->tensors[dup].name, (unsigned long)f->start_mark.line + 1,
                        (unsigned long)f->start_mark.column + 1);
}

int gp_load_parse_tensors(loader *L, yaml_node_t *n, gp_scenario *s)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return gp_load_fail(L, n, "tensors: expected a list of tensors, got %s", gp_load_kind(n));
    size_t count = gp_load_seq_len(n);
    if (count == 0)
        return gp_load_fail(L, n, "tensors: at least one tensor is required");
    s->tensors = calloc(count, sizeof *s->tensors);
    L->vnodes = calloc(count, sizeof *L->vnodes);
    L->name_nodes = calloc(count, sizeof *L->name_nodes);
    L->tn = calloc(count, sizeof *L->tn);
    if (!s->tensors || !L->vnodes || !L->name_nodes || !L->tn)
        return gp_load_oom(L, n);
    for (size_t i = 0; i < count; i++)
        gp_scenario_tensor_init(&s->tensors[i], "");
    s->ntensors = count;
    for (size_t i = 0; i < count; i++)
        if (parse_tensor(L, gp_load_seq_item(L, n, i), i, &s->tensors[i]))
            return -1;
    return check_unique_names(L, s);
}

/* ---- batch: parsed here, resolved once the tensors are known ---- */

enum { B_ACC, B_MB, B_TOKENS, B_N };
static const char *const batch_keys[B_N] = {"accumulation_steps", "microbatches", "tokens"};
enum { R_MIN, R_MAX, R_SEQ, R_N };
static const char *const range_keys[R_N] = {"min", "max", "sequences"};

int gp_load_parse_batch(loader *L, yaml_node_t *n, gp_scenario *s)
{
    yaml_node_t *v[B_N], *k[B_N];
    if (gp_load_fields(L, n, "batch", batch_keys, B_N, v, k))
        return -1;
    if (v[B_MB] && gp_load_get_int(L, v[B_MB], "batch.microbatches", 1, &s->batch.microbatches))
        return -1;
    if (v[B_MB] && s->batch.microbatches > GP_MAX_MICROBATCHES)
        return gp_load_fail(L, v[B_MB], "batch.microbatches is too large: %d (at most %d)",
                            s->batch.microbatches, GP_MAX_MICROBATCHES);
    if (v[B_ACC] && gp_load_get_int(L, v[B_ACC], "batch.accumulation_steps", 1, &s->batch.accumulation_steps))
        return -1;
    L->mb = v[B_MB];
    L->acc = v[B_ACC];
    L->tok = v[B_TOKENS];
    yaml_node_t *t = v[B_TOKENS];
    long long x = 0;
    if (!t)
        return 0;
    if (t->type == YAML_SCALAR_NODE) { /* one count for every micro-batch */
        if (gp_load_get_ll(L, t, "batch.tokens", 1, GP_MAX_TOKENS, &x))
            return -1;
        L->tok_kind = TOK_INT;
        L->tok_int = (long)x;
    } else if (t->type == YAML_SEQUENCE_NODE && gp_load_seq_len(t) > 0 &&
               gp_load_seq_item(L, t, 0)->type == YAML_SEQUENCE_NODE) {
        /* one list per optimizer step: step s has its own micro-batches */
        size_t ns = gp_load_seq_len(t);
        if (ns > (size_t)INT_MAX / 2)
            return gp_load_fail(L, t, "batch.tokens has too many steps: %zu", ns);
        if (!(s->batch.step_tokens = calloc(ns + 1, sizeof *s->batch.step_tokens)) ||
            !(s->batch.step_mb = calloc(ns, sizeof *s->batch.step_mb)))
            return gp_load_oom(L, t);
        for (size_t st = 0; st < ns; st++) {
            char p[PATHLEN];
            yaml_node_t *q = gp_load_seq_item(L, t, st);
            size_t len = q->type == YAML_SEQUENCE_NODE ? gp_load_seq_len(q) : 0;
            gp_load_pathf(p, "batch.tokens[%zu]", st);
            if (q->type != YAML_SEQUENCE_NODE)
                return gp_load_fail(L, q,
                                    "%s: expected the list of step %zu's token counts (one per micro-batch), got %s",
                                    p, st, gp_load_kind(q));
            if (len == 0)
                return gp_load_fail(L, q, "%s is an empty list: a step has at least one micro-batch", p);
            if (len > GP_MAX_MICROBATCHES)
                return gp_load_fail(L, q, "%s has too many entries: %zu (at most %d)", p, len, GP_MAX_MICROBATCHES);
            if (!(s->batch.step_tokens[st] = malloc(len * sizeof(long))))
                return gp_load_oom(L, q);
            s->batch.step_mb[st] = (int)len;
            if ((size_t)L->tok_len < len)
                L->tok_len = len; /* max K_s */
            for (size_t j = 0; j < len; j++) {
                gp_load_pathf(p, "batch.tokens[%zu][%zu]", st, j);
                if (gp_load_get_ll(L, gp_load_seq_item(L, q, j), p, 1, GP_MAX_TOKENS, &x))
                    return -1;
                s->batch.step_tokens[st][j] = (long)x;
            }
        }
        L->tok_kind = TOK_STEPS;
        L->tok_steps = ns;
    } else if (t->type == YAML_SEQUENCE_NODE) { /* one count per micro-batch */
        size_t len = gp_load_seq_len(t);
        if (len == 0)
            return gp_load_fail(L, t, "batch.tokens is an empty list");
        if (len > GP_MAX_MICROBATCHES)
            return gp_load_fail(L, t, "batch.tokens has too many entries: %zu (at most %d)", len,
                                GP_MAX_MICROBATCHES);
        s->batch.tokens = malloc(len * sizeof *s->batch.tokens);
        if (!s->batch.tokens)
            return gp_load_oom(L, t);
        for (size_t i = 0; i < len; i++) {
            char p[PATHLEN];
            gp_load_pathf(p, "batch.tokens[%zu]", i);
            if (gp_load_get_ll(L, gp_load_seq_item(L, t, i), p, 1, GP_MAX_TOKENS, &x))
                return -1;
            s->batch.tokens[i] = (long)x;
        }
        L->tok_kind = TOK_LIST;
        L->tok_len = len;
    } else { /* {min, max}: drawn per micro-batch from the seed */
        yaml_node_t *rv[R_N], *rk[R_N];
        long long lo = 0, hi = 0;
        if (gp_load_fields(L, t, "batch.tokens", range_keys, R_N, rv, rk))
            return -1;
        if (!rv[R_MIN] || !rv[R_MAX])
            return gp_load_fail(L, t, "batch.tokens: a range needs both 'min' and 'max'");
        if (gp_load_get_ll(L, rv[R_MIN], "batch.tokens.min", 1, GP_MAX_TOKENS, &lo) ||
            gp_load_get_ll(L, rv[R_MAX], "batch.tokens.max", 1, GP_MAX_TOKENS, &hi))
            return -1;
        if (hi < lo)
            return gp_load_fail(L, rv[R_MAX], "batch.tokens.max (%lld) must be at least min (%lld)", hi, lo);
        long long seqs = 1;
        if (rv[R_SEQ] && gp_load_get_ll(L, rv[R_SEQ], "batch.tokens.sequences", 1, GP_MAX_MICROBATCHES, &seqs))
            return -1;
        if (seqs * hi > GP_MAX_TOKENS)
            return gp_load_fail(L, rv[R_SEQ], "batch.tokens: %lld sequences of up to %lld tokens exceed %ld tokens a "
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
        return gp_load_fail(L, L->tok, "batch.tokens: per-step token counts cannot go with explicit grad values "
                            "(tensors[%zu].grad.values fixes one batch)", first_v);
    if (L->dist)
        return gp_load_fail(L, L->tok, "batch.tokens: per-step token counts are not simulated with `distributed:` "
                            "(give one list, or distributed.tokens)");
    if (L->tok_steps != (size_t)s->steps)
        return gp_load_fail(L, L->tok, "batch.tokens has %zu step lists but steps is %d (one list per optimizer step)",
                            L->tok_steps, s->steps);
    if (L->mb && (size_t)s->batch.microbatches != K)
        return gp_load_fail(L, L->mb,
                            "batch.microbatches is %d but the longest step of batch.tokens has %zu micro-batches "
                            "(with per-step counts, microbatches is the largest K_s)", s->batch.microbatches, K);
    s->batch.microbatches = (int)K;
    if (!L->acc)
        s->batch.accumulation_steps = (int)K;
    else if ((size_t)s->batch.accumulation_steps < K)
        return gp_load_fail(L, L->acc,
                            "batch.accumulation_steps (%d) must be at least the largest step of batch.tokens "
                            "(%zu micro-batches)", s->batch.accumulation_steps, K);
    for (int st = 0; st < s->steps; st++) {
        uint64_t N = 0;
        for (int k = 0; k < s->batch.step_mb[st]; k++)
            N += (uint64_t)s->batch.step_tokens[st][k];
        if (N > INT32_MAX)
            return gp_load_fail(L, gp_load_seq_item(L, L->tok, (size_t)st),
                                "batch.tokens[%d]: the total N = %llu tokens does not "
                                "fit in 2^31-1", st, (unsigned long long)N);
        if ((size_t)s->batch.step_mb[st] == K && !s->batch.tokens) {
            if (!(s->batch.tokens = malloc(K * sizeof *s->batch.tokens)))
                return gp_load_oom(L, L->tok);
            memcpy(s->batch.tokens, s->batch.step_tokens[st], K * sizeof *s->batch.tokens);
        }
    }
    return 0;
}

/* Settle K, A and the token counts. K comes from batch.microbatches, else the length
 * of a tokens list, else the first tensor with explicit values, else 8; the tokens
 * from batch.tokens, else that first values tensor, else 512 each. Every source given
 * must agree, and N = sum of tokens must fit in 2^31-1. */
int gp_load_resolve_batch(loader *L, yaml_node_t *root, gp_scenario *s)
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
        gp_load_pathf(ksrc, "batch.microbatches is %zu", K);
    } else if (L->tok_kind == TOK_LIST) {
        K = L->tok_len;
        gp_load_pathf(ksrc, "batch.tokens has %zu entries", K);
    } else if (first_v != SIZE_MAX) {
        K = s->tensors[first_v].grad.nmb;
        gp_load_pathf(ksrc, "tensors[%zu].grad.values has %zu", first_v, K);
    } else if (L->acc) { /* only the window is given: full windows of it */
        K = (size_t)s->batch.accumulation_steps;
        gp_load_pathf(ksrc, "batch.accumulation_steps is %zu", K);
    } else {
        K = (size_t)s->batch.microbatches;
        gp_load_pathf(ksrc, "batch.microbatches is %zu (the default)", K);
    }
    if (L->tok_kind == TOK_LIST && L->tok_len != K)
        return gp_load_fail(L, L->tok, "batch.tokens has %zu entries but %s", L->tok_len, ksrc);
    for (size_t i = 0; i < s->ntensors; i++)
        if (s->tensors[i].grad.kind == GP_DIST_VALUES && s->tensors[i].grad.nmb != K)
            return gp_load_fail(L, L->vnodes[i], "tensors[%zu].grad.values has %zu micro-batches but %s", i,
                                s->tensors[i].grad.nmb, ksrc);
    s->batch.microbatches = (int)K;
    if (!L->acc)
        s->batch.accumulation_steps = (int)K;
    else if ((size_t)s->batch.accumulation_steps < K)
        return gp_load_fail(L, L->acc,
                            "batch.accumulation_steps (%d) must be at least batch.microbatches (%zu); "
                            "fewer micro-batches than accumulation steps make a partial last window",
                            s->batch.accumulation_steps, K);

    if (L->tok_kind != TOK_LIST) {
        s->batch.tokens = malloc(K * sizeof *s->batch.tokens);
        if (!s->batch.tokens)
            return gp_load_oom(L, root);
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
                    return gp_load_fail(L, gp_load_seq_item(L, L->vnodes[i], k),
                                        "tensors[%zu].grad.values[%zu] has %zu token(s) but "
                                        "tensors[%zu].grad.values[%zu] has %ld",
                                        i, k, d->ntok[k], first_v, k, s->batch.tokens[k]);
                return gp_load_fail(L, gp_load_seq_item(L, L->vnodes[i], k),
                                    "tensors[%zu].grad.values[%zu] has %zu token(s) but batch.tokens[%zu] is %ld",
                                    i, k, d->ntok[k], k, s->batch.tokens[k]);
            }
    }
    uint64_t N = 0;
    for (size_t k = 0; k < K; k++)
        N += (uint64_t)s->batch.tokens[k];
    if (N > INT32_MAX)
        return gp_load_fail(L, L->tok ? L->tok : root,
                            "batch.tokens: the total N = %llu tokens over %zu micro-batches does not fit "
                            "in 2^31-1",
                            (unsigned long long)N, K);
    return 0;
}
