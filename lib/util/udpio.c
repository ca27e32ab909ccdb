/* lib/util UDP batch I/O: GSO send queue and GRO-aware receive batch (udpio.h). The queue keeps
 * datagrams in arrival order in one slab (a datagram queued by reference has a hole there where
 * its data goes); a GSO send is a chain of them, gathered into one message's iovec list at flush
 * time: one iovec per datagram, three for one with a hole. */
#include "util/udpio.h"

#include <errno.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif

/* Most iovecs one datagram takes: the part before its referenced data, the data, the rest. */
#define TX_IOV_PER_PKT 3

/* How far back util_udptx_add looks for an open send to the same destination: about the number
 * of destinations a switch serves in one batch. */
#define TX_SCAN_GROUPS 128

void util_udp_offloads(int fd, bool want_gso, bool want_gro, bool *gso, bool *gro)
{
	int one = 1, zero = 0;

	/* UDP_SEGMENT 0 on the socket means "per send only": accepted exactly where GSO is. */
	*gso = want_gso && setsockopt(fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof zero) == 0;
	*gro = want_gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
}

/* ---------------------------------------------------------------- send queue */

#define CTL_BYTES (CMSG_SPACE(sizeof(uint16_t)) + CMSG_SPACE(sizeof(struct in_pktinfo)))

struct tx_group {
	struct sockaddr_in to;
	uint32_t src_ip_be, tag;
	size_t seglen, bytes;
	unsigned count;
	unsigned first, last; /* datagram indices (chain through next[]) */
	bool open;
};

/* A datagram's bytes [off, off + len) taken from data instead of the slab (data NULL: none). */
struct tx_ref {
	const uint8_t *data;
	size_t off, len;
};

struct util_udptx {
	struct util_udptx_opts o;
	uint8_t *slab;     /* max_pkts * pkt_cap */
	size_t *len;       /* per datagram */
	unsigned *next;    /* per datagram: next of its group, UINT32_MAX at the end */
	struct tx_ref *ref; /* per datagram */
	unsigned npkts;
	struct tx_group *grp; /* in creation order = send order */
	unsigned ngrp, gsent; /* groups [gsent, ngrp) are still to send */
	struct mmsghdr *msg;
	struct iovec *iov; /* max_pkts * TX_IOV_PER_PKT */
	union ctl {
		char buf[CTL_BYTES];
		struct cmsghdr align;
	} *ctl;
	struct util_udptx_stats st;
	/* how to take back the last add */
	unsigned undo_grp, undo_prev_last;
	bool undo_new, undo_prev_open, undo_ok;
};

int util_udptx_create(const struct util_udptx_opts *o, struct util_udptx **out)
{
	struct util_udptx *q;

	if (!o || !out || !o->max_pkts || !o->pkt_cap || o->max_pkts > UINT32_MAX / 2)
		return -EINVAL;
	q = calloc(1, sizeof *q);
	if (!q)
		return -ENOMEM;
	q->o = *o;
	q->slab = malloc(o->max_pkts * o->pkt_cap);
	q->len = calloc(o->max_pkts, sizeof *q->len);
	q->next = calloc(o->max_pkts, sizeof *q->next);
	q->ref = calloc(o->max_pkts, sizeof *q->ref);
	q->grp = calloc(o->max_pkts, sizeof *q->grp);
	q->msg = calloc(o->max_pkts, sizeof *q->msg);
	q->iov = calloc(o->max_pkts * TX_IOV_PER_PKT, sizeof *q->iov);
	q->ctl = calloc(o->max_pkts, sizeof *q->ctl);
	if (!q->slab || !q->len || !q->next || !q->ref || !q->grp || !q->msg || !q->iov ||
	    !q->ctl) {
		util_udptx_destroy(q);
		return -ENOMEM;
	}
	*out = q;
	return 0;
}

void util_udptx_destroy(struct util_udptx *q)
{
	if (!q)
		return;
	free(q->slab);
	free(q->len);
	free(q->next);
	free(q->ref);
	free(q->grp);
	free(q->msg);
	free(q->iov);
	free(q->ctl);
	free(q);
}

static bool same_dest(const struct tx_group *g, const struct sockaddr_in *to, uint32_t src)
{
	return g->to.sin_addr.s_addr == to->sin_addr.s_addr && g->to.sin_port == to->sin_port &&
	       g->src_ip_be == src;
}

uint8_t *util_udptx_add(struct util_udptx *q, const struct sockaddr_in *to, uint32_t src_ip_be,
			uint32_t tag, size_t len, uint16_t *ip_id)
{
	struct tx_group *g = NULL;
	unsigned k;

	if (q->npkts >= q->o.max_pkts || !len || len > q->o.pkt_cap)
		return NULL;
	if (!q->o.pktinfo)
		src_ip_be = 0;
	if (q->o.gso) {
		unsigned stop = q->ngrp > q->gsent + TX_SCAN_GROUPS ? q->ngrp - TX_SCAN_GROUPS : q->gsent;
		for (unsigned i = q->ngrp; i-- > stop;) {
			struct tx_group *c = &q->grp[i];
			if (!same_dest(c, to, src_ip_be))
				continue;
			/* The latest send to this destination decides: joining an older one would
			 * reorder this destination's datagrams. */
			if (c->open && c->tag == tag && len <= c->seglen && c->count < UTIL_GSO_MAX_SEGS &&
			    c->bytes + len <= UTIL_UDP_MAX_PAYLOAD)
				g = c;
			break;
		}
	}
	k = q->npkts++;
	q->len[k] = len;
	q->next[k] = UINT32_MAX;
	q->ref[k].data = NULL;
	q->undo_ok = true;
	q->undo_new = !g;
	if (g) {
		q->undo_grp = (unsigned)(g - q->grp);
		q->undo_prev_last = g->last;
		q->undo_prev_open = g->open;
		q->next[g->last] = k;
		g->last = k;
		*ip_id = (uint16_t)g->count++;
		g->bytes += len;
		if (len < g->seglen)
			g->open = false; /* only the last segment may be shorter */
	} else {
		g = &q->grp[q->ngrp++];
		*g = (struct tx_group){ .to = *to, .src_ip_be = src_ip_be, .tag = tag, .seglen = len,
					.bytes = len, .count = 1, .first = k, .last = k, .open = true };
		*ip_id = 0;
	}
	return q->slab + (size_t)k * q->o.pkt_cap;
}

uint8_t *util_udptx_add_ref(struct util_udptx *q, const struct sockaddr_in *to,
			    uint32_t src_ip_be, uint32_t tag, size_t len, size_t off,
			    const void *data, size_t data_len, uint16_t *ip_id)
{
	if (off > len || data_len > len - off || (data_len && !data))
		return NULL;
	uint8_t *p = util_udptx_add(q, to, src_ip_be, tag, len, ip_id);
	if (p && data_len)
		q->ref[q->npkts - 1] = (struct tx_ref){ .data = data, .off = off, .len = data_len };
	return p;
}

void util_udptx_cancel_last(struct util_udptx *q)
{
	if (!q->undo_ok || !q->npkts)
		return;
	q->undo_ok = false;
	size_t len = q->len[--q->npkts];
	if (q->undo_new) {
		q->ngrp--;
		return;
	}
	struct tx_group *g = &q->grp[q->undo_grp];
	g->count--;
	g->bytes -= len;
	g->last = q->undo_prev_last;
	g->open = q->undo_prev_open;
	q->next[g->last] = UINT32_MAX;
}

size_t util_udptx_queued(const struct util_udptx *q)
{
	return q->npkts;
}

const struct util_udptx_stats *util_udptx_stats(const struct util_udptx *q)
{
	return &q->st;
}

bool util_udptx_gso(const struct util_udptx *q)
{
	return q->o.gso;
}

static void put_iov(struct iovec *iov, size_t *n, const uint8_t *p, size_t len)
{
	if (len) {
		iov[*n].iov_base = (void *)p;
		iov[*n].iov_len = len;
		(*n)++;
	}
}

/* Message i for group g: its datagrams as an iovec list from iov, its control data. Returns
 * the number of iovecs used (at most TX_IOV_PER_PKT per datagram). */
static size_t build_msg(struct util_udptx *q, unsigned i, struct tx_group *g, struct iovec *iov,
			bool gso)
{
	struct msghdr *m = &q->msg[i].msg_hdr;
	size_t n = 0, ctl = 0;

	for (unsigned k = g->first; k != UINT32_MAX; k = q->next[k]) {
		const uint8_t *p = q->slab + (size_t)k * q->o.pkt_cap;
		const struct tx_ref *r = &q->ref[k];
		if (!r->data) {
			put_iov(iov, &n, p, q->len[k]);
			continue;
		}
		put_iov(iov, &n, p, r->off);
		put_iov(iov, &n, r->data, r->len);
		put_iov(iov, &n, p + r->off + r->len, q->len[k] - r->off - r->len);
	}
	memset(m, 0, sizeof *m);
	m->msg_name = &g->to;
	m->msg_namelen = sizeof g->to;
	m->msg_iov = iov;
	m->msg_iovlen = n;
	if (gso && g->count > 1) {
		struct cmsghdr *c = (struct cmsghdr *)(void *)q->ctl[i].buf;
		uint16_t seg = (uint16_t)g->seglen;
		c->cmsg_level = SOL_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof seg);
		memcpy(CMSG_DATA(c), &seg, sizeof seg);
		ctl += CMSG_SPACE(sizeof seg);
	}
	if (q->o.pktinfo) {
		struct cmsghdr *c = (struct cmsghdr *)(void *)(q->ctl[i].buf + ctl);
		struct in_pktinfo pi = { 0 };
		pi.ipi_spec_dst.s_addr = g->src_ip_be;
		c->cmsg_level = IPPROTO_IP;
		c->cmsg_type = IP_PKTINFO;
		c->cmsg_len = CMSG_LEN(sizeof pi);
		memcpy(CMSG_DATA(c), &pi, sizeof pi);
		ctl += CMSG_SPACE(sizeof pi);
	}
	if (ctl) {
		m->msg_control = q->ctl[i].buf;
		m->msg_controllen = ctl;
	}
	return n;
}

static void reset(struct util_udptx *q)
{
	q->npkts = q->ngrp = q->gsent = 0;
	q->undo_ok = false;
}

void util_udptx_clear(struct util_udptx *q)
{
	reset(q);
}

/* Split group gi (GSO is off now) into single datagrams, each but the first restamped for ID
 * 0, placed where the group was (the queue's later groups keep their order). */
static int split_group(struct util_udptx *q, unsigned gi)
{
	struct tx_group g = q->grp[gi];
	unsigned extra = g.count - 1;

	if (q->ngrp + extra > q->o.max_pkts)
		return -ENOBUFS; /* cannot happen: groups <= datagrams */
	memmove(&q->grp[gi + g.count], &q->grp[gi + 1], (q->ngrp - gi - 1) * sizeof *q->grp);
	q->ngrp += extra;
	unsigned k = g.first;
	for (unsigned j = 0; j < g.count; j++) {
		unsigned nk = q->next[k];
		struct tx_group *s = &q->grp[gi + j];
		*s = g;
		s->first = s->last = k;
		s->count = 1;
		s->seglen = s->bytes = q->len[k];
		s->open = false;
		q->next[k] = UINT32_MAX;
		if (j && q->o.reid) {
			uint8_t *p = q->slab + (size_t)k * q->o.pkt_cap;
			struct tx_ref *r = &q->ref[k];
			/* reid sees the whole datagram: copy referenced data into its hole. */
			if (r->data) {
				memcpy(p + r->off, r->data, r->len);
				r->data = NULL;
			}
			q->o.reid(q->o.reid_arg, p, q->len[k], &g.to, g.src_ip_be);
		}
		k = nk;
	}
	return 0;
}

int util_udptx_flush(struct util_udptx *q, int fd, int flags)
{
	int ret = 0;

	while (q->gsent < q->ngrp) {
		unsigned nmsg;
		size_t niov = 0;
		bool gso = q->o.gso;

		/* Without GSO a group of several datagrams would leave as one datagram holding
		 * them all: split every group still queued from before GSO was turned off. */
		for (unsigned i = q->gsent; !gso && i < q->ngrp; i++)
			if (q->grp[i].count > 1 && split_group(q, i) < 0)
				return -ENOBUFS;
		nmsg = q->ngrp - q->gsent;

		for (unsigned i = 0; i < nmsg; i++) {
			struct tx_group *g = &q->grp[q->gsent + i];
			niov += build_msg(q, i, g, q->iov + niov, gso);
		}
		int r = sendmmsg(fd, q->msg, nmsg, flags);
		q->st.syscalls++;
		if (r > 0) {
			for (int i = 0; i < r; i++) {
				struct tx_group *g = &q->grp[q->gsent + (unsigned)i];
				q->st.msgs++;
				q->st.pkts += g->count;
				q->st.bytes += g->bytes;
				q->st.gso_sends += g->count > 1;
			}
			q->gsent += (unsigned)r;
			continue;
		}
		int e = errno;
		struct tx_group *g = &q->grp[q->gsent];
		if (e == EINTR)
			continue;
		if (e == EAGAIN || e == EWOULDBLOCK)
			return -EAGAIN;
		/* GSO refused for this send (no checksum offload on the route's device, or a
		 * kernel without it): the same datagrams go out one by one from now on. */
		if (gso && g->count > 1 && (e == EIO || e == EINVAL || e == ENOPROTOOPT ||
					    e == EOPNOTSUPP)) {
			q->o.gso = false;
			q->st.gso_failed++;
			continue; /* the next pass splits this group and every later one */
		}
		if (e == EMSGSIZE)
			ret = -EMSGSIZE;
		/* The first message failed (unreachable, filtered, too big): its datagrams are
		 * lost; the protocol's timers resend them. */
		q->st.errors += g->count;
		q->gsent++;
	}
	reset(q);
	return ret;
}

/* ---------------------------------------------------------------- receive batch */

#define RX_CTL_BYTES (CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct in_pktinfo)))

struct util_udprx {
	struct util_udprx_opts o;
	size_t buf_cap;
	uint8_t *bufs;
	struct mmsghdr *msg;
	struct iovec *iov;
	struct sockaddr_in *name;
	union {
		char buf[RX_CTL_BYTES];
		struct cmsghdr align;
	} *ctl;
	/* iteration over the last recv */
	unsigned n, cur;
	size_t off;
	uint16_t seg;
	size_t gso_size;   /* of buffer cur (its length when it came alone) */
	uint32_t dst_ip_be;
};

int util_udprx_create(const struct util_udprx_opts *o, struct util_udprx **out)
{
	struct util_udprx *r;

	if (!o || !out || !o->batch || !o->pkt_cap || o->batch > 4096)
		return -EINVAL;
	r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	r->o = *o;
	/* A GRO buffer holds up to a whole UDP datagram's worth of segments. */
	r->buf_cap = o->gro ? 65536 : o->pkt_cap;
	r->bufs = malloc(o->batch * r->buf_cap);
	r->msg = calloc(o->batch, sizeof *r->msg);
	r->iov = calloc(o->batch, sizeof *r->iov);
	r->name = calloc(o->batch, sizeof *r->name);
	r->ctl = calloc(o->batch, sizeof *r->ctl);
	if (!r->bufs || !r->msg || !r->iov || !r->name || !r->ctl) {
		util_udprx_destroy(r);
		return -ENOMEM;
	}
	for (size_t i = 0; i < o->batch; i++) {
		r->iov[i].iov_base = r->bufs + i * r->buf_cap;
		r->iov[i].iov_len = r->buf_cap;
		r->msg[i].msg_hdr.msg_iov = &r->iov[i];
		r->msg[i].msg_hdr.msg_iovlen = 1;
		r->msg[i].msg_hdr.msg_name = &r->name[i];
	}
	*out = r;
	return 0;
}

void util_udprx_destroy(struct util_udprx *r)
{
	if (!r)
		return;
	free(r->bufs);
	free(r->msg);
	free(r->iov);
	free(r->name);
	free(r->ctl);
	free(r);
}

int util_udprx_recv(struct util_udprx *r, int fd, int flags)
{
	int n;

	for (size_t i = 0; i < r->o.batch; i++) {
		struct msghdr *m = &r->msg[i].msg_hdr;
		m->msg_namelen = sizeof r->name[i];
		m->msg_control = r->ctl[i].buf;
		m->msg_controllen = RX_CTL_BYTES;
		m->msg_flags = 0;
	}
	r->n = r->cur = 0;
	r->off = 0;
	r->seg = 0;
	r->gso_size = 0;
	do
		n = recvmmsg(fd, r->msg, (unsigned)r->o.batch, flags, NULL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	r->n = (unsigned)n;
	return n;
}

/* Segment size (GRO) and destination address (pktinfo) of buffer i. */
static void read_ctl(struct util_udprx *r, unsigned i)
{
	struct msghdr *m = &r->msg[i].msg_hdr;

	r->gso_size = r->msg[i].msg_len;
	r->dst_ip_be = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
			int gs;
			memcpy(&gs, CMSG_DATA(c), sizeof gs);
			if (gs > 0)
				r->gso_size = (size_t)gs;
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof pi);
			r->dst_ip_be = pi.ipi_addr.s_addr;
		}
	}
}

bool util_gro_next(size_t total, size_t gso_size, size_t *off, size_t *len)
{
	if (*off >= total)
		return false;
	size_t left = total - *off;
	*len = gso_size && gso_size < left ? gso_size : left;
	*off += *len;
	return true;
}

bool util_udprx_next(struct util_udprx *r, struct util_udp_dgram *d)
{
	while (r->cur < r->n) {
		struct mmsghdr *mm = &r->msg[r->cur];
		size_t total = mm->msg_len, start = r->off, len = 0;
		bool more;

		if (r->off == 0 && r->seg == 0)
			read_ctl(r, r->cur);
		more = util_gro_next(total, r->gso_size, &r->off, &len);
		if (!more && total == 0 && r->seg == 0)
			more = true; /* an empty datagram is still one */
		if (more) {
			d->data = (uint8_t *)r->iov[r->cur].iov_base + start;
			d->len = len;
			d->from = r->name[r->cur];
			d->dst_ip_be = r->dst_ip_be;
			d->seg = r->seg++;
			d->truncated = (mm->msg_hdr.msg_flags & MSG_TRUNC) != 0;
			return true;
		}
		r->cur++;
		r->off = 0;
		r->seg = 0;
	}
	return false;
}
