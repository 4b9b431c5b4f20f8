#!/bin/sh
# seeded_bugs.sh DRIVER PLUGIN_DIR CORPUS_DIR [BUG...] — every seeded-bug plugin (BUG: the
# libgp_BUG_plugin.so of PLUGIN_DIR; by default the seven below), planted as the
# backend under test of fuzz_backend (GP_FUZZ_BACKEND), must make the regression driver
# crash on some file of the committed corpus: caught within |corpus| executions. The
# correct example plugin passes the same corpus (the ordinary fuzz/backend/* tests).
# Bugs: a bf16 accumulator claimed as fp32, each micro-batch averaged into the buffer
# (mean of micro-batch means), a Kahan accumulator that drops its compensation, biased
# stochastic rounding, Adam's bias correction one step off, eps inside the square root,
# Adam-style coupled weight decay.
driver=$1 plugins=$2 corpus=$3
shift 3
[ $# -gt 0 ] || set -- wrong_bf16 running_mean kahan_dropped biased_sr bc_off_by_one eps_in_sqrt coupled_wd
n=$(ls "$corpus" | wc -l)
status=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for bug in "$@"; do
    i=0 caught=""
    for f in "$corpus"/*; do
        i=$((i + 1))
        # caught = the driver aborts because the backends differ, or the stochastic
        # rounding fails a score (not for another reason)
        if ! GP_FUZZ_BACKEND="plugin:$plugins/libgp_${bug}_plugin.so" "$driver" "$f" >/dev/null 2>"$tmp"; then
            if grep -q "differs from the CPU emulation\|stochastic rounding fails" "$tmp"; then
                caught=$i
                break
            fi
            echo "seeded bug $bug: $(basename "$f") failed for another reason:"; cat "$tmp"
            status=1
        fi
    done
    if [ -n "$caught" ]; then
        echo "seeded bug $bug: caught at execution $caught of $n ($(basename "$f"))"
    else
        echo "seeded bug $bug: NOT caught by the $n corpus files"
        status=1
    fi
done
exit $status
