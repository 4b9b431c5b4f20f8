/* gp_adamw.h — one AdamW element step in fp32 arithmetic, in the order of
 * torch.optim.AdamW's single-tensor implementation, shared by the CPU emulation and the
 * CUDA kernels: bf16/fp16/fp32 params, optional fp32 master weight or Kahan
 * compensation, m and v in fp32 or bf16, RNE or stochastic rounding of the stored param,
 * events (stores, plus GP_EV_STALE). The exact trajectory is reference/gp_adamw_ref.c.
 *
 * What torch does, and where it says so (pytorch/pytorch):
 *  - torch/optim/adamw.py, _single_tensor_adamw, per parameter, step_t += 1 first:
 *      param.mul_(1 - lr * weight_decay)
 *      exp_avg.lerp_(grad, 1 - beta1)
 *      exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
 *      step = _get_value(step_t)                       # step_t.item(): a Python float
 *      bias_correction1 = 1 - beta1 ** step; bias_correction2 = 1 - beta2 ** step
 *      step_size = lr / bias_correction1; bias_correction2_sqrt = bias_correction2 ** 0.5
 *      denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
 *      param.addcdiv_(exp_avg, denom, value=-step_size)
 *    lr, betas, eps, weight_decay are Python floats, so every scalar above is computed
 *    in binary64 on the host; the state step is a float32 tensor unless the default
 *    dtype is float64 (optimizer.py, _get_scalar_dtype), exact for t < 2^24.
 *  - A Python float entering an fp32 tensor op is converted to the op's math type,
 *    float (`value.to<accscalar_t>()`, `weight.to<opmath_t>()`, `scalar_value<opmath_t>`):
 *    one binary64 -> binary32 rounding (RNE).
 *  - lerp (aten/src/ATen/native/Lerp.h, cuda/Lerp.cu): |w| < 0.5 ? self + w*(end - self)
 *    : end - (end - self)*(1 - w), in float; the CPU's vectorized lerp_vec
 *    (cpu/LerpKernel.cpp) writes vec::fmadd(w or w - 1, end - self, self or end).
 *  - addcmul / addcdiv on CUDA (cuda/PointwiseOpsKernel.cu): a + alpha*(b*c) and
 *    a + alpha*(b/c) in float; newer versions (cuda/DeviceAddCmulCdiv.cuh,
 *    pointwise_op_impl) write std::fma(alpha, b op c, a), and std::fma(b, c, a) for
 *    addcmul with alpha == 1. On CPU (cpu/PointwiseOpsKernel.cpp): self + value*t1*t2
 *    and self + value*t1/t2, i.e. (value*t1)*t2 and (value*t1)/t2 (C++ left to right),
 *    in float for bf16/fp16 too.
 *  - tensor / Python scalar on CUDA (cuda/BinaryDivTrueKernel.cu): "if the second operand
 *    is a CPU scalar, compute a * reciprocal(b)". Measured on an H100 (torch 2.11.0+cu130,
 *    scripts/torch-cuda-ops-probe.py, 10^6 fp32 inputs from 2^-140 to 2^8): the
 *    reciprocal is taken in binary64 and rounded once, a * (float)(1.0 / b), in every
 *    case (a * (1.0f / (float)b), which the source seems to say, differed on 93%).
 *    torch._foreach_div_ with a list of Python floats (the foreach AdamW) divides:
 *    a / (float)b in every case. On CPU (cpu/BinaryOpsKernel.cpp, div_true_kernel) a
 *    float division a / (float)b, single-tensor and foreach.
 *  - Every in-place op writes its tensor's dtype: with bf16 params and no master,
 *    param.mul_ stores a bf16 before addcdiv_ reads it; with bf16 state, mul_(beta2)
 *    stores a bf16 before addcmul_, and sqrt(), / and add_(eps) each make a bf16 tensor.
 *  - A Python number as the other operand of add/mul/div on a bf16/fp16 tensor: on CPU
 *    add rounds it to the tensor's dtype first, mul and div keep it in float
 *    (cpu/BinaryOpsKernel.cpp reads iter.original_scalar_value<opmath_t> for mul and div
 *    of reduced floats; measured below; pytorch/pytorch PRs #185869 and #186942 say
 *    the same of CPU eager — "CPU eager arithmetic with bf16/fp16 tensors rounds Python
 *    scalar constants to the tensor dtype", "mul/div ... use opmath precision" — and
 *    that CUDA eager does not round them; #60454 made CUDA add/sub use accscalar_t for
 *    the scalar). So with bf16 state on CPU eps enters as bf16(eps) (1e-8 -> 1.0012e-8).
 *    Lerp's weight and addcmul/addcdiv's value are c10::Scalar arguments: (float).
 *  - Measured (torch 2.15.0, the PyPI wheel, CPU x86-64 with AVX2 and MKL; fp32 tensors
 *    of 1 and of 64 elements, i.e. the scalar and the vectorized loops, ~14000 cases):
 *    lerp is fmaf(w, end - self, self) — the compiler contracts the scalar loop too;
 *    addcmul is fmaf(value*t1, t2, self); tensor / scalar is a / (float)s; addcdiv is
 *    self + (value*t1)/t2; mul is a * (float)s; all in every case. Whole single-tensor
 *    AdamW steps (21200 elements, random state, t and hyper-parameters, fp32 and bf16
 *    params with state of the same dtype): m and v equal GP_ADAMW_TORCH_CPU's in every
 *    case, and so does the param, except where torch's own CPU sqrt (MKL) was not
 *    correctly rounded — about 1 fp32 sqrt in 6 on that wheel; gradprec's sqrtf is, so
 *    there the param may differ by an ulp. tests/test_adamw.c keeps a sample.
 *    GP_ADAMW_TORCH_CPU_ZEN4 takes torch's fp32 sqrt as well, as the wheel computes it on
 *    AMD Zen 4 (gp_torch_sqrt.h): torch.optim.AdamW then equals it bit for bit on that
 *    CPU (tests/python/test_backends.py). GP_ADAMW_TORCH_CPU_INTEL_AVX512 does the same
 *    with the sqrt MKL computes on an Intel CPU with AVX-512 (checked against MKL's kernel
 *    itself; not yet against torch on an Intel CPU). GP_ADAMW_TORCH_CPU_HOST with the sqrt
 *    MKL computes on the host running gradprec (gp_torch_sqrtf_host): reports made with it
 *    depend on the host's CPU.
 *
 * Evaluation (gp_adamw_eval): GP_ADAMW_TORCH_CPU is torch's CPU kernels as measured;
 * GP_ADAMW_TORCH_CUDA is torch's single-tensor CUDA kernels, with the FMAs that newer
 * versions write and that nvcc forms by default (--fmad=true) in lerp's
 * self + w*(end - self); GP_ADAMW_TORCH_CUDA_FOREACH the foreach form (torch's default
 * for CUDA tensors), which differs only in dividing by bias_correction2_sqrt. Each
 * operation of both was measured on an H100 against these formulas
 * (scripts/torch-cuda-ops-probe.py: mul, lerp, addcmul, sqrt (IEEE), div, add and
 * addcdiv, 10^6 fp32 inputs each, no difference); whole steps are compared by
 * scripts/gpu_torch_adapters.py and tests/python/test_backends.py on a GPU; GP_ADAMW_UNFUSED
 * rounds every operation (an older torch CUDA build with contraction off). gradprec
 * builds with -ffp-contract=off / --fmad=false and writes fmaf where an FMA is meant,
 * so its CPU emulation and CUDA kernels agree bit for bit in every mode.
 *
 * The binary64 scalars differ from CPython's in one place: beta**step is CPython's
 * float pow (the C library pow); here gp_adamw_pow is a double-double power rounded
 * once, correctly rounded unless beta^t lies within 2^-96 (relative) of a binary64
 * rounding boundary, so it can differ from a libm pow only where that pow misrounds;
 * and bias_correction2 ** 0.5 (pow(x, 0.5)) is taken as sqrt(x), correctly rounded.
 * A one-ulp binary64 difference changes the fp32 scalar only when the binary64 lies next
 * to an fp32 rounding boundary. */
#ifndef GP_ADAMW_H
#define GP_ADAMW_H

#include <math.h>

#include "gp_format.h"
#include "gp_torch_sqrt.h"

/* STALE: the step's exact update of the weight was non-zero (a non-zero addcdiv term,
 * or weight decay of a non-zero weight) but the stored weight did not change: the
 * param (plain variants), the fp32 master (master variant; the narrow param copy may
 * lag the master without loss), or the (param, compensation) pair (Kahan). The stale
 * update of DESIGN.md §1. Defined here, not in gp_arith.h: only optimizer steps report it. */
enum { GP_EV_STALE = 1u << 5 };

typedef enum {
    GP_ADAMW_TORCH_CUDA = 0, /* lerp fmaf(w, e - s, s); addcmul fmaf(v, g*g, a);
                                x * (float)(1.0/s); addcdiv fmaf(v, m/den, a) */
    GP_ADAMW_TORCH_CPU = 1,  /* lerp fmaf(w, e - s, s); addcmul fmaf(v*g, g, a);
                                x / (float)s; addcdiv a + (v*m)/den */
    GP_ADAMW_UNFUSED = 2,    /* the CUDA association with every operation rounded:
                                s + w*(e - s); a + v*(g*g); x * (1/s); a + v*(m/den) */
    GP_ADAMW_TORCH_CPU_ZEN4 = 3, /* GP_ADAMW_TORCH_CPU with torch's fp32 sqrt as the x86-64
                                    wheel computes it on AMD Zen 4 (gp_torch_sqrtf_zen4: MKL's
                                    rsqrtps + Newton kernel, not IEEE); host code only */
    GP_ADAMW_TORCH_CUDA_FOREACH = 4, /* GP_ADAMW_TORCH_CUDA with x / (float)s (_foreach_div_) */
    GP_ADAMW_TORCH_CPU_INTEL_AVX512 = 5, /* GP_ADAMW_TORCH_CPU_ZEN4 with the wheel's sqrt on an
                                            Intel CPU with AVX-512 (gp_torch_sqrtf_intel_avx512:
                                            MKL's vrsqrt14ps + Newton kernel); host code only */
    GP_ADAMW_TORCH_CPU_HOST = 6, /* GP_ADAMW_TORCH_CPU_ZEN4 with the wheel's sqrt on the host
                                   running gradprec (gp_torch_sqrtf_host): depends on the
                                   CPU; x86-64 host builds only (GP_TORCH_SQRT_HOST) */
    GP_ADAMW_TORCH_CPU_FOREACH = 7 /* GP_ADAMW_TORCH_CPU as torch.optim.AdamW(foreach=True)
                                      computes it on the CPU: torch._foreach_mul_ rounds its
                                      Python scalar to the tensor's dtype before multiplying,
                                      so the decay factor (a PLAIN param's dtype) and beta2
                                      (the state's) are rounded there first; equal to
                                      GP_ADAMW_TORCH_CPU for fp32 tensors (IEEE sqrt) */
} gp_adamw_eval;

/* Is ev one of torch's CPU orders (GP_ADAMW_TORCH_CPU with one sqrt or another)? */
GP_ARITH int gp_adamw_eval_cpu(gp_adamw_eval ev)
{
    return ev == GP_ADAMW_TORCH_CPU || ev == GP_ADAMW_TORCH_CPU_ZEN4 || ev == GP_ADAMW_TORCH_CPU_INTEL_AVX512 ||
           ev == GP_ADAMW_TORCH_CPU_HOST || ev == GP_ADAMW_TORCH_CPU_FOREACH;
}

/* The sqrt of an fp32 state in order ev: torch's on the CPU it models, else IEEE. */
GP_ARITH float gp_adamw_sqrtf_fp32(gp_adamw_eval ev, float x)
{
    if (ev == GP_ADAMW_TORCH_CPU_ZEN4)
        return gp_torch_sqrtf_zen4(x);
    if (ev == GP_ADAMW_TORCH_CPU_INTEL_AVX512)
        return gp_torch_sqrtf_intel_avx512(x);
    if (ev == GP_ADAMW_TORCH_CPU_HOST)
        return gp_torch_sqrtf_host(x);
    return sqrtf(x);
}

typedef enum {
    GP_ADAMW_PLAIN = 0,     /* torch eager on the param itself: param.mul_ stores the
                               decayed weight in the param format (RNE), addcdiv_ stores
                               again (in `rounding`) */
    GP_ADAMW_ONE_STORE = 1, /* the same fp32 math, the decayed weight kept in fp32, one
                               store (a fused optimizer kernel) */
    GP_ADAMW_MASTER = 2,    /* the step runs on an fp32 master; param = store(master) */
    GP_ADAMW_KAHAN = 3,     /* param + compensation (both in the param format), RNE */
    GP_ADAMW_TORCH_FUSED_CPU = 4 /* torch.optim.AdamW(fused=True) on CPU (gp_adamw_fused_step):
                                    its own evaluation order, `eval` is ignored; m, v and the
                                    param each stored once, RNE; state format = param's in torch */
} gp_adamw_variant;

typedef struct {
    gp_format param;          /* GP_FP32, GP_BF16 or GP_FP16 */
    gp_format state;          /* m and v: GP_FP32 or GP_BF16 */
    gp_adamw_variant variant;
    gp_rmode rounding;        /* final param store: GP_RNE or GP_STOCHASTIC (not Kahan) */
    gp_adamw_eval eval;
    int tail;                 /* GP_ADAMW_TORCH_FUSED_CPU only: non-zero for an element of the
                                 kernel's scalar remainder (index >= gp_adamw_fused_tail(...)) */
    int lowbit;               /* a low-bit state (kernels/cpu/gp_lowbit.h's gp_lowbit: m, v kept
                                 as codes and block scales by a library's AdamW, whose step
                                 the CPU backend runs; `state` is then fp32, the dequantized
                                 values); 0: m, v stored in `state` */
} gp_adamw_config;

/* ---- the host-side scalars, binary64 as Python computes them ---- */

/* a * b = p + e exactly (Dekker's product with Veltkamp's split; no FMA needed, and a
 * compiler contraction would not change it since every partial product is exact).
 * |a|, |b| < 2^996. */
GP_ARITH void gp_adamw_two_prod(double a, double b, double *p, double *e)
{
    double ca = 134217729.0 * a; /* 2^27 + 1 */
    double ah = ca - (ca - a);
    double al = a - ah;
    double cb = 134217729.0 * b;
    double bh = cb - (cb - b);
    double bl = b - bh;
    double pp = a * b;
    double e1 = ah * bh - pp;
    double e2 = e1 + ah * bl;
    double e3 = e2 + al * bh;
    *p = pp;
    *e = e3 + al * bl;
}

/* (xh + xl) * (yh + yl) in double-double, normalized: |*l| <= ulp(*h)/2. */
GP_ARITH void gp_adamw_dd_mul(double xh, double xl, double yh, double yl, double *h, double *l)
{
    double p, e;
    gp_adamw_two_prod(xh, yh, &p, &e);
    double cross = xh * yl + xl * yh;
    e = e + cross;
    double s = p + e;
    *l = e - (s - p);
    *h = s;
}

/* beta^t for 0 <= beta < 1, t >= 0 (AdamW: t >= 1), as a binary64: square-and-multiply in
 * double-double (relative error below 2^-96 for any t < 2^62), then the high part,
 * which is the double-double rounded to nearest. Values below 2^-400 return 0 (1 - x
 * is then exactly 1 in binary64, which is all AdamW uses). */
GP_ARITH double gp_adamw_pow(double beta, long t)
{
    double rh = 1.0, rl = 0.0, bh = beta, bl = 0.0;
    const double tiny = 3.8725919148493183e-121; /* 2^-400 */
    while (t > 0) {
        if (t & 1)
            gp_adamw_dd_mul(rh, rl, bh, bl, &rh, &rl);
        t >>= 1;
        if (t > 0) {
            if (bh < tiny) /* any further factor takes the result below 2^-400 */
                return 0.0;
            gp_adamw_dd_mul(bh, bl, bh, bl, &bh, &bl);
        }
        if (rh < tiny)
            return 0.0;
    }
    return rh;
}

/* Everything the element step needs from (lr, betas, eps, weight_decay, t): the
 * binary64 values torch computes in Python, and the fp32 values the tensor ops use. */
typedef struct {
    double bc1;         /* 1 - beta1^t */
    double bc2;         /* 1 - beta2^t */
    double step_size;   /* lr / bc1 */
    double bc2_sqrt;    /* sqrt(bc2) (torch: bc2 ** 0.5) */
    float decay;        /* (float)(1 - lr*weight_decay): param.mul_ */
    float lerp_w;       /* (float)(1 - beta1): exp_avg.lerp_ weight */
    float beta2;        /* (float)beta2: exp_avg_sq.mul_ */
    float addcmul_v;    /* (float)(1 - beta2): addcmul_ value */
    float bc2_sqrt_f;   /* (float)bc2_sqrt: the CPU divisor */
    float inv_bc2_sqrt; /* (float)(1.0 / bc2_sqrt): the single-tensor CUDA multiplier */
    float eps;          /* (float)eps (torch CPU with bf16 state: then rounded to bf16) */
    float neg_step;     /* (float)(-step_size): addcdiv_ value */
} gp_adamw_scalars;

/* The scalars of step t >= 1, each binary64 operation rounded as CPython's (a*b and
 * a - b rounded separately: build without contraction). lr is the schedule's value for
 * this step. Cannot fail; beta1, beta2 in [0, 1). */
GP_ARITH gp_adamw_scalars gp_adamw_scalars_make(double lr, double beta1, double beta2,
                                                double eps, double weight_decay, long t)
{
    gp_adamw_scalars s;
    double b1t = gp_adamw_pow(beta1, t);
    double b2t = gp_adamw_pow(beta2, t);
    double lrwd = lr * weight_decay;
    s.bc1 = 1.0 - b1t;
    s.bc2 = 1.0 - b2t;
    s.step_size = lr / s.bc1;
    s.bc2_sqrt = sqrt(s.bc2);
    s.decay = (float)(1.0 - lrwd);
    s.lerp_w = (float)(1.0 - beta1);
    s.beta2 = (float)beta2;
    s.addcmul_v = (float)(1.0 - beta2);
    s.bc2_sqrt_f = (float)s.bc2_sqrt;
    s.inv_bc2_sqrt = (float)(1.0 / s.bc2_sqrt);
    s.eps = (float)eps;
    s.neg_step = (float)(-s.step_size);
    return s;
}

/* ---- element arithmetic ---- */

/* A value of format f widened to float (exact). */
GP_ARITH float gp_adamw_load(gp_format f, uint32_t bits)
{
    return gp_f32_from_bits(gp_fmt_to_f32_bits(f, bits));
}

/* Store the float x in format f, RNE, events into *ev (fp32: a bit move, no events). */
GP_ARITH uint32_t gp_adamw_store(gp_format f, float x, unsigned *ev)
{
    if (f == GP_FP32)
        return gp_f32_bits(x);
    return ev ? gp_fmt_from_f32_bits(f, gp_f32_bits(x), GP_RNE, 0, 0, ev) : gp_fmt_store_f32(f, x, 0);
}

/* base + a*b written to format f: the float op (fused: one rounding of the exact
 * base + a*b, fmaf; else a*b rounded to float, then the sum rounded), then, for a
 * narrower f, the store of that float (opmath, then store, as torch). f == GP_FP32
 * rounds the exact sum once in `mode` (stochastic: rbits), which for RNE is the IEEE
 * result; a narrower f rounds the fp32 opmath sum in `mode`. Events into *ev: the IEEE
 * flags of the product (unfused) and of the sum, and those of the store into a narrower
 * f. Without events and in RNE, the native operations (same results). */
GP_ARITH uint32_t gp_adamw_madd_store(gp_format f, float base, float a, float b, int fused,
                                      gp_rmode mode, uint32_t rbits, unsigned *ev)
{
    if (!ev && mode == GP_RNE) { /* kernel code: CUDA's IEEE intrinsics and conversions */
        float r = fused ? GP_FMAF_RN(a, b, base) : GP_FADD_RN(base, GP_FMUL_RN(a, b));
        return gp_fmt_store_f32(f, r, 0);
    }
    double P = (double)a * (double)b; /* exact: 24 x 24 bits */
    if (!fused) /* the float product, with its flags */
        P = gp_fmt_to_f64(GP_FP32, gp_fmt_from_f64(GP_FP32, P, GP_RNE, 0, 0, ev));
    double bd = (double)base;
    double s = bd + P; /* TwoSum: s + err is base + P exactly */
    double bb = s - bd;
    double err = (bd - (s - bb)) + (P - bb);
    double nudged = gp_f64_nudge(s, err > 0 ? 1 : err < 0 ? -1 : 0);
    if (f == GP_FP32)
        return gp_fmt_from_f64(GP_FP32, nudged, mode, rbits, 0, ev);
    uint32_t s32 = gp_fmt_from_f64(GP_FP32, nudged, GP_RNE, 0, 0, ev);
    return gp_fmt_from_f32_bits(f, s32, mode, rbits, 0, ev);
}

/* a*b written to format f, RNE: the exact product rounded to float (with its flags),
 * then for a narrower f stored (with the store's flags). */
GP_ARITH uint32_t gp_adamw_mul_store(gp_format f, float a, float b, unsigned *ev)
{
    if (!ev)
        return gp_adamw_store(f, GP_FMUL_RN(a, b), ev);
    uint32_t p = gp_fmt_from_f64(GP_FP32, (double)a * (double)b, GP_RNE, 0, 0, ev);
    return f == GP_FP32 ? p : gp_fmt_from_f32_bits(f, p, GP_RNE, 0, 0, ev);
}

/* torch's lerp(self, end, w) in float, written to format f (RNE). For |w| >= 0.5 the
 * product is (w - 1)*(end - self) when vec_form (the CPU's vectorized lerp_vec and
 * FusedAdamKernel's vector loop: vec::fmadd(w - 1, end - self, end)), else
 * -(end - self)*(1 - w) (Lerp.h's end - (end - self)*(1 - w)). w - 1 is exact here and
 * the two products are equal, except that a zero product has the opposite sign: with
 * w = 1 (beta1 = 0), self = +0 and end = -0, vec_form gives -0 and the other +0. */
GP_ARITH uint32_t gp_adamw_lerp_store(gp_format f, float self, float end, float w, int fused,
                                      int vec_form, unsigned *ev)
{
    float diff = end - self;
    if (w < 0.5f && w > -0.5f)
        return gp_adamw_madd_store(f, self, w, diff, fused, GP_RNE, 0, ev);
    if (vec_form)
        return gp_adamw_madd_store(f, end, w - 1.0f, diff, fused, GP_RNE, 0, ev);
    float omw = 1.0f - w;
    return gp_adamw_madd_store(f, end, -diff, omw, fused, GP_RNE, 0, ev);
}

/* ---- torch's CPU fused AdamW (GP_ADAMW_TORCH_FUSED_CPU) ----
 *
 * What torch does (pytorch/pytorch, aten/src/ATen/native/cpu/FusedAdamKernel.cpp,
 * adam_fused_step_impl and adam_math, ADAM_MODE::ADAMW; torch.optim.AdamW(fused=True)
 * reaches it through torch._fused_adamw_): the scalars in binary64 as
 * gp_adamw_scalars_make computes them (std::pow, std::sqrt; step = state_step.item<float>()),
 * each converted once to float (opmath_t) where an element operation uses it; then per
 * element, in float (bf16/fp16 widened to float: opmath), with nothing stored between:
 *     d   = w * (float)(1 - lr*wd)                 (only when wd != 0; w * 1 is w)
 *     m'  = lerp(m, g, (float)(1 - beta1))         (vector: fmadd(w1 or w1 - 1, g - m, m or g))
 *     v'  = v*(float)beta2 + ((float)(1 - beta2)*g)*g
 *     den = sqrt(v') / (float)bc2_sqrt + (float)eps
 *     w'  = d + ((float)(-step_size) * m') / den
 * and stores m', v' (in the state dtype) and w' (in the param dtype) once each (grad, m
 * and v are in the param's dtype too: one scalar_t for all four tensors): with
 * bf16 params the update reads the float m', v', never their bf16 copies. sqrt and the
 * divisions are IEEE (vector sqrt/div instructions and std::sqrt), correctly rounded.
 *
 * The source leaves the FMAs to the compiler: measured (torch 2.15.0, the x86-64 PyPI
 * wheel, AVX-512 and, with ATEN_CPU_CAPABILITY=avx2, AVX2 kernels; fp32, bf16 and fp16;
 * about 2.7 million element steps of random state, steps and hyper-parameters, signed
 * zeros, tensors of 1 to 63 elements at storage offsets 0 to 15, all equal to this
 * model bit for bit; tests/python/test_fused_adamw.py repeats a smaller sweep), v' is
 *     vector code:        fma((float)(1 - beta2)*g, g, v*beta2)
 *     scalar remainder:   fma(v, beta2, ((float)(1 - beta2)*g)*g)
 * and lerp is one fma in both (for |w1| >= 0.5: fma(w1 - 1, g - m, g) in vector code,
 * fma(-(g - m), 1 - w1, g) in the scalar remainder: -0 against +0 when beta1 = 0,
 * m = +0, g = -0). Which elements the scalar remainder gets is the compiler's too: the
 * last n mod L of each tensor of n elements, L = 8 for fp32 and 16 for bf16/fp16 (32
 * bytes: AVX2's vector loop, and on AVX-512 the 256-bit loop gcc vectorized the source's
 * scalar loop into; parallel_for splits a tensor at multiples of 64 bytes, so no other
 * element is in a remainder). gp_adamw_fused_tail gives that index. The DEFAULT
 * (pre-AVX2) kernel contracts nothing and is not modelled. */
#define GP_ADAMW_FUSED_TAIL_BYTES 32u

/* Can GP_ADAMW_TORCH_FUSED_CPU run this configuration? As torch's kernel: state in the
 * param's format (one dtype), RNE stores, no master or compensation array (extra != 0). */
GP_ARITH int gp_adamw_fused_ok(gp_format pf, gp_format sf, gp_rmode rounding, int extra)
{
    return sf == pf && rounding == GP_RNE && !extra;
}

/* The first index of the scalar remainder of an n-element tensor with params of format
 * pf (fp32: n - n mod 8; bf16, fp16: n - n mod 16). */
GP_ARITH uint64_t gp_adamw_fused_tail(gp_format pf, uint64_t n)
{
    uint64_t l = GP_ADAMW_FUSED_TAIL_BYTES / (pf == GP_FP32 ? 4u : 2u);
    return n - n % l;
}

/* One element of GP_ADAMW_TORCH_FUSED_CPU (the order above; cfg.tail picks the scalar
 * remainder's FMAs). torch's kernel takes grad in the param's dtype (grad.data_ptr of the
 * param's scalar type), so g is first rounded to cfg.param (RNE): what `p.grad =
 * acc.to(p.dtype)` does with a wider accumulator. Arguments as gp_adamw_step's (no master, compensation, stochastic
 * rounding or skipped step here). Events: ev the flags of the decay product, of
 * d + (neg_step*m')/den and of the param store, plus GP_EV_STALE; ev_state those of
 * v*beta2 or ((1 - beta2)*g)*g (the product rounded on its own), of the two FMAs and of
 * the m and v stores into a narrower state format. */
GP_ARITH uint32_t gp_adamw_fused_step(gp_adamw_config cfg, const gp_adamw_scalars *s, uint32_t param,
                                      uint32_t *m, uint32_t *v, float g, unsigned *ev, unsigned *ev_state)
{
    gp_format pf = cfg.param, sf = cfg.state;
    unsigned e = 0, es = 0;
    unsigned *pe = ev ? &e : (unsigned *)0;
    unsigned *pes = ev_state ? &es : (unsigned *)0;
    /* the kernel reads grad in the param's dtype: a wider gradient is cast first (RNE) */
    g = gp_adamw_load(pf, gp_adamw_store(pf, g, (unsigned *)0));
    /* m' = lerp(m, g, w1), kept in float */
    float mm = gp_f32_from_bits(gp_adamw_lerp_store(GP_FP32, gp_adamw_load(sf, *m), g, s->lerp_w, 1, !cfg.tail, pes));
    /* v' = v*beta2 + (c2*g)*g with one of the products fused */
    float v0 = gp_adamw_load(sf, *v), cg = s->addcmul_v * g;
    uint32_t vn;
    if (cfg.tail) {
        float cgg = gp_f32_from_bits(gp_adamw_mul_store(GP_FP32, cg, g, pes));
        vn = gp_adamw_madd_store(GP_FP32, cgg, v0, s->beta2, 1, GP_RNE, 0, pes);
    } else {
        float vb = gp_f32_from_bits(gp_adamw_mul_store(GP_FP32, v0, s->beta2, pes));
        vn = gp_adamw_madd_store(GP_FP32, vb, cg, g, 1, GP_RNE, 0, pes);
    }
    float vv = gp_f32_from_bits(vn);
    float den = sqrtf(vv) / s->bc2_sqrt_f + s->eps;
    float q = (s->neg_step * mm) / den;
    float w = gp_adamw_load(pf, param);
    float d = gp_f32_from_bits(gp_adamw_mul_store(GP_FP32, w, s->decay, pe));
    /* d + q*1: q*1 is exact, so this is the float sum d + q, then the store */
    uint32_t out = gp_adamw_madd_store(pf, d, q, 1.0f, 0, GP_RNE, 0, pe);
    *m = gp_adamw_store(sf, mm, pes);
    *v = gp_adamw_store(sf, vv, pes);
    int nonzero = q != 0.0f || (s->decay != 1.0f && w != 0.0f);
    if (nonzero && out == param)
        e |= GP_EV_STALE;
    if (ev)
        *ev |= e;
    if (ev_state)
        *ev_state |= es;
    return out;
}

/* One AdamW step of one element.
 *  cfg:       formats, variant, rounding of the param store, evaluation order.
 *  s:         gp_adamw_scalars_make(lr_t, beta1, beta2, eps, weight_decay, t).
 *  param:     the param's bits in cfg.param; the new bits are returned.
 *  master:    fp32 master bits, read and written (GP_ADAMW_MASTER only; else unused).
 *  comp:      compensation bits in cfg.param, read and written (GP_ADAMW_KAHAN only).
 *  m, v:      state bits in cfg.state, read and written.
 *  g:         the gradient as a float (a stored gradient widened exactly).
 *  found_inf: non-zero skips the step: nothing is written, param is returned, no events
 *             (torch: GradScaler skips optimizer.step and the step count stays).
 *  rbits:     32 random bits for a stochastic param store.
 *  ev:        events of the weight: the IEEE flags of the decay product and of the
 *             addcdiv multiply-add, the stores into the param format (Kahan: the param
 *             store; compensation stores report nothing), plus GP_EV_STALE.
 *  ev_state:  events of m and v: the IEEE flags of the multiply-adds of lerp and
 *             addcmul and of v*beta2 (each computed from the exact value), the stores of
 *             m, v and v*beta2 into a narrower state format, and for bf16 state the stores
 *             of the bf16 temporaries sqrt(v), /sqrt(bc2), +eps. The subtraction in lerp,
 *             g*g, sqrt and the divisions report nothing.
 * Either event pointer may be NULL. Steps in order (torch's), all in float; fma(a, b, c)
 * is a*b + c rounded once, and becomes (a*b rounded) + c under GP_ADAMW_UNFUSED:
 *   d    = w * decay                          (PLAIN: stored in the param format)
 *   m'   = fma(lerp_w, g - m, m)              -> state format   (lerp_w < 0.5; else
 *                                               fma(-(g - m), 1 - lerp_w, g))
 *   vb   = v * beta2                          -> state format
 *   v'   = fma(addcmul_v, g*g, vb)            (CPU: fma(addcmul_v*g, g, vb)) -> state format
 *   den  = sqrt(v') * inv_bc2_sqrt + eps      (CPU: sqrt(v') / bc2_sqrt_f + eps, with
 *                                               eps rounded to the state format first;
 *                                               CUDA foreach: sqrt(v') / bc2_sqrt_f + eps)
 *   w'   = fma(neg_step, m'/den, d)           (CPU: d + (neg_step*m')/den)
 * where w is the param widened (PLAIN, ONE_STORE, KAHAN) or the master (MASTER).
 * Stores: PLAIN/ONE_STORE write w' in cfg.param in cfg.rounding (fp32: the exact w'
 * rounded once; narrower: fp32 w' then the store, a double rounding as torch's opmath).
 * MASTER: master' = fp32 w' (RNE), param = master' stored in cfg.rounding. KAHAN (the
 * compensated sum of gp_accum_step, with the fp32 decayed weight d as the base):
 * y = upd - c, s = d + y, param = store(s), c = store((param - d) - y), all RNE, where
 * upd = neg_step*(m'/den) (CUDA: y = fmaf(neg_step, m'/den, -c); CPU: upd =
 * (neg_step*m')/den); param - c then tracks the fp32 sum. No FTZ: subnormals are kept
 * everywhere. */
GP_ARITH uint32_t gp_adamw_step(gp_adamw_config cfg, const gp_adamw_scalars *s, uint32_t param,
                                uint32_t *master, uint32_t *comp, uint32_t *m, uint32_t *v,
                                float g, int found_inf, uint32_t rbits, unsigned *ev,
                                unsigned *ev_state)
{
    if (found_inf)
        return param;
    if (cfg.variant == GP_ADAMW_TORCH_FUSED_CPU)
        return gp_adamw_fused_step(cfg, s, param, m, v, g, ev, ev_state);
    gp_format pf = cfg.param, sf = cfg.state;
    int cpu = gp_adamw_eval_cpu(cfg.eval);
    int fused = cfg.eval != GP_ADAMW_UNFUSED; /* lerp, and CUDA's addcmul / addcdiv */
    unsigned e = 0, es = 0;
    unsigned *pe = ev ? &e : (unsigned *)0;
    unsigned *pes = ev_state ? &es : (unsigned *)0;

    /* exp_avg.lerp_(grad, 1 - beta1) */
    uint32_t mb = gp_adamw_lerp_store(sf, gp_adamw_load(sf, *m), g, s->lerp_w, fused, cpu, pes);
    /* exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2); CPU foreach:
     * _foreach_mul_ rounds beta2 to the state's dtype first (as the decay below) */
    int foreach_cpu = cfg.eval == GP_ADAMW_TORCH_CPU_FOREACH;
    float beta2 = foreach_cpu ? gp_adamw_load(sf, gp_adamw_store(sf, s->beta2, (unsigned *)0)) : s->beta2;
    float vb = gp_adamw_load(sf, gp_adamw_mul_store(sf, gp_adamw_load(sf, *v), beta2, pes));
    uint32_t vnb;
    if (cpu) {
        float cg = s->addcmul_v * g;
        vnb = gp_adamw_madd_store(sf, vb, cg, g, 1, GP_RNE, 0, pes);
    } else if (fused && s->addcmul_v == 1.0f) { /* pointwise_op_impl: alpha == 1 */
        vnb = gp_adamw_madd_store(sf, vb, g, g, 1, GP_RNE, 0, pes);
    } else {
        float gg = g * g;
        vnb = gp_adamw_madd_store(sf, vb, s->addcmul_v, gg, fused, GP_RNE, 0, pes);
    }
    float mm = gp_adamw_load(sf, mb);
    float vv = gp_adamw_load(sf, vnb);
    /* denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps): state-dtype tensors */
    /* torch's sqrt of an fp32 tensor is MKL's (gp_torch_sqrt.h); of a bf16 one, IEEE */
    float root = sf == GP_FP32 ? gp_adamw_sqrtf_fp32(cfg.eval, vv) : sqrtf(vv);
    float r = gp_adamw_load(sf, gp_adamw_store(sf, root, pes));
    float q = cpu || cfg.eval == GP_ADAMW_TORCH_CUDA_FOREACH ? r / s->bc2_sqrt_f : r * s->inv_bc2_sqrt;
    q = gp_adamw_load(sf, gp_adamw_store(sf, q, pes));
    /* add_(eps): torch's CPU casts the Python number to the tensor's dtype first */
    float eps = cpu ? gp_adamw_load(sf, gp_adamw_store(sf, s->eps, (unsigned *)0)) : s->eps;
    float den = q + eps;
    den = gp_adamw_load(sf, gp_adamw_store(sf, den, pes));
    /* param.addcdiv_(exp_avg, denom, value=-step_size) = d + ua * ub */
    float ua, ub;
    int fused_upd = fused && !cpu;
    if (cpu) {
        float nm = s->neg_step * mm;
        ua = nm / den;
        ub = 1.0f; /* x * 1 is exact: the sum d + x is the only rounding left */
    } else {
        ua = s->neg_step;
        ub = mm / den;
    }

    float w = cfg.variant == GP_ADAMW_MASTER ? gp_f32_from_bits(*master) : gp_adamw_load(pf, param);
    /* the exact update is non-zero: a non-zero addcdiv term or decay of a non-zero w */
    int nonzero = (ua != 0.0f && ub != 0.0f) || (s->decay != 1.0f && w != 0.0f);
    int stale = 0;
    uint32_t out;
    switch (cfg.variant) {
    case GP_ADAMW_MASTER: {
        float d = gp_f32_from_bits(gp_adamw_mul_store(GP_FP32, w, s->decay, pe));
        uint32_t nm = gp_adamw_madd_store(GP_FP32, d, ua, ub, fused_upd, GP_RNE, 0, pe);
        out = !pe && cfg.rounding == GP_RNE ? gp_fmt_store_f32(pf, gp_f32_from_bits(nm), 0)
                                            : gp_fmt_from_f32_bits(pf, nm, cfg.rounding, rbits, 0, pe);
        stale = nonzero && nm == *master;
        *master = nm;
        break;
    }
    case GP_ADAMW_KAHAN: {
        float d = w * s->decay;
        float c = gp_adamw_load(pf, *comp);
        float y;
        if (fused_upd) {
            y = GP_FMAF_RN(ua, ub, -c);
        } else {
            float upd = ua * ub;
            y = upd - c;
        }
        float sum = d + y;
        out = gp_adamw_store(pf, sum, pe);
        float t = gp_adamw_load(pf, out);
        float moved = t - d;
        float cn = moved - y;
        uint32_t nc = gp_adamw_store(pf, cn, (unsigned *)0);
        stale = nonzero && out == param && nc == *comp;
        *comp = nc;
        break;
    }
    case GP_ADAMW_PLAIN: { /* CPU foreach: the decay factor rounded to the param's dtype first */
        float decay = foreach_cpu ? gp_adamw_load(pf, gp_adamw_store(pf, s->decay, (unsigned *)0)) : s->decay;
        float d = gp_adamw_load(pf, gp_adamw_mul_store(pf, w, decay, pe));
        out = gp_adamw_madd_store(pf, d, ua, ub, fused_upd, cfg.rounding, rbits, pe);
        stale = nonzero && out == param;
        break;
    }
    default: { /* GP_ADAMW_ONE_STORE */
        float d = w * s->decay;
        out = gp_adamw_madd_store(pf, d, ua, ub, fused_upd, cfg.rounding, rbits, pe);
        stale = nonzero && out == param;
        break;
    }
    }
    *m = mb;
    *v = vnb;
    if (stale)
        e |= GP_EV_STALE;
    if (ev)
        *ev |= e;
    if (ev_state)
        *ev_state |= es;
    return out;
}

#endif
