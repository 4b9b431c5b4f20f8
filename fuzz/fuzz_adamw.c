/* fuzz_adamw.c — libFuzzer target: fp32 AdamW steps (kernels/arith/gp_adamw.h, every
 * evaluation order) against the exact trajectory (reference/gp_adamw_ref.h, MPFR at 200
 * bits), with the derived a-priori bound of reference/gp_adamw_bound.h as the oracle:
 * after every step |w^ - w| <= ew, |m^ - m| <= em, |v^ - v| <= ev * v, or the target
 * aborts (a bug). The derivation is in gp_adamw_bound.h; its preconditions hold by
 * construction of the decoded inputs (below) and are re-checked per step on the
 * kernel's values (a step outside them ends the check: the bound no longer applies).
 *
 * Decoded (harness/scenario/gp_decode.h's reader): the evaluation order; 1..64 steps; lr = 2^-k
 * (1 + j/8), k in 3..20; beta1 in {0.5, 0.8, 0.9, 0.95, 0.99}; beta2 in {0.9, 0.99,
 * 0.999, 0.9999}; eps = 10^-k, k in 4..12; weight decay 0, 0.01 or 0.1; an LR schedule
 * (constant or cosine over the steps); w0 = +-2^e (1 + f), e in -10..10; per step a
 * gradient 0 or +-2^e (1 + f), e in -40..10, made fp32. So every fp32 quantity stays
 * normal: g^2 >= 2^-80 (1 - beta2) g^2 >= 2^-94, m decays by at most 0.5^64 from >= 2^-41.
 *
 * Features: the bucket of the worst err/bound ratio of the run (inputs that get closer
 * to the bound are kept), and whether a step was stale or m/v changed sign pattern. */
#include <math.h>
#include <stdio.h>

#include "../kernels/arith/gp_adamw.h"
#include "../kernels/arith/gp_schedule.h"
#include "../reference/gp_adamw_bound.h"
#include "harness/scenario/gp_decode.h"
#include "gp_fuzz_check.h"

GP_FUZZ_COUNTERS g_features[3][GP_FUZZ_BUCKETS];

static double signed_pow2(gp_decoder *d, int lo, int hi)
{
    double f = 1.0 + (double)gp_decoder_bits(d, 3) / 16777216.0; /* [1, 2) */
    double v = ldexp(f, gp_decoder_int(d, lo, hi));
    return gp_decoder_bool(d) ? -v : v;
}

/* A normal fp32 value or zero? */
static int normal32(float x)
{
    return x == 0.0f || (fabsf(x) >= 0x1p-126f && isfinite(x));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const double b1s[] = {0.5, 0.8, 0.9, 0.95, 0.99}, b2s[] = {0.9, 0.99, 0.999, 0.9999},
                        wds[] = {0.0, 0.01, 0.1};
    gp_decoder d;
    gp_decoder_init(&d, data, size);
    gp_adamw_config cfg = {GP_FP32, GP_FP32, gp_decoder_bool(&d) ? GP_ADAMW_PLAIN : GP_ADAMW_ONE_STORE, GP_RNE,
                           (gp_adamw_eval)gp_decoder_pick(&d, 3), 0, 0};
    int steps = gp_decoder_int(&d, 1, 64);
    gp_adamw_ref_hparams h = {b1s[gp_decoder_pick(&d, 5)], b2s[gp_decoder_pick(&d, 4)],
                              pow(10.0, -gp_decoder_int(&d, 4, 12)), wds[gp_decoder_pick(&d, 3)]};
    gp_schedule_params sp = {gp_decoder_bool(&d) ? GP_LR_COSINE : GP_LR_CONSTANT, 0, steps,
                             ldexp(1.0 + gp_decoder_pick(&d, 8) / 8.0, -gp_decoder_int(&d, 3, 20)), 0.0, 1.0, 1};
    float w0 = (float)signed_pow2(&d, -10, 10);
    uint32_t p = gp_f32_bits(w0), master = 0, comp = 0, m = 0, v = 0;
    gp_adamw_ref r;
    gp_adamw_ref_init(&r, (double)w0);
    gp_adamw_err_bound b = {0, 0, 0};
    double worst[3] = {0, 0, 0};
    for (long t = 1; t <= steps; t++) {
        float g = gp_decoder_pick(&d, 8) == 0 ? 0.0f : (float)signed_pow2(&d, -40, 10);
        double lr = gp_schedule_lr(&sp, t);
        gp_adamw_scalars s = gp_adamw_scalars_make(lr, h.beta1, h.beta2, h.eps, h.weight_decay, t);
        p = gp_adamw_step(cfg, &s, p, &master, &comp, &m, &v, g, 0, 0, (unsigned *)0, (unsigned *)0);
        gp_adamw_exact_step x;
        gp_adamw_ref_get(&r, &x.w, &x.m, &x.v, NULL);
        gp_adamw_ref_step(&r, (double)g, lr, &h, t);
        gp_adamw_ref_get(&r, &x.w1, &x.m1, &x.v1, &x.upd);
        gp_adamw_bound_step(&b, &h, lr, t, (double)g, &x);
        float wk = gp_f32_from_bits(p), mk = gp_f32_from_bits(m), vk = gp_f32_from_bits(v);
        if (!normal32(wk) || !normal32(mk) || !normal32(vk) || !normal32(sqrtf(vk)))
            break; /* outside the bound's preconditions */
        double ew = fabs((double)wk - x.w1), em = fabs((double)mk - x.m1), evv = fabs((double)vk - x.v1);
        GP_FUZZ_CHECK(ew <= b.ew && em <= b.em && evv <= b.ev * x.v1,
                      "AdamW eval %d variant %d step %ld (lr %g, betas %g %g, eps %g, wd %g, g %a): "
                      "|w^-w| = %.3g (bound %.3g), |m^-m| = %.3g (bound %.3g), |v^-v| = %.3g (bound %.3g)",
                      (int)cfg.eval, (int)cfg.variant, t, lr, h.beta1, h.beta2, h.eps, h.weight_decay, (double)g,
                      ew, b.ew, em, b.em, evv, b.ev * x.v1);
        double ratios[3] = {b.ew > 0 ? ew / b.ew : 0, b.em > 0 ? em / b.em : 0,
                            b.ev * x.v1 > 0 ? evv / (b.ev * x.v1) : 0};
        for (int k = 0; k < 3; k++)
            if (ratios[k] > worst[k])
                worst[k] = ratios[k];
    }
    gp_adamw_ref_clear(&r);
    for (int k = 0; k < 3; k++)
        gp_fuzz_feature(g_features[k], gp_fuzz_bucket(worst[k]));
    return 0;
}
