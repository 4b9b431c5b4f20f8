/* gp_example_cuda_plugin.cu — an example of a user's own CUDA kernels under test, as a
 * device-memory plugin (memory = GP_PLUGIN_DEVICE): gradprec gives it device pointers
 * (its staging adapter copies the runner's host arrays in and out) and it launches its
 * own kernels, written the way a team would write them (no gradprec arithmetic reused):
 * fp32 adds, bf16 and fp16 rounding by the usual bit tricks, AdamW as torch's CUDA
 * kernels compute it. It supports accumulation with round-to-nearest-even, toward zero
 * or Kahan compensation, fp32 / bf16 / fp16 gradients and accumulators; unscale; and
 * AdamW with round-to-nearest-even stores (fp32 / bf16 / fp16 params and state; plain,
 * one-store, fp32 master and Kahan variants). It returns 1 for anything else (FTZ,
 * stochastic rounding, fp8) and leaves the optional clipping and scaler entries NULL
 * (gradprec's CPU emulation does those, and the report says so).
 *
 * Build (CMake builds it into build/examples/plugins/ when the CUDA backend is built):
 *   nvcc -O2 --fmad=false -Xcompiler -fPIC -shared -I<gradprec>/kernels gp_example_cuda_plugin.cu -o libmine.so
 * --fmad=false matters: a contracted multiply-add rounds once where torch rounds twice.
 * Run:
 *   build/gradprec run --backend plugin:build/examples/plugins/libgp_example_cuda_plugin.so --compare cpu */
#include <cuda_runtime.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "gp_example_formats.h" /* bf16/fp16 <-> fp32, rne (shared with the C example) */
#include "gp_plugin_abi.h"

static __device__ uint16_t f32_to_bf16_rtz(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN */
    return (uint16_t)(u >> 16);                /* truncation: never above max finite */
}

static __device__ uint16_t f32_to_f16_rtz(float f)
{
    uint32_t u = __float_as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));     /* NaN, quiet */
    if (a == 0x7f800000u)
        return (uint16_t)(sign | 0x7c00u);                              /* inf */
    if (a >= 0x47800000u)
        return (uint16_t)(sign | 0x7bffu);                              /* >= 65536: max finite */
    if (a >= 0x38800000u)
        return (uint16_t)(sign | ((a - 0x38000000u) >> 13));            /* rebias, truncate */
    return (uint16_t)(sign | (uint32_t)(__uint_as_float(a) * 16777216.0f)); /* |f| / 2^-24, truncated */
}

static __device__ float load(int32_t fmt, const void *p, uint64_t i)
{
    switch (fmt) {
    case GP_PLUGIN_FP32: return ((const float *)p)[i];
    case GP_PLUGIN_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    default: return f16_to_f32(((const uint16_t *)p)[i]);
    }
}

static __device__ void store(int32_t fmt, void *p, uint64_t i, float v)
{
    switch (fmt) {
    case GP_PLUGIN_FP32: ((float *)p)[i] = v; break;
    case GP_PLUGIN_BF16: ((uint16_t *)p)[i] = f32_to_bf16(v); break;
    default: ((uint16_t *)p)[i] = f32_to_f16(v); break;
    }
}

/* fp32 value -> storage format -> fp32: what writing a float result into a tensor of
 * that dtype and reading it back gives. */
static __device__ float round_to(int32_t fmt, float v)
{
    switch (fmt) {
    case GP_PLUGIN_FP32: return v;
    case GP_PLUGIN_BF16: return bf16_to_f32(f32_to_bf16(v));
    default: return f16_to_f32(f32_to_f16(v));
    }
}

static int supported(int32_t fmt)
{
    return fmt == GP_PLUGIN_FP32 || fmt == GP_PLUGIN_BF16 || fmt == GP_PLUGIN_FP16;
}

/* Blocks of 256 threads covering n (grid-stride loops beyond 4096 blocks). */
static unsigned grid(uint64_t n)
{
    uint64_t b = (n + 255) / 256;
    return b == 0 ? 1u : b > 4096 ? 4096u : (unsigned)b;
}

static int launched(void)
{
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

#define FOR_EACH_ELEMENT(i, n) \
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (uint64_t)gridDim.x * blockDim.x)

/* acc <- acc + g in fp32 (opmath), stored in the accumulator format: RNE, toward zero
 * (fp32: the exact sum truncated; narrower: the fp32 sum truncated) or Kahan. */
static __global__ void accumulate_kernel(gp_plugin_accumulate_args a)
{
    int32_t af = a.acc_format;
    FOR_EACH_ELEMENT(i, a.n) {
        float acc = load(af, a.acc, i), g = load(a.grad_format, a.grad, i);
        if (a.rounding == GP_PLUGIN_KAHAN) {
            float c = load(af, a.comp, i), y = g - c, sum = acc + y;
            store(af, a.acc, i, sum);
            store(af, a.comp, i, (load(af, a.acc, i) - acc) - y);
        } else if (a.rounding == GP_PLUGIN_RTZ) {
            if (af == GP_PLUGIN_FP32)
                ((float *)a.acc)[i] = __fadd_rz(acc, g);
            else if (af == GP_PLUGIN_BF16)
                ((uint16_t *)a.acc)[i] = f32_to_bf16_rtz(acc + g);
            else
                ((uint16_t *)a.acc)[i] = f32_to_f16_rtz(acc + g);
        } else {
            store(af, a.acc, i, acc + g);
        }
    }
}

static int accumulate(const gp_plugin_accumulate_args *a)
{
    int32_t r = a->rounding;
    if (a->ftz || !supported(a->grad_format) || !supported(a->acc_format) ||
        (r != GP_PLUGIN_RNE && r != GP_PLUGIN_RTZ && r != GP_PLUGIN_KAHAN))
        return 1; /* not implemented here */
    accumulate_kernel<<<grid(a->n), 256>>>(*a);
    return launched();
}

/* Several tensors' chunks for one micro-batch: one launch each, in turn. */
static int accumulate_many(const gp_plugin_accumulate_args *a, uint32_t count)
{
    for (uint32_t j = 0; j < count; j++) {
        int rc = accumulate(&a[j]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The inf/NaN flag of unscale: one for the plugin, used under found_mu. */
static __device__ int found_flag;
static pthread_mutex_t found_mu = PTHREAD_MUTEX_INITIALIZER;

static __global__ void unscale_kernel(int32_t fmt, float inv_scale, uint64_t n, void *acc)
{
    FOR_EACH_ELEMENT(i, n) {
        float v = load(fmt, acc, i);
        if (!isfinite(v))
            found_flag = 1;
        store(fmt, acc, i, v * inv_scale);
    }
}

static int unscale(gp_plugin_unscale_args *a)
{
    if (a->ftz || !supported(a->acc_format))
        return 1;
    int zero = 0, found = 0, rc = -1;
    pthread_mutex_lock(&found_mu);
    if (cudaMemcpyToSymbol(found_flag, &zero, sizeof zero) == cudaSuccess) {
        unscale_kernel<<<grid(a->n), 256>>>(a->acc_format, a->inv_scale, a->n, a->acc);
        if (launched() == 0 && cudaMemcpyFromSymbol(&found, found_flag, sizeof found) == cudaSuccess)
            rc = 0;
    }
    pthread_mutex_unlock(&found_mu);
    if (found)
        a->found_inf = 1;
    return rc;
}

/* AdamW's per-step scalars, computed on the host in double as Python computes them. */
typedef struct {
    float decay, w1, beta2, cv, inv_bc2_sqrt, eps, neg_step;
} adamw_scalars;

/* lerp and addcmul/addcdiv as fused multiply-adds (fmaf), as torch's kernels do; every
 * other operation rounded on its own (--fmad=false). */
static __global__ void adamw_kernel(gp_plugin_adamw_args a, adamw_scalars k)
{
    if (*a.found_inf)
        return; /* a skipped step: nothing written */
    int32_t pf = a.param_format, sf = a.state_format;
    FOR_EACH_ELEMENT(i, a.n) {
        float g = load(a.grad_format, a.grad, i) * a.inv_scale;
        float w = a.variant == GP_PLUGIN_ADAMW_MASTER ? ((const float *)a.master)[i] : load(pf, a.param, i);
        float m = load(sf, a.m, i), v = load(sf, a.v, i);
        float diff = g - m;
        m = round_to(sf, k.w1 < 0.5f ? fmaf(k.w1, diff, m) : fmaf(-diff, 1.0f - k.w1, g));
        float vb = round_to(sf, v * k.beta2);
        v = round_to(sf, k.cv == 1.0f ? fmaf(g, g, vb) : fmaf(k.cv, g * g, vb));
        float q = round_to(sf, round_to(sf, sqrtf(v)) * k.inv_bc2_sqrt);
        float den = round_to(sf, q + k.eps);
        float ratio = m / den;
        store(sf, a.m, i, m);
        store(sf, a.v, i, v);
        switch (a.variant) {
        case GP_PLUGIN_ADAMW_PLAIN:
            store(pf, a.param, i, fmaf(k.neg_step, ratio, round_to(pf, w * k.decay)));
            break;
        case GP_PLUGIN_ADAMW_ONE_STORE:
            store(pf, a.param, i, fmaf(k.neg_step, ratio, w * k.decay));
            break;
        case GP_PLUGIN_ADAMW_MASTER: {
            float nm = fmaf(k.neg_step, ratio, w * k.decay);
            ((float *)a.master)[i] = nm;
            store(pf, a.param, i, nm);
            break;
        }
        default: { /* Kahan: the compensated sum of the decayed weight and the update */
            float d = w * k.decay, c = load(pf, a.comp, i);
            float y = fmaf(k.neg_step, ratio, -c), sum = d + y;
            store(pf, a.param, i, sum);
            store(pf, a.comp, i, (load(pf, a.param, i) - d) - y);
            break;
        }
        }
    }
}

static int adamw(const gp_plugin_adamw_args *a)
{
    if (a->rounding != GP_PLUGIN_RNE || !supported(a->param_format) || !supported(a->grad_format) ||
        !supported(a->state_format) || a->variant < GP_PLUGIN_ADAMW_PLAIN || a->variant > GP_PLUGIN_ADAMW_KAHAN ||
        (a->struct_size >= sizeof *a && a->state_quant != GP_PLUGIN_STATE_PLAIN)) /* m, v as arrays only */
        return 1;
    double t = (double)a->step;
    double bc1 = 1.0 - pow(a->beta1, t), bc2 = 1.0 - pow(a->beta2, t);
    adamw_scalars k;
    k.decay = (float)(1.0 - a->lr * a->weight_decay);
    k.w1 = (float)(1.0 - a->beta1);
    k.beta2 = (float)a->beta2;
    k.cv = (float)(1.0 - a->beta2);
    k.inv_bc2_sqrt = (float)(1.0 / sqrt(bc2));
    k.eps = (float)a->eps;
    k.neg_step = (float)(-(a->lr / bc1));
    adamw_kernel<<<grid(a->n), 256>>>(*a, k); /* reads *found_inf on the device: no host sync */
    return launched();
}

static const gp_plugin plugin = {
    GP_PLUGIN_ABI_VERSION, "example-cuda", GP_PLUGIN_DEVICE, accumulate, unscale, adamw,
    NULL, NULL, NULL, /* grad_sumsq, grad_scale, scaler_update: gradprec's CPU emulation */
    accumulate_many,
};

extern "C" const gp_plugin *gp_plugin_entry(void)
{
    return &plugin;
}
