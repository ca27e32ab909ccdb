/* inca-am Join: job credentials (configured or set by a first joiner, and their expiry),
 * the caller checks of the other calls (am_auth_check), the validation of every JoinRequest
 * field, the per-job quotas and the creation of groups. What happens to a group once it is
 * complete is groups.c. Main loop only. */
#include <stdlib.h>
#include <string.h>

#include "am.h"
#include "inca/inca.h"
#include "util/util.h"

#define EV(k) INCA__AM__V1__GROUP_EVENT__KIND__##k

/* ---------------------------------------------------------------- credentials */

bool am_secret_eq(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;

	/* Constant time in the length of the supplied secret. */
	for (size_t i = 0; i < la; i++)
		d |= (unsigned char)(a[i] ^ b[i < lb ? i : 0]);
	return d == 0;
}

/* A job's configured or learned secret; NULL for a job unknown to both. */
static const char *job_secret(const struct am *am, const char *job)
{
	for (size_t i = 0; i < am->cfg.njobs; i++)
		if (strcmp(am->cfg.jobs[i].id, job) == 0)
			return am->cfg.jobs[i].cred;
	for (size_t i = 0; i < am->nlearned; i++)
		if (strcmp(am->learned[i].id, job) == 0)
			return am->learned[i].cred;
	return NULL;
}

/* Join's check: OK, PERMISSION_DENIED (bad secret, unknown job) or RESOURCE_EXHAUSTED (the
 * first-joiner table is full). An unknown job with allow_first_joiner takes the secret given. */
static grpc_status_code check_credential(struct am *am, const char *job, const char *cred,
					 char *msg, size_t cap)
{
	const char *secret = job_secret(am, job);

	if (secret) {
		if (am_secret_eq(cred, secret))
			return GRPC_STATUS_OK;
		snprintf(msg, cap, "job credential rejected");
		return GRPC_STATUS_PERMISSION_DENIED;
	}
	if (!am->cfg.allow_first_joiner || !cred[0] || strlen(cred) >= sizeof am->learned[0].cred) {
		snprintf(msg, cap, "job credential rejected");
		return GRPC_STATUS_PERMISSION_DENIED;
	}
	if (am->nlearned == AM_MAX_JOBS) {
		snprintf(msg, cap, "job %s unknown and the table of jobs set by their first joiner "
				   "is full (%d jobs, AM_MAX_JOBS): an entry is freed once its job has "
				   "had no group for first_joiner_ttl_s = %u s; or list the job in the AM "
				   "config", job, AM_MAX_JOBS, am->cfg.first_joiner_ttl_s);
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	}
	snprintf(am->learned[am->nlearned].id, AM_STR, "%s", job);
	snprintf(am->learned[am->nlearned].cred, sizeof am->learned[0].cred, "%s", cred);
	am->learned[am->nlearned].idle_since_ns = 0;
	am->nlearned++;
	am_journal_job(am, job, cred);
	am_log(1, "job %s: credential set by its first joiner", job);
	return GRPC_STATUS_OK;
}

/* Forget the secrets of learned jobs that have had no group for first_joiner_ttl_s, so that
 * a squatted job id or a table filled with bogus jobs does not last. */
void am_learned_expire(struct am *am, uint64_t now)
{
	uint64_t ttl_ns = (uint64_t)am->cfg.first_joiner_ttl_s * 1000 * NS_PER_MS;

	for (size_t i = 0; i < am->nlearned;) {
		bool busy = false;
		for (struct am_group *g = am->groups; g && !busy; g = g->next)
			busy = strcmp(g->job, am->learned[i].id) == 0;
		if (busy) {
			am->learned[i].idle_since_ns = 0;
		} else if (!am->learned[i].idle_since_ns) {
			am->learned[i].idle_since_ns = now;
		} else if (now - am->learned[i].idle_since_ns >= ttl_ns) {
			am_log(1, "job %s: first joiner's credential expired (no group for %u s)",
			       am->learned[i].id, am->cfg.first_joiner_ttl_s);
			am_journal_job_forget(am, am->learned[i].id);
			am->st.learned_expired++;
			am->learned[i] = am->learned[--am->nlearned];
			continue;
		}
		i++;
	}
}

grpc_status_code am_auth_check(struct am *am, const char *admin_token, const char *job,
			       const char *cred, const char *method, struct am_auth *out,
			       char *msg, size_t cap)
{
	memset(out, 0, sizeof *out);
	if (admin_token && admin_token[0]) {
		if (!am->cfg.admin_token[0] || !am_secret_eq(admin_token, am->cfg.admin_token)) {
			am->st.queries_denied++;
			am_log(0, "DENIED %s: bad admin token%s", method,
			       am->cfg.admin_token[0] ? "" : " (no admin_token configured)");
			snprintf(msg, cap, am->cfg.admin_token[0] ? "admin token rejected" :
				 "admin token rejected: the AM has no admin_token configured");
			return GRPC_STATUS_PERMISSION_DENIED;
		}
		out->who = AM_CALLER_ADMIN;
		return GRPC_STATUS_OK;
	}
	if (job && job[0]) {
		const char *secret = job_secret(am, job);
		if (!secret || !cred || !am_secret_eq(cred, secret)) {
			am->st.queries_denied++;
			am_log(0, "DENIED %s: job %.63s: bad job credential", method, job);
			snprintf(msg, cap, "job credential rejected");
			return GRPC_STATUS_PERMISSION_DENIED;
		}
		out->who = AM_CALLER_JOB;
		snprintf(out->job, sizeof out->job, "%s", job);
	}
	return GRPC_STATUS_OK;
}

/* ---------------------------------------------------------------- Join */

/* Does g count against its job's max_trees: it holds a tree, is forming (will ask for one)
 * or waits for a rebuild. */
static bool wants_tree(const struct am_group *g)
{
	return g->state == AM_G_READY || g->state == AM_G_FORMING ||
	       (g->state == AM_G_FALLBACK && g->rebuildable);
}

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
		/* still waiting for members (a complete group being pushed is not) */
		forming += g->state == AM_G_FORMING && g->joined < g->size;
		if (g->plan.ok)
			slots += g->plan.slots;
		else if (g->push_plan.ok)
			slots += g->push_plan.slots;
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
	st = check_credential(am, rq->job_id, rq->job_credential, msg, cap);
	if (st != GRPC_STATUS_OK) {
		am->st.joins_denied++;
		am_log(0, "DENIED join: job %s rank %u from %s (%s): %s", rq->job_id, rq->rank,
		       rq->data_addr, rq->host_name, msg);
		return st;
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
				am_dismantle(am, x, "superseded by a new group of the same job and name",
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
	m->token = am_rnd64();
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
		am_establish(am, g, false);
	else
		am_notify_all(am, g, EV(WAITING));
	return GRPC_STATUS_OK;
}
