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
# The heaviest cases (seconds of CPU on the 2-core EPYC at load ~3, NOTES-house.md): make
# test runs one parity order (forward), two of the seven planted kernel bugs
# (access_past_end, wrong_grid_stride), the sm_90 PTX check; the rest only in make test-full.
set(GP_FULL_ONLY
    "^cuda_shim_parity_(shuffle7|reverse)$"
    "^cuda_shim_planted_(search_off_by_one|missing_barrier|swapped_lanes|wrong_shuffle_offset|sumsq_read_past_end)_fails_parity$"
    "^cuda_ptx_check_sm_80$")

# Unit and cli cases of more than ~3 s of CPU each on the 2-core EPYC (the default suite run
# several times, headless chromium, the MPFR-heavy replay and sampling checks): in make test,
# not in make check.
set(GP_SLOW
    "^test_(html|replay|sample|threads)$"
    "^cli_run_(same_seed_same_bytes|four_shards_merge_identical)$"
    "^cli_show_presets_round_trip$" "^threads_ten_tensors_same_bytes$")

# gp_label_tests(): label every test of the current directory by GP_LABEL_RULES (first match),
# keeping labels it already has, adding `full` by GP_FULL_ONLY and `slow` by GP_SLOW; a test no rule names stops
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
    set_tests_properties(${t} PROPERTIES LABELS "${labels}")
  endforeach()
  if(unlabelled)
    message(FATAL_ERROR "tests with no label (add their kind to GP_LABEL_RULES in tests/labels.cmake): ${unlabelled}")
  endif()
endfunction()
