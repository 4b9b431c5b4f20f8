/* gp_num.h — the one strict integer parser of gradprec's command line and files:
 * decimal digits only (no sign, no spaces, no 0x, no octal: "010" is ten), range-checked
 * without wrapping. */
#ifndef GP_NUM_H
#define GP_NUM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parse s, the whole string, as a decimal integer in [lo, hi] into *out. Returns 0; -1
 * when s is empty or holds anything but the digits 0-9; -2 when the value is outside
 * [lo, hi] (including anything above 2^64-1). *out is untouched on failure. */
int gp_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

#ifdef __cplusplus
}
#endif

#endif
