/* libinca: the public API of the INCA client library.
 * Communicators, in-network (INC) and host-based collectives, statistics.
 * Nothing in this header does I/O by itself; every call documents its cost and owner. */
#ifndef INCA_INCA_H
#define INCA_INCA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define INCA_VERSION_MAJOR 0
#define INCA_VERSION_MINOR 2

/* Element types. The numeric values are carried on the wire (docs/protocol.md): never renumber.
 * lib/wire/dtype.h is their one definition (names, sizes); libinca checks these values against
 * it at compile time, and tools/gen_facts.py writes this enum from it. fp16 is IEEE 754
 * binary16, bf16 bfloat16 (the upper half of an fp32). */
enum inca_dtype {
	/* begin generated: dtypes */
	INCA_INT8 = 0,
	INCA_UINT8 = 1,
	INCA_INT16 = 2,
	INCA_UINT16 = 3,
	INCA_INT32 = 4,
	INCA_UINT32 = 5,
	INCA_INT64 = 6,
	INCA_UINT64 = 7,
	INCA_FP16 = 8,
	INCA_BF16 = 9,
	INCA_FP32 = 10,
	INCA_FP64 = 11,
	/* end generated: dtypes */
	INCA_DTYPE_COUNT
};

/* Reduction operators. Wire values too (lib/wire/dtype.h, like the dtypes). Bitwise ops are
 * defined for integer types only. */
enum inca_op {
	/* begin generated: ops */
	INCA_SUM = 0,
	INCA_PROD = 1,
	INCA_MIN = 2,
	INCA_MAX = 3,
	INCA_BAND = 4,
	INCA_BOR = 5,
	INCA_BXOR = 6,
	/* end generated: ops */
	INCA_OP_COUNT
};

/* Algorithm selection for collectives that have both an INC and a host path. */
enum inca_algo {
	INCA_ALGO_AUTO = 0, /* the library picks per collective and size (inca_coll_choose):
			     * INC against the best host algorithm, measured (the tuner); an
			     * INC call that fails midway finishes on the host path */
	INCA_ALGO_INC = 1,  /* in-network aggregation through the switch */
	INCA_ALGO_RING = 2, /* host-based ring over TCP between the ranks */
	/* further host algorithms (each collective accepts the ones that
	 * apply to it, see inca_coll_algo_valid) */
	INCA_ALGO_RECDBL = 3,      /* recursive doubling (AllReduce, AllGather, Barrier) */
	INCA_ALGO_RABENSEIFNER = 4,/* reduce-scatter + allgather by recursive halving (AllReduce) */
	INCA_ALGO_BINOMIAL = 5,    /* binomial tree (Broadcast, Reduce, Gather, Scatter, Barrier) */
	INCA_ALGO_BRUCK = 6,       /* Bruck (AllGather, AllToAll for small blocks) */
	INCA_ALGO_PAIRWISE = 7,    /* pairwise exchange (AllToAll, ReduceScatter) */
	INCA_ALGO_LINEAR = 8,      /* direct root <-> every rank (Gather, Scatter) */
	INCA_ALGO_COUNT /* algorithms this header knows (< INCA_ALGO_MAX); grows with new ones */
};

/* Size of one element in bytes, 0 for an invalid type. */
size_t inca_dtype_size(enum inca_dtype dt);
/* Short names ("fp32", "sum"); "?" for invalid values. Static strings. */
const char *inca_dtype_name(enum inca_dtype dt);
const char *inca_op_name(enum inca_op op);
/* Parse a name back; returns the value or -EINVAL. */
int inca_dtype_parse(const char *name);
int inca_op_parse(const char *name);
/* 1 if the switch and the host kernels can reduce this pair, else 0. */
int inca_op_valid(enum inca_dtype dt, enum inca_op op);
/* Message for a negative errno returned by this library (static string). */
const char *inca_strerror(int err);

/* Log sink: the library never prints by itself. level: 0 error, 1 warning, 2 info, 3 debug. */
typedef void (*inca_log_fn)(void *ctx, int level, const char *msg);

struct inca_comm;

/* ---- ABI rule for the structs of this header ------------------------------------------
 * Structs change only by appending fields at their end: a field is never reordered, resized,
 * retyped or removed, and an appended field starts at or beyond the previous sizeof (not in
 * its tail padding). Every struct the library reads or fills says how big the caller's copy
 * is, so a program built against an older header keeps working with a newer library:
 *   - input: struct inca_comm_opts carries its size in its first member, struct_size, which
 *     inca_comm_opts_init (or INCA_COMM_OPTS_INIT) sets from the caller's header. The library
 *     reads only the first struct_size bytes; fields beyond take their defaults (0).
 *   - output: every getter takes out_size = sizeof *out; the library writes only the first
 *     out_size bytes (a larger, newer struct keeps its extra fields as they were).
 * A size of 0, or one below the struct's first published fields, fails with -EINVAL (see each
 * struct); an options struct larger than the library knows fails with -E2BIG unless the
 * unknown tail is all zero. Arrays indexed by enum inca_coll / enum inca_algo are sized by
 * INCA_COLL_MAX / INCA_ALGO_MAX, which never change, so a new collective or algorithm does
 * not move a field. struct inca_coll_args (per call, no size) is frozen: a new parameter
 * there needs a new struct and entry point. */

/* Options for inca_comm_create. Initialise with inca_comm_opts_init (or INCA_COMM_OPTS_INIT),
 * then set what you need; 0 means the default for every field.
 * Addresses are "ipv4:port" strings; they are copied, the caller keeps ownership. */
struct inca_comm_opts {
	/* sizeof(struct inca_comm_opts) as the caller was compiled: set by the init function.
	 * Must cover at least rank .. log_level (INCA_COMM_OPTS_SIZE_MIN), else -EINVAL. */
	uint32_t struct_size;
	int rank; /* 0..size-1 */
	int size; /* number of ranks, >= 1 */

	/* Host path (ring, barrier, rendezvous). Rank 0 listens on bootstrap_addr, every other
	 * rank connects to it to exchange addresses. Required when size > 1. */
	const char *bootstrap_addr;
	const char *host_ip; /* local IPv4 to bind the host-path sockets to; default 127.0.0.1 */

	/* INC path. switch_addr NULL: no switch, INCA_ALGO_INC returns -ENOTSUP. */
	const char *switch_addr; /* e.g. "127.0.0.1:4791" */
	const char *data_addr;   /* local "ip:port" for the data-plane UDP socket (port 0: any) */
	uint16_t tree_id;
	uint32_t key;        /* group key, carried as RETH R_Key */
	uint32_t switch_qpn; /* destination QP of the switch for this tree; 0: 0x100 + tree_id;
			      * standalone: must equal the tree's qpn in the switch config */
	uint32_t qpn;        /* this client's QP number; 0: 0x1000 + bfr_id */
	uint16_t bfr_id;     /* BFR-id (1..65535); 0: rank + 1 */
	uint16_t bsl_bits;   /* BIER bit-string length, 64..4096, power of two; 0: 64 */
	uint16_t nslots;     /* switch slot pool size for the tree = largest window; 0: 256 */
	uint16_t mtu;        /* RoCE MTU, 256..4096 bytes of IB payload; 0: 4096 */
	uint32_t rto_us;     /* initial retransmission timeout, then SRTT + 4 RTTVAR of the
			      * measured round trip (RFC 6298 style), never below rto_us if set
			      * (else 2 ms); runs only while no result arrives (restarted on
			      * every result); 0: 20000 initially */
	uint32_t rto_max_us; /* backoff cap; 0: 200000 (with retx_limit 20: ~3.5 s before giving up) */
	uint32_t retx_limit; /* N consecutive timeouts with the switch silent before failing
			      * (while it answers, late peers are waited for up to timeout_ms
			      * without progress); 0: 20 */
	uint32_t timeout_ms; /* host-path connect / receive timeout; 0: 30000 */

	/* Test-only fault injection: drop this fraction of data-plane packets on send and on
	 * receive (0 = off), from a generator seeded with seed. */
	double drop_rate;
	uint64_t seed;

	inca_log_fn log_fn; /* NULL: silent */
	void *log_ctx;
	int log_level; /* messages at or below this level go to log_fn */

	/* ---- Aggregation Manager (docs/am.md): appended fields. With am_addr set the
	 * rank joins a group through inca-am instead of using switch_addr/tree_id/key/...: the
	 * AM assigns the tree, BFR-id, key, slots and MTU. If the AM answers HOST_FALLBACK (or
	 * no verdict comes within am_timeout_ms) the communicator runs on the host ring only.
	 * A rejected job credential makes inca_comm_create fail with -EACCES. */
	const char *am_addr;        /* "host:port" of inca-am; NULL: no AM */
	const char *job_id;         /* required with am_addr */
	const char *job_credential; /* the job's shared secret */
	const char *group_name;     /* several communicators per job: one group each; NULL: "" */
	const char *host_name;      /* reported to the AM to find the leaf switch; NULL: hostname */
	const char *am_attach_hint; /* optional: name of the switch this host is attached to */
	const char *am_tls_ca;      /* PEM root certificate of the AM's TLS certificate; NULL:
				     * $INCA_AM_CA, else the system's roots (see am_insecure) */
	uint32_t am_timeout_ms;     /* wait for the group's verdict; 0: timeout_ms */

	/* ---- INC window (lib/client/README.md "Window"): appended fields. The number of INC
	 * chunks a rank keeps in flight adapts on its own (slow start, then additive increase;
	 * multiplicative decrease when the round trip rises well above its minimum, on
	 * congestive loss and on a timeout), never above nslots. */
	uint16_t window; /* cap on INC chunks in flight per rank; 0 or > nslots: nslots */

	/* ---- Reproducible reductions (docs/am.md "Deterministic trees"): appended field. With
	 * am_addr: 1 asks the AM for a tree whose switches add the contributions in BFR-id order,
	 * so a floating-point result does not depend on packet arrival order (the same bits on
	 * every run); the switch then keeps one buffer per member and slot. Any rank asking sets
	 * it for the group. Without an AM the switch's own configuration decides. */
	int deterministic;

	/* ---- Packet authentication (docs/protocol.md §14): appended fields. With a group key
	 * every INC packet carries an authentication block: contributions are signed, results
	 * and repair notices are dropped unless their MAC and sender check out. Every rank and
	 * the switch's tree must use the same key (inca-launch gives each job a random one).
	 * Without am_addr the key is auth_key, else the environment variable INCA_AUTH_KEY (64
	 * hex digits; INCA_AUTH_KEY_ID its id); with am_addr the AM provides it. A switch_addr
	 * without a key fails inca_comm_create with -ENOKEY unless the caller opted out:
	 * no_auth = 1, or INCA_AUTH=off in the environment, runs the INC path unauthenticated
	 * (the switch's tree must then say auth = off) even if a key is given. */
	const uint8_t *auth_key; /* INCA_AUTH_KEY_BYTES bytes; NULL: INCA_AUTH_KEY or none */
	uint32_t auth_key_id;    /* carried in every packet; must match the switch's tree */
	int no_auth;

	/* ---- External bootstrap (inca_peer_listen below): appended fields. The table of every
	 * rank's peer handle, in rank order (size * INCA_PEER_HANDLE_BYTES bytes), exchanged by
	 * the caller, and this rank's listener; bootstrap_addr must then be NULL. */
	const uint8_t *peer_table;
	struct inca_peer_listener *peer_listener; /* always consumed by inca_comm_create (if
						   * struct_size reaches it) */

	/* ---- AM transport (docs/am.md "gRPC over TLS"): appended field. gRPC to the AM uses TLS
	 * unless am_insecure = 1 (or the environment variable INCA_AM_INSECURE=1): plaintext, for
	 * an AM run with 'tls = off'; job credentials and group keys then cross in clear. */
	int am_insecure;
};
/* Smallest accepted struct_size: the fields every communicator needs (rank .. log_level). */
#define INCA_COMM_OPTS_SIZE_MIN \
	(offsetof(struct inca_comm_opts, log_level) + sizeof(int))
/* Zero every option and record this header's struct size. Inline on purpose: the size must be
 * the caller's sizeof, not the library's. */
static inline void inca_comm_opts_init(struct inca_comm_opts *o)
{
	unsigned char *p = (unsigned char *)o;

	for (size_t i = 0; i < sizeof *o; i++) /* padding too: the library checks tails */
		p[i] = 0;
	o->struct_size = (uint32_t)sizeof *o;
}
/* The same as an initializer: struct inca_comm_opts o = INCA_COMM_OPTS_INIT; */
#define INCA_COMM_OPTS_INIT { .struct_size = (uint32_t)sizeof(struct inca_comm_opts) }
#define INCA_AUTH_KEY_BYTES 32

/* External bootstrap, for frameworks that already exchange data among their ranks (MPI,
 * torch.distributed stores, NCCL's handle exchange) instead of INCA's rendezvous at rank 0:
 * every rank opens its host-path listener with inca_peer_listen (on host_ip, NULL:
 * 127.0.0.1), which fills an opaque handle; the caller gathers the handles of all ranks in
 * rank order and passes the table and the rank's own listener to inca_comm_create
 * (opts.peer_table, opts.peer_listener). inca_comm_create takes the listener over, also when
 * it fails; inca_peer_listener_close frees one that is not used. 0 or -errno. */
#define INCA_PEER_HANDLE_BYTES 32
struct inca_peer_listener;
int inca_peer_listen(const char *host_ip, struct inca_peer_listener **out,
		     uint8_t handle[INCA_PEER_HANDLE_BYTES]);
void inca_peer_listener_close(struct inca_peer_listener *l);

/* Create a communicator. Blocks until every rank has joined the host path (bootstrap) or
 * timeout_ms passes. Returns 0 and an owned communicator in *out, or -errno:
 * -EINVAL bad options (also struct_size 0 or below INCA_COMM_OPTS_SIZE_MIN), -E2BIG options
 * of a newer header that this library cannot honour, -ETIMEDOUT peers missing, -EADDRINUSE, ... */
int inca_comm_create(const struct inca_comm_opts *opts, struct inca_comm **out);
/* Close sockets and free everything. NULL is accepted. */
void inca_comm_destroy(struct inca_comm *comm);

int inca_comm_rank(const struct inca_comm *comm);
int inca_comm_size(const struct inca_comm *comm);

/* AllReduce `count` elements. sendbuf == recvbuf is the in-place form. Every rank must call it
 * with the same count, dtype, op and algo, in the same order. Returns 0 or -errno:
 * -EINVAL bad arguments, -ENOTSUP no switch / unsupported pair, -ETIMEDOUT the retransmission
 * limit was reached (the INC path is then unusable until a new communicator), -EIO. */
int inca_allreduce(struct inca_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
		   enum inca_dtype dt, enum inca_op op);
int inca_allreduce_algo(struct inca_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
			enum inca_dtype dt, enum inca_op op, enum inca_algo algo);

/* Barrier (INCA_ALGO_AUTO: through the switch when the tree is usable, else a host
 * algorithm). */
int inca_barrier(struct inca_comm *comm);

struct inca_comm_stats {
	uint64_t tx_pkts, tx_bytes;     /* data-plane packets sent, including retransmissions */
	uint64_t rx_pkts, rx_bytes;     /* data-plane packets received */
	uint64_t retransmits;           /* packets sent again after a timeout */
	uint64_t timeouts;              /* retransmission timer expiries */
	uint64_t rx_dup_results;        /* results for chunks already completed */
	uint64_t rx_bad;                /* packets that failed decoding or did not match */
	uint64_t injected_drops;        /* fault injection */
	uint64_t inc_calls, ring_calls; /* collectives by path */
	uint64_t rx_nacks;              /* switch repair notices received (docs/protocol.md) */
};
/* Copy the counters: the first out_size bytes (sizeof *out; at least up to rx_nacks). Cheap.
 * 0 or -EINVAL. */
int inca_comm_get_stats(const struct inca_comm *comm, struct inca_comm_stats *out,
			size_t out_size);

/* How the INC data path talks to the kernel. UDP GSO: one send carries up to 15 packets that
 * the kernel cuts into datagrams; UDP GRO: one receive returns several datagrams of a flow.
 * Each is used where the kernel accepts it and can be turned off for a process with the
 * environment variables INCA_UDP_GSO=0 / INCA_UDP_GRO=0. The struct may grow at its end. */
struct inca_io_stats {
	int gso;              /* 1: INC sends use UDP GSO now (0: off, refused, or no switch) */
	int gro;              /* 1: the INC socket has UDP_GRO on */
	uint64_t tx_syscalls; /* sendmmsg calls of the INC path */
	uint64_t tx_msgs;     /* messages they carried: GSO sends and single packets */
	uint64_t gso_sends;   /* messages carrying more than one packet */
	uint64_t gso_failed;  /* GSO sends the kernel refused (then sent one by one, GSO off) */
	uint64_t rx_syscalls; /* recvmmsg calls that returned data */
	uint64_t rx_bufs;     /* buffers they returned */
	uint64_t rx_gro_bufs; /* buffers holding more than one packet */
};
/* Copy the I/O counters: the first out_size bytes (sizeof *out; at least up to rx_gro_bufs).
 * 0 or -EINVAL. */
int inca_comm_get_io_stats(const struct inca_comm *comm, struct inca_io_stats *out,
			   size_t out_size);

/* Packet authentication of the INC path. The struct may grow at its end. */
struct inca_auth_stats {
	int enabled;              /* 1: packets are signed and verified */
	uint32_t key_id;
	uint64_t tx_signed;       /* packets signed */
	uint64_t rx_verified;     /* packets whose MAC held */
	uint64_t rx_missing;      /* dropped: no authentication block */
	uint64_t rx_bad_key_id;   /* dropped: another key id */
	uint64_t rx_bad_ctx;      /* dropped: the sender context is not a switch's */
	uint64_t rx_bad_mac;      /* dropped: MAC mismatch (forged or corrupted) */
	/* appended: */
	uint64_t rx_replay;       /* dropped: authentic counter already seen, or below the
				   * switch context's replay window (a replayed packet) */
	uint64_t rx_epoch;        /* dropped: another job's epoch (docs/protocol.md §8) */
	uint32_t epoch;           /* this communicator's job epoch (0 before bootstrap) */
	int opted_out;            /* 1: authentication off by no_auth / INCA_AUTH=off */
};
/* Copy the authentication counters: the first out_size bytes (sizeof *out; at least up to
 * rx_bad_mac). 0 or -EINVAL. */
int inca_comm_get_auth_stats(const struct inca_comm *comm, struct inca_auth_stats *out,
			     size_t out_size);

/* ---- Aggregation Manager ---------------------------------------------------------------- */

/* The communicator's view of its AM group (only for communicators created with am_addr). */
struct inca_am_info {
	uint64_t group_id;
	int inc_enabled;     /* 1: collectives may use the tree now */
	int state;           /* 0 waiting, 1 tree ready, 2 host fallback, 3 dismantled */
	uint16_t tree_id;
	uint32_t generation; /* bumps on every rebuild */
	uint64_t reconnects; /* Session stream reconnections (e.g. AM restarts) */
	char reason[128];    /* why INC is off, when it is */
};
/* Copy the AM state: the first out_size bytes (sizeof *out; at least up to reason).
 * -ENOTSUP without an AM (or without gRPC support), -EINVAL bad args.
 * Cheap (one mutex); call from the communicator's thread. */
int inca_comm_am_info(const struct inca_comm *comm, struct inca_am_info *out, size_t out_size);

/* ---- Collectives (docs/collectives.md) --------------------------------------------------
 * The nine collectives of draft-liu-nfsv4-rocev2 §1. Every rank of the communicator calls the
 * same collective with the same count, dtype, op, root and algo, in the same order. Counts are
 * in elements of dt. Data-movement collectives (Broadcast, AllGather, AllToAll, Gather,
 * Scatter) accept every dtype; pass INCA_UINT8 for raw bytes. sendbuf == recvbuf is the
 * in-place form where it makes sense (AllReduce, Reduce at the root, and for AllGather /
 * Gather when the rank's own block already sits in place in recvbuf).
 * Returns 0 or -errno: -EINVAL bad arguments, -ENOTSUP algo does not apply / no switch,
 * -ETIMEDOUT, -EIO host path broken. With INCA_ALGO_AUTO an INC failure mid-call (switch or
 * link dead, AM dismantled the tree) completes the call on a host algorithm. */
enum inca_coll {
	INCA_COLL_ALLREDUCE = 0,
	INCA_COLL_REDUCE = 1,
	INCA_COLL_BCAST = 2,
	INCA_COLL_ALLGATHER = 3,
	INCA_COLL_REDUCE_SCATTER = 4,
	INCA_COLL_ALLTOALL = 5,
	INCA_COLL_GATHER = 6,
	INCA_COLL_SCATTER = 7,
	INCA_COLL_BARRIER = 8,
	INCA_COLL_COUNT /* collectives this header knows; grows with new ones */
};
/* Fixed bounds of arrays indexed by collective / algorithm in public structs: never change. */
#define INCA_COLL_MAX 32
#define INCA_ALGO_MAX 32

/* One collective call, fully described (what inca-bench and the MPI interposer use).
 * count: AllReduce/Reduce/Bcast: elements in the buffer; AllGather/Gather: elements each rank
 * contributes (recvbuf holds size * count); ReduceScatter: elements each rank receives
 * (sendbuf holds size * count); AllToAll/Scatter: elements per destination rank block.
 * op: only for AllReduce, Reduce, ReduceScatter. root: only for Reduce, Bcast, Gather,
 * Scatter. recvbuf is ignored on non-roots for Reduce and Gather (may be NULL), sendbuf on
 * non-roots for Scatter. Bcast uses recvbuf only (sendbuf ignored). */
struct inca_coll_args {
	enum inca_coll coll;
	const void *sendbuf;
	void *recvbuf;
	size_t count;
	enum inca_dtype dt;
	enum inca_op op;
	int root;
	enum inca_algo algo; /* INCA_ALGO_AUTO: the library picks (inca_coll_choose) */
};
int inca_coll(struct inca_comm *comm, const struct inca_coll_args *args);

/* Convenience forms with INCA_ALGO_AUTO. */
int inca_reduce(struct inca_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
		enum inca_dtype dt, enum inca_op op, int root);
int inca_bcast(struct inca_comm *comm, void *buf, size_t count, enum inca_dtype dt, int root);
int inca_allgather(struct inca_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
		   enum inca_dtype dt);
int inca_reduce_scatter(struct inca_comm *comm, const void *sendbuf, void *recvbuf,
			size_t count, enum inca_dtype dt, enum inca_op op);
int inca_alltoall(struct inca_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
		  enum inca_dtype dt);
int inca_gather(struct inca_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
		enum inca_dtype dt, int root);
int inca_scatter(struct inca_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
		 enum inca_dtype dt, int root);

/* Short names of collectives and algorithms ("allreduce", "ring", ...); "?" if invalid. */
const char *inca_coll_name(enum inca_coll coll);
const char *inca_algo_name(enum inca_algo algo);
int inca_algo_parse(const char *name); /* value or -EINVAL */
/* 1 if algo can serve coll on this communicator now (INC needs a usable switch path). */
int inca_coll_algo_valid(const struct inca_comm *comm, enum inca_coll coll, enum inca_algo algo);
/* The algorithm AUTO would pick for this collective and message size in bytes (per-rank
 * buffer as in inca_coll_args.count * dtype size). Same answer on every rank. */
enum inca_algo inca_coll_choose(const struct inca_comm *comm, enum inca_coll coll,
				size_t bytes);
/* Calls served per collective and path since creation (for the MPI interposer's counters and
 * inca-bench's "choice" column). Entries for collectives / algorithms the library does not
 * have are 0. */
struct inca_coll_counts {
	uint64_t calls[INCA_COLL_MAX][INCA_ALGO_MAX];
	uint64_t failovers; /* INC calls completed on the host path after an INC failure */
};
/* Copy the counts: the first out_size bytes (sizeof *out; at least up to failovers). Cheap.
 * 0 or -EINVAL. */
int inca_comm_get_coll_counts(const struct inca_comm *comm, struct inca_coll_counts *out,
			      size_t out_size);
/* The AUTO tuner on (default, unless INCA_TUNE=off) or off for this communicator. Off: every
 * INCA_ALGO_AUTO call of an offloadable collective runs on INC whenever the tree is usable,
 * and still fails over to the host path if INC dies mid-call (an explicit INCA_ALGO_INC call
 * returns the error instead). Every rank must make the same call between the same two
 * collectives. Waits for outstanding nonblocking requests. 0 or -EINVAL. */
int inca_comm_set_tuning(struct inca_comm *comm, int on);
/* Bytes of sendbuf and recvbuf one call with these arguments touches on this rank (0: that
 * buffer is not used, e.g. a non-root's recvbuf of Reduce); for wrappers that must check
 * or copy buffers (the MPI interposer's aliasing check). 0 or -EINVAL. */
int inca_coll_extent(const struct inca_comm *comm, const struct inca_coll_args *args,
		     size_t *send_bytes, size_t *recv_bytes);

/* Nonblocking AllReduce: start returns at once; the operation progresses in the background
 * (a per-communicator progress thread) and completes in issue order. The buffers must stay
 * valid and untouched until inca_wait returns / inca_test reports done. Blocking collectives
 * on the same communicator first wait for every outstanding request. */
struct inca_request;
int inca_iallreduce(struct inca_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
		    enum inca_dtype dt, enum inca_op op, struct inca_request **req);
/* *done = 1 when complete (then the request's status is returned and the request freed,
 * *req set to NULL); 0 while in progress. */
int inca_test(struct inca_request **req, int *done);
/* Blocks until complete; returns the operation's status and frees the request (*req NULL). */
int inca_wait(struct inca_request **req);

#ifdef __cplusplus
}
#endif
#endif
