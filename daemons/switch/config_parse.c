/* inca-switch configuration parser: value parsers, the line-oriented config file and the
 * flags-only --tree spec (translated into the same per-key setters, so both forms accept the
 * same values). Every error names its source and line. */
#include "config_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "wire/auth.h"

int swc_fail(struct pctx *p, int line, const char *fmt, ...)
{
	char msg[SW_CONF_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (p->err && p->cap) {
		if (line > 0)
			snprintf(p->err, p->cap, "%s:%d: %s", p->name, line, msg);
		else
			snprintf(p->err, p->cap, "%s: %s", p->name, msg);
	}
	return -EINVAL;
}

/* ------------------------------------------------------------------ value parsers */

char *swc_trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

/* Unsigned integer, decimal or 0x-hex (a leading 0 is NOT octal: "010" is ten). */
int swc_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	int base = 10, ndig = 0;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	for (; *s; s++, ndig++) {
		int d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			return -EINVAL;
		if (v > (max - (uint64_t)d) / (uint64_t)base)
			return -ERANGE;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	if (ndig == 0)
		return -EINVAL;
	*out = v;
	return 0;
}

int swc_parse_bool(const char *s, bool *out)
{
	if (!strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "on") || !strcmp(s, "1"))
		*out = true;
	else if (!strcmp(s, "no") || !strcmp(s, "false") || !strcmp(s, "off") || !strcmp(s, "0"))
		*out = false;
	else
		return -EINVAL;
	return 0;
}

int swc_num(struct pctx *p, const char *key, const char *v, uint64_t min, uint64_t max,
	       uint64_t *out)
{
	int rc = swc_parse_uint(v, max, out);

	if (rc == -EINVAL)
		return swc_fail(p, p->line, "bad value '%s' for '%s' (expected a number)", v, key);
	if (rc < 0 || *out < min)
		return swc_fail(p, p->line, "value '%s' for '%s' out of range %llu..%llu", v, key,
			    (unsigned long long)min, (unsigned long long)max);
	return 0;
}

int swc_addr(struct pctx *p, const char *what, const char *v, struct sockaddr_in *out)
{
	if (util_parse_addr(v, SW_PORT_DEFAULT, out) < 0)
		return swc_fail(p, p->line, "bad address '%s' for '%s' (expected a.b.c.d[:port])", v,
			    what);
	return 0;
}

/* Split s in place into at most max whitespace-separated tokens. */
size_t swc_tokenize(char *s, char **tok, size_t max)
{
	size_t n = 0;
	char *save = NULL;

	for (char *t = strtok_r(s, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		if (n == max)
			return max + 1;
		tok[n++] = t;
	}
	return n;
}

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* "3-4,7" -> sorted unique BFR-ids (owned). */
int swc_parse_bfr_list(struct pctx *p, const char *v, uint16_t **out, size_t *nout)
{
	char buf[LINE_MAX_BYTES];
	char *save = NULL;
	uint16_t *ids = NULL;
	size_t n = 0;

	if (strlen(v) >= sizeof buf)
		return swc_fail(p, p->line, "BFR-id list too long");
	strcpy(buf, v);
	for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(it, '-');
		uint64_t lo, hi;
		uint16_t *nids;

		if (dash)
			*dash = 0;
		if (swc_parse_uint(swc_trim(it), 65535, &lo) < 0 || lo == 0)
			goto bad;
		hi = lo;
		if (dash && (swc_parse_uint(swc_trim(dash + 1), 65535, &hi) < 0 || hi < lo))
			goto bad;
		if (n + (hi - lo + 1) > 65535)
			goto bad;
		nids = realloc(ids, (n + (hi - lo + 1)) * sizeof *ids);
		if (!nids) {
			free(ids);
			return swc_fail(p, p->line, "out of memory");
		}
		ids = nids;
		for (uint64_t k = lo; k <= hi; k++)
			ids[n++] = (uint16_t)k;
	}
	if (n == 0)
		goto bad;
	qsort(ids, n, sizeof *ids, cmp_u16);
	for (size_t i = 1; i < n; i++)
		if (ids[i] == ids[i - 1]) {
			unsigned dup = ids[i];
			free(ids);
			return swc_fail(p, p->line, "BFR-id %u listed twice in '%s'", dup, v);
		}
	*out = ids;
	*nout = n;
	return 0;
bad:
	free(ids);
	return swc_fail(p, p->line, "bad BFR-id list '%s' (expected e.g. 3-4,7 with ids 1..65535)", v);
}

/* ------------------------------------------------------------------ file form */

/* One logical line (comment stripped, trimmed, non-empty). */
static int parse_line(struct pctx *p, char *s, struct ctl_tree **cur, uint32_t *gseen)
{
	char *eq;

	if (!strcmp(s, "}")) {
		struct ctl_tree *t = *cur;
		if (!t)
			return swc_fail(p, p->line, "'}' without an open tree block");
		*cur = NULL;
		return swc_finish_tree(p, t);
	}
	if (!strncmp(s, "tree", 4) && (s[4] == 0 || isspace((unsigned char)s[4]))) {
		char *rest = swc_trim(s + 4);
		size_t n = strlen(rest);
		uint64_t id;

		if (*cur)
			return swc_fail(p, p->line, "tree inside tree %u (missing '}'?)", (*cur)->id);
		if (n < 2 || rest[n - 1] != '{')
			return swc_fail(p, p->line, "expected 'tree <id> {'");
		rest[n - 1] = 0;
		rest = swc_trim(rest);
		if (swc_num(p, "tree id", rest, 0, 65535, &id) < 0)
			return -EINVAL;
		return swc_new_tree(p, id, cur);
	}
	eq = strchr(s, '=');
	if (!eq)
		return swc_fail(p, p->line, "expected 'key = value', got '%s'", s);
	*eq = 0;
	{
		char *key = swc_trim(s), *v = swc_trim(eq + 1);
		if (!*key)
			return swc_fail(p, p->line, "missing key before '='");
		if (!*v)
			return swc_fail(p, p->line, "missing value for '%s'", key);
		if (*cur)
			return swc_tree_set(p, *cur, key, v);
		return swc_global_set(p, key, v, gseen);
	}
}

int sw_config_parse_text(struct sw_config *c, const char *text, size_t len, const char *name,
			 char *err, size_t cap)
{
	struct pctx p = { .c = c, .name = name ? name : "config", .err = err, .cap = cap };
	struct ctl_tree *cur = NULL;
	uint32_t gseen = 0;
	size_t pos = 0;
	char line[LINE_MAX_BYTES];

	while (pos < len) {
		size_t end = pos, n;
		char *s, *hash;
		int rc;

		while (end < len && text[end] != '\n')
			end++;
		p.line++;
		n = end - pos;
		if (n >= sizeof line)
			return swc_fail(&p, p.line, "line too long (max %d bytes)", LINE_MAX_BYTES - 1);
		memcpy(line, text + pos, n);
		line[n] = 0;
		pos = end + 1;
		if (strlen(line) != n)
			return swc_fail(&p, p.line, "NUL byte in line");
		hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		s = swc_trim(line);
		if (!*s)
			continue;
		/* cur points into c->trees; new_tree (which may move it) only runs when cur is
		 * NULL, so cur stays valid. */
		rc = parse_line(&p, s, &cur, &gseen);
		if (rc < 0)
			return rc;
	}
	if (cur)
		return swc_fail(&p, cur->line, "tree %u: missing '}' at end of file", cur->id);
	return 0;
}

int sw_config_parse_file(struct sw_config *c, const char *path, char *err, size_t cap)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n = 0;
	int rc;

	if (!f) {
		rc = -errno;
		snprintf(err, cap, "%s: cannot open: %s", path, strerror(errno));
		return rc;
	}
	buf = malloc(FILE_MAX_BYTES);
	if (!buf) {
		fclose(f);
		snprintf(err, cap, "%s: out of memory", path);
		return -ENOMEM;
	}
	n = fread(buf, 1, FILE_MAX_BYTES, f);
	if (ferror(f) || n == FILE_MAX_BYTES) {
		snprintf(err, cap, "%s: %s", path, ferror(f) ? "read error" : "file too large");
		fclose(f);
		free(buf);
		return -EINVAL;
	}
	fclose(f);
	rc = sw_config_parse_text(c, buf, n, path, err, cap);
	free(buf);
	return rc;
}

/* ------------------------------------------------------------------ flags-only form */

/* Translate one spec item into the file syntax in out (see docs/switch.md):
 *   member=K@ADDR[/QPN]          -> "K ADDR [qpn QPN]"
 *   child=ADDR[/QPN]/L1+L2...    -> "ADDR [qpn QPN] bfr L1,L2"
 *   parent=ADDR[/QPN]            -> "ADDR [qpn QPN]" */
static int spec_member(const char *v, char *out, size_t cap)
{
	const char *at = strchr(v, '@');
	const char *sl;
	int n;

	if (!at || at == v)
		return -EINVAL;
	sl = strchr(at, '/');
	if (sl)
		n = snprintf(out, cap, "%.*s %.*s qpn %s", (int)(at - v), v, (int)(sl - at - 1),
			     at + 1, sl + 1);
	else
		n = snprintf(out, cap, "%.*s %s", (int)(at - v), v, at + 1);
	return n < 0 || (size_t)n >= cap ? -EINVAL : 0;
}

static int spec_child(const char *v, char *out, size_t cap)
{
	const char *s1 = strchr(v, '/'), *s2;
	char list[LINE_MAX_BYTES];
	int n;

	if (!s1)
		return -EINVAL;
	s2 = strchr(s1 + 1, '/');
	n = snprintf(list, sizeof list, "%s", s2 ? s2 + 1 : s1 + 1);
	if (n < 0 || (size_t)n >= sizeof list)
		return -EINVAL;
	for (char *q = list; *q; q++)
		if (*q == '+')
			*q = ',';
	if (s2)
		n = snprintf(out, cap, "%.*s qpn %.*s bfr %s", (int)(s1 - v), v,
			     (int)(s2 - s1 - 1), s1 + 1, list);
	else
		n = snprintf(out, cap, "%.*s bfr %s", (int)(s1 - v), v, list);
	return n < 0 || (size_t)n >= cap ? -EINVAL : 0;
}

static int add_tree_spec(struct pctx *p, const char *spec)
{
	char buf[LINE_MAX_BYTES], conv[LINE_MAX_BYTES];
	char *save = NULL, *item;
	struct ctl_tree *t = NULL;
	uint64_t id;
	bool have_id = false;

	if (strlen(spec) >= sizeof buf)
		return swc_fail(p, 0, "spec too long");
	/* First pass: the id, needed before anything else (defaults depend on it). */
	strcpy(buf, spec);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		if (eq && !strncmp(item, "id", (size_t)(eq - item)) && eq - item == 2) {
			if (have_id)
				return swc_fail(p, 0, "duplicate key 'id'");
			if (swc_num(p, "id", swc_trim(eq + 1), 0, 65535, &id) < 0)
				return -EINVAL;
			have_id = true;
		}
	}
	if (!have_id)
		return swc_fail(p, 0, "missing id=N in '%s'", spec);
	if (swc_new_tree(p, id, &t) < 0)
		return -EINVAL;
	strcpy(buf, spec);
	save = NULL;
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		char *key, *v;
		int rc;

		if (!eq)
			return swc_fail(p, 0, "expected key=value, got '%s'", item);
		*eq = 0;
		key = swc_trim(item);
		v = swc_trim(eq + 1);
		if (!*v)
			return swc_fail(p, 0, "missing value for '%s'", key);
		if (!strcmp(key, "id"))
			continue;
		if (!strcmp(key, "members") || !strcmp(key, "member")) {
			char *s2 = NULL;
			for (char *m = strtok_r(v, "+", &s2); m; m = strtok_r(NULL, "+", &s2)) {
				if (spec_member(m, conv, sizeof conv) < 0)
					return swc_fail(p, 0, "bad member '%s' (expected BFR@ADDR[/QPN])",
						    m);
				if (swc_tree_set(p, t, "member", conv) < 0)
					return -EINVAL;
			}
			continue;
		}
		if (!strcmp(key, "child")) {
			if (spec_child(v, conv, sizeof conv) < 0)
				return swc_fail(p, 0, "bad child '%s' (expected ADDR[/QPN]/LIST)", v);
			rc = swc_tree_set(p, t, "child", conv);
		} else if (!strcmp(key, "parent")) {
			char *sl = strchr(v, '/');
			int n;
			if (sl) {
				*sl = 0;
				n = snprintf(conv, sizeof conv, "%s qpn %s", v, sl + 1);
			} else {
				n = snprintf(conv, sizeof conv, "%s", v);
			}
			if (n < 0 || (size_t)n >= sizeof conv)
				return swc_fail(p, 0, "parent too long");
			rc = swc_tree_set(p, t, "parent", conv);
		} else {
			rc = swc_tree_set(p, t, key, v);
		}
		if (rc < 0)
			return rc;
	}
	return swc_finish_tree(p, t);
}

int sw_config_add_tree_spec(struct sw_config *c, const char *spec, char *err, size_t cap)
{
	struct pctx p = { .c = c, .name = "--tree", .err = err, .cap = cap };
	size_t before = c->ntrees;
	int rc = add_tree_spec(&p, spec);

	/* A rejected flag leaves the configuration as it was (no half-built tree). */
	if (rc < 0 && c->ntrees > before)
		ctl_tree_free(&c->trees[--c->ntrees]);
	return rc;
}

