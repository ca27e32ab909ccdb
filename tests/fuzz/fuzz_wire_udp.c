/* libFuzzer harness for wire_decode_udp: never crashes or reads out of bounds, agrees with
 * itself with and without ICRC verification, and a decoded packet re-encodes to identical
 * bytes (the codec is a bijection on valid packets), also through the fan-out encoder. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_wire_seeds.h"
#include "wire/auth.h"
#include "wire/wire.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_write_seeds(0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_pkt p, q;
	enum wire_err e = wire_decode_udp(data, size, &p, NULL);
	FUZZ_ASSERT(wire_err_name(e) != NULL);
	enum wire_err ev = wire_decode_udp(data, size, &q, &fuzz_ip);
	/* the ICRC is the last check: verification can only add WIRE_E_ICRC */
	FUZZ_ASSERT(ev == e || (e == WIRE_OK && ev == WIRE_E_ICRC));

	/* Same bytes with a correct ICRC patched in must decode exactly like the unverified call. */
	if (size >= WIRE_BTH_LEN + WIRE_ICRC_LEN && size <= WIRE_MAX_UDP_PAYLOAD + 64) {
		uint8_t *m = malloc(size);
		if (m) {
			memcpy(m, data, size);
			uint32_t c = wire_icrc(&fuzz_ip, m, size);
			m[size - 4] = (uint8_t)c;
			m[size - 3] = (uint8_t)(c >> 8);
			m[size - 2] = (uint8_t)(c >> 16);
			m[size - 1] = (uint8_t)(c >> 24);
			FUZZ_ASSERT(wire_decode_udp(m, size, &q, &fuzz_ip) == e);
			free(m);
		}
	}
	if (e != WIRE_OK)
		return 0;

	/* Decoded pointers stay inside the input and lengths are consistent. */
	size_t bl = wire_bsl_bytes(p.inca.bsl_code);
	FUZZ_ASSERT(bl != 0);
	FUZZ_ASSERT(p.inca.bits >= data && p.inca.bits + bl <= data + size);
	FUZZ_ASSERT(p.data >= data && p.data + p.data_len <= data + size);
	FUZZ_ASSERT(p.reth.dma_len <= 4096);
	FUZZ_ASSERT(wire_pkt_udp_len(&p) == size);
	FUZZ_ASSERT(!!(p.inca.flags & WIRE_F_AUTH) == (p.reth.dma_len == wire_inca_hdr_len(
		p.inca.bsl_code) + WIRE_AUTH_LEN + p.data_len));
	FUZZ_ASSERT((p.inca.flags & WIRE_F_AUTH) || p.inca.epoch == 0);
	FUZZ_ASSERT(p.bth.opcode == WIRE_OPCODE_UC_WRITE_ONLY_IMM);
	unsigned pop = wire_bier_popcount(p.inca.bits, bl), seen = 0;
	for (unsigned bp = wire_bier_next(p.inca.bits, bl, 1); bp;
	     bp = wire_bier_next(p.inca.bits, bl, bp + 1)) {
		FUZZ_ASSERT(wire_bier_test(p.inca.bits, bl, bp));
		seen++;
	}
	FUZZ_ASSERT(seen == pop);
	FUZZ_ASSERT(wire_bier_empty(p.inca.bits, bl) == (pop == 0));

	/* Round trip: re-encoding gives the same bytes; the ICRC too when it verified. */
	static uint8_t out[WIRE_MAX_UDP_PAYLOAD + 64];
	int n = wire_encode_udp(out, sizeof(out), &p, &fuzz_ip);
	FUZZ_ASSERT(n >= 0 && (size_t)n == size);
	FUZZ_ASSERT(memcmp(out, data, size - WIRE_ICRC_LEN) == 0);
	if (ev == WIRE_OK)
		FUZZ_ASSERT(memcmp(out, data, size) == 0);
	/* the fan-out encoder (precomputed data CRC) writes the very same bytes */
	static uint8_t out2[WIRE_MAX_UDP_PAYLOAD + 64];
	struct wire_dcrc dc;
	FUZZ_ASSERT(wire_data_crc(&dc, p.data, p.data_len) == 0);
	FUZZ_ASSERT(wire_encode_udp_dcrc(out2, sizeof(out2), &p, &fuzz_ip, &dc) == n);
	FUZZ_ASSERT(memcmp(out, out2, (size_t)n) == 0);

	/* MAC: verifying arbitrary bytes is safe; a packet signed here verifies, and changing
	 * its tag does not. */
	if (p.inca.flags & WIRE_F_AUTH) {
		static struct wire_mac *mac;
		static const uint8_t key[WIRE_AUTH_KEY_LEN] = { 1, 2, 3 };
		if (!mac)
			FUZZ_ASSERT(wire_mac_new(&mac, key) == 0);
		int v = wire_mac_verify(mac, &p);
		FUZZ_ASSERT(v == 0 || v == -EBADMSG);
		struct wire_pkt s = p;
		FUZZ_ASSERT(wire_mac_sign(mac, &s) == 0);
		FUZZ_ASSERT(wire_mac_verify(mac, &s) == 0);
		s.auth.tag[size % WIRE_AUTH_TAG_LEN] ^= 1;
		FUZZ_ASSERT(wire_mac_verify(mac, &s) == -EBADMSG);
	}
	return 0;
}
