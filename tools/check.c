/* tools/check: test data generation and expected AllReduce results. The exact-mode reference
 * is written independently of lib/agg (wrap-around integer arithmetic, doubles for floats,
 * integer counts of the unit for float sums);
 * rank-order mode chains agg_reduce over the ranks like a deterministic switch does. */
#include "check.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "agg/agg.h"
#include "agg/agg_ref.h"
#include "util/util.h"

/* Per call: one full mix of (seed, iter); per element one more; per rank a cheap remix, so
 * computing all n ranks' values for verification costs little more than one hash. Exact float
 * sums (every benchmark's default) need only 7 bits per rank: rank r takes byte r % 8 of the
 * element's lane r / 8 (lane_bits), so verifying 8 ranks costs one hash and a byte sum. */
static inline uint64_t elem_hash(uint64_t base, size_t i)
{
	return util_mix64(base + (uint64_t)i * UTIL_GOLDEN64);
}

static inline uint64_t rank_bits(uint64_t h, int rank)
{
	uint64_t x = h ^ ((uint64_t)(rank + 1) * 0xD1B54A32D192ED03ull);
	x ^= x >> 32;
	x *= 0xAEF17502108EF2D9ull;
	x ^= x >> 29;
	return x;
}

/* Lane k of element hash h: the hash itself for ranks 0-7, a remix for each further 8. */
static inline uint64_t lane_bits(uint64_t h, int k)
{
	return k ? util_mix64(h ^ (uint64_t)k * 0xD1B54A32D192ED03ull) : h;
}

/* Exact sums of floats: rank r's value is sum_unit(dt) times its byte's low bits less their
 * midpoint: multiples of 1/16 in [-4, 4) (fp32, fp64), integers in [-8, 8) (fp16, bf16, whose
 * mantissas are shorter). Any sum of CHECK_EXACT_MAX_RANKS of them is exact in every format. */
static inline bool sum_narrow(enum inca_dtype dt)
{
	return dt == INCA_FP16 || dt == INCA_BF16;
}

/* The low bits of a rank's byte that make its value, and their midpoint. */
static inline unsigned sum_mask(enum inca_dtype dt)
{
	return sum_narrow(dt) ? 0x0fu : 0x7fu;
}

static inline int sum_mid(enum inca_dtype dt)
{
	return (int)(sum_mask(dt) + 1) / 2;
}

static inline int sum_units(enum inca_dtype dt, uint64_t h, int rank)
{
	unsigned b = (unsigned)(lane_bits(h, rank / 8) >> (8 * (rank % 8))) & sum_mask(dt);
	return (int)b - sum_mid(dt);
}

static inline double sum_unit(enum inca_dtype dt)
{
	return sum_narrow(dt) ? 1.0 : 0x1p-4;
}

static uint64_t spec_base(const struct check_spec *s)
{
	return util_mix64(s->seed * 0x2545F4914F6CDD1Dull + s->iter * 0x9E6C63D0676A9A99ull +
		     (uint64_t)s->dt * 131 + (uint64_t)s->op * 17 + (uint64_t)s->mode);
}

static bool is_float(enum inca_dtype dt)
{
	return dt == INCA_FP16 || dt == INCA_BF16 || dt == INCA_FP32 || dt == INCA_FP64;
}

/* Exact float sums: the values of sum_units (one byte per rank). */
static bool exact_sum(const struct check_spec *s)
{
	return s->mode == CHECK_EXACT && s->op == INCA_SUM && is_float(s->dt);
}

static bool is_signed_int(enum inca_dtype dt)
{
	return dt == INCA_INT8 || dt == INCA_INT16 || dt == INCA_INT32 || dt == INCA_INT64;
}

/* ---------------------------------------------------------------- float formats */

/* Round |d| (finite) to a binary format with mbits stored mantissa bits, exponent bias `bias`
 * and largest unbiased exponent emax; returns the magnitude bits (no sign). */
static uint32_t round_to_small_float(double ad, int mbits, int bias, int emax)
{
	if (ad == 0)
		return 0;
	int emin = 1 - bias;
	int ex;
	frexp(ad, &ex); /* ad = m * 2^ex, m in [0.5, 1) */
	int e = ex - 1;
	if (e < emin) {
		/* Subnormal: multiples of 2^(emin - mbits); a carry into 2^mbits is the smallest
		 * normal, whose encoding follows naturally. */
		double q = nearbyint(ldexp(ad, mbits - emin));
		return (uint32_t)q;
	}
	double q = nearbyint(ldexp(ad, mbits - e)); /* in [2^mbits, 2^(mbits+1)] */
	if (q >= ldexp(1.0, mbits + 1)) {
		q = ldexp(1.0, mbits);
		e++;
	}
	if (e > emax)
		return (uint32_t)((2 * bias + 1) << mbits); /* infinity */
	return (uint32_t)(e + bias) << mbits | ((uint32_t)q - (1u << mbits));
}

static uint16_t double_to_small(double d, int mbits, int bias, int emax, int total_bits)
{
	uint16_t sign = signbit(d) ? (uint16_t)(1u << (total_bits - 1)) : 0;
	if (isnan(d))
		return (uint16_t)(sign | ((2 * bias + 1) << mbits) | (1u << (mbits - 1)));
	if (isinf(d))
		return (uint16_t)(sign | ((2 * bias + 1) << mbits));
	return (uint16_t)(sign | round_to_small_float(fabs(d), mbits, bias, emax));
}

static double small_to_double(uint16_t h, int mbits, int bias, int total_bits)
{
	int ebits = total_bits - 1 - mbits;
	unsigned sign = h >> (total_bits - 1);
	unsigned e = (h >> mbits) & ((1u << ebits) - 1);
	unsigned m = h & ((1u << mbits) - 1);
	double v;
	if (e == (1u << ebits) - 1)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp((double)m, 1 - bias - mbits);
	else
		v = ldexp((double)(m | (1u << mbits)), (int)e - bias - mbits);
	return sign ? -v : v;
}

uint16_t check_double_to_fp16(double d)
{
	return double_to_small(d, 10, 15, 15, 16);
}

uint16_t check_double_to_bf16(double d)
{
	return double_to_small(d, 7, 127, 127, 16);
}

double check_fp16_to_double(uint16_t h)
{
	return small_to_double(h, 10, 15, 16);
}

double check_bf16_to_double(uint16_t h)
{
	return small_to_double(h, 7, 127, 16);
}

/* Store double d (already representable, or to be rounded) as element of type dt. */
static void store_float(enum inca_dtype dt, void *p, double d)
{
	switch (dt) {
	case INCA_FP16: {
		uint16_t h = check_double_to_fp16(d);
		memcpy(p, &h, 2);
		break;
	}
	case INCA_BF16: {
		uint16_t h = check_double_to_bf16(d);
		memcpy(p, &h, 2);
		break;
	}
	case INCA_FP32: {
		float f = (float)d;
		memcpy(p, &f, 4);
		break;
	}
	default:
		memcpy(p, &d, 8);
		break;
	}
}

static double load_float(enum inca_dtype dt, const void *p)
{
	switch (dt) {
	case INCA_FP16: {
		uint16_t h;
		memcpy(&h, p, 2);
		return check_fp16_to_double(h);
	}
	case INCA_BF16: {
		uint16_t h;
		memcpy(&h, p, 2);
		return check_bf16_to_double(h);
	}
	case INCA_FP32: {
		float f;
		memcpy(&f, p, 4);
		return f;
	}
	default: {
		double d;
		memcpy(&d, p, 8);
		return d;
	}
	}
}

/* 2^e for -1022 <= e <= 1023, from its bits: x * pow2(e) is ldexp(x, e) exactly whenever the
 * result is a normal double, as every generated value is, without a libm call per element
 * (ldexp was most of the fill and verification time of a benchmark run). */
static inline double pow2(int e)
{
	uint64_t b = (uint64_t)(e + 1023) << 52;
	double d;
	memcpy(&d, &b, sizeof d);
	return d;
}

/* A random finite, non-zero, normal value of type dt (as a double), from bits x. Exponents
 * stay moderate so min/max see a wide but overflow-free spread. */
static double random_normal(enum inca_dtype dt, uint64_t x)
{
	double sign = (x & 1) ? -1.0 : 1.0;
	int mbits = dt == INCA_FP16 ? 10 : dt == INCA_BF16 ? 7 : dt == INCA_FP32 ? 23 : 52;
	int erange = dt == INCA_FP16 ? 28 : 60; /* fp16 normals span 2^-14..2^15 */
	int e = (int)((x >> 1) % (uint64_t)erange) - erange / 2;
	uint64_t m = (x >> 8) & ((1ull << (mbits < 52 ? mbits : 52)) - 1);
	double mant = 1.0 + (double)m * pow2(-(mbits < 52 ? mbits : 52));
	return sign * (mant * pow2(e));
}

/* Value of element (h, rank) as a double for float types. */
static double float_value(const struct check_spec *s, uint64_t h, int rank)
{
	bool exact = s->mode == CHECK_EXACT;
	if (exact_sum(s))
		return (double)sum_units(s->dt, h, rank) * sum_unit(s->dt);
	uint64_t x = rank_bits(h, rank);
	switch (s->op) {
	case INCA_SUM:
		/* Uniform in [-1, 1) scaled by 2^[-3, 3]: rounds on every addition. */
		return ((double)(int64_t)(x >> 11) * 0x1p-52 - 1.0) * pow2((int)((x & 7) % 7) - 3);
	case INCA_PROD:
		if (exact)
			return ((x & 1) ? -1.0 : 1.0) * pow2((int)((x >> 1) % 3) - 1);
		return ((x & 1) ? -1.0 : 1.0) * (0.5 + 1.5 * (double)(x >> 11) * 0x1p-53);
	default: /* min, max: any finite value is exact */
		return random_normal(s->dt, x);
	}
}

static uint64_t int_value(enum inca_dtype dt, uint64_t h, int rank)
{
	uint64_t x = rank_bits(h, rank);
	size_t es = inca_dtype_size(dt);
	return es >= 8 ? x : x & ((1ull << (es * 8)) - 1);
}

static void store_int(size_t es, void *p, uint64_t v)
{
	switch (es) {
	case 1: { uint8_t t = (uint8_t)v; memcpy(p, &t, 1); break; }
	case 2: { uint16_t t = (uint16_t)v; memcpy(p, &t, 2); break; }
	case 4: { uint32_t t = (uint32_t)v; memcpy(p, &t, 4); break; }
	default: memcpy(p, &v, 8); break;
	}
}

static int64_t sext(uint64_t v, size_t es)
{
	if (es >= 8)
		return (int64_t)v;
	unsigned sh = (unsigned)(64 - es * 8);
	return (int64_t)(v << sh) >> sh;
}

/* Encodings of the exact float sums of every value of units in [lo, lo + n): fp16 and bf16 from
 * a table (the reference conversion is slow), fp32 and fp64 by one multiplication. n is at most
 * the span of a sum of CHECK_EXACT_MAX_RANKS narrow values. */
struct sum_enc {
	enum inca_dtype dt;
	int lo;
	uint16_t narrow[2 * 8 * CHECK_EXACT_MAX_RANKS];
};

static void sum_enc_init(struct sum_enc *e, enum inca_dtype dt, int lo, int n)
{
	e->dt = dt;
	e->lo = lo;
	if (!sum_narrow(dt))
		return;
	for (int i = 0; i < n && i < (int)(sizeof e->narrow / sizeof e->narrow[0]); i++) {
		double d = (double)(lo + i) * sum_unit(dt);
		e->narrow[i] = dt == INCA_FP16 ? check_double_to_fp16(d) : check_double_to_bf16(d);
	}
}

static inline void sum_enc_store(const struct sum_enc *e, int units, void *p)
{
	if (e->dt == INCA_FP32) {
		float f = (float)((double)units * sum_unit(e->dt)); /* exact either way */
		memcpy(p, &f, 4);
	} else if (e->dt == INCA_FP64) {
		double d = (double)units * sum_unit(e->dt);
		memcpy(p, &d, 8);
	} else {
		memcpy(p, &e->narrow[units - e->lo], 2);
	}
}

/* Sum of the units of ranks [8k, 8k + m) (m <= 8) of element hash h: bytes masked, added in
 * 16-bit fields (at most 8 x 127 each), then folded. */
static inline int lane_units(uint64_t h, int k, int m, uint64_t mask, int mid)
{
	uint64_t x = lane_bits(h, k) & mask;
	if (m < 8)
		x &= (1ull << (8 * m)) - 1;
	x = (x & 0x00ff00ff00ff00ffull) + ((x >> 8) & 0x00ff00ff00ff00ffull);
	return (int)((x * 0x0001000100010001ull) >> 48) - m * mid;
}

void check_fill(const struct check_spec *s, int rank, void *buf, size_t first, size_t count)
{
	uint64_t base = spec_base(s);
	size_t es = inca_dtype_size(s->dt);
	uint8_t *p = buf;
	if (exact_sum(s)) {
		struct sum_enc e;
		sum_enc_init(&e, s->dt, -sum_mid(s->dt), 2 * sum_mid(s->dt));
		for (size_t i = 0; i < count; i++)
			sum_enc_store(&e, sum_units(s->dt, elem_hash(base, first + i), rank), p + i * es);
		return;
	}
	if (is_float(s->dt)) {
		for (size_t i = 0; i < count; i++)
			store_float(s->dt, p + i * es, float_value(s, elem_hash(base, first + i), rank));
	} else {
		for (size_t i = 0; i < count; i++)
			store_int(es, p + i * es, int_value(s->dt, elem_hash(base, first + i), rank));
	}
}

static void expected_exact(const struct check_spec *s, uint64_t h, void *out)
{
	size_t es = inca_dtype_size(s->dt);
	int n = s->nranks;
	if (is_float(s->dt)) {
		/* Min/max: keep the winner's bits (values are never +-0 or NaN, so no ties of
		 * different encodings). Sum/prod: exact in double by construction. */
		double acc = float_value(s, h, 0);
		for (int r = 1; r < n; r++) {
			double v = float_value(s, h, r);
			acc = agg_ref_f64(s->op, acc, v);
		}
		store_float(s->dt, out, acc);
		return;
	}
	bool sg = is_signed_int(s->dt);
	uint64_t acc = int_value(s->dt, h, 0);
	for (int r = 1; r < n; r++) {
		uint64_t v = int_value(s->dt, h, r);
		if (sg)
			acc = agg_ref_int(s->op, (uint64_t)sext(acc, es), (uint64_t)sext(v, es), true);
		else
			acc = agg_ref_int(s->op, acc, v, false);
	}
	store_int(es, out, acc);
}

void check_expected(const struct check_spec *s, size_t index, void *out)
{
	uint64_t h = elem_hash(spec_base(s), index);
	if (s->mode == CHECK_RANK_ORDER && is_float(s->dt)) {
		uint8_t tmp[8];
		check_fill(s, 0, out, index, 1);
		for (int r = 1; r < s->nranks; r++) {
			check_fill(s, r, tmp, index, 1);
			agg_reduce(out, tmp, 1, s->dt, s->op);
		}
		return;
	}
	expected_exact(s, h, out);
}

#define VERIFY_BLOCK 2048

/* memcmp(a, b, es) == 0 for one element, with fixed-size loads (a memcmp call per element cost
 * as much as computing the element's expected value). */
static inline bool same_elem(const void *a, const void *b, size_t es)
{
	switch (es) {
	case 1:
		return *(const uint8_t *)a == *(const uint8_t *)b;
	case 2: {
		uint16_t x, y;
		memcpy(&x, a, 2);
		memcpy(&y, b, 2);
		return x == y;
	}
	case 4: {
		uint32_t x, y;
		memcpy(&x, a, 4);
		memcpy(&y, b, 4);
		return x == y;
	}
	default: {
		uint64_t x, y;
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		return x == y;
	}
	}
}

size_t check_verify(const struct check_spec *s, const void *got, size_t first, size_t count,
		    size_t *first_bad)
{
	size_t es = inca_dtype_size(s->dt);
	const uint8_t *g = got;
	size_t wrong = 0;
	if (first_bad)
		*first_bad = SIZE_MAX;
	if (!es)
		return count;
	if (s->mode == CHECK_RANK_ORDER && is_float(s->dt)) {
		/* Blockwise so the agg_reduce chain runs vectorised over contiguous data. */
		uint8_t acc[VERIFY_BLOCK * 8], tmp[VERIFY_BLOCK * 8];
		for (size_t off = 0; off < count; off += VERIFY_BLOCK) {
			size_t n = count - off < VERIFY_BLOCK ? count - off : VERIFY_BLOCK;
			check_fill(s, 0, acc, first + off, n);
			for (int r = 1; r < s->nranks; r++) {
				check_fill(s, r, tmp, first + off, n);
				if (agg_reduce(acc, tmp, n, s->dt, s->op) != 0)
					return count;
			}
			if (memcmp(acc, g + off * es, n * es) == 0)
				continue;
			for (size_t i = 0; i < n; i++) {
				if (memcmp(acc + i * es, g + (off + i) * es, es) != 0) {
					if (first_bad && *first_bad == SIZE_MAX)
						*first_bad = off + i;
					wrong++;
				}
			}
		}
		return wrong;
	}
	uint64_t base = spec_base(s);
	uint8_t exp[8];
	if (exact_sum(s) && s->nranks > 0 && s->nranks <= CHECK_EXACT_MAX_RANKS) {
		/* The same values as expected_exact, summed as integers (every partial sum is exact). */
		int n = s->nranks, mid = sum_mid(s->dt);
		uint64_t mask = sum_mask(s->dt) * 0x0101010101010101ull; /* every byte */
		struct sum_enc e;
		sum_enc_init(&e, s->dt, -n * mid, 2 * n * mid);
		for (size_t i = 0; i < count; i++) {
			uint64_t h = elem_hash(base, first + i);
			int units = 0;
			for (int k = 0; 8 * k < n; k++)
				units += lane_units(h, k, n - 8 * k < 8 ? n - 8 * k : 8, mask, mid);
			sum_enc_store(&e, units, exp);
			if (!same_elem(exp, g + i * es, es)) {
				if (first_bad && *first_bad == SIZE_MAX)
					*first_bad = i;
				wrong++;
			}
		}
		return wrong;
	}
	for (size_t i = 0; i < count; i++) {
		expected_exact(s, elem_hash(base, first + i), exp);
		if (!same_elem(exp, g + i * es, es)) {
			if (first_bad && *first_bad == SIZE_MAX)
				*first_bad = i;
			wrong++;
		}
	}
	return wrong;
}

void check_format(enum inca_dtype dt, const void *buf, size_t index, char *out, size_t cap)
{
	size_t es = inca_dtype_size(dt);
	const uint8_t *p = (const uint8_t *)buf + index * es;
	if (is_float(dt)) {
		uint64_t bits = 0;
		memcpy(&bits, p, es);
		snprintf(out, cap, "%.17g (0x%0*llx)", load_float(dt, p), (int)es * 2,
			 (unsigned long long)bits);
		return;
	}
	uint64_t v = 0;
	memcpy(&v, p, es);
	if (is_signed_int(dt))
		snprintf(out, cap, "%lld", (long long)sext(v, es));
	else
		snprintf(out, cap, "%llu", (unsigned long long)v);
}

/* ---------------------------------------------------------------- data-movement blocks */

static uint64_t block_base(uint64_t seed, uint64_t iter, int src, int dst)
{
	return util_mix64(seed * 0x2545F4914F6CDD1Dull + iter * 0x9E6C63D0676A9A99ull +
		     (uint64_t)(src + 1) * 0xD1B54A32D192ED03ull +
		     (uint64_t)(dst + 2) * 0xAEF17502108EF2D9ull);
}

void check_fill_block(uint64_t seed, uint64_t iter, int src, int dst, void *buf, size_t bytes)
{
	uint64_t base = block_base(seed, iter, src, dst);
	uint8_t *p = buf;
	size_t w = bytes / 8;
	for (size_t i = 0; i < w; i++) {
		uint64_t v = elem_hash(base, i);
		memcpy(p + i * 8, &v, 8);
	}
	if (bytes % 8) {
		uint64_t v = elem_hash(base, w);
		memcpy(p + w * 8, &v, bytes % 8);
	}
}

size_t check_verify_block(uint64_t seed, uint64_t iter, int src, int dst, const void *got,
			  size_t bytes, size_t es)
{
	uint64_t base = block_base(seed, iter, src, dst);
	const uint8_t *g = got;
	uint8_t exp[VERIFY_BLOCK * 8];
	size_t wrong = 0;
	if (!es)
		es = 1;
	/* Compare in whole blocks of VERIFY_BLOCK words (a multiple of every element size);
	 * count wrong elements only where a block differs. */
	for (size_t off = 0; off < bytes; off += sizeof(exp)) {
		size_t n = bytes - off < sizeof(exp) ? bytes - off : sizeof(exp);
		size_t w0 = off / 8, nw = (n + 7) / 8;
		for (size_t i = 0; i < nw; i++) {
			uint64_t v = elem_hash(base, w0 + i);
			memcpy(exp + i * 8, &v, 8);
		}
		if (memcmp(exp, g + off, n) == 0)
			continue;
		for (size_t e = 0; e < n; e += es) {
			size_t len = n - e < es ? n - e : es;
			if (memcmp(exp + e, g + off + e, len) != 0)
				wrong++;
		}
	}
	return wrong;
}
