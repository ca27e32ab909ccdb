/* udpio_test: the GSO send queue and the GRO receive batch over loopback sockets: which datagrams
 * share a send (destination, tag, length, short last segment, limits), the IDs promised, order
 * and content on the receiving side with and without GRO, truncation, a full queue. */
#include "util/udpio.h"
#include "util/test_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int udp_bound(const char *ip, struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	socklen_t sl = sizeof *sa;

	memset(sa, 0, sizeof *sa);
	sa->sin_family = AF_INET;
	inet_pton(AF_INET, ip, &sa->sin_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)sa, sizeof *sa) < 0 ||
	    getsockname(fd, (struct sockaddr *)sa, &sl) < 0) {
		perror("udp socket");
		exit(1);
	}
	return fd;
}

/* Queue one datagram of len bytes whose first 4 bytes are seq; returns the promised ID. */
static int put(struct util_udptx *q, const struct sockaddr_in *to, uint32_t tag, size_t len,
	       uint32_t seq)
{
	uint16_t id = 0xFFFF;
	uint8_t *p = util_udptx_add(q, to, 0, tag, len, &id);

	if (!p)
		return -1;
	memset(p, (int)(seq & 0xFF), len);
	memcpy(p, &seq, sizeof seq);
	return id;
}

struct got {
	uint32_t seq;
	size_t len;
	uint16_t seg;
	bool trunc;
};

/* Read until n datagrams arrived or 2 s passed. */
static size_t drain(struct util_udprx *r, int fd, struct got *g, size_t n)
{
	size_t k = 0;

	while (k < n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 2000) <= 0)
			break;
		if (util_udprx_recv(r, fd, MSG_DONTWAIT) <= 0)
			continue;
		struct util_udp_dgram d;
		while (util_udprx_next(r, &d) && k < n) {
			memcpy(&g[k].seq, d.data, sizeof g[k].seq);
			g[k].len = d.len;
			g[k].seg = d.seg;
			g[k].trunc = d.truncated;
			bool body_ok = true;
			for (size_t i = 4; i < d.len; i++)
				body_ok &= d.data[i] == (uint8_t)(g[k].seq & 0xFF);
			CHECK(body_ok);
			k++;
		}
	}
	return k;
}

static void test_groups(bool gro)
{
	struct sockaddr_in a, b, s;
	int fa = udp_bound("127.1.60.2", &a), fb = udp_bound("127.1.60.3", &b);
	int fs = udp_bound("127.1.60.1", &s);
	bool gso, gro_on, dummy;
	struct util_udptx *q;
	struct util_udprx *r;
	struct got g[64];

	util_udp_offloads(fs, true, false, &gso, &dummy);
	util_udp_offloads(fa, false, gro, &dummy, &gro_on);
	CHECK(util_udptx_create(&(struct util_udptx_opts){ .max_pkts = 32, .pkt_cap = 2048,
							    .gso = gso }, &q) == 0);
	CHECK(util_udprx_create(&(struct util_udprx_opts){ .batch = 8, .pkt_cap = 2048,
							    .gro = gro_on }, &r) == 0);
	/* 10 full datagrams, a short one that ends the send, then a new send; a tag change and
	 * a longer datagram also start new sends. */
	uint32_t seq = 0;
	int want_id[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1, 0, 0, 1 };
	size_t lens[] = { 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 500,
			  1000, 1000, 1000, 1200, 1200 };
	uint32_t tags[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1 };
	size_t n = sizeof lens / sizeof lens[0];
	for (size_t i = 0; i < n; i++) {
		int id = put(q, &a, tags[i], lens[i], seq++);
		CHECK_EQ(id, gso ? want_id[i] : 0);
	}
	/* another destination in between gets its own send and IDs */
	CHECK_EQ(put(q, &b, 1, 1200, 900), 0);
	CHECK_EQ(put(q, &a, 1, 1200, seq++), gso ? 2 : 0);
	CHECK_EQ(put(q, &b, 1, 1200, 901), gso ? 1 : 0);
	n++;
	CHECK_EQ(util_udptx_queued(q), n + 2);
	CHECK_EQ(util_udptx_flush(q, fs, 0), 0);
	CHECK_EQ(util_udptx_queued(q), 0);
	const struct util_udptx_stats *st = util_udptx_stats(q);
	CHECK_EQ(st->pkts, n + 2);
	if (gso) {
		CHECK_EQ(st->msgs, 5); /* a: 11, 2, 1, 3 datagrams; b: 2 */
		CHECK_EQ(st->gso_sends, 4);
	}
	CHECK_EQ(drain(r, fa, g, n), n);
	for (size_t i = 0; i < n; i++) {
		CHECK_EQ(g[i].seq, i);
		CHECK_EQ(g[i].len, i < 16 ? lens[i] : 1200);
		CHECK(!g[i].trunc);
		/* loopback hands a GSO send to a GRO socket whole: index = promised ID */
		int want = i < 16 ? want_id[i] : 2;
		CHECK_EQ(g[i].seg, gro_on && gso ? want : 0);
	}
	util_udptx_destroy(q);
	util_udprx_destroy(r);
	close(fa);
	close(fb);
	close(fs);
}

/* Data kept by reference, per datagram: its bytes [off, off + n) live here until the flush. */
static uint8_t ext[200][2048];

/* Queue datagram seq of len bytes (seq in its first 4 bytes, the rest seq & 0xFF, as put) by
 * reference: bytes [off, off + n) from ext[slot], the rest written into the queue. The hole
 * in the queue's buffer is filled with garbage, which must not go out. */
static int put_ref(struct util_udptx *q, const struct sockaddr_in *to, uint32_t tag, size_t len,
		   uint32_t seq, size_t off, size_t n, unsigned slot)
{
	uint8_t whole[2048];
	uint16_t id = 0xFFFF;

	memset(whole, (int)(seq & 0xFF), len);
	memcpy(whole, &seq, sizeof seq);
	memcpy(ext[slot], whole + off, n);
	uint8_t *p = util_udptx_add_ref(q, to, 0, tag, len, off, ext[slot], n, &id);
	if (!p)
		return -1;
	memcpy(p, whole, off);
	memset(p + off, 0xEE, n);
	memcpy(p + off + n, whole + off + n, len - off - n);
	return id;
}

/* Datagrams queued by reference (no head, no tail, both, all data, none) mixed with copied ones
 * share GSO sends like copied ones and arrive byte for byte; a send of UTIL_GSO_MAX_SEGS such
 * datagrams (three iovecs each) and a queue full of them go out whole; a cancelled one leaves
 * no reference behind; bad ranges are refused. */
static void test_ref(bool gro)
{
	struct sockaddr_in a, s;
	int fa = udp_bound("127.1.60.5", &a), fs = udp_bound("127.1.60.1", &s);
	bool gso, gro_on, dummy;
	struct util_udptx *q;
	struct util_udprx *r;
	static struct got g[200];

	util_udp_offloads(fs, true, false, &gso, &dummy);
	util_udp_offloads(fa, false, gro, &dummy, &gro_on);
	int big = 8 << 20;
	setsockopt(fa, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	CHECK(util_udptx_create(&(struct util_udptx_opts){ .max_pkts = 130, .pkt_cap = 2048,
							    .gso = gso }, &q) == 0);
	CHECK(util_udprx_create(&(struct util_udprx_opts){ .batch = 16, .pkt_cap = 2048,
							    .gro = gro_on }, &r) == 0);
	struct { size_t off, n; } shapes[] = { { 0, 0 }, { 4, 996 }, { 0, 1000 }, { 0, 600 },
					       { 100, 900 }, { 30, 500 }, { 999, 1 } };
	size_t nshapes = sizeof shapes / sizeof shapes[0];
	uint32_t seq = 0;
	for (size_t i = 0; i < 2 * nshapes; i++) {
		int id = i % 2 ? put(q, &a, 0, 1000, seq)
			       : put_ref(q, &a, 0, 1000, seq, shapes[i / 2].off, shapes[i / 2].n,
					 (unsigned)i);
		CHECK_EQ(id, gso ? (int)i : 0);
		seq++;
	}
	/* Bad ranges: refused, nothing queued. */
	uint16_t id;
	CHECK(util_udptx_add_ref(q, &a, 0, 0, 1000, 1001, ext[0], 0, &id) == NULL);
	CHECK(util_udptx_add_ref(q, &a, 0, 0, 1000, 500, ext[0], 501, &id) == NULL);
	CHECK(util_udptx_add_ref(q, &a, 0, 0, 1000, 0, NULL, 10, &id) == NULL);
	CHECK_EQ(util_udptx_queued(q), seq);
	/* A cancelled datagram by reference: the next one in its place is copied. */
	CHECK(put_ref(q, &a, 0, 1000, 9999, 4, 900, 199) >= 0);
	util_udptx_cancel_last(q);
	memset(ext[199], 0xEE, sizeof ext[199]);
	CHECK(put(q, &a, 0, 1000, seq++) >= 0);
	size_t n = seq;
	CHECK_EQ(util_udptx_flush(q, fs, 0), 0);
	CHECK_EQ(util_udptx_stats(q)->pkts, n);
	CHECK_EQ(drain(r, fa, g, n), n);
	for (size_t i = 0; i < n; i++) {
		CHECK_EQ(g[i].seq, i);
		CHECK_EQ(g[i].len, 1000);
	}

	/* One full GSO send by reference, then a queue full of them (several sends). */
	size_t base = seq;
	for (unsigned i = 0; i < UTIL_GSO_MAX_SEGS; i++) {
		int id2 = put_ref(q, &a, 7, 600, seq++, 10, 500, i);
		CHECK_EQ(id2, gso ? (int)i : 0);
	}
	CHECK_EQ(util_udptx_flush(q, fs, 0), 0);
	CHECK_EQ(drain(r, fa, g, UTIL_GSO_MAX_SEGS), UTIL_GSO_MAX_SEGS);
	for (unsigned i = 0; i < UTIL_GSO_MAX_SEGS; i++)
		CHECK_EQ(g[i].seq, base + i);
	base = seq;
	for (unsigned i = 0; i < 130; i++)
		CHECK(put_ref(q, &a, 8, 600, seq++, 2, 590, i) >= 0);
	CHECK(put_ref(q, &a, 8, 600, seq, 2, 590, 131) < 0); /* full */
	CHECK_EQ(util_udptx_flush(q, fs, 0), 0);
	CHECK_EQ(drain(r, fa, g, 130), 130);
	for (unsigned i = 0; i < 130; i++) {
		CHECK_EQ(g[i].seq, base + i);
		CHECK_EQ(g[i].len, 600);
	}
	if (gso)
		CHECK_EQ(util_udptx_stats(q)->gso_failed, 0);
	util_udptx_destroy(q);
	util_udprx_destroy(r);
	close(fa);
	close(fs);
}

/* Limits: UTIL_GSO_MAX_SEGS per send, UTIL_UDP_MAX_PAYLOAD bytes per send, a full queue. */
static void test_limits(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(9) };
	struct util_udptx *q;
	uint16_t id;

	CHECK(util_udptx_create(&(struct util_udptx_opts){ .max_pkts = 200, .pkt_cap = 4200,
							    .gso = true }, &q) == 0);
	for (unsigned i = 0; i < 130; i++) {
		CHECK(util_udptx_add(q, &a, 0, 0, 100, &id) != NULL);
		CHECK_EQ(id, i % UTIL_GSO_MAX_SEGS);
	}
	util_udptx_destroy(q);
	CHECK(util_udptx_create(&(struct util_udptx_opts){ .max_pkts = 40, .pkt_cap = 4200,
							    .gso = true }, &q) == 0);
	for (unsigned i = 0; i < 40; i++) {
		CHECK(util_udptx_add(q, &a, 0, 0, 4132, &id) != NULL);
		CHECK_EQ(id, i % (UTIL_UDP_MAX_PAYLOAD / 4132)); /* 15 per send */
	}
	CHECK(util_udptx_add(q, &a, 0, 0, 4132, &id) == NULL); /* full */
	util_udptx_cancel_last(q); /* takes back the 40th: the next add gets its ID again */
	CHECK(util_udptx_add(q, &a, 0, 0, 4132, &id) != NULL);
	CHECK_EQ(id, 39 % 15);
	CHECK_EQ(util_udptx_queued(q), 40);
	CHECK(util_udptx_add(q, &a, 0, 0, 0, &id) == NULL);
	util_udptx_destroy(q);
	CHECK(util_udptx_create(&(struct util_udptx_opts){ .max_pkts = 4, .pkt_cap = 64 }, &q) == 0);
	CHECK(util_udptx_add(q, &a, 0, 0, 65, &id) == NULL); /* above pkt_cap */
	util_udptx_destroy(q);
}

/* Without GRO a datagram longer than pkt_cap is reported truncated, not split. */
static void test_truncated(void)
{
	struct sockaddr_in a, s;
	int fa = udp_bound("127.1.60.4", &a), fs = udp_bound("127.1.60.1", &s);
	struct util_udprx *r;
	struct got g[2];
	uint8_t big[1500];

	memset(big, 7, sizeof big);
	memcpy(big, &(uint32_t){ 7 }, 4);
	CHECK(util_udprx_create(&(struct util_udprx_opts){ .batch = 4, .pkt_cap = 600 }, &r) == 0);
	CHECK(sendto(fs, big, sizeof big, 0, (struct sockaddr *)&a, sizeof a) == sizeof big);
	CHECK_EQ(drain(r, fa, g, 1), 1);
	CHECK(g[0].trunc);
	CHECK_EQ(g[0].len, 600);
	util_udprx_destroy(r);
	close(fa);
	close(fs);
}

static unsigned reids;

/* Counts restamps and checks the datagram is whole (the pattern of put / put_ref). */
static void count_reid(void *arg, uint8_t *pkt, size_t len, const struct sockaddr_in *to,
		       uint32_t src_ip_be)
{
	uint32_t seq;
	bool whole = len >= 4;

	(void)arg; (void)to; (void)src_ip_be;
	memcpy(&seq, pkt, sizeof seq);
	for (size_t i = 4; i < len; i++)
		whole &= pkt[i] == (uint8_t)(seq & 0xFF);
	CHECK(whole);
	reids++;
}

/* The kernel refuses GSO sends after UDP_SEGMENT was accepted (SO_NO_CHECK: GSO needs the UDP
 * checksum): every group queued, not only the refused one, goes out as single datagrams, in
 * order, each but a group's first restamped; nothing is lost or glued together. */
static void test_refused(void)
{
	struct sockaddr_in a, s;
	int rx = udp_bound("127.0.0.1", &a), tx = udp_bound("127.0.0.1", &s), one = 1;
	bool gso, gro;
	struct util_udptx *q;
	struct util_udprx *r;
	struct got g[16];

	util_udp_offloads(tx, true, false, &gso, &gro);
	if (!gso) {
		printf("udpio_test: no UDP GSO, refusal case skipped\n");
		close(rx);
		close(tx);
		return;
	}
	CHECK(setsockopt(tx, SOL_SOCKET, SO_NO_CHECK, &one, sizeof one) == 0);
	struct util_udptx_opts to = { .max_pkts = 32, .pkt_cap = 1000, .gso = true, .reid = count_reid };
	struct util_udprx_opts ro = { .batch = 16, .pkt_cap = 1000 };
	CHECK(util_udptx_create(&to, &q) == 0);
	CHECK(util_udprx_create(&ro, &r) == 0);
	reids = 0;
	/* three groups of three (tags differ), every other datagram by reference */
	for (uint32_t k = 0; k < 9; k++)
		CHECK_EQ(k % 2 ? put_ref(q, &a, k / 3, 500, k, 8, 400, k) : put(q, &a, k / 3, 500, k),
			 (int)(k % 3));
	CHECK_EQ(util_udptx_flush(q, tx, 0), 0);
	CHECK_EQ(util_udptx_stats(q)->gso_failed, 1);
	CHECK(!util_udptx_gso(q));
	CHECK_EQ(util_udptx_stats(q)->pkts, 9);
	CHECK_EQ(util_udptx_stats(q)->msgs, 9);
	CHECK_EQ(util_udptx_stats(q)->gso_sends, 0);
	CHECK_EQ(reids, 6);
	CHECK_EQ(drain(r, rx, g, 9), 9);
	for (uint32_t k = 0; k < 9; k++) {
		CHECK_EQ(g[k].seq, k);
		CHECK_EQ(g[k].len, 500);
	}
	/* Later datagrams: one by one, IDs 0. */
	CHECK_EQ(put(q, &a, 0, 500, 9), 0);
	CHECK_EQ(put(q, &a, 0, 500, 10), 0);
	CHECK_EQ(util_udptx_flush(q, tx, 0), 0);
	CHECK_EQ(drain(r, rx, g, 2), 2);
	CHECK_EQ(g[0].seq, 9);
	CHECK_EQ(g[1].seq, 10);
	util_udptx_destroy(q);
	util_udprx_destroy(r);
	close(rx);
	close(tx);
}

int main(void)
{
	test_groups(true);
	test_groups(false);
	test_ref(true);
	test_ref(false);
	test_limits();
	test_truncated();
	test_refused();
	printf("udpio_test: ok\n");
	return 0;
}
