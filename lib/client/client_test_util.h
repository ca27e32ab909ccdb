/* Helpers for the lib/client unit tests (checks: util/test_check.h): a
 * runner that forks one process per rank around a loopback bootstrap port (retrying other
 * ports when the chosen one is busy). Header-only; test code only. */
#ifndef INCA_CLIENT_TEST_UTIL_H
#define INCA_CLIENT_TEST_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inca/inca.h"
#include "util/test_check.h"

#define TEST_EXIT_ADDRINUSE 99

/* Runs fn in n forked ranks. opts supplies everything but rank/size/bootstrap_addr.
 * Returns 0 if every rank exited 0. */
typedef int (*test_rank_fn)(struct inca_comm *c, int rank, int n, void *arg);

static inline int test_run_ranks(int n, int port_base, const struct inca_comm_opts *tmpl,
				 test_rank_fn fn, void *arg)
{
	for (int attempt = 0; attempt < 20; attempt++) {
		int port = port_base + (int)(((unsigned)getpid() * 7u + (unsigned)attempt * 131u) % 1000u);
		char addr[32];
		pid_t pids[64];
		int failed = 0, busy = 0, left = n;

		snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
		fflush(NULL);
		for (int r = 0; r < n; r++) {
			pids[r] = fork();
			if (pids[r] < 0)
				return -1;
			if (pids[r] == 0) {
				struct inca_comm_opts o = *tmpl;
				struct inca_comm *c;
				int rc;

				alarm(120); /* bound every child in time */
				o.rank = r;
				o.size = n;
				o.bootstrap_addr = addr;
				rc = inca_comm_create(&o, &c);
				if (rc == -EADDRINUSE)
					exit(TEST_EXIT_ADDRINUSE);
				if (rc < 0) {
					fprintf(stderr, "rank %d: create: %s\n", r, inca_strerror(rc));
					exit(2);
				}
				rc = fn(c, r, n, arg);
				inca_comm_destroy(c);
				exit(rc);
			}
		}
		while (left > 0) {
			int st;
			pid_t p = wait(&st);
			if (p < 0)
				break;
			left--;
			for (int r = 0; r < n; r++)
				if (pids[r] == p)
					pids[r] = 0; /* reaped: never signal it again */
			if (WIFEXITED(st) && WEXITSTATUS(st) == TEST_EXIT_ADDRINUSE) {
				busy = 1;
				for (int r = 0; r < n; r++)
					if (pids[r] > 0)
						kill(pids[r], SIGKILL);
			} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				if (!busy)
					fprintf(stderr, "rank process %d failed (status 0x%x)\n", (int)p, st);
				failed = 1;
			}
		}
		if (!busy)
			return failed ? 1 : 0;
	}
	return 1;
}

#endif
