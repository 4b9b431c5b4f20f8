/* gp_exact.c — see gp_exact.h. The accumulator is plain integer arithmetic on six
 * 64-bit limbs; only gp_fixacc_get_mpz touches GMP. Range: every value it can hold
 * from its contract (at most 2^31 terms n*x) is below 2^62 * 2^128 in magnitude, i.e.
 * below 2^339 as an integer, far inside the 383 bits of magnitude; every non-zero
 * quotient a/d (d < 2^53) lies in [2^-202, 2^234], so gp_fixacc_div never meets a
 * binary64 subnormal, overflow or underflow — it still builds its result with ldexp,
 * which is exact for every normal result. */
#include "gp_exact.h"

#include <math.h>
#include <mpfr.h>
#include <string.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

typedef unsigned __int128 u128;

/* ---- building and adding ---- */

void gp_fixacc_zero(gp_fixacc *a)
{
    memset(a->limb, 0, sizeof a->limb);
}

/* One limb of a carry chain: *l += w + c, returns the carry out. On x86-64 the adc
 * instruction (GCC does not make one from the __int128 form); GP_EXACT_PORTABLE forces
 * the plain C form (to test it). */
#if defined(__x86_64__) && !defined(GP_EXACT_PORTABLE)
static inline unsigned char adc(unsigned char c, uint64_t *l, uint64_t w)
{
    unsigned long long r;
    c = _addcarry_u64(c, *l, w, &r);
    *l = r;
    return c;
}
#else
static inline unsigned char adc(unsigned char c, uint64_t *l, uint64_t w)
{
    u128 t = (u128)*l + w + c;
    *l = (uint64_t)t;
    return (unsigned char)(t >> 64);
}
#endif

/* a += (-1)^neg * P * 2^s (in units of 2^-149), P < 2^55, s < 384 - 55. A = P << s
 * spans limbs k = s/64 and k+1. A negative addend is -A = ~A + 1 (every limb
 * complemented, carry-in 1), so the sign costs no branch (random signs would
 * mispredict); then one straight carry chain from limb k to the top — gradients of one
 * tensor mostly share k, so the switch predicts well. */
static inline void add_shifted(gp_fixacc *a, uint64_t P, unsigned s, int neg)
{
    u128 v = (u128)P << (s & 63);
    uint64_t mask = 0 - (uint64_t)neg; /* all ones when negative */
    uint64_t lo = (uint64_t)v ^ mask, hi = (uint64_t)(v >> 64) ^ mask;
    uint64_t *l = a->limb;
    unsigned char c = (unsigned char)(mask & 1);
    switch (s >> 6) {
    case 0:
        c = adc(c, l + 0, lo);
        c = adc(c, l + 1, hi);
        c = adc(c, l + 2, mask);
        c = adc(c, l + 3, mask);
        c = adc(c, l + 4, mask);
        (void)adc(c, l + 5, mask);
        break;
    case 1:
        c = adc(c, l + 1, lo);
        c = adc(c, l + 2, hi);
        c = adc(c, l + 3, mask);
        c = adc(c, l + 4, mask);
        (void)adc(c, l + 5, mask);
        break;
    case 2:
        c = adc(c, l + 2, lo);
        c = adc(c, l + 3, hi);
        c = adc(c, l + 4, mask);
        (void)adc(c, l + 5, mask);
        break;
    case 3:
        c = adc(c, l + 3, lo);
        c = adc(c, l + 4, hi);
        (void)adc(c, l + 5, mask);
        break;
    default: /* 4: only reached by binary64 partial sums (gp_exactsum) */
        c = adc(c, l + 4, lo);
        (void)adc(c, l + 5, hi);
        break;
    }
}

/* fp32 x = M * 2^(s-149) with M < 2^24 and 0 <= s <= 253 (s = biased exponent - 1 for
 * normals, 0 for subnormals); n*M < 2^55, so (n*M) << s lies in limbs s/64 .. 4. */
void gp_fixacc_add(gp_fixacc *a, float x, uint32_t n)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t field = (u >> 23) & 0xffu;
    uint64_t m = u & 0x7fffffu;
    if (n == 0 || (m == 0 && field == 0))
        return;
    unsigned s = 0;
    if (field) {
        m |= 1u << 23;
        s = field - 1;
    }
    add_shifted(a, (uint64_t)n * m, s, (int)(u >> 31));
}

/* a += d, d a binary64 that is a multiple of 2^-149 below 2^300 in magnitude (an exact
 * partial sum of fp32 * integer terms): d = M * 2^E with M < 2^53; bits below 2^-149
 * are zero, so shifting them out is exact. */
static void fixacc_add_double(gp_fixacc *a, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    int field = (int)((u >> 52) & 0x7ffu);
    uint64_t M = u & 0xfffffffffffffull;
    if (field == 0 && M == 0)
        return;
    int E = field ? field - 1075 : -1074;
    if (field)
        M |= 1ull << 52;
    if (E < -149) {
        M >>= (-149 - E);
        E = -149;
    }
    add_shifted(a, M, (unsigned)(E + 149), (int)(u >> 63));
}

void gp_fixacc_add_acc(gp_fixacc *a, const gp_fixacc *b)
{
    unsigned char c = 0;
    for (int i = 0; i < GP_FIXACC_LIMBS; i++)
        c = adc(c, &a->limb[i], b->limb[i]);
}

/* ---- reading out ---- */

/* |a| as an unsigned 384-bit integer (exact: -2^383 becomes 2^383); returns 1 if a < 0. */
static int magnitude(const gp_fixacc *a, uint64_t mag[GP_FIXACC_LIMBS])
{
    int neg = (int)(a->limb[GP_FIXACC_LIMBS - 1] >> 63);
    uint64_t c = (uint64_t)neg;
    for (int i = 0; i < GP_FIXACC_LIMBS; i++) {
        uint64_t w = neg ? ~a->limb[i] : a->limb[i];
        mag[i] = w + c;
        c = c && mag[i] == 0;
    }
    return neg;
}

void gp_fixacc_get_mpz(mpz_t z, const gp_fixacc *a)
{
    uint64_t mag[GP_FIXACC_LIMBS];
    int neg = magnitude(a, mag);
    mpz_import(z, GP_FIXACC_LIMBS, -1, sizeof mag[0], 0, 0, mag);
    if (neg)
        mpz_neg(z, z);
}

/* Long division of |a| * 2^128 by d: the quotient Q (8 limbs) has its top bit at
 * position T >= 75 whenever a != 0 (|a| >= 1, d < 2^53), so it always holds the 54
 * bits round-to-nearest needs; |a|/d = (Q + R/d) * 2^-128 with remainder R < d.
 * Round: keep 53 bits, the next bit is the guard, everything below it (and R) the
 * sticky. The value is (Q + R/d) * 2^(-149-128). */
#define QLIMBS (GP_FIXACC_LIMBS + 2)

double gp_fixacc_div(const gp_fixacc *a, uint64_t d, int *sticky)
{
    uint64_t mag[GP_FIXACC_LIMBS];
    int neg = magnitude(a, mag);
    uint64_t num[QLIMBS] = {0, 0}, q[QLIMBS];
    memcpy(num + 2, mag, sizeof mag);
    uint64_t r = 0;
    int top = -1; /* highest non-zero quotient limb */
    for (int i = QLIMBS - 1; i >= 0; i--) {
        u128 cur = ((u128)r << 64) | num[i];
        q[i] = (uint64_t)(cur / d);
        r = (uint64_t)(cur % d);
        if (top < 0 && q[i])
            top = i;
    }
    if (top < 0) { /* Q = 0 implies |a| = 0: the shifted numerator is at least 2^75 * d */
        *sticky = 0;
        return 0.0;
    }
    int T = top * 64 + 63 - __builtin_clzll(q[top]);
    int p = T - 53; /* lowest of the 54 kept bits; >= 22 */
    int pl = p >> 6, pb = p & 63;
    uint64_t w = q[pl] >> pb;
    if (pb && pl + 1 < QLIMBS)
        w |= q[pl + 1] << (64 - pb);
    w &= (1ull << 54) - 1;
    int st = r != 0 || (q[pl] & ((1ull << pb) - 1)) != 0;
    for (int i = 0; i < pl && !st; i++)
        st = q[i] != 0;
    uint64_t mant = w >> 1, guard = w & 1;
    int s; /* sign of |a|/d - |result| */
    if (guard && (st || (mant & 1))) {
        mant++; /* may reach 2^53: still exact below */
        s = -1;
    } else {
        s = (guard || st) ? 1 : 0;
    }
    double res = ldexp((double)mant, p + 1 - 149 - 128);
    *sticky = neg ? -s : s;
    return neg ? -res : res;
}

/* ---- gp_exactsum: binary64 while exact, the fixacc for the rest ----
 * An element's exact sum is always spill + s: s takes the terms while binary64 holds
 * the sum exactly; when a term would make it round, s moves into the spill and starts
 * again from that term (correct whether or not the addition was exact).
 *
 * The exactness test. With sum = fl(s + t) (round to nearest, no overflow: every
 * |partial sum| < 2^31 * 2^29 * 2^128), the addition was exact iff
 *     fl(sum - s) == t  and  fl(sum - t) == s.
 * (=>) sum - s = t and sum - t = s are representable, so the subtractions are exact.
 * (<=) say |s| >= |t| (else swap the roles): by the Fast2Sum lemma (Dekker 1971; it
 * holds in radix 2 with gradual underflow) sum - s is representable, so fl(sum - s) =
 * sum - s, and it equals t only if sum = s + t. Three additions and two compares per
 * term against TwoSum's six additions and one; equality is by value, so +0 and -0 are
 * equal, as they are as values.
 *
 * Four paths give identical results (the same test, element by element): AVX-512
 * (eight lanes) or AVX2 (four), chosen at run time from the CPU, SSE2 (two lanes; every
 * x86-64) and portable C. The vector loops store the sums and, for the rare flagged lane, redo
 * that lane: spill += the old s, s = t. GCC 12 does not vectorise the flag test
 * itself (it extracts lanes one by one), hence the intrinsics. */

/* The slow step of one element: move s into the spill and restart from the term. */
static inline void exactsum_restart(double *s, gp_fixacc *spill, double old, double t)
{
    fixacc_add_double(spill, old);
    *s = t;
}

/* Elements [i, count) in portable C (also the vector paths' tails); returns the restarts. */
static size_t exactsum_scalar(double *s, gp_fixacc *spill, const float *x, double dn, size_t i,
                              size_t count)
{
    size_t spilled = 0;
    for (; i < count; i++) {
        double t = dn * (double)x[i], a = s[i], sum = a + t;
        if (sum - a != t || sum - t != a) {
            exactsum_restart(&s[i], &spill[i], a, t);
            spilled++;
        } else {
            s[i] = sum;
        }
    }
    return spilled;
}

#if defined(__x86_64__) && !defined(GP_EXACT_PORTABLE)
#define GP_EXACTSUM_HAVE_X86 1

/* A vector step's flagged lanes (bit j of m: element i + j), whose sums t[j] + a[j] were
 * not exact: each restarts (exactsum_restart). Returns how many. */
static size_t exactsum_redo(double *s, gp_fixacc *spill, size_t i, unsigned m, const double *t, const double *a)
{
    size_t k = 0;
    for (; m; m &= m - 1, k++) {
        unsigned j = (unsigned)__builtin_ctz(m);
        exactsum_restart(&s[i + j], &spill[i + j], a[j], t[j]);
    }
    return k;
}

static size_t exactsum_sse2(double *s, gp_fixacc *spill, const float *x, double dn, size_t count)
{
    const __m128d vn = _mm_set1_pd(dn);
    size_t i = 0, spilled = 0;
    for (; i + 2 <= count; i += 2) {
        __m128 xf = _mm_castpd_ps(_mm_load_sd((const double *)(const void *)(x + i)));
        __m128d t = _mm_mul_pd(_mm_cvtps_pd(xf), vn), a = _mm_loadu_pd(s + i);
        __m128d sum = _mm_add_pd(a, t);
        __m128d bad = _mm_or_pd(_mm_cmpneq_pd(_mm_sub_pd(sum, a), t), _mm_cmpneq_pd(_mm_sub_pd(sum, t), a));
        _mm_storeu_pd(s + i, sum);
        int m = _mm_movemask_pd(bad);
        if (__builtin_expect(m != 0, 0)) {
            double ta[2], aa[2];
            _mm_storeu_pd(ta, t);
            _mm_storeu_pd(aa, a);
            spilled += exactsum_redo(s, spill, i, (unsigned)m, ta, aa);
        }
    }
    return spilled + exactsum_scalar(s, spill, x, dn, i, count);
}

__attribute__((target("avx2"))) static size_t exactsum_avx2(double *s, gp_fixacc *spill, const float *x,
                                                            double dn, size_t count)
{
    const __m256d vn = _mm256_set1_pd(dn);
    size_t i = 0, spilled = 0;
    for (; i + 4 <= count; i += 4) {
        __m256d t = _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), vn), a = _mm256_loadu_pd(s + i);
        __m256d sum = _mm256_add_pd(a, t);
        __m256d bad = _mm256_or_pd(_mm256_cmp_pd(_mm256_sub_pd(sum, a), t, _CMP_NEQ_UQ),
                                   _mm256_cmp_pd(_mm256_sub_pd(sum, t), a, _CMP_NEQ_UQ));
        _mm256_storeu_pd(s + i, sum);
        int m = _mm256_movemask_pd(bad);
        if (__builtin_expect(m != 0, 0)) {
            double ta[4], aa[4];
            _mm256_storeu_pd(ta, t);
            _mm256_storeu_pd(aa, a);
            spilled += exactsum_redo(s, spill, i, (unsigned)m, ta, aa);
        }
    }
    /* Clear the upper halves before returning to SSE code: gcc 12 emits no vzeroupper here
     * (the function ends in a tail call), and on some CPUs every later transition between
     * legacy-SSE and VEX code (libm's FMA variants) then costs hundreds of cycles. */
    _mm256_zeroupper();
    return spilled + exactsum_scalar(s, spill, x, dn, i, count);
}

/* Eight lanes, as exactsum_avx2: the flag test as a mask register. */
__attribute__((target("avx512f"))) static size_t exactsum_avx512(double *s, gp_fixacc *spill, const float *x,
                                                                 double dn, size_t count)
{
    const __m512d vn = _mm512_set1_pd(dn);
    size_t i = 0, spilled = 0;
    for (; i + 8 <= count; i += 8) {
        __m512d t = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), vn), a = _mm512_loadu_pd(s + i);
        __m512d sum = _mm512_add_pd(a, t);
        __mmask8 m = _mm512_cmp_pd_mask(_mm512_sub_pd(sum, a), t, _CMP_NEQ_UQ) |
                     _mm512_cmp_pd_mask(_mm512_sub_pd(sum, t), a, _CMP_NEQ_UQ);
        _mm512_storeu_pd(s + i, sum);
        if (__builtin_expect(m != 0, 0)) {
            double ta[8], aa[8];
            _mm512_storeu_pd(ta, t);
            _mm512_storeu_pd(aa, a);
            spilled += exactsum_redo(s, spill, i, m, ta, aa);
        }
    }
    _mm256_zeroupper(); /* as exactsum_avx2 */
    return spilled + exactsum_scalar(s, spill, x, dn, i, count);
}
#endif

int gp_exactsum_path_available(gp_exactsum_path path)
{
    switch (path) {
    case GP_EXACTSUM_AUTO:
    case GP_EXACTSUM_PORTABLE:
        return 1;
#ifdef GP_EXACTSUM_HAVE_X86
    case GP_EXACTSUM_SSE2:
        return 1;
    case GP_EXACTSUM_AVX2:
        return __builtin_cpu_supports("avx2") != 0;
    case GP_EXACTSUM_AVX512:
        return __builtin_cpu_supports("avx512f") != 0;
#endif
    default:
        return 0;
    }
}

size_t gp_exactsum_add_path(gp_exactsum_path path, double *s, gp_fixacc *spill, const float *x, uint32_t n,
                            size_t count)
{
    if (n == 0)
        return 0;
    if (n >= (1u << 29)) { /* n*x may not be exact in binary64: straight to the spill */
        for (size_t i = 0; i < count; i++)
            gp_fixacc_add(&spill[i], x[i], n);
        return count;
    }
    const double dn = (double)n; /* n*x is exact: 29 + 24 bits */
#ifdef GP_EXACTSUM_HAVE_X86
    if (path == GP_EXACTSUM_AUTO)
        path = __builtin_cpu_supports("avx512f") ? GP_EXACTSUM_AVX512
               : __builtin_cpu_supports("avx2") ? GP_EXACTSUM_AVX2
                                                 : GP_EXACTSUM_SSE2;
    if (path == GP_EXACTSUM_AVX512)
        return exactsum_avx512(s, spill, x, dn, count);
    if (path == GP_EXACTSUM_AVX2)
        return exactsum_avx2(s, spill, x, dn, count);
    if (path == GP_EXACTSUM_SSE2)
        return exactsum_sse2(s, spill, x, dn, count);
#endif
    return exactsum_scalar(s, spill, x, dn, 0, count);
}

size_t gp_exactsum_add(double *s, gp_fixacc *spill, const float *x, uint32_t n, size_t count)
{
    return gp_exactsum_add_path(GP_EXACTSUM_AUTO, s, spill, x, n, count);
}

double gp_exactsum_div(double s, const gp_fixacc *spill, uint64_t d, int *sticky)
{
    int used = 0;
    for (int j = 0; j < GP_FIXACC_LIMBS; j++)
        used |= spill->limb[j] != 0;
    if (used) {
        gp_fixacc t = *spill;
        fixacc_add_double(&t, s);
        return gp_fixacc_div(&t, d, sticky);
    }
    double dd = (double)d;     /* exact: d < 2^53 */
    double q = s / dd;         /* correctly rounded */
    double r = fma(-q, dd, s); /* the exact remainder of a correctly rounded quotient */
    *sticky = r > 0 ? 1 : r < 0 ? -1 : 0; /* sign(s/d - q) = sign(r), d > 0 */
    return q;
}

void gp_exactsum_div_n(double *q, const double *s, const gp_fixacc *spill, uint64_t d, size_t count)
{
    const double dd = (double)d; /* exact: d < 2^53 */
    if (!spill && (d & (d - 1)) == 0) { /* d = 2^k: s * 2^-k is the one rounding of the same
                                           exact value as s / d (2^-k exact; NaN, inf, -0 too) */
        const double r = 1.0 / dd;
        for (size_t i = 0; i < count; i++)
            q[i] = s[i] * r;
        return;
    }
    if (!spill) { /* every spill zero: gp_exactsum_div's quotient, in a loop that vectorises */
        for (size_t i = 0; i < count; i++)
            q[i] = s[i] / dd;
        return;
    }
    for (size_t i = 0; i < count; i++) {
        uint64_t used = 0;
        for (int j = 0; j < GP_FIXACC_LIMBS; j++)
            used |= spill[i].limb[j];
        if (__builtin_expect(used != 0, 0)) {
            int sticky;
            q[i] = gp_exactsum_div(s[i], &spill[i], d, &sticky);
        } else {
            q[i] = s[i] / dd; /* gp_exactsum_div's quotient: its remainder is not needed */
        }
    }
}

double gp_exact_q_nearest(const mpq_t q, int *sticky)
{
    mpfr_t f;
    mpfr_init2(f, 53);
    int t = mpfr_set_q(f, q, MPFR_RNDN);
    double d = mpfr_get_d(f, MPFR_RNDN);
    mpfr_clear(f);
    *sticky = t > 0 ? -1 : t < 0 ? 1 : 0;
    return d;
}
