/* ompi-coll-bench: the Open MPI baseline of inca-bench. Times MPI's own collectives (as
 * configured by mpirun, e.g. Open MPI over TCP) with inca-bench's sizes, iteration scheme and
 * data, verifies every result with tools/coll_check (the same reference), and writes one JSON
 * line per row (rank 0). Run by inca-bench through mpirun; usable alone: --help. */
#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_check.h"
#include "util/cli.h"
#include "launch.h"
#include "sweep.h"


static MPI_Datatype mpi_type(enum inca_dtype dt, int reduction)
{
	switch (dt) {
	case INCA_INT8: return MPI_INT8_T;
	case INCA_UINT8: return MPI_UINT8_T;
	case INCA_INT16: return MPI_INT16_T;
	case INCA_UINT16: return MPI_UINT16_T;
	case INCA_INT32: return MPI_INT32_T;
	case INCA_UINT32: return MPI_UINT32_T;
	case INCA_INT64: return MPI_INT64_T;
	case INCA_UINT64: return MPI_UINT64_T;
	case INCA_FP32: return MPI_FLOAT;
	case INCA_FP64: return MPI_DOUBLE;
	case INCA_FP16:
	case INCA_BF16:
		/* MPI has no 16-bit float type: moving the bits is fine, reducing them is not. */
		return reduction ? MPI_DATATYPE_NULL : MPI_UINT16_T;
	default: return MPI_DATATYPE_NULL;
	}
}

static MPI_Op mpi_op(enum inca_op op)
{
	switch (op) {
	case INCA_SUM: return MPI_SUM;
	case INCA_PROD: return MPI_PROD;
	case INCA_MIN: return MPI_MIN;
	case INCA_MAX: return MPI_MAX;
	case INCA_BAND: return MPI_BAND;
	case INCA_BOR: return MPI_BOR;
	case INCA_BXOR: return MPI_BXOR;
	default: return MPI_OP_NULL;
	}
}

static int call(const struct cc_call *c, void *sbuf, void *rbuf, MPI_Datatype t, MPI_Op op)
{
	int cnt = (int)c->L.count;
	switch (c->coll) {
	case INCA_COLL_ALLREDUCE:
		return MPI_Allreduce(sbuf, rbuf, cnt, t, op, MPI_COMM_WORLD);
	case INCA_COLL_REDUCE:
		return MPI_Reduce(sbuf, rbuf, cnt, t, op, c->root, MPI_COMM_WORLD);
	case INCA_COLL_BCAST:
		return MPI_Bcast(rbuf, cnt, t, c->root, MPI_COMM_WORLD);
	case INCA_COLL_ALLGATHER:
		return MPI_Allgather(sbuf, cnt, t, rbuf, cnt, t, MPI_COMM_WORLD);
	case INCA_COLL_REDUCE_SCATTER:
		return MPI_Reduce_scatter_block(sbuf, rbuf, cnt, t, op, MPI_COMM_WORLD);
	case INCA_COLL_ALLTOALL:
		return MPI_Alltoall(sbuf, cnt, t, rbuf, cnt, t, MPI_COMM_WORLD);
	case INCA_COLL_GATHER:
		return MPI_Gather(sbuf, cnt, t, rbuf, cnt, t, c->root, MPI_COMM_WORLD);
	case INCA_COLL_SCATTER:
		return MPI_Scatter(sbuf, cnt, t, rbuf, cnt, t, c->root, MPI_COMM_WORLD);
	case INCA_COLL_BARRIER:
		return MPI_Barrier(MPI_COMM_WORLD);
	default:
		return MPI_ERR_ARG;
	}
}

struct opts {
	uint64_t minb, maxb, factor;
	int iters, warmup, root;
	double budget_s;
	uint64_t seed;
	const char *colls, *types, *json;
};

static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* One row: returns 0 (results, even wrong ones, are reported in the row). */
static void run_row(const struct opts *o, struct cc_call *c, void *sbuf, void *rbuf, FILE *out,
		    uint64_t *iter_id)
{
	int rank = c->rank, n = c->nranks;
	MPI_Datatype t = mpi_type(c->dt, cc_is_reduction(c->coll));
	MPI_Op op = mpi_op(c->op);
	int phase = CC_WARM, timed = 0;
	uint64_t wrong = 0, errors = 0;
	struct cc_sched sched;
	/* per timed call: entry and return on CLOCK_MONOTONIC (every rank on one machine, so
	 * one clock; the same latency definition as inca-bench: cc_latency_mean_s) */
	uint64_t *ts = calloc((size_t)2 * CC_MAX_ITERS, sizeof(uint64_t));
	uint64_t *all = rank == 0 ? calloc((size_t)2 * CC_MAX_ITERS * (size_t)n, sizeof(uint64_t))
				  : NULL;
	if (!ts || (rank == 0 && !all))
		MPI_Abort(MPI_COMM_WORLD, 2);

	cc_sched_init(&sched, o->warmup, o->iters, o->budget_s, MPI_Wtime());
	for (;;) {
		int d = 0;
		if (rank == 0)
			d = cc_sched_next(&sched, MPI_Wtime());
		MPI_Bcast(&d, 1, MPI_INT, 0, MPI_COMM_WORLD);
		if (d == CC_STOP)
			break;
		phase = d;
		c->iter = ++*iter_id;
		cc_fill(c, sbuf, rbuf);
		MPI_Barrier(MPI_COMM_WORLD);
		uint64_t t0 = mono_ns();
		int rc = call(c, sbuf, rbuf, t, op);
		uint64_t t1 = mono_ns();
		/* check only once every rank has returned, as inca-bench does: a check running
		 * beside ranks still in the call would take their CPU */
		MPI_Barrier(MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS)
			errors++;
		else
			wrong += cc_verify(c, sbuf, rbuf);
		if (rank == 0)
			cc_sched_done(&sched);
		if (phase == CC_TIMED && timed < CC_MAX_ITERS) {
			ts[timed] = t0;
			ts[CC_MAX_ITERS + timed] = t1;
			timed++;
		}
	}
	uint64_t w_sum = 0, e_sum = 0;
	MPI_Gather(ts, 2 * CC_MAX_ITERS, MPI_UINT64_T, all, 2 * CC_MAX_ITERS, MPI_UINT64_T, 0,
		   MPI_COMM_WORLD);
	MPI_Reduce(&wrong, &w_sum, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&errors, &e_sum, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	double mean = 0, skew = 0;
	if (rank == 0)
		mean = cc_latency_mean_s(all, all + CC_MAX_ITERS, n, 2 * CC_MAX_ITERS, timed, &skew);
	free(ts);
	free(all);
	if (rank != 0)
		return;
	double time_us = mean * 1e6;
	double algbw = time_us > 0 ? (double)c->L.size_bytes / (time_us * 1e-6) / 1e9 : 0;
	fprintf(out, "{\"tool\":\"ompi-coll-bench\",\"algo\":\"ompi\",\"coll\":\"%s\",\"ranks\":%d,"
		     "\"size_bytes\":%zu,\"count\":%zu,\"type\":\"%s\",\"op\":\"%s\",\"root\":%d,"
		     "\"time_us\":%.3f,\"algbw_gbps\":%.6f,\"busbw_gbps\":%.6f,\"wrong\":%llu,"
		     "\"errors\":%llu,\"iters\":%d,\"skew_us\":%.3f}\n",
		inca_coll_name(c->coll), n, c->L.size_bytes, c->L.total_count,
		inca_dtype_name(c->dt), cc_is_reduction(c->coll) ? inca_op_name(c->op) : "none",
		cc_has_root(c->coll) ? c->root : -1, time_us, algbw,
		algbw * cc_busbw_factor(c->coll, n), (unsigned long long)w_sum,
		(unsigned long long)e_sum, timed, skew * 1e6);
	fflush(out);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: mpirun -np N ompi-coll-bench [-b MIN] [-e MAX] [-f F] [-C COLLS] "
		   "[-t TYPE:OP,...] [-w WARMUP] [-n ITERS] [--budget S] [--root R] [--seed S] "
		   "[--json FILE]\n"
		   "  JSON lines (one per row) go to FILE (default stdout); rank 0 writes them.\n");
}

int main(int argc, char **argv)
{
	struct opts o = { .minb = 4, .maxb = 1 << 20, .factor = 4, .iters = 20, .warmup = 5,
			  .budget_s = 1.0, .seed = 1, .colls = "all", .types = "fp32:sum" };
	static const struct option lo[] = {
		{ "budget", required_argument, 0, 1 }, { "root", required_argument, 0, 2 },
		{ "seed", required_argument, 0, 3 },   { "json", required_argument, 0, 4 },
		{ "help", no_argument, 0, 'h' },       { "version", no_argument, 0, 'V' },
		{ 0, 0, 0, 0 },
	};
	MPI_Init(&argc, &argv);
	int rank, n, c, bad = 0;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	while ((c = getopt_long(argc, argv, "b:e:f:C:t:w:n:i:hV", lo, NULL)) != -1) {
		switch (c) {
		case 'b': bad |= launch_parse_bytes(optarg, &o.minb) != 0; break;
		case 'e': bad |= launch_parse_bytes(optarg, &o.maxb) != 0; break;
		case 'f': o.factor = strtoull(optarg, NULL, 10); break;
		case 'C': o.colls = optarg; break;
		case 't': o.types = optarg; break;
		case 'w': o.warmup = atoi(optarg); break;
		case 'n':
		case 'i': o.iters = atoi(optarg); break;
		case 1: o.budget_s = atof(optarg); break;
		case 2: o.root = atoi(optarg); break;
		case 3: o.seed = strtoull(optarg, NULL, 0); break;
		case 4: o.json = optarg; break;
		case 'V':
			if (rank == 0)
				util_cli_print_version("ompi-coll-bench");
			MPI_Finalize();
			return 0;
		case 'h':
			if (rank == 0)
				usage(stdout);
			MPI_Finalize();
			return 0;
		default: bad = 1; break;
		}
	}
	enum inca_coll colls[INCA_COLL_COUNT];
	struct sweep_pair pairs[SWEEP_MAX_PAIRS];
	int ncolls = cc_parse_colls(o.colls, colls);
	int npairs = sweep_parse_pairs(o.types, o.minb, o.maxb, o.factor < 2 ? 2 : o.factor, pairs,
				       SWEEP_MAX_PAIRS);
	if (bad || ncolls <= 0 || npairs <= 0 || o.root < 0 || o.root >= n || o.factor < 2) {
		if (rank == 0)
			usage(stderr);
		MPI_Finalize();
		return 2;
	}
	FILE *out = stdout;
	if (rank == 0 && o.json && !(out = fopen(o.json, "w"))) {
		fprintf(stderr, "ompi-coll-bench: %s: %s\n", o.json, strerror(errno));
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	uint64_t maxb = 64;
	for (int p = 0; p < npairs; p++)
		if (pairs[p].max_bytes > maxb)
			maxb = pairs[p].max_bytes;
	uint8_t *sbuf = NULL, *rbuf = NULL;
	if (posix_memalign((void **)&sbuf, 64, maxb) || posix_memalign((void **)&rbuf, 64, maxb))
		MPI_Abort(MPI_COMM_WORLD, 4);
	uint64_t iter_id = 0;
	for (int k = 0; k < ncolls; k++) {
		for (int p = 0; p < npairs; p++) {
			const struct sweep_pair *pr = &pairs[p];
			size_t es = inca_dtype_size(pr->dt);
			struct cc_call call_ = { .coll = colls[k], .dt = pr->dt, .op = pr->op,
						 .root = o.root, .rank = rank, .nranks = n,
						 .seed = o.seed };
			if (colls[k] == INCA_COLL_BARRIER) {
				if (p == 0)
					run_row(&o, &call_, sbuf, rbuf, out, &iter_id);
				continue;
			}
			if (mpi_type(pr->dt, cc_is_reduction(colls[k])) == MPI_DATATYPE_NULL) {
				if (rank == 0)
					fprintf(stderr, "ompi-coll-bench: %s %s: no MPI type, skipped\n",
						inca_coll_name(colls[k]), inca_dtype_name(pr->dt));
				continue;
			}
			for (uint64_t b = pr->min_bytes; b <= pr->max_bytes; b *= pr->factor) {
				if (cc_layout_for(colls[k], b, es, n, &call_.L) == 0)
					run_row(&o, &call_, sbuf, rbuf, out, &iter_id);
				if (b == 0)
					break;
			}
		}
	}
	if (rank == 0 && out != stdout)
		fclose(out);
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
