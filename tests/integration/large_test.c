/* Integration: one large AllReduce (default 256 MiB of fp32 per rank, --bytes N to change) per
 * algorithm through a real switch and 4 ranks: INC out-of-place, INC in-place, ring
 * out-of-place; every element verified. Then the memory AUTO keeps for failover: two AUTO calls
 * (tuner off: INC with failover) out-of-place must add almost nothing to a rank's peak RSS, two
 * in-place at most one copy of the input (lib/client/coll.c FO_SYNC_BYTES). 1 GiB is an opt-in benchmark (bench/run_all.sh with
 * INCA_BENCH_LARGE=1), not a default test: 4 ranks x 2 buffers x 1 GiB = 8 GiB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "itest.h"
#include "util/util.h"

struct job {
	struct launch_cfg cfg;
	struct itest_shared *sh;
	size_t count;
	double secs[3];
	long extra_kb[64][2]; /* per rank: peak RSS added by 2 AUTO calls, out-of-place / in-place */
};

/* A line "Key:   N kB" of /proc/self/status, -1 if absent. */
static long status_kb(const char *key)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, strlen(key)))
			v = strtol(line + strlen(key), NULL, 10);
	fclose(f);
	return v;
}

/* Peak RSS added by two AUTO AllReduce calls (-1: the kernel cannot reset the peak). */
static long auto_extra_kb(struct inca_comm *comm, const struct job *j, void *in, void *rbuf,
			  int *bad)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY);
	bool reset = fd >= 0 && write(fd, "5", 1) == 1; /* VmHWM := VmRSS */
	long base = status_kb("VmRSS:");

	if (fd >= 0)
		close(fd);
	for (int k = 0; k < 2; k++) {
		struct check_spec s = { .dt = INCA_FP32, .op = INCA_SUM, .mode = CHECK_EXACT,
					.nranks = j->cfg.nranks, .seed = 43, .iter = (uint64_t)k };
		size_t first;
		check_fill(&s, inca_comm_rank(comm), in, 0, j->count);
		if (inca_allreduce_algo(comm, in, rbuf, j->count, INCA_FP32, INCA_SUM, INCA_ALGO_AUTO) ||
		    check_verify(&s, rbuf, 0, j->count, &first))
			(*bad)++;
		if (inca_comm_rank(comm) == 0) /* tuner off: AUTO runs on the switch */
			j->sh->inc_chunks += itest_chunks(j->count, INCA_FP32, &j->cfg);
	}
	return reset && base >= 0 ? status_kb("VmHWM:") - base : -1;
}

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
	inca_comm_set_tuning(comm, 0);
	int r = inca_comm_rank(comm);
	if (r < 64) {
		j->extra_kb[r][0] = auto_extra_kb(comm, j, sbuf, rbuf, &bad);
		j->extra_kb[r][1] = auto_extra_kb(comm, j, rbuf, rbuf, &bad);
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
	long mb = (long)(bytes >> 20), worst[2] = { 0, 0 };
	for (int r = 0; r < j->cfg.nranks && r < 64; r++)
		for (int k = 0; k < 2; k++)
			if (j->extra_kb[r][k] > worst[k] || j->extra_kb[r][k] < 0)
				worst[k] = j->extra_kb[r][k] < 0 || worst[k] < 0 ? -1 : j->extra_kb[r][k];
	if (worst[0] < 0 || worst[1] < 0) {
		printf("# peak-RSS check skipped: /proc/self/clear_refs cannot reset VmHWM here\n");
	} else {
		printf("# 2 AUTO calls of %ld MiB: peak RSS +%ld MiB out-of-place, +%ld MiB in-place "
		       "(worst rank)\n", mb, worst[0] >> 10, worst[1] >> 10);
		ITEST_EXPECT(fails, worst[0] >> 10 < mb / 4,
			     "AUTO out-of-place keeps no copy of a large input (+%ld MiB < %ld)",
			     worst[0] >> 10, mb / 4);
		ITEST_EXPECT(fails, worst[1] >> 10 < mb + mb / 4,
			     "AUTO in-place keeps at most one copy (+%ld MiB < %ld)", worst[1] >> 10,
			     mb + mb / 4);
	}
	json_free(st);
	launch_shm_free(j->sh, sizeof(*j->sh));
	launch_shm_free(j, sizeof(*j));
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails ? 1 : 0;
}
