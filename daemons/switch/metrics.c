/* inca-switch /metrics: the Prometheus exposition of the counters the JSON statistics show,
 * written from the same tables (stats.c), served by lib/util/httpd on a thread of its own.
 * Metric list: docs/switch.md. The data plane never waits for it: a scrape takes the control
 * lock and a worker snapshot like a stats-file write, and a slow client only holds its own
 * connection slot. */
#include "metrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cli.h"
#include "util/httpd.h"
#include "util/prom.h"

#define P "inca_switch_"

struct sw_metrics {
	struct sw_switch *sw;
	struct util_httpd *h;
	pthread_t thread;
	bool started;
	_Atomic bool stop;
};

/* inca_switch_[SCOPE]NAME, "_total" for counters. */
static const char *fam(char *buf, size_t cap, const char *scope, const struct sw_ctr *c)
{
	snprintf(buf, cap, P "%s%s%s", scope, c->name, c->type == SW_CTR_COUNTER ? "_total" : "");
	return buf;
}

static enum util_prom_type ptype(const struct sw_ctr *c)
{
	return c->type == SW_CTR_COUNTER ? UTIL_PROM_COUNTER : UTIL_PROM_GAUGE;
}

static void gauge(struct util_prom *p, const char *name, const char *help, uint64_t v)
{
	util_prom_family(p, name, help, UTIL_PROM_GAUGE);
	util_prom_sample(p, name, NULL, v);
}

/* Per tree (and per neighbour of each tree) sums, taken once per scrape. */
struct tree_sums {
	const struct sw_tree *t;
	char id[8];
	struct agg_tree_stats s;
	struct sw_qp_stats *q; /* t->nnbr */
};

static void render_trees(struct util_prom *p, struct tree_sums *ts, size_t nt)
{
	static const struct {
		const char *name, *help;
	} conf[] = {
		{ P "tree_slots", "Slots of the tree's pool." },
		{ P "tree_slot_bytes", "Largest data per packet of the tree, in bytes." },
		{ P "tree_members", "Members (hosts) of the tree at this switch." },
		{ P "tree_children", "Child switches of the tree at this switch." },
	};
	char name[96], a[32];

	util_prom_family(p, P "tree_info", "A configured tree (value 1) and its identity.",
			 UTIL_PROM_GAUGE);
	for (size_t i = 0; i < nt; i++) {
		const struct ctl_tree *ct = &ts[i].t->conf;
		char qpn[16], pkey[16], kid[16];

		snprintf(qpn, sizeof qpn, "%u", ct->qpn);
		snprintf(pkey, sizeof pkey, "%u", (unsigned)ct->pkey);
		snprintf(kid, sizeof kid, "%u", ct->auth_key_id);
		util_prom_sample(p, P "tree_info",
				 (const char *[]){ "tree", ts[i].id, "role", ct->root ? "root" : "leaf",
						   "qpn", qpn, "pkey", pkey, "auth",
						   ct->auth ? "true" : "false", "auth_key_id", kid,
						   NULL },
				 1);
	}
	for (size_t k = 0; k < sizeof conf / sizeof conf[0]; k++) {
		util_prom_family(p, conf[k].name, conf[k].help, UTIL_PROM_GAUGE);
		for (size_t i = 0; i < nt; i++) {
			const struct ctl_tree *ct = &ts[i].t->conf;
			uint64_t v = k == 0 ? ct->slots : k == 1 ? ct->slot_bytes :
				     k == 2 ? ct->nmembers : ct->nchildren;
			util_prom_sample(p, conf[k].name, (const char *[]){ "tree", ts[i].id, NULL }, v);
		}
	}
	for (size_t k = 0; k < sw_nctr_tree; k++) {
		const struct sw_ctr *c = &sw_ctr_tree[k];

		util_prom_family(p, fam(name, sizeof name, "tree_", c), c->help, ptype(c));
		for (size_t i = 0; i < nt; i++)
			util_prom_sample(p, name, (const char *[]){ "tree", ts[i].id, NULL },
					 sw_ctr_get(c, &ts[i].s));
	}
	util_prom_family(p, P "tree_drops_total", "Packets the tree's engine dropped, by reason.",
			 UTIL_PROM_COUNTER);
	for (size_t i = 0; i < nt; i++)
		for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT; v++)
			util_prom_sample(p, P "tree_drops_total",
					 (const char *[]){ "tree", ts[i].id, "reason",
							   agg_verdict_name((enum agg_verdict)v), NULL },
					 ts[i].s.drops[v]);
	for (size_t k = 0; k < sw_nctr_qp; k++) {
		const struct sw_ctr *c = &sw_ctr_qp[k];

		util_prom_family(p, fam(name, sizeof name, "qp_", c), c->help, ptype(c));
		for (size_t i = 0; i < nt; i++)
			for (uint32_t n = 0; n < ts[i].t->nnbr; n++) {
				const struct sw_nbr *nb = &ts[i].t->nbr[n];
				char bfr[8], qpn[16];

				snprintf(bfr, sizeof bfr, "%u", nb->bfr_id);
				snprintf(qpn, sizeof qpn, "%u", nb->qpn);
				util_prom_sample(p, name,
						 (const char *[]){ "tree", ts[i].id, "kind",
								   sw_nbr_kind_name(nb->kind),
								   "bfr_id", bfr, "addr",
								   util_format_addr(&nb->addr, a, sizeof a),
								   "qpn", qpn, NULL },
						 sw_ctr_get(c, &ts[i].q[n]));
			}
	}
}

/* The whole exposition from the current snapshots. Call with the switch lock held. */
static void render_locked(struct sw_metrics *m, struct util_prom *p)
{
	struct sw_switch *sw = m->sw;
	const struct sw_treeset *set = sw_switch_trees(sw);
	struct sw_counters c;
	struct sw_drop_count drops[SW_STATS_NDROPS];
	struct tree_sums *ts;
	char name[96], a[32];

	sw_stats_sum_counters(sw, &c);
	util_prom_family(p, P "info", "The running switch (value 1): version, mode, data path.",
			 UTIL_PROM_GAUGE);
	util_prom_sample(p, P "info",
			 (const char *[]){ "version", util_cli_version(), "mode",
					   sw->opts.reflect ? "reflect" : "aggregate", "io",
					   sw->xdp ? "xdp" : "sockets", "listen",
					   util_format_addr(&sw->cfg->listen, a, sizeof a), NULL },
			 1);
	util_prom_family(p, P "uptime_seconds", "Time since the switch started.", UTIL_PROM_GAUGE);
	util_prom_sample_double(p, P "uptime_seconds", NULL,
				(double)(util_now_ns() - sw->start_ns) / 1e9);
	gauge(p, P "threads", "Data-plane worker threads.", sw->nworkers);
	gauge(p, P "trees", "Trees configured.", set->ntrees);

	for (size_t k = 0; k < sw_nctr_global; k++) {
		const struct sw_ctr *ct = &sw_ctr_global[k];

		util_prom_family(p, fam(name, sizeof name, "", ct), ct->help, ptype(ct));
		util_prom_sample(p, name, NULL, sw_ctr_get(ct, &c));
	}
	sw_stats_drops(&c, drops);
	util_prom_family(p, P "drops_total",
			 "Dropped packets by reason: decoder, switch (authorisation and "
			 "authentication included) and engine reasons.", UTIL_PROM_COUNTER);
	for (size_t i = 0; i < SW_STATS_NDROPS; i++)
		util_prom_sample(p, P "drops_total",
				 (const char *[]){ "reason", drops[i].reason, NULL }, drops[i].count);
	util_prom_family(p, P "verdicts_total", "Results of the aggregation engine's input step.",
			 UTIL_PROM_COUNTER);
	for (int v = 0; v < AGG_VERDICT_COUNT; v++)
		util_prom_sample(p, P "verdicts_total",
				 (const char *[]){ "verdict", agg_verdict_name((enum agg_verdict)v),
						   NULL },
				 c.verdicts[v]);
	for (size_t k = 0; k < sw_nctr_global; k++) {
		const struct sw_ctr *ct = &sw_ctr_global[k];

		if (!(ct->flags & SW_CTR_THREAD))
			continue;
		util_prom_family(p, fam(name, sizeof name, "thread_", ct), ct->help, ptype(ct));
		for (unsigned wi = 0; wi < sw->nworkers; wi++) {
			char th[12];
			snprintf(th, sizeof th, "%u", wi);
			util_prom_sample(p, name, (const char *[]){ "thread", th, NULL },
					 sw_ctr_get(ct, &sw->w[wi].snap_cnt));
		}
	}

	ts = calloc(set->ntrees + 1, sizeof *ts);
	if (!ts) {
		p->oom = true;
		return;
	}
	for (size_t i = 0; i < set->ntrees; i++) {
		ts[i].t = set->trees[i];
		snprintf(ts[i].id, sizeof ts[i].id, "%u", ts[i].t->conf.id);
		sw_stats_sum_tree(ts[i].t, &ts[i].s);
		ts[i].q = calloc(ts[i].t->nnbr + 1, sizeof *ts[i].q);
		if (!ts[i].q) {
			p->oom = true;
			break;
		}
		for (uint32_t n = 0; n < ts[i].t->nnbr; n++)
			sw_stats_sum_qp(ts[i].t, n, &ts[i].q[n]);
	}
	if (!p->oom)
		render_trees(p, ts, set->ntrees);
	for (size_t i = 0; i < set->ntrees; i++)
		free(ts[i].q);
	free(ts);

	util_httpd_prom_stats(m->h, p, P);
}

static void render(void *arg, struct util_prom *p)
{
	struct sw_metrics *m = arg;

	sw_switch_lock(m->sw);
	sw_switch_snapshot(m->sw, 500);
	render_locked(m, p);
	sw_switch_unlock(m->sw);
}

static void *metrics_main(void *arg)
{
	struct sw_metrics *m = arg;

	while (!atomic_load(&m->stop))
		util_httpd_poll(m->h, 100); /* the stop flag is seen within 100 ms */
	return NULL;
}

int sw_metrics_start(struct sw_switch *sw, const char *addr, struct sw_metrics **out,
		     char *err, size_t cap)
{
	struct sw_metrics *m = calloc(1, sizeof *m);
	int rc;

	*out = NULL;
	if (!m) {
		snprintf(err, cap, "--metrics-listen: out of memory");
		return -ENOMEM;
	}
	m->sw = sw;
	rc = util_httpd_metrics_listen(addr, render, m, &m->h, err, cap);
	if (rc < 0) {
		free(m);
		return rc;
	}
	rc = pthread_create(&m->thread, NULL, metrics_main, m);
	if (rc) {
		snprintf(err, cap, "--metrics-listen: thread: %s", strerror(rc));
		util_httpd_destroy(m->h);
		free(m);
		return -rc;
	}
	m->started = true;
	*out = m;
	return 0;
}

const struct sockaddr_in *sw_metrics_addr(const struct sw_metrics *m)
{
	return util_httpd_addr(m->h);
}

void sw_metrics_stop(struct sw_metrics *m)
{
	if (!m)
		return;
	atomic_store(&m->stop, true);
	if (m->started)
		pthread_join(m->thread, NULL);
	util_httpd_destroy(m->h);
	free(m);
}
