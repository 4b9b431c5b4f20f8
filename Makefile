# Quick start: `make run` (install what is missing, build, run the main job), `make check`
# (the fast tests: a developer's loop), `make test` (the suite, sampled where it is heaviest)
# and `make test-full` (everything: CI's command, .ci/run). docs/testing.md, Labels.
#   make build      gradprec, libgradprec.so and the example plugins (no tests)
#   make check      the test programs of the fast set, then CTest labels unit and cli
#                   without `slow`, in build-check/ (plain, no CUDA backend)
#   make test       every test program; in the plain build every CTest case but those
#                   labelled full (pytest among them), then under ASan+UBSan the same but
#                   python: 10 minutes on an idle 2-core machine (docs/testing.md, Time)
#   make test-full  every case of both builds (the full ones too), then the branch coverage
#                   (`make test-coverage`); `make test-python` runs all of pytest alone
BUILD ?= build
ASAN_BUILD ?= build-asan
COV_BUILD ?= build-cov
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build build-tests build-asan build-cov build-clang-release run check test test-full test-python test-coverage fuzz fuzz-smoke bench clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DGP_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

build-tests: build
	cmake --build $(BUILD) -j $(JOBS) --target gp_tests

$(ASAN_BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(ASAN_BUILD) -DGP_WERROR=ON -DCMAKE_BUILD_TYPE=Debug -DGP_SANITIZE=ON -DGP_CUDA=OFF

build-asan: deps $(ASAN_BUILD)/CMakeCache.txt
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target all gp_tests

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

# The fast set (labels unit and cli, not slow): what a developer runs after each change, in
# its own build without the CUDA backend (no case of the fast set runs nvcc's objects, and
# nvcc's two architectures are most of a fresh build's time).
CHECK_BUILD ?= build-check
$(CHECK_BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(CHECK_BUILD) -DGP_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGP_CUDA=OFF

check: deps $(CHECK_BUILD)/CMakeCache.txt
	cmake --build $(CHECK_BUILD) -j $(JOBS) --target gp_check_tests
	cd $(CHECK_BUILD) && ctest --output-on-failure -j $(JOBS) -L '^(unit|cli)$$' -LE '^(slow|full)$$'

# `make test` (at most 10 minutes on an idle 2-core machine, docs/testing.md "Time"): both
# builds, the project's .venv (scripts/install-python.sh: torch is downloaded once), then the
# plain build's CTest cases with the Python tests as two of them (pytest, one process,
# starts first and the other cases run beside it), then the sanitizer run; every case
# labelled full is left out (tests/labels.cmake: the heaviest shim, PTX, net and Python
# cases, and under ASan+UBSan the slow ones: a sample of each kind still runs).
# `make test-full` (CI, .ci/run) runs every case of both builds, then the default suite's
# branch coverage (`make test-coverage`, in build-cov/: gradprec and the example plugin).
PLAIN_EXCLUDE = $(if $(FULL),'^coverage$$','^(full|coverage)$$')
ASAN_EXCLUDE = $(if $(FULL),'^(python|coverage)$$','^(full|python|coverage)$$')
test: build-tests build-asan
	@scripts/install-python.sh
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE $(PLAIN_EXCLUDE)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -LE $(ASAN_EXCLUDE)
	$(if $(FULL),$(MAKE) --no-print-directory test-coverage)

test-full:
	$(MAKE) --no-print-directory test FULL=1

test-coverage: build-cov
	cd $(COV_BUILD) && ctest --output-on-failure -L coverage

test-python: build
	cmake --build $(BUILD) -j $(JOBS) --target gp_abi_layout
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
	cmake --build $(BUILD) -j $(JOBS) --target gp_bench
	./$(BUILD)/bench/gp_bench

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(COV_BUILD) $(CHECK_BUILD) build-fuzz build-clang-release
