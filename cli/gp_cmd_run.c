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
#include "../base/gp_num.h"
#include "../base/gp_out.h"

static const char run_usage[] =
    "usage: gradprec run [SCENARIO.yaml... | --suite default | --preset NAME...] [--backend B]\n"
    "                    [--compare B] [--out DIR] [--seed N] [--seeds N] [--shard I/N] [-j N]\n"
    "                    [--max-seconds S] [--quiet] [--list]\n"
    "\n"
    "Runs scenarios (default: the default suite of presets) on a backend beside exact\n"
    "references; writes DIR/report.json, report.md, report.xml, report.html and timing.json\n"
    "(DIR default ./gradprec-out) as one set: DIR holds the old set or the new, never a mix;\n"
    "DIR must be new, empty, or hold only such a set.\n"
    "  --backend B   cpu (default), cuda, auto, or plugin:PATH.so\n"
    "  --compare B   also run backend B on identical inputs and compare bit for bit\n"
    "  --seed N      override every scenario's seed (decimal, 0..18446744073709551615)\n"
    "  --seeds N     run each scenario with N seeds (seed, seed+1, ...): metrics are the\n"
    "                means, report.json adds their spread, which `gradprec gate` uses\n"
    "  --shard I/N   run only scenarios whose position p has p mod N = I (0 <= I < N);\n"
    "                `gradprec report merge` combines the shards' report.json files\n"
    "  -j N          scenarios run in parallel (results do not depend on N)\n"
    "  --max-seconds S  stop (exit 3) a scenario that runs longer than S seconds, naming it\n"
    "  --quiet       no progress on the terminal\n"
    "  --list        list the presets and exit\n"
    "exit: 0 pass/warn, 1 a scenario failed, 2 bad usage or input, 3 internal error\n";

typedef struct {
    gp_scenario *sc;
    gp_result *res;
    size_t n, next, done;
    int nseeds;
    const gp_backend *b, *cmp;
    double max_seconds;            /* per scenario, 0: no limit */
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
        gp_deadline_set(w->max_seconds);
        int rc = gp_run_scenario_seeds(&w->sc[i], w->nseeds, w->b, w->cmp, &w->res[i], &e);
        gp_deadline_set(0);
        pthread_mutex_lock(&w->mu);
        if (rc != 0 && !w->failed_internal) {
            w->failed_internal = rc;
            gp_error_set(&w->err, "scenario '%s': %s", w->sc[i].name, e.msg);
            w->next = w->n; /* start nothing more */
        }
        w->done++;
        if (w->progress)
            fprintf(stderr, "\r[%zu/%zu] %-50.50s", w->done, w->n, w->sc[i].name);
        pthread_mutex_unlock(&w->mu);
    }
}

/* The files of one run's report set, in the order they are written. */
static const char *const set_names[] = {"report.json", "report.md", "report.xml", "report.html", "timing.json"};
#define NSET (sizeof set_names / sizeof set_names[0])

/* Two scenarios of one run may not share a name (reports and the gate key on it). */
static int check_names(const gp_scenario *sc, const char *const *origin, const unsigned char *ispre, size_t n,
                       FILE *err)
{
    for (size_t i = 1; i < n; i++)
        for (size_t k = 0; k < i; k++)
            if (strcmp(sc[i].name, sc[k].name) == 0) {
                fprintf(err, "gradprec run: two scenarios are named '%s' (%s%s and %s%s): names identify "
                             "scenarios in reports and the gate\n", sc[i].name, ispre[k] ? "preset " : "",
                        origin[k], ispre[i] ? "preset " : "", origin[i]);
                return -1;
            }
    return 0;
}

/* --shard I/N: both decimal, 0 <= I < N <= 2^20. */
static int parse_shard(const char *val, uint64_t *si, uint64_t *sn, FILE *err)
{
    const char *slash = strchr(val, '/');
    char ibuf[32];
    size_t il = slash ? (size_t)(slash - val) : 0;
    if (!slash || il >= sizeof ibuf || (memcpy(ibuf, val, il), ibuf[il] = '\0', 0) ||
        gp_parse_u64(ibuf, 0, UINT64_MAX, si) != 0 || gp_parse_u64(slash + 1, 1, 1u << 20, sn) != 0 || *si >= *sn) {
        fprintf(err, "gradprec run: --shard '%.60s' is not I/N with decimal 0 <= I < N <= 1048576\n", val);
        return -1;
    }
    return 0;
}

int gp_cmd_run(int argc, char **argv, FILE *out, FILE *err)
{
    const char *backend = "cpu", *compare = NULL, *outdir = "gradprec-out", *seed_s = NULL, *val;
    uint64_t shard_i = 0, shard_n = 1, jobs = 1, max_seconds = 0;
    int quiet = 0, nseeds = 1;
    const char **files = calloc((size_t)argc + 64, sizeof *files);
    size_t npresets = 0;
    for (const gp_preset *p = gp_presets(); p->name; p++)
        npresets++;
    /* room for every argument being --suite default (each adds every preset) */
    const gp_preset **pre = calloc(((size_t)argc + 1) * (npresets + 1), sizeof *pre);
    size_t nfiles = 0, npre = 0;
    int rc = GP_EXIT_USAGE;
    gp_scenario *sc = NULL;
    gp_result *res = NULL;
    size_t *index = NULL;
    const char **origin = NULL;   /* per scenario: the file or preset it came from */
    unsigned char *ispre = NULL;
    size_t nsc = 0;
    gp_backend b, cmpb;
    int have_b = 0, have_cmp = 0, have_set = 0;
    gp_out_set set;
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
        } else if ((r = gp_cli_opt(argc, argv, &i, "--seeds", &val, err, "run")) != 0) {
            uint64_t ns = 1;
            if (r > 0 && gp_cli_u64("run", "--seeds", val, 1, 1000, &ns, err) != 0)
                goto done;
            nseeds = (int)ns;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--seed", &val, err, "run")) != 0) {
            seed_s = val;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--shard", &val, err, "run")) != 0) {
            if (r > 0 && parse_shard(val, &shard_i, &shard_n, err) != 0)
                goto done;
        } else if ((r = gp_cli_opt(argc, argv, &i, "-j", &val, err, "run")) != 0) {
            if (r > 0 && gp_cli_u64("run", "-j", val, 1, 256, &jobs, err) != 0)
                goto done;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--max-seconds", &val, err, "run")) != 0) {
            if (r > 0 && gp_cli_u64("run", "--max-seconds", val, 1, 31536000, &max_seconds, err) != 0)
                goto done;
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
                fprintf(err, "gradprec run: unknown preset '%.60s' (gradprec run --list)\n", val);
                goto done;
            }
        } else if (a[0] == '-') {
            fprintf(err, "gradprec run: unknown option '%.60s' (try gradprec run --help)\n", a);
            goto done;
        } else {
            files[nfiles++] = a;
        }
        if (r < 0)
            goto done;
    }
    if (!*outdir) {
        fprintf(err, "gradprec run: --out: empty path\n");
        goto done;
    }
    if (nfiles == 0 && npre == 0)
        for (const gp_preset *p = gp_presets(); p->name; p++)
            pre[npre++] = p;
    uint64_t seed = 0;
    if (seed_s && gp_cli_u64("run", "--seed", seed_s, 0, UINT64_MAX, &seed, err) != 0)
        goto done;
    /* Load everything before running anything; a file with a `sweep:` expands into
     * one scenario per point, in the file's place. */
    size_t cap = nfiles + npre;
    sc = calloc(cap ? cap : 1, sizeof *sc);
    origin = calloc(cap ? cap : 1, sizeof *origin);
    ispre = calloc(cap ? cap : 1, 1);
    if (!sc || !origin || !ispre) {
        fprintf(err, "gradprec run: out of memory\n");
        rc = GP_EXIT_INTERNAL;
        goto done;
    }
    for (size_t i = 0; i < npre + nfiles; i++) {
        gp_error e = {""};
        char pname[160];
        gp_scenario *got = NULL;
        size_t ngot = 0;
        int lr;
        if (i < npre) {
            snprintf(pname, sizeof pname, "preset:%s", pre[i]->name);
            lr = gp_scenario_load_all_string(pre[i]->yaml, strlen(pre[i]->yaml), pname, &got, &ngot, &e);
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
            const char **go = realloc(origin, ncap * sizeof *origin);
            unsigned char *gi = go ? realloc(ispre, ncap) : NULL;
            origin = go ? go : origin;
            ispre = gi ? gi : ispre;
            cap = go && gi ? ncap : cap;
            if (!go || !gi) {
                for (size_t j = 0; j < ngot; j++)
                    gp_scenario_free(&got[j]);
                free(got);
                fprintf(err, "gradprec run: out of memory\n");
                rc = GP_EXIT_INTERNAL;
                goto done;
            }
        }
        for (size_t j = 0; j < ngot; j++) {
            origin[nsc] = i < npre ? pre[i]->name : files[i - npre];
            ispre[nsc] = i < npre;
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
    if (check_names(sc, origin, ispre, nsc, err) != 0)
        goto done;
    /* Sharding: keep positions p with p mod N = I, remembering p for the report. */
    size_t total = nsc;
    index = malloc((nsc ? nsc : 1) * sizeof *index);
    if (!index) {
        rc = GP_EXIT_INTERNAL;
        goto done;
    }
    size_t kept = 0;
    for (size_t p = 0; p < nsc; p++) {
        if (p % shard_n == shard_i) {
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
    int orc = gp_backend_open(backend, &b, &e);
    if (orc != 0) {
        fprintf(err, "gradprec run: %s\n", e.msg);
        rc = orc == -3 ? GP_EXIT_INTERNAL : GP_EXIT_USAGE;
        goto done;
    }
    have_b = 1;
    if (compare) {
        if ((orc = gp_backend_open(compare, &cmpb, &e)) != 0) {
            fprintf(err, "gradprec run: --compare: %s\n", e.msg);
            rc = orc == -3 ? GP_EXIT_INTERNAL : GP_EXIT_USAGE;
            goto done;
        }
        have_cmp = 1;
    }
    /* The output folder is checked and its new sibling made before anything runs. */
    if (gp_out_set_begin(&set, "--out", outdir, set_names, NSET, files, nfiles, &e) != 0) {
        fprintf(err, "gradprec run: %s\n", e.msg);
        goto done;
    }
    have_set = 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    work w;
    memset(&w, 0, sizeof w);
    w.sc = sc;
    w.res = res;
    w.n = nsc;
    w.b = &b;
    w.nseeds = nseeds;
    w.cmp = have_cmp ? &cmpb : NULL;
    w.max_seconds = (double)max_seconds;
    w.progress = !quiet && isatty(fileno(stderr));
    pthread_mutex_init(&w.mu, NULL);
    pthread_t th[256];
    int nth = (int)jobs < (int)nsc ? (int)jobs : (int)nsc, started = 0, terr = 0;
    for (int t = 0; t < nth && !terr; t++)
        if ((terr = pthread_create(&th[t], NULL, worker, &w)) == 0)
            started++;
    if (terr) { /* let the started threads finish what they took, start nothing more */
        pthread_mutex_lock(&w.mu);
        w.next = w.n;
        pthread_mutex_unlock(&w.mu);
    }
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&w.mu);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (w.progress)
        fprintf(stderr, "\r%-60s\r", "");
    rc = GP_EXIT_INTERNAL;
    if (terr) {
        fprintf(err, "gradprec run: cannot start worker thread %d of %d: %s\n", started + 1, nth, strerror(terr));
        goto done;
    }
    if (w.failed_internal) {
        int unsupported = w.failed_internal == -2, timeout = w.failed_internal == -3;
        fprintf(err, "gradprec run: %s%s\n", unsupported || timeout ? "" : "internal error: ", w.err.msg);
        rc = unsupported ? GP_EXIT_USAGE : GP_EXIT_INTERNAL;
        goto done;
    }
    const gp_scenario **ptrs = malloc((nsc ? nsc : 1) * sizeof *ptrs);
    if (!ptrs)
        goto done;
    for (size_t i = 0; i < nsc; i++)
        ptrs[i] = &sc[i];
    gp_run_report rep = {ptrs, res, nsc, b.label, have_cmp ? cmpb.label : NULL, index};
    char *json = gp_report_json_shard(&rep, (size_t)shard_i, (size_t)shard_n, total);
    char *md = gp_report_markdown(&rep), *xml = NULL, *html = NULL;
    json_t *root = json ? json_loads(json, 0, NULL) : NULL; /* the other views read the JSON */
    if (root && (xml = gp_report_junit(root, &e)) != NULL)
        html = gp_report_html(root, &e);
    char timing[128];
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    snprintf(timing, sizeof timing, "{\"seconds\": %.3f, \"jobs\": %d}\n", secs, (int)jobs);
    const char *text[NSET] = {json, md, xml, html, timing};
    int bad = !json || !md || !root || !xml || !html;
    if (bad)
        fprintf(err, "gradprec run: %s\n", root ? e.msg : "out of memory");
    for (size_t k = 0; k < NSET && !bad; k++)
        if (gp_out_set_add(&set, set_names[k], text[k], strlen(text[k]), &e) != 0) {
            fprintf(err, "gradprec run: %s\n", e.msg);
            bad = 1;
        }
    if (!bad && gp_out_set_commit(&set, &e) != 0) {
        fprintf(err, "gradprec run: %s\n", e.msg);
        bad = 1;
    }
    if (!bad) {
        have_set = 0;
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
    if (have_set)
        gp_out_set_abort(&set);
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
    free(origin);
    free(ispre);
    free(files);
    free(pre);
    return rc;
}
