/* inca-switch data plane: runs the run-to-completion
 * worker loop (recvmmsg -> decode -> authorise -> agg_tree_input -> encode -> sendmmsg).
 * The reflect mode shares this exact loop; only the per-packet step differs. */
#include "dataplane_int.h"

#include "wire/auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <netinet/ip.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
static const char *const sw_drop_names[SW_DROP_COUNT] = {
	[SW_DROP_UNKNOWN_TREE] = "unknown_tree",
	[SW_DROP_BAD_QPN] = "bad_qpn",
	[SW_DROP_UNKNOWN_SENDER] = "unknown_sender",
	[SW_DROP_NOT_INCA] = "not_inca",
	[SW_DROP_INJECTED_RX] = "injected_rx",
	[SW_DROP_INJECTED_TX] = "injected_tx",
	[SW_DROP_TX_ENCODE] = "tx_encode",
	[SW_DROP_TX_ERROR] = "tx_error",
	[SW_DROP_AUTH_MISSING] = "auth_missing",
	[SW_DROP_AUTH_KEY_ID] = "auth_key_id",
	[SW_DROP_AUTH_CTX] = "auth_ctx",
	[SW_DROP_AUTH] = "auth",
	[SW_DROP_AUTH_REPLAY] = "auth_replay",
};

const char *sw_drop_name(enum sw_drop d)
{
	return (unsigned)d < SW_DROP_COUNT ? sw_drop_names[d] : "?";
}

/* ---------------------------------------------------------------- hot path */

static bool inject_drop(struct sw_worker *w)
{
	return w->sw->opts.drop_rate > 0 && util_rng_double(&w->rng) < w->sw->opts.drop_rate;
}

/* The queue no longer references engine memory (it was flushed). */
static void ref_reset(struct sw_io *io)
{
	for (size_t i = 0; i < io->nref; i++)
		io->ref_bits[io->ref_list[i] / 64] = 0;
	io->nref = 0;
}

static bool ref_marked(const struct sw_io *io, uint16_t slot)
{
	return (io->ref_bits[slot / 64] >> (slot % 64)) & 1;
}

static void ref_mark(struct sw_io *io, uint16_t slot)
{
	if (ref_marked(io, slot))
		return;
	io->ref_bits[slot / 64] |= 1ull << (slot % 64);
	io->ref_list[io->nref++] = slot;
}

static void flush_tx(struct sw_worker *w)
{
	struct sw_io *io = w->io;
	const struct util_udptx_stats *st = util_udptx_stats(io->tx);

	if (!util_udptx_queued(io->tx)) {
		ref_reset(io);
		return;
	}
	int rc = util_udptx_flush(io->tx, w->fd, 0);
	if (rc < 0)
		sw_log(3, "worker %u: sendmmsg: %s", w->idx, strerror(-rc));
	/* The socket blocks, so the flush sends or drops everything. Should anything stay
	 * queued, it must not outlive the engine memory it may reference: dropped. */
	if (util_udptx_queued(io->tx) && io->nref) {
		w->cnt.sw_drops[SW_DROP_TX_ERROR] += util_udptx_queued(io->tx);
		util_udptx_clear(io->tx);
	}
	ref_reset(io);
	w->cnt.tx_pkts += st->pkts - io->tx_seen.pkts;
	w->cnt.tx_bytes += st->bytes - io->tx_seen.bytes;
	w->cnt.tx_batches += st->syscalls - io->tx_seen.syscalls;
	w->cnt.tx_gso_sends += st->gso_sends - io->tx_seen.gso_sends;
	w->cnt.sw_drops[SW_DROP_TX_ERROR] += st->errors - io->tx_seen.errors;
	if (st->gso_failed != io->tx_seen.gso_failed) {
		sw_log(1, "worker %u: the kernel refused a GSO send: sending one by one", w->idx);
		w->gso = false;
		w->cnt.gso_on = 0;
	}
	io->tx_seen = *st;
}

/* The send queue's tag of a packet (util_udptx_add): packets of different tags never share a GSO
 * send. To a switch, the slot block: the receiving switch steers each GRO buffer to the worker
 * that owns its first packet's block (docs/protocol.md §8). A member reads with one thread, so
 * its results, notices and re-sent results of any blocks may share a send: under loss the
 * repairs complete chunks of many blocks one at a time, and one send per block cost the
 * members twice the receive buffers (5 % loss, 1 MiB AllReduce: 3.3 against 3.6 ms). */
#define SW_TX_TAG_MEMBER UINT32_MAX
static uint32_t tx_tag(enum sw_nbr_kind to, uint16_t slot)
{
	return to == SW_NBR_MEMBER ? SW_TX_TAG_MEMBER : slot / WIRE_SLOT_BLOCK;
}

/* Room for a datagram of len bytes to `to` (flushing first if the queue is full): where to
 * write it, and the IPv4 ID it will carry. src_ip (network order) is only used when listening
 * on the wildcard address, so the kernel sends from the address the ICRC was computed with. */
static uint8_t *reserve_tx(struct sw_worker *w, const struct sockaddr_in *to, uint32_t src_ip_be,
			   uint32_t tag, size_t len, uint16_t *ip_id)
{
	uint8_t *buf = util_udptx_add(w->io->tx, to, src_ip_be, tag, len, ip_id);

	if (!buf) {
		flush_tx(w);
		buf = util_udptx_add(w->io->tx, to, src_ip_be, tag, len, ip_id);
	}
	return buf;
}

/* The same for a datagram whose bytes [off, off + data_len) are sent from data (by
 * reference: see sock_tx_send). */
static uint8_t *reserve_tx_ref(struct sw_worker *w, const struct sockaddr_in *to,
			       uint32_t src_ip_be, uint32_t tag, size_t len, size_t off,
			       const uint8_t *data, size_t data_len, uint16_t *ip_id)
{
	uint8_t *buf = util_udptx_add_ref(w->io->tx, to, src_ip_be, tag, len, off, data,
					  data_len, ip_id);

	if (!buf) {
		flush_tx(w);
		buf = util_udptx_add_ref(w->io->tx, to, src_ip_be, tag, len, off, data, data_len,
					 ip_id);
	}
	return buf;
}

static void drop_log(const struct sw_worker *w, const char *why, const struct sockaddr_in *from)
{
	char a[32];

	if (sw_verbosity >= 3)
		sw_log(3, "worker %u: drop %s from %s", w->idx, why,
		       util_format_addr(from, a, sizeof a));
}

/* Swap a per-QP PSN counter for v, returning the old value. Several workers share the
 * counters of a tree (read-modify-write); with one worker a plain load and store do, which
 * saves two locked instructions per packet. */
static inline uint32_t psn_swap(const struct sw_tree *t, _Atomic uint32_t *a, uint32_t v)
{
	if (t->nworkers > 1)
		return atomic_exchange_explicit(a, v, memory_order_relaxed);
	uint32_t old = atomic_load_explicit(a, memory_order_relaxed);
	atomic_store_explicit(a, v, memory_order_relaxed);
	return old;
}

static inline uint32_t psn_next(const struct sw_tree *t, _Atomic uint32_t *a)
{
	if (t->nworkers > 1)
		return atomic_fetch_add_explicit(a, 1, memory_order_relaxed);
	uint32_t old = atomic_load_explicit(a, memory_order_relaxed);
	atomic_store_explicit(a, old + 1, memory_order_relaxed);
	return old;
}

/* Per neighbour receive accounting, including PSN continuity (UC: gaps are only counted). */
static void qp_rx(struct sw_worker *w, struct sw_tree *t, uint32_t nbr, uint32_t psn, size_t len)
{
	struct sw_qp_stats *q = &t->w[w->idx].qp[nbr];
	uint32_t expect = psn_swap(t, &t->psn[nbr].rx_next, (psn + 1) & 0xFFFFFF);

	q->rx_pkts++;
	q->rx_bytes += len;
	if (expect != UINT32_MAX && expect != psn) {
		uint32_t d = (psn - expect) & 0xFFFFFF;
		if (d < 0x800000) {
			q->psn_gaps++;
			q->psn_lost += d;
		} else {
			q->psn_reorder++;
		}
	}
}

/* dcrc: CRC of the data shared by every copy of a replicated result (NULL: compute per copy). */
static void emit(struct sw_worker *w, struct sw_tree *t, struct agg_send *s, uint32_t src_ip_be,
		 const struct wire_dcrc *dcrc, struct sw_tx *tx)
{
	const struct sw_nbr *nb;
	struct wire_ipinfo ip;
	int len;

	if (s->nbr >= t->nnbr) {
		w->cnt.sw_drops[SW_DROP_TX_ENCODE]++;
		return;
	}
	nb = &t->nbr[s->nbr];
	s->pkt.bth.dest_qp = nb->qpn;
	s->pkt.bth.psn = psn_next(t, &t->psn[s->nbr].tx_next) & 0xFFFFFF;
	ip = (struct wire_ipinfo){
		.src_ip = ntohl(src_ip_be),
		.dst_ip = ntohl(nb->addr.sin_addr.s_addr),
		.src_port = ntohs(w->sw->cfg->listen.sin_port),
		.dst_port = ntohs(nb->addr.sin_port),
		.ip_id = 0,
	};
	if (inject_drop(w)) {
		w->cnt.sw_drops[SW_DROP_INJECTED_TX]++;
		return;
	}
	len = tx->send(tx, nb, &s->pkt, &ip, dcrc);
	if (len < 0) {
		w->cnt.sw_drops[len == -EINVAL || len == -ENOSPC ? SW_DROP_TX_ENCODE
								 : SW_DROP_TX_ERROR]++;
		sw_log(2, "worker %u: tree %u: encode/queue failed: %d", w->idx, t->conf.id, len);
		return;
	}
	t->w[w->idx].qp[s->nbr].tx_pkts++;
	t->w[w->idx].qp[s->nbr].tx_bytes += (uint64_t)len;
}

/* The socket path's output: UDP payloads into the send queue (GSO batches per destination and
 * tx_tag; result data by reference, sock_tx_send), flushed after each receive batch. */
struct sock_tx {
	struct sw_tx tx;
	struct sw_worker *w;
};

static void sock_tx_reserve(struct sw_tx *tx, size_t n)
{
	struct sw_worker *w = ((struct sock_tx *)tx)->w;

	if (util_udptx_queued(w->io->tx) + n > w->io->tx_cap)
		flush_tx(w);
}

/* Shortest data sent by reference: below it a copy costs less than the two more iovecs. */
#define SW_TX_REF_MIN 256

/* Whether the data of the sends an input with this verdict emitted lives in a slot version of
 * the engine (see sock_tx_send): the root's result, a stored result re-sent, a parent's result
 * replicated down, an aggregate sent up (again, also for a parent's notice). Not a forward: it
 * carries the tree's one forward buffer, which the tree's next forward of any slot rewrites. */
static bool ref_verdict(enum agg_verdict v)
{
	switch (v) {
	case AGG_COMPLETED:
	case AGG_DUP_RESENT:
	case AGG_DUP_UP_RESENT:
	case AGG_RESULT_DOWN:
	case AGG_NACK_DOWN:
		return true;
	default:
		return false;
	}
}

/* Sends carry their data by reference where sw_handle_inca allows it (io->ref_ok) and it is
 * long enough: the queue gets the headers, pad and ICRC (wire_encode_udp_nodata), and the
 * kernel reads the data from the engine at the flush, so the copies of a result cost no copy
 * of its data here.
 *
 * Why the data cannot change before the flush. For the verdicts of ref_verdict the engine
 * (lib/agg) points pkt->data at the accumulator of one of the two versions of the input's slot
 * in this worker's shard of the tree, and every send carries that slot. That memory is written
 * only inside this worker's agg_tree_input, and only for an input of that same slot: a
 * contribution absorbed (copied or reduced in; a new round taking the version over, also after
 * a job-epoch reset, which starts every slot afresh but writes no data itself), a parent's
 * result stored over an aggregate sent up, the deterministic fold at completion. So each
 * referenced slot is marked (io->ref_bits, for every tree: a mark only costs a flush), and
 * sw_handle_inca flushes the queue before it gives the engine an input of a marked slot. The
 * engine shards themselves change only with the tree set, at the top of the worker loop, after
 * flush_tx (and a shard is freed only after that quiescent point). Everything else is copied:
 * forwards, notices (no data), short data, and any send when the mark list is full. */
static int sock_tx_send(struct sw_tx *tx, const struct sw_nbr *nb, const struct wire_pkt *pkt,
			struct wire_ipinfo *ip, const struct wire_dcrc *dcrc)
{
	struct sw_worker *w = ((struct sock_tx *)tx)->w;
	struct sw_io *io = w->io;
	size_t want = wire_pkt_udp_len(pkt);
	uint32_t src_ip_be = htonl(ip->src_ip), tag = tx_tag(nb->kind, pkt->inca.slot);
	bool ref = io->ref_ok && pkt->data_len >= SW_TX_REF_MIN && pkt->inca.slot == io->ref_slot &&
		   (io->nref < io->tx_cap || ref_marked(io, pkt->inca.slot));
	uint8_t *buf = NULL;
	int len = -ENOSPC;

	if (want <= WIRE_MAX_UDP_PAYLOAD && ref) {
		buf = reserve_tx_ref(w, &nb->addr, src_ip_be, tag, want, wire_pkt_data_off(pkt),
				     pkt->data, pkt->data_len, &ip->ip_id);
		if (buf)
			len = wire_encode_udp_nodata(buf, want, pkt, ip, dcrc);
	} else if (want <= WIRE_MAX_UDP_PAYLOAD) {
		buf = reserve_tx(w, &nb->addr, src_ip_be, tag, want, &ip->ip_id);
		if (buf)
			len = dcrc ? wire_encode_udp_dcrc(buf, want, pkt, ip, dcrc)
				   : wire_encode_udp(buf, want, pkt, ip);
	}
	if (len != (int)want) {
		if (buf)
			util_udptx_cancel_last(io->tx);
		return len < 0 ? len : -EINVAL;
	}
	if (ref)
		ref_mark(io, pkt->inca.slot);
	return len;
}

/* Authentication of a packet from neighbour nbr of a tree with auth: block present, the
 * tree's key id, the sender context of that neighbour (a member's BFR-id; a switch's
 * WIRE_AUTH_CTX_SWITCH | the BFR-id it sends with), then the MAC. Returns the drop reason,
 * SW_DROP_COUNT if the packet is authentic. */
static enum sw_drop auth_check(struct sw_worker *w, const struct sw_tree *t, uint32_t nbr,
			       const struct wire_pkt *pkt)
{
	const struct sw_nbr *nb = &t->nbr[nbr];
	struct wire_replay *rw = &t->w[w->idx].replay[nbr];

	if (!(pkt->inca.flags & WIRE_F_AUTH))
		return SW_DROP_AUTH_MISSING;
	if (pkt->auth.key_id != t->conf.auth_key_id)
		return SW_DROP_AUTH_KEY_ID;
	if (nb->kind == SW_NBR_MEMBER ? pkt->auth.ctx != nb->bfr_id
				      : pkt->auth.ctx != (WIRE_AUTH_CTX_SWITCH | pkt->inca.bfr_id))
		return SW_DROP_AUTH_CTX;
	/* The window first: a replayed packet costs no MAC. Only an authentic packet moves it,
	 * so forgeries cannot push a sender's window ahead of its real packets. */
	if (wire_replay_check(rw, pkt->inca.epoch, pkt->auth.ctr) != 0)
		return SW_DROP_AUTH_REPLAY;
	if (wire_mac_verify(t->w[w->idx].mac, pkt) != 0)
		return SW_DROP_AUTH;
	wire_replay_update(rw, pkt->inca.epoch, pkt->auth.ctr);
	return SW_DROP_COUNT;
}

/* Put an authentication block on every packet the engine emitted (tree with auth), or make
 * sure none carries one (tree without). The copies of one result or notice differ only in
 * what the MAC does not cover (BTH, bit-string), so consecutive copies with the same MAC
 * input share one nonce and one tag: one MAC per round, not per copy. */
static void auth_sign(struct sw_worker *w, struct sw_tree *t, struct agg_send *s, size_t n)
{
	uint8_t aad[2][WIRE_AUTH_AAD_MAX];
	size_t alen[2] = { 0, 0 };
	const struct wire_pkt *prev = NULL;

	for (size_t i = 0; i < n; i++) {
		struct wire_pkt *p = &s[i].pkt;
		uint8_t *cur = aad[i & 1];
		const uint8_t *last = aad[(i & 1) ^ 1];

		if (!t->conf.auth) {
			p->inca.flags &= (uint8_t)~WIRE_F_AUTH;
			p->inca.epoch = 0;
			continue;
		}
		p->inca.flags |= WIRE_F_AUTH;
		p->auth.key_id = t->conf.auth_key_id;
		p->auth.ctx = WIRE_AUTH_CTX_SWITCH | p->inca.bfr_id;
		/* Compare with the previous packet under its counter: equal input, same tag. */
		p->auth.ctr = prev ? prev->auth.ctr : 0;
		alen[i & 1] = wire_auth_aad(p, cur);
		if (prev && alen[i & 1] && alen[i & 1] == alen[(i & 1) ^ 1] &&
		    !memcmp(cur, last, alen[i & 1]) && p->data_len == prev->data_len &&
		    (p->data == prev->data || !memcmp(p->data, prev->data, p->data_len))) {
			memcpy(p->auth.tag, prev->auth.tag, WIRE_AUTH_TAG_LEN);
			continue;
		}
		p->auth.ctr = atomic_fetch_add_explicit(&t->auth_ctr, 1, memory_order_relaxed);
		alen[i & 1] = wire_auth_aad(p, cur);
		if (wire_mac_sign(t->w[w->idx].mac, p) != 0) {
			s[i].nbr = UINT32_MAX; /* emit counts it as tx_encode and sends nothing */
			continue;
		}
		prev = p;
	}
}

/* A UDP datagram's seg (struct sw_rx) is its index in its GRO buffer, the first guess of the
 * IPv4 ID the sender's kernel gave it (the ICRC covers the ID, which a UDP socket does not
 * show). A frame carries its ID. */
void sw_handle_inca(struct sw_worker *w, const struct sw_treeset *set, const struct sw_rx *rx,
		    struct sw_tx *tx)
{
	struct sw_switch *sw = w->sw;
	struct wire_pkt pkt;
	struct sockaddr_in fromf;
	const struct sockaddr_in *from = &rx->from;
	uint32_t dst_ip_be = rx->dst_ip_be;
	size_t len = rx->len;
	struct wire_ipinfo ip = {
		.src_ip = ntohl(from->sin_addr.s_addr),
		.dst_ip = ntohl(dst_ip_be),
		.src_port = ntohs(from->sin_port),
		.dst_port = ntohs(sw->cfg->listen.sin_port),
		.ip_id = rx->seg,
		.id_unseen = true,
	};
	enum wire_err e;
	struct sw_tree *t;
	uint16_t ti;
	uint32_t nbr, src_ip_be;
	size_t nsent = 0;
	enum agg_verdict v;

	if (rx->frame) {
		/* Every layer checked, the ICRC always (over the IPv4 ID the frame carries). */
		e = wire_decode_frame(rx->buf, rx->len, &pkt, &ip);
		fromf = (struct sockaddr_in){ .sin_family = AF_INET,
					      .sin_port = htons(ip.src_port),
					      .sin_addr.s_addr = htonl(ip.src_ip) };
		from = &fromf;
		dst_ip_be = htonl(ip.dst_ip);
		len = e == WIRE_OK ? wire_pkt_udp_len(&pkt) : 0;
	} else {
		/* The ICRC is checked below, once the packet is known to come from a neighbour of
		 * a tree without authentication (with it, the MAC supersedes the CRC). */
		e = wire_decode_udp(rx->buf, rx->len, &pkt, NULL);
	}
	if (e != WIRE_OK) {
		w->cnt.wire_drops[(unsigned)e < WIRE_E_COUNT_MAX_ ? e : WIRE_E_TRUNCATED]++;
		drop_log(w, wire_err_name(e), from);
		return;
	}
	ti = set->index[pkt.inca.tree_id];
	if (ti == UINT16_MAX) {
		w->cnt.sw_drops[SW_DROP_UNKNOWN_TREE]++;
		drop_log(w, "unknown_tree", from);
		return;
	}
	t = set->trees[ti];
	if (pkt.bth.dest_qp != t->conf.qpn) {
		w->cnt.sw_drops[SW_DROP_BAD_QPN]++;
		drop_log(w, "bad_qpn", from);
		return;
	}
	nbr = sw_nbr_lookup(t, from);
	if (nbr == UINT32_MAX) {
		w->cnt.sw_drops[SW_DROP_UNKNOWN_SENDER]++;
		drop_log(w, "unknown_sender", from);
		return;
	}
	if (t->conf.auth) {
		enum sw_drop d = auth_check(w, t, nbr, &pkt);
		if (d != SW_DROP_COUNT) {
			w->cnt.sw_drops[d]++;
			drop_log(w, sw_drop_name(d), from);
			return;
		}
	} else if (!rx->frame && sw->cfg->check_icrc && !wire_icrc_check(&ip, rx->buf, rx->len)) {
		w->cnt.wire_drops[WIRE_E_ICRC]++;
		drop_log(w, wire_err_name(WIRE_E_ICRC), from);
		return;
	}
	qp_rx(w, t, nbr, pkt.bth.psn, len);
	if (tx->accepted)
		tx->accepted(tx, t, nbr, rx);
	tx->reserve(tx, w->max_sends);
	agg_tree_clock(t->w[w->idx].agg, w->rx_ns);
	/* Sends queued by reference into this slot's engine memory leave before the engine may
	 * write it (sock_tx_send). */
	if (w->io->nref && ref_marked(w->io, pkt.inca.slot))
		flush_tx(w);
	v = agg_tree_input(t->w[w->idx].agg, &pkt, nbr, w->io->sends, w->max_sends, &nsent);
	w->cnt.verdicts[(unsigned)v < AGG_VERDICT_COUNT ? v : AGG_DROP_FIRST]++;
	if (v >= AGG_DROP_FIRST)
		drop_log(w, agg_verdict_name(v), from);
	src_ip_be = sw->listen_any ? dst_ip_be : sw->cfg->listen.sin_addr.s_addr;
	if (nsent > w->max_sends)
		nsent = w->max_sends;
	/* A result replicated to several neighbours carries the same data in every copy: CRC the
	 * data once and let each copy pay only for its headers (wire_encode_udp_dcrc). */
	/* Header-only copies (per-chunk destinations, docs/protocol.md §4.1) carry no data and
	 * simply get their own (short) CRC. */
	struct wire_dcrc dcrc;
	const struct wire_dcrc *shared = NULL;
	const struct wire_pkt *p0 = NULL;
	size_t ndata = 0;
	for (size_t i = 0; i < nsent; i++) {
		const struct wire_pkt *p = &w->io->sends[i].pkt;
		if (!p->data_len)
			continue;
		if (!p0)
			p0 = p;
		else if (p->data != p0->data || p->data_len != p0->data_len)
			p0 = NULL, i = nsent; /* different data: no sharing */
		ndata++;
	}
	auth_sign(w, t, w->io->sends, nsent);
	if (p0 && ndata > 1 && p0->data_len >= 256 &&
	    wire_data_crc(&dcrc, p0->data, p0->data_len) == 0)
		shared = &dcrc;
	w->io->ref_ok = ref_verdict(v);
	w->io->ref_slot = pkt.inca.slot;
	for (size_t i = 0; i < nsent; i++) {
		const struct wire_pkt *p = &w->io->sends[i].pkt;
		emit(w, t, &w->io->sends[i], src_ip_be,
		     shared && p->data_len == dcrc.len && p->data == p0->data ? shared : NULL, tx);
	}
	w->io->ref_ok = false;
}

/* The benchmark baseline: same sockets, steering and batching (GSO/GRO included), no decode:
 * each datagram is copied back to its sender as it came (its ICRC is not checked or redone). */
static void handle_reflect(struct sw_worker *w, uint8_t *buf, size_t len,
			   const struct sockaddr_in *from, uint32_t dst_ip_be)
{
	uint16_t id;
	uint8_t *out;

	if (len < WIRE_ROCE_HDR_LEN + WIRE_INCA_FIXED_LEN + 8 + WIRE_ICRC_LEN ||
	    buf[0] != WIRE_OPCODE_UC_WRITE_ONLY_IMM) {
		w->cnt.sw_drops[SW_DROP_NOT_INCA]++;
		return;
	}
	if (inject_drop(w)) {
		w->cnt.sw_drops[SW_DROP_INJECTED_TX]++;
		return;
	}
	/* Echoes leave in the shape of the aggregating path's results to a member (tx_tag), so
	 * the baseline gets no bigger sends than the switch can use. */
	out = len <= WIRE_MAX_UDP_PAYLOAD
		      ? reserve_tx(w, from, dst_ip_be, SW_TX_TAG_MEMBER, len, &id)
		      : NULL;
	if (!out) {
		w->cnt.sw_drops[SW_DROP_TX_ENCODE]++;
		return;
	}
	memcpy(out, buf, len);
	w->cnt.reflected++;
}

void sw_worker_take_snapshot(struct sw_worker *w, const struct sw_treeset *set)
{
	w->snap_cnt = w->cnt;
	for (size_t i = 0; i < set->ntrees; i++) {
		struct sw_tree *t = set->trees[i];
		struct sw_tree_worker *tw = &t->w[w->idx];
		memcpy(tw->snap_qp, tw->qp, t->nnbr * sizeof *tw->qp);
		agg_tree_get_stats(tw->agg, &tw->snap);
	}
}

static void check_snapshot(struct sw_worker *w, const struct sw_treeset *set)
{
	uint64_t req = atomic_load_explicit(&w->sw->snap_req, memory_order_acquire);

	if (req != w->snap_seen) {
		sw_worker_take_snapshot(w, set);
		w->snap_seen = req;
		atomic_store_explicit(&w->snap_ack, req, memory_order_release);
	}
}

/* A new tree set may need more sends per packet: grow this worker's buffers (nothing is
 * queued at the top of the loop, so they can simply be replaced). */
static void io_reserve(struct sw_worker *w, size_t max_sends)
{
	struct sw_io *nio;

	if (max_sends <= w->max_sends)
		return;
	nio = sw_io_new(w->sw, max_sends, w->gso, w->gro);
	if (!nio) {
		sw_log(0, "worker %u: out of memory growing buffers", w->idx);
		return; /* keep the old ones; emit() clamps to w->max_sends */
	}
	sw_io_free(w->io);
	w->io = nio;
	w->max_sends = max_sends;
}

/* True while a round on this worker's slots is under way (collecting, or waiting for the
 * result from the parent): its next packets are due within a round trip. Once every round is
 * complete the next packet only comes with the ranks' next call, and a spin until then would
 * just take a CPU from ranks that are between calls (barriers, computation). */
static bool worker_pending(const struct sw_worker *w, const struct sw_treeset *set)
{
	for (size_t i = 0; i < set->ntrees; i++) {
		const struct sw_tree *t = set->trees[i];
		if (w->idx < t->nworkers && t->w[w->idx].agg && agg_tree_pending(t->w[w->idx].agg))
			return true;
	}
	return false;
}

void sw_worker_pin(struct sw_worker *w)
{
	const struct sw_opts *o = &w->sw->opts;
	cpu_set_t one;

	if (w->idx >= o->ncpus)
		return;
	CPU_ZERO(&one);
	CPU_SET(o->cpus[w->idx], &one);
	int rc = pthread_setaffinity_np(pthread_self(), sizeof one, &one);
	if (rc) {
		sw_log(0, "worker %u: CPU %d: %s; the scheduler places this worker", w->idx,
		       o->cpus[w->idx], strerror(rc));
		return;
	}
	w->own_cpu = true;
	w->cnt.own_cpu = 1;
	sw_log(2, "worker %u: on CPU %d alone", w->idx, o->cpus[w->idx]);
}

static void *worker_main(void *arg)
{
	struct sw_worker *w = arg;
	struct sw_switch *sw = w->sw;
	bool reflect = sw->opts.reflect;
	uint64_t last_rx_ns = 0;
	struct sock_tx stx = { { sock_tx_reserve, sock_tx_send, NULL }, w };

	sw_worker_pin(w);
	sw_log(2, "worker %u: running on fd %d", w->idx, w->fd);
	while (!atomic_load_explicit(&sw->stop, memory_order_relaxed)) {
		const struct sw_treeset *set;
		struct sw_io *io;
		int n;

		/* Quiescent point: no tree of any set is referenced here. Announce the epoch seen,
		 * then load the set (seq_cst: a writer that waits for this epoch published its
		 * set before bumping it, so this load sees that set or a newer one). */
		atomic_store(&w->qs_epoch, atomic_load(&sw->epoch));
		set = atomic_load(&sw->set);
		io_reserve(w, set->max_sends);
		io = w->io;

		/* Busy-poll shortly after traffic; otherwise block for the first datagram (up to
		 * SW_RX_TIMEOUT_MS, or until woken). Either way take what is queued. */
		if (sw_worker_may_spin(w, set, util_now_ns() - last_rx_ns)) {
			n = util_udprx_recv(io->rx, w->fd, MSG_DONTWAIT);
			if (n <= 0) {
				sched_yield();
				continue;
			}
		} else {
			/* Take what is queued; if nothing, sleep on the socket and the wake-up
			 * eventfd (SW_RX_TIMEOUT_MS at most). */
			n = util_udprx_recv(io->rx, w->fd, MSG_DONTWAIT);
			if (n == -EAGAIN) {
				struct pollfd pf[2] = { { .fd = w->fd, .events = POLLIN },
							{ .fd = w->wake_fd, .events = POLLIN } };
				int pr = poll(pf, 2, SW_RX_TIMEOUT_MS);
				uint64_t v;

				n = 0;
				if (pr > 0 && (pf[1].revents & POLLIN))
					(void)!read(w->wake_fd, &v, sizeof v);
				if (pr > 0 && (pf[0].revents & POLLIN))
					n = util_udprx_recv(io->rx, w->fd, MSG_DONTWAIT);
			}
		}
		if (n <= 0) {
			if (n < 0 && n != -EAGAIN) {
				sw_log(0, "worker %u: recvmmsg: %s", w->idx, strerror(-n));
				struct timespec ts = { 0, 10 * 1000 * 1000 };
				nanosleep(&ts, NULL); /* do not spin on a persistent error */
			}
			check_snapshot(w, set);
			continue;
		}
		w->cnt.rx_batches++;
		w->rx_ns = last_rx_ns = util_now_ns();
		struct util_udp_dgram d;
		while (util_udprx_next(io->rx, &d)) {
			w->cnt.rx_pkts++;
			w->cnt.rx_bytes += d.len;
			w->cnt.rx_coalesced += d.seg > 0;
			if (d.truncated) {
				w->cnt.wire_drops[WIRE_E_TOO_BIG]++;
				continue;
			}
			if (inject_drop(w)) {
				w->cnt.sw_drops[SW_DROP_INJECTED_RX]++;
				continue;
			}
			if (reflect)
				handle_reflect(w, d.data, d.len, &d.from, d.dst_ip_be);
			else
				sw_handle_inca(w, set,
					       &(struct sw_rx){ .buf = d.data, .len = d.len,
								.from = d.from,
								.dst_ip_be = d.dst_ip_be,
								.seg = d.seg },
					       &stx.tx);
		}
		flush_tx(w);
		check_snapshot(w, set);
	}
	flush_tx(w);
	atomic_store(&w->exited, true);
	sw_log(2, "worker %u: stopped", w->idx);
	return NULL;
}

int sw_switch_start(struct sw_switch *sw)
{
	for (unsigned i = 0; i < sw->nworkers; i++) {
		int rc = pthread_create(&sw->w[i].thread, NULL,
					sw->xdp ? sw_xdp_worker_main : worker_main, &sw->w[i]);
		if (rc) {
			sw_log(0, "pthread_create: %s", strerror(rc));
			sw_switch_stop(sw);
			return -rc;
		}
		sw->w[i].started = true;
	}
	return 0;
}

void sw_switch_stop(struct sw_switch *sw)
{
	atomic_store(&sw->stop, true);
	sw_wake_workers(sw);
	for (unsigned i = 0; i < sw->nworkers; i++)
		if (sw->w[i].started) {
			pthread_join(sw->w[i].thread, NULL);
			sw->w[i].started = false;
		}
}

void sw_switch_snapshot(struct sw_switch *sw, unsigned timeout_ms)
{
	uint64_t req = atomic_fetch_add_explicit(&sw->snap_req, 1, memory_order_acq_rel) + 1;
	uint64_t deadline = util_now_ns() + (uint64_t)timeout_ms * 1000000ull;

	sw_wake_workers(sw);
	for (unsigned i = 0; i < sw->nworkers; i++) {
		struct sw_worker *w = &sw->w[i];
		if (!w->started) {
			sw_worker_take_snapshot(w, atomic_load(&sw->set));
			continue;
		}
		while (atomic_load_explicit(&w->snap_ack, memory_order_acquire) < req &&
		       util_now_ns() < deadline) {
			struct timespec ts = { 0, 100 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
}

/* ---------------------------------------------------------------- hooks for xdp.c */

const struct sw_treeset *sw_worker_quiescent(struct sw_worker *w)
{
	const struct sw_treeset *set;

	atomic_store(&w->qs_epoch, atomic_load(&w->sw->epoch));
	set = atomic_load(&w->sw->set);
	io_reserve(w, set->max_sends);
	return set;
}

void sw_worker_poll_snapshot(struct sw_worker *w, const struct sw_treeset *set)
{
	check_snapshot(w, set);
}

/* Poll (yielding the CPU) rather than sleep: within busy_poll_us of the last batch, and once no
 * round is under way only for busy_poll_us / SW_BUSY_POLL_IDLE_DIV, unless the CPU is the
 * worker's own (--cpus) or it reflects. */
bool sw_worker_may_spin(const struct sw_worker *w, const struct sw_treeset *set, uint64_t idle_ns)
{
	const uint64_t spin_ns = (uint64_t)w->sw->opts.busy_poll_us * 1000u;

	return spin_ns && idle_ns < spin_ns &&
	       (w->own_cpu || w->sw->opts.reflect || idle_ns < spin_ns / SW_BUSY_POLL_IDLE_DIV ||
		worker_pending(w, set));
}

bool sw_worker_inject_drop(struct sw_worker *w)
{
	return inject_drop(w);
}

/* ---------------------------------------------------------------- logging */

int sw_verbosity;

UTIL_LOG_DEFINE(sw_log, sw_verbosity, "inca-switch", UTIL_LOG_TIME | UTIL_LOG_ERRTAG)
