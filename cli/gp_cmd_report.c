/* gp_cmd_report.c — `gradprec report merge` (combine shard reports into the report the
 * unsharded run would have written, byte for byte), `gradprec report html` (render
 * a report.json as a self-contained page) and `gradprec report monitor` (a monitor
 * log's time series as Markdown and HTML). */
#include <stdlib.h>
#include <string.h>

#include "../base/gp_file.h"
#include "../reports/gp_html.h"
#include "../reports/gp_monitor_report.h"
#include "../reports/gp_report.h"
#include "gp_cli_opt.h"
#include "gp_cmd.h"
#include "../base/gp_out.h"

static const char report_usage[] =
    "usage: gradprec report merge --out MERGED.json SHARD.json...\n"
    "       gradprec report html [--out PAGE.html] REPORT.json\n"
    "       gradprec report monitor --out DIR LOG.jsonl\n"
    "\n"
    "merge: combine the reports of `gradprec run --shard I/N` (I = 0..N-1) into the\n"
    "report the unsharded run writes: same bytes. Fails (exit 2) on a missing or\n"
    "duplicated shard or scenario, different backends, or an unreadable report.\n"
    "html: the HTML page of a report (default: PAGE = REPORT with .html).\n"
    "monitor: the time series of a gradprec.torch.monitor log (monitor.jsonl) as\n"
    "DIR/monitor.md and DIR/monitor.html (each metric against the step, overall and per\n"
    "tensor, worst first), written as one set.\n";

/* A shard's "shard" object: index, count, scenarios (all present, in range), or -1. */
static int shard_info(json_t *root, const char *path, size_t *idx, size_t *count, size_t *total, gp_error *err)
{
    json_t *sh = json_object_get(root, "shard");
    json_int_t i = json_integer_value(json_object_get(sh, "index"));
    json_int_t n = json_integer_value(json_object_get(sh, "count"));
    json_int_t m = json_integer_value(json_object_get(sh, "scenarios"));
    if (!sh)
        return gp_error_set(err, "%s: not a shard report (no \"shard\" key: run with --shard I/N, "
                                 "or a report of an older gradprec)", path);
    if (!json_is_integer(json_object_get(sh, "index")) || !json_is_integer(json_object_get(sh, "count")) ||
        !json_is_integer(json_object_get(sh, "scenarios")) || n < 2 || n > 100000000 || i < 0 || i >= n ||
        m < 0 || m > 100000000)
        return gp_error_set(err, "%s: \"shard\" is not {index, count, scenarios} with 0 <= index < count", path);
    *idx = (size_t)i;
    *count = (size_t)n;
    *total = (size_t)m;
    return 0;
}

/* Merge shard roots: same backends, every shard index 0..N-1 once (one unsharded
 * report merges to itself), scenario indices 0..total-1 each exactly once. */
static json_t *merge(json_t **roots, int n, const char *const *paths, gp_error *err)
{
    const char *backend = json_string_value(json_object_get(roots[0], "backend"));
    json_t *cmp0 = json_object_get(roots[0], "compare_backend");
    size_t total = 0, nshards = 1;
    if (n > 1 || json_object_get(roots[0], "shard")) {
        size_t idx, count, m;
        if (shard_info(roots[0], paths[0], &idx, &nshards, &total, err) != 0)
            return NULL;
        unsigned char *seen = calloc(nshards, 1);
        if (!seen) {
            gp_error_set(err, "out of memory");
            return NULL;
        }
        int bad = 0;
        for (int i = 0; i < n && !bad; i++) {
            if (shard_info(roots[i], paths[i], &idx, &count, &m, err) != 0)
                bad = 1;
            else if (count != nshards || m != total)
                bad = gp_error_set(err, "%s: shard %zu/%zu of %zu scenarios does not belong with %s (shards of %zu, %zu scenarios)",
                                   paths[i], idx, count, m, paths[0], nshards, total) != 0;
            else if (seen[idx]++)
                bad = gp_error_set(err, "%s: shard %zu/%zu is given twice", paths[i], idx, count) != 0;
        }
        for (size_t k = 0; k < nshards && !bad; k++)
            if (!seen[k])
                bad = gp_error_set(err, "shard %zu/%zu is missing (%d of %zu shard reports given)", k, nshards, n,
                                   nshards) != 0;
        free(seen);
        if (bad)
            return NULL;
    }
    for (int i = 0; i < n; i++) {
        const char *b = json_string_value(json_object_get(roots[i], "backend"));
        if (!b || !backend || strcmp(b, backend) != 0 || !json_equal(json_object_get(roots[i], "compare_backend"), cmp0)) {
            gp_error_set(err, "%s: ran on another backend than %s", paths[i], paths[0]);
            return NULL;
        }
        size_t k;
        json_t *sc;
        json_array_foreach(json_object_get(roots[i], "scenarios"), k, sc) {
            json_int_t idx = json_integer_value(json_object_get(sc, "index"));
            if (idx < 0 || idx > 100000000 || (nshards > 1 && (size_t)idx >= total) ||
                (nshards > 1 && (size_t)idx % nshards != (size_t)json_integer_value(json_object_get(json_object_get(roots[i], "shard"), "index")))) {
                gp_error_set(err, "%s: scenario index %lld does not belong to this shard", paths[i], (long long)idx);
                return NULL;
            }
            if (nshards == 1 && (size_t)idx + 1 > total)
                total = (size_t)idx + 1; /* one unsharded report: at least this many */
        }
    }
    json_t **slot = calloc(total ? total : 1, sizeof *slot);
    if (!slot) {
        gp_error_set(err, "out of memory");
        return NULL;
    }
    int bad = 0;
    for (int i = 0; i < n && !bad; i++) {
        size_t k;
        json_t *sc;
        json_array_foreach(json_object_get(roots[i], "scenarios"), k, sc) {
            json_int_t idx = json_integer_value(json_object_get(sc, "index"));
            if (slot[idx]) {
                gp_error_set(err, "%s: scenario %s (index %lld) is in more than one shard", paths[i],
                             json_string_value(json_object_get(sc, "name")), (long long)idx);
                bad = 1;
                break;
            }
            slot[idx] = sc;
        }
    }
    for (size_t k = 0; k < total && !bad; k++)
        if (!slot[k]) {
            gp_error_set(err, "scenario index %zu is in no shard (is a shard report missing?)", k);
            bad = 1;
        }
    json_t *arr = NULL;
    if (!bad) {
        arr = json_array();
        for (size_t k = 0; k < total; k++)
            json_array_append(arr, slot[k]);
    }
    free(slot);
    if (!arr)
        return NULL;
    json_t *cmp = json_is_string(cmp0) ? cmp0 : NULL;
    return gp_report_root(backend, cmp ? json_string_value(cmp) : NULL, arr);
}

static int cmd_merge(int argc, char **argv, FILE *err)
{
    const char *outpath = NULL, *val;
    int first = 0, r;
    for (int i = 1; i < argc; i++) {
        if ((r = gp_cli_opt(argc, argv, &i, "--out", &val, err, "report merge")) != 0) {
            if (r < 0)
                return GP_EXIT_USAGE;
            outpath = val;
        } else if (argv[i][0] == '-') {
            fprintf(err, "gradprec report merge: unknown option '%s'\n", argv[i]);
            return GP_EXIT_USAGE;
        } else {
            first = i;
            break;
        }
    }
    if (!outpath || first == 0) {
        fprintf(err, "gradprec report merge: needs --out FILE and at least one shard report\n");
        return GP_EXIT_USAGE;
    }
    int n = argc - first;
    gp_error e = {""};
    if (gp_out_check_file("--out", outpath, (const char *const *)(argv + first), (size_t)n, &e) != 0) {
        fprintf(err, "gradprec report merge: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    json_t **roots = calloc((size_t)n, sizeof *roots);
    int rc = GP_EXIT_USAGE, loaded = 0;
    if (!roots)
        return GP_EXIT_INTERNAL;
    for (; loaded < n; loaded++)
        if (!(roots[loaded] = gp_report_load(argv[first + loaded], &e)))
            break;
    if (loaded < n) {
        fprintf(err, "gradprec report merge: %s\n", e.msg);
    } else {
        json_t *m = merge(roots, n, (const char *const *)(argv + first), &e);
        char *text = m ? gp_report_dump(m) : NULL;
        if (!m)
            fprintf(err, "gradprec report merge: %s\n", e.msg);
        else if (!text || gp_write_atomic(outpath, text, &e) != 0) {
            fprintf(err, "gradprec report merge: %s\n", text ? e.msg : "out of memory");
            rc = GP_EXIT_INTERNAL;
        } else
            rc = GP_EXIT_OK;
        free(text);
        json_decref(m);
    }
    for (int i = 0; i < loaded; i++)
        json_decref(roots[i]);
    free(roots);
    return rc;
}

/* The arguments of `report html` and `report monitor`: an optional --out and one input.
 * Returns 0, or GP_EXIT_USAGE after printing one line (`gradprec report WHAT: ...`). */
static int out_and_input(int argc, char **argv, const char *what, const char **out, const char **in, FILE *err)
{
    const char *val;
    char ctx[32];
    snprintf(ctx, sizeof ctx, "report %s", what);
    int r;
    for (int i = 1; i < argc; i++) {
        if ((r = gp_cli_opt(argc, argv, &i, "--out", &val, err, ctx)) != 0) {
            if (r < 0)
                return GP_EXIT_USAGE;
            *out = val;
        } else if (argv[i][0] == '-' || *in) {
            fprintf(err, "gradprec report %s: unexpected argument '%s'\n", what, argv[i]);
            return GP_EXIT_USAGE;
        } else
            *in = argv[i];
    }
    return 0;
}

static int cmd_html(int argc, char **argv, FILE *err)
{
    const char *outpath = NULL, *in = NULL;
    if (out_and_input(argc, argv, "html", &outpath, &in, err) != 0)
        return GP_EXIT_USAGE;
    if (!in) {
        fprintf(err, "gradprec report html: needs REPORT.json\n");
        return GP_EXIT_USAGE;
    }
    char buf[4096];
    if (!outpath) {
        size_t n = strlen(in);
        if (n > 5 && strcmp(in + n - 5, ".json") == 0)
            n -= 5;
        if (snprintf(buf, sizeof buf, "%.*s.html", (int)n, in) >= (int)sizeof buf) {
            fprintf(err, "gradprec report html: %s: path too long\n", in);
            return GP_EXIT_USAGE;
        }
        outpath = buf;
    }
    gp_error e = {""};
    if (gp_out_check_file("--out", outpath, &in, 1, &e) != 0) {
        fprintf(err, "gradprec report html: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    json_t *root = gp_report_load(in, &e);
    if (!root) {
        fprintf(err, "gradprec report html: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    char *page = gp_report_html(root, &e);
    int rc = GP_EXIT_OK;
    if (!page || gp_write_atomic(outpath, page, &e) != 0) {
        fprintf(err, "gradprec report html: %s\n", e.msg);
        rc = page ? GP_EXIT_INTERNAL : GP_EXIT_USAGE;
    }
    free(page);
    json_decref(root);
    return rc;
}

#define MONITOR_LOG_MAX ((size_t)1 << 31) /* bytes of log read */

static int cmd_monitor(int argc, char **argv, FILE *err)
{
    const char *outdir = NULL, *in = NULL;
    if (out_and_input(argc, argv, "monitor", &outdir, &in, err) != 0)
        return GP_EXIT_USAGE;
    if (!in || !outdir) {
        fprintf(err, "gradprec report monitor: needs --out DIR and LOG.jsonl\n");
        return GP_EXIT_USAGE;
    }
    gp_error e = {""};
    size_t len;
    char *text = gp_file_read(in, MONITOR_LOG_MAX, &len, &e);
    if (!text) {
        fprintf(err, "gradprec report monitor: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    char *files[GP_MONITOR_NFILES];
    int rc = gp_monitor_report_render(text, len, in, files, &e);
    free(text);
    if (rc != 0) {
        fprintf(err, "gradprec report monitor: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    gp_out_set set;
    rc = GP_EXIT_OK;
    if (gp_out_set_begin(&set, "--out", outdir, gp_monitor_file_names, GP_MONITOR_NFILES, &in, 1, &e) != 0) {
        fprintf(err, "gradprec report monitor: %s\n", e.msg);
        rc = GP_EXIT_USAGE;
    } else {
        for (int k = 0; k < GP_MONITOR_NFILES && rc == GP_EXIT_OK; k++)
            if (gp_out_set_add(&set, gp_monitor_file_names[k], files[k], strlen(files[k]), &e) != 0)
                rc = GP_EXIT_INTERNAL;
        if (rc == GP_EXIT_OK && gp_out_set_commit(&set, &e) != 0)
            rc = GP_EXIT_INTERNAL;
        if (rc != GP_EXIT_OK) {
            gp_out_set_abort(&set);
            fprintf(err, "gradprec report monitor: %s\n", e.msg);
        }
    }
    for (int k = 0; k < GP_MONITOR_NFILES; k++)
        free(files[k]);
    return rc;
}

int gp_cmd_report(int argc, char **argv, FILE *out, FILE *err)
{
    if (argc < 2) {
        fputs("gradprec report: needs an action: merge, html or monitor (try gradprec report --help)\n", err);
        return GP_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(report_usage, out);
        return GP_EXIT_OK;
    }
    if (strcmp(argv[1], "merge") == 0)
        return cmd_merge(argc - 1, argv + 1, err);
    if (strcmp(argv[1], "html") == 0)
        return cmd_html(argc - 1, argv + 1, err);
    if (strcmp(argv[1], "monitor") == 0)
        return cmd_monitor(argc - 1, argv + 1, err);
    fprintf(err, "gradprec report: unknown action '%s' (merge, html, monitor)\n", argv[1]);
    return GP_EXIT_USAGE;
}
