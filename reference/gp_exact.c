/* gp_exact.c — see gp_exact.h. The accumulator is plain integer arithmetic on six
 * 64-bit limbs; only gp_fixacc_get_mpz touches GMP. Range: every value it can hold
 * from its contract (at most 2^31 terms n*x) is below 2^62 * 2^128 in magnitude, i.e.
 * below 2^339 as an integer, far inside the 383 bits of magnitude; every non-zero
 * quotient a/d (d < 2^53) lies in [2^-202, 2^234], so gp_fixacc_div never meets a
 * binary64 subnormal, overflow or underflow — it still builds its result with ldexp,
 * which is exact for every normal result. */
#include "gp_exact.h"

#include <math.h>
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

/* fp32 x = M * 2^(s-149) with M < 2^24 and 0 <= s <= 253 (s = biased exponent - 1 for
 * normals, 0 for subnormals). n*M < 2^55, so A = (n*M) << s spans bits s .. s+54 < 308,
 * inside limbs k = s/64 and k+1 <= 4. For x < 0 the addend is -A = ~A + 1 (every limb
 * complemented, carry-in 1), so the sign costs no branch (random signs would
 * mispredict); one straight carry chain from limb k to the top per k — gradients of
 * one tensor mostly share k, so the switch predicts well. */
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
    u128 v = (u128)((uint64_t)n * m) << (s & 63);
    uint64_t mask = 0 - (uint64_t)(u >> 31); /* all ones when x < 0 */
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
    default: /* 3 */
        c = adc(c, l + 3, lo);
        c = adc(c, l + 4, hi);
        (void)adc(c, l + 5, mask);
        break;
    }
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
