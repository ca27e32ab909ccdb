/* lib/wire private helpers shared by wire.c, icrc.c and bier.c: big-endian loads/stores, CRC
 * and ICRC internals. Not installed, not used outside lib/wire. */
#ifndef INCA_WIRE_INTERNAL_H
#define INCA_WIRE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "wire/wire.h"

static inline uint16_t wire__ld16(const uint8_t *p)
{
	return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static inline uint32_t wire__ld24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline uint32_t wire__ld32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t wire__ld64(const uint8_t *p)
{
	return (uint64_t)wire__ld32(p) << 32 | wire__ld32(p + 4);
}

static inline void wire__st16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void wire__st24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static inline void wire__st32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void wire__st64(uint8_t *p, uint64_t v)
{
	wire__st32(p, (uint32_t)(v >> 32));
	wire__st32(p + 4, (uint32_t)v);
}

/* ICRC of the UDP payload p[0..len) whose data (d->len bytes at offset d_off, after the INCA
 * header) has the precomputed CRC d: the header part is hashed, the data part combined in. */
uint32_t wire__icrc_dcrc(const struct wire_ipinfo *ip, const uint8_t *p, size_t len, size_t d_off,
			 const struct wire_dcrc *d);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* This CPU has 512-bit carry-less multiplies (AVX-512 F/VL/BW and VPCLMULQDQ): the wide CRC
 * fold (crc32.c) and GHASH lanes (gmac.c). Cached after the first call. */
bool wire__cpu_vclmul(void);
#endif

/* zlib-compatible CRC-32 (crc32(crc, p, len)), PCLMULQDQ-accelerated where available. */
uint32_t wire__crc32(uint32_t crc, const uint8_t *p, size_t len);
/* The CRC register, started at 0 and not inverted, after the one byte b. */
uint32_t wire__crc32_byte_raw(uint8_t b);
/* Slicing tables of crc32.c: [k][n] is the CRC register after byte n and k zero bytes. */
extern uint32_t wire__crc_slice[8][256];
/* The CRC register reg (not inverted) after the n (1 .. 8) bytes of v, least significant byte
 * first: the bytes of a message held in a register (little-endian load order), hashed without
 * a round trip through memory. */
static inline uint32_t wire__crc32_raw_u64(uint32_t reg, uint64_t v, unsigned n)
{
	uint32_t r = n < 4 ? reg >> (8 * n) : 0;

	/* Byte i meets table n - 1 - i: the lookups are independent (and unrolled where n is a
	 * constant). */
	v ^= reg;
#pragma GCC unroll 8
	for (unsigned i = 0; i < n; i++)
		r ^= wire__crc_slice[n - 1 - i][(v >> (8 * i)) & 0xFF];
	return r;
}
/* a(x) b(x) mod P, polynomials over GF(2) in the CRC register's bit order (reflected: bit 31 is
 * x^0), P the CRC-32 polynomial: zlib's multmodp, with a carry-less multiply where the CPU
 * has PCLMULQDQ. */
uint32_t wire__crc32_mulmod(uint32_t a, uint32_t b);
/* The same one bit at a time: what wire__crc32_mulmod runs without PCLMULQDQ (tests). */
uint32_t wire__crc32_mulmod_bits(uint32_t a, uint32_t b);
/* x^(8 len) mod P, the operator that moves a CRC register over len bytes: the value of zlib's
 * crc32_combine_gen(len). */
uint32_t wire__crc32_shift_op(uint32_t len);
/* zlib's crc32_combine_op: the CRC of A || B from crc1 = CRC(A), crc2 = CRC(B) and the operator
 * for |B| (wire__crc32_shift_op). CRC-32 is linear: CRC(A || B) is CRC(A) moved over |B| bytes
 * (times x^(8 |B|)) plus CRC(B); the initial and final inversions cancel out. */
static inline uint32_t wire__crc32_combine_op(uint32_t crc1, uint32_t crc2, uint32_t op)
{
	return wire__crc32_mulmod(op, crc1) ^ crc2;
}

/* True if icrc is the ICRC of the UDP payload p[0..len) for ip, or, with ip->id_unseen, for
 * ip with any IPv4 ID below WIRE_GSO_ID_SPAN. */
bool wire__icrc_ok(const struct wire_ipinfo *ip, const uint8_t *p, size_t len, uint32_t icrc);

/* AES-256-GMAC with AES-NI and carry-less multiplies (gmac.c): the round keys and the powers
 * H^WIRE_GMAC_POWERS .. H^1 of the hash key (H^k at pow[WIRE_GMAC_POWERS - k]), in GHASH's
 * byte-reversed order. That many blocks cost one reduction: enough for the MAC input of any
 * packet (part of its IB payload, at most WIRE_MTU_MAX bytes) and the length block. */
#define WIRE_GMAC_POWERS (WIRE_MTU_MAX / 16 + 1)
struct wire__gmac {
	_Alignas(64) uint8_t pow[WIRE_GMAC_POWERS][16];
	_Alignas(16) uint8_t rk[15][16];
	bool wide; /* 512-bit VPCLMULQDQ lanes */
};
/* Set up g for key (32 bytes). False: this CPU (or compiler) lacks AES-NI/PCLMULQDQ; use
 * OpenSSL. */
bool wire__gmac_init(struct wire__gmac *g, const uint8_t key[32]);
/* The AES-256-GMAC tag of the AAD a[0..alen) followed by b[0..blen) under the 96-bit nonce
 * iv: the tag AES-256-GCM gives with that AAD and no plaintext. g from a true init. */
void wire__gmac_tag(const struct wire__gmac *g, const uint8_t iv[12], const uint8_t *a,
		    size_t alen, const uint8_t *b, size_t blen, uint8_t tag[16]);
/* The same with the nonce given as INCA's (ctx, ctr): ctx big-endian, then ctr big-endian. */
void wire__gmac_tag_nonce(const struct wire__gmac *g, uint32_t ctx, uint64_t ctr,
			  const uint8_t *a, size_t alen, const uint8_t *b, size_t blen,
			  uint8_t tag[16]);
/* INCA_MAC_IMPL=openssl in the environment: struct wire_mac uses OpenSSL EVP even where gmac.c
 * could run (comparisons, benchmarks). */
bool wire__mac_evp_forced(void);

#endif
