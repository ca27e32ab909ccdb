/* lib/util/prom: the Prometheus text exposition writer (prom.h). Escaping follows the 0.0.4
 * format: HELP text escapes backslash and newline, label values also the double quote. */
#include "prom.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void util_prom_init(struct util_prom *p)
{
	memset(p, 0, sizeof *p);
}

void util_prom_free(struct util_prom *p)
{
	free(p->buf);
	memset(p, 0, sizeof *p);
}

char *util_prom_take(struct util_prom *p, size_t *len)
{
	char *b = p->oom ? NULL : p->buf;

	if (p->oom)
		free(p->buf);
	if (len)
		*len = b ? p->len : 0;
	memset(p, 0, sizeof *p);
	return b;
}

static bool reserve(struct util_prom *p, size_t more)
{
	size_t nc;
	char *nb;

	if (p->oom)
		return false;
	if (p->len + more + 1 <= p->cap)
		return true;
	nc = p->cap ? p->cap : 4096;
	while (nc < p->len + more + 1)
		nc *= 2;
	nb = realloc(p->buf, nc);
	if (!nb) {
		p->oom = true;
		return false;
	}
	p->buf = nb;
	p->cap = nc;
	return true;
}

static void put(struct util_prom *p, const char *s, size_t n)
{
	if (!reserve(p, n))
		return;
	memcpy(p->buf + p->len, s, n);
	p->len += n;
	p->buf[p->len] = 0;
}

static void puts_(struct util_prom *p, const char *s)
{
	put(p, s, strlen(s));
}

void util_prom_printf(struct util_prom *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !reserve(p, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(p->buf + p->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	p->len += (size_t)n;
}

/* quote: also escape '"' (label values; HELP text leaves it). */
static void escaped(struct util_prom *p, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			puts_(p, "\\\\");
		else if (*s == '\n')
			puts_(p, "\\n");
		else if (*s == '"' && quote)
			puts_(p, "\\\"");
		else
			put(p, s, 1);
	}
}

void util_prom_family(struct util_prom *p, const char *name, const char *help,
		      enum util_prom_type type)
{
	puts_(p, "# HELP ");
	puts_(p, name);
	puts_(p, " ");
	escaped(p, help, false);
	puts_(p, "\n# TYPE ");
	puts_(p, name);
	puts_(p, type == UTIL_PROM_COUNTER ? " counter\n" : " gauge\n");
}

static void series(struct util_prom *p, const char *name, const char *const *labels)
{
	puts_(p, name);
	if (!labels || !labels[0])
		return;
	puts_(p, "{");
	for (size_t i = 0; labels[i] && labels[i + 1]; i += 2) {
		if (i)
			puts_(p, ",");
		puts_(p, labels[i]);
		puts_(p, "=\"");
		escaped(p, labels[i + 1], true);
		puts_(p, "\"");
	}
	puts_(p, "}");
}

void util_prom_sample(struct util_prom *p, const char *name, const char *const *labels,
		      uint64_t value)
{
	series(p, name, labels);
	util_prom_printf(p, " %llu\n", (unsigned long long)value);
}

void util_prom_sample_double(struct util_prom *p, const char *name, const char *const *labels,
			     double value)
{
	series(p, name, labels);
	util_prom_printf(p, " %.17g\n", value);
}

bool util_prom_name_ok(const char *s)
{
	if (!*s)
		return false;
	for (const char *c = s; *c; c++) {
		bool alpha = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' ||
			     *c == ':';
		if (!alpha && (c == s || *c < '0' || *c > '9'))
			return false;
	}
	return true;
}
