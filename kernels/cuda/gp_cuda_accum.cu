/* gp_cuda_accum.cu — the CUDA backend's kernels: accumulate (one tensor's chunk, or the
 * chunks of many tensors in one launch per pair of formats), unscale, AdamW, clipping's
 * two halves and the scaler update, over the per-element steps of kernels/arith (the
 * model the CPU emulation runs), reading and writing 8 elements at a time with 16-byte
 * vector transactions. Production form: each kernel is a template over the formats of
 * its arrays (the host switches on the runtime formats once per launch: gp_with_format),
 * and the arithmetic is the hardware's where CUDA has it — IEEE __fadd_rn/__fmul_rn/
 * __fmaf_rn, __fadd_rz, sqrtf (IEEE: no fast math), and the bf16/fp16 conversions
 * __float2bfloat16_rn/_rz, __float2half_rn/_rz, __bfloat162float, __half2float (through
 * GP_FADD_RN ... and gp_fmt_store_f32 / gp_fmt_to_f32_bits of kernels/arith, see
 * GP_HW_CONVERT in gp_format.h); gradprec's software rounding only where the hardware has
 * none: stochastic rounding, FTZ (flushed before rounding), fp8. The rounding mode and
 * FTZ flag are uniform branches (the same for every thread of a launch). They form a
 * device-memory gp_plugin table (gp_cuda_device_plugin); gp_cuda_backend serves it to the
 * runner through the staging adapter of gp_cuda_stage.cu. Random bits: Philox(seed,
 * stream, element). Sum of squares: one block per 2^14-element chunk replaying
 * gradprec's fixed tree with warp shuffles (gp_clip.h, "GPU replay").
 * Build: part of gradprec_core when nvcc is found (--fmad=false, sm_80/sm_90).
 * Run:   gradprec run --backend cuda (needs a device). */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>

#include "../arith/gp_accum.h"
#include "../arith/gp_adamw.h"
#include "../arith/gp_clip.h"
#include "../arith/gp_lowbit_block.h"
#include "../arith/gp_scaler.h"
#include "../arith/gp_philox.h"
#include "gp_cuda.h"
#include "gp_cuda_kernels.cuh"

/* Eight packed elements of format F starting at element 8*g, loaded with 16-byte (uint4)
 * transactions — two for fp32, one for bf16/fp16 — or one 8-byte (uint2) for fp8. The
 * base must be 16-byte aligned (vec_ok checks). */
#define GP_GROUP 8
template <int F> __device__ __forceinline__ void load8(const void *base, uint64_t g, uint32_t v[GP_GROUP])
{
    if constexpr (gp_width<F> == 32) {
        const uint4 *p = (const uint4 *)base + 2 * g;
        uint4 a = p[0], b = p[1];
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
        v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    } else if constexpr (gp_width<F> == 16) {
        uint4 a = ((const uint4 *)base)[g];
        uint32_t w[4] = {a.x, a.y, a.z, a.w};
        for (int k = 0; k < 4; k++) {
            v[2 * k] = w[k] & 0xffffu;
            v[2 * k + 1] = w[k] >> 16;
        }
    } else {
        uint2 a = ((const uint2 *)base)[g];
        for (int k = 0; k < 4; k++) {
            v[k] = (a.x >> (8 * k)) & 0xffu;
            v[4 + k] = (a.y >> (8 * k)) & 0xffu;
        }
    }
}

template <int F> __device__ __forceinline__ void store8(void *base, uint64_t g, const uint32_t v[GP_GROUP])
{
    if constexpr (gp_width<F> == 32) {
        uint4 *p = (uint4 *)base + 2 * g;
        p[0] = make_uint4(v[0], v[1], v[2], v[3]);
        p[1] = make_uint4(v[4], v[5], v[6], v[7]);
    } else if constexpr (gp_width<F> == 16) {
        ((uint4 *)base)[g] = make_uint4(v[0] | v[1] << 16, v[2] | v[3] << 16, v[4] | v[5] << 16, v[6] | v[7] << 16);
    } else {
        ((uint2 *)base)[g] = make_uint2(v[0] | v[1] << 8 | v[2] << 16 | v[3] << 24,
                                        v[4] | v[5] << 8 | v[6] << 16 | v[7] << 24);
    }
}

/* One element: the shared step of kernels/arith, accumulator format AF and gradient
 * format GF fixed at compile time. */
template <int AF, int GF>
__device__ __forceinline__ uint32_t accum_one(const gp_plugin_accumulate_args &a, uint64_t i, uint32_t acc,
                                              uint32_t *comp, uint32_t grad_bits)
{
    gp_acc_rounding r = (gp_acc_rounding)a.rounding;
    uint32_t rb = r == GP_ACC_STOCHASTIC ? gp_rand_u32(a.seed, a.stream, a.first_index + i) : 0u;
    float g = gp_f32_from_bits(gp_fmt_to_f32_bits((gp_format)GF, grad_bits));
    return gp_accum_step((gp_format)AF, r, a.ftz, acc, comp, g, rb, (unsigned *)0);
}

/* Groups of GP_GROUP elements in n (the last one may be short). */
__host__ __device__ static inline uint64_t groups_of(uint64_t n)
{
    return (n + GP_GROUP - 1) / GP_GROUP;
}

/* Group g (< groups_of(a.n)) of one accumulation: elements 8g .. min(8g + 8, n) - 1.
 * A whole group goes through load8/store8 when the arrays allow it (vec), anything
 * else element by element; both apply accum_one, so the results are the same. */
template <int AF, int GF>
__device__ __forceinline__ void accum_group(const gp_plugin_accumulate_args &a, int vec, uint64_t g)
{
    constexpr gp_format gf = (gp_format)GF, af = (gp_format)AF;
    int kahan = a.rounding == GP_ACC_KAHAN;
    uint64_t i0 = g * GP_GROUP;
    if (vec && a.n - i0 >= GP_GROUP) {
        uint32_t acc[GP_GROUP], grad[GP_GROUP], comp[GP_GROUP] = {0, 0, 0, 0, 0, 0, 0, 0};
        load8<AF>(a.acc, g, acc);
        load8<GF>(a.grad, g, grad);
        if (kahan)
            load8<AF>(a.comp, g, comp);
        for (int k = 0; k < GP_GROUP; k++)
            acc[k] = accum_one<AF, GF>(a, i0 + (uint64_t)k, acc[k], &comp[k], grad[k]);
        store8<AF>(a.acc, g, acc);
        if (kahan)
            store8<AF>(a.comp, g, comp);
        return;
    }
    uint64_t end = a.n - i0 < GP_GROUP ? a.n : i0 + GP_GROUP;
    for (uint64_t i = i0; i < end; i++) {
        uint32_t comp = kahan ? gp_pack_get(af, a.comp, i) : 0u;
        uint32_t out = accum_one<AF, GF>(a, i, gp_pack_get(af, a.acc, i), &comp, gp_pack_get(gf, a.grad, i));
        gp_pack_set(af, a.acc, i, out);
        if (kahan)
            gp_pack_set(af, a.comp, i, comp);
    }
}

/* May accumulation a use the vector loads: acc, grad (and comp for Kahan) 16-byte aligned? */
static int vec_ok(const gp_plugin_accumulate_args *a)
{
    uintptr_t any = (uintptr_t)a->acc | (uintptr_t)a->grad | (a->rounding == GP_ACC_KAHAN ? (uintptr_t)a->comp : 0u);
    return (any & 15u) == 0;
}

/* One accumulation: thread t takes groups t, t + stride, ... */
template <int AF, int GF> __global__ void gp_accum_kernel(gp_plugin_accumulate_args a, int vec)
{
    uint64_t ngroups = groups_of(a.n), stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; g < ngroups; g += stride)
        accum_group<AF, GF>(a, vec, g);
}

/* The segments of one gp_accum_many_kernel launch (multi_tensor_apply's idea), all of
 * one pair of formats: segment s owns the global groups begin[s] .. begin[s + 1] - 1;
 * begin[count] is the total. */
typedef struct {
    gp_plugin_accumulate_args seg[GP_PLUGIN_MANY_MAX];
    int32_t vec[GP_PLUGIN_MANY_MAX]; /* vec_ok of each segment */
    uint64_t begin[GP_PLUGIN_MANY_MAX + 1];
    uint32_t count;                  /* 1 .. GP_PLUGIN_MANY_MAX */
} many_table;

/* Device scratch shared by all callers, used under g_mu: the segment table, unscale's
 * found flag, grad_sumsq's result. A caller fills, launches and reads back holding the
 * lock; the next copy to the device is ordered after that launch on the legacy default
 * stream, so it never overwrites what a running kernel reads. */
__device__ many_table gp_many;
__device__ int gp_found;
__device__ float gp_sumsq;
static many_table h_many; /* host side of gp_many */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* All segments of gp_many in one launch: each global group index is mapped to its
 * (segment, group) by a binary search over begin[], kept in shared memory. */
template <int AF, int GF> __global__ void gp_accum_many_kernel(void)
{
    __shared__ uint64_t begin[GP_PLUGIN_MANY_MAX + 1];
    uint32_t count = gp_many.count;
    for (uint32_t s = threadIdx.x; s <= count; s += blockDim.x)
        begin[s] = gp_many.begin[s];
    /* the table is complete */ __syncthreads();
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; g < begin[count]; g += stride) {
        uint32_t lo = 0, hi = count - 1; /* the last segment with begin <= g (empty ones share it) */
        while (lo < hi) {
            uint32_t mid = (lo + hi + 1) / 2;
            if (begin[mid] <= g)
                lo = mid;
            else
                hi = mid - 1;
        }
        accum_group<AF, GF>(gp_many.seg[lo], gp_many.vec[lo], g - begin[lo]);
    }
}

template <int AF> __global__ void gp_unscale_kernel(gp_plugin_unscale_args a)
{
    constexpr gp_format af = (gp_format)AF;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    int mine = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride)
        gp_pack_set(af, a.acc, i, gp_unscale_step(af, a.ftz, gp_pack_get(af, a.acc, i), a.inv_scale, &mine, (unsigned *)0));
    if (mine)
        atomicOr(&gp_found, 1);
}

/* One AdamW step per element (kernels/arith/gp_adamw.h, the CPU emulation's model);
 * found_inf is read on the device, so a skipped step needs no host synchronisation. */
template <int PF, int SF, int GF> __global__ void gp_adamw_kernel(gp_plugin_adamw_args a, gp_adamw_scalars s)
{
    gp_adamw_config cfg = {(gp_format)PF, (gp_format)SF, (gp_adamw_variant)a.variant,
                           a.rounding == GP_PLUGIN_STOCHASTIC ? GP_STOCHASTIC : GP_RNE,
                           (a.evaluation >= GP_PLUGIN_EVAL_TORCH_CUDA && a.evaluation <= GP_PLUGIN_EVAL_UNFUSED) ||
                                   a.evaluation == GP_PLUGIN_EVAL_TORCH_CUDA_FOREACH ||
                                   a.evaluation == GP_PLUGIN_EVAL_TORCH_CPU_FOREACH
                               ? (gp_adamw_eval)a.evaluation : GP_ADAMW_TORCH_CUDA, 0, 0};
    if (*a.found_inf)
        return;
    uint64_t tail = gp_adamw_fused_tail(cfg.param, a.n); /* GP_ADAMW_TORCH_FUSED_CPU's remainder */
    constexpr gp_format gf = (gp_format)GF, pf = (gp_format)PF, sf = (gp_format)SF;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride) {
        uint32_t master = a.master ? ((const uint32_t *)a.master)[i] : 0u;
        uint32_t comp = a.comp ? gp_pack_get(pf, a.comp, i) : 0u;
        uint32_t m = gp_pack_get(sf, a.m, i), v = gp_pack_get(sf, a.v, i);
        uint32_t rb = cfg.rounding == GP_STOCHASTIC ? gp_rand_u32(a.seed, a.stream, a.first_index + i) : 0u;
        float g = GP_FMUL_RN(gp_f32_from_bits(gp_fmt_to_f32_bits(gf, gp_pack_get(gf, a.grad, i))), a.inv_scale);
        cfg.tail = i >= tail;
        uint32_t p = gp_adamw_step(cfg, &s, gp_pack_get(pf, a.param, i), &master, &comp, &m, &v, g, 0, rb,
                                   (unsigned *)0, (unsigned *)0);
        gp_pack_set(pf, a.param, i, p);
        gp_pack_set(sf, a.m, i, m);
        gp_pack_set(sf, a.v, i, v);
        if (a.master)
            ((uint32_t *)a.master)[i] = master;
        if (a.comp)
            gp_pack_set(pf, a.comp, i, comp);
    }
}

/* AdamW with a low-bit state (kernels/arith/gp_lowbit_block.h, the CPU's functions): one
 * CUDA block of B threads per quantization block of B elements (B = the state's block,
 * 256 or 128: blockDim.x), thread j on element j. Each thread dequantizes its m and v,
 * steps its element and stores its param; the block's absmax of m' and of v' is a tree of
 * fmaxf in shared memory (exact, so equal to the CPU's loop; the final fmaxf with 0 is
 * the loop's start, and skips a NaN as the loop does); then each thread stores its codes,
 * thread 0 the two scales (every thread read the old ones before the first barrier). */
#define GP_LOWBIT_MAX_BLOCK 256
__device__ gp_lowbit_tables gp_lowbit_dev; /* the maps and bitsandbytes' tables (dev_adamw_lowbit) */
template <int PF, int GF> __global__ void gp_adamw_lowbit_kernel(gp_plugin_adamw_args a, gp_lowbit_step s)
{
    __shared__ float amax[2][GP_LOWBIT_MAX_BLOCK];
    constexpr gp_format pf = (gp_format)PF, gf = (gp_format)GF;
    if (*a.found_inf) /* the same for every thread */
        return;
    const gp_lowbit_tables *t = &gp_lowbit_dev;
    unsigned j = threadIdx.x, B = blockDim.x;
    uint64_t nb = a.n / B;
    for (uint64_t b = blockIdx.x; b < nb; b += gridDim.x) {
        uint64_t i = b * B + j;
        float m = gp_lowbit_value(t, s.f, 1, a.m_codes[i], a.m_scales[b]);
        float v = gp_lowbit_value(t, s.f, 0, a.v_codes[i], a.v_scales[b]);
        float g = gp_f32_from_bits(gp_fmt_to_f32_bits(gf, gp_pack_get(gf, a.grad, i)));
        float m1, v1;
        gp_pack_set(pf, a.param, i, gp_lowbit_param_step(&s, pf, gp_pack_get(pf, a.param, i), g, m, v, &m1, &v1));
        amax[0][j] = fabsf(m1);
        amax[1][j] = fabsf(v1);
        __syncthreads();
        for (unsigned h = B / 2; h > 0; h /= 2) {
            if (j < h) {
                amax[0][j] = fmaxf(amax[0][j], amax[0][j + h]);
                amax[1][j] = fmaxf(amax[1][j], amax[1][j + h]);
            }
            __syncthreads();
        }
        float sm = gp_lowbit_scale(s.f, fmaxf(0.0f, amax[0][0])), sv = gp_lowbit_scale(s.f, fmaxf(0.0f, amax[1][0]));
        a.m_codes[i] = gp_lowbit_code(t, s.f, 1, sm, m1);
        a.v_codes[i] = gp_lowbit_code(t, s.f, 0, sv, v1);
        if (j == 0) {
            a.m_scales[b] = sm;
            a.v_scales[b] = sv;
        }
        /* amax[.][0] read by all */ __syncthreads();
    }
}

/* Sum of squares, first pass: block b owns elements [2^14 b, 2^14 (b + 1)) and writes
 * their T (gp_clip.h) to partial[b], replaying the fixed tree ("GPU replay" there): each
 * of its 1024 threads squares its 16 consecutive elements and sums them pairwise
 * ((0+1)+(2+3))+..., out-of-range elements as +0; __shfl_xor_sync with lane masks 1, 2,
 * 4, 8, 16 combines adjacent threads (both lanes of a pair get the same sum: fp32
 * addition commutes bit for bit); warp 0 combines the 32 warp sums the same way. */
#define GP_SUMSQ_CHUNK 16384 /* 2^14 = GP_SUMSQ_THREADS x 16 */
#define GP_SUMSQ_THREADS 1024
template <int F> __global__ void gp_sumsq_chunk_kernel(uint64_t n, const void *grad, float *partial)
{
    __shared__ float warp_sum[GP_SUMSQ_THREADS / 32];
    constexpr gp_format f = (gp_format)F;
    unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    uint64_t i0 = (uint64_t)blockIdx.x * GP_SUMSQ_CHUNK + (uint64_t)threadIdx.x * 16;
    float s[16];
    if (i0 + 16 <= n && ((uintptr_t)grad & 15u) == 0) {
        uint32_t v[2 * GP_GROUP];
        load8<F>(grad, i0 / GP_GROUP, v);
        load8<F>(grad, i0 / GP_GROUP + 1, v + GP_GROUP);
        for (int k = 0; k < 16; k++)
            s[k] = gp_clip_square(f, v[k]);
    } else {
        for (int k = 0; k < 16; k++)
            s[k] = i0 + (uint64_t)k < n ? gp_clip_square(f, gp_pack_get(f, grad, i0 + (uint64_t)k)) : 0.0f;
    }
    for (int w = 1; w < 16; w *= 2)
        for (int k = 0; k < 16; k += 2 * w)
            s[k] = GP_FADD_RN(s[k], s[k + w]);
    float t = s[0];
    for (int lanes = 1; lanes < 32; lanes *= 2)
        t = GP_FADD_RN(t, __shfl_xor_sync(0xffffffffu, t, lanes));
    if (lane == 0)
        warp_sum[warp] = t;
    __syncthreads();
    if (warp == 0) {
        float u = warp_sum[lane];
        for (int m = 1; m < 32; m *= 2)
            u = GP_FADD_RN(u, __shfl_xor_sync(0xffffffffu, u, m));
        if (lane == 0)
            partial[blockIdx.x] = u;
    }
}

/* Second pass, one thread: T over the chunk sums, in order (gp_clip.h property 1). */
__global__ void gp_sumsq_tree_kernel(const float *partial, uint64_t chunks)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        gp_sumsq = gp_clip_tree_sum(partial, chunks);
}

template <int F> __global__ void gp_scale_kernel(gp_plugin_scale_args a)
{
    constexpr gp_format f = (gp_format)F;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride)
        gp_pack_set(f, a.grad, i, gp_clip_apply(f, a.ftz, gp_pack_get(f, a.grad, i), a.coef, (unsigned *)0));
}

__global__ void gp_scaler_kernel(float *scale, int32_t *tracker, const int32_t *found_inf, double growth,
                                 double backoff, int32_t interval)
{
    gp_scaler s = {*scale, *tracker};
    gp_scaler_update(&s, *found_inf, growth, backoff, interval);
    *scale = s.scale;
    *tracker = s.tracker;
}

/* ---- the device-memory table: every pointer in the arguments is a device pointer ---- */

#define GP_THREADS 256
#define GP_MAX_BLOCKS 1024

/* Blocks of GP_THREADS threads for `work` items of one thread each, at most
 * GP_MAX_BLOCKS (the kernels loop with a grid stride), at least 1. */
static unsigned blocks_for(uint64_t work)
{
    uint64_t b = (work + GP_THREADS - 1) / GP_THREADS;
    return b < 1 ? 1u : b > GP_MAX_BLOCKS ? (unsigned)GP_MAX_BLOCKS : (unsigned)b;
}

/* 0 when the launch just made was accepted, else -1. */
static int launched(void)
{
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

/* The kernel for formats (af, gf): 0 when launched, 1 for a format not supported, -1 when
 * the launch failed. */
template <typename Launch> static int with_formats(int32_t af, int32_t gf, Launch &&launch)
{
    int inner = 0, outer = gp_with_format(af, [&](auto A) {
        inner = gp_with_format(gf, [&](auto G) { launch(A, G); });
    });
    return outer != 0 || inner != 0 ? 1 : launched();
}

/* gp_cuda_refusal's sentence: set by dev_adamw on this thread (the staged call runs on
 * the caller's thread). */
static thread_local const char *t_refusal;

extern "C" const char *gp_cuda_refusal(void)
{
    return t_refusal;
}

/* Return 1 (not supported) with why as gp_cuda_refusal's sentence. */
static int refuse(const char *why)
{
    t_refusal = why;
    return 1;
}

static int dev_accumulate(const gp_plugin_accumulate_args *a)
{
    t_refusal = NULL;
    unsigned blocks = blocks_for(groups_of(a->n));
    int vec = vec_ok(a);
    return with_formats(a->acc_format, a->grad_format, [&](auto A, auto G) {
        gp_accum_kernel<decltype(A)::value, decltype(G)::value><<<blocks, GP_THREADS>>>(*a, vec);
    });
}

/* The segments in one launch per pair of formats (in the order their first segments
 * come): each pair's table goes to gp_many, then gp_accum_many_kernel for those formats. */
static int dev_accumulate_many(const gp_plugin_accumulate_args *a, uint32_t count)
{
    t_refusal = NULL;
    if (count == 0 || count > GP_PLUGIN_MANY_MAX)
        return count == 0 ? 0 : -1;
    unsigned char taken[GP_PLUGIN_MANY_MAX] = {0};
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    for (uint32_t first = 0; first < count && rc == 0; first++) {
        if (taken[first])
            continue;
        int32_t af = a[first].acc_format, gf = a[first].grad_format;
        uint64_t total = 0;
        uint32_t k = 0;
        for (uint32_t s = first; s < count; s++) {
            if (taken[s] || a[s].acc_format != af || a[s].grad_format != gf)
                continue;
            taken[s] = 1;
            h_many.seg[k] = a[s];
            h_many.vec[k] = vec_ok(&a[s]);
            h_many.begin[k] = total;
            total += groups_of(a[s].n);
            k++;
        }
        h_many.begin[k] = total;
        h_many.count = k;
        if (cudaMemcpyToSymbol(gp_many, &h_many, sizeof h_many) != cudaSuccess) {
            rc = -1;
            break;
        }
        rc = with_formats(af, gf, [&](auto A, auto G) {
            gp_accum_many_kernel<decltype(A)::value, decltype(G)::value><<<blocks_for(total), GP_THREADS>>>();
        });
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

static int dev_unscale(gp_plugin_unscale_args *a)
{
    t_refusal = NULL;
    int zero = 0, found = 0, rc = -1;
    pthread_mutex_lock(&g_mu);
    if (cudaMemcpyToSymbol(gp_found, &zero, sizeof zero) == cudaSuccess) {
        int launch = gp_with_format(a->acc_format, [&](auto A) {
            gp_unscale_kernel<decltype(A)::value><<<blocks_for(a->n), GP_THREADS>>>(*a);
        });
        if (launch != 0)
            rc = 1;
        else if (launched() == 0 && cudaMemcpyFromSymbol(&found, gp_found, sizeof found) == cudaSuccess)
            rc = 0;
    }
    pthread_mutex_unlock(&g_mu);
    if (found)
        a->found_inf = 1;
    return rc;
}

/* AdamW with a low-bit state (after dev_adamw's refusals): what the CPU backend refuses,
 * refused (gp_lowbit_plugin_refuses); the tables copied to the device at the first call;
 * the step's scalars computed here on the host (as the CPU does), then one launch. */
static int dev_adamw_lowbit(const gp_plugin_adamw_args *a, gp_adamw_eval ev)
{
    static int tables_ready; /* under g_mu */
    if (gp_lowbit_plugin_refuses(a))
        return refuse("a low-bit optimizer state with what its library does not have (a variant other than "
                      "plain, stochastic rounding, scaled gradients, another block)");
    gp_lowbit f = (gp_lowbit)a->state_quant;
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    if (!tables_ready) {
        gp_lowbit_tables *h = (gp_lowbit_tables *)malloc(sizeof *h);
        if (h) {
            gp_lowbit_tables_make(h);
            tables_ready = cudaMemcpyToSymbol(gp_lowbit_dev, h, sizeof *h) == cudaSuccess;
            free(h);
        }
        rc = tables_ready ? 0 : -1;
    }
    pthread_mutex_unlock(&g_mu);
    if (rc != 0)
        return rc;
    gp_lowbit_step s = gp_lowbit_step_make(f, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->step, ev);
    uint64_t nb = a->n / (uint64_t)a->block;
    unsigned blocks = nb < 1 ? 1u : nb > GP_MAX_BLOCKS ? (unsigned)GP_MAX_BLOCKS : (unsigned)nb;
    int rg = 0, rp = gp_with_format<GP_FMT_PARAM>(a->param_format, [&](auto P) {
        rg = gp_with_format(a->grad_format, [&](auto G) {
            gp_adamw_lowbit_kernel<decltype(P)::value, decltype(G)::value><<<blocks, (unsigned)a->block>>>(*a, s);
        });
    });
    return (rp | rg) != 0 ? 1 : launched();
}

/* The operation order a asks for (older callers: torch's CUDA order). */
static gp_adamw_eval eval_of(const gp_plugin_adamw_args *a)
{
    int known = a->struct_size >= offsetof(gp_plugin_adamw_args, evaluation) + sizeof a->evaluation;
    return known && a->evaluation >= GP_PLUGIN_EVAL_TORCH_CUDA && a->evaluation <= GP_PLUGIN_EVAL_TORCH_CPU_FOREACH
               ? (gp_adamw_eval)a->evaluation : GP_ADAMW_TORCH_CUDA;
}

static int dev_adamw(const gp_plugin_adamw_args *a)
{
    t_refusal = NULL;
    if (a->variant == GP_PLUGIN_ADAMW_TORCH_FUSED_CPU &&
        !gp_adamw_fused_ok((gp_format)a->param_format, (gp_format)a->state_format,
                           a->rounding == GP_PLUGIN_RNE ? GP_RNE : GP_STOCHASTIC, a->master || a->comp))
        return 1;
    /* torch's CPU sqrt on AMD Zen 4, Intel AVX-512 or this host (gp_torch_sqrt.h) is host code only */
    gp_adamw_eval ev = eval_of(a);
    if (ev == GP_ADAMW_TORCH_CPU_ZEN4 || ev == GP_ADAMW_TORCH_CPU_INTEL_AVX512 || ev == GP_ADAMW_TORCH_CPU_HOST)
        return refuse("optimizer.evaluation torch_cpu_zen4, torch_cpu_intel_avx512 and torch_cpu_host take torch's "
                      "CPU sqrt as MKL computes it, host code only: run them on the cpu backend");
    /* a low-bit optimizer state (kernels/cpu/gp_lowbit.h): the libraries' CPU steps */
    if (a->struct_size >= sizeof *a && a->state_quant != GP_PLUGIN_STATE_PLAIN)
        return dev_adamw_lowbit(a, ev);
    /* the scalars are host binary64 arithmetic (CPython's), as in torch */
    gp_adamw_scalars s = gp_adamw_scalars_make(a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, (long)a->step);
    unsigned blocks = blocks_for(a->n);
    int rs = 0, rg = 0, rp = gp_with_format<GP_FMT_PARAM>(a->param_format, [&](auto P) {
        rs = gp_with_format<GP_FMT_STATE>(a->state_format, [&](auto S) {
            rg = gp_with_format(a->grad_format, [&](auto G) {
                gp_adamw_kernel<decltype(P)::value, decltype(S)::value, decltype(G)::value><<<blocks, GP_THREADS>>>(*a, s);
            });
        });
    });
    int rc = rp | rs | rg;
    return rc != 0 ? 1 : launched();
}

/* Chunk sums into a device array (one block per chunk), then their tree: two launches. */
static int dev_grad_sumsq(gp_plugin_sumsq_args *a)
{
    t_refusal = NULL;
    uint64_t chunks = (a->n + GP_SUMSQ_CHUNK - 1) / GP_SUMSQ_CHUNK;
    float *partial = NULL;
    int rc = -1;
    pthread_mutex_lock(&g_mu);
    if (cudaMalloc((void **)&partial, (chunks ? chunks : 1) * sizeof *partial) == cudaSuccess) {
        int launch = chunks == 0 ? 0 : gp_with_format(a->format, [&](auto F) {
            gp_sumsq_chunk_kernel<decltype(F)::value><<<(unsigned)chunks, GP_SUMSQ_THREADS>>>(a->n, a->grad, partial);
        });
        if (launch != 0)
            rc = 1;
        else if (launched() == 0) {
            gp_sumsq_tree_kernel<<<1, 1>>>(partial, chunks);
            if (launched() == 0 && cudaMemcpyFromSymbol(&a->sumsq, gp_sumsq, sizeof a->sumsq) == cudaSuccess)
                rc = 0;
        }
        cudaFree(partial);
    } else {
        (void)cudaGetLastError();
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

static int dev_grad_scale(const gp_plugin_scale_args *a)
{
    t_refusal = NULL;
    int rc = gp_with_format(a->format, [&](auto F) {
        gp_scale_kernel<decltype(F)::value><<<blocks_for(a->n), GP_THREADS>>>(*a);
    });
    return rc != 0 ? 1 : launched();
}

static int dev_scaler_update(const gp_plugin_scaler_args *a)
{
    t_refusal = NULL;
    gp_scaler_kernel<<<1, 1>>>(a->scale, a->tracker, a->found_inf, a->growth, a->backoff, a->interval);
    return launched();
}

static const gp_plugin cuda_device_plugin = {
    GP_PLUGIN_ABI_VERSION, "cuda", GP_PLUGIN_DEVICE, dev_accumulate, dev_unscale, dev_adamw,
    dev_grad_sumsq, dev_grad_scale, dev_scaler_update, dev_accumulate_many,
};

extern "C" const gp_plugin *gp_cuda_device_plugin(void)
{
    return gp_cuda_device_count() > 0 ? &cuda_device_plugin : NULL;
}

static const gp_plugin *g_backend; /* set once by open_backend */

static void open_backend(void)
{
    const gp_plugin *dev = gp_cuda_device_plugin();
    g_backend = dev ? gp_cuda_stage_open(dev, NULL) : NULL;
}

extern "C" const gp_plugin *gp_cuda_backend(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, open_backend);
    return g_backend;
}
