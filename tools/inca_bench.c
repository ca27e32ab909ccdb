/* inca-bench: nccl-tests-style tables for all nine collectives — INC, every host algorithm
 * libinca accepts for the collective, AUTO (with the algorithm it picked) and Open MPI's own
 * collectives over TCP (bench/ompi-coll-bench under mpirun) — in one run, every result verified
 * exactly (tools/coll_check). Loopback (own inca-switch) or the netns fabric (--fabric PLAN,
 * through tools/fabric_bench.sh). Options: inca-bench --help. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_cli.h"
#include "check.h"
#include "coll_check.h"
#include "json.h"
#include "demo_cli.h"
#include "inca_bench.h"
#include "launch.h"
#include "sweep.h"
#include "util/cli.h"
#include "util/util.h"

struct row_res {
	double time_us, skew_us; /* makespan and start skew, means over the timed calls */
	uint64_t wrong, errors;
	int iters;
	enum inca_algo served; /* AUTO: the algorithm that served most timed calls */
	enum inca_algo chosen_before; /* AUTO: inca_coll_choose before the row */
	enum inca_algo chosen;        /* ... and after it (the library's tuner may have learnt) */
};

struct bench_shared {
	volatile int decide[4]; /* per call (cc_sched) */
	_Atomic unsigned bar_count, bar_gen; /* shm_barrier */
	uint64_t t0[LAUNCH_MAX_RANKS][CC_MAX_ITERS], t1[LAUNCH_MAX_RANKS][CC_MAX_ITERS];
	volatile int valid[4];
	uint64_t wrong[LAUNCH_MAX_RANKS], errors[LAUNCH_MAX_RANKS];
	int iters;
	/* totals, written by rank 0 */
	uint64_t rows, wrong_total, errors_total, ompi_wrong, ompi_errors, ompi_rows_shown;
};

struct bench_job {
	struct bench_opts o;
	struct bench_shared *sh;
	int nranks;
};

static const char *algo_label(int a)
{
	if (a == ALGO_OMPI)
		return "ompi";
	if (a == INCA_ALGO_INC)
		return "INC";
	return inca_algo_name((enum inca_algo)a);
}

static int sync_barrier(struct inca_comm *comm)
{
	int rc = inca_coll(comm, &(struct inca_coll_args){ .coll = INCA_COLL_BARRIER,
							   .algo = INCA_ALGO_RING });
	if (rc)
		fprintf(stderr, "[rank %d] barrier failed: %s\n", inca_comm_rank(comm),
			inca_strerror(rc));
	return rc;
}

/* The algorithm that served most calls between two snapshots. */
static enum inca_algo most_served(const struct inca_coll_counts *a,
				  const struct inca_coll_counts *b, enum inca_coll coll)
{
	enum inca_algo best = INCA_ALGO_AUTO;
	uint64_t most = 0;
	for (int k = 1; k < INCA_ALGO_COUNT; k++) {
		uint64_t d = b->calls[coll][k] - a->calls[coll][k];
		if (d > most) {
			most = d;
			best = (enum inca_algo)k;
		}
	}
	return best;
}

/* Start line of every call: a spinning barrier in shared memory (the ranks are processes on
 * one machine, also in the netns fabric), whose exit skew is microseconds where a barrier over
 * the network would add its own latency to the measurement. Returns 0, or -1 after 60 s
 * (a rank died). */
static int shm_barrier(struct bench_shared *sh, int n)
{
	unsigned gen = atomic_load(&sh->bar_gen);
	if (atomic_fetch_add(&sh->bar_count, 1) == (unsigned)n - 1) {
		atomic_store(&sh->bar_count, 0);
		atomic_fetch_add(&sh->bar_gen, 1);
		return 0;
	}
	uint64_t deadline = util_now_ns() + 60ull * 1000000000ull;
	while (atomic_load(&sh->bar_gen) == gen) {
		sched_yield();
		if (util_now_ns() > deadline)
			return -1;
	}
	return 0;
}

/* One row for one algorithm: before each call rank 0 decides warmup / timed / stop (cc_sched)
 * and publishes it before the start barrier; every rank records its entry and return times
 * of timed calls (common clock; the time of a call is its makespan, cc_latency_mean_s). Returns 0 or -1 (barrier broken). */
static int run_row(struct inca_comm *comm, struct bench_job *j, struct cc_call *c,
		   enum inca_algo algo, uint8_t *sbuf, uint8_t *rbuf, uint64_t *iter_id,
		   struct row_res *res)
{
	const struct bench_opts *o = &j->o;
	struct bench_shared *sh = j->sh;
	int rank = c->rank, n = c->nranks;
	int phase = CC_WARM, timed = 0;
	uint64_t wrong = 0, errors = 0;
	struct cc_sched sched;
	struct inca_coll_counts before, after;
	memset(&before, 0, sizeof(before));
	memset(&after, 0, sizeof(after));
	memset(res, 0, sizeof(*res));
	size_t arg_bytes = c->L.count * inca_dtype_size(c->dt);
	res->chosen_before = inca_coll_choose(comm, c->coll, arg_bytes);
	struct inca_coll_args args = {
		.coll = c->coll, .sendbuf = sbuf, .recvbuf = rbuf, .count = c->L.count,
		.dt = c->dt, .op = c->op, .root = c->root, .algo = algo,
	};
	cc_sched_init(&sched, o->warmup, o->iters, o->budget_s, (double)util_now_ns() * 1e-9);
	for (unsigned step = 0;; step++) {
		if (rank == 0)
			sh->decide[step & 3] = cc_sched_next(&sched, (double)util_now_ns() * 1e-9);
		c->iter = ++*iter_id;
		cc_fill(c, sbuf, rbuf);
		if (shm_barrier(sh, n)) {
			fprintf(stderr, "[rank %d] start barrier timed out\n", rank);
			return -1;
		}
		int d = sh->decide[step & 3];
		if (d == CC_STOP)
			break;
		if (d == CC_TIMED && phase == CC_WARM)
			inca_comm_get_coll_counts(comm, &before, sizeof before);
		phase = d;
		uint64_t t0 = util_now_ns();
		int rc = inca_coll(comm, &args);
		uint64_t t1 = util_now_ns();
		/* Verify only once every rank has returned: a rank that checks its result while
		 * others are still in the call takes their CPU (the check regenerates every rank's
		 * input, 10-100 us at a few KiB) and inflates the makespan of whichever path
		 * delivers its results less evenly. */
		if (shm_barrier(sh, n)) {
			fprintf(stderr, "[rank %d] end barrier timed out\n", rank);
			return -1;
		}
		if (rc) {
			if (!errors)
				fprintf(stderr, "[rank %d] %s %s %zu x %s: %s (%d)\n", rank,
					algo_label(algo), inca_coll_name(c->coll), c->L.count,
					inca_dtype_name(c->dt), inca_strerror(rc), rc);
			errors++;
		} else {
			uint64_t w = cc_verify(c, sbuf, rbuf);
			if (w && !wrong)
				fprintf(stderr, "[rank %d] %s %s %zu x %s %s iter %llu: %llu wrong "
						"elements\n", rank, algo_label(algo),
					inca_coll_name(c->coll), c->L.count, inca_dtype_name(c->dt),
					inca_op_name(c->op), (unsigned long long)c->iter,
					(unsigned long long)w);
			wrong += w;
		}
		if (rank == 0)
			cc_sched_done(&sched);
		if (phase == CC_TIMED && timed < CC_MAX_ITERS) {
			sh->t0[rank][timed] = t0;
			sh->t1[rank][timed] = t1;
			timed++;
		}
	}
	inca_comm_get_coll_counts(comm, &after, sizeof after);
	res->served = most_served(&before, &after, c->coll);
	res->chosen = inca_coll_choose(comm, c->coll, arg_bytes);
	sh->wrong[rank] = wrong;
	sh->errors[rank] = errors;
	if (rank == 0)
		sh->iters = timed;
	__sync_synchronize();
	if (sync_barrier(comm))
		return -1;
	if (rank == 0) {
		res->iters = sh->iters;
		for (int r = 0; r < n; r++) {
			res->wrong += sh->wrong[r];
			res->errors += sh->errors[r];
		}
		double skew_s;
		res->time_us = cc_latency_mean_s(&sh->t0[0][0], &sh->t1[0][0], n, CC_MAX_ITERS,
						 sh->iters, &skew_s) * 1e6;
		res->skew_us = skew_s * 1e6;
	} else {
		res->wrong = wrong;
		res->errors = errors;
	}
	/* rank 0 reads the other ranks' slots above: keep them until it is done */
	if (sync_barrier(comm))
		return -1;
	return 0;
}

static void print_header(const struct bench_opts *o, enum inca_coll coll, int n)
{
	bool link = o->link_bps > 0;
	printf("#\n# %s, %d ranks (busbw = algbw * %s)%s\n", inca_coll_name(coll), n,
	       cc_busbw_text(coll),
	       link ? "; link% = the link floor of the row's kind / time (bench/README.md)" : "");
	printf("# %10s %12s %6s %6s %4s  %-24s %10s %8s %8s %7s %8s%s\n", "size", "count", "type",
	       "redop", "root", "algo", "time", "algbw", "busbw", "#wrong", "skew",
	       link ? "   link%" : "");
	printf("# %10s %12s %6s %6s %4s  %-24s %10s %8s %8s %7s %8s%s\n", "(B)", "(elements)", "",
	       "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", link ? "        " : "");
	fflush(stdout);
}

/* The row measured the INC path: INC itself, or AUTO calls that ran on INC. */
static bool row_is_inc(int algo, const struct row_res *r)
{
	return algo == INCA_ALGO_INC || (algo == INCA_ALGO_AUTO && r->served == INCA_ALGO_INC);
}

/* The least time any call of this kind can take on the fabric's host links (µs), 0 when the
 * link rate is unknown or the collective moves no data. */
static double link_floor_us(const struct bench_opts *o, const struct cc_call *c, bool inc)
{
	if (o->link_bps <= 0)
		return 0;
	return cc_link_factor(c->coll, c->nranks, inc) * (double)c->L.size_bytes * 8.0 /
	       o->link_bps * 1e6;
}

/* inc: the row is INC (its own link floor), else a host algorithm or Open MPI. */
static void print_line(const struct bench_opts *o, const struct cc_call *c, const char *algo,
		       bool inc, const struct row_res *r)
{
	char sz[16], rt[8];
	const char *op = cc_is_reduction(c->coll) ? inca_op_name(c->op) : "none";
	double floor_us = link_floor_us(o, c, inc);
	snprintf(rt, sizeof(rt), "%d", c->root);
	snprintf(sz, sizeof(sz), "%zu", c->L.size_bytes);
	printf("  %10s %12zu %6s %6s %4s  %-24s ", sz, c->L.total_count, inca_dtype_name(c->dt), op,
	       cc_has_root(c->coll) ? rt : "-", algo);
	if (r->errors || !r->iters) {
		printf("%10s %8s %8s %7llu %8s%s\n", "ERR", "-", "-", (unsigned long long)r->wrong,
		       "-", o->link_bps > 0 ? "        -" : "");
	} else {
		double algbw = r->time_us > 0 ? (double)c->L.size_bytes / (r->time_us * 1e-6) / 1e9
					      : 0;
		printf("%10.1f %8.3f %8.3f %7llu", r->time_us, algbw,
		       algbw * cc_busbw_factor(c->coll, c->nranks), (unsigned long long)r->wrong);
		if (r->skew_us >= 0)
			printf(" %8.1f", r->skew_us);
		else
			printf(" %8s", "-");
		if (floor_us > 0 && r->time_us > 0)
			printf(" %7.1f%%", 100.0 * floor_us / r->time_us);
		else if (o->link_bps > 0)
			printf("        -");
		printf("\n");
	}
	fflush(stdout);
}

/* Fabric mode, after the rows of one size: the floors those rows are measured against. They
 * hold for sustained traffic; the fabric's tbf shapers let a burst up to their bucket through
 * at veth speed, so small calls may beat them (link% over 100). */
static void print_floor(const struct bench_opts *o, const struct cc_call *c, bool offloaded)
{
	double host = link_floor_us(o, c, false), inc = link_floor_us(o, c, true);
	if (host <= 0)
		return;
	printf("#   link floor at %.0f Mbit/s: host algorithms and Open MPI >= %.1f us",
	       o->link_bps / 1e6, host);
	if (offloaded)
		printf(", INC >= %.1f us", inc);
	printf(" (bytes the busiest host link carries / rate; a call smaller than the shaper's\n"
	       "#   token bucket can pass faster: bench/README.md)\n");
}

static void json_row(const struct bench_job *j, const struct cc_call *c, int algo,
		     const struct row_res *r)
{
	if (!j->o.json_path)
		return;
	FILE *f = fopen(j->o.json_path, "a");
	if (!f)
		return;
	double algbw = r->time_us > 0 ? (double)c->L.size_bytes / (r->time_us * 1e-6) / 1e9 : 0;
	fprintf(f, "{\"tool\":\"inca-bench\",\"algo\":\"%s\",\"coll\":\"%s\",\"ranks\":%d,"
		   "\"size_bytes\":%zu,\"count\":%zu,\"type\":\"%s\",\"op\":\"%s\",\"root\":%d,"
		   "\"time_us\":%.3f,\"algbw_gbps\":%.6f,\"busbw_gbps\":%.6f,\"wrong\":%llu,"
		   "\"errors\":%llu,\"iters\":%d,\"skew_us\":%.3f",
		algo == INCA_ALGO_AUTO ? "auto" : inca_algo_name((enum inca_algo)algo),
		inca_coll_name(c->coll), c->nranks, c->L.size_bytes, c->L.total_count,
		inca_dtype_name(c->dt), cc_is_reduction(c->coll) ? inca_op_name(c->op) : "none",
		cc_has_root(c->coll) ? c->root : -1, r->time_us, algbw,
		algbw * cc_busbw_factor(c->coll, c->nranks), (unsigned long long)r->wrong,
		(unsigned long long)r->errors, r->iters, r->skew_us);
	double floor_us = link_floor_us(&j->o, c, row_is_inc(algo, r));
	if (floor_us > 0)
		fprintf(f, ",\"link_floor_us\":%.3f", floor_us);
	if (algo == INCA_ALGO_AUTO)
		fprintf(f, ",\"auto_choose\":\"%s\",\"auto_choose_before\":\"%s\","
			   "\"auto_served\":\"%s\"", inca_algo_name(r->chosen),
			inca_algo_name(r->chosen_before), inca_algo_name(r->served));
	fprintf(f, "}\n");
	fclose(f);
}

/* Rank 0: the Open MPI row matching this call, printed and copied to the JSON file. */
static void ompi_print(struct bench_job *j, const struct cc_call *c)
{
	const char *op = cc_is_reduction(c->coll) ? inca_op_name(c->op) : "none";
	const struct ompi_row *r = bench_ompi_find((int)c->coll, c->L.size_bytes,
						   inca_dtype_name(c->dt), op);
	if (!r)
		return;
	struct row_res res = { .time_us = r->time_us, .skew_us = r->skew_us, .wrong = r->wrong,
			       .errors = r->errors, .iters = r->iters };
	print_line(&j->o, c, "ompi (TCP)", false, &res);
	j->sh->ompi_wrong += r->wrong;
	j->sh->ompi_errors += r->errors + (r->iters ? 0 : 1);
	j->sh->ompi_rows_shown++;
	if (j->o.json_path) {
		FILE *f = fopen(j->o.json_path, "a");
		if (f) {
			fprintf(f, "%s\n", r->line);
			fclose(f);
		}
	}
}

static int bench_rank_main(struct inca_comm *comm, void *arg)
{
	struct bench_job *j = arg;
	const struct bench_opts *o = &j->o;
	int rank = inca_comm_rank(comm), n = inca_comm_size(comm);
	uint64_t maxb = 64;
	for (int p = 0; p < o->npairs; p++)
		if (o->pairs[p].max_bytes > maxb)
			maxb = o->pairs[p].max_bytes;
	maxb = (maxb + 63) & ~63ull;
	uint8_t *sbuf = NULL, *rbuf = NULL;
	if (posix_memalign((void **)&sbuf, 64, maxb) || posix_memalign((void **)&rbuf, 64, maxb)) {
		fprintf(stderr, "[rank %d] out of memory\n", rank);
		free(sbuf);
		return 4;
	}
	bool tty = rank == 0 && isatty(2);
	uint64_t iter_id = 0, bad = 0;
	int rc = 0;
	unsigned vstep = 0;
	for (int k = 0; k < o->ncolls && !rc; k++) {
		enum inca_coll coll = o->colls[k];
		if (rank == 0)
			print_header(o, coll, n);
		for (int p = 0; p < o->npairs && !rc; p++) {
			const struct sweep_pair *pr = &o->pairs[p];
			size_t es = inca_dtype_size(pr->dt);
			if (coll == INCA_COLL_BARRIER && p > 0)
				break;
			for (uint64_t b = pr->min_bytes; b <= pr->max_bytes && !rc; b *= pr->factor) {
				struct cc_call c = { .coll = coll, .dt = pr->dt, .op = pr->op,
						     .root = o->root, .rank = rank, .nranks = n,
						     .seed = o->seed };
				bool last = coll == INCA_COLL_BARRIER || b == 0;
				if (cc_layout_for(coll, b, es, n, &c.L)) {
					if (last)
						break;
					continue; /* smaller than one element per rank */
				}
				for (int a = 0; a < o->nalgos && !rc; a++) {
					int algo = o->algos[a];
					if (algo == ALGO_OMPI) {
						if (rank == 0)
							ompi_print(j, &c);
						continue;
					}
					/* Rank 0's answer for everyone (the AM may flip INC on one
					 * rank's view first). */
					if (rank == 0)
						j->sh->valid[vstep & 3] = inca_coll_algo_valid(
							comm, coll, (enum inca_algo)algo);
					if (sync_barrier(comm)) {
						rc = 3;
						break;
					}
					__sync_synchronize();
					int ok = j->sh->valid[vstep++ & 3];
					if (!ok)
						continue;
					if (tty && b >= (4u << 20))
						fprintf(stderr, "\r# running %s %llu B %s ...\033[K",
							inca_coll_name(coll), (unsigned long long)b,
							algo_label(algo));
					struct row_res res;
					if (run_row(comm, j, &c, (enum inca_algo)algo, sbuf, rbuf,
						    &iter_id, &res)) {
						rc = 3;
						break;
					}
					if (tty && b >= (4u << 20))
						fprintf(stderr, "\r\033[K");
					bad += res.wrong + res.errors;
					if (rank != 0)
						continue;
					char label[40];
					if (algo == INCA_ALGO_AUTO && res.served != res.chosen &&
					    res.served != INCA_ALGO_AUTO)
						snprintf(label, sizeof(label), "auto->%s (ran %s)",
							 algo_label(res.chosen),
							 algo_label(res.served));
					else if (algo == INCA_ALGO_AUTO)
						snprintf(label, sizeof(label), "auto->%s",
							 algo_label(res.chosen));
					else
						snprintf(label, sizeof(label), "%s", algo_label(algo));
					print_line(o, &c, label, row_is_inc(algo, &res), &res);
					json_row(j, &c, algo, &res);
					j->sh->rows++;
					j->sh->wrong_total += res.wrong;
					j->sh->errors_total += res.errors + (res.iters ? 0 : 1);
				}
				if (rank == 0 && !rc)
					print_floor(o, &c, inca_coll_algo_valid(comm, coll,
										INCA_ALGO_INC));
				if (last)
					break;
			}
		}
	}
	free(sbuf);
	free(rbuf);
	if (rc)
		return rc;
	return bad ? 1 : 0;
}

/* ---------------------------------------------------------------- command line */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: inca-bench [options]\n"
		"  -r, --ranks N          rank processes (default 4, at most 64)\n"
		"  -b, --minbytes N       smallest size (default 4; K/M/G suffixes). Sizes are\n"
		"                         nccl-tests' \"size\": the largest buffer of the call\n"
		"  -e, --maxbytes N       largest size (default 1M)\n"
		"  -f, --stepfactor F     size multiplier between rows (default 4)\n"
		"  -C, --colls LIST       collectives: allreduce,reduce,bcast,allgather,\n"
		"                         reducescatter,alltoall,gather,scatter,barrier or all (default)\n"
		"  -a, --algos LIST       inc, ring, recdbl, rabenseifner, binomial, bruck, pairwise,\n"
		"                         linear, host (every host algorithm), auto, ompi, all\n"
		"                         (default all = inc,host,auto,ompi). An algorithm that does not\n"
		"                         apply to a collective (inca_coll_algo_valid) is left out\n"
		"  -t, --types LIST       type:op pairs (default fp32:sum); a pair may carry its own\n"
		"                         range: int32:max@4-64K/16. Data-movement collectives use the\n"
		"                         type only\n"
		"  -w, --warmup N         warmup iterations per row, at most (default 5)\n"
		"  -n, -i, --iters N      timed iterations per row, at most (default 20)\n"
		"      --budget S         wall-time bound of one row's timed part (default 0.5 s)\n"
		"      --root R           root of reduce, bcast, gather, scatter (default 0)\n"
		"      --json FILE        one JSON line per row (INCA and Open MPI rows)\n"
		"      --plot PNG         algbw vs size per collective (plot_coll.py;\n"
		"                         /usr/bin/python3 + matplotlib; skipped if missing)\n"
		"      --mpirun PATH      Open MPI launcher (default mpirun.openmpi)\n"
		"      --ompi-bench PATH  the MPI program (default: $INCA_OMPI_BENCH, else the build\n"
		"                         tree's or the installed ompi-coll-bench)\n"
		"      --fabric PLAN      ranks in the network namespaces of a fabric plan\n"
		"                         (tools/fabric_bench.sh); Open MPI through\n"
		"                         ompi-fabric-run, rank r where INCA's rank r is\n"
		"      --link-rate BPS    host link rate (from the fabric harness; shown only)\n"
		"      --switch PATH      inca-switch binary; --addr-index K loopback block (default 43)\n"
		"      --rto-us N         clients' minimum retransmission timeout\n"
		"      --seed S           data seed (default 1)\n"
		"  -v, --verbose          libinca warnings on stderr\n"
		"  -h, --help             this text\n"
		"  -V, --version          print the version and exit\n"
		"Every result is verified on every rank against an exact reference (#wrong). Auto rows\n"
		"show inca_coll_choose's pick for the size after the row, and \"(ran X)\" when the\n"
		"timed AUTO calls were served by another algorithm (the library's tuner exploring).\n"
		"Exit 0 only if every row is right.\n");
}

static int parse_algos(const char *list, int *out)
{
	char buf[256];
	int n = 0;
	snprintf(buf, sizeof(buf), "%s", list);
	char *save = NULL;
	bool want[INCA_ALGO_COUNT] = { false }, ompi = false;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "all")) {
			for (int a = 0; a < INCA_ALGO_COUNT; a++)
				want[a] = true;
			ompi = true;
		} else if (!strcmp(t, "host")) {
			for (int a = INCA_ALGO_RING; a < INCA_ALGO_COUNT; a++)
				want[a] = true;
		} else if (!strcmp(t, "ompi") || !strcmp(t, "mpi")) {
			ompi = true;
		} else if (!strcasecmp(t, "inc")) {
			want[INCA_ALGO_INC] = true;
		} else {
			int a = inca_algo_parse(t);
			if (a < 0) {
				fprintf(stderr, "inca-bench: unknown algorithm '%s'\n", t);
				return -EINVAL;
			}
			want[a] = true;
		}
	}
	/* Fixed order: INC, host algorithms, auto, ompi. */
	for (int a = 1; a < INCA_ALGO_COUNT; a++)
		if (want[a])
			out[n++] = a;
	if (want[INCA_ALGO_AUTO])
		out[n++] = INCA_ALGO_AUTO;
	if (ompi)
		out[n++] = ALGO_OMPI;
	return n ? n : -EINVAL;
}

enum { OPT_ROOT = BENCH_OPT_TOOL, OPT_MPIRUN, OPT_OMPIBENCH, OPT_RTO };

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		BENCH_CLI_LONGOPTS,
		{ "colls", required_argument, 0, 'C' },
		{ "algos", required_argument, 0, 'a' },
		{ "root", required_argument, 0, OPT_ROOT },
		{ "mpirun", required_argument, 0, OPT_MPIRUN },
		{ "ompi-bench", required_argument, 0, OPT_OMPIBENCH },
		{ "rto-us", required_argument, 0, OPT_RTO },
		{ 0, 0, 0, 0 },
	};
	static struct bench_job job;
	static struct launch_plan plan;
	struct bench_opts *o = &job.o;
	struct launch_cfg cfg;
	launch_cfg_defaults(&cfg);
	cfg.job_timeout_s = 900;
	cfg.addr_index = 43;
	struct bench_cli b = { .tool = "inca-bench", .iters_min = 1, .minb = 4, .maxb = 1u << 20,
				.factor = 4, .iters = 20, .warmup = 5, .budget_s = 0.5, .seed = 1,
				.types = "fp32:sum" };
	const char *colls = "all", *algos = "all";
	struct ompi_cfg oc = { 0 };
	const char *tool = b.tool;
	long long ll;
	int c;
	while ((c = bench_cli_next(&b, &cfg, argc, argv, "r:b:e:f:C:a:t:w:n:i:vhV", lo)) > 0) {
		switch (c) {
		case 'C': colls = optarg; break;
		case 'a': algos = optarg; break;
		case OPT_ROOT:
			if (util_cli_int(tool, "--root", optarg, 0, LAUNCH_MAX_RANKS - 1, &ll))
				return 2;
			o->root = (int)ll;
			break;
		case OPT_MPIRUN: oc.mpirun = optarg; break;
		case OPT_OMPIBENCH: oc.bench = optarg; break;
		case OPT_RTO:
			if (util_cli_int(tool, "--rto-us", optarg, 0, 60000000, &ll))
				return 2;
			cfg.rto_us = (uint32_t)ll;
			break;
		default: goto bad; /* getopt_long named the option */
		}
	}
	if (c == BENCH_CLI_HELP) {
		usage(stdout);
		return 0;
	}
	if (c != BENCH_CLI_END)
		return c == BENCH_CLI_VERSION ? 0 : 2;
	if (bench_cli_check(&b, argc, argv) || bench_cli_fabric(&b, &plan, &cfg))
		return 2;
	if (b.fabric_path && !cfg.rto_us)
		cfg.rto_us = 50000; /* as inca-fabric-demo: queues on rate-limited hops */
	o->iters = b.iters;
	o->warmup = b.warmup;
	o->budget_s = b.budget_s;
	o->seed = b.seed;
	o->json_path = b.json_path;
	o->link_bps = b.link_bps;
	o->ncolls = cc_parse_colls(colls, o->colls);
	if (o->ncolls <= 0) {
		util_cli_error(tool, "--colls '%s': expected a list of allreduce, reduce, bcast, "
			       "allgather, reducescatter, alltoall, gather, scatter, barrier or all",
			       colls);
		return 2;
	}
	o->nalgos = parse_algos(algos, o->algos);
	if (o->nalgos <= 0) {
		util_cli_error(tool, "--algos '%s': no algorithm selected", algos);
		return 2;
	}
	o->npairs = bench_cli_pairs(&b, o->pairs, SWEEP_MAX_PAIRS);
	if (o->npairs < 0)
		return 2;
	if (o->root >= cfg.nranks) {
		util_cli_error(tool, "--root %d: not a rank of %d (0..%d)", o->root, cfg.nranks,
			       cfg.nranks - 1);
		return 2;
	}
	bool want_inc = false, want_ompi = false;
	for (int a = 0; a < o->nalgos; a++) {
		want_inc |= o->algos[a] == INCA_ALGO_INC || o->algos[a] == INCA_ALGO_AUTO;
		want_ompi |= o->algos[a] == ALGO_OMPI;
	}
	if (bench_cli_json_create(&b))
		return 2;
	job.sh = launch_shm_alloc(sizeof(*job.sh));
	if (!job.sh)
		return 2;
	job.nranks = cfg.nranks;
	cfg.seed = o->seed;
	cfg.no_switch = !want_inc && !b.fabric_path;
	cfg.log_level = b.verbose ? 1 : 0;
	uint64_t t_start = util_now_ns();
	int fail = 0;

	printf("# inca-bench: %d collectives, %d ranks, %s; every result verified exactly\n",
	       o->ncolls, cfg.nranks, b.fabric_path ? "netns fabric" : "loopback");
	if (b.fabric_path) {
		printf("# fabric : %s (%s), ranks %s .. %s in %s .. %s%s\n", plan.name,
		       plan.desc[0] ? plan.desc : b.fabric_path, plan.ranks[0].ip,
		       plan.ranks[cfg.nranks - 1].ip, plan.ranks[0].netns,
		       plan.ranks[cfg.nranks - 1].netns, plan.am_addr[0] ? ", trees from the AM" : "");
		if (o->link_bps > 0)
			printf("# links  : hosts at %.0f Mbit/s\n", o->link_bps / 1e6);
	}
	printf("# rows   : up to %d timed + %d warmup iterations (%.2f s budget per row), "
	       "out-of-place, root %d; time = mean per call from the first rank's entry to the last rank's "
	       "return (common clock); algbw = size/time\n", o->iters, o->warmup, o->budget_s, o->root);

	/* Open MPI first (alone on the CPUs), its rows are printed next to INCA's. */
	int ompi_rc = 0;
	if (want_ompi) {
		oc.fabric_plan = b.fabric_path;
		oc.types_arg = b.types;
		oc.colls_arg = colls;
		oc.minb = b.minb;
		oc.maxb = b.maxb;
		oc.factor = b.factor;
		oc.timeout_s = 600;
		ompi_rc = bench_ompi_run(&oc, o, cfg.nranks);
		if (ompi_rc >= 0)
			printf("# ompi   : %d rows (Open MPI %s collectives over TCP%s, same sizes, "
			       "data and checks)\n", ompi_rc, "tuned", b.fabric_path ? " in the fabric" : "");
		else if (ompi_rc != -ENOENT)
			fail++;
	}

	struct launch_addrs a;
	struct launch_switch sw;
	bool own_switch = want_inc && !b.fabric_path;
	if (b.fabric_path) {
		launch_addrs_init(&a, 0);
	} else if (launch_addrs_pick(&a, cfg.addr_index, cfg.nranks)) {
		fprintf(stderr, "inca-bench: loopback block %u is busy\n", cfg.addr_index);
		return 2;
	}
	if (own_switch) {
		int rc = launch_switch_start(&cfg, &a, NULL, &sw);
		if (rc) {
			fprintf(stderr, "inca-bench: could not start inca-switch: %s\n", strerror(-rc));
			return 2;
		}
		printf("# switch : %s (pid %d) on %s:%u, tree %u, %u slots\n", sw.path, (int)sw.pid,
		       a.switch_ip, a.switch_port, cfg.tree_id, cfg.nslots);
	}
	fflush(stdout);
	int status[LAUNCH_MAX_RANKS];
	int bad_ranks = launch_run_ranks(&cfg, &a, bench_rank_main, &job, status);
	printf("#\n");
	if (own_switch) {
		struct json *stats = NULL;
		int sw_rc = launch_switch_stop(&sw, &stats);
		struct launch_sw_summary s;
		launch_sw_summarize(stats, &s);
		if (stats)
			printf("# switch stats: rx %.0f pkts, tx %.0f pkts, aggregations %.0f, "
			       "duplicates %.0f, drops %.0f\n", s.rx_pkts, s.tx_pkts, s.aggregations,
			       s.duplicates, s.drops);
		if (sw_rc) {
			printf("# ERROR: inca-switch exit status %d\n", sw_rc);
			fail++;
		}
		json_free(stats);
	}
	for (int r = 0; r < cfg.nranks; r++)
		if (status[r] != 0)
			printf("# ERROR: rank %d exited with status %d\n", r, status[r]);
	struct bench_shared *sh = job.sh;
	if (bad_ranks || sh->wrong_total || sh->errors_total || sh->ompi_wrong || sh->ompi_errors)
		fail++;
	if (want_ompi && ompi_rc > 0 && sh->ompi_rows_shown != (uint64_t)ompi_rc) {
		printf("# ERROR: %llu of %d Open MPI rows matched INCA rows\n",
		       (unsigned long long)sh->ompi_rows_shown, ompi_rc);
		fail++;
	}
	printf("# %s: %llu INCA rows (%llu wrong elements, %llu failed calls), %llu Open MPI rows "
	       "(%llu wrong, %llu failed calls), %.1f s\n", fail ? "FAILED" : "OK",
	       (unsigned long long)sh->rows, (unsigned long long)sh->wrong_total,
	       (unsigned long long)sh->errors_total, (unsigned long long)sh->ompi_rows_shown,
	       (unsigned long long)sh->ompi_wrong, (unsigned long long)sh->ompi_errors,
	       (double)(util_now_ns() - t_start) * 1e-9);
	launch_shm_free(job.sh, sizeof(*job.sh));
	if (b.plot_path)
		demo_plot_with("plot_coll.py", o->json_path, b.plot_path);
	return fail ? 1 : 0;

bad:
	fprintf(stderr, "inca-bench: --help lists the options\n");
	return 2;
}
