# report.json against tests/report.schema.json (issue 28 item 3), as report.xml is against
# tests/junit.xsd: the default suite (81 presets, every verdict), a sweep (examples/), a
# --seeds run; and the schema must refuse reports broken on purpose (a wrong verdict, a
# missing summary, a metric that is a list, a count that is negative).
import copy
import json
import os
import subprocess

import pytest

from conftest import REPO

jsonschema = pytest.importorskip("jsonschema")  # scripts/install-python.sh installs it

SCHEMA = json.load(open(os.path.join(REPO, "tests", "report.schema.json")))


def run_report(cli, tmp_path, *args):
    out = tmp_path / "out"
    rc = subprocess.run([cli, "run", "--quiet", *args, "--out", str(out)], capture_output=True).returncode
    assert rc in (0, 1), "gradprec run exited %d" % rc  # 1: scenarios failed (some presets do on purpose)
    return json.load(open(out / "report.json"))


def validate(report):
    jsonschema.Draft202012Validator(SCHEMA).validate(report)


def test_default_suite_report_is_valid(cli, tmp_path):
    r = run_report(cli, tmp_path)
    assert {s["verdict"] for s in r["scenarios"]} == {"pass", "warn", "fail"}
    validate(r)


def test_sweep_and_seeds_reports_are_valid(cli, tmp_path):
    validate(run_report(cli, tmp_path / "a", os.path.join(REPO, "examples", "scenarios", "ga-normalization-sweep.yaml")))
    validate(run_report(cli, tmp_path / "b", "--seeds", "2", "--preset", "lora-bf16-accum"))


def test_schema_refuses_broken_reports(cli, tmp_path):
    r = run_report(cli, tmp_path, "--preset", "lora-bf16-accum")
    validate(r)
    broken = []
    b = copy.deepcopy(r); b["scenarios"][0]["verdict"] = "maybe"; broken.append(b)
    b = copy.deepcopy(r); del b["summary"]; broken.append(b)
    b = copy.deepcopy(r); b["scenarios"][0]["metrics"]["weight_rel_err"] = [1.0]; broken.append(b)
    b = copy.deepcopy(r); b["scenarios"][0]["events"]["underflow"] = -1; broken.append(b)
    b = copy.deepcopy(r); b["schema"] = "gradprec-report/2"; broken.append(b)
    for b in broken:
        with pytest.raises(jsonschema.ValidationError):
            validate(b)
