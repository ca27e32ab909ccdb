/* lib/util/cli: option-value parsers for the programs' command lines (see cli.h). They print
 * their own diagnostics, so only programs link them, never libinca. The version string is in
 * version.c (it needs the generated header; this file does not, so harnesses can compile it
 * alone). */
#include "util/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int util_cli_error(const char *prog, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (%s --help lists the options)\n", prog);
	return -EINVAL;
}

static int bad(const char *prog, const char *opt, const char *val, const char *why)
{
	return util_cli_error(prog, "%s '%s': %s", opt, val, why);
}

/* strtoll and friends skip blanks and accept "" as 0 in some spellings: insist on a digit
 * (after an optional sign) and on nothing after the number. */
static bool starts_numeric(const char *s, bool sign_ok)
{
	if (sign_ok && (*s == '-' || *s == '+'))
		s++;
	return (*s >= '0' && *s <= '9') || (*s == '.' && s[1] >= '0' && s[1] <= '9');
}

int util_cli_int(const char *prog, const char *opt, const char *val, long long min,
		 long long max, long long *out)
{
	char *end, why[96];
	long long v;

	if (!starts_numeric(val, true))
		return bad(prog, opt, val, "not an integer");
	errno = 0;
	v = strtoll(val, &end, 0);
	if (*end)
		return bad(prog, opt, val, "not an integer");
	if (errno || v < min || v > max) {
		snprintf(why, sizeof why, "out of range (%lld..%lld)", min, max);
		return bad(prog, opt, val, why);
	}
	*out = v;
	return 0;
}

int util_cli_u64(const char *prog, const char *opt, const char *val, uint64_t min, uint64_t max,
		 uint64_t *out)
{
	char *end, why[96];
	unsigned long long v;

	if (!starts_numeric(val, false))
		return bad(prog, opt, val, "not a non-negative integer");
	errno = 0;
	v = strtoull(val, &end, 0);
	if (*end)
		return bad(prog, opt, val, "not a non-negative integer");
	if (errno || v < min || v > max) {
		snprintf(why, sizeof why, "out of range (%llu..%llu)", (unsigned long long)min,
			 (unsigned long long)max);
		return bad(prog, opt, val, why);
	}
	*out = v;
	return 0;
}

int util_cli_double(const char *prog, const char *opt, const char *val, double min, double max,
		    bool max_open, double *out)
{
	char *end, why[96];
	double v;

	if (!starts_numeric(val, true))
		return bad(prog, opt, val, "not a number");
	errno = 0;
	v = strtod(val, &end);
	if (*end || !isfinite(v))
		return bad(prog, opt, val, "not a number");
	if (v < min || v > max || (max_open && v >= max)) {
		snprintf(why, sizeof why, "out of range (%g <= value %s %g)", min,
			 max_open ? "<" : "<=", max);
		return bad(prog, opt, val, why);
	}
	*out = v;
	return 0;
}

int util_parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (*s < '0' || *s > '9') /* strtoull takes blanks and a sign ("-1" is 2^64-1) */
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || errno)
		return -EINVAL;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: return -EINVAL;
	}
	if (shift && *end == 'i') /* KiB, MiB, GiB; not "4iB" */
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0' || v > (UINT64_MAX >> shift)) /* the multiple would wrap */
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int util_cli_bytes(const char *prog, const char *opt, const char *val, uint64_t min,
		   uint64_t max, uint64_t *out)
{
	char why[96];
	uint64_t v;

	if (util_parse_bytes(val, &v) < 0)
		return bad(prog, opt, val, "not a size (a number of bytes, K/M/G suffixes)");
	if (v < min || v > max) {
		snprintf(why, sizeof why, "out of range (%llu..%llu bytes)",
			 (unsigned long long)min, (unsigned long long)max);
		return bad(prog, opt, val, why);
	}
	*out = v;
	return 0;
}

int util_cli_choice(const char *prog, const char *opt, const char *val,
		    const char *const *names)
{
	char why[256];
	size_t n = 0;

	for (int i = 0; names[i]; i++)
		if (!strcmp(val, names[i]))
			return i;
	n = (size_t)snprintf(why, sizeof why, "expected one of");
	for (int i = 0; names[i] && n < sizeof why; i++)
		n += (size_t)snprintf(why + n, sizeof why - n, "%s %s", i ? "," : "", names[i]);
	return bad(prog, opt, val, why);
}
