/* inca-switch configuration: the keys of a tree block (file or --tree spec) mapped onto the
 * tree model (struct ctl_tree), and the block's closing checks, which are the model's
 * (ctl_tree_finish) reported at the offending line. */
#include "config_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "wire/auth.h"

/* ------------------------------------------------------------------ tree keys */

/* Config-file names of the model's fields (enum ctl_tree_field order). */
static const char *const tree_key_names[CTL_TF_COUNT_] = {
	"key", "qpn", "slots", "slot_bytes", "bsl", "si", "role", "bfr_id", "parent",
	"deterministic", "check_sender", "dtypes", "ops", "auth", "auth_key", "auth_key_id",
	"pkey", "member", "child",
};

/* "fp32,int32" (also '+' or blanks between names) -> bit mask over names[]. */
static int parse_name_mask(struct pctx *p, const char *key, const char *v,
			   int (*parse)(const char *), uint32_t *out)
{
	char buf[LINE_MAX_BYTES];
	char *save = NULL;
	uint32_t m = 0;

	if (strlen(v) >= sizeof buf)
		return swc_fail(p, p->line, "value of '%s' too long", key);
	strcpy(buf, v);
	for (char *it = strtok_r(buf, ",+ \t", &save); it; it = strtok_r(NULL, ",+ \t", &save)) {
		int i = parse(it);
		if (i < 0)
			return swc_fail(p, p->line, "unknown name '%s' in '%s'", it, key);
		m |= 1u << i;
	}
	if (!m)
		return swc_fail(p, p->line, "empty list for '%s'", key);
	*out = m;
	return 0;
}

static int parse_member(struct pctx *p, struct ctl_tree *t, char *v)
{
	char *tok[8];
	size_t n = swc_tokenize(v, tok, 8);
	struct ctl_member m = { .line = p->line };
	uint64_t x;
	bool has_qpn = false;
	struct ctl_member *nm;

	if (n < 2 || n > 4)
		return swc_fail(p, p->line, "bad member (expected '<bfr-id> <addr>[:port] [qpn N]')");
	if (swc_num(p, "member BFR-id", tok[0], 1, 65535, &x) < 0)
		return -EINVAL;
	m.bfr_id = (uint16_t)x;
	if (swc_addr(p, "member", tok[1], &m.addr) < 0)
		return -EINVAL;
	for (size_t i = 2; i < n; i += 2) {
		if (strcmp(tok[i], "qpn") || i + 1 >= n)
			return swc_fail(p, p->line, "bad member option '%s' (expected 'qpn N')", tok[i]);
		if (swc_num(p, "member qpn", tok[i + 1], 1, WIRE_QPN_MAX, &x) < 0)
			return -EINVAL;
		m.qpn = (uint32_t)x;
		has_qpn = true;
	}
	if (!has_qpn)
		m.qpn = wire_qpn_default(WIRE_QPN_MEMBER, m.bfr_id);
	nm = realloc(t->members, (t->nmembers + 1) * sizeof *nm);
	if (!nm)
		return swc_fail(p, p->line, "out of memory");
	t->members = nm;
	t->members[t->nmembers++] = m;
	return 0;
}

static int parse_child(struct pctx *p, struct ctl_tree *t, char *v)
{
	char *tok[8];
	size_t n = swc_tokenize(v, tok, 8);
	struct ctl_child ch = { .line = p->line,
				    .qpn = wire_qpn_default(WIRE_QPN_SWITCH, t->id) };
	struct ctl_child *nc;
	uint64_t x;

	if (n < 3 || n > 5 || n % 2 == 0)
		return swc_fail(p, p->line,
			    "bad child (expected '<addr>[:port] [qpn N] bfr <list>', e.g. bfr 3-4,7)");
	if (swc_addr(p, "child", tok[0], &ch.addr) < 0)
		return -EINVAL;
	for (size_t i = 1; i + 1 < n; i += 2) {
		if (!strcmp(tok[i], "qpn")) {
			if (swc_num(p, "child qpn", tok[i + 1], 1, WIRE_QPN_MAX, &x) < 0)
				goto err;
			ch.qpn = (uint32_t)x;
		} else if (!strcmp(tok[i], "bfr") && !ch.bfr_ids) {
			if (swc_parse_bfr_list(p, tok[i + 1], &ch.bfr_ids, &ch.nbfr) < 0)
				return -EINVAL;
		} else {
			swc_fail(p, p->line, "bad child option '%s' (expected 'qpn N' or 'bfr LIST')",
			     tok[i]);
			goto err;
		}
	}
	if (!ch.bfr_ids)
		return swc_fail(p, p->line, "child without 'bfr LIST'");
	nc = realloc(t->children, (t->nchildren + 1) * sizeof *nc);
	if (!nc) {
		swc_fail(p, p->line, "out of memory");
		goto err;
	}
	t->children = nc;
	t->children[t->nchildren++] = ch;
	return 0;
err:
	free(ch.bfr_ids);
	return -EINVAL;
}

static int parse_parent(struct pctx *p, struct ctl_tree *t, char *v)
{
	char *tok[4];
	size_t n = swc_tokenize(v, tok, 4);
	uint64_t x;

	if (n != 1 && n != 3)
		return swc_fail(p, p->line, "bad parent (expected '<addr>[:port] [qpn N]')");
	if (swc_addr(p, "parent", tok[0], &t->parent) < 0)
		return -EINVAL;
	t->parent_qpn = wire_qpn_default(WIRE_QPN_SWITCH, t->id);
	if (n == 3) {
		if (strcmp(tok[1], "qpn"))
			return swc_fail(p, p->line, "bad parent option '%s' (expected 'qpn N')", tok[1]);
		if (swc_num(p, "parent qpn", tok[2], 1, WIRE_QPN_MAX, &x) < 0)
			return -EINVAL;
		t->parent_qpn = (uint32_t)x;
	}
	t->has_parent = true;
	return 0;
}

/* auth_key: exactly 2 * WIRE_AUTH_KEY_LEN hex digits (an optional 0x prefix). */
static int parse_auth_key(struct pctx *p, struct ctl_tree *t, const char *v)
{
	size_t n;

	if (v[0] == '0' && (v[1] == 'x' || v[1] == 'X'))
		v += 2;
	n = strlen(v);
	if (n != 2 * WIRE_AUTH_KEY_LEN)
		return swc_fail(p, p->line,
			    "tree %u: auth_key has %zu hex digits, expected %d (%d bytes)", t->id,
			    n, 2 * WIRE_AUTH_KEY_LEN, WIRE_AUTH_KEY_LEN);
	if (wire_auth_key_parse(v, t->auth_key) < 0) {
		n = strspn(v, "0123456789abcdefABCDEF"); /* the first digit that is not hex */
		return swc_fail(p, p->line, "tree %u: auth_key: '%c' at digit %zu is not hex",
				t->id, v[n], n + 1);
	}
	return 0;
}

int swc_tree_set(struct pctx *p, struct ctl_tree *t, const char *key, char *v)
{
	int k;
	uint64_t x;

	for (k = 0; k < CTL_TF_COUNT_; k++)
		if (!strcmp(key, tree_key_names[k]))
			break;
	if (k == CTL_TF_COUNT_)
		return swc_fail(p, p->line, "unknown tree key '%s'", key);
	if (k < CTL_TF_MEMBER) {
		if (t->given & (1u << k))
			return swc_fail(p, p->line, "duplicate key '%s' in tree %u", key, t->id);
		t->given |= 1u << k;
	}
	switch ((enum ctl_tree_field)k) {
	case CTL_TF_KEY:
		if (swc_num(p, key, v, 0, UINT32_MAX, &x) < 0)
			return -EINVAL;
		t->key = (uint32_t)x;
		return 0;
	case CTL_TF_QPN:
		if (swc_num(p, key, v, 1, WIRE_QPN_MAX, &x) < 0)
			return -EINVAL;
		t->qpn = (uint32_t)x;
		return 0;
	case CTL_TF_SLOTS:
		if (swc_num(p, key, v, 1, 65535, &x) < 0)
			return -EINVAL;
		t->slots = (uint16_t)x;
		return 0;
	case CTL_TF_SLOT_BYTES:
		if (swc_num(p, key, v, 1, 4096, &x) < 0)
			return -EINVAL;
		t->slot_bytes = (uint32_t)x;
		return 0;
	case CTL_TF_BSL:
		if (swc_num(p, key, v, 64, 4096, &x) < 0)
			return -EINVAL;
		if (x & (x - 1))
			return swc_fail(p, p->line, "bsl %s is not a power of two (64..4096 bits)", v);
		t->bsl_bits = (unsigned)x;
		return 0;
	case CTL_TF_SI:
		if (swc_num(p, key, v, 0, 255, &x) < 0)
			return -EINVAL;
		t->si = (uint8_t)x;
		return 0;
	case CTL_TF_ROLE:
		if (!strcmp(v, "root"))
			t->root = true;
		else if (!strcmp(v, "leaf"))
			t->root = false;
		else
			return swc_fail(p, p->line, "bad role '%s' (expected root or leaf)", v);
		return 0;
	case CTL_TF_BFR_ID:
		if (swc_num(p, key, v, 0, 65535, &x) < 0)
			return -EINVAL;
		t->bfr_id = (uint16_t)x;
		return 0;
	case CTL_TF_PARENT:
		return parse_parent(p, t, v);
	case CTL_TF_DETERMINISTIC:
	case CTL_TF_CHECK_SENDER:
		if (swc_parse_bool(v, k == CTL_TF_DETERMINISTIC ? &t->deterministic : &t->check_sender) < 0)
			return swc_fail(p, p->line, "bad value '%s' for '%s' (expected yes or no)", v,
				    key);
		return 0;
	case CTL_TF_PKEY:
		/* 0x0000 and 0x8000 are not valid P_Keys (IBTA) */
		if (swc_num(p, key, v, 1, 0xFFFF, &x) < 0)
			return -EINVAL;
		if (x == 0x8000)
			return swc_fail(p, p->line, "pkey 0x8000 is not a valid P_Key");
		t->pkey = (uint16_t)x;
		return 0;
	case CTL_TF_DTYPES:
		return parse_name_mask(p, key, v, wire_dtype_parse, &t->dtype_mask);
	case CTL_TF_OPS:
		return parse_name_mask(p, key, v, wire_op_parse, &t->op_mask);
	case CTL_TF_AUTH:
		/* on: the tree must have a key; off: explicit opt-out (no key allowed) */
		if (!strcmp(v, "on") || !strcmp(v, "off")) {
			t->auth = v[1] == 'n';
			return 0;
		}
		return swc_fail(p, p->line, "bad value '%s' for 'auth' (expected on or off)", v);
	case CTL_TF_AUTH_KEY:
		return parse_auth_key(p, t, v);
	case CTL_TF_AUTH_KEY_ID:
		if (swc_num(p, key, v, 1, UINT32_MAX, &x) < 0)
			return -EINVAL;
		t->auth_key_id = (uint32_t)x;
		return 0;
	case CTL_TF_MEMBER:
		return parse_member(p, t, v);
	case CTL_TF_CHILD:
		return parse_child(p, t, v);
	case CTL_TF_COUNT_:
		break;
	}
	return -EINVAL;
}

int swc_new_tree(struct pctx *p, uint64_t id, struct ctl_tree **out)
{
	struct sw_config *c = p->c;
	struct ctl_tree *nt;
	const struct ctl_tree *old = sw_config_find_tree(c, (uint16_t)id);

	if (old) {
		if (old->line > 0)
			return swc_fail(p, p->line, "duplicate tree %u (first defined at line %d)",
				    (unsigned)id, old->line);
		return swc_fail(p, p->line, "duplicate tree %u", (unsigned)id);
	}
	nt = realloc(c->trees, (c->ntrees + 1) * sizeof *nt);
	if (!nt)
		return swc_fail(p, p->line, "out of memory");
	c->trees = nt;
	nt = &c->trees[c->ntrees++];
	ctl_tree_init(nt, (uint16_t)id);
	nt->line = p->line;
	*out = nt;
	return 0;
}

/* Checks that need the whole block, when '}' closes it (or the --tree spec ends): the model's
 * rules, reported at the line of the tree, member or child they are about. */
int swc_finish_tree(struct pctx *p, struct ctl_tree *t)
{
	struct ctl_tree_err e;
	int line = t->line;

	if (ctl_tree_finish(t, sw_config_auth_required(), &e) == 0)
		return 0;
	if (e.at == CTL_AT_MEMBER && e.index < t->nmembers)
		line = t->members[e.index].line;
	else if (e.at == CTL_AT_CHILD && e.index < t->nchildren)
		line = t->children[e.index].line;
	return swc_fail(p, line, "%s", e.msg);
}

