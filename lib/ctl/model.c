/* lib/ctl model: life cycle, comparison and the semantic validation of struct ctl_tree, and
 * freeing capabilities. No NETCONF and no libyang: always built, so inca-switch's config
 * parser, inca-am's planner and its NETCONF stub share it with the real client. */
#include "ctl/model.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

void ctl_tree_init(struct ctl_tree *t, uint16_t id)
{
	memset(t, 0, sizeof *t);
	t->id = id;
	t->slots = 256;
	t->slot_bytes = 4096;
	t->bsl_bits = 64;
	t->root = true;
	t->check_sender = true;
	t->pkey = 0xFFFF;
}

void ctl_tree_free(struct ctl_tree *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nchildren; i++)
		free(t->children[i].bfr_ids);
	free(t->children);
	free(t->members);
	t->children = NULL;
	t->members = NULL;
	t->nchildren = t->nmembers = 0;
}

int ctl_tree_copy(struct ctl_tree *dst, const struct ctl_tree *src)
{
	*dst = *src;
	dst->members = NULL;
	dst->children = NULL;
	dst->nmembers = dst->nchildren = 0;
	if (src->nmembers) {
		dst->members = malloc(src->nmembers * sizeof *dst->members);
		if (!dst->members)
			return -ENOMEM;
		memcpy(dst->members, src->members, src->nmembers * sizeof *dst->members);
		dst->nmembers = src->nmembers;
	}
	if (src->nchildren) {
		dst->children = calloc(src->nchildren, sizeof *dst->children);
		if (!dst->children)
			goto oom;
		for (size_t i = 0; i < src->nchildren; i++) {
			const struct ctl_child *c = &src->children[i];

			dst->children[i] = *c;
			dst->children[i].bfr_ids = malloc((c->nbfr ? c->nbfr : 1) * sizeof(uint16_t));
			if (!dst->children[i].bfr_ids) {
				dst->nchildren = i;
				goto oom;
			}
			memcpy(dst->children[i].bfr_ids, c->bfr_ids, c->nbfr * sizeof(uint16_t));
		}
		dst->nchildren = src->nchildren;
	}
	return 0;
oom:
	ctl_tree_free(dst);
	return -ENOMEM;
}

static bool addr_eq(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

bool ctl_tree_equal(const struct ctl_tree *a, const struct ctl_tree *b)
{
	if (a->id != b->id || a->key != b->key || a->qpn != b->qpn || a->slots != b->slots ||
	    a->slot_bytes != b->slot_bytes || a->bsl_bits != b->bsl_bits || a->si != b->si ||
	    a->root != b->root || a->bfr_id != b->bfr_id || a->has_parent != b->has_parent ||
	    a->deterministic != b->deterministic || a->check_sender != b->check_sender ||
	    a->pkey != b->pkey || a->dtype_mask != b->dtype_mask || a->op_mask != b->op_mask ||
	    a->auth != b->auth || a->auth_key_id != b->auth_key_id ||
	    memcmp(a->auth_key, b->auth_key, sizeof a->auth_key) ||
	    a->nmembers != b->nmembers || a->nchildren != b->nchildren)
		return false;
	if (a->has_parent && (!addr_eq(&a->parent, &b->parent) || a->parent_qpn != b->parent_qpn))
		return false;
	for (size_t i = 0; i < a->nmembers; i++)
		if (a->members[i].bfr_id != b->members[i].bfr_id ||
		    !addr_eq(&a->members[i].addr, &b->members[i].addr) ||
		    a->members[i].qpn != b->members[i].qpn)
			return false;
	for (size_t i = 0; i < a->nchildren; i++) {
		const struct ctl_child *x = &a->children[i], *y = &b->children[i];
		if (!addr_eq(&x->addr, &y->addr) || x->qpn != y->qpn || x->nbfr != y->nbfr ||
		    memcmp(x->bfr_ids, y->bfr_ids, x->nbfr * sizeof(uint16_t)))
			return false;
	}
	return true;
}

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

bool ctl_tree_covers(const struct ctl_tree *t, uint16_t k)
{
	for (size_t i = 0; i < t->nmembers; i++)
		if (t->members[i].bfr_id == k)
			return true;
	for (size_t i = 0; i < t->nchildren; i++)
		if (bsearch(&k, t->children[i].bfr_ids, t->children[i].nbfr, sizeof k, cmp_u16))
			return true;
	return false;
}

/* ---------------------------------------------------------------- validation */

int ctl_tree_fail(struct ctl_tree_err *e, enum ctl_tree_at at, size_t index, const char *fmt,
		  ...)
{
	va_list ap;

	e->at = at;
	e->index = index;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* A key needs its id and vice versa; auth off excludes a key; neither key nor auth off is an
 * error when auth_required, else the tree runs unauthenticated. */
static int finish_auth(struct ctl_tree *t, bool auth_required, struct ctl_tree_err *e)
{
	bool has_key = t->given & CTL_TF_BIT(CTL_TF_AUTH_KEY);
	bool has_id = t->given & CTL_TF_BIT(CTL_TF_AUTH_KEY_ID);
	bool has_auth = t->given & CTL_TF_BIT(CTL_TF_AUTH);

	if (has_auth && !t->auth) {
		if (has_key || has_id)
			return ctl_tree_fail(e, CTL_AT_TREE, 0,
					     "tree %u: auth = off together with auth_key/"
					     "auth_key_id (drop one of them)", t->id);
		return 0;
	}
	if (has_key != has_id)
		return ctl_tree_fail(e, CTL_AT_TREE, 0,
				     "tree %u: auth_key and auth_key_id go together "
				     "(missing %s)", t->id, has_key ? "auth_key_id" : "auth_key");
	if (has_key) {
		t->auth = true;
		return 0;
	}
	if (has_auth || auth_required)
		return ctl_tree_fail(e, CTL_AT_TREE, 0,
				     "tree %u: no data-plane key: set auth_key = <64 hex "
				     "digits> and auth_key_id = <n>, or auth = off to run "
				     "the tree unauthenticated", t->id);
	t->auth = false;
	return 0;
}

static int check_bfr_ids(const struct ctl_tree *t, struct ctl_tree_err *e)
{
	unsigned lo = (unsigned)t->si * t->bsl_bits + 1;
	unsigned hi = lo + t->bsl_bits - 1;
	uint8_t *used;
	int rc = 0;

	if (lo > 65535)
		return ctl_tree_fail(e, CTL_AT_TREE, 0,
				     "tree %u: si %u with bsl %u has no valid BFR-ids",
				     t->id, t->si, t->bsl_bits);
	if (hi > 65535)
		hi = 65535;
	used = calloc(65536, 1);
	if (!used)
		return ctl_tree_fail(e, CTL_AT_TREE, 0, "out of memory");
	for (size_t i = 0; i < t->nmembers && !rc; i++) {
		unsigned k = t->members[i].bfr_id;
		if (k < lo || k > hi)
			rc = ctl_tree_fail(e, CTL_AT_MEMBER, i,
					   "tree %u: member BFR-id %u outside the BSL range "
					   "of si %u (%u..%u)", t->id, k, t->si, lo, hi);
		else if (used[k])
			rc = ctl_tree_fail(e, CTL_AT_MEMBER, i,
					   "tree %u: BFR-id %u used twice", t->id, k);
		used[k] = 1;
	}
	for (size_t i = 0; i < t->nchildren && !rc; i++) {
		for (size_t j = 0; j < t->children[i].nbfr && !rc; j++) {
			unsigned k = t->children[i].bfr_ids[j];
			if (k < lo || k > hi)
				rc = ctl_tree_fail(e, CTL_AT_CHILD, i,
						   "tree %u: child BFR-id %u outside the BSL "
						   "range of si %u (%u..%u)",
						   t->id, k, t->si, lo, hi);
			else if (used[k])
				rc = ctl_tree_fail(e, CTL_AT_CHILD, i,
						   "tree %u: BFR-id %u used twice", t->id, k);
			used[k] = 1;
		}
	}
	free(used);
	return rc;
}

/* Every neighbour needs a distinct address: the source address is what identifies (and
 * authorises) a sender. */
static int check_addresses(const struct ctl_tree *t, struct ctl_tree_err *e)
{
	size_t nn = t->nmembers + t->nchildren + (t->has_parent ? 1 : 0);
	char a[32];

	for (size_t i = 0; i < nn; i++) {
		const struct sockaddr_in *ai;
		enum ctl_tree_at at;
		size_t idx;

		if (i < t->nmembers) {
			ai = &t->members[i].addr;
			at = CTL_AT_MEMBER;
			idx = i;
		} else if (i < t->nmembers + t->nchildren) {
			ai = &t->children[i - t->nmembers].addr;
			at = CTL_AT_CHILD;
			idx = i - t->nmembers;
		} else {
			ai = &t->parent;
			at = CTL_AT_TREE;
			idx = 0;
		}
		for (size_t j = 0; j < i; j++) {
			const struct sockaddr_in *aj = j < t->nmembers ?
							       &t->members[j].addr :
							       &t->children[j - t->nmembers].addr;
			if (addr_eq(ai, aj))
				return ctl_tree_fail(e, at, idx,
						     "tree %u: address %s used by two neighbours",
						     t->id, util_format_addr(ai, a, sizeof a));
		}
	}
	return 0;
}

int ctl_tree_finish(struct ctl_tree *t, bool auth_required, struct ctl_tree_err *e)
{
	int rc;

	if (!(t->given & CTL_TF_BIT(CTL_TF_KEY)))
		return ctl_tree_fail(e, CTL_AT_TREE, 0,
				     "tree %u: missing key (the group R_Key)", t->id);
	if (!(t->given & CTL_TF_BIT(CTL_TF_QPN)))
		t->qpn = wire_qpn_default(WIRE_QPN_SWITCH, t->id);
	if ((rc = finish_auth(t, auth_required, e)) < 0)
		return rc;
	if (!t->root && !t->has_parent)
		return ctl_tree_fail(e, CTL_AT_TREE, 0, "tree %u: role leaf needs a parent", t->id);
	if (t->root && t->has_parent)
		return ctl_tree_fail(e, CTL_AT_TREE, 0,
				     "tree %u: parent given but role is root", t->id);
	if (t->nmembers == 0 && t->nchildren == 0)
		return ctl_tree_fail(e, CTL_AT_TREE, 0, "tree %u: no members or children", t->id);
	if ((rc = check_bfr_ids(t, e)) < 0)
		return rc;
	return check_addresses(t, e);
}

void ctl_caps_free(struct ctl_caps *c)
{
	if (!c)
		return;
	free(c->links);
	c->links = NULL;
	c->nlinks = 0;
}
