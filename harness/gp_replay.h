/* gp_replay.h — real gradients from files (docs/replay.md): a safetensors file (header
 * parsed with jansson, data memory-mapped, never read whole) or a folder of NumPy .npy
 * files. Entries are named KEY/step<S>/mb<K> (the backward output of micro-batch K of
 * optimizer step S, 0-based) and KEY/weight (initial weights); in a folder, the file
 * DIR/KEY/step<S>/mb<K>.npy. dtypes fp32, bf16, fp16. Every malformed dump is an error
 * naming the file and the entry; nothing here exits or prints. */
#ifndef GP_REPLAY_H
#define GP_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "../base/gp_error.h"
#include "../kernels/arith/gp_format.h"

/* The largest safetensors JSON header accepted (the format's own reference limit). */
#define GP_REPLAY_MAX_HEADER ((uint64_t)100 << 20)
/* The largest .npy header accepted. */
#define GP_REPLAY_MAX_NPY_HEADER 65536u

typedef struct gp_replay gp_replay; /* an opened dump */

/* One entry: n elements of format fmt at data (mapped read-only; valid until released). */
typedef struct {
    gp_format fmt;      /* GP_FP32, GP_BF16 or GP_FP16 */
    uint64_t n;         /* elements (the product of the shape) */
    const unsigned char *data;
    void *map;          /* .npy: its own mapping (released with the entry), else NULL */
    size_t map_len;
} gp_replay_entry;

/* Open the dump at path: a regular file is a safetensors file (its header parsed and
 * every entry checked: dtype F32/BF16/F16, shape of non-negative integers, data_offsets
 * inside the data area, byte count = shape product x dtype size, entries not
 * overlapping); a folder is a .npy folder (files are checked when an entry is read).
 * Returns 0 with *out, or -1 with err "PATH: what" (for an entry: "PATH: entry 'NAME':
 * what"). */
int gp_replay_open(const char *path, gp_replay **out, gp_error *err);

/* Close a dump (and its mapping). NULL is fine. */
void gp_replay_close(gp_replay *r);

/* Find entry `name` ("KEY/step0/mb3", "KEY/weight"). Returns 0 with *e (release it with
 * gp_replay_entry_release), or -1 with err "PATH: entry 'NAME': missing" or, for a .npy
 * file, what is wrong with it (bad magic or header, byte order, dtype, Fortran order,
 * shape, truncated data, trailing bytes). */
int gp_replay_entry_get(gp_replay *r, const char *name, gp_replay_entry *e, gp_error *err);

/* Release an entry (a .npy entry's mapping). */
void gp_replay_entry_release(gp_replay_entry *e);

/* How the run will read the dump's entries: GP_REPLAY_SEQUENTIAL (every element, in
 * order: the kernel reads ahead) or GP_REPLAY_RANDOM (a sample: no read-ahead, only the
 * pages of the chosen elements are read). A hint (madvise); applies to entries got after
 * the call. */
enum { GP_REPLAY_SEQUENTIAL = 1, GP_REPLAY_RANDOM = 2 };
void gp_replay_access(gp_replay *r, int how);

/* out[j] = element i0 + j of e as fp32 (exact widening), j < n (i0 + n <= e->n). */
void gp_replay_read(const gp_replay_entry *e, uint64_t i0, size_t n, float *out);

/* out[j] = element idx[j] of e as fp32, j < n (idx increasing, each < e->n), giving the
 * pages back as it goes (gp_replay_drop of what lies behind, every GP_REPLAY_DROP_PAGES
 * pages and at the end up to the page of idx[n-1]), so a sample spread over a large
 * entry holds a few pages, not every page its chunk touched. */
#define GP_REPLAY_DROP_PAGES 64
void gp_replay_read_idx_stream(const gp_replay_entry *e, const uint64_t *idx, size_t n, float *out);

/* Tell the kernel the mapped bytes of elements [i0, i0 + n) are no longer needed (they
 * are read again from the file if touched), so a dump larger than memory streams
 * through in bounded resident memory. */
void gp_replay_drop(const gp_replay_entry *e, uint64_t i0, uint64_t n);

/* The path the dump was opened with. */
const char *gp_replay_path(const gp_replay *r);

#endif
