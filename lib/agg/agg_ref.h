/* lib/agg/agg_ref.h: the scalar reference of every reduction op, one element at a time, written
 * with branches so it shares nothing with the vector kernels of reduce.c. The oracle of the
 * tests (reduce_test, ring_test, host_coll_test, tools/check.c); the data path never uses it.
 * A new op in lib/wire/dtype.h is a compile error here (-Wswitch) until it has a case. */
#ifndef INCA_AGG_REF_H
#define INCA_AGG_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "inca/inca.h"

/* a OP b for an integer lane held in 64 bits; signed lanes must come sign-extended (is_signed
 * orders min/max). The caller keeps the low bits of the lane width: sum and product modulo
 * 2^64 have the right low bits for every narrower width. */
static inline uint64_t agg_ref_int(enum inca_op op, uint64_t a, uint64_t b, bool is_signed)
{
	bool a_lt_b = is_signed ? (int64_t)a < (int64_t)b : a < b;

	switch (op) {
	case INCA_SUM:
		return a + b;
	case INCA_PROD:
		return a * b;
	case INCA_MIN:
		return a_lt_b ? a : b;
	case INCA_MAX:
		return a_lt_b ? b : a;
	case INCA_BAND:
		return a & b;
	case INCA_BOR:
		return a | b;
	case INCA_BXOR:
		return a ^ b;
	case INCA_OP_COUNT:
		break;
	}
	return 0;
}

/* a OP b in the type T (float: fp32, and fp16/bf16 widened to it; double: fp64). min/max are
 * IEEE 754-2019 minimum/maximum with the NaN precedence documented in reduce.c: a NaN operand
 * wins (the first one if both are), and -0 < +0. Integer-only ops give NaN. */
#define AGG__REF_FLOAT(NAME, T)                                                  \
	static inline T NAME(enum inca_op op, T a, T b)                          \
	{                                                                        \
		switch (op) {                                                    \
		case INCA_SUM:                                                   \
			return a + b;                                            \
		case INCA_PROD:                                                  \
			return a * b;                                            \
		case INCA_MIN:                                                   \
		case INCA_MAX: {                                                 \
			bool is_min = op == INCA_MIN;                            \
			if (isnan(a))                                            \
				return a;                                        \
			if (isnan(b))                                            \
				return b;                                        \
			if (a == b) /* equal, possibly +-0 */                    \
				return (signbit(a) != 0) == is_min ? a : b;      \
			return (a < b) == is_min ? a : b;                        \
		}                                                                \
		case INCA_BAND:                                                  \
		case INCA_BOR:                                                   \
		case INCA_BXOR:                                                  \
		case INCA_OP_COUNT:                                              \
			break;                                                   \
		}                                                                \
		return (T)NAN;                                                   \
	}
AGG__REF_FLOAT(agg_ref_f32, float)
AGG__REF_FLOAT(agg_ref_f64, double)

#endif
