/* lib/wire ICRC: the RoCEv2 invariant CRC over a pseudo header (8 bytes 0xFF, the IPv4 and UDP
 * headers with their variant fields masked) and the BTH-onward UDP payload, using the zlib CRC-32
 * (crc32.c: PCLMULQDQ folding where the CPU has it).
 * The IPv4 header is rebuilt from wire_ipinfo because a UDP socket never sees it. */
#include "wire/wire.h"

#include <errno.h>
#include <string.h>

#include "wire/wire_internal.h"

/* crc32(0, "\xff" x 8 "\x45\xff", 10): the pseudo-LRH plus version/IHL and the masked TOS are
 * the same in every packet, so the CRC continues from this constant (icrc_test checks it). */
#define ICRC_PREFIX_CRC 0x11cef56eu

/* Length of the variable pseudo-header part hashed after the constant prefix: the IPv4 header
 * from total length on (18) + UDP header (8) + BTH (12). */
#define ICRC_VAR_LEN (WIRE_IPV4_LEN - 2 + WIRE_UDP_LEN + WIRE_BTH_LEN)

/* CRC of the constant prefix, the masked IPv4/UDP headers and the masked BTH of a UDP payload
 * of len bytes (len >= WIRE_BTH_LEN checked by the callers). */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* The 38 bytes are put together in registers, eight at a time in the order they are hashed
 * (a buffer written byte by byte and read back eight bytes at a time stalls the loads on the
 * stores), from big-endian words swapped into load order. */
static uint32_t icrc_head(const struct wire_ipinfo *ip, const uint8_t *p, size_t len)
{
	uint64_t w0, w1, w2, bth0;
	uint32_t bth8, reg = ~(uint32_t)ICRC_PREFIX_CRC;

	/* IPv4 from byte 2: total length, ID, flags (DF, no fragments: the only shape the decoder
	 * accepts), TTL masked, protocol, checksum masked, addresses; UDP with its checksum
	 * masked. */
	w0 = (uint64_t)(WIRE_IPV4_LEN + WIRE_UDP_LEN + len) << 48 | (uint64_t)ip->ip_id << 32 |
	     0x4000FF11u;
	w1 = 0xFFFFull << 48 | (uint64_t)ip->src_ip << 16 | ip->dst_ip >> 16;
	w2 = (uint64_t)(ip->dst_ip & 0xFFFF) << 48 | (uint64_t)ip->src_port << 32 |
	     (uint64_t)ip->dst_port << 16 | (uint16_t)(WIRE_UDP_LEN + len);
	reg = wire__crc32_raw_u64(reg, __builtin_bswap64(w0), 8);
	reg = wire__crc32_raw_u64(reg, __builtin_bswap64(w1), 8);
	reg = wire__crc32_raw_u64(reg, __builtin_bswap64(w2), 8);
	/* The UDP checksum's 0xFFFF, then the BTH with byte 4 (FECN, BECN, resv6) masked:
	 * switches may set FECN/BECN in flight. */
	memcpy(&bth0, p, 8);
	memcpy(&bth8, p + 8, 4);
	reg = wire__crc32_raw_u64(reg, 0xFFFFu | bth0 << 16 | 0xFFull << 48, 8);
	reg = wire__crc32_raw_u64(reg, bth0 >> 48 | (uint64_t)bth8 << 16, 6);
	return ~reg;
}
#else
static uint32_t icrc_head(const struct wire_ipinfo *ip, const uint8_t *p, size_t len)
{
	uint8_t h[ICRC_VAR_LEN];
	/* IPv4 from byte 2: total length, ID, flags (DF, no fragments: the only shape the decoder
	 * accepts), TTL masked, protocol, checksum masked, addresses. */
	wire__st16(h + 0, (uint16_t)(WIRE_IPV4_LEN + WIRE_UDP_LEN + len));
	wire__st16(h + 2, ip->ip_id);
	h[4] = 0x40;
	h[5] = 0x00;
	h[6] = 0xFF;
	h[7] = 17;
	h[8] = 0xFF;
	h[9] = 0xFF;
	wire__st32(h + 10, ip->src_ip);
	wire__st32(h + 14, ip->dst_ip);
	/* UDP with its checksum masked. */
	wire__st16(h + 18, ip->src_port);
	wire__st16(h + 20, ip->dst_port);
	wire__st16(h + 22, (uint16_t)(WIRE_UDP_LEN + len));
	h[24] = 0xFF;
	h[25] = 0xFF;
	/* BTH with byte 4 (FECN, BECN, resv6) masked: switches may set FECN/BECN in flight. */
	for (int i = 0; i < WIRE_BTH_LEN; i++)
		h[26 + i] = p[i];
	h[26 + 4] = 0xFF;
	return wire__crc32(ICRC_PREFIX_CRC, h, ICRC_VAR_LEN);
}
#endif

static int icrc_len_ok(const struct wire_ipinfo *ip, const uint8_t *p, size_t len)
{
	/* The IPv4 total length field must hold 28 + len. */
	return ip && p && len >= WIRE_BTH_LEN + WIRE_ICRC_LEN &&
	       len <= 0xFFFF - WIRE_IPV4_LEN - WIRE_UDP_LEN;
}

uint32_t wire_icrc(const struct wire_ipinfo *ip, const uint8_t *p, size_t len)
{
	if (!icrc_len_ok(ip, p, len))
		return 0;
	uint32_t crc = icrc_head(ip, p, len);
	crc = wire__crc32(crc, p + WIRE_BTH_LEN, len - WIRE_BTH_LEN - WIRE_ICRC_LEN);
	return (uint32_t)crc;
}

int wire_set_icrc(uint8_t *p, size_t len, const struct wire_ipinfo *ip)
{
	if (!icrc_len_ok(ip, p, len))
		return -EINVAL;
	uint32_t c = wire_icrc(ip, p, len);
	uint8_t *o = p + len - WIRE_ICRC_LEN;
	o[0] = (uint8_t)c;
	o[1] = (uint8_t)(c >> 8);
	o[2] = (uint8_t)(c >> 16);
	o[3] = (uint8_t)(c >> 24);
	return 0;
}

int wire_data_crc(struct wire_dcrc *out, const uint8_t *data, size_t len)
{
	if (!out || (!data && len) || len > 0xFFFF)
		return -EINVAL;
	out->crc = len ? wire__crc32(0, data, len) : 0;
	/* The operator costs up to 13 products (one per bit of len); a switch asks for the same
	 * few lengths over and over, so remember the last one per thread. */
	static _Thread_local uint32_t memo_len = UINT32_MAX, memo_op;
	if (memo_len != (uint32_t)len) {
		memo_op = wire__crc32_shift_op((uint32_t)len);
		memo_len = (uint32_t)len;
	}
	out->op = memo_op;
	out->len = (uint32_t)len;
	return 0;
}

uint32_t wire__icrc_dcrc(const struct wire_ipinfo *ip, const uint8_t *p, size_t len, size_t d_off,
			 const struct wire_dcrc *d)
{
	if (!icrc_len_ok(ip, p, len) || !d || d_off < WIRE_BTH_LEN ||
	    d_off + d->len > len - WIRE_ICRC_LEN)
		return 0;
	uint32_t crc = icrc_head(ip, p, len);
	crc = wire__crc32(crc, p + WIRE_BTH_LEN, d_off - WIRE_BTH_LEN);
	/* CRC-32 is linear: crc(A || D) follows from crc(A), crc(D) and |D| (one product mod P
	 * with the operator for |D| generated once in wire_data_crc). */
	if (d->len)
		crc = wire__crc32_combine_op(crc, d->crc, d->op);
	size_t tail = d_off + d->len;
	return wire__crc32(crc, p + tail, len - WIRE_ICRC_LEN - tail);
}

/* Offset of the IPv4 ID in the ICRC input after it: the rest of the rebuilt IPv4/UDP/BTH header
 * (ICRC_VAR_LEN - 4 bytes) and the payload after the BTH up to the ICRC. */
static size_t id_tail_bytes(size_t len)
{
	return ICRC_VAR_LEN - 4 + len - WIRE_BTH_LEN - WIRE_ICRC_LEN;
}

/* CRC-32 is linear: two inputs of equal length that differ only in the ID field have CRCs that
 * differ by D(id1 ^ id2), where D(x) is the register left by the two bytes of x followed by the
 * n bytes after the ID, all else zero. D is linear in x, so D of the low 7 bits is the XOR of
 * seven basis values D(1 << b), remembered per thread for the last length seen. */
#define ID_BITS 7 /* WIRE_GSO_ID_SPAN == 1 << ID_BITS */

static const uint32_t *id_basis(size_t len)
{
	static _Thread_local size_t memo_len = SIZE_MAX;
	static _Thread_local uint32_t memo[ID_BITS];

	if (memo_len != len) {
		uint32_t op = wire__crc32_shift_op((uint32_t)id_tail_bytes(len));
		/* Register after the ID bytes {0x00, 1 << b} from 0: the high byte leaves it 0. */
		for (unsigned b = 0; b < ID_BITS; b++)
			memo[b] = wire__crc32_mulmod(op, wire__crc32_byte_raw((uint8_t)(1u << b)));
		memo_len = len;
	}
	return memo;
}

bool wire__icrc_ok(const struct wire_ipinfo *ip, const uint8_t *p, size_t len, uint32_t icrc)
{
	_Static_assert(WIRE_GSO_ID_SPAN == 1 << ID_BITS, "ID basis covers the GSO ID span");
	uint32_t delta = wire_icrc(ip, p, len) ^ icrc;

	if (!delta)
		return icrc_len_ok(ip, p, len);
	if (!ip->id_unseen || !icrc_len_ok(ip, p, len) || ip->ip_id >= WIRE_GSO_ID_SPAN)
		return false;
	/* Walk every x in 1 .. SPAN-1 in Gray-code order (one XOR each): the ICRC holds for ID
	 * ip_id ^ x if D(x) == delta. */
	const uint32_t *basis = id_basis(len);
	uint32_t d = 0;
	for (unsigned i = 1; i < WIRE_GSO_ID_SPAN; i++) {
		d ^= basis[__builtin_ctz(i)];
		if (d == delta)
			return true;
	}
	return false;
}
