#!/usr/bin/env python3
"""capture_scale.py [--sample N] [--steps S] [--keep DIR] — replay at LLM scale (issue 24,
item 5; bench/README.md). Builds a model of its own in torch (nothing downloaded): 76
residual blocks of LayerNorm(832) + Linear(832, 832), 304 parameter tensors, 52.8 million
parameters, fp32; captures S optimizer steps (default 3) of K = 4 micro-batches of uneven
token counts with gradprec.torch.capture(..., sample=N) (default 4096), then replays the
dump with the gradprec command line (`gradprec run -j 1` and `-j 2`). Each phase runs in a
child process of its own: its wall time and peak resident memory (wait4's ru_maxrss of
that child alone) are printed, after a first line describing the host (CPU model, family,
cores, load average). Exit 1 when a replay needs more than 256 MiB (the issue's bound) or
does not run.

Run from the repository root with the build's library and command line:
  PYTHONPATH=$PWD/python GRADPREC_LIB=$PWD/build/libgradprec.so GP_BUILD=$PWD/build \\
    /work/main/.venv/bin/python bench/capture_scale.py
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPLAY_MAX_MIB = 256
BLOCKS, DIM, K = 76, 832, 4
LENGTHS = [37, 9, 21, 5]  # tokens of the K micro-batches of every step

# The capture, run in a child process (argv: out_dir sample steps).
CAPTURE = r"""
import sys, torch
import gradprec.torch as gpt
out, sample, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
BLOCKS, DIM, LENGTHS = %d, %d, %r
K = len(LENGTHS)

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(DIM)
        self.lin = torch.nn.Linear(DIM, DIM)
    def forward(self, h):
        return h + self.lin(self.norm(h))

torch.manual_seed(0)
model = torch.nn.Sequential(*[Block() for _ in range(BLOCKS)])
params = list(model.parameters())
print("model: %%d parameter tensors, %%d parameters" %% (len(params), sum(p.numel() for p in params)), flush=True)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
g = torch.Generator().manual_seed(1)
with gpt.capture(model, out, reduction="mean", accumulation_steps=K, sample=sample, optimizer=opt) as cap:
    for s in range(steps):
        for L in LENGTHS:
            x = torch.randn(L, DIM, generator=g)
            with cap.microbatch(tokens=L):
                # per-token loss: the mean square of the output; the micro-batch's loss is
                # its token mean / K (reduction "mean")
                (model(x).square().mean(dim=1).mean() / K).backward()
        opt.step()
        opt.zero_grad()
""" % (BLOCKS, DIM, LENGTHS)


def host_line(flags=False):
    """The host line: CPU model, family and model number, cores (with flags: the SIMD flags the fast paths
    dispatch on), load average."""
    model = family = number = "?"
    have = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k, v = k.strip(), v.strip()
                if k == "model name" and model == "?":
                    model = v
                elif k == "cpu family" and family == "?":
                    family = v
                elif k == "model" and number == "?":
                    number = v
                elif k == "flags" and not have:
                    have = set(v.split())
    except OSError:
        pass
    la = os.getloadavg()
    simd = ""
    if flags:
        simd = ", flags " + (" ".join(f for f in ("avx512f", "avx512bw", "avx512vl", "avx2", "fma", "f16c")
                                       if f in have) or "-")
    return "host: %s, family %s model %s, %d cores%s, load average %.2f %.2f %.2f" % (
        model, family, number, os.cpu_count() or 0, simd, *la)


def run_child(argv, env=None, quiet=False):
    """Run argv; (exit status, wall seconds, peak RSS MiB of that child)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL if quiet else None)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, time.monotonic() - t0, ru.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sample", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--keep", help="capture into this folder and keep it (default: a temporary one)")
    a = ap.parse_args()
    print(host_line(), flush=True)
    build = os.environ.get("GP_BUILD", os.path.join(os.getcwd(), "build"))
    gp = os.path.join(build, "gradprec")
    if not os.access(gp, os.X_OK):
        sys.stderr.write("capture_scale: no %s (set GP_BUILD to the build folder)\n" % gp)
        return 2
    out = a.keep or tempfile.mkdtemp(prefix="gp-capture-scale-")
    try:
        rc, secs, mib = run_child([sys.executable, "-c", CAPTURE, out, str(a.sample), str(a.steps)])
        if rc != 0:
            sys.stderr.write("capture_scale: the capture failed (exit %d)\n" % rc)
            return 1
        dump = os.path.join(out, "grads.safetensors")
        print("capture: %d steps x K = %d, sample=%d: %.1f s, peak RSS %.1f MiB; dump %.1f MB" %
              (a.steps, K, a.sample, secs, mib, os.path.getsize(dump) / 1e6), flush=True)
        status = 0
        for jobs in (1, 2):
            rdir = os.path.join(out, "report-j%d" % jobs)
            rc, secs, mib = run_child([gp, "run", "--quiet", "-j", str(jobs), os.path.join(out, "scenario.yaml"),
                                       "--out", rdir], quiet=True)
            ok = rc in (0, 1) and mib <= REPLAY_MAX_MIB
            print("replay -j %d: exit %d, %.1f s, peak RSS %.1f MiB (bound %d MiB: %s)" %
                  (jobs, rc, secs, mib, REPLAY_MAX_MIB, "met" if ok else "NOT MET"), flush=True)
            status |= not ok
        return status
    finally:
        if not a.keep:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
