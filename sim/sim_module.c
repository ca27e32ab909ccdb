/* sim/sim_module.c: the module registry and the core's side of the module hooks: which modules a
 * configuration enables, their creation and destruction, the per-packet hooks resolved into
 * struct sim_hooks, and the calls that walk every enabled module. The models themselves live in
 * their own files (sim_ccm.c, sim_osf*.c, sim_fail.c, sim_ina*.c, sim_dctcp.c, sim_hpcc.c,
 * sim_tc.c, sim_trace*.c). */
#include <errno.h>

#include "sim_int.h"

#define SIM_MODULE_ADDR(name) &sim_##name##_ops,
const struct sim_module_ops *const sim_modules[SIM_MOD_COUNT] = { SIM_MODULE_LIST(SIM_MODULE_ADDR) };
#undef SIM_MODULE_ADDR

/* ---- several modules on one hot hook: call them all in registration order ---------------- */
#define EACH_ON(s, h) \
	for (unsigned i_ = 0; i_ < (s)->non; i_++) \
		for (const struct sim_module_ops *h = (s)->on[i_]; h; h = NULL)

static bool all_host_rx_any(struct sim *s, struct sim_host *h, struct sim_pkt *p)
{
	EACH_ON(s, m)
		if (m->host_rx_any && m->host_rx_any(s, h, p))
			return true;
	return false;
}

static void all_data_tx(struct sim *s, struct sim_flow *f, struct sim_pkt *p)
{
	EACH_ON(s, m)
		if (m->data_tx)
			m->data_tx(s, f, p);
}

static bool all_ecn_ok(struct sim *s, const struct sim_pkt *p)
{
	EACH_ON(s, m)
		if (m->ecn_ok && !m->ecn_ok(s, p))
			return false;
	return true;
}

static void all_data_dequeue(struct sim *s, struct sim_port *port, struct sim_pkt *p)
{
	EACH_ON(s, m)
		if (m->data_dequeue)
			m->data_dequeue(s, port, p);
}

static void all_port_event(struct sim *s, const struct sim_port *port, const struct sim_pkt *p,
			   enum sim_port_ev ev)
{
	EACH_ON(s, m)
		if (m->port_event)
			m->port_event(s, port, p, ev);
}

static bool all_link_lost(struct sim *s, struct sim_pkt *p)
{
	EACH_ON(s, m)
		if (m->link_lost && m->link_lost(s, p))
			return true;
	return false;
}

static void all_data_rx(struct sim *s, struct sim_flow *f, const struct sim_pkt *p)
{
	EACH_ON(s, m)
		if (m->data_rx)
			m->data_rx(s, f, p);
}

static void all_ack_tx(struct sim *s, struct sim_flow *f, struct sim_pkt *ack)
{
	EACH_ON(s, m)
		if (m->ack_tx)
			m->ack_tx(s, f, ack);
}

static void all_ack_rx(struct sim *s, struct sim_flow *f, const struct sim_pkt *ack)
{
	EACH_ON(s, m)
		if (m->ack_rx)
			m->ack_rx(s, f, ack);
}

static bool all_run_done(const struct sim *s)
{
	EACH_ON(s, m)
		if (m->run_done && !m->run_done(s))
			return false;
	return true;
}

/* The one function of the enabled modules that has hook `fn`, `all` if several have it. */
#define RESOLVE(s, fn, all) do { \
		unsigned n_ = 0; \
		EACH_ON(s, m) \
			if (m->fn) { \
				(s)->hk.fn = m->fn; \
				n_++; \
			} \
		if (n_ > 1) \
			(s)->hk.fn = (all); \
	} while (0)

/* The first enabled module that has hook `fn` decides alone. */
#define RESOLVE_FIRST(s, fn) do { \
		for (unsigned i_ = (s)->non; i_-- > 0;) \
			if ((s)->on[i_]->fn) \
				(s)->hk.fn = (s)->on[i_]->fn; \
	} while (0)

static void resolve_hooks(struct sim *s)
{
	RESOLVE(s, host_rx_any, all_host_rx_any);
	RESOLVE_FIRST(s, host_next);
	RESOLVE(s, data_tx, all_data_tx);
	RESOLVE_FIRST(s, route);
	RESOLVE(s, ecn_ok, all_ecn_ok);
	RESOLVE(s, data_dequeue, all_data_dequeue);
	RESOLVE_FIRST(s, qdisc_enqueue);
	RESOLVE_FIRST(s, qdisc_dequeue);
	RESOLVE(s, port_event, all_port_event);
	RESOLVE(s, link_lost, all_link_lost);
	RESOLVE(s, run_done, all_run_done);
	RESOLVE(s, data_rx, all_data_rx);
	RESOLVE(s, ack_tx, all_ack_tx);
	RESOLVE(s, ack_rx, all_ack_rx);
	RESOLVE_FIRST(s, ecn_mark);
	EACH_ON(s, m)
		for (unsigned t = m->pkt_lo; m->pkt_lo && t <= m->pkt_hi && t < SIM_PKT_NTYPES; t++)
			s->pkt_owner[t] = m;
}

/* ---- life cycle ---------------------------------------------------------------------------- */
int sim_modules_create(struct sim *s, bool start)
{
	if (!start) {
		s->non = 0;
		for (unsigned i = 0; i < SIM_MOD_COUNT; i++)
			if (sim_modules[i]->enabled && sim_modules[i]->enabled(&s->cfg))
				s->on[s->non++] = sim_modules[i];
	}
	EACH_ON(s, m) {
		int (*fn)(struct sim *) = start ? m->start : m->create;
		int rc = fn ? fn(s) : 0;
		if (rc)
			return rc;
	}
	if (start)
		resolve_hooks(s);
	return 0;
}

void sim_modules_destroy(struct sim *s)
{
	for (unsigned i = 0; i < SIM_MOD_COUNT; i++)
		if (s->mod[i] && sim_modules[i]->destroy)
			sim_modules[i]->destroy(s);
}

/* ---- events that are not per packet: walk the enabled modules ------------------------------ */
void sim_modules_pkt_drop(struct sim *s, struct sim_pkt *p, const struct sim_port *at,
			  enum sim_drop_why why)
{
	EACH_ON(s, m)
		if (m->pkt_drop)
			m->pkt_drop(s, p, at, why);
}

void sim_modules_rate_cut(struct sim *s, struct sim_flow *f)
{
	EACH_ON(s, m)
		if (m->rate_cut)
			m->rate_cut(s, f);
}

void sim_modules_flow_recv_done(struct sim *s, struct sim_flow *f)
{
	EACH_ON(s, m)
		if (m->flow_recv_done)
			m->flow_recv_done(s, f);
}

void sim_modules_flow_done(struct sim *s, struct sim_flow *f)
{
	EACH_ON(s, m)
		if (m->flow_done)
			m->flow_done(s, f);
}

void sim_modules_flow_start(struct sim *s, struct sim_flow *f)
{
	EACH_ON(s, m)
		if (m->flow_start)
			m->flow_start(s, f);
}

uint64_t sim_modules_progress(const struct sim *s)
{
	uint64_t n = 0;
	EACH_ON(s, m)
		if (m->progress)
			n += m->progress(s);
	return n;
}

void sim_modules_adjust_stats(const struct sim *s, struct sim_stats *st)
{
	EACH_ON(s, m)
		if (m->adjust_stats)
			m->adjust_stats(s, st);
}

int sim_modules_write_outputs(struct sim *s, const char *dir)
{
	EACH_ON(s, m) {
		int rc = m->write_outputs ? m->write_outputs(s, dir) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

void sim_modules_summary_json(const struct sim *s, FILE *f)
{
	EACH_ON(s, m)
		if (m->summary_json)
			m->summary_json(s, f);
}

void sim_modules_ts_sample(struct sim *s)
{
	EACH_ON(s, m)
		if (m->ts_sample)
			m->ts_sample(s);
}

bool sim_module_link_change(struct sim *s, struct sim_port *port, bool down)
{
	bool rerouted = false;
	EACH_ON(s, m)
		if (m->link_change && m->link_change(s, port, down))
			rerouted = true;
	return rerouted;
}

double sim_module_port_loss(const struct sim *s, const struct sim_port *port)
{
	EACH_ON(s, m)
		if (m->port_loss)
			return m->port_loss(s, port);
	return 0;
}
