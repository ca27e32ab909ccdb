/* tools/launch: run an INCA job on loopback from one process — an address plan per test
 * index, an inca-switch child (config file, ready file, SIGTERM, stats JSON) and N forked rank
 * processes each running a function with its own communicator. Used by inca-demo, the
 * benchmarks and the integration tests. Prints only to stderr, and only on failures. */
#ifndef INCA_TOOLS_LAUNCH_H
#define INCA_TOOLS_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "inca/inca.h"
#include "json.h"

#define LAUNCH_MAX_RANKS 64
#define LAUNCH_IP_LEN 32

struct launch_plan;

/* Loopback addresses of one job. Index 0 is the documented default (switch 127.0.0.1, rank r
 * 127.0.0.(10+r)); index k in 1..255 owns the block 127.1.k.0/24 (switch 127.1.k.1, bootstrap
 * 127.1.k.2, rank r 127.1.k.(10+r)), so tests with distinct indexes never share an address or a
 * port and can run in parallel with each other and with suites that use 127.0.x.x
 * (launch_addrs_pick falls back to 127.B.k.0/24 when the block is busy). Every data-plane
 * socket uses UDP 4791 like real RoCEv2. */
struct launch_addrs {
	unsigned index;
	char switch_ip[LAUNCH_IP_LEN];
	char boot_ip[LAUNCH_IP_LEN];
	uint16_t switch_port;
	uint16_t boot_port; /* TCP; derived from the pid so quick re-runs avoid TIME_WAIT */
	char prefix[LAUNCH_IP_LEN]; /* "127.1.k." */
};
int launch_addrs_init(struct launch_addrs *a, unsigned index);
/* Like launch_addrs_init, but if UDP 4791 on the block's switch or rank addresses is taken
 * (the same test running from another build tree), use 127.B.k.0/24 for the first free
 * B in 2..16. Index 0 is never moved. Returns 0 or -EADDRINUSE. */
int launch_addrs_pick(struct launch_addrs *a, unsigned index, int nranks);
/* Data / host IP of a rank: "<prefix>(10 + rank)". */
void launch_rank_ip(const struct launch_addrs *a, int rank, char out[LAUNCH_IP_LEN]);

/* Everything about one job. Zero-initialise, then call launch_cfg_defaults and adjust. */
struct launch_cfg {
	int nranks;
	unsigned addr_index;
	const char *switch_path; /* NULL: launch_find_switch() */
	bool no_switch;          /* ring-only job: no inca-switch, comms without switch_addr */

	/* switch / tree */
	uint16_t tree_id;
	uint32_t key;
	uint16_t nslots;
	uint32_t slot_bytes;
	uint16_t bsl_bits;
	bool deterministic;
	bool check_icrc;
	int switch_threads;
	double switch_drop_rate; /* inca-switch --drop-rate */
	bool reflect;            /* inca-switch --reflect (benchmarks) */
	bool switch_verbose;
	uint32_t stats_interval_ms;
	/* >= 0: launch_switch_start runs inca-switch on this CPU alone (its workers with
	 * --cpus, polling as on a CPU of their own), as a switch has silicon of its own
	 * (launch_switch_cpu_check first; one worker thread; the ranks leave that CPU to it
	 * during INC calls, launch_rank_cpus). -1 (launch_cfg_defaults): the scheduler places
	 * it. */
	int switch_cpu;

	/* clients */
	uint16_t mtu;
	double client_drop_rate;
	uint32_t rto_us, rto_max_us, retx_limit, timeout_ms;
	uint64_t seed;
	int log_level; /* libinca messages at or below go to stderr (-1: none) */

	unsigned job_timeout_s; /* ranks still running after this are killed (exit 124) */

	/* Fabric mode (netns harness): ranks in network namespaces with the plan's addresses;
	 * the switches are external (started by the harness). NULL: loopback job. */
	const struct launch_plan *plan;

	/* Run by every rank after fn returned 0, before its communicator is destroyed (so an AM
	 * group is still up): the fabric demo's status view and per-tree switch check. Its
	 * return value replaces fn's. NULL: none. (Appended for the AM fabric mode.) */
	int (*rank_epilogue)(struct inca_comm *comm, void *arg);
	void *epilogue_arg;

	/* Packet authentication of a loopback job (docs/protocol.md §14): launch_cfg_defaults
	 * draws a random group key, written into the switch's tree and given to every rank.
	 * no_auth: neither side authenticates. Fabric jobs (plan) use what the harness set up. */
	bool no_auth;
	uint8_t auth_key[32];
	uint32_t auth_key_id;
};
void launch_cfg_defaults(struct launch_cfg *c);

/* Whether cpu can be given to the switch alone: it is in this process's CPU set, which has
 * at least one more CPU for the ranks. 0, or -EINVAL with the reason in why. */
int launch_switch_cpu_check(int cpu, char *why, size_t cap);
/* The highest CPU this process may use, or -1 if it cannot tell. */
int launch_last_cpu(void);
/* In rank process `rank` of a job with launch_cfg.switch_cpu: run on every CPU of the
 * process's original set (recorded by the first call) except exclude_cpu, or on all of them
 * with exclude_cpu -1, starting on the set's (rank mod size)-th CPU. 0, -EIO if the set read
 * back differs, or -errno. */
int launch_rank_cpus(int rank, int exclude_cpu);
/* The CPUs process pid may run on (0: this one) as a list, "0-3,6", without exclude_cpu
 * (-1: none left out). 0 or -errno. */
int launch_cpus_of(pid_t pid, int exclude_cpu, char *out, size_t cap);

/* Path of the inca-switch binary: $INCA_SWITCH, else next to the running executable's build
 * tree (<exe dir>/../daemons/switch, ../../daemons/switch), else "inca-switch" in $PATH. The
 * result is written to out. Returns 0 or -ENOENT. */
int launch_find_switch(char *out, size_t cap);

/* Whether p is a regular file this process may execute. */
bool launch_is_exec(const char *p);
/* NAME as a program: itself if it holds a '/', else the first executable NAME in $PATH.
 * 0 with the path in out, or -ENOENT. */
int launch_find_in_path(const char *name, char *out, size_t cap);
/* A program of this project: the path in $ENV if that is set (nothing else is tried), else
 * the first of rel[0..nrel) (paths relative to the running executable's directory, starting
 * with '/') that is executable, else, with libexec, the installed helper NAME
 * (launch_find_file), else NAME in $PATH. 0 with the path in out, or -ENOENT. */
int launch_find_program(const char *env, const char *const *rel, size_t nrel, const char *name,
			bool libexec, char *out, size_t cap);

/* Files INCA installs for its programs: scripts the tools run (plot_bench.py, plot_coll.py,
 * sim_plot.py; installed in <datadir>/inca) and helper programs (ompi-fabric-run,
 * ompi-netns-agent, ompi-coll-bench; installed in <libexecdir>/inca). */
enum launch_file_kind {
	LAUNCH_DATA,
	LAUNCH_LIBEXEC,
};

/* Path of the installed file NAME of KIND, written to out: $INCA_DATA_DIR/NAME if that variable
 * is set (either kind); else, relative to the running executable, the build tree (meson
 * copies the scripts into <build>/tools) or the install layout (<bindir>/../share/inca for a
 * default layout, so a DESTDIR or relocated install finds its own copy); else the directory
 * configured at build time. Returns 0 or -ENOENT (out then holds the last candidate). */
int launch_find_file(enum launch_file_kind kind, const char *name, char *out, size_t cap);

/* A running inca-switch child. */
struct launch_switch {
	pid_t pid;
	char dir[256]; /* private temp directory holding the files below */
	char conf_path[300], ready_path[300], stats_path[300], log_path[300];
	char path[512];
};

/* Write the config (one tree, members = ranks), start the switch with its stdout/stderr in
 * log_path, and wait up to 10 s for the ready file. extra_args (NULL-terminated, may be NULL)
 * are appended to the command line. Returns 0 or -errno (the log is copied to stderr). */
int launch_switch_start(const struct launch_cfg *c, const struct launch_addrs *a,
			const char *const *extra_args, struct launch_switch *sw);
/* SIGTERM, wait up to 10 s (then SIGKILL), read the stats file. Returns the switch's exit
 * status (0 = clean, >0 exit code, 128+sig if killed); *stats (may be NULL) receives the parsed
 * stats or NULL. Removes the temp directory unless $INCA_KEEP_TMP is set. */
int launch_switch_stop(struct launch_switch *sw, struct json **stats);
/* CPU seconds (user + system) the switch process used so far, or -1. */
double launch_proc_cpu_s(pid_t pid);

/* Fill opts for one rank. ipbuf must hold 4 strings of 48 bytes (they back opts' pointers). */
void launch_comm_opts(const struct launch_cfg *c, const struct launch_addrs *a, int rank,
		      struct inca_comm_opts *opts, char ipbuf[4][48]);

/* Memory shared by the parent and every rank process (MAP_SHARED|MAP_ANONYMOUS, zeroed). */
void *launch_shm_alloc(size_t bytes);
void launch_shm_free(void *p, size_t bytes);

/* Function run by each rank process with its communicator. Its return value (0..125) becomes
 * the process exit code. */
typedef int (*launch_rank_fn)(struct inca_comm *comm, void *arg);

/* Fork c->nranks processes; each creates its communicator from launch_comm_opts, runs fn,
 * destroys the communicator and exits with fn's value (2 if inca_comm_create failed). Waits for
 * all of them, at most c->job_timeout_s (then SIGKILL, exit 124). status[r] (may be NULL)
 * receives each exit code (128+sig when killed by a signal). Returns the number of ranks that
 * did not exit 0. stdout is flushed before forking. */
int launch_run_ranks(const struct launch_cfg *c, const struct launch_addrs *a, launch_rank_fn fn,
		     void *arg, int *status);

/* Convenience: start the switch (unless no_switch), run the ranks, stop the switch.
 * Returns 0 when the switch started and stopped cleanly and every rank exited 0; otherwise a
 * positive failure count or -errno. *stats as in launch_switch_stop. */
int launch_job(const struct launch_cfg *c, launch_rank_fn fn, void *arg, struct json **stats);

/* Switch stats summary (sums over trees): the counters every tool prints. Missing keys read 0. */
struct launch_sw_summary {
	double rx_pkts, tx_pkts; /* per-tree engine counters, summed over trees */
	double contributions, aggregations, duplicates, results_resent;
	double notices; /* repair notices sent (WIRE_F_NACK) */
	double resends_limited, notices_limited; /* withheld for want of credit */
	double drops;                /* switch-wide drops_total (every reason) */
	double sw_rx_pkts, sw_tx_pkts; /* switch-wide socket counters */
	double own_cpu_workers;        /* workers on a CPU of their own (inca-switch --cpus) */
};
void launch_sw_summarize(const struct json *stats, struct launch_sw_summary *out);

/* libinca log sink printing "[rank N] msg" to stderr. ctx is the rank cast to a pointer. */
void launch_log_stderr(void *ctx, int level, const char *msg);

/* Human-readable byte count ("4 B", "64 KiB", "64 MiB"). */
const char *launch_fmt_bytes(uint64_t b, char *buf, size_t cap);
/* Parse "4", "64K", "1M", "1G" (binary multiples). Returns 0 or -EINVAL. */
int launch_parse_bytes(const char *s, uint64_t *out);


/* ---- Fabric plans (netns harness) -------------------------------------------------------
 * tests/netns/fabric.py builds hosts and switches as network namespaces, starts the switch
 * daemons in them and writes a plan file; the launcher then forks each rank as usual and
 * moves it into its host namespace with setns() before it creates its communicator, so the
 * ranks still share memory with the launching process (tools/sweep.c needs that). Plan file,
 * one item per line, '#' comments:
 *   name PREFIX
 *   desc free text up to the end of the line
 *   bootstrap IP[:PORT]                 rank 0's rendezvous (port 0/absent: derived from pid)
 *   tree ID key K slots N bsl B
 *   rank R netns NS ip IP switch IP:PORT bfr K
 *   switch NAME role ROLE netns NS listen IP:PORT pid PID stats PATH
 * AM mode (the switches have no trees; the Aggregation Manager builds them):
 *   am IP:PORT job ID credential SECRET [group NAME] [cli PATH] [ca PEM | insecure 1]
 *   rank R ... host NAME                the host name the rank reports to the AM
 * Lines hold at most 1022 characters; a value longer than its field (netns, ip, switch,
 * name, role, listen, stats, bootstrap) is an error, never cut.
 * With an 'am' line the ranks join through the AM (inca_comm_opts.am_addr/job_id/...) and
 * ignore the plan's switch, tree, key and BFR-id; 'cli' is the `inca` binary used for the
 * status view (with the job's credential); 'ca' the CA of the AM's TLS certificate
 * (inca_comm_opts.am_tls_ca, `inca --ca`), 'insecure 1' plaintext gRPC to an AM run with
 * 'tls = off'.
 */
#define LAUNCH_MAX_SWITCHES 32

struct launch_plan_rank {
	char netns[64]; /* "" = stay in the current namespace */
	char ip[LAUNCH_IP_LEN];
	char switch_addr[48];
	uint16_t bfr_id;
	char host[32]; /* AM mode: host name reported to the AM ("" = none) */
};

struct launch_plan_switch {
	char name[32];
	char role[8];
	char netns[64];
	char listen[48];
	pid_t pid;
	char stats_path[256];
};

struct launch_plan {
	char name[64];
	char desc[256];
	char boot_ip[LAUNCH_IP_LEN];
	uint16_t boot_port; /* 0: launch_addrs' pid-derived port */
	uint16_t tree_id;
	uint32_t key;
	uint16_t nslots, bsl_bits;
	int nranks;
	struct launch_plan_rank ranks[LAUNCH_MAX_RANKS];
	int nswitches;
	struct launch_plan_switch sw[LAUNCH_MAX_SWITCHES];
	/* AM mode ('am' line); am_addr[0] == '\0' otherwise */
	char am_addr[64];
	char job_id[64];
	char job_credential[128];
	char group_name[64];
	char cli_path[256];
	char am_ca[256];
	int am_insecure;
	/* Standalone trees ('tree ... auth_key HEX auth_key_id N' or 'auth off'): the ranks'
	 * group key or their explicit opt-out; a standalone plan needs one of them. */
	bool has_auth_key, auth_off;
	uint8_t auth_key[32];
	uint32_t auth_key_id;
};

/* Parse a plan file. Returns 0, or -errno with a "path:line: message" on stderr. */
int launch_plan_load(const char *path, struct launch_plan *p);
/* Copy the plan's job parameters into c (nranks, tree, key, slots, bsl) and set c->plan. */
void launch_plan_apply(const struct launch_plan *p, struct launch_cfg *c);
/* Move the calling thread (process) into the named network namespace (/run/netns/NAME).
 * Returns 0 or -errno. */
int launch_enter_netns(const char *name);
/* Ask every plan switch for fresh statistics (SIGUSR1) and parse them into stats[i] (NULL on
 * failure; free with json_free). Waits up to timeout_ms for files newer than the signal. */
void launch_plan_switch_stats(const struct launch_plan *p, struct json **stats,
			      unsigned timeout_ms);

#endif
