/* lib/client internals: the communicator struct shared by comm.c (lifecycle, dispatch),
 * bootstrap.c (TCP rendezvous + ring sockets), ring.c (host AllReduce), inc.c (INC data path).
 * Not installed. Internal names use the client_ prefix so the version map hides them. */
#ifndef INCA_CLIENT_H
#define INCA_CLIENT_H

#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inca/inca.h"
#include "util/util.h"
#include "wire/wire.h"

/* Resolved configuration: inca_comm_opts with every default filled in and every address
 * parsed. Owned by the communicator (no borrowed strings survive inca_comm_create). */
/* Default busy-poll before a wait of any call sleeps (INCA_BUSY_POLL_US overrides; 0 turns it
 * off): a spinning waiter, yielding the CPU between polls, answers in microseconds; a sleeping
 * one pays a wakeup per wait, tens of microseconds of CPU where an idle vCPU must be resumed.
 * Bulk calls wait about as often as small ones (a window's answers come in batches), so they
 * poll too (docs/collectives.md "Busy polling" has the figures). */
#define CLIENT_BUSY_POLL_US 100

struct client_cfg {
	int rank, size;
	bool have_bootstrap;
	struct sockaddr_in bootstrap_sa;
	bool have_peers; /* external bootstrap: inca_comm_opts.peer_table */
	struct in_addr host_ip;

	uint64_t busy_poll_ns; /* waits poll this long before sleeping (INCA_BUSY_POLL_US) */
	bool udp_gso, udp_gro;  /* INC socket offloads wanted (INCA_UDP_GSO / INCA_UDP_GRO, default on) */

	bool have_switch;
	struct sockaddr_in switch_sa;
	struct sockaddr_in data_sa; /* concrete IP; port may be 0 until bound */
	uint16_t tree_id;
	uint32_t key;
	uint32_t switch_qpn, qpn; /* 24-bit */
	uint16_t bfr_id;
	unsigned bsl_bits;
	uint8_t bsl_code, si;
	uint16_t nslots, mtu;
	uint16_t window; /* inca_comm_opts.window: cap on chunks in flight, 0 = nslots */
	uint32_t rto_us, rto_max_us, retx_limit, timeout_ms;
	uint32_t rto_min_us; /* floor once RTT samples exist: rto_us if the caller set it */
	double drop_rate;
	uint64_t seed;
	/* Packet authentication (docs/protocol.md §14): from inca_comm_opts / INCA_AUTH_KEY, or
	 * from the AM (TreeInfo.auth_key / auth_key_id); false: the tree runs unauthenticated. */
	bool auth;
	bool no_auth; /* opted out (inca_comm_opts.no_auth or INCA_AUTH=off) */
	uint8_t auth_key[WIRE_AUTH_KEY_LEN];
	uint32_t auth_key_id;

	inca_log_fn log_fn;
	void *log_ctx;
	int log_level;
};

struct client_inc; /* inc.c: data-plane socket, in-flight table, batch buffers */

struct inca_comm {
	struct client_cfg cfg;

	/* Host path: a TCP ring. send_fd goes to rank+1, recv_fd comes from rank-1.
	 * -1 when size == 1. Once a ring operation fails midway the byte streams are out of
	 * step, so the ring is marked broken and every later host-path call fails -EIO. */
	int ring_send_fd, ring_recv_fd;
	/* External bootstrap, while inca_comm_create runs: the caller's handle table (borrowed)
	 * and this rank's listener (owned; its socket moves to the bootstrap). */
	const uint8_t *boot_peers;
	struct inca_peer_listener *boot_listener;
	bool ring_broken;
	uint8_t *ring_tmp; /* staging buffer for reduce steps, CLIENT_RING_TMP_BYTES */
	uint64_t coll_seq; /* collectives issued so far; checked across ranks by the ring */
	/* Round base of the INC path (docs/protocol.md §8): chunk g goes out with round
	 * round_base + g / nslots. Derived from the job nonce every rank got at bootstrap, so a
	 * new communicator on a reused tree never meets the rounds of the one before. */
	uint32_t round_base;
	/* Job epoch (docs/protocol.md §8 "Job epochs"), in the authentication block of every INC
	 * packet: the latest wall clock of the ranks in seconds at creation (a ring MAX). A switch
	 * tree restarts on a newer epoch and drops older ones, and results must carry ours, so a
	 * reused tree never hands this job another job's results. */
	uint32_t epoch;

	struct client_inc *inc; /* NULL without a switch */
	bool inc_broken;        /* retransmission limit reached: INC is unusable */

	struct inca_comm_stats stats;

	struct client_am *am; /* am.c: AM session, NULL without am_addr */
	struct client_coll *coll; /* coll.c: collective dispatch, tuner, failover */

	/* host_coll.c: the full TCP mesh bootstrap.c builds for the host algorithms.
	 * host_fd[r] is the connection to rank r (-1 for ourselves); NULL when size == 1. Once a
	 * mesh collective fails midway the streams are out of step: host_broken, later -EIO.
	 * Staging and scratch buffers are allocated on first use and kept (grow only). */
	int *host_fd;
	bool host_broken;
	uint8_t *host_stage;
	void *host_scratch[3];
	size_t host_scratch_cap[3];

	/* Peer liveness (bootstrap.c "peer liveness"): the OS reported that a peer's TCP
	 * connection (ring or mesh) closed. Sticky: the communicator's calls fail with
	 * -ECONNRESET from the first one that cannot complete on. peer_pf: poll scratch.
	 * peer_watch_ns: when a wait that watched the peers last returned (waits within
	 * CLIENT_PEER_WATCH_NS of it poll only their own descriptors). */
	bool peer_lost;
	uint64_t peer_lost_ns;
	uint64_t peer_watch_ns;
	struct pollfd *peer_pf;
	size_t peer_pf_cap;
};

/* How long a wait may go without also watching the peers' connections: a busy INC call waits
 * hundreds of times per millisecond, and polling size + 2 more sockets each time cost about
 * 5 % of a rank's CPU. A dead peer is still noticed within about this long. */
#define CLIENT_PEER_WATCH_NS 1000000ull

#define CLIENT_RING_TMP_BYTES (1u << 20)

/* comm.c */
void client_log(const struct client_cfg *cfg, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int client_cfg_resolve(const struct inca_comm_opts *o, struct client_cfg *cfg);
/* Bytes from the start of struct `type` to the end of its field `f`. */
#define CLIENT_END_OF(type, f) (offsetof(type, f) + sizeof(((type *)0)->f))
/* An output struct to the caller (inca.h "ABI rule"): the first out_size bytes of src (the
 * caller's struct may be older, i.e. smaller, or newer). -EINVAL for NULL or an out_size
 * below min_size (the struct's first published fields). */
int client_out_copy(void *out, size_t out_size, const void *src, size_t src_size,
		    size_t min_size);

/* bootstrap.c: TCP helpers with absolute deadlines (util_now_ns clock). */
int client_bootstrap(struct inca_comm *c);
/* The INC round base (struct inca_comm) from a job's 8-byte nonce. */
uint32_t client_round_base(const uint8_t *nonce8);
int client_tcp_send_all(int fd, const void *buf, size_t len, uint64_t deadline_ns);
int client_tcp_recv_all(int fd, void *buf, size_t len, uint64_t deadline_ns);
int client_poll_one(int fd, short events, uint64_t deadline_ns);
/* poll(2) that first busy-polls for up to spin_ns (yielding the CPU between checks), then
 * sleeps for the rest of timeout_ns. Returns poll's result or -errno (EINTR: 0). */
int client_wait(struct pollfd *pf, nfds_t n, uint64_t timeout_ns, uint64_t spin_ns);

/* Peer liveness. Every wait of a collective also watches the communicator's TCP sockets for
 * a closed connection (POLLRDHUP / POLLHUP / POLLERR): a dead rank's sockets close at once,
 * long before timeout_ms. Once noticed, c->peer_lost is set and the watch stops (the state
 * is sticky); a call then still completes if it no longer needs the dead rank (its data
 * already arrived, or the switch holds every result), otherwise it fails with -ECONNRESET
 * after a grace without progress: CLIENT_PEER_GRACE_NS on INC (results the switch still
 * holds come within a round trip), CLIENT_PEER_GRACE_TCP_NS on the host paths. There the
 * data the live ranks still owe crosses TCP, which on a lossy path retransmits after 200 ms
 * or more, doubling per lost retransmission (a segment lost three times in a row arrives
 * after 1.4 s): a rank that left the last barrier and exited must not fail one still
 * waiting there for a retransmitted token. A rank that fails shuts its sockets, so a real
 * death still reaches every rank of a host call through its neighbours at once. */
#define CLIENT_PEER_GRACE_NS (250ull * 1000 * 1000)
#define CLIENT_PEER_GRACE_TCP_NS (2000ull * 1000 * 1000)
/* One wait of a host path (ring, mesh) over pf[0..n): -ETIMEDOUT once idle_deadline (set
 * idle_ns after the last progress) has passed, -ECONNRESET once a peer is lost and nothing
 * progressed for CLIENT_PEER_GRACE_TCP_NS, else client_wait_peers for at most a quarter of
 * that grace. */
int client_host_wait(struct inca_comm *c, struct pollfd *pf, nfds_t n, uint64_t idle_deadline,
		     uint64_t idle_ns);
/* client_wait over pf[0..n) plus the watched sockets (while no loss is known), busy-polling
 * first for c->cfg.busy_poll_ns. Returns like client_wait; a closed peer connection sets
 * c->peer_lost (the wait then returns > 0). */
int client_wait_peers(struct inca_comm *c, struct pollfd *pf, nfds_t n, uint64_t timeout_ns);
/* Zero-timeout check of the watched sockets: 0, or -ECONNRESET (c->peer_lost set). */
int client_peer_probe(struct inca_comm *c);
/* Note a peer loss (idempotent; logs once). */
void client_peer_note_lost(struct inca_comm *c, const char *how);
/* After a call failed because of a lost peer: shut every TCP socket of the communicator, so
 * ranks still waiting on this one fail now (their wait sees the hang-up) instead of at their
 * timeout. */
void client_peer_fail_all(struct inca_comm *c);

/* ring.c */
int client_ring_allreduce(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
			  enum inca_dtype dt, enum inca_op op);
int client_ring_barrier(struct inca_comm *c);

/* inc.c */
int client_inc_open(struct inca_comm *c);
void client_inc_close(struct inca_comm *c);
int client_inc_allreduce(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
			 enum inca_dtype dt, enum inca_op op);
/* One offloaded collective with per-chunk destinations (docs/protocol.md §4.1). The
 * aggregation space is count elements, cut into blocks of block_count (0: one block; else one
 * block per rank, owner = block index). src/dst point at the space's start, or, with
 * *_block_local, at this rank's own block only (allgather's input, reduce-scatter's output).
 * src may be NULL where this rank sends no data, dst where it receives none. */
struct client_inc_coll {
	uint8_t coll;             /* WIRE_COLL_ALLREDUCE / REDUCE / BCAST / ALLGATHER / REDUCE_SCATTER */
	const uint8_t *src;
	uint8_t *dst;
	bool src_block_local, dst_block_local;
	size_t count, block_count;
	enum inca_dtype dt;
	enum inca_op op;
	int owner_rank;           /* reduce / bcast: the root; -1: block index (allgather, r-s) */
	const uint16_t *bfr_of_rank; /* rank -> BFR-id (collectives with an owner) */
};
int client_inc_coll(struct inca_comm *c, const struct client_inc_coll *a);
/* The INC path's I/O counters (zeros without a switch). */
void client_inc_io_stats(const struct inca_comm *c, struct inca_io_stats *out);
void client_inc_auth_stats(const struct inca_comm *c, struct inca_auth_stats *out);

/* ---- am.c: the Aggregation Manager client. Without INCA_HAVE_GRPC these are
 * stubs (client_am_start -> -ENOTSUP). */
struct client_am;
/* Bind the data socket, join, start the session thread, wait for the verdict and, on
 * TREE_READY, fill c->cfg's switch fields. 0 also when the group fell back to the host. */
int client_am_start(struct inca_comm *c, const struct inca_comm_opts *o);
/* Leave, stop the session thread, free. */
void client_am_stop(struct inca_comm *c);
/* A dup of the AM-registered data socket for inc.c to adopt, or -1 (no AM). */
int client_am_data_fd(struct inca_comm *c);
/* 1: INC usable now (adopts a rebuilt tree first), 0: not (dismantled / fallback). */
int client_am_check(struct inca_comm *c);
/* 1: the tree generation c->inc uses is still the AM's current one. */
int client_am_tree_current(struct inca_comm *c);

/* ---- coll.c: collective dispatch. The host algorithms it calls are in host_coll.c
 * and the AM failure report in am.c (weak fallbacks in coll.c keep the library linkable). */
/* What each collective is, in enum inca_coll order (coll.c). */
struct client_coll_info {
	const char *name;  /* inca_coll_name */
	bool reduces;      /* takes a reduction op */
	bool rooted;       /* has a root */
	bool offload;      /* has an INC (in-network) path */
};
extern const struct client_coll_info client_coll_info[INCA_COLL_COUNT];
struct client_coll;
int client_coll_init(struct inca_comm *c);
void client_coll_free(struct inca_comm *c);
int client_host_coll(struct inca_comm *c, const struct inca_coll_args *a, enum inca_algo algo);
/* A collective of a single rank: its own contribution copied to where the result goes (none
 * for Bcast and Barrier; sendbuf == recvbuf copies nothing). Returns 0. */
int client_coll_single(const struct inca_coll_args *a);
int client_host_algo_valid(enum inca_coll coll, enum inca_algo algo);
enum inca_algo client_host_choose(const struct inca_comm *c, enum inca_coll coll, size_t bytes);
/* The AUTO tuner's verdict for one size bucket: ns[2i] / ns[2i + 1] are the i-th INC / host
 * durations (agreed over ranks); true when INC's fastest is no slower than the host's. */
bool client_tune_prefers_inc(const uint64_t *ns, unsigned pairs);

/* am.c failover */
/* Tell the AM (ReportFailure) that the INC path of the current tree generation failed
 * mid-collective; once per generation, which is then never used again. Non-blocking: the
 * call completes in the background (2 s deadline). 0 (also without an AM), or -errno. */
int client_am_report_failure(struct inca_comm *c, const char *reason);

/* ---- host_coll.c: host algorithms over the mesh (client_host_coll,
 * client_host_algo_valid and client_host_choose are declared in the coll.c block above). */
/* Close the mesh sockets and free the host_coll buffers. Idempotent; inca_comm_destroy
 * must call it. */
void client_host_close(struct inca_comm *c);

#endif
