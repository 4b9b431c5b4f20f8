/* gp_adamw_dd_vec.h — private to gp_adamw_dd.c, included once per vector width: the loop
 * of gp_adamw_dd_step on GPV_W elements at a time. Each lane runs the same sequence of
 * IEEE operations as gp_adamw_dd_element (gp_adamw_dd.h) on its own element: the
 * operations below are the scalar gp_dd_* ones written on vectors, operand for operand
 * (a vector add, multiply, divide, square root or fma is correctly rounded in every
 * lane, as its scalar counterpart), so every lane's results equal the element
 * function's bit for bit; tests/test_adamw_dd.c checks that on every path. The error
 * analysis of gp_adamw_dd.h therefore applies unchanged.
 *
 * The includer defines, for one instruction set:
 *   GPV          the vector type (GCC vector: + - * / and unary - are lane-wise IEEE)
 *   GPV_W        lanes per vector
 *   GPV_TARGET   the function attribute enabling the instruction set (with FMA)
 *   GPV_NAME(x)  x with the width's suffix
 *   GPV_SET1(d), GPV_LOAD(p), GPV_STORE(p, x), GPV_FMA(a, b, c) (a*b + c, one rounding),
 *   GPV_SQRT(x), GPV_KEEP_POS(x, y)  (y in the lanes where x > 0, +0 elsewhere, NaN x
 *   included: the test of gp_dd_sqrt)
 * and undefines them after the include. */

typedef struct {
    GPV hi, lo;
} GPV_NAME(vdd);

static inline GPV_TARGET GPV_NAME(vdd) GPV_NAME(two_sum)(GPV a, GPV b)
{
    GPV_NAME(vdd) r;
    r.hi = a + b;
    GPV bb = r.hi - a;
    r.lo = (a - (r.hi - bb)) + (b - bb);
    return r;
}

static inline GPV_TARGET GPV_NAME(vdd) GPV_NAME(fast_two_sum)(GPV a, GPV b)
{
    GPV_NAME(vdd) r;
    r.hi = a + b;
    r.lo = b - (r.hi - a);
    return r;
}

static inline GPV_TARGET GPV_NAME(vdd) GPV_NAME(add)(GPV_NAME(vdd) x, GPV_NAME(vdd) y)
{
    GPV_NAME(vdd) s = GPV_NAME(two_sum)(x.hi, y.hi);
    GPV_NAME(vdd) t = GPV_NAME(two_sum)(x.lo, y.lo);
    GPV_NAME(vdd) v = GPV_NAME(fast_two_sum)(s.hi, s.lo + t.hi);
    return GPV_NAME(fast_two_sum)(v.hi, t.lo + v.lo);
}

static inline GPV_TARGET GPV_NAME(vdd) GPV_NAME(add_d)(GPV_NAME(vdd) x, GPV y)
{
    GPV_NAME(vdd) s = GPV_NAME(two_sum)(x.hi, y);
    return GPV_NAME(fast_two_sum)(s.hi, x.lo + s.lo);
}

static inline GPV_TARGET GPV_NAME(vdd) GPV_NAME(mul_d)(GPV_NAME(vdd) x, GPV y)
{
    GPV ch = x.hi * y, cl = GPV_FMA(x.hi, y, -ch);
    return GPV_NAME(fast_two_sum)(ch, GPV_FMA(x.lo, y, cl));
}

static inline GPV_TARGET GPV_NAME(vdd) GPV_NAME(mul)(GPV_NAME(vdd) x, GPV_NAME(vdd) y)
{
    GPV ch = x.hi * y.hi, cl1 = GPV_FMA(x.hi, y.hi, -ch);
    GPV tl0 = x.lo * y.lo;
    GPV tl1 = GPV_FMA(x.hi, y.lo, tl0);
    GPV cl2 = GPV_FMA(x.lo, y.hi, tl1);
    return GPV_NAME(fast_two_sum)(ch, cl1 + cl2);
}

static inline GPV_TARGET GPV_NAME(vdd) GPV_NAME(div)(GPV_NAME(vdd) x, GPV_NAME(vdd) y)
{
    GPV th = x.hi / y.hi;
    GPV_NAME(vdd) r = GPV_NAME(mul_d)(y, th);
    GPV pih = x.hi - r.hi;
    GPV dl = x.lo - r.lo;
    GPV d = pih + dl;
    return GPV_NAME(fast_two_sum)(th, d / y.hi);
}

static inline GPV_TARGET GPV_NAME(vdd) GPV_NAME(sqrt)(GPV_NAME(vdd) x)
{
    GPV sh = GPV_SQRT(x.hi);
    GPV r = GPV_FMA(-sh, sh, x.hi);
    GPV sl = (r + x.lo) / (GPV_SET1(2.0) * sh);
    GPV_NAME(vdd) z = GPV_NAME(fast_two_sum)(sh, sl);
    z.hi = GPV_KEEP_POS(x.hi, z.hi);
    z.lo = GPV_KEEP_POS(x.hi, z.lo);
    return z;
}

static inline GPV_TARGET GPV_NAME(vdd) GPV_NAME(set1)(gp_dd x)
{
    GPV_NAME(vdd) r = {GPV_SET1(x.hi), GPV_SET1(x.lo)};
    return r;
}

/* gp_adamw_dd_step's loop on elements [0, n - n % GPV_W) of the arrays (already offset
 * by i0); returns the count done. c1, c2: gp_adamw_dd_factors. */
static GPV_TARGET size_t GPV_NAME(step)(const gp_adamw_dd_scalars *s, gp_dd c1s, gp_dd c2s, double *restrict whi,
                                        double *restrict wlo, double *restrict mhi, double *restrict mlo,
                                        double *restrict vhi, double *restrict vlo, size_t n,
                                        const double *restrict g, double *restrict upd_out)
{
    const GPV_NAME(vdd) c1 = GPV_NAME(set1)(c1s), c2 = GPV_NAME(set1)(c2s);
    const GPV_NAME(vdd) isb = GPV_NAME(set1)(s->inv_sqrt_bc2), nst = GPV_NAME(set1)(s->neg_step);
    const GPV_NAME(vdd) dec = GPV_NAME(set1)(s->decay);
    const GPV b1 = GPV_SET1(s->beta1), b2 = GPV_SET1(s->beta2), eps = GPV_SET1(s->eps);
    const int has_decay = s->has_decay;
    size_t j = 0;
    for (; j + GPV_W <= n; j += GPV_W) {
        GPV gj = GPV_LOAD(g + j);
        GPV_NAME(vdd) m = {GPV_LOAD(mhi + j), GPV_LOAD(mlo + j)};
        GPV_NAME(vdd) v = {GPV_LOAD(vhi + j), GPV_LOAD(vlo + j)};
        GPV_NAME(vdd) w = {GPV_LOAD(whi + j), GPV_LOAD(wlo + j)};
        /* gp_adamw_dd_element, line for line */
        m = GPV_NAME(add)(GPV_NAME(mul_d)(m, b1), GPV_NAME(mul_d)(c1, gj));
        v = GPV_NAME(add)(GPV_NAME(mul_d)(v, b2), GPV_NAME(mul_d)(GPV_NAME(mul_d)(c2, gj), gj));
        GPV_NAME(vdd) den = GPV_NAME(add_d)(GPV_NAME(mul)(GPV_NAME(sqrt)(v), isb), eps);
        GPV_NAME(vdd) upd = GPV_NAME(div)(GPV_NAME(mul)(nst, m), den);
        if (has_decay)
            w = GPV_NAME(mul)(w, dec);
        w = GPV_NAME(add)(w, upd);
        GPV_STORE(mhi + j, m.hi);
        GPV_STORE(mlo + j, m.lo);
        GPV_STORE(vhi + j, v.hi);
        GPV_STORE(vlo + j, v.lo);
        GPV_STORE(whi + j, w.hi);
        GPV_STORE(wlo + j, w.lo);
        if (upd_out)
            GPV_STORE(upd_out + j, upd.hi);
    }
    /* Clear the upper halves before the caller's SSE code (see gp_exact.c's AVX2 path). */
    _mm256_zeroupper();
    return j;
}
