/* test_shim_selftest.cu — the host launch shim checked on small kernels of its own
 * (compiled, like every CUDA source here, as host C++ through gp_shim_pp.py).
 * `ok`: barriers, the thread-order knob (GP_SHIM_ORDER), __device__ variables and their
 * copies, the garbage fill of fresh device memory, the copy range checks, a bad launch
 * configuration; exit 0 when all hold, 1 otherwise.
 * `read_past`, `host_touch`, `barrier_divergence`: each does the wrong thing once; the
 * shim must stop it with a one-line message (the CTest cases check the message). */
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
        printf("host shim self-test: %d failed checks\n", failures);
        return failures ? 1 : 0;
    }
    float *in = NULL, *out = NULL;
    if (strcmp(what, "read_past") == 0) {
        cudaMalloc((void **)&in, 1024 * sizeof *in);
        cudaMalloc((void **)&out, sizeof *out);
        read_past_kernel<<<1, 32>>>(in, out, 1024);
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
    fprintf(stderr, "usage: test_shim_selftest ok|read_past|host_touch|barrier_divergence\n");
    return 2;
}
