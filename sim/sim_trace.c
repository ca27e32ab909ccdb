/* sim/sim_trace.c: packet and queue traces of chosen ports, a simulator module (sim_module.h),
 * off by default. trace.links names ports; their packet events (enqueue, dequeue, drop, ECN
 * mark) go to trace_packets.csv and their queues, sampled every trace.queue_interval_us, to
 * trace_queues.csv; the packets leaving trace.pcap_link go to trace.pcap (sim_trace_pcap.c).
 * The core reports events through the port_event hook, one predictable branch when off. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_trace_int.h"

static bool trace_enabled(const struct sim_config *c)
{
	return c->trace_links[0] || c->trace_pcap_link[0];
}

/* ---- naming ports ------------------------------------------------------------------------ */
/* Marks the nth (from 1; 0 = every) port of a toward b. Returns how many it marked. */
static int mark_toward(uint8_t *mask, const struct sim_node *a, const struct sim_node *b,
		       unsigned nth, uint8_t bit)
{
	int n = 0;
	unsigned k = 0;
	for (uint32_t p = 0; p < a->nports; p++)
		if (a->ports[p].peer->node == b && (!nth || ++k == nth)) {
			mask[a->ports[p].id] |= bit;
			n++;
		}
	return n;
}

/* Marks the ports one item names: "all"; "A->B" (A's ports toward B) or "A->B#n" (the n-th
 * parallel one); "A-B" / "A-B#n" (both directions); "node:pN" (port N of node, 0-based, in
 * link order); "node" (all its ports). Names may contain '-', so every split point is tried.
 * Returns the number of ports, 0 if the item names none. */
static int mark_item(struct sim *s, uint8_t *mask, const char *item, size_t len, uint8_t bit)
{
	if (len == 3 && !memcmp(item, "all", 3)) {
		for (uint32_t i = 0; i < s->nports; i++)
			mask[i] |= bit;
		return (int)s->nports;
	}
	size_t body = len;
	unsigned nth = 0;
	const char *hash = memchr(item, '#', len);
	if (hash) {
		body = (size_t)(hash - item);
		for (const char *q = hash + 1; q < item + len; q++) {
			if (*q < '0' || *q > '9' || nth > 65535)
				return 0;
			nth = nth * 10 + (unsigned)(*q - '0');
		}
		if (!nth)
			return 0;
	}
	for (size_t i = 1; i + 2 < body; i++) /* A->B */
		if (item[i] == '-' && item[i + 1] == '>') {
			struct sim_node *a = sim_topo_node_by_name(s, item, i);
			struct sim_node *b = sim_topo_node_by_name(s, item + i + 2, body - i - 2);
			if (a && b)
				return mark_toward(mask, a, b, nth, bit);
		}
	const char *colon = memchr(item, ':', body); /* node:pN */
	if (colon && !hash && colon + 2 < item + len && colon[1] == 'p') {
		struct sim_node *n = sim_topo_node_by_name(s, item, (size_t)(colon - item));
		uint32_t idx = 0;
		for (const char *q = colon + 2; q < item + len; q++) {
			if (*q < '0' || *q > '9' || idx > 65535)
				return 0;
			idx = idx * 10 + (uint32_t)(*q - '0');
		}
		if (!n || idx >= n->nports)
			return 0;
		mask[n->ports[idx].id] |= bit;
		return 1;
	}
	if (!hash) { /* node */
		struct sim_node *n = sim_topo_node_by_name(s, item, len);
		if (n) {
			for (uint32_t p = 0; p < n->nports; p++)
				mask[n->ports[p].id] |= bit;
			return (int)n->nports;
		}
	}
	for (size_t i = 1; i + 1 < body; i++) { /* A-B: both directions */
		if (item[i] != '-')
			continue;
		struct sim_node *a = sim_topo_node_by_name(s, item, i);
		struct sim_node *b = sim_topo_node_by_name(s, item + i + 1, body - i - 1);
		if (a && b)
			return mark_toward(mask, a, b, nth, bit) + mark_toward(mask, b, a, nth, bit);
	}
	return 0;
}

static int mark_list(struct sim *s, uint8_t *mask, const char *param, const char *list,
		     uint8_t bit, int *total)
{
	const char *sep = ", \t";
	*total = 0;
	for (const char *q = list; *q;) {
		q += strspn(q, sep);
		size_t len = strcspn(q, sep);
		if (!len)
			break;
		int n = mark_item(s, mask, q, len, bit);
		if (n <= 0) {
			snprintf(s->err, sizeof(s->err), "%s: '%.*s' names no port (ports are named all, NODE, "
				 "A->B[#n], A-B[#n] or NODE:pN, with node names as in the outputs: h3, leaf0, "
				 "L2-1-1)", param, (int)(len > 60 ? 60 : len), q);
			return -EINVAL;
		}
		*total += n;
		q += len;
	}
	return 0;
}

/* ---- outputs ----------------------------------------------------------------------------- */
static FILE *open_out(struct sim *s, const char *name)
{
	char path[SIM_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", s->cfg.out_dir, name);
	FILE *f = fopen(path, "w");
	if (!f)
		snprintf(s->err, sizeof(s->err), "trace: cannot open %.200s: %s", path, strerror(errno));
	else
		setvbuf(f, NULL, _IOFBF, 1 << 20);
	return f;
}

static const char *const ev_names[] = {
	[SIM_PEV_ENQUEUE] = "enqueue", [SIM_PEV_TX] = "dequeue", [SIM_PEV_MARK] = "mark",
	[SIM_PEV_DROP_QUEUE] = "drop", [SIM_PEV_DROP_SHARED] = "drop", [SIM_PEV_DROP_HEADROOM] = "drop",
};
static const char *const ev_reasons[] = {
	[SIM_PEV_DROP_QUEUE] = "queue_full", [SIM_PEV_DROP_SHARED] = "shared_buffer_full",
	[SIM_PEV_DROP_HEADROOM] = "pfc_headroom_overflow",
};
static const char *const drop_reasons[] = {
	[SIM_DROP_PORT_DOWN] = "port_down", [SIM_DROP_ROUTED_DOWN] = "routed_down",
	[SIM_DROP_LINK_LOST] = "link_lost",
};
static const char *const type_names[SIM_PKT_NTYPES] = {
	[SIM_PKT_DATA] = "data", [SIM_PKT_ACK] = "ack", [SIM_PKT_NACK] = "nack", [SIM_PKT_CNP] = "cnp",
	[SIM_PKT_CCM_NOTIFY] = "ccm_notify", [SIM_PKT_OSF_CREDIT_REQ] = "osf_credit_req",
	[SIM_PKT_OSF_CREDIT_ACK] = "osf_credit_ack", [SIM_PKT_OSF_CREDIT_REJ] = "osf_credit_rej",
	[SIM_PKT_OSF_LINKQ] = "osf_linkq", [SIM_PKT_INA_DATA] = "ina_data",
	[SIM_PKT_INA_RESULT] = "ina_result",
};

/* One row of trace_packets.csv. flow and psn only for the transport's packets (a module's
 * own packets carry their own meaning in them). */
static void pkt_row(struct sim *s, struct sim_trace *t, const struct sim_port *port,
		    const struct sim_pkt *p, const char *ev, const char *reason)
{
	FILE *f = t->pkts;
	fprintf(f, "%llu,%s,%u,%s,%s,", (unsigned long long)s->now, ev, port->id, port->node->name,
		port->peer->node->name);
	if (p->type < SIM_PKT_NTYPES && type_names[p->type])
		fputs(type_names[p->type], f);
	else
		fprintf(f, "type%u", p->type);
	if (p->type <= SIM_PKT_CNP && p->flow < s->nflows)
		fprintf(f, ",%u,%u", s->flows[p->flow].user_id, p->psn);
	else
		fputs(",,", f);
	fprintf(f, ",%u,%llu,%s\n", p->size_bytes, (unsigned long long)port->q_bytes, reason);
	t->rows++;
}

static void trace_port_event(struct sim *s, const struct sim_port *port, const struct sim_pkt *p,
			     enum sim_port_ev ev)
{
	struct sim_trace *t = sim_trace_of(s);
	uint8_t m = t->mask[port->id];
	if ((m & SIM_TRACE_CSV) && t->pkts)
		pkt_row(s, t, port, p, ev_names[ev], ev >= SIM_PEV_DROP_QUEUE ? ev_reasons[ev] : "");
	if ((m & SIM_TRACE_PCAP) && ev == SIM_PEV_TX)
		sim_trace_pcap_write(s, t, port, p);
}

static void trace_pkt_drop(struct sim *s, struct sim_pkt *p, const struct sim_port *at,
			   enum sim_drop_why why)
{
	struct sim_trace *t = sim_trace_of(s);
	if ((t->mask[at->id] & SIM_TRACE_CSV) && t->pkts)
		pkt_row(s, t, at, p, "drop", drop_reasons[why]);
}

static void queue_sample(struct sim *s, struct sim_event *ev)
{
	struct sim_trace *t = SIM_CONTAINER_OF(ev, struct sim_trace, q_ev);
	for (uint32_t i = 0; i < t->nqports; i++) {
		const struct sim_port *p = s->ports[t->qports[i]];
		fprintf(t->queues, "%llu,%u,%s,%s,%llu,%u,%u,%d\n", (unsigned long long)s->now, p->id,
			p->node->name, p->peer->node->name, (unsigned long long)p->q_bytes, p->q.n,
			p->cq.n, p->paused ? 1 : 0);
	}
	t->samples++;
	/* Like timeseries.csv: only while something else is going on. */
	if (s->evq.n > 0 && !(s->nflows && s->flows_done == s->nflows))
		sim_schedule(s, ev, s->now + t->q_interval_ps);
}

/* ---- life cycle -------------------------------------------------------------------------- */
static int trace_create(struct sim *s)
{
	const struct sim_config *c = &s->cfg;
	if (c->trace_queue_interval_us > 1e11 ||
	    (c->trace_queue_interval_us > 0 && c->trace_queue_interval_us < 0.001)) {
		sim_set_err(s, "trace.queue_interval_us must be 0 (off) or between 0.001 and 1e11");
		return -EINVAL;
	}
	uint32_t snap = c->trace_pcap_snap_bytes;
	if (snap > 65535 || (snap && snap < 54)) {
		sim_set_err(s, "trace.pcap_snap_bytes must be 0 (whole frames) or between 54 (Ethernet to "
			    "BTH) and 65535");
		return -EINVAL;
	}
	if (c->trace_links[0] && !c->trace_packets && c->trace_queue_interval_us <= 0) {
		sim_set_err(s, "trace.links: nothing to trace (trace.packets = false and "
			    "trace.queue_interval_us = 0)");
		return -EINVAL;
	}
	if (!c->out_dir[0]) {
		sim_set_err(s, "trace: traces are files: set output.dir (or -o DIR)");
		return -EINVAL;
	}
	struct sim_trace *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	s->mod[SIM_MOD_trace] = t;
	if (!(t->mask = calloc(s->nports ? s->nports : 1, 1)))
		return -ENOMEM;
	int rc, n;
	if ((rc = mark_list(s, t->mask, "trace.links", c->trace_links, SIM_TRACE_CSV, &n)))
		return rc;
	if (c->trace_pcap_link[0]) {
		uint8_t *one = calloc(s->nports ? s->nports : 1, 1);
		if (!one)
			return -ENOMEM;
		rc = mark_list(s, one, "trace.pcap_link", c->trace_pcap_link, SIM_TRACE_PCAP, &n);
		uint32_t marked = 0;
		for (uint32_t i = 0; i < s->nports; i++) {
			marked += one[i] != 0;
			t->mask[i] |= one[i];
		}
		free(one);
		if (rc)
			return rc;
		if (marked != 1) {
			snprintf(s->err, sizeof(s->err), "trace.pcap_link = %.60s names %u ports: name one "
				 "(A->B#n, NODE:pN or a host)", c->trace_pcap_link, marked);
			return -EINVAL;
		}
	}
	if ((rc = sim_mkdir_p(c->out_dir))) {
		sim_set_err(s, "trace: cannot create the output directory");
		return rc;
	}
	if (c->trace_links[0] && c->trace_packets) {
		if (!(t->pkts = open_out(s, "trace_packets.csv")))
			return -EIO;
		fputs("time_ps,event,port,node,peer,type,flow,psn,bytes,queue_bytes,reason\n", t->pkts);
	}
	if (c->trace_links[0] && c->trace_queue_interval_us > 0) {
		for (uint32_t i = 0; i < s->nports; i++)
			if (t->mask[i] & SIM_TRACE_CSV)
				t->mask[i] |= SIM_TRACE_QUEUE;
		if (!(t->qports = malloc(sizeof(*t->qports) * s->nports)))
			return -ENOMEM;
		for (uint32_t i = 0; i < s->nports; i++)
			if (t->mask[i] & SIM_TRACE_QUEUE)
				t->qports[t->nqports++] = i;
		if (!(t->queues = open_out(s, "trace_queues.csv")))
			return -EIO;
		fputs("time_ps,port,node,peer,queue_bytes,queue_pkts,ctl_pkts,paused\n", t->queues);
		t->q_interval_ps = sim_time_from_us_f(c->trace_queue_interval_us);
		sim_ev_init(&t->q_ev, queue_sample);
	}
	if (c->trace_pcap_link[0]) {
		char path[SIM_PATH_MAX + 32];
		snprintf(path, sizeof(path), "%s/trace.pcap", c->out_dir);
		if ((rc = sim_trace_pcap_open(s, t, path)))
			return rc;
	}
	return 0;
}

static int trace_start(struct sim *s)
{
	struct sim_trace *t = sim_trace_of(s);
	if (t->queues)
		sim_schedule(s, &t->q_ev, t->q_interval_ps);
	return 0;
}

static int trace_flush(struct sim *s, const char *dir)
{
	(void)dir; /* the traces stream into output.dir from the start of the run */
	struct sim_trace *t = sim_trace_of(s);
	FILE *fs[] = { t->pkts, t->queues, t->pcap };
	for (unsigned i = 0; i < 3; i++)
		if (fs[i] && (fflush(fs[i]) || ferror(fs[i])))
			return -EIO;
	return 0;
}

static void trace_destroy(struct sim *s)
{
	struct sim_trace *t = sim_trace_of(s);
	if (t->pkts)
		fclose(t->pkts);
	if (t->queues)
		fclose(t->queues);
	if (t->pcap)
		fclose(t->pcap);
	free(t->mask);
	free(t->qports);
	free(t->frame);
	free(t);
	s->mod[SIM_MOD_trace] = NULL;
}

#define F(field) SIM_PARAM_FIELD(field)
static const struct sim_param trace_params[] = {
	{ "trace", "links", SIM_P_STR, F(trace_links), "", NULL, "ports to trace, comma-separated: all | NODE (its ports) | A->B[#n] (A's port toward B, n-th parallel link) | A-B[#n] (both directions) | NODE:pN (port N, 0-based)" },
	{ "trace", "packets", SIM_P_BOOL, F(trace_packets), "true", NULL, "per-packet events of those ports (enqueue, dequeue, drop, mark) into trace_packets.csv" },
	{ "trace", "queue_interval_us", SIM_P_DBL, F(trace_queue_interval_us), "0", NULL, "sample their queues into trace_queues.csv every (0 = off)" },
	{ "trace", "pcap_link", SIM_P_STR, F(trace_pcap_link), "", NULL, "one port (A->B[#n], NODE:pN or a host): packets leaving it into trace.pcap as RoCEv2 frames" },
	{ "trace", "pcap_snap_bytes", SIM_P_U32, F(trace_pcap_snap_bytes), "0", NULL, "bytes of each frame written to trace.pcap (0 = whole frames; payloads are zeros)" },
};
#undef F

const struct sim_module_ops sim_trace_ops = {
	.name = "trace",
	.params = trace_params,
	.nparams = sizeof(trace_params) / sizeof(trace_params[0]),
	.enabled = trace_enabled,
	.create = trace_create,
	.start = trace_start,
	.destroy = trace_destroy,
	.port_event = trace_port_event,
	.pkt_drop = trace_pkt_drop,
	.write_outputs = trace_flush,
};
