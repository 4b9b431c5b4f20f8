"""Subjects for tests/python/test_backends.py (also loaded by the CLI as
python:subjects:NAME). Optimizers written as a user would, with torch ops on gradprec's
arrays (gradprec.torch.Backend gives them torch's gradient accumulation and GradScaler):
one correct AdamW (the README's example) and three with a deliberate bug each; and
torch's AdamW with its square root replaced by a correctly rounded one.

Why the last: on the PyPI torch wheel (MKL) torch's CPU fp32 sqrt is not correctly
rounded on about 0.7% of inputs (measured in test_backends.py), gradprec's sqrtf is, so
an fp32 AdamW step can differ by an ulp of the param there. The replacement computes
sqrt in binary64 and rounds once to the tensor's dtype: correctly rounded for fp32 and
bf16, since 53 >= 2*24 + 2 (double rounding is innocuous for sqrt: Figueroa, 1995).
"""
import contextlib

import torch

import gradprec.torch
from gradprec.torch.backends import _plain_or_master

_torch_sqrt = torch.Tensor.sqrt
_torch_foreach_sqrt = torch._foreach_sqrt


def cr_sqrt(t):
    """sqrt(t) correctly rounded to t's dtype (binary64 sqrt, one rounding)."""
    return torch.sqrt(t.double()).to(t.dtype)


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


class SqrtAudit(gradprec.torch.AdamW):
    """torch.optim.AdamW (single-tensor, torch's own sqrt) that counts, after each step,
    the elements whose new exp_avg_sq torch's sqrt does not round correctly."""

    name = "torch.optim.AdamW (sqrt audited)"

    def __init__(self):
        self.misrounded = 0
        self.sqrts = 0

    def adamw(self, a):
        super().adamw(a)
        if not a.found_inf:
            self.misrounded += int((_torch_sqrt(a.v) != cr_sqrt(a.v)).sum())
            self.sqrts += a.v.numel()


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
