/* cuda_runtime.h (host launch shim) — what a CUDA source needs from the toolkit, defined
 * for host C++, so that the .cu files of kernels/cuda and a user's plugin compile with g++ and run on
 * the CPU: qualifiers, built-in indices, vector types, atomics, barriers, intrinsics and
 * the runtime calls the sources use. Launches come through gp_shim_launch (written by
 * gp_shim_pp.py in place of <<< >>>). Not a GPU: see docs/cuda.md. */
#ifndef GP_SHIM_CUDA_RUNTIME_H
#define GP_SHIM_CUDA_RUNTIME_H

#ifndef __cplusplus
#error "the host shim compiles CUDA sources as C++"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <utility>

/* Kernel code compiled through the shim: kernels/arith takes the kernels' paths (CUDA's
 * intrinsics, which cuda_bf16.h / cuda_fp16.h here implement with gradprec's rounding). */
#define GP_SHIM_CUDA 1

/* ---- qualifiers ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
/* One block runs at a time (launches are serialised), so a function-local static is the
 * block's shared array; gp_shim_pp.py adds the call that poisons it before each block. */
#define __shared__ static

/* ---- vector types (CUDA's alignments: a misaligned vector access is UB here, which
 * UBSan reports, as the GPU faults on it) ---- */
#define GP_SHIM_VEC2(T, N, A) struct __attribute__((aligned(A))) N { T x, y; }; \
    static inline N make_##N(T x, T y) { N v; v.x = x; v.y = y; return v; }
#define GP_SHIM_VEC4(T, N, A) struct __attribute__((aligned(A))) N { T x, y, z, w; }; \
    static inline N make_##N(T x, T y, T z, T w) { N v; v.x = x; v.y = y; v.z = z; v.w = w; return v; }
GP_SHIM_VEC2(unsigned int, uint2, 8)
GP_SHIM_VEC4(unsigned int, uint4, 16)
GP_SHIM_VEC2(int, int2, 8)
GP_SHIM_VEC4(int, int4, 16)
GP_SHIM_VEC2(float, float2, 8)
GP_SHIM_VEC4(float, float4, 16)
GP_SHIM_VEC2(double, double2, 16)
GP_SHIM_VEC2(unsigned short, ushort2, 4)
GP_SHIM_VEC4(unsigned short, ushort4, 8)
GP_SHIM_VEC4(unsigned char, uchar4, 4)
GP_SHIM_VEC2(unsigned long long, ulonglong2, 16)
GP_SHIM_VEC2(long long, longlong2, 16)
struct uint3 { unsigned int x, y, z; };
struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

/* ---- the runtime's types ---- */
typedef enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidSymbol = 13,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorLaunchFailure = 719
} cudaError_t;
typedef cudaError_t cudaError;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};
typedef struct gp_shim_stream *cudaStream_t; /* every stream is the one queue: launches are synchronous */
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem, sharedMemPerBlock;
    int warpSize, maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], major, minor, multiProcessorCount;
};

/* ---- the shim's runtime (gp_shim.cpp, libgp_cudashim) ---- */
extern "C" {
/* Where the kernel runs: the current block and thread, set by the scheduler before
 * each fiber resumes. */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
extern const int warpSize;

/* Run body(ctx) once per thread of the grid (blocks in turn, each block's threads as
 * fibers, order per GP_SHIM_ORDER). Sets the launch error (cudaGetLastError). */
void gp_shim_run(const char *kernel, const char *file, int line, dim3 grid, dim3 block, size_t shmem,
                 void (*body)(void *), void *ctx);
/* __syncthreads: park this thread until every thread of the block arrives. */
void gp_shim_syncthreads(void);
/* A warp-level call (GP_SHIM_WARP_*): park this thread until every lane of `mask` waits
 * at the same call, then get the answer in *result: a shuffle copies `size` bytes of the
 * source lane's *value (arg: source lane, delta or lane mask; width: segment width), a
 * vote the unsigned ballot / any / all of the lanes' predicates (arg). */
void gp_shim_warp(int op, unsigned mask, const void *value, void *result, unsigned size, int arg, int width);
/* A __shared__ array is being declared by the running thread: poison it (0x5a bytes) if
 * it is the first time in this block. */
void gp_shim_shared_seen_raw(void *p, size_t bytes);
/* Device memory of `bytes` for a __device__ variable (zero-filled), named for messages. */
void *gp_shim_symbol_alloc(size_t bytes, size_t align, const char *name, const char *file, int line);
/* cudaMemcpyToSymbol (to_symbol 1: host -> symbol + offset) and FromSymbol (0). */
cudaError_t gp_shim_symbol_copy(const void *symbol, void *host, size_t count, size_t offset, int to_symbol);
/* gradprec's own rounding behind the intrinsics (kernels/arith/gp_format.h, gp_accum.h):
 * a + b rounded once toward zero; fp32 bits -> format (RNE, or RTZ when rtz), no FTZ;
 * format bits -> fp32 bits (exact). */
float gp_shim_fadd_rz(float a, float b);
unsigned gp_shim_fmt_from_f32(int format, unsigned f32_bits, int rtz);
unsigned gp_shim_fmt_to_f32(int format, unsigned bits);

cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaMemset(void *p, int value, size_t count);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int d);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
}

template <typename T> static inline cudaError_t cudaMalloc(T **p, size_t bytes)
{
    return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
template <typename T> static inline cudaError_t cudaMallocHost(T **p, size_t bytes)
{
    return cudaMallocHost(reinterpret_cast<void **>(p), bytes);
}
template <typename T>
static inline cudaError_t cudaMemcpyToSymbol(const T &symbol, const void *src, size_t count, size_t offset = 0,
                                             enum cudaMemcpyKind kind = cudaMemcpyHostToDevice)
{
    (void)kind;
    return gp_shim_symbol_copy(&symbol, const_cast<void *>(src), count, offset, 1);
}
template <typename T>
static inline cudaError_t cudaMemcpyFromSymbol(void *dst, const T &symbol, size_t count, size_t offset = 0,
                                               enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost)
{
    (void)kind;
    return gp_shim_symbol_copy(&symbol, dst, count, offset, 0);
}

/* A __device__ variable (gp_shim_pp.py writes `T &name = gp_shim_symbol<T>(...)`). */
template <typename T> static inline T &gp_shim_symbol(const char *name, const char *file, int line)
{
    return *static_cast<T *>(gp_shim_symbol_alloc(sizeof(T), alignof(T), name, file, line));
}
template <typename T> static inline void gp_shim_shared_seen(T *p, size_t bytes)
{
    gp_shim_shared_seen_raw(static_cast<void *>(p), bytes);
}

/* kernel<<<grid, block, shmem, stream>>>(args): each thread calls kernel with its own
 * copies of the arguments, converted to the parameter types as a call would. */
template <typename... P> struct gp_shim_launcher {
    void (*fn)(P...);
    const char *name, *file;
    int line;
    dim3 grid, block;
    size_t shmem;
    template <typename... A> void operator()(A &&...a) const
    {
        std::tuple<P...> args(std::forward<A>(a)...);
        struct call { void (*fn)(P...); std::tuple<P...> *args; } c = {fn, &args};
        gp_shim_run(name, file, line, grid, block, shmem,
                    [](void *p) { call *k = static_cast<call *>(p); std::apply(k->fn, *k->args); }, &c);
    }
};
template <typename... P>
static inline gp_shim_launcher<P...> gp_shim_launch(void (*fn)(P...), const char *name, const char *file, int line,
                                                    dim3 grid, dim3 block, size_t shmem = 0, cudaStream_t s = 0)
{
    (void)s;
    return gp_shim_launcher<P...>{fn, name, file, line, grid, block, shmem};
}

/* ---- barriers, warp-level calls, atomics (fibers of one block never run at once: a
 * plain read-modify-write is atomic) ---- */
static inline void __syncthreads(void) { gp_shim_syncthreads(); }
enum { GP_SHIM_WARP_IDX, GP_SHIM_WARP_UP, GP_SHIM_WARP_DOWN, GP_SHIM_WARP_XOR, GP_SHIM_WARP_BALLOT, GP_SHIM_WARP_ANY,
       GP_SHIM_WARP_ALL, GP_SHIM_WARP_SYNC };
/* The lanes of `mask` all reach the call before any returns (a warp-level barrier), as on
 * a GPU since Volta for the _sync forms; a lane of the mask that exits or waits elsewhere
 * fails the launch with a message. Shuffles: T of at most 8 bytes; a lane outside its
 * width segment (up, down, xor) gets its own value back. */
template <typename T> static inline T gp_shim_shfl(int op, unsigned mask, T var, int arg, int width)
{
    static_assert(sizeof(T) <= 8, "a shuffled value has at most 8 bytes");
    T r = var;
    gp_shim_warp(op, mask, &var, &r, sizeof(T), arg, width);
    return r;
}
template <typename T> static inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32)
{
    return gp_shim_shfl(GP_SHIM_WARP_IDX, mask, var, src_lane, width);
}
template <typename T> static inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32)
{
    return gp_shim_shfl(GP_SHIM_WARP_UP, mask, var, (int)delta, width);
}
template <typename T> static inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32)
{
    return gp_shim_shfl(GP_SHIM_WARP_DOWN, mask, var, (int)delta, width);
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32)
{
    return gp_shim_shfl(GP_SHIM_WARP_XOR, mask, var, lane_mask, width);
}
static inline unsigned gp_shim_vote(int op, unsigned mask, int pred)
{
    unsigned r = 0;
    gp_shim_warp(op, mask, NULL, &r, sizeof r, pred != 0, 32);
    return r;
}
static inline unsigned __ballot_sync(unsigned mask, int pred) { return gp_shim_vote(GP_SHIM_WARP_BALLOT, mask, pred); }
static inline int __any_sync(unsigned mask, int pred) { return (int)gp_shim_vote(GP_SHIM_WARP_ANY, mask, pred); }
static inline int __all_sync(unsigned mask, int pred) { return (int)gp_shim_vote(GP_SHIM_WARP_ALL, mask, pred); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)gp_shim_vote(GP_SHIM_WARP_SYNC, mask, 0); }
static inline void __threadfence(void) {}
template <typename T> static inline T atomicAdd(T *p, T v) { T o = *p; *p = o + v; return o; }
template <typename T> static inline T atomicSub(T *p, T v) { T o = *p; *p = o - v; return o; }
template <typename T> static inline T atomicOr(T *p, T v) { T o = *p; *p = o | v; return o; }
template <typename T> static inline T atomicAnd(T *p, T v) { T o = *p; *p = o & v; return o; }
template <typename T> static inline T atomicXor(T *p, T v) { T o = *p; *p = o ^ v; return o; }
template <typename T> static inline T atomicMax(T *p, T v) { T o = *p; *p = o < v ? v : o; return o; }
template <typename T> static inline T atomicMin(T *p, T v) { T o = *p; *p = v < o ? v : o; return o; }
template <typename T> static inline T atomicExch(T *p, T v) { T o = *p; *p = v; return o; }
template <typename T> static inline T atomicCAS(T *p, T cmp, T v) { T o = *p; if (o == cmp) *p = v; return o; }

/* ---- intrinsics: bit moves, and the IEEE binary32 operations (the host's SSE
 * arithmetic, no contraction); directed rounding through gradprec's own rounding ---- */
template <typename To, typename From> static inline To gp_shim_bit_cast(From v)
{
    static_assert(sizeof(To) == sizeof(From), "a bit move keeps the size");
    To t;
    memcpy(&t, &v, sizeof t);
    return t;
}
static inline unsigned int __float_as_uint(float f) { return gp_shim_bit_cast<unsigned int>(f); }
static inline float __uint_as_float(unsigned int u) { return gp_shim_bit_cast<float>(u); }
static inline int __float_as_int(float f) { return gp_shim_bit_cast<int>(f); }
static inline float __int_as_float(int u) { return gp_shim_bit_cast<float>(u); }
static inline long long __double_as_longlong(double d) { return gp_shim_bit_cast<long long>(d); }
static inline double __longlong_as_double(long long u) { return gp_shim_bit_cast<double>(u); }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
/* a + b rounded once toward zero: gradprec's fp32 accumulation step in that mode (the
 * exact sum by TwoSum, rounded by gp_fmt_from_f64). */
static inline float __fadd_rz(float a, float b) { return gp_shim_fadd_rz(a, b); }

#endif
