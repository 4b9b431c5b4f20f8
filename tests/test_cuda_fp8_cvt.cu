/* test_cuda_fp8_cvt.cu — the GPU's own fp8 conversions against gradprec's model, on every
 * input. gradprec's kernels convert to fp8 with its own rounding (gp_elem_cast of
 * kernels/arith/gp_scaled.h); a user's kernel (Transformer Engine's casts, torch's
 * _scaled_mm inputs, a hand-written quantizer) uses the hardware's instruction. This
 * checks that the model gradprec judges such a kernel with is the hardware's:
 *
 * 1. cvt.rn.satfinite.e4m3x2.f32 and cvt.rn.satfinite.e5m2x2.f32 (sm_89 and later) on
 *    all 2^32 fp32 patterns, each against gp_elem_cast(e, x, sat = 1, GP_RNE). Expected
 *    from the PTX ISA (cvt, "Semantics" of .satfinite and the f8x2 packing): a NaN input
 *    gives a NaN (the code's payload is the hardware's: compared as NaN-ness, and the
 *    codes seen are printed), a value whose magnitude, rounded, exceeds the format's
 *    largest finite value (infinities included) gives that value with the input's sign,
 *    every other input the code rounded to nearest, ties to even, subnormals kept; a
 *    goes to the upper byte, b to the lower one. gp_elem_cast with sat clamps to +-max
 *    first (as torch.clamp, which passes a NaN) and then rounds (docs/formats.md), so
 *    every non-NaN input must give the same code. Each cvt converts a pattern x (a, upper
 *    byte) and x with its sign flipped (b, lower byte), so the sweep also checks the
 *    packing order with operands that differ.
 * 2. cvt.rn.f16x2.e4m3x2 and cvt.rn.f16x2.e5m2x2 on all 65536 pairs of codes: every
 *    e4m3 and e5m2 value is an fp16 value (e4m3's 2^-9 .. 448 and e5m2's 2^-16 .. 57344
 *    lie inside fp16's 2^-24 .. 65504 on fp16's grid), so each half must equal
 *    gp_elem_to_f64 of its code exactly, and a NaN code a NaN.
 * 3. A sample of the device's codes copied back and compared with gp_elem_cast evaluated
 *    by the host's compiler (16 slices of 2^20 patterns over all signs and exponents), so
 *    the check does not rest on the device compilation of the model alone.
 *
 * --wrong-model: the sweep against the model without saturation must find exactly the
 * inputs that overflow unclamped, counted by hand in main (the check can fail).
 *
 * Exit 77 (skipped) without a device or on one older than sm_89 (no fp8 cvt); 1 on any
 * mismatch, printing the first ones; 0 otherwise. Not run through the host shim: the
 * instruction is the subject. scripts/gpu-check.sh runs it; docs/cuda.md has the result. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/arith/gp_scaled.h"

#define MAX_SHOWN 8

typedef struct {
    unsigned long long mismatches;   /* non-NaN inputs whose codes differ */
    unsigned long long nan_not_nan;  /* NaN input, result not a NaN code */
    unsigned long long converted;    /* patterns converted (must be 2^32) */
    unsigned int nan_codes[256];     /* how often each code came out of a NaN input */
    unsigned int shown;
    uint32_t shown_x[MAX_SHOWN];
    uint32_t shown_hw[MAX_SHOWN];
    uint32_t shown_ref[MAX_SHOWN];
    int supported;                   /* 1 when the kernel ran the sm_89+ instruction */
} sweep_out;

/* Is code c of element format e (e4m3 or e5m2) a NaN? (gp_format's test, on host and device) */
__host__ __device__ static int is_nan_code(gp_elem e, uint32_t c)
{
    return gp_fmt_isnan(e == GP_EL_E4M3 ? GP_FP8_E4M3 : GP_FP8_E5M2, c);
}

/* The hardware conversion of (a, b): a in the upper byte, b in the lower one. Returns
 * 0xffffffff where the instruction does not exist (sm_80 code). */
__device__ static uint32_t hw_cvt_pair(gp_elem e, float a, float b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    unsigned short d;
    if (e == GP_EL_E4M3)
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(a), "f"(b));
    else
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(a), "f"(b));
    return d;
#else
    (void)e; (void)a; (void)b;
    return 0xffffffffu;
#endif
}

/* 1 when the code hw of pattern x differs from the model's (sat: gp_elem_cast's
 * saturation; 0 only for the check that the sweep catches a wrong model). */
__device__ static int note(sweep_out *o, gp_elem e, uint32_t x, uint32_t hw, int sat)
{
    float v = gp_f32_from_bits(x);
    uint32_t ref = gp_elem_cast(e, v, sat, GP_RNE, 0, (unsigned *)0);
    if (v != v) {
        atomicAdd(&o->nan_codes[hw & 0xffu], 1u);
        if (!is_nan_code(e, hw))
            atomicAdd(&o->nan_not_nan, 1ull);
        return 0;
    }
    if (hw == ref)
        return 0;
    if (*(volatile unsigned *)&o->shown < MAX_SHOWN) {
        unsigned k = atomicAdd(&o->shown, 1u);
        if (k < MAX_SHOWN) {
            o->shown_x[k] = x;
            o->shown_hw[k] = hw;
            o->shown_ref[k] = ref;
        }
    }
    return 1;
}

/* Patterns x in [0, 2^31) paired with x | 2^31: all 2^32 in 2^31 instructions. */
__global__ void sweep_kernel(gp_elem e, int sat, sweep_out *o)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    unsigned long long done = 0, bad = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 31); i += stride) {
        uint32_t xa = (uint32_t)i, xb = xa | 0x80000000u;
        uint32_t d = hw_cvt_pair(e, gp_f32_from_bits(xa), gp_f32_from_bits(xb));
        if (d == 0xffffffffu)
            return;
        bad += (unsigned)note(o, e, xa, d >> 8, sat);
        bad += (unsigned)note(o, e, xb, d & 0xffu, sat);
        done += 2;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        o->supported = 1;
    atomicAdd(&o->converted, done);
    atomicAdd(&o->mismatches, bad);
}

/* The codes of n patterns start + k * step, for the host's comparison. */
__global__ void sample_kernel(gp_elem e, uint32_t start, uint32_t step, size_t n, uint8_t *codes)
{
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n) {
        uint32_t x = start + (uint32_t)k * step;
        uint32_t d = hw_cvt_pair(e, gp_f32_from_bits(x), 0.0f);
        codes[k] = (uint8_t)(d >> 8);
    }
}

/* Every pair of codes widened to fp16x2 (a's code in the upper byte of the operand):
 * out[p] = the two fp16 results, upper half from the upper code. */
__global__ void widen_kernel(gp_elem e, uint32_t *out)
{
    uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= 65536u)
        return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    unsigned short a = (unsigned short)p;
    uint32_t d;
    if (e == GP_EL_E4M3)
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(a));
    else
        asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(d) : "h"(a));
    out[p] = d;
#else
    out[p] = 0xffffffffu;
#endif
}

#define CK(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "test_cuda_fp8_cvt: %s: %s\n", #call, cudaGetErrorString(e_));        \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static const char *ename(gp_elem e) { return e == GP_EL_E4M3 ? "e4m3" : "e5m2"; }

/* The sweep against gp_elem_cast with saturation (sat = 1): 0 when every pattern agrees.
 * With sat = 0 (a wrong model: OCP's non-saturating cast) it must find exactly the inputs
 * that overflow without the clamp: returns 0 when the count is `want_wrong`. */
static int check_sweep(gp_elem e, int sat, unsigned long long want_wrong)
{
    sweep_out *d_o, o;
    CK(cudaMalloc(&d_o, sizeof o));
    CK(cudaMemset(d_o, 0, sizeof o));
    sweep_kernel<<<132 * 16, 256>>>(e, sat, d_o);
    CK(cudaGetLastError());
    CK(cudaMemcpy(&o, d_o, sizeof o, cudaMemcpyDeviceToHost));
    CK(cudaFree(d_o));
    if (!o.supported || o.converted != (1ull << 32)) {
        printf("fp32 -> %s: FAIL: %llu of 2^32 patterns converted\n", ename(e), o.converted);
        return 1;
    }
    printf("fp32 -> %s, cvt.rn.satfinite.%sx2.f32, all 2^32 patterns: %llu codes differ from gp_elem_cast "
           "(%s, RNE); NaN inputs not giving a NaN: %llu; NaN codes given:",
           ename(e), ename(e), o.mismatches, sat ? "sat" : "WITHOUT sat, a wrong model", o.nan_not_nan);
    for (int c = 0; c < 256; c++)
        if (o.nan_codes[c])
            printf(" 0x%02x x %u", c, o.nan_codes[c]);
    printf("\n");
    for (unsigned k = 0; k < o.shown && k < MAX_SHOWN; k++)
        printf("  x = 0x%08x (%.9g): hardware 0x%02x, gradprec 0x%02x\n", o.shown_x[k],
               (double)gp_f32_from_bits(o.shown_x[k]), o.shown_hw[k], o.shown_ref[k]);
    if (!sat) {
        printf("  a wrong model: %llu differences expected, %llu found: %s\n", want_wrong, o.mismatches,
               o.mismatches == want_wrong ? "caught as derived" : "FAIL");
        return o.mismatches != want_wrong;
    }
    return o.mismatches || o.nan_not_nan;
}

static int check_sample(gp_elem e)
{
    const size_t n = 1u << 20;
    uint8_t *d_c, *c = (uint8_t *)malloc(n);
    size_t bad = 0, total = 0;
    CK(cudaMalloc(&d_c, n));
    for (uint32_t s = 0; s < 16; s++) {
        uint32_t start = s * 0x10000000u + 0x01234567u * (s & 1), step = 0xfffu + 2 * s;
        sample_kernel<<<(unsigned)(n / 256), 256>>>(e, start, step, n, d_c);
        CK(cudaGetLastError());
        CK(cudaMemcpy(c, d_c, n, cudaMemcpyDeviceToHost));
        for (size_t k = 0; k < n; k++) {
            uint32_t x = start + (uint32_t)k * step;
            float v = gp_f32_from_bits(x);
            uint32_t ref = gp_elem_cast(e, v, 1, GP_RNE, 0, NULL);
            int nan_ok = v != v && is_nan_code(e, c[k]);
            if (!nan_ok && c[k] != ref) {
                if (bad < MAX_SHOWN)
                    printf("  sample x = 0x%08x: hardware 0x%02x, host gradprec 0x%02x\n", x, c[k], ref);
                bad++;
            }
            total++;
        }
    }
    CK(cudaFree(d_c));
    free(c);
    printf("fp32 -> %s, %zu sampled patterns against the host's gp_elem_cast: %zu differ\n", ename(e), total, bad);
    return bad != 0;
}

/* fp16 bits -> binary64 (exact), for the widening check. */
static double f16_value(uint32_t h)
{
    return gp_f64_from_bits(gp_fmt_to_f64_bits(GP_FP16, h));
}

static int check_widen(gp_elem e)
{
    uint32_t *d_w, *w = (uint32_t *)malloc(65536 * sizeof *w);
    size_t bad = 0;
    CK(cudaMalloc(&d_w, 65536 * sizeof *w));
    widen_kernel<<<256, 256>>>(e, d_w);
    CK(cudaGetLastError());
    CK(cudaMemcpy(w, d_w, 65536 * sizeof *w, cudaMemcpyDeviceToHost));
    CK(cudaFree(d_w));
    for (uint32_t p = 0; p < 65536; p++) {
        uint32_t codes[2] = {p >> 8, p & 0xffu}, halves[2] = {w[p] >> 16, w[p] & 0xffffu};
        for (int h = 0; h < 2; h++) {
            double want = gp_elem_to_f64(e, codes[h]), got = f16_value(halves[h]);
            int ok = want != want ? got != got : got == want && (got != 0 || (halves[h] >> 15) == (codes[h] >> 7));
            if (!ok) {
                if (bad < MAX_SHOWN)
                    printf("  %s code 0x%02x (%s half of 0x%04x): fp16 0x%04x = %.9g, model %.9g\n", ename(e),
                           codes[h], h ? "lower" : "upper", p, halves[h], got, want);
                bad++;
            }
        }
    }
    free(w);
    printf("%s -> fp16, cvt.rn.f16x2.%sx2, all 65536 code pairs: %zu halves differ from the code's value\n",
           ename(e), ename(e), bad);
    return bad != 0;
}

int main(int argc, char **argv)
{
    /* --wrong-model: the sweep against gp_elem_cast WITHOUT saturation must differ exactly
     * on the non-NaN inputs that overflow when not clamped, counted by hand: e4m3's largest
     * finite value is 448 = 1.75 * 2^8, the next step 480 is past it, their midpoint 464
     * rounds to 448 (ties to even: mantissa 110), so every |x| > 464 (fp32 bits of 464:
     * 0x43e80000) up to inf (0x7f800000) differs, 0x7f800000 - 0x43e80000 patterns a sign;
     * e5m2's 57344 = 1.75 * 2^15 and 65536 (inf) have the midpoint 61440 (0x47700000),
     * which ties to 65536 (even), so every |x| >= 61440 up to and with inf differs,
     * 0x7f800000 - 0x47700000 + 1 a sign. */
    int wrong = argc > 1 && strcmp(argv[1], "--wrong-model") == 0;
    if (argc > 1 && !wrong) {
        fprintf(stderr, "usage: test_cuda_fp8_cvt [--wrong-model]\n");
        return 2;
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("test_cuda_fp8_cvt: no CUDA device: skipped\n");
        return 77;
    }
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    if (p.major * 10 + p.minor < 89) {
        printf("test_cuda_fp8_cvt: %s is sm_%d%d, the fp8 cvt needs sm_89: skipped\n", p.name, p.major, p.minor);
        return 77;
    }
    printf("test_cuda_fp8_cvt on %s (sm_%d%d)\n", p.name, p.major, p.minor);
    int fail = 0;
    if (wrong) {
        fail |= check_sweep(GP_EL_E4M3, 0, 2ull * (0x7f800000u - 0x43e80000u));
        fail |= check_sweep(GP_EL_E5M2, 0, 2ull * (0x7f800000u - 0x47700000u + 1u));
        printf(fail ? "test_cuda_fp8_cvt --wrong-model: FAIL\n" : "test_cuda_fp8_cvt --wrong-model: pass\n");
        return fail;
    }
    for (int e = GP_EL_E4M3; e <= GP_EL_E5M2; e++) {
        fail |= check_sweep((gp_elem)e, 1, 0);
        fail |= check_sample((gp_elem)e);
        fail |= check_widen((gp_elem)e);
    }
    printf(fail ? "test_cuda_fp8_cvt: FAIL\n" : "test_cuda_fp8_cvt: pass\n");
    return fail;
}
