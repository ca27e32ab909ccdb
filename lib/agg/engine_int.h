/* lib/agg/engine_int.h: private to the aggregation engine (engine.c, engine_send.c,
 * engine_path.c): the tree and version layout, the bit-string helpers and the functions the
 * three files share. Nothing outside lib/agg includes it; the API is agg.h. */
/*
 * Layout and costs.
 * - Each owned slot has two versions, found by the round they hold. A version holds its round,
 *   state, the meta of its first packet, a contributor bitmap `seen` (bsl/8 bytes) and an
 *   accumulator of slot_bytes. A member sends round r + 1 only after the result of r, so a
 *   slot's rounds move inside a window of its top round (agg__admit): no timers.
 * - Per packet: a few word passes over the bit-string (P-BM vs A-BM, vs seen, OR into seen),
 *   one reduce or memcpy of the data. No allocation, no locks; replication costs one
 *   bit-string AND per copy. Everything is preallocated by agg_tree_create.
 * - Deterministic mode keeps every contribution of a version (indexed by the member index of
 *   its lowest bit) and folds them in bit-position order at completion: memory is
 *   nslots * 2 * (1 + popcount(A-BM)) * slot_bytes, e.g. 256 slots x 64 members x 4 KiB =
 *   130 MiB (vs 2 MiB normally), and completion costs one reduce per contribution, the same
 *   total work as streaming, just later.
 * - check_sender trusts the BIFT, which describes downward routes. It fits trees whose
 *   upward ingress equals the downward neighbour (members attached directly, or results
 *   replicated through the same child switches); do not enable it where packets are forwarded
 *   through a switch that is not on the result path.
 */
#ifndef INCA_AGG_ENGINE_INT_H
#define INCA_AGG_ENGINE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "agg/agg.h"

/* Version states. A version is one round of one slot. */
enum agg__state {
	AGG__EMPTY = 0,  /* never used since create */
	AGG__COLLECTING, /* contributions arriving */
	AGG__UP_SENT,    /* non-root: all in, aggregate sent to the parent, no result seen yet */
	AGG__COMPLETE,   /* result known (root: computed; non-root: received from the parent) */
};

static inline bool agg__is_pending(uint8_t state)
{
	return state == AGG__COLLECTING || state == AGG__UP_SENT;
}

#define AGG__NO_GROUP UINT16_MAX
#define AGG__NOLINK UINT32_MAX

/* Repair list (docs/protocol.md "Repair notices"): versions collecting that no notice went
 * out for yet, in arrival order, which is the order of the chunk sequence g (ImmDt) up to
 * losses. */
enum agg__list {
	AGG__L_NONE = 0,
	AGG__L_COL,
	AGG__L_COUNT
};
#define AGG__ALIGN 64
#define AGG__FWD_DATA_MAX 4096 /* IB payload limit: nothing forwarded can carry more */
#define AGG__RPACE_NS 1000000ull /* clock pacing of re-sends and notices without credit */

/* Per-version metadata. `seen` and `heads` bitmaps live in separate arrays (bsl/8 bytes each)
 * so this stays small and cache-friendly. */
struct agg__ver {
	uint32_t rnd;
	uint8_t state;
	uint8_t coll, dtype, op;
	uint16_t count;
	uint16_t nseen; /* popcount(seen): P-BMs are disjoint subsets of A-BM, so
			 * nseen == popcount(A-BM) <=> seen == A-BM */
	uint16_t owner; /* owner BFR-id of reduce/bcast/allgather/reduce-scatter (wire.h) */
	uint32_t imm;
	uint32_t data_len;
	uint64_t va;
	uint32_t lprev, lnext; /* repair list links (version indices) */
	uint8_t list;          /* enum agg__list */
	uint8_t repaired;      /* a retransmission went into this round: its result and
				* aggregate carry WIRE_F_RETX, so members take no RTT sample */
	uint8_t wave;          /* non-root: the aggregate was re-sent up for a parent's notice;
				* duplicates from below join that wave (see `req`) */
	uint8_t cand;          /* on probation (agg__admit, AGG__CAND_*): the round is outside
				* the slot's window, or no round of the slot completed since it
				* started; it gives way to any other round until it completes */
};

/* A distinct BIFT neighbour: one copy of a replicated packet goes to each. fbm is the union of
 * the F-BMs (and bit positions) of every entry through that neighbour, so a neighbour gets
 * exactly one copy even if the configured F-BMs were narrower. */
struct agg__group {
	uint32_t nbr;
	uint8_t *fbm;
};

struct agg_tree {
	struct agg_tree_cfg cfg; /* copy; abm / bift / bift[i].fbm point at our own copies */
	size_t bsl_bytes;        /* bit-string bytes, a multiple of 8 */
	size_t nwords;           /* bsl_bytes / 8 */
	uint8_t bsl_code;
	unsigned nmembers;       /* popcount(A-BM) */

	uint8_t *abm;
	struct agg_bift_entry *bift;
	uint8_t *bift_fbm;  /* nbift * bsl_bytes, as configured */
	uint16_t *bp_group; /* [bsl_bits + 1]: bit position -> group, AGG__NO_GROUP if none */
	uint16_t *bp_member; /* [bsl_bits + 1]: deterministic mode: bit position -> member index */
	uint8_t *rcredit;    /* [bsl_bits + 1]: result re-send credit of the sender whose
			      * lowest bit this is (see agg__rearn) */
	uint16_t *rdenied;   /* [bsl_bits + 1]: that sender's duplicates left unanswered since it
			      * last earned credit (see agg__resend_ok) */
	uint64_t *rpaced_ns; /* [bsl_bits + 1]: when that sender last got a re-send by the clock */
	uint64_t now_ns;     /* agg_tree_clock; 0: none given */
	uint8_t *upsets;     /* cfg.nupsets * bsl_bytes, AND A-BM */
	uint16_t pkey;
	struct agg__group *groups;
	uint8_t *group_fbm; /* ngroups * bsl_bytes */
	size_t ngroups;
	size_t max_sends;

	/* Slot pool: only the slots of this shard (agg__check_payload maps slot -> local index). */
	uint32_t nlocal;
	uint16_t nshards; /* >= 1 */
	struct agg__ver *vers; /* [nlocal * 2] */
	uint8_t *seen;         /* [nlocal * 2 * bsl_bytes] */
	uint8_t *req;          /* non-root: members that asked again since the last re-send up */
	uint8_t *heads;        /* deterministic: lowest bit of each contribution, same shape */
	uint8_t *data;         /* [nlocal * 2 * ver_stride] */
	size_t buf_stride;     /* slot_bytes rounded up to AGG__ALIGN */
	size_t ver_stride;     /* accumulator + (deterministic) one buffer per member */

	/* Output scratch, valid until the next input call. */
	uint8_t *send_bits; /* max_sends * bsl_bytes */
	uint8_t *rem_bits;  /* bsl_bytes: bits still to replicate */
	uint8_t *fwd_data;  /* AGG__FWD_DATA_MAX: copy of a forwarded packet's data */

	struct agg_tree_stats st;
	uint32_t npending; /* versions COLLECTING or UP_SENT (agg_tree_pending) */

	/* Repair notices. The list holds version indices, head = oldest. A notice costs one
	 * credit and every absorbed contribution or result from the parent earns one (at most
	 * max_sends banked), so the notices a tree sends never outnumber the packets that made
	 * progress in it: no input, hostile or not, is amplified into notices. Without credit, a
	 * duplicate of a round still collecting may still draw one notice per AGG__RPACE_NS
	 * (npaced_ns, by agg_tree_clock): when every member waits for the same lost contribution
	 * nothing makes progress and nothing earns credit (a worker of a multi-threaded switch
	 * whose blocks all stall, the end of a call), and the waiting members' duplicates must
	 * still reach the one that can repair it. A version leaves the list when noticed or no
	 * longer collecting. */
	uint32_t lhead[AGG__L_COUNT], ltail[AGG__L_COUNT];
	uint32_t credit;
	uint64_t npaced_ns;
	uint32_t epoch; /* current job epoch, 0 = none seen */
};

/* ---------------------------------------------------------------- small helpers */

/* Bit-strings are handled a 64-bit word at a time; byte order inside a word does not matter for
 * AND/OR/popcount as long as every operand is loaded the same way. Packet bit-strings may be
 * unaligned, hence memcpy (which compiles to a plain load). */
static inline uint64_t agg__ld(const uint8_t *p, size_t w)
{
	uint64_t x;
	memcpy(&x, p + 8 * w, 8);
	return x;
}

static inline void agg__st(uint8_t *p, size_t w, uint64_t x)
{
	memcpy(p + 8 * w, &x, 8);
}

/* RFC 8279 numbering: bit position 1 is the least significant bit of the last byte. */
static inline void agg__set(uint8_t *bits, size_t len, unsigned bp)
{
	bits[len - 1 - (bp - 1) / 8] |= (uint8_t)(1u << ((bp - 1) & 7));
}

/* Lowest set bit position >= from (1-based), 0 if none. Skips zero words, so a sweep over the
 * whole string costs O(len) plus O(1) per set bit. */
static inline unsigned agg__next(const uint8_t *bits, size_t len, unsigned from)
{
	unsigned nbits = (unsigned)len * 8;
	while (from >= 1 && from <= nbits) {
		size_t byte = len - 1 - (from - 1) / 8;
		unsigned b = bits[byte] >> ((from - 1) & 7);
		if (b)
			return from + (unsigned)__builtin_ctz(b);
		from = ((from - 1) / 8 + 1) * 8 + 1; /* first bit of the next byte */
		/* whole zero words: byte index counts down, words are 8-aligned byte groups */
		while (from <= nbits && ((from - 1) / 8) % 8 == 0) {
			size_t lo = len - 1 - (from - 1) / 8 - 7; /* first byte of this word */
			if (agg__ld(bits, lo / 8) != 0)
				break;
			from += 64;
		}
	}
	return 0;
}

static inline uint16_t agg__bp_of(uint16_t bfr_id, unsigned bsl_bits, uint8_t si)
{
	if (bfr_id == 0)
		return 0;
	unsigned k = (unsigned)bfr_id - 1;
	if (k / bsl_bits != si)
		return 0;
	return (uint16_t)(k % bsl_bits + 1);
}

/* Per-chunk destinations (docs/protocol.md §4.1). Bcast and allgather: only the owner's
 * contribution carries data (the others send header-only ones), and every destination but the
 * owner gets the data. Reduce and reduce-scatter: everyone contributes data and only the owner
 * gets the result data. Everyone else gets a header-only result: the acknowledgement that
 * frees the slot. */
static inline bool agg__from_owner(uint8_t coll)
{
	return coll == WIRE_COLL_BCAST || coll == WIRE_COLL_ALLGATHER;
}

static inline bool agg__to_owner(uint8_t coll)
{
	return coll == WIRE_COLL_REDUCE || coll == WIRE_COLL_REDUCE_SCATTER;
}

/* ---------------------------------------------------------------- per-version storage */

/* Output cursor for one input call: bounded by min(cap, max_sends), so the per-send
 * bit-string storage (max_sends strings) can never overflow. */
struct agg__out {
	struct agg_send *v;
	size_t cap, n;
};

static inline size_t agg__vidx(const struct agg_tree *t, const struct agg__ver *v)
{
	return (size_t)(v - t->vers);
}

static inline uint8_t *agg__seen(struct agg_tree *t, const struct agg__ver *v)
{
	return t->seen + agg__vidx(t, v) * t->bsl_bytes;
}

static inline uint8_t *agg__req(struct agg_tree *t, const struct agg__ver *v)
{
	return t->req + agg__vidx(t, v) * t->bsl_bytes;
}

static inline uint8_t *agg__heads(struct agg_tree *t, const struct agg__ver *v)
{
	return t->heads + agg__vidx(t, v) * t->bsl_bytes;
}

/* Buffer 0 is the accumulator / result; deterministic mode: buffer 1 + member index holds
 * that member's (or sub-tree's) contribution. */
static inline uint8_t *agg__buf(struct agg_tree *t, const struct agg__ver *v, size_t i)
{
	return t->data + agg__vidx(t, v) * t->ver_stride + i * t->buf_stride;
}

/* Chunk a was sent before chunk b (ImmDt = g mod 2^32, compared with wrap-around). */
static inline bool agg__before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/* Sharding (agg_tree_cfg.nshards): a shard owns the slot blocks (WIRE_SLOT_BLOCK slots each)
 * with block % nshards == shard, stored block after block: local index li. */
static inline bool agg__slot_owned(const struct agg_tree *t, uint16_t slot)
{
	return t->nshards == 1 || (slot / WIRE_SLOT_BLOCK) % t->nshards == t->cfg.shard;
}

static inline uint32_t agg__local_of(const struct agg_tree *t, uint16_t slot)
{
	if (t->nshards == 1)
		return slot;
	return (uint32_t)(slot / WIRE_SLOT_BLOCK / t->nshards * WIRE_SLOT_BLOCK + slot % WIRE_SLOT_BLOCK);
}

static inline uint16_t agg__slot_of(const struct agg_tree *t, const struct agg__ver *v)
{
	uint32_t li = (uint32_t)(agg__vidx(t, v) / 2);

	if (t->nshards == 1)
		return (uint16_t)li;
	return (uint16_t)((li / WIRE_SLOT_BLOCK * t->nshards + t->cfg.shard) * WIRE_SLOT_BLOCK +
			  li % WIRE_SLOT_BLOCK);
}

/* Round windows (docs/protocol.md §8 "Round window"). A member sends round r + 1 of a slot
 * only after the result of round r, so the slot's live rounds are its top round T (the later
 * of its two versions that are not on probation) and T - 1, and the one round that may start
 * is T + 1, once T is complete here (or, at a non-root, its aggregate went up: results may
 * reach the members without passing here). Any other round is either dropped (T still collecting:
 * the version holding T - 1 may still be needed by a member that lost its result) or held on
 * probation in the version not holding T (T complete or its aggregate up: every member below
 * sent T, so all of them have T - 1's result). A round on probation collects like any other,
 * but gives way to every other round until it completes, and only its completion (every
 * member's contribution, or the parent's result) makes it the slot's top round. So no single
 * packet moves a slot backwards or far forward, a slot that never completed a round follows
 * the next real contribution, and a new job whose rounds are unrelated to the old job's
 * (another round base, docs/protocol.md §8) takes over the slots by completing its rounds.
 * Rounds compare as serial numbers (32-bit wrap-around). */
static inline int32_t agg__rdiff(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b);
}

/* Rounds this close to the top round T but outside the window are this job's (a late
 * duplicate, a member that skipped rounds): dropped, never held on probation. Only rounds
 * farther away can be another job's (docs/protocol.md §8 "Job epochs"). */
#define AGG__NEAR 16

/* Probation kinds (agg__ver.cand): the first round of a slot that never completed one, or a
 * far round beside a complete top round. Only the first kind is repaired with notices: a
 * far round is more likely forged or stale than a new job's. */
#define AGG__CAND_FRESH 1
#define AGG__CAND_FAR 2

/* ---------------------------------------------------------------- engine.c: admission, versions */

enum agg_verdict agg__check_payload(const struct agg_tree *t, const struct wire_pkt *p,
				    uint32_t *li);
struct agg__ver *agg__find(struct agg_tree *t, uint32_t li, uint32_t rnd);
enum agg_verdict agg__admit(struct agg_tree *t, uint32_t li, uint32_t rnd, bool result,
			    struct agg__ver **out, uint8_t *cand);
void agg__clear(struct agg_tree *t, struct agg__ver *v);
void agg__epoch_check(struct agg_tree *t, const struct wire_pkt *p);
void agg__rearn(struct agg_tree *t, unsigned bp);
bool agg__resend_ok(struct agg_tree *t, unsigned bp);
bool agg__meta_eq_nocount(const struct agg__ver *v, const struct wire_pkt *p);
bool agg__meta_eq(const struct agg__ver *v, const struct wire_pkt *p);
void agg__reset(struct agg_tree *t, struct agg__ver *v, const struct wire_pkt *p,
		uint8_t cand);

/* ---------------------------------------------------------------- engine_send.c: sends, notices */

size_t agg__replicate(struct agg_tree *t, struct agg__out *o, const struct agg__ver *v,
		      uint16_t slot, bool resend);
bool agg__send_up(struct agg_tree *t, struct agg__out *o, const struct agg__ver *v,
		  uint16_t slot);
void agg__unlist(struct agg_tree *t, struct agg__ver *v);
void agg__enlist(struct agg_tree *t, struct agg__ver *v, unsigned l);
void agg__earn(struct agg_tree *t);
void agg__earn_paced(struct agg_tree *t);
/* The clock pacing of re-sends and notices: true (and *stamp = now) if the tree has a clock and
 * *stamp is 0 or at least AGG__RPACE_NS old. */
static inline bool agg__paced(const struct agg_tree *t, uint64_t *stamp)
{
	if (!t->now_ns || (*stamp && t->now_ns - *stamp < AGG__RPACE_NS))
		return false;
	*stamp = t->now_ns;
	return true;
}
size_t agg__notice(struct agg_tree *t, struct agg__out *o, const struct agg__ver *v,
		   const uint8_t *want);
void agg__notice_older(struct agg_tree *t, struct agg__out *o, uint32_t imm);
void agg__open_wave(struct agg_tree *t, struct agg__ver *v);

/* ---------------------------------------------------------------- engine_path.c: input paths */

enum agg_verdict agg__input_up(struct agg_tree *t, const struct wire_pkt *p,
			       uint32_t ingress, struct agg__out *o);
enum agg_verdict agg__input_down(struct agg_tree *t, const struct wire_pkt *p,
				 uint32_t ingress, struct agg__out *o);
enum agg_verdict agg__input_nack(struct agg_tree *t, const struct wire_pkt *p,
				 uint32_t ingress, struct agg__out *o);

#endif
