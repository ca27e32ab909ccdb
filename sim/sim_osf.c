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

#include "sim_int.h"

#define OSF_MAXHOPS 8
#define OSF_MAXPATHS 64
#define OSF_RING 32      /* report snapshots kept per switch (a slot is reused after 32 periods) */

enum { LQ_TO_TM, LQ_TO_HOST, LQ_TM_PUSH };

struct osf_path {
	struct sim_port *ports[OSF_MAXHOPS]; /* [0] the source NIC, then switch egress ports */
	uint8_t nhops;
};

struct osf_grant {
	struct sim_port *ports[OSF_MAXHOPS];
	uint64_t held[OSF_MAXHOPS];  /* credit this grant holds on each hop now */
	uint32_t flow, refs, next_free, npk, left; /* npk granted; left not yet sent */
	uint16_t path;
	uint8_t nhops;
};

struct osf_flow {
	struct osf_path *paths;
	int64_t *wrr;
	uint16_t npaths, last_path;
	bool paths_done;
	/* ingress */
	uint32_t reqs_out, pending;  /* requests in flight; packets requested or granted, unsent */
	uint32_t gq[64], gq_head, gq_n; /* granted grants in order */
	sim_time_ps retry_ps;
	uint32_t rej_streak;     /* rejections in a row: the retry backs off exponentially */
	/* egress */
	uint8_t *have;
	uint32_t buffered;
	uint32_t hole_psn;
	struct sim_event hole_ev;
	uint32_t idx;
	uint64_t delivered_bytes;
	/* Cells. The ingress appends each original packet it takes from the transport to the
	 * flow's byte stream (os_psn/os_end: PSN and stream end offset of original j) and cuts
	 * the stream into cells (c_start/c_len by cell sequence number). The tables stand for
	 * what a cell header carries (its sequence number and piece table): the egress reads
	 * only the entries of cells it has received. */
	uint32_t *os_psn;
	uint64_t *os_end;
	uint32_t nos, cap_os;
	uint64_t stream_bytes, cut_bytes;
	uint64_t *c_start;
	uint32_t *c_len;
	uint8_t *c_path;         /* path each cell was sprayed on (the cell's source route) */
	uint32_t ncells, cap_c;
	uint32_t cut_os;         /* first original not yet wholly cut */
	uint32_t frag_os;        /* last original counted as fragmented, + 1 */
	struct osf_flow *bl_next; /* host backlog: stream bytes not yet cut, flow maybe inactive */
	bool in_bl;
	/* egress, cells: reorder by cell number, then reassembled packets go through the PSN
	 * reorder buffer above (which only sees out-of-order packets after a lost cell) */
	uint8_t *chave;          /* buffered cells, bit per sequence number */
	uint32_t chave_bits, cnext, eo, cbuffered;
	uint32_t cmax;           /* highest cell number received + 1 */
	uint32_t chole;          /* cmax when the hole check was armed */
	uint32_t clo;            /* cnext then */
	uint32_t pmax[OSF_MAXPATHS]; /* per path: highest cell number received on it + 1 */
	sim_time_ps plast[OSF_MAXPATHS]; /* per path: last cell arrival */
	sim_time_ps chole_iv;    /* hole check period: the timeout, or its grace after a failure */
	struct sim_event chole_ev;
	uint64_t eoff;           /* stream offset reassembled up to */
	bool ebad;               /* original eo misses bytes (a cell was lost) */
};

struct osf_view {                /* what one ingress (or the TM) knows, by global port id */
	uint8_t *down;
	uint32_t *q, *rate_mbps, *loss_ppm;
	sim_time_ps *rej_until;
	uint32_t *seq;           /* last report seq applied per switch */
};

struct osf_snap { uint32_t q, rate_mbps, loss_ppm; uint8_t down; };

struct osf_det {                 /* pending detection of a link change at one switch port */
	struct sim_event ev;
	struct sim_port *port;
	bool down;
	struct osf_det *next;
};

struct osf_hev {
	struct sim_event ev;
	uint32_t host;
};

struct sim_osf {
	bool credit;
	uint32_t cell, cell_hdr;  /* cell payload (0: no cells) and header bytes */
	struct osf_flow **bl;    /* per host: flows with stream bytes not yet cut */
	struct osf_hev *hev;     /* per host: wakes the NIC for backlog of inactive flows */
	struct osf_flow **fl;
	uint32_t nfl;
	struct osf_grant *grants;
	uint32_t ngrants, gcap, gfree;
	uint64_t *reserved;      /* per port id */
	uint8_t *det_down;       /* per port id: the switch has detected its link down */
	struct osf_view *hv;     /* per host */
	struct osf_view tm;
	struct osf_snap *snaps;  /* per switch port (ports in id order) x OSF_RING */
	uint32_t *snap_base;     /* per switch: index of its first port's slot row */
	uint32_t *seq;           /* per switch: next report seq */
	struct sim_event tick_ev, push_ev;
	struct osf_det *dets;
	sim_time_ps *learnt;     /* per host: when its ingress first learnt of a failed link */
	sim_time_ps interval_ps;
	struct sim_osf_stats st;
};

static inline struct sim_osf *osf_of(const struct sim *s)
{
	return s->mod[SIM_MOD_osf];
}

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

static void hole_fire(struct sim *s, struct sim_event *ev);
static void chole_fire(struct sim *s, struct sim_event *ev);
static void egress_rx(struct sim *s, struct sim_flow *f, struct sim_pkt *p);

static struct osf_flow *oflow_get(struct sim *s, uint32_t idx)
{
	struct osf_flow *of = oflow(s, idx);
	if (of || idx >= osf_of(s)->nfl)
		return of;
	of = calloc(1, sizeof(*of));
	if (!of)
		return NULL;
	of->idx = idx;
	sim_ev_init(&of->hole_ev, hole_fire);
	sim_ev_init(&of->chole_ev, chole_fire);
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

static int flow_paths(struct sim *s, struct sim_flow *f, struct osf_flow *of)
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
static uint16_t pick_path(struct sim *s, struct sim_host *h, struct osf_flow *of)
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

static bool path_truly_down(const struct sim_port *const *ports, unsigned n)
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
static uint32_t grant_new(struct sim_osf *o)
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

static void grant_unref(struct sim_osf *o, uint32_t gi)
{
	struct osf_grant *g = &o->grants[gi - 1];
	if (--g->refs == 0) {
		g->next_free = o->gfree;
		o->gfree = gi;
	}
}

/* The credit unit: a full cell, or a full original packet without cells. */
static inline uint32_t full_pkt(const struct sim *s)
{
	if (s->cfg.osf_cell_bytes)
		return s->cfg.osf_cell_bytes + s->cfg.osf_cell_header_bytes;
	return s->cfg.mtu_bytes + s->cfg.header_bytes;
}

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

static void release_hops(struct sim_osf *o, struct osf_grant *g, unsigned from, unsigned to, uint64_t bytes)
{
	for (unsigned j = from; j < to && j < g->nhops; j++)
		if (j >= 1)
			grant_release(o, g, j, bytes);
}

/* ---- sending control packets ------------------------------------------------------------- */
static void host_send_ctl(struct sim *s, struct sim_host *h, struct sim_pkt *p)
{
	sim_pktq_push(&h->port.cq, p);
	sim_port_kick(s, &h->port);
}

static void port_send_ctl(struct sim *s, struct sim_port *port, struct sim_pkt *p)
{
	if (port->node->kind == SIM_NODE_HOST) {
		host_send_ctl(s, sim_node_host(port->node), p);
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
		release_hops(o, g, 1, p->osf_hop, bytes);
	else if (p->type == SIM_PKT_OSF_CREDIT_ACK)
		release_hops(o, g, 1, g->nhops, bytes);
	else
		release_hops(o, g, 1, p->osf_hop + 1u, bytes);
	o->st.credit_lost++;
	struct osf_flow *of = oflow(s, g->flow);
	if (of) {
		of->reqs_out--;
		of->pending -= g->npk < of->pending ? g->npk : of->pending;
		of->retry_ps = s->now + sim_time_from_us_f(s->cfg.osf_retry_us);
	}
	grant_unref(o, p->osf_grant);
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

static void osf_switch_rx(struct sim *s, struct sim_switch *sw, struct sim_pkt *p)
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
			release_hops(o, g, reserved_here ? j : j + 1, g->nhops, p->size_bytes);
			break;
		}
	grant_unref(o, p->osf_grant);
	p->osf_grant = 0;
}

/* ---- OSF-Ingress ------------------------------------------------------------------------- */
static uint32_t flow_demand_pkts(const struct sim_flow *f)
{
	uint32_t d = f->snd_nxt < f->npkts ? f->npkts - f->snd_nxt : 0;
	if (f->retx_mode && f->snd_high > f->retx_ptr)
		d += f->snd_high - f->retx_ptr;
	return d;
}

/* Demand in credit units: packets, or with cells the cells the uncut stream bytes and the
 * transport's unsent packets (taken as full) will make. */
static uint32_t flow_demand(const struct sim *s, const struct sim_flow *f, const struct osf_flow *of)
{
	uint32_t d = flow_demand_pkts(f);
	if (!s->cfg.osf_cell_bytes)
		return d;
	uint64_t bytes = (uint64_t)d * (s->cfg.mtu_bytes + s->cfg.header_bytes);
	if (of)
		bytes += of->stream_bytes - of->cut_bytes;
	uint64_t c = (bytes + s->cfg.osf_cell_bytes - 1) / s->cfg.osf_cell_bytes;
	return c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
}

static struct sim_pkt *make_req(struct sim *s, struct sim_host *h, struct sim_flow *f,
				struct osf_flow *of, uint32_t npk)
{
	struct sim_osf *o = osf_of(s);
	uint32_t gi = grant_new(o);
	if (!gi)
		return NULL;
	struct sim_pkt *p = sim_pkt_alloc(s);
	if (!p) {
		struct osf_grant *g = &o->grants[gi - 1];
		g->refs = 1;
		grant_unref(o, gi);
		return NULL;
	}
	uint16_t x = pick_path(s, h, of);
	struct osf_grant *g = &o->grants[gi - 1];
	memcpy(g->ports, of->paths[x].ports, sizeof(g->ports));
	g->nhops = of->paths[x].nhops;
	g->path = x;
	g->flow = f->idx;
	g->npk = npk;
	g->left = 0;
	g->refs = 1;
	memset(g->held, 0, sizeof(g->held));
	of->reqs_out++;
	of->pending += npk;
	p->type = SIM_PKT_OSF_CREDIT_REQ;
	p->flow = f->idx;
	p->src = f->src;
	p->dst = f->dst;
	p->psn = npk;
	p->osf_grant = gi;
	p->osf_hop = 1;
	p->spray_ctr = x;
	p->size_bytes = s->cfg.ack_bytes;
	o->st.credit_reqs++;
	return p;
}

/* Close a flow's unused grants (its demand fell, e.g. ACKs overtook a rewind): the unused
 * credit is returned at once (a release message would take one path latency). */
static void close_unused(struct sim *s, struct sim_flow *f, struct osf_flow *of)
{
	struct sim_osf *o = osf_of(s);
	while (of->gq_n) {
		uint32_t gi = of->gq[of->gq_head];
		struct osf_grant *g = &o->grants[gi - 1];
		release_hops(o, g, 1, g->nhops, (uint64_t)g->left * full_pkt(s));
		of->pending -= g->left < of->pending ? g->left : of->pending;
		g->left = 0;
		of->gq_head = (of->gq_head + 1) % 64;
		of->gq_n--;
		grant_unref(o, gi);
	}
	(void)f;
}

static void stamp(struct sim *s, struct sim_host *h, struct sim_flow *f, struct osf_flow *of,
		  struct sim_pkt *p)
{
	struct sim_osf *o = osf_of(s);
	const struct sim_port *const *ports;
	unsigned n;
	p->osf_grant = 0;
	p->osf_hop = 0;
	if (o->credit && of->gq_n) {
		uint32_t gi = of->gq[of->gq_head];
		struct osf_grant *g = &o->grants[gi - 1];
		p->osf_grant = gi;
		p->spray_ctr = g->path;
		g->refs++;
		g->left--;
		of->pending--;
		if (p->size_bytes < full_pkt(s)) /* short last packet: return the difference */
			release_hops(o, g, 1, g->nhops, full_pkt(s) - p->size_bytes);
		ports = (const struct sim_port *const *)g->ports;
		n = g->nhops;
		if (!g->left) {
			of->gq_head = (of->gq_head + 1) % 64;
			of->gq_n--;
			grant_unref(o, gi);
		}
	} else {
		uint16_t x = pick_path(s, h, of);
		p->spray_ctr = x;
		ports = (const struct sim_port *const *)of->paths[x].ports;
		n = of->paths[x].nhops;
	}
	o->st.cells_sent++;
	if (path_truly_down(ports, n)) {
		o->st.stale_sends++;
		o->st.last_stale_ps = s->now;
		if (s->now > o->learnt[h->n.id])
			o->st.late_stale_sends++;
	}
}

/* ---- OSF-Ingress cells (aggregation / fragmentation) ------------------------------------ */
static int grow(void **v, uint32_t *cap, uint32_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint32_t n = *cap ? *cap * 2 : 256;
	while (n < need)
		n *= 2;
	void *w = realloc(*v, elem * n);
	if (!w)
		return -ENOMEM;
	*v = w;
	*cap = n;
	return 0;
}

static inline uint64_t os_start(const struct osf_flow *of, uint32_t j)
{
	return j ? of->os_end[j - 1] : 0;
}

static void bl_add(struct sim_osf *o, struct sim_host *h, struct osf_flow *of)
{
	if (of->in_bl)
		return;
	of->in_bl = true;
	of->bl_next = o->bl[h->n.id];
	o->bl[h->n.id] = of;
}

/* Take one original packet from the transport into the flow's stream. */
static bool stream_pull(struct sim *s, struct sim_host *h, struct sim_flow *f, struct osf_flow *of,
			struct sim_pkt **tmpl)
{
	struct sim_flow *next = f->next_active;
	if (grow((void **)&of->os_psn, &(uint32_t){ of->cap_os }, of->nos + 1, sizeof(*of->os_psn)) ||
	    grow((void **)&of->os_end, &of->cap_os, of->nos + 1, sizeof(*of->os_end)))
		return false;
	struct sim_pkt *p = sim_host_emit(s, h, f);
	if (h->active && h->active == f)
		h->active = f->in_active ? f->next_active : next;
	if (!p)
		return false;
	of->stream_bytes += p->size_bytes;
	of->os_psn[of->nos] = p->psn;
	of->os_end[of->nos] = of->stream_bytes;
	of->nos++;
	osf_of(s)->st.orig_pkts_sent++;
	if (*tmpl)
		sim_pkt_free(s, *tmpl);
	*tmpl = p;
	return true;
}

/* With credits, a packet is taken from the transport only when the granted, unused cells
 * hold it and what the stream holds already: else a fragmented packet would wait in the
 * ingress for more grants while the transport's retransmission timer runs. */
static bool credit_covers(const struct sim *s, const struct osf_flow *of)
{
	const struct sim_osf *o = osf_of(s);
	if (!o->credit)
		return true;
	uint64_t cells = 0;
	for (uint32_t k = 0; k < of->gq_n; k++)
		cells += o->grants[of->gq[(of->gq_head + k) % 64] - 1].left;
	return of->stream_bytes - of->cut_bytes + s->cfg.mtu_bytes + s->cfg.header_bytes <= cells * o->cell;
}

/* OSF-Ingress (4.2): fill a cell from the flow's stream (aggregation: several small packets
 * in one cell; fragmentation: a large packet's rest waits for the next cell). A partly filled
 * cell goes out when the transport has nothing more to give now (no waiting for more data);
 * it waits only for the flow's pacing. Returns NULL when the flow sends nothing now. */
static struct sim_pkt *cell_build(struct sim *s, struct sim_host *h, struct sim_flow *f,
				  struct osf_flow *of, sim_time_ps *wake)
{
	struct sim_osf *o = osf_of(s);
	uint32_t C = o->cell;
	struct sim_pkt *p = NULL;
	if (of->stream_bytes - of->cut_bytes < C && f->in_active) {
		if (f->next_tx_ps > s->now) {
			if (f->next_tx_ps < *wake)
				*wake = f->next_tx_ps;
			return NULL;
		}
		/* Without aggregation a packet is taken only once the last one is wholly cut. */
		while (of->stream_bytes - of->cut_bytes < C && f->in_active &&
		       (s->cfg.osf_cell_aggregate || of->stream_bytes == of->cut_bytes) &&
		       credit_covers(s, of) && stream_pull(s, h, f, of, &p))
			;
	}
	uint64_t pend = of->stream_bytes - of->cut_bytes;
	if (!pend) {
		if (p)
			sim_pkt_free(s, p);
		return NULL;
	}
	if (grow((void **)&of->c_start, &(uint32_t){ of->cap_c }, of->ncells + 1, sizeof(*of->c_start)) ||
	    grow((void **)&of->c_path, &(uint32_t){ of->cap_c }, of->ncells + 1, sizeof(*of->c_path)) ||
	    grow((void **)&of->c_len, &of->cap_c, of->ncells + 1, sizeof(*of->c_len))) {
		if (p)
			sim_pkt_free(s, p);
		return NULL;
	}
	if (!p) { /* only the rest of a fragmented packet */
		if (!(p = sim_pkt_alloc(s)))
			return NULL;
		p->type = SIM_PKT_DATA;
		p->flags = SIM_PKT_ECT;
		p->flow = f->idx;
		p->src = f->src;
		p->dst = f->dst;
		p->entropy = f->entropy;
	}
	uint32_t len = pend < C ? (uint32_t)pend : C;
	uint64_t a = of->cut_bytes, b = a + len;
	uint32_t k = of->ncells++;
	of->c_start[k] = a;
	of->c_len[k] = len;
	of->cut_bytes = b;
	/* Statistics of the cut: pieces in this cell, packets it fragments. */
	while (of->cut_os < of->nos && of->os_end[of->cut_os] <= a)
		of->cut_os++;
	uint32_t pieces = 0;
	for (uint32_t j = of->cut_os; j < of->nos && os_start(of, j) < b; j++) {
		pieces++;
		if (os_start(of, j) < a && of->frag_os != j + 1) {
			o->st.frag_pkts++;
			of->frag_os = j + 1;
		}
	}
	if (pieces > 1)
		o->st.agg_cells++;
	o->st.cell_payload_bytes += len;
	p->psn = k;
	p->size_bytes = (s->cfg.osf_cell_pad ? C : len) + o->cell_hdr;
	o->st.cell_wire_bytes += p->size_bytes;
	if (of->stream_bytes > of->cut_bytes)
		bl_add(o, h, of);
	return p;
}

static void hev_fire(struct sim *s, struct sim_event *ev)
{
	struct osf_hev *e = SIM_CONTAINER_OF(ev, struct osf_hev, ev);
	sim_port_kick(s, &s->hosts[e->host].port);
}

/* The NIC asks for its next packet again only while the transport has active flows; the
 * rest of a fragmented packet of a flow the transport has finished with needs a wake-up at
 * the end of the cell being sent. */
static struct sim_pkt *bl_wake(struct sim *s, struct sim_host *h, struct sim_pkt *p)
{
	struct sim_osf *o = osf_of(s);
	if (!p || h->nactive || h->port.cq.n || !o->bl[h->n.id])
		return p;
	struct osf_hev *e = &o->hev[h->n.id];
	sim_time_ps t = s->now + sim_time_serialize(p->size_bytes, h->port.rate_bps);
	if (!sim_ev_pending(&e->ev))
		sim_schedule(s, &e->ev, t);
	return p;
}

static struct sim_pkt *try_req(struct sim *s, struct sim_host *h, struct sim_flow *f,
			       struct osf_flow *of, sim_time_ps *wake)
{
	const struct sim_config *c = &s->cfg;
	uint32_t d = flow_demand(s, f, of), cap = c->osf_outstanding * c->osf_chunk_pkts;
	if (d > cap)
		d = cap;
	if (of->pending >= d || of->reqs_out >= c->osf_outstanding)
		return NULL;
	if (s->now < of->retry_ps) {
		if (of->retry_ps < *wake)
			*wake = of->retry_ps;
		return NULL;
	}
	uint32_t npk = d - of->pending;
	if (npk > c->osf_chunk_pkts)
		npk = c->osf_chunk_pkts;
	return make_req(s, h, f, of, npk);
}

static struct osf_flow *flow_ready(struct sim *s, struct sim_flow *f)
{
	struct osf_flow *of = oflow_get(s, f->idx);
	if (!of)
		return NULL;
	if (!of->paths_done && flow_paths(s, f, of))
		return NULL;
	return of->npaths ? of : NULL;
}

static struct sim_pkt *osf_host_next(struct sim *s, struct sim_host *h, sim_time_ps *wake)
{
	struct sim_osf *o = osf_of(s);
	uint32_t n = h->nactive;
	struct sim_flow *f = h->active;
	if (!sim_ev_pending(&o->tick_ev)) /* flows added after sim_create: reports start now */
		sim_schedule(s, &o->tick_ev, s->now + o->interval_ps);
	/* Cells: flows whose stream still holds uncut bytes are served first (the rest of a
	 * fragmented packet); those still active are served below with the others. */
	if (o->cell) {
		for (struct osf_flow **pp = &o->bl[h->n.id]; *pp;) {
			struct osf_flow *of = *pp;
			if (of->stream_bytes == of->cut_bytes) {
				*pp = of->bl_next;
				of->in_bl = false;
				continue;
			}
			pp = &of->bl_next;
			struct sim_flow *bf = &s->flows[of->idx];
			if (bf->in_active)
				continue;
			struct sim_pkt *p = NULL;
			if (o->credit)
				p = try_req(s, h, bf, of, wake);
			if (!p && (!o->credit || of->gq_n) && (p = cell_build(s, h, bf, of, wake))) {
				stamp(s, h, bf, of, p);
				of->c_path[p->psn] = (uint8_t)p->spray_ctr;
			}
			if (p)
				return bl_wake(s, h, p);
		}
	}
	if (o->credit) { /* credit requests first: they are small and start the pipeline */
		for (uint32_t i = 0; i < n; i++, f = f->next_active) {
			struct osf_flow *of = flow_ready(s, f);
			struct sim_pkt *p = of ? try_req(s, h, f, of, wake) : NULL;
			if (p)
				return p;
		}
		f = h->active;
	}
	for (uint32_t i = 0; i < n; i++, f = f->next_active) {
		struct osf_flow *of = flow_ready(s, f);
		if (!of)
			continue;
		if (o->credit && !of->gq_n)
			continue;
		if (o->cell) {
			struct sim_flow *next = f->next_active;
			struct sim_pkt *p = cell_build(s, h, f, of, wake);
			if (p) {
				if (h->active == f)
					h->active = f->in_active ? f->next_active : next;
				stamp(s, h, f, of, p);
				of->c_path[p->psn] = (uint8_t)p->spray_ctr;
				return bl_wake(s, h, p);
			}
			if (!h->nactive)
				break;
			continue;
		}
		if (f->next_tx_ps > s->now) {
			if (f->next_tx_ps < *wake)
				*wake = f->next_tx_ps;
			continue;
		}
		struct sim_flow *next = f->next_active;
		struct sim_pkt *p = sim_host_emit(s, h, f);
		if (h->active)
			h->active = f->in_active ? f->next_active : next;
		if (p) {
			stamp(s, h, f, of, p);
			return p;
		}
		if (!h->nactive)
			break;
	}
	return NULL;
}

/* ---- OSF-Egress -------------------------------------------------------------------------- */
static inline bool bit_get(const uint8_t *b, uint32_t i) { return b[i >> 3] & (1u << (i & 7)); }
static inline void bit_set(uint8_t *b, uint32_t i) { b[i >> 3] |= (uint8_t)(1u << (i & 7)); }

static void deliver(struct sim *s, struct sim_flow *f, struct osf_flow *of, struct sim_pkt *p)
{
	struct sim_osf *o = osf_of(s);
	if (s->cfg.transport != SIM_TRANSPORT_IDEAL && p->psn != f->rcv_nxt && !f->recv_done)
		o->st.inorder_violations++;
	uint32_t payload = p->size_bytes - s->cfg.header_bytes;
	uint64_t before = of->delivered_bytes;
	of->delivered_bytes += payload;
	/* Reassembly: an original packet (host.mtu_bytes) is complete once its cells have all
	 * arrived in order; one cell per packet in this version (docs/sim.md). */
	uint32_t orig = s->cfg.mtu_bytes;
	o->st.orig_pkts_delivered += of->delivered_bytes / orig - before / orig +
		(of->delivered_bytes >= f->size_bytes && of->delivered_bytes % orig ? 1 : 0);
	sim_host_rx_data(s, f, p);
}

static void send_nack(struct sim *s, struct sim_flow *f, uint32_t psn)
{
	struct sim_pkt *p = sim_pkt_alloc(s);
	if (!p)
		return;
	p->type = SIM_PKT_NACK;
	p->flow = f->idx;
	p->psn = psn;
	p->src = f->dst;
	p->dst = f->src;
	p->entropy = f->entropy;
	p->spray_ctr = f->ctl_seq++;
	p->sack_bits = 0;
	p->size_bytes = s->cfg.ack_bytes;
	osf_of(s)->st.egress_nacks++;
	host_send_ctl(s, &s->hosts[f->dst], p);
}

/* ---- OSF-Egress cells: reorder by cell number, reassemble, deliver originals in order ---- */
/* Hand original packet j (complete) to the transport. */
static void cell_deliver(struct sim *s, struct sim_flow *f, struct osf_flow *of, uint32_t j)
{
	struct sim_pkt t;
	memset(&t, 0, sizeof(t));
	t.type = SIM_PKT_DATA;
	t.flow = f->idx;
	t.src = f->src;
	t.dst = f->dst;
	t.entropy = f->entropy;
	t.psn = of->os_psn[j];
	t.size_bytes = (uint32_t)(of->os_end[j] - os_start(of, j));
	egress_rx(s, f, &t);
}

/* Cell k is next in order: its bytes extend the reassembled stream. A cell that does not
 * start where the stream ends follows cells given up as lost: the packets they cut are
 * dropped here (the transport recovers them). */
static void cell_consume(struct sim *s, struct sim_flow *f, struct osf_flow *of, uint32_t k)
{
	struct sim_osf *o = osf_of(s);
	uint64_t a = of->c_start[k], b = a + of->c_len[k];
	if (a != of->eoff) {
		while (of->eo < of->nos && of->os_end[of->eo] <= a) {
			o->st.orig_discarded++;
			of->eo++;
		}
		of->ebad = of->eo < of->nos && os_start(of, of->eo) < a;
	}
	of->eoff = b;
	while (of->eo < of->nos && of->os_end[of->eo] <= b) {
		if (of->ebad)
			o->st.orig_discarded++;
		else
			cell_deliver(s, f, of, of->eo);
		of->ebad = false;
		of->eo++;
	}
}

static void cell_drain(struct sim *s, struct sim_flow *f, struct osf_flow *of)
{
	while (of->cbuffered && of->cnext < of->chave_bits && bit_get(of->chave, of->cnext)) {
		of->chave[of->cnext >> 3] &= (uint8_t)~(1u << (of->cnext & 7));
		of->cbuffered--;
		cell_consume(s, f, of, of->cnext++);
	}
	if (!of->cbuffered) {
		of->chole_iv = 0;
		if (sim_ev_pending(&of->chole_ev))
			sim_cancel(s, &of->chole_ev);
	}
}

static void cell_rx(struct sim *s, struct sim_flow *f, struct sim_pkt *p)
{
	struct sim_osf *o = osf_of(s);
	struct osf_flow *of = oflow_get(s, f->idx);
	uint32_t k = p->psn;
	if (!of)
		return;
	if (k < of->ncells) {
		if (of->pmax[of->c_path[k]] < k + 1)
			of->pmax[of->c_path[k]] = k + 1;
		of->plast[of->c_path[k]] = s->now;
	}
	if (k < of->cnext || (k < of->chave_bits && bit_get(of->chave, k))) {
		o->st.dup_pkts++; /* a cell given up as lost arrived after all */
		return;
	}
	if (k > of->cnext) {
		if (k >= of->chave_bits) {
			uint32_t bits = of->chave_bits ? of->chave_bits : 1024;
			while (bits <= k)
				bits *= 2;
			uint8_t *v = realloc(of->chave, bits / 8);
			if (!v)
				return; /* counted as lost: the reorder timeout recovers */
			memset(v + of->chave_bits / 8, 0, (bits - of->chave_bits) / 8);
			of->chave = v;
			of->chave_bits = bits;
		}
		bit_set(of->chave, k);
		of->cbuffered++;
		if (k + 1 > of->cmax)
			of->cmax = k + 1;
		o->st.reorder_pkts++;
		if (of->cbuffered > o->st.reorder_max_pkts)
			o->st.reorder_max_pkts = of->cbuffered;
		if (!sim_ev_pending(&of->chole_ev)) {
			of->chole = of->cmax;
			of->clo = of->cnext;
			if (!of->chole_iv) { /* a hole opened just after a notified failure: the grace */
				sim_time_ps to = sim_time_from_us_f(s->cfg.osf_reorder_timeout_us);
				sim_time_ps lt = o->learnt[f->dst];
				of->chole_iv = lt != SIM_TIME_NEVER && s->now < lt + to ? to / 5 : to;
			}
			sim_schedule(s, &of->chole_ev, s->now + of->chole_iv);
		}
		return;
	}
	cell_consume(s, f, of, of->cnext++);
	if (of->cnext > of->cmax)
		of->cmax = of->cnext;
	cell_drain(s, f, of);
}

/* Hole check, one period after the first cell arrived out of order. A missing cell is lost
 * if a later cell sprayed on the same path has arrived (a path delivers in order), or if its
 * path delivered nothing for the whole period while others did (a dead path); the first
 * hole is lost if nothing moved for the whole period (a lost last cell of a path); after a
 * notified failure (the short grace) every cell still missing below the highest number then
 * received is lost (the dead path delivers no later cell). Lost cells are given up (cells are
 * never resent; the transport resends the packets they carried, in new cells, after the NACK
 * sent here at once rather than after a second timeout at the PSN level). */
static void chole_fire(struct sim *s, struct sim_event *ev)
{
	struct osf_flow *of = SIM_CONTAINER_OF(ev, struct osf_flow, chole_ev);
	struct sim_flow *f = &s->flows[of->idx];
	if (!of->cbuffered)
		return;
	sim_time_ps to = sim_time_from_us_f(s->cfg.osf_reorder_timeout_us);
	sim_time_ps iv = of->chole_iv ? of->chole_iv : to;
	bool grace = iv < to, stalled = of->cnext == of->clo;
	uint32_t skipped = 0;
	while (of->cnext < of->chole) {
		uint32_t k = of->cnext;
		if (k < of->chave_bits && bit_get(of->chave, k)) {
			of->chave[k >> 3] &= (uint8_t)~(1u << (k & 7));
			of->cbuffered--;
			of->cnext++;
			cell_consume(s, f, of, k);
			continue;
		}
		uint8_t x = of->c_path[k];
		if (!grace && !(stalled && k == of->clo) && of->pmax[x] <= k && s->now - of->plast[x] < iv)
			break; /* may still come */
		skipped++;
		of->cnext++;
	}
	osf_of(s)->st.cell_skips += skipped;
	cell_drain(s, f, of);
	if (skipped && !f->recv_done && s->cfg.transport != SIM_TRANSPORT_IDEAL) {
		send_nack(s, f, f->rcv_nxt);
		if (of->buffered) { /* the PSN hole timer repeats the NACK if need be */
			if (sim_ev_pending(&of->hole_ev))
				sim_cancel(s, &of->hole_ev);
			of->hole_psn = f->rcv_nxt;
			sim_schedule(s, &of->hole_ev, s->now + to);
		}
	}
	of->chole = of->cmax;
	of->clo = of->cnext;
	if (of->cbuffered && !sim_ev_pending(ev))
		sim_schedule(s, ev, s->now + iv);
}

/* A hole that outlives reorder_timeout_us is a loss (a failed link, a lossy link): ask the
 * sender to go back to it. */
static void hole_fire(struct sim *s, struct sim_event *ev)
{
	struct osf_flow *of = SIM_CONTAINER_OF(ev, struct osf_flow, hole_ev);
	struct sim_flow *f = &s->flows[of->idx];
	if (f->recv_done || !of->buffered)
		return;
	if (f->rcv_nxt == of->hole_psn)
		send_nack(s, f, f->rcv_nxt);
	of->hole_psn = f->rcv_nxt;
	sim_schedule(s, ev, s->now + sim_time_from_us_f(s->cfg.osf_reorder_timeout_us));
}

static void egress_rx(struct sim *s, struct sim_flow *f, struct sim_pkt *p)
{
	struct sim_osf *o = osf_of(s);
	struct osf_flow *of = oflow_get(s, f->idx);
	if (!of || f->recv_done || p->psn < f->rcv_nxt || s->cfg.transport == SIM_TRANSPORT_IDEAL) {
		if (of && !f->recv_done && p->psn >= f->rcv_nxt)
			deliver(s, f, of, p);
		else
			sim_host_rx_data(s, f, p); /* duplicate: the transport ACKs it again */
		return;
	}
	if (!of->have && !(of->have = calloc((f->npkts + 7) / 8, 1))) {
		deliver(s, f, of, p);
		return;
	}
	if (p->psn > f->rcv_nxt) {
		if (bit_get(of->have, p->psn)) {
			o->st.dup_pkts++;
			return;
		}
		bit_set(of->have, p->psn);
		of->buffered++;
		o->st.reorder_pkts++;
		if (of->buffered > o->st.reorder_max_pkts)
			o->st.reorder_max_pkts = of->buffered;
		if (!sim_ev_pending(&of->hole_ev)) {
			of->hole_psn = f->rcv_nxt;
			sim_schedule(s, &of->hole_ev, s->now + sim_time_from_us_f(s->cfg.osf_reorder_timeout_us));
		}
		return;
	}
	deliver(s, f, of, p);
	/* Hand over what the packet released, in order. CE marks of buffered packets are not
	 * kept (OSF runs without ECN-based CC). */
	while (of->buffered && f->rcv_nxt < f->npkts && bit_get(of->have, f->rcv_nxt) && !f->recv_done) {
		struct sim_pkt t = *p;
		uint32_t psn = f->rcv_nxt;
		uint32_t mtu = s->cfg.mtu_bytes;
		t.psn = psn;
		t.flags = 0;
		t.size_bytes = (psn + 1 < f->npkts ? mtu : (uint32_t)(f->size_bytes - (uint64_t)psn * mtu)) +
			s->cfg.header_bytes;
		of->buffered--;
		deliver(s, f, of, &t);
		if (f->rcv_nxt == psn) /* the transport did not take it (cannot happen in order) */
			break;
	}
	if (!of->buffered && sim_ev_pending(&of->hole_ev))
		sim_cancel(s, &of->hole_ev);
}

/* ---- topology manager -------------------------------------------------------------------- */
static bool view_apply_snap(struct sim *s, struct osf_view *v, uint32_t swi, uint32_t slot,
			    uint32_t seq, bool take_down)
{
	struct sim_osf *o = osf_of(s);
	bool newly_down = false;
	if (v->seq[swi] && seq < v->seq[swi])
		return false; /* an older report overtaken by a newer one */
	v->seq[swi] = seq;
	struct sim_switch *sw = &s->sws[swi];
	struct osf_snap *row = &o->snaps[((size_t)o->snap_base[swi]) * OSF_RING];
	for (uint32_t i = 0; i < sw->n.nports; i++) {
		struct osf_snap *sn = &row[(size_t)i * OSF_RING + slot];
		uint32_t id = sw->n.ports[i].id;
		v->q[id] = sn->q;
		v->rate_mbps[id] = sn->rate_mbps;
		v->loss_ppm[id] = sn->loss_ppm;
		if (take_down) { /* a link fails both ways: the far end's port is known down too */
			uint32_t pid = sw->n.ports[i].peer->id;
			newly_down = newly_down || (sn->down && !v->down[id]);
			v->down[id] = v->down[pid] = sn->down;
		}
	}
	return newly_down;
}

/* 4.4: the ingress of host h has just learnt that a link is down. Global path adjustment:
 * its flows stop using every path over it at once, including credit already granted there
 * (returned; the data is sent on other paths after new requests). */
static void ingress_learnt_down(struct sim *s, uint32_t h)
{
	struct sim_osf *o = osf_of(s);
	struct osf_view *v = &o->hv[h];
	if (o->learnt[h] == SIM_TIME_NEVER && o->st.fail_ps != SIM_TIME_NEVER) {
		o->learnt[h] = s->now;
		if (s->now > o->st.notify_max_ps)
			o->st.notify_max_ps = s->now;
	}
	for (uint32_t i = 0; i < s->nflows && i < o->nfl; i++) {
		struct osf_flow *of = o->fl[i];
		if (!of || s->flows[i].src != h || !of->gq_n)
			continue;
		bool bad = false;
		for (uint32_t k = 0; k < of->gq_n && !bad; k++) {
			struct osf_grant *g = &o->grants[of->gq[(of->gq_head + k) % 64] - 1];
			for (unsigned j = 1; j < g->nhops; j++)
				bad = bad || v->down[g->ports[j]->id];
		}
		if (bad) /* simpler than picking out the bad ones: all are asked for again */
			close_unused(s, &s->flows[i], of);
	}
	/* As an egress, the host now knows its holes are probably losses on the dead link: it
	 * NACKs them after a short grace (data on live paths still in flight) instead of the
	 * full reorder timeout. */
	sim_time_ps grace = sim_time_from_us_f(s->cfg.osf_reorder_timeout_us / 5);
	for (uint32_t i = 0; i < s->nflows && i < o->nfl; i++) {
		struct osf_flow *of = o->fl[i];
		if (of && s->flows[i].dst == h && of->cbuffered) {
			if (sim_ev_pending(&of->chole_ev))
				sim_cancel(s, &of->chole_ev);
			of->chole = of->cmax;
			of->clo = of->cnext;
			of->chole_iv = grace;
			sim_schedule(s, &of->chole_ev, s->now + grace);
		}
		if (!of || s->flows[i].dst != h || !of->buffered || s->flows[i].recv_done)
			continue;
		if (sim_ev_pending(&of->hole_ev))
			sim_cancel(s, &of->hole_ev);
		of->hole_psn = s->flows[i].rcv_nxt;
		sim_schedule(s, &of->hole_ev, s->now + grace);
	}
}

static struct sim_pkt *linkq_pkt(struct sim *s, uint32_t dst, uint32_t swi, uint32_t slot,
				 uint32_t seq, uint32_t kind, bool urgent)
{
	struct sim_pkt *p = sim_pkt_alloc(s);
	if (!p)
		return NULL;
	p->type = SIM_PKT_OSF_LINKQ;
	p->flow = swi;
	p->psn = slot;
	p->sack_psn = kind;
	p->sack_bits = ((uint64_t)seq << 1) | (urgent ? 1 : 0);
	p->src = p->dst = dst;
	p->spray_ctr = 0;
	p->osf_grant = 0;
	p->size_bytes = s->cfg.osf_report_bytes;
	osf_of(s)->st.linkq_sent++;
	return p;
}

/* Switch swi measures its ports and reports (4.1): to the TM (centralised; hybrid for
 * quality), or to every ingress (distributed; hybrid for a topology change). */
static void switch_report(struct sim *s, uint32_t swi, bool urgent)
{
	struct sim_osf *o = osf_of(s);
	struct sim_switch *sw = &s->sws[swi];
	uint32_t seq = ++o->seq[swi], slot = seq % OSF_RING;
	struct osf_snap *row = &o->snaps[((size_t)o->snap_base[swi]) * OSF_RING];
	for (uint32_t i = 0; i < sw->n.nports; i++) {
		struct sim_port *pt = &sw->n.ports[i];
		struct osf_snap *sn = &row[(size_t)i * OSF_RING + slot];
		sn->q = pt->q_bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)pt->q_bytes;
		sn->rate_mbps = (uint32_t)(pt->rate_bps / 1000000);
		sn->loss_ppm = (uint32_t)(sim_module_port_loss(s, pt) * 1e6);
		sn->down = o->det_down[pt->id];
	}
	bool direct = s->cfg.osf_tm == SIM_OSF_TM_DIST || (s->cfg.osf_tm == SIM_OSF_TM_HYBRID && urgent);
	struct sim_rgroup *g;
	if (!direct) {
		struct sim_pkt *p = linkq_pkt(s, s->cfg.osf_tm_host, swi, slot, seq, LQ_TO_TM, urgent);
		if (p && (g = sim_route_group(sw, p->dst)))
			osf_switch_rx(s, sw, p);
		else if (p)
			sim_pkt_free(s, p);
		return;
	}
	for (uint32_t hst = 0; hst < s->nhosts; hst++) {
		struct sim_pkt *p = linkq_pkt(s, hst, swi, slot, seq, LQ_TO_HOST, urgent);
		if (p)
			osf_switch_rx(s, sw, p);
	}
}

static void tm_push(struct sim *s)
{
	struct sim_osf *o = osf_of(s);
	struct sim_host *tmh = &s->hosts[s->cfg.osf_tm_host];
	o->st.tm_pushes++;
	for (uint32_t hst = 0; hst < s->nhosts; hst++) {
		if (hst == s->cfg.osf_tm_host) { /* local */
			struct osf_view *v = &o->hv[hst];
			memcpy(v->q, o->tm.q, sizeof(*v->q) * s->nports);
			memcpy(v->rate_mbps, o->tm.rate_mbps, sizeof(*v->rate_mbps) * s->nports);
			memcpy(v->loss_ppm, o->tm.loss_ppm, sizeof(*v->loss_ppm) * s->nports);
			if (s->cfg.osf_tm == SIM_OSF_TM_CENTRAL)
				memcpy(v->down, o->tm.down, s->nports);
			continue;
		}
		struct sim_pkt *p = linkq_pkt(s, hst, UINT32_MAX, 0, 0, LQ_TM_PUSH, false);
		if (p) {
			p->src = s->cfg.osf_tm_host;
			sim_pktq_push(&tmh->port.cq, p);
		}
	}
	sim_port_kick(s, &tmh->port);
}

static void push_fire(struct sim *s, struct sim_event *ev)
{
	(void)ev;
	tm_push(s);
}

static bool all_done(const struct sim *s)
{
	return s->nflows && s->flows_done == s->nflows;
}

static void tick_fire(struct sim *s, struct sim_event *ev)
{
	struct sim_osf *o = osf_of(s);
	for (uint32_t j = 0; j < s->nsw; j++)
		switch_report(s, j, false);
	/* The central TM pushes its view every period too (half a period after the reports). */
	if (s->cfg.osf_tm != SIM_OSF_TM_DIST && !sim_ev_pending(&o->push_ev))
		sim_schedule(s, &o->push_ev, s->now + o->interval_ps / 2);
	/* Housekeeping: grants a flow can no longer use. */
	for (uint32_t i = 0; i < s->nflows && i < o->nfl; i++) {
		struct osf_flow *of = o->fl[i];
		if (of && of->gq_n && (s->flows[i].send_done || !flow_demand(s, &s->flows[i], of)))
			close_unused(s, &s->flows[i], of);
	}
	if (!all_done(s))
		sim_schedule(s, ev, s->now + o->interval_ps);
}

static void det_fire(struct sim *s, struct sim_event *ev)
{
	struct osf_det *d = SIM_CONTAINER_OF(ev, struct osf_det, ev);
	struct sim_osf *o = osf_of(s);
	o->det_down[d->port->id] = d->down;
	switch_report(s, d->port->node->id - s->nhosts, true);
}

static bool osf_link_change(struct sim *s, struct sim_port *port, bool down)
{
	struct sim_osf *o = osf_of(s);
	if (down && o->st.fail_ps == SIM_TIME_NEVER)
		o->st.fail_ps = s->now;
	struct sim_port *ends[2] = { port, port->peer };
	for (int i = 0; i < 2; i++) {
		if (ends[i]->node->kind != SIM_NODE_SWITCH)
			continue;
		struct osf_det *d = calloc(1, sizeof(*d));
		if (!d)
			continue;
		sim_ev_init(&d->ev, det_fire);
		d->port = ends[i];
		d->down = down;
		d->next = o->dets;
		o->dets = d;
		sim_schedule(s, &d->ev, s->now + sim_time_from_us_f(s->cfg.osf_detect_us));
	}
	return true; /* the ingresses fail over once the topology manager tells them */
}

static void linkq_rx(struct sim *s, struct sim_host *h, struct sim_pkt *p)
{
	struct sim_osf *o = osf_of(s);
	uint32_t kind = p->sack_psn, seq = (uint32_t)(p->sack_bits >> 1);
	bool urgent = p->sack_bits & 1;
	o->st.linkq_recv++;
	if (kind == LQ_TO_TM) {
		view_apply_snap(s, &o->tm, p->flow, p->psn, seq, true);
		if (urgent && !sim_ev_pending(&o->push_ev)) /* 4.4: adjust paths globally, now */
			sim_schedule(s, &o->push_ev, s->now + sim_time_from_us_f(s->cfg.osf_tm_compute_us));
		(void)h;
		return;
	}
	struct osf_view *v = &o->hv[h->n.id];
	if (kind == LQ_TO_HOST) {
		if (view_apply_snap(s, v, p->flow, p->psn, seq, true))
			ingress_learnt_down(s, h->n.id);
		return;
	}
	memcpy(v->q, o->tm.q, sizeof(*v->q) * s->nports);
	memcpy(v->rate_mbps, o->tm.rate_mbps, sizeof(*v->rate_mbps) * s->nports);
	memcpy(v->loss_ppm, o->tm.loss_ppm, sizeof(*v->loss_ppm) * s->nports);
	if (s->cfg.osf_tm == SIM_OSF_TM_CENTRAL) {
		bool newly_down = false;
		for (uint32_t i = 0; i < s->nports && !newly_down; i++)
			newly_down = o->tm.down[i] && !v->down[i];
		memcpy(v->down, o->tm.down, s->nports);
		if (newly_down)
			ingress_learnt_down(s, h->n.id);
	}
}

static bool osf_host_rx_any(struct sim *s, struct sim_host *h, struct sim_pkt *p)
{
	struct sim_osf *o = osf_of(s);
	switch (p->type) {
	case SIM_PKT_OSF_LINKQ:
		linkq_rx(s, h, p);
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
				release_hops(o, g, 1, g->nhops, (uint64_t)g->npk * full_pkt(s));
			}
			of->pending -= g->npk < of->pending ? g->npk : of->pending;
			/* A fixed retry: exponential backoff was tried and lost throughput (a rejection
			 * at a busy first hop is usually over within one retry). */
			of->rej_streak++;
			of->retry_ps = s->now + sim_time_from_us_f(s->cfg.osf_retry_us);
			grant_unref(o, gi);
		}
		(void)f;
		sim_pkt_free(s, p);
		sim_port_kick(s, &h->port);
		return true;
	}
	case SIM_PKT_ACK: { /* the transport's; a final one makes every unused grant useless */
		struct osf_flow *of = p->flow < s->nflows ? oflow(s, p->flow) : NULL;
		if (of && of->gq_n && p->dst == h->n.id && p->psn >= s->flows[p->flow].npkts)
			close_unused(s, &s->flows[p->flow], of);
		return false;
	}
	case SIM_PKT_DATA: {
		if (p->osf_grant)
			grant_unref(o, p->osf_grant);
		p->osf_grant = 0;
		struct sim_flow *f = &s->flows[p->flow];
		if (o->cell)
			cell_rx(s, f, p);
		else
			egress_rx(s, f, p);
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
		/* A flow's credit must be able to cover one whole packet (see credit_covers). */
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
		sim_ev_init(&o->hev[h].ev, hev_fire);
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
	sim_ev_init(&o->tick_ev, tick_fire);
	sim_ev_init(&o->push_ev, push_fire);
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
	.switch_rx = osf_switch_rx,
	.host_rx_any = osf_host_rx_any,
	.host_next = osf_host_next,
	.data_dequeue = osf_data_dequeue,
	.pkt_drop = osf_pkt_drop,
	.link_change = osf_link_change,
	.write_outputs = osf_write_outputs,
};
