"""Subjects under test written with torch (docs/python.md, "Python backends"): backend
objects whose methods call PyTorch's own kernels on tensors that view gradprec's arrays,
for gradprec.run(scenario, backend=obj) or `gradprec run --backend
python:gradprec.torch:NAME`. No arithmetic is written here: each method hands the arrays
to the torch (or torch-optimi, torchao) code that a training script runs, and gradprec
judges what it wrote against the exact reference.

- Backend: the training step's gradient side as torch does it: `p.grad += g` accumulation
  in the accumulator's dtype (AccumulateGrad's add), and torch.amp.GradScaler's kernels
  (torch._amp_foreach_non_finite_check_and_unscale_, what GradScaler.unscale_ calls, and
  torch._amp_update_scale_, what GradScaler.update calls). Subclass it and write `adamw`
  to test your own optimizer step.
- AdamW, AdamWForeach, AdamWFused: torch.optim.AdamW(foreach=False / True / fused=True)
  on the CPU; AdamWCUDA, AdamWForeachCUDA, AdamWFusedCUDA on a CUDA device (arrays
  copied there and back; refused, status 2, when torch sees no device).
- BnbAdamW8bit: bitsandbytes' AdamW8bit; TorchaoAdamW8bit, TorchaoAdamW4bit,
  TorchaoAdamWFp8: torchao.optim's AdamW8bit, AdamW4bit, AdamWFp8 — on the CPU, with the
  scenario's low-bit state (optimizer.state: bnb8_blockwise, torchao_8bit, torchao_4bit,
  torchao_fp8): the library's own quantized state is gradprec's codes and scales.
- OptimiAdamW: torch-optimi's AdamW (Kahan summation for bf16/fp16 params when the
  scenario asks for `kahan: true`), TorchaoAdamW: torchao's AdamW with bf16 stochastic
  rounding (`stochastic: true`). Constructing one without the package raises ImportError
  naming the package to install.

What each refuses (NotImplementedError, so gradprec reports the scenario as unsupported,
status 2) is what the torch code cannot express: another accumulator rounding than RNE,
FTZ, fp8 arithmetic; an optimizer state dtype other than what the optimizer keeps (torch
and optimi keep exp_avg/exp_avg_sq in the param's dtype; fp32 with an fp32 master copy);
a gradient dtype other than the param's (autograd gives .grad the param's dtype).
"""
import torch

__all__ = ["Backend", "AdamW", "AdamWForeach", "AdamWFused", "AdamWCUDA", "AdamWForeachCUDA", "AdamWFusedCUDA",
           "OptimiAdamW", "TorchaoAdamW", "BnbAdamW8bit", "TorchaoAdamW8bit", "TorchaoAdamW4bit", "TorchaoAdamWFp8"]

_REAL = ("fp32", "bf16", "fp16")


class Backend:
    """`p.grad += g` accumulation and GradScaler's unscale and update, in torch; `adamw`
    is left to subclasses (NotImplementedError here)."""

    name = "torch"

    def accumulate(self, a):
        if a.rounding != "rne" or a.ftz:
            raise NotImplementedError("torch adds with round-to-nearest-even, without FTZ")
        if a.acc_format not in _REAL or a.grad_format not in _REAL:
            raise NotImplementedError("torch has no fp8 addition")
        a.acc.add_(a.grad)  # AccumulateGrad: the sum in the accumulator's dtype (fp32 math, one rounding)

    def unscale(self, a):
        if a.ftz or a.acc_format not in _REAL:
            raise NotImplementedError("GradScaler unscales fp32/bf16/fp16 gradients without FTZ")
        found = torch.zeros(1, dtype=torch.float32)
        inv = torch.full((1,), a.inv_scale, dtype=torch.float32)
        torch._amp_foreach_non_finite_check_and_unscale_([a.acc], found, inv)
        a.found_inf = bool(found.item())

    def scaler_update(self, a):
        found = torch.full((1,), 1.0 if a.found_inf else 0.0, dtype=torch.float32)
        torch._amp_update_scale_(a.scale, a.tracker, found, a.growth, a.backoff, a.interval)

    def adamw(self, a):
        raise NotImplementedError("%s has no optimizer step" % type(self).__name__)


def _plain_or_master(a, what):
    """(weights, grad) the optimizer steps: the param itself (plain), or the fp32 master
    with the gradient widened to fp32 (exact); refusals for what `what` cannot do."""
    if a.inv_scale != 1.0:
        raise NotImplementedError("%s takes unscaled gradients" % what)
    if a.rounding != "rne":
        raise NotImplementedError("%s stores the param with round-to-nearest-even" % what)
    if a.variant == "master":
        if a.state_format != "fp32":
            raise NotImplementedError("%s on an fp32 master keeps fp32 state (optimizer.state: fp32)" % what)
        return a.master, a.grad if a.grad_format == "fp32" else a.grad.float()
    if a.variant not in ("plain", "torch_fused_cpu"):  # the param updated in place
        raise NotImplementedError("%s has no %s variant" % (what, a.variant))
    if a.grad_format != a.param_format:
        raise NotImplementedError("%s needs .grad in the param's dtype (%s gradients for %s params)"
                                  % (what, a.grad_format, a.param_format))
    if a.state_format != a.param_format:
        raise NotImplementedError("%s keeps exp_avg and exp_avg_sq in the param's dtype: set optimizer.state: %s"
                                  % (what, a.param_format))
    return a.param, a.grad


class AdamW(Backend):
    """torch.optim.AdamW, single-tensor (foreach=False), on the CPU: one optimizer built
    per call over gradprec's arrays (param or fp32 master, exp_avg = m, exp_avg_sq = v,
    state step = t - 1), then .step(). A skipped step (found_inf) is not called, as
    GradScaler.step skips optimizer.step()."""

    name = "torch.optim.AdamW"
    foreach = False
    fused = False
    device = "cpu"

    def adamw(self, a):
        if a.found_inf:
            return
        w, g = _plain_or_master(a, self.name)
        dev = self.device
        if dev != "cpu" and not torch.cuda.is_available():
            raise NotImplementedError("%s needs a CUDA device; torch sees none" % self.name)
        p, grad, m, v = (t if dev == "cpu" else t.to(dev) for t in (w, g, a.m, a.v))
        p.grad = grad
        opt = torch.optim.AdamW([p], lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps, weight_decay=a.weight_decay,
                                foreach=self.foreach, fused=self.fused)
        step = torch.tensor(float(a.step - 1), dtype=torch.float32, device=dev if self.fused else "cpu")
        opt.state[p] = {"step": step, "exp_avg": m, "exp_avg_sq": v}
        opt.step()
        p.grad = None
        if dev != "cpu":
            for dst, src in ((w, p), (a.m, m), (a.v, v)):
                dst.copy_(src)
        if a.variant == "master":
            a.param.copy_(a.master)  # the param is the master rounded to its dtype (RNE)


class AdamWForeach(AdamW):
    """torch.optim.AdamW(foreach=True) on the CPU."""

    name = "torch.optim.AdamW(foreach)"
    foreach = True


class AdamWFused(AdamW):
    """torch.optim.AdamW(fused=True) on the CPU."""

    name = "torch.optim.AdamW(fused)"
    fused = True


class AdamWCUDA(AdamW):
    name = "torch.optim.AdamW(cuda)"
    device = "cuda"


class AdamWForeachCUDA(AdamWForeach):
    name = "torch.optim.AdamW(foreach, cuda)"
    device = "cuda"


class AdamWFusedCUDA(AdamWFused):
    name = "torch.optim.AdamW(fused, cuda)"
    device = "cuda"


def _need(module, pypi):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError("%s is not installed (pip install %s)" % (module, pypi)) from None


class OptimiAdamW(Backend):
    """torch-optimi's AdamW (optimi.AdamW, foreach=False, triton off) on the CPU. Its state
    is in the param's dtype; with `kahan: true` its Kahan compensation buffer is gradprec's
    comp[] (optimi's sign: the stored param plus comp approximates the weight). optimi
    uses the gradient as scratch, so it gets a copy."""

    name = "optimi.AdamW"

    def __init__(self):
        self.optimi = _need("optimi", "torch-optimi")

    def adamw(self, a):
        if a.found_inf:
            return
        if a.variant == "kahan":
            if a.state_format != a.param_format or a.grad_format != a.param_format:
                raise NotImplementedError("optimi keeps its state and .grad in the param's dtype: set "
                                          "optimizer.state: %s" % a.param_format)
            w, g, comp = a.param, a.grad, a.comp
        else:
            w, g = _plain_or_master(a, self.name)
            comp = None
        opt = self.optimi.AdamW([w], lr=a.lr, betas=(a.beta1, a.beta2), weight_decay=a.weight_decay, eps=a.eps,
                                kahan_sum=comp is not None, foreach=False, triton=False)
        w.grad = g.clone()
        opt.state[w] = {"exp_avg": a.m, "exp_avg_sq": a.v, "kahan_comp": comp}
        group = opt.param_groups[0]
        group["setup"] = True
        group["step"] = torch.tensor(a.step - 1, dtype=torch.int32)
        opt.step()
        w.grad = None
        if a.variant == "master":
            a.param.copy_(a.master)


class TorchaoAdamW(Backend):
    """torchao's AdamW (torchao.optim._AdamW in torchao 0.18: plain AdamW arithmetic in
    fp32 inside a torch.compile'd step) with bf16_stochastic_round=True, on the CPU: the
    scenario asks for `param: bf16, stochastic: true` with `state: bf16` (torchao keeps
    state in the param's dtype). Its random bits come from torch's generator, seeded per
    call from gradprec's (seed, stream, first_index) so that a report is reproducible."""

    name = "torchao AdamW(bf16_stochastic_round)"

    def __init__(self):
        optim = _need("torchao.optim", "torchao")
        self.cls = getattr(optim, "AdamW", None) or getattr(optim, "_AdamW")

    def adamw(self, a):
        if a.found_inf:
            return
        if a.inv_scale != 1.0 or a.variant not in ("plain", "torch_fused_cpu") or a.grad_format != a.param_format:
            raise NotImplementedError("torchao's AdamW: plain variant, .grad in the param's dtype")
        if a.state_format != a.param_format:
            raise NotImplementedError("torchao keeps exp_avg and exp_avg_sq in the param's dtype: set "
                                      "optimizer.state: %s" % a.param_format)
        sr = a.rounding == "stochastic"
        if sr and a.param_format != "bf16":
            raise NotImplementedError("torchao rounds stochastically to bf16 only")
        opt = self.cls([a.param], lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps, weight_decay=a.weight_decay,
                       bf16_stochastic_round=sr)
        a.param.grad = a.grad
        opt.state[a.param] = {"step": torch.tensor(float(a.step - 1)), "exp_avg": a.m, "exp_avg_sq": a.v}
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed((a.seed * 0x9E3779B97F4A7C15 + a.stream * 0xBF58476D1CE4E5B9 + a.first_index)
                              % (1 << 63))
            opt.step()
        a.param.grad = None


def _lowbit(a, what, state):
    """The refusals of a low-bit optimizer adapter: the scenario's state must be the
    library's (optimizer.state: `state`), the plain variant, .grad in the param's dtype."""
    if a.state_format != state:
        raise NotImplementedError("%s keeps its state as %s: set optimizer.state: %s" % (what, state, state))
    if a.inv_scale != 1.0 or a.rounding != "rne" or a.variant not in ("plain", "one_store"):
        raise NotImplementedError("%s: plain variant, unscaled gradients, round-to-nearest-even stores" % what)
    if a.grad_format != a.param_format:
        raise NotImplementedError("%s needs .grad in the param's dtype (%s gradients for %s params)"
                                  % (what, a.grad_format, a.param_format))


class BnbAdamW8bit(Backend):
    """bitsandbytes.optim.AdamW8bit on the CPU (optimizer.state: bnb8_blockwise): one
    optimizer per call over gradprec's arrays, its state1/state2 (uint8 codes) and
    absmax1/absmax2 (fp32, one per 256 elements) being gradprec's m/v codes and scales,
    state step = t - 1; min_8bit_size=1 so that a chunk of a large tensor keeps the 8-bit
    state its whole tensor has (bitsandbytes keeps fp32 state for tensors below 4096
    elements: write state: fp32 for those)."""

    name = "bitsandbytes AdamW8bit"

    def __init__(self):
        self.bnb = _need("bitsandbytes", "bitsandbytes")

    def adamw(self, a):
        if a.found_inf:
            return
        _lowbit(a, self.name, "bnb8_blockwise")
        p = a.param
        opt = self.bnb.optim.AdamW8bit([p], lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps,
                                       weight_decay=a.weight_decay, min_8bit_size=1)
        p.grad = a.grad
        opt.check_overrides()
        opt.initialized = True
        opt.init_state(opt.param_groups[0], p, 0, 0)
        st = opt.state[p]
        st.update(step=a.step - 1, state1=a.m_codes, absmax1=a.m_scales, state2=a.v_codes, absmax2=a.v_scales)
        opt.step()
        p.grad = None


class TorchaoAdamW8bit(Backend):
    """torchao.optim.AdamW8bit on the CPU (optimizer.state: torchao_8bit): its
    OptimState8bit exp_avg / exp_avg_sq are built over gradprec's m/v codes and scales
    (block 256), state step = t - 1; its step runs under torch.compile as in training.
    Tensors below 4096 elements (or not a multiple of the block) keep plain state in
    torchao: write state: fp32 for those."""

    name = "torchao AdamW8bit"
    state = "torchao_8bit"
    cls_name = "AdamW8bit"

    def __init__(self):
        self.optim = _need("torchao.optim", "torchao")
        self.cls = getattr(self.optim, self.cls_name)

    def _states(self, a):
        from torchao.optim.subclass_8bit import OptimState8bit, get_qmap_signed, get_qmap_unsigned

        return [OptimState8bit(codes, scales, torch.tensor(qmap(), dtype=torch.float32), sgn)
                for codes, scales, qmap, sgn in ((a.m_codes, a.m_scales, get_qmap_signed, True),
                                                 (a.v_codes, a.v_scales, get_qmap_unsigned, False))]

    def _done(self, a, m, v):
        pass

    def adamw(self, a):
        if a.found_inf:
            return
        _lowbit(a, self.name, self.state)
        m, v = self._states(a)
        opt = self.cls([a.param], lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps, weight_decay=a.weight_decay)
        a.param.grad = a.grad
        opt.state[a.param] = {"step": torch.tensor(float(a.step - 1)), "exp_avg": m, "exp_avg_sq": v}
        opt.step()
        a.param.grad = None
        self._done(a, m, v)


class TorchaoAdamW4bit(TorchaoAdamW8bit):
    """torchao.optim.AdamW4bit (optimizer.state: torchao_4bit, block 128): torchao packs
    two 4-bit codes per byte (the first element in the high nibble), gradprec keeps one
    per byte; the adapter packs before the step and unpacks after."""

    name = "torchao AdamW4bit"
    state = "torchao_4bit"
    cls_name = "AdamW4bit"

    def _states(self, a):
        from torchao.optim.subclass_4bit import OptimState4bit, get_qmap_signed, get_qmap_unsigned

        def packed(c):
            c = c.view(-1, 2)
            return (c[:, 0] << 4) | c[:, 1]

        return [OptimState4bit(packed(codes), scales, torch.tensor(qmap(), dtype=torch.float32), sgn, (a.n,))
                for codes, scales, qmap, sgn in ((a.m_codes, a.m_scales, get_qmap_signed, True),
                                                 (a.v_codes, a.v_scales, get_qmap_unsigned, False))]

    def _done(self, a, m, v):
        for s, codes in ((m, a.m_codes), (v, a.v_codes)):
            c = s.codes.reshape(-1)
            codes.copy_(torch.stack([c >> 4, c & 15], -1).reshape(-1))


class TorchaoAdamWFp8(TorchaoAdamW8bit):
    """torchao.optim.AdamWFp8 (optimizer.state: torchao_fp8): OptimStateFp8 over
    gradprec's codes (e4m3 bit patterns) and scales, block 256."""

    name = "torchao AdamWFp8"
    state = "torchao_fp8"
    cls_name = "AdamWFp8"

    def _states(self, a):
        from torchao.optim.subclass_fp8 import OptimStateFp8

        return [OptimStateFp8(codes.view(torch.float8_e4m3fn), scales)
                for codes, scales in ((a.m_codes, a.m_scales), (a.v_codes, a.v_scales))]
