/* sim/sim_ccm_int.h: state shared by the files of the CCM module: sim_ccm.c (the model and its
 * life cycle) and sim_ccm_results.c (results, event log and output files). Only these files
 * include it. */
#ifndef INCA_SIM_CCM_INT_H
#define INCA_SIM_CCM_INT_H

#include "sim_int.h"

#define CCM_MAX_EVENTS 2000000u
#define CCM_MAX_SF (1u << 24)     /* switch x flow entries */
#define CCM_MAX_SW 8192u          /* the switch-to-switch distance table is nsw^2 bytes */
#define CCM_NONE UINT32_MAX
#define CCM_RECENT 16             /* flows remembered per switch */
/* Coordinated mode: a port must have been congested this long before a local path switch
 * (then at most one per port per this time); ECN is withheld meanwhile (AR first). Two reasons:
 * an incast state from the last hop needs a few hops' time to arrive (~0.8 us per hop at 100G),
 * and moving every flow that meets a congested port at once only herds them onto the same
 * alternative. 1-4 us all remove the last path switches of incast flows in the scenarios; 2 us
 * finished the imbalance and mixed scenarios soonest (measured, docs/sim.md). */
#define CCM_AR_CONFIRM_PS (2ull * 1000000)

/* Per (switch, flow): the flow's current port at that switch and what the switch has done. */
struct ccm_sf {
	uint16_t port1;          /* chosen port + 1 (0: not placed yet) */
	uint16_t entropy;        /* entropy when placed: a host-side AR (new entropy) re-places */
	uint8_t cc_notified;     /* type 1 sent for this flow by this switch (incast) */
	uint8_t cc_seen;         /* its last packet here carried the CC indicator: no AR for it,
				  * even on its older untagged packets still in the fabric */
	sim_time_ps moved_ps;    /* last path switch here */
};

/* Per egress port: the current congestion episode. One type 3 per port per
 * notify_interval_us: moving every flow of a congested port at once only moves the collision
 * (they herd onto the same alternative and back); one at a time resolves it. */
struct ccm_port {
	sim_time_ps t3_first_ps; /* first type 3 of the current episode (0 = none) */
	sim_time_ps t3_last_ps;  /* last type 3 sent */
	uint32_t last_flow1;     /* flow index + 1 of the last data packet queued here */
	sim_time_ps mix_ps;      /* last time two different flows followed each other here */
	sim_time_ps cong_ps;     /* congested since / last local move (coordinated, confirm_ps) */
};

struct ccm_recent {          /* per switch: the last few flows it forwarded (convergent()) */
	uint32_t flow1, dst;
	sim_time_ps t_ps;
};

struct ccm_flow {            /* host side (reaction point) and per-flow counters */
	bool cc_tag;             /* CC indicator set in its packets */
	bool incast;             /* ever notified with type 1 */
	uint64_t ar_switches;
};

/* Incast state (draft choice, see "incast state" below): a destination host whose last-hop
 * port is in an incast episode, kept by that last hop until the episode ends. */
struct ccm_inc {
	uint32_t dst, sw, flow;  /* destination host; last-hop switch index; first incast flow */
	uint16_t port;
	sim_time_ps below_since;
};

/* Internal notification kinds carried like the draft's (psn field); not types of §6.2. */
#define CCM_STATE_SET 4u
#define CCM_STATE_CLEAR 5u

struct ccm_rel {             /* incast flow awaiting release (type 2) */
	uint32_t sw, flow;
	uint16_t port;
	sim_time_ps below_since;
};

/* Incast detector (§6.3.1 leaves room for others): true if the packet's flow, about to be
 * queued on `out`, takes part in incast congestion. */
struct ccm_detector {
	const char *name;
	bool (*is_incast)(struct sim *s, struct sim_switch *sw, struct sim_port *out,
			  const struct sim_pkt *p);
};

struct sim_ccm {
	int mode;
	const struct ccm_detector *det;
	sim_time_ps notify_iv_ps, hold_ps, grace_ps, check_ps, rel_hold_ps;
	uint8_t *dist;           /* nsw x nsw hop counts between switches (255 = unreachable) */
	struct ccm_sf *sf;       /* nsw x nflows, allocated when the run starts */
	struct ccm_flow *fl;
	struct ccm_port *port;   /* by global port id */
	struct ccm_recent *recent; /* nsw x CCM_RECENT */
	uint32_t nflows;
	bool ready;
	bool ecn_ok;             /* decision for the packet being enqueued (sim_ccm_route) */
	struct ccm_rel *rel;
	uint32_t nrel, rel_cap;
	uint8_t *dst_inc;        /* nsw x nhosts: this switch knows the destination is in incast */
	struct ccm_inc *inc;     /* incast episodes, at their last hop */
	uint32_t ninc, inc_cap;
	uint64_t state_msgs, state_sets, ar_held; /* incast state messages, episodes; type 3 held */
	sim_time_ps confirm_ps;  /* the time an incast state needs to reach every switch */
	struct sim_event check_ev;
	struct sim_ccm_event *ev;
	size_t nev, ev_cap;
	struct sim_ccm_stats st;
};

static inline struct sim_ccm *ccm_of(const struct sim *s)
{
	return s->mod[SIM_MOD_ccm];
}

/* sim_ccm_results.c: ccm_events.csv and ccm.json into dir; 0 or -errno. */
int sim_ccm_write_outputs(struct sim *s, const char *dir);

#endif
