/* sim/sim_topo.c: topology generators (fat tree, leaf-spine, draft-lyu 4-tier) and the routing
 * tables derived from them. Generators (and the topology-file reader, sim_topo_file.c) only
 * emit a list of links; routes are then computed generically by breadth-first search from
 * every edge switch, so parallel links and any up/down tree work without special cases. Each
 * switch ends up with a short sorted list of host ranges, each mapped to its set of
 * equal-cost egress ports: one search and one range per run of consecutive host ids on one
 * edge switch, so numbering the hosts of an edge switch contiguously keeps both small. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_topo_int.h"

int sim_topo_add_link(struct sim_topo_links *l, uint32_t a, uint32_t b, uint8_t tier)
{
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 256;
		struct sim_topo_link *v = realloc(l->v, sizeof(*v) * cap);
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = (struct sim_topo_link){ a, b, tier, 0, 0 };
	return 0;
}

void sim_topo_nodes_free(struct sim_topo_nodes *nd)
{
	free(nd->tier);
	free(nd->names);
	free(nd->hnames);
	nd->tier = NULL;
	nd->names = nd->hnames = NULL;
}

static uint32_t ratio_hosts(double up_gbps, uint32_t uplinks, double host_gbps)
{
	double h = up_gbps * uplinks / host_gbps; /* speeds are checked to be in [1, 3200] */
	return h < 1 ? 1 : h > 65535 ? 65535 : (uint32_t)(h + 0.5);
}

/* Counts are computed in 64 bits before anything is allocated (limits: sim_topo_int.h). */
static bool too_big(uint64_t hosts, uint64_t switches, uint64_t links, uint64_t radix)
{
	return hosts > SIM_TOPO_MAX_HOSTS || switches > SIM_TOPO_MAX_SWITCHES ||
	       links > SIM_TOPO_MAX_LINKS || radix > SIM_TOPO_MAX_PORTS;
}

/* Emits links with node ids: hosts 0..H-1, switch j is H+j. Fills nd (counts, tiers, names)
 * and s->oversub. topology.type = file reads the links from the file (sim_topo_file.c). */
static int gen_topology(struct sim *s, struct sim_topo_links *l, struct sim_topo_nodes *nd)
{
	const struct sim_config *c = &s->cfg;
	uint8_t **tier = &nd->tier;
	char (**names)[32] = &nd->names;
	uint32_t h = 0, sw = 0;
	int rc = 0;
	if (c->topo == SIM_TOPO_FILE) {
		rc = sim_topo_file_read(s, l, nd);
		s->oversub = nd->oversub;
		return rc;
	}
#define SWNAME(j, ...) snprintf((*names)[j], 32, __VA_ARGS__)
	if (c->topo == SIM_TOPO_FATTREE) {
		uint32_t k = c->k, half = k / 2;
		if (k < 2 || k % 2 || k > 256) {
			snprintf(s->err, sizeof(s->err), "topology.k = %u: a fat tree needs an even k "
				 "between 2 and 256 (k pods of k/2 ToRs and k/2 aggregation switches)", k);
			return -EINVAL;
		}
		uint32_t hp = c->hosts_per_tor ? c->hosts_per_tor : ratio_hosts(c->tier1_gbps, half, c->host_gbps);
		uint32_t ntor = k * half, nagg = k * half, ncore = half * half;
		if (too_big((uint64_t)ntor * hp, (uint64_t)ntor + nagg + ncore, (uint64_t)ntor * hp + 2ull * k * half * half, hp + half))
			return -E2BIG;
		h = ntor * hp;
		sw = ntor + nagg + ncore;
		*tier = calloc(sw, 1);
		*names = calloc(sw, 32);
		if (!*tier || !*names)
			return -ENOMEM;
		for (uint32_t i = 0; i < ntor; i++) { (*tier)[i] = 1; SWNAME(i, "tor%u", i); }
		for (uint32_t i = 0; i < nagg; i++) { (*tier)[ntor + i] = 2; SWNAME(ntor + i, "agg%u", i); }
		for (uint32_t i = 0; i < ncore; i++) { (*tier)[ntor + nagg + i] = 3; SWNAME(ntor + nagg + i, "core%u", i); }
		for (uint32_t i = 0; i < h && !rc; i++)
			rc = sim_topo_add_link(l, i, h + i / hp, 0);
		for (uint32_t p = 0; p < k; p++)
			for (uint32_t t = 0; t < half; t++)
				for (uint32_t a = 0; a < half && !rc; a++)
					rc = sim_topo_add_link(l, h + p * half + t, h + ntor + p * half + a, 1);
		for (uint32_t p = 0; p < k; p++)
			for (uint32_t a = 0; a < half; a++)
				for (uint32_t j = 0; j < half && !rc; j++)
					rc = sim_topo_add_link(l, h + ntor + p * half + a, h + ntor + nagg + a * half + j, 2);
		s->oversub = (double)hp * c->host_gbps / (half * c->tier1_gbps);
	} else if (c->topo == SIM_TOPO_LEAFSPINE) {
		uint32_t T = c->tors, Sp = c->spines, P = c->parallel_links ? c->parallel_links : 1;
		if (!T || !Sp) {
			sim_set_err(s, "topology.tors and topology.spines must be at least 1");
			return -EINVAL;
		}
		if (too_big(0, (uint64_t)T + Sp, (uint64_t)T * Sp * P, (uint64_t)Sp * P))
			return -E2BIG;
		uint32_t hp = c->hosts_per_tor ? c->hosts_per_tor : ratio_hosts(c->tier1_gbps, Sp * P, c->host_gbps);
		if (too_big((uint64_t)T * hp, (uint64_t)T + Sp, (uint64_t)T * hp + (uint64_t)T * Sp * P,
			    (uint64_t)hp + (uint64_t)Sp * P + (uint64_t)T * P))
			return -E2BIG;
		h = T * hp;
		sw = T + Sp;
		*tier = calloc(sw, 1);
		*names = calloc(sw, 32);
		if (!*tier || !*names)
			return -ENOMEM;
		for (uint32_t i = 0; i < T; i++) { (*tier)[i] = 1; SWNAME(i, "leaf%u", i); }
		for (uint32_t i = 0; i < Sp; i++) { (*tier)[T + i] = 2; SWNAME(T + i, "spine%u", i); }
		for (uint32_t i = 0; i < h && !rc; i++)
			rc = sim_topo_add_link(l, i, h + i / hp, 0);
		for (uint32_t t = 0; t < T; t++)
			for (uint32_t j = 0; j < Sp; j++)
				for (uint32_t p = 0; p < P && !rc; p++)
					rc = sim_topo_add_link(l, h + t, h + T + j, 1);
		s->oversub = (double)hp * c->host_gbps / (Sp * P * c->tier1_gbps);
	} else if (c->topo == SIM_TOPO_LYU4) {
		/* draft-lyu-rtgwg-coordinated-cm Figure 1. Computing rack x: b L1 (ToR) switches with
		 * a hosts each, fully meshed to c L2 switches. Switching rack y: d L3 switches fully
		 * meshed to e L4 switches. Every L2 of computing rack x has one uplink into each
		 * switching rack, to L3 number floor(x*d/n) there, so an L3 serves a block of
		 * computing racks and traffic between blocks turns at L4 (as in the draft's
		 * H-1-1 -> H-n-1 example). */
		uint32_t n = c->racks, b = c->l1_per_rack, cc = c->l2_per_rack;
		uint32_t m = c->switching_racks, d = c->l3_per_srack, e = c->l4_per_srack;
		if (!n || !b || !cc || !m || !d || !e) {
			sim_set_err(s, "lyu4: topology.racks, l1_per_rack, l2_per_rack, switching_racks, "
				    "l3_per_srack and l4_per_srack must all be at least 1");
			return -EINVAL;
		}
		if (too_big(0, (uint64_t)n * (b + cc) + (uint64_t)m * (d + e), (uint64_t)n * b * cc +
			    (uint64_t)n * cc * m + (uint64_t)m * d * e, (uint64_t)b + cc + m + d + e + n))
			return -E2BIG;
		uint32_t a = c->hosts_per_tor ? c->hosts_per_tor : ratio_hosts(c->tier1_gbps, cc, c->host_gbps);
		if (too_big((uint64_t)n * b * a, 0, (uint64_t)n * b * a, (uint64_t)a + cc))
			return -E2BIG;
		uint32_t o1 = 0, o2 = n * b, o3 = o2 + n * cc, o4 = o3 + m * d;
		h = n * b * a;
		sw = o4 + m * e;
		*tier = calloc(sw, 1);
		*names = calloc(sw, 32);
		if (!*tier || !*names)
			return -ENOMEM;
		for (uint32_t x = 0; x < n; x++) {
			for (uint32_t i = 0; i < b; i++) { (*tier)[o1 + x * b + i] = 1; SWNAME(o1 + x * b + i, "L1-%u-%u", x + 1, i + 1); }
			for (uint32_t i = 0; i < cc; i++) { (*tier)[o2 + x * cc + i] = 2; SWNAME(o2 + x * cc + i, "L2-%u-%u", x + 1, i + 1); }
		}
		for (uint32_t y = 0; y < m; y++) {
			for (uint32_t j = 0; j < d; j++) { (*tier)[o3 + y * d + j] = 3; SWNAME(o3 + y * d + j, "L3-%u-%u", y + 1, j + 1); }
			for (uint32_t j = 0; j < e; j++) { (*tier)[o4 + y * e + j] = 4; SWNAME(o4 + y * e + j, "L4-%u-%u", y + 1, j + 1); }
		}
		for (uint32_t i = 0; i < h && !rc; i++)
			rc = sim_topo_add_link(l, i, h + o1 + i / a, 0);
		for (uint32_t x = 0; x < n; x++)
			for (uint32_t i = 0; i < b; i++)
				for (uint32_t j = 0; j < cc && !rc; j++)
					rc = sim_topo_add_link(l, h + o1 + x * b + i, h + o2 + x * cc + j, 1);
		for (uint32_t x = 0; x < n; x++)
			for (uint32_t i = 0; i < cc; i++)
				for (uint32_t y = 0; y < m && !rc; y++)
					rc = sim_topo_add_link(l, h + o2 + x * cc + i, h + o3 + y * d + (uint32_t)((uint64_t)x * d / n), 2);
		for (uint32_t y = 0; y < m; y++)
			for (uint32_t j = 0; j < d; j++)
				for (uint32_t q = 0; q < e && !rc; q++)
					rc = sim_topo_add_link(l, h + o3 + y * d + j, h + o4 + y * e + q, 3);
		s->oversub = (double)a * c->host_gbps / (cc * c->tier1_gbps);
	} else {
		return -EINVAL;
	}
#undef SWNAME
	nd->nhosts = h;
	nd->nsw = sw;
	return rc;
}

void sim_topo_tier_link(const struct sim_config *c, unsigned t, uint64_t *rate_bps,
			sim_time_ps *latency_ps)
{
	double gbps = t == 0 ? c->host_gbps : t == 1 ? c->tier1_gbps : t == 2 ? c->tier2_gbps : c->tier3_gbps;
	double ns = t == 0 ? c->host_latency_ns : t == 1 ? c->tier1_latency_ns
		: t == 2 ? c->tier2_latency_ns : c->tier3_latency_ns;
	*rate_bps = (uint64_t)(gbps * 1e9 + 0.5);
	*latency_ps = (sim_time_ps)(ns * 1000 + 0.5);
}

static double tier_gbps(const struct sim_config *c, unsigned t)
{
	return t == 0 ? c->host_gbps : t == 1 ? c->tier1_gbps : t == 2 ? c->tier2_gbps : c->tier3_gbps;
}

static struct sim_node *node_of(struct sim *s, uint32_t id)
{
	return id < s->nhosts ? &s->hosts[id].n : &s->sws[id - s->nhosts].n;
}

/* ---- routing tables ---------------------------------------------------------------------- */
struct gbuild { uint32_t gcap, pcap, np; };

static int group_append(struct sim_switch *sw, struct gbuild *gb, uint32_t lo, uint32_t hi,
			const uint16_t *ports, uint16_t n)
{
	if (sw->ngroups) {
		struct sim_rgroup *g = &sw->groups[sw->ngroups - 1];
		if (g->hi == lo && g->n == n && !memcmp(&sw->gports[g->off], ports, n * sizeof(*ports))) {
			g->hi = hi;
			return 0;
		}
	}
	if (sw->ngroups == gb->gcap) {
		uint32_t cap = gb->gcap ? gb->gcap * 2 : 16;
		struct sim_rgroup *v = realloc(sw->groups, sizeof(*v) * cap);
		if (!v)
			return -ENOMEM;
		sw->groups = v;
		gb->gcap = cap;
	}
	if (gb->np + n > gb->pcap) {
		uint32_t cap = gb->pcap ? gb->pcap * 2 : 64;
		while (cap < gb->np + n)
			cap *= 2;
		uint16_t *v = realloc(sw->gports, sizeof(*v) * cap);
		if (!v)
			return -ENOMEM;
		sw->gports = v;
		gb->pcap = cap;
	}
	memcpy(&sw->gports[gb->np], ports, n * sizeof(*ports));
	sw->groups[sw->ngroups++] = (struct sim_rgroup){ lo, hi, gb->np, n,
		(uint16_t)util_rng_below(&sw->rng, n) };
	gb->np += n;
	return 0;
}

/* Switch-to-switch adjacency as flat arrays (nbr_off[j] .. nbr_off[j + 1] - 1: the ports of
 * switch j, each with its peer switch index or UINT32_MAX for a host or a dead link), so that
 * the breadth-first searches below run over contiguous memory instead of chasing port and
 * node pointers: at 65 k hosts (5120 switches of 64 ports, 2048 searches) that is what the
 * route computation costs. */
static int build_adjacency(struct sim *s, uint32_t **off_out, uint32_t **nbr_out)
{
	uint32_t S = s->nsw, H = s->nhosts;
	uint32_t *off = malloc(sizeof(*off) * ((size_t)S + 1));
	size_t total = 0;
	if (!off)
		return -ENOMEM;
	for (uint32_t j = 0; j < S; j++) {
		off[j] = (uint32_t)total;
		total += s->sws[j].n.nports;
	}
	off[S] = (uint32_t)total;
	uint32_t *nbr = malloc(sizeof(*nbr) * (total ? total : 1));
	if (!nbr) {
		free(off);
		return -ENOMEM;
	}
	for (uint32_t j = 0; j < S; j++) {
		const struct sim_node *n = &s->sws[j].n;
		for (uint32_t p = 0; p < n->nports; p++) {
			const struct sim_node *m = n->ports[p].peer->node;
			nbr[off[j] + p] = n->ports[p].down || m->kind != SIM_NODE_SWITCH ? UINT32_MAX : m->id - H;
		}
	}
	*off_out = off;
	*nbr_out = nbr;
	return 0;
}

static int build_routes(struct sim *s)
{
	uint32_t S = s->nsw, H = s->nhosts;
	uint32_t *dist = malloc(sizeof(*dist) * S), *queue = malloc(sizeof(*queue) * S);
	struct gbuild *gb = calloc(S, sizeof(*gb));
	uint16_t *cand = malloc(sizeof(*cand) * 65536);
	uint32_t *off = NULL, *nbr = NULL;
	int rc = 0;
	if (!dist || !queue || !gb || !cand || build_adjacency(s, &off, &nbr)) {
		rc = -ENOMEM;
		goto out;
	}
	uint32_t lo = 0;
	while (lo < H && !rc) {
		struct sim_node *edge = s->hosts[lo].port.peer->node;
		uint32_t hi = lo + 1;
		while (hi < H && s->hosts[hi].port.peer->node == edge)
			hi++;
		if (edge->kind != SIM_NODE_SWITCH) {
			rc = -EINVAL;
			break;
		}
		/* BFS over switches from this edge switch. */
		uint32_t e = edge->id - H, qh = 0, qt = 0;
		for (uint32_t i = 0; i < S; i++)
			dist[i] = UINT32_MAX;
		dist[e] = 0;
		queue[qt++] = e;
		while (qh < qt) {
			uint32_t n = queue[qh++], dn = dist[n];
			for (uint32_t x = off[n]; x < off[n + 1]; x++) {
				uint32_t m = nbr[x];
				if (m == UINT32_MAX || dist[m] != UINT32_MAX)
					continue;
				dist[m] = dn + 1;
				queue[qt++] = m;
			}
		}
		for (uint32_t i = 0; i < S && !rc; i++) {
			struct sim_switch *sw = &s->sws[i];
			if (dist[i] == UINT32_MAX)
				continue;
			if (i == e) { /* its own hosts, in id order (whatever the order of its ports) */
				for (uint32_t h = lo; h < hi && !rc; h++) {
					uint16_t port = s->hosts[h].port.peer->idx;
					rc = group_append(sw, &gb[i], h, h + 1, &port, 1);
				}
				continue;
			}
			uint16_t n = 0;
			for (uint32_t x = off[i]; x < off[i + 1]; x++)
				if (nbr[x] != UINT32_MAX && dist[nbr[x]] + 1 == dist[i])
					cand[n++] = (uint16_t)(x - off[i]);
			if (n)
				rc = group_append(sw, &gb[i], lo, hi, cand, n);
		}
		lo = hi;
	}
	/* Every switch appended its groups in the order of the host ranges, so they are sorted.
	 * Check it. */
	for (uint32_t i = 0; i < S && !rc; i++)
		for (uint32_t g = 1; g < s->sws[i].ngroups; g++)
			if (s->sws[i].groups[g].lo < s->sws[i].groups[g - 1].hi)
				rc = -EINVAL;
out:
	free(dist);
	free(queue);
	free(gb);
	free(cand);
	free(off);
	free(nbr);
	return rc;
}

int sim_topo_fail_agg_link(struct sim *s, uint32_t agg, uint32_t link)
{
	uint32_t k = s->cfg.k, half = k / 2, ntor = k * half, nagg = k * half;
	if (s->cfg.topo != SIM_TOPO_FATTREE || agg >= nagg || link >= half)
		return -EINVAL;
	/* In the generator, aggregation switch a (position a % (k/2) in its pod) is wired to
	 * cores (a % (k/2)) * k/2 + j, j = 0 .. k/2-1, as in htsim's fat tree. */
	struct sim_switch *a = &s->sws[ntor + agg];
	struct sim_node *core = &s->sws[ntor + nagg + (agg % half) * half + link].n;
	for (uint32_t p = 0; p < a->n.nports; p++) {
		struct sim_port *pt = &a->n.ports[p];
		if (pt->peer->node != core)
			continue;
		if (pt->down)
			return -EALREADY;
		pt->down = pt->peer->down = true;
		return 0;
	}
	return -EINVAL;
}

int sim_topo_reroute(struct sim *s)
{
	for (uint32_t j = 0; j < s->nsw; j++) {
		struct sim_switch *sw = &s->sws[j];
		free(sw->groups);
		free(sw->gports);
		sw->groups = NULL;
		sw->gports = NULL;
		sw->ngroups = 0;
	}
	int rc = build_routes(s);
	for (uint32_t i = 0; !rc && i < s->nflows; i++)
		s->flows[i].ideal_ps = sim_flow_ideal_ps(s, &s->flows[i]);
	return rc;
}

struct sim_node *sim_topo_node_by_name(struct sim *s, const char *name, size_t len)
{
	for (uint32_t i = 0; i < s->nhosts + s->nsw; i++) {
		struct sim_node *n = node_of(s, i);
		if (strlen(n->name) == len && !memcmp(n->name, name, len))
			return n;
	}
	return NULL;
}

struct sim_rgroup *sim_route_group(const struct sim_switch *sw, uint32_t dst)
{
	uint32_t lo = 0, hi = sw->ngroups;
	while (lo < hi) { /* last group with g.lo <= dst */
		uint32_t mid = (lo + hi) / 2;
		if (sw->groups[mid].lo <= dst)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || dst >= sw->groups[lo - 1].hi)
		return NULL;
	return &sw->groups[lo - 1];
}

int sim_topo_build(struct sim *s)
{
	const struct sim_config *c = &s->cfg;
	struct sim_topo_links l = { 0 };
	struct sim_topo_nodes nd = { 0 };
	uint32_t H = 0, S = 0;
	int rc = 0;
	for (unsigned t = 0; t < 4; t++)
		if (!(tier_gbps(c, t) >= 1 && tier_gbps(c, t) <= 3200)) {
			sim_set_err(s, "link speeds must be between 1 and 3200 Gbit/s");
			return -EINVAL;
		}
	rc = gen_topology(s, &l, &nd);
	if (rc) {
		if (rc == -E2BIG)
			sim_set_err(s, "topology too large (over 16 M hosts, 64 M links or 65535 ports per switch)");
		else if (!s->err[0])
			sim_set_err(s, rc == -ENOMEM ? "out of memory building the topology" : "bad topology parameters");
		goto out;
	}
	H = nd.nhosts;
	S = nd.nsw;
	s->nhosts = H;
	s->nsw = S;
	s->hosts = calloc(H, sizeof(*s->hosts));
	s->sws = calloc(S, sizeof(*s->sws));
	s->ports = calloc((size_t)l.n * 2, sizeof(*s->ports));
	uint32_t *deg = calloc(S, sizeof(*deg));
	if (!s->hosts || !s->sws || !s->ports || !deg) {
		free(deg);
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < l.n; i++) {
		if (l.v[i].a >= H) deg[l.v[i].a - H]++;
		if (l.v[i].b >= H) deg[l.v[i].b - H]++;
	}
	for (uint32_t i = 0; i < H; i++) {
		struct sim_host *h = &s->hosts[i];
		h->n.id = i;
		h->n.kind = SIM_NODE_HOST;
		h->n.ports = &h->port;
		if (nd.hnames)
			memcpy(h->n.name, nd.hnames[i], sizeof(h->n.name));
		else
			snprintf(h->n.name, sizeof(h->n.name), "h%u", i);
	}
	for (uint32_t j = 0; j < S; j++) {
		struct sim_switch *sw = &s->sws[j];
		sw->n.id = H + j;
		sw->n.kind = SIM_NODE_SWITCH;
		sw->n.tier = nd.tier[j];
		memcpy(sw->n.name, nd.names[j], sizeof(sw->n.name));
		sw->n.ports = calloc(deg[j] ? deg[j] : 1, sizeof(struct sim_port));
		if (!sw->n.ports || deg[j] > 65535) {
			free(deg);
			rc = -ENOMEM;
			goto out;
		}
		sim_rng_init(s, &sw->rng, 2, j);
		sw->salt = util_rng_next(&sw->rng);
		if (c->routing == SIM_ROUTE_ADAPTIVE) {
			sw->spray_used = calloc(SIM_SPRAY_TABLE, sizeof(*sw->spray_used));
			if (!sw->spray_used) {
				free(deg);
				rc = -ENOMEM;
				goto out;
			}
		}
		if (c->routing == SIM_ROUTE_FLOWLET) {
			sw->flowlets = calloc(4096, sizeof(*sw->flowlets));
			if (!sw->flowlets) {
				free(deg);
				rc = -ENOMEM;
				goto out;
			}
		}
	}
	free(deg);
	uint64_t wire_mtu = (uint64_t)c->mtu_bytes + c->header_bytes;
	for (uint32_t i = 0; i < l.n; i++) {
		struct sim_node *a = node_of(s, l.v[i].a), *b = node_of(s, l.v[i].b);
		if ((a->kind == SIM_NODE_HOST && a->nports) || (b->kind == SIM_NODE_HOST && b->nports)) {
			rc = -EINVAL; /* hosts are single-homed */
			goto out;
		}
		struct sim_port *pa = &a->ports[a->nports], *pb = &b->ports[b->nports];
		sim_port_init(pa);
		sim_port_init(pb);
		pa->idx = (uint16_t)a->nports++;
		pb->idx = (uint16_t)b->nports++;
		pa->node = a;
		pb->node = b;
		pa->is_host = a->kind == SIM_NODE_HOST;
		pb->is_host = b->kind == SIM_NODE_HOST;
		pa->peer = pb;
		pb->peer = pa;
		uint64_t rate = l.v[i].rate_bps;
		sim_time_ps lat = l.v[i].latency_ps;
		if (!rate)
			sim_topo_tier_link(c, l.v[i].tier, &rate, &lat);
		pa->rate_bps = pb->rate_bps = rate;
		pa->latency_ps = pb->latency_ps = lat;
		pa->link_tier = pb->link_tier = l.v[i].tier;
		/* PFC headroom: what the peer can still put on the wire after we decide to pause:
		 * a round trip of data plus a packet in service at each end. */
		uint64_t hr = c->pfc_headroom_bytes ? c->pfc_headroom_bytes
			: 2 * (uint64_t)((double)lat * (double)pa->rate_bps / 8e12) + 2 * wire_mtu + 2 * c->ack_bytes;
		pa->headroom_bytes = pb->headroom_bytes = hr;
		pa->id = s->nports++;
		s->ports[pa->id] = pa;
		pb->id = s->nports++;
		s->ports[pb->id] = pb;
		s->nlinks++;
	}
	for (uint32_t i = 0; i < H; i++)
		if (!s->hosts[i].n.nports) {
			rc = -EINVAL;
			goto out;
		}
	rc = build_routes(s);
	if (rc)
		sim_set_err(s, rc == -ENOMEM ? "out of memory building the routing tables"
			    : "routing: every host must be linked to a switch");
out:
	free(l.v);
	sim_topo_nodes_free(&nd);
	return rc;
}

void sim_topo_free(struct sim *s)
{
	for (uint32_t j = 0; s->sws && j < s->nsw; j++) {
		free(s->sws[j].n.ports);
		free(s->sws[j].groups);
		free(s->sws[j].gports);
		free(s->sws[j].flowlets);
		free(s->sws[j].spray_used);
	}
	free(s->sws);
	free(s->hosts);
	free(s->ports);
	s->sws = NULL;
	s->hosts = NULL;
	s->ports = NULL;
}
