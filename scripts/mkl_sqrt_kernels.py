#!/usr/bin/env python3
"""mkl_sqrt_kernels.py [KERNEL ...] — MKL's fp32 sqrt kernels in torch's x86-64 wheel,
called directly, against gradprec's models of them (kernels/arith/gp_torch_sqrt.h) on all
2^32 inputs, 2^24 at a time. A kernel is found by its exported name in libtorch_cpu.so
(MKL is linked into it) and called as MKL's threader calls it: kernel(int n, const float
*a, float *r). Kernels and the model each is compared with:
  Z0   mkl_vml_kernel_sSqrt_Z0HAynn (AVX-512)  gp_torch_sqrtf_intel_avx512
  L9   mkl_vml_kernel_sSqrt_L9HAynn (AVX2)     gp_torch_sqrt_newton(AVX2) with the
                                               header's rsqrtps (Zen 4's): holds only on
                                               a CPU whose rsqrtps is that table's
  EX   mkl_vml_kernel_sSqrt_EXHAynn (SSE)      gp_torch_sqrtf_zen4 (same condition)
A kernel runs only where the CPU has the instructions it uses (Z0: AVX-512 F, DQ and BW;
L9: AVX2 and FMA), whatever MKL itself would pick here. Prints, per kernel, the inputs
compared, how many differ (NaNs agree with NaNs: gradprec compares NaNs by NaN-ness) with
the first few, and how many differ from the IEEE sqrt. Exit 0 when every kernel run equals
its model, 1 when one differs, 77 without torch / the symbol / the CPU features.
tests/python/test_torch_sqrt.py uses this module on 10^7 inputs per kernel."""
import contextlib
import ctypes
import functools
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = {"Z0": ("mkl_vml_kernel_sSqrt_Z0HAynn", ("avx512f", "avx512dq", "avx512bw"), 2),
           "L9": ("mkl_vml_kernel_sSqrt_L9HAynn", ("avx2", "fma"), 1),
           "EX": ("mkl_vml_kernel_sSqrt_EXHAynn", ("sse2",), 0)}

SHIM = r"""
#include <stddef.h>
#include <stdint.h>
#include "gp_torch_sqrt.h"
/* kind 0: gp_torch_sqrtf_zen4; 1: the AVX2 kernel with the header's rsqrtps;
 * 2: gp_torch_sqrtf_intel_avx512 */
void model(int kind, const uint32_t *x, uint32_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = gp_f32_from_bits(x[i]), r;
        if (kind == 0)
            r = gp_torch_sqrtf_zen4(v);
        else if (kind == 2)
            r = gp_torch_sqrtf_intel_avx512(v);
        else
            r = gp_torch_sqrt_vector(x[i], GP_MKL_SQRT_AVX2)
                    ? gp_torch_sqrt_newton(v, gp_torch_rsqrtps(v), GP_MKL_SQRT_AVX2) : sqrtf(v);
        y[i] = gp_f32_bits(r);
    }
}
"""


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def missing(kernel):
    """None when `kernel` ("Z0", "L9", "EX") can be called here; else why not."""
    import platform
    if platform.machine() not in ("x86_64", "AMD64"):
        return "not an x86-64 CPU (%s)" % platform.machine()
    name, flags, _ = KERNELS[kernel]
    lack = [f for f in flags if f not in _cpu_flags()]
    if lack:
        return "this CPU lacks %s, which %s uses" % (", ".join(lack), name)
    try:
        _kernel(name)
    except (ImportError, OSError, AttributeError) as e:
        return "%s not callable: %s" % (name, e)
    return None


@functools.lru_cache(maxsize=None)
def _kernel(name):
    import torch
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    f = getattr(lib, name)
    f.restype = None
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    return f


@functools.lru_cache(maxsize=None)
def _model_lib():
    d = tempfile.mkdtemp(prefix="gp-mkl-sqrt-")
    src, so = os.path.join(d, "shim.c"), os.path.join(d, "shim.so")
    with open(src, "w") as f:
        f.write(SHIM)
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=c11", "-ffp-contract=off", "-shared", "-fPIC",
                    "-I", os.path.join(REPO, "kernels", "arith"), "-o", so, src, "-lm"], check=True)
    lib = ctypes.CDLL(so)
    lib.model.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return lib


def run_kernel(kernel, bits):
    """The kernel's results on uint32 fp32 bit patterns (MKL's n is an int: 2^24 a call)."""
    bits = np.ascontiguousarray(bits, dtype=np.uint32)
    out = np.empty_like(bits)
    f = _kernel(KERNELS[kernel][0])
    for i in range(0, bits.size, 1 << 24):
        n = min(1 << 24, bits.size - i)
        f(n, bits[i:].ctypes.data, out[i:].ctypes.data)
    return out


def run_model(kernel, bits):
    """gradprec's model of the kernel on uint32 fp32 bit patterns."""
    bits = np.ascontiguousarray(bits, dtype=np.uint32)
    out = np.empty_like(bits)
    _model_lib().model(KERNELS[kernel][2], bits.ctypes.data, out.ctypes.data, bits.size)
    return out


@contextlib.contextmanager
def dispatched(kernel):
    """Within the block MKL's vmsSqrt in VML_HA mode (torch's fp32 CPU sqrt) runs `kernel`
    ("Z0", "L9", "EX") on this CPU, whatever MKL picked: every HA slot of MKL's kernel
    table for sSqrt (mkl_vml_kernel_sSqrt_ttab, writable data in libtorch_cpu.so: one row
    per accuracy mode, one slot per CPU class; the HA row holds EX, E2, H8, L9 and Z0
    HAynn, and the LA and EP rows reuse EX and E2 HAynn) that holds an HA kernel points to
    it, and is restored on leaving. In this process only (the kernel
    table is read on each call); a way to run torch's own ops, AdamW included, with the
    sqrt another CPU's MKL computes. Raises AssertionError when the table is not that."""
    import torch
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    addr = {ctypes.cast(getattr(lib, "mkl_vml_kernel_sSqrt_%sHAynn" % k), ctypes.c_void_p).value: k
            for k in ("EX", "E2", "H8", "L9", "Z0")}
    ttab = ctypes.cast(lib.mkl_vml_kernel_sSqrt_ttab, ctypes.POINTER(ctypes.c_void_p))
    slots = {i: ttab[i] for i in range(18) if ttab[i] in addr}
    assert {addr[v] for v in slots.values()} == set(addr.values()), slots
    target = ctypes.cast(_kernel(KERNELS[kernel][0]), ctypes.c_void_p).value
    try:
        for i in slots:
            ttab[i] = target
        yield
    finally:
        for i, v in slots.items():
            ttab[i] = v


def differing(a, b):
    """Elements whose fp32 bit patterns differ (two NaNs agree)."""
    a, b = np.asarray(a, dtype=np.uint32), np.asarray(b, dtype=np.uint32)
    nan = np.isnan(a.view(np.float32)) & np.isnan(b.view(np.float32))
    return (a != b) & ~nan


def main(argv):
    kernels = argv or list(KERNELS)
    rc = 0
    for k in kernels:
        why = missing(k)
        if why:
            print("%s: skipped: %s" % (k, why))
            rc = rc or 77
            continue
        bad = off = 0
        first = []
        for c in range(256):
            bits = np.arange(c << 24, (c + 1) << 24, dtype=np.uint64).astype(np.uint32)
            got, want = run_model(k, bits), run_kernel(k, bits)
            d = np.flatnonzero(differing(got, want))
            bad += d.size
            first += ["x=0x%08x kernel 0x%08x model 0x%08x" % (bits[i], want[i], got[i]) for i in d[:3 - len(first)]]
            with np.errstate(invalid="ignore"):
                off += int(differing(want, np.sqrt(bits.view(np.float32)).view(np.uint32)).sum())
        print("%s (%s): %d inputs, %d differ from the model%s; %d differ from the IEEE sqrt"
              % (k, KERNELS[k][0], 1 << 32, bad, (": " + "; ".join(first)) if first else "", off))
        if bad:
            rc = 1
    return rc if rc != 77 or len(kernels) == 1 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
