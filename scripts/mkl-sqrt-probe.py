#!/usr/bin/env python3
"""mkl-sqrt-probe.py [OUT_DIR] — how far torch's fp32 CPU sqrt (MKL's vmsSqrt in the
x86-64 wheel, kernels/arith/gp_torch_sqrt.h) is from the IEEE sqrt on this host, under
MKL's default dispatch and under the MKL_ENABLE_INSTRUCTIONS / MKL_CBWR settings that
pick other kernels. For each setting (a fresh interpreter, since MKL reads them once) it
prints the CPU, torch's version and, per input range, how many results differ from the
IEEE sqrt and by how many ulps. The IEEE reference is numpy's float64 sqrt rounded to
float32: correctly rounded, since a double carries more than 2*24+2 bits (double
rounding is innocuous for sqrt). With OUT_DIR, each setting's ulp differences over all
2^24 floats of [1, 4) are saved as int8 (torch's bits minus IEEE's) in
OUT_DIR/sqrt-diff-SETTING.npz, for modelling the kernel elsewhere. A measurement, not a
test: exit 0, or 77 without torch."""
import os
import platform
import subprocess
import sys

SETTINGS = [("default", {}), ("avx2", {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}),
            ("sse42", {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}), ("cbwr-compatible", {"MKL_CBWR": "COMPATIBLE"})]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def one(tag, out_dir):
    """Runs in the child: the counts for this process's MKL setting."""
    import numpy as np
    import torch
    ranges = [("[1,4) all", np.arange(0x3F800000, 0x40800000, dtype=np.uint32)),
              ("subnormals all", np.arange(1, 0x00800000, dtype=np.uint32)),
              ("top binade all", np.arange(0x7F000000, 0x7F800000, dtype=np.uint32)),
              ("random positive finite 1e7", np.random.default_rng(1).integers(1, 0x7F800000, 10**7, dtype=np.uint32))]
    print("%s: torch %s, MKL %s" % (tag, torch.__version__, torch.backends.mkl.is_available()))
    for name, bits in ranges:
        x = bits.view(np.float32)
        got = torch.from_numpy(x).sqrt().numpy().view(np.int32).astype(np.int64)
        ref = np.sqrt(x.astype(np.float64)).astype(np.float32).view(np.int32).astype(np.int64)
        d = got - ref
        nz = np.count_nonzero(d)
        hist = {int(k): int(v) for k, v in zip(*np.unique(d[d != 0], return_counts=True))}
        print("  %-28s %10d inputs, %9d differ (%.4f%%), ulps: %s" % (name, len(d), nz, 100.0 * nz / len(d), hist))
        if out_dir and name == "[1,4) all":
            np.savez_compressed(os.path.join(out_dir, "sqrt-diff-%s.npz" % tag), diff=np.clip(d, -127, 127).astype(np.int8))
    sys.stdout.flush()


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        one(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
        return 0
    out_dir = sys.argv[1] if len(sys.argv) > 1 else ""
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("no torch: nothing measured")
        return 77
    print("CPU: %s (%s)" % (cpu_name(), platform.machine()))
    for tag, env in SETTINGS:
        e = dict(os.environ)
        e.update(env)
        subprocess.run([sys.executable, __file__, "--child", tag, out_dir], env=e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
