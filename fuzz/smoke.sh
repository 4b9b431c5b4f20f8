#!/usr/bin/env bash
# smoke.sh — a short run of every libFuzzer target from its committed corpus (CI: `make
# fuzz-smoke`, after `make test`), then the ClusterFuzzLite build script run outside
# Docker with the environment ClusterFuzzLite gives it, and every target it writes to
# $OUT run over its seed corpus (fuzz/README.md, "CI").
#
# usage: fuzz/smoke.sh [--no-cfl] BUILD_DIR [SECONDS]
#   BUILD_DIR  the `make fuzz` build (BUILD_DIR/fuzz/fuzz_NAME)
#   SECONDS    fuzzing time per target after its corpus ran (default 5; 0: the corpus only)
#   --no-cfl   skip the ClusterFuzzLite part
# Each target runs every corpus input once, then fuzzes (-seed=1) with new inputs going to
# a scratch folder: the committed corpus is never written. Exit 0, or 1 naming the first
# target that crashed or did not run its corpus, 2 bad usage, 3 the ClusterFuzzLite build
# failed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CFL=1
[ "${1:-}" = --no-cfl ] && { CFL=0; shift; }
[ $# -ge 1 ] && [ $# -le 2 ] || { sed -n '7,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
BUILD=$(cd "$1" && pwd) SECONDS_EACH=${2:-5}
TARGETS=$(sed -n 's/^set(GP_FUZZ_TARGETS \(.*\))$/\1/p' "$ROOT/fuzz/CMakeLists.txt")
TMP=$(mktemp -d /tmp/gp-fuzz-smoke.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# run_one BIN CORPUS_DIR NAME: every input of CORPUS_DIR once, then SECONDS_EACH of fuzzing
run_one() {
    local bin=$1 corpus=$2 name=$3 n scratch=$TMP/new-$3 log=$TMP/$3.log
    n=$(find "$corpus" -maxdepth 1 -type f | wc -l)
    mkdir -p "$scratch"
    if ! (cd "$TMP" && "$bin" -seed=1 -timeout=60 -rss_limit_mb=4096 -print_final_stats=0 \
            $([ "$SECONDS_EACH" -gt 0 ] && echo "-max_total_time=$SECONDS_EACH" || echo "-runs=0") \
            "$scratch" "$corpus") >"$log" 2>&1; then
        echo "fuzz-smoke: $name crashed or failed (last lines of its log follow)"
        tail -25 "$log"
        exit 1
    fi
    if ! grep -q "INITED" "$log"; then
        echo "fuzz-smoke: $name did not run its corpus ($n inputs): $(tail -3 "$log" | tr '\n' ' ')"
        exit 1
    fi
    echo "fuzz-smoke: $name: $n corpus inputs ran$([ "$SECONDS_EACH" -gt 0 ] && echo ", then $SECONDS_EACH s of fuzzing"): no crash"
}

for t in $TARGETS; do
    [ -x "$BUILD/fuzz/fuzz_$t" ] || { echo "fuzz-smoke: $BUILD/fuzz/fuzz_$t is missing (make fuzz)"; exit 1; }
    run_one "$BUILD/fuzz/fuzz_$t" "$ROOT/fuzz/corpus/$t" "$t"
done

[ $CFL -eq 1 ] || exit 0
# ClusterFuzzLite: build.sh as its builder runs it with libFuzzer, once per sanitizer of
# .clusterfuzzlite/project.yaml (the flags are OSS-Fuzz's base-clang SANITIZER_FLAGS_*;
# the runner's UBSAN_OPTIONS silence unsigned overflow, which Philox relies on), outside
# Docker: $SRC/gradprec is this checkout, OUT and WORK are scratch folders.
UB="array-bounds,bool,builtin,enum,float-divide-by-zero,function,integer-divide-by-zero,null,object-size,return"
UB="$UB,returns-nonnull-attribute,shift,signed-integer-overflow,unreachable,vla-bound,vptr"
COMMON="-O1 -fno-omit-frame-pointer -gline-tables-only -fsanitize=fuzzer-no-link"
export UBSAN_OPTIONS="print_stacktrace=1:print_summary=1:silence_unsigned_overflow=1:halt_on_error=1"
for san in address undefined; do
    case $san in
    address) SFLAGS="-fsanitize=address -fsanitize-address-use-after-scope" ;;
    undefined) SFLAGS="-fsanitize=$UB,unsigned-integer-overflow -fno-sanitize-recover=$UB" ;;
    esac
    rm -rf "$TMP/src" "$TMP/out" "$TMP/work"
    mkdir -p "$TMP/src" "$TMP/out" "$TMP/work"
    ln -s "$ROOT" "$TMP/src/gradprec"
    if ! env CC=clang CXX=clang++ CFLAGS="$COMMON $SFLAGS" CXXFLAGS="$COMMON $SFLAGS" \
            LIB_FUZZING_ENGINE=-fsanitize=fuzzer SANITIZER=$san FUZZING_ENGINE=libfuzzer ARCHITECTURE=x86_64 \
            SRC="$TMP/src" OUT="$TMP/out" WORK="$TMP/work" bash "$ROOT/.clusterfuzzlite/build.sh" \
            >"$TMP/cfl-build-$san.log" 2>&1; then
        echo "fuzz-smoke: .clusterfuzzlite/build.sh (SANITIZER=$san) failed:"
        tail -25 "$TMP/cfl-build-$san.log"
        exit 3
    fi
    for t in $TARGETS; do
        [ -x "$TMP/out/fuzz_$t" ] || { echo "fuzz-smoke: .clusterfuzzlite/build.sh ($san) wrote no fuzz_$t"; exit 1; }
    done
    for bin in "$TMP/out"/fuzz_*; do
        [ -x "$bin" ] && [ -f "$bin" ] || continue
        name=$(basename "$bin")
        rm -rf "$TMP/seed-$name" "$TMP/new-cfl-$san-$name"
        mkdir -p "$TMP/seed-$name"
        [ -f "$bin"_seed_corpus.zip ] && unzip -q -o "$bin"_seed_corpus.zip -d "$TMP/seed-$name"
        SECONDS_EACH=0 run_one "$bin" "$TMP/seed-$name" "cfl-$san-$name"
    done
done
