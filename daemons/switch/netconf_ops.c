/* inca-switch NETCONF server: rpc-errors (with the error-path of the offending data node) and
 * the RPC handlers: edit-config (applied to a copy of running, validated with libyang, decoded
 * into the tree model and checked by its rules, then published), validate, lock / unlock,
 * get-schema, and the dispatcher libnetconf2 calls. Runs in the poll thread. */
#include "netconf_int.h"

/* ---------------------------------------------------------------- errors */

/* An rpc-error reply: tag, message and optional path / app-tag. */
struct nc_server_reply *reply_err(NC_ERR tag, const char *path, const char *fmt, ...)
{
	char msg[1024];
	struct lyd_node *e;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	switch (tag) {
	case NC_ERR_LOCK_DENIED:
		e = nc_err(g_nc->ly, tag, g_nc->lock_sid);
		break;
	case NC_ERR_DATA_EXISTS:
	case NC_ERR_DATA_MISSING:
	case NC_ERR_MALFORMED_MSG:
		e = nc_err(g_nc->ly, tag);
		break;
	default:
		e = nc_err(g_nc->ly, tag, NC_ERR_TYPE_APP);
		break;
	}
	if (!e)
		return NULL;
	nc_err_set_msg(e, msg, "en");
	if (path && path[0])
		nc_err_set_path(e, path);
	sw_log(1, "netconf: refused: %s%s%s", msg, path ? " at " : "", path ? path : "");
	return nc_server_reply_err(e);
}

/* The data XPath in a libyang error location ('Data location "/m:a/b[k='1']", line number 3.',
 * 'Schema location "/m:a/b/c", data location "/m:a/b[k='1']".'); NULL without one. */
static const char *ly_err_xpath(const struct ly_err_item *ei, char *buf, size_t cap)
{
	const char *p, *q;

	if (!ei || !ei->path)
		return NULL;
	if (ei->path[0] == '/')
		return ei->path;
	p = strstr(ei->path, "ata location \""); /* "Data" or ", data" */
	if (!p)
		return NULL;
	p += strlen("ata location \"");
	q = strchr(p, '"');
	if (!q || q == p || (size_t)(q - p) >= cap)
		return NULL;
	memcpy(buf, p, (size_t)(q - p));
	buf[q - p] = 0;
	return buf;
}

/* A missing node has only a schema location ('Schema location "/m:a/b/c".'): the path of the
 * first instance of its parent in tree that lacks it. */
static char *missing_node_xpath(const struct ly_err_item *ei, const struct lyd_node *tree)
{
	const char *p, *q, *leaf;
	char xp[600];
	struct ly_set *set = NULL;
	char *out = NULL;

	if (!tree || !ei || !ei->path || !(p = strstr(ei->path, "Schema location \"")) ||
	    strstr(ei->path, "ata location"))
		return NULL;
	p += strlen("Schema location \"");
	q = strchr(p, '"');
	leaf = q ? memrchr(p, '/', (size_t)(q - p)) : NULL;
	if (!leaf || leaf == p || (size_t)(q - p) + 16 >= sizeof xp)
		return NULL;
	snprintf(xp, sizeof xp, "%.*s[not(%.*s)]", (int)(leaf - p), p, (int)(q - leaf - 1),
		 leaf + 1);
	if (!lyd_find_xpath(tree, xp, &set) && set->count)
		out = lyd_path(set->dnodes[0], LYD_PATH_STD, NULL, 0);
	ly_set_free(set, NULL);
	return out;
}

/* The last libyang error of our context as an rpc-error; tree (may be NULL) is the data it is
 * about. */
static struct nc_server_reply *reply_ly_err_in(const char *what, const struct lyd_node *tree)
{
	const struct ly_err_item *ei = ly_err_last(g_nc->ly);
	struct nc_server_reply *r;
	char pbuf[512];
	char *missing = missing_node_xpath(ei, tree);
	const char *path = missing ? missing : ly_err_xpath(ei, pbuf, sizeof pbuf);

	/* libyang quotes the refused value: never echo (a mistyped) group key */
	if (ei && ((ei->path && strstr(ei->path, "auth-key") && !strstr(ei->path, "auth-key-id")) ||
		   (ei->msg && strstr(ei->msg, "[0-9a-fA-F]{64}"))))
		r = reply_err(NC_ERR_INVALID_VALUE, path, "%s: auth-key: expected %d hex digits",
			      what, 2 * WIRE_AUTH_KEY_LEN);
	else
		r = reply_err(NC_ERR_INVALID_VALUE, path, "%s: %s", what,
			      ei && ei->msg ? ei->msg : "invalid data");
	free(missing);
	ly_err_clean(g_nc->ly, NULL);
	return r;
}

struct nc_server_reply *reply_ly_err(const char *what)
{
	return reply_ly_err_in(what, NULL);
}

/* ---------------------------------------------------------------- edit-config */

enum edit_op { OP_MERGE, OP_REPLACE, OP_CREATE, OP_DELETE, OP_REMOVE, OP_NONE };

static int parse_op(const char *s, enum edit_op *op)
{
	static const char *const names[] = { "merge", "replace", "create", "delete", "remove",
					     "none" };
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(s, names[i])) {
			*op = (enum edit_op)i;
			return 0;
		}
	return -1;
}

struct edit_err {
	NC_ERR tag;
	char msg[512];
	char path[512];
};

static int edit_fail(struct edit_err *e, NC_ERR tag, const struct lyd_node *n, const char *msg)
{
	char *p = n ? lyd_path(n, LYD_PATH_STD, NULL, 0) : NULL;

	e->tag = tag;
	snprintf(e->msg, sizeof e->msg, "%s", msg);
	snprintf(e->path, sizeof e->path, "%s", p ? p : "");
	free(p);
	return -1;
}

/* Insert a copy of edit node en (without children, list keys included) under parent or
 * among the top-level siblings *top. */
static int insert_shell(const struct lyd_node *en, struct lyd_node *parent, struct lyd_node **top,
			struct lyd_node **out)
{
	struct lyd_node *d;

	if (lyd_dup_single(en, NULL, LYD_DUP_NO_META, &d))
		return -1;
	if (parent ? lyd_insert_child(parent, d) : lyd_insert_sibling(*top, d, top)) {
		lyd_free_tree(d);
		return -1;
	}
	*out = d;
	return 0;
}

static void remove_node(struct lyd_node *n, struct lyd_node **top)
{
	if (*top == n)
		*top = n->next;
	lyd_free_tree(n);
}

static int edit_siblings(const struct lyd_node *edits, struct lyd_node *parent,
			 struct lyd_node **top, enum edit_op inherited, struct edit_err *e);

/* Apply one edit node (with its operation) to the target. */
static int edit_node(const struct lyd_node *en, struct lyd_node *parent, struct lyd_node **top,
		     enum edit_op inherited, struct edit_err *e)
{
	struct lyd_meta *m = lyd_find_meta(en->meta, NULL, "ietf-netconf:operation");
	struct lyd_node *siblings = parent ? lyd_child(parent) : *top, *match = NULL, *nn;
	enum edit_op op = inherited;
	bool term_node = en->schema && (en->schema->nodetype & LYD_NODE_TERM);

	if (!en->schema)
		return edit_fail(e, NC_ERR_UNKNOWN_ELEM, en, "unknown element");
	if (m && parse_op(lyd_get_meta_value(m), &op) < 0)
		return edit_fail(e, NC_ERR_BAD_ATTR, en, "bad operation attribute");
	if (lysc_is_key(en->schema)) /* keys identify the entry; they are set with it */
		return 0;
	if (siblings)
		lyd_find_sibling_first(siblings, en, &match);

	switch (op) {
	case OP_CREATE:
		if (match)
			return edit_fail(e, NC_ERR_DATA_EXISTS, en, "data already exists");
		/* fall through */
	case OP_REPLACE:
		if (match)
			remove_node(match, top);
		if (insert_shell(en, parent, top, &nn) < 0)
			return edit_fail(e, NC_ERR_OP_FAILED, en, "cannot insert");
		return term_node ? 0 : edit_siblings(lyd_child(en), nn, top, op, e);
	case OP_DELETE:
		if (!match)
			return edit_fail(e, NC_ERR_DATA_MISSING, en, "data does not exist");
		/* fall through */
	case OP_REMOVE:
		if (match)
			remove_node(match, top);
		return 0;
	case OP_MERGE:
		if (!match) {
			if (insert_shell(en, parent, top, &nn) < 0)
				return edit_fail(e, NC_ERR_OP_FAILED, en, "cannot insert");
			return term_node ? 0 : edit_siblings(lyd_child(en), nn, top, op, e);
		}
		if (term_node) {
			if (en->schema->nodetype == LYS_LEAF) {
				LY_ERR lr = lyd_change_term(match, lyd_get_value(en));
				if (lr != LY_SUCCESS && lr != LY_EEXIST && lr != LY_ENOT)
					return edit_fail(e, NC_ERR_INVALID_VALUE, en, "bad value");
			}
			return 0;
		}
		return edit_siblings(lyd_child(en), match, top, op, e);
	case OP_NONE:
		if (term_node)
			return 0;
		if (!match) {
			/* Create the ancestors the nested operations need; drop them again if
			 * nothing was put under them. */
			int rc;
			if (insert_shell(en, parent, top, &nn) < 0)
				return edit_fail(e, NC_ERR_OP_FAILED, en, "cannot insert");
			rc = edit_siblings(lyd_child(en), nn, top, op, e);
			if (!rc) {
				bool empty = true;
				for (struct lyd_node *c = lyd_child(nn); c; c = c->next)
					if (!c->schema || !lysc_is_key(c->schema))
						empty = false;
				if (empty && !(nn->schema->flags & LYS_PRESENCE))
					remove_node(nn, top);
			}
			return rc;
		}
		return edit_siblings(lyd_child(en), match, top, op, e);
	}
	return edit_fail(e, NC_ERR_OP_FAILED, en, "internal error");
}

static int edit_siblings(const struct lyd_node *edits, struct lyd_node *parent,
			 struct lyd_node **top, enum edit_op inherited, struct edit_err *e)
{
	for (const struct lyd_node *en = edits; en; en = en->next)
		if (edit_node(en, parent, top, inherited, e) < 0)
			return -1;
	return 0;
}

/* The trees of a checked candidate (owned). */
struct cand_trees {
	struct ctl_tree *v;
	size_t n;
};

static void cand_trees_free(struct cand_trees *c)
{
	for (size_t i = 0; i < c->n; i++)
		ctl_tree_free(&c->v[i]);
	free(c->v);
	c->v = NULL;
	c->n = 0;
}

/* YANG-validated candidate -> the tree model, with the model's semantic rules (the same as a
 * config file's). NULL, or the rpc-error naming the data node the rule is about. */
static struct nc_server_reply *candidate_trees(const struct lyd_node *cand, struct cand_trees *out)
{
	struct nc_server_reply *r = NULL;
	struct ly_set *set = NULL;
	struct ctl_tree_err e;

	memset(out, 0, sizeof *out);
	if (!cand || lyd_find_xpath(cand, "/inca-switch:inca-switch/trees/tree", &set))
		return NULL;
	out->v = calloc(set->count ? set->count : 1, sizeof *out->v);
	if (!out->v) {
		ly_set_free(set, NULL);
		return reply_err(NC_ERR_OP_FAILED, NULL, "out of memory");
	}
	for (uint32_t i = 0; i < set->count && !r; i++) {
		const struct lyd_node *tn = set->dnodes[i];
		int rc = ctl_tree_from_lyd(tn, &out->v[out->n], &e);

		if (rc == 0) {
			out->n++;
			rc = ctl_tree_finish(&out->v[out->n - 1], sw_config_auth_required(), &e);
		}
		if (rc < 0) {
			char *path = lyd_path(ctl_tree_err_node(tn, &e), LYD_PATH_STD, NULL, 0);

			r = rc == -ENOMEM ? reply_err(NC_ERR_OP_FAILED, NULL, "out of memory") :
					    reply_err(NC_ERR_INVALID_VALUE, path, "%s", e.msg);
			free(path);
		}
	}
	ly_set_free(set, NULL);
	if (r)
		cand_trees_free(out);
	return r;
}

/* Overwrite the text of every auth-key element with '*' (for logging an edit). */
static void redact_auth_keys(char *x)
{
	for (char *p = strstr(x, "auth-key"); p; p = strstr(p, "auth-key")) {
		bool closing = p > x && p[-1] == '/';
		p += 8;
		if (closing || (*p != '>' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r'))
			continue; /* a closing tag, or auth-key-id */
		p = strchr(p, '>');
		if (!p)
			return;
		for (p++; *p && *p != '<'; p++)
			*p = '*';
	}
}

#define NACM_NS "urn:ietf:params:xml:ns:yang:ietf-netconf-acm"

/* ietf-netconf-acm is in the context only for the nacm:default-deny-all extension the modules
 * use; the server keeps no NACM rules (access is the SSH authorized_keys list). An edit of them
 * is refused, never answered <ok/> and dropped. */
static struct nc_server_reply *refuse_nacm(const struct lyd_node *cfgnode)
{
	const struct lyd_node_any *any = (const struct lyd_node_any *)cfgnode;

	if (any->value_type != LYD_ANYDATA_DATATREE)
		return NULL;
	for (const struct lyd_node *n = any->value.tree; n; n = n->next) {
		const char *ns = n->schema ? n->schema->module->ns :
					     ((const struct lyd_node_opaq *)n)->name.module_ns;

		if (ns && !strcmp(ns, NACM_NS))
			return reply_err(NC_ERR_OP_NOT_SUPPORTED, "/ietf-netconf-acm:nacm",
					 "NACM (ietf-netconf-acm) is not implemented: access is "
					 "granted by the SSH authorized_keys list");
	}
	return NULL;
}

/* Every check a candidate passes before it may run: YANG validation (types, ranges, mandatory
 * nodes, must rules), the tree model's semantic rules (ctl_tree_finish, as for a config file),
 * the capacity limits. NULL when it passes (trees: its trees, owned by the caller also on
 * failure; mgmt: its management addresses), else the rpc-error. The edit and <validate> run
 * the same. */
static struct nc_server_reply *check_candidate(struct sw_netconf *nc, struct lyd_node **cand,
					       struct cand_trees *trees,
					       char mgmt[SW_MGMT_MAX][128], size_t *nmgmt)
{
	struct nc_server_reply *r = NULL;
	char err[SW_CONF_ERR_MAX];
	struct ly_set *ms = NULL;

	*nmgmt = 0;
	memset(trees, 0, sizeof *trees);
	if (lyd_validate_all(cand, nc->ly, LYD_VALIDATE_NO_STATE | LYD_VALIDATE_PRESENT, NULL))
		return reply_ly_err_in("validation", *cand);
	if ((r = candidate_trees(*cand, trees)))
		return r;
	if (sw_config_check_limits(nc->cfg, trees->v, trees->n, err, sizeof err) < 0)
		return reply_err(NC_ERR_RES_DENIED, "/inca-switch:inca-switch/trees", "%s", err);
	if (*cand && !lyd_find_xpath(*cand, "/inca-switch:inca-switch/management/address", &ms)) {
		for (uint32_t i = 0; i < ms->count && *nmgmt < SW_MGMT_MAX; i++)
			snprintf(mgmt[(*nmgmt)++], sizeof mgmt[0], "%s",
				 lyd_get_value(ms->dnodes[i]));
		if (ms->count > SW_MGMT_MAX)
			r = reply_err(NC_ERR_RES_DENIED, "/inca-switch:inca-switch/management",
				      "at most %d management addresses", SW_MGMT_MAX);
		ly_set_free(ms, NULL);
	}
	return r;
}

/* Parse the <config> anyxml of an edit-config or validate as inca-switch data (nc:operation
 * attributes kept as metadata). NULL or the rpc-error. */
static struct nc_server_reply *parse_config(struct sw_netconf *nc, struct lyd_node *cfgnode,
					    const char *what, struct lyd_node **out)
{
	struct nc_server_reply *r;
	char *xml = NULL;

	*out = NULL;
	if ((r = refuse_nacm(cfgnode)))
		return r;
	if (lyd_any_value_str(cfgnode, &xml) || !xml)
		return reply_err(NC_ERR_OP_FAILED, NULL, "cannot read <config>");
	if (sw_verbosity >= 3) {
		char *shown = strdup(xml);
		if (shown)
			redact_auth_keys(shown);
		sw_log(3, "netconf: %s content (keys hidden): %s", what, shown ? shown : "");
		free(shown);
	}
	if (strlen(xml) > EDIT_TEXT_MAX) {
		free(xml);
		return reply_err(NC_ERR_TOO_BIG, NULL, "config too large");
	}
	if (lyd_parse_data_mem(nc->ly, xml, LYD_XML,
			       LYD_PARSE_ONLY | LYD_PARSE_STRICT | LYD_PARSE_NO_STATE, 0, out)) {
		free(xml);
		*out = NULL;
		return reply_ly_err(what);
	}
	free(xml);
	return NULL;
}

static struct nc_server_reply *rpc_edit_config(struct sw_netconf *nc, struct lyd_node *rpc,
					       struct nc_session *session)
{
	struct lyd_node *n = NULL, *cfgnode = NULL, *edit = NULL, *cand = NULL;
	enum edit_op defop = OP_MERGE;
	bool test_only = false;
	struct edit_err ee = { 0 };
	struct cand_trees parsed = { 0 };
	struct nc_server_reply *r = NULL;
	char err[SW_CONF_ERR_MAX];
	size_t nmgmt = 0;
	char mgmt[SW_MGMT_MAX][128];
	int rc;

	if (!target_is_running(rpc, "target"))
		return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL,
				 "only the running datastore exists (no candidate/startup)");
	if (nc->lock_sid && nc->lock_sid != nc_session_get_id(session))
		return reply_err(NC_ERR_LOCK_DENIED, NULL, "running is locked by session %u",
				 nc->lock_sid);
	if (!lyd_find_path(rpc, "default-operation", 0, &n) && n &&
	    parse_op(lyd_get_value(n), &defop) < 0)
		return reply_err(NC_ERR_INVALID_VALUE, NULL, "bad default-operation");
	n = NULL;
	/* test-then-set (the default) and set both validate first: nothing invalid ever runs */
	if (!lyd_find_path(rpc, "test-option", 0, &n) && n)
		test_only = !strcmp(lyd_get_value(n), "test-only");
	if (lyd_find_path(rpc, "config", 0, &cfgnode) || !cfgnode)
		return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL, "only inline <config> is supported");
	if ((r = parse_config(nc, cfgnode, "edit-config", &edit))) {
		nc->edits_refused++;
		return r;
	}

	/* Candidate = running + edit. */
	if (build_data(nc, false, true, &cand) < 0) {
		lyd_free_all(edit);
		return reply_err(NC_ERR_OP_FAILED, NULL, "cannot build the running tree");
	}
	if (edit_siblings(edit, NULL, &cand, defop, &ee) < 0) {
		lyd_free_all(edit);
		lyd_free_all(cand);
		nc->edits_refused++;
		return reply_err(ee.tag, ee.path, "%s", ee.msg);
	}
	lyd_free_all(edit);
	r = check_candidate(nc, &cand, &parsed, mgmt, &nmgmt);
	if (r) {
		nc->edits_refused++;
		goto out;
	}
	if (test_only) {
		r = nc_server_reply_ok();
		goto out;
	}
	rc = sw_switch_set_trees(nc->sw, parsed.v, parsed.n, err, sizeof err);
	if (rc < 0) {
		nc->edits_refused++;
		r = reply_err(rc == -ENOMEM ? NC_ERR_RES_DENIED : NC_ERR_OP_FAILED, NULL, "%s", err);
		goto out;
	}
	memcpy(nc->mgmt, mgmt, sizeof mgmt);
	nc->nmgmt = nmgmt;
	nc->edits_applied++;
	sw_log(1, "netconf: edit-config applied by session %u: %zu tree(s) now",
	       nc_session_get_id(session), parsed.n);
	r = nc_server_reply_ok();
out:
	cand_trees_free(&parsed);
	lyd_free_all(cand);
	return r;
}

/* <validate> (:validate:1.1): running is valid by construction; an inline <config> is checked
 * as a complete configuration, exactly like the candidate of an edit. */
static struct nc_server_reply *rpc_validate(struct sw_netconf *nc, struct lyd_node *rpc)
{
	struct lyd_node *cfgnode = NULL, *cand = NULL;
	struct nc_server_reply *r;
	struct cand_trees parsed;
	char mgmt[SW_MGMT_MAX][128];
	size_t nmgmt;

	if (target_is_running(rpc, "source"))
		return nc_server_reply_ok();
	if (lyd_find_path(rpc, "source/config", 0, &cfgnode) || !cfgnode)
		return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL,
				 "only running and an inline <config> can be validated");
	if ((r = parse_config(nc, cfgnode, "validate", &cand)))
		return r;
	r = check_candidate(nc, &cand, &parsed, mgmt, &nmgmt);
	cand_trees_free(&parsed);
	lyd_free_all(cand);
	return r ? r : nc_server_reply_ok();
}

/* ---------------------------------------------------------------- other RPCs */

static struct nc_server_reply *rpc_lock(struct sw_netconf *nc, struct lyd_node *rpc,
					struct nc_session *s, bool lock)
{
	uint32_t sid = nc_session_get_id(s);

	if (!target_is_running(rpc, "target"))
		return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL, "only running can be locked");
	if (lock) {
		if (nc->lock_sid)
			return reply_err(NC_ERR_LOCK_DENIED, NULL, "running is locked by session %u",
					 nc->lock_sid);
		nc->lock_sid = sid;
		nc->lock_time = time(NULL);
	} else {
		if (nc->lock_sid != sid)
			return reply_err(NC_ERR_OP_FAILED, NULL, "running is not locked by you");
		nc->lock_sid = 0;
	}
	return nc_server_reply_ok();
}

/* Our own get-schema (the built-in one of libnetconf2 2.0.24 double-frees with libyang 2.1). */
struct nc_server_reply *rpc_get_schema(struct lyd_node *rpc, struct nc_session *s)
{
	struct lyd_node *n = NULL, *out = NULL;
	const char *id, *ver = NULL, *fmt = NULL;
	const struct lys_module *mod;
	char *text = NULL;
	LY_ERR lrc;

	(void)s;
	if (lyd_find_path(rpc, "identifier", 0, &n) || !n)
		return reply_err(NC_ERR_MISSING_ELEM, NULL, "identifier missing");
	id = lyd_get_value(n);
	if (!lyd_find_path(rpc, "version", 0, &n) && n && lyd_get_value(n)[0])
		ver = lyd_get_value(n);
	if (!lyd_find_path(rpc, "format", 0, &n) && n)
		fmt = lyd_get_value(n);
	if (fmt && strcmp(fmt, "ietf-netconf-monitoring:yang") && strcmp(fmt, "yang"))
		return reply_err(NC_ERR_INVALID_VALUE, NULL, "only the yang format is served");
	mod = ver ? ly_ctx_get_module(g_nc->ly, id, ver) : ly_ctx_get_module_implemented(g_nc->ly, id);
	if (!mod && !ver)
		mod = ly_ctx_get_module_latest(g_nc->ly, id);
	if (!mod)
		return reply_err(NC_ERR_INVALID_VALUE, NULL, "schema %s not found", id);
	/* Serve the original text when we have it, else libyang's rendering. */
	{
		const struct ctl_yang_module *m = ctl_yang_find(mod->name, mod->revision);
		if (m)
			text = strdup(m->text);
		else if (lys_print_mem(&text, mod, LYS_OUT_YANG, 0))
			text = NULL;
	}
	if (!text)
		return reply_err(NC_ERR_OP_FAILED, NULL, "cannot print schema %s", id);
	if (lyd_dup_single(rpc, NULL, 0, &out)) {
		free(text);
		return reply_err(NC_ERR_OP_FAILED, NULL, "out of memory");
	}
	/* use_value = 0: libyang copies the string, we keep ownership of ours. */
	lrc = lyd_new_any(out, NULL, "data", text, 0, LYD_ANYDATA_STRING, 1, NULL);
	free(text);
	if (lrc) {
		lyd_free_all(out);
		return reply_err(NC_ERR_OP_FAILED, NULL, "cannot build the reply");
	}
	return nc_server_reply_data(out, NC_WD_EXPLICIT, NC_PARAMTYPE_FREE);
}

struct nc_server_reply *rpc_dispatch(struct lyd_node *rpc, struct nc_session *s)
{
	const char *name = rpc->schema ? rpc->schema->name : "?";
	struct sw_netconf *nc = g_nc;

	sw_log(2, "netconf: session %u: <%s>", nc_session_get_id(s), name);
	if (!strcmp(name, "get"))
		return rpc_get(nc, rpc, true);
	if (!strcmp(name, "get-config"))
		return rpc_get(nc, rpc, false);
	if (!strcmp(name, "edit-config"))
		return rpc_edit_config(nc, rpc, s);
	if (!strcmp(name, "lock"))
		return rpc_lock(nc, rpc, s, true);
	if (!strcmp(name, "unlock"))
		return rpc_lock(nc, rpc, s, false);
	if (!strcmp(name, "get-schema"))
		return rpc_get_schema(rpc, s);
	if (!strcmp(name, "validate"))
		return rpc_validate(nc, rpc);
	return reply_err(NC_ERR_OP_NOT_SUPPORTED, NULL, "operation <%s> is not supported", name);
}

