/* sim/sim_host.c: hosts. A RoCE-like transport (messages cut into MTU packets; ACK/NACK;
 * go-back-N, selective repeat, or an "ideal" mode with no ACKs), DCQCN (notification point at
 * the receiver, reaction point at the sender, after Zhu et al., SIGCOMM'15) and the NIC
 * scheduler: when the NIC is free it takes the next eligible flow round-robin, so a host never
 * builds an unbounded local queue. Window-based congestion controls (DCTCP, HPCC) are modules
 * that the transport calls through the cc hooks of sim_module.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

static inline bool bit_get(const uint8_t *b, uint32_t i) { return b[i >> 3] & (1u << (i & 7)); }
static inline void bit_set(uint8_t *b, uint32_t i) { b[i >> 3] |= (uint8_t)(1u << (i & 7)); }

static void rto_fire(struct sim *s, struct sim_event *ev);
static void rate_timer_fire(struct sim *s, struct sim_event *ev);

/* ---- active list (flows with data to send) ----------------------------------------------- */
static void active_add(struct sim_host *h, struct sim_flow *f)
{
	if (f->in_active)
		return;
	f->in_active = 1;
	if (!h->active) {
		f->next_active = f->prev_active = f;
		h->active = f;
	} else { /* insert behind the round-robin head: served last in this round */
		struct sim_flow *head = h->active;
		f->next_active = head;
		f->prev_active = head->prev_active;
		head->prev_active->next_active = f;
		head->prev_active = f;
	}
	h->nactive++;
}

static void active_del(struct sim_host *h, struct sim_flow *f)
{
	if (!f->in_active)
		return;
	f->in_active = 0;
	if (f->next_active == f) {
		h->active = NULL;
	} else {
		f->prev_active->next_active = f->next_active;
		f->next_active->prev_active = f->prev_active;
		if (h->active == f)
			h->active = f->next_active;
	}
	h->nactive--;
}

static inline uint32_t payload_of(const struct sim *s, const struct sim_flow *f, uint32_t psn)
{
	uint32_t mtu = s->cfg.mtu_bytes;
	return psn + 1 < f->npkts ? mtu : (uint32_t)(f->size_bytes - (uint64_t)psn * mtu);
}

/* ---- DCQCN reaction point ---------------------------------------------------------------- */
static double rate_cap(const struct sim *s, const struct sim_flow *f)
{
	double cap = f->line_bps;
	if (s->cfg.rate_gbps > 0 && s->cfg.rate_gbps * 1e9 < cap)
		cap = s->cfg.rate_gbps * 1e9;
	return cap;
}

double sim_flow_rate_cap(const struct sim *s, const struct sim_flow *f)
{
	return rate_cap(s, f);
}

static void dcqcn_increase(struct sim *s, struct sim_flow *f)
{
	const struct sim_config *c = &s->cfg;
	uint32_t mx = f->t_count > f->bc_count ? f->t_count : f->bc_count;
	uint32_t mn = f->t_count < f->bc_count ? f->t_count : f->bc_count;
	double cap = rate_cap(s, f);
	if (mx < c->dcqcn_f) {
		/* fast recovery: move halfway back to the target */
	} else if (mn > c->dcqcn_f) {
		f->rt += (mn - c->dcqcn_f) * c->dcqcn_rhai_mbps * 1e6;
	} else {
		f->rt += c->dcqcn_rai_mbps * 1e6;
	}
	if (f->rt > cap)
		f->rt = cap;
	f->rc = (f->rt + f->rc) / 2;
	if (f->rc > cap)
		f->rc = cap;
}

static void dcqcn_cnp(struct sim *s, struct sim_flow *f)
{
	const struct sim_config *c = &s->cfg;
	sim_time_ps K = sim_time_from_us_f(c->dcqcn_alpha_timer_us);
	/* Alpha decays once per K without a CNP; apply the periods that passed since the last
	 * update lazily rather than running a timer per flow. */
	if (K && s->now > f->alpha_ps) {
		uint64_t periods = (s->now - f->alpha_ps) / K;
		if (periods)
			f->alpha *= pow(1 - c->dcqcn_g, (double)periods);
	}
	f->alpha = (1 - c->dcqcn_g) * f->alpha + c->dcqcn_g;
	f->alpha_ps = s->now;
	f->rt = f->rc;
	f->rc = f->rc * (1 - f->alpha / 2);
	if (f->rc < c->dcqcn_min_rate_mbps * 1e6)
		f->rc = c->dcqcn_min_rate_mbps * 1e6;
	f->t_count = f->bc_count = 0;
	f->bc_bytes = 0;
	sim_cancel(s, &f->rate_ev);
	sim_schedule(s, &f->rate_ev, s->now + sim_time_from_us_f(c->dcqcn_rate_timer_us));
}

static void rate_timer_fire(struct sim *s, struct sim_event *ev)
{
	struct sim_flow *f = SIM_CONTAINER_OF(ev, struct sim_flow, rate_ev);
	if (f->send_done)
		return;
	f->t_count++;
	dcqcn_increase(s, f);
	if (f->rc < rate_cap(s, f))
		sim_schedule(s, &f->rate_ev, s->now + sim_time_from_us_f(s->cfg.dcqcn_rate_timer_us));
}

/* ---- flow lifecycle ---------------------------------------------------------------------- */
void sim_flow_release(struct sim_flow *f)
{
	free(f->acked);
	free(f->rcvd);
	f->acked = f->rcvd = NULL;
}

static void flow_check_complete(struct sim *s, struct sim_flow *f)
{
	if (f->state == SIM_FLOW_DONE || !f->recv_done || !f->send_done)
		return;
	f->state = SIM_FLOW_DONE;
	s->flows_done++;
	sim_flow_release(f);
	sim_modules_flow_done(s, f); /* a module may reuse the flow: nothing touches f after */
}

void sim_flow_start(struct sim *s, struct sim_flow *f)
{
	if (f->state != SIM_FLOW_WAIT)
		return;
	const struct sim_config *c = &s->cfg;
	struct sim_host *h = &s->hosts[f->src];
	f->state = SIM_FLOW_ACTIVE;
	f->start_ps = s->now;
	s->flows_started++;
	if (c->transport == SIM_TRANSPORT_SR) {
		size_t nb = (f->npkts + 7) / 8;
		f->acked = calloc(nb, 1);
		f->rcvd = calloc(nb, 1);
		if (!f->acked || !f->rcvd) { /* cannot track it: fall back to go-back-N for this flow */
			sim_flow_release(f);
		}
	}
	sim_ev_init(&f->rto_ev, rto_fire);
	sim_ev_init(&f->rate_ev, rate_timer_fire);
	f->line_bps = (double)h->port.rate_bps;
	f->rc = f->rt = rate_cap(s, f);
	f->alpha = c->dcqcn_initial_alpha;
	f->alpha_ps = s->now;
	f->next_tx_ps = s->now;
	f->cwnd_bytes = 0;
	sim_modules_flow_start(s, f); /* a window-based cc sets its window and rate */
	active_add(h, f);
	sim_port_kick(s, &h->port);
}

void sim_flow_start_ev(struct sim *s, struct sim_event *ev)
{
	sim_flow_start(s, SIM_CONTAINER_OF(ev, struct sim_flow, start_ev));
}

static void sender_done(struct sim *s, struct sim_flow *f)
{
	if (f->send_done)
		return;
	f->send_done = true;
	f->sender_done_ps = s->now;
	sim_cancel(s, &f->rto_ev);
	sim_cancel(s, &f->rate_ev);
	active_del(&s->hosts[f->src], f);
	if (f->trig_send_done)
		sim_trigger_activate(s, f->trig_send_done);
	flow_check_complete(s, f);
}

/* ---- sending ----------------------------------------------------------------------------- */
static bool has_data(const struct sim *s, const struct sim_flow *f)
{
	return f->retx_mode || f->snd_nxt < f->npkts;
}

uint64_t sim_flow_window_bytes(const struct sim *s, const struct sim_flow *f)
{
	uint64_t w = s->cfg.max_inflight_bytes;
	return f->cwnd_bytes && (!w || f->cwnd_bytes < w) ? f->cwnd_bytes : w;
}

static bool window_open(const struct sim *s, const struct sim_flow *f)
{
	uint64_t w = sim_flow_window_bytes(s, f);
	return !w || (uint64_t)(f->snd_nxt - f->snd_una) * s->cfg.mtu_bytes < w;
}

static struct sim_pkt *flow_emit(struct sim *s, struct sim_host *h, struct sim_flow *f)
{
	const struct sim_config *c = &s->cfg;
	uint32_t psn = UINT32_MAX;
	if (f->retx_mode) {
		while (f->retx_ptr < f->snd_high && f->acked && bit_get(f->acked, f->retx_ptr))
			f->retx_ptr++;
		if (f->retx_ptr < f->snd_high && f->retx_ptr >= f->snd_una)
			psn = f->retx_ptr++;
		else
			f->retx_mode = false;
	}
	if (psn == UINT32_MAX) {
		if (f->snd_nxt >= f->npkts) {
			active_del(h, f);
			return NULL;
		}
		psn = f->snd_nxt++;
	}
	struct sim_pkt *p = sim_pkt_alloc(s);
	if (!p)
		return NULL;
	p->type = SIM_PKT_DATA;
	p->flags = SIM_PKT_ECT;
	p->flow = f->idx;
	p->psn = psn;
	p->src = f->src;
	p->dst = f->dst;
	p->entropy = f->entropy;
	p->size_bytes = payload_of(s, f, psn) + c->header_bytes;
	p->spray_ctr = f->spray_seq++;
	if (s->hk.data_tx)
		s->hk.data_tx(s, f, p);
	s->data_pkts++;
	if (psn < f->snd_high) {
		f->retx_pkts++;
		s->retx_pkts++;
	} else {
		f->snd_high = psn + 1;
	}
	/* Pacing at the current rate (line rate unless DCQCN or rate_gbps say otherwise). */
	double rate = f->rc;
	sim_time_ps gap = (sim_time_ps)((double)p->size_bytes * 8e12 / rate + 0.5);
	f->next_tx_ps = (f->next_tx_ps > s->now ? f->next_tx_ps : s->now) + gap;
	if (c->cc == SIM_CC_DCQCN && f->rc < rate_cap(s, f)) {
		f->bc_bytes += p->size_bytes;
		if (f->bc_bytes >= c->dcqcn_byte_counter_bytes) {
			f->bc_bytes = 0;
			f->bc_count++;
			dcqcn_increase(s, f);
		}
	}
	if (c->transport == SIM_TRANSPORT_IDEAL) {
		if (f->snd_nxt >= f->npkts) {
			active_del(h, f);
			sender_done(s, f);
		}
		return p;
	}
	if (!sim_ev_pending(&f->rto_ev)) {
		f->rto_deadline = s->now + s->rto_ps;
		sim_schedule(s, &f->rto_ev, f->rto_deadline);
	}
	if (!has_data(s, f))
		active_del(h, f);
	return p;
}

/* May active flow f send a packet now? If only its pacing holds it back, *wake gets the time
 * it may (when earlier). */
static inline bool flow_ready(const struct sim *s, const struct sim_flow *f, sim_time_ps *wake)
{
	if (!window_open(s, f))
		return false;
	if (f->next_tx_ps > s->now) {
		if (f->next_tx_ps < *wake)
			*wake = f->next_tx_ps;
		return false;
	}
	return true;
}

struct sim_pkt *sim_host_next(struct sim *s, struct sim_host *h, sim_time_ps *wake)
{
	if (s->hk.host_next) /* a module schedules the NIC */
		return s->hk.host_next(s, h, wake);
	struct sim_flow *f = h->active;
	for (uint32_t i = 0, n = h->nactive; i < n; i++, f = f->next_active) {
		if (!flow_ready(s, f, wake))
			continue;
		struct sim_flow *next = f->next_active;
		struct sim_pkt *p = flow_emit(s, h, f);
		if (h->active)
			h->active = f->in_active ? f->next_active : next;
		if (p)
			return p;
		if (!h->nactive)
			break;
	}
	return NULL;
}

/* ---- receiving --------------------------------------------------------------------------- */
static void send_ctl(struct sim *s, struct sim_flow *f, uint8_t type, uint32_t psn, uint32_t sack)
{
	struct sim_pkt *p = sim_pkt_alloc(s);
	if (!p)
		return;
	struct sim_host *h = &s->hosts[f->dst];
	p->type = type;
	p->flow = f->idx;
	p->psn = psn;
	p->sack_psn = sack;
	p->src = f->dst;
	p->dst = f->src;
	p->entropy = f->entropy;
	p->spray_ctr = f->ctl_seq++;
	p->sack_bits = 0;
	if (type == SIM_PKT_ACK && f->rcvd) /* SR: which of the next 64 PSNs are here */
		for (uint32_t i = 0; i < 64 && psn + 1 + i < f->npkts; i++)
			if (bit_get(f->rcvd, psn + 1 + i))
				p->sack_bits |= 1ull << i;
	p->size_bytes = s->cfg.ack_bytes;
	if (s->hk.ack_tx && type != SIM_PKT_CNP)
		s->hk.ack_tx(s, f, p);
	sim_pktq_push(&h->port.cq, p);
	sim_port_kick(s, &h->port);
}

static void receiver_done(struct sim *s, struct sim_flow *f)
{
	f->recv_done = true;
	f->finish_ps = s->now;
	if (f->trig_recv_done)
		sim_trigger_activate(s, f->trig_recv_done);
	sim_modules_flow_recv_done(s, f);
	flow_check_complete(s, f);
}

static void rx_data(struct sim *s, struct sim_flow *f, struct sim_pkt *p)
{
	const struct sim_config *c = &s->cfg;
	uint32_t psn = p->psn;
	if (f->recv_done || f->state == SIM_FLOW_DONE) {
		if (c->transport != SIM_TRANSPORT_IDEAL) /* sender lost our ACK: repeat it */
			send_ctl(s, f, SIM_PKT_ACK, f->npkts, psn);
		return;
	}
	if (s->hk.data_rx)
		s->hk.data_rx(s, f, p);
	if (p->flags & SIM_PKT_CE) {
		f->ecn_pkts++;
		sim_time_ps iv = sim_time_from_us_f(c->dcqcn_cnp_interval_us);
		if (c->cc == SIM_CC_DCQCN && (!f->cnp_sent_once || s->now - f->last_cnp_ps >= iv)) {
			f->cnp_sent_once = true;
			f->last_cnp_ps = s->now;
			send_ctl(s, f, SIM_PKT_CNP, 0, 0);
		}
	}
	uint32_t payload = p->size_bytes - c->header_bytes;
	switch (c->transport) {
	case SIM_TRANSPORT_IDEAL:
		f->rcv_count++;
		f->bytes_rx += payload;
		s->rx_new_pkts++;
		if (f->rcv_count >= f->npkts)
			receiver_done(s, f);
		return;
	case SIM_TRANSPORT_SR:
		if (f->rcvd) {
			bool dup = bit_get(f->rcvd, psn);
			if (!dup) {
				bit_set(f->rcvd, psn);
				f->rcv_count++;
				f->bytes_rx += payload;
				s->rx_new_pkts++;
				while (f->rcv_nxt < f->npkts && bit_get(f->rcvd, f->rcv_nxt))
					f->rcv_nxt++;
			}
			bool done = f->rcv_count >= f->npkts;
			/* Coalesce ACKs like go-back-N; each ACK carries the cumulative PSN and a
			 * bitmap of the 64 PSNs after it, so reordering (spraying) costs no extra
			 * ACKs. A duplicate gets an ACK at once: the sender may be retransmitting. */
			if (++f->unacked >= c->ack_every || done || dup || (p->flags & SIM_PKT_ACKREQ)) {
				f->unacked = 0;
				send_ctl(s, f, SIM_PKT_ACK, f->rcv_nxt, psn);
			}
			if (done)
				receiver_done(s, f);
			return;
		}
		/* fall through: no bitmap (allocation failed), behave as go-back-N */
		/* FALLTHROUGH */
	case SIM_TRANSPORT_GBN:
	default:
		if (psn == f->rcv_nxt) {
			f->rcv_nxt++;
			f->rcv_count++;
			f->bytes_rx += payload;
			s->rx_new_pkts++;
			f->nack_psn = 0;
			bool done = f->rcv_nxt >= f->npkts;
			if (++f->unacked >= c->ack_every || done || (p->flags & SIM_PKT_ACKREQ)) {
				f->unacked = 0;
				send_ctl(s, f, SIM_PKT_ACK, f->rcv_nxt, psn);
			}
			if (done)
				receiver_done(s, f);
		} else if (psn > f->rcv_nxt) {
			/* Out of order: RoCE go-back-N drops it and NACKs once per hole. */
			if (f->nack_psn != f->rcv_nxt + 1) {
				f->nack_psn = f->rcv_nxt + 1;
				send_ctl(s, f, SIM_PKT_NACK, f->rcv_nxt, psn);
			}
		} else {
			send_ctl(s, f, SIM_PKT_ACK, f->rcv_nxt, psn);
		}
		return;
	}
}

static void rx_ack(struct sim *s, struct sim_flow *f, struct sim_pkt *p)
{
	const struct sim_config *c = &s->cfg;
	struct sim_host *h = &s->hosts[f->src];
	if (f->send_done || f->state != SIM_FLOW_ACTIVE)
		return;
	bool progress = false;
	if (p->type == SIM_PKT_NACK) {
		s->nacks++;
		f->nacks++;
		if (p->psn > f->snd_una) {
			f->snd_una = p->psn;
			progress = true;
		}
		if (p->psn >= f->snd_una && p->psn < f->snd_nxt) {
			f->snd_nxt = p->psn; /* go back N */
			active_add(h, f);
		}
	} else {
		s->acks++;
		if (f->acked && p->sack_psn < f->npkts)
			bit_set(f->acked, p->sack_psn);
		for (uint64_t b = f->acked ? p->sack_bits : 0; b; b &= b - 1)
			bit_set(f->acked, p->psn + 1 + (uint32_t)__builtin_ctzll(b));
		if (p->psn > f->snd_una) {
			f->snd_una = p->psn;
			progress = true;
		}
		if (f->acked) {
			while (f->snd_una < f->snd_high && bit_get(f->acked, f->snd_una))
				f->snd_una++;
			/* Selective repeat: a hole that many later packets have overtaken is lost,
			 * not reordered; resend the holes once per window (NewReno-like recovery). */
			if (!f->retx_mode && f->snd_una < f->snd_high && f->snd_una >= f->recover &&
			    p->sack_psn >= f->snd_una + c->sr_reorder_pkts) {
				f->retx_mode = true;
				f->retx_ptr = f->snd_una;
				f->recover = f->snd_high;
				active_add(h, f);
			}
		}
		if (f->snd_nxt < f->snd_una)
			f->snd_nxt = f->snd_una;
	}
	if (f->snd_una >= f->npkts) {
		sender_done(s, f);
		return;
	}
	if (s->hk.ack_rx)
		s->hk.ack_rx(s, f, p);
	if (progress)
		f->rto_deadline = s->now + s->rto_ps;
	if (has_data(s, f))
		active_add(h, f);
	sim_port_kick(s, &h->port);
}

static void rto_fire(struct sim *s, struct sim_event *ev)
{
	struct sim_flow *f = SIM_CONTAINER_OF(ev, struct sim_flow, rto_ev);
	if (f->send_done)
		return;
	if (s->now < f->rto_deadline) { /* deadline moved on since it was armed */
		sim_schedule(s, ev, f->rto_deadline);
		return;
	}
	if (f->snd_una >= f->snd_high)
		return; /* nothing outstanding: the next transmission re-arms */
	f->timeouts++;
	s->timeouts++;
	if (f->acked) {
		f->retx_mode = true;
		f->retx_ptr = f->snd_una;
		f->recover = f->snd_high;
	} else {
		f->snd_nxt = f->snd_una;
	}
	struct sim_host *h = &s->hosts[f->src];
	active_add(h, f);
	f->rto_deadline = s->now + s->rto_ps;
	sim_schedule(s, ev, f->rto_deadline);
	sim_port_kick(s, &h->port);
}

void sim_host_rx(struct sim *s, struct sim_host *h, struct sim_pkt *p)
{
	if (s->hk.host_rx_any && s->hk.host_rx_any(s, h, p))
		return;
	if (p->type >= SIM_PKT_MOD_FIRST) { /* a module's own packet */
		const struct sim_module_ops *m = s->pkt_owner[p->type];
		if (m && m->host_rx) {
			m->host_rx(s, h, p);
			return;
		}
	}
	struct sim_flow *f = &s->flows[p->flow];
	if (p->dst == h->n.id) {
		switch (p->type) {
		case SIM_PKT_DATA: rx_data(s, f, p); break;
		case SIM_PKT_ACK:
		case SIM_PKT_NACK: rx_ack(s, f, p); break;
		case SIM_PKT_CNP:
			f->cnps++;
			s->cnps++;
			if (s->cfg.cc == SIM_CC_DCQCN && !f->send_done) {
				dcqcn_cnp(s, f);
				sim_modules_rate_cut(s, f);
			}
			break;
		}
	}
	sim_pkt_free(s, p);
}

/* Entry points for modules in front of the transport (sim_int.h). */
struct sim_pkt *sim_host_emit(struct sim *s, struct sim_host *h, struct sim_flow *f)
{
	return flow_emit(s, h, f);
}

void sim_host_rx_data(struct sim *s, struct sim_flow *f, struct sim_pkt *p)
{
	rx_data(s, f, p);
}

bool sim_host_flow_ready(const struct sim *s, const struct sim_flow *f, sim_time_ps *wake)
{
	return flow_ready(s, f, wake);
}
