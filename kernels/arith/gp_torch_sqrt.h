/* gp_torch_sqrt.h — torch's CPU fp32 sqrt where it is not IEEE: torch.sqrt,
 * Tensor.sqrt and torch._foreach_sqrt on contiguous or strided fp32 CPU tensors of the
 * x86-64 PyPI wheel (torch 2.15.0, built with MKL) call MKL's vmsSqrt in VML_HA mode
 * (aten/src/ATen/cpu/vml.h), and MKL picks its kernel by CPU. On a CPU that is not
 * Intel's it runs its generic SSE kernel (mkl_vml_kernel_sSqrt_EXHAynn), which is, per
 * element (read from the wheel's machine code; every x86 op rounds on its own, RNE, no
 * FTZ):
 *     x a positive normal with bits <= 0x7f7ff000:
 *         r  = rsqrtps(x)                      (the CPU's ~12-bit 1/sqrt approximation)
 *         s  = x*r;  h = r*0.5f
 *         e  = 0.5f - s*h
 *         s1 = s*e + s;  h1 = h*e + h
 *         y  = (x - s1*s1)*h1 + s1
 *     otherwise (zero, subnormal, the top 4095 finite values, negative, inf, NaN): a
 *     scalar path equal to the IEEE sqrtf, except that a negative x gives the NaN
 *     0x7fc00000 (gradprec compares NaNs by NaN-ness only).
 * rsqrtps's value is the CPU's own (Intel and AMD differ). gp_torch_rsqrtps is AMD Zen
 * 4's, measured on an AMD EPYC (Zen 4): it depends only on the exponent's parity and the
 * top 12 mantissa bits, scales exactly with the exponent, and has 12 mantissa bits; the
 * table holds it as a residual in {-1, 0, 1} from 1/sqrt of the interval's midpoint
 * (scripts/gen_rsqrtps_table.c prints it from the host's instruction and checks those
 * properties). gp_torch_sqrtf_zen4 equals the wheel's vmsSqrt bit for bit on all 2^32
 * inputs on that machine (NaN payloads aside); on about 9% of inputs with an even
 * exponent and 25% with an odd one it is one ulp off the IEEE sqrt.
 * On an Intel CPU the same wheel runs another kernel (AVX-512: ..._Z0HAynn; AVX2:
 * ..._L9HAynn), measured here to differ from sqrtf on 0.59% and 0.08% of random
 * positive floats: not modelled. fp64 (vdSqrt) is not IEEE either; bf16 and fp16
 * tensors take torch's own vector code (sqrt in float, one rounding): IEEE. */
#ifndef GP_TORCH_SQRT_H
#define GP_TORCH_SQRT_H

#include <math.h>

#include "gp_arith.h"

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

/* torch's CPU fp32 sqrt on an AMD Zen 4 (the wheel's MKL, see above). Host code only: a
 * CUDA compilation gets the IEEE sqrtf (the CUDA backend refuses GP_ADAMW_TORCH_CPU_ZEN4). */
GP_ARITH float gp_torch_sqrtf_zen4(float x)
{
#if defined(__CUDACC__) || defined(GP_SHIM_CUDA)
    return sqrtf(x);
#else
    uint32_t b = gp_f32_bits(x);
    if (b < 0x00800000u || b > 0x7f7ff000u) /* MKL's scalar path */
        return sqrtf(x);
    float r = gp_torch_rsqrtps(x);
    float s = GP_FMUL_RN(x, r), h = GP_FMUL_RN(r, 0.5f);
    float e = GP_FSUB_RN(0.5f, GP_FMUL_RN(s, h));
    float s1 = GP_FADD_RN(GP_FMUL_RN(s, e), s), h1 = GP_FADD_RN(GP_FMUL_RN(h, e), h);
    return GP_FADD_RN(GP_FMUL_RN(GP_FSUB_RN(x, GP_FMUL_RN(s1, s1)), h1), s1);
#endif
}

#endif
