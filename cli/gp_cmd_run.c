/* gp_cmd_run.c — `gradprec run`: load every scenario first (bad input: exit 2, nothing
 * written), open the backend(s), run the scenarios on -j threads, write report.json and
 * report.md atomically into --out, print a line a scenario. Exit 0 when nothing
 * failed, 1 when a scenario failed its thresholds, 2 bad usage or input, 3 internal.
 * Besides report.json: report.md, report.xml (JUnit) and report.html, all made from the
 * JSON, and timing.json. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../reports/gp_report_set.h"
#include "../harness/sources/gp_backend.h"
#include "gp_cli_opt.h"
#include "gp_cmd.h"
#include "../harness/scenario/gp_presets.h"
#include "../harness/run/gp_run_all.h"
#include "../base/gp_num.h"

static const char run_usage[] =
    "usage: gradprec run [SCENARIO.yaml... | --suite default | --preset NAME...] [--backend B]\n"
    "                    [--compare B] [--out DIR] [--seed N] [--seeds N] [--shard I/N] [-j N]\n"
    "                    [--max-seconds S] [--quiet] [--list]\n"
    "\n"
    "Runs scenarios (default: the default suite of presets) on a backend beside exact\n"
    "references; writes DIR/report.json, report.md, report.xml, report.html and timing.json\n"
    "(DIR default ./gradprec-out) as one set: DIR holds the old set or the new, never a mix;\n"
    "DIR must be new, empty, or hold only such a set.\n"
    "  --backend B   cpu (default), cuda, auto, plugin:PATH.so, or python:MODULE:NAME\n"
    "  --compare B   also run backend B on identical inputs and compare bit for bit\n"
    "  --seed N      override every scenario's seed (decimal, 0..18446744073709551615)\n"
    "  --seeds N     run each scenario with N seeds (seed, seed+1, ...): metrics are the\n"
    "                means, report.json adds their spread, which `gradprec gate` uses\n"
    "  --shard I/N   run only scenarios whose position p has p mod N = I (0 <= I < N);\n"
    "                `gradprec report merge` combines the shards' report.json files\n"
    "  -j N          threads: scenarios run in parallel, and a scenario's windows are\n"
    "                split over the threads left (results do not depend on N)\n"
    "  --max-seconds S  stop (exit 3) a scenario that runs longer than S seconds, naming it\n"
    "                (a plugin or python: worker gets S seconds to start too, else 60)\n"
    "  --quiet       no progress line on the terminal (shown after 2 s when stderr is\n"
    "                one; GRADPREC_PROGRESS=always: on any stderr from the start, =never;\n"
    "                GRADPREC_PROGRESS_AFTER=S: after S seconds)\n"
    "  --list        list the presets and exit\n"
    "exit: 0 every scenario as expected (its `expect:`, else pass or warn), 1 one was not,\n"
    "      2 bad usage or input, 3 internal error. A scenario the backend refuses (its\n"
    "      reason in the table, report.json, JUnit as skipped) does not stop the others\n"
    "      and does not change the exit code unless it states an `expect:` (then 1);\n"
    "      every scenario refused: 2 (the reports are written)\n";

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
    const char **inputs = NULL;   /* what --out may not hold: scenario files and dumps */
    unsigned char *ispre = NULL;
    size_t nsc = 0;
    gp_backend b, cmpb;
    const gp_scenario **ptrs = NULL;
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
        if (nsc + ngot > cap) { /* a sweep: grow the three arrays together */
            size_t ncap = nsc + ngot + (npre + nfiles - i);
            gp_scenario *grown = realloc(sc, ncap * sizeof *sc);
            const char **go = grown ? realloc(origin, ncap * sizeof *origin) : NULL;
            unsigned char *gi = go ? realloc(ispre, ncap) : NULL;
            sc = grown ? grown : sc;
            origin = go ? go : origin;
            ispre = gi ? gi : ispre;
            if (!gi) {
                for (size_t j = 0; j < ngot; j++)
                    gp_scenario_free(&got[j]);
                free(got);
                fprintf(err, "gradprec run: out of memory\n");
                rc = GP_EXIT_INTERNAL;
                goto done;
            }
            cap = ncap;
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
    gp_deadline_set((double)max_seconds); /* a worker's start counts against --max-seconds */
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
    gp_deadline_set(0); /* each scenario gets its own (gp_run_all) */
    /* The output folder is checked and its new sibling made before anything runs; the
     * inputs it may not hold: the scenario files and every dump a scenario replays. */
    size_t nin = nfiles;
    for (size_t i = 0; i < nsc; i++)
        nin += gp_scenario_inputs(&sc[i], NULL, 0);
    inputs = malloc((nin ? nin : 1) * sizeof *inputs);
    if (!inputs) {
        fprintf(err, "gradprec run: out of memory\n");
        rc = GP_EXIT_INTERNAL;
        goto done;
    }
    memcpy(inputs, files, nfiles * sizeof *inputs);
    for (size_t i = 0, k = nfiles; i < nsc; i++)
        k += gp_scenario_inputs(&sc[i], inputs + k, nin - k);
    if (gp_report_files_begin(&set, "--out", outdir, inputs, nin, &e) != 0) {
        fprintf(err, "gradprec run: %s\n", e.msg);
        goto done;
    }
    have_set = 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char *pe = getenv("GRADPREC_PROGRESS");
    int always = pe && strcmp(pe, "always") == 0, never = pe && strcmp(pe, "never") == 0;
    const char *pa = getenv("GRADPREC_PROGRESS_AFTER"); /* seconds before the first redraw */
    double after = always ? 0.0 : pa && *pa ? strtod(pa, NULL) : 2.0;
    gp_run_opts ro = {(int)jobs, nseeds, (double)max_seconds,
                      !quiet && !never && (always || isatty(fileno(stderr))) ? err : NULL, after};
    int frc = gp_run_all(sc, nsc, &b, have_cmp ? &cmpb : NULL, &ro, res, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    rc = GP_EXIT_INTERNAL;
    if (frc != 0) {
        int unsupported = frc == -2, timeout = frc == -3;
        fprintf(err, "gradprec run: %s%s\n", unsupported || timeout ? "" : "internal error: ", e.msg);
        rc = unsupported ? GP_EXIT_USAGE : GP_EXIT_INTERNAL;
        goto done;
    }
    ptrs = malloc((nsc ? nsc : 1) * sizeof *ptrs);
    if (!ptrs)
        goto done;
    for (size_t i = 0; i < nsc; i++)
        ptrs[i] = &sc[i];
    gp_run_report rep = {ptrs, res, nsc, b.label, have_cmp ? cmpb.label : NULL, index};
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    gp_report_files rf;
    if (gp_report_files_render(&rep, (size_t)shard_i, (size_t)shard_n, total, secs, (int)jobs, &rf, &e) != 0 ||
        gp_report_files_commit(&rf, &set, &e) != 0)
        fprintf(err, "gradprec run: %s\n", e.msg);
    else {
        have_set = 0;
        gp_report_table(out, &rep);
        int nfail = 0, nunmet = 0, nbad = 0, nrefused = 0; /* nunmet: of the scenarios with an `expect:` */
        for (size_t i = 0; i < nsc; i++) {
            nfail += !res[i].refused && res[i].verdict == GP_FAIL;
            nrefused += res[i].refused;
            nunmet += sc[i].expect.set && !res[i].expect_met;
            nbad += !res[i].expect_met;
        }
        char refused[64] = "";
        if (nrefused)
            snprintf(refused, sizeof refused, ", %d refused by the backend", nrefused);
        fprintf(out, "%zu scenarios, %d failed%s, %d not as expected; reports in %s/: report.json, report.md, "
                "report.xml, report.html (%.1f s)\n", nsc, nfail, refused, nunmet, outdir, secs);
        rc = nbad ? GP_EXIT_FAIL : GP_EXIT_OK;
        if (nsc && nrefused == (int)nsc) { /* nothing was judged */
            size_t first = 0;
            while (first < nsc && !res[first].refused)
                first++;
            fprintf(err, "gradprec run: the backend refused every scenario; the first: %s\n", res[first].refusal);
            rc = GP_EXIT_USAGE;
        }
    }
    gp_report_files_free(&rf);
done:
    gp_deadline_set(0);
    free(ptrs);
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
    free(inputs);
    free(ispre);
    free(files);
    free(pre);
    return rc;
}
