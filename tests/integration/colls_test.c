/* Integration: every offloaded collective (AllReduce, Reduce, Broadcast, AllGather,
 * ReduceScatter, Barrier) through a real inca-switch with per-chunk destinations
 * (docs/protocol.md §4.1), explicitly on INC, 4 ranks: several roots, types, sizes (one
 * element, odd counts, many chunks), in-place forms; every result checked element by element
 * against a reference computed from the known inputs, and every call counted on INC. (The
 * engine's own test checks which copies carry data and which are header-only.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"

struct job {
	struct launch_cfg cfg;
	struct itest_shared *sh;
	uint64_t bad[LAUNCH_MAX_RANKS];
	uint64_t calls[LAUNCH_MAX_RANKS];
};

/* Input element i of rank r for call k, as an integer that every type holds exactly. */
static int64_t val(int r, size_t i, int k)
{
	return (int64_t)((i * 7 + (size_t)r * 13 + (size_t)k * 5) % 101) - 50;
}

static void put(void *buf, enum inca_dtype dt, size_t i, int64_t v)
{
	switch (dt) {
	case INCA_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case INCA_INT64: ((int64_t *)buf)[i] = v; break;
	case INCA_FP32: ((float *)buf)[i] = (float)v; break;
	case INCA_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	default: break;
	}
}

static int64_t get(const void *buf, enum inca_dtype dt, size_t i)
{
	switch (dt) {
	case INCA_INT32: return ((const int32_t *)buf)[i];
	case INCA_INT64: return ((const int64_t *)buf)[i];
	case INCA_FP32: return (int64_t)((const float *)buf)[i];
	case INCA_UINT8: return ((const uint8_t *)buf)[i];
	default: return 0;
	}
}

/* Sum over ranks of element i, reduced to the type's range (uint8 wraps). */
static int64_t sum_ref(int n, size_t i, int k, enum inca_dtype dt)
{
	int64_t s = 0;
	for (int r = 0; r < n; r++)
		s += val(r, i, k);
	return dt == INCA_UINT8 ? (int64_t)(uint8_t)s : s;
}

static int64_t one_ref(int r, size_t i, int k, enum inca_dtype dt)
{
	int64_t v = val(r, i, k);
	return dt == INCA_UINT8 ? (int64_t)(uint8_t)v : v;
}

static int rank_main(struct inca_comm *comm, void *arg)
{
	struct job *j = arg;
	int me = inca_comm_rank(comm), n = inca_comm_size(comm), k = 0;
	static const enum inca_dtype dts[] = { INCA_INT32, INCA_FP32, INCA_INT64, INCA_UINT8 };
	static const size_t counts[] = { 1, 3, 500, 1021, 70001 };
	size_t maxc = 70001 * (size_t)n;
	uint8_t *sb = malloc(maxc * 8), *rb = malloc(maxc * 8);
	uint64_t bad = 0, calls = 0;

	if (!sb || !rb)
		return 4;
	for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
		enum inca_dtype dt = dts[di];
		for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++, k++) {
			size_t cnt = counts[ci];
			for (int coll = 0; coll < 5; coll++) {
				for (int variant = 0; variant < 2; variant++) {
					int root = (k + variant * 3) % n;
					bool inplace = variant == 1;
					struct inca_coll_args a = { .dt = dt, .op = INCA_SUM, .root = root,
								    .algo = INCA_ALGO_INC, .count = cnt,
								    .sendbuf = sb, .recvbuf = rb };
					size_t nin = cnt, nout = cnt;
					switch (coll) {
					case 0: a.coll = INCA_COLL_ALLREDUCE; break;
					case 1: a.coll = INCA_COLL_REDUCE; break;
					case 2: a.coll = INCA_COLL_BCAST; break;
					case 3: a.coll = INCA_COLL_ALLGATHER; nout = cnt * (size_t)n; break;
					case 4: a.coll = INCA_COLL_REDUCE_SCATTER; nin = cnt * (size_t)n;
						inplace = false; break;
					}
					memset(rb, 0xA5, maxc * 8);
					for (size_t i = 0; i < nin; i++)
						put(sb, dt, i, val(me, i, k));
					if (a.coll == INCA_COLL_BCAST) {
						a.sendbuf = NULL;
						if (me == root)
							for (size_t i = 0; i < cnt; i++)
								put(rb, dt, i, val(me, i, k));
					} else if (inplace && a.coll == INCA_COLL_ALLGATHER) {
						size_t es = inca_dtype_size(dt);
						memcpy(rb + (size_t)me * cnt * es, sb, cnt * es);
						a.sendbuf = rb;
					} else if (inplace && (a.coll == INCA_COLL_ALLREDUCE ||
							       (a.coll == INCA_COLL_REDUCE && me == root))) {
						memcpy(rb, sb, cnt * inca_dtype_size(dt));
						a.sendbuf = rb;
					}
					int rc = inca_coll(comm, &a);
					calls++;
					if (rc) {
						fprintf(stderr, "[rank %d] %s %s n=%zu: %s\n", me,
							inca_coll_name(a.coll), inca_dtype_name(dt), cnt,
							inca_strerror(rc));
						bad++;
						continue;
					}
					uint64_t wrong = 0;
					for (size_t i = 0; i < nout; i++) {
						int64_t want, got;
						switch (a.coll) {
						case INCA_COLL_ALLREDUCE:
							want = sum_ref(n, i, k, dt);
							break;
						case INCA_COLL_REDUCE:
							if (me != root)
								continue;
							want = sum_ref(n, i, k, dt);
							break;
						case INCA_COLL_BCAST:
							want = one_ref(root, i, k, dt);
							break;
						case INCA_COLL_ALLGATHER:
							want = one_ref((int)(i / cnt), i % cnt, k, dt);
							break;
						default: /* reduce-scatter: our block */
							want = sum_ref(n, (size_t)me * cnt + i, k, dt);
							break;
						}
						got = get(rb, dt, i);
						if (got != want)
							wrong++;
					}
					if (wrong) {
						fprintf(stderr, "[rank %d] %s %s n=%zu root %d%s: %llu wrong\n",
							me, inca_coll_name(a.coll), inca_dtype_name(dt), cnt,
							root, inplace ? " in place" : "",
							(unsigned long long)wrong);
						bad++;
					}
				}
			}
		}
	}
	for (int b = 0; b < 3; b++) {
		struct inca_coll_args a = { .coll = INCA_COLL_BARRIER, .algo = INCA_ALGO_INC };
		calls++;
		if (inca_coll(comm, &a))
			bad++;
	}
	struct inca_coll_counts cc;
	inca_comm_get_coll_counts(comm, &cc, sizeof cc);
	for (int c = 0; c < INCA_COLL_COUNT; c++)
		for (int a = 0; a < INCA_ALGO_COUNT; a++)
			if (a != INCA_ALGO_INC && cc.calls[c][a])
				bad++; /* everything explicitly on INC */
	j->bad[me] = bad;
	j->calls[me] = calls;
	itest_save_stats(comm, j->sh);
	free(sb);
	free(rb);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct job *j = launch_shm_alloc(sizeof(*j));
	if (!j)
		return 99;
	launch_cfg_defaults(&j->cfg);
	j->cfg.addr_index = 110;
	j->cfg.job_timeout_s = 200;
	itest_args(argc, argv, &j->cfg);
	j->sh = launch_shm_alloc(sizeof(*j->sh));
	if (!j->sh)
		return 99;
	struct json *st = NULL;
	int rc = launch_job(&j->cfg, rank_main, j, &st);
	int fails = 0;
	uint64_t bad = 0;
	for (int r = 0; r < j->cfg.nranks; r++)
		bad += j->bad[r];
	struct launch_sw_summary s;
	launch_sw_summarize(st, &s);
	ITEST_EXPECT(fails, rc == 0, "switch and %d ranks exited cleanly (%d)", j->cfg.nranks, rc);
	ITEST_EXPECT(fails, bad == 0 && j->calls[0] > 0, "%llu calls per rank, %llu failed or wrong",
		     (unsigned long long)j->calls[0], (unsigned long long)bad);
	ITEST_EXPECT(fails, st && s.aggregations > 0, "switch completed %.0f aggregations",
		     s.aggregations);
	json_free(st);
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails ? 1 : 0;
}
