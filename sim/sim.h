/* sim/sim.h: public API of libinca_sim, the packet-level discrete-event fabric simulator:
 * configuration (one table drives the INI parser, overrides and the dump of effective values),
 * create / run / destroy, results and output files. No globals: every call takes the
 * `struct sim *` it acts on, so several simulations can live in one process. Single-threaded:
 * one simulation must be driven by one thread at a time. */
#ifndef INCA_SIM_H
#define INCA_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sim_time.h"

enum sim_topo_type { SIM_TOPO_FATTREE, SIM_TOPO_LEAFSPINE, SIM_TOPO_LYU4, SIM_TOPO_FILE };
enum sim_routing { SIM_ROUTE_ECMP, SIM_ROUTE_SPRAY, SIM_ROUTE_ADAPTIVE, SIM_ROUTE_FLOWLET,
		   SIM_ROUTE_SPRAY_RANDOM, SIM_ROUTE_SPRAY_IDEAL };
enum sim_transport { SIM_TRANSPORT_GBN, SIM_TRANSPORT_SR, SIM_TRANSPORT_IDEAL };
/* dcqcn is the rate-based control built into the transport (sim_host.c); dctcp and hpcc are
 * window-based modules (sim_dctcp.c, sim_hpcc.c). */
enum sim_cc { SIM_CC_NONE, SIM_CC_DCQCN, SIM_CC_DCTCP, SIM_CC_HPCC };
enum sim_workload_type {
	SIM_WL_PERMUTATION, SIM_WL_INCAST, SIM_WL_ALLTOALL, SIM_WL_ALLREDUCE, SIM_WL_CMATRIX,
	SIM_WL_NONE, /* flows are added through sim_flow_add() */
};

enum sim_time_unit { SIM_UNIT_PS, SIM_UNIT_US };

#define SIM_PATH_MAX 512
/* Longest string parameter (paths): "key = value" must fit one line of libinih (200 bytes). */
#define SIM_STR_MAX 180
/* Largest flow (1 TB); a flow also has at most 2^31 packets, so PSNs fit in 32 bits. */
#define SIM_FLOW_MAX_BYTES 1000000000000ull

/* Every knob of a run. Defaults and meanings are in the table in sim_config.c and in
 * docs/sim.md; sim_config_defaults() fills them in. */
struct sim_config {
	/* [sim] */
	uint64_t seed;
	double stop_us;          /* 0: run until every flow has finished */
	double progress_s;       /* wall seconds between progress reports (CLI only; 0 = off) */
	uint64_t watchdog_events; /* stop a run that makes no progress over this many events (0 = off) */
	double watchdog_idle_us; /* ... or delivers nothing for this long while flows are active */
	/* [topology] */
	int topo;                /* enum sim_topo_type */
	uint32_t k;              /* fat tree radix */
	uint32_t hosts_per_tor;  /* 0: non-oversubscribed default */
	uint32_t tors, spines, parallel_links;        /* leaf-spine */
	uint32_t racks, l1_per_rack, l2_per_rack;     /* draft-lyu computing racks */
	uint32_t switching_racks, l3_per_srack, l4_per_srack;
	double host_gbps, tier1_gbps, tier2_gbps, tier3_gbps;
	double host_latency_ns, tier1_latency_ns, tier2_latency_ns, tier3_latency_ns;
	char topo_file[SIM_PATH_MAX]; /* type = file: the topology file (sim_topo_file.c) */
	/* [switch] */
	int routing;             /* enum sim_routing */
	double flowlet_gap_us;
	uint64_t buffer_bytes;   /* per egress port (lossy traffic) */
	uint64_t shared_buffer_bytes; /* per switch, 0 = no shared limit */
	bool ecn;
	uint64_t ecn_kmin_bytes, ecn_kmax_bytes;
	double ecn_pmax;
	bool pfc;
	uint64_t pfc_xoff_bytes, pfc_xon_bytes, pfc_headroom_bytes; /* headroom 0 = computed */
	/* [host] */
	int transport;           /* enum sim_transport */
	int cc;                  /* enum sim_cc */
	uint32_t mtu_bytes, header_bytes, ack_bytes, ack_every;
	double rto_us;
	uint64_t max_inflight_bytes; /* 0 = no window */
	double rate_gbps;        /* sender rate cap (0 = line rate) */
	uint32_t sr_reorder_pkts;
	/* [dcqcn] */
	double dcqcn_g, dcqcn_alpha_timer_us, dcqcn_rate_timer_us;
	uint64_t dcqcn_byte_counter_bytes;
	uint32_t dcqcn_f;
	double dcqcn_rai_mbps, dcqcn_rhai_mbps, dcqcn_min_rate_mbps, dcqcn_cnp_interval_us;
	double dcqcn_initial_alpha;
	/* [workload] */
	int workload;            /* enum sim_workload_type */
	uint64_t size_bytes;
	uint32_t wl_hosts;       /* participants, 0 = all */
	uint32_t incast_n, incast_dst;
	double start_us;
	char cmatrix[SIM_PATH_MAX];
	int cm_start_unit;       /* enum sim_time_unit: unit of "start" in connection matrices */
	/* [output] */
	char out_dir[SIM_PATH_MAX];
	double timeseries_us;    /* 0 = off */
	/* CCM (sim_ccm.c) [ccm]: draft-lyu coordinated congestion management */
	int ccm_mode;            /* enum sim_ccm_mode */
	int ccm_detector;        /* enum sim_ccm_detector */
	uint64_t ccm_congest_bytes, ccm_light_bytes, ccm_release_bytes;
	double ccm_notify_interval_us, ccm_ar_hold_us, ccm_ar_grace_us, ccm_check_us, ccm_release_hold_us;
	uint32_t ccm_notify_bytes;
	bool ccm_host_ar;
	bool ccm_cc_lasthop;     /* CC-tagged packets are ECN-marked only at the last hop */
	/* OSF (sim_osf.c) [osf]: draft-hcl Open Scheduled Fabric */
	int osf_mode;            /* enum sim_osf_mode */
	int osf_tm;              /* enum sim_osf_tm */
	uint32_t osf_tm_host;    /* host the central topology manager runs on */
	double osf_linkq_interval_us, osf_detect_us, osf_tm_compute_us, osf_reorder_timeout_us;
	double osf_retry_us, osf_rej_hold_us, osf_loss_max;
	uint64_t osf_window_bytes, osf_congest_bytes;
	uint32_t osf_chunk_pkts, osf_outstanding, osf_report_bytes, osf_cell_bytes;
	uint32_t osf_cell_header_bytes; /* OSF cells: per-cell header on the wire */
	bool osf_cell_aggregate, osf_cell_pad; /* OSF cells: pack small packets; pad short cells */
	/* failures (sim_fail.c) [failure] */
	char fail_event[8][SIM_STR_MAX + 1]; /* "T_us nodeA-nodeB[#n] down|up|degrade [rate=f] [loss=p]" */
	/* INA (sim_ina.c) [ina]: AllReduce jobs aggregated in the network by lib/agg */
	int ina_mode;            /* enum sim_ina_mode */
	uint32_t ina_jobs, ina_job_hosts;
	uint64_t ina_size_bytes;
	int ina_placement;       /* enum sim_ina_placement */
	uint32_t ina_switch_slots, ina_job_slots, ina_elems;
	int ina_dtype;           /* enum sim_ina_dtype */
	double ina_loss, ina_rto_us, ina_start_us;
	double ina_switch_ns_per_pkt; /* aggregation engine: service time per input packet */
	double ina_switch_latency_ns; /* ... and pipeline latency on top of it */
	double fail_reroute_delay_us; /* slow control plane: recompute routes this long after a change (0 = never) */
	/* DCTCP (sim_dctcp.c) [dctcp], with host.cc = dctcp */
	uint64_t dctcp_k_bytes;          /* switches mark CE when the egress data queue exceeds K */
	double dctcp_g;                  /* alpha gain */
	uint64_t dctcp_init_cwnd_bytes;
	double dctcp_initial_alpha;
	/* HPCC (sim_hpcc.c) [hpcc], with host.cc = hpcc */
	double hpcc_eta;                 /* target utilisation */
	uint32_t hpcc_max_stage;         /* additive steps before a multiplicative update */
	uint64_t hpcc_wai_bytes;         /* additive increase W_AI */
	double hpcc_base_rtt_us;         /* T (0 = the largest idle RTT of the run's flows) */
	double hpcc_min_rate_mbps;       /* floor of W/T */
	/* traffic classes (sim_tc.c, sim_tc.h): [switch] and [workload] keys */
	uint32_t tc_classes;     /* switch.traffic_classes: data queues per port (1 = module off) */
	int tc_scheduler;        /* enum sim_tc_sched */
	char tc_dwrr_weights[SIM_STR_MAX + 1];  /* "w0,w1,..." ("" = all 1) */
	uint32_t tc_dwrr_quantum_bytes;         /* per unit of weight (0 = one full data packet) */
	char tc_pfc_classes[SIM_STR_MAX + 1];   /* lossless classes with switch.pfc: "all" or "c,c,..." */
	char tc_workload_class[SIM_STR_MAX + 1]; /* classes of generated flows, used in turn: "c,c,..." */
	/* traces (sim_trace.c) [trace]: off while links and pcap_link are empty */
	char trace_links[SIM_STR_MAX + 1];     /* ports to trace: "all", node, A->B[#n], A-B[#n], node:pN */
	bool trace_packets;                    /* per-packet events of those ports: trace_packets.csv */
	double trace_queue_interval_us;        /* their queues sampled into trace_queues.csv (0 = off) */
	char trace_pcap_link[SIM_STR_MAX + 1]; /* one port: packets leaving it into trace.pcap */
	uint32_t trace_pcap_snap_bytes;        /* bytes of each frame captured (0 = all) */
};

/* Fill every field with its documented default. */
void sim_config_defaults(struct sim_config *c);
/* Set one parameter by "section.key" (or bare unique "key") from its text form.
 * Returns 0, -ENOENT (unknown key) or -EINVAL (bad value). */
int sim_config_set(struct sim_config *c, const char *name, const char *value);
/* Parse "section.key=value". Same returns as sim_config_set. */
int sim_config_set_arg(struct sim_config *c, const char *arg);
/* Load an INI scenario file on top of the current values. On error returns -errno or
 * -EINVAL and, if err is non-NULL, writes a one-line reason into err. */
int sim_config_load(struct sim_config *c, const char *path, char *err, size_t errlen);
/* The same from a NUL-terminated string; `name` stands for the file in messages and is the
 * base for a relative workload.file or topology.file. */
int sim_config_load_string(struct sim_config *c, const char *text, const char *name, char *err,
			   size_t errlen);
/* Write every effective parameter as a re-loadable INI file. */
void sim_config_dump(const struct sim_config *c, FILE *f);
/* Print the parameter table with help text. */
void sim_config_help(FILE *f);

struct sim;

/* Build topology and workload from *cfg (copied). Returns 0 or -errno; err gets a reason. */
int sim_create(const struct sim_config *cfg, struct sim **out, char *err, size_t errlen);
void sim_destroy(struct sim *s);

/* Add a flow (for SIM_WL_NONE or on top of a generated workload) before running. Returns the
 * flow index or -EINVAL. */
int sim_flow_add(struct sim *s, uint32_t src, uint32_t dst, uint64_t size_bytes,
		 sim_time_ps start_ps);

/* Run events until simulated time `until` (inclusive) or until nothing is left to do.
 * Returns 1 if the simulation is finished (all flows done, stop time reached or no events),
 * 0 if it stopped at `until` with work left. */
int sim_run_until(struct sim *s, sim_time_ps until);
/* Run to the end. Calls progress(s, user) about every cfg.progress_s wall seconds if given. */
void sim_run(struct sim *s, void (*progress)(struct sim *s, void *user), void *user);
/* Why the run stopped early, NULL if it did not: the progress watchdog's diagnosis (what was
 * stuck: time, flow, queue, PFC) or running out of memory. The string lives as long as s. */
const char *sim_run_error(const struct sim *s);

/* Results. */
struct sim_stats {
	sim_time_ps now_ps;
	uint64_t events;
	uint32_t hosts, switches, links, flows, flows_done;
	uint64_t data_pkts_sent, retx_pkts, timeouts, nacks, acks;
	uint64_t ecn_marks, cnps, pfc_pauses;
	uint64_t drops_queue, drops_shared, drops_headroom, drops_total;
	uint64_t max_queue_bytes;
	double oversubscription;
};
void sim_get_stats(const struct sim *s, struct sim_stats *st);

struct sim_flow_result {
	uint32_t id, src, dst;
	uint64_t size_bytes;
	sim_time_ps start_ps, finish_ps, sender_done_ps; /* finish = last byte at receiver */
	sim_time_ps ideal_ps;    /* alone on an idle fabric, see docs/sim.md */
	uint64_t retx_pkts, ecn_pkts, cnps;
	bool done;
	uint64_t bytes_received;
};
uint32_t sim_flow_count(const struct sim *s);
int sim_flow_result(const struct sim *s, uint32_t i, struct sim_flow_result *r);
const struct sim_config *sim_get_config(const struct sim *s);

/* Write fct.csv, summary.json and params.ini into dir (created if missing). The time series
 * (timeseries.csv) is streamed during the run when cfg.timeseries_us > 0 and cfg.out_dir is
 * set. Returns 0 or -errno. */
int sim_write_outputs(struct sim *s, const char *dir);
/* Write the topology of s (as built: generated or read) in the topology-file format of
 * topology.type = file (docs/sim.md), so that reading it back builds the same fabric. Returns
 * 0 or -EIO. */
int sim_write_topology(const struct sim *s, FILE *f);
/* Write the JSON summary to f. */
void sim_write_summary(const struct sim *s, FILE *f);
void sim_write_fct_csv(const struct sim *s, FILE *f);

/* CCM (sim_ccm.c): draft-lyu-rtgwg-coordinated-cm. mode off: module absent (the simulator
 * behaves exactly as without it); ar: flow-level adaptive routing alone (the uncoordinated
 * baseline); coordinated: coordination tag, notifications types 1-3, CC/AR split. */
enum sim_ccm_mode { SIM_CCM_OFF, SIM_CCM_AR, SIM_CCM_COORD };
enum sim_ccm_detector { SIM_CCM_DET_LASTHOP };
enum sim_ccm_ev_kind {
	SIM_CCM_EV_NOTIFY_SENT, SIM_CCM_EV_NOTIFY_RECV, SIM_CCM_EV_AR_LOCAL, SIM_CCM_EV_AR_UPSTREAM,
	SIM_CCM_EV_AR_FAIL, SIM_CCM_EV_RATE_CUT, SIM_CCM_EV_TAG_SET, SIM_CCM_EV_TAG_CLEAR,
	SIM_CCM_EV_HOST_AR,
};
struct sim_ccm_event {
	sim_time_ps t_ps;
	int kind;                /* enum sim_ccm_ev_kind */
	uint8_t ntype;           /* notification type 1..3 (NOTIFY_*) */
	uint32_t node, peer;     /* where it happened; the other end (notification target / source,
				  * old port's peer for AR switches), UINT32_MAX if none */
	uint32_t flow;           /* flow index */
	double value;            /* RATE_CUT: new rate Gbit/s; AR_*: new next hop node id */
	uint64_t seq;            /* AR_*: emission number of the data packet that caused it (for
				  * AR_UPSTREAM the one that congested the notifying switch);
				  * TAG_SET/TAG_CLEAR: emission number of the flow's next packet */
};
struct sim_ccm_stats {
	uint64_t notify_sent[4], notify_recv[4]; /* by type (index 1..3) */
	uint64_t ar_local, ar_upstream, ar_fail, ar_incast_flows; /* path switches; of incast flows */
	uint64_t rate_cuts, ecn_suppressed, incast_flows;
	uint64_t events, events_dropped;
};
/* -ENOENT when CCM is off. */
int sim_ccm_get_stats(const struct sim *s, struct sim_ccm_stats *st);
size_t sim_ccm_event_count(const struct sim *s);
const struct sim_ccm_event *sim_ccm_event_get(const struct sim *s, size_t i);
/* Per flow: path switches made for it (all switches), whether it was ever notified as an
 * incast flow (type 1), CNP-triggered rate cuts. */
uint64_t sim_ccm_flow_ar_switches(const struct sim *s, uint32_t flow);
bool sim_ccm_flow_incast(const struct sim *s, uint32_t flow);
const char *sim_node_name(const struct sim *s, uint32_t node);
const char *sim_ccm_ev_name(int kind);

/* OSF (sim_osf.c): draft-hcl-rtgwg-osf-framework. off: module absent; spray: OSF-Ingress
 * per-packet spraying over TM-weighted paths with OSF-Egress reordering, no credits (baseline);
 * credit: the same plus credit-based flow control (draft 4.3.1). */
enum sim_osf_mode { SIM_OSF_OFF, SIM_OSF_SPRAY, SIM_OSF_CREDIT };
enum sim_osf_tm { SIM_OSF_TM_CENTRAL, SIM_OSF_TM_DIST, SIM_OSF_TM_HYBRID };
struct sim_osf_stats {
	uint64_t credit_reqs, credit_acks, credit_rejs, credit_lost, granted_pkts;
	uint64_t linkq_sent, linkq_recv, tm_pushes;
	uint64_t reorder_pkts, reorder_max_pkts, dup_pkts, egress_nacks, inorder_violations;
	uint64_t cells_sent, orig_pkts_delivered; /* containers on the wire; original packets reassembled */
	uint64_t max_reserved_bytes;  /* peak credit reservation on any switch port */
	uint64_t max_queue_bytes;     /* peak data queue on any switch port */
	uint64_t stale_sends;         /* data sent onto a path over a failed link */
	uint64_t late_stale_sends;    /* ... after that ingress had been notified (should be 0) */
	uint64_t reserved_now_bytes;  /* credit reserved now by no live grant: leaked (must be 0) */
	sim_time_ps fail_ps;          /* first link failure seen (SIM_TIME_NEVER: none) */
	sim_time_ps notify_max_ps;    /* latest time an ingress learnt of that failure */
	sim_time_ps last_stale_ps;    /* last data packet sent onto a path over a failed link */
	/* OSF cells (osf.cell_bytes > 0): aggregation / fragmentation at the ingress */
	uint64_t orig_pkts_sent;      /* original packets cut into cells (retransmissions included) */
	uint64_t frag_pkts;           /* ... of them spread over two or more cells */
	uint64_t agg_cells;           /* cells carrying (pieces of) two or more original packets */
	uint64_t cell_payload_bytes;  /* original packet bytes (with their headers) carried in cells */
	uint64_t cell_wire_bytes;     /* cells on the wire: payload + cell headers */
	uint64_t cell_skips;          /* cells the egress gave up as lost (reorder timeout) */
	uint64_t orig_discarded;      /* original packets the egress could not complete (cell lost) */
};
/* -ENOENT when OSF is off. */
int sim_osf_get_stats(const struct sim *s, struct sim_osf_stats *st);

/* failures (sim_fail.c): timed link down / up / degrade and slow control-plane reconvergence. */
struct sim_fail_stats {
	uint64_t events_applied, drops_down, drops_loss, reroutes;
	sim_time_ps first_down_ps, last_reroute_ps;
};
/* -ENOENT when no failure is configured. */
int sim_fail_get_stats(const struct sim *s, struct sim_fail_stats *st);

/* INA (sim_ina.c): in-network aggregation. off: module absent; inc: AllReduce jobs on trees of
 * switches running lib/agg (jobs that get no slots run ring); ring: every job runs ring
 * AllReduce over the ordinary transport (the baseline). */
enum sim_ina_mode { SIM_INA_OFF, SIM_INA_INC, SIM_INA_RING, SIM_INA_HRING, SIM_INA_DBTREE };
enum sim_ina_placement { SIM_INA_CONTIGUOUS, SIM_INA_STRIDED };
enum sim_ina_dtype { SIM_INA_INT32, SIM_INA_FP32 };
struct sim_ina_job_result {
	uint32_t job, hosts, first_host;
	uint64_t size_bytes;
	bool inc, done;          /* aggregated in the network (else a host algorithm); finished */
	int algo;                /* enum sim_ina_mode: INC, RING, HRING or DBTREE */
	uint32_t levels, tree_switches;
	sim_time_ps start_ps, finish_ps; /* finish: last member has the whole result */
	sim_time_ps bound_ps;    /* inc: S/B + round-trip latency of the tree */
	uint64_t results_ok, results_bad, dup_results, retx_pkts, timeouts; /* inc, per chunk result */
};
#define SIM_INA_VERDICTS 32
struct sim_ina_stats {
	uint64_t verdicts[SIM_INA_VERDICTS]; /* by enum agg_verdict */
	uint64_t lost_pkts, drops_queue, pkts;
	uint64_t notices;      /* repair notices the engines sent (WIRE_F_NACK) */
	uint64_t nack_resends; /* contributions members resent on a notice */
	uint32_t jobs_done;
	/* switch engines (ina.switch_ns_per_pkt, ina.switch_latency_ns) */
	uint64_t engine_pkts, engine_drops;   /* inputs served; refused (backlog over buffer_bytes) */
	uint64_t engine_max_backlog_bytes;    /* largest input backlog of one engine */
	sim_time_ps engine_busy_max_ps;       /* busiest engine's total service time */
};
uint32_t sim_ina_job_count(const struct sim *s);
/* -ENOENT when INA is off or no such job. */
int sim_ina_job_result(const struct sim *s, uint32_t job, struct sim_ina_job_result *r);
int sim_ina_get_stats(const struct sim *s, struct sim_ina_stats *st);

#endif
