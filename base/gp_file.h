/* gp_file.h — reading a whole input file (scenarios, tolerances, reports). */
#ifndef GP_FILE_H
#define GP_FILE_H

#include <stddef.h>

#include "gp_error.h"

/* The file at path as a malloc'ed buffer with a NUL after its last byte (the file itself
 * may contain NULs); *len is its length. Files larger than max_bytes are refused.
 * Returns NULL with err set to "PATH: cannot open: why", "PATH: cannot read: why",
 * "PATH: larger than N bytes" or "PATH: out of memory". */
char *gp_file_read(const char *path, size_t max_bytes, size_t *len, gp_error *err);

#endif
