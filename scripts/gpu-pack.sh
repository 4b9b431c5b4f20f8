#!/usr/bin/env bash
# gpu-pack.sh — lay out what scripts/gpu-check.sh needs from a CUDA build (configured
# with nvcc found: "gradprec: CUDA backend ON") in DIR, for a GPU machine that has no
# compiler headers for MPFR, GSL and the rest: the binaries gpu-check runs, stripped of
# debug information, as GP_PREBUILT expects them (gradprec, libgradprec.so*, tests/,
# fuzz/, bench/, examples/plugins/), and in DIR/lib the shared libraries they load that
# a plain CUDA image lacks (MPFR, GMP, GSL, libyaml, jansson, cmocka), which gpu-check
# puts on LD_LIBRARY_PATH. Builds the targets first. Exit 2 on a build without CUDA.
# Usage: scripts/gpu-pack.sh BUILD_DIR DIR
#        then on the GPU machine: GP_PREBUILT=DIR scripts/gpu-check.sh OUT
set -eu
build=${1:?usage: gpu-pack.sh BUILD_DIR DIR}
dir=${2:?usage: gpu-pack.sh BUILD_DIR DIR}
if ! grep -q '^GP_HAVE_CUDA:INTERNAL=ON$\|^CMAKE_CUDA_COMPILER:STRING=/' "$build/CMakeCache.txt" 2>/dev/null; then
    echo "gpu-pack: $build is not a build with the CUDA backend (configure where nvcc is found)" >&2
    exit 2
fi
targets="gradprec gradprec_shared test_cuda_parity test_cuda_example_plugin test_cuda_fp8_cvt fuzz_backend_regress
         gp_bench_cuda_adamw gp_example_cuda_plugin gp_example_plugin"
# shellcheck disable=SC2086 # the list splits into targets
cmake --build "$build" -j "$(nproc)" --target $targets >/dev/null || {
    echo "gpu-pack: building the targets in $build failed" >&2
    exit 1
}
rm -rf "$dir"
mkdir -p "$dir/tests" "$dir/fuzz" "$dir/bench" "$dir/examples/plugins" "$dir/lib"
copy() { # copy SRC DEST: the file, stripped of its debug information
    cp "$1" "$2" && strip --strip-debug "$2"
}
copy "$build/gradprec" "$dir/gradprec"
cp -P "$build"/libgradprec.so* "$dir/"
for f in "$dir"/libgradprec.so*; do [ -L "$f" ] || strip --strip-debug "$f"; done
for t in test_cuda_parity test_cuda_example_plugin test_cuda_fp8_cvt; do copy "$build/tests/$t" "$dir/tests/$t"; done
copy "$build/fuzz/fuzz_backend_regress" "$dir/fuzz/fuzz_backend_regress"
copy "$build/bench/gp_bench_cuda_adamw" "$dir/bench/gp_bench_cuda_adamw"
for f in "$build"/examples/plugins/libgp_example_cuda_plugin.so "$build"/examples/plugins/libgp_example_plugin.so; do
    copy "$f" "$dir/examples/plugins/$(basename "$f")"
done
# The libraries outside glibc and libstdc++ that the binaries load.
for bin in "$dir/gradprec" "$dir/tests/test_cuda_parity"; do
    ldd "$bin" | awk '/=> \// { print $3 }'
done | sort -u | grep -E '/lib(mpfr|gmp|gsl|gslcblas|yaml-0|jansson|cmocka)\.so' | while read -r lib; do
    cp -L "$lib" "$dir/lib/"
done
du -sh "$dir" | sed 's/^/gpu-pack: /'
