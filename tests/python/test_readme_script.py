# The README's "Use it on your own model" script, exactly as printed: it captures 8
# micro-batches, and `gradprec run` on the YAML it writes reports on those gradients
# (the report's tensors are the model's parameters and its normalization error is the
# one the captured entries imply, computed here independently).
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

from conftest import REPO, run_cli


def readme_blocks():
    text = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    sec = text.split("## Use it on your own model", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", sec, re.S), re.findall(r"```sh\n(.*?)```", sec, re.S)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """A fresh folder in which the README's Python block, as printed, has run."""
    py, _ = readme_blocks()
    assert len(py) == 1
    tmp_path = tmp_path_factory.mktemp("readme")
    p = subprocess.run([sys.executable, "-c", py[0]], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return tmp_path


def test_readme_script_is_ten_lines_and_captures(ran):
    py, _ = readme_blocks()
    assert len(py[0].strip().splitlines()) == 10
    tmp_path = ran
    d = load_file(str(tmp_path / "dump" / "grads.safetensors"))
    assert len([k for k in d if k.startswith("1.weight/step0/")]) == 8
    man = json.loads((tmp_path / "dump" / "capture.json").read_text())
    assert man["tokens"] == [[4 * (15 + 8 * k) for k in range(8)]]


def test_readme_replay_reports_on_those_gradients(ran, replay, cli):
    _, sh = readme_blocks()
    tmp_path = ran
    cmd = [line for line in sh[-1].splitlines() if line.startswith("build/gradprec run")]
    assert cmd == ["build/gradprec run dump/scenario.yaml --out dump/report"]
    r = run_cli(*cmd[0].split()[1:], cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr  # 1: the scenario fails its thresholds (a finding)
    rep = json.loads((tmp_path / "dump" / "report" / "report.json").read_text())
    sc = rep["scenarios"][0]
    assert sc["verdict"] == "fail" and sc["dominant_mechanism"] == "normalization"
    # reduction mean: entry e_k = token mean_k / 8, full-batch mean = sum_k (8 n_k / N) e_k
    d = {k: v.astype(np.float64) for k, v in load_file(str(tmp_path / "dump" / "grads.safetensors")).items()}
    n = [4 * (15 + 8 * k) for k in range(8)]
    N = sum(n)
    num = den = 0.0
    for name in ("0.weight", "1.weight", "1.bias"):
        e = [d["%s/step0/mb%d" % (name, k)].ravel() for k in range(8)]
        same, full = np.sum(e, axis=0), np.sum([8 * n[k] / N * e[k] for k in range(8)], axis=0)
        num += float(np.dot(same - full, same - full))
        den += float(np.dot(full, full))
    want = math.sqrt(num) / math.sqrt(den)
    # binary64 evaluations on both sides (test_real_model.py: SLACK_REL, SLACK_ABS)
    assert abs(sc["metrics"]["normalization_rel_err"] - want) <= want * 2.0**-30 + 2.0**-40
