/* sim/sim_int.h: internal data structures of the simulator shared by its modules (event queue,
 * packets, ports, switches, hosts, flows, triggers) and the internal calls between modules.
 * Not installed; only the sim sources and tests include it. */
#ifndef INCA_SIM_INT_H
#define INCA_SIM_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "sim.h"
#include "sim_module.h"
#include "util/util.h"

#define SIM_CONTAINER_OF(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

/* ---- events ------------------------------------------------------------------------------ */
struct sim;
struct sim_event;
typedef void (*sim_event_fn)(struct sim *s, struct sim_event *ev);

/* Intrusive event: embedded in the object it concerns (packet, port, flow), so scheduling
 * never allocates. heap_idx is the slot in the heap or SIM_EV_IDLE; it makes cancel O(log n). */
#define SIM_EV_IDLE UINT32_MAX
struct sim_event {
	sim_event_fn fn;
	uint32_t heap_idx;       /* slot in the heap (cancellable events only) */
	sim_time_ps t;
};

/* 4-ary min-heap keyed by (time, sequence): the sequence number breaks ties in scheduling
 * order, which makes a run bit-for-bit reproducible. See sim_event.c for the layout. */
struct sim_heap {
	void *kbase;             /* allocation holding the keys */
	unsigned __int128 *key;  /* time << 64 | seq << 1 | cancellable */
	struct sim_event **ev;
	uint32_t n, cap;
	uint64_t seq;
};
int sim_heap_init(struct sim_heap *h, uint32_t cap);
void sim_heap_free(struct sim_heap *h);
/* ev must be idle. A non-cancellable event (packet arrival) never records its slot, so
 * sim_heap_remove and sim_ev_pending must not be used on it. Returns 0 or -ENOMEM. */
int sim_heap_push(struct sim_heap *h, struct sim_event *ev, sim_time_ps t, bool cancellable);
void sim_heap_remove(struct sim_heap *h, struct sim_event *ev);
/* Time of the earliest event (SIM_TIME_NEVER if empty). */
sim_time_ps sim_heap_top_time(struct sim_heap *h);
/* Pops the earliest event (NULL if empty). */
struct sim_event *sim_heap_pop(struct sim_heap *h);

static inline bool sim_ev_pending(const struct sim_event *ev) { return ev->heap_idx != SIM_EV_IDLE; }
static inline void sim_ev_init(struct sim_event *ev, sim_event_fn fn)
{
	ev->fn = fn;
	ev->heap_idx = SIM_EV_IDLE;
	ev->t = 0;
}

/* The simulator's event queue: the same order as one heap keyed by (time, sequence), but
 * events that can never be cancelled (packets on wires, ports' end of transmission: nearly
 * all of them) go into a timing wheel of SIM_EVQ_NB buckets, each 2^SIM_EVQ_SHIFT ps wide;
 * the bucket being run is sorted once, and what is pushed into it meanwhile goes into a small
 * heap. Cancellable events, and any beyond the wheel's horizon (~17 us), go into a second heap.
 * A pop takes the smallest of the three, so events run in exactly the order of a single
 * heap; what changes is the cost: a heap of every pending event costs a cache miss per level
 * on each pop at 65 k hosts, and the sorted window lets the run loop fetch the objects of the
 * next events ahead (sim_evq_peek). See sim_event.c. */
#define SIM_EVQ_SHIFT 12
#define SIM_EVQ_NB (1u << 12)
struct sim_evq_blk;
struct sim_evq_ent {
	sim_time_ps t;
	uint64_t seq;
	struct sim_event *ev;
};
struct sim_evq {
	struct sim_evq_ent *run, *tmp; /* the current window sorted; sort buffer */
	uint32_t run_i, run_n, run_cap;
	struct sim_heap cur;     /* pushed into the current window after it was sorted */
	struct sim_heap far;     /* cancellable events, and those beyond the wheel */
	struct sim_evq_blk *blk; /* block pool; a bucket is a list of blocks (index 0 = none) */
	uint32_t nblk, capblk, free_blk;
	uint32_t *head, *tail;   /* per bucket: first and last block */
	uint64_t *bits;          /* buckets holding events */
	uint64_t cur_w;          /* current window (time >> SIM_EVQ_SHIFT) */
	uint64_t wheel_n;        /* events in buckets */
	uint64_t n;              /* events in the queue */
	uint64_t seq;            /* next sequence number */
};
int sim_evq_init(struct sim_evq *q);
void sim_evq_free(struct sim_evq *q);
/* As sim_heap_push / sim_heap_remove (same contracts). */
int sim_evq_push(struct sim_evq *q, struct sim_event *ev, sim_time_ps t, bool cancellable);
void sim_evq_remove(struct sim_evq *q, struct sim_event *ev);
sim_time_ps sim_evq_top_time(struct sim_evq *q);
/* NULL if empty (or, with n > 0, out of memory for the next window). */
struct sim_event *sim_evq_pop(struct sim_evq *q);
/* An event that will run soon, k events ahead in the current window (NULL if unknown), for
 * prefetching; no side effect. */
static inline struct sim_event *sim_evq_peek(const struct sim_evq *q, uint32_t k)
{
	return q->run_i + k < q->run_n ? q->run[q->run_i + k].ev : NULL;
}

/* ---- packets ----------------------------------------------------------------------------- */
enum sim_pkt_type {
	SIM_PKT_DATA, SIM_PKT_ACK, SIM_PKT_NACK, SIM_PKT_CNP,
	/* model modules' own packets (their ops' pkt_lo..pkt_hi; see sim_module.h) */
	SIM_PKT_CCM_NOTIFY,      /* sim_ccm.c: draft-lyu notification message (types 1..3) */
	SIM_PKT_OSF_CREDIT_REQ, SIM_PKT_OSF_CREDIT_ACK, SIM_PKT_OSF_CREDIT_REJ,
	SIM_PKT_OSF_LINKQ,       /* sim_osf.c: link-quality / failure report to the topology manager */
	SIM_PKT_INA_DATA, SIM_PKT_INA_RESULT, /* sim_ina.c: in-network aggregation (lib/agg engine) */
	SIM_PKT_NTYPES
};
#define SIM_PKT_MOD_FIRST SIM_PKT_CCM_NOTIFY
#define SIM_PKT_ECT 0x01     /* ECN capable */
#define SIM_PKT_CE 0x02      /* congestion experienced */
#define SIM_PKT_LOSSLESS 0x04 /* counted in ingress (PFC) accounting of the switch holding it */
/* CCM (sim_ccm.c) */
#define SIM_PKT_CCM_CC 0x08   /* coordination tag: CC indicator (the flow causes incast) */
/* window-based cc (sim_dctcp.c, sim_hpcc.c) */
#define SIM_PKT_ACKREQ 0x10   /* data: the receiver ACKs it at once (RoCE's BTH AckReq bit), so
			       * that a sender whose window closed is not left waiting for an ACK
			       * the receiver's coalescing (host.ack_every) holds back */

struct sim_port;
struct sim_pkt {
	struct sim_event ev;     /* arrival at the far end of the link it is on */
	struct sim_pkt *next;    /* queue / free list link */
	struct sim_port *rx_port;/* port it arrives on / arrived on (ingress for PFC accounting) */
	uint32_t flow;           /* flow index */
	uint32_t psn;            /* data: packet sequence number; ACK/NACK: cumulative expected */
	uint32_t sack_psn;       /* ACK: the PSN that triggered it (selective repeat) */
	uint32_t spray_ctr;      /* spraying counter, one mixed-radix digit per hop (sim_net.c) */
	uint64_t sack_bits;      /* SR ACK: bit i set = PSN psn + 1 + i received */
	uint32_t size_bytes;     /* on the wire */
	uint32_t src, dst;       /* host ids */
	uint16_t entropy;
	uint8_t type, flags;
	uint8_t tc;               /* data: traffic class (set by sim_tc.c while it is enabled) */
	/* CCM (sim_ccm.c) */
	uint32_t ccm_ar;          /* coordination tag: AR indicator, node id + 1 of the upstream AR point (0 = none) */
	/* OSF (sim_osf.c): valid only in packets OSF stamped (data under OSF, credit messages) */
	uint32_t osf_grant;       /* credit grant index + 1 (0 = none) */
	uint8_t osf_hop;          /* credit messages: index of the current node's port in the path */
};

/* Module data carried by packets: s->pkt_ext_bytes bytes right behind every struct sim_pkt
 * (none unless a module reserved some in its create hook, so packets are no larger in runs
 * without it). The core neither copies nor clears them: a module initialises its part when it
 * stamps a packet, and packets copied by value (on the stack) have none. */
static inline void *sim_pkt_ext(struct sim_pkt *p, uint32_t off)
{
	return (char *)(p + 1) + off;
}

struct sim_pktq {
	struct sim_pkt *head, *tail;
	uint32_t n;
};

/* ---- ports, nodes ------------------------------------------------------------------------ */
enum sim_node_kind { SIM_NODE_HOST, SIM_NODE_SWITCH };

struct sim_node {
	uint32_t id;             /* hosts 0..H-1, then switches */
	uint8_t kind, tier;      /* tier: 0 host, 1 ToR/leaf/L1, 2 agg/spine/L2, 3 core/L3, 4 L4 */
	uint32_t nports;
	struct sim_port *ports;
	char name[32];
};

struct sim_port {
	struct sim_node *node;
	struct sim_port *peer;
	uint32_t id;             /* global port index (output files) */
	uint16_t idx;            /* index within node */
	uint8_t link_tier;       /* 0 host link, 1..3 */
	bool paused;             /* peer sent PFC pause: data may not start */
	bool pause_sent;         /* we paused our peer (ingress over XOFF) */
	bool is_host;            /* a host's NIC port (its tx_ev may be cancelled) */
	bool down;               /* failed link (connection matrix "failure"): not routed over */
	bool tx_armed;           /* tx_ev is queued for the end of a transmission (uncancellable) */
	uint64_t rate_bps;
	sim_time_ps latency_ps;
	sim_time_ps busy_until;
	struct sim_event tx_ev;  /* port may start its next packet */
	struct sim_pktq q, cq;   /* data (lossy or lossless class) and control (strict priority);
				  * with a module's qdisc (sim_tc.c) q is only a count, q.n */
	uint64_t q_bytes;        /* data queue bytes */
	uint64_t in_bytes;       /* bytes received here still buffered in this switch (PFC) */
	uint64_t headroom_bytes; /* PFC headroom of this ingress port */
	/* counters */
	uint64_t tx_bytes, tx_pkts, drops, ecn_marks, pauses_sent, q_max_bytes;
	uint64_t ts_last_tx_bytes;
};

struct sim_rgroup {          /* hosts [lo, hi) leave through one of ports[off .. off+n) */
	uint32_t lo, hi, off;
	uint16_t n;
	uint16_t rr;             /* spray: next port (round robin), random start drawn at build */
};

struct sim_flowlet {
	sim_time_ps last_ps;
	uint16_t choice;
	uint16_t valid;
};

struct sim_switch {
	struct sim_node n;
	struct util_rng rng;
	uint64_t salt;           /* per-switch ECMP salt */
	uint64_t shared_used;
	struct sim_rgroup *groups;
	uint32_t ngroups;
	uint16_t *gports;
	struct sim_flowlet *flowlets; /* only with flowlet routing */
	uint64_t *spray_used;    /* only with adaptive: per-flow ports used in this round */
	uint64_t drops_queue, drops_shared, drops_headroom;
};

struct sim_flow;
struct sim_host {
	struct sim_node n;       /* n.ports points at `port` */
	struct sim_port port;
	struct sim_flow *active; /* circular list of flows with data to send (round robin) */
	uint32_t nactive;
};

/* ---- flows ------------------------------------------------------------------------------- */
enum sim_flow_state { SIM_FLOW_WAIT, SIM_FLOW_ACTIVE, SIM_FLOW_DONE };

struct sim_flow {
	uint32_t idx, user_id, src, dst;
	uint64_t size_bytes;
	uint32_t npkts;
	uint8_t state, in_active;
	bool recv_done, send_done;
	bool endless;            /* htsim "size 0": sends until the stop time */
	uint8_t tc;              /* traffic class (sim_tc.c): htsim prio, workload.traffic_class */
	uint16_t entropy;
	sim_time_ps start_ps, finish_ps, sender_done_ps, ideal_ps;
	struct sim_event start_ev, rto_ev, rate_ev;
	struct sim_flow *prev_active, *next_active;
	/* sender */
	uint64_t cwnd_bytes;     /* congestion window (payload bytes in flight) of a window-based
				  * cc module (0 = none; host.max_inflight_bytes still applies) */
	uint32_t snd_nxt, snd_una, snd_high, retx_ptr, recover;
	uint32_t spray_seq;      /* data packets emitted (retransmissions included) */
	uint32_t ctl_seq;        /* ACK/NACK/CNP sent by the receiver (spraying counter) */
	bool retx_mode;          /* SR: resending holes from retx_ptr before new data */
	uint8_t *acked;          /* SR: per-PSN bitmap */
	sim_time_ps next_tx_ps, rto_deadline;
	/* DCQCN reaction point (rates in bit/s) */
	double rc, rt, alpha, line_bps;
	uint32_t t_count, bc_count;
	uint64_t bc_bytes;
	sim_time_ps alpha_ps;    /* last alpha update */
	bool cnp_since_alpha;
	/* receiver */
	uint32_t rcv_nxt, rcv_count, unacked;
	uint8_t *rcvd;           /* SR: per-PSN bitmap */
	uint32_t nack_psn;       /* GBN: rcv_nxt we last NACKed (+1), avoids NACK storms */
	sim_time_ps last_cnp_ps;
	bool cnp_sent_once;
	uint64_t bytes_rx;
	/* triggers (0 = none) */
	uint32_t trig_start, trig_send_done, trig_recv_done;
	/* counters */
	uint64_t retx_pkts, ecn_pkts, cnps, timeouts, nacks;
};

enum sim_trig_type { SIM_TRIG_ONESHOT, SIM_TRIG_MULTISHOT, SIM_TRIG_BARRIER };
struct sim_trigger {
	uint32_t id;
	uint8_t type;
	bool defined, fired;
	uint32_t count, remaining, next;
	uint32_t *targets, ntargets, cap;
};

/* Small event carrying a PFC pause/resume to the peer after the link latency. */
struct sim_ctl_ev {
	struct sim_event ev;
	struct sim_port *port;   /* port that is paused / resumed */
	bool pause;
	struct sim_ctl_ev *next_free;
	struct sim_ctl_ev *next_all; /* every one allocated, to free those in flight at the end */
};

struct sim_route_ops {
	const char *name;
	/* Choose among g->n > 1 candidate ports cand[] (indices into sw->n.ports); returns the
	 * position in cand. */
	uint16_t (*select)(struct sim *s, struct sim_switch *sw, const struct sim_pkt *p,
			   struct sim_rgroup *g, const uint16_t *cand, unsigned n);
};

/* ---- the simulation ---------------------------------------------------------------------- */
struct sim {
	struct sim_config cfg;
	sim_time_ps now, stop_ps;
	struct sim_evq evq;
	uint64_t events;
	bool finished;

	/* pools */
	struct sim_pkt *pkt_free;
	void **chunks;
	uint32_t nchunks, chunks_cap;
	uint64_t pkts_allocated;
	struct sim_ctl_ev *ctl_free, *ctl_all;
	uint32_t pkt_ext_bytes;  /* module data behind each packet (sim_pkt_ext_reserve) */

	/* topology */
	struct sim_host *hosts;
	uint32_t nhosts;
	struct sim_switch *sws;
	uint32_t nsw;
	struct sim_port **ports; /* all ports by id */
	uint32_t nports, nlinks;
	double oversub;
	const struct sim_route_ops *route;
	sim_time_ps flowlet_gap_ps, rto_ps;
	uint64_t pfc_headroom_bytes;

	/* workload */
	struct sim_flow *flows;
	uint32_t nflows, flows_cap, flows_done;
	struct sim_trigger *trigs;
	uint32_t ntrigs, trigs_cap;
	uint32_t *trig_hash;     /* open addressing: trigger id -> index + 1 */
	uint32_t trig_hash_cap;
	uint32_t cm_failures;    /* htsim "failure" lines (failed links) */
	struct util_rng wl_rng;

	/* counters not kept per port/flow */
	uint64_t data_pkts, retx_pkts, timeouts, nacks, acks, cnps, ecn_marks, pfc_pauses;
	uint64_t rx_new_pkts;    /* data packets received for the first time (progress) */
	uint32_t flows_started;

	/* progress watchdog (sim.c): checked when events reach wd_next or time reaches wd_time */
	uint64_t wd_next, wd_every, wd_progress;
	sim_time_ps wd_time, wd_idle_ps, wd_now, wd_progress_ps;
	bool stalled;            /* the watchdog stopped the run; the diagnosis is in stall */
	char stall[768];

	/* model modules (sim_module.h): with none enabled the core runs alone */
	void *mod[SIM_MOD_COUNT]; /* each module's state, NULL while it is off */
	const struct sim_module_ops *on[SIM_MOD_COUNT]; /* the enabled ones, registration order */
	unsigned non;
	struct sim_hooks hk;     /* their per-packet hooks */
	const struct sim_module_ops *pkt_owner[SIM_PKT_NTYPES]; /* by packet type, NULL = core */

	/* output */
	FILE *ts;
	struct sim_event ts_ev;
	sim_time_ps ts_interval_ps;
	char err[512];
};

/* Per packet: a packet event at a port for the modules that watch ports (traces): one
 * predictable branch when none does. */
static inline void sim_port_event(struct sim *s, const struct sim_port *port,
				  const struct sim_pkt *p, enum sim_port_ev ev)
{
	if (__builtin_expect(s->hk.port_event != NULL, 0))
		s->hk.port_event(s, port, p, ev);
}

/* sim.c */
struct sim_pkt *sim_pkt_alloc(struct sim *s);
void sim_pkt_free(struct sim *s, struct sim_pkt *p);
/* A module's create hook reserves `bytes` of data behind every packet; *off is its offset for
 * sim_pkt_ext. 0, or -EBUSY once packets exist. */
int sim_pkt_ext_reserve(struct sim *s, uint32_t bytes, uint32_t *off);
void sim_schedule(struct sim *s, struct sim_event *ev, sim_time_ps t);
/* Cheaper (the heap never writes into the event), but the event can never be cancelled and
 * sim_ev_pending does not work on it. */
void sim_schedule_fixed(struct sim *s, struct sim_event *ev, sim_time_ps t);
void sim_cancel(struct sim *s, struct sim_event *ev);
void sim_rng_init(const struct sim *s, struct util_rng *r, uint32_t domain, uint32_t id);
/* The simulator's stateless 64-bit hash (splitmix64, lib/util). */
static inline uint64_t sim_mix64(uint64_t x)
{
	return util_hash64(x);
}
struct sim_flow *sim_flow_new(struct sim *s, uint32_t src, uint32_t dst, uint64_t size_bytes,
			      sim_time_ps start_ps, uint32_t user_id);

/* sim_topo.c */
int sim_topo_build(struct sim *s);
void sim_topo_free(struct sim *s);
/* htsim link failure: the link between aggregation switch agg (0 .. k*k/2-1) and its
 * link-th core goes down (no traffic). -EINVAL: no such link; -EALREADY: already down. */
int sim_topo_fail_agg_link(struct sim *s, uint32_t agg, uint32_t link);
/* Recompute routes (after links went down) and every flow's ideal FCT. */
int sim_topo_reroute(struct sim *s);
/* The node called name[0..len) as in the outputs (h3, leaf0, L2-1-1...), NULL if none.
 * A linear scan: for configuration time, not per packet. */
struct sim_node *sim_topo_node_by_name(struct sim *s, const char *name, size_t len);
/* Route group of switch sw toward host dst (NULL: unreachable). */
struct sim_rgroup *sim_route_group(const struct sim_switch *sw, uint32_t dst);

/* sim_net.c */
extern const struct sim_route_ops sim_route_ecmp, sim_route_spray, sim_route_adaptive,
	sim_route_flowlet, sim_route_spray_random, sim_route_spray_ideal;
#define SIM_SPRAY_TABLE 8192
void sim_port_init(struct sim_port *p);
void sim_port_kick(struct sim *s, struct sim_port *p);
void sim_port_tx_ev(struct sim *s, struct sim_event *ev);
void sim_pkt_arrive(struct sim *s, struct sim_event *ev);
void sim_switch_rx(struct sim *s, struct sim_switch *sw, struct sim_pkt *p);
/* Enqueue a control packet (ACK/NACK/CNP) or data on a host's NIC control queue. */
void sim_pktq_push(struct sim_pktq *q, struct sim_pkt *p);
struct sim_pkt *sim_pktq_pop(struct sim_pktq *q);
/* ECN on enqueue (switch.ecn, the ECN-capable bit, the modules' ecn_ok, the marking curve on
 * qbytes, the bytes of the queue p joins); marks p and counts it at out. True if marked. */
bool sim_switch_ecn(struct sim *s, struct sim_switch *sw, struct sim_port *out, struct sim_pkt *p,
		    uint64_t qbytes);

/* sim_host.c */
void sim_host_rx(struct sim *s, struct sim_host *h, struct sim_pkt *p);
/* Next packet the host NIC should send now, or NULL; *wake is set to the earliest time a
 * paced flow becomes eligible (SIM_TIME_NEVER if none). */
struct sim_pkt *sim_host_next(struct sim *s, struct sim_host *h, sim_time_ps *wake);
void sim_flow_start_ev(struct sim *s, struct sim_event *ev);
void sim_flow_start(struct sim *s, struct sim_flow *f);
void sim_flow_release(struct sim_flow *f);
/* The cap on f's sending rate in bit/s: its NIC's line rate, or host.rate_gbps if lower. */
double sim_flow_rate_cap(const struct sim *s, const struct sim_flow *f);
/* f's sender window in payload bytes: the smaller of f->cwnd_bytes and host.max_inflight_bytes
 * (0 = none); new data goes out while (snd_nxt - snd_una) * mtu_bytes is below it. */
uint64_t sim_flow_window_bytes(const struct sim *s, const struct sim_flow *f);

/* sim_workload.c */
int sim_workload_build(struct sim *s);
/* htsim connection matrix: parse file into flows and triggers of s. */
int sim_cmatrix_load(struct sim *s, const char *path);
int sim_cmatrix_parse(struct sim *s, FILE *f, const char *name);
uint64_t sim_cmatrix_nodes(const char *path);
void sim_trigger_activate(struct sim *s, uint32_t trig_id);
struct sim_trigger *sim_trigger_get(struct sim *s, uint32_t id, bool create);

/* sim_host.c entry points for modules that sit in front of the transport (a NIC scheduler,
 * a reorder buffer): emit the next packet of f (NULL if none), and hand an in-order data
 * packet to the transport receiver (does not free p). */
struct sim_pkt *sim_host_emit(struct sim *s, struct sim_host *h, struct sim_flow *f);
void sim_host_rx_data(struct sim *s, struct sim_flow *f, struct sim_pkt *p);
/* The transport's test of the round robin: may active flow f send now (window, pacing)? If
 * only pacing holds it, *wake gets the time it may, when earlier. */
bool sim_host_flow_ready(const struct sim *s, const struct sim_flow *f, sim_time_ps *wake);

/* sim_output.c */
void sim_ts_sample(struct sim *s, struct sim_event *ev);
/* The egress ports f's packets take from its source to its destination on the idle fabric
 * (first equal-cost choice at each switch; the source NIC first), at most max; returns how
 * many (0 if the destination is unreachable). */
unsigned sim_flow_path(const struct sim *s, const struct sim_flow *f, const struct sim_port **path,
		       unsigned max);
int sim_mkdir_p(const char *dir);
sim_time_ps sim_flow_ideal_ps(const struct sim *s, const struct sim_flow *f);
/* A distribution as summary.json writes it: {"n", "mean", "min", "p50" ... "max"} (sorts v). */
void sim_json_dist(FILE *f, double *v, uint32_t n);

static inline struct sim_switch *sim_node_sw(struct sim_node *n)
{
	return SIM_CONTAINER_OF(n, struct sim_switch, n);
}
static inline struct sim_host *sim_node_host(struct sim_node *n)
{
	return SIM_CONTAINER_OF(n, struct sim_host, n);
}

static inline void sim_set_err(struct sim *s, const char *msg) __attribute__((unused));
static inline void sim_set_err(struct sim *s, const char *msg)
{
	size_t i = 0;
	for (; msg[i] && i + 1 < sizeof(s->err); i++)
		s->err[i] = msg[i];
	s->err[i] = 0;
}

#endif
