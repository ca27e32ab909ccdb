/* libFuzzer harness for the tools' parsers: fabric plan files (launch_plan_load, written by
 * tests/netns/fabric.py and read by inca-bench / inca-fabric-demo), byte sizes
 * (launch_parse_bytes: -b/-e of every tool) and the JSON reader (json_parse: switch statistics
 * files, inca-bench's Open MPI rows). The first input byte picks the parser. Build: clang
 * -fsanitize=fuzzer with launch.c, launch_plan.c, json.c and lib/util/util.c
 * (tests/fuzz/run_fuzz.sh). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "inca/inca.h"
#include "json.h"
#include "launch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* launch.c also starts ranks through libinca; the parsers never do. Stubs keep the harness
 * free of the (gcc-built, uninstrumented) shared library. */
int inca_comm_create(const struct inca_comm_opts *opts, struct inca_comm **out)
{
	(void)opts;
	*out = NULL;
	return -ENOSYS;
}

void inca_comm_destroy(struct inca_comm *comm)
{
	(void)comm;
}

const char *inca_strerror(int err)
{
	(void)err;
	return "stub";
}

static void fuzz_plan(const uint8_t *data, size_t size)
{
	static struct launch_plan p; /* large: not on the stack */
	char path[64];
	int fd = memfd_create("plan", MFD_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, data, size) == (ssize_t)size) {
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		if (launch_plan_load(path, &p) == 0) {
			/* an accepted plan stays within its arrays and terminates its strings */
			if (p.nranks < 0 || p.nranks > LAUNCH_MAX_RANKS || p.nswitches < 0 ||
			    p.nswitches > LAUNCH_MAX_SWITCHES || !memchr(p.name, 0, sizeof p.name) ||
			    !memchr(p.am_addr, 0, sizeof p.am_addr))
				abort();
			for (int r = 0; r < p.nranks; r++)
				if (!memchr(p.ranks[r].ip, 0, sizeof p.ranks[r].ip) ||
				    !memchr(p.ranks[r].netns, 0, sizeof p.ranks[r].netns))
					abort();
		}
	}
	close(fd);
}

static void fuzz_bytes(const uint8_t *data, size_t size)
{
	char s[64];
	uint64_t v = 0;

	if (size >= sizeof s || memchr(data, 0, size))
		return; /* a C string never holds a NUL */
	memcpy(s, data, size);
	s[size] = 0;
	if (launch_parse_bytes(s, &v) == 0) {
		/* an accepted size is digits, then an optional unit: check it against a plain
		 * reading with overflow checks (no sign, no blank, no wrapped multiple) */
		uint64_t ref = 0;
		size_t i = 0;
		unsigned shift = 0;
		char buf[32];

		for (; s[i] >= '0' && s[i] <= '9'; i++) {
			if (ref > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
				abort(); /* strtoull range error accepted */
			ref = ref * 10 + (uint64_t)(s[i] - '0');
		}
		if (i == 0)
			abort();
		switch (s[i]) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: break;
		}
		if (shift && ref > (UINT64_MAX >> shift))
			abort();
		if (v != ref << shift)
			abort();
		(void)launch_fmt_bytes(v, buf, sizeof buf);
	}
}

static void fuzz_json(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	size_t off = 0;
	struct json *j;

	if (!s)
		return;
	memcpy(s, data, size);
	s[size] = 0;
	j = json_parse(s, &off);
	if (j) {
		(void)json_sum_all(j);
		(void)json_sum_key(j, "rx_pkts");
		(void)json_num(json_path(j, "trees.0.aggregations"), 0);
		json_free(j);
	} else if (off > size) {
		abort(); /* the error offset lies inside the text */
	}
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:
		fuzz_plan(data + 1, size - 1);
		break;
	case 1:
		fuzz_bytes(data + 1, size - 1);
		break;
	default:
		fuzz_json(data + 1, size - 1);
		break;
	}
	return 0;
}
