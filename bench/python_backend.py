#!/usr/bin/env python3
"""python_backend.py [--elements N] [--steps S] — what a backend written in Python costs
against gradprec's C CPU backend, measured in one process (ratios; never a timed test).

A scenario (fp32 gradients, K = 4 micro-batches accumulated in fp32, AdamW on fp32 params,
evaluation torch_cpu) runs on the C CPU backend and on gradprec.torch.AdamW (torch's
`p.grad += g` and torch.optim.AdamW, in process), best of 3 CPU seconds each: with 1
element over 200 steps (the cost of one Python call: FFI, argument objects, torch views,
an optimizer object), then with N elements (the cost per element beyond it). Then the
same N through the command line (`--backend python:gradprec.torch:AdamW`: a worker
process, arrays over a socket) against `--backend cpu`. Whole runs include gradprec's
own work (exact references, metrics), the same in each; the overheads subtract the cpu run.
Run: PYTHONPATH=python GRADPREC_LIB=build/libgradprec.so python3 bench/python_backend.py
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import gradprec
import gradprec.torch as gt


class Null(gt.Backend):
    name = "null"

    def accumulate(self, a):
        pass

    def unscale(self, a):
        pass

    def adamw(self, a):
        pass


def scenario(n, steps):
    return """name: bench
seed: 1
tensors:
  - name: w
    size: %d
    grad: {dist: normal, scale: 1.0e-3}
batch: {microbatches: 4, tokens: 1}
reduction: sum
fullbatch: sum
precision: {grad: fp32, accumulator: fp32}
optimizer: {lr: 1.0e-3, evaluation: torch_cpu}
steps: %d
""" % (n, steps)


def best(fn, reps=3):
    """Best of reps CPU seconds (this process's threads and its reaped children: the
    gradprec command and its worker), which a loaded machine disturbs less than wall time."""
    t = []
    for _ in range(reps):
        a, c = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
        fn()
        d = resource.getrusage(resource.RUSAGE_CHILDREN)
        t.append(time.process_time() - a + (d.ru_utime - c.ru_utime) + (d.ru_stime - c.ru_stime))
    return min(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=1 << 16)
    ap.add_argument("--steps", type=int, default=3)
    o = ap.parse_args()
    # backend calls per step and chunk of 16384 elements: K = 4 accumulates + 1 adamw
    small, small_steps = 1, 200
    t = {}
    for label, n, steps in (("small", small, small_steps), ("large", o.elements, o.steps)):
        text = scenario(n, steps)
        t[label, "cpu"] = best(lambda: gradprec.run(text, backend="cpu"))
        t[label, "torch"] = best(lambda: gradprec.run(text, backend=gt.AdamW()))
    calls_small = small_steps * 5
    per_call = (t["small", "torch"] - t["small", "cpu"]) / calls_small
    chunks = -(-o.elements // 16384)
    calls, elem_calls = o.steps * chunks * 5, o.steps * o.elements * 5
    per_elem = (t["large", "torch"] - t["large", "cpu"] - per_call * calls) / elem_calls
    print("python_backend: CPU seconds, best of 3 (gradprec.torch.AdamW in process vs the C cpu backend)")
    print("  1 element x %d steps (%d calls):  cpu %.3f s, torch %.3f s: %.1f us per call over cpu"
          % (small_steps, calls_small, t["small", "cpu"], t["small", "torch"], 1e6 * per_call))
    print("  %d elements x %d steps (%d calls, %d element-calls):  cpu %.3f s, torch %.3f s (%.2fx)"
          % (o.elements, o.steps, calls, elem_calls, t["large", "cpu"], t["large", "torch"],
             t["large", "torch"] / t["large", "cpu"]))
    print("  per element-call beyond the per-call cost: %.1f ns over cpu" % (1e9 * per_elem))
    text = scenario(o.elements, o.steps)
    cli = os.path.join(os.environ.get("GP_BUILD", "build"), "gradprec")
    if os.access(cli, os.X_OK):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.yaml")
            with open(path, "w") as f:
                f.write(text)
            env = dict(os.environ, GP_PYTHON=os.environ.get("GP_PYTHON", sys.executable))

            def run(backend):
                subprocess.run([cli, "run", path, "--backend", backend, "--out", os.path.join(d, "o"), "--quiet"],
                               env=env, check=True, stdout=subprocess.DEVNULL)

            c_cpu = best(lambda: run("cpu"))
            c_py = best(lambda: run("python:gradprec.torch:AdamW"))
            print("  CLI, %d elements: --backend cpu %.3f s, python:gradprec.torch:AdamW %.3f s (%.1fx; the worker's "
                  "interpreter start and torch import included)" % (o.elements, c_cpu, c_py, c_py / c_cpu))


if __name__ == "__main__":
    main()
