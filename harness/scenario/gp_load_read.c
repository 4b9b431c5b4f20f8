/* gp_load_read.c — the loader's reading of YAML nodes: the error at origin:line:column, node
 * access, the schema check of a mapping's keys, and the scalars (numbers, integers,
 * booleans, strings, names, enumerations, formats) with their bounds. */
#include "gp_scenario_internal.h"

/* ---- the loader: document, origin, error, and what the batch resolution needs ---- */


int gp_load_fail(const loader *L, const yaml_node_t *n, const char *fmt, ...)
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
void gp_load_pathf(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, PATHLEN, fmt, ap);
    va_end(ap);
}

yaml_node_t *gp_load_node(const loader *L, int index)
{
    return yaml_document_get_node(L->doc, index);
}

const char *gp_load_sval(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

const char *gp_load_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE: return "a mapping";
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_SCALAR_NODE:
        return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? "a scalar" : "a quoted string";
    default: return "nothing";
    }
}

size_t gp_load_seq_len(const yaml_node_t *n)
{
    return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
}

yaml_node_t *gp_load_seq_item(const loader *L, const yaml_node_t *n, size_t i)
{
    return gp_load_node(L, n->data.sequence.items.start[i]);
}

/* Collect the values of a mapping with a fixed key set: vals[i] is the value of
 * keys[i] (NULL when absent), keyn[i] its key. Rejects a non-mapping, non-scalar
 * keys, unknown keys (listing the allowed ones) and duplicate keys. */
int gp_load_fields(const loader *L, yaml_node_t *map, const char *path, const char *const *keys,
                   int nkeys, yaml_node_t **vals, yaml_node_t **keyn)
{
    for (int i = 0; i < nkeys; i++)
        vals[i] = keyn[i] = NULL;
    if (map->type != YAML_MAPPING_NODE)
        return gp_load_fail(L, map, "%s: expected a mapping, got %s", *path ? path : "the scenario",
                            gp_load_kind(map));
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = gp_load_node(L, p->key), *v = gp_load_node(L, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return gp_load_fail(L, k, "%s: a key must be a name, got %s", *path ? path : "the scenario",
                                gp_load_kind(k));
        int i = 0;
        while (i < nkeys && strcmp(gp_load_sval(k), keys[i]) != 0)
            i++;
        if (i == nkeys) {
            char list[320];
            gp_scenario_join(list, sizeof list, keys, nkeys);
            if (!*path)
                return gp_load_fail(L, k, "unknown top-level key '%.60s' (allowed: %s)", gp_load_sval(k), list);
            return gp_load_fail(L, k, "unknown key '%.60s' in %s (allowed: %s)", gp_load_sval(k), path, list);
        }
        if (vals[i])
            return gp_load_fail(L, k, "duplicate key '%s'%s%s (first at %lu:%lu)", keys[i], *path ? " in " : "",
                                path, (unsigned long)keyn[i]->start_mark.line + 1,
                                (unsigned long)keyn[i]->start_mark.column + 1);
        vals[i] = v;
        keyn[i] = k;
    }
    return 0;
}

/* ---- scalars ---- */

int gp_load_is_null(const char *t)
{
    return !*t || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") || !strcmp(t, "NULL");
}

/* A number must be a plain scalar: a quoted "1.0" is a string in YAML. */
static int number_node(const loader *L, const yaml_node_t *n, const char *path, const char *what)
{
    if (n->type != YAML_SCALAR_NODE)
        return gp_load_fail(L, n, "%s: expected %s, got %s", path, what, gp_load_kind(n));
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return gp_load_fail(L, n, "%s: expected %s, got the string \"%.40s\"", path, what, gp_load_sval(n));
    if (gp_load_is_null(gp_load_sval(n)))
        return gp_load_fail(L, n, "%s: expected %s, got nothing", path, what);
    return 0;
}

/* A finite double, fully parsed; YAML's .nan / .inf spellings are recognised so the
 * message says NaN or infinite rather than "not a number". */
int gp_load_get_double(const loader *L, const yaml_node_t *n, const char *path, double *out)
{
    if (number_node(L, n, path, "a number"))
        return -1;
    const char *t = gp_load_sval(n);
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
            return gp_load_fail(L, n, "%s: expected a number, got '%.40s'", path, t);
    }
    if (isnan(v))
        return gp_load_fail(L, n, "%s is NaN", path);
    if (isinf(v))
        return gp_load_fail(L, n, "%s is infinite%s", path, range ? " (too large for a double)" : "");
    *out = v;
    return 0;
}

/* A finite double within [lo, hi] (an open end when lo_open / hi_open; hi = INFINITY
 * for no upper bound). */
int gp_load_get_double_in(const loader *L, const yaml_node_t *n, const char *path, double lo,
                          int lo_open, double hi, int hi_open, double *out)
{
    double v = 0;
    if (gp_load_get_double(L, n, path, &v))
        return -1;
    int ok = (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
    if (ok) {
        *out = v;
        return 0;
    }
    if (isinf(hi))
        return gp_load_fail(L, n, "%s must be %s %g (got %s)", path, lo_open ? ">" : ">=", lo, gp_load_sval(n));
    return gp_load_fail(L, n, "%s must be in %c%g, %g%c (got %s)", path, lo_open ? '(' : '[', lo, hi,
                        hi_open ? ')' : ']', gp_load_sval(n));
}

/* A decimal integer in [lo, hi], fully parsed. */
int gp_load_get_ll(const loader *L, const yaml_node_t *n, const char *path, long long lo,
                   long long hi, long long *out)
{
    if (number_node(L, n, path, "an integer"))
        return -1;
    const char *t = gp_load_sval(n);
    char *end;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (end == t || *end)
        return gp_load_fail(L, n, "%s: expected an integer, got '%.40s'", path, t);
    if (errno == ERANGE && v == LLONG_MIN)
        return gp_load_fail(L, n, "%s must be at least %lld (got %.40s)", path, lo, t);
    if (errno == ERANGE || v > hi)
        return gp_load_fail(L, n, "%s is too large: %.40s (at most %lld)", path, t, hi);
    if (v < lo)
        return gp_load_fail(L, n, "%s must be at least %lld (got %.40s)", path, lo, t);
    *out = v;
    return 0;
}

int gp_load_get_int(const loader *L, const yaml_node_t *n, const char *path, long long lo, int *out)
{
    long long v = 0;
    if (gp_load_get_ll(L, n, path, lo, INT_MAX, &v))
        return -1;
    *out = (int)v;
    return 0;
}

/* An unsigned 64-bit decimal integer (the seed). */
int gp_load_get_u64(const loader *L, const yaml_node_t *n, const char *path, uint64_t *out)
{
    if (number_node(L, n, path, "an integer"))
        return -1;
    const char *t = gp_load_sval(n);
    if (*t == '-')
        return gp_load_fail(L, n, "%s must be a non-negative integer (got %.40s)", path, t);
    int r = gp_parse_u64(t, 0, UINT64_MAX, out);
    if (r == -1)
        return gp_load_fail(L, n, "%s: expected an integer, got '%.40s'", path, t);
    if (r == -2)
        return gp_load_fail(L, n, "%s is too large: %.40s (at most %llu)", path, t, (unsigned long long)UINT64_MAX);
    return 0;
}

int gp_load_get_bool(const loader *L, const yaml_node_t *n, const char *path, int *out)
{
    if (n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        const char *t = gp_load_sval(n);
        if (!strcmp(t, "true") || !strcmp(t, "True") || !strcmp(t, "TRUE")) {
            *out = 1;
            return 0;
        }
        if (!strcmp(t, "false") || !strcmp(t, "False") || !strcmp(t, "FALSE")) {
            *out = 0;
            return 0;
        }
        return gp_load_fail(L, n, "%s: expected true or false, got '%.40s'", path, t);
    }
    return gp_load_fail(L, n, "%s: expected true or false, got %s", path, gp_load_kind(n));
}

/* A non-empty string without NUL bytes (any scalar style). */
int gp_load_get_string(const loader *L, const yaml_node_t *n, const char *path, const char **out)
{
    if (n->type != YAML_SCALAR_NODE)
        return gp_load_fail(L, n, "%s: expected a string, got %s", path, gp_load_kind(n));
    const char *t = gp_load_sval(n);
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? gp_load_is_null(t) : !*t)
        return gp_load_fail(L, n, "%s: expected a string, got nothing", path);
    if (strlen(t) != n->data.scalar.length)
        return gp_load_fail(L, n, "%s contains a NUL character", path);
    *out = t;
    return 0;
}

int gp_load_get_enum(const loader *L, const yaml_node_t *n, const char *path,
                     const char *const *names, int count, int *out)
{
    const char *t = NULL;
    if (gp_load_get_string(L, n, path, &t))
        return -1;
    for (int i = 0; i < count; i++)
        if (!strcmp(t, names[i])) {
            *out = i;
            return 0;
        }
    char list[320];
    gp_scenario_join(list, sizeof list, names, count);
    return gp_load_fail(L, n, "unknown %s '%.40s' (allowed: %s)", path, t, list);
}

int gp_load_get_format(const loader *L, const yaml_node_t *n, const char *path, gp_format *out)
{
    const char *t = NULL;
    if (gp_load_get_string(L, n, path, &t))
        return -1;
    if (gp_format_parse(t, out) == 0)
        return 0;
    const char *names[GP_NFORMATS];
    for (int i = 0; i < GP_NFORMATS; i++)
        names[i] = gp_format_name((gp_format)i);
    char list[320];
    gp_scenario_join(list, sizeof list, names, GP_NFORMATS);
    return gp_load_fail(L, n, "unknown %s format '%.40s' (allowed: %s)", path, t, list);
}

/* A scenario or tensor name: 1..GP_NAME_MAX-1 bytes, no control characters. */
int gp_load_get_name(const loader *L, const yaml_node_t *n, const char *path, char *out)
{
    const char *t = NULL;
    if (gp_load_get_string(L, n, path, &t))
        return -1;
    size_t len = strlen(t);
    if (len >= GP_NAME_MAX)
        return gp_load_fail(L, n, "%s is too long: %zu bytes (at most %d)", path, len, GP_NAME_MAX - 1);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
            return gp_load_fail(L, n, "%s contains a control character", path);
    memcpy(out, t, len + 1);
    return 0;
}
