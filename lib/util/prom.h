/* lib/util/prom: writer of the Prometheus text exposition format 0.0.4 into a growing buffer
 * (families with # HELP / # TYPE, samples with escaped label values). Formatting only: the
 * daemons decide which metrics exist (their counter tables). No I/O, no globals. */
#ifndef INCA_UTIL_PROM_H
#define INCA_UTIL_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Content-Type of the exposition (HTTP header value). */
#define UTIL_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

enum util_prom_type { UTIL_PROM_COUNTER, UTIL_PROM_GAUGE };

/* The text is buf[0..len) (NUL-terminated); the writer owns buf until util_prom_take. A
 * failed allocation sets oom and makes every later call a no-op. */
struct util_prom {
	char *buf;
	size_t len, cap;
	bool oom;
};

void util_prom_init(struct util_prom *p);
void util_prom_free(struct util_prom *p);
/* Hand the buffer to the caller (free() it); p is empty again. NULL after an oom. */
char *util_prom_take(struct util_prom *p, size_t *len);

/* Start a family: "# HELP name help" and "# TYPE name type". Every sample of the family must
 * follow before the next family starts (one family per name). A counter's name ends in
 * "_total" (the caller's job; the daemons build names from their tables). */
void util_prom_family(struct util_prom *p, const char *name, const char *help,
		      enum util_prom_type type);
/* One sample "name{k="v",...} value". labels: key, value, key, value, ..., NULL (or NULL for
 * none); values are escaped (backslash, double quote, newline), keys are used as given. */
void util_prom_sample(struct util_prom *p, const char *name, const char *const *labels,
		      uint64_t value);
void util_prom_sample_double(struct util_prom *p, const char *name, const char *const *labels,
			     double value);
/* printf into the buffer (for callers building names). */
void util_prom_printf(struct util_prom *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Whether s is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*). */
bool util_prom_name_ok(const char *s);

#endif
