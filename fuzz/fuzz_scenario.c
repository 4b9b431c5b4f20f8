/* fuzz_scenario.c — libFuzzer target: the scenario YAML loader on arbitrary bytes. It
 * must either load (and then write YAML that loads back to the same YAML) or fail with
 * an "origin:line:column: ..." message, never crash, leak or read out of bounds (run it
 * under ASan+UBSan: make fuzz). */
#include <stdlib.h>
#include <string.h>

#include "gp_fuzz_check.h"
#include "harness/gp_scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gp_scenario s;
    gp_error e = {""};
    if (gp_scenario_load_string((const char *)data, size, "fuzz", &s, &e) != 0) {
        GP_FUZZ_CHECK(strncmp(e.msg, "fuzz:", 5) == 0, "error without origin: %s", e.msg);
        return 0;
    }
    char *y1 = gp_scenario_to_yaml(&s);
    GP_FUZZ_CHECK(y1 != NULL, "to_yaml failed");
    gp_scenario t;
    int rc = gp_scenario_load_string(y1, strlen(y1), "fuzz-roundtrip", &t, &e);
    GP_FUZZ_CHECK(rc == 0, "written YAML does not load back: %s\n%s", e.msg, y1);
    char *y2 = gp_scenario_to_yaml(&t);
    GP_FUZZ_CHECK(y2 && strcmp(y1, y2) == 0, "YAML round trip not stable:\n%s\n---\n%s", y1, y2 ? y2 : "");
    free(y1);
    free(y2);
    gp_scenario_free(&s);
    gp_scenario_free(&t);
    return 0;
}
