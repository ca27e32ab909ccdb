/* inca-am periodic work (am_tick): switch answers and polls, member heartbeats, the health
 * of READY groups' trees and the rebuild of groups that lost theirs, first-joiner expiry.
 * What establishing or dismantling a group does is groups.c. Main loop only. */
#include <stdio.h>

#include "am.h"
#include "util/util.h"

#define EV(k) INCA__AM__V1__GROUP_EVENT__KIND__##k

/* A READY group's tree is healthy when every switch is up, runs the tree with our key, and
 * every child still reaches the root. */
static bool tree_healthy(struct am *am, const struct am_group *g, char *why, size_t cap)
{
	struct am_sw_view v[AM_MAX_SWITCHES];

	am_build_views(am, v);
	for (size_t k = 0; k < g->plan.nsw; k++) {
		const struct am_plan_sw *ps = &g->plan.sws[k];
		const struct am_switch *s = &am->sw[ps->sw];
		const struct ctl_tree *t;
		if (!s->up) {
			snprintf(why, cap, "switch %s failed", s->cfg->name);
			return false;
		}
		t = am_running_find(s, ps->tree.id);
		/* A snapshot asked for before the group became ready may predate the push. */
		if (s->snap_ns >= g->state_ns &&
		    (!t || t->key != ps->tree.key || t->auth != ps->tree.auth ||
		     t->auth_key_id != ps->tree.auth_key_id)) {
			snprintf(why, cap, "switch %s lost tree %u", s->cfg->name, ps->tree.id);
			return false;
		}
		if (ps->parent >= 0 && !am_connected(&v[ps->sw], &v[ps->parent])) {
			snprintf(why, cap, "link %s-%s down", s->cfg->name,
				 am->sw[ps->parent].cfg->name);
			return false;
		}
	}
	return true;
}

static void check_groups(struct am *am, bool polled)
{
	uint64_t now = util_now_ns();
	uint64_t hb_timeout = (uint64_t)am->cfg.heartbeat_ms * am->cfg.heartbeat_misses * NS_PER_MS;
	struct am_group *g, *next;
	char why[200];

	for (g = am->groups; g; g = next) {
		bool any_alive = false, removed = false;
		next = g->next;
		for (uint32_t r = 0; r < g->size && !removed; r++) {
			struct am_member *m = &g->m[r];
			if (!m->joined || m->left)
				continue;
			if (now > m->last_hb_ns && now - m->last_hb_ns > hb_timeout) {
				am->st.heartbeat_timeouts++;
				am_log(0, "group %llu rank %u: heartbeat lost", (unsigned long long)g->id,
				       r);
				if (g->state == AM_G_FORMING && !g->op) {
					m->joined = false;
					g->joined--;
					am_notify_all(am, g, EV(WAITING));
					am_journal_group(am, g);
					continue;
				}
				m->left = true;
				if (g->state != AM_G_DISMANTLED) {
					snprintf(why, sizeof why, "rank %u heartbeat lost", r);
					am_dismantle(am, g, why, true);
				}
				continue;
			}
			any_alive = true;
		}
		if (!any_alive) {
			am_group_remove(am, g);
			continue;
		}
		if (!polled)
			continue;
		if (g->op)
			continue; /* a push or a re-check decides */
		if (g->state == AM_G_FORMING && g->joined == g->size) {
			/* complete but never pushed: recovered from the journal of an AM that
			 * stopped while pushing */
			am_establish(am, g, false);
		} else if (g->state == AM_G_READY && !tree_healthy(am, g, why, sizeof why)) {
			am_log(0, "group %llu: %s: rebuilding", (unsigned long long)g->id, why);
			am->st.dismantles++;
			am_group_set_state(g, AM_G_FALLBACK, why);
			if (!am_release_tree(am, g, true))
				am_establish(am, g, true);
		} else if (g->state == AM_G_FALLBACK && g->rebuildable) {
			am_establish(am, g, true); /* quiet while the reason stays the same */
		}
	}
}

void am_tick(struct am *am)
{
	uint64_t now = util_now_ns();

	am_sw_drain(am);
	if (now - am->last_poll_ns >= (uint64_t)am->cfg.poll_ms * NS_PER_MS) {
		/* A switch whose last poll is still out (a slow or stopped one) is not asked
		 * again: its worker's timeout answers for it. */
		for (size_t i = 0; i < am->nsw; i++)
			if (!am->sw[i].polls_pending)
				am_sw_poll(am, i, 0, 0);
		am->last_poll_ns = now;
	}
	check_groups(am, am->sw_polled);
	am->sw_polled = false;
	am_learned_expire(am, now);
}

bool am_switch_work_pending(const struct am *am)
{
	for (const struct am_group *g = am->groups; g; g = g->next)
		if (g->op)
			return true;
	return false;
}
