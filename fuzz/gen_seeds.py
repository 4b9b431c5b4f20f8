#!/usr/bin/env python3
"""gen_seeds.py — writes the hand-chosen seed inputs of the decoder-based fuzz targets
(fuzz/corpus/{accumulate,metamorphic,decode}/) by encoding cases the way
harness/scenario/gp_decode.c decodes them: integers are consumed from the END of the input (the
last byte first, most significant byte first), payload bytes from the FRONT
(little-endian). Run from anywhere: python3 fuzz/gen_seeds.py. Deterministic: the same
files every time (the decode seeds come from a fixed random seed)."""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
FP32, BF16, FP16 = 0, 1, 2  # gp_decode's format pick order
WIDTH = {FP32: 4, BF16: 2, FP16: 2}
EMIN_EMAX = {FP32: (-126, 127), BF16: (-126, 127), FP16: (-14, 15)}
RNE, RTZ, SR, KAHAN = 0, 1, 2, 3
RAW, ORDINARY, SUBNORMAL, HALFWAY, OVERFLOW, ABSORB = range(6)


class Encoder:
    """front: payload in reading order; back: end bytes in consumption order."""

    def __init__(self):
        self.front = bytearray()
        self.back = bytearray()

    def range(self, lo, hi, v):
        assert lo <= v <= hi
        span, x, k = hi - lo, v - lo, 0
        while k < 8 and (span >> (8 * k)) != 0:
            k += 1
        for i in range(k):  # most significant first
            self.back.append((x >> (8 * (k - 1 - i))) & 0xFF)

    def bits(self, nbytes, v):
        self.front += v.to_bytes(nbytes, "little")

    def data(self):
        return bytes(self.front) + bytes(reversed(self.back))


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bf16_bits(x):  # x must be a bf16 value
    b = f32_bits(x)
    assert b & 0xFFFF == 0, x
    return b >> 16


def fp16_bits(x):  # x must be an fp16 value
    return struct.unpack("<H", struct.pack("<e", x))[0]


BITS = {FP32: f32_bits, BF16: bf16_bits, FP16: fp16_bits}


def accum_case(grad, acc, rounding, ftz, seed, addends):
    """addends: list of (region, payload, params...) or plain floats (raw region)."""
    e = Encoder()
    e.range(0, 2, grad)
    e.range(0, 2, acc)
    e.range(0, 3, rounding)
    e.range(0, 255, 1 if ftz else 0)
    e.range(0, 2**32 - 1, seed)
    n = len(addends)
    # bytes left after the configuration once everything is written: compute the
    # addend bytes first (the count's own byte is not yet consumed when it is read)
    body = Encoder()
    for a in addends:
        if isinstance(a, tuple):
            region, payload, *params = a
        else:
            region, payload, params = RAW, BITS[grad](a), []
        body.range(0, 5, region)
        body.bits(WIDTH[grad], payload)
        for lo, hi, v in params:
            body.range(lo, hi, v)
    left = len(body.front) + len(body.back) + 1  # + the count byte
    cap = min(64, 1 + left // 3)
    assert 1 <= n <= cap, (n, cap)
    e.range(1, cap, n)
    e.front += body.front
    e.back += body.back
    return e.data()


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def accumulate_seeds():
    s = {}
    # absorption: bf16 holds 8 bits; 2^-9 * acc vanishes (DESIGN.md §1)
    s["bf16_absorb_small_into_one"] = accum_case(FP32, BF16, RNE, 0, 1, [1.0] + [2.0**-9] * 16)
    s["bf16_tie_to_even"] = accum_case(FP32, BF16, RNE, 0, 1, [1.0, 2.0**-8, 2.0**-8, 3 * 2.0**-8])
    s["bf16_rne_rounds_up"] = accum_case(FP32, BF16, RNE, 0, 1, [1.0, 0.75 * 2.0**-7])  # a truncating store fails it
    s["bf16_rtz_truncates"] = accum_case(FP32, BF16, RTZ, 0, 1, [1.0] + [0.75 * 2.0**-7] * 8)
    s["bf16_stochastic_long"] = accum_case(FP32, BF16, SR, 0, 12345, [2.0**-10] * 40)
    s["bf16_kahan_recovers"] = accum_case(FP32, BF16, KAHAN, 0, 1, [1.0] + [2.0**-10] * 30)
    s["fp32_kahan_cancel"] = accum_case(FP32, FP32, KAHAN, 0, 1, [1.0, 2.0**-30, -1.0, 2.0**-30] * 4)
    s["fp32_rne_odd_last_bit"] = accum_case(FP32, FP32, RNE, 0, 1, [1.0, 2.0**-23, 2.0**-23 + 2.0**-46])
    s["fp32_rne_mixed_signs"] = accum_case(FP32, FP32, RNE, 0, 1, [3.0, -2.0**-25, 1e-3, -3.0, 7.5e-8])
    s["fp32_sr_subnormal"] = accum_case(FP32, FP32, SR, 0, 7, [2.0**-140, 3 * 2.0**-149, -2.0**-130])
    s["fp32_ftz_flush"] = accum_case(FP32, FP32, RNE, 1, 1, [2.0**-127, 2.0**-127, 2.0**-125])
    # fp16: underflow below 2^-24, subnormal below 2^-14, overflow at 65520
    s["fp16_subnormal_accum"] = accum_case(FP32, FP16, RNE, 0, 1, [2.0**-20, 3 * 2.0**-25, 2.0**-26] * 5)
    s["fp16_ftz_flushes"] = accum_case(FP16, FP16, RNE, 1, 1, [2.0**-15, 2.0**-16, 2.0**-14])
    s["fp16_overflow_65520"] = accum_case(FP32, FP16, RNE, 0, 1, [65504.0, 8.0, 8.0])
    s["fp16_rtz_saturates"] = accum_case(FP16, FP16, RTZ, 0, 1, [65504.0, 65504.0])
    s["fp16_grads_fp32_acc"] = accum_case(FP16, FP32, RNE, 0, 1, [2.0**-24, 65504.0, -65504.0, 2.0**-24])
    s["bf16_grads_bf16_acc_sr"] = accum_case(BF16, BF16, SR, 0, 99, [1.0, 2.0**-9, 2.0**-9, 2.0**-9, -0.5])
    s["nan_addend"] = accum_case(FP32, BF16, RNE, 0, 1, [(RAW, 0x7FA00000), 1.0])
    s["inf_addend"] = accum_case(FP16, FP32, KAHAN, 0, 1, [(RAW, 0x7C00), -1.0])
    s["single_exact"] = accum_case(FP32, FP32, RNE, 0, 1, [1.5])
    s["single_rounded_bf16"] = accum_case(FP32, BF16, RNE, 0, 1, [1.0 + 2.0**-9 + 2.0**-20])
    # steered regions (what the fuzzer mutates from)
    s["regions_fp16"] = accum_case(FP16, FP16, RNE, 0, 3, [
        (ORDINARY, 0x0155, (-12, 4, 2)), (SUBNORMAL, 0x0003, (0, 2, 0)),
        (SUBNORMAL, 0x0000, (0, 2, 1), (-3, 3, -1)), (SUBNORMAL, 0x0000, (0, 2, 2), (1, 8, 2)),
        (HALFWAY, 0x0001, (-15, 15, 3)), (OVERFLOW, 0x0000, (-4, 3, 1)), (ABSORB, 0x0000, (-3, 2, 0))])
    s["regions_bf16_absorb"] = accum_case(FP32, BF16, RNE, 0, 5, [1.0] + [(ABSORB, 0x0, (-3, 2, j)) for j in (-3, -2, -1, 0, 1, 2)])
    s["regions_fp32_halfway_rtz"] = accum_case(FP32, FP32, RTZ, 0, 5, [(HALFWAY, 0x123456, (-127, 127, e)) for e in (-127, -20, 0, 127)])
    return s


def metamorphic_seeds():
    s = {}
    # (a) runs: normal values, RNE / RTZ; seeds pick the loss scale (odd draw: |e| <= 16)
    s["scale_bf16_rne"] = accum_case(FP32, BF16, RNE, 0, 2, [1.0, 0.375, -2.5, 2.0**-9, 1e-3])
    s["scale_fp16_rtz"] = accum_case(FP16, FP16, RTZ, 0, 4, [1.0, 0.5, 0.125, 3.0, -0.75])
    s["scale_fp32_rne_ftz"] = accum_case(FP32, FP32, RNE, 1, 6, [1.0, 1e-5, 3e4, -7.0])
    s["scale_fp32_rtz_many"] = accum_case(FP32, FP32, RTZ, 0, 8, [1.0 + i / 64.0 for i in range(30)])
    s["scale_fp16_grads_fp32_acc"] = accum_case(FP16, FP32, RNE, 0, 10, [0.1005859375, 2.0, -0.5])
    # (b): long sums (spill path), cancellation, subnormal terms
    s["refs_cancel"] = accum_case(FP32, FP32, RNE, 0, 11, [3e38, -3e38, 1e-45, 2.0**-149] * 8)
    s["refs_wide_range"] = accum_case(FP32, FP32, RNE, 0, 12, [2.0**e for e in range(-149, 128, 9)])
    s["refs_fp16_tokens"] = accum_case(FP16, BF16, KAHAN, 0, 13, [2.0**-24, 65504.0, 1.0, -1.0])
    s["refs_sr_bf16"] = accum_case(BF16, BF16, SR, 0, 14, [1.0, -0.0078125, 0.5])
    # the accumulate seeds decode the same way: (a) and (b) on each of them too
    for name, data in accumulate_seeds().items():
        if not name.startswith("found_"):
            s["acc_" + name] = data
    return s


def decode_seeds():
    rng = random.Random(20240601)
    s = {"empty": b"", "one_zero": b"\x00", "all_ff_64": b"\xff" * 64, "all_00_300": b"\x00" * 300,
         "all_01_128": b"\x01" * 128, "all_80_128": b"\x80" * 128, "all_7f_200": b"\x7f" * 200,
         "ascending_256": bytes(range(256)), "descending_256": bytes(range(255, -1, -1))}
    for i, n in enumerate([1, 2, 3, 5, 8, 12, 16, 24, 32, 48, 64, 80, 96, 128, 160, 200, 256, 320, 400, 512, 700]):
        s["random_%02d_%d" % (i, n)] = bytes(rng.getrandbits(8) for _ in range(n))
    return s


if __name__ == "__main__":
    for target, seeds in (("accumulate", accumulate_seeds()), ("metamorphic", metamorphic_seeds()),
                          ("decode", decode_seeds())):
        for name, data in seeds.items():
            write(target, name, data)
        print("%s: %d seeds" % (target, len(seeds)))
