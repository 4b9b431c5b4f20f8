# The Python package against the C library it binds (issue 28 item 2):
# - every ctypes Structure of python/gradprec/_plugin.py has C's size and each field C's
#   offset (tests/gp_abi_layout.c prints them from offsetof/sizeof), and the same fields;
# - the names of the ABI's values come from the library (gradprec_vocab_name), and each
#   format's storage width is torch's (an independent source) where torch has the dtype;
# - the metric and mechanism names the monitor keeps (gradprec.torch._monitor) are the
#   library's (harness/scenario/gp_metrics.h), so a renamed metric fails here.
import ctypes
import os
import subprocess

import pytest

from conftest import REPO

import gradprec._lib as gl
import gradprec._plugin as gpp

LAYOUT = os.path.join(os.environ.get("GP_BUILD", os.path.join(REPO, "build")), "tests", "gp_abi_layout")
MIRRORS = {"gp_plugin_accumulate_args": gpp.AccumulateArgs, "gp_plugin_unscale_args": gpp.UnscaleArgs,
           "gp_plugin_adamw_args": gpp.AdamwArgs, "gp_plugin_sumsq_args": gpp.SumsqArgs,
           "gp_plugin_scale_args": gpp.ScaleArgs, "gp_plugin_scaler_args": gpp.ScalerArgs, "gp_plugin": gpp.Table}


def c_layouts():
    if not os.access(LAYOUT, os.X_OK):
        pytest.fail("%s not built (make test-python builds it: target gp_abi_layout)" % LAYOUT)
    out = subprocess.run([LAYOUT], check=True, capture_output=True, text=True).stdout
    layouts = {}
    for line in out.splitlines():
        struct, field, value = line.split()
        entry = layouts.setdefault(struct, {"size": None, "fields": {}})
        if field == "size":
            entry["size"] = int(value)
        else:
            entry["fields"][field] = int(value)
    return layouts


def test_ctypes_structs_match_c_offsetof():
    layouts = c_layouts()
    assert set(layouts) == set(MIRRORS), "a struct printed by gp_abi_layout has no ctypes mirror, or the reverse"
    compared = 0
    for name, cls in MIRRORS.items():
        c = layouts[name]
        assert ctypes.sizeof(cls) == c["size"], "%s: ctypes size %d, C %d" % (name, ctypes.sizeof(cls), c["size"])
        py_fields = [f[0] for f in cls._fields_]
        assert py_fields == sorted(c["fields"], key=c["fields"].get), "%s: fields or their order differ" % name
        for field, off in c["fields"].items():
            assert getattr(cls, field).offset == off, "%s.%s: ctypes offset %d, C %d" % (
                name, field, getattr(cls, field).offset, off)
            compared += 1
    assert compared == 79  # the fields gp_abi_layout prints: every one compared


def test_names_come_from_the_library():
    assert gpp.FORMATS == gl.vocab("format")
    assert gpp.ROUNDINGS == gl.vocab("acc_rounding")
    assert gpp.VARIANTS == gl.vocab("adamw_variant")
    assert gpp.EVALUATIONS == gl.vocab("adamw_evaluation")
    assert gpp.STATES == gl.vocab("state")
    # spot values fixed by the plugin ABI (kernels/gp_plugin_abi.h): GP_PLUGIN_BF16 = 1,
    # GP_PLUGIN_KAHAN = 3, GP_PLUGIN_ADAMW_MASTER = 2, GP_PLUGIN_EVAL_TORCH_CPU_FOREACH = 7,
    # GP_PLUGIN_STATE_PLAIN = 0, GP_PLUGIN_STATE_TORCHAO_4BIT = 3
    assert gpp.FORMATS[1] == "bf16" and gpp.ROUNDINGS[3] == "kahan"
    assert gpp.STATES[0] == "plain" and gpp.STATES[3] == "torchao_4bit"
    assert gpp.VARIANTS[2] == "master" and gpp.EVALUATIONS[7] == "torch_cpu_foreach"
    assert gl.lib().gradprec_vocab_name(b"no_such_kind", 0) is None
    assert gl.lib().gradprec_vocab_name(b"format", len(gpp.FORMATS)) is None


def test_metric_and_mechanism_names_are_the_librarys():
    metrics, mechs = gl.vocab("metric"), gl.vocab("mechanism")
    # spot values fixed by report.json's order and the verdict's precedence (docs/scenarios.md)
    assert metrics[0] == "grad_rel_err_fullbatch" and metrics[6] == "overflow_count"
    assert mechs[0] == "normalization" and mechs[8] == "stale update"
    assert len(set(metrics)) == len(metrics) and len(set(mechs)) == len(mechs)
    assert gl.lib().gradprec_vocab_name(b"metric", len(metrics)) is None
    assert gl.lib().gradprec_vocab_name(b"mechanism", -1) is None
    from gradprec.torch import _monitor as mon
    named = set(mon.RECORDED) | set(mon.OPTIMIZER_METRICS) | set(mon.MECHANISM_OF) | set(mon.DEFAULT_THRESHOLDS)
    named.discard("update_formula_steps")  # a count of report.json's, not a metric
    assert named - set(metrics) == set()
    assert set(mon.MECHANISM_OF.values()) - set(mechs) == set()


def test_format_widths_are_torchs():
    torch = pytest.importorskip("torch")
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
              "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
    checked = 0
    for i, name in enumerate(gl.vocab("format")):
        if name in dtypes:
            assert gl.format_bytes(i) == dtypes[name].itemsize, name
            checked += 1
    assert checked == 5
