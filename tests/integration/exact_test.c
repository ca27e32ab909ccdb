/* Integration: exactness of AllReduce through a real inca-switch and 4 rank processes.
 * Part 1: every valid type/op pair, INC and ring, counts 1, 13, one full chunk and a
 * multi-chunk count, against exact expected values (integers wrap-exact, floats exact-valued).
 * Part 2: a deterministic-mode switch, random rounding float data, INC results bitwise equal
 * to agg_reduce applied in rank order. Both parts check the switch counted one aggregation per
 * chunk round. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "itest.h"
#include "wire/wire.h"

struct job {
	struct launch_cfg cfg;
	struct itest_shared *sh;
	int part;
};

static size_t chunk_elems(const struct launch_cfg *cfg, enum inca_dtype dt)
{
	size_t es = inca_dtype_size(dt);
	return wire_max_data_auth(cfg->mtu, es, wire_bsl_code(cfg->bsl_bits),
				  !cfg->no_auth && !cfg->plan) / es;
}

static int rank_part1(struct inca_comm *comm, struct job *j)
{
	int bad = 0;
	uint64_t iter = 0;
	uint8_t *sbuf = malloc(64 << 10), *rbuf = malloc(64 << 10);
	if (!sbuf || !rbuf)
		return 4;
	for (int dt = 0; dt < INCA_DTYPE_COUNT; dt++) {
		size_t cpe = chunk_elems(&j->cfg, (enum inca_dtype)dt);
		size_t counts[] = { 1, 13, cpe, 3 * cpe + 5 };
		for (int op = 0; op < INCA_OP_COUNT; op++) {
			if (!inca_op_valid((enum inca_dtype)dt, (enum inca_op)op)) {
				/* The API must refuse what the switch cannot reduce. */
				int rc = inca_allreduce_algo(comm, sbuf, rbuf, 4, (enum inca_dtype)dt,
							     (enum inca_op)op, INCA_ALGO_INC);
				if (rc != -ENOTSUP && rc != -EINVAL) {
					fprintf(stderr, "%s:%s accepted (%d)\n",
						inca_dtype_name((enum inca_dtype)dt),
						inca_op_name((enum inca_op)op), rc);
					bad++;
				}
				continue;
			}
			for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
				for (int algo = INCA_ALGO_INC; algo <= INCA_ALGO_RING; algo++) {
					struct check_spec s = {
						.dt = (enum inca_dtype)dt, .op = (enum inca_op)op,
						.mode = CHECK_EXACT, .nranks = j->cfg.nranks,
						.seed = 7, .iter = ++iter,
					};
					if (itest_call(comm, j->sh, &j->cfg, &s, counts[k],
						       (enum inca_algo)algo, false, sbuf, rbuf))
						bad++;
				}
			}
		}
	}
	/* ALGO_AUTO with a switch takes the INC path. */
	struct check_spec s = { .dt = INCA_FP32, .op = INCA_SUM, .mode = CHECK_EXACT,
				.nranks = j->cfg.nranks, .seed = 7, .iter = ++iter };
	if (itest_call(comm, j->sh, &j->cfg, &s, 5000, INCA_ALGO_AUTO, false, sbuf, rbuf))
		bad++;
	itest_save_stats(comm, j->sh);
	free(sbuf);
	free(rbuf);
	return bad ? 1 : 0;
}

static int rank_part2(struct inca_comm *comm, struct job *j)
{
	static const enum inca_dtype fts[] = { INCA_FP16, INCA_BF16, INCA_FP32, INCA_FP64 };
	static const enum inca_op fops[] = { INCA_SUM, INCA_PROD, INCA_MIN, INCA_MAX };
	int bad = 0;
	uint64_t iter = 1000;
	size_t maxc = 20000;
	uint8_t *sbuf = malloc(maxc * 8), *rbuf = malloc(maxc * 8);
	if (!sbuf || !rbuf)
		return 4;
	for (size_t t = 0; t < 4; t++) {
		size_t cpe = chunk_elems(&j->cfg, fts[t]);
		size_t counts[] = { 1, 3 * cpe + 5, maxc };
		for (size_t o = 0; o < 4; o++)
			for (size_t k = 0; k < 3; k++)
				for (int rep = 0; rep < 2; rep++) {
					struct check_spec s = {
						.dt = fts[t], .op = fops[o], .mode = CHECK_RANK_ORDER,
						.nranks = j->cfg.nranks, .seed = 11, .iter = ++iter,
					};
					if (itest_call(comm, j->sh, &j->cfg, &s, counts[k],
						       INCA_ALGO_INC, rep == 1, sbuf, rbuf))
						bad++;
				}
	}
	itest_save_stats(comm, j->sh);
	free(sbuf);
	free(rbuf);
	return bad ? 1 : 0;
}

static int rank_main(struct inca_comm *comm, void *arg)
{
	struct job *j = arg;
	return j->part == 1 ? rank_part1(comm, j) : rank_part2(comm, j);
}

/* The bitwise test is only meaningful if rank order matters for this data: check that the
 * reverse order gives different bits somewhere. */
static int order_matters(int nranks)
{
	size_t n = 4096;
	float *a = calloc(n, 4), *b = calloc(n, 4), *t = calloc(n, 4);
	struct check_spec s = { .dt = INCA_FP32, .op = INCA_SUM, .mode = CHECK_RANK_ORDER,
				.nranks = nranks, .seed = 11, .iter = 1 };
	check_fill(&s, 0, a, 0, n);
	check_fill(&s, nranks - 1, b, 0, n);
	for (int r = 1; r < nranks; r++) {
		check_fill(&s, r, t, 0, n);
		agg_reduce(a, t, n, INCA_FP32, INCA_SUM);
		check_fill(&s, nranks - 1 - r, t, 0, n);
		agg_reduce(b, t, n, INCA_FP32, INCA_SUM);
	}
	int differ = memcmp(a, b, n * 4) != 0;
	free(a);
	free(b);
	free(t);
	return differ;
}

static int run_part(struct job *j, const char *name)
{
	int fails = 0;
	memset(j->sh, 0, sizeof(*j->sh));
	struct json *st = NULL;
	int rc = launch_job(&j->cfg, rank_main, j, &st);
	struct inca_comm_stats cs;
	uint64_t wrong, errs;
	itest_sum(j->sh, j->cfg.nranks, &cs, &wrong, &errs);
	struct launch_sw_summary s;
	launch_sw_summarize(st, &s);
	ITEST_EXPECT(fails, rc == 0, "%s: switch and %d ranks ran and exited cleanly (%d)", name,
		     j->cfg.nranks, rc);
	ITEST_EXPECT(fails, wrong == 0 && errs == 0, "%s: %llu calls per rank, %llu wrong elements, "
		     "%llu failed calls", name, (unsigned long long)j->sh->calls[0],
		     (unsigned long long)wrong, (unsigned long long)errs);
	ITEST_EXPECT(fails, st && s.aggregations == (double)j->sh->inc_chunks,
		     "%s: switch aggregations %.0f == INC chunk rounds %llu", name, s.aggregations,
		     (unsigned long long)j->sh->inc_chunks);
	ITEST_EXPECT(fails, st && s.contributions == (double)j->sh->inc_chunks * j->cfg.nranks,
		     "%s: switch contributions %.0f == chunk rounds x ranks", name,
		     s.contributions);
	json_free(st);
	return fails;
}

int main(int argc, char **argv)
{
	struct job j;
	memset(&j, 0, sizeof(j));
	launch_cfg_defaults(&j.cfg);
	j.cfg.addr_index = 101;
	j.cfg.job_timeout_s = 200;
	itest_args(argc, argv, &j.cfg);
	j.sh = launch_shm_alloc(sizeof(*j.sh));
	if (!j.sh)
		return 99;
	int fails = 0;

	j.part = 1;
	fails += run_part(&j, "all pairs, exact data, INC + ring");

	ITEST_EXPECT(fails, order_matters(j.cfg.nranks),
		     "rank-order test data rounds (reverse order gives other bits)");
	j.part = 2;
	j.cfg.deterministic = true;
	j.cfg.addr_index++;
	fails += run_part(&j, "deterministic switch, random floats, bitwise");

	launch_shm_free(j.sh, sizeof(*j.sh));
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails ? 1 : 0;
}
