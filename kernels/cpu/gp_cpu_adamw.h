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

#endif
