/* Unit tests of the tree model (model.c): defaults, deep copy and comparison, and the semantic
 * rules of ctl_tree_finish with the location each error names. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/model.h"
#include "util/util.h"

static int failures;
#define CHECK(c)                                                                          \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                                       \
		}                                                                         \
	} while (0)

static struct sockaddr_in A(const char *s)
{
	struct sockaddr_in a;

	CHECK(util_parse_addr(s, 4791, &a) == 0);
	return a;
}

/* A valid root tree: members 1 and 2, a child covering 3-4; owns its arrays. */
static void sample(struct ctl_tree *t)
{
	ctl_tree_init(t, 9);
	t->key = 0x5eed;
	t->given = CTL_TF_BIT(CTL_TF_KEY);
	t->members = calloc(2, sizeof *t->members);
	t->children = calloc(1, sizeof *t->children);
	t->children[0].bfr_ids = calloc(2, sizeof(uint16_t));
	t->nmembers = 2;
	t->nchildren = 1;
	t->members[0] = (struct ctl_member){ 1, A("198.18.0.1"), 0x1001, 0 };
	t->members[1] = (struct ctl_member){ 2, A("198.18.0.2"), 0x1002, 0 };
	t->children[0].addr = A("198.18.1.1");
	t->children[0].qpn = 0x109;
	t->children[0].bfr_ids[0] = 3;
	t->children[0].bfr_ids[1] = 4;
	t->children[0].nbfr = 2;
}

static void test_defaults_copy_equal(void)
{
	struct ctl_tree t, c;

	ctl_tree_init(&t, 3);
	CHECK(t.id == 3 && t.slots == 256 && t.slot_bytes == 4096 && t.bsl_bits == 64);
	CHECK(t.root && t.check_sender && t.pkey == 0xFFFF && !t.auth && !t.nmembers);
	sample(&t);
	CHECK(ctl_tree_copy(&c, &t) == 0);
	CHECK(c.members != t.members && c.children[0].bfr_ids != t.children[0].bfr_ids);
	CHECK(ctl_tree_equal(&t, &c));
	c.line = 7;
	c.given = 0;
	CHECK(ctl_tree_equal(&t, &c)); /* where it came from does not count */
	c.children[0].bfr_ids[1] = 5;
	CHECK(!ctl_tree_equal(&t, &c));
	CHECK(ctl_tree_covers(&t, 4) && !ctl_tree_covers(&t, 5) && ctl_tree_covers(&c, 5));
	c.children[0].bfr_ids[1] = 4;
	c.members[1].addr = A("198.18.0.3");
	CHECK(!ctl_tree_equal(&t, &c));
	ctl_tree_free(&c);
	CHECK(!c.members && !c.children && !c.nmembers && !c.nchildren);
	ctl_tree_free(&t);
}

static void test_finish(void)
{
	struct ctl_tree t;
	struct ctl_tree_err e;

	sample(&t);
	CHECK(ctl_tree_finish(&t, false, &e) == 0);
	CHECK(t.qpn == 0x109 && !t.auth); /* default QPN of tree 9; unauthenticated */
	CHECK(ctl_tree_finish(&t, true, &e) == -EINVAL && strstr(e.msg, "no data-plane key"));

	t.given &= ~CTL_TF_BIT(CTL_TF_KEY);
	CHECK(ctl_tree_finish(&t, false, &e) < 0 && e.at == CTL_AT_TREE);
	CHECK(!strcmp(e.msg, "tree 9: missing key (the group R_Key)"));
	t.given |= CTL_TF_BIT(CTL_TF_KEY);

	t.given |= CTL_TF_BIT(CTL_TF_AUTH_KEY);
	CHECK(ctl_tree_finish(&t, false, &e) < 0);
	CHECK(!strcmp(e.msg, "tree 9: auth_key and auth_key_id go together (missing auth_key_id)"));
	t.given |= CTL_TF_BIT(CTL_TF_AUTH_KEY_ID);
	t.auth_key_id = 4;
	CHECK(ctl_tree_finish(&t, true, &e) == 0 && t.auth);
	t.given |= CTL_TF_BIT(CTL_TF_AUTH);
	t.auth = false; /* auth = off with a key */
	CHECK(ctl_tree_finish(&t, false, &e) < 0 && strstr(e.msg, "auth = off together"));
	t.given &= ~(CTL_TF_BIT(CTL_TF_AUTH) | CTL_TF_BIT(CTL_TF_AUTH_KEY) |
		     CTL_TF_BIT(CTL_TF_AUTH_KEY_ID));

	t.root = false;
	CHECK(ctl_tree_finish(&t, false, &e) < 0 && strstr(e.msg, "role leaf needs a parent"));
	t.has_parent = true;
	t.parent = A("198.18.0.2"); /* member 2's address */
	CHECK(ctl_tree_finish(&t, false, &e) < 0 && e.at == CTL_AT_TREE);
	CHECK(!strcmp(e.msg, "tree 9: address 198.18.0.2:4791 used by two neighbours"));
	t.parent = A("198.18.9.9");
	CHECK(ctl_tree_finish(&t, false, &e) == 0);
	t.root = true;
	CHECK(ctl_tree_finish(&t, false, &e) < 0 && strstr(e.msg, "parent given but role is root"));
	t.has_parent = false;

	t.members[1].bfr_id = 65;
	CHECK(ctl_tree_finish(&t, false, &e) < 0 && e.at == CTL_AT_MEMBER && e.index == 1);
	CHECK(!strcmp(e.msg, "tree 9: member BFR-id 65 outside the BSL range of si 0 (1..64)"));
	t.members[1].bfr_id = 2;
	t.children[0].bfr_ids[0] = 2;
	CHECK(ctl_tree_finish(&t, false, &e) < 0 && e.at == CTL_AT_CHILD && e.index == 0);
	CHECK(!strcmp(e.msg, "tree 9: BFR-id 2 used twice"));
	t.children[0].bfr_ids[0] = 3;
	t.children[0].addr = A("198.18.0.1");
	CHECK(ctl_tree_finish(&t, false, &e) < 0 && e.at == CTL_AT_CHILD && e.index == 0);
	t.children[0].addr = A("198.18.1.1");
	t.si = 255;
	t.bsl_bits = 4096;
	CHECK(ctl_tree_finish(&t, false, &e) < 0 && strstr(e.msg, "has no valid BFR-ids"));
	ctl_tree_free(&t);

	ctl_tree_init(&t, 1);
	t.given = CTL_TF_BIT(CTL_TF_KEY);
	CHECK(ctl_tree_finish(&t, false, &e) < 0 && strstr(e.msg, "no members or children"));
}

int main(void)
{
	test_defaults_copy_equal();
	test_finish();
	if (failures) {
		fprintf(stderr, "model_test: %d failure(s)\n", failures);
		return 1;
	}
	printf("model_test: all passed\n");
	return 0;
}
