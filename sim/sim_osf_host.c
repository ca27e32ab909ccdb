/* sim/sim_osf_host.c: the OSF model at the edge NICs (draft-hcl-rtgwg-osf-framework-01): the
 * OSF-Ingress scheduler (credit requests, path choice, per-packet spraying, cells: aggregation
 * and fragmentation) and the OSF-Egress (reordering by PSN or cell number, reassembly, NACKs of
 * holes). Paths, grants and the life cycle are in sim_osf.c; the topology manager in sim_osf_tm.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_osf_int.h"

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
uint32_t sim_osf_flow_demand(const struct sim *s, const struct sim_flow *f, const struct osf_flow *of)
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
	uint32_t gi = sim_osf_grant_new(o);
	if (!gi)
		return NULL;
	struct sim_pkt *p = sim_pkt_alloc(s);
	if (!p) {
		struct osf_grant *g = &o->grants[gi - 1];
		g->refs = 1;
		sim_osf_grant_unref(o, gi);
		return NULL;
	}
	uint16_t x = sim_osf_pick_path(s, h, of);
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
void sim_osf_close_unused(struct sim *s, struct sim_flow *f, struct osf_flow *of)
{
	struct sim_osf *o = osf_of(s);
	while (of->gq_n) {
		uint32_t gi = of->gq[of->gq_head];
		struct osf_grant *g = &o->grants[gi - 1];
		sim_osf_release_hops(o, g, 1, g->nhops, (uint64_t)g->left * full_pkt(s));
		of->pending -= g->left < of->pending ? g->left : of->pending;
		g->left = 0;
		of->gq_head = (of->gq_head + 1) % 64;
		of->gq_n--;
		sim_osf_grant_unref(o, gi);
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
			sim_osf_release_hops(o, g, 1, g->nhops, full_pkt(s) - p->size_bytes);
		ports = (const struct sim_port *const *)g->ports;
		n = g->nhops;
		if (!g->left) {
			of->gq_head = (of->gq_head + 1) % 64;
			of->gq_n--;
			sim_osf_grant_unref(o, gi);
		}
	} else {
		uint16_t x = sim_osf_pick_path(s, h, of);
		p->spray_ctr = x;
		ports = (const struct sim_port *const *)of->paths[x].ports;
		n = of->paths[x].nhops;
	}
	o->st.cells_sent++;
	if (sim_osf_path_truly_down(ports, n)) {
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
bool sim_osf_credit_covers(const struct sim *s, const struct osf_flow *of)
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
		       sim_osf_credit_covers(s, of) && stream_pull(s, h, f, of, &p))
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

void sim_osf_hev_fire(struct sim *s, struct sim_event *ev)
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
	uint32_t d = sim_osf_flow_demand(s, f, of), cap = c->osf_outstanding * c->osf_chunk_pkts;
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
	struct osf_flow *of = sim_osf_oflow_get(s, f->idx);
	if (!of)
		return NULL;
	if (!of->paths_done && sim_osf_flow_paths(s, f, of))
		return NULL;
	return of->npaths ? of : NULL;
}

struct sim_pkt *sim_osf_host_next(struct sim *s, struct sim_host *h, sim_time_ps *wake)
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
	sim_osf_host_send_ctl(s, &s->hosts[f->dst], p);
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
	sim_osf_egress_rx(s, f, &t);
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

void sim_osf_cell_rx(struct sim *s, struct sim_flow *f, struct sim_pkt *p)
{
	struct sim_osf *o = osf_of(s);
	struct osf_flow *of = sim_osf_oflow_get(s, f->idx);
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
void sim_osf_chole_fire(struct sim *s, struct sim_event *ev)
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
void sim_osf_hole_fire(struct sim *s, struct sim_event *ev)
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

void sim_osf_egress_rx(struct sim *s, struct sim_flow *f, struct sim_pkt *p)
{
	struct sim_osf *o = osf_of(s);
	struct osf_flow *of = sim_osf_oflow_get(s, f->idx);
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
