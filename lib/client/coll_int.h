/* Private to the collective layer (coll.c, coll_inc.c, coll_nb.c): the per-communicator state
 * of the dispatcher, the tuner, failover and the nonblocking requests, and the functions they
 * share. The rest of libinca sees only client.h. */
#ifndef INCA_CLIENT_COLL_INT_H
#define INCA_CLIENT_COLL_INT_H

#include "client/client.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* Sequence numbers of the agreement steps. The ring checks that neighbours run the same
 * collective with the same sequence; these fixed values let ranks that are at different user
 * calls (one failed call k, another completed k and failed k+1) meet in one agreement. */
#define SEQ_FO_MIN (UINT64_MAX - 1)
#define SEQ_FO_HAVE (UINT64_MAX - 2)
#define SEQ_FO_DATA (UINT64_MAX - 3)
#define SEQ_TUNE (UINT64_MAX - 4)
#define SEQ_RE_LO (UINT64_MAX - 5)
#define SEQ_RE_HI (UINT64_MAX - 6)
#define SEQ_BFR (UINT64_MAX - 7)

/* After a failover, AUTO calls run on the host; every REENABLE_EVERY-th of them the ranks
 * check together whether the AM has given them a new tree. */
#define REENABLE_EVERY 16
#define TUNE_BUCKETS 48
/* AllGather / ReduceScatter up to this many packets per rank run as a padded AllReduce
 * (inc_exec). */
#define INC_PAD_CHUNKS 4

/* AUTO measures INC and the host algorithm TUNE_PAIRS times each per size bucket, alternating,
 * before it decides: one sample each let a single descheduled rank (tens of microseconds on a
 * shared machine) flip the choice for good. */
#define TUNE_PAIRS 3

struct tune_entry {
	uint8_t nsamples;      /* calls measured: even -> the next runs on INC, odd -> host */
	uint8_t done, choice;  /* choice: 1 = INC, 0 = host */
	uint64_t ns[2 * TUNE_PAIRS]; /* this rank's durations: [2i] INC, [2i + 1] host */
};

struct nb_req;

/* INC calls with at least this many input bytes end with an agreement that every rank completed
 * them (one 8-byte ring AllReduce, ~0.1 ms against the tens of ms such a call takes): no rank
 * can then need the call redone and its input is not kept past it. Smaller calls keep a copy of
 * their input until the next INC call completes. Extra memory for failover, at most:
 * S (in-place call of S bytes, copied when it starts; a call with separate buffers reads its
 * input from the caller's buffer while it runs) + min(S_prev, FO_SYNC_BYTES) (the previous call,
 * if it was smaller than this). docs/collectives.md "Failover". */
#define FO_SYNC_BYTES ((size_t)64 << 20)

/* A call's arguments and its input for a redo on the host path: src is either the caller's
 * buffer (borrowed while the call runs and its input cannot change) or `in`, a copy. */
struct saved_call {
	bool valid;
	uint64_t seq;
	struct inca_coll_args a;
	const uint8_t *src;
	uint8_t *in;
	size_t len, cap;
};

struct client_coll {
	uint8_t *scratch;
	size_t scratch_cap;
	struct saved_call cur, prev; /* this INC call's input; the last completed one's */
	uint16_t *bfr_of_rank;       /* rank -> BFR-id of the current tree */
	bool bfr_ok;                 /* every rank has one */
	bool inc_on;         /* INC in use: changes only at points every rank passes together */
	uint64_t host_calls_off; /* AUTO calls since INC went off (re-enable checks) */
	bool tune_off;       /* INCA_TUNE=off: AUTO always takes INC when it is on */
	struct tune_entry tune[INCA_COLL_COUNT][TUNE_BUCKETS];
	struct inca_coll_counts counts;

	/* nonblocking AllReduce: one progress thread, requests run in issue order */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thr;
	bool thr_started, stop;
	struct nb_req *head, *tail;
	unsigned pending;
};

struct nb_req {
	struct inca_request *req;
	struct nb_req *next;
};

struct inca_request {
	struct inca_comm *comm;
	const void *sendbuf;
	void *recvbuf;
	size_t count;
	enum inca_dtype dt;
	enum inca_op op;
	bool done;
	int status;
	struct nb_req node;
};

/* coll.c: validation, agreement, dispatch. */
size_t coll_args_bytes(const struct inca_coll_args *a);
void coll_extent(const struct inca_comm *c, const struct inca_coll_args *a, size_t *send_b,
		 size_t *recv_b);
int coll_validate(const struct inca_comm *c, const struct inca_coll_args *a);
/* One small agreement over the ring with a fixed sequence number (see SEQ_*). */
int coll_agree(struct inca_comm *c, uint64_t seq, void *vals, size_t n, enum inca_op op);
int coll_run(struct inca_comm *c, const struct inca_coll_args *a);

/* coll_inc.c: the INC forms, their failover to the host path, re-enabling INC. */
int coll_exchange_bfr_ids(struct inca_comm *c);
int coll_run_inc(struct inca_comm *c, const struct inca_coll_args *a, bool allow_failover);
int coll_maybe_reenable(struct inca_comm *c);

/* coll_nb.c: the nonblocking AllReduce's progress thread. */
void coll_nb_drain(struct inca_comm *c);
void coll_nb_stop(struct inca_comm *c);

#endif
