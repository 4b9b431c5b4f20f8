# The ctypes bindings (python/gradprec): results as Python objects equal what the
# `gradprec` command writes for the same scenario, errors carry gradprec's line and
# status, the library is found by the documented search order.
import json
import math
import os
import subprocess
import sys

import pytest

import gradprec
from conftest import REPO, run_cli

ABSORB = """name: absorb
tensors:
  - name: w
    size: 1
    grad: {values: [[1.0], [0.001953125], [0.001953125]]}
batch: {tokens: [1, 1, 1]}
reduction: sum
fullbatch: sum
precision: {grad: fp32, accumulator: bf16}
"""


def test_hand_case_absorption():
    # 1 + 2^-9 + 2^-9 accumulated in bf16 (8 significant bits, ulp(1) = 2^-7): 1 + 2^-9 is
    # a quarter ulp above 1 and rounds back to 1, twice: both small addends absorbed. The
    # exact sum is 1 + 2^-8, stored 1: relative error 2^-8 / (1 + 2^-8) = 1/257.
    res = gradprec.run(ABSORB)
    sc = res["absorb"]
    assert sc.verdict == "fail" and sc.dominant == "absorption"
    assert sc.metrics["grad_rel_err_rounding"] == pytest.approx(1 / 257, rel=1e-12)
    assert sc.metrics["absorbed_frac"] == 2 / 3  # 3 non-zero addends, the first lands on 0
    assert sc.metrics["normalization_rel_err"] == 0
    assert [t.name for t in sc.tensors] == ["w"]
    assert sc.tensor("w").metrics["absorbed_frac"] == 2 / 3
    assert not res.passed and res.failed == 1


def test_same_report_as_the_command(tmp_path, cli):
    f = tmp_path / "absorb.yaml"
    f.write_text(ABSORB)
    out = tmp_path / "cli"
    p = run_cli("run", str(f), "--out", str(out), "--quiet")
    assert p.returncode == 1, p.stderr  # the scenario fails its thresholds
    res = gradprec.run(f, out_dir=tmp_path / "py")
    cli_json = (out / "report.json").read_text()
    assert res.json == cli_json
    assert (tmp_path / "py" / "report.json").read_text() == cli_json
    for name in ("report.md", "report.xml", "report.html", "timing.json"):
        assert (tmp_path / "py" / name).is_file()
    # metrics through the accessors equal report.json's numbers
    entry = json.loads(cli_json)["scenarios"][0]
    for k, v in entry["metrics"].items():
        got = res[0].metrics[k]
        if isinstance(v, str):  # NaN/inf are strings in report.json
            assert str(got).lower().startswith(v.lower()[:3]) or (math.isnan(got) and "nan" in v.lower())
        else:
            assert got == v, k


def test_dict_and_text_and_seed():
    doc = {"name": "d", "tensors": [{"name": "a", "size": 256}], "precision": {"grad": "bf16", "accumulator": "bf16"}}
    a = gradprec.run(doc)
    b = gradprec.run(gradprec.scenario_yaml(doc))
    assert a.json == b.json
    c = gradprec.run(doc, seed=12345)
    assert c[0].metrics["grad_rel_err_rounding"] != a[0].metrics["grad_rel_err_rounding"]
    assert c[0].report["config"]["seed"] == 12345


def test_bad_input_carries_the_line(tmp_path):
    with pytest.raises(gradprec.BadInputError) as ei:
        gradprec.run("precision: {grad: bf17}\n")
    assert ei.value.status == 2
    assert ei.value.line.startswith("scenario:1:19: unknown precision.grad format 'bf17'")
    assert isinstance(ei.value, ValueError)
    with pytest.raises(gradprec.BadInputError) as ei:
        gradprec.run(tmp_path / "missing.yaml")
    assert "missing.yaml" in ei.value.line
    with pytest.raises(gradprec.BadInputError) as ei:
        gradprec.run({"steps": 1}, backend="plugin:" + str(tmp_path / "nope.so"))
    assert "nope.so" in ei.value.line
    with pytest.raises(gradprec.BadInputError):
        gradprec.run({"steps": 1}, seed=-1)
    with pytest.raises(ValueError):
        gradprec.run({"clip": {"max_norm": float("nan")}})  # refused before gradprec sees it
    out = tmp_path / "never"
    with pytest.raises(gradprec.BadInputError):
        gradprec.run("steps: 0\n", out_dir=out)
    assert not out.exists()


def test_library_search_order(tmp_path):
    env = dict(os.environ, GRADPREC_LIB=str(tmp_path / "libnothere.so"))
    code = "import gradprec\ntry:\n    gradprec.run('steps: 1')\nexcept gradprec.InternalError as e:\n    print(e.status, e.line)\n"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("3 libgradprec.so not found") and "libnothere.so (GRADPREC_LIB" in p.stdout
    # without GRADPREC_LIB: the build/ folder of the checkout the package was installed from
    env.pop("GRADPREC_LIB")
    built = os.path.join(REPO, "build", "libgradprec.so")
    code = "import gradprec\nprint(gradprec.library_path())\n"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if os.path.isfile(built):
        assert p.returncode == 0, p.stderr
        assert os.path.realpath(p.stdout.strip()) == os.path.realpath(built)
    else:
        assert built + " (checkout: not found)" in p.stderr


def test_tensor_metric_finite_where_the_scenario_is_undefined(tmp_path):
    # Two replayed tensors, sum reduction, one micro-batch of 1 token: tensor a's entry
    # holds an inf, so every metric against its exact gradient is NaN and the scenario's
    # pooled normalization_rel_err is NaN (left out of report.json's scenario metrics);
    # tensor b is finite and its normalization_rel_err is exactly 0 (sum reduction, one
    # micro-batch: the accumulated gradient is the full-batch one). The bindings must
    # still give b's value.
    np = pytest.importorskip("numpy")
    st = pytest.importorskip("safetensors.numpy")
    st.save_file({"a/step0/mb0": np.array([1.0, np.inf], dtype=np.float32),
                  "b/step0/mb0": np.array([0.5, 0.25], dtype=np.float32)}, str(tmp_path / "d.safetensors"))
    (tmp_path / "s.yaml").write_text(
        "name: s\ntensors:\n  - name: a\n    grad: {replay: d.safetensors, key: a}\n"
        "  - name: b\n    grad: {replay: d.safetensors, key: b}\n"
        "batch: {microbatches: 1, tokens: 1}\nreduction: sum\nfullbatch: sum\n")
    sc = gradprec.run(tmp_path / "s.yaml")[0]
    assert "normalization_rel_err" not in sc.report["metrics"]
    assert math.isnan(sc.metrics.get("normalization_rel_err", float("nan")))
    assert sc.tensor("b").metrics["normalization_rel_err"] == 0.0


def test_stream_session():
    """gradprec.Stream over gradprec_stream_*: the sampled elements are
    gradprec.sample_indices' (the public call), a whole tensor fed is gathered to the same
    elements as a gathered feed (identical reports), fp32 integer gradients summed
    (reduction and full batch `sum`) accumulate exactly (error 0: every partial sum of
    small integers is exact in fp32), and a call
    out of order is refused with the library's one line (BadInputError), the session
    going on."""
    import ctypes

    sk = {"name": "s", "seed": 5, "tensors": [{"name": "a", "size": 100, "sample": 10}, {"name": "b", "size": 4}],
          "precision": {"grad": "fp32", "accumulator": "fp32"}, "reduction": "sum", "fullbatch": "sum"}
    st = gradprec.Stream(sk)
    assert st.names == ["a", "b"] and st.sizes == [100, 4] and st.fed == [10, 4]
    idx = st.indices(0)
    assert idx == list(gradprec.sample_indices(5, 0, 100, 10)) and st.indices(1) is None
    whole = (ctypes.c_float * 100)(*range(100))
    gathered = (ctypes.c_float * 10)(*[float(i) for i in idx])
    b = (ctypes.c_float * 4)(1, 2, 3, 4)
    reports = []
    for feed in (whole, gathered):
        for k in range(2):
            st.grad(0, "fp32", ctypes.addressof(feed), len(feed))
            st.grad(1, "fp32", ctypes.addressof(b), 4)
            st.tokens(3 + k)
        r = st.close()
        assert r[0].metrics["grad_rel_err_fullbatch"] == 0.0
        reports.append(json.loads(r.json)["scenarios"][0]["metrics"])
    assert reports[0] == reports[1]
    with pytest.raises(gradprec.BadInputError, match="^stream: tokens: no gradient"):
        st.tokens(3)
    with pytest.raises(gradprec.BadInputError, match="9 elements"):
        st.grad(0, "fp32", ctypes.addressof(gathered), 9)
    st.free()
