/* gp_replay.c — see gp_replay.h. Files are read with pread into the caller's buffers:
 * nothing is mapped, so a file that shrinks under the run is a short read (an error),
 * never SIGBUS. A safetensors header is parsed once (jansson), checked, and kept as a
 * sorted index (name -> dtype, elements, offset); the JSON tree is freed. Multi-byte
 * values in both formats are little-endian, as on every host gradprec builds for
 * (checked at compile time). */
#define _DEFAULT_SOURCE /* realpath, posix_fadvise, st_mtim */
#include "gp_replay.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../base/gp_file.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gp_replay reads little-endian dumps as they are: a big-endian host needs byte swapping here"
#endif

#define DUMP_MAX_BYTES ((size_t)1 << 52) /* no practical limit: the file is read in pieces */

typedef struct {
    const char *name;  /* in the index's names (a memory dump: its own, malloc'ed) */
    uint64_t n, off;   /* elements; file offset of element 0 */
    gp_format fmt;
    void *mem;         /* a memory dump: the entry's bytes (malloc'ed), else NULL */
} index_entry;

struct gp_replay {
    char path[4096];     /* as the first opener gave it (messages) */
    char *real;          /* resolved path (the registry's key) */
    int is_dir;
    int fd;              /* safetensors: the file, else -1 */
    gp_replay_ident id;  /* the file (or folder) when opened */
    index_entry *ix;     /* safetensors: entries sorted by name */
    size_t nix;
    char *names;         /* their names, NUL-terminated, one after another */
    int access;          /* .npy folder: GP_REPLAY_SEQUENTIAL / _RANDOM, or 0 (atomic) */
    int is_mem;          /* a memory dump (gp_replay_mem_new): ix holds its entries */
    size_t cap;          /* a memory dump: entries ix has room for */
    /* registry (under reg_mu) */
    long refs;
    int stale;           /* replaced in the registry by a newer open of a changed file */
    uint64_t idle_since; /* reg_clock when its last reference was released */
    gp_replay *next;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static gp_replay *reg;   /* every registered dump (held or idle), stale ones excluded */
static uint64_t reg_clock, n_parsed, n_shared;

static size_t width(gp_format f)
{
    return f == GP_FP32 ? 4 : 2;
}

const char *gp_replay_path(const gp_replay *r)
{
    return r->path;
}

static void ident_of(const struct stat *st, gp_replay_ident *id)
{
    id->dev = (uint64_t)st->st_dev;
    id->ino = (uint64_t)st->st_ino;
    id->size = (uint64_t)st->st_size;
    id->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    id->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

static int ident_same(const gp_replay_ident *a, const gp_replay_ident *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
           a->ctime_ns == b->ctime_ns;
}

/* ---- safetensors ---- */

static int st_dtype(const char *s, gp_format *f)
{
    if (!strcmp(s, "F32"))
        *f = GP_FP32;
    else if (!strcmp(s, "BF16"))
        *f = GP_BF16;
    else if (!strcmp(s, "F16"))
        *f = GP_FP16;
    else
        return -1;
    return 0;
}

/* Product of a shape array (non-negative integers), or -1 with why. */
static int shape_product(const json_t *shape, uint64_t *n, const char **why)
{
    *n = 1;
    if (!json_is_array(shape)) {
        *why = "'shape' is not a list";
        return -1;
    }
    for (size_t i = 0; i < json_array_size(shape); i++) {
        const json_t *d = json_array_get(shape, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0) {
            *why = "'shape' holds something other than a non-negative integer";
            return -1;
        }
        uint64_t v = (uint64_t)json_integer_value(d);
        if (v && *n > UINT64_MAX / 8 / v) {
            *why = "'shape' describes more elements than any file can hold";
            return -1;
        }
        *n *= v;
    }
    return 0;
}

typedef struct {
    uint64_t b, e;
    const char *name;
} span;

static int cmp_span(const void *x, const void *y)
{
    const span *a = x, *b = y;
    return a->b < b->b ? -1 : a->b > b->b ? 1 : a->e < b->e ? -1 : a->e > b->e;
}

/* Check one header entry; fills *f, *n, *b, *e. */
static int st_entry(const char *path, const char *name, const json_t *v, uint64_t dsize, gp_format *f, uint64_t *n,
                    uint64_t *b, uint64_t *e, gp_error *err)
{
    const char *why = NULL;
    const json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
                 *off = json_object_get(v, "data_offsets");
    const char *key;
    json_t *val;
    if (!json_is_object(v))
        return gp_error_set(err, "%s: entry '%s': not an object", path, name);
    json_object_foreach((json_t *)v, key, val)
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return gp_error_set(err, "%s: entry '%s': unknown field '%.60s'", path, name, key);
    if (!json_is_string(dt) || !sh || !off)
        return gp_error_set(err, "%s: entry '%s': needs a string 'dtype', a 'shape' and 'data_offsets'", path,
                            name);
    if (st_dtype(json_string_value(dt), f) != 0)
        return gp_error_set(err, "%s: entry '%s': dtype '%.20s' (gradprec replays F32, BF16 and F16)", path, name,
                            json_string_value(dt));
    if (shape_product(sh, n, &why) != 0)
        return gp_error_set(err, "%s: entry '%s': %s", path, name, why);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
        !json_is_integer(json_array_get(off, 1)) || json_integer_value(json_array_get(off, 0)) < 0 ||
        json_integer_value(json_array_get(off, 1)) < json_integer_value(json_array_get(off, 0)))
        return gp_error_set(err, "%s: entry '%s': 'data_offsets' is not [begin, end] with 0 <= begin <= end", path,
                            name);
    *b = (uint64_t)json_integer_value(json_array_get(off, 0));
    *e = (uint64_t)json_integer_value(json_array_get(off, 1));
    if (*e > dsize)
        return gp_error_set(err, "%s: entry '%s': data_offsets [%llu, %llu] end past the data (%llu bytes: the file is "
                                 "truncated or the header lies)", path, name, (unsigned long long)*b,
                            (unsigned long long)*e, (unsigned long long)dsize);
    if (*e - *b != *n * width(*f))
        return gp_error_set(err, "%s: entry '%s': shape has %llu elements = %llu bytes of %s, but data_offsets span "
                                 "%llu bytes", path, name, (unsigned long long)*n,
                            (unsigned long long)(*n * width(*f)), json_string_value(dt),
                            (unsigned long long)(*e - *b));
    return 0;
}

static int cmp_index(const void *x, const void *y)
{
    const index_entry *a = x, *b = y;
    return strcmp(a->name, b->name);
}

/* Read exactly len bytes at off of fd, or say why not: 0, or -1 with *got the bytes read
 * before the end of the file (errno 0) or an error (errno set). */
static int read_full(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
    size_t done = 0;
    while (done < len) {
        ssize_t k = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = 0;
            *got = done;
            return -1;
        }
        done += (size_t)k;
    }
    *got = done;
    return 0;
}

/* Parse the header of r->fd (size r->id.size) into r's index. */
static int st_open(gp_replay *r, gp_error *err)
{
    uint64_t size = r->id.size, hlen = 0;
    size_t got;
    if (size < 8)
        return gp_error_set(err, "%s: %llu bytes: too short for a safetensors file (8-byte header length)", r->path,
                            (unsigned long long)size);
    if (read_full(r->fd, &hlen, 8, 0, &got) != 0)
        return gp_error_set(err, "%s: cannot read: %s", r->path, errno ? strerror(errno) : "the file shrank");
    if (hlen > GP_REPLAY_MAX_HEADER)
        return gp_error_set(err, "%s: header length %llu bytes, more than the limit of %llu (not a safetensors file?)",
                            r->path, (unsigned long long)hlen, (unsigned long long)GP_REPLAY_MAX_HEADER);
    if (hlen > size - 8)
        return gp_error_set(err, "%s: header length %llu bytes, but the file has only %llu after the length "
                            "(truncated)", r->path, (unsigned long long)hlen, (unsigned long long)(size - 8));
    char *text = malloc(hlen ? (size_t)hlen : 1);
    if (!text)
        return gp_error_set(err, "%s: out of memory reading a header of %llu bytes", r->path,
                            (unsigned long long)hlen);
    if (read_full(r->fd, text, (size_t)hlen, 8, &got) != 0) {
        int e = errno;
        free(text);
        return gp_error_set(err, "%s: cannot read the header: %s", r->path, e ? strerror(e) : "the file shrank");
    }
    json_error_t je;
    json_t *hdr = json_loadb(text, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!hdr)
        return gp_error_set(err, "%s: header is not valid JSON: %s (header byte %d)", r->path, je.text, je.position);
    if (!json_is_object(hdr)) {
        json_decref(hdr);
        return gp_error_set(err, "%s: header is not a JSON object", r->path);
    }
    uint64_t data = 8 + hlen, dsize = size - data;
    size_t ne = json_object_size(hdr), nb = 0;
    const char *name;
    json_t *v;
    json_object_foreach(hdr, name, v) nb += strlen(name) + 1;
    span *sp = malloc((ne ? ne : 1) * sizeof *sp);
    r->ix = calloc(ne ? ne : 1, sizeof *r->ix);
    r->names = malloc(nb ? nb : 1);
    if (!sp || !r->ix || !r->names) {
        free(sp);
        json_decref(hdr);
        return gp_error_set(err, "%s: out of memory indexing %zu entries", r->path, ne);
    }
    size_t k = 0, at = 0;
    int rc = 0;
    json_object_foreach(hdr, name, v) {
        if (!strcmp(name, "__metadata__")) {
            if (!json_is_object(v)) {
                rc = gp_error_set(err, "%s: __metadata__ is not an object", r->path);
                break;
            }
            continue;
        }
        index_entry *x = &r->ix[k];
        if ((rc = st_entry(r->path, name, v, dsize, &x->fmt, &x->n, &sp[k].b, &sp[k].e, err)) != 0)
            break;
        size_t l = strlen(name) + 1;
        memcpy(r->names + at, name, l);
        x->name = r->names + at;
        x->off = data + sp[k].b;
        sp[k++].name = x->name;
        at += l;
    }
    if (rc == 0) { /* entries may not share bytes */
        qsort(sp, k, sizeof *sp, cmp_span);
        for (size_t i = 1; i < k && rc == 0; i++)
            if (sp[i].b < sp[i - 1].e)
                rc = gp_error_set(err, "%s: entries '%s' and '%s' overlap (data_offsets [%llu, %llu] and [%llu, %llu])",
                                  r->path, sp[i - 1].name, sp[i].name, (unsigned long long)sp[i - 1].b,
                                  (unsigned long long)sp[i - 1].e, (unsigned long long)sp[i].b,
                                  (unsigned long long)sp[i].e);
    }
    free(sp);
    json_decref(hdr);
    if (rc == 0) {
        r->nix = k;
        qsort(r->ix, k, sizeof *r->ix, cmp_index);
    }
    return rc;
}

static const index_entry *st_find(const gp_replay *r, const char *name)
{
    size_t lo = 0, hi = r->nix;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, r->ix[mid].name);
        if (c == 0)
            return &r->ix[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* ---- .npy ---- */

typedef struct {
    const char *s, *end;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->s < c->end && (*c->s == ' ' || *c->s == '\t'))
        c->s++;
}

static int eat(cursor *c, char ch)
{
    skip_ws(c);
    if (c->s < c->end && *c->s == ch) {
        c->s++;
        return 1;
    }
    return 0;
}

/* A Python string literal in single or double quotes, no escapes, into out. */
static int str_lit(cursor *c, char *out, size_t cap)
{
    skip_ws(c);
    if (c->s >= c->end || (*c->s != '\'' && *c->s != '"'))
        return -1;
    char q = *c->s++;
    size_t n = 0;
    while (c->s < c->end && *c->s != q) {
        if (*c->s == '\\' || n + 1 >= cap)
            return -1;
        out[n++] = *c->s++;
    }
    if (c->s >= c->end)
        return -1;
    c->s++;
    out[n] = '\0';
    return 0;
}

/* The header dict {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }: exactly
 * these three keys, once each, any order. */
static int npy_dict(cursor *c, char *descr, int *fortran, uint64_t *n, int *ndim, const char **why)
{
    int seen[3] = {0, 0, 0};
    *n = 1;
    *ndim = 0;
    if (!eat(c, '{')) {
        *why = "header does not start with '{'";
        return -1;
    }
    for (;;) {
        char key[32];
        if (eat(c, '}'))
            break;
        if (str_lit(c, key, sizeof key) != 0 || !eat(c, ':')) {
            *why = "header is not a dict of 'descr', 'fortran_order', 'shape'";
            return -1;
        }
        int which = !strcmp(key, "descr") ? 0 : !strcmp(key, "fortran_order") ? 1 : !strcmp(key, "shape") ? 2 : -1;
        if (which < 0 || seen[which]++) {
            *why = which < 0 ? "header has a key other than 'descr', 'fortran_order', 'shape'"
                             : "header repeats a key";
            return -1;
        }
        skip_ws(c);
        if (which == 0 && str_lit(c, descr, 16) != 0) {
            *why = "'descr' is not a simple type string (structured dtypes are not replayed)";
            return -1;
        }
        if (which == 1) {
            if ((size_t)(c->end - c->s) >= 4 && !memcmp(c->s, "True", 4))
                *fortran = 1, c->s += 4;
            else if ((size_t)(c->end - c->s) >= 5 && !memcmp(c->s, "False", 5))
                *fortran = 0, c->s += 5;
            else {
                *why = "'fortran_order' is not True or False";
                return -1;
            }
        }
        if (which == 2) {
            if (!eat(c, '(')) {
                *why = "'shape' is not a tuple";
                return -1;
            }
            for (;;) {
                skip_ws(c);
                if (eat(c, ')'))
                    break;
                if (c->s >= c->end || *c->s < '0' || *c->s > '9') {
                    *why = "'shape' holds something other than non-negative integers";
                    return -1;
                }
                uint64_t v = 0;
                while (c->s < c->end && *c->s >= '0' && *c->s <= '9') {
                    if (v > (UINT64_MAX - 9) / 10) {
                        *why = "'shape' has a dimension too large";
                        return -1;
                    }
                    v = v * 10 + (uint64_t)(*c->s++ - '0');
                }
                if (v && *n > UINT64_MAX / 8 / v) {
                    *why = "'shape' describes more elements than any file can hold";
                    return -1;
                }
                *n *= v;
                (*ndim)++;
                if (!eat(c, ',')) {
                    if (!eat(c, ')')) {
                        *why = "'shape' is not a tuple of integers";
                        return -1;
                    }
                    break;
                }
            }
        }
        if (!eat(c, ',')) {
            if (!eat(c, '}')) {
                *why = "header dict is malformed";
                return -1;
            }
            break;
        }
    }
    if (!seen[0] || !seen[1] || !seen[2]) {
        *why = "header lacks one of 'descr', 'fortran_order', 'shape'";
        return -1;
    }
    skip_ws(c); /* only padding spaces and the final newline remain */
    if (c->s + 1 != c->end || *c->s != '\n') {
        *why = "header has text after the dict, or does not end with a newline";
        return -1;
    }
    return 0;
}

/* numpy's descr of each replayed dtype. numpy has no bfloat16: bf16 is stored as its raw
 * bits, uint16 ('<u2'), or as ml_dtypes' 2-byte void ('<V2' / '|V2'). */
static int npy_dtype(const char *d, gp_format *f)
{
    if (!strcmp(d, "<f4"))
        *f = GP_FP32;
    else if (!strcmp(d, "<f2"))
        *f = GP_FP16;
    else if (!strcmp(d, "<u2") || !strcmp(d, "<V2") || !strcmp(d, "|V2"))
        *f = GP_BF16;
    else
        return -1;
    return 0;
}

/* Open the .npy file `file` as entry e (its own descriptor; checked as gp_replay.h says). */
static int npy_entry(const char *file, gp_replay_entry *e, gp_error *err)
{
    size_t size = 0, got = 0;
    int fd = gp_file_open_input(file, DUMP_MAX_BYTES, &size, err);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int x = errno;
        close(fd);
        return gp_error_set(err, "%s: cannot open: %s", file, strerror(x));
    }
    unsigned char p[12];
    char *hdr = NULL, buf[160];
    const char *why = NULL;
    char descr[16] = "";
    int fortran = 0, ndim = 0;
    uint64_t n = 0, hoff = 0, hlen = 0;
    if (size < 10 || read_full(fd, p, size < 12 ? 10 : 12, 0, &got) != 0 || memcmp(p, "\x93NUMPY", 6) != 0)
        why = "not a .npy file (no \\x93NUMPY magic)";
    else if (p[6] < 1 || p[6] > 3)
        why = "unknown .npy format version (1, 2 and 3 are read)";
    else if (p[6] == 1) {
        hlen = (uint64_t)p[8] | (uint64_t)p[9] << 8;
        hoff = 10;
    } else if (size < 12)
        why = "truncated header";
    else {
        hlen = (uint64_t)p[8] | (uint64_t)p[9] << 8 | (uint64_t)p[10] << 16 | (uint64_t)p[11] << 24;
        hoff = 12;
    }
    if (!why && hlen > GP_REPLAY_MAX_NPY_HEADER)
        why = "header longer than 65536 bytes";
    else if (!why && hoff + hlen > size)
        why = "header runs past the end of the file (truncated)";
    if (!why && !(hdr = malloc(hlen ? (size_t)hlen : 1)))
        why = "out of memory";
    else if (!why && read_full(fd, hdr, (size_t)hlen, hoff, &got) != 0)
        why = "header runs past the end of the file (truncated)";
    if (!why) {
        cursor c = {hdr, hdr + hlen};
        npy_dict(&c, descr, &fortran, &n, &ndim, &why);
    }
    free(hdr);
    gp_format f = GP_FP32;
    if (!why && npy_dtype(descr, &f) != 0) {
        snprintf(buf, sizeof buf, "dtype '%s' (gradprec replays '<f4', '<f2', and bf16 bits as '<u2' or 'V2'; "
                 "big-endian data is refused)", descr);
        why = buf;
    }
    if (!why && fortran && ndim > 1)
        why = "fortran_order True: write C-contiguous arrays (np.ascontiguousarray)";
    uint64_t want = n * width(f), have = size - hoff - hlen;
    if (!why && have < want) {
        snprintf(buf, sizeof buf, "shape has %llu elements = %llu bytes, but only %llu bytes of data follow (truncated)",
                 (unsigned long long)n, (unsigned long long)want, (unsigned long long)have);
        why = buf;
    } else if (!why && have > want) {
        snprintf(buf, sizeof buf, "shape has %llu elements = %llu bytes, but %llu bytes of data follow",
                 (unsigned long long)n, (unsigned long long)want, (unsigned long long)have);
        why = buf;
    }
    if (why) {
        close(fd);
        return gp_error_set(err, "%s: %s", file, why);
    }
    e->fmt = f;
    e->n = n;
    e->off = hoff + hlen;
    e->fd = fd;
    ident_of(&st, &e->id);
    return 0;
}

/* ---- the registry ---- */

static void dump_free(gp_replay *r)
{
    for (size_t i = 0; r->is_mem && i < r->nix; i++) {
        free((char *)r->ix[i].name);
        free(r->ix[i].mem);
    }
    if (r->fd >= 0)
        close(r->fd);
    free(r->ix);
    free(r->names);
    free(r->real);
    free(r);
}

/* Unlink r from the registry list (reg_mu held). */
static void reg_unlink(gp_replay *r)
{
    for (gp_replay **p = &reg; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            r->next = NULL;
            return;
        }
}

/* Open and parse the dump at path (resolved: real) into a new gp_replay with one reference. */
static int dump_new(const char *path, const char *real, gp_replay **out, gp_error *err)
{
    gp_replay *r = calloc(1, sizeof *r);
    if (!r)
        return gp_error_set(err, "%s: out of memory", path);
    r->fd = -1;
    r->refs = 1;
    snprintf(r->path, sizeof r->path, "%s", path);
    if (!(r->real = strdup(real))) {
        dump_free(r);
        return gp_error_set(err, "%s: out of memory", path);
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        r->is_dir = 1;
        ident_of(&st, &r->id);
        *out = r;
        return 0;
    }
    size_t size = 0;
    if ((r->fd = gp_file_open_input(path, DUMP_MAX_BYTES, &size, err)) < 0) {
        dump_free(r);
        return -1;
    }
    if (fstat(r->fd, &st) != 0) {
        gp_error_set(err, "%s: cannot open: %s", path, strerror(errno));
        dump_free(r);
        return -1;
    }
    ident_of(&st, &r->id);
    if (st_open(r, err) != 0) {
        dump_free(r);
        return -1;
    }
    *out = r;
    return 0;
}

/* Keep at most GP_REPLAY_IDLE idle dumps: free the least recently closed (reg_mu held). */
static void trim_idle(size_t keep)
{
    for (;;) {
        size_t idle = 0;
        gp_replay *old = NULL;
        for (gp_replay *r = reg; r; r = r->next)
            if (r->refs == 0) {
                idle++;
                if (!old || r->idle_since < old->idle_since)
                    old = r;
            }
        if (idle <= keep)
            return;
        reg_unlink(old);
        dump_free(old);
    }
}

int gp_replay_open(const char *path, gp_replay **out, gp_error *err)
{
    *out = NULL;
    if (!path || !*path)
        return gp_error_set(err, "(empty path): no file named");
    if (strlen(path) >= sizeof((gp_replay *)0)->path)
        return gp_error_set(err, "%.200s...: path too long", path);
    pthread_mutex_lock(&reg_mu);
    for (gp_replay *r = reg; r; r = r->next)
        if (r->is_mem && !strcmp(r->real, path)) { /* a memory dump's name shadows any file */
            r->refs++;
            n_shared++;
            *out = r;
            pthread_mutex_unlock(&reg_mu);
            return 0;
        }
    pthread_mutex_unlock(&reg_mu);
    char real[PATH_MAX];
    struct stat st;
    if (!realpath(path, real) || stat(real, &st) != 0)
        return gp_error_set(err, "%s: cannot open: %s", path, strerror(errno));
    gp_replay_ident now;
    ident_of(&st, &now);
    pthread_mutex_lock(&reg_mu);
    for (gp_replay *r = reg; r; r = r->next)
        if (!r->is_mem && !strcmp(r->real, real)) {
            if (ident_same(&r->id, &now)) {
                r->refs++;
                n_shared++;
                *out = r;
                pthread_mutex_unlock(&reg_mu);
                return 0;
            }
            reg_unlink(r); /* changed: its holders keep it (and see the change when they read) */
            if (r->refs == 0)
                dump_free(r);
            else
                r->stale = 1;
            break;
        }
    /* Parsed under the lock: two threads opening one dump parse it once. */
    gp_replay *r = NULL;
    int rc = dump_new(path, real, &r, err);
    if (rc == 0) {
        if (!r->is_dir)
            n_parsed++;
        r->next = reg;
        reg = r;
        *out = r;
    }
    pthread_mutex_unlock(&reg_mu);
    return rc;
}

void gp_replay_close(gp_replay *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&reg_mu);
    if (--r->refs == 0) {
        if (r->is_mem) { /* nobody can open it again: gone with its last holder */
            reg_unlink(r);
            dump_free(r);
        } else if (r->stale) {
            dump_free(r);
        } else {
            r->idle_since = ++reg_clock;
            trim_idle(GP_REPLAY_IDLE);
        }
    }
    pthread_mutex_unlock(&reg_mu);
}

void gp_replay_forget_idle(void)
{
    pthread_mutex_lock(&reg_mu);
    trim_idle(0);
    pthread_mutex_unlock(&reg_mu);
}

void gp_replay_stats_get(gp_replay_stats *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_lock(&reg_mu);
    s->parsed = n_parsed;
    s->shared = n_shared;
    for (gp_replay *r = reg; r; r = r->next) {
        s->registered++;
        s->idle += r->refs == 0;
    }
    pthread_mutex_unlock(&reg_mu);
}

/* ---- entries ---- */

static void advise(int fd, int access)
{
    if (access)
        (void)posix_fadvise(fd, 0, 0, access == GP_REPLAY_RANDOM ? POSIX_FADV_RANDOM : POSIX_FADV_SEQUENTIAL);
}

int gp_replay_entry_get(gp_replay *r, const char *name, gp_replay_entry *e, gp_error *err)
{
    memset(e, 0, sizeof *e);
    e->fd = -1;
    e->dump = r;
    if (r->is_dir) {
        char file[4200];
        if (snprintf(file, sizeof file, "%s/%s.npy", r->path, name) >= (int)sizeof file)
            return gp_error_set(err, "%s: entry '%s': path too long", r->path, name);
        struct stat st;
        if (stat(file, &st) != 0 && errno == ENOENT)
            return gp_error_set(err, "%s: entry '%s': missing (no file %s)", r->path, name, file);
        if (npy_entry(file, e, err) != 0)
            return -1;
        if (!(e->name = strdup(name))) {
            gp_replay_entry_release(e);
            return gp_error_set(err, "%s: out of memory", file);
        }
        e->own = 1;
        advise(e->fd, __atomic_load_n(&r->access, __ATOMIC_RELAXED));
        return 0;
    }
    const index_entry *x = st_find(r, name);
    if (!x)
        return gp_error_set(err, "%s: entry '%s': missing", r->path, name);
    e->fmt = x->fmt;
    e->n = x->n;
    e->off = x->off;
    e->mem = x->mem;
    e->fd = r->fd;
    e->name = x->name;
    e->id = r->id;
    return 0;
}

void gp_replay_access(gp_replay *r, int how)
{
    __atomic_store_n(&r->access, how, __ATOMIC_RELAXED);
    if (!r->is_dir && r->fd >= 0)
        advise(r->fd, how);
}

void gp_replay_entry_release(gp_replay_entry *e)
{
    if (e->own) {
        if (e->fd >= 0)
            close(e->fd);
        free((char *)e->name);
    }
    memset(e, 0, sizeof *e);
    e->fd = -1;
}

/* ---- reading ---- */

/* The file e is read from is still what it was when opened (after a read: the bytes read
 * are the bytes the run was loaded with), else -1 with why. */
static int still_same(const gp_replay_entry *e, gp_error *err)
{
    struct stat st;
    gp_replay_ident now;
    char file[4200];
    const char *path = e->dump->real; /* resolved: the run may have changed folder */
    if (e->own) { /* .npy: the entry's own file */
        snprintf(file, sizeof file, "%s/%s.npy", e->dump->real, e->name);
        path = file;
    }
    if (fstat(e->fd, &st) != 0)
        return gp_error_set(err, "%s: entry '%s': cannot stat the open file: %s", e->dump->path, e->name,
                            strerror(errno));
    ident_of(&st, &now);
    if (now.size != e->id.size)
        return gp_error_set(err, "%s: entry '%s': the file %s while gradprec read it (%llu bytes when opened, "
                            "%llu now): its data can no longer be trusted", e->dump->path, e->name,
                            now.size < e->id.size ? "was truncated" : "changed", (unsigned long long)e->id.size,
                            (unsigned long long)now.size);
    int gone = stat(path, &st) != 0;
    if (gone || (uint64_t)st.st_dev != e->id.dev || (uint64_t)st.st_ino != e->id.ino)
        return gp_error_set(err, "%s: entry '%s': the file changed while gradprec read it (%s since it was "
                            "opened): its data can no longer be trusted", e->dump->path, e->name,
                            gone ? "removed" : "replaced by another file");
    if (now.mtime_ns != e->id.mtime_ns || now.ctime_ns != e->id.ctime_ns)
        return gp_error_set(err, "%s: entry '%s': the file changed while gradprec read it (modified since it was "
                            "opened): its data can no longer be trusted", e->dump->path, e->name);
    return 0;
}

/* len bytes of e's data from byte `at` of the entry into buf, then the check above. */
static int read_bytes(const gp_replay_entry *e, uint64_t at, void *buf, size_t len, gp_error *err)
{
    size_t got = 0;
    if (e->mem) { /* a memory dump: its bytes cannot change under the run */
        memcpy(buf, (const unsigned char *)e->mem + at, len);
        return 0;
    }
    if (read_full(e->fd, buf, len, e->off + at, &got) != 0) {
        int x = errno;
        struct stat st;
        if (x)
            return gp_error_set(err, "%s: entry '%s': cannot read: %s", e->dump->path, e->name, strerror(x));
        return gp_error_set(err, "%s: entry '%s': the file ends at byte %lld, before the entry's data (bytes %llu to "
                            "%llu): it was truncated while gradprec read it", e->dump->path, e->name,
                            fstat(e->fd, &st) == 0 ? (long long)st.st_size : -1LL,
                            (unsigned long long)e->off, (unsigned long long)(e->off + e->n * width(e->fmt)));
    }
    return still_same(e, err);
}

static float widen(gp_format f, const unsigned char *p)
{
    if (f == GP_FP32) {
        float x;
        memcpy(&x, p, 4);
        return x;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    if (f == GP_BF16) { /* bf16 is the top half of fp32 (NaN payloads included) */
        uint32_t b = (uint32_t)h << 16;
        float x;
        memcpy(&x, &b, 4);
        return x;
    }
    return gp_f32_from_bits(gp_fmt_to_f32_bits(f, h));
}

/* Entries of fewer than 4 bytes are read into the top of out, then widened forward a block
 * at a time through a local copy: block [j0, j0 + m) writes bytes [4 j0, 4 (j0 + m)) of out,
 * and the entries still to be read start at byte (4 - w) n + (j0 + m) w, which is not below
 * 4 (j0 + m) since j0 + m <= n. A whole bf16 block is a loop of shifts that vectorises. */
#define WIDEN_BLOCK 1024
int gp_replay_read(const gp_replay_entry *e, uint64_t i0, size_t n, float *out, gp_error *err)
{
    size_t w = width(e->fmt);
    if (w == 4)
        return read_bytes(e, i0 * w, out, n * w, err) != 0 ? -1 : 0;
    const unsigned char *src = (const unsigned char *)out + n * (4 - w);
    if (read_bytes(e, i0 * w, (unsigned char *)out + n * (4 - w), n * w, err) != 0)
        return -1;
    for (size_t j0 = 0; j0 < n; j0 += WIDEN_BLOCK) {
        size_t m = n - j0 < WIDEN_BLOCK ? n - j0 : WIDEN_BLOCK;
        uint16_t h[WIDEN_BLOCK]; /* the block's entries (w = 2), copied before out is written */
        memcpy(h, src + j0 * w, m * w);
        if (e->fmt == GP_BF16 && m == WIDEN_BLOCK) { /* bf16 is the top half of fp32 (NaN payloads included) */
            uint32_t b[WIDEN_BLOCK];
            for (size_t q = 0; q < WIDEN_BLOCK; q++)
                b[q] = (uint32_t)h[q] << 16;
            memcpy(out + j0, b, sizeof b);
        } else {
            for (size_t q = 0; q < m; q++)
                out[j0 + q] = widen(e->fmt, (const unsigned char *)(h + q));
        }
    }
    return 0;
}

int gp_replay_read_idx(const gp_replay_entry *e, const uint64_t *idx, size_t n, float *out, gp_error *err)
{
    unsigned char buf[GP_REPLAY_WINDOW];
    uint64_t w = width(e->fmt), per = GP_REPLAY_WINDOW / w;
    for (size_t j = 0; j < n;) {
        size_t m = 1; /* elements j .. j+m-1 lie within one window from idx[j] */
        while (j + m < n && idx[j + m] - idx[j] < per)
            m++;
        if (read_bytes(e, idx[j] * w, buf, (size_t)((idx[j + m - 1] - idx[j] + 1) * w), err) != 0)
            return -1;
        for (size_t q = 0; q < m; q++)
            out[j + q] = widen(e->fmt, buf + (idx[j + q] - idx[j]) * w);
        j += m;
    }
    return 0;
}

/* ---- memory dumps ---- */

int gp_replay_mem_new(const char *name, gp_replay **out, gp_error *err)
{
    *out = NULL;
    if (!name || !*name || strlen(name) >= sizeof((gp_replay *)0)->path)
        return gp_error_set(err, "memory dump: a name of 1 to %zu bytes", sizeof((gp_replay *)0)->path - 1);
    gp_replay *r = calloc(1, sizeof *r);
    if (!r || !(r->real = strdup(name))) {
        free(r);
        return gp_error_set(err, "%s: out of memory", name);
    }
    r->fd = -1;
    r->refs = 1;
    r->is_mem = 1;
    snprintf(r->path, sizeof r->path, "%s", name);
    pthread_mutex_lock(&reg_mu);
    for (gp_replay *q = reg; q; q = q->next)
        if (q->is_mem && !strcmp(q->real, name)) {
            pthread_mutex_unlock(&reg_mu);
            dump_free(r);
            return gp_error_set(err, "%s: a memory dump of this name is registered", name);
        }
    r->next = reg;
    reg = r;
    pthread_mutex_unlock(&reg_mu);
    *out = r;
    return 0;
}

void *gp_replay_mem_put(gp_replay *r, const char *entry, gp_format fmt, uint64_t n, gp_error *err)
{
    if (!r->is_mem || (fmt != GP_FP32 && fmt != GP_BF16 && fmt != GP_FP16) || n > DUMP_MAX_BYTES / 4) {
        gp_error_set(err, "%s: entry '%s': not a memory dump, a format other than fp32/bf16/fp16, or too many elements",
                     r->path, entry);
        return NULL;
    }
    if (r->nix == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        index_entry *ix = realloc(r->ix, cap * sizeof *ix);
        if (!ix) {
            gp_error_set(err, "%s: entry '%s': out of memory", r->path, entry);
            return NULL;
        }
        r->ix = ix;
        r->cap = cap;
    }
    index_entry *x = &r->ix[r->nix];
    memset(x, 0, sizeof *x);
    x->fmt = fmt;
    x->n = n;
    if (!(x->name = strdup(entry)) || !(x->mem = calloc(n ? (size_t)n : 1, width(fmt)))) {
        free((char *)x->name);
        gp_error_set(err, "%s: entry '%s': out of memory (%llu elements)", r->path, entry, (unsigned long long)n);
        return NULL;
    }
    r->nix++;
    return x->mem;
}

int gp_replay_mem_seal(gp_replay *r, gp_error *err)
{
    qsort(r->ix, r->nix, sizeof *r->ix, cmp_index);
    for (size_t i = 1; i < r->nix; i++)
        if (!strcmp(r->ix[i].name, r->ix[i - 1].name))
            return gp_error_set(err, "%s: entry '%s' put twice", r->path, r->ix[i].name);
    return 0;
}
