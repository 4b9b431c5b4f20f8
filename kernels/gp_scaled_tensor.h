/* gp_scaled_tensor.h — scaled and block formats as whole tensors: their names ("FORMAT[:OPTION
 * ...]", docs/formats.md "Scaled and block formats"), parsed and written back, and the
 * quantization of a rows x cols fp32 tensor (row-major) block by block with the
 * per-element rules of arith/gp_scaled.h. Used by the library API (gradprec_quantize),
 * and meant for the scenario loader and runner (precision.grad and friends). */
#ifndef GP_SCALED_TENSOR_H
#define GP_SCALED_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "arith/gp_scaled.h"

/* Parse a scaled format name: "fp8_e4m3" or "fp8_e5m2" (also "fp6_e2m3", "fp6_e3m2",
 * "fp4_e2m1": the MX element formats under one fp32 scale) with ":current" (default),
 * ":delayed" (with ":hist=L" 1..1024, default 1024, ":max" (default) or ":most_recent",
 * ":margin=M" 0..64, default 0: Transformer Engine's DelayedScaling), ":blockwise_1x128",
 * ":blockwise_128x128" and options ":pow2", ":nosat";
 * "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4" with a rule ":floor"
 * (default), ":ceil", ":even", ":rceil" and ":torchao"; "nvfp4" with ":single"; any with
 * ":sr" (stochastic rounding of the elements). Returns 0, or -1 with a one-line reason
 * in why[0..n). */
int gp_scaled_parse(const char *s, gp_scaled_cfg *c, char *why, size_t n);

/* The canonical name of c (every non-default option, in parse order) into buf. */
void gp_scaled_name(const gp_scaled_cfg *c, char *buf, size_t n);

/* Elements per scale block of c for a rows x cols tensor, and the number of scales. */
uint64_t gp_scaled_nscales(const gp_scaled_cfg *c, uint64_t rows, uint64_t cols);

/* Quantize x (rows x cols, row-major) with c and write the dequantized values to y (may
 * be x), the codes to codes (may be NULL), the scales to scales (may be NULL;
 * gp_scaled_nscales of them, row-major over blocks, as fp32 values: the multiplier s of
 * fp8 kinds, 2^(c-127) or NaN of MX, the e4m3 scale of NVFP4). *tensor_scale (may be
 * NULL) gets NVFP4's fp32 tensor scale (1 when single level). GP_SC_DELAYED takes its
 * scale from `given`. Random bits: gp_rand_u32(seed, stream, index0 + element index).
 * ev (may be NULL): element i's events OR-ed into ev[i] (OVERFLOW|INEXACT: saturated,
 * or with sat 0 overflowed to NaN/inf). */
void gp_scaled_quantize(const gp_scaled_cfg *c, uint64_t rows, uint64_t cols, const float *x, float *y,
                        uint8_t *codes, float *scales, float *tensor_scale, float given, uint64_t seed,
                        uint64_t stream, uint64_t index0, unsigned *ev);

/* gp_scaled_quantize (without codes and scales), and the rounding cell of every element,
 * block by block from the codes and scale its quantization made (gp_scaled_row_cells:
 * lo[i], hi[i] the two values element i may be stored as, f[i] the position of its scaled
 * value between them; NaN, NaN, 0 past the element's range). */
void gp_scaled_quantize_cells(const gp_scaled_cfg *c, uint64_t rows, uint64_t cols, const float *x, float *y,
                              float given, uint64_t seed, uint64_t stream, uint64_t index0, unsigned *ev, float *lo,
                              float *hi, double *f);

/* Elements per block along a row (the whole row for per-tensor kinds: 0). */
uint64_t gp_scaled_block_cols(const gp_scaled_cfg *c);

#endif
