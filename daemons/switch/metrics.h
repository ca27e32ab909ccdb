/* inca-switch /metrics (metrics.c): the Prometheus endpoint of --metrics-listen, on a thread of
 * its own. Started and stopped by the main thread (with signals blocked, so the thread never
 * takes them). */
#ifndef INCA_SW_METRICS_H
#define INCA_SW_METRICS_H

#include <stddef.h>
#include <netinet/in.h>

#include "switch.h"

struct sw_metrics;

/* Listen on addr ("ip:port", port 0: any free one) and serve GET /metrics until stopped.
 * Returns 0 or -errno with a message in err. sw must outlive the server. */
int sw_metrics_start(struct sw_switch *sw, const char *addr, struct sw_metrics **out,
		     char *err, size_t cap);
/* The bound address (the real port when 0 was asked for). */
const struct sockaddr_in *sw_metrics_addr(const struct sw_metrics *m);
/* Stop the thread (within ~100 ms), close every connection, free m. NULL is fine. */
void sw_metrics_stop(struct sw_metrics *m);

#endif
