/* gp_decode.h — fuzz bytes -> typed parameters, the way libFuzzer's FuzzedDataProvider
 * does it: integers and choices are consumed from the END of the input, payload bytes
 * (bit patterns, significands) from the FRONT, so a mutation of the configuration does
 * not shift every value and vice versa. An exhausted input reads as zero bytes: every
 * byte string (the empty one included) decodes, deterministically, to a valid result.
 * Built on it: a whole scenario (gp_decode_scenario, what `gradprec repro` prints) and a
 * small accumulation case (gp_decode_accum, the accumulate and metamorphic targets). */
#ifndef GP_DECODE_H
#define GP_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "../../base/gp_error.h"
#include "gp_scenario.h"
#include "../../kernels/arith/gp_accum.h"

/* ---- the byte reader ---- */

typedef struct {
    const uint8_t *data; /* unread bytes: data[0 .. size) */
    size_t size;
} gp_decoder;

/* Read from data[0 .. size); the decoder borrows the bytes (they must outlive it). */
void gp_decoder_init(gp_decoder *d, const uint8_t *data, size_t size);

/* An integer in [lo, hi] (lo <= hi), from the end: one byte per 8 bits of hi - lo
 * (none when lo == hi), most significant first, then lo + v mod (hi - lo + 1).
 * Missing bytes read as 0, so an exhausted input gives lo. */
uint64_t gp_decoder_range(gp_decoder *d, uint64_t lo, uint64_t hi);

/* The same for signed int bounds. */
int gp_decoder_int(gp_decoder *d, int lo, int hi);

/* 0 or 1 (the low bit of one byte from the end). */
int gp_decoder_bool(gp_decoder *d);

/* An index in [0, n), n >= 1 (gp_decoder_range(d, 0, n - 1)). */
unsigned gp_decoder_pick(gp_decoder *d, unsigned n);

/* nbytes (0..8) of payload from the front, little-endian; missing bytes are 0. */
uint64_t gp_decoder_bits(gp_decoder *d, int nbytes);

/* ---- values steered into the regions where formats lose information ---- */

/* Where gp_decode_value puts a value (f: the format the value is for). */
typedef enum {
    GP_REGION_RAW = 0,   /* any bit pattern of f: NaN and inf included (see `finite`) */
    GP_REGION_ORDINARY,  /* normal, |v| in [2^-12, 2^5) */
    GP_REGION_SUBNORMAL, /* f's subnormals, values next to the min normal, and 1/4..2 times
                            the min subnormal (below it: rounds to 0 or to it; 1/2 is a tie) */
    GP_REGION_HALFWAY,   /* exactly halfway between two neighbouring values of f (any binade,
                            the subnormal one and the overflow threshold included) */
    GP_REGION_OVERFLOW,  /* max finite of f plus -4..3 half-ulps of its top binade */
    GP_REGION_ABSORB,    /* 2^-(pa+3) .. 2^-(pa-2) times |ref| (pa: the accumulator's
                            precision): absorbed, halfway (ties) or barely kept by acc + v */
    GP_NREGIONS
} gp_region;

/* A binary64 value steered into a region of format f (fp32, bf16 or fp16; the region is
 * decoded first, then its parameters): sign and significand bits come from the payload,
 * exponents and offsets from the end. `acc` and `ref` place GP_REGION_ABSORB (ref 0 or
 * non-finite is taken as 1). With `finite` set, a NaN or inf of the raw region becomes
 * +-max finite. The returned value is NOT rounded to f (a halfway value is not a value
 * of f). Optional outputs: *region the region used; *bits a value of f: the raw pattern
 * itself (NaN payloads, signalling NaNs and -0 kept), else the value rounded toward zero
 * to f (beyond max finite: max finite). */
double gp_decode_value(gp_decoder *d, gp_format f, gp_format acc, double ref, int finite,
                       gp_region *region, uint32_t *bits);

/* ---- a whole scenario ---- */

/* Decode a scenario (gp_scenario_init, then every field): name "fuzz", grad and
 * accumulator dtypes (fp32/bf16/fp16), rounding (rne/rtz/stochastic/kahan), ftz,
 * reduction, fullbatch, K = 1..64 micro-batches, accumulation_steps = K or more (a
 * partial last window), token counts 1..4096 (1..8 when a tensor has explicit values),
 * 1..3 tensors of 1..256 elements whose gradients are a distribution with a power-of-two
 * scale steered to the fp16 subnormal/underflow range (~2^-24), the fp16 min normal
 * (~2^-14), fp16 overflow (~65504), the fp32/bf16 underflow range (~2^-126), a wide
 * spread for absorption (outliers 2^9..2^16 or lognormal sigma 3..6), or ordinary
 * values; or explicit per-token values (size 1) from gp_decode_value; the loss scaler
 * (mode, power-of-two init, growth, backoff, interval, update, unscale_before_clip),
 * clip max_norm, the LR schedule, AdamW (lr, betas, eps, weight decay, param/state
 * dtype fp32/bf16/fp16; one variant of: plain, fp32 master, Kahan, stochastic, master +
 * stochastic — Kahan excludes the other two) and 1..8 steps; last, one time in four
 * (generated gradients, no Kahan accumulator), data parallelism: 2..8 ranks, any
 * collective, reduce dtype, average, predivide, no_sync, bucket, normalization and
 * per-rank token counts (docs/distributed.md); after that, one generated scenario in
 * eight takes fp8 gradients (e4m3 or e5m2); last, one scenario in eight (any kind)
 * takes an fp8 accumulator (e4m3 or e5m2: accumulation, unscaling, clipping and a
 * collective without a reduce dtype store into it). Every value is inside what
 * gp_scenario_load_string accepts, so gp_scenario_to_yaml of the result loads back
 * (the `decode` fuzz target checks it). `out` owns what it points to (free it with
 * gp_scenario_free). Returns 0, or -1 with err set when out of memory (out is then
 * left initialised, owning nothing). */
int gp_decode_scenario(const uint8_t *data, size_t size, gp_scenario *out, gp_error *err);

/* ---- a small accumulation case ---- */

#define GP_DECODE_MAX_ADDENDS 64

typedef struct {
    gp_format grad;           /* format of the addends: fp32, bf16 or fp16 */
    gp_format acc;            /* accumulator format: fp32, bf16 or fp16 */
    gp_acc_rounding rounding; /* rne, rtz, stochastic or kahan */
    int ftz;                  /* flush-to-zero on the accumulator stores */
    uint64_t seed;            /* stochastic rounding: step k draws gp_decode_accum_rbits */
    int n;                    /* addends: 1 .. GP_DECODE_MAX_ADDENDS */
    uint32_t bits[GP_DECODE_MAX_ADDENDS]; /* addend k as a bit pattern of `grad` */
    uint8_t region[GP_DECODE_MAX_ADDENDS]; /* the gp_region addend k was steered into */
} gp_accum_case;

/* Decode a case: the configuration from the end; the count n in 1 .. min(64, 1 + L/3),
 * L the bytes left after the configuration (an addend takes at least 3 bytes: its region
 * and 2..4 payload bytes, so n never asks for addends the input cannot describe, and
 * small inputs stay cheap); then each addend as the `bits` of
 * gp_decode_value(grad, acc, ref = sum of the finite addends so far, not finite-only):
 * raw patterns (NaN and inf included) as they are, other regions rounded toward zero
 * to `grad`. */
void gp_decode_accum(const uint8_t *data, size_t size, gp_accum_case *c);

/* The 32 random bits stochastic rounding uses at step k of case c: those `gradprec run`
 * draws for element 0 of tensor 0 at micro-batch k under c->seed (runner convention:
 * stream gp_stream_id(GP_STREAM_ACCUM_SR, 0, 0, k)). */
uint32_t gp_decode_accum_rbits(const gp_accum_case *c, int k);

/* The scenario that replays c in `gradprec run`: one tensor "acc" of size 1 with
 * explicit values, one token per micro-batch holding addend k, reduction sum, fullbatch
 * sum, no loss scale, precision {grad, acc, rounding, ftz}, seed c->seed. The runner
 * stores x_k = addend k * 1 in `grad` (exact) and accumulates as the target does.
 * Returns 0, or -1 with err set when an addend is NaN or inf (a scenario cannot hold it)
 * or out of memory; out owns what it points to. */
int gp_accum_case_scenario(const gp_accum_case *c, gp_scenario *out, gp_error *err);

#endif
