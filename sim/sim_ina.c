/* sim/sim_ina.c: in-network aggregation in the packet simulator. AllReduce jobs whose trees of
 * INC switches run lib/agg (the engine inca-switch runs) on real payload bytes: members send
 * chunks (P-BM = own bit), leaves aggregate and send up with P-BM = A-BM, the root disseminates
 * by BIER and switches replicate by their BIFT. Jobs that get no switch slots, or all jobs in
 * mode "ring", run ring AllReduce over the ordinary transport instead (the baseline). */
/*
 * Model (docs/sim.md "In-network aggregation"):
 * - Tree: members' edge switches are the leaves; each level either finds one switch adjacent
 *   to all nodes of the level (the root) or moves every node to one of its up-neighbours
 *   (chosen by job id), so on a fat tree a job inside one ToR is single level, one pod has an
 *   aggregation switch as root and anything wider a core. Every tree edge is one link, so INA
 *   packets are never routed: a node puts them on the port toward the tree neighbour.
 * - A simulated packet stands for an MTU of data (wire size header_bytes + INCA header + BSL/8
 *   + chunk) but carries only `ina.elems` real elements, which the engine reduces; members
 *   check every result against a reference sum computed at creation.
 * - Window: job_slots chunks per member (chunk g uses slot g mod W, round g div W; g + W is
 *   sent when g's result arrived), started strictly in g order. Loss recovery as libinca and
 *   inca-switch do it (docs/protocol.md "Repair notices"): resend on a switch's notice, pull a
 *   chunk's timer in when a later chunk's result arrives, retransmission after libinca's RTO
 *   (SRTT + 4 RTTVAR, at least 2 ms, doubling) as the last resort, all with the RETX flag;
 *   the engine's seen-bitmaps make duplicates harmless.
 * - Ring jobs: 2(n-1) steps of S/n; each rank owns two flow objects (even / odd steps) that
 *   are reset and reused, so a 1024-rank ring needs 2048 flows, not 2 million.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_ina_int.h"

/* ---- payload pool ----------------------------------------------------------------------- */
static struct ina_buf *buf_at(struct sim_ina *a, uint32_t i)
{
	return (struct ina_buf *)(void *)(a->pool + (size_t)i * a->rec_bytes);
}
static uint8_t *buf_bits(struct sim_ina *a, uint32_t i) { return (uint8_t *)(buf_at(a, i) + 1); }
static uint8_t *buf_data(struct sim_ina *a, uint32_t i) { return buf_bits(a, i) + a->bits_max; }

static uint32_t buf_alloc(struct sim_ina *a)
{
	if (a->free_rec) {
		uint32_t i = a->free_rec;
		a->free_rec = buf_at(a, i)->next_free;
		return i;
	}
	if (a->nrec >= a->caprec) {
		uint32_t cap = a->caprec ? a->caprec * 2 : 1024;
		uint8_t *p = realloc(a->pool, (size_t)cap * a->rec_bytes);
		if (!p)
			return 0;
		a->pool = p;
		a->caprec = cap;
	}
	return a->nrec++;
}

static void buf_free(struct sim_ina *a, uint32_t i)
{
	if (!i)
		return;
	buf_at(a, i)->next_free = a->free_rec;
	a->free_rec = i;
}

/* ---- element values ------------------------------------------------------------------- */
static void ina_fill(const struct sim *s, uint32_t job, uint32_t r, uint32_t g, uint8_t *out)
{
	for (uint32_t e = 0; e < s->cfg.ina_elems; e++) {
		int32_t v = sim_ina_val(s, job, r, g, e);
		if (s->cfg.ina_dtype == SIM_INA_FP32) {
			float f = (float)v;
			memcpy(out + 4 * e, &f, 4);
		} else {
			memcpy(out + 4 * e, &v, 4);
		}
	}
}

/* ---- sending --------------------------------------------------------------------------- */
/* A resend (front) goes out next, ahead of the chunks queued behind the window: a repair
 * that waited for the whole queue would stall every member's window for that long. */
static void host_send(struct sim *s, struct sim_host *h, struct sim_pkt *p, bool front)
{
	struct sim_pktq *q = &h->port.cq;
	if (front && q->head) {
		p->next = q->head;
		q->head = p;
		q->n++;
	} else {
		sim_pktq_push(q, p);
	}
	sim_port_kick(s, &h->port);
}

static void switch_send(struct sim *s, struct sim_switch *sw, struct sim_port *out, struct sim_pkt *p)
{
	struct sim_ina *a = ina_of(s);
	if (out->q_bytes + p->size_bytes > s->cfg.buffer_bytes) { /* lossy admission */
		sw->drops_queue++;
		out->drops++;
		a->drops_queue++;
		buf_free(a, p->psn);
		sim_pkt_free(s, p);
		return;
	}
	p->flags = 0;
	sw->shared_used += p->size_bytes;
	out->q_bytes += p->size_bytes;
	if (out->q_bytes > out->q_max_bytes)
		out->q_max_bytes = out->q_bytes;
	sim_pktq_push(&out->q, p);
	sim_port_kick(s, out);
}

/* libinca's RTO (docs/protocol.md "Loss and retransmission", util/rtt.h): the initial RTO
 * before the first sample, then SRTT + 4 RTTVAR but at least the floor (2 ms by default),
 * doubled per retry up to the cap. A fixed RTO of a few hundred us fires for chunks merely
 * queued at a slow engine, and the duplicates take the engine's time too. */
static sim_time_ps rto_of(const struct sim_ina *a, const struct ina_member *m, uint32_t tries)
{
	sim_time_ps rto = util_rtt_rto(&m->rtt, a->rto_init_ps, a->rto_floor_ps, a->rto_max_ps);
	for (uint32_t k = 0; k < tries && rto < a->rto_max_ps; k++)
		rto *= 2;
	return rto < a->rto_max_ps ? rto : a->rto_max_ps;
}

/* Smoothed RTT, 0 before the first sample. */
static inline sim_time_ps srtt_of(const struct ina_member *m)
{
	return m->rtt.have ? m->rtt.srtt : 0;
}

static void member_send(struct sim *s, struct ina_member *m, uint32_t g, bool retx)
{
	struct sim_ina *a = ina_of(s);
	struct ina_job *j = &a->jobs[m->job];
	uint32_t b = buf_alloc(a);
	struct sim_pkt *p = b ? sim_pkt_alloc(s) : NULL;
	struct ina_wslot *w = &m->w[g % s->cfg.ina_job_slots];
	/* The timer runs from the estimated departure: up to a window of chunks may be queued in
	 * the NIC ahead of this one, which would otherwise need an RTO larger than the window. */
	struct sim_port *nic = &s->hosts[m->host].port;
	sim_time_ps dep = (nic->busy_until > s->now ? nic->busy_until : s->now) +
			  (retx ? 0 : (sim_time_ps)nic->cq.n *
					      sim_time_serialize(sim_ina_wire_size(s, j, g, true), nic->rate_bps));
	if (p) {
		struct ina_buf *ib = buf_at(a, b);
		ib->job = m->job;
		ib->g = g;
		ib->bfr_id = (uint16_t)(m->rank + 1);
		ib->count = (uint16_t)s->cfg.ina_elems;
		ib->flags = retx ? WIRE_F_RETX : 0;
		memset(buf_bits(a, b), 0, j->bsl_bits / 8);
		wire_bier_set(buf_bits(a, b), j->bsl_bits / 8, m->rank + 1);
		ina_fill(s, m->job, m->rank, g, buf_data(a, b));
		p->type = SIM_PKT_INA_DATA;
		p->flags = 0;
		p->flow = m->job;
		p->psn = b;
		p->src = m->host;
		p->dst = m->edge_node;
		p->size_bytes = sim_ina_wire_size(s, j, g, true);
		a->pkts++;
		host_send(s, &s->hosts[m->host], p, retx);
	} else {
		buf_free(a, b); /* out of memory: behaves like a loss, the timer resends */
	}
	if (retx) {
		j->retx++;
		s->retx_pkts++;
	}
	w->g = g;
	w->busy = true;
	w->gap = false;
	if (sim_ev_pending(&w->ev))
		sim_cancel(s, &w->ev);
	/* Jitter (up to one more RTO): after a loss above a leaf every member below it times
	 * out; the first retransmission repairs the chunk for the whole sub-tree (the engine
	 * re-sends the aggregate and the parent its result to all of it), so spreading the
	 * timers avoids a storm of duplicate results. */
	sim_time_ps rto = rto_of(a, m, w->tries), srtt = srtt_of(m);
	w->dep = dep;
	sim_time_ps at = dep + rto + (sim_time_ps)(util_rng_double(&a->jrng) * (double)rto);
	/* Tail probe: no chunk follows the last one, so no later result can reveal that its
	 * result was lost; resend it after two SRTTs instead of a whole RTO. */
	if (!retx && g + 1 == j->nchunks && srtt && dep + 2 * srtt < at) {
		at = dep + 2 * srtt;
		w->gap = true;
	}
	sim_schedule(s, &w->ev, at);
}

/* Start chunks in g order while the next one's window position is free (chunk g - W was
 * answered), as libinca does: every member then sends every switch its chunks in g order, so
 * a switch that completes a chunk knows any earlier chunk's missing contributions are lost. */
static void member_start(struct sim *s, struct ina_member *m)
{
	const struct ina_job *j = &ina_of(s)->jobs[m->job];
	uint32_t W = s->cfg.ina_job_slots;
	while (m->next < j->nchunks && !m->w[m->next % W].busy)
		member_send(s, m, m->next++, false);
}

/* Repair notice for chunk g: the switch misses our contribution. Resend it at once, unless it
 * was resent within the last half round trip (the notice crossed that resend; a chunk sent
 * once is certainly lost: the switch saw a later chunk of ours first). If our window
 * position of g still holds an older chunk, we never sent g because that chunk's result did
 * not reach us: resend the older chunk (the switch answers a duplicate of a complete round
 * with its result). */
static void member_nack(struct sim *s, struct ina_member *m, uint32_t g)
{
	struct ina_wslot *w = &m->w[g % s->cfg.ina_job_slots];
	if (!w->busy || w->g > g)
		return;
	if (w->g == g && w->tries && s->now < w->dep + srtt_of(m) / 2)
		return;
	ina_of(s)->nack_resends++;
	w->tries++;
	member_send(s, m, w->g, true);
}

/* Loss detection on results (RACK-like): results leave the tree in completion order over
 * FIFO links, so when a chunk sent once at `dep` is answered, a chunk whose last send left
 * before it and is still unanswered lost its contribution or its result, or waits for a
 * repair elsewhere, which the switches' notices bring within about a round trip. So its timer
 * is pulled in to one smoothed RTT from now: if the result is still missing then, our result
 * was lost on the last hop (which no switch can see) and the resend gets it re-sent. */
static void member_gaps(struct sim *s, struct ina_member *m, sim_time_ps dep)
{
	uint32_t W = s->cfg.ina_job_slots;
	sim_time_ps at = s->now + (m->rtt.have ? m->rtt.srtt : ina_of(s)->rto_init_ps);
	for (uint32_t k = 0; k < W; k++) {
		struct ina_wslot *x = &m->w[k];
		if (!x->busy || x->gap || x->dep >= dep || (sim_ev_pending(&x->ev) && x->ev.t <= at))
			continue;
		if (sim_ev_pending(&x->ev))
			sim_cancel(s, &x->ev);
		x->gap = true;
		sim_schedule(s, &x->ev, at);
	}
}

void sim_ina_wslot_timeout(struct sim *s, struct sim_event *ev)
{
	struct ina_wslot *w = SIM_CONTAINER_OF(ev, struct ina_wslot, ev);
	struct ina_member *m = &ina_of(s)->mem[w->member];
	if (!w->busy)
		return;
	if (w->gap) {
		w->gap = false;
		member_send(s, m, w->g, true);
		return;
	}
	ina_of(s)->jobs[m->job].timeouts++;
	s->timeouts++;
	w->tries++;
	member_send(s, m, w->g, true);
}

/* ---- ring jobs ------------------------------------------------------------------------- */
static void ring_reset(struct sim_flow *f)
{
	struct sim_flow keep = *f;
	memset(f, 0, sizeof(*f));
	f->idx = keep.idx;
	f->user_id = keep.user_id;
	f->src = keep.src;
	f->dst = keep.dst;
	f->size_bytes = keep.size_bytes;
	f->npkts = keep.npkts;
	f->entropy = keep.entropy;
	f->ideal_ps = keep.ideal_ps;
	f->trig_start = keep.trig_start;
	f->state = SIM_FLOW_WAIT;
	sim_ev_init(&f->start_ev, sim_flow_start_ev);
	sim_ev_init(&f->rto_ev, NULL);
	sim_ev_init(&f->rate_ev, NULL);
}

/* Start the next steps of rank i whose input has arrived and whose flow object is free. */
static void ring_try_start(struct sim *s, struct ina_job *j, uint32_t i)
{
	while (j->next_step[i] < j->steps) {
		uint32_t k = j->next_step[i];
		if (k > 0 && j->recvd[i] < k)
			return;
		uint32_t o = 2 * i + (k & 1);
		struct sim_flow *f = &s->flows[j->flow0 + o];
		if (j->obj_step[o] != INA_NONE && f->state != SIM_FLOW_DONE)
			return; /* object still busy with step k - 2 */
		if (j->obj_step[o] != INA_NONE)
			ring_reset(f);
		j->obj_step[o] = k;
		j->next_step[i]++;
		sim_schedule(s, &f->start_ev, s->now);
	}
}

static struct ina_job *ring_job_of(struct sim *s, const struct sim_flow *f, uint32_t *obj)
{
	struct sim_ina *a = ina_of(s);
	if (f->idx < a->ring_lo || f->idx >= a->ring_hi)
		return NULL;
	for (uint32_t x = 0; x < a->njobs; x++) {
		struct ina_job *j = &a->jobs[x];
		if (!j->inc && f->idx >= j->flow0 && f->idx < j->flow0 + j->nobj) {
			*obj = f->idx - j->flow0;
			return j;
		}
	}
	return NULL;
}

static void job_finish(struct sim *s, struct ina_job *j)
{
	j->finished = true;
	j->finish_ps = s->now;
	ina_of(s)->jobs_done++;
}

void sim_ina_flow_recv_done(struct sim *s, struct sim_flow *f)
{
	uint32_t o;
	struct ina_job *j = ring_job_of(s, f, &o);
	if (!j)
		return;
	if (j->dep_left) { /* a schedule: release the transfers that waited for this one */
		for (uint32_t k = j->succ_off[o]; k < j->succ_off[o + 1]; k++)
			if (--j->dep_left[j->succ[k]] == 0)
				sim_schedule(s, &s->flows[j->flow0 + j->succ[k]].start_ev, s->now);
		if (++j->recv_count == j->nobj)
			job_finish(s, j);
		return;
	}
	uint32_t i = o / 2, nx = (i + 1) % j->n;
	j->recvd[nx]++;
	if (j->recvd[nx] == j->steps && ++j->ranks_done == j->n)
		job_finish(s, j);
	ring_try_start(s, j, nx);
}

void sim_ina_flow_done(struct sim *s, struct sim_flow *f)
{
	uint32_t o;
	struct ina_job *j = ring_job_of(s, f, &o);
	if (!j)
		return;
	ina_of(s)->ring_completions++;
	if (!j->dep_left)
		ring_try_start(s, j, o / 2);
}

/* ---- job start --------------------------------------------------------------------------- */
void sim_ina_job_start(struct sim *s, struct sim_event *ev)
{
	struct ina_job *j = SIM_CONTAINER_OF(ev, struct ina_job, start_ev);
	j->start_ps = s->now;
	if (j->dep_left) {
		for (uint32_t t = 0; t < j->nobj; t++)
			if (!j->dep_left[t])
				sim_schedule(s, &s->flows[j->flow0 + t].start_ev, s->now);
		return;
	}
	if (!j->inc) {
		for (uint32_t i = 0; i < j->n; i++)
			ring_try_start(s, j, i);
		return;
	}
	for (uint32_t r = 0; r < j->n; r++)
		member_start(s, &ina_of(s)->mem[j->member0 + r]);
}

/* ---- receive paths --------------------------------------------------------------------- */
static bool lost(struct sim *s)
{
	struct sim_ina *a = ina_of(s);
	if (s->cfg.ina_loss > 0 && util_rng_double(&a->rng) < s->cfg.ina_loss) {
		a->lost_pkts++;
		return true;
	}
	return false;
}

void sim_ina_host_rx(struct sim *s, struct sim_host *h, struct sim_pkt *p)
{
	struct sim_ina *a = ina_of(s);
	uint32_t b = p->psn;
	uint32_t mi = a->member_of_host[h->n.id];
	if (lost(s) || !mi || p->type != SIM_PKT_INA_RESULT)
		goto out;
	struct ina_member *m = &a->mem[mi - 1];
	struct ina_buf *ib = buf_at(a, b);
	struct ina_job *j = &a->jobs[m->job];
	uint32_t g = ib->g, W = s->cfg.ina_job_slots;
	if (ib->job != m->job || g >= j->nchunks)
		goto out;
	if (ib->flags & WIRE_F_NACK) {
		member_nack(s, m, g);
		goto out;
	}
	if (m->got[g >> 3] & (1u << (g & 7))) {
		j->dups++;
		goto out;
	}
	/* exactness: the engine's result against the reference */
	const uint8_t *want = j->expect + (size_t)g * a->data_bytes, *got = buf_data(a, b);
	bool ok = ib->count == s->cfg.ina_elems;
	for (uint32_t e = 0; ok && e < s->cfg.ina_elems; e++) {
		if (s->cfg.ina_dtype == SIM_INA_FP32) {
			float x, y;
			memcpy(&x, got + 4 * e, 4);
			memcpy(&y, want + 4 * e, 4);
			ok = x == y;
		} else {
			ok = !memcmp(got + 4 * e, want + 4 * e, 4);
		}
	}
	if (ok)
		j->results_ok++;
	else
		j->results_bad++;
	m->got[g >> 3] |= (uint8_t)(1u << (g & 7));
	m->ndone++;
	struct ina_wslot *w = &m->w[g % W];
	if (w->busy && w->g == g) {
		/* Karn: only chunks sent once, and completed without anyone's resend (no RETX on
		 * the result), give RTT samples; the RTO follows queueing delay */
		if (!w->tries && s->now > w->dep) {
			if (!(ib->flags & WIRE_F_RETX)) {
				util_rtt_sample(&m->rtt, s->now - w->dep);
			}
			member_gaps(s, m, w->dep);
		}
		w->busy = false;
		w->gap = false;
		w->tries = 0;
		if (sim_ev_pending(&w->ev))
			sim_cancel(s, &w->ev);
	}
	buf_free(a, b);
	b = 0;
	member_start(s, m);
	if (m->ndone == j->nchunks) {
		m->done_ps = s->now;
		if (++j->members_done == j->n)
			job_finish(s, j);
	}
out:
	buf_free(a, b);
	sim_pkt_free(s, p);
}

static struct ina_tn *tn_at(struct sim_ina *a, uint32_t sw, uint32_t job)
{
	for (uint32_t t = a->sw_head[sw]; t != INA_NONE; t = a->tn[t].next_at_sw)
		if (a->tn[t].job == job)
			return &a->tn[t];
	return NULL;
}

/* The engine of switch sw takes input p (its tree node tn): lib/agg decides, and what it sends
 * goes out at once. */
static void engine_input(struct sim *s, struct sim_switch *sw, struct ina_tn *tn, struct sim_pkt *p)
{
	struct sim_ina *a = ina_of(s);
	uint32_t b = p->psn;
	struct ina_buf *ib = buf_at(a, b);
	struct ina_job *j = &a->jobs[ib->job];
	uint32_t W = s->cfg.ina_job_slots;
	struct wire_pkt wp;
	memset(&wp, 0, sizeof(wp));
	wp.bth.opcode = WIRE_OPCODE_UC_WRITE_ONLY_IMM;
	wp.bth.pkey = WIRE_PKEY_DEFAULT;
	wp.reth.va = (uint64_t)ib->g * s->cfg.mtu_bytes;
	wp.reth.rkey = 0x1000u + ib->job;
	wp.imm = ib->g;
	wp.inca.version = WIRE_INCA_VERSION;
	wp.inca.flags = ib->flags;
	wp.inca.coll = WIRE_COLL_ALLREDUCE;
	wp.inca.dtype = s->cfg.ina_dtype == SIM_INA_FP32 ? INCA_FP32 : INCA_INT32;
	wp.inca.op = INCA_SUM;
	wp.inca.tree_id = (uint16_t)(ib->job + 1);
	wp.inca.slot = (uint16_t)(ib->g % W);
	wp.inca.round = ib->g / W;
	wp.inca.bfr_id = ib->bfr_id;
	wp.inca.bsl_code = wire_bsl_code(j->bsl_bits);
	wp.inca.count = ib->count;
	wp.inca.bits = buf_bits(a, b);
	wp.data = ib->count ? buf_data(a, b) : NULL;
	wp.data_len = (uint32_t)ib->count * 4;
	size_t n = 0;
	agg_tree_clock(tn->tree, (uint64_t)(s->now / 1000));
	enum agg_verdict v = agg_tree_input(tn->tree, &wp, p->rx_port->idx, a->sends, a->max_sends, &n);
	a->verdicts[v < AGG_VERDICT_COUNT ? v : AGG_DROP_TREE]++;
	/* The sends point into engine memory (valid until the next input on this tree): copy
	 * each into a pool record before anything else runs. */
	buf_free(a, b);
	sim_pkt_free(s, p);
	for (size_t i = 0; i < n; i++) {
		const struct agg_send *sd = &a->sends[i];
		uint32_t nb = buf_alloc(a);
		struct sim_pkt *q = nb ? sim_pkt_alloc(s) : NULL;
		if (!q || sd->nbr >= sw->n.nports) {
			buf_free(a, nb);
			if (q)
				sim_pkt_free(s, q);
			continue;
		}
		struct ina_buf *ob = buf_at(a, nb);
		ob->job = j->id;
		ob->g = sd->pkt.imm;
		ob->bfr_id = sd->pkt.inca.bfr_id;
		ob->count = sd->pkt.inca.count;
		ob->flags = sd->pkt.inca.flags;
		memcpy(buf_bits(a, nb), sd->pkt.inca.bits, j->bsl_bits / 8);
		if (sd->pkt.data_len)
			memcpy(buf_data(a, nb), sd->pkt.data, sd->pkt.data_len);
		struct sim_port *out = &sw->n.ports[sd->nbr];
		/* downward: results and repair notices */
		q->type = (ob->flags & (WIRE_F_RESULT | WIRE_F_NACK)) ? SIM_PKT_INA_RESULT
								       : SIM_PKT_INA_DATA;
		q->flow = j->id;
		q->psn = nb;
		q->src = sw->n.id;
		q->dst = out->peer->node->id;
		q->size_bytes = sim_ina_wire_size(s, j, ob->g, sd->pkt.data_len > 0);
		a->pkts++;
		switch_send(s, sw, out, q);
	}
}

static void engine_done_ev(struct sim *s, struct sim_event *ev)
{
	struct sim_pkt *p = SIM_CONTAINER_OF(ev, struct sim_pkt, ev);
	struct sim_switch *sw = sim_node_sw(p->rx_port->node);
	struct sim_ina *a = ina_of(s);
	uint32_t x = sw->n.id - s->nhosts;
	a->eng_backlog[x] -= p->size_bytes;
	engine_input(s, sw, tn_at(a, x, buf_at(a, p->psn)->job), p);
}

/* An INA packet reaches a switch. Its engine is one FIFO server: an input waits for the inputs
 * ahead of it, takes switch_ns_per_pkt, and its outputs leave switch_latency_ns later. The
 * backlog shares the lossy admission limit of a port (switch.buffer_bytes): an engine slower
 * than its links drops instead of queueing without bound, as a switch's ingress would. */
void sim_ina_switch_rx(struct sim *s, struct sim_switch *sw, struct sim_pkt *p)
{
	struct sim_ina *a = ina_of(s);
	uint32_t b = p->psn, x = sw->n.id - s->nhosts;
	struct ina_tn *tn = lost(s) ? NULL : tn_at(a, x, buf_at(a, b)->job);
	if (tn && a->eng_backlog && a->eng_backlog[x] + p->size_bytes > s->cfg.buffer_bytes) {
		sw->drops_queue++;
		a->drops_queue++;
		a->eng_drops++;
		tn = NULL;
	}
	if (!tn) {
		buf_free(a, b);
		sim_pkt_free(s, p);
		return;
	}
	if (!a->eng_backlog) { /* an ideal engine: no service time, no latency */
		engine_input(s, sw, tn, p);
		return;
	}
	sim_time_ps start = a->eng_free[x] > s->now ? a->eng_free[x] : s->now;
	a->eng_free[x] = start + a->eng_ps;
	a->eng_busy[x] += a->eng_ps;
	a->eng_pkts++;
	a->eng_backlog[x] += p->size_bytes;
	if (a->eng_backlog[x] > a->eng_max_backlog)
		a->eng_max_backlog = a->eng_backlog[x];
	sim_ev_init(&p->ev, engine_done_ev);
	sim_schedule_fixed(s, &p->ev, a->eng_free[x] + a->eng_lat_ps);
}
