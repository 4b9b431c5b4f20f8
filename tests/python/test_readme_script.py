# The README's "Use it on your own model" script, exactly as printed: it trains a bf16
# model 5 steps, then captures 3 steps of uneven micro-batches (the last step partial),
# and `gradprec run` on the YAML it writes reproduces torch's weights, m and v after each
# step (twin_mismatch_count 0) and reports torch's own stale-update fraction (counted
# here from the dump's entries: the capture stores torch's values, test_twin.py checks
# that against torch itself) and the normalization error the captured entries imply,
# both as the README prints them.
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from conftest import REPO, run_cli

LAYOUT = [[16, 200, 8, 64], [90, 3, 40, 12], [128, 7]]  # the README's captured steps
NAMES = ("0.weight", "1.weight", "1.bias")


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


def test_readme_script_is_short_and_captures(ran):
    py, _ = readme_blocks()
    assert len(py[0].strip().splitlines()) <= 14
    tmp_path = ran
    d = load_file(str(tmp_path / "dump" / "grads.safetensors"))
    for s, lengths in enumerate(LAYOUT):
        assert len([k for k in d if k.startswith("1.weight/step%d/mb" % s)]) == len(lengths)
        assert d["1.weight/step%d/param" % s].dtype == torch.bfloat16
    assert d["1.weight/state/exp_avg"].dtype == torch.bfloat16
    man = json.loads((tmp_path / "dump" / "capture.json").read_text())
    assert man["tokens"] == [[4 * n for n in lengths] for lengths in LAYOUT]
    assert man["optimizer"]["state_step_at_entry"] == [5, 5, 5]


def _readme_says(metric):
    text = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    sec = text.split("## Use it on your own model", 1)[1].split("\n## ", 1)[0]
    return re.search(r"`%s` ([0-9.]+)" % metric, sec).group(1)


def test_readme_replay_is_torchs_twin(ran, replay, cli):
    _, sh = readme_blocks()
    tmp_path = ran
    cmd = [line for line in sh[-1].splitlines() if line.startswith("build/gradprec run")]
    assert cmd == ["build/gradprec run dump/scenario.yaml --out dump/report"]
    r = run_cli(*cmd[0].split()[1:], cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr  # 1: the scenario fails its thresholds (a finding)
    rep = json.loads((tmp_path / "dump" / "report" / "report.json").read_text())
    sc = rep["scenarios"][0]
    assert sc["metrics"]["twin_mismatch_count"] == 0, sc["notes"][:1]
    assert sc["verdict"] == "fail" and sc["dominant_mechanism"] == "stale update"
    d = load_file(str(tmp_path / "dump" / "grads.safetensors"))
    # torch's stale fraction (docs/scenarios.md, model.md): updates whose exact value is
    # non-zero (AdamW's lr 1e-3, weight decay 0.01: the decay moves every non-zero weight;
    # else the exact m_t = 0.9 m + 0.1 g) but that left the bf16 weight unchanged. g is
    # torch's .grad: the step's entries added in order in bf16, as AccumulateGrad does.
    nonzero = stale = 0
    for s, lengths in enumerate(LAYOUT):
        for n in NAMES:
            before = "%s/state/" % n if s == 0 else "%s/step%d/" % (n, s - 1)
            w0 = d[n + "/weight"] if s == 0 else d[before + "param"]
            g = d["%s/step%d/mb0" % (n, s)].clone()
            for k in range(1, len(lengths)):
                g += d["%s/step%d/mb%d" % (n, s, k)]
            m = 0.9 * d[before + "exp_avg"].double() + 0.1 * g.double()
            nz = torch.isfinite(w0) & ((m != 0) | (w0 != 0))
            nonzero += int(nz.sum())
            stale += int((nz & torch.eq(d["%s/step%d/param" % (n, s)], w0)).sum())
    assert sc["metrics"]["stale_update_frac"] == stale / nonzero
    assert "%.3f" % (stale / nonzero) == _readme_says("stale_update_frac")
    # reduction mean: entry e_k = token mean_k / 4; step s's full-batch mean is
    # sum_k (4 n_k / N_s) e_k; over the steps, the sums of squares add up
    num = den = 0.0
    for s, lengths in enumerate(LAYOUT):
        n = [4 * L for L in lengths]
        N = sum(n)
        for name in NAMES:
            e = [d["%s/step%d/mb%d" % (name, s, k)].double().numpy().ravel() for k in range(len(n))]
            same, full = np.sum(e, axis=0), np.sum([4 * n[k] / N * e[k] for k in range(len(n))], axis=0)
            num += float(np.dot(same - full, same - full))
            den += float(np.dot(full, full))
    want = math.sqrt(num) / math.sqrt(den)
    # binary64 evaluations on both sides (test_real_model.py: SLACK_REL, SLACK_ABS)
    assert abs(sc["metrics"]["normalization_rel_err"] - want) <= want * 2.0**-30 + 2.0**-40
    assert "%.3g" % want == _readme_says("normalization_rel_err")
