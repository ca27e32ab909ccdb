/* sim/sim_tc.h: public API of the traffic-class module of libinca_sim (sim_tc.c): results per
 * class and per (port, class), and the class of a flow added with sim_flow_add(). The model and
 * its parameters (switch.traffic_classes, scheduler, dwrr_weights, dwrr_quantum_bytes,
 * pfc_classes, workload.traffic_class) are described in sim_tc.c and docs/sim.md. */
#ifndef INCA_SIM_TC_H
#define INCA_SIM_TC_H

#include <stdbool.h>
#include <stdint.h>

#include "sim.h"

#define SIM_TC_MAX 8             /* classes at most: the eight priorities of 802.1Q */

/* Scheduling among the classes of one egress port. SP: the highest class with a packet that
 * may go; DWRR: deficit weighted round robin, class c gets weight_c x quantum bytes a round. */
enum sim_tc_sched { SIM_TC_SP, SIM_TC_DWRR };

struct sim_tc_class_stats {
	uint32_t flows, flows_done;
	uint64_t host_tx_pkts, host_tx_bytes;     /* data the NICs sent (retransmissions too) */
	uint64_t switch_tx_pkts, switch_tx_bytes; /* data switch ports sent */
	uint64_t rx_bytes;                        /* payload the receivers got (first copies) */
	uint64_t drops_queue, drops_shared, drops_headroom; /* as summary.json's drops */
	uint64_t ecn_marks;
	uint64_t pfc_pauses;                      /* PAUSE frames sent for the class */
	sim_time_ps paused_ps;                    /* time ports were paused for it, summed */
	uint64_t max_queue_bytes;                 /* largest queue of the class at one switch port */
};

struct sim_tc_stats {
	uint32_t classes;
	int scheduler;                            /* enum sim_tc_sched */
	uint32_t lossless;                        /* bit c: class c is lossless (PFC) */
	uint64_t quantum_bytes[SIM_TC_MAX];       /* DWRR: bytes per round of each class */
	struct sim_tc_class_stats c[SIM_TC_MAX];
};
/* -ENOENT with one class (the module is off). */
int sim_tc_get_stats(const struct sim *s, struct sim_tc_stats *st);

struct sim_tc_port_class {
	uint64_t q_bytes;        /* switch port: bytes in the class's queue */
	uint64_t in_bytes;       /* switch port as ingress: bytes of the (lossless) class it received
				  * that are still buffered in its switch */
	uint64_t tx_bytes, tx_pkts; /* data of the class the port sent */
	bool paused;             /* the peer has paused the class at this port (PFC) */
	bool pause_sent;         /* this port, as ingress, has paused the class at its peer */
	sim_time_ps paused_ps;   /* time the class was paused here so far */
};
/* Port by id (the `port` column of timeseries.csv). -ENOENT: module off; -EINVAL: no such port
 * or class. */
int sim_tc_port_class(const struct sim *s, uint32_t port, unsigned tc, struct sim_tc_port_class *out);

/* Class of flow i (0 with one class or no such flow). */
unsigned sim_tc_flow_class(const struct sim *s, uint32_t flow);
/* Sets the class of a flow that has not started yet. -EINVAL: no such flow, or tc >=
 * switch.traffic_classes; -EBUSY: the flow has started. */
int sim_tc_flow_set_class(struct sim *s, uint32_t flow, unsigned tc);

#endif
