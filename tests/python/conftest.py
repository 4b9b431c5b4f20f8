# Shared fixtures of the Python tests (run by `make test` with .venv's pytest): the
# repository, the gradprec command, and whether the loaded libgradprec replays tensors.
import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(os.environ.get("GP_BUILD", os.path.join(REPO, "build")), "gradprec")


def _replay_missing():
    """None when the library knows `grad: {replay: ...}`; else gradprec's refusal."""
    import gradprec

    try:
        gradprec.run("tensors:\n  - name: a\n    grad: {replay: absent.safetensors, key: a}\n")
    except gradprec.GradprecError as e:
        if "unknown key 'replay'" in e.line:
            return e.line
    return None


@pytest.fixture(scope="session")
def replay():
    """Skips a test when the loaded libgradprec predates tensor replay (issue 11 item 2),
    naming the refusal; everything else about such a test still has to hold."""
    why = _replay_missing()
    if why:
        pytest.skip("libgradprec has no tensor replay yet: " + why)


@pytest.fixture(scope="session")
def cli():
    if not os.access(CLI, os.X_OK):
        pytest.fail("%s not built" % CLI)
    return CLI


def run_cli(*args, cwd=None):
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True)
