/* sim/sim_osf.c: Open Scheduled Fabric (draft-hcl-rtgwg-osf-framework-01) in inca-sim: topology
 * manager (centralised / distributed / hybrid) fed by timed link-quality reports, OSF-Ingress
 * path selection and per-packet spraying (modelled in the source NIC), OSF-Forwarder source
 * routing, credit-based flow control (4.3.1), OSF-Egress reordering, and fast failure
 * notification (4.4), and (osf.cell_bytes > 0) packet aggregation / fragmentation into cells
 * with per-flow cell numbering and reassembly at the egress. A simulator module (sim_module.h);
 * see docs/sim.md for the model. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_osf_int.h"

static struct osf_flow *oflow(struct sim *s, uint32_t idx)
{
	struct sim_osf *o = osf_of(s);
	if (idx >= o->nfl) {
		uint32_t n = o->nfl ? o->nfl : 64;
		while (n <= idx)
			n *= 2;
		struct osf_flow **v = realloc(o->fl, sizeof(*v) * n);
		if (!v)
			return NULL;
		memset(v + o->nfl, 0, sizeof(*v) * (n - o->nfl));
		o->fl = v;
		o->nfl = n;
	}
	return o->fl[idx];
}


struct osf_flow *sim_osf_oflow_get(struct sim *s, uint32_t idx)
{
	struct osf_flow *of = oflow(s, idx);
	if (of || idx >= osf_of(s)->nfl)
		return of;
	of = calloc(1, sizeof(*of));
	if (!of)
		return NULL;
	of->idx = idx;
	sim_ev_init(&of->hole_ev, sim_osf_hole_fire);
	sim_ev_init(&of->chole_ev, sim_osf_chole_fire);
	osf_of(s)->fl[idx] = of;
	return of;
}

/* ---- paths ------------------------------------------------------------------------------- */
/* Path x: at each switch with n equal-cost ports take digit x mod n and go on with x / n; the
 * forwarders decode the same digits from the packet (osf_select), so the ingress's choice is a
 * source route. */
static int walk_path(struct sim *s, uint32_t src, uint32_t dst, uint32_t x, struct osf_path *pa,
		     uint32_t *nways)
{
	struct sim_port *p = &s->hosts[src].port;
	uint32_t ways = 1;
	pa->nhops = 0;
	for (;;) {
		if (pa->nhops >= OSF_MAXHOPS)
			return -E2BIG;
		pa->ports[pa->nhops++] = p;
		struct sim_node *n = p->peer->node;
		if (n->kind == SIM_NODE_HOST)
			break;
		struct sim_switch *sw = sim_node_sw(n);
		struct sim_rgroup *g = sim_route_group(sw, dst);
		if (!g)
			return -EHOSTUNREACH;
		if (ways < OSF_MAXPATHS)
			ways *= g->n;
		p = &sw->n.ports[sw->gports[g->off + x % g->n]];
		x /= g->n;
	}
	if (nways)
		*nways = ways > OSF_MAXPATHS ? OSF_MAXPATHS : ways;
	return 0;
}

int sim_osf_flow_paths(struct sim *s, struct sim_flow *f, struct osf_flow *of)
{
	uint32_t n;
	struct osf_path tmp;
	of->paths_done = true;
	if (walk_path(s, f->src, f->dst, 0, &tmp, &n))
		return -EINVAL;
	of->paths = calloc(n, sizeof(*of->paths));
	of->wrr = calloc(n, sizeof(*of->wrr));
	if (!of->paths || !of->wrr)
		return -ENOMEM;
	for (uint32_t x = 0; x < n; x++)
		if (walk_path(s, f->src, f->dst, x, &of->paths[x], NULL))
			return -EINVAL;
	of->npaths = (uint16_t)n;
	return 0;
}

/* OSF-Ingress path choice (4.2): weight = bottleneck of bandwidth x (1 - loss) as the TM
 * reports it; paths over a link known down are never used; paths over a congested link
 * (reported queue over congest_bytes, a recent credit rejection, or loss over loss_max) are
 * left out while any other remains. Smooth weighted round robin over what is left. */
uint16_t sim_osf_pick_path(struct sim *s, struct sim_host *h, struct osf_flow *of)
{
	struct sim_osf *o = osf_of(s);
	struct osf_view *v = &o->hv[h->n.id];
	int64_t w[OSF_MAXPATHS];
	int level[OSF_MAXPATHS]; /* 2 usable, 1 congested, 0 down */
	int best_level = 0;
	for (uint16_t i = 0; i < of->npaths; i++) {
		struct osf_path *pa = &of->paths[i];
		int64_t bw = INT64_MAX;
		int lv = 2;
		for (unsigned j = 1; j < pa->nhops; j++) {
			uint32_t id = pa->ports[j]->id;
			if (v->down[id]) {
				lv = 0;
				break;
			}
			double loss = v->loss_ppm[id] / 1e6;
			if (v->q[id] > s->cfg.osf_congest_bytes || s->now < v->rej_until[id] ||
			    loss > s->cfg.osf_loss_max)
				lv = 1;
			int64_t b = (int64_t)(v->rate_mbps[id] * (1 - loss));
			if (b < bw)
				bw = b;
		}
		level[i] = lv;
		w[i] = bw < 1 ? 1 : bw;
		if (lv > best_level)
			best_level = lv;
	}
	int64_t total = 0;
	int best = -1;
	for (uint16_t i = 0; i < of->npaths; i++) {
		if (level[i] != best_level)
			continue;
		of->wrr[i] += w[i];
		total += w[i];
		if (best < 0 || of->wrr[i] > of->wrr[best])
			best = i;
	}
	of->wrr[best] -= total;
	of->last_path = (uint16_t)best;
	return (uint16_t)best;
}

bool sim_osf_path_truly_down(const struct sim_port *const *ports, unsigned n)
{
	for (unsigned j = 1; j < n; j++)
		if (ports[j]->down)
			return true;
	return false;
}

static uint16_t osf_select(struct sim *s, struct sim_switch *sw, const struct sim_pkt *p,
			   struct sim_rgroup *g, const uint16_t *cand, unsigned n)
{
	struct sim_pkt *q = (struct sim_pkt *)p; /* digits are consumed hop by hop */
	uint32_t ctr = q->spray_ctr;
	q->spray_ctr = ctr / n;
	unsigned c = ctr % n;
	if (p->type != SIM_PKT_DATA) /* transport ACKs etc. steer around links known down */
		for (unsigned i = 0; i < n && sw->n.ports[cand[c]].down; i++)
			c = c + 1 < n ? c + 1 : 0;
	return (uint16_t)c;
}

static const struct sim_route_ops sim_route_osf = { "osf", osf_select };

/* ---- grants ------------------------------------------------------------------------------ */
uint32_t sim_osf_grant_new(struct sim_osf *o)
{
	if (o->gfree) {
		uint32_t i = o->gfree;
		o->gfree = o->grants[i - 1].next_free;
		return i;
	}
	if (o->ngrants == o->gcap) {
		uint32_t cap = o->gcap ? o->gcap * 2 : 256;
		struct osf_grant *v = realloc(o->grants, sizeof(*v) * cap);
		if (!v)
			return 0;
		o->grants = v;
		o->gcap = cap;
	}
	return ++o->ngrants;
}

void sim_osf_grant_unref(struct sim_osf *o, uint32_t gi)
{
	struct osf_grant *g = &o->grants[gi - 1];
	if (--g->refs == 0) {
		g->next_free = o->gfree;
		o->gfree = gi;
	}
}

/* The credit unit: a full cell, or a full original packet without cells. */
static void release(struct sim_osf *o, struct sim_port *p, uint64_t bytes)
{
	uint64_t *r = &o->reserved[p->id];
	*r = *r >= bytes ? *r - bytes : 0;
}

static void grant_release(struct sim_osf *o, struct osf_grant *g, unsigned j, uint64_t bytes)
{
	if (bytes > g->held[j])
		bytes = g->held[j];
	g->held[j] -= bytes;
	release(o, g->ports[j], bytes);
}

void sim_osf_release_hops(struct sim_osf *o, struct osf_grant *g, unsigned from, unsigned to, uint64_t bytes)
{
	for (unsigned j = from; j < to && j < g->nhops; j++)
		if (j >= 1)
			grant_release(o, g, j, bytes);
}

/* ---- sending control packets ------------------------------------------------------------- */
void sim_osf_host_send_ctl(struct sim *s, struct sim_host *h, struct sim_pkt *p)
{
	sim_pktq_push(&h->port.cq, p);
	sim_port_kick(s, &h->port);
}

static void port_send_ctl(struct sim *s, struct sim_port *port, struct sim_pkt *p)
{
	if (port->node->kind == SIM_NODE_HOST) {
		sim_osf_host_send_ctl(s, sim_node_host(port->node), p);
		return;
	}
	sim_pktq_push(&port->cq, p);
	sim_port_kick(s, port);
}

/* A credit message cannot go on (its link is down): treated as a rejection at once (a real
 * implementation would time out); the reservations it holds are returned. */
static void credit_lost(struct sim *s, struct sim_pkt *p, bool free_it)
{
	struct sim_osf *o = osf_of(s);
	struct osf_grant *g = &o->grants[p->osf_grant - 1];
	uint64_t bytes = (uint64_t)g->npk * full_pkt(s);
	if (p->type == SIM_PKT_OSF_CREDIT_REQ)
		sim_osf_release_hops(o, g, 1, p->osf_hop, bytes);
	else if (p->type == SIM_PKT_OSF_CREDIT_ACK)
		sim_osf_release_hops(o, g, 1, g->nhops, bytes);
	else
		sim_osf_release_hops(o, g, 1, p->osf_hop + 1u, bytes);
	o->st.credit_lost++;
	struct osf_flow *of = oflow(s, g->flow);
	if (of) {
		of->reqs_out--;
		of->pending -= g->npk < of->pending ? g->npk : of->pending;
		of->retry_ps = s->now + sim_time_from_us_f(s->cfg.osf_retry_us);
	}
	sim_osf_grant_unref(o, p->osf_grant);
	p->osf_grant = 0;
	if (free_it)
		sim_pkt_free(s, p);
	sim_port_kick(s, &s->hosts[s->flows[g->flow].src].port);
}

/* Send a credit message from the node at path index `hop` back toward the initiator. */
static void credit_back(struct sim *s, struct osf_grant *g, struct sim_pkt *p, unsigned hop)
{
	struct sim_port *out = g->ports[hop - 1]->peer;
	p->osf_hop = (uint8_t)(hop - 1);
	if (out->down) {
		credit_lost(s, p, true);
		return;
	}
	port_send_ctl(s, out, p);
}

void sim_osf_switch_rx(struct sim *s, struct sim_switch *sw, struct sim_pkt *p)
{
	struct sim_osf *o = osf_of(s);
	if (p->type == SIM_PKT_OSF_LINKQ) {
		struct sim_rgroup *g = sim_route_group(sw, p->dst);
		if (!g) {
			sim_pkt_free(s, p);
			return;
		}
		struct sim_port *out = NULL;
		for (unsigned i = 0; i < g->n && !out; i++)
			if (!sw->n.ports[sw->gports[g->off + i]].down)
				out = &sw->n.ports[sw->gports[g->off + i]];
		if (!out) {
			sim_pkt_free(s, p);
			return;
		}
		port_send_ctl(s, out, p);
		return;
	}
	struct osf_grant *g = &o->grants[p->osf_grant - 1];
	unsigned hop = p->osf_hop;
	uint64_t bytes = (uint64_t)g->npk * full_pkt(s);
	if (p->type == SIM_PKT_OSF_CREDIT_REQ) {
		/* Step 2/3: reserve on the local egress interface, or reject. */
		struct sim_port *out = g->ports[hop];
		if (out->down || o->reserved[out->id] + bytes > s->cfg.osf_window_bytes) {
			p->type = SIM_PKT_OSF_CREDIT_REJ;
			p->psn = hop; /* where it was rejected */
			credit_back(s, g, p, hop);
			return;
		}
		o->reserved[out->id] += bytes;
		g->held[hop] += bytes;
		if (o->reserved[out->id] > o->st.max_reserved_bytes)
			o->st.max_reserved_bytes = o->reserved[out->id];
		p->osf_hop = (uint8_t)(hop + 1);
		port_send_ctl(s, out, p);
		return;
	}
	if (p->type == SIM_PKT_OSF_CREDIT_REJ) /* Step 6: release here, pass on to the initiator */
		grant_release(o, g, hop, bytes);
	credit_back(s, g, p, hop);
}

/* ---- data path hooks --------------------------------------------------------------------- */
static void osf_data_dequeue(struct sim *s, struct sim_port *port, struct sim_pkt *p)
{
	if (!p->osf_grant)
		return;
	struct osf_grant *g = &osf_of(s)->grants[p->osf_grant - 1];
	for (unsigned j = 1; j < g->nhops; j++)
		if (g->ports[j] == port) {
			grant_release(osf_of(s), g, j, p->size_bytes);
			return;
		}
}

static void osf_pkt_drop(struct sim *s, struct sim_pkt *p, const struct sim_port *at,
			 enum sim_drop_why why)
{
	bool reserved_here = why == SIM_DROP_ROUTED_DOWN; /* it still held credit on `at` */
	struct sim_osf *o = osf_of(s);
	if (p->type >= SIM_PKT_OSF_CREDIT_REQ && p->type <= SIM_PKT_OSF_CREDIT_REJ) {
		credit_lost(s, p, false); /* queued behind a link that went down */
		return;
	}
	if (p->type != SIM_PKT_DATA || !p->osf_grant)
		return;
	struct osf_grant *g = &o->grants[p->osf_grant - 1];
	for (unsigned j = 0; j < g->nhops; j++)
		if (g->ports[j] == at) {
			sim_osf_release_hops(o, g, reserved_here ? j : j + 1, g->nhops, p->size_bytes);
			break;
		}
	sim_osf_grant_unref(o, p->osf_grant);
	p->osf_grant = 0;
}

static bool osf_host_rx_any(struct sim *s, struct sim_host *h, struct sim_pkt *p)
{
	struct sim_osf *o = osf_of(s);
	switch (p->type) {
	case SIM_PKT_OSF_LINKQ:
		sim_osf_linkq_rx(s, h, p);
		sim_pkt_free(s, p);
		return true;
	case SIM_PKT_OSF_CREDIT_REQ: { /* Step 4: the egress answers */
		struct osf_grant *g = &o->grants[p->osf_grant - 1];
		p->type = SIM_PKT_OSF_CREDIT_ACK;
		credit_back(s, g, p, g->nhops);
		return true;
	}
	case SIM_PKT_OSF_CREDIT_ACK:
	case SIM_PKT_OSF_CREDIT_REJ: {
		uint32_t gi = p->osf_grant;
		struct osf_grant *g = &o->grants[gi - 1];
		struct sim_flow *f = &s->flows[g->flow];
		struct osf_flow *of = oflow(s, g->flow);
		of->reqs_out--;
		bool dead = false; /* granted over a link the ingress has since learnt is down */
		for (unsigned j = 1; j < g->nhops; j++)
			dead = dead || o->hv[h->n.id].down[g->ports[j]->id];
		if (p->type == SIM_PKT_OSF_CREDIT_ACK && of->gq_n < 64 && !dead) { /* Step 5 */
			o->st.credit_acks++;
			of->rej_streak = 0;
			o->st.granted_pkts += g->npk;
			g->left = g->npk;
			of->gq[(of->gq_head + of->gq_n) % 64] = gi;
			of->gq_n++;
		} else { /* Step 7: note the congested link, retry a bit later */
			if (p->type == SIM_PKT_OSF_CREDIT_REJ) {
				o->st.credit_rejs++;
				o->hv[h->n.id].rej_until[g->ports[p->psn]->id] =
					s->now + sim_time_from_us_f(s->cfg.osf_rej_hold_us);
			} else {
				sim_osf_release_hops(o, g, 1, g->nhops, (uint64_t)g->npk * full_pkt(s));
			}
			of->pending -= g->npk < of->pending ? g->npk : of->pending;
			/* A fixed retry: exponential backoff was tried and lost throughput (a rejection
			 * at a busy first hop is usually over within one retry). */
			of->rej_streak++;
			of->retry_ps = s->now + sim_time_from_us_f(s->cfg.osf_retry_us);
			sim_osf_grant_unref(o, gi);
		}
		(void)f;
		sim_pkt_free(s, p);
		sim_port_kick(s, &h->port);
		return true;
	}
	case SIM_PKT_ACK: { /* the transport's; a final one makes every unused grant useless */
		struct osf_flow *of = p->flow < s->nflows ? oflow(s, p->flow) : NULL;
		if (of && of->gq_n && p->dst == h->n.id && p->psn >= s->flows[p->flow].npkts)
			sim_osf_close_unused(s, &s->flows[p->flow], of);
		return false;
	}
	case SIM_PKT_DATA: {
		if (p->osf_grant)
			sim_osf_grant_unref(o, p->osf_grant);
		p->osf_grant = 0;
		struct sim_flow *f = &s->flows[p->flow];
		if (o->cell)
			sim_osf_cell_rx(s, f, p);
		else
			sim_osf_egress_rx(s, f, p);
		sim_pkt_free(s, p);
		return true;
	}
	default:
		return false;
	}
}

/* ---- life cycle -------------------------------------------------------------------------- */
static int view_alloc(struct osf_view *v, uint32_t nports, uint32_t nsw)
{
	v->down = calloc(nports, 1);
	v->q = calloc(nports, sizeof(*v->q));
	v->rate_mbps = calloc(nports, sizeof(*v->rate_mbps));
	v->loss_ppm = calloc(nports, sizeof(*v->loss_ppm));
	v->rej_until = calloc(nports, sizeof(*v->rej_until));
	v->seq = calloc(nsw, sizeof(*v->seq));
	return v->down && v->q && v->rate_mbps && v->loss_ppm && v->rej_until && v->seq ? 0 : -ENOMEM;
}

static void view_free(struct osf_view *v)
{
	free(v->down);
	free(v->q);
	free(v->rate_mbps);
	free(v->loss_ppm);
	free(v->rej_until);
	free(v->seq);
}

static int osf_start(struct sim *s)
{
	const struct sim_config *c = &s->cfg;
	if (c->osf_linkq_interval_us <= 0 || c->osf_linkq_interval_us > 1e6 || c->osf_chunk_pkts == 0 ||
	    c->osf_outstanding == 0 || c->osf_outstanding > 60 || c->osf_tm_host >= s->nhosts ||
	    c->osf_report_bytes < 1 || c->osf_report_bytes > 65535 || c->osf_loss_max > 1 ||
	    c->osf_detect_us > 1e6 || c->osf_tm_compute_us > 1e6 || c->osf_reorder_timeout_us <= 0 ||
	    c->osf_reorder_timeout_us > 1e6 || c->osf_retry_us > 1e6 || c->osf_rej_hold_us > 1e6 ||
	    (c->osf_cell_bytes && (c->osf_cell_bytes < 64 || c->osf_cell_bytes > 65535)) ||
	    c->osf_cell_header_bytes > 1024) {
		sim_set_err(s, "osf: bad parameter (interval/timeouts <= 1e6 us, chunk_pkts > 0, "
			    "outstanding 1..60, tm_host < hosts, cell_bytes 0 or 64..65535, "
			    "cell_header_bytes <= 1024)");
		return -EINVAL;
	}
	for (unsigned i = 0; i < s->non; i++) /* two modules would steer data packets */
		if (s->on[i]->route) {
			snprintf(s->err, sizeof(s->err),
				 "osf: cannot run together with %s (both choose the data path)", s->on[i]->name);
			return -EINVAL;
		}
	uint64_t chunk = (uint64_t)c->osf_chunk_pkts * full_pkt(s);
	if (c->osf_mode == SIM_OSF_CREDIT &&
	    (c->osf_window_bytes < chunk || (!c->pfc && c->osf_window_bytes > c->buffer_bytes))) {
		/* A window below one chunk never grants; above the buffer, credited data could
		 * still be dropped at a full queue. */
		sim_set_err(s, "osf: window_bytes must hold one chunk (chunk_pkts full packets or cells) and, "
			    "without PFC, be <= switch.buffer_bytes");
		return -EINVAL;
	}
	if (c->osf_cell_bytes && c->osf_mode == SIM_OSF_CREDIT &&
	    (uint64_t)c->osf_outstanding * c->osf_chunk_pkts * c->osf_cell_bytes < c->mtu_bytes + c->header_bytes) {
		/* A flow's credit must be able to cover one whole packet (see sim_osf_credit_covers). */
		sim_set_err(s, "osf: outstanding x chunk_pkts x cell_bytes must hold one full packet");
		return -EINVAL;
	}
	if ((uint64_t)s->nhosts * s->nports > (64u << 20)) {
		sim_set_err(s, "osf: topology too large for per-ingress link state");
		return -E2BIG;
	}
	struct sim_osf *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	s->mod[SIM_MOD_osf] = o;
	o->credit = c->osf_mode == SIM_OSF_CREDIT;
	o->cell = c->osf_cell_bytes;
	o->cell_hdr = c->osf_cell_header_bytes;
	o->bl = calloc(s->nhosts, sizeof(*o->bl));
	o->hev = calloc(s->nhosts, sizeof(*o->hev));
	if (!o->bl || !o->hev)
		return -ENOMEM;
	for (uint32_t h = 0; h < s->nhosts; h++) {
		sim_ev_init(&o->hev[h].ev, sim_osf_hev_fire);
		o->hev[h].host = h;
	}
	o->st.fail_ps = SIM_TIME_NEVER;
	o->interval_ps = sim_time_from_us_f(c->osf_linkq_interval_us);
	o->reserved = calloc(s->nports, sizeof(*o->reserved));
	o->det_down = calloc(s->nports, 1);
	o->hv = calloc(s->nhosts, sizeof(*o->hv));
	o->snap_base = calloc(s->nsw, sizeof(*o->snap_base));
	o->seq = calloc(s->nsw, sizeof(*o->seq));
	o->learnt = malloc(sizeof(*o->learnt) * s->nhosts);
	if (!o->learnt)
		return -ENOMEM;
	for (uint32_t h = 0; h < s->nhosts; h++)
		o->learnt[h] = SIM_TIME_NEVER;
	if (!o->reserved || !o->det_down || !o->hv || !o->snap_base || !o->seq)
		return -ENOMEM;
	uint32_t rows = 0;
	for (uint32_t j = 0; j < s->nsw; j++) {
		o->snap_base[j] = rows;
		rows += s->sws[j].n.nports;
	}
	o->snaps = calloc((size_t)rows * OSF_RING, sizeof(*o->snaps));
	if (!o->snaps || view_alloc(&o->tm, s->nports, s->nsw))
		return -ENOMEM;
	for (uint32_t h = 0; h < s->nhosts; h++)
		if (view_alloc(&o->hv[h], s->nports, s->nsw))
			return -ENOMEM;
	/* Topology discovery is taken as done at start: every view begins with the real rates. */
	for (uint32_t i = 0; i < s->nports; i++) {
		uint32_t r = (uint32_t)(s->ports[i]->rate_bps / 1000000);
		o->tm.rate_mbps[i] = r;
		for (uint32_t h = 0; h < s->nhosts; h++)
			o->hv[h].rate_mbps[i] = r;
	}
	s->route = &sim_route_osf;
	sim_ev_init(&o->tick_ev, sim_osf_tick_fire);
	sim_ev_init(&o->push_ev, sim_osf_push_fire);
	if (s->nflows)
		sim_schedule(s, &o->tick_ev, o->interval_ps);
	return 0;
}

static void osf_destroy(struct sim *s)
{
	struct sim_osf *o = osf_of(s);
	if (!o)
		return;
	for (uint32_t i = 0; i < o->nfl; i++)
		if (o->fl[i]) {
			free(o->fl[i]->paths);
			free(o->fl[i]->wrr);
			free(o->fl[i]->have);
			free(o->fl[i]->os_psn);
			free(o->fl[i]->os_end);
			free(o->fl[i]->c_start);
			free(o->fl[i]->c_len);
			free(o->fl[i]->c_path);
			free(o->fl[i]->chave);
			free(o->fl[i]);
		}
	free(o->fl);
	free(o->bl);
	free(o->hev);
	free(o->grants);
	free(o->reserved);
	free(o->det_down);
	for (uint32_t h = 0; o->hv && h < s->nhosts; h++)
		view_free(&o->hv[h]);
	free(o->hv);
	view_free(&o->tm);
	free(o->snaps);
	free(o->snap_base);
	free(o->seq);
	free(o->learnt);
	while (o->dets) {
		struct osf_det *d = o->dets;
		o->dets = d->next;
		free(d);
	}
	free(o);
	s->mod[SIM_MOD_osf] = NULL;
}

int sim_osf_get_stats(const struct sim *s, struct sim_osf_stats *st)
{
	if (!osf_of(s))
		return -ENOENT;
	*st = osf_of(s)->st;
	st->max_queue_bytes = 0;
	st->reserved_now_bytes = 0;
	for (uint32_t i = 0; i < s->nports; i++)
		st->reserved_now_bytes += osf_of(s)->reserved[i];
	for (uint32_t i = 0; i < osf_of(s)->ngrants; i++) /* minus what live grants hold */
		if (osf_of(s)->grants[i].refs)
			for (unsigned j = 0; j < OSF_MAXHOPS; j++)
				st->reserved_now_bytes -= osf_of(s)->grants[i].held[j];
	for (uint32_t i = 0; i < s->nports; i++)
		if (s->ports[i]->node->kind == SIM_NODE_SWITCH && s->ports[i]->q_max_bytes > st->max_queue_bytes)
			st->max_queue_bytes = s->ports[i]->q_max_bytes;
	return 0;
}

static int osf_write_outputs(struct sim *s, const char *dir)
{
	struct sim_osf_stats st;
	char path[SIM_PATH_MAX + 32];
	if (sim_osf_get_stats(s, &st))
		return 0;
	snprintf(path, sizeof(path), "%s/osf.json", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	double fail_us = st.fail_ps == SIM_TIME_NEVER ? -1 : sim_time_to_us(st.fail_ps);
	fprintf(f, "{\n  \"credit_reqs\": %llu,\n  \"credit_acks\": %llu,\n  \"credit_rejs\": %llu,\n"
		"  \"credit_lost\": %llu,\n  \"granted_pkts\": %llu,\n  \"linkq_sent\": %llu,\n"
		"  \"linkq_recv\": %llu,\n  \"tm_pushes\": %llu,\n  \"reorder_pkts\": %llu,\n"
		"  \"reorder_max_pkts\": %llu,\n  \"dup_pkts\": %llu,\n  \"egress_nacks\": %llu,\n"
		"  \"inorder_violations\": %llu,\n  \"cells_sent\": %llu,\n  \"orig_pkts_delivered\": %llu,\n"
		"  \"max_reserved_bytes\": %llu,\n  \"max_queue_bytes\": %llu,\n  \"window_bytes\": %llu,\n"
		"  \"stale_sends\": %llu,\n  \"late_stale_sends\": %llu,\n  \"fail_us\": %.6f,\n  \"notify_max_us\": %.6f,\n"
		"  \"last_stale_us\": %.6f,\n  \"cell_bytes\": %u,\n  \"cell_header_bytes\": %u,\n"
		"  \"orig_pkts_sent\": %llu,\n  \"frag_pkts\": %llu,\n  \"agg_cells\": %llu,\n"
		"  \"cell_payload_bytes\": %llu,\n  \"cell_wire_bytes\": %llu,\n  \"cell_skips\": %llu,\n"
		"  \"orig_discarded\": %llu\n}\n",
		(unsigned long long)st.credit_reqs, (unsigned long long)st.credit_acks,
		(unsigned long long)st.credit_rejs, (unsigned long long)st.credit_lost,
		(unsigned long long)st.granted_pkts, (unsigned long long)st.linkq_sent,
		(unsigned long long)st.linkq_recv, (unsigned long long)st.tm_pushes,
		(unsigned long long)st.reorder_pkts, (unsigned long long)st.reorder_max_pkts,
		(unsigned long long)st.dup_pkts, (unsigned long long)st.egress_nacks,
		(unsigned long long)st.inorder_violations, (unsigned long long)st.cells_sent,
		(unsigned long long)st.orig_pkts_delivered, (unsigned long long)st.max_reserved_bytes,
		(unsigned long long)st.max_queue_bytes, (unsigned long long)s->cfg.osf_window_bytes,
		(unsigned long long)st.stale_sends, (unsigned long long)st.late_stale_sends, fail_us,
		st.notify_max_ps ? sim_time_to_us(st.notify_max_ps) : -1,
		st.last_stale_ps ? sim_time_to_us(st.last_stale_ps) : -1, s->cfg.osf_cell_bytes,
		s->cfg.osf_cell_header_bytes, (unsigned long long)st.orig_pkts_sent,
		(unsigned long long)st.frag_pkts, (unsigned long long)st.agg_cells,
		(unsigned long long)st.cell_payload_bytes, (unsigned long long)st.cell_wire_bytes,
		(unsigned long long)st.cell_skips, (unsigned long long)st.orig_discarded);
	fclose(f);
	return 0;
}

static const char *const osf_mode_names[] = { "off", "spray", "credit", NULL };
static const char *const osf_tm_names[] = { "centralised", "distributed", "hybrid", NULL };
static const struct sim_param osf_params[] = {
	{ "osf", "mode", SIM_P_ENUM, SIM_PARAM_FIELD(osf_mode), "off", osf_mode_names, "off | spray (OSF spraying + egress reorder, no credits) | credit (draft-hcl OSF with credit-based flow control)" },
	{ "osf", "tm", SIM_P_ENUM, SIM_PARAM_FIELD(osf_tm), "centralised", osf_tm_names, "topology manager: centralised | distributed | hybrid (topology flooded, quality central)" },
	{ "osf", "tm_host", SIM_P_U32, SIM_PARAM_FIELD(osf_tm_host), "0", NULL, "host running the central topology manager" },
	{ "osf", "linkq_interval_us", SIM_P_DBL, SIM_PARAM_FIELD(osf_linkq_interval_us), "10", NULL, "switches report link quality this often" },
	{ "osf", "detect_us", SIM_P_DBL, SIM_PARAM_FIELD(osf_detect_us), "1", NULL, "a switch detects a failure of its link after this" },
	{ "osf", "tm_compute_us", SIM_P_DBL, SIM_PARAM_FIELD(osf_tm_compute_us), "2", NULL, "central TM: from an urgent report to pushing the new state" },
	{ "osf", "reorder_timeout_us", SIM_P_DBL, SIM_PARAM_FIELD(osf_reorder_timeout_us), "50", NULL, "OSF-Egress: a hole older than this is NACKed to the sender" },
	{ "osf", "retry_us", SIM_P_DBL, SIM_PARAM_FIELD(osf_retry_us), "2", NULL, "credit request retry after a rejection" },
	{ "osf", "rej_hold_us", SIM_P_DBL, SIM_PARAM_FIELD(osf_rej_hold_us), "20", NULL, "a rejecting link counts as congested at the ingress this long" },
	{ "osf", "loss_max", SIM_P_DBL, SIM_PARAM_FIELD(osf_loss_max), "0.001", NULL, "links with a higher reported loss rate are avoided" },
	{ "osf", "window_bytes", SIM_P_U64, SIM_PARAM_FIELD(osf_window_bytes), "262144", NULL, "credit window: bytes that may be reserved per switch egress port" },
	{ "osf", "congest_bytes", SIM_P_U64, SIM_PARAM_FIELD(osf_congest_bytes), "262144", NULL, "reported queue above which a link is congested (path excluded)" },
	{ "osf", "chunk_pkts", SIM_P_U32, SIM_PARAM_FIELD(osf_chunk_pkts), "4", NULL, "packets (cells) per credit request" },
	{ "osf", "outstanding", SIM_P_U32, SIM_PARAM_FIELD(osf_outstanding), "12", NULL, "credit requests per flow in flight or granted and unused (x chunk_pkts: the flow's credit window)" },
	{ "osf", "report_bytes", SIM_P_U32, SIM_PARAM_FIELD(osf_report_bytes), "128", NULL, "size of a link-quality report on the wire" },
	{ "osf", "cell_bytes", SIM_P_U32, SIM_PARAM_FIELD(osf_cell_bytes), "0", NULL, "cell (container) payload: 0 = one original packet per unit (no cells); 64..65535 = the ingress cuts each flow's packets into cells of this size (aggregation of small packets, fragmentation of large ones)" },
	{ "osf", "cell_header_bytes", SIM_P_U32, SIM_PARAM_FIELD(osf_cell_header_bytes), "32", NULL, "per-cell header on the wire (fabric encapsulation + cell sequence number + piece table)" },
	{ "osf", "cell_aggregate", SIM_P_BOOL, SIM_PARAM_FIELD(osf_cell_aggregate), "true", NULL, "cells: pack pieces of several packets into one cell (false: each cell carries one packet's bytes)" },
	{ "osf", "cell_pad", SIM_P_BOOL, SIM_PARAM_FIELD(osf_cell_pad), "false", NULL, "cells: a short cell is padded to cell_bytes on the wire (fixed-size cells)" },
};

static bool osf_enabled(const struct sim_config *c)
{
	return c->osf_mode != SIM_OSF_OFF;
}

const struct sim_module_ops sim_osf_ops = {
	.name = "osf",
	.params = osf_params,
	.nparams = sizeof(osf_params) / sizeof(osf_params[0]),
	.enabled = osf_enabled,
	.pkt_lo = SIM_PKT_OSF_CREDIT_REQ,
	.pkt_hi = SIM_PKT_OSF_LINKQ,
	.start = osf_start,
	.destroy = osf_destroy,
	.switch_rx = sim_osf_switch_rx,
	.host_rx_any = osf_host_rx_any,
	.host_next = sim_osf_host_next,
	.data_dequeue = osf_data_dequeue,
	.pkt_drop = osf_pkt_drop,
	.link_change = sim_osf_link_change,
	.write_outputs = osf_write_outputs,
};
