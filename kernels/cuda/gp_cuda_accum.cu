/* gp_cuda_accum.cu — the CUDA backend: accumulate and unscale kernels over the
 * per-element steps of kernels/arith/gp_accum.h (the code the CPU emulation runs),
 * behind the host-memory gp_plugin interface: each call copies its arrays to the
 * device, launches, and copies back. Random bits: Philox(seed, stream, element).
 * Build: part of gradprec_core when nvcc is found (--fmad=false, sm_80/sm_90).
 * Run:   gradprec run --backend cuda (needs a device). */
#include <cuda_runtime.h>

#include "../arith/gp_accum.h"
#include "../arith/gp_philox.h"
#include "gp_cuda.h"

__global__ void gp_accum_kernel(gp_plugin_accumulate_args a)
{
    gp_format gf = (gp_format)a.grad_format, af = (gp_format)a.acc_format;
    gp_acc_rounding r = (gp_acc_rounding)a.rounding;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride) {
        uint32_t rb = r == GP_ACC_STOCHASTIC ? gp_rand_u32(a.seed, a.stream, a.first_index + i) : 0u;
        uint32_t comp = r == GP_ACC_KAHAN ? gp_pack_get(af, a.comp, i) : 0u;
        float g = gp_f32_from_bits(gp_fmt_to_f32_bits(gf, gp_pack_get(gf, a.grad, i)));
        uint32_t out = gp_accum_step(af, r, a.ftz, gp_pack_get(af, a.acc, i), &comp, g, rb, (unsigned *)0);
        gp_pack_set(af, a.acc, i, out);
        if (r == GP_ACC_KAHAN)
            gp_pack_set(af, a.comp, i, comp);
    }
}

__global__ void gp_unscale_kernel(gp_plugin_unscale_args a, int *found)
{
    gp_format af = (gp_format)a.acc_format;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    int mine = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride)
        gp_pack_set(af, a.acc, i, gp_unscale_step(af, a.ftz, gp_pack_get(af, a.acc, i), a.inv_scale, &mine, (unsigned *)0));
    if (mine)
        atomicOr(found, 1);
}

static size_t bytes_of(int32_t fmt, uint64_t n)
{
    return (size_t)n * (size_t)(gp_fmt_get((gp_format)fmt).width / 8);
}

/* Copy a host array to a fresh device buffer (or just allocate when src is NULL). */
static int to_device(void **dst, const void *src, size_t bytes)
{
    if (cudaMalloc(dst, bytes ? bytes : 1) != cudaSuccess)
        return -1;
    if (src && cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        return -1;
    return 0;
}

static int cuda_accumulate(const gp_plugin_accumulate_args *h)
{
    gp_plugin_accumulate_args d = *h;
    void *g = NULL, *acc = NULL, *comp = NULL;
    size_t gb = bytes_of(h->grad_format, h->n), ab = bytes_of(h->acc_format, h->n);
    int rc = -1;
    if (to_device(&g, h->grad, gb) || to_device(&acc, h->acc, ab) ||
        (h->comp && to_device(&comp, h->comp, ab)))
        goto done;
    d.grad = g;
    d.acc = acc;
    d.comp = comp;
    gp_accum_kernel<<<1024, 256>>>(d);
    if (cudaGetLastError() != cudaSuccess ||
        cudaMemcpy(h->acc, acc, ab, cudaMemcpyDeviceToHost) != cudaSuccess ||
        (h->comp && cudaMemcpy(h->comp, comp, ab, cudaMemcpyDeviceToHost) != cudaSuccess))
        goto done;
    rc = 0;
done:
    cudaFree(g);
    cudaFree(acc);
    cudaFree(comp);
    return rc;
}

static int cuda_unscale(gp_plugin_unscale_args *h)
{
    gp_plugin_unscale_args d = *h;
    void *acc = NULL;
    int *found = NULL, f = 0;
    size_t ab = bytes_of(h->acc_format, h->n);
    int rc = -1;
    if (to_device(&acc, h->acc, ab) || cudaMalloc((void **)&found, sizeof *found) != cudaSuccess ||
        cudaMemset(found, 0, sizeof *found) != cudaSuccess)
        goto done;
    d.acc = acc;
    gp_unscale_kernel<<<1024, 256>>>(d, found);
    if (cudaGetLastError() != cudaSuccess ||
        cudaMemcpy(h->acc, acc, ab, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(&f, found, sizeof f, cudaMemcpyDeviceToHost) != cudaSuccess)
        goto done;
    if (f)
        h->found_inf = 1;
    rc = 0;
done:
    cudaFree(acc);
    cudaFree(found);
    return rc;
}

static const gp_plugin cuda_plugin = {
    GP_PLUGIN_ABI_VERSION, "cuda", GP_PLUGIN_HOST, cuda_accumulate, cuda_unscale,
};

extern "C" const gp_plugin *gp_cuda_backend(void)
{
    return gp_cuda_device_count() > 0 ? &cuda_plugin : NULL;
}
