/* gp_cuda_kernels.cuh — what the kernels of kernels/cuda share: compile-time formats (a
 * kernel is a template over the formats of its arrays; the host switches on a runtime
 * format once per launch, in gp_with_format, never inside an element loop). Helpers
 * only: launches and __shared__ arrays stay in the .cu files (the host launch shim
 * rewrites those there). */
#ifndef GP_CUDA_KERNELS_CUH
#define GP_CUDA_KERNELS_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "../arith/gp_format.h"

/* A format as a compile-time value: the argument gp_with_format passes. */
template <int F> using gp_fmt_c = std::integral_constant<int, F>;

/* Storage bits of format F (gp_fmt_get(F).width, as a constant). */
template <int F> constexpr int gp_width = F == GP_FP32 ? 32 : F == GP_BF16 || F == GP_FP16 ? 16 : 8;

/* fn(gp_fmt_c<F>()) for the runtime format f, F among `allowed` (a bit per gp_format):
 * the one switch on a format per launch. Returns 0, or 1 (nothing called) for a format
 * outside `allowed`: a configuration the kernels do not support. */
#define GP_FMT_ALL ((1u << GP_NFORMATS) - 1u)
#define GP_FMT_PARAM ((1u << GP_FP32) | (1u << GP_BF16) | (1u << GP_FP16)) /* AdamW params */
#define GP_FMT_STATE GP_FMT_PARAM                                          /* AdamW m, v */
template <unsigned allowed = GP_FMT_ALL, typename Fn> static inline int gp_with_format(int32_t f, Fn &&fn)
{
    if (f < 0 || f >= GP_NFORMATS || !(allowed >> f & 1u))
        return 1;
    switch (f) {
    case GP_FP32: if constexpr ((allowed >> GP_FP32) & 1u) fn(gp_fmt_c<GP_FP32>()); break;
    case GP_BF16: if constexpr ((allowed >> GP_BF16) & 1u) fn(gp_fmt_c<GP_BF16>()); break;
    case GP_FP16: if constexpr ((allowed >> GP_FP16) & 1u) fn(gp_fmt_c<GP_FP16>()); break;
    case GP_FP8_E4M3: if constexpr ((allowed >> GP_FP8_E4M3) & 1u) fn(gp_fmt_c<GP_FP8_E4M3>()); break;
    default: if constexpr ((allowed >> GP_FP8_E5M2) & 1u) fn(gp_fmt_c<GP_FP8_E5M2>()); break;
    }
    return 0;
}

/* In a host entry point with a gp_error *err and a `fail:` label: run a CUDA call, and on
 * an error set err (file, line, the call, CUDA's message) and jump to fail. */
#define GP_CUDA_TRY(call)                                                                   \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            gp_error_set(err, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            goto fail;                                                                      \
        }                                                                                   \
    } while (0)

#endif
