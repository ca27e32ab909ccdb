/* lib/agg/reduce.c: the reduce kernels behind agg_reduce (dst[i] = dst[i] OP src[i]) for every
 * valid dtype/op pair, and the exact fp16/bf16 <-> fp32 conversions.
 * Kernels are written once with GCC vector extensions and compiled three times (baseline
 * x86-64, AVX2+F16C, AVX-512); the set is chosen by CPUID on first use. No allocation. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "agg/agg.h"
#include "agg/reduce_int.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define AGG_X86 1
#else
#define AGG_X86 0
#endif

/* ------------------------------------------------------------------ scalar conversions */
/* Integer-only, so they are exact whatever the caller's MXCSR (FTZ/DAZ) says. NaNs keep their
 * sign and payload; fp16 NaNs are quieted in both directions, as F16C hardware does, so the
 * baseline and the F16C kernels agree bit for bit. bf16 -> fp32 is a plain widening (an
 * sNaN stays signalling); fp32 -> bf16 quiets, because truncating the payload of
 * 0x7f800001 would otherwise turn a NaN into infinity. */

static inline uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static inline float f32_from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static inline uint32_t fp16_to_fp32_bits(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t mant = h & 0x3ffu;

	if (exp == 0x1f) /* inf, NaN (quieted) */
		return sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0);
	if (exp != 0) /* normal: rebias 15 -> 127 */
		return sign | ((exp + 112) << 23) | (mant << 13);
	if (mant == 0)
		return sign;
	/* Subnormal mant * 2^-24 is a normal fp32: shift the leading one up to the implicit bit
	 * (bit 10), lowering the exponent from that of 2^-14 (113) once per shift. */
	uint32_t e = 113;
	while (!(mant & 0x400u)) {
		mant <<= 1;
		e--;
	}
	return sign | (e << 23) | ((mant & 0x3ffu) << 13);
}

static inline uint16_t fp32_bits_to_fp16(uint32_t u)
{
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t a = u & 0x7fffffffu;

	if (a > 0x7f800000u) /* NaN: keep the top payload bits, force quiet */
		return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
	if (a >= 0x477ff000u) /* >= 65520 = 65504 + half an ulp: the tie rounds to even = inf */
		return (uint16_t)(sign | 0x7c00u);
	if (a >= 0x38800000u) {
		/* Normal result (>= 2^-14). Adding 0xfff plus the lsb that survives rounds to nearest
		 * even at bit 13; a carry out of the mantissa bumps the exponent, which is right. */
		uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
		r -= 112u << 23;
		return (uint16_t)(sign | (r >> 13));
	}
	/* Subnormal or zero result: mant = round(value / 2^-24). value = full * 2^(e - 150). */
	uint32_t e = a >> 23;
	if (e < 102) /* value < 2^-25: below half the smallest subnormal (fp32 subnormals too) */
		return sign;
	uint32_t full = (a & 0x7fffffu) | 0x800000u;
	uint32_t shift = 126 - e; /* 14..24 */
	uint32_t q = full >> shift;
	uint32_t rem = full & ((1u << shift) - 1);
	uint32_t half = 1u << (shift - 1);
	if (rem > half || (rem == half && (q & 1u)))
		q++; /* q may reach 0x400, the encoding of the smallest normal: still right */
	return (uint16_t)(sign | q);
}

static inline uint16_t fp32_bits_to_bf16(uint32_t u)
{
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	/* Round to nearest even at bit 16; overflow carries into inf exactly as it should. */
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float agg_fp16_to_fp32(uint16_t h)
{
	return f32_from_bits(fp16_to_fp32_bits(h));
}

uint16_t agg_fp32_to_fp16(float f)
{
	return fp32_bits_to_fp16(f32_bits(f));
}

float agg_bf16_to_fp32(uint16_t h)
{
	return f32_from_bits((uint32_t)h << 16);
}

uint16_t agg_fp32_to_bf16(float f)
{
	return fp32_bits_to_bf16(f32_bits(f));
}

/* ------------------------------------------------------------------ vector element ops */
/* GCC vector extensions of VB bytes: VB = 32 for the baseline set (GCC splits each vector into
 * two SSE2 registers) and the AVX2 set, VB = 64 for the AVX-512 set. Helpers take vectors by
 * pointer and are always inlined: passing 32/64-byte vectors by value to a function compiled
 * without AVX draws ABI notes and would cost a trip through memory. */
#define DEF_VTYPES(VB)                                                                    \
	typedef uint8_t vu8_##VB __attribute__((vector_size(VB)));                        \
	typedef int8_t vi8_##VB __attribute__((vector_size(VB)));                         \
	typedef uint16_t vu16_##VB __attribute__((vector_size(VB)));                      \
	typedef int16_t vi16_##VB __attribute__((vector_size(VB)));                       \
	typedef uint32_t vu32_##VB __attribute__((vector_size(VB)));                      \
	typedef int32_t vi32_##VB __attribute__((vector_size(VB)));                       \
	typedef uint64_t vu64_##VB __attribute__((vector_size(VB)));                     \
	typedef int64_t vi64_##VB __attribute__((vector_size(VB)));                       \
	typedef float vf32_##VB __attribute__((vector_size(VB)));                         \
	typedef double vf64_##VB __attribute__((vector_size(VB)));
DEF_VTYPES(32)
DEF_VTYPES(64)

#define AI static inline __attribute__((always_inline, unused))

/* Lanes of a where the mask m is all ones, else lanes of b. */
#define SEL(m, a, b) (((a) & (m)) | ((b) & ~(m)))

/* Integer ops run on unsigned lanes: sum and prod wrap modulo 2^n with no signed-overflow UB,
 * and the bit patterns are the same for signed types. Only min/max care about the sign. */
#define DEF_INT_OPS(W, VB)                                                                \
	AI void vop_u##W##_##VB(vu##W##_##VB *pa, const vu##W##_##VB *pb, enum inca_op op) \
	{                                                                                 \
		vu##W##_##VB a = *pa, b = *pb;                                            \
		switch (op) {                                                             \
		case INCA_SUM:                                                            \
			*pa = a + b;                                                      \
			break;                                                            \
		case INCA_PROD:                                                           \
			*pa = a * b;                                                      \
			break;                                                            \
		case INCA_MIN:                                                            \
			*pa = SEL((vu##W##_##VB)(a < b), a, b);                           \
			break;                                                            \
		case INCA_MAX:                                                            \
			*pa = SEL((vu##W##_##VB)(a > b), a, b);                           \
			break;                                                            \
		case INCA_BAND:                                                           \
			*pa = a & b;                                                      \
			break;                                                            \
		case INCA_BOR:                                                            \
			*pa = a | b;                                                      \
			break;                                                            \
		default:                                                                  \
			*pa = a ^ b;                                                      \
			break;                                                            \
		}                                                                         \
	}                                                                                 \
	AI void vop_s##W##_##VB(vu##W##_##VB *pa, const vu##W##_##VB *pb, enum inca_op op) \
	{                                                                                 \
		vu##W##_##VB a = *pa, b = *pb;                                            \
		vi##W##_##VB sa = (vi##W##_##VB)a, sb = (vi##W##_##VB)b;                  \
		if (op == INCA_MIN)                                                       \
			*pa = SEL((vu##W##_##VB)(sa < sb), a, b);                         \
		else                                                                      \
			*pa = SEL((vu##W##_##VB)(sa > sb), a, b);                         \
	}
DEF_INT_OPS(8, 32)
DEF_INT_OPS(16, 32)
DEF_INT_OPS(32, 32)
DEF_INT_OPS(64, 32)
DEF_INT_OPS(8, 64)
DEF_INT_OPS(16, 64)
DEF_INT_OPS(32, 64)
DEF_INT_OPS(64, 64)

/* Float min/max follow IEEE 754-2019 minimum/maximum, so that the result does not depend on
 * the order in which contributions arrive:
 *  - NaN propagates: if dst is NaN the result is dst's NaN, else if src is NaN it is src's
 *    (so with two NaNs the payload is dst's; the NaN is passed on as it is, not quieted),
 *  - -0 < +0: min(-0, +0) = -0 and max(-0, +0) = +0 in either order,
 *  - otherwise the smaller / larger value, bit for bit one of the inputs.
 * For fp16/bf16 the rule is applied to the fp32 widenings and the result narrowed back, which
 * selects one of the inputs (NaNs quieted as the conversions do).
 * Shape: pick a < b ? a : b (src when unordered, which is right for a NaN src), then for
 * equal values merge the sign bits (OR for min: -0 wins; AND for max: +0 wins), then a NaN dst
 * overrides everything. */
#define DEF_FLT_OPS(F, U, VB)                                                             \
	AI void vop_##F##_##VB(v##F##_##VB *pa, const v##F##_##VB *pb, enum inca_op op)    \
	{                                                                                 \
		v##F##_##VB a = *pa, b = *pb;                                             \
		if (op == INCA_SUM) {                                                     \
			*pa = a + b;                                                      \
			return;                                                           \
		}                                                                         \
		if (op == INCA_PROD) {                                                    \
			*pa = a * b;                                                      \
			return;                                                           \
		}                                                                         \
		v##U##_##VB ua = (v##U##_##VB)a, ub = (v##U##_##VB)b, r;                  \
		v##U##_##VB eq = (v##U##_##VB)(a == b);                                   \
		if (op == INCA_MIN)                                                       \
			r = SEL((v##U##_##VB)(a < b), ua, ub) | (eq & ua);                \
		else                                                                      \
			r = SEL((v##U##_##VB)(a > b), ua, ub) & (~eq | ua);               \
		r = SEL((v##U##_##VB)(a != a), ua, r);                                    \
		*pa = (v##F##_##VB)r;                                                     \
	}
DEF_FLT_OPS(f32, u32, 32)
DEF_FLT_OPS(f64, u64, 32)
DEF_FLT_OPS(f32, u32, 64)
DEF_FLT_OPS(f64, u64, 64)

/* 16-bit floats: a block of VB bytes widens to two fp32 vectors. The lane order inside the
 * pair does not matter (both operands are widened alike and narrowing undoes it). */

/* bf16: a 32-bit lane holds elements 2k (low half) and 2k+1 (high half); each becomes an fp32
 * by moving it to, or keeping it in, the high half. No shuffles needed. */
#define DEF_BF16(VB)                                                                      \
	AI void bf16_widen_##VB(vf32_##VB *lo, vf32_##VB *hi, const vu16_##VB *h)          \
	{                                                                                 \
		vu32_##VB w = (vu32_##VB)*h;                                              \
		*lo = (vf32_##VB)(w << 16);                                               \
		*hi = (vf32_##VB)(w & 0xffff0000u);                                       \
	}                                                                                 \
	/* fp32 -> bf16 in the high half of each lane (see fp32_bits_to_bf16). */          \
	AI void bf16_round_##VB(vu32_##VB *u)                                             \
	{                                                                                 \
		vu32_##VB x = *u;                                                         \
		vu32_##VB is_nan = (vu32_##VB)((vi32_##VB)(x & 0x7fffffffu) > 0x7f800000); \
		*u = SEL(is_nan, x | 0x00400000u, x + 0x7fffu + ((x >> 16) & 1u));       \
	}                                                                                 \
	AI void bf16_narrow_##VB(vu16_##VB *h, const vf32_##VB *lo, const vf32_##VB *hi)   \
	{                                                                                 \
		vu32_##VB l = (vu32_##VB)*lo, u = (vu32_##VB)*hi;                         \
		bf16_round_##VB(&l);                                                      \
		bf16_round_##VB(&u);                                                      \
		*h = (vu16_##VB)((l >> 16) | (u & 0xffff0000u));                          \
	}                                                                                 \
	/* Baseline fp16: scalar conversions (CPUs without F16C are rare). */             \
	AI void fp16_widen_sw_##VB(vf32_##VB *lo, vf32_##VB *hi, const vu16_##VB *h)       \
	{                                                                                 \
		for (int i = 0; i < (VB) / 4; i++) {                                      \
			(*lo)[i] = f32_from_bits(fp16_to_fp32_bits((*h)[i]));             \
			(*hi)[i] = f32_from_bits(fp16_to_fp32_bits((*h)[(VB) / 4 + i]));  \
		}                                                                         \
	}                                                                                 \
	AI void fp16_narrow_sw_##VB(vu16_##VB *h, const vf32_##VB *lo, const vf32_##VB *hi) \
	{                                                                                 \
		for (int i = 0; i < (VB) / 4; i++) {                                      \
			(*h)[i] = fp32_bits_to_fp16(f32_bits((*lo)[i]));                  \
			(*h)[(VB) / 4 + i] = fp32_bits_to_fp16(f32_bits((*hi)[i]));       \
		}                                                                         \
	}
DEF_BF16(32)
DEF_BF16(64)

#if AGG_X86
#define ATTR_AVX2 __attribute__((target("avx2,f16c")))
#define ATTR_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c")))
#define AI_AVX2 static inline __attribute__((always_inline, target("avx2,f16c")))
#define AI_AVX512                                                                         \
	static inline __attribute__((always_inline,                                       \
				     target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c")))
#define F16C_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* F16C converts with round-to-nearest-even and quiets NaNs like fp32_bits_to_fp16; the unit
 * test compares both over all inputs. */
AI_AVX2 void fp16_widen_f16c_32(vf32_32 *lo, vf32_32 *hi, const vu16_32 *h)
{
	__m256i x = (__m256i)*h;
	*lo = (vf32_32)_mm256_cvtph_ps(_mm256_castsi256_si128(x));
	*hi = (vf32_32)_mm256_cvtph_ps(_mm256_extracti128_si256(x, 1));
}

AI_AVX2 void fp16_narrow_f16c_32(vu16_32 *h, const vf32_32 *lo, const vf32_32 *hi)
{
	*h = (vu16_32)_mm256_set_m128i(_mm256_cvtps_ph((__m256)*hi, F16C_RNE),
				       _mm256_cvtps_ph((__m256)*lo, F16C_RNE));
}

AI_AVX512 void fp16_widen_f16c_64(vf32_64 *lo, vf32_64 *hi, const vu16_64 *h)
{
	__m512i x = (__m512i)*h;
	*lo = (vf32_64)_mm512_cvtph_ps(_mm512_castsi512_si256(x));
	*hi = (vf32_64)_mm512_cvtph_ps(_mm512_extracti64x4_epi64(x, 1));
}

AI_AVX512 void fp16_narrow_f16c_64(vu16_64 *h, const vf32_64 *lo, const vf32_64 *hi)
{
	__m512i x = _mm512_castsi256_si512(_mm512_cvtps_ph((__m512)*lo, F16C_RNE));
	*h = (vu16_64)_mm512_inserti64x4(x, _mm512_cvtps_ph((__m512)*hi, F16C_RNE), 1);
}

/* AVX2 float ops: vminps/vmaxps already return src unless dst < src (resp. >), so min/max
 * take six instructions instead of the generic select chain. Same results as DEF_FLT_OPS. */
#define DEF_FLT_OPS_AVX2(F, M256, PS)                                                     \
	AI_AVX2 void vop_##F##_avx2(v##F##_32 *pa, const v##F##_32 *pb, enum inca_op op)   \
	{                                                                                 \
		M256 a = (M256)*pa, b = (M256)*pb, r;                                     \
		switch (op) {                                                             \
		case INCA_SUM:                                                            \
			*pa = *pa + *pb;                                                  \
			return;                                                           \
		case INCA_PROD:                                                           \
			*pa = *pa * *pb;                                                  \
			return;                                                           \
		case INCA_MIN:                                                            \
			r = _mm256_min_##PS(a, b);                                        \
			r = _mm256_or_##PS(r, _mm256_and_##PS(_mm256_cmp_##PS(a, b, _CMP_EQ_OQ), a)); \
			break;                                                            \
		default:                                                                  \
			r = _mm256_max_##PS(a, b);                                        \
			r = _mm256_andnot_##PS(                                           \
				_mm256_andnot_##PS(a, _mm256_cmp_##PS(a, b, _CMP_EQ_OQ)), r); \
			break;                                                            \
		}                                                                         \
		r = _mm256_blendv_##PS(r, a, _mm256_cmp_##PS(a, a, _CMP_UNORD_Q));        \
		*pa = (v##F##_32)r;                                                       \
	}
DEF_FLT_OPS_AVX2(f32, __m256, ps)
DEF_FLT_OPS_AVX2(f64, __m256d, pd)
#endif

/* ------------------------------------------------------------------ kernels */
/* Every kernel takes a byte count (a multiple of the element size). Loads and stores go
 * through memcpy so unaligned payloads are fine; dst == src also works because each block is
 * loaded completely before it is stored. Four vectors per iteration: with one, loop overhead
 * held an in-cache 4 KiB reduce well below the store bandwidth. */
typedef void kern_fn(uint8_t *d, const uint8_t *s, size_t nbytes);

/* One step on the vector at byte offset off (memcpy'd, so unaligned is fine). */
#define KSTEP(V, VOP, OP, off)                                                            \
	do {                                                                              \
		V ka_, kb_;                                                               \
		memcpy(&ka_, d + (off), sizeof(V));                                       \
		memcpy(&kb_, s + (off), sizeof(V));                                       \
		VOP(&ka_, &kb_, OP);                                                      \
		memcpy(d + (off), &ka_, sizeof(V));                                       \
	} while (0)

/* Named vectors, not an array: GCC keeps an array of vectors memcpy'd as a block on the
 * stack, which made the in-cache case four times slower. */
#define DEF_KERNEL(NAME, ATTR, V, VOP, OP)                                                \
	ATTR static void NAME(uint8_t *d, const uint8_t *s, size_t nb)                    \
	{                                                                                 \
		const size_t vb = sizeof(V);                                              \
		size_t off = 0;                                                           \
		for (; off + 4 * vb <= nb; off += 4 * vb) {                               \
			V a0, a1, a2, a3, b0, b1, b2, b3;                                 \
			memcpy(&a0, d + off, vb);                                         \
			memcpy(&a1, d + off + vb, vb);                                    \
			memcpy(&a2, d + off + 2 * vb, vb);                                \
			memcpy(&a3, d + off + 3 * vb, vb);                                \
			memcpy(&b0, s + off, vb);                                         \
			memcpy(&b1, s + off + vb, vb);                                    \
			memcpy(&b2, s + off + 2 * vb, vb);                                \
			memcpy(&b3, s + off + 3 * vb, vb);                                \
			VOP(&a0, &b0, OP);                                                \
			VOP(&a1, &b1, OP);                                                \
			VOP(&a2, &b2, OP);                                                \
			VOP(&a3, &b3, OP);                                                \
			memcpy(d + off, &a0, vb);                                         \
			memcpy(d + off + vb, &a1, vb);                                    \
			memcpy(d + off + 2 * vb, &a2, vb);                                \
			memcpy(d + off + 3 * vb, &a3, vb);                                \
		}                                                                         \
		for (; off + vb <= nb; off += vb)                                         \
			KSTEP(V, VOP, OP, off);                                           \
		if (off < nb) {                                                           \
			/* Tail in zeroed registers: padding lanes compute 0 OP 0, which   \
			 * cannot trap, and are never stored. */                          \
			V ta = {0}, tb = {0};                                             \
			memcpy(&ta, d + off, nb - off);                                   \
			memcpy(&tb, s + off, nb - off);                                   \
			VOP(&ta, &tb, OP);                                                \
			memcpy(d + off, &ta, nb - off);                                   \
		}                                                                         \
	}

/* fp16/bf16: widen a block to two fp32 vectors, apply the fp32 op, narrow with round to
 * nearest even. The conversions dominate, so no unrolling here. */
#define DEF_KERNEL16(NAME, ATTR, VB, WIDEN, NARROW, FVOP, OP)                             \
	ATTR static void NAME(uint8_t *d, const uint8_t *s, size_t nb)                    \
	{                                                                                 \
		vu16_##VB ha, hb;                                                         \
		vf32_##VB alo, ahi, blo, bhi;                                             \
		size_t off = 0;                                                           \
		for (; off + (VB) <= nb; off += (VB)) {                                   \
			memcpy(&ha, d + off, (VB));                                       \
			memcpy(&hb, s + off, (VB));                                       \
			WIDEN(&alo, &ahi, &ha);                                           \
			WIDEN(&blo, &bhi, &hb);                                           \
			FVOP(&alo, &blo, OP);                                             \
			FVOP(&ahi, &bhi, OP);                                             \
			NARROW(&ha, &alo, &ahi);                                          \
			memcpy(d + off, &ha, (VB));                                       \
		}                                                                         \
		if (off < nb) {                                                           \
			memset(&ha, 0, (VB));                                             \
			memset(&hb, 0, (VB));                                             \
			memcpy(&ha, d + off, nb - off);                                   \
			memcpy(&hb, s + off, nb - off);                                   \
			WIDEN(&alo, &ahi, &ha);                                           \
			WIDEN(&blo, &bhi, &hb);                                           \
			FVOP(&alo, &blo, OP);                                             \
			FVOP(&ahi, &bhi, OP);                                             \
			NARROW(&ha, &alo, &ahi);                                          \
			memcpy(d + off, &ha, nb - off);                                   \
		}                                                                         \
	}

/* X(stem, vector type, op function, op). Signed and unsigned integers share the unsigned
 * kernels except for min/max (s8_min...). */
#define INT_KERNELS(X, W, VB)                                                             \
	X(u##W##_sum, vu##W##_##VB, vop_u##W##_##VB, INCA_SUM)                            \
	X(u##W##_prod, vu##W##_##VB, vop_u##W##_##VB, INCA_PROD)                          \
	X(u##W##_min, vu##W##_##VB, vop_u##W##_##VB, INCA_MIN)                            \
	X(u##W##_max, vu##W##_##VB, vop_u##W##_##VB, INCA_MAX)                            \
	X(s##W##_min, vu##W##_##VB, vop_s##W##_##VB, INCA_MIN)                            \
	X(s##W##_max, vu##W##_##VB, vop_s##W##_##VB, INCA_MAX)                            \
	X(u##W##_and, vu##W##_##VB, vop_u##W##_##VB, INCA_BAND)                           \
	X(u##W##_or, vu##W##_##VB, vop_u##W##_##VB, INCA_BOR)                             \
	X(u##W##_xor, vu##W##_##VB, vop_u##W##_##VB, INCA_BXOR)
#define ALL_INT_KERNELS(X, VB)                                                            \
	INT_KERNELS(X, 8, VB)                                                             \
	INT_KERNELS(X, 16, VB)                                                            \
	INT_KERNELS(X, 32, VB)                                                            \
	INT_KERNELS(X, 64, VB)
#define FLT_KERNELS(X, F, V, VOP)                                                         \
	X(F##_sum, V, VOP, INCA_SUM)                                                      \
	X(F##_prod, V, VOP, INCA_PROD)                                                    \
	X(F##_min, V, VOP, INCA_MIN)                                                      \
	X(F##_max, V, VOP, INCA_MAX)
/* X(stem, VB, widen, narrow, fp32 op function, op) */
#define K16_KERNELS(X, F, VB, WIDEN, NARROW, FVOP)                                        \
	X(F##_sum, VB, WIDEN, NARROW, FVOP, INCA_SUM)                                     \
	X(F##_prod, VB, WIDEN, NARROW, FVOP, INCA_PROD)                                   \
	X(F##_min, VB, WIDEN, NARROW, FVOP, INCA_MIN)                                     \
	X(F##_max, VB, WIDEN, NARROW, FVOP, INCA_MAX)

/* Baseline set (SSE2 on x86-64, whatever GCC makes of the vectors elsewhere). */
#define X_GEN(stem, V, VOP, OP) DEF_KERNEL(k_##stem##_gen, , V, VOP, OP)
#define X16_GEN(stem, VB, W, N, FVOP, OP) DEF_KERNEL16(k_##stem##_gen, , VB, W, N, FVOP, OP)
ALL_INT_KERNELS(X_GEN, 32)
FLT_KERNELS(X_GEN, f32, vf32_32, vop_f32_32)
FLT_KERNELS(X_GEN, f64, vf64_32, vop_f64_32)
K16_KERNELS(X16_GEN, f16, 32, fp16_widen_sw_32, fp16_narrow_sw_32, vop_f32_32)
K16_KERNELS(X16_GEN, bf16, 32, bf16_widen_32, bf16_narrow_32, vop_f32_32)

#if AGG_X86
/* AVX2 + F16C set. No FMA anywhere: nothing here multiplies and adds, and leaving it out
 * guarantees that every set rounds identically. */
#define X_AVX2(stem, V, VOP, OP) DEF_KERNEL(k_##stem##_avx2, ATTR_AVX2, V, VOP, OP)
#define X16_AVX2(stem, VB, W, N, FVOP, OP)                                                \
	DEF_KERNEL16(k_##stem##_avx2, ATTR_AVX2, VB, W, N, FVOP, OP)
ALL_INT_KERNELS(X_AVX2, 32)
FLT_KERNELS(X_AVX2, f32, vf32_32, vop_f32_avx2)
FLT_KERNELS(X_AVX2, f64, vf64_32, vop_f64_avx2)
K16_KERNELS(X16_AVX2, f16, 32, fp16_widen_f16c_32, fp16_narrow_f16c_32, vop_f32_avx2)
K16_KERNELS(X16_AVX2, bf16, 32, bf16_widen_32, bf16_narrow_32, vop_f32_avx2)

/* AVX-512 (F, BW, DQ, VL) set: 64-byte vectors; GCC turns the selects into vpternlog and
 * mask moves. */
#define X_512(stem, V, VOP, OP) DEF_KERNEL(k_##stem##_avx512, ATTR_AVX512, V, VOP, OP)
#define X16_512(stem, VB, W, N, FVOP, OP)                                                 \
	DEF_KERNEL16(k_##stem##_avx512, ATTR_AVX512, VB, W, N, FVOP, OP)
ALL_INT_KERNELS(X_512, 64)
FLT_KERNELS(X_512, f32, vf32_64, vop_f32_64)
FLT_KERNELS(X_512, f64, vf64_64, vop_f64_64)
K16_KERNELS(X16_512, f16, 64, fp16_widen_f16c_64, fp16_narrow_f16c_64, vop_f32_64)
K16_KERNELS(X16_512, bf16, 64, bf16_widen_64, bf16_narrow_64, vop_f32_64)
#endif

/* ------------------------------------------------------------------ dispatch */
#define INT_ROW(SFX, U, S)                                                                \
	{                                                                                 \
		[INCA_SUM] = k_##U##_sum_##SFX, [INCA_PROD] = k_##U##_prod_##SFX,         \
		[INCA_MIN] = k_##S##_min_##SFX, [INCA_MAX] = k_##S##_max_##SFX,           \
		[INCA_BAND] = k_##U##_and_##SFX, [INCA_BOR] = k_##U##_or_##SFX,           \
		[INCA_BXOR] = k_##U##_xor_##SFX,                                          \
	}
#define FLT_ROW(SFX, F)                                                                   \
	{                                                                                 \
		[INCA_SUM] = k_##F##_sum_##SFX, [INCA_PROD] = k_##F##_prod_##SFX,         \
		[INCA_MIN] = k_##F##_min_##SFX, [INCA_MAX] = k_##F##_max_##SFX,           \
	}
#define KERNEL_TABLE(SFX)                                                                 \
	{                                                                                 \
		[INCA_INT8] = INT_ROW(SFX, u8, s8), [INCA_UINT8] = INT_ROW(SFX, u8, u8),  \
		[INCA_INT16] = INT_ROW(SFX, u16, s16),                                    \
		[INCA_UINT16] = INT_ROW(SFX, u16, u16),                                   \
		[INCA_INT32] = INT_ROW(SFX, u32, s32),                                    \
		[INCA_UINT32] = INT_ROW(SFX, u32, u32),                                   \
		[INCA_INT64] = INT_ROW(SFX, u64, s64),                                    \
		[INCA_UINT64] = INT_ROW(SFX, u64, u64), [INCA_FP16] = FLT_ROW(SFX, f16),  \
		[INCA_BF16] = FLT_ROW(SFX, bf16), [INCA_FP32] = FLT_ROW(SFX, f32),        \
		[INCA_FP64] = FLT_ROW(SFX, f64),                                          \
	}

enum { ISA_AUTO = -1, ISA_BASELINE = 0, ISA_AVX2 = 1, ISA_AVX512 = 2, ISA_COUNT };

/* NULL entries are the pairs lib/wire/dtype.h does not allow; agg_reduce checks the table
 * first, and reduce_test checks that every allowed pair has a kernel. */
static kern_fn *const kernel_tab[ISA_COUNT][INCA_DTYPE_COUNT][INCA_OP_COUNT] = {
	[ISA_BASELINE] = KERNEL_TABLE(gen),
#if AGG_X86
	[ISA_AVX2] = KERNEL_TABLE(avx2),
	[ISA_AVX512] = KERNEL_TABLE(avx512),
#endif
};

/* The chosen set; ISA_AUTO until the first call. Every thread computes the same answer, so a
 * race on the first store is harmless (relaxed atomics keep it well defined). */
static int isa_active = ISA_AUTO;

/* The best set this CPU (and OS: __builtin_cpu_supports checks the saved register state)
 * can run. clang does not know the "f16c" name, so that bit comes from CPUID leaf 1. */
static int isa_detect(void)
{
#if AGG_X86
	unsigned eax, ebx, ecx, edx;
	__builtin_cpu_init();
	if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_F16C))
		return ISA_BASELINE;
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
		return ISA_AVX512;
	if (__builtin_cpu_supports("avx2"))
		return ISA_AVX2;
#endif
	return ISA_BASELINE;
}

int agg__reduce_set_isa(int isa)
{
	int best = isa_detect();
	if (isa == ISA_AUTO)
		isa = best;
	else if (isa < 0 || isa > best)
		return -ENOTSUP;
	__atomic_store_n(&isa_active, isa, __ATOMIC_RELAXED);
	return isa;
}

int agg_reduce(void *dst, const void *src, size_t count, enum inca_dtype dt, enum inca_op op)
{
	if (!wire_op_valid((unsigned)dt, (unsigned)op) || !kernel_tab[ISA_BASELINE][dt][op])
		return -EINVAL;
	if (count == 0)
		return 0;
	size_t esz = wire_dtype_size((unsigned)dt);
	if (!dst || !src || count > SIZE_MAX / esz)
		return -EINVAL;
	size_t nb = count * esz;
	uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
	/* Partial overlap would make the result depend on the block size: refuse it. */
	if (d != s && d < s + nb && s < d + nb)
		return -EINVAL;

	int isa = __atomic_load_n(&isa_active, __ATOMIC_RELAXED);
	if (isa == ISA_AUTO) {
		isa = isa_detect();
		__atomic_store_n(&isa_active, isa, __ATOMIC_RELAXED);
	}
	kernel_tab[isa][dt][op](dst, src, nb);
	return 0;
}
