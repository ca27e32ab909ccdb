/* inca-switch NETCONF server: the data trees it serves, built on demand from the running
 * tree set (through the tree model's YANG codec), the capabilities, links and statistics, and
 * ietf-netconf-monitoring; subtree and XPath filters; get and get-config. */
#include "netconf_int.h"

/* ---------------------------------------------------------------- data tree building */

static const char *fmt_addr(const struct sockaddr_in *a, char *buf, size_t cap)
{
	return util_format_addr(a, buf, cap);
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = 0;
}

/* One configured tree (the model's YANG codec); with state, also its forwarding state (A-BM,
 * BIFT). The group key (auth-key) only with secrets: the edit-config candidate needs it,
 * replies never carry it. An unauthenticated tree reads as auth disabled; in the candidate it
 * keeps "disabled" only when the switch requires keys (then it was an explicit opt-out),
 * otherwise an edit may merge a key into it. */
static int build_tree(struct lyd_node *trees, const struct sw_tree *rt, bool state, bool secrets)
{
	const struct ctl_tree *t = &rt->conf;
	unsigned flags = secrets ? CTL_YANG_SECRETS : CTL_YANG_AUTH_OFF;
	struct lyd_node *tn;
	char a[32];
	int rc = 0;

	if (secrets && sw_config_auth_required())
		flags |= CTL_YANG_AUTH_OFF;
	if (ctl_tree_to_lyd(t, trees, flags, &tn) < 0)
		return -1;
	if (state && !rc) {
		size_t bytes = t->bsl_bits / 8;
		char *h = malloc(2 * bytes + 1);
		struct lyd_node *fw;

		if (!h || lyd_new_inner(tn, NULL, "forwarding", 0, &fw)) {
			free(h);
			return -1;
		}
		hex(rt->abm, bytes, h);
		rc |= ctl_yang_term(fw, "a-bm", "%s", h);
		for (size_t i = 0; i < rt->nbift && !rc; i++) {
			const struct agg_bift_entry *b = &rt->bift[i];
			unsigned k = (unsigned)t->si * t->bsl_bits + b->bp;
			char ks[8];
			struct lyd_node *be;

			snprintf(ks, sizeof ks, "%u", k);
			if (lyd_new_list(fw, NULL, "bift-entry", 0, &be, ks)) {
				rc = -1;
				break;
			}
			rc |= ctl_yang_term(be, "bit-position", "%u", b->bp);
			rc |= ctl_yang_term(be, "neighbour", "%s",
					    fmt_addr(&rt->nbr[b->nbr].addr, a, sizeof a));
			hex(b->fbm, bytes, h);
			rc |= ctl_yang_term(be, "f-bm", "%s", h);
		}
		free(h);
	}
	return rc ? -1 : 0;
}

/* The counters of a table that the YANG module lists (SW_CTR_YANG), as leaves of p. */
static int build_ctrs(struct lyd_node *p, const struct sw_ctr *t, size_t n, const void *base)
{
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		char leaf[48];

		if (!(t[i].flags & SW_CTR_YANG))
			continue;
		snprintf(leaf, sizeof leaf, "%s", t[i].name);
		for (char *c = leaf; *c; c++)
			if (*c == '_')
				*c = '-';
		rc |= ctl_yang_term(p, leaf, "%llu", (unsigned long long)sw_ctr_get(&t[i], base));
	}
	return rc;
}

static int build_drops(struct lyd_node *p, const char *reason, uint64_t count)
{
	struct lyd_node *d;

	if (lyd_new_list(p, NULL, "drop", 0, &d, reason))
		return -1;
	return ctl_yang_term(d, "count", "%llu", (unsigned long long)count);
}

static int build_state(struct sw_netconf *nc, struct lyd_node *top, const struct sw_treeset *set)
{
	static const char *const offloaded[] = { "allreduce", "reduce", "bcast", "barrier",
						 "allgather", "reduce-scatter" };
	const struct sw_config *cfg = nc->cfg;
	struct lyd_node *caps, *links, *st;
	uint64_t used_slots = 0, total;
	struct sw_counters c;
	struct sw_drop_count dc[SW_STATS_NDROPS];
	char a[32];
	int rc = 0;

	if (lyd_new_inner(top, NULL, "capabilities", 0, &caps))
		return -1;
	for (size_t i = 0; i < set->ntrees; i++)
		used_slots += set->trees[i]->conf.slots;
	if (cfg->name[0])
		rc |= ctl_yang_term(caps, "name", "%s", cfg->name);
	rc |= ctl_yang_term(caps, "data-address", "%s", fmt_addr(&cfg->listen, a, sizeof a));
	if (cfg->role_hint[0])
		rc |= ctl_yang_term(caps, "role-hint", "%s", cfg->role_hint);
	rc |= ctl_yang_term(caps, "threads", "%u", cfg->threads);
	rc |= ctl_yang_term(caps, "max-trees", "%u", cfg->max_trees);
	rc |= ctl_yang_term(caps, "used-trees", "%zu", set->ntrees);
	rc |= ctl_yang_term(caps, "max-slots", "%u", cfg->max_slots);
	rc |= ctl_yang_term(caps, "used-slots", "%llu", (unsigned long long)used_slots);
	rc |= ctl_yang_term(caps, "max-slot-bytes", "%u", 4096u);
	rc |= ctl_yang_term(caps, "max-bsl", "%u", 4096u);
	rc |= ctl_yang_add_mask(caps, "data-type", (1u << SW_DTYPE_COUNT) - 1,
				sw_dtype_name, SW_DTYPE_COUNT);
	rc |= ctl_yang_add_mask(caps, "operation", (1u << SW_OP_COUNT) - 1,
				sw_op_name, SW_OP_COUNT);
	/* The collectives libinca offloads (docs/protocol.md, the INCA header's Collective
	 * field); the engine serves them all with every tree. */
	for (size_t i = 0; i < sizeof offloaded / sizeof offloaded[0]; i++)
		rc |= ctl_yang_term(caps, "collective", "%s", offloaded[i]);

	if (lyd_new_inner(top, NULL, "links", 0, &links))
		return -1;
	for (size_t i = 0; i < cfg->nlinks && !rc; i++) {
		const struct sw_conf_link *l = &cfg->links[i];
		struct lyd_node *ln;

		if (lyd_new_list(links, NULL, "link", 0, &ln, l->port))
			return -1;
		if (l->peer[0])
			rc |= ctl_yang_term(ln, "peer", "%s", l->peer);
		if (l->has_peer_addr)
			rc |= ctl_yang_term(ln, "peer-address", "%s",
					    fmt_addr(&l->peer_addr, a, sizeof a));
		if (l->speed_bps)
			rc |= ctl_yang_term(ln, "speed", "%llu", (unsigned long long)l->speed_bps);
		rc |= ctl_yang_term(ln, "oper-status", "%s", l->up ? "up" : "down");
	}

	if (lyd_new_inner(top, NULL, "statistics", 0, &st))
		return -1;
	sw_stats_sum_counters(nc->sw, &c);
	rc |= ctl_yang_term(st, "uptime-ms", "%llu",
			    (unsigned long long)((util_now_ns() - nc->sw->start_ns) / 1000000ull));
	rc |= build_ctrs(st, sw_ctr_global, sw_nctr_global, &c);
	total = sw_stats_drops(&c, dc);
	rc |= ctl_yang_term(st, "drops-total", "%llu", (unsigned long long)total);
	for (size_t i = 0; i < SW_STATS_NDROPS && !rc; i++)
		rc |= build_drops(st, dc[i].reason, dc[i].count);

	for (size_t ti = 0; ti < set->ntrees && !rc; ti++) {
		const struct sw_tree *t = set->trees[ti];
		struct agg_tree_stats s;
		struct lyd_node *tn;
		uint64_t drops = 0;
		char id[8];

		sw_stats_sum_tree(t, &s);
		snprintf(id, sizeof id, "%u", t->conf.id);
		if (lyd_new_list(st, NULL, "tree", 0, &tn, id))
			return -1;
		rc |= build_ctrs(tn, sw_ctr_tree, sw_nctr_tree, &s);
		for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT; v++)
			drops += s.drops[v];
		rc |= ctl_yang_term(tn, "drops", "%llu", (unsigned long long)drops);
		for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT && !rc; v++)
			rc |= build_drops(tn, agg_verdict_name((enum agg_verdict)v), s.drops[v]);
		for (uint32_t n = 0; n < t->nnbr && !rc; n++) {
			const struct sw_nbr *nb = &t->nbr[n];
			struct sw_qp_stats q;
			struct lyd_node *qn;

			sw_stats_sum_qp(t, n, &q);
			if (lyd_new_list(tn, NULL, "qp", 0, &qn, fmt_addr(&nb->addr, a, sizeof a)))
				return -1;
			rc |= ctl_yang_term(qn, "kind", "%s", sw_nbr_kind_name(nb->kind));
			rc |= ctl_yang_term(qn, "bfr-id", "%u", nb->bfr_id);
			rc |= ctl_yang_term(qn, "qpn", "%u", nb->qpn);
			rc |= build_ctrs(qn, sw_ctr_qp, sw_nctr_qp, &q);
		}
	}
	return rc ? -1 : 0;
}

static void fmt_time(time_t t, char *buf, size_t cap)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ietf-netconf-monitoring's netconf-state (RFC 6022), state only: the capabilities of the
 * <hello>, the running datastore and its lock, every schema get-schema serves, the sessions
 * and the server's counters. Runs in the poll thread (the writer of what it reads). */
static int build_monitoring(struct sw_netconf *nc, struct lyd_node **out)
{
	const struct lys_module *mod = ly_ctx_get_module_implemented(nc->ly,
								     "ietf-netconf-monitoring");
	struct lyd_node *top = NULL, *n, *ds, *e;
	const struct lys_module *m;
	const char **cp;
	char tb[32];
	uint32_t it = 0;
	int rc = 0;

	if (!mod || lyd_new_inner(NULL, mod, "netconf-state", 0, &top))
		return -1;
	if (lyd_new_inner(top, NULL, "capabilities", 0, &n))
		goto fail;
	cp = nc_server_get_cpblts_version(nc->ly, LYS_VERSION_1_0); /* as in the <hello> */
	for (size_t i = 0; cp && cp[i]; i++) {
		rc |= ctl_yang_term(n, "capability", "%s", cp[i]);
		lydict_remove(nc->ly, cp[i]);
	}
	free(cp);

	if (lyd_new_inner(top, NULL, "datastores", 0, &n) ||
	    lyd_new_list(n, NULL, "datastore", 0, &ds, "running"))
		goto fail;
	if (nc->lock_sid) {
		if (lyd_new_inner(ds, NULL, "locks", 0, &e) ||
		    lyd_new_inner(e, NULL, "global-lock", 0, &e))
			goto fail;
		rc |= ctl_yang_term(e, "locked-by-session", "%u", nc->lock_sid);
		fmt_time(nc->lock_time, tb, sizeof tb);
		rc |= ctl_yang_term(e, "locked-time", "%s", tb);
	}

	if (lyd_new_inner(top, NULL, "schemas", 0, &n))
		goto fail;
	while ((m = ly_ctx_get_module_iter(nc->ly, &it)) && !rc) {
		if (!strcmp(m->name, "yang") || !strcmp(m->name, "ietf-yang-metadata"))
			continue; /* libyang's internal modules: no text to serve */
		if (lyd_new_list(n, NULL, "schema", 0, &e, m->name, m->revision ? m->revision : "",
				 "ietf-netconf-monitoring:yang"))
			goto fail;
		rc |= ctl_yang_term(e, "namespace", "%s", m->ns);
		rc |= ctl_yang_term(e, "location", "NETCONF");
	}

	if (lyd_new_inner(top, NULL, "sessions", 0, &n))
		goto fail;
	for (const struct nc_sess *sd = nc->sessions; sd && !rc; sd = sd->next) {
		char id[16];

		snprintf(id, sizeof id, "%u", sd->id);
		if (lyd_new_list(n, NULL, "session", 0, &e, id))
			goto fail;
		rc |= ctl_yang_term(e, "transport", "%s",
				    sd->ssh ? "ietf-netconf-monitoring:netconf-ssh" :
					      CTL_YANG_MODULE ":netconf-unix");
		rc |= ctl_yang_term(e, "username", "%s", sd->user);
		if (sd->host[0])
			rc |= ctl_yang_term(e, "source-host", "%s", sd->host);
		fmt_time(sd->login, tb, sizeof tb);
		rc |= ctl_yang_term(e, "login-time", "%s", tb);
		rc |= ctl_yang_term(e, "in-rpcs", "%llu", (unsigned long long)sd->in_rpcs);
		rc |= ctl_yang_term(e, "in-bad-rpcs", "%llu", (unsigned long long)sd->in_bad_rpcs);
		rc |= ctl_yang_term(e, "out-rpc-errors", "%llu",
				    (unsigned long long)sd->out_rpc_errors);
		rc |= ctl_yang_term(e, "out-notifications", "0");
	}

	if (lyd_new_inner(top, NULL, "statistics", 0, &n))
		goto fail;
	fmt_time(nc->start_time, tb, sizeof tb);
	rc |= ctl_yang_term(n, "netconf-start-time", "%s", tb);
	rc |= ctl_yang_term(n, "in-bad-hellos", "%llu",
			    (unsigned long long)atomic_load(&nc->in_bad_hellos));
	rc |= ctl_yang_term(n, "in-sessions", "%llu",
			    (unsigned long long)atomic_load(&nc->in_sessions));
	rc |= ctl_yang_term(n, "dropped-sessions", "%llu",
			    (unsigned long long)nc->dropped_sessions);
	rc |= ctl_yang_term(n, "in-rpcs", "%llu", (unsigned long long)nc->in_rpcs);
	rc |= ctl_yang_term(n, "in-bad-rpcs", "%llu", (unsigned long long)nc->in_bad_rpcs);
	rc |= ctl_yang_term(n, "out-rpc-errors", "%llu", (unsigned long long)nc->out_rpc_errors);
	rc |= ctl_yang_term(n, "out-notifications", "0");
	if (rc)
		goto fail;
	*out = top;
	return 0;
fail:
	lyd_free_all(top);
	return -1;
}

/* The whole inca-switch tree: running config, plus state when with_state; group keys only
 * with secrets (the edit-config candidate, never a reply). */
int build_data(struct sw_netconf *nc, bool with_state, bool secrets, struct lyd_node **out)
{
	const struct lys_module *mod = ly_ctx_get_module_implemented(nc->ly, CTL_YANG_MODULE);
	struct lyd_node *top = NULL, *mg, *trees;
	const struct sw_treeset *set;
	int rc = 0;

	if (!mod || lyd_new_inner(NULL, mod, "inca-switch", 0, &top))
		return -1;
	if (lyd_new_inner(top, NULL, "management", 0, &mg) ||
	    lyd_new_inner(top, NULL, "trees", 0, &trees)) {
		lyd_free_all(top);
		return -1;
	}
	for (size_t i = 0; i < nc->nmgmt; i++)
		rc |= ctl_yang_term(mg, "address", "%s", nc->mgmt[i]);
	sw_switch_lock(nc->sw);
	if (with_state)
		sw_switch_snapshot(nc->sw, 200);
	set = sw_switch_trees(nc->sw);
	for (size_t i = 0; i < set->ntrees && !rc; i++)
		rc |= build_tree(trees, set->trees[i], with_state, secrets);
	if (with_state && !rc)
		rc |= build_state(nc, top, set);
	sw_switch_unlock(nc->sw);
	if (rc) {
		lyd_free_all(top);
		return -1;
	}
	*out = top;
	return 0;
}

/* ---------------------------------------------------------------- filters */

/* Subtree filter (RFC 6241 section 6) -> XPath expressions, one per selected branch.
 * Content-match nodes become predicates of their parent's step. */
struct xp_list {
	char **v;
	size_t n;
	bool bad;
};

static void xp_add(struct xp_list *l, const char *s)
{
	char **nv = realloc(l->v, (l->n + 1) * sizeof *nv);

	if (!nv || !(nv[l->n] = strdup(s))) {
		l->bad = true;
		if (nv)
			l->v = nv;
		return;
	}
	l->v = nv;
	l->n++;
}

static bool only_space(const char *s)
{
	for (; s && *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
			return false;
	return true;
}

/* Filter nodes are schema nodes where libyang recognised them, opaque nodes otherwise. */
static const char *fnode_module(struct ly_ctx *ly, const struct lyd_node *n, const char *inherit)
{
	const struct lyd_node_opaq *o = (const struct lyd_node_opaq *)n;
	const struct lys_module *m;

	if (n->schema)
		return n->schema->module->name;
	if (o->format == LY_VALUE_XML && o->name.module_ns && o->name.module_ns[0]) {
		m = ly_ctx_get_module_implemented_ns(ly, o->name.module_ns);
		return m ? m->name : NULL;
	}
	return inherit;
}

static const char *fnode_name(const struct lyd_node *n)
{
	return n->schema ? n->schema->name : ((const struct lyd_node_opaq *)n)->name.name;
}

static const char *fnode_value(const struct lyd_node *n)
{
	if (n->schema)
		return (n->schema->nodetype & LYD_NODE_TERM) ? lyd_get_value(n) : NULL;
	return ((const struct lyd_node_opaq *)n)->value;
}

static bool is_content_match(const struct lyd_node *n)
{
	const char *v = fnode_value(n);

	return !lyd_child(n) && v && !only_space(v);
}

static void subtree_to_xpath(struct ly_ctx *ly, const struct lyd_node *n, const char *prefix,
			     const char *inherit, struct xp_list *out)
{
	const char *mod = fnode_module(ly, n, inherit);
	char step[2048], preds[2048] = "";
	const struct lyd_node *c;
	size_t others = 0;

	if (!mod)
		return; /* unknown namespace: selects nothing */
	for (c = lyd_child(n); c; c = c->next) {
		if (is_content_match(c)) {
			const char *cm = fnode_module(ly, c, mod), *v = fnode_value(c);
			size_t len = strlen(preds);

			if (!cm || strchr(v, '\''))
				continue;
			snprintf(preds + len, sizeof preds - len, "[%s:%s='%s']", cm, fnode_name(c), v);
		} else {
			others++;
		}
	}
	int sl = snprintf(step, sizeof step, "%s/%s:%s%s", prefix, mod, fnode_name(n), preds);
	if (sl < 0 || (size_t)sl >= sizeof step - 1) {
		out->bad = true;
		return;
	}
	if (!others) {
		xp_add(out, step); /* selection node, or only content matches: the whole node */
		return;
	}
	for (c = lyd_child(n); c; c = c->next) {
		if (is_content_match(c)) {
			const char *cm = fnode_module(ly, c, mod);
			char p[2100];
			if (!cm)
				continue;
			snprintf(p, sizeof p, "%s/%s:%s", step, cm, fnode_name(c));
			xp_add(out, p);
		} else {
			subtree_to_xpath(ly, c, step, mod, out);
		}
	}
}

static void xp_free(struct xp_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
}

/* Keep only what the xpaths select (with ancestors and list keys). *data is replaced. */
static int apply_xpaths(struct lyd_node **data, const struct xp_list *xp)
{
	struct lyd_node *result = NULL;

	for (size_t i = 0; i < xp->n; i++) {
		struct ly_set *set = NULL;

		if (!*data)
			break;
		if (lyd_find_xpath(*data, xp->v[i], &set)) {
			lyd_free_all(result);
			return -1;
		}
		for (uint32_t j = 0; j < set->count; j++) {
			struct lyd_node *dup, *top;
			if (lyd_dup_single(set->dnodes[j], NULL,
					   LYD_DUP_RECURSIVE | LYD_DUP_WITH_PARENTS, &dup))
				continue;
			for (top = dup; top->parent; top = lyd_parent(top))
				;
			lyd_merge_siblings(&result, top, LYD_MERGE_DESTRUCT);
		}
		ly_set_free(set, NULL);
	}
	lyd_free_all(*data);
	*data = result;
	return 0;
}

/* Apply the <filter> of a get / get-config (absent: everything). Returns NULL or an error. */
static struct nc_server_reply *apply_filter(struct sw_netconf *nc, struct lyd_node *rpc,
					    struct lyd_node **data)
{
	struct lyd_node *f = NULL;
	struct lyd_meta *type;
	struct xp_list xp = { 0 };

	if (lyd_find_path(rpc, "filter", 0, &f) || !f)
		return NULL;
	type = lyd_find_meta(f->meta, NULL, "ietf-netconf:type");
	if (type && !strcmp(lyd_get_meta_value(type), "xpath")) {
		struct lyd_meta *sel = lyd_find_meta(f->meta, NULL, "ietf-netconf:select");
		if (!sel)
			return reply_err(NC_ERR_MISSING_ATTR, NULL, "xpath filter without select");
		xp_add(&xp, lyd_get_meta_value(sel));
	} else {
		const struct lyd_node_any *any = (const struct lyd_node_any *)f;
		if (any->value_type == LYD_ANYDATA_DATATREE) {
			for (const struct lyd_node *n = any->value.tree; n; n = n->next)
				subtree_to_xpath(nc->ly, n, "", NULL, &xp);
		} else if (any->value.str && !only_space(any->value.str)) {
			xp_free(&xp);
			return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL,
					 "subtree filter in an unsupported form");
		}
	}
	if (xp.bad) {
		xp_free(&xp);
		return reply_err(NC_ERR_INVALID_VALUE, NULL, "unsupported subtree filter");
	}
	for (size_t i = 0; i < xp.n; i++)
		sw_log(3, "netconf: filter xpath: %s", xp.v[i]);
	if (apply_xpaths(data, &xp) < 0) {
		xp_free(&xp);
		return reply_ly_err("filter");
	}
	xp_free(&xp);
	return NULL;
}

static struct nc_server_reply *reply_data(struct lyd_node *rpc, struct lyd_node *data)
{
	struct lyd_node *out = NULL;

	if (lyd_dup_single(rpc, NULL, 0, &out) ||
	    lyd_new_any(out, NULL, "data", data, 1, LYD_ANYDATA_DATATREE, 1, NULL)) {
		lyd_free_all(data);
		lyd_free_all(out);
		return reply_err(NC_ERR_OP_FAILED, NULL, "cannot build the reply");
	}
	return nc_server_reply_data(out, NC_WD_EXPLICIT, NC_PARAMTYPE_FREE);
}

bool target_is_running(struct lyd_node *rpc, const char *container)
{
	struct lyd_node *t = NULL;
	char path[64];

	snprintf(path, sizeof path, "%s/running", container);
	return !lyd_find_path(rpc, path, 0, &t) && t;
}

struct nc_server_reply *rpc_get(struct sw_netconf *nc, struct lyd_node *rpc, bool state)
{
	struct lyd_node *data = NULL;
	struct nc_server_reply *err;

	if (!state && !target_is_running(rpc, "source"))
		return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL,
				 "only the running datastore exists");
	if (build_data(nc, state, false, &data) < 0)
		return reply_err(NC_ERR_OP_FAILED, NULL, "cannot build the data tree");
	if (state) {
		struct lyd_node *mon = NULL;

		if (build_monitoring(nc, &mon) < 0 || lyd_insert_sibling(data, mon, &data)) {
			lyd_free_all(mon);
			lyd_free_all(data);
			return reply_err(NC_ERR_OP_FAILED, NULL, "cannot build netconf-state");
		}
	}
	err = apply_filter(nc, rpc, &data);
	if (err) {
		lyd_free_all(data);
		return err;
	}
	return reply_data(rpc, data);
}

