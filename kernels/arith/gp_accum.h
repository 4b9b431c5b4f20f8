/* gp_accum.h — the per-element steps of gradient accumulation, shared by the CPU
 * emulation and the CUDA kernels: add a stored gradient into an accumulator element,
 * and unscale with the non-finite check (torch GradScaler semantics, DESIGN.md §3). */
#ifndef GP_ACCUM_H
#define GP_ACCUM_H

#include "gp_format.h"

/* How an accumulator rounds each addition. */
typedef enum {
    GP_ACC_RNE = 0,        /* round to nearest even */
    GP_ACC_RTZ = 1,        /* toward zero */
    GP_ACC_STOCHASTIC = 2, /* stochastic, bits from gp_rand_u32(seed, stream, element) */
    GP_ACC_KAHAN = 3       /* RNE with a Kahan compensation term stored in the acc format */
} gp_acc_rounding;

/* One accumulation step: acc <- acc + g, g an fp32 value (a stored gradient widened
 * exactly), acc/comp bit patterns of format af.
 *  - fp32 accumulator: the exact sum rounded once to fp32 in `r`; uninstrumented RNE
 *    without FTZ (ev == NULL) uses the native fp32 add, which is exactly that;
 *  - narrower accumulators: fp32 opmath then a store, as PyTorch does: s = fl32(a + g)
 *    (RNE), then s rounded to af in `r` — a double rounding, on purpose;
 *  - Kahan: y = g - c; s = fl32(a + y); t = store(s); c = store((t - a) - y); all RNE.
 * ftz applies to the store. Without FTZ and events, the fp32 operations are CUDA's IEEE
 * intrinsics in kernel code (GP_FADD_RN, __fadd_rz) and the stores gp_fmt_store_f32 (the
 * hardware's conversions there); same bits. Events of the store are OR-ed into *ev, plus
 * GP_EV_ABSORBED when g != 0 and neither acc nor comp changed. *comp is read and
 * written only for Kahan. Returns the new acc bits. */
GP_ARITH uint32_t gp_accum_step(gp_format af, gp_acc_rounding r, int ftz, uint32_t acc,
                                uint32_t *comp, float g, uint32_t rbits, unsigned *ev)
{
    float a = gp_f32_from_bits(gp_fmt_to_f32_bits(af, acc));
    int plain = !ftz && !ev; /* no flush, no events: the stores may be the hardware's */
    unsigned e = 0;
    uint32_t out;
    int absorbed;
    if (r == GP_ACC_KAHAN) {
        float c = gp_f32_from_bits(gp_fmt_to_f32_bits(af, *comp));
        float y = GP_FSUB_RN(g, c);
        float s = GP_FADD_RN(a, y);
        out = plain ? gp_fmt_store_f32(af, s, 0) : gp_fmt_from_f32_bits(af, gp_f32_bits(s), GP_RNE, 0, ftz, &e);
        float t = gp_f32_from_bits(gp_fmt_to_f32_bits(af, out));
        float cn = GP_FSUB_RN(GP_FSUB_RN(t, a), y);
        uint32_t newc = plain ? gp_fmt_store_f32(af, cn, 0)
                              : gp_fmt_from_f32_bits(af, gp_f32_bits(cn), GP_RNE, 0, ftz, (unsigned *)0);
        absorbed = g != 0.0f && out == acc && newc == *comp;
        *comp = newc;
    } else if (af == GP_FP32) {
        if (r == GP_ACC_RNE && plain) {
            out = gp_f32_bits(GP_FADD_RN(a, g)); /* production path: IEEE add is the correct rounding */
#ifdef GP_DEVICE_CODE
        } else if (r == GP_ACC_RTZ && plain) {
            out = gp_f32_bits(__fadd_rz(a, g)); /* the hardware's add toward zero */
#endif
        } else {
            double s = (double)a + (double)g; /* TwoSum: s + err is the exact sum */
            double bb = s - (double)a;
            double err = ((double)a - (s - bb)) + ((double)g - bb);
            out = gp_fmt_from_f64(GP_FP32, gp_f64_nudge(s, err > 0 ? 1 : err < 0 ? -1 : 0),
                                  (gp_rmode)r, rbits, ftz, &e);
        }
        absorbed = g != 0.0f && out == acc;
    } else {
        float s = GP_FADD_RN(a, g);
        out = plain && r != GP_ACC_STOCHASTIC ? gp_fmt_store_f32(af, s, r == GP_ACC_RTZ)
                                              : gp_fmt_from_f32_bits(af, gp_f32_bits(s), (gp_rmode)r, rbits, ftz, &e);
        absorbed = g != 0.0f && out == acc;
    }
    if (absorbed)
        e |= GP_EV_ABSORBED;
    if (ev)
        *ev |= e;
    return out;
}

/* Unscale one accumulator element as torch's non-finite-check-and-unscale does: v =
 * the element widened to fp32; a non-finite v sets *found_inf; the result is
 * fl32(v * inv_scale) stored back in af (RNE, ftz on the stores). Returns its bits. */
GP_ARITH uint32_t gp_unscale_step(gp_format af, int ftz, uint32_t acc, float inv_scale,
                                  int *found_inf, unsigned *ev)
{
    uint32_t vb = gp_fmt_to_f32_bits(af, acc);
    if ((vb & 0x7f800000u) == 0x7f800000u)
        *found_inf = 1;
#ifdef GP_DEVICE_CODE
    if (!ftz && !ev) /* the hardware's multiply and store: the same rounding, once each */
        return gp_fmt_store_f32(af, GP_FMUL_RN(gp_f32_from_bits(vb), inv_scale), 0);
#endif
    double prod = (double)gp_f32_from_bits(vb) * (double)inv_scale; /* exact: 24x24 bits */
    uint32_t p = gp_fmt_from_f64(GP_FP32, prod, GP_RNE, 0, ftz, ev);
    return af == GP_FP32 ? p : gp_fmt_from_f32_bits(af, p, GP_RNE, 0, ftz, ev);
}

/* Packed element access: formats are stored at their width (4, 2 or 1 bytes). */
GP_ARITH uint32_t gp_pack_get(gp_format f, const void *base, uint64_t i)
{
    switch (gp_fmt_get(f).width) {
    case 32: return ((const uint32_t *)base)[i];
    case 16: return ((const uint16_t *)base)[i];
    default: return ((const uint8_t *)base)[i];
    }
}
GP_ARITH void gp_pack_set(gp_format f, void *base, uint64_t i, uint32_t bits)
{
    switch (gp_fmt_get(f).width) {
    case 32: ((uint32_t *)base)[i] = bits; break;
    case 16: ((uint16_t *)base)[i] = (uint16_t)bits; break;
    default: ((uint8_t *)base)[i] = (uint8_t)bits; break;
    }
}

#endif
