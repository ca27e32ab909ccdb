/* libFuzzer harness for inca-am's config parser (cfg.c): the input is the config file; an
 * accepted config must respect the documented limits (counts within the arrays, every string
 * terminated, tree id range ordered, TLS certificate and key together, every job's quota
 * within its limits). Build: clang
 * -fsanitize=fuzzer with cfg.c (tests/fuzz/run_fuzz.sh). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TERMINATED(s) (memchr((s), 0, sizeof(s)) != NULL)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct am_cfg c; /* large: not on the stack */
	char path[64], err[256];
	int fd = memfd_create("am.conf", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	am_cfg_defaults(&c);
	err[0] = 0;
	if (am_cfg_load(&c, path, err, sizeof err) == 0) {
		if (c.nswitches > AM_MAX_SWITCHES || c.njobs > AM_MAX_JOBS ||
		    c.nattach > AM_MAX_ATTACH || c.tree_id_min > c.tree_id_max ||
		    !c.tree_id_min || !c.slots_default || !c.slots_min ||
		    !!c.tls_cert[0] != !!c.tls_key[0] || !TERMINATED(c.listen) ||
		    !TERMINATED(c.journal) || !TERMINATED(c.admin_token))
			abort();
		for (size_t i = 0; i < c.nswitches; i++)
			if (!TERMINATED(c.sw[i].name) || !TERMINATED(c.sw[i].target) ||
			    !TERMINATED(c.sw[i].key_path) || !TERMINATED(c.sw[i].known_hosts))
				abort();
		for (size_t i = 0; i < c.njobs; i++) {
			struct am_quota q;
			if (!TERMINATED(c.jobs[i].id) || !TERMINATED(c.jobs[i].cred))
				abort();
			/* every job's effective quota is within the documented limits */
			am_cfg_quota(&c, c.jobs[i].id, &q);
			if (!q.max_trees || !q.max_slots || !q.max_forming || !q.max_size ||
			    q.max_size > AM_MAX_GROUP_SIZE || q.max_trees > 65535 ||
			    q.max_forming > 65535 || q.max_slots > 1u << 24)
				abort();
		}
	} else if (!err[0] || !memchr(err, 0, sizeof err)) {
		abort(); /* a refusal always says why */
	}
	close(fd);
	return 0;
}
