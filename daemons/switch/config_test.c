/* Unit tests for the inca-switch config parser: the documented example, defaults, the
 * flags-only --tree form, the dump round trip, and one reject case per error class (each must
 * name the right line). */
#include "config.h"
#include "util/test_check.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char example[] =
	"# comment\n"
	"listen = 127.0.0.1:4791\n"
	"threads = 2\n"
	"check_icrc = no            # yes|no, default yes\n"
	"stats_file = /tmp/stats.json   # optional\n"
	"stats_interval_ms = 500\n"
	"\n"
	"tree 1 {\n"
	"  key = 0x5eed0001          # R_Key\n"
	"  qpn = 0x101\n"
	"  slots = 128\n"
	"  slot_bytes = 1024\n"
	"  bsl = 64                  # bits\n"
	"  si = 0\n"
	"  role = root               # root | leaf\n"
	"  bfr_id = 0\n"
	"  deterministic = yes\n"
	"  member = 1 127.0.0.10:4791 qpn 0x1001\n"
	"  member = 2 127.0.0.11\n"
	"  child = 127.0.0.2:4791 qpn 0x101 bfr 3-4,7\n"
	"  auth = off\n"
	"}\n"
	"tree 2 {\n"
	"  key = 7\n"
	"  role = leaf\n"
	"  bfr_id = 9\n"
	"  parent = 127.0.0.1:4792 qpn 0x102\n"
	"  member = 1 127.0.0.10:4791\n"
	"  auth = off\n"
	"}\n";

static int parse(struct sw_config *c, const char *text, char *err)
{
	sw_config_init(c);
	err[0] = 0;
	return sw_config_parse_text(c, text, strlen(text), "t.conf", err, SW_CONF_ERR_MAX);
}

static void test_example(void)
{
	struct sw_config c;
	char err[SW_CONF_ERR_MAX];
	const struct ctl_tree *t;

	CHECK_EQ(parse(&c, example, err), 0);
	if (err[0])
		fprintf(stderr, "unexpected error: %s\n", err);
	CHECK_EQ(ntohl(c.listen.sin_addr.s_addr), 0x7f000001);
	CHECK_EQ(ntohs(c.listen.sin_port), 4791);
	CHECK_EQ(c.threads, 2);
	CHECK(!c.check_icrc);
	CHECK(!strcmp(c.stats_file, "/tmp/stats.json"));
	CHECK_EQ(c.stats_interval_ms, 500);
	CHECK_EQ(c.ntrees, 2);
	t = sw_config_find_tree(&c, 1);
	CHECK(t != NULL);
	if (t) {
		CHECK_EQ(t->key, 0x5eed0001);
		CHECK_EQ(t->qpn, 0x101);
		CHECK_EQ(t->slots, 128);
		CHECK_EQ(t->slot_bytes, 1024);
		CHECK_EQ(t->bsl_bits, 64);
		CHECK(t->root);
		CHECK(t->deterministic);
		CHECK(t->check_sender);
		CHECK_EQ(t->nmembers, 2);
		CHECK_EQ(t->members[0].bfr_id, 1);
		CHECK_EQ(t->members[0].qpn, 0x1001);
		CHECK_EQ(t->members[1].qpn, 0x1002); /* default 0x1000 + bfr */
		CHECK_EQ(ntohs(t->members[1].addr.sin_port), 4791); /* bare address */
		CHECK_EQ(ntohl(t->members[1].addr.sin_addr.s_addr), 0x7f00000b);
		CHECK_EQ(t->nchildren, 1);
		CHECK_EQ(t->children[0].nbfr, 3);
		CHECK_EQ(t->children[0].bfr_ids[0], 3);
		CHECK_EQ(t->children[0].bfr_ids[1], 4);
		CHECK_EQ(t->children[0].bfr_ids[2], 7);
		CHECK(ctl_tree_covers(t, 7));
		CHECK(ctl_tree_covers(t, 2));
		CHECK(!ctl_tree_covers(t, 5));
	}
	t = sw_config_find_tree(&c, 2);
	CHECK(t != NULL);
	if (t) {
		CHECK(!t->root);
		CHECK(t->has_parent);
		CHECK_EQ(t->parent_qpn, 0x102);
		CHECK_EQ(ntohs(t->parent.sin_port), 4792);
		CHECK_EQ(t->qpn, 0x102); /* default 0x100 + id */
		CHECK_EQ(t->slots, 256);
		CHECK_EQ(t->slot_bytes, 4096);
		CHECK_EQ(t->bfr_id, 9);
	}
	CHECK_EQ(sw_config_validate(&c, err, sizeof err), 0);

	/* The dump parses back to the same configuration. */
	{
		char *buf = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&buf, &n);
		struct sw_config c2;
		sw_config_dump(&c, f);
		fclose(f);
		sw_config_init(&c2);
		CHECK_EQ(sw_config_parse_text(&c2, buf, n, "dump", err, sizeof err), 0);
		CHECK_EQ(c2.ntrees, 2);
		CHECK_EQ(c2.threads, 2);
		CHECK(!c2.check_icrc);
		CHECK_EQ(c2.trees[0].children[0].nbfr, 3);
		CHECK_EQ(c2.trees[0].members[1].qpn, 0x1002);
		CHECK(c2.trees[0].deterministic);
		CHECK_EQ(c2.trees[1].parent_qpn, 0x102);
		sw_config_free(&c2);
		free(buf);
	}
	sw_config_free(&c);
}

static void test_defaults(void)
{
	struct sw_config c;
	char err[SW_CONF_ERR_MAX];

	CHECK_EQ(parse(&c, "tree 5 {\nkey = 1\nmember = 64 127.0.0.1\nauth = off\n}\n", err), 0);
	CHECK_EQ(c.threads, 1);
	CHECK(c.check_icrc);
	CHECK_EQ(c.stats_interval_ms, 1000);
	CHECK_EQ(c.listen.sin_addr.s_addr, 0);
	CHECK_EQ(ntohs(c.listen.sin_port), 4791);
	CHECK_EQ(c.trees[0].qpn, 0x105);
	CHECK(c.trees[0].root);
	CHECK_EQ(c.trees[0].members[0].qpn, 0x1040);
	CHECK_EQ(c.trees[0].pkey, 0xFFFF);
	sw_config_free(&c);
	/* a tree P_Key; 0 and 0x8000 are not P_Keys */
	CHECK_EQ(parse(&c, "tree 5 {\nkey = 1\npkey = 0x8001\nmember = 64 127.0.0.1\nauth = off\n}\n", err), 0);
	CHECK_EQ(c.trees[0].pkey, 0x8001);
	sw_config_free(&c);
	CHECK(parse(&c, "tree 5 {\nkey = 1\npkey = 0x8000\nmember = 64 127.0.0.1\nauth = off\n}\n", err) < 0);
	CHECK(strstr(err, "not a valid P_Key") != NULL);
	sw_config_free(&c);
	CHECK(parse(&c, "tree 5 {\nkey = 1\npkey = 0\nmember = 64 127.0.0.1\nauth = off\n}\n", err) < 0);
	sw_config_free(&c);
	CHECK_EQ(parse(&c, "tree 5 {\nkey = 1\nmember = 64 127.0.0.1\nauth = off\n}\n", err), 0);
	/* "010" is decimal ten, not octal. */
	sw_config_free(&c);
	CHECK_EQ(parse(&c, "threads = 010\ntree 5 {\nkey = 1\nmember = 1 127.0.0.1\nauth = off\n}\n", err), 0);
	CHECK_EQ(c.threads, 10);
	sw_config_free(&c);
	/* si 1 with bsl 64 covers 65..128. */
	CHECK_EQ(parse(&c, "tree 1 {\nkey=1\nsi=1\nmember = 65 127.0.0.1\nmember = 128 127.0.0.2\nauth = off\n}\n",
		       err), 0);
	sw_config_free(&c);
	CHECK_EQ(sw_config_validate(&c, err, sizeof err) < 0, 1); /* no trees */
}

/* Control-plane keys (docs/netconf.md): identity, limits, links, per-tree type masks. */
static void test_control_plane(void)
{
	struct sw_config c, c2;
	char err[SW_CONF_ERR_MAX];
	char *buf = NULL;
	size_t n = 0;
	FILE *f;

	CHECK_EQ(parse(&c, "name = leaf1\nrole = spine\nmax_trees = 3\nmax_slots = 100\n"
			   "mgmt_addr = ssh://198.18.0.1:830\n"
			   "link = eth1 peer spine1 peer_addr 127.0.0.9:4792 speed 1G\n"
			   "link = eth2 peer h2 speed 100M down\n"
			   "tree 1 {\nkey = 1\nslots = 60\ndtypes = fp32+int32\nops = sum,max\n"
			   "member = 1 127.0.0.1\nauth = off\n}\n",
		       err),
		 0);
	CHECK(!strcmp(c.name, "leaf1"));
	CHECK(!strcmp(c.role_hint, "spine"));
	CHECK_EQ(c.max_trees, 3);
	CHECK_EQ(c.max_slots, 100);
	CHECK_EQ(c.nmgmt, 1);
	CHECK_EQ(c.nlinks, 2);
	CHECK(!strcmp(c.links[0].peer, "spine1"));
	CHECK(c.links[0].has_peer_addr && ntohs(c.links[0].peer_addr.sin_port) == 4792);
	CHECK_EQ(c.links[0].speed_bps, 1000000000ull);
	CHECK(c.links[0].up && !c.links[1].up && !c.links[1].has_peer_addr);
	CHECK_EQ(c.trees[0].dtype_mask, (1u << 10) | (1u << 4));
	CHECK_EQ(c.trees[0].op_mask, (1u << 0) | (1u << 3));
	CHECK_EQ(sw_config_validate(&c, err, sizeof err), 0);
	/* Dump round trip. */
	f = open_memstream(&buf, &n);
	sw_config_dump(&c, f);
	fclose(f);
	CHECK_EQ(parse(&c2, buf, err), 0);
	CHECK(!strcmp(c2.name, "leaf1") && c2.nlinks == 2 && c2.max_slots == 100);
	CHECK(ctl_tree_equal(&c.trees[0], &c2.trees[0]));
	sw_config_free(&c2);
	free(buf);
	/* Limits: a second tree of 60 slots exceeds max_slots 100. */
	{
		static const char t2[] = "tree 2 {\nkey = 2\nslots = 60\nmember = 1 127.0.0.2\nauth = off\n}\n";
		CHECK_EQ(sw_config_parse_text(&c, t2, strlen(t2), "t2", err, sizeof err), 0);
	}
	CHECK(sw_config_validate(&c, err, sizeof err) < 0);
	CHECK(strstr(err, "max_slots") != NULL);
	/* Deep copy and equality. */
	{
		struct ctl_tree t;
		CHECK_EQ(ctl_tree_copy(&t, &c.trees[1]), 0);
		CHECK(ctl_tree_equal(&t, &c.trees[1]));
		CHECK(!ctl_tree_equal(&t, &c.trees[0]));
		t.members[0].qpn++;
		CHECK(!ctl_tree_equal(&t, &c.trees[1]));
		ctl_tree_free(&t);
	}
	sw_config_free(&c);
	/* With NETCONF a switch may start without trees. */
	sw_config_init(&c);
	c.allow_no_trees = true;
	CHECK_EQ(sw_config_validate(&c, err, sizeof err), 0);
	sw_config_free(&c);
}

static void test_spec(void)
{
	struct sw_config c;
	char err[SW_CONF_ERR_MAX] = "";
	const struct ctl_tree *t;

	sw_config_init(&c);
	CHECK_EQ(sw_config_add_tree_spec(&c,
					 "auth=off,id=1,key=0x5eed0001,slots=256,"
					 "members=1@127.0.0.10:4791+2@127.0.0.11:4791/0x2222",
					 err, sizeof err),
		 0);
	if (err[0])
		fprintf(stderr, "unexpected error: %s\n", err);
	t = sw_config_find_tree(&c, 1);
	CHECK(t != NULL);
	if (t) {
		CHECK_EQ(t->key, 0x5eed0001);
		CHECK_EQ(t->qpn, 0x101);
		CHECK_EQ(t->nmembers, 2);
		CHECK_EQ(t->members[0].qpn, 0x1001);
		CHECK_EQ(t->members[1].qpn, 0x2222);
	}
	CHECK_EQ(sw_config_add_tree_spec(&c,
					 "auth=off,id=2,key=3,role=leaf,bfr_id=4,parent=127.0.0.1:4792/0x300,"
					 "child=127.0.0.3:4791/5-6+9,member=1@127.0.0.10",
					 err, sizeof err),
		 0);
	t = sw_config_find_tree(&c, 2);
	CHECK(t != NULL);
	if (t) {
		CHECK(!t->root);
		CHECK_EQ(t->parent_qpn, 0x300);
		CHECK_EQ(t->nchildren, 1);
		CHECK_EQ(t->children[0].nbfr, 3);
		CHECK_EQ(t->children[0].qpn, 0x102);
	}
	/* Duplicate id across flags. */
	CHECK(sw_config_add_tree_spec(&c, "auth=off,id=2,key=1,members=1@127.0.0.10", err, sizeof err) < 0);
	CHECK(strstr(err, "duplicate tree 2") != NULL);
	CHECK(sw_config_add_tree_spec(&c, "auth=off,key=1,members=1@127.0.0.10", err, sizeof err) < 0);
	CHECK(strstr(err, "missing id") != NULL);
	CHECK(sw_config_add_tree_spec(&c, "auth=off,id=9,key=1,members=1-127.0.0.10", err, sizeof err) < 0);
	CHECK(strstr(err, "bad member") != NULL);
	CHECK(sw_config_add_tree_spec(&c, "auth=off,id=9,members=1@127.0.0.10", err, sizeof err) < 0);
	CHECK(strstr(err, "missing key") != NULL);
	sw_config_free(&c);

	sw_config_init(&c);
	CHECK_EQ(sw_config_set_global(&c, "threads", "4", err, sizeof err), 0);
	CHECK_EQ(c.threads, 4);
	CHECK(sw_config_set_global(&c, "threads", "0", err, sizeof err) < 0);
	CHECK(strstr(err, "--threads") != NULL);
	CHECK(sw_config_set_global(&c, "listen", "1.2.3", err, sizeof err) < 0);
	sw_config_free(&c);
}

struct reject {
	const char *text;
	const char *want; /* substring of the message, including "t.conf:LINE:" */
};

static const struct reject rejects[] = {
	{ "tree 1 {\n key = 1\n auth_key = 00ff\n member = 1 127.0.0.1:4791\n}\n",
	  "t.conf:3: tree 1: auth_key has 4 hex digits, expected 64" },
	{ "tree 1 {\n key = 1\n auth = on\n member = 1 127.0.0.1:4791\n}\n",
	  "tree 1: no data-plane key" },
	{ "tree 1 {\n key = 1\n auth = maybe\n member = 1 127.0.0.1:4791\n}\n",
	  "bad value 'maybe' for 'auth'" },
	{ "link = eth1 peer a\nlink = eth1 peer b\n", "t.conf:2: link eth1: port listed twice" },
	{ "link = eth1 speed fast\n", "t.conf:1: link eth1: bad speed 'fast'" },
	{ "link = eth1 colour blue\n", "t.conf:1: link eth1: unknown option 'colour'" },
	{ "link = eth1 peer_addr 1.2.3\n", "t.conf:1: bad address" },
	{ "name = a b\n", "t.conf:1: name 'a b': bad character" },
	{ "role = core\n", "t.conf:1: bad role 'core'" },
	{ "max_trees = 0\n", "t.conf:1: value '0' for 'max_trees' out of range" },
	{ "tree 1 {\nkey = 1\ndtypes = fp32,fp128\n", "t.conf:3: unknown name 'fp128'" },
	{ "bogus = 1\n", "t.conf:1: unknown key 'bogus'" },
	{ "\nthreads = many\n", "t.conf:2: bad value 'many' for 'threads'" },
	{ "threads = 0\n", "t.conf:1: value '0' for 'threads' out of range" },
	{ "threads = 99999999999999999999999\n", "out of range" },
	{ "listen = 1.2.3.4:99999\n", "t.conf:1: bad address" },
	{ "check_icrc = maybe\n", "t.conf:1: bad value 'maybe'" },
	{ "threads = 1\nthreads = 2\n", "t.conf:2: duplicate key 'threads'" },
	{ "threads\n", "t.conf:1: expected 'key = value'" },
	{ "threads =\n", "t.conf:1: missing value" },
	{ "= 3\n", "t.conf:1: missing key" },
	{ "}\n", "t.conf:1: '}' without an open tree" },
	{ "tree x {\nauth = off\n}\n", "t.conf:1: bad value 'x' for 'tree id'" },
	{ "tree 1\n", "t.conf:1: expected 'tree <id> {'" },
	{ "tree 1 {\nkey = 1\nmember = 1 127.0.0.1\n", "t.conf:1: tree 1: missing '}'" },
	{ "tree 1 {\nkey = 1\ntree 2 {\n", "t.conf:3: tree inside tree 1" },
	{ "tree 1 {\nmember = 1 127.0.0.1\nauth = off\n}\n", "t.conf:1: tree 1: missing key" },
	{ "tree 1 {\nkey = 1\nkey = 2\nauth = off\n}\n", "t.conf:3: duplicate key 'key' in tree 1" },
	{ "tree 1 {\nkey = 1\nfoo = 2\nauth = off\n}\n", "t.conf:3: unknown tree key 'foo'" },
	{ "tree 1 {\nkey = 1\nauth = off\n}\n", "t.conf:1: tree 1: no members or children" },
	{ "tree 1 {\nkey=1\nmember = 1 127.0.0.1\nauth = off\n}\ntree 1 {\n",
	  "t.conf:6: duplicate tree 1 (first defined at line 1)" },
	{ "tree 1 {\nkey=1\nmember = 65 127.0.0.1\nauth = off\n}\n",
	  "t.conf:3: tree 1: member BFR-id 65 outside the BSL range of si 0 (1..64)" },
	{ "tree 1 {\nkey=1\nsi=1\nmember = 64 127.0.0.1\nauth = off\n}\n", "t.conf:4: tree 1: member BFR-id 64" },
	{ "tree 1 {\nkey=1\nmember = 0 127.0.0.1\nauth = off\n}\n", "t.conf:3: value '0' for 'member BFR-id'" },
	{ "tree 1 {\nkey=1\nmember = 1 127.0.0.1\nmember = 1 127.0.0.2\nauth = off\n}\n",
	  "t.conf:4: tree 1: BFR-id 1 used twice" },
	{ "tree 1 {\nkey=1\nmember = 1 127.0.0.1\nchild = 127.0.0.2 bfr 2-5,1\nauth = off\n}\n",
	  "t.conf:4: tree 1: BFR-id 1 used twice" },
	{ "tree 1 {\nkey=1\nmember = 1 127.0.0.1\nmember = 2 127.0.0.1:4791\nauth = off\n}\n",
	  "t.conf:4: tree 1: address 127.0.0.1:4791 used by two neighbours" },
	{ "tree 1 {\nkey=1\nmember = 1 127.0.0.1 qpx 3\nauth = off\n}\n", "t.conf:3: bad member option 'qpx'" },
	{ "tree 1 {\nkey=1\nmember = 1\nauth = off\n}\n", "t.conf:3: bad member" },
	{ "tree 1 {\nkey=1\nmember = 1 300.0.0.1\nauth = off\n}\n", "t.conf:3: bad address '300.0.0.1'" },
	{ "tree 1 {\nkey=1\nmember = 1 127.0.0.1 qpn 0x1000000\nauth = off\n}\n", "t.conf:3: value '0x1000000'" },
	{ "tree 1 {\nkey=1\nchild = 127.0.0.2 qpn 5\nauth = off\n}\n", "t.conf:3: child without 'bfr LIST'" },
	{ "tree 1 {\nkey=1\nchild = 127.0.0.2 bfr 4-2\nauth = off\n}\n", "t.conf:3: bad BFR-id list '4-2'" },
	{ "tree 1 {\nkey=1\nchild = 127.0.0.2 bfr 2,2\nauth = off\n}\n", "t.conf:3: BFR-id 2 listed twice" },
	{ "tree 1 {\nkey=1\nchild = 127.0.0.2 bfr 70\nauth = off\n}\n", "t.conf:3: tree 1: child BFR-id 70" },
	{ "tree 1 {\nkey=1\nbsl = 100\nmember = 1 127.0.0.1\nauth = off\n}\n", "t.conf:3: bsl 100 is not a power" },
	{ "tree 1 {\nkey=1\nbsl = 8192\nauth = off\n}\n", "t.conf:3: value '8192' for 'bsl' out of range" },
	{ "tree 1 {\nkey=1\nslots = 0\nauth = off\n}\n", "t.conf:3: value '0' for 'slots'" },
	{ "tree 1 {\nkey=1\nslot_bytes = 4097\nauth = off\n}\n", "t.conf:3: value '4097' for 'slot_bytes'" },
	{ "tree 1 {\nkey=1\nrole = spine\nauth = off\n}\n", "t.conf:3: bad role 'spine'" },
	{ "tree 1 {\nkey=1\nrole = leaf\nmember = 1 127.0.0.1\nauth = off\n}\n",
	  "t.conf:1: tree 1: role leaf needs a parent" },
	{ "tree 1 {\nkey=1\nparent = 127.0.0.9\nmember = 1 127.0.0.1\nauth = off\n}\n",
	  "t.conf:1: tree 1: parent given but role is root" },
	{ "tree 1 {\nkey=1\nrole=leaf\nparent = 127.0.0.1\nmember = 1 127.0.0.1\nauth = off\n}\n",
	  "address 127.0.0.1:4791 used by two neighbours" },
	{ "tree 1 {\nkey=0x1ffffffff\nauth = off\n}\n", "t.conf:2: value '0x1ffffffff' for 'key' out of range" },
	{ "tree 1 {\nkey=1\ndeterministic = sometimes\nauth = off\n}\n", "t.conf:3: bad value 'sometimes'" },
	{ "tree 1 {\nkey=1\nsi=255\nbsl=4096\nmember = 1 127.0.0.1\nauth = off\n}\n",
	  "t.conf:1: tree 1: si 255 with bsl 4096 has no valid BFR-ids" },
	/* data-plane authentication keys */
	{ "tree 1 {\nkey=1\nauth_key = 0011\nauth_key_id = 1\nmember = 1 127.0.0.1\n}\n",
	  "t.conf:3: tree 1: auth_key has 4 hex digits, expected 64 (32 bytes)" },
	{ "tree 1 {\nkey=1\nauth_key = 00112233445566778899aabbccddeeff0123456789ABCDEFfedcba987654321000\nauth_key_id = 1\n}\n",
	  "t.conf:3: tree 1: auth_key has 66 hex digits, expected 64" },
	{ "tree 1 {\nkey=1\nmember = 1 127.0.0.1\nauth_key = 0011223344g566778899aabbccddeeff0123456789ABCDEFfedcba9876543210\n}\n",
	  "t.conf:4: tree 1: auth_key: 'g' at digit 11 is not hex" },
	{ "tree 1 {\nkey=1\nauth_key_id = 0\n}\n", "t.conf:3: value '0' for 'auth_key_id'" },
	{ "tree 1 {\nkey=1\nauth = maybe\n}\n", "t.conf:3: bad value 'maybe' for 'auth'" },
	{ "tree 1 {\nkey=1\nauth = off\nauth = off\n}\n", "t.conf:4: duplicate key 'auth'" },
	{ "tree 1 {\nkey=1\nauth_key = 00112233445566778899aabbccddeeff0123456789ABCDEFfedcba9876543210\nmember = 1 127.0.0.1\n}\n",
	  "t.conf:1: tree 1: auth_key and auth_key_id go together (missing auth_key_id)" },
	{ "tree 1 {\nkey=1\nauth_key_id = 5\nmember = 1 127.0.0.1\n}\n",
	  "t.conf:1: tree 1: auth_key and auth_key_id go together (missing auth_key)" },
	{ "tree 1 {\nkey=1\nauth = off\nauth_key = 00112233445566778899aabbccddeeff0123456789ABCDEFfedcba9876543210\nauth_key_id = 5\nmember = 1 127.0.0.1\n}\n",
	  "t.conf:1: tree 1: auth = off together with auth_key/auth_key_id" },
	{ "tree 1 {\nkey=1\nauth = on\nmember = 1 127.0.0.1\n}\n",
	  "t.conf:1: tree 1: no data-plane key: set auth_key = <64 hex digits> and auth_key_id = "
	  "<n>, or auth = off" },
};

static const uint8_t auth_key_bytes[WIRE_AUTH_KEY_LEN] = {
	0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
	0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10,
};

/* auth_key / auth_key_id / auth = off in the file and the --tree form; the dump round trip
 * keeps them; a tree with neither is refused exactly when sw_config_auth_required(). */
static void test_auth(void)
{
	static const char text[] = "tree 1 {\n"
				   "  key = 1\n"
				   "  auth_key = 00112233445566778899aabbccddeeff0123456789ABCDEFfedcba9876543210\n"
				   "  auth_key_id = 77\n"
				   "  member = 1 127.0.0.1\n"
				   "}\n"
				   "tree 2 {\n"
				   "  key = 2\n"
				   "  auth = off\n"
				   "  member = 1 127.0.0.1\n"
				   "}\n";
	struct sw_config c, c2;
	char err[SW_CONF_ERR_MAX] = "", *buf = NULL;
	size_t n = 0;
	const struct ctl_tree *t;
	FILE *f;

	CHECK_EQ(parse(&c, text, err), 0);
	if (err[0])
		fprintf(stderr, "unexpected error: %s\n", err);
	t = sw_config_find_tree(&c, 1);
	CHECK(t && t->auth && t->auth_key_id == 77 &&
	      !memcmp(t->auth_key, auth_key_bytes, WIRE_AUTH_KEY_LEN));
	t = sw_config_find_tree(&c, 2);
	CHECK(t && !t->auth && t->auth_key_id == 0);
	f = open_memstream(&buf, &n);
	sw_config_dump(&c, f);
	fclose(f);
	sw_config_init(&c2);
	CHECK_EQ(sw_config_parse_text(&c2, buf, n, "dump", err, sizeof err), 0);
	CHECK(c2.ntrees == 2 && ctl_tree_equal(&c.trees[0], &c2.trees[0]) &&
	      ctl_tree_equal(&c.trees[1], &c2.trees[1]));
	CHECK(strstr(buf, "auth = off") != NULL);
	free(buf);
	sw_config_free(&c2);
	/* a different key or id is a different tree configuration */
	{
		struct ctl_tree x;
		CHECK_EQ(ctl_tree_copy(&x, &c.trees[0]), 0);
		CHECK(ctl_tree_equal(&x, &c.trees[0]));
		x.auth_key[31] ^= 1;
		CHECK(!ctl_tree_equal(&x, &c.trees[0]));
		x.auth_key[31] ^= 1;
		x.auth_key_id++;
		CHECK(!ctl_tree_equal(&x, &c.trees[0]));
		ctl_tree_free(&x);
	}
	sw_config_free(&c);

	sw_config_init(&c);
	CHECK_EQ(sw_config_add_tree_spec(&c, "id=3,key=3,members=1@127.0.0.10,auth_key=0x00112233445566778899aabbccddeeff0123456789ABCDEFfedcba9876543210,auth_key_id=9",
					 err, sizeof err), 0);
	CHECK_EQ(sw_config_add_tree_spec(&c, "id=4,key=4,members=1@127.0.0.10,auth=off", err,
					 sizeof err), 0);
	t = sw_config_find_tree(&c, 3);
	CHECK(t && t->auth && t->auth_key_id == 9 &&
	      !memcmp(t->auth_key, auth_key_bytes, WIRE_AUTH_KEY_LEN));
	t = sw_config_find_tree(&c, 4);
	CHECK(t && !t->auth);
	CHECK(sw_config_add_tree_spec(&c, "id=5,key=4,members=1@127.0.0.10,auth_key=12", err,
				      sizeof err) < 0);
	CHECK(strstr(err, "--tree: tree 5: auth_key has 2 hex digits, expected 64") != NULL);
	/* neither a key nor auth = off: refused in both forms, naming the tree and the fix */
	err[0] = 0;
	CHECK(sw_config_auth_required());
	CHECK(sw_config_add_tree_spec(&c, "id=6,key=4,members=1@127.0.0.10", err, sizeof err) < 0);
	CHECK(strstr(err, "tree 6: no data-plane key") != NULL &&
	      strstr(err, "auth = off") != NULL);
	CHECK(sw_config_find_tree(&c, 6) == NULL);
	{
		static const char none[] = "tree 12 {\n key = 1\n member = 1 127.0.0.1\n}\n";
		CHECK(sw_config_parse_text(&c, none, strlen(none), "n.conf", err, sizeof err) < 0);
		CHECK(strstr(err, "n.conf:1: tree 12: no data-plane key: set auth_key") != NULL);
	}
	sw_config_free(&c);
}

static void test_rejects(void)
{
	for (size_t i = 0; i < sizeof rejects / sizeof rejects[0]; i++) {
		struct sw_config c;
		char err[SW_CONF_ERR_MAX];
		int rc = parse(&c, rejects[i].text, err);

		CHECK_MSG(rc < 0 && strstr(err, rejects[i].want),
			  "reject case %zu: rc %d, message '%s', wanted '%s'", i, rc, err,
			  rejects[i].want);
		sw_config_free(&c);
	}
}

static void test_file(void)
{
	struct sw_config c;
	char err[SW_CONF_ERR_MAX];
	char path[] = "/tmp/inca-sw-conf-XXXXXX";
	int fd = mkstemp(path);
	FILE *f;

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	f = fdopen(fd, "w");
	fputs(example, f);
	fputs("tree 1 {\n", f); /* duplicate on line 31 */
	fclose(f);
	sw_config_init(&c);
	CHECK(sw_config_parse_file(&c, path, err, sizeof err) < 0);
	{
		char want[128];
		snprintf(want, sizeof want, "%s:31: duplicate tree 1", path);
		CHECK(strstr(err, want) != NULL);
		if (!strstr(err, want))
			fprintf(stderr, "got '%s'\n", err);
	}
	sw_config_free(&c);
	unlink(path);
	sw_config_init(&c);
	CHECK(sw_config_parse_file(&c, "/nonexistent/inca.conf", err, sizeof err) < 0);
	CHECK(strstr(err, "/nonexistent/inca.conf: cannot open") != NULL);
	sw_config_free(&c);
}

int main(void)
{
	test_example();
	test_defaults();
	test_spec();
	test_auth();
	test_control_plane();
	test_rejects();
	test_file();
	printf("config_test: all passed\n");
	return 0;
}
