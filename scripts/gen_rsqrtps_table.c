/* gen_rsqrtps_table.c — prints the residual table of kernels/arith/gp_torch_sqrt.h from
 * the host's rsqrtps instruction (x86-64 only; the table in the header was printed on an
 * AMD EPYC Zen 4). Build and run: cc -O2 -o gen scripts/gen_rsqrtps_table.c -lm && ./gen
 * It first checks what the header's encoding assumes: that the result depends only on
 * the exponent's parity and the top 12 mantissa bits, scales exactly with the exponent,
 * and is mid_round(i) + r with r in {-1, 0, 1} (gp_torch_rsqrt_mid in the header).
 * Exit 1 with a line on stderr when the host's instruction does not fit the encoding. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint32_t rsqrtps(uint32_t b)
{
    float x, r;
    memcpy(&x, &b, 4);
    r = _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(x)));
    uint32_t o;
    memcpy(&o, &r, 4);
    return o;
}

int main(void)
{
    uint32_t words[512] = {0};
    for (uint32_t e = 1; e <= 254; e++)
        for (uint32_t m = 0; m < (1u << 23); m++) {
            if (e != 127 && e != 128 && (m & 0x7ff) != 0x5a5) /* all of [1,4); a sample elsewhere */
                continue;
            uint32_t p = !(e & 1), i = p * 4096 + (m >> 11);
            uint32_t ref = rsqrtps(((127 + p) << 23) | (m & ~0x7ffu));
            int k = ((int)e - 127 - (int)p) / 2;
            if (rsqrtps((e << 23) | m) != ref - ((uint32_t)k << 23) || (ref >> 23) != 126 || (ref & 0x7ff)) {
                fprintf(stderr, "gen_rsqrtps_table: rsqrtps(0x%08x) does not fit the encoding\n", (e << 23) | m);
                return 1;
            }
            if (e != 127 + p || (m & 0x7ff))
                continue;
            /* the header's gp_torch_rsqrt_mid: 1/sqrt of the interval's midpoint, 12 bits */
            double y = 1.0 / sqrt((1.0 + ((m >> 11) + 0.5) / 4096.0) * (p ? 2.0 : 1.0)) * 8192.0 - 4096.0;
            int r = (int)((ref >> 11) & 0xfff) - (int)floor(y + 0.5);
            if (r < -1 || r > 1) {
                fprintf(stderr, "gen_rsqrtps_table: residual %d at %u\n", r, i);
                return 1;
            }
            words[i / 16] |= (uint32_t)(r + 1) << (2 * (i % 16));
        }
    for (int w = 0; w < 512; w++)
        printf("0x%08xu,%s", words[w], w % 6 == 5 ? "\n" : " ");
    printf("\n");
    return 0;
}
