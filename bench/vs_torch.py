#!/usr/bin/env python3
"""vs_torch.py [--rounds R] [--size N] [--params P] [--steps S] [--only i,j,replay] [--threads]
— gradprec against the check a user would write in torch (issue 29; bench/README.md).

What a user does instead of gradprec: run the same accumulation or optimizer steps in low
precision, again with an fp64 reference, and compare. This script times both on three
configurations, CPU time, one thread each side (`gradprec run -j 1`; torch.set_num_threads(1)),
in interleaved rounds (each round: gradprec, torch, the native loop, per configuration), and
prints per configuration the ratio gradprec / torch (of the medians, and its range over the
rounds), after a first line naming the host (CPU model, family, flags, load average):

  (i)      accumulation: 2^20 elements x K = 64 micro-batches of 512 tokens, bf16 gradients
           into a bf16 accumulator, token_mean, gradients generated (normal, scale 1e-3),
           then the scenario's default one-step AdamW (fp32 params): gp_bench's (i) scenario.
  (j)      optimizer: 2*10^5 parameters x 20 steps, fp16 gradients (normal, scale 1e-4,
           shrink 0.99 a step), a dynamic loss scaler (init 65536), global-norm clipping at
           1.0, fp32 master weights, bf16 parameters, AdamW lr 1e-4, cosine schedule with
           10 warmup steps: gp_bench's (j) scenario.
  (replay) the (i) accumulation on gradients replayed from a safetensors dump (bf16
           entries w/step0/mb<k>, written once by this script with torch): no generation
           on either side; torch reads the dump with safetensors.torch.load_file.

The torch side of each, as a user would write it (the functions below are the
documentation): the low-precision run with torch's own dtypes and kernels (bf16 `add_`,
`torch.optim.AdamW`, `torch.nn.utils.clip_grad_norm_`, `torch.amp.GradScaler("cpu")`),
the same run in torch.float64 as the reference (the gradients it starts from are the same
values: the fp32 draws, or the dump's entries), and the comparison (relative error norms).
Its draws are torch's own generator (not gradprec's Philox stream): same sizes,
distributions and arithmetic, not the same numbers.

Beside them, the native limit: bench/vs_torch_native.c compiled here with
`cc -O3 -march=native` (the memory traffic of each loop and its arithmetic, no reference
for (j), nothing else), and for (i) and (replay) the floor that byte-identical reports
set: the three sums the report keeps per micro-batch in element order, each a chain of
dependent binary64 additions (`vs_torch_native chain`).

With the build's gp_bench, a further line per configuration sets beside torch's loop the
parts whose bits the reports hold, each priced alone by `gp_bench --parts` once a round
(the generator's values, GSL's inverse CDF bit for bit; the exact reference sum; the
attribution of every addition;
for (j) the reference AdamW step in double-double and its clipping norm's sum of squares;
for (i) and (replay) the element-order sums above): what the reports cost before the
exact sums, the stores and the emulated arithmetic are counted.

--threads adds item 4 of the issue: (i) with `gradprec run -j 1` and `-j 2`, wall time,
interleaved with a control (two copies of the native loop one after the other against
both at once: what the machine gives two threads at that moment); a wall-clock speed-up
means something only on an idle machine.

Run from the repository root with the build:
  GP_BUILD=$PWD/build /work/main/.venv/bin/python bench/vs_torch.py
Exit 0 (it reports; it enforces nothing), 2 on a missing build or compiler.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from capture_scale import host_line

BF16, F16, F32, F64 = torch.bfloat16, torch.float16, torch.float32, torch.float64


# ---- the scenarios gradprec runs (the YAML texts of gp_bench's (i) and (j)) ----

def yaml_i(n, K):
    return ("name: big\ntensors:\n  - name: w\n    size: %d\n    grad: {dist: normal, scale: 1.0e-3}\n"
            "batch: {microbatches: %d, tokens: 512}\nprecision: {grad: bf16, accumulator: bf16}\n" % (n, K))


def yaml_j(n, steps):
    return ("name: big-optimizer\ntensors:\n  - name: w\n    size: %d\n"
            "    grad: {dist: normal, scale: 1.0e-4, shrink: 0.99}\n"
            "batch: {microbatches: 1, tokens: 1}\nreduction: sum\nfullbatch: sum\n"
            "precision: {grad: fp16, accumulator: fp32}\n"
            "loss_scale: {mode: dynamic, init: 65536}\nclip: {max_norm: 1.0}\n"
            "optimizer: {lr: 1.0e-4, param: bf16, master: fp32}\n"
            "schedule: {name: cosine, warmup: 10}\nsteps: %d\n" % (n, steps))


def yaml_replay(dump, K):
    return ("name: replay\ntensors:\n  - name: w\n    grad: {replay: %s, key: w}\n"
            "batch: {microbatches: %d, tokens: 512}\nprecision: {grad: bf16, accumulator: bf16}\n" % (dump, K))


# ---- the torch + fp64 loops, as a user would write them ----

def adamw_one_step(w0, grad_lo, grad_ref):
    """One AdamW step (torch's defaults but lr 1e-4, weight decay 0.01, as the scenario's)
    of fp32 weights on the accumulated low-precision gradient, and of the same weights in
    fp64 on the fp64 reference gradient; the relative error of the weights."""
    p = w0.clone().requires_grad_()
    p.grad = grad_lo.float()
    torch.optim.AdamW([p], lr=1e-4, weight_decay=0.01).step()
    p64 = w0.double().requires_grad_()
    p64.grad = grad_ref
    torch.optim.AdamW([p64], lr=1e-4, weight_decay=0.01).step()
    with torch.no_grad():
        return ((p.double() - p64).norm() / (p64 - w0.double()).norm()).item()


def torch_accumulation(n, K, tokens, gen):
    """(i): K micro-batches of per-token-mean gradients m_k (fp32 normal draws, scale 1e-3);
    token_mean: the backward writes x_k = m_k * n_k / N, as bf16, accumulated into a bf16
    .grad; the reference is the fp64 sum of the exact x_k; then the weight step."""
    N = K * tokens
    acc = torch.zeros(n, dtype=BF16)        # the low-precision run's .grad
    ref = torch.zeros(n, dtype=F64)         # the fp64 reference
    for _ in range(K):
        x = torch.randn(n, generator=gen).mul_(1e-3 * tokens / N)  # fp32; * n_k/N = 2^-6: exact
        acc.add_(x.to(BF16))                # the bf16 backward output, accumulated in bf16
        ref.add_(x)                         # the exact value, summed in fp64
    err = ((acc.double() - ref).norm() / ref.norm()).item()
    w0 = torch.randn(n, generator=gen).mul_(0.02)
    return err, adamw_one_step(w0, acc, ref)


def torch_replay(dump, K):
    """(replay): the dump's bf16 entries x_k accumulated in bf16 and, as the reference, in
    fp64 (exact for these sums); then the weight step."""
    from safetensors.torch import load_file
    d = load_file(dump)
    n = d["w/step0/mb0"].numel()
    acc = torch.zeros(n, dtype=BF16)
    ref = torch.zeros(n, dtype=F64)
    for k in range(K):
        x = d["w/step0/mb%d" % k]
        acc.add_(x)
        ref.add_(x)
    err = ((acc.double() - ref).norm() / ref.norm()).item()
    w0 = torch.randn(n, generator=torch.Generator().manual_seed(1)).mul_(0.02)
    return err, adamw_one_step(w0, acc, ref)


def cosine_warmup(warmup, total):
    """transformers' get_cosine_schedule_with_warmup factor (min_lr 0)."""
    def f(step):
        if step < warmup:
            return step / max(1, warmup)
        return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
    return f


def torch_optimizer(n, steps, gen):
    """(j): bf16 parameters with fp32 master weights, AdamW (lr 1e-4, cosine with 10 warmup
    steps), gradients drawn in fp32 (normal, scale 1e-4 * 0.99^step), written by the
    backward in fp16 under GradScaler's dynamic loss scale (init 65536), unscaled into
    the master's fp32 .grad, clipped to global norm 1.0; the fp64 reference runs the same
    AdamW, schedule and clipping on the exact gradients; the relative error of the bf16
    parameters against it."""
    w0 = torch.randn(n, generator=gen).mul_(0.02)
    master = w0.clone().requires_grad_()              # fp32 master
    param = w0.to(BF16)                               # the bf16 parameters the model uses
    opt = torch.optim.AdamW([master], lr=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine_warmup(10, steps))
    scaler = torch.amp.GradScaler("cpu", init_scale=65536.0)
    ref = w0.double().requires_grad_()                # the fp64 reference
    opt64 = torch.optim.AdamW([ref], lr=1e-4)
    sched64 = torch.optim.lr_scheduler.LambdaLR(opt64, cosine_warmup(10, steps))
    for s in range(steps):
        g = torch.randn(n, generator=gen).mul_(1e-4 * 0.99 ** s)
        S = scaler.scale(torch.ones(()))              # the loss scale a scaled backward applies
        master.grad = g.mul(S).to(F16).float()        # fp16 backward output of the scaled loss
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_([master], 1.0)
        scaler.step(opt)                              # skipped when the fp16 grads overflowed
        scaler.update()
        sched.step()
        with torch.no_grad():
            param.copy_(master)                       # cast to bf16
        ref.grad = g.double()
        torch.nn.utils.clip_grad_norm_([ref], 1.0)
        opt64.step()
        sched64.step()
    with torch.no_grad():
        return ((param.double() - ref).norm() / (ref - w0.double()).norm()).item()


# ---- timing ----

def child_cpu(argv):
    """Run argv; (exit status, CPU seconds of that child: user + system, wall seconds)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    return os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime, time.monotonic() - t0


# The parts of each configuration whose results the reports hold bit for bit, as gp_bench --parts
# prices them (ns per element, each alone, in cache; bench/README.md): the generator's values
# (GSL's inverse CDF bit for bit), the exact reference sum, the attribution of every addition, the
# reference AdamW step in double-double and its clipping norm's sum of squares; with the
# element-order sums. Each is priced as implemented, not at a proven floor (but the sums'
# and, nearly, the generator's).
PARTS = {"i": [("generation", "generate_normal_ns"), ("exact sum", "exact_add_ns"),
               ("attribution bf16/bf16", "attrib_block_ns")],
         "replay": [("exact sum", "exact_add_ns"), ("attribution bf16/bf16", "attrib_block_ns")],
         "j": [("generation", "generate_normal_ns"), ("attribution fp16/fp32", "attrib_fp16_block_ns"),
               ("DD AdamW step", "dd_fma_ns"), ("DD sum of squares", "inorder_sum_dd_sq_ns")]}


def print_parts(c, parts, sums_ns, torch_ns):
    """The line that sets the parts' medians over the rounds beside torch's whole loop."""
    terms = [(name, statistics.median(p[key] for p in parts)) for name, key in PARTS[c]]
    if c in ("i", "replay") and sums_ns is not None:
        terms.append(("element-order sums", sums_ns))
    total = sum(v for _, v in terms)
    print("    parts the reports fix, each priced alone (gp_bench --parts): %s = %.2f ns = %.2f of torch's"
          % (" + ".join("%s %.2f" % t for t in terms), total, total / torch_ns), flush=True)


def native_cpu(native, argv):
    out = subprocess.run([native] + argv, check=True, capture_output=True, text=True).stdout.split()
    return float(out[0])


def write_dump(path, n, K, tokens):
    from safetensors.torch import save_file
    g = torch.Generator().manual_seed(7)
    N = K * tokens
    save_file({"w/step0/mb%d" % k: torch.randn(n, generator=g).mul_(1e-3 * tokens / N).to(BF16)
               for k in range(K)}, path)


def threads(gp, native, tmp, n, K, rounds):
    """Item 4: (i) at -j 1 and -j 2, wall clock, beside the control."""
    sc = os.path.join(tmp, "i.yaml")
    print("threads: (i) 2^%d x K = %d, wall seconds; control: two native loops one after the other "
          "vs at once" % (round(math.log2(n)), K))
    for r in range(rounds):
        t0 = time.monotonic()
        for _ in range(2):
            subprocess.run([native, "accum", str(n), str(K)], check=True, capture_output=True)
        seq = time.monotonic() - t0
        t0 = time.monotonic()
        ps = [subprocess.Popen([native, "accum", str(n), str(K)], stdout=subprocess.DEVNULL) for _ in range(2)]
        for p in ps:
            p.wait()
        par = time.monotonic() - t0
        w = {}
        for j in (1, 2):
            rc, _, w[j] = child_cpu([gp, "run", "--quiet", "-j", str(j), "--out", os.path.join(tmp, "t%d" % j), sc])
        same = all(open(os.path.join(tmp, "t1", f), "rb").read() == open(os.path.join(tmp, "t2", f), "rb").read()
                   for f in ("report.json", "report.md"))
        print("  round %d: -j 1 %.2f s, -j 2 %.2f s: speed-up %.2fx; control %.2fx; reports %s; load %s" % (
            r + 1, w[1], w[2], w[1] / w[2], seq / par, "byte-identical" if same else "DIFFER",
            " ".join(open("/proc/loadavg").read().split()[:3])), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=1 << 20, help="elements of (i) and (replay)")
    ap.add_argument("--microbatches", type=int, default=64)
    ap.add_argument("--params", type=int, default=200000, help="parameters of (j)")
    ap.add_argument("--steps", type=int, default=20, help="steps of (j)")
    ap.add_argument("--only", default="i,j,replay")
    ap.add_argument("--threads", action="store_true", help="also -j 2 on (i) beside the control")
    a = ap.parse_args()
    print(host_line(flags=True), flush=True)
    build = os.environ.get("GP_BUILD", os.path.join(os.getcwd(), "build"))
    gp = os.path.join(build, "gradprec")
    if not os.access(gp, os.X_OK):
        sys.stderr.write("vs_torch: no %s (set GP_BUILD to the build folder)\n" % gp)
        return 2
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="gp-vs-torch-")
    try:
        native = os.path.join(tmp, "native")
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vs_torch_native.c")
        cc = os.environ.get("CC", "cc")
        if subprocess.run([cc, "-O3", "-march=native", "-o", native, src, "-lm"]).returncode != 0:
            sys.stderr.write("vs_torch: %s could not compile %s\n" % (cc, src))
            return 2
        n, K, tokens, P, S = a.size, a.microbatches, 512, a.params, a.steps
        configs = [c for c in ("i", "j", "replay") if c in a.only.split(",")]
        dump = os.path.join(tmp, "grads.safetensors")
        for c, text in (("i", yaml_i(n, K)), ("j", yaml_j(P, S)), ("replay", yaml_replay(dump, K))):
            with open(os.path.join(tmp, c + ".yaml"), "w") as f:
                f.write(text)
        if "replay" in configs:
            write_dump(dump, n, K, tokens)
        print("torch %s, %d thread; gradprec %s -j 1; native: %s -O3 -march=native; CPU seconds, %d interleaved rounds"
              % (torch.__version__, torch.get_num_threads(), gp, cc, a.rounds), flush=True)
        work = {"i": n * K, "j": P * S, "replay": n * K}
        unit = {"i": "element-addition", "j": "parameter-step", "replay": "element-addition"}
        native_argv = {"i": ["accum", str(n), str(K)], "j": ["optim", str(P), str(S)], "replay": ["accum", str(n), str(K)]}
        times = {c: {"gradprec": [], "torch": [], "native": []} for c in configs}
        chain = []  # the element-order sums' floor, once a round, for (i) and (replay)
        bench = os.path.join(build, "bench", "gp_bench")
        parts = []  # gp_bench --parts once a round (when built): the parts the reports fix, priced alone
        gen = torch.Generator().manual_seed(1)
        # torch's one-off costs (first calls, lazy initialisation) untimed: each loop once, small
        torch_accumulation(4096, 2, tokens, gen)
        torch_optimizer(4096, 2, gen)
        if "replay" in configs:
            torch_replay(dump, 1)
        for r in range(a.rounds):
            for c in configs:
                rc, t, _ = child_cpu([gp, "run", "--quiet", "-j", "1", "--out", os.path.join(tmp, "out-" + c),
                                      os.path.join(tmp, c + ".yaml")])
                if rc not in (0, 1):
                    sys.stderr.write("vs_torch: gradprec run on (%s) exited %d\n" % (c, rc))
                    return 1
                times[c]["gradprec"].append(t)
                t0 = time.process_time()
                if c == "i":
                    torch_accumulation(n, K, tokens, gen)
                elif c == "j":
                    torch_optimizer(P, S, gen)
                else:
                    torch_replay(dump, K)
                times[c]["torch"].append(time.process_time() - t0)
                times[c]["native"].append(native_cpu(native, native_argv[c]))
            if "i" in configs or "replay" in configs:
                chain.append(native_cpu(native, ["chain", str(n), str(K)]))
            if os.access(bench, os.X_OK):
                p = subprocess.run([bench, "--parts", "--json"], capture_output=True, text=True)
                if p.returncode != 0:
                    sys.stderr.write("vs_torch: %s --parts exited %d\n" % (bench, p.returncode))
                    return 1
                parts.append(json.loads(p.stdout))
            print("  round %d done, load %s" % (r + 1, " ".join(open("/proc/loadavg").read().split()[:3])), flush=True)
        for c in configs:
            T = times[c]
            med = {k: statistics.median(v) for k, v in T.items()}
            ns = {k: 1e9 * v / work[c] for k, v in med.items()}
            per = [g / t for g, t in zip(T["gradprec"], T["torch"])]
            print("(%s) ns per %s (median CPU): gradprec %.2f, torch + fp64 %.2f, native %.3f; "
                  "ratio gradprec/torch %.3f (rounds %.3f-%.3f), gradprec/native %.1f"
                  % (c, unit[c], ns["gradprec"], ns["torch"], ns["native"], med["gradprec"] / med["torch"],
                     min(per), max(per), med["gradprec"] / med["native"]), flush=True)
            if c in ("i", "replay"):
                fl = statistics.median(chain)
                print("    floor of byte-identical reports (the element-order sums alone): %.3f ns = %.2f of torch's"
                      % (1e9 * fl / work[c], fl / med["torch"]), flush=True)
            if parts:
                print_parts(c, parts, 1e9 * statistics.median(chain) / work[c] if chain else None, ns["torch"])
        if a.threads:
            threads(gp, native, tmp, n, K, a.rounds)
        print(host_line(flags=True).replace("host:", "host at the end:"))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
