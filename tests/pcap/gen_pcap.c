/* tests/pcap helper: writes a pcap of INCA frames made by the real encoder (wire_encode_frame)
 * and a TSV of what was encoded, for check_pcap.py to compare against scapy and tshark.
 * Covers every dtype and BSL, contributions and results, RETX, repair notices (NACK), pad
 * 0..3, SI > 0, count 0, and authentication blocks (every other data type) whose tags are
 * made with the key GEN_AUTH_KEY_HEX, which check_pcap.py --auth-key verifies independently. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "wire/auth.h"
#include "wire/wire.h"

/* key[i] = i */
#define GEN_AUTH_KEY_HEX "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"


static void put32le(FILE *f, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	fwrite(b, 1, 4, f);
}

static void put16le(FILE *f, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
	fwrite(b, 1, 2, f);
}

/* Finite, exactly printable element values: floats are multiples of 1/8 in [-125, 125]. */
static void fill_data(uint8_t *d, uint8_t dtype, unsigned count, struct util_rng *r)
{
	for (unsigned i = 0; i < count; i++) {
		uint8_t *e = d + i * wire_dtype_size(dtype);
		double v = (double)((int)util_rng_below(r, 2001) - 1000) / 8.0;
		if (dtype == WIRE_DT_FP32) {
			float f = (float)v;
			memcpy(e, &f, 4); /* little-endian host: wire order */
		} else if (dtype == WIRE_DT_FP64) {
			memcpy(e, &v, 8);
		} else if (dtype == WIRE_DT_BF16) {
			float f = (float)v;
			uint32_t u;
			memcpy(&u, &f, 4);
			uint16_t h = (uint16_t)(u >> 16); /* v has few mantissa bits: exact */
			memcpy(e, &h, 2);
		} else if (dtype == WIRE_DT_FP16) {
			/* random sign/exponent/mantissa, exponent kept below 31 (no Inf/NaN) */
			uint16_t h = (uint16_t)util_rng_next(r);
			if (((h >> 10) & 0x1F) == 0x1F)
				h &= (uint16_t)~0x0400;
			memcpy(e, &h, 2);
		} else {
			uint64_t x = util_rng_next(r);
			memcpy(e, &x, wire_dtype_size(dtype));
		}
	}
}

struct gen {
	FILE *pcap, *tsv;
	struct util_rng rng;
	unsigned n;
	uint8_t frame[8192];
	struct wire_mac *mac;
	uint64_t ctr;
};

static void emit(struct gen *g, struct wire_pkt *p, const struct wire_ipinfo *ip)
{
	static const uint8_t dmac[6] = { 0x02, 0x1c, 0xa0, 0, 0, 1 };
	static const uint8_t smac[6] = { 0x02, 0x1c, 0xa0, 0, 0, 2 };
	if (p->inca.flags & WIRE_F_AUTH) {
		/* a member signs with its BFR-id as context, a switch with its own */
		p->auth.key_id = 5;
		p->inca.epoch = 3;
		p->auth.ctx = p->inca.flags & (WIRE_F_RESULT | WIRE_F_NACK)
				      ? WIRE_AUTH_CTX_SWITCH | p->inca.bfr_id
				      : p->inca.bfr_id;
		p->auth.ctr = g->ctr++;
		if (wire_mac_sign(g->mac, p) < 0) {
			fprintf(stderr, "gen_pcap: MAC failed for packet %u\n", g->n);
			exit(1);
		}
	}
	int len = wire_encode_frame(g->frame, sizeof(g->frame), dmac, smac, p, ip);
	if (len < 0) {
		fprintf(stderr, "gen_pcap: encode failed (%d) for packet %u\n", len, g->n);
		exit(1);
	}
	g->n++;
	put32le(g->pcap, 1700000000u + g->n / 1000);
	put32le(g->pcap, (g->n % 1000) * 1000);
	put32le(g->pcap, (uint32_t)len);
	put32le(g->pcap, (uint32_t)len);
	fwrite(g->frame, 1, (size_t)len, g->pcap);

	const struct wire_inca *h = &p->inca;
	size_t bl = wire_bsl_bytes(h->bsl_code);
	unsigned bsl_bits = (unsigned)bl * 8;
	fprintf(g->tsv, "%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t", g->n, h->flags, h->coll,
		h->dtype, h->op, h->tree_id, h->slot, h->round, h->bfr_id, h->bsl_code, h->si,
		h->count);
	const char *sep = "";
	for (unsigned bp = wire_bier_next(h->bits, bl, 1); bp; bp = wire_bier_next(h->bits, bl, bp + 1)) {
		fprintf(g->tsv, "%s%u", sep, wire_bier_bfr_id(bp, bsl_bits, h->si));
		sep = ",";
	}
	size_t ib = wire_inca_hdr_len(h->bsl_code) + (h->flags & WIRE_F_AUTH ? WIRE_AUTH_LEN : 0) +
		    p->data_len;
	fprintf(g->tsv, "%s\t%llu\t%u\t%u\t%u\t%u\t%zu\t%zu\t", *sep ? "" : "-",
		(unsigned long long)p->reth.va, p->reth.rkey, p->imm, p->bth.dest_qp, p->bth.psn,
		(4 - ib % 4) % 4, ib);
	for (uint32_t i = 0; i < p->data_len; i++)
		fprintf(g->tsv, "%02x", p->data[i]);
	fprintf(g->tsv, "%s\n", p->data_len ? "" : "-");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s out.pcap out.tsv\n", argv[0]);
		return 2;
	}
	struct gen g;
	memset(&g, 0, sizeof(g));
	g.pcap = fopen(argv[1], "wb");
	g.tsv = fopen(argv[2], "w");
	if (!g.pcap || !g.tsv) {
		perror("gen_pcap: open");
		return 1;
	}
	util_rng_seed(&g.rng, 42);
	uint8_t key[WIRE_AUTH_KEY_LEN];
	if (wire_auth_key_parse(GEN_AUTH_KEY_HEX, key) < 0 || wire_mac_new(&g.mac, key) < 0) {
		fprintf(stderr, "gen_pcap: MAC setup failed\n");
		return 1;
	}
	g.ctr = 1ull << 40;
	/* pcap global header: microseconds, version 2.4, snaplen 65535, LINKTYPE_ETHERNET */
	put32le(g.pcap, 0xa1b2c3d4u);
	put16le(g.pcap, 2);
	put16le(g.pcap, 4);
	put32le(g.pcap, 0);
	put32le(g.pcap, 0);
	put32le(g.pcap, 65535);
	put32le(g.pcap, 1);
	fprintf(g.tsv, "frame\tflags\tcoll\tdtype\top\ttree\tslot\tround\tbfr_id\tbsl\tsi\tcount\t"
		       "bfr_ids\tva\trkey\timm\tdqpn\tpsn\tpadcnt\tdmalen\tdata\n");

	static uint8_t data[4096], bits[512];
	unsigned gseq = 0;
	for (uint8_t dt = 0; dt < WIRE_DTYPE_COUNT; dt++) {
		for (uint8_t bsl = 1; bsl <= 7; bsl++) {
			unsigned bsl_bits = (unsigned)wire_bsl_bytes(bsl) * 8;
			size_t bl = wire_bsl_bytes(bsl);
			uint8_t af = dt % 2 ? WIRE_F_AUTH : 0;
			size_t es = wire_dtype_size(dt);
			size_t maxd = wire_max_data_auth(4096, es, bsl, af) / es;
			/* a spread of counts: tiny odd ones (pad 1..3 for 1- and 2-byte types), medium,
			 * and the largest that fits a 4096 MTU */
			unsigned counts[] = { 1u + bsl % 3u, 7, 33 + bsl, (unsigned)maxd };
			unsigned count = counts[(dt + bsl) % 4];
			uint8_t op = (uint8_t)((dt + bsl) % (dt <= WIRE_DT_UINT64 ? WIRE_OP_COUNT : 4));
			uint16_t tree = (uint16_t)(1 + dt % 3);
			uint16_t slot = (uint16_t)(gseq % 256);
			uint32_t round = gseq / 256 + bsl * 1000u;

			/* upward contribution from member k (k beyond the first set when BSL is 64) */
			uint16_t k = (uint16_t)(1 + (dt * 7 + bsl * 13) % (bsl == 1 ? 200 : 40));
			uint8_t si = (uint8_t)((k - 1) / bsl_bits);
			memset(bits, 0, bl);
			wire_bier_set(bits, bl, wire_bier_bp(k, bsl_bits, si));
			fill_data(data, dt, count, &g.rng);
			struct wire_pkt p;
			memset(&p, 0, sizeof(p));
			p.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
			p.bth.pkey = WIRE_PKEY_DEFAULT;
			p.bth.dest_qp = 0x100u + tree;
			p.bth.psn = (gseq * 3) & 0xFFFFFF;
			p.reth.va = (uint64_t)gseq * 4068;
			p.reth.rkey = 0xC0FFEE00u + tree;
			p.imm = gseq;
			p.inca.flags = (uint8_t)(((dt % 3 == 2) ? WIRE_F_RETX : 0) | af);
			p.inca.coll = (uint8_t)(1 + (dt + bsl) % WIRE_COLL_MAX);
			p.inca.dtype = dt;
			p.inca.op = op;
			p.inca.tree_id = tree;
			p.inca.slot = slot;
			p.inca.round = round;
			p.inca.bfr_id = k;
			p.inca.bsl_code = bsl;
			p.inca.si = si;
			p.inca.count = (uint16_t)count;
			p.inca.bits = bits;
			p.data = data;
			p.data_len = (uint32_t)(count * wire_dtype_size(dt));
			struct wire_ipinfo up = { 0x7F00000Au + k % 200, 0x7F000001u, 4791, 4791, 0, false };
			if (bsl == 5)
				up.ip_id = (uint16_t)(0x1000 + gseq); /* ICRC must cover a non-zero ID */
			emit(&g, &p, &up);

			/* downward result to a destination set (several members of set si) */
			memset(bits, 0, bl);
			for (unsigned m = 0; m < 6; m++)
				wire_bier_set(bits, bl, 1 + (m * 11 + bsl) % bsl_bits);
			p.inca.flags = (uint8_t)(WIRE_F_RESULT | (bsl == 3 ? WIRE_F_RETX : 0) | af);
			p.inca.bfr_id = 0;
			p.bth.dest_qp = 0x1000u + k;
			struct wire_ipinfo down = { 0x7F000001u, up.src_ip, 4791, 4791, 0, false };
			emit(&g, &p, &down);

			/* repair notice (header-only NACK) naming two members, from the root (BFR-id
			 * 0) or, every other BSL, from a non-root switch */
			if (dt % 4 == 1) {
				memset(bits, 0, bl);
				wire_bier_set(bits, bl, 1 + (bsl * 5) % bsl_bits);
				wire_bier_set(bits, bl, 1 + (bsl * 5 + 3) % bsl_bits);
				p.inca.flags = (uint8_t)(WIRE_F_NACK | af);
				p.inca.bfr_id = bsl % 2 ? 0 : (uint16_t)(900 + bsl);
				p.inca.count = 0;
				p.data = NULL;
				p.data_len = 0;
				emit(&g, &p, &down);
			}
			gseq++;
		}
	}

	/* header-only packet (count 0, e.g. a barrier) and one with every bit of BSL 256 set */
	struct wire_pkt p;
	memset(&p, 0, sizeof(p));
	p.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
	p.bth.pkey = WIRE_PKEY_DEFAULT;
	p.bth.dest_qp = 0x101;
	p.inca.coll = WIRE_COLL_BARRIER;
	p.inca.dtype = WIRE_DT_UINT8;
	p.inca.op = WIRE_OP_BOR;
	p.inca.tree_id = 1;
	p.inca.bfr_id = 1;
	p.inca.bsl_code = 3;
	memset(bits, 0xFF, 32);
	p.inca.bits = bits;
	struct wire_ipinfo ip = { 0xC6120001u, 0xC6120002u, 51000, 4791, 0, false };
	emit(&g, &p, &ip);

	wire_mac_free(g.mac);
	if (fclose(g.pcap) || fclose(g.tsv)) {
		perror("gen_pcap: write");
		return 1;
	}
	printf("gen_pcap: %u packets\n", g.n);
	return 0;
}
