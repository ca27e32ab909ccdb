/* Private to the INC data path (inc.c, inc_rx.c, inc_recover.c): the per-communicator INC
 * state, one call's job, the tuning constants, and the small helpers all three share. Nothing
 * here is used outside those files; the rest of libinca sees only client.h. */
#ifndef INCA_CLIENT_INC_INT_H
#define INCA_CLIENT_INC_INT_H

#include "client/client.h"

#include <stdbool.h>
#include <stdint.h>

#include "util/rtt.h"
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
/* Floor, the initial window: loss detection and the switch's repair notices need later chunks
 * in flight, and a member whose window collapsed holds up the whole group. Under 20 % loss
 * windows of 4 made one call in five several times slower (16 MiB: 220 ms mean, up to 400 ms
 * with one switch worker; 580 ms mean, up to 1.3 s with two); with 16, 220 / 260 ms and
 * 330 / 470 ms. 16 chunks are 64 KiB per member, 2 ms at 250 Mbit/s. */
#define INC_WND_MIN 16.0
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
/* Loss detection's tail (inc_detect_losses): every chunk started and at most this many in
 * flight. A call that fits the window starts all its chunks at once, and the tail must not
 * begin there (5 % loss, 1 MiB: 3.05-3.16 ms against 3.26-3.47, 15 % fewer resends). */
#define INC_TAIL_INFLIGHT 32
#define INC_REP_BACKOFF_MAX 6 /* repair-wait rule: at most 64x the repair wait */
#define INC_RTO_FLAT 8  /* answered timeouts of one chunk before the RTO doubles anyway */
/* Other-block rule of loss detection (struct client_inc): its window is at most this
 * (reordering between switch workers: a service time). */
#define INC_TAIL_ALLOW_MAX_NS (INC_REO_MIN_NS << 8)

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
	uint8_t nrep;       /* resends by the repair-wait rule, at most INC_REP_BACKOFF_MAX (its
			     * backoff, repair_wait_ns) */
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
	/* RFC 6298 estimator (lib/util/rtt.h, in ns) over chunks answered without
	 * retransmission (Karn). */
	struct util_rtt rtt;
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
	 * (rack_all) after their RTT plus a window: the larger of reo and tail_allow_ns.
	 * tail_allow_ns is measured: a resend of this rule that the original answered (a
	 * result without RETX) shows how much later than the rule expected that answer came,
	 * and the window grows to that lateness plus a quarter (with a multi-threaded switch,
	 * how far one worker's queue lags another's). Without the rule a lost result of a
	 * block's last chunk waited for the window to drain and for the stall probe or the
	 * RTO. */
	struct inc_rack {
		uint64_t seq;     /* first_seq of the latest-sent answered chunk */
		uint64_t sent_ns; /* that first send's time (chunks of its pass share it; per
				   * block only: rack_all leaves it 0) */
		uint64_t rtt_ns;  /* its round trip from that first send */
		uint64_t rseq;    /* tx_seq of the latest-sent resend answered (resends only) */
		uint64_t rrtt_ns; /* its round trip from that resend */
	} *rack, rack_all;    /* per slot block (nslots / WIRE_SLOT_BLOCK, rounded up); any block
			       * (rack_all.rrtt_ns: the round trip of the latest resend answered
			       * by a result with RETX, whatever its tx_seq: repair_wait_ns) */
	unsigned nblk;
	uint64_t rack_gen;      /* bumped whenever some block's evidence moves: rescan */
	uint64_t rack_timer_ns; /* 0 or when the next overdue check is due */
	unsigned nacked;        /* chunks with `nacked` set (repair notices to act on) */
	unsigned reo_mult, reo_good;
	uint64_t tail_allow_ns; /* other-block rule: its measured window (above) */
	unsigned tail_good;
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
	/* Data leaves from the source buffer by reference (no copy into the send queue): the
	 * call writes nowhere in it (src and dst apart). With src and dst overlapping (in
	 * place), a result could land on a resend's data while the resend waits in a full
	 * queue, so there the data is copied. */
	bool tx_ref;
};

static inline bool inject_drop(struct inca_comm *c)
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

static inline bool tx_full(const struct client_inc *ic)
{
	return util_udptx_queued(ic->txq) >= INC_TX_MAX;
}

static inline bool tx_pending(const struct client_inc *ic)
{
	return util_udptx_queued(ic->txq) > 0;
}

/* Base RTO: rto_us before the first RTT sample; then SRTT + 4 RTTVAR (RFC 6298) over the
 * samples Karn's rule admits, at least rto_min_us (the caller's rto_us if set, else 2 ms), at
 * most rto_max_us. The timer is restarted by every result, so the RTO has to cover the gap
 * between two results of a working path, not a chunk's wait behind the whole window; samples
 * include queueing, so a queued path gets a long RTO. A stall costs about one RTO of the path,
 * not a fixed 20 ms. */
static inline uint64_t rto_base_ns(const struct client_inc *ic, const struct client_cfg *cfg)
{
	return util_rtt_rto(&ic->rtt, (uint64_t)cfg->rto_us * 1000, (uint64_t)cfg->rto_min_us * 1000,
			    (uint64_t)cfg->rto_max_us * 1000);
}

static inline uint64_t rto_cur_ns(const struct client_inc *ic, const struct client_cfg *cfg)
{
	uint64_t rto = rto_base_ns(ic, cfg), max = (uint64_t)cfg->rto_max_us * 1000;

	for (unsigned k = 0; k < ic->backoff && rto < max; k++)
		rto *= 2;
	return rto < max ? rto : max;
}

/* Queueing delay the window tolerates: the minimum RTT plus a fixed allowance, itself at least
 * one minimum RTT so that a slow path (large base RTT) is not starved. */
static inline uint64_t delay_target_ns(const struct client_inc *ic)
{
	uint64_t q = ic->min_rtt_ns > INC_QDELAY_TARGET_NS ? ic->min_rtt_ns : INC_QDELAY_TARGET_NS;

	return ic->min_rtt_ns + q;
}

static inline uint64_t reo_wnd_ns(const struct client_inc *ic)
{
	uint64_t w = ic->min_rtt_ns / 4 * ic->reo_mult;

	if (w < INC_REO_MIN_NS)
		w = INC_REO_MIN_NS;
	if (ic->rtt.have && w > ic->rtt.srtt && ic->rtt.srtt > INC_REO_MIN_NS)
		w = ic->rtt.srtt;
	return w;
}

/* How long a resend may stay unanswered before it goes again: twice the repair round trip
 * (rack_all.rrtt_ns) plus the reordering window, doubled per resend of the chunk this rule
 * made already (ch NULL: none; at most INC_REP_BACKOFF_MAX doublings); 0 before any resend
 * was answered. The doubling matters where an answer waits for another member's repair: in
 * a tree whose members' RTO is 50 ms, an undoubled wait resent every stuck chunk every few
 * hundred microseconds (10-15x the retransmissions of 2% loss per link). */
static inline uint64_t repair_wait_ns(const struct client_inc *ic, const struct inc_chunk *ch)
{
	unsigned k = ch ? ch->nrep : 0; /* at most INC_REP_BACKOFF_MAX (inc_detect_losses) */

	return ic->rack_all.rrtt_ns ? (2 * ic->rack_all.rrtt_ns + reo_wnd_ns(ic)) << k : 0;
}

/* Probe timeout: twice the smoothed RTT (at least INC_PTO_MIN_NS), never beyond the RTO. In a
 * call's tail (tail: every chunk started) repair_wait_ns instead, if shorter: the queues have
 * drained there, and SRTT still holds the round trips of the loaded window. */
static inline uint64_t pto_ns(const struct client_inc *ic, const struct client_cfg *cfg, bool tail)
{
	uint64_t pto = 2 * ic->rtt.srtt, rto = rto_base_ns(ic, cfg), rep = repair_wait_ns(ic, NULL);

	if (tail && rep && rep < pto)
		pto = rep;

	if (pto < INC_PTO_MIN_NS)
		pto = INC_PTO_MIN_NS;
	return pto < rto ? pto : rto;
}

/* inc.c: the call loop and the transmit side. */
int inc_enqueue(struct inca_comm *c, const struct inc_job *j, struct inc_chunk *ch, bool retx,
		uint64_t now_ns);

/* inc_rx.c: receive, verify, place results. */
long inc_receive(struct inca_comm *c, const struct inc_job *j);

/* inc_recover.c: RTT estimator, window, loss recovery. */
void inc_rtt_sample(struct client_inc *ic, uint64_t r_ns, uint64_t now_ns);
void inc_wnd_cut(struct client_inc *ic, uint64_t seq, double factor);
void inc_wnd_on_result(struct client_inc *ic, uint64_t r_ns, uint64_t seq);
int inc_detect_losses(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns, bool *done);
int inc_resend_nacked(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns);
int inc_probe(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns);
int inc_on_rto(struct inca_comm *c, const struct inc_job *j, uint64_t now_ns);

#endif
