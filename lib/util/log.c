/* lib/util/log implementation: formatting and the three sinks (stderr, syslog, callback). */
#include "util/log.h"

#include <stdio.h>
#include <syslog.h>
#include <time.h>

void util_vlog(const struct util_log *lg, int level, const char *fmt, va_list ap)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char msg[UTIL_LOG_MSG_MAX + 1];
	char stamp[40] = "";
	struct timespec ts;

	if (level > lg->level)
		return;
	vsnprintf(msg, sizeof msg, fmt, ap);
	if (lg->fn) {
		lg->fn(lg->ctx, level, msg);
		return;
	}
	if (lg->flags & UTIL_LOG_SYSLOG) {
		syslog(level >= 0 && level <= UTIL_LOG_DEBUG ? prio[level] : LOG_DEBUG, "%s", msg);
		return;
	}
	if (lg->flags & UTIL_LOG_TIME) {
		clock_gettime(CLOCK_REALTIME, &ts);
		snprintf(stamp, sizeof stamp, "%lld.%06ld ", (long long)ts.tv_sec,
			 ts.tv_nsec / 1000);
	}
	fprintf(stderr, "%s%s%s%s%s\n", stamp, lg->prog ? lg->prog : "", lg->prog ? ": " : "",
		level == UTIL_LOG_ERROR && (lg->flags & UTIL_LOG_ERRTAG) ? "error: " : "", msg);
}

void util_log(const struct util_log *lg, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	util_vlog(lg, level, fmt, ap);
	va_end(ap);
}
