/* libFuzzer harness for the GRO receive path: a coalesced buffer is split into datagrams
 * (util_gro_next, as util_udprx_next does) and each one decoded with the ID unseen, guessing its
 * index, as inca-switch and libinca do. Input: segment size (2 bytes, little-endian), a copy
 * count, then the buffer.
 *  - Any bytes: the split covers the buffer exactly, in order, no segment above the segment
 *    size, and decoding never crashes or reads outside its segment.
 *  - If the buffer starts with a valid packet P: a buffer of n copies of P, copy k stamped with
 *    IPv4 ID k as a GSO send's segments are, plus a short last segment (P without data) splits
 *    back into exactly those packets, each decodes from any first guess, and a copy stamped for
 *    another sender (a different flow) does not. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_wire_seeds.h"
#include "util/udpio.h"
#include "wire/wire.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_write_seeds(2);
	return 0;
}

static uint8_t buf[65536];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	size_t gso = (size_t)data[0] | (size_t)data[1] << 8;
	unsigned copies = 1 + data[2] % 24;
	const uint8_t *b = data + 3;
	size_t total = size - 3, off = 0, len = 0, covered = 0;
	uint16_t k = 0;

	while (util_gro_next(total, gso, &off, &len)) {
		FUZZ_ASSERT(off == covered + len && off <= total && len > 0);
		FUZZ_ASSERT(!gso || len <= gso);
		FUZZ_ASSERT(len == gso || off == total || !gso); /* only the last is shorter */
		struct wire_pkt p;
		struct wire_ipinfo ip = fuzz_ip;
		ip.ip_id = k++;
		ip.id_unseen = true;
		enum wire_err e = wire_decode_udp(b + covered, len, &p, &ip);
		if (e == WIRE_OK)
			FUZZ_ASSERT(p.data >= b + covered && p.data + p.data_len <= b + off);
		covered = off;
	}
	FUZZ_ASSERT(covered == total);

	/* A well-formed GSO send built from the first packet of the input. */
	struct wire_pkt p;
	size_t plen = gso && gso <= total ? gso : total;
	if (plen > WIRE_MAX_UDP_PAYLOAD || wire_decode_udp(b, plen, &p, NULL) != WIRE_OK)
		return 0;
	struct wire_pkt shortp = p;
	shortp.data = NULL;
	shortp.data_len = 0;
	shortp.inca.count = 0;
	size_t slen = wire_pkt_udp_len(&shortp);
	if (slen >= plen)
		return 0; /* no shorter packet: P carries no data */
	size_t n = 0;
	unsigned c;
	for (c = 0; c < copies && n + plen + slen <= sizeof buf; c++) {
		struct wire_ipinfo ip = fuzz_ip;
		ip.ip_id = (uint16_t)c;
		FUZZ_ASSERT(wire_encode_udp(buf + n, plen, &p, &ip) == (int)plen);
		n += plen;
	}
	struct wire_ipinfo ip = fuzz_ip;
	ip.ip_id = (uint16_t)c;
	FUZZ_ASSERT(wire_encode_udp(buf + n, slen, &shortp, &ip) == (int)slen);
	n += slen;

	off = 0;
	k = 0;
	size_t at = 0;
	while (util_gro_next(n, plen, &off, &len)) {
		struct wire_pkt q;
		struct wire_ipinfo rx = fuzz_ip;
		FUZZ_ASSERT(len == (k < c ? plen : slen));
		rx.id_unseen = true;
		rx.ip_id = k;
		FUZZ_ASSERT(wire_decode_udp(buf + at, len, &q, &rx) == WIRE_OK);
		FUZZ_ASSERT(q.inca.count == (k < c ? p.inca.count : 0));
		rx.ip_id = (uint16_t)(k * 7 % WIRE_GSO_ID_SPAN); /* a wrong first guess */
		FUZZ_ASSERT(wire_decode_udp(buf + at, len, &q, &rx) == WIRE_OK);
		rx.src_ip ^= 1; /* the same bytes as another flow's */
		FUZZ_ASSERT(wire_decode_udp(buf + at, len, &q, &rx) == WIRE_E_ICRC);
		at = off;
		k++;
	}
	FUZZ_ASSERT(k == c + 1 && at == n);
	return 0;
}
