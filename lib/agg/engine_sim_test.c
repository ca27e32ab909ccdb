/* lib/agg/engine_sim_test.c: randomized end-to-end test of the aggregation engine. Clients run
 * the real client protocol (chunk g -> slot g % S, round g / S, window S, RTO retransmission
 * with backoff) against one root or two leaves + a root, through a simulated network that
 * drops, duplicates and reorders in both directions. Every result must be exact. */
#include <math.h>

#include "engine_test_util.h"

#define SIM_BITS 64  /* bit-string bytes: BSL up to 512 */
#define SIM_DATA 256 /* data bytes per packet */
#define SIM_MAX_NODES 128

struct spkt {
	uint64_t at, tie; /* delivery time, random tie-break */
	int dst;
	uint32_t from;
	struct wire_pkt pkt;
	uint8_t bits[SIM_BITS];
	uint8_t data[SIM_DATA];
};

/* Network: packets wait in a min-heap keyed by delivery time. Each copy gets its own random
 * delay (1..delay_max steps, and with probability tail_p up to tail_mult times longer), so
 * packets overtake each other freely and some arrive very late (stale rounds). Loss and
 * duplication are applied when a packet is sent. */
struct net {
	struct spkt **q; /* heap on (at, tie) */
	size_t n, cap;
	struct tu_rng rng;
	double loss, dup, tail_p;
	unsigned delay_max, tail_mult;
	size_t bits_len;
	uint64_t now;
	uint64_t sent, dropped, duplicated;
};

static bool spkt_before(const struct spkt *a, const struct spkt *b)
{
	return a->at < b->at || (a->at == b->at && a->tie < b->tie);
}

static void net_push(struct net *nw, int from, int dst, const struct wire_pkt *p)
{
	if (nw->n == nw->cap) {
		nw->cap = nw->cap ? nw->cap * 2 : 1024;
		nw->q = realloc(nw->q, nw->cap * sizeof *nw->q);
		CHECK(nw->q);
	}
	struct spkt *s = malloc(sizeof *s);
	CHECK(s);
	CHECK(p->data_len <= SIM_DATA && nw->bits_len <= SIM_BITS);
	s->dst = dst;
	s->from = (uint32_t)from;
	s->pkt = *p;
	memcpy(s->bits, p->inca.bits, nw->bits_len);
	if (p->data_len)
		memcpy(s->data, p->data, p->data_len);
	s->pkt.inca.bits = s->bits;
	s->pkt.data = s->data;
	uint64_t d = 1 + tu_below(&nw->rng, nw->delay_max);
	if (tu_double(&nw->rng) < nw->tail_p)
		d += tu_below(&nw->rng, (uint64_t)nw->delay_max * nw->tail_mult);
	s->at = nw->now + d;
	s->tie = tu_next(&nw->rng);
	size_t i = nw->n++;
	while (i > 0 && spkt_before(s, nw->q[(i - 1) / 2])) {
		nw->q[i] = nw->q[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	nw->q[i] = s;
}

static void net_send(struct net *nw, int from, int dst, const struct wire_pkt *p)
{
	nw->sent++;
	if (tu_double(&nw->rng) < nw->loss) {
		nw->dropped++;
		return;
	}
	net_push(nw, from, dst, p);
	if (tu_double(&nw->rng) < nw->dup) {
		nw->duplicated++;
		net_push(nw, from, dst, p);
	}
}

/* The earliest packet if it is due at or before `until`, else NULL. */
static struct spkt *net_pop(struct net *nw, uint64_t until)
{
	if (!nw->n || nw->q[0]->at > until)
		return NULL;
	struct spkt *top = nw->q[0], *last = nw->q[--nw->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= nw->n)
			break;
		if (c + 1 < nw->n && spkt_before(nw->q[c + 1], nw->q[c]))
			c++;
		if (!spkt_before(nw->q[c], last))
			break;
		nw->q[i] = nw->q[c];
		i = c;
	}
	if (nw->n)
		nw->q[i] = last;
	return top;
}

/* ---------------------------------------------------------------- scenario */

struct client {
	int node, sw_node;
	uint16_t bfr;
	uint32_t psn;
	uint64_t next, ndone;
	uint8_t *done;
	uint64_t *sent_at;
	uint32_t *rto, *tries;
	uint64_t retx, dup_results;
	uint64_t nacks, nack_resends; /* repair notices received / answered by a resend */
};

struct sw {
	struct agg_tree *e;
	uint64_t verdicts[AGG_VERDICT_COUNT];
};

struct sim {
	/* parameters */
	unsigned n;        /* members = clients 0..n-1 (node ids = neighbour ids) */
	uint16_t nslots;   /* window S */
	uint64_t nchunks;  /* N */
	uint16_t count;    /* elements per chunk */
	enum inca_dtype dt;
	unsigned bsl;
	uint32_t rto0, rto_max, retx_limit;
	uint64_t steps;
	/* topology */
	unsigned nsw;
	struct sw sws[3]; /* node n + i */
	/* state */
	struct net net;
	struct client *cl;
	struct agg_send *out;
	size_t out_cap;
};

static int64_t sval64(unsigned m, uint64_t g, unsigned e)
{
	return (int64_t)(tu_mix((uint64_t)m << 40 ^ g << 12 ^ e ^ 0xabcdef) >> 8) - ((int64_t)1 << 55);
}

static float svalf(unsigned m, uint64_t g, unsigned e)
{
	uint64_t h = tu_mix((uint64_t)m << 40 ^ g << 12 ^ e ^ 0x5151);
	double mant = (double)(h & 0xFFFFFF) / 16777216.0 + 0.5;
	int ex = (int)((h >> 24) % 48) - 24;
	return (float)(ldexp(mant, ex) * ((h >> 40) & 1 ? -1.0 : 1.0));
}

static void member_data(const struct sim *s, unsigned m, uint64_t g, uint8_t *dst)
{
	for (unsigned e = 0; e < s->count; e++) {
		if (s->dt == INCA_INT64) {
			int64_t x = sval64(m, g, e);
			memcpy(dst + 8 * e, &x, 8);
		} else {
			float f = svalf(m, g, e);
			memcpy(dst + 4 * e, &f, 4);
		}
	}
}

/* int64: the exact sum (wrapping). fp32: the rank-ordered reduction, which the deterministic
 * engine must reproduce bit for bit whatever the arrival order. */
static void expected(const struct sim *s, uint64_t g, uint8_t *dst)
{
	uint8_t tmp[SIM_DATA];
	member_data(s, 0, g, dst);
	for (unsigned m = 1; m < s->n; m++) {
		member_data(s, m, g, tmp);
		CHECK_EQ(agg_reduce(dst, tmp, s->count, s->dt, INCA_SUM), 0);
	}
}

static void client_send(struct sim *s, struct client *c, uint64_t g, bool retx)
{
	const struct agg_tree_cfg *tc = agg_tree_cfg(s->sws[0].e);
	uint8_t bits[SIM_BITS] = { 0 }, data[SIM_DATA];
	size_t len = s->bsl / 8;
	struct wire_pkt p;
	memset(&p, 0, sizeof p);
	p.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
	p.bth.pkey = WIRE_PKEY_DEFAULT;
	p.bth.dest_qp = 0x100;
	p.bth.psn = c->psn++ & 0xFFFFFF;
	p.reth.va = g * s->count * tu_esize(s->dt);
	p.reth.rkey = tc->rkey;
	p.imm = (uint32_t)g;
	p.inca.version = WIRE_INCA_VERSION;
	p.inca.flags = retx ? WIRE_F_RETX : 0;
	p.inca.coll = WIRE_COLL_ALLREDUCE;
	p.inca.dtype = (uint8_t)s->dt;
	p.inca.op = INCA_SUM;
	p.inca.tree_id = tc->tree_id;
	p.inca.slot = (uint16_t)(g % s->nslots);
	p.inca.round = (uint32_t)(g / s->nslots);
	p.inca.bfr_id = c->bfr;
	p.inca.bsl_code = tu_bsl_code(s->bsl);
	p.inca.count = s->count;
	tu_set(bits, len, c->bfr);
	p.inca.bits = bits;
	member_data(s, (unsigned)c->node, g, data);
	p.data = data;
	p.data_len = (uint32_t)(s->count * tu_esize(s->dt));
	net_send(&s->net, c->node, c->sw_node, &p);
}

/* Window: chunk g + S only after the result of g; RTO doubles up to rto_max per chunk. */
static void client_tick(struct sim *s, struct client *c, uint64_t now)
{
	while (c->next < s->nchunks && (c->next < s->nslots || c->done[c->next - s->nslots])) {
		uint64_t g = c->next++;
		c->sent_at[g] = now;
		c->rto[g] = s->rto0;
		client_send(s, c, g, false);
	}
	uint64_t lo = c->next > s->nslots ? c->next - s->nslots : 0;
	for (uint64_t g = lo; g < c->next; g++) {
		if (c->done[g] || now - c->sent_at[g] < c->rto[g])
			continue;
		c->tries[g]++;
		CHECK(c->tries[g] < s->retx_limit); /* would be -ETIMEDOUT: a liveness bug */
		c->retx++;
		c->sent_at[g] = now;
		c->rto[g] = c->rto[g] * 2 < s->rto_max ? c->rto[g] * 2 : s->rto_max;
		client_send(s, c, g, true);
	}
}

/* Repair notice: the switch misses our contribution to chunk g. Resend at once unless the
 * chunk is answered already or was (re)sent within the last network delay (a notice that
 * crossed our resend). */
static void client_nack(struct sim *s, struct client *c, const struct wire_pkt *p)
{
	size_t len = s->bsl / 8;
	CHECK(!(p->inca.flags & (WIRE_F_RESULT | WIRE_F_RETX)));
	CHECK_EQ(p->inca.count, 0);
	CHECK_EQ(p->data_len, 0);
	CHECK(tu_test(p->inca.bits, len, c->bfr));
	uint64_t g = p->imm;
	CHECK(g < s->nchunks);
	CHECK_EQ(p->inca.slot, g % s->nslots);
	CHECK_EQ(p->inca.round, g / s->nslots);
	c->nacks++;
	/* Not sent yet (a peer's duplicate asked while our window waits for an older result),
	 * answered already, or sent within the last network delay: nothing to do. */
	if (g >= c->next || c->done[g] || s->net.now - c->sent_at[g] < s->net.delay_max)
		return;
	c->nack_resends++;
	c->retx++;
	c->sent_at[g] = s->net.now;
	client_send(s, c, g, true);
}

static void client_rx(struct sim *s, struct client *c, const struct wire_pkt *p)
{
	size_t len = s->bsl / 8;
	if (p->inca.flags & WIRE_F_NACK) {
		client_nack(s, c, p);
		return;
	}
	CHECK(p->inca.flags & WIRE_F_RESULT);
	CHECK_EQ(p->inca.bfr_id, 0);
	CHECK(tu_test(p->inca.bits, len, c->bfr)); /* addressed to us */
	uint64_t g = p->imm;
	CHECK(g < c->next); /* a result needs our contribution */
	CHECK_EQ(p->inca.slot, g % s->nslots);
	CHECK_EQ(p->inca.round, g / s->nslots);
	CHECK_EQ(p->reth.va, g * s->count * tu_esize(s->dt));
	CHECK_EQ(p->inca.count, s->count);
	CHECK_EQ(p->inca.dtype, s->dt);
	uint8_t want[SIM_DATA];
	expected(s, g, want);
	if (memcmp(p->data, want, p->data_len) != 0) {
		fprintf(stderr, "client %d: wrong result for chunk %llu\n", c->node,
			(unsigned long long)g);
		exit(1);
	}
	if (c->done[g]) {
		c->dup_results++; /* re-sent results must be exact too (checked above) */
		return;
	}
	c->done[g] = 1;
	c->ndone++;
}

static void sw_rx(struct sim *s, unsigned k, const struct spkt *sp)
{
	struct sw *w = &s->sws[k];
	size_t ns = 0;
	enum agg_verdict v = agg_tree_input(w->e, &sp->pkt, sp->from, s->out, s->out_cap, &ns);
	w->verdicts[v]++;
	for (size_t i = 0; i < ns; i++) {
		CHECK(s->out[i].nbr < s->n + s->nsw);
		net_send(&s->net, (int)(s->n + k), (int)s->out[i].nbr, &s->out[i].pkt);
	}
}

static void deliver(struct sim *s, struct spkt *sp)
{
	if (sp->dst < (int)s->n)
		client_rx(s, &s->cl[sp->dst], &sp->pkt);
	else
		sw_rx(s, (unsigned)sp->dst - s->n, sp);
	free(sp);
}

static void sim_run(struct sim *s)
{
	uint64_t max_steps = s->nchunks * 2000 + 100000;
	for (s->net.now = 0;; s->net.now++) {
		bool all = true;
		for (unsigned i = 0; i < s->n; i++)
			all &= s->cl[i].ndone == s->nchunks;
		if (all)
			break;
		CHECK(s->net.now < max_steps);
		for (unsigned i = 0; i < s->n; i++)
			client_tick(s, &s->cl[i], s->net.now);
		struct spkt *sp;
		while ((sp = net_pop(&s->net, s->net.now)) != NULL)
			deliver(s, sp);
	}
	s->steps = s->net.now;
	struct spkt *sp; /* drain: late duplicates still reach the engines and clients */
	while ((sp = net_pop(&s->net, UINT64_MAX)) != NULL) {
		s->net.now = sp->at;
		deliver(s, sp);
	}
}

static void sim_init(struct sim *s, unsigned n, uint16_t nslots, uint64_t nchunks, uint16_t count,
		     enum inca_dtype dt, unsigned bsl, double loss, double dup, uint64_t seed)
{
	memset(s, 0, sizeof *s);
	CHECK(n + 3 <= SIM_MAX_NODES && count * tu_esize(dt) <= SIM_DATA);
	s->n = n;
	s->nslots = nslots;
	s->nchunks = nchunks;
	s->count = count;
	s->dt = dt;
	s->bsl = bsl;
	s->net.delay_max = 20;
	s->net.tail_p = 0.02;
	s->net.tail_mult = 10;
	/* a round trip is 2 (single level) to 4 (two levels) hops of up to delay_max, so some
	 * timeouts are spurious and some retransmissions overtake the originals */
	s->rto0 = 3 * s->net.delay_max;
	s->rto_max = 16 * s->rto0;
	s->retx_limit = 60;
	s->net.rng.s = seed;
	s->net.loss = loss;
	s->net.dup = dup;
	s->net.bits_len = bsl / 8;
	s->cl = calloc(n, sizeof *s->cl);
	for (unsigned i = 0; i < n; i++) {
		struct client *c = &s->cl[i];
		c->node = (int)i;
		c->bfr = (uint16_t)(i + 1); /* rank order = bit-position order */
		c->done = calloc(nchunks, 1);
		c->sent_at = calloc(nchunks, sizeof *c->sent_at);
		c->rto = calloc(nchunks, sizeof *c->rto);
		c->tries = calloc(nchunks, sizeof *c->tries);
		CHECK(c->done && c->sent_at && c->rto && c->tries);
	}
}

static void sim_alloc_out(struct sim *s)
{
	for (unsigned k = 0; k < s->nsw; k++)
		if (agg_tree_max_sends(s->sws[k].e) > s->out_cap)
			s->out_cap = agg_tree_max_sends(s->sws[k].e);
	s->out = calloc(s->out_cap, sizeof *s->out);
}

static void sim_free(struct sim *s)
{
	for (unsigned k = 0; k < s->nsw; k++)
		agg_tree_destroy(s->sws[k].e);
	for (unsigned i = 0; i < s->n; i++) {
		free(s->cl[i].done);
		free(s->cl[i].sent_at);
		free(s->cl[i].rto);
		free(s->cl[i].tries);
	}
	free(s->cl);
	free(s->out);
	free(s->net.q);
}

/* Checks shared by every scenario: all chunks exact at every client (client_rx), retransmits
 * and duplicates really happened, and no engine saw anything but stale leftovers. */
static void check_common(struct sim *s, const char *name)
{
	uint64_t retx = 0, dups = 0, nacks = 0, nack_resends = 0, notices = 0, earned = 0;
	for (unsigned i = 0; i < s->n; i++) {
		CHECK_EQ(s->cl[i].ndone, s->nchunks);
		retx += s->cl[i].retx;
		dups += s->cl[i].dup_results;
		nacks += s->cl[i].nacks;
		nack_resends += s->cl[i].nack_resends;
	}
	CHECK(retx > 0 && dups > 0);
	/* repair notices happened, were acted on, and never outnumbered the progress paying for
	 * them (absorbed contributions + results from the parent) */
	CHECK(nacks > 0 && nack_resends > 0);
	CHECK(s->net.dropped > 0 && s->net.duplicated > 0);
	for (unsigned k = 0; k < s->nsw; k++) {
		struct agg_tree_stats st;
		agg_tree_get_stats(s->sws[k].e, &st);
		for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT; v++) {
			CHECK_EQ(st.drops[v], s->sws[k].verdicts[v]);
			if (v != AGG_DROP_STALE && st.drops[v]) {
				fprintf(stderr, "%s: switch %u: unexpected %s x%llu\n", name, k,
					agg_verdict_name((enum agg_verdict)v),
					(unsigned long long)st.drops[v]);
				exit(1);
			}
		}
		/* each (slot, round) completes exactly once at every switch */
		CHECK_EQ(st.aggregations, s->nchunks);
		CHECK_EQ(s->sws[k].verdicts[AGG_COMPLETED], s->nchunks);
		CHECK(st.duplicates > 0);
		notices += st.notices;
		earned += st.contributions + st.results_down;
		CHECK(st.notices <= st.contributions + st.results_down);
		printf("%s sw%u: rx %llu contrib %llu dup %llu resent %llu fwd %llu down %llu "
		       "stale %llu\n",
		       name, k, (unsigned long long)st.rx_pkts, (unsigned long long)st.contributions,
		       (unsigned long long)st.duplicates, (unsigned long long)st.results_resent,
		       (unsigned long long)st.forwarded, (unsigned long long)st.results_down,
		       (unsigned long long)st.drops[AGG_DROP_STALE]);
	}
	CHECK(notices > 0 && notices <= earned);
	printf("%s: %llu chunks x %u members in %llu steps, net sent %llu dropped %llu "
	       "duplicated %llu, client retx %llu (%llu on notices) dup results %llu\n",
	       name, (unsigned long long)s->nchunks, s->n, (unsigned long long)s->steps,
	       (unsigned long long)s->net.sent,
	       (unsigned long long)s->net.dropped, (unsigned long long)s->net.duplicated,
	       (unsigned long long)retx, (unsigned long long)nack_resends,
	       (unsigned long long)dups);
}

/* ---------------------------------------------------------------- single level */

static void run_single(const char *name, unsigned n, uint16_t nslots, uint64_t nchunks,
		       uint16_t count, enum inca_dtype dt, bool det, unsigned bsl, double loss,
		       double dup, uint64_t seed)
{
	struct sim s;
	sim_init(&s, n, nslots, nchunks, count, dt, bsl, loss, dup, seed);
	size_t len = bsl / 8;
	uint8_t abm[SIM_BITS] = { 0 }, fbm[SIM_MAX_NODES][SIM_BITS];
	struct agg_bift_entry bift[SIM_MAX_NODES];
	memset(fbm, 0, sizeof fbm);
	for (unsigned i = 0; i < n; i++) {
		tu_set(abm, len, i + 1);
		tu_set(fbm[i], len, i + 1);
		bift[i] = (struct agg_bift_entry){ .bp = i + 1, .nbr = i, .fbm = fbm[i] };
		s.cl[i].sw_node = (int)n;
	}
	struct agg_tree_cfg cfg = {
		.tree_id = 3, .rkey = 0xfeed, .nslots = nslots, .slot_bytes = SIM_DATA,
		.bsl_bits = bsl, .abm = abm, .root = true, .parent_nbr = AGG_NBR_NONE,
		.nbift = n, .bift = bift, .deterministic = det, .check_sender = true,
	};
	s.nsw = 1;
	CHECK_EQ(agg_tree_create(&cfg, &s.sws[0].e), 0);
	sim_alloc_out(&s);
	sim_run(&s);
	check_common(&s, name);
	struct agg_tree_stats st;
	agg_tree_get_stats(s.sws[0].e, &st);
	CHECK(st.results_resent > 0);
	CHECK_EQ(st.contributions, nchunks * n);
	sim_free(&s);
}

/* ---------------------------------------------------------------- two levels */

/* Members 0..h-1 under leaf 0, h..n-1-fwd under leaf 1; with `fwd` the last member is attached
 * to leaf 0's port but belongs to the root directly, so leaf 0 forwards its packets.
 * via_leaf: the root replicates results to the leaves (root BIFT: leaf members -> leaf);
 * otherwise straight to the members, and the leaves never learn results (stay up-sent). */
static void run_two_level(const char *name, unsigned n, bool fwd, bool via_leaf, uint16_t nslots,
			  uint64_t nchunks, double loss, double dup, uint64_t seed)
{
	const unsigned bsl = 64, len = 8;
	struct sim s;
	sim_init(&s, n, nslots, nchunks, 4, INCA_INT64, bsl, loss, dup, seed);
	unsigned nleaf = n - (fwd ? 1 : 0), h = nleaf / 2;
	int leaf_node[2] = { (int)n, (int)n + 1 }, root_node = (int)n + 2;
	uint8_t abm_leaf[2][SIM_BITS] = { { 0 } }, abm_root[SIM_BITS] = { 0 };
	uint8_t own[SIM_MAX_NODES][SIM_BITS];
	struct agg_bift_entry bl[2][SIM_MAX_NODES], br[SIM_MAX_NODES];
	size_t nbl[2] = { 0, 0 };
	memset(own, 0, sizeof own);

	for (unsigned i = 0; i < n; i++) {
		unsigned bp = i + 1;
		tu_set(own[i], len, bp);
		tu_set(abm_root, len, bp);
		s.cl[i].sw_node = leaf_node[i < h || i >= nleaf ? 0 : 1];
		if (i < nleaf) {
			unsigned l = i < h ? 0 : 1;
			tu_set(abm_leaf[l], len, bp);
			bl[l][nbl[l]++] = (struct agg_bift_entry){ .bp = bp, .nbr = i, .fbm = own[i] };
		}
	}
	for (unsigned i = 0; i < n; i++) {
		unsigned l = i < h ? 0 : 1;
		if (via_leaf && i < nleaf)
			br[i] = (struct agg_bift_entry){ .bp = i + 1,
							 .nbr = (uint32_t)leaf_node[l],
							 .fbm = abm_leaf[l] };
		else
			br[i] = (struct agg_bift_entry){ .bp = i + 1, .nbr = i, .fbm = own[i] };
	}
	s.nsw = 3;
	for (unsigned l = 0; l < 2; l++) {
		struct agg_tree_cfg c = {
			.tree_id = 9, .rkey = 0xbeef, .nslots = nslots, .slot_bytes = SIM_DATA,
			.bsl_bits = bsl, .abm = abm_leaf[l], .root = false,
			.parent_nbr = (uint32_t)root_node, .own_bfr_id = (uint16_t)(200 + l),
			.nbift = nbl[l], .bift = bl[l], .check_sender = true,
		};
		CHECK_EQ(agg_tree_create(&c, &s.sws[l].e), 0);
	}
	/* results straight to the members: the leaves' sub-trees are told separately */
	const uint8_t *up[2] = { abm_leaf[0], abm_leaf[1] };
	struct agg_tree_cfg rc = {
		.tree_id = 9, .rkey = 0xbeef, .nslots = nslots, .slot_bytes = SIM_DATA,
		.bsl_bits = bsl, .abm = abm_root, .root = true, .parent_nbr = AGG_NBR_NONE,
		.nbift = n, .bift = br, .nupsets = via_leaf ? 0 : 2, .upsets = up,
		/* the sender check follows the BIFT (downward) routes, which only match the
		 * upward ingress when results go back through the leaves and nothing is
		 * forwarded */
		.check_sender = via_leaf && !fwd,
	};
	CHECK_EQ(agg_tree_create(&rc, &s.sws[2].e), 0);
	sim_alloc_out(&s);
	sim_run(&s);
	check_common(&s, name);

	struct agg_tree_stats sl[2], sr;
	agg_tree_get_stats(s.sws[0].e, &sl[0]);
	agg_tree_get_stats(s.sws[1].e, &sl[1]);
	agg_tree_get_stats(s.sws[2].e, &sr);
	/* a leaf whose aggregate went up re-sends it for member duplicates ... */
	CHECK(s.sws[0].verdicts[AGG_DUP_UP_RESENT] + s.sws[1].verdicts[AGG_DUP_UP_RESENT] > 0);
	/* ... and the root dedups those by child bitmap, re-sending its stored result */
	CHECK(s.sws[2].verdicts[AGG_DUP_RESENT] > 0);
	CHECK_EQ(sr.contributions, nchunks * (2 + (fwd ? 1 : 0)));
	if (fwd)
		CHECK(sl[0].forwarded >= nchunks);
	if (via_leaf) {
		CHECK(sl[0].results_down >= nchunks && sl[1].results_down >= nchunks);
		CHECK(s.sws[0].verdicts[AGG_DUP_RESENT] + s.sws[1].verdicts[AGG_DUP_RESENT] > 0);
	} else {
		CHECK_EQ(sl[0].results_down + sl[1].results_down, 0);
	}
	sim_free(&s);
}

int main(void)
{
	run_single("single-8", 8, 16, 4000, 4, INCA_INT64, false, 64, 0.10, 0.05, 11);
	run_single("single-4-lossy", 4, 4, 3000, 2, INCA_INT64, false, 64, 0.20, 0.10, 12);
	run_single("single-2", 2, 8, 2000, 32, INCA_INT64, false, 64, 0.05, 0.05, 13);
	run_single("single-70-bsl128", 70, 8, 400, 2, INCA_INT64, false, 128, 0.05, 0.03, 14);
	run_single("single-det-fp32", 6, 8, 1500, 16, INCA_FP32, true, 64, 0.10, 0.05, 15);
	run_single("single-det-fp32-wide", 40, 4, 300, 8, INCA_FP32, true, 256, 0.08, 0.05, 16);
	run_two_level("two-level-via-leaf", 8, false, true, 8, 2000, 0.10, 0.05, 21);
	run_two_level("two-level-direct-fwd", 9, true, false, 8, 2000, 0.10, 0.05, 22);
	run_two_level("two-level-lossy", 7, true, true, 4, 1500, 0.20, 0.10, 23);
	printf("engine_sim_test: ok\n");
	return 0;
}
