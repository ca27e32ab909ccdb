/* libinca host path: ring AllReduce (reduce-scatter then allgather, n-1 steps each) and the
 * barrier, over the TCP ring that bootstrap.c built. Fully pipelined: bytes received in step k
 * are forwarded in step k+1 as soon as they are reduced, with nonblocking sockets and poll. */
#include "client/client.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "agg/agg.h"

#define RING_HDR_MAGIC 0x494e4341u /* "INCA" */
#define RING_HDR_LEN 32
#define RING_KIND_ALLREDUCE 1
#define RING_KIND_BARRIER 2

/* One ring collective. The send stream is: our header, then 2(n-1) segments; the receive
 * stream mirrors it from the left neighbour. Step k >= 1 sends exactly the region received in
 * step k-1 (reduce-scatter forwards partial sums, allgather forwards final segments). */
struct ring_job {
	uint8_t *buf; /* recvbuf, already holding our input */
	size_t count, elem;
	enum inca_dtype dt;
	enum inca_op op;
	int n, rank;
	uint8_t hdr_out[RING_HDR_LEN], hdr_in[RING_HDR_LEN];
};

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static void seg_range(const struct ring_job *j, long seg, size_t *off, size_t *len)
{
	size_t i = (size_t)(((seg % j->n) + j->n) % j->n), q = j->count / (size_t)j->n,
	       r = j->count % (size_t)j->n;

	*off = j->elem * (i * q + (i < r ? i : r));
	*len = j->elem * (q + (i < r ? 1 : 0));
}

static void step_send(const struct ring_job *j, size_t k, const uint8_t **p, size_t *len)
{
	size_t off;
	long seg;

	if (k == 0) {
		*p = j->hdr_out;
		*len = RING_HDR_LEN;
		return;
	}
	k--;
	if (k < (size_t)j->n - 1)
		seg = (long)j->rank - (long)k; /* reduce-scatter */
	else
		seg = (long)j->rank + 1 - (long)(k - ((size_t)j->n - 1)); /* allgather */
	seg_range(j, seg, &off, len);
	*p = j->buf + off;
}

static void step_recv(struct ring_job *j, size_t k, uint8_t **p, size_t *len, bool *reduce)
{
	size_t off;
	long seg;

	if (k == 0) {
		*p = j->hdr_in;
		*len = RING_HDR_LEN;
		*reduce = false;
		return;
	}
	k--;
	if (k < (size_t)j->n - 1) {
		seg = (long)j->rank - (long)k - 1;
		*reduce = true;
	} else {
		seg = (long)j->rank - (long)(k - ((size_t)j->n - 1));
		*reduce = false;
	}
	seg_range(j, seg, &off, len);
	*p = j->buf + off;
}

static int ring_run(struct inca_comm *c, struct ring_job *j)
{
	const size_t nsteps = 1 + 2 * ((size_t)j->n - 1);
	const uint64_t idle_ns = (uint64_t)c->cfg.timeout_ms * 1000000ull;
	uint64_t idle_deadline = util_now_ns() + idle_ns;
	size_t ss = 0, soff = 0;             /* send step, bytes sent in it */
	size_t rs = 0, roff = 0, rproc = 0;  /* recv step, bytes received / final in it */
	size_t fill = 0;                     /* received but not yet reduced bytes in ring_tmp */
	uint8_t *tmp = c->ring_tmp;

	while (ss < nsteps || rs < nsteps) {
		bool progress = false, send_wait = false;

		while (ss < nsteps) {
			const uint8_t *p;
			size_t len, avail;
			ssize_t n;

			step_send(j, ss, &p, &len);
			if (soff == len) {
				ss++;
				soff = 0;
				continue;
			}
			/* Forward only what the previous receive step has finalised. */
			avail = len;
			if (ss >= 2 && rs < ss)
				avail = rs == ss - 1 ? rproc : 0;
			if (soff >= avail)
				break;
			n = send(c->ring_send_fd, p + soff, avail - soff, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0) {
				soff += (size_t)n;
				progress = true;
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				send_wait = true;
				break;
			}
			if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
				client_peer_note_lost(c, "ring send failed");
			return n < 0 ? -errno : -EIO;
		}

		while (rs < nsteps) {
			uint8_t *p, *dst;
			size_t len, want;
			bool reduce;
			ssize_t n;

			step_recv(j, rs, &p, &len, &reduce);
			if (roff == len) {
				if (rs == 0 && memcmp(j->hdr_in, j->hdr_out, RING_HDR_LEN) != 0) {
					client_log(&c->cfg, 0, "ring: left neighbour runs another collective");
					return -EPROTO;
				}
				rs++;
				roff = rproc = fill = 0;
				continue;
			}
			if (reduce) {
				want = CLIENT_RING_TMP_BYTES - fill;
				if (want > len - roff)
					want = len - roff;
				dst = tmp + fill;
			} else {
				want = len - roff;
				dst = p + roff;
			}
			n = recv(c->ring_recv_fd, dst, want, MSG_DONTWAIT);
			if (n > 0) {
				roff += (size_t)n;
				if (reduce) {
					size_t whole;
					int rc;

					fill += (size_t)n;
					whole = fill / j->elem * j->elem;
					if (whole) {
						rc = agg_reduce(p + rproc, tmp, whole / j->elem, j->dt, j->op);
						if (rc < 0)
							return rc;
						rproc += whole;
						memmove(tmp, tmp + whole, fill - whole);
						fill -= whole;
					}
				} else {
					rproc = roff;
				}
				progress = true;
				continue;
			}
			if (n == 0) {
				client_peer_note_lost(c, "ring connection closed");
				return -ECONNRESET;
			}
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return -errno;
		}

		if (progress) {
			idle_deadline = util_now_ns() + idle_ns;
			continue;
		}
		if (ss >= nsteps && rs >= nsteps)
			break;

		struct pollfd pf[2];
		nfds_t np = 0;
		if (send_wait)
			pf[np++] = (struct pollfd){ .fd = c->ring_send_fd, .events = POLLOUT };
		if (rs < nsteps)
			pf[np++] = (struct pollfd){ .fd = c->ring_recv_fd, .events = POLLIN };
		if (np == 0)
			return -EIO; /* cannot happen: sending waits only on receiving */
		int rc = client_host_wait(c, pf, np, idle_deadline, idle_ns);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int ring_collective(struct inca_comm *c, struct ring_job *j, int kind)
{
	uint8_t *h = j->hdr_out;
	int rc;

	if (c->ring_broken)
		return -EIO;
	j->n = c->cfg.size;
	j->rank = c->cfg.rank;
	/* The header makes a disagreement between ranks (count, type, op, or call order)
	 * an -EPROTO instead of a silently wrong result. */
	memset(h, 0, RING_HDR_LEN);
	put_be(h, RING_HDR_MAGIC, 4);
	put_be(h + 4, (uint64_t)kind, 4);
	put_be(h + 8, c->coll_seq, 8);
	put_be(h + 16, j->count, 8);
	h[24] = (uint8_t)j->dt;
	h[25] = (uint8_t)j->op;
	rc = ring_run(c, j);
	if (rc < 0) {
		/* Our byte streams are now out of step with the neighbours for good. */
		c->ring_broken = true;
		client_log(&c->cfg, 0, "ring: %s; host path disabled", inca_strerror(rc));
	}
	return rc;
}

int client_ring_allreduce(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
			  enum inca_dtype dt, enum inca_op op)
{
	struct ring_job j = { .buf = recvbuf, .count = count, .elem = inca_dtype_size(dt), .dt = dt, .op = op };

	if (c->cfg.size > 1 && c->ring_broken)
		return -EIO;
	if (sendbuf != recvbuf)
		memcpy(recvbuf, sendbuf, count * j.elem);
	if (c->cfg.size == 1)
		return 0;
	return ring_collective(c, &j, RING_KIND_ALLREDUCE);
}

/* An AllReduce of one byte per rank: nobody can finish before every rank's contribution
 * reached it, which is exactly the barrier property. */
int client_ring_barrier(struct inca_comm *c)
{
	struct ring_job j = { .elem = 1, .dt = INCA_UINT8, .op = INCA_BOR };
	int rc;

	if (c->cfg.size == 1)
		return 0;
	j.count = (size_t)c->cfg.size;
	j.buf = calloc(1, j.count);
	if (!j.buf)
		return -ENOMEM;
	rc = ring_collective(c, &j, RING_KIND_BARRIER);
	free(j.buf);
	return rc;
}
