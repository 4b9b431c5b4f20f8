"""Capture a PyTorch model's per-micro-batch gradients for gradprec to replay.

    with gradprec.torch.capture(model, "dump", reduction="mean", accumulation_steps=8) as cap:
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
Nothing is computed here beyond copying and indexing tensors; gradprec does the
arithmetic.
"""
import contextlib
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
    OptimiAdamW,
    TorchaoAdamW,
)
from .host import sqrt_evaluation  # noqa: E402  (which optimizer.evaluation this host's torch needs)

__all__ = ["capture", "Capture", "Backend", "AdamW", "AdamWForeach", "AdamWFused", "AdamWCUDA", "AdamWForeachCUDA",
           "AdamWFusedCUDA", "OptimiAdamW", "TorchaoAdamW", "sqrt_evaluation"]

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


class Capture:
    """What `capture(...)` returns; see capture() for the arguments.

    Use `microbatch(tokens=n)` around each micro-batch's backward, and (optionally)
    `step()` after each optimizer step. Windows of `accumulation_steps` micro-batches
    close by themselves; `step()` closes the current one early (a partial last window).
    On leaving the `with` block (without an exception) the files are written; `paths`
    then names them."""

    def __init__(self, model, out_dir, reduction, accumulation_steps=None, fullbatch="mean", sample=None,
                 params=None, weights=True, optimizer=None, precision=None, name=None, seed=0,
                 scenario=None, scaler=None):
        if reduction not in REDUCTIONS:
            raise ValueError("reduction: one of %s, not %r (how your loss divides each micro-batch)"
                             % (", ".join(REDUCTIONS), reduction))
        if fullbatch not in ("mean", "sum"):
            raise ValueError("fullbatch: 'mean' or 'sum', not %r" % (fullbatch,))
        if accumulation_steps is not None and (not isinstance(accumulation_steps, int) or accumulation_steps < 1):
            raise ValueError("accumulation_steps: an integer >= 1, not %r" % (accumulation_steps,))
        if sample is not None and (not isinstance(sample, int) or isinstance(sample, bool) or sample < 1):
            raise ValueError("sample: an integer >= 1 (elements per tensor), not %r" % (sample,))
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError("seed: an integer >= 0, not %r" % (seed,))
        if scaler is not None and not all(hasattr(scaler, a) for a in ("get_scale", "is_enabled")):
            raise TypeError("scaler: a torch.amp.GradScaler, not %s" % type(scaler).__name__)
        self.model = model
        self.out_dir = os.fspath(out_dir)
        self.reduction = reduction
        self.fullbatch = fullbatch
        self.accumulation_steps = accumulation_steps
        self.sample = sample
        self.weights = weights
        self.optimizer = optimizer
        self.precision = dict(precision or {})
        self.name = name
        self.seed = seed
        self.extra = dict(scenario or {})
        self.scaler = scaler if scaler is not None and scaler.is_enabled() else None
        self.params = self._select(model, params)
        for n, p in self.params:
            _fmt(p.dtype, n)
        self.paths = None
        self._handles = []
        self._windows = []   # closed windows: each a list of token counts
        self._window = []    # the open window's token counts
        self._scales = []    # closed windows: the loss scale of their backward passes
        self._wscale = None  # the open window's
        self._current = None
        self._paused = False
        self._sel = {}       # name -> the sampled elements (a LongTensor on the parameter's device), or None
        self._gdtype = {}    # name -> the dtype of its gradients (first seen)
        self._absent = []    # (name, step, micro-batch) that got no gradient: an exact zero entry
        self._spool = None   # {element width: (open file, path)}: the data, streamed
        self._index = []     # (entry, format, shape, width, offset, nbytes) in writing order
        self._made_dir = False

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
        return chosen

    # ---- the context ----

    def __enter__(self):
        if self._handles or self._spool is not None:
            raise RuntimeError("capture: already entered")
        from .. import sample_indices

        self._made_dir = not os.path.isdir(self.out_dir)
        os.makedirs(self.out_dir, exist_ok=True)
        self._spool = {}
        try:
            for w in (4, 2):  # 4-byte entries first: every entry stays aligned to its width
                fd, path = tempfile.mkstemp(prefix=".tmp-spool%d-" % w, dir=self.out_dir)
                self._spool[w] = (os.fdopen(fd, "wb"), path)
            for t, (n, p) in enumerate(self.params):
                sel = None
                if self.sample is not None and self.sample < p.numel():
                    # Tensor t of the scenario this capture writes, the scenario's seed:
                    # the elements `gradprec run` would sample from the whole dump.
                    idx = sample_indices(self.seed, t, p.numel(), self.sample)
                    sel = _torch.frombuffer(idx, dtype=_torch.int64).clone().to(p.device)
                self._sel[n] = sel
                if self.weights:
                    self._put("%s/weight" % n, p.detach(), sel, list(p.shape))
                self._handles.append(p.register_hook(self._hook(n, p)))
            self._flush()
        except BaseException:
            self._discard()
            raise
        return self

    def __exit__(self, etype, evalue, tb):
        for h in self._handles:
            h.remove()
        self._handles = []
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
            # Written now (to disk, or its sample): AccumulateGrad may keep this very tensor
            # as .grad and add into it later, after this hook returned.
            self._put("%s/step%d/mb%d" % (name, len(self._windows), len(self._window)), grad, self._sel[name],
                      list(param.shape))
            seen.add(name)
            return None
        return hook

    @contextlib.contextmanager
    def microbatch(self, tokens):
        """Records the gradients of the backward run inside this block as one micro-batch
        of `tokens` tokens (the count your loss normalisation uses: n_k)."""
        if isinstance(tokens, _torch.Tensor):
            tokens = int(tokens.item())
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
            raise ValueError("microbatch: tokens must be an integer >= 1, not %r" % (tokens,))
        if self._current is not None:
            raise RuntimeError("microbatch: blocks do not nest")
        if not self._handles:
            raise RuntimeError("microbatch: use it inside `with capture(...) as cap:`")
        if self.scaler is not None:
            s = float(self.scaler.get_scale())
            if self._window and s != self._wscale:
                raise RuntimeError("microbatch: the GradScaler's scale changed inside an accumulation window "
                                   "(%g, then %g): call scaler.update() after the window's last micro-batch"
                                   % (self._wscale, s))
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
    def paused(self):
        """Backward passes inside this block are not recorded (an evaluation, a probe,
        a reference gradient): outside microbatch() blocks they would be refused."""
        if self._current is not None:
            raise RuntimeError("paused: not inside a microbatch() block")
        self._paused = True
        try:
            yield self
        finally:
            self._paused = False

    def step(self):
        """Marks an optimizer step: closes the current window (if any micro-batch is open
        in it). Windows of `accumulation_steps` micro-batches close by themselves."""
        if self._current is not None:
            raise RuntimeError("step: called inside a microbatch() block")
        if self._window:
            self._close()

    def _close(self):
        self._windows.append(self._window)
        self._scales.append(self._wscale)
        self._window = []

    # ---- writing ----

    def _check(self):
        if self._window:
            self._close()
        if not self._windows:
            raise RuntimeError("capture: no micro-batch was recorded")
        K = len(self._windows[0])
        toks = self._windows[0]
        for s, t in enumerate(self._windows):
            if t != toks:
                raise ValueError(
                    "capture: optimizer step %d has token counts %s, step 0 has %s; a scenario holds one "
                    "list of token counts for every step (capture each token layout separately)" % (s, t, toks))
        A = self.accumulation_steps if self.accumulation_steps is not None else K
        if K > A:
            raise ValueError("capture: %d micro-batches in a window, more than accumulation_steps=%d" % (K, A))
        return K, A, toks

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
        return {"mode": "dynamic", "init": self._scales[0], "growth": float(sc.get_growth_factor()),
                "backoff": float(sc.get_backoff_factor()), "interval": int(sc.get_growth_interval()),
                "replay_scales": list(self._scales)}

    def _optimizer_block(self):
        opt = self.optimizer
        if opt is None:
            return None
        if not isinstance(opt, _torch.optim.AdamW):
            raise TypeError("optimizer: only torch.optim.AdamW is modelled, not %s" % type(opt).__name__)
        keys = ("lr", "betas", "eps", "weight_decay")
        groups = [{k: g[k] for k in keys} for g in opt.param_groups]
        if any(g != groups[0] for g in groups):
            raise ValueError("optimizer: param groups with different hyper-parameters cannot be one scenario")
        g = groups[0]
        return {"name": "adamw", "lr": float(g["lr"]), "betas": [float(b) for b in g["betas"]],
                "eps": float(g["eps"]), "weight_decay": float(g["weight_decay"])}

    def scenario(self):
        """The scenario (a dict) that replays what was captured."""
        K, A, toks = self._check()
        fmts, _ = self._formats()
        gf = {f[0] for f in fmts.values()}
        af = {f[1] for f in fmts.values()}
        if len(gf) > 1 or len(af) > 1:
            raise TypeError("capture: parameters of several dtypes (%s); capture them separately with params=..."
                            % ", ".join("%s %s/%s" % (n, f[0], f[1]) for n, f in fmts.items()))
        prec = {"grad": gf.pop(), "accumulator": af.pop()}
        prec.update(self.precision)
        tensors = []
        for n, p in self.params:
            if n not in fmts:
                continue
            t = {"name": n, "grad": {"replay": GRADS_FILE, "key": n}}
            if self.weights:
                t["weight"] = {"replay": GRADS_FILE, "key": n}
            if self._sel.get(n) is not None:
                t["population"] = p.numel()  # the dump holds a sample of this many elements
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
        opt = self._optimizer_block()
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

    def write(self):
        """Writes grads.safetensors, scenario.yaml and capture.json into out_dir (each via
        a temporary file renamed into place) and returns their paths (also in .paths).
        grads.safetensors is assembled from the spool files: its header, then their bytes
        copied by the kernel (os.copy_file_range) or in 1 MiB blocks."""
        if self._spool is None:
            raise RuntimeError("capture: write() after the files were written (or outside the with block)")
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
            "microbatches": len(self._windows[0]),
            "tokens": [list(w) for w in self._windows],
            "reduction": self.reduction,
            "seed": self.seed,
            "loss_scales": list(self._scales) if self.scaler is not None else None,
            "tensors": [{"name": n, "shape": list(p.shape), "grad_dtype": fmts[n][0], "param_dtype": fmts[n][1],
                         "numel": p.numel(),
                         "sample": int(self._sel[n].numel()) if self._sel[n] is not None else None,
                         "scenario_index": i}
                        for i, (n, p) in enumerate(self.params) if n in fmts],
            "not_captured": missing,
        }
        header = ("Written by gradprec.torch.capture (torch %s): %d optimizer step(s) of %d micro-batch(es).\n"
                  "Replay: gradprec run %s" % (_torch.__version__, len(self._windows), len(self._windows[0]),
                                               paths["scenario"]))
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


def capture(model, out_dir, reduction, accumulation_steps=None, **kw):
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
      bit); the scenario gets `loss_scale` (dynamic, the scaler's factors) with
      `replay_scales`, the scale of each step, which replay divides out exactly.
    params: names or glob patterns (or a predicate f(name, param)) of the parameters to
      capture (default: every trainable one).
    weights: also store each parameter's initial value (default True).
    optimizer: a torch.optim.AdamW whose hyper-parameters the scenario takes.
    precision: overrides of the scenario's precision block (by default grad = the dtype
      the backward produced, accumulator = the parameter dtype, as .grad accumulates).
    name, seed, scenario: the scenario's name, seed, and further top-level keys.
    """
    return Capture(model, out_dir, reduction, accumulation_steps, **kw)
