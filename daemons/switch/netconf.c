/* inca-switch NETCONF server: its own listeners (UNIX socket; TCP with SSH done here with
 * libssh, public-key authentication only), one thread per connection handshake with limits and
 * a deadline for unauthenticated connections, libnetconf2 2.0.x sessions on the accepted
 * transports (SSH channels relayed through a socketpair) polled by one thread, and the
 * datastore behind them: the running config is the data plane's current tree set plus the
 * management addresses; state is built on demand from the capabilities, links, statistics and
 * ietf-netconf-monitoring. edit-config is applied to a copy, validated with libyang, decoded
 * into the tree model and checked by its rules (the same as a config file's), checked against
 * max_trees / max_slots, and only then published; <validate> runs the same checks. */
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
};

/* libnetconf2's RPC callbacks carry no user pointer: one server per process. */
static struct sw_netconf *g_nc;

/* Session data destructor (nc_session_free, nc_ps_clear): closes the session's descriptor. */
static void sess_free(void *data)
{
	struct nc_sess *sd = data;

	if (!sd)
		return;
	if (sd->listed)
		for (struct nc_sess **p = &sd->nc->sessions; *p; p = &(*p)->next)
			if (*p == sd) {
				*p = sd->next;
				break;
			}
	if (sd->fd >= 0)
		close(sd->fd);
	free(sd);
}

/* ---------------------------------------------------------------- logging glue */

static void nc_print(const struct nc_session *s, NC_VERB_LEVEL level, const char *msg)
{
	bool stopping = g_nc && atomic_load(&g_nc->stop); /* handshakes aborted on purpose */

	(void)s;
	sw_log(level == NC_VERB_ERROR && !stopping ? 0 : 2, "netconf: %s", msg);
}

/* ---------------------------------------------------------------- errors */

/* An rpc-error reply: tag, message and optional path / app-tag. */
static struct nc_server_reply *reply_err(NC_ERR tag, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static struct nc_server_reply *reply_err(NC_ERR tag, const char *path, const char *fmt, ...)
{
	char msg[1024];
	struct lyd_node *e;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	switch (tag) {
	case NC_ERR_LOCK_DENIED:
		e = nc_err(g_nc->ly, tag, g_nc->lock_sid);
		break;
	case NC_ERR_DATA_EXISTS:
	case NC_ERR_DATA_MISSING:
	case NC_ERR_MALFORMED_MSG:
		e = nc_err(g_nc->ly, tag);
		break;
	default:
		e = nc_err(g_nc->ly, tag, NC_ERR_TYPE_APP);
		break;
	}
	if (!e)
		return NULL;
	nc_err_set_msg(e, msg, "en");
	if (path && path[0])
		nc_err_set_path(e, path);
	sw_log(1, "netconf: refused: %s%s%s", msg, path ? " at " : "", path ? path : "");
	return nc_server_reply_err(e);
}

/* The data XPath in a libyang error location ('Data location "/m:a/b[k='1']", line number 3.',
 * 'Schema location "/m:a/b/c", data location "/m:a/b[k='1']".'); NULL without one. */
static const char *ly_err_xpath(const struct ly_err_item *ei, char *buf, size_t cap)
{
	const char *p, *q;

	if (!ei || !ei->path)
		return NULL;
	if (ei->path[0] == '/')
		return ei->path;
	p = strstr(ei->path, "ata location \""); /* "Data" or ", data" */
	if (!p)
		return NULL;
	p += strlen("ata location \"");
	q = strchr(p, '"');
	if (!q || q == p || (size_t)(q - p) >= cap)
		return NULL;
	memcpy(buf, p, (size_t)(q - p));
	buf[q - p] = 0;
	return buf;
}

/* A missing node has only a schema location ('Schema location "/m:a/b/c".'): the path of the
 * first instance of its parent in tree that lacks it. */
static char *missing_node_xpath(const struct ly_err_item *ei, const struct lyd_node *tree)
{
	const char *p, *q, *leaf;
	char xp[600];
	struct ly_set *set = NULL;
	char *out = NULL;

	if (!tree || !ei || !ei->path || !(p = strstr(ei->path, "Schema location \"")) ||
	    strstr(ei->path, "ata location"))
		return NULL;
	p += strlen("Schema location \"");
	q = strchr(p, '"');
	leaf = q ? memrchr(p, '/', (size_t)(q - p)) : NULL;
	if (!leaf || leaf == p || (size_t)(q - p) + 16 >= sizeof xp)
		return NULL;
	snprintf(xp, sizeof xp, "%.*s[not(%.*s)]", (int)(leaf - p), p, (int)(q - leaf - 1),
		 leaf + 1);
	if (!lyd_find_xpath(tree, xp, &set) && set->count)
		out = lyd_path(set->dnodes[0], LYD_PATH_STD, NULL, 0);
	ly_set_free(set, NULL);
	return out;
}

/* The last libyang error of our context as an rpc-error; tree (may be NULL) is the data it is
 * about. */
static struct nc_server_reply *reply_ly_err_in(const char *what, const struct lyd_node *tree)
{
	const struct ly_err_item *ei = ly_err_last(g_nc->ly);
	struct nc_server_reply *r;
	char pbuf[512];
	char *missing = missing_node_xpath(ei, tree);
	const char *path = missing ? missing : ly_err_xpath(ei, pbuf, sizeof pbuf);

	/* libyang quotes the refused value: never echo (a mistyped) group key */
	if (ei && ((ei->path && strstr(ei->path, "auth-key") && !strstr(ei->path, "auth-key-id")) ||
		   (ei->msg && strstr(ei->msg, "[0-9a-fA-F]{64}"))))
		r = reply_err(NC_ERR_INVALID_VALUE, path, "%s: auth-key: expected %d hex digits",
			      what, 2 * WIRE_AUTH_KEY_LEN);
	else
		r = reply_err(NC_ERR_INVALID_VALUE, path, "%s: %s", what,
			      ei && ei->msg ? ei->msg : "invalid data");
	free(missing);
	ly_err_clean(g_nc->ly, NULL);
	return r;
}

static struct nc_server_reply *reply_ly_err(const char *what)
{
	return reply_ly_err_in(what, NULL);
}

/* ---------------------------------------------------------------- data tree building */

static int term(struct lyd_node *parent, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int term(struct lyd_node *parent, const char *name, const char *fmt, ...)
{
	char v[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v, sizeof v, fmt, ap);
	va_end(ap);
	return lyd_new_term(parent, NULL, name, v, 0, NULL) ? -1 : 0;
}

static const char *fmt_addr(const struct sockaddr_in *a, char *buf, size_t cap)
{
	return util_format_addr(a, buf, cap);
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = 0;
}

static int add_mask(struct lyd_node *p, const char *name, uint32_t m, const char *(*nm)(unsigned),
		    unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if ((m & (1u << i)) && term(p, name, "%s", nm(i)) < 0)
			return -1;
	return 0;
}

/* One configured tree (the model's YANG codec); with state, also its forwarding state (A-BM,
 * BIFT). The group key (auth-key) only with secrets: the edit-config candidate needs it,
 * replies never carry it. An unauthenticated tree reads as auth disabled; in the candidate it
 * keeps "disabled" only when the switch requires keys (then it was an explicit opt-out),
 * otherwise an edit may merge a key into it. */
static int build_tree(struct lyd_node *trees, const struct sw_tree *rt, bool state, bool secrets)
{
	const struct ctl_tree *t = &rt->conf;
	unsigned flags = secrets ? CTL_YANG_SECRETS : CTL_YANG_AUTH_OFF;
	struct lyd_node *tn;
	char a[32];
	int rc = 0;

	if (secrets && sw_config_auth_required())
		flags |= CTL_YANG_AUTH_OFF;
	if (ctl_tree_to_lyd(t, trees, flags, &tn) < 0)
		return -1;
	if (state && !rc) {
		size_t bytes = t->bsl_bits / 8;
		char *h = malloc(2 * bytes + 1);
		struct lyd_node *fw;

		if (!h || lyd_new_inner(tn, NULL, "forwarding", 0, &fw)) {
			free(h);
			return -1;
		}
		hex(rt->abm, bytes, h);
		rc |= term(fw, "a-bm", "%s", h);
		for (size_t i = 0; i < rt->nbift && !rc; i++) {
			const struct agg_bift_entry *b = &rt->bift[i];
			unsigned k = (unsigned)t->si * t->bsl_bits + b->bp;
			char ks[8];
			struct lyd_node *be;

			snprintf(ks, sizeof ks, "%u", k);
			if (lyd_new_list(fw, NULL, "bift-entry", 0, &be, ks)) {
				rc = -1;
				break;
			}
			rc |= term(be, "bit-position", "%u", b->bp);
			rc |= term(be, "neighbour", "%s",
				   fmt_addr(&rt->nbr[b->nbr].addr, a, sizeof a));
			hex(b->fbm, bytes, h);
			rc |= term(be, "f-bm", "%s", h);
		}
		free(h);
	}
	return rc ? -1 : 0;
}

static int build_drops(struct lyd_node *p, const char *reason, uint64_t count)
{
	struct lyd_node *d;

	if (lyd_new_list(p, NULL, "drop", 0, &d, reason))
		return -1;
	return term(d, "count", "%llu", (unsigned long long)count);
}

static int build_state(struct sw_netconf *nc, struct lyd_node *top, const struct sw_treeset *set)
{
	static const char *const offloaded[] = { "allreduce", "reduce", "bcast", "barrier",
						 "allgather", "reduce-scatter" };
	const struct sw_config *cfg = nc->cfg;
	struct lyd_node *caps, *links, *st;
	uint64_t used_slots = 0, total = 0;
	struct sw_counters c;
	char a[32], kb[64];
	int rc = 0;

	if (lyd_new_inner(top, NULL, "capabilities", 0, &caps))
		return -1;
	for (size_t i = 0; i < set->ntrees; i++)
		used_slots += set->trees[i]->conf.slots;
	if (cfg->name[0])
		rc |= term(caps, "name", "%s", cfg->name);
	rc |= term(caps, "data-address", "%s", fmt_addr(&cfg->listen, a, sizeof a));
	if (cfg->role_hint[0])
		rc |= term(caps, "role-hint", "%s", cfg->role_hint);
	rc |= term(caps, "threads", "%u", cfg->threads);
	rc |= term(caps, "max-trees", "%u", cfg->max_trees);
	rc |= term(caps, "used-trees", "%zu", set->ntrees);
	rc |= term(caps, "max-slots", "%u", cfg->max_slots);
	rc |= term(caps, "used-slots", "%llu", (unsigned long long)used_slots);
	rc |= term(caps, "max-slot-bytes", "%u", 4096u);
	rc |= term(caps, "max-bsl", "%u", 4096u);
	rc |= add_mask(caps, "data-type", (1u << SW_DTYPE_COUNT) - 1, sw_dtype_name, SW_DTYPE_COUNT);
	rc |= add_mask(caps, "operation", (1u << SW_OP_COUNT) - 1, sw_op_name, SW_OP_COUNT);
	/* The collectives libinca offloads (docs/protocol.md, the INCA header's Collective
	 * field); the engine serves them all with every tree. */
	for (size_t i = 0; i < sizeof offloaded / sizeof offloaded[0]; i++)
		rc |= term(caps, "collective", "%s", offloaded[i]);

	if (lyd_new_inner(top, NULL, "links", 0, &links))
		return -1;
	for (size_t i = 0; i < cfg->nlinks && !rc; i++) {
		const struct sw_conf_link *l = &cfg->links[i];
		struct lyd_node *ln;

		if (lyd_new_list(links, NULL, "link", 0, &ln, l->port))
			return -1;
		if (l->peer[0])
			rc |= term(ln, "peer", "%s", l->peer);
		if (l->has_peer_addr)
			rc |= term(ln, "peer-address", "%s", fmt_addr(&l->peer_addr, a, sizeof a));
		if (l->speed_bps)
			rc |= term(ln, "speed", "%llu", (unsigned long long)l->speed_bps);
		rc |= term(ln, "oper-status", "%s", l->up ? "up" : "down");
	}

	if (lyd_new_inner(top, NULL, "statistics", 0, &st))
		return -1;
	sw_stats_sum_counters(nc->sw, &c);
	rc |= term(st, "uptime-ms", "%llu",
		   (unsigned long long)((util_now_ns() - nc->sw->start_ns) / 1000000ull));
	rc |= term(st, "rx-pkts", "%llu", (unsigned long long)c.rx_pkts);
	rc |= term(st, "rx-bytes", "%llu", (unsigned long long)c.rx_bytes);
	rc |= term(st, "tx-pkts", "%llu", (unsigned long long)c.tx_pkts);
	rc |= term(st, "tx-bytes", "%llu", (unsigned long long)c.tx_bytes);
	for (int e = 1; e < WIRE_E_COUNT_MAX_; e++)
		total += c.wire_drops[e];
	for (int d = 0; d < SW_DROP_COUNT; d++)
		total += c.sw_drops[d];
	for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT; v++)
		total += c.verdicts[v];
	rc |= term(st, "drops-total", "%llu", (unsigned long long)total);
	for (int e = 1; e < WIRE_E_COUNT_MAX_ && !rc; e++)
		rc |= build_drops(st, wire_err_name((enum wire_err)e), c.wire_drops[e]);
	for (int d = 0; d < SW_DROP_COUNT && !rc; d++)
		rc |= build_drops(st, sw_drop_name((enum sw_drop)d), c.sw_drops[d]);
	for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT && !rc; v++)
		rc |= build_drops(st, sw_stats_engine_drop_key((enum agg_verdict)v, kb, sizeof kb),
				  c.verdicts[v]);

	for (size_t ti = 0; ti < set->ntrees && !rc; ti++) {
		const struct sw_tree *t = set->trees[ti];
		struct agg_tree_stats s;
		struct lyd_node *tn;
		uint64_t drops = 0;
		char id[8];

		sw_stats_sum_tree(t, &s);
		snprintf(id, sizeof id, "%u", t->conf.id);
		if (lyd_new_list(st, NULL, "tree", 0, &tn, id))
			return -1;
		rc |= term(tn, "rx-pkts", "%llu", (unsigned long long)s.rx_pkts);
		rc |= term(tn, "rx-bytes", "%llu", (unsigned long long)s.rx_bytes);
		rc |= term(tn, "tx-pkts", "%llu", (unsigned long long)s.tx_pkts);
		rc |= term(tn, "tx-bytes", "%llu", (unsigned long long)s.tx_bytes);
		rc |= term(tn, "contributions", "%llu", (unsigned long long)s.contributions);
		rc |= term(tn, "aggregations", "%llu", (unsigned long long)s.aggregations);
		rc |= term(tn, "duplicates", "%llu", (unsigned long long)s.duplicates);
		rc |= term(tn, "results-resent", "%llu", (unsigned long long)s.results_resent);
		rc |= term(tn, "forwarded", "%llu", (unsigned long long)s.forwarded);
		rc |= term(tn, "results-down", "%llu", (unsigned long long)s.results_down);
		for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT; v++)
			drops += s.drops[v];
		rc |= term(tn, "drops", "%llu", (unsigned long long)drops);
		for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT && !rc; v++)
			rc |= build_drops(tn, agg_verdict_name((enum agg_verdict)v), s.drops[v]);
		for (uint32_t n = 0; n < t->nnbr && !rc; n++) {
			const struct sw_nbr *nb = &t->nbr[n];
			struct sw_qp_stats q;
			struct lyd_node *qn;

			sw_stats_sum_qp(t, n, &q);
			if (lyd_new_list(tn, NULL, "qp", 0, &qn, fmt_addr(&nb->addr, a, sizeof a)))
				return -1;
			rc |= term(qn, "kind", "%s", sw_nbr_kind_name(nb->kind));
			rc |= term(qn, "bfr-id", "%u", nb->bfr_id);
			rc |= term(qn, "qpn", "%u", nb->qpn);
			rc |= term(qn, "rx-pkts", "%llu", (unsigned long long)q.rx_pkts);
			rc |= term(qn, "rx-bytes", "%llu", (unsigned long long)q.rx_bytes);
			rc |= term(qn, "tx-pkts", "%llu", (unsigned long long)q.tx_pkts);
			rc |= term(qn, "tx-bytes", "%llu", (unsigned long long)q.tx_bytes);
			rc |= term(qn, "psn-gaps", "%llu", (unsigned long long)q.psn_gaps);
			rc |= term(qn, "psn-lost", "%llu", (unsigned long long)q.psn_lost);
			rc |= term(qn, "psn-reorder", "%llu", (unsigned long long)q.psn_reorder);
		}
	}
	return rc ? -1 : 0;
}

static void fmt_time(time_t t, char *buf, size_t cap)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ietf-netconf-monitoring's netconf-state (RFC 6022), state only: the capabilities of the
 * <hello>, the running datastore and its lock, every schema get-schema serves, the sessions
 * and the server's counters. Runs in the poll thread (the writer of what it reads). */
static int build_monitoring(struct sw_netconf *nc, struct lyd_node **out)
{
	const struct lys_module *mod = ly_ctx_get_module_implemented(nc->ly,
								     "ietf-netconf-monitoring");
	struct lyd_node *top = NULL, *n, *ds, *e;
	const struct lys_module *m;
	const char **cp;
	char tb[32];
	uint32_t it = 0;
	int rc = 0;

	if (!mod || lyd_new_inner(NULL, mod, "netconf-state", 0, &top))
		return -1;
	if (lyd_new_inner(top, NULL, "capabilities", 0, &n))
		goto fail;
	cp = nc_server_get_cpblts_version(nc->ly, LYS_VERSION_1_0); /* as in the <hello> */
	for (size_t i = 0; cp && cp[i]; i++) {
		rc |= term(n, "capability", "%s", cp[i]);
		lydict_remove(nc->ly, cp[i]);
	}
	free(cp);

	if (lyd_new_inner(top, NULL, "datastores", 0, &n) ||
	    lyd_new_list(n, NULL, "datastore", 0, &ds, "running"))
		goto fail;
	if (nc->lock_sid) {
		if (lyd_new_inner(ds, NULL, "locks", 0, &e) ||
		    lyd_new_inner(e, NULL, "global-lock", 0, &e))
			goto fail;
		rc |= term(e, "locked-by-session", "%u", nc->lock_sid);
		fmt_time(nc->lock_time, tb, sizeof tb);
		rc |= term(e, "locked-time", "%s", tb);
	}

	if (lyd_new_inner(top, NULL, "schemas", 0, &n))
		goto fail;
	while ((m = ly_ctx_get_module_iter(nc->ly, &it)) && !rc) {
		if (!strcmp(m->name, "yang") || !strcmp(m->name, "ietf-yang-metadata"))
			continue; /* libyang's internal modules: no text to serve */
		if (lyd_new_list(n, NULL, "schema", 0, &e, m->name, m->revision ? m->revision : "",
				 "ietf-netconf-monitoring:yang"))
			goto fail;
		rc |= term(e, "namespace", "%s", m->ns);
		rc |= term(e, "location", "NETCONF");
	}

	if (lyd_new_inner(top, NULL, "sessions", 0, &n))
		goto fail;
	for (const struct nc_sess *sd = nc->sessions; sd && !rc; sd = sd->next) {
		char id[16];

		snprintf(id, sizeof id, "%u", sd->id);
		if (lyd_new_list(n, NULL, "session", 0, &e, id))
			goto fail;
		rc |= term(e, "transport", "%s",
			   sd->ssh ? "ietf-netconf-monitoring:netconf-ssh" : CTL_YANG_MODULE
			   ":netconf-unix");
		rc |= term(e, "username", "%s", sd->user);
		if (sd->host[0])
			rc |= term(e, "source-host", "%s", sd->host);
		fmt_time(sd->login, tb, sizeof tb);
		rc |= term(e, "login-time", "%s", tb);
		rc |= term(e, "in-rpcs", "%llu", (unsigned long long)sd->in_rpcs);
		rc |= term(e, "in-bad-rpcs", "%llu", (unsigned long long)sd->in_bad_rpcs);
		rc |= term(e, "out-rpc-errors", "%llu", (unsigned long long)sd->out_rpc_errors);
		rc |= term(e, "out-notifications", "0");
	}

	if (lyd_new_inner(top, NULL, "statistics", 0, &n))
		goto fail;
	fmt_time(nc->start_time, tb, sizeof tb);
	rc |= term(n, "netconf-start-time", "%s", tb);
	rc |= term(n, "in-bad-hellos", "%llu", (unsigned long long)atomic_load(&nc->in_bad_hellos));
	rc |= term(n, "in-sessions", "%llu", (unsigned long long)atomic_load(&nc->in_sessions));
	rc |= term(n, "dropped-sessions", "%llu", (unsigned long long)nc->dropped_sessions);
	rc |= term(n, "in-rpcs", "%llu", (unsigned long long)nc->in_rpcs);
	rc |= term(n, "in-bad-rpcs", "%llu", (unsigned long long)nc->in_bad_rpcs);
	rc |= term(n, "out-rpc-errors", "%llu", (unsigned long long)nc->out_rpc_errors);
	rc |= term(n, "out-notifications", "0");
	if (rc)
		goto fail;
	*out = top;
	return 0;
fail:
	lyd_free_all(top);
	return -1;
}

/* The whole inca-switch tree: running config, plus state when with_state; group keys only
 * with secrets (the edit-config candidate, never a reply). */
static int build_data(struct sw_netconf *nc, bool with_state, bool secrets, struct lyd_node **out)
{
	const struct lys_module *mod = ly_ctx_get_module_implemented(nc->ly, CTL_YANG_MODULE);
	struct lyd_node *top = NULL, *mg, *trees;
	const struct sw_treeset *set;
	int rc = 0;

	if (!mod || lyd_new_inner(NULL, mod, "inca-switch", 0, &top))
		return -1;
	if (lyd_new_inner(top, NULL, "management", 0, &mg) ||
	    lyd_new_inner(top, NULL, "trees", 0, &trees)) {
		lyd_free_all(top);
		return -1;
	}
	for (size_t i = 0; i < nc->nmgmt; i++)
		rc |= term(mg, "address", "%s", nc->mgmt[i]);
	sw_switch_lock(nc->sw);
	if (with_state)
		sw_switch_snapshot(nc->sw, 200);
	set = sw_switch_trees(nc->sw);
	for (size_t i = 0; i < set->ntrees && !rc; i++)
		rc |= build_tree(trees, set->trees[i], with_state, secrets);
	if (with_state && !rc)
		rc |= build_state(nc, top, set);
	sw_switch_unlock(nc->sw);
	if (rc) {
		lyd_free_all(top);
		return -1;
	}
	*out = top;
	return 0;
}

/* ---------------------------------------------------------------- filters */

/* Subtree filter (RFC 6241 section 6) -> XPath expressions, one per selected branch.
 * Content-match nodes become predicates of their parent's step. */
struct xp_list {
	char **v;
	size_t n;
	bool bad;
};

static void xp_add(struct xp_list *l, const char *s)
{
	char **nv = realloc(l->v, (l->n + 1) * sizeof *nv);

	if (!nv || !(nv[l->n] = strdup(s))) {
		l->bad = true;
		if (nv)
			l->v = nv;
		return;
	}
	l->v = nv;
	l->n++;
}

static bool only_space(const char *s)
{
	for (; s && *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
			return false;
	return true;
}

/* Filter nodes are schema nodes where libyang recognised them, opaque nodes otherwise. */
static const char *fnode_module(struct ly_ctx *ly, const struct lyd_node *n, const char *inherit)
{
	const struct lyd_node_opaq *o = (const struct lyd_node_opaq *)n;
	const struct lys_module *m;

	if (n->schema)
		return n->schema->module->name;
	if (o->format == LY_VALUE_XML && o->name.module_ns && o->name.module_ns[0]) {
		m = ly_ctx_get_module_implemented_ns(ly, o->name.module_ns);
		return m ? m->name : NULL;
	}
	return inherit;
}

static const char *fnode_name(const struct lyd_node *n)
{
	return n->schema ? n->schema->name : ((const struct lyd_node_opaq *)n)->name.name;
}

static const char *fnode_value(const struct lyd_node *n)
{
	if (n->schema)
		return (n->schema->nodetype & LYD_NODE_TERM) ? lyd_get_value(n) : NULL;
	return ((const struct lyd_node_opaq *)n)->value;
}

static bool is_content_match(const struct lyd_node *n)
{
	const char *v = fnode_value(n);

	return !lyd_child(n) && v && !only_space(v);
}

static void subtree_to_xpath(struct ly_ctx *ly, const struct lyd_node *n, const char *prefix,
			     const char *inherit, struct xp_list *out)
{
	const char *mod = fnode_module(ly, n, inherit);
	char step[2048], preds[2048] = "";
	const struct lyd_node *c;
	size_t others = 0;

	if (!mod)
		return; /* unknown namespace: selects nothing */
	for (c = lyd_child(n); c; c = c->next) {
		if (is_content_match(c)) {
			const char *cm = fnode_module(ly, c, mod), *v = fnode_value(c);
			size_t len = strlen(preds);

			if (!cm || strchr(v, '\''))
				continue;
			snprintf(preds + len, sizeof preds - len, "[%s:%s='%s']", cm, fnode_name(c), v);
		} else {
			others++;
		}
	}
	int sl = snprintf(step, sizeof step, "%s/%s:%s%s", prefix, mod, fnode_name(n), preds);
	if (sl < 0 || (size_t)sl >= sizeof step - 1) {
		out->bad = true;
		return;
	}
	if (!others) {
		xp_add(out, step); /* selection node, or only content matches: the whole node */
		return;
	}
	for (c = lyd_child(n); c; c = c->next) {
		if (is_content_match(c)) {
			const char *cm = fnode_module(ly, c, mod);
			char p[2100];
			if (!cm)
				continue;
			snprintf(p, sizeof p, "%s/%s:%s", step, cm, fnode_name(c));
			xp_add(out, p);
		} else {
			subtree_to_xpath(ly, c, step, mod, out);
		}
	}
}

static void xp_free(struct xp_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
}

/* Keep only what the xpaths select (with ancestors and list keys). *data is replaced. */
static int apply_xpaths(struct lyd_node **data, const struct xp_list *xp)
{
	struct lyd_node *result = NULL;

	for (size_t i = 0; i < xp->n; i++) {
		struct ly_set *set = NULL;

		if (!*data)
			break;
		if (lyd_find_xpath(*data, xp->v[i], &set)) {
			lyd_free_all(result);
			return -1;
		}
		for (uint32_t j = 0; j < set->count; j++) {
			struct lyd_node *dup, *top;
			if (lyd_dup_single(set->dnodes[j], NULL,
					   LYD_DUP_RECURSIVE | LYD_DUP_WITH_PARENTS, &dup))
				continue;
			for (top = dup; top->parent; top = lyd_parent(top))
				;
			lyd_merge_siblings(&result, top, LYD_MERGE_DESTRUCT);
		}
		ly_set_free(set, NULL);
	}
	lyd_free_all(*data);
	*data = result;
	return 0;
}

/* Apply the <filter> of a get / get-config (absent: everything). Returns NULL or an error. */
static struct nc_server_reply *apply_filter(struct sw_netconf *nc, struct lyd_node *rpc,
					    struct lyd_node **data)
{
	struct lyd_node *f = NULL;
	struct lyd_meta *type;
	struct xp_list xp = { 0 };

	if (lyd_find_path(rpc, "filter", 0, &f) || !f)
		return NULL;
	type = lyd_find_meta(f->meta, NULL, "ietf-netconf:type");
	if (type && !strcmp(lyd_get_meta_value(type), "xpath")) {
		struct lyd_meta *sel = lyd_find_meta(f->meta, NULL, "ietf-netconf:select");
		if (!sel)
			return reply_err(NC_ERR_MISSING_ATTR, NULL, "xpath filter without select");
		xp_add(&xp, lyd_get_meta_value(sel));
	} else {
		const struct lyd_node_any *any = (const struct lyd_node_any *)f;
		if (any->value_type == LYD_ANYDATA_DATATREE) {
			for (const struct lyd_node *n = any->value.tree; n; n = n->next)
				subtree_to_xpath(nc->ly, n, "", NULL, &xp);
		} else if (any->value.str && !only_space(any->value.str)) {
			xp_free(&xp);
			return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL,
					 "subtree filter in an unsupported form");
		}
	}
	if (xp.bad) {
		xp_free(&xp);
		return reply_err(NC_ERR_INVALID_VALUE, NULL, "unsupported subtree filter");
	}
	for (size_t i = 0; i < xp.n; i++)
		sw_log(3, "netconf: filter xpath: %s", xp.v[i]);
	if (apply_xpaths(data, &xp) < 0) {
		xp_free(&xp);
		return reply_ly_err("filter");
	}
	xp_free(&xp);
	return NULL;
}

static struct nc_server_reply *reply_data(struct lyd_node *rpc, struct lyd_node *data)
{
	struct lyd_node *out = NULL;

	if (lyd_dup_single(rpc, NULL, 0, &out) ||
	    lyd_new_any(out, NULL, "data", data, 1, LYD_ANYDATA_DATATREE, 1, NULL)) {
		lyd_free_all(data);
		lyd_free_all(out);
		return reply_err(NC_ERR_OP_FAILED, NULL, "cannot build the reply");
	}
	return nc_server_reply_data(out, NC_WD_EXPLICIT, NC_PARAMTYPE_FREE);
}

static bool target_is_running(struct lyd_node *rpc, const char *container)
{
	struct lyd_node *t = NULL;
	char path[64];

	snprintf(path, sizeof path, "%s/running", container);
	return !lyd_find_path(rpc, path, 0, &t) && t;
}

static struct nc_server_reply *rpc_get(struct sw_netconf *nc, struct lyd_node *rpc, bool state)
{
	struct lyd_node *data = NULL;
	struct nc_server_reply *err;

	if (!state && !target_is_running(rpc, "source"))
		return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL,
				 "only the running datastore exists");
	if (build_data(nc, state, false, &data) < 0)
		return reply_err(NC_ERR_OP_FAILED, NULL, "cannot build the data tree");
	if (state) {
		struct lyd_node *mon = NULL;

		if (build_monitoring(nc, &mon) < 0 || lyd_insert_sibling(data, mon, &data)) {
			lyd_free_all(mon);
			lyd_free_all(data);
			return reply_err(NC_ERR_OP_FAILED, NULL, "cannot build netconf-state");
		}
	}
	err = apply_filter(nc, rpc, &data);
	if (err) {
		lyd_free_all(data);
		return err;
	}
	return reply_data(rpc, data);
}

/* ---------------------------------------------------------------- edit-config */

enum edit_op { OP_MERGE, OP_REPLACE, OP_CREATE, OP_DELETE, OP_REMOVE, OP_NONE };

static int parse_op(const char *s, enum edit_op *op)
{
	static const char *const names[] = { "merge", "replace", "create", "delete", "remove",
					     "none" };
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(s, names[i])) {
			*op = (enum edit_op)i;
			return 0;
		}
	return -1;
}

struct edit_err {
	NC_ERR tag;
	char msg[512];
	char path[512];
};

static int edit_fail(struct edit_err *e, NC_ERR tag, const struct lyd_node *n, const char *msg)
{
	char *p = n ? lyd_path(n, LYD_PATH_STD, NULL, 0) : NULL;

	e->tag = tag;
	snprintf(e->msg, sizeof e->msg, "%s", msg);
	snprintf(e->path, sizeof e->path, "%s", p ? p : "");
	free(p);
	return -1;
}

/* Insert a copy of edit node en (without children, list keys included) under parent or
 * among the top-level siblings *top. */
static int insert_shell(const struct lyd_node *en, struct lyd_node *parent, struct lyd_node **top,
			struct lyd_node **out)
{
	struct lyd_node *d;

	if (lyd_dup_single(en, NULL, LYD_DUP_NO_META, &d))
		return -1;
	if (parent ? lyd_insert_child(parent, d) : lyd_insert_sibling(*top, d, top)) {
		lyd_free_tree(d);
		return -1;
	}
	*out = d;
	return 0;
}

static void remove_node(struct lyd_node *n, struct lyd_node **top)
{
	if (*top == n)
		*top = n->next;
	lyd_free_tree(n);
}

static int edit_siblings(const struct lyd_node *edits, struct lyd_node *parent,
			 struct lyd_node **top, enum edit_op inherited, struct edit_err *e);

/* Apply one edit node (with its operation) to the target. */
static int edit_node(const struct lyd_node *en, struct lyd_node *parent, struct lyd_node **top,
		     enum edit_op inherited, struct edit_err *e)
{
	struct lyd_meta *m = lyd_find_meta(en->meta, NULL, "ietf-netconf:operation");
	struct lyd_node *siblings = parent ? lyd_child(parent) : *top, *match = NULL, *nn;
	enum edit_op op = inherited;
	bool term_node = en->schema && (en->schema->nodetype & LYD_NODE_TERM);

	if (!en->schema)
		return edit_fail(e, NC_ERR_UNKNOWN_ELEM, en, "unknown element");
	if (m && parse_op(lyd_get_meta_value(m), &op) < 0)
		return edit_fail(e, NC_ERR_BAD_ATTR, en, "bad operation attribute");
	if (lysc_is_key(en->schema)) /* keys identify the entry; they are set with it */
		return 0;
	if (siblings)
		lyd_find_sibling_first(siblings, en, &match);

	switch (op) {
	case OP_CREATE:
		if (match)
			return edit_fail(e, NC_ERR_DATA_EXISTS, en, "data already exists");
		/* fall through */
	case OP_REPLACE:
		if (match)
			remove_node(match, top);
		if (insert_shell(en, parent, top, &nn) < 0)
			return edit_fail(e, NC_ERR_OP_FAILED, en, "cannot insert");
		return term_node ? 0 : edit_siblings(lyd_child(en), nn, top, op, e);
	case OP_DELETE:
		if (!match)
			return edit_fail(e, NC_ERR_DATA_MISSING, en, "data does not exist");
		/* fall through */
	case OP_REMOVE:
		if (match)
			remove_node(match, top);
		return 0;
	case OP_MERGE:
		if (!match) {
			if (insert_shell(en, parent, top, &nn) < 0)
				return edit_fail(e, NC_ERR_OP_FAILED, en, "cannot insert");
			return term_node ? 0 : edit_siblings(lyd_child(en), nn, top, op, e);
		}
		if (term_node) {
			if (en->schema->nodetype == LYS_LEAF) {
				LY_ERR lr = lyd_change_term(match, lyd_get_value(en));
				if (lr != LY_SUCCESS && lr != LY_EEXIST && lr != LY_ENOT)
					return edit_fail(e, NC_ERR_INVALID_VALUE, en, "bad value");
			}
			return 0;
		}
		return edit_siblings(lyd_child(en), match, top, op, e);
	case OP_NONE:
		if (term_node)
			return 0;
		if (!match) {
			/* Create the ancestors the nested operations need; drop them again if
			 * nothing was put under them. */
			int rc;
			if (insert_shell(en, parent, top, &nn) < 0)
				return edit_fail(e, NC_ERR_OP_FAILED, en, "cannot insert");
			rc = edit_siblings(lyd_child(en), nn, top, op, e);
			if (!rc) {
				bool empty = true;
				for (struct lyd_node *c = lyd_child(nn); c; c = c->next)
					if (!c->schema || !lysc_is_key(c->schema))
						empty = false;
				if (empty && !(nn->schema->flags & LYS_PRESENCE))
					remove_node(nn, top);
			}
			return rc;
		}
		return edit_siblings(lyd_child(en), match, top, op, e);
	}
	return edit_fail(e, NC_ERR_OP_FAILED, en, "internal error");
}

static int edit_siblings(const struct lyd_node *edits, struct lyd_node *parent,
			 struct lyd_node **top, enum edit_op inherited, struct edit_err *e)
{
	for (const struct lyd_node *en = edits; en; en = en->next)
		if (edit_node(en, parent, top, inherited, e) < 0)
			return -1;
	return 0;
}

/* The trees of a checked candidate (owned). */
struct cand_trees {
	struct ctl_tree *v;
	size_t n;
};

static void cand_trees_free(struct cand_trees *c)
{
	for (size_t i = 0; i < c->n; i++)
		ctl_tree_free(&c->v[i]);
	free(c->v);
	c->v = NULL;
	c->n = 0;
}

/* YANG-validated candidate -> the tree model, with the model's semantic rules (the same as a
 * config file's). NULL, or the rpc-error naming the data node the rule is about. */
static struct nc_server_reply *candidate_trees(const struct lyd_node *cand, struct cand_trees *out)
{
	struct nc_server_reply *r = NULL;
	struct ly_set *set = NULL;
	struct ctl_tree_err e;

	memset(out, 0, sizeof *out);
	if (!cand || lyd_find_xpath(cand, "/inca-switch:inca-switch/trees/tree", &set))
		return NULL;
	out->v = calloc(set->count ? set->count : 1, sizeof *out->v);
	if (!out->v) {
		ly_set_free(set, NULL);
		return reply_err(NC_ERR_OP_FAILED, NULL, "out of memory");
	}
	for (uint32_t i = 0; i < set->count && !r; i++) {
		const struct lyd_node *tn = set->dnodes[i];
		int rc = ctl_tree_from_lyd(tn, &out->v[out->n], &e);

		if (rc == 0) {
			out->n++;
			rc = ctl_tree_finish(&out->v[out->n - 1], sw_config_auth_required(), &e);
		}
		if (rc < 0) {
			char *path = lyd_path(ctl_tree_err_node(tn, &e), LYD_PATH_STD, NULL, 0);

			r = rc == -ENOMEM ? reply_err(NC_ERR_OP_FAILED, NULL, "out of memory") :
					    reply_err(NC_ERR_INVALID_VALUE, path, "%s", e.msg);
			free(path);
		}
	}
	ly_set_free(set, NULL);
	if (r)
		cand_trees_free(out);
	return r;
}

/* Overwrite the text of every auth-key element with '*' (for logging an edit). */
static void redact_auth_keys(char *x)
{
	for (char *p = strstr(x, "auth-key"); p; p = strstr(p, "auth-key")) {
		bool closing = p > x && p[-1] == '/';
		p += 8;
		if (closing || (*p != '>' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r'))
			continue; /* a closing tag, or auth-key-id */
		p = strchr(p, '>');
		if (!p)
			return;
		for (p++; *p && *p != '<'; p++)
			*p = '*';
	}
}

#define NACM_NS "urn:ietf:params:xml:ns:yang:ietf-netconf-acm"

/* ietf-netconf-acm is in the context only for the nacm:default-deny-all extension the modules
 * use; the server keeps no NACM rules (access is the SSH authorized_keys list). An edit of them
 * is refused, never answered <ok/> and dropped. */
static struct nc_server_reply *refuse_nacm(const struct lyd_node *cfgnode)
{
	const struct lyd_node_any *any = (const struct lyd_node_any *)cfgnode;

	if (any->value_type != LYD_ANYDATA_DATATREE)
		return NULL;
	for (const struct lyd_node *n = any->value.tree; n; n = n->next) {
		const char *ns = n->schema ? n->schema->module->ns :
					     ((const struct lyd_node_opaq *)n)->name.module_ns;

		if (ns && !strcmp(ns, NACM_NS))
			return reply_err(NC_ERR_OP_NOT_SUPPORTED, "/ietf-netconf-acm:nacm",
					 "NACM (ietf-netconf-acm) is not implemented: access is "
					 "granted by the SSH authorized_keys list");
	}
	return NULL;
}

/* Every check a candidate passes before it may run: YANG validation (types, ranges, mandatory
 * nodes, must rules), the tree model's semantic rules (ctl_tree_finish, as for a config file),
 * the capacity limits. NULL when it passes (trees: its trees, owned by the caller also on
 * failure; mgmt: its management addresses), else the rpc-error. The edit and <validate> run
 * the same. */
static struct nc_server_reply *check_candidate(struct sw_netconf *nc, struct lyd_node **cand,
					       struct cand_trees *trees,
					       char mgmt[SW_MGMT_MAX][128], size_t *nmgmt)
{
	struct nc_server_reply *r = NULL;
	char err[SW_CONF_ERR_MAX];
	struct ly_set *ms = NULL;

	*nmgmt = 0;
	memset(trees, 0, sizeof *trees);
	if (lyd_validate_all(cand, nc->ly, LYD_VALIDATE_NO_STATE | LYD_VALIDATE_PRESENT, NULL))
		return reply_ly_err_in("validation", *cand);
	if ((r = candidate_trees(*cand, trees)))
		return r;
	if (sw_config_check_limits(nc->cfg, trees->v, trees->n, err, sizeof err) < 0)
		return reply_err(NC_ERR_RES_DENIED, "/inca-switch:inca-switch/trees", "%s", err);
	if (*cand && !lyd_find_xpath(*cand, "/inca-switch:inca-switch/management/address", &ms)) {
		for (uint32_t i = 0; i < ms->count && *nmgmt < SW_MGMT_MAX; i++)
			snprintf(mgmt[(*nmgmt)++], sizeof mgmt[0], "%s",
				 lyd_get_value(ms->dnodes[i]));
		if (ms->count > SW_MGMT_MAX)
			r = reply_err(NC_ERR_RES_DENIED, "/inca-switch:inca-switch/management",
				      "at most %d management addresses", SW_MGMT_MAX);
		ly_set_free(ms, NULL);
	}
	return r;
}

/* Parse the <config> anyxml of an edit-config or validate as inca-switch data (nc:operation
 * attributes kept as metadata). NULL or the rpc-error. */
static struct nc_server_reply *parse_config(struct sw_netconf *nc, struct lyd_node *cfgnode,
					    const char *what, struct lyd_node **out)
{
	struct nc_server_reply *r;
	char *xml = NULL;

	*out = NULL;
	if ((r = refuse_nacm(cfgnode)))
		return r;
	if (lyd_any_value_str(cfgnode, &xml) || !xml)
		return reply_err(NC_ERR_OP_FAILED, NULL, "cannot read <config>");
	if (sw_verbosity >= 3) {
		char *shown = strdup(xml);
		if (shown)
			redact_auth_keys(shown);
		sw_log(3, "netconf: %s content (keys hidden): %s", what, shown ? shown : "");
		free(shown);
	}
	if (strlen(xml) > EDIT_TEXT_MAX) {
		free(xml);
		return reply_err(NC_ERR_TOO_BIG, NULL, "config too large");
	}
	if (lyd_parse_data_mem(nc->ly, xml, LYD_XML,
			       LYD_PARSE_ONLY | LYD_PARSE_STRICT | LYD_PARSE_NO_STATE, 0, out)) {
		free(xml);
		*out = NULL;
		return reply_ly_err(what);
	}
	free(xml);
	return NULL;
}

static struct nc_server_reply *rpc_edit_config(struct sw_netconf *nc, struct lyd_node *rpc,
					       struct nc_session *session)
{
	struct lyd_node *n = NULL, *cfgnode = NULL, *edit = NULL, *cand = NULL;
	enum edit_op defop = OP_MERGE;
	bool test_only = false;
	struct edit_err ee = { 0 };
	struct cand_trees parsed = { 0 };
	struct nc_server_reply *r = NULL;
	char err[SW_CONF_ERR_MAX];
	size_t nmgmt = 0;
	char mgmt[SW_MGMT_MAX][128];
	int rc;

	if (!target_is_running(rpc, "target"))
		return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL,
				 "only the running datastore exists (no candidate/startup)");
	if (nc->lock_sid && nc->lock_sid != nc_session_get_id(session))
		return reply_err(NC_ERR_LOCK_DENIED, NULL, "running is locked by session %u",
				 nc->lock_sid);
	if (!lyd_find_path(rpc, "default-operation", 0, &n) && n &&
	    parse_op(lyd_get_value(n), &defop) < 0)
		return reply_err(NC_ERR_INVALID_VALUE, NULL, "bad default-operation");
	n = NULL;
	/* test-then-set (the default) and set both validate first: nothing invalid ever runs */
	if (!lyd_find_path(rpc, "test-option", 0, &n) && n)
		test_only = !strcmp(lyd_get_value(n), "test-only");
	if (lyd_find_path(rpc, "config", 0, &cfgnode) || !cfgnode)
		return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL, "only inline <config> is supported");
	if ((r = parse_config(nc, cfgnode, "edit-config", &edit))) {
		nc->edits_refused++;
		return r;
	}

	/* Candidate = running + edit. */
	if (build_data(nc, false, true, &cand) < 0) {
		lyd_free_all(edit);
		return reply_err(NC_ERR_OP_FAILED, NULL, "cannot build the running tree");
	}
	if (edit_siblings(edit, NULL, &cand, defop, &ee) < 0) {
		lyd_free_all(edit);
		lyd_free_all(cand);
		nc->edits_refused++;
		return reply_err(ee.tag, ee.path, "%s", ee.msg);
	}
	lyd_free_all(edit);
	r = check_candidate(nc, &cand, &parsed, mgmt, &nmgmt);
	if (r) {
		nc->edits_refused++;
		goto out;
	}
	if (test_only) {
		r = nc_server_reply_ok();
		goto out;
	}
	rc = sw_switch_set_trees(nc->sw, parsed.v, parsed.n, err, sizeof err);
	if (rc < 0) {
		nc->edits_refused++;
		r = reply_err(rc == -ENOMEM ? NC_ERR_RES_DENIED : NC_ERR_OP_FAILED, NULL, "%s", err);
		goto out;
	}
	memcpy(nc->mgmt, mgmt, sizeof mgmt);
	nc->nmgmt = nmgmt;
	nc->edits_applied++;
	sw_log(1, "netconf: edit-config applied by session %u: %zu tree(s) now",
	       nc_session_get_id(session), parsed.n);
	r = nc_server_reply_ok();
out:
	cand_trees_free(&parsed);
	lyd_free_all(cand);
	return r;
}

/* <validate> (:validate:1.1): running is valid by construction; an inline <config> is checked
 * as a complete configuration, exactly like the candidate of an edit. */
static struct nc_server_reply *rpc_validate(struct sw_netconf *nc, struct lyd_node *rpc)
{
	struct lyd_node *cfgnode = NULL, *cand = NULL;
	struct nc_server_reply *r;
	struct cand_trees parsed;
	char mgmt[SW_MGMT_MAX][128];
	size_t nmgmt;

	if (target_is_running(rpc, "source"))
		return nc_server_reply_ok();
	if (lyd_find_path(rpc, "source/config", 0, &cfgnode) || !cfgnode)
		return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL,
				 "only running and an inline <config> can be validated");
	if ((r = parse_config(nc, cfgnode, "validate", &cand)))
		return r;
	r = check_candidate(nc, &cand, &parsed, mgmt, &nmgmt);
	cand_trees_free(&parsed);
	lyd_free_all(cand);
	return r ? r : nc_server_reply_ok();
}

/* ---------------------------------------------------------------- other RPCs */

static struct nc_server_reply *rpc_lock(struct sw_netconf *nc, struct lyd_node *rpc,
					struct nc_session *s, bool lock)
{
	uint32_t sid = nc_session_get_id(s);

	if (!target_is_running(rpc, "target"))
		return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL, "only running can be locked");
	if (lock) {
		if (nc->lock_sid)
			return reply_err(NC_ERR_LOCK_DENIED, NULL, "running is locked by session %u",
					 nc->lock_sid);
		nc->lock_sid = sid;
		nc->lock_time = time(NULL);
	} else {
		if (nc->lock_sid != sid)
			return reply_err(NC_ERR_OP_FAILED, NULL, "running is not locked by you");
		nc->lock_sid = 0;
	}
	return nc_server_reply_ok();
}

/* Our own get-schema (the built-in one of libnetconf2 2.0.24 double-frees with libyang 2.1). */
static struct nc_server_reply *rpc_get_schema(struct lyd_node *rpc, struct nc_session *s)
{
	struct lyd_node *n = NULL, *out = NULL;
	const char *id, *ver = NULL, *fmt = NULL;
	const struct lys_module *mod;
	char *text = NULL;
	LY_ERR lrc;

	(void)s;
	if (lyd_find_path(rpc, "identifier", 0, &n) || !n)
		return reply_err(NC_ERR_MISSING_ELEM, NULL, "identifier missing");
	id = lyd_get_value(n);
	if (!lyd_find_path(rpc, "version", 0, &n) && n && lyd_get_value(n)[0])
		ver = lyd_get_value(n);
	if (!lyd_find_path(rpc, "format", 0, &n) && n)
		fmt = lyd_get_value(n);
	if (fmt && strcmp(fmt, "ietf-netconf-monitoring:yang") && strcmp(fmt, "yang"))
		return reply_err(NC_ERR_INVALID_VALUE, NULL, "only the yang format is served");
	mod = ver ? ly_ctx_get_module(g_nc->ly, id, ver) : ly_ctx_get_module_implemented(g_nc->ly, id);
	if (!mod && !ver)
		mod = ly_ctx_get_module_latest(g_nc->ly, id);
	if (!mod)
		return reply_err(NC_ERR_INVALID_VALUE, NULL, "schema %s not found", id);
	/* Serve the original text when we have it, else libyang's rendering. */
	{
		const struct ctl_yang_module *m = ctl_yang_find(mod->name, mod->revision);
		if (m)
			text = strdup(m->text);
		else if (lys_print_mem(&text, mod, LYS_OUT_YANG, 0))
			text = NULL;
	}
	if (!text)
		return reply_err(NC_ERR_OP_FAILED, NULL, "cannot print schema %s", id);
	if (lyd_dup_single(rpc, NULL, 0, &out)) {
		free(text);
		return reply_err(NC_ERR_OP_FAILED, NULL, "out of memory");
	}
	/* use_value = 0: libyang copies the string, we keep ownership of ours. */
	lrc = lyd_new_any(out, NULL, "data", text, 0, LYD_ANYDATA_STRING, 1, NULL);
	free(text);
	if (lrc) {
		lyd_free_all(out);
		return reply_err(NC_ERR_OP_FAILED, NULL, "cannot build the reply");
	}
	return nc_server_reply_data(out, NC_WD_EXPLICIT, NC_PARAMTYPE_FREE);
}

static struct nc_server_reply *rpc_dispatch(struct lyd_node *rpc, struct nc_session *s)
{
	const char *name = rpc->schema ? rpc->schema->name : "?";
	struct sw_netconf *nc = g_nc;

	sw_log(2, "netconf: session %u: <%s>", nc_session_get_id(s), name);
	if (!strcmp(name, "get"))
		return rpc_get(nc, rpc, true);
	if (!strcmp(name, "get-config"))
		return rpc_get(nc, rpc, false);
	if (!strcmp(name, "edit-config"))
		return rpc_edit_config(nc, rpc, s);
	if (!strcmp(name, "lock"))
		return rpc_lock(nc, rpc, s, true);
	if (!strcmp(name, "unlock"))
		return rpc_lock(nc, rpc, s, false);
	if (!strcmp(name, "get-schema"))
		return rpc_get_schema(rpc, s);
	if (!strcmp(name, "validate"))
		return rpc_validate(nc, rpc);
	return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL, "operation <%s> is not supported", name);
}

/* ---------------------------------------------------------------- SSH authentication */

/* Only keys listed in --netconf-authorized-keys; libssh verifies the signature. */
static bool key_authorised(const struct sw_netconf *nc, ssh_key key)
{
	for (size_t i = 0; i < nc->nauthkeys; i++)
		if (!ssh_key_cmp(key, nc->authkeys[i], SSH_KEY_CMP_PUBLIC))
			return true;
	return false;
}

static int load_authorized_keys(struct sw_netconf *nc, const char *path, char *err, size_t cap)
{
	FILE *f = fopen(path, "r");
	char line[16384];
	int lineno = 0;

	if (!f) {
		snprintf(err, cap, "--netconf-authorized-keys %s: %s", path, strerror(errno));
		return -errno;
	}
	while (fgets(line, sizeof line, f)) {
		char *save = NULL, *type, *b64;
		ssh_key k = NULL, *nk;

		lineno++;
		type = strtok_r(line, " \t\r\n", &save);
		if (!type || type[0] == '#')
			continue;
		b64 = strtok_r(NULL, " \t\r\n", &save);
		if (!b64 || ssh_pki_import_pubkey_base64(b64, ssh_key_type_from_name(type), &k) !=
				    SSH_OK) {
			snprintf(err, cap, "%s:%d: not a public key line (options are not supported)",
				 path, lineno);
			fclose(f);
			return -EINVAL;
		}
		nk = realloc(nc->authkeys, (nc->nauthkeys + 1) * sizeof *nk);
		if (!nk) {
			ssh_key_free(k);
			fclose(f);
			snprintf(err, cap, "out of memory");
			return -ENOMEM;
		}
		nc->authkeys = nk;
		nc->authkeys[nc->nauthkeys++] = k;
	}
	fclose(f);
	if (!nc->nauthkeys) {
		snprintf(err, cap, "%s: no keys", path);
		return -EINVAL;
	}
	return 0;
}

/* ---------------------------------------------------------------- connections */

/* Absolute CLOCK_REALTIME time ms from now (pthread_cond_timedwait). */
static struct timespec realtime_in_ms(long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

static int thread_start(struct sw_netconf *nc, void *(*fn)(void *), void *arg)
{
	pthread_attr_t at;
	pthread_t t;
	int rc;

	pthread_mutex_lock(&nc->conn_mu);
	nc->nthreads++;
	pthread_mutex_unlock(&nc->conn_mu);
	if (pthread_attr_init(&at))
		rc = ENOMEM;
	else {
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &at, fn, arg);
		pthread_attr_destroy(&at);
	}
	if (rc) {
		pthread_mutex_lock(&nc->conn_mu);
		nc->nthreads--;
		pthread_cond_broadcast(&nc->conn_cv);
		pthread_mutex_unlock(&nc->conn_mu);
		return -rc;
	}
	return 0;
}

static void thread_end(struct sw_netconf *nc)
{
	pthread_mutex_lock(&nc->conn_mu);
	nc->nthreads--;
	pthread_cond_broadcast(&nc->conn_cv);
	pthread_mutex_unlock(&nc->conn_mu);
}

/* Caller holds conn_mu. Shutting the socket down makes every blocking call of its handshake
 * (libssh, libnetconf2's <hello>) fail at once; the connection's thread then cleans up. */
static void conn_kill_locked(struct nc_conn *c, const char *why)
{
	if (c->killed)
		return;
	c->killed = true;
	shutdown(c->fd, SHUT_RDWR);
	sw_log(c->deadline_ns ? 1 : 2, "netconf: %s%s connection %llu closed: %s",
	       c->ssh ? "ssh:" : "unix", c->host, (unsigned long long)c->id, why);
}

static void conn_unlink(struct nc_conn *c)
{
	struct sw_netconf *nc = c->nc;

	pthread_mutex_lock(&nc->conn_mu);
	for (struct nc_conn **p = &nc->conns; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&nc->conn_mu);
}

/* The handshake of connection id is complete: it no longer counts as unauthenticated. */
static void conn_established(struct sw_netconf *nc, uint64_t id)
{
	pthread_mutex_lock(&nc->conn_mu);
	for (struct nc_conn *c = nc->conns; c; c = c->next)
		if (c->id == id)
			c->deadline_ns = 0;
	pthread_mutex_unlock(&nc->conn_mu);
}

/* Hand an established session to the poll thread (the only one touching the pollsession). */
static void session_queue(struct sw_netconf *nc, struct nc_session *s)
{
	pthread_mutex_lock(&nc->wake_mu);
	if (nc->nnewq < NC_NEWQ_MAX && !atomic_load(&nc->stop)) {
		nc->newq[nc->nnewq++] = s;
		s = NULL;
		pthread_cond_signal(&nc->wake_cv);
	}
	pthread_mutex_unlock(&nc->wake_mu);
	if (s) {
		sw_log(0, "netconf: session %u dropped: too many new sessions at once",
		       nc_session_get_id(s));
		nc_session_free(s, sess_free);
	}
}

/* <hello> exchange on an accepted transport (fd: UNIX socket, or our end of an SSH relay);
 * on success the session goes to the poll thread, else fd is closed. */
static void hello_exchange(struct sw_netconf *nc, struct nc_sess *sd, uint64_t conn_id)
{
	struct nc_session *s = NULL;
	NC_MSG_TYPE m = nc_accept_inout(sd->fd, sd->fd, sd->user, &s);

	if (m != NC_MSG_HELLO) {
		if (m == NC_MSG_BAD_HELLO)
			atomic_fetch_add(&nc->in_bad_hellos, 1);
		sw_log(1, "netconf: %s%s connection %llu: no valid <hello>",
		       sd->ssh ? "ssh:" : "unix", sd->host, (unsigned long long)conn_id);
		sess_free(sd);
		return;
	}
	conn_established(nc, conn_id);
	atomic_fetch_add(&nc->in_sessions, 1);
	sd->id = nc_session_get_id(s);
	sd->login = time(NULL);
	nc_session_set_data(s, sd);
	sw_log(1, "netconf: session %u (%s, %s%s) opened", sd->id, sd->user,
	       sd->ssh ? "ssh:" : "unix", sd->host);
	session_queue(nc, s);
}

static void *unix_conn_main(void *arg)
{
	struct nc_conn *c = arg;
	struct sw_netconf *nc = c->nc;
	struct nc_sess *sd = calloc(1, sizeof *sd);
	struct ucred cr;
	socklen_t len = sizeof cr;
	uint64_t id = c->id;

	if (!sd) {
		conn_unlink(c);
		close(c->fd);
		free(c);
		thread_end(nc);
		return NULL;
	}
	sd->nc = nc;
	sd->fd = c->fd;
	if (!getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &len)) {
		struct passwd pw, *pp = NULL;
		char buf[1024];

		if (!getpwuid_r(cr.uid, &pw, buf, sizeof buf, &pp) && pp)
			snprintf(sd->user, sizeof sd->user, "%s", pw.pw_name);
		else
			snprintf(sd->user, sizeof sd->user, "%u", (unsigned)cr.uid);
	} else {
		snprintf(sd->user, sizeof sd->user, "?");
	}
	/* The connection stays registered (its deadline applies) until the <hello> is done; the
	 * socket then belongs to the session. */
	hello_exchange(nc, sd, id);
	conn_unlink(c);
	free(c);
	thread_end(nc);
	return NULL;
}

static void *hello_main(void *arg)
{
	struct nc_sess *sd = arg;
	struct sw_netconf *nc = sd->nc;

	hello_exchange(nc, sd, sd->conn_id);
	thread_end(nc);
	return NULL;
}

/* SSH: key exchange, public-key authentication, a session channel with the netconf subsystem.
 * Blocking calls: the listener's deadline shuts the socket down if the peer stalls. libssh
 * 0.10 marks the message API deprecated in favour of callbacks, but it is still the one that
 * serves a single blocking handshake in a few lines (libnetconf2 2.0 uses it too). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static int ssh_handshake(struct nc_conn *c)
{
	struct sw_netconf *nc = c->nc;
	int attempts = 0;
	bool authed = false, subsys = false;

	ssh_set_auth_methods(c->ss, SSH_AUTH_METHOD_PUBLICKEY);
	if (ssh_handle_key_exchange(c->ss) != SSH_OK) {
		sw_log(2, "netconf: ssh:%s: key exchange failed: %s", c->host, ssh_get_error(c->ss));
		return -1;
	}
	while (!authed) {
		ssh_message m = ssh_message_get(c->ss);

		if (!m)
			return -1;
		if (ssh_message_type(m) == SSH_REQUEST_AUTH &&
		    ssh_message_subtype(m) == SSH_AUTH_METHOD_PUBLICKEY &&
		    key_authorised(nc, ssh_message_auth_pubkey(m))) {
			enum ssh_publickey_state_e st = ssh_message_auth_publickey_state(m);

			if (st == SSH_PUBLICKEY_STATE_NONE) { /* a query: "would you take it?" */
				ssh_message_auth_reply_pk_ok_simple(m);
			} else if (st == SSH_PUBLICKEY_STATE_VALID) {
				const char *u = ssh_message_auth_user(m);

				snprintf(c->user, sizeof c->user, "%s", u ? u : "?");
				ssh_message_auth_reply_success(m, 0);
				authed = true;
			} else {
				attempts++;
				ssh_message_reply_default(m);
			}
		} else if (ssh_message_type(m) == SSH_REQUEST_AUTH) {
			if (ssh_message_subtype(m) == SSH_AUTH_METHOD_PUBLICKEY) {
				attempts++;
				sw_log(0, "netconf: ssh:%s: user '%s' offered a key that is not "
					  "authorised", c->host,
				       ssh_message_auth_user(m) ? ssh_message_auth_user(m) : "?");
			} else if (ssh_message_subtype(m) != SSH_AUTH_METHOD_NONE) {
				attempts++;
			}
			ssh_message_auth_set_methods(m, SSH_AUTH_METHOD_PUBLICKEY);
			ssh_message_reply_default(m);
		} else {
			ssh_message_reply_default(m);
		}
		ssh_message_free(m);
		if (attempts >= NC_AUTH_ATTEMPTS) {
			sw_log(0, "netconf: ssh:%s: %d failed authentications, disconnecting",
			       c->host, attempts);
			return -1;
		}
	}
	while (!subsys) {
		ssh_message m = ssh_message_get(c->ss);
		int type;

		if (!m)
			return -1;
		type = ssh_message_type(m);
		if (type == SSH_REQUEST_CHANNEL_OPEN && !c->ch &&
		    ssh_message_subtype(m) == SSH_CHANNEL_SESSION) {
			c->ch = ssh_message_channel_request_open_reply_accept(m);
			if (!c->ch) {
				ssh_message_free(m);
				return -1;
			}
		} else if (type == SSH_REQUEST_CHANNEL && c->ch &&
			   ssh_message_channel_request_channel(m) == c->ch &&
			   ssh_message_subtype(m) == SSH_CHANNEL_REQUEST_SUBSYSTEM &&
			   ssh_message_channel_request_subsystem(m) &&
			   !strcmp(ssh_message_channel_request_subsystem(m), "netconf")) {
			ssh_message_channel_request_reply_success(m);
			subsys = true;
		} else {
			ssh_message_reply_default(m); /* shells, exec, other subsystems: refused */
		}
		ssh_message_free(m);
	}
	return 0;
}
#pragma GCC diagnostic pop

/* Copy bytes between the SSH channel and our end (rfd) of the session's socketpair until
 * either side closes. A reply the client does not read blocks only this session. */
static void ssh_relay(struct nc_conn *c, int rfd)
{
	static const size_t cap = 64 * 1024;
	char *in = malloc(cap), *out = malloc(cap);
	size_t in_len = 0, in_off = 0;

	while (in && out && !atomic_load(&c->nc->stop)) {
		bool progress = false;
		int avail = ssh_channel_poll(c->ch, 0);
		ssize_t r;

		if (avail == SSH_ERROR || (avail == SSH_EOF && !in_len))
			break;
		if (avail > 0 && !in_len) {
			int n = ssh_channel_read_nonblocking(c->ch, in, (uint32_t)cap, 0);
			if (n < 0)
				break;
			in_len = (size_t)n;
			in_off = 0;
			progress = n > 0;
		}
		if (in_len) {
			r = send(rfd, in + in_off, in_len, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (r < 0 && errno != EAGAIN && errno != EINTR)
				break;
			if (r > 0) {
				in_off += (size_t)r;
				in_len -= (size_t)r;
				progress = true;
			}
		}
		r = recv(rfd, out, cap, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			break;
		if (r > 0) {
			for (ssize_t off = 0; off < r;) {
				int w = ssh_channel_write(c->ch, out + off, (uint32_t)(r - off));
				if (w <= 0)
					goto done;
				off += w;
			}
			progress = true;
		}
		if (!progress) {
			struct pollfd p[2] = {
				{ .fd = rfd, .events = (short)(POLLIN | (in_len ? POLLOUT : 0)) },
				{ .fd = ssh_get_fd(c->ss), .events = POLLIN },
			};
			/* With input pending for rfd, the SSH socket waits: polling it would spin. */
			poll(p, in_len ? 1 : 2, NC_POLL_MS * 4);
		}
	}
done:
	free(in);
	free(out);
}

static void *ssh_conn_main(void *arg)
{
	struct nc_conn *c = arg;
	struct sw_netconf *nc = c->nc;
	ssh_bind b = ssh_bind_new();
	int sp[2] = { -1, -1 }, nolog = SSH_LOG_NOLOG;
	long timeout_s = NC_HANDSHAKE_TIMEOUT_MS / 1000;
	struct nc_sess *sd = NULL;

	c->ss = ssh_new();
	if (!b || !c->ss ||
	    ssh_bind_options_set(b, SSH_BIND_OPTIONS_HOSTKEY, nc->hostkey_path) != SSH_OK ||
	    ssh_bind_options_set(b, SSH_BIND_OPTIONS_LOG_VERBOSITY, &nolog) != SSH_OK ||
	    ssh_bind_accept_fd(b, c->ss, c->fd) != SSH_OK) {
		sw_log(0, "netconf: ssh:%s: cannot set up the SSH session: %s", c->host,
		       b ? ssh_get_error(b) : "out of memory");
		if (b)
			ssh_bind_free(b);
		conn_unlink(c);
		if (c->ss)
			ssh_free(c->ss);
		close(c->fd);
		free(c);
		thread_end(nc);
		return NULL;
	}
	ssh_bind_free(b);
	ssh_options_set(c->ss, SSH_OPTIONS_TIMEOUT, &timeout_s);
	if (ssh_handshake(c) < 0)
		goto out;
	sd = calloc(1, sizeof *sd);
	if (!sd || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		sw_log(0, "netconf: ssh:%s: out of resources", c->host);
		free(sd);
		goto out;
	}
	sd->nc = nc;
	sd->fd = sp[1];
	sd->ssh = true;
	sd->conn_id = c->id;
	snprintf(sd->user, sizeof sd->user, "%s", c->user);
	snprintf(sd->host, sizeof sd->host, "%s", c->host);
	/* libnetconf2 speaks NETCONF on sp[1] (its <hello> in another thread); this one relays. */
	if (thread_start(nc, hello_main, sd) < 0) {
		sess_free(sd);
		close(sp[0]);
		goto out;
	}
	ssh_relay(c, sp[0]);
	close(sp[0]);
out:
	conn_unlink(c);
	if (c->ch)
		ssh_channel_free(c->ch);
	ssh_disconnect(c->ss);
	ssh_free(c->ss); /* closes the socket */
	free(c);
	thread_end(nc);
	return NULL;
}

/* Admit an accepted connection: at most NC_PENDING_PER_SOURCE unauthenticated ones per source
 * address and NC_PENDING_MAX in all; over either, the oldest gives way (a flood of idle
 * connections only ever delays its own kind). */
static void conn_admit(struct sw_netconf *nc, int fd, bool ssh, const struct sockaddr_in *peer)
{
	struct nc_conn *c = calloc(1, sizeof *c);
	struct nc_conn *oldest_src = NULL, *oldest = NULL;
	unsigned from_src = 0, total = 0;

	if (!c) {
		close(fd);
		return;
	}
	c->nc = nc;
	c->fd = fd;
	c->ssh = ssh;
	c->start_ns = util_now_ns();
	c->deadline_ns = c->start_ns + (uint64_t)NC_HANDSHAKE_TIMEOUT_MS * 1000000ull;
	if (ssh)
		inet_ntop(AF_INET, &peer->sin_addr, c->host, sizeof c->host);
	pthread_mutex_lock(&nc->conn_mu);
	c->id = ++nc->conn_serial;
	for (struct nc_conn *o = nc->conns; o; o = o->next) {
		if (!o->deadline_ns || o->killed)
			continue;
		total++;
		if (!oldest || o->start_ns < oldest->start_ns)
			oldest = o;
		if (o->ssh == ssh && !strcmp(o->host, c->host)) {
			from_src++;
			if (!oldest_src || o->start_ns < oldest_src->start_ns)
				oldest_src = o;
		}
	}
	if (from_src >= NC_PENDING_PER_SOURCE)
		conn_kill_locked(oldest_src, "too many unauthenticated connections from its source");
	else if (total >= NC_PENDING_MAX)
		conn_kill_locked(oldest, "too many unauthenticated connections");
	c->next = nc->conns;
	nc->conns = c;
	pthread_mutex_unlock(&nc->conn_mu);
	sw_log(2, "netconf: %s%s connection %llu accepted", ssh ? "ssh:" : "unix", c->host,
	       (unsigned long long)c->id);
	if (thread_start(nc, ssh ? ssh_conn_main : unix_conn_main, c) < 0) {
		sw_log(0, "netconf: cannot start a thread for a connection");
		conn_unlink(c);
		close(fd);
		free(c);
	}
}

/* Listener thread: accepts on both endpoints, enforces the handshake deadline. */
static void *listen_main(void *arg)
{
	struct sw_netconf *nc = arg;

	while (!atomic_load(&nc->stop)) {
		struct pollfd p[3];
		int n = 0, idx_ssh = -1, idx_unix = -1;
		uint64_t now;

		p[n++] = (struct pollfd){ .fd = nc->stop_fd[0], .events = POLLIN };
		if (nc->ssh_lfd >= 0) {
			idx_ssh = n;
			p[n++] = (struct pollfd){ .fd = nc->ssh_lfd, .events = POLLIN };
		}
		if (nc->unix_lfd >= 0) {
			idx_unix = n;
			p[n++] = (struct pollfd){ .fd = nc->unix_lfd, .events = POLLIN };
		}
		if (poll(p, (nfds_t)n, NC_POLL_MS * 4) < 0 && errno != EINTR)
			usleep(NC_POLL_MS * 1000);
		now = util_now_ns();
		pthread_mutex_lock(&nc->conn_mu);
		for (struct nc_conn *c = nc->conns; c; c = c->next)
			if (c->deadline_ns && now > c->deadline_ns)
				conn_kill_locked(c, "handshake not completed in time");
		pthread_mutex_unlock(&nc->conn_mu);
		if (atomic_load(&nc->stop))
			break;
		if (idx_ssh >= 0 && (p[idx_ssh].revents & POLLIN)) {
			struct sockaddr_in sa;
			socklen_t len = sizeof sa;
			int fd = accept4(nc->ssh_lfd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC);

			if (fd >= 0)
				conn_admit(nc, fd, true, &sa);
			else if (errno == EMFILE || errno == ENFILE)
				usleep(NC_POLL_MS * 1000); /* out of descriptors: no spinning */
		}
		if (idx_unix >= 0 && (p[idx_unix].revents & POLLIN)) {
			int fd = accept4(nc->unix_lfd, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0)
				conn_admit(nc, fd, false, NULL);
			else if (errno == EMFILE || errno == ENFILE)
				usleep(NC_POLL_MS * 1000);
		}
	}
	return NULL;
}

/* Poll thread: every established session's RPCs (so the lock, the edit counters and the
 * session list have a single writer), and closing sessions. */
static void *server_main(void *arg)
{
	struct sw_netconf *nc = arg;

	while (!atomic_load(&nc->stop)) {
		struct nc_session *s = NULL;
		struct nc_session *fresh[NC_NEWQ_MAX];
		size_t nfresh;
		int r;

		pthread_mutex_lock(&nc->wake_mu);
		nfresh = nc->nnewq;
		memcpy(fresh, nc->newq, nfresh * sizeof fresh[0]);
		nc->nnewq = 0;
		pthread_mutex_unlock(&nc->wake_mu);
		for (size_t i = 0; i < nfresh; i++) {
			struct nc_sess *sd = nc_session_get_data(fresh[i]);

			if (nc_ps_add_session(nc->ps, fresh[i])) {
				nc_session_free(fresh[i], sess_free);
				continue;
			}
			sd->next = nc->sessions;
			sd->listed = true;
			nc->sessions = sd;
		}
		r = nc_ps_poll(nc->ps, NC_POLL_MS, &s);
		if (r & NC_PSPOLL_NOSESSIONS) {
			struct timespec ts = realtime_in_ms(NC_POLL_MS * 4);

			pthread_mutex_lock(&nc->wake_mu);
			if (!nc->nnewq && !atomic_load(&nc->stop))
				pthread_cond_timedwait(&nc->wake_cv, &nc->wake_mu, &ts);
			pthread_mutex_unlock(&nc->wake_mu);
			continue;
		}
		if (s && (r & (NC_PSPOLL_RPC | NC_PSPOLL_BAD_RPC | NC_PSPOLL_REPLY_ERROR))) {
			struct nc_sess *sd = nc_session_get_data(s);

			if (r & NC_PSPOLL_RPC) {
				nc->in_rpcs++;
				if (sd)
					sd->in_rpcs++;
			}
			if (r & NC_PSPOLL_BAD_RPC) {
				nc->in_bad_rpcs++;
				if (sd)
					sd->in_bad_rpcs++;
			}
			if (r & NC_PSPOLL_REPLY_ERROR) {
				nc->out_rpc_errors++;
				if (sd)
					sd->out_rpc_errors++;
			}
		}
		if (s && (r & (NC_PSPOLL_SESSION_TERM | NC_PSPOLL_SESSION_ERROR))) {
			uint32_t sid = nc_session_get_id(s);

			if (nc->lock_sid == sid)
				nc->lock_sid = 0; /* a lock dies with its session */
			if (r & NC_PSPOLL_SESSION_ERROR)
				nc->dropped_sessions++;
			sw_log(1, "netconf: session %u closed", sid);
			nc_ps_del_session(nc->ps, s);
			nc_session_free(s, sess_free);
		}
	}
	return NULL;
}

/* ---------------------------------------------------------------- start / stop */

static int listen_tcp(const char *s, int *out, struct sockaddr_in *sa)
{
	int fd, one = 1;

	if (util_parse_addr(s, 0, sa) < 0 || !sa->sin_port)
		return -EINVAL;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)sa, sizeof *sa) < 0 || listen(fd, 64) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	*out = fd;
	return 0;
}

/* Mode 0600 before listen(): nobody can connect while the path still has the umask's mode. */
static int listen_unix(const char *path, int *out)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof a.sun_path)
		return -ENAMETOOLONG;
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || chmod(path, 0600) < 0 ||
	    listen(fd, 64) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	*out = fd;
	return 0;
}

int sw_netconf_start(struct sw_switch *sw, const struct sw_config *cfg,
		     const struct sw_netconf_opts *o, struct sw_netconf **out, char *err, size_t cap)
{
	struct sw_netconf *nc;
	struct lysc_node *gs;
	int rc = -EINVAL;

	if (g_nc) {
		snprintf(err, cap, "netconf: already running");
		return -EBUSY;
	}
	if (!o->unix_path && !o->ssh_addr) {
		snprintf(err, cap, "netconf: no endpoint");
		return -EINVAL;
	}
	nc = calloc(1, sizeof *nc);
	if (!nc) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	nc->sw = sw;
	nc->cfg = cfg;
	nc->ssh_lfd = nc->unix_lfd = -1;
	nc->stop_fd[0] = nc->stop_fd[1] = -1;
	nc->start_time = time(NULL);
	atomic_init(&nc->stop, false);
	atomic_init(&nc->in_bad_hellos, 0);
	atomic_init(&nc->in_sessions, 0);
	for (size_t i = 0; i < cfg->nmgmt; i++)
		snprintf(nc->mgmt[nc->nmgmt++], sizeof nc->mgmt[0], "%s", cfg->mgmt_addr[i]);
	g_nc = nc;

	/* libyang: keep errors for rpc-error replies, do not print them. */
	ly_log_options(LY_LOSTORE_LAST);
	nc_verbosity(sw_verbosity >= 3 ? NC_VERB_VERBOSE : NC_VERB_ERROR);
	nc_set_print_clb_session(nc_print);

	if (ly_ctx_new(NULL, LY_CTX_NO_YANGLIBRARY | LY_CTX_DISABLE_SEARCHDIR_CWD, &nc->ly) ||
	    ctl_yang_load(nc->ly) < 0) {
		const struct ly_err_item *ei = nc->ly ? ly_err_last(nc->ly) : NULL;
		snprintf(err, cap, "netconf: cannot load the YANG modules: %s",
			 ei && ei->msg ? ei->msg : "?");
		goto fail;
	}
	gs = (struct lysc_node *)lys_find_path(nc->ly, NULL, "/ietf-netconf-monitoring:get-schema",
					       0);
	if (gs)
		gs->priv = (void *)rpc_get_schema; /* before nc_server_init: no built-in one */
	nc_set_global_rpc_clb(rpc_dispatch);
	if (nc_server_init(nc->ly)) {
		snprintf(err, cap, "netconf: nc_server_init failed");
		goto fail;
	}
	nc->server_init = true;
	nc_server_set_hello_timeout(NC_HELLO_TIMEOUT_S);
	nc_server_set_idle_timeout(0);
	if (pthread_mutex_init(&nc->wake_mu, NULL) || pthread_mutex_init(&nc->conn_mu, NULL)) {
		snprintf(err, cap, "netconf: cannot create a mutex");
		rc = -ENOMEM;
		goto fail;
	}
	if (pthread_cond_init(&nc->wake_cv, NULL) || pthread_cond_init(&nc->conn_cv, NULL)) {
		snprintf(err, cap, "netconf: cannot create a condition variable");
		rc = -ENOMEM;
		goto fail;
	}
	nc->sync_init = true;
	if (pipe2(nc->stop_fd, O_CLOEXEC) < 0) {
		rc = -errno;
		snprintf(err, cap, "netconf: pipe: %s", strerror(errno));
		goto fail;
	}

	if (o->unix_path) {
		snprintf(nc->unix_path, sizeof nc->unix_path, "%s", o->unix_path);
		rc = listen_unix(o->unix_path, &nc->unix_lfd);
		if (rc < 0) {
			nc->unix_path[0] = 0; /* not ours: leave it */
			snprintf(err, cap, "netconf: cannot listen on unix:%s: %s", o->unix_path,
				 strerror(-rc));
			goto fail;
		}
	}
	if (o->ssh_addr) {
		struct sockaddr_in sa;
		ssh_key hk = NULL;

		if (!o->hostkey_path || !o->authorized_keys) {
			snprintf(err, cap, "netconf: --netconf-ssh needs --netconf-hostkey and "
					   "--netconf-authorized-keys");
			rc = -EINVAL;
			goto fail;
		}
		if (ssh_pki_import_privkey_file(o->hostkey_path, NULL, NULL, NULL, &hk) != SSH_OK) {
			snprintf(err, cap, "netconf: host key %s: not a readable private key",
				 o->hostkey_path);
			rc = -EINVAL;
			goto fail;
		}
		ssh_key_free(hk);
		rc = load_authorized_keys(nc, o->authorized_keys, err, cap);
		if (rc < 0)
			goto fail;
		nc->hostkey_path = strdup(o->hostkey_path);
		if (!nc->hostkey_path) {
			rc = -ENOMEM;
			snprintf(err, cap, "out of memory");
			goto fail;
		}
		rc = listen_tcp(o->ssh_addr, &nc->ssh_lfd, &sa);
		if (rc < 0) {
			if (rc == -EINVAL)
				snprintf(err, cap, "netconf: bad --netconf-ssh '%s' (expected IP:PORT)",
					 o->ssh_addr);
			else
				snprintf(err, cap, "netconf: cannot listen on ssh %s: %s", o->ssh_addr,
					 strerror(-rc));
			goto fail;
		}
	}
	nc->ps = nc_ps_new();
	if (!nc->ps) {
		snprintf(err, cap, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	rc = pthread_create(&nc->thread, NULL, server_main, nc);
	if (rc) {
		snprintf(err, cap, "netconf: pthread_create: %s", strerror(rc));
		rc = -rc;
		goto fail;
	}
	nc->started = true;
	rc = pthread_create(&nc->listener, NULL, listen_main, nc);
	if (rc) {
		snprintf(err, cap, "netconf: pthread_create: %s", strerror(rc));
		rc = -rc;
		goto fail;
	}
	nc->listening = true;
	*out = nc;
	return 0;
fail:
	sw_netconf_stop(nc);
	return rc < 0 ? rc : -EINVAL;
}

void sw_netconf_stop(struct sw_netconf *nc)
{
	if (!nc)
		return;
	atomic_store(&nc->stop, true);
	if (nc->stop_fd[1] >= 0 && write(nc->stop_fd[1], "x", 1) < 0)
		sw_log(2, "netconf: stop pipe: %s", strerror(errno));
	if (nc->listening)
		pthread_join(nc->listener, NULL);
	if (nc->started) {
		pthread_mutex_lock(&nc->wake_mu);
		pthread_cond_broadcast(&nc->wake_cv);
		pthread_mutex_unlock(&nc->wake_mu);
		pthread_join(nc->thread, NULL);
	}
	if (nc->sync_init) {
		/* Every connection thread: its socket shut down, it ends within a poll period. */
		struct timespec until = realtime_in_ms(5000);

		pthread_mutex_lock(&nc->conn_mu);
		for (struct nc_conn *c = nc->conns; c; c = c->next)
			conn_kill_locked(c, "server stopping");
		while (nc->nthreads) {
			if (pthread_cond_timedwait(&nc->conn_cv, &nc->conn_mu, &until) == ETIMEDOUT)
				break;
			for (struct nc_conn *c = nc->conns; c; c = c->next)
				conn_kill_locked(c, "server stopping");
		}
		if (nc->nthreads)
			sw_log(0, "netconf: %u connection thread(s) did not stop", nc->nthreads);
		pthread_mutex_unlock(&nc->conn_mu);
		for (size_t i = 0; i < nc->nnewq; i++)
			nc_session_free(nc->newq[i], sess_free);
		nc->nnewq = 0;
	}
	if (nc->ps) {
		nc_ps_clear(nc->ps, 1, sess_free);
		nc_ps_free(nc->ps);
	}
	if (nc->server_init)
		nc_server_destroy();
	if (nc->ssh_lfd >= 0)
		close(nc->ssh_lfd);
	if (nc->unix_lfd >= 0)
		close(nc->unix_lfd);
	if (nc->unix_path[0])
		unlink(nc->unix_path);
	for (int i = 0; i < 2; i++)
		if (nc->stop_fd[i] >= 0)
			close(nc->stop_fd[i]);
	if (nc->sync_init && !nc->nthreads) {
		pthread_cond_destroy(&nc->wake_cv);
		pthread_mutex_destroy(&nc->wake_mu);
		pthread_cond_destroy(&nc->conn_cv);
		pthread_mutex_destroy(&nc->conn_mu);
	}
	for (size_t i = 0; i < nc->nauthkeys; i++)
		ssh_key_free(nc->authkeys[i]);
	free(nc->authkeys);
	free(nc->hostkey_path);
	if (nc->ly)
		ly_ctx_destroy(nc->ly);
	if (g_nc == nc)
		g_nc = NULL;
	if (!nc->nthreads)
		free(nc); /* else a stuck thread still points at it: leak rather than crash */
}
