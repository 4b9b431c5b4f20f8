/* gp_cpu_adamw.h — the CPU backend's vectorised AdamW loop (gp_cpu_adamw.c): gp_adamw_step
 * without events on whole arrays, for the formats and modes gp_cpu_adamw_fast_ok accepts.
 * CPU only (the CUDA kernels call gp_adamw_step per element). */
#ifndef GP_CPU_ADAMW_H
#define GP_CPU_ADAMW_H

#include <stddef.h>
#include <stdint.h>

#include "../arith/gp_adamw.h"

/* Does gp_cpu_adamw_fast cover configuration cfg with gradients of format gf? Params and
 * state fp32 or bf16, grads fp32 or bf16, RNE param stores, any variant and evaluation
 * order (cfg.tail is ignored). */
int gp_cpu_adamw_fast_ok(gp_adamw_config cfg, gp_format gf);

/* One AdamW step of n elements, bit for bit a loop over i of
 *   param[i] = gp_adamw_step(cfg (tail: i >= gp_adamw_fused_tail(cfg.param, n)), s, param[i],
 *                            &master[i], &comp[i], &m[i], &v[i], widen(grad[i]) * inv_scale,
 *                            0, 0, NULL, NULL)
 * with arrays packed in their formats (master fp32, used by GP_ADAMW_MASTER; comp in the
 * param format, used by GP_ADAMW_KAHAN; either may be NULL otherwise). Requires
 * gp_cpu_adamw_fast_ok(cfg, gf); arrays do not overlap. */
void gp_cpu_adamw_fast(gp_adamw_config cfg, const gp_adamw_scalars *s, gp_format gf, float inv_scale,
                       const void *grad, void *param, uint32_t *master, void *comp, void *m, void *v, size_t n);

/* The unscale of an fp32 accumulator without FTZ by a finite inv_scale, bit for bit a loop
 * over i of acc[i] = gp_unscale_step(GP_FP32, 0, acc[i], inv_scale, found_inf, NULL) (a
 * non-finite element sets *found_inf; *found_inf is never cleared). For finite v the step's
 * binary64 product v * inv_scale is exact (24 x 24 significant bits, exponents within
 * [-298, 256]: binary64 normals) and rounded once to binary32 (RNE, subnormals kept, an
 * overflow to inf), which is the IEEE binary32 multiplication v * inv_scale with the default
 * rounding and gradual underflow; blocks holding a non-finite element take the step. */
void gp_cpu_unscale_fp32(uint32_t *acc, size_t n, float inv_scale, int *found_inf);

#endif
