/* lib/agg/engine_path.c: the aggregation engine's input paths: contributions going up
 * (absorb, deduplicate, complete, forward), results coming down from the parent, and the
 * parent's repair notices. Not here: admission of rounds into versions (engine.c) and building
 * or replicating the packets (engine_send.c). */
#include <string.h>

#include "agg/engine_int.h"

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

/* A contribution or result that passed the sender checks: its payload (slot, round window,
 * size), then the job epoch it carries, then the slot's version for its round (*v NULL: none
 * yet). AGG_ABSORBED: go on; any other verdict: drop with it. */
static inline enum agg_verdict lookup_round(struct agg_tree *t, const struct wire_pkt *p,
					    uint32_t *li, struct agg__ver **v)
{
	enum agg_verdict r = agg__check_payload(t, p, li);
	if (r != AGG_ABSORBED)
		return r;
	agg__epoch_check(t, p);
	*v = agg__find(t, *li, p->inca.round);
	return AGG_ABSORBED;
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

enum agg_verdict agg__input_up(struct agg_tree *t, const struct wire_pkt *p,
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

	uint32_t li, rnd = p->inca.round;
	struct agg__ver *v;
	enum agg_verdict r = lookup_round(t, p, &li, &v);
	if (r != AGG_ABSORBED)
		return r;

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
				 * is free, every further one as agg__resend_ok allows. */
				uint8_t *asked = agg__req(t, v);
				size_t lb = len - 1 - (low_bp - 1) / 8;
				uint8_t lbit = (uint8_t)(1u << ((low_bp - 1) & 7));
				if ((asked[lb] & lbit) && !agg__resend_ok(t, low_bp)) {
					t->st.resends_limited++;
					return AGG_DUP_IGNORED;
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
				if (v->cand != AGG__CAND_FAR) {
					agg__earn_paced(t);
					agg__notice(t, o, v, t->abm);
				}
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
enum agg_verdict agg__input_down(struct agg_tree *t, const struct wire_pkt *p,
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

	uint32_t li, rnd = p->inca.round;
	struct agg__ver *v;
	enum agg_verdict r = lookup_round(t, p, &li, &v);
	if (r != AGG_ABSORBED)
		return r;
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
enum agg_verdict agg__input_nack(struct agg_tree *t, const struct wire_pkt *p,
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
