/* lib/agg/engine.c: the pure per-tree aggregation engine: slot pools with two versions per slot,
 * contributor bitmaps, dedup, BIER replication of results, repair notices to the members a
 * round misses (docs/protocol.md "Switch slot semantics", "Repair notices"). Not here: the reduce kernels (reduce.c), I/O, clocks, threads (the switch). */
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
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"

/* Version states. A version is one round of one slot. */
enum agg__state {
	AGG__EMPTY = 0,  /* never used since create */
	AGG__COLLECTING, /* contributions arriving */
	AGG__UP_SENT,    /* non-root: all in, aggregate sent to the parent, no result seen yet */
	AGG__COMPLETE,   /* result known (root: computed; non-root: received from the parent) */
};

static bool agg__is_pending(uint8_t state)
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
	 * progress in it: no input, hostile or not, is amplified into notices. A version leaves
	 * the list when noticed or no longer collecting. */
	uint32_t lhead[AGG__L_COUNT], ltail[AGG__L_COUNT];
	uint32_t credit;
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
static unsigned agg__next(const uint8_t *bits, size_t len, unsigned from)
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

const char *agg_verdict_name(enum agg_verdict v)
{
	static const char *const names[AGG_VERDICT_COUNT] = {
		[AGG_ABSORBED] = "absorbed",
		[AGG_COMPLETED] = "completed",
		[AGG_DUP_RESENT] = "dup_resent",
		[AGG_NACK_DOWN] = "nack_down",
		[AGG_DUP_UP_RESENT] = "dup_up_resent",
		[AGG_DUP_IGNORED] = "dup_ignored",
		[AGG_FORWARDED] = "forwarded",
		[AGG_RESULT_DOWN] = "result_down",
		[AGG_DROP_KEY] = "drop_key",
		[AGG_DROP_TREE] = "drop_tree",
		[AGG_DROP_SLOT] = "drop_slot",
		[AGG_DROP_STALE] = "drop_stale",
		[AGG_DROP_FUTURE] = "drop_future",
		[AGG_DROP_MISMATCH] = "drop_mismatch",
		[AGG_DROP_UNSUPPORTED] = "drop_unsupported",
		[AGG_DROP_TOO_BIG] = "drop_too_big",
		[AGG_DROP_BITMAP] = "drop_bitmap",
		[AGG_DROP_SENDER] = "drop_sender",
		[AGG_DROP_NO_ROUTE] = "drop_no_route",
		[AGG_DROP_EPOCH] = "drop_epoch",
		[AGG_DROP_PKEY] = "drop_pkey",
	};
	if ((unsigned)v >= AGG_VERDICT_COUNT)
		return "unknown";
	return names[v];
}

/* ---------------------------------------------------------------- create / destroy */

void agg_tree_destroy(struct agg_tree *t)
{
	if (!t)
		return;
	free(t->abm);
	free(t->bift);
	free(t->bift_fbm);
	free(t->bp_group);
	free(t->bp_member);
	free(t->rcredit);
	free(t->upsets);
	free(t->groups);
	free(t->group_fbm);
	free(t->vers);
	free(t->seen);
	free(t->req);
	free(t->heads);
	free(t->data);
	free(t->send_bits);
	free(t->rem_bits);
	free(t->fwd_data);
	free(t);
}

static int agg__validate(const struct agg_tree_cfg *c)
{
	unsigned bsl = c->bsl_bits;
	if (bsl < WIRE_BSL_MIN || bsl > WIRE_BSL_MAX || (bsl & (bsl - 1)))
		return -EINVAL;
	if (c->nslots < 1 || c->slot_bytes < 1 || c->slot_bytes > 4096)
		return -EINVAL;
	if (!c->abm || (c->nbift && !c->bift))
		return -EINVAL;
	if (!c->root && c->parent_nbr == AGG_NBR_NONE)
		return -EINVAL;
	if (c->nshards > 1 && c->shard >= c->nshards)
		return -EINVAL;
	size_t len = bsl / 8;
	bool any = false;
	for (size_t i = 0; i < len; i++)
		any |= c->abm[i] != 0;
	if (!any)
		return -EINVAL;
	for (size_t i = 0; i < c->nbift; i++) {
		const struct agg_bift_entry *e = &c->bift[i];
		if (e->bp < 1 || e->bp > bsl || e->nbr == AGG_NBR_NONE)
			return -EINVAL;
		for (size_t j = 0; j < i; j++)
			if (c->bift[j].bp == e->bp)
				return -EINVAL; /* two routes for one bit: ambiguous */
	}
	return 0;
}

static int agg__build_bift(struct agg_tree *t, const struct agg_tree_cfg *c)
{
	size_t len = t->bsl_bytes, n = c->nbift;
	unsigned bsl = c->bsl_bits;

	t->bp_group = malloc((bsl + 1) * sizeof *t->bp_group);
	t->rcredit = calloc(bsl + 1, 1);
	if (!t->rcredit)
		return -ENOMEM;
	t->bift = calloc(n ? n : 1, sizeof *t->bift);
	t->bift_fbm = calloc(n ? n : 1, len);
	t->groups = calloc(n ? n : 1, sizeof *t->groups);
	t->group_fbm = calloc(n ? n : 1, len);
	if (!t->bp_group || !t->bift || !t->bift_fbm || !t->groups || !t->group_fbm)
		return -ENOMEM;
	for (unsigned b = 0; b <= bsl; b++)
		t->bp_group[b] = AGG__NO_GROUP;

	for (size_t i = 0; i < n; i++) {
		const struct agg_bift_entry *e = &c->bift[i];
		uint8_t *own = t->bift_fbm + i * len;
		if (e->fbm)
			memcpy(own, e->fbm, len);
		else
			agg__set(own, len, e->bp); /* no F-BM given: just its own bit */
		t->bift[i] = *e;
		t->bift[i].fbm = own;

		size_t g;
		for (g = 0; g < t->ngroups; g++)
			if (t->groups[g].nbr == e->nbr)
				break;
		if (g == t->ngroups) {
			t->groups[g].nbr = e->nbr;
			t->groups[g].fbm = t->group_fbm + g * len;
			t->ngroups++;
		}
		uint8_t *gf = t->groups[g].fbm;
		for (size_t k = 0; k < len; k++)
			gf[k] |= own[k];
		agg__set(gf, len, e->bp);
		t->bp_group[e->bp] = (uint16_t)g;
	}
	/* One input emits a result to every group (or one aggregate up), then repair notices
	 * as far as room and credit allow: a notice never takes a result's place. */
	t->max_sends = 2 * t->ngroups + 2;
	return 0;
}

int agg_tree_create(const struct agg_tree_cfg *cfg, struct agg_tree **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!cfg)
		return -EINVAL;
	int rc = agg__validate(cfg);
	if (rc)
		return rc;

	struct agg_tree *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	t->cfg = *cfg;
	t->pkey = cfg->pkey ? cfg->pkey : WIRE_PKEY_DEFAULT;
	t->cfg.pkey = t->pkey;
	t->bsl_bytes = cfg->bsl_bits / 8;
	t->nwords = t->bsl_bytes / 8;
	t->bsl_code = (uint8_t)(__builtin_ctz(cfg->bsl_bits) - 5);
	size_t len = t->bsl_bytes;
	unsigned bsl = cfg->bsl_bits;

	rc = -ENOMEM;
	t->abm = malloc(len);
	if (!t->abm)
		goto fail;
	memcpy(t->abm, cfg->abm, len);
	t->cfg.abm = t->abm;

	rc = agg__build_bift(t, cfg);
	if (rc)
		goto fail;
	t->cfg.bift = t->bift;
	rc = -EINVAL;
	if (cfg->nupsets && !cfg->upsets)
		goto fail;
	rc = -ENOMEM;
	t->upsets = calloc(cfg->nupsets ? cfg->nupsets : 1, len);
	if (!t->upsets)
		goto fail;
	for (size_t i = 0; i < cfg->nupsets; i++)
		for (size_t k = 0; k < len; k++)
			t->upsets[i * len + k] = cfg->upsets[i] ? cfg->upsets[i][k] & t->abm[k] : 0;
	t->cfg.upsets = NULL;

	/* Every member must be reachable for results: each A-BM bit needs a BIFT entry. */
	rc = -EINVAL;
	for (unsigned bp = agg__next(t->abm, len, 1); bp; bp = agg__next(t->abm, len, bp + 1)) {
		if (t->bp_group[bp] == AGG__NO_GROUP)
			goto fail;
		t->nmembers++;
	}

	rc = -ENOMEM;
	t->nshards = cfg->nshards > 1 ? cfg->nshards : 1;
	t->cfg.nshards = t->nshards;
	if (t->nshards == 1)
		t->cfg.shard = 0;
	/* Blocks of WIRE_SLOT_BLOCK slots go round-robin to the shards (block % nshards ==
	 * shard); a shard's k-th block holds local slots k * WIRE_SLOT_BLOCK onward. */
	if (t->nshards == 1) {
		t->nlocal = cfg->nslots;
	} else {
		uint32_t nblocks = ((uint32_t)cfg->nslots + WIRE_SLOT_BLOCK - 1) / WIRE_SLOT_BLOCK;
		uint32_t own = nblocks > t->cfg.shard
				       ? (nblocks - t->cfg.shard + t->nshards - 1) / t->nshards
				       : 0;
		t->nlocal = own * WIRE_SLOT_BLOCK;
	}

	/* Memory: nlocal * 2 versions * (1 + members if deterministic) * slot_bytes (rounded to
	 * 64) of data, plus 2 bit-strings per version. Example: 256 slots, 4 KiB, 64 members:
	 * 2 MiB normally, 130 MiB deterministic. Pages are touched only when a slot is used. */
	t->buf_stride = ((size_t)cfg->slot_bytes + AGG__ALIGN - 1) / AGG__ALIGN * AGG__ALIGN;
	size_t nbufs = 1 + (cfg->deterministic ? t->nmembers : 0);
	t->ver_stride = t->buf_stride * nbufs;
	size_t nver = (size_t)(t->nlocal ? t->nlocal : 1) * 2, data_bytes, bits_bytes;
	if (__builtin_mul_overflow(nver, t->ver_stride, &data_bytes) ||
	    __builtin_mul_overflow(nver, len, &bits_bytes))
		goto fail;
	t->vers = calloc(nver, sizeof *t->vers);
	for (size_t l = 0; l < AGG__L_COUNT; l++)
		t->lhead[l] = t->ltail[l] = AGG__NOLINK;
	t->seen = calloc(1, bits_bytes);
	t->req = calloc(1, bits_bytes);
	if (!t->vers || !t->seen || !t->req)
		goto fail;
	if (posix_memalign((void **)&t->data, AGG__ALIGN, data_bytes)) {
		t->data = NULL;
		goto fail;
	}
	if (cfg->deterministic) {
		t->heads = calloc(1, bits_bytes);
		t->bp_member = calloc(bsl + 1, sizeof *t->bp_member);
		if (!t->heads || !t->bp_member)
			goto fail;
		uint16_t idx = 0;
		for (unsigned bp = agg__next(t->abm, len, 1); bp; bp = agg__next(t->abm, len, bp + 1))
			t->bp_member[bp] = idx++;
	}

	t->send_bits = calloc(t->max_sends, len);
	t->rem_bits = calloc(1, len);
	t->fwd_data = malloc(AGG__FWD_DATA_MAX);
	if (!t->send_bits || !t->rem_bits || !t->fwd_data)
		goto fail;

	*out = t;
	return 0;
fail:
	agg_tree_destroy(t);
	return rc;
}

size_t agg_tree_max_sends(const struct agg_tree *t)
{
	return t ? t->max_sends : 0;
}

void agg_tree_get_stats(const struct agg_tree *t, struct agg_tree_stats *out)
{
	if (t && out) {
		*out = t->st;
		out->epoch = t->epoch;
	}
}

size_t agg_tree_pending(const struct agg_tree *t)
{
	return t->npending;
}

const struct agg_tree_cfg *agg_tree_cfg(const struct agg_tree *t)
{
	return t ? &t->cfg : NULL;
}

/* ---------------------------------------------------------------- input path */

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

/* Append a send with the header of version v (slot, round, meta). */
static struct agg_send *agg__emit(struct agg_tree *t, struct agg__out *o, const struct agg__ver *v,
				  uint16_t slot, uint32_t nbr, uint8_t flags, uint16_t bfr_id,
				  bool with_data)
{
	if (o->n >= o->cap)
		return NULL;
	struct agg_send *s = &o->v[o->n];
	uint8_t *bits = t->send_bits + o->n * t->bsl_bytes;
	o->n++;

	memset(s, 0, sizeof *s);
	s->nbr = nbr;
	struct wire_pkt *p = &s->pkt;
	uint32_t dlen = with_data ? v->data_len : 0;
	uint32_t ib_len = (uint32_t)(WIRE_INCA_FIXED_LEN + t->bsl_bytes + dlen);
	p->bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
	p->bth.pkey = t->pkey;
	p->bth.padcnt = (uint8_t)((4 - ib_len % 4) % 4);
	p->reth.va = v->va;
	p->reth.rkey = t->cfg.rkey;
	p->reth.dma_len = ib_len;
	p->imm = v->imm;
	p->inca.version = WIRE_INCA_VERSION;
	p->inca.flags = flags;
	p->inca.coll = v->coll;
	p->inca.dtype = v->dtype;
	p->inca.op = v->op;
	p->inca.tree_id = t->cfg.tree_id;
	p->inca.slot = slot;
	p->inca.round = v->rnd;
	p->inca.bfr_id = bfr_id;
	p->inca.bsl_code = t->bsl_code;
	p->inca.si = t->cfg.si;
	p->inca.count = with_data ? v->count : 0;
	p->inca.owner = v->owner;
	p->inca.epoch = t->epoch;
	p->inca.bits = bits;
	p->data = with_data ? agg__buf(t, v, 0) : NULL;
	p->data_len = dlen;
	t->st.tx_pkts++;
	t->st.tx_bytes += dlen;
	return s;
}

/* BIER replication of version v's result to the bits in t->rem_bits (consumed): for the lowest
 * remaining bit, one copy to its neighbour with bits AND F-BM, then clear F-BM; repeat. Each
 * neighbour gets at most one copy. Cost O(copies * bsl/8 + data pointer setup). Returns the
 * number of copies. */
static size_t agg__replicate(struct agg_tree *t, struct agg__out *o, const struct agg__ver *v,
			     uint16_t slot, bool resend)
{
	uint8_t *rem = t->rem_bits;
	size_t len = t->bsl_bytes, sent = 0;
	/* Which copies carry the data: the owner's bit decides (agg__from_owner/_to_owner). */
	unsigned obp = v->owner ? agg__bp_of(v->owner, t->cfg.bsl_bits, t->cfg.si) : 0;
	bool sel = obp && (agg__from_owner(v->coll) || agg__to_owner(v->coll));
	uint8_t obits[WIRE_BSL_MAX / 8];
	if (sel) {
		memset(obits, 0, len);
		agg__set(obits, len, obp);
	}
	for (unsigned bp = agg__next(rem, len, 1); bp; bp = agg__next(rem, len, bp + 1)) {
		uint16_t g = t->bp_group[bp];
		if (g == AGG__NO_GROUP)
			continue; /* unreachable: callers only pass bits within A-BM */
		const uint8_t *f = t->groups[g].fbm;
		bool with_data = true;
		if (sel) {
			bool has_owner = false, has_other = false;
			for (size_t w = 0; w < t->nwords; w++) {
				uint64_t x = agg__ld(rem, w) & agg__ld(f, w), ob = agg__ld(obits, w);
				has_owner |= (x & ob) != 0;
				has_other |= (x & ~ob) != 0;
			}
			with_data = agg__to_owner(v->coll) ? has_owner : has_other;
		}
		uint8_t fl = WIRE_F_RESULT | (v->repaired || resend ? WIRE_F_RETX : 0);
		struct agg_send *s = agg__emit(t, o, v, slot, t->groups[g].nbr, fl, 0, with_data);
		if (!s)
			break; /* caller's cap too small: behaves like loss */
		uint8_t *bits = (uint8_t *)s->pkt.inca.bits;
		for (size_t w = 0; w < t->nwords; w++) {
			uint64_t r = agg__ld(rem, w), m = agg__ld(f, w);
			agg__st(bits, w, r & m);
			agg__st(rem, w, r & ~m);
		}
		sent++;
	}
	return sent;
}

/* Non-root: the version's aggregate toward the parent, P-BM = A-BM, sender = own BFR-id. */
static bool agg__send_up(struct agg_tree *t, struct agg__out *o, const struct agg__ver *v,
			 uint16_t slot)
{
	struct agg_send *s = agg__emit(t, o, v, slot, t->cfg.parent_nbr,
				       v->repaired ? WIRE_F_RETX : 0, t->cfg.own_bfr_id, true);
	if (!s)
		return false;
	memcpy((uint8_t *)s->pkt.inca.bits, t->abm, t->bsl_bytes);
	return true;
}

/* ---------------------------------------------------------------- repair lists, notices */

static void agg__unlist(struct agg_tree *t, struct agg__ver *v)
{
	if (v->list == AGG__L_NONE)
		return;
	unsigned l = v->list;
	if (v->lprev != AGG__NOLINK)
		t->vers[v->lprev].lnext = v->lnext;
	else
		t->lhead[l] = v->lnext;
	if (v->lnext != AGG__NOLINK)
		t->vers[v->lnext].lprev = v->lprev;
	else
		t->ltail[l] = v->lprev;
	v->list = AGG__L_NONE;
	v->lprev = v->lnext = AGG__NOLINK;
}

static void agg__enlist(struct agg_tree *t, struct agg__ver *v, unsigned l)
{
	agg__unlist(t, v);
	uint32_t i = (uint32_t)agg__vidx(t, v);
	v->list = (uint8_t)l;
	v->lnext = AGG__NOLINK;
	v->lprev = t->ltail[l];
	if (t->ltail[l] != AGG__NOLINK)
		t->vers[t->ltail[l]].lnext = i;
	else
		t->lhead[l] = i;
	t->ltail[l] = i;
}

static void agg__earn(struct agg_tree *t)
{
	if (t->credit < t->max_sends)
		t->credit++;
}

/* Chunk a was sent before chunk b (ImmDt = g mod 2^32, compared with wrap-around). */
static inline bool agg__before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static inline uint16_t agg__slot_of(const struct agg_tree *t, const struct agg__ver *v)
{
	return (uint16_t)(agg__vidx(t, v) / 2 * t->nshards + t->cfg.shard);
}

/* Repair notice for version v (collecting) to the members in `want` AND A-BM AND NOT seen:
 * one header-only WIRE_F_NACK copy per neighbour, bit-string = the missing bits it reaches,
 * each paid with a credit. Returns the copies sent. */
static size_t agg__notice(struct agg_tree *t, struct agg__out *o, const struct agg__ver *v,
			  const uint8_t *want)
{
	uint8_t *rem = t->rem_bits;
	const uint8_t *seen = agg__seen(t, v);
	size_t len = t->bsl_bytes, sent = 0;
	uint16_t slot = agg__slot_of(t, v);
	uint16_t me = t->cfg.root ? 0 : t->cfg.own_bfr_id;

	for (size_t w = 0; w < t->nwords; w++)
		agg__st(rem, w, agg__ld(want, w) & agg__ld(t->abm, w) & ~agg__ld(seen, w));
	for (unsigned bp = agg__next(rem, len, 1); bp; bp = agg__next(rem, len, bp + 1)) {
		uint16_t g = t->bp_group[bp];
		if (g == AGG__NO_GROUP)
			continue;
		struct agg_send *s = NULL;
		if (t->credit)
			s = agg__emit(t, o, v, slot, t->groups[g].nbr, WIRE_F_NACK, me, false);
		const uint8_t *f = t->groups[g].fbm;
		uint8_t *bits = s ? (uint8_t *)s->pkt.inca.bits : NULL;
		for (size_t w = 0; w < t->nwords; w++) {
			uint64_t r = agg__ld(rem, w), m = agg__ld(f, w);
			if (bits)
				agg__st(bits, w, r & m);
			agg__st(rem, w, r & ~m);
		}
		if (!s) {
			t->st.notices_limited++;
			continue;
		}
		t->credit--;
		t->st.notices++;
		sent++;
	}
	return sent;
}

/* Chunk imm completed here (root: result sent; non-root: aggregate sent up). Every member
 * sends chunks in g order over a FIFO path, so a version of an earlier chunk still collecting
 * now lost the contributions it misses: notice those members, once per version (a lost notice
 * or resend is repaired by the waiting members' duplicates, agg__input_up, or by timers). */
static void agg__notice_older(struct agg_tree *t, struct agg__out *o, uint32_t imm)
{
	while (t->lhead[AGG__L_COL] != AGG__NOLINK && t->credit && o->n < o->cap) {
		struct agg__ver *e = &t->vers[t->lhead[AGG__L_COL]];
		if (!agg__before(e->imm, imm))
			break;
		agg__unlist(t, e);
		agg__notice(t, o, e, t->abm);
	}
}

/* The aggregate just went up again for a parent's notice: the duplicates members send for
 * the same loss join this wave instead of sending it up once more (each copy up brings the
 * whole sub-tree's result down again). */
static void agg__open_wave(struct agg_tree *t, struct agg__ver *v)
{
	memset(agg__req(t, v), 0, t->bsl_bytes);
	v->wave = 1;
}

/* Checks shared by both directions after the bitmap tests: slot ownership, type/op, sizes.
 * On success stores the local slot index. */
static enum agg_verdict agg__check_payload(const struct agg_tree *t, const struct wire_pkt *p,
					   uint32_t *li)
{
	uint16_t slot = p->inca.slot;
	if (slot >= t->cfg.nslots)
		return AGG_DROP_SLOT;
	if (t->nshards == 1) {
		*li = slot;
	} else {
		unsigned block = slot / WIRE_SLOT_BLOCK;
		if (block % t->nshards != t->cfg.shard)
			return AGG_DROP_SLOT;
		*li = (block / t->nshards) * WIRE_SLOT_BLOCK + slot % WIRE_SLOT_BLOCK;
	}
	unsigned dt = p->inca.dtype, op = p->inca.op;
	if (!wire_op_valid(dt, op))
		return AGG_DROP_UNSUPPORTED;
	if (t->cfg.dtype_mask && !(t->cfg.dtype_mask & (1u << dt)))
		return AGG_DROP_UNSUPPORTED;
	if (t->cfg.op_mask && !(t->cfg.op_mask & (1u << op)))
		return AGG_DROP_UNSUPPORTED;
	if (p->data_len > t->cfg.slot_bytes)
		return AGG_DROP_TOO_BIG;
	if (p->data_len != (uint32_t)p->inca.count * wire_dtype_size(dt) ||
	    (p->data_len && !p->data))
		return AGG_DROP_MISMATCH;
	return AGG_ABSORBED; /* "ok" */
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

/* The version holding round rnd, or NULL. */
static struct agg__ver *agg__find(struct agg_tree *t, uint32_t li, uint32_t rnd)
{
	struct agg__ver *a = &t->vers[(size_t)li * 2];
	if (a[0].state != AGG__EMPTY && a[0].rnd == rnd)
		return &a[0];
	if (a[1].state != AGG__EMPTY && a[1].rnd == rnd)
		return &a[1];
	return NULL;
}

/* The version holding the slot's top round T (not on probation), or NULL. */
static struct agg__ver *agg__top(struct agg_tree *t, uint32_t li)
{
	struct agg__ver *a = &t->vers[(size_t)li * 2], *top = NULL;
	for (int i = 0; i < 2; i++) {
		if (a[i].state == AGG__EMPTY || a[i].cand)
			continue;
		if (!top || agg__rdiff(a[i].rnd, top->rnd) > 0)
			top = &a[i];
	}
	return top;
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

/* A version for round rnd, which no version holds: returns 0 and the version to reset into
 * *out with *cand the probation kind (0: none); else the drop verdict. result: the
 * round arrives as a result from the parent (which may start only T + 1, or a slot without a
 * top round). */
static enum agg_verdict agg__admit(struct agg_tree *t, uint32_t li, uint32_t rnd, bool result,
				   struct agg__ver **out, uint8_t *cand)
{
	struct agg__ver *a = &t->vers[(size_t)li * 2], *top = agg__top(t, li);
	if (!top) {
		/* Nothing completed here since the slot started: at most one version holds a
		 * round, on probation; the newcomer replaces it. */
		*out = a[1].state != AGG__EMPTY ? &a[1] : &a[0];
		*cand = result ? 0 : AGG__CAND_FRESH;
		return AGG_ABSORBED;
	}
	struct agg__ver *other = top == &a[0] ? &a[1] : &a[0];
	int32_t d = agg__rdiff(rnd, top->rnd);
	if (d == 1 && top->state != AGG__COLLECTING) {
		*out = other;
		*cand = 0;
		return AGG_ABSORBED;
	}
	if (top->state == AGG__COLLECTING || result || (d >= -AGG__NEAR && d <= AGG__NEAR))
		return d < 0 ? AGG_DROP_STALE : AGG_DROP_FUTURE;
	*out = other;
	*cand = AGG__CAND_FAR;
	return AGG_ABSORBED;
}

/* Empty version v (a round on probation completed in the slot's other version). */
static void agg__clear(struct agg_tree *t, struct agg__ver *v)
{
	if (v->state == AGG__EMPTY)
		return;
	agg__unlist(t, v);
	t->npending -= agg__is_pending(v->state);
	v->state = AGG__EMPTY;
	v->cand = 0;
}

/* Job epochs (docs/protocol.md §8 "Job epochs"): a valid contribution or result with a newer
 * epoch than the tree's (agg_tree_input dropped older ones) starts every slot afresh, so
 * nothing of the previous job can answer the new one. No version survives, none is pending. */
static void agg__epoch_check(struct agg_tree *t, const struct wire_pkt *p);
static void agg__reset_all(struct agg_tree *t, uint32_t epoch)
{
	size_t nver = (size_t)(t->nlocal ? t->nlocal : 1) * 2;
	memset(t->vers, 0, nver * sizeof *t->vers);
	for (size_t i = 0; i < nver; i++)
		t->vers[i].lprev = t->vers[i].lnext = AGG__NOLINK;
	for (size_t l = 0; l < AGG__L_COUNT; l++)
		t->lhead[l] = t->ltail[l] = AGG__NOLINK;
	memset(t->rcredit, 0, t->cfg.bsl_bits + 1);
	t->npending = 0;
	t->epoch = epoch;
	t->st.epoch_resets++;
}

static void agg__epoch_check(struct agg_tree *t, const struct wire_pkt *p)
{
	if (p->inca.epoch && p->inca.epoch != t->epoch)
		agg__reset_all(t, p->inca.epoch);
}

/* Result re-sends (a duplicate of a complete round, answered to its sender only): the first
 * one per sender and round is free; each further one for the same round costs the sender a
 * re-send credit. A sender earns one with each contribution absorbed and each duplicate of a
 * round still collecting (packets not answered yet), at most AGG__RCREDIT_MAX banked. So the
 * re-sends a sender gets never outnumber the valid packets it sent, and a flood of
 * duplicates of complete rounds gets one answer per round plus the banked few. */
#define AGG__RCREDIT_MAX 8
static void agg__rearn(struct agg_tree *t, unsigned bp)
{
	if (t->rcredit[bp] < AGG__RCREDIT_MAX)
		t->rcredit[bp]++;
}

/* Same round, same call: everything but the count, which differs between the owner's data and
 * the others' header-only packets of a bcast / allgather (and between a data result and a
 * header-only one). */
static bool agg__meta_eq_nocount(const struct agg__ver *v, const struct wire_pkt *p)
{
	return v->coll == p->inca.coll && v->dtype == p->inca.dtype && v->op == p->inca.op &&
	       v->va == p->reth.va && v->imm == p->imm && v->owner == p->inca.owner;
}

static bool agg__meta_eq(const struct agg__ver *v, const struct wire_pkt *p)
{
	if (!agg__meta_eq_nocount(v, p))
		return false;
	if (agg__from_owner(v->coll))
		return v->count == p->inca.count || !v->count || !p->inca.count;
	return v->count == p->inca.count;
}

/* Start round rnd on version v (agg__admit chose it; cand: on probation). */
static void agg__reset(struct agg_tree *t, struct agg__ver *v, const struct wire_pkt *p,
		       uint8_t cand)
{
	v->rnd = p->inca.round;
	v->cand = cand;
	t->npending += !agg__is_pending(v->state);
	v->state = AGG__COLLECTING;
	v->coll = p->inca.coll;
	v->dtype = p->inca.dtype;
	v->op = p->inca.op;
	v->count = p->inca.count;
	v->owner = p->inca.owner;
	v->imm = p->imm;
	v->va = p->reth.va;
	v->data_len = p->data_len;
	v->nseen = 0;
	v->repaired = 0;
	v->wave = 0;
	/* A far round on probation may be forged: it never causes repair notices. */
	if (cand == AGG__CAND_FAR)
		agg__unlist(t, v);
	else
		agg__enlist(t, v, AGG__L_COL);
	memset(agg__seen(t, v), 0, t->bsl_bytes);
	memset(agg__req(t, v), 0, t->bsl_bytes);
	if (t->heads)
		memset(agg__heads(t, v), 0, t->bsl_bytes);
}

/* Deterministic mode: fold the stored contributions into the accumulator in ascending order of
 * their lowest bit position (= rank order when BFR-ids follow ranks). */
static void agg__det_reduce(struct agg_tree *t, struct agg__ver *v)
{
	const uint8_t *heads = agg__heads(t, v);
	uint8_t *acc = agg__buf(t, v, 0);
	size_t len = t->bsl_bytes;
	bool first = true;
	for (unsigned bp = agg__next(heads, len, 1); bp; bp = agg__next(heads, len, bp + 1)) {
		const uint8_t *src = agg__buf(t, v, 1 + (size_t)t->bp_member[bp]);
		if (first)
			memcpy(acc, src, v->data_len);
		else
			(void)agg_reduce(acc, src, v->count, (enum inca_dtype)v->dtype,
					 (enum inca_op)v->op); /* pair checked on entry */
		first = false;
	}
}

/* Unchanged copy toward the root, except the per-QP BTH fields, which the caller sets. Bits and
 * data are copied: the caller's packet buffer is only borrowed during the call. */
static enum agg_verdict agg__forward(struct agg_tree *t, struct agg__out *o,
				     const struct wire_pkt *p)
{
	if (p->data_len > AGG__FWD_DATA_MAX)
		return AGG_DROP_TOO_BIG;
	if (p->data_len && !p->data)
		return AGG_DROP_MISMATCH;
	if (o->n < o->cap) {
		struct agg_send *s = &o->v[o->n];
		uint8_t *bits = t->send_bits + o->n * t->bsl_bytes;
		o->n++;
		s->nbr = t->cfg.parent_nbr;
		s->pkt = *p;
		memcpy(bits, p->inca.bits, t->bsl_bytes);
		if (p->data_len)
			memcpy(t->fwd_data, p->data, p->data_len);
		s->pkt.inca.bits = bits;
		s->pkt.data = p->data_len ? t->fwd_data : NULL;
		s->pkt.bth.dest_qp = 0; /* per-QP fields: the caller's, as for every send */
		s->pkt.bth.psn = 0;
		t->st.tx_pkts++;
		t->st.tx_bytes += p->data_len;
	}
	t->st.forwarded++;
	return AGG_FORWARDED;
}

/* The P-BM must be exactly the set its sender speaks for. A member (its sender BFR-id is a
 * bit of A-BM) speaks for its own bit only. Any other sender (a child switch) speaks for the
 * whole set the BIFT reaches through the neighbour of the P-BM's lowest bit (the union of
 * those entries' F-BMs and bits, AND A-BM: its sub-tree), or for one of cfg.upsets. Anything
 * else could absorb a contribution for another member, complete a round alone or draw
 * results for others. */
static bool agg__bits_eq(const struct agg_tree *t, const uint8_t *a, const uint8_t *b)
{
	uint64_t d = 0;
	for (size_t w = 0; w < t->nwords; w++)
		d |= agg__ld(a, w) ^ agg__ld(b, w);
	return d == 0;
}

static bool agg__pbm_exact(const struct agg_tree *t, const struct wire_pkt *p, unsigned low_bp)
{
	const uint8_t *pbm = p->inca.bits;
	uint16_t sbp = agg__bp_of(p->inca.bfr_id, t->cfg.bsl_bits, t->cfg.si);
	if (sbp && (t->abm[t->bsl_bytes - 1 - (sbp - 1) / 8] & (1u << ((sbp - 1) & 7)))) {
		/* a member: its own bit and nothing else */
		uint8_t own[WIRE_BSL_MAX / 8];
		memset(own, 0, t->bsl_bytes);
		agg__set(own, t->bsl_bytes, sbp);
		return agg__bits_eq(t, own, pbm);
	}
	uint16_t g = t->bp_group[low_bp];
	if (g == AGG__NO_GROUP)
		return false;
	uint64_t d = 0;
	for (size_t w = 0; w < t->nwords; w++)
		d |= (agg__ld(t->groups[g].fbm, w) & agg__ld(t->abm, w)) ^ agg__ld(pbm, w);
	if (!d)
		return true;
	for (size_t i = 0; i < t->cfg.nupsets; i++)
		if (agg__bits_eq(t, t->upsets + i * t->bsl_bytes, pbm))
			return true;
	return false;
}

/* check_sender: the contribution's lowest P-BM bit must be reached through the ingress
 * neighbour, and so must the sender's own BFR-id if the BIFT knows it (a member's packet:
 * the same bit; a child switch's aggregate: its id is usually not in our BIFT). */
static bool agg__sender_ok(const struct agg_tree *t, const struct wire_pkt *p, unsigned low_bp,
			   uint32_t ingress)
{
	if (ingress == AGG_NBR_NONE)
		return false;
	uint16_t g = t->bp_group[low_bp];
	if (g == AGG__NO_GROUP || t->groups[g].nbr != ingress)
		return false;
	uint16_t sbp = agg__bp_of(p->inca.bfr_id, t->cfg.bsl_bits, t->cfg.si);
	if (sbp && t->bp_group[sbp] != AGG__NO_GROUP && t->groups[t->bp_group[sbp]].nbr != ingress)
		return false;
	return true;
}

/* Duplicates of a version still waiting (collecting, or sent up): they come in waves, one per
 * retransmission timeout of the members below. A duplicate whose sender has not asked in the
 * current wave only joins it (true: ignore it); one that asks again, or the first of a wave
 * (none yet, and no wave pending), starts a new wave with its P-BM as the askers (false: act on
 * it). */
static bool agg__wave_join(struct agg_tree *t, struct agg__ver *v, const uint8_t *pbm, size_t nw,
			   size_t len, bool pending)
{
	uint8_t *req = agg__req(t, v);
	uint64_t again = 0, any = pending;

	for (size_t w = 0; w < nw; w++) {
		uint64_t x = agg__ld(pbm, w), r0 = agg__ld(req, w);
		again |= x & r0;
		any |= r0;
	}
	if (any && !again) {
		for (size_t w = 0; w < nw; w++)
			agg__st(req, w, agg__ld(req, w) | agg__ld(pbm, w));
		return true;
	}
	memcpy(req, pbm, len);
	return false;
}

static enum agg_verdict agg__input_up(struct agg_tree *t, const struct wire_pkt *p,
				      uint32_t ingress, struct agg__out *o)
{
	const uint8_t *pbm = p->inca.bits;
	size_t len = t->bsl_bytes, nw = t->nwords;

	uint64_t in = 0, outside = 0;
	for (size_t w = 0; w < nw; w++) {
		uint64_t x = agg__ld(pbm, w), a = agg__ld(t->abm, w);
		in |= x & a;
		outside |= x & ~a;
	}
	if (!in && !outside)
		return AGG_DROP_BITMAP; /* empty P-BM: nobody's contribution */
	if (!in) {
		if (t->cfg.root)
			return AGG_DROP_NO_ROUTE;
		return agg__forward(t, o, p);
	}
	if (outside)
		return AGG_DROP_BITMAP;

	unsigned low_bp = agg__next(pbm, len, 1);
	if (!agg__pbm_exact(t, p, low_bp))
		return AGG_DROP_BITMAP;
	if (t->cfg.check_sender && !agg__sender_ok(t, p, low_bp, ingress))
		return AGG_DROP_SENDER;

	uint32_t li;
	enum agg_verdict r = agg__check_payload(t, p, &li);
	if (r != AGG_ABSORBED)
		return r;
	agg__epoch_check(t, p);
	uint32_t rnd = p->inca.round;
	struct agg__ver *v = agg__find(t, li, rnd);

	uint8_t *seen;
	const bool prov = agg__from_owner(p->inca.coll);
	if (v) {
		if (!agg__meta_eq(v, p))
			return AGG_DROP_MISMATCH;
		seen = agg__seen(t, v);
		uint64_t ovl = 0, fresh = 0;
		for (size_t w = 0; w < nw; w++) {
			uint64_t x = agg__ld(pbm, w), s = agg__ld(seen, w);
			ovl |= x & s;
			fresh |= x & ~s;
		}
		if (ovl && fresh)
			return AGG_DROP_BITMAP; /* partial overlap: not a contribution we can split */
		if (ovl) {
			t->st.duplicates++;
			switch (v->state) {
			case AGG__COMPLETE: {
				/* Only to the duplicate's own sender (its P-BM is exactly that
				 * sender's set: one copy). The first re-send of this round to it
				 * is free, every further one costs a re-send credit. */
				uint8_t *asked = agg__req(t, v);
				size_t lb = len - 1 - (low_bp - 1) / 8;
				uint8_t lbit = (uint8_t)(1u << ((low_bp - 1) & 7));
				if (asked[lb] & lbit) {
					if (!t->rcredit[low_bp]) {
						t->st.resends_limited++;
						return AGG_DUP_IGNORED;
					}
					t->rcredit[low_bp]--;
				}
				asked[lb] |= lbit;
				memcpy(t->rem_bits, pbm, len);
				t->st.results_resent += agg__replicate(t, o, v, p->inca.slot, true);
				return AGG_DUP_RESENT;
			}
			case AGG__UP_SENT: {
				/* One re-send up per wave of retransmissions: the members below all
				 * time out at about the same moment, and each copy sent up would bring
				 * the whole sub-tree's result back down. Another member's duplicate
				 * only joins the wave; a member asking again starts a new one. */
				if (agg__wave_join(t, v, pbm, nw, len, v->wave != 0))
					return AGG_DUP_IGNORED;
				v->wave = 0;
				if (agg__send_up(t, o, v, p->inca.slot))
					t->st.results_resent++;
				return AGG_DUP_UP_RESENT;
			}
			default: {
				/* Collecting: the sender waits for members whose contribution is
				 * missing. Notice them once per wave of duplicates (a member asking
				 * again starts a new wave), as for UP_SENT above. The duplicate got
				 * no answer: it earns its sender a re-send credit. */
				agg__rearn(t, low_bp);
				if (agg__wave_join(t, v, pbm, nw, len, false))
					return AGG_DUP_IGNORED;
				agg__unlist(t, v);
				if (v->cand != AGG__CAND_FAR)
					agg__notice(t, o, v, t->abm);
				return AGG_DUP_IGNORED;
			}
			}
		}
		/* seen == A-BM once up-sent/complete, so a fresh P-BM within A-BM means the
		 * version is still collecting. Bcast / allgather: one data contribution only. */
		if (prov && p->data_len && v->data_len)
			return AGG_DROP_MISMATCH;
	} else {
		uint8_t cand;
		r = agg__admit(t, li, rnd, false, &v, &cand);
		if (r != AGG_ABSORBED)
			return r;
		agg__reset(t, v, p, cand);
		seen = agg__seen(t, v);
	}

	/* absorb */
	unsigned added = 0;
	for (size_t w = 0; w < nw; w++) {
		uint64_t x = agg__ld(pbm, w);
		added += (unsigned)__builtin_popcountll(x);
		agg__st(seen, w, agg__ld(seen, w) | x);
	}
	if (prov) {
		/* Nothing to reduce: the owner's data (from whichever packet carries it). */
		if (p->data_len) {
			memcpy(agg__buf(t, v, 0), p->data, p->data_len);
			v->count = p->inca.count;
			v->data_len = p->data_len;
		}
	} else if (t->heads) {
		if (p->data_len)
			memcpy(agg__buf(t, v, 1 + (size_t)t->bp_member[low_bp]), p->data,
			       p->data_len);
		agg__set(agg__heads(t, v), len, low_bp);
	} else if (v->nseen == 0) {
		if (p->data_len)
			memcpy(agg__buf(t, v, 0), p->data, p->data_len);
	} else if (v->count) {
		(void)agg_reduce(agg__buf(t, v, 0), p->data, v->count, (enum inca_dtype)v->dtype,
				 (enum inca_op)v->op); /* pair checked above */
	}
	v->nseen = (uint16_t)(v->nseen + added);
	v->repaired |= (p->inca.flags & WIRE_F_RETX) != 0;
	t->st.contributions++;
	agg__earn(t);
	agg__rearn(t, low_bp);
	if (v->nseen < t->nmembers)
		return AGG_ABSORBED;

	/* complete */
	if (v->cand) {
		/* Off probation: the slot's top round now; the other version's round belongs to
		 * what this round replaced. */
		v->cand = 0;
		agg__clear(t, &t->vers[(size_t)li * 2 + (v == &t->vers[(size_t)li * 2])]);
	}
	if (t->heads && !prov)
		agg__det_reduce(t, v);
	t->st.aggregations++;
	memset(agg__req(t, v), 0, len); /* duplicate waves start afresh in the next state */
	if (t->cfg.root) {
		v->state = AGG__COMPLETE;
		t->npending--; /* was COLLECTING */
		agg__unlist(t, v);
		memcpy(t->rem_bits, t->abm, len);
		agg__replicate(t, o, v, p->inca.slot, false);
	} else {
		v->state = AGG__UP_SENT;
		agg__send_up(t, o, v, p->inca.slot);
	}
	agg__notice_older(t, o, v->imm);
	return AGG_COMPLETED;
}

/* Non-root: a RESULT from the parent. Store it (it is authoritative even if our own round is
 * still collecting, e.g. after a restart) and replicate to packet bits AND A-BM. */
static enum agg_verdict agg__input_down(struct agg_tree *t, const struct wire_pkt *p,
					uint32_t ingress, struct agg__out *o)
{
	if (t->cfg.root)
		return AGG_DROP_NO_ROUTE; /* the root has no parent to hear results from */
	if (t->cfg.check_sender && ingress != t->cfg.parent_nbr)
		return AGG_DROP_SENDER;
	uint64_t any = 0;
	for (size_t w = 0; w < t->nwords; w++) {
		uint64_t x = agg__ld(p->inca.bits, w) & agg__ld(t->abm, w);
		any |= x;
		agg__st(t->rem_bits, w, x);
	}
	if (!any)
		return AGG_DROP_BITMAP; /* nobody below us is addressed */

	uint32_t li;
	enum agg_verdict r = agg__check_payload(t, p, &li);
	if (r != AGG_ABSORBED)
		return r;
	agg__epoch_check(t, p);
	uint32_t rnd = p->inca.round;
	struct agg__ver *v = agg__find(t, li, rnd);
	if (v) {
		if (!agg__meta_eq_nocount(v, p))
			return AGG_DROP_MISMATCH;
		if (!wire_coll_has_owner(p->inca.coll) && v->count != p->inca.count)
			return AGG_DROP_MISMATCH;
	} else {
		uint8_t cand;
		r = agg__admit(t, li, rnd, true, &v, &cand);
		if (r != AGG_ABSORBED)
			return r;
		agg__reset(t, v, p, 0);
	}
	if (v->cand) {
		v->cand = 0;
		agg__clear(t, &t->vers[(size_t)li * 2 + (v == &t->vers[(size_t)li * 2])]);
	}
	if (v->state != AGG__COMPLETE) {
		/* A header-only result (nobody below needs the data) leaves no data here. */
		v->count = p->inca.count;
		v->data_len = p->data_len;
		if (p->data_len)
			memcpy(agg__buf(t, v, 0), p->data, p->data_len);
		memcpy(agg__seen(t, v), t->abm, t->bsl_bytes);
		v->nseen = (uint16_t)t->nmembers;
		v->repaired = (p->inca.flags & WIRE_F_RETX) != 0;
		memset(agg__req(t, v), 0, t->bsl_bytes);
		t->npending -= agg__is_pending(v->state);
		v->state = AGG__COMPLETE;
		agg__unlist(t, v);
		agg__earn(t);
	}
	t->st.results_down++;
	agg__replicate(t, o, v, p->inca.slot, (p->inca.flags & WIRE_F_RETX) != 0);
	return AGG_RESULT_DOWN;
}

/* Non-root: a repair notice from the parent names bits below us. Aggregate already up: re-send
 * it. Still collecting: notice our own missing members among those bits, unless a notice for
 * this version went out already (the members' timers and duplicates take it from there).
 * Anything else (another round, complete): nothing to repair. */
static enum agg_verdict agg__input_nack(struct agg_tree *t, const struct wire_pkt *p,
					uint32_t ingress, struct agg__out *o)
{
	if (t->cfg.root)
		return AGG_DROP_NO_ROUTE;
	if (t->cfg.check_sender && ingress != t->cfg.parent_nbr)
		return AGG_DROP_SENDER;
	uint64_t any = 0;
	for (size_t w = 0; w < t->nwords; w++)
		any |= agg__ld(p->inca.bits, w) & agg__ld(t->abm, w);
	if (!any)
		return AGG_DROP_BITMAP;
	uint32_t li;
	enum agg_verdict r = agg__check_payload(t, p, &li);
	if (r != AGG_ABSORBED)
		return r;
	struct agg__ver *v = agg__find(t, li, p->inca.round);
	if (!v || !agg__meta_eq_nocount(v, p))
		return AGG_NACK_DOWN;
	if (v->state == AGG__UP_SENT) {
		/* Paid with a credit like a notice: the parent answers a re-sent aggregate with
		 * its result for the whole sub-tree, so notices (from a parent, or from anyone
		 * where check_sender is off) must not turn into more traffic than progress made. */
		agg__unlist(t, v);
		if (t->credit && agg__send_up(t, o, v, p->inca.slot)) {
			t->credit--;
			t->st.results_resent++;
			agg__open_wave(t, v);
		}
	} else if (v->state == AGG__COLLECTING && v->list == AGG__L_COL) {
		agg__unlist(t, v);
		agg__notice(t, o, v, p->inca.bits);
	}
	return AGG_NACK_DOWN;
}

enum agg_verdict agg_tree_input(struct agg_tree *t, const struct wire_pkt *pkt, uint32_t ingress_nbr,
				struct agg_send *out, size_t cap, size_t *nsent)
{
	size_t ignored;
	if (!nsent)
		nsent = &ignored;
	*nsent = 0;
	if (!t || !pkt)
		return AGG_DROP_TREE;

	struct agg__out o = { .v = out, .cap = out ? cap : 0, .n = 0 };
	if (o.cap > t->max_sends)
		o.cap = t->max_sends;
	t->st.rx_pkts++;
	t->st.rx_bytes += pkt->data_len;

	enum agg_verdict r;
	if (pkt->reth.rkey != t->cfg.rkey)
		r = AGG_DROP_KEY;
	else if (pkt->inca.tree_id != t->cfg.tree_id)
		r = AGG_DROP_TREE;
	else if (!wire_pkey_match(pkt->bth.pkey, t->pkey))
		r = AGG_DROP_PKEY;
	else if (pkt->inca.bsl_code != t->bsl_code || pkt->inca.si != t->cfg.si || !pkt->inca.bits)
		r = AGG_DROP_BITMAP;
	else if (pkt->inca.epoch && t->epoch && agg__rdiff(pkt->inca.epoch, t->epoch) < 0)
		r = AGG_DROP_EPOCH;
	else if (pkt->inca.epoch != t->epoch && pkt->inca.epoch && (pkt->inca.flags & WIRE_F_NACK))
		r = AGG_DROP_EPOCH; /* a notice is about a round in progress: never a new job */
	else if (pkt->inca.flags & WIRE_F_RESULT)
		r = agg__input_down(t, pkt, ingress_nbr, &o);
	else if (pkt->inca.flags & WIRE_F_NACK)
		r = agg__input_nack(t, pkt, ingress_nbr, &o);
	else
		r = agg__input_up(t, pkt, ingress_nbr, &o);

	if (r >= AGG_DROP_FIRST)
		t->st.drops[r]++;
	*nsent = o.n;
	return r;
}
