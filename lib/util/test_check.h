/* lib/util/test_check.h: the checks of the C unit tests (header only; tests include it,
 * production code never does).
 *
 * One semantics: a failed check runs the cleanup hook set with test_on_failure (a test that
 * started processes, made files or redirected stderr undoes it there), prints "FILE:LINE: "
 * with the expression and, for the comparisons, both values, and exits with status 1.
 * The first failure ends the test, so its exit status never disagrees with its output and a
 * later check cannot crash on the state an earlier failure left behind. */
#ifndef INCA_UTIL_TEST_CHECK_H
#define INCA_UTIL_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void (*test_failure_hook)(void);

/* fn runs once when a check fails, before the message is printed. */
static inline void test_on_failure(void (*fn)(void))
{
	test_failure_hook = fn;
}

__attribute__((noreturn)) static inline void test_vfail(const char *file, int line,
							const char *what, const char *fmt,
							va_list ap)
{
	void (*hook)(void) = test_failure_hook;

	test_failure_hook = NULL;
	if (hook)
		hook();
	fprintf(stderr, "%s:%d: %s", file, line, what);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	exit(1);
}

/* Ends a failed test: prints "FILE:LINE: " and the message, runs the hook, exits 1. */
__attribute__((noreturn, format(printf, 3, 4))) static inline void
test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	test_vfail(file, line, "", fmt, ap);
}

/* The same after "CHECK failed: COND: " (CHECK_MSG). */
__attribute__((noreturn, format(printf, 4, 5))) static inline void
test_fail_msg(const char *file, int line, const char *cond, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	snprintf(what, sizeof what, "CHECK failed: %s: ", cond);
	va_start(ap, fmt);
	test_vfail(file, line, what, fmt, ap);
}

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond))                                                               \
			test_fail(__FILE__, __LINE__, "CHECK failed: %s", #cond);          \
	} while (0)

/* CHECK plus a printf-style explanation of what was being checked. */
#define CHECK_MSG(cond, ...)                                                               \
	do {                                                                               \
		if (!(cond))                                                               \
			test_fail_msg(__FILE__, __LINE__, #cond, __VA_ARGS__);             \
	} while (0)

/* Integers of any width and signedness, compared as 64-bit patterns. */
#define CHECK_EQ(a, b)                                                                     \
	do {                                                                               \
		long long a_ = (long long)(a), b_ = (long long)(b);                        \
		if (a_ != b_)                                                              \
			test_fail(__FILE__, __LINE__,                                      \
				  "CHECK_EQ failed: %s == %s: %lld (0x%llx) != %lld (0x%llx)", \
				  #a, #b, a_, (unsigned long long)a_, b_,                 \
				  (unsigned long long)b_);                                 \
	} while (0)

/* a within a relative tolerance of b: b*(1-rel) <= a <= b*(1+rel). */
#define CHECK_NEAR(a, b, rel)                                                              \
	do {                                                                               \
		double a_ = (a), b_ = (b), r_ = (rel);                                     \
		if (!(a_ >= b_ * (1 - r_) && a_ <= b_ * (1 + r_)))                         \
			test_fail(__FILE__, __LINE__,                                      \
				  "CHECK_NEAR failed: %s ~ %s: %.6f vs %.6f (rel %.4f)", #a, #b, \
				  a_, b_, r_);                                             \
	} while (0)

#endif
