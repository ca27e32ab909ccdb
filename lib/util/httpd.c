/* lib/util/httpd: GET /metrics over HTTP/1.1 (httpd.h). Each connection is a small state
 * machine driven by util_httpd_poll: read the request into a fixed buffer, answer it whole
 * (Connection: close), write it as the socket takes it, then half-close and drain what the
 * client still sends before closing, so the response is not lost to a reset. */
#include "httpd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "util.h"

#define ACCEPT_PER_POLL 16    /* new connections taken per call: bounded work per call */
#define DRAIN_MS 1000         /* after the response: wait this long for the client's close */

enum conn_state { C_READ, C_WRITE, C_DRAIN };

struct conn {
	int fd; /* -1: free slot */
	enum conn_state st;
	uint64_t accepted_ns, deadline_ns;
	char req[UTIL_HTTPD_REQ_MAX];
	size_t reqlen;
	char *out; /* response (owned) */
	size_t outlen, outoff;
};

struct util_httpd {
	struct util_httpd_opts o;
	int fd;
	struct sockaddr_in addr;
	struct conn *c; /* o.max_conns */
	struct pollfd *pfd;
	struct conn **map; /* pfd index -> connection */
	struct util_httpd_stats st;
};

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	c->outlen = c->outoff = c->reqlen = 0;
}

int util_httpd_create(const struct util_httpd_opts *o, struct util_httpd **out, char *err,
		      unsigned long cap)
{
	struct util_httpd *h;
	socklen_t alen = sizeof h->addr;
	int one = 1, rc;

	*out = NULL;
	h = calloc(1, sizeof *h);
	if (!h) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	h->o = *o;
	if (!h->o.max_conns)
		h->o.max_conns = 16;
	if (!h->o.request_timeout_ms)
		h->o.request_timeout_ms = 5000;
	if (!h->o.response_timeout_ms)
		h->o.response_timeout_ms = 10000;
	h->fd = -1;
	h->c = calloc(h->o.max_conns, sizeof *h->c);
	h->pfd = calloc(h->o.max_conns + 1, sizeof *h->pfd);
	h->map = calloc(h->o.max_conns + 1, sizeof *h->map);
	if (!h->c || !h->pfd || !h->map) {
		snprintf(err, cap, "out of memory");
		util_httpd_destroy(h);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < h->o.max_conns; i++)
		h->c[i].fd = -1;
	if (util_parse_addr(o->listen, -1, &h->addr) < 0) {
		snprintf(err, cap, "'%s' is not IP:PORT", o->listen);
		util_httpd_destroy(h);
		return -EINVAL;
	}
	h->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->fd < 0)
		goto sys_fail;
	setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(h->fd, (struct sockaddr *)&h->addr, sizeof h->addr) < 0 ||
	    listen(h->fd, 64) < 0 ||
	    getsockname(h->fd, (struct sockaddr *)&h->addr, &alen) < 0)
		goto sys_fail;
	*out = h;
	return 0;

sys_fail:
	rc = -errno;
	snprintf(err, cap, "%s: %s", o->listen, strerror(errno));
	util_httpd_destroy(h);
	return rc;
}

void util_httpd_destroy(struct util_httpd *h)
{
	if (!h)
		return;
	for (unsigned i = 0; h->c && i < h->o.max_conns; i++)
		conn_close(&h->c[i]);
	if (h->fd >= 0)
		close(h->fd);
	free(h->c);
	free(h->pfd);
	free(h->map);
	free(h);
}

const struct sockaddr_in *util_httpd_addr(const struct util_httpd *h)
{
	return &h->addr;
}

void util_httpd_get_stats(const struct util_httpd *h, struct util_httpd_stats *out)
{
	*out = h->st;
}

int util_httpd_metrics_listen(const char *addr, void (*render)(void *arg, struct util_prom *p),
			      void *arg, struct util_httpd **out, char *err, size_t cap)
{
	struct util_httpd_opts o = { .listen = addr, .render = render, .arg = arg };
	char e[160];
	int rc = util_httpd_create(&o, out, e, sizeof e);

	if (rc < 0)
		snprintf(err, cap, "--metrics-listen %s", e);
	return rc;
}

void util_httpd_prom_stats(const struct util_httpd *h, struct util_prom *p, const char *prefix)
{
	static const char *const results[] = { "served", "rejected", "timeout", "evicted" };
	const uint64_t n[] = { h->st.served, h->st.rejected, h->st.timeouts, h->st.evicted };
	char name[96];

	snprintf(name, sizeof name, "%smetrics_requests_total", prefix);
	util_prom_family(p, name, "Requests and connections of this /metrics endpoint, by outcome.",
			 UTIL_PROM_COUNTER);
	for (size_t i = 0; i < sizeof results / sizeof results[0]; i++)
		util_prom_sample(p, name, (const char *[]){ "result", results[i], NULL }, n[i]);
}

/* A whole response in c->out; headers say how long the body is and that the connection ends. */
static void respond(struct conn *c, const char *status, const char *ctype, const char *body,
		    size_t blen)
{
	int n = snprintf(NULL, 0,
			 "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n", status, ctype, blen);

	c->out = malloc((size_t)n + blen + 1);
	if (!c->out) {
		c->outlen = 0;
		return;
	}
	snprintf(c->out, (size_t)n + 1,
		 "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		 status, ctype, blen);
	memcpy(c->out + n, body, blen);
	c->outlen = (size_t)n + blen;
	c->outoff = 0;
}

static void respond_text(struct conn *c, const char *status, const char *text)
{
	respond(c, status, "text/plain; charset=utf-8", text, strlen(text));
}

/* The request line of a complete request: "GET /metrics[?query] HTTP/1.x". */
static void answer(struct util_httpd *h, struct conn *c)
{
	char *sp1, *sp2, *eol, *path_end;

	c->req[c->reqlen] = 0;
	eol = strpbrk(c->req, "\r\n");
	if (eol)
		*eol = 0;
	sp1 = strchr(c->req, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0) {
		h->st.rejected++;
		respond_text(c, "400 Bad Request", "bad request\n");
		return;
	}
	*sp1 = *sp2 = 0;
	path_end = strchr(sp1 + 1, '?');
	if (path_end)
		*path_end = 0;
	if (strcmp(c->req, "GET") != 0 || strcmp(sp1 + 1, "/metrics") != 0) {
		h->st.rejected++;
		respond_text(c, "404 Not Found", "only GET /metrics is served here\n");
		return;
	}
	{
		struct util_prom p;
		util_prom_init(&p);
		h->st.served++; /* before rendering: the exposition counts itself */
		h->o.render(h->o.arg, &p);
		if (p.oom) {
			h->st.served--;
			util_prom_free(&p);
			respond_text(c, "500 Internal Server Error", "out of memory\n");
			return;
		}
		respond(c, "200 OK", UTIL_PROM_CONTENT_TYPE, p.buf ? p.buf : "", p.len);
		util_prom_free(&p);
	}
}

static bool request_complete(const struct conn *c)
{
	for (size_t i = 0; i + 1 < c->reqlen; i++) {
		if (c->req[i] == '\n' && c->req[i + 1] == '\n')
			return true;
		if (i + 3 < c->reqlen && !memcmp(c->req + i, "\r\n\r\n", 4))
			return true;
	}
	return false;
}

static void to_write(struct util_httpd *h, struct conn *c, uint64_t now)
{
	c->st = C_WRITE;
	c->deadline_ns = now + (uint64_t)h->o.response_timeout_ms * 1000000ull;
	if (!c->out) /* no memory for a response: just close */
		conn_close(c);
}

static void on_read(struct util_httpd *h, struct conn *c, uint64_t now)
{
	for (;;) {
		char sink[1024];
		ssize_t n;

		if (c->st == C_DRAIN) {
			n = recv(c->fd, sink, sizeof sink, 0);
		} else {
			if (c->reqlen == sizeof c->req - 1) {
				h->st.rejected++;
				respond_text(c, "431 Request Header Fields Too Large",
					     "request too large\n");
				to_write(h, c, now);
				return;
			}
			n = recv(c->fd, c->req + c->reqlen, sizeof c->req - 1 - c->reqlen, 0);
		}
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			conn_close(c); /* peer closed (or reset) */
			return;
		}
		if (n < 0)
			return;
		if (c->st == C_DRAIN)
			continue;
		c->reqlen += (size_t)n;
		if (request_complete(c)) {
			answer(h, c);
			to_write(h, c, now);
			return;
		}
	}
}

static void on_write(struct util_httpd *h, struct conn *c, uint64_t now)
{
	while (c->outoff < c->outlen) {
		ssize_t n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return;
			conn_close(c);
			return;
		}
		c->outoff += (size_t)n;
	}
	free(c->out);
	c->out = NULL;
	shutdown(c->fd, SHUT_WR);
	c->st = C_DRAIN;
	c->deadline_ns = now + DRAIN_MS * 1000000ull;
}

static void accept_new(struct util_httpd *h, uint64_t now)
{
	for (int k = 0; k < ACCEPT_PER_POLL; k++) {
		struct conn *slot = NULL, *oldest = NULL;
		int fd = accept4(h->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return; /* EAGAIN, or a connection that died in the queue */
		for (unsigned i = 0; i < h->o.max_conns && !slot; i++) {
			struct conn *c = &h->c[i];
			if (c->fd < 0)
				slot = c;
			else if (!oldest || c->accepted_ns < oldest->accepted_ns)
				oldest = c;
		}
		if (!slot) {
			/* Full: the oldest connection is the likeliest to be idle. */
			h->st.evicted++;
			conn_close(oldest);
			slot = oldest;
		}
		h->st.accepted++;
		slot->fd = fd;
		slot->st = C_READ;
		slot->reqlen = 0;
		slot->accepted_ns = now;
		slot->deadline_ns = now + (uint64_t)h->o.request_timeout_ms * 1000000ull;
		/* The client usually sent its request with the handshake: answer it now. */
		on_read(h, slot, now);
		if (slot->fd >= 0 && slot->st == C_WRITE)
			on_write(h, slot, now);
	}
}

int util_httpd_poll(struct util_httpd *h, int timeout_ms)
{
	struct conn **map = h->map;
	nfds_t n = 0;
	uint64_t now;
	int rc;

	h->pfd[n++] = (struct pollfd){ .fd = h->fd, .events = POLLIN };
	for (unsigned i = 0; i < h->o.max_conns; i++) {
		struct conn *c = &h->c[i];
		if (c->fd < 0)
			continue;
		map[n] = c;
		h->pfd[n++] = (struct pollfd){ .fd = c->fd,
					       .events = c->st == C_WRITE ? POLLOUT : POLLIN };
	}
	rc = poll(h->pfd, n, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	now = util_now_ns();
	for (nfds_t i = 1; i < n; i++) {
		struct conn *c = map[i];
		short ev = h->pfd[i].revents;

		if (ev && c->st != C_WRITE)
			on_read(h, c, now);
		/* Writable, failed (EPIPE shows up in send), or answered just now: write. */
		if (c->fd >= 0 && c->st == C_WRITE && (ev || c->outoff == 0))
			on_write(h, c, now);
		if (c->fd >= 0 && now >= c->deadline_ns) {
			if (c->st != C_DRAIN)
				h->st.timeouts++;
			conn_close(c);
		}
	}
	if (h->pfd[0].revents & POLLIN)
		accept_new(h, now);
	return 0;
}
