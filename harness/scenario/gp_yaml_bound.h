/* gp_yaml_bound.h — a streaming pre-pass over a scenario's YAML (libyaml's event parser,
 * constant memory) that refuses, before any tree is built: nesting deeper than
 * GP_YAML_MAX_DEPTH (libyaml's scanner slows quadratically with depth), aliases that
 * would make the loader visit more than twice the document's nodes (plus
 * GP_YAML_ALIAS_SLACK), more than GP_YAML_MAX_ANCHORS anchors, and documents whose
 * loading (libyaml's document tree: nodes, values, tags, item stacks with their
 * allocation rounding and growth; then the scenario the loader fills) would hold more
 * than GP_YAML_TREE_FACTOR times the text's size plus GP_YAML_TREE_SLACK bytes.
 * docs/limits.md derives the bound. */
#ifndef GP_YAML_BOUND_H
#define GP_YAML_BOUND_H

#include <stddef.h>
#include <stdint.h>

#include "../../base/gp_error.h"

#define GP_YAML_MAX_DEPTH 32
#define GP_YAML_MAX_ANCHORS 256
#define GP_YAML_ALIAS_SLACK 10000
#define GP_YAML_TREE_FACTOR 62   /* + the text itself: under 64 x its size */
#define GP_YAML_MAP_EXTRA 512     /* a mapping that becomes a tensor: its spec and bookkeeping */
#define GP_YAML_TREE_SLACK ((uint64_t)16 << 20)

typedef struct {
    uint64_t nodes;     /* nodes of the document (an alias is not a node) */
    uint64_t expanded;  /* nodes a walk that follows aliases visits */
    uint64_t tree;      /* upper bound of the document tree's bytes */
} gp_yaml_stats;

/* Check text (origin names it in messages). Returns 0 (within bounds; *st filled when
 * st is non-NULL), 1 when the text is not valid YAML (the caller's parser reports it
 * with its own message), or -1 with err "ORIGIN:LINE:COLUMN: what" naming the limit. */
int gp_yaml_precheck(const char *text, size_t len, const char *origin, gp_yaml_stats *st, gp_error *err);

#endif
