/* Unit tests of the collective dispatch (coll.c) without a switch: argument validation of
 * inca_coll and the nine entry points, names, the nonblocking AllReduce (several outstanding,
 * test/wait, blocking calls after them), and per-path counters. Host algorithms themselves are
 * tested in host_coll_test.c. */
#include <stdint.h>

#include "client_test_util.h"

static int rank_nonblocking(struct inca_comm *c, int rank, int n, void *arg)
{
	enum { K = 6, N = 5003 };
	static int32_t in[K][N], out[K][N];
	struct inca_request *req[K];
	int done = 0;

	for (int k = 0; k < K; k++)
		for (int i = 0; i < N; i++)
			in[k][i] = (int32_t)(i * (k + 1) + rank);
	for (int k = 0; k < K; k++)
		CHECK_EQ(inca_iallreduce(c, in[k], out[k], N, INCA_INT32, INCA_SUM, &req[k]), 0);
	/* inca_test on the first until done, inca_wait on the rest. */
	for (int spins = 0; !done; spins++) {
		CHECK_EQ(inca_test(&req[0], &done), 0);
		CHECK(spins < 10000000);
	}
	CHECK(req[0] == NULL);
	for (int k = 1; k < K; k++) {
		CHECK_EQ(inca_wait(&req[k]), 0);
		CHECK(req[k] == NULL);
	}
	for (int k = 0; k < K; k++)
		for (int i = 0; i < N; i++)
			CHECK_EQ(out[k][i], (int32_t)(n * i * (k + 1) + n * (n - 1) / 2));
	/* A blocking call right after a nonblocking one: runs after it, in order. */
	struct inca_request *r;
	int32_t v = rank + 1, s = 0;
	CHECK_EQ(inca_iallreduce(c, in[0], out[0], N, INCA_INT32, INCA_MAX, &r), 0);
	CHECK_EQ(inca_allreduce(c, &v, &s, 1, INCA_INT32, INCA_SUM), 0);
	CHECK_EQ(s, n * (n + 1) / 2);
	CHECK_EQ(inca_wait(&r), 0);
	CHECK_EQ(out[0][N - 1], (int32_t)((N - 1) + n - 1));
	/* Bad arguments fail at start, nothing queued. */
	CHECK_EQ(inca_iallreduce(c, in[0], out[0], N, INCA_FP32, INCA_BXOR, &r), -ENOTSUP);
	CHECK(r == NULL);
	CHECK_EQ(inca_iallreduce(c, in[0], out[0], N, INCA_INT32, INCA_SUM, NULL), -EINVAL);
	CHECK_EQ(inca_wait(NULL), -EINVAL);
	CHECK_EQ(inca_test(NULL, &done), -EINVAL);
	/* Left outstanding at destroy: inca_comm_destroy finishes it first. */
	CHECK_EQ(inca_iallreduce(c, &v, &s, 1, INCA_INT32, INCA_SUM, &r), 0);
	CHECK_EQ(inca_wait(&r), 0);

	struct inca_coll_counts cc;
	CHECK_EQ(inca_comm_get_coll_counts(c, &cc, sizeof cc), 0);
	uint64_t all = 0;
	for (int a = 0; a < INCA_ALGO_COUNT; a++)
		all += cc.calls[INCA_COLL_ALLREDUCE][a];
	CHECK_EQ(all, K + 3);
	CHECK_EQ(cc.calls[INCA_COLL_ALLREDUCE][INCA_ALGO_INC], 0); /* no switch */
	CHECK_EQ(cc.failovers, 0);
	return 0;
}

static int rank_args(struct inca_comm *c, int rank, int n, void *arg)
{
	int32_t a[64] = { 0 }, b[64] = { 0 };
	struct inca_coll_args x = { .coll = INCA_COLL_ALLREDUCE, .sendbuf = a, .recvbuf = b,
				    .count = 4, .dt = INCA_INT32, .op = INCA_SUM };

	CHECK_EQ(inca_coll(NULL, &x), -EINVAL);
	CHECK_EQ(inca_coll(c, NULL), -EINVAL);
	x.coll = INCA_COLL_COUNT;
	CHECK_EQ(inca_coll(c, &x), -EINVAL);
	x.coll = INCA_COLL_ALLREDUCE;
	x.algo = INCA_ALGO_COUNT;
	CHECK_EQ(inca_coll(c, &x), -EINVAL);
	x.algo = INCA_ALGO_INC; /* no switch */
	CHECK_EQ(inca_coll(c, &x), -ENOTSUP);
	x.algo = INCA_ALGO_BRUCK; /* not an AllReduce algorithm */
	CHECK_EQ(inca_coll(c, &x), -ENOTSUP);
	x.algo = INCA_ALGO_AUTO;
	x.dt = INCA_FP32;
	x.op = INCA_BAND;
	CHECK_EQ(inca_coll(c, &x), -ENOTSUP);
	/* Rooted collectives: root out of range. */
	CHECK_EQ(inca_bcast(c, a, 4, INCA_INT32, n), -EINVAL);
	CHECK_EQ(inca_reduce(c, a, b, 4, INCA_INT32, INCA_SUM, -1), -EINVAL);
	CHECK_EQ(inca_gather(c, a, b, 4, INCA_INT32, n + 3), -EINVAL);
	/* NULL buffers where data is needed; partial overlap; no in-place AllToAll. */
	CHECK_EQ(inca_allgather(c, NULL, b, 4, INCA_INT32), -EINVAL);
	CHECK_EQ(inca_allreduce(c, a, a + 1, 4, INCA_INT32, INCA_SUM), -EINVAL);
	CHECK_EQ(inca_alltoall(c, a, a, 4, INCA_INT32), -EINVAL);
	CHECK_EQ(inca_reduce_scatter(c, a, a, 4, INCA_INT32, INCA_SUM), -EINVAL);
	CHECK_EQ(inca_allgather(c, a, b, SIZE_MAX / 8, INCA_INT32), -EINVAL);
	CHECK_EQ(inca_reduce(c, a, b, 4, (enum inca_dtype)77, INCA_SUM, 0), -EINVAL);
	/* Zero counts are no-ops; bad calls above changed nothing, so the ranks still agree. */
	CHECK_EQ(inca_allgather(c, NULL, NULL, 0, INCA_INT32), 0);
	int32_t v = rank, s = -1;
	CHECK_EQ(inca_allreduce(c, &v, &s, 1, INCA_INT32, INCA_MAX), 0);
	CHECK_EQ(s, n - 1);
	CHECK_EQ(inca_coll_algo_valid(c, INCA_COLL_ALLREDUCE, INCA_ALGO_INC), 0);
	CHECK_EQ(inca_coll_algo_valid(c, INCA_COLL_ALLREDUCE, INCA_ALGO_AUTO), 1);
	CHECK_EQ(inca_coll_algo_valid(c, INCA_COLL_ALLREDUCE, INCA_ALGO_RING), 1);
	CHECK(inca_coll_choose(c, INCA_COLL_ALLREDUCE, 1 << 20) != INCA_ALGO_INC);

	/* Buffer extents (what the MPI interposer checks for aliasing). */
	size_t sb = 1, rb = 1;
	struct inca_coll_args e = { .coll = INCA_COLL_ALLGATHER, .count = 3, .dt = INCA_FP64 };
	CHECK_EQ(inca_coll_extent(c, &e, &sb, &rb), 0);
	CHECK(sb == 24 && rb == 24 * (size_t)n);
	e.coll = INCA_COLL_REDUCE;
	e.root = 1;
	CHECK_EQ(inca_coll_extent(c, &e, &sb, &rb), 0);
	CHECK(sb == 24 && rb == (rank == 1 ? 24u : 0u));
	e.coll = INCA_COLL_SCATTER;
	CHECK_EQ(inca_coll_extent(c, &e, &sb, &rb), 0);
	CHECK(sb == (rank == 1 ? 24 * (size_t)n : 0u) && rb == 24);
	e.coll = INCA_COLL_BARRIER;
	CHECK_EQ(inca_coll_extent(c, &e, &sb, &rb), 0);
	CHECK(sb == 0 && rb == 0);
	e.coll = INCA_COLL_COUNT;
	CHECK_EQ(inca_coll_extent(c, &e, &sb, &rb), -EINVAL);
	e.coll = INCA_COLL_ALLREDUCE;
	e.dt = (enum inca_dtype)77;
	CHECK_EQ(inca_coll_extent(c, &e, &sb, &rb), -EINVAL);
	CHECK_EQ(inca_coll_extent(NULL, &e, &sb, &rb), -EINVAL);
	return 0;
}

int main(void)
{
	struct inca_comm_opts o = { .struct_size = sizeof o, .timeout_ms = 20000 };

	CHECK(strcmp(inca_coll_name(INCA_COLL_REDUCE_SCATTER), "reducescatter") == 0);
	CHECK(strcmp(inca_coll_name((enum inca_coll)99), "?") == 0);
	CHECK(strcmp(inca_algo_name(INCA_ALGO_RABENSEIFNER), "rabenseifner") == 0);
	CHECK_EQ(inca_algo_parse("pairwise"), INCA_ALGO_PAIRWISE);
	CHECK_EQ(inca_algo_parse("nope"), -EINVAL);
	CHECK_EQ(inca_algo_parse(NULL), -EINVAL);
	for (int a = 0; a < INCA_ALGO_COUNT; a++)
		CHECK_EQ(inca_algo_parse(inca_algo_name((enum inca_algo)a)), a);

	CHECK_EQ(test_run_ranks(3, 47000, &o, rank_nonblocking, NULL), 0);
	CHECK_EQ(test_run_ranks(2, 48000, &o, rank_args, NULL), 0);
	CHECK_EQ(test_run_ranks(1, 49000, &o, rank_nonblocking, NULL), 0);
	printf("coll_test: ok\n");
	return 0;
}
