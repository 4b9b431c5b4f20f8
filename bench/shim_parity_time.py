#!/usr/bin/env python3
"""shim_parity_time.py [BUILD_DIR] — how long the unmodified CUDA parity test takes when the
CUDA kernel sources run on the CPU through the host shim (not a GPU run), per thread order,
next to the default suite on the CPU backend measured in the same session (the parity test
runs that suite once more, on the shim's cuda backend, after 5 x 10^8 conversions).
Prints wall and CPU (user + system) seconds and the CPU ratio to the suite run."""
import os
import resource
import subprocess
import sys
import tempfile
import time


def timed(cmd, env=None):
    """(exit status, wall s, cpu s) of cmd, its output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    rc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return rc, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    b = sys.argv[1] if len(sys.argv) > 1 else "build"
    exe = os.path.join(b, "tests", "cudashim", "test_cuda_parity_shim")
    gp = os.path.join(b, "gradprec")
    if not (os.access(exe, os.X_OK) and os.access(gp, os.X_OK)):
        print(f"shim_parity_time: build {b} first (cmake --build {b})")
        return 2
    with tempfile.TemporaryDirectory() as t:
        rc, sw, sc = timed([gp, "run", "--quiet", "--out", os.path.join(t, "out")])
    if rc not in (0, 1):
        print(f"default suite: gradprec run exited {rc}")
        return 1
    print(f"default suite on the CPU backend: wall {sw:.2f} s, cpu {sc:.2f} s")
    for order in ("forward", "reverse", "shuffle:7"):
        rc, w, c = timed([exe], dict(os.environ, GP_SHIM_ORDER=order))
        if rc != 0:
            print(f"parity test through the host shim ({order}): FAILED (exit {rc})")
            return 1
        print(f"parity test through the host shim ({order}): wall {w:.2f} s, cpu {c:.2f} s "
              f"({c / sc:.1f}x the suite's cpu)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
