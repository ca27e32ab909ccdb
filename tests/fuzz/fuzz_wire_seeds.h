/* tests/fuzz: seed corpus shared by the lib/wire harnesses. When INCA_FUZZ_SEED_DIR is set,
 * LLVMFuzzerInitialize writes valid packets there (UDP payloads or whole frames), so libFuzzer
 * starts from deep inside the decoder instead of from the first length check. */
#ifndef INCA_FUZZ_WIRE_SEEDS_H
#define INCA_FUZZ_WIRE_SEEDS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/auth.h"
#include "wire/wire.h"

/* The addresses every UDP-payload seed's ICRC is computed for. */
static const struct wire_ipinfo fuzz_ip = { 0x7F00000Au, 0x7F000001u, 4791, 4791, 0, false };

/* Abort on a broken property: libFuzzer reports it as a crash with the input. */
#define FUZZ_ASSERT(c)                                                                    \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "property failed: %s (%s:%d)\n", #c, __FILE__, __LINE__); \
			abort();                                                          \
		}                                                                         \
	} while (0)

/* mode 0: UDP payloads; 1: Ethernet frames; 2: UDP payloads after the 3-byte prefix of
 * fuzz_gro.c (segment size = the packet's length, 3 copies). */
static void fuzz_write_seeds(int mode)
{
	int frames = mode == 1;
	static const uint8_t mac[6] = { 2, 0, 0, 0, 0, 1 };
	const char *dir = getenv("INCA_FUZZ_SEED_DIR");
	if (!dir || !*dir)
		return;
	static uint8_t data[4096], bits[512], out[8192];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 31 + 7);
	for (size_t i = 0; i < sizeof(bits); i++)
		bits[i] = (uint8_t)(i % 5 == 0 ? 1u << (i % 8) : 0);
	unsigned n = 0;
	for (uint8_t dt = 0; dt < WIRE_DTYPE_COUNT; dt++) {
		size_t es = wire_dtype_size(dt);
		for (unsigned v = 0; v < 8; v++) {
			/* BSL codes 1, 3, 5, 7, each with a small count and with the largest count
			 * that fits (IB payload near 4096, where the length checks matter most) */
			uint8_t bsl = (uint8_t)(1 + 2 * (v / 2));
			unsigned small[] = { 0, 1, 3, 17 };
			/* every third seed carries an authentication block with a real tag */
			bool auth = n % 3 == 0;
			unsigned count = v % 2 ? (unsigned)(wire_max_data_auth(4096, es, bsl, auth) / es)
					       : small[(dt + bsl) % 4];
			struct wire_pkt p;
			memset(&p, 0, sizeof(p));
			p.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
			p.bth.pkey = WIRE_PKEY_DEFAULT;
			p.bth.dest_qp = 0x101;
			p.bth.psn = n;
			p.reth.va = n * 100u;
			p.reth.rkey = 0x1234;
			p.imm = n;
			p.inca.flags = (uint8_t)(n % 4);
			p.inca.coll = (uint8_t)(1 + n % WIRE_COLL_MAX);
			p.inca.dtype = dt;
			p.inca.op = (uint8_t)(dt <= WIRE_DT_UINT64 ? n % WIRE_OP_COUNT : n % 4);
			p.inca.tree_id = 1;
			p.inca.slot = (uint16_t)n;
			p.inca.round = n / 3;
			p.inca.bfr_id = (uint16_t)(n % 70);
			p.inca.bsl_code = bsl;
			p.inca.si = (uint8_t)(n % 3);
			p.inca.count = (uint16_t)count;
			p.inca.bits = bits;
			p.data = data;
			p.data_len = (uint32_t)(count * es);
			if (auth) {
				static struct wire_mac *mac;
				static const uint8_t key[WIRE_AUTH_KEY_LEN] = { 1, 2, 3 };
				if (!mac && wire_mac_new(&mac, key) < 0)
					continue;
				p.inca.flags |= WIRE_F_AUTH;
				p.inca.epoch = n;
				p.auth.key_id = 7;
				p.auth.ctx = n % 2 ? n % 70 : WIRE_AUTH_CTX_SWITCH;
				p.auth.ctr = 1000u + n;
				if (wire_mac_sign(mac, &p) < 0)
					continue;
			}
			struct wire_ipinfo ip = fuzz_ip;
			if (frames)
				ip.ip_id = (uint16_t)(n * 977);
			int len = frames ? wire_encode_frame(out, sizeof(out), mac, mac, &p, &ip)
					 : wire_encode_udp(out, sizeof(out), &p, &ip);
			if (len < 0)
				continue;
			/* plus a copy one 4-byte element too big (IB payload 4100), count and DMA
			 * length kept consistent: only the size limit rejects it */
			if (mode == 0 && dt == WIRE_DT_FP32 && (size_t)len + 4 <= sizeof(out) &&
			    !auth && wire_inca_hdr_len(bsl) + p.data_len == 4096) {
				static uint8_t big[8192];
				memcpy(big, out, (size_t)len - 4);
				memset(big + len - 4, 0x11, 8);
				big[WIRE_ROCE_HDR_LEN + 17]++; /* count low byte */
				big[WIRE_BTH_LEN + 15] += 4;  /* DMA length low byte: 4096 -> 4100 */
				char bp[4096];
				snprintf(bp, sizeof(bp), "%s/seed-big-%u", dir, bsl);
				FILE *bf = fopen(bp, "wb");
				if (bf) {
					fwrite(big, 1, (size_t)len + 4, bf);
					fclose(bf);
				}
			}
			char path[4096];
			snprintf(path, sizeof(path), "%s/seed-%03u", dir, n++);
			FILE *f = fopen(path, "wb");
			if (f) {
				if (mode == 2)
					fwrite((uint8_t[3]){ (uint8_t)len, (uint8_t)(len >> 8), 3 }, 1, 3,
					       f);
				fwrite(out, 1, (size_t)len, f);
				fclose(f);
			}
		}
	}
}

#endif
