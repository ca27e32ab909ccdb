/* lib/util/log_test: the logger's level filter, stderr line format (prefix, "error: " tag,
 * timestamp), callback forwarding and truncation of long messages. */
#include "util/log.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/test_check.h"

static char out[2048];
static int fd_saved = -1;
static FILE *cap;

static void cap_begin(void)
{
	fflush(stderr);
	cap = tmpfile();
	fd_saved = dup(2);
	dup2(fileno(cap), 2);
}

static void cap_end(void)
{
	size_t n;

	fflush(stderr);
	dup2(fd_saved, 2);
	close(fd_saved);
	rewind(cap);
	n = fread(out, 1, sizeof out - 1, cap);
	out[n] = 0;
	fclose(cap);
	cap = NULL;
}

static void cap_abort(void)
{
	if (cap) {
		fflush(stderr);
		dup2(fd_saved, 2);
	}
}

static int last_level = -1;
static char last_msg[2048];

static void sink(void *ctx, int level, const char *msg)
{
	*(int *)ctx += 1;
	last_level = level;
	snprintf(last_msg, sizeof last_msg, "%s", msg);
}

static int verbosity;
void test_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
UTIL_LOG_DEFINE(test_log, verbosity, "prog", UTIL_LOG_ERRTAG)

int main(void)
{
	struct util_log lg = { .prog = "inca-x", .level = UTIL_LOG_WARN };
	char big[1500];
	int calls = 0;
	double sec;
	char rest[64];

	test_on_failure(cap_abort);

	cap_begin();
	util_log(&lg, UTIL_LOG_ERROR, "bad %d", 7);
	util_log(&lg, UTIL_LOG_WARN, "careful");
	util_log(&lg, UTIL_LOG_INFO, "not shown");
	cap_end();
	CHECK(!strcmp(out, "inca-x: bad 7\ninca-x: careful\n"));

	lg.prog = NULL;
	lg.flags = UTIL_LOG_ERRTAG;
	cap_begin();
	util_log(&lg, UTIL_LOG_ERROR, "e");
	util_log(&lg, UTIL_LOG_WARN, "w");
	cap_end();
	CHECK(!strcmp(out, "error: e\nw\n"));

	lg.prog = "sw";
	lg.flags = UTIL_LOG_TIME;
	cap_begin();
	util_log(&lg, UTIL_LOG_ERROR, "t");
	cap_end();
	CHECK(sscanf(out, "%lf %63[^\n]", &sec, rest) == 2 && sec > 1e9);
	CHECK(!strcmp(rest, "sw: t"));
	CHECK(strchr(out, '.') != NULL && strchr(out, '.')[7] == ' ');

	/* The callback gets the bare text and nothing goes to stderr. */
	lg.fn = sink;
	lg.ctx = &calls;
	cap_begin();
	util_log(&lg, UTIL_LOG_WARN, "to %s", "callback");
	util_log(&lg, UTIL_LOG_DEBUG, "filtered");
	cap_end();
	CHECK_EQ(calls, 1);
	CHECK_EQ(last_level, UTIL_LOG_WARN);
	CHECK(!strcmp(last_msg, "to callback"));
	CHECK_EQ(out[0], 0);

	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = 0;
	util_log(&lg, UTIL_LOG_ERROR, "%s", big);
	CHECK_EQ(strlen(last_msg), UTIL_LOG_MSG_MAX);

	/* A defined logger reads its verbosity variable at each call. */
	cap_begin();
	test_log(UTIL_LOG_INFO, "quiet");
	verbosity = UTIL_LOG_INFO;
	test_log(UTIL_LOG_INFO, "loud");
	test_log(UTIL_LOG_ERROR, "boom");
	cap_end();
	CHECK(!strcmp(out, "prog: loud\nprog: error: boom\n"));

	printf("log_test: ok\n");
	return 0;
}
