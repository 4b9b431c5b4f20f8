/* gp_test_dump.h — writing small safetensors dumps by hand for the replay suites
 * (tests/test_replay.c, tests/test_twin.c): entries of shape [n], laid out in order. */
#ifndef GP_TEST_DUMP_H
#define GP_TEST_DUMP_H

#include <stdint.h>
#include <stdio.h>

#include "gp_test.h"

typedef struct {
    const char *name, *dtype; /* dtype as written in the header */
    uint64_t n;               /* elements (shape [n]) */
    const void *data;
    size_t bytes;             /* bytes of data */
} st_entry;

/* A safetensors file of the entries, laid out in order, header padded with spaces. */
static inline void write_safetensors(const char *path, const st_entry *e, size_t ne)
{
    char hdr[8192];
    size_t off = 0, h = 0;
    h += (size_t)snprintf(hdr + h, sizeof hdr - h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < ne; i++) {
        h += (size_t)snprintf(hdr + h, sizeof hdr - h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu],\"data_offsets\":[%zu,%zu]}",
                              e[i].name, e[i].dtype, (unsigned long long)e[i].n, off, off + e[i].bytes);
        off += e[i].bytes;
    }
    h += (size_t)snprintf(hdr + h, sizeof hdr - h, "}");
    assert_true(h < sizeof hdr - 8);
    while (h % 8)
        hdr[h++] = ' ';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t hl = h;
    fwrite(&hl, 8, 1, f);
    fwrite(hdr, 1, h, f);
    for (size_t i = 0; i < ne; i++)
        fwrite(e[i].data, 1, e[i].bytes, f);
    fclose(f);
}

#endif
