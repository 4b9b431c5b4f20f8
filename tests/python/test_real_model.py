# Issue 11, item 4: a small transformer (tinylm.py) trained a few steps with gradient
# accumulation on CPU under gradprec.torch.capture; gradprec replays the dump and its
# numbers are checked against what torch itself computed:
#   (a) per-micro-batch mean loss, uneven lengths: gradprec's normalization_rel_err
#       equals torch's ||g_acc - g_full|| / ||g_full|| within a derived rounding bound;
#   (b) token-normalised loss: gradprec's normalization error is exactly 0, and torch's
#       accumulated gradient equals its full-batch one within the same rounding bound;
#   (c) bf16 parameters (torch accumulates .grad in bf16): gradprec's rounding error and
#       absorbed fraction equal torch's own, and an fp32 accumulator of the same bf16
#       gradients loses far less, as torch's own fp32 sum shows.
# Norms are pooled over every tensor and optimizer step, as gradprec pools its metrics
# (sums of squares over steps and tensors, then the ratio).
import copy
import math

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import gradprec
import gradprec.torch as gpt
from tinylm import make_model, sequences, token_losses

LENGTHS = [41, 9, 26, 4]       # one sequence per micro-batch: n_k = 40, 8, 25, 3 tokens
NTOK = [L - 1 for L in LENGTHS]
K, N, STEPS = len(LENGTHS), sum(L - 1 for L in LENGTHS), 2

U32 = 2.0**-24                 # unit roundoff of fp32 (round to nearest)


def gamma(m, u):
    """Higham's gamma_m = m u / (1 - m u): recursive summation of m+1 terms errs by at
    most gamma_m times the sum of their magnitudes, elementwise."""
    return m * u / (1 - m * u)


# Every binary64 evaluation in this file and in gradprec's metrics (sums of at most
# 10^5 squares, square roots, one division) has relative error below 10^5 * 2^-53 <
# 2^-36; SLACK_REL covers it with room, SLACK_ABS covers the binary64 rounding of the
# reference sums (2^-53 relative per element, so below 2^-52 of a ratio's denominator).
SLACK_REL, SLACK_ABS = 2.0**-30, 2.0**-40


def loss_of(reduction, losses):
    if reduction == "mean":
        return losses.mean() / K           # the micro-batch's token mean, / K
    if reduction == "token_mean":
        return losses.sum() / N            # token sum / all tokens of the window
    raise AssertionError(reduction)


def full_grad(model, seqs):
    """The full-batch gradient: one backward of (sum of every token's loss) / N."""
    model.zero_grad(set_to_none=True)
    (sum(token_losses(model, q).sum() for q in seqs) / N).backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def micro_grads64(model64, seqs, reduction):
    out = []
    for q in seqs:
        model64.zero_grad(set_to_none=True)
        loss_of(reduction, token_losses(model64, q)).backward()
        out.append({n: p.grad.detach().clone() for n, p in model64.named_parameters()})
    return out


def train(tmp_path, reduction, dtype=torch.float32, with64=True):
    """Trains STEPS optimizer steps of K micro-batches under capture; per step records
    torch's accumulated .grad (S), its fp32 full-batch gradient (G) and, at the same
    weights in binary64, the full-batch (G64) and per-micro-batch (E64) gradients."""
    model = make_model(0, dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rec = []
    with gpt.capture(model, tmp_path, reduction=reduction, accumulation_steps=K) as cap:
        for s in range(STEPS):
            seqs = sequences(LENGTHS, 100 + s)
            r = {}
            if with64:
                with cap.paused():
                    r["G"] = full_grad(model, seqs)
                    m64 = copy.deepcopy(model).double()
                    r["G64"] = full_grad(m64, seqs)
                    r["E64"] = micro_grads64(m64, seqs, reduction)
            model.zero_grad(set_to_none=True)
            for q in seqs:
                with cap.microbatch(tokens=q.shape[1] - 1):
                    loss_of(reduction, token_losses(model, q)).backward()
            r["S"] = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
            opt.step()
            opt.zero_grad(set_to_none=True)
            rec.append(r)
    names = [n for n, _ in model.named_parameters()]
    dump = load_file(str(tmp_path / "grads.safetensors"))
    E = [[{n: dump["%s/step%d/mb%d" % (n, s, k)] for n in names} for k in range(K)] for s in range(STEPS)]
    return names, rec, E, cap


def f64(t):
    return t.detach().to(torch.float64).numpy().ravel()


def pooled(vecs):
    """The 2-norm of the concatenation of several arrays."""
    return math.sqrt(sum(float(np.dot(v, v)) for v in vecs))


def normalization_check(tmp_path, reduction, c):
    names, rec, E, _ = train(tmp_path, reduction)
    res = gradprec.run(tmp_path / "scenario.yaml")
    sc = res[0]
    r_gp = sc.metrics["normalization_rel_err"]

    A, F, S, G, abs_sum, d64, G64n = [], [], [], [], [], [], []
    e64_norm2 = [0.0] * K
    for s in range(STEPS):
        for n in names:
            e = [f64(E[s][k][n]) for k in range(K)]
            A.append(np.sum(e, axis=0))                               # g_same: sum of the entries
            F.append(np.sum([c[k] * e[k] for k in range(K)], axis=0))  # g_full from the entries
            S.append(f64(rec[s]["S"][n]))
            G.append(f64(rec[s]["G"][n]))
            abs_sum.append(np.sum(np.abs(e), axis=0))
            e64 = [f64(rec[s]["E64"][k][n]) for k in range(K)]
            d64.append(f64(rec[s]["G"][n]) - f64(rec[s]["G64"][n]))
            d64.append(np.sum([c[k] * (e[k] - e64[k]) for k in range(K)], axis=0))
            G64n.append(f64(rec[s]["G64"][n]))
            for k in range(K):
                e64_norm2[k] += float(np.dot(e64[k], e64[k]))

    # gradprec's number is the exact-arithmetic formula on the captured entries:
    # ||sum_k e_k - sum_k c_k e_k|| / ||sum_k c_k e_k|| (binary64 here: within the slack).
    r_np = pooled([a - f for a, f in zip(A, F)]) / pooled(F)
    assert abs(r_gp - r_np) <= r_np * SLACK_REL + SLACK_ABS, (r_gp, r_np)

    # What torch itself shows: r_t = ||S - G|| / ||G||, S = .grad after the window (fp32
    # sum of the entries in order), G = the fp32 full-batch backward.
    nG = pooled(G)
    r_t = pooled([x - y for x, y in zip(S, G)]) / nG
    # Bound on |r_t - r_gp|. With A = sum e_k, F = sum c_k e_k (exact, gradprec's):
    #   | ||S-G|| - ||A-F|| | <= ||S-A|| + ||G-F||  and  | 1/||F|| - 1/||G|| | <= ||G-F||/(||F|| ||G||)
    # so |r_t - r_gp| <= (||S-A|| + (1 + r_gp) ||G-F||) / ||G||, where
    #  * ||S-A||: torch's fp32 accumulation of K terms (.grad = e_0, then K-1 in-place
    #    adds, each one rounding): elementwise |S-A| <= gamma_{K-1} sum_k |e_k| (Higham,
    #    recursive summation), so ||S-A|| <= gamma_{K-1}(u32) ||sum_k |e_k|||;
    #  * ||G-F||: both are fp32 backward computations of the exact full-batch gradient g*
    #    of the same fp32 weights and tokens, and g* = sum_k c_k g*_k exactly (the full
    #    loss is sum_k c_k times micro-batch k's loss). So ||G-F|| <= ||G-g*|| +
    #    ||sum_k c_k (e_k - g*_k)||. g* and g*_k are taken from the same model run in
    #    binary64 (G64, E64), whose own error is allowed for generously: at most 2^-20 of
    #    each norm (binary64's unit roundoff is 2^-53, 2^-29 times fp32's, so this allows
    #    an error growth of 2^33 through the backward), giving ||G-F|| <= ||G-G64|| +
    #    ||sum c_k (e_k - E64_k)|| + 2^-20 (||G64|| + sum_k c_k ||E64_k||).
    t1 = gamma(K - 1, U32) * pooled(abs_sum)
    t2 = pooled(d64[0::2]) + pooled(d64[1::2])
    t3 = 2.0**-20 * (pooled(G64n) + sum(c[k] * math.sqrt(e64_norm2[k]) for k in range(K)))
    bound = (t1 + (1 + r_gp) * (t2 + t3)) / nG + r_t * SLACK_REL + SLACK_ABS
    return r_gp, r_t, bound, sc


def test_a_mean_of_means_normalization_matches_torch(tmp_path, replay):
    # reduction mean: entry e_k = (token mean of micro-batch k) / K, so its token sum is
    # e_k K n_k and the full-batch mean is sum_k (K n_k / N) e_k: c_k = K n_k / N.
    c = [K * n / N for n in NTOK]
    r_gp, r_t, bound, sc = normalization_check(tmp_path, "mean", c)
    assert sc.dominant == "normalization"
    assert abs(r_t - r_gp) <= bound, (r_gp, r_t, bound)
    # Not vacuous: the rounding bound is far below the effect it brackets (the tokens
    # 40, 8, 25, 3 weigh 1/4 each instead of n_k/76).
    assert bound < r_gp / 100, (r_gp, bound)


def test_b_token_normalised_loss_has_no_normalization_error(tmp_path, replay):
    # reduction token_mean: e_k = (token sum_k) / N, so the full-batch mean sum_k S_k / N
    # is sum_k e_k exactly: gradprec's exact model gives exactly 0 (c_k = 1), and torch's
    # accumulated gradient differs from its full-batch one by rounding only.
    r_gp, r_t, bound, sc = normalization_check(tmp_path, "token_mean", [1.0] * K)
    assert r_gp == 0.0
    assert sc.metrics["normalization_rel_err"] == 0.0
    assert all(t.metrics["normalization_rel_err"] == 0.0 for t in sc.tensors)
    assert r_t <= bound, (r_t, bound)
    assert bound < 1e-4  # fp32-sized: the check above is not vacuous


def bits16(t):
    return t.contiguous().view(torch.int16)


def test_c_bf16_accumulator_matches_torch(tmp_path, replay):
    names, rec, E, cap = train(tmp_path, "mean", dtype=torch.bfloat16, with64=False)
    # torch's own arithmetic, element by element: replay AccumulateGrad's bf16 adds (an
    # fp32 add of the two bf16 values, rounded to bf16) and check that they give the .grad
    # torch ended with, bit for bit; count the absorbed additions (a non-zero addend that
    # leaves the bits unchanged) over the additions of a non-zero addend (DESIGN.md §1/§5:
    # the first addend lands on 0 and counts as an addition).
    err_bf, err_32, ref, absorbed, adds = [], [], [], 0, 0
    for s in range(STEPS):
        for n in names:
            e = [E[s][k][n] for k in range(K)]
            acc = e[0].clone()
            adds += int((e[0] != 0).sum())
            for k in range(1, K):
                new = acc + e[k]
                absorbed += int(((e[k] != 0) & (bits16(new) == bits16(acc))).sum())
                adds += int((e[k] != 0).sum())
                acc = new
            assert torch.equal(bits16(acc), bits16(rec[s]["S"][n])), n
            acc32 = e[0].float()
            for k in range(1, K):
                acc32 = acc32 + e[k].float()
            # the sum of 4 bf16 values (8 significant bits) in binary64 (53) is exact
            # unless their exponents span over 43 binades; if they do, it is within
            # 3 * 2^-53 of the sum of magnitudes: inside the slack
            exact = np.sum([f64(x) for x in e], axis=0)
            ref.append(exact)
            err_bf.append(f64(acc) - exact)
            err_32.append(f64(acc32) - exact)
    r_bf = pooled(err_bf) / pooled(ref)
    r_32 = pooled(err_32) / pooled(ref)

    sc = gradprec.run(tmp_path / "scenario.yaml")[0]
    assert sc.report["config"]["precision"]["accumulator"] == "bf16"
    # gradprec emulates the same double-rounded bf16 add in the same order, so its
    # accumulated gradient is torch's bit for bit and the metric differs only by binary64
    # evaluation (slack). Absorbed counts are integers: equal.
    assert abs(sc.metrics["grad_rel_err_rounding"] - r_bf) <= r_bf * SLACK_REL + SLACK_ABS
    assert sc.metrics["absorbed_frac"] == absorbed / adds
    assert r_bf > 0

    doc = cap.scenario()
    doc["precision"]["accumulator"] = "fp32"
    (tmp_path / "fp32acc.yaml").write_text(gradprec.scenario_yaml(doc))
    sc32 = gradprec.run(tmp_path / "fp32acc.yaml")[0]
    assert abs(sc32.metrics["grad_rel_err_rounding"] - r_32) <= r_32 * SLACK_REL + SLACK_ABS
    # fp32 has 16 more significant bits than bf16: each rounding is 2^-16 times smaller,
    # and the K-term error bound shrinks by the same factor; 2^-8 leaves room for how the
    # errors of the K-1 additions combine.
    assert sc32.metrics["grad_rel_err_rounding"] < sc.metrics["grad_rel_err_rounding"] * 2.0**-8
