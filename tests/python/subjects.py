"""Subjects for tests/python/test_backends.py (also loaded by the CLI as
python:subjects:NAME). Optimizers written as a user would, with torch ops on gradprec's
arrays (gradprec.torch.Backend gives them torch's gradient accumulation and GradScaler):
one correct AdamW (the README's example) and three with a deliberate bug each; and
torch's AdamW with its square root replaced by a correctly rounded one.

Why the last: torch's CPU fp32 sqrt on the x86-64 PyPI wheel is MKL's vmsSqrt, which is
not the IEEE sqrt (kernels/arith/gp_torch_sqrt.h: on an AMD Zen 4 about 1 input in 6 is
an ulp off; on Intel CPUs MKL runs other kernels, 0.08% to 0.6% off); gradprec's
torch_cpu order uses the IEEE sqrtf, its torch_cpu_zen4 order the wheel's sqrt on AMD Zen
4. The replacement computes sqrt in binary64 (torch's fp64 sqrt is MKL's too, so numpy's)
and rounds once to the tensor's dtype: correctly rounded for fp32 and bf16, since 53 >=
2*24 + 2 (double rounding is innocuous for sqrt: Figueroa, 1995).
"""
import contextlib
import functools

import numpy as np
import torch

import gradprec.torch
from gradprec.torch.backends import _plain_or_master

_torch_sqrt = torch.Tensor.sqrt
_torch_foreach_sqrt = torch._foreach_sqrt


def cr_sqrt(t):
    """sqrt(t) correctly rounded to t's dtype (numpy's IEEE binary64 sqrt, one rounding)."""
    return torch.from_numpy(np.sqrt(t.detach().double().cpu().numpy())).to(t.dtype)


def zen4_sqrt_missing():
    """None when torch's CPU fp32 sqrt is the one gradprec models as torch_cpu_zen4 (MKL's
    generic kernel, which MKL runs on a CPU that is not Intel's, with AMD's rsqrtps; the
    table is Zen 4's); else why not: not x86-64, no MKL, not AMD, or an AMD CPU whose
    rsqrtps differs from the table (checked on the instruction itself). Nothing here looks
    at torch's results."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        return "not an x86-64 CPU (%s): torch_cpu_zen4 models the x86-64 wheel" % platform.machine()
    if not torch.backends.mkl.is_available():
        return "this torch is built without MKL: its sqrt is not the one torch_cpu_zen4 models"
    try:
        with open("/proc/cpuinfo") as f:
            vendor = next((ln.split(":")[1].strip() for ln in f if ln.startswith("vendor_id")), "unknown")
    except OSError:
        vendor = "unknown"
    if vendor != "AuthenticAMD":
        return "CPU vendor %s: MKL runs another sqrt kernel than on AMD (not modelled)" % vendor
    return _host_rsqrtps_differs()


def intel_avx512_sqrt_missing():
    """None when this host's torch fp32 CPU sqrt is the one gradprec models as
    torch_cpu_intel_avx512: an Intel CPU with the AVX-512 subsets MKL's AVX-512 kernel uses
    (F, DQ, BW), an x86-64 torch with MKL, and gradprec.torch.sqrt_evaluation() agreeing on
    its probe; else why not (the CPU is named first: on an AMD CPU MKL never runs that
    kernel by itself)."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        return "not an x86-64 CPU (%s): torch_cpu_intel_avx512 models the x86-64 wheel" % platform.machine()
    if not torch.backends.mkl.is_available():
        return "this torch is built without MKL: its sqrt is not the one torch_cpu_intel_avx512 models"
    vendor, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("vendor_id"):
                    vendor = ln.split(":")[1].strip()
                elif ln.startswith("flags"):
                    flags = set(ln.split(":", 1)[1].split())
    except OSError:
        pass
    if vendor != "GenuineIntel":
        return ("CPU vendor %s: MKL runs its AVX-512 sqrt kernel only on Intel CPUs (torch_cpu_intel_avx512 is "
                "checked here against the kernel itself, tests/python/test_torch_sqrt.py)" % vendor)
    lack = [f for f in ("avx512f", "avx512dq", "avx512bw") if f not in flags]
    if lack:
        return "this Intel CPU lacks %s: MKL runs its AVX2 kernel (not modelled)" % ", ".join(lack)
    ev = gradprec.torch.sqrt_evaluation()
    if ev != "torch_cpu_intel_avx512":
        return "gradprec.torch.sqrt_evaluation() is %s on this Intel AVX-512 host, not torch_cpu_intel_avx512" % ev
    return None


def host_sqrt_missing():
    """None when torch's CPU fp32 sqrt on this host is MKL's, which torch_cpu_host models
    (an x86-64 CPU and a torch with MKL, and libgradprec models this CPU's kernel); else
    why not. The CPU's rsqrtps does not matter: torch_cpu_host takes it from the host."""
    import platform

    from gradprec.torch.host import _model_sqrt

    if platform.machine() not in ("x86_64", "AMD64"):
        return "not an x86-64 CPU (%s): torch_cpu_host models the x86-64 wheel" % platform.machine()
    if not torch.backends.mkl.is_available():
        return "this torch is built without MKL: its sqrt is not the one torch_cpu_host models"
    try:
        _model_sqrt("torch_cpu_host", np.ones(1, dtype=np.float32))
    except gradprec.GradprecError as e:
        return str(e)
    return None


_RSQRT_CHECK = r"""
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include "gp_torch_sqrt.h"
int main(void)
{
    for (uint32_t b = 0x3f800000u; b < 0x40800000u; b++) { /* all of [1, 4): both parities */
        float x = gp_f32_from_bits(b), r = _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(x)));
        if (gp_f32_bits(r) != gp_f32_bits(gp_torch_rsqrtps(x))) {
            printf("0x%08x\n", b);
            return 1;
        }
    }
    return 0;
}
"""


@functools.lru_cache(maxsize=None)
def _host_rsqrtps_differs():
    """None when this CPU's rsqrtps equals the Zen 4 table of gp_torch_sqrt.h on every
    float of [1, 4) (the table's whole domain: other binades scale exactly); else why not.
    A property of the CPU (the instruction MKL's generic kernel starts from), not of torch."""
    import os
    import subprocess
    import tempfile

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "rsqrt.c"), os.path.join(d, "rsqrt")
        with open(src, "w") as f:
            f.write(_RSQRT_CHECK)
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=c11", "-ffp-contract=off",
                        "-I", os.path.join(repo, "kernels", "arith"), "-o", exe, src, "-lm"], check=True)
        run = subprocess.run([exe], capture_output=True, text=True)
    if run.returncode != 0:
        return ("this CPU's rsqrtps differs from the Zen 4 table torch_cpu_zen4 holds (first at x = %s): "
                "torch's fp32 sqrt here is not the one modelled" % run.stdout.strip())
    return None


@contextlib.contextmanager
def correctly_rounded_sqrt():
    """Within the block, Tensor.sqrt and torch._foreach_sqrt (what torch.optim.AdamW's
    single-tensor and foreach steps call) are correctly rounded."""
    torch.Tensor.sqrt = cr_sqrt
    torch._foreach_sqrt = lambda ts: [cr_sqrt(t) for t in ts]
    try:
        yield
    finally:
        torch.Tensor.sqrt = _torch_sqrt
        torch._foreach_sqrt = _torch_foreach_sqrt


class AdamWCorrectSqrt(gradprec.torch.AdamW):
    """torch.optim.AdamW (single-tensor) with a correctly rounded sqrt."""

    name = "torch.optim.AdamW, correctly rounded sqrt"

    def adamw(self, a):
        with correctly_rounded_sqrt():
            super().adamw(a)


class AdamWForeachCorrectSqrt(gradprec.torch.AdamWForeach):
    """torch.optim.AdamW(foreach=True) with a correctly rounded sqrt."""

    name = "torch.optim.AdamW(foreach), correctly rounded sqrt"

    def adamw(self, a):
        with correctly_rounded_sqrt():
            super().adamw(a)


class Raises(gradprec.torch.AdamW):
    """An optimizer whose step raises (the subject's own bug)."""

    def adamw(self, a):
        raise ValueError("step %d: shapes do not match\n(second line)" % a.step)


class Refuses(gradprec.torch.AdamW):
    """An optimizer that implements no configuration."""

    def adamw(self, a):
        raise NotImplementedError("no AdamW here")


def refuse_as_torch(a, name):
    """Raise NotImplementedError (gradprec: the configuration is not supported, status 2)
    for what torch.optim.AdamW cannot run, as gradprec.torch's adapters do: .grad and the
    state in another dtype than the param's (without a master), Kahan, stochastic
    rounding; and torch's fused order, which these single-tensor steps do not follow."""
    _plain_or_master(a, name)
    if a.variant == "torch_fused_cpu":
        raise NotImplementedError("%s is single-tensor AdamW, not torch's fused kernel" % name)


class MyAdamW(gradprec.torch.Backend):
    """AdamW as torch.optim.AdamW's single-tensor code writes it (correct)."""

    name = "MyAdamW"

    def adamw(self, a):
        refuse_as_torch(a, self.name)
        if a.found_inf:  # GradScaler skips the step
            return
        master = a.variant == "master"
        w, g = (a.master, a.grad.float()) if master else (a.param, a.grad)
        bc1, bc2 = 1 - a.beta1**a.step, 1 - a.beta2**a.step
        w.mul_(1 - a.lr * a.weight_decay)
        a.m.lerp_(g, 1 - a.beta1)
        a.v.mul_(a.beta2).addcmul_(g, g, value=1 - a.beta2)
        w.addcdiv_(a.m, (a.v.sqrt() / bc2**0.5).add_(a.eps), value=-a.lr / bc1)
        if master:
            a.param.copy_(w)


class NoBiasCorrection(MyAdamW):
    """Bug: bias correction dropped (bc1 = bc2 = 1)."""

    name = "AdamW without bias correction"

    def adamw(self, a):
        refuse_as_torch(a, self.name)
        if a.found_inf:
            return
        master = a.variant == "master"
        w, g = (a.master, a.grad.float()) if master else (a.param, a.grad)
        w.mul_(1 - a.lr * a.weight_decay)
        a.m.lerp_(g, 1 - a.beta1)
        a.v.mul_(a.beta2).addcmul_(g, g, value=1 - a.beta2)
        w.addcdiv_(a.m, a.v.sqrt().add_(a.eps), value=-a.lr)
        if master:
            a.param.copy_(w)


class DecayOnLowPrecisionParam(MyAdamW):
    """Bug: with fp32 master weights, weight decay is applied to the bf16/fp16 param (where
    a factor 1 - lr*wd closer to 1 than half an ulp rounds away, and which the next copy
    from the master overwrites anyway) instead of to the master."""

    name = "AdamW decaying the low-precision param"

    def adamw(self, a):
        if a.variant != "master":
            raise NotImplementedError("this bug needs an fp32 master copy")
        refuse_as_torch(a, self.name)
        if a.found_inf:
            return
        a.param.mul_(1 - a.lr * a.weight_decay)  # the bug: the bf16 copy, not the master
        wd, a.weight_decay = a.weight_decay, 0.0
        try:
            super().adamw(a)
        finally:
            a.weight_decay = wd


class StateInParamDtype(MyAdamW):
    """Bug: m and v are kept in the param's dtype although the scenario asks for fp32
    state (each step's m and v are stored rounded to the param dtype)."""

    name = "AdamW with state in the param dtype"

    def adamw(self, a):
        super().adamw(a)
        if not a.found_inf:
            dt = a.param.dtype
            a.m.copy_(a.m.to(dt))
            a.v.copy_(a.v.to(dt))


class OnlyFp32Params(MyAdamW):
    """Correct AdamW that implements fp32 parameters only: refuses the others, saying so."""

    name = "MyAdamW, fp32 params only"

    def adamw(self, a):
        if a.param.dtype != torch.float32:
            raise NotImplementedError("only fp32 parameters, not %s" % str(a.param.dtype).replace("torch.", ""))
        super().adamw(a)

