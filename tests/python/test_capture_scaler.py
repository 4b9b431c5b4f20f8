# gradprec.torch.capture under torch.amp.GradScaler: the entries are what the backward of
# scaler.scale(loss) produced (the scaled gradients, bit for bit), and the scenario's
# loss_scale (dynamic, the scaler's factors, replay_scales = each step's scale) makes the
# replay divide the scale out exactly and model the same scaler. Checked against torch
# itself: the same training run without a scaler, and the scaler's own skips.
import torch
from safetensors.torch import load_file

import gradprec
import gradprec.torch as gpt
from tinylm import make_model, sequences, token_losses

LENGTHS = [17, 9, 5]
K = len(LENGTHS)


def _train(out, steps, scaler=None, init_seed=0, reduction="mean"):
    """`steps` optimizer steps of K micro-batches under capture; returns the capture,
    the scale each step's backward ran with, and which steps torch skipped."""
    model = make_model(init_seed)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scales, skipped = [], []
    with gpt.capture(model, out, reduction=reduction, accumulation_steps=K, scaler=scaler) as cap:
        for s in range(steps):
            if scaler is not None:
                scales.append(scaler.get_scale())
            for seq in sequences(LENGTHS, 5 + s):
                with cap.microbatch(tokens=seq.shape[1] - 1):
                    tl = token_losses(model, seq)
                    loss = tl.mean() / K if reduction == "mean" else tl.sum()
                    (scaler.scale(loss) if scaler is not None else loss).backward()
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
                skipped.append(scaler.get_scale() < scales[-1])  # GradScaler backs off on a skip
            else:
                opt.step()
            opt.zero_grad()
    return cap, scales, skipped


def _bits(d):
    return {k: torch.tensor(v, dtype=torch.float64).view(torch.int64).item() for k, v in d.items()}


def test_scaled_capture_replays_as_the_unscaled_run(tmp_path, replay):
    # Scaling by a power of two is exact in fp32 (no value of this model comes near
    # fp32's overflow or underflow), so the scaled run's backward outputs are exactly
    # s times the unscaled run's, its unscaled updates are the same, and gradprec, which
    # divides replay_scales out and models the scaler with powers of two, must judge it
    # exactly as the unscaled run: every metric bit for bit.
    steps = 2
    plain, _, _ = _train(tmp_path / "plain", steps)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=1)  # grows after each step
    scaled, scales, skipped = _train(tmp_path / "scaled", steps, scaler)
    assert scales == [2.0 ** 10, 2.0 ** 11] and skipped == [False, False]
    dp = load_file(str(tmp_path / "plain" / "grads.safetensors"))
    ds = load_file(str(tmp_path / "scaled" / "grads.safetensors"))
    assert set(dp) == set(ds)
    for key in dp:  # the capture keeps what the backward produced: s x the unscaled output
        if key.endswith("/weight"):
            assert torch.equal(ds[key], dp[key]), key
        else:
            s = scales[int(key.split("/step")[1].split("/")[0])]
            assert torch.equal(ds[key], dp[key] * s), key
    doc = scaled.scenario()
    assert doc["loss_scale"] == {"mode": "dynamic", "init": 2.0 ** 10, "tracker": 0, "growth": 2.0, "backoff": 0.5,
                                 "interval": 1, "replay_scales": scales}
    assert "loss_scale" not in plain.scenario()
    a = gradprec.run(tmp_path / "plain" / "scenario.yaml")[0]
    b = gradprec.run(tmp_path / "scaled" / "scenario.yaml")[0]
    assert b.report["loss_scale_by_step"] == scales  # gradprec's scaler followed torch's
    for m in ("grad_rel_err_fullbatch", "grad_rel_err_rounding", "normalization_rel_err", "grad_norm_ratio",
              "absorbed_frac", "underflow_frac", "weight_rel_err"):
        assert _bits({m: a.metrics[m]}) == _bits({m: b.metrics[m]}), m
    for ta, tb in zip(a.tensors, b.tensors):
        assert _bits({"x": ta.metrics["grad_rel_err_fullbatch"]}) == _bits({"x": tb.metrics["grad_rel_err_fullbatch"]})
    assert b.metrics["skipped_steps"] == 0
    # The gradients gradprec saw are the unscaled ones: their magnitude histogram is the
    # plain run's. Without replay_scales it would be shifted by log2(s) (checked: the
    # scale is not divided out then).
    assert a.report["grad_magnitude_log2_histogram"] == b.report["grad_magnitude_log2_histogram"]
    del doc["loss_scale"]["replay_scales"]
    wrong = gradprec.run(gradprec.scenario_yaml(doc).replace("grads.safetensors",
                                                             str(tmp_path / "scaled" / "grads.safetensors")))[0]
    assert wrong.report["grad_magnitude_log2_histogram"] != a.report["grad_magnitude_log2_histogram"]


def test_overflowing_scale_is_skipped_as_torch_skips(tmp_path, replay):
    # init_scale 2^127 on a token-sum loss (at least 4 tokens x about log(48) > 2 per
    # micro-batch): the scaled loss overflows fp32 (> 2^128), the backward's outputs hold
    # inf/NaN, torch skips the step and backs off (by 2^-8 here, so a later step may run);
    # gradprec replaying the same entries with the same scaler must skip the same steps.
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 127, backoff_factor=2.0 ** -8)
    cap, scales, skipped = _train(tmp_path / "inf", 3, scaler, reduction="sum")
    assert skipped[0], (scales, skipped)  # torch skipped at least the first step
    res = gradprec.run(tmp_path / "inf" / "scenario.yaml")[0]
    assert res.report["skipped_by_step"] == skipped
    assert res.report["loss_scale_by_step"] == scales
    assert res.metrics["skipped_steps"] == sum(skipped)
    print("torch: scales %s, skipped %s" % (scales, skipped))
