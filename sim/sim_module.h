/* sim/sim_module.h: the interface between the simulator core and its model modules (CCM, OSF,
 * INA, failures...). A module fills one `struct sim_module_ops` with its configuration keys and
 * the hooks it needs; the core calls the hooks of the enabled modules and knows nothing else
 * about them. The registry (SIM_MODULE_LIST) is the one line a new module adds here. */
#ifndef INCA_SIM_MODULE_H
#define INCA_SIM_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sim.h"

/* Every module, in registration order: the order of their configuration sections in dumps
 * (params.ini, summary.json, --params) and the order in which the core calls their hooks.
 * X(name) refers to `const struct sim_module_ops sim_<name>_ops` and defines SIM_MOD_<name>,
 * the module's slot in struct sim's mod[] (its state). */
#define SIM_MODULE_LIST(X) X(ccm) X(osf) X(fail) X(ina) X(dctcp) X(hpcc) X(tc) X(trace)

#define SIM_MODULE_ENUM(name) SIM_MOD_##name,
enum sim_module_id { SIM_MODULE_LIST(SIM_MODULE_ENUM) SIM_MOD_COUNT };
#undef SIM_MODULE_ENUM

/* ---- configuration keys ------------------------------------------------------------------- */
/* One row of the parameter table (sim_config.c holds the core's rows, each module its own):
 * defaults, INI parsing, overrides, dumps and --params all come from these rows. */
enum sim_param_type { SIM_P_U64, SIM_P_U32, SIM_P_DBL, SIM_P_BOOL, SIM_P_ENUM, SIM_P_STR };
struct sim_param {
	const char *section, *key;
	enum sim_param_type type;
	size_t off;                 /* offsetof(struct sim_config, field) */
	const char *def;
	const char *const *names;   /* SIM_P_ENUM: value names, NULL-terminated */
	const char *help;
};
#define SIM_PARAM_FIELD(f) offsetof(struct sim_config, f)

/* ---- hooks ------------------------------------------------------------------------------- */
struct sim;
struct sim_switch;
struct sim_host;
struct sim_port;
struct sim_pkt;
struct sim_flow;
struct sim_rgroup;

/* Why a packet was dropped by the fabric (pkt_drop). */
enum sim_drop_why {
	SIM_DROP_PORT_DOWN,   /* dequeued at a port whose link is down */
	SIM_DROP_ROUTED_DOWN, /* routed onto a port whose link is down (before it was queued) */
	SIM_DROP_LINK_LOST,   /* lost on the link (link_lost said so) */
};

/* A packet event at a port (port_event). Enqueue, mark and the admission drops are those of
 * the switch pipeline (sim_net.c); tx is every packet a port, switch or host, starts to send. */
enum sim_port_ev {
	SIM_PEV_ENQUEUE,       /* admitted to a switch egress queue (data or control) */
	SIM_PEV_TX,            /* leaves the port: its serialisation starts */
	SIM_PEV_MARK,          /* ECN CE set on enqueue (before its enqueue event) */
	SIM_PEV_DROP_QUEUE,    /* refused: egress data queue full (switch.buffer_bytes) */
	SIM_PEV_DROP_SHARED,   /* refused: switch shared buffer full */
	SIM_PEV_DROP_HEADROOM, /* refused: PFC headroom of the ingress exceeded */
};

/* Every hook may be NULL. Unless said otherwise a hook of a module is called only while that
 * module is enabled, after its create and before its destroy. Hooks marked "per packet" are on
 * the hot path: the core tests one pointer (resolved once at sim_create) when no enabled module
 * provides them. */
struct sim_module_ops {
	const char *name;
	/* Configuration keys: rows of the module's own sections (quiet: left out of dumps while
	 * at their default, so runs without the module write exactly what they did before). */
	const struct sim_param *params;
	size_t nparams;
	/* Whether the configuration asks for the module. Called on every sim_create. */
	bool (*enabled)(const struct sim_config *c);
	/* Packet types [pkt_lo, pkt_hi] (enum sim_pkt_type, pkt_lo > SIM_PKT_CNP) belong to the
	 * module: switch_rx / host_rx get them. pkt_lo = 0: none. */
	uint8_t pkt_lo, pkt_hi;

	/* Life cycle. create: topology and workload are built, flows' start events not yet
	 * scheduled (a module that adds or reuses flows does it here). start: after the flows'
	 * start events (a module schedules its own timers here, behind them). Either stores the
	 * module's state in s->mod[SIM_MOD_<name>]; returns 0 or -errno (reason in s->err), and
	 * destroy is then still called. destroy: whenever s->mod[] of the module is set. */
	int (*create)(struct sim *s);
	int (*start)(struct sim *s);
	void (*destroy)(struct sim *s);

	/* Packets of the module's own types arriving at a switch / a host; the hook takes p. */
	void (*switch_rx)(struct sim *s, struct sim_switch *sw, struct sim_pkt *p);
	void (*host_rx)(struct sim *s, struct sim_host *h, struct sim_pkt *p);
	/* Per packet: every packet arriving at a host, before the transport and before host_rx.
	 * Returns true when it took p. */
	bool (*host_rx_any)(struct sim *s, struct sim_host *h, struct sim_pkt *p);
	/* Per packet: the NIC scheduler of host h (replaces the transport's round robin; the
	 * first enabled module that has it wins). Same contract as sim_host_next. */
	struct sim_pkt *(*host_next)(struct sim *s, struct sim_host *h, sim_time_ps *wake);
	/* Per packet: a data packet the transport just built (p->flow = f), before it is sent. */
	void (*data_tx)(struct sim *s, struct sim_flow *f, struct sim_pkt *p);
	/* Per packet: egress port choice for a data packet at a switch with candidates cand[0 ..
	 * g->n) (the first enabled module that has it wins). Returns an index into sw's ports. */
	uint16_t (*route)(struct sim *s, struct sim_switch *sw, struct sim_pkt *p,
			  const struct sim_rgroup *g, const uint16_t *cand);
	/* Per packet: may this data packet be ECN-marked (every enabled module must agree)? */
	bool (*ecn_ok)(struct sim *s, const struct sim_pkt *p);
	/* Per packet: a data packet leaves the data queue of switch egress port `port`. */
	void (*data_dequeue)(struct sim *s, struct sim_port *port, struct sim_pkt *p);
	/* Per packet: the egress data queues of switch ports, in place of the core's one FIFO per
	 * port (the first enabled module that has them wins; a module fills both). qdisc_enqueue
	 * takes a data packet routed to `out`: admission (or drop and free), ECN, queueing, kick;
	 * it keeps out->q_bytes, out->q.n (a count only: the packets are in the module's queues),
	 * out->q_max_bytes and sw->shared_used as the core does. qdisc_dequeue: the data packet
	 * `port` sends next, NULL if none may go now; the core then does its share of the dequeue
	 * (q_bytes, shared buffer, data_dequeue) except out->q.n, which the module keeps. */
	void (*qdisc_enqueue)(struct sim *s, struct sim_switch *sw, struct sim_port *out,
			      struct sim_pkt *p);
	struct sim_pkt *(*qdisc_dequeue)(struct sim *s, struct sim_port *port);
	/* Per packet: an event of p at `port` (enum sim_port_ev), for modules that watch ports. */
	void (*port_event)(struct sim *s, const struct sim_port *port, const struct sim_pkt *p,
			   enum sim_port_ev ev);
	/* Per packet: p arrived over the link it was on; true = it is lost there (the core then
	 * reports a SIM_DROP_LINK_LOST drop and frees it). */
	bool (*link_lost)(struct sim *s, struct sim_pkt *p);
	/* A packet is dropped at port `at` for the reason `why` (the core frees it afterwards). */
	void (*pkt_drop)(struct sim *s, struct sim_pkt *p, const struct sim_port *at,
			 enum sim_drop_why why);
	/* Transport events: a CNP cut flow f's rate; f's receiver has every byte; f is done
	 * (sender and receiver; nothing in the core touches f after this hook). */
	void (*rate_cut)(struct sim *s, struct sim_flow *f);
	void (*flow_recv_done)(struct sim *s, struct sim_flow *f);
	void (*flow_done)(struct sim *s, struct sim_flow *f);
	/* Congestion control in the transport (host.cc = dctcp | hpcc; sim_host.c calls these).
	 * flow_start: f starts (or restarts) sending; its window f->cwnd_bytes and pacing rate
	 * f->rc may be set here. Per packet: data_rx: f's receiver got data packet p (before the
	 * ACK it may trigger); ack_tx: f's receiver built ACK or NACK `ack` (before it is sent);
	 * ack_rx: f's sender took in ACK or NACK `ack` (snd_una has moved; the NIC is kicked
	 * after, so a window or rate set here applies at once). */
	void (*flow_start)(struct sim *s, struct sim_flow *f);
	void (*data_rx)(struct sim *s, struct sim_flow *f, const struct sim_pkt *p);
	void (*ack_tx)(struct sim *s, struct sim_flow *f, struct sim_pkt *ack);
	void (*ack_rx)(struct sim *s, struct sim_flow *f, const struct sim_pkt *ack);
	/* Per packet: whether data packet p, entering the data queue of switch port `out`, is
	 * CE-marked, in place of the RED marking (the first enabled module that has it decides;
	 * asked only with switch.ecn, for ECN-capable packets every ecn_ok hook allows). qbytes:
	 * the bytes of the queue p joins, before it (out->q_bytes, or its class's queue with
	 * traffic classes). */
	bool (*ecn_mark)(struct sim *s, const struct sim_port *out, const struct sim_pkt *p,
			 uint64_t qbytes);
	/* Checked after every event: may the run end? When some enabled module has it, the run
	 * ends once every such module says so (instead of "every flow done"), so it must count
	 * the flows it does not own. */
	bool (*run_done)(const struct sim *s);

	/* A module changed the fabric (sim_module_link_change): the link of `port` went down or
	 * came back. Returns true if the module reroutes around it by itself. */
	bool (*link_change)(struct sim *s, struct sim_port *port, bool down);
	/* Loss probability of the link `port` transmits on (sim_module_port_loss). */
	double (*port_loss)(const struct sim *s, const struct sim_port *port);

	/* A count that grows whenever the module's own traffic gets somewhere (results
	 * delivered...): the progress watchdog (sim.c) adds it to the transport's. */
	uint64_t (*progress)(const struct sim *s);

	/* Results: adjust the core's figures (sim_get_stats), write the module's files into dir
	 * (sim_write_outputs; returns 0 or -errno). summary_json: members of its own that the
	 * module adds to summary.json's top-level object (each line "  \"key\": value,\n"). */
	void (*adjust_stats)(const struct sim *s, struct sim_stats *st);
	int (*write_outputs)(struct sim *s, const char *dir);
	void (*summary_json)(const struct sim *s, FILE *f);
	/* Every output.timeseries_us, when the core samples timeseries.csv (sim_output.c). */
	void (*ts_sample)(struct sim *s);
};

#define SIM_MODULE_EXTERN(name) extern const struct sim_module_ops sim_##name##_ops;
SIM_MODULE_LIST(SIM_MODULE_EXTERN)
#undef SIM_MODULE_EXTERN

/* Every registered module, in registration order (sim_module.c). */
extern const struct sim_module_ops *const sim_modules[SIM_MOD_COUNT];

/* The hot hooks of the enabled modules, resolved once at sim_create: NULL when no enabled
 * module has the hook, the module's own function when one has it, a function of sim_module.c
 * that calls them all in registration order when several have it. */
struct sim_hooks {
	bool (*host_rx_any)(struct sim *s, struct sim_host *h, struct sim_pkt *p);
	struct sim_pkt *(*host_next)(struct sim *s, struct sim_host *h, sim_time_ps *wake);
	void (*data_tx)(struct sim *s, struct sim_flow *f, struct sim_pkt *p);
	uint16_t (*route)(struct sim *s, struct sim_switch *sw, struct sim_pkt *p,
			  const struct sim_rgroup *g, const uint16_t *cand);
	bool (*ecn_ok)(struct sim *s, const struct sim_pkt *p);
	void (*data_dequeue)(struct sim *s, struct sim_port *port, struct sim_pkt *p);
	void (*qdisc_enqueue)(struct sim *s, struct sim_switch *sw, struct sim_port *out,
			      struct sim_pkt *p);
	struct sim_pkt *(*qdisc_dequeue)(struct sim *s, struct sim_port *port);
	void (*port_event)(struct sim *s, const struct sim_port *port, const struct sim_pkt *p,
			   enum sim_port_ev ev);
	bool (*link_lost)(struct sim *s, struct sim_pkt *p);
	bool (*run_done)(const struct sim *s);
	void (*data_rx)(struct sim *s, struct sim_flow *f, const struct sim_pkt *p);
	void (*ack_tx)(struct sim *s, struct sim_flow *f, struct sim_pkt *ack);
	void (*ack_rx)(struct sim *s, struct sim_flow *f, const struct sim_pkt *ack);
	bool (*ecn_mark)(struct sim *s, const struct sim_port *out, const struct sim_pkt *p,
			 uint64_t qbytes);
};

/* sim_module.c: called by the core. */
/* Create the enabled modules (phase create or start, see the ops); 0 or -errno. */
int sim_modules_create(struct sim *s, bool start);
void sim_modules_destroy(struct sim *s);
void sim_modules_pkt_drop(struct sim *s, struct sim_pkt *p, const struct sim_port *at,
			  enum sim_drop_why why);
void sim_modules_rate_cut(struct sim *s, struct sim_flow *f);
void sim_modules_flow_recv_done(struct sim *s, struct sim_flow *f);
void sim_modules_flow_done(struct sim *s, struct sim_flow *f);
void sim_modules_flow_start(struct sim *s, struct sim_flow *f);
void sim_modules_adjust_stats(const struct sim *s, struct sim_stats *st);
uint64_t sim_modules_progress(const struct sim *s);
int sim_modules_write_outputs(struct sim *s, const char *dir);
void sim_modules_summary_json(const struct sim *s, FILE *f);
void sim_modules_ts_sample(struct sim *s);

/* Called by modules, about other modules. */
/* The link of `port` (both ends) went down / came back; true if an enabled module reroutes
 * around it by itself. */
bool sim_module_link_change(struct sim *s, struct sim_port *port, bool down);
/* Loss probability of the link `port` transmits on, 0 when no enabled module models loss. */
double sim_module_port_loss(const struct sim *s, const struct sim_port *port);

#endif
