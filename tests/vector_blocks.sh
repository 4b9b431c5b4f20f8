#!/bin/sh
# vector_blocks.sh GRADPREC GRADPREC_DEF OUT DIR...: the default suite and every scenario
# (*.yaml) of each DIR, run by both builds (-j 2: reports do not depend on it); report.json,
# report.md, report.xml and report.html must be byte-identical (tests/CMakeLists.txt).
set -u
gp=$1 def=$2 out=$3
shift 3
rm -rf "$out"
mkdir -p "$out"
status=0
i=0
for what in suite $(for d in "$@"; do ls "$d"/*.yaml; done); do
    i=$((i + 1))
    for b in vec def; do
        bin=$gp
        [ $b = def ] && bin=$def
        if [ "$what" = suite ]; then
            "$bin" run --quiet -j 2 --out "$out/$b$i" >/dev/null 2>"$out/$b$i.err"
        else
            "$bin" run --quiet -j 2 --out "$out/$b$i" "$what" >/dev/null 2>"$out/$b$i.err"
        fi
        rc=$?
        [ $rc -le 1 ] || { echo "$b run of $what exited $rc: $(cat "$out/$b$i.err")"; status=1; }
    done
    for f in report.json report.md report.xml report.html; do
        cmp -s "$out/vec$i/$f" "$out/def$i/$f" || { echo "DIFFERS: $what $f"; status=1; }
    done
done
[ $status -eq 0 ] && echo "$i runs: reports byte-identical"
exit $status
