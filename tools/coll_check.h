/* tools/coll_check: what inca-bench and bench/ompi-coll-bench share about the nine
 * collectives: buffer layout per nccl-tests "size", busbw factors, input data and the exact
 * verification of every rank's output (the #wrong column). No I/O, no communication. */
#ifndef INCA_TOOLS_COLL_CHECK_H
#define INCA_TOOLS_COLL_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inca/inca.h"

/* Buffers of one call. size_bytes is nccl-tests' "size": the largest buffer of the call (the
 * whole vector for AllReduce/Reduce/Bcast, the gathered or scattered total for AllGather,
 * ReduceScatter, AllToAll, Gather, Scatter); count is inca_coll_args.count. */
struct cc_layout {
	size_t count;       /* elements passed as inca_coll_args.count */
	size_t total_count; /* size_bytes / element size (nccl-tests' count column) */
	size_t size_bytes;
	size_t send_bytes, recv_bytes; /* per rank, largest over ranks (root included) */
};

/* Layout for a requested size; the size is rounded down to a whole number of elements per
 * rank block. Returns 0, or -EINVAL when not even one element fits (skip the row). Barrier:
 * always 0 bytes. */
int cc_layout_for(enum inca_coll coll, uint64_t size_bytes, size_t es, int nranks,
		  struct cc_layout *out);

/* busbw = algbw * factor, as nccl-tests defines it: AllReduce 2(n-1)/n; AllGather,
 * ReduceScatter, AllToAll, Gather, Scatter (n-1)/n; Reduce, Bcast 1; Barrier 0. */
double cc_busbw_factor(enum inca_coll coll, int nranks);
/* Text of the factor for table headers ("2(n-1)/n"). */
const char *cc_busbw_text(enum inca_coll coll);
/* Link floor factor: the bytes the busiest host link must carry in one call, as a multiple of
 * the size S, so that no call can take less than factor * S / B on links of rate B. Host
 * algorithms (no computation in the network): the busbw factor, which is exactly that lower
 * bound (AllReduce 2(n-1)/n; a root or every rank must receive S for Reduce and Bcast; ...).
 * INC (inc = true): what libinca's offload moves per rank: AllReduce, Reduce and Bcast S;
 * AllGather (n-1)/n (each rank receives the other blocks); ReduceScatter S (each rank sends
 * every block). Barrier 0. */
double cc_link_factor(enum inca_coll coll, int nranks, bool inc);

/* 1 for AllReduce, Reduce, ReduceScatter (they take an op). */
int cc_is_reduction(enum inca_coll coll);
/* 1 for Reduce, Bcast, Gather, Scatter. */
int cc_has_root(enum inca_coll coll);

/* One call on one rank. */
struct cc_call {
	enum inca_coll coll;
	enum inca_dtype dt;
	enum inca_op op;
	int root, rank, nranks;
	uint64_t seed, iter; /* vary iter per call so a stale result is caught */
	struct cc_layout L;
};

/* Write this rank's inputs into sbuf (Bcast: the root's rbuf) and poison its outputs. */
void cc_fill(const struct cc_call *c, void *sbuf, void *rbuf);
/* Wrong elements in this rank's outputs (0 on ranks without output). */
uint64_t cc_verify(const struct cc_call *c, const void *sbuf, const void *rbuf);

/* Row schedule shared by inca-bench and ompi-coll-bench, decided by rank 0 before each call
 * and published to the others with the call's start synchronisation: warmup, then timed
 * calls, within a wall-time budget. */
enum { CC_WARM = 1, CC_TIMED = 2, CC_STOP = 3 };
#define CC_MAX_ITERS 4096 /* timed calls per row, at most (per-call timestamps are kept) */
struct cc_sched {
	int warmup, iters; /* at most */
	double budget_s;   /* the timed part's wall-time bound (0: none); warmup gets 1/4 */
	int phase, warm, timed;
	double phase_start_s;
};
void cc_sched_init(struct cc_sched *s, int warmup, int iters, double budget_s, double now_s);
/* Rank 0 before a call: its phase (CC_STOP: the row is over). */
int cc_sched_next(struct cc_sched *s, double now_s);
/* Rank 0 after the call. */
void cc_sched_done(struct cc_sched *s);

/* Time of one call on a common clock (every rank on one machine: CLOCK_MONOTONIC): its
 * makespan, from the first rank's entry to the last rank's return. A rank that returns early
 * (a root, a leaf of a tree) cannot make a call look shorter than the work it started. The
 * start barrier releases every rank at once, but ranks that share a core still start one
 * after another; that skew is part of every algorithm's makespan and is reported apart.
 * t0[r * stride + i], t1[...]: rank r's entry and return of timed call i, in ns. Returns the
 * mean over the calls, in seconds. skew_s (may be NULL) gets the mean start skew: the last
 * rank's entry minus the first's. No algorithm finishes a call that needs every rank's data
 * (all but Bcast and Scatter) sooner than that after the first entry, so it is the floor of a
 * makespan on a machine whose ranks share few cores. */
double cc_latency_mean_s(const uint64_t *t0, const uint64_t *t1, int nranks, size_t stride,
			 int ncalls, double *skew_s);

/* Parse "allreduce,bcast" (or "all") into an ordered list of collectives. Returns how many
 * (<= INCA_COLL_COUNT) or -EINVAL with a message on stderr. */
int cc_parse_colls(const char *list, enum inca_coll *out);

#endif
