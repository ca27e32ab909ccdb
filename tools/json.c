/* tools/json: recursive-descent JSON parser into a small owned tree, plus lookups by key, by
 * dotted path, and recursive sums (the stats file's counters are what the tools read). */
#include "json.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

struct parser {
	const char *s;
	size_t pos;
	int failed;
};

static void skip_ws(struct parser *p)
{
	while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
	       p->s[p->pos] == '\r')
		p->pos++;
}

static struct json *new_node(enum json_type t)
{
	struct json *j = calloc(1, sizeof(*j));
	if (j)
		j->type = t;
	return j;
}

static char *parse_string_raw(struct parser *p)
{
	if (p->s[p->pos] != '"')
		return NULL;
	p->pos++;
	size_t cap = 16, n = 0;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	for (;;) {
		char c = p->s[p->pos];
		if (c == '\0') {
			free(out);
			return NULL;
		}
		p->pos++;
		if (c == '"')
			break;
		if (c == '\\') {
			char e = p->s[p->pos];
			if (e) /* a backslash at the very end: the error offset stays in the text */
				p->pos++;
			switch (e) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case '/': c = '/'; break;
			case '\\': c = '\\'; break;
			case '"': c = '"'; break;
			case 'u':
				for (int i = 0; i < 4; i++) {
					if (!isxdigit((unsigned char)p->s[p->pos])) {
						free(out);
						return NULL;
					}
					p->pos++;
				}
				c = '?'; /* the stats file is ASCII; keep it simple */
				break;
			default:
				free(out);
				return NULL;
			}
		}
		if (n + 2 > cap) {
			cap *= 2;
			char *o2 = realloc(out, cap);
			if (!o2) {
				free(out);
				return NULL;
			}
			out = o2;
		}
		out[n++] = c;
	}
	out[n] = '\0';
	return out;
}

static struct json *parse_value(struct parser *p, int depth);

static struct json *parse_container(struct parser *p, int depth, int is_obj)
{
	struct json *j = new_node(is_obj ? JSON_OBJ : JSON_ARR);
	if (!j)
		return NULL;
	char close = is_obj ? '}' : ']';
	p->pos++; /* '{' or '[' */
	skip_ws(p);
	if (p->s[p->pos] == close) {
		p->pos++;
		return j;
	}
	struct json **tail = &j->kid;
	for (;;) {
		char *key = NULL;
		skip_ws(p);
		if (is_obj) {
			key = parse_string_raw(p);
			if (!key)
				goto fail;
			skip_ws(p);
			if (p->s[p->pos] != ':') {
				free(key);
				goto fail;
			}
			p->pos++;
		}
		struct json *v = parse_value(p, depth + 1);
		if (!v) {
			free(key);
			goto fail;
		}
		v->key = key;
		*tail = v;
		tail = &v->next;
		j->nkids++;
		skip_ws(p);
		if (p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->s[p->pos] == close) {
			p->pos++;
			return j;
		}
		goto fail;
	}
fail:
	json_free(j);
	return NULL;
}

static struct json *parse_value(struct parser *p, int depth)
{
	if (depth > JSON_MAX_DEPTH)
		return NULL;
	skip_ws(p);
	const char *s = p->s + p->pos;
	if (*s == '{' || *s == '[')
		return parse_container(p, depth, *s == '{');
	if (*s == '"') {
		char *str = parse_string_raw(p);
		if (!str)
			return NULL;
		struct json *j = new_node(JSON_STR);
		if (!j) {
			free(str);
			return NULL;
		}
		j->str = str;
		return j;
	}
	if (!strncmp(s, "true", 4) || !strncmp(s, "false", 5)) {
		struct json *j = new_node(JSON_BOOL);
		if (!j)
			return NULL;
		j->num = *s == 't';
		p->pos += *s == 't' ? 4 : 5;
		return j;
	}
	if (!strncmp(s, "null", 4)) {
		p->pos += 4;
		return new_node(JSON_NULL);
	}
	if (*s == '-' || isdigit((unsigned char)*s)) {
		char *end;
		double v = strtod(s, &end);
		if (end == s)
			return NULL;
		struct json *j = new_node(JSON_NUM);
		if (!j)
			return NULL;
		j->num = v;
		p->pos += (size_t)(end - s);
		return j;
	}
	return NULL;
}

struct json *json_parse(const char *text, size_t *err_off)
{
	struct parser p = { .s = text };
	struct json *j = parse_value(&p, 0);
	if (j) {
		skip_ws(&p);
		if (p.s[p.pos] != '\0') {
			json_free(j);
			j = NULL;
		}
	}
	if (!j && err_off)
		*err_off = p.pos;
	return j;
}

void json_free(struct json *j)
{
	while (j) {
		struct json *next = j->next;
		json_free(j->kid);
		free(j->str);
		free(j->key);
		free(j);
		j = next;
	}
}

const struct json *json_get(const struct json *obj, const char *key)
{
	if (!obj || obj->type != JSON_OBJ)
		return NULL;
	for (const struct json *k = obj->kid; k; k = k->next)
		if (k->key && !strcmp(k->key, key))
			return k;
	return NULL;
}

const struct json *json_path(const struct json *root, const char *path)
{
	const struct json *cur = root;
	char part[128];
	while (cur && *path) {
		size_t n = strcspn(path, ".");
		if (n >= sizeof(part))
			return NULL;
		memcpy(part, path, n);
		part[n] = '\0';
		path += n;
		if (*path == '.')
			path++;
		const struct json *found = NULL;
		if (cur->type == JSON_OBJ)
			found = json_get(cur, part);
		if (!found && (cur->type == JSON_ARR || cur->type == JSON_OBJ) &&
		    isdigit((unsigned char)part[0])) {
			size_t idx = strtoul(part, NULL, 10);
			const struct json *k = cur->kid;
			for (size_t i = 0; k && i < idx; i++)
				k = k->next;
			found = k;
		}
		cur = found;
	}
	return cur;
}

double json_num(const struct json *j, double dflt)
{
	if (!j || (j->type != JSON_NUM && j->type != JSON_BOOL))
		return dflt;
	return j->num;
}

double json_sum_all(const struct json *j)
{
	if (!j)
		return 0;
	if (j->type == JSON_NUM)
		return j->num;
	double s = 0;
	for (const struct json *k = j->kid; k; k = k->next)
		s += json_sum_all(k);
	return s;
}

double json_sum_key(const struct json *root, const char *key)
{
	if (!root)
		return 0;
	double s = 0;
	for (const struct json *k = root->kid; k; k = k->next) {
		if (k->key && !strcmp(k->key, key))
			s += json_sum_all(k);
		else
			s += json_sum_key(k, key);
	}
	return s;
}

char *json_read_file(const char *path, size_t *len_out)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		if (n + 1 >= cap) {
			cap *= 2;
			char *b2 = realloc(buf, cap);
			if (!b2) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = b2;
		}
		size_t got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
	}
	int err = ferror(f);
	fclose(f);
	if (!buf)
		return NULL;
	if (err) {
		free(buf);
		errno = EIO;
		return NULL;
	}
	buf[n] = '\0';
	if (len_out)
		*len_out = n;
	return buf;
}
