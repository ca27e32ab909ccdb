/* libinca collective dispatch: validation of the nine collectives, the choice between
 * INC and host algorithms (an online tuner that agrees across ranks), the INC forms of Reduce,
 * Broadcast, AllGather, ReduceScatter and Barrier built on the INC AllReduce, failover of a
 * failed INC call to the host path, per-path counters and the nonblocking AllReduce. */
#include "client/client.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "wire/wire.h"

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

/* ---- names ------------------------------------------------------------------------------ */

_Static_assert(INCA_COLL_COUNT <= INCA_COLL_MAX && INCA_ALGO_COUNT <= INCA_ALGO_MAX,
	       "struct inca_coll_counts is sized by INCA_COLL_MAX / INCA_ALGO_MAX (ABI)");

const struct client_coll_info client_coll_info[INCA_COLL_COUNT] = {
	[INCA_COLL_ALLREDUCE] = { "allreduce", .reduces = true, .offload = true },
	[INCA_COLL_REDUCE] = { "reduce", .reduces = true, .rooted = true, .offload = true },
	[INCA_COLL_BCAST] = { "bcast", .rooted = true, .offload = true },
	[INCA_COLL_ALLGATHER] = { "allgather", .offload = true },
	[INCA_COLL_REDUCE_SCATTER] = { "reducescatter", .reduces = true, .offload = true },
	[INCA_COLL_ALLTOALL] = { "alltoall" },
	[INCA_COLL_GATHER] = { "gather", .rooted = true },
	[INCA_COLL_SCATTER] = { "scatter", .rooted = true },
	[INCA_COLL_BARRIER] = { "barrier", .offload = true },
};
static const char *const algo_names[INCA_ALGO_COUNT] = {
	"auto", "inc", "ring", "recdbl", "rabenseifner", "binomial", "bruck", "pairwise", "linear",
};

const char *inca_coll_name(enum inca_coll coll)
{
	return (unsigned)coll < INCA_COLL_COUNT ? client_coll_info[coll].name : "?";
}

const char *inca_algo_name(enum inca_algo algo)
{
	return (unsigned)algo < INCA_ALGO_COUNT ? algo_names[algo] : "?";
}

int inca_algo_parse(const char *name)
{
	if (!name)
		return -EINVAL;
	for (int i = 0; i < INCA_ALGO_COUNT; i++)
		if (strcmp(name, algo_names[i]) == 0)
			return i;
	return -EINVAL;
}

/* ---- state ------------------------------------------------------------------------------ */

static int exchange_bfr_ids(struct inca_comm *c);

int client_coll_init(struct inca_comm *c)
{
	struct client_coll *k = calloc(1, sizeof *k);
	const char *tune = getenv("INCA_TUNE");

	if (!k)
		return -ENOMEM;
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	k->tune_off = tune && strcmp(tune, "off") == 0;
	k->inc_on = c->inc != NULL;
	c->coll = k;
	/* Collective: every rank creates its communicator in the same order. */
	if (c->cfg.size > 1 && !c->ring_broken)
		return exchange_bfr_ids(c);
	k->bfr_of_rank = calloc(1, sizeof *k->bfr_of_rank);
	if (!k->bfr_of_rank)
		return -ENOMEM;
	k->bfr_of_rank[0] = c->cfg.bfr_id;
	k->bfr_ok = c->inc != NULL;
	return 0;
}

static void nb_stop(struct inca_comm *c);

void client_coll_free(struct inca_comm *c)
{
	struct client_coll *k = c->coll;

	if (!k)
		return;
	nb_stop(c);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k->scratch);
	free(k->cur.in);
	free(k->prev.in);
	free(k->bfr_of_rank);
	free(k);
	c->coll = NULL;
}

static int grow(uint8_t **buf, size_t *cap, size_t need, bool zero)
{
	if (need <= *cap)
		return 0;
	uint8_t *n = zero ? calloc(1, need) : malloc(need);
	if (!n)
		return -ENOMEM;
	free(*buf);
	*buf = n;
	*cap = need;
	return 0;
}

/* ---- validation ------------------------------------------------------------------------- */

static bool ranges_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
	return x < y + blen && y < x + alen;
}

/* Bytes of the per-rank buffer the size-based choice looks at (inca_coll_args.count). */
static size_t args_bytes(const struct inca_coll_args *a)
{
	return a->coll == INCA_COLL_BARRIER ? 0 : a->count * inca_dtype_size(a->dt);
}

/* Bytes of sendbuf and recvbuf one call touches on this rank (0: the buffer is not used). */
static void coll_extent(const struct inca_comm *c, const struct inca_coll_args *a, size_t *send_b,
			size_t *recv_b)
{
	size_t b = a->count * inca_dtype_size(a->dt), n = (size_t)c->cfg.size;
	bool root = client_coll_info[a->coll].rooted && a->root == c->cfg.rank;

	*send_b = *recv_b = 0;
	switch (a->coll) {
	case INCA_COLL_ALLREDUCE:
		*send_b = *recv_b = b;
		break;
	case INCA_COLL_REDUCE:
		*send_b = b;
		*recv_b = root ? b : 0;
		break;
	case INCA_COLL_BCAST:
		*recv_b = b;
		break;
	case INCA_COLL_ALLGATHER:
		*send_b = b;
		*recv_b = b * n;
		break;
	case INCA_COLL_GATHER:
		*send_b = b;
		*recv_b = root ? b * n : 0;
		break;
	case INCA_COLL_REDUCE_SCATTER:
		*send_b = b * n;
		*recv_b = b;
		break;
	case INCA_COLL_ALLTOALL:
		*send_b = *recv_b = b * n;
		break;
	case INCA_COLL_SCATTER:
		*send_b = root ? b * n : 0;
		*recv_b = b;
		break;
	default: /* barrier */
		break;
	}
}

int inca_coll_extent(const struct inca_comm *c, const struct inca_coll_args *a, size_t *send_b,
		     size_t *recv_b)
{
	if (!c || !a || !send_b || !recv_b || (unsigned)a->coll >= INCA_COLL_COUNT ||
	    (a->coll != INCA_COLL_BARRIER && !inca_dtype_size(a->dt)))
		return -EINVAL;
	coll_extent(c, a, send_b, recv_b);
	return 0;
}

static int validate(const struct inca_comm *c, const struct inca_coll_args *a)
{
	size_t elem, n = (size_t)c->cfg.size, send_b = 0, recv_b = 0;

	if ((unsigned)a->coll >= INCA_COLL_COUNT || (unsigned)a->algo >= INCA_ALGO_COUNT)
		return -EINVAL;
	if (a->coll == INCA_COLL_BARRIER)
		return 0;
	if ((unsigned)a->dt >= INCA_DTYPE_COUNT)
		return -EINVAL;
	if (client_coll_info[a->coll].reduces) {
		if ((unsigned)a->op >= INCA_OP_COUNT)
			return -EINVAL;
		if (!inca_op_valid(a->dt, a->op))
			return -ENOTSUP;
	}
	if (client_coll_info[a->coll].rooted && (a->root < 0 || a->root >= c->cfg.size))
		return -EINVAL;
	if (a->count == 0)
		return 0;
	elem = inca_dtype_size(a->dt);
	if (a->count > SIZE_MAX / elem / n)
		return -EINVAL;
	coll_extent(c, a, &send_b, &recv_b);
	if ((send_b && !a->sendbuf) || (recv_b && !a->recvbuf))
		return -EINVAL;
	/* Partial overlap is never meaningful; exact in-place is allowed where documented. */
	if (send_b && recv_b && a->sendbuf != a->recvbuf &&
	    ranges_overlap(a->sendbuf, send_b, a->recvbuf, recv_b))
		return -EINVAL;
	if (a->sendbuf == a->recvbuf && send_b && recv_b &&
	    (a->coll == INCA_COLL_ALLTOALL || a->coll == INCA_COLL_REDUCE_SCATTER ||
	     a->coll == INCA_COLL_SCATTER))
		return -EINVAL; /* no in-place form (use separate buffers) */
	return 0;
}

/* ---- choice ----------------------------------------------------------------------------- */

static bool inc_usable(const struct inca_comm *c)
{
	return c->coll && c->coll->inc_on && c->inc && !c->inc_broken;
}

int inca_coll_algo_valid(const struct inca_comm *c, enum inca_coll coll, enum inca_algo algo)
{
	if (!c || (unsigned)coll >= INCA_COLL_COUNT || (unsigned)algo >= INCA_ALGO_COUNT)
		return 0;
	if (algo == INCA_ALGO_AUTO)
		return 1;
	if (algo == INCA_ALGO_INC)
		return client_coll_info[coll].offload && inc_usable(c);
	return client_host_algo_valid(coll, algo);
}

static unsigned bucket_of(size_t bytes)
{
	unsigned b = 0;
	while (bytes > 1 && b < TUNE_BUCKETS - 1) {
		bytes >>= 1;
		b++;
	}
	return b;
}

/* The fastest of a path's samples (path 0: INC, 1: host): noise only ever adds time, so the
 * minimum is the estimate least disturbed by the machine. */
static uint64_t tune_best(const uint64_t *ns, unsigned pairs, unsigned path)
{
	uint64_t best = UINT64_MAX;
	for (unsigned i = 0; i < pairs; i++)
		if (ns[2 * i + path] < best)
			best = ns[2 * i + path];
	return best;
}

bool client_tune_prefers_inc(const uint64_t *ns, unsigned pairs)
{
	return tune_best(ns, pairs, 0) <= tune_best(ns, pairs, 1);
}

/* AUTO's answer without side effects. INC for an offloadable collective while INC is on,
 * unless the tuner measured the host algorithm faster at this size. */
enum inca_algo inca_coll_choose(const struct inca_comm *c, enum inca_coll coll, size_t bytes)
{
	if (!c || (unsigned)coll >= INCA_COLL_COUNT)
		return INCA_ALGO_RING;
	if (client_coll_info[coll].offload && inc_usable(c)) {
		const struct tune_entry *t = &c->coll->tune[coll][bucket_of(bytes)];
		if (c->coll->tune_off || !t->done || t->choice)
			return INCA_ALGO_INC;
	}
	return client_host_choose(c, coll, bytes);
}

int inca_comm_get_coll_counts(const struct inca_comm *c, struct inca_coll_counts *out,
			      size_t out_size)
{
	if (!c || !c->coll)
		return -EINVAL;
	return client_out_copy(out, out_size, &c->coll->counts, sizeof c->coll->counts,
			       CLIENT_END_OF(struct inca_coll_counts, failovers));
}

/* One small agreement over the ring with a fixed sequence number (see SEQ_*). */
static int agree(struct inca_comm *c, uint64_t seq, void *vals, size_t n, enum inca_op op)
{
	uint64_t saved = c->coll_seq;
	int rc;

	c->coll_seq = seq;
	rc = client_ring_allreduce(c, vals, vals, n, INCA_UINT64, op);
	c->coll_seq = saved;
	return rc;
}

/* ---- INC forms -------------------------------------------------------------------------- */

/* Exchange every rank's BFR-id (a member of a tree is addressed by it: the owner of a chunk,
 * docs/protocol.md §4.1). Collective: every rank calls it at the same point (creation, and
 * after the ranks agreed on a rebuilt tree). */
static int exchange_bfr_ids(struct inca_comm *c)
{
	struct client_coll *k = c->coll;
	size_t n = (size_t)c->cfg.size;
	uint64_t *v = calloc(n, sizeof *v);
	int rc;

	if (!v)
		return -ENOMEM;
	v[c->cfg.rank] = c->inc ? c->cfg.bfr_id : 0;
	rc = agree(c, SEQ_BFR, v, n, INCA_BOR);
	if (rc == 0) {
		uint16_t *t = realloc(k->bfr_of_rank, n * sizeof *t);
		if (!t) {
			rc = -ENOMEM;
		} else {
			k->bfr_of_rank = t;
			k->bfr_ok = true;
			for (size_t i = 0; i < n; i++) {
				t[i] = (uint16_t)v[i];
				if (!t[i])
					k->bfr_ok = false; /* some rank has no tree: no owners */
			}
		}
	}
	free(v);
	return rc;
}

/* Bytes of this rank's input (what a redo on the host path needs again) and output: the
 * buffers' extents, except that Broadcast's input is the root's recvbuf. */
static size_t in_bytes(const struct inca_comm *c, const struct inca_coll_args *a)
{
	size_t sb, rb;
	coll_extent(c, a, &sb, &rb);
	if (a->coll == INCA_COLL_BCAST)
		return a->root == c->cfg.rank ? rb : 0;
	return sb;
}

static size_t out_bytes(const struct inca_comm *c, const struct inca_coll_args *a)
{
	size_t sb, rb;
	coll_extent(c, a, &sb, &rb);
	return rb;
}

/* Where this rank's input of call a sits (before the call). */
static const void *in_ptr(const struct inca_comm *c, const struct inca_coll_args *a)
{
	size_t b = a->count * inca_dtype_size(a->dt);
	if (a->coll == INCA_COLL_BCAST)
		return a->recvbuf;
	if (a->coll == INCA_COLL_ALLGATHER && a->sendbuf == a->recvbuf)
		return (const uint8_t *)a->recvbuf + (size_t)c->cfg.rank * b;
	return a->sendbuf;
}

static int inc_exec(struct inca_comm *c, const struct inca_coll_args *a)
{
	struct client_coll *k = c->coll;
	size_t b = a->count * inca_dtype_size(a->dt), n = (size_t)c->cfg.size;
	int me = c->cfg.rank;
	struct client_inc_coll x = { .dt = a->dt, .op = a->op, .count = a->count,
				     .bfr_of_rank = k->bfr_of_rank };
	uint64_t zero = 0;
	/* Largest AllGather / ReduceScatter that travels as an AllReduce of the whole padded
	 * vector (everyone's block, zeros elsewhere, OR-ed; or everything reduced, own block kept)
	 * instead of one chunk per block with owners: up to INC_PAD_CHUNKS packets per rank
	 * instead of at least n. It moves S instead of b (AllGather) up each access link, which
	 * full-duplex links carry beside the S coming down; the per-owner form sends n packets of
	 * b bytes, and below a packet per block the packet count is what costs. Measured, 8 ranks:
	 * netns fabric 4 KiB AllGather 764 -> 328 us, ReduceScatter 882 -> 381 us; loopback (4
	 * ranks) 4 KiB AllGather 172 -> 94 us; at 16 KiB both forms were within 10 %. */
	size_t small_max = INC_PAD_CHUNKS *
			   wire_max_data_auth(c->cfg.mtu, inca_dtype_size(a->dt), c->cfg.bsl_code,
					      c->cfg.auth);

	switch (a->coll) {
	case INCA_COLL_ALLREDUCE:
		x.coll = WIRE_COLL_ALLREDUCE;
		x.src = a->sendbuf;
		x.dst = a->recvbuf;
		break;
	case INCA_COLL_REDUCE:
		x.coll = WIRE_COLL_REDUCE;
		x.src = a->sendbuf;
		x.dst = me == a->root ? a->recvbuf : NULL;
		x.owner_rank = a->root;
		break;
	case INCA_COLL_BCAST:
		x.coll = WIRE_COLL_BCAST;
		x.src = me == a->root ? a->recvbuf : NULL;
		x.dst = me == a->root ? NULL : a->recvbuf;
		x.owner_rank = a->root;
		break;
	case INCA_COLL_ALLGATHER:
		if (b * n <= small_max) {
			/* Small: the whole vector, our block over zeros, OR-ed by the switch. */
			uint8_t *r = a->recvbuf;
			if (a->sendbuf != a->recvbuf)
				memcpy(r + (size_t)me * b, a->sendbuf, b);
			memset(r, 0, (size_t)me * b);
			memset(r + ((size_t)me + 1) * b, 0, (n - (size_t)me - 1) * b);
			x.coll = WIRE_COLL_ALLREDUCE;
			x.src = x.dst = r;
			x.count = b * n;
			x.dt = INCA_UINT8;
			x.op = INCA_BOR;
			break;
		}
		x.coll = WIRE_COLL_ALLGATHER;
		x.src = in_ptr(c, a);
		x.src_block_local = true;
		x.dst = a->recvbuf;
		x.count = a->count * n;
		x.block_count = a->count;
		x.owner_rank = -1;
		if (a->sendbuf != a->recvbuf)
			memcpy((uint8_t *)a->recvbuf + (size_t)me * b, a->sendbuf, b);
		break;
	case INCA_COLL_REDUCE_SCATTER:
		if (b * n <= small_max) {
			/* small: reduce everything, keep our block */
			int rc;
			if ((rc = grow(&k->scratch, &k->scratch_cap, b * n, false)) < 0)
				return rc;
			x.coll = WIRE_COLL_ALLREDUCE;
			x.src = a->sendbuf;
			x.dst = k->scratch;
			x.count = a->count * n;
			c->stats.inc_calls++;
			rc = client_inc_coll(c, &x);
			if (rc == 0)
				memcpy(a->recvbuf, k->scratch + (size_t)me * b, b);
			return rc;
		}
		x.coll = WIRE_COLL_REDUCE_SCATTER;
		x.src = a->sendbuf;
		x.dst = a->recvbuf;
		x.dst_block_local = true;
		x.count = a->count * n;
		x.block_count = a->count;
		x.owner_rank = -1;
		break;
	case INCA_COLL_BARRIER:
		/* an AllReduce of one word: nobody gets the result before everyone sent */
		x.coll = WIRE_COLL_ALLREDUCE;
		x.src = (const uint8_t *)&zero;
		x.dst = (uint8_t *)&zero;
		x.count = 1;
		x.dt = INCA_UINT64;
		x.op = INCA_BOR;
		break;
	default:
		return -ENOTSUP;
	}
	if (wire_coll_has_owner(x.coll) && !k->bfr_ok)
		return -ENOTSUP;
	c->stats.inc_calls++;
	return client_inc_coll(c, &x);
}

/* Keep call a's input so it can be redone on the host path: borrowed from the caller while
 * the call runs if the call does not write over it, else copied. */
static int save_input(struct inca_comm *c, const struct inca_coll_args *a, struct saved_call *sc,
		      uint64_t seq)
{
	size_t len = in_bytes(c, a), ob = out_bytes(c, a);
	const uint8_t *in = in_ptr(c, a), *out = a->recvbuf;

	sc->a = *a;
	sc->len = len;
	sc->seq = seq;
	sc->valid = true;
	if (!len || !out || !ob || in + len <= out || out + ob <= in) {
		sc->src = in; /* the call writes only recvbuf, which does not overlap */
		return 0;
	}
	int rc = grow(&sc->in, &sc->cap, len, false);
	if (rc < 0) {
		sc->valid = false;
		return rc;
	}
	memcpy(sc->in, in, len);
	sc->src = sc->in;
	return 0;
}

/* The call of sc completed: its input must outlive the call (the caller may change the buffer
 * now), so a borrowed input is copied. */
static int own_input(struct saved_call *sc)
{
	if (!sc->valid || sc->src == sc->in || !sc->len)
		return 0;
	int rc = grow(&sc->in, &sc->cap, sc->len, false);
	if (rc < 0) {
		sc->valid = false;
		return rc;
	}
	memcpy(sc->in, sc->src, sc->len);
	sc->src = sc->in;
	return 0;
}

/* Drop a saved input; a copy larger than FO_SYNC_BYTES goes back to the system (a communicator
 * that made one large in-place call does not keep its size for good). */
static void drop_input(struct saved_call *sc)
{
	sc->valid = false;
	sc->src = NULL;
	if (sc->cap > FO_SYNC_BYTES) {
		free(sc->in);
		sc->in = NULL;
		sc->cap = 0;
	}
}

/* Run call `a` on the host path with its saved input (sc) into its own buffers (mine) or into
 * scratch (a call this rank already completed, redone for the others' sake). */
static int host_redo(struct inca_comm *c, struct saved_call *sc, bool mine)
{
	struct client_coll *k = c->coll;
	struct inca_coll_args h = sc->a;
	size_t ob = out_bytes(c, &h);
	int rc;

	if (!mine) {
		if ((rc = grow(&k->scratch, &k->scratch_cap, ob ? ob : 1, false)) < 0)
			return rc;
		h.recvbuf = k->scratch;
	}
	if (h.coll == INCA_COLL_BCAST) {
		if (h.root == c->cfg.rank)
			memcpy(h.recvbuf, sc->src, sc->len);
	} else if (h.coll == INCA_COLL_ALLGATHER) {
		/* input travels as the own block of recvbuf (the in-place form) */
		size_t b = h.count * inca_dtype_size(h.dt);
		memcpy((uint8_t *)h.recvbuf + (size_t)c->cfg.rank * b, sc->src, sc->len);
		h.sendbuf = h.recvbuf;
	} else if (h.coll != INCA_COLL_BARRIER) {
		h.sendbuf = sc->src;
		if (!h.recvbuf && h.coll == INCA_COLL_REDUCE && h.root == c->cfg.rank)
			return -EINVAL;
	}
	h.algo = client_host_choose(c, h.coll, args_bytes(&h));
	k->counts.calls[h.coll][h.algo]++;
	if (h.coll == INCA_COLL_ALLREDUCE || h.coll == INCA_COLL_BARRIER)
		c->stats.ring_calls++; /* as coll_counts: the attempt stays counted in inc_calls */
	return client_host_coll(c, &h, h.algo);
}

/* Failover of user call `seq`, whose INC part failed (switch or link dead, tree gone).
 * Every rank comes here for the earliest call that failed anywhere: a rank that completed that
 * call fails its next INC call too, because that one needs the contribution of a rank still
 * stuck here. The ranks agree on the earliest failed call m and redo m on the host path, each
 * with its saved input of m (a rank whose own failed call is later supplies the input it kept
 * of m and throws the output away); then the ranks that were further redo their own call on
 * the host path, where the others meet them with INC off. */
static void inc_off(struct inca_comm *c, uint64_t seq, int why)
{
	struct client_coll *k = c->coll;

	k->inc_on = false;
	k->host_calls_off = 0;
	k->counts.failovers++;
	client_log(&c->cfg, 1, "inc: call %llu failed (%s); completing on the host path",
		   (unsigned long long)seq, inca_strerror(why));
	client_am_report_failure(c, inca_strerror(why));
}

static int inc_failover(struct inca_comm *c, uint64_t seq, int why)
{
	struct client_coll *k = c->coll;
	uint64_t m = seq;
	int rc;

	inc_off(c, seq, why);
	if ((rc = agree(c, SEQ_FO_MIN, &m, 1, INCA_MIN)) < 0)
		return rc;
	if (m < seq) {
		if (!k->prev.valid || k->prev.seq != m)
			return -EIO; /* cannot happen: a completed INC call always keeps its input */
		if ((rc = host_redo(c, &k->prev, false)) < 0)
			return rc;
	}
	return host_redo(c, &k->cur, true);
}

/* After a large INC call completed here: the ranks that failed it (if any) agree on it in
 * inc_failover; the others say "completed" (UINT64_MAX). If some rank failed it, it is redone
 * on the host path for their sake (this rank's output is already right). */
static int inc_end_agreement(struct inca_comm *c, uint64_t seq)
{
	struct client_coll *k = c->coll;
	uint64_t m = UINT64_MAX;
	int rc = agree(c, SEQ_FO_MIN, &m, 1, INCA_MIN);

	if (rc < 0 || m == UINT64_MAX)
		return rc;
	/* Some rank failed this very call (an earlier one would have failed this one here). */
	inc_off(c, m, -ETIMEDOUT);
	return m == seq ? host_redo(c, &k->cur, false) : -EIO;
}

static int run_inc(struct inca_comm *c, const struct inca_coll_args *a, bool allow_failover)
{
	struct client_coll *k = c->coll;
	uint64_t seq = c->coll_seq;
	int rc;

	/* Keep the input until this call completes and the next INC call completes too (a rank
	 * that missed the end of this call needs everyone to redo it: inc_failover), or, for a
	 * large call, until all ranks agreed that they completed it. */
	if (allow_failover && (rc = save_input(c, a, &k->cur, seq)) < 0)
		return rc;
	rc = inc_exec(c, a);
	if (rc == 0) {
		k->counts.calls[a->coll][INCA_ALGO_INC]++;
		if (!allow_failover)
			return 0;
		if (k->cur.len >= FO_SYNC_BYTES) {
			rc = inc_end_agreement(c, seq);
			drop_input(&k->cur);
			drop_input(&k->prev);
			return rc;
		}
		if ((rc = own_input(&k->cur)) < 0)
			return rc;
		struct saved_call t = k->prev;
		k->prev = k->cur;
		k->cur = t;
		drop_input(&k->cur);
		return 0;
	}
	if (!allow_failover || rc == -EINVAL || rc == -ENOMEM || rc == -ENOTSUP)
		return rc;
	/* A rank is gone: no failover (its agreement needs every rank) and no failure report to
	 * the AM (the switch is fine; the AM would dismantle a healthy tree). */
	if (c->peer_lost) {
		drop_input(&k->cur);
		return -ECONNRESET;
	}
	rc = inc_failover(c, seq, rc);
	drop_input(&k->cur);
	return rc;
}

/* While INC is off after a failover (AM mode), check every REENABLE_EVERY-th call whether all
 * ranks adopted the same new tree. Every rank counts the same calls, so all check together. */
static int maybe_reenable(struct inca_comm *c)
{
	struct client_coll *k = c->coll;
	uint64_t lo, hi;
	int rc;

	if (k->inc_on || !c->am || c->cfg.size < 2)
		return 0;
	if (++k->host_calls_off % REENABLE_EVERY != 0)
		return 0;
	lo = hi = client_am_check(c) && c->inc ? ((uint64_t)c->cfg.tree_id << 32 | c->cfg.key) : 0;
	if ((rc = agree(c, SEQ_RE_LO, &lo, 1, INCA_MIN)) < 0)
		return rc;
	if ((rc = agree(c, SEQ_RE_HI, &hi, 1, INCA_MAX)) < 0)
		return rc;
	if (lo != 0 && lo == hi) {
		if ((rc = exchange_bfr_ids(c)) < 0)
			return rc;
		k->inc_on = true;
		drop_input(&k->prev);
		drop_input(&k->cur);
		memset(k->tune, 0, sizeof k->tune);
		client_log(&c->cfg, 2, "inc: back on the rebuilt tree %u", (unsigned)c->cfg.tree_id);
	}
	return 0;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static void nb_drain(struct inca_comm *c);

static int local_copy(struct inca_comm *c, const struct inca_coll_args *a)
{
	size_t b = a->count * inca_dtype_size(a->dt);

	switch (a->coll) {
	case INCA_COLL_BCAST:
	case INCA_COLL_BARRIER:
		return 0;
	default:
		if (a->recvbuf && a->sendbuf && a->recvbuf != a->sendbuf && b)
			memmove(a->recvbuf, a->sendbuf, b);
		return 0;
	}
}

static int coll_run_one(struct inca_comm *c, const struct inca_coll_args *a0);

/* Every call first checks the peers' connections (a rank that died between calls fails this
 * call at once, on every survivor alike), and a call that fails while a peer is known to be
 * gone returns -ECONNRESET, whatever step noticed it (INC wait, host transfer, failover
 * agreement), and shuts this rank's TCP sockets so the ranks waiting on it learn it at once.
 * Errors that say something else (-EPROTO: the ranks disagree, bad arguments, no memory) are
 * returned as they are. */
static int coll_run(struct inca_comm *c, const struct inca_coll_args *a)
{
	int rc;

	if (c->cfg.size > 1 && (rc = validate(c, a)) == 0 && (rc = client_peer_probe(c)) < 0) {
		client_peer_fail_all(c);
		return rc;
	}
	rc = coll_run_one(c, a);
	if (rc < 0 && c->peer_lost && rc != -EINVAL && rc != -ENOTSUP && rc != -EPROTO &&
	    rc != -ENOMEM) {
		client_peer_fail_all(c);
		rc = -ECONNRESET;
	}
	return rc;
}

static int coll_run_one(struct inca_comm *c, const struct inca_coll_args *a0)
{
	struct client_coll *k = c->coll;
	struct inca_coll_args a = *a0;
	enum inca_algo algo = a.algo;
	int rc;

	if ((rc = validate(c, &a)) < 0)
		return rc;
	c->wait_spin_ns = args_bytes(&a) <= CLIENT_BUSY_POLL_MAX_BYTES ? c->cfg.busy_poll_ns : 0;
	if (algo == INCA_ALGO_INC && (!client_coll_info[a.coll].offload || !inc_usable(c)))
		return -ENOTSUP;
	if (algo != INCA_ALGO_AUTO && algo != INCA_ALGO_INC && !client_host_algo_valid(a.coll, algo))
		return -ENOTSUP;
	if (a.count == 0 && a.coll != INCA_COLL_BARRIER)
		return 0;
	if (c->cfg.size == 1 && algo != INCA_ALGO_INC &&
	    !(algo == INCA_ALGO_AUTO && client_coll_info[a.coll].offload && inc_usable(c))) {
		k->counts.calls[a.coll][algo == INCA_ALGO_AUTO ? INCA_ALGO_RING : algo]++;
		if (a.coll == INCA_COLL_ALLREDUCE)
			c->stats.ring_calls++;
		return local_copy(c, &a);
	}
	if (c->ring_broken)
		return -EIO;

	if (algo == INCA_ALGO_AUTO && (rc = maybe_reenable(c)) < 0)
		return rc;
	c->coll_seq++;
	if (algo == INCA_ALGO_INC)
		return run_inc(c, &a, false);
	if (algo != INCA_ALGO_AUTO) {
		k->counts.calls[a.coll][algo]++;
		if (a.coll == INCA_COLL_ALLREDUCE || a.coll == INCA_COLL_BARRIER)
			c->stats.ring_calls++;
		return client_host_coll(c, &a, algo);
	}

	/* AUTO. The tuner: for an offloadable collective the first call in a size bucket runs
	 * on INC, the second on the host algorithm; both durations are agreed (max over ranks)
	 * and the faster path wins that bucket for good. */
	size_t bytes = args_bytes(&a);
	if (client_coll_info[a.coll].offload && inc_usable(c)) {
		struct tune_entry *t = &k->tune[a.coll][bucket_of(bytes)];
		if (k->tune_off || t->done || c->cfg.size == 1) {
			if (k->tune_off || t->choice || c->cfg.size == 1)
				return run_inc(c, &a, true);
		} else if (t->nsamples % 2 == 0) {
			uint64_t t0 = util_now_ns();
			rc = run_inc(c, &a, true);
			if (rc == 0 && k->inc_on)
				t->ns[t->nsamples++] = util_now_ns() - t0;
			return rc;
		} else {
			enum inca_algo h = client_host_choose(c, a.coll, bytes);
			uint64_t t0 = util_now_ns();
			k->counts.calls[a.coll][h]++;
			if (a.coll == INCA_COLL_ALLREDUCE || a.coll == INCA_COLL_BARRIER)
				c->stats.ring_calls++;
			rc = client_host_coll(c, &a, h);
			if (rc < 0)
				return rc;
			t->ns[t->nsamples++] = util_now_ns() - t0;
			if (t->nsamples < 2 * TUNE_PAIRS)
				return 0;
			/* every sample as the slowest rank saw it: the same numbers on every rank */
			if ((rc = agree(c, SEQ_TUNE, t->ns, 2 * TUNE_PAIRS, INCA_MAX)) < 0) {
				memset(t, 0, sizeof *t); /* samples may be half-reduced: start over */
				return rc;
			}
			t->choice = client_tune_prefers_inc(t->ns, TUNE_PAIRS);
			t->done = 1;
			client_log(&c->cfg, 3, "tune: %s %zu B: inc %llu us, %s %llu us (best of %d) -> %s",
				   inca_coll_name(a.coll), bytes,
				   (unsigned long long)(tune_best(t->ns, TUNE_PAIRS, 0) / 1000),
				   inca_algo_name(h),
				   (unsigned long long)(tune_best(t->ns, TUNE_PAIRS, 1) / 1000),
				   TUNE_PAIRS, t->choice ? "inc" : inca_algo_name(h));
			return 0;
		}
	}
	algo = client_host_choose(c, a.coll, bytes);
	k->counts.calls[a.coll][algo]++;
	if (a.coll == INCA_COLL_ALLREDUCE || a.coll == INCA_COLL_BARRIER)
		c->stats.ring_calls++;
	return client_host_coll(c, &a, algo);
}

int inca_coll(struct inca_comm *c, const struct inca_coll_args *a)
{
	if (!c || !a || !c->coll)
		return -EINVAL;
	nb_drain(c);
	return coll_run(c, a);
}

int inca_comm_set_tuning(struct inca_comm *c, int on)
{
	if (!c || !c->coll)
		return -EINVAL;
	nb_drain(c); /* queued AUTO requests keep the setting they were issued under */
	c->coll->tune_off = !on;
	return 0;
}

int inca_allreduce_algo(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
			enum inca_dtype dt, enum inca_op op, enum inca_algo algo)
{
	struct inca_coll_args a = { .coll = INCA_COLL_ALLREDUCE, .sendbuf = sendbuf,
				    .recvbuf = recvbuf, .count = count, .dt = dt, .op = op,
				    .algo = algo };
	return inca_coll(c, &a);
}

int inca_allreduce(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
		   enum inca_dtype dt, enum inca_op op)
{
	return inca_allreduce_algo(c, sendbuf, recvbuf, count, dt, op, INCA_ALGO_AUTO);
}

int inca_barrier(struct inca_comm *c)
{
	struct inca_coll_args a = { .coll = INCA_COLL_BARRIER, .dt = INCA_UINT8 };
	return inca_coll(c, &a);
}

int inca_reduce(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
		enum inca_dtype dt, enum inca_op op, int root)
{
	struct inca_coll_args a = { .coll = INCA_COLL_REDUCE, .sendbuf = sendbuf,
				    .recvbuf = recvbuf, .count = count, .dt = dt, .op = op,
				    .root = root };
	return inca_coll(c, &a);
}

int inca_bcast(struct inca_comm *c, void *buf, size_t count, enum inca_dtype dt, int root)
{
	struct inca_coll_args a = { .coll = INCA_COLL_BCAST, .recvbuf = buf, .count = count,
				    .dt = dt, .root = root };
	return inca_coll(c, &a);
}

int inca_allgather(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
		   enum inca_dtype dt)
{
	struct inca_coll_args a = { .coll = INCA_COLL_ALLGATHER, .sendbuf = sendbuf,
				    .recvbuf = recvbuf, .count = count, .dt = dt };
	return inca_coll(c, &a);
}

int inca_reduce_scatter(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
			enum inca_dtype dt, enum inca_op op)
{
	struct inca_coll_args a = { .coll = INCA_COLL_REDUCE_SCATTER, .sendbuf = sendbuf,
				    .recvbuf = recvbuf, .count = count, .dt = dt, .op = op };
	return inca_coll(c, &a);
}

int inca_alltoall(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
		  enum inca_dtype dt)
{
	struct inca_coll_args a = { .coll = INCA_COLL_ALLTOALL, .sendbuf = sendbuf,
				    .recvbuf = recvbuf, .count = count, .dt = dt };
	return inca_coll(c, &a);
}

int inca_gather(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
		enum inca_dtype dt, int root)
{
	struct inca_coll_args a = { .coll = INCA_COLL_GATHER, .sendbuf = sendbuf,
				    .recvbuf = recvbuf, .count = count, .dt = dt, .root = root };
	return inca_coll(c, &a);
}

int inca_scatter(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
		 enum inca_dtype dt, int root)
{
	struct inca_coll_args a = { .coll = INCA_COLL_SCATTER, .sendbuf = sendbuf,
				    .recvbuf = recvbuf, .count = count, .dt = dt, .root = root };
	return inca_coll(c, &a);
}

/* ---- nonblocking AllReduce --------------------------------------------------------------- */

static void *nb_thread(void *arg)
{
	struct inca_comm *c = arg;
	struct client_coll *k = c->coll;

	pthread_mutex_lock(&k->mu);
	for (;;) {
		while (!k->head && !k->stop)
			pthread_cond_wait(&k->cv, &k->mu);
		if (!k->head)
			break;
		struct inca_request *r = k->head->req;
		pthread_mutex_unlock(&k->mu);
		struct inca_coll_args a = { .coll = INCA_COLL_ALLREDUCE, .sendbuf = r->sendbuf,
					    .recvbuf = r->recvbuf, .count = r->count, .dt = r->dt,
					    .op = r->op };
		int rc = coll_run(c, &a);
		pthread_mutex_lock(&k->mu);
		k->head = k->head->next;
		if (!k->head)
			k->tail = NULL;
		k->pending--;
		r->status = rc;
		r->done = true;
		pthread_cond_broadcast(&k->cv);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

/* Blocking calls and destroy: wait until the progress thread has nothing queued. */
static void nb_drain(struct inca_comm *c)
{
	struct client_coll *k = c->coll;

	if (!k->thr_started)
		return;
	pthread_mutex_lock(&k->mu);
	while (k->pending)
		pthread_cond_wait(&k->cv, &k->mu);
	pthread_mutex_unlock(&k->mu);
}

static void nb_stop(struct inca_comm *c)
{
	struct client_coll *k = c->coll;

	if (!k->thr_started)
		return;
	nb_drain(c);
	pthread_mutex_lock(&k->mu);
	k->stop = true;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	pthread_join(k->thr, NULL);
	k->thr_started = false;
}

int inca_iallreduce(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
		    enum inca_dtype dt, enum inca_op op, struct inca_request **req)
{
	struct inca_coll_args a = { .coll = INCA_COLL_ALLREDUCE, .sendbuf = sendbuf,
				    .recvbuf = recvbuf, .count = count, .dt = dt, .op = op };
	struct client_coll *k;
	struct inca_request *r;
	int rc;

	if (!req)
		return -EINVAL;
	*req = NULL;
	if (!c || !c->coll)
		return -EINVAL;
	k = c->coll;
	if ((rc = validate(c, &a)) < 0)
		return rc;
	r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	*r = (struct inca_request){ .comm = c, .sendbuf = sendbuf, .recvbuf = recvbuf,
				    .count = count, .dt = dt, .op = op };
	r->node.req = r;
	pthread_mutex_lock(&k->mu);
	if (!k->thr_started) {
		k->stop = false;
		if (pthread_create(&k->thr, NULL, nb_thread, c) != 0) {
			pthread_mutex_unlock(&k->mu);
			free(r);
			return -EAGAIN;
		}
		k->thr_started = true;
	}
	if (k->tail)
		k->tail->next = &r->node;
	else
		k->head = &r->node;
	k->tail = &r->node;
	k->pending++;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	*req = r;
	return 0;
}

int inca_test(struct inca_request **req, int *done)
{
	struct inca_request *r;
	struct client_coll *k;
	int rc = 0;

	if (!req || !*req || !done)
		return -EINVAL;
	r = *req;
	k = r->comm->coll;
	pthread_mutex_lock(&k->mu);
	*done = r->done;
	if (r->done)
		rc = r->status;
	pthread_mutex_unlock(&k->mu);
	if (*done) {
		free(r);
		*req = NULL;
	}
	return rc;
}

int inca_wait(struct inca_request **req)
{
	struct inca_request *r;
	struct client_coll *k;
	int rc;

	if (!req || !*req)
		return -EINVAL;
	r = *req;
	k = r->comm->coll;
	pthread_mutex_lock(&k->mu);
	while (!r->done)
		pthread_cond_wait(&k->cv, &k->mu);
	rc = r->status;
	pthread_mutex_unlock(&k->mu);
	free(r);
	*req = NULL;
	return rc;
}
