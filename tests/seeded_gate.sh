#!/bin/sh
# seeded_gate.sh GRADPREC PLUGIN_DIR OUT_DIR BASELINE NAME... — issue 27's acceptance: each
# wrong plugin NAME (examples/CMakeLists.txt's GP_WRONG_PLUGINS), run alone on the default
# suite (no --compare), must fail `gradprec gate` against the CPU baseline (exit 1), with a
# REGRESSED or CHANGED line; the lines are printed. CTest runs one NAME per case
# (seeded_gate/NAME).
gp=$1 plugins=$2 out=$3 baseline=$4
shift 4
status=0
mkdir -p "$out"
for w in "$@"; do
    rm -rf "$out/$w"
    "$gp" run --quiet -j 2 --out "$out/$w" --backend "plugin:$plugins/libgp_wrong_${w}_plugin.so" >/dev/null 2>&1
    "$gp" gate --baseline "$baseline" --current "$out/$w/report.json" > "$out/$w.gate.txt" 2>&1
    rc=$?
    if [ "$rc" -ne 1 ] || ! grep -q "^\(REGRESSED\|CHANGED\)" "$out/$w.gate.txt"; then
        echo "wrong plugin $w: gate exit $rc against the CPU baseline, expected 1"; cat "$out/$w.gate.txt"; status=1
    else
        echo "wrong plugin $w: fails the gate against the CPU baseline:"
        grep "^\(REGRESSED\|CHANGED\)" "$out/$w.gate.txt" | head -3
    fi
done
exit $status
