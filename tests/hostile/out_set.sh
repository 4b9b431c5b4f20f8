#!/bin/sh
# out_set.sh GRADPREC MODE — the report folder of `gradprec run` is replaced as a set.
# A complete set: the folder holds exactly report.json, report.md, report.xml,
# report.html and timing.json, and the first four are byte for byte those of one
# reference run (A: seed 1, B: seed 2; timing.json only has to parse as JSON).
#   MODE symlink: symlinks planted at report.json.tmp (the old fixed temporary name) and
#                 at report.json never redirect a write into their target.
#   MODE kill:    gradprec killed with SIGKILL at random points, 60 times: the folder is
#                 always a complete A or B set; the next finished run leaves no temporary.
#   MODE tmpfs:   on a 64 KiB file system a run that fills the disk exits 3 leaving the
#                 old complete set (or no folder) and no temporary (exit 77: no mount).
set -u
GP=$1 MODE=$2
W=$(mktemp -d /tmp/gp-outset.XXXXXX) || exit 1
cleanup() { [ -n "${MNT:-}" ] && umount "$MNT" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
cd "$W" || exit 1
RUN="$GP run --quiet --preset lora-fp32-accum"
$RUN --seed 1 --out refA >/dev/null && $RUN --seed 2 --out refB >/dev/null || { echo "setup failed"; exit 1; }
cmp -s refA/report.json refB/report.json && { echo "setup: A and B are equal"; exit 1; }

# complete DIR: 0 when DIR is a complete A or B set (prints which)
complete() {
  names=$(ls -A "$1" | tr '\n' ' ')
  [ "$names" = "report.html report.json report.md report.xml timing.json " ] || { echo "files: $names"; return 1; }
  python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$1/timing.json" || return 1
  for ref in refA refB; do
    same=1
    for f in report.json report.md report.xml report.html; do cmp -s "$1/$f" "$ref/$f" || same=0; done
    [ $same -eq 1 ] && { echo "$ref"; return 0; }
  done
  echo "a mix of sets"; return 1
}
strays() { ls -A "$1" | grep '^\.out\.gp-' ; }

case $MODE in
symlink)
  cp -r refA out
  echo "victim" > victim.txt
  ln -s ../victim.txt out/report.json.tmp
  $GP run --quiet --preset lora-fp32-accum --seed 2 --out out >/dev/null 2>err.txt; rc=$?
  [ $rc -eq 2 ] && grep -q "holds 'report.json.tmp', which gradprec did not write" err.txt || { echo "planted .tmp: rc $rc: $(cat err.txt)"; exit 1; }
  [ "$(cat victim.txt)" = "victim" ] || { echo "the victim was written"; exit 1; }
  rm out/report.json.tmp
  rm out/report.json && ln -s ../victim.txt out/report.json   # a set name may be a symlink
  $GP run --quiet --preset lora-fp32-accum --seed 2 --out out >/dev/null || { echo "run over a symlinked report.json failed"; exit 1; }
  [ "$(cat victim.txt)" = "victim" ] || { echo "the victim was written through report.json"; exit 1; }
  [ -L out/report.json ] && { echo "report.json is still a symlink"; exit 1; }
  [ "$(complete out)" = refB ] || { echo "not the new set"; exit 1; }
  [ -z "$(strays .)" ] || { echo "temporaries left: $(strays .)"; exit 1; }
  echo "symlinks: not followed, the folder holds the new complete set"
  ;;
kill)
  t0=$(date +%s%N); $RUN --seed 1 --out out >/dev/null; t1=$(date +%s%N)
  ms=$(( (t1 - t0) / 1000000 + 1 ))   # one whole run, in milliseconds
  seen=""
  i=0
  while [ $i -lt 60 ]; do
    seed=$((i % 2 + 1))
    d=$(awk -v s=$i -v m=$ms 'BEGIN { srand(s * 7919 + 17); printf "%.4f", rand() * m * 1.2 / 1000 }')
    $RUN --seed $seed --out out >/dev/null 2>&1 &
    pid=$!
    sleep "$d"
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    got=$(complete out) || { echo "after a kill at $d s (run $i): $got"; exit 1; }
    seen="$seen $got"
    i=$((i + 1))
  done
  $RUN --seed 2 --out out >/dev/null || { echo "final run failed"; exit 1; }
  [ "$(complete out)" = refB ] || { echo "final set incomplete"; exit 1; }
  [ -z "$(strays .)" ] || { echo "temporaries left after a finished run: $(strays .)"; exit 1; }
  echo "60 kills at random points within ${ms} ms: always a complete set (A: $(echo $seen | tr ' ' '\n' | grep -c refA), B: $(echo $seen | tr ' ' '\n' | grep -c refB))"
  ;;
tmpfs)
  MNT=$W/small
  mkdir "$MNT"
  if ! mount -t tmpfs -o size=64k tmpfs "$MNT" 2>/dev/null; then
    MNT=""; echo "cannot mount a 64 KiB tmpfs here (not root, or no mount permission): skipped"; exit 77
  fi
  # the default suite's set is larger than the whole file system: exit 3, nothing left
  $GP run --quiet --out "$MNT/out" >/dev/null 2>err.txt; rc=$?
  [ $rc -eq 3 ] && [ "$(wc -l < err.txt)" -eq 1 ] || { echo "full disk: rc $rc: $(cat err.txt)"; exit 1; }
  [ -z "$(ls -A "$MNT")" ] || { echo "left on the full disk: $(ls -A "$MNT")"; exit 1; }
  # one set fits, two do not: the second run fails and the first set stays whole
  $RUN --seed 1 --out "$MNT/out" >/dev/null || { echo "first set did not fit"; exit 1; }
  [ "$(complete "$MNT/out")" = refA ] || { echo "first set incomplete"; exit 1; }
  $RUN --seed 2 --out "$MNT/out" >/dev/null 2>err.txt; rc=$?
  [ $rc -eq 3 ] && [ "$(wc -l < err.txt)" -eq 1 ] || { echo "second set: rc $rc: $(cat err.txt)"; exit 1; }
  [ "$(complete "$MNT/out")" = refA ] || { echo "old set damaged"; exit 1; }
  [ -z "$(strays "$MNT")" ] || { echo "temporaries left: $(strays "$MNT")"; exit 1; }
  echo "64 KiB: full-disk runs exit 3 ($(cat err.txt)); the old set stays complete, no temporary left"
  ;;
esac
