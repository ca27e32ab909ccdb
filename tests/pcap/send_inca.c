/* tests/pcap helper: sends INCA packets through a real kernel UDP socket configured the way every
 * INCA sender is (unconnected, IP_PMTUDISC_DO, ICRC computed for IP ID 0), so that a loopback
 * capture proves the kernel's IPv4 header matches what the ICRC assumed (docs/protocol.md §7).
 * usage: send_inca SRC_IP DST_IP COUNT   (both loopback addresses; port 4791 on both sides) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire/wire.h"

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s SRC_IP DST_IP COUNT\n", argv[0]);
		return 2;
	}
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_port = htons(WIRE_ROCE_UDP_PORT) };
	struct sockaddr_in dst = src;
	if (inet_pton(AF_INET, argv[1], &src.sin_addr) != 1 ||
	    inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1 ||
	    (ntohl(src.sin_addr.s_addr) >> 24) != 127 || (ntohl(dst.sin_addr.s_addr) >> 24) != 127) {
		fprintf(stderr, "send_inca: loopback IPv4 addresses only\n");
		return 2;
	}
	int count = atoi(argv[3]);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	int pmtu = IP_PMTUDISC_DO;
	if (s < 0 || setsockopt(s, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) ||
	    bind(s, (struct sockaddr *)&src, sizeof(src))) {
		perror("send_inca: socket");
		return 77; /* address in use or not allowed here: skip */
	}
	struct wire_ipinfo ip = { ntohl(src.sin_addr.s_addr), ntohl(dst.sin_addr.s_addr),
				  WIRE_ROCE_UDP_PORT, WIRE_ROCE_UDP_PORT, 0, false };
	static uint8_t data[4096], buf[WIRE_MAX_UDP_PAYLOAD];
	uint8_t bits[8] = { 0 };
	wire_bier_set(bits, sizeof(bits), 1);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 5);
	for (int i = 0; i < count; i++) {
		struct wire_pkt p;
		memset(&p, 0, sizeof(p));
		p.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
		p.bth.pkey = WIRE_PKEY_DEFAULT;
		p.bth.dest_qp = 0x101;
		p.bth.psn = (uint32_t)i;
		p.imm = (uint32_t)i;
		p.inca.coll = WIRE_COLL_ALLREDUCE;
		p.inca.dtype = (uint8_t)(i % WIRE_DTYPE_COUNT);
		p.inca.op = WIRE_OP_SUM;
		p.inca.tree_id = 1;
		p.inca.slot = (uint16_t)i;
		p.inca.bfr_id = 1;
		p.inca.bsl_code = 1;
		p.inca.bits = bits;
		/* sizes from 1 byte to the full 4096-byte MTU, odd ones needing pad */
		size_t es = wire_dtype_size(p.inca.dtype);
		size_t maxn = wire_max_data(4096, es, 1) / es;
		p.inca.count = (uint16_t)(1 + (size_t)i * 97 % maxn);
		p.data = data;
		p.data_len = (uint32_t)(p.inca.count * es);
		p.reth.va = (uint64_t)i * 4096;
		int n = wire_encode_udp(buf, sizeof(buf), &p, &ip);
		if (n < 0 || sendto(s, buf, (size_t)n, 0, (struct sockaddr *)&dst, sizeof(dst)) != n) {
			perror("send_inca: send");
			return 1;
		}
		usleep(1000);
	}
	close(s);
	return 0;
}
