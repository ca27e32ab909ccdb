/* Integration: a rank is killed (SIGKILL, as kill -9) in the middle of a large AllReduce on
 * INC, on the ring and with AUTO (INC with failover), and between two calls. Every survivor
 * must fail that call and the next one with the same error, seconds before timeout_ms (30 s),
 * and AUTO must not fail over (a dead rank is not a switch failure). And a rank killed the
 * moment its INC call returned success, with 10% loss so that the others are typically still
 * repairing their last chunks: the survivors must complete that call too (the switch holds
 * every result), and fail the next one. On the ring a survivor may complete the call if its
 * data had all arrived before the kill (the victim died in its last step); its result must
 * then be exact. A mid-call scenario that no survivor failed (the killer thread was not
 * scheduled in time) runs again, up to MAX_ATTEMPTS times. */
#include <errno.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "itest.h"
#include "util/util.h"

enum scen { INC_MID, RING_MID, AUTO_MID, BETWEEN, INC_AFTER, NSCEN };
static const char *const scen_name[NSCEN] = { "INC mid-call", "ring mid-call", "AUTO mid-call",
					       "between calls", "INC after its success" };

#define VICTIM 1
#define BIG_BYTES ((size_t)64 << 20)

struct job {
	struct launch_cfg cfg;
	enum scen scen;
	volatile uint64_t kill_ns;
	volatile int in_call[LAUNCH_MAX_RANKS];
	volatile int victim_was_in_call;
	volatile int survivors_in_call; /* INC_AFTER: survivors still in the call at the kill */
	int rc1[LAUNCH_MAX_RANKS], rc2[LAUNCH_MAX_RANKS];
	int exact[LAUNCH_MAX_RANKS]; /* a completed large call: 1 if every element is right */
	uint64_t t1[LAUNCH_MAX_RANKS], t2[LAUNCH_MAX_RANKS];
	uint64_t failovers[LAUNCH_MAX_RANKS];
};

struct killer_arg {
	struct job *j;
	struct inca_comm *comm;
	uint64_t tx0, t0;
};

/* The victim kills itself mid-call: after a quarter of its INC packets, or 20 ms into a ring
 * call (far shorter than 64 MiB take on the ring). */
static void *killer(void *arg)
{
	struct killer_arg *k = arg;
	struct inca_comm_stats st;
	uint64_t want = BIG_BYTES / 4096 / 4;

	for (;;) {
		usleep(500);
		if (k->j->scen == RING_MID) {
			if (util_now_ns() - k->t0 >= 20000000ull)
				break;
			continue;
		}
		inca_comm_get_stats(k->comm, &st, sizeof st);
		if (st.tx_pkts >= k->tx0 + want || util_now_ns() - k->t0 > 20000000000ull)
			break;
	}
	k->j->victim_was_in_call = k->j->in_call[VICTIM];
	k->j->kill_ns = util_now_ns();
	raise(SIGKILL);
	return NULL;
}

/* Every rank's element i of the large call (the sum is exact: nranks times it). */
static inline float big_elem(size_t i)
{
	return (float)(i & 1023);
}

static int rank_main(struct inca_comm *comm, void *arg)
{
	struct job *j = arg;
	int rank = inca_comm_rank(comm);
	float small[1000], small_out[1000];
	enum inca_algo algo = j->scen == RING_MID ? INCA_ALGO_RING
			      : j->scen == AUTO_MID ? INCA_ALGO_AUTO : INCA_ALGO_INC;
	struct inca_coll_counts cc;

	for (int i = 0; i < 1000; i++)
		small[i] = (float)(rank + i);
	/* Everyone healthy first. */
	if (inca_allreduce_algo(comm, small, small_out, 1000, INCA_FP32, INCA_SUM, INCA_ALGO_INC) ||
	    inca_allreduce_algo(comm, small, small_out, 1000, INCA_FP32, INCA_SUM, INCA_ALGO_RING))
		return 3;
	if (j->scen == AUTO_MID)
		inca_comm_set_tuning(comm, 0); /* AUTO runs on INC (with failover) */

	if (j->scen == BETWEEN) {
		if (inca_barrier(comm))
			return 3;
		if (rank == VICTIM) {
			j->kill_ns = util_now_ns();
			raise(SIGKILL);
		}
		usleep(100 * 1000); /* the victim is gone: its kernel closed its sockets */
		j->rc1[rank] = inca_allreduce_algo(comm, small, small_out, 1000, INCA_FP32, INCA_SUM,
						   INCA_ALGO_INC);
		j->t1[rank] = util_now_ns();
	} else {
		float *buf = mmap(NULL, BIG_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				  -1, 0);
		if (buf == MAP_FAILED)
			return 4;
		for (size_t i = 0; i < BIG_BYTES / 4; i++)
			buf[i] = big_elem(i);
		struct killer_arg ka = { .j = j, .comm = comm };
		struct inca_comm_stats st;
		pthread_t th;
		inca_comm_get_stats(comm, &st, sizeof st);
		ka.tx0 = st.tx_pkts;
		ka.t0 = util_now_ns();
		j->in_call[rank] = 1;
		if (rank == VICTIM && j->scen != INC_AFTER && pthread_create(&th, NULL, killer, &ka) != 0)
			return 5;
		size_t count = j->scen == INC_AFTER ? BIG_BYTES / 16 : BIG_BYTES / 4;
		j->rc1[rank] = inca_allreduce_algo(comm, buf, buf, count, INCA_FP32, INCA_SUM, algo);
		j->t1[rank] = util_now_ns();
		j->in_call[rank] = 0;
		if (j->rc1[rank] == 0) {
			float want = (float)j->cfg.nranks;
			size_t i = 0;
			while (i < count && buf[i] == want * big_elem(i))
				i++;
			j->exact[rank] = i == count;
		}
		if (j->scen == INC_AFTER && rank == VICTIM) {
			int n = 0;
			for (int r = 0; r < j->cfg.nranks; r++)
				n += r != VICTIM && j->in_call[r];
			j->survivors_in_call = n;
			j->kill_ns = util_now_ns();
			raise(SIGKILL);
		}
		if (rank == VICTIM)
			pause(); /* the killer ends this process */
		munmap(buf, BIG_BYTES);
	}
	/* A later call of any kind fails the same way, at once. */
	j->rc2[rank] = inca_allreduce_algo(comm, small, small_out, 1000, INCA_FP32, INCA_SUM,
					   j->scen == BETWEEN ? INCA_ALGO_RING : INCA_ALGO_AUTO);
	j->t2[rank] = util_now_ns();
	inca_comm_get_coll_counts(comm, &cc, sizeof cc);
	j->failovers[rank] = cc.failovers;
	return 0;
}

#define MAX_ATTEMPTS 3

static int run_scen(const char *switch_path, unsigned addr_index, int nranks, enum scen sc,
		    int attempt)
{
	struct job *j = launch_shm_alloc(sizeof(*j));
	int fails = 0;

	if (!j)
		return 1;
	launch_cfg_defaults(&j->cfg);
	j->cfg.addr_index = addr_index;
	j->cfg.nranks = nranks;
	j->cfg.switch_path = switch_path;
	j->cfg.job_timeout_s = 120;
	j->cfg.log_level = -1;
	if (sc == INC_AFTER)
		j->cfg.client_drop_rate = 0.1;
	j->scen = sc;

	struct launch_addrs a;
	struct launch_switch sw;
	if (launch_addrs_pick(&a, j->cfg.addr_index, j->cfg.nranks) ||
	    launch_switch_start(&j->cfg, &a, NULL, &sw)) {
		fprintf(stderr, "cannot start the switch\n");
		return 1;
	}
	int status[LAUNCH_MAX_RANKS];
	launch_run_ranks(&j->cfg, &a, rank_main, j, status);
	launch_switch_stop(&sw, NULL);

	printf("# %s: rank %d killed; timeout_ms %u\n", scen_name[sc], VICTIM, j->cfg.timeout_ms);
	int failed = 0;
	for (int r = 0; r < nranks; r++)
		failed += r != VICTIM && j->rc1[r] != 0;
	if (sc != INC_AFTER && sc != BETWEEN && (!j->victim_was_in_call || !failed) &&
	    attempt < MAX_ATTEMPTS && status[VICTIM] == 128 + SIGKILL) {
		/* On a loaded machine the killer thread may not run until the call has ended, or
		 * until the victim's last step: then this run tested nothing, and it runs again. */
		printf("#   the kill came after %s; running it again (%d of %d)\n",
		       j->victim_was_in_call ? "every survivor had its result" : "the call had ended",
		       attempt + 1, MAX_ATTEMPTS);
		launch_shm_free(j, sizeof(*j));
		return run_scen(switch_path, addr_index, nranks, sc, attempt + 1);
	}
	ITEST_EXPECT(fails, status[VICTIM] == 128 + SIGKILL, "%s: rank %d was killed (status %d)",
		     scen_name[sc], VICTIM, status[VICTIM]);
	if (sc == INC_AFTER) {
		printf("#   the victim's call returned %d; %d survivors were still in the call\n",
		       j->rc1[VICTIM], j->survivors_in_call);
		ITEST_EXPECT(fails, j->rc1[VICTIM] == 0, "%s: the victim completed the call",
			     scen_name[sc]);
	} else if (sc != BETWEEN) {
		ITEST_EXPECT(fails, j->victim_was_in_call, "%s: it died inside the call", scen_name[sc]);
		ITEST_EXPECT(fails, failed > 0, "%s: %d survivors failed the call", scen_name[sc],
			     failed);
	}
	int ref = -1;
	for (int r = 0; r < nranks; r++) {
		if (r == VICTIM)
			continue;
		if (ref < 0 && (sc == BETWEEN || j->rc1[r] != 0))
			ref = r;
		double s1 = (double)(int64_t)(j->t1[r] - j->kill_ns) * 1e-9; /* < 0: before it */
		double s2 = (double)(j->t2[r] - j->t1[r]) * 1e-9;
		printf("#   rank %d: call %d (%s) %.3f s after the kill; next call %d (%s) %.3f s later\n",
		       r, j->rc1[r], inca_strerror(j->rc1[r]), s1, j->rc2[r], inca_strerror(j->rc2[r]),
		       s2);
		ITEST_EXPECT(fails, status[r] == 0, "%s: rank %d exited 0 (%d)", scen_name[sc], r,
			     status[r]);
		if (sc == INC_AFTER) {
			ITEST_EXPECT(fails, j->rc1[r] == 0 && j->exact[r],
				     "%s: rank %d completed the call like the victim, exactly (%d, %d)",
				     scen_name[sc], r, j->rc1[r], j->exact[r]);
		} else if (sc == RING_MID && j->rc1[r] == 0) {
			/* Its data had all arrived before the kill (docs/collectives.md "A dead
			 * rank": the host path has no agreement round); INC survivors agree. */
			ITEST_EXPECT(fails, j->exact[r],
				     "%s: rank %d completed the call before the kill reached it; its "
				     "result is exact", scen_name[sc], r);
		} else {
			ITEST_EXPECT(fails, j->rc1[r] == -ECONNRESET && j->rc1[r] == j->rc1[ref],
				     "%s: rank %d failed the call with -ECONNRESET like rank %d (%d)",
				     scen_name[sc], r, ref, j->rc1[r]);
			ITEST_EXPECT(fails, j->t1[r] > j->kill_ns && s1 < 5.0,
				     "%s: rank %d returned < 5 s after the kill (%.3f s)",
				     scen_name[sc], r, s1);
		}
		ITEST_EXPECT(fails, j->rc2[r] == -ECONNRESET && s2 < 1.0,
			     "%s: rank %d: the next call fails with -ECONNRESET at once (%d, %.3f s)",
			     scen_name[sc], r, j->rc2[r], s2);
		ITEST_EXPECT(fails, j->failovers[r] == 0, "%s: rank %d: no failover (%llu)",
			     scen_name[sc], r, (unsigned long long)j->failovers[r]);
	}
	launch_shm_free(j, sizeof(*j));
	return fails;
}

int main(int argc, char **argv)
{
	struct launch_cfg cfg;
	int fails = 0;

	launch_cfg_defaults(&cfg);
	cfg.addr_index = 115;
	itest_args(argc, argv, &cfg);
	if (cfg.nranks < 3)
		cfg.nranks = 3; /* a survivor that is no ring neighbour of the victim needs 4 */
	for (int sc = 0; sc < NSCEN; sc++)
		fails += run_scen(cfg.switch_path, cfg.addr_index, cfg.nranks, (enum scen)sc, 1);
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails ? 1 : 0;
}
