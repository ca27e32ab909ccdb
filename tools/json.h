/* tools/json: a tiny JSON reader for the tools, benchmarks and integration tests (reading the
 * switch's stats file). Parses a whole document into an owned tree; no streaming, no writer.
 * Not for untrusted input of unbounded size: recursion depth is capped at 64. */
#ifndef INCA_TOOLS_JSON_H
#define INCA_TOOLS_JSON_H

#include <stddef.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ };

struct json {
	enum json_type type;
	double num;       /* JSON_NUM, JSON_BOOL (0/1) */
	char *str;        /* JSON_STR: owned, NUL-terminated (escapes decoded, \u kept as '?') */
	char *key;        /* member name when the parent is an object, else NULL */
	struct json *kid; /* first child (arrays, objects) */
	struct json *next;
	size_t nkids;
};

/* Parse text (NUL-terminated). Returns an owned tree or NULL (then *err_off, if given, is the
 * byte offset of the error). */
struct json *json_parse(const char *text, size_t *err_off);
void json_free(struct json *j);

/* Member `key` of an object, or NULL. */
const struct json *json_get(const struct json *obj, const char *key);
/* Walk a dotted path: "trees.0.counters.rx_pkts" (numbers index arrays and objects). */
const struct json *json_path(const struct json *root, const char *path);
/* The number, or dflt when j is NULL or not a number/bool. */
double json_num(const struct json *j, double dflt);
/* Sum over the whole tree of every member named key: numbers count as themselves, objects and
 * arrays as the sum of all numbers inside them. Useful for "drops" objects and per-tree counters. */
double json_sum_key(const struct json *root, const char *key);
/* Sum of all numbers anywhere inside j (j itself included). */
double json_sum_all(const struct json *j);

/* Read a whole file into a NUL-terminated malloc'd buffer; NULL on error (errno set). */
char *json_read_file(const char *path, size_t *len_out);

#endif
