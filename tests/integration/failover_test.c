/* Integration: the switch dies in the middle of a large AllReduce (default 256 MiB of fp32 per
 * rank, in place, AUTO). The call must still return the exact result (libinca fails over to
 * the host path) and later collectives must succeed; every rank counts one failover. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "itest.h"
#include "util/util.h"

struct job {
	struct launch_cfg cfg;
	struct itest_shared *sh;
	size_t count;
	pid_t switch_pid;
	uint64_t kill_pkts;
	uint64_t failovers[LAUNCH_MAX_RANKS];
	uint64_t inc_after[LAUNCH_MAX_RANKS]; /* INC calls served after the failover */
	double big_s;
};

struct killer_arg {
	struct job *j;
	struct inca_comm *comm;
	uint64_t tx0;
	volatile int call_done; /* the big call returned: kill now (do not hold the rank up) */
};

/* Kill the switch once rank 0 has sent kill_pkts packets of the big call: surely mid-call.
 * (Reads the counters while the call runs: a benign race on plain integers.) */
static void *killer(void *arg)
{
	struct killer_arg *k = arg;
	struct inca_comm_stats st;
	uint64_t end = util_now_ns() + 60000000000ull;
	do {
		usleep(1000);
		inca_comm_get_stats(k->comm, &st, sizeof st);
	} while (st.tx_pkts < k->tx0 + k->j->kill_pkts && util_now_ns() < end && !k->call_done);
	kill(k->j->switch_pid, SIGKILL);
	return NULL;
}

static int rank_main(struct inca_comm *comm, void *arg)
{
	struct job *j = arg;
	int rank = inca_comm_rank(comm), bad = 0;
	size_t bytes = j->count * 4;
	void *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	float small[1000], small_out[1000];
	struct check_spec s = { .dt = INCA_FP32, .op = INCA_SUM, .mode = CHECK_EXACT,
				.nranks = j->cfg.nranks, .seed = 7 };
	pthread_t th;

	if (buf == MAP_FAILED)
		return 4;
	/* Warm-up on INC while the switch is alive. */
	if (itest_call(comm, j->sh, &j->cfg, &s, 1000, INCA_ALGO_INC, false, small, small_out))
		bad++;
	struct killer_arg ka = { .j = j, .comm = comm };
	struct inca_comm_stats st0;
	inca_comm_get_stats(comm, &st0, sizeof st0);
	ka.tx0 = st0.tx_pkts;
	if (rank == 0 && pthread_create(&th, NULL, killer, &ka) != 0)
		return 5;
	uint64_t t0 = util_now_ns();
	s.iter = 1;
	if (itest_call(comm, j->sh, &j->cfg, &s, j->count, INCA_ALGO_AUTO, true, NULL, buf))
		bad++;
	if (rank == 0) {
		j->big_s = (double)(util_now_ns() - t0) * 1e-9;
		ka.call_done = 1;
		pthread_join(th, NULL);
	}
	struct inca_comm_stats cs;
	inca_comm_get_stats(comm, &cs, sizeof cs);
	fprintf(stderr, "[rank %d] after the big call: tx %llu rx %llu pkts, rx_bad %llu, dup results %llu, "
		"retransmits %llu, timeouts %llu\n", rank, (unsigned long long)cs.tx_pkts,
		(unsigned long long)cs.rx_pkts, (unsigned long long)cs.rx_bad,
		(unsigned long long)cs.rx_dup_results, (unsigned long long)cs.retransmits,
		(unsigned long long)cs.timeouts);
	struct inca_coll_counts before, after;
	inca_comm_get_coll_counts(comm, &before, sizeof before);
	/* Later calls: AllReduce (small and 1 MiB), Bcast, AllGather, Barrier, all AUTO. */
	for (int k = 0; k < 3; k++) {
		s.iter = 2 + (uint64_t)k;
		/* k = 1: 1 MiB in place in the big buffer; k = 2: small in place. */
		if (itest_call(comm, j->sh, &j->cfg, &s, k == 1 ? (1u << 18) : 1000, INCA_ALGO_AUTO,
			       k >= 1, k == 1 ? NULL : small, k == 1 ? buf : small_out))
			bad++;
	}
	uint32_t v[64];
	for (int i = 0; i < 64; i++)
		v[i] = rank == 1 ? 0xC0DE0000u + (uint32_t)i : 0;
	if (inca_bcast(comm, v, 64, INCA_UINT32, 1) != 0)
		bad++;
	for (int i = 0; i < 64; i++)
		if (v[i] != 0xC0DE0000u + (uint32_t)i)
			bad++;
	uint32_t mine = 1000u + (uint32_t)rank, all[LAUNCH_MAX_RANKS];
	if (inca_allgather(comm, &mine, all, 1, INCA_UINT32) != 0)
		bad++;
	for (int r = 0; r < j->cfg.nranks; r++)
		if (all[r] != 1000u + (uint32_t)r)
			bad++;
	if (inca_barrier(comm) != 0)
		bad++;
	inca_comm_get_coll_counts(comm, &after, sizeof after);
	j->failovers[rank] = after.failovers;
	j->inc_after[rank] = 0;
	for (int c = 0; c < INCA_COLL_COUNT; c++)
		j->inc_after[rank] += after.calls[c][INCA_ALGO_INC] - before.calls[c][INCA_ALGO_INC];
	itest_save_stats(comm, j->sh);
	munmap(buf, bytes);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct job *j = launch_shm_alloc(sizeof(*j));
	uint64_t bytes = 256u << 20;

	if (!j)
		return 99;
	launch_cfg_defaults(&j->cfg);
	j->cfg.addr_index = 109;
	j->cfg.job_timeout_s = 280;
	if (argc >= 3 && !strcmp(argv[1], "--bytes")) {
		if (launch_parse_bytes(argv[2], &bytes) || bytes < 4096) {
			fprintf(stderr, "bad --bytes\n");
			return 2;
		}
		argv[2] = argv[0];
		argv += 2;
		argc -= 2;
	}
	itest_args(argc, argv, &j->cfg);
	j->count = bytes / 4;
	/* About a third of the call's packets (4 KiB each). */
	j->kill_pkts = bytes / 4096 / 3 + 1;
	j->sh = launch_shm_alloc(sizeof(*j->sh));
	if (!j->sh)
		return 99;

	struct launch_addrs a;
	struct launch_switch sw;
	int fails = 0;
	if (launch_addrs_pick(&a, j->cfg.addr_index, j->cfg.nranks) ||
	    launch_switch_start(&j->cfg, &a, NULL, &sw)) {
		fprintf(stderr, "cannot start the switch\n");
		return 99;
	}
	j->switch_pid = sw.pid;
	int status[LAUNCH_MAX_RANKS];
	int nbad = launch_run_ranks(&j->cfg, &a, rank_main, j, status);
	for (int r = 0; r < j->cfg.nranks && nbad; r++)
		if (status[r])
			fprintf(stderr, "rank %d exit status %d\n", r, status[r]);
	int sc = launch_switch_stop(&sw, NULL);
	struct inca_comm_stats cs;
	uint64_t wrong, errs;
	itest_sum(j->sh, j->cfg.nranks, &cs, &wrong, &errs);
	printf("# %llu MiB AllReduce with the switch killed after %llu packets: returned after %.2f s; "
	       "client timeouts %llu\n", (unsigned long long)(bytes >> 20), (unsigned long long)j->kill_pkts,
	       j->big_s, (unsigned long long)cs.timeouts);
	ITEST_EXPECT(fails, sc == 128 + SIGKILL, "the switch was killed (exit status %d)", sc);
	ITEST_EXPECT(fails, nbad == 0, "every rank exited 0 (%d did not)", nbad);
	ITEST_EXPECT(fails, wrong == 0 && errs == 0, "0 wrong elements (%llu), 0 failed calls (%llu)",
		     (unsigned long long)wrong, (unsigned long long)errs);
	for (int r = 0; r < j->cfg.nranks; r++) {
		ITEST_EXPECT(fails, j->failovers[r] == 1, "rank %d: one failover (%llu)", r,
			     (unsigned long long)j->failovers[r]);
		ITEST_EXPECT(fails, j->inc_after[r] == 0, "rank %d: no INC call after it (%llu)", r,
			     (unsigned long long)j->inc_after[r]);
	}
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails ? 1 : 0;
}
