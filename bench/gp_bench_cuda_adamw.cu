/* gp_bench_cuda_adamw.cu — GPU benchmark (needs an NVIDIA GPU; scripts/gpu-check.sh runs
 * it): the fused AdamW kernel of kernels/cuda (gp_cuda_device_plugin()->adamw: fp32
 * params, m, v and grads, GP_ADAMW_ONE_STORE, RNE, one launch per step) against a
 * device-to-device cudaMemcpy on the same device, measured in one run with CUDA events.
 * Bandwidth counts the bytes each must move: AdamW reads param, m, v, grad and writes
 * param, m, v (28 bytes per element); a copy of B bytes reads and writes B (2B). Prints
 * one Markdown table (and the ratio AdamW / copy) on stdout; each timing is the best of
 * 5 rounds of 20 steps (or copies). Exit 77 without a device, 2 on bad usage.
 * Usage: gp_bench_cuda_adamw [ELEMENTS]   (default 2^26) */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gp_cuda.h"

#define ROUNDS 5
#define STEPS 20

#define TRY(call)                                                                      \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* Milliseconds of the fastest of ROUNDS rounds of run(ctx) (which enqueues STEPS operations). */
static float best_ms(void (*run)(void *), void *ctx)
{
    cudaEvent_t a, b;
    TRY(cudaEventCreate(&a));
    TRY(cudaEventCreate(&b));
    run(ctx); /* warm-up */
    TRY(cudaDeviceSynchronize());
    float best = -1.0f;
    for (int r = 0; r < ROUNDS; r++) {
        TRY(cudaEventRecord(a));
        run(ctx);
        TRY(cudaEventRecord(b));
        TRY(cudaEventSynchronize(b));
        float ms = 0.0f;
        TRY(cudaEventElapsedTime(&ms, a, b));
        if (best < 0.0f || ms < best)
            best = ms;
    }
    TRY(cudaEventDestroy(a));
    TRY(cudaEventDestroy(b));
    return best;
}

typedef struct {
    const gp_plugin *dev;
    gp_plugin_adamw_args args;
    void *src, *dst;
    size_t bytes;
} bench;

static void run_adamw(void *p)
{
    bench *b = (bench *)p;
    for (int s = 0; s < STEPS; s++) {
        b->args.step = s + 1;
        if (b->dev->adamw(&b->args) != 0) {
            fprintf(stderr, "gp_bench_cuda_adamw: the AdamW launch failed\n");
            exit(1);
        }
    }
}

static void run_copy(void *p)
{
    bench *b = (bench *)p;
    for (int s = 0; s < STEPS; s++)
        TRY(cudaMemcpyAsync(b->dst, b->src, b->bytes, cudaMemcpyDeviceToDevice, 0));
}

/* Device memory of n fp32 values, all `value`. */
static float *device_floats(size_t n, float value)
{
    float *h = (float *)malloc(n * sizeof *h), *d = NULL;
    if (!h) {
        fprintf(stderr, "gp_bench_cuda_adamw: out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        h[i] = value;
    TRY(cudaMalloc((void **)&d, n * sizeof *d));
    TRY(cudaMemcpy(d, h, n * sizeof *d, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

int main(int argc, char **argv)
{
    size_t n = (size_t)1 << 26;
    if (argc > 2 || (argc == 2 && (n = strtoull(argv[1], NULL, 10)) == 0)) {
        fprintf(stderr, "usage: gp_bench_cuda_adamw [ELEMENTS > 0]\n");
        return 2;
    }
    const gp_plugin *dev = gp_cuda_device_plugin();
    if (!dev) {
        printf("gp_bench_cuda_adamw: no CUDA device: nothing measured\n");
        return 77;
    }
    cudaDeviceProp prop;
    TRY(cudaGetDeviceProperties(&prop, 0));
    int32_t *found = NULL, zero = 0;
    TRY(cudaMalloc((void **)&found, sizeof *found));
    TRY(cudaMemcpy(found, &zero, sizeof zero, cudaMemcpyHostToDevice));
    bench b;
    memset(&b, 0, sizeof b);
    b.dev = dev;
    gp_plugin_adamw_args *a = &b.args;
    a->struct_size = sizeof *a;
    a->param_format = GP_PLUGIN_FP32;
    a->state_format = GP_PLUGIN_FP32;
    a->grad_format = GP_PLUGIN_FP32;
    a->variant = GP_PLUGIN_ADAMW_ONE_STORE;
    a->rounding = GP_PLUGIN_RNE;
    a->lr = 1e-3;
    a->beta1 = 0.9;
    a->beta2 = 0.999;
    a->eps = 1e-8;
    a->weight_decay = 1e-2;
    a->inv_scale = 1.0f;
    a->found_inf = found;
    a->n = n;
    a->param = device_floats(n, 1.0f);
    a->m = device_floats(n, 0.0f);
    a->v = device_floats(n, 0.0f);
    a->grad = device_floats(n, 1e-3f);
    b.bytes = 7 * n * sizeof(float) / 2; /* a copy moving as many bytes as a step (2B = 28n) */
    TRY(cudaMalloc(&b.src, b.bytes));
    TRY(cudaMalloc(&b.dst, b.bytes));
    TRY(cudaMemset(b.src, 0, b.bytes));

    float adamw_ms = best_ms(run_adamw, &b), copy_ms = best_ms(run_copy, &b);
    double moved = 28.0 * (double)n * STEPS; /* bytes per round, both */
    double adamw_gbs = moved / (adamw_ms * 1e-3) / 1e9, copy_gbs = moved / (copy_ms * 1e-3) / 1e9;
    printf("| measurement (%s, %zu fp32 elements, best of %d x %d) | GB/s |\n", prop.name, n, ROUNDS, STEPS);
    printf("|---|---|\n");
    printf("| gradprec fused AdamW kernel (28 bytes/element) | %.1f |\n", adamw_gbs);
    printf("| device-to-device cudaMemcpy (same bytes) | %.1f |\n", copy_gbs);
    printf("| **AdamW / copy** | **%.3f** |\n", adamw_gbs / copy_gbs);
    cudaFree(b.src);
    cudaFree(b.dst);
    cudaFree(a->param);
    cudaFree(a->m);
    cudaFree(a->v);
    cudaFree((void *)a->grad);
    cudaFree(found);
    return 0;
}
