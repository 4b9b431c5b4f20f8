/* gp_optim.c — see gp_optim.h. */
#include "gp_optim.h"

#include "../../kernels/cpu/gp_cpu_backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/arith/gp_accum.h"
#include "../sources/gp_generate.h"
#include "gp_attrib.h"

/* 0 (the coverage build): the attribution of a step element by element, its definition;
 * else the same arithmetic a block at a time (attribute_step) */
#ifndef GP_VECTOR_BLOCKS
#define GP_VECTOR_BLOCKS 1
#endif

static size_t fmt_bytes(gp_format f)
{
    return (size_t)gp_fmt_get(f).width / 8;
}

/* The low-bit state of o (gp_optim_lowbit.h) for c elements, chunks of ch: what it does
 * not run with refused (one line, err). */
static int lowbit_alloc(gp_optim_state *o, const gp_scenario *sc, size_t c, size_t ch, int with, gp_error *err)
{
    gp_lowbit f = (gp_lowbit)o->cfg.lowbit;
    const char *name = gp_lowbit_name(f);
    size_t B = gp_lowbit_block(f);
    for (size_t t = 0; t < sc->ntensors; t++)
        if (sc->tensors[t].size % B != 0)
            return gp_error_set(err, "optimizer.state %s: tensor %s has %zu elements, not a multiple of the state's "
                                "block (%zu)", name, sc->tensors[t].name, sc->tensors[t].size, B);
    if (with & GP_OPTIM_PER_ELEMENT)
        return gp_error_set(err, "optimizer.state %s: sampling is not supported with a low-bit state (a block's "
                            "scale depends on all of its elements)", name);
    if (o->cfg.variant != GP_ADAMW_PLAIN || o->cfg.rounding != GP_RNE)
        return gp_error_set(err, "optimizer.state %s: the library's AdamW has no master, Kahan, fused or "
                            "stochastic-rounding variant", name);
    o->lb = &o->lbx;
    return gp_optim_lowbit_alloc(o->lb, f, c, ch, (with & GP_OPTIM_WITH_CMP) != 0, (with & GP_OPTIM_WITH_MODELS) != 0,
                                 err);
}

int gp_optim_state_alloc(gp_optim_state *o, const gp_scenario *sc, size_t cap, int with, gp_error *err)
{
    memset(o, 0, sizeof *o);
    o->cap = cap;
    o->cfg = gp_optim_config(sc);
    size_t pb = fmt_bytes(o->cfg.param), sb = fmt_bytes(o->cfg.state), c = cap ? cap : 1;
    size_t ch = c < GP_OPTIM_CHUNK ? c : GP_OPTIM_CHUNK; /* scratch: one chunk */
    int master = o->cfg.variant == GP_ADAMW_MASTER, kahan = o->cfg.variant == GP_ADAMW_KAHAN;
    int oom = !(o->param = malloc(c * pb)) || !(o->m = malloc(c * sb)) || !(o->v = malloc(c * sb)) ||
              (kahan && !(o->comp = malloc(c * pb))) || (master && !(o->master = malloc(c * 4))) ||
              !(o->lost = malloc(c * sizeof(double))) || !(o->state_err = malloc(c * sizeof(double))) ||
              !(o->formula_err = malloc(c * sizeof(double))) ||
              gp_adamw_dd_state_alloc(&o->ref, c) != 0 || !(o->old_param = malloc(ch * pb)) ||
              !(o->old_m = malloc(ch * sb)) || !(o->old_v = malloc(ch * sb)) ||
              (kahan && !(o->old_comp = malloc(ch * pb))) || (master && !(o->old_master = malloc(ch * 4))) ||
              !(o->written = malloc(ch)) || !(o->mv_written = malloc(ch));
    if (!oom && (with & GP_OPTIM_WITH_CMP))
        oom = !(o->param2 = malloc(ch * pb)) || !(o->m2 = malloc(ch * sb)) || !(o->v2 = malloc(ch * sb)) ||
              (kahan && !(o->comp2 = malloc(ch * pb))) || (master && !(o->master2 = malloc(ch * 4)));
    if (!oom && (with & GP_OPTIM_WITH_MODELS))
        oom = !(o->param3 = malloc(ch * pb)) || !(o->m3 = malloc(ch * sb)) || !(o->v3 = malloc(ch * sb)) ||
              (kahan && !(o->comp3 = malloc(ch * pb))) || (master && !(o->master3 = malloc(ch * 4)));
    for (int k = 0; k < 4 && !oom && (with & GP_OPTIM_PER_ELEMENT); k++)
        oom = !(o->el_cnt[k] = calloc(c, sizeof(uint32_t)));
    if (oom)
        return gp_error_set(err, "out of memory (optimizer state of %zu elements)", cap);
    return o->cfg.lowbit ? lowbit_alloc(o, sc, c, ch, with, err) : 0;
}

void gp_optim_scratch_borrow(gp_optim_state *view, const gp_optim_state *o, const gp_optim_state *scratch)
{
    *view = *o;
    view->old_param = scratch->old_param;
    view->old_comp = scratch->old_comp;
    view->old_m = scratch->old_m;
    view->old_v = scratch->old_v;
    view->old_master = scratch->old_master;
    view->param2 = scratch->param2;
    view->comp2 = scratch->comp2;
    view->m2 = scratch->m2;
    view->v2 = scratch->v2;
    view->master2 = scratch->master2;
    view->written = scratch->written;
    view->mv_written = scratch->mv_written;
    if (o->lb) {
        gp_optim_lowbit_borrow(&view->lbx, o->lb, scratch->lb);
        view->lb = &view->lbx;
    }
}

void gp_optim_state_free(gp_optim_state *o)
{
    void *p[] = {o->param, o->comp, o->m, o->v, o->master, o->lost, o->state_err, o->formula_err, o->old_param, o->old_comp,
                 o->old_m, o->old_v, o->old_master, o->param2, o->comp2, o->m2, o->v2, o->master2,
                 o->param3, o->comp3, o->m3, o->v3, o->master3, o->written, o->mv_written};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
    for (int k = 0; k < 4; k++)
        free(o->el_cnt[k]);
    if (o->lb)
        gp_optim_lowbit_free(o->lb);
    gp_adamw_dd_state_free(&o->ref);
    memset(o, 0, sizeof *o);
}

void gp_optim_init(gp_optim_state *o, const gp_scenario *sc, size_t t, uint64_t i0, size_t n, size_t off,
                   const gp_optim_values *init)
{
    gp_format pf = o->cfg.param, sf = o->cfg.state;
    const gp_optim_values none = {NULL, NULL, NULL, NULL}, *in = init ? init : &none;
    const float *winit = in->param;
    float w[256];
    for (size_t j0 = 0; j0 < n; j0 += 256) {
        size_t nn = n - j0 < 256 ? n - j0 : 256;
        if (winit)
            memcpy(w, winit + j0, nn * sizeof *w);
        else
            gp_generate(&sc->tensors[t].weight, sc->seed, gp_stream_id(GP_STREAM_WEIGHT, t, 0, 0), i0 + j0, nn, w);
        for (size_t j = 0; j < nn; j++) {
            size_t e = off + j0 + j;
            uint32_t pbits = gp_fmt_rne_from_f32_bits(pf, gp_f32_bits(w[j]));
            gp_pack_set(pf, o->param, e, pbits);
            if (o->master)
                o->master[e] = gp_f32_bits(in->master ? in->master[j0 + j] : w[j]);
            if (o->comp)
                gp_pack_set(pf, o->comp, e, 0);
            /* a carried m, v: stored values of the state format, so the rounding is exact */
            uint32_t mb = in->m ? gp_fmt_rne_from_f32_bits(sf, gp_f32_bits(in->m[j0 + j])) : 0;
            uint32_t vb = in->v ? gp_fmt_rne_from_f32_bits(sf, gp_f32_bits(in->v[j0 + j])) : 0;
            gp_pack_set(sf, o->m, e, mb);
            gp_pack_set(sf, o->v, e, vb);
            o->lost[e] = 0;
            o->state_err[e] = 0;
            o->formula_err[e] = 0;
            for (int k = 0; k < 4 && o->el_cnt[0]; k++)
                o->el_cnt[k][e] = 0;
            double w0 = o->master ? (double)gp_f32_from_bits(o->master[e]) : gp_fmt_to_f64_fast(pf, pbits);
            gp_adamw_dd_state_set_mv(&o->ref, e, w0, gp_fmt_to_f64_fast(sf, mb), gp_fmt_to_f64_fast(sf, vb));
        }
    }
    if (o->lb) { /* m, v (fp32) quantized: the reference starts from the values they stand for */
        gp_optim_lowbit_init(o->lb, o->m, o->v, off, n);
        const float *m = o->m, *v = o->v;
        for (size_t e = off; e < off + n; e++)
            gp_adamw_dd_state_set_mv(&o->ref, e, gp_fmt_to_f64_fast(pf, gp_pack_get(pf, o->param, e)), m[e], v[e]);
    }
}

void gp_optim_twin(const gp_optim_state *o, size_t off, size_t n, const gp_optim_values *torch, long step, size_t t,
                   uint64_t i0, const uint64_t *elem, gp_optim_counts *cnt, gp_mismatch *first)
{
    const struct {
        const char *name;
        gp_format f;
        const void *mine;
        const float *theirs;
    } out[4] = {{"m", o->cfg.state, o->m, torch->m},
                {"v", o->cfg.state, o->v, torch->v},
                {"master", GP_FP32, o->master, o->master ? torch->master : NULL},
                {"param", o->cfg.param, o->param, torch->param}};
    for (size_t j = 0; j < n; j++)
        for (int q = 0; q < 4; q++) {
            if (!out[q].mine || !out[q].theirs)
                continue;
            gp_format f = out[q].f;
            uint32_t mine = gp_pack_get(f, out[q].mine, off + j);
            uint32_t theirs = gp_fmt_rne_from_f32_bits(f, gp_f32_bits(out[q].theirs[j]));
            cnt->twin_checked++;
            if (gp_fmt_agree(f, mine, theirs))
                continue;
            cnt->twin_mismatch++;
            gp_mismatch_note(first, "twin", out[q].name, step, -1, t, (int64_t)(elem ? elem[j] : i0 + j),
                             gp_fmt_get(f).width, mine, theirs);
        }
}

/* The weight the training carries: the master, else the param (Kahan: param - comp,
 * the compensated value). */
static double weight_at(const gp_optim_state *o, const void *param, const uint32_t *master, const void *comp,
                        size_t e)
{
    if (master)
        return (double)gp_f32_from_bits(master[e]);
    double w = gp_fmt_to_f64_fast(o->cfg.param, gp_pack_get(o->cfg.param, param, e));
    if (comp)
        w -= gp_fmt_to_f64_fast(o->cfg.param, gp_pack_get(o->cfg.param, comp, e));
    return w;
}

void gp_mismatch_note(gp_mismatch *first, const char *entry, const char *output, long step, int microbatch,
                      size_t tensor, int64_t element, int bits, uint32_t value, uint32_t compared)
{
    if (first->set)
        return;
    *first = (gp_mismatch){1, entry, output, step, microbatch, tensor, element, bits, value, compared};
}

static int fail(const gp_backend *b, int rc, gp_error *err)
{
    const char *fault = gp_backend_fault(b);
    if (fault) { /* its worker crashed, exited, hung, or a Python backend raised: -3 */
        gp_error_set(err, "%s", fault);
        return -3;
    }
    if (rc == 1)
        return gp_backend_refused(b, "adamw", err);
    gp_error_set(err, "backend %s: adamw failed (returned %d)", b->label, rc);
    return -1;
}

/* Do the n elements at a (offset ao) and b (offset 0) of format f differ in any bit
 * (NaN-ness for NaNs)? Marks each such element in diff[]; returns the first one's index,
 * or n when none differs. */
static size_t compare(gp_format f, const void *a, size_t ao, const void *b, size_t n, uint8_t *diff)
{
    size_t first = n;
    for (size_t j = 0; j < n; j++)
        if (!gp_fmt_agree(f, gp_pack_get(f, a, ao + j), gp_pack_get(f, b, j))) {
            diff[j] = 1;
            if (first == n)
                first = j;
        }
    return first;
}

/* Which elements did the backend write: diff[j] set where param (or its Kahan compensation
 * or master) differs from before the step, mv_changed[j] where m or v does. */
static void mark_writes(const gp_optim_state *o, gp_format pf, gp_format sf, size_t off, size_t n, uint8_t *diff,
                        uint8_t *mv_changed)
{
    compare(pf, o->param, off, o->old_param, n, diff);
    if (o->comp)
        compare(pf, o->comp, off, o->old_comp, n, diff);
    if (o->master)
        compare(GP_FP32, o->master, off, o->old_master, n, diff);
    compare(sf, o->m, off, o->old_m, n, mv_changed);
    compare(sf, o->v, off, o->old_v, n, mv_changed);
}

/* compare() between the backend's output `name` (a, offset ao) and the compared one's
 * (b), recording the first disagreement of the step. */
static void compare_outputs(const gp_optim_step *s, const char *name, gp_format f, const void *a, size_t ao,
                            const void *b, size_t n, size_t t, uint64_t i0, uint8_t *diff)
{
    size_t j = compare(f, a, ao, b, n, diff);
    if (j < n && s->first)
        gp_mismatch_note(s->first, "adamw", name, s->iter, -1, t, (int64_t)(i0 + j), gp_fmt_get(f).width,
                         gp_pack_get(f, a, ao + j), gp_pack_get(f, b, j));
}

static void copy_elems(gp_format f, void *dst, size_t doff, const void *src, size_t soff, size_t n)
{
    size_t w = fmt_bytes(f);
    memcpy((char *)dst + doff * w, (const char *)src + soff * w, n * w);
}

/* gradprec's AdamW models, by bit index: the scenario's variant in each operation order,
 * the one-store variant in each, torch's fused CPU kernel. */
static const struct {
    const char *name;
    int variant; /* -1: the scenario's */
    int eval;
    int lowbit;  /* a low-bit state's model (gp_lowbit), its sqrt as `eval` takes it; 0: torch's AdamW */
} g_models[] = {{"torch_cuda", -1, GP_ADAMW_TORCH_CUDA, 0},
                {"torch_cpu", -1, GP_ADAMW_TORCH_CPU, 0},
                {"unfused", -1, GP_ADAMW_UNFUSED, 0},
                {"one_store/torch_cuda", GP_ADAMW_ONE_STORE, GP_ADAMW_TORCH_CUDA, 0},
                {"one_store/torch_cpu", GP_ADAMW_ONE_STORE, GP_ADAMW_TORCH_CPU, 0},
                {"one_store/unfused", GP_ADAMW_ONE_STORE, GP_ADAMW_UNFUSED, 0},
                {"torch_fused_cpu", GP_ADAMW_TORCH_FUSED_CPU, GP_ADAMW_TORCH_CPU, 0},
                {"torch_cpu_zen4", -1, GP_ADAMW_TORCH_CPU_ZEN4, 0},
                {"torch_cuda_foreach", -1, GP_ADAMW_TORCH_CUDA_FOREACH, 0},
                {"torch_cpu_intel_avx512", -1, GP_ADAMW_TORCH_CPU_INTEL_AVX512, 0},
                {"torch_cpu_host", -1, GP_ADAMW_TORCH_CPU_HOST, 0},
                /* the libraries' steps of kernels/cpu/gp_lowbit.h: IEEE sqrt, the host's MKL sqrt */
                {"bnb8_blockwise/torch_cpu", GP_ADAMW_ONE_STORE, GP_ADAMW_TORCH_CPU, GP_LOWBIT_BNB8},
                {"bnb8_blockwise/torch_cpu_host", GP_ADAMW_ONE_STORE, GP_ADAMW_TORCH_CPU_HOST, GP_LOWBIT_BNB8},
                {"torchao_8bit", GP_ADAMW_ONE_STORE, GP_ADAMW_TORCH_CPU, GP_LOWBIT_TORCHAO8},
                {"torchao_4bit", GP_ADAMW_ONE_STORE, GP_ADAMW_TORCH_CPU, GP_LOWBIT_TORCHAO4},
                {"torchao_fp8", GP_ADAMW_ONE_STORE, GP_ADAMW_TORCH_CPU, GP_LOWBIT_TORCHAO_FP8}};

int gp_optim_model_count(const gp_adamw_config *cfg)
{
    (void)cfg;
    return (int)(sizeof g_models / sizeof g_models[0]);
}

/* Does model k apply to configuration cfg? */
static int model_applies(const gp_adamw_config *cfg, int k)
{
    if (cfg->lowbit || g_models[k].lowbit) /* a low-bit state: its library's models only */
        return cfg->lowbit == g_models[k].lowbit &&
               (g_models[k].eval != GP_ADAMW_TORCH_CPU_HOST || gp_torch_sqrt_host_kernel() != GP_MKL_SQRT_NONE);
    if (k < 3)
        return cfg->variant != GP_ADAMW_TORCH_FUSED_CPU;
    if (k == 8) /* torch_cuda_foreach: as torch_cuda */
        return cfg->variant != GP_ADAMW_TORCH_FUSED_CPU;
    if (k == 7 || k == 9 || k == 10) /* differ from torch_cpu only in the sqrt of an fp32 state */
        return cfg->variant != GP_ADAMW_TORCH_FUSED_CPU && cfg->state == GP_FP32 && (k != 10 || gp_torch_sqrt_host_kernel() != GP_MKL_SQRT_NONE);
    if (k < 6)
        return cfg->variant == GP_ADAMW_PLAIN && cfg->param != GP_FP32;
    return (cfg->variant == GP_ADAMW_PLAIN || cfg->variant == GP_ADAMW_TORCH_FUSED_CPU) && cfg->state == cfg->param &&
           cfg->rounding == GP_RNE;
}

const char *gp_optim_model_name(const gp_adamw_config *cfg, int k)
{
    return k >= 0 && k < gp_optim_model_count(cfg) && model_applies(cfg, k) ? g_models[k].name : NULL;
}

/* Does any element of output f differ (NaN-ness for NaNs) between a (offset ao) and b? */
static int differs(gp_format f, const void *a, size_t ao, const void *b, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (!gp_fmt_agree(f, gp_pack_get(f, a, ao + j), gp_pack_get(f, b, j)))
            return 1;
    return 0;
}

/* a with its arrays pointed at the scratch arrays (param, m, v, master, comp), which get the
 * chunk's state from before the step (old_*, n elements): another AdamW can then run on the
 * inputs the subject had. */
static gp_plugin_adamw_args on_old_state(const gp_optim_state *o, const gp_plugin_adamw_args *a, size_t n,
                                         void *param, void *m, void *v, uint32_t *master, void *comp)
{
    gp_format pf = o->cfg.param, sf = o->cfg.state;
    copy_elems(pf, param, 0, o->old_param, 0, n);
    copy_elems(sf, m, 0, o->old_m, 0, n);
    copy_elems(sf, v, 0, o->old_v, 0, n);
    if (o->comp)
        copy_elems(pf, comp, 0, o->old_comp, 0, n);
    if (o->master)
        memcpy(master, o->old_master, n * 4);
    gp_plugin_adamw_args b = *a;
    b.param = param;
    b.m = m;
    b.v = v;
    b.master = master;
    b.comp = comp;
    return b;
}

/* Run each AdamW model of gp_optim_model_name on the old state of the chunk (the CPU
 * emulation's table, args a with the model's variant and order, scratch arrays) and
 * compare every output with what the subject wrote; a model that differs anywhere gets
 * its bit in cnt->models_differ. */
static int check_models(gp_optim_state *o, const gp_plugin_adamw_args *a, size_t off, size_t n,
                        gp_optim_counts *cnt)
{
    gp_format pf = o->cfg.param, sf = o->cfg.state;
    for (int k = 0; k < gp_optim_model_count(&o->cfg); k++) {
        if (!model_applies(&o->cfg, k))
            continue;
        gp_plugin_adamw_args a3 = on_old_state(o, a, n, o->param3, o->m3, o->v3, o->master3, o->comp3);
        a3.variant = g_models[k].variant >= 0 ? g_models[k].variant : a->variant;
        a3.evaluation = g_models[k].eval;
        if (o->lb)
            gp_optim_lowbit_on_old(o->lb, &a3, n, GP_LOWBIT_MODEL);
        int rc = gp_cpu_backend()->adamw(&a3);
        if (rc == 1) { /* a configuration this model does not cover: it did not match */
            cnt->models_checked |= 1u << k;
            cnt->models_differ |= 1u << k;
            continue;
        }
        if (rc != 0)
            return -1;
        int d = o->lb ? gp_optim_lowbit_differs(o->lb, off, n, GP_LOWBIT_MODEL)
                      : differs(sf, o->m, off, o->m3, n) || differs(sf, o->v, off, o->v3, n);
        d = d || differs(pf, o->param, off, o->param3, n) ||
                (o->master && differs(GP_FP32, o->master, off, o->master3, n)) ||
                (o->comp && differs(pf, o->comp, off, o->comp3, n));
        cnt->models_checked |= 1u << k;
        cnt->models_differ |= (uint32_t)d << k;
    }
    return 0;
}

/* The spacing of format f's values at |x| (the subnormal spacing below f's normal range). */
static double fmt_ulp(gp_format f, double x)
{
    gp_fmt_info fi = gp_fmt_get(f);
    int ex;
    (void)frexp(fabs(x), &ex); /* |x| in [2^(ex-1), 2^ex) */
    return ldexp(1.0, (ex - 1 < fi.emin ? fi.emin : ex - 1) - (fi.p - 1));
}

/* How far the weight change dw lies beyond what rounding explains around the update
 * -step*m/D, D = sqrt(v)/bc2s + eps, with m known within +-em, D within relative rel and
 * absolute ab, the quotient and the scalars within relative rel_u, and the weight's own
 * roundings within tw (gp_optim.h, "update formula";
 * docs/model.md derives it): 0 when within (or when D's lower bound reaches 0: then any
 * change is explained), else the distance beyond, signed as dw - u. */
static double beyond(double dw, double tw, double step, double m, double em, double v, double bc2s, double eps,
                     double rel, double ab, double rel_u)
{
    double D = sqrt(v) / bc2s + eps, lo = D * (1 - rel) - ab;
    if (!(lo > 0))
        return 0;
    double am = fabs(m), d = dw + step * m / D;
    double r = step * (am * (1 / lo - 1 / D) + (em + rel_u * (am + em)) / lo) + tw;
    return fabs(d) <= r ? 0 : d > 0 ? d - r : d + r;
}

/* Is x1 one rounding (any mode; two for v: v*beta2 is stored first) to fp32, bf16 or
 * fp16 of a value within ev of x: x1 representable in that format and |x1 - x| <=
 * 2 ulp(|x| + ev) + ev there? */
static int rounding_of(double x1, double x, double ev)
{
    static const gp_format fmts[] = {GP_FP32, GP_BF16, GP_FP16};
    if (!isfinite(x1) || !isfinite(x)) /* left to the non-finite mechanism */
        return 1;
    double y = fabs(x) + ev;
    if (fabs(x1 - x) <= 0x1p-23 * y + ev) /* within fp32's bound: 2 ulp_32(y) >= 2^-23 y */
        return 1;
    for (int i = 0; i < 3; i++)
        if ((i == 0 || gp_fmt_to_f64_fast(fmts[i], gp_fmt_from_f64(fmts[i], x1, GP_RNE, 0, 0, (unsigned *)0)) == x1) &&
            fabs(x1 - x) <= 2 * fmt_ulp(fmts[i], y) + ev)
            return 1;
    return 0;
}

/* Are the stored m1, v1 AdamW's moments b1*m0 + (1-b1)*g and b2*v0 + (1-b2)*g^2 after
 * one rounding to a state format (gp_optim.h, "update formula")? The fp32 evaluation
 * errs by at most 2^-21 (|m0| + |g|) and 2^-21 v_x, a gradient cast to the param format
 * (torch's fused kernel) by (1-b1) u_p |g| and 2 (1-b2) u_p g^2. */
static int state_near(double m1, double v1, double m0, double v0, double g, double b1, double b2, double u_p)
{
    double ag = fabs(g), g2 = (1.0 - b2) * g * g, vx = b2 * v0 + g2;
    return rounding_of(m1, b1 * m0 + (1.0 - b1) * g, 0x1p-21 * (fabs(m0) + ag) + (1.0 - b1) * u_p * ag) &&
           rounding_of(v1, vx, 0x1p-21 * vx + 2 * u_p * g2);
}

/* One step's constants of the update-formula check (gp_optim.h): the state format's unit
 * roundoff and half its smallest subnormal, the param format's unit roundoff (0 for
 * fp32), the weight's format, the scalars, the debiased betas of the AdamW that keeps
 * m/bc1 and v/bc2 (torch-optimi). */
typedef struct {
    gp_format wf;
    double u_s, sig_s, u_p, b1, b2, b1h, b2h, eps, decay, lr, step, bc2s, rel_u;
} formula_bounds;

static formula_bounds formula_bounds_make(const gp_optim_state *o, const gp_scenario *sc, const gp_optim_step *s,
                                          const gp_adamw_scalars *k)
{
    formula_bounds f;
    gp_fmt_info si = gp_fmt_get(o->cfg.state), pi = gp_fmt_get(o->cfg.param);
    f.wf = o->master ? GP_FP32 : o->cfg.param;
    f.u_s = ldexp(1.0, -si.p);
    f.sig_s = ldexp(1.0, si.emin - si.p);
    f.u_p = o->cfg.param == GP_FP32 ? 0 : ldexp(1.0, -pi.p);
    f.b1 = sc->optimizer.beta1;
    f.b2 = sc->optimizer.beta2;
    double b1t = pow(f.b1, (double)s->t), b2t = pow(f.b2, (double)s->t);
    f.b1h = (b1t - f.b1) / (b1t - 1);
    f.b2h = (b2t - f.b2) / (b2t - 1);
    /* the fp32 product and quotient (2^-20), and bias corrections an implementation may
     * compute in fp32 (torchao; a fused kernel's step tensor): beta rounded to fp32 and
     * powf within (t + 2) 2^-24 of beta^t, relative to bc = 1 - beta^t after the
     * cancellation; the update moves with bc1 and sqrt(bc2) */
    f.rel_u = 0x1p-20 + ((double)s->t + 2) * 0x1p-24 * (b1t / (1 - b1t) + b2t / (2 * (1 - b2t)));
    f.eps = sc->optimizer.eps;
    f.decay = 1.0 - s->lr * s->weight_decay;
    f.lr = s->lr;
    f.step = k->step_size;
    f.bc2s = k->bc2_sqrt;
    return f;
}

/* Does a rounding of an AdamW explain element j's step (gp_optim.h, "update formula"), in
 * either state convention: m, v (torch) or m/bc1, v/bc2 (debiased)? The moments within one
 * rounding, the weight (when written) within the bounds around the update of the stored or
 * of the exact state. Adds the signed distance beyond them to o->formula_err[e]. */
static int formula_explained(const formula_bounds *fb, gp_optim_state *o, size_t e, int written, double g,
                             double m0, double v0, double m1, double v1, double mx, double vx, double w0)
{
    double w1 = weight_at(o, o->param, o->master, o->comp, e);
    int judged = written && isfinite(w0) && isfinite(w1) && isfinite(mx) && isfinite(vx) && isfinite(m1) &&
                 isfinite(v1);
    double dw = w1 - w0 * fb->decay, tw = judged ? 2 * fmt_ulp(fb->wf, fmax(fabs(w0), fabs(w1))) : 0, fa = 0;
    int adam_ok = o->lb ? gp_optim_lowbit_state_near(o->lb, e, m1, v1, mx, vx, 0x1p-21 * (fabs(m0) + fabs(g)),
                                                     0x1p-21 * vx)
                        : state_near(m1, v1, m0, v0, g, fb->b1, fb->b2, fb->u_p);
    if (judged) {
        double ag = fabs(g), em = 0x1p-21 * (fabs(m0) + ag) + (1.0 - fb->b1) * fb->u_p * ag;
        fa = beyond(dw, tw, fb->step, m1, 0, v1, fb->bc2s, fb->eps, 4 * fb->u_s + 0x1p-20, 4 * fb->sig_s / fb->bc2s,
                    fb->rel_u);
        if (fa != 0) {
            double fx = beyond(dw, tw, fb->step, mx, em, vx, fb->bc2s, fb->eps, 0x1p-20 + fb->u_p, 0x1p-148 / fb->bc2s,
                               fb->rel_u);
            fa = fabs(fx) < fabs(fa) ? fx : fa;
        }
    }
    if (adam_ok && fa == 0)
        return 1;
    int deb_ok = !o->lb && state_near(m1, v1, m0, v0, g, fb->b1h, fb->b2h, fb->u_p);
    double fd = judged ? beyond(dw, tw, fb->lr, m1, 0, v1, 1.0, fb->eps, 4 * fb->u_s + 0x1p-20, 4 * fb->sig_s, 0x1p-20)
                       : 0;
    if (deb_ok && fd == 0)
        return 1;
    o->formula_err[e] += adam_ok || !deb_ok ? fa : fd;
    return 0;
}

void gp_formula_first_merge(gp_formula_first *a, const gp_formula_first *b)
{
    if (b->set && (!a->set || b->step < a->step || (b->step == a->step && b->tensor < a->tensor) ||
                   (b->step == a->step && b->tensor == a->tensor && b->element < a->element)))
        *a = *b;
}

/* Element `element` of tensor t failed formula_explained: record which output departs
 * first (gp_formula_first) unless an earlier one is recorded. */
static void formula_first(gp_optim_counts *cnt, const formula_bounds *fb, const gp_optim_state *o, long step,
                          size_t t, uint64_t element, size_t e, double g, double m0, double m1, double v1, double mx,
                          double vx, double w0)
{
    double ag = fabs(g), g2 = (1.0 - fb->b2) * g * g;
    gp_formula_first f = {1, "param", step, t, element, weight_at(o, o->param, o->master, o->comp, e),
                          w0 * fb->decay - fb->step * mx / (sqrt(vx) / fb->bc2s + fb->eps)};
    if (!rounding_of(m1, mx, 0x1p-21 * (fabs(m0) + ag) + (1.0 - fb->b1) * fb->u_p * ag)) {
        f.output = "m";
        f.value = m1;
        f.adamw = mx;
    } else if (!rounding_of(v1, vx, 0x1p-21 * vx + 2 * fb->u_p * g2)) {
        f.output = "v";
        f.value = v1;
        f.adamw = vx;
    }
    gp_formula_first_merge(&cnt->first_formula, &f);
}

#if GP_VECTOR_BLOCKS
/* ---- the attribution of one step, a block at a time ---- */

enum { ATTR_BLK = 256 };

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) /* ThreadSanitizer cannot run an
                                                             ifunc resolver at load time */
#define GP_OPTIM_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GP_OPTIM_CLONES
#endif /* elements per block: the temporaries stay in L1 */

/* diff[j] |= elements i + j of a and j of b (format f) differ (NaN-ness for NaNs), for j < nb:
 * compare()'s marks. */
static void written_block(gp_format f, const void *a, size_t i, const void *b, size_t j0, size_t nb, uint8_t *diff)
{
    if (f == GP_FP32) {
        const uint32_t *p = (const uint32_t *)a + i, *q = (const uint32_t *)b + j0;
        for (size_t j = 0; j < nb; j++)
            diff[j] |= (uint8_t)(p[j] != q[j] &&
                                 !((p[j] & 0x7fffffffu) > 0x7f800000u && (q[j] & 0x7fffffffu) > 0x7f800000u));
    } else if (f == GP_BF16) {
        const uint16_t *p = (const uint16_t *)a + i, *q = (const uint16_t *)b + j0;
        for (size_t j = 0; j < nb; j++)
            diff[j] |= (uint8_t)(p[j] != q[j] && !((p[j] & 0x7fffu) > 0x7f80u && (q[j] & 0x7fffu) > 0x7f80u));
    } else {
        for (size_t j = 0; j < nb; j++)
            diff[j] |= (uint8_t)!gp_fmt_agree(f, gp_pack_get(f, a, i + j), gp_pack_get(f, b, j0 + j));
    }
}

/* isfinite(x) and x != 0 read from the bits (the same truth values for every binary64, NaNs
 * included: a NaN is not finite and != 0), integer tests that let attribute_block's loop
 * vectorise (the compiler does not if-convert floating-point comparisons, which may trap). */
static inline uint64_t fin(double x)
{
    return (uint64_t)((gp_f64_bits(x) >> 52 & 0x7ff) != 0x7ff);
}
static inline uint64_t nz(double x)
{
    return (uint64_t)((gp_f64_bits(x) << 1) != 0);
}

/* c ? a : b (c 0 or 1) by a mask on the bits: both operands are computed where the select is,
 * which keeps the compiler from moving their arithmetic into a branch it then cannot
 * vectorise (arithmetic that may trap is not speculated). */
static inline double sel(uint64_t c, double a, double b)
{
    uint64_t mk = (uint64_t)0 - c;
    return gp_f64_from_bits((gp_f64_bits(a) & mk) | (gp_f64_bits(b) & ~mk));
}

/* The constants of a step's attribution (attribute_step). */
typedef struct {
    double b1, b2, c1, c2, eps, decay, nstep, bc2s;
} attr_consts;

/* The arithmetic of attribute_step on one block of nb elements (the widened g, m0, v0, m1,
 * v1 and weight w0; diff: written marks): the element loop, in its own function so that it is
 * cloned for AVX-512 / AVX2 (chosen at load time) and vectorises. The same IEEE binary64
 * operations in the same order on each element (nothing contracted: -ffp-contract=off; sqrt
 * the correctly rounded square root either way, -fno-math-errno; the tests on the bits, fin
 * and nz), the per-element sums lost[]
 * and state_err[] updated once each, the counts integers: so every clone gives the same bits.
 * acc[0..3]: += nonzero, stale, state_nonzero, state_underflow; EL[q][j]: element j's counts. */
GP_OPTIM_CLONES static void attribute_block(size_t nb, const double *restrict G, const double *restrict M0,
                                            const double *restrict V0, const double *restrict M1,
                                            const double *restrict V1, const double *restrict W0,
                                            const uint8_t *restrict diff, double *restrict lost,
                                            double *restrict state_err, const attr_consts *K, uint64_t acc[4],
                                            uint8_t (*restrict EL)[ATTR_BLK])
{
    const double b1 = K->b1, b2 = K->b2, c1 = K->c1, c2 = K->c2, eps = K->eps, decay = K->decay;
    const double nstep = K->nstep, bc2s = K->bc2s;
    const uint64_t decays = decay != 1.0;
    uint64_t nonzero_n = 0, stale_n = 0, state_nonzero = 0, state_underflow = 0;
    for (size_t j = 0; j < nb; j++) {
        double g = G[j], m0 = M0[j], v0 = V0[j], m1 = M1[j], v1 = V1[j], w0 = W0[j];
        double mx = b1 * m0 + c1 * g, vx = b2 * v0 + c2 * g * g;
        double ux = nstep * mx / (sqrt(vx) / bc2s + eps);
        double us = nstep * m1 / (sqrt(v1) / bc2s + eps);
        /* a non-zero exact update of a finite weight (lr 0 moves nothing) */
        uint64_t nonzero = fin(w0) & (nz(ux) | (decays & nz(w0)));
        uint64_t stale = nonzero & (uint64_t)(diff[j] == 0);
        nonzero_n += nonzero;
        stale_n += stale;
        /* both arms computed, then selected (sel; the values kept are the conditional ones) */
        double moved = (w0 * decay + us) - w0, l0 = lost[j], l1 = l0 + moved;
        lost[j] = sel(stale, l1, l0);
        /* a finite exact update made non-finite by m, v: an infinite loss */
        double d = us - ux, se = sel(fin(us), d, INFINITY), e0 = state_err[j], e1 = e0 + se;
        state_err[j] = sel(fin(ux), e1, e0);
        uint64_t snz = nz(mx) + nz(vx), sund = (nz(mx) & (nz(m1) ^ 1)) + (nz(vx) & (nz(v1) ^ 1));
        state_nonzero += snz;
        state_underflow += sund;
        EL[GP_OPTIM_EL_NONZERO][j] = (uint8_t)nonzero;
        EL[GP_OPTIM_EL_STALE][j] = (uint8_t)stale;
        EL[GP_OPTIM_EL_STATE_NONZERO][j] = (uint8_t)snz;
        EL[GP_OPTIM_EL_STATE_UNDERFLOW][j] = (uint8_t)sund;
    }
    acc[0] += nonzero_n;
    acc[1] += stale_n;
    acc[2] += state_nonzero;
    acc[3] += state_underflow;
}

/* The attribution of a step that ran (DESIGN.md §1, gp_optim.h): for each element of the
 * chunk, the exact update ux from the old state and the gradient, the update us the stored
 * m', v' give; a non-zero update that left the weight state unchanged is stale and its
 * loss goes to lost[]; us - ux to state_err[]; m', v' that underflowed. Reads the old state
 * kept in o->old_*, writes o->written. */
static void attribute_step(const gp_scenario *sc, const gp_optim_step *s, gp_optim_state *o, size_t t, uint64_t i0,
                           size_t off, size_t n, gp_format gf, const void *grad, gp_optim_counts *cnt)
{
    gp_format pf = o->cfg.param, sf = o->cfg.state;
    gp_adamw_scalars k = gp_adamw_scalars_make(s->lr, sc->optimizer.beta1, sc->optimizer.beta2, sc->optimizer.eps,
                                               s->weight_decay, s->t);
    const double b1 = sc->optimizer.beta1, b2 = sc->optimizer.beta2;
    const double c1 = 1.0 - b1, c2 = 1.0 - b2;
    const attr_consts K = {b1, b2, c1, c2, sc->optimizer.eps, 1.0 - s->lr * s->weight_decay,
                           -k.step_size, k.bc2_sqrt};
    formula_bounds fb = formula_bounds_make(o, sc, s, &k);
    uint64_t formula = 0;
    double G[ATTR_BLK], M0[ATTR_BLK], V0[ATTR_BLK], M1[ATTR_BLK], V1[ATTR_BLK], W0[ATTR_BLK], C[ATTR_BLK];
    uint64_t acc[4] = {0, 0, 0, 0}; /* nonzero, stale, state_nonzero, state_underflow */
    uint8_t EL[4][ATTR_BLK]; /* the block's per-element counts (o->el_cnt: runs with sampling) */
    for (size_t j0 = 0; j0 < n; j0 += ATTR_BLK) {
        size_t nb = n - j0 < ATTR_BLK ? n - j0 : ATTR_BLK;
        uint8_t *diff = o->written + j0;
        double *lost = o->lost + off + j0, *state_err = o->state_err + off + j0;
        /* what did the backend write? the weight state: param, comp, master */
        memset(diff, 0, nb);
        written_block(pf, o->param, off + j0, o->old_param, j0, nb, diff);
        if (o->comp)
            written_block(pf, o->comp, off + j0, o->old_comp, j0, nb, diff);
        if (o->master)
            written_block(GP_FP32, o->master, off + j0, o->old_master, j0, nb, diff);
        gp_widen_block(gf, grad, j0, nb, G);
        gp_widen_block(sf, o->old_m, j0, nb, M0);
        gp_widen_block(sf, o->old_v, j0, nb, V0);
        gp_widen_block(sf, o->m, off + j0, nb, M1);
        gp_widen_block(sf, o->v, off + j0, nb, V1);
        /* the weight the training carries (weight_at): the master, else param (- comp) */
        if (o->master) {
            gp_widen_block(GP_FP32, o->old_master, j0, nb, W0);
        } else {
            gp_widen_block(pf, o->old_param, j0, nb, W0);
            if (o->comp) {
                gp_widen_block(pf, o->old_comp, j0, nb, C);
                for (size_t j = 0; j < nb; j++)
                    W0[j] -= C[j];
            }
        }
        attribute_block(nb, G, M0, V0, M1, V1, W0, diff, lost, state_err, &K, acc, EL);
        for (int q = 0; q < 4 && o->el_cnt[0]; q++)
            for (size_t j = 0; j < nb; j++)
                o->el_cnt[q][off + j0 + j] += EL[q][j];
        if (o->param3) /* update formula (a subject's step only: gradprec's own models are AdamW) */
            for (size_t j = 0; j < nb; j++) {
                double g = G[j], m0 = M0[j], v0 = V0[j];
                double mx = b1 * m0 + c1 * g, vx = b2 * v0 + c2 * g * g;
                if (!formula_explained(&fb, o, off + j0 + j, diff[j], g, m0, v0, M1[j], V1[j], mx, vx, W0[j])) {
                    formula++;
                    formula_first(cnt, &fb, o, s->iter, t, i0 + j0 + j, off + j0 + j, g, m0, M1[j], V1[j], mx, vx,
                                  W0[j]);
                }
            }
    }
    cnt->formula += formula;
    cnt->nonzero += acc[0];
    cnt->stale += acc[1];
    cnt->state_nonzero += acc[2];
    cnt->state_underflow += acc[3];
}
#endif

/* Runs the compared backend `cmp` on the step `a` just ran, starting from the old state (o->old_*), into
   the second buffers (o->param2, ...), and compares its outputs with the subject's element by element:
   diff[j] (cleared first) is 1 where any output of element j differs; adds the count to cnt->mismatches and
   records the first mismatches in s. Returns 0, or what fail() returns (err set) when the compared backend fails. */
static int compare_plugin(const gp_optim_step *s, const gp_backend *cmp, gp_optim_state *o,
                          const gp_plugin_adamw_args *a, gp_format pf, gp_format sf, size_t t, uint64_t i0, size_t n,
                          size_t off, uint8_t *diff, gp_optim_counts *cnt, gp_error *err)
{
    memset(diff, 0, n);
    gp_plugin_adamw_args a2 = on_old_state(o, a, n, o->param2, o->m2, o->v2, o->master2, o->comp2);
    if (o->lb)
        gp_optim_lowbit_on_old(o->lb, &a2, n, GP_LOWBIT_CMP);
    int rc = cmp->ops->adamw(&a2);
    if (rc != 0)
        return fail(cmp, rc, err);
    if (o->lb) /* m, v compared as the values its codes and scales stand for */
        gp_optim_lowbit_slot_values(o->lb, GP_LOWBIT_CMP, (float *)o->m2, (float *)o->v2, n);
    /* in the order the step computes them: a wrong m also moves the param */
    compare_outputs(s, "m", sf, o->m, off, o->m2, n, t, i0, diff);
    compare_outputs(s, "v", sf, o->v, off, o->v2, n, t, i0, diff);
    if (o->master)
        compare_outputs(s, "master", GP_FP32, o->master, off, o->master2, n, t, i0, diff);
    compare_outputs(s, "param", pf, o->param, off, o->param2, n, t, i0, diff);
    if (o->comp)
        compare_outputs(s, "comp", pf, o->comp, off, o->comp2, n, t, i0, diff);
    for (size_t j = 0; j < n; j++)
        cnt->mismatches += diff[j];
    return 0;
}

int gp_optim_chunk(const gp_scenario *sc, const gp_optim_step *s, const gp_backend *b, const gp_backend *cmp,
                   gp_optim_state *o, size_t t, uint64_t i0, size_t n, size_t off, gp_format gf,
                   const void *grad, const double *gfull, gp_optim_counts *cnt, gp_error *err)
{
    gp_format pf = o->cfg.param, sf = o->cfg.state;
    /* keep the old state: the attribution reads it, and the compared backend starts from it */
    copy_elems(pf, o->old_param, 0, o->param, off, n);
    copy_elems(sf, o->old_m, 0, o->m, off, n);
    copy_elems(sf, o->old_v, 0, o->v, off, n);
    if (o->comp)
        copy_elems(pf, o->old_comp, 0, o->comp, off, n);
    if (o->master)
        memcpy(o->old_master, o->master + off, n * 4);

    gp_plugin_adamw_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.param_format = (int32_t)pf;
    a.state_format = (int32_t)sf;
    a.grad_format = (int32_t)gf;
    a.variant = (int32_t)o->cfg.variant;
    a.rounding = o->cfg.rounding == GP_STOCHASTIC ? GP_PLUGIN_STOCHASTIC : GP_PLUGIN_RNE;
    a.lr = s->lr;
    a.beta1 = sc->optimizer.beta1;
    a.beta2 = sc->optimizer.beta2;
    a.eps = sc->optimizer.eps;
    a.weight_decay = s->weight_decay;
    a.step = s->t;
    a.inv_scale = 1.0f;
    a.found_inf = &s->found_inf;
    a.seed = sc->seed;
    a.stream = gp_stream_id(GP_STREAM_PARAM_SR, t, (uint64_t)s->iter, 0);
    a.first_index = i0;
    a.n = n;
    a.grad = grad;
    size_t pb = fmt_bytes(pf), sb = fmt_bytes(sf);
    a.param = (char *)o->param + off * pb;
    a.m = (char *)o->m + off * sb;
    a.v = (char *)o->v + off * sb;
    a.master = o->master ? o->master + off : NULL;
    a.comp = o->comp ? (char *)o->comp + off * pb : NULL;
    a.evaluation = (int32_t)o->cfg.eval;
    if (o->lb) /* the library's state: codes and scales */
        gp_optim_lowbit_args(o->lb, &a, off, n);
    int rc = b->ops->adamw(&a);
    if (rc != 0)
        return fail(b, rc, err);
    if (o->lb) /* m, v: what the written state stands for */
        gp_optim_lowbit_after(o->lb, (float *)o->m, (float *)o->v, off, n);
    if (o->param3 && check_models(o, &a, off, n, cnt) != 0)
        return gp_error_set(err, "adamw: gradprec's CPU model failed");

#if GP_VECTOR_BLOCKS
    uint8_t *diff = o->written, *mv_changed = o->mv_written;
    if (cmp && (rc = compare_plugin(s, cmp, o, &a, pf, sf, t, i0, n, off, diff, cnt, err)) != 0)
        return rc;

    if (s->found_inf) { /* what did the backend write? It should have written nothing */
        memset(diff, 0, n);
        memset(mv_changed, 0, n);
        mark_writes(o, pf, sf, off, n, diff, mv_changed);
        for (size_t j = 0; j < n; j++)
            cnt->skip_writes += diff[j] | mv_changed[j];
    } else {
        attribute_step(sc, s, o, t, i0, off, n, gf, grad, cnt);
    }

#else /* the coverage build: the per-element definition */
    uint8_t *diff = o->written, *mv_changed = o->mv_written;
    memset(diff, 0, n);
    memset(mv_changed, 0, n);
    if (cmp) {
        if ((rc = compare_plugin(s, cmp, o, &a, pf, sf, t, i0, n, off, diff, cnt, err)) != 0)
            return rc;
        memset(diff, 0, n);
    }

    /* what did the backend write? */
    mark_writes(o, pf, sf, off, n, diff, mv_changed);
    if (s->found_inf) {
        for (size_t j = 0; j < n; j++)
            cnt->skip_writes += diff[j] | mv_changed[j];
    } else {
        gp_adamw_scalars k = gp_adamw_scalars_make(s->lr, sc->optimizer.beta1, sc->optimizer.beta2, sc->optimizer.eps,
                                                   s->weight_decay, s->t);
        double b1 = sc->optimizer.beta1, b2 = sc->optimizer.beta2, eps = sc->optimizer.eps;
        double decay = 1.0 - s->lr * s->weight_decay;
        formula_bounds fb = formula_bounds_make(o, sc, s, &k);
        for (size_t j = 0; j < n; j++) {
            size_t e = off + j;
            double g = gp_fmt_to_f64_fast(gf, gp_pack_get(gf, grad, j));
            double m0 = gp_fmt_to_f64_fast(sf, gp_pack_get(sf, o->old_m, j));
            double v0 = gp_fmt_to_f64_fast(sf, gp_pack_get(sf, o->old_v, j));
            double mx = b1 * m0 + (1.0 - b1) * g, vx = b2 * v0 + (1.0 - b2) * g * g;
            double m1 = gp_fmt_to_f64_fast(sf, gp_pack_get(sf, o->m, e));
            double v1 = gp_fmt_to_f64_fast(sf, gp_pack_get(sf, o->v, e));
            double ux = -k.step_size * mx / (sqrt(vx) / k.bc2_sqrt + eps);
            double us = -k.step_size * m1 / (sqrt(v1) / k.bc2_sqrt + eps);
            double w0 = weight_at(o, o->old_param, o->old_master, o->old_comp, j);
            /* a non-zero exact update of a finite weight (lr 0 moves nothing) */
            int nonzero = isfinite(w0) && (ux != 0 || (decay != 1.0 && w0 != 0));
            cnt->nonzero += (uint64_t)nonzero;
            if (o->el_cnt[0]) { /* runs with sampling: the element's own counts */
                o->el_cnt[GP_OPTIM_EL_NONZERO][e] += (uint32_t)nonzero;
                o->el_cnt[GP_OPTIM_EL_STALE][e] += (uint32_t)(nonzero && !diff[j]);
                o->el_cnt[GP_OPTIM_EL_STATE_NONZERO][e] += (uint32_t)(mx != 0) + (uint32_t)(vx != 0);
                o->el_cnt[GP_OPTIM_EL_STATE_UNDERFLOW][e] +=
                    (uint32_t)(mx != 0 && m1 == 0) + (uint32_t)(vx != 0 && v1 == 0);
            }
            if (nonzero && !diff[j]) {
                cnt->stale++;
                o->lost[e] += (w0 * decay + us) - w0;
            }
            if (isfinite(ux)) /* a finite exact update made non-finite by m, v: an infinite loss */
                o->state_err[e] += isfinite(us) ? us - ux : INFINITY;
            /* update formula (a subject's step only: gradprec's own models are AdamW) */
            if (o->param3 && !formula_explained(&fb, o, e, diff[j], g, m0, v0, m1, v1, mx, vx, w0)) {
                cnt->formula++;
                formula_first(cnt, &fb, o, s->iter, t, i0 + j, e, g, m0, m1, v1, mx, vx, w0);
            }
            cnt->state_nonzero += (uint64_t)(mx != 0) + (uint64_t)(vx != 0);
            cnt->state_underflow += (uint64_t)(mx != 0 && m1 == 0) + (uint64_t)(vx != 0 && v1 == 0);
        }
    }

#endif
    /* the reference: every iteration is a step, with the exact full-batch gradient */
    gp_adamw_dd_step(&s->ref, &o->ref, off, n, gfull, s->ref_coef, NULL);
    return 0;
}

/* (x - ref)^2, infinite where x is NaN (a NaN weight is an infinite error, not none). */
static double sq_err(double x, double ref)
{
    double d = x - ref;
    return d == d ? d * d : INFINITY;
}

void gp_optim_final(const gp_optim_state *o, size_t off, size_t n, gp_optim_sums *sums)
{
    gp_format sf = o->cfg.state;
    for (size_t j = 0; j < n; j++) {
        size_t e = off + j;
        double wr, mr, vr;
        gp_adamw_dd_state_get(&o->ref, e, &wr, &mr, &vr);
        double w = weight_at(o, o->param, o->master, o->comp, e);
        if (o->cfg.variant == GP_ADAMW_KAHAN) /* the stored weight */
            w = gp_fmt_to_f64_fast(o->cfg.param, gp_pack_get(o->cfg.param, o->param, e));
        double m = gp_fmt_to_f64_fast(sf, gp_pack_get(sf, o->m, e)), v = gp_fmt_to_f64_fast(sf, gp_pack_get(sf, o->v, e));
        sums->w_err += sq_err(w, wr);
        sums->w_ref += wr * wr;
        sums->m_err += sq_err(m, mr);
        sums->m_ref += mr * mr;
        sums->v_err += sq_err(v, vr);
        sums->v_ref += vr * vr;
        sums->lost += o->lost[e] * o->lost[e];
        sums->state += o->state_err[e] * o->state_err[e];
        sums->formula += o->formula_err[e] * o->formula_err[e];
        if (o->el_cnt[0]) { /* runs with sampling: this element is one unit of each estimate */
            uint32_t *const *k = o->el_cnt;
            gp_ratio_add(&sums->est[GP_OPTIM_EST_WEIGHT], sq_err(w, wr), wr * wr);
            gp_ratio_add(&sums->est[GP_OPTIM_EST_M], sq_err(m, mr), mr * mr);
            gp_ratio_add(&sums->est[GP_OPTIM_EST_V], sq_err(v, vr), vr * vr);
            gp_ratio_add(&sums->est[GP_OPTIM_EST_STALE], k[GP_OPTIM_EL_STALE][e], k[GP_OPTIM_EL_NONZERO][e]);
            gp_ratio_add(&sums->est[GP_OPTIM_EST_STATE_UNDERFLOW], k[GP_OPTIM_EL_STATE_UNDERFLOW][e],
                         k[GP_OPTIM_EL_STATE_NONZERO][e]);
        }
    }
}
