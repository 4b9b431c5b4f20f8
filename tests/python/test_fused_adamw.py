# torch.optim.AdamW(fused=True) on CPU against gradprec's GP_ADAMW_TORCH_FUSED_CPU variant
# (docs/model.md, "torch's CPU fused AdamW"), bit for bit: torch computes every expected
# value; gradprec's side is libgradprec.so's gradprec_adamw_step (the CPU backend's
# `adamw` entry), called through the package's ctypes binding. No arithmetic here.
import ctypes
import os
import platform
import subprocess
import sys

import pytest

import gradprec
from gradprec import _lib
from conftest import REPO

torch = pytest.importorskip("torch")

# lengths: 1 element, below/at/above the 8- and 16-element remainders and the 16- and
# 32-element vector widths, and a tensor large enough for several parallel_for chunks
LENGTHS = (1, 5, 7, 8, 9, 15, 16, 17, 23, 24, 31, 33, 47, 63, 100, 1000, 40009)
HYPER = (  # lr, (beta1, beta2), eps, weight_decay
    (1e-3, (0.9, 0.999), 1e-8, 0.0),
    (3e-2, (0.9, 0.95), 1e-8, 0.1),
    (1e-5, (0.5, 0.99), 1e-6, 0.01),
    (2e-3, (0.0, 0.999), 1e-8, 0.01),  # beta1 = 0: lerp weight 1, the signed-zero case
    (7e-2, (0.95, 0.9), 1e-3, 0.0),
)
STEPS = 4
DTYPES = {torch.float32: "fp32", torch.bfloat16: "bf16"}


def _capability_ok():
    """The model covers torch's AVX2 and AVX-512 kernels (x86-64); None or why not."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return "not an x86-64 CPU (%s): the model is of torch's x86 kernels" % platform.machine()
    cap = torch.backends.cpu.get_cpu_capability()
    if cap not in ("AVX2", "AVX512"):
        return "torch runs its %s CPU kernels; the model covers AVX2 and AVX512" % cap
    return None


def _bits(t):
    return t.view(torch.int32 if t.dtype == torch.float32 else torch.int16)


def _gradprec_step(dtype, lr, betas, eps, wd, step, p, g, m, v):
    """gradprec's step on copies of (p, g, m, v): returns the new (p, m, v)."""
    p, g, m, v = (x.detach().clone().contiguous() for x in (p, g, m, v))
    fmt = DTYPES[dtype].encode()
    err = ctypes.create_string_buffer(256)
    rc = _lib.lib().gradprec_adamw_step(
        b"torch_fused_cpu", fmt, fmt, fmt, lr, betas[0], betas[1], eps, wd, step, p.numel(),
        g.data_ptr(), p.data_ptr(), m.data_ptr(), v.data_ptr(), err, len(err))
    assert rc == 0, err.value.decode()
    return p, m, v


def _random(n, dtype, gen, scale, zeros=False):
    x = torch.randn(n, generator=gen) * scale
    if zeros:  # a quarter +0, a quarter -0
        u = torch.rand(n, generator=gen)
        x[u < 0.5] = 0.0
        x[u < 0.25] = -0.0
    return x.to(dtype)


def sweep(seed=0):
    """Every (dtype, hyper-parameters, length): STEPS steps of torch's fused AdamW from
    random weights; before each step gradprec gets torch's own state. Returns the number
    of elements compared and a list of mismatch descriptions."""
    gen = torch.Generator().manual_seed(seed)
    compared, bad = 0, []
    for dtype in DTYPES:
        for h, (lr, betas, eps, wd) in enumerate(HYPER):
            params = [torch.nn.Parameter(_random(n, dtype, gen, 10.0 ** (k % 3 - 2))) for k, n in enumerate(LENGTHS)]
            opt = torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=wd, fused=True)
            for step in range(1, STEPS + 1):
                before = []
                for k, p in enumerate(params):
                    p.grad = _random(p.numel(), dtype, gen, 10.0 ** -(k % 4), zeros=betas[0] == 0.0)
                    st = opt.state.get(p)
                    m0 = st["exp_avg"].clone() if st else torch.zeros_like(p)
                    v0 = st["exp_avg_sq"].clone() if st else torch.zeros_like(p)
                    before.append((p.detach().clone(), p.grad.clone(), m0, v0))
                opt.step()
                for k, p in enumerate(params):
                    st = opt.state[p]
                    assert float(st["step"]) == step
                    got = _gradprec_step(dtype, lr, betas, eps, wd, step, *before[k])
                    want = (p.detach(), st["exp_avg"], st["exp_avg_sq"])
                    for name, a, b in zip(("param", "exp_avg", "exp_avg_sq"), got, want):
                        diff = (_bits(a) != _bits(b)).nonzero().flatten()
                        if len(diff):
                            i = int(diff[0])
                            bad.append("%s hyper %d step %d n=%d %s: %d differ, first [%d] gradprec %r torch %r" % (
                                DTYPES[dtype], h, step, p.numel(), name, len(diff), i, float(a[i]), float(b[i])))
                    compared += p.numel()
    return compared, bad


def test_fused_adamw_equals_torch_bit_for_bit():
    why = _capability_ok()
    if why:
        pytest.skip(why)
    compared, bad = sweep()
    assert compared == 2 * len(HYPER) * STEPS * sum(LENGTHS)
    assert not bad, "%d mismatches:\n%s" % (len(bad), "\n".join(bad[:20]))


def test_fused_adamw_avx2_kernel():
    # On an AVX-512 machine torch's AVX2 kernels are a different build of the same
    # source (vector width 8 floats / 16 bf16); the model's remainder rule covers both.
    why = _capability_ok()
    if why:
        pytest.skip(why)
    if torch.backends.cpu.get_cpu_capability() != "AVX512":
        pytest.skip("torch already runs its AVX2 kernels here (the test above)")
    env = dict(os.environ, ATEN_CPU_CAPABILITY="avx2")
    code = ("import sys; sys.path[:0] = %r; import torch, test_fused_adamw as t; "
            "assert torch.backends.cpu.get_cpu_capability() == 'AVX2'; n, bad = t.sweep(1); "
            "print(n, len(bad)); print('\\n'.join(bad[:20]))") % ([os.path.dirname(__file__)] + sys.path,)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    first = r.stdout.split("\n")[0].split()
    assert first[1] == "0", r.stdout


def test_signed_zero_rule_by_position():
    # beta1 = 0, m = +0, g = -0: torch's vector loop writes fma(0, g - m, g) = -0, its
    # scalar remainder g - (g - m)*(1 - w) = +0 (docs/model.md). On 21 fp32 elements the
    # remainder is the last 21 mod 8 = 5 of them.
    why = _capability_ok()
    if why:
        pytest.skip(why)
    p = torch.nn.Parameter(torch.ones(21))
    p.grad = torch.full((21,), -0.0)
    opt = torch.optim.AdamW([p], lr=0.1, betas=(0.0, 0.999), fused=True)
    opt.step()
    signs = torch.signbit(opt.state[p]["exp_avg"]).tolist()
    assert signs == [True] * 16 + [False] * 5  # torch's behaviour this model states
    _, m, _ = _gradprec_step(torch.float32, 0.1, (0.0, 0.999), 1e-8, 0.01, 1, torch.ones(21),
                             torch.full((21,), -0.0), torch.zeros(21), torch.zeros(21))
    assert torch.signbit(m).tolist() == signs


def test_bad_input_is_refused():
    err = ctypes.create_string_buffer(256)
    x = torch.zeros(4)
    y = torch.zeros(4, dtype=torch.bfloat16)
    f = _lib.lib().gradprec_adamw_step
    # torch's fused kernel keeps m and v in the param's dtype
    assert f(b"torch_fused_cpu", b"bf16", b"fp32", b"bf16", 1e-3, 0.9, 0.999, 1e-8, 0.0, 1, 4,
             y.data_ptr(), y.data_ptr(), x.data_ptr(), x.data_ptr(), err, len(err)) == 2
    assert b"not supported" in err.value
    assert f(b"fused", b"fp32", b"fp32", b"fp32", 1e-3, 0.9, 0.999, 1e-8, 0.0, 1, 4,
             x.data_ptr(), x.data_ptr(), x.data_ptr(), x.data_ptr(), err, len(err)) == 2
    assert b"variant 'fused'" in err.value


def _preset_with_fused(cli, name):
    r = subprocess.run([cli, "show", name], capture_output=True, text=True, check=True)
    yaml = r.stdout.replace("  fused: none\n", "  fused: torch_cpu\n")
    assert "fused: torch_cpu" in yaml
    return yaml.replace("  state: fp32\n", "")  # state follows the param with fused


def test_presets_with_fused_variant(cli):
    # Scenario level: the optimizer presets run with `fused: torch_cpu`.
    # bf16-weights-cosine-no-master: bf16 weights at 1.0, weight decay 0, steady
    # gradients, cosine lr 8e-3 -> 0: the update is lr_t (m-hat/sqrt(v-hat) = 1 within
    # the bf16 state's 3 x 2^-9), and from step 51 on lr_t < 2^-8 = half an ulp above 1
    # (lr_51 = 3.874e-3, 0.8% below 2^-8 = 3.906e-3; lr_50 = 4e-3): 49 of the 99 updates
    # round away, as the preset documents for any in-place bf16 store. fp32
    # adamw-large-decay passes as with the single-tensor order (its thresholds are the
    # fp32 floor; the fused order is another fp32 evaluation of the same step).
    sc = gradprec.run(_preset_with_fused(cli, "bf16-weights-cosine-no-master"))[0]
    opt = sc.report["config"]["optimizer"]
    assert (opt["fused"], opt["param"], opt["state"], opt["master"]) == ("torch_cpu", "bf16", "bf16", None)
    assert sc.metrics["stale_update_frac"] == 49 / 99
    sc = gradprec.run(_preset_with_fused(cli, "adamw-large-decay"))[0]
    assert sc.report["config"]["optimizer"]["fused"] == "torch_cpu"
    assert sc.verdict == "pass"
