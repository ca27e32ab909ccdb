/* Unit tests of the tree model's YANG codec (tree_yang.c) against the embedded inca-switch
 * module: model -> YANG -> XML -> YANG -> model gives the same tree, the group key only with
 * CTL_YANG_SECRETS, defaults for absent leaves, and a decode error names its data node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libyang/libyang.h>

#include "ctl_yang.h"
#include "util/util.h"

static int failures;
#define CHECK(c)                                                                          \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                                       \
		}                                                                         \
	} while (0)

static struct ly_ctx *ly;

static struct sockaddr_in A(const char *s)
{
	struct sockaddr_in a;

	CHECK(util_parse_addr(s, 4791, &a) == 0);
	return a;
}

static struct lyd_node *trees_container(struct lyd_node **top)
{
	const struct lys_module *mod = ly_ctx_get_module_implemented(ly, CTL_YANG_MODULE);
	struct lyd_node *trees = NULL;

	*top = NULL;
	CHECK(mod && !lyd_new_inner(NULL, mod, "inca-switch", 0, top));
	CHECK(!lyd_new_inner(*top, NULL, "trees", 0, &trees));
	return trees;
}

static struct lyd_node *first_tree(const struct lyd_node *data)
{
	struct ly_set *set = NULL;
	struct lyd_node *tn = NULL;

	if (!lyd_find_xpath(data, "/inca-switch:inca-switch/trees/tree", &set) && set->count)
		tn = set->dnodes[0];
	ly_set_free(set, NULL);
	CHECK(tn);
	return tn;
}

/* Encode t, print it as XML, parse that back and decode the first tree entry into out. */
static int round_trip(const struct ctl_tree *t, unsigned flags, struct ctl_tree *out,
		      struct ctl_tree_err *e)
{
	struct lyd_node *top, *back = NULL, *tn = NULL;
	char *xml = NULL;
	int rc;

	CHECK(ctl_tree_to_lyd(t, trees_container(&top), flags, NULL) == 0);
	CHECK(!lyd_print_mem(&xml, top, LYD_XML, LYD_PRINT_SHRINK) && xml);
	CHECK(!lyd_parse_data_mem(ly, xml, LYD_XML, LYD_PARSE_ONLY | LYD_PARSE_STRICT, 0, &back));
	tn = first_tree(back);
	rc = tn ? ctl_tree_from_lyd(tn, out, e) : -1;
	free(xml);
	lyd_free_all(top);
	lyd_free_all(back);
	return rc;
}

static void test_round_trip(void)
{
	struct ctl_member m[2] = { { 1, A("198.18.0.1:5000"), 0x1001, 0 },
				   { 2, A("198.18.0.2"), 0x2222, 0 } };
	uint16_t ids[3] = { 7, 3, 4 }; /* decoded sorted */
	struct ctl_child ch = { A("198.18.1.1"), 0x105, ids, 3, 0 };
	struct ctl_tree t, d;
	struct ctl_tree_err e;

	ctl_tree_init(&t, 5);
	t.key = 0xabcdef01;
	t.qpn = 0x105;
	t.slots = 32;
	t.slot_bytes = 1024;
	t.bsl_bits = 128;
	t.root = false;
	t.has_parent = true;
	t.parent = A("198.18.9.1:4791");
	t.parent_qpn = 0x305;
	t.deterministic = true;
	t.check_sender = false;
	t.auth = true;
	for (int i = 0; i < WIRE_AUTH_KEY_LEN; i++)
		t.auth_key[i] = (uint8_t)(i * 7 + 1);
	t.auth_key_id = 42;
	t.dtype_mask = 1u << 0 | 1u << 2;
	t.op_mask = 1u << 1;
	t.members = m;
	t.nmembers = 2;
	t.children = &ch;
	t.nchildren = 1;

	CHECK(round_trip(&t, CTL_YANG_SECRETS, &d, &e) == 0);
	ids[0] = 3, ids[1] = 4, ids[2] = 7;
	CHECK(ctl_tree_equal(&t, &d));
	CHECK(d.given & CTL_TF_BIT(CTL_TF_AUTH_KEY) && d.given & CTL_TF_BIT(CTL_TF_KEY));
	CHECK(ctl_tree_finish(&d, true, &e) == 0);
	ctl_tree_free(&d);

	/* A reply: no key, the rest the same. */
	CHECK(round_trip(&t, 0, &d, &e) == 0);
	CHECK(d.auth && d.auth_key_id == 42 && !(d.given & CTL_TF_BIT(CTL_TF_AUTH_KEY)));
	CHECK(!ctl_tree_equal(&t, &d));
	memset(t.auth_key, 0, sizeof t.auth_key);
	CHECK(ctl_tree_equal(&t, &d));
	ctl_tree_free(&d);

	/* Unauthenticated: "disabled" only when asked for. */
	t.auth = false;
	t.auth_key_id = 0;
	CHECK(round_trip(&t, CTL_YANG_AUTH_OFF, &d, &e) == 0);
	CHECK(!d.auth && d.given & CTL_TF_BIT(CTL_TF_AUTH));
	ctl_tree_free(&d);
	CHECK(round_trip(&t, 0, &d, &e) == 0);
	CHECK(!d.auth && !(d.given & CTL_TF_BIT(CTL_TF_AUTH)));
	ctl_tree_free(&d);
}

static void test_defaults_and_errors(void)
{
	static const char *xml =
		"<inca-switch xmlns=\"" CTL_YANG_NS "\"><trees><tree><id>6</id><key>1</key>"
		"<member><bfr-id>1</bfr-id><address>198.18.0.1</address></member>"
		"<member><bfr-id>2</bfr-id><address>198.18.0.2:99999</address></member>"
		"</tree></trees></inca-switch>";
	struct lyd_node *data = NULL, *tn = NULL;
	struct ctl_tree d;
	struct ctl_tree_err e;
	char *path;

	CHECK(!lyd_parse_data_mem(ly, xml, LYD_XML, LYD_PARSE_ONLY | LYD_PARSE_STRICT, 0, &data));
	if (!(tn = first_tree(data)))
		return;
	CHECK(ctl_tree_from_lyd(tn, &d, &e) < 0);
	CHECK(e.at == CTL_AT_MEMBER && e.index == 1);
	CHECK(!strcmp(e.msg, "bad address '198.18.0.2:99999' for 'member' (expected "
			     "a.b.c.d[:port])"));
	path = lyd_path(ctl_tree_err_node(tn, &e), LYD_PATH_STD, NULL, 0);
	CHECK(path && !strcmp(path, "/inca-switch:inca-switch/trees/tree[id='6']/member[bfr-id='2']"));
	free(path);
	lyd_free_all(data);

	/* Absent leaves take the model's defaults (a get-config reply is parsed without them). */
	data = NULL;
	CHECK(!lyd_parse_data_mem(ly,
				  "<inca-switch xmlns=\"" CTL_YANG_NS "\"><trees><tree><id>6</id>"
				  "<key>1</key><member><bfr-id>3</bfr-id><address>198.18.0.1"
				  "</address></member></tree></trees></inca-switch>",
				  LYD_XML, LYD_PARSE_ONLY | LYD_PARSE_STRICT, 0, &data));
	if (!(tn = first_tree(data)))
		return;
	CHECK(ctl_tree_from_lyd(tn, &d, &e) == 0);
	CHECK(d.id == 6 && d.slots == 256 && d.bsl_bits == 64 && d.root && d.check_sender);
	CHECK(d.nmembers == 1 && d.members[0].qpn == 0x1003);
	CHECK(ntohs(d.members[0].addr.sin_port) == 4791);
	CHECK(ctl_tree_finish(&d, false, &e) == 0 && d.qpn == 0x106);
	ctl_tree_free(&d);
	lyd_free_all(data);
}

int main(void)
{
	if (ly_ctx_new(NULL, LY_CTX_NO_YANGLIBRARY | LY_CTX_DISABLE_SEARCHDIR_CWD, &ly) ||
	    ctl_yang_load(ly) < 0) {
		fprintf(stderr, "cannot load the YANG modules\n");
		return 1;
	}
	test_round_trip();
	test_defaults_and_errors();
	ly_ctx_destroy(ly);
	if (failures) {
		fprintf(stderr, "tree_yang_test: %d failure(s)\n", failures);
		return 1;
	}
	printf("tree_yang_test: all passed\n");
	return 0;
}
