# `gradprec show` writes every key that changes the numerics (issue 24 item 7): the keys
# are taken from the reference tables of docs/scenarios.md (what a user can set), not from
# the code that writes them; a key may be missing from `show` only when it is unset by
# default and its absence is the default's meaning (listed below with the reason).
import os
import re

from conftest import REPO, run_cli

SECTIONS = ["tensors", "batch", "precision", "loss_scale", "optimizer", "schedule"]

# Keys the tables document that a default scenario leaves unset, and why leaving them out
# is the same scenario.
UNSET_BY_DEFAULT = {
    "tensors": {"values": "explicit per-token values: a different kind of gradient",
                "token_snr": "unset: independent micro-batches (0 is not a value it takes)",
                "replay": "a dump instead of a distribution", "key": "the replay's key",
                "sample": "every element", "population": "the dump holds the whole tensor",
                "optimizer": "the scenario's hyper-parameters (per-tensor overrides)",
                "state": "AdamW starts from m = v = 0, step 0", "twin": "no torch state to compare with"},
    "loss_scale": {"replay_scales": "replayed entries are unscaled"},
    "optimizer": {"lr_steps": "unset: each step's LR is lr x the schedule"},
}


def documented_keys(section):
    """The first-column keys of the tables under `### section` (up to the next ###)."""
    text = open(os.path.join(REPO, "docs", "scenarios.md"), encoding="utf-8").read()
    m = re.search(r"^### %s\b.*?$(.*?)^### " % re.escape(section), text, re.M | re.S)
    assert m, section
    keys = re.findall(r"^\| `([a-z_]+)` \|", m.group(1), re.M)
    assert keys, section
    return keys


def test_show_writes_every_documented_key(tmp_path):
    yaml = tmp_path / "default.yaml"
    yaml.write_text("name: d\n")
    p = run_cli("show", str(yaml))
    assert p.returncode == 0, p.stderr
    written = set(re.findall(r"^\s*(?:- )?([a-z_]+):", p.stdout, re.M))
    missing = []
    for sec in SECTIONS:
        for k in documented_keys(sec):
            if k not in written and k not in UNSET_BY_DEFAULT.get(sec, {}):
                missing.append("%s.%s" % (sec, k))
    assert not missing, "gradprec show leaves out: %s\n%s" % (", ".join(missing), p.stdout)
    # the default AdamW evaluation order is a key like any other (it sets the sqrt and
    # division order of every step)
    assert re.search(r"^  evaluation: torch_cuda$", p.stdout, re.M), p.stdout
