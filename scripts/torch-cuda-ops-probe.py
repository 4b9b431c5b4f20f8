#!/usr/bin/env python3
"""torch-cuda-ops-probe.py — which arithmetic torch's CUDA kernels perform in each fp32
operation that torch.optim.AdamW runs (single-tensor: mul_, lerp_, addcmul_, sqrt, div
by a Python float, add_, addcdiv_; foreach: the _foreach_ forms with scalars and scalar
lists), found by comparing the device's results with candidate formulas on random
inputs. The inputs are fp32 values of random sign, mantissa and exponent over
2^-140..2^8 (subnormals included), 10^6 per operation; scalars as AdamW passes them.
Each candidate is computed on the CPU in float64 and rounded once to float32, which is
exact for a sum, product or quotient of two floats and for sqrt; an fmaf(a, b, c) is
a*b (exact in float64) + c rounded to float64 and then to float32, which can differ from
a correctly rounded fmaf by double rounding on about 2^-29 of inputs: this is a probe
for telling formulas apart, not a bit-exact model. Prints one line per operation and
candidate: how many of the results differ. Exit 77 without a CUDA device."""
import sys

N = 10**6


def main():
    import numpy as np
    import torch
    if not torch.cuda.is_available():
        print("torch sees no CUDA device: nothing measured")
        return 77
    rng = np.random.default_rng(7)
    f32, f64 = np.float32, np.float64

    def vals(pos=False):
        e = rng.uniform(-140, 8, N)
        x = (np.exp2(np.floor(e)) * (1 + rng.random(N))).astype(f32)
        return x if pos else np.where(rng.random(N) < 0.5, -x, x).astype(f32)

    def r(x):  # round a float64 array to float32 once
        return np.asarray(x, dtype=f64).astype(f32)

    def fma(a, b, c):
        return r(a.astype(f64) * b.astype(f64) + c.astype(f64))

    def dev(x):
        return torch.from_numpy(x.copy()).cuda()

    def host(t):
        return t.cpu().numpy()

    def report(op, got, cands):
        for name, want in cands:
            bad = np.count_nonzero(got.view(np.int32) != want.view(np.int32))
            print("%-34s %-40s %8d of %d differ" % (op, name, bad, N))
        sys.stdout.flush()

    print("torch %s, %s" % (torch.__version__, torch.cuda.get_device_name(0)))
    p, g, m, v = vals(), vals(), vals(), vals(True)
    lr, wd, b1, b2, eps, t = 1e-3, 0.1, 0.9, 0.999, 1e-8, 3
    s_wd = 1 - lr * wd
    bc2s = (1 - b2 ** t) ** 0.5
    step_size = lr / (1 - b1 ** t)
    fs = f32(s_wd)
    for fe in (False, True):
        tag = "_foreach_" if fe else ""
        # weight decay: param.mul_(1 - lr*wd)
        x = dev(p)
        torch._foreach_mul_([x], s_wd) if fe else x.mul_(s_wd)
        report(tag + "mul_(scalar)", host(x), [("p * f32(s)", r(p.astype(f64) * f64(fs))),
                                               ("f32(p * s in double)", r(p.astype(f64) * s_wd))])
        # exp_avg.lerp_(grad, 1 - beta1)
        w = 1 - b1
        x = dev(m)
        torch._foreach_lerp_([x], [dev(g)], w) if fe else x.lerp_(dev(g), w)
        d = r(g.astype(f64) - m.astype(f64))
        report(tag + "lerp_(scalar w=0.1)", host(x),
               [("fmaf(w, e - s, s)", fma(np.full(N, f32(w)), d, m)),
                ("s + w*(e - s) rounded each", r(m.astype(f64) + r(f64(f32(w)) * d.astype(f64)).astype(f64)))])
        # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        x = dev(v)
        if fe:
            torch._foreach_addcmul_([x], [dev(g)], [dev(g)], 1 - b2)
        else:
            x.addcmul_(dev(g), dev(g), value=1 - b2)
        a = f32(1 - b2)
        gg = r(g.astype(f64) * g.astype(f64))
        ag = r(f64(a) * g.astype(f64))
        report(tag + "addcmul_(value)", host(x),
               [("fmaf(a, g*g, v)", fma(np.full(N, a), gg, v)),
                ("fmaf(a*g, g, v)", fma(ag, g, v)),
                ("v + a*(g*g) rounded each", r(v.astype(f64) + r(f64(a) * gg.astype(f64)).astype(f64)))])
        # sqrt
        x = dev(v)
        y = torch._foreach_sqrt([x])[0] if fe else x.sqrt()
        report(tag + "sqrt", host(y), [("IEEE sqrt", r(np.sqrt(v.astype(f64))))])
        # division by bias_correction2_sqrt (a Python float; a list for foreach)
        x = dev(v)
        y = torch._foreach_div([x], [bc2s])[0] if fe else x / bc2s
        fb = f32(bc2s)
        report(tag + "div(python float)", host(y),
               [("x / f32(s)", r(v.astype(f64) / f64(fb))),
                ("x * f32(1/f32(s))", r(v.astype(f64) * f64(f32(f32(1) / fb)))),
                ("x * f32(1/s), 1/s in double", r(v.astype(f64) * f64(f32(1.0 / bc2s)))),
                ("f32(x * (1/s) in double)", r(v.astype(f64) * (1.0 / bc2s))),
                ("f32(x / s in double)", r(v.astype(f64) / bc2s))])
        # add_(eps)
        x = dev(v)
        torch._foreach_add_([x], eps) if fe else x.add_(eps)
        report(tag + "add_(scalar)", host(x), [("x + f32(eps)", r(v.astype(f64) + f64(f32(eps))))])
        # param.addcdiv_(exp_avg, denom, value=-step_size)
        x = dev(p)
        if fe:
            torch._foreach_addcdiv_([x], [dev(m)], [dev(v)], [-step_size])
        else:
            x.addcdiv_(dev(m), dev(v), value=-step_size)
        a = f32(-step_size)
        q = r(m.astype(f64) / v.astype(f64))
        report(tag + "addcdiv_(value)", host(x),
               [("fmaf(a, m/d, p)", fma(np.full(N, a), q, p)),
                ("p + (a*m)/d rounded each", r(p.astype(f64) + r(r(f64(a) * m.astype(f64)).astype(f64) / v.astype(f64)).astype(f64))),
                ("p + a*(m/d) rounded each", r(p.astype(f64) + r(f64(a) * q.astype(f64)).astype(f64)))])
    return 0


if __name__ == "__main__":
    sys.exit(main())
