/* bench-flood: what a flood of forged packets costs a legitimate, authenticated INC job. One
 * run, two phases on fresh switches and keys: 4 ranks doing exact int32 AllReduces on the INC
 * path alone, then the same job while a flooder process (root: AF_PACKET capture on lo, raw
 * IPv4 sends with spoofed sources) sends RATE packets per second, a third each of
 *   - forged contributions from a member's own ip:port to the switch: a captured header
 *     (tree, QPN, R_Key, slot, round, key id, context) with a fresh counter, a random tag and
 *     garbage data: the switch verifies the MAC and drops it (auth);
 *   - forged results from the switch's ip:port to a member, built the same way (rx_bad_mac);
 *   - captured packets of the job replayed verbatim to their destination (valid tags: the
 *     replay windows drop them, auth_replay / rx_replay).
 * Prints the median time per call of both phases and their ratio (the goal: at most 2x), the
 * drops by reason and what the flooder sent. --check is the test mode (meson suite
 * integration): it asserts that every result of both phases is exact and that the drops were
 * counted under the reasons above; it asserts nothing about time. Needs root (exit 77). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "json.h"
#include "launch.h"
#include "util/cli.h"
#include "util/util.h"
#include "wire/auth.h"
#include "wire/wire.h"

#define MAX_ITERS 512
#define CAPTURED 256 /* captured packets kept for templates and replays (a ring) */

enum kind { K_FORGED_UP, K_FORGED_DOWN, K_REPLAY, K_COUNT };
static const char *const kind_name[K_COUNT] = { "forged contributions", "forged results",
						"replays" };

struct phase {
	double call_s[MAX_ITERS]; /* rank 0's time per call */
	uint64_t wrong, errors;   /* all ranks */
	struct inca_auth_stats auth[LAUNCH_MAX_RANKS];
};

struct shared {
	struct phase ph[2];
	uint64_t sent[K_COUNT];
	uint64_t captured;
};

struct job {
	struct launch_cfg cfg;
	struct shared *sh;
	struct phase *ph;
	int iters;
	size_t count;
	bool mixed; /* --check: several sizes per round instead of one */
};

/* ------------------------------------------------------------------------- the flooder */

struct peer {
	bool known;
	uint32_t ip;   /* host order */
	uint16_t port; /* host order */
};

struct cap {
	size_t len;
	uint32_t src, dst;
	uint16_t sport, dport;
	uint8_t udp[WIRE_MAX_UDP_PAYLOAD];
};

struct flooder {
	int raw;
	uint32_t prefix; /* the job's /24, host order */
	struct peer sw;
	struct peer member[LAUNCH_MAX_RANKS + 1]; /* by BFR-id */
	struct cap ring[CAPTURED];
	unsigned ncap, next;
	int up_tmpl, down_tmpl; /* ring index of the last contribution / result seen, -1 none */
	uint64_t *sent;
	struct util_rng rng;
};

static uint8_t garbage[4096];

/* Raw IPv4 send of p from src:sport to dst:dport (IPv4 ID 1 marks the flooder's packets). */
static void raw_send(struct flooder *f, const struct wire_pkt *p, uint32_t src, uint16_t sport,
		     uint32_t dst, uint16_t dport, enum kind k)
{
	static const uint8_t mac[6];
	uint8_t buf[WIRE_ETH_LEN + WIRE_IPV4_LEN + WIRE_UDP_LEN + WIRE_MAX_UDP_PAYLOAD];
	struct wire_ipinfo ip = { .src_ip = src, .dst_ip = dst, .src_port = sport,
				  .dst_port = dport, .ip_id = 1 };
	int n = wire_encode_frame(buf, sizeof buf, mac, mac, p, &ip);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(dst) };

	if (n > WIRE_ETH_LEN && sendto(f->raw, buf + WIRE_ETH_LEN, (size_t)n - WIRE_ETH_LEN, 0,
				       (struct sockaddr *)&to, sizeof to) > 0)
		f->sent[k]++;
}

/* A captured packet as a template: fresh counter, random tag, garbage data. */
static bool forge_from(struct flooder *f, int idx, struct wire_pkt *p)
{
	if (idx < 0)
		return false; /* nothing captured yet */
	const struct cap *c = &f->ring[idx];

	if (wire_decode_udp(c->udp, c->len, p, NULL) != WIRE_OK ||
	    !(p->inca.flags & WIRE_F_AUTH))
		return false;
	p->auth.ctr = util_rng_next(&f->rng) >> 2;
	for (int i = 0; i < WIRE_AUTH_TAG_LEN; i++)
		p->auth.tag[i] = (uint8_t)util_rng_next(&f->rng);
	if (p->data_len)
		p->data = garbage;
	return true;
}

static void flood_one(struct flooder *f, enum kind k)
{
	struct wire_pkt p;

	if (k == K_FORGED_UP) {
		if (!forge_from(f, f->up_tmpl, &p) || !f->sw.known ||
		    p.inca.bfr_id > LAUNCH_MAX_RANKS || !f->member[p.inca.bfr_id].known)
			return;
		raw_send(f, &p, f->member[p.inca.bfr_id].ip, f->member[p.inca.bfr_id].port,
			 f->sw.ip, f->sw.port, k);
	} else if (k == K_FORGED_DOWN) {
		unsigned b = (unsigned)(util_rng_next(&f->rng) % LAUNCH_MAX_RANKS), tries = 0;
		while (tries++ < LAUNCH_MAX_RANKS && !f->member[b % LAUNCH_MAX_RANKS + 1].known)
			b++;
		b = b % LAUNCH_MAX_RANKS + 1;
		if (!forge_from(f, f->down_tmpl, &p) || !f->sw.known || !f->member[b].known)
			return;
		p.bth.dest_qp = 0x1000u + b; /* launch's QPN rule */
		raw_send(f, &p, f->sw.ip, f->sw.port, f->member[b].ip, f->member[b].port, k);
	} else if (f->ncap) {
		const struct cap *c = &f->ring[util_rng_next(&f->rng) % f->ncap];
		if (wire_decode_udp(c->udp, c->len, &p, NULL) == WIRE_OK)
			raw_send(f, &p, c->src, c->sport, c->dst, c->dport, k);
	}
}

/* One captured IPv4 datagram of the job: learn the peers, keep every INCA packet in it. */
static void capture(struct flooder *f, const uint8_t *ip, size_t n)
{
	uint32_t src, dst;
	uint16_t sport, dport;
	const uint8_t *u;
	size_t len;

	if (n < 28 + WIRE_ROCE_HDR_LEN || ip[0] != 0x45 || ip[9] != 17)
		return;
	src = (uint32_t)ip[12] << 24 | (uint32_t)ip[13] << 16 | (uint32_t)ip[14] << 8 | ip[15];
	dst = (uint32_t)ip[16] << 24 | (uint32_t)ip[17] << 16 | (uint32_t)ip[18] << 8 | ip[19];
	if ((src & 0xFFFFFF00u) != f->prefix || (dst & 0xFFFFFF00u) != f->prefix ||
	    (ip[4] == 0 && ip[5] == 1))
		return;
	sport = (uint16_t)(ip[20] << 8 | ip[21]);
	dport = (uint16_t)(ip[22] << 8 | ip[23]);
	u = ip + 28;
	len = n - 28;
	/* On loopback a GSO send is one datagram of several packets: walk them by DMA length. */
	while (len >= WIRE_ROCE_HDR_LEN + WIRE_ICRC_LEN) {
		uint32_t dma = (uint32_t)u[24] << 24 | (uint32_t)u[25] << 16 | (uint32_t)u[26] << 8 |
			       u[27];
		size_t one = WIRE_ROCE_HDR_LEN + dma + (4 - dma % 4) % 4 + WIRE_ICRC_LEN;
		struct wire_pkt p;

		if (dma > 4096 || one > len)
			return;
		if (wire_decode_udp(u, one, &p, NULL) == WIRE_OK) {
			struct cap *c = &f->ring[f->next];
			int idx = (int)f->next;

			if (!(p.inca.flags & (WIRE_F_RESULT | WIRE_F_NACK))) {
				f->sw = (struct peer){ true, dst, dport };
				if (p.inca.bfr_id >= 1 && p.inca.bfr_id <= LAUNCH_MAX_RANKS)
					f->member[p.inca.bfr_id] = (struct peer){ true, src, sport };
				f->up_tmpl = idx;
			} else if (p.inca.flags & WIRE_F_RESULT) {
				f->down_tmpl = idx;
			}
			memcpy(c->udp, u, one);
			c->len = one;
			c->src = src, c->dst = dst, c->sport = sport, c->dport = dport;
			f->next = (f->next + 1) % CAPTURED;
			if (f->ncap < CAPTURED)
				f->ncap++;
		}
		u += one;
		len -= one;
	}
}

static int flooder_main(struct shared *sh, uint32_t prefix, double rate_pps)
{
	static struct flooder f;
	static uint8_t buf[70000];
	int cap = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK, htons(ETH_P_IP));
	struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP),
				  .sll_ifindex = (int)if_nametoindex("lo") };
	uint64_t start = util_now_ns(), due = 0;

	f.prefix = prefix;
	f.sent = sh->sent;
	f.up_tmpl = f.down_tmpl = -1;
	util_rng_seed(&f.rng, (uint64_t)getpid() * 0x9E3779B97F4A7C15ull);
	f.raw = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	if (cap < 0 || f.raw < 0 || bind(cap, (struct sockaddr *)&ll, sizeof ll) < 0)
		return 3;
	memset(garbage, 0x5a, sizeof garbage);
	for (;;) {
		struct pollfd pfd = { .fd = cap, .events = POLLIN };
		uint64_t want;

		poll(&pfd, 1, 1);
		for (int i = 0; i < 256; i++) {
			struct sockaddr_ll from;
			socklen_t fl = sizeof from;
			ssize_t n = recvfrom(cap, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);

			if (n < 0)
				break;
			/* Each loopback packet shows up twice (outgoing and incoming): take one. */
			if (from.sll_pkttype == PACKET_OUTGOING)
				continue;
			sh->captured++;
			capture(&f, buf, (size_t)n);
		}
		/* Paced by the clock: everything due since the start, at most 512 at once. */
		want = (uint64_t)((double)(util_now_ns() - start) * 1e-9 * rate_pps);
		for (int i = 0; due < want && i < 512; i++, due++)
			flood_one(&f, (enum kind)(due % K_COUNT));
		if (due < want - (want > 4096 ? 4096 : want))
			due = want - 4096; /* behind by more than a burst: do not catch up later */
	}
}

/* ------------------------------------------------------------------------- the ranks */

static int rank_main(struct inca_comm *comm, void *arg)
{
	struct job *j = arg;
	static const size_t mixed[] = { 1, 1000, 50000, 300000 };
	size_t maxc = j->mixed ? 300000 : j->count;
	int32_t *sbuf = malloc(maxc * 4), *rbuf = malloc(maxc * 4);
	int rank = inca_comm_rank(comm);
	uint64_t wrong = 0, errors = 0;

	if (!sbuf || !rbuf)
		return 4;
	for (int it = -2; it < j->iters; it++) { /* two warm-up calls */
		size_t n = j->mixed ? mixed[(unsigned)(it + 2) % 4] : j->count;
		struct check_spec s = { .dt = INCA_INT32, .op = INCA_SUM, .mode = CHECK_EXACT,
					.nranks = j->cfg.nranks, .seed = 5, .iter = (uint64_t)(it + 3) };
		size_t first;
		uint64_t t0;
		int rc;

		check_fill(&s, rank, sbuf, 0, n);
		inca_barrier(comm);
		t0 = util_now_ns();
		rc = inca_allreduce_algo(comm, sbuf, rbuf, n, INCA_INT32, INCA_SUM, INCA_ALGO_INC);
		if (it >= 0 && rank == 0)
			j->ph->call_s[it] = (double)(util_now_ns() - t0) * 1e-9;
		if (rc) {
			if (errors++ < 3)
				fprintf(stderr, "[rank %d] INC int32:sum count %zu: %s\n", rank, n,
					inca_strerror(rc));
			continue;
		}
		wrong += check_verify(&s, rbuf, 0, n, &first);
	}
	__atomic_add_fetch(&j->ph->wrong, wrong, __ATOMIC_RELAXED);
	__atomic_add_fetch(&j->ph->errors, errors, __ATOMIC_RELAXED);
	inca_comm_get_auth_stats(comm, &j->ph->auth[rank], sizeof j->ph->auth[rank]);
	free(sbuf);
	free(rbuf);
	return wrong || errors ? 1 : 0;
}

/* ------------------------------------------------------------------------- the run */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n ? v[n / 2] : 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench-flood [--rate PPS] [--bytes N] [--iters N] [--trials N] [--ranks N]\n"
		"                   [--check] [--switch PATH] [--addr-index K] [--help] [--version]\n"
		"  --rate PPS      forged + replayed packets per second during phase 2 (20000)\n"
		"  --bytes N       bytes per AllReduce (int32 sum), K/M suffixes (1M)\n"
		"  --iters N       timed calls per job (30, at most %d)\n"
		"  --trials N      quiet + flooded job pairs; the ratio is their median (3, <= 16)\n"
		"  --check         test mode: several sizes, assert exact results and the drops by\n"
		"                  reason (no timing); exit 1 on a failed check, 77 without root\n",
		MAX_ITERS);
}

int main(int argc, char **argv)
{
	static const char P[] = "bench-flood";
	static const struct option lo[] = {
		{ "rate", required_argument, 0, 'R' },   { "bytes", required_argument, 0, 'B' },
		{ "iters", required_argument, 0, 'I' },  { "ranks", required_argument, 0, 'N' },
		{ "trials", required_argument, 0, 'T' }, { "check", no_argument, 0, 'C' },
		{ "switch", required_argument, 0, 'S' }, { "addr-index", required_argument, 0, 'A' },
		{ "help", no_argument, 0, 'h' },         { "version", no_argument, 0, 'V' },
		{ 0, 0, 0, 0 },
	};
	struct job j;
	double rate = 20000;
	int trials = 3;
	uint64_t bytes = 1u << 20;
	bool check = false;
	long long ll;
	int c, fails = 0;

	launch_cfg_defaults(&j.cfg);
	j.cfg.addr_index = 43;
	j.iters = 30;
	while ((c = getopt_long(argc, argv, "hV", lo, NULL)) != -1) {
		switch (c) {
		case 'R':
			if (util_cli_double(P, "--rate", optarg, 1, 1e7, false, &rate))
				return 2;
			break;
		case 'B':
			if (util_cli_bytes(P, "--bytes", optarg, 4, 1u << 30, &bytes))
				return 2;
			break;
		case 'I':
			if (util_cli_int(P, "--iters", optarg, 1, MAX_ITERS, &ll))
				return 2;
			j.iters = (int)ll;
			break;
		case 'N':
			if (util_cli_int(P, "--ranks", optarg, 2, LAUNCH_MAX_RANKS, &ll))
				return 2;
			j.cfg.nranks = (int)ll;
			break;
		case 'T':
			if (util_cli_int(P, "--trials", optarg, 1, 16, &ll))
				return 2;
			trials = (int)ll;
			break;
		case 'C': check = true; break;
		case 'S': j.cfg.switch_path = optarg; break;
		case 'A':
			if (util_cli_int(P, "--addr-index", optarg, 1, 255, &ll))
				return 2;
			j.cfg.addr_index = (unsigned)ll;
			break;
		case 'h': usage(stdout); return 0;
		case 'V': util_cli_print_version(P); return 0;
		default: fprintf(stderr, "%s: --help lists the options\n", P); return 2;
		}
	}
	if (optind != argc) {
		util_cli_error(P, "unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (geteuid() != 0) {
		printf("SKIP: needs root (raw sockets and a capture on lo for the flood)\n");
		return 77;
	}
	j.count = (size_t)(bytes / 4);
	j.mixed = check;
	if (check) {
		j.iters = 16;
		trials = 1;
	}
	j.cfg.rto_us = 5000;
	j.cfg.timeout_ms = 20000;
	j.cfg.retx_limit = 20;
	j.sh = launch_shm_alloc(sizeof *j.sh);
	if (!j.sh)
		return 2;

	struct launch_addrs a;
	struct in_addr pfx;
	char p4[LAUNCH_IP_LEN + 2];
	if (launch_addrs_init(&a, j.cfg.addr_index) < 0)
		return 2;
	snprintf(p4, sizeof p4, "%s0", a.prefix);
	if (inet_pton(AF_INET, p4, &pfx) != 1)
		return 2;

	char bs[32];
	printf("# bench-flood: %d ranks, INC int32 sum, %s per call, %d calls per phase; phase 2 "
	       "under %.0f forged/replayed packets per second\n",
	       j.cfg.nranks, check ? "1 .. 300000 elements" : launch_fmt_bytes(bytes, bs, sizeof bs),
	       j.iters, rate);
	const struct launch_cfg cfg0 = j.cfg;
	/* Trials alternate quiet and flooded jobs, so a load change on a shared machine hits
	 * both; the ratio reported is the median of the per-trial ratios. */
	struct json *st[2] = { NULL, NULL };
	int rc[2] = { 0, 0 };
	double t[2], ratio[16];
	for (int tr = 0; tr < trials; tr++) {
		for (int ph = 0; ph < 2; ph++) {
			pid_t fl = -1;
			int r;

			/* A fresh key and switch per job (launch_job starts its own switch). */
			j.cfg = cfg0;
			if (wire_auth_key_random(j.cfg.auth_key) < 0)
				return 2;
			j.ph = &j.sh->ph[ph];
			memset(j.ph->call_s, 0, sizeof j.ph->call_s);
			fflush(NULL);
			if (ph == 1) {
				fl = fork();
				if (fl == 0)
					_exit(flooder_main(j.sh, ntohl(pfx.s_addr), rate));
				usleep(100000);
			}
			json_free(st[ph]);
			st[ph] = NULL;
			r = launch_job(&j.cfg, rank_main, &j, &st[ph]);
			rc[ph] = rc[ph] ? rc[ph] : r;
			if (fl > 0) {
				int ws = 0;
				kill(fl, SIGTERM);
				waitpid(fl, &ws, 0);
				if (!WIFSIGNALED(ws))
					fprintf(stderr, "flooder exited early (status %#x)\n", ws);
			}
			t[ph] = median(j.ph->call_s, j.iters);
		}
		ratio[tr] = t[0] > 0 ? t[1] / t[0] : 0;
		printf("# trial %d: median per call quiet %.3f ms, flood %.3f ms, ratio %.2f\n", tr + 1,
		       t[0] * 1e3, t[1] * 1e3, ratio[tr]);
	}
	double rmed = median(ratio, trials);

	const struct json *drops = json_get(st[1], "drops");
	double d_auth = json_num(json_get(drops, "auth"), 0),
	       d_replay = json_num(json_get(drops, "auth_replay"), 0),
	       d_sender = json_num(json_get(drops, "unknown_sender"), 0);
	uint64_t r_mac = 0, r_replay = 0, r_ver = 0;
	for (int r = 0; r < j.cfg.nranks; r++) {
		r_mac += j.sh->ph[1].auth[r].rx_bad_mac;
		r_replay += j.sh->ph[1].auth[r].rx_replay;
		r_ver += j.sh->ph[1].auth[r].rx_verified;
	}
	printf("# flooder: captured %llu packets; sent", (unsigned long long)j.sh->captured);
	for (int k = 0; k < K_COUNT; k++)
		printf(" %s %llu%s", kind_name[k], (unsigned long long)j.sh->sent[k],
		       k + 1 < K_COUNT ? "," : "\n");
	printf("# switch drops under flood: auth %.0f, auth_replay %.0f, unknown_sender %.0f; "
	       "ranks: results verified %llu, bad MAC %llu, replays %llu\n",
	       d_auth, d_replay, d_sender, (unsigned long long)r_ver, (unsigned long long)r_mac,
	       (unsigned long long)r_replay);
	printf("# flood/quiet time per call, median of %d trials: %.2f (goal: at most 2)\n", trials,
	       rmed);
	printf("{\"bench\":\"flood\",\"rate_pps\":%.0f,\"bytes\":%llu,\"last_quiet_s\":%.6g,"
	       "\"last_flood_s\":%.6g,\"ratio\":%.4g,\"sent\":%llu,\"drops_auth\":%.0f,"
	       "\"drops_auth_replay\":%.0f,\"rx_bad_mac\":%llu,\"rx_replay\":%llu}\n",
	       rate, (unsigned long long)bytes, t[0], t[1], rmed,
	       (unsigned long long)(j.sh->sent[0] + j.sh->sent[1] + j.sh->sent[2]), d_auth,
	       d_replay, (unsigned long long)r_mac, (unsigned long long)r_replay);
	for (int ph = 0; ph < 2; ph++) {
		const struct phase *p = &j.sh->ph[ph];
		if (!check)
			break;
		printf("%s: phase %d (%s): job status %d, %llu wrong elements, %llu failed calls\n",
		       rc[ph] == 0 && p->wrong == 0 && p->errors == 0 ? "ok  " : "FAIL", ph + 1,
		       ph ? "flood" : "quiet", rc[ph], (unsigned long long)p->wrong,
		       (unsigned long long)p->errors);
		fails += !(rc[ph] == 0 && p->wrong == 0 && p->errors == 0);
	}
	if (check) {
		bool sent_all = j.sh->sent[0] && j.sh->sent[1] && j.sh->sent[2];
		printf("%s: the flooder sent every kind\n", sent_all ? "ok  " : "FAIL");
		printf("%s: the switch dropped forged contributions by MAC (%.0f) and replays in "
		       "its windows (%.0f)\n", d_auth > 0 && d_replay > 0 ? "ok  " : "FAIL", d_auth,
		       d_replay);
		printf("%s: the ranks dropped forged results by MAC (%llu) and replays in their "
		       "windows (%llu)\n", r_mac > 0 && r_replay > 0 ? "ok  " : "FAIL",
		       (unsigned long long)r_mac, (unsigned long long)r_replay);
		fails += !sent_all + !(d_auth > 0 && d_replay > 0) + !(r_mac > 0 && r_replay > 0);
		printf("%s\n", fails ? "FAILED" : "PASSED");
	}
	json_free(st[0]);
	json_free(st[1]);
	return check && fails ? 1 : rc[0] || rc[1] ? 1 : 0;
}
