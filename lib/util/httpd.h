/* lib/util/httpd: the smallest HTTP/1.1 server that serves a Prometheus scrape: GET /metrics
 * on one nonblocking TCP listener, 404 for any other request, one response per connection.
 * Nothing here blocks: util_httpd_poll waits at most its timeout and then only moves bytes that
 * are ready, so an idle or slow client costs a connection slot, never the caller's loop.
 * Not thread-safe: one thread creates, polls and destroys a server. */
#ifndef INCA_UTIL_HTTPD_H
#define INCA_UTIL_HTTPD_H

#include <stdint.h>
#include <netinet/in.h>

#include "prom.h"

#define UTIL_HTTPD_REQ_MAX 4096 /* request line + headers; more is answered 431 and closed */

struct util_httpd_opts {
	const char *listen; /* "ip:port"; port 0: the kernel picks one (util_httpd_addr) */
	/* Write the exposition of a GET /metrics into p. Runs on the polling thread, once per
	 * request; p is initialised and freed by the server. */
	void (*render)(void *arg, struct util_prom *p);
	void *arg;
	unsigned max_conns;           /* open connections (0: 16); the oldest is closed to make
				       * room for a new one */
	unsigned request_timeout_ms;  /* the whole request must arrive within (0: 5000) */
	unsigned response_timeout_ms; /* the client must read the response within (0: 10000) */
};

/* What the server did (for the daemons' own metrics and the tests). */
struct util_httpd_stats {
	uint64_t accepted;  /* connections */
	uint64_t served;    /* 200 responses to GET /metrics */
	uint64_t rejected;  /* 400, 404, 431 responses */
	uint64_t timeouts;  /* connections closed for a request or response that took too long */
	uint64_t evicted;   /* connections closed to make room for a new one */
};

struct util_httpd;

/* Bind and listen (nonblocking). Returns 0 or -errno with the reason in err. */
int util_httpd_create(const struct util_httpd_opts *o, struct util_httpd **out, char *err,
		      unsigned long cap);
void util_httpd_destroy(struct util_httpd *h);
/* The bound address (the real port when 0 was asked for). */
const struct sockaddr_in *util_httpd_addr(const struct util_httpd *h);
/* Accept, read, answer and write what is ready, waiting up to timeout_ms (0: do not wait)
 * for something to happen. Returns 0, or -errno if poll itself failed. */
int util_httpd_poll(struct util_httpd *h, int timeout_ms);
void util_httpd_get_stats(const struct util_httpd *h, struct util_httpd_stats *out);

/* A daemon's --metrics-listen ADDR: util_httpd_create with render(arg, p) and the defaults,
 * the error prefixed with the option's name. Returns 0 or -errno. */
int util_httpd_metrics_listen(const char *addr, void (*render)(void *arg, struct util_prom *p),
			      void *arg, struct util_httpd **out, char *err, size_t cap);
/* Write the family PREFIX "metrics_requests_total" (label result = served, rejected, timeout,
 * evicted) from the server's own counts; for the daemons' render callbacks. */
void util_httpd_prom_stats(const struct util_httpd *h, struct util_prom *p, const char *prefix);

#endif
