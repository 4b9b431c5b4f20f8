/* gp_replay.c — see gp_replay.h. Files are mapped read-only; nothing is read whole.
 * Multi-byte values in both formats are little-endian, as on every host gradprec builds
 * for (checked at compile time). */
#define _DEFAULT_SOURCE /* madvise(MADV_DONTNEED) */
#include "gp_replay.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/gp_file.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gp_replay reads little-endian dumps in place: a big-endian host needs byte swapping here"
#endif

#define DUMP_MAX_BYTES ((size_t)1 << 52) /* no practical limit: the file is mapped, not read */

struct gp_replay {
    char path[4096];
    int is_dir;
    void *map;          /* safetensors: the whole file */
    size_t size;
    json_t *hdr;        /* safetensors: the parsed header */
    const unsigned char *data; /* safetensors: the data area */
    int access;         /* GP_REPLAY_SEQUENTIAL / _RANDOM, or 0 (the kernel's default) */
};

static size_t width(gp_format f)
{
    return f == GP_FP32 ? 4 : 2;
}

const char *gp_replay_path(const gp_replay *r)
{
    return r->path;
}

static int map_file(const char *path, void **map, size_t *size, gp_error *err)
{
    int fd = gp_file_open_input(path, DUMP_MAX_BYTES, size, err);
    if (fd < 0)
        return -1;
    *map = NULL;
    if (*size > 0) {
        *map = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (*map == MAP_FAILED) {
            int e = errno;
            close(fd);
            *map = NULL;
            return gp_error_set(err, "%s: cannot map: %s", path, strerror(e));
        }
    }
    close(fd);
    return 0;
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
static int st_entry(const gp_replay *r, const char *name, const json_t *v, uint64_t dsize, gp_format *f, uint64_t *n,
                    uint64_t *b, uint64_t *e, gp_error *err)
{
    const char *why = NULL;
    const json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
                 *off = json_object_get(v, "data_offsets");
    const char *key;
    json_t *val;
    if (!json_is_object(v))
        return gp_error_set(err, "%s: entry '%s': not an object", r->path, name);
    json_object_foreach((json_t *)v, key, val)
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return gp_error_set(err, "%s: entry '%s': unknown field '%.60s'", r->path, name, key);
    if (!json_is_string(dt) || !sh || !off)
        return gp_error_set(err, "%s: entry '%s': needs a string 'dtype', a 'shape' and 'data_offsets'", r->path,
                            name);
    if (st_dtype(json_string_value(dt), f) != 0)
        return gp_error_set(err, "%s: entry '%s': dtype '%.20s' (gradprec replays F32, BF16 and F16)", r->path, name,
                            json_string_value(dt));
    if (shape_product(sh, n, &why) != 0)
        return gp_error_set(err, "%s: entry '%s': %s", r->path, name, why);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
        !json_is_integer(json_array_get(off, 1)) || json_integer_value(json_array_get(off, 0)) < 0 ||
        json_integer_value(json_array_get(off, 1)) < json_integer_value(json_array_get(off, 0)))
        return gp_error_set(err, "%s: entry '%s': 'data_offsets' is not [begin, end] with 0 <= begin <= end", r->path,
                            name);
    *b = (uint64_t)json_integer_value(json_array_get(off, 0));
    *e = (uint64_t)json_integer_value(json_array_get(off, 1));
    if (*e > dsize)
        return gp_error_set(err, "%s: entry '%s': data_offsets [%llu, %llu] end past the data (%llu bytes: the file is "
                                 "truncated or the header lies)", r->path, name, (unsigned long long)*b,
                            (unsigned long long)*e, (unsigned long long)dsize);
    if (*e - *b != *n * width(*f))
        return gp_error_set(err, "%s: entry '%s': shape has %llu elements = %llu bytes of %s, but data_offsets span "
                                 "%llu bytes", r->path, name, (unsigned long long)*n,
                            (unsigned long long)(*n * width(*f)), json_string_value(dt),
                            (unsigned long long)(*e - *b));
    return 0;
}

static int st_open(gp_replay *r, gp_error *err)
{
    if (map_file(r->path, &r->map, &r->size, err) != 0)
        return -1;
    const unsigned char *p = r->map;
    uint64_t hlen = 0;
    if (r->size < 8)
        return gp_error_set(err, "%s: %zu bytes: too short for a safetensors file (8-byte header length)", r->path,
                            r->size);
    memcpy(&hlen, p, 8);
    if (hlen > GP_REPLAY_MAX_HEADER)
        return gp_error_set(err, "%s: header length %llu bytes, more than the limit of %llu (not a safetensors file?)",
                            r->path, (unsigned long long)hlen, (unsigned long long)GP_REPLAY_MAX_HEADER);
    if (hlen > r->size - 8)
        return gp_error_set(err, "%s: header length %llu bytes, but the file has only %zu after the length (truncated)",
                            r->path, (unsigned long long)hlen, r->size - 8);
    json_error_t je;
    r->hdr = json_loadb((const char *)p + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!r->hdr)
        return gp_error_set(err, "%s: header is not valid JSON: %s (header byte %d)", r->path, je.text, je.position);
    if (!json_is_object(r->hdr))
        return gp_error_set(err, "%s: header is not a JSON object", r->path);
    r->data = p + 8 + hlen;
    uint64_t dsize = r->size - 8 - hlen;
    size_t ne = json_object_size(r->hdr);
    span *sp = malloc((ne ? ne : 1) * sizeof *sp);
    if (!sp)
        return gp_error_set(err, "%s: out of memory", r->path);
    size_t k = 0;
    const char *name;
    json_t *v;
    int rc = 0;
    json_object_foreach(r->hdr, name, v) {
        if (!strcmp(name, "__metadata__")) {
            if (!json_is_object(v)) {
                rc = gp_error_set(err, "%s: __metadata__ is not an object", r->path);
                break;
            }
            continue;
        }
        gp_format f;
        uint64_t n;
        if ((rc = st_entry(r, name, v, dsize, &f, &n, &sp[k].b, &sp[k].e, err)) != 0)
            break;
        sp[k++].name = name;
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
    return rc;
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

static int npy_entry(const char *file, gp_replay_entry *e, gp_error *err)
{
    void *map = NULL;
    size_t size = 0;
    if (map_file(file, &map, &size, err) != 0)
        return -1;
    const unsigned char *p = map;
    const char *why = NULL;
    char descr[16] = "";
    int fortran = 0, ndim = 0;
    uint64_t n = 0, hoff = 0, hlen = 0;
    if (size < 10 || memcmp(p, "\x93NUMPY", 6) != 0)
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
    if (!why) {
        cursor c = {(const char *)p + hoff, (const char *)p + hoff + hlen};
        npy_dict(&c, descr, &fortran, &n, &ndim, &why);
    }
    gp_format f = GP_FP32;
    char buf[160];
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
        if (map)
            munmap(map, size);
        return gp_error_set(err, "%s: %s", file, why);
    }
    e->fmt = f;
    e->n = n;
    e->data = p + hoff + hlen;
    e->map = map;
    e->map_len = size;
    return 0;
}

/* ---- the dump ---- */

static void advise(int access, const void *p, size_t len)
{
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~((uintptr_t)pg - 1);
    if (access && len)
        madvise((void *)a, len + ((uintptr_t)p - a), access == GP_REPLAY_RANDOM ? MADV_RANDOM : MADV_SEQUENTIAL);
}


int gp_replay_open(const char *path, gp_replay **out, gp_error *err)
{
    *out = NULL;
    gp_replay *r = calloc(1, sizeof *r);
    if (!r)
        return gp_error_set(err, "%s: out of memory", path);
    if (snprintf(r->path, sizeof r->path, "%s", path) >= (int)sizeof r->path) {
        free(r);
        return gp_error_set(err, "%.200s...: path too long", path);
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        r->is_dir = 1;
        *out = r;
        return 0;
    }
    if (st_open(r, err) != 0) {
        gp_replay_close(r);
        return -1;
    }
    *out = r;
    return 0;
}

void gp_replay_close(gp_replay *r)
{
    if (!r)
        return;
    json_decref(r->hdr);
    if (r->map)
        munmap(r->map, r->size);
    free(r);
}

int gp_replay_entry_get(gp_replay *r, const char *name, gp_replay_entry *e, gp_error *err)
{
    memset(e, 0, sizeof *e);
    if (r->is_dir) {
        char file[4200];
        if (snprintf(file, sizeof file, "%s/%s.npy", r->path, name) >= (int)sizeof file)
            return gp_error_set(err, "%s: entry '%s': path too long", r->path, name);
        struct stat st;
        if (stat(file, &st) != 0 && errno == ENOENT)
            return gp_error_set(err, "%s: entry '%s': missing (no file %s)", r->path, name, file);
        if (npy_entry(file, e, err) != 0)
            return -1;
        advise(r->access, e->map, e->map_len);
        return 0;
    }
    const json_t *v = json_object_get(r->hdr, name);
    if (!v)
        return gp_error_set(err, "%s: entry '%s': missing", r->path, name);
    uint64_t b, end;
    if (st_entry(r, name, v, r->size - (size_t)(r->data - (const unsigned char *)r->map), &e->fmt, &e->n, &b, &end,
                 err) != 0)
        return -1;
    e->data = r->data + b;
    return 0;
}

void gp_replay_access(gp_replay *r, int how)
{
    r->access = how;
    if (!r->is_dir && r->map)
        advise(how, r->map, r->size);
}

void gp_replay_entry_release(gp_replay_entry *e)
{
    if (e->map)
        munmap(e->map, e->map_len);
    memset(e, 0, sizeof *e);
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
    return gp_f32_from_bits(gp_fmt_to_f32_bits(f, h));
}

void gp_replay_read(const gp_replay_entry *e, uint64_t i0, size_t n, float *out)
{
    size_t w = width(e->fmt);
    if (e->fmt == GP_FP32) {
        memcpy(out, e->data + i0 * 4, n * 4);
        return;
    }
    if (e->fmt == GP_BF16) { /* bf16 is the top half of fp32 (NaN payloads included) */
        const unsigned char *p = e->data + i0 * 2;
        for (size_t j = 0; j < n; j++) {
            uint16_t h;
            memcpy(&h, p + 2 * j, 2);
            uint32_t b = (uint32_t)h << 16;
            memcpy(out + j, &b, 4);
        }
        return;
    }
    for (size_t j = 0; j < n; j++)
        out[j] = widen(e->fmt, e->data + (i0 + j) * w);
}

void gp_replay_read_idx_stream(const gp_replay_entry *e, const uint64_t *idx, size_t n, float *out)
{
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), w = width(e->fmt);
    uintptr_t base = (uintptr_t)e->data;
    size_t j0 = 0; /* the first element whose pages were not given back */
    for (size_t j = 0; j < n; j++) {
        out[j] = widen(e->fmt, e->data + idx[j] * w);
        if (((base + idx[j] * w) / pg) - ((base + idx[j0] * w) / pg) >= GP_REPLAY_DROP_PAGES) {
            gp_replay_drop(e, idx[j0], idx[j] - idx[j0]); /* up to, not including, idx[j]'s page */
            j0 = j;
        }
    }
    if (n)
        gp_replay_drop(e, idx[j0], idx[n - 1] - idx[j0]);
}

void gp_replay_drop(const gp_replay_entry *e, uint64_t i0, uint64_t n)
{
    /* From the page holding the first element up to, not including, the page holding
     * the element after the last: the partial page at the start (shared with the
     * previous chunk, which is done) goes, the one at the end stays mapped for the next
     * chunk, which drops it. Rounding inwards at both ends would leave every shared page
     * mapped by neither chunk (resident memory growing with the dump); outwards would
     * drop a page the next chunk then faults in again, and the kernel's fault-around
     * maps the aligned block around it, pages behind included, which nothing drops. */
    if (!n)
        return;
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)(e->data + i0 * width(e->fmt)), b = a + n * width(e->fmt);
    uintptr_t lo = a & ~((uintptr_t)pg - 1), hi = b & ~((uintptr_t)pg - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}
