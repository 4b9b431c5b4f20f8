"""Which optimizer.evaluation matches this host's torch (docs/python.md)."""
from __future__ import annotations

import ctypes
import functools

import numpy as np
import torch as _torch

from .. import _lib
from .._errors import GradprecError

# the orders whose fp32 sqrt differs, most common first: the IEEE sqrt (any torch whose
# fp32 CPU sqrt is correctly rounded), then torch's MKL sqrt as modelled per CPU (verified
# models), then as computed on this host (torch_cpu_host: MKL's kernel choice with the
# host's rsqrtps; x86-64 builds only; reports made with it depend on the host's CPU)
SQRT_EVALUATIONS = ("torch_cpu", "torch_cpu_zen4", "torch_cpu_intel_avx512", "torch_cpu_host")


def _probe():
    """2^20 + 2^18 fp32 inputs: every 64th float of [1, 4) (both exponent parities: the
    models are off the IEEE sqrt on 17% and 0.59% of it), 2^20 uniform over the positive
    finite floats (every binade, subnormals), zeros, infinities, a negative, a NaN."""
    rng = np.random.default_rng(20261126)
    return np.concatenate([
        np.arange(0x3F800000, 0x40800000, 64, dtype=np.uint32),
        rng.integers(1, 0x7F800000, size=1 << 20, dtype=np.uint32),
        np.array([0, 0x80000000, 0x7F800000, 0xBF800000, 0x7FC00000], dtype=np.uint32),
    ]).view(np.float32)


def _model_sqrt(evaluation, x):
    y = np.empty_like(x)
    err = ctypes.create_string_buffer(256)
    if _lib.lib().gradprec_torch_sqrtf(evaluation.encode(), x.size, x.ctypes.data, y.ctypes.data, err, 256) != 0:
        raise GradprecError(2, err.value.decode())
    return y


@functools.lru_cache(maxsize=None)
def sqrt_evaluation() -> str:
    """The optimizer.evaluation for torch's CPU AdamW with fp32 state on this host: the
    first of SQRT_EVALUATIONS whose fp32 sqrt (libgradprec's gradprec_torch_sqrtf) equals
    torch.sqrt of an fp32 CPU tensor bit for bit (NaNs as NaNs) on a fixed probe of about
    1.3 million inputs; None when none does (e.g. a torch built otherwise). torch_cpu_host
    is tried last (skipped where libgradprec refuses it: not an x86-64 build, or an Intel
    CPU without AVX2 and FMA). A probe, not a
    proof: the models themselves are checked on all 2^32 inputs against the kernels they
    model (docs/model.md). What
    torch's sqrt is on this host is measured, not inferred from the CPU's name."""
    x = _probe()
    want = _torch.from_numpy(x.copy()).sqrt().numpy().view(np.uint32)
    nan_want = np.isnan(want.view(np.float32))
    for ev in SQRT_EVALUATIONS:
        try:
            got = _model_sqrt(ev, x).view(np.uint32)
        except GradprecError:  # torch_cpu_host where it is not modelled
            continue
        if np.all((got == want) | (np.isnan(got.view(np.float32)) & nan_want)):
            return ev
    return None
