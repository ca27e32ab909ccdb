/* libinca host algorithms for the nine collectives (docs/collectives.md) over the TCP
 * mesh bootstrap.c builds: a poll-driven transfer engine (many concurrent framed sends and
 * receives, reduce-on-receive, sends gated on receives for pipelining) and the algorithms on it.
 * Public dispatch, argument checks and the INC paths are in coll.c, not here. */
#include "client/client.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agg/agg.h"

#define HC_MAGIC 0x494e4348u /* "INCH" */
#define HC_HDR_LEN 48
/* Reduce-on-receive reads through this buffer and reduces at once, so one buffer serves every
 * concurrent receive (only a partial element, < 16 bytes, is carried per transfer). */
#define HC_STAGE_BYTES (256u << 10)
#define HC_TAG_FINAL 0xfffeu /* result back to a rank folded out of a power-of-two group */

/* ---------------------------------------------------------------- transfer engine */

/* One framed message to or from one peer: a 48-byte header then len payload bytes. Transfers
 * on the same (peer, direction) run in the order they were added (one TCP stream each). */
struct xop {
	int peer;
	bool is_send, reduce;
	int gate;          /* send only: recv op whose finished bytes bound ours, -1: none */
	size_t gate_off;   /* ... starting at this payload offset of the gate op */
	int prev;          /* previous op on the same (peer, direction) stream, -1: none */
	uint8_t *buf;      /* payload (send: read only) */
	size_t len;
	size_t off;        /* stream bytes moved, header included */
	size_t done;       /* payload bytes final (recv: received, or reduced when reduce) */
	uint8_t hdr[HC_HDR_LEN]; /* send: header to send; recv: the header we expect */
	uint8_t got[HC_HDR_LEN];
	uint8_t carry[16]; /* recv+reduce: bytes of a partial element */
	size_t ncarry;
};

/* One call of client_host_coll. */
struct hc {
	struct inca_comm *c;
	const struct inca_coll_args *a;
	enum inca_algo algo;
	int n, me;
	size_t elem;
	struct xop *ops;
	int nops, cap;
	int *tail_send, *tail_recv; /* per peer: last op index in this batch, -1 */
};

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* Everything the ranks must agree on goes into every header, so any disagreement (call order,
 * collective, algorithm, count, type, op, root, step, length) is -EPROTO at the receiver. */
static void make_hdr(const struct hc *h, uint8_t *p, int src, uint32_t tag, size_t len)
{
	const struct inca_coll_args *a = h->a;
	bool barrier = a->coll == INCA_COLL_BARRIER;

	memset(p, 0, HC_HDR_LEN);
	put_be(p, HC_MAGIC, 4);
	p[4] = (uint8_t)a->coll;
	p[5] = (uint8_t)h->algo;
	p[6] = barrier ? 0 : (uint8_t)a->dt;
	p[7] = client_coll_info[a->coll].reduces ? (uint8_t)a->op : 0;
	put_be(p + 8, h->c->coll_seq, 8);
	put_be(p + 16, barrier ? 0 : a->count, 8);
	put_be(p + 24, client_coll_info[a->coll].rooted ? (uint32_t)a->root : 0, 4);
	put_be(p + 28, (uint32_t)src, 4);
	put_be(p + 32, tag, 4);
	put_be(p + 40, len, 8);
}

static int add_op(struct hc *h, int peer, bool is_send, uint32_t tag, const void *buf, size_t len)
{
	struct xop *o;
	int *tail = is_send ? h->tail_send : h->tail_recv;

	if (h->nops == h->cap) {
		int cap = h->cap ? h->cap * 2 : 16;
		struct xop *ops = realloc(h->ops, sizeof *ops * (size_t)cap);
		if (!ops)
			return -ENOMEM;
		h->ops = ops;
		h->cap = cap;
	}
	o = &h->ops[h->nops];
	memset(o, 0, offsetof(struct xop, hdr));
	o->peer = peer;
	o->is_send = is_send;
	o->gate = -1;
	o->prev = tail[peer];
	o->buf = (uint8_t *)(uintptr_t)buf;
	o->len = len;
	o->ncarry = 0;
	make_hdr(h, o->hdr, is_send ? h->me : peer, tag, len);
	tail[peer] = h->nops;
	return h->nops++;
}

/* Queue a send; gate >= 0 lets only bytes [gate_off, gate_off + done) of recv op gate go out. */
static int xsend(struct hc *h, int peer, uint32_t tag, const void *buf, size_t len, int gate,
		 size_t gate_off)
{
	int i = add_op(h, peer, true, tag, buf, len);

	if (i >= 0) {
		h->ops[i].gate = gate;
		h->ops[i].gate_off = gate_off;
	}
	return i;
}

static int xrecv(struct hc *h, int peer, uint32_t tag, void *buf, size_t len, bool reduce)
{
	int i = add_op(h, peer, false, tag, buf, len);

	if (i >= 0)
		h->ops[i].reduce = reduce && len > 0;
	return i;
}

static bool op_finished(const struct xop *o)
{
	return o->off == HC_HDR_LEN + o->len && (!o->reduce || o->done == o->len);
}

/* How many payload bytes of send op o may go out now. */
static size_t send_avail(const struct hc *h, const struct xop *o)
{
	const struct xop *g;

	if (o->gate < 0)
		return o->len;
	g = &h->ops[o->gate];
	if (g->done <= o->gate_off)
		return 0;
	return g->done - o->gate_off < o->len ? g->done - o->gate_off : o->len;
}

/* Move bytes of o until EAGAIN, completion or the gate. *moved set on progress, *want_out on
 * EAGAIN while sending. */
static int step_send(struct hc *h, struct xop *o, bool *moved, bool *want_out)
{
	int fd = h->c->host_fd[o->peer];

	for (;;) {
		size_t target = HC_HDR_LEN + send_avail(h, o);
		struct iovec iov[2];
		struct msghdr mh = { .msg_iov = iov };
		ssize_t n;

		if (o->off >= target)
			return 0;
		if (o->off < HC_HDR_LEN) {
			iov[0] = (struct iovec){ o->hdr + o->off, HC_HDR_LEN - o->off };
			iov[1] = (struct iovec){ o->buf, target - HC_HDR_LEN };
			mh.msg_iovlen = target > HC_HDR_LEN ? 2 : 1;
		} else {
			iov[0] = (struct iovec){ o->buf + (o->off - HC_HDR_LEN), target - o->off };
			mh.msg_iovlen = 1;
		}
		n = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			o->off += (size_t)n;
			o->done = o->off > HC_HDR_LEN ? o->off - HC_HDR_LEN : 0;
			*moved = true;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			*want_out = true;
			return 0;
		}
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
			client_peer_note_lost(h->c, "mesh send failed");
		return -EIO;
	}
}

static int step_recv(struct hc *h, struct xop *o, bool *moved)
{
	int fd = h->c->host_fd[o->peer];
	uint8_t *stage = h->c->host_stage;

	while (o->off < HC_HDR_LEN + o->len) {
		struct iovec iov[2];
		struct msghdr mh = { .msg_iov = iov };
		size_t hdr_left = o->off < HC_HDR_LEN ? HC_HDR_LEN - o->off : 0;
		size_t pay_left = HC_HDR_LEN + o->len - o->off - hdr_left, pay_want = pay_left;
		uint8_t *pay_dst;
		ssize_t n;

		if (o->reduce) {
			memcpy(stage, o->carry, o->ncarry);
			if (pay_want > HC_STAGE_BYTES - o->ncarry)
				pay_want = HC_STAGE_BYTES - o->ncarry;
			pay_dst = stage + o->ncarry;
		} else {
			pay_dst = o->buf + (o->len - pay_left);
		}
		mh.msg_iovlen = 0;
		if (hdr_left)
			iov[mh.msg_iovlen++] = (struct iovec){ o->got + o->off, hdr_left };
		if (pay_want)
			iov[mh.msg_iovlen++] = (struct iovec){ pay_dst, pay_want };
		n = recvmsg(fd, &mh, MSG_DONTWAIT);
		if (n == 0) {
			client_peer_note_lost(h->c, "mesh connection closed");
			return -ECONNRESET;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -EIO;
		}
		*moved = true;
		o->off += (size_t)n;
		/* Check the header before any payload byte is used. */
		if (hdr_left && o->off >= HC_HDR_LEN && memcmp(o->got, o->hdr, HC_HDR_LEN) != 0) {
			client_log(&h->c->cfg, 0, "host %s: rank %d runs another collective or arguments",
				   inca_coll_name(h->a->coll), o->peer);
			return -EPROTO;
		}
		size_t pay = (size_t)n > hdr_left ? (size_t)n - hdr_left : 0;
		if (!o->reduce) {
			o->done += pay;
		} else if (pay) {
			size_t have = o->ncarry + pay, whole = have / h->elem * h->elem;
			if (whole) {
				int rc = agg_reduce(o->buf + o->done, stage, whole / h->elem, h->a->dt,
						    h->a->op);
				if (rc < 0)
					return rc;
				o->done += whole;
			}
			o->ncarry = have - whole;
			memcpy(o->carry, stage + whole, o->ncarry);
		}
	}
	return 0;
}

/* Run every queued op to completion; poll-driven and full duplex, so two ranks sending each
 * other megabytes never deadlock. The deadline is idle time: timeout_ms without any byte. */
static int batch_run(struct hc *h)
{
	struct inca_comm *c = h->c;
	const uint64_t idle_ns = (uint64_t)c->cfg.timeout_ms * 1000000ull;
	uint64_t idle_deadline = util_now_ns() + idle_ns;
	struct pollfd *pf = NULL;
	int rc = 0, left = h->nops;

	if (h->nops == 0)
		return 0;
	pf = malloc(sizeof *pf * (size_t)h->nops);
	if (!pf)
		return -ENOMEM;
	for (;;) {
		bool moved = false;
		int np = 0;

		left = 0;
		for (int i = 0; i < h->nops; i++) {
			struct xop *o = &h->ops[i];
			bool want_out = false;
			short ev = 0;

			if (op_finished(o))
				continue;
			left++;
			if (o->prev >= 0 && !op_finished(&h->ops[o->prev]))
				continue; /* waits for its predecessor on the same stream */
			if (o->is_send) {
				rc = step_send(h, o, &moved, &want_out);
				if (want_out)
					ev = POLLOUT;
			} else {
				rc = step_recv(h, o, &moved);
				ev = POLLIN;
			}
			if (rc < 0)
				goto out;
			if (op_finished(o)) {
				left--;
				continue;
			}
			if (ev) {
				int j;
				for (j = 0; j < np && pf[j].fd != c->host_fd[o->peer]; j++)
					;
				if (j == np)
					pf[np++] = (struct pollfd){ .fd = c->host_fd[o->peer] };
				pf[j].events |= ev;
			}
		}
		if (left == 0)
			break;
		if (moved) {
			idle_deadline = util_now_ns() + idle_ns;
			continue;
		}
		if (np == 0) {
			rc = -EIO; /* cannot happen: a gated send always has a pending receive */
			goto out;
		}
		uint64_t now = util_now_ns();
		if (now >= idle_deadline) {
			rc = -ETIMEDOUT;
			goto out;
		}
		/* A rank is gone: what we still wait for may never come (bootstrap.c). */
		if (c->peer_lost && now >= idle_deadline - idle_ns + CLIENT_PEER_GRACE_NS &&
		    now >= c->peer_lost_ns + CLIENT_PEER_GRACE_NS) {
			rc = -ECONNRESET;
			goto out;
		}
		uint64_t wait = idle_deadline - now;
		if (wait > CLIENT_PEER_GRACE_NS / 4)
			wait = CLIENT_PEER_GRACE_NS / 4;
		if ((rc = client_wait_peers(c, pf, (nfds_t)np, wait, c->wait_spin_ns)) < 0)
			goto out;
		rc = 0;
	}
out:
	free(pf);
	for (int i = 0; i < h->nops; i++)
		h->tail_send[h->ops[i].peer] = h->tail_recv[h->ops[i].peer] = -1;
	h->nops = 0;
	return rc;
}

/* Grow-only scratch buffer slot (0..2) kept by the communicator between calls. */
static void *scratch(struct hc *h, int slot, size_t bytes)
{
	struct inca_comm *c = h->c;

	if (c->host_scratch_cap[slot] < bytes || !c->host_scratch[slot]) {
		void *p = malloc(bytes ? bytes : 1);
		if (!p)
			return NULL;
		free(c->host_scratch[slot]);
		c->host_scratch[slot] = p;
		c->host_scratch_cap[slot] = bytes;
	}
	return c->host_scratch[slot];
}

static void copy_block(void *dst, const void *src, size_t bytes)
{
	if (dst != src && bytes)
		memmove(dst, src, bytes);
}

static int mod(int a, int n)
{
	return ((a % n) + n) % n;
}

static int ilog2(unsigned v)
{
	int l = 0;
	while (v >>= 1)
		l++;
	return l;
}

static int pow2_floor(int n)
{
	int p = 1;
	while (p * 2 <= n)
		p *= 2;
	return p;
}

/* Lowest set bit of vr; for the tree root (vr 0) the first power of two >= n. */
static int low_bit(int vr, int n)
{
	int m = 1;
	if (vr == 0) {
		while (m < n)
			m <<= 1;
		return m;
	}
	return vr & -vr;
}

/* Elements of block i when count is split into parts blocks (the first count % parts get one
 * more): start offset in elements. */
static size_t blk_start(size_t count, int parts, int i)
{
	size_t q = count / (size_t)parts, r = count % (size_t)parts;
	return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}

/* ---------------------------------------------------------------- AllReduce */

/* Non-power-of-two groups (the usual folding): with p = 2^floor(log2 n) and r = n - p, each
 * even rank below 2r hands its vector to the odd rank above it and sits out; the p remaining
 * ranks run the power-of-two algorithm under new ranks 0..p-1; the odd ranks hand the result
 * back at the end. */
struct fold {
	int p, r, newrank; /* newrank -1: sits out */
};

static struct fold fold_of(int n, int me)
{
	struct fold f = { .p = pow2_floor(n) };

	f.r = n - f.p;
	if (me < 2 * f.r)
		f.newrank = (me & 1) ? me / 2 : -1;
	else
		f.newrank = me - f.r;
	return f;
}

static int fold_rank(const struct fold *f, int newrank)
{
	return newrank < f->r ? newrank * 2 + 1 : newrank + f->r;
}

static int fold_in(struct hc *h, const struct fold *f, uint8_t *buf, size_t bytes)
{
	int rc;

	if (h->me >= 2 * f->r)
		return 0;
	if (f->newrank < 0) {
		/* Sit out: our vector goes up, the result comes back on the same stream pair. */
		if ((rc = xsend(h, h->me + 1, 0, buf, bytes, -1, 0)) < 0 ||
		    (rc = xrecv(h, h->me + 1, HC_TAG_FINAL, buf, bytes, false)) < 0)
			return rc;
		return batch_run(h);
	}
	if ((rc = xrecv(h, h->me - 1, 0, buf, bytes, true)) < 0)
		return rc;
	return batch_run(h);
}

static int fold_out(struct hc *h, const struct fold *f, const uint8_t *buf, size_t bytes)
{
	int rc;

	if (h->me >= 2 * f->r || f->newrank < 0)
		return 0;
	if ((rc = xsend(h, h->me - 1, HC_TAG_FINAL, buf, bytes, -1, 0)) < 0)
		return rc;
	return batch_run(h);
}

static int allreduce_recdbl(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t bytes = a->count * h->elem;
	uint8_t *buf = a->recvbuf, *tmp;
	struct fold f = fold_of(h->n, h->me);
	int rc, step = 1;

	copy_block(buf, a->sendbuf, bytes);
	if ((rc = fold_in(h, &f, buf, bytes)) < 0 || f.newrank < 0)
		return rc;
	if (!(tmp = scratch(h, 0, bytes)))
		return -ENOMEM;
	for (int mask = 1; mask < f.p; mask <<= 1, step++) {
		int peer = fold_rank(&f, f.newrank ^ mask);
		/* Both partners compute a OP b from the same two vectors: the kernels are
		 * commutative, so every rank ends with bit-identical results. */
		if ((rc = xsend(h, peer, (uint32_t)step, buf, bytes, -1, 0)) < 0 ||
		    (rc = xrecv(h, peer, (uint32_t)step, tmp, bytes, false)) < 0 ||
		    (rc = batch_run(h)) < 0)
			return rc;
		if ((rc = agg_reduce(buf, tmp, a->count, a->dt, a->op)) < 0)
			return rc;
	}
	return fold_out(h, &f, buf, bytes);
}

static int allreduce_rabenseifner(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t bytes = a->count * h->elem, e = h->elem;
	uint8_t *buf = a->recvbuf;
	struct fold f = fold_of(h->n, h->me);
	int rc, step = 1, lo = 0, hi;

	copy_block(buf, a->sendbuf, bytes);
	if ((rc = fold_in(h, &f, buf, bytes)) < 0 || f.newrank < 0)
		return rc;
	hi = f.p;
	/* Reduce-scatter by recursive halving: keep the half of the window our bit selects,
	 * send the other half; we end holding block newrank fully reduced. */
	for (int mask = f.p / 2; mask >= 1; mask >>= 1, step++) {
		int peer = fold_rank(&f, f.newrank ^ mask), mid = lo + mask;
		int klo = (f.newrank & mask) ? mid : lo, khi = (f.newrank & mask) ? hi : mid;
		int slo = (f.newrank & mask) ? lo : mid, shi = (f.newrank & mask) ? mid : hi;
		size_t ks = blk_start(a->count, f.p, klo), ke = blk_start(a->count, f.p, khi);
		size_t ss = blk_start(a->count, f.p, slo), se = blk_start(a->count, f.p, shi);

		if ((rc = xsend(h, peer, (uint32_t)step, buf + ss * e, (se - ss) * e, -1, 0)) < 0 ||
		    (rc = xrecv(h, peer, (uint32_t)step, buf + ks * e, (ke - ks) * e, true)) < 0 ||
		    (rc = batch_run(h)) < 0)
			return rc;
		lo = klo;
		hi = khi;
	}
	/* Allgather by recursive doubling: windows double back up. */
	for (int mask = 1; mask < f.p; mask <<= 1, step++) {
		int pnew = f.newrank ^ mask, peer = fold_rank(&f, pnew);
		int mlo = f.newrank / mask * mask, plo = pnew / mask * mask;
		size_t ms = blk_start(a->count, f.p, mlo), me_ = blk_start(a->count, f.p, mlo + mask);
		size_t ps = blk_start(a->count, f.p, plo), pe = blk_start(a->count, f.p, plo + mask);

		if ((rc = xsend(h, peer, (uint32_t)step, buf + ms * e, (me_ - ms) * e, -1, 0)) < 0 ||
		    (rc = xrecv(h, peer, (uint32_t)step, buf + ps * e, (pe - ps) * e, false)) < 0 ||
		    (rc = batch_run(h)) < 0)
			return rc;
	}
	return fold_out(h, &f, buf, bytes);
}

/* ---------------------------------------------------------------- rooted trees */

static int reduce_binomial(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t bytes = a->count * h->elem;
	int n = h->n, vr = mod(h->me - a->root, n), lb = low_bit(vr, n), rc;
	bool has_child = 1 < lb && vr + 1 < n;
	const uint8_t *acc;
	uint8_t *wacc = NULL;

	if (vr == 0) {
		wacc = a->recvbuf;
		copy_block(wacc, a->sendbuf, bytes);
	} else if (has_child) {
		if (!(wacc = scratch(h, 0, bytes)))
			return -ENOMEM;
		memcpy(wacc, a->sendbuf, bytes);
	}
	acc = wacc ? wacc : a->sendbuf;
	/* Children one at a time, in a fixed order: reproducible floating-point results. */
	for (int mask = 1; mask < lb && vr + mask < n; mask <<= 1) {
		int child = mod(vr + mask + a->root, n);
		if ((rc = xrecv(h, child, (uint32_t)ilog2((unsigned)mask), wacc, bytes, true)) < 0 ||
		    (rc = batch_run(h)) < 0)
			return rc;
	}
	if (vr == 0)
		return 0;
	if ((rc = xsend(h, mod(vr - lb + a->root, n), (uint32_t)ilog2((unsigned)lb), acc, bytes,
			-1, 0)) < 0)
		return rc;
	return batch_run(h);
}

/* Binomial broadcast, pipelined: every child send is gated on the bytes received from the
 * parent so far, so a large message streams down the tree instead of hopping whole. */
static int bcast_binomial(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t bytes = a->count * h->elem;
	int n = h->n, vr = mod(h->me - a->root, n), lb = low_bit(vr, n), gate = -1;

	if (vr != 0) {
		gate = xrecv(h, mod(vr - lb + a->root, n), (uint32_t)ilog2((unsigned)lb), a->recvbuf,
			     bytes, false);
		if (gate < 0)
			return gate;
	}
	for (int mask = lb >> 1; mask >= 1; mask >>= 1) {
		if (vr + mask >= n)
			continue;
		int rc = xsend(h, mod(vr + mask + a->root, n), (uint32_t)ilog2((unsigned)mask),
			       a->recvbuf, bytes, gate, 0);
		if (rc < 0)
			return rc;
	}
	return batch_run(h);
}

/* Chain root -> root+1 -> ... -> root-1, forwarding bytes as they arrive. */
static int bcast_chain(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t bytes = a->count * h->elem;
	int n = h->n, vr = mod(h->me - a->root, n), gate = -1, rc;

	if (vr != 0 && (gate = xrecv(h, mod(h->me - 1, n), 0, a->recvbuf, bytes, false)) < 0)
		return gate;
	if (vr != n - 1 && (rc = xsend(h, mod(h->me + 1, n), 0, a->recvbuf, bytes, gate, 0)) < 0)
		return rc;
	return batch_run(h);
}

/* Subtree of virtual rank vr in the binomial tree: vr .. vr + size - 1. */
static int subtree(int vr, int n)
{
	int lb = low_bit(vr, n);
	return vr + lb < n ? lb : n - vr;
}

static int gather_binomial(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	int n = h->n, root = a->root, vr = mod(h->me - root, n), sub = subtree(vr, n), rc;
	const uint8_t *own = a->sendbuf;
	uint8_t *tmp;

	if (vr == 0 && a->sendbuf == a->recvbuf)
		own = (const uint8_t *)a->recvbuf + (size_t)root * blk; /* in place */
	if (sub == 1) /* leaf */
		tmp = (uint8_t *)(uintptr_t)own;
	else if (vr == 0 && root == 0)
		tmp = a->recvbuf; /* virtual order is rank order */
	else if (!(tmp = scratch(h, 0, (size_t)sub * blk)))
		return -ENOMEM;
	if (sub > 1)
		copy_block(tmp, own, blk);
	/* All children at once: their ranges are disjoint. */
	for (int mask = 1; mask < sub; mask <<= 1) {
		int cs = subtree(vr + mask, n);
		if ((rc = xrecv(h, mod(vr + mask + root, n), (uint32_t)ilog2((unsigned)mask),
				tmp + (size_t)mask * blk, (size_t)cs * blk, false)) < 0)
			return rc;
	}
	if (vr != 0) {
		int lb = low_bit(vr, n);
		/* Up to the parent as soon as everything below us arrived. */
		if ((rc = batch_run(h)) < 0 ||
		    (rc = xsend(h, mod(vr - lb + root, n), (uint32_t)ilog2((unsigned)lb), tmp,
				(size_t)sub * blk, -1, 0)) < 0)
			return rc;
		return batch_run(h);
	}
	if ((rc = batch_run(h)) < 0)
		return rc;
	if (root != 0) { /* tmp[v] belongs to rank (v + root) % n */
		uint8_t *out = a->recvbuf;
		memcpy(out + (size_t)root * blk, tmp, (size_t)(n - root) * blk);
		memcpy(out, tmp + (size_t)(n - root) * blk, (size_t)root * blk);
	}
	return 0;
}

static int scatter_binomial(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	int n = h->n, root = a->root, vr = mod(h->me - root, n), sub = subtree(vr, n), gate = -1, rc;
	uint8_t *tmp;

	if (vr == 0) {
		if (root == 0) {
			tmp = (uint8_t *)(uintptr_t)a->sendbuf;
		} else {
			const uint8_t *in = a->sendbuf;
			if (!(tmp = scratch(h, 0, (size_t)n * blk)))
				return -ENOMEM;
			memcpy(tmp, in + (size_t)root * blk, (size_t)(n - root) * blk);
			memcpy(tmp + (size_t)(n - root) * blk, in, (size_t)root * blk);
		}
	} else if (sub == 1) {
		tmp = a->recvbuf;
	} else if (!(tmp = scratch(h, 0, (size_t)sub * blk))) {
		return -ENOMEM;
	}
	if (vr != 0) {
		int lb = low_bit(vr, n);
		gate = xrecv(h, mod(vr - lb + root, n), (uint32_t)ilog2((unsigned)lb), tmp,
			     (size_t)sub * blk, false);
		if (gate < 0)
			return gate;
	}
	/* Children, largest subtree first, each forwarded as soon as its range arrived. */
	for (int mask = low_bit(vr, n) >> 1; mask >= 1; mask >>= 1) {
		if (vr + mask >= n)
			continue;
		if ((rc = xsend(h, mod(vr + mask + root, n), (uint32_t)ilog2((unsigned)mask),
				tmp + (size_t)mask * blk, (size_t)subtree(vr + mask, n) * blk, gate,
				(size_t)mask * blk)) < 0)
			return rc;
	}
	if ((rc = batch_run(h)) < 0)
		return rc;
	copy_block(a->recvbuf, tmp, blk);
	return 0;
}

static int gather_linear(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	int rc;

	if (h->me != a->root) {
		if ((rc = xsend(h, a->root, 0, a->sendbuf, blk, -1, 0)) < 0)
			return rc;
		return batch_run(h);
	}
	uint8_t *out = a->recvbuf;
	if (a->sendbuf != a->recvbuf)
		copy_block(out + (size_t)h->me * blk, a->sendbuf, blk);
	for (int i = 1; i < h->n; i++) {
		int r = mod(h->me + i, h->n);
		if ((rc = xrecv(h, r, 0, out + (size_t)r * blk, blk, false)) < 0)
			return rc;
	}
	return batch_run(h);
}

static int scatter_linear(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	int rc;

	if (h->me != a->root) {
		if ((rc = xrecv(h, a->root, 0, a->recvbuf, blk, false)) < 0)
			return rc;
		return batch_run(h);
	}
	const uint8_t *in = a->sendbuf;
	for (int i = 1; i < h->n; i++) {
		int r = mod(h->me + i, h->n);
		if ((rc = xsend(h, r, 0, in + (size_t)r * blk, blk, -1, 0)) < 0)
			return rc;
	}
	copy_block(a->recvbuf, in + (size_t)h->me * blk, blk);
	return batch_run(h);
}

/* ---------------------------------------------------------------- AllGather */

static int allgather_own(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;

	if (a->sendbuf != a->recvbuf)
		copy_block((uint8_t *)a->recvbuf + (size_t)h->me * blk, a->sendbuf, blk);
	return 0;
}

/* One pipelined batch: the block received from the left in step k is the one sent right in
 * step k+1, forwarded byte by byte as it arrives. */
static int allgather_ring(struct hc *h)
{
	size_t blk = h->a->count * h->elem;
	uint8_t *out = h->a->recvbuf;
	int n = h->n, me = h->me, right = mod(me + 1, n), left = mod(me - 1, n), prev = -1;

	allgather_own(h);
	for (int k = 0; k < n - 1; k++) {
		int sb = mod(me - k, n), rb = mod(me - k - 1, n), rc;
		if ((rc = xsend(h, right, (uint32_t)k, out + (size_t)sb * blk, blk, prev, 0)) < 0)
			return rc;
		if ((prev = xrecv(h, left, (uint32_t)k, out + (size_t)rb * blk, blk, false)) < 0)
			return prev;
	}
	return batch_run(h);
}

/* Recursive doubling; non-powers of two fold like AllReduce: new rank j owns the contiguous
 * blocks [start(j), start(j+1)) with start(j) = 2j below r, j + r above. */
static int allgather_recdbl(struct hc *h)
{
	size_t blk = h->a->count * h->elem;
	uint8_t *out = h->a->recvbuf;
	int n = h->n, me = h->me, rc, step = 1;
	struct fold f = fold_of(n, me);
#define FSTART(j) ((size_t)((j) < f.r ? 2 * (j) : (j) + f.r) * blk)

	allgather_own(h);
	if (me < 2 * f.r) {
		if (f.newrank < 0) {
			if ((rc = xsend(h, me + 1, 0, out + (size_t)me * blk, blk, -1, 0)) < 0 ||
			    (rc = xrecv(h, me + 1, HC_TAG_FINAL, out, (size_t)n * blk, false)) < 0)
				return rc;
			return batch_run(h);
		}
		if ((rc = xrecv(h, me - 1, 0, out + (size_t)(me - 1) * blk, blk, false)) < 0 ||
		    (rc = batch_run(h)) < 0)
			return rc;
	}
	for (int mask = 1; mask < f.p; mask <<= 1, step++) {
		int pnew = f.newrank ^ mask, peer = fold_rank(&f, pnew);
		int mlo = f.newrank / mask * mask, plo = pnew / mask * mask;

		if ((rc = xsend(h, peer, (uint32_t)step, out + FSTART(mlo),
				FSTART(mlo + mask) - FSTART(mlo), -1, 0)) < 0 ||
		    (rc = xrecv(h, peer, (uint32_t)step, out + FSTART(plo),
				FSTART(plo + mask) - FSTART(plo), false)) < 0 ||
		    (rc = batch_run(h)) < 0)
			return rc;
	}
#undef FSTART
	return fold_out(h, &f, out, (size_t)n * blk);
}

/* Bruck: ceil(log2 n) steps for any n; step k sends the first min(k, n-k) blocks we hold to
 * rank - k. Block i of tmp is rank me + i's; one rotation at the end. */
static int allgather_bruck(struct hc *h)
{
	size_t blk = h->a->count * h->elem;
	uint8_t *out = h->a->recvbuf, *tmp;
	int n = h->n, me = h->me, rc, step = 0;

	if (!(tmp = scratch(h, 0, (size_t)n * blk)))
		return -ENOMEM;
	memcpy(tmp, h->a->sendbuf == h->a->recvbuf ? out + (size_t)me * blk : h->a->sendbuf, blk);
	for (int k = 1; k < n; k <<= 1, step++) {
		size_t cnt = (size_t)(k < n - k ? k : n - k);
		if ((rc = xsend(h, mod(me - k, n), (uint32_t)step, tmp, cnt * blk, -1, 0)) < 0 ||
		    (rc = xrecv(h, mod(me + k, n), (uint32_t)step, tmp + (size_t)k * blk, cnt * blk,
				false)) < 0 ||
		    (rc = batch_run(h)) < 0)
			return rc;
	}
	memcpy(out + (size_t)me * blk, tmp, (size_t)(n - me) * blk);
	memcpy(out, tmp + (size_t)(n - me) * blk, (size_t)me * blk);
	return 0;
}

/* ---------------------------------------------------------------- ReduceScatter */

/* Ring: step k sends our partial of block me-k-1 right and reduces block me-k-2 from the left
 * into ours; the send of step k+1 is exactly what step k reduced, forwarded as it is reduced. */
static int reduce_scatter_ring(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	int n = h->n, me = h->me, prev = -1, rc;
	uint8_t *w;

	if (!(w = scratch(h, 0, (size_t)n * blk)))
		return -ENOMEM;
	memcpy(w, a->sendbuf, (size_t)n * blk);
	for (int k = 0; k < n - 1; k++) {
		int sb = mod(me - k - 1, n), rb = mod(me - k - 2, n);
		if ((rc = xsend(h, mod(me + 1, n), (uint32_t)k, w + (size_t)sb * blk, blk, prev, 0)) < 0)
			return rc;
		if ((prev = xrecv(h, mod(me - 1, n), (uint32_t)k, w + (size_t)rb * blk, blk, true)) < 0)
			return prev;
	}
	if ((rc = batch_run(h)) < 0)
		return rc;
	memcpy(a->recvbuf, w + (size_t)me * blk, blk);
	return 0;
}

/* Pairwise: step k sends block me+k to rank me+k and reduces rank me-k's copy of our block. */
static int reduce_scatter_pairwise(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	const uint8_t *in = a->sendbuf;
	int n = h->n, me = h->me, rc;

	copy_block(a->recvbuf, in + (size_t)me * blk, blk);
	for (int k = 1; k < n; k++) {
		int to = mod(me + k, n);
		if ((rc = xsend(h, to, (uint32_t)k, in + (size_t)to * blk, blk, -1, 0)) < 0 ||
		    (rc = xrecv(h, mod(me - k, n), (uint32_t)k, a->recvbuf, blk, true)) < 0 ||
		    (rc = batch_run(h)) < 0)
			return rc;
	}
	return 0;
}

/* ---------------------------------------------------------------- AllToAll */

static int alltoall_pairwise(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	const uint8_t *in = a->sendbuf;
	uint8_t *out = a->recvbuf;
	int n = h->n, me = h->me, rc;

	copy_block(out + (size_t)me * blk, in + (size_t)me * blk, blk);
	for (int k = 1; k < n; k++) {
		int to = mod(me + k, n), from = mod(me - k, n);
		if ((rc = xsend(h, to, (uint32_t)k, in + (size_t)to * blk, blk, -1, 0)) < 0 ||
		    (rc = xrecv(h, from, (uint32_t)k, out + (size_t)from * blk, blk, false)) < 0 ||
		    (rc = batch_run(h)) < 0)
			return rc;
	}
	return 0;
}

/* Bruck: rotate so block i goes to rank me + i; in the step for bit k every block whose index
 * has bit k moves k ranks on (packed into one message); unrotate at the end. log2 n messages
 * instead of n - 1, at the price of ~(n/2) log2 n blocks sent instead of n - 1. */
static int alltoall_bruck(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem, half = (size_t)(h->n / 2 + 1) * blk;
	const uint8_t *in = a->sendbuf;
	uint8_t *out = a->recvbuf, *tmp, *sp, *rp;
	int n = h->n, me = h->me, rc, step = 0;

	if (!(tmp = scratch(h, 0, (size_t)n * blk)) || !(sp = scratch(h, 1, half)) ||
	    !(rp = scratch(h, 2, half)))
		return -ENOMEM;
	memcpy(tmp, in + (size_t)me * blk, (size_t)(n - me) * blk);
	memcpy(tmp + (size_t)(n - me) * blk, in, (size_t)me * blk);
	for (int k = 1; k < n; k <<= 1, step++) {
		size_t cnt = 0;
		for (int i = 0; i < n; i++)
			if (i & k)
				memcpy(sp + cnt++ * blk, tmp + (size_t)i * blk, blk);
		if ((rc = xsend(h, mod(me + k, n), (uint32_t)step, sp, cnt * blk, -1, 0)) < 0 ||
		    (rc = xrecv(h, mod(me - k, n), (uint32_t)step, rp, cnt * blk, false)) < 0 ||
		    (rc = batch_run(h)) < 0)
			return rc;
		cnt = 0;
		for (int i = 0; i < n; i++)
			if (i & k)
				memcpy(tmp + (size_t)i * blk, rp + cnt++ * blk, blk);
	}
	/* At rank me, tmp[i] came from rank me - i. */
	for (int i = 0; i < n; i++)
		memcpy(out + (size_t)mod(me - i, n) * blk, tmp + (size_t)i * blk, blk);
	return 0;
}

/* ---------------------------------------------------------------- Barrier */

/* Dissemination: in round k everyone signals rank + 2^k and waits for rank - 2^k; after
 * ceil(log2 n) rounds every rank has heard, transitively, from all. */
static int barrier_dissemination(struct hc *h)
{
	int n = h->n, me = h->me, rc, step = 0;

	for (int k = 1; k < n; k <<= 1, step++) {
		if ((rc = xsend(h, mod(me + k, n), (uint32_t)step, NULL, 0, -1, 0)) < 0 ||
		    (rc = xrecv(h, mod(me - k, n), (uint32_t)step, NULL, 0, false)) < 0 ||
		    (rc = batch_run(h)) < 0)
			return rc;
	}
	return 0;
}

/* Fan-in to rank 0 over the binomial tree, then fan-out. */
static int barrier_binomial(struct hc *h)
{
	int n = h->n, vr = h->me, lb = low_bit(vr, n), rc;

	for (int mask = 1; mask < lb && vr + mask < n; mask <<= 1)
		if ((rc = xrecv(h, vr + mask, (uint32_t)ilog2((unsigned)mask), NULL, 0, false)) < 0)
			return rc;
	if ((rc = batch_run(h)) < 0)
		return rc;
	if (vr != 0) {
		uint32_t t = (uint32_t)ilog2((unsigned)lb);
		if ((rc = xsend(h, vr - lb, t, NULL, 0, -1, 0)) < 0 ||
		    (rc = xrecv(h, vr - lb, 0x100 | t, NULL, 0, false)) < 0 ||
		    (rc = batch_run(h)) < 0)
			return rc;
	}
	for (int mask = lb >> 1; mask >= 1; mask >>= 1)
		if (vr + mask < n &&
		    (rc = xsend(h, vr + mask, 0x100 | (uint32_t)ilog2((unsigned)mask), NULL, 0, -1, 0)) < 0)
			return rc;
	return batch_run(h);
}

/* ---------------------------------------------------------------- entry points */

int client_host_algo_valid(enum inca_coll coll, enum inca_algo algo)
{
	switch (coll) {
	case INCA_COLL_ALLREDUCE:
		return algo == INCA_ALGO_RING || algo == INCA_ALGO_RECDBL ||
		       algo == INCA_ALGO_RABENSEIFNER;
	case INCA_COLL_REDUCE:
		return algo == INCA_ALGO_BINOMIAL;
	case INCA_COLL_BCAST:
		return algo == INCA_ALGO_BINOMIAL || algo == INCA_ALGO_RING;
	case INCA_COLL_ALLGATHER:
		return algo == INCA_ALGO_RING || algo == INCA_ALGO_RECDBL || algo == INCA_ALGO_BRUCK;
	case INCA_COLL_REDUCE_SCATTER:
		return algo == INCA_ALGO_RING || algo == INCA_ALGO_PAIRWISE;
	case INCA_COLL_ALLTOALL:
		return algo == INCA_ALGO_PAIRWISE || algo == INCA_ALGO_BRUCK;
	case INCA_COLL_GATHER:
	case INCA_COLL_SCATTER:
		return algo == INCA_ALGO_BINOMIAL || algo == INCA_ALGO_LINEAR;
	case INCA_COLL_BARRIER:
		return algo == INCA_ALGO_RING || algo == INCA_ALGO_RECDBL ||
		       algo == INCA_ALGO_BINOMIAL;
	default:
		return 0;
	}
}

/* Thresholds in bytes (docs/collectives.md has the cost models and the loopback figures behind
 * each). "bytes" is the per-rank count x element size (the block size for block collectives),
 * so every rank computes the same answer. */
#define HC_ALLREDUCE_RECDBL_MAX (64u << 10)    /* up to here latency (log2 n rounds) wins */
#define HC_ALLREDUCE_RABEN_MAX (512u << 10)    /* n >= 16: Rabenseifner up to here, then ring */
#define HC_ALLREDUCE_RABEN_MIN_RANKS 16        /* below, the pipelined ring is as fast */
#define HC_BCAST_CHAIN_MIN (64u << 10)         /* from here the pipelined chain */
#define HC_ALLGATHER_SMALL_TOTAL (64u << 10)   /* n x block up to here: log2 n rounds */
#define HC_REDUCE_SCATTER_RING_TOTAL (16u << 10)
#define HC_ALLTOALL_BRUCK_TOTAL (8u << 10)     /* n x block, and n >= 5 */
#define HC_TREE_TOTAL (8u << 10)               /* Gather/Scatter: binomial for n >= 8 */

enum inca_algo client_host_choose(const struct inca_comm *c, enum inca_coll coll, size_t bytes)
{
	size_t n = (size_t)c->cfg.size, total = bytes > SIZE_MAX / n ? SIZE_MAX : bytes * n;
	bool pow2 = (n & (n - 1)) == 0;

	switch (coll) {
	case INCA_COLL_ALLREDUCE:
		if (bytes <= HC_ALLREDUCE_RECDBL_MAX)
			return INCA_ALGO_RECDBL;
		if (n >= HC_ALLREDUCE_RABEN_MIN_RANKS && bytes <= HC_ALLREDUCE_RABEN_MAX)
			return INCA_ALGO_RABENSEIFNER;
		return INCA_ALGO_RING;
	case INCA_COLL_REDUCE:
		return INCA_ALGO_BINOMIAL;
	case INCA_COLL_BCAST:
		return bytes >= HC_BCAST_CHAIN_MIN && n > 2 ? INCA_ALGO_RING : INCA_ALGO_BINOMIAL;
	case INCA_COLL_ALLGATHER:
		if (total <= HC_ALLGATHER_SMALL_TOTAL)
			return pow2 ? INCA_ALGO_RECDBL : INCA_ALGO_BRUCK;
		return INCA_ALGO_RING;
	case INCA_COLL_REDUCE_SCATTER:
		return total <= HC_REDUCE_SCATTER_RING_TOTAL ? INCA_ALGO_RING : INCA_ALGO_PAIRWISE;
	case INCA_COLL_ALLTOALL:
		return n >= 5 && total <= HC_ALLTOALL_BRUCK_TOTAL ? INCA_ALGO_BRUCK : INCA_ALGO_PAIRWISE;
	case INCA_COLL_GATHER:
	case INCA_COLL_SCATTER:
		return n >= 8 && total <= HC_TREE_TOTAL ? INCA_ALGO_BINOMIAL : INCA_ALGO_LINEAR;
	case INCA_COLL_BARRIER:
		return INCA_ALGO_RECDBL;
	default:
		return INCA_ALGO_RING;
	}
}

static int run_algo(struct hc *h)
{
	enum inca_coll coll = h->a->coll;
	enum inca_algo algo = h->algo;

	switch (coll) {
	case INCA_COLL_ALLREDUCE:
		return algo == INCA_ALGO_RECDBL ? allreduce_recdbl(h) : allreduce_rabenseifner(h);
	case INCA_COLL_REDUCE:
		return reduce_binomial(h);
	case INCA_COLL_BCAST:
		return algo == INCA_ALGO_RING ? bcast_chain(h) : bcast_binomial(h);
	case INCA_COLL_ALLGATHER:
		return algo == INCA_ALGO_RING	  ? allgather_ring(h)
		       : algo == INCA_ALGO_RECDBL ? allgather_recdbl(h)
						  : allgather_bruck(h);
	case INCA_COLL_REDUCE_SCATTER:
		return algo == INCA_ALGO_RING ? reduce_scatter_ring(h) : reduce_scatter_pairwise(h);
	case INCA_COLL_ALLTOALL:
		return algo == INCA_ALGO_BRUCK ? alltoall_bruck(h) : alltoall_pairwise(h);
	case INCA_COLL_GATHER:
		return algo == INCA_ALGO_LINEAR ? gather_linear(h) : gather_binomial(h);
	case INCA_COLL_SCATTER:
		return algo == INCA_ALGO_LINEAR ? scatter_linear(h) : scatter_binomial(h);
	case INCA_COLL_BARRIER:
		return algo == INCA_ALGO_RECDBL ? barrier_dissemination(h) : barrier_binomial(h);
	default:
		return -EINVAL;
	}
}

/* What a single rank does: copy its own contribution to where the result goes. */
static int run_single(const struct inca_coll_args *a)
{
	size_t b = a->count * inca_dtype_size(a->dt);

	switch (a->coll) {
	case INCA_COLL_BCAST:
	case INCA_COLL_BARRIER:
		return 0;
	default:
		if (a->recvbuf && a->sendbuf)
			copy_block(a->recvbuf, a->sendbuf, b);
		return 0;
	}
}

int client_host_coll(struct inca_comm *c, const struct inca_coll_args *a, enum inca_algo algo)
{
	struct hc h = { .c = c, .a = a, .algo = algo, .n = c->cfg.size, .me = c->cfg.rank };
	int rc;

	if (!client_host_algo_valid(a->coll, algo))
		return -ENOTSUP;
	/* The ring algorithms that ring.c already has run on the ring sockets. */
	if (a->coll == INCA_COLL_ALLREDUCE && algo == INCA_ALGO_RING)
		return client_ring_allreduce(c, a->sendbuf, a->recvbuf, a->count, a->dt, a->op);
	if (a->coll == INCA_COLL_BARRIER && algo == INCA_ALGO_RING)
		return client_ring_barrier(c);
	if (h.n == 1)
		return run_single(a);
	if (c->host_broken || !c->host_fd)
		return -EIO;
	h.elem = a->coll == INCA_COLL_BARRIER ? 1 : inca_dtype_size(a->dt);
	if (!c->host_stage && !(c->host_stage = malloc(HC_STAGE_BYTES)))
		return -ENOMEM;
	h.tail_send = malloc(sizeof(int) * 2 * (size_t)h.n);
	if (!h.tail_send)
		return -ENOMEM;
	h.tail_recv = h.tail_send + h.n;
	for (int i = 0; i < 2 * h.n; i++)
		h.tail_send[i] = -1;
	rc = run_algo(&h);
	free(h.ops);
	free(h.tail_send);
	if (rc < 0) {
		/* The streams are out of step for good. Shut them so peers blocked on us fail
		 * now instead of at their timeout. */
		c->host_broken = true;
		for (int i = 0; i < h.n; i++)
			if (c->host_fd[i] >= 0)
				shutdown(c->host_fd[i], SHUT_RDWR);
		client_log(&c->cfg, 0, "host %s/%s: %s; host mesh disabled", inca_coll_name(a->coll),
			   inca_algo_name(algo), inca_strerror(rc));
		if (rc != -EPROTO && rc != -ETIMEDOUT && rc != -ENOMEM)
			rc = -EIO;
	}
	return rc;
}

void client_host_close(struct inca_comm *c)
{
	if (c->host_fd) {
		for (int i = 0; i < c->cfg.size; i++)
			if (c->host_fd[i] >= 0)
				close(c->host_fd[i]);
		free(c->host_fd);
		c->host_fd = NULL;
	}
	free(c->host_stage);
	c->host_stage = NULL;
	for (int i = 0; i < 3; i++) {
		free(c->host_scratch[i]);
		c->host_scratch[i] = NULL;
		c->host_scratch_cap[i] = 0;
	}
}
