/* inca-switch internals shared by main.c, dataplane.c and stats.c: the runtime built from a
 * sw_config (trees, neighbours, per-thread workers), counters and the stats snapshot protocol.
 * Not a library API: daemon-private, may print. See docs/switch.md for the threading model. */
#ifndef INCA_SW_SWITCH_H
#define INCA_SW_SWITCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <netinet/in.h>

#include "agg/agg.h"
#include "config.h"
#include "util/udpio.h"
#include "util/util.h"
#include "wire/auth.h"
#include "wire/wire.h"

#define SW_BATCH 64 /* datagrams per recvmmsg / typical sendmmsg */

/* ---------------------------------------------------------------- logging (stderr) */
/* 0 errors and warnings, 1 (-v) startup/shutdown info, 2 (-vv) per-event debug,
 * 3 (-vvv) one line per dropped packet. */
extern int sw_verbosity;
void sw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- counters */

/* Drop reasons the switch itself decides (the decoder's and the engine's have their own). */
enum sw_drop {
	SW_DROP_UNKNOWN_TREE,   /* INCA tree id not configured */
	SW_DROP_BAD_QPN,        /* BTH DestQP is not the tree's switch QPN */
	SW_DROP_UNKNOWN_SENDER, /* source ip:port is no neighbour of the tree (authorisation) */
	SW_DROP_NOT_INCA,       /* reflect mode: not even a plausible INCA packet */
	SW_DROP_INJECTED_RX,    /* --drop-rate on receive */
	SW_DROP_INJECTED_TX,    /* --drop-rate on send */
	SW_DROP_TX_ENCODE,      /* wire_encode_udp refused an engine packet (a bug) */
	SW_DROP_TX_ERROR,       /* sendmmsg failed for the datagram */
	/* Packet authentication (trees with auth, docs/protocol.md §14), checked in this order
	 * after the sender lookup: */
	SW_DROP_AUTH_MISSING,   /* no authentication block */
	SW_DROP_AUTH_KEY_ID,    /* key id is not the tree's */
	SW_DROP_AUTH_CTX,       /* sender context is not the neighbour the packet came from */
	SW_DROP_AUTH,           /* MAC mismatch (forged or corrupted) */
	SW_DROP_AUTH_REPLAY,    /* authentic but seen before, below the sender's replay window,
				 * or of an older job epoch than the sender's latest */
	SW_DROP_COUNT
};
const char *sw_drop_name(enum sw_drop d);

/* Per neighbour (per QP) counters, one copy per worker thread. */
struct sw_qp_stats {
	uint64_t rx_pkts, rx_bytes; /* UDP payload bytes */
	uint64_t tx_pkts, tx_bytes;
	uint64_t psn_gaps;    /* received PSN jumped forward (packets missing before it) */
	uint64_t psn_lost;    /* sum of those forward jumps */
	uint64_t psn_reorder; /* received PSN older than expected (late or duplicate) */
};

/* Global counters of one worker. */
struct sw_counters {
	uint64_t rx_pkts, rx_bytes; /* datagrams received (before any check) */
	uint64_t tx_pkts, tx_bytes; /* datagrams handed to the kernel */
	uint64_t reflected;         /* reflect mode: datagrams echoed */
	uint64_t rx_batches, tx_batches; /* recvmmsg / sendmmsg calls that moved data */
	uint64_t rx_coalesced;      /* datagrams that came in a GRO buffer after its first */
	uint64_t tx_gso_sends;      /* GSO sends (one datagram for the kernel, several on the wire) */
	uint64_t gso_on, gro_on;    /* 1 while this worker sends with GSO / receives with GRO (sum:
				     * how many workers do) */
	uint64_t own_cpu;           /* 1: this worker runs on a CPU of its own (--cpus) */
	uint64_t wire_drops[WIRE_E_COUNT_MAX_];
	uint64_t sw_drops[SW_DROP_COUNT];
	uint64_t verdicts[AGG_VERDICT_COUNT]; /* every agg_tree_input result */
};

/* ---------------------------------------------------------------- counter tables
 * Every counter of sw_counters, agg_tree_stats and sw_qp_stats is described once, here: the
 * worker sums, the JSON statistics, the NETCONF state and the Prometheus exposition (metrics.c)
 * are all written by walking these tables, in table order (which is the JSON key order). */

enum sw_ctr_type { SW_CTR_COUNTER, SW_CTR_GAUGE };

enum {
	SW_CTR_YANG = 1u << 0,   /* also a leaf of the NETCONF statistics ('_' written '-') */
	SW_CTR_THREAD = 1u << 1, /* also in the JSON per_thread entries */
	SW_CTR_MAX = 1u << 2,    /* workers combine by serial-number maximum, not by sum */
	SW_CTR_U32 = 1u << 3,    /* a uint32_t field (default uint64_t) */
};

struct sw_ctr {
	const char *name; /* JSON key; Prometheus: inca_switch_[tree_|qp_]NAME[_total] */
	const char *help; /* Prometheus HELP text */
	enum sw_ctr_type type;
	unsigned flags;   /* SW_CTR_* */
	size_t off;       /* of the field in its struct */
};

extern const struct sw_ctr sw_ctr_global[]; /* struct sw_counters (scalars) */
extern const struct sw_ctr sw_ctr_tree[];   /* struct agg_tree_stats (scalars) */
extern const struct sw_ctr sw_ctr_qp[];     /* struct sw_qp_stats */
extern const size_t sw_nctr_global, sw_nctr_tree, sw_nctr_qp;
uint64_t sw_ctr_get(const struct sw_ctr *c, const void *base);

/* Drop reasons of the global "drops" map, in its order: decoder reasons, switch reasons, then
 * engine verdicts (sw_stats_engine_drop_key names). */
#define SW_STATS_NDROPS ((WIRE_E_COUNT_MAX_ - 1) + SW_DROP_COUNT + \
			 (AGG_VERDICT_COUNT - AGG_DROP_FIRST))
struct sw_drop_count {
	char reason[48];
	uint64_t count;
};
/* Fill out[SW_STATS_NDROPS] from summed counters; returns the total. */
uint64_t sw_stats_drops(const struct sw_counters *c, struct sw_drop_count *out);

/* ---------------------------------------------------------------- runtime */

enum sw_nbr_kind { SW_NBR_MEMBER, SW_NBR_CHILD, SW_NBR_PARENT };

/* A neighbour of a tree: immutable after start. Neighbour index = engine nbr id. */
struct sw_nbr {
	enum sw_nbr_kind kind;
	uint16_t bfr_id; /* member: its BFR-id; child/parent: 0 */
	struct sockaddr_in addr;
	uint32_t qpn; /* DestQP of packets sent to it */
};

/* Cross-thread per-QP state: the BTH PSN is one sequence per QP whichever worker sends, so
 * it is an atomic (relaxed; one cache line per neighbour to avoid false sharing). */
struct sw_nbr_psn {
	_Atomic uint32_t tx_next; /* next PSN we send to this neighbour */
	_Atomic uint32_t rx_next; /* PSN expected next from it; UINT32_MAX before the first */
	char pad_[56];
} __attribute__((aligned(64)));

/* One tree's state owned by one worker: its engine shard and its per-QP counters. */
struct sw_tree_worker {
	struct agg_tree *agg;
	struct wire_mac *mac;        /* trees with auth: this worker's MAC context */
	struct wire_replay *replay;  /* trees with auth: nnbr anti-replay windows, one per
				      * neighbour (its sender context); per worker because a
				      * sender's packets reach a worker in order of its slot blocks */
	struct sw_qp_stats *qp;      /* nnbr, live: written only by the worker */
	struct sw_qp_stats *snap_qp; /* nnbr, snapshot (see snap_ack) */
	struct agg_tree_stats snap;  /* engine counters snapshot */
};

/* A tree at run time. Immutable once published, except the worker-owned parts (w[i]) and
 * the PSN atomics. An unchanged tree is carried from one tree set to the next, so a NETCONF
 * edit of other trees does not disturb its in-flight rounds. */
struct sw_tree {
	struct ctl_tree conf; /* owned copy */
	uint32_t nnbr;
	struct sw_nbr *nbr;      /* members, then children, then the parent */
	struct sw_nbr_psn *psn;  /* nnbr */
	uint32_t *hash;          /* ip:port -> nbr index + 1 (0 = empty), open addressing */
	uint32_t hmask;
	struct agg_tree_cfg acfg; /* template; shard/nshards set per worker */
	uint8_t *abm, *fbm;       /* backing storage referenced by acfg */
	struct agg_bift_entry *bift;
	size_t nbift;
	size_t max_sends;         /* largest agg_tree_max_sends over the shards */
	unsigned nworkers;
	struct sw_tree_worker *w; /* nworkers */
	/* Nonce counter of every packet this switch signs for the tree (any worker): unique per
	 * (key, context) within the process, started at a random value (wire_auth_ctr_start). */
	_Atomic uint64_t auth_ctr;
};

/* The trees the workers use, published as one pointer (RCU-like): workers load it once per
 * batch and never lock; a control thread builds a new set, swaps the pointer, waits until
 * every worker has passed a quiescent point (the top of its loop) and only then frees what
 * the old set alone referenced. */
struct sw_treeset {
	size_t ntrees;
	struct sw_tree **trees; /* in configuration order */
	uint16_t *index;        /* 65536 entries: tree id -> index, UINT16_MAX = none */
	size_t max_sends;       /* over all trees (>= 1) */
};

struct sw_switch;

struct sw_worker {
	struct sw_switch *sw;
	unsigned idx;
	int fd;
	int wake_fd;               /* eventfd: the control path wakes an idle worker (grace
				    * periods, snapshots, stop) instead of waiting out its timeout */
	pthread_t thread;
	bool started;
	_Atomic bool exited;       /* the loop has ended: no more quiescent points needed */
	_Atomic uint64_t qs_epoch; /* last tree-set epoch seen at a quiescent point */
	size_t max_sends;          /* capacity of io->sends */
	bool gso, gro;             /* UDP GSO sends / GRO receives in use on fd (cnt.*_on too) */
	bool own_cpu;              /* pinned to sw->opts.cpus[idx] (cnt.own_cpu too) */
	struct util_rng rng;       /* fault injection */
	uint64_t rx_ns;            /* when the batch being handled was read: the engine's clock */

	/* Live counters: written only by this worker. */
	struct sw_counters cnt;

	/* Snapshot: written by the worker on request, read by the stats writer after the
	 * acknowledgement (release/acquire on snap_ack). Per-tree parts live in the trees. */
	uint64_t snap_seen;
	_Atomic uint64_t snap_ack;
	struct sw_counters snap_cnt;

	/* I/O buffers (see dataplane.c). */
	struct sw_io *io;
};

/* Most CPUs --cpus takes: one per worker thread. */
#define SW_MAX_CPUS SW_THREADS_MAX

/* Default of sw_opts.busy_poll_us: a few round trips of a small collective on loopback. */
#define SW_BUSY_POLL_US 200
/* ... but once no round is under way (agg_tree_pending), only for busy_poll_us / this: the next
 * call's first packet comes that soon only when the ranks have CPUs to spare. */
#define SW_BUSY_POLL_IDLE_DIV 8

struct sw_opts {
	bool reflect;     /* echo valid-looking datagrams instead of aggregating */
	/* After a datagram, poll without sleeping for this long (yielding the CPU between
	 * polls): the next member's packet is usually microseconds away, and a sleeping worker
	 * pays a wakeup for it (tens of microseconds when an idle vCPU must be resumed). */
	uint32_t busy_poll_us;
	double drop_rate; /* fault injection on rx and tx, 0 = off */
	uint64_t seed;
	bool no_gso, no_gro; /* plain sendmmsg / recvmmsg even where the kernel has GSO / GRO */
	/* AF_XDP data path (xdp.c): NULL = sockets. */
	const char *xdp_ifname;
	uint32_t xdp_queue;     /* first queue id; worker i binds queue xdp_queue + i */
	int xdp_bind;           /* 0 = kernel's choice (zero-copy if possible), 1 = copy, 2 = zero-copy */
	bool xdp_skb_mode;      /* attach in generic (skb) mode instead of native */
	bool xdp_required;      /* exit instead of falling back to sockets */
	/* --cpus: worker i runs on cpus[i] alone (sw_worker_pin), as a switch has silicon of its
	 * own. The CPU being its, the worker polls for busy_poll_us after every packet, also once
	 * no round is under way (the SW_BUSY_POLL_IDLE_DIV rule spares a CPU shared with ranks
	 * between calls). 0: the scheduler places the workers. */
	int cpus[SW_MAX_CPUS];
	unsigned ncpus;
};

struct sw_switch {
	const struct sw_config *cfg; /* borrowed, must outlive the switch (its trees: start-up) */
	struct sw_opts opts;
	_Atomic(struct sw_treeset *) set; /* current trees (never NULL after create) */
	_Atomic uint64_t epoch;           /* bumped after every publication of a new set */
	pthread_mutex_t ctl_lock;         /* control threads: set updates vs stats readers */
	unsigned nworkers;
	struct sw_worker *w;
	bool listen_any;      /* listening on 0.0.0.0: source address taken per packet */
	_Atomic bool stop;
	_Atomic uint64_t snap_req;
	uint64_t start_ns;
	struct sw_xdp *xdp;   /* AF_XDP data path in use (xdp.c), NULL = sockets */
	char xdp_fallback[160]; /* --xdp asked but sockets used: why ("" otherwise) */
};

/* Build trees, neighbour tables, engine shards and bound sockets (nothing runs yet).
 * Returns 0 or -errno with a message in err. */
int sw_switch_create(const struct sw_config *cfg, const struct sw_opts *o, struct sw_switch **out,
		     char *err, size_t cap);
/* Start one thread per worker. Signals should be blocked by the caller first. */
int sw_switch_start(struct sw_switch *sw);
/* Ask workers to stop and join them (returns within ~the socket receive timeout). */
void sw_switch_stop(struct sw_switch *sw);
void sw_switch_destroy(struct sw_switch *sw);
/* Refresh every worker's snapshot: asks running workers and waits up to timeout_ms (a worker
 * that does not answer keeps its previous snapshot); stopped workers are copied directly. */
void sw_switch_snapshot(struct sw_switch *sw, unsigned timeout_ms);
/* Copy a worker's live counters into its snapshot (worker thread, or after join). */
void sw_worker_take_snapshot(struct sw_worker *w, const struct sw_treeset *set);

/* Control plane (NETCONF). Lock around every use of the current set outside the workers. */
void sw_switch_lock(struct sw_switch *sw);
void sw_switch_unlock(struct sw_switch *sw);
/* The current set; valid while the lock is held. */
const struct sw_treeset *sw_switch_trees(struct sw_switch *sw);
/* Replace the running trees by trees[0..n) (copied; ids unique, already validated). Trees
 * whose configuration is unchanged keep their engine state, PSNs and counters. Everything is
 * built before anything is published: on failure (-errno, message in err) nothing changed.
 * Takes the lock itself; returns after the old set was reclaimed (a few ms). */
int sw_switch_set_trees(struct sw_switch *sw, const struct ctl_tree *trees, size_t n,
			char *err, size_t cap);

/* ---------------------------------------------------------------- per-packet step
 * One definition of the INCA packet handling (decode -> tree -> QPN -> sender -> engine ->
 * encode every send), shared by the socket workers (dataplane.c) and the AF_XDP worker
 * (xdp.c). Input is a UDP payload or a whole Ethernet frame; output goes to a struct sw_tx. */

struct sw_rx {
	uint8_t *buf; /* UDP payload, or the Ethernet frame when frame is set */
	size_t len;
	bool frame;
	/* UDP payload only (a frame carries its own): the source ip:port and the destination
	 * address the datagram was sent to (network order). */
	struct sockaddr_in from;
	uint32_t dst_ip_be;
	uint16_t seg; /* index in its GRO buffer: first guess of the unseen IPv4 ID */
};

/* Where encoded packets go. Each data path embeds this in its own queue state. */
struct sw_tx {
	/* Make room for n more packets (flush what is queued if needed). */
	void (*reserve)(struct sw_tx *tx, size_t n);
	/* Encode pkt for neighbour nb with the ICRC over *ip (the encoder may set ip->ip_id; dcrc:
	 * CRC of data shared by several copies, or NULL) and queue it. Returns the bytes counted
	 * for the neighbour (UDP payload length) or -errno. */
	int (*send)(struct sw_tx *tx, const struct sw_nbr *nb, const struct wire_pkt *pkt,
		    struct wire_ipinfo *ip, const struct wire_dcrc *dcrc);
	/* Optional: a packet from neighbour nbr of t passed every check (frames: MAC learning). */
	void (*accepted)(struct sw_tx *tx, const struct sw_tree *t, uint32_t nbr,
			 const struct sw_rx *rx);
};

void sw_handle_inca(struct sw_worker *w, const struct sw_treeset *set, const struct sw_rx *rx,
		    struct sw_tx *tx);
/* Worker loop helpers for other data paths: the quiescent point at the top of a loop
 * (returns the tree set to use until the next call), statistics requests between batches,
 * and the busy-poll rule (idle_ns: time since the last batch that moved data). */
const struct sw_treeset *sw_worker_quiescent(struct sw_worker *w);
void sw_worker_poll_snapshot(struct sw_worker *w, const struct sw_treeset *set);
bool sw_worker_may_spin(const struct sw_worker *w, const struct sw_treeset *set, uint64_t idle_ns);
bool sw_worker_inject_drop(struct sw_worker *w);
/* At a worker's start: pin it to sw->opts.cpus[idx] if --cpus names one (w->own_cpu). */
void sw_worker_pin(struct sw_worker *w);

/* xdp.c: the AF_XDP data path. sw_xdp_create returns 0, or -errno with the reason in err
 * (-EOPNOTSUPP when built without libxdp). */
int sw_xdp_create(struct sw_switch *sw, char *err, size_t cap);
void sw_xdp_destroy(struct sw_switch *sw);
void *sw_xdp_worker_main(void *arg);
void sw_xdp_stats_json(const struct sw_switch *sw, FILE *f);

/* stats.c: JSON of the current snapshots (docs/switch.md has the schema). */
void sw_stats_write_json(const struct sw_switch *sw, FILE *f);
/* Write atomically (temp file + rename). Returns 0 or -errno. */
int sw_stats_write_file(const struct sw_switch *sw, const char *path);
/* Sums of the worker snapshots (also used by the NETCONF state). Call with the lock held
 * (sw_switch_lock) when the trees come from the current set. */
void sw_stats_sum_counters(const struct sw_switch *sw, struct sw_counters *out);
void sw_stats_sum_tree(const struct sw_tree *t, struct agg_tree_stats *out);
void sw_stats_sum_qp(const struct sw_tree *t, uint32_t nbr, struct sw_qp_stats *out);
/* Flat drop-map key of an engine verdict ("agg_" prefixed when it collides). */
const char *sw_stats_engine_drop_key(enum agg_verdict v, char *buf, size_t cap);
const char *sw_nbr_kind_name(enum sw_nbr_kind k);

#endif
