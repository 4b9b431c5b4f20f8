#!/usr/bin/env python3
"""gp_ptx_check.py — static checks of what nvcc emits for the kernels (no GPU needed).

Usage: gp_ptx_check.py NVCC FMAD ARCH SRC...   (FMAD: false, as the build uses, or true)

Compiles each SRC with `nvcc -ptx --fmad=FMAD -arch=ARCH` and checks, per kernel (.entry),
against the table below, which is derived from the sources. A kernel that is a template
(one instance per format, or pair of formats) has one entry per instance: the per-instance
rules hold for every instance, the `sum` rules for the instances together:
  vector accesses   16-byte (ld/st.global.v4.u32) and 8-byte (ld/st.global.v2.u32)
                    loads and stores present where load8/store8 are used (sum);
  hardware cvt      cvt.rn/rz.bf16.f32 and cvt.rn/rz.f16.f32 present where the kernels
                    store bf16/fp16 without FTZ, add.rz.f32 where fp32 accumulates toward
                    zero (sum): the production form uses the hardware's conversions;
  warp shuffles     shfl.sync count (sum);
  fma               none, except in kernels whose source calls fmaf (AdamW: torch's
                    lerp/addcdiv are fused on purpose) — an fma anywhere else is a
                    contraction the source did not ask for (per instance);
  barriers          bar.sync / barrier.sync count; atomics: atom.* / red.* count (per instance).
Every kernel in the PTX must be in the table. Exit 0 when all hold, 1 with one line per
violation, 77 (skipped) when nvcc is absent, 2 on bad usage."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ANY = None  # not checked (the source asks for fmaf)
SUM = ("ld.v4", "st.v4", "ld.v2", "st.v2", "cvt.bf16", "cvt.f16", "add.rz", "shfl")  # over all instances
VEC = {"ld.v4": ">=1", "st.v4": ">=1", "ld.v2": ">=1", "st.v2": ">=1"}
HW = {"cvt.bf16": ">=1", "cvt.f16": ">=1"}  # bf16/fp16 stores by the hardware
EXPECT = {
    "gp_cuda_accum.cu": {
        # 25 instances (accumulator x grad format); fp32 accumulators round toward zero with add.rz
        "gp_accum_kernel": dict(VEC, **HW, **{"add.rz": ">=1"}, fma=0, bar=0, atom=0),
        "gp_accum_many_kernel": dict(VEC, **HW, **{"add.rz": ">=1"}, fma=0, bar=1, atom=0),
        "gp_unscale_kernel": dict(HW, fma=0, bar=0, atom=1),
        "gp_adamw_kernel": dict(HW, fma=ANY, bar=0, atom=0),
        # 15 instances (param x grad format): the absmax tree's three barriers (after the
        # block's |m'|, |v'| are written, each tree level, before the next block); bitsandbytes' fmaf
        "gp_adamw_lowbit_kernel": dict(HW, fma=ANY, bar=3, atom=0),
        # 5 instances: 5 + 5 xor shuffles each (the warp tree and the block's warp-sum tree)
        "gp_sumsq_chunk_kernel": dict(fma=0, bar=1, atom=0, shfl=50, **{"ld.v4": ">=1", "ld.v2": ">=1"}),
        "gp_sumsq_tree_kernel": dict(fma=0, bar=0, atom=0),
        "gp_scale_kernel": dict(HW, fma=0, bar=0, atom=0),
        "gp_scaler_kernel": dict(fma=0, bar=0, atom=0),
    },
    "gp_cuda_convert.cu": {
        # RNE and RTZ of bf16 and of fp16: two conversions each
        "gp_convert_range_kernel": dict(fma=0, bar=0, atom=0, **{"cvt.bf16": 2, "cvt.f16": 2}),
    },
    "gp_ptx_fixture.cu": {  # the check's own test: fails with --fmad=true
        "gp_ptx_axpy_kernel": dict(fma=0, bar=0, atom=0),
        "gp_ptx_fmaf_kernel": dict(fma=1, bar=0, atom=0),
    },
    "gp_example_cuda_plugin.cu": {
        "accumulate_kernel": dict(fma=0, bar=0, atom=0),
        "unscale_kernel": dict(fma=0, bar=0, atom=0),
        "adamw_kernel": dict(fma=ANY, bar=0, atom=0),
    },
}
PATTERNS = {
    "ld.v4": r"\bld\.global(\.[a-z]+)*\.v4\.(u32|b32)\b",
    "st.v4": r"\bst\.global(\.[a-z]+)*\.v4\.(u32|b32)\b",
    "ld.v2": r"\bld\.global(\.[a-z]+)*\.v2\.(u32|b32)\b",
    "st.v2": r"\bst\.global(\.[a-z]+)*\.v2\.(u32|b32)\b",
    "cvt.bf16": r"\bcvt\.(rn|rz)\.bf16\.f32\b",
    "cvt.f16": r"\bcvt\.(rn|rz)\.f16\.f32\b",
    "add.rz": r"\badd\.rz\.f32\b",
    "shfl": r"\bshfl\.sync\.",
    "fma": r"\bfma\.",
    "bar": r"\b(bar|barrier)\.sync\b",
    "atom": r"\b(atom|red)\.(global|shared)?",
}


def kernels(ptx):
    """{kernel name: [(instance, its PTX text), ...]}; the name is found inside the mangled
    entry name, the instance is the mangled rest (template arguments)."""
    out = {}
    parts = re.split(r"^\.(?:visible|weak)? ?\.?entry ", ptx, flags=re.M)
    for part in parts[1:]:
        mangled = re.match(r"[\w$]+", part).group(0)
        m = re.match(r"_Z(?:L)?(\d+)", mangled)
        name = mangled[m.end():m.end() + int(m.group(1))] if m else mangled
        rest = mangled[m.end() + int(m.group(1)):] if m else ""
        targs = re.match(r"I(.*?)E", rest)
        out.setdefault(name, []).append((targs.group(1) if targs else "", part))
    return out


def holds(rule, n):
    if rule is ANY:
        return True
    if isinstance(rule, str) and rule.startswith(">="):
        return n >= int(rule[2:])
    return n == rule


def main():
    if len(sys.argv) < 5 or sys.argv[2] not in ("true", "false"):
        sys.stderr.write("usage: gp_ptx_check.py NVCC true|false ARCH SRC...\n")
        return 2
    nvcc, fmad, arch, srcs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    if not (shutil.which(nvcc) or os.access(nvcc, os.X_OK)):
        print(f"nvcc not found ({nvcc}): PTX check skipped")
        return 77
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for src in srcs:
            base = os.path.basename(src)
            table = EXPECT.get(base)
            if table is None:
                print(f"{src}: no expectations for this file")
                return 2
            ptx_path = os.path.join(tmp, base + ".ptx")
            inc = [f"-I{os.path.dirname(os.path.abspath(src))}",
                   f"-I{os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'kernels')}"]
            r = subprocess.run([nvcc, "-ptx", f"--fmad={fmad}", f"-arch={arch}", *inc, src, "-o", ptx_path],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{src}: nvcc failed:\n{r.stderr.strip()}")
                return 1
            with open(ptx_path, encoding="utf-8") as f:
                found = kernels(f.read())
            for name in sorted(set(found) - set(table)):
                print(f"{base}: kernel {name} has no expectations in gp_ptx_check.py")
                bad += 1
            for name, rules in table.items():
                if name not in found:
                    print(f"{base}: kernel {name} not in the PTX")
                    bad += 1
                    continue
                total = {k: 0 for k in PATTERNS}
                for inst, text in found[name]:
                    counts = {k: len(re.findall(p, text)) for k, p in PATTERNS.items()}
                    label = f"{name}<{inst}>" if inst else name
                    for k, rule in rules.items():
                        total[k] += counts[k]
                        if k in SUM:
                            continue
                        ok = holds(rule, counts[k])
                        bad += not ok
                        if not ok:
                            print(f"{base}: {label}: {k} count {counts[k]}, expected {rule}"
                                  + (" (a contraction the source did not ask for)" if k == "fma" else ""))
                for k, rule in rules.items():
                    if k in SUM and not holds(rule, total[k]):
                        bad += 1
                        print(f"{base}: {name}: {k} count {total[k]} over {len(found[name])} instances, expected {rule}")
                print(f"{base}: {name} ({len(found[name])} instances): "
                      + ", ".join(f"{k} {sum(len(re.findall(p, t)) for _, t in found[name])}" for k, p in PATTERNS.items()))
    print(f"PTX check (--fmad={fmad}, {arch}): {bad} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
