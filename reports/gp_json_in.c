/* gp_json_in.c — see gp_json_in.h. jansson takes one global pair of allocation
 * functions; ours pass everything to malloc/free and, on a thread that is inside
 * gp_json_parse, also keep the net number of bytes allocated (malloc_usable_size, so
 * blocks allocated before or freed after the parse are accounted correctly) and fail
 * an allocation that would go over the budget. */
#include "gp_json_in.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>

typedef struct {
    size_t used, limit;
    int over; /* an allocation was refused for the budget */
} budget;

static _Thread_local budget *g_budget; /* non-NULL while this thread parses */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void *counted_malloc(size_t n)
{
    budget *b = g_budget;
    if (!b)
        return malloc(n);
    if (n > b->limit - b->used) {
        b->over = 1;
        return NULL;
    }
    void *p = malloc(n);
    if (p)
        b->used += malloc_usable_size(p);
    if (b->used > b->limit)
        b->over = 1; /* rounding up of the block: the next allocation fails */
    return p;
}

static void counted_free(void *p)
{
    budget *b = g_budget;
    if (p && b) {
        size_t k = malloc_usable_size(p);
        b->used = k < b->used ? b->used - k : 0;
    }
    free(p);
}

static void install(void)
{
    json_set_alloc_funcs(counted_malloc, counted_free);
}

json_t *gp_json_parse(const char *text, size_t len, size_t flags, const char *name, gp_error *err)
{
    pthread_once(&g_once, install);
    budget b = {0, (size_t)GP_JSON_MEM_FACTOR * len + GP_JSON_MEM_SLACK, 0};
    json_error_t je;
    g_budget = &b;
    json_t *root = json_loadb(text, len, flags, &je);
    g_budget = NULL;
    if (b.over) {
        json_decref(root);
        gp_error_set(err, "%s: too complex: parsing it needs more than %zu bytes of memory (%d times its size "
                          "plus 1 MiB, docs/limits.md)", name, b.limit, GP_JSON_MEM_FACTOR);
        return NULL;
    }
    if (!root)
        gp_error_set(err, "%s:%d:%d: %s", name, je.line, je.column, je.text);
    return root;
}
