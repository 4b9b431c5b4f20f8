/* gp_yaml_bound.c — see gp_yaml_bound.h. The bound counts resident bytes as libyaml
 * 0.2's loader and gradprec's scenario loader hold them: each node is a yaml_node_t in
 * one array grown by realloc (large blocks are moved with mremap, so only what is used
 * is resident: charged 5/4 of it for the heap's slack); each scalar keeps its value in
 * the scanner's buffer (doubling from 16 bytes), a copy of its tag (the default
 * "tag:yaml.org,2002:str" when none) and, in the scenario, possibly a double; each
 * collection keeps its tag and an item stack doubling from 16 entries (4-byte items,
 * 8-byte pairs), and a mapping may become a tensor (GP_YAML_MAP_EXTRA bytes: its spec
 * and the loader's per-tensor bookkeeping). Small blocks are rounded up to glibc's
 * malloc chunk (16-byte multiples with an 8-byte header, at least 32). Anchors cost
 * their name and a record. */
#include "gp_yaml_bound.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static uint64_t chunk(uint64_t n)
{
    uint64_t c = (n + 8 + 15) & ~(uint64_t)15;
    return c < 32 ? 32 : c;
}

static uint64_t pow2_at_least(uint64_t n, uint64_t lo)
{
    uint64_t c = lo;
    while (c < n)
        c *= 2;
    return c;
}

/* Saturating add: counts never wrap. */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

typedef struct {
    int is_map;
    uint64_t items;     /* children so far */
    uint64_t expanded;  /* nodes visited when the subtree is walked, aliases followed */
    char *anchor;       /* owned; NULL when none */
} frame;

typedef struct {
    char *name;
    uint32_t hash;      /* FNV-1a of name: compared first */
    uint64_t expanded;
} anchor;

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int fail_at(const char *origin, yaml_mark_t m, gp_error *err, const char *what)
{
    return gp_error_set(err, "%s:%lu:%lu: %s", origin, (unsigned long)m.line + 1, (unsigned long)m.column + 1, what);
}

int gp_yaml_precheck(const char *text, size_t len, const char *origin, gp_yaml_stats *st, gp_error *err)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return gp_error_set(err, "%s: out of memory while reading YAML", origin);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    frame fr[GP_YAML_MAX_DEPTH + 1];
    anchor *an = calloc(GP_YAML_MAX_ANCHORS, sizeof *an);
    int depth = 0, nan = 0, rc = 0, done = 0;
    uint64_t nodes = 0, expanded = 0, tree = 0;
    const uint64_t tree_limit = sat_add((uint64_t)GP_YAML_TREE_FACTOR * len, GP_YAML_TREE_SLACK);
    char what[200];
    if (!an) {
        yaml_parser_delete(&p);
        return gp_error_set(err, "%s: out of memory while reading YAML", origin);
    }
    while (!done && rc == 0) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = 1; /* not YAML: the loader says where and why */
            break;
        }
        uint64_t add = 0;           /* nodes this event adds to its parent's walk */
        const char *anchor_name = NULL;
        int is_node = 0;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        case YAML_DOCUMENT_START_EVENT:
            depth = 0;
            break;
        case YAML_SCALAR_EVENT: {
            size_t vl = ev.data.scalar.length;
            const char *tag = (const char *)ev.data.scalar.tag;
            tree = sat_add(tree, chunk(pow2_at_least(vl + 1, 16)) + chunk(tag ? strlen(tag) + 1 : 22) + sizeof(double));
            add = 1;
            is_node = 1;
            anchor_name = (const char *)ev.data.scalar.anchor;
            break;
        }
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: {
            if (depth >= GP_YAML_MAX_DEPTH) {
                snprintf(what, sizeof what, "nested deeper than %d levels (a scenario needs fewer than 10)",
                         GP_YAML_MAX_DEPTH);
                rc = fail_at(origin, ev.start_mark, err, what);
                break;
            }
            int is_map = ev.type == YAML_MAPPING_START_EVENT;
            const char *tag = (const char *)(is_map ? ev.data.mapping_start.tag : ev.data.sequence_start.tag);
            const char *a = (const char *)(is_map ? ev.data.mapping_start.anchor : ev.data.sequence_start.anchor);
            tree = sat_add(tree, chunk(tag ? strlen(tag) + 1 : 22) + (is_map ? GP_YAML_MAP_EXTRA : 0));
            fr[depth].is_map = is_map;
            fr[depth].items = 0;
            fr[depth].expanded = 1;
            fr[depth].anchor = a ? strdup(a) : NULL;
            depth++;
            nodes++;
            break;
        }
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: {
            frame *f = &fr[--depth];
            /* 4-byte items; 8-byte pairs, one per two children */
            uint64_t stack = f->is_map ? pow2_at_least(f->items / 2, 16) * 8 : pow2_at_least(f->items, 16) * 4;
            tree = sat_add(tree, chunk(stack) + chunk(stack / 2)); /* final block + the one before it */
            add = f->expanded;
            anchor_name = f->anchor;
            break;
        }
        case YAML_ALIAS_EVENT: {
            const char *a = (const char *)ev.data.alias.anchor;
            uint32_t h = fnv1a(a);
            int k = nan - 1;
            while (k >= 0 && (an[k].hash != h || strcmp(an[k].name, a) != 0)) /* the latest definition wins */
                k--;
            if (k < 0) {
                rc = 1; /* an undefined alias: the loader reports it */
                break;
            }
            add = an[k].expanded;
            break;
        }
        default:
            break;
        }
        if (rc == 0 && is_node)
            nodes++;
        if (rc == 0 && anchor_name) {
            if (nan >= GP_YAML_MAX_ANCHORS) {
                snprintf(what, sizeof what, "more than %d anchors (&name)", GP_YAML_MAX_ANCHORS);
                rc = fail_at(origin, ev.start_mark, err, what);
            } else if (!(an[nan].name = strdup(anchor_name))) {
                rc = gp_error_set(err, "%s: out of memory while reading YAML", origin);
            } else {
                an[nan].hash = fnv1a(anchor_name);
                an[nan++].expanded = add;
                tree = sat_add(tree, chunk(strlen(anchor_name) + 1) + 3 * 40);
            }
        }
        if ((ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT)) {
            free(fr[depth].anchor);
            fr[depth].anchor = NULL;
        }
        if (rc == 0 && add) {
            if (depth > 0) {
                fr[depth - 1].items++;
                fr[depth - 1].expanded = sat_add(fr[depth - 1].expanded, add);
            }
            if (ev.type == YAML_ALIAS_EVENT || ev.type == YAML_SCALAR_EVENT)
                expanded = sat_add(expanded, add);
            else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT)
                expanded = sat_add(expanded, 1);
            uint64_t nodes_mem = nodes * sizeof(yaml_node_t) * 5 / 4 + 4096;
            if (expanded > sat_add(2 * nodes, GP_YAML_ALIAS_SLACK)) {
                snprintf(what, sizeof what,
                         "aliases expand the scenario to more than %llu nodes, twice its %llu plus %d "
                         "(an alias may share a value, not multiply it)",
                         (unsigned long long)(2 * nodes + GP_YAML_ALIAS_SLACK), (unsigned long long)nodes,
                         GP_YAML_ALIAS_SLACK);
                rc = fail_at(origin, ev.start_mark, err, what);
            } else if (sat_add(tree, nodes_mem) > tree_limit) {
                snprintf(what, sizeof what,
                         "too dense: loading it would need more than %llu bytes (%d times the file's %zu "
                         "bytes plus 16 MiB; docs/limits.md)", (unsigned long long)tree_limit,
                         GP_YAML_TREE_FACTOR, len);
                rc = fail_at(origin, ev.start_mark, err, what);
            }
        }
        yaml_event_delete(&ev);
    }
    while (depth > 0)
        free(fr[--depth].anchor);
    for (int k = 0; k < nan; k++)
        free(an[k].name);
    free(an);
    yaml_parser_delete(&p);
    if (rc == 0 && st) {
        st->nodes = nodes;
        st->expanded = expanded;
        st->tree = sat_add(tree, nodes * sizeof(yaml_node_t) * 5 / 4 + 4096);
    }
    return rc;
}
