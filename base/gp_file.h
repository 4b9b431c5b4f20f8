/* gp_file.h — the one way gradprec opens an input file (scenarios, reports, tolerances,
 * fuzz inputs, plugins, replayed tensors): special files (directories, FIFOs, devices,
 * sockets) are refused up front without blocking, and so are files over a size limit. */
#ifndef GP_FILE_H
#define GP_FILE_H

#include <stddef.h>

#include "gp_error.h"

/* Size limits of the inputs (docs/limits.md explains each). */
#define GP_FILE_MAX_SCENARIO ((size_t)64 << 20)   /* a scenario YAML file */
#define GP_FILE_MAX_REPORT ((size_t)256 << 20)    /* a report.json (gate, merge, html) */
#define GP_FILE_MAX_TOLERANCES ((size_t)1 << 20)  /* a gate tolerances file */
#define GP_FILE_MAX_FUZZ_INPUT ((size_t)1 << 20)  /* a fuzz input (`gradprec repro`) */
#define GP_FILE_MAX_PLUGIN ((size_t)4 << 30)      /* a plugin shared library (device code included) */

#ifdef __cplusplus
extern "C" {
#endif

/* Open path read-only as an input: it must be a regular file (or a symlink to one) of
 * at most max_bytes. A FIFO is opened without blocking and refused. Returns the file
 * descriptor (close-on-exec; the caller closes it) and its size in *size, or -1 with
 * err set to one line naming the path: "PATH: cannot open: why", "PATH: is a directory",
 * "PATH: is a FIFO (named pipe), not a regular file", "PATH: is a character device, not a
 * regular file", "PATH: N bytes, larger than the limit of M bytes", "(empty path): ...". */
int gp_file_open_input(const char *path, size_t max_bytes, size_t *size, gp_error *err);

/* The same checks without keeping the file open (for inputs another library opens,
 * such as a plugin dlopen loads). Returns 0 or -1 with err. */
int gp_file_check_input(const char *path, size_t max_bytes, gp_error *err);

/* The file at path as a malloc'ed buffer with a NUL after its last byte (the file itself
 * may contain NULs); *len is its length. Opened with gp_file_open_input (same refusals);
 * a file that grows past max_bytes while being read is refused too. Returns NULL with
 * err set ("PATH: cannot read: why", "PATH: out of memory", or an opener message). */
char *gp_file_read(const char *path, size_t max_bytes, size_t *len, gp_error *err);

/* What st_mode's file type is, in words ("a directory", "a FIFO (named pipe)", "a
 * character device", "a block device", "a socket", "a symbolic link", "a regular file"). */
const char *gp_file_kind(unsigned mode);

#ifdef __cplusplus
}
#endif

#endif
