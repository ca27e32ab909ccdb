/* sim/sim_osf_int.h: state and internal calls shared by the files of the OSF module:
 * sim_osf.c (paths, grants, credits at switches, life cycle, results), sim_osf_host.c
 * (OSF-Ingress NIC scheduler and cells, OSF-Egress reordering and reassembly) and sim_osf_tm.c
 * (topology manager and link-quality reports). Only these files include it. */
#ifndef INCA_SIM_OSF_INT_H
#define INCA_SIM_OSF_INT_H

#include "sim_int.h"

#define OSF_MAXHOPS 8
#define OSF_MAXPATHS 64
#define OSF_RING 32      /* report snapshots kept per switch (a slot is reused after 32 periods) */

enum { LQ_TO_TM, LQ_TO_HOST, LQ_TM_PUSH };

struct osf_path {
	struct sim_port *ports[OSF_MAXHOPS]; /* [0] the source NIC, then switch egress ports */
	uint8_t nhops;
};

struct osf_grant {
	struct sim_port *ports[OSF_MAXHOPS];
	uint64_t held[OSF_MAXHOPS];  /* credit this grant holds on each hop now */
	uint32_t flow, refs, next_free, npk, left; /* npk granted; left not yet sent */
	uint16_t path;
	uint8_t nhops;
};

struct osf_flow {
	struct osf_path *paths;
	int64_t *wrr;
	uint16_t npaths, last_path;
	bool paths_done;
	/* ingress */
	uint32_t reqs_out, pending;  /* requests in flight; packets requested or granted, unsent */
	uint32_t gq[64], gq_head, gq_n; /* granted grants in order */
	sim_time_ps retry_ps;
	uint32_t rej_streak;     /* rejections in a row: the retry backs off exponentially */
	/* egress */
	uint8_t *have;
	uint32_t buffered;
	uint32_t hole_psn;
	struct sim_event hole_ev;
	uint32_t idx;
	uint64_t delivered_bytes;
	/* Cells. The ingress appends each original packet it takes from the transport to the
	 * flow's byte stream (os_psn/os_end: PSN and stream end offset of original j) and cuts
	 * the stream into cells (c_start/c_len by cell sequence number). The tables stand for
	 * what a cell header carries (its sequence number and piece table): the egress reads
	 * only the entries of cells it has received. */
	uint32_t *os_psn;
	uint64_t *os_end;
	uint32_t nos, cap_os;
	uint64_t stream_bytes, cut_bytes;
	uint64_t *c_start;
	uint32_t *c_len;
	uint8_t *c_path;         /* path each cell was sprayed on (the cell's source route) */
	uint32_t ncells, cap_c;
	uint32_t cut_os;         /* first original not yet wholly cut */
	uint32_t frag_os;        /* last original counted as fragmented, + 1 */
	struct osf_flow *bl_next; /* host backlog: stream bytes not yet cut, flow maybe inactive */
	bool in_bl;
	/* egress, cells: reorder by cell number, then reassembled packets go through the PSN
	 * reorder buffer above (which only sees out-of-order packets after a lost cell) */
	uint8_t *chave;          /* buffered cells, bit per sequence number */
	uint32_t chave_bits, cnext, eo, cbuffered;
	uint32_t cmax;           /* highest cell number received + 1 */
	uint32_t chole;          /* cmax when the hole check was armed */
	uint32_t clo;            /* cnext then */
	uint32_t pmax[OSF_MAXPATHS]; /* per path: highest cell number received on it + 1 */
	sim_time_ps plast[OSF_MAXPATHS]; /* per path: last cell arrival */
	sim_time_ps chole_iv;    /* hole check period: the timeout, or its grace after a failure */
	struct sim_event chole_ev;
	uint64_t eoff;           /* stream offset reassembled up to */
	bool ebad;               /* original eo misses bytes (a cell was lost) */
};

struct osf_view {                /* what one ingress (or the TM) knows, by global port id */
	uint8_t *down;
	uint32_t *q, *rate_mbps, *loss_ppm;
	sim_time_ps *rej_until;
	uint32_t *seq;           /* last report seq applied per switch */
};

struct osf_snap { uint32_t q, rate_mbps, loss_ppm; uint8_t down; };

struct osf_det {                 /* pending detection of a link change at one switch port */
	struct sim_event ev;
	struct sim_port *port;
	bool down;
	struct osf_det *next;
};

struct osf_hev {
	struct sim_event ev;
	uint32_t host;
};

struct sim_osf {
	bool credit;
	uint32_t cell, cell_hdr;  /* cell payload (0: no cells) and header bytes */
	struct osf_flow **bl;    /* per host: flows with stream bytes not yet cut */
	struct osf_hev *hev;     /* per host: wakes the NIC for backlog of inactive flows */
	struct osf_flow **fl;
	uint32_t nfl;
	struct osf_grant *grants;
	uint32_t ngrants, gcap, gfree;
	uint64_t *reserved;      /* per port id */
	uint8_t *det_down;       /* per port id: the switch has detected its link down */
	struct osf_view *hv;     /* per host */
	struct osf_view tm;
	struct osf_snap *snaps;  /* per switch port (ports in id order) x OSF_RING */
	uint32_t *snap_base;     /* per switch: index of its first port's slot row */
	uint32_t *seq;           /* per switch: next report seq */
	struct sim_event tick_ev, push_ev;
	struct osf_det *dets;
	sim_time_ps *learnt;     /* per host: when its ingress first learnt of a failed link */
	sim_time_ps interval_ps;
	struct sim_osf_stats st;
};

static inline struct sim_osf *osf_of(const struct sim *s)
{
	return s->mod[SIM_MOD_osf];
}

/* Wire bytes one granted unit (packet or cell) may take. */
static inline uint32_t full_pkt(const struct sim *s)
{
	if (s->cfg.osf_cell_bytes)
		return s->cfg.osf_cell_bytes + s->cfg.osf_cell_header_bytes;
	return s->cfg.mtu_bytes + s->cfg.header_bytes;
}

/* sim_osf.c */
bool sim_osf_path_truly_down(const struct sim_port *const *ports, unsigned n);
int sim_osf_flow_paths(struct sim *s, struct sim_flow *f, struct osf_flow *of);
struct osf_flow *sim_osf_oflow_get(struct sim *s, uint32_t idx);
uint16_t sim_osf_pick_path(struct sim *s, struct sim_host *h, struct osf_flow *of);
uint32_t sim_osf_grant_new(struct sim_osf *o);
void sim_osf_grant_unref(struct sim_osf *o, uint32_t gi);
void sim_osf_host_send_ctl(struct sim *s, struct sim_host *h, struct sim_pkt *p);
void sim_osf_release_hops(struct sim_osf *o, struct osf_grant *g, unsigned from, unsigned to, uint64_t bytes);
void sim_osf_switch_rx(struct sim *s, struct sim_switch *sw, struct sim_pkt *p);

/* sim_osf_host.c */
bool sim_osf_credit_covers(const struct sim *s, const struct osf_flow *of);
uint32_t sim_osf_flow_demand(const struct sim *s, const struct sim_flow *f, const struct osf_flow *of);
struct sim_pkt *sim_osf_host_next(struct sim *s, struct sim_host *h, sim_time_ps *wake);
void sim_osf_cell_rx(struct sim *s, struct sim_flow *f, struct sim_pkt *p);
void sim_osf_chole_fire(struct sim *s, struct sim_event *ev);
void sim_osf_close_unused(struct sim *s, struct sim_flow *f, struct osf_flow *of);
void sim_osf_egress_rx(struct sim *s, struct sim_flow *f, struct sim_pkt *p);
void sim_osf_hev_fire(struct sim *s, struct sim_event *ev);
void sim_osf_hole_fire(struct sim *s, struct sim_event *ev);

/* sim_osf_tm.c */
bool sim_osf_link_change(struct sim *s, struct sim_port *port, bool down);
void sim_osf_linkq_rx(struct sim *s, struct sim_host *h, struct sim_pkt *p);
void sim_osf_push_fire(struct sim *s, struct sim_event *ev);
void sim_osf_tick_fire(struct sim *s, struct sim_event *ev);

#endif
