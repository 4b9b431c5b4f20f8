/* fuzz_decode.c — libFuzzer target: the byte -> scenario decoder (harness/scenario/gp_decode.h).
 * Every input must decode (deterministically) to a scenario inside its documented
 * ranges whose YAML (gp_scenario_to_yaml) loads back with gp_scenario_load_string and
 * writes the same YAML again — i.e. what `gradprec repro` prints is always a valid
 * `gradprec run` input. The accumulation case of the same bytes (gp_decode_accum) must
 * give a loadable scenario too whenever its addends are finite. No numeric divergence
 * here, so no divergence features; coverage of the decoder's branches guides it. */
#include <string.h>

#include "harness/scenario/gp_decode.h"
#include "gp_fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gp_scenario s, s2;
    gp_error e = {""};
    GP_FUZZ_CHECK(gp_decode_scenario(data, size, &s, &e) == 0, "%s", e.msg);
    int K = s.batch.microbatches;
    GP_FUZZ_CHECK(K >= 1 && K <= 64 && s.batch.accumulation_steps >= K && s.batch.accumulation_steps <= 2 * K,
                  "K %d, accumulation_steps %d", K, s.batch.accumulation_steps);
    GP_FUZZ_CHECK(s.ntensors >= 1 && s.ntensors <= 3 && s.steps >= 1 && s.steps <= 8, "%zu tensors, %d steps",
                  s.ntensors, s.steps);
    for (size_t i = 0; i < s.ntensors; i++)
        GP_FUZZ_CHECK(s.tensors[i].size >= 1 && s.tensors[i].size <= 256, "tensor %zu: size %zu", i,
                      s.tensors[i].size);
    for (int k = 0; k < K; k++)
        GP_FUZZ_CHECK(s.batch.tokens[k] >= 1 && s.batch.tokens[k] <= 4096, "tokens[%d] = %ld", k,
                      s.batch.tokens[k]);
    char *y1 = gp_fuzz_yaml_roundtrip(&s, "decoded");
    GP_FUZZ_CHECK(gp_decode_scenario(data, size, &s2, &e) == 0, "%s", e.msg);
    char *y3 = gp_scenario_to_yaml(&s2);
    GP_FUZZ_CHECK(y3 && strcmp(y1, y3) == 0, "decoding is not deterministic:\n%s\n---\n%s", y1, y3 ? y3 : "");
    free(y1);
    free(y3);
    gp_scenario_free(&s);
    gp_scenario_free(&s2);

    gp_accum_case c;
    gp_decode_accum(data, size, &c);
    GP_FUZZ_CHECK(c.n >= 1 && c.n <= GP_DECODE_MAX_ADDENDS, "%d addends", c.n);
    if (gp_accum_case_scenario(&c, &s, &e) == 0) {
        free(gp_fuzz_yaml_roundtrip(&s, "accumulate case"));
        gp_scenario_free(&s);
    }
    return 0;
}
