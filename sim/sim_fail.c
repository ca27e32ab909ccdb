/* sim/sim_fail.c: timed link failures in inca-sim: links go down / come back up / degrade (rate
 * reduced, random loss) at configured times, and the "slow control plane" baseline that only
 * recomputes routes a configured delay after each change. A simulator module (sim_module.h):
 * other modules hear of every change through their link_change hook and may fail over on their
 * own, and learn a link's loss through sim_module_port_loss. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

enum { FA_DOWN, FA_UP, FA_DEGRADE };

struct fail_ev {
	struct sim_event ev;
	sim_time_ps t;
	struct sim_port *port;   /* one end (a switch port); the other is port->peer */
	int action;
	double rate, loss;       /* degrade: rate factor (1 = unchanged), loss probability */
};

struct fail_reroute {
	struct sim_event ev;
	struct fail_reroute *next;
};

struct sim_fail {
	struct fail_ev evs[8];
	unsigned nevs;
	double *loss;            /* per port id: loss probability of what it transmits */
	uint64_t *orig_rate;     /* per port id */
	struct fail_reroute *rr;
	struct util_rng rng;
	struct sim_fail_stats st;
};

static inline struct sim_fail *fail_of(const struct sim *s)
{
	return s->mod[SIM_MOD_fail];
}

static bool fail_enabled(const struct sim_config *c)
{
	for (unsigned i = 0; i < 8; i++)
		if (c->fail_event[i][0])
			return true;
	return false;
}

/* "A-B" or "A-B#n" (n-th parallel link, from 1). Node names may contain '-' (lyu4), so every
 * split point is tried. */
static struct sim_port *find_link(struct sim *s, const char *spec)
{
	char buf[128];
	unsigned nth = 1;
	snprintf(buf, sizeof(buf), "%s", spec);
	char *hash = strchr(buf, '#');
	if (hash) {
		*hash = 0;
		nth = (unsigned)atoi(hash + 1);
		if (!nth)
			return NULL;
	}
	size_t len = strlen(buf);
	for (size_t i = 1; i + 1 < len; i++) {
		if (buf[i] != '-')
			continue;
		struct sim_node *a = sim_topo_node_by_name(s, buf, i);
		struct sim_node *b = sim_topo_node_by_name(s, buf + i + 1, len - i - 1);
		if (!a || !b || a->kind != SIM_NODE_SWITCH || b->kind != SIM_NODE_SWITCH)
			continue;
		unsigned k = 0;
		for (uint32_t p = 0; p < a->nports; p++)
			if (a->ports[p].peer->node == b && ++k == nth)
				return &a->ports[p];
	}
	return NULL;
}

static int parse_event(struct sim *s, const char *text, struct fail_ev *fe)
{
	char link[128], act[16], opt[2][32] = { "", "" };
	double t_us;
	int n = sscanf(text, "%lf %127s %15s %31s %31s", &t_us, link, act, opt[0], opt[1]);
	if (n < 3 || t_us < 0 || t_us > 1e11)
		return -EINVAL;
	fe->t = sim_time_from_us_f(t_us);
	fe->port = find_link(s, link);
	if (!fe->port)
		return -ENOENT;
	fe->rate = 1;
	fe->loss = 0;
	if (!strcmp(act, "down"))
		fe->action = FA_DOWN;
	else if (!strcmp(act, "up"))
		fe->action = FA_UP;
	else if (!strcmp(act, "degrade"))
		fe->action = FA_DEGRADE;
	else
		return -EINVAL;
	for (int i = 0; i < n - 3; i++) {
		char *end;
		if (!strncmp(opt[i], "rate=", 5)) {
			fe->rate = strtod(opt[i] + 5, &end);
			if (*end || !(fe->rate > 0.001 && fe->rate <= 1))
				return -EINVAL;
		} else if (!strncmp(opt[i], "loss=", 5)) {
			fe->loss = strtod(opt[i] + 5, &end);
			if (*end || !(fe->loss >= 0 && fe->loss <= 1))
				return -EINVAL;
		} else {
			return -EINVAL;
		}
	}
	if (fe->action != FA_DEGRADE && n > 3)
		return -EINVAL;
	return 0;
}

static void reroute_fire(struct sim *s, struct sim_event *ev)
{
	(void)ev;
	struct sim_fail *fl = fail_of(s);
	if (sim_topo_reroute(s) != 0) {
		s->finished = true;
		sim_set_err(s, "failure: route recomputation failed (out of memory)");
		return;
	}
	fl->st.reroutes++;
	fl->st.last_reroute_ps = s->now;
}

static void set_link(struct sim *s, struct fail_ev *fe)
{
	struct sim_fail *fl = fail_of(s);
	struct sim_port *ends[2] = { fe->port, fe->port->peer };
	bool was_down = fe->port->down;
	for (int i = 0; i < 2; i++) {
		struct sim_port *p = ends[i];
		switch (fe->action) {
		case FA_DOWN:
			p->down = true;
			break;
		case FA_UP:
			p->down = false;
			p->rate_bps = fl->orig_rate[p->id];
			fl->loss[p->id] = 0;
			break;
		case FA_DEGRADE:
			p->rate_bps = (uint64_t)((double)fl->orig_rate[p->id] * fe->rate + 0.5);
			fl->loss[p->id] = fe->loss;
			break;
		}
	}
	if (fe->action == FA_DOWN && fl->st.first_down_ps == SIM_TIME_NEVER)
		fl->st.first_down_ps = s->now;
	bool topo_change = (fe->action == FA_DOWN && !was_down) || (fe->action == FA_UP && was_down);
	bool rerouted = topo_change && sim_module_link_change(s, fe->port, fe->action == FA_DOWN);
	/* The slow control plane: only routes computed again after the delay avoid the link. */
	if (topo_change && !rerouted && s->cfg.fail_reroute_delay_us > 0) {
		struct fail_reroute *r = calloc(1, sizeof(*r));
		if (r) {
			sim_ev_init(&r->ev, reroute_fire);
			r->next = fl->rr;
			fl->rr = r;
			sim_schedule(s, &r->ev, s->now + sim_time_from_us_f(s->cfg.fail_reroute_delay_us));
		}
	}
	for (int i = 0; i < 2; i++) /* a dead port drops its queue; a live one resumes */
		if (ends[i]->node->kind == SIM_NODE_SWITCH)
			sim_port_kick(s, ends[i]);
}

static void fail_fire(struct sim *s, struct sim_event *ev)
{
	struct fail_ev *fe = SIM_CONTAINER_OF(ev, struct fail_ev, ev);
	fail_of(s)->st.events_applied++;
	set_link(s, fe);
}

static int fail_start(struct sim *s)
{
	const struct sim_config *c = &s->cfg;
	if (c->fail_reroute_delay_us > 1e11) {
		sim_set_err(s, "failure.reroute_delay_us must be <= 1e11");
		return -EINVAL;
	}
	struct sim_fail *fl = calloc(1, sizeof(*fl));
	if (!fl)
		return -ENOMEM;
	s->mod[SIM_MOD_fail] = fl;
	fl->st.first_down_ps = SIM_TIME_NEVER;
	fl->loss = calloc(s->nports, sizeof(*fl->loss));
	fl->orig_rate = calloc(s->nports, sizeof(*fl->orig_rate));
	if (!fl->loss || !fl->orig_rate)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->nports; i++)
		fl->orig_rate[i] = s->ports[i]->rate_bps;
	sim_rng_init(s, &fl->rng, 6, 0);
	for (unsigned i = 0; i < 8; i++) {
		if (!c->fail_event[i][0])
			continue;
		struct fail_ev *fe = &fl->evs[fl->nevs];
		int rc = parse_event(s, c->fail_event[i], fe);
		if (rc) {
			snprintf(s->err, sizeof(s->err), "failure.event%u: %s: '%s'", i + 1,
				 rc == -ENOENT ? "no such switch-to-switch link" : "expected 'T_us A-B[#n] down|up|degrade [rate=f] [loss=p]'",
				 c->fail_event[i]);
			return rc;
		}
		sim_ev_init(&fe->ev, fail_fire);
		sim_schedule(s, &fe->ev, fe->t);
		fl->nevs++;
	}
	return 0;
}

static void fail_destroy(struct sim *s)
{
	struct sim_fail *fl = fail_of(s);
	if (!fl)
		return;
	while (fl->rr) {
		struct fail_reroute *r = fl->rr;
		fl->rr = r->next;
		free(r);
	}
	free(fl->loss);
	free(fl->orig_rate);
	free(fl);
	s->mod[SIM_MOD_fail] = NULL;
}

static bool fail_link_lost(struct sim *s, struct sim_pkt *p)
{
	struct sim_fail *fl = fail_of(s);
	if (p->type != SIM_PKT_DATA)
		return false; /* loss hits data only (control frames are small) */
	double l = fl->loss[p->rx_port->peer->id];
	if (l <= 0 || util_rng_double(&fl->rng) >= l)
		return false;
	fl->st.drops_loss++;
	return true;
}

static double fail_port_loss(const struct sim *s, const struct sim_port *port)
{
	return fail_of(s)->loss[port->id];
}

static void fail_pkt_drop(struct sim *s, struct sim_pkt *p, const struct sim_port *at,
			  enum sim_drop_why why)
{
	(void)p;
	(void)at;
	if (why == SIM_DROP_PORT_DOWN || why == SIM_DROP_ROUTED_DOWN)
		fail_of(s)->st.drops_down++;
}

int sim_fail_get_stats(const struct sim *s, struct sim_fail_stats *st)
{
	if (!fail_of(s))
		return -ENOENT;
	*st = fail_of(s)->st;
	return 0;
}

static int fail_write_outputs(struct sim *s, const char *dir)
{
	struct sim_fail_stats st;
	char path[SIM_PATH_MAX + 32];
	if (sim_fail_get_stats(s, &st))
		return 0;
	snprintf(path, sizeof(path), "%s/fail.json", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "{\n  \"events_applied\": %llu,\n  \"drops_link_down\": %llu,\n  \"drops_loss\": %llu,\n"
		"  \"reroutes\": %llu,\n  \"first_down_us\": %.6f,\n  \"last_reroute_us\": %.6f\n}\n",
		(unsigned long long)st.events_applied, (unsigned long long)st.drops_down,
		(unsigned long long)st.drops_loss, (unsigned long long)st.reroutes,
		st.first_down_ps == SIM_TIME_NEVER ? -1 : sim_time_to_us(st.first_down_ps),
		st.reroutes ? sim_time_to_us(st.last_reroute_ps) : -1);
	fclose(f);
	return 0;
}

static const struct sim_param fail_params[] = {
	{ "failure", "event1", SIM_P_STR, SIM_PARAM_FIELD(fail_event[0]), "", NULL, "'T_us nodeA-nodeB[#n] down|up|degrade [rate=f] [loss=p]' (also event2 .. event8)" },
	{ "failure", "event2", SIM_P_STR, SIM_PARAM_FIELD(fail_event[1]), "", NULL, "see event1" },
	{ "failure", "event3", SIM_P_STR, SIM_PARAM_FIELD(fail_event[2]), "", NULL, "see event1" },
	{ "failure", "event4", SIM_P_STR, SIM_PARAM_FIELD(fail_event[3]), "", NULL, "see event1" },
	{ "failure", "event5", SIM_P_STR, SIM_PARAM_FIELD(fail_event[4]), "", NULL, "see event1" },
	{ "failure", "event6", SIM_P_STR, SIM_PARAM_FIELD(fail_event[5]), "", NULL, "see event1" },
	{ "failure", "event7", SIM_P_STR, SIM_PARAM_FIELD(fail_event[6]), "", NULL, "see event1" },
	{ "failure", "event8", SIM_P_STR, SIM_PARAM_FIELD(fail_event[7]), "", NULL, "see event1" },
	{ "failure", "reroute_delay_us", SIM_P_DBL, SIM_PARAM_FIELD(fail_reroute_delay_us), "0", NULL, "slow control plane: routes recomputed this long after a link change (0 = never)" },
};

const struct sim_module_ops sim_fail_ops = {
	.name = "failure",
	.params = fail_params,
	.nparams = sizeof(fail_params) / sizeof(fail_params[0]),
	.enabled = fail_enabled,
	.start = fail_start,
	.destroy = fail_destroy,
	.link_lost = fail_link_lost,
	.pkt_drop = fail_pkt_drop,
	.port_loss = fail_port_loss,
	.write_outputs = fail_write_outputs,
};
