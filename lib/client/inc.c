/* libinca INC data path: AllReduce through the aggregation switch over RoCEv2-in-UDP.
 * Chunking into slots (docs/protocol.md "Chunking and slots"), an adaptive window of chunks in
 * flight (slow start, AIMD on delay and loss) inside the per-slot self-clocking rule, loss
 * recovery (the switch's repair notices, time-ordered loss detection, a stall probe and an
 * RTO that follows the measured RTT with exponential backoff, draft-liu §7), batched socket I/O
 * through lib/util/udpio (UDP GSO sends and UDP_GRO receives where the kernel has them, plain
 * sendmmsg/recvmmsg where not), strict verification of every result, a liveness probe that
 * tells a silent switch from late peers, test-only fault injection. */
#include "client/client.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/udpio.h"
#include "wire/auth.h"
#include "wire/wire.h"

/* Packets queued for one flush: several GSO sends of up to 15 full chunks each. */
#define INC_TX_MAX 128
#define INC_REPLAY_CTXS 4 /* switch sender contexts with a replay window per communicator */
/* Buffers per recvmmsg: without GRO one packet each; with GRO each holds up to a GSO send. */
#define INC_RX_BATCH 64
#define INC_RX_BATCH_GRO 32
/* Larger than any valid packet so an oversized datagram is seen whole and rejected. */
#define INC_PKT_CAP (WIRE_MAX_UDP_PAYLOAD + 64)
#define INC_SOCKBUF_BYTES (8 << 20)
#define INC_QUEUE_WAIT_NS (1000ull * 1000)
#define INC_MAX_WAIT_NS (100ull * 1000 * 1000) /* re-check timers at least this often */

/* Window (chunks in flight per rank; lib/client/README.md "Window"). It starts small because
 * the path's bandwidth-delay product is unknown (a 250 Mbit/s fabric needs about 10 chunks, a
 * 1 Gbit/s one a few dozen), grows by slow start until the first congestion signal, then by
 * one chunk per window of results. The congestion signal is delay: a UC INC path has no ECN,
 * but a queue behind a slow link shows up at once as RTT above the path's minimum. */
#define INC_WND_INIT 16.0
/* Floor: loss detection needs later chunks in flight, and with fewer than a handful the
 * per-call latency (not the queue) dominates the RTT the delay signal sees. */
#define INC_WND_MIN 4.0
/* Queueing delay tolerated above the minimum RTT before the window shrinks: enough to ride
 * out CPU scheduling jitter of a software switch, far below any RTO. */
#define INC_QDELAY_TARGET_NS (3ull * 1000 * 1000)
#define INC_DELAY_BETA 0.5  /* decrease = BETA * (rtt - target) / rtt ... */
#define INC_MAX_MDF 0.5     /* ... but at most this fraction per round trip */
#define INC_LOSS_MDF 0.3    /* congestive loss (RTT above target when it happened) */
/* The minimum RTT forgets after this long, so a path that got slower (rebuilt tree, moved
 * job) does not look congested forever. */
#define INC_MINRTT_WIN_NS (10ull * 1000 * 1000 * 1000)
/* Reordering window of the loss detection: RFC 8985 uses min_rtt / 4; a floor keeps batch
 * sends (same timestamp) and the switch's batch processing from looking like reordering. */
#define INC_REO_MIN_NS (100ull * 1000)
#define INC_REO_MULT_MAX 16
#define INC_PTO_MIN_NS (500ull * 1000)
#define INC_PROBE_MAX 8 /* chunks resent by one stall probe */
/* Other-block rule of loss detection (struct client_inc): its window is at most
 * reo << INC_TAIL_SHIFT_MAX (reordering between switch workers: a service time). */
#define INC_TAIL_SHIFT_MAX 8

/* One in-flight chunk; the table is indexed by slot (g % nslots), so a slot is busy exactly
 * while its chunk waits for a result: that is the self-clocking rule. */
struct inc_chunk {
	uint64_t g;
	uint64_t off_bytes; /* in the call's aggregation space (RETH VA: equal on every rank) */
	uint32_t len_bytes;
	uint16_t count;
	uint16_t owner;     /* owner BFR-id (docs/protocol.md §4.1), 0 for allreduce */
	bool send_data;     /* our contribution carries data (else header-only) */
	bool recv_data;     /* we need the result's data (else a header-only result will do) */
	const uint8_t *src; /* where our data for this chunk is */
	uint8_t *dst;       /* where its result goes */
	bool active;
	bool retx;          /* sent more than once: no RTT sample (Karn) */
	bool retx_fast;     /* last resend came from loss detection, not the RTO */
	bool retx_tail;     /* ... by the other-block rule */
	bool nacked;        /* the switch noticed it misses our contribution: resend now */
	uint32_t ntimeouts; /* RTO expiries of this chunk (retx_limit) */
	uint32_t nfast;     /* resends by loss detection: each one doubles the next wait */
	uint64_t sent_ns;   /* first transmission, for RTT samples */
	uint64_t xmit_ns;   /* latest transmission, for loss detection */
	uint64_t tx_seq;    /* transmission number of the latest send (window epochs) */
	uint64_t first_seq; /* transmission number of the first send (loss detection) */
};

struct client_inc {
	int fd;
	/* Packet authentication (cfg->auth): MAC context, nonce counter of our packets (our
	 * context is our BFR-id), counters. */
	struct wire_mac *mac;
	uint64_t auth_ctr;
	struct inca_auth_stats auth_st;
	/* Anti-replay windows of the switch contexts we received authentic packets from (a
	 * root's, a leaf's: one in practice). Contexts beyond INC_REPLAY_CTXS are refused
	 * (rx_bad_ctx). */
	uint32_t replay_ctx[INC_REPLAY_CTXS];
	struct wire_replay replay[INC_REPLAY_CTXS];
	unsigned nreplay;
	struct wire_ipinfo tx_ip, rx_ip; /* what the ICRC covers, per direction */
	uint8_t bits[WIRE_BSL_MAX / 8];  /* our P-BM: only our own bit */
	size_t bits_len;
	unsigned own_bp;
	struct util_rng rng;
	uint64_t next_g;
	uint32_t psn;
	struct inc_chunk *chunks; /* nslots */
	/* RFC 6298 estimator over chunks answered without retransmission (Karn). */
	bool have_rtt;
	uint64_t srtt_ns, rttvar_ns;
	uint64_t min_rtt_ns, min_rtt_stamp_ns; /* windowed minimum (INC_MINRTT_WIN_NS) */

	/* Window. inflight counts active chunks; a new chunk starts only while
	 * inflight < (unsigned)cwnd. One decrease per round trip: signals from chunks sent
	 * before the last decrease (tx_seq <= cut_seq) do not cut again. */
	double cwnd, wnd_cap;
	bool slow_start;
	unsigned inflight;
	uint64_t tx_seq, cut_seq;

	/* Loss detection (RACK, RFC 8985): a chunk sent before the first send of some chunk
	 * that has already been answered is lost once it is overdue: answered chunk's RTT +
	 * reordering window after its own send. Order is evidence only where it holds: one
	 * switch worker serves a slot block (WIRE_SLOT_BLOCK slots) in arrival order and every
	 * member sends a block's chunks in the same order, but a switch with several workers
	 * (inca-switch --threads N) answers different blocks independently, a worker's answers can
	 * overtake another's by a whole service time, and the send queue groups packets by
	 * block. So an answer vouches only for chunks of its own block: rack[b]. The window is
	 * small (reordering within a block is rare), widened when a resend turns out spurious.
	 * Other-block rule: a chunk no later answer of its own block vouches for (the block's
	 * latest-started chunk has none until the block's next round, nslots chunks later; under
	 * heavy loss the later ones may be lost too) is vouched for by answers of any block
	 * (rack_all) after their RTT plus reo << tail_shift. tail_shift grows with
	 * every resend of this rule that the original answered (a result without RETX), however
	 * late. Without the rule a lost result of a block's last chunk waited for the window to
	 * drain and for the stall probe or the RTO. */
	struct inc_rack {
		uint64_t seq;     /* first_seq of the latest-sent answered chunk */
		uint64_t rtt_ns;  /* its round trip from that first send */
		uint64_t rseq;    /* tx_seq of the latest-sent resend answered (resends only) */
		uint64_t rrtt_ns; /* its round trip from that resend */
	} *rack, rack_all;    /* per slot block (nslots / WIRE_SLOT_BLOCK, rounded up); any block */
	unsigned nblk;
	uint64_t rack_gen;      /* bumped whenever some block's evidence moves: rescan */
	uint64_t rack_timer_ns; /* 0 or when the next overdue check is due */
	unsigned nacked;        /* chunks with `nacked` set (repair notices to act on) */
	unsigned reo_mult, reo_good;
	unsigned tail_shift, tail_good; /* other-block rule: its window << tail_shift */
	/* Stall probe (after RFC 8985 §7's tail loss probe): after ~2 SRTT without any answer,
	 * resend the oldest chunks in flight once (inc_probe), so a stall is repaired in about a
	 * round trip, not by the RTO. */
	bool tlp_done;

	/* RTO: one timer for the whole window, restarted by every result. While results
	 * arrive the path is alive and a chunk that is merely queued behind others must not
	 * be resent; loss detection finds real losses then. Only when nothing comes back for
	 * an RTO is the oldest chunk resent, with exponential backoff. */
	uint64_t rto_start_ns;
	unsigned backoff;

	/* Giving up. A chunk can be unanswered because the switch is gone or because a peer has
	 * not sent it yet (it entered the call later: on a loaded machine, seconds later). Only
	 * the first is a reason to leave the INC path after retx_limit RTOs; waiting for a peer
	 * is bounded like on the host path, by timeout_ms without progress. silent_rtos counts
	 * RTOs in a row during which nothing at all came from the switch; any valid packet from
	 * it, a duplicate result included, resets it. progress_ns: the call's latest result. */
	unsigned silent_rtos;
	uint64_t progress_ns;
	/* Liveness probe: on every RTO, besides the oldest chunk, resend our contribution to an
	 * ANSWERED chunk (the highest answered g). The switch still holds its result (a version is
	 * only reused two rounds later, and nobody can get there past our own unanswered chunks)
	 * and answers a duplicate of a complete version with the result again, so an alive switch
	 * answers the probe even while our current chunk waits for peers; a dead one does not.
	 * probe_ch is a copy of that chunk; between calls its data lives in probe_data (the
	 * caller's buffers are gone then). probe_a/probe_j carry the call's coll, dtype, op. */
	bool probe_ok;
	struct inc_chunk probe_ch;
	struct client_inc_coll probe_a;
	struct inc_job *probe_j;
	uint8_t *probe_data;

	/* Transmit queue: packets encoded and waiting for the next flush, packed into GSO sends
	 * where the socket allows (each packet's ICRC covers the IPv4 ID the queue promised). */
	struct util_udptx *txq;
	struct util_udprx *rxb;
	bool gro;
	uint64_t rx_syscalls, rx_bufs, rx_gro_bufs;
};

/* One call's parameters. The aggregation space of total_bytes is cut into blocks of
 * block_bytes (one block unless reduce-scatter / allgather) and every block into chunks, so a
 * chunk never straddles two blocks and has one owner. */
struct inc_job {
	const struct client_inc_coll *a;
	enum inca_dtype dt;
	enum inca_op op;
	size_t elem;
	uint64_t base_g, nchunks, chunk_bytes, total_bytes, block_bytes, cpb, nblocks;
	uint64_t next_i; /* the next chunk index to start: chunks start strictly in order */
};

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

static bool inject_drop(struct inca_comm *c)
{
	if (c->cfg.drop_rate <= 0.0 || util_rng_double(&c->inc->rng) >= c->cfg.drop_rate)
		return false;
	c->stats.injected_drops++;
	return true;
}

/* Round of chunk g on the wire (docs/protocol.md §8: the communicator's round base + g / S). */
static inline uint32_t inc_round(const struct inca_comm *c, uint64_t g)
{
	return c->round_base + (uint32_t)(g / c->cfg.nslots);
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
	}
	if (inject_drop(c))
		return 0;
	/* The queue packs packets of one slot block (docs/protocol.md §8) into a GSO send and
	 * says which IPv4 ID the kernel will give this one: the ICRC covers it. */
	struct wire_ipinfo ip = ic->tx_ip;
	size_t want = wire_pkt_udp_len(&pkt);
	uint8_t *buf = util_udptx_add(ic->txq, &cfg->switch_sa, 0, pkt.inca.slot / WIRE_SLOT_BLOCK,
				      want, &ip.ip_id);
	if (!buf)
		return -ENOBUFS; /* callers check tx_full first */
	len = wire_encode_udp(buf, want, &pkt, &ip);
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

static bool tx_full(const struct client_inc *ic)
{
	return util_udptx_queued(ic->txq) >= INC_TX_MAX;
}

static bool tx_pending(const struct client_inc *ic)
{
	return util_udptx_queued(ic->txq) > 0;
}

static void rtt_sample(struct client_inc *ic, uint64_t r_ns, uint64_t now_ns)
{
	if (!ic->have_rtt || r_ns < ic->min_rtt_ns || now_ns - ic->min_rtt_stamp_ns > INC_MINRTT_WIN_NS) {
		ic->min_rtt_ns = r_ns;
		ic->min_rtt_stamp_ns = now_ns;
	}
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

/* Base RTO: rto_us before the first RTT sample; then SRTT + 4 RTTVAR (RFC 6298) over the
 * samples Karn's rule admits, at least rto_min_us (the caller's rto_us if set, else 2 ms), at
 * most rto_max_us. The timer is restarted by every result, so the RTO has to cover the gap
 * between two results of a working path, not a chunk's wait behind the whole window; samples
 * include queueing, so a queued path gets a long RTO. A stall costs about one RTO of the path,
 * not a fixed 20 ms. */
static uint64_t rto_base_ns(const struct client_inc *ic, const struct client_cfg *cfg)
{
	uint64_t rto = (uint64_t)cfg->rto_us * 1000, max = (uint64_t)cfg->rto_max_us * 1000;

	if (ic->have_rtt) {
		uint64_t min = (uint64_t)cfg->rto_min_us * 1000;
		rto = ic->srtt_ns + 4 * ic->rttvar_ns;
		if (rto < min)
			rto = min;
	}
	return rto < max ? rto : max;
}

static uint64_t rto_cur_ns(const struct client_inc *ic, const struct client_cfg *cfg)
{
	uint64_t rto = rto_base_ns(ic, cfg), max = (uint64_t)cfg->rto_max_us * 1000;

	for (unsigned k = 0; k < ic->backoff && rto < max; k++)
		rto *= 2;
	return rto < max ? rto : max;
}

/* Queueing delay the window tolerates: the minimum RTT plus a fixed allowance, itself at least
 * one minimum RTT so that a slow path (large base RTT) is not starved. */
static uint64_t delay_target_ns(const struct client_inc *ic)
{
	uint64_t q = ic->min_rtt_ns > INC_QDELAY_TARGET_NS ? ic->min_rtt_ns : INC_QDELAY_TARGET_NS;

	return ic->min_rtt_ns + q;
}

/* Multiplicative decrease, at most once per round trip (seq: the signalling chunk's send). */
static void wnd_cut(struct client_inc *ic, uint64_t seq, double factor)
{
	if (seq <= ic->cut_seq)
		return;
	ic->slow_start = false;
	ic->cwnd *= factor;
	if (ic->cwnd < INC_WND_MIN)
		ic->cwnd = INC_WND_MIN;
	if (ic->cwnd > ic->wnd_cap)
		ic->cwnd = ic->wnd_cap;
	ic->cut_seq = ic->tx_seq;
}

/* A chunk answered without retransmission after r_ns: grow while the RTT is below the delay
 * target, shrink in proportion to the excess above it (TIMELY/Swift-like). Slow start ends at
 * the first sample above the target (it doubles per round trip, so waiting for the smoothed
 * RTT would overshoot badly); after that the smoothed RTT decides the decrease, so that one
 * descheduled process does not halve the window. */
static void wnd_on_result(struct client_inc *ic, uint64_t r_ns, uint64_t seq)
{
	uint64_t target = delay_target_ns(ic), sig = ic->slow_start ? r_ns : ic->srtt_ns;

	if (sig > target) {
		double f = 1.0 - INC_DELAY_BETA * (double)(sig - target) / (double)sig;
		wnd_cut(ic, seq, f > 1.0 - INC_MAX_MDF ? f : 1.0 - INC_MAX_MDF);
		return;
	}
	if (r_ns > target)
		return; /* no growth on a late sample */
	ic->cwnd += ic->slow_start ? 1.0 : 1.0 / ic->cwnd;
	if (ic->cwnd > ic->wnd_cap)
		ic->cwnd = ic->wnd_cap;
}

static uint64_t reo_wnd_ns(const struct client_inc *ic)
{
	uint64_t w = ic->min_rtt_ns / 4 * ic->reo_mult;

	if (w < INC_REO_MIN_NS)
		w = INC_REO_MIN_NS;
	if (ic->have_rtt && w > ic->srtt_ns && ic->srtt_ns > INC_REO_MIN_NS)
		w = ic->srtt_ns;
	return w;
}

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

	if (pkt->bth.dest_qp != cfg->qpn || !wire_pkey_match(pkt->bth.pkey, WIRE_PKEY_DEFAULT) ||
	    pkt->inca.coll != j->a->coll ||
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
	    pkt->imm != (uint32_t)ch->g || (ch->retx && now_ns - ch->xmit_ns < reo_wnd_ns(ic)))
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
	    !(pkt.inca.flags & WIRE_F_RESULT) ||
	    pkt.inca.coll != j->a->coll || pkt.inca.tree_id != cfg->tree_id ||
	    pkt.reth.rkey != cfg->key || pkt.inca.bsl_code != cfg->bsl_code || pkt.inca.si != cfg->si ||
	    !wire_bier_test(pkt.inca.bits, ic->bits_len, ic->own_bp) || pkt.inca.slot >= cfg->nslots)
		goto bad;

	ch = &ic->chunks[pkt.inca.slot];
	if (!ch->active || pkt.inca.round != inc_round(c, ch->g) ||
	    pkt.imm != (uint32_t)ch->g) {
		/* Self-consistent slot/round/imm of a chunk no longer in flight: a duplicate
		 * result (switch re-send, or the answer to one of our retransmissions). */
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
	if (pkt.reth.va != ch->off_bytes || pkt.inca.owner != ch->owner ||
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
	if (ch->recv_data)
		memcpy(ch->dst, pkt.data, ch->len_bytes);
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
		rtt_sample(ic, now_ns - ch->sent_ns, now_ns);
		wnd_on_result(ic, now_ns - ch->sent_ns, ch->tx_seq);
	}
	/* An answer vouches for every chunk of its slot block sent before this chunk's FIRST
	 * send: a block's results come back in send order, so those should have been answered
	 * already. Not for chunks sent before a resend: the answer may be to the original (in a
	 * tree, typically completed by another member's repair), and a whole queued window
	 * would be declared lost. */
	struct inc_rack *rk = &ic->rack[pkt.inca.slot / WIRE_SLOT_BLOCK];
	if (ch->first_seq > rk->seq) {
		rk->seq = ch->first_seq;
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
	if (ch->retx && now_ns - ch->xmit_ns >= ic->min_rtt_ns && ch->tx_seq > rk->rseq) {
		rk->rseq = ch->tx_seq;
		rk->rrtt_ns = now_ns - ch->xmit_ns;
		ic->rack_gen++;
	}
	if (ch->retx && ch->retx_fast && ch->retx_tail && !(pkt.inca.flags & WIRE_F_RETX)) {
		/* A result without RETX is the answer to the original contributions (a result the
		 * switch re-sends for a duplicate, or one a resend completed, carries RETX): the
		 * resend was not needed, however late this answer came. */
		if (ic->tail_shift < INC_TAIL_SHIFT_MAX) {
			ic->tail_shift++;
			ic->tail_good = 0;
		}
	} else if (ch->retx && now_ns - ch->xmit_ns < ic->min_rtt_ns && ch->retx_fast &&
	    !(pkt.inca.flags & WIRE_F_RETX)) {
		/* Answered faster than any round trip: the original was answered, the fast
		 * resend was spurious (results were reordered): widen the reordering window.
		 * Not if the result carries RETX: a result re-sent
		 * for our resend, or a round a peer's resend completed just after ours left, says
		 * nothing about reordering. */
		if (ch->retx_tail && ic->tail_shift < INC_TAIL_SHIFT_MAX) {
			ic->tail_shift++;
			ic->tail_good = 0;
		} else if (!ch->retx_tail && ic->reo_mult < INC_REO_MULT_MAX) {
			ic->reo_mult++;
			ic->reo_good = 0;
		}
	}
	if (ic->tail_shift > 0 && ++ic->tail_good >= 4096) {
		ic->tail_shift--;
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
static long inc_receive(struct inca_comm *c, const struct inc_job *j)
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
	ch->ntimeouts = ch->nfast = 0;
	ch->retx = ch->retx_fast = ch->retx_tail = ch->nacked = false;
	ch->sent_ns = now_ns;
	ch->active = true;
	c->inc->inflight++;
	rc = inc_enqueue(c, j, ch, false, now_ns);
	ch->first_seq = ch->tx_seq;
	return rc;
}

/* RACK: resend every chunk sent before the latest-sent answered one that is overdue (its
 * send + that chunk's RTT + the reordering window); arm rack_timer_ns for the others. *done is
 * false if the transmit queue filled up before the scan finished. 0 or -errno. */
static int inc_detect_losses(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns, bool *done)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;
	uint64_t reo = reo_wnd_ns(ic);
	uint64_t tail_wnd = reo;
	int rc;

	*done = false;
	ic->rack_timer_ns = 0;
	for (unsigned s = 0; s < cfg->nslots; s++) {
		struct inc_chunk *ch = &ic->chunks[s];
		const struct inc_rack *rk = &ic->rack[s / WIRE_SLOT_BLOCK];

		uint64_t wait;
		bool tail = false;
		if (!ch->active)
			continue;
		if (ch->tx_seq < rk->seq)
			wait = rk->rtt_ns + reo;
		else if (ch->retx && ch->tx_seq < rk->rseq)
			wait = rk->rrtt_ns + reo;
		else if (ch->first_seq < ic->rack_all.seq)
			wait = ic->rack_all.rtt_ns + (tail_wnd << ic->tail_shift), tail = true;
		else
			continue;
		/* A chunk still unanswered after a resend usually waits for another member's
		 * lost contribution (in a tree: for another leaf's repair), which this member's
		 * resends cannot speed up: back off instead of resending once per round trip. */
		uint64_t due = ch->xmit_ns + (wait << (ch->nfast < 5 ? ch->nfast : 5));
		if (due > now_ns) {
			if (!ic->rack_timer_ns || due < ic->rack_timer_ns)
				ic->rack_timer_ns = due;
			continue;
		}
		if (tx_full(ic))
			return 0;
		/* Random loss (fault injection, a flaky link) leaves the RTT alone and is no
		 * reason to slow down; loss together with a grown queue is congestion. */
		if (ic->srtt_ns > delay_target_ns(ic))
			wnd_cut(ic, ch->tx_seq, 1.0 - INC_LOSS_MDF);
		ch->retx_fast = true;
		ch->retx_tail = tail;
		ch->nfast++;
		rc = inc_enqueue(c, j, ch, true, now_ns);
		if (rc < 0)
			return rc;
	}
	*done = true;
	return 0;
}

/* Resend the chunks repair notices marked, as far as the transmit queue allows (the rest on
 * the next pass). 0 or -errno. */
static int inc_resend_nacked(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns)
{
	struct client_inc *ic = c->inc;

	for (unsigned s = 0; s < c->cfg.nslots && ic->nacked; s++) {
		struct inc_chunk *ch = &ic->chunks[s];

		if (!ch->nacked)
			continue;
		if (tx_full(ic))
			return 0;
		ch->nacked = false;
		ic->nacked--;
		if (!ch->active)
			continue;
		ch->retx_fast = false; /* certain loss: says nothing about reordering */
		int rc = inc_enqueue(c, j, ch, true, now_ns);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Probe timeout: twice the smoothed RTT (at least INC_PTO_MIN_NS), never beyond the RTO. */
static uint64_t pto_ns(const struct client_inc *ic, const struct client_cfg *cfg)
{
	uint64_t pto = 2 * ic->srtt_ns, rto = rto_base_ns(ic, cfg);

	if (pto < INC_PTO_MIN_NS)
		pto = INC_PTO_MIN_NS;
	return pto < rto ? pto : rto;
}

/* Stall probe, once per silence: resend the INC_PROBE_MAX oldest chunks in flight. Nothing
 * answered for two round trips means every chunk in flight waits for some repair, and loss
 * detection has nothing left to go on: our contribution or our result may be lost (the resend
 * repairs it), or another member's (our duplicate makes the switch notice that member). One
 * round of resends instead of one RTO per stuck chunk; the switch deduplicates. */
static int inc_probe(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;
	uint64_t lo = UINT64_MAX, end = j->base_g + j->next_i;
	unsigned sent = 0;

	ic->tlp_done = true;
	for (unsigned s = 0; s < cfg->nslots; s++) {
		const struct inc_chunk *ch = &ic->chunks[s];
		if (ch->active && ch->g < lo)
			lo = ch->g;
	}
	for (uint64_t g = lo; g < end && sent < INC_PROBE_MAX && !tx_full(ic); g++) {
		struct inc_chunk *ch = &ic->chunks[g % cfg->nslots];
		if (!ch->active || ch->g != g)
			continue;
		ch->retx_fast = false; /* an early answer means a stall, not reordering */
		int rc = inc_enqueue(c, j, ch, true, now_ns);
		if (rc < 0)
			return rc;
		sent++;
	}
	return 0;
}

/* RTO expiry: nothing was answered for a whole RTO. Resend only the oldest chunk (lowest g),
 * as TCP does: if the path merely stalled (a descheduled switch), the answers of the others
 * follow and nothing else is resent; if they were lost, the answer to this resend makes loss
 * detection find them at once. The same chunk stays the oldest, so a dead switch reaches
 * retx_limit after retx_limit RTOs, as before. */
static int inc_on_rto(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns)
{
	const struct client_cfg *cfg = &c->cfg;
	struct client_inc *ic = c->inc;
	struct inc_chunk *old = NULL;

	for (unsigned s = 0; s < cfg->nslots; s++) {
		struct inc_chunk *ch = &ic->chunks[s];
		if (ch->active && (!old || ch->g < old->g))
			old = ch;
	}
	if (!old)
		return 0;
	c->stats.timeouts++;
	/* The AM dismantled or rebuilt the tree under this call: no use waiting for the
	 * retransmission limit, the caller fails over to the host path now. */
	if (c->am && !client_am_tree_current(c)) {
		client_log(cfg, 1, "inc: tree changed by the AM mid-call");
		return -ETIMEDOUT;
	}
	++old->ntimeouts;
	/* Without an answered chunk on this communicator (its first call) there is no probe: a
	 * silent switch and peers that have not entered the call yet look the same, and start
	 * skew of seconds is common (one rank still loading data or filling a buffer). Then only
	 * the late-peer rule below applies: timeout_ms without progress. */
	if (++ic->silent_rtos >= cfg->retx_limit && ic->probe_ok) {
		client_log(cfg, 0, "inc: chunk g=%llu (slot %u) unanswered after %u timeouts, "
			   "switch silent", (unsigned long long)old->g,
			   (unsigned)(old->g % cfg->nslots), old->ntimeouts);
		return -ETIMEDOUT;
	}
	/* The switch answers (the probe, duplicates), but nothing completes: a peer is late
	 * or gone. Wait for it as long as the host path would (timeout_ms without progress),
	 * never less than before (retx_limit RTOs of this chunk). */
	if (old->ntimeouts >= cfg->retx_limit &&
	    now_ns - ic->progress_ns >= (uint64_t)cfg->timeout_ms * 1000000ull && !ic->probe_ok &&
	    !c->am) {
		/* Standalone, and the switch has answered nothing of this communicator: the
		 * commonest cause is a tree whose parameters differ from the switch's config,
		 * which the switch drops silently (counted per reason in its statistics). */
		client_log(cfg, 0, "inc: chunk g=%llu (slot %u) unanswered after %u timeouts and "
			   "none of this communicator's chunks ever answered: check that "
			   "the switch's config has tree %u with key 0x%x, qpn 0x%x, slots %u, "
			   "bsl %u and member %u (qpn 0x%x) at this host's address (switch drop "
			   "counters: unknown_tree, bad_qpn, unknown_sender, drop_key, drop_slot, "
			   "drop_bitmap)", (unsigned long long)old->g,
			   (unsigned)(old->g % cfg->nslots), old->ntimeouts, cfg->tree_id, cfg->key,
			   cfg->switch_qpn, cfg->nslots, cfg->bsl_bits, cfg->bfr_id, cfg->qpn);
		return -ETIMEDOUT;
	}
	if (old->ntimeouts >= cfg->retx_limit &&
	    now_ns - ic->progress_ns >= (uint64_t)cfg->timeout_ms * 1000000ull) {
		client_log(cfg, 0, "inc: chunk g=%llu (slot %u) unanswered after %u timeouts; the "
			   "switch answers, peers made no progress for %u ms",
			   (unsigned long long)old->g, (unsigned)(old->g % cfg->nslots),
			   old->ntimeouts, cfg->timeout_ms);
		return -ETIMEDOUT;
	}
	if (old->ntimeouts == cfg->retx_limit)
		client_log(cfg, 1, "inc: chunk g=%llu (slot %u): %u timeouts but the switch answers; "
			   "waiting for late peers", (unsigned long long)old->g,
			   (unsigned)(old->g % cfg->nslots), old->ntimeouts);
	ic->backoff++;
	ic->rto_start_ns = now_ns;
	ic->tlp_done = true; /* after an RTO, the backoff rules until something is answered */
	/* Random loss leaves the RTT alone and is no reason to slow down (as in loss
	 * detection); only a timeout with a grown queue is congestion. A small window would
	 * also starve loss detection and the switch's notices of the later answers they need. */
	if (ic->srtt_ns > delay_target_ns(ic))
		wnd_cut(ic, old->tx_seq, 0.5);
	old->retx_fast = false;
	int rc = inc_enqueue(c, j, old, true, now_ns);
	if (rc < 0 || !ic->probe_ok || tx_full(ic))
		return rc;
	return inc_enqueue(c, ic->probe_j, &ic->probe_ch, true, now_ns);
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
	const bool tlp_ok = ic->have_rtt;
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
		uint64_t probe_at = ic->rto_start_ns + pto_ns(ic, cfg);
		bool probe = tlp_ok && !ic->tlp_done && ic->inflight > 0;
		if (probe && now >= probe_at && !tx_full(ic)) {
			rc = inc_probe(c, &j, now);
			if (rc < 0)
				return inc_fail(c, rc);
			probe = false;
		}
		next_deadline = ic->rto_start_ns + rto_cur_ns(ic, cfg);
		if (ic->inflight > 0 && now >= next_deadline && !tx_full(ic)) {
			rc = inc_on_rto(c, &j, now);
			if (rc < 0)
				return inc_fail(c, rc);
			next_deadline = ic->rto_start_ns + rto_cur_ns(ic, cfg);
		}
		if (probe && probe_at < next_deadline)
			next_deadline = probe_at;
		if (c->peer_lost && drain_ns + INC_DRAIN_RESEND_NS < next_deadline)
			next_deadline = drain_ns + INC_DRAIN_RESEND_NS;
		if (ic->rack_timer_ns && ic->rack_timer_ns < next_deadline)
			next_deadline = ic->rack_timer_ns;

		/* 3. New chunks, in order, as far as the window and the slots allow. */
		while (!c->peer_lost && inc_can_start(ic, cfg, &j) && !tx_full(ic)) {
			rc = inc_start(c, &j, now);
			if (rc < 0)
				return inc_fail(c, rc);
		}

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
			rc = client_wait_peers(c, &pf, 1, wait_ns, c->wait_spin_ns);
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
				   (unsigned long long)(ic->srtt_ns / 1000), ic->reo_mult);
			return 0;
		}
	}
}
