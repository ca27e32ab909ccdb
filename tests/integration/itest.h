/* tests/integration/itest: helpers shared by the integration tests — command line
 * (--switch, --addr-index), one verified AllReduce call, results shared with the parent, and
 * checks of the switch's stats file. Each test runs a real inca-switch and forked ranks. */
#ifndef INCA_ITEST_H
#define INCA_ITEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "check.h"
#include "inca/inca.h"
#include "launch.h"

/* Shared between the parent and the rank processes (launch_shm_alloc). */
struct itest_shared {
	struct inca_comm_stats cstats[LAUNCH_MAX_RANKS];
	uint64_t wrong[LAUNCH_MAX_RANKS];
	uint64_t errors[LAUNCH_MAX_RANKS];
	uint64_t calls[LAUNCH_MAX_RANKS];
	uint64_t inc_chunks; /* chunk rounds of every INC call, written by rank 0 */
};

/* Parse --switch PATH, --addr-index K, --ranks N into cfg (after launch_cfg_defaults).
 * Returns 0 or exits 2 on a bad command line. */
void itest_args(int argc, char **argv, struct launch_cfg *cfg);

/* Chunk rounds one INC call of count elements costs (wire_max_data per packet). */
uint64_t itest_chunks(size_t count, enum inca_dtype dt, const struct launch_cfg *cfg);

/* One collective call: fill (rank's data for spec), run, verify. sbuf/rbuf hold count
 * elements (sbuf unused when in_place). Out-of-place calls also check that sendbuf is left
 * unchanged. Counts wrong elements / failed calls into sh[rank]. Returns 0 if right. */
int itest_call(struct inca_comm *comm, struct itest_shared *sh, const struct launch_cfg *cfg,
	       const struct check_spec *spec, size_t count, enum inca_algo algo, bool in_place,
	       void *sbuf, void *rbuf);

/* Copy this rank's libinca counters into sh. */
void itest_save_stats(struct inca_comm *comm, struct itest_shared *sh);

/* Sum of all ranks' counters / wrong / errors. */
void itest_sum(const struct itest_shared *sh, int nranks, struct inca_comm_stats *cs,
	       uint64_t *wrong, uint64_t *errors);

/* Print a check result and count failures: ok ? "ok" : "FAIL". */
#define ITEST_EXPECT(fails, cond, ...)                                                            \
	do {                                                                                      \
		bool ok_ = (cond);                                                                \
		printf("%s: ", ok_ ? "ok  " : "FAIL");                                            \
		printf(__VA_ARGS__);                                                              \
		printf("\n");                                                                     \
		fflush(stdout);                                                                   \
		if (!ok_)                                                                         \
			(fails)++;                                                                \
	} while (0)

#endif
