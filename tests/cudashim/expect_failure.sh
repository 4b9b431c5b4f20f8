#!/bin/sh
# expect_failure.sh PATTERN COMMAND... — passes when COMMAND fails (exit status neither
# 0 nor 77, the skip code) and its output matches the extended regular expression
# PATTERN: a planted bug must be caught, and caught for the reason expected.
pattern=$1
shift
out=$(mktemp)
"$@" >"$out" 2>&1
rc=$?
tail -n 5 "$out"
if [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]; then
    echo "expect_failure: '$*' exited $rc: the planted bug was NOT caught"
    rm -f "$out"
    exit 1
fi
if ! grep -Eq "$pattern" "$out"; then
    echo "expect_failure: '$*' failed (exit $rc) but its output does not match /$pattern/"
    rm -f "$out"
    exit 1
fi
echo "expect_failure: caught (exit $rc, output matches /$pattern/)"
rm -f "$out"
exit 0
