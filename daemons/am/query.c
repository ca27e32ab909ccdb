/* inca-am query replies (ListGroups, ListTrees, ListSwitches, ListLinks, GetStats): protobuf
 * messages built in one arena per reply, showing a job's caller its own groups only and the
 * admin everything. Main loop only. */
#include <stdlib.h>
#include <string.h>

#include "am.h"
#include "util/util.h"


struct am_qreply {
	void **p;
	size_t n, cap;
	ProtobufCMessage *msg;
};

static void *qalloc(struct am_qreply *q, size_t len)
{
	void *x;

	if (q->n == q->cap) {
		size_t nc = q->cap ? q->cap * 2 : 64;
		void **np = realloc(q->p, nc * sizeof *np);
		if (!np)
			abort();
		q->p = np;
		q->cap = nc;
	}
	x = calloc(1, len ? len : 1);
	if (!x)
		abort();
	q->p[q->n++] = x;
	return x;
}

static char *qstr(struct am_qreply *q, const char *s)
{
	char *d = qalloc(q, strlen(s) + 1);
	memcpy(d, s, strlen(s));
	return d;
}

const ProtobufCMessage *am_qreply_msg(const struct am_qreply *r)
{
	return r->msg;
}

void am_qreply_free(struct am_qreply *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		free(r->p[i]);
	free(r->p);
	free(r);
}

static const char *role_name(enum am_role r)
{
	return r == AM_ROLE_SPINE ? "spine" : r == AM_ROLE_LEAF ? "leaf" : "";
}

static Inca__Am__V1__SwitchTree *q_switch_tree(struct am_qreply *q, struct am *am,
					       const struct am_group *g, size_t k)
{
	const struct am_plan_sw *ps = &g->plan.sws[k];
	const struct ctl_tree *t = &ps->tree;
	const struct am_switch *s = &am->sw[ps->sw];
	Inca__Am__V1__SwitchTree *st = qalloc(q, sizeof *st);
	const struct ctl_tree *run = am_running_find(s, t->id);
	size_t na = t->nmembers, nc = 0;

	inca__am__v1__switch_tree__init(st);
	st->switch_name = qstr(q, s->cfg->name);
	st->role = qstr(q, t->root ? "root" : "leaf");
	st->data_addr = qstr(q, s->caps.data_addr);
	st->qpn = t->qpn;
	st->parent = qstr(q, ps->parent >= 0 ? am->sw[ps->parent].cfg->name : "");
	st->member_bfr_ids = qalloc(q, (t->nmembers + 1) * sizeof(uint32_t));
	st->n_member_bfr_ids = t->nmembers;
	for (size_t i = 0; i < t->nmembers; i++)
		st->member_bfr_ids[i] = t->members[i].bfr_id;
	for (size_t c = 0; c < t->nchildren; c++)
		na += t->children[c].nbfr;
	st->a_bm = qalloc(q, (na + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < t->nmembers; i++)
		st->a_bm[st->n_a_bm++] = t->members[i].bfr_id;
	for (size_t c = 0; c < t->nchildren; c++)
		for (size_t i = 0; i < t->children[c].nbfr; i++)
			st->a_bm[st->n_a_bm++] = t->children[c].bfr_ids[i];
	st->children = qalloc(q, (g->plan.nsw + 1) * sizeof(char *));
	for (size_t j = 0; j < g->plan.nsw; j++)
		if (g->plan.sws[j].parent == ps->sw)
			st->children[nc++] = qstr(q, am->sw[g->plan.sws[j].sw].cfg->name);
	st->n_children = nc;
	st->running = run && run->key == t->key;
	return st;
}

static bool visible(const struct am_group *g, const struct am_auth *who)
{
	return who->who == AM_CALLER_ADMIN ||
	       (who->who == AM_CALLER_JOB && strcmp(g->job, who->job) == 0);
}

static void q_groups(struct am_qreply *q, struct am *am, const struct am_auth *who)
{
	Inca__Am__V1__ListGroupsReply *rp = qalloc(q, sizeof *rp);
	size_t n = 0, i = 0;
	uint64_t now = util_now_ns();

	inca__am__v1__list_groups_reply__init(rp);
	for (struct am_group *g = am->groups; g; g = g->next)
		n += visible(g, who);
	rp->groups = qalloc(q, (n + 1) * sizeof *rp->groups);
	rp->n_groups = n;
	for (struct am_group *g = am->groups; g; g = g->next) {
		Inca__Am__V1__GroupInfo *gi;
		size_t nm = 0;
		if (!visible(g, who))
			continue;
		gi = qalloc(q, sizeof *gi);
		inca__am__v1__group_info__init(gi);
		rp->groups[n - 1 - i++] = gi; /* oldest first */
		gi->group_id = g->id;
		gi->job_id = qstr(q, g->job);
		gi->group_name = qstr(q, g->name);
		gi->size = g->size;
		gi->joined = g->joined;
		gi->state = qstr(q, am_state_name(g->state));
		gi->reason = qstr(q, g->reason);
		gi->generation = g->generation;
		gi->age_ms = (now - g->created_ns) / NS_PER_MS;
		gi->root_switch = qstr(q, "");
		if (g->plan.ok) {
			gi->tree_id = g->plan.sws[0].tree.id;
			gi->auth_key_id = g->plan.sws[0].tree.auth_key_id;
			gi->slots = g->plan.slots;
			gi->bsl_bits = g->plan.bsl_bits;
			gi->mtu = g->plan.mtu;
			gi->root_switch = qstr(q, am->sw[g->plan.root].cfg->name);
			gi->tree = qalloc(q, (g->plan.nsw + 1) * sizeof *gi->tree);
			gi->n_tree = g->plan.nsw;
			for (size_t k = 0; k < g->plan.nsw; k++) /* root first for display */
				gi->tree[k] = q_switch_tree(q, am, g, g->plan.nsw - 1 - k);
		}
		gi->members = qalloc(q, (g->size + 1) * sizeof *gi->members);
		for (uint32_t r = 0; r < g->size; r++) {
			const struct am_member *m = &g->m[r];
			Inca__Am__V1__MemberInfo *mi;
			if (!m->joined)
				continue;
			mi = qalloc(q, sizeof *mi);
			inca__am__v1__member_info__init(mi);
			mi->rank = r;
			mi->bfr_id = m->bfr_id;
			mi->host_name = qstr(q, m->host);
			mi->data_addr = qstr(q, m->addr);
			mi->qpn = m->qpn;
			mi->attach_switch = qstr(q, m->attach >= 0 ? am->sw[m->attach].cfg->name : "");
			mi->send_switch = qstr(q, g->plan.ok ? am->sw[g->plan.send_sw[r]].cfg->name : "");
			mi->session_up = m->sess != NULL;
			mi->last_heartbeat_ms_ago = now > m->last_hb_ns ? (now - m->last_hb_ns) / NS_PER_MS : 0;
			gi->members[nm++] = mi;
		}
		gi->n_members = nm;
	}
	q->msg = &rp->base;
}

static void q_trees(struct am_qreply *q, struct am *am, const struct am_auth *who)
{
	Inca__Am__V1__ListTreesReply *rp = qalloc(q, sizeof *rp);
	size_t n = 0;

	inca__am__v1__list_trees_reply__init(rp);
	for (struct am_group *g = am->groups; g; g = g->next)
		n += g->plan.ok ? g->plan.nsw : 0;
	rp->trees = qalloc(q, (n + 1) * sizeof *rp->trees);
	for (struct am_group *g = am->groups; g; g = g->next)
		for (size_t k = 0; g->plan.ok && visible(g, who) && k < g->plan.nsw; k++) {
			Inca__Am__V1__TreeEntry *te = qalloc(q, sizeof *te);
			inca__am__v1__tree_entry__init(te);
			te->group_id = g->id;
			te->tree_id = g->plan.sws[k].tree.id;
			te->slots = g->plan.slots;
			te->sw = q_switch_tree(q, am, g, k);
			rp->trees[rp->n_trees++] = te;
		}
	q->msg = &rp->base;
}

static void q_switches(struct am_qreply *q, struct am *am)
{
	Inca__Am__V1__ListSwitchesReply *rp = qalloc(q, sizeof *rp);

	inca__am__v1__list_switches_reply__init(rp);
	am_account(am);
	rp->switches = qalloc(q, (am->nsw + 1) * sizeof *rp->switches);
	rp->n_switches = am->nsw;
	for (size_t i = 0; i < am->nsw; i++) {
		const struct am_switch *s = &am->sw[i];
		Inca__Am__V1__SwitchInfo *si = qalloc(q, sizeof *si);
		inca__am__v1__switch_info__init(si);
		si->name = qstr(q, s->cfg->name);
		si->target = qstr(q, s->cfg->target);
		si->data_addr = qstr(q, s->caps.data_addr);
		si->role = qstr(q, role_name(am_sw_role(s)));
		si->up = s->up;
		si->max_trees = s->caps.max_trees;
		si->used_trees = s->caps.used_trees;
		si->max_slots = s->caps.max_slots;
		si->used_slots = s->caps.used_slots;
		si->max_bsl_bits = s->caps.max_bsl_bits;
		si->max_slot_bytes = s->caps.max_slot_bytes;
		si->dtype_mask = s->caps.dtype_mask;
		si->op_mask = s->caps.op_mask;
		si->last_error = qstr(q, s->err);
		si->am_slots = s->am_slots;
		si->am_trees = s->am_trees;
		rp->switches[i] = si;
	}
	q->msg = &rp->base;
}

static void q_links(struct am_qreply *q, struct am *am)
{
	Inca__Am__V1__ListLinksReply *rp = qalloc(q, sizeof *rp);
	size_t n = 0;

	inca__am__v1__list_links_reply__init(rp);
	for (size_t i = 0; i < am->nsw; i++)
		n += am->sw[i].caps.nlinks;
	rp->links = qalloc(q, (n + 1) * sizeof *rp->links);
	for (size_t i = 0; i < am->nsw; i++)
		for (size_t l = 0; l < am->sw[i].caps.nlinks; l++) {
			const struct ctl_link *k = &am->sw[i].caps.links[l];
			Inca__Am__V1__LinkInfo *li = qalloc(q, sizeof *li);
			inca__am__v1__link_info__init(li);
			li->switch_name = qstr(q, am->sw[i].cfg->name);
			li->port = qstr(q, k->port);
			li->peer = qstr(q, k->peer);
			li->peer_addr = qstr(q, k->peer_addr);
			li->speed_bps = k->speed_bps;
			li->up = k->up;
			li->peer_kind = qstr(q, am_sw_index(am, k->peer) >= 0 ? "switch" : "host");
			rp->links[rp->n_links++] = li;
		}
	q->msg = &rp->base;
}

/* The counters are the AM's (no job ids or addresses); active_groups counts what the caller
 * may see. */
static void q_stats(struct am_qreply *q, struct am *am, const struct am_auth *who)
{
	Inca__Am__V1__StatsReply *rp = qalloc(q, sizeof *rp);
	const struct am_stats *s = &am->st;

	inca__am__v1__stats_reply__init(rp);
	rp->uptime_ms = (util_now_ns() - am->start_ns) / NS_PER_MS;
	rp->joins = s->joins;
	rp->joins_denied = s->joins_denied;
	rp->sessions_denied = s->sessions_denied;
	rp->groups_created = s->groups_created;
	rp->groups_ready = s->groups_ready;
	rp->groups_fallback = s->groups_fallback;
	rp->dismantles = s->dismantles;
	rp->rebuilds = s->rebuilds;
	rp->heartbeat_timeouts = s->heartbeat_timeouts;
	rp->switch_failures = s->switch_failures;
	rp->push_failures = s->push_failures;
	rp->journal_records = s->journal_records;
	rp->recovered_groups = s->recovered_groups;
	rp->rpc_unimplemented = s->rpc_unimplemented;
	rp->operator_denied = s->operator_denied;
	rp->failure_reports = s->failure_reports;
	rp->failure_reports_denied = s->failure_reports_denied;
	rp->failure_reports_stale = s->failure_reports_stale;
	rp->journal_damaged_records = s->journal_damaged_records;
	rp->orphan_trees_removed = s->orphan_trees_removed;
	rp->queries_denied = s->queries_denied;
	rp->learned_jobs = am->nlearned;
	rp->learned_expired = s->learned_expired;
	for (struct am_group *g = am->groups; g; g = g->next)
		rp->active_groups += visible(g, who);
	q->msg = &rp->base;
}

struct am_qreply *am_query(struct am *am, const char *method, const struct am_auth *who)
{
	struct am_qreply *q = calloc(1, sizeof *q);

	if (!q)
		return NULL;
	if (strcmp(method, "ListGroups") == 0)
		q_groups(q, am, who);
	else if (strcmp(method, "ListTrees") == 0)
		q_trees(q, am, who);
	else if (strcmp(method, "ListSwitches") == 0)
		q_switches(q, am);
	else if (strcmp(method, "ListLinks") == 0)
		q_links(q, am);
	else if (strcmp(method, "GetStats") == 0)
		q_stats(q, am, who);
	if (!q->msg) {
		am_qreply_free(q);
		return NULL;
	}
	return q;
}
