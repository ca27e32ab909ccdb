/* Integration: in-place (sendbuf == recvbuf) and out-of-place AllReduce give the same exact
 * results for INC and the ring, and out-of-place calls leave the send buffer untouched.
 * Several types, counts below, at and across chunk boundaries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "wire/wire.h"

struct job {
	struct launch_cfg cfg;
	struct itest_shared *sh;
};

static int rank_main(struct inca_comm *comm, void *arg)
{
	struct job *j = arg;
	static const struct { enum inca_dtype dt; enum inca_op op; } pairs[] = {
		{ INCA_FP32, INCA_SUM }, { INCA_INT64, INCA_BXOR }, { INCA_FP16, INCA_SUM },
		{ INCA_UINT8, INCA_MAX }, { INCA_BF16, INCA_MIN }, { INCA_INT32, INCA_PROD },
	};
	size_t maxc = 70000;
	uint8_t *sbuf = malloc(maxc * 8), *rbuf = malloc(maxc * 8);
	if (!sbuf || !rbuf)
		return 4;
	int bad = 0;
	uint64_t iter = 0;
	for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
		size_t es = inca_dtype_size(pairs[p].dt);
		size_t cpe = wire_max_data(j->cfg.mtu, es, wire_bsl_code(j->cfg.bsl_bits)) / es;
		size_t counts[] = { 3, cpe - 1, cpe + 1, 7 * cpe, maxc };
		for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
			for (int algo = INCA_ALGO_INC; algo <= INCA_ALGO_RING; algo++)
				for (int inplace = 0; inplace < 2; inplace++) {
					/* Same iter for both forms: identical inputs, same answer. */
					struct check_spec s = {
						.dt = pairs[p].dt, .op = pairs[p].op,
						.mode = CHECK_EXACT, .nranks = j->cfg.nranks,
						.seed = 3, .iter = iter + (uint64_t)algo,
					};
					if (itest_call(comm, j->sh, &j->cfg, &s, counts[k],
						       (enum inca_algo)algo, inplace, sbuf, rbuf))
						bad++;
				}
		iter += 10;
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
	j.cfg.addr_index = 105;
	j.cfg.job_timeout_s = 200;
	itest_args(argc, argv, &j.cfg);
	j.sh = launch_shm_alloc(sizeof(*j.sh));
	if (!j.sh)
		return 99;
	int fails = 0;
	struct json *st = NULL;
	int rc = launch_job(&j.cfg, rank_main, &j, &st);
	struct inca_comm_stats cs;
	uint64_t wrong, errs;
	itest_sum(j.sh, j.cfg.nranks, &cs, &wrong, &errs);
	struct launch_sw_summary s;
	launch_sw_summarize(st, &s);
	ITEST_EXPECT(fails, rc == 0, "switch and %d ranks exited cleanly (%d)", j.cfg.nranks, rc);
	ITEST_EXPECT(fails, wrong == 0 && errs == 0, "%llu calls per rank: %llu wrong, %llu failed",
		     (unsigned long long)j.sh->calls[0], (unsigned long long)wrong,
		     (unsigned long long)errs);
	ITEST_EXPECT(fails, st && s.aggregations == (double)j.sh->inc_chunks,
		     "switch aggregations %.0f == INC chunk rounds %llu", s.aggregations,
		     (unsigned long long)j.sh->inc_chunks);
	json_free(st);
	launch_shm_free(j.sh, sizeof(*j.sh));
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails ? 1 : 0;
}
