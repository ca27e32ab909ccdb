/* inca-switch NETCONF server internals shared by its files: netconf.c (start / stop, the
 * server object), netconf_ssh.c (listeners, SSH and UNIX transports, handshakes, the session
 * poll thread), netconf_ops.c (rpc-errors and the RPC handlers: edit-config, validate, lock,
 * get-schema) and netconf_state.c (the data trees of get / get-config, filters, monitoring).
 * Daemon-private. */
#ifndef INCA_SW_NETCONF_INT_H
#define INCA_SW_NETCONF_INT_H

#include "netconf.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <libyang/libyang.h>
#include <libssh/libssh.h>
#include <libssh/server.h>
#include <nc_server.h>

#include "ctl_yang.h"

#define NC_POLL_MS 50
#define EDIT_TEXT_MAX (4u << 20)
/* Connections that have not completed their handshake (SSH key exchange, authentication,
 * channel, <hello>) each have a thread of their own, so a stalled one delays nobody; these
 * bound the threads and descriptors a third party can tie up, and how long. */
#define NC_PENDING_MAX 32
#define NC_PENDING_PER_SOURCE 4
#define NC_HANDSHAKE_TIMEOUT_MS 10000
#define NC_HELLO_TIMEOUT_S 5
#define NC_AUTH_ATTEMPTS 6
/* Sessions whose <hello> completed, waiting for the poll thread to take them. */
#define NC_NEWQ_MAX 64
/* The head of a session's next message the poll thread looks at (netconf_screen.c). */
#define NC_SCREEN_CAP (64u * 1024)

/* One accepted connection, from accept() until it closes (SSH) or its <hello> is done (UNIX:
 * the socket then belongs to the session). Owned by its thread; listed in sw_netconf.conns
 * (under conn_mu) so the listener can enforce the deadline and the limits. */
struct nc_conn {
	struct nc_conn *next;
	struct sw_netconf *nc;
	uint64_t id;
	int fd;
	bool ssh;
	bool killed;          /* socket shut down */
	char host[INET_ADDRSTRLEN]; /* SSH peer address; "" for UNIX */
	uint64_t start_ns;
	uint64_t deadline_ns; /* handshake deadline; 0 once the session is established */
	char user[64];
	ssh_session ss;
	ssh_channel ch;
};

/* Per established session (nc_session_set_data): what ietf-netconf-monitoring reports, and
 * the descriptor libnetconf2 does not close for a session made by nc_accept_inout(). */
struct nc_sess {
	struct nc_sess *next; /* sw_netconf.sessions: touched only by the poll thread */
	struct sw_netconf *nc;
	bool listed;
	int fd;
	bool ssh;
	uint32_t id;
	uint64_t conn_id;
	char user[64];
	char host[INET_ADDRSTRLEN];
	time_t login;
	uint64_t in_rpcs, in_bad_rpcs, out_rpc_errors;
	struct nc_session *session;
	/* netconf_screen.c: out of libnetconf2's poll set while nothing screened waits to be
	 * read, and held (not polled, peeked again every SCREEN_RECHECK_MS) while the next
	 * message is incomplete. */
	bool out, held;
	uint64_t held_since_ns;
};

struct sw_netconf {
	struct sw_switch *sw;
	const struct sw_config *cfg;
	struct ly_ctx *ly;
	struct nc_pollsession *ps;
	pthread_t thread; /* polls the established sessions; runs every RPC callback */
	bool started;
	pthread_t listener; /* accepts, enforces handshake deadlines and limits */
	bool listening;
	_Atomic bool stop;
	int stop_fd[2]; /* wakes the listener */
	int ssh_lfd, unix_lfd;
	/* wake_mu: the queue of new sessions; the poll thread sleeps on wake_cv without any. */
	pthread_mutex_t wake_mu;
	pthread_cond_t wake_cv;
	struct nc_session *newq[NC_NEWQ_MAX];
	size_t nnewq;
	/* conn_mu: the connection list and the count of connection threads (conn_cv). */
	pthread_mutex_t conn_mu;
	pthread_cond_t conn_cv;
	struct nc_conn *conns;
	uint64_t conn_serial;
	unsigned nthreads;
	bool sync_init;
	bool server_init;
	char mgmt[SW_MGMT_MAX][128]; /* running management addresses */
	size_t nmgmt;
	uint32_t lock_sid; /* session holding the running lock, 0 = none */
	time_t lock_time;
	ssh_key *authkeys;
	size_t nauthkeys;
	char *hostkey_path;
	char unix_path[256];
	uint64_t edits_applied, edits_refused;
	/* ietf-netconf-monitoring statistics; the plain ones are written by the poll thread */
	time_t start_time;
	struct nc_sess *sessions;
	_Atomic uint64_t in_bad_hellos, in_sessions;
	uint64_t dropped_sessions, in_rpcs, in_bad_rpcs, out_rpc_errors;
	/* The poll thread's view of the sessions' next messages (netconf_screen.c). */
	char screen_buf[NC_SCREEN_CAP], screen_xml[NC_SCREEN_CAP];
	struct pollfd *screen_pfd;
	struct nc_sess **screen_who;
	size_t screen_cap;
};

/* libnetconf2's RPC callbacks carry no user pointer: one server per process. */
extern struct sw_netconf *g_nc;

/* netconf.c */
void sess_free(void *data);

/* netconf_ops.c: rpc-errors (NULL on allocation failure) and the RPC entry point. */
struct nc_server_reply *reply_err(NC_ERR tag, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
struct nc_server_reply *reply_ly_err(const char *what);
struct nc_server_reply *rpc_dispatch(struct lyd_node *rpc, struct nc_session *s);
/* Installed as the get-schema callback before nc_server_init (no built-in one). */
struct nc_server_reply *rpc_get_schema(struct lyd_node *rpc, struct nc_session *s);

/* netconf_state.c */
int build_data(struct sw_netconf *nc, bool with_state, bool secrets, struct lyd_node **out);
struct nc_server_reply *rpc_get(struct sw_netconf *nc, struct lyd_node *rpc, bool state);
bool target_is_running(struct lyd_node *rpc, const char *container);

/* netconf_ssh.c */
int load_authorized_keys(struct sw_netconf *nc, const char *path, char *err, size_t cap);
struct timespec realtime_in_ms(long ms);
void conn_kill_locked(struct nc_conn *c, const char *why);
void *listen_main(void *arg);
void *server_main(void *arg);

/* netconf_screen.c (poll thread): wait up to timeout_ms for input on the listed sessions and
 * look at each one's next message before libnetconf2 reads it: an <rpc> of an operation the
 * schema lacks is answered operation-not-supported here (libnetconf2 2.0.24 would answer
 * operation-failed); a session whose next message is still incomplete is held until it is
 * whole. Only sessions whose next message passed stay in libnetconf2's poll set. */
void nc_screen_poll(struct sw_netconf *nc, int timeout_ms);
/* Every session back into libnetconf2's poll set (before the set is cleared). */
void nc_screen_release_all(struct sw_netconf *nc);

#endif
