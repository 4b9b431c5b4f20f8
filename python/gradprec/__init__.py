"""gradprec from Python: run scenarios through libgradprec.so (ctypes over the C API of
include/gradprec.h) and get verdicts, metrics and per-tensor metrics as Python objects.
Nothing numeric happens here: every number comes from the C library.
`gradprec.torch` (imported separately) captures a PyTorch model's gradients for replay.

    import gradprec
    res = gradprec.run("dump/scenario.yaml", out_dir="gradprec-out")
    print(res.scenarios[0].verdict, res.scenarios[0].metrics["normalization_rel_err"])
"""
from __future__ import annotations

import ctypes
import json
import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

from . import _lib, _yaml
from ._errors import BadInputError, GradprecError, InternalError

__all__ = [
    "run",
    "RunResult",
    "ScenarioResult",
    "TensorResult",
    "GradprecError",
    "BadInputError",
    "InternalError",
    "library_version",
    "library_path",
    "scenario_yaml",
    "sample_indices",
    "Stream",
]
__version__ = "0.1.0"

_ERRLEN = 1024


def library_version() -> str:
    """The loaded libgradprec's version string ("MAJOR.MINOR.PATCH")."""
    return _lib.lib().gradprec_version().decode()


def library_path() -> str:
    """The path libgradprec.so was loaded from (see gradprec._lib for the search order)."""
    return _lib.path()


def scenario_yaml(doc: Mapping[str, Any]) -> str:
    """The YAML text gradprec reads for a scenario given as a dict (keys as in
    docs/scenarios.md)."""
    return _yaml.dump(doc)


def sample_indices(seed: int, tensor: int, population: int, n: int) -> "ctypes.Array[ctypes.c_uint64]":
    """The n elements (distinct, increasing, each < population) that `sample: n` on the
    scenario's tensor number `tensor` (0-based) with seed `seed` replays: the C runner's
    own choice (gradprec_sample_indices), returned as a ctypes array of uint64 (a
    buffer: torch.frombuffer / numpy.frombuffer read it without copying)."""
    err = ctypes.create_string_buffer(_ERRLEN)
    idx = (ctypes.c_uint64 * max(int(n), 1))()
    rc = _lib.lib().gradprec_sample_indices(int(seed), int(tensor), int(population), int(n), idx, err, _ERRLEN)
    if rc != 0:
        raise GradprecError(rc, _err(err) or "gradprec_sample_indices failed (status %d)" % rc)
    return idx


class TensorResult:
    """One tensor of one scenario: its name and its metrics (dict name -> float)."""

    def __init__(self, name: str, metrics: Dict[str, float]) -> None:
        self.name: str = name
        self.metrics: Dict[str, float] = metrics

    def __repr__(self):
        return "TensorResult(%r)" % self.name


class ScenarioResult:
    """One scenario's outcome: name, verdict ("pass"/"warn"/"fail"), dominant mechanism,
    metrics (dict metric name -> float; NaN where a metric does not apply), tensors (list
    of TensorResult), and `report`, its entry of report.json as a dict (configuration,
    sampling estimates, notes...)."""

    def __init__(self, name: str, verdict: str, dominant: str, metrics: Dict[str, float],
                 tensors: List[TensorResult], report: Dict[str, Any]) -> None:
        self.name: str = name
        self.verdict: str = verdict
        self.dominant: str = dominant
        self.metrics: Dict[str, float] = metrics
        self.tensors: List[TensorResult] = tensors
        self.report: Dict[str, Any] = report

    @property
    def passed(self) -> bool:
        return self.verdict != "fail"

    def tensor(self, name: str) -> TensorResult:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def __repr__(self):
        return "ScenarioResult(%r, %r, dominant=%r)" % (self.name, self.verdict, self.dominant)


class RunResult:
    """A run's results: `scenarios` (list of ScenarioResult), `failed` (how many failed
    their thresholds), `json` (report.json's exact text), `report` (that text parsed),
    `out_dir` (where the report files were written, or None)."""

    def __init__(self, scenarios: List[ScenarioResult], failed: int, json_text: str, out_dir: Optional[str]) -> None:
        self.scenarios: List[ScenarioResult] = scenarios
        self.failed: int = failed
        self.json: str = json_text
        self.report: Dict[str, Any] = json.loads(json_text)
        self.out_dir: Optional[str] = out_dir

    @property
    def passed(self) -> bool:
        return self.failed == 0

    def __getitem__(self, key: Union[int, str]) -> ScenarioResult:
        if isinstance(key, str):
            for s in self.scenarios:
                if s.name == key:
                    return s
            raise KeyError(key)
        return self.scenarios[key]

    def __len__(self) -> int:
        return len(self.scenarios)

    def __iter__(self) -> Iterator[ScenarioResult]:
        return iter(self.scenarios)

    def __repr__(self):
        return "RunResult(%d scenarios, %d failed)" % (len(self.scenarios), self.failed)


def _err(buf):
    return buf.value.decode("utf-8", "replace")


def _load(lib, scenario, err):
    """Returns a set handle. A dict is written as YAML; an os.PathLike, or a str naming an
    existing file or ending in .yaml/.yml, is a file; any other str is YAML text."""
    if isinstance(scenario, dict):
        text = _yaml.dump(scenario).encode()
        return lib.gradprec_load_yaml(text, len(text), b"scenario", err, _ERRLEN)
    if isinstance(scenario, bytes):
        scenario = scenario.decode()
    if isinstance(scenario, os.PathLike) or (
        isinstance(scenario, str)
        and "\n" not in scenario
        and (os.path.exists(scenario) or scenario.endswith((".yaml", ".yml")))
    ):
        return lib.gradprec_load_file(os.fsencode(os.fspath(scenario)), err, _ERRLEN)
    if isinstance(scenario, str):
        text = scenario.encode()
        return lib.gradprec_load_yaml(text, len(text), b"scenario", err, _ERRLEN)
    raise TypeError("scenario: a path, YAML text or a dict, not %s" % type(scenario).__name__)


def _metric_names(entry):
    m = entry.get("metrics") if isinstance(entry, dict) else None
    return list(m.keys()) if isinstance(m, dict) else []


def _report_entries(report):
    s = report.get("scenarios") if isinstance(report, dict) else None
    return s if isinstance(s, list) else []


def _result(lib, r, out_dir, err):
    """A RunResult from the result handle r (not freed here); with out_dir, the reports
    written there."""
    text = lib.gradprec_result_json(r).decode()
    report = json.loads(text)
    entries = _report_entries(report)
    scenarios = []
    for i in range(lib.gradprec_result_count(r)):
        entry = entries[i] if i < len(entries) else {}
        names = _metric_names(entry)
        metrics = {m: lib.gradprec_result_metric(r, i, m.encode()) for m in names}
        tensors = []
        tentries = entry.get("tensors") if isinstance(entry.get("tensors"), list) else []
        for t in range(lib.gradprec_result_tensor_count(r, i)):
            # a tensor's own defined metrics too: one NaN for the scenario as a whole
            # (left out of its metrics) may be finite for this tensor
            own = _metric_names(tentries[t]) if t < len(tentries) else []
            tnames = names + [m for m in own if m not in names]
            tensors.append(
                TensorResult(
                    lib.gradprec_result_tensor_name(r, i, t).decode(),
                    {m: lib.gradprec_result_tensor_metric(r, i, t, m.encode()) for m in tnames},
                )
            )
        scenarios.append(
            ScenarioResult(
                lib.gradprec_result_name(r, i).decode(),
                lib.gradprec_result_verdict(r, i).decode(),
                lib.gradprec_result_dominant(r, i).decode(),
                metrics,
                tensors,
                entry,
            )
        )
    written = None
    if out_dir is not None:
        rc = lib.gradprec_result_write(r, os.fsencode(os.fspath(out_dir)), err, _ERRLEN)
        if rc != 0:
            raise GradprecError(rc, _err(err) or "reports not written (status %d)" % rc)
        written = os.fspath(out_dir)
    return RunResult(scenarios, lib.gradprec_result_failed(r), text, written)


def run(scenario: Union[str, "os.PathLike[str]", Mapping[str, Any]], backend: Any = "cpu", out_dir: Optional[str] = None,
        seed: Optional[int] = None, jobs: int = 1, compare: Optional[str] = None) -> RunResult:
    """Run a scenario (a path, YAML text, or a dict with the keys of docs/scenarios.md;
    a `sweep:` gives several scenarios) on `backend` ("cpu", "cuda", "auto",
    "plugin:PATH.so", "python:MODULE:NAME", or a Python backend object: one with
    accumulate/unscale/adamw methods, docs/python.md, run in this process), optionally
    compared bit for bit with a second backend `compare` (a name).
    `seed` overrides the scenario's seed (as `gradprec run --seed`); `jobs` scenarios run
    in parallel (results do not depend on it). With out_dir, report.json, report.md,
    report.xml, report.html and timing.json are written there (as `gradprec run --out`).

    Returns a RunResult. Raises BadInputError (status 2: a bad scenario, replay dump or
    backend, a configuration the backend refused; nothing written) or InternalError
    (status 3; for a backend object whose method raised, the line names the entry and the
    exception), carrying gradprec's line."""
    lib = _lib.lib()
    table, pb = None, None
    if backend is not None and not isinstance(backend, str):
        from . import _plugin

        pb = _plugin.PythonBackend(backend)
        table, backend = ctypes.byref(pb.table), None
    err = ctypes.create_string_buffer(_ERRLEN)
    s = _load(lib, scenario, err)
    if not s:
        raise GradprecError(2, _err(err) or "scenario could not be loaded")
    res = ctypes.c_void_p()
    try:
        if seed is not None:
            if not isinstance(seed, int) or not 0 <= seed < 2**64:
                raise BadInputError(2, "seed: an integer in [0, 2^64), not %r" % (seed,))
            lib.gradprec_set_seed(s, seed)
        if not isinstance(jobs, int) or jobs < 1:
            raise BadInputError(2, "jobs: an integer >= 1, not %r" % (jobs,))
        rc = lib.gradprec_run(
            s,
            backend.encode() if backend else None,
            table,
            compare.encode() if compare else None,
            jobs,
            ctypes.byref(res),
            err,
            _ERRLEN,
        )
        if rc != 0:
            if pb is not None and pb.error is not None:
                raise GradprecError(3, pb.error)
            if pb is not None and rc == 2 and pb.refusal is not None:
                raise GradprecError(2, "%s (%s)" % (_err(err), pb.refusal))
            raise GradprecError(rc, _err(err) or "gradprec_run failed (status %d)" % rc)
    finally:
        lib.gradprec_set_free(s)
    try:
        return _result(lib, res, out_dir, err)
    finally:
        lib.gradprec_result_free(res)


from ._stream import Stream  # noqa: E402 (it uses _result above)
