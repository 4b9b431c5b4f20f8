#!/usr/bin/env python3
"""torch-cuda-fused-probe.py [--device cuda|cpu] — which arithmetic torch's fused AdamW
kernel (`torch.optim.AdamW(fused=True)`, the op `torch._fused_adamw_`) performs on fp32
tensors, found as scripts/torch-cuda-ops-probe.py finds the single-tensor and foreach
ones: the kernel's outputs on random inputs against candidate formulas evaluated on the
CPU. gradprec has no model of the CUDA kernel (docs/model.md); this is the measurement a
model would start from.

Candidates, each output tested on the kernel's own inputs (m and v on the old state; the
param on the kernel's own m', v', so that each output is told apart by itself):
  f64   the scalars in binary64 (lr, betas, weight decay, eps as Python passes them), each
        expression evaluated in binary64 and rounded to fp32 once where the source stores
        an fp32 (an older kernel's form)
  f32   the scalars rounded to fp32 first, every operation an fp32 one
  fma   the scalars in fp32, m' = fma(b1, m, fma(-b1, g, g)), v' = fma(b2, v, fma(-b2,
        g*g, g*g)) and the decay fma(-(lr*wd), p, p) (a later kernel's form); the param's
        update in 27 forms: the step size and sqrt(bias correction 2) in fp32 (s32), from
        binary64 (s64), or the step size as binary64 lr over the fp32 correction (lr64);
        the denominator sqrt(v')/bc2s + eps (d1), sqrt(v') * (1/bc2s) + eps (d2), or the
        fp32 quotient plus eps in binary64 (e64); the step (ss*m')/den (u1),
        fma(-ss, m'/den, p) (u2) or ss*(m'/den) (u3); with s32 and d1 also (ss*m') times
        the rounded 1/den (u4), ss*m'/den in binary64 (u5), fp32 ss*m' over den in
        binary64 (u6). For the closest form (fma/s32/d1/u1) it prints how its differences
        are spread, in units of the param's last place
Each is computed in float64 and rounded once to float32 per fp32 operation, which is exact
for a sum, product, quotient or square root of two floats; an fp32 fma as a*b + c in
float64 then rounded, which can differ from a correctly rounded fma by double rounding on
about 2^-29 of inputs; the bias corrections' pow in binary64 (f64) or as float64 pow of the
fp32 operands rounded to fp32 (f32, fma; CUDA's powf may differ from that in the last bit):
a probe for telling formulas apart, not a bit-exact model.

Inputs: 2^20 elements, fp32 values of random sign and exponent (grads 2^-30..2^0, params
2^-12..2^1, m 2^-30..2^-2, v 2^-60..2^-4), at steps 1, 2, 10 and 1000, weight decay 0 and
0.1. Prints one line per configuration, output and candidate: how many results differ.
Exit 77 when the device is not there. On an H200 with torch 2.11.0+cu130 (2026-11-29,
docs/model.md): m' and v' equal the fma forms on every element; no param form does (the
closest, fma/s32/d1/u1, differs on 5.6-7.4%, by +-1, 2 or 4 ulps of the param)."""
import argparse
import sys

N = 1 << 20


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    import numpy as np
    import torch
    if a.device == "cuda" and not torch.cuda.is_available():
        print("torch sees no CUDA device: nothing measured")
        return 77
    dev = torch.device(a.device)
    rng = np.random.default_rng(11)
    f32, f64 = np.float32, np.float64

    def vals(lo, hi, pos=False):
        e = rng.uniform(lo, hi, N)
        x = (np.exp2(np.floor(e)) * (1 + rng.random(N))).astype(f32)
        return x if pos else np.where(rng.random(N) < 0.5, -x, x).astype(f32)

    def r(x):  # one rounding to fp32
        return np.asarray(x, dtype=f64).astype(f32)

    def fma(x, y, z):
        return r(np.asarray(x, f64) * np.asarray(y, f64) + np.asarray(z, f64))

    def d(x):
        return np.asarray(x, f64)

    name = torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu"
    print("torch %s (git %s), %s, fused AdamW on fp32 tensors, %d elements" %
          (torch.__version__, torch.version.git_version[:12], name, N))
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8
    lrf, b1f, b2f, epsf = f32(lr), f32(b1), f32(b2), f32(eps)
    for wd in (0.0, 0.1):
        wdf = f32(wd)
        for t in (1, 2, 10, 1000):
            p, g, m, v = vals(-12, 1), vals(-30, 0), vals(-30, -2), vals(-60, -4, True)
            tp, tg, tm, tv = (torch.from_numpy(x.copy()).to(dev) for x in (p, g, m, v))
            step = torch.tensor(float(t), dtype=torch.float32, device=dev)
            torch._fused_adamw_([tp], [tg], [tm], [tv], [], [step], lr=lr, beta1=b1, beta2=b2, weight_decay=wd,
                                eps=eps, amsgrad=False, maximize=False, grad_scale=None, found_inf=None)
            P, M, V = (x.cpu().numpy() for x in (tp, tm, tv))
            cand = {}
            # f64: binary64 scalars and expressions, fp32 stores
            pw = r(d(p) - lr * wd * d(p)) if wd else p
            bc1 = r(1 - b1 ** t)
            bc2s = r(np.sqrt(d(r(1 - b2 ** t))))
            ss = r(lr / d(bc1))
            den = r(d(r(np.sqrt(d(V)) / d(bc2s))) + eps)
            cand["f64"] = (r(b1 * d(m) + (1 - b1) * d(g)), r(b2 * d(v) + (1 - b2) * d(g) * d(g)),
                           r(d(pw) - d(r(d(r(d(ss) * d(M))) / d(den)))))
            # f32: every operation in fp32
            pw = r(d(p) - d(r(d(r(d(lrf) * d(wdf))) * d(p)))) if wd else p
            bc1 = r(1 - d(r(d(b1f) ** t)))
            bc2s = r(np.sqrt(d(r(1 - d(r(d(b2f) ** t))))))
            ss = r(d(lrf) / d(bc1))
            den = r(d(r(np.sqrt(d(V)) / d(bc2s))) + d(epsf))
            mf = r(d(r(d(b1f) * d(m))) + d(r(d(r(1 - d(b1f))) * d(g))))
            gg = r(d(g) * d(g))
            vf = r(d(r(d(b2f) * d(v))) + d(r(d(r(1 - d(b2f))) * d(gg))))
            pf = r(d(pw) - d(r(d(r(d(ss) * d(M))) / d(den))))
            cand["f32"] = (mf, vf, pf)
            # fma: fp32 scalars, the fma forms for m' and v'; the param's update with the
            # scalars in fp32 (s32, as above) or from binary64 (s64: pow, division and sqrt in
            # binary64, rounded to fp32 once), the denominator sqrt(v')/bc2s + eps (d1) or
            # sqrt(v') * (1/bc2s) + eps (d2), the step (ss*m')/den (u1), fma(-ss, m'/den, p)
            # (u2) or ss*(m'/den) (u3)
            pw = fma(-d(r(d(lrf) * d(wdf))), p, p) if wd else p
            mv = (fma(b1f, m, fma(-d(b1f), g, g)), fma(b2f, v, fma(-d(b2f), gg, gg)))
            sc = {"s32": (ss, bc2s), "s64": (r(lr / (1 - b1 ** t)), r(np.sqrt(1 - b2 ** t))),
                  "lr64": (r(lr / d(bc1)), bc2s)}
            for sk, (s_, b_) in sc.items():
                dens = {"d1": r(d(r(np.sqrt(d(V)) / d(b_))) + d(epsf)),
                        "d2": r(d(r(np.sqrt(d(V)) * d(r(1 / d(b_))))) + d(epsf)),
                        "e64": r(d(r(np.sqrt(d(V)) / d(b_))) + eps)}
                for dk, dn in dens.items():
                    q = r(d(M) / d(dn))
                    cand["fma/%s/%s/u1" % (sk, dk)] = mv + (r(d(pw) - d(r(d(r(d(s_) * d(M))) / d(dn)))),)
                    cand["fma/%s/%s/u2" % (sk, dk)] = mv + (fma(-d(s_), q, pw),)
                    cand["fma/%s/%s/u3" % (sk, dk)] = mv + (r(d(pw) - d(r(d(s_) * d(q)))),)
                    if (sk, dk) == ("s32", "d1"):  # fewer roundings, or a reciprocal
                        cand["fma/s32/d1/u4"] = mv + (r(d(pw) - d(r(d(r(d(s_) * d(M))) * d(r(1 / d(dn)))))),)
                        cand["fma/s32/d1/u5"] = mv + (r(d(pw) - d(s_) * d(M) / d(dn)),)
                        cand["fma/s32/d1/u6"] = mv + (r(d(pw) - d(r(d(s_) * d(M))) / d(dn)),)
            cp = cand["fma/s32/d1/u1"][2]  # where the closest form differs: by how many ulps, and where
            bad = P.view(np.int32) != cp.view(np.int32)
            if bad.any():
                du = P.view(np.int32)[bad].astype(np.int64) - cp.view(np.int32)[bad].astype(np.int64)
                small = (np.sqrt(d(V)) / d(bc2s) < 1e3 * eps)[bad]
                u, c = np.unique(du, return_counts=True)
                top = np.argsort(-c)[:6]
                print("  closest form's differences (param bits, kernel - form: count): %s; %.3f of them "
                      "where sqrt(v')/bc2s < 1000 eps" % (dict(zip(u[top].tolist(), c[top].tolist())), small.mean()))
            for k, (cm, cv, cp) in cand.items():
                bad = [int(np.count_nonzero(x.view(np.int32) != y.view(np.int32))) for x, y in
                       ((M, cm), (V, cv), (P, cp))]
                print("weight_decay %-4g step %-5d %-22s m' %8d  v' %8d  param %8d  of %d differ"
                      % (wd, t, k, bad[0], bad[1], bad[2], N))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
