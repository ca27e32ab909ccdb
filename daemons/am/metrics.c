/* inca-am /metrics (metrics.h): the Prometheus exposition of the counter table (counters.c,
 * the one GetStats is filled from) and of the AM's state, RPC counts by method and status, and
 * the endpoint's listener polled from the main loop. Metric list: docs/am.md. */
#include "metrics.h"

#include "counters.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/cli.h"
#include "util/httpd.h"
#include "util/prom.h"
#include "util/util.h"

#define P "inca_am_"

/* ---------------------------------------------------------------- RPCs */

/* Methods counted by name; anything else (an unknown method) is "other". */
static const char *const methods[] = { "Join", "Leave", "Session", "Dismantle", "ReportFailure",
				       "ListGroups", "ListTrees", "ListSwitches", "ListLinks",
				       "GetStats", "other" };
#define NMETHODS (sizeof methods / sizeof methods[0])
#define NCODES 17 /* GRPC_STATUS_OK .. GRPC_STATUS_UNAUTHENTICATED */

static const char *const code_names[NCODES] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
};

struct am_metrics {
	struct am *am;
	struct util_httpd *h;
	uint64_t rpcs[NMETHODS][NCODES];
};

void am_metrics_rpc_done(struct am_metrics *m, const char *method, grpc_status_code code)
{
	const char *slash = strrchr(method, '/');
	size_t i;

	if (!m)
		return;
	if (slash && strncmp(method, AM_RPC_SERVICE, strlen(AM_RPC_SERVICE)) == 0)
		method = slash + 1;
	else
		method = "other";
	for (i = 0; i + 1 < NMETHODS && strcmp(methods[i], method) != 0; i++)
		;
	if ((unsigned)code >= NCODES)
		code = GRPC_STATUS_UNKNOWN;
	m->rpcs[i][code]++;
}

/* ---------------------------------------------------------------- exposition */

static void gauge1(struct util_prom *p, const char *name, const char *help, uint64_t v)
{
	util_prom_family(p, name, help, UTIL_PROM_GAUGE);
	util_prom_sample(p, name, NULL, v);
}

static void render_switches(struct util_prom *p, struct am *am)
{
	static const struct {
		const char *name, *help;
	} fams[] = {
		{ P "switch_up", "Whether the switch answered its last poll (1) or not (0)." },
		{ P "switch_max_trees", "Trees the switch admits." },
		{ P "switch_used_trees", "Trees on the switch (this AM's and others')." },
		{ P "switch_max_slots", "Slots the switch admits over all trees." },
		{ P "switch_used_slots", "Slots of the trees on the switch." },
		{ P "switch_am_trees", "Trees on the switch held by this AM's groups." },
		{ P "switch_am_slots", "Slots on the switch held by this AM's groups." },
	};
	uint64_t up = 0;

	am_account(am);
	for (size_t i = 0; i < am->nsw; i++)
		up += am->sw[i].up;
	util_prom_family(p, P "switches", "Switches configured, by reachability.", UTIL_PROM_GAUGE);
	util_prom_sample(p, P "switches", (const char *[]){ "state", "up", NULL }, up);
	util_prom_sample(p, P "switches", (const char *[]){ "state", "down", NULL }, am->nsw - up);
	for (size_t k = 0; k < sizeof fams / sizeof fams[0]; k++) {
		util_prom_family(p, fams[k].name, fams[k].help, UTIL_PROM_GAUGE);
		for (size_t i = 0; i < am->nsw; i++) {
			const struct am_switch *s = &am->sw[i];
			uint64_t v = k == 0 ? s->up : k == 1 ? s->caps.max_trees :
				     k == 2 ? s->caps.used_trees : k == 3 ? s->caps.max_slots :
				     k == 4 ? s->caps.used_slots : k == 5 ? s->am_trees : s->am_slots;
			util_prom_sample(p, fams[k].name,
					 (const char *[]){ "switch", s->cfg->name, NULL }, v);
		}
	}
}

static void render(void *arg, struct util_prom *p)
{
	struct am_metrics *m = arg;
	struct am *am = m->am;
	static const enum am_gstate states[] = { AM_G_FORMING, AM_G_READY, AM_G_FALLBACK,
						 AM_G_DISMANTLED };
	uint64_t sessions = 0;
	char name[96];

	util_prom_family(p, P "info", "The running AM (value 1): version and transport.",
			 UTIL_PROM_GAUGE);
	util_prom_sample(p, P "info",
			 (const char *[]){ "version", util_cli_version(), "tls",
					   am->cfg.tls_cert[0] ? "true" : "false", "journal",
					   am->cfg.journal[0] ? "true" : "false", NULL },
			 1);
	util_prom_family(p, P "uptime_seconds", "Time since the AM started.", UTIL_PROM_GAUGE);
	util_prom_sample_double(p, P "uptime_seconds", NULL,
				(double)(util_now_ns() - am->start_ns) / 1e9);
	for (size_t i = 0; i < am_nctrs; i++) {
		const struct am_ctr *c = &am_ctrs[i];

		if (c->prom_skip) /* shown in Prometheus' own unit above */
			continue;
		snprintf(name, sizeof name, P "%s%s", c->name, c->gauge ? "" : "_total");
		util_prom_family(p, name, c->help, c->gauge ? UTIL_PROM_GAUGE : UTIL_PROM_COUNTER);
		util_prom_sample(p, name, NULL, am_ctr_value(c, am));
	}

	util_prom_family(p, P "groups", "Groups the AM holds, by state.", UTIL_PROM_GAUGE);
	for (size_t k = 0; k < sizeof states / sizeof states[0]; k++) {
		uint64_t n = 0;
		for (const struct am_group *g = am->groups; g; g = g->next)
			n += g->state == states[k];
		util_prom_sample(p, P "groups",
				 (const char *[]){ "state", am_state_name(states[k]), NULL }, n);
	}
	for (const struct am_group *g = am->groups; g; g = g->next)
		for (uint32_t r = 0; r < g->size; r++)
			sessions += g->m[r].joined && g->m[r].sess;
	gauge1(p, P "sessions", "Member session streams open.", sessions);
	render_switches(p, am);

	util_prom_family(p, P "rpcs_total", "gRPC calls answered, by method and status code.",
			 UTIL_PROM_COUNTER);
	for (size_t i = 0; i < NMETHODS; i++)
		for (size_t c = 0; c < NCODES; c++)
			if (m->rpcs[i][c] || (c == 0 && i + 1 < NMETHODS))
				util_prom_sample(p, P "rpcs_total",
						 (const char *[]){ "method", methods[i], "code",
								   code_names[c], NULL },
						 m->rpcs[i][c]);

	util_httpd_prom_stats(m->h, p, P);
}

int am_metrics_start(struct am *am, const char *addr, struct am_metrics **out, char *err,
		     size_t cap)
{
	struct am_metrics *m = calloc(1, sizeof *m);
	struct sockaddr_in asked;
	char a[32];
	int rc;

	*out = NULL;
	if (!m) {
		snprintf(err, cap, "--metrics-listen: out of memory");
		return -ENOMEM;
	}
	m->am = am;
	rc = util_httpd_metrics_listen(addr, render, m, &m->h, err, cap);
	if (rc < 0) {
		free(m);
		return rc;
	}
	util_format_addr(util_httpd_addr(m->h), a, sizeof a);
	/* With port 0 the log is the only place the port shows: say it at any verbosity. */
	am_log(util_parse_addr(addr, -1, &asked) == 0 && asked.sin_port == 0 ? 0 : 1,
	       "metrics on http://%s/metrics", a);
	*out = m;
	return 0;
}

void am_metrics_poll(struct am_metrics *m)
{
	if (m)
		util_httpd_poll(m->h, 0);
}

void am_metrics_stop(struct am_metrics *m)
{
	if (!m)
		return;
	util_httpd_destroy(m->h);
	free(m);
}
