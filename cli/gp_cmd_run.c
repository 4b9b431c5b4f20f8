/* gp_cmd_run.c — `gradprec run`: load every scenario first (bad input: exit 2, nothing
 * written), open the backend(s), run the scenarios on -j threads, write report.json and
 * report.md atomically into --out, print a line a scenario. Exit 0 when nothing
 * failed, 1 when a scenario failed its thresholds, 2 bad usage or input, 3 internal.
 * Besides report.json: report.md, report.xml (JUnit) and report.html, all made from the
 * JSON, and timing.json. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../reports/gp_html.h"
#include "../reports/gp_junit.h"
#include "../reports/gp_report.h"
#include "../harness/gp_backend.h"
#include "gp_cli.h"
#include "../harness/gp_presets.h"
#include "../harness/gp_runner.h"

static const char run_usage[] =
    "usage: gradprec run [SCENARIO.yaml... | --suite default | --preset NAME...] [--backend B]\n"
    "                    [--compare B] [--out DIR] [--seed N] [--shard I/N] [-j N] [--quiet] [--list]\n"
    "\n"
    "Runs scenarios (default: the default suite of presets) on a backend beside exact\n"
    "references; writes DIR/report.json and DIR/report.md (DIR default ./gradprec-out).\n"
    "  --backend B   cpu (default), cuda, auto, or plugin:PATH.so\n"
    "  --compare B   also run backend B on identical inputs and compare bit for bit\n"
    "  --seed N      override every scenario's seed\n"
    "  --shard I/N   run only scenarios whose position p has p mod N = I (0 <= I < N);\n"
    "                `gradprec report merge` combines the shards' report.json files\n"
    "  -j N          scenarios run in parallel (results do not depend on N)\n"
    "  --quiet       no progress on the terminal\n"
    "  --list        list the presets and exit\n"
    "exit: 0 pass/warn, 1 a scenario failed, 2 bad usage or input, 3 internal error\n";

typedef struct {
    gp_scenario *sc;
    gp_result *res;
    size_t n, next, done;
    const gp_backend *b, *cmp;
    int progress, failed_internal; /* 0, or the first failing gp_run_scenario code */
    gp_error err;
    pthread_mutex_t mu;
} work;

static void *worker(void *arg)
{
    work *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        size_t i = w->next++;
        pthread_mutex_unlock(&w->mu);
        if (i >= w->n)
            return NULL;
        gp_error e = {""};
        int rc = gp_run_scenario(&w->sc[i], w->b, w->cmp, &w->res[i], &e);
        pthread_mutex_lock(&w->mu);
        if (rc != 0 && !w->failed_internal) {
            w->failed_internal = rc;
            gp_error_set(&w->err, "%s: %s", w->sc[i].name, e.msg);
        }
        w->done++;
        if (w->progress)
            fprintf(stderr, "\r[%zu/%zu] %-50.50s", w->done, w->n, w->sc[i].name);
        pthread_mutex_unlock(&w->mu);
    }
}

static int mkdir_p(const char *dir, gp_error *err)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return gp_error_set(err, "--out: path too long");
    for (char *p = buf + 1;; p++) {
        char c = *p;
        if (c == '/' || c == '\0') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return gp_error_set(err, "%s: cannot create directory: %s", buf, strerror(errno));
            *p = c;
        }
        if (c == '\0')
            return 0;
    }
}

int gp_cmd_run(int argc, char **argv, FILE *out, FILE *err)
{
    const char *backend = "cpu", *compare = NULL, *outdir = "gradprec-out", *seed_s = NULL, *val;
    long shard_i = 0, shard_n = 1;
    int jobs = 1, quiet = 0;
    const char **files = calloc((size_t)argc + 64, sizeof *files);
    const gp_preset **pre = calloc((size_t)argc + 64, sizeof *pre);
    size_t nfiles = 0, npre = 0;
    int rc = GP_EXIT_USAGE;
    gp_scenario *sc = NULL;
    gp_result *res = NULL;
    size_t *index = NULL;
    size_t nsc = 0;
    gp_backend b, cmpb;
    int have_b = 0, have_cmp = 0;
    if (!files || !pre) {
        fprintf(err, "gradprec run: out of memory\n");
        free(files);
        free(pre);
        return GP_EXIT_INTERNAL;
    }
    for (int i = 1; i < argc; i++) {
        int r = 0;
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(run_usage, out);
            rc = GP_EXIT_OK;
            goto done;
        } else if (strcmp(a, "--list") == 0) {
            for (const gp_preset *p = gp_presets(); p->name; p++)
                fprintf(out, "%-28s %s\n", p->name, p->summary);
            rc = GP_EXIT_OK;
            goto done;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--backend", &val, err, "run")) != 0) {
            backend = val;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--compare", &val, err, "run")) != 0) {
            compare = val;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--out", &val, err, "run")) != 0) {
            outdir = val;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--seed", &val, err, "run")) != 0) {
            seed_s = val;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--shard", &val, err, "run")) != 0) {
            char *end = NULL;
            if (r > 0) {
                shard_i = strtol(val, &end, 10);
                if (*end == '/')
                    shard_n = strtol(end + 1, &end, 10);
                if (!end || *end || strchr(val, '/') == NULL || shard_n < 1 || shard_i < 0 || shard_i >= shard_n) {
                    fprintf(err, "gradprec run: --shard '%s' is not I/N with 0 <= I < N\n", val);
                    goto done;
                }
            }
        } else if ((r = gp_cli_opt(argc, argv, &i, "-j", &val, err, "run")) != 0) {
            char *end;
            long j = strtol(val, &end, 10);
            if (r > 0 && (*end || j < 1 || j > 256)) {
                fprintf(err, "gradprec run: -j '%s' is not a number of jobs in 1..256\n", val);
                goto done;
            }
            jobs = (int)j;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--preset", &val, err, "run")) != 0 ||
                   (r = gp_cli_opt(argc, argv, &i, "--suite", &val, err, "run")) != 0) {
            if (r < 0)
                goto done;
            if (strncmp(argv[i - 1], "--suite", 7) == 0 || strncmp(argv[i], "--suite=", 8) == 0) {
                if (strcmp(val, "default") != 0) {
                    fprintf(err, "gradprec run: unknown suite '%s' (default)\n", val);
                    goto done;
                }
                for (const gp_preset *p = gp_presets(); p->name; p++)
                    pre[npre++] = p;
            } else if (!(pre[npre++] = gp_preset_find(val))) {
                fprintf(err, "gradprec run: unknown preset '%s' (gradprec run --list)\n", val);
                goto done;
            }
        } else if (a[0] == '-') {
            fprintf(err, "gradprec run: unknown option '%s'\n", a);
            goto done;
        } else {
            files[nfiles++] = a;
        }
        if (r < 0)
            goto done;
    }
    if (nfiles == 0 && npre == 0)
        for (const gp_preset *p = gp_presets(); p->name; p++)
            pre[npre++] = p;
    uint64_t seed = 0;
    if (seed_s) {
        char *end;
        seed = strtoull(seed_s, &end, 0);
        if (!*seed_s || *end || *seed_s == '-') {
            fprintf(err, "gradprec run: --seed '%s' is not a non-negative integer\n", seed_s);
            goto done;
        }
    }
    /* Load everything before running anything; a file with a `sweep:` expands into
     * one scenario per point, in the file's place. */
    size_t cap = nfiles + npre;
    sc = calloc(cap ? cap : 1, sizeof *sc);
    if (!sc) {
        fprintf(err, "gradprec run: out of memory\n");
        rc = GP_EXIT_INTERNAL;
        goto done;
    }
    for (size_t i = 0; i < npre + nfiles; i++) {
        gp_error e = {""};
        char origin[160];
        gp_scenario *got = NULL;
        size_t ngot = 0;
        int lr;
        if (i < npre) {
            snprintf(origin, sizeof origin, "preset:%s", pre[i]->name);
            lr = gp_scenario_load_all_string(pre[i]->yaml, strlen(pre[i]->yaml), origin, &got, &ngot, &e);
        } else {
            lr = gp_scenario_load_all_file(files[i - npre], &got, &ngot, &e);
        }
        if (lr != 0) {
            fprintf(err, "gradprec run: %s\n", e.msg);
            goto done;
        }
        if (nsc + ngot > cap) {
            size_t ncap = nsc + ngot + (npre + nfiles - i);
            gp_scenario *grown = realloc(sc, ncap * sizeof *sc);
            if (!grown) {
                for (size_t j = 0; j < ngot; j++)
                    gp_scenario_free(&got[j]);
                free(got);
                fprintf(err, "gradprec run: out of memory\n");
                rc = GP_EXIT_INTERNAL;
                goto done;
            }
            sc = grown;
            cap = ncap;
        }
        for (size_t j = 0; j < ngot; j++) {
            sc[nsc] = got[j];
            if (seed_s)
                sc[nsc].seed = seed;
            nsc++;
        }
        free(got);
    }
    res = calloc(nsc ? nsc : 1, sizeof *res);
    if (!res) {
        fprintf(err, "gradprec run: out of memory\n");
        rc = GP_EXIT_INTERNAL;
        goto done;
    }
    /* Sharding: keep positions p with p mod N = I, remembering p for the report. */
    index = malloc((nsc ? nsc : 1) * sizeof *index);
    if (!index) {
        rc = GP_EXIT_INTERNAL;
        goto done;
    }
    size_t kept = 0;
    for (size_t p = 0; p < nsc; p++) {
        if ((long)(p % (size_t)shard_n) == shard_i) {
            gp_scenario tmp = sc[p];
            sc[p] = sc[kept];
            sc[kept] = tmp;
            index[kept++] = p;
        }
    }
    for (size_t p = kept; p < nsc; p++)
        gp_scenario_free(&sc[p]);
    nsc = kept;
    gp_error e = {""};
    if (gp_backend_open(backend, &b, &e) != 0) {
        fprintf(err, "gradprec run: %s\n", e.msg);
        goto done;
    }
    have_b = 1;
    if (compare) {
        if (gp_backend_open(compare, &cmpb, &e) != 0) {
            fprintf(err, "gradprec run: --compare: %s\n", e.msg);
            goto done;
        }
        have_cmp = 1;
    }
    if (mkdir_p(outdir, &e) != 0) {
        fprintf(err, "gradprec run: %s\n", e.msg);
        goto done;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    work w;
    memset(&w, 0, sizeof w);
    w.sc = sc;
    w.res = res;
    w.n = nsc;
    w.b = &b;
    w.cmp = have_cmp ? &cmpb : NULL;
    w.progress = !quiet && isatty(fileno(stderr));
    pthread_mutex_init(&w.mu, NULL);
    pthread_t th[256];
    int nth = jobs < (int)nsc ? jobs : (int)nsc;
    for (int t = 0; t < nth; t++)
        pthread_create(&th[t], NULL, worker, &w);
    for (int t = 0; t < nth; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&w.mu);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (w.progress)
        fprintf(stderr, "\r%-60s\r", "");
    if (w.failed_internal) {
        int unsupported = w.failed_internal == -2;
        fprintf(err, "gradprec run: %s%s\n", unsupported ? "" : "internal error: ", w.err.msg);
        rc = unsupported ? GP_EXIT_USAGE : GP_EXIT_INTERNAL;
        goto done;
    }
    const gp_scenario **ptrs = malloc(nsc * sizeof *ptrs);
    if (!ptrs) {
        rc = GP_EXIT_INTERNAL;
        goto done;
    }
    for (size_t i = 0; i < nsc; i++)
        ptrs[i] = &sc[i];
    gp_run_report rep = {ptrs, res, nsc, b.label, have_cmp ? cmpb.label : NULL, index};
    char *json = gp_report_json(&rep), *md = gp_report_markdown(&rep), *xml = NULL, *html = NULL;
    json_t *root = json ? json_loads(json, 0, NULL) : NULL; /* the other views read the JSON */
    if (root && (xml = gp_report_junit(root, &e)) != NULL)
        html = gp_report_html(root, &e);
    char path[4096], timing[128];
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    snprintf(timing, sizeof timing, "{\"seconds\": %.3f, \"jobs\": %d}\n", secs, jobs);
    rc = GP_EXIT_INTERNAL;
    if (!json || !md || !root || !xml || !html)
        fprintf(err, "gradprec run: %s\n", root ? e.msg : "out of memory");
    else if (snprintf(path, sizeof path, "%s/report.json", outdir), gp_write_atomic(path, json, &e) != 0 ||
             (snprintf(path, sizeof path, "%s/report.md", outdir), gp_write_atomic(path, md, &e) != 0) ||
             (snprintf(path, sizeof path, "%s/report.xml", outdir), gp_write_atomic(path, xml, &e) != 0) ||
             (snprintf(path, sizeof path, "%s/report.html", outdir), gp_write_atomic(path, html, &e) != 0) ||
             (snprintf(path, sizeof path, "%s/timing.json", outdir), gp_write_atomic(path, timing, &e) != 0))
        fprintf(err, "gradprec run: %s\n", e.msg);
    else {
        gp_report_table(out, &rep);
        int nfail = 0;
        for (size_t i = 0; i < nsc; i++)
            nfail += res[i].verdict == GP_FAIL;
        fprintf(out, "%zu scenarios, %d failed; reports in %s/: report.json, report.md, report.xml, report.html (%.1f s)\n",
                nsc, nfail, outdir, secs);
        rc = nfail ? GP_EXIT_FAIL : GP_EXIT_OK;
    }
    free(json);
    free(md);
    free(xml);
    free(html);
    json_decref(root);
    free(ptrs);
done:
    if (have_b)
        gp_backend_close(&b);
    if (have_cmp)
        gp_backend_close(&cmpb);
    for (size_t i = 0; i < nsc; i++) {
        gp_scenario_free(&sc[i]);
        if (res)
            gp_result_free(&res[i]);
    }
    free(sc);
    free(res);
    free(index);
    free(files);
    free(pre);
    return rc;
}
