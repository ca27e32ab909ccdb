/* sim/sim_tc.c: traffic classes. With switch.traffic_classes = N > 1 every egress port has N data
 * queues (a switch port: a FIFO of packets per class; a host NIC: its flows of each class, served
 * in turn), a scheduler among them (strict priority or DWRR), ECN on the class's own queue and
 * PFC per class: pause/resume frames name the class, XOFF/XON/headroom are kept per (ingress
 * port, class), and a pause stops only that class's queue upstream. Classes not in
 * switch.pfc_classes stay lossy (dropped at the class queue's limit). ACK/NACK/CNP keep the
 * control queue, above every class. A simulator module (sim_module.h): it fills the core's
 * qdisc hooks and the NIC scheduler hook; with one class it is off and the core runs alone. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"
#include "sim_tc.h"

/* One class at one port. */
struct tc_pc {
	struct sim_pktq q;       /* switch port: the class's data queue */
	uint64_t q_bytes;        /* switch port: bytes in q */
	uint64_t in_bytes;       /* as ingress: bytes of the class received here still in the switch */
	int64_t deficit;         /* DWRR: bytes the class may still send this round (may be < 0) */
	uint64_t tx_bytes, tx_pkts, ts_tx_bytes;
	sim_time_ps paused_at, paused_ps;
	bool paused, pause_sent;
};

struct tc_port {
	uint8_t nonempty;        /* switch port: bit c = class c has packets queued */
	uint8_t paused;          /* bit c = the peer paused class c here */
	uint8_t cur;             /* DWRR: the class in service */
};

/* A PFC frame on the wire: pause or resume class tc at `port` (the sender's peer). */
struct tc_pause {
	struct sim_event ev;
	struct sim_port *port;
	uint8_t tc;
	bool pause;
	struct tc_pause *next_free, *next_all;
};

struct sim_tc {
	unsigned n;              /* classes */
	int sched;               /* enum sim_tc_sched */
	uint8_t lossless;        /* bit c = class c is lossless */
	int64_t quantum[SIM_TC_MAX];
	struct tc_pc *pc;        /* [port id * n + class] */
	struct tc_port *port;    /* [port id] */
	uint32_t *cursor;        /* [host * n + class]: index + 1 of the flow the NIC served last */
	struct tc_pause *free, *all;
	struct sim_tc_class_stats st[SIM_TC_MAX];
	FILE *ts;                /* timeseries_tc.csv */
};

static inline struct sim_tc *tc_of(const struct sim *s)
{
	return s->mod[SIM_MOD_tc];
}

static inline struct tc_pc *pc_of(const struct sim_tc *t, const struct sim_port *p, unsigned c)
{
	return &t->pc[(size_t)p->id * t->n + c];
}

/* ---- scheduling among the classes of a port ------------------------------------------------
 * ready: classes with a packet that may go now (queued and not paused; at a NIC: a flow whose
 * window and pacing allow it); nonempty: classes with anything queued, paused or not.
 * SP serves the highest ready class. DWRR (Shreedhar & Varghese, with the overdraft carried):
 * the class in service keeps the port while its deficit is positive and is charged each packet
 * after it is sent; then the next ready class in cyclic order gets its quantum (weight x
 * dwrr_quantum_bytes) and the turn if that makes its deficit positive. A class found empty gives
 * up what it had left (no saving up while idle); a paused one keeps it. Over a busy period every
 * ready class thus sends its quantum per round, give or take one packet. */
static int sched_pick(struct sim_tc *t, struct tc_port *tp, struct tc_pc *pc, unsigned ready,
		      unsigned nonempty)
{
	if (!ready)
		return -1;
	if (t->sched == SIM_TC_SP)
		return 31 - __builtin_clz(ready);
	unsigned n = t->n, c = tp->cur;
	if ((ready >> c & 1) && pc[c].deficit > 0)
		return (int)c;
	for (;;) {
		for (unsigned i = 0; i < n; i++) {
			if (!(nonempty >> c & 1) && pc[c].deficit > 0)
				pc[c].deficit = 0;
			c = c + 1 == n ? 0 : c + 1;
			if (!(ready >> c & 1))
				continue;
			pc[c].deficit += t->quantum[c];
			if (pc[c].deficit > 0) {
				tp->cur = (uint8_t)c;
				return (int)c;
			}
		}
		/* Every ready class is still in debt after a whole round (quanta smaller than its
		 * packets): skip the rounds in which none of them could send but the last. */
		int64_t rounds = INT64_MAX;
		for (unsigned r = 0; r < n; r++)
			if (ready >> r & 1) {
				int64_t m = -pc[r].deficit / t->quantum[r] + 1;
				if (m < rounds)
					rounds = m;
			}
		for (unsigned r = 0; r < n; r++)
			if (ready >> r & 1)
				pc[r].deficit += (rounds - 1) * t->quantum[r];
	}
}

/* ---- PFC per class ------------------------------------------------------------------------- */
static void pause_fire(struct sim *s, struct sim_event *ev)
{
	struct tc_pause *e = SIM_CONTAINER_OF(ev, struct tc_pause, ev);
	struct sim_tc *t = tc_of(s);
	struct sim_port *port = e->port;
	unsigned c = e->tc;
	struct tc_pc *q = pc_of(t, port, c);
	bool pause = e->pause;
	e->next_free = t->free;
	t->free = e;
	if (pause && !q->paused) {
		q->paused = true;
		q->paused_at = s->now;
		t->port[port->id].paused |= (uint8_t)(1u << c);
	} else if (!pause && q->paused) {
		q->paused = false;
		q->paused_ps += s->now - q->paused_at;
		t->st[c].paused_ps += s->now - q->paused_at;
		t->port[port->id].paused &= (uint8_t)~(1u << c);
		sim_port_kick(s, port);
	}
}

/* Ingress port `in` pauses or resumes class c at its peer. Like the core's PFC frame it takes
 * the link latency and does not queue behind data. */
static void pfc_send(struct sim *s, struct sim_tc *t, struct sim_port *in, unsigned c, bool pause)
{
	struct tc_pause *e = t->free;
	if (e)
		t->free = e->next_free;
	else if (!(e = malloc(sizeof(*e))))
		return; /* out of memory: the frame is lost; headroom drops show it */
	else {
		e->next_all = t->all;
		t->all = e;
	}
	sim_ev_init(&e->ev, pause_fire);
	e->port = in->peer;
	e->tc = (uint8_t)c;
	e->pause = pause;
	pc_of(t, in, c)->pause_sent = pause;
	if (pause) {
		in->pauses_sent++;
		s->pfc_pauses++;
		t->st[c].pfc_pauses++;
	}
	sim_schedule(s, &e->ev, s->now + in->latency_ps);
}

/* ---- switch ports: the qdisc hooks --------------------------------------------------------- */
static void tc_drop(struct sim *s, struct sim_port *out, struct sim_pkt *p, uint64_t *sw_ctr,
		    uint64_t *class_ctr, enum sim_port_ev ev)
{
	(*sw_ctr)++;
	(*class_ctr)++;
	out->drops++;
	sim_port_event(s, out, p, ev);
	sim_pkt_free(s, p);
}

/* Admission as the core's (sim_net.c) but per class: a lossless class by its (ingress port,
 * class) bytes against XOFF + headroom, a lossy one by its queue at `out` against
 * switch.buffer_bytes; then the shared buffer; ECN on the class's queue. */
static void tc_enqueue(struct sim *s, struct sim_switch *sw, struct sim_port *out, struct sim_pkt *p)
{
	const struct sim_config *c = &s->cfg;
	struct sim_tc *t = tc_of(s);
	unsigned k = p->tc;
	struct sim_port *in = p->rx_port;
	struct tc_pc *iq = pc_of(t, in, k), *oq = pc_of(t, out, k);
	struct sim_tc_class_stats *st = &t->st[k];
	uint32_t sz = p->size_bytes;
	bool lossless = t->lossless >> k & 1;
	if (lossless ? iq->in_bytes + sz > c->pfc_xoff_bytes + in->headroom_bytes
		     : oq->q_bytes + sz > c->buffer_bytes) {
		tc_drop(s, out, p, lossless ? &sw->drops_headroom : &sw->drops_queue,
			lossless ? &st->drops_headroom : &st->drops_queue,
			lossless ? SIM_PEV_DROP_HEADROOM : SIM_PEV_DROP_QUEUE);
		return;
	}
	if (c->shared_buffer_bytes && sw->shared_used + sz > c->shared_buffer_bytes) {
		tc_drop(s, out, p, &sw->drops_shared, &st->drops_shared, SIM_PEV_DROP_SHARED);
		return;
	}
	p->flags &= (uint8_t)~SIM_PKT_LOSSLESS; /* the core's one-class accounting stays out */
	if (lossless) {
		iq->in_bytes += sz;
		if (!iq->pause_sent && iq->in_bytes >= c->pfc_xoff_bytes)
			pfc_send(s, t, in, k, true);
	}
	if (sim_switch_ecn(s, sw, out, p, oq->q_bytes))
		st->ecn_marks++;
	sw->shared_used += sz;
	out->q_bytes += sz;
	out->q.n++;
	if (out->q_bytes > out->q_max_bytes)
		out->q_max_bytes = out->q_bytes;
	oq->q_bytes += sz;
	if (oq->q_bytes > st->max_queue_bytes)
		st->max_queue_bytes = oq->q_bytes;
	sim_pktq_push(&oq->q, p);
	t->port[out->id].nonempty |= (uint8_t)(1u << k);
	sim_port_event(s, out, p, SIM_PEV_ENQUEUE);
	sim_port_kick(s, out);
}

static struct sim_pkt *tc_dequeue(struct sim *s, struct sim_port *port)
{
	struct sim_tc *t = tc_of(s);
	struct tc_port *tp = &t->port[port->id];
	struct tc_pc *pc = pc_of(t, port, 0);
	int k = sched_pick(t, tp, pc, tp->nonempty & (unsigned)~tp->paused, tp->nonempty);
	if (k < 0)
		return NULL;
	struct tc_pc *q = &pc[k];
	struct sim_pkt *p = sim_pktq_pop(&q->q);
	uint32_t sz = p->size_bytes;
	q->q_bytes -= sz;
	if (!q->q.n)
		tp->nonempty &= (uint8_t)~(1u << k);
	port->q.n--;
	q->deficit -= sz;
	if (!port->down) { /* else the core drops it (failed link) */
		q->tx_bytes += sz;
		q->tx_pkts++;
		t->st[k].switch_tx_pkts++;
		t->st[k].switch_tx_bytes += sz;
	}
	if (t->lossless >> k & 1) {
		struct sim_port *in = p->rx_port;
		struct tc_pc *iq = pc_of(t, in, (unsigned)k);
		iq->in_bytes -= sz;
		if (iq->pause_sent && iq->in_bytes <= s->cfg.pfc_xon_bytes)
			pfc_send(s, t, in, (unsigned)k, false);
	}
	return p;
}

/* ---- host NICs -------------------------------------------------------------------------------
 * A NIC's queue of class c is its active flows of class c (the transport builds a packet only
 * when the NIC can send it, so no host queue builds). The scheduler picks the class among
 * those with a flow the transport lets send now and the class is not paused; within the class
 * the flows take turns, from the one after the flow served last. Cost: two passes over the
 * host's active flows per packet (the core's round robin usually stops at the first). */
static struct sim_pkt *tc_host_next(struct sim *s, struct sim_host *h, sim_time_ps *wake)
{
	struct sim_tc *t = tc_of(s);
	struct sim_port *port = &h->port;
	struct tc_port *tp = &t->port[port->id];
	struct tc_pc *pc = pc_of(t, port, 0);
	uint32_t *cursor = &t->cursor[(size_t)h->n.id * t->n];
	for (uint32_t tries = h->nactive + 1; tries-- && h->nactive;) {
		unsigned ready = 0, nonempty = 0;
		struct sim_flow *f = h->active;
		for (uint32_t i = 0; i < h->nactive; i++, f = f->next_active) {
			unsigned b = 1u << f->tc;
			nonempty |= b;
			if (!(ready & b) && !(tp->paused & b) && sim_host_flow_ready(s, f, wake))
				ready |= b;
		}
		int k = sched_pick(t, tp, pc, ready, nonempty);
		if (k < 0)
			return NULL;
		struct sim_flow *last = cursor[k] ? &s->flows[cursor[k] - 1] : NULL, *g = NULL;
		sim_time_ps later = SIM_TIME_NEVER;
		f = last && last->in_active ? last->next_active : h->active;
		for (uint32_t i = 0; i < h->nactive && !g; i++, f = f->next_active)
			if (f->tc == k && sim_host_flow_ready(s, f, &later))
				g = f;
		if (!g)
			return NULL; /* not reached: the first pass saw a ready flow of class k */
		cursor[k] = g->idx + 1;
		struct sim_pkt *p = sim_host_emit(s, h, g);
		if (!p)
			continue; /* it had nothing after all (and left the active list): again */
		pc[k].deficit -= p->size_bytes;
		pc[k].tx_bytes += p->size_bytes;
		pc[k].tx_pkts++;
		t->st[k].host_tx_pkts++;
		t->st[k].host_tx_bytes += p->size_bytes;
		return p;
	}
	return NULL;
}

static void tc_data_tx(struct sim *s, struct sim_flow *f, struct sim_pkt *p)
{
	(void)s;
	p->tc = f->tc;
}

/* ---- configuration --------------------------------------------------------------------------- */
static const char *const sched_names[] = { "sp", "dwrr", NULL };

static const struct sim_param tc_params[] = {
	{ "switch", "traffic_classes", SIM_P_U32, SIM_PARAM_FIELD(tc_classes), "1", NULL, "data queues (traffic classes) per egress port, switch and NIC, 1 to 8; class c = htsim prio c" },
	{ "switch", "scheduler", SIM_P_ENUM, SIM_PARAM_FIELD(tc_scheduler), "sp", sched_names, "among the classes of a port: sp (strict priority, highest class first) | dwrr (deficit weighted round robin)" },
	{ "switch", "dwrr_weights", SIM_P_STR, SIM_PARAM_FIELD(tc_dwrr_weights), "", NULL, "dwrr: weight of each class, 'w0,w1,...' (1 to 1000; empty = all 1)" },
	{ "switch", "dwrr_quantum_bytes", SIM_P_U32, SIM_PARAM_FIELD(tc_dwrr_quantum_bytes), "0", NULL, "dwrr: bytes per round per unit of weight (0 = one full data packet)" },
	{ "switch", "pfc_classes", SIM_P_STR, SIM_PARAM_FIELD(tc_pfc_classes), "all", NULL, "with pfc: the lossless classes, 'all' or 'c,c,...'; the others are lossy" },
	{ "workload", "traffic_class", SIM_P_STR, SIM_PARAM_FIELD(tc_workload_class), "0", NULL, "classes of generated flows, 'c' or 'c,c,...' given to the flows in turn" },
};

/* One class is the simulator without classes: the module is off and its other keys unused
 * (so a scenario with classes compares with switch.traffic_classes=1 alone). */
static bool tc_enabled(const struct sim_config *c)
{
	return c->tc_classes != 1;
}

static int refuse(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(struct sim *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* "a,b,c" (blanks allowed around the numbers) into v[0 .. max); the count, or -1 if it is not
 * such a list, has more than max entries or a number over lim. */
static int parse_list(const char *text, uint32_t *v, int max, uint32_t lim)
{
	int n = 0;
	const char *p = text;
	for (;;) {
		char *end;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p < '0' || *p > '9' || n == max)
			return -1;
		errno = 0;
		unsigned long x = strtoul(p, &end, 10);
		if (errno || x > lim)
			return -1;
		v[n++] = (uint32_t)x;
		p = end;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			return n;
		if (*p++ != ',')
			return -1;
	}
}

/* Checks the keys against each other and against the rest of the configuration, sets the
 * classes of generated flows. Error messages name the key and the reason. The DWRR keys are
 * checked under strict priority too (which does not use them): a typo is caught either way. */
static int tc_configure(struct sim *s, struct sim_tc *t)
{
	const struct sim_config *c = &s->cfg;
	unsigned n = c->tc_classes;
	uint32_t v[SIM_TC_MAX];
	if (n < 1 || n > SIM_TC_MAX)
		return refuse(s, "switch.traffic_classes = %u: must be 1 to %d (a data queue per 802.1Q "
			      "priority at most)", c->tc_classes, SIM_TC_MAX);
	if (c->ccm_mode != SIM_CCM_OFF || c->osf_mode != SIM_OSF_OFF || c->ina_mode != SIM_INA_OFF)
		return refuse(s, "switch.traffic_classes = %u is not modelled with %s", n,
			      c->ccm_mode != SIM_CCM_OFF ? "ccm.mode (its paused-port test knows one class)"
			      : c->osf_mode != SIM_OSF_OFF ? "osf.mode (OSF schedules the NICs itself)"
			      : "ina.mode (INA queues its packets in the core's single data queue)");
	t->n = n;
	t->sched = c->tc_scheduler;
	for (unsigned i = 0; i < n; i++)
		v[i] = 1;
	if (c->tc_dwrr_weights[0]) {
		int m = parse_list(c->tc_dwrr_weights, v, SIM_TC_MAX, 1000000);
		if (m < 0)
			return refuse(s, "switch.dwrr_weights = '%s': expected one weight per class, "
				      "'w0,w1,...'", c->tc_dwrr_weights);
		if ((unsigned)m != n)
			return refuse(s, "switch.dwrr_weights = '%s' gives %d weights for %u classes", 
				      c->tc_dwrr_weights, m, n);
		for (unsigned i = 0; i < n; i++)
			if (v[i] < 1 || v[i] > 1000)
				return refuse(s, "switch.dwrr_weights = '%s': weight %u of class %u must be 1 "
					      "to 1000 (0 would never serve the class)", c->tc_dwrr_weights,
					      v[i], i);
	}
	uint64_t pkt = (uint64_t)c->mtu_bytes + c->header_bytes;
	if (c->tc_dwrr_quantum_bytes > 100000000)
		return refuse(s, "switch.dwrr_quantum_bytes = %u must be <= 1e8",
			      c->tc_dwrr_quantum_bytes);
	for (unsigned i = 0; i < n; i++)
		t->quantum[i] = (int64_t)v[i] * (int64_t)(c->tc_dwrr_quantum_bytes ? c->tc_dwrr_quantum_bytes : pkt);
	/* lossless classes */
	uint32_t all = (1u << n) - 1;
	if (strcmp(c->tc_pfc_classes, "all")) {
		int m = parse_list(c->tc_pfc_classes, v, SIM_TC_MAX, 1000);
		if (m < 0)
			return refuse(s, "switch.pfc_classes = '%s': expected 'all' or class numbers "
				      "'c,c,...'", c->tc_pfc_classes);
		if (!c->pfc)
			return refuse(s, "switch.pfc_classes = '%s' needs switch.pfc = true",
				      c->tc_pfc_classes);
		for (int i = 0; i < m; i++) {
			if (v[i] >= n)
				return refuse(s, "switch.pfc_classes = '%s': class %u does not exist "
					      "(switch.traffic_classes = %u: classes 0 to %u)",
					      c->tc_pfc_classes, v[i], n, n - 1);
			t->lossless |= (uint8_t)(1u << v[i]);
		}
	} else if (c->pfc) {
		t->lossless = (uint8_t)all;
	}
	if (t->lossless != all && c->buffer_bytes < pkt)
		return refuse(s, "switch.buffer_bytes = %llu is below one data packet (host.mtu_bytes + "
			      "host.header_bytes = %llu bytes): the lossy classes (not in "
			      "switch.pfc_classes) would drop every packet", (unsigned long long)c->buffer_bytes,
			      (unsigned long long)pkt);
	/* classes of generated flows, in turn */
	int m = parse_list(c->tc_workload_class, v, SIM_TC_MAX, 1000);
	if (m < 0)
		return refuse(s, "workload.traffic_class = '%s': expected 'c' or 'c,c,...' (at most %d)",
			      c->tc_workload_class, SIM_TC_MAX);
	for (int i = 0; i < m; i++)
		if (v[i] >= n)
			return refuse(s, "workload.traffic_class = '%s': class %u does not exist "
				      "(switch.traffic_classes = %u: classes 0 to %u)", c->tc_workload_class,
				      v[i], n, n - 1);
	bool generated = c->workload <= SIM_WL_ALLREDUCE;
	if (!generated && strcmp(c->tc_workload_class, "0"))
		return refuse(s, "workload.traffic_class applies to generated workloads; %s",
			      c->workload == SIM_WL_CMATRIX ? "a connection matrix gives each flow's class "
			      "with 'prio p'" : "flows added with sim_flow_add take sim_tc_flow_set_class()");
	for (uint32_t i = 0; i < s->nflows; i++) {
		if (generated)
			s->flows[i].tc = (uint8_t)v[i % (uint32_t)m];
		if (s->flows[i].tc >= n)
			return refuse(s, "flow %u: class %u >= switch.traffic_classes = %u",
				      s->flows[i].user_id, s->flows[i].tc, n);
	}
	return 0;
}

/* ---- life cycle -------------------------------------------------------------------------------- */
static int tc_create(struct sim *s)
{
	struct sim_tc *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	s->mod[SIM_MOD_tc] = t;
	int rc = tc_configure(s, t);
	if (rc)
		return rc;
	t->pc = calloc((size_t)s->nports * t->n, sizeof(*t->pc));
	t->port = calloc(s->nports, sizeof(*t->port));
	t->cursor = calloc((size_t)s->nhosts * t->n, sizeof(*t->cursor));
	if (!t->pc || !t->port || !t->cursor)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->nports; i++)
		t->port[i].cur = (uint8_t)(t->n - 1); /* the first round starts at class 0 */
	return 0;
}

static int tc_start(struct sim *s)
{
	struct sim_tc *t = tc_of(s);
	const struct sim_config *c = &s->cfg;
	if (c->timeseries_us > 0 && c->out_dir[0]) {
		char path[SIM_PATH_MAX + 32];
		snprintf(path, sizeof(path), "%s/timeseries_tc.csv", c->out_dir);
		if (sim_mkdir_p(c->out_dir) || !(t->ts = fopen(path, "w"))) {
			sim_set_err(s, "cannot open timeseries_tc.csv");
			return -EIO;
		}
		fprintf(t->ts, "time_us,port,node,peer,tier,class,util,queue_bytes,paused\n");
	}
	return 0;
}

static void tc_destroy(struct sim *s)
{
	struct sim_tc *t = tc_of(s);
	if (!t)
		return;
	if (t->ts)
		fclose(t->ts);
	while (t->all) { /* free or still on the wire when the run stopped */
		struct tc_pause *e = t->all;
		t->all = e->next_all;
		free(e);
	}
	free(t->pc);
	free(t->port);
	free(t->cursor);
	free(t);
	s->mod[SIM_MOD_tc] = NULL;
}

/* ---- results ------------------------------------------------------------------------------------ */
int sim_tc_get_stats(const struct sim *s, struct sim_tc_stats *st)
{
	const struct sim_tc *t = tc_of(s);
	if (!t || !t->pc)
		return -ENOENT;
	memset(st, 0, sizeof(*st));
	st->classes = t->n;
	st->scheduler = t->sched;
	st->lossless = t->lossless;
	for (unsigned c = 0; c < t->n; c++) {
		st->c[c] = t->st[c];
		st->quantum_bytes[c] = (uint64_t)t->quantum[c];
	}
	for (uint32_t i = 0; i < s->nports; i++) /* pauses still in force */
		for (unsigned c = 0; c < t->n; c++)
			if (t->pc[(size_t)i * t->n + c].paused)
				st->c[c].paused_ps += s->now - t->pc[(size_t)i * t->n + c].paused_at;
	for (uint32_t i = 0; i < s->nflows; i++) {
		const struct sim_flow *f = &s->flows[i];
		st->c[f->tc].flows++;
		st->c[f->tc].flows_done += f->recv_done;
		st->c[f->tc].rx_bytes += f->bytes_rx;
	}
	return 0;
}

int sim_tc_port_class(const struct sim *s, uint32_t port, unsigned tc, struct sim_tc_port_class *out)
{
	const struct sim_tc *t = tc_of(s);
	if (!t || !t->pc)
		return -ENOENT;
	if (port >= s->nports || tc >= t->n)
		return -EINVAL;
	const struct tc_pc *q = pc_of(t, s->ports[port], tc);
	out->q_bytes = q->q_bytes;
	out->in_bytes = q->in_bytes;
	out->tx_bytes = q->tx_bytes;
	out->tx_pkts = q->tx_pkts;
	out->paused = q->paused;
	out->pause_sent = q->pause_sent;
	out->paused_ps = q->paused_ps + (q->paused ? s->now - q->paused_at : 0);
	return 0;
}

unsigned sim_tc_flow_class(const struct sim *s, uint32_t flow)
{
	return flow < s->nflows ? s->flows[flow].tc : 0;
}

int sim_tc_flow_set_class(struct sim *s, uint32_t flow, unsigned tc)
{
	const struct sim_tc *t = tc_of(s);
	if (flow >= s->nflows || tc >= (t ? t->n : 1))
		return -EINVAL;
	if (s->flows[flow].state != SIM_FLOW_WAIT)
		return -EBUSY;
	s->flows[flow].tc = (uint8_t)tc;
	return 0;
}

/* "traffic_classes" in summary.json: per class, the flows' FCT and slowdown and the counters. */
static void tc_summary_json(const struct sim *s, FILE *f)
{
	struct sim_tc_stats st;
	if (sim_tc_get_stats(s, &st))
		return;
	double *fct = malloc(sizeof(double) * (s->nflows + 1));
	double *slow = malloc(sizeof(double) * (s->nflows + 1));
	fprintf(f, "  \"traffic_classes\": {\"classes\": %u, \"scheduler\": \"%s\", \"per_class\": [",
		st.classes, sched_names[st.scheduler]);
	for (unsigned c = 0; c < st.classes; c++) {
		const struct sim_tc_class_stats *k = &st.c[c];
		fprintf(f, "%s\n    {\"class\": %u, \"lossless\": %s, ", c ? "," : "", c,
			st.lossless >> c & 1 ? "true" : "false");
		if (st.scheduler == SIM_TC_DWRR)
			fprintf(f, "\"quantum_bytes\": %llu, ", (unsigned long long)st.quantum_bytes[c]);
		fprintf(f, "\"flows\": %u, \"completed\": %u, ", k->flows, k->flows_done);
		uint32_t n = 0;
		for (uint32_t i = 0; fct && slow && i < s->nflows; i++) {
			const struct sim_flow *fl = &s->flows[i];
			if (fl->tc != c || !fl->recv_done)
				continue;
			double ideal = sim_time_to_us(fl->ideal_ps);
			fct[n] = sim_time_to_us(fl->finish_ps - fl->start_ps);
			slow[n] = ideal > 0 ? fct[n] / ideal : 0;
			n++;
		}
		if (fct && slow) {
			fprintf(f, "\"fct_us\": ");
			sim_json_dist(f, fct, n);
			fprintf(f, ", \"slowdown\": ");
			sim_json_dist(f, slow, n);
			fprintf(f, ", ");
		}
		fprintf(f, "\"host_tx_pkts\": %llu, \"host_tx_bytes\": %llu, \"switch_tx_pkts\": %llu, "
			   "\"switch_tx_bytes\": %llu, \"rx_bytes\": %llu, \"ecn_marks\": %llu, "
			   "\"pfc_pauses\": %llu, \"paused_us\": %.6f, \"max_queue_bytes\": %llu, "
			   "\"drops\": {\"queue_full\": %llu, \"shared_buffer_full\": %llu, "
			   "\"pfc_headroom_overflow\": %llu}}",
			(unsigned long long)k->host_tx_pkts, (unsigned long long)k->host_tx_bytes,
			(unsigned long long)k->switch_tx_pkts, (unsigned long long)k->switch_tx_bytes,
			(unsigned long long)k->rx_bytes, (unsigned long long)k->ecn_marks,
			(unsigned long long)k->pfc_pauses, sim_time_to_us(k->paused_ps),
			(unsigned long long)k->max_queue_bytes, (unsigned long long)k->drops_queue,
			(unsigned long long)k->drops_shared, (unsigned long long)k->drops_headroom);
	}
	fprintf(f, "\n  ]},\n");
	free(fct);
	free(slow);
}

/* timeseries_tc.csv: per port and class with activity in the interval, as timeseries.csv. */
static void tc_ts_sample(struct sim *s)
{
	struct sim_tc *t = tc_of(s);
	if (!t->ts)
		return;
	double iv = (double)s->ts_interval_ps;
	for (uint32_t i = 0; i < s->nports; i++) {
		const struct sim_port *p = s->ports[i];
		for (unsigned c = 0; c < t->n; c++) {
			struct tc_pc *q = pc_of(t, p, c);
			uint64_t d = q->tx_bytes - q->ts_tx_bytes;
			q->ts_tx_bytes = q->tx_bytes;
			if (!d && !q->q_bytes && !q->paused)
				continue;
			fprintf(t->ts, "%.3f,%u,%s,%s,%u,%u,%.4f,%llu,%d\n", sim_time_to_us(s->now), p->id,
				p->node->name, p->peer->node->name, p->link_tier, c,
				(double)d * 8e12 / ((double)p->rate_bps * iv), (unsigned long long)q->q_bytes,
				q->paused ? 1 : 0);
		}
	}
}

const struct sim_module_ops sim_tc_ops = {
	.name = "traffic classes",
	.params = tc_params,
	.nparams = sizeof(tc_params) / sizeof(tc_params[0]),
	.enabled = tc_enabled,
	.create = tc_create,
	.start = tc_start,
	.destroy = tc_destroy,
	.host_next = tc_host_next,
	.data_tx = tc_data_tx,
	.qdisc_enqueue = tc_enqueue,
	.qdisc_dequeue = tc_dequeue,
	.summary_json = tc_summary_json,
	.ts_sample = tc_ts_sample,
};
