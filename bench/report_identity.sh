#!/bin/sh
# report_identity.sh OLD_GRADPREC NEW_GRADPREC [SCENARIO.yaml...]
# Runs the default suite (-j 1) and each scenario given with two builds of gradprec and
# compares report.json, report.md, report.xml and report.html byte for byte (timing.json
# differs by design). For work that must not change reports (bench/README.md,
# "Throughput"): build the old commit elsewhere (git archive OLD | tar -x -C DIR; cmake
# there) and pass both binaries. Prints each pair's CPU seconds; exits 1 on a difference.
# PAIRS=N (default 1): each scenario runs N times with each build, old and new in turn,
# and the line gives the median CPU seconds of each and the median of the N new/old ratios
# (pairing keeps the ratio meaningful while the machine's speed drifts).
set -u
old=$1 new=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
pairs=${PAIRS:-1}
run() { # run BINARY OUTDIR ARGS...: appends its CPU seconds (user + system) to OUTDIR.cpu
    bin=$1 out=$2
    shift 2
    /usr/bin/time -f "%U %S" -o "$out.t" "$bin" run --quiet -j 1 --out "$out" "$@" >/dev/null 2>&1
    rc=$?
    [ $rc -le 1 ] || { echo "$bin run $* exited $rc"; status=1; }
    awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { print $1 + $2 }' "$out.t" >>"$out.cpu"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
i=0
for what in suite "$@"; do
    i=$((i + 1))
    if [ "$what" = suite ]; then set -- --suite default; else set -- "$what"; fi
    p=0
    while [ $p -lt "$pairs" ]; do
        run "$old" "$dir/old$i" "$@"
        run "$new" "$dir/new$i" "$@"
        p=$((p + 1))
    done
    for f in report.json report.md report.xml report.html; do
        cmp -s "$dir/old$i/$f" "$dir/new$i/$f" || { echo "DIFFERS: $what $f"; status=1; }
    done
    ratio=$(paste "$dir/new$i.cpu" "$dir/old$i.cpu" | awk '$2 > 0 { printf "%.3f\n", $1 / $2 }' | median)
    echo "$what: CPU s old $(median <"$dir/old$i.cpu") new $(median <"$dir/new$i.cpu") (median of $pairs; new/old $ratio)"
done
[ $status = 0 ] && echo "reports byte-identical"
exit $status
