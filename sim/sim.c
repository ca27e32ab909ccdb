/* sim/sim.c: the simulation object: create / run / destroy, the main event loop, packet and
 * control-event free lists, per-component RNG streams, flow allocation and result accessors.
 * Topology, switches, hosts, workloads and outputs live in their own sim_*.c files. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

#define PKT_CHUNK 4096
#define SIM_PREFETCH_AHEAD 4 /* events */

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
		size_t stride = sizeof(struct sim_pkt) + s->pkt_ext_bytes;
		char *chunk = malloc(stride * PKT_CHUNK);
		if (!chunk)
			return NULL;
		s->chunks[s->nchunks++] = chunk;
		s->pkts_allocated += PKT_CHUNK;
		for (int i = PKT_CHUNK - 1; i >= 0; i--) {
			struct sim_pkt *q = (struct sim_pkt *)(void *)(chunk + (size_t)i * stride);
			q->next = s->pkt_free;
			s->pkt_free = q;
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

int sim_pkt_ext_reserve(struct sim *s, uint32_t bytes, uint32_t *off)
{
	if (s->nchunks)
		return -EBUSY;
	/* Keep every packet of a chunk aligned like struct sim_pkt (its size is a multiple of 8). */
	*off = s->pkt_ext_bytes;
	s->pkt_ext_bytes += (bytes + 7u) & ~7u;
	return 0;
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
	if (sim_evq_push(&s->evq, ev, t, cancellable) != 0) {
		/* Out of memory in the middle of a run: the only honest thing left is to stop. */
		s->finished = true;
		sim_set_err(s, "out of memory growing the event queue");
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
	sim_evq_remove(&s->evq, ev);
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

/* Buffers that cannot hold one data packet: every packet is dropped (or never admitted) and
 * the senders retransmit forever. Returns NULL or the reason in buf. */
static const char *buffer_check(const struct sim_config *c, char *buf, size_t len)
{
	uint64_t pkt = (uint64_t)c->mtu_bytes + c->header_bytes;
	const char *what = NULL;
	uint64_t have = 0;
	if (!c->pfc && c->buffer_bytes < pkt)
		what = "switch.buffer_bytes", have = c->buffer_bytes;
	else if (c->shared_buffer_bytes && c->shared_buffer_bytes < pkt)
		what = "switch.shared_buffer_bytes", have = c->shared_buffer_bytes;
	else if (c->pfc && c->pfc_headroom_bytes && c->pfc_xoff_bytes + c->pfc_headroom_bytes < pkt)
		what = "switch.pfc_xoff_bytes + switch.pfc_headroom_bytes",
		have = c->pfc_xoff_bytes + c->pfc_headroom_bytes;
	if (!what)
		return NULL;
	snprintf(buf, len, "%s = %llu is below one data packet (host.mtu_bytes + host.header_bytes = "
		 "%llu bytes): every packet would be dropped and retransmitted forever", what,
		 (unsigned long long)have, (unsigned long long)pkt);
	return buf;
}

/* Ranges that keep the integer arithmetic of the model exact and free of overflow (a
 * packet's serialisation in ps is bytes * 8e12 / rate in 64 bits; times stay below 2^63 ps)
 * and values that would make the model meaningless. Returns NULL or the reason (in buf when
 * it quotes values). */
static const char *config_check(const struct sim_config *c, char *buf, size_t len)
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
	if (c->watchdog_idle_us > max_us)
		return "sim.watchdog_idle_us must be <= 1e11";
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
	if (c->ecn && c->ecn_kmin_bytes > c->ecn_kmax_bytes) {
		snprintf(buf, len, "switch.ecn_kmin_bytes = %llu must be <= switch.ecn_kmax_bytes = %llu "
			 "(marking starts at Kmin and is certain from Kmax)",
			 (unsigned long long)c->ecn_kmin_bytes, (unsigned long long)c->ecn_kmax_bytes);
		return buf;
	}
	return buffer_check(c, buf, len);
}

/* topology.k = 0 sizes a fat tree from the connection matrix's "Nodes". Like htsim, only the
 * host count of a full tree is accepted (k pods of k/2 ToRs with hosts_per_tor hosts each):
 * rounding up would run a different experiment on hosts the matrix never names. Returns 0
 * and sets c->k, or -EINVAL with the valid counts around `need` in err. */
static int fattree_k_for(struct sim_config *c, uint64_t need, const char *file, char *err, size_t len)
{
	uint64_t hp0 = c->hosts_per_tor, below = 0, above = 0;
	uint32_t kb = 0, ka = 0;
	for (uint32_t k = 2; k <= 256; k += 2) {
		uint64_t hosts = (uint64_t)k * (k / 2) * (hp0 ? hp0 : k / 2);
		if (hosts == need) {
			c->k = k;
			return 0;
		}
		if (hosts < need)
			below = hosts, kb = k;
		else if (!above)
			above = hosts, ka = k;
	}
	const char *hp = hp0 ? "k * k/2 * hosts_per_tor" : "k^3/4";
	unsigned long long n = (unsigned long long)need;
	if (below && above)
		snprintf(err, len, "%.150s: Nodes %llu is not the host count of a full fat tree (%s; "
			 "topology.k = 0 sizes the tree from Nodes): the nearest are %llu (k=%u) and "
			 "%llu (k=%u)", file, n, hp, (unsigned long long)below, kb,
			 (unsigned long long)above, ka);
	else if (below)
		snprintf(err, len, "%.150s: Nodes %llu is more than the largest fat tree (%s: %llu hosts, "
			 "k=%u)", file, n, hp, (unsigned long long)below, kb);
	else
		snprintf(err, len, "%.150s: Nodes %llu is not the host count of a full fat tree (%s): the "
			 "smallest is %llu (k=%u)", file, n, hp, (unsigned long long)above, ka);
	return -EINVAL;
}

static void watchdog_arm(struct sim *s, uint64_t progress);

int sim_create(const struct sim_config *cfg, struct sim **out, char *err, size_t errlen)
{
	struct sim *s = calloc(1, sizeof(*s));
	int rc;
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	char why[256];
	const char *bad = config_check(&s->cfg, why, sizeof(why));
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
		/* k = 0: the fat tree whose host count is the connection matrix's Nodes (k = 4
		 * without a matrix, k = 2 for a matrix without a Nodes line). */
		uint64_t need = s->cfg.workload == SIM_WL_CMATRIX ? sim_cmatrix_nodes(s->cfg.cmatrix) : 0;
		s->cfg.k = s->cfg.workload == SIM_WL_CMATRIX ? 2 : 4;
		if (need && fattree_k_for(&s->cfg, need, s->cfg.cmatrix, s->err, sizeof(s->err))) {
			rc = -EINVAL;
			goto fail;
		}
	}
	switch (cfg->routing) {
	case SIM_ROUTE_SPRAY: s->route = &sim_route_spray; break;
	case SIM_ROUTE_SPRAY_IDEAL: s->route = &sim_route_spray_ideal; break;
	case SIM_ROUTE_SPRAY_RANDOM: s->route = &sim_route_spray_random; break;
	case SIM_ROUTE_ADAPTIVE: s->route = &sim_route_adaptive; break;
	case SIM_ROUTE_FLOWLET: s->route = &sim_route_flowlet; break;
	default: s->route = &sim_route_ecmp; break;
	}
	if ((rc = sim_evq_init(&s->evq)) != 0)
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
	/* Progress watchdog (above); off with sim.watchdog_events = 0. */
	s->wd_next = s->wd_time = UINT64_MAX;
	if (cfg->watchdog_events) {
		double idle_us = cfg->watchdog_idle_us > 10 * cfg->rto_us ? cfg->watchdog_idle_us
									    : 10 * cfg->rto_us;
		s->wd_next = cfg->watchdog_events + 4ull * s->nflows;
		s->wd_idle_ps = cfg->watchdog_idle_us > 0 ? sim_time_from_us_f(idle_us) : 0;
		s->wd_now = SIM_TIME_NEVER;
		watchdog_arm(s, 0);
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
	sim_evq_free(&s->evq);
	free(s);
}

static bool all_done(const struct sim *s)
{
	if (s->hk.run_done) /* a module decides (it may own work that is not flows) */
		return s->hk.run_done(s);
	return s->nflows > 0 && s->flows_done == s->nflows;
}

/* ---- progress watchdog ------------------------------------------------------------------
 * A run must end. Inputs are checked in sim_create, but a model can still go round in circles:
 * packets dropped forever at the same queue, a PFC cycle, an event that reschedules itself at
 * the same instant. The watchdog looks at a progress count (data packets received for the
 * first time, flows finished, and what the modules report) every wd_every events and whenever
 * simulated time passes wd_time, and stops the run (sim_run_error) when
 *  - simulated time did not move over wd_every events (events per simulated ns exploded), or
 *  - flows are active and nothing was delivered over wd_every events, or for wd_idle_ps of
 *    simulated time.
 * The test sits on the event loop's path but costs two compares per event. */
static void port_name(const struct sim *s, const struct sim_port *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s->%s", p->node->name, p->peer ? p->peer->node->name : "?");
	(void)s;
}

/* Appends what looks stuck: the active flow that got least, the port that dropped most, the
 * largest queue and PFC pauses in force. */
static void stall_diagnose(struct sim *s, size_t at)
{
	char *b = s->stall;
	size_t len = sizeof(s->stall);
#define ADD(...) do { if (at < len) at += (size_t)snprintf(b + at, len - at, __VA_ARGS__); } while (0)
	const struct sim_flow *worst = NULL;
	uint32_t active = 0;
	for (uint32_t i = 0; i < s->nflows; i++) {
		const struct sim_flow *f = &s->flows[i];
		if (f->state != SIM_FLOW_ACTIVE)
			continue;
		active++;
		if (!worst || (double)f->bytes_rx / (double)f->size_bytes <
			      (double)worst->bytes_rx / (double)worst->size_bytes)
			worst = f;
	}
	if (worst)
		ADD("; %u flows active, least advanced: flow %u h%u->h%u, %llu of %llu bytes received, "
		    "%llu retransmissions, %llu timeouts", active, worst->user_id, worst->src, worst->dst,
		    (unsigned long long)worst->bytes_rx, (unsigned long long)worst->size_bytes,
		    (unsigned long long)worst->retx_pkts, (unsigned long long)worst->timeouts);
	const struct sim_port *drop = NULL, *queue = NULL, *paused = NULL;
	uint32_t npaused = 0;
	for (uint32_t i = 0; i < s->nports; i++) {
		const struct sim_port *p = s->ports[i];
		if (p->drops && (!drop || p->drops > drop->drops))
			drop = p;
		if (p->q_bytes && (!queue || p->q_bytes > queue->q_bytes))
			queue = p;
		if (p->paused) {
			npaused++;
			if (!paused)
				paused = p;
		}
	}
	char name[80];
	if (drop) {
		port_name(s, drop, name, sizeof(name));
		ADD("; most drops at port %s (%llu)", name, (unsigned long long)drop->drops);
	}
	if (queue) {
		port_name(s, queue, name, sizeof(name));
		ADD("; largest queue at port %s (%llu bytes, %u packets)", name,
		    (unsigned long long)queue->q_bytes, queue->q.n);
	}
	if (paused) {
		port_name(s, paused, name, sizeof(name));
		ADD("; %u ports paused by PFC (first: %s)", npaused, name);
	}
	ADD("; a data packet is %u bytes on the wire", s->cfg.mtu_bytes + s->cfg.header_bytes);
#undef ADD
}

static void stall(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void stall(struct sim *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(s->stall, sizeof(s->stall), fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof(s->stall))
		stall_diagnose(s, (size_t)n);
	s->stalled = true;
	s->finished = true;
}


static void watchdog_arm(struct sim *s, uint64_t progress)
{
	s->wd_progress = progress;
	s->wd_progress_ps = s->now;
	s->wd_time = s->wd_idle_ps ? s->now + s->wd_idle_ps : SIM_TIME_NEVER;
}

static void watchdog(struct sim *s)
{
	uint64_t progress = s->rx_new_pkts + s->flows_done + sim_modules_progress(s);
	bool busy = !all_done(s) && (s->flows_started > s->flows_done || s->hk.run_done);
	if (s->events >= s->wd_next) {
		uint64_t every = s->cfg.watchdog_events + 4ull * s->nflows;
		if (s->now == s->wd_now) {
			stall(s, "watchdog: simulated time stuck at %.6f us for %llu events",
			      sim_time_to_us(s->now), (unsigned long long)every);
			return;
		}
		if (busy && progress == s->wd_progress) {
			stall(s, "watchdog: no data delivered in %llu events (simulated %.3f to %.3f us)",
			      (unsigned long long)every, sim_time_to_us(s->wd_progress_ps),
			      sim_time_to_us(s->now));
			return;
		}
		s->wd_now = s->now;
		s->wd_next = s->events + every;
	} else if (busy && progress == s->wd_progress) { /* simulated time passed wd_time */
		stall(s, "watchdog: nothing delivered for %.3f us of simulated time (%.3f to %.3f us)",
		      sim_time_to_us(s->now - s->wd_progress_ps), sim_time_to_us(s->wd_progress_ps),
		      sim_time_to_us(s->now));
		return;
	}
	if (progress != s->wd_progress || !busy || s->now >= s->wd_time)
		watchdog_arm(s, progress);
}

const char *sim_run_error(const struct sim *s)
{
	if (s->stalled)
		return s->stall;
	return s->err[0] ? s->err : NULL;
}

int sim_run_until(struct sim *s, sim_time_ps until)
{
	struct sim_evq *q = &s->evq;
	if (until > s->stop_ps)
		until = s->stop_ps;
	while (!s->finished) {
		if (q->n == 0 || all_done(s)) {
			s->finished = true;
			break;
		}
		if (sim_evq_top_time(q) > until) {
			if (until >= s->stop_ps) {
				s->now = s->stop_ps;
				s->finished = true;
			}
			break;
		}
		struct sim_event *ev = sim_evq_pop(q);
		if (!ev) {
			s->finished = true;
			sim_set_err(s, "out of memory in the event queue");
			break;
		}
		/* Start fetching the objects of the next events (usually packets last touched a
		 * link latency ago, long out of the caches) while this one runs: misses overlap. */
		struct sim_event *nx = sim_evq_peek(q, SIM_PREFETCH_AHEAD);
		if (nx) {
			__builtin_prefetch(nx);
			__builtin_prefetch((char *)nx + 64);
		}
		s->now = ev->t;
		s->events++;
		ev->fn(s, ev);
		if (s->events >= s->wd_next || s->now >= s->wd_time)
			watchdog(s);
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
			sim_time_ps horizon = sim_evq_top_time(&s->evq);
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
