# The package is typed (issue 28 item 6): py.typed ships (PEP 561), and the public API's
# hints resolve (typing.get_type_hints evaluates every annotation).
import os
import typing

import gradprec


def test_py_typed_marker_and_hints_resolve():
    assert os.path.isfile(os.path.join(os.path.dirname(gradprec.__file__), "py.typed"))
    for f in (gradprec.run, gradprec.scenario_yaml, gradprec.sample_indices, gradprec.library_version,
              gradprec.RunResult.__init__, gradprec.ScenarioResult.tensor):
        hints = typing.get_type_hints(f)
        assert "return" in hints, f.__name__
    assert typing.get_type_hints(gradprec.run)["return"] is gradprec.RunResult


def test_torch_api_hints_resolve():
    import pytest

    pytest.importorskip("torch")
    import gradprec.torch as gt
    from gradprec.torch import host

    for f in (gt.capture, gt.monitor, gt.Capture.step, gt.Capture.scenario, host.sqrt_evaluation):
        assert "return" in typing.get_type_hints(f), f.__name__
