/* inca-am groups and their lifecycle: establishment (plan, push to the switches),
 * dismantling, rebuilds and removal, the events sent to members, and the member calls on a
 * group (Leave, Dismantle, ReportFailure, sessions). Switch I/O is asynchronous
 * (switches.c): a push or a re-check is queued on the switches' workers and finishes in
 * am_group_sw_done. Join and credentials are join.c, heartbeats and tree checks checks.c,
 * the journal journal.c, the query replies query.c. Main loop only. */
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

uint64_t am_rnd64(void)
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

static struct am_group *group_find(struct am *am, uint64_t id)
{
	for (struct am_group *g = am->groups; g; g = g->next)
		if (g->id == id)
			return g;
	return NULL;
}

/* ---------------------------------------------------------------- attachment */

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

/* The one place a client's TreeInfo is filled: from the tree model of the switch rank r sends
 * to, plus the plan's MTU and the member's own identity. */
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
	ti->slots = t->slots;
	ti->mtu = p->mtu;
	ti->bsl_bits = t->bsl_bits;
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

void am_notify_all(struct am *am, struct am_group *g, int kind)
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

/* Switch work a group waits for (g->op). A re-check: polls of the switches its old tree used,
 * queued after the deletes of that tree, then a rebuild. A push: the plan (g->push_plan) goes
 * to the children all at once, then to the root ("children first, root last": the root only
 * starts disseminating once every child knows the tree). Meanwhile the group keeps its state
 * (forming or fallback); it becomes READY only when every switch took its part, and any
 * refusal or timeout removes the parts that went out and falls back. */
enum put_state { PUT_NONE, PUT_SENT, PUT_DONE, PUT_NOT_SENT };

struct am_gop {
	uint32_t seq;          /* tags the requests: an answer of an older op is ignored */
	unsigned outstanding;  /* requests not answered yet */
	bool push;
	/* push */
	bool rebuild, was_waiting, root_sent, failed;
	uint8_t *put;          /* enum put_state per g->push_plan.sws entry */
	char prev[256], why[256];
};

static void op_free(struct am_gop *op)
{
	if (!op)
		return;
	free(op->put);
	free(op);
}

static struct am_gop *op_new(struct am *am, struct am_group *g, bool push)
{
	struct am_gop *op = calloc(1, sizeof *op);

	if (!op)
		abort(); /* daemon: out of memory */
	op->seq = ++am->next_op_seq;
	op->push = push;
	g->op = op;
	return op;
}

/* A ReportFailure waiting for this group's rebuild gets the outcome. */
static void answer_report(struct am_group *g)
{
	Inca__Am__V1__FailureReply rp = INCA__AM__V1__FAILURE_REPLY__INIT;

	if (!g->reply)
		return;
	rp.acted = true;
	rp.generation = g->generation;
	rp.state = (char *)am_state_name(g->state);
	am_pending_answer(g->reply, GRPC_STATUS_OK, "", &rp.base);
	g->reply = NULL;
}

/* Delete what a push sent out (queued behind the puts on each switch, so it runs after them)
 * and forget the plan. */
static void push_unwind(struct am *am, struct am_group *g, const uint8_t *put)
{
	for (size_t k = 0; g->push_plan.ok && k < g->push_plan.nsw; k++)
		if (put && (put[k] == PUT_SENT || put[k] == PUT_DONE))
			am_sw_delete(am, g->push_plan.sws[k].sw, g->push_plan.sws[k].tree.id);
	am_plan_free(&g->push_plan);
}

/* The group is dismantled or removed while switch work is in flight: its answers will be
 * ignored. */
static void op_cancel(struct am *am, struct am_group *g)
{
	if (!g->op)
		return;
	if (g->op->push)
		push_unwind(am, g, g->op->put);
	op_free(g->op);
	g->op = NULL;
	am_account(am);
}

/* Remove the group's trees from its switches (fire-and-forget deletes) and drop the plan.
 * The switches that are up are polled right after their delete: the status an operator reads
 * after a dismantle shows their freed slots, and one that does not answer (the failure a
 * member reported) is marked down. recheck: a rebuild follows once those polls answered
 * (g->op); returns false when there was nothing to wait for. */
bool am_release_tree(struct am *am, struct am_group *g, bool recheck)
{
	struct am_gop *op = NULL;

	op_cancel(am, g);
	if (!g->plan.ok)
		return false;
	if (recheck)
		op = op_new(am, g, false);
	for (size_t k = 0; k < g->plan.nsw; k++) {
		size_t sw = (size_t)g->plan.sws[k].sw;
		am_sw_delete(am, sw, g->plan.sws[k].tree.id);
		if (!am->sw[sw].up)
			continue;
		am_sw_poll(am, sw, op ? g->id : 0, op ? op->seq : 0);
		if (op)
			op->outstanding++;
	}
	am_plan_free(&g->plan);
	am_account(am);
	if (op && !op->outstanding) {
		op_free(op);
		g->op = NULL;
	}
	return g->op != NULL;
}

static bool tree_id_used(struct am *am, uint16_t id)
{
	for (struct am_group *g = am->groups; g; g = g->next)
		if ((g->plan.ok && g->plan.sws[0].tree.id == id) ||
		    (g->push_plan.ok && g->push_plan.sws[0].tree.id == id))
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

static void established(struct am *am, struct am_group *g, bool rebuild)
{
	g->generation++;
	g->rebuildable = false;
	am_group_set_state(g, AM_G_READY, "");
	am_account(am);
	am->st.groups_ready++;
	if (rebuild)
		am->st.rebuilds++;
	am_log(1, "group %llu (%s/%s, %u ranks): tree %u %s, root %s, %u slots, gen %u",
	       (unsigned long long)g->id, g->job, g->name, g->size, g->plan.sws[0].tree.id,
	       g->plan.multi_level ? "2-level" : "single-level", am->sw[g->plan.root].cfg->name,
	       g->plan.slots, g->generation);
	am_journal_group(am, g);
	am_notify_all(am, g, rebuild ? EV(REBUILT) : EV(TREE_READY));
}

/* g->state is FALLBACK with its reason. */
static void fell_back(struct am *am, struct am_group *g, bool rebuild, bool was_waiting,
		      const char *prev)
{
	g->rebuildable = rebuild;
	if (was_waiting && strcmp(prev, g->reason) == 0)
		return; /* still waiting for the fabric: nothing new to tell */
	am->st.groups_fallback++;
	am_log(1, "group %llu (%s/%s): host path: %s", (unsigned long long)g->id, g->job, g->name,
	       g->reason);
	am_journal_group(am, g);
	am_notify_all(am, g, rebuild ? EV(DISMANTLED) : EV(HOST_FALLBACK));
}

static void push_part(struct am *am, struct am_group *g, size_t k)
{
	g->op->put[k] = PUT_SENT;
	g->op->outstanding++;
	am_sw_put(am, (size_t)g->push_plan.sws[k].sw, &g->push_plan.sws[k].tree, g->id, g->op->seq,
		  (int)k);
}

/* Every switch of the push answered. */
static void push_done(struct am *am, struct am_group *g)
{
	struct am_gop *op = g->op;

	g->op = NULL;
	if (op->failed) {
		push_unwind(am, g, op->put);
		am_account(am);
		am_group_set_state(g, AM_G_FALLBACK, op->why);
		fell_back(am, g, op->rebuild, op->was_waiting, op->prev);
	} else {
		g->plan = g->push_plan;
		memset(&g->push_plan, 0, sizeof g->push_plan);
		established(am, g, op->rebuild);
	}
	op_free(op);
	answer_report(g);
}

/* Plan a tree for g and start pushing it; READY (or FALLBACK) once the switches answered
 * (push_done). A group that cannot get a tree falls back at once, with the reason
 * (rebuildable as given). Notifies the members either way. */
void am_establish(struct am *am, struct am_group *g, bool rebuild)
{
	struct am_sw_view v[AM_MAX_SWITCHES];
	struct am_mem_view mv[4096];
	struct am_plan_req req;
	struct am_plan plan;
	struct am_gop *op;
	int rc;
	char prev[256];
	bool was_waiting = g->state == AM_G_FALLBACK && g->rebuildable;
	uint16_t tid;
	bool wants = true;
	struct am_quota q;
	uint32_t jtrees, jslots, left;
	char why[256];

	snprintf(prev, sizeof prev, "%s", g->reason);
	if (g->size > 4096) {
		am_group_set_state(g, AM_G_FALLBACK, "group larger than 4096 ranks");
		goto fallback;
	}
	am_build_views(am, v);
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
	for (const struct am_group *x = am->groups; x; x = x->next) {
		/* a tree held, or one being pushed */
		const struct am_plan *xp = x->plan.ok ? &x->plan
					   : x->push_plan.ok ? &x->push_plan : NULL;
		if (x != g && xp && strcmp(x->job, g->job) == 0) {
			jtrees++;
			jslots += xp->slots;
		}
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
	req.key = (uint32_t)am_rnd64();
	if (!req.key)
		req.key = 1;
	/* A new data-plane key and key id for every tree generation. */
	if (getrandom(req.auth_key, sizeof req.auth_key, 0) != (ssize_t)sizeof req.auth_key) {
		am_group_set_state(g, AM_G_FALLBACK, "no randomness for the group key");
		goto fallback;
	}
	do
		req.auth_key_id = (uint32_t)am_rnd64();
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
	g->push_plan = plan;
	op = op_new(am, g, true);
	op->rebuild = rebuild;
	op->was_waiting = was_waiting;
	snprintf(op->prev, sizeof op->prev, "%s", prev);
	op->put = calloc(plan.nsw, sizeof *op->put);
	if (!op->put)
		abort();
	am_account(am); /* the plan's slots are held from now on */
	am_log(2, "group %llu: pushing tree %u to %zu switch(es)", (unsigned long long)g->id, tid,
	       plan.nsw);
	/* plan.sws: children first, the root last */
	for (size_t k = 0; k + 1 < plan.nsw; k++)
		push_part(am, g, k);
	if (!op->outstanding) {
		op->root_sent = true;
		push_part(am, g, plan.nsw - 1);
	}
	return;
fallback:
	fell_back(am, g, rebuild, was_waiting, prev);
	answer_report(g);
}

static void put_answered(struct am *am, struct am_group *g, const struct am_sw_answer *a)
{
	struct am_gop *op = g->op;

	if (a->k < 0 || (size_t)a->k >= g->push_plan.nsw)
		return;
	if (a->rc == 0) {
		op->put[a->k] = PUT_DONE;
	} else {
		/* Not connected: nothing reached the switch. Otherwise (refused, timed out) a
		 * delete is harmless and covers a switch that applied it late. */
		op->put[a->k] = a->rc == -ENOTCONN ? PUT_NOT_SENT : PUT_SENT;
		if (!op->failed) {
			snprintf(op->why, sizeof op->why, "switch %s refused tree %u: %s",
				 am->sw[a->sw].cfg->name, g->push_plan.sws[a->k].tree.id,
				 a->rc == -ENOTCONN ? "not connected" : a->err);
			am->st.push_failures++;
		}
		op->failed = true;
	}
	if (--op->outstanding)
		return;
	if (!op->failed && !op->root_sent) {
		op->root_sent = true;
		push_part(am, g, g->push_plan.nsw - 1);
		return;
	}
	push_done(am, g);
}

void am_group_sw_done(struct am *am, const struct am_sw_answer *a)
{
	struct am_group *g = group_find(am, a->gid);
	struct am_gop *op = g ? g->op : NULL;

	if (!op || op->seq != a->seq || !op->outstanding)
		return; /* the group moved on (dismantled, removed): nothing waits */
	if (op->push) {
		if (a->kind == AM_SWREQ_PUT)
			put_answered(am, g, a);
		return;
	}
	if (a->kind != AM_SWREQ_POLL || --op->outstanding)
		return;
	/* The old tree's switches were re-read: rebuild on what is left. */
	op_free(op);
	g->op = NULL;
	am_establish(am, g, true);
}

/* Take the tree down. terminal: the group is over (leave, heartbeat, operator); else it lost
 * its tree to a fabric failure and will be rebuilt when possible: once the old tree's
 * switches were re-read (release_tree), or at once when there is nothing to re-read. */
void am_dismantle(struct am *am, struct am_group *g, const char *reason, bool terminal)
{
	bool rechecking = am_release_tree(am, g, !terminal);

	am->st.dismantles++;
	am_group_set_state(g, terminal ? AM_G_DISMANTLED : AM_G_FALLBACK, reason);
	g->rebuildable = !terminal;
	am_log(1, "group %llu (%s/%s) dismantled: %s", (unsigned long long)g->id, g->job, g->name,
	       reason);
	am_journal_group(am, g);
	am_notify_all(am, g, EV(DISMANTLED));
	if (terminal)
		answer_report(g);
	else if (!rechecking)
		am_establish(am, g, true);
}

void am_group_free(struct am_group *g)
{
	am_plan_free(&g->plan);
	am_plan_free(&g->push_plan);
	op_free(g->op);
	free(g->m);
	free(g);
}

void am_group_remove(struct am *am, struct am_group *g)
{
	struct am_group **pp = &am->groups;

	am_release_tree(am, g, false);
	answer_report(g);
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

/* ---------------------------------------------------------------- member calls on a group */

/* The member a call names, if its token is right; *gout its group. */
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
	if (g->state == AM_G_FORMING && !g->op) {
		m->joined = false;
		g->joined--;
		am_notify_all(am, g, EV(WAITING));
	} else if (g->state != AM_G_DISMANTLED) { /* also a complete group being pushed */
		snprintf(why, sizeof why, "rank %u left%s%s", rq->rank, rq->reason[0] ? ": " : "",
			 rq->reason);
		am_dismantle(am, g, why, true);
	}
	for (uint32_t r = 0; r < g->size; r++)
		if (g->m[r].joined && !g->m[r].left)
			all_left = false;
	if (all_left)
		am_group_remove(am, g);
	else
		am_journal_group(am, g);
	return GRPC_STATUS_OK;
}

grpc_status_code am_dismantle_rpc(struct am *am, const Inca__Am__V1__DismantleRequest *rq,
				  const struct am_auth *who, char *msg, size_t cap)
{
	struct am_group *g;
	char why[200];

	if (!am->cfg.admin_token[0]) {
		am->st.operator_denied++;
		am_log(0, "DENIED dismantle of group %llu: no admin_token configured",
		       (unsigned long long)rq->group_id);
		snprintf(msg, cap, "admin operations are disabled: set admin_token in the AM config "
				   "and pass it (inca --admin-token / INCA_ADMIN_TOKEN)");
		return GRPC_STATUS_PERMISSION_DENIED;
	}
	if (who->who != AM_CALLER_ADMIN && !am_secret_eq(rq->admin_token, am->cfg.admin_token)) {
		am->st.operator_denied++;
		am_log(0, "DENIED dismantle of group %llu: bad or missing admin token",
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
	am_dismantle(am, g, why, true);
	return GRPC_STATUS_OK;
}

/* A member saw its INC path fail mid-collective. Only the tree generation the member
 * used is acted upon, once: every rank of a failed call reports it, and the first report has
 * already replaced the tree when the others arrive. */
grpc_status_code am_report_failure(struct am *am, const Inca__Am__V1__FailureReport *rq,
				   Inca__Am__V1__FailureReply *rp, struct am_pending *call,
				   char *msg, size_t cap)
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
	/* Re-reads the tree's switches (release_tree), then rebuilds: the reply waits for it. */
	am_dismantle(am, g, why, false);
	if (g->op) {
		g->reply = call;
		return AM_DEFERRED;
	}
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

/* ---------------------------------------------------------------- start and stop */

int am_init(struct am *am)
{
	int rc;

	am->start_ns = util_now_ns();
	am->next_group_id = 1;
	am->wake_fd = -1;
	rc = am_sw_start(am);
	if (rc < 0) {
		am_log(0, "cannot start the switch workers: %s", strerror(-rc));
		return rc;
	}
	am->last_poll_ns = util_now_ns();
	if (am->cfg.journal[0])
		return am_journal_open(am);
	return 0;
}

void am_fini(struct am *am)
{
	/* Groups stay configured on the switches: the data plane never needs the AM. */
	am_sw_stop(am);
	while (am->groups) {
		struct am_group *g = am->groups;
		am->groups = g->next;
		am_group_free(g);
	}
	if (am->journal)
		fclose(am->journal);
	am->journal = NULL;
}
