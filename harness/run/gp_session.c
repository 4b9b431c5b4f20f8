/* gp_session.c — see gp_session.h. The skeleton is loaded once by the scenario loader (its
 * checks, and the tensors' names, sizes, samples and formats); each closed step re-reads
 * the skeleton's YAML into a libyaml document, writes the keys the fed data gives (each
 * tensor's grad/weight/state/twin naming the step's memory dump, population, steps,
 * batch), merges the caller's overrides, and emits it as text for the loader. */
#include "gp_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "../sources/gp_generate.h"
#include "../sources/gp_replay.h"
#include "../sources/gp_sample.h"
#include "../scenario/gp_scenario.h"
#include "../../kernels/gp_names.h"

#define MAX_MB 4096 /* micro-batches of one step (the loader has its own, lower limits) */

static const char *const qname[GP_FEED_NQ] = {"param", "exp_avg", "exp_avg_sq", "master"};

typedef struct {
    char *name;
    uint64_t M, n;   /* elements; fed per array */
    uint64_t *idx;   /* [n] sampled elements, NULL when whole */
    int fed;         /* fed in the open micro-batch */
    int have[2];     /* bit q: quantity q fed before (0) / after (1) the step */
    int64_t t0;      /* torch's state['step'] at entry (with a fed state) */
} stensor;

struct gp_session {
    char *skel;          /* the skeleton's text */
    size_t skel_len;
    uint64_t seed;
    gp_format grad, param, state;
    int master, acc_given;
    size_t nt;
    stensor *t;
    /* the step being fed */
    gp_replay *dump;     /* NULL until the step's first feed */
    int64_t tok[MAX_MB];
    int nmb, open;       /* closed micro-batches; one is open (something fed since) */
    uint64_t steps;      /* closed so far */
    uint64_t serial;     /* names of memory dumps */
};

size_t gp_session_ntensors(const gp_session *s)
{
    return s->nt;
}

const char *gp_session_tensor_name(const gp_session *s, size_t t)
{
    return t < s->nt ? s->t[t].name : NULL;
}

uint64_t gp_session_tensor_size(const gp_session *s, size_t t)
{
    return t < s->nt ? s->t[t].M : 0;
}

uint64_t gp_session_tensor_count(const gp_session *s, size_t t)
{
    return t < s->nt ? s->t[t].n : 0;
}

const uint64_t *gp_session_tensor_indices(const gp_session *s, size_t t)
{
    return t < s->nt ? s->t[t].idx : NULL;
}

/* ---- YAML documents ---- */

static yaml_node_t *nd(yaml_document_t *d, int id)
{
    return yaml_document_get_node(d, id);
}

static int is_scalar(yaml_document_t *d, int id, const char *text)
{
    yaml_node_t *n = nd(d, id);
    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == strlen(text) &&
           !memcmp(n->data.scalar.value, text, n->data.scalar.length);
}

/* The value of key in mapping map, 0 when absent. */
static int map_get(yaml_document_t *d, int map, const char *key)
{
    yaml_node_t *m = nd(d, map);
    if (!m || m->type != YAML_MAPPING_NODE)
        return 0;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++)
        if (is_scalar(d, p->key, key))
            return p->value;
    return 0;
}

static int add_scalar(yaml_document_t *d, const char *text)
{
    return yaml_document_add_scalar(d, NULL, (yaml_char_t *)text, -1, YAML_PLAIN_SCALAR_STYLE);
}

/* map[key] = value (replaced, or appended); 0, or -1 when out of memory. */
static int map_set(yaml_document_t *d, int map, const char *key, int value)
{
    yaml_node_t *m = nd(d, map);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++)
        if (is_scalar(d, p->key, key)) {
            p->value = value;
            return 0;
        }
    int k = add_scalar(d, key);
    return k && value && yaml_document_append_mapping_pair(d, map, k, value) ? 0 : -1;
}

static int map_set_text(yaml_document_t *d, int map, const char *key, const char *text)
{
    int v = add_scalar(d, text);
    return v ? map_set(d, map, key, v) : -1;
}

/* {replay: dump, key: key}, plus step: t0 when t0 >= 0; 0 when out of memory. */
static int ref_node(yaml_document_t *d, const char *dump, const char *key, int64_t t0)
{
    char buf[32];
    int m = yaml_document_add_mapping(d, NULL, YAML_FLOW_MAPPING_STYLE);
    if (!m || map_set_text(d, m, "replay", dump) || map_set_text(d, m, "key", key))
        return 0;
    snprintf(buf, sizeof buf, "%lld", (long long)t0);
    return t0 < 0 || !map_set_text(d, m, "step", buf) ? m : 0;
}

/* A copy of node id of document src in document dst (0 when out of memory). */
static int copy_node(yaml_document_t *dst, yaml_document_t *src, int id)
{
    yaml_node_t *n = nd(src, id);
    if (n->type == YAML_SCALAR_NODE)
        return yaml_document_add_scalar(dst, n->tag, n->data.scalar.value, (int)n->data.scalar.length,
                                        n->data.scalar.style);
    if (n->type == YAML_SEQUENCE_NODE) {
        int c = yaml_document_add_sequence(dst, n->tag, n->data.sequence.style);
        size_t k = (size_t)(nd(src, id)->data.sequence.items.top - nd(src, id)->data.sequence.items.start);
        for (size_t i = 0; c && i < k; i++) {
            int v = copy_node(dst, src, nd(src, id)->data.sequence.items.start[i]);
            if (!v || !yaml_document_append_sequence_item(dst, c, v))
                return 0;
        }
        return c;
    }
    int c = yaml_document_add_mapping(dst, n->tag, n->data.mapping.style);
    size_t k = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    for (size_t i = 0; c && i < k; i++) {
        yaml_node_pair_t p = nd(src, id)->data.mapping.pairs.start[i];
        int kk = copy_node(dst, src, p.key), vv = kk ? copy_node(dst, src, p.value) : 0;
        if (!vv || !yaml_document_append_mapping_pair(dst, c, kk, vv))
            return 0;
    }
    return c;
}

/* Merge mapping sid of src into mapping did of dst: a key whose values are mappings on
 * both sides merges, any other value replaces. At the root, `tensors` of src is a
 * mapping from tensor names to mappings merged into those tensors. */
static int merge(yaml_document_t *dst, int did, yaml_document_t *src, int sid, int root, gp_error *err)
{
    size_t k = (size_t)(nd(src, sid)->data.mapping.pairs.top - nd(src, sid)->data.mapping.pairs.start);
    for (size_t i = 0; i < k; i++) {
        yaml_node_pair_t p = nd(src, sid)->data.mapping.pairs.start[i];
        yaml_node_t *kn = nd(src, p.key);
        if (kn->type != YAML_SCALAR_NODE)
            return gp_error_set(err, "overrides: a key that is not a plain string");
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kn->data.scalar.length, (const char *)kn->data.scalar.value);
        int cur = map_get(dst, did, key);
        yaml_node_t *sv = nd(src, p.value);
        if (root && !strcmp(key, "tensors")) {
            if (sv->type != YAML_MAPPING_NODE)
                return gp_error_set(err, "overrides: tensors is a mapping from a tensor's name to its keys");
            size_t kt = (size_t)(sv->data.mapping.pairs.top - sv->data.mapping.pairs.start);
            for (size_t j = 0; j < kt; j++) {
                yaml_node_pair_t q = nd(src, p.value)->data.mapping.pairs.start[j];
                yaml_node_t *nn = nd(src, q.key), *seq = nd(dst, cur);
                int target = 0;
                for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
                    int name = map_get(dst, *it, "name");
                    yaml_node_t *tn = name ? nd(dst, name) : NULL;
                    if (tn && nn->type == YAML_SCALAR_NODE && tn->data.scalar.length == nn->data.scalar.length &&
                        !memcmp(tn->data.scalar.value, nn->data.scalar.value, nn->data.scalar.length))
                        target = *it;
                }
                if (!target || nd(src, q.value)->type != YAML_MAPPING_NODE)
                    return gp_error_set(err, "overrides: tensors.%.*s: %s",
                                        nn->type == YAML_SCALAR_NODE ? (int)nn->data.scalar.length : 1,
                                        nn->type == YAML_SCALAR_NODE ? (const char *)nn->data.scalar.value : "?",
                                        target ? "not a mapping" : "no tensor of this name in the skeleton");
                if (merge(dst, target, src, q.value, 0, err) != 0)
                    return -1;
            }
            continue;
        }
        if (cur && nd(dst, cur)->type == YAML_MAPPING_NODE && sv->type == YAML_MAPPING_NODE) {
            if (merge(dst, cur, src, p.value, 0, err) != 0)
                return -1;
            continue;
        }
        int v = copy_node(dst, src, p.value);
        if (!v || map_set(dst, did, key, v) != 0)
            return gp_error_set(err, "overrides: out of memory");
    }
    return 0;
}

static int load_doc(const char *text, size_t len, yaml_document_t *d, const char *what, gp_error *err)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return gp_error_set(err, "%s: out of memory", what);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int ok = yaml_parser_load(&p, d);
    if (!ok) {
        gp_error_set(err, "%s:%zu:%zu: %s", what, p.problem_mark.line + 1, p.problem_mark.column + 1,
                     p.problem ? p.problem : "malformed YAML");
        yaml_parser_delete(&p);
        return -1;
    }
    yaml_parser_delete(&p);
    yaml_node_t *root = yaml_document_get_root_node(d);
    if (!root || root->type != YAML_MAPPING_NODE) {
        yaml_document_delete(d);
        return gp_error_set(err, "%s: not a YAML mapping", what);
    }
    return 0;
}

typedef struct {
    char *b;
    size_t n, cap;
} outbuf;

static int put_out(void *data, unsigned char *bytes, size_t size)
{
    outbuf *o = data;
    if (o->n + size + 1 > o->cap) {
        size_t cap = (o->n + size + 1) * 2;
        char *b = realloc(o->b, cap);
        if (!b)
            return 0;
        o->b = b;
        o->cap = cap;
    }
    memcpy(o->b + o->n, bytes, size);
    o->n += size;
    o->b[o->n] = '\0';
    return 1;
}

/* Emit d (deleted) as YAML text (malloc'ed), NULL when out of memory. */
static char *emit(yaml_document_t *d)
{
    yaml_emitter_t em;
    outbuf o = {NULL, 0, 0};
    if (!yaml_emitter_initialize(&em)) {
        yaml_document_delete(d);
        return NULL;
    }
    yaml_emitter_set_output(&em, put_out, &o);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, -1);
    int ok = yaml_emitter_open(&em) && yaml_emitter_dump(&em, d) && yaml_emitter_close(&em);
    yaml_emitter_delete(&em);
    if (!ok) {
        free(o.b);
        return NULL;
    }
    return o.b;
}

/* ---- the session ---- */

void gp_session_free(gp_session *s)
{
    if (!s)
        return;
    gp_replay_close(s->dump);
    for (size_t t = 0; s->t && t < s->nt; t++) {
        free(s->t[t].name);
        free(s->t[t].idx);
    }
    free(s->t);
    free(s->skel);
    free(s);
}

/* What the skeleton may not hold (the session writes it). */
static int check_skeleton(const char *text, size_t len, gp_error *err)
{
    static const char *const top[] = {"steps", "sample", "sweep"};
    static const char *const batch[] = {"microbatches", "tokens", "tokens_by_rank"};
    static const char *const tens[] = {"grad", "weight", "state", "twin", "population"};
    yaml_document_t d;
    if (load_doc(text, len, &d, "skeleton", err) != 0)
        return -1;
    int rc = 0, root = 1, b = map_get(&d, root, "batch"), ts = map_get(&d, root, "tensors");
    for (size_t i = 0; rc == 0 && i < sizeof top / sizeof *top; i++)
        if (map_get(&d, root, top[i]))
            rc = gp_error_set(err, "skeleton: '%s' is the session's (one step per closed step, samples per tensor)",
                              top[i]);
    for (size_t i = 0; rc == 0 && b && i < sizeof batch / sizeof *batch; i++)
        if (map_get(&d, b, batch[i]))
            rc = gp_error_set(err, "skeleton: batch.%s is the session's (the micro-batches fed)", batch[i]);
    yaml_node_t *seq = ts ? nd(&d, ts) : NULL;
    if (rc == 0 && (!seq || seq->type != YAML_SEQUENCE_NODE))
        rc = gp_error_set(err, "skeleton: needs 'tensors', a list of {name, size, sample}");
    for (yaml_node_item_t *it = rc ? NULL : seq->data.sequence.items.start; it && it < seq->data.sequence.items.top;
         it++)
        for (size_t i = 0; rc == 0 && i < sizeof tens / sizeof *tens; i++)
            if (map_get(&d, *it, tens[i]))
                rc = gp_error_set(err, "skeleton: tensors[%zu].%s is the session's (what is fed)",
                                  (size_t)(it - seq->data.sequence.items.start), tens[i]);
    yaml_document_delete(&d);
    return rc;
}

int gp_session_open(const char *text, size_t len, gp_session **out, gp_error *err)
{
    *out = NULL;
    if (check_skeleton(text, len, err) != 0)
        return -1;
    gp_scenario *sc = NULL;
    size_t n = 0;
    if (gp_scenario_load_all_string(text, len, "skeleton", &sc, &n, err) != 0)
        return -1;
    gp_session *s = calloc(1, sizeof *s);
    int rc = 0;
    if (!s || !(s->skel = malloc(len + 1)) || !(s->t = calloc(sc[0].ntensors, sizeof *s->t))) {
        rc = gp_error_set(err, "skeleton: out of memory");
        goto done;
    }
    memcpy(s->skel, text, len);
    s->skel[len] = '\0';
    s->skel_len = len;
    s->seed = sc[0].seed;
    s->grad = sc[0].precision.grad;
    s->param = sc[0].optimizer.param;
    s->state = sc[0].optimizer.state;
    s->master = sc[0].optimizer.master;
    s->nt = sc[0].ntensors;
    for (size_t t = 0; t < s->nt && rc == 0; t++) {
        const gp_tensor_spec *ts = &sc[0].tensors[t];
        stensor *x = &s->t[t];
        x->M = ts->size;
        x->n = ts->sample && ts->sample < ts->size ? ts->sample : ts->size;
        if (!(x->name = strdup(ts->name)))
            rc = gp_error_set(err, "skeleton: out of memory");
        else if (x->n < x->M && (!(x->idx = malloc(x->n * sizeof *x->idx)) ||
                                 gp_sample_indices(s->seed, gp_stream_id(GP_STREAM_SAMPLE, t, 0, 0), x->M, x->n,
                                                   x->idx, err) != 0))
            rc = gp_error_set(err, "skeleton: tensor '%s': out of memory choosing its sample", ts->name);
    }
done:
    for (size_t i = 0; i < n; i++)
        gp_scenario_free(&sc[i]);
    free(sc);
    if (rc != 0) {
        gp_session_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

/* The step's memory dump, made at its first feed. */
static int step_dump(gp_session *s, gp_error *err)
{
    if (s->dump)
        return 0;
    char name[96];
    snprintf(name, sizeof name, "gradprec-session:%p:%llu", (void *)s, (unsigned long long)s->serial++);
    return gp_replay_mem_new(name, &s->dump, err);
}

/* Put tensor t's fed array (n elements of fmt) as entry `entry`, gathering a whole
 * tensor's sample. */
static int put(gp_session *s, size_t t, const char *entry, gp_format fmt, const void *data, uint64_t n,
               gp_error *err)
{
    const stensor *x = &s->t[t];
    size_t w = fmt == GP_FP32 ? 4 : 2;
    if (!data)
        return gp_error_set(err, "tensor '%s': %s: the data pointer is NULL", x->name, entry);
    if (step_dump(s, err) != 0)
        return -1;
    unsigned char *dst = gp_replay_mem_put(s->dump, entry, fmt, x->n, err);
    if (!dst)
        return -1;
    const unsigned char *src = data;
    if (n == x->n) {
        memcpy(dst, data, x->n * w);
        return 0;
    }
    /* the sampled elements of the whole tensor; a constant width makes each copy one
     * load and one store, not a call */
    if (w == 4)
        for (uint64_t j = 0; j < x->n; j++)
            memcpy(dst + j * 4, src + x->idx[j] * 4, 4);
    else
        for (uint64_t j = 0; j < x->n; j++)
            memcpy(dst + j * 2, src + x->idx[j] * 2, 2);
    return 0;
}

static int check_array(const gp_session *s, size_t t, const char *what, gp_format fmt, gp_format want,
                       uint64_t n, gp_error *err)
{
    const stensor *x = &s->t[t];
    if (fmt != want)
        return gp_error_set(err, "tensor '%s': %s is %s, the skeleton's is %s", x->name, what, gp_format_name(fmt),
                            gp_format_name(want));
    if (n != x->n && n != x->M)
        return gp_error_set(err, "tensor '%s': %s of %llu elements; the tensor has %llu%s", x->name, what,
                            (unsigned long long)n, (unsigned long long)x->M,
                            x->n < x->M ? " (whole) or its sample's" : "");
    return 0;
}

int gp_session_grad(gp_session *s, size_t t, gp_format fmt, const void *data, uint64_t n, gp_error *err)
{
    char entry[64];
    if (t >= s->nt)
        return gp_error_set(err, "grad: tensor %zu of %zu", t, s->nt);
    if (check_array(s, t, "the gradient", fmt, s->grad, n, err) != 0)
        return -1;
    if (s->t[t].fed)
        return gp_error_set(err, "tensor '%s': a second gradient in micro-batch %d (gradprec_stream_tokens ends a "
                            "micro-batch)", s->t[t].name, s->nmb);
    if (s->nmb >= MAX_MB)
        return gp_error_set(err, "tensor '%s': more than %d micro-batches in one step", s->t[t].name, MAX_MB);
    snprintf(entry, sizeof entry, "t%zu/step0/mb%d", t, s->nmb);
    if (put(s, t, entry, fmt, data, n, err) != 0)
        return -1;
    s->t[t].fed = 1;
    s->open = 1;
    return 0;
}

int gp_session_tokens(gp_session *s, int64_t tokens, gp_error *err)
{
    char entry[64];
    if (!s->open)
        return gp_error_set(err, "tokens: no gradient was fed in micro-batch %d", s->nmb);
    if (tokens < 1 || tokens > INT32_MAX)
        return gp_error_set(err, "tokens: %lld (1 to 2^31-1)", (long long)tokens);
    for (size_t t = 0; t < s->nt; t++) { /* no gradient reached it: an exact zero entry */
        if (s->t[t].fed)
            continue;
        snprintf(entry, sizeof entry, "t%zu/step0/mb%d", t, s->nmb);
        if (!gp_replay_mem_put(s->dump, entry, s->grad, s->t[t].n, err))
            return -1;
    }
    for (size_t t = 0; t < s->nt; t++)
        s->t[t].fed = 0;
    s->tok[s->nmb++] = tokens;
    s->open = 0;
    return 0;
}

int gp_session_optim(gp_session *s, size_t t, int q, int after, gp_format fmt, const void *data, uint64_t n,
                     int64_t step, gp_error *err)
{
    char entry[64], what[64];
    if (t >= s->nt || q < 0 || q >= GP_FEED_NQ)
        return gp_error_set(err, "optimizer: tensor %zu of %zu, quantity %d", t, s->nt, q);
    stensor *x = &s->t[t];
    after = after != 0;
    snprintf(what, sizeof what, "%s %s the step", qname[q], after ? "after" : "before");
    gp_format want = q == GP_FEED_PARAM ? s->param : q == GP_FEED_MASTER ? GP_FP32 : s->state;
    if (q == GP_FEED_PARAM && !after) /* the weights: any width (the runner widens them) */
        want = fmt == GP_FP32 || fmt == GP_BF16 || fmt == GP_FP16 ? fmt : GP_FP32;
    if (check_array(s, t, what, fmt, want, n, err) != 0)
        return -1;
    if (q == GP_FEED_MASTER && !s->master)
        return gp_error_set(err, "tensor '%s': %s: the skeleton's optimizer has no master", x->name, what);
    if (x->have[after] & 1 << q)
        return gp_error_set(err, "tensor '%s': %s fed twice in one step", x->name, what);
    if (!after && q != GP_FEED_PARAM) {
        if (step < 0)
            return gp_error_set(err, "tensor '%s': %s: state step %lld (torch's state['step'], >= 0)", x->name,
                                what, (long long)step);
        if ((x->have[0] & ~1) && step != x->t0)
            return gp_error_set(err, "tensor '%s': %s: state step %lld, %lld with its other state", x->name, what,
                                (long long)step, (long long)x->t0);
        x->t0 = step;
    }
    if (q == GP_FEED_PARAM && !after)
        snprintf(entry, sizeof entry, "t%zu/weight", t);
    else
        snprintf(entry, sizeof entry, "t%zu/%s/%s", t, after ? "step0" : "state", qname[q]);
    if (put(s, t, entry, fmt, data, n, err) != 0)
        return -1;
    x->have[after] |= 1 << q;
    return 0;
}

/* Drop the step being fed. */
static void drop_step(gp_session *s)
{
    gp_replay_close(s->dump);
    s->dump = NULL;
    s->nmb = s->open = 0;
    for (size_t t = 0; t < s->nt; t++) {
        s->t[t].fed = 0;
        s->t[t].have[0] = s->t[t].have[1] = 0;
    }
}

void gp_session_discard(gp_session *s)
{
    drop_step(s);
}

uint64_t gp_session_steps(const gp_session *s)
{
    return s->steps;
}

uint64_t gp_session_step_end(gp_session *s)
{
    drop_step(s);
    return ++s->steps;
}

/* The step's keys in document d (the skeleton's). */
static int write_step(gp_session *s, yaml_document_t *d, gp_error *err)
{
    const char *dump = gp_replay_path(s->dump);
    char buf[64], key[32];
    int root = 1, ts = map_get(d, root, "tensors");
    yaml_node_t *seq = nd(d, ts);
    size_t k = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    int oom = k != s->nt;
    for (size_t t = 0; t < k && !oom; t++) {
        int m = nd(d, ts)->data.sequence.items.start[t];
        stensor *x = &s->t[t];
        yaml_node_t *mn = nd(d, m);
        /* size and sample: the dump's entries and population say them now */
        yaml_node_pair_t *w = mn->data.mapping.pairs.start;
        for (yaml_node_pair_t *p = mn->data.mapping.pairs.start; p < mn->data.mapping.pairs.top; p++)
            if (!is_scalar(d, p->key, "size") && !is_scalar(d, p->key, "sample"))
                *w++ = *p;
        mn->data.mapping.pairs.top = w;
        snprintf(key, sizeof key, "t%zu", t);
        oom = map_set(d, m, "grad", ref_node(d, dump, key, -1)) != 0;
        if (!oom && (x->have[0] & 1 << GP_FEED_PARAM))
            oom = map_set(d, m, "weight", ref_node(d, dump, key, -1)) != 0;
        if (!oom && x->n < x->M) {
            snprintf(buf, sizeof buf, "%llu", (unsigned long long)x->M);
            oom = map_set_text(d, m, "population", buf) != 0;
        }
        if (!oom && (x->have[0] & ~1))
            oom = map_set(d, m, "state", ref_node(d, dump, key, x->t0)) != 0;
        if (!oom && x->have[1])
            oom = map_set(d, m, "twin", ref_node(d, dump, key, -1)) != 0;
    }
    if (oom)
        return gp_error_set(err, k != s->nt ? "skeleton: tensors changed" : "step: out of memory");
    int b = map_get(d, root, "batch");
    if (!b && (!(b = yaml_document_add_mapping(d, NULL, YAML_BLOCK_MAPPING_STYLE)) || map_set(d, root, "batch", b)))
        return gp_error_set(err, "step: out of memory");
    snprintf(buf, sizeof buf, "%d", s->nmb);
    int tl = yaml_document_add_sequence(d, NULL, YAML_FLOW_SEQUENCE_STYLE);
    for (int i = 0; tl && i < s->nmb; i++) {
        snprintf(key, sizeof key, "%lld", (long long)s->tok[i]);
        int v = add_scalar(d, key);
        if (!v || !yaml_document_append_sequence_item(d, tl, v))
            tl = 0;
    }
    if (!tl || map_set_text(d, b, "microbatches", buf) || map_set(d, b, "tokens", tl) ||
        (!map_get(d, b, "accumulation_steps") && map_set_text(d, b, "accumulation_steps", buf)) ||
        map_set_text(d, root, "steps", "1"))
        return gp_error_set(err, "step: out of memory");
    return 0;
}

int gp_session_step_text(gp_session *s, const char *overrides, size_t len, char **text, gp_error *err)
{
    *text = NULL;
    int rc = 0;
    if (s->open)
        rc = gp_error_set(err, "close: micro-batch %d has gradients but no tokens (gradprec_stream_tokens ends it)",
                          s->nmb);
    else if (s->nmb == 0)
        rc = gp_error_set(err, "close: no micro-batch was fed in this step");
    else if (gp_replay_mem_seal(s->dump, err) != 0)
        rc = -1;
    yaml_document_t d, o;
    if (rc == 0 && load_doc(s->skel, s->skel_len, &d, "skeleton", err) != 0)
        rc = -1;
    else if (rc == 0) {
        if (write_step(s, &d, err) != 0)
            rc = -1;
        else if (overrides && len) {
            if (load_doc(overrides, len, &o, "overrides", err) != 0)
                rc = -1;
            else {
                rc = merge(&d, 1, &o, 1, 1, err);
                yaml_document_delete(&o);
            }
        }
        if (rc == 0 && !(*text = emit(&d))) /* emit deletes d */
            rc = gp_error_set(err, "step: out of memory writing its scenario");
        else if (rc != 0)
            yaml_document_delete(&d);
    }
    if (rc != 0)
        drop_step(s);
    return rc;
}
