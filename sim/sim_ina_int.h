/* sim/sim_ina_int.h: state and internal calls shared by the files of the INA module: sim_ina.c
 * (members, ring steps and switch engines at run time) and sim_ina_jobs.c (trees, job setup,
 * life cycle, results). Only these files include it. */
#ifndef INCA_SIM_INA_INT_H
#define INCA_SIM_INA_INT_H

#include "agg/agg.h"
#include "sim_int.h"
#include "util/rtt.h"

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
	struct util_rtt rtt;     /* RFC 6298 estimator (ps) over chunks sent once, as libinca's */
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
	/* host algorithms: ring (reused flow objects) or a schedule of one-shot transfers */
	int algo;                /* enum sim_ina_mode: RING, HRING, DBTREE (INC: inc = true) */
	uint32_t nobj;           /* flows flow0 .. flow0 + nobj - 1 belong to the job */
	uint32_t *dep_left;      /* schedule: per transfer, transfers it still waits for */
	uint32_t *succ_off, *succ; /* schedule: transfers waiting for transfer t (CSR) */
	uint32_t recv_count;
	uint32_t flow0, steps;   /* ring: objects flow0 + 2*rank + (step & 1) */
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
	/* members' RTO (util/rtt.h, as libinca): initial, floor and backoff cap */
	sim_time_ps rto_init_ps, rto_floor_ps, rto_max_ps;
	/* switch engines: one server per switch, FIFO, switch_ns_per_pkt per input */
	sim_time_ps eng_ps, eng_lat_ps;
	sim_time_ps *eng_free;   /* per switch: when its engine takes the next input */
	sim_time_ps *eng_busy;   /* per switch: total service time */
	uint64_t *eng_backlog;   /* per switch: bytes waiting for or in the engine */
	uint64_t eng_pkts, eng_drops, eng_max_backlog;
};

static inline struct sim_ina *ina_of(const struct sim *s)
{
	return s->mod[SIM_MOD_ina];
}

/* Contribution of rank r to element e of chunk g: an integer in [-1000, 1000], exact as int32
 * and as fp32 for any sum of up to 16 k ranks. */
static inline int32_t sim_ina_val(const struct sim *s, uint32_t job, uint32_t r, uint32_t g, uint32_t e)
{
	uint64_t k = sim_mix64(s->cfg.seed ^ ((uint64_t)job << 48) ^ ((uint64_t)r << 24) ^ sim_mix64(((uint64_t)g << 16) | e));
	return (int32_t)(k % 2001) - 1000;
}

static inline uint32_t chunk_len(const struct sim *s, const struct ina_job *j, uint32_t g)
{
	uint64_t off = (uint64_t)g * s->cfg.mtu_bytes, rest = j->size_bytes - off;
	return rest < s->cfg.mtu_bytes ? (uint32_t)rest : s->cfg.mtu_bytes;
}

static inline uint32_t sim_ina_wire_size(const struct sim *s, const struct ina_job *j, uint32_t g, bool data)
{
	return s->cfg.header_bytes + WIRE_INCA_FIXED_LEN + j->bsl_bits / 8 + (data ? chunk_len(s, j, g) : 0);
}

/* sim_ina.c */
void sim_ina_wslot_timeout(struct sim *s, struct sim_event *ev);
void sim_ina_job_start(struct sim *s, struct sim_event *ev);
void sim_ina_flow_recv_done(struct sim *s, struct sim_flow *f);
void sim_ina_flow_done(struct sim *s, struct sim_flow *f);
void sim_ina_host_rx(struct sim *s, struct sim_host *h, struct sim_pkt *p);
void sim_ina_switch_rx(struct sim *s, struct sim_switch *sw, struct sim_pkt *p);
/* sim_ina_jobs.c */
const char *sim_ina_algo_name(int algo);

#endif
