/* libinca host-path bootstrap: TCP rendezvous at rank 0 (bootstrap_addr) to exchange every
 * rank's listener, or the caller's table of peer handles (external bootstrap), then a TCP ring (connect to rank+1, accept from rank-1) and a full mesh for
 * host_coll.c (connect to every lower rank, accept every higher one). Also the deadline-bounded
 * nonblocking TCP helpers the host path uses. Nothing here touches the data plane. */
#include "client/client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sys/random.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BOOT_MAGIC 0x494e4342u /* "INCB" */
#define RING_MAGIC 0x494e4352u /* "INCR" */
#define MESH_MAGIC 0x494e434du /* "INCM" */
#define PEER_MAGIC 0x494e4350u /* "INCP" */
#define BOOT_VERSION 1u
#define HELLO_LEN 24 /* bootstrap, ring and mesh hellos alike */
#define TABLE_HDR_LEN 16
#define TABLE_ENT_LEN 8
/* Accepted connections that may wait for their hello at once, beyond those the job itself
 * opens (struct hello_wait); past that the oldest is dropped. */
#define PEND_SPARE 64
#define TCP_BUF_BYTES (4 << 20)

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

int client_poll_one(int fd, short events, uint64_t deadline_ns)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		uint64_t now = util_now_ns();
		int rc, ms;

		if (now >= deadline_ns)
			return -ETIMEDOUT;
		ms = (int)min_u64((deadline_ns - now + 999999) / 1000000, INT_MAX);
		rc = poll(&p, 1, ms);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -errno;
		if (rc > 0)
			return p.revents;
	}
}

int client_wait(struct pollfd *pf, nfds_t n, uint64_t timeout_ns, uint64_t spin_ns)
{
	const struct timespec zero = { 0, 0 };
	int rc;

	/* A sleeping waiter pays a wakeup per answer (tens of microseconds on a virtual machine
	 * whose idle vCPU halts); a short spin catches answers that come within a round trip. */
	if (spin_ns && timeout_ns) {
		uint64_t until = util_now_ns() + (spin_ns < timeout_ns ? spin_ns : timeout_ns);
		for (;;) {
			rc = ppoll(pf, n, &zero, NULL);
			if (rc != 0)
				return rc < 0 ? (errno == EINTR ? 0 : -errno) : rc;
			uint64_t now = util_now_ns();
			if (now >= until) {
				uint64_t spent = spin_ns < timeout_ns ? spin_ns : timeout_ns;
				timeout_ns -= spent;
				break;
			}
			sched_yield(); /* other ranks or the switch may share this CPU */
		}
		if (!timeout_ns)
			return 0;
	}
	struct timespec ts = { .tv_sec = (time_t)(timeout_ns / 1000000000ull),
			       .tv_nsec = (long)(timeout_ns % 1000000000ull) };
	rc = ppoll(pf, n, &ts, NULL);
	return rc < 0 ? (errno == EINTR ? 0 : -errno) : rc;
}

int client_tcp_send_all(int fd, const void *buf, size_t len, uint64_t deadline_ns)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int rc = client_poll_one(fd, POLLOUT, deadline_ns);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int client_tcp_recv_all(int fd, void *buf, size_t len, uint64_t deadline_ns)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int rc = client_poll_one(fd, POLLIN, deadline_ns);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void tcp_tune(int fd)
{
	int one = 1, buf = TCP_BUF_BYTES;

	/* Best effort: the kernel caps the buffers at rmem_max / wmem_max. Set before
	 * listen/connect so the window scale is negotiated for them. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}

static int tcp_listen(const struct sockaddr_in *sa, int backlog, int *out)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	tcp_tune(fd);
	if (bind(fd, (const struct sockaddr *)sa, sizeof *sa) < 0 || listen(fd, backlog) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

static void sleep_until_or(uint64_t deadline_ns, uint64_t max_ns)
{
	uint64_t now = util_now_ns(), d = deadline_ns > now ? deadline_ns - now : 0;
	struct timespec ts;

	d = min_u64(d, max_ns);
	ts.tv_sec = (time_t)(d / 1000000000ull);
	ts.tv_nsec = (long)(d % 1000000000ull);
	nanosleep(&ts, NULL);
}

/* Connect from src_ip to sa, retrying refusals (the peer may not listen yet) until the deadline. */
static int tcp_connect(struct in_addr src_ip, const struct sockaddr_in *sa, uint64_t deadline_ns, int *out)
{
	for (;;) {
		struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr = src_ip };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err = 0;
		socklen_t el = sizeof err;

		if (fd < 0)
			return -errno;
		tcp_tune(fd);
		if (bind(fd, (struct sockaddr *)&src, sizeof src) < 0) {
			err = errno;
			close(fd);
			return -err;
		}
		if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0) {
			*out = fd;
			return 0;
		}
		err = errno;
		if (err == EINPROGRESS) {
			int rc = client_poll_one(fd, POLLOUT, deadline_ns);
			if (rc < 0) {
				close(fd);
				return rc;
			}
			err = 0;
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
				err = errno;
			if (err == 0) {
				*out = fd;
				return 0;
			}
		}
		close(fd);
		if (err != ECONNREFUSED && err != ECONNRESET && err != ETIMEDOUT &&
		    err != EHOSTUNREACH && err != ENETUNREACH && err != EAGAIN)
			return -err;
		if (util_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		sleep_until_or(deadline_ns, 20ull * 1000 * 1000);
	}
}

/* Connections accepted on one listener whose fixed-size hello has not fully arrived. They are
 * all polled together until the caller's deadline, so a hello that TCP has to retransmit
 * (backed-off RTOs on a lossy link add up to seconds) keeps its connection, and a stranger
 * that connects and stays silent blocks nobody. */
struct hello_wait {
	int lfd, n, cap;
	struct pending {
		int fd;
		bool ready; /* just accepted, or poll saw it readable */
		size_t got;
		uint8_t buf[HELLO_LEN];
	} *p;
	struct pollfd *pf; /* cap + 1: the listener, then p[] */
};

/* Room for expected connections (the job's ranks) plus PEND_SPARE strangers. */
static int hw_init(struct hello_wait *w, int expected)
{
	memset(w, 0, sizeof *w);
	w->lfd = -1;
	w->cap = expected + PEND_SPARE;
	w->p = calloc((size_t)w->cap, sizeof *w->p);
	w->pf = calloc((size_t)w->cap + 1, sizeof *w->pf);
	return w->p && w->pf ? 0 : -ENOMEM;
}

static void hw_drop(struct hello_wait *w, int i)
{
	close(w->p[i].fd);
	w->n--;
	memmove(&w->p[i], &w->p[i + 1], sizeof w->p[0] * (size_t)(w->n - i));
}

/* Close everything still waiting and the listener. */
static void hw_close(struct hello_wait *w)
{
	while (w->n > 0)
		hw_drop(w, w->n - 1);
	if (w->lfd >= 0)
		close(w->lfd);
	w->lfd = -1;
	free(w->p);
	free(w->pf);
	w->p = NULL;
	w->pf = NULL;
}

/* Accept everything queued on the listener (nonblocking). */
static int hw_accept(struct hello_wait *w)
{
	for (;;) {
		int fd = accept4(w->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (w->n == w->cap)
			hw_drop(w, 0); /* the oldest silent one gives way */
		w->p[w->n].fd = fd;
		w->p[w->n].ready = true;
		w->p[w->n].got = 0;
		w->n++;
	}
}

/* The next complete hello (HELLO_LEN bytes) from any connection: 0 with *fd (now the caller's)
 * and h filled, or -ETIMEDOUT at the deadline. Connections that close early are dropped. */
static int hw_next(struct hello_wait *w, uint64_t deadline_ns, int *fd, uint8_t h[HELLO_LEN])
{
	for (;;) {
		struct pollfd *pf = w->pf;
		uint64_t now = util_now_ns();
		int rc;

		for (int i = 0; i < w->n; i++) {
			if (!w->p[i].ready)
				continue;
			w->p[i].ready = false;
			ssize_t k = recv(w->p[i].fd, w->p[i].buf + w->p[i].got,
					 HELLO_LEN - w->p[i].got, MSG_DONTWAIT);
			if (k > 0)
				w->p[i].got += (size_t)k;
			if (w->p[i].got == HELLO_LEN) {
				*fd = w->p[i].fd;
				memcpy(h, w->p[i].buf, HELLO_LEN);
				w->n--;
				memmove(&w->p[i], &w->p[i + 1], sizeof w->p[0] * (size_t)(w->n - i));
				return 0;
			}
			if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
				       errno != EINTR)) {
				hw_drop(w, i--);
			}
		}
		if (now >= deadline_ns)
			return -ETIMEDOUT;
		pf[0].fd = w->lfd;
		pf[0].events = POLLIN;
		for (int i = 0; i < w->n; i++) {
			pf[i + 1].fd = w->p[i].fd;
			pf[i + 1].events = POLLIN;
		}
		rc = poll(pf, (nfds_t)w->n + 1, (int)min_u64((deadline_ns - now + 999999) / 1000000, INT_MAX));
		if (rc < 0 && errno != EINTR)
			return -errno;
		for (int i = 0; rc > 0 && i < w->n; i++)
			w->p[i].ready = pf[i + 1].revents != 0;
		if (rc > 0 && (pf[0].revents & POLLIN)) {
			rc = hw_accept(w);
			if (rc < 0)
				return rc;
		}
	}
}

/* Rank 0: collect every other rank's hello, then send the table back to all. */
static int boot_root(struct inca_comm *c, uint8_t *table, uint64_t deadline_ns)
{
	const struct client_cfg *cfg = &c->cfg;
	int n = cfg->size, got = 1, rc;
	int *conns = malloc(sizeof(int) * (size_t)n);
	struct hello_wait w;

	rc = hw_init(&w, n);
	if (!conns || rc < 0) {
		free(conns);
		hw_close(&w);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++)
		conns[i] = -1;
	rc = tcp_listen(&cfg->bootstrap_sa, n < 1024 ? n + 16 : 1024, &w.lfd);
	if (rc < 0)
		goto out;
	while (got < n) {
		uint8_t h[HELLO_LEN];
		int fd;
		uint32_t r;

		rc = hw_next(&w, deadline_ns, &fd, h);
		if (rc < 0)
			goto out;
		r = get32(h + 12);
		if (get32(h) != BOOT_MAGIC || get32(h + 4) != BOOT_VERSION ||
		    get32(h + 8) != (uint32_t)n || r == 0 || r >= (uint32_t)n || conns[r] >= 0) {
			client_log(cfg, 1, "bootstrap: rejected a connection (rank %u)", (unsigned)r);
			close(fd);
			continue;
		}
		conns[r] = fd;
		memcpy(table + TABLE_HDR_LEN + (size_t)r * TABLE_ENT_LEN, h + 16, TABLE_ENT_LEN);
		got++;
	}
	for (int i = 1; i < n; i++) {
		rc = client_tcp_send_all(conns[i], table, TABLE_HDR_LEN + (size_t)n * TABLE_ENT_LEN,
					 deadline_ns);
		if (rc < 0)
			goto out;
	}
	rc = 0;
out:
	for (int i = 0; i < n; i++)
		if (conns[i] >= 0)
			close(conns[i]);
	hw_close(&w);
	free(conns);
	return rc;
}

/* Other ranks: register with rank 0 and receive the table. */
static int boot_leaf(struct inca_comm *c, const uint8_t own_ent[TABLE_ENT_LEN], uint8_t *table,
		     uint64_t deadline_ns)
{
	const struct client_cfg *cfg = &c->cfg;
	uint8_t h[HELLO_LEN] = { 0 };
	int fd, rc;

	rc = tcp_connect(cfg->host_ip, &cfg->bootstrap_sa, deadline_ns, &fd);
	if (rc < 0)
		return rc;
	put32(h, BOOT_MAGIC);
	put32(h + 4, BOOT_VERSION);
	put32(h + 8, (uint32_t)cfg->size);
	put32(h + 12, (uint32_t)cfg->rank);
	memcpy(h + 16, own_ent, TABLE_ENT_LEN);
	rc = client_tcp_send_all(fd, h, sizeof h, deadline_ns);
	if (rc == 0)
		rc = client_tcp_recv_all(fd, table, TABLE_HDR_LEN + (size_t)cfg->size * TABLE_ENT_LEN,
					 deadline_ns);
	close(fd);
	if (rc == -ECONNRESET)
		rc = -ETIMEDOUT; /* rank 0 gave up waiting for someone */
	if (rc < 0)
		return rc;
	if (get32(table) != BOOT_MAGIC || get32(table + 4) != (uint32_t)cfg->size)
		return -EPROTO;
	return 0;
}

/* ---- external bootstrap --------------------------------------------------------------------
 * A peer handle: magic (4), version (4), table entry (8: IPv4 and port in network order, 2
 * zero bytes), a random nonce (8), 8 zero bytes. */
struct inca_peer_listener {
	int fd;
	uint8_t handle[INCA_PEER_HANDLE_BYTES];
};

_Static_assert(INCA_PEER_HANDLE_BYTES >= 8 + TABLE_ENT_LEN + 8, "peer handle layout");

int inca_peer_listen(const char *host_ip, struct inca_peer_listener **out,
		     uint8_t handle[INCA_PEER_HANDLE_BYTES])
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof sa;
	struct inca_peer_listener *l;
	int rc;

	if (!out || !handle)
		return -EINVAL;
	*out = NULL;
	if (!host_ip)
		host_ip = "127.0.0.1";
	/* a concrete address: the peers connect to it */
	if (strchr(host_ip, ':') || util_parse_addr(host_ip, 0, &sa) < 0 ||
	    sa.sin_addr.s_addr == INADDR_ANY)
		return -EINVAL;
	l = calloc(1, sizeof *l);
	if (!l)
		return -ENOMEM;
	rc = tcp_listen(&sa, SOMAXCONN, &l->fd);
	if (rc < 0) {
		free(l);
		return rc;
	}
	if (getsockname(l->fd, (struct sockaddr *)&sa, &sl) < 0) {
		rc = -errno;
		inca_peer_listener_close(l);
		return rc;
	}
	put32(l->handle, PEER_MAGIC);
	put32(l->handle + 4, BOOT_VERSION);
	memcpy(l->handle + 8, &sa.sin_addr.s_addr, 4);
	memcpy(l->handle + 12, &sa.sin_port, 2);
	if (getrandom(l->handle + 16, 8, 0) != 8) {
		inca_peer_listener_close(l);
		return -EIO;
	}
	memcpy(handle, l->handle, INCA_PEER_HANDLE_BYTES);
	*out = l;
	return 0;
}

void inca_peer_listener_close(struct inca_peer_listener *l)
{
	if (!l)
		return;
	if (l->fd >= 0)
		close(l->fd);
	free(l);
}

static int ent_cmp(const void *a, const void *b)
{
	return memcmp(a, b, TABLE_ENT_LEN);
}

/* The rendezvous table from the caller's peer handles: every handle well-formed and distinct,
 * this rank's own listener at its rank; the job nonce is the XOR of every rank's. */
static int peers_table(const struct inca_comm *c, const uint8_t own[TABLE_ENT_LEN],
		       uint8_t *table)
{
	const struct client_cfg *cfg = &c->cfg;
	size_t n = (size_t)cfg->size;
	uint8_t *ents = table + TABLE_HDR_LEN, *sorted;
	uint64_t nonce = 0;

	for (size_t i = 0; i < n; i++) {
		const uint8_t *h = c->boot_peers + i * INCA_PEER_HANDLE_BYTES;
		if (get32(h) != PEER_MAGIC || get32(h + 4) != BOOT_VERSION || !get32(h + 8) ||
		    !(h[12] | h[13]) || h[14] | h[15]) {
			client_log(cfg, 0, "bootstrap: peer_table[%zu] is not a peer handle", i);
			return -EINVAL;
		}
		if (i == (size_t)cfg->rank && memcmp(h + 8, own, TABLE_ENT_LEN) != 0) {
			client_log(cfg, 0, "bootstrap: peer_table[%zu] is not this rank's listener",
				   i);
			return -EINVAL;
		}
		memcpy(ents + i * TABLE_ENT_LEN, h + 8, TABLE_ENT_LEN);
		nonce ^= (uint64_t)get32(h + 16) << 32 | get32(h + 20);
	}
	sorted = malloc(n * TABLE_ENT_LEN);
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, ents, n * TABLE_ENT_LEN);
	qsort(sorted, n, TABLE_ENT_LEN, ent_cmp);
	for (size_t i = 1; i < n; i++)
		if (memcmp(sorted + (i - 1) * TABLE_ENT_LEN, sorted + i * TABLE_ENT_LEN,
			   TABLE_ENT_LEN) == 0) {
			free(sorted);
			client_log(cfg, 0, "bootstrap: two ranks have the same peer handle");
			return -EINVAL;
		}
	free(sorted);
	put32(table, BOOT_MAGIC);
	put32(table + 4, (uint32_t)n);
	put32(table + 8, (uint32_t)(nonce >> 32));
	put32(table + 12, (uint32_t)nonce);
	return 0;
}

static void ent_to_sa(const uint8_t *e, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof *sa);
	sa->sin_family = AF_INET;
	memcpy(&sa->sin_addr.s_addr, e, 4); /* stored in network order */
	memcpy(&sa->sin_port, e + 4, 2);
}

/* The INC round base from the job's 8-byte nonce (a 64-bit mix, high half). */
uint32_t client_round_base(const uint8_t *nonce8)
{
	uint64_t x = 0;

	for (int i = 0; i < 8; i++)
		x = x << 8 | nonce8[i];
	return (uint32_t)(util_hash64(x) >> 32);
}

int client_bootstrap(struct inca_comm *c)
{
	const struct client_cfg *cfg = &c->cfg;
	uint64_t deadline_ns = util_now_ns() + (uint64_t)cfg->timeout_ms * 1000000ull;
	struct sockaddr_in own = { .sin_family = AF_INET, .sin_addr = cfg->host_ip }, right_sa;
	socklen_t sl = sizeof own;
	size_t table_len = TABLE_HDR_LEN + (size_t)cfg->size * TABLE_ENT_LEN;
	uint8_t *table = calloc(1, table_len), ent[TABLE_ENT_LEN] = { 0 }, rh[HELLO_LEN];
	int rc, mesh_missing, right = (cfg->rank + 1) % cfg->size, left = (cfg->rank + cfg->size - 1) % cfg->size;
	struct hello_wait w;

	rc = hw_init(&w, cfg->size);
	if (!table || rc < 0) {
		free(table);
		hw_close(&w);
		return -ENOMEM;
	}
	/* Our ring listener first, so its address can go into the table: the caller's (external
	 * bootstrap), else a new one. */
	if (c->boot_listener) {
		w.lfd = c->boot_listener->fd;
		c->boot_listener->fd = -1;
		memcpy(ent, c->boot_listener->handle + 8, TABLE_ENT_LEN);
	} else {
		/* Backlog: the ring peer plus every higher rank's mesh connection may queue. */
		rc = tcp_listen(&own, cfg->size < 4000 ? cfg->size + 16 : 4096, &w.lfd);
		if (rc < 0)
			goto out;
		if (getsockname(w.lfd, (struct sockaddr *)&own, &sl) < 0) {
			rc = -errno;
			goto out;
		}
		memcpy(ent, &own.sin_addr.s_addr, 4);
		memcpy(ent + 4, &own.sin_port, 2);
	}

	if (cfg->have_peers) {
		rc = peers_table(c, ent, table);
	} else if (cfg->rank == 0) {
		/* The nonce ties ring connections to this job: a stray peer from another job
		 * on a reused port is rejected instead of being spliced into our ring. */
		uint64_t nonce = util_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)c, rnd = 0;

		if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) == (ssize_t)sizeof rnd)
			nonce ^= rnd;
		put32(table, BOOT_MAGIC);
		put32(table + 4, (uint32_t)cfg->size);
		put32(table + 8, (uint32_t)(nonce >> 32));
		put32(table + 12, (uint32_t)nonce);
		memcpy(table + TABLE_HDR_LEN, ent, TABLE_ENT_LEN);
		rc = boot_root(c, table, deadline_ns);
	} else {
		rc = boot_leaf(c, ent, table, deadline_ns);
	}
	if (rc < 0)
		goto out;
	c->round_base = client_round_base(table + 8);

	/* Ring: connect right (send side), then accept left (receive side). Connecting first
	 * cannot deadlock: the kernel completes the handshake from the listen backlog. */
	ent_to_sa(table + TABLE_HDR_LEN + (size_t)right * TABLE_ENT_LEN, &right_sa);
	rc = tcp_connect(cfg->host_ip, &right_sa, deadline_ns, &c->ring_send_fd);
	if (rc < 0)
		goto out;
	memset(rh, 0, sizeof rh);
	put32(rh, RING_MAGIC);
	put32(rh + 4, (uint32_t)cfg->size);
	put32(rh + 8, (uint32_t)cfg->rank);
	memcpy(rh + 16, table + 8, 8);
	rc = client_tcp_send_all(c->ring_send_fd, rh, sizeof rh, deadline_ns);
	if (rc < 0)
		goto out;
	/* Mesh: connect to every lower rank now; accept the higher ones below. Like the
	 * ring, connecting before accepting cannot deadlock (the backlog completes handshakes). */
	c->host_fd = malloc(sizeof(int) * (size_t)cfg->size);
	if (!c->host_fd) {
		rc = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < cfg->size; i++)
		c->host_fd[i] = -1;
	for (int j = 0; j < cfg->rank; j++) {
		struct sockaddr_in sa;

		ent_to_sa(table + TABLE_HDR_LEN + (size_t)j * TABLE_ENT_LEN, &sa);
		rc = tcp_connect(cfg->host_ip, &sa, deadline_ns, &c->host_fd[j]);
		if (rc < 0)
			goto out;
		put32(rh, MESH_MAGIC);
		rc = client_tcp_send_all(c->host_fd[j], rh, sizeof rh, deadline_ns);
		if (rc < 0)
			goto out;
	}
	mesh_missing = cfg->size - 1 - cfg->rank;
	while (c->ring_recv_fd < 0 || mesh_missing > 0) {
		uint8_t got[HELLO_LEN];
		uint32_t magic, from;
		int fd;

		rc = hw_next(&w, deadline_ns, &fd, got);
		if (rc < 0)
			goto out;
		magic = get32(got);
		from = get32(got + 8);
		if (get32(got + 4) != (uint32_t)cfg->size || memcmp(got + 16, table + 8, 8) != 0 ||
		    (magic == RING_MAGIC && (from != (uint32_t)left || c->ring_recv_fd >= 0)) ||
		    (magic == MESH_MAGIC && (from <= (uint32_t)cfg->rank || from >= (uint32_t)cfg->size ||
					     c->host_fd[from] >= 0)) ||
		    (magic != RING_MAGIC && magic != MESH_MAGIC)) {
			client_log(cfg, 1, "bootstrap: rejected a ring/mesh connection");
			close(fd);
			continue;
		}
		if (magic == RING_MAGIC) {
			c->ring_recv_fd = fd;
		} else {
			c->host_fd[from] = fd;
			mesh_missing--;
		}
	}
	client_log(cfg, 3, "bootstrap: ring up (left %d, right %d)", left, right);
	rc = 0;
out:
	hw_close(&w);
	free(table);
	return rc;
}

/* ---- peer liveness ------------------------------------------------------------------------
 * A rank that dies (killed, crashed) has its TCP connections closed by its kernel at once: the
 * peers see FIN or RST, i.e. POLLRDHUP (with POLLIN), POLLHUP or POLLERR on the ring and mesh
 * sockets. The waits of a collective watch these sockets (at least once per
 * CLIENT_PEER_WATCH_NS of waiting), so the death is known within about a millisecond instead
 * of after timeout_ms. The mesh sockets of a rank whose own mesh broke are
 * shut by that rank (host_coll.c) and not watched by it. */

static size_t peer_watch_fill(const struct inca_comm *c, struct pollfd *pf)
{
	size_t n = 0;

	if (c->ring_send_fd >= 0)
		pf[n++] = (struct pollfd){ .fd = c->ring_send_fd, .events = POLLRDHUP };
	if (c->ring_recv_fd >= 0)
		pf[n++] = (struct pollfd){ .fd = c->ring_recv_fd, .events = POLLRDHUP };
	if (c->host_fd && !c->host_broken)
		for (int r = 0; r < c->cfg.size; r++)
			if (c->host_fd[r] >= 0)
				pf[n++] = (struct pollfd){ .fd = c->host_fd[r], .events = POLLRDHUP };
	return n;
}

void client_peer_note_lost(struct inca_comm *c, const char *how)
{
	if (c->peer_lost)
		return;
	c->peer_lost = true;
	c->peer_lost_ns = util_now_ns();
	client_log(&c->cfg, 1, "a peer rank is gone (%s): calls that still need it fail with "
		   "-ECONNRESET, and so does every later call", how);
}

/* A reset or error is a death. An orderly close (FIN) is one once nothing the closed
 * connections carried is left unread: a rank that finished its part (a Scatter root) closes
 * right after sending, and what it sent must still be read first. */
static bool peer_watch_hit(const struct pollfd *pf, size_t n)
{
	bool fin = false, unread_left = false;

	for (size_t i = 0; i < n; i++) {
		int unread = 0;
		if (pf[i].revents & (POLLHUP | POLLERR | POLLNVAL))
			return true;
		if (!(pf[i].revents & POLLRDHUP))
			continue;
		fin = true;
		if (ioctl(pf[i].fd, FIONREAD, &unread) == 0 && unread > 0)
			unread_left = true;
	}
	return fin && !unread_left;
}

static int peer_pf_reserve(struct inca_comm *c, size_t need)
{
	if (c->peer_pf_cap >= need)
		return 0;
	struct pollfd *p = realloc(c->peer_pf, need * sizeof *p);
	if (!p)
		return -ENOMEM;
	c->peer_pf = p;
	c->peer_pf_cap = need;
	return 0;
}

int client_wait_peers(struct inca_comm *c, struct pollfd *pf, nfds_t n, uint64_t timeout_ns)
{
	uint64_t spin_ns = c->cfg.busy_poll_ns;

	/* Once a loss is known the hung-up sockets would wake every poll at once: unwatched. */
	if (c->peer_lost || c->cfg.size < 2)
		return client_wait(pf, n, timeout_ns, spin_ns);
	/* The peers were watched less than CLIENT_PEER_WATCH_NS ago: our own descriptors only,
	 * until that interval is over. */
	uint64_t now = util_now_ns(), since = now - c->peer_watch_ns;
	int rc;
	if (since < CLIENT_PEER_WATCH_NS) {
		uint64_t left = CLIENT_PEER_WATCH_NS - since;
		if (timeout_ns <= left)
			return client_wait(pf, n, timeout_ns, spin_ns);
		if ((rc = client_wait(pf, n, left, spin_ns)) != 0)
			return rc;
		timeout_ns -= left;
		spin_ns = 0;
	}
	if ((rc = peer_pf_reserve(c, (size_t)n + 2 + (size_t)c->cfg.size)) < 0)
		return rc;
	memcpy(c->peer_pf, pf, (size_t)n * sizeof *pf);
	size_t w = peer_watch_fill(c, c->peer_pf + n);
	rc = client_wait(c->peer_pf, n + (nfds_t)w, timeout_ns, spin_ns);
	c->peer_watch_ns = util_now_ns();
	for (nfds_t i = 0; i < n; i++)
		pf[i].revents = c->peer_pf[i].revents;
	if (rc > 0 && peer_watch_hit(c->peer_pf + n, w))
		client_peer_note_lost(c, "connection closed");
	return rc;
}

int client_host_wait(struct inca_comm *c, struct pollfd *pf, nfds_t n, uint64_t idle_deadline,
		     uint64_t idle_ns)
{
	uint64_t now = util_now_ns();

	if (now >= idle_deadline)
		return -ETIMEDOUT;
	/* A rank is gone: what we still wait for may never come. */
	if (c->peer_lost && now >= idle_deadline - idle_ns + CLIENT_PEER_GRACE_TCP_NS &&
	    now >= c->peer_lost_ns + CLIENT_PEER_GRACE_TCP_NS)
		return -ECONNRESET;
	uint64_t wait = idle_deadline - now;
	if (wait > CLIENT_PEER_GRACE_TCP_NS / 4)
		wait = CLIENT_PEER_GRACE_TCP_NS / 4;
	return client_wait_peers(c, pf, n, wait);
}

int client_peer_probe(struct inca_comm *c)
{
	if (c->peer_lost)
		return -ECONNRESET;
	if (c->cfg.size < 2)
		return 0;
	int rc = peer_pf_reserve(c, 2 + (size_t)c->cfg.size);
	if (rc < 0)
		return rc;
	size_t w = peer_watch_fill(c, c->peer_pf);
	rc = poll(c->peer_pf, (nfds_t)w, 0);
	if (rc > 0 && peer_watch_hit(c->peer_pf, w)) {
		client_peer_note_lost(c, "connection closed");
		return -ECONNRESET;
	}
	return 0;
}

void client_peer_fail_all(struct inca_comm *c)
{
	if (c->ring_send_fd >= 0)
		shutdown(c->ring_send_fd, SHUT_RDWR);
	if (c->ring_recv_fd >= 0)
		shutdown(c->ring_recv_fd, SHUT_RDWR);
	if (c->host_fd)
		for (int r = 0; r < c->cfg.size; r++)
			if (c->host_fd[r] >= 0)
				shutdown(c->host_fd[r], SHUT_RDWR);
	c->ring_broken = c->host_broken = true;
}
