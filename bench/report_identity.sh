#!/bin/sh
# report_identity.sh OLD_GRADPREC NEW_GRADPREC [SCENARIO.yaml...]
# Runs the default suite (-j 1) and each scenario given with two builds of gradprec and
# compares report.json, report.md, report.xml and report.html byte for byte (timing.json
# differs by design). For work that must not change reports (bench/README.md,
# "Throughput"): build the old commit elsewhere (git archive OLD | tar -x -C DIR; cmake
# there) and pass both binaries. Prints each pair's CPU seconds; exits 1 on a difference.
set -u
old=$1 new=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
run() { # run BINARY OUTDIR ARGS...
    bin=$1 out=$2
    shift 2
    /usr/bin/time -f "%U" -o "$out.cpu" "$bin" run --quiet -j 1 --out "$out" "$@" >/dev/null 2>&1
    rc=$?
    [ $rc -le 1 ] || { echo "$bin run $* exited $rc"; status=1; }
}
i=0
for what in suite "$@"; do
    i=$((i + 1))
    if [ "$what" = suite ]; then set -- --suite default; else set -- "$what"; fi
    run "$old" "$dir/old$i" "$@"
    run "$new" "$dir/new$i" "$@"
    for f in report.json report.md report.xml report.html; do
        cmp -s "$dir/old$i/$f" "$dir/new$i/$f" || { echo "DIFFERS: $what $f"; status=1; }
    done
    echo "$what: CPU s old $(cat "$dir/old$i.cpu") new $(cat "$dir/new$i.cpu")"
done
[ $status = 0 ] && echo "reports byte-identical"
exit $status
