#!/bin/sh
# hostile_cases.sh GRADPREC PLUGIN_DIR SRC_DIR — the hostile-input table (issue 17): each
# case runs gradprec on malformed or hostile input and must exit with the given code
# (2 bad usage or input), print exactly one line on stderr (containing the given text),
# nothing on stdout, and leave the working folder (fixtures and outputs) unchanged.
set -u
GP=$1 PLUG=$2 SRC=$3
W=$(mktemp -d /tmp/gp-hostile.XXXXXX) || exit 1
O=$(mktemp -d /tmp/gp-hostile-out.XXXXXX) || exit 1
trap 'rm -rf "$W" "$O"' EXIT
cd "$W" || exit 1

# ---- fixtures ----
"$GP" run --quiet --preset lora-fp32-accum --out good >/dev/null || { echo "setup: run failed"; exit 1; }
cp good/report.json good.json
for i in 0 1 2; do
  "$GP" run --quiet --preset lora-fp32-accum --preset long-accum-bf16-k64 --preset fp16-tiny-grads-noscale \
      --shard $i/3 --out s$i >/dev/null 2>&1
  rc=$?; [ $rc -le 1 ] || { echo "setup: shard $i failed ($rc)"; exit 1; }
  cp s$i/report.json s$i.json
done
mkfifo fifo
mkdir dir foreign ins && echo x > foreign/notes.txt
printf 'steps: 1\n' > ins/report.json  # a scenario inside the folder the run would replace
echo text > file.txt
: > empty.yaml
printf 'name: same\n' > same1.yaml
printf 'name: same\nsteps: 2\n' > same2.yaml
printf 'steps: 2147483647\n' > steps.yaml
printf 'tensors: [{name: a, size: 2147483648}, {name: b, size: 2147483648}, {name: c, size: 2147483648}]\nsteps: 2\n' > huge.yaml
printf 'seed: 18446744073709551616\n' > seedbig.yaml
printf 'seed: -1\n' > seedneg.yaml
printf 'steps: 1\n---\nsteps: 2\n' > twodocs.yaml
printf 'steps: 1\000\n' > nul.yaml
printf 'steps: [1\n' > trunc.yaml
printf 'tensors: [{name: a, size: 10, grad: {dist: normal, scale: .nan}}]\n' > nan.yaml
python3 - <<'PY'
open('deep.yaml', 'w').write('[' * 120000)
open('deepmap.yaml', 'w').write(''.join('  ' * i + 'k%d:\n' % i for i in range(40)))
row = '[' + ','.join(['1.5'] * 1000) + ']'
open('alias.yaml', 'w').write('tensors:\n  - name: a\n    grad:\n      values: [&r ' + row + ', ' +
                              ', '.join(['*r'] * 65535) + ']\nbatch: {microbatches: 65536, tokens: 1}\n')
open('anchors.yaml', 'w').write('x: [' + ','.join('&a%d 1' % i for i in range(300)) + ']\n')
open('dense.yaml', 'w').write('tensors:\n  - name: a\n    grad:\n      values: [[' + ','.join(['1'] * 600000) +
                              ']]\nbatch: {microbatches: 1}\n')
open('big.bin', 'wb').write(b'\0' * (2 << 20))
open('deep.json', 'w').write('[' * 100000)
open('objbomb.json', 'w').write('{"schema": "gradprec-report/1", "scenarios": [], "x": [' +
                                ','.join(['{}'] * 400000) + ']}')
open('bigtol.json', 'w').write('{"default": {"rel": 0.1, "abs": 0}, "pad": "' + 'x' * (2 << 20) + '"}')
PY
ln -s good.json link.json
ln -s fifo fifolink
ln -s /dev/null nulllink
# a replayed dump stored under a report's name inside the folder --out names (issue 27)
mkdir rp
python3 - <<'PY'
import json, os, struct
h = json.dumps({"g/step0/mb0": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
open('rp/report.json', 'wb').write(struct.pack('<Q', len(h)) + h + struct.pack('<4f', 1, 2, 3, 4))
open('rp.yaml', 'w').write('name: rp\ntensors: [{name: g, grad: {replay: rp/report.json, key: g}}]\n'
                           'batch: {microbatches: 1}\nsteps: 1\n')
# the same for a twin dump (torch's state after each step), the gradient read elsewhere
def st(path, ents):
    hdr, data = {}, b''
    for k, v in ents.items():
        b = struct.pack('<%df' % len(v), *v)
        hdr[k] = {"dtype": "F32", "shape": [len(v)], "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(hdr).encode()
    open(path, 'wb').write(struct.pack('<Q', len(h)) + h + data)
os.mkdir('tw')
st('g.safetensors', {"g/step0/mb0": [1, 2, 3, 4], "g/weight": [0.5] * 4})
st('tw/report.json', {"g/step0/param": [0.5] * 4, "g/step0/exp_avg": [0] * 4, "g/step0/exp_avg_sq": [0] * 4})
open('tw.yaml', 'w').write('name: tw\ntensors: [{name: g, grad: {replay: g.safetensors, key: g}, weight: {replay: '
                           'g.safetensors, key: g}, twin: {replay: tw/report.json, key: g}}]\n'
                           'batch: {microbatches: 1}\nsteps: 1\n')
PY
cp "$SRC/fuzz/corpus/decode/ascending_256" fuzzin

# every path, its type and size, and the contents of every regular file
snapshot() { { find . -printf '%p %y\n' | sort; find . -type f -exec md5sum {} + | sort; } | md5sum; }
BEFORE=$(snapshot)
pass=0 fail=0 n=0
# c RC TEXT ARGS... : gradprec ARGS must exit RC with one line on stderr containing TEXT
c() {
  want=$1 text=$2; shift 2
  n=$((n + 1))
  timeout 60 "$GP" "$@" >"$O/out" 2>"$O/err" </dev/null
  rc=$?
  lines=$(wc -l < "$O/err") outb=$(wc -c < "$O/out")
  msg=$(cat "$O/err")
  ok=1
  [ "$rc" -eq "$want" ] || ok=0
  [ "$lines" -eq 1 ] || ok=0
  [ "$outb" -eq 0 ] || ok=0
  case $msg in *"$text"*) ;; *) ok=0 ;; esac
  case $msg in *":-1:-1"*) ok=0 ;; esac  # no bogus position
  now=$(snapshot)
  [ "$now" = "$BEFORE" ] || { ok=0; msg="$msg [the folder changed]"; BEFORE=$now; }
  if [ $ok -eq 1 ]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL #$n (rc $rc, want $want; $lines lines; $outb bytes out): gradprec $*"; echo "   $msg"
  fi
}

# top level
c 2 "no command given" 
c 2 "unknown command" frobnicate
# run: numbers and options
c 2 "--seed '18446744073709551616'" run --seed 18446744073709551616
c 2 "--seed ' -1'" run --seed ' -1'
c 2 "--seed '-1'" run --seed -1
c 2 "--seed '+1'" run --seed +1
c 2 "--seed '0x10'" run --seed 0x10
c 2 "--seed '1e3'" run --seed 1e3
c 2 "--seed ''" run --seed ''
c 2 "needs a value" run --seed
c 2 "--shard '/2'" run --shard /2
c 2 "--shard '1/'" run --shard 1/
c 2 "--shard '2/2'" run --shard 2/2
c 2 "--shard '0/0'" run --shard 0/0
c 2 "--shard '0/2/3'" run --shard 0/2/3
c 2 "--shard ' 0/2'" run --shard ' 0/2'
c 2 "--shard '-1/2'" run --shard -1/2
c 2 "-j '0'" run -j 0
c 2 "-j '257'" run -j 257
c 2 "-j ''" run -j ''
c 2 "--max-seconds '0'" run --max-seconds 0
c 2 "--max-seconds 'x'" run --max-seconds x
c 2 "unknown option" run --frobnicate
# run: bad --out, refused before anything runs
c 2 "--out: empty path" run --out ''
c 2 "is a character device, not a folder" run --preset lora-fp32-accum --out /dev/null
c 2 "is a regular file, not a folder" run --preset lora-fp32-accum --out file.txt
c 2 "is a FIFO (named pipe), not a folder" run --preset lora-fp32-accum --out fifo
c 2 "holds 'notes.txt', which gradprec did not write" run --preset lora-fp32-accum --out foreign
c 2 "holds the input ins/report.json" run ins/report.json --out ins
c 2 "--out rp: holds the input rp/report.json" run rp.yaml --out rp
c 2 "--out rp: holds the input rp/report.json" advise rp.yaml --out rp
c 2 "--out tw: holds the input tw/report.json" run tw.yaml --out tw
# run: scenario files
c 2 "fifo: is a FIFO (named pipe), not a regular file" run fifo
c 2 "/dev/zero: is a character device, not a regular file" run /dev/zero
c 2 "dir: is a directory" run dir
c 2 "missing.yaml: cannot open: No such file or directory" run missing.yaml
c 2 "the scenario is empty" run empty.yaml
c 2 "nested deeper than 32 levels" run deep.yaml
c 2 "nested deeper than 32 levels" run deepmap.yaml
c 2 "aliases expand the scenario" run alias.yaml
c 2 "more than 256 anchors" run anchors.yaml
c 2 "too dense" run dense.yaml
c 2 "more than the limit of 2^40" run steps.yaml
c 2 "more than the limit of 64 GiB" run huge.yaml
c 2 "seed is too large" run seedbig.yaml
c 2 "seed must be a non-negative integer" run seedneg.yaml
c 2 "only one YAML document" run twodocs.yaml
c 2 "nul.yaml:1:" run nul.yaml
c 2 "trunc.yaml:2:" run trunc.yaml
c 2 "is NaN" run nan.yaml
c 2 "two scenarios are named 'same'" run same1.yaml same2.yaml
c 2 "two scenarios are named 'lora-fp32-accum'" run --preset lora-fp32-accum --preset lora-fp32-accum
c 2 "unknown preset" run --preset no-such-preset
c 2 "unknown suite" run --suite nightly
# run: backends and plugins
c 2 "unknown backend" run --preset lora-fp32-accum --backend tpu
c 2 "--compare: unknown backend" run --preset lora-fp32-accum --compare tpu
c 2 "plugin ./fifo: is a FIFO" run --preset lora-fp32-accum --backend plugin:./fifo
c 2 "plugin ./dir: is a directory" run --preset lora-fp32-accum --backend plugin:./dir
c 2 "write plugin:./libmine.so" run --preset lora-fp32-accum --backend plugin:libmine.so
c 2 "cannot load" run --preset lora-fp32-accum --backend plugin:./file.txt
c 2 "does not export the symbol gp_plugin_entry" run --preset lora-fp32-accum --backend plugin:$PLUG/libgp_test_plugin_nosym.so
# gate
c 2 "needs --baseline" gate
c 2 "fifo: is a FIFO" gate --baseline fifo --current good.json
c 2 "/dev/zero: is a character device" gate --baseline /dev/zero --current good.json
c 2 "dir: is a directory" gate --baseline dir --current good.json
c 2 "missing.json: cannot open" gate --baseline missing.json --current good.json
c 2 "--markdown good.json: is the input good.json" gate --baseline good.json --current good.json --markdown good.json
c 2 "--markdown link.json: is the input" gate --baseline good.json --current good.json --markdown link.json
c 2 "--markdown /dev/null: is a character device" gate --baseline good.json --current good.json --markdown /dev/null
c 2 "--markdown dir: is a directory" gate --baseline good.json --current good.json --markdown dir
c 2 "--markdown fifolink: is a symbolic link to a FIFO" gate --baseline good.json --current good.json --markdown fifolink
c 2 "fifo: is a FIFO" gate --baseline good.json --current good.json --tolerances fifo
c 2 "larger than the limit" gate --baseline good.json --current good.json --tolerances bigtol.json
c 2 "deep.json:1:" gate --baseline deep.json --current good.json
c 2 "too complex" gate --baseline objbomb.json --current good.json
c 2 "given twice" gate --baseline good.json --baseline good.json --current good.json
# report merge / html
c 2 "needs an action" report
c 2 "unknown action" report squash
c 2 "needs --out" report merge --out m.json
c 2 "shard 2/3 is missing" report merge --out m.json s0.json s1.json
c 2 "shard 0/3 is given twice" report merge --out m.json s0.json s0.json s1.json s2.json
c 2 "--out s0.json: is the input" report merge --out s0.json s0.json s1.json s2.json
c 2 "not a shard report" report merge --out m.json good.json s0.json
c 2 "fifo: is a FIFO" report merge --out m.json s0.json fifo s2.json
c 2 "--out: empty path" report merge --out '' s0.json s1.json s2.json
c 2 "--out dir: is a directory" report merge --out dir s0.json s1.json s2.json
c 2 "fifo: is a FIFO" report html fifo
c 2 "/dev/zero: is a character device" report html /dev/zero
c 2 "dir: is a directory" report html dir
c 2 "--out good.json: is the input" report html good.json --out good.json
c 2 "--out /dev/null: is a character device" report html good.json --out /dev/null
c 2 "--out nulllink: is a symbolic link to a character device" report html good.json --out nulllink
c 2 "--out /dev/stdout: is a symbolic link to a file descriptor" report html good.json --out /dev/stdout
c 2 "--out /dev/stderr: is a symbolic link to a file descriptor" report merge --out /dev/stderr s0.json s1.json s2.json
c 2 "--out fifolink: is a symbolic link to a FIFO" repro --out fifolink fuzzin
# repro
c 2 "no FUZZ_INPUT" repro
c 2 "fifo: is a FIFO" repro fifo
c 2 "/dev/zero: is a character device" repro /dev/zero
c 2 "dir: is a directory" repro dir
c 2 "missing: cannot open" repro missing
c 2 "larger than the limit" repro big.bin
c 2 "--out fuzzin: is the input" repro --out fuzzin fuzzin
c 2 "does not decode its input" repro --target convert fuzzin
# round / explain
c 2 "--seed '-1'" round --format bf16 --seed -1 1
c 2 "--seed '18446744073709551616'" round --format bf16 --seed 18446744073709551616 1

# repro never copies raw bytes of a path into the YAML it writes: a file name holding
# a newline and YAML is escaped in the header comment, and the output still loads.
nl='evil
steps: 999999999
#'
cp fuzzin "$O/$nl"
if "$GP" repro "$O/$nl" > "$O/r.yaml" 2>"$O/err" && [ "$(grep -c '^steps: 999999999' "$O/r.yaml")" -eq 0 ] &&
   grep -q 'evil\\x0asteps: 999999999\\x0a#' "$O/r.yaml" && "$GP" show "$O/r.yaml" >/dev/null 2>&1; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL repro: a path's newline reached the YAML: $(head -2 "$O/r.yaml")"
fi
n=$((n + 1))

# /dev/stdout a pipe: refused (exit 2, one line), and the link stays a link (as root a
# rename would have replaced the system's /dev/stdout with a regular file).
n=$((n + 1))
rc=$( { "$GP" report html good.json --out /dev/stdout 2>"$O/err"; echo $? >"$O/rc"; } | cat >"$O/out"; cat "$O/rc")
if [ "$rc" -eq 2 ] && [ "$(wc -l < "$O/err")" -eq 1 ] && [ ! -s "$O/out" ] && [ -L /dev/stdout ] &&
   grep -q "is a symbolic link to a file descriptor" "$O/err"; then pass=$((pass + 1))
else fail=$((fail + 1)); echo "FAIL --out /dev/stdout on a pipe (rc $rc): $(cat "$O/err")"; fi

# The sweep of stale temporary folders never follows a symlink planted under a temporary
# folder's name (a dead process's pid): the folder it points to keeps its files.
n=$((n + 1))
mkdir "$O/victim" && echo keep > "$O/victim/report.json" && echo keep > "$O/victim/report.md"
ln -s "$O/victim" "$O/.sweep.gp-99999999-0badc0de"
if "$GP" run --quiet --preset lora-fp32-accum --out "$O/sweep" >/dev/null 2>"$O/err" &&
   [ "$(cat "$O/victim/report.json")" = keep ] && [ "$(cat "$O/victim/report.md")" = keep ] &&
   [ -L "$O/.sweep.gp-99999999-0badc0de" ]; then pass=$((pass + 1))
else fail=$((fail + 1)); echo "FAIL the stale sweep followed a planted symlink: $(ls "$O/victim") $(cat "$O/err")"; fi

echo "$pass of $n hostile cases passed"
[ $fail -eq 0 ] && [ $n -ge 60 ]
