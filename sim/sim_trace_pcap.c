/* sim/sim_trace_pcap.c: trace.pcap, the packets leaving one port (trace.pcap_link) as RoCEv2
 * frames, Ethernet / IPv4 / UDP 4791 / BTH (+ AETH, CNP or DETH), in a pcap file with
 * nanosecond timestamps written by this code (no libpcap), so that Wireshark and tshark decode
 * them as InfiniBand. Addresses come from node ids (198.18.0.0/15, the benchmarking block of
 * RFC 2544); payloads are zeros, the ICRC is computed (lib/wire) when the whole frame is
 * captured. docs/sim.md "Traces" gives every field. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_trace_int.h"
#include "wire/wire.h"

#define PCAP_MAGIC_NS 0xa1b23c4du /* pcap with nanosecond timestamps */
#define PCAP_LINKTYPE_ETHERNET 1
#define ROCE_UDP_PORT 4791
#define ADDR_BASE 0xC6120000u     /* 198.18.0.0 */
#define ADDR_COUNT 131070u        /* node n is 198.18.0.0 + n + 1, up to 198.19.255.254 */
#define ETH_LEN 14
#define IP_LEN 20
#define UDP_LEN 8
#define BTH_LEN 12
#define EXT_MAX 16                /* CNP: 16 reserved bytes after the BTH */
#define ICRC_LEN 4
#define FRAME_MAX (ETH_LEN + 65535)

/* BTH opcodes (RC = 0x00 + op, UD = 0x60 + op) and AETH syndromes. */
enum {
	OP_RC_SEND_FIRST = 0x00, OP_RC_SEND_MIDDLE = 0x01, OP_RC_SEND_LAST = 0x02,
	OP_RC_SEND_ONLY = 0x04, OP_RC_ACK = 0x11, OP_UD_SEND_ONLY = 0x64, OP_CNP = 0x81,
};
#define AETH_ACK 0x1F             /* ACK, credit count "unlimited" */
#define AETH_NAK_SEQ 0x60         /* NAK: PSN sequence error */
#define DSCP_DATA 26
#define DSCP_CTL 48

static void be16(uint8_t *b, uint16_t v)
{
	b[0] = (uint8_t)(v >> 8);
	b[1] = (uint8_t)v;
}

static void be32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

/* pcap files are written in the writer's byte order; readers tell it from the magic. We write
 * little-endian explicitly so that the file is the same on every machine. */
static void le32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)(v >> 16);
	b[3] = (uint8_t)(v >> 24);
}

static uint32_t node_addr(uint32_t node)
{
	return ADDR_BASE + node % ADDR_COUNT + 1;
}

static void node_mac(uint8_t *b, uint32_t node)
{
	b[0] = 0x02; /* locally administered, unicast */
	b[1] = 0x00;
	be32(b + 2, node);
}

static uint16_t ip_checksum(const uint8_t *h)
{
	uint32_t sum = 0;
	for (int i = 0; i < IP_LEN; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	return (uint16_t)~sum;
}

int sim_trace_pcap_open(struct sim *s, struct sim_trace *t, const char *path)
{
	const struct sim_config *c = &s->cfg;
	if ((uint64_t)s->nhosts + s->nsw > ADDR_COUNT) {
		snprintf(s->err, sizeof(s->err), "trace.pcap_link: %u nodes do not fit the address block "
			 "198.18.0.0/15 (%u at most)", s->nhosts + s->nsw, ADDR_COUNT);
		return -EINVAL;
	}
	uint64_t udp = (uint64_t)UDP_LEN + BTH_LEN + EXT_MAX + c->mtu_bytes + 3 + ICRC_LEN;
	if (IP_LEN + udp > 65535) {
		snprintf(s->err, sizeof(s->err), "trace.pcap_link: host.mtu_bytes = %u does not fit an "
			 "IPv4 datagram (at most %u)", c->mtu_bytes,
			 (unsigned)(65535 - IP_LEN - UDP_LEN - BTH_LEN - EXT_MAX - 3 - ICRC_LEN));
		return -EINVAL;
	}
	if (!(t->frame = calloc(1, FRAME_MAX)))
		return -ENOMEM;
	t->pcap = fopen(path, "wb");
	if (!t->pcap) {
		snprintf(s->err, sizeof(s->err), "trace: cannot open %.200s: %s", path, strerror(errno));
		return -EIO;
	}
	setvbuf(t->pcap, NULL, _IOFBF, 1 << 20);
	uint8_t h[24];
	le32(h, PCAP_MAGIC_NS);
	h[4] = 2, h[5] = 0, h[6] = 4, h[7] = 0; /* version 2.4 */
	le32(h + 8, 0);                          /* thiszone */
	le32(h + 12, 0);                         /* sigfigs */
	le32(h + 16, c->trace_pcap_snap_bytes ? c->trace_pcap_snap_bytes : FRAME_MAX);
	le32(h + 20, PCAP_LINKTYPE_ETHERNET);
	fwrite(h, 1, sizeof(h), t->pcap);
	return 0;
}

void sim_trace_pcap_write(struct sim *s, struct sim_trace *t, const struct sim_port *port,
			  const struct sim_pkt *p)
{
	const struct sim_config *c = &s->cfg;
	const struct sim_flow *fl = NULL;
	if (p->type <= SIM_PKT_CNP && p->flow < s->nflows)
		fl = &s->flows[p->flow];
	uint32_t fid = fl ? fl->user_id : 0;
	uint32_t payload = 0, ext = 0, qp, psn = p->psn;
	uint8_t opcode, dscp = DSCP_CTL, syndrome = 0, fecn_becn = 0;
	switch (p->type) {
	case SIM_PKT_DATA:
		payload = p->size_bytes > c->header_bytes ? p->size_bytes - c->header_bytes : 0;
		opcode = !fl || fl->npkts == 1 ? OP_RC_SEND_ONLY : p->psn == 0 ? OP_RC_SEND_FIRST
			: p->psn + 1 == fl->npkts ? OP_RC_SEND_LAST : OP_RC_SEND_MIDDLE;
		qp = 2 * fid; /* the receiver's QP */
		dscp = DSCP_DATA;
		break;
	case SIM_PKT_ACK:
	case SIM_PKT_NACK:
		opcode = OP_RC_ACK;
		ext = 4; /* AETH */
		syndrome = p->type == SIM_PKT_ACK ? AETH_ACK : AETH_NAK_SEQ;
		if (p->type == SIM_PKT_ACK) /* an ACK carries the last PSN acknowledged */
			psn = p->psn - 1;
		qp = 2 * fid + 1; /* the sender's QP */
		break;
	case SIM_PKT_CNP:
		opcode = OP_CNP;
		ext = 16;
		fecn_becn = 0x40; /* BECN */
		qp = 2 * fid + 1;
		break;
	default: /* a module's own packet: UD SEND Only to QP 2 */
		opcode = OP_UD_SEND_ONLY;
		ext = 8; /* DETH */
		payload = p->size_bytes > ETH_LEN + IP_LEN + UDP_LEN + BTH_LEN + ext + ICRC_LEN + 4
			? p->size_bytes - (ETH_LEN + IP_LEN + UDP_LEN + BTH_LEN + ext + ICRC_LEN + 4) : 0;
		if (payload > c->mtu_bytes)
			payload = c->mtu_bytes;
		qp = 2;
		break;
	}
	uint32_t pad = (4 - payload % 4) % 4;
	uint32_t udp_len = UDP_LEN + BTH_LEN + ext + payload + pad + ICRC_LEN;
	uint32_t frame_len = ETH_LEN + IP_LEN + udp_len;
	uint32_t hdr_len = ETH_LEN + IP_LEN + UDP_LEN + BTH_LEN + ext;
	uint32_t snap = c->trace_pcap_snap_bytes;
	uint32_t cap = snap && snap < frame_len ? snap : frame_len;
	uint8_t *f = t->frame;
	memset(f, 0, cap < hdr_len ? hdr_len : cap);
	/* Ethernet: from this port's node to its peer. */
	node_mac(f, port->peer->node->id);
	node_mac(f + 6, port->node->id);
	be16(f + 12, 0x0800);
	/* IPv4: DF, TTL 64, ECN from the packet (ECT(0), or CE once marked). */
	uint8_t *ip = f + ETH_LEN;
	ip[0] = 0x45;
	ip[1] = (uint8_t)(dscp << 2 | (p->flags & SIM_PKT_CE ? 3 : p->flags & SIM_PKT_ECT ? 2 : 0));
	be16(ip + 2, (uint16_t)(IP_LEN + udp_len));
	be16(ip + 6, 0x4000);
	ip[8] = 64;
	ip[9] = 17;
	be32(ip + 12, node_addr(p->src));
	be32(ip + 16, node_addr(p->dst));
	be16(ip + 10, ip_checksum(ip));
	/* UDP: the flow's entropy is its source port; no checksum (RoCEv2 leaves it 0). */
	uint8_t *udp = ip + IP_LEN;
	be16(udp, p->entropy);
	be16(udp + 2, ROCE_UDP_PORT);
	be16(udp + 4, (uint16_t)udp_len);
	/* BTH */
	uint8_t *bth = udp + UDP_LEN;
	bth[0] = opcode;
	bth[1] = (uint8_t)(pad << 4);
	be16(bth + 2, 0xFFFF); /* default P_Key */
	be32(bth + 4, qp & 0xFFFFFF);
	bth[4] = fecn_becn;
	be32(bth + 8, psn & 0xFFFFFF);
	if (p->flags & SIM_PKT_ACKREQ)
		bth[8] |= 0x80; /* AckReq */
	uint8_t *x = bth + BTH_LEN;
	if (syndrome)
		be32(x, (uint32_t)syndrome << 24); /* AETH: syndrome, MSN 0 */
	else if (opcode == OP_UD_SEND_ONLY)
		be32(x + 4, 1); /* DETH: Q_Key 0, source QP 1 */
	if (cap == frame_len) { /* the whole frame: with its ICRC */
		struct wire_ipinfo ii = { .src_ip = node_addr(p->src), .dst_ip = node_addr(p->dst),
			.src_port = p->entropy, .dst_port = ROCE_UDP_PORT, .ip_id = 0 };
		le32(f + frame_len - ICRC_LEN, wire_icrc(&ii, udp + UDP_LEN, udp_len - UDP_LEN));
	}
	uint8_t rec[16];
	uint64_t ns = s->now / 1000;
	le32(rec, (uint32_t)(ns / 1000000000u));
	le32(rec + 4, (uint32_t)(ns % 1000000000u));
	le32(rec + 8, cap);
	le32(rec + 12, frame_len);
	fwrite(rec, 1, sizeof(rec), t->pcap);
	fwrite(f, 1, cap, t->pcap);
	t->frames++;
}
