/* tests/pcap helper: sends INCA packets the way libinca and inca-switch do, through the UDP GSO
 * send queue of lib/util/udpio: packets of one slot block and one length share a GSO send and
 * each is encoded for the IPv4 ID the kernel gives its segment (docs/protocol.md §7). Every slot
 * block has full packets and a short last one; the data type changes per block. A capture of the
 * sender's link then shows whether the kernel's headers match every ICRC.
 * usage: send_inca_gso SRC_IP DST_IP COUNT [refuse]
 * refuse: SO_NO_CHECK on the socket after UDP_SEGMENT was accepted, so the kernel refuses GSO
 * sends (GSO needs the UDP checksum) and the queue falls back to single packets, restamped.
 * Addresses: loopback or 198.18.0.0/15 only; UDP port 4791 on both sides. Prints
 * "sent P packets in M messages, G GSO sends, F refused" and exits 0, 1 on a send error,
 * 77 when the address cannot be bound. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/udpio.h"
#include "wire/wire.h"

static bool allowed(const struct sockaddr_in *a)
{
	uint32_t h = ntohl(a->sin_addr.s_addr);

	return (h >> 24) == 127 || (h >> 17) == (0xC612u >> 1); /* 127/8, 198.18.0.0/15 */
}

static struct wire_ipinfo ipinfo;

/* The queue sends a packet alone after the kernel refused its GSO send: ID 0 now. */
static void reid(void *arg, uint8_t *pkt, size_t len, const struct sockaddr_in *to, uint32_t src)
{
	struct wire_ipinfo ip = ipinfo;
	uint32_t c;

	(void)arg;
	(void)to;
	(void)src;
	ip.ip_id = 0;
	c = wire_icrc(&ip, pkt, len);
	for (int b = 0; b < 4; b++)
		pkt[len - 4 + (size_t)b] = (uint8_t)(c >> (8 * b));
}

int main(int argc, char **argv)
{
	if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "refuse"))) {
		fprintf(stderr, "usage: %s SRC_IP DST_IP COUNT [refuse]\n", argv[0]);
		return 2;
	}
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_port = htons(WIRE_ROCE_UDP_PORT) };
	struct sockaddr_in dst = src;
	if (inet_pton(AF_INET, argv[1], &src.sin_addr) != 1 ||
	    inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1 || !allowed(&src) || !allowed(&dst)) {
		fprintf(stderr, "send_inca_gso: 127/8 or 198.18.0.0/15 addresses only\n");
		return 2;
	}
	int count = atoi(argv[3]);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	int pmtu = IP_PMTUDISC_DO;
	if (s < 0 || setsockopt(s, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) ||
	    bind(s, (struct sockaddr *)&src, sizeof(src))) {
		perror("send_inca_gso: socket");
		return 77;
	}
	bool gso, gro;
	util_udp_offloads(s, true, false, &gso, &gro);
	int one = 1;
	if (argc == 5 && setsockopt(s, SOL_SOCKET, SO_NO_CHECK, &one, sizeof one) < 0) {
		perror("send_inca_gso: SO_NO_CHECK");
		return 77;
	}
	struct util_udptx_opts qo = { .max_pkts = 64, .pkt_cap = WIRE_MAX_UDP_PAYLOAD, .gso = gso,
				      .reid = reid };
	struct util_udptx *q;
	if (util_udptx_create(&qo, &q) < 0)
		return 1;
	ipinfo = (struct wire_ipinfo){ .src_ip = ntohl(src.sin_addr.s_addr),
				       .dst_ip = ntohl(dst.sin_addr.s_addr),
				       .src_port = WIRE_ROCE_UDP_PORT, .dst_port = WIRE_ROCE_UDP_PORT };
	static uint8_t data[4096];
	uint8_t bits[8] = { 0 };
	wire_bier_set(bits, sizeof(bits), 1);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	for (int i = 0; i < count; i++) {
		unsigned slot = (unsigned)i % 256, block = slot / WIRE_SLOT_BLOCK;
		struct wire_pkt p;
		memset(&p, 0, sizeof(p));
		p.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
		p.bth.pkey = WIRE_PKEY_DEFAULT;
		p.bth.dest_qp = 0x101;
		p.bth.psn = (uint32_t)i;
		p.imm = (uint32_t)i;
		p.inca.coll = WIRE_COLL_ALLREDUCE;
		p.inca.dtype = (uint8_t)(block % WIRE_DTYPE_COUNT);
		p.inca.op = WIRE_OP_SUM;
		p.inca.tree_id = 1;
		p.inca.slot = (uint16_t)slot;
		p.inca.round = (uint32_t)i / 256;
		p.inca.bfr_id = 1;
		p.inca.bsl_code = 1;
		p.inca.bits = bits;
		/* Full packets, the block's last one short (a short last chunk); odd counts of
		 * 1-byte types need pad. */
		size_t es = wire_dtype_size(p.inca.dtype);
		size_t maxn = wire_max_data(4096, es, 1) / es;
		p.inca.count = (uint16_t)(slot % WIRE_SLOT_BLOCK == WIRE_SLOT_BLOCK - 1 ? maxn / 3 + 1 : maxn);
		p.data = data;
		p.data_len = (uint32_t)(p.inca.count * es);
		p.reth.va = (uint64_t)i * 4096;
		size_t len = wire_udp_payload_len(1, p.data_len);
		struct wire_ipinfo ip = ipinfo;
		uint8_t *buf = util_udptx_add(q, &dst, 0, block, len, &ip.ip_id);
		if (!buf || wire_encode_udp(buf, len, &p, &ip) != (int)len) {
			fprintf(stderr, "send_inca_gso: encode failed\n");
			return 1;
		}
		if (util_udptx_queued(q) >= 48 || i == count - 1) {
			int rc = util_udptx_flush(q, s, 0);
			if (rc < 0 || util_udptx_stats(q)->errors) {
				fprintf(stderr, "send_inca_gso: send failed (%d)\n", rc);
				return 1;
			}
			usleep(2000); /* let the capture keep up */
		}
	}
	const struct util_udptx_stats *st = util_udptx_stats(q);
	printf("sent %llu packets in %llu messages, %llu GSO sends, %llu refused\n",
	       (unsigned long long)st->pkts, (unsigned long long)st->msgs,
	       (unsigned long long)st->gso_sends, (unsigned long long)st->gso_failed);
	util_udptx_destroy(q);
	close(s);
	return 0;
}
