/* tools/check: deterministic AllReduce test data and verification. Every rank derives its
 * buffer from (seed, iteration, rank, element index), so every rank can compute the exact
 * expected result of the whole reduction locally, without communication. */
#ifndef INCA_TOOLS_CHECK_H
#define INCA_TOOLS_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "inca/inca.h"

enum check_mode {
	/* Integers: random full-width bits, reference in wrap-around arithmetic (exact).
	 * Floats: values whose reductions are exact in any order (multiples of 1/16 or small
	 * integers for sum, +-2^{-1,0,1} for prod, random finite normals for min/max); the
	 * reference is computed in double (sums: in integer units), independently of lib/agg. Any reduction order must
	 * give these bits. */
	CHECK_EXACT = 0,
	/* Floats: random values that do round (not exact). The reference is agg_reduce applied
	 * in rank order (rank 0, then 1, ...): what a deterministic-mode switch must reproduce
	 * bit for bit. Integers: as CHECK_EXACT. */
	CHECK_RANK_ORDER = 1,
};

struct check_spec {
	enum inca_dtype dt;
	enum inca_op op;
	enum check_mode mode;
	int nranks;
	uint64_t seed;
	uint64_t iter; /* varies the data per call so a stale result is caught */
};

/* Largest number of ranks for which CHECK_EXACT float data stays exact for every type. */
#define CHECK_EXACT_MAX_RANKS 14

/* Write rank's input elements [first, first + count) into buf (buf[0] is element `first`). */
void check_fill(const struct check_spec *s, int rank, void *buf, size_t first, size_t count);

/* Compare got[0..count) (elements [first, first+count)) with the expected reduction over all
 * s->nranks ranks, bitwise. Returns the number of wrong elements; *first_bad (may be NULL)
 * receives the index of the first wrong element (relative to got) or SIZE_MAX. */
size_t check_verify(const struct check_spec *s, const void *got, size_t first, size_t count,
		    size_t *first_bad);

/* Expected value of one element, written to out (element size bytes). */
void check_expected(const struct check_spec *s, size_t index, void *out);

/* Format element `index` of buf as text (for error messages). */
void check_format(enum inca_dtype dt, const void *buf, size_t index, char *out, size_t cap);

/* Reference conversions (round to nearest even), independent of lib/agg. mbits = stored
 * mantissa bits: fp16 (10, bias 15, 5 exponent bits), bf16 (7, bias 127, 8 exponent bits). */
uint16_t check_double_to_fp16(double d);
uint16_t check_double_to_bf16(double d);
double check_fp16_to_double(uint16_t h);
double check_bf16_to_double(uint16_t h);

/* ---- Data-movement collectives (inca-bench) --------------------------------------------
 * Broadcast, AllGather, AllToAll, Gather and Scatter only move data: every block is named by
 * (source rank, destination rank or -1 for "every rank") and its bytes derive from
 * (seed, iter, src, dst, byte index), so any receiver knows what each block must hold. */
void check_fill_block(uint64_t seed, uint64_t iter, int src, int dst, void *buf, size_t bytes);
/* Number of wrong elements (es bytes each; a trailing partial element counts as one) of got
 * against block (src, dst). */
size_t check_verify_block(uint64_t seed, uint64_t iter, int src, int dst, const void *got,
			  size_t bytes, size_t es);

#endif
