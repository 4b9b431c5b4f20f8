#!/bin/bash
# run from the worktree; each mutant: a one-rule patch of kernels/arith/gp_scaled.h, rebuilt, the scaled-format tests run
cd "$(dirname "$0")/.."
H=kernels/arith/gp_scaled.h
ORIG=$(mktemp)
PY=${GP_PYTHON:-.venv/bin/python}
cp $H "$ORIG"
mut() { # name, python replace old, new
  if ! python3 -c "
import sys
s=open('$H').read(); old=sys.argv[1]; new=sys.argv[2]
if s.count(old) != 1: sys.exit(1)
open('$H','w').write(s.replace(old,new))" "$2" "$3"; then
    echo "mutant $1: PATTERN NOT FOUND in $H (the script is stale: nothing was tested)"
    return
  fi
  cmake --build build -j2 --target gradprec_shared >/dev/null 2>&1 || echo BUILD FAILED
  r=$(PYTHONPATH=$PWD/python GRADPREC_LIB=$PWD/build/libgradprec.so $PY -m pytest -q -p no:cacheprovider tests/python/test_scaled_formats.py 2>&1 | tail -1)
  echo "mutant $1: $r"
  cp "$ORIG" $H
}
mut "EVEN without its rounding (= FLOOR)" "            b = (b + (1u << (23 - (i.p - 1) - 1))) & 0x7f800000u;" "            b = b & 0x7f800000u;"
mut "CEIL ignoring the mantissa" "        if (r == GP_MX_CEIL && (b & 0x7fffffu))" "        if (r == GP_MX_CEIL && 0)"
mut "RCEIL as floor of log2" "            k += !pow2;" "            k += 0 * !pow2;"
mut "MX elements not saturated" "        codes[k] = (uint8_t)gp_elem_cast(e, gp_sc_f32((double)x[k] * mul), 1, mode, rb, ev ? ev + k : ev);" "        codes[k] = (uint8_t)gp_elem_cast(e, gp_sc_f32((double)x[k] * mul), e > GP_EL_E5M2, mode, rb, ev ? ev + k : ev);"
mut "torchao's 2^-126 floor of the scale dropped" "    return gp_sc_pow2(127 - ((sc == 0u && (flags & GP_MX_TORCHAO)) ? 1 : (int)sc));" "    return gp_sc_pow2(127 - (int)sc);"
mut "NVFP4 block scale not clamped to 2^-6" "    if (bs < 0.015625f)
        bs = 0.015625f;" ""
mut "NVFP4 reciprocal in one rounding" "    return two_level ? gp_sc_f32((double)gp_sc_f32(1.0 / (double)ts) / s) : gp_sc_f32(1.0 / s);" "    return two_level ? gp_sc_f32(1.0 / ((double)ts * s)) : gp_sc_f32(1.0 / s);"
mut "amax_to_scale without the 1e-12 floor" "    if (a < 1e-12)
        a = 1e-12;" ""
mut "fp8 product not rounded to fp32 first" "    return gp_elem_cast(e, gp_sc_f32((double)x * (double)s), sat, mode, rbits, ev);" "    { double p = (double)x * (double)s; double mx = gp_elem_max(e); if (sat && (p > mx || p < -mx)) p = p > 0 ? mx : -mx; return gp_fmt_round_info(gp_elem_info(e), gp_f64_bits(p), mode, rbits, 0, ev); }"
mut "e2m1 max 4 instead of 6 (one element format changed)" "    default:         i.width = 4; i.p = 2; i.emin = 0; i.emax = 2; i.maxfin = 0x7u; break;" "    default:         i.width = 4; i.p = 2; i.emin = 0; i.emax = 2; i.maxfin = 0x6u; break;"
cmake --build build -j2 --target gradprec_shared >/dev/null 2>&1
