/* Unit tests of the inca-am planner (plan.c): single-level and 2-level leaf-spine trees,
 * BFR-ids / A-BM / BIFT child entries, admission control, concurrent groups sharing switches,
 * exclusion of down or full switches, link failures and client attachment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "util/util.h"

/* The model holds addresses parsed; the tests name them as text. */
static const char *A(const struct sockaddr_in *a)
{
	static char buf[4][32];
	static unsigned n;

	return util_format_addr(a, buf[n++ % 4], sizeof buf[0]);
}

#include "util/test_check.h"

/* Fabric: spine0, spine1, leaf0 (hosts h0..h3), leaf1 (hosts h4..h7). */
static struct ctl_link spine0_links[2], spine1_links[2], leaf0_links[6], leaf1_links[6];
static struct am_sw_view sw[4];
static char host_addr[8][32];

static void link_set(struct ctl_link *l, const char *peer, const char *addr, bool up)
{
	memset(l, 0, sizeof *l);
	snprintf(l->peer, sizeof l->peer, "%.63s", peer);
	snprintf(l->peer_addr, sizeof l->peer_addr, "%.63s", addr ? addr : "");
	l->up = up;
	l->speed_bps = 1000000000ull;
}

static void fabric(void)
{
	static const char *names[4] = { "spine0", "spine1", "leaf0", "leaf1" };
	static const char *addrs[4] = { "198.18.0.1:4791", "198.18.0.2:4791", "198.18.1.1:4791",
					"198.18.2.1:4791" };
	for (int i = 0; i < 8; i++)
		snprintf(host_addr[i], sizeof host_addr[i], "198.18.%d.%d:5000", 1 + i / 4,
			 10 + i % 4);
	link_set(&spine0_links[0], "leaf0", NULL, true);
	link_set(&spine0_links[1], "leaf1", NULL, true);
	link_set(&spine1_links[0], "leaf0", NULL, true);
	link_set(&spine1_links[1], "leaf1", NULL, true);
	link_set(&leaf0_links[0], "spine0", NULL, true);
	link_set(&leaf0_links[1], "spine1", NULL, true);
	link_set(&leaf1_links[0], "spine0", NULL, true);
	link_set(&leaf1_links[1], "spine1", NULL, true);
	for (int h = 0; h < 4; h++) {
		char name[8];
		snprintf(name, sizeof name, "h%d", h);
		link_set(&leaf0_links[2 + h], name, host_addr[h], true);
		snprintf(name, sizeof name, "h%d", h + 4);
		link_set(&leaf1_links[2 + h], name, host_addr[h + 4], true);
	}
	for (int i = 0; i < 4; i++) {
		memset(&sw[i], 0, sizeof sw[i]);
		sw[i].name = names[i];
		sw[i].data_addr = addrs[i];
		sw[i].role = i < 2 ? AM_ROLE_SPINE : AM_ROLE_LEAF;
		sw[i].up = true;
		sw[i].free_slots = 1024;
		sw[i].free_trees = 16;
	}
	sw[1].free_slots = 512; /* spine0 is preferred: more free slots */
	sw[0].links = spine0_links, sw[0].nlinks = 2;
	sw[1].links = spine1_links, sw[1].nlinks = 2;
	sw[2].links = leaf0_links, sw[2].nlinks = 6;
	sw[3].links = leaf1_links, sw[3].nlinks = 6;
}

static void members(struct am_mem_view *m, const int *hosts, int n)
{
	for (int r = 0; r < n; r++) {
		char name[8];
		snprintf(name, sizeof name, "h%d", hosts[r]);
		m[r].bfr_id = (uint16_t)(r + 1);
		m[r].data_addr = host_addr[hosts[r]];
		m[r].qpn = 0x1000u + m[r].bfr_id;
		m[r].attach = am_attach_find(sw, 4, name, m[r].data_addr);
	}
}

static struct am_plan_req req_default(uint16_t tree_id)
{
	struct am_plan_req r = { .tree_id = tree_id, .key = 0xabcd1234, .slots_wanted = 256,
				 .slots_min = 16, .auth_key_id = 0x77 };
	for (int i = 0; i < WIRE_AUTH_KEY_LEN; i++)
		r.auth_key[i] = (uint8_t)(0xa0 + i);
	return r;
}

static bool tree_has_member(const struct ctl_tree *t, uint16_t bfr)
{
	for (size_t i = 0; i < t->nmembers; i++)
		if (t->members[i].bfr_id == bfr)
			return true;
	return false;
}

/* A-BM of a switch tree = its members + every child's BFR-ids. */
static size_t abm_count(const struct ctl_tree *t)
{
	size_t n = t->nmembers;
	for (size_t c = 0; c < t->nchildren; c++)
		n += t->children[c].nbfr;
	return n;
}

static void test_attach(void)
{
	fabric();
	CHECK_EQ(am_attach_find(sw, 4, "h0", "1.2.3.4:1"), 2);
	CHECK_EQ(am_attach_find(sw, 4, "nobody", host_addr[6]), 3); /* by IP */
	CHECK_EQ(am_attach_find(sw, 4, "nobody", "9.9.9.9:1"), -1);
	CHECK(am_connected(&sw[0], &sw[2]));
	CHECK(!am_connected(&sw[2], &sw[3])); /* leaves are not linked */
}

static void test_single_level(void)
{
	struct am_mem_view m[4];
	struct am_plan p;
	struct am_plan_req r = req_default(7);

	fabric();
	members(m, (int[]){ 0, 1, 2, 3 }, 4);
	CHECK_EQ(am_plan_build(sw, 4, m, 4, &r, &p), 0);
	CHECK(p.ok);
	CHECK(!p.multi_level);
	CHECK_EQ(p.root, 2);
	CHECK_EQ(p.nsw, 1);
	CHECK_EQ(p.slots, 256);
	CHECK_EQ(p.bsl_bits, 64);
	CHECK_EQ(p.mtu, 4096);
	if (p.ok) {
		const struct ctl_tree *t = &p.sws[0].tree;
		CHECK(t->root && !t->has_parent);
		CHECK_EQ(t->id, 7);
		CHECK_EQ(t->qpn, 0x107);
		CHECK_EQ(t->key, 0xabcd1234u);
		CHECK_EQ(t->nmembers, 4);
		CHECK_EQ(t->nchildren, 0);
		for (int i = 0; i < 4; i++) {
			CHECK_EQ(t->members[i].bfr_id, i + 1); /* BFR-id = rank + 1 */
			CHECK(strcmp(A(&t->members[i].addr), host_addr[i]) == 0);
			CHECK_EQ(t->members[i].qpn, 0x1001 + i);
			CHECK_EQ(p.send_sw[i], 2);
		}
	}
	am_plan_free(&p);
}

static void test_two_level(void)
{
	struct am_mem_view m[8];
	struct am_plan p;
	struct am_plan_req r = req_default(9);

	fabric();
	/* ranks interleaved over the leaves: rank r on h(r%2 ? 4 + r/2 : r/2) */
	members(m, (int[]){ 0, 4, 1, 5, 2, 6, 3, 7 }, 8);
	CHECK_EQ(am_plan_build(sw, 4, m, 8, &r, &p), 0);
	CHECK(p.ok);
	CHECK(p.multi_level);
	CHECK_EQ(p.root, 0); /* spine0: more free slots than spine1 */
	CHECK_EQ(p.nsw, 3);
	/* every switch of the tree gets the group's data-plane key and key id */
	for (size_t k = 0; p.ok && k < p.nsw; k++) {
		CHECK(p.sws[k].tree.auth);
		CHECK_EQ(p.sws[k].tree.auth_key_id, 0x77);
		CHECK(!memcmp(p.sws[k].tree.auth_key, r.auth_key, WIRE_AUTH_KEY_LEN));
	}
	if (p.ok && p.nsw == 3) {
		const struct ctl_tree *root = &p.sws[2].tree;
		CHECK_EQ(p.sws[2].sw, 0); /* root pushed last */
		CHECK(root->root);
		CHECK_EQ(root->nmembers, 0);
		CHECK_EQ(root->nchildren, 2);
		CHECK_EQ(abm_count(root), 8);
		for (int k = 0; k < 2; k++) {
			const struct ctl_tree *leaf = &p.sws[k].tree;
			int s = p.sws[k].sw;
			CHECK(s == 2 || s == 3);
			CHECK(!leaf->root && leaf->has_parent);
			CHECK(strcmp(A(&leaf->parent), "198.18.0.1:4791") == 0);
			CHECK_EQ(leaf->parent_qpn, 0x109);
			CHECK_EQ(leaf->nmembers, 4);
			CHECK_EQ(leaf->nchildren, 0);
			/* leaf0 holds the even ranks (BFR-ids 1,3,5,7), leaf1 the odd ones */
			for (uint16_t b = 1; b <= 8; b++)
				CHECK_EQ(tree_has_member(leaf, b), (s == 2) == (b % 2 == 1));
		}
		/* BIFT child entries: each child's BFR-id list = that leaf's members */
		for (size_t c = 0; c < root->nchildren; c++) {
			const struct ctl_child *ch = &root->children[c];
			bool is_leaf0 = strcmp(A(&ch->addr), "198.18.1.1:4791") == 0;
			CHECK(is_leaf0 || strcmp(A(&ch->addr), "198.18.2.1:4791") == 0);
			CHECK_EQ(ch->qpn, 0x109);
			CHECK_EQ(ch->nbfr, 4);
			for (size_t i = 0; i < ch->nbfr; i++)
				CHECK_EQ(ch->bfr_ids[i] % 2, is_leaf0 ? 1 : 0);
		}
		for (int i = 0; i < 8; i++)
			CHECK_EQ(p.send_sw[i], i % 2 ? 3 : 2);
	}
	am_plan_free(&p);
}

static void test_admission(void)
{
	struct am_mem_view m[4];
	struct am_plan p;
	struct am_plan_req r = req_default(3);

	fabric();
	members(m, (int[]){ 0, 1, 2, 3 }, 4);
	/* fewer free slots than wanted but more than the minimum: shrink the pool */
	sw[2].free_slots = 100;
	CHECK_EQ(am_plan_build(sw, 4, m, 4, &r, &p), 0);
	CHECK(p.ok);
	CHECK_EQ(p.slots, 100);
	am_plan_free(&p);
	/* leaf full: the group moves up to a spine (members send there directly) */
	sw[2].free_slots = 4;
	CHECK_EQ(am_plan_build(sw, 4, m, 4, &r, &p), 0);
	CHECK(p.ok);
	CHECK_EQ(p.root, 0);
	CHECK_EQ(p.nsw, 1);
	CHECK(!p.multi_level);
	if (p.ok)
		CHECK_EQ(p.sws[0].tree.nmembers, 4);
	am_plan_free(&p);
	/* everything full: refused with a reason naming the leaf */
	sw[0].free_slots = sw[1].free_slots = 8;
	CHECK_EQ(am_plan_build(sw, 4, m, 4, &r, &p), 0);
	CHECK(!p.ok);
	CHECK(strstr(p.reason, "slots exhausted") != NULL);
	CHECK(strstr(p.reason, "leaf0") != NULL);
	CHECK_EQ(p.nsw, 0);
	am_plan_free(&p);
	/* no free tree entries */
	fabric();
	sw[2].free_trees = 0;
	sw[0].free_trees = sw[1].free_trees = 0;
	CHECK_EQ(am_plan_build(sw, 4, m, 4, &r, &p), 0);
	CHECK(!p.ok);
	CHECK(strstr(p.reason, "no free tree") != NULL);
	am_plan_free(&p);
	/* capability exclusion */
	fabric();
	r.dtype_need = 1u << 11; /* fp64 */
	sw[2].dtype_mask = 0x7ff;  /* leaf0 without fp64 */
	CHECK_EQ(am_plan_build(sw, 4, m, 4, &r, &p), 0);
	CHECK(p.ok);
	CHECK_EQ(p.root, 0);
	am_plan_free(&p);
}

/* Two groups on shared switches: the caller's accounting subtracts the first group's slots. */
static void test_concurrent(void)
{
	struct am_mem_view a[8], b[8];
	struct am_plan pa, pb, pc;
	struct am_plan_req ra = req_default(1), rb = req_default(2), rc = req_default(3);

	fabric();
	for (int i = 0; i < 4; i++)
		sw[i].free_slots = 400;
	members(a, (int[]){ 0, 1, 4, 5 }, 4);
	members(b, (int[]){ 2, 3, 6, 7 }, 4);
	CHECK_EQ(am_plan_build(sw, 4, a, 4, &ra, &pa), 0);
	CHECK(pa.ok && pa.multi_level);
	for (size_t i = 0; i < pa.nsw; i++) {
		sw[pa.sws[i].sw].free_slots -= pa.slots;
		sw[pa.sws[i].sw].free_trees--;
	}
	CHECK_EQ(am_plan_build(sw, 4, b, 4, &rb, &pb), 0);
	CHECK(pb.ok && pb.multi_level);
	/* group A took 256 on spine0 and both leaves: B fits in 144 on the leaves, and prefers
	 * spine1 (400 free) for its root */
	CHECK_EQ(pa.root, 0);
	CHECK_EQ(pb.root, 1);
	CHECK_EQ(pb.slots, 144);
	for (size_t i = 0; i < pb.nsw; i++) {
		sw[pb.sws[i].sw].free_slots -= pb.slots;
		sw[pb.sws[i].sw].free_trees--;
	}
	/* the leaves are now full: a third group is excluded from them and aggregates on
	 * spine1 alone (members send there directly), a fourth on spine0, a fifth is refused */
	CHECK_EQ(am_plan_build(sw, 4, a, 4, &rc, &pc), 0);
	CHECK(pc.ok && !pc.multi_level);
	CHECK_EQ(pc.root, 1);
	CHECK_EQ(pc.slots, 256);
	sw[1].free_slots -= pc.slots;
	am_plan_free(&pc);
	CHECK_EQ(am_plan_build(sw, 4, a, 4, &rc, &pc), 0);
	CHECK(pc.ok);
	CHECK_EQ(pc.root, 0);
	CHECK_EQ(pc.slots, 144);
	sw[0].free_slots -= pc.slots;
	am_plan_free(&pc);
	CHECK_EQ(am_plan_build(sw, 4, a, 4, &rc, &pc), 0);
	CHECK(!pc.ok);
	CHECK(strstr(pc.reason, "no switch") != NULL);
	am_plan_free(&pa);
	am_plan_free(&pb);
	am_plan_free(&pc);
}

static void test_failures(void)
{
	struct am_mem_view m[8];
	struct am_plan p;
	struct am_plan_req r = req_default(5);

	fabric();
	members(m, (int[]){ 0, 1, 2, 3, 4, 5, 6, 7 }, 8);
	/* spine0 loses its link to leaf1 (seen from either side): root moves to spine1 */
	spine0_links[1].up = false;
	CHECK_EQ(am_plan_build(sw, 4, m, 8, &r, &p), 0);
	CHECK(p.ok);
	CHECK_EQ(p.root, 1);
	am_plan_free(&p);
	/* leaf1 down: its members send straight to the root, leaf0 stays a child */
	fabric();
	sw[3].up = false;
	CHECK_EQ(am_plan_build(sw, 4, m, 8, &r, &p), 0);
	CHECK(p.ok);
	CHECK_EQ(p.nsw, 2);
	if (p.ok && p.nsw == 2) {
		const struct ctl_tree *root = &p.sws[1].tree;
		CHECK_EQ(root->nmembers, 4);
		CHECK_EQ(root->nchildren, 1);
		CHECK_EQ(abm_count(root), 8);
		for (int i = 4; i < 8; i++)
			CHECK_EQ(p.send_sw[i], p.root);
	}
	am_plan_free(&p);
	/* both spines down: a two-leaf group has no root */
	fabric();
	sw[0].up = sw[1].up = false;
	CHECK_EQ(am_plan_build(sw, 4, m, 8, &r, &p), 0);
	CHECK(!p.ok);
	CHECK(strstr(p.reason, "reachable") != NULL);
	am_plan_free(&p);
	/* unknown client */
	fabric();
	members(m, (int[]){ 0, 1 }, 2);
	m[1].attach = -1;
	CHECK_EQ(am_plan_build(sw, 4, m, 2, &r, &p), 0);
	CHECK(!p.ok);
	CHECK(strstr(p.reason, "rank 1") != NULL);
	am_plan_free(&p);
}

static void test_bsl(void)
{
	struct am_mem_view m[100];
	struct am_plan p;
	struct am_plan_req r = req_default(6);

	fabric();
	for (int i = 0; i < 100; i++) {
		m[i].bfr_id = (uint16_t)(i + 1);
		m[i].data_addr = host_addr[i % 4];
		m[i].qpn = 0x1000u + m[i].bfr_id;
		m[i].attach = 2;
	}
	CHECK_EQ(am_plan_build(sw, 4, m, 100, &r, &p), 0);
	CHECK(p.ok);
	CHECK_EQ(p.bsl_bits, 128);
	if (p.ok)
		CHECK_EQ(p.sws[0].tree.bsl_bits, 128);
	am_plan_free(&p);
	sw[2].max_bsl_bits = 64;
	sw[0].max_bsl_bits = sw[1].max_bsl_bits = 64;
	CHECK_EQ(am_plan_build(sw, 4, m, 100, &r, &p), 0);
	CHECK(!p.ok);
	am_plan_free(&p);
	CHECK_EQ(am_plan_build(sw, 4, m, 100, &(struct am_plan_req){ 0 }, &p), -22);
}

int main(void)
{
	test_attach();
	test_single_level();
	test_two_level();
	test_admission();
	test_concurrent();
	test_failures();
	test_bsl();
	printf("plan_test: all passed\n");
	return 0;
}
