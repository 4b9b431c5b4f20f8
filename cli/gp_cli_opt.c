/* gp_cli_opt.c — see gp_cli_opt.h. */
#include "gp_cli_opt.h"

#include <string.h>

#include "../base/gp_num.h"

int gp_cli_opt(int argc, char **argv, int *i, const char *name, const char **val, FILE *err,
               const char *cmd)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        fprintf(err, "gradprec %s: option %s needs a value\n", cmd, name);
        return -1;
    }
    *i += 1;
    *val = argv[*i];
    return 1;
}

int gp_cli_u64(const char *cmd, const char *opt, const char *val, uint64_t lo, uint64_t hi, uint64_t *out,
               FILE *err)
{
    int r = gp_parse_u64(val, lo, hi, out);
    if (r == 0)
        return 0;
    fprintf(err, "gradprec %s: %s '%.60s' is not a decimal integer in %llu..%llu\n", cmd, opt, val,
            (unsigned long long)lo, (unsigned long long)hi);
    return -1;
}
