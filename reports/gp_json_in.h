/* gp_json_in.h — parsing JSON inputs (report.json, tolerances) with bounded memory:
 * jansson's allocations while one text is parsed are counted, and a parse that would
 * hold more than GP_JSON_MEM_FACTOR times the text's size (plus GP_JSON_MEM_SLACK) is
 * refused as an input error instead of growing without limit. */
#ifndef GP_JSON_IN_H
#define GP_JSON_IN_H

#include <jansson.h>
#include <stddef.h>

#include "../base/gp_error.h"

#define GP_JSON_MEM_FACTOR 40                 /* bytes of parsed tree per byte of text */
#define GP_JSON_MEM_SLACK ((size_t)1 << 20)   /* plus this much for small files */

/* Parse len bytes of text (jansson flags, e.g. JSON_REJECT_DUPLICATES) within the memory
 * bound. `name` labels messages: "NAME:LINE:COLUMN: what" for a syntax error, "NAME:
 * too complex: parsing it needs more than N bytes of memory (...)" for the bound.
 * Returns a new reference or NULL with err set. Thread-safe (the count is per thread). */
json_t *gp_json_parse(const char *text, size_t len, size_t flags, const char *name, gp_error *err);

#endif
