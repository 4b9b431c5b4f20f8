/* gp_junit.h — JUnit XML for CI systems: one <testcase> per scenario of a parsed
 * report.json; a failed scenario carries a <failure> naming the dominant mechanism and
 * the metrics that exceeded their thresholds, with values. */
#ifndef GP_JUNIT_H
#define GP_JUNIT_H

#include <jansson.h>

#include "../base/gp_error.h"

/* The XML document as malloc'ed text, or NULL with err set. Byte-identical for the
 * same report. */
char *gp_report_junit(const json_t *report, gp_error *err);

#endif
