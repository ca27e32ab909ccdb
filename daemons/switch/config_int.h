/* inca-switch configuration parser internals shared by config.c (init, globals, limits, dump),
 * config_parse.c (value parsers, the file form, the flags-only --tree form) and config_tree.c
 * (the keys of a tree block, mapped onto the tree model). Not an API. */
#ifndef INCA_SW_CONFIG_INT_H
#define INCA_SW_CONFIG_INT_H

#include "config.h"

#define LINE_MAX_BYTES 4096
#define FILE_MAX_BYTES (16u << 20)

/* Parse state of one source (a file, a text buffer or one --tree flag). */
struct pctx {
	struct sw_config *c;
	const char *name;
	int line; /* 0: no line numbers (flags) */
	char *err;
	size_t cap;
};

/* "name:line: message" into p->err; returns -EINVAL. */
int swc_fail(struct pctx *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* config_parse.c: values (each failure reported through swc_fail). */
char *swc_trim(char *s);
int swc_parse_uint(const char *s, uint64_t max, uint64_t *out);
int swc_parse_bool(const char *s, bool *out);
int swc_num(struct pctx *p, const char *key, const char *v, uint64_t min, uint64_t max,
	    uint64_t *out);
int swc_addr(struct pctx *p, const char *what, const char *v, struct sockaddr_in *out);
size_t swc_tokenize(char *s, char **tok, size_t max);
int swc_parse_bfr_list(struct pctx *p, const char *v, uint16_t **out, size_t *nout);

/* config_tree.c: open a tree block, set one key of it, close it (the model's rules). */
int swc_new_tree(struct pctx *p, uint64_t id, struct ctl_tree **out);
int swc_tree_set(struct pctx *p, struct ctl_tree *t, const char *key, char *v);
int swc_finish_tree(struct pctx *p, struct ctl_tree *t);

/* config.c: one global key; seen: bit per key already given in this source. */
int swc_global_set(struct pctx *p, const char *key, const char *v, uint32_t *seen);

#endif
