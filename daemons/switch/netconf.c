/* inca-switch NETCONF server (start / stop; the other parts are in netconf_ssh.c,
 * netconf_screen.c, netconf_ops.c and netconf_state.c): its own listeners (UNIX socket; TCP with SSH done here with
 * libssh, public-key authentication only), one thread per connection handshake with limits and
 * a deadline for unauthenticated connections, libnetconf2 2.0.x sessions on the accepted
 * transports (SSH channels relayed through a socketpair) polled by one thread, and the
 * datastore behind them: the running config is the data plane's current tree set plus the
 * management addresses; state is built on demand from the capabilities, links, statistics and
 * ietf-netconf-monitoring. edit-config is applied to a copy, validated with libyang, decoded
 * into the tree model and checked by its rules (the same as a config file's), checked against
 * max_trees / max_slots, and only then published; <validate> runs the same checks. */
#include "netconf_int.h"

struct sw_netconf *g_nc; /* netconf_int.h */

/* Session data destructor (nc_session_free, nc_ps_clear): closes the session's descriptor. */
void sess_free(void *data)
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
	free(nc->screen_pfd);
	free(nc->screen_who);
	if (nc->ly)
		ly_ctx_destroy(nc->ly);
	if (g_nc == nc)
		g_nc = NULL;
	if (!nc->nthreads)
		free(nc); /* else a stuck thread still points at it: leak rather than crash */
}

