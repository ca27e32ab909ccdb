/* bench/bench_switch.h: private to bench-switch: the load generator's state (emulated
 * members, their slots and counters) and one measured run (bench_switch_gen.c), used by the
 * command line, trials and reports of bench_switch.c. */
#ifndef INCA_BENCH_SWITCH_H
#define INCA_BENCH_SWITCH_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/udpio.h"
#include "wire/auth.h"

#define MAX_MEMBERS 16
#define MAX_BATCH 64
#define MAX_SLOTS 1024
#define MAX_THREADS 16
#define MAX_TRIALS 16
#define RTO_NS (250ull * 1000000ull) /* loopback with big buffers does not lose packets:
					       only a stuck peer needs a retransmission */

struct slot_state {
	uint32_t round;
	uint64_t sent_ns;
	bool outstanding;
};

struct gen;

/* One emulated member: its own socket and thread, so members run concurrently like hosts. */
struct member {
	struct gen *g;
	int idx;
	int fd;
	uint32_t ip; /* host order */
	uint32_t psn;
	uint8_t pbm[8];
	struct wire_mac *mac; /* signs this member's contributions when gen.auth */
	uint64_t auth_ctr;
	pthread_t thr;
	struct slot_state slot[MAX_SLOTS];
	uint64_t next_g; /* the next chunk to start: chunks start in g order, as libinca's */
	struct util_udptx *tx;
	struct util_udprx *rx;
	/* counters, read by the main thread while running */
	_Atomic uint64_t tx_pkts, rx_ok, rx_other, rx_wrong, rx_bytes, retx, send_err;
	_Atomic uint64_t tx_msgs, rx_bufs, rx_dgrams;
};

struct gen {
	int nmem;
	unsigned nslots;
	unsigned batch;
	bool gso;          /* GSO sends + GRO receives (else one datagram per message) */
	bool spin;         /* members poll their sockets instead of sleeping in recvmmsg */
	size_t flush_at;   /* datagrams queued before a send call */
	size_t data_len, pkt_len;
	uint16_t count;
	uint16_t tree_id;
	uint32_t key;
	uint32_t sw_ip;
	struct sockaddr_in sw_addr;
	bool reflect;
	bool auth;            /* contributions carry a signed authentication block */
	uint32_t auth_key_id;
	const char *perf_out; /* perf record the daemon over the measured window into this file */
	struct member *m;
	uint8_t data[4096];
	_Atomic int stop;
};

struct run_res {
	double secs;
	double in_pps, out_pps, goodput_gbps, daemon_cpu, pkts_per_cpu_s, gen_cpu, busy_cores;
	double tx_per_msg, rx_per_buf;
	double daemon_rx_per_call, daemon_tx_per_call; /* datagrams per recvmmsg / sendmmsg */
	uint64_t tx, rx, retx, rx_other, wrong, send_err, daemon_rx, daemon_drops;
	bool ok;
};

/* Open member mb's socket on ip:4791 with the batching the generator uses: 0 or a negative
 * errno. */
int open_member(struct member *mb, const char *ip);
/* One measured run: warm up for warm_s, then measure secs against the daemon (its pid for
 * CPU time and perf). Returns 0 with *r filled, or a negative errno (no memory, threads). */
int run_one(struct gen *g, double warm_s, double secs, pid_t daemon, struct run_res *r);

#endif
