/* sim/sim.c: the simulation object: create / run / destroy, the main event loop, packet and
 * control-event free lists, per-component RNG streams, flow allocation and result accessors.
 * Topology, switches, hosts, workloads and outputs live in their own sim_*.c files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

#define PKT_CHUNK 4096

/* One stream per component: the seed mixed with (domain, id), so adding a switch or a flow
 * never shifts the random numbers another component sees. */
void sim_rng_init(const struct sim *s, struct util_rng *r, uint32_t domain, uint32_t id)
{
	util_rng_seed(r, sim_mix64(s->cfg.seed ^ sim_mix64(((uint64_t)domain << 32) | id)));
}

struct sim_pkt *sim_pkt_alloc(struct sim *s)
{
	struct sim_pkt *p = s->pkt_free;
	if (!p) {
		if (s->nchunks == s->chunks_cap) {
			uint32_t cap = s->chunks_cap ? s->chunks_cap * 2 : 16;
			void **c = realloc(s->chunks, sizeof(*c) * cap);
			if (!c)
				return NULL;
			s->chunks = c;
			s->chunks_cap = cap;
		}
		struct sim_pkt *chunk = malloc(sizeof(*chunk) * PKT_CHUNK);
		if (!chunk)
			return NULL;
		s->chunks[s->nchunks++] = chunk;
		s->pkts_allocated += PKT_CHUNK;
		for (int i = PKT_CHUNK - 1; i >= 0; i--) {
			chunk[i].next = s->pkt_free;
			s->pkt_free = &chunk[i];
		}
		p = s->pkt_free;
	}
	s->pkt_free = p->next;
	p->next = NULL;
	sim_ev_init(&p->ev, sim_pkt_arrive);
	p->flags = 0;
	p->sack_psn = 0;
	return p;
}

void sim_pkt_free(struct sim *s, struct sim_pkt *p)
{
	p->next = s->pkt_free;
	s->pkt_free = p;
}

static void schedule(struct sim *s, struct sim_event *ev, sim_time_ps t, bool cancellable)
{
	if (t < s->now)
		t = s->now;
	if (sim_heap_push(&s->heap, ev, t, cancellable) != 0) {
		/* Out of memory in the middle of a run: the only honest thing left is to stop. */
		s->finished = true;
		sim_set_err(s, "out of memory growing the event heap");
	}
}

void sim_schedule(struct sim *s, struct sim_event *ev, sim_time_ps t)
{
	schedule(s, ev, t, true);
}

void sim_schedule_fixed(struct sim *s, struct sim_event *ev, sim_time_ps t)
{
	schedule(s, ev, t, false);
}

void sim_cancel(struct sim *s, struct sim_event *ev)
{
	sim_heap_remove(&s->heap, ev);
}

struct sim_flow *sim_flow_new(struct sim *s, uint32_t src, uint32_t dst, uint64_t size_bytes,
			      sim_time_ps start_ps, uint32_t user_id)
{
	if (src >= s->nhosts || dst >= s->nhosts || src == dst || size_bytes == 0 ||
	    size_bytes > SIM_FLOW_MAX_BYTES || (size_bytes - 1) / s->cfg.mtu_bytes >= (1u << 31))
		return NULL;
	if (s->nflows == s->flows_cap) {
		uint32_t cap = s->flows_cap ? s->flows_cap * 2 : 64;
		struct sim_flow *fl = realloc(s->flows, sizeof(*fl) * cap);
		if (!fl)
			return NULL;
		s->flows = fl;
		s->flows_cap = cap;
	}
	struct sim_flow *f = &s->flows[s->nflows];
	memset(f, 0, sizeof(*f));
	f->idx = s->nflows++;
	f->user_id = user_id ? user_id : f->idx + 1;
	f->src = src;
	f->dst = dst;
	f->size_bytes = size_bytes;
	f->npkts = (uint32_t)((size_bytes + s->cfg.mtu_bytes - 1) / s->cfg.mtu_bytes);
	f->start_ps = start_ps;
	f->state = SIM_FLOW_WAIT;
	f->entropy = (uint16_t)util_rng_next(&s->wl_rng);
	f->ideal_ps = sim_flow_ideal_ps(s, f);
	return f;
}

/* Flows live in a growable array, so their embedded events are initialised only once the
 * array is final (sim_create end / sim_flow_add before the run). */
static void flow_init_events(struct sim_flow *f)
{
	sim_ev_init(&f->start_ev, sim_flow_start_ev);
	sim_ev_init(&f->rto_ev, NULL);
	sim_ev_init(&f->rate_ev, NULL);
}

static void schedule_starts(struct sim *s, uint32_t from)
{
	for (uint32_t i = from; i < s->nflows; i++) {
		struct sim_flow *f = &s->flows[i];
		flow_init_events(f);
		if (!f->trig_start)
			sim_schedule(s, &f->start_ev, f->start_ps);
	}
}

int sim_flow_add(struct sim *s, uint32_t src, uint32_t dst, uint64_t size_bytes,
		 sim_time_ps start_ps)
{
	/* Growing the array would move flows whose events are queued: only before the run. */
	if (s->now != 0 || s->events != 0)
		return -EBUSY;
	/* Pending start events point into the array; take them out while it may move. */
	for (uint32_t i = 0; i < s->nflows; i++)
		sim_cancel(s, &s->flows[i].start_ev);
	struct sim_flow *f = sim_flow_new(s, src, dst, size_bytes, start_ps, 0);
	schedule_starts(s, 0);
	return f ? (int)f->idx : -EINVAL;
}

/* Ranges that keep the integer arithmetic of the model exact and free of overflow (a
 * packet's serialisation in ps is bytes * 8e12 / rate in 64 bits; times stay below 2^63 ps)
 * and values that would make the model meaningless. Returns NULL or the reason. */
static const char *config_check(const struct sim_config *c)
{
	const double max_us = 1e11; /* about 28 simulated hours */
	if (c->mtu_bytes < 64 || c->mtu_bytes > 1000000)
		return "host.mtu_bytes must be between 64 and 1000000";
	if (c->header_bytes > 65535 || c->ack_bytes < 1 || c->ack_bytes > 65535)
		return "host.header_bytes must be <= 65535 and host.ack_bytes between 1 and 65535";
	if (c->ack_every == 0)
		return "host.ack_every must be > 0";
	if (c->host_latency_ns > 1e9 || c->tier1_latency_ns > 1e9 || c->tier2_latency_ns > 1e9 ||
	    c->tier3_latency_ns > 1e9)
		return "link latencies must be <= 1e9 ns";
	if (c->rto_us <= 0 || c->rto_us > max_us)
		return "host.rto_us must be > 0 and <= 1e11";
	if (c->stop_us > max_us || c->start_us > max_us || c->flowlet_gap_us > max_us ||
	    c->timeseries_us > max_us)
		return "times must be <= 1e11 us";
	if (c->timeseries_us > 0 && c->timeseries_us < 0.001)
		return "output.timeseries_us must be 0 (off) or >= 0.001";
	if (c->rate_gbps > 1e6)
		return "host.rate_gbps must be <= 1e6";
	if (c->ecn_pmax > 1 || c->dcqcn_g > 1 || c->dcqcn_initial_alpha > 1)
		return "ecn_pmax, dcqcn.g and dcqcn.initial_alpha must be between 0 and 1";
	if (c->dcqcn_rate_timer_us <= 0 || c->dcqcn_rate_timer_us > max_us ||
	    c->dcqcn_alpha_timer_us > max_us || c->dcqcn_cnp_interval_us > max_us)
		return "dcqcn timers must be <= 1e11 us (rate_timer_us > 0)";
	if (c->dcqcn_min_rate_mbps > 1e9 || c->dcqcn_rai_mbps > 1e9 || c->dcqcn_rhai_mbps > 1e9)
		return "dcqcn rates must be <= 1e9 Mbit/s";
	if (c->pfc && c->pfc_xon_bytes > c->pfc_xoff_bytes)
		return "switch.pfc_xon_bytes must be <= pfc_xoff_bytes";
	return NULL;
}

int sim_create(const struct sim_config *cfg, struct sim **out, char *err, size_t errlen)
{
	struct sim *s = calloc(1, sizeof(*s));
	int rc;
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	const char *bad = config_check(&s->cfg);
	if (bad) {
		if (err)
			snprintf(err, errlen, "%s", bad);
		free(s);
		return -EINVAL;
	}
	s->stop_ps = cfg->stop_us > 0 ? sim_time_from_us_f(cfg->stop_us) : SIM_TIME_NEVER;
	s->rto_ps = sim_time_from_us_f(cfg->rto_us);
	s->flowlet_gap_ps = sim_time_from_us_f(cfg->flowlet_gap_us);
	sim_rng_init(s, &s->wl_rng, 1, 0);
	if (s->cfg.topo == SIM_TOPO_FATTREE && s->cfg.k == 0) {
		/* k = 0: the smallest fat tree that holds the connection matrix's nodes. */
		uint32_t need = s->cfg.workload == SIM_WL_CMATRIX ? sim_cmatrix_nodes(s->cfg.cmatrix) : 16;
		uint32_t hp0 = s->cfg.hosts_per_tor;
		s->cfg.k = 2;
		while (s->cfg.k < 256) {
			uint32_t half = s->cfg.k / 2, hp = hp0 ? hp0 : half;
			if ((uint64_t)s->cfg.k * half * hp >= need)
				break;
			s->cfg.k += 2;
		}
	}
	switch (cfg->routing) {
	case SIM_ROUTE_SPRAY: s->route = &sim_route_spray; break;
	case SIM_ROUTE_SPRAY_RANDOM: s->route = &sim_route_spray_random; break;
	case SIM_ROUTE_ADAPTIVE: s->route = &sim_route_adaptive; break;
	case SIM_ROUTE_FLOWLET: s->route = &sim_route_flowlet; break;
	default: s->route = &sim_route_ecmp; break;
	}
	if ((rc = sim_heap_init(&s->heap, 4096)) != 0)
		goto fail;
	if ((rc = sim_topo_build(s)) != 0)
		goto fail;
	if ((rc = sim_workload_build(s)) != 0)
		goto fail;
	/* Modules that add flows do it before schedule_starts initialises every flow's events;
	 * timers of the others sort behind the flows' starts. */
	if ((rc = sim_modules_create(s, false)) != 0)
		goto fail;
	schedule_starts(s, 0);
	if ((rc = sim_modules_create(s, true)) != 0)
		goto fail;
	if (cfg->timeseries_us > 0 && cfg->out_dir[0]) {
		char path[SIM_PATH_MAX + 32];
		snprintf(path, sizeof(path), "%s/timeseries.csv", cfg->out_dir);
		if ((rc = sim_mkdir_p(cfg->out_dir)) != 0) {
			sim_set_err(s, "cannot create output directory");
			goto fail;
		}
		s->ts = fopen(path, "w");
		if (!s->ts) {
			rc = -errno;
			sim_set_err(s, "cannot open timeseries.csv");
			goto fail;
		}
		fprintf(s->ts, "time_us,port,node,peer,tier,util,queue_bytes,paused\n");
		s->ts_interval_ps = sim_time_from_us_f(cfg->timeseries_us);
		sim_ev_init(&s->ts_ev, sim_ts_sample);
		sim_schedule(s, &s->ts_ev, s->ts_interval_ps);
	}
	*out = s;
	return 0;
fail:
	if (err)
		snprintf(err, errlen, "%s", s->err[0] ? s->err : strerror(-rc));
	sim_destroy(s);
	return rc;
}

void sim_destroy(struct sim *s)
{
	if (!s)
		return;
	if (s->ts)
		fclose(s->ts);
	for (uint32_t i = 0; i < s->nflows; i++)
		sim_flow_release(&s->flows[i]);
	free(s->flows);
	for (uint32_t i = 0; i < s->ntrigs; i++)
		free(s->trigs[i].targets);
	free(s->trigs);
	free(s->trig_hash);
	sim_modules_destroy(s);
	sim_topo_free(s);
	for (uint32_t i = 0; i < s->nchunks; i++)
		free(s->chunks[i]);
	free(s->chunks);
	while (s->ctl_all) { /* free or still in flight when the run stopped */
		struct sim_ctl_ev *c = s->ctl_all;
		s->ctl_all = c->next_all;
		free(c);
	}
	sim_heap_free(&s->heap);
	free(s);
}

static bool all_done(const struct sim *s)
{
	if (s->hk.run_done) /* a module decides (it may own work that is not flows) */
		return s->hk.run_done(s);
	return s->nflows > 0 && s->flows_done == s->nflows;
}

int sim_run_until(struct sim *s, sim_time_ps until)
{
	struct sim_heap *h = &s->heap;
	if (until > s->stop_ps)
		until = s->stop_ps;
	while (!s->finished) {
		if (h->n == 0 || all_done(s)) {
			s->finished = true;
			break;
		}
		if (sim_heap_top_time(h) > until) {
			if (until >= s->stop_ps) {
				s->now = s->stop_ps;
				s->finished = true;
			}
			break;
		}
		struct sim_event *ev = sim_heap_pop(h);
		/* The next event is now at the root: start fetching it (usually a packet last
		 * touched a link latency ago, long out of the caches) while this one runs. */
		if (h->n) {
			__builtin_prefetch(h->ev[0]);
			__builtin_prefetch((char *)h->ev[0] + 64);
		}
		s->now = ev->t;
		s->events++;
		ev->fn(s, ev);
	}
	return s->finished ? 1 : 0;
}

void sim_run(struct sim *s, void (*progress)(struct sim *s, void *user), void *user)
{
	uint64_t interval_ns = (uint64_t)(s->cfg.progress_s * 1e9);
	uint64_t next = util_now_ns() + interval_ns;
	if (!progress || interval_ns == 0) {
		sim_run_until(s, SIM_TIME_NEVER);
		return;
	}
	/* Check the wall clock only every few hundred thousand events: it is not free. */
	while (!s->finished) {
		uint64_t target = s->events + 200000;
		while (!s->finished && s->events < target) {
			sim_time_ps horizon = sim_heap_top_time(&s->heap);
			sim_run_until(s, horizon);
		}
		uint64_t t = util_now_ns();
		if (t >= next) {
			progress(s, user);
			next = t + interval_ns;
		}
	}
}

void sim_get_stats(const struct sim *s, struct sim_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->now_ps = s->now;
	st->events = s->events;
	st->hosts = s->nhosts;
	st->switches = s->nsw;
	st->links = s->nlinks;
	st->flows = s->nflows;
	st->flows_done = s->flows_done;
	st->data_pkts_sent = s->data_pkts;
	st->retx_pkts = s->retx_pkts;
	st->timeouts = s->timeouts;
	st->nacks = s->nacks;
	st->acks = s->acks;
	st->ecn_marks = s->ecn_marks;
	st->cnps = s->cnps;
	st->pfc_pauses = s->pfc_pauses;
	st->oversubscription = s->oversub;
	sim_modules_adjust_stats(s, st);
	for (uint32_t i = 0; i < s->nsw; i++) {
		st->drops_queue += s->sws[i].drops_queue;
		st->drops_shared += s->sws[i].drops_shared;
		st->drops_headroom += s->sws[i].drops_headroom;
	}
	st->drops_total = st->drops_queue + st->drops_shared + st->drops_headroom;
	for (uint32_t i = 0; i < s->nports; i++)
		if (s->ports[i]->q_max_bytes > st->max_queue_bytes)
			st->max_queue_bytes = s->ports[i]->q_max_bytes;
}

uint32_t sim_flow_count(const struct sim *s)
{
	return s->nflows;
}

int sim_flow_result(const struct sim *s, uint32_t i, struct sim_flow_result *r)
{
	if (i >= s->nflows)
		return -EINVAL;
	const struct sim_flow *f = &s->flows[i];
	r->id = f->user_id;
	r->src = f->src;
	r->dst = f->dst;
	r->size_bytes = f->size_bytes;
	r->start_ps = f->start_ps;
	r->finish_ps = f->finish_ps;
	r->sender_done_ps = f->sender_done_ps;
	r->ideal_ps = f->ideal_ps;
	r->retx_pkts = f->retx_pkts;
	r->ecn_pkts = f->ecn_pkts;
	r->cnps = f->cnps;
	r->done = f->recv_done;
	r->bytes_received = f->bytes_rx;
	return 0;
}

const struct sim_config *sim_get_config(const struct sim *s)
{
	return &s->cfg;
}
