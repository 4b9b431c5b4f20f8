# gradprec.torch.capture(sample=N) for large models: the dump keeps only the N elements
# per tensor that `gradprec run` with `sample: N` would pick from the whole dump (the C
# runner's choice, through libgradprec), so replaying the sampled dump gives the very
# numbers a sampled replay of the full dump gives, bit for bit; and every capture streams
# its gradients to disk as they arrive instead of holding them (bounded memory).
import json
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file

import gradprec
import gradprec.torch as gpt
from tinylm import make_model, sequences, token_losses

LENGTHS = [33, 9, 21, 5]
N = 150  # elements kept per tensor of more than N elements


def _train_two_captures(model, full_dir, sampled_dir, steps=1):
    """One training run recorded by two captures at once (the same gradients)."""
    K = len(LENGTHS)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with gpt.capture(model, full_dir, reduction="mean", accumulation_steps=K, seed=7) as full, \
            gpt.capture(model, sampled_dir, reduction="mean", accumulation_steps=K, seed=7, sample=N) as smp:
        for s in range(steps):
            for seq in sequences(LENGTHS, 11 + s):
                with full.microbatch(tokens=seq.shape[1] - 1), smp.microbatch(tokens=seq.shape[1] - 1):
                    (token_losses(model, seq).mean() / K).backward()
            opt.step()
            opt.zero_grad()
    return full, smp


def test_sampled_capture_is_the_sampled_replay_of_the_full_dump(tmp_path, replay):
    model = make_model(0)
    full, smp = _train_two_captures(model, tmp_path / "full", tmp_path / "smp")
    numel = {n: p.numel() for n, p in model.named_parameters()}
    names = [n for n, _ in model.named_parameters()]
    dfull = load_file(str(tmp_path / "full" / "grads.safetensors"))
    dsmp = load_file(str(tmp_path / "smp" / "grads.safetensors"))
    # The sampled dump holds, for tensor t (its position in the scenario), the elements
    # gradprec_sample_indices(seed 7, t, M, N) of each full entry, in that order.
    for t, n in enumerate(names):
        if numel[n] <= N:
            assert torch.equal(dsmp[n + "/step0/mb0"], dfull[n + "/step0/mb0"])
            continue
        idx = torch.frombuffer(gradprec.sample_indices(7, t, numel[n], N), dtype=torch.int64)
        for e in ["weight"] + ["step0/mb%d" % k for k in range(len(LENGTHS))]:
            assert torch.equal(dsmp["%s/%s" % (n, e)], dfull["%s/%s" % (n, e)].reshape(-1)[idx]), (n, e)
    # The full dump replayed with sample: N, and the sampled dump replayed as written.
    doc = full.scenario()
    for t in doc["tensors"]:
        if numel[t["name"]] > N:
            t["sample"] = N
    (tmp_path / "full" / "sampled.yaml").write_text(gradprec.scenario_yaml(doc))
    a = gradprec.run(tmp_path / "full" / "sampled.yaml")[0]
    b = gradprec.run(tmp_path / "smp" / "scenario.yaml")[0]
    assert "population: " in (tmp_path / "smp" / "scenario.yaml").read_text()
    # Bit-identical metrics (NaN where a metric does not apply: compared as bits).
    def bits(d):
        return {k: torch.tensor(v, dtype=torch.float64).view(torch.int64).item() for k, v in d.items()}
    assert bits(a.metrics) == bits(b.metrics)
    for ta, tb in zip(a.tensors, b.tensors):
        assert ta.name == tb.name and bits(ta.metrics) == bits(tb.metrics), ta.name
    # The same estimates and intervals, "over N of M elements", in both reports.
    assert a.report["sampling"] == b.report["sampling"]
    ja = {t["name"]: t.get("sampling") for t in a.report["tensors"]}
    jb = {t["name"]: t.get("sampling") for t in b.report["tensors"]}
    assert ja == jb
    for n in names:
        if numel[n] > N:
            assert jb[n]["elements"] == N and jb[n]["of"] == numel[n], jb[n]
            assert "normalization_rel_err" in jb[n]["intervals"]
        else:
            assert jb[n] is None
    said = [x for x in b.report["notes"] if "estimates over %d of" % N in x]
    assert len(said) == sum(1 for n in names if numel[n] > N), b.report["notes"]
    man = json.loads((tmp_path / "smp" / "capture.json").read_text())
    assert [t["sample"] for t in man["tensors"]] == [N if numel[n] > N else None for n in names]


def _spool_bytes(d):
    return sum(f.stat().st_size for f in d.iterdir() if f.name.startswith(".tmp-spool"))


def test_capture_writes_each_microbatch_as_it_arrives(tmp_path):
    # After each micro-batch the spool files on disk have grown by exactly that
    # micro-batch's entries (kept elements x dtype width): nothing waits in memory.
    model = make_model(0)
    K = len(LENGTHS)
    kept = sum(min(p.numel(), N) * 4 for p in model.parameters())
    whole = sum(p.numel() * 4 for p in model.parameters())
    for sample, per_mb in ((None, whole), (N, kept)):
        out = tmp_path / ("s%s" % sample)
        with gpt.capture(model, out, reduction="mean", accumulation_steps=K, sample=sample) as cap:
            base = _spool_bytes(out)
            assert base == per_mb  # the initial weights, written on entering
            for k, seq in enumerate(sequences(LENGTHS, 3)):
                with cap.microbatch(tokens=seq.shape[1] - 1):
                    (token_losses(model, seq).mean() / K).backward()
                assert _spool_bytes(out) == base + (k + 1) * per_mb
            model.zero_grad()
        # the file: the spools' bytes plus a header; the spools are gone
        size = (out / "grads.safetensors").stat().st_size
        assert (K + 1) * per_mb < size < (K + 1) * per_mb + 65536
        assert sorted(f.name for f in out.iterdir()) == ["capture.json", "grads.safetensors", "scenario.yaml"]


_PEAK = r"""
import resource, sys, torch
import gradprec.torch as gpt
K, out, sample = int(sys.argv[1]), sys.argv[2], (int(sys.argv[3]) or None)
torch.manual_seed(0)
lin = torch.nn.Linear(1024, 1024, bias=False)  # its gradient: 4 MiB of fp32
x = torch.randn(4, 1024)
with gpt.capture(lin, out, reduction="sum", sample=sample, weights=False) as cap:
    for k in range(K):
        with cap.microbatch(tokens=4):
            lin(x).square().sum().backward()
        lin.weight.grad = None
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_capture_memory_does_not_grow_with_microbatches(tmp_path):
    # Peak resident memory of a capture of K = 8 and K = 40 micro-batches of a 4 MiB
    # gradient, each in a fresh process. Holding the gradients (the old capture) would
    # cost 32 x 4 MiB = 128 MiB more for K = 40; streaming costs nothing per micro-batch
    # but the index (a few hundred bytes each). The bound allows a quarter of the held
    # amount (32 MiB) for allocator noise, far below what holding costs.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)

    def peak(K, sample):
        out = tmp_path / ("k%d_s%d" % (K, sample))
        r = subprocess.run([sys.executable, "-c", _PEAK, str(K), str(out), str(sample)], env=env,
                           capture_output=True, text=True, check=True)
        return int(r.stdout.split()[-1]) / 1024.0  # MiB

    for sample in (0, 4096):
        small, big = peak(8, sample), peak(40, sample)
        assert big - small < 32, (sample, small, big)
