/* tools/inca_bench.h: what the parts of inca-bench share (private): its options, and the
 * Open MPI baseline (inca_bench_ompi.c: run ompi-coll-bench under mpirun and keep its rows so
 * that rank 0 prints each next to the matching INCA row). */
#ifndef INCA_TOOLS_INCA_BENCH_H
#define INCA_TOOLS_INCA_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll_check.h"
#include "sweep.h"

#define ALGO_OMPI 100 /* pseudo algorithm: the Open MPI row */
#define MAX_COLS 16

struct bench_opts {
	enum inca_coll colls[INCA_COLL_COUNT];
	int ncolls;
	struct sweep_pair pairs[SWEEP_MAX_PAIRS];
	int npairs;
	int algos[MAX_COLS]; /* enum inca_algo values (INCA_ALGO_AUTO = the auto row), ALGO_OMPI */
	int nalgos;
	int iters, warmup, root;
	double budget_s;
	uint64_t seed;
	const char *json_path;
	double link_bps; /* host link rate (fabric mode), 0: unknown (no link columns) */
};

/* One Open MPI row, parsed from ompi-coll-bench's JSON before the ranks fork. */
struct ompi_row {
	int coll;
	size_t size_bytes, count;
	char type[8], op[8];
	double time_us, algbw, busbw, skew_us;
	uint64_t wrong, errors;
	int iters;
	char line[512];
};

struct ompi_cfg {
	const char *mpirun;      /* NULL: mpirun.openmpi in $PATH */
	const char *bench;       /* NULL: find_ompi_bench */
	const char *types_arg;   /* the -t string as given */
	const char *colls_arg;
	uint64_t minb, maxb, factor;
	unsigned timeout_s;
	const char *fabric_plan; /* non-NULL: ranks in the fabric's host namespaces */
};

/* Run ompi-coll-bench under mpirun (Open MPI over TCP on loopback or in the fabric) and load
 * its rows. Returns the number of rows, -ENOENT when Open MPI or the program is missing
 * (skip), or another negative value when the run failed (message printed). */
int bench_ompi_run(const struct ompi_cfg *oc, const struct bench_opts *o, int nranks);
/* The loaded row of collective coll at size_bytes with type and op names, or NULL. */
const struct ompi_row *bench_ompi_find(int coll, size_t size_bytes, const char *type,
				       const char *op);

#endif
