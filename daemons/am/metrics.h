/* inca-am /metrics (metrics.c): the Prometheus exposition of the counter table (counters.h,
 * the one GetStats is filled from) plus the AM's state (groups by state, switches, RPCs by
 * method and status), served on --metrics-listen by lib/util/httpd from the main loop.
 * Main loop thread only. */
#ifndef INCA_AM_METRICS_H
#define INCA_AM_METRICS_H

#include <stddef.h>

#include "am.h"

struct am_metrics;

/* Listen on addr ("ip:port", port 0: any free port, logged). Returns 0 or -errno with a
 * message in err. am must outlive the server. */
int am_metrics_start(struct am *am, const char *addr, struct am_metrics **out, char *err,
		     size_t cap);
/* Serve what is ready without waiting (accept, read, answer, write). NULL is fine. */
void am_metrics_poll(struct am_metrics *m);
void am_metrics_stop(struct am_metrics *m);
/* A call ended with status code (server.c, when it sends the final status). NULL m: no-op. */
void am_metrics_rpc_done(struct am_metrics *m, const char *method, grpc_status_code code);

#endif
