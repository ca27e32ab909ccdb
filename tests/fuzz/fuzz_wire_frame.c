/* libFuzzer harness for wire_decode_frame: never crashes or reads out of bounds, and an accepted
 * frame re-encodes (wire_encode_frame) to the same bytes except the fields the encoder fixes
 * (TOS, TTL and the checksums that depend on them, UDP checksum). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_wire_seeds.h"
#include "wire/wire.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_write_seeds(1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_pkt p, q;
	struct wire_ipinfo ip;
	enum wire_err e = wire_decode_frame(data, size, &p, &ip);
	FUZZ_ASSERT(wire_err_name(e) != NULL);
	if (e != WIRE_OK)
		return 0;

	size_t tot = (size_t)data[16] << 8 | data[17]; /* IPv4 total length */
	FUZZ_ASSERT(14 + tot <= size);
	FUZZ_ASSERT(ip.dst_port == WIRE_ROCE_UDP_PORT);
	FUZZ_ASSERT(p.data >= data && p.data + p.data_len <= data + size);

	/* The UDP payload alone decodes the same way with the frame's addresses. */
	FUZZ_ASSERT(wire_decode_udp(data + 42, tot - 28, &q, &ip) == WIRE_OK);

	static uint8_t out[16384];
	int n = wire_encode_frame(out, sizeof(out), data, data + 6, &p, &ip);
	FUZZ_ASSERT(n >= 0 && (size_t)n == 14 + tot);
	for (size_t i = 0; i < (size_t)n; i++) {
		if (i == 15 || i == 22 || i == 24 || i == 25 || i == 40 || i == 41)
			continue; /* TOS, TTL, IP checksum, UDP checksum */
		FUZZ_ASSERT(out[i] == data[i]);
	}
	/* and the re-encoded frame is accepted with identical content */
	FUZZ_ASSERT(wire_decode_frame(out, (size_t)n, &q, NULL) == WIRE_OK);
	FUZZ_ASSERT(q.data_len == p.data_len && memcmp(q.data, p.data, p.data_len) == 0);
	FUZZ_ASSERT(q.inca.round == p.inca.round && q.imm == p.imm && q.reth.va == p.reth.va);
	return 0;
}
