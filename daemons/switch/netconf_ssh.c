/* inca-switch NETCONF server transports: SSH public-key authentication against the
 * authorized_keys list, one thread per connection handshake (bounded per source and in total,
 * with a deadline), the UNIX and SSH listeners, and the poll thread that runs the established
 * sessions (every RPC callback runs there). */
#include "netconf_int.h"

/* ---------------------------------------------------------------- SSH authentication */

/* Only keys listed in --netconf-authorized-keys; libssh verifies the signature. */
static bool key_authorised(const struct sw_netconf *nc, ssh_key key)
{
	for (size_t i = 0; i < nc->nauthkeys; i++)
		if (!ssh_key_cmp(key, nc->authkeys[i], SSH_KEY_CMP_PUBLIC))
			return true;
	return false;
}

int load_authorized_keys(struct sw_netconf *nc, const char *path, char *err, size_t cap)
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
struct timespec realtime_in_ms(long ms)
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
void conn_kill_locked(struct nc_conn *c, const char *why)
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
	sd->session = s;
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
void *listen_main(void *arg)
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
void *server_main(void *arg)
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
		if (!nc->sessions) {
			struct timespec ts = realtime_in_ms(NC_POLL_MS * 4);

			pthread_mutex_lock(&nc->wake_mu);
			if (!nc->nnewq && !atomic_load(&nc->stop))
				pthread_cond_timedwait(&nc->wake_cv, &nc->wake_mu, &ts);
			pthread_mutex_unlock(&nc->wake_mu);
			continue;
		}
		/* Wait for input here, so that the next message is looked at before libnetconf2
		 * reads it; then libnetconf2 serves one session without waiting. */
		nc_screen_poll(nc, NC_POLL_MS);
		r = nc_ps_poll(nc->ps, 0, &s);
		if (r & NC_PSPOLL_NOSESSIONS)
			continue; /* every session held */
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
	nc_screen_release_all(nc);
	return NULL;
}

