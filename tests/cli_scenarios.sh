#!/bin/sh
# cli_scenarios.sh — the user-facing scenario checks, run by CTest:
#   show-roundtrip GP OUT        every preset printed by `gradprec show` loads back to the
#                                same scenario (same canonical YAML; the same report.json
#                                as the preset itself)
#   docs-yaml GP OUT SRC         every ```yaml block of README.md and docs/*.md loads
#   examples GP OUT SRC          every examples/scenarios/*.yaml runs and gets the verdict
#                                its "# verdict:" comment line states (the worst of its
#                                scenarios, for a sweep)
set -u
mode=$1 GP=$2 OUT=$3
mkdir -p "$OUT"
fail() { echo "FAIL: $*"; exit 1; }

case $mode in
show-roundtrip)
    D=$OUT/show; rm -rf "$D"; mkdir -p "$D"
    files=""
    for p in $("$GP" run --list | cut -d' ' -f1); do
        "$GP" show "$p" > "$D/$p.yaml" || fail "show $p"
        grep -v '^#' "$D/$p.yaml" > "$D/$p.body"
        "$GP" show "$D/$p.yaml" > "$D/$p.again" || fail "show $D/$p.yaml does not load"
        cmp "$D/$p.body" "$D/$p.again" || fail "$p: the printed YAML reads back to another scenario"
        files="$files $D/$p.yaml"
    done
    [ -n "$files" ] || fail "no presets listed"
    "$GP" run --quiet --out "$D/presets" > /dev/null
    "$GP" run --quiet --out "$D/files" $files > /dev/null
    cmp "$D/presets/report.json" "$D/files/report.json" || fail "the shown presets report differently from the presets"
    echo "ok: $(echo $files | wc -w) presets round-trip"
    ;;
docs-yaml)
    SRC=$4 D=$OUT/docs-yaml; rm -rf "$D"; mkdir -p "$D"
    n=0
    for md in "$SRC/README.md" "$SRC"/docs/*.md; do
        [ -f "$md" ] || continue
        base=$(basename "$md" .md)
        # one file per ```yaml block, named after the document and the block's first line
        awk -v d="$D" -v b="$base" '
            /^```yaml[ \t]*$/ { inb = 1; k++; f = sprintf("%s/%s-%03d-line%d.yaml", d, b, k, NR); next }
            /^```/ && inb { inb = 0; close(f); next }
            inb { print > f }' "$md"
    done
    for f in "$D"/*.yaml; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        "$GP" show "$f" > /dev/null || fail "$(basename "$f"): a YAML block of the docs does not load"
    done
    # the reference documents a dozen examples; fewer means the extraction broke
    [ "$n" -ge 10 ] || fail "only $n yaml blocks found in the docs"
    echo "ok: $n yaml blocks load"
    ;;
examples)
    SRC=$4 D=$OUT/examples; rm -rf "$D"; mkdir -p "$D"
    n=0
    for f in "$SRC"/examples/scenarios/*.yaml; do
        n=$((n + 1))
        name=$(basename "$f" .yaml)
        want=$(sed -n 's/^# verdict: *\([a-z]*\).*/\1/p' "$f" | head -1)
        [ -n "$want" ] || fail "$name: no '# verdict:' line"
        "$GP" run --quiet --out "$D/$name" "$f" > "$D/$name.txt"
        rc=$?
        [ $rc -le 1 ] || fail "$name: gradprec run exit $rc"
        # the summary's verdict (the first in report.json): the worst of the file's scenarios
        got=$(grep -o '"verdict": "[a-z]*"' "$D/$name/report.json" | head -1 | sed 's/.*: "\(.*\)"/\1/')
        [ "$got" = "$want" ] || { cat "$D/$name.txt"; fail "$name: verdict $got, the file says $want"; }
    done
    [ "$n" -ge 8 ] || fail "only $n example files"
    echo "ok: $n example files"
    ;;
*) fail "unknown mode $mode" ;;
esac
