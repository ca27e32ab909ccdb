/* libinca INC data path: AllReduce through the aggregation switch over RoCEv2-in-UDP.
 * Chunking into slots (docs/protocol.md "Chunking and slots"), a self-clocked window of nslots
 * chunks, per-chunk retransmission with exponential backoff (draft-liu §7), batched
 * sendmmsg/recvmmsg, strict verification of every result, and test-only fault injection. */
#include "client/client.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "wire/wire.h"

#define INC_BATCH 64
/* Larger than any valid packet so an oversized datagram is seen whole and rejected. */
#define INC_PKT_CAP (WIRE_MAX_UDP_PAYLOAD + 64)
#define INC_SOCKBUF_BYTES (8 << 20)
#define INC_QUEUE_WAIT_NS (1000ull * 1000)
#define INC_MAX_WAIT_NS (100ull * 1000 * 1000) /* re-check timers at least this often */

/* One in-flight chunk; the table is indexed by slot (g % nslots), so a slot is busy exactly
 * while its chunk waits for a result: that is the self-clocking rule. */
struct inc_chunk {
	uint64_t g;
	uint64_t off_bytes;
	uint32_t len_bytes;
	uint16_t count;
	bool active;
	uint32_t ntimeouts;
	uint64_t rto_ns;
	uint64_t sent_ns; /* first transmission, for RTT samples */
	uint64_t deadline_ns;
	uint64_t next_idx; /* this call: the next chunk index that maps to this slot */
};

struct client_inc {
	int fd;
	struct wire_ipinfo tx_ip, rx_ip; /* what the ICRC covers, per direction */
	uint8_t bits[WIRE_BSL_MAX / 8];  /* our P-BM: only our own bit */
	size_t bits_len;
	unsigned own_bp;
	struct util_rng rng;
	uint64_t next_g;
	uint32_t psn;
	struct inc_chunk *chunks; /* nslots */
	/* Slots whose next chunk may start, FIFO (capacity nslots). */
	uint16_t *ready;
	unsigned ready_head, ready_n;
	/* RFC 6298 estimator over chunks answered without retransmission (Karn). */
	bool have_rtt;
	uint64_t srtt_ns, rttvar_ns;

	/* Transmit queue: [tx_head, tx_tail) encoded and waiting for sendmmsg. */
	unsigned tx_head, tx_tail;
	uint8_t *txbuf;
	struct mmsghdr txm[INC_BATCH];
	struct iovec txv[INC_BATCH];

	uint8_t *rxbuf;
	struct mmsghdr rxm[INC_BATCH];
	struct iovec rxv[INC_BATCH];
	struct sockaddr_in rxsa[INC_BATCH];
};

/* One call's parameters. */
struct inc_job {
	const uint8_t *src;
	uint8_t *dst;
	enum inca_dtype dt;
	enum inca_op op;
	size_t elem;
	uint64_t base_g, nchunks, chunk_bytes, total_bytes;
};

static void sockbuf(int fd, int force_opt, int opt)
{
	int v = INC_SOCKBUF_BYTES;

	/* FORCE works as root beyond rmem_max/wmem_max; otherwise take what the cap allows. */
	if (setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof v) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v);
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
	ic->ready = calloc(cfg->nslots, sizeof *ic->ready);
	ic->txbuf = malloc((size_t)INC_BATCH * INC_PKT_CAP);
	ic->rxbuf = malloc((size_t)INC_BATCH * INC_PKT_CAP);
	if (!ic->chunks || !ic->ready || !ic->txbuf || !ic->rxbuf)
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
	util_rng_seed(&ic->rng, cfg->seed);

	for (unsigned i = 0; i < INC_BATCH; i++) {
		ic->txv[i].iov_base = ic->txbuf + (size_t)i * INC_PKT_CAP;
		ic->txm[i].msg_hdr.msg_iov = &ic->txv[i];
		ic->txm[i].msg_hdr.msg_iovlen = 1;
		ic->txm[i].msg_hdr.msg_name = &c->cfg.switch_sa;
		ic->txm[i].msg_hdr.msg_namelen = sizeof c->cfg.switch_sa;
		ic->rxv[i].iov_base = ic->rxbuf + (size_t)i * INC_PKT_CAP;
		ic->rxv[i].iov_len = INC_PKT_CAP;
		ic->rxm[i].msg_hdr.msg_iov = &ic->rxv[i];
		ic->rxm[i].msg_hdr.msg_iovlen = 1;
	}
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
	free(ic->ready);
	free(ic->txbuf);
	free(ic->rxbuf);
	free(ic);
	c->inc = NULL;
}

static bool inject_drop(struct inca_comm *c)
{
	if (c->cfg.drop_rate <= 0.0 || util_rng_double(&c->inc->rng) >= c->cfg.drop_rate)
		return false;
	c->stats.injected_drops++;
	return true;
}

/* Encode chunk ch into the transmit queue (the caller checked there is room) and arm its
 * timer. A fault-injected drop consumes the PSN and arms the timer like a real loss. */
static int inc_enqueue(struct inca_comm *c, const struct inc_job *j, struct inc_chunk *ch, bool retx,
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
	pkt.inca.coll = WIRE_COLL_ALLREDUCE;
	pkt.inca.dtype = (uint8_t)j->dt;
	pkt.inca.op = (uint8_t)j->op;
	pkt.inca.tree_id = cfg->tree_id;
	pkt.inca.slot = (uint16_t)(ch->g % cfg->nslots);
	pkt.inca.round = (uint32_t)(ch->g / cfg->nslots);
	pkt.inca.bfr_id = cfg->bfr_id;
	pkt.inca.bsl_code = cfg->bsl_code;
	pkt.inca.si = cfg->si;
	pkt.inca.count = ch->count;
	pkt.inca.bits = ic->bits;
	pkt.data = j->src + ch->off_bytes;
	pkt.data_len = ch->len_bytes;

	ch->deadline_ns = now_ns + ch->rto_ns;
	if (retx)
		c->stats.retransmits++;
	if (inject_drop(c))
		return 0;
	len = wire_encode_udp(ic->txv[ic->tx_tail].iov_base, INC_PKT_CAP, &pkt, &ic->tx_ip);
	if (len < 0)
		return len;
	ic->txv[ic->tx_tail].iov_len = (size_t)len;
	ic->tx_tail++;
	return 0;
}

/* Send what the queue holds. Returns 0 (possibly with packets left on EAGAIN) or -errno for
 * errors that retransmission cannot fix. */
static int inc_flush(struct inca_comm *c)
{
	struct client_inc *ic = c->inc;

	while (ic->tx_head < ic->tx_tail) {
		int n = sendmmsg(ic->fd, ic->txm + ic->tx_head, ic->tx_tail - ic->tx_head, MSG_DONTWAIT);
		if (n > 0) {
			for (int i = 0; i < n; i++)
				c->stats.tx_bytes += ic->txv[ic->tx_head + (unsigned)i].iov_len;
			c->stats.tx_pkts += (unsigned)n;
			ic->tx_head += (unsigned)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno == EMSGSIZE) {
			client_log(&c->cfg, 0, "inc: packet exceeds the path MTU (mtu option %u)", c->cfg.mtu);
			return -EMSGSIZE;
		}
		/* ENOBUFS, EPERM (firewall), unreachable...: the packet is lost; its timer
		 * will resend it. */
		client_log(&c->cfg, 3, "inc: send failed (%d), treated as loss", errno);
		ic->tx_head++;
	}
	ic->tx_head = ic->tx_tail = 0;
	return 0;
}

static bool tx_full(const struct client_inc *ic)
{
	return ic->tx_tail >= INC_BATCH;
}

static void ready_push(struct client_inc *ic, unsigned nslots, uint16_t slot)
{
	ic->ready[(ic->ready_head + ic->ready_n) % nslots] = slot;
	ic->ready_n++;
}

static void rtt_sample(struct client_inc *ic, uint64_t r_ns)
{
	if (!ic->have_rtt) {
		ic->srtt_ns = r_ns;
		ic->rttvar_ns = r_ns / 2;
		ic->have_rtt = true;
		return;
	}
	uint64_t d = ic->srtt_ns > r_ns ? ic->srtt_ns - r_ns : r_ns - ic->srtt_ns;
	ic->rttvar_ns = (3 * ic->rttvar_ns + d) / 4;
	ic->srtt_ns = (7 * ic->srtt_ns + r_ns) / 8;
}

/* Initial RTO of a chunk: rto_us, raised to SRTT + 4 RTTVAR when the path is slower
 * (queueing on rate-limited links, a busy software switch), never above rto_max_us.
 * Spurious retransmissions cost every member and the switch, so never go below rto_us. */
static uint64_t rto_initial_ns(const struct client_inc *ic, const struct client_cfg *cfg)
{
	uint64_t rto = (uint64_t)cfg->rto_us * 1000, max = (uint64_t)cfg->rto_max_us * 1000;

	if (ic->have_rtt && ic->srtt_ns + 4 * ic->rttvar_ns > rto)
		rto = ic->srtt_ns + 4 * ic->rttvar_ns;
	return rto < max ? rto : max;
}

/* Validate one received datagram against the in-flight table and place its data. Returns
 * 1 if it completed a chunk, 0 otherwise (counted as bad / duplicate). */
static int inc_rx_one(struct inca_comm *c, const struct inc_job *j, unsigned i, size_t len,
		      uint64_t now_ns)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;
	const struct sockaddr_in *from = &ic->rxsa[i];
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
	 * datagram. The destination is our bound concrete address; the IPv4 ID is 0. */
	if ((ic->rxm[i].msg_hdr.msg_flags & MSG_TRUNC) ||
	    ic->rxm[i].msg_hdr.msg_namelen != sizeof *from ||
	    from->sin_addr.s_addr != cfg->switch_sa.sin_addr.s_addr)
		goto bad;
	ipinfo = ic->rx_ip;
	ipinfo.src_port = ntohs(from->sin_port);
	err = wire_decode_udp(ic->rxv[i].iov_base, len, &pkt, &ipinfo);
	if (err != WIRE_OK) {
		client_log(cfg, 3, "inc: rx rejected: %s", wire_err_name(err));
		goto bad;
	}
	if (pkt.bth.dest_qp != cfg->qpn || !(pkt.inca.flags & WIRE_F_RESULT) ||
	    pkt.inca.coll != WIRE_COLL_ALLREDUCE || pkt.inca.tree_id != cfg->tree_id ||
	    pkt.reth.rkey != cfg->key || pkt.inca.bsl_code != cfg->bsl_code || pkt.inca.si != cfg->si ||
	    !wire_bier_test(pkt.inca.bits, ic->bits_len, ic->own_bp) || pkt.inca.slot >= cfg->nslots)
		goto bad;

	ch = &ic->chunks[pkt.inca.slot];
	if (!ch->active || pkt.inca.round != (uint32_t)(ch->g / cfg->nslots) ||
	    pkt.imm != (uint32_t)ch->g) {
		/* Self-consistent slot/round/imm of a chunk no longer in flight: a duplicate
		 * result (switch re-send, or the answer to one of our retransmissions). */
		if ((uint32_t)((uint64_t)pkt.inca.round * cfg->nslots + pkt.inca.slot) == pkt.imm) {
			c->stats.rx_dup_results++;
			return 0;
		}
		goto bad;
	}
	if (pkt.reth.va != ch->off_bytes || pkt.inca.count != ch->count ||
	    pkt.data_len != ch->len_bytes || pkt.inca.dtype != (uint8_t)j->dt ||
	    pkt.inca.op != (uint8_t)j->op)
		goto bad;
	memcpy(j->dst + ch->off_bytes, pkt.data, ch->len_bytes);
	ch->active = false;
	if (ch->ntimeouts == 0)
		rtt_sample(ic, now_ns - ch->sent_ns);
	if (ch->next_idx < j->nchunks)
		ready_push(ic, cfg->nslots, pkt.inca.slot);
	return 1;
bad:
	c->stats.rx_bad++;
	return 0;
}

/* Drain the socket; returns chunks completed or -errno. */
static long inc_receive(struct inca_comm *c, const struct inc_job *j)
{
	struct client_inc *ic = c->inc;
	long done = 0;

	/* Bounded so timers and sends get their turn under a flood. */
	for (int round = 0; round < 16; round++) {
		int n;

		for (unsigned i = 0; i < INC_BATCH; i++) {
			ic->rxm[i].msg_hdr.msg_name = &ic->rxsa[i];
			ic->rxm[i].msg_hdr.msg_namelen = sizeof ic->rxsa[i];
			ic->rxm[i].msg_hdr.msg_flags = 0;
		}
		n = recvmmsg(ic->fd, ic->rxm, INC_BATCH, MSG_DONTWAIT, NULL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return -errno;
		}
		uint64_t now = util_now_ns();
		for (int i = 0; i < n; i++)
			done += inc_rx_one(c, j, (unsigned)i, ic->rxm[i].msg_len, now);
		if (n < INC_BATCH)
			break;
	}
	return done;
}

static int inc_fail(struct inca_comm *c, int rc)
{
	c->inc_broken = true;
	c->inc->tx_head = c->inc->tx_tail = 0;
	for (unsigned s = 0; s < c->cfg.nslots; s++)
		c->inc->chunks[s].active = false;
	client_log(&c->cfg, 0, "inc: %s; INC path disabled for this communicator", inca_strerror(rc));
	return rc;
}

/* Start the next chunk of a free slot (the caller checked queue room). */
static int inc_start(struct inca_comm *c, const struct inc_job *j, uint16_t slot, uint64_t now_ns)
{
	struct inc_chunk *ch = &c->inc->chunks[slot];
	uint64_t i = ch->next_idx, off = i * j->chunk_bytes;

	ch->g = j->base_g + i;
	ch->off_bytes = off;
	ch->len_bytes = (uint32_t)(j->total_bytes - off < j->chunk_bytes ? j->total_bytes - off : j->chunk_bytes);
	ch->count = (uint16_t)(ch->len_bytes / j->elem);
	ch->ntimeouts = 0;
	ch->rto_ns = rto_initial_ns(c->inc, &c->cfg);
	ch->sent_ns = now_ns;
	ch->active = true;
	ch->next_idx = i + c->cfg.nslots;
	return inc_enqueue(c, j, ch, false, now_ns);
}

/* The window is per slot, not a sliding range of g: chunk g+nslots waits only for chunk g
 * (same slot), so one lost packet stalls one slot's chain instead of the whole transfer.
 * Every member still sends each slot's rounds in order, which is all the switch needs. */
int client_inc_allreduce(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
			 enum inca_dtype dt, enum inca_op op)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;
	struct inc_job j = { .src = sendbuf, .dst = recvbuf, .dt = dt, .op = op, .elem = inca_dtype_size(dt) };
	const uint64_t rto_max_ns = (uint64_t)cfg->rto_max_us * 1000;
	uint64_t done = 0;
	int rc;

	j.total_bytes = (uint64_t)count * j.elem;
	j.chunk_bytes = wire_max_data(cfg->mtu, j.elem, cfg->bsl_code);
	if (j.chunk_bytes == 0)
		return -EINVAL;
	j.nchunks = (j.total_bytes + j.chunk_bytes - 1) / j.chunk_bytes;
	/* g is never reused, even if this call fails: every member derives (slot, round)
	 * from g, so all of them must advance it identically. */
	j.base_g = ic->next_g;
	ic->next_g += j.nchunks;
	ic->tx_head = ic->tx_tail = 0;
	ic->ready_head = ic->ready_n = 0;
	for (uint64_t i = 0; i < j.nchunks && i < cfg->nslots; i++) {
		uint16_t slot = (uint16_t)((j.base_g + i) % cfg->nslots);
		ic->chunks[slot].next_idx = i;
		ready_push(ic, cfg->nslots, slot);
	}

	for (;;) {
		uint64_t now = util_now_ns(), next_deadline = UINT64_MAX;
		long got;

		/* 1. Timers: resend expired chunks, fail after retx_limit timeouts of one. */
		for (unsigned s = 0; s < cfg->nslots; s++) {
			struct inc_chunk *ch = &ic->chunks[s];

			if (!ch->active)
				continue;
			if (ch->deadline_ns > now || tx_full(ic)) {
				/* A full queue postpones the expiry handling to the next pass. */
				if (ch->deadline_ns < next_deadline)
					next_deadline = ch->deadline_ns;
				continue;
			}
			c->stats.timeouts++;
			if (++ch->ntimeouts >= cfg->retx_limit) {
				client_log(cfg, 0, "inc: chunk g=%llu (slot %u) unanswered after %u timeouts",
					   (unsigned long long)ch->g, s, ch->ntimeouts);
				return inc_fail(c, -ETIMEDOUT);
			}
			ch->rto_ns = ch->rto_ns * 2 < rto_max_ns ? ch->rto_ns * 2 : rto_max_ns;
			rc = inc_enqueue(c, &j, ch, true, now);
			if (rc < 0)
				return inc_fail(c, rc);
			if (ch->deadline_ns < next_deadline)
				next_deadline = ch->deadline_ns;
		}

		/* 2. New chunks for slots whose previous chunk completed (self-clocking). */
		while (ic->ready_n > 0 && !tx_full(ic)) {
			uint16_t slot = ic->ready[ic->ready_head];

			ic->ready_head = (ic->ready_head + 1) % cfg->nslots;
			ic->ready_n--;
			rc = inc_start(c, &j, slot, now);
			if (rc < 0)
				return inc_fail(c, rc);
			if (ic->chunks[slot].deadline_ns < next_deadline)
				next_deadline = ic->chunks[slot].deadline_ns;
		}

		/* 3. Transmit. */
		rc = inc_flush(c);
		if (rc < 0)
			return inc_fail(c, rc);

		/* 4. Wait for results, queue space or the next timer. */
		struct pollfd pf = { .fd = ic->fd, .events = POLLIN };
		if (ic->tx_head < ic->tx_tail)
			pf.events |= POLLOUT;
		now = util_now_ns();
		uint64_t wait_ns = next_deadline > now ? next_deadline - now : 0;
		if (wait_ns == 0 && ic->tx_head < ic->tx_tail)
			wait_ns = INC_QUEUE_WAIT_NS; /* timers are due but the queue is full */
		if (wait_ns > INC_MAX_WAIT_NS)
			wait_ns = INC_MAX_WAIT_NS;
		/* Slots ready with an empty queue: go round again at once instead. */
		if (wait_ns && !(ic->ready_n > 0 && ic->tx_head == ic->tx_tail)) {
			struct timespec ts = { .tv_sec = (time_t)(wait_ns / 1000000000ull),
					       .tv_nsec = (long)(wait_ns % 1000000000ull) };
			if (ppoll(&pf, 1, &ts, NULL) < 0 && errno != EINTR)
				return inc_fail(c, -errno);
		}

		/* 5. Receive. */
		got = inc_receive(c, &j);
		if (got < 0)
			return inc_fail(c, (int)got);
		done += (uint64_t)got;
		if (done == j.nchunks) {
			/* Stale retransmissions still queued are pointless now. */
			ic->tx_head = ic->tx_tail = 0;
			return 0;
		}
	}
}
