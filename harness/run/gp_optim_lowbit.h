/* gp_optim_lowbit.h — the optimizer phase (gp_optim.h) with a low-bit state
 * (optimizer.state: bnb8_blockwise, torchao_8bit, torchao_4bit, torchao_fp8;
 * kernels/cpu/gp_lowbit.h): m and v are kept as the library keeps them, one code per
 * element and one fp32 scale per block, and the backend's AdamW step reads and writes
 * those (gp_plugin_adamw_args' low-bit fields). gp_optim's m[] and v[] are then fp32
 * arrays of the dequantized values (exact: one fp32 product each), rewritten after every
 * step, so the attribution of gp_optim.h works unchanged: the state-precision loss is the
 * update the dequantized m', v' give against the exact one, and an m or v quantized to 0
 * from a non-zero exact value is a state underflow. The exact reference keeps m and v
 * exact (double-double).
 *
 * A low-bit state needs every tensor's element count a multiple of the state's block
 * (256; 128 for torchao_4bit): the chunks of GP_OPTIM_CHUNK elements then hold whole
 * blocks. It runs with the plain variant only (no master, Kahan or fused), not with
 * sampling (a block's scale depends on all of its elements). */
#ifndef GP_OPTIM_LOWBIT_H
#define GP_OPTIM_LOWBIT_H

#include <stddef.h>
#include <stdint.h>

#include "../../base/gp_error.h"
#include "../../kernels/cpu/gp_lowbit.h"
#include "../../kernels/gp_plugin_abi.h"

typedef struct {
    gp_lowbit f;
    size_t block;
    uint8_t *mq, *vq;            /* the state: cap codes each */
    float *ms, *vs;              /* cap / block scales each */
    uint8_t *old_mq, *old_vq;    /* one chunk's state before the step */
    float *old_ms, *old_vs;
    /* scratch for another step on the old state: [0] a compared backend's (--compare),
     * [1] a model's (GP_OPTIM_WITH_MODELS) */
    uint8_t *sq_m[2], *sq_v[2];
    float *ss_m[2], *ss_v[2];
    float gap_m, gap_v;          /* the widest step between neighbouring codes of m's and
                                    v's maps, in units of the scale */
} gp_optim_lowbit;

/* *lb = the low-bit state f for cap elements (one-chunk scratch of `chunk` elements; the
 * compared backend's when cmp, the models' when models), or an error (out of memory). The
 * caller has checked that every tensor's size is a multiple of the block. Free with
 * gp_optim_lowbit_free either way. */
int gp_optim_lowbit_alloc(gp_optim_lowbit *lb, gp_lowbit f, size_t cap, size_t chunk, int cmp, int models,
                          gp_error *err);
void gp_optim_lowbit_free(gp_optim_lowbit *lb);

/* *view = lb with the one-chunk scratch (old codes and scales, the slots) of `scratch`:
 * threads stepping disjoint chunks of one state each borrow their own (gp_optim_scratch_borrow). */
void gp_optim_lowbit_borrow(gp_optim_lowbit *view, const gp_optim_lowbit *lb, const gp_optim_lowbit *scratch);

/* Elements [off, off + n) (whole blocks) start from the fp32 values m[off..], v[off..]:
 * quantized into the state, and m, v rewritten as the values the state stands for. */
void gp_optim_lowbit_init(gp_optim_lowbit *lb, float *m, float *v, size_t off, size_t n);

/* Before the backend's step on [off, off + n): keep the state's codes and scales, and
 * point a's low-bit fields at the state (a.state_quant, block, codes, scales). */
void gp_optim_lowbit_args(gp_optim_lowbit *lb, gp_plugin_adamw_args *a, size_t off, size_t n);

/* After it: m[off..], v[off..] = the values the written state stands for. */
void gp_optim_lowbit_after(const gp_optim_lowbit *lb, float *m, float *v, size_t off, size_t n);

/* Scratch slots: the compared backend's, a model's. */
enum { GP_LOWBIT_CMP = 0, GP_LOWBIT_MODEL = 1 };

/* a2 (another call on the old state, gp_optim.c's on_old_state) with its low-bit fields on
 * scratch `slot`, which gets the chunk's old codes and scales (n elements). */
void gp_optim_lowbit_on_old(gp_optim_lowbit *lb, gp_plugin_adamw_args *a2, size_t n, int slot);

/* m[0..n), v[0..n) = the values scratch `slot`'s state stands for. */
void gp_optim_lowbit_slot_values(const gp_optim_lowbit *lb, int slot, float *m, float *v, size_t n);

/* Does scratch `slot`'s state differ from what the subject wrote at [off, off + n)? */
int gp_optim_lowbit_differs(const gp_optim_lowbit *lb, size_t off, size_t n, int slot);

/* Are the stored m1, v1 of element e one quantization of AdamW's moments mx, vx (the
 * update-formula check of gp_optim.h for a low-bit state)? Within one step of the map
 * at the block's scale, plus a bin of bitsandbytes' lookup table (2^-14 of the scale),
 * plus the fp32 evaluation's error ex, ev of mx and vx. */
int gp_optim_lowbit_state_near(const gp_optim_lowbit *lb, size_t e, double m1, double v1, double mx, double vx,
                               double ex, double ev);

#endif
