/* lib/ctl: the NETCONF client side of the control plane (libnetconf2 2.0.x, libyang 2.1):
 * connections over a UNIX socket or SSH with key authentication (host key checked against
 * known_hosts, never a prompt), and the conversions between struct ctl_tree / ctl_caps /
 * ctl_tree_stats and the inca-switch YANG data (yang/inca-switch@2026-11-27.yang). */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <libyang/libyang.h>
#include <libssh/libssh.h>
#include <nc_client.h>

#include "ctl_yang.h"

#define CTL_SEND_TIMEOUT_MS 5000
#define CTL_REPLY_TIMEOUT_MS 15000
#define CTL_FILTER(inner) "<inca-switch xmlns=\"" CTL_YANG_NS "\">" inner "</inca-switch>"

struct ctl_conn {
	struct nc_session *s;
	struct ly_ctx *ly;
	int fd;              /* our own UNIX socket (libnetconf2 does not close it), -1 none */
	unsigned timeout_ms; /* per request; 0 = CTL_SEND/REPLY_TIMEOUT_MS */
	bool broken;         /* a request failed in transport: the session is unusable */
	char err[1024];
};

/* libnetconf2 reports through one global print callback: keep the last error per thread so
 * ctl_conn_error() can say why a connect failed. The library itself never prints. */
static _Thread_local char nc_last_msg[1024];
static _Thread_local uint32_t ly_opts_tl;
static pthread_once_t client_once = PTHREAD_ONCE_INIT;

static void nc_print(const struct nc_session *s, NC_VERB_LEVEL level, const char *msg)
{
	(void)s;
	if (level == NC_VERB_ERROR)
		snprintf(nc_last_msg, sizeof nc_last_msg, "%s", msg);
}

static void client_init_once(void)
{
	nc_client_init();
	nc_verbosity(NC_VERB_ERROR);
	nc_set_print_clb_session(nc_print);
}

/* libyang: store errors, print nothing (thread-local setting). */
static void quiet_libyang(void)
{
	ly_opts_tl = LY_LOSTORE_LAST;
	ly_temp_log_options(&ly_opts_tl);
}

static int set_err(struct ctl_conn *c, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int set_err(struct ctl_conn *c, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof c->err, fmt, ap);
	va_end(ap);
	return rc;
}

bool ctl_conn_broken(const struct ctl_conn *c)
{
	return !c || c->broken;
}

const char *ctl_conn_error(const struct ctl_conn *c)
{
	/* NULL: why the last ctl_connect of this thread failed. */
	return c ? c->err : nc_last_msg[0] ? nc_last_msg : "no connection";
}

/* ---------------------------------------------------------------- connect */

/* "ssh://user@host:port" -> parts (user may be absent, port default 830). */
static int parse_ssh_target(const char *t, char *user, size_t ucap, char *host, size_t hcap,
			    uint16_t *port)
{
	const char *p = t + 6, *at = strchr(p, '@'), *colon;
	unsigned long v = 830;
	char *end;

	user[0] = 0;
	if (at) {
		if ((size_t)(at - p) >= ucap || at == p)
			return -EINVAL;
		memcpy(user, p, (size_t)(at - p));
		user[at - p] = 0;
		p = at + 1;
	}
	colon = strrchr(p, ':');
	if (colon) {
		v = strtoul(colon + 1, &end, 10);
		if (*end || !v || v > 65535)
			return -EINVAL;
	} else {
		colon = p + strlen(p);
	}
	if (colon == p || (size_t)(colon - p) >= hcap)
		return -EINVAL;
	memcpy(host, p, (size_t)(colon - p));
	host[colon - p] = 0;
	*port = (uint16_t)v;
	return 0;
}

/* SSH transport set up here with libssh rather than by nc_connect_ssh(): when the switch
 * refuses our key, libnetconf2 2.0.24 leaves the socket open, and the switch's NETCONF server
 * then waits for the authentication to time out (10 s) before serving anyone else. Here every
 * failure closes the connection at once. Public key only (no agent, no ssh config, no
 * password or keyboard-interactive prompt); the host key must be in known_hosts when given. */
static int ssh_open(struct ctl_conn *c, const char *target, const char *user, const char *host,
		    uint16_t port, const char *key_path, const char *known_hosts, long timeout_s,
		    ssh_session *out)
{
	ssh_session ss = ssh_new();
	ssh_key key = NULL;
	unsigned int uport = port;
	int verbosity = SSH_LOG_NOLOG, rc;
	bool no = false;

	if (!ss)
		return set_err(c, -ENOMEM, "out of memory");
	if (ssh_options_set(ss, SSH_OPTIONS_HOST, host) < 0 ||
	    ssh_options_set(ss, SSH_OPTIONS_PORT, &uport) < 0 ||
	    (user[0] && ssh_options_set(ss, SSH_OPTIONS_USER, user) < 0) ||
	    ssh_options_set(ss, SSH_OPTIONS_TIMEOUT, &timeout_s) < 0 ||
	    ssh_options_set(ss, SSH_OPTIONS_LOG_VERBOSITY, &verbosity) < 0 ||
	    ssh_options_set(ss, SSH_OPTIONS_PROCESS_CONFIG, &no) < 0 ||
	    (known_hosts && ssh_options_set(ss, SSH_OPTIONS_KNOWNHOSTS, known_hosts) < 0)) {
		rc = set_err(c, -EINVAL, "%s: bad ssh options: %s", target, ssh_get_error(ss));
		goto fail;
	}
	if (ssh_connect(ss) != SSH_OK) {
		rc = set_err(c, -ECONNREFUSED, "cannot connect to %s: %s", target, ssh_get_error(ss));
		goto fail;
	}
	if (known_hosts) {
		enum ssh_known_hosts_e st = ssh_session_is_known_server(ss);
		if (st != SSH_KNOWN_HOSTS_OK) {
			rc = set_err(c, -EPERM, "host key of %s %s in %s", target,
				     st == SSH_KNOWN_HOSTS_CHANGED ? "CHANGED" :
				     st == SSH_KNOWN_HOSTS_OTHER ? "has another type" : "not found",
				     known_hosts);
			goto fail;
		}
	}
	if (ssh_pki_import_privkey_file(key_path, NULL, NULL, NULL, &key) != SSH_OK) {
		rc = set_err(c, -EINVAL, "cannot read the private key %s", key_path);
		goto fail;
	}
	rc = ssh_userauth_publickey(ss, NULL, key);
	ssh_key_free(key);
	if (rc != SSH_AUTH_SUCCESS) {
		rc = set_err(c, -EACCES, "%s refused the key %s", target, key_path);
		goto fail;
	}
	*out = ss;
	return 0;
fail:
	ssh_disconnect(ss);
	ssh_free(ss);
	return rc;
}

/* UNIX socket opened here rather than by nc_connect_unix(): that one waits up to a minute
 * for the server's <hello> (libnetconf2's NC_CLIENT_HELLO_TIMEOUT), and a stopped switch's
 * socket still accepts connections into its backlog. The server sends its hello as soon as it
 * accepts, so waiting for the socket to become readable bounds the whole handshake. */
static int unix_open(struct ctl_conn *c, const char *target, unsigned timeout_ms)
{
	struct sockaddr_un sa;
	struct pollfd pfd;
	const char *path = target + 5;
	int fd, r;

	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sa.sun_path)
		return set_err(c, -EINVAL, "socket path too long: %s", path);
	memcpy(sa.sun_path, path, strlen(path));
	/* Non-blocking: a full backlog (a stopped server) fails at once instead of blocking. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return set_err(c, -errno, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		r = errno;
		close(fd);
		return set_err(c, r == EAGAIN ? -ETIMEDOUT : -ECONNREFUSED,
			       "cannot connect to %s: %s", target,
			       r == EAGAIN ? "not accepting connections" : strerror(r));
	}
	pfd.fd = fd;
	pfd.events = POLLIN;
	do
		r = poll(&pfd, 1, (int)timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		close(fd);
		return set_err(c, -ETIMEDOUT, "cannot connect to %s: no NETCONF hello within %u ms",
			       target, timeout_ms);
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		r = errno;
		close(fd);
		return set_err(c, -r, "fcntl: %s", strerror(r));
	}
	c->s = nc_connect_inout(fd, fd, c->ly);
	if (!c->s) {
		close(fd);
		return set_err(c, -ECONNREFUSED, "cannot connect to %s: %s", target,
			       nc_last_msg[0] ? nc_last_msg : "failed");
	}
	c->fd = fd;
	return 0;
}

int ctl_connect(const char *target, const char *key_path, const char *known_hosts,
		struct ctl_conn **out)
{
	return ctl_connect_timeout(target, key_path, known_hosts, 0, out);
}

int ctl_connect_timeout(const char *target, const char *key_path, const char *known_hosts,
			unsigned timeout_ms, struct ctl_conn **out)
{
	struct ctl_conn *c;
	int rc;

	if (!target || !out)
		return -EINVAL;
	*out = NULL;
	c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	c->fd = -1;
	c->timeout_ms = timeout_ms;
	pthread_once(&client_once, client_init_once);
	quiet_libyang();
	nc_last_msg[0] = 0;
	/* Our own context with the embedded modules: no schema download is needed. */
	if (ly_ctx_new(NULL, LY_CTX_NO_YANGLIBRARY | LY_CTX_DISABLE_SEARCHDIR_CWD, &c->ly) ||
	    ctl_yang_load(c->ly) < 0) {
		rc = set_err(c, -EINVAL, "cannot load the YANG modules");
		goto fail;
	}
	if (!strncmp(target, "unix:", 5)) {
		rc = unix_open(c, target, timeout_ms ? timeout_ms : CTL_REPLY_TIMEOUT_MS);
		if (rc < 0)
			goto fail;
	} else if (!strncmp(target, "ssh://", 6)) {
		char user[128], host[256];
		uint16_t port;
		ssh_session ss = NULL;

		if (parse_ssh_target(target, user, sizeof user, host, sizeof host, &port) < 0) {
			rc = set_err(c, -EINVAL, "bad target '%s' (expected ssh://user@host:port)", target);
			goto fail;
		}
		if (!key_path) {
			rc = set_err(c, -EINVAL, "ssh needs a private key");
			goto fail;
		}
		rc = ssh_open(c, target, user, host, port, key_path, known_hosts,
			      timeout_ms ? (timeout_ms + 999) / 1000 : 10, &ss);
		if (rc < 0)
			goto fail;
		/* Authenticated already: libnetconf2 only opens the netconf channel (and owns ss
		 * from here on, also on failure). */
		c->s = nc_connect_libssh(ss, c->ly);
		if (!c->s) {
			rc = set_err(c, -ECONNREFUSED, "cannot start NETCONF on %s: %s", target,
				     nc_last_msg[0] ? nc_last_msg : "failed");
			goto fail;
		}
	} else {
		rc = set_err(c, -EINVAL, "bad target '%s' (unix:PATH or ssh://user@host:port)", target);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	/* No connection to hang the message on: ctl_conn_error(NULL) returns it. */
	snprintf(nc_last_msg, sizeof nc_last_msg, "%s", c->err);
	ctl_disconnect(c);
	return rc;
}

void ctl_disconnect(struct ctl_conn *c)
{
	if (!c)
		return;
	if (c->s)
		nc_session_free(c->s, NULL);
	if (c->fd >= 0)
		close(c->fd);
	if (c->ly)
		ly_ctx_destroy(c->ly);
	free(c);
}

/* ---------------------------------------------------------------- RPC plumbing */

static const char *opaq_value(const struct lyd_node *n)
{
	return n->schema ? lyd_get_value(n) : ((const struct lyd_node_opaq *)n)->value;
}

static const char *node_name(const struct lyd_node *n)
{
	return n->schema ? n->schema->name : ((const struct lyd_node_opaq *)n)->name.name;
}

/* rpc-error in the reply envelope -> message and errno. */
static int reply_error(struct ctl_conn *c, const struct lyd_node *envp)
{
	for (const struct lyd_node *e = envp ? lyd_child(envp) : NULL; e; e = e->next) {
		const char *tag = "", *msg = "", *path = "";

		if (strcmp(node_name(e), "rpc-error"))
			continue;
		for (const struct lyd_node *f = lyd_child(e); f; f = f->next) {
			const char *n = node_name(f), *v = opaq_value(f);
			if (!v)
				continue;
			if (!strcmp(n, "error-tag"))
				tag = v;
			else if (!strcmp(n, "error-message"))
				msg = v;
			else if (!strcmp(n, "error-path"))
				path = v;
		}
		set_err(c, 0, "%s: %s%s%s", tag, msg, path[0] ? " at " : "", path);
		if (!strcmp(tag, "resource-denied"))
			return -ENOSPC;
		if (!strcmp(tag, "data-missing"))
			return -ENOENT;
		if (!strcmp(tag, "data-exists"))
			return -EEXIST;
		if (!strcmp(tag, "lock-denied") || !strcmp(tag, "in-use"))
			return -EBUSY;
		if (!strcmp(tag, "operation-not-supported"))
			return -ENOTSUP;
		if (!strcmp(tag, "access-denied"))
			return -EACCES;
		if (!strcmp(tag, "operation-failed"))
			return -EIO;
		return -EINVAL;
	}
	return 0;
}

/* Send rpc, wait for the reply. With data_out, the reply's <data> is parsed as inca-switch
 * data (NULL when empty). */
static int do_rpc(struct ctl_conn *c, struct nc_rpc *rpc, struct lyd_node **data_out)
{
	struct lyd_node *envp = NULL, *op = NULL, *d = NULL;
	uint64_t msgid;
	NC_MSG_TYPE m;
	int rc = 0;

	if (data_out)
		*data_out = NULL;
	if (!rpc)
		return set_err(c, -ENOMEM, "cannot build the RPC");
	quiet_libyang();
	if (c->broken) {
		nc_rpc_free(rpc);
		return set_err(c, -ENOTCONN, "session broken by an earlier failure");
	}
	m = nc_send_rpc(c->s, rpc, c->timeout_ms ? (int)c->timeout_ms : CTL_SEND_TIMEOUT_MS,
			&msgid);
	if (m != NC_MSG_RPC) {
		nc_rpc_free(rpc);
		c->broken = true;
		return set_err(c, m == NC_MSG_WOULDBLOCK ? -ETIMEDOUT : -EIO, "cannot send: %s",
			       nc_last_msg[0] ? nc_last_msg : "session broken");
	}
	do {
		lyd_free_all(envp);
		lyd_free_all(op);
		envp = op = NULL;
		m = nc_recv_reply(c->s, rpc, msgid,
				  c->timeout_ms ? (int)c->timeout_ms : CTL_REPLY_TIMEOUT_MS, &envp, &op);
	} while (m == NC_MSG_NOTIF || m == NC_MSG_REPLY_ERR_MSGID);
	nc_rpc_free(rpc);
	if (m != NC_MSG_REPLY) {
		/* A reply that comes later would answer the next request: never reuse the session. */
		c->broken = true;
		rc = set_err(c, m == NC_MSG_WOULDBLOCK ? -ETIMEDOUT : -EIO, "no valid reply: %s",
			     nc_last_msg[0] ? nc_last_msg : "session broken");
		goto out;
	}
	rc = reply_error(c, envp);
	if (rc < 0 || !data_out)
		goto out;
	if (op && !lyd_find_path(op, "data", 1, &d) && d) {
		char *xml = NULL;
		if (lyd_any_value_str(d, &xml)) {
			rc = set_err(c, -EIO, "cannot read the reply data");
			goto out;
		}
		if (xml && xml[0] &&
		    lyd_parse_data_mem(c->ly, xml, LYD_XML, LYD_PARSE_ONLY, 0, data_out)) {
			const struct ly_err_item *ei = ly_err_last(c->ly);
			rc = set_err(c, -EIO, "bad reply data: %s", ei && ei->msg ? ei->msg : "?");
		}
		free(xml);
	}
out:
	lyd_free_all(envp);
	lyd_free_all(op);
	return rc;
}

/* ---------------------------------------------------------------- YANG -> structs */

static const char *leaf(const struct lyd_node *parent, const char *path)
{
	struct lyd_node *n = NULL;

	if (!parent || lyd_find_path(parent, path, 0, &n) || !n)
		return NULL;
	return lyd_get_value(n);
}

static uint64_t leaf_u64(const struct lyd_node *parent, const char *path, uint64_t dflt)
{
	const char *v = leaf(parent, path);

	return v ? strtoull(v, NULL, 10) : dflt;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

/* Every child named `name` of parent (leaf-list) -> mask of the codes parse gives them
 * (wire_dtype_parse, wire_op_parse); unknown names add nothing. */
static uint32_t leaf_list_mask(const struct lyd_node *parent, const char *name,
			       int (*parse)(const char *))
{
	uint32_t m = 0;

	for (const struct lyd_node *c = lyd_child(parent); c; c = c->next) {
		if (!c->schema || strcmp(c->schema->name, name))
			continue;
		int code = parse(lyd_get_value(c));
		if (code >= 0)
			m |= 1u << code;
	}
	return m;
}

static int tree_from_yang(const struct lyd_node *tn, struct ctl_tree *t)
{
	const char *role = leaf(tn, "role");
	struct lyd_node *p = NULL;

	memset(t, 0, sizeof *t);
	t->id = (uint16_t)leaf_u64(tn, "id", 0);
	t->key = (uint32_t)leaf_u64(tn, "key", 0);
	/* the default QPN of this tree's switches, for its own, its parent's and its children's */
	uint32_t sw_qpn = wire_qpn_default(WIRE_QPN_SWITCH, t->id);
	t->qpn = (uint32_t)leaf_u64(tn, "qpn", sw_qpn);
	t->slots = (uint16_t)leaf_u64(tn, "slots", 256);
	t->slot_bytes = (uint32_t)leaf_u64(tn, "slot-bytes", 4096);
	t->bsl_bits = (unsigned)leaf_u64(tn, "bsl", 64);
	t->si = (uint8_t)leaf_u64(tn, "si", 0);
	t->root = !role || !strcmp(role, "root");
	t->bfr_id = (uint16_t)leaf_u64(tn, "bfr-id", 0);
	if (!lyd_find_path(tn, "parent", 0, &p) && p) {
		t->has_parent = true;
		copy_str(t->parent_addr, sizeof t->parent_addr, leaf(p, "address"));
		t->parent_qpn = (uint32_t)leaf_u64(p, "qpn", sw_qpn);
	}
	t->deterministic = leaf(tn, "deterministic") && !strcmp(leaf(tn, "deterministic"), "true");
	t->auth = leaf(tn, "auth") && !strcmp(leaf(tn, "auth"), "enabled");
	t->auth_key_id = (uint32_t)leaf_u64(tn, "auth-key-id", 0);
	t->dtype_mask = leaf_list_mask(tn, "data-type", wire_dtype_parse);
	t->op_mask = leaf_list_mask(tn, "operation", wire_op_parse);
	for (const struct lyd_node *c = lyd_child(tn); c; c = c->next) {
		if (!c->schema)
			continue;
		if (!strcmp(c->schema->name, "member")) {
			struct ctl_member *nm = realloc(t->members, (t->nmembers + 1) * sizeof *nm);
			struct ctl_member *m;
			if (!nm)
				goto oom;
			t->members = nm;
			m = &t->members[t->nmembers++];
			memset(m, 0, sizeof *m);
			m->bfr_id = (uint16_t)leaf_u64(c, "bfr-id", 0);
			copy_str(m->addr, sizeof m->addr, leaf(c, "address"));
			uint32_t dflt = wire_qpn_default(WIRE_QPN_MEMBER, m->bfr_id);
			m->qpn = (uint32_t)leaf_u64(c, "qpn", dflt);
		} else if (!strcmp(c->schema->name, "child")) {
			struct ctl_child *nch = realloc(t->children, (t->nchildren + 1) * sizeof *nch);
			struct ctl_child *ch;
			if (!nch)
				goto oom;
			t->children = nch;
			ch = &t->children[t->nchildren++];
			memset(ch, 0, sizeof *ch);
			copy_str(ch->addr, sizeof ch->addr, leaf(c, "address"));
			ch->qpn = (uint32_t)leaf_u64(c, "qpn", sw_qpn);
			for (const struct lyd_node *b = lyd_child(c); b; b = b->next) {
				uint16_t *nb;
				if (!b->schema || strcmp(b->schema->name, "bfr-id"))
					continue;
				nb = realloc(ch->bfr_ids, (ch->nbfr + 1) * sizeof *nb);
				if (!nb)
					goto oom;
				ch->bfr_ids = nb;
				ch->bfr_ids[ch->nbfr++] = (uint16_t)strtoul(lyd_get_value(b), NULL, 10);
			}
		}
	}
	return 0;
oom:
	ctl_tree_free(t);
	return -ENOMEM;
}

/* ---------------------------------------------------------------- API */

int ctl_get_caps(struct ctl_conn *c, struct ctl_caps *out)
{
	struct lyd_node *data = NULL, *caps = NULL, *links = NULL;
	int rc;

	if (!c || !out)
		return -EINVAL;
	memset(out, 0, sizeof *out);
	rc = do_rpc(c, nc_rpc_get(CTL_FILTER("<capabilities/><links/>"), NC_WD_UNKNOWN,
				  NC_PARAMTYPE_CONST),
		    &data);
	if (rc < 0)
		return rc;
	if (!data || lyd_find_path(data, "capabilities", 0, &caps) || !caps) {
		lyd_free_all(data);
		return set_err(c, -EIO, "reply has no capabilities");
	}
	copy_str(out->name, sizeof out->name, leaf(caps, "name"));
	copy_str(out->data_addr, sizeof out->data_addr, leaf(caps, "data-address"));
	copy_str(out->role_hint, sizeof out->role_hint, leaf(caps, "role-hint"));
	out->max_trees = (uint32_t)leaf_u64(caps, "max-trees", 0);
	out->used_trees = (uint32_t)leaf_u64(caps, "used-trees", 0);
	out->max_slots = (uint32_t)leaf_u64(caps, "max-slots", 0);
	out->used_slots = (uint32_t)leaf_u64(caps, "used-slots", 0);
	out->max_slot_bytes = (uint32_t)leaf_u64(caps, "max-slot-bytes", 0);
	out->max_bsl_bits = (unsigned)leaf_u64(caps, "max-bsl", 0);
	out->dtype_mask = leaf_list_mask(caps, "data-type", wire_dtype_parse);
	out->op_mask = leaf_list_mask(caps, "operation", wire_op_parse);
	if (!lyd_find_path(data, "links", 0, &links) && links) {
		for (const struct lyd_node *l = lyd_child(links); l; l = l->next) {
			struct ctl_link *nl, *k;
			const char *st;

			if (!l->schema || strcmp(l->schema->name, "link"))
				continue;
			nl = realloc(out->links, (out->nlinks + 1) * sizeof *nl);
			if (!nl) {
				ctl_caps_free(out);
				lyd_free_all(data);
				return -ENOMEM;
			}
			out->links = nl;
			k = &out->links[out->nlinks++];
			memset(k, 0, sizeof *k);
			copy_str(k->port, sizeof k->port, leaf(l, "port"));
			copy_str(k->peer, sizeof k->peer, leaf(l, "peer"));
			copy_str(k->peer_addr, sizeof k->peer_addr, leaf(l, "peer-address"));
			k->speed_bps = leaf_u64(l, "speed", 0);
			st = leaf(l, "oper-status");
			k->up = !st || !strcmp(st, "up");
		}
	}
	lyd_free_all(data);
	return 0;
}

int ctl_get_trees(struct ctl_conn *c, struct ctl_tree **out, size_t *n)
{
	struct lyd_node *data = NULL, *trees = NULL;
	struct ctl_tree *v = NULL;
	size_t cnt = 0;
	int rc;

	if (!c || !out || !n)
		return -EINVAL;
	*out = NULL;
	*n = 0;
	rc = do_rpc(c, nc_rpc_getconfig(NC_DATASTORE_RUNNING, CTL_FILTER("<trees/>"),
					NC_WD_UNKNOWN, NC_PARAMTYPE_CONST),
		    &data);
	if (rc < 0)
		return rc;
	if (data && !lyd_find_path(data, "trees", 0, &trees) && trees) {
		for (const struct lyd_node *t = lyd_child(trees); t; t = t->next) {
			struct ctl_tree *nv;
			if (!t->schema || strcmp(t->schema->name, "tree"))
				continue;
			nv = realloc(v, (cnt + 1) * sizeof *nv);
			if (!nv || tree_from_yang(t, &nv[cnt]) < 0) {
				if (nv)
					v = nv;
				for (size_t i = 0; i < cnt; i++)
					ctl_tree_free(&v[i]);
				free(v);
				lyd_free_all(data);
				return -ENOMEM;
			}
			v = nv;
			cnt++;
		}
	}
	lyd_free_all(data);
	*out = v;
	*n = cnt;
	return 0;
}

/* struct ctl_tree -> <tree> XML with operation `op` (text built here: values are numbers,
 * enumerations and addresses checked before use). */
static int tree_to_xml(struct ctl_conn *c, const struct ctl_tree *t, FILE *f)
{
	fprintf(f, "<tree xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\" "
		   "nc:operation=\"replace\">");
	fprintf(f, "<id>%u</id><key>%u</key>", t->id, t->key);
	if (t->qpn)
		fprintf(f, "<qpn>%u</qpn>", t->qpn);
	if (t->slots)
		fprintf(f, "<slots>%u</slots>", t->slots);
	if (t->slot_bytes)
		fprintf(f, "<slot-bytes>%u</slot-bytes>", t->slot_bytes);
	if (t->bsl_bits)
		fprintf(f, "<bsl>%u</bsl>", t->bsl_bits);
	fprintf(f, "<si>%u</si><role>%s</role><bfr-id>%u</bfr-id>", t->si,
		t->root ? "root" : "leaf", t->bfr_id);
	if (t->has_parent) {
		if (strpbrk(t->parent_addr, "<>&\"'"))
			return set_err(c, -EINVAL, "bad parent address");
		fprintf(f, "<parent><address>%s</address>", t->parent_addr);
		if (t->parent_qpn)
			fprintf(f, "<qpn>%u</qpn>", t->parent_qpn);
		fprintf(f, "</parent>");
	}
	fprintf(f, "<deterministic>%s</deterministic>", t->deterministic ? "true" : "false");
	if (t->auth) {
		if (!t->auth_key_id)
			return set_err(c, -EINVAL, "tree %u: auth key without a key id", t->id);
		fprintf(f, "<auth>enabled</auth><auth-key>");
		for (size_t i = 0; i < WIRE_AUTH_KEY_LEN; i++)
			fprintf(f, "%02x", t->auth_key[i]);
		fprintf(f, "</auth-key><auth-key-id>%u</auth-key-id>", t->auth_key_id);
	} else {
		fprintf(f, "<auth>disabled</auth>");
	}
	for (unsigned i = 0; i < WIRE_DTYPE_COUNT; i++)
		if (t->dtype_mask & (1u << i))
			fprintf(f, "<data-type>%s</data-type>", wire_dtype_name(i));
	for (unsigned i = 0; i < WIRE_OP_COUNT; i++)
		if (t->op_mask & (1u << i))
			fprintf(f, "<operation>%s</operation>", wire_op_name(i));
	for (size_t i = 0; i < t->nmembers; i++) {
		if (strpbrk(t->members[i].addr, "<>&\"'"))
			return set_err(c, -EINVAL, "bad member address");
		fprintf(f, "<member><bfr-id>%u</bfr-id><address>%s</address>",
			t->members[i].bfr_id, t->members[i].addr);
		if (t->members[i].qpn)
			fprintf(f, "<qpn>%u</qpn>", t->members[i].qpn);
		fprintf(f, "</member>");
	}
	for (size_t i = 0; i < t->nchildren; i++) {
		if (strpbrk(t->children[i].addr, "<>&\"'"))
			return set_err(c, -EINVAL, "bad child address");
		fprintf(f, "<child><address>%s</address>", t->children[i].addr);
		if (t->children[i].qpn)
			fprintf(f, "<qpn>%u</qpn>", t->children[i].qpn);
		for (size_t j = 0; j < t->children[i].nbfr; j++)
			fprintf(f, "<bfr-id>%u</bfr-id>", t->children[i].bfr_ids[j]);
		fprintf(f, "</child>");
	}
	fprintf(f, "</tree>");
	return 0;
}

static int edit(struct ctl_conn *c, const char *content)
{
	return do_rpc(c, nc_rpc_edit(NC_DATASTORE_RUNNING, NC_RPC_EDIT_DFLTOP_MERGE,
				     NC_RPC_EDIT_TESTOPT_UNKNOWN, NC_RPC_EDIT_ERROPT_UNKNOWN, content,
				     NC_PARAMTYPE_CONST),
		      NULL);
}

int ctl_put_tree(struct ctl_conn *c, const struct ctl_tree *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	if (!c || !t)
		return -EINVAL;
	f = open_memstream(&buf, &len);
	if (!f)
		return -ENOMEM;
	fprintf(f, "<inca-switch xmlns=\"%s\"><trees>", CTL_YANG_NS);
	rc = tree_to_xml(c, t, f);
	fprintf(f, "</trees></inca-switch>");
	if (fclose(f) != 0) {
		free(buf);
		return -ENOMEM;
	}
	if (rc == 0)
		rc = edit(c, buf);
	explicit_bzero(buf, len); /* it holds the group key */
	free(buf);
	return rc;
}

int ctl_delete_tree(struct ctl_conn *c, uint16_t tree_id)
{
	char buf[512];

	if (!c)
		return -EINVAL;
	snprintf(buf, sizeof buf,
		 "<inca-switch xmlns=\"%s\"><trees><tree "
		 "xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\" nc:operation=\"delete\">"
		 "<id>%u</id></tree></trees></inca-switch>",
		 CTL_YANG_NS, tree_id);
	return edit(c, buf);
}

int ctl_get_tree_stats(struct ctl_conn *c, struct ctl_tree_stats **out, size_t *n)
{
	struct lyd_node *data = NULL, *st = NULL;
	struct ctl_tree_stats *v = NULL;
	size_t cnt = 0;
	int rc;

	if (!c || !out || !n)
		return -EINVAL;
	*out = NULL;
	*n = 0;
	rc = do_rpc(c, nc_rpc_get(CTL_FILTER("<statistics><tree/></statistics>"), NC_WD_UNKNOWN,
				  NC_PARAMTYPE_CONST),
		    &data);
	if (rc < 0)
		return rc;
	if (data && !lyd_find_path(data, "statistics", 0, &st) && st) {
		for (const struct lyd_node *t = lyd_child(st); t; t = t->next) {
			struct ctl_tree_stats *nv, *s;
			if (!t->schema || strcmp(t->schema->name, "tree"))
				continue;
			nv = realloc(v, (cnt + 1) * sizeof *nv);
			if (!nv) {
				free(v);
				lyd_free_all(data);
				return -ENOMEM;
			}
			v = nv;
			s = &v[cnt++];
			memset(s, 0, sizeof *s);
			s->id = (uint16_t)leaf_u64(t, "id", 0);
			s->rx_pkts = leaf_u64(t, "rx-pkts", 0);
			s->tx_pkts = leaf_u64(t, "tx-pkts", 0);
			s->rx_bytes = leaf_u64(t, "rx-bytes", 0);
			s->tx_bytes = leaf_u64(t, "tx-bytes", 0);
			s->aggregations = leaf_u64(t, "aggregations", 0);
			s->duplicates = leaf_u64(t, "duplicates", 0);
			s->results_resent = leaf_u64(t, "results-resent", 0);
			s->drops = leaf_u64(t, "drops", 0);
		}
	}
	lyd_free_all(data);
	*out = v;
	*n = cnt;
	return 0;
}
