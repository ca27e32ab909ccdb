/* libinca host algorithms for the nine collectives (docs/collectives.md) over the TCP mesh
 * bootstrap.c builds: the poll-driven transfer engine (many concurrent framed sends and
 * receives, reduce-on-receive, sends gated on receives for pipelining), the choice of algorithm
 * per collective and size, and client_host_coll. The algorithms themselves are in
 * host_coll_reduce.c, host_coll_rooted.c and host_coll_exchange.c; public dispatch, argument
 * checks and the INC paths in coll.c. */
#include "client/host_coll_int.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agg/agg.h"

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
int hc_xsend(struct hc *h, int peer, uint32_t tag, const void *buf, size_t len, int gate,
		 size_t gate_off)
{
	int i = add_op(h, peer, true, tag, buf, len);

	if (i >= 0) {
		h->ops[i].gate = gate;
		h->ops[i].gate_off = gate_off;
	}
	return i;
}

int hc_xrecv(struct hc *h, int peer, uint32_t tag, void *buf, size_t len, bool reduce)
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
int hc_batch_run(struct hc *h)
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
		if ((rc = client_host_wait(c, pf, (nfds_t)np, idle_deadline, idle_ns)) < 0)
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
void *hc_scratch(struct hc *h, int slot, size_t bytes)
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
		return algo == INCA_ALGO_RECDBL ? hc_allreduce_recdbl(h) : hc_allreduce_rabenseifner(h);
	case INCA_COLL_REDUCE:
		return hc_reduce_binomial(h);
	case INCA_COLL_BCAST:
		return algo == INCA_ALGO_RING ? hc_bcast_chain(h) : hc_bcast_binomial(h);
	case INCA_COLL_ALLGATHER:
		return algo == INCA_ALGO_RING	  ? hc_allgather_ring(h)
		       : algo == INCA_ALGO_RECDBL ? hc_allgather_recdbl(h)
						  : hc_allgather_bruck(h);
	case INCA_COLL_REDUCE_SCATTER:
		return algo == INCA_ALGO_RING ? hc_reduce_scatter_ring(h) : hc_reduce_scatter_pairwise(h);
	case INCA_COLL_ALLTOALL:
		return algo == INCA_ALGO_BRUCK ? hc_alltoall_bruck(h) : hc_alltoall_pairwise(h);
	case INCA_COLL_GATHER:
		return algo == INCA_ALGO_LINEAR ? hc_gather_linear(h) : hc_gather_binomial(h);
	case INCA_COLL_SCATTER:
		return algo == INCA_ALGO_LINEAR ? hc_scatter_linear(h) : hc_scatter_binomial(h);
	case INCA_COLL_BARRIER:
		return algo == INCA_ALGO_RECDBL ? hc_barrier_dissemination(h) : hc_barrier_binomial(h);
	default:
		return -EINVAL;
	}
}

int client_coll_single(const struct inca_coll_args *a)
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
		return client_coll_single(a);
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
