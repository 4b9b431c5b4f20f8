/* gp_cpu_philox.c — see gp_cpu_philox.h. Integer Philox is the same on every path by
 * construction (tests/test_gen.c checks each against kernels/arith/gp_philox.h). */
#include "gp_cpu_philox.h"

#include <string.h>

#include "../arith/gp_philox.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GP_GEN_HAVE_X86 1
#endif

int gp_gen_path_available(gp_gen_path path)
{
    switch (path) {
    case GP_GEN_AUTO:
    case GP_GEN_PORTABLE:
        return 1;
#ifdef GP_GEN_HAVE_X86
    case GP_GEN_AVX2:
        return __builtin_cpu_supports("avx2") != 0;
    case GP_GEN_AVX512:
        return __builtin_cpu_supports("avx512f") != 0;
#endif
    default:
        return 0;
    }
}

gp_gen_path gp_gen_path_resolve(gp_gen_path path)
{
    if (path == GP_GEN_AUTO) {
#ifdef GP_GEN_HAVE_X86
        if (__builtin_cpu_supports("avx512f"))
            return GP_GEN_AVX512;
        if (__builtin_cpu_supports("avx2"))
            return GP_GEN_AVX2;
#endif
        return GP_GEN_PORTABLE;
    }
    return gp_gen_path_available(path) ? path : GP_GEN_PORTABLE;
}

static void philox_portable(uint64_t seed, uint64_t stream, uint64_t i0, const uint64_t *idx, size_t n,
                            uint32_t *const w[4])
{
    gp_philox_key key = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    for (size_t j = 0; j < n; j++) {
        uint64_t e = idx ? idx[j] : i0 + j;
        gp_philox_ctr c = {{(uint32_t)e, (uint32_t)(e >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)}};
        gp_philox_ctr r = gp_philox4x32_10(c, key);
        for (int k = 0; k < 4; k++)
            w[k][j] = r.v[k];
    }
}

/* Philox's multipliers and key increments (gp_philox.h). */
#define PH_M0 0xD2511F53u
#define PH_M1 0xCD9E8D57u
#define PH_W0 0x9E3779B9u
#define PH_W1 0xBB67AE85u

#ifdef GP_GEN_HAVE_X86
/* 16 counters at a time, in two registers of 8 64-bit lanes (elements j..j+7 and
 * j+8..j+15), each 32-bit word in the low half of its lane: vpmuludq then gives the
 * whole 32x32 -> 64-bit product, lo in the low half and hi one shuffle away (HI_DOWN
 * copies each lane's high word into its low one: vpshufd, a shuffle port's work, where
 * a 64-bit shift would take the multiplier's port too); the high halves carry garbage
 * that vpmuludq ignores and the final packing drops. */
#define HI_DOWN(p) _mm512_shuffle_epi32((p), (_MM_PERM_ENUM)0xF5) /* words 1,1,3,3 of each 128 bits */
__attribute__((target("avx512f"))) static void philox_avx512(uint64_t seed, uint64_t stream, uint64_t i0,
                                                             const uint64_t *idx, size_t n, uint32_t *const w[4])
{
    const __m512i m0 = _mm512_set1_epi64(PH_M0), m1 = _mm512_set1_epi64(PH_M1);
    const __m512i c2 = _mm512_set1_epi64((long long)(uint32_t)stream), c3 = _mm512_set1_epi64((long long)(stream >> 32));
    const __m512i iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    __m512i k0[10], k1[10];
    uint32_t s0 = (uint32_t)seed, s1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++, s0 += PH_W0, s1 += PH_W1) {
        k0[r] = _mm512_set1_epi32((int)s0);
        k1[r] = _mm512_set1_epi32((int)s1);
    }
    for (size_t j = 0; j < n; j += 16) {
        __m512i a0, b0; /* elements j..j+7, j+8..j+15 */
        if (idx) {
            size_t m = n - j < 16 ? n - j : 16;
            __mmask8 ma = (__mmask8)(m >= 8 ? 0xff : (1u << m) - 1), mb = (__mmask8)(m >= 16 ? 0xff : m > 8 ? (1u << (m - 8)) - 1 : 0);
            a0 = _mm512_maskz_loadu_epi64(ma, idx + j);
            b0 = _mm512_maskz_loadu_epi64(mb, idx + j + 8);
        } else {
            a0 = _mm512_add_epi64(_mm512_set1_epi64((long long)(i0 + j)), iota);
            b0 = _mm512_add_epi64(_mm512_set1_epi64((long long)(i0 + j + 8)), iota);
        }
        __m512i a1 = _mm512_srli_epi64(a0, 32), b1 = _mm512_srli_epi64(b0, 32);
        __m512i a2 = c2, a3 = c3, b2 = c2, b3 = c3;
#pragma GCC unroll 10
        for (int r = 0; r < 10; r++) {
            __m512i pa0 = _mm512_mul_epu32(a0, m0), pa1 = _mm512_mul_epu32(a2, m1);
            __m512i pb0 = _mm512_mul_epu32(b0, m0), pb1 = _mm512_mul_epu32(b2, m1);
            a0 = _mm512_ternarylogic_epi32(HI_DOWN(pa1), a1, k0[r], 0x96); /* three-way xor */
            a2 = _mm512_ternarylogic_epi32(HI_DOWN(pa0), a3, k1[r], 0x96);
            a1 = pa1;
            a3 = pa0;
            b0 = _mm512_ternarylogic_epi32(HI_DOWN(pb1), b1, k0[r], 0x96);
            b2 = _mm512_ternarylogic_epi32(HI_DOWN(pb0), b3, k1[r], 0x96);
            b1 = pb1;
            b3 = pb0;
        }
        _mm512_storeu_si512((void *)(w[0] + j), _mm512_permutex2var_epi32(a0, even, b0));
        _mm512_storeu_si512((void *)(w[1] + j), _mm512_permutex2var_epi32(a1, even, b1));
        _mm512_storeu_si512((void *)(w[2] + j), _mm512_permutex2var_epi32(a2, even, b2));
        _mm512_storeu_si512((void *)(w[3] + j), _mm512_permutex2var_epi32(a3, even, b3));
    }
    _mm256_zeroupper();
}

/* 8 counters a register, as philox_avx512. */
__attribute__((target("avx2"))) static void philox_avx2(uint64_t seed, uint64_t stream, uint64_t i0,
                                                        const uint64_t *idx, size_t n, uint32_t *const w[4])
{
    const __m256i m0 = _mm256_set1_epi64x(PH_M0), m1 = _mm256_set1_epi64x(PH_M1);
    const __m256i c2 = _mm256_set1_epi32((int)(uint32_t)stream), c3 = _mm256_set1_epi32((int)(uint32_t)(stream >> 32));
    const __m256i iota = _mm256_set_epi64x(3, 2, 1, 0);
    const __m256i split = _mm256_set_epi32(7, 5, 3, 1, 6, 4, 2, 0); /* low words down, high words up */
    uint32_t s0 = (uint32_t)seed, s1 = (uint32_t)(seed >> 32);
    __m256i k0[10], k1[10];
    for (int r = 0; r < 10; r++, s0 += PH_W0, s1 += PH_W1) {
        k0[r] = _mm256_set1_epi32((int)s0);
        k1[r] = _mm256_set1_epi32((int)s1);
    }
    for (size_t j = 0; j < n; j += 8) {
        __m256i ea, eb;
        if (idx) {
            uint64_t e[8] = {0};
            memcpy(e, idx + j, (n - j < 8 ? n - j : 8) * sizeof *e);
            ea = _mm256_loadu_si256((const __m256i *)e);
            eb = _mm256_loadu_si256((const __m256i *)(e + 4));
        } else {
            ea = _mm256_add_epi64(_mm256_set1_epi64x((long long)(i0 + j)), iota);
            eb = _mm256_add_epi64(_mm256_set1_epi64x((long long)(i0 + j + 4)), iota);
        }
        __m256i pa = _mm256_permutevar8x32_epi32(ea, split), pb = _mm256_permutevar8x32_epi32(eb, split);
        __m256i c0 = _mm256_permute2x128_si256(pa, pb, 0x20), c1 = _mm256_permute2x128_si256(pa, pb, 0x31);
        __m256i x2 = c2, x3 = c3;
#pragma GCC unroll 10
        for (int r = 0; r < 10; r++) {
            __m256i pe0 = _mm256_mul_epu32(c0, m0), po0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
            __m256i pe1 = _mm256_mul_epu32(x2, m1), po1 = _mm256_mul_epu32(_mm256_srli_epi64(x2, 32), m1);
            __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(pe0, 32), po0, 0xAA);
            __m256i lo0 = _mm256_blend_epi32(pe0, _mm256_slli_epi64(po0, 32), 0xAA);
            __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(pe1, 32), po1, 0xAA);
            __m256i lo1 = _mm256_blend_epi32(pe1, _mm256_slli_epi64(po1, 32), 0xAA);
            c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), k0[r]);
            c1 = lo1;
            x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), k1[r]);
            x3 = lo0;
        }
        _mm256_storeu_si256((__m256i *)(w[0] + j), c0);
        _mm256_storeu_si256((__m256i *)(w[1] + j), c1);
        _mm256_storeu_si256((__m256i *)(w[2] + j), x2);
        _mm256_storeu_si256((__m256i *)(w[3] + j), x3);
    }
    _mm256_zeroupper();
}
#endif

void gp_philox_block(gp_gen_path path, uint64_t seed, uint64_t stream, uint64_t i0, const uint64_t *idx, size_t n,
                     uint32_t *const w[4])
{
    switch (gp_gen_path_resolve(path)) {
#ifdef GP_GEN_HAVE_X86
    case GP_GEN_AVX512: philox_avx512(seed, stream, i0, idx, n, w); return;
    case GP_GEN_AVX2: philox_avx2(seed, stream, i0, idx, n, w); return;
#endif
    default: philox_portable(seed, stream, i0, idx, n, w); return;
    }
}
