# torch's CPU fp32 sqrt against gradprec's model of it, gp_torch_sqrtf_zen4
# (kernels/arith/gp_torch_sqrt.h, the sqrt of the AdamW evaluation torch_cpu_zen4), bit for
# bit: torch computes every expected value; gradprec's side is the header itself, compiled
# here into a small library (the function the CPU backend's AdamW step calls). And torch's
# bf16/fp16 sqrt against the IEEE sqrt, which the torch_cpu orders use for those dtypes.
import ctypes
import os
import subprocess

import numpy as np
import pytest

from conftest import REPO

torch = pytest.importorskip("torch")
import subjects  # noqa: E402

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
