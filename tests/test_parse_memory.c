/* test_parse_memory.c — peak memory of parsing accepted inputs stays under 64 times the
 * file's size plus 16 MiB (issue 17; the bound is derived in docs/limits.md and enforced
 * by harness/scenario/gp_yaml_bound.c and reports/gp_json_in.c). Each file is parsed in a forked
 * child; wait4's ru_maxrss of that child, minus that of a child parsing a tiny file, is
 * what parsing added. Large generated files: a scenario of explicit values, a scenario
 * of many small tensors, a report.json of many scenarios. Skipped (77) under ASan, whose
 * shadow memory and quarantine are not the program's. */
#define _DEFAULT_SOURCE /* wait4 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness/scenario/gp_scenario.h"
#include "../reports/gp_report.h"

#if defined(__SANITIZE_ADDRESS__)
#define GP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GP_ASAN 1
#endif
#endif

#define SLACK ((long long)17 << 20) /* the bound's 16 MiB plus 1 MiB for the child's own stack and stdio */

static char g_dir[] = "/tmp/gp-parse-mem.XXXXXX";

/* Parse path in a child (kind 'y' scenario, 'j' report); its peak RSS in bytes, or -1
 * when the child failed (the file was refused or it crashed). */
static long long child_peak(const char *path, char kind)
{
    pid_t pid = fork();
    if (pid == 0) {
        gp_error e = {""};
        int ok;
        if (kind == 'y') {
            gp_scenario *sc = NULL;
            size_t n = 0;
            ok = gp_scenario_load_all_file(path, &sc, &n, &e) == 0;
        } else {
            ok = gp_report_load(path, &e) != NULL;
        }
        if (!ok)
            fprintf(stderr, "refused: %s\n", e.msg);
        _exit(ok ? 0 : 1); /* nothing freed: the peak is what parsing held */
    }
    int st = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return (long long)ru.ru_maxrss * 1024;
}

static long long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long long n = ftell(f);
    fclose(f);
    return n;
}

static int check(const char *what, const char *path, char kind, long long base)
{
    long long size = file_size(path), peak = child_peak(path, kind);
    if (size <= 0 || peak < 0) {
        printf("FAIL %s: not accepted\n", what);
        return 1;
    }
    long long added = peak - base, bound = 64 * size + SLACK;
    printf("%-34s %9lld bytes: parsing added %10lld bytes = %5.1f x its size (bound %lld)\n", what, size, added,
           (double)added / (double)size, bound);
    return added < bound ? 0 : 1;
}

int main(void)
{
#ifdef GP_ASAN
    printf("skipped: ASan's shadow memory is not the program's\n");
    return 77;
#endif
    if (!mkdtemp(g_dir))
        return 1;
    char tiny[300], vals[300], tens[300], rep[300];
    snprintf(tiny, sizeof tiny, "%s/tiny.yaml", g_dir);
    snprintf(vals, sizeof vals, "%s/values.yaml", g_dir);
    snprintf(tens, sizeof tens, "%s/tensors.yaml", g_dir);
    snprintf(rep, sizeof rep, "%s/report.json", g_dir);
    FILE *f = fopen(tiny, "w");
    fputs("steps: 1\n", f);
    fclose(f);
    /* one micro-batch of 10^6 explicit per-token values, 8 bytes of text each */
    f = fopen(vals, "w");
    fputs("tensors:\n  - name: a\n    grad:\n      values:\n        - [", f);
    for (int i = 0; i < 1000000; i++)
        fprintf(f, "%s%d.5e-06", i ? "," : "", i % 10);
    fputs("]\nbatch: {microbatches: 1}\n", f);
    fclose(f);
    /* 40000 tensors in block style */
    f = fopen(tens, "w");
    fputs("tensors:\n", f);
    for (int i = 0; i < 40000; i++)
        fprintf(f, "  - name: blocks.%d.attn.lora_A\n    size: 16\n    grad: {dist: lognormal, scale: 4.0e-6, sigma: 1.0}\n", i);
    fclose(f);
    /* a report of 20000 scenarios */
    f = fopen(rep, "w");
    fputs("{\n  \"schema\": \"gradprec-report/1\",\n  \"backend\": \"cpu\",\n  \"compare_backend\": null,\n  \"scenarios\": [\n", f);
    for (int i = 0; i < 20000; i++)
        fprintf(f, "%s    {\"name\": \"scenario-%d\", \"index\": %d, \"verdict\": \"pass\", \"metrics\": "
                   "{\"grad_rel_err_fullbatch\": 1.2345678901234567e-05, \"grad_rel_err_rounding\": 2.5e-06, "
                   "\"normalization_rel_err\": 0.0, \"max_ulp_err\": 3.0, \"underflow_frac\": 0.0, "
                   "\"absorbed_frac\": 0.015625, \"overflow_count\": 0, \"grad_norm_ratio\": 0.99999, "
                   "\"stale_update_frac\": 0.0, \"weight_rel_err\": 1.5e-07}}",
                i ? ",\n" : "", i, i);
    fputs("\n  ]\n}\n", f);
    fclose(f);
    long long base = child_peak(tiny, 'y');
    if (base < 0)
        return 1;
    int bad = check("scenario: 10^6 explicit values", vals, 'y', base);
    bad |= check("scenario: 40000 tensors", tens, 'y', base);
    bad |= check("report.json: 20000 scenarios", rep, 'j', base);
    remove(tiny);
    remove(vals);
    remove(tens);
    remove(rep);
    rmdir(g_dir);
    return bad;
}
