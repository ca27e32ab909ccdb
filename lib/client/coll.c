/* libinca collective dispatch: names, per-communicator state, validation of the nine
 * collectives, the choice between INC and host algorithms (an online tuner that agrees across
 * ranks), per-path counters and the public entry points. The INC forms and failover live in
 * coll_inc.c, the nonblocking AllReduce in coll_nb.c, the shared state in coll_int.h. */
#include "client/coll_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "wire/wire.h"

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
		return coll_exchange_bfr_ids(c);
	k->bfr_of_rank = calloc(1, sizeof *k->bfr_of_rank);
	if (!k->bfr_of_rank)
		return -ENOMEM;
	k->bfr_of_rank[0] = c->cfg.bfr_id;
	k->bfr_ok = c->inc != NULL;
	return 0;
}

void client_coll_free(struct inca_comm *c)
{
	struct client_coll *k = c->coll;

	if (!k)
		return;
	coll_nb_stop(c);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k->scratch);
	free(k->cur.in);
	free(k->prev.in);
	free(k->bfr_of_rank);
	free(k);
	c->coll = NULL;
}

/* ---- validation ------------------------------------------------------------------------- */

static bool ranges_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
	return x < y + blen && y < x + alen;
}

/* Bytes of the per-rank buffer the size-based choice looks at (inca_coll_args.count). */
size_t coll_args_bytes(const struct inca_coll_args *a)
{
	return a->coll == INCA_COLL_BARRIER ? 0 : a->count * inca_dtype_size(a->dt);
}

/* Bytes of sendbuf and recvbuf one call touches on this rank (0: the buffer is not used). */
void coll_extent(const struct inca_comm *c, const struct inca_coll_args *a, size_t *send_b,
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

int coll_validate(const struct inca_comm *c, const struct inca_coll_args *a)
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

int coll_agree(struct inca_comm *c, uint64_t seq, void *vals, size_t n, enum inca_op op)
{
	uint64_t saved = c->coll_seq;
	int rc;

	c->coll_seq = seq;
	rc = client_ring_allreduce(c, vals, vals, n, INCA_UINT64, op);
	c->coll_seq = saved;
	return rc;
}
/* ---- dispatch ---------------------------------------------------------------------------- */

static int coll_run_one(struct inca_comm *c, const struct inca_coll_args *a0);

/* Every call first checks the peers' connections (a rank that died between calls fails this
 * call at once, on every survivor alike), and a call that fails while a peer is known to be
 * gone returns -ECONNRESET, whatever step noticed it (INC wait, host transfer, failover
 * agreement), and shuts this rank's TCP sockets so the ranks waiting on it learn it at once.
 * Errors that say something else (-EPROTO: the ranks disagree, bad arguments, no memory) are
 * returned as they are. */
int coll_run(struct inca_comm *c, const struct inca_coll_args *a)
{
	int rc;

	if (c->cfg.size > 1 && (rc = coll_validate(c, a)) == 0 && (rc = client_peer_probe(c)) < 0) {
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

	if ((rc = coll_validate(c, &a)) < 0)
		return rc;
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
		return client_coll_single(&a);
	}
	if (c->ring_broken)
		return -EIO;

	if (algo == INCA_ALGO_AUTO && (rc = coll_maybe_reenable(c)) < 0)
		return rc;
	c->coll_seq++;
	if (algo == INCA_ALGO_INC)
		return coll_run_inc(c, &a, false);
	if (algo != INCA_ALGO_AUTO) {
		k->counts.calls[a.coll][algo]++;
		if (a.coll == INCA_COLL_ALLREDUCE || a.coll == INCA_COLL_BARRIER)
			c->stats.ring_calls++;
		return client_host_coll(c, &a, algo);
	}

	/* AUTO. The tuner: for an offloadable collective the first call in a size bucket runs
	 * on INC, the second on the host algorithm; both durations are agreed (max over ranks)
	 * and the faster path wins that bucket for good. */
	size_t bytes = coll_args_bytes(&a);
	if (client_coll_info[a.coll].offload && inc_usable(c)) {
		struct tune_entry *t = &k->tune[a.coll][bucket_of(bytes)];
		if (k->tune_off || t->done || c->cfg.size == 1) {
			if (k->tune_off || t->choice || c->cfg.size == 1)
				return coll_run_inc(c, &a, true);
		} else if (t->nsamples % 2 == 0) {
			uint64_t t0 = util_now_ns();
			rc = coll_run_inc(c, &a, true);
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
			if ((rc = coll_agree(c, SEQ_TUNE, t->ns, 2 * TUNE_PAIRS, INCA_MAX)) < 0) {
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
	coll_nb_drain(c);
	return coll_run(c, a);
}

int inca_comm_set_tuning(struct inca_comm *c, int on)
{
	if (!c || !c->coll)
		return -EINVAL;
	coll_nb_drain(c); /* queued AUTO requests keep the setting they were issued under */
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
