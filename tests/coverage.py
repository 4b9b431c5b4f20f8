#!/usr/bin/env python3
"""Branch coverage of the default suite (issue 18 item 1).

Runs the default suite with the `gradprec` of a coverage build (cmake -DGP_COVERAGE=ON:
-O0 --coverage) twice, as CI runs it: on the CPU backend, and on the example plugin with
`--compare cpu`; then reads gcov's JSON (gcov --json-format, no other tool) and counts,
per source file, the branches the two runs reached in the measured code:

  kernels/arith/*.h             every function the program instantiates (union over the
                                translation units that include the header);
  kernels/cpu/gp_cpu_backend.c  the CPU backend, whole;
  harness/run/gp_run*           the runner's per-step functions (RUNNER_STEP below), in
                                gp_runner.c and its pieces (RUNNER_FILES), judged as one;
  harness/run/gp_optim.c        the optimizer step the runner calls (OPTIM_STEP below);
  harness/run/gp_attrib.h       the attribution of one element (every function, as the runner
                                instantiates it). Not measured: harness/run/gp_attrib.c, the
                                vectorised store and attribution blocks (built -O3 with per-ISA
                                clones; test_accum checks them against the scalar definitions).

In the coverage build the runner runs only its per-element definitions (GP_VECTOR_BLOCKS=0)
and its always-inline loop bodies (GP_HOT) are ordinary static functions
(GP_COVERAGE_BUILD), so each source branch counts once over all its format instances. The check also fails when a function named in RUNNER_STEP / OPTIM_STEP no
longer exists (a rename would otherwise drop it from the measured set silently).

A branch is gcov's: each outcome of a conditional jump at -O0 (both sides of an `if`,
each operand of `&&` / `||` / `?:`, each `case` of a switch). The check fails (exit 1)
when a branch that is not excluded below is not reached, when a file reaches fewer
branches than RECORDED, or when an exclusion no longer matches anything (stale).
Exit 2: bad usage or the suite did not run.

Usage: coverage.py --build BUILD_COV [--source ROOT] [--drop PRESET]... [--quiet] [--verbose]
                   [--save FILE | --load FILE]
  --drop PRESET: run the suite without that preset (the test that the check is a net:
  removing a preset that reaches a listed branch must fail it).
  --save FILE: also write the branches reached (JSON); --load FILE: judge those instead of
  running the suite (to revise exclusions without the few minutes of a run).
gcda files go to a private folder (GCOV_PREFIX), so concurrent runs do not mix.
"""
import argparse
import glob
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The runner's per-step logic: what one iteration does (accumulate -> unscale -> clip ->
# AdamW -> loss-scale update) and the attribution beside it. Not measured: the replay and
# sampling paths (no preset replays a dump: tests/test_replay.c covers them), the metric
# and verdict code after the run, allocation and the multi-seed aggregation; not yet: the
# data-parallel collective (dist_*, coll_*, collective, run_distributed) and the thread
# scheduling (par_*, unit_*), which landed after this list was drawn.
RUNNER_STEP = {
    "classify", "note_output", "store_range", "store_grads_fmt", "gp_run_store_grads", "attribute_range",
    "attribute_fmt", "accumulate_args", "accumulate_on", "accumulate_before", "diverged",
    "sr_observe", "accumulate_after", "gp_run_accumulate", "gp_run_unscale", "reduction_den",
    "gp_run_generate_microbatch", "gp_run_generated_final", "run_generated", "gp_run_explicit", "window_run", "next_window",
    "gp_run_accumulate_step", "gp_run_clip_ops", "clip_step", "ref_clip_coef", "compare_grad_scale",
    "coupled_step", "scaler_step", "gp_run_simulate", "chunk_begin", "gp_run_optimize_chunk", "optimize_run",
}
OPTIM_STEP = {"gp_optim_chunk", "compare_plugin", "on_old_state", "formula_explained", "compare", "compare_outputs", "weight_at", "gp_optim_final"}

# The runner's files (one file, harness/gp_runner.c, until issue 28 split it): measured and
# judged as one unit (RUNNER below), whichever of them a function now lives in.
RUNNER_FILES = ["harness/run/gp_runner.c", "harness/run/gp_run_accum.c", "harness/run/gp_run_grads.c",
                "harness/run/gp_run_collective.c", "harness/run/gp_run_window.c", "harness/run/gp_run_step.c",
                "harness/run/gp_run_sample.c", "harness/run/gp_verdict.c", "harness/run/gp_run_internal.h"]
RUNNER = "harness/run/gp_run*"

MEASURED = {  # source file (relative) -> function filter (None: every function)
    "kernels/cpu/gp_cpu_backend.c": None,
    **{f: RUNNER_STEP for f in RUNNER_FILES},
    "harness/run/gp_optim.c": OPTIM_STEP,
    "harness/run/gp_attrib.h": None,  # the attribution of one element (gp_classify_v, gp_attrib_one), as gp_runner.c uses it
}
ARITH_DIR = "kernels/arith/"

# Justified exclusions: an unreached branch is tolerated when its source line matches `line`
# (a regular expression searched in the line's text) inside `func` (None: any function)
# of `file`, and, where `arms` is given, it is one of those branch numbers of the line
# (the index among the line's branches in gcov's JSON, which counts branches only:
# --verbose prints every unreached branch with its index and the exclusion covering it). Each says why no preset of
# a default suite reaches it. "OPEN" marks branches a scenario can reach but no preset
# does yet (docs/testing.md lists them); the others cannot be reached from a scenario
# with correct backends.
A = ARITH_DIR
R = RUNNER
O = "harness/run/gp_optim.c"
H = "harness/run/gp_attrib.h"
C = "kernels/cpu/gp_cpu_backend.c"
WHY_SCALED = ("OPEN: the parts of the scaled formats (issue 25) no preset uses: the e5m2, e2m3 and e3m2 element "
              "formats, a delayed scale from a zero or non-finite amax (the previous scale kept) or with :pow2, a NaN "
              "inside a block, subnormal fp32 scales; the default suite's scaled presets (mxfp8-e4m3-grads-floor/-rceil, "
              "fp8-e4m3-grads-delayed-stale/-nosat, nvfp4-grads-sr, ddp-fp8-allreduce-per-rank-scales, "
              "ddp-mxfp8-allreduce-floor) reach the rest; test_scaled_formats (bit-exact against torchao and ml_dtypes), "
              "test_scenario and examples/scenarios/*fp8*, *mxfp8*, *nvfp4* reach these")
WHY_SCALED_NONFINITE = ("OPEN: a non-finite gradient quantized to a scaled format (gp_attrib_scaled's first arm): the "
                        "nonfinite-* presets store plain formats; test_scaled_formats quantizes NaN and inf inside "
                        "blocks through gradprec_quantize")
WHY_SCALED_SPAN = ("OPEN: the arms of the scaled quantizer as harness/run/gp_run_accum.c instantiates it that the "
                   "suite does not take: the runner calls gp_scaled_row_block itself only for a scale spanning its "
                   "chunks (fp8 :current, :blockwise_128x128, two-level nvfp4) and for a scaled accumulator; the "
                   "presets fp8-e4m3-grads-current-growing / -128x128-growing, nvfp4-grads-two-level and "
                   "fp8-e4m3-current-accumulator take the e4m3 / e2m1, round-to-nearest, no-:pow2 arms; MX and "
                   "1x128 never span (they run through kernels/gp_scaled_tensor.c, not instrumented), and :sr, "
                   ":pow2, the other element formats and clamped scales are reached by tests/test_scaled_run.c and "
                   "test_scaled_formats (bit-exact against torchao and ml_dtypes); the same holds for the pieces the "
                   "quantizers and the rounding cells of grad_bias_score share (gp_mx_mul, gp_nvfp4_scale, "
                   "gp_nvfp4_mul, gp_scaled_dequant, gp_scaled_row_cells: its MX arm), whose MX, nvfp4:single, "
                   ":delayed and 1x128 cells tests/test_scaled_run.c's test_grad_bias_by_hand checks by hand")
WHY_LOWBIT = ("OPEN: a low-bit optimizer state (optimizer.state bnb8_blockwise / torchao_*, issue 25): no preset "
              "of the default suite yet (the plugins refuse it); examples/scenarios/adamw-8bit-state-tiny-grads.yaml "
              "and tests/python/test_lowbit.py reach it (and test_cuda_parity's check_lowbit, on the cuda backend)")
WHY_SATURATION = ("OPEN: the arms of the saturation test no preset takes (rtz-fp16-accum-saturation saturates an "
                  "RTZ fp16 accumulator: gp_attrib_one's saturation): a NaN sum or a max-finite store of the other "
                  "sign (not saturation), a binary64 sum with a rounding error at the overflow boundary, an RTZ "
                  "unscale past the max (gp_run_unscale); test_attribution's test_rtz_saturation and "
                  "test_saturated_thresholds reach them")
WHY_SUMSQ = ("OPEN: the CPU backend's clipping sum of squares of a bf16 or fp16 gradient (its vector chunks "
             "and fp16's check for non-finite values): the suite's presets clip fp32 accumulators only; "
             "test_accum's test_backend_sumsq_equals_definition runs every format against gp_clip_sumsq")
WHY_FAIL = ("a backend call failed or refused the configuration, or a failure propagates: correct backends do "
            "not fail (hostile_plugin_faults and test_accumulate's broken plugins reach these)")
WHY_MISMATCH = ("the two backends of --compare disagree: the correct example plugin never does; the 24 wrong "
                "plugins of default_suite_net/* reach these with the same default suite")
WHY_MKL_AVX2 = ("MKL's AVX2 sqrt kernel (L9HAynn: the shared core with FMAs): only torch_cpu_host on an Intel "
                "CPU with AVX2 and no AVX-512 runs it (from that CPU's rsqrtps); scripts/mkl_sqrt_kernels.py and "
                "tests/python/test_torch_sqrt.py check it against the kernel itself with Zen 4's rsqrtps")
WHY_HOST_CPU = ("torch_cpu_host's kernel choice for CPUs other than the one running the suite "
                "(gp_torch_sqrt_host_kernel: a non-Intel host takes EX, an Intel one Z0 or L9; NONE on an Intel CPU "
                "without AVX2 + FMA or a non-x86-64 build, refused at load): one host reaches one arm; "
                "tests/python/test_torch_sqrt.py checks the arm it takes against torch on each host")
WHY_EV = ("the instrumented form (an events pointer): the backends run the production form (ev = NULL); "
          "test_accum, test_adamw and test_oracle run the other")
WHY_EVAL = ("torch's CPU and the unfused evaluation orders (gp_adamw_eval): no scenario selects them, the "
            "backends run GP_ADAMW_TORCH_CUDA (test_adamw checks the others against torch's values)")
WHY_FUSED = ("torch's fused CPU AdamW (optimizer.fused: torch_cpu): the example plugin does not implement it, so "
             "a preset using it would be refused by the --compare run; test_adamw and "
             "tests/python/test_fused_adamw.py check it against torch")
WHY_POW2 = ("a loss scale whose reciprocal is not a binary64 normal power of two (then x / s): the loader takes "
            "only powers of two in 2^-126..2^127 (loss_scale.init, replay_scales), backoff and growth keep them "
            "powers of two, and no scenario grows one past 2^127")
WHY_FORMULA = ("an update torch's state convention does not explain within its derived bounds (the 'update formula' "
               "check): a correct backend's always is; tests/python's optimizers reach it (torch-optimi's debiased "
               "convention, NoBiasCorrection's unexplained step)")
WHY_REPLAY = "replayed or sampled tensors only: no preset replays a dump (test_replay, test_twin, tests/python cover it)"
WHY_SAMPLED = ("sampled runs over several steps only (per-element totals over the steps): the one sampled preset "
               "(fp16-embed-underflow-sampled) takes one step; test_sample's test_coverage_steps (5 steps with the "
               "optimizer, `sample: 600`) runs these lines")
WHY_SAMPLED_LS = ("sampled runs under a loss scaler only (a step's per-element terms held in el_step until the "
                  "step is kept): the one sampled preset has no scaler; test_sample's test_coverage_loss_scale (a skipped first step, "
                  "then four kept ones, `sample: 600`) runs these lines")
WHY_FOREACH = ("OPEN: torch's CPU foreach AdamW (optimizer.evaluation: torch_cpu_foreach, the decay factor and "
               "beta2 rounded to a bf16/fp16 tensor's dtype): no preset selects it; test_adamw's "
               "test_torch_cpu_foreach checks it by hand, a bf16 foreach capture replays as its twin")
EXCLUSIONS = [
    # --- failures, faults, limits
    (R, None, r"backend_failure|if \(rc != 0\)|if \(arc != 0\)|&& rc == 0|rc == 0 &&|rc == 0\)|"
     r"if \(\(rc = |\(rc = compare_grad_scale|sc->loss_scale.update &&", None, WHY_FAIL),
    (R, "coupled_step", r"\(rc = clip_step\(", (4,), WHY_FAIL),
    (R, "gp_run_generated_final", r"\(rc = gp_run_unscale\(", (2,), WHY_FAIL),
    (O, None, r"if \(rc != 0\)|\(rc = compare_plugin\(", None, WHY_FAIL),
    (O, "gp_optim_chunk", r"check_models\(o, &a, off, n, cnt\) != 0", (2,),
     "gradprec's own CPU models of the other AdamW forms failing (an error, not a differing model: those "
     "return 1 and are counted): the CPU backend does not fail"),
    (C, "cpu_accumulate_many", r"if \(rc != 0\)", None, WHY_FAIL),
    (C, "sumsq_perfect", r"if \(f == GP_BF16\)|else if \(f == GP_FP32\)|"
     r"^for \(size_t i = 0; i < SUMSQ_BLOCK; i\+\+\) \{$", None, WHY_SUMSQ),
    (C, "cpu_grad_sumsq", r"^int fast = f == GP_BF16 \|\| f == GP_FP32 \|\| \(f == GP_FP16 &&", None, WHY_SUMSQ),
    # f16_any_nonfinite and f16_widen_finite, always inlined (gcov names no function): their
    # copies in accumulate_f32_rne_f16g are reached both ways, the sum of squares' are not
    (C, None, r"^for \(uint64_t j = 0; j < n; j\+\+\)|^return mag >= 0x400u \? nrm : sub;$", None, WHY_SUMSQ),
    (R, None, r"out of memory|if \(!norms\)|if \(!copy\)|!\(before = malloc", None,
     "allocation failure: not reachable without fault injection"),
    (R, None, r"malloc\(\(sc->ntensors \? sc->ntensors : 1\)|malloc\(bytes \? bytes : 1\)", None,
     "the size-0 guard of a malloc: a scenario without tensors, or an empty tensor under clipping (degenerate)"),
    (R, None, r"gp_deadline_passed\(\)", None,
     "the --max-seconds limit: the suite sets none (hostile_plugin_faults reaches it)"),
    # --- replayed and sampled gradients
    (R, None, r"c->dump|S->wdump\[t\]|S->idx\[t\]|e\.n\)|if \(c->cnt\[0\]\)|CNT_EL|p->cnt\[0\]|^if \(counting\)|"
     r"U->twin\.set", None, WHY_REPLAY),
    # --- the other backend of --compare disagrees
    (R, None, r"diverged\(|gp_fmt_agree\(|found_inf != 0\) != |if \(bad_scale|s2\.tracker != scaler->tracker", None,
     WHY_MISMATCH),
    (O, "compare_outputs", r"if \(j < n && s->first\)", None, WHY_MISMATCH),
    (R, "accumulate_on", r"ng > 1 && b->ops->accumulate_many", None,
     "a backend without accumulate_many (an ABI-2 plugin): the suite's backends have it; test_accumulate "
     "loads the ABI-2 example"),
    (R, "gp_run_clip_ops", r"p->grad_sumsq && p->grad_scale", None,
     "a backend without the optional grad_sumsq / grad_scale / scaler_update (the CPU emulation then clips): "
     "the suite's backends have them; test_accumulate runs plugins without them"),
    # --- the runner's attribution: arms no correct rounding produces
    (H, "gp_classify_v", r"exact != exact", None,
     "a NaN exact value stored as a number: a correct store keeps the NaN (tested first: v != v)"),
    (H, "gp_classify_v", r"if \(ev & GP_EV_OVERFLOW\)", None,
     "an overflow event with a finite stored value (an RTZ store saturating): the runner's stores are RNE, "
     "and gp_attrib_one passes the event only with an infinite result, classified above"),
    (R, "note_output", r"^if \(isfinite\(x\)\) \{$", None,
     "x = an exact quotient of finite values divided by a power-of-two loss scale: always finite"),
    (R, "note_output", r"hist\[1 \+ \(b < 0", None,
     "the report histogram's clamp: exact outputs below 2^-160 or from 2^140 (no metric depends on it)"),
    (H, "gp_attrib_one", r"s != 0 \|\| e != 0 \?", None,
     "e != 0 with s = 0: impossible (s = RN(a + g) = 0 means the exact sum a + g is 0)"),
    (H, "gp_sr_draw_one", r"if \(af == GP_FP32\)|ftz && fabs|e > 0 \? 1 : e < 0", None,
     "stochastic rounding into an fp32 accumulator or with FTZ: no training setup does it (fuzz_backend "
     "covers the combinations)"),
    (H, "gp_sr_draw_one", r"if \(isfinite\(vhi\) && frac > 0", (1, 5, 9),
     "a stochastic rounding next to the largest finite value (vhi = inf), frac >= 1 (impossible: v lies "
     "between its neighbours), or a stored value that is neither neighbour (a wrong backend only)"),
    (R, "ref_clip_coef", r"coef\.hi == 1\.0", None,
     "the exact clip coefficient equal to 1 in binary64 with a positive low part: max_norm / (||g|| + 1e-6) "
     "within 2^-53 of 1"),
    (R, "next_window", r"U->ng == GP_PLUGIN_MANY_MAX", (6, 7),
     "OPEN: one side of the window-full test's last operand (a window of GP_PLUGIN_MANY_MAX = 256 tensors, "
     "each under 64 elements): no preset has that many small tensors (test_cuda_parity's accumulate_many "
     "runs 200 segments)"),
    (R, "reduction_den", r"switch \(sc->reduction\)", (0,),
     "OPEN: the token_mean divisor here serves explicit-valued tensors only (generated ones use the window's "
     "token-mean divisor directly); no preset has an explicit tensor under token_mean"),
    (R, "chunk_begin", r"c->comp = ts->comp \? \(char \*\)ts->comp \+ \(size_t\)i0", None,
     "OPEN: a Kahan accumulator in a coupled step (under a loss scaler or clipping): no preset combines them"),
    (R, "coupled_step", r"U->first\.set && !S->res->first_mismatch\.set", None, WHY_MISMATCH),
    (R, "coupled_step", r"if \(U->rc != 0\)", None, WHY_FAIL),
    (R, None, r"S->w\[t\] != 1\.0|c->idx \? c->idx|else if \(at\)|smp \? &ss|^if \(smp\)$|nreplay_scales", None,
     WHY_REPLAY),
    (O, "formula_explained", r"if \(adam_ok && fa == 0\)", (1, 3), WHY_FORMULA),
    (O, "formula_explained", r"^if \(fa != 0\) \{$|fa = fabs\(fx\) < fabs\(fa\)|^: 0;$|^if \(deb_ok && fd == 0\)$|"
     r"o->formula_err\[e\] \+= adam_ok", None, WHY_FORMULA),
    (O, "gp_optim_chunk", r"!formula_explained\(", (2,), WHY_FORMULA),
    (O, "gp_optim_chunk", r"^o->el_cnt\[GP_OPTIM_EL_STALE\]\[e\] \+= |"
     r"^\(uint32_t\)\(mx != 0 && m1 == 0\) \+ \(uint32_t\)\(vx != 0 && v1 == 0\);$", None,
     WHY_SAMPLED + " (the element's copies of the counts below them, whose same conditions the suite reaches)"),
    (R, "chunk_begin", r"^c->el = ts->el_step \? ", (0,), WHY_SAMPLED),
    (R, "gp_run_simulate", r"^for \(uint64_t i = 0; S->ts\[t\]\.el_tot && i < ", None, WHY_SAMPLED),
    (R, "gp_run_simulate", r"^for \(int e = 0; e < GP_NEST; e\+\+\)$", (0, 1),
     WHY_SAMPLED + " (the loop over an element's totals after the steps; the other such loops are reached)"),
    (R, "gp_run_simulate", r"^if \(S->ts\[t\]\.el_step != S->ts\[t\]\.el_tot\)$|"
     r"^for \(size_t i = 0; S->ts\[t\]\.el_step != S->ts\[t\]\.el_tot && i < ", None, WHY_SAMPLED_LS),
    (O, "formula_explained", r"int judged = written && isfinite\(w0\) && isfinite\(w1\)", (7, 9, 11),
     "a finite written weight with non-finite exact or stored moments: a correct AdamW carries a non-finite "
     "moment into the weight (inf / inf, lr x inf), only a wrong optimizer writes a finite one then"),
    (R, "gp_run_generated_final", r"^for \(size_t i = 0; i < n; i\+\+\) \{$", None,
     WHY_REPLAY + " (the loop that divides a dump's sums by its scale; the other loops of that text are reached)"),
    (O, "gp_optim_chunk", r"isfinite\(us\) \? us - ux : INFINITY", None,
     "OPEN: a finite exact update made non-finite by the stored m and v (fp16 moments overflowing for "
     "gradients above 6.5e5): reachable, no preset"),
    (H, "gp_attrib_unscaled", r"return inv != 0 \? x \* inv : x / s;", (1,), WHY_POW2),
    # --- kernels/arith: forms the backends do not run
    (A + "gp_accum.h", "gp_accum_step", r"absorbed = g != 0\.0f && out == acc && newc == \*comp;", (4,),
     "OPEN: a Kahan addend that changes neither the sum nor the compensation (below half an ulp of the "
     "compensation, about 2^-18 of the sum in bf16): reachable with addends spread over more than 18 "
     "binades on one element; embedding-padding-row-kahan's ten decades do not reach it"),
    (A + "gp_accum.h", "gp_accum_step", r"^if \(ev\)$", None, WHY_EV),
    (A + "gp_accum.h", "gp_accum_step", r"int plain = !ftz && !ev;", (3,), WHY_EV),
    (A + "gp_adamw.h", "gp_adamw_madd_store", r"if \(!ev && mode == GP_RNE\)", (1,), WHY_EV),
    (A + "gp_adamw.h", "gp_adamw_store", r"return ev \? ", None, WHY_EV),
    (A + "gp_torch_sqrt.h", "gp_torch_sqrt_newton", r"= fused \? GP_FMAF_RN\(|kernel == GP_MKL_SQRT_AVX512 && r >",
     (0, 1), WHY_MKL_AVX2),
    (A + "gp_torch_sqrt.h", "gp_torch_sqrt_vector", r"kernel == GP_MKL_SQRT_SSE \? 0x7f7ff000u : 0x7f7fffffu", (3,),
     WHY_MKL_AVX2),
    (A + "gp_torch_sqrt.h", "gp_torch_sqrt_host_kernel", r"__builtin_cpu_", None, WHY_HOST_CPU),
    (A + "gp_torch_sqrt.h", "gp_torch_sqrtf_host", r"kernel == GP_MKL_SQRT_NONE \|\|", (1,), WHY_HOST_CPU),
    (A + "gp_torch_sqrt.h", "gp_torch_sqrtf_host", r"kernel == GP_MKL_SQRT_AVX512 \?", None, WHY_HOST_CPU),
    (C, "cpu_adamw", r"gp_torch_sqrt_host_kernel\(\) == GP_MKL_SQRT_NONE", (2,), WHY_HOST_CPU),
    (A + "gp_adamw.h", "gp_adamw_mul_store", r"if \(!ev\)|f == GP_FP32 \? p : gp_fmt_from_f32_bits", None, WHY_EV),
    (A + "gp_adamw.h", "gp_adamw_step", r": gp_fmt_from_f32_bits\(pf, nm, cfg\.rounding, rbits, 0, pe\);", (1,),
     WHY_EV),
    (A + "gp_adamw.h", "gp_adamw_step", r"unsigned \*pe = ev|unsigned \*pes = ev_state|^if \(ev\)$|^if \(ev_state\)$",
     None, WHY_EV),
    (A + "gp_adamw.h", "gp_adamw_fused_step", r"", None, WHY_FUSED),
    (A + "gp_adamw.h", "gp_adamw_eval_cpu", r"ev == GP_ADAMW_TORCH_CPU_FOREACH", None, WHY_FOREACH),
    (A + "gp_adamw.h", "gp_adamw_step", r"foreach_cpu \?", None, WHY_FOREACH),
    (A + "gp_adamw.h", "gp_adamw_fused_ok", r"", None, WHY_FUSED),
    (C, "cpu_adamw", r"a->struct_size >= offsetof\(gp_plugin_adamw_args, evaluation\)|"
     r"a->evaluation >= GP_PLUGIN_EVAL_TORCH_CUDA && a->evaluation <= GP_PLUGIN_EVAL_\w+\)", None,
     "a caller older than the adamw args' evaluation field, or one passing an unknown order: the runner passes "
     "the current struct and one of gp_adamw_eval's values (the guard is the plugin ABI's)"),
    (C, "cpu_adamw", r"GP_PLUGIN_ADAMW_TORCH_FUSED_CPU|gp_adamw_fused_ok|a->rounding == GP_PLUGIN_RNE \? GP_RNE|"
     r"a->master \|\| a->comp", None, WHY_FUSED),
    (A + "gp_adamw.h", "gp_adamw_madd_store", r"^if \(f == GP_FP32\)$", None,
     "stochastic rounding of an fp32 param (the only way to this arm with an RNE-free store): no setup does it"),
    (A + "gp_adamw.h", "gp_adamw_step", r"^if \(found_inf\)$", None,
     "the backends return before their element loop in a skipped step (found_inf), so the element step "
     "never sees it set"),
    (A + "gp_adamw.h", "gp_adamw_lerp_store", r"if \(w < 0\.5f && w > -0\.5f\)", (3,),
     "a lerp weight 1 - beta1 <= -0.5, i.e. beta1 >= 1.5: the loader keeps betas in [0, 1)"),
    (A + "gp_schedule.h", "gp_schedule_lr", r"^if \(t < 1\)$", None,
     "a step below 1: the runner counts optimizer steps from 1"),
    (A + "gp_schedule.h", "gp_schedule_lr", r"^if \(span < 1\)$", None,
     "OPEN: a schedule whose decay phase is empty (total <= warmup): a configuration slip the loader accepts; "
     "no preset"),
    (A + "gp_schedule.h", "gp_schedule_lr", r"i < k && lr != 0\.0", (3,),
     "a step schedule with gamma 0 (lr 0 after the first decay): the loop's early stop, a shortcut with the "
     "same result"),
    (A + "gp_clip.h", "gp_clip_coef", r"if \(torch_cpu\)", None,
     "torch's CPU rounding of eps: the runner computes the coefficient as torch's CUDA path (test_clip checks "
     "the other)"),
    # --- kernels/arith: inputs no scenario produces
    (A + "gp_arith.h", "gp_f64_nudge", r"^if \(r == 0\)$|sticky > 0 \? 1ull", None,
     "a binary64 result 0 with a non-zero remainder: an exact value below 2^-1075; no scenario's values "
     "come near"),
    (A + "gp_format.h", "gp_fmt_round_info", r"if \(!\(\(m >> 51\) & 1u\)\)", None,
     "a signalling NaN input: arithmetic only makes quiet NaNs, and generated gradients are finite "
     "(test_formats, test_oracle check it)"),
    (A + "gp_format.h", "gp_fmt_round_info", r": \(sign \| i\.qnan\);|else if \(i\.inf\)", None,
     "a NaN or an infinity converted to e4m3 (no infinities): the suite converts only finite values to e4m3 "
     "(its NaN comes from overflow, through the rounding path)"),
    (A + "gp_format.h", "gp_fmt_round_info", r"e == 0 && m == 0|e \? \(m \| |e \? \(int\)e - 1075", None,
     "binary64 subnormal inputs (below 2^-1022): no scenario's values come near"),
    (A + "gp_format.h", "gp_fmt_round_info", r"if \(shift <= 0\)", None,
     "dead for these formats: a normal binary64 input has 53 significant bits, more than any target's 24, so "
     "shift >= 29 (the routine is generic)"),
    (A + "gp_format.h", "gp_fmt_round_info", r"shift - 64 < 64", None,
     "an input more than 2^128 below the target's smallest subnormal quantum (fp16: below 2^-99): the arm "
     "only avoids an undefined shift; the result is 0 either way"),
    (A + "gp_format.h", "gp_fmt_round_info", r"mag = mode == GP_RTZ \? i\.maxfin", None,
     "OPEN: an RTZ accumulator saturating at its max finite, and an e4m3 overflow to NaN: reachable, no "
     "preset (an e4m3 overflow preset found that the verdict names absorption, not non-finite, once a NaN "
     "accumulator stops changing: docs/testing.md)"),
    (A + "gp_format.h", "gp_fmt_isnan", r"i\.inf \? i\.inf : i\.maxfin", None,
     "the NaN test of an e4m3 value: only when two e4m3 results differ (a mismatching backend); params and "
     "states are never e4m3"),
    # --- issue 25 and 27 (this stage): reachable from a scenario, no preset of the default suite yet
    (A + "gp_scaled.h", None, r"switch \(e\) \{|if \(!\(amax > 0\.0f\)|if \(pow2 && sf > 0\.0f|if \(m != m\)|"
     r"if \(b >= 0x00800000u\)|return k >= -1022", None, WHY_SCALED),
    (H, "gp_attrib_scaled", r"if \(!isfinite\(x\)\)", (0,), WHY_SCALED_NONFINITE),
    (A + "gp_scaled.h", "gp_scaled_row_block", r".", None, WHY_SCALED_SPAN),
    (A + "gp_scaled.h", "gp_mx_scale", r".", None, WHY_SCALED_SPAN),
    (A + "gp_scaled.h", "gp_mx_quantize", r".", None, WHY_SCALED_SPAN),
    (A + "gp_scaled.h", "gp_nvfp4_quantize", r".", None, WHY_SCALED_SPAN),
    (A + "gp_scaled.h", "gp_elem_cast", r".", None, WHY_SCALED_SPAN),
    (A + "gp_scaled.h", "gp_fp8_scale_current", r".", None, WHY_SCALED_SPAN),
    (A + "gp_scaled.h", "gp_e8m0_to_f32", r".", None, WHY_SCALED_SPAN),
    (A + "gp_scaled.h", "gp_nvfp4_dequant", r".", None, WHY_SCALED_SPAN),
    (A + "gp_scaled.h", "gp_mx_mul", r".", None, WHY_SCALED_SPAN),
    (A + "gp_scaled.h", "gp_nvfp4_scale", r".", None, WHY_SCALED_SPAN),
    (A + "gp_scaled.h", "gp_nvfp4_mul", r".", None, WHY_SCALED_SPAN),
    (A + "gp_scaled.h", "gp_scaled_dequant", r".", None, WHY_SCALED_SPAN),
    (A + "gp_scaled.h", "gp_scaled_row_cells", r"if \(c->kind == GP_SC_MX\)|sc = sv != sv", None,
     WHY_SCALED_SPAN),
    (R, "gp_run_accumulate_step", r"if \(S->ts\[t\]\.amax\)|spanning \? waves|if \(S->ts\[t\]\.acc_shadow\)|"
     r"return rc \? rc : waves", None,
     WHY_SCALED + " (the amax passes of a grad or an accumulator whose scale spans the runner's chunks)"),
    (A + "gp_format.h", "gp_fmt_round_info", r"if \(!i\.inf && !i\.qnan\)|\} else if \(i\.qnan\) \{", None,
     "OPEN: a NaN or an infinity converted to an element format of a scaled gradient (e4m3 without "
     "infinities, fp6 and fp4 with neither): only scaled formats reach it; test_scaled_formats checks them "
     "against ml_dtypes"),
    (C, "cpu_adamw_lowbit", r".", None, WHY_LOWBIT),
    (A + "gp_lowbit_block.h", "gp_lowbit_plugin_refuses", r".", None, WHY_LOWBIT),
    (A + "gp_lowbit_block.h", "gp_lowbit_block_of", r".", None, WHY_LOWBIT),
    (C, "cpu_adamw", r"a->state_quant != GP_PLUGIN_STATE_PLAIN", None, WHY_LOWBIT),
    (O, "compare_plugin", r"if \(o->lb\)", None, WHY_LOWBIT),
    (O, "gp_optim_chunk", r"if \(o->lb\)", None, WHY_LOWBIT),
    (O, "formula_explained", r"state_near\(m1, v1, m0, v0, g, fb->b1h?, fb->b2h?, fb->u_p\)", None, WHY_LOWBIT),
    (H, "gp_attrib_saturated", r".", None, WHY_SATURATION),
    (R, "gp_run_unscale", r"gp_attrib_saturated\(c->af, nb, exact, 0\)", None, WHY_SATURATION),
    (R, "accumulate_on", r"^err\) : 0;$", None, WHY_FAIL),
    (R, "attribute_fmt", r"c->lag_rec = c->lag_u && k == c->K - 1 && c->mb_base == 0", None,
     "OPEN: a stochastic accumulator in a data-parallel scenario (ranks other than 0 record no all-lags "
     "sample): no preset combines them"),
    (R, "sr_observe", r"if \(c->lag_rec && i0 \+ j < c->lag_lim\)", None,
     "OPEN: a stochastic tensor longer than the all-lags record (2^21 elements): no preset is that large"),
    (R, "chunk_begin", r"if \(ts->lag_u && S->step_idx == 0 && i0 < ts->lag_n\)", None,
     "OPEN: chunks of a stochastic tensor past the all-lags record (2^21 elements) or after the first step's "
     "window on a lane: no preset reaches them"),
    (R, "window_run", r"if \(L->sp_used\)", None,
     "OPEN: a window after one whose exact sums spilled, on the same lane: no preset's sums spill "
     "(test_exact checks the spill paths)"),
    (C, "cpu_accumulate", r"accumulate_f32_rne_f16g\(a->acc, a->grad, a->n\)", (5, 7), 
     "OPEN: fp16 gradients into an fp32 accumulator where the vector path declines (a non-finite value) or "
     "flush-to-zero: no preset (test_accum checks the vector path against the scalar definition)"),
]

# The level recorded when the last preset was added: branches reached per file (the check
# also fails when a file reaches fewer, e.g. after an exclusion was widened).
RECORDED = {
    "harness/run/gp_attrib.h": 34, "harness/run/gp_optim.c": 99, RUNNER: 386, "kernels/arith/gp_accum.h": 49,
    "kernels/arith/gp_adamw.h": 127, "kernels/arith/gp_arith.h": 7, "kernels/arith/gp_clip.h": 15,
    "kernels/arith/gp_format.h": 112, "kernels/arith/gp_philox.h": 4, "kernels/arith/gp_scaler.h": 6,
    "kernels/arith/gp_schedule.h": 20, "kernels/arith/gp_torch_sqrt.h": 35, "kernels/cpu/gp_cpu_backend.c": 82,
    "kernels/arith/gp_scaled.h": 51,
}


def unit(rel):
    """What a file is judged as: the runner's files as one, any other file as itself."""
    return RUNNER if rel in RUNNER_FILES else rel


def load_source(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read().split("\n")


def presets(gradprec):
    out = subprocess.run([gradprec, "run", "--list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def run_suite(gradprec, plugin, names, data, work, quiet):
    env = dict(os.environ, GCOV_PREFIX=data, GCOV_PREFIX_STRIP="0")
    args = []
    for n in names:
        args += ["--preset", n]
    runs = [("cpu", []), ("example-vs-cpu", ["--backend", "plugin:" + plugin, "--compare", "cpu"])]
    for label, extra in runs:
        cmd = [gradprec, "run", "--quiet", "-j", "2", "--out", os.path.join(work, label)] + extra + args
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode not in (0, 1):
            sys.stderr.write(r.stdout + r.stderr)
            print("coverage.py: the %s run exited %d" % (label, r.returncode), file=sys.stderr)
            sys.exit(2)
        if not quiet:
            print("ran the suite (%d presets) %s: exit %d" % (len(names), label, r.returncode))


def gcov_json(data, build, work):
    """gcov JSON of every gcda written under the private prefix `data`."""
    jdir = os.path.join(work, "json")
    os.makedirs(jdir)
    out = []
    for gcda in glob.glob(os.path.join(data, "**", "*.gcda"), recursive=True):
        orig = gcda[len(data):]  # the absolute path the object was built at
        gcno = orig[:-5] + ".gcno"
        if not os.path.exists(gcno):
            continue
        shutil.copy(gcno, gcda[:-5] + ".gcno")
        r = subprocess.run(["gcov", "--json-format", "--branch-probabilities", "--object-directory",
                            os.path.dirname(gcda), gcda], cwd=jdir, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("coverage.py: gcov failed on %s: %s" % (gcda, r.stderr.strip()))
    for j in glob.glob(os.path.join(jdir, "*.gcov.json.gz")):
        with gzip.open(j, "rt") as f:
            out.append(json.load(f))
    return out


def base_fn(name):
    """A function's name without the suffix of a target clone (every clone is the same source)."""
    return re.sub(r"\.(avx2|default|resolver|fma|arch_x86_64_v[34])$", "", name or "")


def collect(root, docs):
    """({(file, fn, line, idx): reached}, {file: [function names]}) over the measured files
    (every function: the filter is applied by measured()), union over TUs."""
    br, fns = {}, {}
    root = os.path.realpath(root) + os.sep
    for d in docs:
        for fi in d["files"]:
            path = os.path.realpath(fi["file"])
            if not path.startswith(root):
                continue
            rel = path[len(root):]
            if not (rel.startswith(ARITH_DIR) and rel.endswith(".h")) and rel not in MEASURED:
                continue
            names = fns.setdefault(rel, [])
            for f in fi.get("functions", []):
                n = base_fn(f.get("name"))
                if n not in names:
                    names.append(n)
            for ln in fi["lines"]:
                fn = base_fn(ln.get("function_name"))
                for i, b in enumerate(ln["branches"]):
                    k = (rel, fn, ln["line_number"], i)
                    br[k] = br.get(k, False) or b["count"] > 0
    return br, fns


def measured(br):
    """The branches of br in the measured functions."""
    out = {}
    for (rel, fn, line, idx), hit in br.items():
        filt = None if rel.startswith(ARITH_DIR) else MEASURED[rel]
        if filt is None or fn in filt:
            out[(rel, fn, line, idx)] = hit
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="also list the excluded unreached branches")
    ap.add_argument("--save", help="also write the branches reached (JSON) to this file")
    ap.add_argument("--load", help="judge the branches a --save wrote instead of running the suite")
    a = ap.parse_args()
    if a.load:
        with open(a.load) as f:
            saved = json.load(f)
        return judge(a, {tuple(k): hit for k, hit in saved["branches"]}, saved["functions"])
    build = os.path.realpath(a.build)
    gradprec = os.path.join(build, "gradprec")
    plugin = os.path.join(build, "examples", "plugins", "libgp_example_plugin.so")
    for f in (gradprec, plugin):
        if not os.path.exists(f):
            print("coverage.py: %s: missing (build the coverage build first: make coverage)" % f, file=sys.stderr)
            return 2
    names = presets(gradprec)
    for d in a.drop:
        if d not in names:
            print("coverage.py: --drop %s: no such preset" % d, file=sys.stderr)
            return 2
    names = [n for n in names if n not in a.drop]
    work = tempfile.mkdtemp(prefix="gp-coverage-")
    try:
        data = os.path.join(work, "gcda")
        run_suite(gradprec, plugin, names, data, work, a.quiet)
        br, fns = collect(a.source, gcov_json(data, build, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if a.save:
        with open(a.save, "w") as f:
            json.dump({"branches": [[list(k), hit] for k, hit in sorted(br.items())], "functions": fns}, f)
    return judge(a, br, fns)


def judge(a, br, fns):
    """Print the table and what is missing; 1 when the check fails."""
    rc = 0
    unit_fns, unit_filt = {}, {}
    for rel, filt in MEASURED.items():
        unit_fns.setdefault(unit(rel), set()).update(fns.get(rel, []))
        unit_filt[unit(rel)] = filt
    for u, filt in sorted(unit_filt.items()):  # a renamed function would silently leave the set
        for fn in sorted(filt or ()):
            if fn not in unit_fns[u]:
                print("coverage: %s: no function %s any more (update RUNNER_STEP / OPTIM_STEP)" % (u, fn))
                rc = 1
    br = measured(br)
    src = {}
    excl_used = [0] * len(EXCLUSIONS)
    per_file = {}
    missing = []
    for (rel, fn, line, idx), hit in sorted(br.items()):
        if rel not in src:
            src[rel] = load_source(a.source, rel)
        text = src[rel][line - 1].strip() if line - 1 < len(src[rel]) else ""
        s = per_file.setdefault(unit(rel), [0, 0, 0])  # reached, total, excluded-unreached
        s[1] += 1
        if hit:
            s[0] += 1
            continue
        ex = None
        for n, (f, xfn, pat, arms, _) in enumerate(EXCLUSIONS):
            if f == unit(rel) and (xfn is None or xfn == fn) and re.search(pat, text) and (arms is None or idx in arms):
                ex = n
                break
        if ex is None:
            missing.append((rel, line, fn, idx, text))
        else:
            excl_used[ex] += 1
            s[2] += 1
            if a.verbose:
                print("excluded: %s:%d (%s, branch %d): %s  [%s]" % (rel, line, fn, idx, text, EXCLUSIONS[ex][4][:60]))
    print("%-34s %9s %7s %9s %9s" % ("file", "reached", "total", "excluded", "missing"))
    for rel in sorted(per_file):
        r, t, x = per_file[rel]
        print("%-34s %9d %7d %9d %9d" % (rel, r, t, x, t - r - x))
        if r < RECORDED.get(rel, 0):
            print("coverage: %s: %d branches reached, below the recorded %d" % (rel, r, RECORDED[rel]))
            rc = 1
    for rel, line, fn, idx, text in missing:
        print("not reached: %s:%d (%s, branch %d): %s" % (rel, line, fn, idx, text))
        rc = 1
    for n, used in enumerate(excl_used):
        if not used and not a.drop:
            print("stale exclusion (matches no unreached branch): %s %s /%s/ %s" % EXCLUSIONS[n][:4])
            rc = 1
    print("coverage: %s" % ("FAIL" if rc else "ok: every branch not excluded is reached"))
    return rc


if __name__ == "__main__":
    sys.exit(main())
