/* gp_scenario_internal.h — what the scenario's files share (harness/scenario: the model
 * gp_scenario.c, the loader gp_load*.c and gp_sweep.c, the writer gp_scenario_yaml.c; not
 * included elsewhere): the names of the enumerations, the loader's state, and the functions
 * one file of the loader calls in another. */
#ifndef GP_SCENARIO_INTERNAL_H
#define GP_SCENARIO_INTERNAL_H

#include "gp_scenario.h"

#include "../../base/gp_num.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "../../kernels/arith/gp_philox.h"
#include "../../kernels/gp_names.h"
#include "../../kernels/gp_vocab.h"

#if defined(__GNUC__)
#define GP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GP_PRINTF(a, b)
#endif

#define PATHLEN 160                            /* "tensors[3].grad.values[2][7]" etc. */
#define MEM_LIMIT_ELEMS (((uint64_t)64 << 30) / 4) /* 64 GiB of fp32 elements */
#define TOKENS_STREAM 0x746f6b656e73ull        /* "tokens": Philox stream of {min, max} */
#define DEFAULT_TOKENS 512
#define DEFAULT_SIZE 1024
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The names of the enumerations, in enum order (gp_scenario.c). */
extern const char *const gp_dist_names[5];
extern const char *const gp_red_names[4];
extern const char *const gp_fb_names[2];
extern const char *const gp_acc_names[GP_VOCAB_COUNT(GP_VOCAB_ACC_ROUNDINGS)];
extern const char *const gp_ls_names[3];
extern const char *const gp_master_names[2];
extern const char *const gp_fused_names[2];
extern const char *const gp_opt_names[1];
extern const char *const gp_eval_names[GP_VOCAB_COUNT(GP_VOCAB_ADAMW_EVALS)];
extern const char *const gp_sched_names[5];
extern const char *const gp_coll_names[3];
extern const char *const gp_avg_names[3];
extern const char *const gp_norm_names[2];

/* ---- the loader: document, origin, error, and what the batch resolution needs ---- */

typedef struct {
    const char *origin;
    yaml_document_t *doc;
    gp_error *err;
    uint64_t elements;                 /* running total of tensor elements */
    yaml_node_t *mb, *acc, *tok;       /* batch.microbatches / accumulation_steps / tokens */
    enum { TOK_DEFAULT, TOK_INT, TOK_LIST, TOK_RANGE, TOK_STEPS } tok_kind;
    long tok_int, tok_min, tok_max;    /* TOK_INT value; TOK_RANGE bounds */
    long tok_seq;                      /* TOK_RANGE: sequences a micro-batch (0 read as 1) */
    size_t tok_len;                    /* TOK_LIST length (already in s->batch.tokens); TOK_STEPS: max K_s */
    size_t tok_steps;                  /* TOK_STEPS: the lists given (one per optimizer step) */
    yaml_node_t **vnodes;              /* per tensor: its grad.values node, or NULL */
    yaml_node_t **name_nodes;          /* per tensor: its name node */
    struct tensor_nodes { yaml_node_t *grad, *weight, *size, *sample, *population, *state, *twin, *opt_lr,
                                      *opt_lr_steps, *cols; } *tn; /* per tensor: the replay nodes of grad and
                                          weight, size, sample, state, twin, optimizer.lr, .lr_steps */
    yaml_node_t *lr_steps, *sched_name; /* optimizer.lr_steps, schedule.name */
    const char *dir;                   /* the scenario file's folder ("" for text: the current one) */
    int total_given;                   /* schedule.total was written */
    int sweep_ok;                      /* a top-level `sweep:` is being expanded */
    yaml_node_t *dist, *dist_v[9];     /* `distributed:` and its values (resolve_distributed) */
} loader;

/* gp_scenario.c */
void gp_scenario_tensor_init(gp_tensor_spec *t, const char *name);
const char *gp_scenario_enum_name(const char *const *names, int count, int v);
void gp_scenario_join(char *buf, size_t n, const char *const *names, int count);

/* gp_load_read.c */
int gp_load_fail(const loader *L, const yaml_node_t *n, const char *fmt, ...) GP_PRINTF(3, 4);
void gp_load_pathf(char *out, const char *fmt, ...) GP_PRINTF(2, 3);
yaml_node_t *gp_load_node(const loader *L, int index);
const char *gp_load_sval(const yaml_node_t *n);
const char *gp_load_kind(const yaml_node_t *n);
size_t gp_load_seq_len(const yaml_node_t *n);
yaml_node_t *gp_load_seq_item(const loader *L, const yaml_node_t *n, size_t i);
int gp_load_fields(const loader *L, yaml_node_t *map, const char *path, const char *const *keys,
                   int nkeys, yaml_node_t **vals, yaml_node_t **keyn);
int gp_load_is_null(const char *t);
int gp_load_get_double(const loader *L, const yaml_node_t *n, const char *path, double *out);
int gp_load_get_double_in(const loader *L, const yaml_node_t *n, const char *path, double lo,
                          int lo_open, double hi, int hi_open, double *out);
int gp_load_get_ll(const loader *L, const yaml_node_t *n, const char *path, long long lo,
                   long long hi, long long *out);
int gp_load_get_int(const loader *L, const yaml_node_t *n, const char *path, long long lo, int *out);
int gp_load_get_u64(const loader *L, const yaml_node_t *n, const char *path, uint64_t *out);
int gp_load_get_bool(const loader *L, const yaml_node_t *n, const char *path, int *out);
int gp_load_get_string(const loader *L, const yaml_node_t *n, const char *path, const char **out);
int gp_load_get_enum(const loader *L, const yaml_node_t *n, const char *path,
                     const char *const *names, int count, int *out);
int gp_load_get_format(const loader *L, const yaml_node_t *n, const char *path, gp_format *out);
int gp_load_get_name(const loader *L, const yaml_node_t *n, const char *path, char *out);

/* gp_load_tensors.c */
int gp_load_oom(const loader *L, const yaml_node_t *n);
int gp_load_get_lr_steps(const loader *L, yaml_node_t *q, const char *path, double **out, int *n);
int gp_load_parse_tensors(loader *L, yaml_node_t *n, gp_scenario *s);
int gp_load_parse_batch(loader *L, yaml_node_t *n, gp_scenario *s);
int gp_load_resolve_batch(loader *L, yaml_node_t *root, gp_scenario *s);

/* gp_load_sections.c */
int gp_load_parse_precision(const loader *L, yaml_node_t *n, gp_scenario *s);
int gp_load_parse_loss_scale(const loader *L, yaml_node_t *n, gp_scenario *s);
int gp_load_parse_clip(const loader *L, yaml_node_t *n, gp_scenario *s);
int gp_load_parse_optimizer(loader *L, yaml_node_t *n, gp_scenario *s);
int gp_load_parse_schedule(loader *L, yaml_node_t *n, gp_scenario *s);
int gp_load_parse_thresholds(const loader *L, yaml_node_t *n, gp_scenario *s);
int gp_load_parse_exact_metrics(const loader *L, yaml_node_t *n, gp_scenario *s);
int gp_load_parse_expect(const loader *L, yaml_node_t *n, gp_scenario *s);
int gp_load_parse_distributed(loader *L, yaml_node_t *n, gp_scenario *s);
int gp_load_resolve_distributed(loader *L, gp_scenario *s);

/* gp_load.c */
int gp_load_read_doc(const char *text, size_t len, const char *origin, yaml_document_t *doc, gp_error *err);
int gp_load_parse_doc(yaml_document_t *doc, const char *origin, const char *dir, const char *default_name,
                      int sweep_ok, gp_scenario *s, gp_error *err);
int gp_load_text(const char *text, size_t len, const char *origin, const char *dir, const char *default_name,
                 gp_scenario *s, gp_error *err);

#endif
