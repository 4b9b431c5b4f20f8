/* gp_cmd_advise.c — `gradprec advise SCENARIO`: run a configuration and each
 * alternative that applies to it (harness/scenario/gp_advise.h) on identical inputs, and print
 * per alternative the verdict, the error by mechanism and the extra memory: per
 * trainable parameter, for the scenario's tensors, and for a whole model given its
 * parameter count. Terminal table; --json for JSON on stdout; --out DIR for
 * advice.json, advice.md and the runs' report.json / report.md / report.html. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/gp_out.h"
#include "../harness/scenario/gp_advise.h"
#include "../harness/sources/gp_backend.h"
#include "../harness/scenario/gp_presets.h"
#include "../reports/gp_advice.h"
#include "../reports/gp_html.h"
#include "../reports/gp_report.h"
#include "gp_cli_opt.h"
#include "gp_cmd.h"

static const char advise_usage[] =
    "usage: gradprec advise PRESET|FILE.yaml [--params P] [--trainable-params T] [--memory-gb G]\n"
    "                       [--backend B] [--states] [--json] [--out DIR]\n"
    "\n"
    "Runs the scenario and each alternative that applies (fp32 accumulator, Kahan or\n"
    "stochastic-rounding accumulator, fp32 master weights, Kahan or stochastic-rounding\n"
    "weights, loss scaling, token-normalised loss; plain fp8 gradients: fp8 1x128 block\n"
    "scales, MXFP8 (rceil); MX gradients: the rceil rule; scaled ones: stochastic rounding;\n"
    "a scaled reduce dtype: bf16 all-reduce, rceil) and prints, per alternative, the verdict,\n"
    "the error by mechanism and the extra memory (m and v traffic under the table when the\n"
    "state changes; the gradient formats' bytes per element: docs/advise.md).\n"
    "  --params P            parameters of the whole model (e.g. 2.6e9): adds its costs\n"
    "  --trainable-params T  of which trainable (e.g. a LoRA's 4.8e7; default P)\n"
    "  --memory-gb G         percentages of G GB (e.g. 80), else of the training state\n"
    "  --states              also the low-bit optimizer states (bitsandbytes 8-bit, torchao\n"
    "                        8-bit, 4-bit, fp8; offered anyway when the state is low-bit)\n"
    "  --json                the advice as JSON on stdout instead of the table\n"
    "  --out DIR             write advice.json, advice.md, report.json, report.md, report.html\n"
    "exit: 0 printed, 2 bad usage or input, 3 internal error\n";

static const char *const set_names[] = {"advice.json", "advice.md", "report.json", "report.md", "report.html"};
#define NSET (sizeof set_names / sizeof set_names[0])

/* A positive finite number, the whole string (2.6e9 allowed). */
static int positive(const char *opt, const char *val, double *out, FILE *err)
{
    char *end;
    double x = strtod(val, &end);
    if (!*val || *end || !isfinite(x) || !(x > 0)) {
        fprintf(err, "gradprec advise: %s '%s' is not a positive number\n", opt, val);
        return -1;
    }
    *out = x;
    return 0;
}

int gp_cmd_advise(int argc, char **argv, FILE *out, FILE *err)
{
    const char *what = NULL, *outdir = NULL, *backend = "cpu", *val;
    int as_json = 0, states = 0, rc = GP_EXIT_USAGE, nalt = 0, have_b = 0;
    gp_advice_model model = {0, 0, 0};
    gp_scenario *loaded = NULL, sc[1 + GP_NALT];
    size_t nloaded = 0;
    int nsc = 0;
    gp_result res[1 + GP_NALT];
    int nres = 0;
    gp_alternative alt[GP_NALT];
    gp_backend b;
    gp_error e = {""};
    json_t *advice = NULL;
    for (int i = 1; i < argc; i++) {
        int r = 0;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(advise_usage, out);
            return GP_EXIT_OK;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = 1;
        } else if (strcmp(argv[i], "--states") == 0) {
            states = 1;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--params", &val, err, "advise")) != 0) {
            if (r < 0 || positive("--params", val, &model.params, err))
                return GP_EXIT_USAGE;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--trainable-params", &val, err, "advise")) != 0) {
            if (r < 0 || positive("--trainable-params", val, &model.trainable, err))
                return GP_EXIT_USAGE;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--memory-gb", &val, err, "advise")) != 0) {
            if (r < 0 || positive("--memory-gb", val, &model.memory, err))
                return GP_EXIT_USAGE;
            model.memory *= 1e9;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--backend", &val, err, "advise")) != 0) {
            if (r < 0)
                return GP_EXIT_USAGE;
            backend = val;
        } else if ((r = gp_cli_opt(argc, argv, &i, "--out", &val, err, "advise")) != 0) {
            if (r < 0)
                return GP_EXIT_USAGE;
            outdir = val;
        } else if (argv[i][0] == '-' || what) {
            fprintf(err, "gradprec advise: %s '%s'\n", argv[i][0] == '-' ? "unknown option" : "unexpected argument",
                    argv[i]);
            return GP_EXIT_USAGE;
        } else {
            what = argv[i];
        }
    }
    if (!what) {
        fputs(advise_usage, err);
        return GP_EXIT_USAGE;
    }
    if (model.trainable > 0 && !(model.params > 0)) {
        fprintf(err, "gradprec advise: --trainable-params needs --params (the whole model's count)\n");
        return GP_EXIT_USAGE;
    }
    if (model.trainable > model.params) {
        fprintf(err, "gradprec advise: --trainable-params %g exceeds --params %g\n", model.trainable, model.params);
        return GP_EXIT_USAGE;
    }
    const gp_preset *p = gp_preset_find(what);
    int lr;
    if (p && !strchr(what, '/')) {
        char origin[160];
        snprintf(origin, sizeof origin, "preset:%s", p->name);
        lr = gp_scenario_load_all_string(p->yaml, strlen(p->yaml), origin, &loaded, &nloaded, &e);
    } else {
        lr = gp_scenario_load_all_file(what, &loaded, &nloaded, &e);
    }
    if (lr != 0) {
        fprintf(err, "gradprec advise: %s\n", e.msg);
        return GP_EXIT_USAGE;
    }
    if (nloaded != 1) {
        fprintf(err, "gradprec advise: %s is a sweep of %zu scenarios; advise takes one\n", what, nloaded);
        goto done;
    }
    sc[nsc++] = loaded[0];
    nloaded = 0;
    nalt = gp_advise_alternatives_states(&sc[0], states, alt);
    for (int k = 0; k < nalt; k++) {
        if (gp_advise_scenario(&sc[0], &alt[k], &sc[nsc], &e) != 0) {
            fprintf(err, "gradprec advise: %s\n", e.msg);
            goto done;
        }
        nsc++;
    }
    if (gp_backend_open(backend, &b, &e) != 0) {
        fprintf(err, "gradprec advise: %s\n", e.msg);
        goto done;
    }
    have_b = 1;
    for (int k = 0; k < nsc; k++) {
        int r = gp_run_scenario(&sc[k], &b, NULL, &res[k], &e);
        if (r != 0) {
            int usage = r == -2 || r == GP_RUN_REFUSED;
            fprintf(err, "gradprec advise: %s%s: %s\n", usage ? "" : "internal error: ", sc[k].name, e.msg);
            rc = usage ? GP_EXIT_USAGE : GP_EXIT_INTERNAL;
            goto done;
        }
        nres++;
    }
    rc = GP_EXIT_INTERNAL;
    advice = gp_advice_json(&sc[0], alt, nalt, res, &model);
    if (!advice)
        goto done;
    if (outdir) {
        const gp_scenario *ptrs[1 + GP_NALT];
        for (int k = 0; k < nsc; k++)
            ptrs[k] = &sc[k];
        gp_run_report rep = {ptrs, res, (size_t)nsc, b.label, NULL, NULL};
        char *json = gp_report_json(&rep), *md = gp_report_markdown(&rep), *amd = gp_advice_markdown(advice);
        json_t *root = json ? json_loads(json, 0, NULL) : NULL;
        char *rjson = NULL, *ajson = NULL, *html = NULL;
        if (root && json_object_set(root, "advice", advice) == 0) {
            rjson = gp_report_dump(root);
            html = gp_report_html(root, &e);
        }
        ajson = gp_report_dump(advice);
        gp_out_set set;
        const char *text[NSET] = {ajson, amd, rjson, md, html};
        /* the inputs --out may not hold: the scenario file and the dumps it replays */
        size_t nin = 1 + gp_scenario_inputs(&sc[0], NULL, 0);
        const char **inputs = malloc(nin * sizeof *inputs);
        int bad = !json || !md || !amd || !rjson || !ajson || !html || !inputs;
        if (inputs) {
            inputs[0] = what;
            gp_scenario_inputs(&sc[0], inputs + 1, nin - 1);
        }
        if (bad)
            fprintf(err, "gradprec advise: out of memory\n");
        else if (gp_out_set_begin(&set, "--out", outdir, set_names, NSET, inputs, nin, &e) != 0) {
            fprintf(err, "gradprec advise: %s\n", e.msg);
            bad = 1;
            rc = GP_EXIT_USAGE;
        } else {
            for (size_t k = 0; k < NSET && !bad; k++)
                if (gp_out_set_add(&set, set_names[k], text[k], strlen(text[k]), &e) != 0)
                    bad = 1;
            if (!bad && gp_out_set_commit(&set, &e) != 0)
                bad = 1;
            if (bad) {
                gp_out_set_abort(&set);
                fprintf(err, "gradprec advise: %s\n", e.msg);
            }
        }
        free(inputs);
        free(json);
        free(md);
        free(amd);
        free(rjson);
        free(ajson);
        free(html);
        json_decref(root);
        if (bad)
            goto done;
    }
    if (as_json) {
        char *t = gp_report_dump(advice);
        if (!t)
            goto done;
        fputs(t, out);
        free(t);
    } else {
        gp_advice_table(out, advice);
    }
    rc = GP_EXIT_OK;
done:
    json_decref(advice);
    if (have_b)
        gp_backend_close(&b);
    for (int k = 0; k < nres; k++)
        gp_result_free(&res[k]);
    for (int k = 0; k < nsc; k++)
        gp_scenario_free(&sc[k]);
    for (size_t k = 0; k < nloaded; k++)
        gp_scenario_free(&loaded[k]);
    free(loaded);
    return rc;
}
