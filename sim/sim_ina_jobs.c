/* sim/sim_ina_jobs.c: in-network aggregation jobs in the packet simulator, set-up and results:
 * aggregation trees over the topology (one lib/agg engine per tree switch), job placement,
 * slots and reference sums, ring jobs' flows, the module's life cycle, ops table and outputs.
 * What happens at run time (members, ring steps, switch engines) is in sim_ina.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_ina_int.h"

/* ---- construction ---------------------------------------------------------------------- */
static int tn_new(struct sim_ina *a, uint32_t sw, uint32_t job, unsigned bsl_bits, uint32_t *out)
{
	if (a->ntn == a->captn) {
		uint32_t cap = a->captn ? a->captn * 2 : 64;
		struct ina_tn *v = realloc(a->tn, sizeof(*v) * cap);
		if (!v)
			return -ENOMEM;
		a->tn = v;
		a->captn = cap;
	}
	struct ina_tn *t = &a->tn[a->ntn];
	memset(t, 0, sizeof(*t));
	t->sw = sw;
	t->job = job;
	t->parent = INA_NONE;
	t->next_at_sw = INA_NONE;
	if (!(t->abm = calloc(1, bsl_bits / 8)))
		return -ENOMEM;
	*out = a->ntn++;
	return 0;
}

static int tn_add_bit(struct ina_tn *t, unsigned bsl_bits, unsigned bp, uint32_t nbr)
{
	if (t->nbift == t->capbift) {
		uint32_t cap = t->capbift ? t->capbift * 2 : 8;
		struct agg_bift_entry *v = realloc(t->bift, sizeof(*v) * cap);
		if (!v)
			return -ENOMEM;
		t->bift = v;
		t->capbift = cap;
	}
	t->bift[t->nbift++] = (struct agg_bift_entry){ bp, nbr, NULL };
	wire_bier_set(t->abm, bsl_bits / 8, bp);
	return 0;
}

/* Port of node x leading to node y (first live one), -1 if none. */
static int port_to(const struct sim_node *x, const struct sim_node *y)
{
	for (uint32_t p = 0; p < x->nports; p++)
		if (x->ports[p].peer->node == y && !x->ports[p].down)
			return (int)p;
	return -1;
}

static bool is_up(const struct sim_node *x, uint32_t p)
{
	const struct sim_node *m = x->ports[p].peer->node;
	return !x->ports[p].down && m->kind == SIM_NODE_SWITCH && m->tier > x->tier;
}

/* Make child tn c a child of switch `psw` (tn found or created via map). */
static int tn_link(struct sim *s, struct sim_ina *a, uint32_t c, uint32_t psw, uint32_t *map,
		   unsigned bsl, uint32_t *nlevel, uint32_t *level)
{
	uint32_t pt = map[psw];
	int rc;
	if (pt == INA_NONE) {
		if ((rc = tn_new(a, psw, a->tn[c].job, bsl, &pt)) != 0)
			return rc;
		map[psw] = pt;
		level[(*nlevel)++] = pt;
	}
	struct sim_node *cn = &s->sws[a->tn[c].sw].n, *pn = &s->sws[psw].n;
	int up = port_to(cn, pn), down = port_to(pn, cn);
	if (up < 0 || down < 0)
		return -EINVAL;
	a->tn[c].parent = pt;
	a->tn[c].parent_port = (uint16_t)up;
	size_t len = bsl / 8;
	for (unsigned bp = wire_bier_next(a->tn[c].abm, len, 1); bp; bp = wire_bier_next(a->tn[c].abm, len, bp + 1))
		if ((rc = tn_add_bit(&a->tn[pt], bsl, bp, (uint32_t)down)) != 0)
			return rc;
	return 0;
}

/* Build job j's tree into a->tn (not yet linked to switches). */
static int build_tree(struct sim *s, struct ina_job *j, uint32_t *map)
{
	struct sim_ina *a = ina_of(s);
	uint32_t H = s->nhosts, first = a->ntn;
	uint32_t *cur = malloc(sizeof(*cur) * (j->n + 1)), *nxt = malloc(sizeof(*nxt) * (j->n + 1));
	uint32_t ncur = 0, nnxt, *cand = NULL;
	int rc = 0;
	if (!cur || !nxt) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t r = 0; r < j->n && !rc; r++) {
		struct sim_port *hp = &s->hosts[j->hosts[r]].port;
		uint32_t sw = hp->peer->node->id - H;
		if (map[sw] == INA_NONE) {
			if ((rc = tn_new(a, sw, j->id, j->bsl_bits, &map[sw])) != 0)
				break;
			cur[ncur++] = map[sw];
		}
		rc = tn_add_bit(&a->tn[map[sw]], j->bsl_bits, r + 1, hp->peer->idx);
	}
	j->levels = 1;
	while (!rc && ncur > 1) {
		if (j->levels >= INA_MAX_LEVELS) {
			rc = -EINVAL;
			break;
		}
		/* A switch adjacent (upward) to every node of this level becomes the root. */
		struct sim_node *x0 = &s->sws[a->tn[cur[0]].sw].n;
		free(cand);
		cand = malloc(sizeof(*cand) * (x0->nports + 1));
		if (!cand) {
			rc = -ENOMEM;
			break;
		}
		uint32_t ncand = 0;
		for (uint32_t p = 0; p < x0->nports; p++) {
			if (!is_up(x0, p))
				continue;
			struct sim_node *c = x0->ports[p].peer->node;
			bool all = true, dup = false;
			for (uint32_t q = 0; q < ncand; q++)
				dup |= cand[q] == c->id - H;
			for (uint32_t i = 1; i < ncur && all && !dup; i++)
				all = port_to(&s->sws[a->tn[cur[i]].sw].n, c) >= 0;
			if (all && !dup)
				cand[ncand++] = c->id - H;
		}
		nnxt = 0;
		if (ncand) {
			uint32_t root = cand[j->id % ncand];
			for (uint32_t i = 0; i < ncur && !rc; i++)
				rc = tn_link(s, a, cur[i], root, map, j->bsl_bits, &nnxt, nxt);
		} else {
			for (uint32_t i = 0; i < ncur && !rc; i++) {
				struct sim_node *x = &s->sws[a->tn[cur[i]].sw].n;
				uint32_t nup = 0, pick = INA_NONE;
				for (uint32_t p = 0; p < x->nports; p++)
					nup += is_up(x, p);
				if (!nup) {
					rc = -EINVAL;
					break;
				}
				for (uint32_t p = 0, k = 0; p < x->nports; p++)
					if (is_up(x, p) && k++ == j->id % nup)
						pick = x->ports[p].peer->node->id - H;
				rc = tn_link(s, a, cur[i], pick, map, j->bsl_bits, &nnxt, nxt);
			}
		}
		uint32_t *t = cur;
		cur = nxt;
		nxt = t;
		ncur = nnxt;
		j->levels++;
	}
	if (!rc) {
		j->root_tn = cur[0];
		j->ntn = a->ntn - first;
		j->tns = malloc(sizeof(*j->tns) * j->ntn);
		if (!j->tns)
			rc = -ENOMEM;
		for (uint32_t i = 0; !rc && i < j->ntn; i++)
			j->tns[i] = first + i;
	}
out:
	for (uint32_t t = first; t < a->ntn; t++)
		map[a->tn[t].sw] = INA_NONE;
	free(cur);
	free(nxt);
	free(cand);
	return rc;
}

/* Lower bound: the last chunk leaves the member S/B after the start (bottleneck rate) and
 * then crosses every link of the round trip once (serialisation + latency). */
static sim_time_ps job_bound(struct sim *s, struct ina_job *j)
{
	struct sim_ina *a = ina_of(s);
	const struct sim_port *path[2 * INA_MAX_LEVELS + 2];
	unsigned np = 0;
	path[np++] = &s->hosts[j->hosts[0]].port;
	uint32_t leaf = INA_NONE;
	uint32_t sw0 = s->hosts[j->hosts[0]].port.peer->node->id - s->nhosts;
	for (uint32_t i = 0; i < j->ntn; i++)
		if (a->tn[j->tns[i]].sw == sw0)
			leaf = j->tns[i];
	for (uint32_t x = leaf; x != INA_NONE && a->tn[x].parent != INA_NONE; x = a->tn[x].parent)
		path[np++] = &s->sws[a->tn[x].sw].n.ports[a->tn[x].parent_port];
	unsigned nup = np;
	for (unsigned i = nup; i-- > 0;)
		path[np++] = path[i]->peer;
	sim_time_ps sum = 0, maxser = 0, last = 0;
	uint32_t full = sim_ina_wire_size(s, j, 0, true), lastsz = sim_ina_wire_size(s, j, j->nchunks - 1, true);
	for (unsigned i = 0; i < np; i++) {
		sim_time_ps ser = sim_time_serialize(full, path[i]->rate_bps);
		if (ser > maxser)
			maxser = ser;
		sum += path[i]->latency_ps;
		last += sim_time_serialize(lastsz, path[i]->rate_bps);
	}
	/* nchunks - 1 full packets through the bottleneck, then the last one end to end */
	return (sim_time_ps)(j->nchunks - 1) * maxser + last + sum;
}

static int job_setup_inc(struct sim *s, struct ina_job *j)
{
	struct sim_ina *a = ina_of(s);
	uint32_t W = s->cfg.ina_job_slots;
	for (uint32_t i = 0; i < j->ntn; i++) {
		struct ina_tn *t = &a->tn[j->tns[i]];
		struct agg_tree_cfg tc = {
			.tree_id = (uint16_t)(j->id + 1), .rkey = 0x1000u + j->id, .nslots = (uint16_t)W,
			.slot_bytes = a->data_bytes, .bsl_bits = j->bsl_bits, .si = 0, .abm = t->abm,
			.root = t->parent == INA_NONE, .parent_nbr = t->parent == INA_NONE ? AGG_NBR_NONE : t->parent_port,
			.own_bfr_id = 0, .nbift = t->nbift, .bift = t->bift, .deterministic = false,
			.check_sender = true,
		};
		int rc = agg_tree_create(&tc, &t->tree);
		if (rc)
			return rc;
		if (agg_tree_max_sends(t->tree) > a->max_sends)
			a->max_sends = agg_tree_max_sends(t->tree);
		t->next_at_sw = a->sw_head[t->sw];
		a->sw_head[t->sw] = j->tns[i];
		a->sw_used[t->sw] += W;
	}
	j->member0 = a->nmem;
	for (uint32_t r = 0; r < j->n; r++) {
		struct ina_member *m = &a->mem[a->nmem];
		memset(m, 0, sizeof(*m));
		m->job = j->id;
		m->rank = r;
		m->host = j->hosts[r];
		m->edge_node = s->hosts[m->host].port.peer->node->id;
		m->got = calloc((j->nchunks + 7) / 8, 1);
		m->w = calloc(W, sizeof(*m->w));
		if (!m->got || !m->w)
			return -ENOMEM;
		for (uint32_t k = 0; k < W; k++) {
			sim_ev_init(&m->w[k].ev, sim_ina_wslot_timeout);
			m->w[k].member = a->nmem;
		}
		a->member_of_host[m->host] = ++a->nmem;
	}
	/* reference results */
	j->expect = calloc((size_t)j->nchunks, a->data_bytes);
	int32_t *acc = calloc(s->cfg.ina_elems, sizeof(*acc));
	if (!j->expect || !acc) {
		free(acc);
		return -ENOMEM;
	}
	for (uint32_t g = 0; g < j->nchunks; g++) {
		memset(acc, 0, sizeof(*acc) * s->cfg.ina_elems);
		for (uint32_t r = 0; r < j->n; r++)
			for (uint32_t e = 0; e < s->cfg.ina_elems; e++)
				acc[e] += sim_ina_val(s, j->id, r, g, e);
		for (uint32_t e = 0; e < s->cfg.ina_elems; e++) {
			uint8_t *o = j->expect + (size_t)g * a->data_bytes + 4 * e;
			if (s->cfg.ina_dtype == SIM_INA_FP32) {
				float f = (float)acc[e];
				memcpy(o, &f, 4);
			} else {
				memcpy(o, &acc[e], 4);
			}
		}
	}
	free(acc);
	j->bound_ps = job_bound(s, j);
	return 0;
}

/* ---- host algorithms as schedules of transfers -------------------------------------------
 * A schedule is a list of one-shot transfers (a flow each, rank to rank) and "t waits for u"
 * edges: a transfer starts once every transfer it waits for has been received. The job is done
 * when every transfer has been received. Built once at set-up; the flows are never reused. */
struct sched {
	struct sim *s;
	struct ina_job *j;
	uint32_t *last_rx;       /* per rank: the last transfer it received so far (INA_NONE) */
	uint32_t (*edge)[2];     /* (before, after) */
	uint32_t nedge, capedge;
	int rc;
};

static uint32_t sched_add(struct sched *sc, uint32_t from, uint32_t to, uint64_t bytes)
{
	struct ina_job *j = sc->j;
	if (sc->rc)
		return INA_NONE;
	struct sim_flow *f = sim_flow_new(sc->s, j->hosts[from], j->hosts[to], bytes ? bytes : 1, 0, 0);
	if (!f) {
		sc->rc = -ENOMEM;
		return INA_NONE;
	}
	f->trig_start = INA_RING_TRIG;
	return j->nobj++;
}

static void sched_wait(struct sched *sc, uint32_t before, uint32_t after)
{
	if (sc->rc || before == INA_NONE || after == INA_NONE)
		return;
	if (sc->nedge == sc->capedge) {
		uint32_t cap = sc->capedge ? sc->capedge * 2 : 1024;
		uint32_t (*v)[2] = realloc(sc->edge, sizeof(*v) * cap);
		if (!v) {
			sc->rc = -ENOMEM;
			return;
		}
		sc->edge = v;
		sc->capedge = cap;
	}
	sc->edge[sc->nedge][0] = before;
	sc->edge[sc->nedge][1] = after;
	sc->nedge++;
}

/* Ring phase over ranks m[0 .. k): `steps` steps of `bytes`; m[i] sends to m[i+1] once it has
 * received the previous step (or, in the first step, whatever it received last before). */
static void sched_ring(struct sched *sc, const uint32_t *m, uint32_t k, uint32_t steps, uint64_t bytes)
{
	uint32_t *t = malloc(sizeof(uint32_t) * (k ? k : 1));
	if (!t) {
		sc->rc = -ENOMEM;
		return;
	}
	for (uint32_t st = 0; st < steps && k > 1; st++) {
		for (uint32_t i = 0; i < k; i++) {
			t[i] = sched_add(sc, m[i], m[(i + 1) % k], bytes);
			sched_wait(sc, sc->last_rx[m[i]], t[i]);
		}
		for (uint32_t i = 0; i < k; i++)
			sc->last_rx[m[(i + 1) % k]] = t[i];
	}
	free(t);
}

/* Hierarchical ring: ranks under one edge switch form a group of g; a reduce-scatter ring in
 * each group (g - 1 steps of S/g), an AllReduce ring across the G groups among the ranks of
 * equal position (2(G - 1) steps of S/(g G)), an all-gather ring in each group (g - 1 steps of
 * S/g). Host links carry 2(g-1)/g S + 2(G-1)/(gG) S per rank, and only S/g of it per rank
 * crosses the tiers above the edge. */
static int sched_hring(struct sim *s, struct ina_job *j, struct sched *sc)
{
	uint32_t n = j->n, g = 0;
	const struct sim_node *e0 = s->hosts[j->hosts[0]].port.peer->node;
	while (g < n && s->hosts[j->hosts[g]].port.peer->node == e0)
		g++;
	for (uint32_t r = 0; r < n; r++)
		if (n % g || s->hosts[j->hosts[r]].port.peer->node !=
				     s->hosts[j->hosts[r - r % g]].port.peer->node) {
			sim_set_err(s, "ina.mode = hring: every edge switch must hold the same number of "
				    "consecutive ranks of a job (use placement = contiguous)");
			return -EINVAL;
		}
	uint32_t G = n / g;
	uint32_t *m = malloc(sizeof(uint32_t) * (g > G ? g : G));
	if (!m)
		return -ENOMEM;
	uint64_t part = (j->size_bytes + g - 1) / g, sub = (part + G - 1) / G;
	for (uint32_t x = 0; x < G; x++) {
		for (uint32_t i = 0; i < g; i++)
			m[i] = x * g + i;
		sched_ring(sc, m, g, g - 1, part);
	}
	for (uint32_t i = 0; i < g; i++) {
		for (uint32_t x = 0; x < G; x++)
			m[x] = x * g + i;
		sched_ring(sc, m, G, 2 * (G - 1), sub);
	}
	for (uint32_t x = 0; x < G; x++) {
		for (uint32_t i = 0; i < g; i++)
			m[i] = x * g + i;
		sched_ring(sc, m, g, g - 1, part);
	}
	free(m);
	return 0;
}

/* Double binary tree (as NCCL): two binary trees, each reducing and broadcasting half of the
 * buffer, pipelined in pieces of at most 256 KiB. Tree A is the heap over ranks 0..n-1 (the
 * parent of position i is (i-1)/2), tree B the same over the ranks in reverse order, so a leaf
 * of one is an inner node of the other. A node sends piece p up once it has received p from
 * each child; a piece goes down once the node has it complete; each hop sends its pieces in
 * order (piece p waits for the receipt of p - 1 on the same hop). */
#define DBT_PIECE_BYTES 262144u
static int sched_dbtree(struct ina_job *j, struct sched *sc)
{
	uint32_t n = j->n;
	uint64_t half = (j->size_bytes + 1) / 2;
	uint32_t P = (uint32_t)((half + DBT_PIECE_BYTES - 1) / DBT_PIECE_BYTES);
	uint64_t piece = (half + P - 1) / P;
	uint32_t *up = malloc(sizeof(uint32_t) * n), *down = malloc(sizeof(uint32_t) * n);
	uint32_t *pup = malloc(sizeof(uint32_t) * n), *pdown = malloc(sizeof(uint32_t) * n);
	if (!up || !down || !pup || !pdown) {
		free(up), free(down), free(pup), free(pdown);
		return -ENOMEM;
	}
	for (int tree = 0; tree < 2; tree++) {
#define RANK(pos) (tree ? n - 1 - (pos) : (pos))
		for (uint32_t i = 0; i < n; i++)
			pup[i] = pdown[i] = INA_NONE;
		for (uint32_t p = 0; p < P; p++) {
			/* up[i]: position i to its parent (children first: positions in reverse) */
			for (uint32_t i = n; i-- > 1;) {
				up[i] = sched_add(sc, RANK(i), RANK((i - 1) / 2), piece);
				for (uint32_t c = 2 * i + 1; c <= 2 * i + 2 && c < n; c++)
					sched_wait(sc, up[c], up[i]);
				sched_wait(sc, pup[i], up[i]);
				pup[i] = up[i];
			}
			/* down[i]: parent of position i to i, once the parent has the piece */
			for (uint32_t i = 1; i < n; i++) {
				uint32_t par = (i - 1) / 2;
				down[i] = sched_add(sc, RANK(par), RANK(i), piece);
				if (par == 0) {
					for (uint32_t c = 1; c <= 2 && c < n; c++)
						sched_wait(sc, up[c], down[i]);
				} else {
					sched_wait(sc, down[par], down[i]);
				}
				sched_wait(sc, pdown[i], down[i]);
				pdown[i] = down[i];
			}
		}
#undef RANK
	}
	free(up), free(down), free(pup), free(pdown);
	return sc->rc;
}

static int job_setup_sched(struct sim *s, struct ina_job *j, int algo)
{
	struct sched sc = { .s = s, .j = j };
	j->algo = algo;
	j->flow0 = s->nflows;
	j->nobj = 0;
	sc.last_rx = malloc(sizeof(uint32_t) * j->n);
	if (!sc.last_rx)
		return -ENOMEM;
	for (uint32_t r = 0; r < j->n; r++)
		sc.last_rx[r] = INA_NONE;
	int rc = algo == SIM_INA_HRING ? sched_hring(s, j, &sc) : sched_dbtree(j, &sc);
	if (!rc)
		rc = sc.rc;
	if (!rc) {
		j->dep_left = calloc(j->nobj ? j->nobj : 1, sizeof(uint32_t));
		j->succ_off = calloc((size_t)j->nobj + 1, sizeof(uint32_t));
		j->succ = malloc(sizeof(uint32_t) * (sc.nedge ? sc.nedge : 1));
		if (!j->dep_left || !j->succ_off || !j->succ)
			rc = -ENOMEM;
	}
	if (!rc) {
		for (uint32_t e = 0; e < sc.nedge; e++) {
			j->succ_off[sc.edge[e][0] + 1]++;
			j->dep_left[sc.edge[e][1]]++;
		}
		for (uint32_t t = 0; t < j->nobj; t++)
			j->succ_off[t + 1] += j->succ_off[t];
		uint32_t *fill = calloc(j->nobj ? j->nobj : 1, sizeof(uint32_t));
		if (!fill) {
			rc = -ENOMEM;
		} else {
			for (uint32_t e = 0; e < sc.nedge; e++) {
				uint32_t b = sc.edge[e][0];
				j->succ[j->succ_off[b] + fill[b]++] = sc.edge[e][1];
			}
			free(fill);
		}
	}
	free(sc.last_rx);
	free(sc.edge);
	return rc;
}

static int job_setup_ring(struct sim *s, struct ina_job *j)
{
	uint64_t chunk = (j->size_bytes + j->n - 1) / j->n;
	j->steps = 2 * (j->n - 1);
	j->flow0 = s->nflows;
	j->algo = SIM_INA_RING;
	j->nobj = 2 * j->n;
	j->next_step = calloc(j->n, sizeof(uint32_t));
	j->recvd = calloc(j->n, sizeof(uint32_t));
	j->obj_step = malloc(2 * sizeof(uint32_t) * j->n);
	if (!j->next_step || !j->recvd || !j->obj_step)
		return -ENOMEM;
	for (uint32_t o = 0; o < 2 * j->n; o++) {
		j->obj_step[o] = INA_NONE;
		uint32_t i = o / 2;
		struct sim_flow *f = sim_flow_new(s, j->hosts[i], j->hosts[(i + 1) % j->n], chunk, 0, 0);
		if (!f)
			return -ENOMEM;
		f->trig_start = INA_RING_TRIG;
	}
	return 0;
}

static int ina_create(struct sim *s)
{
	const struct sim_config *c = &s->cfg;
	uint32_t J = c->ina_jobs, n = c->ina_job_hosts ? c->ina_job_hosts : (J ? s->nhosts / J : 0);
	if (!J || n < 2 || (uint64_t)J * n > s->nhosts || n > WIRE_BSL_MAX || J > 65535) {
		sim_set_err(s, "ina: need jobs >= 1 and 2 <= job_hosts <= 4096 with jobs * job_hosts <= hosts");
		return -EINVAL;
	}
	if (!c->ina_size_bytes || c->ina_size_bytes > SIM_FLOW_MAX_BYTES ||
	    c->ina_size_bytes / c->mtu_bytes >= (1u << 30)) {
		sim_set_err(s, "ina.size_bytes must be > 0 and below 2^30 MTUs");
		return -EINVAL;
	}
	uint64_t nch = (c->ina_size_bytes + c->mtu_bytes - 1) / c->mtu_bytes;
	if ((uint64_t)n * nch * c->ina_elems > (1ull << 32) || (uint64_t)J * n * nch > (1ull << 34)) {
		sim_set_err(s, "ina: jobs * job_hosts * chunks (and * elems) too large to simulate");
		return -E2BIG;
	}
	if (c->ina_job_slots < 1 || c->ina_job_slots > 4096 || c->ina_elems < 1 || c->ina_elems > 1024 ||
	    c->ina_loss >= 1 || !(c->ina_rto_us >= 0) || c->ina_rto_us > 1e9 || c->ina_start_us > 1e11 ||
	    c->ina_switch_ns_per_pkt > 1e9 || c->ina_switch_latency_ns > 1e9) {
		sim_set_err(s, "ina: need 1 <= job_slots <= 4096, 1 <= elems <= 1024, loss < 1, 0 <= rto_us <= 1e9, "
			    "switch_ns_per_pkt and switch_latency_ns <= 1e9");
		return -EINVAL;
	}
	struct sim_ina *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	s->mod[SIM_MOD_ina] = a;
	sim_rng_init(s, &a->rng, 6, 0);
	sim_rng_init(s, &a->jrng, 6, 1);
	/* libinca's rule (util/rtt.h): a configured RTO is the initial one and the floor */
	a->rto_init_ps = sim_time_from_us_f(c->ina_rto_us > 0 ? c->ina_rto_us : UTIL_RTT_INC_INITIAL_US);
	a->rto_floor_ps = sim_time_from_us_f(c->ina_rto_us > 0 ? c->ina_rto_us : UTIL_RTT_INC_FLOOR_US);
	a->rto_max_ps = sim_time_from_us(UTIL_RTT_INC_MAX_US);
	if (a->rto_max_ps < a->rto_init_ps)
		a->rto_max_ps = a->rto_init_ps;
	a->data_bytes = c->ina_elems * 4;
	unsigned bsl = WIRE_BSL_MIN;
	while (bsl < n)
		bsl *= 2;
	a->bits_max = bsl / 8;
	a->rec_bytes = (sizeof(struct ina_buf) + a->bits_max + a->data_bytes + 7) / 8 * 8;
	a->nrec = 1; /* record 0 = none */
	a->njobs = J;
	a->jobs = calloc(J, sizeof(*a->jobs));
	a->sw_head = malloc(sizeof(uint32_t) * s->nsw);
	a->sw_used = calloc(s->nsw, sizeof(uint32_t));
	a->mem = calloc((size_t)J * n, sizeof(*a->mem));
	a->member_of_host = calloc(s->nhosts, sizeof(uint32_t));
	uint32_t *map = malloc(sizeof(uint32_t) * s->nsw);
	if (!a->jobs || !a->sw_head || !a->sw_used || !a->mem || !a->member_of_host || !map) {
		free(map);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->nsw; i++)
		a->sw_head[i] = map[i] = INA_NONE;
	a->eng_ps = sim_time_from_us_f(c->ina_switch_ns_per_pkt / 1000);
	a->eng_lat_ps = sim_time_from_us_f(c->ina_switch_latency_ns / 1000);
	if (a->eng_ps || a->eng_lat_ps) {
		a->eng_free = calloc(s->nsw, sizeof(sim_time_ps));
		a->eng_busy = calloc(s->nsw, sizeof(sim_time_ps));
		a->eng_backlog = calloc(s->nsw, sizeof(uint64_t));
		if (!a->eng_free || !a->eng_busy || !a->eng_backlog)
			return -ENOMEM;
	}
	a->ring_lo = s->nflows;
	int rc = 0;
	for (uint32_t x = 0; x < J && !rc; x++) {
		struct ina_job *j = &a->jobs[x];
		j->id = x;
		j->n = n;
		j->size_bytes = c->ina_size_bytes;
		j->nchunks = (uint32_t)((c->ina_size_bytes + c->mtu_bytes - 1) / c->mtu_bytes);
		j->bsl_bits = bsl;
		j->hosts = malloc(sizeof(uint32_t) * n);
		if (!j->hosts) {
			rc = -ENOMEM;
			break;
		}
		for (uint32_t r = 0; r < n; r++)
			j->hosts[r] = c->ina_placement == SIM_INA_STRIDED ? r * J + x : x * n + r;
		sim_ev_init(&j->start_ev, sim_ina_job_start);
		if (c->ina_mode == SIM_INA_INC) {
			if ((rc = build_tree(s, j, map)) != 0) {
				sim_set_err(s, "ina: cannot build an aggregation tree on this topology");
				break;
			}
			bool fits = true;
			for (uint32_t i = 0; i < j->ntn; i++)
				fits &= a->sw_used[a->tn[j->tns[i]].sw] + c->ina_job_slots <= c->ina_switch_slots;
			j->inc = fits;
		}
		if (j->inc)
			rc = job_setup_inc(s, j);
		else if (c->ina_mode == SIM_INA_HRING || c->ina_mode == SIM_INA_DBTREE)
			rc = job_setup_sched(s, j, c->ina_mode);
		else
			rc = job_setup_ring(s, j);
		sim_schedule(s, &j->start_ev, sim_time_from_us_f(c->ina_start_us));
	}
	a->ring_hi = s->nflows;
	free(map);
	if (!rc && !(a->sends = calloc(a->max_sends ? a->max_sends : 1, sizeof(*a->sends))))
		rc = -ENOMEM;
	return rc;
}

static void ina_destroy(struct sim *s)
{
	struct sim_ina *a = ina_of(s);
	if (!a)
		return;
	for (uint32_t x = 0; x < a->njobs; x++) {
		struct ina_job *j = &a->jobs[x];
		free(j->hosts);
		free(j->tns);
		free(j->expect);
		free(j->next_step);
		free(j->recvd);
		free(j->obj_step);
		free(j->dep_left);
		free(j->succ_off);
		free(j->succ);
	}
	for (uint32_t t = 0; t < a->ntn; t++) {
		agg_tree_destroy(a->tn[t].tree);
		free(a->tn[t].abm);
		free(a->tn[t].bift);
	}
	for (uint32_t m = 0; m < a->nmem; m++) {
		free(a->mem[m].got);
		free(a->mem[m].w);
	}
	free(a->jobs);
	free(a->tn);
	free(a->sw_head);
	free(a->sw_used);
	free(a->mem);
	free(a->member_of_host);
	free(a->pool);
	free(a->sends);
	free(a->eng_free);
	free(a->eng_busy);
	free(a->eng_backlog);
	free(a);
	s->mod[SIM_MOD_ina] = NULL;
}

static uint64_t ina_progress(const struct sim *s)
{
	const struct sim_ina *a = ina_of(s);
	uint64_t n = a->ring_completions;
	for (uint32_t i = 0; i < a->njobs; i++)
		n += a->jobs[i].results_ok + a->jobs[i].members_done;
	return n;
}

static bool ina_run_done(const struct sim *s)
{
	const struct sim_ina *a = ina_of(s);
	uint64_t others = s->nflows - (a->ring_hi - a->ring_lo);
	return a->jobs_done == a->njobs && s->flows_done - a->ring_completions >= others;
}

/* Ring objects are reused: count each once, done if its last step is done. */
static void ina_adjust_stats(const struct sim *s, struct sim_stats *st)
{
	const struct sim_ina *a = ina_of(s);
	uint32_t done = 0;
	for (uint32_t x = 0; x < a->njobs; x++) /* a finished job's flows count as done */
		if (!a->jobs[x].inc)
			for (uint32_t o = 0; o < a->jobs[x].nobj; o++)
				done += a->jobs[x].finished || s->flows[a->jobs[x].flow0 + o].state == SIM_FLOW_DONE;
	st->flows_done = (uint32_t)(s->flows_done - a->ring_completions) + done;
}

/* ---- results ----------------------------------------------------------------------------- */
uint32_t sim_ina_job_count(const struct sim *s)
{
	return ina_of(s) ? ina_of(s)->njobs : 0;
}

int sim_ina_job_result(const struct sim *s, uint32_t x, struct sim_ina_job_result *r)
{
	if (!ina_of(s) || x >= ina_of(s)->njobs)
		return -ENOENT;
	const struct ina_job *j = &ina_of(s)->jobs[x];
	memset(r, 0, sizeof(*r));
	r->job = j->id;
	r->hosts = j->n;
	r->first_host = j->hosts[0];
	r->size_bytes = j->size_bytes;
	r->inc = j->inc;
	r->algo = j->inc ? SIM_INA_INC : j->algo;
	r->done = j->finished;
	r->levels = j->inc ? j->levels : 0;
	r->tree_switches = j->inc ? j->ntn : 0;
	r->start_ps = j->start_ps;
	r->finish_ps = j->finish_ps;
	r->bound_ps = j->bound_ps;
	r->results_ok = j->results_ok;
	r->results_bad = j->results_bad;
	r->dup_results = j->dups;
	r->retx_pkts = j->retx;
	r->timeouts = j->timeouts;
	return 0;
}

static uint64_t ina_notices(const struct sim_ina *a)
{
	uint64_t n = 0;
	for (uint32_t t = 0; t < a->ntn; t++) {
		struct agg_tree_stats st;
		if (!a->tn[t].tree)
			continue;
		agg_tree_get_stats(a->tn[t].tree, &st);
		n += st.notices;
	}
	return n;
}

int sim_ina_get_stats(const struct sim *s, struct sim_ina_stats *st)
{
	const struct sim_ina *a = ina_of(s);
	if (!a)
		return -ENOENT;
	memset(st, 0, sizeof(*st));
	for (int v = 0; v < AGG_VERDICT_COUNT && v < SIM_INA_VERDICTS; v++)
		st->verdicts[v] = a->verdicts[v];
	st->lost_pkts = a->lost_pkts;
	st->drops_queue = a->drops_queue;
	st->pkts = a->pkts;
	st->notices = ina_notices(a);
	st->nack_resends = a->nack_resends;
	st->jobs_done = a->jobs_done;
	st->engine_pkts = a->eng_pkts;
	st->engine_drops = a->eng_drops;
	st->engine_max_backlog_bytes = a->eng_max_backlog;
	for (uint32_t i = 0; a->eng_busy && i < s->nsw; i++)
		if (a->eng_busy[i] > st->engine_busy_max_ps)
			st->engine_busy_max_ps = a->eng_busy[i];
	return 0;
}

static int ina_write_outputs(struct sim *s, const char *dir)
{
	char path[SIM_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/ina.csv", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "job,mode,hosts,first_host,size_bytes,levels,tree_switches,start_us,finish_us,time_us,"
		   "bound_us,time_over_bound,results_ok,results_bad,dup_results,retx_pkts,timeouts,done\n");
	for (uint32_t x = 0; x < sim_ina_job_count(s); x++) {
		struct sim_ina_job_result r;
		sim_ina_job_result(s, x, &r);
		double t = sim_time_to_us(r.finish_ps - r.start_ps), b = sim_time_to_us(r.bound_ps);
		fprintf(f, "%u,%s,%u,%u,%llu,%u,%u,%.3f,%.3f,%.3f,%.3f,%.4f,%llu,%llu,%llu,%llu,%llu,%d\n",
			r.job, sim_ina_algo_name(r.algo), r.hosts, r.first_host, (unsigned long long)r.size_bytes,
			r.levels, r.tree_switches, sim_time_to_us(r.start_ps), sim_time_to_us(r.finish_ps),
			r.done ? t : 0.0, r.inc ? b : 0.0, r.inc && r.done && b > 0 ? t / b : 0.0,
			(unsigned long long)r.results_ok, (unsigned long long)r.results_bad,
			(unsigned long long)r.dup_results, (unsigned long long)r.retx_pkts,
			(unsigned long long)r.timeouts, r.done ? 1 : 0);
	}
	if (fclose(f))
		return -errno;
	snprintf(path, sizeof(path), "%s/ina_engine.csv", dir);
	if (!(f = fopen(path, "w")))
		return -errno;
	fprintf(f, "verdict,count\n");
	for (int v = 0; v < AGG_VERDICT_COUNT; v++)
		fprintf(f, "%s,%llu\n", agg_verdict_name((enum agg_verdict)v),
			(unsigned long long)ina_of(s)->verdicts[v]);
	fprintf(f, "lost_pkts,%llu\nqueue_drops,%llu\nina_pkts,%llu\nnotices,%llu\nnack_resends,%llu\n",
		(unsigned long long)ina_of(s)->lost_pkts, (unsigned long long)ina_of(s)->drops_queue,
		(unsigned long long)ina_of(s)->pkts, (unsigned long long)ina_notices(ina_of(s)),
		(unsigned long long)ina_of(s)->nack_resends);
	return fclose(f) ? -errno : 0;
}

/* inca-switch's cost per 4 KiB contribution on this machine class: `bench-switch --bytes 4068
 * --trials 3` (4 members, 1 worker thread, ICRC checked, GSO/GRO) measured a median of 386 k
 * input packets per daemon CPU-second (366-476 k): 1e9 / 386250 = 2589 ns per packet. */
#define INA_ENGINE_NS_DEFAULT "2589"

static const char *const ina_mode_names[] = { "off", "inc", "ring", "hring", "dbtree", NULL };

const char *sim_ina_algo_name(int algo)
{
	return algo >= 0 && algo <= SIM_INA_DBTREE ? ina_mode_names[algo] : "?";
}
static const char *const ina_place_names[] = { "contiguous", "strided", NULL };
static const char *const ina_dtype_names[] = { "int32", "fp32", NULL };
static const struct sim_param ina_params[] = {
	{ "ina", "mode", SIM_P_ENUM, SIM_PARAM_FIELD(ina_mode), "off", ina_mode_names, "off | inc (AllReduce jobs aggregated by lib/agg in switches; jobs without slots run ring) | ring (all jobs ring AllReduce: the baseline) | hring (hierarchical ring: rings within and across edge switches) | dbtree (double binary tree, pipelined)" },
	{ "ina", "jobs", SIM_P_U32, SIM_PARAM_FIELD(ina_jobs), "1", NULL, "concurrent AllReduce jobs (admitted in id order)" },
	{ "ina", "job_hosts", SIM_P_U32, SIM_PARAM_FIELD(ina_job_hosts), "0", NULL, "ranks per job (0 = hosts / jobs), at most 4096" },
	{ "ina", "size_bytes", SIM_P_U64, SIM_PARAM_FIELD(ina_size_bytes), "1048576", NULL, "AllReduce buffer per rank (chunks of host.mtu_bytes)" },
	{ "ina", "placement", SIM_P_ENUM, SIM_PARAM_FIELD(ina_placement), "contiguous", ina_place_names, "contiguous (job j: hosts j*n..) | strided (rank r of job j: host r*jobs+j)" },
	{ "ina", "switch_slots", SIM_P_U32, SIM_PARAM_FIELD(ina_switch_slots), "256", NULL, "aggregation slots per switch, shared by the jobs whose trees use it" },
	{ "ina", "job_slots", SIM_P_U32, SIM_PARAM_FIELD(ina_job_slots), "64", NULL, "slots a job takes at every switch of its tree = chunks in flight per member" },
	{ "ina", "elems", SIM_P_U32, SIM_PARAM_FIELD(ina_elems), "16", NULL, "real elements carried and reduced per packet (the rest of the MTU is modelled only)" },
	{ "ina", "dtype", SIM_P_ENUM, SIM_PARAM_FIELD(ina_dtype), "int32", ina_dtype_names, "int32 | fp32 (values are small integers: sums are exact in any order)" },
	{ "ina", "loss", SIM_P_DBL, SIM_PARAM_FIELD(ina_loss), "0", NULL, "probability that an INA packet is lost on each link" },
	{ "ina", "rto_us", SIM_P_DBL, SIM_PARAM_FIELD(ina_rto_us), "0", NULL, "member retransmission timeout as libinca's rto_us: 0 = 20 ms until the first RTT sample, then SRTT + 4 RTTVAR, at least 2 ms; > 0: initial RTO and floor. From the chunk's estimated departure, doubling per retry up to max(200 ms, rto_us)" },
	{ "ina", "start_us", SIM_P_DBL, SIM_PARAM_FIELD(ina_start_us), "0", NULL, "start time of every job" },
	{ "ina", "switch_ns_per_pkt", SIM_P_DBL, SIM_PARAM_FIELD(ina_switch_ns_per_pkt), INA_ENGINE_NS_DEFAULT, NULL, "aggregation engine service time per input packet, one FIFO engine per switch (default: inca-switch measured by bench-switch at 4 KiB, docs/sim.md)" },
	{ "ina", "switch_latency_ns", SIM_P_DBL, SIM_PARAM_FIELD(ina_switch_latency_ns), "1000", NULL, "engine pipeline latency added to each input's service" },
};

static bool ina_enabled(const struct sim_config *c)
{
	return c->ina_mode != SIM_INA_OFF;
}

const struct sim_module_ops sim_ina_ops = {
	.name = "ina",
	.params = ina_params,
	.nparams = sizeof(ina_params) / sizeof(ina_params[0]),
	.enabled = ina_enabled,
	.pkt_lo = SIM_PKT_INA_DATA,
	.pkt_hi = SIM_PKT_INA_RESULT,
	.create = ina_create,
	.destroy = ina_destroy,
	.switch_rx = sim_ina_switch_rx,
	.host_rx = sim_ina_host_rx,
	.flow_recv_done = sim_ina_flow_recv_done,
	.flow_done = sim_ina_flow_done,
	.run_done = ina_run_done,
	.progress = ina_progress,
	.adjust_stats = ina_adjust_stats,
	.write_outputs = ina_write_outputs,
};
