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
 *   chunk's timer in when a later chunk's result arrives, retransmission after rto_us
 *   (doubling, at most 8x) as the last resort, all with the RETX flag; the engine's
 *   seen-bitmaps make duplicates harmless.
 * - Ring jobs: 2(n-1) steps of S/n; each rank owns two flow objects (even / odd steps) that
 *   are reset and reused, so a 1024-rank ring needs 2048 flows, not 2 million.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "sim_int.h"

#define INA_NONE UINT32_MAX
#define INA_MAX_LEVELS 8
#define INA_RING_TRIG UINT32_MAX /* trig_start of ring objects: never started by a trigger */

struct ina_tn {              /* one switch of one job's tree */
	uint32_t sw, job;
	uint32_t parent;         /* tn index, INA_NONE at the root */
	uint16_t parent_port;
	uint32_t next_at_sw;     /* next tn at the same switch */
	uint8_t *abm;
	struct agg_bift_entry *bift;
	uint32_t nbift, capbift;
	struct agg_tree *tree;
};

struct ina_wslot {           /* one outstanding chunk of a member (window position) */
	struct sim_event ev;     /* retransmission timer */
	uint32_t member, g, tries;
	bool busy;
	bool gap;                /* the timer is a loss-detection deadline, not the RTO */
	sim_time_ps dep;         /* estimated departure of the last transmission */
};

struct ina_member {
	uint32_t job, rank, host, edge_node;
	uint32_t ndone;
	uint32_t next;           /* next chunk to start: chunks start strictly in g order */
	uint8_t *got;            /* bitmap over chunks */
	struct ina_wslot *w;     /* job_slots entries */
	sim_time_ps srtt;        /* smoothed round trip of chunks sent once (0 = no sample yet) */
	sim_time_ps done_ps;
};

struct ina_job {
	uint32_t id, n;
	uint32_t *hosts;         /* rank -> host */
	bool inc, finished;
	uint32_t nchunks, levels, ntn, root_tn;
	unsigned bsl_bits;
	uint64_t size_bytes;
	uint32_t *tns;           /* tn indices of the tree */
	uint32_t member0;        /* first member index (INC) */
	uint32_t members_done;
	uint8_t *expect;         /* reference results, nchunks * data_bytes */
	sim_time_ps start_ps, finish_ps, bound_ps;
	struct sim_event start_ev;
	uint64_t results_ok, results_bad, dups, retx, timeouts;
	/* ring */
	uint32_t flow0, steps;   /* objects flow0 + 2*rank + (step & 1) */
	uint32_t *next_step, *recvd, *obj_step; /* per rank; obj_step per object */
	uint32_t ranks_done;
};

struct ina_buf {             /* payload of an INA packet in flight (index in the pool) */
	uint32_t job, g, next_free;
	uint16_t bfr_id, count;
	uint8_t flags;
};

struct sim_ina {
	struct ina_job *jobs;
	uint32_t njobs, jobs_done;
	struct ina_tn *tn;
	uint32_t ntn, captn;
	uint32_t *sw_head;       /* per switch: first tn, INA_NONE */
	uint32_t *sw_used;       /* slots allocated per switch */
	struct ina_member *mem;
	uint32_t nmem;
	uint32_t *member_of_host; /* member index + 1, 0 = none */
	/* payload pool */
	uint8_t *pool;
	size_t rec_bytes, bits_max;
	uint32_t nrec, caprec, free_rec;
	uint32_t data_bytes;     /* elems * 4 */
	struct agg_send *sends;
	size_t max_sends;
	struct util_rng rng;     /* loss */
	struct util_rng jrng;    /* retransmission timer jitter */
	uint32_t ring_lo, ring_hi; /* flow index range of ring objects */
	uint64_t ring_completions;
	uint64_t verdicts[AGG_VERDICT_COUNT];
	uint64_t lost_pkts, drops_queue, pkts;
	uint64_t nack_resends;
};

/* ---- payload pool ----------------------------------------------------------------------- */
static inline struct sim_ina *ina_of(const struct sim *s)
{
	return s->mod[SIM_MOD_ina];
}

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
/* Contribution of rank r to element e of chunk g: an integer in [-1000, 1000], exact as int32
 * and as fp32 for any sum of up to 16 k ranks. */
static int32_t ina_val(const struct sim *s, uint32_t job, uint32_t r, uint32_t g, uint32_t e)
{
	uint64_t k = sim_mix64(s->cfg.seed ^ ((uint64_t)job << 48) ^ ((uint64_t)r << 24) ^ sim_mix64(((uint64_t)g << 16) | e));
	return (int32_t)(k % 2001) - 1000;
}

static void ina_fill(const struct sim *s, uint32_t job, uint32_t r, uint32_t g, uint8_t *out)
{
	for (uint32_t e = 0; e < s->cfg.ina_elems; e++) {
		int32_t v = ina_val(s, job, r, g, e);
		if (s->cfg.ina_dtype == SIM_INA_FP32) {
			float f = (float)v;
			memcpy(out + 4 * e, &f, 4);
		} else {
			memcpy(out + 4 * e, &v, 4);
		}
	}
}

static uint32_t chunk_len(const struct sim *s, const struct ina_job *j, uint32_t g)
{
	uint64_t off = (uint64_t)g * s->cfg.mtu_bytes, rest = j->size_bytes - off;
	return rest < s->cfg.mtu_bytes ? (uint32_t)rest : s->cfg.mtu_bytes;
}

static uint32_t wire_size(const struct sim *s, const struct ina_job *j, uint32_t g, bool data)
{
	return s->cfg.header_bytes + WIRE_INCA_FIXED_LEN + j->bsl_bits / 8 + (data ? chunk_len(s, j, g) : 0);
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

/* max(rto_us, 2 * smoothed RTT), doubled per retry up to 8x. */
static sim_time_ps rto_of(const struct sim *s, sim_time_ps srtt, uint32_t tries)
{
	sim_time_ps base = sim_time_from_us_f(s->cfg.ina_rto_us);
	if (2 * srtt > base)
		base = 2 * srtt;
	return base << (tries < 3 ? tries : 3);
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
					      sim_time_serialize(wire_size(s, j, g, true), nic->rate_bps));
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
		p->size_bytes = wire_size(s, j, g, true);
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
	sim_time_ps rto = rto_of(s, m->srtt, w->tries);
	w->dep = dep;
	sim_time_ps at = dep + rto + (sim_time_ps)(util_rng_double(&a->jrng) * (double)rto);
	/* Tail probe: no chunk follows the last one, so no later result can reveal that its
	 * result was lost; resend it after two SRTTs instead of a whole RTO. */
	if (!retx && g + 1 == j->nchunks && m->srtt && dep + 2 * m->srtt < at) {
		at = dep + 2 * m->srtt;
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
	if (w->g == g && w->tries && s->now < w->dep + m->srtt / 2)
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
	sim_time_ps at = s->now + (m->srtt ? m->srtt : sim_time_from_us_f(s->cfg.ina_rto_us));
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

static void wslot_timeout(struct sim *s, struct sim_event *ev)
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
		if (!j->inc && f->idx >= j->flow0 && f->idx < j->flow0 + 2 * j->n) {
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

static void ina_flow_recv_done(struct sim *s, struct sim_flow *f)
{
	uint32_t o;
	struct ina_job *j = ring_job_of(s, f, &o);
	if (!j)
		return;
	uint32_t i = o / 2, nx = (i + 1) % j->n;
	j->recvd[nx]++;
	if (j->recvd[nx] == j->steps && ++j->ranks_done == j->n)
		job_finish(s, j);
	ring_try_start(s, j, nx);
}

static void ina_flow_done(struct sim *s, struct sim_flow *f)
{
	uint32_t o;
	struct ina_job *j = ring_job_of(s, f, &o);
	if (!j)
		return;
	ina_of(s)->ring_completions++;
	ring_try_start(s, j, o / 2);
}

/* ---- job start --------------------------------------------------------------------------- */
static void job_start(struct sim *s, struct sim_event *ev)
{
	struct ina_job *j = SIM_CONTAINER_OF(ev, struct ina_job, start_ev);
	j->start_ps = s->now;
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

static void ina_host_rx(struct sim *s, struct sim_host *h, struct sim_pkt *p)
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
				sim_time_ps rtt = s->now - w->dep;
				m->srtt = m->srtt ? m->srtt - m->srtt / 8 + rtt / 8 : rtt;
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

static void ina_switch_rx(struct sim *s, struct sim_switch *sw, struct sim_pkt *p)
{
	struct sim_ina *a = ina_of(s);
	uint32_t b = p->psn;
	struct ina_buf *ib = buf_at(a, b);
	struct ina_tn *tn = lost(s) ? NULL : tn_at(a, sw->n.id - s->nhosts, ib->job);
	if (!tn) {
		buf_free(a, b);
		sim_pkt_free(s, p);
		return;
	}
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
		q->size_bytes = wire_size(s, j, ob->g, sd->pkt.data_len > 0);
		a->pkts++;
		switch_send(s, sw, out, q);
	}
}

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
	uint32_t full = wire_size(s, j, 0, true), lastsz = wire_size(s, j, j->nchunks - 1, true);
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
			sim_ev_init(&m->w[k].ev, wslot_timeout);
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
				acc[e] += ina_val(s, j->id, r, g, e);
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

static int job_setup_ring(struct sim *s, struct ina_job *j)
{
	uint64_t chunk = (j->size_bytes + j->n - 1) / j->n;
	j->steps = 2 * (j->n - 1);
	j->flow0 = s->nflows;
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
	    c->ina_loss >= 1 || c->ina_rto_us <= 0 || c->ina_rto_us > 1e9 || c->ina_start_us > 1e11) {
		sim_set_err(s, "ina: need 1 <= job_slots <= 4096, 1 <= elems <= 1024, loss < 1, 0 < rto_us <= 1e9");
		return -EINVAL;
	}
	struct sim_ina *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	s->mod[SIM_MOD_ina] = a;
	sim_rng_init(s, &a->rng, 6, 0);
	sim_rng_init(s, &a->jrng, 6, 1);
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
		sim_ev_init(&j->start_ev, job_start);
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
		rc = j->inc ? job_setup_inc(s, j) : job_setup_ring(s, j);
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
	free(a);
	s->mod[SIM_MOD_ina] = NULL;
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
			for (uint32_t o = 0; o < 2 * a->jobs[x].n; o++)
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
			r.job, r.inc ? "inc" : "ring", r.hosts, r.first_host, (unsigned long long)r.size_bytes,
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

static const char *const ina_mode_names[] = { "off", "inc", "ring", NULL };
static const char *const ina_place_names[] = { "contiguous", "strided", NULL };
static const char *const ina_dtype_names[] = { "int32", "fp32", NULL };
static const struct sim_param ina_params[] = {
	{ "ina", "mode", SIM_P_ENUM, SIM_PARAM_FIELD(ina_mode), "off", ina_mode_names, "off | inc (AllReduce jobs aggregated by lib/agg in switches; jobs without slots run ring) | ring (all jobs ring AllReduce: the baseline)" },
	{ "ina", "jobs", SIM_P_U32, SIM_PARAM_FIELD(ina_jobs), "1", NULL, "concurrent AllReduce jobs (admitted in id order)" },
	{ "ina", "job_hosts", SIM_P_U32, SIM_PARAM_FIELD(ina_job_hosts), "0", NULL, "ranks per job (0 = hosts / jobs), at most 4096" },
	{ "ina", "size_bytes", SIM_P_U64, SIM_PARAM_FIELD(ina_size_bytes), "1048576", NULL, "AllReduce buffer per rank (chunks of host.mtu_bytes)" },
	{ "ina", "placement", SIM_P_ENUM, SIM_PARAM_FIELD(ina_placement), "contiguous", ina_place_names, "contiguous (job j: hosts j*n..) | strided (rank r of job j: host r*jobs+j)" },
	{ "ina", "switch_slots", SIM_P_U32, SIM_PARAM_FIELD(ina_switch_slots), "256", NULL, "aggregation slots per switch, shared by the jobs whose trees use it" },
	{ "ina", "job_slots", SIM_P_U32, SIM_PARAM_FIELD(ina_job_slots), "64", NULL, "slots a job takes at every switch of its tree = chunks in flight per member" },
	{ "ina", "elems", SIM_P_U32, SIM_PARAM_FIELD(ina_elems), "16", NULL, "real elements carried and reduced per packet (the rest of the MTU is modelled only)" },
	{ "ina", "dtype", SIM_P_ENUM, SIM_PARAM_FIELD(ina_dtype), "int32", ina_dtype_names, "int32 | fp32 (values are small integers: sums are exact in any order)" },
	{ "ina", "loss", SIM_P_DBL, SIM_PARAM_FIELD(ina_loss), "0", NULL, "probability that an INA packet is lost on each link" },
	{ "ina", "rto_us", SIM_P_DBL, SIM_PARAM_FIELD(ina_rto_us), "100", NULL, "member retransmission timeout per chunk, from its estimated departure (doubles per retry, at most 8x)" },
	{ "ina", "start_us", SIM_P_DBL, SIM_PARAM_FIELD(ina_start_us), "0", NULL, "start time of every job" },
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
	.switch_rx = ina_switch_rx,
	.host_rx = ina_host_rx,
	.flow_recv_done = ina_flow_recv_done,
	.flow_done = ina_flow_done,
	.run_done = ina_run_done,
	.adjust_stats = ina_adjust_stats,
	.write_outputs = ina_write_outputs,
};
