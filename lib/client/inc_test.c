/* Unit tests for the INC data path against an in-process fake switch thread on loopback:
 * an echo switch (one member: the result is the contribution) and the real lib/agg engine
 * (three members as threads). Faults on both sides: loss, duplicates, corruption, reordering,
 * a dead switch, a slow (paced) switch. The fake switch also checks the client's packets (ICRC,
 * fields, self-clocking rule) and counts the chunks a member has in flight (window).
 * Socket offloads: the client with UDP GSO/GRO on and off (INCA_UDP_GSO / INCA_UDP_GRO), the
 * fake switch receiving with or without UDP_GRO and answering with GSO sends or one by one. */
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

#include "agg/agg.h"
#include "client/client_test_util.h"
#include "util/udpio.h"
#include "util/util.h"
#include "wire/auth.h"
#include "wire/wire.h"

#define PORT_BASE 22000
#define MAXM 8
#define MAXSLOTS 64
#define HOLD 4
#define PACEQ 512      /* paced results waiting to go out */
#define MAXCHUNKS 4096 /* chunks tracked for the in-flight count (member 1) */

enum fsw_mode { FSW_ECHO, FSW_ENGINE };

struct fsw_cfg {
	enum fsw_mode mode;
	int nmembers;
	uint16_t nslots, tree_id;
	uint32_t key, switch_qpn;
	double drop;             /* incoming packets dropped at random */
	unsigned dup_every;      /* every Nth result is sent twice */
	unsigned corrupt_every;  /* every Nth result has a flipped data byte (ICRC fails) */
	bool reorder;            /* results are released in reverse order, HOLD at a time */
	bool dead;               /* receive and check, never answer */
	unsigned pace_us;        /* results leave one per pace_us (a slow link): a queue builds */
	bool gro;                /* receive with UDP_GRO (client GSO sends arrive whole) */
	bool gso;                /* results that go out at once are packed into GSO sends */
	bool nack;               /* echo: lose chunk 0's first copy and notice it (see below) */
	unsigned lose_once;      /* echo: lose the first copy of chunk lose_once - 1 (0: off) */
	unsigned lose_twice;     /* echo: lose the first two copies of chunk lose_twice - 1 */
	unsigned retx_delay_us;  /* echo: answer a retransmission only after this long */
	bool auth;               /* results signed under test_key (key id 1), the tree's epoch */
	unsigned other_epoch_every; /* auth: every Nth result is preceded by a validly signed
				     * copy of another job's epoch */
	unsigned forged_ctx_every;  /* auth: every Nth result is preceded by a forgery (bad tag)
				     * from a leaf context never seen before */
};

struct fsw {
	struct fsw_cfg cfg;
	int fd;
	struct sockaddr_in addr;
	pthread_t th;
	atomic_int stop;
	struct util_rng rng;
	struct agg_tree *tree;
	struct sockaddr_in member[MAXM + 1];
	int64_t answered[MAXM + 1][MAXSLOTS]; /* highest round whose result went to a member,
					       * relative to the communicator's round base */
	bool base_known;
	uint32_t round_base; /* learnt from the first contribution (round - imm / nslots) */
	uint32_t psn;
	unsigned nresults;
	uint8_t held[HOLD][WIRE_MAX_UDP_PAYLOAD];
	size_t held_len[HOLD];
	int held_to[HOLD], nheld;
	/* paced results: FIFO */
	uint8_t (*pq)[WIRE_MAX_UDP_PAYLOAD];
	size_t pq_len[PACEQ];
	int pq_to[PACEQ];
	unsigned pq_head, pq_n;
	uint64_t next_release_ns;
	/* member 1's chunks by imm: 1 received, 2 answered; in flight = received - answered */
	uint8_t chunk_state[MAXCHUNKS];
	/* results, read after join */
	unsigned long rx, bad, violations, tx;
	unsigned outstanding, max_outstanding;
	/* offloads: what the socket got, GRO buffers of several packets, packets whose ICRC did
	 * not hold for their index in the GRO buffer as IPv4 ID (accepted for another ID) */
	bool gso_on, gro_on;
	unsigned long rx_gro_bufs, id_guess_miss;
	struct util_udptx *txq;
	struct util_udprx *rxb;
	/* nack mode: chunk 0 lost once, chunk 1's result held until chunk 0 is repaired */
	struct wire_pkt lost0;
	uint8_t lost0_bits[8];
	bool have_lost0, repaired0;
	bool lost_once;
	unsigned lost_twice; /* copies of chunk lose_twice - 1 lost so far */
	struct wire_pkt held1;
	uint8_t held1_bits[8], held1_data[4096];
	bool have_held1;
	struct wire_mac *mac; /* auth */
	uint64_t auth_ctr;
};

static const uint8_t test_key[INCA_AUTH_KEY_BYTES] = { 0x42, 1, 2, 3, 4, 5, 6, 7, 8, 9 };

/* Sign a result as a root switch does (context 0x10000, one counter per packet). */
static void fsw_sign(struct fsw *s, struct wire_pkt *p, uint32_t epoch)
{
	p->inca.flags |= WIRE_F_AUTH;
	p->inca.epoch = epoch;
	p->auth.key_id = 1;
	p->auth.ctx = WIRE_AUTH_CTX_SWITCH | p->inca.bfr_id;
	p->auth.ctr = s->auth_ctr++;
	if (wire_mac_sign(s->mac, p) != 0)
		s->bad++;
}

static void fsw_note_sent(struct fsw *s, int bfr, const uint8_t *buf, size_t len)
{
	if (bfr == 1 && len >= 32) {
		/* ImmDt sits after BTH (12) and RETH (16) in the UDP payload. */
		uint32_t imm = (uint32_t)buf[28] << 24 | (uint32_t)buf[29] << 16 | (uint32_t)buf[30] << 8 | buf[31];
		if (imm < MAXCHUNKS && s->chunk_state[imm] == 1) {
			s->chunk_state[imm] = 2;
			s->outstanding--;
		}
	}
}

static void fsw_send_raw(struct fsw *s, int bfr, const uint8_t *buf, size_t len)
{
	fsw_note_sent(s, bfr, buf, len);
	if (sendto(s->fd, buf, len, 0, (struct sockaddr *)&s->member[bfr], sizeof s->member[bfr]) > 0)
		s->tx++;
}

/* Paced mode: release the results that are due. */
static void fsw_pace(struct fsw *s)
{
	uint64_t now = util_now_ns();

	while (s->pq_n > 0 && now >= s->next_release_ns) {
		fsw_send_raw(s, s->pq_to[s->pq_head], s->pq[s->pq_head], s->pq_len[s->pq_head]);
		s->pq_head = (s->pq_head + 1) % PACEQ;
		s->pq_n--;
		s->next_release_ns = (s->next_release_ns > now - 1000000 ? s->next_release_ns : now) +
				     s->cfg.pace_us * 1000ull;
	}
}

static void fsw_release(struct fsw *s)
{
	while (s->nheld > 0) {
		s->nheld--;
		fsw_send_raw(s, s->held_to[s->nheld], s->held[s->nheld], s->held_len[s->nheld]);
	}
}

static void fsw_emit(struct fsw *s, struct wire_pkt *p, int bfr)
{
	struct wire_ipinfo ip = {
		.src_ip = ntohl(s->addr.sin_addr.s_addr), .src_port = ntohs(s->addr.sin_port),
		.dst_ip = ntohl(s->member[bfr].sin_addr.s_addr), .dst_port = ntohs(s->member[bfr].sin_port),
	};
	uint8_t buf[WIRE_MAX_UDP_PAYLOAD];
	int len;

	/* A member not heard from yet has no address here (a real switch has it from its
	 * configuration): the engine's notices to a late member go nowhere. Encoded now and
	 * released later (reorder, pacing), they would reach it with an ICRC over the wrong
	 * destination. */
	if (!s->member[bfr].sin_port)
		return;
	p->bth.dest_qp = 0x1000u + (uint32_t)bfr;
	p->bth.psn = s->psn++ & 0xFFFFFF;
	if ((int64_t)(uint32_t)(p->inca.round - s->round_base) > s->answered[bfr][p->inca.slot])
		s->answered[bfr][p->inca.slot] = (uint32_t)(p->inca.round - s->round_base);
	if (!s->cfg.pace_us && !s->cfg.reorder) {
		/* At once, through the send queue (GSO sends if on): flushed after the batch. A
		 * second copy is a replay when signed (same counter). */
		int copies = s->cfg.dup_every && (s->nresults + 1) % s->cfg.dup_every == 0 ? 2 : 1;
		size_t want = wire_udp_payload_len(p->inca.bsl_code, p->data_len);
		if (s->cfg.auth) {
			uint32_t epoch = p->inca.epoch;
			want = wire_udp_payload_len_auth(p->inca.bsl_code, p->data_len, true);
			if (s->cfg.other_epoch_every &&
			    (s->nresults + 1) % s->cfg.other_epoch_every == 0) {
				uint8_t *q = util_udptx_add(s->txq, &s->member[bfr], 0,
							    p->inca.slot / WIRE_SLOT_BLOCK, want,
							    &ip.ip_id);
				fsw_sign(s, p, epoch - 1);
				if (!q || wire_encode_udp(q, want, p, &ip) != (int)want)
					s->bad++;
			}
			if (s->cfg.forged_ctx_every &&
			    (s->nresults + 1) % s->cfg.forged_ctx_every == 0) {
				struct wire_pkt f = *p;
				uint8_t *q = util_udptx_add(s->txq, &s->member[bfr], 0,
							    p->inca.slot / WIRE_SLOT_BLOCK, want,
							    &ip.ip_id);
				f.inca.bfr_id = (uint16_t)(100 + s->nresults % 1000);
				fsw_sign(s, &f, epoch);
				f.auth.tag[0] ^= 1;
				if (!q || wire_encode_udp(q, want, &f, &ip) != (int)want)
					s->bad++;
			}
			fsw_sign(s, p, epoch);
		}
		s->nresults++;
		for (int k = 0; k < copies; k++) {
			uint8_t *q = util_udptx_add(s->txq, &s->member[bfr], 0, p->inca.slot / WIRE_SLOT_BLOCK,
						    want, &ip.ip_id);
			if (!q || wire_encode_udp(q, want, p, &ip) != (int)want) {
				s->bad++; /* the queue is flushed after each packet in: never full */
				return;
			}
			if (s->cfg.corrupt_every && s->nresults % s->cfg.corrupt_every == 0)
				q[want - 6] ^= 0x40;
			fsw_note_sent(s, bfr, q, want);
		}
		return;
	}
	len = wire_encode_udp(buf, sizeof buf, p, &ip);
	if (len < 0) {
		s->bad++;
		return;
	}
	s->nresults++;
	if (s->cfg.corrupt_every && s->nresults % s->cfg.corrupt_every == 0)
		buf[len - 6] ^= 0x40;
	int copies = s->cfg.dup_every && s->nresults % s->cfg.dup_every == 0 ? 2 : 1;
	for (int k = 0; k < copies; k++) {
		if (s->cfg.pace_us) {
			unsigned t = (s->pq_head + s->pq_n) % PACEQ;
			if (s->pq_n == PACEQ)
				continue; /* queue full: tail drop */
			memcpy(s->pq[t], buf, (size_t)len);
			s->pq_len[t] = (size_t)len;
			s->pq_to[t] = bfr;
			if (s->pq_n++ == 0 && s->next_release_ns < util_now_ns())
				s->next_release_ns = util_now_ns() + s->cfg.pace_us * 1000ull;
		} else if (s->cfg.reorder) {
			memcpy(s->held[s->nheld], buf, (size_t)len);
			s->held_len[s->nheld] = (size_t)len;
			s->held_to[s->nheld++] = bfr;
			if (s->nheld == HOLD)
				fsw_release(s);
		} else {
			fsw_send_raw(s, bfr, buf, (size_t)len);
		}
	}
}

/* A header-only repair notice for chunk `hdr` to member bfr, naming the bit `bp`. */
static void fsw_send_nack(struct fsw *s, const struct wire_pkt *hdr, int bfr, unsigned bp)
{
	struct wire_pkt n = *hdr;
	uint8_t bits[8] = { 0 };

	wire_bier_set(bits, sizeof bits, bp);
	n.inca.flags = WIRE_F_NACK;
	n.inca.bfr_id = 0;
	n.inca.count = 0;
	n.inca.bits = bits;
	n.data = NULL;
	n.data_len = 0;
	fsw_emit(s, &n, bfr);
}

/* Nack mode (one member, echo): the first copy of chunk 0 is lost. Chunk 1 arriving proves it
 * (a member sends in g order), so the switch sends a notice for chunk 0, first one naming
 * another member (must be ignored), then the right one, and holds chunk 1's result until
 * chunk 0 is repaired: no result comes back before the repair, so the member has nothing
 * but the notice to go on (no loss detection, no tail probe on a first call, a long RTO).
 * After the repair, a late duplicate notice for the answered chunk 0. Returns true if the
 * packet was consumed here. */
static bool fsw_nack_input(struct fsw *s, struct wire_pkt *p, int bfr)
{
	if (p->imm == 0 && !s->have_lost0) {
		s->lost0 = *p;
		memcpy(s->lost0_bits, p->inca.bits, 8);
		s->lost0.inca.bits = s->lost0_bits;
		s->have_lost0 = true;
		return true;
	}
	if (p->imm == 1 && s->have_lost0 && !s->repaired0) {
		if (!s->have_held1) {
			s->held1 = *p;
			memcpy(s->held1_bits, p->inca.bits, 8);
			memcpy(s->held1_data, p->data, p->data_len);
			s->held1.inca.bits = s->held1_bits;
			s->held1.data = s->held1_data;
			s->held1.inca.flags = WIRE_F_RESULT;
			s->held1.inca.bfr_id = 0;
			s->have_held1 = true;
			fsw_send_nack(s, &s->lost0, bfr, wire_bier_bp(2, 64, 0)); /* not for us */
			fsw_send_nack(s, &s->lost0, bfr, wire_bier_bp((uint16_t)bfr, 64, 0));
		}
		return true;
	}
	if (p->imm == 0 && s->have_held1 && !s->repaired0) {
		s->repaired0 = true;
		p->inca.flags = WIRE_F_RESULT;
		p->inca.bfr_id = 0;
		fsw_emit(s, p, bfr);
		fsw_emit(s, &s->held1, bfr);
		fsw_send_nack(s, &s->lost0, bfr, wire_bier_bp((uint16_t)bfr, 64, 0)); /* stale */
		return true;
	}
	return false;
}

static void fsw_input(struct fsw *s, const uint8_t *buf, size_t len, const struct sockaddr_in *from,
		      uint16_t seg)
{
	struct wire_ipinfo ip = {
		.src_ip = ntohl(from->sin_addr.s_addr), .src_port = ntohs(from->sin_port),
		.dst_ip = ntohl(s->addr.sin_addr.s_addr), .dst_port = ntohs(s->addr.sin_port),
		.ip_id = seg,
	};
	struct wire_pkt p;
	uint8_t own[8] = { 0 };
	int bfr;

	s->rx++;
	if (s->cfg.drop > 0 && util_rng_double(&s->rng) < s->cfg.drop)
		return;
	/* A UDP socket does not show the IPv4 ID. First strictly: the ID the packet's index in
	 * its GRO buffer says (right for every segment of a GSO send that arrives whole), then
	 * any ID a GSO send can give (the kernel cut the send into datagrams before us). */
	if (wire_decode_udp(buf, len, &p, &ip) != WIRE_OK) {
		ip.id_unseen = true;
		if (wire_decode_udp(buf, len, &p, &ip) != WIRE_OK) {
			s->bad++;
			return;
		}
		s->id_guess_miss++;
	}
	bfr = p.inca.bfr_id;
	if (bfr < 1 || bfr > s->cfg.nmembers) {
		s->bad++;
		return;
	}
	wire_bier_set(own, sizeof own, wire_bier_bp((uint16_t)bfr, 64, 0));
	if (!s->base_known) {
		s->round_base = p.inca.round - p.imm / s->cfg.nslots;
		s->base_known = true;
	}
	if ((p.inca.flags & WIRE_F_RESULT) || p.bth.dest_qp != s->cfg.switch_qpn ||
	    p.inca.coll != WIRE_COLL_ALLREDUCE || p.inca.bsl_code != 1 || memcmp(p.inca.bits, own, 8) ||
	    p.reth.rkey != s->cfg.key || p.inca.tree_id != s->cfg.tree_id ||
	    p.inca.slot != p.imm % s->cfg.nslots ||
	    p.inca.round - s->round_base != p.imm / s->cfg.nslots) {
		s->bad++;
		return;
	}
	s->member[bfr] = *from;
	if (bfr == 1 && p.imm < MAXCHUNKS && s->chunk_state[p.imm] == 0) {
		s->chunk_state[p.imm] = 1;
		if (++s->outstanding > s->max_outstanding)
			s->max_outstanding = s->outstanding;
	}
	/* Self-clocking: round r of a slot only after the result of round r-1 went out. */
	if ((int64_t)(uint32_t)(p.inca.round - s->round_base) > s->answered[bfr][p.inca.slot] + 1)
		s->violations++;
	if (s->cfg.dead)
		return;
	if (s->cfg.lose_once && p.imm == s->cfg.lose_once - 1 && !s->lost_once) {
		s->lost_once = true;
		return;
	}
	if (s->cfg.lose_twice && p.imm == s->cfg.lose_twice - 1 && s->lost_twice < 2) {
		s->lost_twice++;
		return;
	}
	if (s->cfg.nack && fsw_nack_input(s, &p, bfr))
		return;
	if (s->cfg.retx_delay_us && (p.inca.flags & WIRE_F_RETX)) {
		struct timespec ts = { s->cfg.retx_delay_us / 1000000,
				       (long)(s->cfg.retx_delay_us % 1000000) * 1000 };
		nanosleep(&ts, NULL); /* one member, one chunk per call: nothing else waits */
	}
	if (s->cfg.mode == FSW_ECHO) {
		/* A one-member round a retransmission completed: its result carries RETX, as the
		 * engine's does. */
		p.inca.flags = WIRE_F_RESULT | (p.inca.flags & WIRE_F_RETX);
		p.inca.bfr_id = 0;
		fsw_emit(s, &p, bfr);
		return;
	}
	struct agg_send out[MAXM + 1];
	size_t ns = 0;
	agg_tree_input(s->tree, &p, (uint32_t)bfr - 1, out, MAXM + 1, &ns);
	for (size_t i = 0; i < ns; i++)
		fsw_emit(s, &out[i].pkt, (int)out[i].nbr + 1);
}

static void *fsw_main(void *arg)
{
	struct fsw *s = arg;

	while (!atomic_load(&s->stop)) {
		struct pollfd pf = { .fd = s->fd, .events = POLLIN };
		struct timespec ts = { .tv_nsec = 5000000 };
		struct util_udp_dgram d;

		if (s->pq_n > 0) {
			uint64_t now = util_now_ns();
			ts.tv_nsec = s->next_release_ns > now ? (long)(s->next_release_ns - now) : 0;
			if (ts.tv_nsec > 5000000)
				ts.tv_nsec = 5000000;
		}
		int pr = ppoll(&pf, 1, &ts, NULL);
		fsw_pace(s);
		if (pr <= 0) {
			fsw_release(s); /* idle: let held results go */
			continue;
		}
		if (util_udprx_recv(s->rxb, s->fd, MSG_DONTWAIT) <= 0)
			continue;
		while (util_udprx_next(s->rxb, &d)) {
			if (d.seg == 1)
				s->rx_gro_bufs++;
			if (d.truncated)
				s->bad++;
			else
				fsw_input(s, d.data, d.len, &d.from, d.seg);
			/* One packet in makes at most MAXM + 1 results (the queue holds 64). */
			if (util_udptx_queued(s->txq) > 64 - 2 * (MAXM + 1))
				util_udptx_flush(s->txq, s->fd, 0);
		}
		util_udptx_flush(s->txq, s->fd, 0);
	}
	return NULL;
}

static void fsw_start(struct fsw *s, const struct fsw_cfg *cfg, uint64_t seed)
{
	socklen_t sl = sizeof s->addr;
	int pmtu = IP_PMTUDISC_DO, big = 8 << 20;

	memset(s, 0, sizeof *s);
	s->cfg = *cfg;
	s->pq = malloc(sizeof *s->pq * PACEQ);
	CHECK(s->pq);
	util_rng_seed(&s->rng, seed);
	for (int m = 0; m <= MAXM; m++)
		for (int k = 0; k < MAXSLOTS; k++)
			s->answered[m][k] = -1;
	CHECK(cfg->nslots <= MAXSLOTS && cfg->nmembers <= MAXM);
	s->fd = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(s->fd >= 0);
	setsockopt(s->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
	util_udp_offloads(s->fd, cfg->gso, cfg->gro, &s->gso_on, &s->gro_on);
	struct util_udptx_opts to = { .max_pkts = 64, .pkt_cap = WIRE_MAX_UDP_PAYLOAD, .gso = s->gso_on };
	struct util_udprx_opts ro = { .batch = 16, .pkt_cap = WIRE_MAX_UDP_PAYLOAD + 64,
				      .gro = s->gro_on };
	CHECK_EQ(util_udptx_create(&to, &s->txq), 0);
	CHECK_EQ(util_udprx_create(&ro, &s->rxb), 0);
	if (setsockopt(s->fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) < 0)
		setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	s->addr.sin_family = AF_INET;
	s->addr.sin_addr.s_addr = htonl(0x7f000001);
	CHECK(bind(s->fd, (struct sockaddr *)&s->addr, sizeof s->addr) == 0);
	CHECK(getsockname(s->fd, (struct sockaddr *)&s->addr, &sl) == 0);
	if (cfg->auth)
		CHECK_EQ(wire_mac_new(&s->mac, test_key), 0);
	s->auth_ctr = 1000;
	if (cfg->mode == FSW_ENGINE) {
		uint8_t abm[8] = { 0 }, fbm[MAXM][8];
		struct agg_bift_entry bift[MAXM];
		for (int m = 1; m <= cfg->nmembers; m++) {
			unsigned bp = wire_bier_bp((uint16_t)m, 64, 0);
			wire_bier_set(abm, 8, bp);
			memset(fbm[m - 1], 0, 8);
			wire_bier_set(fbm[m - 1], 8, bp);
			bift[m - 1] = (struct agg_bift_entry){ .bp = bp, .nbr = (uint32_t)m - 1, .fbm = fbm[m - 1] };
		}
		struct agg_tree_cfg tc = {
			.tree_id = cfg->tree_id, .rkey = cfg->key, .nslots = cfg->nslots, .slot_bytes = 4096,
			.bsl_bits = 64, .abm = abm, .root = true, .nbift = (size_t)cfg->nmembers, .bift = bift,
		};
		CHECK_EQ(agg_tree_create(&tc, &s->tree), 0);
	}
	CHECK_EQ(pthread_create(&s->th, NULL, fsw_main, s), 0);
}

static void fsw_stop(struct fsw *s)
{
	atomic_store(&s->stop, 1);
	pthread_join(s->th, NULL);
	close(s->fd);
	agg_tree_destroy(s->tree);
	wire_mac_free(s->mac);
	free(s->pq);
	util_udptx_destroy(s->txq);
	util_udprx_destroy(s->rxb);
}

static void opts_for(struct inca_comm_opts *o, const struct fsw *s, char *swaddr, size_t cap)
{
	inca_comm_opts_init(o);
	snprintf(swaddr, cap, "127.0.0.1:%u", (unsigned)ntohs(s->addr.sin_port));
	o->size = 1;
	o->switch_addr = swaddr;
	o->data_addr = "127.0.0.10:0";
	o->tree_id = s->cfg.tree_id;
	o->key = s->cfg.key;
	o->nslots = s->cfg.nslots;
	o->switch_qpn = s->cfg.switch_qpn;
	if (s->cfg.auth) {
		o->auth_key = test_key;
		o->auth_key_id = 1;
	} else {
		o->no_auth = 1; /* the fake switch's tree is unauthenticated */
	}
}


/* Size-1 AllReduce through the echo switch: the result must equal the input. */
static void echo_roundtrips(struct inca_comm *c, size_t max_count)
{
	static const enum inca_dtype dts[] = { INCA_INT8, INCA_FP32, INCA_INT32, INCA_UINT64, INCA_BF16 };
	size_t counts[] = { 1, 7, 1000, 4093, max_count };

	for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
		for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
			size_t bytes = counts[k] * inca_dtype_size(dts[d]);
			uint8_t *in = malloc(bytes), *out = malloc(bytes), *keep = malloc(bytes);
			struct util_rng r;
			bool inplace = (k + d) % 2;

			CHECK(in && out && keep);
			util_rng_seed(&r, k * 131 + d);
			for (size_t i = 0; i < bytes; i++)
				in[i] = (uint8_t)util_rng_next(&r);
			if (dts[d] == INCA_FP32) /* finite floats only: the echo must not be confused by NaN */
				for (size_t i = 0; i < counts[k]; i++)
					((float *)in)[i] = (float)(int)(util_rng_next(&r) % 1000);
			if (dts[d] == INCA_BF16)
				for (size_t i = 0; i < counts[k]; i++)
					((uint16_t *)in)[i] = 0x3f80; /* 1.0 */
			memcpy(keep, in, bytes);
			memset(out, 0, bytes);
			CHECK_EQ(inca_allreduce_algo(c, in, inplace ? in : out, counts[k], dts[d], INCA_SUM,
						     INCA_ALGO_INC), 0);
			CHECK(memcmp(inplace ? in : out, keep, bytes) == 0);
			free(in);
			free(out);
			free(keep);
		}
	}
}

static void test_echo_clean(void)
{
	struct fsw_cfg fc = { .mode = FSW_ECHO, .nmembers = 1, .nslots = 16, .tree_id = 3, .key = 0xabcd1234,
			      .switch_qpn = 0x4242 };
	struct fsw s;
	struct inca_comm_opts o;
	struct inca_comm *c;
	struct inca_comm_stats st;
	char sw[32];
	int32_t v = 5, r = 0;

	fsw_start(&s, &fc, 1);
	opts_for(&o, &s, sw, sizeof sw);
	o.rto_us = 200000;
	CHECK_EQ(inca_comm_create(&o, &c), 0);
	echo_roundtrips(c, 100003);
	{
		/* A large buffer: many rounds of every slot, 64-bit offsets. */
		size_t big = 32u << 20;
		uint8_t *x = malloc(big), *y = malloc(big);
		CHECK(x && y);
		for (size_t i = 0; i < big; i++)
			x[i] = (uint8_t)(i * 2654435761u >> 13);
		CHECK_EQ(inca_allreduce_algo(c, x, y, big / 4, INCA_UINT32, INCA_BXOR, INCA_ALGO_INC), 0);
		CHECK(memcmp(x, y, big) == 0);
		free(x);
		free(y);
	}
	CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
	CHECK_EQ(st.rx_bad, 0);
	/* Strangers: a datagram from another IP, and garbage from the switch's IP. Both are
	 * read during the next call and counted, never taken as results. */
	for (int k = 0; k < 2; k++) {
		int fd = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in from = { .sin_family = AF_INET,
					    .sin_addr.s_addr = htonl(k ? 0x7f000001 : 0x7f000002) };
		struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f00000a),
					  .sin_port = s.member[1].sin_port };
		uint8_t junk[100] = { 0x2B };
		CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&from, sizeof from) == 0);
		CHECK(sendto(fd, junk, k ? 10 : sizeof junk, 0, (struct sockaddr *)&to, sizeof to) > 0);
		close(fd);
	}
	CHECK_EQ(inca_allreduce(c, &v, &r, 1, INCA_INT32, INCA_SUM), 0); /* AUTO -> INC */
	CHECK_EQ(r, 5);
	CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
	CHECK_EQ(st.rx_bad, 2);
	CHECK_EQ(st.inc_calls, 27);
	CHECK_EQ(st.ring_calls, 0);
	CHECK(st.tx_pkts >= 100003 * 8 / 4000 && st.rx_pkts >= st.tx_pkts - st.retransmits);
	inca_comm_destroy(c);
	fsw_stop(&s);
	CHECK_EQ(s.bad, 0);
	CHECK_EQ(s.violations, 0);
}

/* Authenticated echo: every result verified; duplicated results (same counter) are dropped
 * as replays, copies of another job's epoch (valid MAC) as rx_epoch, forgeries from ever new
 * switch contexts as bad MACs (they get no replay window, so they cannot crowd out the real
 * switch's); every call exact. */
static void test_echo_auth(void)
{
	struct fsw_cfg fc = { .mode = FSW_ECHO, .nmembers = 1, .nslots = 16, .tree_id = 4,
			      .key = 0xa0717, .switch_qpn = 0x104, .auth = true, .dup_every = 3,
			      .other_epoch_every = 5, .forged_ctx_every = 7 };
	struct fsw s;
	struct inca_comm_opts o;
	struct inca_comm *c;
	struct inca_comm_stats st;
	struct inca_auth_stats as;
	char sw[32];

	fsw_start(&s, &fc, 7);
	opts_for(&o, &s, sw, sizeof sw);
	o.rto_us = 200000;
	CHECK_EQ(inca_comm_create(&o, &c), 0);
	echo_roundtrips(c, 20011);
	CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
	CHECK_EQ(inca_comm_get_auth_stats(c, &as, sizeof as), 0);
	CHECK(as.enabled == 1 && as.key_id == 1 && as.epoch != 0 && !as.opted_out);
	CHECK(as.rx_verified > 0 && as.tx_signed > 0);
	CHECK(as.rx_replay > 0 && as.rx_replay >= as.rx_verified / 3 - 2);
	CHECK(as.rx_epoch > 0 && as.rx_epoch >= as.rx_verified / 5 - 2);
	CHECK(as.rx_bad_mac > 0 && as.rx_bad_mac >= as.rx_verified / 7 - 2);
	CHECK_EQ(as.rx_bad_ctx, 0);
	/* The replays (a third of all results) never reached the chunk matching: a duplicate
	 * result here can only be the echo of one of our own resends (a stall probe when the
	 * fake switch's thread was descheduled), one at most per resend. */
	CHECK(st.rx_dup_results <= st.retransmits);
	inca_comm_destroy(c);
	fsw_stop(&s);
	CHECK_EQ(s.bad, 0);
}

static void test_echo_faults(void)
{
	struct fsw_cfg fc = { .mode = FSW_ECHO, .nmembers = 1, .nslots = 16, .tree_id = 9, .key = 77,
			      .switch_qpn = 0x109, .drop = 0.1, .dup_every = 5, .corrupt_every = 7,
			      .reorder = true };
	struct fsw s;
	struct inca_comm_opts o;
	struct inca_comm *c;
	struct inca_comm_stats st;
	char sw[32];

	fsw_start(&s, &fc, 2);
	opts_for(&o, &s, sw, sizeof sw);
	o.switch_qpn = 0; /* default 0x100 + tree_id */
	o.rto_us = 2000;
	o.rto_max_us = 20000;
	o.retx_limit = 200;
	o.drop_rate = 0.05;
	o.seed = 42;
	CHECK_EQ(inca_comm_create(&o, &c), 0);
	echo_roundtrips(c, 50001);
	CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
	CHECK(st.retransmits > 0); /* by the RTO or, mostly, by loss detection */
	CHECK(st.injected_drops > 0);
	CHECK(st.rx_dup_results > 0);
	CHECK(st.rx_bad > 0); /* the corrupted copies */
	inca_comm_destroy(c);
	fsw_stop(&s);
	CHECK_EQ(s.bad, 0);
	CHECK_EQ(s.violations, 0);
}

/* A repair notice makes the member resend the noticed chunk at once: the call completes
 * without any timeout although the RTO is 10 s, with exactly one retransmission; a notice
 * naming another member counts as bad, a notice for a chunk already answered changes
 * nothing. */
static void test_echo_nack(void)
{
	struct fsw_cfg fc = { .mode = FSW_ECHO, .nmembers = 1, .nslots = 16, .tree_id = 10, .key = 0xacc,
			      .switch_qpn = 0x10a, .nack = true };
	struct fsw s;
	struct inca_comm_opts o;
	struct inca_comm *c;
	struct inca_comm_stats st;
	char sw[32];
	int64_t in[1000], out[1000]; /* 8000 bytes: two chunks */

	fsw_start(&s, &fc, 5);
	opts_for(&o, &s, sw, sizeof sw);
	o.rto_us = 10000000;
	o.rto_max_us = 10000000;
	CHECK_EQ(inca_comm_create(&o, &c), 0);
	for (int i = 0; i < 1000; i++)
		in[i] = 3 * i - 7;
	memset(out, 0, sizeof out);
	CHECK_EQ(inca_allreduce_algo(c, in, out, 1000, INCA_INT64, INCA_SUM, INCA_ALGO_INC), 0);
	CHECK(memcmp(in, out, sizeof in) == 0);
	/* The first call has no RTT sample, so only the notice can make it resend. (The next
	 * call has one: on a loaded machine its stall probe may resend too.) */
	CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
	CHECK(s.repaired0);
	CHECK_EQ(st.timeouts, 0);
	CHECK_EQ(st.retransmits, 1);
	/* The stale notice is sent right after the last result: make sure it has arrived and been
	 * read (the next call drains it). */
	usleep(20000);
	CHECK_EQ(inca_allreduce_algo(c, in, out, 1, INCA_INT64, INCA_SUM, INCA_ALGO_INC), 0);
	CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
	CHECK_EQ(st.timeouts, 0);
	CHECK_EQ(st.rx_nacks, 2);   /* ours: the repair and the stale one */
	CHECK_EQ(st.rx_bad, 1);     /* the notice for member 2 */
	inca_comm_destroy(c);
	fsw_stop(&s);
	CHECK_EQ(s.bad, 0);
	CHECK_EQ(s.violations, 0);
}

/* A call of one chunk whose only packet is lost: nothing can be answered, so loss detection
 * has nothing to go on and the stall probe must repair it, armed as soon as the chunk is in
 * flight (the RTO of 50 ms is below INC_MAX_WAIT_NS, the longest sleep without a timer due):
 * the call completes without a timeout, with one retransmission. */
static void test_echo_probe(void)
{
	struct fsw_cfg fc = { .mode = FSW_ECHO, .nmembers = 1, .nslots = 16, .tree_id = 11,
			      .key = 0xbee, .switch_qpn = 0x10b, .lose_once = 2 };
	struct fsw s;
	struct inca_comm_opts o;
	struct inca_comm *c;
	struct inca_comm_stats st;
	char sw[32];
	int64_t in = 41, out = 0;

	fsw_start(&s, &fc, 6);
	opts_for(&o, &s, sw, sizeof sw);
	o.rto_us = 50000;
	o.rto_max_us = 50000;
	CHECK_EQ(inca_comm_create(&o, &c), 0);
	/* The first call (chunk 0) gives the RTT sample the probe's timer needs. */
	CHECK_EQ(inca_allreduce_algo(c, &in, &out, 1, INCA_INT64, INCA_SUM, INCA_ALGO_INC), 0);
	CHECK_EQ(out, 41);
	in = -5;
	CHECK_EQ(inca_allreduce_algo(c, &in, &out, 1, INCA_INT64, INCA_SUM, INCA_ALGO_INC), 0);
	CHECK_EQ(out, -5);
	CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
	CHECK(s.lost_once);
	CHECK_EQ(st.timeouts, 0);
	CHECK_EQ(st.retransmits, 1);
	inca_comm_destroy(c);
	fsw_stop(&s);
	CHECK_EQ(s.bad, 0);
	CHECK_EQ(s.violations, 0);
}

/* A lost repair at the end of a call: chunk 5 loses its original and the stall probe's resend.
 * Nothing later vouches for the probe (one chunk per call), and the probe fires once per
 * silence: the resend goes again after twice the repair round trip (learnt from chunk 4, lost
 * once, whose resend the switch answers 20 ms late: far above the minimum RTT of the four
 * clean calls before, even on a loaded machine) plus the reordering window, long before the
 * RTO of 500 ms. */
static void test_echo_lost_repair(void)
{
	struct fsw_cfg fc = { .mode = FSW_ECHO, .nmembers = 1, .nslots = 16, .tree_id = 11,
			      .key = 0xbee, .switch_qpn = 0x10b, .lose_once = 5, .lose_twice = 6,
			      .retx_delay_us = 20000 };
	struct fsw s;
	struct inca_comm_opts o;
	struct inca_comm *c;
	struct inca_comm_stats st;
	char sw[32];

	fsw_start(&s, &fc, 7);
	opts_for(&o, &s, sw, sizeof sw);
	o.rto_us = 500000;
	o.rto_max_us = 500000;
	CHECK_EQ(inca_comm_create(&o, &c), 0);
	for (int64_t g = 0; g < 7; g++) {
		int64_t in = 100 + g, out = 0;
		CHECK_EQ(inca_allreduce_algo(c, &in, &out, 1, INCA_INT64, INCA_SUM, INCA_ALGO_INC), 0);
		CHECK_EQ(out, 100 + g);
	}
	CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
	CHECK(s.lost_once);
	CHECK_EQ(s.lost_twice, 2);
	CHECK_EQ(st.timeouts, 0);
	CHECK(st.retransmits >= 3);
	inca_comm_destroy(c);
	fsw_stop(&s);
	CHECK_EQ(s.bad, 0);
	CHECK_EQ(s.violations, 0);
}

static void test_echo_dead(void)
{
	struct fsw_cfg fc = { .mode = FSW_ECHO, .nmembers = 1, .nslots = 8, .tree_id = 1, .switch_qpn = 0x101,
			      .dead = true };
	struct fsw s;
	struct inca_comm_opts o;
	struct inca_comm *c;
	struct inca_comm_stats st;
	char sw[32];
	int64_t buf[100] = { 0 }, out[100];

	/* Dead from the start: nothing was ever answered, so a silent switch could as well be
	 * peers not there yet; the call gives up after timeout_ms without progress (and at
	 * least retx_limit timeouts), resending the chunk on every RTO but the last. */
	fsw_start(&s, &fc, 3);
	opts_for(&o, &s, sw, sizeof sw);
	o.rto_us = 1000;
	o.rto_max_us = 4000;
	o.retx_limit = 4;
	o.timeout_ms = 300;
	CHECK_EQ(inca_comm_create(&o, &c), 0);
	for (int i = 0; i < 100; i++)
		buf[i] = i;
	uint64_t t_call = util_now_ns();
	CHECK_EQ(inca_allreduce_algo(c, buf, out, 100, INCA_INT64, INCA_SUM, INCA_ALGO_INC), -ETIMEDOUT);
	CHECK(util_now_ns() - t_call >= 300ull * 1000 * 1000);
	CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
	CHECK(st.timeouts > 4);
	CHECK_EQ(st.retransmits, st.timeouts - 1);
	uint64_t dead_tx = st.tx_pkts;
	CHECK_EQ(dead_tx, st.timeouts);
	/* The INC path is now broken: INC is refused at once, AUTO uses the host path. */
	CHECK_EQ(inca_allreduce_algo(c, buf, out, 100, INCA_INT64, INCA_SUM, INCA_ALGO_INC), -ENOTSUP);
	CHECK_EQ(inca_allreduce(c, buf, out, 100, INCA_INT64, INCA_SUM), 0);
	CHECK(memcmp(buf, out, sizeof buf) == 0);
	CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
	CHECK_EQ(st.tx_pkts, dead_tx);
	CHECK_EQ(st.ring_calls, 1);
	inca_comm_destroy(c);
	fsw_stop(&s);
	CHECK_EQ(s.bad, 0);

	/* The switch dies after a good call: the liveness probe (a resend of an answered chunk)
	 * goes unanswered too, so the call still gives up after exactly retx_limit timeouts. */
	fc.dead = false;
	fsw_start(&s, &fc, 4);
	opts_for(&o, &s, sw, sizeof sw);
	o.rto_us = 1000;
	o.rto_max_us = 4000;
	o.retx_limit = 4;
	CHECK_EQ(inca_comm_create(&o, &c), 0);
	CHECK_EQ(inca_allreduce_algo(c, buf, out, 100, INCA_INT64, INCA_SUM, INCA_ALGO_INC), 0);
	fsw_stop(&s);
	CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
	uint64_t t0 = st.timeouts;
	CHECK_EQ(inca_allreduce_algo(c, buf, out, 100, INCA_INT64, INCA_SUM, INCA_ALGO_INC), -ETIMEDOUT);
	CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
	CHECK_EQ(st.timeouts - t0, 4);
	inca_comm_destroy(c);
}

/* A slow switch: results leave one per 500 us, so a window of all 64 slots would queue 32 ms,
 * three times the minimum RTO. The adaptive window must notice the queue (RTT far above its
 * minimum) and stay well below nslots, and the RTO must not resend chunks that are merely
 * queued (the old behaviour: a resend storm). Then the explicit window cap: never more than
 * `window` chunks in flight. */
static void test_echo_paced(void)
{
	struct fsw_cfg fc = { .mode = FSW_ECHO, .nmembers = 1, .nslots = 64, .tree_id = 4, .key = 4,
			      .switch_qpn = 0x104, .pace_us = 500 };
	const size_t count = 400 * 1024; /* 400 chunks of int32 */
	int32_t *x = malloc(count * 4), *y = malloc(count * 4);
	struct inca_comm_stats st;

	CHECK(x && y);
	for (size_t i = 0; i < count; i++)
		x[i] = (int32_t)(i * 2654435761u);
	for (int cap = 0; cap <= 3; cap += 3) {
		struct fsw s;
		struct inca_comm_opts o;
		struct inca_comm *c;
		char sw[32];

		fsw_start(&s, &fc, 7);
		opts_for(&o, &s, sw, sizeof sw);
		o.rto_us = 10000;
		o.window = (uint16_t)cap;
		CHECK_EQ(inca_comm_create(&o, &c), 0);
		memset(y, 0, count * 4);
		CHECK_EQ(inca_allreduce_algo(c, x, y, count, INCA_INT32, INCA_SUM, INCA_ALGO_INC), 0);
		CHECK(memcmp(x, y, count * 4) == 0);
		CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
		inca_comm_destroy(c);
		fsw_stop(&s);
		CHECK_EQ(s.bad, 0);
		CHECK_EQ(s.violations, 0);
		if (cap) {
			CHECK(s.max_outstanding <= (unsigned)cap);
		} else {
			CHECK(s.max_outstanding < 48);
			/* Scheduling hiccups may still cost a probe or two, never a storm. */
			CHECK(st.retransmits <= 10);
		}
	}
	free(x);
	free(y);
}

/* ---- socket offloads: UDP GSO sends and UDP_GRO receives on both sides ---- */

static void set_offload_env(bool gso, bool gro)
{
	setenv("INCA_UDP_GSO", gso ? "1" : "0", 1);
	setenv("INCA_UDP_GRO", gro ? "1" : "0", 1);
}

/* The client's data socket: the one bound to the address the fake switch saw it send from. */
static int find_client_fd(const struct sockaddr_in *a)
{
	for (int fd = 3; fd < 1024; fd++) {
		struct sockaddr_in b;
		socklen_t bl = sizeof b;
		if (getsockname(fd, (struct sockaddr *)&b, &bl) == 0 && bl == sizeof b &&
		    b.sin_family == AF_INET && b.sin_addr.s_addr == a->sin_addr.s_addr &&
		    b.sin_port == a->sin_port)
			return fd;
	}
	return -1;
}

/* n chunks' worth of int32 plus `tail` elements (a short last chunk; 0: none), exact. */
static void echo_chunks(struct inca_comm *c, size_t nchunks, size_t tail)
{
	size_t per = wire_max_data(4096, 4, 1) / 4, count = nchunks * per + tail;
	int32_t *x = malloc(count * 4 + 4), *y = malloc(count * 4 + 4);

	CHECK(x && y);
	for (size_t i = 0; i < count; i++)
		x[i] = (int32_t)(i * 2654435761u ^ nchunks);
	memset(y, 0, count * 4);
	CHECK_EQ(inca_allreduce_algo(c, x, y, count, INCA_INT32, INCA_BXOR, INCA_ALGO_INC), 0);
	CHECK(memcmp(x, y, count * 4) == 0);
	free(x);
	free(y);
}

/* Every combination of the client's GSO / GRO with a fake switch that receives with or
 * without GRO and answers with GSO sends or one by one: results exact, every packet valid
 * for the IPv4 ID the kernel gave it, and the counters say which path ran. Then the client's
 * fault-injected drop under GSO, and a kernel that refuses GSO sends (SO_NO_CHECK on the
 * client's socket: GSO needs the UDP checksum): the queue falls back to single packets,
 * restamped for ID 0, mid-call. */
static void test_offloads(void)
{
	for (int mode = 0; mode < 8; mode++) {
		bool cl_gso = mode & 1, cl_gro = mode & 2, sw_off = mode & 4;
		struct fsw_cfg fc = { .mode = FSW_ECHO, .nmembers = 1, .nslots = 64, .tree_id = 12,
				      .key = 0x0ff1, .switch_qpn = 0x10c, .gro = !sw_off, .gso = !sw_off };
		struct fsw s;
		struct inca_comm_opts o;
		struct inca_comm *c;
		struct inca_comm_stats st;
		struct inca_io_stats io;
		char sw[32];

		set_offload_env(cl_gso, cl_gro);
		fsw_start(&s, &fc, 30 + (uint64_t)mode);
		opts_for(&o, &s, sw, sizeof sw);
		o.rto_us = 200000;
		CHECK_EQ(inca_comm_create(&o, &c), 0);
		echo_chunks(c, 1, 0);
		echo_chunks(c, 15, 3);   /* one full GSO send and a short last chunk */
		echo_chunks(c, 16, 0);   /* 16 full chunks: a whole slot block, then the next block */
		echo_chunks(c, 200, 1);  /* many sends, every slot reused, one element at the end */
		echo_chunks(c, 0, 5);    /* one short chunk alone */
		echo_roundtrips(c, 30011);
		CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
		CHECK_EQ(inca_comm_get_io_stats(c, &io, sizeof io), 0);
		CHECK_EQ(st.rx_bad, 0);
		CHECK_EQ(io.gso, cl_gso); /* this kernel has both (udpio_test) */
		CHECK_EQ(io.gro, cl_gro);
		CHECK_EQ(io.gso_failed, 0);
		CHECK(io.tx_syscalls > 0 && io.tx_syscalls <= io.tx_msgs && io.tx_msgs <= st.tx_pkts);
		if (io.gso)
			CHECK(io.gso_sends > 0 && io.tx_msgs < st.tx_pkts);
		else
			CHECK(io.gso_sends == 0 && io.tx_msgs == st.tx_pkts);
		/* Results in GSO sends arrive whole at a GRO socket, else one by one. */
		if (io.gro && s.gso_on)
			CHECK(io.rx_gro_bufs > 0 && io.rx_bufs < st.rx_pkts);
		else
			CHECK(io.rx_gro_bufs == 0 && io.rx_bufs == st.rx_pkts);
		/* A GSO send reaching a GRO socket whole: segment k's ICRC holds for ID k exactly. */
		if (io.gso && s.gro_on)
			CHECK(s.rx_gro_bufs > 0);
		if (s.gro_on)
			CHECK_EQ(s.id_guess_miss, 0);
		inca_comm_destroy(c);
		fsw_stop(&s);
		CHECK_EQ(s.bad, 0);
		CHECK_EQ(s.violations, 0);
	}

	/* Fault injection under GSO: a dropped packet never takes a segment's place (the IDs of
	 * the others stay right), the timers resend it. */
	{
		struct fsw_cfg fc = { .mode = FSW_ECHO, .nmembers = 1, .nslots = 64, .tree_id = 13, .key = 5,
				      .switch_qpn = 0x10d, .gro = true, .gso = true, .drop = 0.02 };
		struct fsw s;
		struct inca_comm_opts o;
		struct inca_comm *c;
		struct inca_comm_stats st;
		struct inca_io_stats io;
		char sw[32];

		set_offload_env(true, true);
		fsw_start(&s, &fc, 40);
		opts_for(&o, &s, sw, sizeof sw);
		o.rto_us = 2000;
		o.rto_max_us = 20000;
		o.retx_limit = 200;
		o.drop_rate = 0.05;
		o.seed = 7;
		CHECK_EQ(inca_comm_create(&o, &c), 0);
		echo_chunks(c, 300, 7);
		echo_roundtrips(c, 20011);
		CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
		CHECK_EQ(inca_comm_get_io_stats(c, &io, sizeof io), 0);
		CHECK(st.injected_drops > 0 && st.retransmits > 0);
		CHECK_EQ(st.rx_bad, 0);
		if (io.gso)
			CHECK(io.gso_sends > 0);
		inca_comm_destroy(c);
		fsw_stop(&s);
		CHECK_EQ(s.bad, 0);
		CHECK_EQ(s.violations, 0);
		if (s.gro_on)
			CHECK_EQ(s.id_guess_miss, 0);
	}

	/* The kernel refuses GSO sends after the socket said yes. */
	{
		struct fsw_cfg fc = { .mode = FSW_ECHO, .nmembers = 1, .nslots = 64, .tree_id = 14, .key = 6,
				      .switch_qpn = 0x10e, .gro = true, .gso = true };
		struct fsw s;
		struct inca_comm_opts o;
		struct inca_comm *c;
		struct inca_comm_stats st;
		struct inca_io_stats io;
		char sw[32];
		int one = 1;

		set_offload_env(true, true);
		fsw_start(&s, &fc, 41);
		opts_for(&o, &s, sw, sizeof sw);
		o.rto_us = 200000;
		CHECK_EQ(inca_comm_create(&o, &c), 0);
		echo_chunks(c, 0, 1); /* one packet: the fake switch learns the client's address */
		CHECK_EQ(inca_comm_get_io_stats(c, &io, sizeof io), 0);
		if (!io.gso) {
			printf("inc_test: no UDP GSO here, refusal case skipped\n");
		} else {
			int fd = find_client_fd(&s.member[1]);
			CHECK(fd >= 0);
			CHECK_EQ(setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &one, sizeof one), 0);
			echo_chunks(c, 40, 9);
			echo_roundtrips(c, 20011);
			CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
			CHECK_EQ(inca_comm_get_io_stats(c, &io, sizeof io), 0);
			CHECK_EQ(io.gso, 0);
			CHECK_EQ(io.gso_failed, 1);
			CHECK_EQ(st.rx_bad, 0);
		}
		inca_comm_destroy(c);
		fsw_stop(&s);
		/* Every packet after the refusal arrived alone and valid for ID 0 (restamped),
		 * none glued to another. */
		CHECK_EQ(s.bad, 0);
		CHECK_EQ(s.violations, 0);
		CHECK_EQ(s.id_guess_miss, 0);
	}
	unsetenv("INCA_UDP_GSO");
	unsetenv("INCA_UDP_GRO");
	/* Bad values are refused, not guessed. */
	{
		struct inca_comm_opts o = { .struct_size = sizeof o, .size = 1, .switch_addr = "127.0.0.1:9",
					    .data_addr = "127.0.0.10:0", .no_auth = 1 };
		struct inca_comm *c = NULL;
		setenv("INCA_UDP_GSO", "yes", 1);
		CHECK_EQ(inca_comm_create(&o, &c), -EINVAL);
		unsetenv("INCA_UDP_GSO");
	}
}

/* ---- three members through the real aggregation engine, ranks as threads ---- */

struct member {
	int rank, n, rc;
	const char *boot, *sw;
	double drop;
	unsigned late_ms; /* late_work: how much later rank 1 enters each call */
	const struct fsw *s;
	struct inca_comm_stats st;
};

static int member_work(struct inca_comm *c, int rank, int n)
{
	const size_t count = 100003;
	int32_t *a = malloc(count * 4), *b = malloc(count * 4);
	float f[3001];
	uint8_t u[5000];
	int rc = 0;

	if (!a || !b)
		return -ENOMEM;
	for (int it = 0; it < 3 && rc == 0; it++) {
		for (size_t i = 0; i < count; i++)
			a[i] = (int32_t)(i * 7 + (size_t)rank * 1000003u) - it;
		rc = inca_allreduce_algo(c, a, it == 1 ? a : b, count, INCA_INT32, INCA_SUM, INCA_ALGO_INC);
		const int32_t *res = it == 1 ? a : b;
		for (size_t i = 0; i < count && rc == 0; i++) {
			int64_t e = 0;
			for (int r = 0; r < n; r++)
				e += (int64_t)(int32_t)(i * 7 + (size_t)r * 1000003u) - it;
			if (res[i] != (int32_t)e)
				rc = -EBADMSG;
		}
	}
	for (int i = 0; i < 3001; i++)
		f[i] = (float)(i % 17) - (float)rank;
	if (rc == 0)
		rc = inca_allreduce(c, f, f, 3001, INCA_FP32, INCA_SUM);
	for (int i = 0; i < 3001 && rc == 0; i++)
		if (f[i] != (float)(n * (i % 17)) - (float)(n * (n - 1) / 2))
			rc = -EBADMSG;
	for (int i = 0; i < 5000; i++)
		u[i] = (uint8_t)((i + rank * 50) % 251);
	if (rc == 0)
		rc = inca_allreduce_algo(c, u, u, 5000, INCA_UINT8, INCA_MAX, INCA_ALGO_INC);
	for (int i = 0; i < 5000 && rc == 0; i++) {
		uint8_t e = 0;
		for (int r = 0; r < n; r++)
			if ((uint8_t)((i + r * 50) % 251) > e)
				e = (uint8_t)((i + r * 50) % 251);
		if (u[i] != e)
			rc = -EBADMSG;
	}
	if (rc == 0)
		rc = inca_barrier(c);
	free(a);
	free(b);
	return rc;
}

/* Rank 1 enters every call late_ms after the others (a loaded machine: filling a large buffer
 * can take seconds longer on one rank). The early ranks see many RTOs on their first chunk,
 * far more than retx_limit, but must wait for the late rank instead of giving up: in the
 * communicator's first call nothing was answered yet, so a silent switch is no verdict; later
 * the switch answers their liveness probe. Calls out of place, in place, out of place. */
static int late_work(struct inca_comm *c, int rank, int n, unsigned late_ms)
{
	enum { COUNT = 20000 };
	int32_t *a = malloc(COUNT * 4), *b = malloc(COUNT * 4);
	int rc = 0;

	if (!a || !b)
		return -ENOMEM;
	for (int it = 0; it < 3 && rc == 0; it++) {
		for (size_t i = 0; i < COUNT; i++)
			a[i] = (int32_t)(i + (size_t)rank * 7 + (size_t)it);
		if (rank == 1)
			usleep(late_ms * 1000u);
		int32_t *res = it == 1 ? a : b;
		rc = inca_allreduce_algo(c, a, res, COUNT, INCA_INT32, INCA_SUM, INCA_ALGO_INC);
		for (size_t i = 0; i < COUNT && rc == 0; i++) {
			int64_t e = 0;
			for (int r = 0; r < n; r++)
				e += (int64_t)(i + (size_t)r * 7 + (size_t)it);
			if (res[i] != (int32_t)e)
				rc = -EBADMSG;
		}
	}
	free(a);
	free(b);
	return rc;
}

/* Errors only: why a member gave up, printed next to the failed check. */
static void member_log(void *ctx, int level, const char *msg)
{
	fprintf(stderr, "member %d: [%d] %s\n", *(const int *)ctx, level, msg);
}

static void *member_main(void *arg)
{
	struct member *m = arg;
	char data[32];
	struct inca_comm_opts o = {
		.struct_size = sizeof o, .rank = m->rank, .size = m->n, .bootstrap_addr = m->boot, .switch_addr = m->sw,
		.data_addr = data, .tree_id = m->s->cfg.tree_id, .key = m->s->cfg.key,
		.switch_qpn = m->s->cfg.switch_qpn, .nslots = m->s->cfg.nslots, .timeout_ms = 10000,
		.rto_us = 3000, .rto_max_us = 30000, .retx_limit = 200, .drop_rate = m->drop,
		.seed = (uint64_t)m->rank + 1, .log_fn = member_log, .log_ctx = &m->rank, .log_level = 0,
		.no_auth = 1,
	};
	struct inca_comm *c;

	snprintf(data, sizeof data, "127.0.0.%d:0", 10 + m->rank);
	if (m->late_ms) { /* give up after ~11 ms of silence, wait up to 10 s for peers */
		o.rto_us = 1000;
		o.rto_max_us = 4000;
		o.retx_limit = 4;
	}
	m->rc = inca_comm_create(&o, &c);
	if (m->rc < 0)
		return NULL;
	m->rc = m->late_ms ? late_work(c, m->rank, m->n, m->late_ms) : member_work(c, m->rank, m->n);
	inca_comm_get_stats(c, &m->st, sizeof m->st);
	inca_comm_destroy(c);
	return NULL;
}

static void test_engine(double sw_drop, double cl_drop, unsigned dup_every, bool reorder,
			uint64_t seed, bool sw_offload)
{
	enum { N = 3 };
	struct fsw_cfg fc = { .mode = FSW_ENGINE, .nmembers = N, .nslots = 32, .tree_id = 5, .key = 0x5eed,
			      .switch_qpn = 0x105, .drop = sw_drop, .dup_every = dup_every, .reorder = reorder,
			      .gso = sw_offload, .gro = sw_offload };

	for (int attempt = 0; attempt < 20; attempt++) {
		struct fsw s;
		struct member m[N];
		pthread_t th[N];
		char boot[32], sw[32];

		fsw_start(&s, &fc, seed);
		snprintf(sw, sizeof sw, "127.0.0.1:%u", (unsigned)ntohs(s.addr.sin_port));
		snprintf(boot, sizeof boot, "127.0.0.1:%d", PORT_BASE + (int)((getpid() * 3 + attempt * 37) % 1000));
		for (int r = 0; r < N; r++) {
			m[r] = (struct member){ .rank = r, .n = N, .boot = boot, .sw = sw, .drop = cl_drop, .s = &s };
			CHECK_EQ(pthread_create(&th[r], NULL, member_main, &m[r]), 0);
		}
		for (int r = 0; r < N; r++)
			pthread_join(th[r], NULL);
		fsw_stop(&s);
		if (m[0].rc == -EADDRINUSE)
			continue;
		for (int r = 0; r < N; r++) {
			if (m[r].rc != 0)
				fprintf(stderr, "member %d: %s\n", r, inca_strerror(m[r].rc));
			CHECK_EQ(m[r].rc, 0);
			CHECK_EQ(m[r].st.inc_calls, 6); /* 5 AllReduces + the barrier (INC on AUTO) */
			CHECK_EQ(m[r].st.rx_bad, 0);
			if (cl_drop > 0)
				CHECK(m[r].st.retransmits > 0);
		}
		CHECK_EQ(s.bad, 0);
		CHECK_EQ(s.violations, 0);
		return;
	}
	CHECK(!"no free bootstrap port");
}

static void test_engine_late_peer(void)
{
	enum { N = 2 };
	struct fsw_cfg fc = { .mode = FSW_ENGINE, .nmembers = N, .nslots = 32, .tree_id = 6, .key = 0x1a7e,
			      .switch_qpn = 0x106 };

	for (int attempt = 0; attempt < 20; attempt++) {
		struct fsw s;
		struct member m[N];
		pthread_t th[N];
		char boot[32], sw[32];

		fsw_start(&s, &fc, 21);
		snprintf(sw, sizeof sw, "127.0.0.1:%u", (unsigned)ntohs(s.addr.sin_port));
		snprintf(boot, sizeof boot, "127.0.0.1:%d", PORT_BASE + (int)((getpid() * 5 + attempt * 41) % 1000));
		for (int r = 0; r < N; r++) {
			m[r] = (struct member){ .rank = r, .n = N, .boot = boot, .sw = sw, .s = &s, .late_ms = 300 };
			CHECK_EQ(pthread_create(&th[r], NULL, member_main, &m[r]), 0);
		}
		for (int r = 0; r < N; r++)
			pthread_join(th[r], NULL);
		fsw_stop(&s);
		if (m[0].rc == -EADDRINUSE)
			continue;
		for (int r = 0; r < N; r++) {
			if (m[r].rc != 0)
				fprintf(stderr, "member %d: %s\n", r, inca_strerror(m[r].rc));
			CHECK_EQ(m[r].rc, 0);
			CHECK_EQ(m[r].st.inc_calls, 3);
			CHECK_EQ(m[r].st.rx_bad, 0);
		}
		/* Rank 0 waited 3 x 300 ms with RTOs of at most 4 ms: far more timeouts than
		 * retx_limit (4); after the first call each was answered through the probe (a
		 * duplicate result). */
		CHECK(m[0].st.timeouts > 3 * 4);
		CHECK(m[0].st.rx_dup_results > 0);
		CHECK_EQ(s.bad, 0);
		CHECK_EQ(s.violations, 0);
		return;
	}
	CHECK(!"no free bootstrap port");
}

int main(void)
{
	test_echo_clean();
	test_echo_auth();
	test_echo_faults();
	test_echo_nack();
	test_echo_probe();
	test_echo_lost_repair();
	test_echo_dead();
	test_echo_paced();
	test_offloads();
	test_engine(0, 0, 0, false, 11, false);
	test_engine(0, 0, 0, false, 13, true);
	test_engine(0.05, 0.05, 9, true, 12, false);
	test_engine(0.05, 0.05, 9, false, 14, true);
	test_engine_late_peer();
	printf("inc_test: ok\n");
	return 0;
}
