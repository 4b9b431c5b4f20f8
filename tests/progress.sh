#!/bin/sh
# progress.sh GP SCENARIO OUT — the progress line of `gradprec run` (docs/commands.md):
# shown on a terminal (stderr a pty made by script(1)), never on a pipe or a file, and
# not with --quiet. GRADPREC_PROGRESS_AFTER=0 draws from the start, so a run of a second
# shows it (by default it waits 2 s: a short run shows nothing).
set -u
GP=$1 SC=$2 OUT=$3
mkdir -p "$OUT"
fail() { echo "FAIL: $*"; exit 1; }
export GRADPREC_PROGRESS_AFTER=0
unset GRADPREC_PROGRESS

# stderr a file, stdout a pipe: nothing on stderr, no carriage return on stdout
rm -rf "$OUT/pipe"
"$GP" run -j 2 "$SC" --out "$OUT/pipe" 2> "$OUT/pipe.err" | cat > "$OUT/pipe.out"
[ -s "$OUT/pipe.err" ] && { cat "$OUT/pipe.err"; fail "something on stderr when it is not a terminal"; }
grep -q "$(printf '\r')" "$OUT/pipe.out" && fail "a carriage return on stdout (a pipe)"
grep -q "ETA" "$OUT/pipe.out" && fail "the progress line on stdout (a pipe)"

# forced on a file: the line is there (the check above would see it)
rm -rf "$OUT/forced"
GRADPREC_PROGRESS=always "$GP" run -j 2 "$SC" --out "$OUT/forced" 2> "$OUT/forced.err" > /dev/null
grep -q "ETA" "$OUT/forced.err" || fail "GRADPREC_PROGRESS=always drew no progress line"
grep -q "/s ETA" "$OUT/forced.err" || fail "no rate in the progress line"

if command -v script > /dev/null 2>&1; then
    # a terminal: script(1) runs the command on a pty and copies what it wrote
    rm -rf "$OUT/tty" "$OUT/quiet"
    script -qec "$GP run -j 2 $SC --out $OUT/tty > /dev/null" /dev/null > "$OUT/tty.log" 2>&1
    grep -q "ETA" "$OUT/tty.log" || { cat "$OUT/tty.log"; fail "no progress line on a terminal"; }
    script -qec "$GP run --quiet -j 2 $SC --out $OUT/quiet > /dev/null" /dev/null > "$OUT/quiet.log" 2>&1
    grep -q "ETA" "$OUT/quiet.log" && fail "a progress line with --quiet"
    echo "ok: terminal checked with script(1)"
else
    echo "script(1) not found: the terminal case is not checked"
fi
echo "ok: nothing on a pipe; the line on a terminal and when forced"
