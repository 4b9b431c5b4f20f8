/* gp_out.h — the one way gradprec writes output files. A single file is written to a
 * fresh, exclusively created temporary name in its own folder and renamed over the
 * target (a symlink at the target is replaced, never followed). A set of files (the
 * report folder of `gradprec run`) is written into a new sibling folder and swapped in
 * with one atomic rename, so the folder always holds a complete old or new set. No
 * temporary file survives an error. An output that names an input is refused. */
#ifndef GP_OUT_H
#define GP_OUT_H

#include <stddef.h>

#include "gp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Check that path may be written as an output file: not empty, not an existing
 * directory, device, FIFO or socket, nor a symbolic link to one (/dev/stdout: a regular
 * file would replace the link), and not the same file as any of the n inputs
 * (compared by device and inode after following links). `what` names the option in
 * messages ("--out", "--markdown"). Returns 0 or -1 with err. */
int gp_out_check_file(const char *what, const char *path, const char *const *inputs, size_t n,
                      gp_error *err);

/* Write len bytes of data to path atomically (see above); the temporary is created
 * with O_EXCL | O_NOFOLLOW, flushed to disk before the rename, and removed on any
 * error. A symbolic link to a FIFO, device, socket or folder is refused, as
 * gp_out_check_file does. Does not run gp_out_check_file's input comparison. Returns 0
 * or -1 with err. */
int gp_out_write_file(const char *path, const char *data, size_t len, gp_error *err);

#define GP_OUT_SET_MAX 16
#define GP_OUT_PATH_MAX 4096

/* A set of files replacing the contents of one folder as a whole. */
typedef struct {
    char dir[GP_OUT_PATH_MAX];          /* the target folder (resolved) */
    char tmp[GP_OUT_PATH_MAX];          /* the new sibling folder being filled, or "" */
    const char *names[GP_OUT_SET_MAX];  /* the file names a set may hold */
    size_t nnames;
    size_t written;                     /* files written into tmp so far */
} gp_out_set;

/* Prepare to replace folder dir (option `what`) with a set of the given file names
 * (at most GP_OUT_SET_MAX, plain names). Refuses, before anything is written: an empty
 * path, an existing non-folder (file, device, FIFO), a folder holding anything but those
 * names (gradprec will not delete files it did not write), and a folder that contains
 * one of the n inputs. Creates the missing parent folders and the new sibling folder
 * (".NAME.gp-XXXXXX"), so an unwritable place fails here. Returns 0 or -1 with err;
 * on failure nothing is left behind but parent folders it created. */
int gp_out_set_begin(gp_out_set *s, const char *what, const char *dir, const char *const *names,
                     size_t nnames, const char *const *inputs, size_t n, gp_error *err);

/* Write one file of the set (name must be one of the names) into the new folder. */
int gp_out_set_add(gp_out_set *s, const char *name, const char *data, size_t len, gp_error *err);

/* Swap the new folder in (renameat2 RENAME_EXCHANGE where the file system has it,
 * else two renames) and delete the old set. Returns 0, or -1 with err after
 * gp_out_set_abort's cleanup (the old set then stays in place). */
int gp_out_set_commit(gp_out_set *s, gp_error *err);

/* Delete the new folder and whatever was written into it. Safe to call twice. */
void gp_out_set_abort(gp_out_set *s);

#ifdef __cplusplus
}
#endif

#endif
