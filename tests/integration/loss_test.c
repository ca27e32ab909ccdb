/* Integration: AllReduce under loss. The clients drop 5% of data packets on send and on
 * receive and the switch drops 2% of its input and output; 4 ranks run 2000 AllReduces of
 * random counts (0, 1, one chunk, multi-chunk) — int64 sum with distinct random per-rank values
 * (a contribution added twice or lost shows), every 8th call fp32 sum — and every result must
 * be exact. Then: the clients retransmitted, the switch saw duplicates, re-sent results and
 * sent repair notices that reached the clients, and it completed exactly one aggregation per
 * chunk round (nothing counted twice). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "util/util.h"

#define NCALLS 2000
#define MAXCOUNT 5000

struct job {
	struct launch_cfg cfg;
	struct itest_shared *sh;
};

static int rank_main(struct inca_comm *comm, void *arg)
{
	struct job *j = arg;
	/* Same seed on every rank: every rank draws the same sequence of calls. */
	struct util_rng rng;
	util_rng_seed(&rng, 20240601);
	uint8_t *sbuf = malloc(MAXCOUNT * 8), *rbuf = malloc(MAXCOUNT * 8);
	if (!sbuf || !rbuf)
		return 4;
	int bad = 0;
	uint64_t deadline = util_now_ns() + 150ull * 1000000000ull;
	for (int i = 0; i < NCALLS; i++) {
		uint64_t pick = util_rng_below(&rng, 100);
		size_t count;
		if (pick < 8)
			count = 0;
		else if (pick < 16)
			count = 1;
		else if (pick < 60)
			count = 2 + (size_t)util_rng_below(&rng, 507); /* one chunk of int64 */
		else
			count = 509 + (size_t)util_rng_below(&rng, MAXCOUNT - 509); /* 2..10 chunks */
		struct check_spec s = {
			.dt = (i % 8 == 7) ? INCA_FP32 : INCA_INT64, .op = INCA_SUM,
			.mode = CHECK_EXACT, .nranks = j->cfg.nranks, .seed = 99, .iter = (uint64_t)i,
		};
		if (itest_call(comm, j->sh, &j->cfg, &s, count, INCA_ALGO_INC, i % 3 == 0, sbuf,
			       rbuf))
			bad++;
		if (j->sh->errors[inca_comm_rank(comm)] > 0)
			break; /* -ETIMEDOUT leaves the INC path unusable: stop, it is reported */
		if (util_now_ns() > deadline) {
			fprintf(stderr, "[rank %d] time bound reached after %d calls\n",
				inca_comm_rank(comm), i + 1);
			bad++;
			break;
		}
	}
	itest_save_stats(comm, j->sh);
	free(sbuf);
	free(rbuf);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct job j;
	memset(&j, 0, sizeof(j));
	launch_cfg_defaults(&j.cfg);
	j.cfg.addr_index = 104;
	j.cfg.job_timeout_s = 200;
	j.cfg.client_drop_rate = 0.05;
	j.cfg.switch_drop_rate = 0.02;
	j.cfg.rto_us = 2000;
	j.cfg.rto_max_us = 40000;
	j.cfg.retx_limit = 60;
	j.cfg.seed = 5;
	itest_args(argc, argv, &j.cfg);
	j.sh = launch_shm_alloc(sizeof(*j.sh));
	if (!j.sh)
		return 99;
	int fails = 0;
	uint64_t t0 = util_now_ns();
	struct json *st = NULL;
	int rc = launch_job(&j.cfg, rank_main, &j, &st);
	struct inca_comm_stats cs;
	uint64_t wrong, errs;
	itest_sum(j.sh, j.cfg.nranks, &cs, &wrong, &errs);
	struct launch_sw_summary s;
	launch_sw_summarize(st, &s);
	printf("# %.1f s; clients: tx %llu rx %llu retransmits %llu timeouts %llu dup results %llu "
	       "injected drops %llu repair notices %llu; switch: contributions %.0f aggregations "
	       "%.0f duplicates %.0f results re-sent %.0f notices %.0f drops %.0f\n",
	       (double)(util_now_ns() - t0) * 1e-9, (unsigned long long)cs.tx_pkts,
	       (unsigned long long)cs.rx_pkts, (unsigned long long)cs.retransmits,
	       (unsigned long long)cs.timeouts, (unsigned long long)cs.rx_dup_results,
	       (unsigned long long)cs.injected_drops, (unsigned long long)cs.rx_nacks,
	       s.contributions, s.aggregations, s.duplicates, s.results_resent, s.notices, s.drops);
	ITEST_EXPECT(fails, rc == 0, "switch and %d ranks exited cleanly (%d)", j.cfg.nranks, rc);
	ITEST_EXPECT(fails, j.sh->calls[0] == NCALLS, "%llu of %d AllReduces ran",
		     (unsigned long long)j.sh->calls[0], NCALLS);
	ITEST_EXPECT(fails, wrong == 0 && errs == 0, "all results exact (%llu wrong elements, %llu "
		     "failed calls)", (unsigned long long)wrong, (unsigned long long)errs);
	ITEST_EXPECT(fails, cs.injected_drops > 0, "clients injected drops (%llu)",
		     (unsigned long long)cs.injected_drops);
	ITEST_EXPECT(fails, cs.retransmits > 0, "clients retransmitted (%llu)",
		     (unsigned long long)cs.retransmits);
	ITEST_EXPECT(fails, st != NULL, "switch stats file read");
	ITEST_EXPECT(fails, s.duplicates > 0 && s.results_resent > 0,
		     "switch saw duplicates (%.0f) and re-sent results (%.0f)", s.duplicates,
		     s.results_resent);
	/* Lost contributions were noticed by the switch and the notices reached the clients
	 * (some are lost on the way: the clients drop 5% on receive, the switch 2% on send), and
	 * never outnumbered the contributions that paid for them. */
	ITEST_EXPECT(fails, s.notices > 0 && cs.rx_nacks > 0 && (double)cs.rx_nacks <= s.notices &&
			     s.notices <= s.contributions,
		     "repair notices: switch sent %.0f, clients got %llu", s.notices,
		     (unsigned long long)cs.rx_nacks);
	ITEST_EXPECT(fails, s.aggregations == (double)j.sh->inc_chunks,
		     "switch aggregations %.0f == chunk rounds %llu (no contribution counted twice)",
		     s.aggregations, (unsigned long long)j.sh->inc_chunks);
	ITEST_EXPECT(fails, s.contributions == (double)j.sh->inc_chunks * j.cfg.nranks,
		     "switch contributions %.0f == chunk rounds x %d ranks", s.contributions,
		     j.cfg.nranks);
	json_free(st);
	launch_shm_free(j.sh, sizeof(*j.sh));
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails ? 1 : 0;
}
