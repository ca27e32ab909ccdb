/* lib/agg/engine_test_util.h: helpers shared by the engine's unit and simulation tests only:
 * the typed check of a verdict, an RNG, wire-order bit-string helpers written
 * independently of the engine's own, and a packet builder. Not part of any library. */
#ifndef INCA_ENGINE_TEST_UTIL_H
#define INCA_ENGINE_TEST_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "util/test_check.h"
#include "util/util.h"

#define CHECK_VERDICT(got, want)                                                          \
	do {                                                                              \
		enum agg_verdict g_ = (got), w_ = (want);                                 \
		if (g_ != w_)                                                             \
			test_fail(__FILE__, __LINE__, "verdict %s, expected %s",          \
				  agg_verdict_name(g_), agg_verdict_name(w_));            \
	} while (0)

/* splitmix64 (lib/util): a stateless hash and a tiny generator. */
static inline uint64_t tu_mix(uint64_t x)
{
	return util_hash64(x);
}

struct tu_rng {
	uint64_t s;
};

static inline uint64_t tu_next(struct tu_rng *r)
{
	return util_splitmix64(&r->s);
}

static inline uint64_t tu_below(struct tu_rng *r, uint64_t n)
{
	return tu_next(r) % n;
}

static inline double tu_double(struct tu_rng *r)
{
	return (double)(tu_next(r) >> 11) / 9007199254740992.0;
}

static inline void tu_shuffle(struct tu_rng *r, size_t *v, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)tu_below(r, i);
		size_t x = v[i - 1];
		v[i - 1] = v[j];
		v[j] = x;
	}
}

/* Bit-strings in wire order, bit by bit (deliberately naive: an independent reference). */
static inline void tu_set(uint8_t *bits, size_t len, unsigned bp)
{
	bits[len - 1 - (bp - 1) / 8] |= (uint8_t)(1u << ((bp - 1) % 8));
}

static inline int tu_test(const uint8_t *bits, size_t len, unsigned bp)
{
	return (bits[len - 1 - (bp - 1) / 8] >> ((bp - 1) % 8)) & 1;
}

static inline unsigned tu_popcount(const uint8_t *bits, size_t len)
{
	unsigned n = 0;
	for (size_t i = 0; i < len; i++)
		n += (unsigned)__builtin_popcount(bits[i]);
	return n;
}

static inline uint8_t tu_bsl_code(unsigned bsl_bits)
{
	uint8_t c = 1;
	while ((64u << (c - 1)) < bsl_bits)
		c++;
	return c;
}

static inline size_t tu_esize(unsigned dt)
{
	static const uint8_t sz[] = { 1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8 };
	return dt < sizeof sz ? sz[dt] : 0;
}

/* A packet with its own storage; pkt's pointers point into it (do not copy the struct by
 * value without tu_pkt_fix). */
#define TU_BITS_MAX 512
#define TU_DATA_MAX 4096
struct tu_pkt {
	struct wire_pkt pkt;
	uint8_t bits[TU_BITS_MAX];
	uint8_t data[TU_DATA_MAX];
};

static inline void tu_pkt_fix(struct tu_pkt *p)
{
	p->pkt.inca.bits = p->bits;
	p->pkt.data = p->data;
}

/* Upward contribution of BFR-id `bfr` (its bit only) for (slot, round); data zeroed. */
static inline void tu_pkt_up(struct tu_pkt *p, const struct agg_tree_cfg *c, uint16_t bfr,
			     uint16_t slot, uint32_t rnd, enum inca_dtype dt, enum inca_op op,
			     uint16_t count)
{
	memset(p, 0, sizeof *p);
	size_t len = c->bsl_bits / 8;
	p->pkt.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
	p->pkt.bth.pkey = WIRE_PKEY_DEFAULT;
	p->pkt.reth.rkey = c->rkey;
	p->pkt.reth.va = (uint64_t)slot * 4096 + (uint64_t)rnd * 4096 * c->nslots;
	p->pkt.imm = (uint32_t)(rnd * c->nslots + slot);
	p->pkt.inca.version = WIRE_INCA_VERSION;
	p->pkt.inca.coll = WIRE_COLL_ALLREDUCE;
	p->pkt.inca.dtype = (uint8_t)dt;
	p->pkt.inca.op = (uint8_t)op;
	p->pkt.inca.tree_id = c->tree_id;
	p->pkt.inca.slot = slot;
	p->pkt.inca.round = rnd;
	p->pkt.inca.bfr_id = bfr;
	p->pkt.inca.bsl_code = tu_bsl_code(c->bsl_bits);
	p->pkt.inca.si = c->si;
	p->pkt.inca.count = count;
	if (bfr) {
		unsigned k = (unsigned)bfr - 1;
		if (k / c->bsl_bits == c->si)
			tu_set(p->bits, len, k % c->bsl_bits + 1);
	}
	p->pkt.data_len = (uint32_t)(count * tu_esize(dt));
	tu_pkt_fix(p);
}

#endif
