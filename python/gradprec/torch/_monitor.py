"""gradprec.torch.monitor: a precision monitor inside training (docs/monitor.md).

    with gradprec.torch.monitor(model, optimizer=opt, every=10, sample=4096, out="gp") as mon:
        for batch in batches:
            with mon.microbatch(tokens=n_tokens(batch)):
                loss_fn(model, batch).backward()
            opt.step(); opt.zero_grad()
    # gp/monitor.jsonl: one record per monitored step

Every `every`-th optimizer step is fed, from gradprec.torch.capture's hooks (the same
checks), to a streaming session of the C library (gradprec.Stream, include/gradprec.h
gradprec_stream_*): each micro-batch's gradients (only the elements the library chose
under sample=: the session gathers them from a CPU tensor in place, a device tensor is gathered
with index_select first), the tokens, the optimizer's state at entry
and torch's state after the step (the twin). Closing the step runs it as the one-step
scenario a replay of it would be, in this process, by the C loader and runner (the
numbers are gradprec's, none is computed here); the step becomes one JSON line. Nothing
is written but the log. Steps in between run with no hook at all. Memory does not grow
with the number of steps: one step's fed elements are held at a time, and the alert
state holds one flag per (metric, tensor).
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import functools
from typing import Any, Dict, Iterator, Optional
import json
import math
import os
import re
import sys
import threading
import warnings

from .. import Stream
from . import Capture, _OptimizerPlan, _fmt, _torch

FORMAT = "gradprec-monitor/1"
LOG_FILE = "monitor.jsonl"

# What each record carries per tensor and overall (the report's metric names).
RECORDED = ("underflow_frac", "absorbed_frac", "normalization_rel_err", "stale_update_frac",
            "state_underflow_frac", "grad_norm_ratio", "grad_rel_err_fullbatch", "weight_rel_err",
            "skipped_steps", "min_loss_scale", "twin_mismatch_count")

# Metrics of the optimizer step: without optimizer= the step's scenario has no optimizer
# block and the runner steps its default AdamW (docs/scenarios.md), which is not the
# user's: these are then left out of the records and the alerts.
OPTIMIZER_METRICS = ("stale_update_frac", "state_underflow_frac", "weight_rel_err", "m_rel_err", "v_rel_err",
                     "update_formula_steps", "twin_mismatch_count")

# The monitor's own default: a gradient whose accumulated norm is under half or over twice
# the exact one (the seed incident is a norm collapse). The runner's defaults
# (docs/scenarios.md, Verdicts) apply to every other metric; thresholds= replaces per metric.
DEFAULT_THRESHOLDS = {"grad_norm_ratio": {"min": 0.5, "max": 2.0}}

# The mechanism a metric counts by itself (docs/scenarios.md, "The mechanism a verdict
# names"); a crossing of any other metric names the step's dominant mechanism.
MECHANISM_OF = {
    "underflow_frac": "underflow", "absorbed_frac": "absorption", "overflow_count": "overflow",
    "nonfinite_count": "non-finite", "normalization_rel_err": "normalization", "skipped_steps": "scaling",
    "min_loss_scale": "scaling", "scaling_rel_err": "scaling", "stale_update_frac": "stale update",
    "state_underflow_frac": "state precision", "m_rel_err": "state precision", "v_rel_err": "state precision",
}


class MonitorAlert(Exception):
    """Raised by a monitor with on_alert='raise'; `.alert` is the Alert."""

    def __init__(self, alert):
        super().__init__(str(alert))
        self.alert = alert


class MonitorWarning(UserWarning):
    """What a monitor with on_alert='warn' (the default) warns with."""


class Alert:
    """A threshold crossing: `step`, `metric`, `tensor` (None: the whole step), `value`,
    `min`/`max` (the bounds it left; None where unset), `mechanism`."""

    def __init__(self, step, metric, tensor, value, lo, hi, mechanism):
        self.step, self.metric, self.tensor, self.value = step, metric, tensor, value
        self.min, self.max, self.mechanism = lo, hi, mechanism

    def as_dict(self):
        return {"step": self.step, "metric": self.metric, "tensor": self.tensor, "value": _num(self.value),
                "min": self.min, "max": self.max, "mechanism": self.mechanism}

    def __str__(self):
        where = "tensor %s" % self.tensor if self.tensor is not None else "the step"
        bound = ("below min %g" % self.min if self.min is not None and self.value < self.min
                 else "above max %g" % self.max if self.max is not None and self.value > self.max
                 else "undefined (nan)")
        return ("gradprec monitor: step %d: %s of %s is %s (%s); mechanism: %s"
                % (self.step, self.metric, where, "%.4g" % self.value, bound, self.mechanism))

    __repr__ = __str__


def _num(x):
    """A float for JSON: NaN (an undefined metric) as null."""
    x = float(x)
    return None if math.isnan(x) else x


def _clean(x):
    """x with every non-finite float made JSON: NaN as null, infinities as "inf"/"-inf"
    (report.json's spelling), so that a record is always one valid JSON line."""
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def _json_line(rec):
    """rec as one JSON line: json.dumps of rec itself when every float in it is finite
    (the usual record: its metrics come through _num), else of _clean(rec). Either gives
    the same text for such a record; the walk of _clean is only paid when it changes it."""
    try:
        return json.dumps(rec, allow_nan=False)
    except ValueError:
        return json.dumps(_clean(rec), allow_nan=False)


def _last_step(path):
    """The step of the last record of the log at path; None when there is no log or it is
    empty. Reads backwards from the end (a record can be long; the log can be large)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return None
    with f:
        end = f.seek(0, os.SEEK_END)
        tail, pos = b"", end
        while pos > 0:
            n = min(pos, 1 << 16)
            pos -= n
            f.seek(pos)
            tail = f.read(n) + tail
            lines = tail.rstrip(b"\n").split(b"\n")
            if len(lines) > 1 or pos == 0:
                break
        line = tail.rstrip(b"\n").split(b"\n")[-1].strip()
    if not line:
        return None
    try:
        rec = json.loads(line)
        step = rec["step"] if rec.get("format") == FORMAT else None
    except (ValueError, KeyError, AttributeError):
        step = None
    if not isinstance(step, int) or isinstance(step, bool):
        raise ValueError("out: %s does not end with a %s record; give the monitor another folder" % (path, FORMAT))
    return step


def _bounds(thresholds):
    """{metric: (min or None, max or None)} from the scenario language's thresholds: a
    number (the max) or {min, max}."""
    out = {}
    for m, v in thresholds.items():
        if isinstance(v, dict):
            unknown = set(v) - {"min", "max"}
            if unknown or not v:
                raise ValueError("thresholds.%s: a number (the max) or {min, max}, not %r" % (m, v))
            out[m] = (v.get("min"), v.get("max"))
        else:
            out[m] = (None, v)
    return out


_ENTRY = re.compile(r"^(.*)/(?:(weight)|state/(\w+)|step\d+/(mb)\d+|step\d+/(\w+))$")


@functools.lru_cache(maxsize=8192)
def _entry(name):
    """capture's entry name split as _ENTRY's groups (the same few names every step)."""
    return _ENTRY.match(name).groups()


# The closing thread's nice value (Linux). Under CFS a thread's share of a core against
# a nice-0 thread is its weight over the sum: nice 10 weighs 110 against 1024, about a
# tenth of the core. bench/monitor_overhead.py --every 1 --nice N (2026-11-29, two runs
# each, bench/README.md): nice 0 1.19 and 1.12, 5 1.16 and 1.17, 10 1.12 and 1.07, 19 1.08
# and 1.07. 10 rather than 19: when every core is busy with normal-priority work (not
# training's own threads: they are idle while training waits for a close) a close that
# training waits for still gets about a tenth of a core, not about 1.5% (nice 19, weight
# 15), and an unprivileged thread cannot lower its nice value again to end such a wait.
NICE = 10


def _yield_to_training():
    """The closing thread's initializer: on Linux, this thread alone (the nice value is a
    per-thread attribute there; setpriority(2)) at nice NICE, a low CPU priority, so that
    it runs on the cycles training leaves idle and takes few from training's threads when
    every core is busy. The step it closes waits for it at the latest one monitored step
    later. Results do not depend on it. Elsewhere (where a thread id is not a process id)
    it does nothing."""
    if sys.platform.startswith("linux"):
        tid = threading.get_native_id()
        try:
            os.setpriority(os.PRIO_PROCESS, tid, max(NICE, os.getpriority(os.PRIO_PROCESS, tid)))
        except OSError:  # not permitted in this container: normal priority
            pass


class _StepFeed(Capture):
    """One monitored step: capture's hooks, checks and scenario, each entry fed to the
    monitor's Stream instead of a spool file (tensor t of the capture is tensor t of the
    stream's skeleton; its sampled elements are the stream's)."""

    def __init__(self, stream, sel, *args, **kw):
        super().__init__(*args, **kw)
        self._stream, self._chosen = stream, sel
        self._tindex = {n: i for i, (n, _) in enumerate(self.params)}

    def _open_store(self):
        pass

    def _flush(self):
        pass

    def _discard(self):
        self._spool = None

    def _choose(self, t, p):
        return self._chosen[t]

    def _put(self, entry, t, sel, shape):
        name, weight, state, mb, after = _entry(entry)
        flat = t.detach()
        if flat.device.type != "cpu" or not flat.is_contiguous():
            flat = flat.reshape(-1)
            if sel is not None:  # only the sampled elements cross to the CPU
                flat = flat.index_select(0, sel)
            flat = flat.to("cpu").contiguous()
        # else the whole tensor in place: the session copies the sampled elements itself
        # (gradprec_stream_grad/_optimizer take the whole tensor or its sample)
        i, fmt, ptr, n = self._tindex[name], _fmt(flat.dtype, name), flat.data_ptr(), flat.numel()
        if mb:
            self._stream.grad(i, fmt, ptr, n)
        elif weight:
            self._stream.optimizer(i, False, "param", fmt, ptr, n)
        elif state:
            self._stream.optimizer(i, False, state, fmt, ptr, n, self._plan.state(i)[2])
        else:
            self._stream.optimizer(i, True, after, fmt, ptr, n)

    @contextlib.contextmanager
    def microbatch(self, tokens):
        if isinstance(tokens, _torch.Tensor):
            tokens = int(tokens.item())
        with Capture.microbatch(self, tokens):
            yield self
        self._stream.tokens(tokens)


class Monitor:
    """What `monitor(...)` returns; see monitor() for the arguments."""

    def __init__(self, model, optimizer=None, scaler=None, every=1, sample=None, out="gradprec-monitor",
                 reduction="mean", accumulation_steps=None, thresholds=None, on_alert="warn", writer=None,
                 params=None, master=None, seed=0, status=None, background=True):
        from . import REDUCTIONS

        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ValueError("every: an integer >= 1 (monitor every N-th optimizer step), not %r" % (every,))
        if reduction not in REDUCTIONS:
            raise ValueError("reduction: one of %s, not %r (how your loss divides each micro-batch)"
                             % (", ".join(REDUCTIONS), reduction))
        if not (on_alert in ("warn", "raise") or callable(on_alert)):
            raise ValueError("on_alert: 'warn', 'raise' or a callable taking an Alert, not %r" % (on_alert,))
        if optimizer is None and accumulation_steps is None:
            raise ValueError("monitor: needs optimizer= or accumulation_steps= (where an optimizer step ends)")
        if writer is not None and not hasattr(writer, "add_scalar"):
            raise TypeError("writer: a torch.utils.tensorboard.SummaryWriter (add_scalar), not %s"
                            % type(writer).__name__)
        th = dict(DEFAULT_THRESHOLDS)
        th.update(thresholds or {})
        self.bounds = _bounds(th)
        self.thresholds = th
        self.model, self.optimizer, self.scaler, self.master = model, optimizer, scaler, master
        self.every, self.sample, self.reduction = every, sample, reduction
        self.accumulation_steps, self.params, self.seed = accumulation_steps, params, seed
        self.on_alert, self.writer = on_alert, writer
        self.out = os.fspath(out)
        self.log_path = os.path.join(self.out, LOG_FILE)
        self.status = status          # None: a one-line status when stderr is a TTY
        self.background = bool(background)
        self.step_index = 0           # the optimizer step the open (or next) window is (after a log's last)
        self._in_window = 0           # micro-batches of the open window
        self._cap = None              # the _StepFeed of the monitored step in progress
        self._cap_step = None
        self._stream = None           # the gradprec.Stream the next monitored step feeds
        self._streams = []            # every Stream (two with background=True: one closing, one fed)
        self._pool = None             # background=True: the one thread that closes steps
        self._pending = None          # background=True: (future, step, tokens, scale, stream) of the step closing
        self._sel = None
        self._outside = {}            # (metric, tensor or None) -> True while outside its bounds
        self._hooks = []
        self._log = None
        self._entered = False
        self.records = 0              # records written
        self.last = None              # the last record (a dict)
        self.alerts = []              # every Alert raised so far (bounded: one per crossing)

    # ---- the context ----

    def __enter__(self):
        if self._entered:
            raise RuntimeError("monitor: already entered")
        # refused now, with capture's own lines, before training starts
        cap = Capture(self.model, self.out, self.reduction, self.accumulation_steps, sample=self.sample,
                      params=self.params, optimizer=self.optimizer, scaler=self.scaler, master=self.master,
                      seed=self.seed)
        # the runner's threads (results do not depend on them): torch's, idle while it runs;
        # in the background one, beside training. Two sessions of the same skeleton there:
        # one closes step S while the other is fed step S + 1 (the same sampled elements:
        # the choice depends on the seed and the tensor's position only).
        skel = self._skeleton(cap)
        if self.background:
            self._streams = [Stream(skel, jobs=1), Stream(skel, jobs=1)]
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gradprec-monitor",
                                                               initializer=_yield_to_training)
        else:
            self._streams = [Stream(skel, jobs=max(1, _torch.get_num_threads()))]
        self._stream = self._streams[0]
        self._sel = []  # per tensor: the elements the library chose (on the parameter's device), or None
        for t, (_, p) in enumerate(cap.params):
            buf = self._stream.indices_buffer(t)
            self._sel.append(None if buf is None else
                             _torch.frombuffer(buf, dtype=_torch.int64).clone().to(p.device))
        os.makedirs(self.out, exist_ok=True)
        last = _last_step(self.log_path)
        if last is not None:  # a log of an earlier block: this one's steps follow its steps
            self.step_index = last + 1
        self._log = open(self.log_path, "a", encoding="utf-8")
        if self.optimizer is not None:
            self._hooks.append(self.optimizer.register_step_pre_hook(self._pre_step))
            self._hooks.append(self.optimizer.register_step_post_hook(self._post_step))
        self._entered = True
        return self

    def _thresholds(self):
        return {m: ({k: v for k, v in (("min", lo), ("max", hi)) if v is not None}) for m, (lo, hi) in
                self.bounds.items()}

    def _skeleton(self, cap):
        """The stream's skeleton: the scenario capture would write, less what each step
        feeds or sets (gradients, state, token counts, the step's LR and loss scale)."""
        tensors = []
        for n, p in cap.params:
            t = {"name": n, "size": p.numel()}
            if self.sample is not None and self.sample < p.numel():
                t["sample"] = self.sample
            tensors.append(t)
        f = _fmt(cap.params[0][1].dtype, cap.params[0][0])
        doc = {"name": "monitor", "seed": self.seed, "tensors": tensors, "reduction": self.reduction,
               "fullbatch": cap.fullbatch, "precision": {"grad": f, "accumulator": f},
               "thresholds": self._thresholds()}
        if self.accumulation_steps is not None:
            doc["batch"] = {"accumulation_steps": self.accumulation_steps}
        if self.optimizer is not None:
            cap._plan = _OptimizerPlan(self.optimizer, cap._named, cap.params, self.master)
            cap._lrs = [cap._plan.lrs("monitor")]
            doc["optimizer"] = cap._optimizer_block(0)
            del doc["optimizer"]["lr_steps"]  # each step's
        if cap.scaler is not None:
            cap._scale0 = (float(cap.scaler.get_scale()), int(cap.scaler._get_growth_tracker()))
            cap._scales = [cap._scale0[0]]
            doc["loss_scale"] = cap._loss_scale_block()
            del doc["loss_scale"]["replay_scales"]  # each step's
        return doc

    @staticmethod
    def _overrides(doc):
        """The step's own settings from capture's one-step scenario `doc` (merged over the
        skeleton by the session): everything but what the session writes itself."""
        ov = {k: v for k, v in doc.items() if k not in ("tensors", "steps", "batch", "seed")}
        ov["batch"] = {"accumulation_steps": doc["batch"]["accumulation_steps"]}
        tens = {t["name"]: {"optimizer": t["optimizer"]} for t in doc["tensors"] if "optimizer" in t}
        if tens:
            ov["tensors"] = tens
        return ov

    def __exit__(self, etype, evalue, tb):
        for h in self._hooks:
            h.remove()
        self._hooks = []
        try:
            if etype is None and self._cap is not None:
                if self._in_window:
                    self._close_window()
                self._finish_step()
            if etype is None:
                self.flush()
        finally:
            self._drop_capture()
            if self._pending is not None:  # leaving on an exception: the step closing is logged, its alerts not raised
                try:
                    self._collect(quiet=True)
                except Exception:  # its own failure would hide the exception that is leaving
                    pass
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
            for st in self._streams:
                st.free()
            if self._log is not None:
                self._log.close()
                self._log = None
            if self._tty():
                sys.stderr.write("\n")
            self._entered = False
        return False

    @contextlib.contextmanager
    def microbatch(self, tokens: int) -> Iterator[None]:
        """One micro-batch's backward (tokens: the count your loss normalisation uses).
        In a monitored step it is capture's microbatch(); otherwise only counted."""
        if not self._entered:
            raise RuntimeError("microbatch: use it inside `with gradprec.torch.monitor(...) as mon:`")
        if self._in_window == 0:
            if self._cap is not None:   # the previous monitored step ended without optimizer.step()
                self._finish_step()     # (a step the scaler skipped)
            if self.step_index % self.every == 0:
                self._start_step()
        if self._cap is not None and self._cap_step == self.step_index:
            with self._cap.microbatch(tokens):
                yield self
        else:
            yield self
        self._in_window += 1
        if self.accumulation_steps is not None and self._in_window == self.accumulation_steps:
            self._close_window()
            if self.optimizer is None and self._cap is not None:
                self._finish_step()

    def step(self) -> None:
        """Ends the open window early (a partial window), as capture's step()."""
        if self._in_window:
            if self._cap is not None:
                self._cap.step()
            self._close_window()
            if self.optimizer is None and self._cap is not None:
                self._finish_step()

    def flush(self) -> None:
        """background=True: waits for the step closing in the background and logs it
        (its record, scalars and alerts); leaving the with-block does this too. Without
        background it has nothing to do."""
        if self._pending is not None:
            self._collect()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Backward passes inside this block are not training (an evaluation, a probe)."""
        if self._cap is not None:
            with self._cap.paused():
                yield self
        else:
            yield self

    # ---- the steps ----

    def _close_window(self):
        self._in_window = 0
        self.step_index += 1

    def _pre_step(self, optimizer, args, kwargs):
        if self._in_window:   # a partial window: torch's step ends it (the capture's pre-hook does too)
            self._close_window()

    def _post_step(self, optimizer, args, kwargs):
        if self._cap is not None and self._cap_step == self.step_index - 1:
            self._finish_step()

    def _start_step(self):
        if self._pending is not None:  # feed the session that is not closing
            self._stream = self._streams[1] if self._pending[4] is self._streams[0] else self._streams[0]
        cap = _StepFeed(self._stream, self._sel, self.model, self.out, self.reduction, self.accumulation_steps,
                        sample=self.sample, params=self.params, optimizer=self.optimizer, scaler=self.scaler,
                        master=self.master, seed=self.seed, name="step%d" % self.step_index,
                        scenario={"thresholds": self._thresholds()})
        try:
            cap.__enter__()
        except BaseException:
            self._cap = cap
            self._drop_capture()
            raise
        self._cap, self._cap_step = cap, self.step_index

    def _drop_capture(self, discard=True):
        """Removes the step's hooks and drops what it fed (nothing once closed; not when
        its close was handed to the background thread)."""
        if self._cap is not None:
            self._cap._remove_hooks()
            stream, self._cap = self._cap._stream, None
            if discard:
                stream.discard()

    def _finish_step(self):
        """Closes the monitored step's stream step (the C runner judges it), logs the
        record, raises alerts. background=True: the close goes to the background thread
        and the step closed before it (if any) is logged now."""
        cap, step = self._cap, self._cap_step
        submitted = False
        try:
            cap._remove_hooks()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # capture's notes about its own dump
                cap._finish()  # the open window closed, torch's state after the step fed
            scale = cap._scales[0] if cap.scaler is not None else None
            tokens = cap._windows[0] if cap._windows else []
            overrides = self._overrides(cap.scenario())
            if self._pool is not None:
                previous, self._pending = self._pending, (
                    self._pool.submit(cap._stream.close, overrides), step, tokens, scale, cap._stream)
                submitted = True
            else:
                res = cap._stream.close(overrides)
        finally:
            self._drop_capture(discard=not submitted)
        if self._pool is None:
            self._judge(step, res[0], tokens, scale)
        elif previous is not None:  # one step behind: the thread closes the steps in order
            self._judge_closed(previous)

    def _collect(self, quiet=False):
        """background=True: waits for the step closing and judges it (quiet: logs it, no alerts)."""
        pending, self._pending = self._pending, None
        self._judge_closed(pending, quiet)

    def _judge_closed(self, pending, quiet=False):
        """Waits for a background close (a _pending tuple) and judges its step."""
        fut, step, tokens, scale, _ = pending
        self._judge(step, fut.result()[0], tokens, scale, quiet)

    def _judge(self, step, s, tokens, scale, quiet=False):
        """Logs the record of a closed step s (a ScenarioResult), sends its scalars and
        status line, raises its alerts (quiet: notes them only)."""
        rec = self._record(step, s, tokens, scale)
        alerts = self._alerts(step, s)
        rec["alerts"] = [a.as_dict() for a in alerts]
        self._log.write(_json_line(rec) + "\n")
        self._log.flush()
        self.records += 1
        self.last = rec
        self._tensorboard(rec)
        self._status_line(rec)
        for a in alerts:
            self.alerts.append(a)
            if quiet:
                continue
            if self.on_alert == "warn":
                warnings.warn(MonitorWarning(str(a)), stacklevel=4)
            elif self.on_alert == "raise":
                raise MonitorAlert(a)
            else:
                self.on_alert(a)

    def _record(self, step, s, tokens, scale):
        """One line of monitor.jsonl (docs/monitor.md, the schema)."""
        rep = s.report
        ci = (rep.get("sampling") or {}).get("intervals") or {}

        def metrics(m):  # null: undefined (NaN: report.json leaves it out) or not reported
            return {k: _num(m.get(k, math.nan)) for k in RECORDED if k not in self._dropped()}

        tensors = []
        for t, tj in zip(s.tensors, rep.get("tensors") or []):
            tci = (tj.get("sampling") or {}).get("intervals") or {}
            tensors.append({"name": t.name, "metrics": metrics(t.metrics),
                            "grad_norm_ratio_interval": tci.get("grad_norm_ratio"),
                            "loss_by_mechanism": tj.get("loss_by_mechanism")})
        skipped = s.metrics.get("skipped_steps", 0.0) > 0
        return {
            "format": FORMAT,
            "step": step,
            "tokens": tokens,
            "sample": self.sample,
            "loss_scale": scale,
            "skipped": bool(skipped),
            "verdict": s.verdict,
            "dominant_mechanism": s.dominant,
            "twin_mismatch_count": _num(s.metrics["twin_mismatch_count"]) if "twin_mismatch_count" in s.metrics
            else None,
            "metrics": metrics(s.metrics),
            "grad_norm_ratio_interval": ci.get("grad_norm_ratio"),
            "failed": rep.get("failed") or [],
            "tensors": tensors,
        }

    def _dropped(self):
        return OPTIMIZER_METRICS if self.optimizer is None else ()

    def _applied(self, s):
        """The bounds the runner judged this step with: each max of report.json's
        `thresholds` (the defaults of docs/scenarios.md where thresholds= gave none), each
        min as given (report.json lists maxima only)."""
        maxima = s.report.get("thresholds") or {}
        out = {m: (None, float(v)) for m, v in maxima.items() if v is not None}
        for m, (lo, hi) in self.bounds.items():
            if lo is not None:
                out[m] = (lo, out.get(m, (None, None))[1])
        return {m: b for m, b in out.items() if m not in self._dropped()}

    def _alerts(self, step, s):
        """The crossings of this step: a (metric, tensor) outside its bounds that was inside
        (or not yet seen) at the previous monitored step; one that comes back re-arms."""
        out = []
        overall = dict(s.metrics)
        for f in s.report.get("failed") or []:  # undefined (NaN) metrics fail closed; the runner lists them
            if f.get("metric") not in overall:
                overall[f.get("metric")] = math.nan
        items = [(None, overall)] + [(t.name, t.metrics) for t in s.tensors]
        for metric, (lo, hi) in sorted(self._applied(s).items()):
            for tname, m in items:
                if metric not in m:
                    continue
                v = float(m[metric])
                outside = math.isnan(v) or (lo is not None and v < lo) or (hi is not None and v > hi)
                key = (metric, tname)
                if outside and not self._outside.get(key):
                    mech = MECHANISM_OF.get(metric) or s.dominant
                    out.append(Alert(step, metric, tname, v, lo, hi, mech))
                self._outside[key] = outside
        return out

    # ---- outputs beside the log ----

    def _tensorboard(self, rec):
        w = self.writer
        if w is None:
            return
        for k, v in rec["metrics"].items():
            if v is not None:
                w.add_scalar("gradprec/%s" % k, v, rec["step"])
        for t in rec["tensors"]:
            for k, v in t["metrics"].items():
                if v is not None:
                    w.add_scalar("gradprec/%s/%s" % (k, t["name"]), v, rec["step"])
        if rec["loss_scale"] is not None:
            w.add_scalar("gradprec/loss_scale", rec["loss_scale"], rec["step"])
        w.add_scalar("gradprec/alerts", len(rec["alerts"]), rec["step"])

    def _tty(self):
        if self.status is not None:
            return bool(self.status)
        try:
            return sys.stderr.isatty()
        except (AttributeError, ValueError):
            return False

    def _status_line(self, rec):
        if not self._tty():
            return
        m = rec["metrics"]

        def f(k):
            v = m.get(k)
            return "-" if v is None else "%.3g" % v
        line = ("gradprec step %d: %s (%s) stale %s underflow %s absorbed %s norm %s alerts %d"
                % (rec["step"], rec["verdict"], rec["dominant_mechanism"], f("stale_update_frac"),
                   f("underflow_frac"), f("absorbed_frac"), f("grad_norm_ratio"), len(self.alerts) +
                   len(rec["alerts"])))
        sys.stderr.write("\r\033[K" + line[:200])
        sys.stderr.flush()


def monitor(model: Any, optimizer: Any = None, scaler: Any = None, every: int = 1, sample: Optional[int] = None,
            out: str = "gradprec-monitor", reduction: str = "mean", accumulation_steps: Optional[int] = None,
            thresholds: Optional[Dict[str, Any]] = None, on_alert: str = "warn", writer: Any = None,
            **kw: Any) -> Monitor:
    """A context manager that judges every `every`-th optimizer step of a training loop
    against gradprec's exact references while it trains (docs/monitor.md).

    Used as capture is: `with mon.microbatch(tokens=n):` around each micro-batch's
    backward; reduction, accumulation_steps, optimizer, scaler, sample, params, master,
    seed mean what they mean for gradprec.torch.capture (the same checks and refusals).
    Each monitored step is fed to a streaming session of the C library (gradprec.Stream:
    no dump) and judged when it closes; one JSON line per monitored step is appended to
    `out`/monitor.jsonl (format gradprec-monitor/1).

    thresholds: {metric: max or {min, max}} as a scenario's `thresholds:`; they replace
      the runner's defaults per metric, and grad_norm_ratio defaults to {min: 0.5, max: 2}.
      The scenario's verdict uses them; each (metric, tensor) that leaves the bounds the
      runner applied (these and its defaults) is one Alert (again only after it came
      back inside).
    on_alert: 'warn' (warnings.warn a MonitorWarning), 'raise' (MonitorAlert, after the
      record is written) or a callable f(alert).
    writer: a torch.utils.tensorboard.SummaryWriter: each record's metrics as scalars
      gradprec/METRIC and gradprec/METRIC/TENSOR at the step.
    status: True/False forces the one-line status on stderr (default: only on a TTY).
    background: True (the default) closes each monitored step on a thread of its own while
      training goes on (the feeds stay in the step: they copy what the step computed); the
      record, the scalars and the alerts of step S then come when the next monitored step
      closes, at flush(), or on leaving the block. The same records, one monitored step
      later, on one runner thread beside training. False closes the step inside its
      optimizer.step(), on torch's thread count: each record and alert at once
      (docs/monitor.md, "Cost")."""
    return Monitor(model, optimizer=optimizer, scaler=scaler, every=every, sample=sample, out=out,
                   reduction=reduction, accumulation_steps=accumulation_steps, thresholds=thresholds,
                   on_alert=on_alert, writer=writer, **kw)
