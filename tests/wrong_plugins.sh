#!/bin/sh
# wrong_plugins.sh GRADPREC PLUGIN_DIR OUT_DIR NAME... — the default suite as a net (issue
# 18): every wrong plugin (the example plugin with one bug, examples/CMakeLists.txt's
# GP_WRONG_PLUGINS) must fail the default suite with --compare cpu (exit 1: a scenario
# not as expected), the stochastic-rounding ones (sr_*) without --compare too; the
# correct example plugin must pass it with --compare cpu (exit 0). Prints each plugin's
# outcome and the first difference the report names.
gp=$1 plugins=$2 out=$3
shift 3
status=0
mkdir -p "$out"
run() { # run LABEL ARGS...: prints the exit code
    label=$1
    shift
    "$gp" run --quiet -j 2 --out "$out/$label" "$@" > "$out/$label.txt" 2>&1
    echo $?
}
rc=$(run example --backend "plugin:$plugins/libgp_example_plugin.so" --compare cpu)
if [ "$rc" -ne 0 ]; then
    echo "example plugin: exit $rc, expected 0"; cat "$out/example.txt"; status=1
else
    echo "example plugin: passes the default suite with --compare cpu"
fi
for w in "$@"; do
    lib="$plugins/libgp_wrong_${w}_plugin.so"
    rc=$(run "$w" --backend "plugin:$lib" --compare cpu)
    first=$(grep -m1 'first difference' "$out/$w.txt" | sed 's/^ *//')
    if [ "$rc" -ne 1 ]; then
        echo "wrong plugin $w: exit $rc with --compare cpu, expected 1"; cat "$out/$w.txt"; status=1
    else
        echo "wrong plugin $w: fails with --compare cpu; $first"
    fi
    case $w in sr_*)
        rc=$(run "$w-alone" --backend "plugin:$lib")
        if [ "$rc" -ne 1 ]; then
            echo "wrong plugin $w: exit $rc without --compare, expected 1"; status=1
        else
            echo "wrong plugin $w: fails without --compare: $(grep -m1 -B1 'NOT AS EXPECTED' "$out/$w-alone.txt" | head -1 | cut -c1-40)"
        fi;;
    esac
done
exit $status
