/* lib/wire CRC-32 (the IEEE/zlib polynomial, reflected), with a carry-less-multiply folding path
 * for x86-64 CPUs that have PCLMULQDQ and zlib's crc32 for everything else, and the
 * multiplication mod P behind CRC combining (zlib's crc32_combine_gen / _op), also with a
 * carry-less multiply where the CPU has one.
 * Same values as zlib for every input; crc32_test checks them against zlib. */
#include "wire/wire_internal.h"

#include <string.h>
#include <zlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define WIRE_HAVE_CLMUL 1
#endif

/* Byte-at-a-time table for the reflected polynomial 0xEDB88320 (entry n = CRC of byte n). */
static const uint32_t crc_table[256] = {
	0x00000000u, 0x77073096u, 0xee0e612cu, 0x990951bau, 0x076dc419u, 0x706af48fu,
	0xe963a535u, 0x9e6495a3u, 0x0edb8832u, 0x79dcb8a4u, 0xe0d5e91eu, 0x97d2d988u,
	0x09b64c2bu, 0x7eb17cbdu, 0xe7b82d07u, 0x90bf1d91u, 0x1db71064u, 0x6ab020f2u,
	0xf3b97148u, 0x84be41deu, 0x1adad47du, 0x6ddde4ebu, 0xf4d4b551u, 0x83d385c7u,
	0x136c9856u, 0x646ba8c0u, 0xfd62f97au, 0x8a65c9ecu, 0x14015c4fu, 0x63066cd9u,
	0xfa0f3d63u, 0x8d080df5u, 0x3b6e20c8u, 0x4c69105eu, 0xd56041e4u, 0xa2677172u,
	0x3c03e4d1u, 0x4b04d447u, 0xd20d85fdu, 0xa50ab56bu, 0x35b5a8fau, 0x42b2986cu,
	0xdbbbc9d6u, 0xacbcf940u, 0x32d86ce3u, 0x45df5c75u, 0xdcd60dcfu, 0xabd13d59u,
	0x26d930acu, 0x51de003au, 0xc8d75180u, 0xbfd06116u, 0x21b4f4b5u, 0x56b3c423u,
	0xcfba9599u, 0xb8bda50fu, 0x2802b89eu, 0x5f058808u, 0xc60cd9b2u, 0xb10be924u,
	0x2f6f7c87u, 0x58684c11u, 0xc1611dabu, 0xb6662d3du, 0x76dc4190u, 0x01db7106u,
	0x98d220bcu, 0xefd5102au, 0x71b18589u, 0x06b6b51fu, 0x9fbfe4a5u, 0xe8b8d433u,
	0x7807c9a2u, 0x0f00f934u, 0x9609a88eu, 0xe10e9818u, 0x7f6a0dbbu, 0x086d3d2du,
	0x91646c97u, 0xe6635c01u, 0x6b6b51f4u, 0x1c6c6162u, 0x856530d8u, 0xf262004eu,
	0x6c0695edu, 0x1b01a57bu, 0x8208f4c1u, 0xf50fc457u, 0x65b0d9c6u, 0x12b7e950u,
	0x8bbeb8eau, 0xfcb9887cu, 0x62dd1ddfu, 0x15da2d49u, 0x8cd37cf3u, 0xfbd44c65u,
	0x4db26158u, 0x3ab551ceu, 0xa3bc0074u, 0xd4bb30e2u, 0x4adfa541u, 0x3dd895d7u,
	0xa4d1c46du, 0xd3d6f4fbu, 0x4369e96au, 0x346ed9fcu, 0xad678846u, 0xda60b8d0u,
	0x44042d73u, 0x33031de5u, 0xaa0a4c5fu, 0xdd0d7cc9u, 0x5005713cu, 0x270241aau,
	0xbe0b1010u, 0xc90c2086u, 0x5768b525u, 0x206f85b3u, 0xb966d409u, 0xce61e49fu,
	0x5edef90eu, 0x29d9c998u, 0xb0d09822u, 0xc7d7a8b4u, 0x59b33d17u, 0x2eb40d81u,
	0xb7bd5c3bu, 0xc0ba6cadu, 0xedb88320u, 0x9abfb3b6u, 0x03b6e20cu, 0x74b1d29au,
	0xead54739u, 0x9dd277afu, 0x04db2615u, 0x73dc1683u, 0xe3630b12u, 0x94643b84u,
	0x0d6d6a3eu, 0x7a6a5aa8u, 0xe40ecf0bu, 0x9309ff9du, 0x0a00ae27u, 0x7d079eb1u,
	0xf00f9344u, 0x8708a3d2u, 0x1e01f268u, 0x6906c2feu, 0xf762575du, 0x806567cbu,
	0x196c3671u, 0x6e6b06e7u, 0xfed41b76u, 0x89d32be0u, 0x10da7a5au, 0x67dd4accu,
	0xf9b9df6fu, 0x8ebeeff9u, 0x17b7be43u, 0x60b08ed5u, 0xd6d6a3e8u, 0xa1d1937eu,
	0x38d8c2c4u, 0x4fdff252u, 0xd1bb67f1u, 0xa6bc5767u, 0x3fb506ddu, 0x48b2364bu,
	0xd80d2bdau, 0xaf0a1b4cu, 0x36034af6u, 0x41047a60u, 0xdf60efc3u, 0xa867df55u,
	0x316e8eefu, 0x4669be79u, 0xcb61b38cu, 0xbc66831au, 0x256fd2a0u, 0x5268e236u,
	0xcc0c7795u, 0xbb0b4703u, 0x220216b9u, 0x5505262fu, 0xc5ba3bbeu, 0xb2bd0b28u,
	0x2bb45a92u, 0x5cb36a04u, 0xc2d7ffa7u, 0xb5d0cf31u, 0x2cd99e8bu, 0x5bdeae1du,
	0x9b64c2b0u, 0xec63f226u, 0x756aa39cu, 0x026d930au, 0x9c0906a9u, 0xeb0e363fu,
	0x72076785u, 0x05005713u, 0x95bf4a82u, 0xe2b87a14u, 0x7bb12baeu, 0x0cb61b38u,
	0x92d28e9bu, 0xe5d5be0du, 0x7cdcefb7u, 0x0bdbdf21u, 0x86d3d2d4u, 0xf1d4e242u,
	0x68ddb3f8u, 0x1fda836eu, 0x81be16cdu, 0xf6b9265bu, 0x6fb077e1u, 0x18b74777u,
	0x88085ae6u, 0xff0f6a70u, 0x66063bcau, 0x11010b5cu, 0x8f659effu, 0xf862ae69u,
	0x616bffd3u, 0x166ccf45u, 0xa00ae278u, 0xd70dd2eeu, 0x4e048354u, 0x3903b3c2u,
	0xa7672661u, 0xd06016f7u, 0x4969474du, 0x3e6e77dbu, 0xaed16a4au, 0xd9d65adcu,
	0x40df0b66u, 0x37d83bf0u, 0xa9bcae53u, 0xdebb9ec5u, 0x47b2cf7fu, 0x30b5ffe9u,
	0xbdbdf21cu, 0xcabac28au, 0x53b39330u, 0x24b4a3a6u, 0xbad03605u, 0xcdd70693u,
	0x54de5729u, 0x23d967bfu, 0xb3667a2eu, 0xc4614ab8u, 0x5d681b02u, 0x2a6f2b94u,
	0xb40bbe37u, 0xc30c8ea1u, 0x5a05df1bu, 0x2d02ef8du,
};

uint32_t wire__crc32_byte_raw(uint8_t b)
{
	return crc_table[b];
}

/* Slicing-by-8 tables: wire__crc_slice[k][n] is the CRC register after byte n followed by k
 * zero bytes ([0] = crc_table). Filled once before main. */
uint32_t wire__crc_slice[8][256];

/* Polynomials mod P in the CRC register's (reflected) order: bit 31 is the coefficient of x^0,
 * bit 0 that of x^31; P without its x^32 term is 0xEDB88320. */
#define CRC_POLY 0xedb88320u
#define CRC_X0 0x80000000u /* the polynomial 1 */

/* x^(2^k) mod P for k = 0 .. 34; from k = 3 on, the operator for 2^(k-3) bytes
 * (wire__crc32_shift_op). */
#define X2K_N 35
static uint32_t x2k[X2K_N];

/* a(x) b(x) mod P one bit of a at a time: add b x^i for every term x^i of a, b x^i reduced as
 * i grows (multiplying by x is a right shift here, P folding back in the x^32 carry). */
uint32_t wire__crc32_mulmod_bits(uint32_t a, uint32_t b)
{
	uint32_t r = 0;

	for (uint32_t m = CRC_X0; a; m >>= 1) {
		if (a & m) {
			r ^= b;
			a ^= m;
		}
		b = (b >> 1) ^ (b & 1 ? CRC_POLY : 0);
	}
	return r;
}

__attribute__((constructor)) static void slice_init(void)
{
	for (unsigned n = 0; n < 256; n++)
		wire__crc_slice[0][n] = crc_table[n];
	for (unsigned k = 1; k < 8; k++)
		for (unsigned n = 0; n < 256; n++)
			wire__crc_slice[k][n] = (wire__crc_slice[k - 1][n] >> 8) ^
						crc_table[wire__crc_slice[k - 1][n] & 0xFF];
	x2k[0] = CRC_X0 >> 1; /* x */
	for (unsigned k = 1; k < X2K_N; k++)
		x2k[k] = wire__crc32_mulmod_bits(x2k[k - 1], x2k[k - 1]);
}

/* Short inputs (pseudo-headers, tails): eight bytes per step through the slicing tables (one
 * dependent load chain per 8 bytes instead of per byte), then a byte loop for the rest. */
static uint32_t crc_bytes(uint32_t crc, const uint8_t *p, size_t len)
{
	crc = ~crc;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		crc = wire__crc32_raw_u64(crc, v, 8);
		p += 8;
		len -= 8;
	}
#endif
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
	return ~crc;
}

#ifdef WIRE_HAVE_CLMUL
/* Folding constants for the reflected polynomial 0x104C11DB7, from Intel's white paper "Fast CRC
 * Computation for Generic Polynomials Using PCLMULQDQ" (x^n mod P for the fold distances, the
 * Barrett constant mu and P itself, all bit-reflected). They are properties of the polynomial. */
#define K1 0x154442bd4ull /* fold by 512 bits */
#define K2 0x1c6e41596ull
#define K3 0x1751997d0ull /* fold by 128 bits */
#define K4 0x0ccaa009eull
#define K5 0x163cd6124ull /* 64 -> 32 */
#define KP 0x1db710641ull /* P' */
#define KMU 0x1f7011641ull /* mu */

static inline __attribute__((target("pclmul,sse4.1"))) __m128i fold(__m128i x, __m128i k,
								     __m128i next)
{
	__m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
	__m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
	return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

/* From one 128-bit remainder x0 with p[0..len) still to come (len a multiple of 16): fold the
 * rest in 16 bytes at a time, then reduce to the 32-bit raw CRC register. */
static inline __attribute__((target("pclmul,sse4.1"))) uint32_t crc_finish(__m128i x0,
									    const uint8_t *p,
									    size_t len)
{
	const __m128i k34 = _mm_set_epi64x((long long)K4, (long long)K3);
	while (len >= 16) {
		x0 = fold(x0, k34, _mm_loadu_si128((const __m128i *)(const void *)p));
		p += 16;
		len -= 16;
	}

	/* 128 -> 64 bits: multiply the low half by K4 and add the high half. */
	__m128i t = _mm_clmulepi64_si128(k34, x0, 0x01);
	x0 = _mm_xor_si128(_mm_srli_si128(x0, 8), t);

	/* 64 -> 32 bits. */
	const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
	const __m128i k5 = _mm_set_epi64x(0, (long long)K5);
	t = _mm_srli_si128(x0, 4);
	x0 = _mm_clmulepi64_si128(_mm_and_si128(x0, mask32), k5, 0x00);
	x0 = _mm_xor_si128(x0, t);

	/* Barrett reduction 64 -> 32 (bit-reflected). */
	const __m128i kpu = _mm_set_epi64x((long long)KMU, (long long)KP);
	t = x0;
	x0 = _mm_clmulepi64_si128(_mm_and_si128(x0, mask32), kpu, 0x10);
	x0 = _mm_clmulepi64_si128(_mm_and_si128(x0, mask32), kpu, 0x00);
	x0 = _mm_xor_si128(x0, t);
	return (uint32_t)_mm_extract_epi32(x0, 1);
}

/* Raw (not pre/post-inverted) CRC register over len bytes, len >= 64 and a multiple of 16. */
static __attribute__((target("pclmul,sse4.1"))) uint32_t crc_clmul(uint32_t c, const uint8_t *p,
								   size_t len)
{
	__m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)p);
	__m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
	__m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
	__m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
	x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)c));
	p += 64;
	len -= 64;

	const __m128i k12 = _mm_set_epi64x((long long)K2, (long long)K1);
	while (len >= 64) {
		x0 = fold(x0, k12, _mm_loadu_si128((const __m128i *)(const void *)p));
		x1 = fold(x1, k12, _mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
		x2 = fold(x2, k12, _mm_loadu_si128((const __m128i *)(const void *)(p + 32)));
		x3 = fold(x3, k12, _mm_loadu_si128((const __m128i *)(const void *)(p + 48)));
		p += 64;
		len -= 64;
	}

	const __m128i k34 = _mm_set_epi64x((long long)K4, (long long)K3);
	x0 = fold(x0, k34, x1);
	x0 = fold(x0, k34, x2);
	x0 = fold(x0, k34, x3);
	return crc_finish(x0, p, len);
}

/* The same for 16 .. 63 bytes (a multiple of 16): one lane folded 16 bytes at a time. */
static __attribute__((target("pclmul,sse4.1"))) uint32_t crc_clmul_short(uint32_t c,
									  const uint8_t *p,
									  size_t len)
{
	__m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)p);
	x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)c));
	return crc_finish(x0, p + 16, len - 16);
}

/* The same with 512-bit carry-less multiplies (VPCLMULQDQ): four registers of four 128-bit
 * lanes fold 256 bytes per step, four times the work per instruction of crc_clmul.
 * len >= 256 and a multiple of 16. */
#define K2048_LO 0x11542778aull /* fold by 2048 bits: x^(2048+32), x^(2048-32) */
#define K2048_HI 0x1322d1430ull

#define VCLMUL_TARGET "avx512f,avx512vl,vpclmulqdq,pclmul,sse4.1"

static inline __attribute__((target(VCLMUL_TARGET))) __m512i fold512(__m512i x, __m512i k,
								      __m512i next)
{
	__m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);
	__m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);
	return _mm512_ternarylogic_epi64(lo, hi, next, 0x96); /* lo ^ hi ^ next */
}

static __attribute__((target(VCLMUL_TARGET))) uint32_t crc_vclmul(uint32_t c, const uint8_t *p,
								  size_t len)
{
	__m512i z0 = _mm512_loadu_si512((const void *)p);
	__m512i z1 = _mm512_loadu_si512((const void *)(p + 64));
	__m512i z2 = _mm512_loadu_si512((const void *)(p + 128));
	__m512i z3 = _mm512_loadu_si512((const void *)(p + 192));
	z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)c)));
	p += 256;
	len -= 256;

	const __m512i k2048 = _mm512_broadcast_i32x4(
		_mm_set_epi64x((long long)K2048_HI, (long long)K2048_LO));
	while (len >= 256) {
		z0 = fold512(z0, k2048, _mm512_loadu_si512((const void *)p));
		z1 = fold512(z1, k2048, _mm512_loadu_si512((const void *)(p + 64)));
		z2 = fold512(z2, k2048, _mm512_loadu_si512((const void *)(p + 128)));
		z3 = fold512(z3, k2048, _mm512_loadu_si512((const void *)(p + 192)));
		p += 256;
		len -= 256;
	}

	/* Four registers into one (fold by 512 bits), then whole 64-byte blocks. */
	const __m512i k512 = _mm512_broadcast_i32x4(_mm_set_epi64x((long long)K2, (long long)K1));
	z0 = fold512(z0, k512, z1);
	z0 = fold512(z0, k512, z2);
	z0 = fold512(z0, k512, z3);
	while (len >= 64) {
		z0 = fold512(z0, k512, _mm512_loadu_si512((const void *)p));
		p += 64;
		len -= 64;
	}

	/* Four lanes into one (fold by 128 bits each), then the 16-byte tail. */
	const __m128i k34 = _mm_set_epi64x((long long)K4, (long long)K3);
	__m128i x0 = _mm512_extracti32x4_epi32(z0, 0);
	x0 = fold(x0, k34, _mm512_extracti32x4_epi32(z0, 1));
	x0 = fold(x0, k34, _mm512_extracti32x4_epi32(z0, 2));
	x0 = fold(x0, k34, _mm512_extracti32x4_epi32(z0, 3));
	return crc_finish(x0, p, len);
}

bool wire__cpu_vclmul(void)
{
	static int cached; /* 0 unknown, 1 yes, -1 no (a benign race, as in have_clmul) */
	if (!cached) {
		__builtin_cpu_init();
		cached = (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
			  __builtin_cpu_supports("avx512bw") &&
			  __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul"))
				 ? 1
				 : -1;
	}
	return cached > 0;
}

static int have_clmul(void)
{
	/* 0 unknown, 1 yes, -1 no. A benign race: every thread computes the same answer. */
	static int cached;
	if (!cached) {
		__builtin_cpu_init();
		cached = (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1")) ? 1 : -1;
	}
	return cached > 0;
}
#endif

#ifdef WIRE_HAVE_CLMUL
/* The same product with one carry-less multiply and a Barrett reduction. Reflected operands
 * multiply into bits 0..62 with x^62 at bit 0; one left shift puts x^63 at bit 0, x^0 at bit
 * 63, the layout crc_finish's Barrett step reduces (low half: the terms x^32 .. x^63; result
 * in bits 32..63). */
static __attribute__((target("pclmul,sse4.1"))) uint32_t mulmod_clmul(uint32_t a, uint32_t b)
{
	__m128i x = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a), _mm_cvtsi32_si128((int)b),
					 0x00);
	x = _mm_slli_epi64(x, 1);
	const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
	const __m128i kpu = _mm_set_epi64x((long long)KMU, (long long)KP);
	__m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), kpu, 0x10);
	t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), kpu, 0x00);
	return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x, t), 1);
}
#endif

uint32_t wire__crc32_mulmod(uint32_t a, uint32_t b)
{
#ifdef WIRE_HAVE_CLMUL
	if (have_clmul())
		return mulmod_clmul(a, b);
#endif
	return wire__crc32_mulmod_bits(a, b);
}

uint32_t wire__crc32_shift_op(uint32_t len)
{
	uint32_t op = CRC_X0;

	/* x^(8 len) = the product of x^(2^(k+3)) over the bits k of len. */
	for (unsigned k = 3; len; k++, len >>= 1)
		if (len & 1)
			op = wire__crc32_mulmod(op, x2k[k]);
	return op;
}

uint32_t wire__crc32(uint32_t crc, const uint8_t *p, size_t len)
{
#ifdef WIRE_HAVE_CLMUL
	/* From 16 bytes on the fold beats the tables (a 48-byte header: ~4 ns against ~15); the
	 * last len % 16 bytes go through the tables. */
	if (len >= 16 && have_clmul()) {
		size_t body = len & ~(size_t)15;
		crc = ~(body >= 256 && wire__cpu_vclmul() ? crc_vclmul(~crc, p, body)
			: body >= 64			  ? crc_clmul(~crc, p, body)
							  : crc_clmul_short(~crc, p, body));
		p += body;
		len -= body;
	}
#endif
	if (len < 256)
		return crc_bytes(crc, p, len);
	return (uint32_t)crc32(crc, p, (uInt)len);
}
