/* gp_report_set.c — see gp_report_set.h. */
#include "gp_report_set.h"

#include <stdlib.h>
#include <string.h>

#include "gp_html.h"
#include "gp_junit.h"

const char *const gp_report_file_names[GP_REPORT_NFILES] = {"report.json", "report.md", "report.xml", "report.html",
                                                            "timing.json"};

void gp_report_files_free(gp_report_files *f)
{
    for (int k = 0; k < GP_REPORT_NFILES; k++) {
        free(f->text[k]);
        f->text[k] = NULL;
    }
}

int gp_report_files_render(const gp_run_report *r, size_t shard_index, size_t shard_count, size_t total,
                           double seconds, int jobs, gp_report_files *f, gp_error *err)
{
    memset(f, 0, sizeof *f);
    gp_error e = {""};
    char *json = gp_report_json_shard(r, shard_index, shard_count, total);
    json_t *root = json ? json_loads(json, 0, NULL) : NULL; /* the other views read the JSON */
    f->text[0] = json;
    f->text[1] = gp_report_markdown(r);
    if (root && (f->text[2] = gp_report_junit(root, &e)) != NULL)
        f->text[3] = gp_report_html(root, &e);
    json_decref(root);
    char timing[128];
    snprintf(timing, sizeof timing, "{\"seconds\": %.3f, \"jobs\": %d}\n", seconds, jobs);
    f->text[4] = strdup(timing);
    for (int k = 0; k < GP_REPORT_NFILES; k++)
        if (!f->text[k]) {
            gp_report_files_free(f);
            return gp_error_set(err, "%s", e.msg[0] ? e.msg : "out of memory");
        }
    return 0;
}

int gp_report_files_begin(gp_out_set *set, const char *what, const char *dir, const char *const *inputs, size_t n,
                          gp_error *err)
{
    return gp_out_set_begin(set, what, dir, gp_report_file_names, GP_REPORT_NFILES, inputs, n, err);
}

int gp_report_files_commit(const gp_report_files *f, gp_out_set *set, gp_error *err)
{
    for (int k = 0; k < GP_REPORT_NFILES; k++)
        if (gp_out_set_add(set, gp_report_file_names[k], f->text[k], strlen(f->text[k]), err) != 0) {
            gp_out_set_abort(set);
            return -1;
        }
    return gp_out_set_commit(set, err);
}

int gp_report_files_write(const gp_report_files *f, const char *dir, gp_error *err)
{
    gp_out_set set;
    if (gp_report_files_begin(&set, "report folder", dir, NULL, 0, err) != 0)
        return -1;
    return gp_report_files_commit(f, &set, err);
}
