/* libinca INC data path, receive side: draining the socket (recvmmsg, cut into datagrams where
 * UDP_GRO merged them), strict verification of every result (source, ICRC, authentication and
 * replay window, QP, tree, slot/round and the in-flight chunk) and placing its data, repair
 * notices from the switch. The call loop is in inc.c, loss recovery in inc_recover.c. */
#include "client/inc_int.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

/* A repair notice (docs/protocol.md "Repair notices"): the switch misses our contribution to
 * this chunk although a later one of ours arrived (or a peer asks for it), so it was lost: mark
 * the chunk for an immediate resend, unless it was resent within the reordering window (the
 * notice crossed that resend). Any notice shows the switch alive. Returns 0 (never completes
 * a chunk). */
static int inc_rx_nack(struct inca_comm *c, const struct inc_job *j, const struct wire_pkt *pkt,
		       uint64_t now_ns)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;

	/* The collective is checked against the chunk below: a notice about an earlier call's
	 * chunk is stale, not bad. */
	if (pkt->bth.dest_qp != cfg->qpn || !wire_pkey_match(pkt->bth.pkey, WIRE_PKEY_DEFAULT) ||
	    pkt->inca.tree_id != cfg->tree_id || pkt->reth.rkey != cfg->key ||
	    pkt->inca.bsl_code != cfg->bsl_code || pkt->inca.si != cfg->si ||
	    !wire_bier_test(pkt->inca.bits, ic->bits_len, ic->own_bp) || pkt->inca.slot >= cfg->nslots) {
		c->stats.rx_bad++;
		return 0;
	}
	c->stats.rx_nacks++;
	ic->silent_rtos = 0;
	struct inc_chunk *ch = &ic->chunks[pkt->inca.slot];
	if (!ch->active || ch->nacked || pkt->inca.round != inc_round(c, ch->g) ||
	    pkt->imm != (uint32_t)ch->g || pkt->inca.coll != j->a->coll || (ch->retx && now_ns - ch->xmit_ns < reo_wnd_ns(ic)))
		return 0;
	ch->nacked = true;
	ic->nacked++;
	return 0;
}

/* The anti-replay window of a switch sender context; NULL if it has none yet. */
static struct wire_replay *inc_replay_find(struct client_inc *ic, uint32_t ctx)
{
	for (unsigned i = 0; i < ic->nreplay; i++)
		if (ic->replay_ctx[i] == ctx)
			return &ic->replay[i];
	return NULL;
}

/* A window for a context that just sent its first authentic packet; NULL when every slot is
 * taken. Only authentic packets get here, so forgeries cannot fill the table. */
static struct wire_replay *inc_replay_add(struct client_inc *ic, uint32_t ctx)
{
	if (ic->nreplay == INC_REPLAY_CTXS)
		return NULL;
	ic->replay_ctx[ic->nreplay] = ctx;
	memset(&ic->replay[ic->nreplay], 0, sizeof ic->replay[0]);
	return &ic->replay[ic->nreplay++];
}

/* A packet from the switch with authentication on: a block with our key id, a switch's
 * sender context for the BFR-id it claims (0: the root), our job epoch, a counter the
 * context's replay window has not seen, and the MAC. Counts rejections. */
static bool inc_auth_ok(struct inca_comm *c, const struct wire_pkt *pkt)
{
	struct client_inc *ic = c->inc;
	struct wire_replay *rw;
	int rc;

	if (!(pkt->inca.flags & WIRE_F_AUTH)) {
		ic->auth_st.rx_missing++;
		return false;
	}
	if (pkt->auth.key_id != c->cfg.auth_key_id) {
		ic->auth_st.rx_bad_key_id++;
		return false;
	}
	if (pkt->auth.ctx != (WIRE_AUTH_CTX_SWITCH | pkt->inca.bfr_id)) {
		ic->auth_st.rx_bad_ctx++;
		return false;
	}
	/* A result of another job on the same tree and key (an earlier or later epoch) is
	 * never ours, whatever its rounds look like. */
	if (pkt->inca.epoch != c->epoch) {
		ic->auth_st.rx_epoch++;
		return false;
	}
	rw = inc_replay_find(ic, pkt->auth.ctx);
	rc = rw ? wire_replay_check(rw, pkt->inca.epoch, pkt->auth.ctr) : 0;
	if (rc != 0) {
		ic->auth_st.rx_replay++;
		client_log(&c->cfg, 3, "inc: rx rejected: replay (%s)",
			   rc == -EALREADY ? "counter seen" : "below the window");
		return false;
	}
	if (wire_mac_verify(ic->mac, pkt) != 0) {
		ic->auth_st.rx_bad_mac++;
		client_log(&c->cfg, 3, "inc: rx rejected: MAC mismatch");
		return false;
	}
	if (!rw && !(rw = inc_replay_add(ic, pkt->auth.ctx))) {
		ic->auth_st.rx_bad_ctx++;
		return false;
	}
	wire_replay_update(rw, pkt->inca.epoch, pkt->auth.ctr);
	ic->auth_st.rx_verified++;
	return true;
}

/* Validate one received datagram against the in-flight table and place its data. Returns
 * 1 if it completed a chunk, 0 otherwise (counted as bad / duplicate). */
static int inc_rx_one(struct inca_comm *c, const struct inc_job *j, const struct util_udp_dgram *d,
		      uint64_t now_ns)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;
	const struct sockaddr_in *from = &d->from;
	size_t len = d->len;
	struct wire_ipinfo ipinfo;
	struct wire_pkt pkt;
	enum wire_err err;
	struct inc_chunk *ch;

	c->stats.rx_pkts++;
	c->stats.rx_bytes += len;
	if (inject_drop(c))
		return 0;
	/* Only the switch's IP is required: a switch may answer from another UDP port than
	 * the one it listens on, and the ICRC then covers that port, so take it from the
	 * datagram. The destination is our bound concrete address. The IPv4 ID is unseen: 0 for
	 * a packet sent alone, k for segment k of the switch's GSO send; the first guess is the
	 * packet's index in its GRO buffer, and the ICRC is accepted for any ID 0..127. */
	if (d->truncated || from->sin_family != AF_INET ||
	    from->sin_addr.s_addr != cfg->switch_sa.sin_addr.s_addr)
		goto bad;
	ipinfo = ic->rx_ip;
	ipinfo.src_port = ntohs(from->sin_port);
	ipinfo.ip_id = d->seg;
	ipinfo.id_unseen = true;
	/* With authentication the MAC supersedes the ICRC (docs/protocol.md §14). */
	err = wire_decode_udp(d->data, len, &pkt, cfg->auth ? NULL : &ipinfo);
	if (err != WIRE_OK) {
		client_log(cfg, 3, "inc: rx rejected: %s", wire_err_name(err));
		goto bad;
	}
	if (cfg->auth && !inc_auth_ok(c, &pkt))
		goto bad;
	if (pkt.inca.flags & WIRE_F_NACK)
		return inc_rx_nack(c, j, &pkt, now_ns);
	/* Our QP's P_Key is the default partition's: a result must match it (IBTA rule). */
	if (pkt.bth.dest_qp != cfg->qpn || !wire_pkey_match(pkt.bth.pkey, WIRE_PKEY_DEFAULT) ||
	    !(pkt.inca.flags & WIRE_F_RESULT) || pkt.inca.tree_id != cfg->tree_id ||
	    pkt.reth.rkey != cfg->key || pkt.inca.bsl_code != cfg->bsl_code || pkt.inca.si != cfg->si ||
	    !wire_bier_test(pkt.inca.bits, ic->bits_len, ic->own_bp) || pkt.inca.slot >= cfg->nslots)
		goto bad;

	ch = &ic->chunks[pkt.inca.slot];
	if (!ch->active || pkt.inca.round != inc_round(c, ch->g) ||
	    pkt.imm != (uint32_t)ch->g) {
		/* Self-consistent slot/round/imm of a chunk no longer in flight: a duplicate
		 * result (switch re-send, or the answer to one of our retransmissions), also
		 * of an earlier call of another collective. */
		if ((uint32_t)((uint64_t)(pkt.inca.round - c->round_base) * cfg->nslots +
			       pkt.inca.slot) == pkt.imm) {
			c->stats.rx_dup_results++;
			ic->silent_rtos = 0; /* the switch is alive (e.g. the liveness probe's answer) */
			return 0;
		}
		goto bad;
	}
	/* A chunk whose data we need must bring exactly it; otherwise a header-only result is
	 * the acknowledgement (a copy with data is accepted and ignored). */
	if (pkt.inca.coll != j->a->coll || pkt.reth.va != ch->off_bytes ||
	    pkt.inca.owner != ch->owner ||
	    pkt.inca.dtype != (uint8_t)j->dt || pkt.inca.op != (uint8_t)j->op ||
	    (ch->recv_data && (pkt.inca.count != ch->count || pkt.data_len != ch->len_bytes)) ||
	    (!ch->recv_data && pkt.inca.count != 0 && pkt.inca.count != ch->count))
		goto bad;
	/* The highest answered chunk becomes the liveness probe (see struct client_inc). In place,
	 * the result is about to overwrite our contribution: keep a copy, but only every few
	 * chunks (a probe a few chunks old is still held by the switch). */
	bool inplace = ch->send_data && ch->recv_data &&
		       (uintptr_t)ch->src < (uintptr_t)ch->dst + ch->len_bytes &&
		       (uintptr_t)ch->dst < (uintptr_t)ch->src + ch->len_bytes;
	if (!ic->probe_ok || ch->g > ic->probe_ch.g + (inplace ? cfg->nslots / 16 : 0)) {
		ic->probe_ch = *ch;
		if (inplace) {
			memcpy(ic->probe_data, ch->src, ch->len_bytes);
			ic->probe_ch.src = ic->probe_data;
		}
		ic->probe_a.coll = j->a->coll;
		ic->probe_j->a = &ic->probe_a;
		ic->probe_j->dt = j->dt;
		ic->probe_j->op = j->op;
		ic->probe_ok = true;
	}
	if (ch->recv_data) {
		/* Results come mostly in chunk order: start fetching the next chunk's lines of
		 * the caller's buffer for writing, which the copy below would otherwise wait
		 * for (4 and 16 MiB AllReduce on loopback: 3-5 % shorter calls). A prefetch
		 * past the buffer's end does not fault. */
		for (size_t o = 0; o < ch->len_bytes; o += 64)
			__builtin_prefetch((const char *)ch->dst + ch->len_bytes + o, 1, 3);
		memcpy(ch->dst, pkt.data, ch->len_bytes);
	}
	ch->active = false;
	ic->inflight--;
	if (ch->nacked) {
		ch->nacked = false;
		ic->nacked--;
	}
	/* Any answer proves the path alive: restart the RTO and forget its backoff. */
	ic->rto_start_ns = now_ns;
	ic->backoff = 0;
	ic->tlp_done = false;
	ic->silent_rtos = 0;
	ic->progress_ns = now_ns;
	/* Karn's rule, for the whole tree: no sample from a chunk we resent, nor from a result
	 * the switch marks repaired (WIRE_F_RETX: some member's resend completed it). Such a
	 * result's wait includes another member's loss recovery, not the path's round trip;
	 * counting it would inflate the RTO and read as congestion. */
	if (!ch->retx && !(pkt.inca.flags & WIRE_F_RETX)) {
		inc_rtt_sample(ic, now_ns - ch->sent_ns, now_ns);
		inc_wnd_on_result(ic, now_ns - ch->sent_ns, ch->tx_seq);
	}
	/* An answer vouches for every chunk of its slot block sent before this chunk's FIRST
	 * send: a block's results come back in send order, so those should have been answered
	 * already. Not for chunks sent before a resend: the answer may be to the original (in a
	 * tree, typically completed by another member's repair), and a whole queued window
	 * would be declared lost. */
	struct inc_rack *rk = &ic->rack[pkt.inca.slot / WIRE_SLOT_BLOCK];
	if (ch->first_seq > rk->seq) {
		rk->seq = ch->first_seq;
		rk->sent_ns = ch->sent_ns;
		rk->rtt_ns = now_ns - ch->sent_ns;
		ic->rack_gen++;
	}
	if (ch->first_seq > ic->rack_all.seq) {
		ic->rack_all.seq = ch->first_seq;
		ic->rack_all.rtt_ns = now_ns - ch->sent_ns;
	}
	/* A resend answered at least a minimum RTT after it left was most likely answered
	 * because of it (RFC 8985 §6.2). It vouches for the resends sent before it, which are
	 * repair requests too (a lost resend is then found a round trip later, not by the RTO),
	 * but not for first sends: those may wait for a slower peer, a repair does not. */
	uint64_t rrtt = now_ns - ch->xmit_ns;
	if (ch->retx && rrtt >= ic->min_rtt_ns) {
		/* The repair round trip: only from a result that a retransmission went into (a
		 * result without RETX answers the original contributions, however late). */
		if (pkt.inca.flags & WIRE_F_RETX)
			ic->rack_all.rrtt_ns = rrtt;
		if (ch->tx_seq > rk->rseq) {
			rk->rseq = ch->tx_seq;
			rk->rrtt_ns = rrtt;
			ic->rack_gen++;
		}
	}
	if (ch->retx && ch->retx_fast && ch->retx_tail && !(pkt.inca.flags & WIRE_F_RETX)) {
		/* A result without RETX is the answer to the original contributions (a result the
		 * switch re-sends for a duplicate, or one a resend completed, carries RETX): the
		 * resend was not needed, however late this answer came. The other-block rule
		 * expected it within rack_all's round trip of the first send: widen its window to
		 * how much later it came, plus a quarter. */
		uint64_t rt = now_ns - ch->sent_ns;
		uint64_t late = rt > ic->rack_all.rtt_ns ? rt - ic->rack_all.rtt_ns : 0;
		late += late / 4;
		if (late > INC_TAIL_ALLOW_MAX_NS)
			late = INC_TAIL_ALLOW_MAX_NS;
		if (late > ic->tail_allow_ns)
			ic->tail_allow_ns = late;
		ic->tail_good = 0;
	} else if (ch->retx && rrtt < ic->min_rtt_ns && ch->retx_fast &&
		   !(pkt.inca.flags & WIRE_F_RETX) && ic->reo_mult < INC_REO_MULT_MAX) {
		/* Answered faster than any round trip: the original was answered, the fast
		 * resend (of the own-block rule: the other-block rule's are above) was spurious
		 * (results were reordered): widen the reordering window. Not if the result carries
		 * RETX: a result re-sent for our resend, or a round a peer's resend completed just
		 * after ours left, says nothing about reordering. */
		ic->reo_mult++;
		ic->reo_good = 0;
	}
	if (ic->tail_allow_ns && ++ic->tail_good >= 4096) {
		ic->tail_allow_ns /= 2; /* lateness seen long ago: narrow the window again */
		ic->tail_good = 0;
	}
	if (ic->reo_mult > 1 && ++ic->reo_good >= 4096) {
		ic->reo_mult--; /* reordering seen long ago: narrow the window again */
		ic->reo_good = 0;
	}
	return 1;
bad:
	c->stats.rx_bad++;
	return 0;
}

/* Drain the socket; returns chunks completed or -errno. */
long inc_receive(struct inca_comm *c, const struct inc_job *j)
{
	struct client_inc *ic = c->inc;
	long done = 0;

	/* Bounded so timers and sends get their turn under a flood. */
	const int batch = ic->gro ? INC_RX_BATCH_GRO : INC_RX_BATCH;
	for (int round = 0; round < 16; round++) {
		struct util_udp_dgram d;
		int n = util_udprx_recv(ic->rxb, ic->fd, MSG_DONTWAIT);

		if (n == -EAGAIN)
			break;
		if (n < 0)
			return n;
		ic->rx_syscalls++;
		ic->rx_bufs += (unsigned)n;
		uint64_t now = util_now_ns();
		while (util_udprx_next(ic->rxb, &d)) {
			if (d.seg == 1)
				ic->rx_gro_bufs++;
			done += inc_rx_one(c, j, &d, now);
		}
		if (n < batch)
			break;
	}
	return done;
}
