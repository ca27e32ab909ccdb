/* tools/inca_bench.h: private to inca-bench (inca_bench.c: rows, tables, the command line;
 * inca_bench_ompi.c: the Open MPI baseline rows). */
#ifndef INCA_TOOLS_INCA_BENCH_H
#define INCA_TOOLS_INCA_BENCH_H

#include <stdint.h>

#include "inca/inca.h"
#include "sweep.h"

#define ALGO_OMPI 100 /* pseudo algorithm: the Open MPI row */
#define MAX_COLS 16
#define MAX_OMPI_ROWS 4096

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
extern struct ompi_row ompi_rows[MAX_OMPI_ROWS]; /* inca_bench_ompi.c */
extern int n_ompi_rows;

struct ompi_cfg {
	const char *mpirun;      /* NULL: mpirun.openmpi in $PATH */
	const char *bench;       /* NULL: find_ompi_bench */
	const char *types_arg;   /* the -t string as given */
	const char *colls_arg;
	uint64_t minb, maxb, factor;
	unsigned timeout_s;
	const char *fabric_plan; /* non-NULL: ranks in the fabric's host namespaces */
};

/* Run ompi-coll-bench under mpirun (Open MPI over TCP on loopback) and load its rows into
 * ompi_rows. Returns the number of rows, -ENOENT when Open MPI or the program is missing
 * (skip), or another negative value when the run failed (message printed). */
int run_ompi(const struct ompi_cfg *oc, const struct bench_opts *o, int nranks);

#endif
