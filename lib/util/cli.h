/* lib/util/cli: option-value parsing for the programs' command lines (not for libinca: these
 * print). Each parser checks the whole value and its range and, when it is wrong, prints one
 * line naming the program, the option, the value and why, e.g.
 *   inca-bench: --ranks 0: out of range (1..64)
 * and returns -EINVAL; the caller then exits with status 2. The conventions every program
 * follows are in docs/cli.md. */
#ifndef INCA_UTIL_CLI_H
#define INCA_UTIL_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The version of every program, from meson's project() (util/version.h, generated). */
const char *util_cli_version(void);
/* "PROG (INCA) VERSION\n" on stdout, for --version. */
void util_cli_print_version(const char *prog);

/* A decimal integer (0x.. hexadecimal too) in [min, max]. */
int util_cli_int(const char *prog, const char *opt, const char *val, long long min,
		 long long max, long long *out);
/* The same for an unsigned 64-bit value (seeds); no sign allowed. */
int util_cli_u64(const char *prog, const char *opt, const char *val, uint64_t min, uint64_t max,
		 uint64_t *out);
/* A finite real number in [min, max], or [min, max) when max_open. */
int util_cli_double(const char *prog, const char *opt, const char *val, double min, double max,
		    bool max_open, double *out);
/* A byte count with an optional K/M/G suffix (powers of 1024; "KiB", "MB" and "k" are the
 * same), in [min, max]. */
int util_cli_bytes(const char *prog, const char *opt, const char *val, uint64_t min,
		   uint64_t max, uint64_t *out);
/* Parse a size without printing: 0 or -EINVAL (as util_cli_bytes, no range). */
int util_parse_bytes(const char *s, uint64_t *out);
/* One of `names` (NULL-terminated): its index, or a message listing the choices. */
int util_cli_choice(const char *prog, const char *opt, const char *val,
		    const char *const *names);
/* Print "PROG: MESSAGE" (printf-style) and a hint to run PROG --help; returns -EINVAL. */
int util_cli_error(const char *prog, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
