/* inca-am internals shared by main.c (config, main loop), server.c (gRPC core API: calls,
 * sessions), groups.c (switches, groups, lifecycle), journal.c and query.c.
 * Single-threaded: every function here runs on the main loop thread. Daemon-private. */
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


struct am_switch {
	const struct am_cfg_switch *cfg;
	struct ctl_conn *conn;
	bool up;                 /* last poll succeeded */
	bool polled;             /* at least one poll was attempted */
	struct ctl_caps caps;
	struct ctl_tree *running; /* last ctl_get_trees */
	size_t nrunning;
	uint32_t foreign_slots, foreign_trees; /* used by trees this AM does not own */
	uint32_t am_slots, am_trees;           /* held by this AM's groups */
	char err[256];
};

enum am_gstate { AM_G_FORMING, AM_G_READY, AM_G_FALLBACK, AM_G_DISMANTLED };

struct am_session;

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
	char (*plan_sw_names)[AM_STR]; /* per plan.sws entry: switch name (for the journal) */
	uint64_t created_ns, state_ns;
	struct am_member *m;     /* size entries, index = rank */
};

struct am_stats {
	uint64_t joins, joins_denied, sessions_denied, groups_created, groups_ready,
		groups_fallback, dismantles, rebuilds, heartbeat_timeouts, switch_failures,
		push_failures, journal_records, recovered_groups, rpc_unimplemented,
		operator_denied, failure_reports, failure_reports_denied, failure_reports_stale,
		journal_damaged_records, orphan_trees_removed;
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
	uint64_t start_ns, last_poll_ns;
	/* jobs whose secret was set by a first joiner (allow_first_joiner) */
	size_t nlearned;
	struct {
		char id[AM_STR], cred[AM_STR * 2];
	} learned[AM_MAX_JOBS];
	/* gRPC */
	grpc_server *server;
	grpc_completion_queue *cq;
	bool shutting_down;
};

/* ---------------------------------------------------------------- groups.c */
int am_init(struct am *am);        /* connect switches, replay the journal, reconcile */
void am_fini(struct am *am);
void am_tick(struct am *am);       /* heartbeats, switch polling, pending builds */

/* Shared by groups.c, journal.c and query.c. */
const char *am_state_name(enum am_gstate s);
int am_sw_index(const struct am *am, const char *name); /* -1 unknown */
const struct ctl_tree *am_running_find(const struct am_switch *s, uint16_t id);
enum am_role am_sw_role(const struct am_switch *s);
/* Recompute per-switch holdings (this AM's and foreign). */
void am_account(struct am *am);
void am_group_set_state(struct am_group *g, enum am_gstate s, const char *reason);
void am_group_free(struct am_group *g);

/* ---------------------------------------------------------------- journal.c */
/* Replay the journal into am->groups (reconciled with the switches' running trees), then
 * compact it and keep it open for appending. A damaged journal: -EBADMSG, logged with file,
 * line and record, the file untouched; with am->recover its valid records are kept, trees in
 * this AM's tree-id range that no recovered group owns are removed from the switches, and the
 * file is kept as JOURNAL.damaged-TIME. */
int am_journal_open(struct am *am);
void am_journal_group(struct am *am, const struct am_group *g);
void am_journal_del(struct am *am, uint64_t id);
void am_journal_job(struct am *am, const char *job, const char *cred); /* first joiner's */

/* RPC handlers: return a gRPC status; *msg gets a short explanation on failure. */
grpc_status_code am_join(struct am *am, const Inca__Am__V1__JoinRequest *rq,
			 Inca__Am__V1__JoinReply *rp, char *msg, size_t cap);
grpc_status_code am_leave(struct am *am, const Inca__Am__V1__LeaveRequest *rq, char *msg,
			  size_t cap);
grpc_status_code am_dismantle_rpc(struct am *am, const Inca__Am__V1__DismantleRequest *rq,
				  char *msg, size_t cap);
/* A member's INC path failed (issue 4): dismantle, re-check the tree's switches, rebuild.
 * rp->state points to a static string. */
grpc_status_code am_report_failure(struct am *am, const Inca__Am__V1__FailureReport *rq,
				   Inca__Am__V1__FailureReply *rp, char *msg, size_t cap);
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
struct am_qreply *am_query(struct am *am, const char *method);
const ProtobufCMessage *am_qreply_msg(const struct am_qreply *r);
void am_qreply_free(struct am_qreply *r);

/* ---------------------------------------------------------------- server.c */
int am_server_start(struct am *am, char *err, size_t cap);
/* Serve gRPC events for up to timeout_ms. */
void am_server_run_once(struct am *am, unsigned timeout_ms);
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
