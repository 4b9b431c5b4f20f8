# CTest labels (docs/testing.md, Labels): every case gets exactly one kind, from its name.
#   unit      cmocka suites and other C test programs (test_*)
#   cli       the gradprec command run as a user runs it (cli_*, examples_*, docs_*, gate_*, threads_*)
#   net       the default suite and the fuzz corpus as a net: wrong and seeded-bug plugins caught
#   corpus    each fuzz target over its committed corpus (fuzz/<target>)
#   hostile   hostile inputs: bad files, crashing plugins, replaced report folders, parse memory
#   shim      CUDA kernel sources executed on the CPU through the host shim (never a GPU run)
#   gpu       needs a CUDA device or nvcc (skipped, 77, without): device tests, PTX checks, gpu-check.sh
#   coverage  the default suite's branch coverage (build-cov only)
#   python    the Python package's tests (pytest in the project's .venv)
# and, beside its kind, `full` on the heaviest cases: `make test` leaves them out (a sample of
# each kind still runs), `make test-full` (CI) runs them (GP_FULL_ONLY below); `slow` on the
# unit and cli cases of more than ~3 s of CPU (GP_SLOW below), which `make check` leaves out.
# `make check` is the fast set: unit and cli without `slow` (Makefile).
set(GP_LABEL_RULES
    "^test_cuda_" gpu   "^cuda_ptx_" gpu   "^gpu_check_" gpu
    "^test_parse_memory$" hostile   "^hostile_" hostile
    "^test_" unit
    "^(cli|examples|docs|gate|threads)_" cli
    "^default_suite_net/" net   "^seeded_gate/" net   "^fuzz_.*_caught_from_corpus$" net
    "^fuzz/" corpus
    "^cuda_shim_" shim
    "^coverage_" coverage
    "^python_" python)
# The heaviest cases (seconds of CPU on the 2-core EPYC, docs/testing.md "Time"): make test
# runs one parity order (forward), one of the nine bugs planted in the kernels
# (access_past_end) and the one planted in the example CUDA plugin, the sm_90 PTX check, 9 of the 29 wrong plugins of the net (the
# example, and one or two per kind of bug: accumulation, clipping, Kahan, non-finite
# values, scaler, stochastic rounding, optimizer, fp8), one of the four seeded gate bugs
# and the Python tests but tests/python/conftest.py's FULL_ONLY; the rest only in make
# test-full.
set(GP_FULL_ONLY
    "^cuda_shim_parity_(shuffle7|reverse)$"
    "^cuda_shim_planted_(search_off_by_one|missing_barrier|swapped_lanes|wrong_shuffle_offset|sumsq_read_past_end|wrong_grid_stride|lowbit_half_absmax|lowbit_v_signed_map)_fails_parity$"
    "^cuda_ptx_check_sm_80$"
    "^default_suite_net/(found_inf_after_unscale|inv_scale_fp16|sumsq_sequential|adamw_comp_negated|master_stale|[mv]_unfused)$"
    "^default_suite_net/(misses_(pos|neg)inf|scaler_(backoff_keeps_tracker|growth_(to_inf|first|early))|window_of_four)$"
    "^default_suite_net/(sr_(shared_pairs|same_each_microbatch|period_2_16)|ftz_ignored|rtz_as_rne|fp8_e4m3_bias)$"
    "^seeded_gate/(sr_period_2_16|scaler_growth_(early|late))$"
    "^python_tests_full$")

# Under ASan+UBSan (GP_SANITIZE) also `full`: the `slow` cases below and those that run the
# default suite or the shim many times (each 15-50 s of CPU there); make test's sanitizer
# run keeps every other unit, cli, hostile, corpus, shim and gpu case.
set(GP_FULL_UNDER_SANITIZERS
    "^examples_scenarios_run$" "^cuda_shim_example_plugin_(reverse|shuffle7)$"
    "^cli_run_(coupled_wd|eps_in_sqrt)_plugin_fails_suite$" "^fuzz_wrong_plugins_caught_from_corpus$")

# Unit and cli cases of more than ~3 s of CPU each on the 2-core EPYC (the default suite run
# several times, headless chromium, the MPFR-heavy replay and sampling checks): in make test's
# plain run (under the sanitizers: make test-full), not in make check.
set(GP_SLOW
    "^test_(html|replay|sample|threads)$"
    "^cli_run_(same_seed_same_bytes|four_shards_merge_identical|vector_blocks_equal_definitions)$"
    "^cli_show_presets_round_trip$" "^threads_ten_tensors_same_bytes$")

# gp_label_tests(): label every test of the current directory by GP_LABEL_RULES (first match),
# keeping labels it already has, adding `full` by GP_FULL_ONLY (and, under the sanitizers,
# by GP_SLOW and GP_FULL_UNDER_SANITIZERS) and `slow` by GP_SLOW; a test no rule names stops
# the configuration (a new test needs its kind here).
function(gp_label_tests)
  get_property(tests DIRECTORY PROPERTY TESTS)
  set(unlabelled "")
  foreach(t ${tests})
    set(kind "")
    set(rules ${GP_LABEL_RULES})
    while(rules AND NOT kind)
      list(POP_FRONT rules re k)
      if(t MATCHES "${re}")
        set(kind ${k})
      endif()
    endwhile()
    if(NOT kind)
      list(APPEND unlabelled ${t})
      continue()
    endif()
    get_test_property(${t} LABELS old)
    if(NOT old)
      set(old "")
    endif()
    set(labels ${kind} ${old})
    foreach(re ${GP_FULL_ONLY})
      if(t MATCHES "${re}")
        list(APPEND labels full)
      endif()
    endforeach()
    foreach(re ${GP_SLOW})
      if(t MATCHES "${re}")
        list(APPEND labels slow)
      endif()
    endforeach()
    if(GP_SANITIZE)
      foreach(re ${GP_SLOW} ${GP_FULL_UNDER_SANITIZERS})
        if(t MATCHES "${re}")
          list(APPEND labels full)
        endif()
      endforeach()
    endif()
    set_tests_properties(${t} PROPERTIES LABELS "${labels}")
  endforeach()
  if(unlabelled)
    message(FATAL_ERROR "tests with no label (add their kind to GP_LABEL_RULES in tests/labels.cmake): ${unlabelled}")
  endif()
endfunction()
