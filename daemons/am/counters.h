/* inca-am counter table (counters.c): the GetStats counters, each described once, from which
 * the GetStats reply (query.c) and the Prometheus exposition (metrics.c) are written.
 * Main loop thread only. */
#ifndef INCA_AM_COUNTERS_H
#define INCA_AM_COUNTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "am.h"

struct am_ctr {
	const char *name; /* StatsReply field; Prometheus inca_am_NAME[_total] */
	const char *help; /* Prometheus HELP text */
	bool gauge;       /* else a counter */
	size_t off;       /* offset of a uint64_t in struct am_stats, unless get */
	uint64_t (*get)(const struct am *am);
	bool prom_skip;   /* exported in another unit by metrics.c (uptime in seconds) */
};

extern const struct am_ctr am_ctrs[];
extern const size_t am_nctrs;
uint64_t am_ctr_value(const struct am_ctr *c, const struct am *am);

/* Fill every table counter of rp (uptime_ms, active_groups and each am_stats field). */
void am_stats_fill_reply(const struct am *am, Inca__Am__V1__StatsReply *rp);

#endif
