#!/usr/bin/env bash
# gpu-check.sh — one command for a machine with an NVIDIA GPU: builds gradprec with the
# CUDA backend, runs the device tests (test_cuda_fp8_cvt: the GPU's fp8 cvt against
# gradprec's model on all 2^32 fp32 inputs; test_cuda_parity with all 2^32 fp32 inputs per
# format and mode, test_cuda_example_plugin), `gradprec run --backend cuda --compare cpu`
# over the default suite, the backend fuzz corpus replayed on the device, the GPU
# benchmarks (the fused AdamW kernel's bandwidth as a fraction of a device-to-device copy
# on the same device, build/bench/gp_bench_cuda_adamw; torch.optim.AdamW(fused=True)
# measured the same way when a Python with torch and CUDA is there: $GP_PYTHON, else
# python3), torch's CUDA AdamW adapters compared with the CPU emulation
# (scripts/gpu_torch_adapters.py), the host CPU's torch sqrt against IEEE
# (scripts/mkl-sqrt-probe.py), and writes one Markdown summary (OUT/summary.md, default
# gpu-check-out/). GP_PREBUILT=DIR uses binaries built elsewhere with nvcc (DIR laid out
# as a build folder: gradprec, libgradprec.so, tests/, fuzz/, bench/, examples/plugins/,
# and lib/ with shared libraries for LD_LIBRARY_PATH: scripts/gpu-pack.sh makes it)
# instead of configuring and building here (a device machine without MPFR/GSL headers).
# Without a GPU it says so in one line and exits 0 having run nothing. Exit 1 when any
# step fails; a step that runs past GP_STEP_TIMEOUT seconds (default 3600) fails.
# GP_SKIP_FULL_PARITY=1 leaves out the 2^32 sweep (about 160 s on an H100).
# Usage: scripts/gpu-check.sh [OUT_DIR]
set -u

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "gpu-check: no NVIDIA GPU on this machine (nvidia-smi lists none); nothing run"
    exit 0
fi

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-gpu-check-out}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
build="${GP_PREBUILT:-$root/build-gpu}"
summary="$out/summary.md"
status=0
rows=()

# step NAME LOGFILE COMMAND...: run, record pass/fail and the log's last line.
step() {
    local name=$1 log="$out/$2"
    shift 2
    local t0=$SECONDS
    timeout "${GP_STEP_TIMEOUT:-3600}" "$@" >"$log" 2>&1
    local rc=$?
    local verdict=pass
    [ $rc -ne 0 ] && verdict="FAIL (exit $rc)" && status=1
    rows+=("| $name | $verdict | $((SECONDS - t0)) s | \`$(tail -n 1 "$log" | tr '|' '/')\` |")
    echo "gpu-check: $name: $verdict"
}

if [ -n "${GP_PREBUILT:-}" ]; then
    rows+=("| prebuilt binaries | used | | \`$build\` |")
    # scripts/gpu-pack.sh puts the libraries a bare CUDA image lacks in lib/.
    [ -d "$build/lib" ] && export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
    step "configure + build (nvcc, sm_80/sm_90)" build.log \
        sh -c "cmake -S '$root' -B '$build' -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build '$build' -j $(nproc) --target all gp_tests gp_bench_cuda_adamw test_cuda_fp8_cvt"
    if ! grep -q "CUDA backend ON" "$out/build.log"; then
        rows+=("| CUDA backend | FAIL | | nvcc not found at configure time: the device tests would only skip |")
        status=1
    fi
fi
step "the GPU's fp8 cvt against gp_elem_cast, all 2^32 inputs (sm_89+)" fp8-cvt.log \
    "$build/tests/test_cuda_fp8_cvt"
step "device parity: sampled conversions, accumulate_many, every preset" parity.log \
    "$build/tests/test_cuda_parity"
step "example CUDA plugin on the device" plugin.log \
    "$build/tests/test_cuda_example_plugin" "$build/examples/plugins"
# CUDA's fork rule: registering no worker program, the plugin's forked worker (CUDA
# touched before the fork) must be refused naming cudaErrorInitializationError.
step "example CUDA plugin: fork-only worker after CUDA init refused" plugin-fork.log \
    "$build/tests/test_cuda_example_plugin" --fork-only "$build/examples/plugins"
step "example CUDA plugin through gradprec run (worker: gradprec __worker)" plugin-cli.log \
    sh -c "'$build/gradprec' run --quiet --preset lora-bf16-accum --preset lora-fp32-accum \
           --backend plugin:'$build/examples/plugins/libgp_example_cuda_plugin.so' --compare cuda \
           --out '$out/plugin-cli'; rc=\$?; grep -q '\"backend_mismatches\": 0' '$out/plugin-cli/report.json' && \
           [ \$rc -le 1 ] && echo 'example CUDA plugin == cuda backend through the CLI'"
step "default suite --backend cuda --compare cpu" suite.log \
    sh -c "'$build/gradprec' run --quiet -j $(nproc) --backend cuda --compare cpu --out '$out/suite'; rc=\$?; \
           grep -q '\"backend_mismatches\": 0' '$out/suite/report.json' && \
           ! grep -q '\"\\(backend\\|optimizer\\)_mismatches\": [1-9]' '$out/suite/report.json' && \
           [ \$rc -le 1 ] && echo 'no backend or optimizer mismatches'"
step "fuzz corpus 'backend' replayed on the device" fuzz.log \
    sh -c "'$build/fuzz/fuzz_backend_regress' '$root'/fuzz/corpus/backend/* && echo 'corpus replayed'"

step "GPU benchmark: fused AdamW kernel vs device-to-device copy" bench.log \
    "$build/bench/gp_bench_cuda_adamw"
py=${GP_PYTHON:-python3}
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" GRADPREC_LIB="$build/libgradprec.so"
step "torch CUDA AdamW adapters against the CPU emulation" torch-adapters.log \
    "$py" "$root/scripts/gpu_torch_adapters.py" "$build/gradprec"
step "host CPU: torch fp32 sqrt against IEEE" mkl-sqrt.log \
    "$py" "$root/scripts/mkl-sqrt-probe.py" "$out/mkl-sqrt"
"$py" "$root/bench/gp_bench_torch_adamw.py" >"$out/bench-torch.log" 2>&1
torch_rc=$?
case $torch_rc in
    0) rows+=("| GPU benchmark: torch fused AdamW vs device-to-device copy | pass | | see below |") ;;
    77) rows+=("| GPU benchmark: torch fused AdamW | skipped | | \`$(tail -n 1 "$out/bench-torch.log" | tr '|' '/')\` |") ;;
    *) rows+=("| GPU benchmark: torch fused AdamW | FAIL (exit $torch_rc) | | \`$(tail -n 1 "$out/bench-torch.log" | tr '|' '/')\` |")
       status=1 ;;
esac

if [ "${GP_SKIP_FULL_PARITY:-0}" = 1 ]; then
    rows+=("| device parity, all 2^32 inputs | skipped | | GP_SKIP_FULL_PARITY=1 |")
else
    step "device parity, all 2^32 inputs (GP_PARITY_FULL=1)" parity-full.log \
        env GP_PARITY_FULL=1 "$build/tests/test_cuda_parity"
fi

# "| **AdamW / copy** | **R** |" of a benchmark's output -> R
ratio() { sed -n 's/^| \*\*AdamW \/ copy\*\* | \*\*\([0-9.]*\)\*\* |$/\1/p' "$1"; }

{
    echo "# gradprec GPU check"
    echo
    echo "$(nvidia-smi -L | head -n 1); $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
    echo
    echo "| step | result | time | last line of its log |"
    echo "|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "## GPU benchmarks (this device, one run each)"
    echo
    if grep -q '^| ' "$out/bench.log"; then grep '^| ' "$out/bench.log"; else echo "gradprec: not measured (see bench.log)"; fi
    echo
    if [ $torch_rc -eq 0 ]; then
        grep '^| ' "$out/bench-torch.log"
        g=$(ratio "$out/bench.log") t=$(ratio "$out/bench-torch.log")
        if [ -n "$g" ] && [ -n "$t" ]; then
            echo
            echo "gradprec's fraction of the copy bandwidth over torch's: $(awk -v g="$g" -v t="$t" 'BEGIN { printf "%.3f", g / t }')"
        fi
    else
        echo "torch fused AdamW: not measured ($(tail -n 1 "$out/bench-torch.log"))"
    fi
    echo
    echo "## torch's CUDA AdamW against the CPU emulation"
    echo
    grep '^| ' "$out/torch-adapters.log" || echo "not measured (see torch-adapters.log)"
    echo
    echo "Logs: $out/*.log"
} >"$summary"
echo "gpu-check: summary in $summary"
exit $status
