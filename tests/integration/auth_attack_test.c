/* Integration: a hostile prober against a real inca-switch and 4 libinca ranks on loopback.
 * A separate attacker process (root: AF_PACKET capture on lo, raw IPv4 sends with spoofed
 * sources) watches the job's packets and for each one it sees injects:
 *   - a spoofed contribution from the member's own address for a chunk two ahead, with
 *     garbage data and a valid ICRC (alternately keeping the captured, now wrong, tag and
 *     stripping the authentication block);
 *   - the captured contribution with one data byte flipped, ICRC recomputed;
 *   - the captured packet replayed verbatim (valid tag), and the same with a flipped tag byte;
 *   - forged RESULTs with garbage data for that chunk, spoofed from the switch's address, to
 *     every member it has seen (racing the real result), with and without a block;
 *   - forged repair notices from the switch's address.
 * The ranks run exact int32 AllReduces on the INC path meanwhile.
 * Default (authenticated job): every call returns 0 with the exact result, the switch counts
 * auth drops, the ranks count rejected results, and the attacker really sent every kind.
 * --control: the same attack (without the tag flips: there is no tag) on a job without
 * authentication must do damage (a wrong
 * result or a failed call): that shows the probe has teeth, so the first run means
 * something. Needs root; exits 77 (skip) without it. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"
#include "json.h"
#include "util/util.h"
#include "wire/wire.h"

enum { K_FUTURE, K_FLIP_DATA, K_REPLAY, K_FLIP_TAG, K_RESULT, K_NACK, K_COUNT };
static const char *const kind_name[K_COUNT] = { "future contribution", "flipped data byte",
						"replay", "flipped tag byte", "forged result",
						"forged notice" };

struct shared {
	struct itest_shared it;
	struct inca_auth_stats auth[LAUNCH_MAX_RANKS];
	uint64_t sent[K_COUNT];
	uint64_t captured;
	int ready; /* the attacker's capture socket is bound */
};

struct job {
	struct launch_cfg cfg;
	struct shared *sh;
};

/* ------------------------------------------------------------------------- the attacker */

struct peer {
	bool known;
	uint32_t ip;   /* host order */
	uint16_t port; /* host order */
};

struct attacker {
	int raw;
	uint32_t prefix; /* the job's /24, host order */
	struct peer sw;
	struct peer member[LAUNCH_MAX_RANKS + 1]; /* by BFR-id */
	uint64_t *sent;
	uint64_t budget;
};

static void raw_send(struct attacker *at, const struct wire_pkt *p, uint32_t src, uint16_t sport,
		     uint32_t dst, uint16_t dport, int kind)
{
	static const uint8_t mac[6];
	uint8_t buf[WIRE_ETH_LEN + WIRE_IPV4_LEN + WIRE_UDP_LEN + WIRE_MAX_UDP_PAYLOAD];
	/* IPv4 ID 1: the raw socket leaves a non-zero ID alone, and receivers accept 0..127. */
	struct wire_ipinfo ip = { .src_ip = src, .dst_ip = dst, .src_port = sport,
				  .dst_port = dport, .ip_id = 1 };
	int n = wire_encode_frame(buf, sizeof buf, mac, mac, p, &ip);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(dst) };

	if (n <= WIRE_ETH_LEN || !at->budget)
		return;
	if (sendto(at->raw, buf + WIRE_ETH_LEN, (size_t)n - WIRE_ETH_LEN, 0,
		   (struct sockaddr *)&to, sizeof to) > 0) {
		at->sent[kind]++;
		at->budget--;
	}
}

static uint8_t garbage[4096];
/* Added to a captured nonce counter: a counter no one used yet, so a forgery passes the
 * receiver's replay window and is caught by the MAC; verbatim replays are caught by the
 * window. */
#define FRESH_CTR (1ull << 40)

static void attack_contribution(struct attacker *at, const struct wire_pkt *c, uint32_t src,
				uint16_t sport, uint32_t dst, uint16_t dport)
{
	struct wire_pkt f;
	uint8_t data[4096];
	uint16_t nslots = 256;

	/* Replay, then the same with one tag byte flipped. */
	raw_send(at, c, src, sport, dst, dport, K_REPLAY);
	if (c->inca.flags & WIRE_F_AUTH) {
		f = *c;
		f.auth.tag[5] ^= 0x40;
		raw_send(at, &f, src, sport, dst, dport, K_FLIP_TAG);
	}
	/* One data byte flipped. */
	if (c->data_len) {
		f = *c;
		memcpy(data, c->data, c->data_len);
		data[c->data_len / 2] ^= 1;
		f.data = data;
		f.auth.ctr += FRESH_CTR; /* past the replay window: the MAC must catch it */
		raw_send(at, &f, src, sport, dst, dport, K_FLIP_DATA);
	}
	/* A chunk two ahead, garbage data. */
	f = *c;
	f.auth.ctr += FRESH_CTR;
	uint32_t g = c->imm + 2;
	f.imm = g;
	f.inca.slot = (uint16_t)(g % nslots);
	f.inca.round = g / nslots;
	f.reth.va = c->reth.va + 2ull * c->data_len;
	f.data = c->data_len ? garbage : NULL;
	if (at->sent[K_FUTURE] & 1) {
		f.inca.flags &= (uint8_t)~WIRE_F_AUTH;
		f.inca.epoch = 0;
	}
	raw_send(at, &f, src, sport, dst, dport, K_FUTURE);

	/* Forged results and notices for this chunk from the switch to every member seen. */
	for (unsigned b = 1; b <= LAUNCH_MAX_RANKS; b++) {
		const struct peer *m = &at->member[b];
		uint8_t bits[WIRE_BSL_MAX / 8] = { 0 };
		size_t bl = wire_bsl_bytes(c->inca.bsl_code);

		if (!m->known || !bl)
			continue;
		wire_bier_set(bits, bl, wire_bier_bp((uint16_t)b, (unsigned)bl * 8, c->inca.si));
		f = *c;
		f.bth.dest_qp = 0x1000u + b;
		f.inca.flags = (uint8_t)(WIRE_F_RESULT | (c->inca.flags & WIRE_F_AUTH));
		if (at->sent[K_RESULT] & 1) {
			f.inca.flags &= (uint8_t)~WIRE_F_AUTH;
			f.inca.epoch = 0;
		}
		f.inca.bfr_id = 0;
		f.inca.bits = bits;
		f.data = c->data_len ? garbage : NULL;
		f.auth.ctx = WIRE_AUTH_CTX_SWITCH;
		f.auth.ctr += FRESH_CTR;
		raw_send(at, &f, dst, dport, m->ip, m->port, K_RESULT);
		f.inca.flags = (uint8_t)(WIRE_F_NACK | (c->inca.flags & WIRE_F_AUTH));
		f.inca.count = 0;
		f.data = NULL;
		f.data_len = 0;
		raw_send(at, &f, dst, dport, m->ip, m->port, K_NACK);
	}
}

static void attack_packet(struct attacker *at, const uint8_t *udp_payload, size_t len,
			  uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport)
{
	/* On loopback a GSO send is one datagram of several packets: walk them by DMA length. */
	while (len >= WIRE_ROCE_HDR_LEN + WIRE_ICRC_LEN) {
		uint32_t dma = (uint32_t)udp_payload[24] << 24 | (uint32_t)udp_payload[25] << 16 |
			       (uint32_t)udp_payload[26] << 8 | udp_payload[27];
		size_t one = WIRE_ROCE_HDR_LEN + dma + (4 - dma % 4) % 4 + WIRE_ICRC_LEN;
		struct wire_pkt p;

		if (dma > 4096 || one > len)
			return;
		if (wire_decode_udp(udp_payload, one, &p, NULL) == WIRE_OK) {
			if (!(p.inca.flags & (WIRE_F_RESULT | WIRE_F_NACK))) {
				/* a contribution: learn the member and the switch */
				at->sw = (struct peer){ true, dst, dport };
				if (p.inca.bfr_id >= 1 && p.inca.bfr_id <= LAUNCH_MAX_RANKS)
					at->member[p.inca.bfr_id] = (struct peer){ true, src, sport };
				attack_contribution(at, &p, src, sport, dst, dport);
			} else if (p.inca.flags & WIRE_F_RESULT) {
				struct wire_pkt f = p;
				uint8_t data[4096];
				raw_send(at, &p, src, sport, dst, dport, K_REPLAY);
				if (p.data_len) {
					memcpy(data, p.data, p.data_len);
					data[0] ^= 0x80;
					f.data = data;
					f.auth.ctr += FRESH_CTR;
					raw_send(at, &f, src, sport, dst, dport, K_FLIP_DATA);
				}
			}
		}
		udp_payload += one;
		len -= one;
	}
}

static int attacker_main(struct shared *sh, uint32_t prefix)
{
	struct attacker at = { .prefix = prefix, .sent = sh->sent, .budget = 200000 };
	int cap = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));
	struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP),
				  .sll_ifindex = (int)if_nametoindex("lo") };
	static uint8_t buf[70000];

	at.raw = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	if (cap < 0 || at.raw < 0 || bind(cap, (struct sockaddr *)&ll, sizeof ll) < 0)
		return 3;
	__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
	memset(garbage, 0x5a, sizeof garbage);
	for (;;) {
		struct sockaddr_ll from;
		socklen_t fl = sizeof from;
		ssize_t n = recvfrom(cap, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return 4;
		}
		/* Each loopback packet shows up twice (outgoing and incoming): take one. */
		if (from.sll_pkttype == PACKET_OUTGOING || n < 28 + WIRE_ROCE_HDR_LEN)
			continue;
		const uint8_t *ip = buf;
		uint32_t src = (uint32_t)ip[12] << 24 | (uint32_t)ip[13] << 16 | ip[14] << 8 | ip[15];
		uint32_t dst = (uint32_t)ip[16] << 24 | (uint32_t)ip[17] << 16 | ip[18] << 8 | ip[19];
		if (ip[0] != 0x45 || ip[9] != 17 || (src & 0xFFFFFF00u) != prefix ||
		    (dst & 0xFFFFFF00u) != prefix)
			continue;
		/* The attacker's own packets carry IPv4 ID 1 (the job's ID 0, or k in a GSO
		 * burst, which a capture on lo never shows cut): skip them. */
		if (ip[4] == 0 && ip[5] == 1)
			continue;
		uint16_t sport = (uint16_t)(ip[20] << 8 | ip[21]), dport = (uint16_t)(ip[22] << 8 | ip[23]);
		sh->captured++;
		attack_packet(&at, ip + 28, (size_t)n - 28, src, sport, dst, dport);
	}
}

/* ------------------------------------------------------------------------- the ranks */

static int rank_main(struct inca_comm *comm, void *arg)
{
	struct job *j = arg;
	size_t counts[] = { 1, 1000, 50000, 300000 };
	size_t maxc = 300000;
	int32_t *sbuf = malloc(maxc * 4), *rbuf = malloc(maxc * 4);
	uint64_t iter = 0;
	int bad = 0;

	if (!sbuf || !rbuf)
		return 4;
	/* Six rounds of sizes; then, on the authenticated job, more rounds until the attacker
	 * has sent every kind (under load it may get little CPU while the job runs), at most
	 * 20 s more. The ranks agree on going on through a host-path MAX of their views. */
	uint64_t until = util_now_ns() + 20ull * 1000000000ull;
	for (int rep = 0;; rep++) {
		if (rep >= 6) {
			int32_t more = 0, agreed = 0;
			for (int k = 0; k < K_COUNT && !j->cfg.no_auth; k++)
				more |= __atomic_load_n(&j->sh->sent[k], __ATOMIC_RELAXED) == 0;
			more &= util_now_ns() < until;
			if (inca_allreduce_algo(comm, &more, &agreed, 1, INCA_INT32, INCA_MAX,
						INCA_ALGO_RING) || !agreed)
				break;
		}
		for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
			struct check_spec s = { .dt = INCA_INT32, .op = INCA_SUM, .mode = CHECK_EXACT,
						.nranks = j->cfg.nranks, .seed = 3, .iter = ++iter };
			if (itest_call(comm, &j->sh->it, &j->cfg, &s, counts[k], INCA_ALGO_INC, false,
				       sbuf, rbuf))
				bad++;
		}
	}
	itest_save_stats(comm, &j->sh->it);
	inca_comm_get_auth_stats(comm, &j->sh->auth[inca_comm_rank(comm)], sizeof(j->sh->auth[0]));
	free(sbuf);
	free(rbuf);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct job j;
	bool control = false;
	int fails = 0;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--control")) {
			control = true;
			memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof(char *));
			argc--;
			i--;
		}
	if (geteuid() != 0) {
		printf("SKIP: needs root (packet capture and raw sends on lo)\n");
		return 77;
	}
	launch_cfg_defaults(&j.cfg);
	itest_args(argc, argv, &j.cfg);
	j.cfg.no_auth = control;
	j.cfg.rto_us = 5000;
	j.cfg.timeout_ms = 10000;
	j.cfg.retx_limit = 8;
	j.sh = launch_shm_alloc(sizeof *j.sh);

	struct launch_addrs a;
	if (launch_addrs_init(&a, j.cfg.addr_index) < 0)
		return 2;
	struct in_addr pfx;
	char p4[LAUNCH_IP_LEN + 2];
	snprintf(p4, sizeof p4, "%s0", a.prefix);
	if (inet_pton(AF_INET, p4, &pfx) != 1)
		return 2;

	fflush(NULL);
	pid_t atk = fork();
	if (atk == 0)
		_exit(attacker_main(j.sh, ntohl(pfx.s_addr)));
	/* The job starts once the attacker watches (a fixed pause was too short under load). */
	for (int i = 0; i < 1000 && !__atomic_load_n(&j.sh->ready, __ATOMIC_ACQUIRE); i++) {
		if (waitpid(atk, NULL, WNOHANG) == atk) {
			printf("FAIL: the attacker exited before it watched (capture or raw socket)\n");
			return 1;
		}
		usleep(10000);
	}

	struct json *st = NULL;
	int rc = launch_job(&j.cfg, rank_main, &j, &st);
	kill(atk, SIGTERM);
	int ast = 0;
	waitpid(atk, &ast, 0);

	struct inca_comm_stats cs;
	uint64_t wrong, errs;
	itest_sum(&j.sh->it, j.cfg.nranks, &cs, &wrong, &errs);
	const struct json *drops = json_get(st, "drops");
	double d_auth = json_num(json_get(drops, "auth"), 0),
	       d_missing = json_num(json_get(drops, "auth_missing"), 0),
	       d_ctx = json_num(json_get(drops, "auth_ctx"), 0),
	       d_replay = json_num(json_get(drops, "auth_replay"), 0);
	uint64_t r_mac = 0, r_missing = 0, r_ver = 0, r_replay = 0;
	for (int r = 0; r < j.cfg.nranks; r++) {
		r_replay += j.sh->auth[r].rx_replay;
		r_mac += j.sh->auth[r].rx_bad_mac;
		r_missing += j.sh->auth[r].rx_missing;
		r_ver += j.sh->auth[r].rx_verified;
	}
	printf("# attacker: captured %llu packets; sent", (unsigned long long)j.sh->captured);
	for (int k = 0; k < K_COUNT; k++)
		printf(" %s %llu%s", kind_name[k], (unsigned long long)j.sh->sent[k],
		       k + 1 < K_COUNT ? "," : "\n");
	printf("# switch drops: auth %.0f, auth_missing %.0f, auth_ctx %.0f, auth_replay %.0f; "
	       "ranks: results verified %llu, bad MAC %llu, no block %llu, replays %llu, bad "
	       "packets %llu\n",
	       d_auth, d_missing, d_ctx, d_replay, (unsigned long long)r_ver,
	       (unsigned long long)r_mac, (unsigned long long)r_missing,
	       (unsigned long long)r_replay, (unsigned long long)cs.rx_bad);
	ITEST_EXPECT(fails, WIFSIGNALED(ast) && WTERMSIG(ast) == SIGTERM,
		     "the attacker ran until stopped (status %#x)", ast);
	for (int k = 0; k < K_COUNT; k++)
		ITEST_EXPECT(fails, j.sh->sent[k] > 0 || (control && k == K_FLIP_TAG), "attack '%s' was injected (%llu)",
			     kind_name[k], (unsigned long long)j.sh->sent[k]);
	if (control) {
		ITEST_EXPECT(fails, wrong > 0 || errs > 0 || rc != 0,
			     "control (no authentication): the attack did damage: %llu wrong "
			     "elements, %llu failed calls, job status %d",
			     (unsigned long long)wrong, (unsigned long long)errs, rc);
	} else {
		ITEST_EXPECT(fails, rc == 0, "switch and %d ranks ran and exited cleanly (%d)",
			     j.cfg.nranks, rc);
		ITEST_EXPECT(fails, wrong == 0 && errs == 0,
			     "%llu calls per rank under attack: %llu wrong elements, %llu failed calls",
			     (unsigned long long)j.sh->it.calls[0], (unsigned long long)wrong,
			     (unsigned long long)errs);
		ITEST_EXPECT(fails, d_auth > 0 && d_missing > 0,
			     "the switch dropped forged contributions by MAC (%.0f) and for a "
			     "missing block (%.0f)", d_auth, d_missing);
		ITEST_EXPECT(fails, d_replay > 0,
			     "the switch dropped replayed contributions in its replay windows "
			     "(%.0f)", d_replay);
		ITEST_EXPECT(fails, r_replay > 0,
			     "the ranks dropped replayed results in their replay windows (%llu)",
			     (unsigned long long)r_replay);
		ITEST_EXPECT(fails, r_mac > 0 && r_missing > 0,
			     "the ranks rejected forged results/notices by MAC (%llu) and for a "
			     "missing block (%llu)", (unsigned long long)r_mac,
			     (unsigned long long)r_missing);
	}
	json_free(st);
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails ? 1 : 0;
}
