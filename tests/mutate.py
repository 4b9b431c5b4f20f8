#!/usr/bin/env python3
"""Mutation score of the project's own tests (issue 18 item 8, issue 27 item 8).

Applies, one at a time, each one-line source mutation of MUTANTS (below) to kernels and
harness in a scratch copy of the tracked files (the working tree is never touched), rebuilds
incrementally in one kept build folder, runs the test subset TESTS, and reports which
mutants the tests kill. A mutant is killed when a test fails. A mutant that does not
compile is reported and not counted (each of the list below compiles). The score is
killed / mutants.

Usage: tests/mutate.py [--source ROOT] [--keep DIR] [--only N,...] [--jobs N] [--check]
  --keep DIR: the scratch copy (DIR/src), its build (DIR/build) and DIR/mutate.log; default
  ROOT/build-mutate (ignored by git). Kept between runs: the next run copies only the files
  that changed and rebuilds what depends on them.
  --only: run the listed mutant numbers (1-based) only.
  --check: only check that every mutant applies (its text occurs once in its file, outside
  code compiled only in the coverage build); a run checks this first too and stops (exit 2)
  when one does not apply.
Exit status: 0 when the score is above 90%, 1 otherwise, 2 on bad usage, a mutant that does
not apply, or when the unmutated tree fails the subset (nothing can be judged then); 130
when interrupted (SIGINT, SIGTERM, SIGHUP: the mutated file is restored first, and the next
run rebuilds it).

Mutants run grouped by file (in file order, then by number): the file is restored once its
last mutant has run, so a mutated header's dependents rebuild once per mutant plus once for
the restore of the file, not once more per mutant. Only the targets the subset needs are
built (TARGETS).

The subset (docs/testing.md, "Mutation score"): the unit suites of the formats, Philox,
accumulation, AdamW, the scaler and clipping, the runner's attribution around non-finite
values and stale updates (test_attribution: scenarios of a few elements), the oracle sweep
shortened to GP_SWEEP_N=20000 hard values per format and mode, and the default suite gated
against ci/baseline.json. The tests take about 10 s an unmutated run; rebuilding after a
mutated header (up to about 50 files) is most of each mutant's time. Not run: the ASan pass,
test_accumulate, test_verdicts, the --compare and wrong-plugin tests, the fuzz corpora,
hostile inputs, reports and the CUDA shim (slow, or about other layers).
"""
import argparse
import os
import signal
import shutil
import subprocess
import sys
import time

TESTS = ["test_philox", "test_formats", "test_accum", "test_adamw", "test_scaler", "test_clip", "test_attribution",
         "test_oracle", "gate_default_suite_against_baseline"]
TARGETS = ["gradprec", "test_philox", "test_formats", "test_accum", "test_adamw",
           "test_scaler", "test_clip", "test_attribution", "test_oracle"]

# (file, the exact text of the original (unique in the file), its replacement, what it breaks)
MUTANTS = [
    # kernels/arith/gp_format.h
    ('kernels/arith/gp_format.h',
     'up = frac > 0x8000000000000000ull || (frac == 0x8000000000000000ull && (kept & 1u));',
     'up = frac > 0x8000000000000000ull || (frac == 0x8000000000000000ull);', 'RNE ties away from zero'),
    ('kernels/arith/gp_format.h',
     'up = rbits < (uint32_t)(frac >> 32);',
     'up = rbits <= (uint32_t)(frac >> 32);', 'stochastic rounding: <= (biased up)'),
    ('kernels/arith/gp_format.h',
     'if (ftz && X < i.emin) {',
     'if (ftz && X < i.emin - 1) {', 'FTZ threshold one binade low'),
    ('kernels/arith/gp_format.h',
     '    return a == b || (gp_fmt_isnan(f, a) && gp_fmt_isnan(f, b));',
     '    return a == b || (gp_fmt_isnan(f, a) || gp_fmt_isnan(f, b));', 'agree: one NaN suffices'),
    ('kernels/arith/gp_format.h',
     '    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;',
     '    uint32_t rounded = (u + 0x8000u) >> 16;', 'fast bf16 RNE: ties away'),
    # kernels/arith/gp_arith.h
    ('kernels/arith/gp_arith.h',
     '    int away = (sticky > 0) == !(u >> 63);',
     '    int away = (sticky > 0);', 'nudge: direction ignores the sign'),
    # kernels/arith/gp_accum.h
    ('kernels/arith/gp_accum.h',
     '        float y = GP_FSUB_RN(g, c);',
     '        float y = GP_FADD_RN(g, c);', 'Kahan: compensation added'),
    ('kernels/arith/gp_accum.h',
     '    if ((vb & 0x7f800000u) == 0x7f800000u)\n        *found_inf = 1;',
     '    if ((vb & 0x7fffffffu) == 0x7f800000u)\n        *found_inf = 1;', 'unscale: NaN not found'),
    ('kernels/arith/gp_accum.h',
     '    double prod = (double)gp_f32_from_bits(vb) * (double)inv_scale; /* exact: 24x24 bits */',
     '    double prod = (double)gp_f32_from_bits(vb) * (double)gp_f32_from_bits(gp_f32_bits(inv_scale) & 0xffff0000u);', 'unscale multiplier truncated to bf16'),
    # kernels/arith/gp_scaler.h
    ('kernels/arith/gp_scaler.h',
     '        s->tracker = 0;\n        return;',
     '        return;', 'backoff keeps the tracker'),
    ('kernels/arith/gp_scaler.h',
     '    if (successful == interval) {',
     '    if (successful > interval) {', 'growth one step late'),
    # kernels/arith/gp_adamw.h
    ('kernels/arith/gp_adamw.h',
     '    double b2t = gp_adamw_pow(beta2, t);',
     '    double b2t = gp_adamw_pow(beta1, t);', 'bias correction 2 uses beta1'),
    ('kernels/arith/gp_adamw.h',
     '    if (w < 0.5f && w > -0.5f)',
     '    if (w < 0.5f && w > 0.5f)', 'lerp: always the second form'),
    # kernels/arith/gp_clip.h
    ('kernels/arith/gp_clip.h',
     '    return c > 1.0f ? 1.0f : c;',
     '    return c;', 'clip coefficient not clamped'),
    # kernels/arith/gp_philox.h
    ('kernels/arith/gp_philox.h',
     '    return gp_philox4x32_10(c, k).v[index & 3];',
     '    return gp_philox4x32_10(c, k).v[index & 1];', 'random words reused'),
    # harness/run/gp_run_grads.c
    ('harness/run/gp_run_grads.c',
     '    case GP_RED_MEAN: return (double)nk * sc->batch.accumulation_steps;',
     '    case GP_RED_MEAN: return (double)nk * sc->batch.microbatches;', 'mean: divides by K seen, not A'),
    ('harness/run/gp_run_grads.c',
     '    case GP_RED_MEAN_NO_DIV: return (double)nk;',
     '    case GP_RED_MEAN_NO_DIV: return N;', 'mean_no_div as token_mean'),
    # harness/run/gp_attrib.h
    ('harness/run/gp_attrib.h',
     '    if (isinf(v) && isfinite(exact))\n        return GP_MECH_OVERFLOW;',
     '    if (isinf(v) && isfinite(exact))\n        return GP_MECH_ROUNDING;', 'overflow classified as rounding'),
    ('harness/run/gp_attrib.h',
     '    } else if (g != 0 && nb == ob && isfinite(a)) {',
     '    } else if (g != 0 && nb == ob && isfinite(a) && 0) {', 'absorption never counted'),
    # harness/run/gp_run_accum.c, gp_run_step.c, gp_run_grads.c
    ('harness/run/gp_run_accum.c',
     '    if (u.found_inf)\n        *found_inf = 1;',
     '    if (u.found_inf && 0)\n        *found_inf = 1;', 'found_inf dropped'),
    ('harness/run/gp_run_step.c',
     '    *coef = sc->loss_scale.unscale_before_clip ? *right : gp_clip_coef(af, scaled, sc->clip.max_norm, 0);',
     '    *coef = 1 ? *right : gp_clip_coef(af, scaled, sc->clip.max_norm, 0);', 'clip order ignored'),
    ('harness/run/gp_run_grads.c',
     '    if (c->shrink != 1.0) /* the shrunk value, made fp32, is the exact input */',
     '    if (c->shrink != 1.0 && 0) /* the shrunk value, made fp32, is the exact input */', 'shrink ignored'),
    # harness/run/gp_optim.c (the vector path attribute_block, what every build but the
    # coverage build runs; the per-element `#else` form is compiled only with
    # GP_VECTOR_BLOCKS=0, so a mutant there is equivalent: --check refuses such mutants)
    ('harness/run/gp_optim.c',
     '        uint64_t stale = nonzero & (uint64_t)(diff[j] == 0);',
     '        uint64_t stale = (uint64_t)(diff[j] == 0);', 'stale counted for zero updates'),
    # harness/sources/gp_generate.c
    ('harness/sources/gp_generate.c',
     '    b ^= (uint64_t)(c->signed_dist & ((w3 >> 16) < c->neg_cut)) << 63;',
     '    b ^= (uint64_t)(1 & ((w3 >> 16) < c->neg_cut)) << 63;', 'sign flips for normal distributions too'),
    # issue 27: one mutant of each class the seeded-bug campaign found passing
    ('kernels/arith/gp_format.h',
     '                mag = mode == GP_RTZ ? i.maxfin : (i.inf ? i.inf : (i.qnan ? i.qnan : i.maxfin));',
     '                mag = mode == GP_RTZ || i.p <= 4 ? i.maxfin : (i.inf ? i.inf : (i.qnan ? i.qnan : i.maxfin));',
     'fp8 overflow saturates'),
    ('kernels/cpu/gp_cpu_backend.c',
     'uint32_t rb = r == GP_ACC_STOCHASTIC ? gp_rand_u32(a->seed, a->stream, a->first_index + i) : 0;',
     'uint32_t rb = r == GP_ACC_STOCHASTIC ? gp_rand_u32(a->seed, a->stream, (a->first_index + i) & 0xffffu) : 0;',
     'SR bits of period 2^16'),
    ('kernels/arith/gp_scaler.h',
     '    if (successful == interval) {',
     '    if (successful + 1 >= interval) {', 'growth one step early'),
    ('kernels/cpu/gp_cpu_backend.c',
     '+ gp_f32_from_bits((uint32_t)g[i] << 16);\n        acc[i] = (uint16_t)gp_bf16_rne_from_f32_bits(gp_f32_bits(s));',
     '+ gp_f32_from_bits((uint32_t)g[i] << 16);\n        acc[i] = (uint16_t)(gp_f32_bits(s) >> 16);',
     'bf16 + bf16 truncated (the all-reduce case)'),
    ('harness/sources/gp_sample.c',
     '        double w = pop[h] / s[h].n;',
     '        double w = 1.0 / s[h].n;', 'sampled strata weighted without their population'),
    ('harness/run/gp_run_grads.c',
     '    fill_xs(c->xs, c->m, c->n, mul, (double)nk, den, c->s);',
     '    fill_xs(c->xs, c->m, c->n, mul, (double)c->tok[k ? k - 1 : k], den, c->s);',
     "backward outputs weighted by the previous micro-batch's token count"),
]


STILLBORN = "does not compile"


class Interrupted(Exception):
    pass


def on_signal(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def sh(cmd, cwd, env=None, log=None):
    """Runs cmd in its own process group (an interrupt ends the whole group: no compiler
    left writing into the build); its output goes to log. Returns (exit status, output)."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate()
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        raise
    if log is not None:
        log.write(out)
        log.flush()
    return p.returncode, out


def copy_tree(src, dst):
    """Copies src's tracked files to dst, only those whose bytes differ (the others keep
    their mtime: the build stays incremental; a file a killed run left mutated differs and
    is copied back, with a new mtime, so what depends on it rebuilds)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=src, capture_output=True, check=True).stdout.split(b"\0")
    for f in files:
        if not f:
            continue
        f = f.decode()
        s = os.path.join(src, f)
        if not os.path.isfile(s):
            continue
        d = os.path.join(dst, f)
        if os.path.exists(d) and open(s, "rb").read() == open(d, "rb").read():
            continue
        os.makedirs(os.path.dirname(d), exist_ok=True)
        shutil.copy(s, d)


def coverage_only_lines(text):
    """The line numbers (1-based) of text inside the `#else` branch of an `#if
    GP_VECTOR_BLOCKS`: code compiled only in the coverage build, where a mutant is
    equivalent in every build the subset runs."""
    stack, dead = [], set()  # stack: [is a GP_VECTOR_BLOCKS conditional, in its #else]
    for n, line in enumerate(text.splitlines(), 1):
        t = line.strip().replace(" ", "")
        if t.startswith("#if"):
            stack.append([t == "#ifGP_VECTOR_BLOCKS", False])
        elif t.startswith("#else") or t.startswith("#elif"):
            if stack:
                stack[-1][1] = True
        elif t.startswith("#endif"):
            if stack:
                stack.pop()
        elif any(v and e for v, e in stack):
            dead.add(n)
    return dead


def check_mutants(source):
    """None when every mutant applies to source, else what does not."""
    for n, (f, old, new, _) in enumerate(MUTANTS, 1):
        path = os.path.join(source, f)
        if not os.path.isfile(path):
            return "mutant %d: no file %s" % (n, f)
        text = open(path).read()
        if text.count(old) != 1:
            return "mutant %d (%s): its original text occurs %d times in %s, not once" % (n, MUTANTS[n - 1][3],
                                                                                          text.count(old), f)
        if old == new:
            return "mutant %d: the replacement is the original" % n
        first = text[:text.index(old)].count("\n") + 1
        if set(range(first, first + old.count("\n") + 1)) & coverage_only_lines(text):
            return "mutant %d: %s line %d is compiled only in the coverage build (GP_VECTOR_BLOCKS=0)" % (n, f, first)
    return None


def build_and_test(tree, build, jobs, log):
    rc, _ = sh(["cmake", "--build", build, "-j", str(jobs), "--target"] + TARGETS, tree, log=log)
    if rc != 0:
        return STILLBORN
    env = dict(os.environ, GP_SWEEP_N="20000")
    rc, out = sh(["ctest", "-j", str(jobs), "--stop-on-failure", "--timeout", "600", "-R",
                  "^(" + "|".join(TESTS) + ")$"], build, env=env, log=log)
    if rc == 0:
        return None
    bad = [l.split(":", 1)[1].split()[0] for l in out.splitlines()
           if "***" in l and ":" in l and " Test " in l]
    return "failed: " + (", ".join(bad) if bad else "ctest exit %d" % rc)


def host_line():
    """CPU model, family/model (/proc/cpuinfo), cores and the load average: the figures' host."""
    info = {}
    try:
        for line in open("/proc/cpuinfo"):
            k, _, v = line.partition(":")
            info.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    return "%s, family %s model %s, %d cores, load %.1f %.1f %.1f" % (
        info.get("model name", "?"), info.get("cpu family", "?"), info.get("model", "?"), os.cpu_count() or 0,
        *os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--keep")
    ap.add_argument("--only")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--check", action="store_true", help="only check that every mutant applies")
    a = ap.parse_args()
    bad = check_mutants(a.source)
    if bad:
        print("mutate.py: %s" % bad, file=sys.stderr)
        return 2
    if a.check:
        print("mutate.py: %d mutants, each applies once" % len(MUTANTS))
        return 0
    pick = list(range(1, len(MUTANTS) + 1))
    if a.only:
        try:
            pick = [int(x) for x in a.only.split(",")]
        except ValueError:
            pick = [0]
        if any(n < 1 or n > len(MUTANTS) for n in pick):
            print("mutate.py: --only takes mutant numbers 1..%d" % len(MUTANTS), file=sys.stderr)
            return 2
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    start, host0 = time.time(), host_line()
    work = os.path.abspath(a.keep or os.path.join(a.source, "build-mutate"))
    tree, build = os.path.join(work, "src"), os.path.join(work, "build")
    os.makedirs(tree, exist_ok=True)
    log = open(os.path.join(work, "mutate.log"), "w")
    print("mutate.py: scratch copy and build in %s (log: mutate.log there)" % work, flush=True)
    killed, survived, stillborn = 0, [], []
    current = None  # (path, original text) of the file now mutated in the copy
    try:
        copy_tree(a.source, tree)
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            rc, out = sh(["cmake", "-S", tree, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DGP_CUDA=OFF"], tree,
                         log=log)
            if rc != 0:
                print(out, file=sys.stderr)
                return 2
        t0 = time.time()
        why = build_and_test(tree, build, a.jobs, log)
        if why:
            print("mutate.py: the unmutated tree fails the subset (%s): nothing to judge" % why, file=sys.stderr)
            return 2
        print("mutate.py: unmutated tree passes the subset (%.0f s)" % (time.time() - t0), flush=True)
        # grouped by file: each file restored once, after its last mutant
        for n in sorted(pick, key=lambda n: (MUTANTS[n - 1][0], n)):
            f, old, new, what = MUTANTS[n - 1]
            path = os.path.join(tree, f)
            if current and current[0] != path:
                open(current[0], "w").write(current[1])
                current = None
            if current is None:
                current = (path, open(path).read())
            open(path, "w").write(current[1].replace(old, new))
            t0 = time.time()
            log.write("\n==== mutant %d: %s: %s\n" % (n, f, what))
            why = build_and_test(tree, build, a.jobs, log)
            if why == STILLBORN:
                stillborn.append(n)
            elif why:
                killed += 1
            else:
                survived.append(n)
            label = "n/a" if why == STILLBORN else "killed" if why else "SURVIVED"
            print("mutant %2d %-8s %-24s %s (%.0f s)%s" % (n, label, f.split("/")[-1], what,
                                                          time.time() - t0, " -- " + why if why else ""), flush=True)
    except Interrupted as e:
        print("mutate.py: interrupted (%s)%s" % (e, "; %s restored in the copy" % current[0] if current else ""),
              file=sys.stderr)
        return 130
    finally:
        if current:
            open(current[0], "w").write(current[1])
        log.close()
    total = len(pick) - len(stillborn)  # a mutant that does not compile is no test of the tests
    for n in stillborn:
        print("not counted (does not compile): mutant %d" % n)
    score = 100.0 * killed / total if total else 0.0
    print("mutation score: %d of %d mutants killed (%.1f%%)" % (killed, total, score))
    for n in survived:
        print("survivor %d: %s: %s" % (n, MUTANTS[n - 1][0], MUTANTS[n - 1][3]))
    print("time: %.1f min; host at start: %s; at the end: load %.1f %.1f %.1f" % (
        (time.time() - start) / 60, host0, *os.getloadavg()))
    return 0 if score > 90.0 else 1


if __name__ == "__main__":
    sys.exit(main())
