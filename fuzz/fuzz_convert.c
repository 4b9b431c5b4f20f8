/* fuzz_convert.c — libFuzzer target: a format conversion of kernels/arith against the
 * MPFR oracle, bit for bit, events included. Input layout:
 *   byte 0: format (mod GP_NFORMATS); byte 1: bits 0-1 mode (mod the length of
 *   GP_VOCAB_RMODES: two bits reach 4 modes, a fifth needs a wider field and a new
 *   corpus), bit 2 FTZ, bit 3 fp32 input;
 *   bytes 2-5: random bits for stochastic rounding;
 *   then 8 bytes of binary64 (or 4 bytes of binary32 when bit 3 is set), little-endian;
 *   missing bytes read as zero.
 * Features: the mechanisms that fired (underflow, overflow, subnormal result) x the
 * bucket of the relative rounding error (gp_fuzz_check.h).
 * Build with clang: make fuzz; run: build-fuzz/fuzz/fuzz_convert fuzz/corpus/convert */
#include <math.h>
#include <string.h>

#include "gp_fuzz_check.h"
#include "reference/gp_oracle.h"
#include "kernels/gp_vocab.h"

GP_FUZZ_COUNTERS counters[GP_FUZZ_NMECH * GP_FUZZ_BUCKETS];

static uint64_t take_le(const uint8_t *d, size_t size, size_t at, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        if (at + (size_t)i < size)
            v |= (uint64_t)d[at + (size_t)i] << (8 * i);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    gp_format f = (gp_format)(data[0] % GP_NFORMATS);
    gp_rmode mode = (gp_rmode)((data[1] & 3) % gp_vocab_count(GP_VOCAB_RMODE)); /* kernels/gp_vocab.h */
    int ftz = (data[1] >> 2) & 1;
    int f32 = (data[1] >> 3) & 1;
    uint32_t rbits = (uint32_t)take_le(data, size, 2, 4);
    uint64_t u = f32 ? gp_fmt_to_f64_bits(GP_FP32, (uint32_t)take_le(data, size, 6, 4))
                     : take_le(data, size, 6, 8);
    unsigned kev = 0;
    uint32_t kb = gp_fmt_from_f64_bits(f, u, mode, rbits, ftz, &kev);
    gp_oracle_result o;
    gp_oracle_round_d(f, gp_f64_from_bits(u), mode, rbits, ftz, &o);
    if (gp_fmt_isnan(f, o.bits))
        GP_FUZZ_CHECK(gp_fmt_isnan(f, kb), "fmt %d mode %d x=0x%016llx: kernel 0x%x, oracle NaN", f,
                      mode, (unsigned long long)u, kb);
    else
        GP_FUZZ_CHECK(kb == o.bits, "fmt %d mode %d ftz %d rbits 0x%08x x=%a (0x%016llx): kernel 0x%x oracle 0x%x",
                      f, mode, ftz, rbits, gp_f64_from_bits(u), (unsigned long long)u, kb, o.bits);
    GP_FUZZ_CHECK(kev == o.ev, "fmt %d mode %d x=0x%016llx: kernel events 0x%x oracle 0x%x", f, mode,
                  (unsigned long long)u, kev, o.ev);
    /* features: the mechanisms that fired x the bucket of the relative rounding error */
    double x = gp_f64_from_bits(u), r = gp_fmt_to_f64(f, kb);
    double rel = (x == x && r == r && x - x == 0) ? (x != 0 ? fabs(r - x) / fabs(x) : fabs(r)) : 0.0;
    unsigned mech = gp_fuzz_mech_of_events(kev) | (gp_fuzz_is_subnormal(f, kb) ? GP_FUZZ_SUBNORMAL : 0u);
    gp_fuzz_feature(counters, mech * GP_FUZZ_BUCKETS + gp_fuzz_bucket(rel));
    return 0;
}
