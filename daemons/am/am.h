/* inca-am internals shared by main.c (config, main loop), server.c (gRPC core API: calls,
 * sessions), switches.c (switch workers, snapshots), groups.c (groups, lifecycle), join.c
 * (Join, credentials, quotas), checks.c (heartbeats, tree checks), journal.c (writing) and
 * journal_replay.c (replay, recovery), and query.c. Threads: every function here runs on the main loop thread, which owns all group
 * and switch state. switches.c runs one worker thread per switch (its NETCONF connection) and
 * server.c one thread that waits on the gRPC completion queue; both only hand results to the
 * main loop through short-locked queues and wake it with am->wake_fd. Daemon-private. */
#ifndef INCA_AM_AM_H
#define INCA_AM_AM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <grpc/grpc.h>

#include "am_rpc.h"
#include "cfg.h"
#include "ctl/ctl.h"
#include "plan.h"

#define NS_PER_MS 1000000ull

/* Log to stderr: 0 errors/denials, 1 (-v) lifecycle, 2 (-vv) per call. */
extern int am_verbosity;
void am_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));


struct am_swq;

/* The main loop's snapshot of a switch, updated from its worker's poll answers. */
struct am_switch {
	const struct am_cfg_switch *cfg;
	struct am_swq *q;        /* its worker (switches.c); owns the NETCONF connection */
	unsigned polls_pending;  /* polls queued and not answered yet */
	bool up;                 /* last poll succeeded */
	bool polled;             /* at least one poll was attempted */
	struct ctl_caps caps;
	struct ctl_tree *running; /* last ctl_get_trees */
	size_t nrunning;
	uint64_t snap_ns;        /* when the poll behind caps/running was queued */
	uint32_t foreign_slots, foreign_trees; /* used by trees this AM does not own */
	uint32_t am_slots, am_trees;           /* held by this AM's groups */
	char err[256];
};

enum am_gstate { AM_G_FORMING, AM_G_READY, AM_G_FALLBACK, AM_G_DISMANTLED };

struct am_session;
struct am_gop;
struct am_pending;

struct am_member {
	bool joined, left;
	uint32_t rank;
	uint16_t bfr_id;
	char host[AM_STR], hint[AM_STR];
	char addr[CTL_ADDR_MAX];
	uint32_t qpn;
	uint64_t token;
	uint32_t dtype_mask, op_mask;
	bool wants_inc;
	bool wants_det;          /* asked for a deterministic (arrival-order independent) tree */
	uint16_t max_mtu;        /* Capabilities.max_mtu, 0: 4096 or more */
	struct am_session *sess; /* NULL while no session stream is open */
	uint64_t last_hb_ns;
	int attach;              /* switch index, -1 unknown */
};

struct am_group {
	struct am_group *next;
	uint64_t id;
	char job[AM_STR], name[AM_STR];
	uint32_t size, joined;
	enum am_gstate state;
	char reason[256];
	bool rebuildable;        /* lost its tree to a failure: rebuild when the fabric allows */
	uint16_t slots_wanted;
	uint32_t generation;
	uint32_t last_auth_key_id; /* key id of the latest tree: the next one differs */
	struct am_plan plan;     /* valid while the group holds a tree (plan.ok) */
	struct am_plan push_plan; /* the tree being pushed (push_plan.ok), not the group's yet */
	char (*plan_sw_names)[AM_STR]; /* per plan.sws entry: switch name (for the journal) */
	uint64_t created_ns, state_ns;
	struct am_member *m;     /* size entries, index = rank */
	struct am_gop *op;       /* switch work in flight for the group (a push, a re-check) */
	struct am_pending *reply; /* a ReportFailure answered when that work is done */
};

struct am_stats {
	uint64_t joins, joins_denied, sessions_denied, groups_created, groups_ready,
		groups_fallback, dismantles, rebuilds, heartbeat_timeouts, switch_failures,
		push_failures, journal_records, recovered_groups, rpc_unimplemented,
		operator_denied, failure_reports, failure_reports_denied, failure_reports_stale,
		journal_damaged_records, orphan_trees_removed, queries_denied,
		learned_expired;
};

/* Who is calling, from the call's metadata (AM_MD_* keys of am_rpc.h), checked by
 * am_auth_check: the admin sees everything, a job's caller its own groups only. */
enum am_caller { AM_CALLER_ANON, AM_CALLER_JOB, AM_CALLER_ADMIN };
struct am_auth {
	enum am_caller who;
	char job[AM_STR]; /* AM_CALLER_JOB */
};

struct am {
	struct am_cfg cfg;
	size_t nsw;
	struct am_switch sw[AM_MAX_SWITCHES];
	struct am_group *groups;
	uint64_t next_group_id;
	FILE *journal;
	bool recover;            /* --recover: start from a damaged journal's valid records */
	struct am_stats st;
	struct am_metrics *metrics; /* metrics.c: --metrics-listen, NULL when off */
	uint64_t start_ns, last_poll_ns;
	int wake_fd;             /* eventfd: a worker or the gRPC thread has something for us */
	struct am_swio *swio;    /* switches.c: the answers of the switch workers */
	struct am_srvq *srvq;    /* server.c: gRPC events waiting for the main loop */
	uint32_t next_op_seq;
	bool sw_polled;          /* a poll answer was applied since the last group check */
	/* jobs whose secret was set by a first joiner (allow_first_joiner); an entry is
	 * forgotten once its job has had no group for cfg.first_joiner_ttl_s */
	size_t nlearned;
	struct {
		char id[AM_STR], cred[AM_STR * 2];
		uint64_t idle_since_ns; /* 0: the job has a group */
	} learned[AM_MAX_JOBS];
	/* gRPC */
	grpc_server *server;
	grpc_completion_queue *cq;
	bool shutting_down;
};

/* ---------------------------------------------------------------- switches.c */
/* Start one worker per configured switch and wait (bounded by switch_timeout_ms) for each
 * one's first poll, so that the journal is reconciled against a known fabric. */
int am_sw_start(struct am *am);
/* Stop the workers (queued deletes still run on connected switches; a worker stuck on a
 * hung switch is left behind after the timeout). */
void am_sw_stop(struct am *am);
/* Queue requests on switch sw's worker; they run in order, one at a time. gid/seq/k tag the
 * answer for groups.c (gid 0: nobody waits). A put owns a copy of the tree. A delete is
 * fire-and-forget: on a disconnected switch it waits for the next successful connect. */
void am_sw_poll(struct am *am, size_t sw, uint64_t gid, uint32_t seq);
void am_sw_put(struct am *am, size_t sw, const struct ctl_tree *t, uint64_t gid, uint32_t seq,
	       int k);
void am_sw_delete(struct am *am, size_t sw, uint16_t tree_id);
/* Apply the workers' answers: poll answers update the snapshots (caps, running trees,
 * up/down), tagged answers go to am_group_sw_done. Never blocks. */
void am_sw_drain(struct am *am);

enum am_swreq_kind { AM_SWREQ_POLL, AM_SWREQ_PUT, AM_SWREQ_DEL };
struct am_sw_answer {
	enum am_swreq_kind kind;
	size_t sw;
	uint64_t gid;
	uint32_t seq;
	int k;                   /* put: index in the plan */
	int rc;                  /* 0 or -errno */
	const char *err;         /* why, when rc < 0 */
};

int am_sw_index(const struct am *am, const char *name); /* -1 unknown */
const struct ctl_tree *am_running_find(const struct am_switch *s, uint16_t id);
enum am_role am_sw_role(const struct am_switch *s);
/* Recompute per-switch holdings (this AM's and foreign). */
void am_account(struct am *am);
/* The planner's view of every switch (am_account first). */
void am_build_views(struct am *am, struct am_sw_view *v);

/* ---------------------------------------------------------------- groups.c */
int am_init(struct am *am);        /* start the switch workers, replay the journal, reconcile */
void am_fini(struct am *am);
/* An answer to a request tagged with a group (see am_sw_poll). */
void am_group_sw_done(struct am *am, const struct am_sw_answer *a);

/* Shared by groups.c, join.c, checks.c, journal*.c and query.c. */
const char *am_state_name(enum am_gstate s);
void am_group_set_state(struct am_group *g, enum am_gstate s, const char *reason);
void am_group_free(struct am_group *g);

/* The lifecycle steps join.c and checks.c drive. */
uint64_t am_rnd64(void); /* getrandom: member tokens, tree keys */
/* Send the event `kind` (with the member's tree when there is one) to every member in. */
void am_notify_all(struct am *am, struct am_group *g, int kind);
/* Plan a tree for g and push it; READY or FALLBACK (notified) once the switches answered. */
void am_establish(struct am *am, struct am_group *g, bool rebuild);
/* Take g's tree down. terminal: the group is over; else rebuild when the fabric allows. */
void am_dismantle(struct am *am, struct am_group *g, const char *reason, bool terminal);
/* Delete g's tree from its switches; recheck: re-read them, then rebuild (true: g->op waits
 * for those polls, false: nothing to wait for). */
bool am_release_tree(struct am *am, struct am_group *g, bool recheck);
/* Unlink, journal and free g (its sessions are finished). g is gone on return. */
void am_group_remove(struct am *am, struct am_group *g);

/* ---------------------------------------------------------------- checks.c */
void am_tick(struct am *am);       /* switch answers, heartbeats, switch polling, rebuilds */
/* A group waits for its switches (a push or a re-check under way). */
bool am_switch_work_pending(const struct am *am);

/* ---------------------------------------------------------------- join.c */
/* Constant time in the length of a (the supplied secret). */
bool am_secret_eq(const char *a, const char *b);
/* Forget first joiners' credentials of jobs without a group for first_joiner_ttl_s. */
void am_learned_expire(struct am *am, uint64_t now);

/* ---------------------------------------------------------------- journal.c */
/* The journal format (docs/am.md "Restart and the journal"): a header line, then one record
 * a line, each ending with the CRC-32 of the record. */
#define JOURNAL_MAGIC "inca-am-journal"
#define JOURNAL_VERSION 2
/* A G record naming every switch and its parent, every name fully escaped, fits. */
#define JOURNAL_LINE_MAX (AM_MAX_SWITCHES * (6 * AM_STR + 2) + 1024)

/* Append a record and fsync (no-op while am->journal is not open). */
void am_journal_group(struct am *am, const struct am_group *g);
void am_journal_del(struct am *am, uint64_t id);
void am_journal_job(struct am *am, const char *job, const char *cred); /* first joiner's */
void am_journal_job_forget(struct am *am, const char *job);              /* ... expired */
/* Rewrite the journal with the live state only (temp file, fsync, rename) and open it for
 * appending (am->journal). 0 or -errno. */
int am_journal_compact(struct am *am);

/* ---------------------------------------------------------------- journal_replay.c */
/* Replay the journal into am->groups (reconciled with the switches' running trees), then
 * compact it and keep it open for appending. A damaged journal: -EBADMSG, logged with file,
 * line and record, the file untouched; with am->recover its valid records are kept, trees in
 * this AM's tree-id range that no recovered group owns are removed from the switches, and the
 * file is kept as JOURNAL.damaged-TIME. */
int am_journal_open(struct am *am);

/* ---------------------------------------------------------------- RPC handlers */
/* join.c: am_join, am_auth_check; groups.c: the others. */
/* RPC handlers: return a gRPC status; *msg gets a short explanation on failure. */
grpc_status_code am_join(struct am *am, const Inca__Am__V1__JoinRequest *rq,
			 Inca__Am__V1__JoinReply *rp, char *msg, size_t cap);
grpc_status_code am_leave(struct am *am, const Inca__Am__V1__LeaveRequest *rq, char *msg,
			  size_t cap);
/* Credentials of a call: admin token and/or job id + job credential (NULL or "" when not
 * sent). Any credential sent must be valid (else PERMISSION_DENIED, logged and counted);
 * none gives AM_CALLER_ANON. Never learns a job (that is Join's first joiner). */
grpc_status_code am_auth_check(struct am *am, const char *admin_token, const char *job,
			       const char *cred, const char *method, struct am_auth *out,
			       char *msg, size_t cap);
/* Dismantle is an admin operation: refused unless admin_token is configured and given (in
 * the request or as the caller's admin credential). */
grpc_status_code am_dismantle_rpc(struct am *am, const Inca__Am__V1__DismantleRequest *rq,
				  const struct am_auth *who, char *msg, size_t cap);
/* A member's INC path failed: dismantle, re-check the tree's switches, rebuild. Returns
 * AM_DEFERRED when it keeps `call` and answers it (am_pending_answer) once the rebuild is
 * done; otherwise the status, with rp filled (rp->state points to a static string). */
#define AM_DEFERRED ((grpc_status_code)-1)
grpc_status_code am_report_failure(struct am *am, const Inca__Am__V1__FailureReport *rq,
				   Inca__Am__V1__FailureReply *rp, struct am_pending *call,
				   char *msg, size_t cap);
/* A session's first message; on success the session is bound to the member and gets the
 * group's current state at once. */
grpc_status_code am_session_open(struct am *am, struct am_session *s,
				 const Inca__Am__V1__SessionMsg *msg, char *err, size_t cap);
void am_session_ping(struct am *am, struct am_session *s, const Inca__Am__V1__SessionMsg *msg);
void am_session_gone(struct am *am, struct am_session *s);

/* ---------------------------------------------------------------- query.c */
/* Query replies (ListGroups, ListTrees, ListSwitches, ListLinks, GetStats): an owned reply
 * whose message and every part live in one arena; NULL for an unknown method. */
struct am_qreply;
/* who: AM_CALLER_ADMIN sees every group; AM_CALLER_JOB the groups of its job; callers are
 * authenticated (server.c refuses anonymous queries). */
struct am_qreply *am_query(struct am *am, const char *method, const struct am_auth *who);
const ProtobufCMessage *am_qreply_msg(const struct am_qreply *r);
void am_qreply_free(struct am_qreply *r);

/* ---------------------------------------------------------------- introspect.c */
/* grpc.reflection (v1alpha / v1) ServerReflectionInfo: one response (owned) per request
 * (borrowed); NULL if the request does not parse. */
grpc_byte_buffer *am_reflect(grpc_byte_buffer *req);
/* grpc.health.v1 Check (watch false) and Watch: an owned response, or NULL with *st and msg. */
grpc_byte_buffer *am_health(struct am *am, grpc_byte_buffer *req, bool watch,
			    grpc_status_code *st, char *msg, size_t cap);

/* ---------------------------------------------------------------- server.c */
int am_server_start(struct am *am, char *err, size_t cap);
/* Wait up to timeout_ms for gRPC events or a wakeup on am->wake_fd, serve the gRPC events. */
void am_server_run_once(struct am *am, unsigned timeout_ms);
/* Answer a unary call a handler kept (AM_DEFERRED). Once per call; reply borrowed. */
void am_pending_answer(struct am_pending *p, grpc_status_code st, const char *msg,
		       const ProtobufCMessage *reply);
void am_server_stop(struct am *am);
/* Queue an event on a session (copied/packed now). */
void am_session_send(struct am_session *s, const Inca__Am__V1__GroupEvent *ev);
/* Session binding, owned by groups.c: (group id, rank) or 0. */
void am_session_bind(struct am_session *s, uint64_t gid, uint32_t rank);
uint64_t am_session_gid(const struct am_session *s);
uint32_t am_session_rank(const struct am_session *s);
/* End the stream with status OK (group finished) */
void am_session_finish(struct am_session *s);

#endif
