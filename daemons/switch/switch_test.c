/* Daemon tests for inca-switch: start the real binary, speak INCA/RoCEv2 to it over loopback
 * (127.0.0.x, each case its own addresses) with packets built by lib/wire, and check results,
 * drop reasons in the stats JSON and a clean SIGTERM exit.
 * Usage: switch_test PATH-TO-inca-switch allreduce|threads|multilevel|lossy|anyaddr|reflect|
 *        badconfig|hostile */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agg/agg.h"
#include "util/test_check.h"
#include "util/udpio.h"
#include "util/util.h"
#include "wire/auth.h"
#include "wire/wire.h"

#define MAX_SWITCHES 2
#define COUNT 256 /* int32 elements per packet: 1 KiB, so results leave by reference */

static const char *switch_path;
static pid_t children[MAX_SWITCHES];
static char tmpdir[64];

static void kill_children(void)
{
	for (int i = 0; i < MAX_SWITCHES; i++)
		if (children[i] > 0) {
			kill(children[i], SIGKILL);
			waitpid(children[i], NULL, 0);
			children[i] = 0;
		}
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	kill_children();
	exit(1);
}

static void on_alarm(int sig)
{
	(void)sig;
	kill_children();
	_exit(3);
}

/* ---------------------------------------------------------------- process control */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fputs(text, f);
	fclose(f);
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = calloc(1, 1 << 20);
	CHECK(buf != NULL);
	n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* Start inca-switch with argv (NULL-terminated, without argv[0]) and wait for its ready file. */
static void start_switch(int idx, const char *ready, char *const args[])
{
	char *argv[32];
	int n = 0;
	pid_t pid;

	argv[n++] = (char *)switch_path;
	for (int i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	unlink(ready);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		execv(switch_path, argv);
		perror("execv");
		_exit(127);
	}
	children[idx] = pid;
	for (int i = 0; i < 500; i++) { /* up to 5 s */
		int st;
		if (access(ready, F_OK) == 0)
			return;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			children[idx] = 0;
			die("inca-switch exited early (status %d)", st);
		}
		usleep(10000);
	}
	die("inca-switch did not create %s", ready);
}

/* SIGTERM and expect exit status 0 within 5 s. */
static void stop_switch(int idx)
{
	pid_t pid = children[idx];
	int st = 0;

	CHECK(pid > 0);
	CHECK(kill(pid, SIGTERM) == 0);
	for (int i = 0; i < 500; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			children[idx] = 0;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				die("inca-switch did not exit cleanly (status 0x%x)", st);
			return;
		}
		usleep(10000);
	}
	die("inca-switch did not stop after SIGTERM");
}

/* ---------------------------------------------------------------- stats JSON */

/* Value of "key": N inside the object that starts at the first "section": { (or anywhere if
 * section is NULL). The switch writes every key of a section, so absence is an error. */
static long long json_get(const char *json, const char *section, const char *key)
{
	const char *p = json, *end;
	char pat[128];

	if (section) {
		snprintf(pat, sizeof pat, "\"%s\": {", section);
		p = strstr(json, pat);
		if (!p)
			return -1;
	}
	end = strchr(p + 1, '}');
	snprintf(pat, sizeof pat, "\"%s\": ", key);
	p = strstr(p, pat);
	if (!p || (end && p > end && section))
		return -1;
	return strtoll(p + strlen(pat), NULL, 10);
}

/* ---------------------------------------------------------------- members */

struct member {
	int fd;
	struct sockaddr_in addr;
	uint16_t bfr;
	uint32_t qpn;
	uint32_t psn;
	uint32_t rx_psn; /* next PSN expected from the switch */
	bool psn_any_order; /* several switch threads: PSNs unique, not in arrival order */
	uint8_t psn_seen[4096];
	uint8_t flags; /* INCA flags of the next contribution (WIRE_F_RETX) */
	uint16_t pkey; /* BTH P_Key of its contributions (0: the default 0xFFFF) */
	uint8_t extra_bits; /* BFR-ids 1..8 (bit k-1) added to its P-BM */
	struct sockaddr_in sw; /* its switch */
	uint32_t sw_qpn;
	uint16_t tree;
	uint32_t key;
	/* Authentication (test_auth): sign with mac if set, as context ctx, key id key_id; a
	 * received result must verify under it. bad_tag flips a tag byte after signing. */
	struct wire_mac *mac;
	uint32_t key_id, ctx;
	uint64_t ctr;
	uint32_t epoch; /* job epoch sent (and expected back) */
	bool bad_tag;
};

static int open_sock(const char *ip, uint16_t port, struct sockaddr_in *out)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	int pmtu = IP_PMTUDISC_DO;
	struct timeval tv = { 2, 0 };
	char a[64];

	CHECK(fd >= 0);
	snprintf(a, sizeof a, "%s:%u", ip, port);
	CHECK(util_parse_addr(a, -1, out) == 0);
	/* DF + IP ID 0, so the switch can verify our ICRC. */
	CHECK(setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) == 0);
	CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
	if (bind(fd, (struct sockaddr *)out, sizeof *out) < 0)
		die("bind %s: %s", a, strerror(errno));
	return fd;
}

static void member_init(struct member *m, const char *ip, uint16_t bfr, const char *sw_ip,
			uint16_t tree, uint32_t key)
{
	memset(m, 0, sizeof *m);
	m->fd = open_sock(ip, 4791, &m->addr);
	m->bfr = bfr;
	m->qpn = 0x1000 + bfr;
	m->tree = tree;
	m->key = key;
	m->sw_qpn = 0x100 + tree;
	CHECK(util_parse_addr(sw_ip, 4791, &m->sw) == 0); /* "ip" or "ip:port" */
}

static struct wire_ipinfo ipinfo(const struct sockaddr_in *src, const struct sockaddr_in *dst)
{
	return (struct wire_ipinfo){
		.src_ip = ntohl(src->sin_addr.s_addr),
		.dst_ip = ntohl(dst->sin_addr.s_addr),
		.src_port = ntohs(src->sin_port),
		.dst_port = ntohs(dst->sin_port),
		.ip_id = 0,
		.id_unseen = true, /* receiving: a UDP socket does not show the ID (GSO segments) */
	};
}

static int32_t value(const struct member *m, uint16_t slot, uint32_t round, int i)
{
	/* unsigned arithmetic: large rounds wrap like the switch's int32 sums (no overflow) */
	return (int32_t)((uint32_t)m->bfr * 1000u + slot * 10u + (uint32_t)i + round * 100000u);
}

/* A contribution of member m for (slot, round), encoded into buf. */
static int build(const struct member *m, uint16_t slot, uint32_t round, uint8_t *buf, size_t cap,
		 uint8_t *bits)
{
	static int32_t data[COUNT];
	struct wire_pkt p;
	struct wire_ipinfo ip = ipinfo(&m->addr, &m->sw);
	int len;

	for (int i = 0; i < COUNT; i++)
		data[i] = value(m, slot, round, i);
	memset(bits, 0, 8);
	wire_bier_set(bits, 8, wire_bier_bp(m->bfr, 64, 0));
	for (unsigned k = 1; k <= 8; k++)
		if (m->extra_bits & (1u << (k - 1)))
			wire_bier_set(bits, 8, wire_bier_bp((uint16_t)k, 64, 0));
	memset(&p, 0, sizeof p);
	p.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
	p.bth.pkey = m->pkey ? m->pkey : WIRE_PKEY_DEFAULT;
	p.bth.dest_qp = m->sw_qpn;
	p.bth.psn = m->psn & 0xFFFFFF;
	p.reth.va = (uint64_t)slot * sizeof data;
	p.reth.rkey = m->key;
	p.imm = round * 1000u + slot;
	p.inca.version = WIRE_INCA_VERSION;
	p.inca.flags = m->flags;
	p.inca.coll = WIRE_COLL_ALLREDUCE;
	p.inca.dtype = INCA_INT32;
	p.inca.op = INCA_SUM;
	p.inca.tree_id = m->tree;
	p.inca.slot = slot;
	p.inca.round = round;
	p.inca.bfr_id = m->bfr;
	p.inca.bsl_code = 1;
	p.inca.si = 0;
	p.inca.count = COUNT;
	p.inca.bits = bits;
	p.data = (const uint8_t *)data;
	p.data_len = sizeof data;
	if (m->mac) {
		p.inca.flags |= WIRE_F_AUTH;
		p.auth.key_id = m->key_id;
		p.auth.ctx = m->ctx;
		p.auth.ctr = m->ctr + m->psn; /* psn: +1 per packet sent */
		p.inca.epoch = m->epoch;
		CHECK(wire_mac_sign(m->mac, &p) == 0);
		if (m->bad_tag)
			p.auth.tag[3] ^= 1;
	}
	len = wire_encode_udp(buf, cap, &p, &ip);
	CHECK(len > 0);
	return len;
}

static void send_raw(struct member *m, const uint8_t *buf, size_t len)
{
	ssize_t r = sendto(m->fd, buf, len, 0, (struct sockaddr *)&m->sw, sizeof m->sw);
	CHECK(r == (ssize_t)len);
	m->psn++;
}

static void contribute(struct member *m, uint16_t slot, uint32_t round)
{
	uint8_t buf[WIRE_MAX_UDP_PAYLOAD], bits[8];
	int len = build(m, slot, round, buf, sizeof buf, bits);
	send_raw(m, buf, (size_t)len);
}

/* Receive one result and check it: from the switch, ICRC valid, addressed to m's QP, PSN in
 * sequence, the sum of all members' values. Returns the slot. */
static uint16_t expect_result(struct member *m, struct member *const *all, int nall,
			      uint32_t *round_out)
{
	uint8_t buf[WIRE_MAX_UDP_PAYLOAD + 64];
	struct sockaddr_in from;
	socklen_t fl = sizeof from;
	struct wire_pkt p;
	struct wire_ipinfo ip;
	enum wire_err e;
	ssize_t n = recvfrom(m->fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);

	if (n < 0)
		die("member %u: no result (%s)", m->bfr, strerror(errno));
	CHECK(from.sin_addr.s_addr == m->sw.sin_addr.s_addr && from.sin_port == m->sw.sin_port);
	ip = ipinfo(&m->sw, &m->addr);
	e = wire_decode_udp(buf, (size_t)n, &p, &ip);
	if (e != WIRE_OK)
		die("member %u: result rejected: %s", m->bfr, wire_err_name(e));
	CHECK(p.inca.flags & WIRE_F_RESULT);
	if (m->mac) {
		/* signed by a switch (context 0x10000 | the BFR-id it sends with) */
		CHECK(p.inca.flags & WIRE_F_AUTH);
		CHECK_EQ(p.auth.key_id, m->key_id);
		CHECK_EQ(p.auth.ctx, WIRE_AUTH_CTX_SWITCH | p.inca.bfr_id);
		CHECK_EQ(p.inca.epoch, m->epoch);
		CHECK_EQ(wire_mac_verify(m->mac, &p), 0);
	} else {
		CHECK(!(p.inca.flags & WIRE_F_AUTH));
	}
	CHECK_EQ(p.bth.dest_qp, m->qpn);
	if (m->psn_any_order) {
		CHECK(p.bth.psn < sizeof m->psn_seen);
		CHECK(!m->psn_seen[p.bth.psn]); /* one PSN sequence per QP across threads */
		m->psn_seen[p.bth.psn] = 1;
	} else {
		CHECK_EQ(p.bth.psn, m->rx_psn & 0xFFFFFF);
	}
	m->rx_psn++;
	CHECK_EQ(p.reth.rkey, m->key);
	CHECK_EQ(p.inca.tree_id, m->tree);
	CHECK_EQ(p.inca.count, COUNT);
	CHECK_EQ(p.data_len, COUNT * 4);
	CHECK(wire_bier_test(p.inca.bits, 8, wire_bier_bp(m->bfr, 64, 0)));
	for (int i = 0; i < COUNT; i++) {
		int32_t want, got;
		uint32_t sum = 0;
		for (int k = 0; k < nall; k++)
			sum += (uint32_t)value(all[k], p.inca.slot, p.inca.round, i);
		want = (int32_t)sum;
		memcpy(&got, p.data + 4 * i, 4);
		if (got != want)
			die("member %u slot %u round %u elem %d: got %d want %d", m->bfr,
			    p.inca.slot, p.inca.round, i, got, want);
	}
	if (round_out)
		*round_out = p.inca.round;
	return p.inca.slot;
}

/* Every member contributes to slots [0, nslots) of `round`, then every member collects
 * nslots results covering each slot once. */
static void run_round(struct member *const *ms, int n, uint16_t nslots, uint32_t round)
{
	for (uint16_t s = 0; s < nslots; s++)
		for (int k = 0; k < n; k++)
			contribute(ms[k], s, round);
	for (int k = 0; k < n; k++) {
		uint8_t seen[256] = { 0 };
		for (uint16_t s = 0; s < nslots; s++) {
			uint32_t r;
			uint16_t slot = expect_result(ms[k], ms, n, &r);
			CHECK(slot < nslots);
			CHECK_EQ(r, round);
			CHECK(!seen[slot]);
			seen[slot] = 1;
		}
	}
}

/* Recompute the ICRC after editing a packet (same byte order the encoder used). */
static void fix_icrc(const struct member *m, uint8_t *buf, size_t len, bool le)
{
	struct wire_ipinfo ip = ipinfo(&m->addr, &m->sw);
	uint32_t c = wire_icrc(&ip, buf, len);

	if (le) {
		buf[len - 4] = (uint8_t)c;
		buf[len - 3] = (uint8_t)(c >> 8);
		buf[len - 2] = (uint8_t)(c >> 16);
		buf[len - 1] = (uint8_t)(c >> 24);
	} else {
		buf[len - 4] = (uint8_t)(c >> 24);
		buf[len - 3] = (uint8_t)(c >> 16);
		buf[len - 2] = (uint8_t)(c >> 8);
		buf[len - 1] = (uint8_t)c;
	}
}

static bool icrc_is_le(const struct member *m, const uint8_t *buf, size_t len)
{
	struct wire_ipinfo ip = ipinfo(&m->addr, &m->sw);
	uint32_t c = wire_icrc(&ip, buf, len);
	uint8_t le[4] = { (uint8_t)c, (uint8_t)(c >> 8), (uint8_t)(c >> 16), (uint8_t)(c >> 24) };

	return memcmp(buf + len - 4, le, 4) == 0;
}

/* Wait until the stats file shows drops_total >= want (after SIGUSR1). */
static char *wait_stats(const char *path, pid_t pid, const char *key, long long want)
{
	for (int i = 0; i < 100; i++) {
		char *j;
		kill(pid, SIGUSR1);
		usleep(30000);
		j = read_file(path);
		if (j && json_get(j, NULL, key) >= want)
			return j;
		free(j);
	}
	die("stats file %s never showed %s >= %lld", path, key, want);
}

/* ---------------------------------------------------------------- cases */

static void test_allreduce(void)
{
	char conf[128], stats[128], ready[128];
	struct member m[4];
	struct member *ms[3] = { &m[0], &m[1], &m[2] };
	const uint32_t key = 0x5eed0001;
	uint8_t buf[WIRE_MAX_UDP_PAYLOAD], bits[8];
	int len;
	bool le;
	char *j;

	snprintf(conf, sizeof conf, "%s/switch.conf", tmpdir);
	snprintf(stats, sizeof stats, "%s/stats.json", tmpdir);
	snprintf(ready, sizeof ready, "%s/ready", tmpdir);
	{
		char text[2048];
		snprintf(text, sizeof text,
			 "# test switch\n"
			 "listen = 127.0.0.99:4791\n"
			 "threads = 1\n"
			 "check_icrc = yes\n"
			 "stats_file = %s\n"
			 "stats_interval_ms = 100\n"
			 "tree 1 {\n"
			 "  key = 0x5eed0001\n"
			 "  qpn = 0x101\n"
			 "  slots = 8\n"
			 "  slot_bytes = 4096\n"
			 "  role = root\n"
			 "  member = 1 127.0.0.100:4791 qpn 0x1001\n"
			 "  member = 2 127.0.0.101:4791\n"
			 "  member = 3 127.0.0.102:4791\n"
			 "  auth = off\n"
			 "}\n",
			 stats);
		write_file(conf, text);
	}
	start_switch(0, ready, (char *const[]){ "-c", conf, "--ready-file", ready, NULL });
	member_init(&m[0], "127.0.0.100", 1, "127.0.0.99", 1, key);
	member_init(&m[1], "127.0.0.101", 2, "127.0.0.99", 1, key);
	member_init(&m[2], "127.0.0.102", 3, "127.0.0.99", 1, key);
	member_init(&m[3], "127.0.0.103", 4, "127.0.0.99", 1, key); /* not a member */

	run_round(ms, 3, 4, 0);
	run_round(ms, 3, 4, 1);
	run_round(ms, 3, 8, 2); /* slots 4..7 start at round 2: rounds are per slot */

	/* A retransmitted contribution of a completed round gets the stored result again. */
	contribute(&m[1], 3, 2);
	CHECK_EQ(expect_result(&m[1], ms, 3, NULL), 3);

	/* Malformed and unauthorised packets, one per reason, all on slot 5 round 3. */
	len = build(&m[0], 5, 3, buf, sizeof buf, bits);
	le = icrc_is_le(&m[0], buf, (size_t)len);
	{
		/* wrong R_Key: RETH R_Key at UDP payload offset 12 + 8 */
		uint8_t b[WIRE_MAX_UDP_PAYLOAD];
		memcpy(b, buf, (size_t)len);
		b[20] ^= 0xff;
		fix_icrc(&m[0], b, (size_t)len, le);
		send_raw(&m[0], b, (size_t)len);
		/* unknown tree: INCA tree id at 32 + 4 */
		memcpy(b, buf, (size_t)len);
		b[36] = 0x00;
		b[37] = 77;
		fix_icrc(&m[0], b, (size_t)len, le);
		send_raw(&m[0], b, (size_t)len);
		/* bad QPN: BTH DestQP at 5..7 */
		memcpy(b, buf, (size_t)len);
		b[7] ^= 0x55;
		fix_icrc(&m[0], b, (size_t)len, le);
		send_raw(&m[0], b, (size_t)len);
		/* truncated */
		send_raw(&m[0], buf, 20);
		/* bad DMA length: RETH DMA length at 24..27 */
		memcpy(b, buf, (size_t)len);
		b[27] += 4;
		fix_icrc(&m[0], b, (size_t)len, le);
		send_raw(&m[0], b, (size_t)len);
		/* bad ICRC */
		memcpy(b, buf, (size_t)len);
		b[len - 1] ^= 0x01;
		send_raw(&m[0], b, (size_t)len);
		/* unknown dtype: INCA byte 2 */
		memcpy(b, buf, (size_t)len);
		b[34] = 12;
		fix_icrc(&m[0], b, (size_t)len, le);
		send_raw(&m[0], b, (size_t)len);
	}
	/* unknown source address, otherwise a perfect packet */
	contribute(&m[3], 5, 3);

	/* The valid packet still aggregates fine afterwards. */
	run_round(ms, 3, 8, 3);

	j = wait_stats(stats, children[0], "drops_total", 8);
	CHECK_EQ(json_get(j, "drops", agg_verdict_name(AGG_DROP_KEY)), 1);
	CHECK_EQ(json_get(j, "drops", "unknown_tree"), 1);
	CHECK_EQ(json_get(j, "drops", "bad_qpn"), 1);
	CHECK_EQ(json_get(j, "drops", wire_err_name(WIRE_E_TRUNCATED)), 1);
	CHECK_EQ(json_get(j, "drops", wire_err_name(WIRE_E_DMALEN)), 1);
	CHECK_EQ(json_get(j, "drops", wire_err_name(WIRE_E_ICRC)), 1);
	CHECK_EQ(json_get(j, "drops", wire_err_name(WIRE_E_DTYPE)), 1);
	CHECK_EQ(json_get(j, "drops", "unknown_sender"), 1);
	CHECK_EQ(json_get(j, NULL, "drops_total"), 8);
	free(j);

	stop_switch(0);
	j = read_file(stats);
	CHECK(j != NULL);
	CHECK_EQ(json_get(j, NULL, "drops_total"), 8);
	CHECK_EQ(json_get(j, NULL, "aggregations"), 4 + 4 + 8 + 8);
	CHECK_EQ(json_get(j, NULL, "contributions"), 3 * (4 + 4 + 8 + 8));
	CHECK_EQ(json_get(j, NULL, "results_resent"), 1);
	/* every datagram the members sent was received */
	CHECK_EQ(json_get(j, NULL, "rx_pkts"), 3 * 24 + 1 + 8);
	CHECK_EQ(json_get(j, NULL, "tx_pkts"), 3 * 24 + 1);
	CHECK(strstr(j, "\"addr\": \"127.0.0.100:4791\", \"qpn\": 4097") != NULL);
	free(j);
	for (int i = 0; i < 4; i++)
		close(m[i].fd);
}

/* A tree with packet authentication: signed contributions aggregate and the result comes
 * back signed (one tag shared by the copies); an unsigned contribution, another key id, another
 * member's context and a flipped tag are each dropped and counted by reason. */
static void test_auth(void)
{
	static const char key_hex[] =
		"f00102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
	char conf[128], stats[128], ready[128], text[2048];
	uint8_t key[WIRE_AUTH_KEY_LEN];
	struct member m[3];
	struct member *ms[3] = { &m[0], &m[1], &m[2] };
	struct wire_mac *mac;

	CHECK(wire_auth_key_parse(key_hex, key) == 0);
	CHECK(wire_mac_new(&mac, key) == 0);
	snprintf(conf, sizeof conf, "%s/auth.conf", tmpdir);
	snprintf(stats, sizeof stats, "%s/auth.json", tmpdir);
	snprintf(ready, sizeof ready, "%s/auth.ready", tmpdir);
	snprintf(text, sizeof text,
		 "listen = 127.0.0.89:4791\nthreads = 1\nstats_file = %s\n"
		 "stats_interval_ms = 100\n"
		 "tree 1 {\n  key = 0x5eed0001\n  slots = 8\n  role = root\n"
		 "  auth_key = %s\n  auth_key_id = 9\n"
		 "  member = 1 127.0.0.90:4791\n  member = 2 127.0.0.91:4791\n"
		 "  member = 3 127.0.0.92:4791\n}\n",
		 stats, key_hex);
	write_file(conf, text);
	start_switch(0, ready, (char *const[]){ "-c", conf, "--ready-file", ready, NULL });
	for (int i = 0; i < 3; i++) {
		char ip[32];
		snprintf(ip, sizeof ip, "127.0.0.%d", 90 + i);
		member_init(&m[i], ip, (uint16_t)(i + 1), "127.0.0.89", 1, 0x5eed0001);
		m[i].mac = mac;
		m[i].key_id = 9;
		m[i].ctx = (uint32_t)(i + 1);
		m[i].ctr = 1000u * (uint64_t)(i + 1);
	}
	run_round(ms, 3, 4, 0);

	/* Round 1 of slot 0: four bad contributions from member 1, then the good ones. */
	m[0].mac = NULL; /* no block */
	contribute(&m[0], 0, 1);
	m[0].mac = mac;
	m[0].key_id = 8; /* another key id */
	contribute(&m[0], 0, 1);
	m[0].key_id = 9;
	m[0].ctx = 2; /* claims member 2's context from member 1's address */
	contribute(&m[0], 0, 1);
	m[0].ctx = 1;
	m[0].bad_tag = true;
	contribute(&m[0], 0, 1);
	m[0].bad_tag = false;
	/* none of them counted as member 1's contribution: the round completes only now */
	contribute(&m[1], 0, 1);
	contribute(&m[2], 0, 1);
	contribute(&m[0], 0, 1);
	for (int k = 0; k < 3; k++)
		CHECK_EQ(expect_result(&m[k], ms, 3, NULL), 0);

	/* Replays: member 1 sends its previous counter again (slot 1, round 1: content it never
	 * signed under that counter, but the window refuses it before the MAC), then the
	 * round completes with fresh counters. */
	m[0].psn--;
	contribute(&m[0], 1, 1);
	contribute(&m[1], 1, 1);
	contribute(&m[2], 1, 1);
	contribute(&m[0], 1, 1);
	for (int k = 0; k < 3; k++)
		CHECK_EQ(expect_result(&m[k], ms, 3, NULL), 1);
	/* A new job epoch (a later job on the tree with the same key): the senders' windows
	 * restart even though member 2's counters go back, results carry the new epoch, and a
	 * straggler of the older epoch is a replay. */
	for (int i = 0; i < 3; i++)
		m[i].epoch = 7;
	m[1].ctr -= 500;
	run_round(ms, 3, 4, 40);
	m[2].epoch = 6;
	contribute(&m[2], 0, 41);
	m[2].epoch = 7;
	run_round(ms, 3, 4, 41);

	char *j = wait_stats(stats, children[0], "drops_total", 6);
	CHECK_EQ(json_get(j, "drops", "auth_missing"), 1);
	CHECK_EQ(json_get(j, "drops", "auth_key_id"), 1);
	CHECK_EQ(json_get(j, "drops", "auth_ctx"), 1);
	CHECK_EQ(json_get(j, "drops", "auth"), 1);
	CHECK_EQ(json_get(j, "drops", "auth_replay"), 2);
	CHECK(strstr(j, "\"auth\": \"on\"") != NULL);
	free(j);
	stop_switch(0);
	for (int i = 0; i < 3; i++)
		close(m[i].fd);
	wire_mac_free(mac);
}

/* Two worker threads, flags-only configuration: the BPF steering must deliver every slot to
 * the shard that owns it, block by block (WIRE_SLOT_BLOCK slots; otherwise drop_slot counts),
 * and both threads must get work. */
static void test_threads(void)
{
	char stats[128], ready[128];
	struct member m[2];
	struct member *ms[2] = { &m[0], &m[1] };
	char *j;

	snprintf(stats, sizeof stats, "%s/stats.json", tmpdir);
	snprintf(ready, sizeof ready, "%s/ready", tmpdir);
	start_switch(0, ready,
		     (char *const[]){ "--listen", "127.0.0.104:4791", "--threads", "2", "--tree",
				      "auth=off,id=2,key=0x77,slots=30,members=1@127.0.0.105:4791+2@127.0.0.106",
				      "--stats-file", stats, "--stats-interval-ms", "0",
				      "--ready-file", ready, NULL });
	member_init(&m[0], "127.0.0.105", 1, "127.0.0.104", 2, 0x77);
	member_init(&m[1], "127.0.0.106", 2, "127.0.0.104", 2, 0x77);
	m[0].psn_any_order = m[1].psn_any_order = true;
	for (uint32_t r = 0; r < 3; r++)
		run_round(ms, 2, 30, r);
	for (int k = 0; k < 2; k++) /* PSNs 0..89 each seen once */
		for (int i = 0; i < 90; i++)
			CHECK(m[k].psn_seen[i]);
	stop_switch(0);
	j = read_file(stats);
	CHECK(j != NULL);
	CHECK_EQ(json_get(j, NULL, "threads"), 2);
	CHECK_EQ(json_get(j, NULL, "drops_total"), 0);
	CHECK_EQ(json_get(j, NULL, "aggregations"), 90);
	{
		/* per_thread entries: each thread received one block's packets (15 slots x 3
		 * rounds x 2 members) */
		const char *p = strstr(j, "\"thread\": 0, \"rx_pkts\": ");
		const char *q = strstr(j, "\"thread\": 1, \"rx_pkts\": ");
		CHECK(p && q);
		CHECK_EQ(strtoll(p + strlen("\"thread\": 0, \"rx_pkts\": "), NULL, 10), 90);
		CHECK_EQ(strtoll(q + strlen("\"thread\": 1, \"rx_pkts\": "), NULL, 10), 90);
	}
	free(j);
	close(m[0].fd);
	close(m[1].fd);
}

/* Two levels: root (member 1 + child leaf covering 2-3) and leaf (members 2, 3). */
/* auth: both switches and the members share a group key: the leaf's aggregate (child
 * context), the root's result to the leaf (parent context) and the leaf's re-signed results
 * must all verify, with no drops anywhere. */
static void test_multilevel(bool auth)
{
	static const char key_hex[] =
		"0f0e0d0c0b0a09080706050403020100f0e0d0c0b0a090807060504030201000";
	const char *akey = auth ? "\n auth_key_id = 5\n auth_key = " : "\n auth = off",
		   *ahex = auth ? key_hex : "";
	struct wire_mac *mac = NULL;
	char rconf[128], lconf[128], rstats[128], lstats[128], rready[128], lready[128];
	char text[2048];
	struct member m[3];
	struct member *ms[3] = { &m[0], &m[1], &m[2] };
	char *j;

	snprintf(rconf, sizeof rconf, "%s/root.conf", tmpdir);
	snprintf(lconf, sizeof lconf, "%s/leaf.conf", tmpdir);
	snprintf(rstats, sizeof rstats, "%s/root.json", tmpdir);
	snprintf(lstats, sizeof lstats, "%s/leaf.json", tmpdir);
	snprintf(rready, sizeof rready, "%s/root.ready", tmpdir);
	snprintf(lready, sizeof lready, "%s/leaf.ready", tmpdir);
	/* 127.0.0.B+0 root, +1 leaf, +2..+4 members: the two variants may run at once */
	const int B = auth ? 130 : 107;
	char a[5][20];
	for (int i = 0; i < 5; i++)
		snprintf(a[i], sizeof a[i], "127.0.0.%d", B + i);
	snprintf(text, sizeof text,
		 "listen = %s:4791\nstats_file = %s\nstats_interval_ms = 0\n"
		 "tree 3 {\n key = 0x33\n slots = 4\n role = root%s%s\n"
		 " member = 1 %s:4791\n child = %s:4791 bfr 2-3\n}\n",
		 a[0], rstats, akey, ahex, a[2], a[1]);
	write_file(rconf, text);
	snprintf(text, sizeof text,
		 "listen = %s:4791\nstats_file = %s\nstats_interval_ms = 0\n"
		 "tree 3 {\n key = 0x33\n slots = 4\n role = leaf\n bfr_id = %d%s%s\n"
		 " parent = %s:4791\n"
		 " member = 2 %s:4791\n member = 3 %s:4791\n}\n",
		 a[1], lstats, auth ? 7 : 0, akey, ahex, a[0], a[3], a[4]);
	write_file(lconf, text);
	start_switch(0, rready, (char *const[]){ "-c", rconf, "--ready-file", rready, NULL });
	start_switch(1, lready, (char *const[]){ "-c", lconf, "--ready-file", lready, NULL });
	member_init(&m[0], a[2], 1, a[0], 3, 0x33);
	member_init(&m[1], a[3], 2, a[1], 3, 0x33);
	member_init(&m[2], a[4], 3, a[1], 3, 0x33);
	if (auth) {
		uint8_t key[WIRE_AUTH_KEY_LEN];
		CHECK(wire_auth_key_parse(key_hex, key) == 0);
		CHECK(wire_mac_new(&mac, key) == 0);
		for (int i = 0; i < 3; i++) {
			m[i].mac = mac;
			m[i].key_id = 5;
			m[i].ctx = (uint32_t)(i + 1);
			m[i].ctr = 77;
		}
	}
	run_round(ms, 3, 4, 0);
	run_round(ms, 3, 4, 1);
	stop_switch(1);
	stop_switch(0);
	j = read_file(rstats);
	CHECK(j != NULL);
	CHECK_EQ(json_get(j, NULL, "drops_total"), 0);
	CHECK_EQ(json_get(j, NULL, "aggregations"), 8);
	CHECK(strstr(j, "\"kind\": \"child\"") != NULL);
	free(j);
	j = read_file(lstats);
	CHECK(j != NULL);
	CHECK_EQ(json_get(j, NULL, "drops_total"), 0);
	CHECK_EQ(json_get(j, NULL, "aggregations"), 8);
	CHECK_EQ(json_get(j, NULL, "results_down"), 8);
	CHECK(strstr(j, auth ? "\"auth\": \"on\"" : "\"auth\": \"off\"") != NULL);
	free(j);
	for (int i = 0; i < 3; i++)
		close(m[i].fd);
	wire_mac_free(mac);
}

/* Receive results with a short timeout, tolerating loss, duplicates and late results (lossy
 * case): checks each one's sum, marks got[slot] for the wanted round. Returns when nothing
 * arrived for timeout_ms. */
static void collect_lossy(struct member *m, struct member *const *all, int nall, uint32_t round,
			  uint8_t *got)
{
	struct timeval tv = { 0, 30000 };
	uint8_t buf[WIRE_MAX_UDP_PAYLOAD + 64];

	CHECK(setsockopt(m->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
	for (;;) {
		struct wire_pkt p;
		struct wire_ipinfo ip = ipinfo(&m->sw, &m->addr);
		ssize_t n = recv(m->fd, buf, sizeof buf, 0);
		enum wire_err e;

		if (n < 0)
			return;
		e = wire_decode_udp(buf, (size_t)n, &p, &ip);
		if (e != WIRE_OK)
			die("member %u: result rejected: %s", m->bfr, wire_err_name(e));
		if (p.inca.flags & WIRE_F_NACK) {
			/* a repair notice for a lost contribution: header-only, naming us; the
			 * loop resends everything unanswered anyway */
			CHECK(p.inca.count == 0 && p.data_len == 0);
			CHECK(wire_bier_test(p.inca.bits, 8, wire_bier_bp(m->bfr, 64, 0)));
			continue;
		}
		CHECK(p.inca.flags & WIRE_F_RESULT);
		for (int i = 0; i < COUNT; i++) {
			int32_t want, v;
			uint32_t sum = 0;
			for (int k = 0; k < nall; k++)
				sum += (uint32_t)value(all[k], p.inca.slot, p.inca.round, i);
			want = (int32_t)sum;
			memcpy(&v, p.data + 4 * i, 4);
			if (v != want)
				die("lossy: member %u slot %u round %u elem %d: got %d want %d", m->bfr,
				    p.inca.slot, p.inca.round, i, v, want);
		}
		if (p.inca.round == round)
			got[p.inca.slot] = 1;
	}
}

/* --drop-rate: 20 % of datagrams vanish on rx and on tx; members retransmit (RETX flag) until
 * every result arrived. Loss must cost time, never a wrong or missing result. */
static void test_lossy(void)
{
	char stats[128], ready[128];
	struct member m[2];
	struct member *ms[2] = { &m[0], &m[1] };
	char *j;
	enum { NS = 8, NR = 4 };

	snprintf(stats, sizeof stats, "%s/stats.json", tmpdir);
	snprintf(ready, sizeof ready, "%s/ready", tmpdir);
	start_switch(0, ready,
		     (char *const[]){ "--listen", "127.0.0.118:4791", "--drop-rate", "0.2", "--seed",
				      "7", "--tree",
				      "auth=off,id=6,key=0x66,slots=8,members=1@127.0.0.119+2@127.0.0.120",
				      "--stats-file", stats, "--ready-file", ready, NULL });
	member_init(&m[0], "127.0.0.119", 1, "127.0.0.118", 6, 0x66);
	member_init(&m[1], "127.0.0.120", 2, "127.0.0.118", 6, 0x66);
	for (uint32_t r = 0; r < NR; r++) {
		uint8_t got[2][NS] = { { 0 } };
		int tries;

		for (tries = 0; tries < 100; tries++) {
			bool done = true;
			for (int k = 0; k < 2; k++) {
				m[k].flags = tries ? WIRE_F_RETX : 0;
				for (uint16_t s = 0; s < NS; s++)
					if (!got[k][s])
						contribute(&m[k], s, r);
			}
			for (int k = 0; k < 2; k++)
				collect_lossy(&m[k], ms, 2, r, got[k]);
			for (int k = 0; k < 2; k++)
				for (int s = 0; s < NS; s++)
					done = done && got[k][s];
			if (done)
				break;
		}
		if (tries == 100)
			die("lossy: round %u incomplete after 100 tries", r);
	}
	stop_switch(0);
	j = read_file(stats);
	CHECK(j != NULL);
	CHECK(json_get(j, "drops", "injected_rx") > 0);
	CHECK(json_get(j, "drops", "injected_tx") > 0);
	CHECK_EQ(json_get(j, NULL, "aggregations"), NS * NR);
	CHECK(json_get(j, NULL, "results_resent") > 0);
	free(j);
	close(m[0].fd);
	close(m[1].fd);
}

/* Listening on the wildcard address: the switch must answer from the address each packet was
 * sent to (IP_PKTINFO), or the members' ICRC check fails. Port 47911 avoids clashing with the
 * 127.0.0.x:4791 sockets of parallel tests. */
static void test_anyaddr(void)
{
	char stats[128], ready[128];
	struct member m[2];
	struct member *ms[2] = { &m[0], &m[1] };
	char *j;

	snprintf(stats, sizeof stats, "%s/stats.json", tmpdir);
	snprintf(ready, sizeof ready, "%s/ready", tmpdir);
	start_switch(0, ready,
		     (char *const[]){ "--listen", "0.0.0.0:47911", "--tree",
				      "auth=off,id=5,key=0x55,slots=4,members=1@127.0.0.116+2@127.0.0.117",
				      "--stats-file", stats, "--ready-file", ready, NULL });
	member_init(&m[0], "127.0.0.116", 1, "127.0.0.115:47911", 5, 0x55);
	member_init(&m[1], "127.0.0.117", 2, "127.0.0.115:47911", 5, 0x55);
	run_round(ms, 2, 4, 0);
	stop_switch(0);
	j = read_file(stats);
	CHECK(j != NULL);
	CHECK_EQ(json_get(j, NULL, "drops_total"), 0);
	CHECK_EQ(json_get(j, NULL, "aggregations"), 4);
	free(j);
	close(m[0].fd);
	close(m[1].fd);
}

/* --reflect: valid-looking datagrams come back byte for byte; junk is counted. */
static void test_reflect(void)
{
	char stats[128], ready[128];
	struct member m;
	uint8_t buf[WIRE_MAX_UDP_PAYLOAD], back[WIRE_MAX_UDP_PAYLOAD + 16], bits[8];
	int len;
	ssize_t n;
	char *j;

	snprintf(stats, sizeof stats, "%s/stats.json", tmpdir);
	snprintf(ready, sizeof ready, "%s/ready", tmpdir);
	start_switch(0, ready,
		     (char *const[]){ "--listen", "127.0.0.112:4791", "--reflect", "--tree",
				      "auth=off,id=4,key=1,members=1@127.0.0.113", "--stats-file", stats,
				      "--ready-file", ready, NULL });
	member_init(&m, "127.0.0.113", 1, "127.0.0.112", 4, 1);
	len = build(&m, 0, 0, buf, sizeof buf, bits);
	for (int i = 0; i < 5; i++) {
		send_raw(&m, buf, (size_t)len);
		n = recv(m.fd, back, sizeof back, 0);
		CHECK_EQ(n, len);
		CHECK(memcmp(buf, back, (size_t)len) == 0);
	}
	send_raw(&m, (const uint8_t *)"junk", 4);
	/* a further valid packet proves the junk was processed before we stop */
	send_raw(&m, buf, (size_t)len);
	CHECK_EQ(recv(m.fd, back, sizeof back, 0), len);
	stop_switch(0);
	j = read_file(stats);
	CHECK(j != NULL);
	CHECK_EQ(json_get(j, NULL, "reflected"), 6);
	CHECK_EQ(json_get(j, "drops", "not_inca"), 1);
	CHECK(strstr(j, "\"mode\": \"reflect\"") != NULL);
	free(j);
	close(m.fd);
}

/* Results to a member may share a GSO send across slot blocks (a member reads with one thread):
 * two rounds of different blocks (slots 0 and 15) that complete in one receive batch reach
 * each member as one GRO buffer of two results. Member 2 sends its two contributions as one
 * GSO send (lib/util's send queue), so both complete in the same batch. */
static void test_member_gso(void)
{
	char stats[128], ready[128];
	struct member m[2];
	struct member *ms[2] = { &m[0], &m[1] };
	struct util_udptx *tx;
	struct util_udprx *rx;
	uint8_t one[WIRE_MAX_UDP_PAYLOAD], bits[8];

	snprintf(stats, sizeof stats, "%s/stats.json", tmpdir);
	snprintf(ready, sizeof ready, "%s/ready", tmpdir);
	start_switch(0, ready,
		     (char *const[]){ "--listen", "127.0.0.121:4791", "--threads", "1", "--tree",
				      "auth=off,id=6,key=7,slots=32,members=1@127.0.0.122+2@127.0.0.123",
				      "--stats-file", stats, "--ready-file", ready, NULL });
	member_init(&m[0], "127.0.0.122", 1, "127.0.0.121", 6, 7);
	member_init(&m[1], "127.0.0.123", 2, "127.0.0.121", 6, 7);
	for (int k = 0; k < 2; k++) {
		bool gso, gro;
		util_udp_offloads(m[k].fd, true, true, &gso, &gro);
		if (!gso || !gro) {
			printf("SKIP: no UDP GSO / GRO here\n");
			exit(77);
		}
	}
	CHECK(util_udptx_create(&(struct util_udptx_opts){ .max_pkts = 2,
							    .pkt_cap = WIRE_MAX_UDP_PAYLOAD,
							    .gso = true },
				&tx) == 0);
	CHECK(util_udprx_create(&(struct util_udprx_opts){ .batch = 1,
							    .pkt_cap = WIRE_MAX_UDP_PAYLOAD,
							    .gro = true },
				&rx) == 0);
	contribute(&m[0], 0, 0);
	contribute(&m[0], 15, 0);
	/* Member 2: each packet's ICRC covers the IPv4 ID the queue says the kernel gives it. */
	for (int i = 0; i < 2; i++) {
		struct wire_ipinfo ip = ipinfo(&m[1].addr, &m[1].sw);
		struct wire_pkt p;
		int len = build(&m[1], i ? 15 : 0, 0, one, sizeof one, bits);
		uint8_t *q = util_udptx_add(tx, &m[1].sw, 0, 0, (size_t)len, &ip.ip_id);
		CHECK(q != NULL);
		ip.id_unseen = false;
		CHECK(wire_decode_udp(one, (size_t)len, &p, NULL) == WIRE_OK);
		CHECK_EQ(wire_encode_udp(q, (size_t)len, &p, &ip), len);
		m[1].psn++;
	}
	CHECK_EQ(util_udptx_flush(tx, m[1].fd, 0), 0);
	CHECK_EQ(util_udptx_stats(tx)->gso_sends, 1);
	for (int k = 0; k < 2; k++) {
		struct util_udp_dgram d;
		unsigned slots = 0, n = 0;

		CHECK_EQ(util_udprx_recv(rx, m[k].fd, 0), 1); /* one buffer ... */
		while (util_udprx_next(rx, &d)) {
			struct wire_pkt p;
			struct wire_ipinfo ip = ipinfo(&m[k].sw, &m[k].addr);
			CHECK_EQ(d.seg, n++); /* ... holding both results */
			CHECK(wire_decode_udp(d.data, d.len, &p, &ip) == WIRE_OK);
			CHECK(p.inca.flags & WIRE_F_RESULT);
			CHECK_EQ(p.bth.dest_qp, m[k].qpn);
			for (int e = 0; e < COUNT; e++) {
				int32_t got;
				memcpy(&got, p.data + 4 * e, 4);
				CHECK_EQ(got, (int32_t)((uint32_t)value(ms[0], p.inca.slot, 0, e) +
							(uint32_t)value(ms[1], p.inca.slot, 0, e)));
			}
			slots |= 1u << (p.inca.slot == 15);
		}
		CHECK_EQ(n, 2u);
		CHECK_EQ(slots, 3u); /* slot 0 and slot 15 */
	}
	util_udptx_destroy(tx);
	util_udprx_destroy(rx);
	stop_switch(0);
	close(m[0].fd);
	close(m[1].fd);
}

/* Bad configurations exit non-zero with file:line. */
static void test_badconfig(void)
{
	char conf[128], cmd[512];
	char *out;
	int st;

	snprintf(conf, sizeof conf, "%s/bad.conf", tmpdir);
	write_file(conf, "listen = 127.0.0.1:4791\ntree 1 {\n  key = 1\n  colour = blue\n}\n");
	snprintf(cmd, sizeof cmd, "%s -c %s 2>%s/err.txt", switch_path, conf, tmpdir);
	st = system(cmd);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
	snprintf(cmd, sizeof cmd, "%s/err.txt", tmpdir);
	out = read_file(cmd);
	CHECK(out != NULL);
	{
		char want[256];
		snprintf(want, sizeof want, "%s:4: unknown tree key 'colour'", conf);
		if (!strstr(out, want))
			die("expected '%s' in '%s'", want, out);
	}
	free(out);
}

/* Receive whatever reaches m within ms milliseconds; returns the number of datagrams (each
 * one a switch packet to m's QP, so the PSN sequence stays in step). */
static unsigned drain(struct member *m, int ms)
{
	struct timeval tv = { 0, ms * 1000 }, tv2 = { 2, 0 };
	uint8_t buf[WIRE_MAX_UDP_PAYLOAD + 64];
	unsigned n = 0;

	CHECK(setsockopt(m->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
	while (recv(m->fd, buf, sizeof buf, 0) > 0)
		n++;
	CHECK(setsockopt(m->fd, SOL_SOCKET, SO_RCVTIMEO, &tv2, sizeof tv2) == 0);
	m->rx_psn += n;
	return n;
}

/* Hostile members against the real daemon: P-BMs naming other members, forged rounds (far and
 * near, on complete slots and around a collecting round), a flood of duplicates of a complete
 * round, a new job with other rounds on the same tree, foreign P_Keys. Every real round
 * still completes exactly, nothing is amplified, every rejection is counted by reason. */
static void test_hostile(void)
{
	char conf[128], stats[128], ready[128], text[1024];
	struct member m[3];
	struct member *ms[3] = { &m[0], &m[1], &m[2] };
	const uint32_t key = 0x5eed0009, base = 0x9e3779b9u;
	char *j;

	snprintf(conf, sizeof conf, "%s/switch.conf", tmpdir);
	snprintf(stats, sizeof stats, "%s/stats.json", tmpdir);
	snprintf(ready, sizeof ready, "%s/ready", tmpdir);
	snprintf(text, sizeof text,
		 "listen = 127.0.0.190:4791\nthreads = 1\nstats_file = %s\nstats_interval_ms = 0\n"
		 "tree 9 {\n  key = 0x5eed0009\n  slots = 4\n  pkey = 0xffff\n"
		 "  member = 1 127.0.0.191:4791\n  member = 2 127.0.0.192:4791\n"
		 "  member = 3 127.0.0.193:4791\n  auth = off\n}\n",
		 stats);
	write_file(conf, text);
	start_switch(0, ready, (char *const[]){ "-c", conf, "--ready-file", ready, NULL });
	for (int i = 0; i < 3; i++) {
		char ip[32];
		snprintf(ip, sizeof ip, "127.0.0.%d", 191 + i);
		member_init(&m[i], ip, (uint16_t)(1 + i), "127.0.0.190", 9, key);
	}

	/* P-BM {1,2} and {1,2,3} from member 1: dropped, so member 2's own packet counts and
	 * no round completes on one packet */
	m[0].extra_bits = 0x2;
	contribute(&m[0], 0, 0);
	m[0].extra_bits = 0x6;
	contribute(&m[0], 0, 0);
	CHECK_EQ(drain(&m[0], 100), 0);
	m[0].extra_bits = 0;
	run_round(ms, 3, 4, 0);
	/* a complete round replayed 100 times with every bit set: no result at all */
	m[0].extra_bits = 0x6;
	for (int i = 0; i < 100; i++)
		contribute(&m[0], 1, 0);
	m[0].extra_bits = 0;
	for (int i = 0; i < 3; i++)
		CHECK_EQ(drain(&m[i], 100), 0);

	/* forged rounds on complete slots: near ones dropped, far ones held on probation;
	 * neither moves a slot (only the next round itself cannot be told from a real one
	 * without authentication) */
	for (uint16_t s = 0; s < 4; s++) {
		for (uint32_t r = 2; r <= 41; r++)
			contribute(&m[2], s, r);
		contribute(&m[2], s, 0x7fff0000u);
	}
	run_round(ms, 3, 4, 1);
	run_round(ms, 3, 4, 2);
	/* round 3 collecting on every slot: the next 40 rounds are all outside its window */
	for (uint16_t s = 0; s < 4; s++) {
		contribute(&m[0], s, 3);
		contribute(&m[1], s, 3);
		for (uint32_t r = 4; r <= 43; r++)
			contribute(&m[2], s, r);
	}
	for (uint16_t s = 0; s < 4; s++)
		contribute(&m[2], s, 3);
	for (int k = 0; k < 3; k++)
		for (uint16_t s = 0; s < 4; s++)
			expect_result(&m[k], ms, 3, NULL);

	/* 100 duplicates of a complete round from member 2: one free re-send, then at most its
	 * banked credit (8), then its 1st, 2nd and every 4th unanswered one (24 of 91), and one
	 * per millisecond the switch's clock allows: far fewer results than duplicates, none to
	 * anyone else */
	uint64_t flood_t0 = util_now_ns();
	for (int i = 0; i < 100; i++)
		contribute(&m[1], 2, 3);
	unsigned got = drain(&m[1], 300);
	/* drain returned after 300 ms without a packet: the flood took the rest */
	uint64_t flood_ms = (util_now_ns() - flood_t0) / 1000000u;
	flood_ms = flood_ms > 300 ? flood_ms - 300 : 0;
	CHECK(got >= 1 && got <= 33 + 1 + flood_ms);
	CHECK(got < 100);
	CHECK_EQ(drain(&m[0], 50), 0);
	CHECK_EQ(drain(&m[2], 50), 0);

	/* a new job on the same tree, other round base: takes every slot over by completing */
	run_round(ms, 3, 4, base);
	run_round(ms, 3, 4, base + 1);

	/* P_Key: another partition is dropped; a limited member of the default partition
	 * matches the tree's full 0xFFFF (IBTA) */
	m[0].pkey = 0x1234;
	contribute(&m[0], 0, base + 2);
	m[0].pkey = 0x7fff;
	run_round(ms, 3, 4, base + 2);
	m[0].pkey = 0;

	stop_switch(0);
	j = read_file(stats);
	CHECK(j != NULL);
	CHECK_EQ(json_get(j, "drops", "drop_bitmap"), 2 + 100);
	CHECK_EQ(json_get(j, "drops", "drop_pkey"), 1);
	CHECK_EQ(json_get(j, "drops", "drop_future"), 4 * 15 + 4 * 40);
	CHECK_EQ(json_get(j, NULL, "resends_limited"), 100 - got);
	CHECK_EQ(json_get(j, NULL, "aggregations"), 4 * 7);
	free(j);
	for (int i = 0; i < 3; i++)
		close(m[i].fd);
}

static void cleanup_tmp(void)
{
	char cmd[128];

	if (tmpdir[0]) {
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "warning: could not remove %s\n", tmpdir);
	}
}

int main(int argc, char **argv)
{
	const char *which;

	test_on_failure(kill_children);
	if (argc < 3) {
		fprintf(stderr, "usage: %s PATH-TO-inca-switch CASE\n", argv[0]);
		return 2;
	}
	switch_path = argv[1];
	which = argv[2];
	if (access(switch_path, X_OK) != 0) {
		fprintf(stderr, "%s not executable\n", switch_path);
		return 77;
	}
	signal(SIGALRM, on_alarm);
	alarm(40);
	snprintf(tmpdir, sizeof tmpdir, "/tmp/inca-swtest-XXXXXX");
	CHECK(mkdtemp(tmpdir) != NULL);
	atexit(cleanup_tmp);

	if (!strcmp(which, "allreduce"))
		test_allreduce();
	else if (!strcmp(which, "threads"))
		test_threads();
	else if (!strcmp(which, "multilevel"))
		test_multilevel(false);
	else if (!strcmp(which, "multilevel-auth"))
		test_multilevel(true);
	else if (!strcmp(which, "lossy"))
		test_lossy();
	else if (!strcmp(which, "anyaddr"))
		test_anyaddr();
	else if (!strcmp(which, "reflect"))
		test_reflect();
	else if (!strcmp(which, "member-gso"))
		test_member_gso();
	else if (!strcmp(which, "badconfig"))
		test_badconfig();
	else if (!strcmp(which, "auth"))
		test_auth();
	else if (!strcmp(which, "hostile"))
		test_hostile();
	else
		die("unknown case '%s'", which);
	kill_children();
	printf("switch_test %s: passed\n", which);
	return 0;
}
