/* lib/agg/reduce_test.c: unit tests of agg_reduce and the fp16/bf16 conversions.
 * Every valid dtype/op pair is checked against a plain scalar reference (both kernel sets the
 * CPU can run), conversions exhaustively and against an exact midpoint-based rounding model. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "agg/agg_ref.h"
#include "agg/reduce_int.h"
#include "util/util.h"
#include "util/test_check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif


/* ------------------------------------------------------------------ bit helpers */

static uint32_t fbits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float ffrom(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint64_t dbits(double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	return u;
}

static double dfrom(uint64_t u)
{
	double d;
	memcpy(&d, &u, 8);
	return d;
}

static int is_float(enum inca_dtype dt)
{
	return dt >= INCA_FP16;
}

static int is_signed_int(enum inca_dtype dt)
{
	return dt <= INCA_UINT64 && (dt % 2) == 0;
}

static int raw_is_nan(enum inca_dtype dt, uint64_t r)
{
	switch (dt) {
	case INCA_FP16:
		return (r & 0x7fff) > 0x7c00;
	case INCA_BF16:
		return (r & 0x7fff) > 0x7f80;
	case INCA_FP32:
		return (r & 0x7fffffffu) > 0x7f800000u;
	case INCA_FP64:
		return (r & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
	default:
		return 0;
	}
}

/* ------------------------------------------------------------------ exact rounding model */
/* Values of the non-negative 16-bit encodings. The encoding just past the largest finite one
 * is infinity; for rounding it behaves like the next power of two (2^16 / 2^128) with an even
 * mantissa, which is exactly IEEE's overflow rule. */
static double fp16_val(unsigned h)
{
	unsigned e = h >> 10, m = h & 0x3ff;
	return e ? ldexp(1024.0 + m, (int)e - 25) : ldexp(m, -24);
}

static double bf16_val(unsigned h)
{
	unsigned e = h >> 7, m = h & 0x7f;
	return e ? ldexp(128.0 + m, (int)e - 134) : ldexp(m, -133);
}

/* Round a finite or infinite double to the 16-bit format by locating it between two
 * neighbouring encodings and comparing with their exact midpoint (representable in double). */
static uint16_t ref_round16(double x, double (*val)(unsigned), unsigned inf_enc)
{
	uint16_t sign = signbit(x) ? 0x8000 : 0;
	double a = fabs(x);
	if (a >= val(inf_enc))
		return (uint16_t)(sign | inf_enc);
	unsigned lo = 0, hi = inf_enc - 1;
	while (lo < hi) {
		unsigned mid = (lo + hi + 1) / 2;
		if (val(mid) <= a)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (val(lo) == a)
		return (uint16_t)(sign | lo);
	double mp = (val(lo) + val(lo + 1)) / 2;
	if (a < mp)
		return (uint16_t)(sign | lo);
	if (a > mp)
		return (uint16_t)(sign | (lo + 1));
	return (uint16_t)(sign | ((lo & 1) ? lo + 1 : lo));
}

static uint16_t ref_to_fp16(double x)
{
	return ref_round16(x, fp16_val, 0x7c00);
}

static uint16_t ref_to_bf16(double x)
{
	return ref_round16(x, bf16_val, 0x7f80);
}

/* ------------------------------------------------------------------ hardware cross-check */
#if HAVE_X86
__attribute__((target("f16c"))) static uint16_t hw_to_fp16(float f)
{
	return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

__attribute__((target("f16c"))) static float hw_from_fp16(uint16_t h)
{
	return _cvtsh_ss(h);
}

static int have_f16c(void)
{
	unsigned eax, ebx, ecx, edx;
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
	       (ecx & bit_F16C);
}
#endif

/* ------------------------------------------------------------------ conversion tests */

static void check_to_fp16(float f)
{
	uint16_t got = agg_fp32_to_fp16(f);
	if (isnan(f)) {
		uint32_t u = fbits(f);
		uint16_t want = (uint16_t)(((u >> 16) & 0x8000) | 0x7e00 | ((u >> 13) & 0x3ff));
		CHECK_MSG(got == want, "fp32 %08x -> fp16 %04x, want NaN %04x", fbits(f), got, want);
	} else {
		uint16_t want = ref_to_fp16(f);
		CHECK_MSG(got == want, "fp32 %08x (%a) -> fp16 %04x, want %04x", fbits(f), f, got, want);
	}
#if HAVE_X86
	static int hw = -1;
	if (hw < 0)
		hw = have_f16c();
	if (hw) {
		uint16_t h = hw_to_fp16(f);
		CHECK_MSG(got == h, "fp32 %08x -> fp16 %04x, F16C says %04x", fbits(f), got, h);
	}
#endif
}

static void check_to_bf16(float f)
{
	uint16_t got = agg_fp32_to_bf16(f);
	uint32_t u = fbits(f);
	uint16_t want = isnan(f) ? (uint16_t)((u >> 16) | 0x40) : ref_to_bf16(f);
	CHECK_MSG(got == want, "fp32 %08x (%a) -> bf16 %04x, want %04x", u, f, got, want);
}

static void test_conversions(struct util_rng *rng)
{
#if HAVE_X86
	int hw = have_f16c();
#endif
	/* All 65536 inputs: value, then round trip. */
	for (unsigned h = 0; h < 65536; h++) {
		unsigned mag = h & 0x7fff;
		int nan16 = mag > 0x7c00, nanb = mag > 0x7f80;

		float f = agg_fp16_to_fp32((uint16_t)h);
		uint32_t fu = fbits(f);
		if (nan16) {
			uint32_t want = ((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x3ffu) << 13);
			CHECK_MSG(fu == want, "fp16 %04x -> %08x, want quiet NaN %08x", h, fu, want);
		} else {
			double v = mag == 0x7c00 ? INFINITY : fp16_val(mag);
			float want = (float)((h & 0x8000) ? -v : v);
			CHECK_MSG(fu == fbits(want), "fp16 %04x -> %08x, want %08x", h, fu, fbits(want));
		}
		uint16_t back = agg_fp32_to_fp16(f);
		CHECK_MSG(back == (nan16 ? (h | 0x200) : h), "fp16 %04x round trip gives %04x", h, back);
#if HAVE_X86
		if (hw)
			CHECK_MSG(fu == fbits(hw_from_fp16((uint16_t)h)), "fp16 %04x -> %08x, F16C says %08x",
			      h, fu, fbits(hw_from_fp16((uint16_t)h)));
#endif

		float g = agg_bf16_to_fp32((uint16_t)h);
		CHECK_MSG(fbits(g) == (uint32_t)h << 16, "bf16 %04x -> %08x", h, fbits(g));
		if (!nanb) {
			double v = mag == 0x7f80 ? INFINITY : bf16_val(mag);
			CHECK_MSG(g == (float)((h & 0x8000) ? -v : v), "bf16 %04x value", h);
		}
		uint16_t backb = agg_fp32_to_bf16(g);
		CHECK_MSG(backb == (nanb ? (h | 0x40) : h), "bf16 %04x round trip gives %04x", h, backb);
	}

	/* fp32 -> 16: every 16-bit value, the exact midpoints to its neighbour (ties), and one
	 * fp32 ulp either side of each midpoint, both signs. */
	for (unsigned h = 0; h < 0x7c00; h++) {
		double lo = fp16_val(h), hi = fp16_val(h + 1);
		float mid = (float)((lo + hi) / 2);
		CHECK_MSG((double)mid == (lo + hi) / 2, "midpoint of %04x not exact", h);
		float cand[] = {(float)lo, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
		for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
			check_to_fp16(cand[i]);
			check_to_fp16(-cand[i]);
		}
	}
	for (unsigned h = 0; h < 0x7f80; h++) {
		double lo = bf16_val(h), hi = bf16_val(h + 1);
		float mid = (float)((lo + hi) / 2);
		float cand[] = {(float)lo, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
		for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
			check_to_bf16(cand[i]);
			check_to_bf16(-cand[i]);
		}
	}
	/* Hand-checked ties and limits, so the reference itself is pinned down. */
	CHECK_MSG(agg_fp32_to_fp16(1.0f + 0x1p-11f) == 0x3c00, "1+2^-11 ties to even 1.0");
	CHECK_MSG(agg_fp32_to_fp16(1.0f + 0x3p-11f) == 0x3c02, "1+3*2^-11 ties to even 1+2^-9");
	CHECK_MSG(agg_fp32_to_fp16(65504.0f) == 0x7bff, "max finite");
	CHECK_MSG(agg_fp32_to_fp16(65519.996f) == 0x7bff, "just below 65520");
	CHECK_MSG(agg_fp32_to_fp16(65520.0f) == 0x7c00, "65520 ties to inf");
	CHECK_MSG(agg_fp32_to_fp16(0x1p-24f) == 0x0001, "min subnormal");
	CHECK_MSG(agg_fp32_to_fp16(0x1p-25f) == 0x0000, "half min subnormal ties to 0");
	CHECK_MSG(agg_fp32_to_fp16(0x1.000002p-25f) == 0x0001, "just above half min subnormal");
	CHECK_MSG(agg_fp32_to_fp16(0x3p-25f) == 0x0002, "1.5 min subnormal ties to 2");
	CHECK_MSG(agg_fp32_to_fp16(0x1.ff8p-15f) == 0x03ff, "max subnormal");
	CHECK_MSG(agg_fp32_to_fp16(0x1.ffcp-15f) == 0x0400, "tie above max subnormal goes to even normal");
	CHECK_MSG(agg_fp32_to_fp16(0x1.ffep-15f) == 0x0400, "rounds up into the smallest normal");
	CHECK_MSG(agg_fp32_to_fp16(-0.0f) == 0x8000, "-0");
	CHECK_MSG(agg_fp32_to_fp16(ffrom(1)) == 0, "fp32 subnormal -> 0");
	CHECK_MSG(agg_fp32_to_fp16(-INFINITY) == 0xfc00, "-inf");
	CHECK_MSG(agg_fp32_to_fp16(ffrom(0x7f800001)) == 0x7e00, "sNaN with low payload stays NaN");
	CHECK_MSG(agg_fp32_to_bf16(ffrom(0x7f800001)) == 0x7fc0, "bf16: sNaN stays NaN");
	CHECK_MSG(agg_fp32_to_bf16(ffrom(0x3f808000)) == 0x3f80, "bf16 tie to even down");
	CHECK_MSG(agg_fp32_to_bf16(ffrom(0x3f818000)) == 0x3f82, "bf16 tie to even up");
	CHECK_MSG(agg_fp32_to_bf16(ffrom(0x7f7fffff)) == 0x7f80, "bf16 overflow to inf");
	CHECK_MSG(agg_fp32_to_bf16(ffrom(0x00008000)) == 0x0000, "bf16 subnormal tie to 0");
	CHECK_MSG(agg_fp32_to_bf16(ffrom(0x00018000)) == 0x0002, "bf16 subnormal tie to even");

	/* Random bit patterns cover every exponent. */
	for (int i = 0; i < 200000; i++) {
		float f = ffrom((uint32_t)util_rng_next(rng));
		check_to_fp16(f);
		check_to_bf16(f);
	}
}

/* ------------------------------------------------------------------ scalar reference */

static uint64_t load_raw(const uint8_t *p, size_t esz)
{
	uint64_t v = 0;
	memcpy(&v, p, esz); /* little-endian host */
	return v;
}

static void store_raw(uint8_t *p, size_t esz, uint64_t v)
{
	memcpy(p, &v, esz);
}

static int64_t sext(uint64_t v, size_t esz)
{
	unsigned sh = 64 - 8 * (unsigned)esz;
	return (int64_t)(v << sh) >> sh;
}

static uint64_t ref_elem(enum inca_dtype dt, enum inca_op op, uint64_t a, uint64_t b)
{
	size_t esz = inca_dtype_size(dt);
	uint64_t mask = esz == 8 ? UINT64_MAX : (1ull << (8 * esz)) - 1;
	switch (dt) {
	case INCA_FP16:
		return agg_fp32_to_fp16(
			agg_ref_f32(op, agg_fp16_to_fp32((uint16_t)a), agg_fp16_to_fp32((uint16_t)b)));
	case INCA_BF16:
		return agg_fp32_to_bf16(
			agg_ref_f32(op, agg_bf16_to_fp32((uint16_t)a), agg_bf16_to_fp32((uint16_t)b)));
	case INCA_FP32:
		return fbits(agg_ref_f32(op, ffrom((uint32_t)a), ffrom((uint32_t)b)));
	case INCA_FP64:
		return dbits(agg_ref_f64(op, dfrom(a), dfrom(b)));
	default:
		break;
	}
	if (is_signed_int(dt))
		return agg_ref_int(op, (uint64_t)sext(a, esz), (uint64_t)sext(b, esz), true) & mask;
	return agg_ref_int(op, a, b, false) & mask;
}

/* Sum/prod of two NaNs may carry either payload (the hardware picks an operand); any NaN is
 * right. Everything else must match bit for bit. */
static int same_result(enum inca_dtype dt, enum inca_op op, uint64_t got, uint64_t want)
{
	if (is_float(dt) && (op == INCA_SUM || op == INCA_PROD) && raw_is_nan(dt, want))
		return raw_is_nan(dt, got);
	return got == want;
}

/* ------------------------------------------------------------------ data generation */

static uint64_t gen_elem(struct util_rng *rng, enum inca_dtype dt)
{
	size_t esz = inca_dtype_size(dt);
	uint64_t r = util_rng_next(rng);
	unsigned kind = (unsigned)util_rng_below(rng, 8);
	uint64_t mask = esz == 8 ? UINT64_MAX : (1ull << (8 * esz)) - 1;

	if (!is_float(dt)) {
		static const uint64_t edge[] = {0, 1, 2, UINT64_MAX, 0x80, 0x7f, 0x8000, 0x7fff,
						0x80000000u, 0x7fffffffu, 0x8000000000000000ull,
						0x7fffffffffffffffull, 0xff, 0xffff};
		if (kind == 0) {
			uint64_t e = edge[util_rng_below(rng, sizeof edge / sizeof edge[0])];
			/* map "MIN/MAX of a wider type" onto this width's MIN/MAX too */
			if (util_rng_below(rng, 2))
				e = (util_rng_below(rng, 2) ? 1ull << (8 * esz - 1)
							    : (1ull << (8 * esz - 1)) - 1);
			return e & mask;
		}
		if (kind == 1) /* small values make prod chains and min/max ties interesting */
			return (uint64_t)((int64_t)util_rng_below(rng, 7) - 3) & mask;
		return r & mask;
	}

	/* Floats: mostly realistic values (sums round), plus edge values and raw bit patterns. */
	double v;
	if (kind < 4) {
		v = (util_rng_double(rng) - 0.5) * ldexp(1.0, (int)util_rng_below(rng, 20) - 6);
	} else if (kind < 6) {
		static const double edge[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1.0, -1.0,
					      65504.0, -65504.0, 0x1p-24, -0x1p-24, 0x1p-14, 0x1.ffcp-15,
					      0x1p-133, 0x1p-126, 0x1p-149, 0x1.fffffep127, 0x1p-1074,
					      0x1p-1022, 1e308, 3.0e38, 2048.0, 1.0 + 0x1p-11};
		v = edge[util_rng_below(rng, sizeof edge / sizeof edge[0])];
		if (util_rng_below(rng, 2))
			v = -v;
	} else {
		return r & mask; /* any encoding: NaN payloads, sNaNs, subnormals */
	}
	switch (dt) {
	case INCA_FP16:
		return agg_fp32_to_fp16((float)v);
	case INCA_BF16:
		return agg_fp32_to_bf16((float)v);
	case INCA_FP32:
		return fbits((float)v);
	default:
		return dbits(v);
	}
}

/* ------------------------------------------------------------------ kernel tests */

#define GUARD 32

/* One call of agg_reduce on count elements at dst/src offsets doff/soff (bytes, for
 * misalignment) inside guarded buffers; in_place uses dst as src. */
static void run_case(struct util_rng *rng, enum inca_dtype dt, enum inca_op op, size_t count,
		     size_t doff, size_t soff, int in_place, const char *isa)
{
	size_t esz = inca_dtype_size(dt), nb = count * esz;
	uint8_t *bd = malloc(nb + 2 * GUARD + 8), *bs = malloc(nb + 2 * GUARD + 8);
	uint8_t *want = malloc(nb + 1);
	if (!bd || !bs || !want) {
		CHECK_MSG(0, "out of memory");
		free(bd);
		free(bs);
		free(want);
		return;
	}
	memset(bd, 0xa5, nb + 2 * GUARD + 8);
	memset(bs, 0x5a, nb + 2 * GUARD + 8);
	uint8_t *d = bd + GUARD + doff, *s = in_place ? d : bs + GUARD + soff;
	for (size_t i = 0; i < count; i++) {
		store_raw(d + i * esz, esz, gen_elem(rng, dt));
		if (!in_place)
			store_raw(s + i * esz, esz, gen_elem(rng, dt));
	}
	for (size_t i = 0; i < count; i++)
		store_raw(want + i * esz, esz,
			  ref_elem(dt, op, load_raw(d + i * esz, esz), load_raw(s + i * esz, esz)));

	int rc = agg_reduce(d, s, count, dt, op);
	CHECK_MSG(rc == 0, "%s %s/%s count %zu: rc %d", isa, inca_dtype_name(dt), inca_op_name(op),
	      count, rc);
	long bad = 0;
	for (size_t i = 0; i < count; i++) {
		uint64_t g = load_raw(d + i * esz, esz), w = load_raw(want + i * esz, esz);
		if (!same_result(dt, op, g, w) && bad++ < 3)
			CHECK_MSG(0, "%s %s/%s count %zu%s elem %zu: got %llx want %llx", isa,
			      inca_dtype_name(dt), inca_op_name(op), count, in_place ? " in-place" : "",
			      i, (unsigned long long)g, (unsigned long long)w);
	}
	for (size_t i = 0; i < GUARD + doff; i++)
		CHECK_MSG(bd[i] == 0xa5, "guard before dst clobbered");
	for (size_t i = GUARD + doff + nb; i < nb + 2 * GUARD + 8; i++)
		CHECK_MSG(bd[i] == 0xa5, "%s %s/%s count %zu: guard after dst clobbered at +%zu", isa,
		      inca_dtype_name(dt), inca_op_name(op), count, i - (GUARD + doff + nb));
	if (!in_place)
		for (size_t i = 0; i < nb + 2 * GUARD + 8; i++)
			if (i < GUARD + soff || i >= GUARD + soff + nb)
				CHECK_MSG(bs[i] == 0x5a, "src buffer guard clobbered");
	free(bd);
	free(bs);
	free(want);
}

static void test_kernels(struct util_rng *rng, const char *isa)
{
	static const size_t counts[] = {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65,
					127, 129, 255, 257, 1000, 2048, 4097, 65539};
	for (int dt = 0; dt < INCA_DTYPE_COUNT; dt++)
		for (int op = 0; op < INCA_OP_COUNT; op++) {
			if (!inca_op_valid(dt, op))
				continue;
			for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
				size_t doff = (c * 3) % 8, soff = (c * 5 + 1) % 8;
				run_case(rng, dt, op, counts[c], doff, soff, 0, isa);
			}
			run_case(rng, dt, op, 1001, 3, 0, 1, isa);
			run_case(rng, dt, op, 1, 1, 0, 1, isa);
		}
}

/* Expected values written out by hand: the reference above could share a misconception. */
static void test_known_values(const char *isa)
{
	int8_t i8[2] = {127, -128}, j8[2] = {1, -1};
	CHECK_MSG(agg_reduce(i8, j8, 2, INCA_INT8, INCA_SUM) == 0 && i8[0] == -128 && i8[1] == 127,
	      "%s int8 wrap: %d %d", isa, i8[0], i8[1]);
	int32_t i32[3] = {INT32_MIN, INT32_MAX, -7}, j32[3] = {-1, 1, 3};
	CHECK_MSG(agg_reduce(i32, j32, 3, INCA_INT32, INCA_SUM) == 0 && i32[0] == INT32_MAX &&
		      i32[1] == INT32_MIN && i32[2] == -4,
	      "%s int32 wrap", isa);
	int32_t p32[2] = {INT32_MIN, 65536}, q32[2] = {-1, 65536};
	CHECK_MSG(agg_reduce(p32, q32, 2, INCA_INT32, INCA_PROD) == 0 && p32[0] == INT32_MIN && p32[1] == 0,
	      "%s int32 prod wrap", isa);
	uint16_t u16[2] = {65535, 300}, v16[2] = {65535, 300};
	CHECK_MSG(agg_reduce(u16, v16, 2, INCA_UINT16, INCA_PROD) == 0 && u16[0] == 1 &&
		      u16[1] == (uint16_t)90000,
	      "%s uint16 prod wrap", isa);
	int64_t i64[2] = {INT64_MIN, -5}, j64[2] = {INT64_MAX, 3};
	CHECK_MSG(agg_reduce(i64, j64, 2, INCA_INT64, INCA_MIN) == 0 && i64[0] == INT64_MIN && i64[1] == -5,
	      "%s int64 min", isa);
	uint64_t u64[1] = {UINT64_MAX}, v64[1] = {1};
	CHECK_MSG(agg_reduce(u64, v64, 1, INCA_UINT64, INCA_MAX) == 0 && u64[0] == UINT64_MAX,
	      "%s uint64 max", isa);
	int8_t m8[1] = {-1}, n8[1] = {1};
	CHECK_MSG(agg_reduce(m8, n8, 1, INCA_INT8, INCA_MAX) == 0 && m8[0] == 1, "%s int8 max", isa);
	uint8_t mu8[1] = {0xff}, nu8[1] = {1};
	CHECK_MSG(agg_reduce(mu8, nu8, 1, INCA_UINT8, INCA_MIN) == 0 && mu8[0] == 1, "%s uint8 min", isa);
	uint32_t x32[1] = {0xf0f0f0f0u}, y32[1] = {0xff00ff00u};
	CHECK_MSG(agg_reduce(x32, y32, 1, INCA_UINT32, INCA_BXOR) == 0 && x32[0] == 0x0ff00ff0u,
	      "%s bxor", isa);

	/* fp32 min/max: -0 < +0 in either order, NaN propagates from either side. */
	float a[6] = {-0.0f, 0.0f, NAN, 1.0f, -INFINITY, 2.0f};
	float b[6] = {0.0f, -0.0f, 1.0f, NAN, 5.0f, -3.0f};
	float mn[6], mx[6];
	memcpy(mn, a, sizeof a);
	memcpy(mx, a, sizeof a);
	CHECK_MSG(agg_reduce(mn, b, 6, INCA_FP32, INCA_MIN) == 0, "fp32 min rc");
	CHECK_MSG(agg_reduce(mx, b, 6, INCA_FP32, INCA_MAX) == 0, "fp32 max rc");
	CHECK_MSG(fbits(mn[0]) == 0x80000000u && fbits(mn[1]) == 0x80000000u, "%s min(+-0) = -0", isa);
	CHECK_MSG(fbits(mx[0]) == 0 && fbits(mx[1]) == 0, "%s max(+-0) = +0", isa);
	CHECK_MSG(isnan(mn[2]) && isnan(mn[3]) && isnan(mx[2]) && isnan(mx[3]), "%s NaN propagates", isa);
	CHECK_MSG(mn[4] == -INFINITY && mx[4] == 5.0f && mn[5] == -3.0f && mx[5] == 2.0f, "%s min/max", isa);
	double da[2] = {-0.0, NAN}, db[2] = {0.0, -1.0};
	CHECK_MSG(agg_reduce(da, db, 2, INCA_FP64, INCA_MIN) == 0 && signbit(da[0]) && isnan(da[1]),
	      "%s fp64 min", isa);

	/* fp16: 2048 + 1 ties to even 2048; 2048 + 3 ties to 2052; overflow to inf; subnormals. */
	uint16_t h[5] = {0x6800, 0x6800, 0x7bff, 0x0001, 0x3c00};
	uint16_t g[5] = {0x3c00, 0x4200, 0x7bff, 0x0001, 0x1000}; /* 1, 3, max, min sub, 2^-11 */
	CHECK_MSG(agg_reduce(h, g, 5, INCA_FP16, INCA_SUM) == 0 && h[0] == 0x6800 && h[1] == 0x6802 &&
		      h[2] == 0x7c00 && h[3] == 0x0002 && h[4] == 0x3c00,
	      "%s fp16 sum %04x %04x %04x %04x %04x", isa, h[0], h[1], h[2], h[3], h[4]);
	/* bf16: 256 + 1 ties to even 256; 256 + 3 -> 260 */
	uint16_t bh[2] = {0x4380, 0x4380}, bg[2] = {0x3f80, 0x4040};
	CHECK_MSG(agg_reduce(bh, bg, 2, INCA_BF16, INCA_SUM) == 0 && bh[0] == 0x4380 && bh[1] == 0x4382,
	      "%s bf16 sum %04x %04x", isa, bh[0], bh[1]);
	uint16_t zh[2] = {0x8000, 0x0000}, zg[2] = {0x0000, 0x8000};
	CHECK_MSG(agg_reduce(zh, zg, 2, INCA_FP16, INCA_MIN) == 0 && zh[0] == 0x8000 && zh[1] == 0x8000,
	      "%s fp16 min(+-0)", isa);
}

/* fp16 steps are computed in fp32 and rounded back. Because 24 >= 2*11 + 2 that double
 * rounding is innocuous: the result must equal the correctly rounded exact sum / product. */
static void test_fp16_correct_rounding(struct util_rng *rng)
{
	enum { N = 4096 };
	uint16_t x[N], y[N], s[N], p[N];
	for (int round = 0; round < 16; round++) {
		for (int i = 0; i < N; i++) {
			do
				x[i] = (uint16_t)util_rng_next(rng);
			while ((x[i] & 0x7fff) >= 0x7c00);
			do
				y[i] = (uint16_t)util_rng_next(rng);
			while ((y[i] & 0x7fff) >= 0x7c00);
			if (i % 4 == 0) /* near-equal exponents make ties likely */
				y[i] = (uint16_t)((x[i] & 0xfc00) | (y[i] & 0x83ff));
		}
		memcpy(s, x, sizeof x);
		memcpy(p, x, sizeof x);
		CHECK_MSG(agg_reduce(s, y, N, INCA_FP16, INCA_SUM) == 0, "rc");
		CHECK_MSG(agg_reduce(p, y, N, INCA_FP16, INCA_PROD) == 0, "rc");
		for (int i = 0; i < N; i++) {
			double a = agg_fp16_to_fp32(x[i]), b = agg_fp16_to_fp32(y[i]);
			uint16_t ws = ref_to_fp16(a + b), wp = ref_to_fp16(a * b); /* exact in double */
			if (a + b == 0) /* exact zero sum: +0 unless both -0 (round to nearest) */
				ws = (signbit(a) && signbit(b)) ? 0x8000 : 0;
			CHECK_MSG(s[i] == ws, "fp16 %04x + %04x = %04x, want %04x", x[i], y[i], s[i], ws);
			CHECK_MSG(p[i] == wp, "fp16 %04x * %04x = %04x, want %04x", x[i], y[i], p[i], wp);
		}
	}
}

static void test_invalid(void)
{
	uint32_t a[4] = {0}, b[4] = {0};
	for (int dt = INCA_FP16; dt <= INCA_FP64; dt++)
		for (int op = INCA_BAND; op <= INCA_BXOR; op++) {
			CHECK_MSG(agg_reduce(a, b, 1, dt, op) == -EINVAL, "%d/%d must be invalid", dt, op);
			CHECK_MSG(!inca_op_valid(dt, op), "inca_op_valid(%d,%d)", dt, op);
		}
	CHECK_MSG(agg_reduce(a, b, 1, INCA_DTYPE_COUNT, INCA_SUM) == -EINVAL, "bad dtype");
	CHECK_MSG(agg_reduce(a, b, 1, (enum inca_dtype)-1, INCA_SUM) == -EINVAL, "negative dtype");
	CHECK_MSG(agg_reduce(a, b, 1, INCA_INT32, INCA_OP_COUNT) == -EINVAL, "bad op");
	CHECK_MSG(agg_reduce(a, b, 1, INCA_INT32, (enum inca_op)-1) == -EINVAL, "negative op");
	CHECK_MSG(agg_reduce(a, b, 0, INCA_FP32, INCA_BAND) == -EINVAL, "invalid pair, count 0");
	CHECK_MSG(agg_reduce(NULL, NULL, 0, INCA_INT32, INCA_SUM) == 0, "count 0 touches nothing");
	CHECK_MSG(agg_reduce(NULL, b, 1, INCA_INT32, INCA_SUM) == -EINVAL, "NULL dst");
	CHECK_MSG(agg_reduce(a, NULL, 1, INCA_INT32, INCA_SUM) == -EINVAL, "NULL src");
	CHECK_MSG(agg_reduce(a, a + 1, 2, INCA_INT32, INCA_SUM) == -EINVAL, "partial overlap");
	CHECK_MSG(agg_reduce(a + 1, a, 2, INCA_INT32, INCA_SUM) == -EINVAL, "partial overlap");
	CHECK_MSG(agg_reduce(a, a + 2, 2, INCA_INT32, INCA_SUM) == 0, "adjacent is fine");
	CHECK_MSG(agg_reduce(a, b, SIZE_MAX / 2, INCA_INT32, INCA_SUM) == -EINVAL, "size overflow");
	int n = 0;
	for (int dt = 0; dt < INCA_DTYPE_COUNT; dt++)
		for (int op = 0; op < INCA_OP_COUNT; op++)
			n += inca_op_valid(dt, op);
	CHECK_MSG(n == 8 * 7 + 4 * 4, "valid pairs %d", n);
}

static void test_names(void)
{
	static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};
	for (int dt = 0; dt < INCA_DTYPE_COUNT; dt++) {
		CHECK_MSG(inca_dtype_size(dt) == sizes[dt], "size of %d", dt);
		CHECK_MSG(inca_dtype_parse(inca_dtype_name(dt)) == dt, "dtype name round trip %d", dt);
	}
	for (int op = 0; op < INCA_OP_COUNT; op++)
		CHECK_MSG(inca_op_parse(inca_op_name(op)) == op, "op name round trip %d", op);
	CHECK_MSG(strcmp(inca_dtype_name(INCA_FP32), "fp32") == 0 && strcmp(inca_op_name(INCA_SUM), "sum") == 0,
	      "names");
	CHECK_MSG(strcmp(inca_dtype_name(INCA_DTYPE_COUNT), "?") == 0, "bad dtype name");
	CHECK_MSG(strcmp(inca_op_name((enum inca_op)-1), "?") == 0, "bad op name");
	CHECK_MSG(inca_dtype_size(INCA_DTYPE_COUNT) == 0, "bad dtype size");
	CHECK_MSG(inca_dtype_parse("float") == -EINVAL && inca_dtype_parse(NULL) == -EINVAL, "parse");
	CHECK_MSG(inca_op_parse("SUM") == -EINVAL && inca_op_parse(NULL) == -EINVAL, "op parse");
}

int main(void)
{
	struct util_rng rng;
	util_rng_seed(&rng, 0x1ca5eedull);

	test_names();
	test_invalid();
	test_conversions(&rng);

	static const char *const isa_name[] = {"baseline", "avx2", "avx512"};
	int ran = 0;
	for (int isa = 0; isa < 3; isa++) {
		if (agg__reduce_set_isa(isa) != isa) {
			fprintf(stderr, "kernel set %s not available here: skipped\n", isa_name[isa]);
			continue;
		}
		test_known_values(isa_name[isa]);
		test_kernels(&rng, isa_name[isa]);
		test_fp16_correct_rounding(&rng);
		ran++;
	}
	agg__reduce_set_isa(-1);
	CHECK_MSG(ran >= 1, "no kernel set ran");

	printf("reduce_test: all checks passed (%d kernel set(s))\n", ran);
	return 0;
}
