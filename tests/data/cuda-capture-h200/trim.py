"""Trim a gradprec.torch.capture directory to some of its tensors (how the captures here
were cut down from test_twin.py's runs on a CUDA device; tensors are independent in a
scenario without clipping or a loss scaler, so each kept tensor replays as before).

    python trim.py SRC_DIR DST_DIR NAME [NAME ...]

Writes DST_DIR/scenario.yaml (SRC's, with only the named entries of `tensors:`) and
DST_DIR/grads.safetensors (only the keys of those tensors)."""
import os
import sys

from safetensors.torch import load_file, save_file


def main(src, dst, names):
    text = open(os.path.join(src, "scenario.yaml"), encoding="utf-8").read().splitlines()
    if any(line.startswith(("clip", "loss_scale")) for line in text):
        sys.exit("trim.py: %s clips or scales its gradients: its tensors are not independent" % src)
    out, keep, in_tensors = [], True, False
    for line in text:
        if line.startswith("# Replay:"):
            line = "# Replay: gradprec run scenario.yaml (in this directory)"
        if line == "tensors:":
            in_tensors = True
        elif in_tensors and line and not line.startswith(" "):
            in_tensors, keep = False, True
        if in_tensors and line.startswith("  - name: "):
            keep = line[len("  - name: "):].strip('"') in names
        if keep:
            out.append(line)
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "scenario.yaml"), "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    d = load_file(os.path.join(src, "grads.safetensors"))
    kept = {k: v for k, v in d.items() if k.split("/")[0] in names}
    missing = set(names) - {k.split("/")[0] for k in kept}
    if missing:
        sys.exit("trim.py: no tensor named %s in %s" % (sorted(missing)[0], src))
    save_file(kept, os.path.join(dst, "grads.safetensors"))


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
