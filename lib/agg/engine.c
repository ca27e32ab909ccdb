/* lib/agg/engine.c: the pure per-tree aggregation engine: slot pools with two versions per slot,
 * contributor bitmaps, dedup, BIER replication of results, repair notices to the members a
 * round misses (docs/protocol.md "Switch slot semantics", "Repair notices"). Not here: the
 * reduce kernels (reduce.c), I/O, clocks, threads (the switch).
 * This file: tree creation, statistics, admission of rounds into slot versions and the entry
 * point agg_tree_input; the upward, downward and notice paths are in engine_path.c, the sends,
 * BIER replication and repair notices in engine_send.c, the shared layout in engine_int.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agg/engine_int.h"

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
	free(t->rdenied);
	free(t->rpaced_ns);
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
	t->rdenied = calloc(bsl + 1, sizeof *t->rdenied);
	t->rpaced_ns = calloc(bsl + 1, sizeof *t->rpaced_ns);
	if (!t->rcredit || !t->rdenied || !t->rpaced_ns)
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

/* Checks shared by both directions after the bitmap tests: slot ownership, type/op, sizes.
 * On success stores the local slot index. */
enum agg_verdict agg__check_payload(const struct agg_tree *t, const struct wire_pkt *p,
				    uint32_t *li)
{
	uint16_t slot = p->inca.slot;
	if (slot >= t->cfg.nslots)
		return AGG_DROP_SLOT;
	if (!agg__slot_owned(t, slot))
		return AGG_DROP_SLOT;
	*li = agg__local_of(t, slot);
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

/* The version holding round rnd, or NULL. */
struct agg__ver *agg__find(struct agg_tree *t, uint32_t li, uint32_t rnd)
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

/* A version for round rnd, which no version holds: returns 0 and the version to reset into
 * *out with *cand the probation kind (0: none); else the drop verdict. result: the
 * round arrives as a result from the parent (which may start only T + 1, or a slot without a
 * top round). */
enum agg_verdict agg__admit(struct agg_tree *t, uint32_t li, uint32_t rnd, bool result,
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
void agg__clear(struct agg_tree *t, struct agg__ver *v)
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
static void agg__reset_all(struct agg_tree *t, uint32_t epoch)
{
	size_t nver = (size_t)(t->nlocal ? t->nlocal : 1) * 2;
	memset(t->vers, 0, nver * sizeof *t->vers);
	for (size_t i = 0; i < nver; i++)
		t->vers[i].lprev = t->vers[i].lnext = AGG__NOLINK;
	for (size_t l = 0; l < AGG__L_COUNT; l++)
		t->lhead[l] = t->ltail[l] = AGG__NOLINK;
	memset(t->rcredit, 0, t->cfg.bsl_bits + 1);
	memset(t->rdenied, 0, (t->cfg.bsl_bits + 1) * sizeof *t->rdenied);
	memset(t->rpaced_ns, 0, (t->cfg.bsl_bits + 1) * sizeof *t->rpaced_ns);
	t->npaced_ns = 0;
	t->npending = 0;
	t->epoch = epoch;
	t->st.epoch_resets++;
}

void agg__epoch_check(struct agg_tree *t, const struct wire_pkt *p)
{
	if (p->inca.epoch && p->inca.epoch != t->epoch)
		agg__reset_all(t, p->inca.epoch);
}

/* Result re-sends (a duplicate of a complete round, answered to its sender only): the first
 * one per sender and round is free; each further one for the same round costs the sender a
 * re-send credit. A sender earns one with each contribution absorbed and each duplicate of a
 * round still collecting (packets not answered yet), at most AGG__RCREDIT_MAX banked. So the
 * re-sends a sender gets never outnumber the valid packets it sent, and a flood of
 * duplicates of complete rounds gets one answer per round plus the banked few.
 *
 * Credit alone can starve a member: one whose copies of its last result keep getting lost has
 * nothing new to send, so it earns nothing while its RTO resends go unanswered, and it fails
 * the call while the others complete it. So a sender without credit is still answered:
 * - by the clock (agg_tree_clock), once per AGG__RPACE_NS: a member resends once per RTO
 *   (2 ms at least, backing off), so every RTO of a waiting member is answered however long
 *   its losses last, while a flood draws at most one answer per AGG__RPACE_NS more;
 * - by count, its 1st, 2nd and then every AGG__RDENY_EVERY-th duplicate since it last earned
 *   credit (a member sends about two per RTO: its oldest chunk and the liveness probe), which
 *   is all a tree without a clock has; a flood of N duplicates gets about N /
 *   AGG__RDENY_EVERY answers more. */
#define AGG__RCREDIT_MAX 8
#define AGG__RDENY_EVERY 4
void agg__rearn(struct agg_tree *t, unsigned bp)
{
	if (t->rcredit[bp] < AGG__RCREDIT_MAX)
		t->rcredit[bp]++;
	t->rdenied[bp] = 0;
}

void agg_tree_clock(struct agg_tree *t, uint64_t now_ns)
{
	t->now_ns = now_ns;
}

bool agg__resend_ok(struct agg_tree *t, unsigned bp)
{
	if (t->rcredit[bp]) {
		t->rcredit[bp]--;
		return true;
	}
	if (agg__paced(t, &t->rpaced_ns[bp]))
		return true;
	if (t->rdenied[bp] < UINT16_MAX)
		t->rdenied[bp]++;
	uint16_t d = t->rdenied[bp];
	return d <= 2 || d % AGG__RDENY_EVERY == 0;
}

/* Same round, same call: everything but the count, which differs between the owner's data and
 * the others' header-only packets of a bcast / allgather (and between a data result and a
 * header-only one). */
bool agg__meta_eq_nocount(const struct agg__ver *v, const struct wire_pkt *p)
{
	return v->coll == p->inca.coll && v->dtype == p->inca.dtype && v->op == p->inca.op &&
	       v->va == p->reth.va && v->imm == p->imm && v->owner == p->inca.owner;
}

bool agg__meta_eq(const struct agg__ver *v, const struct wire_pkt *p)
{
	if (!agg__meta_eq_nocount(v, p))
		return false;
	if (agg__from_owner(v->coll))
		return v->count == p->inca.count || !v->count || !p->inca.count;
	return v->count == p->inca.count;
}

/* Start round rnd on version v (agg__admit chose it; cand: on probation). */
void agg__reset(struct agg_tree *t, struct agg__ver *v, const struct wire_pkt *p,
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
