/* sim/sim_trace_int.h: the state the trace module's files share: sim_trace.c (port selection,
 * per-packet and per-queue CSV, the module's ops) and sim_trace_pcap.c (frames leaving one port
 * written as RoCEv2 in a pcap file). */
#ifndef INCA_SIM_TRACE_INT_H
#define INCA_SIM_TRACE_INT_H

#include <stdio.h>

#include "sim_int.h"

#define SIM_TRACE_CSV 0x01     /* port's packet events go to trace_packets.csv */
#define SIM_TRACE_QUEUE 0x02   /* port's queue is sampled into trace_queues.csv */
#define SIM_TRACE_PCAP 0x04    /* packets leaving the port go to trace.pcap */

struct sim_trace {
	uint8_t *mask;           /* per port id: SIM_TRACE_* */
	uint32_t *qports;        /* ports sampled into trace_queues.csv, by id */
	uint32_t nqports;
	FILE *pkts, *queues, *pcap;
	struct sim_event q_ev;
	sim_time_ps q_interval_ps;
	uint8_t *frame;          /* pcap: one synthesized frame */
	uint64_t rows, samples, frames;
};

static inline struct sim_trace *sim_trace_of(const struct sim *s)
{
	return s->mod[SIM_MOD_trace];
}

/* sim_trace_pcap.c */
/* Open path and write the pcap file header; refuses (reason in s->err) fabrics whose nodes do
 * not fit the address block or packets that do not fit an IPv4 datagram. 0 or -errno. */
int sim_trace_pcap_open(struct sim *s, struct sim_trace *t, const char *path);
/* Append the frame of p leaving `port` now. */
void sim_trace_pcap_write(struct sim *s, struct sim_trace *t, const struct sim_port *port,
			  const struct sim_pkt *p);

#endif
