/* libinca INC data path, the call: AllReduce (and every offloaded collective) through the
 * aggregation switch over RoCEv2-in-UDP. Opening and closing the INC socket, chunking into slots
 * (docs/protocol.md "Chunking and slots") inside the per-slot self-clocking rule and the
 * adaptive window, encoding into the batched transmit queue (lib/util/udpio: UDP GSO where the
 * kernel has it), the call loop that drives everything, a dead peer's drain, test-only fault
 * injection. Receiving and verifying results: inc_rx.c; RTT, window and loss recovery:
 * inc_recover.c; the shared state: inc_int.h. */
#include "client/inc_int.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void sockbuf(int fd, int force_opt, int opt)
{
	int v = INC_SOCKBUF_BYTES;

	/* FORCE works as root beyond rmem_max/wmem_max; otherwise take what the cap allows. */
	if (setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof v) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v);
}

/* A packet the queue must send alone after the kernel refused its GSO send: it now gets
 * IPv4 ID 0, so its ICRC is recomputed for that ID. */
static void inc_reid(void *arg, uint8_t *pkt, size_t len, const struct sockaddr_in *to,
		     uint32_t src_ip_be)
{
	const struct client_inc *ic = arg;
	struct wire_ipinfo ip = ic->tx_ip;

	(void)to;
	(void)src_ip_be;
	ip.ip_id = 0;
	(void)wire_set_icrc(pkt, len, &ip); /* -EINVAL only for a packet shorter than an ICRC */
}

void client_inc_auth_stats(const struct inca_comm *c, struct inca_auth_stats *out)
{
	memset(out, 0, sizeof *out);
	if (c->inc)
		*out = c->inc->auth_st;
	out->enabled = c->cfg.auth;
	out->key_id = c->cfg.auth_key_id;
	out->epoch = c->epoch;
	out->opted_out = c->cfg.no_auth;
}

void client_inc_io_stats(const struct inca_comm *c, struct inca_io_stats *out)
{
	const struct client_inc *ic = c->inc;

	memset(out, 0, sizeof *out);
	if (!ic || !ic->txq)
		return;
	const struct util_udptx_stats *t = util_udptx_stats(ic->txq);
	out->gso = util_udptx_gso(ic->txq);
	out->gro = ic->gro;
	out->tx_syscalls = t->syscalls;
	out->tx_msgs = t->msgs;
	out->gso_sends = t->gso_sends;
	out->gso_failed = t->gso_failed;
	out->rx_syscalls = ic->rx_syscalls;
	out->rx_bufs = ic->rx_bufs;
	out->rx_gro_bufs = ic->rx_gro_bufs;
}

int client_inc_open(struct inca_comm *c)
{
	const struct client_cfg *cfg = &c->cfg;
	struct sockaddr_in local = cfg->data_sa;
	socklen_t sl = sizeof local;
	struct client_inc *ic;
	int pmtu = IP_PMTUDISC_DO, rc;
	bool adopted;

	ic = calloc(1, sizeof *ic);
	if (!ic)
		return -ENOMEM;
	ic->fd = -1;
	c->inc = ic;
	ic->chunks = calloc(cfg->nslots, sizeof *ic->chunks);
	ic->nblk = (cfg->nslots + WIRE_SLOT_BLOCK - 1) / WIRE_SLOT_BLOCK;
	ic->rack = calloc(ic->nblk, sizeof *ic->rack);
	if (!ic->rack)
		return -ENOMEM;
	ic->probe_data = malloc(INC_PKT_CAP);
	ic->probe_j = calloc(1, sizeof *ic->probe_j);
	if (!ic->chunks || !ic->probe_data || !ic->probe_j)
		return -ENOMEM;

	/* AM path: adopt the socket whose address the AM registered (already bound). */
	ic->fd = client_am_data_fd(c);
	adopted = ic->fd >= 0;
	if (!adopted)
		ic->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ic->fd < 0)
		return -errno;
	/* DF and, on an unconnected socket, IPv4 ID 0: the ID the ICRC assumes. */
	if (setsockopt(ic->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) < 0)
		return -errno;
	sockbuf(ic->fd, SO_RCVBUFFORCE, SO_RCVBUF);
	sockbuf(ic->fd, SO_SNDBUFFORCE, SO_SNDBUF);
	if (!adopted && bind(ic->fd, (struct sockaddr *)&local, sizeof local) < 0) {
		rc = -errno;
		client_log(cfg, 0, "inc: cannot bind the data-plane socket: %s", inca_strerror(rc));
		return rc;
	}
	if (getsockname(ic->fd, (struct sockaddr *)&local, &sl) < 0)
		return -errno;
	/* GSO: segment k of a send gets IPv4 ID k (the queue says which), covered by its ICRC.
	 * GRO: results arrive as buffers of several packets, each checked on its own. */
	bool gso = false, gro = false;
	util_udp_offloads(ic->fd, cfg->udp_gso, cfg->udp_gro, &gso, &gro);
	struct util_udptx_opts to = { .max_pkts = INC_TX_MAX, .pkt_cap = WIRE_MAX_UDP_PAYLOAD,
				      .gso = gso, .reid = inc_reid, .reid_arg = ic };
	struct util_udprx_opts ro = { .batch = gro ? INC_RX_BATCH_GRO : INC_RX_BATCH,
				      .pkt_cap = INC_PKT_CAP, .gro = gro };
	rc = util_udptx_create(&to, &ic->txq);
	if (rc == 0)
		rc = util_udprx_create(&ro, &ic->rxb);
	if (rc < 0)
		return rc;
	ic->gro = gro;
	client_log(cfg, 2, "inc: UDP GSO %s, UDP GRO %s", gso ? "on" : "off", gro ? "on" : "off");

	ic->tx_ip.src_ip = ntohl(local.sin_addr.s_addr);
	ic->tx_ip.src_port = ntohs(local.sin_port);
	ic->tx_ip.dst_ip = ntohl(cfg->switch_sa.sin_addr.s_addr);
	ic->tx_ip.dst_port = ntohs(cfg->switch_sa.sin_port);
	ic->rx_ip.src_ip = ic->tx_ip.dst_ip;
	ic->rx_ip.src_port = ic->tx_ip.dst_port;
	ic->rx_ip.dst_ip = ic->tx_ip.src_ip;
	ic->rx_ip.dst_port = ic->tx_ip.src_port;

	ic->bits_len = wire_bsl_bytes(cfg->bsl_code);
	ic->own_bp = wire_bier_bp(cfg->bfr_id, cfg->bsl_bits, cfg->si);
	if (!ic->bits_len || !ic->own_bp)
		return -EINVAL;
	wire_bier_set(ic->bits, ic->bits_len, ic->own_bp);
	if (cfg->auth) {
		rc = wire_mac_new(&ic->mac, cfg->auth_key);
		if (rc < 0)
			return rc;
		ic->auth_ctr = wire_auth_ctr_start();
	}
	util_rng_seed(&ic->rng, cfg->seed);
	ic->wnd_cap = cfg->window && cfg->window < cfg->nslots ? cfg->window : cfg->nslots;
	ic->cwnd = INC_WND_INIT < ic->wnd_cap ? INC_WND_INIT : ic->wnd_cap;
	ic->slow_start = true;
	ic->reo_mult = 1;
	return 0;
}

void client_inc_close(struct inca_comm *c)
{
	struct client_inc *ic = c->inc;

	if (!ic)
		return;
	if (ic->fd >= 0)
		close(ic->fd);
	free(ic->chunks);
	free(ic->rack);
	wire_mac_free(ic->mac);
	util_udptx_destroy(ic->txq);
	util_udprx_destroy(ic->rxb);
	free(ic->probe_data);
	free(ic->probe_j);
	free(ic);
	c->inc = NULL;
}

/* Encode chunk ch into the transmit queue (the caller checked there is room) and arm its
 * timer. A fault-injected drop consumes the PSN and arms the timer like a real loss. */
int inc_enqueue(struct inca_comm *c, const struct inc_job *j, struct inc_chunk *ch, bool retx,
		       uint64_t now_ns)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;
	struct wire_pkt pkt;
	int len;

	memset(&pkt, 0, sizeof pkt);
	pkt.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
	pkt.bth.pkey = WIRE_PKEY_DEFAULT;
	pkt.bth.dest_qp = cfg->switch_qpn;
	pkt.bth.psn = ic->psn;
	ic->psn = (ic->psn + 1) & 0xFFFFFFu;
	pkt.reth.va = ch->off_bytes;
	pkt.reth.rkey = cfg->key;
	pkt.imm = (uint32_t)ch->g;
	pkt.inca.version = WIRE_INCA_VERSION;
	pkt.inca.flags = retx ? WIRE_F_RETX : 0;
	pkt.inca.coll = j->a->coll;
	pkt.inca.owner = ch->owner;
	pkt.inca.dtype = (uint8_t)j->dt;
	pkt.inca.op = (uint8_t)j->op;
	pkt.inca.tree_id = cfg->tree_id;
	pkt.inca.slot = (uint16_t)(ch->g % cfg->nslots);
	pkt.inca.round = inc_round(c, ch->g);
	pkt.inca.bfr_id = cfg->bfr_id;
	pkt.inca.bsl_code = cfg->bsl_code;
	pkt.inca.si = cfg->si;
	pkt.inca.count = ch->send_data ? ch->count : 0;
	pkt.inca.bits = ic->bits;
	pkt.data = ch->send_data ? ch->src : NULL;
	pkt.data_len = ch->send_data ? ch->len_bytes : 0;
	if (cfg->auth) {
		pkt.inca.flags |= WIRE_F_AUTH;
		pkt.inca.epoch = c->epoch;
		pkt.auth.key_id = cfg->auth_key_id;
		pkt.auth.ctx = cfg->bfr_id;
		pkt.auth.ctr = ic->auth_ctr++;
		len = wire_mac_sign(ic->mac, &pkt);
		if (len < 0)
			return len;
		ic->auth_st.tx_signed++;
	}

	ch->xmit_ns = now_ns;
	ch->tx_seq = ++ic->tx_seq;
	if (retx) {
		ch->retx = true;
		c->stats.retransmits++;
		/* Loss detection looks at this resend again after the repair round trip even if
		 * nothing arrives meanwhile (inc_detect_losses). */
		uint64_t rep = repair_wait_ns(ic, ch);
		if (rep && (!ic->rack_timer_ns || now_ns + rep < ic->rack_timer_ns))
			ic->rack_timer_ns = now_ns + rep;
	}
	if (inject_drop(c))
		return 0;
	/* The queue packs packets of one slot block (docs/protocol.md §8) into a GSO send and
	 * says which IPv4 ID the kernel will give this one: the ICRC covers it. The data goes
	 * by reference where the job allows it (inc_job.tx_ref); the queue is flushed or
	 * cleared before the call returns. The probe's data is ic->probe_data or the call's. */
	struct wire_ipinfo ip = ic->tx_ip;
	size_t want = wire_pkt_udp_len(&pkt);
	uint32_t tag = pkt.inca.slot / WIRE_SLOT_BLOCK;
	bool ref = pkt.data_len && (j->tx_ref || pkt.data == ic->probe_data);
	uint8_t *buf = ref ? util_udptx_add_ref(ic->txq, &cfg->switch_sa, 0, tag, want,
						wire_pkt_data_off(&pkt), pkt.data, pkt.data_len,
						&ip.ip_id)
			   : util_udptx_add(ic->txq, &cfg->switch_sa, 0, tag, want, &ip.ip_id);
	if (!buf)
		return -ENOBUFS; /* callers check tx_full first */
	len = ref ? wire_encode_udp_nodata(buf, want, &pkt, &ip, NULL)
		  : wire_encode_udp(buf, want, &pkt, &ip);
	if (len < 0 || (size_t)len != want) {
		util_udptx_cancel_last(ic->txq);
		return len < 0 ? len : -EPROTO;
	}
	return 0;
}

/* Send what the queue holds. Returns 0 (possibly with packets left on EAGAIN) or -errno for
 * errors that retransmission cannot fix. */
static int inc_flush(struct inca_comm *c)
{
	struct client_inc *ic = c->inc;
	const struct util_udptx_stats *st = util_udptx_stats(ic->txq);
	uint64_t pkts = st->pkts, bytes = st->bytes, errs = st->errors;
	bool gso = util_udptx_gso(ic->txq);

	if (!util_udptx_queued(ic->txq))
		return 0;
	/* -EAGAIN: the socket is full, the rest stays queued for the next pass. Other send
	 * errors (ENOBUFS, EPERM from a firewall, unreachable...) lose the packets concerned;
	 * their timers resend them. */
	int rc = util_udptx_flush(ic->txq, ic->fd, MSG_DONTWAIT);
	c->stats.tx_pkts += st->pkts - pkts;
	c->stats.tx_bytes += st->bytes - bytes;
	if (st->errors != errs)
		client_log(&c->cfg, 3, "inc: %llu packets not sent, treated as loss",
			   (unsigned long long)(st->errors - errs));
	if (gso && !util_udptx_gso(ic->txq))
		client_log(&c->cfg, 1, "inc: the kernel refused a UDP GSO send; sending packets one by one");
	if (rc == -EMSGSIZE) {
		client_log(&c->cfg, 0, "inc: packet exceeds the path MTU (mtu option %u)", c->cfg.mtu);
		return -EMSGSIZE;
	}
	return 0;
}

static int inc_fail(struct inca_comm *c, int rc)
{
	c->inc_broken = true;
	util_udptx_clear(c->inc->txq);
	for (unsigned s = 0; s < c->cfg.nslots; s++)
		c->inc->chunks[s].active = false;
	c->inc->inflight = 0;
	c->inc->nacked = 0;
	c->inc->probe_ok = false; /* the switch's state is unknown now */
	client_log(&c->cfg, 0, "inc: %s; INC path disabled for this communicator", inca_strerror(rc));
	return rc;
}

/* Can chunk j->next_i start? Chunks start strictly in order of g, and only while the window
 * has room and the chunk's slot is free (its previous chunk, nslots earlier, was answered).
 *
 * Why strictly in order: the switch completes a chunk only when every member sent it. If one
 * member's window were full of chunks that wait for others, and those others' windows full of
 * chunks that wait for the first one, nothing would ever complete. In g order this cannot
 * happen: the lowest unfinished chunk is in every member's window or next in line. */
static bool inc_can_start(const struct client_inc *ic, const struct client_cfg *cfg, const struct inc_job *j)
{
	return j->next_i < j->nchunks && ic->inflight < (unsigned)ic->cwnd &&
	       !ic->chunks[(j->base_g + j->next_i) % cfg->nslots].active;
}

/* Start chunk j->next_i (the caller checked inc_can_start and queue room). */
static int inc_start(struct inca_comm *c, struct inc_job *j, uint64_t now_ns)
{
	const struct client_inc_coll *a = j->a;
	/* Chunks go round-robin over the blocks (chunk i: block i % nblocks), so with one owner
	 * per block every owner sends at once and every link stays busy: block by block, each
	 * rank's downlink would idle while its own block passes (allgather: n·b/B instead of
	 * (n−1)·b/B). */
	uint64_t i = j->next_i++, blk = i % j->nblocks, in_blk = (i / j->nblocks) * j->chunk_bytes;
	uint64_t off = blk * j->block_bytes + in_blk;
	struct inc_chunk *ch = &c->inc->chunks[(j->base_g + i) % c->cfg.nslots];
	int rc;

	ch->g = j->base_g + i;
	ch->off_bytes = off;
	ch->len_bytes = (uint32_t)(j->block_bytes - in_blk < j->chunk_bytes ? j->block_bytes - in_blk
									  : j->chunk_bytes);
	ch->count = (uint16_t)(ch->len_bytes / j->elem);
	/* Owner and data directions per docs/protocol.md §4.1. */
	int owner = a->owner_rank >= 0 ? a->owner_rank : (int)blk;
	bool mine = owner == c->cfg.rank;
	switch (a->coll) {
	case WIRE_COLL_REDUCE:
	case WIRE_COLL_REDUCE_SCATTER:
		ch->owner = a->bfr_of_rank[owner];
		ch->send_data = true;
		ch->recv_data = mine;
		break;
	case WIRE_COLL_BCAST:
	case WIRE_COLL_ALLGATHER:
		ch->owner = a->bfr_of_rank[owner];
		ch->send_data = mine;
		ch->recv_data = !mine;
		break;
	default:
		ch->owner = 0;
		ch->send_data = ch->recv_data = true;
		break;
	}
	ch->src = a->src ? a->src + (a->src_block_local ? in_blk : off) : NULL;
	ch->dst = a->dst ? a->dst + (a->dst_block_local ? in_blk : off) : NULL;
	if ((ch->send_data && !ch->src) || (ch->recv_data && !ch->dst))
		return -EINVAL;
	ch->ntimeouts = 0;
	ch->nrep = 0;
	ch->retx = ch->retx_fast = ch->retx_tail = ch->nacked = false;
	ch->sent_ns = now_ns;
	ch->active = true;
	c->inc->inflight++;
	rc = inc_enqueue(c, j, ch, false, now_ns);
	ch->first_seq = ch->tx_seq;
	return rc;
}
/* A peer rank is gone (c->peer_lost). The call can still complete only if every chunk already
 * has all contributions at the switch, and then the switch holds every result: a surviving
 * member that completed the call proves that, and the others must complete it too. So: a chunk
 * this rank has not even sent cannot complete anywhere (fail now); otherwise resend every chunk
 * in flight every INC_DRAIN_RESEND_NS (the switch answers a complete chunk's duplicate with its
 * result) and fail after CLIENT_PEER_GRACE_NS without a result. Returns 0 (keep going),
 * -ECONNRESET, or -errno of a send. */
#define INC_DRAIN_RESEND_NS (50ull * 1000 * 1000)
static int inc_drain(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns,
		     uint64_t *resent_ns)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;
	uint64_t last = ic->progress_ns > c->peer_lost_ns ? ic->progress_ns : c->peer_lost_ns;

	if (j->next_i < j->nchunks || now_ns >= last + CLIENT_PEER_GRACE_NS)
		return -ECONNRESET;
	if (*resent_ns && now_ns < *resent_ns + INC_DRAIN_RESEND_NS)
		return 0;
	for (unsigned s = 0; s < cfg->nslots; s++) {
		struct inc_chunk *ch = &ic->chunks[s];
		if (!ch->active)
			continue;
		if (tx_full(ic))
			return 0; /* the rest on the next pass */
		ch->retx_fast = false;
		int rc = inc_enqueue(c, j, ch, true, now_ns);
		if (rc < 0)
			return rc;
	}
	*resent_ns = now_ns;
	return 0;
}

/* Two limits on sending: the self-clocking rule per slot (chunk g+nslots only after chunk g's
 * result, so every member sends each slot's rounds in order, which is what the switch needs)
 * and the adaptive window (how many chunks are in flight at all). Chunks with answers that
 * overtake a lost one keep the window moving; the lost one is found by loss detection. */
int client_inc_allreduce(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
			 enum inca_dtype dt, enum inca_op op)
{
	struct client_inc_coll a = { .coll = WIRE_COLL_ALLREDUCE, .src = sendbuf, .dst = recvbuf,
				     .count = count, .dt = dt, .op = op, .owner_rank = 0 };
	return client_inc_coll(c, &a);
}

int client_inc_coll(struct inca_comm *c, const struct client_inc_coll *a)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;
	struct inc_job j = { .a = a, .dt = a->dt, .op = a->op, .elem = inca_dtype_size(a->dt) };
	uint64_t done = 0, rack_scanned = 0, drain_ns = 0;
	const bool tlp_ok = ic->rtt.have;
	int rc;

	if (!j.elem || (wire_coll_has_owner(a->coll) && !a->bfr_of_rank) ||
	    (a->owner_rank >= c->cfg.size))
		return -EINVAL;
	j.total_bytes = (uint64_t)a->count * j.elem;
	j.block_bytes = a->block_count ? (uint64_t)a->block_count * j.elem : j.total_bytes;
	if (j.block_bytes == 0 || j.total_bytes % j.block_bytes)
		return -EINVAL;
	j.chunk_bytes = wire_max_data_auth(cfg->mtu, j.elem, cfg->bsl_code, cfg->auth);
	if (j.chunk_bytes == 0)
		return -EINVAL;
	j.cpb = (j.block_bytes + j.chunk_bytes - 1) / j.chunk_bytes;
	j.nblocks = j.total_bytes / j.block_bytes;
	j.nchunks = j.nblocks * j.cpb;
	if (a->owner_rank < 0 && j.total_bytes / j.block_bytes != (uint64_t)c->cfg.size)
		return -EINVAL; /* one block per rank */
	/* g is never reused, even if this call fails: every member derives (slot, round)
	 * from g, so all of them must advance it identically. */
	j.base_g = ic->next_g;
	ic->next_g += j.nchunks;
	{
		const uint8_t *s = a->src, *d = a->dst;
		j.tx_ref = !s || !d || s + j.total_bytes <= d || d + j.total_bytes <= s;
	}
	util_udptx_clear(ic->txq);
	ic->inflight = 0;
	ic->backoff = 0;
	ic->tlp_done = false;
	ic->rack_timer_ns = 0;
	ic->nacked = 0;
	ic->rto_start_ns = util_now_ns();
	ic->progress_ns = ic->rto_start_ns;
	ic->silent_rtos = 0;

	for (;;) {
		uint64_t now = util_now_ns(), next_deadline;
		bool scanned;
		long got;

		/* 0. A peer rank is gone: complete only what the switch can still answer. */
		if (c->peer_lost) {
			rc = inc_drain(c, &j, now, &drain_ns);
			if (rc < 0)
				return inc_fail(c, rc);
		}

		/* 1. Repair notices from the switch, then loss detection when an answer moved
		 * the send time it vouches for. */
		if (ic->nacked) {
			rc = inc_resend_nacked(c, &j, now);
			if (rc < 0)
				return inc_fail(c, rc);
		}
		if (ic->rack_gen > rack_scanned || (ic->rack_timer_ns && now >= ic->rack_timer_ns)) {
			rc = inc_detect_losses(c, &j, now, &scanned);
			if (rc < 0)
				return inc_fail(c, rc);
			if (scanned)
				rack_scanned = ic->rack_gen;
		}

		/* 2. Silence: first the stall probe, then the RTO. A full queue postpones
		 * either to the next pass. */
		uint64_t probe_at = ic->rto_start_ns + pto_ns(ic, cfg, j.next_i >= j.nchunks);
		if (tlp_ok && !ic->tlp_done && ic->inflight > 0 && now >= probe_at && !tx_full(ic)) {
			rc = inc_probe(c, &j, now);
			if (rc < 0)
				return inc_fail(c, rc);
		}
		next_deadline = ic->rto_start_ns + rto_cur_ns(ic, cfg);
		if (ic->inflight > 0 && now >= next_deadline && !tx_full(ic)) {
			rc = inc_on_rto(c, &j, now);
			if (rc < 0)
				return inc_fail(c, rc);
			next_deadline = ic->rto_start_ns + rto_cur_ns(ic, cfg);
		}
		if (c->peer_lost && drain_ns + INC_DRAIN_RESEND_NS < next_deadline)
			next_deadline = drain_ns + INC_DRAIN_RESEND_NS;
		if (ic->rack_timer_ns && ic->rack_timer_ns < next_deadline)
			next_deadline = ic->rack_timer_ns;

		/* 3. New chunks, in order, as far as the window and the slots allow. */
		while (!c->peer_lost && inc_can_start(ic, cfg, &j) && !tx_full(ic)) {
			rc = inc_start(c, &j, now);
			if (rc < 0)
				return inc_fail(c, rc);
			if (j.next_i == j.nchunks)
				ic->rack_gen++; /* the tail: loss detection waits less (inc_detect_losses) */
		}

		/* Head of line: the next chunk's slot still holds the chunk nslots earlier,
		 * unanswered, and everything behind it waits. It goes again once per round trip
		 * (the switch answers a duplicate of a complete round with the result, one of a
		 * round still collecting with a notice to the members it misses) rather than after
		 * loss detection's longer wait or its backoff. */
		if (!c->peer_lost && ic->rtt.have && j.next_i < j.nchunks &&
		    ic->inflight < (unsigned)ic->cwnd) {
			struct inc_chunk *hol = &ic->chunks[(j.base_g + j.next_i) % cfg->nslots];
			uint64_t rtt = ic->rtt.srtt > ic->min_rtt_ns ? ic->rtt.srtt : ic->min_rtt_ns;
			uint64_t again = hol->xmit_ns + rtt;
			if (hol->active && now >= again && !tx_full(ic)) {
				hol->retx_fast = false;
				rc = inc_enqueue(c, &j, hol, true, now);
				if (rc < 0)
					return inc_fail(c, rc);
				again = now + rtt;
			}
			if (hol->active && again < next_deadline)
				next_deadline = again;
		}

		/* The stall probe is due only with chunks in flight, which a call's first pass
		 * starts just above. */
		if (tlp_ok && !ic->tlp_done && ic->inflight > 0 && probe_at < next_deadline)
			next_deadline = probe_at;

		/* 4. Transmit. */
		rc = inc_flush(c);
		if (rc < 0)
			return inc_fail(c, rc);

		/* 5. Wait for results, queue space or the RTO. */
		struct pollfd pf = { .fd = ic->fd, .events = POLLIN };
		if (tx_pending(ic))
			pf.events |= POLLOUT;
		now = util_now_ns();
		uint64_t wait_ns = next_deadline > now ? next_deadline - now : 0;
		if (wait_ns == 0 && tx_pending(ic))
			wait_ns = INC_QUEUE_WAIT_NS; /* timers are due but the queue is full */
		if (wait_ns > INC_MAX_WAIT_NS)
			wait_ns = INC_MAX_WAIT_NS;
		/* Work left that an empty queue allows: go round again at once instead. */
		bool more = !tx_pending(ic) &&
			    (inc_can_start(ic, cfg, &j) || ic->nacked ||
			     ic->rack_gen > rack_scanned);
		if (wait_ns && !more) {
			/* The peers' TCP connections too: a dead rank is noticed at once. */
			rc = client_wait_peers(c, &pf, 1, wait_ns);
			if (rc < 0)
				return inc_fail(c, rc);
		}

		/* 6. Receive. */
		got = inc_receive(c, &j);
		if (got < 0)
			return inc_fail(c, (int)got);
		done += (uint64_t)got;
		if (done == j.nchunks) {
			/* Stale retransmissions still queued are pointless now. */
			util_udptx_clear(ic->txq);
			/* The probe outlives the caller's buffers: keep its data. */
			if (ic->probe_ok && ic->probe_ch.send_data && ic->probe_ch.src != ic->probe_data) {
				memcpy(ic->probe_data, ic->probe_ch.src, ic->probe_ch.len_bytes);
				ic->probe_ch.src = ic->probe_data;
			}
			client_log(cfg, 3, "inc: %llu chunks; window %.1f%s, rtt min %llu srtt %llu us, reo x%u",
				   (unsigned long long)j.nchunks, ic->cwnd, ic->slow_start ? " (slow start)" : "",
				   (unsigned long long)(ic->min_rtt_ns / 1000),
				   (unsigned long long)(ic->rtt.srtt / 1000), ic->reo_mult);
			return 0;
		}
	}
}
