/* sim/sim_osf_tm.c: the OSF topology manager (centralised / distributed / hybrid): switches'
 * timed link-quality reports, failure detection and urgent reports, the central TM's pushes and
 * what each ingress learns from them. The rest of the OSF model is in sim_osf.c and
 * sim_osf_host.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_osf_int.h"

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
			sim_osf_close_unused(s, &s->flows[i], of);
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
			sim_osf_switch_rx(s, sw, p);
		else if (p)
			sim_pkt_free(s, p);
		return;
	}
	for (uint32_t hst = 0; hst < s->nhosts; hst++) {
		struct sim_pkt *p = linkq_pkt(s, hst, swi, slot, seq, LQ_TO_HOST, urgent);
		if (p)
			sim_osf_switch_rx(s, sw, p);
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

void sim_osf_push_fire(struct sim *s, struct sim_event *ev)
{
	(void)ev;
	tm_push(s);
}

static bool all_done(const struct sim *s)
{
	return s->nflows && s->flows_done == s->nflows;
}

void sim_osf_tick_fire(struct sim *s, struct sim_event *ev)
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
		if (of && of->gq_n && (s->flows[i].send_done || !sim_osf_flow_demand(s, &s->flows[i], of)))
			sim_osf_close_unused(s, &s->flows[i], of);
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

bool sim_osf_link_change(struct sim *s, struct sim_port *port, bool down)
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

void sim_osf_linkq_rx(struct sim *s, struct sim_host *h, struct sim_pkt *p)
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
