/* sim/sim_net.c: links and switches. Output-queued ports (a strict-priority control queue for
 * ACK/NACK/CNP over one data queue, or over a module's queues: qdisc hooks), serialization and propagation, per-port and shared buffer
 * admission, ECN marking, PFC pause/resume on ingress occupancy, and the routing ops tables
 * (ECMP, spray, adaptive, flowlet). Hosts' transport logic is in sim_host.c.
 * Cost model: an uncongested hop costs one event (the arrival); a busy port adds one event per
 * packet (end of serialization). */
#include <stdlib.h>

#include "sim_int.h"

void sim_port_init(struct sim_port *p)
{
	sim_ev_init(&p->tx_ev, sim_port_tx_ev);
}

void sim_pktq_push(struct sim_pktq *q, struct sim_pkt *p)
{
	p->next = NULL;
	if (q->tail)
		q->tail->next = p;
	else
		q->head = p;
	q->tail = p;
	q->n++;
}

struct sim_pkt *sim_pktq_pop(struct sim_pktq *q)
{
	struct sim_pkt *p = q->head;
	if (p) {
		q->head = p->next;
		if (!q->head)
			q->tail = NULL;
		q->n--;
	}
	return p;
}

/* ---- PFC ---------------------------------------------------------------------------------- */
static void ctl_ev_fire(struct sim *s, struct sim_event *ev)
{
	struct sim_ctl_ev *c = SIM_CONTAINER_OF(ev, struct sim_ctl_ev, ev);
	struct sim_port *p = c->port;
	p->paused = c->pause;
	c->next_free = s->ctl_free;
	s->ctl_free = c;
	if (!p->paused)
		sim_port_kick(s, p);
}

/* Ingress port `in` tells its peer to stop or resume; the frame takes the link latency and,
 * being a MAC control frame, does not queue behind data. */
static void pfc_send(struct sim *s, struct sim_port *in, bool pause)
{
	struct sim_ctl_ev *c = s->ctl_free;
	if (c)
		s->ctl_free = c->next_free;
	else if (!(c = malloc(sizeof(*c))))
		return; /* out of memory: the pause is lost, counted as nothing; headroom drops show it */
	else {
		c->next_all = s->ctl_all;
		s->ctl_all = c;
	}
	sim_ev_init(&c->ev, ctl_ev_fire);
	c->port = in->peer;
	c->pause = pause;
	in->pause_sent = pause;
	if (pause) {
		in->pauses_sent++;
		s->pfc_pauses++;
	}
	sim_schedule(s, &c->ev, s->now + in->latency_ps);
}

/* ---- wires --------------------------------------------------------------------------------- */
/* A packet on a wire is one uncancellable event, its arrival at the far end. The event queue's
 * wheel takes it in O(1), so nothing is gained by queueing only the head of each wire; and the
 * arrival then touches neither the sending port nor the packet behind. */
static inline void wire_put(struct sim *s, struct sim_pkt *p, sim_time_ps t)
{
	sim_schedule_fixed(s, &p->ev, t);
}

/* ---- transmission ------------------------------------------------------------------------- */
static struct sim_pkt *switch_dequeue(struct sim *s, struct sim_port *p)
{
	struct sim_pkt *pkt = sim_pktq_pop(&p->cq);
	if (pkt)
		return pkt;
	if (s->hk.qdisc_dequeue) /* a module's egress queues (traffic classes) */
		pkt = s->hk.qdisc_dequeue(s, p);
	else if (!p->paused)
		pkt = sim_pktq_pop(&p->q);
	if (!pkt)
		return NULL;
	p->q_bytes -= pkt->size_bytes;
	struct sim_switch *sw = sim_node_sw(p->node);
	sw->shared_used -= pkt->size_bytes;
	if (pkt->flags & SIM_PKT_LOSSLESS) {
		struct sim_port *in = pkt->rx_port;
		in->in_bytes -= pkt->size_bytes;
		if (in->pause_sent && in->in_bytes <= s->cfg.pfc_xon_bytes)
			pfc_send(s, in, false);
	}
	if (s->hk.data_dequeue && pkt->type == SIM_PKT_DATA)
		s->hk.data_dequeue(s, p, pkt);
	return pkt;
}

/* The port's "may start the next packet" wake-up. Set for the end of the packet in service
 * it is never cancelled (a kick before then has nothing to do), so it is scheduled
 * uncancellable: it goes into the event queue's wheel and the queue never writes into the
 * port. A host's wake-up for a paced flow may have to be cancelled (a new flow may be ready
 * sooner): that one is cancellable. Ordering is the same either way. */
static inline bool tx_pending(const struct sim_port *p)
{
	return p->tx_armed || (p->is_host && sim_ev_pending(&p->tx_ev));
}

static inline void tx_arm_end(struct sim *s, struct sim_port *p, sim_time_ps t)
{
	p->tx_armed = true;
	sim_schedule_fixed(s, &p->tx_ev, t);
}

void sim_port_kick(struct sim *s, struct sim_port *p)
{
	if (tx_pending(p)) {
		/* A wake-up is already set. It is early enough unless it is a host's pacing timer
		 * set for later while the link is already free (a new flow may be ready now). */
		if (p->tx_armed || p->tx_ev.t <= s->now || s->now < p->busy_until)
			return;
		sim_cancel(s, &p->tx_ev);
	}
	if (s->now < p->busy_until) {
		tx_arm_end(s, p, p->busy_until);
		return;
	}
	struct sim_pkt *pkt;
	bool more;
	if (!p->is_host) {
		pkt = switch_dequeue(s, p);
		while (pkt && p->down) { /* a dead link drops its queue */
			sim_modules_pkt_drop(s, pkt, p, SIM_DROP_PORT_DOWN);
			p->drops++;
			sim_pkt_free(s, pkt);
			pkt = switch_dequeue(s, p);
		}
		if (!pkt)
			return;
		more = p->cq.n || (p->q.n && !p->paused);
	} else {
		struct sim_host *h = sim_node_host(p->node);
		sim_time_ps wake = SIM_TIME_NEVER;
		pkt = sim_pktq_pop(&p->cq);
		if (!pkt && !p->paused)
			pkt = sim_host_next(s, h, &wake);
		if (!pkt) {
			if (wake != SIM_TIME_NEVER && !p->paused)
				sim_schedule(s, &p->tx_ev, wake); /* pacing: cancellable */
			return;
		}
		more = p->cq.n || h->nactive;
	}
	sim_time_ps end = s->now + sim_time_serialize(pkt->size_bytes, p->rate_bps);
	p->busy_until = end;
	p->tx_bytes += pkt->size_bytes;
	p->tx_pkts++;
	sim_port_event(s, p, pkt, SIM_PEV_TX);
	pkt->rx_port = p->peer;
	wire_put(s, pkt, end + p->latency_ps);
	if (more)
		tx_arm_end(s, p, end);
}

void sim_port_tx_ev(struct sim *s, struct sim_event *ev)
{
	struct sim_port *p = SIM_CONTAINER_OF(ev, struct sim_port, tx_ev);
	p->tx_armed = false;
	sim_port_kick(s, p);
}

void sim_pkt_arrive(struct sim *s, struct sim_event *ev)
{
	struct sim_pkt *p = SIM_CONTAINER_OF(ev, struct sim_pkt, ev);
	if (s->hk.link_lost && s->hk.link_lost(s, p)) { /* a module degraded the link */
		sim_modules_pkt_drop(s, p, p->rx_port->peer, SIM_DROP_LINK_LOST);
		sim_pkt_free(s, p);
		return;
	}
	struct sim_node *n = p->rx_port->node;
	if (n->kind == SIM_NODE_SWITCH)
		sim_switch_rx(s, sim_node_sw(n), p);
	else
		sim_host_rx(s, sim_node_host(n), p);
}

/* ---- switch pipeline ---------------------------------------------------------------------- */
static inline bool ecn_mark(struct sim *s, struct sim_switch *sw, uint64_t qbytes)
{
	const struct sim_config *c = &s->cfg;
	if (qbytes <= c->ecn_kmin_bytes)
		return false;
	if (qbytes >= c->ecn_kmax_bytes)
		return true;
	double p = c->ecn_pmax * (double)(qbytes - c->ecn_kmin_bytes) /
		   (double)(c->ecn_kmax_bytes - c->ecn_kmin_bytes);
	return util_rng_double(&sw->rng) < p;
}

/* ECN on enqueue of data packet p at egress port out, whose queue holds qbytes before it. */
static inline bool ecn_on_enqueue(struct sim *s, struct sim_switch *sw, struct sim_port *out,
				  struct sim_pkt *p, uint64_t qbytes)
{
	if (!s->cfg.ecn || !(p->flags & SIM_PKT_ECT) || (p->flags & SIM_PKT_CE) ||
	    (s->hk.ecn_ok && !s->hk.ecn_ok(s, p)) ||
	    !(s->hk.ecn_mark ? s->hk.ecn_mark(s, out, p, qbytes) : ecn_mark(s, sw, qbytes)))
		return false;
	p->flags |= SIM_PKT_CE;
	out->ecn_marks++;
	s->ecn_marks++;
	sim_port_event(s, out, p, SIM_PEV_MARK);
	return true;
}

bool sim_switch_ecn(struct sim *s, struct sim_switch *sw, struct sim_port *out, struct sim_pkt *p,
		    uint64_t qbytes)
{
	return ecn_on_enqueue(s, sw, out, p, qbytes);
}

void sim_switch_rx(struct sim *s, struct sim_switch *sw, struct sim_pkt *p)
{
	const struct sim_config *c = &s->cfg;
	if (p->type >= SIM_PKT_MOD_FIRST) { /* a module's own packet */
		const struct sim_module_ops *m = s->pkt_owner[p->type];
		if (m && m->switch_rx) {
			m->switch_rx(s, sw, p);
			return;
		}
	}
	struct sim_rgroup *g = sim_route_group(sw, p->dst);
	if (!g) {
		sw->drops_queue++;
		sim_pkt_free(s, p);
		return;
	}
	const uint16_t *cand = &sw->gports[g->off];
	uint16_t choice = (s->hk.route && p->type == SIM_PKT_DATA) ? s->hk.route(s, sw, p, g, cand)
		: g->n == 1 ? cand[0] : cand[s->route->select(s, sw, p, g, cand, g->n)];
	struct sim_port *out = &sw->n.ports[choice];
	if (out->down) { /* routed onto a dead link (routes not yet recomputed) */
		sim_modules_pkt_drop(s, p, out, SIM_DROP_ROUTED_DOWN);
		out->drops++;
		sim_pkt_free(s, p);
		return;
	}
	if (p->type != SIM_PKT_DATA) {
		sim_pktq_push(&out->cq, p);
		sim_port_event(s, out, p, SIM_PEV_ENQUEUE);
		sim_port_kick(s, out);
		return;
	}
	if (s->hk.qdisc_enqueue) { /* a module's egress queues (traffic classes) */
		s->hk.qdisc_enqueue(s, sw, out, p);
		return;
	}
	struct sim_port *in = p->rx_port;
	uint32_t sz = p->size_bytes;
	if (c->pfc) {
		/* Lossless: admission by ingress accounting; only a headroom overflow drops. */
		if (in->in_bytes + sz > c->pfc_xoff_bytes + in->headroom_bytes) {
			sw->drops_headroom++;
			out->drops++;
			sim_port_event(s, out, p, SIM_PEV_DROP_HEADROOM);
			sim_pkt_free(s, p);
			return;
		}
	} else if (out->q_bytes + sz > c->buffer_bytes) {
		sw->drops_queue++;
		out->drops++;
		sim_port_event(s, out, p, SIM_PEV_DROP_QUEUE);
		sim_pkt_free(s, p);
		return;
	}
	if (c->shared_buffer_bytes && sw->shared_used + sz > c->shared_buffer_bytes) {
		sw->drops_shared++;
		out->drops++;
		sim_port_event(s, out, p, SIM_PEV_DROP_SHARED);
		sim_pkt_free(s, p);
		return;
	}
	if (c->pfc) {
		p->flags |= SIM_PKT_LOSSLESS;
		in->in_bytes += sz;
		if (!in->pause_sent && in->in_bytes >= c->pfc_xoff_bytes)
			pfc_send(s, in, true);
	} else {
		p->flags &= (uint8_t)~SIM_PKT_LOSSLESS;
	}
	ecn_on_enqueue(s, sw, out, p, out->q_bytes);
	sw->shared_used += sz;
	out->q_bytes += sz;
	if (out->q_bytes > out->q_max_bytes)
		out->q_max_bytes = out->q_bytes;
	sim_pktq_push(&out->q, p);
	sim_port_event(s, out, p, SIM_PEV_ENQUEUE);
	sim_port_kick(s, out);
}

/* ---- routing ops -------------------------------------------------------------------------- */
static inline uint64_t flow_hash(const struct sim_switch *sw, const struct sim_pkt *p)
{
	/* The 5-tuple of a RoCE flow is (src, dst, UDP source port = entropy); the salt keeps
	 * switches of one tier from making correlated choices (hash polarisation). */
	uint64_t k = ((uint64_t)p->src << 40) ^ ((uint64_t)p->dst << 16) ^ p->entropy;
	return sim_mix64(k ^ sw->salt);
}

static uint16_t ecmp_select(struct sim *s, struct sim_switch *sw, const struct sim_pkt *p,
			    struct sim_rgroup *g, const uint16_t *cand, unsigned n)
{
	return (uint16_t)(flow_hash(sw, p) % n);
}

/* Per-packet round robin ("spray"), what spraying switches do: each route group of a switch
 * (the hosts reached through one set of equal-cost ports) deals its next packet, whatever its
 * flow, to the next port. Flows interleave at every switch, so one flow's packets are split
 * evenly only on average and the queues its packets meet vary from window to window: the
 * queueing a real sprayed fabric shows, which the idealised splitter below removes. */
static uint16_t spray_select(struct sim *s, struct sim_switch *sw, const struct sim_pkt *p,
			     struct sim_rgroup *g, const uint16_t *cand, unsigned n)
{
	uint16_t i = (uint16_t)(g->rr % n);
	g->rr = (uint16_t)(i + 1u == n ? 0u : i + 1u);
	return i;
}

/* Idealised spraying ("spray_ideal"): a bound, not a switch. Each flow deals its packets over
 * the n equal-cost ports of a switch in rounds: within a round every port gets exactly one packet, always in the same
 * rotation, starting at an offset drawn from a hash of the flow and the switch's salt. No
 * per-flow state: the packet carries a counter (its emission number at the sender). A switch
 * with n choices uses counter mod n to pick the port and passes counter / n on, so the packets
 * of a flow that reach the next switch through any one port are numbered consecutively there
 * again (one mixed-radix digit per hop) and are dealt evenly over its ports in turn. Every flow
 * is thus split exactly evenly at every tier and over every short window, which keeps the
 * downlinks that merge sprayed traffic (no choice there) smooth.
 * Measured on the k=16 fat tree permutation of 2 MB flows (bench/sim_bench.sh): this stays
 * within 4.5% of ideal for every flow; a random port per packet ("spray_random") is ~20% off,
 * a per-flow table with a fresh random offset per round ~6% (its queues are random walks
 * within each round, and flows colliding in the table share a round). */
static uint16_t spray_ideal_select(struct sim *s, struct sim_switch *sw, const struct sim_pkt *p,
			     struct sim_rgroup *g, const uint16_t *cand, unsigned n)
{
	struct sim_pkt *q = (struct sim_pkt *)p; /* the counter is consumed hop by hop */
	uint32_t ctr = q->spray_ctr;
	q->spray_ctr = ctr / n;
	return (uint16_t)((flow_hash(sw, p) % n + ctr % n) % n);
}

static uint16_t spray_random_select(struct sim *s, struct sim_switch *sw, const struct sim_pkt *p,
				    struct sim_rgroup *g, const uint16_t *cand, unsigned n)
{
	return (uint16_t)util_rng_below(&sw->rng, n);
}

/* Least-occupied candidate; ties broken from a random starting point so equal ports share. */
static uint16_t least_loaded(struct sim *s, struct sim_switch *sw, const uint16_t *cand, unsigned n)
{
	unsigned start = (unsigned)util_rng_below(&sw->rng, n), best = start;
	uint64_t bq = sw->n.ports[cand[start]].q_bytes;
	for (unsigned i = 1; i < n && bq; i++) {
		unsigned j = start + i < n ? start + i : start + i - n;
		uint64_t q = sw->n.ports[cand[j]].q_bytes;
		if (q < bq) {
			bq = q;
			best = j;
		}
	}
	return (uint16_t)best;
}

/* Adaptive per packet: the least-occupied local port among those this flow has not used yet
 * in the current round (a round = one packet per port). Pure least-occupied choice herds
 * a flow onto a few ports and leaves the downstream tiers, which have no choice, unevenly
 * loaded; the round keeps every flow split evenly while local queues steer each packet. */
static uint16_t adaptive_select(struct sim *s, struct sim_switch *sw, const struct sim_pkt *p,
				struct sim_rgroup *g, const uint16_t *cand, unsigned n)
{
	if (n > 64)
		return least_loaded(s, sw, cand, n);
	uint64_t *used = &sw->spray_used[flow_hash(sw, p) & (SIM_SPRAY_TABLE - 1)];
	uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
	if ((*used & all) == all)
		*used = 0;
	unsigned start = (unsigned)util_rng_below(&sw->rng, n), best = n;
	uint64_t bq = UINT64_MAX;
	for (unsigned i = 0; i < n; i++) {
		unsigned j = start + i < n ? start + i : start + i - n;
		if (*used & (1ull << j))
			continue;
		uint64_t q = sw->n.ports[cand[j]].q_bytes;
		if (q < bq) {
			bq = q;
			best = j;
			if (!q)
				break;
		}
	}
	*used |= 1ull << best;
	return (uint16_t)best;
}

/* Flowlets: a flow keeps its port until it pauses longer than flowlet_gap_us, then moves to
 * the least-occupied port. The table is direct-mapped (4096 entries); colliding flows share
 * an entry, which only makes them switch ports together. */
static uint16_t flowlet_select(struct sim *s, struct sim_switch *sw, const struct sim_pkt *p,
			       struct sim_rgroup *g, const uint16_t *cand, unsigned n)
{
	struct sim_flowlet *fl = &sw->flowlets[flow_hash(sw, p) & 4095];
	if (!fl->valid || fl->choice >= n || s->now - fl->last_ps > s->flowlet_gap_ps) {
		fl->choice = least_loaded(s, sw, cand, n);
		fl->valid = 1;
	}
	fl->last_ps = s->now;
	return fl->choice;
}

const struct sim_route_ops sim_route_ecmp = { "ecmp", ecmp_select };
const struct sim_route_ops sim_route_spray = { "spray", spray_select };
const struct sim_route_ops sim_route_spray_ideal = { "spray_ideal", spray_ideal_select };
const struct sim_route_ops sim_route_adaptive = { "adaptive", adaptive_select };
const struct sim_route_ops sim_route_flowlet = { "flowlet", flowlet_select };
const struct sim_route_ops sim_route_spray_random = { "spray_random", spray_random_select };
