/* gen_rsqrt14_table.c — prints the vrsqrt14ps segment table of kernels/arith/gp_torch_sqrt.h
 * (gp_torch_rsqrt14_cd) from the host's instruction, then checks the header's
 * gp_torch_rsqrt14 against the instruction on every positive finite non-zero float
 * (subnormals included). x86-64 with AVX-512F only; the table in the header was printed on
 * an AMD EPYC (Zen 4). Build and run:
 *   cc -O2 -mavx512f -ffp-contract=off -I kernels/arith -o gen scripts/gen_rsqrt14_table.c -lm && ./gen
 * The form fitted is Intel's reference algorithm (RSQRT14S): on [1, 4), 32 segments of
 * [1, 2) and 32 of [2, 4), each 1024 steps of the input truncated to 15 fraction bits;
 * output q * 2^-17 with q = floor((128*c - d*k) / 512), k in [-512, 512) the step's offset
 * from the segment's midpoint (x = 1 gives 1 exactly). For each segment it searches every
 * c in [4q - 2, 4q + 5] (q at k = 0) and every d < 4096 and requires exactly one pair to
 * reproduce all 1024 outputs. Exit 1 with a line on stderr when the host's instruction does not fit
 * (a form mismatch, no pair or several, or any float where the header differs). */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gp_torch_sqrt.h"

static uint32_t rsqrt14(uint32_t b)
{
    float x;
    memcpy(&x, &b, 4);
    float r = _mm_cvtss_f32(_mm_rsqrt14_ss(_mm_setzero_ps(), _mm_set_ss(x)));
    uint32_t o;
    memcpy(&o, &r, 4);
    return o;
}

int main(void)
{
    static uint32_t cd[64][2];
    for (int seg = 0; seg < 64; seg++) {
        int p = seg / 32, i = seg % 32;
        int32_t q[1024];
        for (int k = -512; k < 512; k++) {
            uint32_t b = (127u + (uint32_t)p) << 23 | (uint32_t)(i * 1024 + 512 + k) << 8, o = rsqrt14(b);
            if (o == 0x3f800000u && b == 0x3f800000u) {
                q[k + 512] = -1; /* x = 1: 1 exactly, outside the line */
                continue;
            }
            if ((o >> 23) != 126 || (o & 0x7f)) {
                fprintf(stderr, "gen_rsqrt14_table: rsqrt14(0x%08x) = 0x%08x is not q * 2^-17 in [1/2, 1)\n", b, o);
                return 1;
            }
            q[k + 512] = (int32_t)(((o & 0x7fffffu) | 0x800000u) >> 7);
        }
        int fits = 0;
        for (int64_t c = 4 * (int64_t)q[512] - 2; c <= 4 * (int64_t)q[512] + 5; c++)
            for (int64_t d = 0; d < 4096; d++) {
                int ok = 1;
                for (int k = -512; k < 512 && ok; k++)
                    ok = q[k + 512] < 0 || (int32_t)((128 * c - d * k) >> 9) == q[k + 512];
                if (ok && fits++ == 0) {
                    cd[seg][0] = (uint32_t)c;
                    cd[seg][1] = (uint32_t)d;
                }
            }
        if (fits != 1) {
            fprintf(stderr, "gen_rsqrt14_table: segment %d: %d (c, d) pairs fit\n", seg, fits);
            return 1;
        }
    }
    for (int seg = 0; seg < 64; seg++)
        printf("{%uu, %uu},%s", cd[seg][0], cd[seg][1], seg % 6 == 5 ? "\n" : " ");
    printf("\n");
    if (memcmp(cd, gp_torch_rsqrt14_cd, sizeof cd) != 0) {
        fprintf(stderr, "gen_rsqrt14_table: the table differs from the header's\n");
        return 1;
    }
    for (uint32_t b = 1; b < 0x7f800000u; b++)
        if (gp_f32_bits(gp_torch_rsqrt14(gp_f32_from_bits(b))) != rsqrt14(b)) {
            fprintf(stderr, "gen_rsqrt14_table: rsqrt14(0x%08x): header 0x%08x, host 0x%08x\n", b,
                    gp_f32_bits(gp_torch_rsqrt14(gp_f32_from_bits(b))), rsqrt14(b));
            return 1;
        }
    fprintf(stderr, "gen_rsqrt14_table: the header's table and gp_torch_rsqrt14 equal this host's vrsqrt14ps on all "
                    "2139095039 positive finite floats\n");
    return 0;
}
