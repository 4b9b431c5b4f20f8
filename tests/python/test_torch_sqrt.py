# torch's CPU fp32 sqrt against gradprec's model of it, gp_torch_sqrtf_zen4
# (kernels/arith/gp_torch_sqrt.h, the sqrt of the AdamW evaluation torch_cpu_zen4), bit for
# bit: torch computes every expected value; gradprec's side is the header itself, compiled
# here into a small library (the function the CPU backend's AdamW step calls). MKL's
# kernels themselves (AVX-512, AVX2, SSE), called directly, against their models
# (gp_torch_sqrtf_intel_avx512 for torch_cpu_intel_avx512), and vrsqrt14ps against
# gp_torch_rsqrt14. And torch's bf16/fp16 sqrt against the IEEE sqrt, which the torch_cpu
# orders use for those dtypes.
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO

torch = pytest.importorskip("torch")
import subjects  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "scripts"))
import mkl_sqrt_kernels  # noqa: E402

SHIM = r"""
#include <stddef.h>
#include <stdint.h>
#include "gp_torch_sqrt.h"
void model(const uint32_t *x, uint32_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = gp_f32_bits(gp_torch_sqrtf_zen4(gp_f32_from_bits(x[i])));
}
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """gp_torch_sqrtf_zen4 on a uint32 array of fp32 bit patterns (compiled as the library
    compiles it: C11, no contraction)."""
    d = tmp_path_factory.mktemp("sqrt")
    (d / "shim.c").write_text(SHIM)
    so = d / "shim.so"
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=c11", "-ffp-contract=off", "-shared", "-fPIC",
                    "-I", os.path.join(REPO, "kernels", "arith"), "-o", str(so), str(d / "shim.c"), "-lm"],
                   check=True)
    lib = ctypes.CDLL(str(so))
    lib.model.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]

    def run(bits):
        bits = np.ascontiguousarray(bits, dtype=np.uint32)
        out = np.empty_like(bits)
        lib.model(bits.ctypes.data, out.ctypes.data, bits.size)
        return out
    return run


def differing(a, b):
    """Elements whose fp32 bit patterns differ (two NaNs agree, as gradprec compares)."""
    a, b = np.asarray(a, dtype=np.uint32), np.asarray(b, dtype=np.uint32)
    nan = np.isnan(a.view(np.float32)) & np.isnan(b.view(np.float32))
    return (a != b) & ~nan


def torch_bits(t):
    return t.contiguous().view(torch.int32).numpy().view(np.uint32)


def inputs():
    """10^7 fp32 bit patterns: 8e6 uniform over all 2^32 (both signs, every binade,
    subnormals, infinities, NaNs), 10^6 uniform in [0, 1e-6) (tiny second moments), 10^6 in
    [1, 4) (both exponent parities); and the edges of MKL's vector path (0x00800000 ..
    0x7f7ff000), signed zeros, infinities, a NaN."""
    rng = np.random.default_rng(12)
    edges = np.array([0, 0x80000000, 1, 0x007fffff, 0x00800000, 0x00800001, 0x7f7fefff, 0x7f7ff000, 0x7f7ff001,
                      0x7f7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xbf800000, 0x3f800000, 0x40000000],
                     dtype=np.uint32)
    return np.concatenate([
        edges,
        rng.integers(0, 1 << 32, size=8_000_000, dtype=np.uint64).astype(np.uint32),
        (rng.random(1_000_000) * 1e-6).astype(np.float32).view(np.uint32),
        (rng.random(1_000_000) * 3 + 1).astype(np.float32).view(np.uint32),
    ])


def test_model_equals_torch_sqrt_fp32(model):
    # torch.sqrt (MKL's vmsSqrt) and gp_torch_sqrtf_zen4 agree on every input; the model
    # is not the IEEE sqrt (about 9% of inputs with an even exponent and 25% with an odd
    # one are an ulp off it on this path, so the random part gives far more than 10^5).
    why = subjects.zen4_sqrt_missing()
    if why:
        pytest.skip(why)
    x = inputs()
    t = torch.from_numpy(x.view(np.float32).copy())
    want = torch_bits(t.sqrt())
    got = model(x)
    bad = np.flatnonzero(differing(got, want))
    assert bad.size == 0, "%d of %d differ; first x=0x%08x torch 0x%08x model 0x%08x" % (
        bad.size, x.size, x[bad[0]], want[bad[0]], got[bad[0]])
    with np.errstate(invalid="ignore"):
        ieee = np.sqrt(x.view(np.float32)).view(np.uint32)
    off = int(differing(got, ieee).sum())
    print("torch fp32 sqrt = model on %d inputs; %d of them (%.1f%%) differ from the IEEE sqrt"
          % (x.size, off, 100.0 * off / x.size))
    assert off > 100_000


def test_model_equals_torch_sqrt_as_adamw_calls_it(model):
    # the calls torch.optim.AdamW makes: exp_avg_sq.sqrt() (single-tensor) and
    # torch._foreach_sqrt (foreach), on tensors of 1 to 69 elements (vector body and
    # remainder), at storage offsets, strided and transposed.
    why = subjects.zen4_sqrt_missing()
    if why:
        pytest.skip(why)
    gen = torch.Generator().manual_seed(3)
    base = torch.rand(100_000, generator=gen) * torch.exp(torch.randn(100_000, generator=gen) * 8)
    views = [base[n:2 * n + n % 5] for n in range(1, 70)]
    views += [base[:20_000:3], base[:40_000].view(200, 200).t(), base[7:]]
    for v, r in zip(views, torch._foreach_sqrt(views)):
        want = torch_bits(r)
        assert not differing(model(torch_bits(v)), want).any()
        assert not differing(model(torch_bits(v)), torch_bits(v.sqrt())).any()


def test_host_model_equals_torch_sqrt_fp32():
    # torch.sqrt on fp32 CPU tensors against libgradprec's gradprec_torch_sqrtf under
    # torch_cpu_host (MKL's kernel choice for this CPU, with this CPU's rsqrtps), bit for
    # bit, on the 10^7 inputs above and every float of [1, 4): on any x86-64 host with an
    # MKL torch, Intel or AMD. torch computes every expected value.
    why = subjects.host_sqrt_missing()
    if why:
        pytest.skip(why)
    from gradprec.torch.host import _model_sqrt
    x = np.concatenate([inputs(), np.arange(0x3F800000, 0x40800000, dtype=np.uint32)])
    want = torch_bits(torch.from_numpy(x.view(np.float32).copy()).sqrt())
    got = _model_sqrt("torch_cpu_host", x.view(np.float32)).view(np.uint32)
    bad = np.flatnonzero(differing(got, want))
    assert bad.size == 0, "%d of %d differ; first x=0x%08x torch 0x%08x model 0x%08x" % (
        bad.size, x.size, x[bad[0]], want[bad[0]], got[bad[0]])


def test_host_model_equals_zen4_model(model):
    # on an AMD CPU whose rsqrtps is the Zen 4 table (subjects.zen4_sqrt_missing, which
    # checks the instruction itself, not torch), torch_cpu_host is gp_torch_sqrtf_zen4
    # (checked against MKL on all 2^32 inputs) on the 10^7 inputs and all of [1, 4)
    why = subjects.zen4_sqrt_missing()
    if why:
        pytest.skip(why)
    from gradprec.torch.host import _model_sqrt
    x = np.concatenate([inputs(), np.arange(0x3F800000, 0x40800000, dtype=np.uint32)])
    got = _model_sqrt("torch_cpu_host", x.view(np.float32)).view(np.uint32)
    assert not differing(got, model(x)).any()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_reduced_precision_sqrt_is_ieee(dtype):
    # bf16 and fp16 tensors: torch's sqrt is the IEEE sqrt of every one of the 65536
    # values (the binary64 sqrt rounded once: exact for these formats), which is what the
    # torch_cpu orders compute for bf16 state.
    dt = getattr(torch, dtype)
    x = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(dt)
    with np.errstate(invalid="ignore"):
        want = torch.from_numpy(np.sqrt(x.double().numpy())).to(dt)
    got = x.sqrt()
    same = (got.view(torch.int16) == want.view(torch.int16)) | (got.isnan() & want.isnan())
    assert bool(same.all())


# ---- MKL's kernels called directly (scripts/mkl_sqrt_kernels.py) ----
# The AVX-512 kernel is what MKL runs on an Intel CPU with AVX-512; it runs on any CPU with
# those instructions, so it is compared with its model here even where MKL would not pick
# it. The expected values are the kernel's own results.

@pytest.mark.parametrize("kernel", ["Z0", "L9", "EX"])
def test_mkl_kernel_equals_model(kernel):
    # Z0 against gp_torch_sqrtf_intel_avx512; L9 (AVX2) against the shared core with the
    # header's rsqrtps, and EX against gp_torch_sqrtf_zen4: these two only where this CPU's
    # rsqrtps is the header's (Zen 4's) table, since both kernels start from it. 10^7
    # inputs (inputs() above). scripts/mkl_sqrt_kernels.py runs all 2^32.
    why = mkl_sqrt_kernels.missing(kernel)
    if not why and kernel != "Z0":
        why = subjects.zen4_sqrt_missing()
    if why:
        pytest.skip(why)
    x = inputs()
    want = mkl_sqrt_kernels.run_kernel(kernel, x)
    got = mkl_sqrt_kernels.run_model(kernel, x)
    bad = np.flatnonzero(differing(got, want))
    assert bad.size == 0, "%d of %d differ; first x=0x%08x kernel 0x%08x model 0x%08x" % (
        bad.size, x.size, x[bad[0]], want[bad[0]], got[bad[0]])
    with np.errstate(invalid="ignore"):
        off = int(differing(want, np.sqrt(x.view(np.float32)).view(np.uint32)).sum())
    print("%s = model on %d inputs; %d differ from the IEEE sqrt" % (kernel, x.size, off))
    if kernel == "Z0":  # 0.59% of [1, 4) and of random positive floats: far from 0
        assert off > 10_000


_RSQRT14_CHECK = r"""
#include <immintrin.h>
#include <stdio.h>
#include "gp_torch_sqrt.h"
int main(void)
{
    for (uint32_t b = 1; b < 0x7f800000u; b++) { /* every positive finite float */
        float x = gp_f32_from_bits(b), r = _mm_cvtss_f32(_mm_rsqrt14_ss(_mm_setzero_ps(), _mm_set_ss(x)));
        if (gp_f32_bits(r) != gp_f32_bits(gp_torch_rsqrt14(x))) {
            printf("0x%08x\n", b);
            return 1;
        }
    }
    return 0;
}
"""


def test_rsqrt14_model_equals_instruction(tmp_path):
    # gp_torch_rsqrt14 (Intel's reference algorithm for vrsqrt14ps, the header's table)
    # against this CPU's vrsqrt14ps on every positive finite float, subnormals included.
    if "avx512f" not in mkl_sqrt_kernels._cpu_flags():
        pytest.skip("this CPU has no AVX-512F (vrsqrt14ps)")
    src, exe = tmp_path / "r.c", tmp_path / "r"
    src.write_text(_RSQRT14_CHECK)
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=c11", "-mavx512f", "-ffp-contract=off",
                    "-I", os.path.join(REPO, "kernels", "arith"), "-o", str(exe), str(src), "-lm"], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, "first differing input: " + run.stdout


def test_torch_sqrt_through_redirected_dispatch_equals_avx512_model():
    # torch.sqrt and torch._foreach_sqrt with MKL's kernel table pointed at the AVX-512
    # kernel (what MKL's dispatch picks on an Intel CPU with AVX-512): torch's own call
    # path, threads and remainders included, equals gp_torch_sqrtf_intel_avx512; and
    # gradprec.torch.sqrt_evaluation() names torch_cpu_intel_avx512 there, torch_cpu_zen4
    # (on a Zen 4) after.
    why = mkl_sqrt_kernels.missing("Z0")
    if why:
        pytest.skip(why)
    import gradprec.torch as gt
    x = inputs()
    t = torch.from_numpy(x.view(np.float32).copy())
    views = [t[n:3 * n + 5] for n in range(1, 70)] + [t[:20_000:3], t[:40_000].view(200, 200).t()]
    with mkl_sqrt_kernels.dispatched("Z0"):
        got = torch_bits(t.sqrt())
        foreach = [torch_bits(r) for r in torch._foreach_sqrt(views)]
        ev = gt.host.sqrt_evaluation.__wrapped__()
    assert not differing(got, mkl_sqrt_kernels.run_model("Z0", x)).any()
    for v, r in zip(views, foreach):
        assert not differing(r, mkl_sqrt_kernels.run_model("Z0", torch_bits(v))).any()
    assert ev == "torch_cpu_intel_avx512"
    if not subjects.zen4_sqrt_missing():
        assert gt.host.sqrt_evaluation.__wrapped__() == "torch_cpu_zen4"


# Measured on an Intel Xeon with AVX-512 (the H100 machine lent on 2026-11-26; torch
# 2.11.0+cu130 from its image, MKL's default dispatch; scripts/mkl-sqrt-probe.py): torch's
# fp32 sqrt of every float of [1, 4), stored as its difference in ulps from the IEEE sqrt
# (int8; 98955 inputs, all -1). The IEEE sqrt here is numpy's binary64 sqrt rounded to
# binary32 (correctly rounded: a double carries more than 2*24 + 2 bits). The expected
# values come from that machine, not from gradprec.
INTEL_XEON_AVX512 = os.path.join(REPO, "tests", "data", "intel-xeon-avx512-torch2.11-sqrt-1-4.npz")


def test_avx512_model_equals_torch_measured_on_an_intel_xeon():
    from gradprec.torch.host import _model_sqrt
    bits = np.arange(0x3F800000, 0x40800000, dtype=np.uint32)
    x = bits.view(np.float32)
    ieee = np.sqrt(x.astype(np.float64)).astype(np.float32).view(np.int32).astype(np.int64)
    torch_on_xeon = ieee + np.load(INTEL_XEON_AVX512)["diff"].astype(np.int64)
    got = _model_sqrt("torch_cpu_intel_avx512", x).view(np.int32).astype(np.int64)
    assert np.count_nonzero(torch_on_xeon != ieee) == 98955  # the data is what the probe printed
    bad = np.flatnonzero(got != torch_on_xeon)
    assert bad.size == 0, "%d of 2^24 differ, first at 0x%08x" % (bad.size, bits[bad[0]] if bad.size else 0)
