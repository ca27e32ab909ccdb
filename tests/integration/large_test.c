/* Integration: one large AllReduce (default 256 MiB of fp32 per rank, --bytes N to change) per
 * algorithm through a real switch and 4 ranks: INC out-of-place, INC in-place, ring
 * out-of-place; every element verified. 1 GiB is an opt-in benchmark (bench/run_all.sh with
 * INCA_BENCH_LARGE=1), not a default test: 4 ranks x 2 buffers x 1 GiB = 8 GiB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "itest.h"
#include "util/util.h"

struct job {
	struct launch_cfg cfg;
	struct itest_shared *sh;
	size_t count;
	double secs[3];
};

static int rank_main(struct inca_comm *comm, void *arg)
{
	struct job *j = arg;
	size_t bytes = j->count * 4;
	/* mmap: the pages come straight from the kernel and go back at exit. */
	void *sbuf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *rbuf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sbuf == MAP_FAILED || rbuf == MAP_FAILED) {
		fprintf(stderr, "[rank %d] cannot map 2 x %zu bytes\n", inca_comm_rank(comm), bytes);
		return 4;
	}
	int bad = 0;
	static const struct { enum inca_algo algo; bool inplace; } runs[3] = {
		{ INCA_ALGO_INC, false }, { INCA_ALGO_INC, true }, { INCA_ALGO_RING, false },
	};
	for (int k = 0; k < 3; k++) {
		struct check_spec s = { .dt = INCA_FP32, .op = INCA_SUM, .mode = CHECK_EXACT,
					.nranks = j->cfg.nranks, .seed = 42, .iter = (uint64_t)k };
		inca_coll(comm, &(struct inca_coll_args){ .coll = INCA_COLL_BARRIER, .algo = INCA_ALGO_RING });
		uint64_t t0 = util_now_ns();
		if (itest_call(comm, j->sh, &j->cfg, &s, j->count, runs[k].algo, runs[k].inplace, sbuf,
			       rbuf))
			bad++;
		if (inca_comm_rank(comm) == 0)
			j->secs[k] = (double)(util_now_ns() - t0) * 1e-9; /* incl. fill + verify */
	}
	itest_save_stats(comm, j->sh);
	munmap(sbuf, bytes);
	munmap(rbuf, bytes);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct job *j = launch_shm_alloc(sizeof(*j));
	if (!j)
		return 99;
	launch_cfg_defaults(&j->cfg);
	j->cfg.addr_index = 106;
	j->cfg.job_timeout_s = 280;
	uint64_t bytes = 256u << 20;
	/* --bytes N before the common options */
	if (argc >= 3 && !strcmp(argv[1], "--bytes")) {
		if (launch_parse_bytes(argv[2], &bytes) || bytes < 4) {
			fprintf(stderr, "bad --bytes\n");
			return 2;
		}
		argv[2] = argv[0];
		argv += 2;
		argc -= 2;
	}
	itest_args(argc, argv, &j->cfg);
	j->count = bytes / 4;
	j->sh = launch_shm_alloc(sizeof(*j->sh));
	if (!j->sh)
		return 99;
	int fails = 0;
	struct json *st = NULL;
	int rc = launch_job(&j->cfg, rank_main, j, &st);
	struct inca_comm_stats cs;
	uint64_t wrong, errs;
	itest_sum(j->sh, j->cfg.nranks, &cs, &wrong, &errs);
	struct launch_sw_summary s;
	launch_sw_summarize(st, &s);
	char b[32];
	printf("# %s fp32 sum per rank: INC %.2f s, INC in-place %.2f s, ring %.2f s (each incl. "
	       "fill and full verification); client retransmits %llu\n",
	       launch_fmt_bytes(bytes, b, sizeof(b)), j->secs[0], j->secs[1], j->secs[2],
	       (unsigned long long)cs.retransmits);
	ITEST_EXPECT(fails, rc == 0, "switch and %d ranks exited cleanly (%d)", j->cfg.nranks, rc);
	ITEST_EXPECT(fails, wrong == 0 && errs == 0, "%llu calls per rank: %llu wrong elements, "
		     "%llu failed calls", (unsigned long long)j->sh->calls[0],
		     (unsigned long long)wrong, (unsigned long long)errs);
	ITEST_EXPECT(fails, st && s.aggregations == (double)j->sh->inc_chunks,
		     "switch aggregations %.0f == INC chunk rounds %llu", s.aggregations,
		     (unsigned long long)j->sh->inc_chunks);
	json_free(st);
	launch_shm_free(j->sh, sizeof(*j->sh));
	launch_shm_free(j, sizeof(*j));
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails ? 1 : 0;
}
