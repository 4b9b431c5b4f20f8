#!/usr/bin/env python3
"""gpu_torch_adapters.py CLI — torch's CUDA AdamW (single-tensor, foreach, fused) as
subjects under test, compared element by element with gradprec's CPU emulation.
scripts/gpu-check.sh runs it on a machine with a GPU; CLI is the gradprec binary (for
`gradprec show`). For each adapter and each optimizer configuration below it runs
gradprec.run(text, backend=adapter, compare="cpu") and gradprec.run(text, backend="cpu")
and prints one Markdown row: whether every metric of the subject's report equals the
emulation's, how many AdamW elements differ (--compare cpu), and the AdamW models the
subject matched bit for bit and those it did not (report["adamw_models"]).
This is a measurement, not a test: it exits 0 whatever the subjects do, 77 when torch
sees no CUDA device, 2 on bad usage. The configurations are those of the CPU acceptance
tests in tests/python/test_backends.py (FP32_PRESETS and the bf16 PLAIN preset, with the
evaluation torch_cuda for the single-tensor form and torch_cuda_foreach for the foreach
form; the fused variant asked for with optimizer.fused: torch_cpu, which models torch's
CPU fused kernel, not its CUDA one)."""
import os
import re
import subprocess
import sys


def preset(cli, name, **over):
    """Preset `name` as full YAML (`CLI show`) with keys of its optimizer/precision blocks
    replaced (or, for optimizer keys it lacks, added after `stochastic:`), e.g.
    evaluation="torch_cpu". tests/python/test_backends.py uses it too."""
    y = subprocess.run([cli, "show", name], capture_output=True, text=True, check=True).stdout
    for k, v in over.items():
        if re.search(r"(?m)^  %s: " % k, y):
            y = re.sub(r"(?m)^  %s: .*$" % k, "  %s: %s" % (k, v), y)
        else:
            y = re.sub(r"(?m)^  stochastic: (.*)$", r"  stochastic: \1\n  %s: %s" % (k, v), y)
    return y


CONFIGS = [
    ("adam-state-fp32-tiny-grads", "fp32", {}),
    ("adamw-large-decay", "fp32", {}),
    ("bf16-weights-cosine-master", "fp32 master", dict(master="fp32")),
    ("bf16-weights-cosine-no-master", "bf16 plain", dict(state="bf16", grad="bf16", accumulator="bf16")),
]
FUSED = [
    ("bf16-weights-cosine-no-master", "fp32 fused",
     dict(fused="torch_cpu", param="fp32", state="fp32", grad="fp32", accumulator="fp32")),
    ("bf16-weights-cosine-no-master", "bf16 fused",
     dict(fused="torch_cpu", param="bf16", state="bf16", grad="bf16", accumulator="bf16")),
]


def main():
    if len(sys.argv) != 2 or not os.access(sys.argv[1], os.X_OK):
        print("usage: gpu_torch_adapters.py PATH/TO/gradprec", file=sys.stderr)
        return 2
    cli = sys.argv[1]
    import torch
    import gradprec
    import gradprec.torch as gt
    if not torch.cuda.is_available():
        print("torch sees no CUDA device: nothing measured")
        return 77
    print("torch %s, %s" % (torch.__version__, torch.cuda.get_device_name(0)))
    print()
    print("| adapter | preset | params | metrics == cpu | AdamW elements differing | matched | differ |")
    print("|---|---|---|---|---|---|---|")
    runs = [(cls, ev, c) for cls, ev in ((gt.AdamWCUDA, "torch_cuda"), (gt.AdamWForeachCUDA, "torch_cuda_foreach"))
            for c in CONFIGS]
    runs += [(gt.AdamWFusedCUDA, None, c) for c in FUSED]
    for cls, ev, (name, what, over) in runs:
        text = preset(cli, name, **(dict(over, evaluation=ev) if ev else over))
        try:
            ref = gradprec.run(text, backend="cpu")[0]
            sub = gradprec.run(text, backend=cls(), compare="cpu")[0]
        except Exception as e:  # a refusal or a failure is a result too
            print("| %s | %s | %s | error: %s | | | |" % (cls.__name__, name, what, str(e).splitlines()[0]))
            continue
        models = sub.report.get("adamw_models", {})
        same = sub.metrics == ref.metrics
        print("| %s | %s | %s | %s | %d | %s | %s |" % (
            cls.__name__, name, what, "yes" if same else "no", sub.report["events"]["optimizer_mismatches"],
            ", ".join(models.get("matched", [])) or "-", ", ".join(models.get("differ", [])) or "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
