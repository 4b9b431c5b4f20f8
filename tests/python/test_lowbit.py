# gradprec's low-bit optimizer states (kernels/cpu/gp_lowbit.h: optimizer.state
# bnb8_blockwise, torchao_8bit, torchao_4bit, torchao_fp8) against the libraries they
# model, on the CPU, bit for bit: bitsandbytes (functional.quantize_blockwise /
# dequantize_blockwise, optim.AdamW8bit) and torchao.optim (the quantizers of
# quant_utils.py and subclass_fp8.py, AdamW8bit, AdamW4bit, AdamWFp8). Every expected
# value is the library's; gradprec's side is libgradprec.so's gradprec_lowbit_* functions
# through the package's ctypes binding. Each test prints how many values it compared.
import ctypes
import os

import pytest

from conftest import REPO
from gradprec import _lib

torch = pytest.importorskip("torch")


def _need(module):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        pytest.skip("%s is not installed (scripts/install-python.sh installs it)" % module)


BLOCK = {"bnb8_blockwise": 256, "torchao_8bit": 256, "torchao_4bit": 128, "torchao_fp8": 256}


def gp_quantize(state, sgn, x):
    x = x.float().contiguous()
    n = x.numel()
    codes, scales = torch.empty(n, dtype=torch.uint8), torch.empty(n // BLOCK[state])
    err = ctypes.create_string_buffer(256)
    rc = _lib.lib().gradprec_lowbit_quantize(state.encode(), sgn, n, x.data_ptr(), codes.data_ptr(),
                                             scales.data_ptr(), err, len(err))
    assert rc == 0, err.value.decode()
    return codes, scales


def gp_dequantize(state, sgn, codes, scales):
    codes, scales = codes.contiguous(), scales.contiguous()
    x = torch.empty(codes.numel())
    err = ctypes.create_string_buffer(256)
    rc = _lib.lib().gradprec_lowbit_dequantize(state.encode(), sgn, codes.numel(), codes.data_ptr(),
                                               scales.data_ptr(), x.data_ptr(), err, len(err))
    assert rc == 0, err.value.decode()
    return x


def gp_step(state, pf, evaluation, hyper, t, grad, p, mc, ms, vc, vs):
    """gradprec's model of the library's step on copies: the new (p, m codes, m scales,
    v codes, v scales)."""
    lr, b1, b2, eps, wd = hyper
    p, mc, ms, vc, vs = (x.detach().clone().contiguous() for x in (p, mc, ms, vc, vs))
    g = grad.float().contiguous()
    err = ctypes.create_string_buffer(256)
    rc = _lib.lib().gradprec_lowbit_adamw_step(
        state.encode(), pf.encode(), evaluation.encode(), lr, b1, b2, eps, wd, t, p.numel(), g.data_ptr(),
        p.data_ptr(), mc.data_ptr(), ms.data_ptr(), vc.data_ptr(), vs.data_ptr(), err, len(err))
    assert rc == 0, err.value.decode()
    return p, mc, ms, vc, vs


def _bits(t):
    return t.view({torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.uint8: torch.uint8}[t.dtype])


def inputs(gen, n_blocks, block, sgn):
    """n_blocks * block finite floats that reach every rule: magnitudes over 2^-140 ..
    2^60 (log-normal spread), then per block one of: as drawn; all zero (absmax 0); one
    huge element among tiny ones (the tiny ones fall below the smallest code); subnormal
    elements; exact map values times a power of two (ties of the rounding rules); the
    block's extremes at -absmax and +absmax; one non-zero element; absmax below 2^-128
    among zeros."""
    n = n_blocks * block
    x = torch.randn(n, generator=gen, dtype=torch.float64) * torch.exp(torch.randn(n, generator=gen) * 4)
    x = x.clamp(-2.0**60, 2.0**60).float().view(n_blocks, block)
    kind = torch.randint(0, 8, (n_blocks,), generator=gen)
    x[kind == 1] = 0.0
    huge = kind == 2
    x[huge] *= 1e-9
    x[huge, 0] = 1e6
    sub = kind == 3
    x[sub] = (torch.randn(int(sub.sum()), block, generator=gen) * 2.0**-130).float()
    mid = kind == 4  # values on the 8-bit map's cells and midpoints, scaled by 2^k
    if mid.any():
        m = torch.tensor([float(v) for v in _need("torchao.optim.subclass_8bit").get_qmap_signed()])
        cells = torch.cat([m, (m[1:] + m[:-1]) * 0.5])
        pick = cells[torch.randint(0, cells.numel(), (int(mid.sum()), block), generator=gen)]
        x[mid] = pick * 2.0 ** torch.randint(-20, 20, (int(mid.sum()), 1), generator=gen).float()
    ends = kind == 5
    x[ends, 0], x[ends, 1] = 3.0, -3.0
    one = kind == 6
    x[one] = 0.0
    x[one, 7] = -0.5
    tiny = kind == 7  # absmax below 2^-128 (bitsandbytes' 1/absmax is inf) with zeros
    x[tiny] = 0.0
    x[tiny, :8] = (torch.randn(int(tiny.sum()), 8, generator=gen) * 2.0**-140).float()
    x = x.reshape(-1)
    return x if sgn else x.abs()


def bnb_bin_edges():
    """Blocks of absmax 1 whose other elements lie within 3 ulps of the edges of
    bitsandbytes' 65536 lookup bins: (u + 1) * 0.5 * 65535 + 0.5 within rounding of an
    integer, where the truncation and the scaling (x times the rounded reciprocal of the
    absmax, not x / absmax: 262,071 codes would differ) decide the bin."""
    k = torch.arange(1, 65535, dtype=torch.float64)
    u = ((k - 0.5) / 65535 * 2 - 1).float()
    vals = [u]
    for direction in (2.0, -2.0):
        w = u
        for _ in range(3):
            w = torch.nextafter(w, torch.tensor(direction))
            vals.append(w)
    u = torch.cat(vals)
    u = u[: u.numel() // 255 * 255].view(-1, 255)
    return torch.cat([u, torch.ones(u.shape[0], 1)], 1).reshape(-1).contiguous()


def test_maps_equal_the_libraries():
    # gp_lowbit_maps.h against bitsandbytes' create_dynamic_map and torchao's four maps:
    # the dequantized value of code k in a block of scale 1 is map[k].
    F = _need("bitsandbytes.functional")
    s8, s4 = _need("torchao.optim.subclass_8bit"), _need("torchao.optim.subclass_4bit")
    cases = [("bnb8_blockwise", 1, F.create_dynamic_map(signed=True)),
             ("bnb8_blockwise", 0, F.create_dynamic_map(signed=False)),
             ("torchao_8bit", 1, torch.tensor(s8.get_qmap_signed())),
             ("torchao_8bit", 0, torch.tensor(s8.get_qmap_unsigned())),
             ("torchao_4bit", 1, torch.tensor(s4.get_qmap_signed())),
             ("torchao_4bit", 0, torch.tensor(s4.get_qmap_unsigned()))]
    n = 0
    for state, sgn, ref in cases:
        B, k = BLOCK[state], ref.numel()
        codes = torch.arange(B, dtype=torch.int64).remainder(k).to(torch.uint8)
        got = gp_dequantize(state, sgn, codes, torch.ones(1))
        assert torch.equal(_bits(got), _bits(ref.float()[codes.long()])), (state, sgn)
        n += B
    print("maps: %d values compared" % n)


def test_bnb_quantize_dequantize_bit_for_bit():
    # bitsandbytes.functional.quantize_blockwise / dequantize_blockwise (block 256, the
    # optimizer's maps) on the CPU: codes, absmax and dequantized values equal gradprec's,
    # for 2 x 1,048,576 values of every kind (inputs) and 2 x 460,288 values at the edges
    # of the CPU quantizer's lookup bins (where the truncation of (u+1)*0.5*65535 + 0.5 decides).
    F = _need("bitsandbytes.functional")
    gen = torch.Generator().manual_seed(25)
    n = 0
    for sgn in (1, 0):
        code = F.create_dynamic_map(signed=bool(sgn))
        for x in (inputs(gen, 4096, 256, sgn), bnb_bin_edges() if sgn else bnb_bin_edges().abs()):
            q, st = F.quantize_blockwise(x, code=code, blocksize=256)
            c, s = gp_quantize("bnb8_blockwise", sgn, x)
            assert torch.equal(q, c), "codes differ at %d elements" % int((q != c).sum())
            assert torch.equal(_bits(st.absmax), _bits(s))
            d = F.dequantize_blockwise(q, st)
            assert torch.equal(_bits(d), _bits(gp_dequantize("bnb8_blockwise", sgn, q, st.absmax)))
            n += x.numel()
    print("bitsandbytes quantize/dequantize: %d values compared" % n)


@pytest.mark.parametrize("state", ["torchao_8bit", "torchao_4bit", "torchao_fp8"])
def test_torchao_quantize_dequantize_bit_for_bit(state):
    # torchao.optim's quantizers (scale_tensor + quantize_8bit_with_qmap /
    # quantize_4bit_with_qmap, subclass_fp8.quantize_fp8) and dequantizers on 2 x 1,048,576
    # values of every kind: codes, scales and dequantized values equal gradprec's.
    Q = _need("torchao.optim.quant_utils")
    s8, s4, sf = (_need("torchao.optim.subclass_" + m) for m in ("8bit", "4bit", "fp8"))
    gen = torch.Generator().manual_seed(26)
    B, n = BLOCK[state], 0
    for sgn in (1, 0):
        x = inputs(gen, (1 << 20) // B, B, sgn)
        if state == "torchao_fp8":
            codes, scale = sf.quantize_fp8(x, B)
            codes = codes.view(torch.uint8)
            deq = sf.OptimStateFp8(codes.view(torch.float8_e4m3fn), scale).dequantize()
        else:
            mod = s8 if state == "torchao_8bit" else s4
            qmap = torch.tensor(mod.get_qmap_signed() if sgn else mod.get_qmap_unsigned(), dtype=torch.float32)
            scaled, scale = Q.scale_tensor(x, B)
            quant = Q.quantize_8bit_with_qmap if state == "torchao_8bit" else Q.quantize_4bit_with_qmap
            codes = quant(scaled, qmap)
            deq = Q.dequant_with_qmap(codes, qmap, scale)
        c, s = gp_quantize(state, sgn, x)
        assert torch.equal(codes, c), "codes differ at %d elements" % int((codes != c).sum())
        assert torch.equal(_bits(scale), _bits(s))
        assert torch.equal(_bits(deq), _bits(gp_dequantize(state, sgn, codes, scale)))
        n += x.numel()
    print("%s quantize/dequantize: %d values compared" % (state, n))


HYPER = ((1e-3, 0.9, 0.999, 1e-8, 0.01), (3e-2, 0.9, 0.95, 1e-8, 0.0), (1e-5, 0.5, 0.99, 1e-6, 0.1))
N = 8192  # >= 4096 and a multiple of 256: the libraries quantize the tensor's state


def _grads(gen, dtype):
    return (torch.randn(N, generator=gen) * torch.exp(torch.randn(N, generator=gen) * 2)).to(dtype)


def _compare(mine, theirs):
    bad = 0
    for a, b in zip(mine, theirs):
        bad += int((_bits(a.contiguous()) != _bits(b.contiguous())).sum())
    return bad, sum(a.numel() for a in mine)


def _host_sqrt_ok():
    x = torch.ones(1)
    err = ctypes.create_string_buffer(256)
    return _lib.lib().gradprec_torch_sqrtf(b"torch_cpu_host", 1, x.data_ptr(), x.data_ptr(), err, len(err)) == 0


def test_bnb_adamw8bit_steps_bit_for_bit():
    # bitsandbytes.optim.AdamW8bit on the CPU, 8192-element fp32 and bf16 params, three
    # sets of hyper-parameters, steps 2..6 (step 1 makes the state): before each step
    # gradprec gets the library's state (codes and absmax of m and v) and param, runs its
    # model of the step, and every output (param, both code arrays, both absmax arrays)
    # equals the library's. Its fp32 sqrt is torch's on this host (MKL: torch_cpu_host);
    # where gradprec does not model that sqrt, only bf16 params are compared (the bf16
    # store hides a one-ulp fp32 sqrt difference only most of the time, so it is not
    # relied on: the whole comparison is skipped for fp32).
    bnb = _need("bitsandbytes")
    host = _host_sqrt_ok()
    gen = torch.Generator().manual_seed(27)
    bad = total = 0
    for dtype, pf in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        if dtype == torch.float32 and not host:
            print("fp32 params skipped: torch_cpu_host's sqrt is not modelled on this host")
            continue
        for hyper in HYPER:
            lr, b1, b2, eps, wd = hyper
            p = torch.nn.Parameter(torch.randn(N, generator=gen).to(dtype))
            opt = bnb.optim.AdamW8bit([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
            for t in range(1, 7):
                p.grad = _grads(gen, dtype)
                st = opt.state[p]
                if t == 1:
                    opt.step()
                    continue
                before = (p.detach().clone(), st["state1"].clone(), st["absmax1"].clone(), st["state2"].clone(),
                          st["absmax2"].clone())
                opt.step()
                mine = gp_step("bnb8_blockwise", pf, "torch_cpu_host" if host else "torch_cpu", hyper, t, p.grad,
                               *before)
                b, n = _compare(mine, (p.detach(), st["state1"], st["absmax1"], st["state2"], st["absmax2"]))
                bad, total = bad + b, total + n
    assert bad == 0, "%d of %d values differ" % (bad, total)
    print("bitsandbytes AdamW8bit steps: %d values compared" % total)


@pytest.mark.parametrize("state,cls", [("torchao_8bit", "AdamW8bit"), ("torchao_4bit", "AdamW4bit"),
                                       ("torchao_fp8", "AdamWFp8")])
def test_torchao_low_bit_adamw_steps_bit_for_bit(state, cls):
    # torchao.optim.AdamW8bit / AdamW4bit / AdamWFp8 on the CPU (their step runs under
    # torch.compile: inductor's C++ code), 8192-element fp32 and bf16 params, two sets of
    # hyper-parameters, steps 2..4: as the bitsandbytes test, every output equal (the
    # 4-bit codes unpacked from torchao's two per byte, high nibble first). torchao's
    # step takes the IEEE sqrt (std::sqrt in inductor's code): evaluation torch_cpu.
    optim = _need("torchao.optim")
    gen = torch.Generator().manual_seed(28)
    bad = total = 0

    def codes(s):
        c = s.codes.reshape(-1).view(torch.uint8)
        if state == "torchao_4bit":
            c = torch.stack([c >> 4, c & 15], -1).reshape(-1)
        return c.clone()

    for dtype, pf in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        for hyper in HYPER[:2]:
            lr, b1, b2, eps, wd = hyper
            p = torch.nn.Parameter(torch.randn(N, generator=gen).to(dtype))
            opt = getattr(optim, cls)([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
            for t in range(1, 5):
                p.grad = _grads(gen, dtype)
                if t == 1:
                    opt.step()
                    continue
                m, v = opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"]
                before = (p.detach().clone(), codes(m), m.scale.clone(), codes(v), v.scale.clone())
                opt.step()
                mine = gp_step(state, pf, "torch_cpu", hyper, t, p.grad, *before)
                b, n = _compare(mine, (p.detach(), codes(m), m.scale, codes(v), v.scale))
                bad, total = bad + b, total + n
    assert bad == 0, "%d of %d values differ" % (bad, total)
    print("torchao %s steps: %d values compared" % (cls, total))


def test_bad_input_is_refused():
    err = ctypes.create_string_buffer(256)
    x = torch.zeros(256)
    c, s = torch.empty(256, dtype=torch.uint8), torch.empty(1)
    L = _lib.lib()
    assert L.gradprec_lowbit_quantize(b"bnb4", 1, 256, x.data_ptr(), c.data_ptr(), s.data_ptr(), err, 256) != 0
    assert b"unknown state 'bnb4'" in err.value
    assert L.gradprec_lowbit_quantize(b"torchao_8bit", 1, 100, x.data_ptr(), c.data_ptr(), s.data_ptr(), err,
                                      256) != 0
    assert b"not a multiple" in err.value
    assert L.gradprec_lowbit_adamw_step(b"torchao_8bit", b"fp8_e4m3", b"torch_cpu", 1e-3, 0.9, 0.999, 1e-8, 0.0, 1,
                                        256, x.data_ptr(), x.data_ptr(), c.data_ptr(), s.data_ptr(), c.data_ptr(),
                                        s.data_ptr(), err, 256) != 0
    assert b"param format 'fp8_e4m3'" in err.value


# ---- the libraries as subjects, from the command line ----

def _cli_run(cli, tmp_path, *args):
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "out"
    env = dict(os.environ, GP_PYTHON=sys.executable)
    p = subprocess.run([cli, "run", *args, "--out", str(out), "--quiet"], capture_output=True, text=True, env=env)
    rep = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    return p, rep


EXAMPLE = os.path.join(REPO, "examples", "scenarios", "adamw-8bit-state-tiny-grads.yaml")


@pytest.mark.parametrize("subject,state,model", [
    ("BnbAdamW8bit", "bnb8_blockwise", "bnb8_blockwise/torch_cpu_host"),
    ("TorchaoAdamW8bit", "torchao_8bit", "torchao_8bit"),
])
def test_cli_subject_names_the_model_it_matched(cli, tmp_path, subject, state, model):
    # `gradprec run FILE --backend python:gradprec.torch:SUBJECT` on
    # examples/scenarios/adamw-8bit-state-tiny-grads.yaml with the subject's state: the
    # library's own optimizer steps gradprec's arrays; the report names the model it
    # equalled bit for bit (report.json adamw_models.matched and the note), no step is an
    # update formula, and for torchao the file's expectation (fail, state precision: v of
    # tiny gradients stored as 0) is met, exit 0. bitsandbytes' CPU quantizer maps values
    # below about 1.5e-5 of the block's absmax to a code of about that size rather than to
    # 0 (its 65536-bin table): nothing underflows, so its verdict is its own, printed.
    _need("bitsandbytes" if subject.startswith("Bnb") else "torchao.optim")
    if model.endswith("_host") and not _host_sqrt_ok():
        pytest.skip("torch_cpu_host's sqrt is not modelled on this host")
    text = open(EXAMPLE).read()
    assert "state: torchao_8bit}" in text
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text.replace("state: torchao_8bit", "state: " + state)
                        .replace("expect: {verdict: fail, mechanism: state precision}\n",
                                 "" if state != "torchao_8bit" else "expect: {verdict: fail, mechanism: state "
                                 "precision}\n"))
    p, rep = _cli_run(cli, tmp_path, str(scenario), "--backend", "python:gradprec.torch:" + subject)
    assert rep is not None, p.stderr
    sc = rep["scenarios"][0]
    assert model in sc["adamw_models"]["matched"], sc["adamw_models"]
    assert any("equal gradprec's model(s) " + model in n for n in sc["notes"]), sc["notes"]
    assert sc["events"]["update_formula_steps"] == 0
    if state == "torchao_8bit":
        assert p.returncode == 0 and sc["expect"]["met"], (p.returncode, sc["expect"])
        assert sc["metrics"]["state_underflow_frac"] > 0.4
    else:
        assert sc["metrics"]["state_underflow_frac"] == 0
    print("%s: matched %s, verdict %s (%s), state_underflow_frac %.3g" % (
        subject, sc["adamw_models"]["matched"], sc["verdict"], sc["dominant_mechanism"],
        sc["metrics"]["state_underflow_frac"]))


def test_show_round_trips_the_state(cli, tmp_path):
    # gradprec show writes the low-bit state back under its name, and what it writes loads
    # to the same scenario (shown again: equal text)
    import subprocess

    a = subprocess.run([cli, "show", EXAMPLE], capture_output=True, text=True, check=True).stdout
    assert "  state: torchao_8bit\n" in a
    f = tmp_path / "shown.yaml"
    f.write_text(a)
    b = subprocess.run([cli, "show", str(f)], capture_output=True, text=True, check=True).stdout
    assert a == b


def test_cli_refusals(cli, tmp_path):
    # bad input: one line naming the place, exit 2, nothing written
    cases = [
        ("optimizer: {state: torchao_8bit}\ntensors:\n  - {name: w, size: 1000}\n",
         "not a multiple of optimizer.state torchao_8bit's block (256)"),
        ("optimizer: {state: bnb8_blockwise, master: fp32}\n", "no master, kahan, stochastic or fused"),
        ("sample: 256\noptimizer: {state: torchao_4bit}\ntensors:\n  - {name: w, size: 4096}\n", "drop sample"),
        ("optimizer: {state: bnb4}\n", "unknown optimizer.state format 'bnb4'"),
    ]
    for i, (text, why) in enumerate(cases):
        f = tmp_path / ("bad%d.yaml" % i)
        f.write_text(text)
        p, rep = _cli_run(cli, tmp_path / str(i), str(f))
        assert p.returncode == 2 and rep is None, (text, p.returncode, p.stderr)
        assert why in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    # a torch AdamW subject refuses a low-bit state (its m, v are uint8 codes): refused, and
    # every scenario refused is exit 2 (the reports written)
    p, rep = _cli_run(cli, tmp_path / "t", EXAMPLE, "--backend", "python:gradprec.torch:AdamW")
    sc = rep["scenarios"][0]
    assert p.returncode == 2 and sc["verdict"] == "refused", (p.returncode, sc["verdict"])
    assert "optimizer.state: fp32" in json_text(sc)


def json_text(x):
    import json

    return json.dumps(x)


def test_cli_advise_lists_the_states(cli):
    # `gradprec advise` on the 8-bit example (a low-bit state already) offers fp32 state and
    # the other low-bit states with their bytes per parameter for m and v (docs/advise.md):
    # fp32 8 - 2.03125 = +5.96875, 4-bit 1.0625 - 2.03125 = -0.96875; fp32 state passes
    import json
    import subprocess

    p = subprocess.run([cli, "advise", EXAMPLE, "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rows = {a["label"]: a for a in json.loads(p.stdout)["alternatives"]}
    assert rows["fp32 optimizer state"]["bytes_per_param"] == 5.96875, rows["fp32 optimizer state"]
    assert rows["4-bit state (torchao)"]["bytes_per_param"] == -0.96875
    assert rows["fp32 optimizer state"]["verdict"] == "pass"
    assert "8-bit state (torchao)" not in rows  # the scenario's own
