/* gp_html.c — placeholder until the HTML writer lands (being written now). */
#include "gp_html.h"

char *gp_report_html(const json_t *report, gp_error *err)
{
    (void)report;
    gp_error_set(err, "the HTML report is not available in this build");
    return NULL;
}
