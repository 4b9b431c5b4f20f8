/* gp_replay.h — real gradients from files (docs/replay.md): a safetensors file (header
 * parsed once into a compact index, data read with pread, never mapped or read whole) or a
 * folder of NumPy .npy files. Entries are named KEY/step<S>/mb<K> (the backward output of
 * micro-batch K of optimizer step S, 0-based), KEY/weight (initial weights) and whatever
 * else a caller asks for by name; in a folder, the file DIR/NAME.npy. dtypes fp32, bf16,
 * fp16. Every malformed dump is an error naming the file and the entry; a dump that
 * changes or shrinks while it is read is an error naming the dump and the entry (never a
 * signal); nothing here exits or prints.
 *
 * Sharing. An opened dump is shared by the whole process: gp_replay_open of a path whose
 * resolved path (realpath) is already open, or was closed recently, and whose file is
 * unchanged (device, inode, size, mtime, ctime) returns the same dump with its reference
 * count raised: the header is parsed once however many tensors, steps, scenarios, sweep
 * points and threads read it. Up to GP_REPLAY_IDLE dumps nobody holds are kept (LRU), so
 * the loader's checks and the run that follows parse once. Every function here is
 * thread-safe; entries are per caller. */
#ifndef GP_REPLAY_H
#define GP_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "../../base/gp_error.h"
#include "../../kernels/arith/gp_format.h"

/* The largest safetensors JSON header accepted (the format's own reference limit). */
#define GP_REPLAY_MAX_HEADER ((uint64_t)100 << 20)
/* The largest .npy header accepted. */
#define GP_REPLAY_MAX_NPY_HEADER 65536u
/* Dumps kept open, parsed, while nobody holds them (least recently closed dropped first). */
#define GP_REPLAY_IDLE 8

typedef struct gp_replay gp_replay; /* an opened, shared dump */

/* What a file was when it was opened: a later stat that differs means it changed. */
typedef struct {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
} gp_replay_ident;

/* One entry: n elements of format fmt. The rest is gp_replay.c's (where the bytes lie). */
typedef struct {
    gp_format fmt;      /* GP_FP32, GP_BF16 or GP_FP16 */
    uint64_t n;         /* elements (the product of the shape) */
    const gp_replay *dump;
    const char *name;   /* the entry's name (valid until released) */
    uint64_t off;       /* file offset of element 0 */
    int fd;             /* the file read (.npy: the entry's own, closed on release) */
    int own;            /* .npy: fd and name belong to the entry */
    const void *mem;    /* a memory dump: the entry's bytes (fd is -1), else NULL */
    gp_replay_ident id; /* .npy: the entry's file when it was opened */
} gp_replay_entry;

/* Open the dump at path, or share it (above): a regular file is a safetensors file (its
 * header parsed and every entry checked: dtype F32/BF16/F16, shape of non-negative
 * integers, data_offsets inside the data area, byte count = shape product x dtype size,
 * entries not overlapping); a folder is a .npy folder (files are checked when an entry is
 * got). Returns 0 with *out (release with gp_replay_close), or -1 with err "PATH: what"
 * (for an entry: "PATH: entry 'NAME': what"). */
int gp_replay_open(const char *path, gp_replay **out, gp_error *err);

/* Release a reference got from gp_replay_open. NULL is fine. */
void gp_replay_close(gp_replay *r);

/* Find entry `name` ("KEY/step0/mb3", "KEY/weight", "KEY/state/exp_avg"). Returns 0 with
 * *e (release it with gp_replay_entry_release; it holds no reference to r: release it
 * before closing r), or -1 with err "PATH: entry 'NAME': missing" or, for a .npy file,
 * what is wrong with it (bad magic or header, byte order, dtype, Fortran order, shape,
 * truncated data, trailing bytes). Costs a lookup in the index, no I/O (.npy: opening the
 * file and reading its header). */
int gp_replay_entry_get(gp_replay *r, const char *name, gp_replay_entry *e, gp_error *err);

/* Release an entry (a .npy entry's file). */
void gp_replay_entry_release(gp_replay_entry *e);

/* How the run will read the dump's entries: GP_REPLAY_SEQUENTIAL (every element, in
 * order: the kernel reads ahead) or GP_REPLAY_RANDOM (a sample: no read-ahead, only the
 * pages of the chosen elements are read). A hint (posix_fadvise); for a folder, applies
 * to entries got after the call. */
enum { GP_REPLAY_SEQUENTIAL = 1, GP_REPLAY_RANDOM = 2 };
void gp_replay_access(gp_replay *r, int how);

/* out[j] = element i0 + j of e as fp32 (exact widening), j < n (i0 + n <= e->n), read from
 * the file into out (pread: nothing is mapped, the bytes are in the page cache, the
 * kernel's, not the process's). Returns 0, or -1 with err "PATH: entry 'NAME': what" when
 * the file ended before the entry's data (truncated after it was opened), changed since
 * it was opened (size, mtime, ctime, or another file now at the path), or could not be
 * read; out is then unspecified. */
int gp_replay_read(const gp_replay_entry *e, uint64_t i0, size_t n, float *out, gp_error *err);

/* out[j] = element idx[j] of e as fp32, j < n (idx increasing, each < e->n): elements
 * close together are read with one pread (GP_REPLAY_WINDOW bytes at most), others one by
 * one. Returns as gp_replay_read. */
#define GP_REPLAY_WINDOW 16384
int gp_replay_read_idx(const gp_replay_entry *e, const uint64_t *idx, size_t n, float *out, gp_error *err);

/* The path the dump was opened with (by its first opener). */
const char *gp_replay_path(const gp_replay *r);

/* Counters of the process's dumps (tests: "the header is parsed once"): safetensors
 * headers parsed, opens answered by sharing a parsed dump, dumps registered now (held or
 * idle), of them idle. */
typedef struct {
    uint64_t parsed, shared;
    size_t registered, idle;
} gp_replay_stats;
void gp_replay_stats_get(gp_replay_stats *s);

/* Drop every dump nobody holds (their files and indexes). */
void gp_replay_forget_idle(void);

/* Memory dumps: entries a process holds in memory (a streaming session's step,
 * harness/run/gp_session.h), registered under `name` in place of a file: gp_replay_open(name)
 * shares it (a memory dump's name shadows a file of that name), and it is freed when its
 * last reference is released (never kept idle). gp_replay_mem_new registers an empty one
 * with one reference (0, or -1 with err: a bad name, one already registered, out of
 * memory). gp_replay_mem_put adds entry `entry` of n elements of fmt (fp32, bf16, fp16)
 * and returns its bytes (n x width, zeroed) for the caller to fill, or NULL with err.
 * gp_replay_mem_seal makes the entries findable (0, or -1 with err: an entry put twice).
 * Entries are put and the dump sealed before anyone else opens it (not thread-safe
 * against readers); reads are memcpy from the entry's bytes. */
int gp_replay_mem_new(const char *name, gp_replay **out, gp_error *err);
void *gp_replay_mem_put(gp_replay *r, const char *entry, gp_format fmt, uint64_t n, gp_error *err);
int gp_replay_mem_seal(gp_replay *r, gp_error *err);

#endif
