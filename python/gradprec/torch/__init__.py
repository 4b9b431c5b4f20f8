"""Capture a PyTorch model's per-micro-batch gradients for gradprec to replay.

    with gradprec.torch.capture(model, "dump", reduction="mean", accumulation_steps=8,
                                optimizer=opt, scaler=scaler) as cap:
        for k, batch in enumerate(batches):
            with cap.microbatch(tokens=n_tokens(batch)):
                (loss_fn(model, batch) / 8).backward()
        opt.step()
    # dump/grads.safetensors + dump/scenario.yaml + dump/capture.json

Each parameter gets a tensor hook (`register_hook`): it sees the gradient autograd hands
to `.grad` accumulation for that micro-batch's backward, before it is added, in the dtype
torch produced. Entries are stored as KEY/step<S>/mb<K> (and KEY/weight, the weights at
the start) in safetensors; scenario.yaml names them with `grad: {replay: ..., key: ...}`.
Each gradient is written to disk as its hook sees it (nothing is held across
micro-batches); with sample=N only the N elements gradprec's own seeded choice picks
(gradprec.sample_indices, the C runner's function) are kept. Under a GradScaler the
entries are what the backward produced (scaled) and the scenario says by how much.
With `optimizer=` (a torch.optim.AdamW) the capture also reads every decision that sets
the optimizer's numerics from the objects themselves (parameter dtype, fp32 master
copies, state dtype, single-tensor / foreach / fused, each group's hyper-parameters, the
LR of each step, the state it held when the capture began: KEY/state/...) and stores
torch's param, m, v (and master) after every optimizer step (KEY/step<S>/param, ...):
the replay's twin check. Nothing is computed here beyond copying and indexing tensors;
gradprec does the arithmetic.
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Optional
import fnmatch
import json
import os
import struct
import tempfile
import warnings

import torch as _torch

from .. import _yaml

from .backends import (  # noqa: E402  (backends under test: docs/python.md)
    AdamW,
    AdamWCUDA,
    AdamWForeach,
    AdamWForeachCUDA,
    AdamWFused,
    AdamWFusedCUDA,
    Backend,
    BnbAdamW8bit,
    OptimiAdamW,
    TorchaoAdamW,
    TorchaoAdamW4bit,
    TorchaoAdamW8bit,
    TorchaoAdamWFp8,
)
from .host import sqrt_evaluation  # noqa: E402  (which optimizer.evaluation this host's torch needs)

__all__ = ["capture", "Capture", "monitor", "Monitor", "MonitorAlert", "MonitorWarning", "Alert", "Backend", "AdamW", "AdamWForeach", "AdamWFused", "AdamWCUDA", "AdamWForeachCUDA",
           "AdamWFusedCUDA", "OptimiAdamW", "TorchaoAdamW", "BnbAdamW8bit", "TorchaoAdamW8bit", "TorchaoAdamW4bit",
           "TorchaoAdamWFp8", "sqrt_evaluation"]

REDUCTIONS = ("token_mean", "mean", "mean_no_div", "sum")
_FORMATS = {_torch.float32: "fp32", _torch.bfloat16: "bf16", _torch.float16: "fp16"}
_ST_DTYPES = {_torch.float32: "F32", _torch.bfloat16: "BF16", _torch.float16: "F16"}
GRADS_FILE = "grads.safetensors"
SCENARIO_FILE = "scenario.yaml"
MANIFEST_FILE = "capture.json"


def _fmt(dtype, what):
    try:
        return _FORMATS[dtype]
    except KeyError:
        raise TypeError("%s: dtype %s cannot be replayed (fp32, bf16 or fp16)" % (what, dtype)) from None


MAX_TOKENS = 10 ** 9       # n_k (docs/scenarios.md, batch.tokens)
MAX_WINDOW_TOKENS = 2 ** 31 - 1  # N = sum of a step's n_k
MAX_MICROBATCHES = 65536


class _OptimizerPlan:
    """What a torch.optim.AdamW does to the captured parameters, read from the optimizer
    when the capture begins: for captured tensor i, the tensor the optimizer updates
    (`opt_tensors[i]`: the parameter itself, or its fp32 master copy), its param group
    (`groups[i]`), the form (single / foreach / fused), the device type, the scenario's
    evaluation or fused key (`keys`). Refuses, with one line, what gradprec cannot model."""

    def __init__(self, opt, named, captured, master):
        if type(opt) is not _torch.optim.AdamW:
            raise TypeError("optimizer: gradprec models torch.optim.AdamW only, not %s.%s (a subclass may change "
                            "the step)" % (type(opt).__module__, type(opt).__qualname__))
        self.opt = opt
        groups = opt.param_groups
        for gi, g in enumerate(groups):
            for flag in ("amsgrad", "maximize", "capturable", "differentiable"):
                if g.get(flag):
                    raise ValueError("optimizer: param group %d has %s=True, which gradprec does not model"
                                     % (gi, flag))
            for k in ("lr", "eps", "weight_decay"):
                if isinstance(g[k], _torch.Tensor):
                    raise ValueError("optimizer: param group %d has a tensor %s; gradprec models a number" % (gi, k))
            if any(isinstance(b, _torch.Tensor) for b in g["betas"]):
                raise ValueError("optimizer: param group %d has tensor betas; gradprec models numbers" % gi)
        for k in ("betas", "eps"):
            vals = [tuple(g[k]) if k == "betas" else g[k] for g in groups]
            if any(v != vals[0] for v in vals):
                raise ValueError("optimizer: param groups with different %s (%s); a scenario has one"
                                 % (k, ", ".join(map(str, vals))))
        where = {}
        for gi, g in enumerate(groups):
            for p in g["params"]:
                where[id(p)] = gi
        flat = [p for g in groups for p in g["params"]]
        names = [n for n, _ in captured]
        if master is not None:
            masters = self._given_masters(master, named, names)
        elif all(id(p) in where for _, p in captured):
            masters = None
        elif not any(id(p) in where for _, p in named) and len(flat) == len(named) and all(
                q.dtype == _torch.float32 and q.shape == p.shape for q, (_, p) in zip(flat, named)):
            byname = {n: q for (n, _), q in zip(named, flat)}
            masters = [byname[n] for n in names]
        else:
            missing = [n for n, p in captured if id(p) not in where]
            raise ValueError("optimizer: it holds neither the captured parameter %s nor one fp32 copy of every "
                             "trainable parameter (in named_parameters order); name the master copies with master="
                             % missing[0])
        self.master = masters is not None
        self.opt_tensors = masters if masters is not None else [p for _, p in captured]
        self.groups = []
        for n, q in zip(names, self.opt_tensors):
            if id(q) not in where:
                raise ValueError("master: the copy of %s is not a parameter of the optimizer" % n)
            self.groups.append(where[id(q)])
        devs = {q.device.type for q in self.opt_tensors}
        if len(devs) > 1 or not devs <= {"cpu", "cuda"}:
            raise ValueError("optimizer: parameters on %s; gradprec models torch's AdamW on one of cpu, cuda"
                             % ", ".join(sorted(devs)))
        self.device = devs.pop()
        forms = {self._form(g, self.device) for g in groups}
        if len(forms) > 1:
            raise ValueError("optimizer: param groups run different forms (%s); a scenario has one"
                             % ", ".join(sorted(forms)))
        self.form = forms.pop()
        if self.form == "fused" and self.master:
            raise ValueError("optimizer: fused=True over fp32 master copies: gradprec's fused model "
                             "(fused: torch_cpu) updates the parameters themselves")
        if self.form == "fused" and self.device != "cpu":
            raise ValueError("optimizer: fused=True on %s: gradprec models torch's fused CPU kernel only" % self.device)
        pdt = {p.dtype for _, p in captured}
        self.param_dtype = pdt.pop()
        self.state_dtype = self.opt_tensors[0].dtype  # torch's zeros_like(the tensor it updates)
        for n, q in zip(names, self.opt_tensors):
            st = opt.state.get(q) or {}
            for k in ("exp_avg", "exp_avg_sq"):
                if k in st and st[k].dtype != q.dtype:
                    raise ValueError("optimizer: state %s of %s is %s, not the dtype of the tensor it updates (%s)"
                                     % (k, n, st[k].dtype, q.dtype))
        self.entry = [self.hyper(g) for g in groups]
        self.keys = self._evaluation()  # sqrt_evaluation() probes torch once per process (cached)

    @staticmethod
    def _form(g, device):
        """torch's choice (_default_to_fused_or_foreach): foreach=None is foreach on CUDA
        tensors, single-tensor on the CPU."""
        if g.get("fused"):
            return "fused"
        foreach = g.get("foreach")
        return "foreach" if foreach or (foreach is None and device == "cuda") else "single"

    @staticmethod
    def _given_masters(master, named, names):
        if isinstance(master, dict):
            unknown = [k for k in master if k not in dict(named)]
            if unknown:
                raise ValueError("master: %r is not a trainable parameter of the model" % unknown[0])
            bymap = master
        else:
            seq = list(master)
            if len(seq) == len(named):
                bymap = {n: q for (n, _), q in zip(named, seq)}
            elif len(seq) == len(names):
                bymap = dict(zip(names, seq))
            else:
                raise ValueError("master: %d tensors; the model has %d trainable parameters (%d captured)"
                                 % (len(seq), len(named), len(names)))
        out = []
        params = dict(named)
        for n in names:
            q = bymap.get(n)
            if q is None:
                raise ValueError("master: no copy of captured parameter %s" % n)
            if not isinstance(q, _torch.Tensor) or q.dtype != _torch.float32 or q.shape != params[n].shape:
                raise ValueError("master: the copy of %s must be an fp32 tensor of shape %s"
                                 % (n, list(params[n].shape)))
            out.append(q)
        return out

    @staticmethod
    def hyper(g):
        return {"lr": float(g["lr"]), "betas": [float(b) for b in g["betas"]], "eps": float(g["eps"]),
                "weight_decay": float(g["weight_decay"])}

    def lrs(self, where):
        """Each param group's LR now (refusing what the scenario cannot hold)."""
        out = []
        for gi, g in enumerate(self.opt.param_groups):
            if isinstance(g["lr"], _torch.Tensor):
                raise ValueError("%s: param group %d's lr became a tensor; gradprec models a number" % (where, gi))
            h = self.hyper(g)
            for k in ("betas", "eps", "weight_decay"):
                if h[k] != self.entry[gi][k]:
                    raise ValueError("%s: param group %d's %s changed (%r, then %r); a scenario holds one per tensor"
                                     % (where, gi, k, self.entry[gi][k], h[k]))
            out.append(h["lr"])
        return out

    def state(self, i):
        """(exp_avg, exp_avg_sq, step) of captured tensor i, or None before its first step."""
        st = self.opt.state.get(self.opt_tensors[i])
        if not st or "exp_avg" not in st:
            return None
        return st["exp_avg"], st["exp_avg_sq"], int(st["step"])

    def _evaluation(self):
        """optimizer's evaluation/fused keys for the form on this host."""
        if self.form == "fused":
            return {"fused": "torch_cpu"}
        if self.device == "cuda":
            return {"evaluation": "torch_cuda_foreach" if self.form == "foreach" else "torch_cuda"}
        if self.form == "foreach" and self.state_dtype != _torch.float32:
            # torch._foreach_mul_ rounds its scalar (the decay factor, beta2) to the
            # tensor's dtype; with fp32 tensors that is what Tensor.mul_ does
            return {"evaluation": "torch_cpu_foreach"}
        ev = sqrt_evaluation()
        if ev is None:
            warnings.warn("gradprec capture: no optimizer.evaluation models this host's torch.sqrt "
                          "(gradprec.torch.sqrt_evaluation() is None); writing torch_cpu")
            ev = "torch_cpu"
        return {"evaluation": ev}


class Capture:
    """What `capture(...)` returns; see capture() for the arguments.

    Use `microbatch(tokens=n)` around each micro-batch's backward, and (optionally)
    `step()` after each optimizer step. Windows of `accumulation_steps` micro-batches
    close by themselves; `step()` closes the current one early (a partial last window),
    and so does the step of `optimizer=`. On leaving the `with` block (without an
    exception) the files are written; `paths` then names them."""

    def __init__(self, model, out_dir, reduction, accumulation_steps=None, fullbatch="mean", sample=None,
                 params=None, weights=True, optimizer=None, precision=None, name=None, seed=0,
                 scenario=None, scaler=None, master=None):
        if reduction not in REDUCTIONS:
            raise ValueError("reduction: one of %s, not %r (how your loss divides each micro-batch)"
                             % (", ".join(REDUCTIONS), reduction))
        if fullbatch not in ("mean", "sum"):
            raise ValueError("fullbatch: 'mean' or 'sum', not %r" % (fullbatch,))
        if accumulation_steps is not None and (not isinstance(accumulation_steps, int) or accumulation_steps < 1
                                               or accumulation_steps > MAX_MICROBATCHES):
            raise ValueError("accumulation_steps: an integer in 1 .. %d, not %r"
                             % (MAX_MICROBATCHES, accumulation_steps))
        if sample is not None and (not isinstance(sample, int) or isinstance(sample, bool) or sample < 1):
            raise ValueError("sample: an integer >= 1 (elements per tensor), not %r" % (sample,))
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError("seed: an integer >= 0, not %r" % (seed,))
        if scaler is not None and not all(hasattr(scaler, a) for a in ("get_scale", "is_enabled")):
            raise TypeError("scaler: a torch.amp.GradScaler, not %s" % type(scaler).__name__)
        if master is not None and optimizer is None:
            raise ValueError("master: needs optimizer= (the optimizer that updates the master copies)")
        if optimizer is not None and not weights:
            raise ValueError("weights=False with optimizer=: the optimizer's state needs the weights it belongs to")
        self.model = model
        self.out_dir = os.fspath(out_dir)
        self.reduction = reduction
        self.fullbatch = fullbatch
        self.accumulation_steps = accumulation_steps
        self.sample = sample
        self.weights = weights
        self.optimizer = optimizer
        self.master = master
        self.precision = dict(precision or {})
        self.name = name
        self.seed = seed
        self.extra = dict(scenario or {})
        self.scaler = scaler if scaler is not None and scaler.is_enabled() else None
        self._named, self.params = self._select(model, params)
        for n, p in self.params:
            _fmt(p.dtype, n)
        dts = {p.dtype for _, p in self.params}
        if len(dts) > 1:
            raise TypeError("capture: parameters of several dtypes (%s); capture them separately with params=..."
                            % ", ".join("%s %s" % (n, _fmt(p.dtype, n)) for n, p in self.params))
        self.paths = None
        self._handles = []
        self._windows = []   # closed windows: each a list of token counts
        self._window = []    # the open window's token counts
        self._scales = []    # closed windows: the loss scale of their backward passes
        self._wscale = None  # the open window's
        self._scale0 = None  # (scale, growth tracker) of the scaler when the capture began
        self._current = None
        self._paused = False
        self._sel = {}       # name -> the sampled elements (a LongTensor on the parameter's device), or None
        self._gdtype = {}    # name -> the dtype of its gradients (first seen)
        self._absent = []    # (name, step, micro-batch) that got no gradient: an exact zero entry
        self._spool = None   # {element width: (open file, path)}: the data, streamed
        self._index = []     # (entry, format, shape, width, offset, nbytes) in writing order
        self._made_dir = False
        self._plan = None    # _OptimizerPlan, from __enter__ when optimizer= is given
        self._t0 = []        # per captured tensor: torch's state['step'] at entry, or None (no state yet)
        self._lrs = []       # closed windows: each param group's LR of its optimizer step
        self._stepped = []   # closed windows: whether torch's optimizer.step() ran for it
        self._after = 0      # windows whose after-step state is in the dump
        self._twin = None    # None until written; False: no twin (why in _no_twin)
        self._no_twin = None

    @staticmethod
    def _select(model, params):
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if params is None:
            chosen = named
        elif callable(params):
            chosen = [(n, p) for n, p in named if params(n, p)]
        else:
            pats = [params] if isinstance(params, str) else list(params)
            chosen = [(n, p) for n, p in named if any(fnmatch.fnmatchcase(n, pat) for pat in pats)]
            unmatched = [pat for pat in pats if not any(fnmatch.fnmatchcase(n, pat) for n, _ in named)]
            if unmatched:
                raise ValueError("params: %s match no trainable parameter" % ", ".join(map(repr, unmatched)))
        if not chosen:
            raise ValueError("capture: no trainable parameter selected")
        return named, chosen

    # ---- the context ----

    def __enter__(self):
        if self._handles or self._spool is not None:
            raise RuntimeError("capture: already entered")
        if self.optimizer is not None:  # refused now, before anything is written
            self._plan = _OptimizerPlan(self.optimizer, self._named, self.params, self.master)
        if self.scaler is not None:
            self._scale0 = (float(self.scaler.get_scale()), int(self.scaler._get_growth_tracker()))
        self._spool = {}
        try:
            self._open_store()
            for t, (n, p) in enumerate(self.params):
                self._sel[n] = sel = self._choose(t, p)
                if self.weights:
                    self._put("%s/weight" % n, p.detach(), sel, list(p.shape))
                if self._plan is not None:
                    self._t0.append(self._put_state(t, n, "state"))
                self._handles.append(p.register_hook(self._hook(n, p)))
            if self._plan is not None:
                self._handles.append(self.optimizer.register_step_pre_hook(self._pre_step))
            self._flush()
        except BaseException:
            self._remove_hooks()
            self._discard()
            raise
        return self

    def _open_store(self):
        """Where the entries go: two spool files in out_dir (made if missing)."""
        self._made_dir = not os.path.isdir(self.out_dir)
        os.makedirs(self.out_dir, exist_ok=True)
        for w in (4, 2):  # 4-byte entries first: every entry stays aligned to its width
            fd, path = tempfile.mkstemp(prefix=".tmp-spool%d-" % w, dir=self.out_dir)
            self._spool[w] = (os.fdopen(fd, "wb"), path)

    def _choose(self, t, p):
        """Captured tensor t's sampled elements (a LongTensor on p's device), None: whole.
        Tensor t of the scenario this capture writes, the scenario's seed: the elements
        `gradprec run` would sample from the whole dump."""
        from .. import sample_indices

        if self.sample is None or self.sample >= p.numel():
            return None
        idx = sample_indices(self.seed, t, p.numel(), self.sample)
        return _torch.frombuffer(idx, dtype=_torch.int64).clone().to(p.device)

    def _put_state(self, t, n, where):
        """Writes captured tensor t's optimizer state as n/<where>/exp_avg, exp_avg_sq (and
        master): `where` is "state" (when the capture began; nothing before the first step)
        or "step<S>" (after step S: then also param, and zeros for a state not made yet).
        Returns torch's step count, or None where there is no state."""
        plan, p, sel = self._plan, self.params[t][1], self._sel[n]
        st = plan.state(t)
        q = plan.opt_tensors[t]
        shape = list(p.shape)
        if where != "state":
            self._put("%s/%s/param" % (n, where), p.detach(), sel, shape)
        elif st is None:
            return None
        m, v = (st[0], st[1]) if st is not None else (_torch.zeros_like(q), _torch.zeros_like(q))
        self._put("%s/%s/exp_avg" % (n, where), m, sel, shape)
        self._put("%s/%s/exp_avg_sq" % (n, where), v, sel, shape)
        if plan.master:
            self._put("%s/%s/master" % (n, where), q.detach(), sel, shape)
        return st[2] if st is not None else 0

    def _remove_hooks(self):
        for h in self._handles:
            h.remove()
        self._handles = []

    def __exit__(self, etype, evalue, tb):
        self._remove_hooks()
        if etype is not None:
            self._discard()
            return False
        if self._current is not None:
            self._discard()
            raise RuntimeError("capture: left inside a microbatch() block")
        try:
            self.write()
        except BaseException:
            self._discard()
            raise
        return False

    def _discard(self):
        """Removes the spool files (and out_dir when this capture made it and it is empty)."""
        for f, path in (self._spool or {}).values():
            f.close()
            if os.path.exists(path):
                os.unlink(path)
        self._spool = None
        if self._made_dir:
            try:
                os.rmdir(self.out_dir)
            except OSError:
                pass

    def _flush(self):
        for f, _ in self._spool.values():
            f.flush()

    def _put(self, entry, t, sel, shape):
        """Appends tensor t (its elements sel, or all) as `entry` to the spool of its width."""
        flat = t.detach().reshape(-1)
        if sel is not None:
            flat = flat.index_select(0, sel)
            shape = [int(sel.numel())]
        flat = flat.to("cpu").contiguous()
        w = flat.element_size()
        f, _ = self._spool[w]
        off = f.tell()
        f.write(flat.view(_torch.int32 if w == 4 else _torch.int16).numpy().tobytes())
        self._index.append((entry, _ST_DTYPES[flat.dtype], shape, w, off, flat.numel() * w))

    def _hook(self, name, param):
        def hook(grad):
            if self._paused:
                return None
            if self._current is None:
                raise RuntimeError("gradprec capture: a backward ran outside `with cap.microbatch(tokens=...)` "
                                   "(parameter %s); wrap each micro-batch's backward" % name)
            seen = self._current["grads"]
            if name in seen:
                raise RuntimeError("gradprec capture: parameter %s got a second gradient in micro-batch %d; "
                                   "use one backward per micro-batch" % (name, len(self._window)))
            _fmt(grad.dtype, name)
            if self._gdtype.setdefault(name, grad.dtype) != grad.dtype:
                raise TypeError("capture: parameter %s got gradients of several dtypes" % name)
            other = next(((n, d) for n, d in self._gdtype.items() if d != grad.dtype), None)
            if other is not None:
                raise TypeError("capture: parameter %s got a %s gradient, %s a %s one; a scenario has one grad "
                                "dtype (capture them separately with params=...)"
                                % (name, _fmt(grad.dtype, name), other[0], _fmt(other[1], other[0])))
            # Written now (to disk, or its sample): AccumulateGrad may keep this very tensor
            # as .grad and add into it later, after this hook returned.
            self._put("%s/step%d/mb%d" % (name, len(self._windows), len(self._window)), grad, self._sel[name],
                      list(param.shape))
            seen.add(name)
            return None
        return hook

    def _pre_step(self, optimizer, args, kwargs):
        """torch's optimizer.step() is about to run: it ends the open window (if any) and
        is that window's step; the LR each group has now is the one it uses."""
        if self._current is not None:
            raise RuntimeError("capture: optimizer.step() inside a microbatch() block")
        if self._window:
            self._close()
        if not self._windows:
            raise RuntimeError("capture: optimizer.step() before the first captured micro-batch: the state the "
                               "capture recorded on entering would not be the replay's")
        S = len(self._windows) - 1
        if self._stepped[S]:
            raise RuntimeError("capture: a second optimizer.step() for captured step %d; one step per window "
                               "of micro-batches" % S)
        for i, (n, _) in enumerate(self.params):
            if self._plan.opt_tensors[i].grad is None:
                raise RuntimeError("capture: %s has no gradient at optimizer step %d: torch skips it, which a "
                                   "scenario cannot express (capture it with params= only where it trains)" % (n, S))
        self._lrs[S] = self._plan.lrs("optimizer step %d" % S)
        self._stepped[S] = True

    def _record_after(self):
        """torch's state after every closed window's step that is not in the dump yet
        (called when the next window's first micro-batch begins, and on leaving)."""
        while self._after < len(self._windows):
            S = self._after
            for t, (n, _) in enumerate(self.params):
                self._put_state(t, n, "step%d" % S)
            self._flush()
            self._after += 1

    @contextlib.contextmanager
    def microbatch(self, tokens: int) -> Iterator[None]:
        """Records the gradients of the backward run inside this block as one micro-batch
        of `tokens` tokens (the count your loss normalisation uses: n_k)."""
        if isinstance(tokens, _torch.Tensor):
            tokens = int(tokens.item())
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1 or tokens > MAX_TOKENS:
            raise ValueError("microbatch: tokens must be an integer in 1 .. %d, not %r" % (MAX_TOKENS, tokens))
        if self._current is not None:
            raise RuntimeError("microbatch: blocks do not nest")
        if not self._handles:
            raise RuntimeError("microbatch: use it inside `with capture(...) as cap:`")
        if sum(self._window) + tokens > MAX_WINDOW_TOKENS:
            raise ValueError("microbatch: step %d would hold %d tokens, more than gradprec's %d"
                             % (len(self._windows), sum(self._window) + tokens, MAX_WINDOW_TOKENS))
        if len(self._window) == MAX_MICROBATCHES:
            raise ValueError("microbatch: step %d would have more than %d micro-batches"
                             % (len(self._windows), MAX_MICROBATCHES))
        if not self._window and self._windows and self._plan is not None:
            S = len(self._windows) - 1
            if not self._stepped[S] and self.scaler is None:
                raise RuntimeError("microbatch: captured step %d ended without optimizer.step(); every window of "
                                   "micro-batches is one optimizer step" % S)
            self._record_after()
        if self.scaler is not None:
            s = float(self.scaler.get_scale())
            if self._window and s != self._wscale:
                raise RuntimeError("microbatch: the GradScaler's scale changed inside an accumulation window "
                                   "(%g, then %g): call scaler.update() after the window's last micro-batch, and "
                                   "cap.step() after a skipped step that ends a partial window"
                                   % (self._wscale, s))
            if not self._windows and not self._window and s != self._scale0[0]:
                raise RuntimeError("microbatch: the GradScaler's scale changed between entering the capture and "
                                   "its first micro-batch (%g, then %g)" % (self._scale0[0], s))
            self._wscale = s
        self._current = {"tokens": tokens, "grads": set()}
        try:
            yield self
        except BaseException:
            self._current = None
            raise
        rec, self._current = self._current, None
        if not rec["grads"]:
            raise RuntimeError("microbatch: no gradient reached the captured parameters (was backward() called?)")
        self._flush()  # this micro-batch's gradients are on disk now, none in memory
        S, K = len(self._windows), len(self._window)
        self._absent += [(n, S, K) for n, _ in self.params if n not in rec["grads"]]
        self._window.append(rec["tokens"])
        if self.accumulation_steps is not None and len(self._window) == self.accumulation_steps:
            self._close()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Backward passes inside this block are not recorded (an evaluation, a probe,
        a reference gradient): outside microbatch() blocks they would be refused."""
        if self._current is not None:
            raise RuntimeError("paused: not inside a microbatch() block")
        self._paused = True
        try:
            yield self
        finally:
            self._paused = False

    def step(self) -> None:
        """Marks an optimizer step: closes the current window (if any micro-batch is open
        in it). Windows of `accumulation_steps` micro-batches close by themselves, and
        `optimizer=`'s step closes the open one; under a GradScaler a skipped step does
        not call optimizer.step(), so a partial window then needs cap.step()."""
        if self._current is not None:
            raise RuntimeError("step: called inside a microbatch() block")
        if self._window:
            self._close()

    def _close(self):
        if "distributed" in self.extra and self._windows and self._window != self._windows[0]:
            raise ValueError("capture: step %d has token counts %s, step 0 has %s; with distributed: every step "
                             "has the same (per-step lists are not simulated across ranks)"
                             % (len(self._windows), self._window, self._windows[0]))
        self._windows.append(self._window)
        self._scales.append(self._wscale)
        self._window = []
        if self._plan is not None:  # until its step runs: the LR the step would use
            self._lrs.append(self._plan.lrs("captured step %d" % (len(self._windows) - 1)))
            self._stepped.append(False)

    # ---- writing ----

    def _check(self):
        """Closes the open window; (max K_s, A, tokens): one list when every step has the
        same counts, else one list per step."""
        if self._window:
            self._close()
        if not self._windows:
            raise RuntimeError("capture: no micro-batch was recorded")
        K = max(len(w) for w in self._windows)
        A = self.accumulation_steps if self.accumulation_steps is not None else K
        same = all(w == self._windows[0] for w in self._windows)
        toks = list(self._windows[0]) if same else [list(w) for w in self._windows]
        return K, A, toks

    def _finish(self):
        """On leaving: the last window closed, torch's state after each step in the dump.
        A last window whose optimizer.step() had not run (and no GradScaler to skip it)
        has no after-state yet: the scenario then gets no twin (a warning says why)."""
        self._check()
        if self._plan is None or self._twin is not None:
            return
        S = len(self._windows) - 1
        if not self._stepped[S] and self.scaler is None:
            self._twin = False
            self._no_twin = ("captured step %d had not run optimizer.step() when the capture ended: no twin "
                             "(call it inside the with block)" % S)
            warnings.warn("gradprec capture: " + self._no_twin)
            return
        self._record_after()
        self._twin = True

    def _formats(self):
        """Per captured tensor (grad format, parameter format); the parameters that never
        received a gradient (reported, not written)."""
        fmts, missing = {}, []
        for n, p in self.params:
            if n not in self._gdtype:
                missing.append(n)
                continue
            fmts[n] = (_fmt(self._gdtype[n], n), _fmt(p.dtype, n))
        return fmts, missing

    def _loss_scale_block(self):
        if self.scaler is None:
            return None
        sc = self.scaler
        return {"mode": "dynamic", "init": self._scale0[0], "tracker": self._scale0[1],
                "growth": float(sc.get_growth_factor()), "backoff": float(sc.get_backoff_factor()),
                "interval": int(sc.get_growth_interval()), "replay_scales": list(self._scales)}

    def _lr_steps(self, i):
        """The LR of each captured step of captured tensor i (its param group's)."""
        gi = self._plan.groups[i]
        return [lrs[gi] for lrs in self._lrs]

    def _optimizer_block(self, first):
        """The scenario's optimizer (the hyper-parameters of captured tensor `first`'s group)."""
        plan = self._plan
        if plan is None:
            return None
        h = plan.entry[plan.groups[first]]
        lr_steps = self._lr_steps(first)
        doc = {"name": "adamw", "lr": lr_steps[0], "lr_steps": lr_steps, "betas": h["betas"], "eps": h["eps"],
               "weight_decay": h["weight_decay"], "param": _fmt(plan.param_dtype, "optimizer.param"),
               "state": _fmt(plan.state_dtype, "optimizer.state")}
        if plan.master:
            doc["master"] = "fp32"
        doc.update(plan.keys)
        return doc

    def _tensor_optimizer(self, i, opt):
        """tensors[i].optimizer: captured tensor i's LR and weight decay where its group's
        differ from the scenario's; None where they agree."""
        lr_steps = self._lr_steps(i)
        wd = self._plan.entry[self._plan.groups[i]]["weight_decay"]
        out = {}
        if lr_steps != opt["lr_steps"]:
            out["lr"] = lr_steps[0]
            out["lr_steps"] = lr_steps
        if wd != opt["weight_decay"]:
            out["weight_decay"] = wd
        return out or None

    def scenario(self) -> Dict[str, Any]:
        """The scenario (a dict) that replays what was captured."""
        K, A, toks = self._check()
        if K > A:
            raise ValueError("capture: %d micro-batches in a window, more than accumulation_steps=%d" % (K, A))
        fmts, _ = self._formats()
        gf = {f[0] for f in fmts.values()}
        af = {f[1] for f in fmts.values()}
        prec = {"grad": gf.pop(), "accumulator": af.pop()}
        prec.update(self.precision)
        written = [i for i, (n, _) in enumerate(self.params) if n in fmts]
        opt = self._optimizer_block(written[0])
        tensors = []
        for i in written:
            n, p = self.params[i]
            t = {"name": n, "grad": {"replay": GRADS_FILE, "key": n}}
            if self.weights:
                t["weight"] = {"replay": GRADS_FILE, "key": n}
            if self._sel.get(n) is not None:
                t["population"] = p.numel()  # the dump holds a sample of this many elements
            if opt is not None:
                o = self._tensor_optimizer(i, opt)
                if o is not None:
                    t["optimizer"] = o
                if self._t0[i] is not None:
                    t["state"] = {"replay": GRADS_FILE, "key": n, "step": self._t0[i]}
                if self._twin:
                    t["twin"] = {"replay": GRADS_FILE, "key": n}
            tensors.append(t)
        doc = {}
        if self.name:
            doc["name"] = self.name
        doc["seed"] = self.seed
        doc["tensors"] = tensors
        doc["batch"] = {"accumulation_steps": A, "microbatches": K, "tokens": toks}
        doc["reduction"] = self.reduction
        doc["fullbatch"] = self.fullbatch
        doc["precision"] = prec
        ls = self._loss_scale_block()
        if ls is not None:
            doc["loss_scale"] = ls
        if opt is not None:
            doc["optimizer"] = opt
        doc["steps"] = len(self._windows)
        for k, v in self.extra.items():
            doc[k] = v
        return doc

    def _zero_entries(self):
        """Exact zero entries for the micro-batches in which a captured tensor got no
        gradient (written in blocks: bounded memory)."""
        fmts, _ = self._formats()
        for n, S, K in self._absent:
            if n not in fmts:
                continue
            p = dict(self.params)[n]
            count = self._sel[n].numel() if self._sel[n] is not None else p.numel()
            shape = [count] if self._sel[n] is not None else list(p.shape)
            dt = self._gdtype[n]
            w = _torch.empty((), dtype=dt).element_size()
            f, _ = self._spool[w]
            off = f.tell()
            block = _torch.zeros(min(count, 1 << 20), dtype=_torch.int32 if w == 4 else _torch.int16).numpy()
            left = count
            while left:
                m = min(left, block.size)
                f.write(block[:m].tobytes())
                left -= m
            self._index.append(("%s/step%d/mb%d" % (n, S, K), _ST_DTYPES[dt], shape, w, off, count * w))
        self._absent = []

    def write(self) -> None:
        """Writes grads.safetensors, scenario.yaml and capture.json into out_dir (each via
        a temporary file renamed into place) and returns their paths (also in .paths).
        grads.safetensors is assembled from the spool files: its header, then their bytes
        copied by the kernel (os.copy_file_range) or in 1 MiB blocks."""
        if self._spool is None:
            raise RuntimeError("capture: write() after the files were written (or outside the with block)")
        self._finish()
        doc = self.scenario()
        fmts, missing = self._formats()
        if missing:
            warnings.warn("gradprec capture: no gradient reached %s; not in the dump" % ", ".join(missing))
        self._zero_entries()
        paths = {k: os.path.join(self.out_dir, f) for k, f in
                 (("grads", GRADS_FILE), ("scenario", SCENARIO_FILE), ("manifest", MANIFEST_FILE))}
        manifest = {
            "format": "gradprec-capture/1",
            "torch": _torch.__version__,
            "steps": len(self._windows),
            "microbatches": max(len(w) for w in self._windows),
            "microbatches_by_step": [len(w) for w in self._windows],
            "tokens": [list(w) for w in self._windows],
            "reduction": self.reduction,
            "seed": self.seed,
            "loss_scales": list(self._scales) if self.scaler is not None else None,
            "loss_scale_at_entry": list(self._scale0) if self.scaler is not None else None,
            "optimizer": None if self._plan is None else {
                "form": self._plan.form, "master": self._plan.master, "stepped": list(self._stepped),
                "state_step_at_entry": list(self._t0), "twin": self._no_twin or True},
            "tensors": [{"name": n, "shape": list(p.shape), "grad_dtype": fmts[n][0], "param_dtype": fmts[n][1],
                         "numel": p.numel(),
                         "sample": int(self._sel[n].numel()) if self._sel[n] is not None else None,
                         "scenario_index": i}
                        for i, (n, p) in enumerate(self.params) if n in fmts],
            "not_captured": missing,
        }
        ks = sorted({len(w) for w in self._windows})
        kdesc = str(ks[0]) if len(ks) == 1 else "%d to %d" % (ks[0], ks[-1])
        header = ("Written by gradprec.torch.capture (torch %s): %d optimizer step(s) of %s micro-batch(es).\n"
                  "Replay: gradprec run %s" % (_torch.__version__, len(self._windows), kdesc, paths["scenario"]))
        self._atomic(paths["grads"], self._assemble)
        self._atomic(paths["manifest"], lambda tmp: _write_text(tmp, json.dumps(manifest, indent=1) + "\n"))
        self._atomic(paths["scenario"], lambda tmp: _write_text(tmp, _yaml.dump(doc, header)))
        self._made_dir = False
        self._discard()
        self.paths = paths
        return paths

    def _assemble(self, path):
        """The safetensors file: 8-byte header length, the JSON header (padded with spaces
        to 8 bytes), the 4-byte spool, the 2-byte spool (entries contiguous, each aligned
        to its width)."""
        sizes = {}
        for w, (f, _) in self._spool.items():
            f.flush()
            sizes[w] = f.tell()
        base = {4: 0, 2: sizes[4]}
        hdr = {"__metadata__": {"format": "pt"}}
        for entry, dt, shape, w, off, nbytes in self._index:
            hdr[entry] = {"dtype": dt, "shape": shape, "data_offsets": [base[w] + off, base[w] + off + nbytes]}
        text = json.dumps(hdr, separators=(",", ":")).encode()
        text += b" " * (-(8 + len(text)) % 8)
        with open(path, "wb") as out:
            out.write(struct.pack("<Q", len(text)))
            out.write(text)
            out.flush()
            for w in (4, 2):
                with open(self._spool[w][1], "rb") as src:
                    _copy(src, out, sizes[w])

    def _atomic(self, path, writer):
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.out_dir)
        os.close(fd)
        try:
            writer(tmp)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def _copy(src, dst, n):
    """Copies n bytes from src to dst at their current positions, in the kernel when it can."""
    left = n
    if hasattr(os, "copy_file_range"):
        try:
            while left:
                done = os.copy_file_range(src.fileno(), dst.fileno(), min(left, 1 << 30))
                if done == 0:
                    break
                left -= done
        except OSError:
            pass
    src.seek(n - left)
    dst.seek(0, os.SEEK_END)
    while left:
        b = src.read(min(left, 1 << 20))
        if not b:
            raise OSError("capture: spool file shorter than written")
        dst.write(b)
        left -= len(b)


def _write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def capture(model: "_torch.nn.Module", out_dir: str, reduction: str, accumulation_steps: Optional[int] = None,
            **kw: Any) -> Capture:
    """A context manager recording each micro-batch's gradient of each trainable
    parameter of `model` and writing, on exit, `out_dir`/grads.safetensors,
    scenario.yaml (what `gradprec run` replays) and capture.json (shapes, dtypes, token
    counts).

    reduction: how your loss is divided per micro-batch (required: gradprec cannot see
      it): "token_mean" (token sum / all N tokens of the window), "mean" (a micro-batch's
      token mean / accumulation_steps), "mean_no_div" (token mean), "sum" (token sum).
    accumulation_steps: micro-batches per optimizer step (the divisor of "mean"); windows
      close by themselves after that many, or at cap.step().
    fullbatch: "mean" (default) or "sum": what the full-batch loss means.
    sample: N: for every tensor of more than N elements keep only the N elements that
      `gradprec run` with `sample: N` would choose from the whole dump (the C library's
      gradprec_sample_indices of the scenario's seed and the tensor's position); the
      scenario says `population: M` and the report gives estimates over N of M elements
      with their intervals. Gradients go to disk as they arrive either way.
    scaler: the torch.amp.GradScaler whose scale(loss).backward() runs inside the
      micro-batches: the entries are the scaled gradients the backward produced (bit for
      bit); the scenario gets `loss_scale` (dynamic, the scaler's factors, its scale and
      growth tracker on entering: init, tracker) with `replay_scales`, the scale of each
      step, which replay divides out exactly.
    params: names or glob patterns (or a predicate f(name, param)) of the parameters to
      capture (default: every trainable one).
    weights: also store each parameter's initial value (default True).
    optimizer: the torch.optim.AdamW that steps the model (single-tensor, foreach or
      fused; amsgrad, maximize, capturable, differentiable, tensor LRs, betas or eps that
      differ between groups and other classes are refused on entering the block). The
      scenario's optimizer then says what torch does: param (the parameters' dtype),
      state (m and v: the dtype of the tensor the optimizer updates), master: fp32 when
      it updates fp32 copies, evaluation (gradprec.torch.sqrt_evaluation()) or fused:
      torch_cpu, every group's betas/eps/weight decay (per tensor where groups differ),
      lr_steps (each captured step's LR, read as optimizer.step() starts). Its state when
      the block is entered goes to KEY/state/{exp_avg, exp_avg_sq, master} (tensors[i].
      state with torch's step count; nothing before its first step), and torch's param,
      m, v, master after every step to KEY/step<S>/... (tensors[i].twin: the replay
      checks it reproduces them bit for bit). Each window of micro-batches must end with
      one optimizer.step() (its step also closes the window), or be skipped by `scaler`.
    master: the fp32 master copies the optimizer updates, when it holds them otherwise
      than as one fp32 copy of each trainable parameter in named_parameters() order (which
      is recognised by itself): a dict name -> tensor, or a list in that order.
    precision: overrides of the scenario's precision block (by default grad = the dtype
      the backward produced, accumulator = the parameter dtype, as .grad accumulates).
    name, seed, scenario: the scenario's name, seed, and further top-level keys.
    """
    return Capture(model, out_dir, reduction, accumulation_steps, **kw)


from ._monitor import Alert, Monitor, MonitorAlert, MonitorWarning, monitor  # noqa: E402  (docs/monitor.md)
