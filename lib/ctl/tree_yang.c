/* lib/ctl: the YANG codec of the tree model, both ways with libyang: struct ctl_tree -> a
 * tree list entry of inca-switch (for the AM's edit-config and the switch's replies and
 * candidates) and back (the switch's edits, the AM's get-config). The semantic rules are not
 * here: ctl_tree_finish (model.c) applies them to whatever filled the model. */
#include "ctl_yang.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libyang/libyang.h>

#include "util/util.h"
#include "wire/auth.h"

#define SW_PORT_DEFAULT 4791

/* ---------------------------------------------------------------- model -> YANG */

int ctl_yang_term(struct lyd_node *parent, const char *name, const char *fmt, ...)
{
	char v[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v, sizeof v, fmt, ap);
	va_end(ap);
	return lyd_new_term(parent, NULL, name, v, 0, NULL) ? -1 : 0;
}

int ctl_yang_add_mask(struct lyd_node *parent, const char *name, uint32_t m,
		      const char *(*nm)(unsigned), unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if ((m & (1u << i)) && ctl_yang_term(parent, name, "%s", nm(i)) < 0)
			return -1;
	return 0;
}

int ctl_tree_to_lyd(const struct ctl_tree *t, struct lyd_node *trees, unsigned flags,
		    struct lyd_node **out)
{
	struct lyd_node *tn, *n;
	char id[8], a[32];
	int rc = 0;

	if (out)
		*out = NULL;
	snprintf(id, sizeof id, "%u", t->id);
	if (lyd_new_list(trees, NULL, "tree", 0, &tn, id))
		return -EINVAL;
	rc |= ctl_yang_term(tn, "key", "%u", t->key);
	if (t->qpn)
		rc |= ctl_yang_term(tn, "qpn", "%u", t->qpn);
	rc |= ctl_yang_term(tn, "slots", "%u", t->slots);
	rc |= ctl_yang_term(tn, "slot-bytes", "%u", t->slot_bytes);
	rc |= ctl_yang_term(tn, "bsl", "%u", t->bsl_bits);
	rc |= ctl_yang_term(tn, "si", "%u", t->si);
	rc |= ctl_yang_term(tn, "role", "%s", t->root ? "root" : "leaf");
	rc |= ctl_yang_term(tn, "bfr-id", "%u", t->bfr_id);
	if (t->has_parent) {
		if (lyd_new_inner(tn, NULL, "parent", 0, &n))
			return -EINVAL;
		rc |= ctl_yang_term(n, "address", "%s", util_format_addr(&t->parent, a, sizeof a));
		if (t->parent_qpn)
			rc |= ctl_yang_term(n, "qpn", "%u", t->parent_qpn);
	}
	rc |= ctl_yang_term(tn, "deterministic", "%s", t->deterministic ? "true" : "false");
	rc |= ctl_yang_term(tn, "check-sender", "%s", t->check_sender ? "true" : "false");
	if (t->auth || (flags & CTL_YANG_AUTH_OFF))
		rc |= ctl_yang_term(tn, "auth", "%s", t->auth ? "enabled" : "disabled");
	if (t->auth) {
		static const char d[] = "0123456789abcdef";
		char k[2 * WIRE_AUTH_KEY_LEN + 1];

		rc |= ctl_yang_term(tn, "auth-key-id", "%u", t->auth_key_id);
		if (flags & CTL_YANG_SECRETS) {
			for (size_t i = 0; i < WIRE_AUTH_KEY_LEN; i++) {
				k[2 * i] = d[t->auth_key[i] >> 4];
				k[2 * i + 1] = d[t->auth_key[i] & 15];
			}
			k[2 * WIRE_AUTH_KEY_LEN] = 0;
			rc |= ctl_yang_term(tn, "auth-key", "%s", k);
			explicit_bzero(k, sizeof k);
		}
	}
	rc |= ctl_yang_add_mask(tn, "data-type", t->dtype_mask, wire_dtype_name, WIRE_DTYPE_COUNT);
	rc |= ctl_yang_add_mask(tn, "operation", t->op_mask, wire_op_name, WIRE_OP_COUNT);
	for (size_t i = 0; i < t->nmembers && !rc; i++) {
		char k[8];

		snprintf(k, sizeof k, "%u", t->members[i].bfr_id);
		if (lyd_new_list(tn, NULL, "member", 0, &n, k))
			return -EINVAL;
		rc |= ctl_yang_term(n, "address", "%s",
				    util_format_addr(&t->members[i].addr, a, sizeof a));
		if (t->members[i].qpn)
			rc |= ctl_yang_term(n, "qpn", "%u", t->members[i].qpn);
	}
	for (size_t i = 0; i < t->nchildren && !rc; i++) {
		const struct ctl_child *c = &t->children[i];

		if (lyd_new_list(tn, NULL, "child", 0, &n, util_format_addr(&c->addr, a, sizeof a)))
			return -EINVAL;
		if (c->qpn)
			rc |= ctl_yang_term(n, "qpn", "%u", c->qpn);
		for (size_t j = 0; j < c->nbfr; j++)
			rc |= ctl_yang_term(n, "bfr-id", "%u", c->bfr_ids[j]);
	}
	if (rc)
		return -EINVAL;
	if (out)
		*out = tn;
	return 0;
}

/* ---------------------------------------------------------------- YANG -> model */

static const char *name_of(const struct lyd_node *n)
{
	return n->schema ? n->schema->name : "";
}

static const char *value_of(const struct lyd_node *n)
{
	const char *v = n ? lyd_get_value(n) : NULL;

	return v ? v : "";
}

static const struct lyd_node *child_named(const struct lyd_node *n, const char *name)
{
	for (const struct lyd_node *c = lyd_child(n); c; c = c->next)
		if (c->schema && !strcmp(c->schema->name, name))
			return c;
	return NULL;
}

/* Values come validated by libyang (types and ranges of the schema), so numbers parse. */
static uint64_t u64(const struct lyd_node *n)
{
	return strtoull(value_of(n), NULL, 10);
}

/* An endpoint the schema's pattern let through can still be out of range (port 99999). */
static int addr_of(const struct lyd_node *n, const char *what, struct sockaddr_in *out,
		   struct ctl_tree_err *e, enum ctl_tree_at at, size_t index)
{
	if (util_parse_addr(value_of(n), SW_PORT_DEFAULT, out) < 0)
		return ctl_tree_fail(e, at, index,
				     "bad address '%s' for '%s' (expected a.b.c.d[:port])",
				     value_of(n), what);
	return 0;
}

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static int member_from(const struct lyd_node *c, struct ctl_tree *t, struct ctl_tree_err *e)
{
	struct ctl_member *nm = realloc(t->members, (t->nmembers + 1) * sizeof *nm), *m;
	const struct lyd_node *q;

	if (!nm)
		return -ENOMEM;
	t->members = nm;
	m = &t->members[t->nmembers];
	memset(m, 0, sizeof *m);
	m->bfr_id = (uint16_t)u64(child_named(c, "bfr-id"));
	if (addr_of(child_named(c, "address"), "member", &m->addr, e, CTL_AT_MEMBER,
		    t->nmembers) < 0)
		return -EINVAL;
	q = child_named(c, "qpn");
	m->qpn = q ? (uint32_t)u64(q) : wire_qpn_default(WIRE_QPN_MEMBER, m->bfr_id);
	t->nmembers++;
	return 0;
}

static int child_from(const struct lyd_node *c, struct ctl_tree *t, struct ctl_tree_err *e)
{
	struct ctl_child *nc = realloc(t->children, (t->nchildren + 1) * sizeof *nc), *ch;
	const struct lyd_node *q;

	if (!nc)
		return -ENOMEM;
	t->children = nc;
	ch = &t->children[t->nchildren];
	memset(ch, 0, sizeof *ch);
	if (addr_of(child_named(c, "address"), "child", &ch->addr, e, CTL_AT_CHILD,
		    t->nchildren) < 0)
		return -EINVAL;
	q = child_named(c, "qpn");
	ch->qpn = q ? (uint32_t)u64(q) : wire_qpn_default(WIRE_QPN_SWITCH, t->id);
	t->nchildren++; /* owns bfr_ids from here on */
	for (const struct lyd_node *b = lyd_child(c); b; b = b->next) {
		uint16_t *nb;

		if (strcmp(name_of(b), "bfr-id"))
			continue;
		nb = realloc(ch->bfr_ids, (ch->nbfr + 1) * sizeof *nb);
		if (!nb)
			return -ENOMEM;
		ch->bfr_ids = nb;
		ch->bfr_ids[ch->nbfr++] = (uint16_t)u64(b);
	}
	qsort(ch->bfr_ids, ch->nbfr, sizeof *ch->bfr_ids, cmp_u16);
	for (size_t i = 1; i < ch->nbfr; i++)
		if (ch->bfr_ids[i] == ch->bfr_ids[i - 1])
			return ctl_tree_fail(e, CTL_AT_CHILD, t->nchildren - 1,
					     "BFR-id %u listed twice", ch->bfr_ids[i]);
	return 0;
}

static int leaf_from(const struct lyd_node *c, struct ctl_tree *t, struct ctl_tree_err *e)
{
	const char *n = name_of(c), *v = value_of(c);
	enum ctl_tree_field f;

	if (!strcmp(n, "key")) {
		f = CTL_TF_KEY;
		t->key = (uint32_t)u64(c);
	} else if (!strcmp(n, "qpn")) {
		f = CTL_TF_QPN;
		t->qpn = (uint32_t)u64(c);
	} else if (!strcmp(n, "slots")) {
		f = CTL_TF_SLOTS;
		t->slots = (uint16_t)u64(c);
	} else if (!strcmp(n, "slot-bytes")) {
		f = CTL_TF_SLOT_BYTES;
		t->slot_bytes = (uint32_t)u64(c);
	} else if (!strcmp(n, "bsl")) {
		f = CTL_TF_BSL;
		t->bsl_bits = (unsigned)u64(c);
	} else if (!strcmp(n, "si")) {
		f = CTL_TF_SI;
		t->si = (uint8_t)u64(c);
	} else if (!strcmp(n, "role")) {
		f = CTL_TF_ROLE;
		t->root = strcmp(v, "leaf") != 0;
	} else if (!strcmp(n, "bfr-id")) {
		f = CTL_TF_BFR_ID;
		t->bfr_id = (uint16_t)u64(c);
	} else if (!strcmp(n, "deterministic")) {
		f = CTL_TF_DETERMINISTIC;
		t->deterministic = !strcmp(v, "true");
	} else if (!strcmp(n, "check-sender")) {
		f = CTL_TF_CHECK_SENDER;
		t->check_sender = !strcmp(v, "true");
	} else if (!strcmp(n, "auth")) {
		f = CTL_TF_AUTH;
		t->auth = !strcmp(v, "enabled");
	} else if (!strcmp(n, "auth-key-id")) {
		f = CTL_TF_AUTH_KEY_ID;
		t->auth_key_id = (uint32_t)u64(c);
	} else if (!strcmp(n, "auth-key")) {
		f = CTL_TF_AUTH_KEY;
		if (wire_auth_key_parse(v, t->auth_key) < 0)
			return ctl_tree_fail(e, CTL_AT_TREE, 0,
					     "tree %u: auth_key: expected %d hex digits", t->id,
					     2 * WIRE_AUTH_KEY_LEN);
	} else if (!strcmp(n, "data-type")) {
		int code = wire_dtype_parse(v);
		f = CTL_TF_DTYPES;
		if (code >= 0)
			t->dtype_mask |= 1u << code;
	} else if (!strcmp(n, "operation")) {
		int code = wire_op_parse(v);
		f = CTL_TF_OPS;
		if (code >= 0)
			t->op_mask |= 1u << code;
	} else {
		return 0; /* id (set already), state */
	}
	t->given |= CTL_TF_BIT(f);
	return 0;
}

int ctl_tree_from_lyd(const struct lyd_node *tn, struct ctl_tree *t, struct ctl_tree_err *e)
{
	int rc = 0;

	ctl_tree_init(t, (uint16_t)u64(child_named(tn, "id")));
	for (const struct lyd_node *c = lyd_child(tn); c && !rc; c = c->next) {
		const char *n = name_of(c);

		if (!strcmp(n, "member")) {
			rc = member_from(c, t, e);
		} else if (!strcmp(n, "child")) {
			rc = child_from(c, t, e);
		} else if (!strcmp(n, "parent")) {
			const struct lyd_node *q = child_named(c, "qpn");

			rc = addr_of(child_named(c, "address"), "parent", &t->parent, e,
				     CTL_AT_PARENT, 0);
			t->parent_qpn = q ? (uint32_t)u64(q) :
					    wire_qpn_default(WIRE_QPN_SWITCH, t->id);
			t->has_parent = true;
			t->given |= CTL_TF_BIT(CTL_TF_PARENT);
		} else {
			rc = leaf_from(c, t, e);
		}
	}
	if (rc == -ENOMEM)
		ctl_tree_fail(e, CTL_AT_TREE, 0, "out of memory");
	if (rc < 0)
		ctl_tree_free(t);
	return rc;
}

const struct lyd_node *ctl_tree_err_node(const struct lyd_node *tn, const struct ctl_tree_err *e)
{
	const char *want = e->at == CTL_AT_MEMBER ? "member" :
			   e->at == CTL_AT_CHILD  ? "child" :
			   e->at == CTL_AT_PARENT ? "parent" : NULL;
	size_t i = 0;

	if (!want)
		return tn;
	for (const struct lyd_node *c = lyd_child(tn); c; c = c->next)
		if (!strcmp(name_of(c), want) && i++ == e->index)
			return c;
	return tn;
}
