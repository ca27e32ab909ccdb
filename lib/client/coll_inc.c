/* libinca collectives on the switch: the INC forms of Reduce, Broadcast, AllGather,
 * ReduceScatter and Barrier built on the INC data path (per-chunk owners), the BFR-id exchange,
 * keeping a call's input for a redo, failover of a failed INC call to the host path (every rank
 * agrees first), and re-enabling INC when the AM provides a new tree. docs/collectives.md
 * "Failover". Dispatch is in coll.c. */
#include "client/coll_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "wire/wire.h"

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

/* Exchange every rank's BFR-id (a member of a tree is addressed by it: the owner of a chunk,
 * docs/protocol.md §4.1). Collective: every rank calls it at the same point (creation, and
 * after the ranks agreed on a rebuilt tree). */
int coll_exchange_bfr_ids(struct inca_comm *c)
{
	struct client_coll *k = c->coll;
	size_t n = (size_t)c->cfg.size;
	uint64_t *v = calloc(n, sizeof *v);
	int rc;

	if (!v)
		return -ENOMEM;
	v[c->cfg.rank] = c->inc ? c->cfg.bfr_id : 0;
	rc = coll_agree(c, SEQ_BFR, v, n, INCA_BOR);
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
	h.algo = client_host_choose(c, h.coll, coll_args_bytes(&h));
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
	if ((rc = coll_agree(c, SEQ_FO_MIN, &m, 1, INCA_MIN)) < 0)
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
	int rc = coll_agree(c, SEQ_FO_MIN, &m, 1, INCA_MIN);

	if (rc < 0 || m == UINT64_MAX)
		return rc;
	/* Some rank failed this very call (an earlier one would have failed this one here). */
	inc_off(c, m, -ETIMEDOUT);
	return m == seq ? host_redo(c, &k->cur, false) : -EIO;
}

int coll_run_inc(struct inca_comm *c, const struct inca_coll_args *a, bool allow_failover)
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
int coll_maybe_reenable(struct inca_comm *c)
{
	struct client_coll *k = c->coll;
	uint64_t lo, hi;
	int rc;

	if (k->inc_on || !c->am || c->cfg.size < 2)
		return 0;
	if (++k->host_calls_off % REENABLE_EVERY != 0)
		return 0;
	lo = hi = client_am_check(c) && c->inc ? ((uint64_t)c->cfg.tree_id << 32 | c->cfg.key) : 0;
	if ((rc = coll_agree(c, SEQ_RE_LO, &lo, 1, INCA_MIN)) < 0)
		return rc;
	if ((rc = coll_agree(c, SEQ_RE_HI, &hi, 1, INCA_MAX)) < 0)
		return rc;
	if (lo != 0 && lo == hi) {
		if ((rc = coll_exchange_bfr_ids(c)) < 0)
			return rc;
		k->inc_on = true;
		drop_input(&k->prev);
		drop_input(&k->cur);
		memset(k->tune, 0, sizeof k->tune);
		client_log(&c->cfg, 2, "inc: back on the rebuilt tree %u", (unsigned)c->cfg.tree_id);
	}
	return 0;
}
