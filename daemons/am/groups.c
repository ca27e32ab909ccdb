/* inca-am state: switches (NETCONF polling through lib/ctl), groups and their lifecycle
 * (join, establishment, dismantling, rebuilds, heartbeats) and job credentials. The journal
 * is journal.c, the query replies query.c. Main loop only. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "am.h"
#include "inca/inca.h"
#include "util/util.h"

#define EV(k) INCA__AM__V1__GROUP_EVENT__KIND__##k

static uint64_t rnd64(void)
{
	uint64_t v = 0;

	while (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
		;
	return v;
}

const char *am_state_name(enum am_gstate s)
{
	switch (s) {
	case AM_G_FORMING:
		return "forming";
	case AM_G_READY:
		return "ready";
	case AM_G_FALLBACK:
		return "fallback";
	default:
		return "dismantled";
	}
}

int am_sw_index(const struct am *am, const char *name)
{
	for (size_t i = 0; i < am->nsw; i++)
		if (strcmp(am->sw[i].cfg->name, name) == 0)
			return (int)i;
	return -1;
}

static struct am_group *group_find(struct am *am, uint64_t id)
{
	for (struct am_group *g = am->groups; g; g = g->next)
		if (g->id == id)
			return g;
	return NULL;
}

/* ---------------------------------------------------------------- credentials */

static bool secret_eq(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;

	/* Constant time in the length of the supplied secret. */
	for (size_t i = 0; i < la; i++)
		d |= (unsigned char)(a[i] ^ b[i < lb ? i : 0]);
	return d == 0;
}

/* 1 allowed, 0 denied. */
static int check_credential(struct am *am, const char *job, const char *cred)
{
	for (size_t i = 0; i < am->cfg.njobs; i++)
		if (strcmp(am->cfg.jobs[i].id, job) == 0)
			return secret_eq(cred, am->cfg.jobs[i].cred);
	for (size_t i = 0; i < am->nlearned; i++)
		if (strcmp(am->learned[i].id, job) == 0)
			return secret_eq(cred, am->learned[i].cred);
	if (!am->cfg.allow_first_joiner || !cred[0] || am->nlearned == AM_MAX_JOBS ||
	    strlen(cred) >= sizeof am->learned[0].cred)
		return 0;
	snprintf(am->learned[am->nlearned].id, AM_STR, "%s", job);
	snprintf(am->learned[am->nlearned].cred, sizeof am->learned[0].cred, "%s", cred);
	am->nlearned++;
	am_journal_job(am, job, cred);
	am_log(1, "job %s: credential set by its first joiner", job);
	return 1;
}

/* ---------------------------------------------------------------- switches */

static void running_free(struct am_switch *s)
{
	for (size_t i = 0; i < s->nrunning; i++)
		ctl_tree_free(&s->running[i]);
	free(s->running);
	s->running = NULL;
	s->nrunning = 0;
}

const struct ctl_tree *am_running_find(const struct am_switch *s, uint16_t id)
{
	for (size_t i = 0; i < s->nrunning; i++)
		if (s->running[i].id == id)
			return &s->running[i];
	return NULL;
}

static void sw_down(struct am *am, struct am_switch *s, const char *why)
{
	if (s->up || !s->polled) {
		am_log(0, "switch %s unreachable: %s", s->cfg->name, why);
		if (s->up)
			am->st.switch_failures++;
	}
	snprintf(s->err, sizeof s->err, "%s", why);
	s->up = false;
	s->polled = true;
	if (s->conn) {
		ctl_disconnect(s->conn);
		s->conn = NULL;
	}
}

static void sw_poll(struct am *am, struct am_switch *s)
{
	struct ctl_caps caps;
	struct ctl_tree *trees = NULL;
	size_t n = 0;
	int rc;

	if (!s->conn) {
		rc = ctl_connect(s->cfg->target, s->cfg->key_path[0] ? s->cfg->key_path : NULL,
				 s->cfg->known_hosts[0] ? s->cfg->known_hosts : NULL, &s->conn);
		if (rc < 0) {
			char why[200];
			/* lib/ctl's message says why (key refused, host key mismatch, ...) */
			snprintf(why, sizeof why, "%.190s", ctl_conn_error(NULL));
			s->conn = NULL;
			sw_down(am, s, why);
			return;
		}
	}
	memset(&caps, 0, sizeof caps);
	rc = ctl_get_caps(s->conn, &caps);
	if (rc == 0)
		rc = ctl_get_trees(s->conn, &trees, &n);
	if (rc < 0) {
		char why[200];
		snprintf(why, sizeof why, "%.190s", ctl_conn_error(s->conn));
		ctl_caps_free(&caps);
		sw_down(am, s, why);
		return;
	}
	if (!s->up)
		am_log(1, "switch %s up (%s, %u/%u slots used)", s->cfg->name, caps.data_addr,
		       caps.used_slots, caps.max_slots);
	ctl_caps_free(&s->caps);
	s->caps = caps;
	running_free(s);
	s->running = trees;
	s->nrunning = n;
	s->up = true;
	s->polled = true;
	s->err[0] = '\0';
}

/* Recompute per-switch resource accounting: this AM's holdings from its groups, foreign
 * usage = what the switch reports minus this AM's trees that it reports running. */
void am_account(struct am *am)
{
	for (size_t i = 0; i < am->nsw; i++)
		am->sw[i].am_slots = am->sw[i].am_trees = 0;
	for (struct am_group *g = am->groups; g; g = g->next)
		for (size_t k = 0; g->plan.ok && k < g->plan.nsw; k++) {
			am->sw[g->plan.sws[k].sw].am_slots += g->plan.sws[k].tree.slots;
			am->sw[g->plan.sws[k].sw].am_trees++;
		}
	for (size_t i = 0; i < am->nsw; i++) {
		struct am_switch *s = &am->sw[i];
		uint32_t mine_slots = 0, mine_trees = 0;
		for (struct am_group *g = am->groups; g; g = g->next) {
			int k = g->plan.ok ? am_plan_find(&g->plan, (int)i) : -1;
			if (k >= 0 && am_running_find(s, g->plan.sws[k].tree.id)) {
				mine_slots += g->plan.sws[k].tree.slots;
				mine_trees++;
			}
		}
		s->foreign_slots = s->caps.used_slots > mine_slots ? s->caps.used_slots - mine_slots : 0;
		s->foreign_trees = s->caps.used_trees > mine_trees ? s->caps.used_trees - mine_trees : 0;
	}
}

enum am_role am_sw_role(const struct am_switch *s)
{
	if (s->cfg->role != AM_ROLE_UNKNOWN)
		return s->cfg->role;
	if (strcmp(s->caps.role_hint, "spine") == 0)
		return AM_ROLE_SPINE;
	if (strcmp(s->caps.role_hint, "leaf") == 0)
		return AM_ROLE_LEAF;
	return AM_ROLE_UNKNOWN;
}

static void build_views(struct am *am, struct am_sw_view *v)
{
	am_account(am);
	for (size_t i = 0; i < am->nsw; i++) {
		const struct am_switch *s = &am->sw[i];
		uint32_t used = s->foreign_slots + s->am_slots, usedt = s->foreign_trees + s->am_trees;
		memset(&v[i], 0, sizeof v[i]);
		v[i].name = s->cfg->name;
		v[i].data_addr = s->caps.data_addr;
		v[i].role = am_sw_role(s);
		v[i].up = s->up && s->caps.data_addr[0];
		v[i].free_slots = s->caps.max_slots > used ? s->caps.max_slots - used : 0;
		v[i].free_trees = s->caps.max_trees > usedt ? s->caps.max_trees - usedt : 0;
		v[i].max_slot_bytes = s->caps.max_slot_bytes;
		v[i].max_bsl_bits = s->caps.max_bsl_bits;
		v[i].dtype_mask = s->caps.dtype_mask;
		v[i].op_mask = s->caps.op_mask;
		v[i].links = s->caps.links;
		v[i].nlinks = s->caps.nlinks;
	}
}

static int member_attach(struct am *am, const struct am_sw_view *v, const struct am_member *m)
{
	size_t iplen = strcspn(m->addr, ":");

	for (size_t i = 0; i < am->cfg.nattach; i++) {
		const char *h = am->cfg.attach[i].host;
		if ((m->host[0] && strcmp(h, m->host) == 0) ||
		    (strlen(h) == iplen && strncmp(h, m->addr, iplen) == 0))
			return am_sw_index(am, am->cfg.attach[i].sw);
	}
	if (m->hint[0] && am_sw_index(am, m->hint) >= 0)
		return am_sw_index(am, m->hint);
	return am_attach_find(v, am->nsw, m->host, m->addr);
}

/* ---------------------------------------------------------------- events to clients */

static void fill_tree_info(struct am *am, const struct am_group *g, uint32_t r,
			   Inca__Am__V1__TreeInfo *ti)
{
	const struct am_plan *p = &g->plan;
	int s = p->send_sw[r];
	int k = am_plan_find(p, s);
	const struct ctl_tree *t = &p->sws[k].tree;

	ti->tree_id = t->id;
	ti->switch_addr = am->sw[s].caps.data_addr;
	ti->switch_qpn = t->qpn;
	ti->bfr_id = g->m[r].bfr_id;
	ti->key = t->key;
	ti->slots = p->slots;
	ti->mtu = p->mtu;
	ti->bsl_bits = p->bsl_bits;
	ti->qpn = g->m[r].qpn;
	ti->generation = g->generation;
	ti->multi_level = p->multi_level;
	ti->root_switch = (char *)am->sw[p->root].cfg->name;
	ti->attach_switch = g->m[r].attach >= 0 ? (char *)am->sw[g->m[r].attach].cfg->name : "";
	ti->deterministic = t->deterministic;
	if (t->auth) {
		ti->auth_key.data = (uint8_t *)t->auth_key;
		ti->auth_key.len = WIRE_AUTH_KEY_LEN;
		ti->auth_key_id = t->auth_key_id;
	}
}

static void notify_member(struct am *am, struct am_group *g, uint32_t r, int kind)
{
	Inca__Am__V1__GroupEvent ev = INCA__AM__V1__GROUP_EVENT__INIT;
	Inca__Am__V1__TreeInfo ti = INCA__AM__V1__TREE_INFO__INIT;
	struct am_member *m = &g->m[r];

	if (!m->sess)
		return;
	ev.kind = kind;
	ev.group_id = g->id;
	ev.joined = g->joined;
	ev.size = g->size;
	ev.reason = g->reason;
	if ((kind == EV(TREE_READY) || kind == EV(REBUILT)) && g->plan.ok) {
		fill_tree_info(am, g, r, &ti);
		ev.tree = &ti;
	}
	am_session_send(m->sess, &ev);
}

/* The event that describes the group's current state. */
static int state_event(const struct am_group *g)
{
	switch (g->state) {
	case AM_G_FORMING:
		return EV(WAITING);
	case AM_G_READY:
		return g->generation > 1 ? EV(REBUILT) : EV(TREE_READY);
	case AM_G_FALLBACK:
		return g->rebuildable ? EV(DISMANTLED) : EV(HOST_FALLBACK);
	default:
		return EV(DISMANTLED);
	}
}

static void notify_all(struct am *am, struct am_group *g, int kind)
{
	for (uint32_t r = 0; r < g->size; r++)
		if (g->m[r].joined && !g->m[r].left)
			notify_member(am, g, r, kind);
}

/* ---------------------------------------------------------------- trees on switches */

void am_group_set_state(struct am_group *g, enum am_gstate s, const char *reason)
{
	g->state = s;
	g->state_ns = util_now_ns();
	snprintf(g->reason, sizeof g->reason, "%s", reason ? reason : "");
}

/* Remove the group's trees from its switches (best effort) and drop the plan. */
static void release_tree(struct am *am, struct am_group *g)
{
	if (!g->plan.ok)
		return;
	for (size_t k = 0; k < g->plan.nsw; k++) {
		struct am_switch *s = &am->sw[g->plan.sws[k].sw];
		int rc;
		if (!s->conn)
			continue;
		rc = ctl_delete_tree(s->conn, g->plan.sws[k].tree.id);
		if (rc < 0 && rc != -ENOENT)
			am_log(0, "switch %s: delete tree %u: %s", s->cfg->name,
			       g->plan.sws[k].tree.id, ctl_conn_error(s->conn));
	}
	/* Poll those switches now rather than at the next poll: the status an operator reads
	 * right after a dismantle shows their freed slots, and one that does not answer (the
	 * failure a member reported) is marked down before a rebuild, which then avoids it. */
	for (size_t k = 0; k < g->plan.nsw; k++)
		sw_poll(am, &am->sw[g->plan.sws[k].sw]);
	am_plan_free(&g->plan);
	am_account(am);
}

static bool tree_id_used(struct am *am, uint16_t id)
{
	for (struct am_group *g = am->groups; g; g = g->next)
		if (g->plan.ok && g->plan.sws[0].tree.id == id)
			return true;
	for (size_t i = 0; i < am->nsw; i++)
		if (am_running_find(&am->sw[i], id))
			return true;
	return false;
}

static uint16_t alloc_tree_id(struct am *am)
{
	for (uint32_t id = am->cfg.tree_id_min; id <= am->cfg.tree_id_max; id++)
		if (!tree_id_used(am, (uint16_t)id))
			return (uint16_t)id;
	return 0;
}

/* Does g count against its job's max_trees: it holds a tree, is forming (will ask for one)
 * or waits for a rebuild. */
static bool wants_tree(const struct am_group *g)
{
	return g->state == AM_G_READY || g->state == AM_G_FORMING ||
	       (g->state == AM_G_FALLBACK && g->rebuildable);
}

/* Plan and push a tree for g. On success the group is READY; otherwise FALLBACK with the
 * reason (rebuildable as given). Notifies the members either way. */
static void establish(struct am *am, struct am_group *g, bool rebuild)
{
	struct am_sw_view v[AM_MAX_SWITCHES];
	struct am_mem_view mv[4096];
	struct am_plan_req req;
	struct am_plan plan;
	char why[256] = "";
	size_t pushed = 0;
	int rc;
	char prev[256];
	bool was_waiting = g->state == AM_G_FALLBACK && g->rebuildable;
	uint16_t tid;
	bool wants = true;
	struct am_quota q;
	uint32_t jtrees, jslots, left;

	snprintf(prev, sizeof prev, "%s", g->reason);
	if (g->size > 4096) {
		am_group_set_state(g, AM_G_FALLBACK, "group larger than 4096 ranks");
		goto fallback;
	}
	build_views(am, v);
	memset(&req, 0, sizeof req);
	for (uint32_t r = 0; r < g->size; r++) {
		struct am_member *m = &g->m[r];
		m->attach = member_attach(am, v, m);
		mv[r].bfr_id = m->bfr_id;
		mv[r].data_addr = m->addr;
		mv[r].qpn = m->qpn;
		mv[r].attach = m->attach;
		req.dtype_need |= m->dtype_mask;
		req.op_need |= m->op_mask;
		req.deterministic = req.deterministic || m->wants_det;
		wants = wants && m->wants_inc;
		if (m->max_mtu && (!req.mtu_max || m->max_mtu < req.mtu_max))
			req.mtu_max = m->max_mtu; /* the plan's MTU fits every member */
	}
	if (!wants) {
		am_group_set_state(g, AM_G_FALLBACK, "a client asked for the host path only");
		goto fallback;
	}
	/* The job's quota (join refuses what it can already tell; a rebuild or a group that
	 * formed while the job's other groups grew is held here). */
	am_cfg_quota(&am->cfg, g->job, &q);
	jtrees = jslots = 0;
	for (const struct am_group *x = am->groups; x; x = x->next)
		if (x != g && x->plan.ok && strcmp(x->job, g->job) == 0) {
			jtrees++;
			jslots += x->plan.slots;
		}
	req.slots_wanted = g->slots_wanted && g->slots_wanted < am->cfg.slots_default
				   ? g->slots_wanted : am->cfg.slots_default;
	left = jslots < q.max_slots ? q.max_slots - jslots : 0;
	if (left < req.slots_wanted)
		req.slots_wanted = (uint16_t)left;
	if (req.slots_wanted < am->cfg.slots_min) {
		snprintf(why, sizeof why, "quota max_slots of job %s: %u of %u slots held", g->job,
			 jslots, q.max_slots);
		am_group_set_state(g, AM_G_FALLBACK, why);
		goto fallback;
	}
	if (jtrees >= q.max_trees) {
		snprintf(why, sizeof why, "quota max_trees of job %s: %u trees held", g->job, jtrees);
		am_group_set_state(g, AM_G_FALLBACK, why);
		goto fallback;
	}
	tid = alloc_tree_id(am);
	if (!tid) {
		am_group_set_state(g, AM_G_FALLBACK, "no free tree id");
		goto fallback;
	}
	req.tree_id = tid;
	req.key = (uint32_t)rnd64();
	if (!req.key)
		req.key = 1;
	/* A new data-plane key and key id for every tree generation. */
	if (getrandom(req.auth_key, sizeof req.auth_key, 0) != (ssize_t)sizeof req.auth_key) {
		am_group_set_state(g, AM_G_FALLBACK, "no randomness for the group key");
		goto fallback;
	}
	do
		req.auth_key_id = (uint32_t)rnd64();
	while (!req.auth_key_id || req.auth_key_id == g->last_auth_key_id);
	g->last_auth_key_id = req.auth_key_id;
	req.slots_min = am->cfg.slots_min;
	rc = am_plan_build(v, am->nsw, mv, g->size, &req, &plan);
	explicit_bzero(req.auth_key, sizeof req.auth_key);
	if (rc < 0) {
		am_group_set_state(g, AM_G_FALLBACK, "out of memory while planning");
		goto fallback;
	}
	if (!plan.ok) {
		am_group_set_state(g, AM_G_FALLBACK, plan.reason);
		am_plan_free(&plan);
		goto fallback;
	}
	/* Children first, root last: the root only starts disseminating once every child
	 * already knows the tree. */
	for (pushed = 0; pushed < plan.nsw; pushed++) {
		struct am_switch *s = &am->sw[plan.sws[pushed].sw];
		rc = s->conn ? ctl_put_tree(s->conn, &plan.sws[pushed].tree) : -ENOTCONN;
		if (rc < 0) {
			snprintf(why, sizeof why, "switch %s refused tree %u: %s", s->cfg->name, tid,
				 s->conn ? ctl_conn_error(s->conn) : "not connected");
			am->st.push_failures++;
			break;
		}
	}
	if (pushed < plan.nsw) {
		for (size_t k = 0; k < pushed; k++) {
			struct am_switch *s = &am->sw[plan.sws[k].sw];
			if (s->conn)
				ctl_delete_tree(s->conn, tid);
		}
		am_plan_free(&plan);
		am_group_set_state(g, AM_G_FALLBACK, why);
		goto fallback;
	}
	g->plan = plan;
	g->generation++;
	g->rebuildable = false;
	am_group_set_state(g, AM_G_READY, "");
	am_account(am);
	am->st.groups_ready++;
	if (rebuild)
		am->st.rebuilds++;
	am_log(1, "group %llu (%s/%s, %u ranks): tree %u %s, root %s, %u slots, gen %u",
	       (unsigned long long)g->id, g->job, g->name, g->size, tid,
	       plan.multi_level ? "2-level" : "single-level", am->sw[plan.root].cfg->name,
	       plan.slots, g->generation);
	am_journal_group(am, g);
	notify_all(am, g, rebuild ? EV(REBUILT) : EV(TREE_READY));
	return;
fallback:
	g->rebuildable = rebuild;
	if (was_waiting && strcmp(prev, g->reason) == 0)
		return; /* still waiting for the fabric: nothing new to tell */
	am->st.groups_fallback++;
	am_log(1, "group %llu (%s/%s): host path: %s", (unsigned long long)g->id, g->job, g->name,
	       g->reason);
	am_journal_group(am, g);
	notify_all(am, g, rebuild ? EV(DISMANTLED) : EV(HOST_FALLBACK));
}

/* Take the tree down. terminal: the group is over (leave, heartbeat, operator); else it lost
 * its tree to a fabric failure and will be rebuilt when possible. */
static void dismantle(struct am *am, struct am_group *g, const char *reason, bool terminal)
{
	release_tree(am, g);
	am->st.dismantles++;
	am_group_set_state(g, terminal ? AM_G_DISMANTLED : AM_G_FALLBACK, reason);
	g->rebuildable = !terminal;
	am_log(1, "group %llu (%s/%s) dismantled: %s", (unsigned long long)g->id, g->job, g->name,
	       reason);
	am_journal_group(am, g);
	notify_all(am, g, EV(DISMANTLED));
}

void am_group_free(struct am_group *g)
{
	am_plan_free(&g->plan);
	free(g->m);
	free(g);
}

static void group_remove(struct am *am, struct am_group *g)
{
	struct am_group **pp = &am->groups;

	release_tree(am, g);
	for (uint32_t r = 0; r < g->size; r++)
		if (g->m[r].sess) {
			am_session_bind(g->m[r].sess, 0, 0);
			am_session_finish(g->m[r].sess);
			g->m[r].sess = NULL;
		}
	while (*pp && *pp != g)
		pp = &(*pp)->next;
	if (*pp)
		*pp = g->next;
	am_journal_del(am, g->id);
	am_log(1, "group %llu removed", (unsigned long long)g->id);
	am_group_free(g);
}

/* ---------------------------------------------------------------- RPC handlers */

/* Why a name (job id, group name, host name, attach hint) is unusable, NULL if it is fine:
 * names show in logs, listings and the journal, so they are printable and without spaces. */
static const char *name_bad(const char *s, bool allow_empty)
{
	size_t n = strlen(s);

	if (!allow_empty && n == 0)
		return "empty";
	if (n >= AM_STR)
		return "longer than 63 bytes";
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == ':' || (unsigned char)s[i] >= 0x7f)
			return "holds a space, ':', control or non-ASCII character";
	return NULL;
}

static bool addr_ok(const char *s)
{
	struct sockaddr_in sa;

	return s && strlen(s) < CTL_ADDR_MAX && strchr(s, ':') && util_parse_addr(s, -1, &sa) == 0 &&
	       sa.sin_addr.s_addr != 0 && sa.sin_port != 0;
}

#define JOIN_ERR(st, ...)                        \
	do {                                     \
		snprintf(msg, cap, __VA_ARGS__); \
		return st;                       \
	} while (0)

/* Every field of a JoinRequest, before the credential is looked at. The message names the
 * field and says why. */
static grpc_status_code join_validate(const struct am *am, const Inca__Am__V1__JoinRequest *rq,
				      char *msg, size_t cap)
{
	const Inca__Am__V1__Capabilities *c = rq->caps;
	const struct { const char *field, *value; bool empty_ok; } names[] = {
		{ "job_id", rq->job_id, false },
		{ "group_name", rq->group_name, true },
		{ "host_name", rq->host_name, true },
		{ "attach_hint", rq->attach_hint, true },
	};
	uint32_t dtype_all = (1u << INCA_DTYPE_COUNT) - 1, op_all = (1u << INCA_OP_COUNT) - 1;
	size_t n = strlen(rq->job_credential);

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		const char *why = name_bad(names[i].value, names[i].empty_ok);
		if (why)
			JOIN_ERR(GRPC_STATUS_INVALID_ARGUMENT, "%s: %s (at most 63 printable ASCII "
				 "characters, no space or ':')", names[i].field, why);
	}
	/* A secret may hold spaces and UTF-8, never a control character (it is journalled).
	 * An empty one is just a wrong credential: denied (and counted) below. */
	if (n >= AM_STR * 2)
		JOIN_ERR(GRPC_STATUS_INVALID_ARGUMENT, "job_credential: longer than 127 bytes");
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)rq->job_credential[i] < ' ' || rq->job_credential[i] == 0x7f)
			JOIN_ERR(GRPC_STATUS_INVALID_ARGUMENT, "job_credential: control character at "
				 "byte %zu", i);
	if (rq->size < 1 || rq->size > AM_MAX_GROUP_SIZE)
		JOIN_ERR(GRPC_STATUS_INVALID_ARGUMENT, "size: %u outside 1..%u (one BIER set)",
			 rq->size, AM_MAX_GROUP_SIZE);
	if (rq->rank >= rq->size)
		JOIN_ERR(GRPC_STATUS_INVALID_ARGUMENT, "rank: %u not below size %u", rq->rank, rq->size);
	if (!addr_ok(rq->data_addr))
		JOIN_ERR(GRPC_STATUS_INVALID_ARGUMENT, "data_addr: not IPv4:port with a nonzero "
			 "address and port");
	if (rq->qpn > 0xFFFFFF)
		JOIN_ERR(GRPC_STATUS_INVALID_ARGUMENT, "qpn: 0x%x wider than 24 bits", rq->qpn);
	if (rq->slots_wanted > 65535)
		JOIN_ERR(GRPC_STATUS_INVALID_ARGUMENT, "slots_wanted: %u above 65535",
			 rq->slots_wanted);
	if (rq->slots_wanted && rq->slots_wanted < am->cfg.slots_min)
		JOIN_ERR(GRPC_STATUS_INVALID_ARGUMENT, "slots_wanted: %u below this AM's slots_min %u "
			 "(no tree would be admitted)", rq->slots_wanted, am->cfg.slots_min);
	if (c && (c->dtype_mask & ~dtype_all))
		JOIN_ERR(GRPC_STATUS_INVALID_ARGUMENT, "caps.dtype_mask: unknown bits 0x%x (known "
			 "0x%x)", c->dtype_mask & ~dtype_all, dtype_all);
	if (c && (c->op_mask & ~op_all))
		JOIN_ERR(GRPC_STATUS_INVALID_ARGUMENT, "caps.op_mask: unknown bits 0x%x (known 0x%x)",
			 c->op_mask & ~op_all, op_all);
	if (c && c->max_mtu && c->max_mtu < WIRE_MTU_MIN)
		JOIN_ERR(GRPC_STATUS_INVALID_ARGUMENT, "caps.max_mtu: %u below the smallest usable "
			 "MTU %u", c->max_mtu, WIRE_MTU_MIN);
	return GRPC_STATUS_OK;
}

/* Would a join that starts a group exceed a quota of its job? Groups of the same name are
 * not counted: the join supersedes them. */
static grpc_status_code join_quota(const struct am *am, const Inca__Am__V1__JoinRequest *rq,
				   char *msg, size_t cap)
{
	struct am_quota q;
	uint32_t trees = 0, slots = 0, forming = 0;

	am_cfg_quota(&am->cfg, rq->job_id, &q);
	if (rq->size > q.max_size)
		JOIN_ERR(GRPC_STATUS_RESOURCE_EXHAUSTED, "quota max_size of job %s: size %u above %u",
			 rq->job_id, rq->size, q.max_size);
	for (const struct am_group *g = am->groups; g; g = g->next) {
		if (strcmp(g->job, rq->job_id) != 0)
			continue;
		/* a group of the same name is superseded by this join: not counted */
		if (strcmp(g->name, rq->group_name) == 0)
			continue;
		trees += wants_tree(g);
		forming += g->state == AM_G_FORMING;
		if (g->plan.ok)
			slots += g->plan.slots;
	}
	if (forming >= q.max_forming)
		JOIN_ERR(GRPC_STATUS_RESOURCE_EXHAUSTED, "quota max_forming of job %s: %u groups "
			 "already forming", rq->job_id, forming);
	if (trees >= q.max_trees)
		JOIN_ERR(GRPC_STATUS_RESOURCE_EXHAUSTED, "quota max_trees of job %s: %u groups hold "
			 "or wait for a tree", rq->job_id, trees);
	if (slots + am->cfg.slots_min > q.max_slots)
		JOIN_ERR(GRPC_STATUS_RESOURCE_EXHAUSTED, "quota max_slots of job %s: %u of %u slots "
			 "held, fewer than slots_min %u left", rq->job_id, slots, q.max_slots,
			 am->cfg.slots_min);
	return GRPC_STATUS_OK;
}

static struct am_group *group_new(struct am *am, const char *job, const char *name, uint32_t size)
{
	struct am_group *g = calloc(1, sizeof *g);

	if (!g)
		return NULL;
	g->m = calloc(size, sizeof *g->m);
	if (!g->m) {
		free(g);
		return NULL;
	}
	g->id = am->next_group_id++;
	snprintf(g->job, sizeof g->job, "%s", job);
	snprintf(g->name, sizeof g->name, "%s", name);
	g->size = size;
	g->created_ns = util_now_ns();
	am_group_set_state(g, AM_G_FORMING, "");
	g->next = am->groups;
	am->groups = g;
	am->st.groups_created++;
	return g;
}

grpc_status_code am_join(struct am *am, const Inca__Am__V1__JoinRequest *rq,
			 Inca__Am__V1__JoinReply *rp, char *msg, size_t cap)
{
	struct am_group *g = NULL;
	struct am_member *m;

	grpc_status_code st = join_validate(am, rq, msg, cap);

	if (st != GRPC_STATUS_OK)
		return st;
	if (!check_credential(am, rq->job_id, rq->job_credential)) {
		am->st.joins_denied++;
		am_log(0, "DENIED join: job %s rank %u from %s (%s): bad job credential", rq->job_id,
		       rq->rank, rq->data_addr, rq->host_name);
		snprintf(msg, cap, "job credential rejected");
		return GRPC_STATUS_PERMISSION_DENIED;
	}
	/* The forming group of this job/name, if any; a rank that is already in a running group
	 * of the same name starts a new one (a new communicator) and ends the old. A forming
	 * group is never replaced by a join of another size: that is a client's mistake (or
	 * another job run reusing the name) and would strand the ranks already waiting. */
	for (struct am_group *x = am->groups; x; x = x->next) {
		if (strcmp(x->job, rq->job_id) != 0 || strcmp(x->name, rq->group_name) != 0 ||
		    x->state != AM_G_FORMING)
			continue;
		if (x->size != rq->size) {
			snprintf(msg, cap, "size: %u differs from size %u of the forming group %llu "
				 "(%s/%s)", rq->size, x->size, (unsigned long long)x->id, x->job,
				 x->name);
			return GRPC_STATUS_FAILED_PRECONDITION;
		}
		if (!x->m[rq->rank].joined) {
			g = x;
			break;
		}
	}
	if (!g) {
		st = join_quota(am, rq, msg, cap);
		if (st != GRPC_STATUS_OK) {
			am_log(0, "join: job %s rank %u refused: %s", rq->job_id, rq->rank, msg);
			return st;
		}
		for (struct am_group *x = am->groups; x; x = x->next)
			if (strcmp(x->job, rq->job_id) == 0 && strcmp(x->name, rq->group_name) == 0 &&
			    x->state != AM_G_DISMANTLED && (x->state != AM_G_FORMING ||
							    x->size != rq->size ||
							    x->m[rq->rank].joined))
				dismantle(am, x, "superseded by a new group of the same job and name",
					  true);
		g = group_new(am, rq->job_id, rq->group_name, rq->size);
		if (!g) {
			snprintf(msg, cap, "out of memory");
			return GRPC_STATUS_RESOURCE_EXHAUSTED;
		}
	}
	m = &g->m[rq->rank];
	memset(m, 0, sizeof *m);
	m->joined = true;
	m->rank = rq->rank;
	m->bfr_id = (uint16_t)(rq->rank + 1);
	snprintf(m->host, sizeof m->host, "%s", rq->host_name);
	snprintf(m->hint, sizeof m->hint, "%s", rq->attach_hint);
	snprintf(m->addr, sizeof m->addr, "%s", rq->data_addr);
	m->qpn = rq->qpn ? rq->qpn : wire_qpn_default(WIRE_QPN_MEMBER, m->bfr_id);
	m->token = rnd64();
	m->wants_inc = rq->caps ? rq->caps->inc : true;
	m->dtype_mask = rq->caps ? rq->caps->dtype_mask : 0;
	m->op_mask = rq->caps ? rq->caps->op_mask : 0;
	m->wants_det = rq->caps && rq->caps->deterministic;
	m->max_mtu = rq->caps && rq->caps->max_mtu < WIRE_MTU_MAX ? (uint16_t)rq->caps->max_mtu
								  : 0;
	m->last_hb_ns = util_now_ns();
	m->attach = -1;
	if (rq->slots_wanted && (!g->slots_wanted || rq->slots_wanted < g->slots_wanted))
		g->slots_wanted = (uint16_t)rq->slots_wanted;
	g->joined++;
	am->st.joins++;
	am_log(1, "join: group %llu (%s/%s) rank %u/%u from %s (%s)", (unsigned long long)g->id,
	       g->job, g->name, rq->rank, rq->size, m->addr, m->host);
	rp->group_id = g->id;
	rp->member_token = m->token;
	rp->bfr_id = m->bfr_id;
	rp->heartbeat_ms = am->cfg.heartbeat_ms;
	rp->joined = g->joined;
	am_journal_group(am, g);
	if (g->joined == g->size)
		establish(am, g, false);
	else
		notify_all(am, g, EV(WAITING));
	return GRPC_STATUS_OK;
}

static struct am_member *member_auth(struct am *am, uint64_t gid, uint32_t rank, uint64_t token,
				     struct am_group **gout)
{
	struct am_group *g = group_find(am, gid);

	if (!g || rank >= g->size || !g->m[rank].joined || g->m[rank].left ||
	    g->m[rank].token != token)
		return NULL;
	*gout = g;
	return &g->m[rank];
}

grpc_status_code am_leave(struct am *am, const Inca__Am__V1__LeaveRequest *rq, char *msg,
			  size_t cap)
{
	struct am_group *g;
	struct am_member *m = member_auth(am, rq->group_id, rq->rank, rq->member_token, &g);
	char why[160];
	bool all_left = true;

	if (!m) {
		am->st.sessions_denied++;
		am_log(0, "DENIED leave: group %llu rank %u: unknown member or bad token",
		       (unsigned long long)rq->group_id, rq->rank);
		snprintf(msg, cap, "unknown group/rank or bad member token");
		return GRPC_STATUS_PERMISSION_DENIED;
	}
	m->left = true;
	if (m->sess) {
		am_session_bind(m->sess, 0, 0);
		am_session_finish(m->sess);
		m->sess = NULL;
	}
	if (g->state == AM_G_FORMING) {
		m->joined = false;
		g->joined--;
		notify_all(am, g, EV(WAITING));
	} else if (g->state != AM_G_DISMANTLED) {
		snprintf(why, sizeof why, "rank %u left%s%s", rq->rank, rq->reason[0] ? ": " : "",
			 rq->reason);
		dismantle(am, g, why, true);
	}
	for (uint32_t r = 0; r < g->size; r++)
		if (g->m[r].joined && !g->m[r].left)
			all_left = false;
	if (all_left)
		group_remove(am, g);
	else
		am_journal_group(am, g);
	return GRPC_STATUS_OK;
}

grpc_status_code am_dismantle_rpc(struct am *am, const Inca__Am__V1__DismantleRequest *rq,
				  char *msg, size_t cap)
{
	struct am_group *g;
	char why[200];

	if (am->cfg.admin_token[0] && !secret_eq(rq->admin_token, am->cfg.admin_token)) {
		am->st.operator_denied++;
		am_log(0, "DENIED dismantle of group %llu: bad admin token",
		       (unsigned long long)rq->group_id);
		snprintf(msg, cap, "admin token rejected");
		return GRPC_STATUS_PERMISSION_DENIED;
	}
	g = group_find(am, rq->group_id);
	if (!g) {
		snprintf(msg, cap, "no group %llu", (unsigned long long)rq->group_id);
		return GRPC_STATUS_NOT_FOUND;
	}
	snprintf(why, sizeof why, "operator request%s%s", rq->reason[0] ? ": " : "", rq->reason);
	dismantle(am, g, why, true);
	return GRPC_STATUS_OK;
}

/* Issue 4: a member saw its INC path fail mid-collective. Only the tree generation the member
 * used is acted upon, once: every rank of a failed call reports it, and the first report has
 * already replaced the tree when the others arrive. */
grpc_status_code am_report_failure(struct am *am, const Inca__Am__V1__FailureReport *rq,
				   Inca__Am__V1__FailureReply *rp, char *msg, size_t cap)
{
	struct am_group *g;
	struct am_member *m = member_auth(am, rq->group_id, rq->rank, rq->member_token, &g);
	size_t n = 0;
	char why[256], rs[121];

	if (!m) {
		am->st.failure_reports_denied++;
		am_log(0, "DENIED failure report: group %llu rank %u: unknown member or bad token",
		       (unsigned long long)rq->group_id, rq->rank);
		snprintf(msg, cap, "unknown group/rank or bad member token");
		return GRPC_STATUS_PERMISSION_DENIED;
	}
	if (g->state != AM_G_READY || !g->plan.ok || rq->generation != g->generation) {
		am->st.failure_reports_stale++;
		am_log(1, "group %llu rank %u: failure report for generation %u ignored (group %s, "
			  "generation %u)", (unsigned long long)g->id, rq->rank, rq->generation,
		       am_state_name(g->state), g->generation);
		rp->acted = false;
		rp->generation = g->generation;
		rp->state = (char *)am_state_name(g->state);
		return GRPC_STATUS_OK;
	}
	/* The reason ends up in logs, the journal and other members' events: printable only. */
	for (const char *p = rq->reason; *p && n < sizeof rs - 1; p++)
		rs[n++] = (unsigned char)*p >= ' ' && (unsigned char)*p < 0x7f ? *p : '?';
	rs[n] = '\0';
	am->st.failure_reports++;
	snprintf(why, sizeof why, "rank %u reported an INC failure (generation %u)%s%s", rq->rank,
		 g->generation, rs[0] ? ": " : "", rs);
	am_log(0, "group %llu: %s", (unsigned long long)g->id, why);
	dismantle(am, g, why, false); /* polls the tree's switches (release_tree) */
	establish(am, g, true);
	rp->acted = true;
	rp->generation = g->generation;
	rp->state = (char *)am_state_name(g->state);
	return GRPC_STATUS_OK;
}

grpc_status_code am_session_open(struct am *am, struct am_session *s,
				 const Inca__Am__V1__SessionMsg *msg, char *err, size_t cap)
{
	struct am_group *g;
	struct am_member *m = member_auth(am, msg->group_id, msg->rank, msg->member_token, &g);

	if (!m) {
		am->st.sessions_denied++;
		am_log(0, "DENIED session: group %llu rank %u: unknown member or bad token",
		       (unsigned long long)msg->group_id, msg->rank);
		snprintf(err, cap, "unknown group/rank or bad member token");
		return GRPC_STATUS_PERMISSION_DENIED;
	}
	if (m->sess && m->sess != s) { /* a reconnect replaces the old stream */
		am_session_bind(m->sess, 0, 0);
		am_session_finish(m->sess);
	}
	m->sess = s;
	m->last_hb_ns = util_now_ns();
	am_session_bind(s, g->id, m->rank);
	am_log(2, "session: group %llu rank %u", (unsigned long long)g->id, m->rank);
	notify_member(am, g, m->rank, state_event(g));
	return GRPC_STATUS_OK;
}

void am_session_ping(struct am *am, struct am_session *s, const Inca__Am__V1__SessionMsg *msg)
{
	struct am_group *g = group_find(am, am_session_gid(s));
	uint32_t r = am_session_rank(s);
	Inca__Am__V1__GroupEvent ev = INCA__AM__V1__GROUP_EVENT__INIT;

	if (!g || r >= g->size || g->m[r].sess != s)
		return;
	g->m[r].last_hb_ns = util_now_ns();
	ev.kind = EV(PONG);
	ev.group_id = g->id;
	ev.seq = msg->seq;
	am_session_send(s, &ev);
}

void am_session_gone(struct am *am, struct am_session *s)
{
	struct am_group *g = group_find(am, am_session_gid(s));
	uint32_t r = am_session_rank(s);

	/* Not a failure by itself: the heartbeat timeout decides (the client may reconnect). */
	if (g && r < g->size && g->m[r].sess == s) {
		g->m[r].sess = NULL;
		am_log(2, "session closed: group %llu rank %u", (unsigned long long)g->id, r);
	}
	am_session_bind(s, 0, 0);
}

/* ---------------------------------------------------------------- periodic work */

/* A READY group's tree is healthy when every switch is up, runs the tree with our key, and
 * every child still reaches the root. */
static bool tree_healthy(struct am *am, const struct am_group *g, char *why, size_t cap)
{
	struct am_sw_view v[AM_MAX_SWITCHES];

	build_views(am, v);
	for (size_t k = 0; k < g->plan.nsw; k++) {
		const struct am_plan_sw *ps = &g->plan.sws[k];
		const struct am_switch *s = &am->sw[ps->sw];
		const struct ctl_tree *t;
		if (!s->up) {
			snprintf(why, cap, "switch %s failed", s->cfg->name);
			return false;
		}
		t = am_running_find(s, ps->tree.id);
		if (!t || t->key != ps->tree.key || t->auth != ps->tree.auth ||
		    t->auth_key_id != ps->tree.auth_key_id) {
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
				if (g->state == AM_G_FORMING) {
					m->joined = false;
					g->joined--;
					notify_all(am, g, EV(WAITING));
					am_journal_group(am, g);
					continue;
				}
				m->left = true;
				if (g->state != AM_G_DISMANTLED) {
					snprintf(why, sizeof why, "rank %u heartbeat lost", r);
					dismantle(am, g, why, true);
				}
				continue;
			}
			any_alive = true;
		}
		if (!any_alive) {
			group_remove(am, g);
			continue;
		}
		if (!polled)
			continue;
		if (g->state == AM_G_READY && !tree_healthy(am, g, why, sizeof why)) {
			release_tree(am, g);
			am_log(0, "group %llu: %s: rebuilding", (unsigned long long)g->id, why);
			am->st.dismantles++;
			am_group_set_state(g, AM_G_FALLBACK, why);
			establish(am, g, true);
		} else if (g->state == AM_G_FALLBACK && g->rebuildable) {
			establish(am, g, true); /* quiet while the reason stays the same */
		}
	}
}

void am_tick(struct am *am)
{
	uint64_t now = util_now_ns();
	bool polled = false;

	if (now - am->last_poll_ns >= (uint64_t)am->cfg.poll_ms * NS_PER_MS) {
		for (size_t i = 0; i < am->nsw; i++)
			sw_poll(am, &am->sw[i]);
		am->last_poll_ns = now;
		am_account(am);
		polled = true;
	}
	check_groups(am, polled);
}

int am_init(struct am *am)
{
	am->start_ns = util_now_ns();
	am->next_group_id = 1;
	am->nsw = am->cfg.nswitches;
	for (size_t i = 0; i < am->nsw; i++) {
		am->sw[i].cfg = &am->cfg.sw[i];
		sw_poll(am, &am->sw[i]);
	}
	am->last_poll_ns = util_now_ns();
	if (am->cfg.journal[0])
		return am_journal_open(am);
	return 0;
}

void am_fini(struct am *am)
{
	/* Groups stay configured on the switches: the data plane never needs the AM. */
	while (am->groups) {
		struct am_group *g = am->groups;
		am->groups = g->next;
		am_group_free(g);
	}
	for (size_t i = 0; i < am->nsw; i++) {
		if (am->sw[i].conn)
			ctl_disconnect(am->sw[i].conn);
		ctl_caps_free(&am->sw[i].caps);
		running_free(&am->sw[i]);
	}
	if (am->journal)
		fclose(am->journal);
	am->journal = NULL;
}
