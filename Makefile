# Quick start: `make run` (install what is missing, build, run the main job) and
# `make test` (the whole suite: a plain build, then again under ASan+UBSan, then the default
# suite's branch coverage in build-cov, alone: `make test-coverage`).
BUILD ?= build
ASAN_BUILD ?= build-asan
COV_BUILD ?= build-cov
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build build-asan build-cov build-clang-release run test test-python test-coverage test-asan fuzz fuzz-smoke bench clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DGP_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(ASAN_BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(ASAN_BUILD) -DGP_WERROR=ON -DCMAKE_BUILD_TYPE=Debug -DGP_SANITIZE=ON -DGP_CUDA=OFF

build-asan: deps $(ASAN_BUILD)/CMakeCache.txt
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# The coverage build (tests/coverage.py): only gradprec and the example plugin, with the CPU
# backend and the runner instrumented (-DGP_COVERAGE=ON).
$(COV_BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(COV_BUILD) -DGP_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGP_COVERAGE=ON -DGP_CUDA=OFF

build-cov: deps $(COV_BUILD)/CMakeCache.txt
	cmake --build $(COV_BUILD) -j $(JOBS) --target gradprec gp_example_plugin

# A configuration beyond the default one (.ci/run builds it): clang, Release, -Werror;
# the command and the library, which is what a user's own build makes.
build-clang-release: deps
	cmake -S . -B build-clang-release -DGP_WERROR=ON -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release -DGP_CUDA=OFF
	cmake --build build-clang-release -j $(JOBS) --target gradprec gradprec_shared

# Exit 1 means scenarios failed their thresholds (the default suite reproduces known
# incidents, so some do): findings, not a broken tool.
run: build
	./$(BUILD)/gradprec run || [ $$? -eq 1 ]

# The sanitizer run goes first, then the plain build, then the default suite's branch
# coverage (`make test-coverage`: the coverage build makes only gradprec and the example
# plugin); the Python tests (tests/python, in the
# project-local .venv that scripts/install-python.sh keeps) run last over the plain
# build's libgradprec.so, so the last line printed is pytest's summary.
test: build build-asan
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-coverage
	$(MAKE) --no-print-directory test-python

test-coverage: build-cov
	cd $(COV_BUILD) && ctest --output-on-failure -L coverage

test-python: build
	@scripts/install-python.sh
	GRADPREC_LIB=$(CURDIR)/$(BUILD)/libgradprec.so GP_BUILD=$(CURDIR)/$(BUILD) \
	  .venv/bin/python -m pytest -q -p no:cacheprovider tests/python

# The libFuzzer binaries (build-fuzz/fuzz/fuzz_*), clang and clang++ (the fuzzer flags
# reach the C++ sources too), ASan+UBSan.
fuzz: deps
	cmake -S . -B build-fuzz -DGP_WERROR=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DGP_FUZZ=ON -DGP_CUDA=OFF
	cmake --build build-fuzz -j $(JOBS) --target gp_fuzz_targets

# CI after `make test` (.ci/run): every fuzz target over its committed corpus, then
# FUZZ_SECONDS of fuzzing each, then .clusterfuzzlite/build.sh as ClusterFuzzLite runs it
# and each target it builds over its seed corpus (fuzz/smoke.sh).
FUZZ_SECONDS ?= 5
fuzz-smoke: fuzz
	fuzz/smoke.sh build-fuzz $(FUZZ_SECONDS)

bench: build
	./$(BUILD)/bench/gp_bench

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(COV_BUILD) build-fuzz build-clang-release
