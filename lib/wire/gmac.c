/* AES-256-GMAC (GCM with additional data only, NIST SP 800-38D) on x86-64 CPUs with AES-NI and
 * PCLMULQDQ, 512-bit lanes where VPCLMULQDQ exists. Same tag as OpenSSL's AES-256-GCM over the
 * same key, nonce and AAD (auth_test compares them on random inputs); auth.c falls back to
 * OpenSSL EVP where wire__gmac_init says no. Why not EVP everywhere: OpenSSL 3's per-call
 * dispatch (IV reset, tag read through OSSL_PARAM lookups) costs about 160 ns per packet, as much
 * as hashing 4 KiB. */
#include "wire/wire_internal.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define GMAC_TARGET "aes,pclmul,sse4.1,ssse3"
#define GMAC_VTARGET "aes,pclmul,sse4.1,ssse3,avx512f,avx512bw,avx512vl,vpclmulqdq"
/* How far ahead of the block being hashed the 512-bit loop prefetches: one 4 KiB packet. A
 * client signs its contributions straight from the caller's buffer, whose lines are mostly
 * not in its cache yet; the loads waited on them (about half of the hash's time in a 4 MiB
 * AllReduce on loopback). A prefetch never faults, so running past the data is harmless. */
#define GMAC_PREFETCH 4096

/* GHASH works on blocks byte-reversed into 128-bit integers (bit 127 = x^0 of GCM's
 * reflected convention): a carry-less product of two such values is the bit-reflected
 * product shifted right by one, fixed with a one-bit left shift before the reduction
 * modulo x^128 + x^7 + x^2 + x + 1 (Gueron and Kounavis, "Intel Carry-Less Multiplication
 * Instruction and its Usage for Computing the GCM Mode", 2014, algorithms 2 and 4). */
static inline __attribute__((target(GMAC_TARGET))) __m128i bswap128(__m128i x)
{
	const __m128i m = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	return _mm_shuffle_epi8(x, m);
}

/* [hi:lo] (an unreduced 256-bit carry-less product) shifted left one bit, reduced. */
static inline __attribute__((target(GMAC_TARGET))) __m128i gf_reduce(__m128i lo, __m128i hi)
{
	__m128i c_lo = _mm_srli_epi32(lo, 31), c_hi = _mm_srli_epi32(hi, 31);
	lo = _mm_slli_epi32(lo, 1);
	hi = _mm_slli_epi32(hi, 1);
	__m128i carry = _mm_srli_si128(c_lo, 12);
	c_hi = _mm_slli_si128(c_hi, 4);
	c_lo = _mm_slli_si128(c_lo, 4);
	lo = _mm_or_si128(lo, c_lo);
	hi = _mm_or_si128(_mm_or_si128(hi, c_hi), carry);

	__m128i a = _mm_xor_si128(_mm_xor_si128(_mm_slli_epi32(lo, 31), _mm_slli_epi32(lo, 30)),
				  _mm_slli_epi32(lo, 25));
	__m128i b = _mm_srli_si128(a, 4);
	lo = _mm_xor_si128(lo, _mm_slli_si128(a, 12));
	__m128i d = _mm_xor_si128(_mm_xor_si128(_mm_srli_epi32(lo, 1), _mm_srli_epi32(lo, 2)),
				  _mm_srli_epi32(lo, 7));
	d = _mm_xor_si128(d, b);
	lo = _mm_xor_si128(lo, d);
	return _mm_xor_si128(hi, lo);
}

/* Unreduced product of a and b added into lo/mid/hi (mid: the two cross terms). */
static inline __attribute__((target(GMAC_TARGET))) void clmul_acc(__m128i a, __m128i b, __m128i *lo,
								   __m128i *mid, __m128i *hi)
{
	*lo = _mm_xor_si128(*lo, _mm_clmulepi64_si128(a, b, 0x00));
	*hi = _mm_xor_si128(*hi, _mm_clmulepi64_si128(a, b, 0x11));
	*mid = _mm_xor_si128(*mid, _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01),
						 _mm_clmulepi64_si128(a, b, 0x10)));
}

static inline __attribute__((target(GMAC_TARGET))) __m128i fold_mid(__m128i lo, __m128i mid,
								     __m128i hi)
{
	lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
	hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
	return gf_reduce(lo, hi);
}

static __attribute__((target(GMAC_TARGET))) __m128i gf_mul(__m128i a, __m128i b)
{
	__m128i lo = _mm_setzero_si128(), mid = lo, hi = lo;
	clmul_acc(a, b, &lo, &mid, &hi);
	return fold_mid(lo, mid, hi);
}

/* Unreduced sum of products X·H^k: the low, middle (both cross terms) and high 128 bits. */
struct gh_acc {
	__m128i lo, mid, hi;
};

/* m blocks at p into a, block i times pw[i]. */
static inline __attribute__((target(GMAC_TARGET))) void acc_narrow(struct gh_acc *a,
								    const uint8_t *p, size_t m,
								    const __m128i *pw)
{
	for (size_t i = 0; i < m; i++)
		clmul_acc(bswap128(_mm_loadu_si128((const __m128i *)(p + 16 * i))),
			  _mm_load_si128(pw + i), &a->lo, &a->mid, &a->hi);
}

/* The same with four blocks per 512-bit vector and three products per block instead of four
 * (Karatsuba): both cross terms together are (x_lo ^ x_hi)·(h_lo ^ h_hi) ^ lo ^ hi. */
static __attribute__((target(GMAC_VTARGET))) void acc_wide(struct gh_acc *a, const uint8_t *p,
							    size_t m, const __m128i *pw)
{
	const __m512i sw = _mm512_broadcast_i32x4(
		_mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
	__m512i lo = _mm512_setzero_si512(), mid = lo, hi = lo;
	size_t i = 0;

	for (; i + 4 <= m; i += 4) {
		_mm_prefetch((const char *)p + 16 * i + GMAC_PREFETCH, _MM_HINT_T0);
		__m512i x = _mm512_shuffle_epi8(_mm512_loadu_si512(p + 16 * i), sw);
		__m512i h = _mm512_loadu_si512(pw + i);
		__m512i xk = _mm512_xor_si512(x, _mm512_shuffle_epi32(x, _MM_PERM_BADC));
		__m512i hk = _mm512_xor_si512(h, _mm512_shuffle_epi32(h, _MM_PERM_BADC));
		lo = _mm512_xor_si512(lo, _mm512_clmulepi64_epi128(x, h, 0x00));
		hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128(x, h, 0x11));
		mid = _mm512_xor_si512(mid, _mm512_clmulepi64_epi128(xk, hk, 0x00));
	}
	mid = _mm512_ternarylogic_epi64(mid, lo, hi, 0x96);
	/* fold the four lanes */
	__m256i lo2 = _mm256_xor_si256(_mm512_castsi512_si256(lo), _mm512_extracti64x4_epi64(lo, 1));
	__m256i mid2 = _mm256_xor_si256(_mm512_castsi512_si256(mid), _mm512_extracti64x4_epi64(mid, 1));
	__m256i hi2 = _mm256_xor_si256(_mm512_castsi512_si256(hi), _mm512_extracti64x4_epi64(hi, 1));
	a->lo = _mm_xor_si128(a->lo, _mm_xor_si128(_mm256_castsi256_si128(lo2),
						   _mm256_extracti128_si256(lo2, 1)));
	a->mid = _mm_xor_si128(a->mid, _mm_xor_si128(_mm256_castsi256_si128(mid2),
						     _mm256_extracti128_si256(mid2, 1)));
	a->hi = _mm_xor_si128(a->hi, _mm_xor_si128(_mm256_castsi256_si128(hi2),
						   _mm256_extracti128_si256(hi2, 1)));
	acc_narrow(a, p + 16 * i, m - i, pw + i);
}

static int have_aes_clmul(void)
{
	static int cached;
	if (!cached) {
		__builtin_cpu_init();
		cached = (__builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul") &&
			  __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3"))
				 ? 1
				 : -1;
	}
	return cached > 0;
}

/* The AES-256 key schedule with AESKEYGENASSIST (FIPS 197 §5.2): even round keys take
 * RotWord+SubWord+Rcon of the previous odd key's last word, odd ones SubWord only. */
static inline __attribute__((target(GMAC_TARGET))) __m128i ks_mix(__m128i k, __m128i t)
{
	k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
	k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
	k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
	return _mm_xor_si128(k, t);
}

#define KS_EVEN(i, rcon)                                                                       \
	rk[i] = ks_mix(rk[(i) - 2], _mm_shuffle_epi32(_mm_aeskeygenassist_si128(rk[(i) - 1], rcon), \
						      0xff))
#define KS_ODD(i)                                                                              \
	rk[i] = ks_mix(rk[(i) - 2], _mm_shuffle_epi32(_mm_aeskeygenassist_si128(rk[(i) - 1], 0), \
						      0xaa))

static __attribute__((target(GMAC_TARGET))) void aes256_schedule(__m128i rk[15], const uint8_t key[32])
{
	rk[0] = _mm_loadu_si128((const __m128i *)key);
	rk[1] = _mm_loadu_si128((const __m128i *)(key + 16));
	KS_EVEN(2, 0x01); KS_ODD(3);
	KS_EVEN(4, 0x02); KS_ODD(5);
	KS_EVEN(6, 0x04); KS_ODD(7);
	KS_EVEN(8, 0x08); KS_ODD(9);
	KS_EVEN(10, 0x10); KS_ODD(11);
	KS_EVEN(12, 0x20); KS_ODD(13);
	KS_EVEN(14, 0x40);
}

static inline __attribute__((target(GMAC_TARGET))) __m128i aes256_block(const __m128i *rk, __m128i x)
{
	x = _mm_xor_si128(x, _mm_load_si128(rk));
	for (int r = 1; r < 14; r++)
		x = _mm_aesenc_si128(x, _mm_load_si128(rk + r));
	return _mm_aesenclast_si128(x, _mm_load_si128(rk + 14));
}

static __attribute__((target(GMAC_TARGET))) void init_keyed(struct wire__gmac *g, const uint8_t key[32])
{
	__m128i rk[15];

	aes256_schedule(rk, key);
	memcpy(g->rk, rk, sizeof rk);
	__m128i h = bswap128(aes256_block((const __m128i *)g->rk, _mm_setzero_si128()));
	__m128i p = h;
	__m128i *pw = (__m128i *)g->pow;
	for (int k = 1; k <= WIRE_GMAC_POWERS; k++) {
		_mm_store_si128(pw + (WIRE_GMAC_POWERS - k), p);
		p = gf_mul(p, h);
	}
	memset(rk, 0, sizeof rk);
}

bool wire__gmac_init(struct wire__gmac *g, const uint8_t key[32])
{
	memset(g, 0, sizeof *g);
	if (!have_aes_clmul())
		return false;
	g->wide = wire__cpu_vclmul();
	init_keyed(g, key);
	return true;
}

/* The bytes of a then b as one stream of 16-byte blocks X_1 .. X_n (the last one zero-padded),
 * then the length block L. With n + 1 <= WIRE_GMAC_POWERS (the MAC input of any packet)
 * GHASH is one sum, X_1·H^(n+1) ^ ... ^ X_n·H^2 ^ L·H, and one reduction: no product waits
 * for another. Longer inputs take windows of WIRE_GMAC_POWERS blocks, each window's sum
 * also holding the previous window's reduced hash times H^(its length). */
struct gh_seg {
	const uint8_t *p;
	size_t n; /* blocks */
};

static inline __attribute__((target(GMAC_TARGET))) void tag_impl(const struct wire__gmac *g,
								  __m128i j0, const uint8_t *a,
								  size_t alen, const uint8_t *b,
								  size_t blen, uint8_t tag[16])
{
	const uint64_t aad_bits = (uint64_t)(alen + blen) * 8u;
	const __m128i *pow = (const __m128i *)g->pow;
	_Alignas(16) uint8_t ab[16] = { 0 }, bt[16] = { 0 }, lb[16] = { 0 };
	struct gh_seg seg[5];
	int nseg = 0;
	size_t an = alen / 16, ar = alen % 16, total = 0;

	/* E(K, J0) first: its 14 dependent rounds overlap the hash instead of following it. */
	const __m128i ek = aes256_block((const __m128i *)g->rk, j0);

	if (an)
		seg[nseg++] = (struct gh_seg){ a, an };
	if (ar) {
		size_t take = 16 - ar < blen ? 16 - ar : blen;
		memcpy(ab, a + 16 * an, ar);
		if (take) { /* b may be NULL when blen is 0: no pointer arithmetic on it then */
			memcpy(ab + ar, b, take);
			b += take;
			blen -= take;
		}
		seg[nseg++] = (struct gh_seg){ ab, 1 };
	}
	size_t bn = blen / 16, br = blen % 16;
	if (bn)
		seg[nseg++] = (struct gh_seg){ b, bn };
	if (br) {
		memcpy(bt, b + 16 * bn, br);
		seg[nseg++] = (struct gh_seg){ bt, 1 };
	}
	/* AAD bits then 0 ciphertext bits, big endian */
	for (int i = 0; i < 8; i++)
		lb[i] = (uint8_t)(aad_bits >> (56 - 8 * i));
	seg[nseg++] = (struct gh_seg){ lb, 1 };
	for (int i = 0; i < nseg; i++)
		total += seg[i].n;

	__m128i y = _mm_setzero_si128();
	for (size_t done = 0; done < total;) {
		size_t m = total - done < WIRE_GMAC_POWERS ? total - done : WIRE_GMAC_POWERS;
		struct gh_acc acc = { _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128() };
		size_t s0 = 0; /* stream index of seg[i]'s first block */

		if (done)
			clmul_acc(y, _mm_load_si128(pow + (WIRE_GMAC_POWERS - m)), &acc.lo, &acc.mid,
				  &acc.hi);
		/* block j of [done, done + m) times H^(done + m - j) */
		for (int i = 0; i < nseg; s0 += seg[i].n, i++) {
			size_t lo = s0 > done ? s0 : done;
			size_t hi = s0 + seg[i].n < done + m ? s0 + seg[i].n : done + m;
			if (lo >= hi)
				continue;
			const uint8_t *p = seg[i].p + 16 * (lo - s0);
			const __m128i *pw = pow + (WIRE_GMAC_POWERS - (done + m - lo));
			if (g->wide && hi - lo >= 4)
				acc_wide(&acc, p, hi - lo, pw);
			else
				acc_narrow(&acc, p, hi - lo, pw);
		}
		y = fold_mid(acc.lo, acc.mid, acc.hi);
		done += m;
	}
	_mm_storeu_si128((__m128i *)tag, _mm_xor_si128(bswap128(y), ek));
}

/* J0 = nonce || 0x00000001 in a register: from the nonce's bytes, or from INCA's context and
 * counter without a trip through memory (twelve bytes stored one by one and read back as one
 * load waited on store forwarding). Callers reach these only after a true wire__gmac_init. */
__attribute__((target(GMAC_TARGET))) void wire__gmac_tag(const struct wire__gmac *g,
							  const uint8_t iv[12], const uint8_t *a,
							  size_t alen, const uint8_t *b, size_t blen,
							  uint8_t tag[16])
{
	uint32_t w2;
	memcpy(&w2, iv + 8, 4);
	__m128i j0 = _mm_insert_epi32(_mm_loadl_epi64((const __m128i *)iv), (int)w2, 2);
	tag_impl(g, _mm_insert_epi32(j0, 0x01000000, 3), a, alen, b, blen, tag);
}

__attribute__((target(GMAC_TARGET))) void wire__gmac_tag_nonce(const struct wire__gmac *g,
								uint32_t ctx, uint64_t ctr,
								const uint8_t *a, size_t alen,
								const uint8_t *b, size_t blen,
								uint8_t tag[16])
{
	__m128i j0 = _mm_set_epi32(0x01000000, (int)__builtin_bswap32((uint32_t)ctr),
				   (int)__builtin_bswap32((uint32_t)(ctr >> 32)),
				   (int)__builtin_bswap32(ctx));
	tag_impl(g, j0, a, alen, b, blen, tag);
}

#else /* not x86-64 with GCC/Clang: OpenSSL does it all */

bool wire__gmac_init(struct wire__gmac *g, const uint8_t key[32])
{
	(void)key;
	memset(g, 0, sizeof *g);
	return false;
}

void wire__gmac_tag(const struct wire__gmac *g, const uint8_t iv[12], const uint8_t *a,
		    size_t alen, const uint8_t *b, size_t blen, uint8_t tag[16])
{
	(void)g, (void)iv, (void)a, (void)alen, (void)b, (void)blen;
	memset(tag, 0, 16);
}

void wire__gmac_tag_nonce(const struct wire__gmac *g, uint32_t ctx, uint64_t ctr,
			  const uint8_t *a, size_t alen, const uint8_t *b, size_t blen,
			  uint8_t tag[16])
{
	(void)g, (void)ctx, (void)ctr, (void)a, (void)alen, (void)b, (void)blen;
	memset(tag, 0, 16);
}

#endif
