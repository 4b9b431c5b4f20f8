#!/bin/sh
# wrong_plugins.sh GRADPREC PLUGIN_DIR OUT_DIR NAME... — the default suite as a net (issue
# 18). NAME `example`: the correct example plugin must pass the default suite with
# --compare cpu (exit 0). Any other NAME is a wrong plugin (the example plugin with one bug,
# examples/CMakeLists.txt's GP_WRONG_PLUGINS): it must fail the default suite with
# --compare cpu (exit 1: a scenario not as expected), and the first difference the report
# names must be in the output the bug corrupts; the stochastic-rounding ones (sr_*) must fail it without --compare too, with
# the score of the property they break among the failed checks (sr_unshifted: bias,
# sr_shared_pairs: independence across elements, sr_same_each_microbatch: across steps,
# sr_period_2_16: at every lag).
# CTest runs one NAME per case (default_suite_net/NAME).
gp=$1 plugins=$2 out=$3
shift 3
status=0
mkdir -p "$out"
run() { # run LABEL ARGS...: prints the exit code
    label=$1
    shift
    rm -rf "$out/$label"
    "$gp" run --quiet -j 2 --out "$out/$label" "$@" > "$out/$label.txt" 2>&1
    echo $?
}
for w in "$@"; do
    if [ "$w" = example ]; then
        rc=$(run example --backend "plugin:$plugins/libgp_example_plugin.so" --compare cpu)
        if [ "$rc" -ne 0 ]; then
            echo "example plugin: exit $rc, expected 0"; cat "$out/example.txt"; status=1
        else
            echo "example plugin: passes the default suite with --compare cpu"
        fi
        continue
    fi
    # the entry point and output the bug corrupts first (what the first difference must name)
    case $w in
    found_inf_after_unscale|misses_*) want="unscale found_inf";;
    inv_scale_fp16) want="unscale acc";;
    sumsq_sequential) want="grad_sumsq sumsq";;
    clip_divide) want="grad_scale grad";;
    kahan_comp_negated) want="accumulate comp";;
    adamw_comp_negated) want="adamw comp";;
    master_stale) want="adamw master";;
    m_unfused) want="adamw m";;
    v_unfused) want="adamw v";;
    scaler_backoff_keeps_tracker) want="scaler_update tracker";;
    scaler_*) want="scaler_update scale";;
    decay_after_update) want="adamw param";;
    *) want="accumulate acc";; # stochastic rounding, the window, FTZ, RTZ, fp8 decoding
    esac
    lib="$plugins/libgp_wrong_${w}_plugin.so"
    rc=$(run "$w" --backend "plugin:$lib" --compare cpu)
    first=$(grep -m1 "first difference: $want, " "$out/$w.txt" | sed 's/^ *//')
    if [ "$rc" -ne 1 ] || [ -z "$first" ]; then
        echo "wrong plugin $w: exit $rc with --compare cpu, expected 1 naming a first difference in $want"
        cat "$out/$w.txt"; status=1
    else
        echo "wrong plugin $w: fails with --compare cpu; $first"
    fi
    case $w in
    sr_unshifted) score=sr_bias_score;;
    sr_shared_pairs) score=sr_element_corr_score;;
    sr_same_each_microbatch) score=sr_step_corr_score;;
    sr_period_2_16) score=sr_lag_corr_score;;
    *) score="";;
    esac
    if [ -n "$score" ]; then
        rc=$(run "$w-alone" --backend "plugin:$lib")
        line=$(grep -m1 "^- \*\*$score = .*\*\* exceeds 1" "$out/$w-alone/report.md")
        if [ "$rc" -ne 1 ] || [ -z "$line" ]; then
            echo "wrong plugin $w: exit $rc without --compare, expected 1 with $score failed"; status=1
        else
            echo "wrong plugin $w: fails without --compare: $line"
        fi
    fi
done
exit $status
