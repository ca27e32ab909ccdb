/* inca-am planner: root choice, single- vs multi-level trees, resource checks and per-switch
 * tree configuration (see plan.h). Pure: the daemon feeds it a snapshot and pushes the result. */
#include "plan.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static bool same_ip(const char *a, const char *b)
{
	size_t la, lb;

	if (!a || !b || !a[0] || !b[0])
		return false;
	la = strcspn(a, ":");
	lb = strcspn(b, ":");
	return la == lb && memcmp(a, b, la) == 0;
}

int am_attach_find(const struct am_sw_view *sw, size_t nsw, const char *host,
		   const char *data_addr)
{
	int best = -1;

	for (size_t i = 0; i < nsw; i++) {
		for (size_t l = 0; l < sw[i].nlinks; l++) {
			const struct ctl_link *k = &sw[i].links[l];
			bool hit = (host && host[0] && strcmp(k->peer, host) == 0) ||
				   same_ip(k->peer_addr, data_addr);
			if (!hit)
				continue;
			if (best < 0 || (sw[i].role == AM_ROLE_LEAF && sw[best].role != AM_ROLE_LEAF))
				best = (int)i;
		}
	}
	return best;
}

/* -1: side a does not list b; 0: lists it, all down; 1: lists it with an up link. */
static int side(const struct am_sw_view *a, const struct am_sw_view *b)
{
	int r = -1;

	for (size_t l = 0; l < a->nlinks; l++) {
		if (strcmp(a->links[l].peer, b->name) != 0)
			continue;
		if (a->links[l].up)
			return 1;
		r = 0;
	}
	return r;
}

bool am_connected(const struct am_sw_view *a, const struct am_sw_view *b)
{
	int x = side(a, b), y = side(b, a);

	if (x < 0 && y < 0)
		return false;
	return x != 0 && y != 0;
}

static unsigned need_bsl(const struct am_mem_view *mem, size_t nmem)
{
	unsigned maxid = 0, bsl = 64;

	for (size_t i = 0; i < nmem; i++)
		if (mem[i].bfr_id > maxid)
			maxid = mem[i].bfr_id;
	while (bsl < maxid && bsl < 8192)
		bsl <<= 1;
	return bsl;
}

/* Why switch s cannot hold a tree of this group, or NULL if it can. */
static const char *unusable(const struct am_sw_view *s, const struct am_plan_req *req,
			    unsigned bsl, char *buf, size_t cap)
{
	unsigned maxbsl = s->max_bsl_bits ? s->max_bsl_bits : 4096;

	if (!s->up)
		snprintf(buf, cap, "switch %s is down", s->name);
	else if (s->free_trees < 1)
		snprintf(buf, cap, "switch %s has no free tree", s->name);
	else if (s->free_slots < req->slots_min || s->free_slots == 0)
		snprintf(buf, cap, "switch %s: slots exhausted (free %u, need %u)", s->name,
			 s->free_slots, req->slots_min ? req->slots_min : 1);
	else if (maxbsl < bsl)
		snprintf(buf, cap, "switch %s: bit-string too short (max %u bits, need %u)", s->name,
			 maxbsl, bsl);
	else if ((s->dtype_mask && (s->dtype_mask & req->dtype_need) != req->dtype_need) ||
		 (s->op_mask && (s->op_mask & req->op_need) != req->op_need))
		snprintf(buf, cap, "switch %s lacks a data type or operation the group needs",
			 s->name);
	else if (s->max_slot_bytes && s->max_slot_bytes < 256)
		snprintf(buf, cap, "switch %s: slots too small (%u bytes)", s->name,
			 s->max_slot_bytes);
	else
		return NULL;
	return buf;
}

void am_plan_free(struct am_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nsw; i++)
		ctl_tree_free(&p->sws[i].tree);
	free(p->sws);
	free(p->send_sw);
	memset(p, 0, sizeof *p);
}

int am_plan_find(const struct am_plan *p, int sw)
{
	for (size_t i = 0; i < p->nsw; i++)
		if (p->sws[i].sw == sw)
			return (int)i;
	return -1;
}

static void fail(struct am_plan *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct am_plan *out, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out->reason, sizeof out->reason, fmt, ap);
	va_end(ap);
	out->ok = false;
}

/* A data-plane address as the tree model holds it (clients' and switches' addresses were
 * checked when they came in, so a failure here is a bug upstream). */
static int plan_addr(struct am_plan *out, const char *s, struct sockaddr_in *a)
{
	if (util_parse_addr(s, 4791, a) < 0) {
		fail(out, "bad data address '%s'", s);
		return -EINVAL;
	}
	return 0;
}

/* Fill the plan's switch entry for switch view index s. */
static int fill_tree(struct am_plan *out, const struct am_sw_view *sw, size_t nsw,
		     const struct am_mem_view *mem, size_t nmem, const struct am_plan_req *req,
		     struct am_plan_sw *ps, int s, int parent)
{
	struct ctl_tree *t = &ps->tree;
	size_t nm = 0, nc = 0;

	memset(ps, 0, sizeof *ps);
	ps->sw = s;
	ps->parent = parent;
	ctl_tree_init(t, req->tree_id);
	t->key = req->key;
	t->auth = true;
	memcpy(t->auth_key, req->auth_key, sizeof t->auth_key);
	t->auth_key_id = req->auth_key_id;
	t->qpn = wire_qpn_default(WIRE_QPN_SWITCH, req->tree_id);
	t->slots = out->slots;
	t->slot_bytes = out->slot_bytes;
	t->bsl_bits = out->bsl_bits;
	t->si = 0;
	t->deterministic = req->deterministic;
	t->root = parent < 0;
	t->bfr_id = 0;
	if (parent >= 0) {
		t->has_parent = true;
		if (plan_addr(out, sw[parent].data_addr, &t->parent) < 0)
			return -EINVAL;
		t->parent_qpn = wire_qpn_default(WIRE_QPN_SWITCH, req->tree_id);
	}
	for (size_t i = 0; i < nmem; i++)
		if (out->send_sw[i] == s)
			nm++;
	/* Children: switches whose parent is s (computed by the caller in send_sw/parents). */
	for (size_t j = 0; j < nsw; j++)
		if (j != (size_t)s && am_plan_find(out, (int)j) >= 0 &&
		    out->sws[am_plan_find(out, (int)j)].parent == s)
			nc++;
	t->members = nm ? calloc(nm, sizeof *t->members) : NULL;
	t->children = nc ? calloc(nc, sizeof *t->children) : NULL;
	if ((nm && !t->members) || (nc && !t->children))
		return -ENOMEM;
	for (size_t i = 0; i < nmem; i++) {
		struct ctl_member *m;
		if (out->send_sw[i] != s)
			continue;
		m = &t->members[t->nmembers++];
		m->bfr_id = mem[i].bfr_id;
		if (plan_addr(out, mem[i].data_addr, &m->addr) < 0)
			return -EINVAL;
		m->qpn = mem[i].qpn;
	}
	for (size_t j = 0; j < nsw; j++) {
		int pi = am_plan_find(out, (int)j);
		struct ctl_child *c;
		size_t k = 0, cnt = 0;
		if (j == (size_t)s || pi < 0 || out->sws[pi].parent != s)
			continue;
		c = &t->children[t->nchildren++];
		if (plan_addr(out, sw[j].data_addr, &c->addr) < 0)
			return -EINVAL;
		c->qpn = wire_qpn_default(WIRE_QPN_SWITCH, req->tree_id);
		/* Two levels at most: a child covers exactly the members that send to it. */
		for (size_t i = 0; i < nmem; i++)
			if (out->send_sw[i] == (int)j)
				cnt++;
		c->bfr_ids = calloc(cnt ? cnt : 1, sizeof *c->bfr_ids);
		if (!c->bfr_ids)
			return -ENOMEM;
		for (size_t i = 0; i < nmem; i++)
			if (out->send_sw[i] == (int)j)
				c->bfr_ids[k++] = mem[i].bfr_id;
		c->nbfr = k;
	}
	return 0;
}

int am_plan_build(const struct am_sw_view *sw, size_t nsw, const struct am_mem_view *mem,
		  size_t nmem, const struct am_plan_req *req, struct am_plan *out)
{
	char why[160];
	bool *leaf = NULL, *leaf_ok = NULL;
	size_t nleaves = 0;
	int root = -1, only_leaf = -1, rc;
	uint32_t free_min;
	uint32_t slot_bytes = 4096;

	memset(out, 0, sizeof *out);
	out->root = -1;
	if (!sw || !mem || nmem == 0 || !req || req->tree_id == 0)
		return -EINVAL;
	out->send_sw = calloc(nmem, sizeof *out->send_sw);
	leaf = calloc(nsw ? nsw : 1, sizeof *leaf);
	leaf_ok = calloc(nsw ? nsw : 1, sizeof *leaf_ok);
	out->sws = calloc(nsw ? nsw : 1, sizeof *out->sws);
	if (!out->send_sw || !leaf || !leaf_ok || !out->sws) {
		rc = -ENOMEM;
		goto done;
	}
	rc = 0;
	out->bsl_bits = need_bsl(mem, nmem);
	if (out->bsl_bits > 4096) {
		fail(out, "group too large for one BIER set (more than 4096 members)");
		goto done;
	}
	for (size_t i = 0; i < nmem; i++) {
		if (mem[i].attach < 0 || (size_t)mem[i].attach >= nsw) {
			fail(out, "rank %u (%s) is not attached to any known switch",
			     mem[i].bfr_id - 1u, mem[i].data_addr);
			goto done;
		}
		leaf[mem[i].attach] = true;
	}
	for (size_t j = 0; j < nsw; j++) {
		if (!leaf[j])
			continue;
		nleaves++;
		only_leaf = (int)j;
		leaf_ok[j] = unusable(&sw[j], req, out->bsl_bits, why, sizeof why) == NULL;
	}

	if (nleaves == 1 && leaf_ok[only_leaf]) {
		root = only_leaf; /* single level: the leaf covers the whole group */
	} else {
		/* A root reachable from every leaf involved; excluded (unusable) leaves still
		 * forward their members' packets to it as plain IP. Prefer spines, then most
		 * free slots, then view order. */
		char rwhy[160];
		for (size_t s = 0; s < nsw; s++) {
			bool reach = true;
			if (unusable(&sw[s], req, out->bsl_bits, rwhy, sizeof rwhy))
				continue;
			for (size_t j = 0; j < nsw && reach; j++)
				if (leaf[j] && j != s && !am_connected(&sw[s], &sw[j]))
					reach = false;
			if (!reach)
				continue;
			if (root < 0 ||
			    (sw[s].role == AM_ROLE_SPINE && sw[root].role != AM_ROLE_SPINE) ||
			    (sw[s].role == sw[root].role && sw[s].free_slots > sw[root].free_slots))
				root = (int)s;
		}
		if (root < 0) {
			if (nleaves == 1)
				fail(out, "%s, and no other switch with free resources reaches it",
				     unusable(&sw[only_leaf], req, out->bsl_bits, why, sizeof why));
			else
				fail(out, "no switch with the capability and free resources is "
					  "reachable from every leaf of the group");
			goto done;
		}
	}

	/* Who sends where: members of a usable leaf (other than the root) go to that leaf,
	 * which becomes a child of the root; everyone else goes straight to the root. */
	out->root = root;
	for (size_t i = 0; i < nmem; i++) {
		int a = mem[i].attach;
		out->send_sw[i] = (a != root && leaf_ok[a]) ? a : root;
	}
	free_min = sw[root].free_slots;
	if (sw[root].max_slot_bytes && sw[root].max_slot_bytes < slot_bytes)
		slot_bytes = sw[root].max_slot_bytes;
	for (size_t j = 0; j < nsw; j++) {
		bool used = false;
		if ((int)j == root)
			continue;
		for (size_t i = 0; i < nmem && !used; i++)
			used = out->send_sw[i] == (int)j;
		if (!used)
			continue;
		out->sws[out->nsw].sw = (int)j;
		out->sws[out->nsw].parent = root;
		out->nsw++;
		if (sw[j].free_slots < free_min)
			free_min = sw[j].free_slots;
		if (sw[j].max_slot_bytes && sw[j].max_slot_bytes < slot_bytes)
			slot_bytes = sw[j].max_slot_bytes;
	}
	out->sws[out->nsw].sw = root;
	out->sws[out->nsw].parent = -1;
	out->nsw++;
	out->multi_level = out->nsw > 1;

	/* Admission control: every tree switch must hold the same slot pool (a slot index means
	 * the same chunk at every level). */
	out->slots = req->slots_wanted ? req->slots_wanted : 256;
	if (free_min < out->slots)
		out->slots = (uint16_t)free_min;
	if (out->slots == 0 || out->slots < req->slots_min) {
		fail(out, "slots exhausted: only %u free on the tree's switches (root %s)",
		     (unsigned)free_min, sw[root].name);
		goto done;
	}
	out->slot_bytes = slot_bytes;
	out->mtu = (uint16_t)(req->mtu_max && req->mtu_max < slot_bytes ? req->mtu_max : slot_bytes);
	if (out->mtu < 256) {
		fail(out, "MTU too small for INCA packets");
		goto done;
	}

	for (size_t i = 0; i < out->nsw; i++) {
		struct am_plan_sw tmp = out->sws[i];
		rc = fill_tree(out, sw, nsw, mem, nmem, req, &out->sws[i], tmp.sw, tmp.parent);
		if (rc < 0)
			goto done;
	}
	out->ok = true;
done:
	free(leaf);
	free(leaf_ok);
	if (rc < 0 || !out->ok) {
		char reason[sizeof out->reason];
		memcpy(reason, out->reason, sizeof reason);
		am_plan_free(out);
		memcpy(out->reason, reason, sizeof reason);
		out->root = -1;
	}
	return rc;
}
