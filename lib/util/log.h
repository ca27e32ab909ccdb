/* lib/util/log: the one logger of the programs and daemons. A `struct util_log` says where
 * messages go (stderr with an optional timestamp and program prefix, syslog, or a caller's
 * callback of inca_log_fn's shape) and up to which level; util_log() formats one line.
 * Not used to print by libinca itself: the library only forwards to the callback its caller
 * supplied (inca_comm_opts.log_fn). */
#ifndef INCA_UTIL_LOG_H
#define INCA_UTIL_LOG_H

#include <stdarg.h>

/* Levels: a message goes out when its level is at or below the logger's. */
enum util_log_level {
	UTIL_LOG_ERROR = 0,
	UTIL_LOG_WARN = 1,
	UTIL_LOG_INFO = 2,
	UTIL_LOG_DEBUG = 3,
};

/* Flags of a stderr logger. */
#define UTIL_LOG_TIME 1u   /* "SECONDS.MICROS " (CLOCK_REALTIME) before each line */
#define UTIL_LOG_ERRTAG 2u /* "error: " before the text of level-0 messages */
#define UTIL_LOG_SYSLOG 4u /* syslog(3) instead of stderr (the caller calls openlog) */

/* Same shape as inca_log_fn: the text without prefix or newline. */
typedef void (*util_log_fn)(void *ctx, int level, const char *msg);

struct util_log {
	const char *prog; /* "PROG: " before each stderr line; NULL: no prefix */
	int level;        /* messages at or below this level go out */
	unsigned flags;   /* UTIL_LOG_* */
	util_log_fn fn;   /* set: messages go only here (prog and flags unused) */
	void *ctx;        /* passed to fn */
};

/* Longest message text; longer ones are cut. */
#define UTIL_LOG_MSG_MAX 1023

/* Format one message and send it to lg's sink if level <= lg->level. A stderr line is
 * written with one call, so lines from several threads do not interleave. Thread-safe as
 * long as nobody changes *lg meanwhile; no allocation. */
void util_log(const struct util_log *lg, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void util_vlog(const struct util_log *lg, int level, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* Defines `void NAME(int level, const char *fmt, ...)`, a logger to stderr (or syslog) whose
 * threshold is the int variable VERBOSITY, read at each call: a daemon's global logger in one
 * line, e.g. UTIL_LOG_DEFINE(am_log, am_verbosity, "inca-am", 0). */
#define UTIL_LOG_DEFINE(NAME, VERBOSITY, PROG, FLAGS)                                       \
	void NAME(int level, const char *fmt, ...)                                           \
	{                                                                                    \
		const struct util_log lg_ = { .prog = (PROG), .level = (VERBOSITY),          \
					      .flags = (FLAGS) };                            \
		va_list ap_;                                                                 \
		va_start(ap_, fmt);                                                          \
		util_vlog(&lg_, level, fmt, ap_);                                            \
		va_end(ap_);                                                                 \
	}

#endif
