/* allreduce_example: the smallest complete libinca program. Run one process per rank against a
 * switch started with examples/switch-loopback.conf (see README "Running the pieces by hand"):
 *   allreduce-example RANK SIZE [COUNT]      rank r binds 127.0.0.(10+r):4791 */
#include <inca/inca.h>

#include <stdio.h>
#include <stdlib.h>

static void log_to_stderr(void *ctx, int level, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "libinca[%d]: %s\n", level, msg);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s RANK SIZE [COUNT]\n", argv[0]);
		return 2;
	}
	int rank = atoi(argv[1]), size = atoi(argv[2]);
	size_t count = argc > 3 ? strtoul(argv[3], NULL, 10) : 1u << 20;
	char data_addr[32];
	snprintf(data_addr, sizeof data_addr, "127.0.0.%d:4791", 10 + rank);

	struct inca_comm_opts o = {
		.struct_size = sizeof(struct inca_comm_opts), /* or inca_comm_opts_init(&o) */
		.rank = rank,
		.size = size,
		.bootstrap_addr = "127.0.0.1:29500",
		.switch_addr = "127.0.0.1:4791",
		.data_addr = data_addr,
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

	int32_t *buf = malloc(count * sizeof *buf);
	if (!buf)
		return 1;
	for (size_t i = 0; i < count; i++)
		buf[i] = (int32_t)(rank + 1) * (int32_t)(i % 1000);

	/* In place, through the switch; then the same on the host ring for comparison. */
	rc = inca_allreduce_algo(comm, buf, buf, count, INCA_INT32, INCA_SUM, INCA_ALGO_INC);
	long wrong = 0;
	int32_t ranksum = size * (size + 1) / 2;
	for (size_t i = 0; rc == 0 && i < count; i++)
		wrong += buf[i] != ranksum * (int32_t)(i % 1000);
	printf("rank %d: INC allreduce of %zu int32: %s, %ld wrong\n", rank, count,
	       rc ? inca_strerror(rc) : "ok", wrong);

	struct inca_comm_stats st;
	inca_comm_get_stats(comm, &st, sizeof st);
	printf("rank %d: %llu packets sent, %llu retransmitted\n", rank,
	       (unsigned long long)st.tx_pkts, (unsigned long long)st.retransmits);
	free(buf);
	inca_comm_destroy(comm);
	return rc || wrong ? 1 : 0;
}
