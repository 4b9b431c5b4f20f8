#!/bin/sh
# no_fused_addsub.sh BINARY — fails when the built binary holds a vfmaddsub or vfmsubadd
# instruction. No source calls them (their intrinsics appear nowhere in the tree), so one
# can only come from the compiler fusing a complex product's multiplies and adds into FMAs,
# which gcc 12 does in AVX2/AVX-512 clones of interleaved complex loops even under
# -ffp-contract=off (harness/run/gp_sr_lag.c, stage): the products would round once instead
# of twice and a report's bits would change. Exit 77 (skipped) without objdump or off x86.
lib=$1 # the gradprec command: every runner path is in it
command -v objdump >/dev/null 2>&1 || { echo "no objdump: skipped"; exit 77; }
case $(uname -m) in x86_64) ;; *) echo "not x86-64: skipped"; exit 77 ;; esac
[ -r "$lib" ] || { echo "no library $lib"; exit 1; }
found=$(objdump -d --no-show-raw-insn "$lib" | grep -E '\bvfm(addsub|subadd)[0-9]*p[sd]\b' | head -5)
if [ -n "$found" ]; then
    echo "$lib holds fused add/subtract instructions (contracted complex products):"
    echo "$found"
    exit 1
fi
echo "$lib: no vfmaddsub / vfmsubadd"
