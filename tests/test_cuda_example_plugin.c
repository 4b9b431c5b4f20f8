/* test_cuda_example_plugin.c — the example CUDA device-memory plugin
 * (examples/plugins/gp_example_cuda_plugin.cu), served host memory by the staging
 * adapter, compared bit for bit with the CPU emulation (gp_run_scenario's --compare):
 * every preset of the default suite, and two-tensor scenarios (one accumulate_many call
 * per micro-batch) with rounding toward zero and Kahan accumulation over fp32, bf16 and
 * fp16, must show no mismatching element and no write in a skipped step; stochastic
 * rounding, which the plugin does not implement, must be refused as unsupported (GP_RUN_REFUSED).
 * A preset that needs what the plugin documents as not implemented (FTZ, stochastic
 * rounding of the accumulator or of the stored weights, an fp8 gradient or accumulator)
 * must be refused the same way; every other preset must run.
 * This program touches CUDA (gp_cuda_device_count) before it opens the plugin, as a host
 * whose framework initialised CUDA does; CUDA cannot be used in a child forked after
 * that, so it registers itself as the program that serves device-memory plugins
 * (gp_worker_set_program: `test_cuda_example_plugin --worker plugin:PATH FD`), as a C
 * host should. With --fork-only it registers nothing: opening the plugin must then be
 * refused with one line naming the plugin, the cause (CUDA initialised before the
 * worker was forked) and cudaErrorInitializationError. With --bad-programs it registers
 * a program that does not exist, then /bin/false: each open must fail with one line
 * naming the program (cannot run it; ended before serving).
 * Without a device: the plugin (where it was built) must be refused with one line naming
 * device memory, then exit 77 (skipped). Arguments: [--fork-only] the folder of the
 * example plugins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/sources/gp_backend.h"
#include "harness/sources/gp_plugin_worker.h"
#include "harness/scenario/gp_presets.h"
#include "harness/run/gp_runner.h"
#include "kernels/cuda/gp_cuda.h"

/* Scenario `name` (YAML text) on b compared with cpu. Returns gp_run_scenario's code
 * (-3 when the YAML does not load); *bad gets the disagreements: mismatching elements
 * of accumulation and AdamW, and writes in skipped steps. */
static int run(const char *name, const char *yaml, const gp_backend *b, const gp_backend *cpu,
               unsigned long long *bad)
{
    gp_scenario sc;
    gp_result r;
    gp_error e = {""};
    *bad = 0;
    if (gp_scenario_load_string(yaml, strlen(yaml), name, &sc, &e) != 0) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        return -3;
    }
    int rc = gp_run_scenario(&sc, b, cpu, &r, &e);
    gp_scenario_free(&sc);
    if (rc != 0) {
        printf("%-32s not run: %s\n", name, e.msg);
        return rc;
    }
    *bad = r.st.mismatches + r.st.opt.mismatches + r.st.opt.skip_writes;
    printf("%-32s %llu accumulation, %llu AdamW mismatches, %llu writes in skipped steps\n", name,
           (unsigned long long)r.st.mismatches, (unsigned long long)r.st.opt.mismatches,
           (unsigned long long)r.st.opt.skip_writes);
    gp_result_free(&r);
    return 0;
}

/* 1 when the preset `yaml` needs what the example CUDA plugin does not implement (its
 * header: FTZ, stochastic rounding, fp8), 0 when it must run, -1 when it does not load. */
static int needs_unimplemented(const char *name, const char *yaml)
{
    gp_scenario sc;
    gp_error e = {""};
    if (gp_scenario_load_string(yaml, strlen(yaml), name, &sc, &e) != 0) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        return -1;
    }
    int fp8 = sc.precision.grad == GP_FP8_E4M3 || sc.precision.grad == GP_FP8_E5M2 ||
              sc.precision.accumulator == GP_FP8_E4M3 || sc.precision.accumulator == GP_FP8_E5M2;
    int r = sc.precision.ftz || sc.precision.rounding == GP_ACC_STOCHASTIC || sc.optimizer.stochastic || fp8;
    gp_scenario_free(&sc);
    return r;
}

/* Two tensors (4099 and 100 elements: sizes not multiple of 8), 16 micro-batches, two
 * optimizer steps, in the given gradient and accumulator formats and rounding. */
static const char *two_tensors(const char *grad, const char *acc, const char *rounding)
{
    static char y[1024];
    snprintf(y, sizeof y,
             "seed: 29\n"
             "tensors:\n"
             "  - name: a\n"
             "    size: 4099\n"
             "    grad: {dist: lognormal, scale: 1.0e-3, sigma: 0.5, sign: 0.1}\n"
             "  - name: b\n"
             "    size: 100\n"
             "    grad: {dist: normal, scale: 1.0e-2}\n"
             "batch: {microbatches: 16, tokens: 64}\n"
             "reduction: sum\n"
             "fullbatch: sum\n"
             "precision: {grad: %s, accumulator: %s, rounding: %s}\n"
             "steps: 2\n",
             grad, acc, rounding);
    return y;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--worker") == 0 && strncmp(argv[2], "plugin:", 7) == 0)
        _exit(gp_worker_main(atoi(argv[3]), argv[2] + 7)); /* as a forked worker ends */
    int fork_only = argc == 3 && strcmp(argv[1], "--fork-only") == 0;
    int bad_programs = argc == 3 && strcmp(argv[1], "--bad-programs") == 0;
    if (argc != 2 + (fork_only | bad_programs)) {
        fprintf(stderr, "usage: test_cuda_example_plugin [--fork-only | --bad-programs] PLUGIN_DIR\n");
        return 1;
    }
    const char *const self[] = {"/proc/self/exe", "--worker", NULL};
    if (!fork_only && gp_worker_set_program(self) != 0) {
        fprintf(stderr, "gp_worker_set_program failed\n");
        return 1;
    }
    char path[600], spec[620];
    snprintf(path, sizeof path, "%s/libgp_example_cuda_plugin.so", argv[1 + (fork_only | bad_programs)]);
    snprintf(spec, sizeof spec, "plugin:%s", path);
    gp_backend b, cpu;
    gp_error e = {""};
    if (gp_cuda_device_count() == 0) {
        if (access(path, R_OK) == 0) {
            if (gp_backend_open(spec, &b, &e) == 0 || !strstr(e.msg, path) ||
                !strstr(e.msg, "asks for device memory (GP_PLUGIN_DEVICE)") || strchr(e.msg, '\n')) {
                fprintf(stderr, "expected a one-line refusal naming device memory, got: '%s'\n", e.msg);
                return 1;
            }
            printf("refused as it should be: %s\n", e.msg);
        }
        printf("no CUDA device (or CUDA not built): skipped\n");
        return 77;
    }
    if (bad_programs) {
        static const char *const missing[] = {"/nonexistent/gradprec-worker", NULL}, *const quits[] = {"false", NULL};
        static const char *const want[] = {
            "cannot run the program that serves device-memory plugins '/nonexistent/gradprec-worker': No such file",
            "its worker program 'false' ended (exit status 1) before serving it"};
        for (int k = 0; k < 2; k++) {
            gp_worker_set_program(k ? quits : missing);
            int rc = gp_backend_open(spec, &b, &e);
            if (rc == 0 || !strstr(e.msg, path) || !strstr(e.msg, want[k]) || strchr(e.msg, '\n')) {
                fprintf(stderr, "expected one line with '%s', got %d: '%s'\n", want[k], rc, e.msg);
                if (rc == 0)
                    gp_backend_close(&b);
                return 1;
            }
            printf("refused as it should be: %s\n", e.msg);
        }
        return 0;
    }
    if (fork_only) {
        int rc = gp_backend_open(spec, &b, &e);
        if (rc == 0 || !strstr(e.msg, path) || strchr(e.msg, '\n') ||
            !strstr(e.msg, "CUDA was initialised in this process before the plugin's worker was forked") ||
            !strstr(e.msg, "cudaErrorInitializationError")) {
            fprintf(stderr, "expected a one-line refusal naming CUDA initialised before the fork, got %d: '%s'\n", rc,
                    e.msg);
            if (rc == 0)
                gp_backend_close(&b);
            return 1;
        }
        printf("refused as it should be: %s\n", e.msg);
        return 0;
    }
    if (gp_backend_open(spec, &b, &e) != 0 || gp_backend_open("cpu", &cpu, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    if (b.ops->memory != GP_PLUGIN_HOST || b.ops->grad_sumsq || !b.ops->accumulate_many) {
        fprintf(stderr, "the staged table should be host memory, without grad_sumsq, with accumulate_many\n");
        return 1;
    }
    unsigned long long bad = 0, n;
    int failed = 0;
    for (const gp_preset *p = gp_presets(); p->name; p++) {
        int refuse = needs_unimplemented(p->name, p->yaml);
        int rc = run(p->name, p->yaml, &b, &cpu, &n);
        if (refuse < 0 || rc != (refuse ? GP_RUN_REFUSED : 0)) {
            fprintf(stderr, "%s: expected %s, got code %d\n", p->name,
                    refuse ? "a refusal as not supported (GP_RUN_REFUSED)" : "a run", rc);
            failed = 1;
        }
        bad += n;
    }
    static const char *const fmt[] = {"fp32", "bf16", "fp16"};
    static const char *const rounding[] = {"rtz", "kahan", "rne"};
    for (int r = 0; r < 3; r++)
        for (int g = 0; g < 3; g++)
            for (int a = 0; a < 3; a++) {
                char name[64];
                snprintf(name, sizeof name, "%s-%s-into-%s", rounding[r], fmt[g], fmt[a]);
                failed |= run(name, two_tensors(fmt[g], fmt[a], rounding[r]), &b, &cpu, &n) != 0;
                bad += n;
            }
    if (run("stochastic-bf16 (unsupported)", two_tensors("fp32", "bf16", "stochastic"), &b, &cpu, &n) !=
        GP_RUN_REFUSED) {
        fprintf(stderr, "stochastic rounding should be refused as not supported\n");
        failed = 1;
    }
    gp_backend_close(&b);
    gp_backend_close(&cpu);
    printf("example CUDA plugin against the CPU: %llu disagreements%s\n", bad, failed ? ", and failures" : "");
    return bad || failed ? 1 : 0;
}
