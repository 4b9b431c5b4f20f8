#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build (tested outside Docker by fuzz/smoke.sh, make fuzz-smoke): every target of fuzz/CMakeLists.txt (GP_FUZZ_TARGETS)
# compiled with $CC $CFLAGS and linked the libFuzzer way with $LIB_FUZZING_ENGINE, into
# $OUT/fuzz_NAME with its seed corpus $OUT/fuzz_NAME_seed_corpus.zip. No CMake: the core
# library is compiled here from the same source folders as CMakeLists.txt's
# GP_CORE_SOURCES (without CUDA), with the project's numeric flags (no contraction, no
# fast-math). MPFR, GMP, GSL, libyaml and Jansson are linked statically: the runner
# image does not have them.
cd "$SRC/gradprec"
# -fno-sanitize=float-divide-by-zero: the undefined-behaviour build's flags may include it,
# but a float division by zero is IEEE 754's inf or NaN, which gradprec computes on purpose
# (a ratio of norms with a zero denominator); integer division stays checked.
FLAGS="-std=c11 -D_POSIX_C_SOURCE=200809L -ffp-contract=off -fno-fast-math -fno-sanitize=float-divide-by-zero -I$SRC/gradprec"
WORK="$WORK/gradprec"
mkdir -p "$WORK"

objs=()
for src in base/*.c kernels/*.c kernels/cpu/*.c reference/*.c harness/*/gp_*.c reports/*.c kernels/cuda/gp_cuda_absent.c; do
    obj="$WORK/$(echo "$src" | tr '/' '_').o"
    $CC $CFLAGS $FLAGS $(pkg-config --cflags mpfr gmp gsl yaml-0.1 jansson) -c "$src" -o "$obj"
    objs+=("$obj")
done
ar rcs "$WORK/libgradprec_core.a" "${objs[@]}"
LIBS="-Wl,-Bstatic $(pkg-config --static --libs mpfr gmp gsl yaml-0.1 jansson | sed 's/-lm\b//g') -Wl,-Bdynamic -lm -lpthread -ldl"

# fuzz_backend compares the CPU emulation with a plugin: ship the example plugin beside it,
# without the fuzzer's coverage instrumentation (it runs in a forked worker, whose counters
# never reach libFuzzer, and under SANITIZER=undefined nothing would define the
# __sancov_* symbols it references: the plugin would not load)
if grep -q '^set(GP_FUZZ_TARGETS.*\bbackend\b' fuzz/CMakeLists.txt; then
    $CC ${CFLAGS//-fsanitize=fuzzer-no-link/} $FLAGS -Ikernels -fPIC -shared examples/plugins/gp_example_plugin.c \
        -o "$OUT/libgp_example_plugin.so" -lm
fi

for t in $(sed -n 's/^set(GP_FUZZ_TARGETS \(.*\))$/\1/p' fuzz/CMakeLists.txt); do
    extra=""
    [ "$t" = backend ] && extra="-DGP_FUZZ_DEFAULT_PLUGIN=\"$OUT/libgp_example_plugin.so\""  # $OUT is /out at build and run time
    $CC $CFLAGS $FLAGS -DGP_LIBFUZZER=1 $extra "fuzz/fuzz_$t.c" -o "$OUT/fuzz_$t" \
        $LIB_FUZZING_ENGINE "$WORK/libgradprec_core.a" $LIBS
    if [ -d "fuzz/corpus/$t" ] && [ -n "$(ls -A "fuzz/corpus/$t")" ]; then
        zip -q -j "$OUT/fuzz_${t}_seed_corpus.zip" fuzz/corpus/"$t"/*
    fi
done
