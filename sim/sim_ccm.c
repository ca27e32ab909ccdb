/* sim/sim_ccm.c: coordinated congestion management (draft-lyu-rtgwg-coordinated-cm-01 §6):
 * coordination tag (CC / AR indicators) in data packets, incast detection (pluggable detector,
 * last-hop egress by default), notification messages of types 1-3 sent as real packets
 * through the fabric, the incast state that the last hop spreads to the switches upstream of
 * it (so that no AR point reacts to an incast), flow-level adaptive routing with upstream AR,
 * and the CC/AR split.
 * Mode "ar" runs the same adaptive routing without coordination (the baseline). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_ccm_int.h"

/* ---- helpers ------------------------------------------------------------------------------ */
static void log_ev_seq(struct sim *s, int kind, uint8_t ntype, uint32_t node, uint32_t peer,
		       uint32_t flow, double value, uint64_t seq)
{
	struct sim_ccm *m = ccm_of(s);
	m->st.events++;
	if (m->nev == m->ev_cap) {
		size_t cap = m->ev_cap ? m->ev_cap * 2 : 1024;
		struct sim_ccm_event *v = cap <= CCM_MAX_EVENTS ? realloc(m->ev, cap * sizeof(*v)) : NULL;
		if (!v) {
			m->st.events_dropped++;
			return;
		}
		m->ev = v;
		m->ev_cap = cap;
	}
	m->ev[m->nev++] = (struct sim_ccm_event){ s->now, kind, ntype, node, peer, flow, value, seq };
}

static void log_ev(struct sim *s, int kind, uint8_t ntype, uint32_t node, uint32_t peer,
		   uint32_t flow, double value)
{
	log_ev_seq(s, kind, ntype, node, peer, flow, value, 0);
}

static inline uint32_t sw_index(const struct sim *s, const struct sim_switch *sw)
{
	return sw->n.id - s->nhosts;
}

static inline uint8_t dist(const struct sim_ccm *m, const struct sim *s, uint32_t a, uint32_t b)
{
	return m->dist[(size_t)a * s->nsw + b];
}

/* Per-flow tables are sized when the run starts: flows may still be added before that. */
static bool ccm_ready(struct sim *s)
{
	struct sim_ccm *m = ccm_of(s);
	if (m->ready)
		return true;
	uint64_t n = (uint64_t)s->nsw * s->nflows;
	if (n > CCM_MAX_SF || !(m->sf = calloc(n ? n : 1, sizeof(*m->sf))) ||
	    !(m->fl = calloc(s->nflows ? s->nflows : 1, sizeof(*m->fl)))) {
		sim_set_err(s, "ccm: out of memory for the per-flow tables (switches x flows)");
		s->finished = true;
		return false;
	}
	m->nflows = s->nflows;
	m->ready = true;
	return true;
}

static inline struct ccm_sf *sf_of(struct sim *s, uint32_t swi, uint32_t flow)
{
	return &ccm_of(s)->sf[(size_t)swi * ccm_of(s)->nflows + flow];
}

static inline bool light(const struct sim *s, const struct sim_port *p)
{
	return p->q_bytes < s->cfg.ccm_light_bytes;
}

static inline bool congested(const struct sim *s, const struct sim_port *p)
{
	return p->q_bytes >= s->cfg.ccm_congest_bytes;
}

static inline uint64_t flow_key_hash(const struct sim_switch *sw, const struct sim_pkt *p)
{
	uint64_t k = ((uint64_t)p->src << 40) ^ ((uint64_t)p->dst << 16) ^ p->entropy;
	return sim_mix64(k ^ sw->salt ^ 0x43434dull);
}

/* Least-occupied light candidate (excluding `skip` and, if toward != CCM_NONE, ports whose
 * neighbour is closer to switch `toward`), scanning from a hashed start so that ties spread.
 * Returns the candidate position or n if none. */
static unsigned pick_light(struct sim *s, struct sim_switch *sw, const uint16_t *cand, unsigned n,
			   unsigned start, int skip, uint32_t toward)
{
	struct sim_ccm *m = ccm_of(s);
	uint32_t me = sw_index(s, sw);
	unsigned best = n;
	uint64_t bq = UINT64_MAX;
	for (unsigned i = 0; i < n; i++) {
		unsigned j = (start + i) % n;
		struct sim_port *pt = &sw->n.ports[cand[j]];
		if ((int)j == skip || !light(s, pt))
			continue;
		if (toward != CCM_NONE && pt->peer->node->kind == SIM_NODE_SWITCH &&
		    dist(m, s, pt->peer->node->id - s->nhosts, toward) < dist(m, s, me, toward))
			continue;
		if (pt->q_bytes < bq) {
			bq = pt->q_bytes;
			best = j;
		}
	}
	return best;
}

/* ---- notification messages (§6.2) -------------------------------------------------------- */
/* Next hop of a notification at switch sw: toward a host by the routing table (hashed among
 * equal-cost ports), toward a switch by the distance table. */
static struct sim_port *notify_next(struct sim *s, struct sim_switch *sw, struct sim_pkt *p)
{
	uint64_t h = sim_mix64(((uint64_t)p->flow << 8) ^ p->psn ^ sw->salt);
	if (p->dst < s->nhosts) {
		struct sim_rgroup *g = sim_route_group(sw, p->dst);
		if (!g)
			return NULL;
		return &sw->n.ports[sw->gports[g->off + h % g->n]];
	}
	uint32_t t = p->dst - s->nhosts, me = sw_index(s, sw);
	uint8_t d = dist(ccm_of(s), s, me, t);
	if (d == 255)
		return NULL;
	unsigned n = sw->n.nports, start = (unsigned)(h % n);
	for (unsigned i = 0; i < n; i++) {
		struct sim_port *pt = &sw->n.ports[(start + i) % n];
		struct sim_node *nb = pt->peer->node;
		if (!pt->down && nb->kind == SIM_NODE_SWITCH && dist(ccm_of(s), s, nb->id - s->nhosts, t) + 1 == d)
			return pt;
	}
	return NULL;
}

static void notify_forward(struct sim *s, struct sim_switch *sw, struct sim_pkt *p)
{
	struct sim_port *out = notify_next(s, sw, p);
	if (!out) {
		sw->drops_queue++;
		sim_pkt_free(s, p);
		return;
	}
	sim_pktq_push(&out->cq, p); /* control class: strict priority over data */
	sim_port_kick(s, out);
}

/* Switch sw sends a notification of `type` about `flow` to node `dst`; `seq` is the emission
 * number of the data packet that caused it (kept for the event log only). */
static void notify_send(struct sim *s, struct sim_switch *sw, uint8_t type, uint32_t dst, uint32_t flow,
			uint32_t seq)
{
	struct sim_pkt *p = sim_pkt_alloc(s);
	if (!p)
		return;
	p->type = SIM_PKT_CCM_NOTIFY;
	p->src = sw->n.id;       /* "source IP": the switch */
	p->dst = dst;            /* "destination IP": host or upstream AR point */
	p->psn = type;           /* notification type */
	p->flow = flow;          /* flow key */
	p->entropy = s->flows[flow].entropy;
	p->spray_ctr = 0;
	p->sack_bits = 0;
	p->sack_psn = seq;
	p->ccm_ar = 0;
	p->size_bytes = s->cfg.ccm_notify_bytes;
	ccm_of(s)->st.notify_sent[type]++;
	log_ev_seq(s, SIM_CCM_EV_NOTIFY_SENT, type, sw->n.id, dst, flow, 0, seq);
	notify_forward(s, sw, p);
}

/* ---- incast state (§6.3: an incast is CC's, not AR's) ------------------------------------ */
/* Why: a type 1 only reaches the source, and only the flow's later packets carry the CC
 * indicator. Its packets already in the fabric (sent before the source learned, or waiting in
 * PFC-paused queues) still met congested ports at the AR points, and the AR points moved the
 * flow, although the congestion was the incast's own back-pressure (every path ends at the
 * congested last hop, so no path switch can help: §6.3.1, §6.3.4). So the last hop that
 * classifies an incast also tells the switches upstream of it: a state message (flow key of the
 * first incast flow, destination host, set or clear; notify_bytes, control class) travels from
 * the last hop over every link that leads away from it (switch B learns from A if B is one hop
 * farther from the last hop than A), i.e. to every switch that can forward traffic to that host,
 * each switch forwarding it once per episode. A switch that knows host D is in incast treats
 * the data packets toward D as CC-tagged: no local path switch, no AR indicator, no type 3 for
 * them, and a type 3 about a flow toward D does not move it. The state is per switch and
 * destination (an incast at the last hop concerns every flow into that port: each of them is an
 * incast flow by §6.3.1) and ends when the last hop clears it (the queue stayed below
 * release_bytes for release_hold_us, as for type 2). The congestion of the incast reaches a
 * switch only through PFC, which needs buffers to fill hop by hop, while the message goes ahead
 * of it at strict priority. */
static inline uint8_t *dst_inc_of(struct sim *s, uint32_t swi, uint32_t dst)
{
	return &ccm_of(s)->dst_inc[(size_t)swi * s->nhosts + dst];
}

/* Switch index `at` passes a state message (originated by last hop `lh`) on to its switch
 * neighbours one hop farther from lh. */
static void state_flood(struct sim *s, uint32_t at, uint32_t lh, uint32_t flow, uint32_t kind)
{
	struct sim_ccm *m = ccm_of(s);
	struct sim_switch *sw = &s->sws[at];
	uint8_t d = dist(m, s, at, lh);
	for (uint32_t i = 0; i < sw->n.nports; i++) {
		struct sim_port *pt = &sw->n.ports[i];
		struct sim_node *nb = pt->peer->node;
		if (pt->down || nb->kind != SIM_NODE_SWITCH || dist(m, s, nb->id - s->nhosts, lh) != d + 1)
			continue;
		struct sim_pkt *p = sim_pkt_alloc(s);
		if (!p)
			return;
		p->type = SIM_PKT_CCM_NOTIFY;
		p->src = s->sws[lh].n.id;  /* the last hop that owns the incast */
		p->dst = nb->id;           /* the next switch upstream */
		p->psn = kind;
		p->flow = flow;            /* its destination names the incast's host */
		p->entropy = s->flows[flow].entropy;
		p->spray_ctr = 0;
		p->sack_bits = 0;
		p->sack_psn = 0;
		p->ccm_ar = 0;
		p->size_bytes = s->cfg.ccm_notify_bytes;
		m->state_msgs++;
		sim_pktq_push(&pt->cq, p);
		sim_port_kick(s, pt);
	}
}

static void state_rx(struct sim *s, struct sim_switch *sw, struct sim_pkt *p)
{
	uint32_t me = sw_index(s, sw), lh = p->src - s->nhosts;
	if (p->flow < s->nflows && lh < s->nsw) {
		uint8_t *st = dst_inc_of(s, me, s->flows[p->flow].dst), want = p->psn == CCM_STATE_SET;
		if (*st != want) {
			*st = want;
			state_flood(s, me, lh, p->flow, p->psn);
		}
	}
	sim_pkt_free(s, p);
}

static void check_fire(struct sim *s, struct sim_event *ev);

/* The last hop `swi` starts an incast episode toward the host behind `port`. */
static void inc_start(struct sim *s, uint32_t swi, uint16_t port, uint32_t flow)
{
	struct sim_ccm *m = ccm_of(s);
	uint32_t dst = s->flows[flow].dst;
	uint8_t *st = dst_inc_of(s, swi, dst);
	if (*st)
		return;
	if (m->ninc == m->inc_cap) {
		uint32_t cap = m->inc_cap ? m->inc_cap * 2 : 16;
		struct ccm_inc *v = realloc(m->inc, cap * sizeof(*v));
		if (!v)
			return; /* no state then: only the CC indicator keeps AR off (as without it) */
		m->inc = v;
		m->inc_cap = cap;
	}
	*st = 1;
	m->inc[m->ninc++] = (struct ccm_inc){ dst, swi, flow, port, 0 };
	m->state_sets++;
	state_flood(s, swi, swi, flow, CCM_STATE_SET);
	if (!sim_ev_pending(&m->check_ev))
		sim_schedule(s, &m->check_ev, s->now + m->check_ps);
}

/* ---- incast detection (§6.3.1) ----------------------------------------------------------- */
/* §6.3.1: congestion at an egress port of the last-hop switch is incast. One refinement: the
 * port must have carried packets of at least two flows within the last FANIN_WINDOW, since a
 * single flow can also fill the last hop for a moment (after a path switch its packets arrive
 * over the old and the new path at once), and that is not many-to-one traffic. */
#define FANIN_WINDOW_PS (20ull * 1000000)
static bool det_lasthop(struct sim *s, struct sim_switch *sw, struct sim_port *out, const struct sim_pkt *p)
{
	if (out->peer->node->kind != SIM_NODE_HOST)
		return false;
	struct ccm_port *cp = &ccm_of(s)->port[out->id];
	if (cp->last_flow1 != p->flow + 1) {
		if (cp->last_flow1)
			cp->mix_ps = s->now;
		cp->last_flow1 = p->flow + 1;
	}
	return congested(s, out) && cp->mix_ps && s->now - cp->mix_ps <= FANIN_WINDOW_PS;
}

static const struct ccm_detector detectors[] = {
	[SIM_CCM_DET_LASTHOP] = { "lasthop", det_lasthop },
};

static void rel_add(struct sim *s, uint32_t swi, uint32_t flow, uint16_t port)
{
	struct sim_ccm *m = ccm_of(s);
	if (m->nrel == m->rel_cap) {
		uint32_t cap = m->rel_cap ? m->rel_cap * 2 : 64;
		struct ccm_rel *v = realloc(m->rel, cap * sizeof(*v));
		if (!v)
			return; /* no release then: the flow stays tagged (CC), which is safe */
		m->rel = v;
		m->rel_cap = cap;
	}
	m->rel[m->nrel++] = (struct ccm_rel){ swi, flow, port, 0 };
	if (!sim_ev_pending(&m->check_ev))
		sim_schedule(s, &m->check_ev, s->now + m->check_ps);
}

/* Type 2 (§6.3.2): an incast is over once the last-hop queue has stayed below release_bytes
 * for release_hold_us (hysteresis, so tags do not flap with the DCQCN sawtooth) and the port
 * has not carried two flows in turn for that long either: a queue kept low by CC while several
 * flows still converge is an incast under control, not an incast eliminated (releasing then
 * only had the flows ramp up, be AR'd on the way and be classified again). */
static bool incast_over(struct sim *s, struct sim_port *pt, sim_time_ps *below_since)
{
	struct sim_ccm *m = ccm_of(s);
	const struct ccm_port *cp = &m->port[pt->id];
	if (pt->q_bytes >= s->cfg.ccm_release_bytes || (cp->mix_ps && s->now - cp->mix_ps < m->rel_hold_ps)) {
		*below_since = 0;
		return false;
	}
	if (!*below_since)
		*below_since = s->now;
	return s->now - *below_since >= m->rel_hold_ps;
}

static void check_fire(struct sim *s, struct sim_event *ev)
{
	struct sim_ccm *m = ccm_of(s);
	uint32_t k = 0;
	for (uint32_t i = 0; i < m->nrel; i++) {
		struct ccm_rel *r = &m->rel[i];
		struct sim_switch *sw = &s->sws[r->sw];
		struct sim_flow *f = &s->flows[r->flow];
		if (f->send_done) {
			sf_of(s, r->sw, r->flow)->cc_notified = 0;
			continue;
		}
		if (incast_over(s, &sw->n.ports[r->port], &r->below_since)) {
			sf_of(s, r->sw, r->flow)->cc_notified = 0;
			notify_send(s, sw, 2, f->src, r->flow, 0);
			continue;
		}
		m->rel[k++] = *r;
	}
	m->nrel = k;
	/* The incast state ends like a type 2: its last-hop queue stayed low for release_hold_us. */
	k = 0;
	for (uint32_t i = 0; i < m->ninc; i++) {
		struct ccm_inc *r = &m->inc[i];
		if (incast_over(s, &s->sws[r->sw].n.ports[r->port], &r->below_since)) {
			*dst_inc_of(s, r->sw, r->dst) = 0;
			state_flood(s, r->sw, r->sw, r->flow, CCM_STATE_CLEAR);
			continue;
		}
		m->inc[k++] = *r;
	}
	m->ninc = k;
	if (m->nrel || m->ninc)
		sim_schedule(s, ev, s->now + m->check_ps);
}

/* ---- switch data path (§6.3.3-6.3.5) ----------------------------------------------------- */
static void ar_move(struct sim *s, struct sim_switch *sw, struct ccm_sf *e, const uint16_t *cand,
		    unsigned j, uint32_t flow, int kind, uint32_t seq)
{
	struct sim_ccm *m = ccm_of(s);
	uint16_t old = (uint16_t)(e->port1 - 1);
	e->port1 = (uint16_t)(cand[j] + 1);
	e->moved_ps = s->now;
	if (kind == SIM_CCM_EV_AR_LOCAL)
		m->st.ar_local++;
	else
		m->st.ar_upstream++;
	m->fl[flow].ar_switches++;
	if (m->fl[flow].incast)
		m->st.ar_incast_flows++;
	log_ev_seq(s, kind, 0, sw->n.id, sw->n.ports[old].peer->node->id, flow,
		   (double)sw->n.ports[cand[j]].peer->node->id, seq);
}

/* Convergent flows (a second congestion-type method, §6.3.1 "other methods"): this switch
 * forwarded another flow toward the same host within FANIN_WINDOW, and port `pt` is at least
 * as fast as that host's link. The flows meet again at the host's link, a common bottleneck that
 * drains no faster than this port: moving one of them elsewhere does not speed it up (its queue
 * only moves to the last hop). Many-to-one traffic seen before the last hop has classified it,
 * or before its incast state has arrived here. So the coordinated AR point leaves such a flow on
 * its path (AR moves the others, whose bottleneck really is here) and sends no type 3 for it;
 * ECN as usual. */
static bool convergent(struct sim *s, struct sim_switch *sw, struct sim_port *pt, uint32_t flow, uint32_t dst)
{
	const struct ccm_recent *rc = &ccm_of(s)->recent[(size_t)sw_index(s, sw) * CCM_RECENT];
	if (dst >= s->nhosts)
		return false;
	const struct sim_host *h = &s->hosts[dst];
	if (!h->n.nports || pt->rate_bps < h->n.ports[0].rate_bps)
		return false;
	for (unsigned i = 0; i < CCM_RECENT; i++)
		if (rc[i].flow1 && rc[i].flow1 != flow + 1 && rc[i].dst == dst &&
		    s->now - rc[i].t_ps <= FANIN_WINDOW_PS)
			return true;
	return false;
}

static void track_flow(struct sim *s, struct sim_switch *sw, struct sim_port *pt, const struct sim_pkt *p)
{
	struct ccm_port *cp = &ccm_of(s)->port[pt->id];
	struct ccm_recent *rc = &ccm_of(s)->recent[(size_t)sw_index(s, sw) * CCM_RECENT];
	if (cp->last_flow1 != p->flow + 1) { /* as det_lasthop does on ports toward hosts */
		if (cp->last_flow1)
			cp->mix_ps = s->now;
		cp->last_flow1 = p->flow + 1;
	}
	unsigned old = 0;
	for (unsigned i = 0; i < CCM_RECENT; i++) {
		if (rc[i].flow1 == p->flow + 1) {
			old = i;
			break;
		}
		if (rc[i].t_ps < rc[old].t_ps || !rc[i].flow1)
			old = i;
		if (!rc[i].flow1)
			break;
	}
	rc[old].flow1 = p->flow + 1;
	rc[old].dst = p->dst;
	rc[old].t_ps = s->now;
}

static uint16_t route_decide(struct sim *s, struct sim_switch *sw, struct sim_pkt *p,
			     const struct sim_rgroup *g, const uint16_t *cand);

static uint16_t ccm_route(struct sim *s, struct sim_switch *sw, struct sim_pkt *p,
		       const struct sim_rgroup *g, const uint16_t *cand)
{
	uint16_t port = route_decide(s, sw, p, g, cand);
	if (ccm_of(s)->ready && ccm_of(s)->mode == SIM_CCM_COORD)
		track_flow(s, sw, &sw->n.ports[port], p);
	return port;
}

static uint16_t route_decide(struct sim *s, struct sim_switch *sw, struct sim_pkt *p,
			     const struct sim_rgroup *g, const uint16_t *cand)
{
	struct sim_ccm *m = ccm_of(s);
	m->ecn_ok = true;
	if (!ccm_ready(s))
		return cand[0];
	uint32_t swi = sw_index(s, sw);
	struct ccm_sf *e = sf_of(s, swi, p->flow);
	bool coord = m->mode == SIM_CCM_COORD;
	bool cc_tag = coord && (p->flags & SIM_PKT_CCM_CC);
	/* Toward a host in incast (incast state above): CC's, as if tagged; no AR. */
	bool inc_dst = coord && p->dst < s->nhosts && *dst_inc_of(s, swi, p->dst);
	if (coord)
		e->cc_seen = cc_tag;
	unsigned n = g->n;
	uint16_t port = cand[0];
	if (n > 1) {
		uint64_t h = flow_key_hash(sw, p);
		bool placed = e->port1 && e->entropy == p->entropy;
		if (placed) { /* still a candidate? (routes may have changed) */
			placed = false;
			for (unsigned j = 0; j < n && !placed; j++)
				placed = cand[j] + 1 == e->port1;
		}
		if (!placed) { /* initial placement: ECMP hash, as AR fabrics start from */
			e->port1 = (uint16_t)(cand[h % n] + 1);
			e->entropy = p->entropy;
		}
		port = (uint16_t)(e->port1 - 1);
		if (!cc_tag && !inc_dst) {
			unsigned nlight = 0;
			for (unsigned j = 0; j < n; j++)
				nlight += light(s, &sw->n.ports[cand[j]]);
			if (coord && nlight >= 2) /* several light paths: this switch is an AR point */
				p->ccm_ar = sw->n.id + 1;
			struct ccm_port *cq = &m->port[sw->n.ports[port].id];
			bool cg = congested(s, &sw->n.ports[port]);
			if (coord && !cg)
				cq->cong_ps = 0;
			else if (coord && !cq->cong_ps)
				cq->cong_ps = s->now;
			/* Coordinated: no local path switch for the congestion of a PFC-paused port
			 * (back-pressure: the switch downstream whose congestion it is classifies it,
			 * incast or not, and sends a type 3 if AR can help) nor for a convergent flow;
			 * otherwise only once the port has been congested for confirm_ps. */
			bool can = cg && nlight &&
				   !(coord && (sw->n.ports[port].paused || convergent(s, sw, &sw->n.ports[port], p->flow, p->dst))) &&
				   (!e->moved_ps || s->now - e->moved_ps >= m->hold_ps);
			if (can && coord && s->now - cq->cong_ps < m->confirm_ps) {
				m->ecn_ok = false; /* a path switch is pending: AR first, no rate cut yet */
				m->st.ecn_suppressed++;
			} else if (can) {
				int cur = -1;
				for (unsigned j = 0; j < n; j++)
					if (cand[j] == port)
						cur = (int)j;
				unsigned j = pick_light(s, sw, cand, n, (unsigned)(h >> 32) % n, cur, CCM_NONE);
				if (j < n) {
					ar_move(s, sw, e, cand, j, p->flow, SIM_CCM_EV_AR_LOCAL, p->spray_ctr);
					port = cand[j];
					cq->cong_ps = s->now; /* one move per port per confirm_ps */
				}
			}
		}
		/* CC-tagged packets (incast flows) keep their path: no AR (§6.3.5); so do all
		 * packets toward a host in incast. */
	}
	struct sim_port *out = &sw->n.ports[port];
	if (!coord) { /* uncoordinated: classify only (statistics), no notification */
		if (m->det->is_incast(s, sw, out, p) && !m->fl[p->flow].incast) {
			m->fl[p->flow].incast = true;
			m->st.incast_flows++;
		}
		return port;
	}
	if (m->det->is_incast(s, sw, out, p)) {
		/* §6.3.2: incast congestion, notify the source (type 1) once per episode; CC. */
		if (!e->cc_notified) {
			e->cc_notified = 1;
			if (!m->fl[p->flow].incast) {
				m->fl[p->flow].incast = true;
				m->st.incast_flows++;
			}
			notify_send(s, sw, 1, p->src, p->flow, p->spray_ctr);
			rel_add(s, swi, p->flow, port);
		}
		inc_start(s, swi, port, p->flow);
		return port;
	}
	if (cc_tag || inc_dst) {
		/* An incast flow's rate is set at its incast point. Queues it meets elsewhere are
		 * back-pressure (PFC) from that same incast; marking there too would count the
		 * congestion twice and cut the flows crossing more paused hops harder (unfair). */
		if (s->cfg.ccm_cc_lasthop && out->peer->node->kind != SIM_NODE_HOST)
			m->ecn_ok = false;
		return port;
	}
	struct ccm_port *cp = &m->port[out->id];
	if (!congested(s, out)) {
		cp->t3_first_ps = 0;
		return port;
	}
	if (convergent(s, sw, out, p->flow, p->dst) || out->paused)
		return port; /* convergent: CC here (ECN as usual), no other path would help;
			      * paused: the congestion is downstream's, which decides (and notifies) */
	/* Congested here and no local light path: upstream AR if the tag names an AR point
	 * (§6.3.3), with ECN withheld for ar_grace_us; otherwise, or if the congestion outlasts
	 * the grace time, CC (§6.3.4). */
	uint32_t ar = p->ccm_ar;
	if (!ar || ar - 1 == sw->n.id || out->peer->node->kind == SIM_NODE_HOST)
		return port; /* no AR point, or the last hop (every path ends here): CC */
	if (!cp->t3_first_ps)
		cp->t3_first_ps = s->now;
	if (!cp->t3_last_ps || s->now - cp->t3_last_ps >= m->notify_iv_ps) {
		cp->t3_last_ps = s->now;
		notify_send(s, sw, 3, ar - 1, p->flow, p->spray_ctr);
	}
	if (s->now - cp->t3_first_ps < m->grace_ps) {
		m->ecn_ok = false;
		m->st.ecn_suppressed++;
	}
	return port;
}

static bool ccm_ecn_ok(struct sim *s, const struct sim_pkt *p)
{
	return ccm_of(s)->ecn_ok;
}

/* Type 3 at the upstream AR point: move the flow to a light port that does not lead toward
 * the congested switch (the notification's source). */
static void upstream_ar(struct sim *s, struct sim_switch *sw, struct sim_pkt *p)
{
	struct sim_ccm *m = ccm_of(s);
	struct sim_flow *f = &s->flows[p->flow];
	struct sim_rgroup *g = sim_route_group(sw, f->dst);
	uint32_t x = p->src - s->nhosts, me = sw_index(s, sw);
	struct ccm_sf *e = sf_of(s, me, p->flow);
	if (e->cc_seen)
		return; /* an incast flow (tagged): CC, not AR (§6.3.5) */
	if (*dst_inc_of(s, me, f->dst) || (e->port1 && convergent(s, sw, &sw->n.ports[e->port1 - 1], p->flow, f->dst))) {
		m->ar_held++; /* the notifier did not know yet it was the incast's congestion */
		return;
	}
	if (!g || g->n < 2 || !e->port1 || f->send_done) {
		m->st.ar_fail++;
		log_ev(s, SIM_CCM_EV_AR_FAIL, 3, sw->n.id, p->src, p->flow, 0);
		return;
	}
	const uint16_t *cand = &sw->gports[g->off];
	struct sim_port *cur = &sw->n.ports[e->port1 - 1];
	if (cur->peer->node->kind == SIM_NODE_SWITCH &&
	    dist(m, s, cur->peer->node->id - s->nhosts, x) >= dist(m, s, me, x))
		return; /* already moved off that path: the message is stale */
	int ci = -1;
	for (unsigned j = 0; j < g->n; j++)
		if (cand[j] + 1 == e->port1)
			ci = (int)j;
	unsigned j = pick_light(s, sw, cand, g->n, (unsigned)(sim_mix64(p->flow ^ sw->salt) % g->n), ci, x);
	if (j >= g->n) {
		m->st.ar_fail++;
		log_ev(s, SIM_CCM_EV_AR_FAIL, 3, sw->n.id, p->src, p->flow, 0);
		return;
	}
	ar_move(s, sw, e, cand, j, p->flow, SIM_CCM_EV_AR_UPSTREAM, p->sack_psn);
}

static void ccm_switch_rx(struct sim *s, struct sim_switch *sw, struct sim_pkt *p)
{
	if (p->dst != sw->n.id) {
		notify_forward(s, sw, p);
		return;
	}
	if (p->psn == CCM_STATE_SET || p->psn == CCM_STATE_CLEAR) {
		state_rx(s, sw, p);
		return;
	}
	ccm_of(s)->st.notify_recv[p->psn & 3]++;
	log_ev(s, SIM_CCM_EV_NOTIFY_RECV, (uint8_t)p->psn, sw->n.id, p->src, p->flow, 0);
	if (p->psn == 3 && ccm_ready(s))
		upstream_ar(s, sw, p);
	sim_pkt_free(s, p);
}

/* ---- hosts (§6.4) ------------------------------------------------------------------------ */
static void ccm_data_tx(struct sim *s, struct sim_flow *f, struct sim_pkt *p)
{
	struct sim_ccm *m = ccm_of(s);
	p->ccm_ar = 0;
	if (m->mode != SIM_CCM_COORD || !ccm_ready(s))
		return;
	if (m->fl[f->idx].cc_tag)
		p->flags |= SIM_PKT_CCM_CC;
	if (s->cfg.ccm_host_ar)
		p->ccm_ar = f->src + 1;
}

static void notify_host_rx(struct sim *s, struct sim_host *h, struct sim_pkt *p)
{
	struct sim_ccm *m = ccm_of(s);
	uint8_t type = (uint8_t)p->psn;
	m->st.notify_recv[type & 3]++;
	log_ev(s, SIM_CCM_EV_NOTIFY_RECV, type, h->n.id, p->src, p->flow, 0);
	if (!ccm_ready(s) || p->flow >= m->nflows)
		return;
	struct ccm_flow *cf = &m->fl[p->flow];
	struct sim_flow *f = &s->flows[p->flow];
	if (type == 1 && !cf->cc_tag) {
		cf->cc_tag = true;
		log_ev_seq(s, SIM_CCM_EV_TAG_SET, 1, h->n.id, CCM_NONE, p->flow, 0, f->spray_seq);
	} else if (type == 2 && cf->cc_tag) {
		cf->cc_tag = false;
		log_ev_seq(s, SIM_CCM_EV_TAG_CLEAR, 2, h->n.id, CCM_NONE, p->flow, 0, f->spray_seq);
	} else if (type == 3 && !f->send_done) {
		/* Host AR: a new entropy; switches treat it as a new flowlet and place it again. */
		f->entropy = (uint16_t)(sim_mix64(((uint64_t)f->entropy << 16) ^ s->now) | 1);
		cf->ar_switches++;
		if (cf->incast) /* a path switch like the others */
			m->st.ar_incast_flows++;
		log_ev(s, SIM_CCM_EV_HOST_AR, 3, h->n.id, p->src, p->flow, f->entropy);
	}
}

/* A notification at a host: handled there if it is the destination (hosts do not forward). */
static void ccm_host_rx(struct sim *s, struct sim_host *h, struct sim_pkt *p)
{
	if (p->dst == h->n.id)
		notify_host_rx(s, h, p);
	sim_pkt_free(s, p);
}

static void ccm_rate_cut(struct sim *s, struct sim_flow *f)
{
	ccm_of(s)->st.rate_cuts++;
	log_ev(s, SIM_CCM_EV_RATE_CUT, 0, f->src, CCM_NONE, f->idx, f->rc / 1e9);
}

/* ---- lifecycle --------------------------------------------------------------------------- */
static int ccm_start(struct sim *s)
{
	const struct sim_config *c = &s->cfg;
	if (c->ccm_light_bytes > c->ccm_congest_bytes) {
		sim_set_err(s, "ccm.light_bytes must be <= ccm.congest_bytes");
		return -EINVAL;
	}
	if (c->ccm_notify_bytes < 1 || c->ccm_notify_bytes > 65535 || c->ccm_check_us <= 0 ||
	    c->ccm_check_us > 1e11 || c->ccm_notify_interval_us > 1e11 || c->ccm_ar_hold_us > 1e11 ||
	    c->ccm_ar_grace_us > 1e11 || c->ccm_release_hold_us > 1e11) {
		sim_set_err(s, "ccm: notify_bytes 1..65535, check_us > 0, times <= 1e11 us");
		return -EINVAL;
	}
	if (s->nsw > CCM_MAX_SW) {
		sim_set_err(s, "ccm: at most 8192 switches (notification routing table)");
		return -E2BIG;
	}
	if ((uint64_t)s->nsw * s->nhosts > CCM_MAX_SF) {
		sim_set_err(s, "ccm: at most 2^24 switches x hosts (incast state table)");
		return -E2BIG;
	}
	struct sim_ccm *m = calloc(1, sizeof(*m));
	uint32_t S = s->nsw, *q = malloc(sizeof(*q) * (S ? S : 1));
	if (!m || !q || !(m->dist = malloc((size_t)S * S + 1)) ||
	    !(m->port = calloc(s->nports + 1, sizeof(*m->port))) ||
	    !(m->dst_inc = calloc((size_t)S * s->nhosts + 1, 1)) ||
	    !(m->recent = calloc((size_t)S * CCM_RECENT + 1, sizeof(*m->recent)))) {
		if (m) {
			free(m->dist);
			free(m->port);
			free(m->dst_inc);
			free(m->recent);
		}
		free(m);
		free(q);
		return -ENOMEM;
	}
	/* Hop counts between switches, by a breadth-first search from each (over links up). */
	memset(m->dist, 255, (size_t)S * S);
	for (uint32_t a = 0; a < S; a++) {
		uint8_t *d = &m->dist[(size_t)a * S];
		uint32_t qh = 0, qt = 0;
		d[a] = 0;
		q[qt++] = a;
		while (qh < qt) {
			struct sim_node *nd = &s->sws[q[qh++]].n;
			uint8_t dn = d[nd->id - s->nhosts];
			for (uint32_t i = 0; i < nd->nports; i++) {
				struct sim_node *nb = nd->ports[i].peer->node;
				if (nd->ports[i].down || nb->kind != SIM_NODE_SWITCH || d[nb->id - s->nhosts] != 255 || dn >= 254)
					continue;
				d[nb->id - s->nhosts] = (uint8_t)(dn + 1);
				q[qt++] = nb->id - s->nhosts;
			}
		}
	}
	free(q);
	m->mode = c->ccm_mode;
	m->det = &detectors[c->ccm_detector];
	m->notify_iv_ps = sim_time_from_us_f(c->ccm_notify_interval_us);
	m->hold_ps = sim_time_from_us_f(c->ccm_ar_hold_us);
	m->grace_ps = sim_time_from_us_f(c->ccm_ar_grace_us);
	m->check_ps = sim_time_from_us_f(c->ccm_check_us);
	m->rel_hold_ps = sim_time_from_us_f(c->ccm_release_hold_us);
	m->confirm_ps = CCM_AR_CONFIRM_PS;
	if (!m->check_ps)
		m->check_ps = 1;
	sim_ev_init(&m->check_ev, check_fire);
	s->mod[SIM_MOD_ccm] = m;
	return 0;
}

static void ccm_destroy(struct sim *s)
{
	struct sim_ccm *m = ccm_of(s);
	if (!m)
		return;
	free(m->dist);
	free(m->port);
	free(m->sf);
	free(m->fl);
	free(m->rel);
	free(m->dst_inc);
	free(m->recent);
	free(m->inc);
	free(m->ev);
	free(m);
	s->mod[SIM_MOD_ccm] = NULL;
}

static const char *const ccm_mode_names[] = { "off", "ar", "coordinated", NULL };
static const char *const ccm_det_names[] = { "lasthop", NULL };
static const struct sim_param ccm_params[] = {
	{ "ccm", "mode", SIM_P_ENUM, SIM_PARAM_FIELD(ccm_mode), "off", ccm_mode_names, "off | ar (flow-level adaptive routing, uncoordinated) | coordinated (draft-lyu CCM)" },
	{ "ccm", "detector", SIM_P_ENUM, SIM_PARAM_FIELD(ccm_detector), "lasthop", ccm_det_names, "incast detector: lasthop (congested egress toward a host, draft-lyu 6.3.1)" },
	{ "ccm", "congest_bytes", SIM_P_U64, SIM_PARAM_FIELD(ccm_congest_bytes), "102400", NULL, "egress data queue at or above which a port is congested" },
	{ "ccm", "light_bytes", SIM_P_U64, SIM_PARAM_FIELD(ccm_light_bytes), "51200", NULL, "egress data queue below which a port is light-loaded (usable for AR)" },
	{ "ccm", "release_bytes", SIM_P_U64, SIM_PARAM_FIELD(ccm_release_bytes), "20480", NULL, "incast over (type 2) once the last-hop queue stays below this" },
	{ "ccm", "release_hold_us", SIM_P_DBL, SIM_PARAM_FIELD(ccm_release_hold_us), "50", NULL, "... for this long" },
	{ "ccm", "check_us", SIM_P_DBL, SIM_PARAM_FIELD(ccm_check_us), "5", NULL, "period of the incast-release check" },
	{ "ccm", "notify_interval_us", SIM_P_DBL, SIM_PARAM_FIELD(ccm_notify_interval_us), "10", NULL, "a switch repeats a type 3 for one flow at most this often" },
	{ "ccm", "ar_hold_us", SIM_P_DBL, SIM_PARAM_FIELD(ccm_ar_hold_us), "20", NULL, "a switch moves one flow at most once per this time (damps flapping)" },
	{ "ccm", "ar_grace_us", SIM_P_DBL, SIM_PARAM_FIELD(ccm_ar_grace_us), "100", NULL, "after a type 3, ECN is withheld this long for the flow; then CC takes over" },
	{ "ccm", "notify_bytes", SIM_P_U32, SIM_PARAM_FIELD(ccm_notify_bytes), "64", NULL, "size of a notification message on the wire" },
	{ "ccm", "host_ar", SIM_P_BOOL, SIM_PARAM_FIELD(ccm_host_ar), "false", NULL, "hosts are AR points (AR indicator starts at the source; type 3 changes the flow's entropy)" },
	{ "ccm", "cc_lasthop", SIM_P_BOOL, SIM_PARAM_FIELD(ccm_cc_lasthop), "true", NULL, "CC-tagged (incast) packets are ECN-marked only at the last hop, not on the back-pressured hops before it" },
};

static bool ccm_enabled(const struct sim_config *c)
{
	return c->ccm_mode != SIM_CCM_OFF;
}

const struct sim_module_ops sim_ccm_ops = {
	.name = "ccm",
	.params = ccm_params,
	.nparams = sizeof(ccm_params) / sizeof(ccm_params[0]),
	.enabled = ccm_enabled,
	.pkt_lo = SIM_PKT_CCM_NOTIFY,
	.pkt_hi = SIM_PKT_CCM_NOTIFY,
	.start = ccm_start,
	.destroy = ccm_destroy,
	.switch_rx = ccm_switch_rx,
	.host_rx = ccm_host_rx,
	.data_tx = ccm_data_tx,
	.route = ccm_route,
	.ecn_ok = ccm_ecn_ok,
	.rate_cut = ccm_rate_cut,
	.write_outputs = sim_ccm_write_outputs,
};
