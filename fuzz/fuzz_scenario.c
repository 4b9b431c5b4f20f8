/* fuzz_scenario.c — libFuzzer target: the scenario YAML loader on arbitrary bytes. It
 * must either load (and then write YAML that loads back to the same YAML) or fail with
 * an "origin:line:column: ..." message, never crash, leak or read out of bounds (run it
 * under ASan+UBSan: make fuzz). */
#include <stdlib.h>
#include <string.h>

#include "gp_fuzz_check.h"
#include "harness/scenario/gp_scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gp_scenario s;
    gp_error e = {""};
    if (gp_scenario_load_string((const char *)data, size, "fuzz", &s, &e) != 0) {
        GP_FUZZ_CHECK(strncmp(e.msg, "fuzz:", 5) == 0, "error without origin: %s", e.msg);
        return 0;
    }
    free(gp_fuzz_yaml_roundtrip(&s, "fuzz-roundtrip"));
    gp_scenario_free(&s);
    return 0;
}
