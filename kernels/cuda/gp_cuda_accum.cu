/* gp_cuda_accum.cu — the CUDA backend: accumulate, unscale and AdamW kernels over the
 * per-element steps of kernels/arith/gp_accum.h (the code the CPU emulation runs),
 * reading and writing 8 elements at a time with 16-byte vector transactions,
 * behind the host-memory gp_plugin interface: each call copies its arrays to the
 * device, launches, and copies back. Random bits: Philox(seed, stream, element).
 * Build: part of gradprec_core when nvcc is found (--fmad=false, sm_80/sm_90).
 * Run:   gradprec run --backend cuda (needs a device). */
#include <cuda_runtime.h>

#include "../arith/gp_accum.h"
#include "../arith/gp_adamw.h"
#include "../arith/gp_clip.h"
#include "../arith/gp_scaler.h"
#include "../arith/gp_philox.h"
#include "gp_cuda.h"

/* Eight packed elements of format f starting at element 8*g, loaded with 16-byte
 * (uint4) transactions — two for fp32, one for bf16/fp16, an 8-byte one for fp8. The
 * base must be 16-byte aligned (cudaMalloc's is). */
#define GP_GROUP 8
__device__ __forceinline__ void load8(gp_format f, const void *base, uint64_t g, uint32_t v[GP_GROUP])
{
    switch (gp_fmt_get(f).width) {
    case 32: {
        const uint4 *p = (const uint4 *)base + 2 * g;
        uint4 a = p[0], b = p[1];
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
        v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
        break;
    }
    case 16: {
        uint4 a = ((const uint4 *)base)[g];
        uint32_t w[4] = {a.x, a.y, a.z, a.w};
        for (int k = 0; k < 4; k++) {
            v[2 * k] = w[k] & 0xffffu;
            v[2 * k + 1] = w[k] >> 16;
        }
        break;
    }
    default: {
        uint2 a = ((const uint2 *)base)[g];
        for (int k = 0; k < 4; k++) {
            v[k] = (a.x >> (8 * k)) & 0xffu;
            v[4 + k] = (a.y >> (8 * k)) & 0xffu;
        }
        break;
    }
    }
}

__device__ __forceinline__ void store8(gp_format f, void *base, uint64_t g, const uint32_t v[GP_GROUP])
{
    switch (gp_fmt_get(f).width) {
    case 32: {
        uint4 *p = (uint4 *)base + 2 * g;
        p[0] = make_uint4(v[0], v[1], v[2], v[3]);
        p[1] = make_uint4(v[4], v[5], v[6], v[7]);
        break;
    }
    case 16:
        ((uint4 *)base)[g] = make_uint4(v[0] | v[1] << 16, v[2] | v[3] << 16, v[4] | v[5] << 16, v[6] | v[7] << 16);
        break;
    default:
        ((uint2 *)base)[g] = make_uint2(v[0] | v[1] << 8 | v[2] << 16 | v[3] << 24,
                                        v[4] | v[5] << 8 | v[6] << 16 | v[7] << 24);
        break;
    }
}

/* One element: the shared step of kernels/arith (the CPU emulation runs the same). */
__device__ __forceinline__ uint32_t accum_one(const gp_plugin_accumulate_args &a, uint64_t i, uint32_t acc,
                                              uint32_t *comp, uint32_t grad_bits)
{
    gp_acc_rounding r = (gp_acc_rounding)a.rounding;
    uint32_t rb = r == GP_ACC_STOCHASTIC ? gp_rand_u32(a.seed, a.stream, a.first_index + i) : 0u;
    float g = gp_f32_from_bits(gp_fmt_to_f32_bits((gp_format)a.grad_format, grad_bits));
    return gp_accum_step((gp_format)a.acc_format, r, a.ftz, acc, comp, g, rb, (unsigned *)0);
}

/* Each thread takes groups of 8 elements with vector loads and stores; the last n % 8
 * elements are done one by one. */
__global__ void gp_accum_kernel(gp_plugin_accumulate_args a)
{
    gp_format gf = (gp_format)a.grad_format, af = (gp_format)a.acc_format;
    int kahan = a.rounding == GP_ACC_KAHAN;
    uint64_t ngroups = a.n / GP_GROUP;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (uint64_t g = tid; g < ngroups; g += stride) {
        uint32_t acc[GP_GROUP], grad[GP_GROUP], comp[GP_GROUP] = {0, 0, 0, 0, 0, 0, 0, 0};
        load8(af, a.acc, g, acc);
        load8(gf, a.grad, g, grad);
        if (kahan)
            load8(af, a.comp, g, comp);
        for (int k = 0; k < GP_GROUP; k++)
            acc[k] = accum_one(a, g * GP_GROUP + (uint64_t)k, acc[k], &comp[k], grad[k]);
        store8(af, a.acc, g, acc);
        if (kahan)
            store8(af, a.comp, g, comp);
    }
    for (uint64_t i = ngroups * GP_GROUP + tid; i < a.n; i += stride) {
        uint32_t comp = kahan ? gp_pack_get(af, a.comp, i) : 0u;
        uint32_t out = accum_one(a, i, gp_pack_get(af, a.acc, i), &comp, gp_pack_get(gf, a.grad, i));
        gp_pack_set(af, a.acc, i, out);
        if (kahan)
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

/* One AdamW step per element (kernels/arith/gp_adamw.h, the CPU emulation's code);
 * found_inf is read on the device, so a skipped step needs no host synchronisation. */
__global__ void gp_adamw_kernel(gp_plugin_adamw_args a, gp_adamw_scalars s)
{
    gp_adamw_config cfg = {(gp_format)a.param_format, (gp_format)a.state_format, (gp_adamw_variant)a.variant,
                           a.rounding == GP_PLUGIN_STOCHASTIC ? GP_STOCHASTIC : GP_RNE, GP_ADAMW_TORCH_CUDA};
    if (*a.found_inf)
        return;
    gp_format gf = (gp_format)a.grad_format, pf = cfg.param, sf = cfg.state;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride) {
        uint32_t master = a.master ? ((const uint32_t *)a.master)[i] : 0u;
        uint32_t comp = a.comp ? gp_pack_get(pf, a.comp, i) : 0u;
        uint32_t m = gp_pack_get(sf, a.m, i), v = gp_pack_get(sf, a.v, i);
        uint32_t rb = cfg.rounding == GP_STOCHASTIC ? gp_rand_u32(a.seed, a.stream, a.first_index + i) : 0u;
        float g = gp_f32_from_bits(gp_fmt_to_f32_bits(gf, gp_pack_get(gf, a.grad, i))) * a.inv_scale;
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

static int cuda_adamw(const gp_plugin_adamw_args *h)
{
    gp_plugin_adamw_args d = *h;
    void *g = NULL, *p = NULL, *ma = NULL, *c = NULL, *m = NULL, *v = NULL, *fi = NULL;
    size_t pb = bytes_of(h->param_format, h->n), sb = bytes_of(h->state_format, h->n);
    int rc = -1;
    /* the scalars are host binary64 arithmetic (CPython's), as in torch */
    gp_adamw_scalars s = gp_adamw_scalars_make(h->lr, h->beta1, h->beta2, h->eps, h->weight_decay, (long)h->step);
    if (to_device(&g, h->grad, bytes_of(h->grad_format, h->n)) || to_device(&p, h->param, pb) ||
        (h->master && to_device(&ma, h->master, 4 * (size_t)h->n)) || (h->comp && to_device(&c, h->comp, pb)) ||
        to_device(&m, h->m, sb) || to_device(&v, h->v, sb) || to_device(&fi, h->found_inf, sizeof(int32_t)))
        goto done;
    d.grad = g;
    d.param = p;
    d.master = ma;
    d.comp = c;
    d.m = m;
    d.v = v;
    d.found_inf = (const int32_t *)fi;
    gp_adamw_kernel<<<1024, 256>>>(d, s);
    if (cudaGetLastError() != cudaSuccess || cudaMemcpy(h->param, p, pb, cudaMemcpyDeviceToHost) != cudaSuccess ||
        (h->master && cudaMemcpy(h->master, ma, 4 * (size_t)h->n, cudaMemcpyDeviceToHost) != cudaSuccess) ||
        (h->comp && cudaMemcpy(h->comp, c, pb, cudaMemcpyDeviceToHost) != cudaSuccess) ||
        cudaMemcpy(h->m, m, sb, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(h->v, v, sb, cudaMemcpyDeviceToHost) != cudaSuccess)
        goto done;
    rc = 0;
done:
    cudaFree(g);
    cudaFree(p);
    cudaFree(ma);
    cudaFree(c);
    cudaFree(m);
    cudaFree(v);
    cudaFree(fi);
    return rc;
}

/* The fixed tree of gp_clip.h run by one thread: the exact order, not a fast block
 * reduction (a block tree replaying it is described in gp_clip.h; not written yet). */
__global__ void gp_sumsq_kernel(int32_t format, uint64_t n, const void *grad, float *out)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *out = gp_clip_sumsq((gp_format)format, grad, n);
}

__global__ void gp_scale_kernel(gp_plugin_scale_args a)
{
    gp_format f = (gp_format)a.format;
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

static int cuda_grad_sumsq(gp_plugin_sumsq_args *h)
{
    void *g = NULL, *out = NULL;
    int rc = -1;
    if (to_device(&g, h->grad, bytes_of(h->format, h->n)) || to_device(&out, NULL, sizeof(float)))
        goto done;
    gp_sumsq_kernel<<<1, 1>>>(h->format, h->n, g, (float *)out);
    if (cudaGetLastError() != cudaSuccess || cudaMemcpy(&h->sumsq, out, sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
        goto done;
    rc = 0;
done:
    cudaFree(g);
    cudaFree(out);
    return rc;
}

static int cuda_grad_scale(const gp_plugin_scale_args *h)
{
    gp_plugin_scale_args d = *h;
    void *g = NULL;
    size_t b = bytes_of(h->format, h->n);
    int rc = -1;
    if (to_device(&g, h->grad, b))
        goto done;
    d.grad = g;
    gp_scale_kernel<<<1024, 256>>>(d);
    if (cudaGetLastError() != cudaSuccess || cudaMemcpy(h->grad, g, b, cudaMemcpyDeviceToHost) != cudaSuccess)
        goto done;
    rc = 0;
done:
    cudaFree(g);
    return rc;
}

static int cuda_scaler_update(const gp_plugin_scaler_args *h)
{
    void *sc = NULL, *tr = NULL, *fi = NULL;
    int rc = -1;
    if (to_device(&sc, h->scale, sizeof(float)) || to_device(&tr, h->tracker, sizeof(int32_t)) ||
        to_device(&fi, h->found_inf, sizeof(int32_t)))
        goto done;
    gp_scaler_kernel<<<1, 1>>>((float *)sc, (int32_t *)tr, (const int32_t *)fi, h->growth, h->backoff, h->interval);
    if (cudaGetLastError() != cudaSuccess || cudaMemcpy(h->scale, sc, sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(h->tracker, tr, sizeof(int32_t), cudaMemcpyDeviceToHost) != cudaSuccess)
        goto done;
    rc = 0;
done:
    cudaFree(sc);
    cudaFree(tr);
    cudaFree(fi);
    return rc;
}

static const gp_plugin cuda_plugin = {
    GP_PLUGIN_ABI_VERSION, "cuda", GP_PLUGIN_HOST, cuda_accumulate, cuda_unscale, cuda_adamw,
    cuda_grad_sumsq, cuda_grad_scale, cuda_scaler_update,
};

extern "C" const gp_plugin *gp_cuda_backend(void)
{
    return gp_cuda_device_count() > 0 ? &cuda_plugin : NULL;
}
