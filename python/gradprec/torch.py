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
Nothing is computed here beyond copying tensors; gradprec does the arithmetic.
"""
import contextlib
import fnmatch
import json
import os
import tempfile
import warnings

import torch as _torch

from . import _yaml

__all__ = ["capture", "Capture"]

REDUCTIONS = ("token_mean", "mean", "mean_no_div", "sum")
_FORMATS = {_torch.float32: "fp32", _torch.bfloat16: "bf16", _torch.float16: "fp16"}
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
                 scenario=None):
        if reduction not in REDUCTIONS:
            raise ValueError("reduction: one of %s, not %r (how your loss divides each micro-batch)"
                             % (", ".join(REDUCTIONS), reduction))
        if fullbatch not in ("mean", "sum"):
            raise ValueError("fullbatch: 'mean' or 'sum', not %r" % (fullbatch,))
        if accumulation_steps is not None and (not isinstance(accumulation_steps, int) or accumulation_steps < 1):
            raise ValueError("accumulation_steps: an integer >= 1, not %r" % (accumulation_steps,))
        if sample is not None and (not isinstance(sample, int) or sample < 1):
            raise ValueError("sample: an integer >= 1 (elements per tensor), not %r" % (sample,))
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
        self.params = self._select(model, params)
        self.paths = None
        self._handles = []
        self._windows = []  # closed windows: list of lists of micro-batch records
        self._window = []   # the open window
        self._current = None
        self._paused = False
        self._initial = {}

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
        if self._handles:
            raise RuntimeError("capture: already entered")
        for n, p in self.params:
            if self.weights:
                self._initial[n] = p.detach().to("cpu", copy=True).contiguous()
            self._handles.append(p.register_hook(self._hook(n)))
        return self

    def __exit__(self, etype, evalue, tb):
        for h in self._handles:
            h.remove()
        self._handles = []
        if etype is None:
            if self._current is not None:
                raise RuntimeError("capture: left inside a microbatch() block")
            self.write()
        return False

    def _hook(self, name):
        def hook(grad):
            if self._paused:
                return None
            if self._current is None:
                raise RuntimeError("gradprec capture: a backward ran outside `with cap.microbatch(tokens=...)` "
                                   "(parameter %s); wrap each micro-batch's backward" % name)
            grads = self._current["grads"]
            if name in grads:
                raise RuntimeError("gradprec capture: parameter %s got a second gradient in micro-batch %d; "
                                   "use one backward per micro-batch" % (name, len(self._window)))
            # A copy: AccumulateGrad may keep this very tensor as .grad and add into it later.
            grads[name] = grad.detach().to("cpu", copy=True).contiguous()
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
        self._current = {"tokens": tokens, "grads": {}}
        try:
            yield self
        except BaseException:
            self._current = None
            raise
        rec, self._current = self._current, None
        if not rec["grads"]:
            raise RuntimeError("microbatch: no gradient reached the captured parameters (was backward() called?)")
        self._window.append(rec)
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
        self._window = []

    # ---- writing ----

    def _check(self):
        if self._window:
            self._close()
        if not self._windows:
            raise RuntimeError("capture: no micro-batch was recorded")
        K = len(self._windows[0])
        toks = [r["tokens"] for r in self._windows[0]]
        for s, w in enumerate(self._windows):
            t = [r["tokens"] for r in w]
            if t != toks:
                raise ValueError(
                    "capture: optimizer step %d has token counts %s, step 0 has %s; a scenario holds one "
                    "list of token counts for every step (capture each token layout separately)" % (s, t, toks))
        A = self.accumulation_steps if self.accumulation_steps is not None else K
        if K > A:
            raise ValueError("capture: %d micro-batches in a window, more than accumulation_steps=%d" % (K, A))
        return K, A, toks

    def _entries(self):
        """The safetensors entries and, per captured tensor, its grad format; parameters
        that never received a gradient are reported, not written."""
        entries, fmts, missing = {}, {}, []
        for n, p in self.params:
            seen = [r["grads"].get(n) for w in self._windows for r in w]
            got = [g for g in seen if g is not None]
            if not got:
                missing.append(n)
                continue
            dt = got[0].dtype
            if any(g.dtype != dt for g in got):
                raise TypeError("capture: parameter %s got gradients of several dtypes" % n)
            fmts[n] = (_fmt(dt, n), _fmt(p.dtype, n))
            for s, w in enumerate(self._windows):
                for k, r in enumerate(w):
                    g = r["grads"].get(n)
                    # No gradient in this micro-batch: its contribution is exactly zero.
                    entries["%s/step%d/mb%d" % (n, s, k)] = g if g is not None else _torch.zeros(p.shape, dtype=dt)
            if self.weights:
                entries["%s/weight" % n] = self._initial[n]
        return entries, fmts, missing

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
        _, fmts, _ = self._entries()
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
            if self.sample is not None and self.sample < p.numel():
                t["sample"] = self.sample
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
        opt = self._optimizer_block()
        if opt is not None:
            doc["optimizer"] = opt
        doc["steps"] = len(self._windows)
        for k, v in self.extra.items():
            doc[k] = v
        return doc

    def write(self):
        """Writes grads.safetensors, scenario.yaml and capture.json into out_dir (each via
        a temporary file renamed into place) and returns their paths (also in .paths)."""
        from safetensors.torch import save_file

        doc = self.scenario()
        entries, fmts, missing = self._entries()
        if missing:
            warnings.warn("gradprec capture: no gradient reached %s; not in the dump" % ", ".join(missing))
        os.makedirs(self.out_dir, exist_ok=True)
        paths = {k: os.path.join(self.out_dir, f) for k, f in
                 (("grads", GRADS_FILE), ("scenario", SCENARIO_FILE), ("manifest", MANIFEST_FILE))}
        manifest = {
            "format": "gradprec-capture/1",
            "torch": _torch.__version__,
            "steps": len(self._windows),
            "microbatches": len(self._windows[0]),
            "tokens": [[r["tokens"] for r in w] for w in self._windows],
            "reduction": self.reduction,
            "tensors": [{"name": n, "shape": list(p.shape), "grad_dtype": fmts[n][0], "param_dtype": fmts[n][1],
                         "numel": p.numel(), "sample": doc_sample(self.sample, p.numel())}
                        for n, p in self.params if n in fmts],
            "not_captured": missing,
        }
        header = ("Written by gradprec.torch.capture (torch %s): %d optimizer step(s) of %d micro-batch(es).\n"
                  "Replay: gradprec run %s" % (_torch.__version__, len(self._windows), len(self._windows[0]),
                                               paths["scenario"]))
        self._atomic(paths["grads"], lambda tmp: save_file(entries, tmp))
        self._atomic(paths["manifest"], lambda tmp: _write_text(tmp, json.dumps(manifest, indent=1) + "\n"))
        self._atomic(paths["scenario"], lambda tmp: _write_text(tmp, _yaml.dump(doc, header)))
        self.paths = paths
        return paths

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


def doc_sample(sample, numel):
    return sample if sample is not None and sample < numel else None


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
    sample: N elements per tensor that gradprec samples (seeded) instead of all of them;
      the dump still holds every element and the report says the metrics are estimates.
    params: names or glob patterns (or a predicate f(name, param)) of the parameters to
      capture (default: every trainable one).
    weights: also store each parameter's initial value (default True).
    optimizer: a torch.optim.AdamW whose hyper-parameters the scenario takes.
    precision: overrides of the scenario's precision block (by default grad = the dtype
      the backward produced, accumulator = the parameter dtype, as .grad accumulates).
    name, seed, scenario: the scenario's name, seed, and further top-level keys.
    """
    return Capture(model, out_dir, reduction, accumulation_steps, **kw)
