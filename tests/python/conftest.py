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


# The slowest cases (seconds of CPU on the 2-core AMD EPYC, docs/testing.md, "Time"): `make
# test` leaves them out (pytest -m "not full"), `make test-full` (CI) runs them. Each left
# out case has a sibling that stays: the same check on another preset or optimizer, or the
# same preset in another test (test_cli_torch_adamw_equals_cpu_fp32 runs adamw-large-decay).
FULL_ONLY = [
    "test_backends.py::test_cli_torch_adamw_equals_cpu_fp32_zen4[adamw-large-decay-over1]",
    "test_backends.py::test_cli_torch_adamw_equals_cpu_fp32_zen4[bf16-weights-cosine-master-over2]",
    "test_backends.py::test_cli_torch_adamw_equals_cpu_fp32_host[adam-state-fp32-tiny-grads-over0]",
    "test_backends.py::test_cli_torch_adamw_equals_cpu_fp32_host[adamw-large-decay-over1]",
    "test_backends.py::test_default_suite_correct_optimizers_pass[AdamWForeach]",
    "test_backends.py::test_default_suite_correct_optimizers_pass[AdamWFused]",
    "test_lowbit.py::test_cli_subject_names_the_model_it_matched[TorchaoAdamW8bit-torchao_8bit-torchao_8bit]",
    "test_capture_sampled.py::test_capture_memory_does_not_grow_with_microbatches",
]


def pytest_configure(config):
    config.addinivalue_line("markers", "full: only in make test-full (conftest.FULL_ONLY)")


def pytest_collection_modifyitems(config, items):
    """Marks the FULL_ONLY cases `full`; a listed case of a collected file that no longer
    exists stops the run, naming it (a renamed test must be renamed here too)."""
    ids = {os.path.basename(i.fspath) + "::" + i.name: i for i in items}
    files = {os.path.basename(i.fspath) for i in items}
    gone = [n for n in FULL_ONLY if n.split("::")[0] in files and n not in ids]
    if gone:
        raise pytest.UsageError("conftest.FULL_ONLY names no collected test: " + ", ".join(gone))
    for n in FULL_ONLY:
        if n in ids:
            ids[n].add_marker(pytest.mark.full)
