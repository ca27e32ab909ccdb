/* lib/agg/reduce.c: the reduce kernels behind agg_reduce (dst[i] = dst[i] OP src[i]) for every
 * valid dtype/op pair, and the exact fp16/bf16 <-> fp32 conversions.
 * Kernels are written once with GCC vector extensions and compiled twice (baseline x86-64 and
 * AVX2+F16C); the set is chosen by CPUID on first use. No allocation, no other state. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "agg/agg.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define AGG_X86 1
#else
#define AGG_X86 0
#endif

/* Internal hook for tests and benchmarks (deliberately not in agg.h): force a kernel set.
 * isa: -1 = pick by CPUID (the default), 0 = baseline, 1 = AVX2+F16C.
 * Returns the set now active, or -ENOTSUP if this CPU cannot run the requested one. */
int agg__reduce_set_isa(int isa);

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
/* 32-byte GCC vectors: one AVX2 register, or two SSE2 registers in the baseline build (GCC
 * splits them). Helpers pass them by pointer and are always inlined: passing 32-byte vectors
 * by value to non-AVX functions draws ABI notes and would cost a trip through memory. */

#define VEC_BYTES 32
typedef uint8_t vu8 __attribute__((vector_size(VEC_BYTES)));
typedef int8_t vi8 __attribute__((vector_size(VEC_BYTES)));
typedef uint16_t vu16 __attribute__((vector_size(VEC_BYTES)));
typedef int16_t vi16 __attribute__((vector_size(VEC_BYTES)));
typedef uint32_t vu32 __attribute__((vector_size(VEC_BYTES)));
typedef int32_t vi32 __attribute__((vector_size(VEC_BYTES)));
typedef uint64_t vu64 __attribute__((vector_size(VEC_BYTES)));
typedef int64_t vi64 __attribute__((vector_size(VEC_BYTES)));
typedef float vf32 __attribute__((vector_size(VEC_BYTES)));
typedef double vf64 __attribute__((vector_size(VEC_BYTES)));
/* Eight 16-bit floats: they widen to one vf32. */
typedef uint16_t vu16x8 __attribute__((vector_size(16)));

#define AI static inline __attribute__((always_inline))

/* Lanes of a where the mask m is all ones, else lanes of b (compilers turn this into blends). */
#define SEL(m, a, b) (((a) & (m)) | ((b) & ~(m)))

/* Integer ops run on unsigned lanes: sum and prod wrap modulo 2^n with no signed-overflow UB,
 * and the bit patterns are the same for signed types. Only min/max care about the sign. */
#define DEF_INT_OPS(W)                                                                    \
	AI void vop_u##W(vu##W *pa, const vu##W *pb, enum inca_op op)                      \
	{                                                                                 \
		vu##W a = *pa, b = *pb;                                                   \
		switch (op) {                                                             \
		case INCA_SUM:                                                            \
			*pa = a + b;                                                      \
			break;                                                            \
		case INCA_PROD:                                                           \
			*pa = a * b;                                                      \
			break;                                                            \
		case INCA_MIN:                                                            \
			*pa = SEL((vu##W)(a < b), a, b);                                  \
			break;                                                            \
		case INCA_MAX:                                                            \
			*pa = SEL((vu##W)(a > b), a, b);                                  \
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
	AI void vop_s##W(vu##W *pa, const vu##W *pb, enum inca_op op)                      \
	{                                                                                 \
		vu##W a = *pa, b = *pb;                                                   \
		vi##W sa = (vi##W)a, sb = (vi##W)b;                                       \
		if (op == INCA_MIN)                                                       \
			*pa = SEL((vu##W)(sa < sb), a, b);                                \
		else                                                                      \
			*pa = SEL((vu##W)(sa > sb), a, b);                                \
	}
DEF_INT_OPS(8)
DEF_INT_OPS(16)
DEF_INT_OPS(32)
DEF_INT_OPS(64)

/* Float min/max follow IEEE 754-2019 minimum/maximum, so that the result does not depend on
 * the order in which contributions arrive:
 *  - NaN propagates: if dst is NaN the result is dst's NaN, else if src is NaN it is src's
 *    (so with two NaNs the payload is dst's; NaNs are returned as they are, not quieted),
 *  - -0 < +0: min(-0, +0) = -0 and max(-0, +0) = +0 in either order,
 *  - otherwise the smaller / larger value, bit for bit one of the inputs.
 * For fp16/bf16 the same rule is applied to the fp32 widenings and the result is narrowed
 * back, which (NaN quieting aside, see the conversions) selects one of the inputs. */
#define DEF_FLT_OPS(F, VF, VU)                                                            \
	AI void vop_##F(VF *pa, const VF *pb, enum inca_op op)                             \
	{                                                                                 \
		VF a = *pa, b = *pb;                                                      \
		if (op == INCA_SUM) {                                                     \
			*pa = a + b;                                                      \
			return;                                                           \
		}                                                                         \
		if (op == INCA_PROD) {                                                    \
			*pa = a * b;                                                      \
			return;                                                           \
		}                                                                         \
		VU ua = (VU)a, ub = (VU)b, r;                                             \
		if (op == INCA_MIN) {                                                     \
			r = SEL((VU)(a < b), ua, ub);                                     \
			r = SEL((VU)(a == b), ua | ub, r); /* -0 wins */                  \
		} else {                                                                  \
			r = SEL((VU)(a > b), ua, ub);                                     \
			r = SEL((VU)(a == b), ua & ub, r); /* +0 wins */                  \
		}                                                                         \
		r = SEL((VU)(b != b), ub, r);                                             \
		r = SEL((VU)(a != a), ua, r);                                             \
		*pa = (VF)r;                                                              \
	}
DEF_FLT_OPS(f32, vf32, vu32)
DEF_FLT_OPS(f64, vf64, vu64)

/* 16-bit float widen / narrow, eight lanes at a time. */
AI void bf16_widen(vf32 *out, vu16x8 h)
{
	*out = (vf32)(__builtin_convertvector(h, vu32) << 16);
}

AI vu16x8 bf16_narrow(const vf32 *f)
{
	vu32 u = (vu32)*f;
	vu32 is_nan = (vu32)((u & 0x7fffffffu) > 0x7f800000u);
	vu32 rne = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	vu32 quiet = (u >> 16) | 0x40u;
	return __builtin_convertvector(SEL(is_nan, quiet, rne), vu16x8);
}

/* Baseline fp16: scalar conversions (CPUs without F16C are rare; correctness over speed). */
AI void fp16_widen_sw(vf32 *out, vu16x8 h)
{
	for (int i = 0; i < 8; i++)
		(*out)[i] = f32_from_bits(fp16_to_fp32_bits(h[i]));
}

AI vu16x8 fp16_narrow_sw(const vf32 *f)
{
	vu16x8 r;
	for (int i = 0; i < 8; i++)
		r[i] = fp32_bits_to_fp16(f32_bits((*f)[i]));
	return r;
}

#if AGG_X86
#define ATTR_AVX2 __attribute__((target("avx2,f16c")))
/* F16C converts eight lanes per instruction with round-to-nearest-even; the unit test checks
 * it against the scalar conversions over all inputs. */
static inline __attribute__((always_inline, target("avx2,f16c"))) void fp16_widen_f16c(vf32 *out, vu16x8 h)
{
	*out = (vf32)_mm256_cvtph_ps((__m128i)h);
}

static inline __attribute__((always_inline, target("avx2,f16c"))) vu16x8 fp16_narrow_f16c(const vf32 *f)
{
	return (vu16x8)_mm256_cvtps_ph((__m256)*f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#endif

/* ------------------------------------------------------------------ kernels */
/* Every kernel takes a byte count (a multiple of the element size). Loads and stores go
 * through memcpy so unaligned payloads are fine; dst == src also works because each block is
 * loaded completely before it is stored. */
typedef void kern_fn(uint8_t *d, const uint8_t *s, size_t nbytes);

#define DEF_KERNEL(NAME, ATTR, V, VOP, OP)                                                \
	ATTR static void NAME(uint8_t *d, const uint8_t *s, size_t nb)                    \
	{                                                                                 \
		V a0, a1, b0, b1;                                                         \
		size_t off = 0;                                                           \
		for (; off + 2 * sizeof(V) <= nb; off += 2 * sizeof(V)) {                 \
			memcpy(&a0, d + off, sizeof(V));                                  \
			memcpy(&a1, d + off + sizeof(V), sizeof(V));                      \
			memcpy(&b0, s + off, sizeof(V));                                  \
			memcpy(&b1, s + off + sizeof(V), sizeof(V));                      \
			VOP(&a0, &b0, OP);                                             \
			VOP(&a1, &b1, OP);                                             \
			memcpy(d + off, &a0, sizeof(V));                                  \
			memcpy(d + off + sizeof(V), &a1, sizeof(V));                      \
		}                                                                         \
		if (off + sizeof(V) <= nb) {                                              \
			memcpy(&a0, d + off, sizeof(V));                                  \
			memcpy(&b0, s + off, sizeof(V));                                  \
			VOP(&a0, &b0, OP);                                             \
			memcpy(d + off, &a0, sizeof(V));                                  \
			off += sizeof(V);                                                 \
		}                                                                         \
		if (off < nb) {                                                           \
			/* Tail in zeroed registers: padding lanes compute 0 OP 0, which   \
			 * cannot trap, and are never stored. */                          \
			memset(&a0, 0, sizeof(V));                                        \
			memset(&b0, 0, sizeof(V));                                        \
			memcpy(&a0, d + off, nb - off);                                   \
			memcpy(&b0, s + off, nb - off);                                   \
			VOP(&a0, &b0, OP);                                             \
			memcpy(d + off, &a0, nb - off);                                   \
		}                                                                         \
	}

/* fp16/bf16: widen eight lanes to fp32, apply the fp32 op, narrow (round to nearest even). */
#define DEF_KERNEL16(NAME, ATTR, WIDEN, NARROW, OP)                                       \
	ATTR static void NAME(uint8_t *d, const uint8_t *s, size_t nb)                    \
	{                                                                                 \
		vu16x8 ha, hb;                                                            \
		vf32 fa, fb;                                                              \
		size_t off = 0;                                                           \
		for (; off + sizeof ha <= nb; off += sizeof ha) {                         \
			memcpy(&ha, d + off, sizeof ha);                                  \
			memcpy(&hb, s + off, sizeof hb);                                  \
			WIDEN(&fa, ha);                                                   \
			WIDEN(&fb, hb);                                                   \
			vop_f32(&fa, &fb, OP);                                            \
			ha = NARROW(&fa);                                                 \
			memcpy(d + off, &ha, sizeof ha);                                  \
		}                                                                         \
		if (off < nb) {                                                           \
			memset(&ha, 0, sizeof ha);                                        \
			memset(&hb, 0, sizeof hb);                                        \
			memcpy(&ha, d + off, nb - off);                                   \
			memcpy(&hb, s + off, nb - off);                                   \
			WIDEN(&fa, ha);                                                   \
			WIDEN(&fb, hb);                                                   \
			vop_f32(&fa, &fb, OP);                                            \
			ha = NARROW(&fa);                                                 \
			memcpy(d + off, &ha, nb - off);                                   \
		}                                                                         \
	}

/* X(stem, vector type, op function, op). Signed and unsigned integers share the unsigned
 * kernels except for min/max (s8_min...). */
#define INT_KERNELS(X, W)                                                                 \
	X(u##W##_sum, vu##W, vop_u##W, INCA_SUM)                                          \
	X(u##W##_prod, vu##W, vop_u##W, INCA_PROD)                                        \
	X(u##W##_min, vu##W, vop_u##W, INCA_MIN)                                          \
	X(u##W##_max, vu##W, vop_u##W, INCA_MAX)                                          \
	X(s##W##_min, vu##W, vop_s##W, INCA_MIN)                                          \
	X(s##W##_max, vu##W, vop_s##W, INCA_MAX)                                          \
	X(u##W##_and, vu##W, vop_u##W, INCA_BAND)                                         \
	X(u##W##_or, vu##W, vop_u##W, INCA_BOR)                                           \
	X(u##W##_xor, vu##W, vop_u##W, INCA_BXOR)
#define FLT_KERNELS(X, F)                                                                 \
	X(F##_sum, v##F, vop_##F, INCA_SUM)                                               \
	X(F##_prod, v##F, vop_##F, INCA_PROD)                                             \
	X(F##_min, v##F, vop_##F, INCA_MIN)                                               \
	X(F##_max, v##F, vop_##F, INCA_MAX)
#define ALL_KERNELS(X)                                                                    \
	INT_KERNELS(X, 8)                                                                 \
	INT_KERNELS(X, 16)                                                                \
	INT_KERNELS(X, 32)                                                                \
	INT_KERNELS(X, 64)                                                                \
	FLT_KERNELS(X, f32)                                                               \
	FLT_KERNELS(X, f64)
/* X(stem, widen, narrow, op) */
#define K16_KERNELS(X, F, WIDEN, NARROW)                                                  \
	X(F##_sum, WIDEN, NARROW, INCA_SUM)                                               \
	X(F##_prod, WIDEN, NARROW, INCA_PROD)                                             \
	X(F##_min, WIDEN, NARROW, INCA_MIN)                                               \
	X(F##_max, WIDEN, NARROW, INCA_MAX)

/* Baseline set (SSE2 on x86-64). */
#define X_GEN(stem, V, VOP, OP) DEF_KERNEL(k_##stem##_gen, , V, VOP, OP)
#define X16_GEN(stem, WIDEN, NARROW, OP) DEF_KERNEL16(k_##stem##_gen, , WIDEN, NARROW, OP)
ALL_KERNELS(X_GEN)
K16_KERNELS(X16_GEN, f16, fp16_widen_sw, fp16_narrow_sw)
K16_KERNELS(X16_GEN, bf16, bf16_widen, bf16_narrow)

#if AGG_X86
/* AVX2 + F16C set. Not FMA: nothing here multiplies and adds, and leaving it out guarantees
 * that both sets round identically. */
#define X_AVX2(stem, V, VOP, OP) DEF_KERNEL(k_##stem##_avx2, ATTR_AVX2, V, VOP, OP)
#define X16_AVX2(stem, WIDEN, NARROW, OP) DEF_KERNEL16(k_##stem##_avx2, ATTR_AVX2, WIDEN, NARROW, OP)
ALL_KERNELS(X_AVX2)
K16_KERNELS(X16_AVX2, f16, fp16_widen_f16c, fp16_narrow_f16c)
K16_KERNELS(X16_AVX2, bf16, bf16_widen, bf16_narrow)
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

enum { ISA_AUTO = -1, ISA_GENERIC = 0, ISA_AVX2 = 1, ISA_COUNT };

static kern_fn *const kernel_tab[ISA_COUNT][INCA_DTYPE_COUNT][INCA_OP_COUNT] = {
	[ISA_GENERIC] = KERNEL_TABLE(gen),
#if AGG_X86
	[ISA_AVX2] = KERNEL_TABLE(avx2),
#endif
};

/* The chosen set. -1 until the first call; every thread computes the same answer, so a race
 * on the first store is harmless (relaxed atomics keep it well defined). */
static int isa_active = ISA_AUTO;

static int isa_detect(void)
{
#if AGG_X86
	/* __builtin_cpu_supports("avx2") also checks that the OS saves the YMM state; clang does
	 * not know the "f16c" name, so that bit comes from CPUID leaf 1 directly. */
	unsigned eax, ebx, ecx, edx;
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
	    (ecx & bit_F16C))
		return ISA_AVX2;
#endif
	return ISA_GENERIC;
}

int agg__reduce_set_isa(int isa)
{
	if (isa == ISA_AUTO)
		isa = isa_detect();
	else if (isa < 0 || isa >= ISA_COUNT || (isa == ISA_AVX2 && isa_detect() != ISA_AVX2))
		return -ENOTSUP;
	__atomic_store_n(&isa_active, isa, __ATOMIC_RELAXED);
	return isa;
}

int agg_reduce(void *dst, const void *src, size_t count, enum inca_dtype dt, enum inca_op op)
{
	if (!inca_op_valid(dt, op))
		return -EINVAL;
	if (count == 0)
		return 0;
	size_t esz = inca_dtype_size(dt);
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
