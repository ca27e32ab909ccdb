/* inca-am state: switches (NETCONF polling through lib/ctl), groups and their lifecycle
 * (join, establishment, dismantling, rebuilds, heartbeats), the journal that lets a restarted
 * AM keep running groups, job credentials, and the replies of the query RPCs. Main loop only. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "am.h"
#include "util/util.h"

#define NS_PER_MS 1000000ull
#define EV(k) INCA__AM__V1__GROUP_EVENT__KIND__##k

static uint64_t rnd64(void)
{
	uint64_t v = 0;

	while (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
		;
	return v;
}

static const char *state_name(enum am_gstate s)
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

static int sw_index(const struct am *am, const char *name)
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

/* ---------------------------------------------------------------- journal */

/* Tokens in the journal are whitespace separated; names are checked at join to have none. */
static const char *tok(const char *s)
{
	return s[0] ? s : "-";
}

static void untok(char *dst, size_t cap, const char *s)
{
	snprintf(dst, cap, "%s", strcmp(s, "-") == 0 ? "" : s);
}

static void journal_sync(struct am *am)
{
	if (!am->journal)
		return;
	fflush(am->journal);
	fsync(fileno(am->journal));
	am->st.journal_records++;
}

static void journal_group_write(struct am *am, FILE *f, const struct am_group *g)
{
	fprintf(f, "G %llu %s %s %s %u %u %u %u %u %u %u %u %u %d %zu",
		(unsigned long long)g->id, state_name(g->state), g->job, tok(g->name), g->size,
		g->slots_wanted, g->generation, g->plan.ok ? g->plan.sws[g->plan.nsw - 1].tree.id : 0,
		g->plan.ok ? g->plan.sws[g->plan.nsw - 1].tree.key : 0, g->plan.slots,
		g->plan.bsl_bits, g->plan.mtu, g->plan.slot_bytes, g->rebuildable ? 1 : 0,
		g->plan.ok ? g->plan.nsw : 0);
	for (size_t i = 0; g->plan.ok && i < g->plan.nsw; i++) {
		int p = g->plan.sws[i].parent;
		fprintf(f, " %s:%s", am->sw[g->plan.sws[i].sw].cfg->name,
			p < 0 ? "-" : am->sw[p].cfg->name);
	}
	fprintf(f, "\n");
	/* K: the tree's data-plane key (the journal file is 0600) */
	if (g->plan.ok && g->plan.sws[0].tree.auth) {
		const struct ctl_tree *t = &g->plan.sws[0].tree;
		fprintf(f, "K %llu %u ", (unsigned long long)g->id, t->auth_key_id);
		for (size_t i = 0; i < WIRE_AUTH_KEY_LEN; i++)
			fprintf(f, "%02x", t->auth_key[i]);
		fprintf(f, "\n");
	}
	for (uint32_t r = 0; r < g->size; r++) {
		const struct am_member *m = &g->m[r];
		if (!m->joined)
			continue;
		fprintf(f, "M %llu %u %llu %u %u %s %s %s %u %u %d %d\n", (unsigned long long)g->id,
			r, (unsigned long long)m->token, m->bfr_id, m->qpn, m->addr, tok(m->host),
			g->plan.ok ? am->sw[g->plan.send_sw[r]].cfg->name : "-", m->dtype_mask,
			m->op_mask, m->left ? 1 : 0, m->wants_det ? 1 : 0);
	}
}

static void journal_group(struct am *am, const struct am_group *g)
{
	if (!am->journal)
		return;
	journal_group_write(am, am->journal, g);
	journal_sync(am);
}

static void journal_del(struct am *am, uint64_t id)
{
	if (!am->journal)
		return;
	fprintf(am->journal, "D %llu\n", (unsigned long long)id);
	journal_sync(am);
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
	if (am->journal) {
		fprintf(am->journal, "J %s %s\n", job, cred);
		journal_sync(am);
	}
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

static const struct ctl_tree *running_find(const struct am_switch *s, uint16_t id)
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
static void account(struct am *am)
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
			if (k >= 0 && running_find(s, g->plan.sws[k].tree.id)) {
				mine_slots += g->plan.sws[k].tree.slots;
				mine_trees++;
			}
		}
		s->foreign_slots = s->caps.used_slots > mine_slots ? s->caps.used_slots - mine_slots : 0;
		s->foreign_trees = s->caps.used_trees > mine_trees ? s->caps.used_trees - mine_trees : 0;
	}
}

static enum am_role sw_role(const struct am_switch *s)
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
	account(am);
	for (size_t i = 0; i < am->nsw; i++) {
		const struct am_switch *s = &am->sw[i];
		uint32_t used = s->foreign_slots + s->am_slots, usedt = s->foreign_trees + s->am_trees;
		memset(&v[i], 0, sizeof v[i]);
		v[i].name = s->cfg->name;
		v[i].data_addr = s->caps.data_addr;
		v[i].role = sw_role(s);
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
			return sw_index(am, am->cfg.attach[i].sw);
	}
	if (m->hint[0] && sw_index(am, m->hint) >= 0)
		return sw_index(am, m->hint);
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

static void set_state(struct am_group *g, enum am_gstate s, const char *reason)
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
	account(am);
}

static bool tree_id_used(struct am *am, uint16_t id)
{
	for (struct am_group *g = am->groups; g; g = g->next)
		if (g->plan.ok && g->plan.sws[0].tree.id == id)
			return true;
	for (size_t i = 0; i < am->nsw; i++)
		if (running_find(&am->sw[i], id))
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

	snprintf(prev, sizeof prev, "%s", g->reason);
	if (g->size > 4096) {
		set_state(g, AM_G_FALLBACK, "group larger than 4096 ranks");
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
	}
	if (!wants) {
		set_state(g, AM_G_FALLBACK, "a client asked for the host path only");
		goto fallback;
	}
	tid = alloc_tree_id(am);
	if (!tid) {
		set_state(g, AM_G_FALLBACK, "no free tree id");
		goto fallback;
	}
	req.tree_id = tid;
	req.key = (uint32_t)rnd64();
	if (!req.key)
		req.key = 1;
	/* A new data-plane key and key id for every tree generation. */
	if (getrandom(req.auth_key, sizeof req.auth_key, 0) != (ssize_t)sizeof req.auth_key) {
		set_state(g, AM_G_FALLBACK, "no randomness for the group key");
		goto fallback;
	}
	do
		req.auth_key_id = (uint32_t)rnd64();
	while (!req.auth_key_id || req.auth_key_id == g->last_auth_key_id);
	g->last_auth_key_id = req.auth_key_id;
	req.slots_wanted = g->slots_wanted ? g->slots_wanted : am->cfg.slots_default;
	req.slots_min = am->cfg.slots_min;
	rc = am_plan_build(v, am->nsw, mv, g->size, &req, &plan);
	explicit_bzero(req.auth_key, sizeof req.auth_key);
	if (rc < 0) {
		set_state(g, AM_G_FALLBACK, "out of memory while planning");
		goto fallback;
	}
	if (!plan.ok) {
		set_state(g, AM_G_FALLBACK, plan.reason);
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
		set_state(g, AM_G_FALLBACK, why);
		goto fallback;
	}
	g->plan = plan;
	g->generation++;
	g->rebuildable = false;
	set_state(g, AM_G_READY, "");
	account(am);
	am->st.groups_ready++;
	if (rebuild)
		am->st.rebuilds++;
	am_log(1, "group %llu (%s/%s, %u ranks): tree %u %s, root %s, %u slots, gen %u",
	       (unsigned long long)g->id, g->job, g->name, g->size, tid,
	       plan.multi_level ? "2-level" : "single-level", am->sw[plan.root].cfg->name,
	       plan.slots, g->generation);
	journal_group(am, g);
	notify_all(am, g, rebuild ? EV(REBUILT) : EV(TREE_READY));
	return;
fallback:
	g->rebuildable = rebuild;
	if (was_waiting && strcmp(prev, g->reason) == 0)
		return; /* still waiting for the fabric: nothing new to tell */
	am->st.groups_fallback++;
	am_log(1, "group %llu (%s/%s): host path: %s", (unsigned long long)g->id, g->job, g->name,
	       g->reason);
	journal_group(am, g);
	notify_all(am, g, rebuild ? EV(DISMANTLED) : EV(HOST_FALLBACK));
}

/* Take the tree down. terminal: the group is over (leave, heartbeat, operator); else it lost
 * its tree to a fabric failure and will be rebuilt when possible. */
static void dismantle(struct am *am, struct am_group *g, const char *reason, bool terminal)
{
	release_tree(am, g);
	am->st.dismantles++;
	set_state(g, terminal ? AM_G_DISMANTLED : AM_G_FALLBACK, reason);
	g->rebuildable = !terminal;
	am_log(1, "group %llu (%s/%s) dismantled: %s", (unsigned long long)g->id, g->job, g->name,
	       reason);
	journal_group(am, g);
	notify_all(am, g, EV(DISMANTLED));
}

static void group_free(struct am_group *g)
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
	journal_del(am, g->id);
	am_log(1, "group %llu removed", (unsigned long long)g->id);
	group_free(g);
}

/* ---------------------------------------------------------------- RPC handlers */

static bool name_ok(const char *s, bool allow_empty)
{
	size_t n = strlen(s);

	if ((!allow_empty && n == 0) || n >= AM_STR)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == ':' || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

static bool addr_ok(const char *s)
{
	struct sockaddr_in sa;

	return s && strlen(s) < CTL_ADDR_MAX && strchr(s, ':') && util_parse_addr(s, -1, &sa) == 0 &&
	       sa.sin_addr.s_addr != 0 && sa.sin_port != 0;
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
	set_state(g, AM_G_FORMING, "");
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

	if (!name_ok(rq->job_id, false) || !name_ok(rq->group_name, true) ||
	    !name_ok(rq->host_name, true) || !name_ok(rq->attach_hint, true)) {
		snprintf(msg, cap, "job id, group name, host name and hint: 1..63 printable "
				   "characters without spaces or ':'");
		return GRPC_STATUS_INVALID_ARGUMENT;
	}
	if (rq->size < 1 || rq->size > 65535 || rq->rank >= rq->size || !addr_ok(rq->data_addr) ||
	    rq->qpn > 0xFFFFFF) {
		snprintf(msg, cap, "bad rank/size, data address (ip:port) or QPN");
		return GRPC_STATUS_INVALID_ARGUMENT;
	}
	if (!check_credential(am, rq->job_id, rq->job_credential)) {
		am->st.joins_denied++;
		am_log(0, "DENIED join: job %s rank %u from %s (%s): bad job credential", rq->job_id,
		       rq->rank, rq->data_addr, rq->host_name);
		snprintf(msg, cap, "job credential rejected");
		return GRPC_STATUS_PERMISSION_DENIED;
	}
	/* The forming group of this job/name, if any; a rank that is already in a running group
	 * of the same name starts a new one (a new communicator) and ends the old. */
	for (struct am_group *x = am->groups; x; x = x->next) {
		if (strcmp(x->job, rq->job_id) != 0 || strcmp(x->name, rq->group_name) != 0)
			continue;
		if (x->state == AM_G_FORMING && x->size == rq->size && !x->m[rq->rank].joined) {
			g = x;
			break;
		}
	}
	if (!g) {
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
	m->last_hb_ns = util_now_ns();
	m->attach = -1;
	if (rq->slots_wanted && rq->slots_wanted <= 65535 &&
	    (!g->slots_wanted || rq->slots_wanted < g->slots_wanted))
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
	journal_group(am, g);
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
		journal_group(am, g);
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
		       state_name(g->state), g->generation);
		rp->acted = false;
		rp->generation = g->generation;
		rp->state = (char *)state_name(g->state);
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
	rp->state = (char *)state_name(g->state);
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
		t = running_find(s, ps->tree.id);
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
					journal_group(am, g);
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
			set_state(g, AM_G_FALLBACK, why);
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
		account(am);
		polled = true;
	}
	check_groups(am, polled);
}

/* ---------------------------------------------------------------- recovery */

static int tree_copy(struct ctl_tree *dst, const struct ctl_tree *src)
{
	*dst = *src;
	dst->members = NULL;
	dst->children = NULL;
	dst->nmembers = dst->nchildren = 0;
	if (src->nmembers) {
		dst->members = calloc(src->nmembers, sizeof *dst->members);
		if (!dst->members)
			return -ENOMEM;
		memcpy(dst->members, src->members, src->nmembers * sizeof *dst->members);
		dst->nmembers = src->nmembers;
	}
	if (src->nchildren) {
		dst->children = calloc(src->nchildren, sizeof *dst->children);
		if (!dst->children)
			return -ENOMEM;
		dst->nchildren = src->nchildren;
		for (size_t i = 0; i < src->nchildren; i++) {
			dst->children[i] = src->children[i];
			dst->children[i].bfr_ids = calloc(src->children[i].nbfr + 1, sizeof(uint16_t));
			if (!dst->children[i].bfr_ids)
				return -ENOMEM;
			memcpy(dst->children[i].bfr_ids, src->children[i].bfr_ids,
			       src->children[i].nbfr * sizeof(uint16_t));
		}
	}
	return 0;
}

/* Journal replay state for one group: the switch layout as names until reconciled. */
struct replay {
	uint16_t tree_id;
	uint32_t key;
	bool auth; /* a K record followed the latest G record */
	uint8_t auth_key[WIRE_AUTH_KEY_LEN];
	uint32_t auth_key_id;
	size_t nsw;
	char sw[AM_MAX_SWITCHES][AM_STR], parent[AM_MAX_SWITCHES][AM_STR];
	char (*send)[AM_STR]; /* per rank */
	uint16_t slots, mtu;
	unsigned bsl;
	uint32_t slot_bytes;
};

struct replay_group {
	struct am_group *g;
	struct replay *r;
};

static enum am_gstate parse_state(const char *s)
{
	if (strcmp(s, "forming") == 0)
		return AM_G_FORMING;
	if (strcmp(s, "ready") == 0)
		return AM_G_READY;
	if (strcmp(s, "fallback") == 0)
		return AM_G_FALLBACK;
	return AM_G_DISMANTLED;
}

/* Rebuild g's plan from the switches' running trees. false if anything is missing. */
static bool reconcile(struct am *am, struct am_group *g, const struct replay *rp)
{
	struct am_plan *p = &g->plan;

	memset(p, 0, sizeof *p);
	p->sws = calloc(rp->nsw + 1, sizeof *p->sws);
	p->send_sw = calloc(g->size, sizeof *p->send_sw);
	if (!p->sws || !p->send_sw)
		goto bad;
	p->root = -1;
	for (size_t k = 0; k < rp->nsw; k++) {
		int s = sw_index(am, rp->sw[k]);
		const struct ctl_tree *t;
		if (s < 0 || !am->sw[s].up)
			goto bad;
		t = running_find(&am->sw[s], rp->tree_id);
		if (!t || t->key != rp->key || t->auth != rp->auth ||
		    (rp->auth && t->auth_key_id != rp->auth_key_id))
			goto bad;
		p->sws[k].sw = s;
		p->sws[k].parent = strcmp(rp->parent[k], "-") ? sw_index(am, rp->parent[k]) : -1;
		if (p->sws[k].parent < 0)
			p->root = s;
		if (tree_copy(&p->sws[k].tree, t) < 0)
			goto bad;
		/* the switch never returns the key: it comes from the journal */
		if (rp->auth)
			memcpy(p->sws[k].tree.auth_key, rp->auth_key, WIRE_AUTH_KEY_LEN);
		p->nsw = k + 1;
	}
	if (p->root < 0 || rp->nsw == 0)
		goto bad;
	for (uint32_t r = 0; r < g->size; r++) {
		int s = g->m[r].joined ? sw_index(am, rp->send[r]) : p->root;
		if (s < 0 || am_plan_find(p, s) < 0)
			goto bad;
		p->send_sw[r] = s;
	}
	p->ok = true;
	p->multi_level = rp->nsw > 1;
	p->slots = rp->slots;
	p->mtu = rp->mtu;
	p->bsl_bits = rp->bsl;
	p->slot_bytes = rp->slot_bytes;
	g->last_auth_key_id = rp->auth_key_id;
	return true;
bad:
	am_plan_free(p);
	return false;
}

/* 64 hex digits -> key; -EINVAL otherwise. */
static int parse_hex_key(const char *s, uint8_t *key)
{
	if (strlen(s) != 2 * WIRE_AUTH_KEY_LEN)
		return -EINVAL;
	for (size_t i = 0; i < 2 * WIRE_AUTH_KEY_LEN; i++) {
		char ch = s[i];
		int d = ch >= '0' && ch <= '9' ? ch - '0'
			: ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
			: ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
		if (d < 0)
			return -EINVAL;
		if (i % 2 == 0)
			key[i / 2] = (uint8_t)(d << 4);
		else
			key[i / 2] |= (uint8_t)d;
	}
	return 0;
}

static void replay_journal(struct am *am)
{
	struct replay_group rg[1024];
	size_t nrg = 0;
	/* the longest record: a G line naming every switch and its parent */
	static char line[AM_MAX_SWITCHES * (2 * AM_STR + 2) + 512];
	FILE *f = fopen(am->cfg.journal, "r");

	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		char *save = NULL, *t;
		if (!strchr(line, '\n') && !feof(f)) {
			/* longer than any record we write (corrupt): drop it whole, or its tail
			 * would be read as a record of its own */
			int ch;
			while ((ch = getc(f)) != EOF && ch != '\n')
				;
			continue;
		}
		t = strtok_r(line, " \n", &save);
		if (!t)
			continue;
		if (strcmp(t, "J") == 0) {
			char *id = strtok_r(NULL, " \n", &save), *cred = strtok_r(NULL, " \n", &save);
			if (id && cred && am->nlearned < AM_MAX_JOBS) {
				snprintf(am->learned[am->nlearned].id, AM_STR, "%s", id);
				snprintf(am->learned[am->nlearned].cred, sizeof am->learned[0].cred,
					 "%s", cred);
				am->nlearned++;
			}
		} else if (strcmp(t, "G") == 0) {
			char *f_[16];
			struct am_group *g;
			struct replay *r;
			uint64_t id;
			size_t i;
			for (i = 0; i < 16 && (f_[i] = strtok_r(NULL, " \n", &save)); i++)
				;
			/* 15 fields, then one per tree switch: a group without a tree (forming,
			 * fallback) has none (such groups were dropped at restarts before) */
			if (i < 15)
				continue;
			if (i == 15)
				f_[15] = NULL;
			id = strtoull(f_[0], NULL, 10);
			if (id == 0 || id == UINT64_MAX) /* never written: ids start at 1 */
				continue;
			for (i = 0; i < nrg && rg[i].g->id != id; i++)
				;
			if (i == nrg) {
				uint32_t size = (uint32_t)strtoul(f_[4], NULL, 10);
				if (nrg == 1024 || size < 1 || size > 65535)
					continue;
				g = calloc(1, sizeof *g);
				r = calloc(1, sizeof *r);
				if (!g || !r || !(g->m = calloc(size, sizeof *g->m)) ||
				    !(r->send = calloc(size, sizeof *r->send))) {
					free(g ? g->m : NULL);
					free(g);
					free(r);
					continue;
				}
				g->id = id;
				g->size = size;
				rg[nrg].g = g;
				rg[nrg].r = r;
				nrg++;
			}
			g = rg[i].g;
			r = rg[i].r;
			g->state = parse_state(f_[1]);
			snprintf(g->job, sizeof g->job, "%s", f_[2]);
			untok(g->name, sizeof g->name, f_[3]);
			g->slots_wanted = (uint16_t)strtoul(f_[5], NULL, 10);
			g->generation = (uint32_t)strtoul(f_[6], NULL, 10);
			r->tree_id = (uint16_t)strtoul(f_[7], NULL, 10);
			r->key = (uint32_t)strtoul(f_[8], NULL, 10);
			r->auth = false;
			r->auth_key_id = 0;
			explicit_bzero(r->auth_key, sizeof r->auth_key);
			r->slots = (uint16_t)strtoul(f_[9], NULL, 10);
			r->bsl = (unsigned)strtoul(f_[10], NULL, 10);
			r->mtu = (uint16_t)strtoul(f_[11], NULL, 10);
			r->slot_bytes = (uint32_t)strtoul(f_[12], NULL, 10);
			g->rebuildable = f_[13][0] == '1';
			r->nsw = strtoul(f_[14], NULL, 10);
			if (r->nsw > AM_MAX_SWITCHES)
				r->nsw = 0;
			/* f_[15] is the first switch: re-tokenise from it */
			for (size_t k = 0; k < r->nsw; k++) {
				char *e = k == 0 ? f_[15] : strtok_r(NULL, " \n", &save);
				char *colon = e ? strchr(e, ':') : NULL;
				if (!colon) {
					r->nsw = 0;
					break;
				}
				*colon = '\0';
				snprintf(r->sw[k], AM_STR, "%s", e);
				snprintf(r->parent[k], AM_STR, "%s", colon + 1);
			}
			memset(g->m, 0, g->size * sizeof *g->m);
			g->joined = 0;
		} else if (strcmp(t, "M") == 0) {
			char *f_[12];
			size_t i;
			uint64_t id;
			uint32_t rank;
			struct am_member *m;
			for (i = 0; i < 11 && (f_[i] = strtok_r(NULL, " \n", &save)); i++)
				;
			if (i < 11)
				continue;
			id = strtoull(f_[0], NULL, 10);
			rank = (uint32_t)strtoul(f_[1], NULL, 10);
			for (i = 0; i < nrg && rg[i].g->id != id; i++)
				;
			if (i == nrg || rank >= rg[i].g->size)
				continue;
			m = &rg[i].g->m[rank];
			if (!m->joined)
				rg[i].g->joined++;
			m->joined = true;
			m->rank = rank;
			m->token = strtoull(f_[2], NULL, 10);
			m->bfr_id = (uint16_t)strtoul(f_[3], NULL, 10);
			m->qpn = (uint32_t)strtoul(f_[4], NULL, 10);
			snprintf(m->addr, sizeof m->addr, "%s", f_[5]);
			untok(m->host, sizeof m->host, f_[6]);
			snprintf(rg[i].r->send[rank], AM_STR, "%s", f_[7]);
			m->dtype_mask = (uint32_t)strtoul(f_[8], NULL, 10);
			m->op_mask = (uint32_t)strtoul(f_[9], NULL, 10);
			m->left = f_[10][0] == '1';
			/* field 12 (deterministic) is absent in journals of older AMs */
			f_[11] = strtok_r(NULL, " \n", &save);
			m->wants_det = f_[11] && f_[11][0] == '1';
			m->wants_inc = true;
			m->attach = -1;
		} else if (strcmp(t, "K") == 0) {
			char *ids = strtok_r(NULL, " \n", &save), *kid = strtok_r(NULL, " \n", &save);
			char *hx = strtok_r(NULL, " \n", &save);
			uint64_t id = ids ? strtoull(ids, NULL, 10) : 0;
			unsigned long kv = kid ? strtoul(kid, NULL, 10) : 0;
			uint8_t key[WIRE_AUTH_KEY_LEN];
			size_t i;
			for (i = 0; i < nrg && rg[i].g->id != id; i++)
				;
			if (i == nrg || !hx || kv == 0 || kv > UINT32_MAX ||
			    parse_hex_key(hx, key) < 0)
				continue; /* a bad record leaves the group's key as it was */
			memcpy(rg[i].r->auth_key, key, sizeof key);
			explicit_bzero(key, sizeof key);
			rg[i].r->auth = true;
			rg[i].r->auth_key_id = (uint32_t)kv;
		} else if (strcmp(t, "D") == 0) {
			char *ids = strtok_r(NULL, " \n", &save);
			uint64_t id = ids ? strtoull(ids, NULL, 10) : 0;
			for (size_t i = 0; i < nrg; i++)
				if (rg[i].g->id == id) {
					group_free(rg[i].g);
					free(rg[i].r->send);
					free(rg[i].r);
					rg[i] = rg[--nrg];
					break;
				}
		}
	}
	fclose(f);

	/* Adopt: a READY group keeps running if every switch still has its tree; members get
	 * a grace period to reconnect their sessions. */
	for (size_t i = 0; i < nrg; i++) {
		struct am_group *g = rg[i].g;
		uint64_t now = util_now_ns();
		if (g->id >= am->next_group_id)
			am->next_group_id = g->id + 1;
		for (uint32_t r = 0; r < g->size; r++)
			g->m[r].last_hb_ns = now + (uint64_t)am->cfg.grace_ms * NS_PER_MS;
		g->created_ns = g->state_ns = now;
		if (g->state == AM_G_READY) {
			if (reconcile(am, g, rg[i].r)) {
				am_log(1, "recovered group %llu (%s/%s): tree %u still running",
				       (unsigned long long)g->id, g->job, g->name, rg[i].r->tree_id);
			} else {
				/* Remove what is left of it; rebuild once members are back. */
				for (size_t k = 0; k < rg[i].r->nsw; k++) {
					int s = sw_index(am, rg[i].r->sw[k]);
					if (s >= 0 && am->sw[s].conn &&
					    running_find(&am->sw[s], rg[i].r->tree_id))
						ctl_delete_tree(am->sw[s].conn, rg[i].r->tree_id);
				}
				set_state(g, AM_G_FALLBACK, "tree lost while the AM was down");
				g->rebuildable = true;
				am_log(1, "recovered group %llu: tree gone, will rebuild",
				       (unsigned long long)g->id);
			}
		}
		g->next = am->groups;
		am->groups = g;
		am->st.recovered_groups++;
		free(rg[i].r->send);
		free(rg[i].r);
	}
}

/* Rewrite the journal with the live state only (temp file + fsync + rename). */
static int journal_compact(struct am *am)
{
	char tmp[AM_PATH + 16];
	FILE *f;
	int fd;

	snprintf(tmp, sizeof tmp, "%s.tmp", am->cfg.journal);
	/* 0600: the journal holds job secrets and group keys (fchmod: a left-over tmp file
	 * keeps its old mode through O_CREAT) */
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0 && fchmod(fd, 0600) < 0) {
		close(fd);
		return -errno;
	}
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	fprintf(f, "# inca-am journal: J job secret | G group | K group key | M member | D deleted group\n");
	for (size_t i = 0; i < am->nlearned; i++)
		fprintf(f, "J %s %s\n", am->learned[i].id, am->learned[i].cred);
	for (struct am_group *g = am->groups; g; g = g->next)
		journal_group_write(am, f, g);
	fflush(f);
	fsync(fileno(f));
	fclose(f);
	if (rename(tmp, am->cfg.journal) < 0)
		return -errno;
	am->journal = fopen(am->cfg.journal, "a");
	return am->journal ? 0 : -errno;
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
	if (am->cfg.journal[0]) {
		int rc;
		replay_journal(am);
		account(am);
		rc = journal_compact(am);
		if (rc < 0) {
			am_log(0, "journal %s: %s", am->cfg.journal, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

void am_fini(struct am *am)
{
	/* Groups stay configured on the switches: the data plane never needs the AM. */
	while (am->groups) {
		struct am_group *g = am->groups;
		am->groups = g->next;
		group_free(g);
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

/* ---------------------------------------------------------------- query replies */

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
	const struct ctl_tree *run = running_find(s, t->id);
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

static void q_groups(struct am_qreply *q, struct am *am)
{
	Inca__Am__V1__ListGroupsReply *rp = qalloc(q, sizeof *rp);
	size_t n = 0, i = 0;
	uint64_t now = util_now_ns();

	inca__am__v1__list_groups_reply__init(rp);
	for (struct am_group *g = am->groups; g; g = g->next)
		n++;
	rp->groups = qalloc(q, (n + 1) * sizeof *rp->groups);
	rp->n_groups = n;
	for (struct am_group *g = am->groups; g; g = g->next, i++) {
		Inca__Am__V1__GroupInfo *gi = qalloc(q, sizeof *gi);
		size_t nm = 0;
		inca__am__v1__group_info__init(gi);
		rp->groups[n - 1 - i] = gi; /* oldest first */
		gi->group_id = g->id;
		gi->job_id = qstr(q, g->job);
		gi->group_name = qstr(q, g->name);
		gi->size = g->size;
		gi->joined = g->joined;
		gi->state = qstr(q, state_name(g->state));
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

static void q_trees(struct am_qreply *q, struct am *am)
{
	Inca__Am__V1__ListTreesReply *rp = qalloc(q, sizeof *rp);
	size_t n = 0;

	inca__am__v1__list_trees_reply__init(rp);
	for (struct am_group *g = am->groups; g; g = g->next)
		n += g->plan.ok ? g->plan.nsw : 0;
	rp->trees = qalloc(q, (n + 1) * sizeof *rp->trees);
	for (struct am_group *g = am->groups; g; g = g->next)
		for (size_t k = 0; g->plan.ok && k < g->plan.nsw; k++) {
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
	account(am);
	rp->switches = qalloc(q, (am->nsw + 1) * sizeof *rp->switches);
	rp->n_switches = am->nsw;
	for (size_t i = 0; i < am->nsw; i++) {
		const struct am_switch *s = &am->sw[i];
		Inca__Am__V1__SwitchInfo *si = qalloc(q, sizeof *si);
		inca__am__v1__switch_info__init(si);
		si->name = qstr(q, s->cfg->name);
		si->target = qstr(q, s->cfg->target);
		si->data_addr = qstr(q, s->caps.data_addr);
		si->role = qstr(q, role_name(sw_role(s)));
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
			li->peer_kind = qstr(q, sw_index(am, k->peer) >= 0 ? "switch" : "host");
			rp->links[rp->n_links++] = li;
		}
	q->msg = &rp->base;
}

static void q_stats(struct am_qreply *q, struct am *am)
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
	for (struct am_group *g = am->groups; g; g = g->next)
		rp->active_groups++;
	q->msg = &rp->base;
}

struct am_qreply *am_query(struct am *am, const char *method)
{
	struct am_qreply *q = calloc(1, sizeof *q);

	if (!q)
		return NULL;
	if (strcmp(method, "ListGroups") == 0)
		q_groups(q, am);
	else if (strcmp(method, "ListTrees") == 0)
		q_trees(q, am);
	else if (strcmp(method, "ListSwitches") == 0)
		q_switches(q, am);
	else if (strcmp(method, "ListLinks") == 0)
		q_links(q, am);
	else if (strcmp(method, "GetStats") == 0)
		q_stats(q, am);
	if (!q->msg) {
		am_qreply_free(q);
		return NULL;
	}
	return q;
}
