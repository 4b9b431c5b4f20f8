/* gp_lowbit.h — low-bit optimizer state: AdamW's m and v kept as codes of a few bits
 * with one fp32 scale per block of elements, as third-party 8-bit and 4-bit optimizers
 * keep them, and those optimizers' AdamW steps on the CPU. docs/scenarios.md
 * (`optimizer.state`) names them; tests/python/test_lowbit.py compares every function
 * here with the library it models, bit for bit. The per-element arithmetic lives in
 * ../arith/gp_lowbit_block.h, which the CUDA backend's kernel calls too (the same steps
 * on the device; test_cuda_parity compares them with these).
 *
 * Formats (one scale per block of B consecutive elements of the flattened tensor; m
 * takes the signed map, v the unsigned one; a code is one byte here, whatever its width):
 *
 *  GP_LOWBIT_BNB8 ("bnb8_blockwise"): bitsandbytes' AdamW8bit on the CPU (bitsandbytes
 *   0.50: bitsandbytes/backends/cpu/ops.py, _optimizer_update_8bit_blockwise_cpu; the
 *   quantizer csrc/cpu_ops.cpp, quantize_cpu_impl). B = 256. Map: create_dynamic_map
 *   (functional.py; 256 values, signed [-0.993, 1], unsigned [0, 1]; ../arith/gp_lowbit_maps.h).
 *   Scale: absmax = max |x| over the block (fp32). Quantize: all codes 0 where absmax is
 *   0; else u = x * (1/absmax) (the reciprocal rounded to fp32, then the product),
 *   clamped to [-1, 1], i = (uint16)((u + 1) * 0.5 * 65535 + 0.5) (truncation; whether
 *   the last product and sum are fused changes no bin: none of the 5,177,265 floats within
 *   40 ulps of the bins' edges tells them apart), code = LUT[i], where LUT[i] is the first k with
 *   NOT (mid_k < -1 + (2i)/65535) (mid_k = 0.5 (map[k] + map[k+1]); all fp32), i.e. the
 *   code whose cell holds the bin's left edge: NOT always the nearest code (a bin is
 *   2/65535 wide, wider than the map's finest spacing near 0). 1/absmax overflows to
 *   inf where absmax < 2^-128: a zero of such a block becomes NaN, bin 0 (as the x86-64
 *   build converts a NaN), code LUT[0]: -0.993 * absmax for m, not 0. Dequantize:
 *   map[code] * absmax. The GPU kernel (kOptimizer8bit2StateBlockwise) quantizes to the
 *   nearest code instead; it is not modelled.
 *  GP_LOWBIT_TORCHAO8 ("torchao_8bit"): torchao.optim.AdamW8bit (torchao 0.18,
 *   torchao/optim/subclass_8bit.py and quant_utils.py). B = 256, the same 256-value maps.
 *   Scale s = max(absmax, 1e-12f) (scale_tensor). Quantize: u = x / s (fp32 division);
 *   the branchless binary search of quantize_8bit_with_qmap (c = largest index reached
 *   by the steps 128, 64, ..., 1 with u >= map[c + step]), then c + 1 (at most 255)
 *   when u - map[c] >= (map[c+1] - map[c]) * 0.5. Dequantize: map[code] * s.
 *  GP_LOWBIT_TORCHAO4 ("torchao_4bit"): torchao.optim.AdamW4bit (subclass_4bit.py).
 *   B = 128; maps: signed create_dynamic_map(True, 3, 4) (16 values, -0.8875 .. 1),
 *   unsigned k/16 for k = 1..16 (no zero: a v is never stored as 0). Quantize as
 *   torchao_8bit with the search steps 8, 4, 2, 1 (quantize_4bit_with_qmap).
 *  GP_LOWBIT_TORCHAO_FP8 ("torchao_fp8"): torchao.optim.AdamWFp8 (subclass_fp8.py).
 *   B = 256, codes fp8 e4m3 (OCP "fn"); one signed format for m and v. Scale
 *   s = max(absmax, 1e-12f) / 448 (fp32 division); code = e4m3(x / s) (RNE);
 *   dequantize: float(code) * s.
 * Scales and the arithmetic are fp32, subnormals kept (no FTZ). Inputs are finite; a
 * NaN or inf in a block is outside what these functions model (the libraries give the
 * block arbitrary codes).
 *
 * Tensors smaller than the libraries' threshold (4096 elements, or not a multiple of B
 * for torchao) keep fp32 state there; gradprec's state format applies to every tensor
 * of the scenario (a scenario that wants the library's fp32 fallback says state: fp32). */
#ifndef GP_LOWBIT_H
#define GP_LOWBIT_H

#include <stddef.h>
#include <stdint.h>

#include "../arith/gp_adamw.h"
#include "../arith/gp_lowbit_block.h" /* gp_lowbit, the per-element arithmetic */

/* The state format's name ("bnb8_blockwise", "torchao_8bit", "torchao_4bit",
 * "torchao_fp8"; static), NULL for GP_LOWBIT_NONE or out of range. */
const char *gp_lowbit_name(gp_lowbit f);

/* The format named `name`, GP_LOWBIT_NONE when it names none. */
gp_lowbit gp_lowbit_parse(const char *name);

/* Elements per scale (256 or 128); bits per code (8 or 4). */
size_t gp_lowbit_block(gp_lowbit f);
int gp_lowbit_bits(gp_lowbit f);

/* Bytes of state per element for m and v together, as the library stores it (codes
 * packed, one fp32 scale per block): bnb8 and torchao_8bit/fp8 2 + 8/256, 4-bit 1 + 8/128. */
double gp_lowbit_bytes_per_element(gp_lowbit f);

/* The map of m (sgn 1) or v (sgn 0): map[k] for k < 2^bits as fp32; NULL for fp8. */
const float *gp_lowbit_map(gp_lowbit f, int sgn);

/* Quantize n finite values x (n a multiple of the block) to codes[n] and scales[n / B]
 * by f's rule for m (sgn 1) or v (sgn 0). */
void gp_lowbit_quantize(gp_lowbit f, int sgn, const float *x, size_t n, uint8_t *codes, float *scales);

/* x[i] = the value codes[i] and its block's scale stand for (exact in fp32 as the library
 * computes it: one fp32 product). */
void gp_lowbit_dequantize(gp_lowbit f, int sgn, const uint8_t *codes, const float *scales, size_t n, float *x);

/* One AdamW step of the library's optimizer over n elements (a multiple of the block),
 * as it runs on the CPU (gp_lowbit.c gives each one's operations and source):
 * param[] (format pf: fp32, bf16 or fp16; RNE store) and the quantized m, v (codes and
 * scales) are read and written; grad[] holds fp32 values (the library widens .grad to
 * fp32 exactly). sqrt_eval picks the fp32 sqrt of torch's CPU kernels where the step
 * takes one (gp_adamw_sqrtf_fp32; GP_ADAMW_TORCH_CPU: IEEE). mx, vx (may be NULL): the
 * fp32 m', v' the step computed before storing them (what its update used). Returns 0,
 * 1 for a configuration the library does not have (pf not fp32/bf16/fp16). */
typedef struct {
    gp_lowbit f;
    gp_format pf;
    double lr, beta1, beta2, eps, weight_decay;
    int64_t step;       /* t >= 1 after its increment */
    gp_adamw_eval sqrt_eval;
    size_t n;
    const float *grad;
    void *param;
    uint8_t *m_codes, *v_codes;
    float *m_scales, *v_scales;
    float *mx, *vx;     /* out, optional */
} gp_lowbit_adamw_args;

int gp_lowbit_adamw(const gp_lowbit_adamw_args *a);

#endif
