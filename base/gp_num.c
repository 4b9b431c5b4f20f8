/* gp_num.c — see gp_num.h. */
#include "gp_num.h"

int gp_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!s || !*s)
        return -1;
    uint64_t v = 0;
    int over = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            over = 1; /* keep scanning: a later non-digit is still a syntax error */
        else
            v = v * 10 + d;
    }
    if (over || v < lo || v > hi)
        return -2;
    *out = v;
    return 0;
}
