# A Python subject's refusal from the command line (issue 24 item 7): `gradprec run
# --backend python:MODULE:NAME` prints the subject's own reason (its NotImplementedError,
# as gradprec.run does in process), and a refused scenario does not stop the others: it is
# reported as refused in the table, report.json, report.md and JUnit (skipped, with the
# reason); the exit code is the others' (0 here), 2 when every scenario was refused.
# The reason checked is the subject's own text (subjects.OnlyFp32Params), not gradprec's.
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import gradprec
import subjects
from conftest import CLI, REPO

HERE = os.path.dirname(os.path.abspath(__file__))
FP32 = "name: fp32-params\ntensors:\n  - {name: w, size: 64}\n"
BF16 = "name: bf16-params\ntensors:\n  - {name: w, size: 64}\noptimizer: {param: bf16}\n"
WHY = "adamw: only fp32 parameters, not bfloat16"


def env():
    e = dict(os.environ)
    e["GP_PYTHON"] = sys.executable
    e["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python"), HERE] +
                                      ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    return e


def run(tmp_path, texts, out, *args):
    files = []
    for i, t in enumerate(texts):
        f = tmp_path / ("s%d.yaml" % i)
        f.write_text(t)
        files.append(str(f))
    return subprocess.run([CLI, "run", *files, "--out", str(tmp_path / out), "--quiet",
                           "--backend", "python:subjects:OnlyFp32Params", *args],
                          capture_output=True, text=True, env=env())


def test_refused_scenario_reported_others_run(tmp_path):
    p = run(tmp_path, [BF16, FP32], "out")
    assert p.returncode == 0, p.stdout + p.stderr  # fp32-params passes; the refusal does not fail the run
    row = [line for line in p.stdout.splitlines() if "bf16-params" in line]
    assert len(row) == 1 and "refused:" in row[0] and WHY in row[0], p.stdout
    assert "NOT AS EXPECTED" not in p.stdout
    assert "2 scenarios, 0 failed, 1 refused by the backend, 0 not as expected" in p.stdout
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    by = {s["name"]: s for s in rep["scenarios"]}
    assert by["bf16-params"]["verdict"] == "refused" and WHY in by["bf16-params"]["refusal"]
    assert by["fp32-params"]["verdict"] == "pass"  # the other one ran and was judged
    assert rep["summary"]["refused"] == 1 and rep["summary"]["pass"] == 1
    md = (tmp_path / "out" / "report.md").read_text()
    assert "### bf16-params: refused" in md and WHY in md
    html = (tmp_path / "out" / "report.html").read_text()
    assert WHY in html and "bf16-params \u2014 ? grads" not in html  # its reason, no empty chart entry
    suite = ET.parse(tmp_path / "out" / "report.xml").getroot()
    assert suite.get("skipped") == "1" and suite.get("failures") == "0"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    skipped = cases["bf16-params"].find("skipped")
    assert skipped is not None and WHY in skipped.get("message")
    assert cases["fp32-params"].find("skipped") is None
    if shutil.which("xmllint"):  # valid against the schema the JUnit tests use
        x = subprocess.run(["xmllint", "--noout", "--schema", os.path.join(REPO, "tests", "junit.xsd"),
                            str(tmp_path / "out" / "report.xml")], capture_output=True, text=True)
        assert x.returncode == 0, x.stderr
    # the same bytes with two threads
    p2 = run(tmp_path, [BF16, FP32], "out-j2", "-j", "2")
    assert p2.returncode == 0, p2.stderr
    assert (tmp_path / "out-j2" / "report.json").read_bytes() == (tmp_path / "out" / "report.json").read_bytes()
    # the gate takes a refused scenario as absent: against a baseline where it ran (the cpu
    # backend), it fails closed naming it
    b = subprocess.run([CLI, "run", str(tmp_path / "s0.yaml"), str(tmp_path / "s1.yaml"), "--out",
                        str(tmp_path / "base"), "--quiet"], capture_output=True, text=True)
    assert b.returncode in (0, 1), b.stderr  # bf16-params may fail on cpu (stale updates): a baseline all the same
    g = subprocess.run([CLI, "gate", "--baseline", str(tmp_path / "base" / "report.json"),
                        "--current", str(tmp_path / "out" / "report.json")], capture_output=True, text=True)
    assert g.returncode == 1, g.stdout + g.stderr
    assert "MISSING       bf16-params: scenario is in the baseline but not in the current run" in g.stdout


def test_refused_with_expectation_not_met(tmp_path):
    p = run(tmp_path, [BF16 + "expect: {verdict: pass}\n", FP32], "out")
    assert p.returncode == 1, p.stdout + p.stderr  # an `expect:` a refused scenario cannot meet
    assert "NOT AS EXPECTED" in p.stdout


def test_every_scenario_refused(tmp_path):
    p = run(tmp_path, [BF16], "out")
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused every scenario" in lines[0] and WHY in lines[0], p.stderr
    assert json.loads((tmp_path / "out" / "report.json").read_text())["scenarios"][0]["verdict"] == "refused"


def test_in_process_names_the_same_reason():
    # gradprec.run with the object: the same reason, as a BadInputError (status 2)
    try:
        gradprec.run(BF16, backend=subjects.OnlyFp32Params())
    except gradprec.BadInputError as e:
        assert WHY in e.line, e.line
    else:
        raise AssertionError("not refused")
