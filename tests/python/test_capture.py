# gradprec.torch.capture on a real model: the dump holds exactly the gradients torch
# handed to .grad accumulation (their fp32 sum in order IS the .grad torch ended with,
# bit for bit), the initial weights, the token counts and dtypes; misuse is refused.
import json

import pytest
import torch
from safetensors.torch import load_file

import gradprec
import gradprec.torch as gpt
from tinylm import make_model, sequences, token_losses

LENGTHS = [33, 9, 21, 5]  # one sequence per micro-batch: n_k = L - 1 = 32, 8, 20, 4 tokens


def train(model, cap, steps, lengths, K, seed=1):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    grads = []
    for s in range(steps):
        for k, seq in enumerate(sequences(lengths, seed + s)):
            with cap.microbatch(tokens=seq.shape[1] - 1):
                (token_losses(model, seq).mean() / K).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        opt.step()
        opt.zero_grad()
    return grads


def test_dump_is_what_torch_accumulated(tmp_path):
    model = make_model(0)
    init = {n: p.detach().clone() for n, p in model.named_parameters()}
    K = len(LENGTHS)
    with gpt.capture(model, tmp_path, reduction="mean", accumulation_steps=K) as cap:
        grads = train(model, cap, 2, LENGTHS, K)
    d = load_file(str(tmp_path / "grads.safetensors"))
    names = [n for n, _ in model.named_parameters()]
    want = {"%s/step%d/mb%d" % (n, s, k) for n in names for s in range(2) for k in range(K)}
    want |= {"%s/weight" % n for n in names}
    assert set(d) == want
    for n in names:
        assert torch.equal(d[n + "/weight"], init[n])
        for s in range(2):
            # AccumulateGrad: .grad = first gradient, then += each next one, in fp32.
            acc = d["%s/step%d/mb0" % (n, s)].clone()
            for k in range(1, K):
                acc += d["%s/step%d/mb%d" % (n, s, k)]
            assert acc.dtype == torch.float32
            assert torch.equal(acc, grads[s][n]), n
    man = json.loads((tmp_path / "capture.json").read_text())
    assert man["tokens"] == [[L - 1 for L in LENGTHS]] * 2
    assert man["steps"] == 2 and man["microbatches"] == K and man["not_captured"] == []
    y = (tmp_path / "scenario.yaml").read_text()
    assert "  tokens: [32, 8, 20, 4]\n" in y and "reduction: \"mean\"\n" in y
    assert "  accumulation_steps: 4\n" in y and "steps: 2\n" in y
    assert 'grad: "fp32"' in y and 'accumulator: "fp32"' in y
    assert '  - name: "emb.weight"\n    grad:\n      replay: "grads.safetensors"\n      key: "emb.weight"\n' in y


def test_bf16_model_sampling_and_params(tmp_path):
    model = make_model(0, torch.bfloat16)
    with gpt.capture(model, tmp_path, reduction="token_mean", params=["head.*", "emb.weight"], sample=100,
                     weights=False) as cap:
        N = sum(L - 1 for L in LENGTHS)
        for seq in sequences(LENGTHS, 3):
            with cap.microbatch(tokens=seq.shape[1] - 1):
                (token_losses(model, seq).sum() / N).backward()
        cap.step()
    d = load_file(str(tmp_path / "grads.safetensors"))
    assert sorted({k.split("/")[0] for k in d}) == ["emb.weight", "head.bias", "head.weight"]
    assert all(v.dtype == torch.bfloat16 for v in d.values())
    y = (tmp_path / "scenario.yaml").read_text()
    assert 'grad: "bf16"' in y and 'accumulator: "bf16"' in y
    # head.bias has 48 elements (< 100: kept whole), the others keep a sample of 100
    numel = dict((n, p.numel()) for n, p in model.named_parameters())
    assert y.count("    population: ") == 2
    for n in ("emb.weight", "head.weight"):
        assert "    population: %d\n" % numel[n] in y
        assert all(d["%s/step0/mb%d" % (n, k)].shape == (100,) for k in range(len(LENGTHS)))
    assert all(d["head.bias/step0/mb%d" % k].shape == (48,) for k in range(len(LENGTHS)))
    assert sorted(f.name for f in tmp_path.iterdir()) == ["capture.json", "grads.safetensors", "scenario.yaml"]
    assert "weight:" not in y.split("tensors:")[1].split("batch:")[0].replace("emb.weight", "")


def test_misuse_refused(tmp_path):
    model = make_model(0)
    seq = sequences([9], 0)[0]
    with pytest.raises(ValueError, match="reduction"):
        gpt.capture(model, tmp_path, reduction="avg")
    with pytest.raises(RuntimeError, match="outside"):
        with gpt.capture(model, tmp_path / "a", reduction="sum"):
            token_losses(model, seq).sum().backward()
    with pytest.raises(ValueError, match="tokens must be an integer in 1 .. 1000000000"):
        with gpt.capture(model, tmp_path / "b", reduction="sum") as cap:
            with cap.microbatch(tokens=10 ** 9 + 1):
                pass
    assert not (tmp_path / "b").exists()
    with pytest.raises(ValueError, match="tokens"):
        with gpt.capture(model, tmp_path / "c", reduction="sum") as cap:
            with cap.microbatch(tokens=0):
                pass
    with pytest.raises(RuntimeError, match="second gradient"):
        with gpt.capture(model, tmp_path / "d", reduction="sum") as cap:
            with cap.microbatch(tokens=8):
                token_losses(model, seq).sum().backward()
                token_losses(model, seq).sum().backward()
    with pytest.raises(ValueError, match="match no"):
        gpt.capture(model, tmp_path, reduction="sum", params=["nothing.*"])
    mixed = make_model(0)
    mixed.head.to(torch.bfloat16)
    with pytest.raises(TypeError, match="several dtypes"):  # refused before the block runs
        gpt.capture(mixed, tmp_path / "e", reduction="sum")
    assert not (tmp_path / "e").exists()


def test_steps_with_different_token_counts(tmp_path):
    # Each optimizer step keeps its own token counts and number of micro-batches (a
    # partial last window): batch.tokens is one list per step, microbatches the largest.
    model = make_model(0)
    layout = [[9, 7], [5, 21], [13]]
    with gpt.capture(model, tmp_path, reduction="mean", accumulation_steps=2) as cap:
        for s, lengths in enumerate(layout):
            for seq in sequences(lengths, s):
                with cap.microbatch(tokens=seq.shape[1] - 1):
                    (token_losses(model, seq).mean() / 2).backward()
            cap.step()
            model.zero_grad()
    doc = cap.scenario()
    assert doc["batch"] == {"accumulation_steps": 2, "microbatches": 2,
                            "tokens": [[L - 1 for L in lengths] for lengths in layout]}
    assert doc["steps"] == 3
    d = load_file(str(tmp_path / "grads.safetensors"))
    assert "head.bias/step2/mb0" in d and "head.bias/step2/mb1" not in d
    man = json.loads((tmp_path / "capture.json").read_text())
    assert man["microbatches_by_step"] == [2, 2, 1] and man["tokens"] == doc["batch"]["tokens"]
    y = (tmp_path / "scenario.yaml").read_text()
    assert "  tokens:\n    - [8, 6]\n    - [4, 20]\n    - [12]\n" in y
    # with distributed: a scenario has one list for every step: refused when a step differs
    with pytest.raises(ValueError, match=r"step 1 has token counts \[4, 20\], step 0 has \[8, 6\]; with distrib"):
        with gpt.capture(model, tmp_path / "ddp", reduction="mean", accumulation_steps=2,
                         scenario={"distributed": {"world_size": 2}}) as cap:
            for s, lengths in enumerate(layout):
                for seq in sequences(lengths, s):
                    with cap.microbatch(tokens=seq.shape[1] - 1):
                        (token_losses(model, seq).mean() / 2).backward()
                model.zero_grad()
    assert not (tmp_path / "ddp").exists()


def test_dump_replays(tmp_path, replay):
    model = make_model(0)
    K = len(LENGTHS)
    with gpt.capture(model, tmp_path, reduction="mean", accumulation_steps=K) as cap:
        train(model, cap, 1, LENGTHS, K)
    res = gradprec.run(tmp_path / "scenario.yaml")
    assert [t.name for t in res[0].tensors] == [n for n, _ in model.named_parameters()]
    assert res[0].report.get("sampling") is None  # every element: exact metrics
    # sample=: the same gradients, metrics estimated on 200 elements per larger tensor,
    # which the report says (an interval per metric)
    doc = cap.scenario()
    numel = {n: p.numel() for n, p in model.named_parameters()}
    for t in doc["tensors"]:
        if numel[t["name"]] > 200:
            t["sample"] = 200
    (tmp_path / "sampled.yaml").write_text(gradprec.scenario_yaml(doc))
    est = gradprec.run(tmp_path / "sampled.yaml")[0]
    lo, hi = est.report["sampling"]["intervals"]["normalization_rel_err"]
    assert lo <= est.metrics["normalization_rel_err"] <= hi
    said = [n for n in est.report["notes"] if "estimates over 200 of" in n]
    assert len(said) == sum(1 for t in doc["tensors"] if "sample" in t), est.report["notes"]


def test_truncated_dump_is_refused_naming_file_and_tensor(tmp_path, replay):
    model = make_model(0)
    with gpt.capture(model, tmp_path, reduction="sum", params=["head.bias"], weights=False) as cap:
        for seq in sequences(LENGTHS[:2], 0):
            with cap.microbatch(tokens=seq.shape[1] - 1):
                token_losses(model, seq).sum().backward()
    f = tmp_path / "grads.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[:-4])  # the last entry's data now ends past the end of the file
    out = tmp_path / "rep"
    with pytest.raises(gradprec.BadInputError) as ei:
        gradprec.run(tmp_path / "scenario.yaml", out_dir=out)
    assert ei.value.status == 2
    assert "grads.safetensors" in ei.value.line and "head.bias" in ei.value.line, ei.value.line
    assert not out.exists()
