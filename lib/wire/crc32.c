/* lib/wire CRC-32 (the IEEE/zlib polynomial, reflected), with a carry-less-multiply folding path
 * for x86-64 CPUs that have PCLMULQDQ and zlib's crc32 for everything else.
 * Same value as zlib's crc32(crc, p, len) for every input; crc32_test checks it against zlib. */
#include "wire/wire_internal.h"

#include <zlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define WIRE_HAVE_CLMUL 1
#endif

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

uint32_t wire__crc32(uint32_t crc, const uint8_t *p, size_t len)
{
#ifdef WIRE_HAVE_CLMUL
	/* Below 64 bytes the fold has nothing to chew on; zlib's tables are as quick. */
	if (len >= 64 && have_clmul()) {
		size_t body = len & ~(size_t)15;
		crc = ~crc_clmul(~crc, p, body);
		p += body;
		len -= body;
	}
#endif
	return len ? (uint32_t)crc32(crc, p, (uInt)len) : crc;
}
