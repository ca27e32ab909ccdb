/* cli_test: the option-value parsers accept exactly what they document, reject the rest, and
 * name the option, the value and the reason in their one-line message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cli.h"
#include "util/test_check.h"

/* Capture what one parser call writes to stderr. */
static char msg[512];
static int fd_saved;
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
	fflush(stderr);
	dup2(fd_saved, 2);
	close(fd_saved);
	rewind(cap);
	size_t n = fread(msg, 1, sizeof msg - 1, cap);
	msg[n] = 0;
	fclose(cap);
	cap = NULL;
}

/* A check that fails while stderr is captured: give stderr back so its message is seen. */
static void cap_abort(void)
{
	if (cap) {
		fflush(stderr);
		dup2(fd_saved, 2);
	}
}

int main(void)
{
	long long i;
	uint64_t u;
	double d;

	test_on_failure(cap_abort);
	CHECK(util_cli_int("p", "--ranks", "4", 1, 64, &i) == 0 && i == 4);
	CHECK(util_cli_int("p", "--ranks", "0x10", 1, 64, &i) == 0 && i == 16);
	cap_begin();
	CHECK(util_cli_int("inca-bench", "--ranks", "0", 1, 64, &i) == -EINVAL);
	cap_end();
	CHECK(strstr(msg, "inca-bench: --ranks '0': out of range (1..64)") != NULL);
	const char *bad_ints[] = { "", "abc", "4x", " 4", "1.5", "99999999999999999999", NULL };
	for (int k = 0; bad_ints[k]; k++) {
		cap_begin();
		CHECK(util_cli_int("p", "-n", bad_ints[k], 0, 100, &i) == -EINVAL);
		cap_end();
		CHECK(strstr(msg, "p: -n '") == msg);
	}
	CHECK(util_cli_u64("p", "--seed", "18446744073709551615", 0, UINT64_MAX, &u) == 0 &&
	      u == UINT64_MAX);
	cap_begin();
	CHECK(util_cli_u64("p", "--seed", "-1", 0, UINT64_MAX, &u) == -EINVAL);
	cap_end();
	CHECK(strstr(msg, "not a non-negative integer") != NULL);

	CHECK(util_cli_double("p", "--drop-rate", "0.25", 0, 1, true, &d) == 0 && d == 0.25);
	cap_begin();
	CHECK(util_cli_double("p", "--drop-rate", "5", 0, 1, true, &d) == -EINVAL);
	cap_end();
	CHECK(strstr(msg, "--drop-rate '5': out of range") != NULL);
	cap_begin();
	CHECK(util_cli_double("p", "--drop-rate", "1", 0, 1, true, &d) == -EINVAL);
	cap_end();
	CHECK(util_cli_double("p", "--budget", "1", 0, 1, false, &d) == 0 && d == 1);
	cap_begin();
	CHECK(util_cli_double("p", "--budget", "nan", 0, 1, false, &d) == -EINVAL);
	CHECK(util_cli_double("p", "--budget", "inf", 0, 1e300, false, &d) == -EINVAL);
	cap_end();

	CHECK(util_cli_bytes("p", "-b", "4K", 0, UINT64_MAX, &u) == 0 && u == 4096);
	CHECK(util_cli_bytes("p", "-b", "1MiB", 0, UINT64_MAX, &u) == 0 && u == 1u << 20);
	CHECK(util_cli_bytes("p", "-b", "2g", 0, UINT64_MAX, &u) == 0 && u == 2ull << 30);
	cap_begin();
	CHECK(util_cli_bytes("inca-demo", "--minbytes", "abc", 0, UINT64_MAX, &u) == -EINVAL);
	cap_end();
	CHECK(strstr(msg, "inca-demo: --minbytes 'abc': not a size") != NULL);
	cap_begin();
	CHECK(util_cli_bytes("p", "-b", "-1", 0, UINT64_MAX, &u) == -EINVAL);
	CHECK(util_cli_bytes("p", "-b", "4iB", 0, UINT64_MAX, &u) == -EINVAL);
	CHECK(util_cli_bytes("p", "-b", "17179869184G", 0, UINT64_MAX, &u) == -EINVAL);
	cap_end();

	static const char *const modes[] = { "native", "skb", NULL };
	CHECK(util_cli_choice("p", "--xdp-mode", "skb", modes) == 1);
	cap_begin();
	CHECK(util_cli_choice("p", "--xdp-mode", "fast", modes) == -EINVAL);
	cap_end();
	CHECK(strstr(msg, "'fast': expected one of native, skb") != NULL);

	CHECK(strlen(util_cli_version()) > 0 && strchr(util_cli_version(), '.') != NULL);
	printf("cli: all checks passed\n");
	return 0;
}
