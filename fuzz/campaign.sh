#!/usr/bin/env bash
# campaign.sh — a local fuzzing campaign over every libFuzzer target (fuzz/README.md):
# builds the targets (clang, ASan+UBSan), runs each in fork mode for a time budget,
# merges what it found against the committed corpus, minimizes every crash and turns
# it into a scenario (`gradprec repro`) where the target decodes scenarios, and writes
# OUTDIR/summary.md and OUTDIR/summary.json.
#
# usage: fuzz/campaign.sh [--update-corpus] [--build-dir DIR] [--targets "a b"]
#                         SECONDS_PER_TARGET JOBS OUTDIR
#   SECONDS_PER_TARGET  -max_total_time of each target's fork-mode run
#   JOBS                -fork=JOBS parallel jobs (and the build's -j)
#   OUTDIR              per target: corpus/ (new inputs), crashes/ (artifacts,
#                       minimized reproducers, their scenario YAML), findings/
#                       (GP_FINDINGS_DIR), fuzz.log, merge.log
#   --update-corpus     copy the inputs that add coverage into fuzz/corpus/NAME
#                       (default: only count them; the committed corpus is untouched)
#   --build-dir DIR     default: build-fuzz at the top of the checkout (as `make fuzz`)
#   --targets LIST      default: GP_FUZZ_TARGETS of fuzz/CMakeLists.txt
# Exit: 0 no crash, 1 a target crashed (see the summary), 2 bad usage, 3 build failure.
set -euo pipefail

usage() {
    sed -n '7,21p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
UPDATE=0
BUILD="$ROOT/build-fuzz"
TARGETS=""
while [ $# -gt 0 ]; do
    case "$1" in
    --update-corpus) UPDATE=1 ;;
    --build-dir) [ $# -ge 2 ] || usage; BUILD=$2; shift ;;
    --targets) [ $# -ge 2 ] || usage; TARGETS=$2; shift ;;
    -h | --help) usage 0 ;;
    --*) echo "campaign.sh: unknown option $1" >&2; usage ;;
    *) break ;;
    esac
    shift
done
[ $# -eq 3 ] || usage
SECS=$1 JOBS=$2 OUT=$3
case "$SECS$JOBS" in *[!0-9]*) echo "campaign.sh: SECONDS_PER_TARGET and JOBS are integers" >&2; exit 2 ;; esac
[ "$SECS" -ge 1 ] && [ "$JOBS" -ge 1 ] || { echo "campaign.sh: SECONDS_PER_TARGET and JOBS are >= 1" >&2; exit 2; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
[ -n "$TARGETS" ] || TARGETS=$(sed -n 's/^set(GP_FUZZ_TARGETS \(.*\))$/\1/p' "$ROOT/fuzz/CMakeLists.txt")
DECODER_TARGETS=" decode backend accumulate metamorphic " # `gradprec repro --target` knows them

# ---- build ----
echo "campaign: building $TARGETS in $BUILD"
if ! { cmake -S "$ROOT" -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DGP_FUZZ=ON -DGP_CUDA=OFF >"$OUT/build.log" 2>&1 &&
       cmake --build "$BUILD" -j "$JOBS" --target gradprec $(for t in $TARGETS; do printf 'fuzz_%s ' "$t"; done) \
             >>"$OUT/build.log" 2>&1; }; then
    tail -20 "$OUT/build.log" >&2
    echo "campaign: build failed (log: $OUT/build.log)" >&2
    exit 3
fi
GP="$BUILD/gradprec"

# ---- helpers ----
json_str() { # a JSON string literal
    printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | tr '\t\n' '  ')"
}
# FIELD (cov, ft, exec/s) of the last fork-mode status line
# ("#N: cov: C ft: F corp: K exec/s E oom/timeout/crash: ... time: Ts job: J ...").
stat_of() { # FIELD LOG
    grep -E '^#[0-9]+:? .*cov: ' "$2" | tail -1 | sed -n "s|.* $1:\{0,1\} \([0-9]*\).*|\1|p"
}

: >"$OUT/summary.rows"
TOTAL_CRASHES=0
for t in $TARGETS; do
    bin="$BUILD/fuzz/fuzz_$t"
    d="$OUT/$t"
    rm -rf "$d"
    mkdir -p "$d/corpus" "$d/crashes" "$d/findings"
    seeds="$ROOT/fuzz/corpus/$t"
    echo "campaign: $t: ${SECS}s, $JOBS jobs"
    # fork mode: the first corpus directory receives new inputs; the committed seeds are read
    (cd "$d" && GP_FINDINGS_DIR="$d/findings" "$bin" -fork="$JOBS" -max_total_time="$SECS" -ignore_crashes=1 \
        -artifact_prefix="$d/crashes/" -print_final_stats=1 "$d/corpus" "$seeds" >"$d/fuzz.log" 2>&1) || true
    cov=$(stat_of cov "$d/fuzz.log"); ft=$(stat_of ft "$d/fuzz.log"); eps=$(stat_of 'exec/s' "$d/fuzz.log")
    corp=$(find "$d/corpus" -type f | wc -l)
    findings=$(find "$d/findings" -name '*.yaml' -type f | wc -l)
    timeouts=$(find "$d/crashes" -name 'timeout-*' -type f | wc -l)
    ooms=$(find "$d/crashes" -name 'oom-*' -type f | wc -l)

    # crashes: minimize each (at most 10 per target), then its scenario where there is one
    crash_json="" crash_md="" ncrash=0
    for c in $(find "$d/crashes" \( -name 'crash-*' -o -name 'leak-*' \) -type f | sort | head -10); do
        ncrash=$((ncrash + 1))
        name=$(basename "$c")
        min="$d/crashes/minimized-$name"
        (cd "$d" && "$bin" -minimize_crash=1 -runs=20000 -max_total_time=60 -exact_artifact_path="$min" "$c" \
            >"$d/crashes/minimize-$name.log" 2>&1) || true
        [ -s "$min" ] || cp "$c" "$min"
        what=$(grep -m1 -E 'check failed|ERROR: [A-Za-z]+Sanitizer|SUMMARY' "$d/crashes/minimize-$name.log" 2>/dev/null ||
               grep -m1 -E 'check failed|ERROR: |SUMMARY' "$d/fuzz.log" || true)
        repro="" repro_note="not a decoder-based target"
        case "$DECODER_TARGETS" in
        *" $t "*)
            if "$GP" repro --target "$t" --out "$min.yaml" "$min" 2>"$min.repro.err"; then
                repro="$min.yaml" repro_note="ok"
            else
                repro_note=$(head -1 "$min.repro.err")
            fi ;;
        esac
        crash_json="$crash_json${crash_json:+, }{\"artifact\": $(json_str "$c"), \"minimized\": $(json_str "$min"), \"what\": $(json_str "$what"), \"repro_yaml\": $( [ -n "$repro" ] && json_str "$repro" || echo null), \"repro_note\": $(json_str "$repro_note")}"
        crash_md="$crash_md  - \`$min\` ($(wc -c <"$min") bytes): ${what:-?}; repro: ${repro:-$repro_note}"$'\n'
    done
    TOTAL_CRASHES=$((TOTAL_CRASHES + ncrash))

    # merge the new inputs against the committed corpus: how many would it gain?
    tmp=$(mktemp -d)
    cp -r "$seeds/." "$tmp/" 2>/dev/null || true
    before=$(find "$tmp" -type f | wc -l)
    (cd "$d" && "$bin" -merge=1 "$tmp" "$d/corpus" >"$d/merge.log" 2>&1) || true
    added=$(( $(find "$tmp" -type f | wc -l) - before ))
    updated=false
    if [ "$UPDATE" -eq 1 ] && [ "$added" -gt 0 ]; then
        for f in "$tmp"/*; do
            [ -e "$seeds/$(basename "$f")" ] || cp "$f" "$seeds/"
        done
        updated=true
    fi
    rm -rf "$tmp"

    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "${cov:-?}" "${ft:-?}" "${eps:-?}" "$corp" "$ncrash" \
        "$timeouts" "$ooms" "$findings" "$added" "$updated" >>"$OUT/summary.rows"
    printf '%s' "$crash_json" >"$d/crashes.json"
    printf '%s' "$crash_md" >"$d/crashes.md"
done

# ---- summary.md / summary.json ----
{
    echo "# Fuzzing campaign"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ): ${SECS}s per target, -fork=$JOBS, build $BUILD, corpus update: $([ "$UPDATE" -eq 1 ] && echo yes || echo no)"
    echo
    echo "| target | cov | ft | exec/s | new corpus | crashes | timeouts | ooms | findings | would add to fuzz/corpus |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    while IFS=$'\t' read -r t cov ft eps corp nc to oo fi ad up; do
        echo "| $t | $cov | $ft | $eps | $corp | $nc | $to | $oo | $fi | $ad$([ "$up" = true ] && echo ' (added)') |"
    done <"$OUT/summary.rows"
    echo
    echo "cov / ft: libFuzzer's covered edges and features at the last status line; exec/s: its rate"
    echo "over all jobs; findings: scenario YAML files in OUTDIR/TARGET/findings (GP_FINDINGS_DIR)."
    while IFS=$'\t' read -r t _ _ _ _ nc _; do
        if [ "$nc" -gt 0 ]; then
            echo
            echo "## $t: $nc crash(es)"
            echo
            cat "$OUT/$t/crashes.md"
        fi
    done <"$OUT/summary.rows"
} >"$OUT/summary.md"
{
    printf '{\n  "seconds_per_target": %s,\n  "jobs": %s,\n  "corpus_updated": %s,\n  "targets": [' "$SECS" "$JOBS" \
        "$([ "$UPDATE" -eq 1 ] && echo true || echo false)"
    sep=""
    while IFS=$'\t' read -r t cov ft eps corp nc to oo fi ad up; do
        num() { case "$1" in '' | *[!0-9]*) echo null ;; *) echo "$1" ;; esac; }
        printf '%s\n    {"target": %s, "cov": %s, "ft": %s, "exec_per_sec": %s, "new_corpus": %s, "crashes": [%s], "timeouts": %s, "ooms": %s, "findings": %s, "would_add_to_corpus": %s, "corpus_updated": %s}' \
            "$sep" "$(json_str "$t")" "$(num "$cov")" "$(num "$ft")" "$(num "$eps")" "$corp" "$(cat "$OUT/$t/crashes.json")" \
            "$to" "$oo" "$fi" "$ad" "$up"
        sep=","
    done <"$OUT/summary.rows"
    printf '\n  ],\n  "total_crashes": %s\n}\n' "$TOTAL_CRASHES"
} >"$OUT/summary.json"
rm -f "$OUT/summary.rows"
for t in $TARGETS; do rm -f "$OUT/$t/crashes.json" "$OUT/$t/crashes.md"; done
cat "$OUT/summary.md"
[ "$TOTAL_CRASHES" -eq 0 ]
