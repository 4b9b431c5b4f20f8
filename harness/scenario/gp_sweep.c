/* gp_sweep.c — a file's `sweep:` expanded into its scenarios (axes crossed, keys zipped),
 * and the public loading entry points (gp_scenario_load_*: one scenario or all). */
#include "gp_scenario_internal.h"

#include "../../base/gp_file.h"
#include "gp_yaml_bound.h"

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
        if (k->type == YAML_SCALAR_NODE && strcmp(gp_load_sval(k), key) == 0)
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
    if (k->type != YAML_SCALAR_NODE || !sweep_key_ok(gp_load_sval(k)) || strlen(gp_load_sval(k)) >= GP_SWEEP_TEXT)
        return gp_load_fail(L, k, "sweep: a key must be a dotted path such as batch.accumulation_steps or "
                            "tensors[0].grad.scale (at most %d bytes), or a list of such keys", GP_SWEEP_TEXT - 1);
    if (strcmp(gp_load_sval(k), "sweep") == 0 || strncmp(gp_load_sval(k), "sweep.", 6) == 0 || strcmp(gp_load_sval(k),
                                                                                                      "name") == 0)
        return gp_load_fail(L, k, "sweep: '%s' cannot be swept", gp_load_sval(k));
    for (int a = 0; a <= na; a++) {
        const sweep_axis *A = a < na ? &ax[a] : cur;
        for (int j = 0; j < A->nkeys; j++)
            if (strcmp(A->key[j], gp_load_sval(k)) == 0)
                return gp_load_fail(L, k, "sweep: duplicate key '%s'", gp_load_sval(k));
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
    yaml_node_t *m = gp_load_node(&L, sp->value);
    if (m->type != YAML_MAPPING_NODE || m->data.mapping.pairs.top == m->data.mapping.pairs.start)
        return gp_load_fail(&L, m, "sweep: expected a mapping of keys to lists of values, e.g. "
                            "{batch.accumulation_steps: [1, 2, 4], reduction: [mean, token_mean]}");
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = gp_load_node(&L, p->key), *v = gp_load_node(&L, p->value);
        if (*na == GP_SWEEP_MAX_AXES)
            return gp_load_fail(&L, k, "sweep: at most %d axes can be crossed", GP_SWEEP_MAX_AXES);
        sweep_axis *A = &ax[*na];
        A->keyn = p->key;
        A->nkeys = 0;
        int zip = k->type == YAML_SEQUENCE_NODE;
        size_t nk = zip ? gp_load_seq_len(k) : 1;
        if (nk == 0 || nk > GP_SWEEP_MAX_ZIP || nkeys + (int)nk > GP_SWEEP_MAX_KEYS)
            return gp_load_fail(&L, k, "sweep: 1 to %d keys an axis, %d in all", GP_SWEEP_MAX_ZIP, GP_SWEEP_MAX_KEYS);
        for (size_t j = 0; j < nk; j++) {
            yaml_node_t *kj = zip ? gp_load_seq_item(&L, k, j) : k;
            if (sweep_key(&L, kj, ax, *na, A))
                return -1;
            snprintf(A->key[A->nkeys++], GP_SWEEP_TEXT, "%s", gp_load_sval(kj));
        }
        nkeys += A->nkeys;
        size_t nv = v->type == YAML_SEQUENCE_NODE ? gp_load_seq_len(v) : 0;
        if (nv == 0 || nv > GP_SWEEP_MAX_VALUES)
            return gp_load_fail(&L, v, "sweep: %s: expected a list of 1 to %d values", A->key[0], GP_SWEEP_MAX_VALUES);
        A->nv = (int)nv;
        for (size_t i = 0; i < nv; i++) {
            yaml_node_t *x = gp_load_seq_item(&L, v, i);
            if (zip && (x->type != YAML_SEQUENCE_NODE || gp_load_seq_len(x) != nk))
                return gp_load_fail(&L, x, "sweep: %s...: each value must be a list of %zu values, one for each key",
                                    A->key[0], nk);
            for (size_t j = 0; j < nk; j++) {
                yaml_node_t *xj = zip ? gp_load_seq_item(&L, x, j) : x;
                if (xj->type != YAML_SCALAR_NODE || strlen(gp_load_sval(xj)) >= GP_SWEEP_TEXT)
                    return gp_load_fail(&L, xj, "sweep: %s: each value must be a scalar of at most %d bytes", A->key[j],
                                        GP_SWEEP_TEXT - 1);
                A->value[i][j] = zip ? x->data.sequence.items.start[j] : v->data.sequence.items.start[i];
                snprintf(A->text[i][j], GP_SWEEP_TEXT, "%s", gp_load_sval(xj));
            }
        }
        (*na)++;
        *npoints *= nv;
        if (*npoints > GP_SWEEP_MAX_POINTS)
            return gp_load_fail(&L, v, "sweep: %zu points or more (at most %d)", *npoints, GP_SWEEP_MAX_POINTS);
    }
    return 0;
}

/* Put value node `value` at key j of axis A, creating mappings that are missing. */
static int sweep_apply(yaml_document_t *doc, const char *origin, const sweep_axis *A, int j, int value,
                       gp_error *err)
{
    loader L = {.origin = origin, .doc = doc, .err = err};
    yaml_mark_t mark = gp_load_node(&L, A->keyn)->start_mark;
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
        yaml_node_t *m = gp_load_node(&L, cur);
        if (m->type != YAML_MAPPING_NODE)
            return gp_load_fail(&L, gp_load_node(&L, A->keyn), "sweep: %s: '%s' is inside %s, not a mapping", key,
                                comp, gp_load_kind(m));
        yaml_node_pair_t *pair = find_pair(doc, m, comp);
        if (!pair) {
            if (idx >= 0)
                return gp_load_fail(&L, gp_load_node(&L, A->keyn), "sweep: %s: the file has no list '%s'", key, comp);
            int kn = yaml_document_add_scalar(doc, NULL, (yaml_char_t *)comp, -1, YAML_PLAIN_SCALAR_STYLE);
            int vn = last ? value : yaml_document_add_mapping(doc, NULL, YAML_FLOW_MAPPING_STYLE);
            if (!kn || !vn || !yaml_document_append_mapping_pair(doc, cur, kn, vn))
                return gp_load_oom(&L, gp_load_node(&L, A->keyn));
            gp_load_node(&L, kn)->start_mark = mark;
            gp_load_node(&L, vn)->start_mark = last ? gp_load_node(&L, vn)->start_mark : mark;
            cur = vn;
        } else if (idx < 0) {
            if (last)
                pair->value = value;
            cur = pair->value;
        } else {
            yaml_node_t *sq = gp_load_node(&L, pair->value);
            if (sq->type != YAML_SEQUENCE_NODE || (size_t)idx >= gp_load_seq_len(sq))
                return gp_load_fail(&L, gp_load_node(&L, A->keyn), "sweep: %s: '%s' has no item %ld", key, comp, idx);
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
    if (gp_load_read_doc(text, len, origin, &doc, err) != 0)
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
            rc = gp_load_parse_doc(&doc, origin, dir, default_name, 0, &arr[0], err);
        } else {
            rc = 0;
            for (size_t c = 0; c < np && rc == 0; c++) {
                yaml_document_t d2;
                size_t pick[GP_SWEEP_MAX_AXES], rest = c;
                for (int a = na - 1; a >= 0; a--) { /* the last key varies fastest */
                    pick[a] = rest % (size_t)ax[a].nv;
                    rest /= (size_t)ax[a].nv;
                }
                if ((rc = gp_load_read_doc(text, len, origin, &d2, err)) != 0)
                    break;
                for (int a = 0; a < na && rc == 0; a++)
                    for (int j = 0; j < ax[a].nkeys && rc == 0; j++)
                        rc = sweep_apply(&d2, origin, &ax[a], j, ax[a].value[pick[a]][j], err);
                if (rc == 0)
                    rc = gp_load_parse_doc(&d2, origin, dir, default_name, 1, &arr[c], err);
                if (rc == 0 && c == 0 && (double)np * (double)scenario_bytes(&arr[0]) >
                                             (double)GP_YAML_TREE_FACTOR * (double)len + (double)GP_YAML_TREE_SLACK) {
                    loader L = {.origin = origin, .doc = &d2, .err = err};
                    rc = gp_load_fail(&L, gp_load_node(&L, ax[0].keyn),
                                      "sweep: %zu points of %zu bytes each would hold more than "
                                      "%d times the file's size plus 16 MiB (docs/limits.md)", np,
                                      scenario_bytes(&arr[0]),
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
                        rc = gp_load_fail(&L, gp_load_node(&L, ax[0].keyn),
                                          "sweep: the point's name '%.40s...' is longer than %d "
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
    return gp_load_text(text, len, origin, "", "scenario", s, err);
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
    int rc = gp_load_text(text, len, path, dir, name, s, err);
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
