/* gp_torch_sqrt.h — torch's CPU fp32 sqrt where it is not IEEE: torch.sqrt,
 * Tensor.sqrt and torch._foreach_sqrt on contiguous or strided fp32 CPU tensors of the
 * x86-64 PyPI wheel (torch 2.15.0, built with MKL) call MKL's vmsSqrt in VML_HA mode
 * (aten/src/ATen/cpu/vml.h), and MKL picks its kernel by CPU. Three of its kernels are
 * modelled here, each read from the wheel's machine code (every x86 op rounds on its
 * own, RNE, no FTZ/DAZ: the kernels set MXCSR to 0x1f80) and each a Newton correction of
 * an approximation r of 1/sqrt(x), with one shared core (gp_torch_sqrt_newton):
 *   s = x*r;  h = r*0.5f
 *   SSE, AVX2:  e = 0.5f - s*h;  s = s*e + s;  h = h*e + h      (one Goldschmidt step)
 *   all:        y = (x - s*s)*h + s
 * where the SSE kernel rounds every operation and the AVX2 and AVX-512 kernels fuse each
 * a*b + c into one FMA. Per kernel:
 *  - mkl_vml_kernel_sSqrt_EXHAynn (generic SSE; what MKL runs on a CPU that is not
 *    Intel's): r = rsqrtps(x) for a positive normal x with bits <= 0x7f7ff000; any other
 *    x (zero, subnormal, the top 4095 finite values, negative, inf, NaN) takes a scalar
 *    path equal to the IEEE sqrtf (a negative x gives the NaN 0x7fc00000).
 *  - mkl_vml_kernel_sSqrt_L9HAynn (AVX2 + FMA; Intel CPUs without AVX-512): r =
 *    vrsqrtps(x) for every positive normal x; every other x takes the same scalar path.
 *  - mkl_vml_kernel_sSqrt_Z0HAynn (AVX-512; Intel CPUs with it): r = vrsqrt14ps(x) for
 *    every positive finite non-zero x, subnormals included, and no Goldschmidt step;
 *    where r > 2^39 (x below about 2^-78) it computes the residual scaled,
 *    y = fma(h*2^-78, fma(-(s*2^39), s*2^39, x*2^78), s), exact scalings that keep
 *    x - s*s out of the subnormal range. ±0, +inf, negative x and NaN: IEEE (NaN for a
 *    negative x).
 * rsqrtps's value is the CPU's own and differs between vendors: Intel documents only
 * |relative error| <= 1.5*2^-12, not its values. gp_torch_rsqrtps is AMD Zen 4's,
 * measured on an AMD EPYC (Zen 4; but see docs/departures.md: the development VM's EPYC
 * reports family 26, i.e. Zen 5, and a Zen 4 proper was never measured; the names stay):
 * it depends only on the exponent's parity and the top
 * 12 mantissa bits, scales exactly with the exponent, and has 12 mantissa bits; the table
 * holds it as a residual in {-1, 0, 1} from 1/sqrt of the interval's midpoint
 * (scripts/gen_rsqrtps_table.c prints it from the host's instruction and checks those
 * properties). Intel's rsqrtps values are not here: the AVX2 kernel on an Intel CPU is
 * NOT modelled (its core is: on this Zen 4 the L9 kernel equals gp_torch_sqrt_newton
 * with Zen 4's rsqrtps on all 2^32 inputs, scripts/mkl-sqrt-kernels.py).
 * vrsqrt14ps, by contrast, is specified value for value: the SDM points to Intel's
 * reference implementation (RSQRT14S of "Reference Implementations for IA Approximation
 * Instructions"): x = 4^n * a with a in [1, 4); a's fraction truncated to 15 bits; on 32
 * segments of [1, 2) and 32 of [2, 4) a line c - d*k/128 in the offset k in [-512, 512)
 * from the segment's midpoint, truncated to 17 significant bits; a = 1 gives 1 exactly.
 * gp_torch_rsqrt14 is that algorithm; its 64 (c, d) pairs were fitted to the host's
 * instruction on an AMD EPYC (Zen 4) by scripts/gen_rsqrt14_table.c (each segment has
 * exactly one pair that reproduces all 1024 outputs) and equal the reference's
 * coefficients (compared by hand); the same script checks gp_torch_rsqrt14 against the
 * instruction on every positive finite float.
 * Checks: gp_torch_sqrtf_zen4 equals the wheel's vmsSqrt on that Zen 4 on all 2^32
 * inputs (NaN payloads aside); gp_torch_sqrtf_intel_avx512 equals the Z0 kernel itself,
 * called on this Zen 4 (which has AVX-512 and whose vrsqrt14ps is the reference's), on
 * all 2^32 inputs (scripts/mkl-sqrt-kernels.py; tests/python/test_torch_sqrt.py on 10^7).
 * Not compared with torch on an Intel CPU here (none at hand): that MKL dispatches to Z0
 * there is its kernel table's naming, and the share of inputs off the IEEE sqrt, 0.59%
 * of random positive floats, equals what was measured with torch on an Intel Xeon. On
 * [1, 4) the zen4 model is one ulp off the IEEE sqrt on about 17% of inputs, the avx512
 * model on 0.59%. fp64 (vdSqrt) is not IEEE either; bf16 and fp16 tensors take torch's
 * own vector code (sqrt in float, one rounding): IEEE.
 * gp_torch_sqrtf_host is the sqrt MKL computes on the host running gradprec: it picks the
 * kernel as MKL does (GenuineIntel with AVX-512 F, CD, BW, DQ and VL: Z0 with
 * gp_torch_rsqrt14; GenuineIntel with AVX2 and FMA: L9; any other x86-64 CPU: EX) and
 * takes r from the host's own rsqrtss for L9 and EX (rsqrtss and rsqrtps give the same
 * value per element; MKL on that CPU runs that instruction). So its results depend on
 * the CPU: equal to gp_torch_sqrtf_zen4 on this Zen 4, the Intel AVX2 kernel's on an
 * Intel CPU without AVX-512 (whose rsqrtps Intel does not document). x86-64 host builds
 * only (GP_TORCH_SQRT_HOST), and not on an Intel CPU without AVX2 + FMA (MKL's E2 / H8
 * kernels, see gp_torch_sqrt_host_kernel): gp_torch_sqrt_host_kernel says where. */
#ifndef GP_TORCH_SQRT_H
#define GP_TORCH_SQRT_H

#include <math.h>

#include "gp_arith.h"

/* 1 where gp_torch_sqrtf_host models the host: an x86-64 host (not CUDA) build */
#if !defined(__CUDACC__) && !defined(GP_SHIM_CUDA) && defined(__x86_64__)
#define GP_TORCH_SQRT_HOST 1
#include <immintrin.h>
#else
#define GP_TORCH_SQRT_HOST 0
#endif

/* MKL's vmsSqrt kernels (the kernel argument below; NONE: one not modelled) */
enum { GP_MKL_SQRT_NONE = -1, GP_MKL_SQRT_SSE = 0, GP_MKL_SQRT_AVX2 = 1, GP_MKL_SQRT_AVX512 = 2 };

/* Does the kernel take its vector path for the fp32 bit pattern b (else: IEEE sqrtf)? */
GP_ARITH int gp_torch_sqrt_vector(uint32_t b, int kernel)
{
    if (kernel == GP_MKL_SQRT_AVX512)
        return b != 0u && b < 0x7f800000u; /* positive, finite, non-zero */
    return b >= 0x00800000u && b <= (kernel == GP_MKL_SQRT_SSE ? 0x7f7ff000u : 0x7f7fffffu);
}

/* The kernel's vector path for x, given its approximation r of 1/sqrt(x) (see above). */
GP_ARITH float gp_torch_sqrt_newton(float x, float r, int kernel)
{
    int fused = kernel != GP_MKL_SQRT_SSE;
    float s = GP_FMUL_RN(x, r), h = GP_FMUL_RN(r, 0.5f);
    if (kernel != GP_MKL_SQRT_AVX512) {
        float e = fused ? GP_FMAF_RN(-s, h, 0.5f) : GP_FSUB_RN(0.5f, GP_FMUL_RN(s, h));
        s = fused ? GP_FMAF_RN(e, s, s) : GP_FADD_RN(GP_FMUL_RN(s, e), s);
        h = fused ? GP_FMAF_RN(e, h, h) : GP_FADD_RN(GP_FMUL_RN(h, e), h);
    }
    if (!fused)
        return GP_FADD_RN(GP_FMUL_RN(GP_FSUB_RN(x, GP_FMUL_RN(s, s)), h), s);
    if (kernel == GP_MKL_SQRT_AVX512 && r > 0x1p39f) { /* tiny x: the residual scaled by 2^78 */
        float s2 = GP_FMUL_RN(s, 0x1p39f);
        return GP_FMAF_RN(GP_FMUL_RN(h, 0x1p-78f), GP_FMAF_RN(-s2, s2, GP_FMUL_RN(x, 0x1p78f)), s);
    }
    return GP_FMAF_RN(h, GP_FMAF_RN(-s, s, x), s);
}

#if !defined(__CUDACC__) && !defined(GP_SHIM_CUDA)
/* rsqrtps residuals, 2 bits each (value + 1), index i = 4096*p + (mantissa >> 11), p = 1
 * for an even biased exponent; 16 per word, low bits first. */
static const uint32_t gp_torch_rsqrtps_res[512] = {
    0x55550000u, 0x55550000u, 0x55550000u, 0xaaaa5555u, 0x555a5555u, 0x55550000u,
    0x555a5555u, 0xaaaa5555u, 0x55550005u, 0x55550555u, 0x55555555u, 0x55555555u,
    0x55551555u, 0x55550555u, 0x15550015u, 0x556a5555u, 0xaa556a55u, 0x55555505u,
    0xaa556a55u, 0x55055501u, 0x56555555u, 0x5a555a55u, 0x6a556a55u, 0xaa55aa55u,
    0x6a556a55u, 0x5a556a55u, 0x56555a55u, 0x55155555u, 0x55015505u, 0x56555a55u,
    0x55055555u, 0x56556a55u, 0x65565555u, 0xa56a5695u, 0x51551541u, 0x55555545u,
    0x55565555u, 0x65565595u, 0x55565595u, 0x55565595u, 0x51555555u, 0x50551545u,
    0xa56a5a96u, 0x55565595u, 0x50551555u, 0x555a5696u, 0x50555555u, 0x55565695u,
    0x65656545u, 0xa5a5a595u, 0x51515140u, 0x55555541u, 0x55555545u, 0x55555545u,
    0x55555545u, 0x55555545u, 0x55555545u, 0x51515141u, 0xa5a5a596u, 0x65656555u,
    0x51555545u, 0x65a5a696u, 0x55556555u, 0x65a5a696u, 0x51450514u, 0x65555555u,
    0xa5965a59u, 0x51451514u, 0x55551555u, 0x65555655u, 0x65965659u, 0x65965a59u,
    0x65965a59u, 0x65965a59u, 0x65965659u, 0x55555659u, 0x55555659u, 0x51451555u,
    0x65965a69u, 0x55555659u, 0x55551451u, 0x69a65965u, 0x59655555u, 0x69a65965u,
    0x55555555u, 0x59a65965u, 0x15551451u, 0x55655555u, 0x59665965u, 0x69a659a6u,
    0x14551451u, 0x15551555u, 0x55555555u, 0x55555555u, 0x55555555u, 0x55555555u,
    0x669a6659u, 0x659a6659u, 0x65966559u, 0x55565555u, 0x51555515u, 0x669a6659u,
    0x55966559u, 0x51555515u, 0x659a6659u, 0x55565555u, 0x659a6659u, 0x51565555u,
    0x559a6659u, 0x11555515u, 0x55566559u, 0x659a6669u, 0x56555955u, 0x96665999u,
    0x9a666999u, 0x45551554u, 0x45555555u, 0x55555555u, 0x55555955u, 0x56555955u,
    0x55555955u, 0x55555955u, 0x45555555u, 0x45551555u, 0x45111554u, 0x56666999u,
    0x56655999u, 0x45555955u, 0xaaa66666u, 0x66665555u, 0x55555551u, 0xa6666666u,
    0x66555555u, 0xaaa66666u, 0x66555555u, 0xaa666666u, 0x65555555u, 0x66666666u,
    0x55555551u, 0x66655555u, 0x66666666u, 0x55555511u, 0x55555555u, 0x66666655u,
    0x55555555u, 0x55555555u, 0x99999995u, 0x99999999u, 0x99999999u, 0x99999999u,
    0x99999999u, 0x99999999u, 0x99999999u, 0x99999999u, 0x55559999u, 0x55555555u,
    0x55555555u, 0x999aaaaau, 0x99999999u, 0x55599999u, 0x66665555u, 0x55555555u,
    0x6aaa9999u, 0x66665555u, 0x55554455u, 0x66665999u, 0x55565555u, 0x666a9999u,
    0x55665555u, 0x666a9999u, 0x55555555u, 0x66665999u, 0x55554455u, 0x56665555u,
    0x666a9999u, 0x55554555u, 0x54555511u, 0x65555955u, 0x65999956u, 0xa999aa66u,
    0x54555511u, 0x55555555u, 0x65555955u, 0x65599955u, 0x65599956u, 0x65999966u,
    0x65999a66u, 0x69999a66u, 0x69999a66u, 0x65999a66u, 0x65999a66u, 0x65599966u,
    0x55595555u, 0x55555545u, 0x45551544u, 0x99aa6699u, 0x599a6659u, 0x55995655u,
    0x55595555u, 0x45551544u, 0x999a6659u, 0x55995655u, 0x45555545u, 0x999a6699u,
    0x55995655u, 0x45551545u, 0x59996659u, 0x55555555u, 0x69966599u, 0x65555555u,
    0xa9966599u, 0x65555555u, 0x69966599u, 0x55515455u, 0x69966599u, 0x55515455u,
    0x65956559u, 0x6996659au, 0x55515455u, 0x65956559u, 0x6996659au, 0x55515455u,
    0x65555555u, 0x65956599u, 0x14451545u, 0x54555555u, 0x55595655u, 0x65596659u,
    0x65996699u, 0x659a669au, 0x699a6a9au, 0x14551555u, 0x54551555u, 0x54555555u,
    0x54555555u, 0x55555555u, 0x55555655u, 0x54555555u, 0x54555555u, 0x54555555u,
    0x59655965u, 0x59555965u, 0x55555955u, 0x55555555u, 0x55145554u, 0x9a69aa69u,
    0x9a659a69u, 0x59659965u, 0x55555955u, 0x55545555u, 0x9a699a69u, 0x59659a65u,
    0x55555965u, 0x55145555u, 0x99659a69u, 0x55555965u, 0x65555551u, 0xa5965955u,
    0xa69a5965u, 0x51451410u, 0x51451450u, 0xa69a69a5u, 0xa69a6965u, 0x65965965u,
    0x65965965u, 0x55555555u, 0xa69a69a6u, 0x65965965u, 0x51451555u, 0x65965965u,
    0x51451455u, 0x55555965u, 0x55556555u, 0x96596659u, 0x9669a659u, 0x45145514u,
    0x45155515u, 0x45155515u, 0x45155515u, 0x45155515u, 0x45145515u, 0x9669a669u,
    0x56596659u, 0x45556559u, 0x41145515u, 0x5659a669u, 0x45155559u, 0x5659a669u,
    0x99566559u, 0x54455114u, 0x95565555u, 0x99966659u, 0x54455114u, 0x55555515u,
    0x95565559u, 0x99566559u, 0x99966659u, 0x99966659u, 0x99966659u, 0x99566659u,
    0x99566659u, 0x55566559u, 0x55555559u, 0x54455515u, 0x55551115u, 0x66666559u,
    0x65555559u, 0x55511115u, 0x66665559u, 0x55555115u, 0x66665559u, 0x55551115u,
    0x65555559u, 0x6666666au, 0x55555515u, 0x55555559u, 0x66666669u, 0x11111115u,
    0x55551115u, 0x55555559u, 0x99999999u, 0x99999999u, 0x99999999u, 0x99999999u,
    0x99999999u, 0x99999999u, 0x55559999u, 0x55555555u, 0x55555555u, 0x44444445u,
    0x99999999u, 0x55555555u, 0x44445555u, 0x55999999u, 0x55555555u, 0x99999999u,
    0x65555551u, 0xa9999996u, 0x65555551u, 0x65999995u, 0x54455551u, 0x65555995u,
    0x69999996u, 0x54455551u, 0x55555595u, 0x65559995u, 0x659999a6u, 0x54444551u,
    0x54455551u, 0x54555555u, 0x54555555u, 0x55555595u, 0x9a666599u, 0x99666599u,
    0x99666599u, 0x99566559u, 0x99566559u, 0x59556555u, 0x55555555u, 0x55115455u,
    0x9a666999u, 0x99566559u, 0x55555555u, 0x55115455u, 0x99666599u, 0x55556555u,
    0x45115445u, 0x59566559u, 0x55555455u, 0x59966599u, 0x55555555u, 0x59966599u,
    0x55515455u, 0x59966599u, 0x45515455u, 0x55956559u, 0x59966599u, 0x45515455u,
    0x55556559u, 0x59966599u, 0x44511445u, 0x45515555u, 0x55556559u, 0x55956599u,
    0x55555155u, 0x55655555u, 0x95655565u, 0x95659565u, 0x96659565u, 0x96659665u,
    0x96659665u, 0x96659665u, 0x96659665u, 0x95659565u, 0x55659565u, 0x55655565u,
    0x55555555u, 0x51555155u, 0x51145154u, 0x96699669u, 0x99659655u, 0x59555555u,
    0x55545145u, 0x9a69a659u, 0x59659655u, 0x55555545u, 0x45145144u, 0x59659655u,
    0x55555145u, 0x9a659659u, 0x55555555u, 0x45145145u, 0x59655555u, 0x45145145u,
    0x59659555u, 0x45145145u, 0x55555555u, 0x9a69a69au, 0x55555555u, 0x59659659u,
    0x45145145u, 0x55555555u, 0x59659659u, 0x45145145u, 0x55555555u, 0x59659659u,
    0x45145145u, 0x55555555u, 0x55559659u, 0x59659659u, 0x9a69a69au, 0x45145145u,
    0x55451451u, 0x55451451u, 0x55455555u, 0x59555555u, 0x59555556u, 0x59555596u,
    0x59556596u, 0x59596596u, 0x59596596u, 0x59596596u, 0x59596596u, 0x59556596u,
    0x59556596u, 0x59555596u, 0x59555556u, 0x55555555u, 0x51450514u, 0x969a5969u,
    0x965a5965u, 0x56595565u, 0x55555555u, 0x51554515u, 0x51450514u, 0x965a5965u,
    0x55595565u, 0x55554555u, 0x51450514u, 0x96595965u, 0x55555555u, 0x51454515u,
    0x965a5965u, 0x55555555u, 0x51454514u, 0x56595965u, 0x51554555u, 0x965a5969u,
    0x55555555u, 0x41450514u, 0x55595565u, 0x51454515u, 0x55595965u, 0x51454515u,
    0x55595965u, 0x51454515u, 0x55595565u, 0x41450515u, 0x55555565u, 0x965a5969u,
    0x55554545u, 0x59595955u, 0x45454505u, 0x59555555u, 0x5a595959u, 0x45454505u,
    0x59555555u, 0x5a595959u, 0x45454505u, 0x55555545u, 0x59595955u, 0x5a5a5a59u,
    0x45454545u, 0x55555545u, 0x59595555u, 0x5a595959u, 0x45050505u, 0x45454545u,
    0x55555545u, 0x55555555u, 0x59595959u, 0x5a595959u, 0x5a5a5a5au, 0x05050505u,
    0x45454545u, 0x45454545u, 0x45454545u, 0x55555545u, 0x55555555u, 0x55555555u,
    0x55555555u, 0x55555555u,
};

/* vrsqrt14ps's segment lines, {c, d} per segment: [1, 2) in 32 segments, then [2, 4) */
static const uint32_t gp_torch_rsqrt14_cd[64][2] = {
    {520261u, 1001u}, {512437u, 955u}, {504953u, 915u}, {497790u, 877u}, {490922u, 841u}, {484331u, 807u},
    {478001u, 775u}, {471909u, 747u}, {466046u, 719u}, {460397u, 693u}, {454947u, 669u}, {449688u, 647u},
    {444606u, 625u}, {439694u, 603u}, {434939u, 585u}, {430335u, 567u}, {425875u, 549u}, {421551u, 533u},
    {417355u, 517u}, {413284u, 501u}, {409329u, 487u}, {405487u, 473u}, {401748u, 461u}, {398111u, 449u},
    {394571u, 437u}, {391127u, 425u}, {387770u, 415u}, {384498u, 403u}, {381307u, 393u}, {378194u, 385u},
    {375155u, 375u}, {372190u, 367u}, {367881u, 707u}, {362349u, 675u}, {357056u, 647u}, {351992u, 619u},
    {347136u, 595u}, {342475u, 571u}, {337997u, 549u}, {333693u, 527u}, {329545u, 509u}, {325551u, 491u},
    {321697u, 473u}, {317977u, 457u}, {314385u, 441u}, {310910u, 427u}, {307549u, 413u}, {304295u, 401u},
    {301139u, 389u}, {298079u, 377u}, {295115u, 365u}, {292237u, 355u}, {289439u, 345u}, {286722u, 335u},
    {284080u, 325u}, {281508u, 317u}, {279006u, 309u}, {276569u, 301u}, {274195u, 293u}, {271882u, 285u},
    {269625u, 279u}, {267425u, 271u}, {265276u, 265u}, {263178u, 259u},
};

/* vrsqrt14ps (Intel's reference algorithm, see above) of a positive finite non-zero
 * float x, subnormals included. */
GP_ARITH float gp_torch_rsqrt14(float x)
{
    uint32_t b = gp_f32_bits(x), m = b & 0x7fffffu;
    int e = (int)(b >> 23);
    if (e == 0) { /* subnormal: normalise */
        e = 1;
        while (!(m & 0x800000u)) {
            m <<= 1;
            e--;
        }
        m &= 0x7fffffu;
    }
    int u = e - 127, p = u & 1, n = (u - p) / 2; /* x = 4^n * a, a = 2^p * 1.m in [1, 4) */
    if (m == 0 && p == 0)
        return gp_f32_from_bits((uint32_t)(127 - n) << 23); /* a = 1: exactly 2^-n */
    uint32_t t = m >> 8, seg = 32u * (uint32_t)p + (t >> 10); /* 15 fraction bits */
    int64_t k = (int64_t)(t & 1023u) - 512;
    int64_t v = 128 * (int64_t)gp_torch_rsqrt14_cd[seg][0] - (int64_t)gp_torch_rsqrt14_cd[seg][1] * k;
    uint32_t q = (uint32_t)(v >> 9); /* 17 significant bits: q in [2^16, 2^17), value q * 2^-17 */
    return gp_f32_from_bits((uint32_t)(126 - n) << 23 | (q - 65536u) << 7);
}

/* AMD Zen 4's rsqrtps of a positive normal float x (bits 0x00800000 .. 0x7f7fffff). */
GP_ARITH float gp_torch_rsqrtps(float x)
{
    uint32_t b = gp_f32_bits(x), e = b >> 23, p = !(e & 1u), t = (b >> 11) & 0xfffu, i = 4096u * p + t;
    int r = (int)((gp_torch_rsqrtps_res[i / 16] >> (2 * (i % 16))) & 3u) - 1;
    /* 1/sqrt of the midpoint of the table interval of [1, 4), in 12 bits: binary64 ops */
    double mid = (1.0 + ((double)t + 0.5) / 4096.0) * (p ? 2.0 : 1.0);
    int mant = (int)floor(1.0 / sqrt(mid) * 8192.0 - 4096.0 + 0.5) + r; /* 0 .. 4095 */
    int k = ((int)e - 127 - (int)p) / 2; /* x = 2^(2k) * [1, 4) */
    return gp_f32_from_bits((uint32_t)(126 - k) << 23 | (uint32_t)mant << 11);
}
#endif

/* torch's CPU fp32 sqrt on an AMD Zen 4: MKL's SSE kernel with Zen 4's rsqrtps. Host
 * code only: a CUDA compilation gets the IEEE sqrtf (the CUDA backend refuses the
 * torch_cpu_* evaluations that call it). */
GP_ARITH float gp_torch_sqrtf_zen4(float x)
{
#if defined(__CUDACC__) || defined(GP_SHIM_CUDA)
    return sqrtf(x);
#else
    if (!gp_torch_sqrt_vector(gp_f32_bits(x), GP_MKL_SQRT_SSE))
        return sqrtf(x); /* MKL's scalar path */
    return gp_torch_sqrt_newton(x, gp_torch_rsqrtps(x), GP_MKL_SQRT_SSE);
#endif
}

/* torch's CPU fp32 sqrt on an Intel CPU with AVX-512: MKL's AVX-512 kernel with
 * vrsqrt14ps. Host code only, as gp_torch_sqrtf_zen4. */
GP_ARITH float gp_torch_sqrtf_intel_avx512(float x)
{
#if defined(__CUDACC__) || defined(GP_SHIM_CUDA)
    return sqrtf(x);
#else
    if (!gp_torch_sqrt_vector(gp_f32_bits(x), GP_MKL_SQRT_AVX512))
        return sqrtf(x); /* MKL's scalar path */
    return gp_torch_sqrt_newton(x, gp_torch_rsqrt14(x), GP_MKL_SQRT_AVX512);
#endif
}

/* The MKL vmsSqrt kernel (GP_MKL_SQRT_*) torch's x86-64 wheel runs on this host's CPU:
 * MKL's dispatch by vendor and features (above); GP_MKL_SQRT_NONE where
 * !GP_TORCH_SQRT_HOST and on an Intel CPU without AVX2 + FMA (MKL runs its E2 or H8
 * kernel there: H8 equals EX's arithmetic on 2.5*10^7 inputs called on an AMD EPYC, E2
 * differs on 7% of them, and which of the two such a CPU gets was not determined). */
GP_ARITH int gp_torch_sqrt_host_kernel(void)
{
#if GP_TORCH_SQRT_HOST
    if (!__builtin_cpu_is("intel"))
        return GP_MKL_SQRT_SSE;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return GP_MKL_SQRT_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return GP_MKL_SQRT_AVX2;
#endif
    return GP_MKL_SQRT_NONE;
}

/* torch's CPU fp32 sqrt as MKL computes it on this host (gp_torch_sqrt_host_kernel, with
 * the host's rsqrtss or gp_torch_rsqrt14). Where that kernel is GP_MKL_SQRT_NONE the IEEE
 * sqrtf: the callers refuse the torch_cpu_host evaluation there. */
GP_ARITH float gp_torch_sqrtf_host(float x)
{
#if GP_TORCH_SQRT_HOST
    int kernel = gp_torch_sqrt_host_kernel();
    if (kernel == GP_MKL_SQRT_NONE || !gp_torch_sqrt_vector(gp_f32_bits(x), kernel))
        return sqrtf(x); /* MKL's scalar path */
    float r = kernel == GP_MKL_SQRT_AVX512 ? gp_torch_rsqrt14(x) : _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(x)));
    return gp_torch_sqrt_newton(x, r, kernel);
#else
    return sqrtf(x);
#endif
}

#endif
