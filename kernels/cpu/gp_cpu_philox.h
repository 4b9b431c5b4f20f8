/* gp_cpu_philox.h — Philox4x32-10 over many counters per vector register, on the CPU: the
 * words of kernels/arith/gp_philox.h a block at a time, for the generator
 * (harness/sources/gp_gen_simd.h) and the CPU backend's stochastic rounding. The path is
 * chosen at run time from the CPU (AVX-512F, AVX2, else portable C); every path gives
 * the scalar definition's bits. */
#ifndef GP_CPU_PHILOX_H
#define GP_CPU_PHILOX_H

#include <stddef.h>
#include <stdint.h>

/* A code path; AUTO picks the widest the CPU has. */
typedef enum { GP_GEN_AUTO, GP_GEN_PORTABLE, GP_GEN_AVX2, GP_GEN_AVX512 } gp_gen_path;

/* 1 when `path` can run on this CPU (AUTO and PORTABLE always). */
int gp_gen_path_available(gp_gen_path path);

/* The path that runs for `path`: AUTO the widest available, an unavailable one PORTABLE. */
gp_gen_path gp_gen_path_resolve(gp_gen_path path);

/* Words per output lane the vector paths may write past n: callers size w[k] to
 * n rounded up to a multiple of GP_GEN_PAD. */
#define GP_GEN_PAD 16

/* w[k][j] = word k of gp_philox4x32_10(ctr = {e lo, e hi, stream lo, stream hi},
 * key = {seed lo, seed hi}) for element e = idx ? idx[j] : i0 + j (mod 2^64), j < n.
 * w[k][n .. round_up(n, GP_GEN_PAD)) may be overwritten with unspecified words. An
 * unavailable path runs the portable one. */
void gp_philox_block(gp_gen_path path, uint64_t seed, uint64_t stream, uint64_t i0, const uint64_t *idx, size_t n,
                     uint32_t *const w[4]);

#endif
