/* lib/agg/engine_test.c: unit tests of the aggregation engine: config validation, single-level
 * trees of 2..300 members (BSL 64/256/4096, SI 0/1), BIER replication, duplicates, forwarding,
 * RESULT handling at a non-root, every drop verdict, sharding, deterministic float order. */
#include <math.h>

#include "engine_test_util.h"

/* ---------------------------------------------------------------- a configurable test tree */

#define T_MAX_MEMBERS 512

struct ttree {
	struct agg_tree_cfg cfg;
	size_t len;
	unsigned n;
	unsigned bp[T_MAX_MEMBERS];   /* member i's bit position */
	uint16_t bfr[T_MAX_MEMBERS];  /* member i's BFR-id */
	uint32_t nbr[T_MAX_MEMBERS];  /* member i's neighbour */
	unsigned ngroups, groupsize;
	uint8_t abm[TU_BITS_MAX];
	uint8_t fbm[T_MAX_MEMBERS][TU_BITS_MAX]; /* group g's F-BM */
	struct agg_bift_entry bift[T_MAX_MEMBERS];
};

#define NBR_BASE 1000u

/* n members spread over the bit-string (stride bsl/n) in set si; groupsize members share a
 * neighbour (1: each member is its own neighbour). */
static void ttree_init(struct ttree *t, unsigned bsl, uint8_t si, unsigned n, unsigned groupsize,
		       uint16_t nslots, uint32_t slot_bytes, bool root)
{
	memset(t, 0, sizeof *t);
	CHECK(n <= T_MAX_MEMBERS && n <= bsl);
	t->len = bsl / 8;
	t->n = n;
	t->groupsize = groupsize;
	unsigned stride = bsl / n;
	for (unsigned i = 0; i < n; i++) {
		t->bp[i] = 1 + i * stride;
		t->bfr[i] = (uint16_t)(si * bsl + t->bp[i]);
		t->nbr[i] = NBR_BASE + i / groupsize;
		tu_set(t->abm, t->len, t->bp[i]);
		tu_set(t->fbm[i / groupsize], t->len, t->bp[i]);
	}
	t->ngroups = (n + groupsize - 1) / groupsize;
	for (unsigned i = 0; i < n; i++) {
		t->bift[i].bp = t->bp[i];
		t->bift[i].nbr = t->nbr[i];
		t->bift[i].fbm = t->fbm[i / groupsize];
	}
	t->cfg.tree_id = 42;
	t->cfg.rkey = 0x5eed;
	t->cfg.nslots = nslots;
	t->cfg.slot_bytes = slot_bytes;
	t->cfg.bsl_bits = bsl;
	t->cfg.si = si;
	t->cfg.abm = t->abm;
	t->cfg.root = root;
	t->cfg.parent_nbr = root ? AGG_NBR_NONE : 77;
	t->cfg.own_bfr_id = root ? 0 : 900;
	t->cfg.nbift = n;
	t->cfg.bift = t->bift;
	t->cfg.check_sender = true;
}

static struct agg_tree *ttree_create(const struct ttree *t)
{
	struct agg_tree *e = NULL;
	int rc = agg_tree_create(&t->cfg, &e);
	CHECK_EQ(rc, 0);
	CHECK(e);
	return e;
}

static int64_t val64(unsigned m, uint64_t g, unsigned e)
{
	return (int64_t)(tu_mix((uint64_t)m << 40 ^ g << 12 ^ e) >> 8) - ((int64_t)1 << 55);
}

/* Checks the header of an engine send against the round it belongs to. */
static void check_hdr(const struct ttree *t, const struct wire_pkt *p, uint16_t slot, uint32_t rnd,
		      uint8_t flags, uint16_t bfr, enum inca_dtype dt, enum inca_op op,
		      uint16_t count)
{
	CHECK_EQ(p->bth.opcode, WIRE_OPCODE_UC_WRITE_ONLY_IMM);
	CHECK_EQ(p->bth.pkey, WIRE_PKEY_DEFAULT);
	CHECK_EQ(p->bth.dest_qp, 0);
	CHECK_EQ(p->bth.psn, 0);
	CHECK_EQ(p->reth.rkey, t->cfg.rkey);
	CHECK_EQ(p->reth.va, (uint64_t)slot * 4096 + (uint64_t)rnd * 4096 * t->cfg.nslots);
	CHECK_EQ(p->imm, rnd * t->cfg.nslots + slot);
	CHECK_EQ(p->inca.version, WIRE_INCA_VERSION);
	CHECK_EQ(p->inca.flags, flags);
	CHECK_EQ(p->inca.coll, WIRE_COLL_ALLREDUCE);
	CHECK_EQ(p->inca.dtype, dt);
	CHECK_EQ(p->inca.op, op);
	CHECK_EQ(p->inca.tree_id, t->cfg.tree_id);
	CHECK_EQ(p->inca.slot, slot);
	CHECK_EQ(p->inca.round, rnd);
	CHECK_EQ(p->inca.bfr_id, bfr);
	CHECK_EQ(p->inca.bsl_code, tu_bsl_code(t->cfg.bsl_bits));
	CHECK_EQ(p->inca.si, t->cfg.si);
	CHECK_EQ(p->inca.count, count);
	CHECK_EQ(p->data_len, count * tu_esize(dt));
	CHECK(p->inca.bits);
	CHECK(p->data || count == 0);
}

static void fill_up(const struct ttree *t, struct tu_pkt *p, unsigned m, uint16_t slot,
		    uint32_t rnd, uint16_t count)
{
	tu_pkt_up(p, &t->cfg, t->bfr[m], slot, rnd, INCA_INT64, INCA_SUM, count);
	uint64_t g = (uint64_t)rnd * t->cfg.nslots + slot;
	for (unsigned e = 0; e < count; e++) {
		int64_t x = val64(m, g, e);
		memcpy(p->data + 8 * e, &x, 8);
	}
}

/* ---------------------------------------------------------------- tests */

static void test_verdict_names(void)
{
	for (int i = 0; i < AGG_VERDICT_COUNT; i++) {
		const char *n = agg_verdict_name((enum agg_verdict)i);
		CHECK(n && *n);
		for (const char *c = n; *c; c++)
			CHECK((*c >= 'a' && *c <= 'z') || *c == '_');
		for (int j = 0; j < i; j++)
			CHECK(strcmp(n, agg_verdict_name((enum agg_verdict)j)) != 0);
	}
	CHECK(strcmp(agg_verdict_name(AGG_DROP_KEY), "drop_key") == 0);
	CHECK(strcmp(agg_verdict_name(AGG_DUP_UP_RESENT), "dup_up_resent") == 0);
	CHECK(strcmp(agg_verdict_name(AGG_VERDICT_COUNT), "unknown") == 0);
}

static void expect_einval(const struct agg_tree_cfg *c, int line)
{
	struct agg_tree *e = (struct agg_tree *)1;
	int rc = agg_tree_create(c, &e);
	if (rc != -EINVAL || e != NULL) {
		fprintf(stderr, "engine_test.c:%d: expected -EINVAL, got %d\n", line, rc);
		exit(1);
	}
}

static void test_create_validation(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, 64, 0, 4, 1, 8, 256, false);
	struct agg_tree *e = ttree_create(t);
	CHECK_EQ(agg_tree_max_sends(e), 10); /* 4 results + 4 notices + 2 */
	const struct agg_tree_cfg *c = agg_tree_cfg(e);
	CHECK(c && c->abm != t->abm && memcmp(c->abm, t->abm, 8) == 0); /* copied */
	CHECK(c->bift != t->bift && c->bift[2].bp == t->bp[2]);
	agg_tree_destroy(e);
	agg_tree_destroy(NULL);

	struct agg_tree_cfg b;
	CHECK_EQ(agg_tree_create(&t->cfg, NULL), -EINVAL);
	expect_einval(NULL, __LINE__);
#define BAD(stmt)                          \
	do {                               \
		b = t->cfg;                \
		stmt;                      \
		expect_einval(&b, __LINE__); \
	} while (0)
	BAD(b.bsl_bits = 32);
	BAD(b.bsl_bits = 96);
	BAD(b.bsl_bits = 8192);
	BAD(b.nslots = 0);
	BAD(b.slot_bytes = 0);
	BAD(b.slot_bytes = 4097);
	BAD(b.abm = NULL);
	uint8_t zero[8] = { 0 };
	BAD(b.abm = zero);
	struct agg_bift_entry bad[4];
	memcpy(bad, t->bift, sizeof bad);
	bad[1].bp = 0;
	BAD(b.bift = bad);
	bad[1].bp = 65;
	BAD(b.bift = bad);
	bad[1].bp = t->bp[0]; /* duplicate bit position */
	BAD(b.bift = bad);
	memcpy(bad, t->bift, sizeof bad);
	bad[3].nbr = AGG_NBR_NONE;
	BAD(b.bift = bad);
	BAD(b.nbift = 3); /* member 4's bit has no entry */
	BAD(b.bift = NULL);
	BAD(b.parent_nbr = AGG_NBR_NONE);
	BAD(b.nshards = 4; b.shard = 4);
#undef BAD
	/* the root needs no parent; nshards 1 ignores shard; BIFT may list non-members */
	b = t->cfg;
	b.root = true;
	b.parent_nbr = AGG_NBR_NONE;
	b.nshards = 1;
	b.shard = 9;
	CHECK_EQ(agg_tree_create(&b, &e), 0);
	agg_tree_destroy(e);
	free(t);
}

/* n members, every chunk's contributions fed in random order interleaved across the window.
 * Each round must complete exactly once with the exact sum, one copy per neighbour. */
static void run_single_level(unsigned bsl, uint8_t si, unsigned n, unsigned groupsize,
			     uint16_t nslots, unsigned nchunks, uint16_t count, uint64_t seed)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, bsl, si, n, groupsize, nslots, 8u * count, true);
	struct agg_tree *e = ttree_create(t);
	CHECK_EQ(agg_tree_max_sends(e), 2 * t->ngroups + 2);
	struct tu_rng rng = { seed };
	size_t cap = agg_tree_max_sends(e);
	struct agg_send *out = calloc(cap, sizeof *out);
	size_t *order = calloc((size_t)nslots * n, sizeof *order);
	unsigned *got = calloc(nslots, sizeof *got);
	unsigned *completed = calloc(nchunks, sizeof *completed);
	struct tu_pkt *p = malloc(sizeof *p);
	unsigned seen_groups[T_MAX_MEMBERS];
	size_t partial = 0;
	uint8_t *arrived = calloc((size_t)nslots * n, 1); /* [window chunk][member] */
	uint64_t nnotices = 0;

	for (unsigned base = 0; base < nchunks; base += nslots) {
		unsigned w = nchunks - base < nslots ? nchunks - base : nslots;
		size_t k = 0;
		for (unsigned c = 0; c < w; c++)
			for (unsigned m = 0; m < n; m++)
				order[k++] = (size_t)c * n + m;
		tu_shuffle(&rng, order, k);
		memset(got, 0, nslots * sizeof *got);
		memset(arrived, 0, (size_t)nslots * n);
		for (size_t i = 0; i < k; i++) {
			unsigned c = (unsigned)(order[i] / n), m = (unsigned)(order[i] % n);
			uint64_t g = base + c;
			uint16_t slot = (uint16_t)(g % nslots);
			uint32_t rnd = (uint32_t)(g / nslots);
			fill_up(t, p, m, slot, rnd, count);
			size_t ns = 99;
			enum agg_verdict v = agg_tree_input(e, &p->pkt, t->nbr[m], out, cap, &ns);
			got[c]++;
			arrived[(size_t)c * n + m] = 1;
			partial += got[c] == 1;
			partial -= got[c] == n;
			CHECK_EQ(agg_tree_pending(e), partial); /* rounds begun and not complete */
			if (got[c] < n) {
				CHECK_VERDICT(v, AGG_ABSORBED);
				CHECK_EQ(ns, 0);
				continue;
			}
			CHECK_VERDICT(v, AGG_COMPLETED);
			completed[g]++;
			/* Arrival is shuffled here, so a completion finds earlier chunks still
			 * collecting (in a FIFO network their missing contributions would be lost):
			 * after the results it notices exactly the members still missing there. */
			CHECK(ns >= t->ngroups);
			for (size_t s = t->ngroups; s < ns; s++) {
				const struct wire_pkt *r = &out[s].pkt;
				CHECK_EQ(r->inca.flags, WIRE_F_NACK);
				CHECK_EQ(r->inca.count, 0);
				CHECK_EQ(r->data_len, 0);
				uint64_t g2 = r->imm;
				CHECK(g2 >= base && g2 < g); /* an earlier chunk of this window */
				CHECK_EQ(r->inca.slot, g2 % nslots);
				CHECK_EQ(r->inca.round, g2 / nslots);
				unsigned c2 = (unsigned)(g2 - base);
				CHECK(got[c2] < n);
				CHECK(out[s].nbr >= NBR_BASE && out[s].nbr < NBR_BASE + t->ngroups);
				uint8_t want_bits[WIRE_BSL_MAX / 8] = { 0 };
				for (unsigned mm = 0; mm < n; mm++)
					if (!arrived[(size_t)c2 * n + mm] && t->nbr[mm] == out[s].nbr)
						tu_set(want_bits, t->len, t->bp[mm]);
				CHECK(memcmp(r->inca.bits, want_bits, t->len) == 0);
				nnotices++;
			}
			ns = t->ngroups;
			memset(seen_groups, 0, sizeof seen_groups);
			for (size_t s = 0; s < ns; s++) {
				const struct wire_pkt *r = &out[s].pkt;
				check_hdr(t, r, slot, rnd, WIRE_F_RESULT, 0, INCA_INT64, INCA_SUM,
					  count);
				CHECK(out[s].nbr >= NBR_BASE && out[s].nbr < NBR_BASE + t->ngroups);
				unsigned grp = out[s].nbr - NBR_BASE;
				CHECK_EQ(seen_groups[grp]++, 0); /* one copy per neighbour */
				/* bit-string = A-BM AND F-BM of that neighbour */
				CHECK(memcmp(r->inca.bits, t->fbm[grp], t->len) == 0);
				for (unsigned x = 0; x < count; x++) {
					int64_t want = 0, have;
					for (unsigned mm = 0; mm < n; mm++)
						want = (int64_t)((uint64_t)want +
								 (uint64_t)val64(mm, g, x));
					memcpy(&have, r->data + 8 * x, 8);
					CHECK_EQ(have, want);
				}
			}
		}
	}
	for (unsigned g = 0; g < nchunks; g++)
		CHECK_EQ(completed[g], 1);

	struct agg_tree_stats st;
	agg_tree_get_stats(e, &st);
	CHECK_EQ(st.rx_pkts, (uint64_t)nchunks * n);
	CHECK_EQ(st.rx_bytes, (uint64_t)nchunks * n * count * 8);
	CHECK_EQ(st.contributions, (uint64_t)nchunks * n);
	CHECK_EQ(st.aggregations, nchunks);
	CHECK_EQ(st.tx_pkts, (uint64_t)nchunks * t->ngroups + nnotices);
	CHECK_EQ(st.notices, nnotices);
	CHECK(st.notices <= st.contributions); /* paid for by progress */
	CHECK_EQ(st.tx_bytes, (uint64_t)nchunks * t->ngroups * count * 8);
	CHECK_EQ(st.duplicates, 0);
	for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT; v++)
		CHECK_EQ(st.drops[v], 0);

	agg_tree_destroy(e);
	free(out);
	free(order);
	free(got);
	free(completed);
	free(arrived);
	free(p);
	free(t);
}

static void test_single_level(void)
{
	run_single_level(64, 0, 2, 1, 4, 64, 4, 1);
	run_single_level(64, 0, 3, 1, 8, 100, 1, 2);
	run_single_level(64, 0, 17, 4, 16, 200, 16, 3);
	run_single_level(64, 0, 64, 1, 32, 200, 8, 4);
	run_single_level(64, 0, 64, 8, 256, 600, 2, 5);
	run_single_level(64, 1, 10, 3, 4, 40, 4, 6); /* SI 1: BFR-ids 65.. */
	run_single_level(256, 0, 100, 1, 16, 80, 8, 7);
	run_single_level(256, 0, 256, 16, 8, 40, 8, 8);
	run_single_level(4096, 0, 300, 20, 4, 12, 32, 9);
	run_single_level(64, 0, 5, 1, 1, 30, 512, 10); /* one slot, full 4 KiB chunks */
}

static void feed_expect(struct agg_tree *e, const struct wire_pkt *p, uint32_t ingress,
			struct agg_send *out, size_t cap, enum agg_verdict want, size_t want_ns,
			int line)
{
	size_t ns = 1234;
	enum agg_verdict v = agg_tree_input(e, p, ingress, out, cap, &ns);
	if (v != want || ns != want_ns) {
		fprintf(stderr, "engine_test.c:%d: got %s/%zu sends, expected %s/%zu\n", line,
			agg_verdict_name(v), ns, agg_verdict_name(want), want_ns);
		exit(1);
	}
}
#define FEED(e, p, in, want, ns) feed_expect(e, &(p)->pkt, in, out, cap, want, ns, __LINE__)

/* Root duplicates: noticed while collecting, re-sent to exactly the duplicate's sender when
 * complete (paid with its re-send credit), P-BMs with bits the sender does not speak for
 * dropped. */
static void test_root_duplicates(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, 64, 0, 4, 1, 4, 64, true);
	/* members 0 and 1 share a neighbour (F-BM {1,2}); 2 and 3 have their own */
	memset(t->fbm, 0, sizeof t->fbm);
	tu_set(t->fbm[0], 8, t->bp[0]);
	tu_set(t->fbm[0], 8, t->bp[1]);
	tu_set(t->fbm[1], 8, t->bp[2]);
	tu_set(t->fbm[2], 8, t->bp[3]);
	uint32_t nb[4] = { 10, 10, 11, 12 };
	const uint8_t *fb[4] = { t->fbm[0], t->fbm[0], t->fbm[1], t->fbm[2] };
	for (int i = 0; i < 4; i++) {
		t->nbr[i] = nb[i];
		t->bift[i].nbr = nb[i];
		t->bift[i].fbm = fb[i];
	}
	struct agg_tree *e = ttree_create(t);
	size_t cap = agg_tree_max_sends(e);
	CHECK_EQ(cap, 8); /* 3 neighbours: results + notices + 2 */
	struct agg_send out[8];
	struct tu_pkt *p = malloc(sizeof *p), *q = malloc(sizeof *q);

	fill_up(t, p, 0, 0, 0, 4);
	FEED(e, p, 10, AGG_ABSORBED, 0);
	/* A duplicate while collecting: the members still missing are noticed, but one absorbed
	 * contribution pays for one notice only (the lowest missing bit's neighbour: member 1,
	 * through nbr 10, alone in the bit-string) */
	FEED(e, p, 10, AGG_DUP_IGNORED, 1);
	CHECK_EQ(out[0].nbr, 10);
	CHECK_EQ(out[0].pkt.inca.flags, WIRE_F_NACK);
	CHECK_EQ(out[0].pkt.inca.count, 0);
	{
		uint8_t want[8] = { 0 };
		tu_set(want, 8, t->bp[1]);
		CHECK(memcmp(out[0].pkt.inca.bits, want, 8) == 0);
	}
	struct agg_tree_stats st0;
	agg_tree_get_stats(e, &st0);
	CHECK_EQ(st0.notices, 1);
	CHECK_EQ(st0.notices_limited, 2);
	fill_up(t, p, 1, 0, 0, 4);
	FEED(e, p, 10, AGG_ABSORBED, 0);
	fill_up(t, p, 2, 0, 0, 4);
	FEED(e, p, 11, AGG_ABSORBED, 0);
	fill_up(t, p, 3, 0, 0, 4);
	FEED(e, p, 12, AGG_COMPLETED, 3);
	CHECK_EQ(out[0].nbr, 10);
	CHECK(memcmp(out[0].pkt.inca.bits, t->fbm[0], 8) == 0);
	CHECK_EQ(out[1].nbr, 11);
	CHECK_EQ(out[2].nbr, 12);
	int64_t sum0;
	memcpy(&sum0, out[0].pkt.data, 8);
	CHECK_EQ(sum0, (int64_t)((uint64_t)val64(0, 0, 0) + (uint64_t)val64(1, 0, 0) +
				 (uint64_t)val64(2, 0, 0) + (uint64_t)val64(3, 0, 0)));

	/* duplicate of member 1 (shares nbr 10 with member 0): only its own bit, marked re-sent */
	fill_up(t, p, 1, 0, 0, 4);
	FEED(e, p, 10, AGG_DUP_RESENT, 1);
	CHECK_EQ(out[0].nbr, 10);
	check_hdr(t, &out[0].pkt, 0, 0, WIRE_F_RESULT | WIRE_F_RETX, 0, INCA_INT64, INCA_SUM, 4);
	uint8_t want[8] = { 0 };
	tu_set(want, 8, t->bp[1]);
	CHECK(memcmp(out[0].pkt.inca.bits, want, 8) == 0);
	int64_t x;
	memcpy(&x, out[0].pkt.data, 8);
	CHECK_EQ(x, sum0);

	/* a multi-bit duplicate spanning two neighbours: not a set member 2 speaks for */
	fill_up(t, q, 2, 0, 0, 4);
	tu_set(q->bits, 8, t->bp[3]);
	FEED(e, q, 11, AGG_DROP_BITMAP, 0);

	/* slot 1: a member's P-BM with another member's bit too ({0,1}, sharing nbr 10) is
	 * dropped; each member's own bit is absorbed */
	fill_up(t, q, 0, 1, 0, 4);
	tu_set(q->bits, 8, t->bp[1]);
	FEED(e, q, 10, AGG_DROP_BITMAP, 0);
	fill_up(t, q, 0, 1, 0, 4);
	FEED(e, q, 10, AGG_ABSORBED, 0);
	fill_up(t, p, 1, 1, 0, 4);
	tu_set(p->bits, 8, t->bp[2]);
	FEED(e, p, 10, AGG_DROP_BITMAP, 0);
	fill_up(t, p, 1, 1, 0, 4);
	FEED(e, p, 10, AGG_ABSORBED, 0);
	FEED(e, p, 10, AGG_DUP_IGNORED, 2); /* notices to members 2 and 3, one each */
	CHECK_EQ(out[0].nbr, 11);
	CHECK_EQ(out[1].nbr, 12);
	CHECK(out[0].pkt.inca.flags == WIRE_F_NACK && out[1].pkt.inca.flags == WIRE_F_NACK);
	memset(want, 0, 8);
	tu_set(want, 8, t->bp[2]);
	CHECK(memcmp(out[0].pkt.inca.bits, want, 8) == 0);
	/* the same member asking again at once starts a new wave: noticed again (credit
	 * permitting: 6 contributions earned 6, 3 are spent) ... */
	FEED(e, p, 10, AGG_DUP_IGNORED, 2);
	/* ... but another member's duplicate joins the wave: nothing sent */
	FEED(e, q, 10, AGG_DUP_IGNORED, 0);
	/* the last credit: one notice of a new wave, then nothing */
	FEED(e, p, 10, AGG_DUP_IGNORED, 1);
	FEED(e, p, 10, AGG_DUP_IGNORED, 0);

	/* cap smaller than needed behaves like loss: only cap copies, state still advances */
	fill_up(t, p, 2, 1, 0, 4);
	FEED(e, p, 11, AGG_ABSORBED, 0);
	fill_up(t, p, 3, 1, 0, 4);
	feed_expect(e, &p->pkt, 12, out, 1, AGG_COMPLETED, 1, __LINE__);
	/* re-sends of this round to member 3: the first is free, then one credit each of the
	 * two its contributions earned; then only its 1st, 2nd and every 4th unanswered duplicate */
	feed_expect(e, &p->pkt, 12, NULL, 0, AGG_DUP_RESENT, 0, __LINE__);
	FEED(e, p, 12, AGG_DUP_RESENT, 1);
	CHECK_EQ(out[0].nbr, 12);
	FEED(e, p, 12, AGG_DUP_RESENT, 1);
	FEED(e, p, 12, AGG_DUP_RESENT, 1); /* 1st without credit */
	FEED(e, p, 12, AGG_DUP_RESENT, 1); /* 2nd */
	FEED(e, p, 12, AGG_DUP_IGNORED, 0); /* 3rd */
	FEED(e, p, 12, AGG_DUP_RESENT, 1); /* 4th */

	struct agg_tree_stats st;
	agg_tree_get_stats(e, &st);
	CHECK_EQ(st.duplicates, 14);
	CHECK_EQ(st.results_resent, 6);
	CHECK_EQ(st.resends_limited, 1);
	CHECK_EQ(st.aggregations, 2);
	CHECK_EQ(st.contributions, 8);
	CHECK_EQ(st.drops[AGG_DROP_BITMAP], 3);
	CHECK_EQ(st.notices, 6);
	CHECK(st.notices <= st.contributions);
	CHECK_EQ(st.tx_pkts, 3 + 1 + 1 + 1 + 1 + 3 + st.notices); /* + 3 re-sends without credit */
	agg_tree_destroy(e);
	free(p);
	free(q);
	free(t);
}

/* Non-root: aggregate up, duplicate -> aggregate again, RESULT from the parent stored and
 * replicated to packet bits AND A-BM, later duplicates get the stored result. */
static void test_nonroot(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, 64, 0, 4, 1, 4, 64, false);
	struct agg_tree *e = ttree_create(t);
	size_t cap = agg_tree_max_sends(e);
	struct agg_send out[8];
	struct tu_pkt *p = malloc(sizeof *p), *r = malloc(sizeof *r);
	int64_t sum = 0;

	CHECK_EQ(agg_tree_pending(e), 0);
	for (unsigned m = 0; m < 4; m++) {
		fill_up(t, p, m, 2, 5, 3);
		sum = (int64_t)((uint64_t)sum + (uint64_t)val64(m, 5 * 4 + 2, 1));
		FEED(e, p, t->nbr[m], m < 3 ? AGG_ABSORBED : AGG_COMPLETED, m < 3 ? 0 : 1);
		CHECK_EQ(agg_tree_pending(e), 1); /* collecting, then up-sent: a result is due */
	}
	for (int pass = 0; pass < 2; pass++) {
		CHECK_EQ(out[0].nbr, 77);
		check_hdr(t, &out[0].pkt, 2, 5, 0, 900, INCA_INT64, INCA_SUM, 3);
		CHECK(memcmp(out[0].pkt.inca.bits, t->abm, 8) == 0); /* P-BM = A-BM */
		int64_t x;
		memcpy(&x, out[0].pkt.data + 8, 8);
		CHECK_EQ(x, sum);
		if (pass == 0) {
			fill_up(t, p, 2, 2, 5, 3);
			FEED(e, p, t->nbr[2], AGG_DUP_UP_RESENT, 1);
		}
	}
	/* the same wave: another member's duplicate does not send up again ... */
	fill_up(t, p, 1, 2, 5, 3);
	FEED(e, p, t->nbr[1], AGG_DUP_IGNORED, 0);
	/* ... a member asking a second time starts a new wave */
	fill_up(t, p, 1, 2, 5, 3);
	FEED(e, p, t->nbr[1], AGG_DUP_UP_RESENT, 1);

	/* RESULT from the parent: bits = all members + one bit that is not ours */
	fill_up(t, r, 0, 2, 5, 3);
	r->pkt.inca.flags = WIRE_F_RESULT;
	r->pkt.inca.bfr_id = 0;
	memcpy(r->bits, t->abm, 8);
	tu_set(r->bits, 8, 60);
	for (unsigned i = 0; i < 3; i++) {
		int64_t v = 1000 + i; /* authoritative, deliberately not our own sum */
		memcpy(r->data + 8 * i, &v, 8);
	}
	FEED(e, r, 5, AGG_DROP_SENDER, 0); /* not from the parent */
	FEED(e, r, 77, AGG_RESULT_DOWN, 4);
	CHECK_EQ(agg_tree_pending(e), 0); /* the result came down: nothing due */
	for (unsigned s = 0; s < 4; s++) {
		CHECK_EQ(out[s].nbr, t->nbr[s]);
		check_hdr(t, &out[s].pkt, 2, 5, WIRE_F_RESULT, 0, INCA_INT64, INCA_SUM, 3);
		uint8_t want[8] = { 0 };
		tu_set(want, 8, t->bp[s]);
		CHECK(memcmp(out[s].pkt.inca.bits, want, 8) == 0);
		int64_t x;
		memcpy(&x, out[s].pkt.data + 16, 8);
		CHECK_EQ(x, 1002);
	}
	/* duplicate from a member now gets the stored result */
	fill_up(t, p, 3, 2, 5, 3);
	FEED(e, p, t->nbr[3], AGG_DUP_RESENT, 1);
	CHECK_EQ(out[0].nbr, t->nbr[3]);
	int64_t x;
	memcpy(&x, out[0].pkt.data, 8);
	CHECK_EQ(x, 1000);
	/* the parent re-sends to one member only */
	memset(r->bits, 0, 8);
	tu_set(r->bits, 8, t->bp[1]);
	FEED(e, r, 77, AGG_RESULT_DOWN, 1);
	CHECK_EQ(out[0].nbr, t->nbr[1]);
	/* nobody of ours addressed */
	memset(r->bits, 0, 8);
	tu_set(r->bits, 8, 60);
	FEED(e, r, 77, AGG_DROP_BITMAP, 0);

	/* a RESULT for a round we never saw (e.g. after a restart) is stored too */
	fill_up(t, r, 0, 3, 0, 3);
	r->pkt.inca.flags = WIRE_F_RESULT;
	memcpy(r->bits, t->abm, 8);
	FEED(e, r, 77, AGG_RESULT_DOWN, 4);
	fill_up(t, p, 1, 3, 0, 3);
	FEED(e, p, t->nbr[1], AGG_DUP_RESENT, 1);
	/* round 1 starts (round 0 is complete here); while it collects, a RESULT two rounds
	 * ahead is outside the window, and one from before round 0 is stale */
	fill_up(t, p, 1, 3, 1, 3);
	FEED(e, p, t->nbr[1], AGG_ABSORBED, 0);
	fill_up(t, r, 0, 3, 3, 3);
	r->pkt.inca.flags = WIRE_F_RESULT;
	memcpy(r->bits, t->abm, 8);
	FEED(e, r, 77, AGG_DROP_FUTURE, 0);
	fill_up(t, r, 0, 3, UINT32_MAX, 3);
	r->pkt.inca.flags = WIRE_F_RESULT;
	memcpy(r->bits, t->abm, 8);
	FEED(e, r, 77, AGG_DROP_STALE, 0);
	/* mismatching RESULT for a live round */
	fill_up(t, r, 0, 3, 1, 3);
	r->pkt.inca.flags = WIRE_F_RESULT;
	memcpy(r->bits, t->abm, 8);
	r->pkt.imm ^= 1;
	FEED(e, r, 77, AGG_DROP_MISMATCH, 0);

	struct agg_tree_stats st;
	agg_tree_get_stats(e, &st);
	CHECK_EQ(st.results_down, 3);
	CHECK_EQ(st.aggregations, 1);
	CHECK_EQ(st.duplicates, 5);
	CHECK_EQ(st.results_resent, 4);
	CHECK_EQ(st.drops[AGG_DROP_SENDER], 1);
	CHECK_EQ(st.drops[AGG_DROP_BITMAP], 1);
	CHECK_EQ(st.drops[AGG_DROP_STALE], 1);
	CHECK_EQ(st.drops[AGG_DROP_FUTURE], 1);
	CHECK_EQ(st.drops[AGG_DROP_MISMATCH], 1);
	agg_tree_destroy(e);
	free(p);
	free(r);
	free(t);
}

/* P-BM AND A-BM empty: forwarded unchanged (a copy) to the parent; at the root: no route. */
/* out[i] must be a header-only repair notice for chunk (slot, rnd) naming exactly member m. */
static void check_notice(const struct ttree *t, const struct agg_send *s, uint16_t slot,
			 uint32_t rnd, unsigned m, uint16_t bfr)
{
	uint8_t want[8] = { 0 };
	tu_set(want, 8, t->bp[m]);
	CHECK_EQ(s->nbr, t->nbr[m]);
	check_hdr(t, &s->pkt, slot, rnd, WIRE_F_NACK, bfr, INCA_INT64, INCA_SUM, 0);
	CHECK(memcmp(s->pkt.inca.bits, want, 8) == 0);
}

/* Root repair notices: a completing chunk notices exactly the members still missing from an
 * older collecting chunk, once; a duplicate while collecting notices them again, once per
 * wave; complete rounds and duplicates of complete rounds never cause a notice; a flood of
 * duplicates gets at most the credit that absorbed contributions earned. */
static void test_notices_root(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, 64, 0, 4, 1, 8, 64, true);
	struct agg_tree *e = ttree_create(t);
	size_t cap = agg_tree_max_sends(e);
	struct agg_send out[16];
	struct tu_pkt *p = malloc(sizeof *p);
	struct agg_tree_stats st;

	/* chunk 0 (slot 0): member 3's contribution is lost */
	for (unsigned m = 0; m < 3; m++) {
		fill_up(t, p, m, 0, 0, 2);
		FEED(e, p, t->nbr[m], AGG_ABSORBED, 0);
	}
	/* chunk 1 completes: 4 results, then one notice for chunk 0 to member 3 only */
	for (unsigned m = 0; m < 4; m++) {
		fill_up(t, p, m, 1, 0, 2);
		FEED(e, p, t->nbr[m], m < 3 ? AGG_ABSORBED : AGG_COMPLETED, m < 3 ? 0 : 5);
	}
	for (int i = 0; i < 4; i++)
		CHECK_EQ(out[i].pkt.inca.flags, WIRE_F_RESULT);
	check_notice(t, &out[4], 0, 0, 3, 0);
	/* chunk 2 completes: chunk 0 was noticed already, nothing more */
	for (unsigned m = 0; m < 4; m++) {
		fill_up(t, p, m, 2, 0, 2);
		FEED(e, p, t->nbr[m], m < 3 ? AGG_ABSORBED : AGG_COMPLETED, m < 3 ? 0 : 4);
	}
	/* member 0 waits and resends chunk 0: member 3 is noticed again; member 1 joins */
	fill_up(t, p, 0, 0, 0, 2);
	FEED(e, p, t->nbr[0], AGG_DUP_IGNORED, 1);
	check_notice(t, &out[0], 0, 0, 3, 0);
	fill_up(t, p, 1, 0, 0, 2);
	FEED(e, p, t->nbr[1], AGG_DUP_IGNORED, 0);
	/* member 3 resends: chunk 0 completes, no notice (nothing older is collecting) */
	fill_up(t, p, 3, 0, 0, 2);
	p->pkt.inca.flags = WIRE_F_RETX;
	FEED(e, p, t->nbr[3], AGG_COMPLETED, 4);
	for (int i = 0; i < 4; i++) /* repaired: results say so (no RTT sample) */
		CHECK_EQ(out[i].pkt.inca.flags, WIRE_F_RESULT | WIRE_F_RETX);
	/* duplicates of complete rounds: the stored result only, marked as a re-send (RETX) */
	fill_up(t, p, 2, 0, 0, 2);
	FEED(e, p, t->nbr[2], AGG_DUP_RESENT, 1);
	CHECK_EQ(out[0].pkt.inca.flags, WIRE_F_RESULT | WIRE_F_RETX);
	fill_up(t, p, 2, 1, 0, 2);
	FEED(e, p, t->nbr[2], AGG_DUP_RESENT, 1);
	CHECK_EQ(out[0].pkt.inca.flags, WIRE_F_RESULT | WIRE_F_RETX);
	agg_tree_get_stats(e, &st);
	CHECK_EQ(st.notices, 2);
	CHECK_EQ(st.notices_limited, 0);

	/* Hostile member 0: chunk 3 has only its contribution, then 1000 duplicates, each one a
	 * "new wave" (the same member asking again). Every duplicate could notice 3 members;
	 * the credit (one per absorbed contribution, at most max_sends banked) allows far
	 * fewer, and never more than the contributions absorbed. */
	fill_up(t, p, 0, 3, 0, 2);
	FEED(e, p, t->nbr[0], AGG_ABSORBED, 0);
	uint64_t sent = 0;
	for (int i = 0; i < 1000; i++) {
		size_t ns = 0;
		CHECK_VERDICT(agg_tree_input(e, &p->pkt, t->nbr[0], out, cap, &ns), AGG_DUP_IGNORED);
		for (size_t k = 0; k < ns; k++)
			CHECK_EQ(out[k].pkt.inca.flags, WIRE_F_NACK);
		sent += ns;
	}
	agg_tree_get_stats(e, &st);
	CHECK(sent <= cap);
	CHECK_EQ(st.notices, 2 + sent);
	CHECK(st.notices <= st.contributions);
	CHECK(st.notices_limited >= 3 * 1000 - sent);
	/* progress earns credit again: a contribution pays for one more notice */
	fill_up(t, p, 1, 3, 0, 2);
	FEED(e, p, t->nbr[1], AGG_ABSORBED, 0);
	fill_up(t, p, 0, 3, 0, 2);
	FEED(e, p, t->nbr[0], AGG_DUP_IGNORED, 1);
	CHECK(out[0].nbr == t->nbr[2] && out[0].pkt.inca.flags == WIRE_F_NACK);

	/* With a clock and no credit left, a flood of duplicates draws one notice per
	 * millisecond: 1000 in the same millisecond one, 1000 more a millisecond later one. */
	for (int ms = 1; ms <= 2; ms++) {
		agg_tree_clock(e, (uint64_t)ms * 1000000 + 123);
		agg_tree_get_stats(e, &st);
		uint64_t before = st.notices;
		for (int i = 0; i < 1000; i++) {
			size_t ns = 0;
			CHECK_VERDICT(agg_tree_input(e, &p->pkt, t->nbr[0], out, cap, &ns),
				      AGG_DUP_IGNORED);
		}
		agg_tree_get_stats(e, &st);
		CHECK_EQ(st.notices, before + 1);
	}
	agg_tree_clock(e, 0);

	/* a notice arriving at the root (it has no parent) is dropped */
	fill_up(t, p, 0, 4, 0, 0);
	p->pkt.inca.flags = WIRE_F_NACK;
	FEED(e, p, t->nbr[0], AGG_DROP_NO_ROUTE, 0);

	agg_tree_destroy(e);
	free(p);
	free(t);
}

/* Non-root: a notice from the parent re-sends an aggregate that went up (once per wave:
 * member duplicates join it), notices the members a collecting version still misses (once),
 * and is dropped from anywhere but the parent. */
static void test_notices_nonroot(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, 64, 0, 4, 1, 8, 64, false);
	struct agg_tree *e = ttree_create(t);
	size_t cap = agg_tree_max_sends(e);
	struct agg_send out[16];
	struct tu_pkt *p = malloc(sizeof *p), *n = malloc(sizeof *n);

	/* chunk 0 goes up */
	for (unsigned m = 0; m < 4; m++) {
		fill_up(t, p, m, 0, 0, 2);
		FEED(e, p, t->nbr[m], m < 3 ? AGG_ABSORBED : AGG_COMPLETED, m < 3 ? 0 : 1);
	}
	/* the parent misses it: its notice names all our bits */
	fill_up(t, n, 0, 0, 0, 0);
	n->pkt.inca.flags = WIRE_F_NACK;
	n->pkt.inca.bfr_id = 0;
	memcpy(n->bits, t->abm, 8);
	FEED(e, n, 55, AGG_DROP_SENDER, 0); /* not from the parent */
	FEED(e, n, 77, AGG_NACK_DOWN, 1);
	CHECK_EQ(out[0].nbr, 77);
	check_hdr(t, &out[0].pkt, 0, 0, 0, 900, INCA_INT64, INCA_SUM, 2);
	CHECK(memcmp(out[0].pkt.inca.bits, t->abm, 8) == 0);
	/* members' duplicates for the same loss join that wave */
	fill_up(t, p, 2, 0, 0, 2);
	FEED(e, p, t->nbr[2], AGG_DUP_IGNORED, 0);
	fill_up(t, p, 2, 0, 0, 2);
	FEED(e, p, t->nbr[2], AGG_DUP_UP_RESENT, 1); /* asking again: a new wave */
	/* a flood of notices re-sends the aggregate only as often as credit allows (4
	 * contributions earned 4, one is spent) */
	{
		unsigned up = 0;
		for (int i = 0; i < 1000; i++) {
			size_t ns = 0;
			CHECK_VERDICT(agg_tree_input(e, &n->pkt, 77, out, cap, &ns), AGG_NACK_DOWN);
			up += (unsigned)ns;
		}
		CHECK_EQ(up, 3);
	}

	/* chunk 1: member 1 missing; chunk 2 completes here and notices it (sender: our id) */
	for (unsigned m = 0; m < 4; m++) {
		if (m != 1) {
			fill_up(t, p, m, 1, 0, 2);
			FEED(e, p, t->nbr[m], AGG_ABSORBED, 0);
		}
	}
	for (unsigned m = 0; m < 4; m++) {
		fill_up(t, p, m, 2, 0, 2);
		FEED(e, p, t->nbr[m], m < 3 ? AGG_ABSORBED : AGG_COMPLETED, m < 3 ? 0 : 2);
	}
	CHECK_EQ(out[0].nbr, 77); /* the aggregate up */
	check_notice(t, &out[1], 1, 0, 1, 900);
	/* the parent's notice for chunk 1: already noticed here, nothing */
	fill_up(t, n, 0, 1, 0, 0);
	n->pkt.inca.flags = WIRE_F_NACK;
	n->pkt.inca.bfr_id = 0;
	memcpy(n->bits, t->abm, 8);
	FEED(e, n, 77, AGG_NACK_DOWN, 0);
	/* chunk 3: member 0 missing, no later completion here; the parent's notice naming
	 * members 0 and 2 notices member 0 only (2 is in) */
	for (unsigned m = 1; m < 4; m++) {
		fill_up(t, p, m, 3, 0, 2);
		FEED(e, p, t->nbr[m], AGG_ABSORBED, 0);
	}
	fill_up(t, n, 0, 3, 0, 0);
	n->pkt.inca.flags = WIRE_F_NACK;
	n->pkt.inca.bfr_id = 0;
	memset(n->bits, 0, 8);
	tu_set(n->bits, 8, t->bp[0]);
	tu_set(n->bits, 8, t->bp[2]);
	FEED(e, n, 77, AGG_NACK_DOWN, 1);
	check_notice(t, &out[0], 3, 0, 0, 900);
	FEED(e, n, 77, AGG_NACK_DOWN, 0); /* once */
	/* a notice for a round this switch never saw: nothing to repair */
	fill_up(t, n, 0, 5, 0, 0);
	n->pkt.inca.flags = WIRE_F_NACK;
	memcpy(n->bits, t->abm, 8);
	FEED(e, n, 77, AGG_NACK_DOWN, 0);

	agg_tree_destroy(e);
	free(p);
	free(n);
	free(t);
}

static void test_forwarding(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, 64, 0, 4, 1, 4, 64, false);
	struct agg_tree *e = ttree_create(t);
	size_t cap = agg_tree_max_sends(e);
	struct agg_send out[8];
	struct tu_pkt *p = malloc(sizeof *p);

	tu_pkt_up(p, &t->cfg, 50, 300 /* not even our slot range */, 9, INCA_FP32, INCA_MAX, 200);
	p->pkt.inca.flags = WIRE_F_RETX;
	p->pkt.bth.psn = 12345;
	p->pkt.bth.dest_qp = 0x100;
	for (unsigned i = 0; i < 800; i++)
		p->data[i] = (uint8_t)(i * 7);
	FEED(e, p, 3, AGG_FORWARDED, 1);
	const struct wire_pkt *f = &out[0].pkt;
	CHECK_EQ(out[0].nbr, 77);
	CHECK(f->inca.bits != p->bits && f->data != p->data); /* engine-owned copies */
	CHECK(memcmp(f->inca.bits, p->bits, 8) == 0);
	CHECK_EQ(f->data_len, 800);
	CHECK(memcmp(f->data, p->data, 800) == 0);
	CHECK_EQ(f->inca.flags, WIRE_F_RETX);
	CHECK_EQ(f->inca.bfr_id, 50);
	CHECK_EQ(f->inca.slot, 300);
	CHECK_EQ(f->inca.round, 9);
	CHECK_EQ(f->inca.dtype, INCA_FP32);
	CHECK_EQ(f->inca.op, INCA_MAX);
	CHECK_EQ(f->inca.count, 200);
	CHECK_EQ(f->reth.va, p->pkt.reth.va);
	CHECK_EQ(f->imm, p->pkt.imm);
	CHECK_EQ(f->bth.opcode, WIRE_OPCODE_UC_WRITE_ONLY_IMM);
	CHECK_EQ(f->bth.pkey, WIRE_PKEY_DEFAULT);
	CHECK_EQ(f->bth.psn, 0); /* per-QP fields are the caller's */
	CHECK_EQ(f->bth.dest_qp, 0);
	CHECK_EQ(f->reth.rkey, t->cfg.rkey);
	memset(p->data, 0, 800);
	memset(p->bits, 0, 8);
	CHECK_EQ(f->data[799], (uint8_t)(799 * 7));
	CHECK(tu_test(f->inca.bits, 8, 50));

	struct agg_tree_stats st;
	agg_tree_get_stats(e, &st);
	CHECK_EQ(st.forwarded, 1);
	CHECK_EQ(st.tx_pkts, 1);
	CHECK_EQ(st.contributions, 0);
	agg_tree_destroy(e);

	t->cfg.root = true;
	e = ttree_create(t);
	tu_pkt_up(p, &t->cfg, 50, 0, 0, INCA_INT64, INCA_SUM, 1);
	FEED(e, p, 3, AGG_DROP_NO_ROUTE, 0);
	agg_tree_destroy(e);
	free(p);
	free(t);
}

/* Every drop verdict, each counted once in stats.drops[]. */
static void test_drops(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, 64, 0, 4, 1, 4, 64, true);
	t->cfg.dtype_mask = 1u << INCA_INT64 | 1u << INCA_FP32;
	t->cfg.op_mask = 1u << INCA_SUM | 1u << INCA_MAX | 1u << INCA_BAND;
	struct agg_tree *e = ttree_create(t);
	size_t cap = agg_tree_max_sends(e);
	struct agg_send out[8];
	struct tu_pkt *p = malloc(sizeof *p);
	unsigned want[AGG_VERDICT_COUNT] = { 0 }, fed = 0;
#define DROP(setup, verdict, ingress)                   \
	do {                                            \
		fill_up(t, p, 0, 0, 0, 4);              \
		setup;                                  \
		FEED(e, p, ingress, verdict, 0);        \
		want[verdict]++;                        \
		fed++;                                  \
	} while (0)

	/* job epoch 5 begins (on slot 3, round 1); an older epoch is dropped */
	fill_up(t, p, 0, 3, 1, 4);
	p->pkt.inca.epoch = 5;
	FEED(e, p, t->nbr[0], AGG_ABSORBED, 0);
	fed++;
	DROP(p->pkt.inca.epoch = 4, AGG_DROP_EPOCH, t->nbr[0]);
	/* P_Key: another partition, or a limited member of ours against a limited tree below */
	DROP(p->pkt.bth.pkey = 0x1234, AGG_DROP_PKEY, t->nbr[0]);
	DROP(p->pkt.bth.pkey = 0xFFFE, AGG_DROP_PKEY, t->nbr[0]);
	DROP(p->pkt.reth.rkey ^= 1, AGG_DROP_KEY, t->nbr[0]);
	DROP(p->pkt.inca.tree_id = 43, AGG_DROP_TREE, t->nbr[0]);
	DROP(p->pkt.inca.slot = 4, AGG_DROP_SLOT, t->nbr[0]);
	DROP(p->pkt.inca.bsl_code = 2, AGG_DROP_BITMAP, t->nbr[0]);
	DROP(p->pkt.inca.si = 1, AGG_DROP_BITMAP, t->nbr[0]);
	DROP(p->pkt.inca.bits = NULL, AGG_DROP_BITMAP, t->nbr[0]);
	DROP(memset(p->bits, 0, 8), AGG_DROP_BITMAP, t->nbr[0]);          /* empty P-BM */
	DROP(tu_set(p->bits, 8, 64), AGG_DROP_BITMAP, t->nbr[0]);         /* not within A-BM */
	DROP(memset(p->bits, 0, 8); tu_set(p->bits, 8, 64), AGG_DROP_NO_ROUTE, t->nbr[0]);
	DROP(p->pkt.inca.flags = WIRE_F_RESULT, AGG_DROP_NO_ROUTE, t->nbr[0]); /* at the root */
	DROP((void)0, AGG_DROP_SENDER, t->nbr[1]);                          /* wrong ingress */
	DROP((void)0, AGG_DROP_SENDER, AGG_NBR_NONE);
	DROP(p->pkt.inca.bfr_id = t->bfr[1], AGG_DROP_BITMAP, t->nbr[0]); /* another member's P-BM */
	DROP(p->pkt.inca.dtype = INCA_INT32; p->pkt.data_len = 16, AGG_DROP_UNSUPPORTED, t->nbr[0]);
	DROP(p->pkt.inca.op = INCA_PROD, AGG_DROP_UNSUPPORTED, t->nbr[0]);
	DROP(p->pkt.inca.dtype = INCA_FP32; p->pkt.inca.op = INCA_BAND; p->pkt.data_len = 16,
	     AGG_DROP_UNSUPPORTED, t->nbr[0]); /* bitwise on floats */
	DROP(p->pkt.inca.dtype = 12, AGG_DROP_UNSUPPORTED, t->nbr[0]);
	DROP(p->pkt.inca.op = 7, AGG_DROP_UNSUPPORTED, t->nbr[0]);
	DROP(p->pkt.inca.count = 9; p->pkt.data_len = 72, AGG_DROP_TOO_BIG, t->nbr[0]);
	DROP(p->pkt.data_len = 24, AGG_DROP_MISMATCH, t->nbr[0]); /* count * size != len */

	/* a live round: later packets must match the first one's meta */
	fill_up(t, p, 0, 0, 0, 4);
	FEED(e, p, t->nbr[0], AGG_ABSORBED, 0);
	fed++;
#define MIS(setup)                                                           \
	do {                                                                 \
		fill_up(t, p, 1, 0, 0, 4);                                   \
		setup;                                                       \
		FEED(e, p, t->nbr[1], AGG_DROP_MISMATCH, 0);                 \
		want[AGG_DROP_MISMATCH]++;                                   \
		fed++;                                                       \
	} while (0)
	MIS(p->pkt.inca.count = 3; p->pkt.data_len = 24);
	MIS(p->pkt.inca.dtype = INCA_FP32; p->pkt.data_len = 16; p->pkt.inca.count = 4;
	    p->pkt.data_len = 16);
	MIS(p->pkt.inca.op = INCA_MAX);
	MIS(p->pkt.reth.va += 8);
	MIS(p->pkt.imm += 1);
	MIS(p->pkt.inca.coll = WIRE_COLL_REDUCE);
#undef MIS
	/* finish round 0 of slot 0 */
	for (unsigned m = 1; m < 4; m++) {
		fill_up(t, p, m, 0, 0, 4);
		FEED(e, p, t->nbr[m], m < 3 ? AGG_ABSORBED : AGG_COMPLETED, m < 3 ? 0 : 4);
		fed++;
	}
	/* round 0 complete: a round just ahead but not the next one is dropped, a far one is
	 * held on probation (absorbed, it holds nothing up) */
	fill_up(t, p, 0, 0, 4, 4);
	FEED(e, p, t->nbr[0], AGG_DROP_FUTURE, 0);
	want[AGG_DROP_FUTURE]++;
	fed++;
	fill_up(t, p, 0, 0, 1000, 4);
	FEED(e, p, t->nbr[0], AGG_ABSORBED, 0);
	fed++;
	/* round 1 (the next one) displaces it; while round 1 collects, rounds 3 and 4 are
	 * outside the window */
	fill_up(t, p, 0, 0, 1, 4);
	FEED(e, p, t->nbr[0], AGG_ABSORBED, 0);
	fed++;
	fill_up(t, p, 1, 0, 3, 4);
	FEED(e, p, t->nbr[1], AGG_DROP_FUTURE, 0);
	fill_up(t, p, 1, 0, 4, 4);
	FEED(e, p, t->nbr[1], AGG_DROP_FUTURE, 0);
	want[AGG_DROP_FUTURE] += 2;
	fed += 2;
	/* round 1 completes and round 2 starts; round 0 is then stale */
	for (unsigned m = 1; m < 4; m++) {
		fill_up(t, p, m, 0, 1, 4);
		FEED(e, p, t->nbr[m], m < 3 ? AGG_ABSORBED : AGG_COMPLETED, m < 3 ? 0 : 4);
		fed++;
	}
	fill_up(t, p, 0, 0, 0, 4);
	FEED(e, p, t->nbr[0], AGG_DUP_RESENT, 4 - 3); /* round 0 still live: re-send */
	fed++;
	fill_up(t, p, 2, 0, 2, 4);
	FEED(e, p, t->nbr[2], AGG_ABSORBED, 0);
	fed++;
	fill_up(t, p, 0, 0, 0, 4);
	FEED(e, p, t->nbr[0], AGG_DROP_STALE, 0);
	want[AGG_DROP_STALE]++;
	fed++;

	struct agg_tree_stats st;
	agg_tree_get_stats(e, &st);
	CHECK_EQ(st.rx_pkts, fed);
	for (int v = 0; v < AGG_VERDICT_COUNT; v++) {
		if (v >= AGG_DROP_FIRST)
			CHECK(want[v] >= 1); /* every drop verdict exercised here */
		CHECK_EQ(st.drops[v], want[v]);
	}
	CHECK_EQ(st.aggregations, 2);
	agg_tree_destroy(e);
	free(p);
	free(t);
#undef DROP
}

/* Slot sharding: this instance owns the slots of blocks (slot / WIRE_SLOT_BLOCK) with
 * block % nshards == shard only: with 3 shards and 80 slots, shard 1 has blocks 1 and 4 (both
 * full). */
static bool shard1_owns(uint16_t s)
{
	return s < 80 && (s / WIRE_SLOT_BLOCK) % 3 == 1;
}

static void test_sharding(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, 64, 0, 3, 1, 80, 64, true);
	t->cfg.nshards = 3;
	t->cfg.shard = 1;
	struct agg_tree *e = ttree_create(t);
	size_t cap = agg_tree_max_sends(e);
	struct agg_send out[8];
	struct tu_pkt *p = malloc(sizeof *p);
	for (uint16_t s = 0; s < 90; s++) {
		for (unsigned m = 0; m < 3; m++) {
			fill_up(t, p, m, s, 0, 2);
			if (!shard1_owns(s)) {
				FEED(e, p, t->nbr[m], AGG_DROP_SLOT, 0);
				continue;
			}
			FEED(e, p, t->nbr[m], m < 2 ? AGG_ABSORBED : AGG_COMPLETED, m < 2 ? 0 : 3);
		}
		if (shard1_owns(s)) {
			int64_t x;
			memcpy(&x, out[2].pkt.data + 8, 8);
			CHECK_EQ(x, (int64_t)((uint64_t)val64(0, s, 1) + (uint64_t)val64(1, s, 1) +
					      (uint64_t)val64(2, s, 1)));
		}
	}
	/* Round 1 of every owned slot misses member 2; member 0 asking again draws a repair
	 * notice to member 2 that names this slot (the local index maps back block-wise). */
	unsigned noticed = 0;
	for (uint16_t s = 0; s < 80; s++) {
		if (!shard1_owns(s))
			continue;
		fill_up(t, p, 0, s, 1, 2);
		FEED(e, p, t->nbr[0], AGG_ABSORBED, 0);
		fill_up(t, p, 1, s, 1, 2);
		FEED(e, p, t->nbr[1], AGG_ABSORBED, 0);
		fill_up(t, p, 0, s, 1, 2);
		p->pkt.inca.flags = WIRE_F_RETX;
		FEED(e, p, t->nbr[0], AGG_DUP_IGNORED, 1);
		CHECK_EQ(out[0].nbr, t->nbr[2]);
		CHECK(out[0].pkt.inca.flags & WIRE_F_NACK);
		CHECK_EQ(out[0].pkt.inca.slot, s);
		CHECK_EQ(out[0].pkt.imm, (uint32_t)(1 * t->cfg.nslots + s));
		noticed++;
	}
	CHECK_EQ(noticed, 2 * WIRE_SLOT_BLOCK);
	struct agg_tree_stats st;
	agg_tree_get_stats(e, &st);
	CHECK_EQ(st.aggregations, 2 * WIRE_SLOT_BLOCK);
	CHECK_EQ(st.drops[AGG_DROP_SLOT], 3 * (90 - 2 * WIRE_SLOT_BLOCK));
	agg_tree_destroy(e);
	free(p);
	free(t);
}

/* ---------------------------------------------------------------- deterministic mode */

static void fill_float(uint8_t *dst, enum inca_dtype dt, unsigned count, uint64_t seed)
{
	for (unsigned i = 0; i < count; i++) {
		uint64_t h = tu_mix(seed * 1000003 + i);
		double mant = (double)(h & 0xFFFFFF) / 16777216.0 + 0.5;
		int ex = (int)((h >> 24) % 40) - 20;
		double v = ldexp(mant, ex) * ((h >> 40) & 1 ? -1.0 : 1.0);
		if (dt == INCA_FP32) {
			float f = (float)v;
			memcpy(dst + 4 * i, &f, 4);
		} else if (dt == INCA_FP64) {
			memcpy(dst + 8 * i, &v, 8);
		} else {
			uint16_t x = dt == INCA_FP16 ? agg_fp32_to_fp16((float)(v / 64.0))
						     : agg_fp32_to_bf16((float)v);
			memcpy(dst + 2 * i, &x, 2);
		}
	}
}

/* Contributions arrive in random orders; the deterministic engine's result must equal, bit for
 * bit, the reduction in ascending bit-position order. The same data through the ordinary
 * engine must differ for some order (otherwise this test could not detect anything). */
static void run_deterministic(enum inca_dtype dt, unsigned n, unsigned per, unsigned trials)
{
	const unsigned count = 64;
	size_t esz = tu_esize(dt), bytes = count * esz;
	unsigned ncontrib = n / per;
	struct ttree *t = calloc(1, sizeof *t);
	/* per > 1: every per members sit below one child switch (one BIFT F-BM) */
	ttree_init(t, 64, 0, n, per, 4, (uint32_t)bytes, true);
	t->cfg.check_sender = false;
	t->cfg.deterministic = true;
	struct agg_tree *det = ttree_create(t);
	t->cfg.deterministic = false;
	struct agg_tree *plain = ttree_create(t);
	size_t cap = agg_tree_max_sends(det);
	struct agg_send *out = calloc(cap, sizeof *out);
	uint8_t (*contrib)[512] = calloc(ncontrib, sizeof *contrib);
	uint8_t ref[512];
	size_t order[64];
	struct tu_rng rng = { 77 + dt };
	struct tu_pkt *p = malloc(sizeof *p);
	unsigned plain_differs = 0;

	for (unsigned trial = 0; trial < trials; trial++) {
		uint16_t slot = (uint16_t)(trial % 4);
		uint32_t rnd = trial / 4;
		for (unsigned c = 0; c < ncontrib; c++)
			fill_float(contrib[c], dt, count, trial * 64 + c);
		/* reference: ascending bit position = ascending contribution index */
		memcpy(ref, contrib[0], bytes);
		for (unsigned c = 1; c < ncontrib; c++)
			CHECK_EQ(agg_reduce(ref, contrib[c], count, dt, INCA_SUM), 0);
		for (unsigned c = 0; c < ncontrib; c++)
			order[c] = c;
		tu_shuffle(&rng, order, ncontrib);
		for (int which = 0; which < 2; which++) {
			struct agg_tree *e = which ? plain : det;
			for (unsigned k = 0; k < ncontrib; k++) {
				unsigned c = (unsigned)order[k];
				tu_pkt_up(p, &t->cfg, t->bfr[c * per], slot, rnd, dt, INCA_SUM,
					  (uint16_t)count);
				for (unsigned b = 1; b < per; b++) /* a child switch's sub-tree */
					tu_set(p->bits, 8, t->bp[c * per + b]);
				if (per > 1)
					p->pkt.inca.bfr_id = 0; /* sent by the child switch */
				memcpy(p->data, contrib[c], bytes);
				size_t ns;
				enum agg_verdict v = agg_tree_input(e, &p->pkt, 1, out, cap, &ns);
				CHECK_VERDICT(v, k + 1 < ncontrib ? AGG_ABSORBED : AGG_COMPLETED);
			}
			CHECK_EQ(out[0].pkt.data_len, bytes);
			if (!which)
				CHECK(memcmp(out[0].pkt.data, ref, bytes) == 0);
			else
				plain_differs += memcmp(out[0].pkt.data, ref, bytes) != 0;
		}
	}
	CHECK(plain_differs > 0);
	agg_tree_destroy(det);
	agg_tree_destroy(plain);
	free(out);
	free(contrib);
	free(p);
	free(t);
}

static void test_deterministic(void)
{
	run_deterministic(INCA_FP32, 16, 1, 200);
	run_deterministic(INCA_FP32, 16, 4, 60); /* child aggregates {1-4},{5-8},.. */
	run_deterministic(INCA_FP64, 24, 1, 100);
	run_deterministic(INCA_BF16, 8, 1, 100);
	run_deterministic(INCA_FP16, 8, 2, 100);
}

/* The engine, these tests and lib/wire's BIER helpers must agree on RFC 8279 numbering: a tree
 * built with wire_bier_* must accept members' P-BMs built by tu_pkt_up and address results
 * to the bits wire_bier_test expects. */
static void test_wire_numbering(void)
{
	static const unsigned bsls[] = { 64, 256, 4096 };
	for (unsigned bi = 0; bi < 3; bi++) {
		for (uint8_t si = 0; si < 2; si++) {
			unsigned bsl = bsls[bi];
			size_t len = bsl / 8;
			uint16_t ids[3] = { (uint16_t)(si * bsl + 1), (uint16_t)(si * bsl + bsl / 2 + 3),
					    (uint16_t)(si * bsl + bsl) };
			uint8_t abm[TU_BITS_MAX] = { 0 }, own[3][TU_BITS_MAX];
			struct agg_bift_entry bift[3];
			memset(own, 0, sizeof own);
			for (int i = 0; i < 3; i++) {
				unsigned bp = wire_bier_bp(ids[i], bsl, si);
				CHECK(bp >= 1 && bp <= bsl);
				CHECK_EQ(wire_bier_bfr_id(bp, bsl, si), ids[i]);
				wire_bier_set(abm, len, bp);
				wire_bier_set(own[i], len, bp);
				bift[i] = (struct agg_bift_entry){ .bp = bp, .nbr = 10u + (unsigned)i,
								   .fbm = own[i] };
			}
			struct agg_tree_cfg c = { .tree_id = 1, .rkey = 2, .nslots = 1,
						  .slot_bytes = 8, .bsl_bits = bsl, .si = si,
						  .abm = abm, .root = true, .nbift = 3, .bift = bift,
						  .check_sender = true };
			struct agg_tree *e = NULL;
			CHECK_EQ(agg_tree_create(&c, &e), 0);
			struct agg_send out[4];
			struct tu_pkt *p = malloc(sizeof *p);
			for (int i = 0; i < 3; i++) {
				tu_pkt_up(p, &c, ids[i], 0, 0, INCA_UINT64, INCA_BXOR, 1);
				size_t ns;
				enum agg_verdict v = agg_tree_input(e, &p->pkt, 10u + (unsigned)i, out, 4, &ns);
				CHECK_VERDICT(v, i < 2 ? AGG_ABSORBED : AGG_COMPLETED);
			}
			for (int i = 0; i < 3; i++) {
				CHECK_EQ(out[i].nbr, 10 + i);
				CHECK_EQ(wire_bier_popcount(out[i].pkt.inca.bits, len), 1);
				CHECK(wire_bier_test(out[i].pkt.inca.bits, len,
						     wire_bier_bp(ids[i], bsl, si)));
			}
			free(p);
			agg_tree_destroy(e);
		}
	}
}

/* Per-chunk destinations (owner field): reduce / reduce-scatter send the result data only to
 * the owner and header-only results to the others; bcast / allgather take data only from the
 * owner and send it to everyone else, header-only to the owner. Also through a non-root that
 * gets a header-only result from its parent. */
static void test_owner(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	struct tu_pkt *p = calloc(1, sizeof *p);
	struct agg_send out[8];
	size_t cap = 8, ns;
	CHECK(t && p);
	ttree_init(t, 64, 0, 4, 1, 4, 64, true);
	struct agg_tree *e = ttree_create(t);
	uint8_t colls[2] = { WIRE_COLL_REDUCE, WIRE_COLL_REDUCE_SCATTER };
	for (int k = 0; k < 2; k++) {
		uint16_t owner = t->bfr[2];
		for (unsigned m = 0; m < 4; m++) {
			fill_up(t, p, m, 1, (uint32_t)k, 3);
			p->pkt.inca.coll = colls[k];
			p->pkt.inca.owner = owner;
			enum agg_verdict v = agg_tree_input(e, &p->pkt, t->nbr[m], out, cap, &ns);
			CHECK_EQ(v, m < 3 ? AGG_ABSORBED : AGG_COMPLETED);
		}
		CHECK_EQ(ns, 4);
		for (size_t i = 0; i < ns; i++) {
			bool to_owner = out[i].nbr == t->nbr[2];
			CHECK_EQ(out[i].pkt.inca.owner, owner);
			CHECK_EQ(out[i].pkt.inca.count, to_owner ? 3 : 0);
			CHECK_EQ(out[i].pkt.data_len, to_owner ? 24 : 0);
			if (to_owner) {
				int64_t sum = 0, got;
				for (unsigned m = 0; m < 4; m++)
					sum += val64(m, 1 + (uint64_t)k * 4, 0);
				memcpy(&got, out[i].pkt.data, 8);
				CHECK_EQ(got, sum);
			}
		}
		/* A duplicate from a non-owner after completion: header-only re-send to it. */
		fill_up(t, p, 0, 1, (uint32_t)k, 3);
		p->pkt.inca.coll = colls[k];
		p->pkt.inca.owner = owner;
		CHECK_EQ(agg_tree_input(e, &p->pkt, t->nbr[0], out, cap, &ns), AGG_DUP_RESENT);
		CHECK_EQ(ns, 1);
		CHECK_EQ(out[0].pkt.inca.count, 0);
	}
	/* Bcast / allgather: member 1 owns the data, the others send header-only packets. */
	uint8_t pcolls[2] = { WIRE_COLL_BCAST, WIRE_COLL_ALLGATHER };
	for (int k = 0; k < 2; k++) {
		uint16_t owner = t->bfr[1];
		for (unsigned m = 0; m < 4; m++) {
			fill_up(t, p, m, 2, (uint32_t)k, m == 1 ? 5 : 0);
			p->pkt.inca.coll = pcolls[k];
			p->pkt.inca.owner = owner;
			enum agg_verdict v = agg_tree_input(e, &p->pkt, t->nbr[m], out, cap, &ns);
			CHECK_EQ(v, m < 3 ? AGG_ABSORBED : AGG_COMPLETED);
		}
		CHECK_EQ(ns, 4);
		for (size_t i = 0; i < ns; i++) {
			bool is_owner = out[i].nbr == t->nbr[1];
			CHECK_EQ(out[i].pkt.inca.count, is_owner ? 0 : 5);
			if (!is_owner) {
				int64_t got;
				memcpy(&got, out[i].pkt.data + 8 * 4, 8);
				CHECK_EQ(got, val64(1, 2 + (uint64_t)k * 4, 4));
			}
		}
	}
	/* Two data contributions to one bcast round: the second is refused. */
	fill_up(t, p, 0, 3, 0, 5);
	p->pkt.inca.coll = WIRE_COLL_BCAST;
	p->pkt.inca.owner = t->bfr[0];
	CHECK_EQ(agg_tree_input(e, &p->pkt, t->nbr[0], out, cap, &ns), AGG_ABSORBED);
	fill_up(t, p, 1, 3, 0, 5);
	p->pkt.inca.coll = WIRE_COLL_BCAST;
	p->pkt.inca.owner = t->bfr[0];
	CHECK_EQ(agg_tree_input(e, &p->pkt, t->nbr[1], out, cap, &ns), AGG_DROP_MISMATCH);
	agg_tree_destroy(e);

	/* Non-root leaf: a header-only result from the parent (the owner is elsewhere) goes
	 * down header-only; an aggregate of a bcast without the owner below goes up empty. */
	ttree_init(t, 64, 0, 2, 1, 4, 64, false);
	e = ttree_create(t);
	for (unsigned m = 0; m < 2; m++) {
		fill_up(t, p, m, 0, 0, 0);
		p->pkt.inca.coll = WIRE_COLL_ALLGATHER;
		p->pkt.inca.owner = 50; /* a member of another leaf */
		agg_tree_input(e, &p->pkt, t->nbr[m], out, cap, &ns);
	}
	CHECK_EQ(ns, 1);
	CHECK_EQ(out[0].nbr, t->cfg.parent_nbr);
	CHECK_EQ(out[0].pkt.inca.count, 0);
	CHECK_EQ(out[0].pkt.inca.owner, 50);
	/* the result arrives with data: both members get it */
	fill_up(t, p, 0, 0, 0, 6);
	p->pkt.inca.flags = WIRE_F_RESULT;
	p->pkt.inca.coll = WIRE_COLL_ALLGATHER;
	p->pkt.inca.owner = 50;
	p->pkt.inca.bfr_id = 0;
	memcpy(p->bits, t->abm, t->len);
	CHECK_EQ(agg_tree_input(e, &p->pkt, t->cfg.parent_nbr, out, cap, &ns), AGG_RESULT_DOWN);
	CHECK_EQ(ns, 2);
	CHECK_EQ(out[0].pkt.inca.count, 6);
	CHECK_EQ(out[1].pkt.inca.count, 6);
	/* reduce owned elsewhere: the members' data goes up, a header-only result comes down */
	for (unsigned m = 0; m < 2; m++) {
		fill_up(t, p, m, 1, 0, 2);
		p->pkt.inca.coll = WIRE_COLL_REDUCE;
		p->pkt.inca.owner = 50;
		agg_tree_input(e, &p->pkt, t->nbr[m], out, cap, &ns);
	}
	CHECK_EQ(ns, 1);
	CHECK_EQ(out[0].pkt.inca.count, 2);
	fill_up(t, p, 0, 1, 0, 0);
	p->pkt.inca.flags = WIRE_F_RESULT;
	p->pkt.inca.coll = WIRE_COLL_REDUCE;
	p->pkt.inca.owner = 50;
	p->pkt.inca.bfr_id = 0;
	memcpy(p->bits, t->abm, t->len);
	CHECK_EQ(agg_tree_input(e, &p->pkt, t->cfg.parent_nbr, out, cap, &ns), AGG_RESULT_DOWN);
	CHECK_EQ(ns, 2);
	CHECK_EQ(out[0].pkt.inca.count, 0);
	CHECK_EQ(out[1].pkt.inca.count, 0);
	agg_tree_destroy(e);
	free(t);
	free(p);
}

/* ---------------------------------------------------------------- hostile input */

/* One round of slot `slot` from every member (data salted per job): every contribution but the
 * last is absorbed, the last completes, and every result copy carries the exact sum. */
static void h_round(struct ttree *t, struct agg_tree *e, uint16_t slot, uint32_t rnd,
		    uint32_t epoch, int64_t salt)
{
	size_t cap = agg_tree_max_sends(e), ns = 0;
	struct agg_send out[16];
	struct tu_pkt *p = malloc(sizeof *p);
	uint64_t g = (uint64_t)rnd * t->cfg.nslots + slot;
	int64_t sum = 0;
	CHECK(cap <= 16);
	for (unsigned m = 0; m < t->n; m++) {
		fill_up(t, p, m, slot, rnd, 2);
		p->pkt.inca.epoch = epoch;
		for (unsigned i = 0; i < 2; i++) {
			int64_t x = val64(m, g, i) + salt;
			memcpy(p->data + 8 * i, &x, 8);
			if (i == 0)
				sum = (int64_t)((uint64_t)sum + (uint64_t)x);
		}
		enum agg_verdict v = agg_tree_input(e, &p->pkt, t->nbr[m], out, cap, &ns);
		CHECK_VERDICT(v, m + 1 < t->n ? AGG_ABSORBED : AGG_COMPLETED);
	}
	CHECK(ns >= t->n);
	for (unsigned k = 0; k < t->n; k++) {
		CHECK_EQ(out[k].pkt.inca.flags & WIRE_F_RESULT, WIRE_F_RESULT);
		CHECK_EQ(out[k].pkt.inca.round, rnd);
		CHECK_EQ(out[k].pkt.inca.epoch, epoch);
		int64_t x;
		memcpy(&x, out[k].pkt.data, 8);
		CHECK_EQ(x, sum);
	}
	free(p);
}

/* A P-BM must be exactly its sender's set: a member's packet naming other members too is
 * dropped (it neither speaks for them nor completes a round alone), and a replay of a
 * complete round with every bit set draws no results. */
static void test_hostile_pbm(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, 64, 0, 4, 1, 4, 64, true);
	struct agg_tree *e = ttree_create(t);
	size_t cap = agg_tree_max_sends(e);
	struct agg_send out[16];
	struct tu_pkt *p = malloc(sizeof *p);

	fill_up(t, p, 0, 0, 0, 2);
	tu_set(p->bits, 8, t->bp[1]); /* member 0 claims member 1's contribution too */
	FEED(e, p, t->nbr[0], AGG_DROP_BITMAP, 0);
	for (unsigned m = 1; m < 4; m++)
		tu_set(p->bits, 8, t->bp[m]); /* ... or everyone's: would complete alone */
	FEED(e, p, t->nbr[0], AGG_DROP_BITMAP, 0);
	p->pkt.inca.bfr_id = 0; /* not even as a switch: no child owns that set */
	FEED(e, p, t->nbr[0], AGG_DROP_BITMAP, 0);
	h_round(t, e, 0, 0, 0, 0); /* member 1's own packet is absorbed, not a duplicate */

	struct agg_tree_stats st0, st;
	agg_tree_get_stats(e, &st0);
	for (int i = 0; i < 100; i++)
		FEED(e, p, t->nbr[0], AGG_DROP_BITMAP, 0);
	agg_tree_get_stats(e, &st);
	CHECK_EQ(st.tx_pkts, st0.tx_pkts);
	CHECK_EQ(st.drops[AGG_DROP_BITMAP], 103);
	CHECK_EQ(st.duplicates, 0);
	agg_tree_destroy(e);
	free(p);
	free(t);
}

/* Forged rounds: on fresh slots (far and near future) and on a round collecting (the next 40
 * rounds). The slots neither move nor lose contributions; the real job then runs exactly,
 * every contribution absorbed, every round completed at its last contribution. */
static void test_hostile_rounds(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, 64, 0, 4, 1, 4, 64, true);
	struct agg_tree *e = ttree_create(t);
	size_t cap = agg_tree_max_sends(e);
	struct agg_send out[16];
	struct tu_pkt *p = malloc(sizeof *p);

	for (uint16_t slot = 0; slot < 4; slot++)
		for (uint32_t r = 1; r <= 40; r++) {
			fill_up(t, p, r % 4, slot, r == 40 ? 0x7fff0000u + slot : r, 2);
			FEED(e, p, t->nbr[r % 4], AGG_ABSORBED, 0); /* on probation */
		}
	for (uint32_t r = 0; r < 3; r++)
		for (uint16_t slot = 0; slot < 4; slot++)
			h_round(t, e, slot, r, 0, 0);

	/* round 3 of slot 1 collects: forged rounds 4 .. 43 are all outside its window */
	fill_up(t, p, 0, 1, 3, 2);
	FEED(e, p, t->nbr[0], AGG_ABSORBED, 0);
	for (uint32_t r = 4; r <= 43; r++) {
		fill_up(t, p, 1 + r % 3, 1, r, 2);
		FEED(e, p, t->nbr[1 + r % 3], AGG_DROP_FUTURE, 0);
	}
	fill_up(t, p, 2, 1, 1, 2); /* and an old round: stale */
	FEED(e, p, t->nbr[2], AGG_DROP_STALE, 0);
	for (unsigned m = 1; m < 4; m++) {
		fill_up(t, p, m, 1, 3, 2);
		FEED(e, p, t->nbr[m], m < 3 ? AGG_ABSORBED : AGG_COMPLETED, m < 3 ? 0 : 4);
	}
	int64_t want = 0, x;
	for (unsigned m = 0; m < 4; m++)
		want = (int64_t)((uint64_t)want + (uint64_t)val64(m, 3 * 4 + 1, 0));
	memcpy(&x, out[0].pkt.data, 8);
	CHECK_EQ(x, want);
	for (uint16_t slot = 0; slot < 4; slot++)
		if (slot != 1)
			h_round(t, e, slot, 3, 0, 0);
	for (uint32_t r = 4; r < 8; r++)
		for (uint16_t slot = 0; slot < 4; slot++)
			h_round(t, e, slot, r, 0, 0);
	CHECK_EQ(agg_tree_pending(e), 0);
	agg_tree_destroy(e);
	free(p);
	free(t);
}

/* Duplicates of a complete round: answered only to their sender, once free, then from the
 * sender's credit, then its 1st, 2nd and every 4th unanswered one: a flood of 100 gets
 * 1 + AGG__RCREDIT_MAX (8) + 24 (the 1st, 2nd, 4th, 8th ... 88th of the other 91) answers,
 * a third of the packets it sent. */
static void test_hostile_resends(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, 64, 0, 4, 1, 4, 64, true);
	struct agg_tree *e = ttree_create(t);
	size_t cap = agg_tree_max_sends(e);
	struct agg_send out[16];
	struct tu_pkt *p = malloc(sizeof *p);

	for (uint32_t r = 0; r < 3; r++) /* member 2 earns 12 credits, 8 are banked */
		for (uint16_t slot = 0; slot < 4; slot++)
			h_round(t, e, slot, r, 0, 0);
	struct agg_tree_stats st0, st;
	agg_tree_get_stats(e, &st0);
	unsigned answered = 0;
	for (int i = 0; i < 100; i++) {
		fill_up(t, p, 2, 0, 2, 2);
		size_t ns = 0;
		enum agg_verdict v = agg_tree_input(e, &p->pkt, t->nbr[2], out, cap, &ns);
		CHECK(v == AGG_DUP_RESENT || v == AGG_DUP_IGNORED);
		if (ns) {
			CHECK_EQ(ns, 1);
			CHECK_EQ(out[0].nbr, t->nbr[2]);
			answered++;
		}
	}
	unsigned want = 1 + 8;
	for (unsigned d = 1; d <= 91; d++)
		want += d <= 2 || d % 4 == 0;
	CHECK_EQ(want, 33);
	CHECK_EQ(answered, want);
	agg_tree_get_stats(e, &st);
	CHECK_EQ(st.tx_pkts - st0.tx_pkts, want);
	CHECK_EQ(st.resends_limited, 100 - want);
	agg_tree_destroy(e);
	free(p);
	free(t);
}

/* A new job on the same tree: with epochs, a newer epoch starts every slot afresh and an
 * older one is dropped; without (epoch 0), the new job's rounds (another round base) take
 * the slots over by completing. Either way no result of the old job answers the new one. */
static void test_new_job(void)
{
	struct ttree *t = calloc(1, sizeof *t);
	ttree_init(t, 64, 0, 4, 1, 4, 64, true);
	struct agg_tree *e = ttree_create(t);
	size_t cap = agg_tree_max_sends(e);
	struct agg_send out[16];
	struct tu_pkt *p = malloc(sizeof *p);
	struct agg_tree_stats st;

	/* epoch 7: one round per slot, one member's round 1 left collecting */
	for (uint16_t slot = 0; slot < 4; slot++)
		h_round(t, e, slot, 0, 7, 100);
	fill_up(t, p, 3, 2, 1, 2);
	p->pkt.inca.epoch = 7;
	FEED(e, p, t->nbr[3], AGG_ABSORBED, 0);
	CHECK_EQ(agg_tree_pending(e), 1);
	/* epoch 8 reuses rounds 0 and 1: fresh sums, nothing of epoch 7 answers */
	for (uint32_t r = 0; r < 2; r++)
		for (uint16_t slot = 0; slot < 4; slot++)
			h_round(t, e, slot, r, 8, 200);
	fill_up(t, p, 3, 2, 1, 2);
	p->pkt.inca.epoch = 7;
	FEED(e, p, t->nbr[3], AGG_DROP_EPOCH, 0);
	agg_tree_get_stats(e, &st);
	CHECK_EQ(st.epoch, 8);
	CHECK_EQ(st.epoch_resets, 2);
	CHECK_EQ(st.drops[AGG_DROP_EPOCH], 1);
	agg_tree_destroy(e);

	/* epoch 0: job A rounds 0..2, abandoned with slot 3's round 3 half collected; job B
	 * starts at round base 0x9e3779b9 and runs three rounds exactly */
	e = ttree_create(t);
	for (uint32_t r = 0; r < 3; r++)
		for (uint16_t slot = 0; slot < 4; slot++)
			h_round(t, e, slot, r, 0, 300);
	fill_up(t, p, 0, 0, 3, 2);
	FEED(e, p, t->nbr[0], AGG_ABSORBED, 0);
	const uint32_t base = 0x9e3779b9u;
	for (uint32_t r = 0; r < 3; r++)
		for (uint16_t slot = 1; slot < 4; slot++)
			h_round(t, e, slot, base + r, 0, 400);
	/* slot 0's round 3 still collects: a round outside its window is dropped there (a
	 * member still waiting for A's round 3 may need round 2's result); this slot stays
	 * A's until A's round completes or an epoch starts the tree afresh */
	fill_up(t, p, 1, 0, base, 2);
	FEED(e, p, t->nbr[1], AGG_DROP_STALE, 0);
	/* a late duplicate of job A is only held on probation: no answer, and B goes on */
	fill_up(t, p, 2, 1, 2, 2);
	FEED(e, p, t->nbr[2], AGG_ABSORBED, 0);
	h_round(t, e, 1, base + 3, 0, 400);
	agg_tree_destroy(e);
	free(p);
	free(t);
}

int main(void)
{
	test_hostile_pbm();
	test_hostile_rounds();
	test_hostile_resends();
	test_new_job();
	test_notices_root();
	test_notices_nonroot();
	test_verdict_names();
	test_create_validation();
	test_single_level();
	test_root_duplicates();
	test_nonroot();
	test_forwarding();
	test_drops();
	test_sharding();
	test_deterministic();
	test_wire_numbering();
	test_owner();
	printf("engine_test: ok\n");
	return 0;
}
