/* xdp_member: one libinca rank for the AF_XDP tests and benchmark (tests/netns/test_xdp.sh,
 * bench/bench_switch_xdp.sh). Runs ITERS in-network AllReduces (INCA_ALGO_INC) of COUNT
 * elements of int32 sum, fp32 sum and int32 max, each with inputs that make every result
 * element predictable, and checks every element exactly. Prints one line
 *   rank R: ok iters N elems E wrong W seconds S retransmits X
 * and exits 0 only if every call succeeded and nothing was wrong.
 * With a last argument `bench` it is a load generator: ITERS fp32 sums from one constant
 * input into another buffer, only the last result checked.
 *
 * usage: xdp_member RANK SIZE BOOTSTRAP_IP:PORT SWITCH_IP:PORT DATA_IP:PORT COUNT ITERS [bench] */
#include <inca/inca.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void log_to_stderr(void *ctx, int level, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "libinca[%d]: %s\n", level, msg);
}

int main(int argc, char **argv)
{
	if (argc != 8 && !(argc == 9 && !strcmp(argv[8], "bench"))) {
		fprintf(stderr, "usage: %s RANK SIZE BOOTSTRAP SWITCH DATA_ADDR COUNT ITERS [bench]\n",
			argv[0]);
		return 2;
	}
	bool bench = argc == 9;
	int rank = atoi(argv[1]), size = atoi(argv[2]);
	size_t count = strtoul(argv[6], NULL, 10);
	long iters = strtol(argv[7], NULL, 10);
	char host_ip[32];
	snprintf(host_ip, sizeof host_ip, "%s", argv[5]);
	char *colon = strchr(host_ip, ':');
	if (colon)
		*colon = 0;
	struct inca_comm_opts o = {
		.struct_size = sizeof(struct inca_comm_opts),
		.rank = rank,
		.size = size,
		.bootstrap_addr = argv[3],
		.host_ip = host_ip,
		.switch_addr = argv[4],
		.data_addr = argv[5],
		.tree_id = 1,
		.key = 0x5eed0001,
		.log_fn = log_to_stderr,
		.log_level = 1,
	};
	struct inca_comm *comm;
	int rc = inca_comm_create(&o, &comm);
	if (rc) {
		fprintf(stderr, "rank %d: inca_comm_create: %s\n", rank, inca_strerror(rc));
		return 1;
	}
	int32_t *ib = malloc(count * sizeof *ib);
	float *fb = malloc(count * sizeof *fb);
	if (!ib || !fb)
		return 1;
	long wrong = 0;
	int32_t ranksum = size * (size + 1) / 2;
	if (bench) {
		float *in = malloc(count * sizeof *in);
		if (!in)
			return 1;
		for (size_t i = 0; i < count; i++)
			in[i] = (float)((rank + 1) * (int)(i % 512));
		rc = inca_barrier(comm);
		double tb = now_s();
		for (long it = 0; rc == 0 && it < iters; it++)
			rc = inca_allreduce_algo(comm, in, fb, count, INCA_FP32, INCA_SUM,
						 INCA_ALGO_INC);
		double secs = now_s() - tb;
		for (size_t i = 0; rc == 0 && i < count; i++)
			wrong += fb[i] != (float)(ranksum * (int)(i % 512));
		printf("rank %d: %s iters %ld elems %zu wrong %ld seconds %.3f\n", rank,
		       rc ? inca_strerror(rc) : "ok", iters, count, wrong, secs);
		free(in);
		iters = 0;
	}
	double t0 = now_s();
	for (long it = 0; rc == 0 && it < iters; it++) {
		/* int32 sum: rank r contributes (r+1) * (i % 1000 + it) */
		for (size_t i = 0; i < count; i++)
			ib[i] = (int32_t)(rank + 1) * (int32_t)(i % 1000 + (size_t)it);
		rc = inca_allreduce_algo(comm, ib, ib, count, INCA_INT32, INCA_SUM, INCA_ALGO_INC);
		for (size_t i = 0; rc == 0 && i < count; i++)
			wrong += ib[i] != ranksum * (int32_t)(i % 1000 + (size_t)it);
		if (rc)
			break;
		/* fp32 sum of small integers: exact in any order */
		for (size_t i = 0; i < count; i++)
			fb[i] = (float)((rank + 1) * (int)(i % 512));
		rc = inca_allreduce_algo(comm, fb, fb, count, INCA_FP32, INCA_SUM, INCA_ALGO_INC);
		for (size_t i = 0; rc == 0 && i < count; i++)
			wrong += fb[i] != (float)(ranksum * (int)(i % 512));
		if (rc)
			break;
		/* int32 max: the rank with the largest (i + r) % size wins */
		for (size_t i = 0; i < count; i++)
			ib[i] = (int32_t)((i + (size_t)rank) % (size_t)size) * 7 - 3;
		rc = inca_allreduce_algo(comm, ib, ib, count, INCA_INT32, INCA_MAX, INCA_ALGO_INC);
		for (size_t i = 0; rc == 0 && i < count; i++)
			wrong += ib[i] != (int32_t)(size - 1) * 7 - 3;
	}
	double secs = now_s() - t0;
	struct inca_comm_stats st;
	inca_comm_get_stats(comm, &st, sizeof st);
	if (!bench)
		printf("rank %d: %s iters %ld elems %zu wrong %ld seconds %.3f retransmits %llu\n", rank,
	       rc ? inca_strerror(rc) : "ok", iters, count, wrong, secs,
	       (unsigned long long)st.retransmits);
	free(ib);
	free(fb);
	inca_comm_destroy(comm);
	return rc || wrong ? 1 : 0;
}
