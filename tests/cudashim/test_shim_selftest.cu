/* test_shim_selftest.cu — the host launch shim checked on small kernels of its own
 * (compiled, like every CUDA source here, as host C++ through gp_shim_pp.py).
 * `ok`: barriers, the thread-order knob (GP_SHIM_ORDER), __device__ variables and their
 * copies, the garbage fill of fresh device memory, the copy range checks, a bad launch
 * configuration; exit 0 when all hold, 1 otherwise.
 * Also the warp-level calls (shuffles, votes) on kernels whose results are known by hand.
 * `read_past`, `read_past_small` (under GP_SHIM_TIGHT=1), `host_touch`,
 * `barrier_divergence`, `warp_exited`, `warp_outside_mask`:
 * each does the wrong thing once; the shim must stop it with a one-line message (the
 * CTest cases check the message). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                             \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                         \
        }                                                                       \
    } while (0)

#define N 256

__device__ unsigned ticket;
__device__ int counter[4];

/* out[t] = the value thread (t + 1) % n wrote before the barrier: right in every order. */
__global__ void rotate_kernel(unsigned *out)
{
    __shared__ unsigned buf[N];
    unsigned t = threadIdx.x;
    buf[t] = 1000u + t;
    __syncthreads();
    out[t] = buf[(t + 1) % blockDim.x];
}

/* out[t] = the order in which thread t started. */
__global__ void order_kernel(unsigned *out)
{
    out[threadIdx.x] = atomicAdd(&ticket, 1u);
}

__global__ void add_kernel(int by)
{
    for (int k = 0; k < 4; k++)
        counter[k] += by * (k + 1);
}

__global__ void read_past_kernel(const float *in, float *out, int n)
{
    if (threadIdx.x == 0)
        out[0] = in[n]; /* one element past the allocation */
}

__global__ void divergent_kernel(unsigned *out)
{
    if (threadIdx.x == 0)
        return; /* leaves before the barrier the others wait at */
    __syncthreads();
    out[threadIdx.x] = 1;
}

/* Warp-level calls, 8 results per thread in out[8t ..]: v = t + 1 in every lane. */
#define WARP_RESULTS 8
__global__ void warp_kernel(unsigned *out)
{
    unsigned t = threadIdx.x, lane = t % 32;
    unsigned v = t + 1, s = v, x = v;
    for (int off = 16; off > 0; off /= 2) /* tree reduction toward lane 0 */
        s += __shfl_down_sync(0xffffffffu, s, off);
    for (int m = 1; m < 32; m *= 2) /* butterfly: every lane gets the sum */
        x += __shfl_xor_sync(0xffffffffu, x, m);
    unsigned *o = out + WARP_RESULTS * t;
    o[0] = s;
    o[1] = x;
    o[2] = __shfl_sync(0xffffffffu, v, 5);        /* broadcast of lane 5 */
    o[3] = __shfl_up_sync(0xffffffffu, v, 1, 8);  /* from the lane below, within 8-lane segments */
    o[4] = __ballot_sync(0xffffffffu, lane % 3 == 0);
    o[5] = (unsigned)__any_sync(0xffffffffu, lane == 31) << 2 | (unsigned)__all_sync(0xffffffffu, lane < 31) << 1 |
           (unsigned)__all_sync(0xffffffffu, v > 0);
    float f = 0.25f * (float)lane;                /* 64-bit and float values move too */
    double d = (double)v * 1e10;
    o[6] = (unsigned)(__shfl_xor_sync(0xffffffffu, f, 16) * 4.0f);
    o[7] = lane < 16 ? (unsigned)(__shfl_down_sync(0x0000ffffu, d, 8, 16) / 1e10) : 0u; /* half a warp */
}

/* Lane 0 leaves before the shuffle the other lanes of its warp wait at. */
__global__ void warp_exited_kernel(unsigned *out)
{
    if (threadIdx.x == 0)
        return;
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, threadIdx.x, 1);
}

/* A shuffle over lanes 0..15 that reads lane 16. */
__global__ void warp_outside_mask_kernel(unsigned *out)
{
    if (threadIdx.x < 16)
        out[threadIdx.x] = __shfl_down_sync(0x0000ffffu, threadIdx.x, 8, 32);
}

static void check_warp(void)
{
    enum { T = 96 }; /* three warps */
    unsigned *d = NULL, h[WARP_RESULTS * T];
    (void)cudaGetLastError(); /* check_ok's last call left an error on purpose */
    CHECK(cudaMalloc((void **)&d, sizeof h) == cudaSuccess);
    warp_kernel<<<2, T>>>(d);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (unsigned t = 0; t < T; t++) {
        unsigned w = t / 32, lane = t % 32, v = t + 1, *o = h + WARP_RESULTS * t;
        unsigned warp_sum = 1024u * w + 528u; /* (32w + 1) + ... + (32w + 32) */
        if (lane == 0)
            CHECK(o[0] == warp_sum);
        CHECK(o[1] == warp_sum);
        CHECK(o[2] == 32u * w + 6u);
        CHECK(o[3] == (lane % 8 == 0 ? v : v - 1u));
        CHECK(o[4] == 0x49249249u); /* lanes 0, 3, ..., 30 */
        CHECK(o[5] == 5u);          /* any(lane 31) 1, all(lane < 31) 0, all(v > 0) 1 */
        CHECK(o[6] == (lane ^ 16u));
        CHECK(o[7] == (lane < 8 ? v + 8u : lane < 16 ? v : 0u)); /* lanes 8..15: their own value */
    }
    CHECK(cudaFree(d) == cudaSuccess);
}

static void check_ok(void)
{
    int ndev = 0;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceCount(&ndev) == cudaSuccess && ndev == 1);
    CHECK(cudaGetDeviceProperties(&prop, 0) == cudaSuccess && strstr(prop.name, "host shim"));

    unsigned *d = NULL, h[N];
    CHECK(cudaMalloc((void **)&d, N * sizeof *d) == cudaSuccess);
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(h[0] == 0xa5a5a5a5u && h[N - 1] == 0xa5a5a5a5u); /* fresh memory holds the garbage pattern */

    rotate_kernel<<<3, N>>>(d);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (unsigned t = 0; t < N; t++)
        CHECK(h[t] == 1000u + (t + 1) % N);

    unsigned zero = 0;
    CHECK(cudaMemcpyToSymbol(ticket, &zero, sizeof zero) == cudaSuccess);
    order_kernel<<<1, N>>>(d);
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
    const char *order = getenv("GP_SHIM_ORDER");
    unsigned in_place = 0, seen[N] = {0};
    for (unsigned t = 0; t < N; t++) {
        in_place += h[t] == t;
        if (h[t] < N)
            seen[h[t]]++;
    }
    for (unsigned t = 0; t < N; t++)
        CHECK(seen[t] == 1); /* a permutation */
    if (!order || strcmp(order, "forward") == 0)
        CHECK(in_place == N);
    else if (strcmp(order, "reverse") == 0)
        CHECK(h[0] == N - 1 && h[N - 1] == 0);
    else /* shuffled: a fixed point per thread has probability 1/N; 16 of 256 would be far off */
        CHECK(in_place < 16);
    printf("order %s: thread 0 started %u-th, thread %u started %u-th\n", order ? order : "(default)", h[0], N - 1,
           h[N - 1]);

    int c[4] = {1, 2, 3, 4}, back[4] = {0, 0, 0, 0};
    CHECK(cudaMemcpyToSymbol(counter, c, sizeof c) == cudaSuccess);
    add_kernel<<<1, 1>>>(10);
    CHECK(cudaMemcpyFromSymbol(back, counter, sizeof back) == cudaSuccess);
    CHECK(back[0] == 11 && back[1] == 22 && back[2] == 33 && back[3] == 44);
    CHECK(cudaMemcpyFromSymbol(back, counter, sizeof back, 4) == cudaErrorInvalidValue); /* past the symbol */

    CHECK(cudaMemcpy(h, d + 1, sizeof h, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue); /* past the end */
    CHECK(cudaMemcpy(d, h, sizeof h, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);     /* wrong direction */
    order_kernel<<<1, 2048>>>(d); /* more threads than a block holds */
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(cudaFree(d) == cudaSuccess);
    CHECK(cudaFree(d) == cudaErrorInvalidDevicePointer);
}

int main(int argc, char **argv)
{
    const char *what = argc == 2 ? argv[1] : "";
    if (strcmp(what, "ok") == 0) {
        check_ok();
        check_warp();
        printf("host shim self-test: %d failed checks\n", failures);
        return failures ? 1 : 0;
    }
    float *in = NULL, *out = NULL;
    if (strcmp(what, "read_past") == 0 || strcmp(what, "read_past_small") == 0) {
        int n = what[9] ? 1 : 1024; /* 4 bytes: inside the 256-byte slack unless GP_SHIM_TIGHT=1 */
        cudaMalloc((void **)&in, (size_t)n * sizeof *in);
        cudaMalloc((void **)&out, sizeof *out);
        read_past_kernel<<<1, 32>>>(in, out, n);
        cudaDeviceSynchronize();
        printf("read past the allocation went unnoticed\n");
        return 0;
    }
    if (strcmp(what, "host_touch") == 0) {
        cudaMalloc((void **)&in, 1024 * sizeof *in);
        printf("host reads device memory: %g\n", in[3]);
        return 0;
    }
    if (strcmp(what, "barrier_divergence") == 0) {
        unsigned *d = NULL;
        cudaMalloc((void **)&d, N * sizeof *d);
        divergent_kernel<<<1, N>>>(d);
        cudaError_t e = cudaDeviceSynchronize();
        printf("after the divergent barrier: %s\n", cudaGetErrorName(e));
        return e == cudaSuccess ? 0 : 1;
    }
    if (strcmp(what, "warp_exited") == 0 || strcmp(what, "warp_outside_mask") == 0) {
        unsigned *d = NULL;
        cudaMalloc((void **)&d, N * sizeof *d);
        if (what[5] == 'e')
            warp_exited_kernel<<<1, 64>>>(d);
        else
            warp_outside_mask_kernel<<<1, 32>>>(d);
        cudaError_t e = cudaDeviceSynchronize();
        printf("after the warp-level call: %s\n", cudaGetErrorName(e));
        return e == cudaSuccess ? 0 : 1;
    }
    fprintf(stderr, "usage: test_shim_selftest ok|read_past|read_past_small|host_touch|barrier_divergence|warp_exited|"
            "warp_outside_mask\n");
    return 2;
}
