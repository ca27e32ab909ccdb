/* tools/sweep: the AllReduce size sweep behind inca-demo and bench-allreduce. Runs in every
 * rank process (launch_rank_fn); rank 0 prints an nccl-tests-style table, INC next to the host
 * ring, and optional JSON lines. Every iteration's result is verified on every rank. */
#ifndef INCA_TOOLS_SWEEP_H
#define INCA_TOOLS_SWEEP_H

#include <stdbool.h>
#include <stdint.h>

#include "inca/inca.h"

#define SWEEP_MAX_PAIRS 32

/* --switch-cpu: the smallest INC row whose ranks leave the switch's CPU to it. Below it they
 * use every CPU: with the switch alone on one of 2 CPUs, 4 B-4 KiB calls took 46-65 us
 * against 40-51 us shared, and 41-47 us with this rule; 1 MiB calls 1.2-1.4 ms against
 * 1.7-2.2 ms shared, whichever threshold from 64 KiB to 1 MiB. */
#define SWEEP_SWITCH_ALONE_BYTES (64u * 1024)

struct sweep_pair {
	enum inca_dtype dt;
	enum inca_op op;
	uint64_t min_bytes, max_bytes;
	uint64_t factor; /* >= 2 */
};

struct sweep_opts {
	struct sweep_pair pairs[SWEEP_MAX_PAIRS];
	int npairs;
	int nranks;
	int iters, warmup;     /* upper bounds per row and algorithm */
	double budget_s;       /* wall-time bound of the timed iterations of one row+algorithm
				  (at least one iteration always runs); warmup gets a quarter */
	bool inc, ring;        /* which algorithms to run */
	bool deterministic;    /* INC compared bitwise with the rank-ordered agg_reduce chain on
				  random (rounding) float data: needs a deterministic switch */
	bool in_place;
	bool ratio;            /* add an "INC/ring" algbw ratio column */
	bool progress;         /* progress line on stderr for long rows (when it is a tty) */
	const char *json_path; /* rank 0 appends one JSON line per row (file must exist) */
	const char *label;     /* "tool" field of the JSON lines */
	uint64_t seed;
	double link_bps;       /* > 0: add an "INC/link" column: INC algbw (bits/s) / link_bps */
	bool switch_alone;     /* the switch has CPU switch_cpu to itself (launch_cfg.switch_cpu):
				  ranks run on the other CPUs in INC rows, on all in ring rows */
	int switch_cpu;
};

/* Totals written by rank 0 into shared memory for the launching process. */
struct sweep_totals {
	uint64_t rows;
	uint64_t inc_wrong, ring_wrong;
	uint64_t inc_errors, ring_errors;
	uint64_t inc_calls, ring_calls; /* timed + warmup calls per rank */
	uint64_t inc_chunks;            /* INC chunk rounds issued per rank (for switch checks) */
};

struct sweep_shared;

/* Everything a rank needs: options plus the shared-memory area (allocate with
 * sweep_job_init before forking, release with sweep_job_fini). */
struct sweep_job {
	struct sweep_opts o;
	struct sweep_shared *sh;
	uint16_t mtu;      /* to count chunks like the client does */
	uint16_t bsl_bits;
	bool auth;         /* packets carry an authentication block (fewer data bytes each) */
};

int sweep_job_init(struct sweep_job *j);
void sweep_job_fini(struct sweep_job *j);
const struct sweep_totals *sweep_job_totals(const struct sweep_job *j);
/* Sum of the ranks' libinca counters at the end of the sweep; returns how many ranks reported. */
int sweep_job_client_stats(const struct sweep_job *j, struct inca_comm_stats *sum);
/* The same for the INC path's socket I/O counters; gso / gro count the ranks that had them. */
int sweep_job_io_stats(const struct sweep_job *j, struct inca_io_stats *sum);

/* launch_rank_fn: arg is a struct sweep_job *. Returns 0 when every result was right and
 * every call succeeded on this rank. */
int sweep_rank_main(struct inca_comm *comm, void *arg);

/* Parse "fp32:sum,int32:max" (optionally "fp32:sum@4-1M/4" for a per-pair size range) into
 * pairs with the given default range. Returns the number of pairs or -EINVAL (message on
 * stderr). */
int sweep_parse_pairs(const char *list, uint64_t min_bytes, uint64_t max_bytes, uint64_t factor,
		      struct sweep_pair *out, int cap);

#endif
