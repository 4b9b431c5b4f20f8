/* gp_plugin_abi.h — the C ABI through which gradprec runs a kernel under test: the
 * built-in backends (cpu, cuda) and users' shared libraries (--backend plugin:PATH.so)
 * all fill this table. Version 3 (version 1 had no optimizer step; version 2 had no
 * accumulate_many, and gradprec still loads version 2 plugins). Compile a plugin against
 * this header alone (plus, for stochastic rounding, kernels/arith/gp_philox.h for the
 * random bits).
 *
 * A plugin exports one symbol, `gp_plugin_entry`, returning a pointer to a static
 * gp_plugin whose abi_version is GP_PLUGIN_ABI_VERSION. Formats and rounding codes
 * are the integers below. Arrays are packed at the format's width: fp32 as 4-byte
 * IEEE binary32, bf16/fp16 as 2-byte patterns, fp8 as bytes, little-endian. */
#ifndef GP_PLUGIN_ABI_H
#define GP_PLUGIN_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GP_PLUGIN_ABI_VERSION 3u
/* The most segments gradprec passes to one accumulate_many call. */
#define GP_PLUGIN_MANY_MAX 256u

/* Formats (same values as gp_format). */
enum { GP_PLUGIN_FP32 = 0, GP_PLUGIN_BF16 = 1, GP_PLUGIN_FP16 = 2, GP_PLUGIN_FP8_E4M3 = 3,
       GP_PLUGIN_FP8_E5M2 = 4 };
/* Accumulator rounding (same values as gp_acc_rounding). */
enum { GP_PLUGIN_RNE = 0, GP_PLUGIN_RTZ = 1, GP_PLUGIN_STOCHASTIC = 2, GP_PLUGIN_KAHAN = 3 };
/* Where the arrays live. */
enum { GP_PLUGIN_HOST = 0, GP_PLUGIN_DEVICE = 1 };

/* acc[i] <- acc[i] + grad[i] for i < n, in the accumulator format and rounding. */
typedef struct {
    uint32_t struct_size; /* sizeof(gp_plugin_accumulate_args) of the caller */
    int32_t grad_format;  /* format of grad[] */
    int32_t acc_format;   /* format of acc[] and comp[] */
    int32_t rounding;     /* GP_PLUGIN_RNE / RTZ / STOCHASTIC / KAHAN */
    int32_t ftz;          /* non-zero: results below the min normal are flushed to zero */
    uint64_t seed;        /* stochastic rounding: the 32 random bits of element i are */
    uint64_t stream;      /*   gp_rand_u32(seed, stream, first_index + i) */
    uint64_t first_index; /* index of element 0 within the whole tensor */
    uint64_t n;           /* number of elements */
    uint32_t microbatch;  /* index of this micro-batch in the accumulation window, from 0
                             (in a distributed scenario: in the rank's own window, 0..K-1);
                             a collective's addition (docs/distributed.md) passes its hop */
    const void *grad;     /* n gradients (read only) */
    void *acc;            /* n accumulator elements, updated in place */
    void *comp;           /* n Kahan compensation terms (KAHAN only), updated; else NULL */
} gp_plugin_accumulate_args;

/* Unscale in place: acc[i] <- store(fl32(widen(acc[i]) * inv_scale)); set found_inf to
 * 1 if any widened acc[i] is inf or NaN (never clear it). */
typedef struct {
    uint32_t struct_size;
    int32_t acc_format;
    int32_t ftz;
    float inv_scale;  /* (float)(1 / (double)scale) */
    uint64_t n;
    void *acc;
    int32_t found_inf; /* out */
} gp_plugin_unscale_args;

/* AdamW variants (same values as kernels/arith/gp_adamw.h's gp_adamw_variant). */
enum { GP_PLUGIN_ADAMW_PLAIN = 0,     /* torch eager on the param: the decayed weight is
                                         stored in the param format, then the update */
       GP_PLUGIN_ADAMW_ONE_STORE = 1, /* the same math, the decayed weight kept in fp32 */
       GP_PLUGIN_ADAMW_MASTER = 2,    /* the step runs on master[] (fp32); param = store(master) */
       GP_PLUGIN_ADAMW_KAHAN = 3,     /* param + comp[] (both param format), compensated */
       GP_PLUGIN_ADAMW_TORCH_FUSED_CPU = 4 }; /* torch.optim.AdamW(fused=True) on CPU, in its
                                         order (docs/model.md): state_format == param_format,
                                         RNE, no master or comp; grad rounded to the param
                                         format first (RNE); the last n mod 8 (fp32) or
                                         n mod 16 (bf16, fp16) elements of each call are the
                                         kernel's scalar remainder. A plugin that does not
                                         implement a variant returns 1 (unsupported). */

/* One AdamW step (DESIGN.md §3, torch.optim.AdamW's order) over n elements:
 *   p <- p*(1 - lr*wd); m <- m + (1-beta1)(g - m); v <- beta2*v + (1-beta2)*g^2;
 *   p <- p - (lr/(1 - beta1^step)) * m / (sqrt(v)/sqrt(1 - beta2^step) + eps)
 * in fp32 arithmetic, with g = widen(grad[i]) * inv_scale (fp32 multiply; 1.0f when
 * the gradients are already unscaled). The hyper-parameters come as the binary64 values
 * a Python training script holds, and the plugin computes its own scalars. When
 * *found_inf is non-zero (read where `memory` says: host or device) nothing is written:
 * the step is skipped without a host synchronisation, as torch's fused AdamW does. */
typedef struct {
    uint32_t struct_size;
    int32_t param_format;    /* fp32, bf16 or fp16: param[] (and comp[]) */
    int32_t state_format;    /* fp32 or bf16: m[] and v[] */
    int32_t grad_format;     /* format of grad[] */
    int32_t variant;         /* GP_PLUGIN_ADAMW_* */
    int32_t rounding;        /* store of the param: GP_PLUGIN_RNE or GP_PLUGIN_STOCHASTIC */
    double lr, beta1, beta2, eps, weight_decay;
    int64_t step;            /* t >= 1: this step's number (skipped steps do not count) */
    float inv_scale;         /* multiplies the gradient (1.0f: already unscaled) */
    const int32_t *found_inf; /* non-zero: skip the step */
    uint64_t seed;           /* stochastic rounding: the 32 random bits of element i are */
    uint64_t stream;         /*   gp_rand_u32(seed, stream, first_index + i) */
    uint64_t first_index;
    uint64_t n;
    const void *grad;        /* n gradients (read only) */
    void *param;             /* n params, updated */
    void *master;            /* n fp32 master weights (MASTER only), updated; else NULL */
    void *comp;              /* n compensation terms (KAHAN only), updated; else NULL */
    void *m, *v;             /* n first and second moments, updated */
    /* Appended after version 3 (read it only when struct_size covers it; absent: 0):
     * the operation order the scenario asks for (optimizer.evaluation), the values of
     * kernels/arith/gp_adamw.h's gp_adamw_eval. A subject with its own order may ignore
     * it: gradprec judges what it wrote, and names the model it matched, if any. */
    int32_t evaluation;      /* GP_PLUGIN_EVAL_* */
    /* Appended in version 3 for low-bit optimizer state (read them only when struct_size
     * covers them; absent: GP_PLUGIN_STATE_PLAIN). With a low-bit state (optimizer.state:
     * bnb8_blockwise, torchao_8bit, torchao_4bit, torchao_fp8; kernels/cpu/gp_lowbit.h)
     * m and v are the library's quantized state: n codes each (one byte per code, 4-bit
     * codes too) in m_codes / v_codes and one fp32 scale per block of `block` elements
     * in m_scales / v_scales (n is a multiple of block; element i's scale is
     * [i / block]); the step reads and writes those, the fp32 g (grad_format fp32) and
     * the param; m[] and v[] then hold the dequantized state before the step (fp32,
     * state_format fp32), read only: gradprec recomputes them from what was written. */
    int32_t state_quant;     /* GP_PLUGIN_STATE_* */
    int32_t block;           /* elements per scale (low-bit state), else 0 */
    uint8_t *m_codes, *v_codes;
    float *m_scales, *v_scales;
} gp_plugin_adamw_args;

/* Optimizer state storage (same values as kernels/cpu/gp_lowbit.h's gp_lowbit). */
enum { GP_PLUGIN_STATE_PLAIN = 0,         /* m[], v[] in state_format */
       GP_PLUGIN_STATE_BNB8_BLOCKWISE = 1, /* bitsandbytes AdamW8bit: 8-bit codes, block 256 */
       GP_PLUGIN_STATE_TORCHAO_8BIT = 2,  /* torchao AdamW8bit: 8-bit codes, block 256 */
       GP_PLUGIN_STATE_TORCHAO_4BIT = 3,  /* torchao AdamW4bit: 4-bit codes, block 128 */
       GP_PLUGIN_STATE_TORCHAO_FP8 = 4 }; /* torchao AdamWFp8: e4m3 codes, block 256 */

/* AdamW operation orders (same values as gp_adamw_eval). */
enum { GP_PLUGIN_EVAL_TORCH_CUDA = 0, /* torch's CUDA kernels (gradprec's default) */
       GP_PLUGIN_EVAL_TORCH_CPU = 1,  /* torch's CPU kernels: single-tensor and foreach */
       GP_PLUGIN_EVAL_UNFUSED = 2,    /* every operation rounded */
       GP_PLUGIN_EVAL_TORCH_CPU_ZEN4 = 3, /* TORCH_CPU with the fp32 sqrt of torch's x86-64
                                            wheel (MKL) on AMD Zen 4: CPU backend only */
       GP_PLUGIN_EVAL_TORCH_CUDA_FOREACH = 4, /* torch's CUDA foreach kernels: TORCH_CUDA
                                                 dividing by bias_correction2_sqrt */
       GP_PLUGIN_EVAL_TORCH_CPU_INTEL_AVX512 = 5, /* TORCH_CPU_ZEN4's on an Intel CPU with
                                                     AVX-512: CPU backend only */
       GP_PLUGIN_EVAL_TORCH_CPU_HOST = 6, /* TORCH_CPU_ZEN4's as MKL computes it on the host
                                              running gradprec: CPU backend on x86-64 only */
       GP_PLUGIN_EVAL_TORCH_CPU_FOREACH = 7 }; /* torch's CPU foreach AdamW: TORCH_CPU with the
                                                  decay factor and beta2 rounded to the param's
                                                  and the state's dtype (_foreach_mul_) */

/* Global-norm clipping, first half: the sum of the squares of n gradients (format
 * `format`, widened exactly to fp32, each square rounded to fp32) over gradprec's fixed
 * pairwise tree: T(x, 1) = x[0], T(x, n) = fl32(T(x, h) + T(x + h, n - h)) with h the
 * largest power of two below n (kernels/arith/gp_clip.h). */
typedef struct {
    uint32_t struct_size;
    int32_t format;
    uint64_t n;
    const void *grad;
    float sumsq;          /* out */
} gp_plugin_sumsq_args;

/* Clipping, second half: grad[i] <- store(fl32(widen(grad[i]) * coef)), RNE, FTZ on the
 * store when ftz is set. */
typedef struct {
    uint32_t struct_size;
    int32_t format;
    int32_t ftz;
    float coef;
    uint64_t n;
    void *grad;
} gp_plugin_scale_args;

/* torch GradScaler's update (_amp_update_scale_) on the plugin's memory: if *found_inf,
 * *scale = (float)(*scale * backoff) and *tracker = 0; else *tracker + 1 and, when it
 * reaches interval, *scale = (float)(*scale * growth) if finite, *tracker = 0. */
typedef struct {
    uint32_t struct_size;
    float *scale;
    int32_t *tracker;
    const int32_t *found_inf;
    double growth, backoff;
    int32_t interval;
} gp_plugin_scaler_args;

typedef struct gp_plugin { /* tagged: include/gradprec.h declares struct gp_plugin */
    uint32_t abi_version; /* GP_PLUGIN_ABI_VERSION */
    const char *name;     /* shown in reports */
    uint32_t memory;      /* GP_PLUGIN_HOST or GP_PLUGIN_DEVICE: then every array pointer,
                           * and found_inf, scale and tracker, is a CUDA device pointer;
                           * the argument structs stay host memory, so out fields (unscale's
                           * found_inf, sumsq) are written there before returning. gradprec
                           * waits for the device after each call. */
    /* Each returns 0 on success, 1 when the configuration is not supported (gradprec
     * says so and exits 2), anything else on failure (an internal error). */
    int (*accumulate)(const gp_plugin_accumulate_args *args);
    int (*unscale)(gp_plugin_unscale_args *args);
    int (*adamw)(const gp_plugin_adamw_args *args); /* since version 2 */
    /* Optional (NULL: gradprec's CPU emulation does it, and the report says so). */
    int (*grad_sumsq)(gp_plugin_sumsq_args *args);
    int (*grad_scale)(const gp_plugin_scale_args *args);
    int (*scaler_update)(const gp_plugin_scaler_args *args);
    /* Optional, since version 3: count accumulations in one call (a CUDA backend: one
     * launch for many tensors), with the same effect as calling accumulate on args[0],
     * ..., args[count - 1] in turn. gradprec passes the chunks of different tensors for
     * one micro-batch: each segment has its own arrays, n, first_index and stream; no
     * two segments' arrays overlap; 1 <= count <= GP_PLUGIN_MANY_MAX. Returns as
     * accumulate does (1 if any segment's configuration is unsupported). NULL: gradprec
     * calls accumulate once per segment. */
    int (*accumulate_many)(const gp_plugin_accumulate_args *args, uint32_t count);
} gp_plugin;

/* The one symbol a plugin exports. */
typedef const gp_plugin *(*gp_plugin_entry_fn)(void);
#define GP_PLUGIN_ENTRY_SYMBOL "gp_plugin_entry"

#ifdef __cplusplus
}
#endif

#endif
