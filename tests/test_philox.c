/* test_philox.c — Philox4x32-10 against Random123's published known-answer vectors
 * (kat_vectors: counter, key -> output), and the (seed, stream, index) mapping. */
#include "gp_test.h"

#include "kernels/arith/gp_philox.h"

static void kat(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                uint32_t o0, uint32_t o1, uint32_t o2, uint32_t o3)
{
    gp_philox_ctr c = {{c0, c1, c2, c3}};
    gp_philox_key k = {{k0, k1}};
    gp_philox_ctr r = gp_philox4x32_10(c, k);
    uint32_t want[4] = {o0, o1, o2, o3};
    for (int i = 0; i < 4; i++)
        gp_assert_bits(r.v[i], want[i], "word %d", i);
}

static void test_known_answers(void **state)
{
    (void)state;
    kat(0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8);
    kat(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
        0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd);
    kat(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
        0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1);
}

/* gp_rand_u32(seed, stream, index) is word index%4 of block index/4, stream in words 2-3. */
static void test_index_mapping(void **state)
{
    (void)state;
    gp_philox_ctr c = {{0x243f6a88, 0x05a308d3, 0x13198a2e, 0x03707344}};
    gp_philox_key k = {{0xa4093822, 0x299f31d0}};
    gp_philox_ctr r = gp_philox4x32_10(c, k);
    uint64_t seed = 0x299f31d0a4093822ull, stream = 0x0370734413198a2eull;
    uint64_t blk = 0x05a308d3243f6a88ull; /* index = 4*blk + w fits in 64 bits */
    for (int w = 0; w < 4; w++)
        gp_assert_bits(gp_rand_u32(seed, stream, blk * 4 + (uint64_t)w), r.v[w], "word %d", w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_index_mapping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
