/* gp_plugin_abi.h — the C ABI through which gradprec runs a kernel under test: the
 * built-in backends (cpu, cuda) and users' shared libraries (--backend plugin:PATH.so)
 * all fill this table. Version 1. Compile a plugin against this header alone (plus,
 * for stochastic rounding, kernels/arith/gp_philox.h for the random bits).
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

#define GP_PLUGIN_ABI_VERSION 1u

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

typedef struct {
    uint32_t abi_version; /* GP_PLUGIN_ABI_VERSION */
    const char *name;     /* shown in reports */
    uint32_t memory;      /* GP_PLUGIN_HOST or GP_PLUGIN_DEVICE (CUDA device pointers) */
    /* Each returns 0 on success, non-zero on failure (reported as an internal error). */
    int (*accumulate)(const gp_plugin_accumulate_args *args);
    int (*unscale)(gp_plugin_unscale_args *args);
} gp_plugin;

/* The one symbol a plugin exports. */
typedef const gp_plugin *(*gp_plugin_entry_fn)(void);
#define GP_PLUGIN_ENTRY_SYMBOL "gp_plugin_entry"

#ifdef __cplusplus
}
#endif

#endif
