/* lib/agg/engine_send.c: what the aggregation engine emits: packets built from a version's
 * header, BIER replication of results to the neighbour groups, the aggregate sent up, and the
 * repair lists and notices (docs/protocol.md "Repair notices"). Not here: deciding what a
 * packet does to a version (engine.c, engine_path.c). */
#include <string.h>

#include "agg/engine_int.h"

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
size_t agg__replicate(struct agg_tree *t, struct agg__out *o, const struct agg__ver *v,
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
bool agg__send_up(struct agg_tree *t, struct agg__out *o, const struct agg__ver *v,
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

void agg__unlist(struct agg_tree *t, struct agg__ver *v)
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

void agg__enlist(struct agg_tree *t, struct agg__ver *v, unsigned l)
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

void agg__earn(struct agg_tree *t)
{
	if (t->credit < t->max_sends)
		t->credit++;
}

/* No credit left: one by the clock per AGG__RPACE_NS (struct agg_tree: npaced_ns). */
void agg__earn_paced(struct agg_tree *t)
{
	if (!t->credit && agg__paced(t, &t->npaced_ns))
		t->credit = 1;
}

/* Repair notice for version v (collecting) to the members in `want` AND A-BM AND NOT seen:
 * one header-only WIRE_F_NACK copy per neighbour, bit-string = the missing bits it reaches,
 * each paid with a credit. Returns the copies sent. */
size_t agg__notice(struct agg_tree *t, struct agg__out *o, const struct agg__ver *v,
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
void agg__notice_older(struct agg_tree *t, struct agg__out *o, uint32_t imm)
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
void agg__open_wave(struct agg_tree *t, struct agg__ver *v)
{
	memset(agg__req(t, v), 0, t->bsl_bytes);
	v->wave = 1;
}
