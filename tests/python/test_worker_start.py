# A `python:` backend's worker (issue 27): its start counts against --max-seconds (a module
# hanging in import is stopped then, with a message naming the start, not
# gp_plugin_entry), and what the module prints goes to gradprec's stderr, never its stdout.
import os
import subprocess
import sys
import time

from conftest import CLI, REPO


def env_with(folder):
    e = dict(os.environ)
    e["GP_PYTHON"] = sys.executable
    e["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python"), str(folder)])
    return e


def run(tmp_path, spec, *args):
    t0 = time.monotonic()
    p = subprocess.run([CLI, "run", "--quiet", "--preset", "lora-fp32-accum", "--backend", spec,
                        "--out", str(tmp_path / "out"), *args], capture_output=True, text=True, env=env_with(tmp_path))
    return p, time.monotonic() - t0


def test_hanging_import_stopped_at_max_seconds(tmp_path):
    (tmp_path / "hang_import.py").write_text("import time\ntime.sleep(600)\n")
    p, took = run(tmp_path, "python:hang_import:X", "--max-seconds", "2")
    assert p.returncode == 3, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "python:hang_import:X" in lines[0] and "import hang_import" in lines[0], lines[0]
    assert "time limit of 2 s (--max-seconds)" in lines[0], lines[0]
    assert "gp_plugin_entry" not in lines[0]
    assert p.stdout == ""
    assert took < 12, took  # 2 s and the interpreter's start, not the 60 s default
    assert not (tmp_path / "out").exists()


def test_module_output_is_not_gradprec_stdout(tmp_path):
    (tmp_path / "banner.py").write_text("print('BANNER from the module')\n")
    p, _ = run(tmp_path, "python:banner:X")
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""  # the banner went to stderr, before gradprec's own line
    lines = p.stderr.strip().splitlines()
    assert lines[0] == "BANNER from the module"
    assert lines[-1].startswith("gradprec run: backend python:banner:X: module banner has no attribute X")
    assert not (tmp_path / "out").exists()
