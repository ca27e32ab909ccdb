/* NETCONF tests against the real inca-switch over its UNIX socket (suite 'netconf'):
 *   ctl   - lib/ctl client: capabilities and links, put a tree, a 2-rank libinca AllReduce
 *           through it while other trees are added and removed (tree-set swaps under
 *           traffic), statistics, refused edits (semantic, YANG, capacity) leave the running
 *           config unchanged, delete.
 *   fuzz  - raw NETCONF 1.0 sessions sending malformed / hostile edit-configs: each must be
 *           refused (or the session dropped), the switch must survive and keep its config.
 *   stall - UNIX socket and SSH: a TCP connection that stops after the SSH banner and a UNIX
 *           connection that never sends <hello> must not hold up an established session, a
 *           new UNIX session or a new SSH session, and SIGTERM must not wait for them.
 * Addresses: 127.0.4.x (ctl: switch .1, members .10/.11; stall: switch and SSH on .50; fuzz:
 * switch .51).
 * Exits 77 when the binary has no NETCONF. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "util/util.h"
#include "inca/inca.h"
#include "util/test_check.h"

static char g_dir[256], g_sock[300], g_ready[300];
static pid_t g_pid;
static char g_ssh_addr[64]; /* "IP:PORT" of the SSH endpoint, "" = none */

static void cleanup(void)
{
	char cmd[600];

	if (g_pid > 0) {
		kill(g_pid, SIGTERM);
		waitpid(g_pid, NULL, 0);
		g_pid = 0;
	}
	if (g_dir[0]) {
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", g_dir);
	}
}

static void msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Make the SSH host key and a client key (authorised) in g_dir; false without ssh-keygen. */
static bool make_ssh_keys(void)
{
	char cmd[900];

	snprintf(cmd, sizeof cmd,
		 "ssh-keygen -q -t ed25519 -N '' -C host -f '%s/hostkey' </dev/null >/dev/null 2>&1 "
		 "&& ssh-keygen -q -t ed25519 -N '' -C client -f '%s/client' </dev/null >/dev/null "
		 "2>&1",
		 g_dir, g_dir);
	return system(cmd) == 0;
}

/* A TCP port on ip that is free now (the switch binds it right after). */
static int free_tcp_port(const char *ip)
{
	for (int i = 0; i < 50; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

		CHECK(fd >= 0);
		port = 20000 + (int)(((unsigned)getpid() * 7919u + (unsigned)i * 104729u) % 40000u);
		a.sin_port = htons((uint16_t)port);
		CHECK(inet_pton(AF_INET, ip, &a.sin_addr) == 1);
		if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0) {
			close(fd);
			return port;
		}
		close(fd);
	}
	return -1;
}

/* Start inca-switch with NETCONF on a UNIX socket (and, with ssh_ip, over SSH on a free port of
 * ssh_ip with keys made here); data plane on listen. 77 if it was built without NETCONF (or,
 * with ssh_ip, when ssh-keygen is missing). */
static void start_switch(const char *exe, const char *listen, const char *ssh_ip)
{
	char conf[320], log[320], hostkey[320], authkeys[320];
	FILE *f;

	snprintf(g_dir, sizeof g_dir, "/tmp/inca-nctest.XXXXXX");
	CHECK(mkdtemp(g_dir));
	snprintf(g_sock, sizeof g_sock, "%s/sw.sock", g_dir);
	snprintf(g_ready, sizeof g_ready, "%s/ready", g_dir);
	snprintf(conf, sizeof conf, "%s/sw.conf", g_dir);
	snprintf(log, sizeof log, "%s/sw.log", g_dir);
	snprintf(hostkey, sizeof hostkey, "%s/hostkey", g_dir);
	snprintf(authkeys, sizeof authkeys, "%s/client.pub", g_dir);
	if (ssh_ip) {
		int port;

		if (!make_ssh_keys()) {
			fprintf(stderr, "ssh-keygen missing or failing: skip\n");
			cleanup();
			exit(77);
		}
		port = free_tcp_port(ssh_ip);
		CHECK(port > 0);
		snprintf(g_ssh_addr, sizeof g_ssh_addr, "%s:%d", ssh_ip, port);
	}
	f = fopen(conf, "w");
	CHECK(f);
	fprintf(f, "listen = %s\n"
		   "threads = 2\n"
		   "stats_file = %s/stats.json\n"
		   "stats_interval_ms = 0\n"
		   "name = leaf7\n"
		   "role = leaf\n"
		   "max_trees = 2\n"
		   "max_slots = 512\n"
		   "mgmt_addr = unix:%s\n"
		   "link = eth1 peer spine1 peer_addr 127.0.4.2:4791 speed 1G\n"
		   "link = eth2 peer host10 peer_addr 127.0.4.10:4791 speed 10G\n"
		   "link = eth3 peer host11 speed 100M down\n",
		listen, g_dir, g_sock);
	fclose(f);
	fflush(NULL);
	g_pid = fork();
	CHECK(g_pid >= 0);
	if (g_pid == 0) {
		FILE *lf = freopen(log, "w", stderr);
		(void)lf;
		prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive a crashed test */
		if (ssh_ip)
			execl(exe, exe, "-c", conf, "--netconf-unix", g_sock, "--netconf-ssh",
			      g_ssh_addr, "--netconf-hostkey", hostkey, "--netconf-authorized-keys",
			      authkeys, "--ready-file", g_ready, "-v", (char *)NULL);
		else
			execl(exe, exe, "-c", conf, "--netconf-unix", g_sock, "--ready-file", g_ready,
			      "-v", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 400; i++) {
		int st;
		if (access(g_ready, F_OK) == 0)
			return;
		if (waitpid(g_pid, &st, WNOHANG) == g_pid) {
			g_pid = 0;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 2) {
				char cmd[400];
				snprintf(cmd, sizeof cmd, "grep -q 'without NETCONF' '%s'", log);
				if (system(cmd) == 0) {
					fprintf(stderr, "inca-switch has no NETCONF: skip\n");
					cleanup();
					exit(77);
				}
			}
			fprintf(stderr, "inca-switch exited early (status %d)\n", st);
			cleanup();
			exit(1);
		}
		msleep(25);
	}
	fprintf(stderr, "inca-switch did not become ready\n");
	cleanup();
	exit(1);
}

static bool switch_alive(void)
{
	return g_pid > 0 && waitpid(g_pid, NULL, WNOHANG) == 0;
}

static struct ctl_conn *connect_unix(void)
{
	char target[320];
	struct ctl_conn *c = NULL;
	int rc;

	snprintf(target, sizeof target, "unix:%s", g_sock);
	rc = ctl_connect(target, NULL, NULL, &c);
	if (rc < 0)
		fprintf(stderr, "ctl_connect: %d %s\n", rc, ctl_conn_error(NULL));
	CHECK(rc == 0);
	return c;
}

static void free_trees(struct ctl_tree *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ctl_tree_free(&v[i]);
	free(v);
}

/* The model holds parsed addresses; the tests write and compare them as text. */
static struct sockaddr_in A(const char *s)
{
	struct sockaddr_in a;

	CHECK(util_parse_addr(s, 4791, &a) == 0);
	return a;
}

static const char *S(const struct sockaddr_in *a)
{
	static char buf[4][32];
	static unsigned n;

	return util_format_addr(a, buf[n++ % 4], sizeof buf[0]);
}

/* The running trees as one comparable string. */
static char *trees_fingerprint(struct ctl_conn *c)
{
	struct ctl_tree *v = NULL;
	size_t n = 0;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	CHECK_EQ(ctl_get_trees(c, &v, &n), 0);
	f = open_memstream(&buf, &len);
	CHECK(f);
	for (size_t i = 0; i < n; i++) {
		const struct ctl_tree *t = &v[i];
		fprintf(f, "tree %u key %u qpn %u slots %u sb %u bsl %u si %u root %d bfr %u p %d %s %u "
			   "det %d dt %x op %x |",
			t->id, t->key, t->qpn, t->slots, t->slot_bytes, t->bsl_bits, t->si, t->root,
			t->bfr_id, t->has_parent, t->has_parent ? S(&t->parent) : "", t->parent_qpn, t->deterministic,
			t->dtype_mask, t->op_mask);
		for (size_t j = 0; j < t->nmembers; j++)
			fprintf(f, " m%u@%s/%u", t->members[j].bfr_id, S(&t->members[j].addr),
				t->members[j].qpn);
		for (size_t j = 0; j < t->nchildren; j++) {
			fprintf(f, " c%s/%u:", S(&t->children[j].addr), t->children[j].qpn);
			for (size_t k = 0; k < t->children[j].nbfr; k++)
				fprintf(f, "%u,", t->children[j].bfr_ids[k]);
		}
		fprintf(f, "\n");
	}
	fclose(f);
	free_trees(v, n);
	return buf;
}

static struct ctl_member g_members[2]; /* set by base_tree */

static struct ctl_tree base_tree(uint16_t id, uint32_t key)
{
	struct ctl_tree t;

	g_members[0] = (struct ctl_member){ .bfr_id = 1, .addr = A("127.0.4.10:4791"), .qpn = 0x1001 };
	g_members[1] = (struct ctl_member){ .bfr_id = 2, .addr = A("127.0.4.11:4791"), .qpn = 0x1002 };
	ctl_tree_init(&t, id);
	t.key = key;
	t.qpn = 0x100u + id;
	t.slots = 64;
	t.members = g_members;
	t.nmembers = 2;
	return t;
}

/* ---------------------------------------------------------------- AllReduce ranks */

struct rank_arg {
	uint32_t key;
	int rank;
	int port;
	int iters;
	int rc;
	char why[256];
};

static void *rank_main(void *p)
{
	struct rank_arg *a = p;
	char boot[32], data[32], host[32];
	struct inca_comm_opts o = INCA_COMM_OPTS_INIT;
	struct inca_comm *c = NULL;
	size_t count = 5000;
	float *buf = malloc(count * sizeof *buf);
	int rc;

	snprintf(boot, sizeof boot, "127.0.4.10:%d", a->port);
	snprintf(data, sizeof data, "127.0.4.%d:4791", 10 + a->rank);
	snprintf(host, sizeof host, "127.0.4.%d", 10 + a->rank);
	o.rank = a->rank;
	o.size = 2;
	o.bootstrap_addr = boot;
	o.host_ip = host;
	o.switch_addr = "127.0.4.1:4791";
	o.data_addr = data;
	o.tree_id = 7;
	o.key = a->key;
	o.bfr_id = (uint16_t)(a->rank + 1);
	o.nslots = 64;
	o.timeout_ms = 20000;
	o.no_auth = 1; /* tree 7 says auth disabled */
	rc = inca_comm_create(&o, &c);
	if (rc < 0) {
		snprintf(a->why, sizeof a->why, "create: %s", inca_strerror(rc));
		a->rc = rc;
		free(buf);
		return NULL;
	}
	for (int it = 0; it < a->iters && !rc; it++) {
		for (size_t i = 0; i < count; i++)
			buf[i] = (float)((a->rank + 1) * (int)(i % 1000) + it);
		rc = inca_allreduce_algo(c, buf, buf, count, INCA_FP32, INCA_SUM, INCA_ALGO_INC);
		if (rc < 0) {
			snprintf(a->why, sizeof a->why, "allreduce %d: %s", it, inca_strerror(rc));
			break;
		}
		for (size_t i = 0; i < count; i++) {
			float want = (float)(3 * (int)(i % 1000) + 2 * it);
			if (buf[i] != want) {
				snprintf(a->why, sizeof a->why, "iter %d elem %zu: %g != %g", it, i,
					 (double)buf[i], (double)want);
				rc = -EIO;
				break;
			}
		}
	}
	a->rc = rc;
	inca_comm_destroy(c);
	free(buf);
	return NULL;
}

/* Run `iters` AllReduces on tree 7 with 2 ranks; meanwhile (if churn) add and delete tree 8
 * over NETCONF again and again, so the workers see tree-set swaps under traffic. */
static void run_allreduce(struct ctl_conn *c, uint32_t key, int iters, bool churn)
{
	struct rank_arg a[2];
	pthread_t th[2];
	int port = 20000 + (int)((unsigned)getpid() % 20000u);
	int swaps = 0;

	for (int r = 0; r < 2; r++) {
		memset(&a[r], 0, sizeof a[r]);
		a[r].rank = r;
		a[r].port = port;
		a[r].iters = iters;
		a[r].key = key;
		CHECK(pthread_create(&th[r], NULL, rank_main, &a[r]) == 0);
	}
	if (churn) {
		struct ctl_member m8 = { .bfr_id = 1, .addr = A("127.0.4.20:4791"), .qpn = 0x1001 };
		struct ctl_tree t8 = base_tree(8, 0x88);

		t8.members = &m8;
		t8.nmembers = 1;
		for (int i = 0; i < 10; i++) {
			int rc = ctl_put_tree(c, &t8);
			if (rc < 0)
				fprintf(stderr, "put tree 8: %s\n", ctl_conn_error(c));
			CHECK_EQ(rc, 0);
			CHECK_EQ(ctl_delete_tree(c, 8), 0);
			swaps += 2;
		}
	}
	for (int r = 0; r < 2; r++)
		pthread_join(th[r], NULL);
	for (int r = 0; r < 2; r++) {
		if (a[r].rc) {
			char cmd[800];
			fprintf(stderr, "rank %d: %s\n", r, a[r].why);
			/* The switch's view of it, for the log. */
			kill(g_pid, SIGUSR1);
			msleep(700);
			snprintf(cmd, sizeof cmd,
				 "grep -v '\": 0' '%s/stats.json' >&2; tail -20 '%s/sw.log' >&2", g_dir,
				 g_dir);
			if (system(cmd) != 0)
				fprintf(stderr, "no stats\n");
		}
		CHECK_EQ(a[r].rc, 0);
	}
	printf("allreduce: %d iterations exact (%d tree-set swaps meanwhile)\n", iters, swaps);
}

/* ---------------------------------------------------------------- ctl test */

#define HELLO                                                                                 \
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?><hello "                                   \
	"xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\"><capabilities><capability>"        \
	"urn:ietf:params:netconf:base:1.0</capability></capabilities></hello>]]>]]>"

static int raw_connect(void);
static size_t read_msg(int fd, char *buf, size_t cap, int timeout_ms);
static void write_all(int fd, const char *s, size_t len);

static int test_ctl(void)
{
	struct ctl_conn *c = connect_unix();
	struct ctl_caps caps;
	struct ctl_tree *v = NULL;
	struct ctl_tree_stats *st = NULL;
	struct ctl_tree t;
	size_t n = 0;
	char *before, *after;
	int rc;

	/* Capabilities, resources and links from the state data. */
	CHECK_EQ(ctl_get_caps(c, &caps), 0);
	CHECK(!strcmp(caps.name, "leaf7"));
	CHECK(!strcmp(caps.data_addr, "127.0.4.1:4791"));
	CHECK(!strcmp(caps.role_hint, "leaf"));
	CHECK_EQ(caps.max_trees, 2);
	CHECK_EQ(caps.used_trees, 0);
	CHECK_EQ(caps.max_slots, 512);
	CHECK_EQ(caps.nlinks, 3);
	CHECK(!strcmp(caps.links[0].port, "eth1"));
	CHECK(!strcmp(caps.links[0].peer, "spine1"));
	CHECK(!strcmp(caps.links[0].peer_addr, "127.0.4.2:4791"));
	CHECK_EQ(caps.links[0].speed_bps, 1000000000ull);
	CHECK(caps.links[0].up);
	CHECK_EQ(caps.links[1].speed_bps, 10000000000ull);
	CHECK(!caps.links[2].up);
	CHECK(caps.links[2].peer_addr[0] == 0);
	CHECK(caps.dtype_mask & (1u << INCA_FP32));
	CHECK(caps.op_mask & (1u << INCA_SUM));
	ctl_caps_free(&caps);

	CHECK_EQ(ctl_get_trees(c, &v, &n), 0);
	CHECK_EQ(n, 0);

	/* Put tree 7 and read it back. */
	t = base_tree(7, 0x5eed0007);
	t.dtype_mask = (1u << INCA_FP32) | (1u << INCA_INT32);
	rc = ctl_put_tree(c, &t);
	if (rc < 0)
		fprintf(stderr, "put: %s\n", ctl_conn_error(c));
	CHECK_EQ(rc, 0);
	CHECK_EQ(ctl_get_trees(c, &v, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(v[0].id, 7);
	CHECK_EQ(v[0].key, 0x5eed0007);
	CHECK_EQ(v[0].qpn, 0x107);
	CHECK_EQ(v[0].slots, 64);
	CHECK(v[0].root);
	CHECK_EQ(v[0].nmembers, 2);
	CHECK_EQ(v[0].members[1].bfr_id, 2);
	CHECK(!strcmp(S(&v[0].members[1].addr), "127.0.4.11:4791"));
	CHECK_EQ(v[0].dtype_mask, (1u << INCA_FP32) | (1u << INCA_INT32));
	CHECK(!v[0].auth);
	CHECK_EQ(v[0].auth_key_id, 0);
	free_trees(v, n);

	/* With a data-plane key: auth and the key id read back, the key never does. */
	t.auth = true;
	t.auth_key_id = 0xfeed;
	for (int i = 0; i < WIRE_AUTH_KEY_LEN; i++)
		t.auth_key[i] = (uint8_t)(0x5a ^ (i * 7));
	CHECK_EQ(ctl_put_tree(c, &t), 0);
	CHECK_EQ(ctl_get_trees(c, &v, &n), 0);
	CHECK_EQ(n, 1);
	if (n == 1) {
		static const uint8_t zero[WIRE_AUTH_KEY_LEN];
		CHECK(v[0].auth);
		CHECK_EQ(v[0].auth_key_id, 0xfeed);
		CHECK(!memcmp(v[0].auth_key, zero, sizeof zero));
	}
	free_trees(v, n);
	{
		static char buf[1 << 16];
		char hexkey[2 * WIRE_AUTH_KEY_LEN + 1];
		static const char get_cfg[] =
			"<rpc message-id=\"1\" xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\">"
			"<get-config><source><running/></source></get-config></rpc>]]>]]>";
		static const char get[] =
			"<rpc message-id=\"2\" xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\">"
			"<get/></rpc>]]>]]>";
		const char *msgs[2] = { get_cfg, get };

		for (int i = 0; i < WIRE_AUTH_KEY_LEN; i++)
			snprintf(hexkey + 2 * i, 3, "%02x", t.auth_key[i]);
		for (int k = 0; k < 2; k++) {
			int fd = raw_connect();
			CHECK(read_msg(fd, buf, sizeof buf, 5000) > 0);
			write_all(fd, HELLO, strlen(HELLO));
			write_all(fd, msgs[k], strlen(msgs[k]));
			CHECK(read_msg(fd, buf, sizeof buf, 5000) > 0);
			CHECK(strstr(buf, "<auth-key-id>65261</auth-key-id>") != NULL);
			CHECK(strstr(buf, "<auth>enabled</auth>") != NULL);
			CHECK(strstr(buf, hexkey) == NULL && strstr(buf, "auth-key>") == NULL);
			close(fd);
		}
	}
	/* Back to an unauthenticated tree 7 (the ranks below send no MACs). */
	t.auth = false;
	t.auth_key_id = 0;
	memset(t.auth_key, 0, sizeof t.auth_key);
	CHECK_EQ(ctl_put_tree(c, &t), 0);
	CHECK_EQ(ctl_get_caps(c, &caps), 0);
	CHECK_EQ(caps.used_trees, 1);
	CHECK_EQ(caps.used_slots, 64);
	ctl_caps_free(&caps);

	/* Traffic through it, with tree-set swaps going on. */
	run_allreduce(c, 0x5eed0007, 30, true);
	CHECK_EQ(ctl_get_tree_stats(c, &st, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(st[0].id, 7);
	CHECK(st[0].aggregations >= 30);
	CHECK(st[0].rx_pkts >= 60);
	CHECK(st[0].tx_pkts >= 60);
	printf("stats: tree 7: %llu aggregations, %llu rx, %llu tx, %llu drops\n",
	       (unsigned long long)st[0].aggregations, (unsigned long long)st[0].rx_pkts,
	       (unsigned long long)st[0].tx_pkts, (unsigned long long)st[0].drops);
	free(st);

	/* Refused edits leave the running config as it was. */
	before = trees_fingerprint(c);
	{
		struct ctl_member bad[2] = { g_members[0], g_members[1] };
		bad[1].bfr_id = 65; /* outside si 0 of bsl 64: the config parser's check */
		t = base_tree(7, 1);
		t.members = bad;
		CHECK_EQ(ctl_put_tree(c, &t), -EINVAL);
		printf("refused (semantic): %s\n", ctl_conn_error(c));
		CHECK(strstr(ctl_conn_error(c), "outside"));

		bad[1] = g_members[0]; /* same BFR-id twice: YANG list key collision */
		bad[1].bfr_id = 3;     /* ... same address twice instead */
		CHECK_EQ(ctl_put_tree(c, &t), -EINVAL);
		printf("refused (address twice): %s\n", ctl_conn_error(c));
	}
	t = base_tree(7, 1);
	t.root = false; /* leaf without parent: the YANG must */
	CHECK_EQ(ctl_put_tree(c, &t), -EINVAL);
	printf("refused (YANG must): %s\n", ctl_conn_error(c));
	CHECK(strstr(ctl_conn_error(c), "parent"));
	t = base_tree(7, 1);
	t.bsl_bits = 100; /* not a valid BSL: YANG range */
	CHECK_EQ(ctl_put_tree(c, &t), -EINVAL);
	printf("refused (YANG range): %s\n", ctl_conn_error(c));
	t = base_tree(9, 9);
	t.slots = 600; /* > max_slots 512 with tree 7's 64 */
	CHECK_EQ(ctl_put_tree(c, &t), -ENOSPC);
	printf("refused (slots): %s\n", ctl_conn_error(c));
	t = base_tree(9, 9);
	t.members = &g_members[0];
	t.nmembers = 1;
	CHECK_EQ(ctl_put_tree(c, &t), 0); /* second tree: fits */
	t.id = 10;
	CHECK_EQ(ctl_put_tree(c, &t), -ENOSPC); /* third: max_trees 2 */
	printf("refused (trees): %s\n", ctl_conn_error(c));
	CHECK_EQ(ctl_delete_tree(c, 9), 0);
	after = trees_fingerprint(c);
	CHECK(!strcmp(before, after));
	free(after);

	/* A new group on tree 7: a changed tree (new key) gets a fresh engine (slot rounds start
	 * again at 0, as the new communicators' do). */
	t = base_tree(7, 0x5eed0077);
	CHECK_EQ(ctl_put_tree(c, &t), 0);
	run_allreduce(c, 0x5eed0077, 5, false);

	/* Delete. */
	CHECK_EQ(ctl_delete_tree(c, 7), 0);
	CHECK_EQ(ctl_get_trees(c, &v, &n), 0);
	CHECK_EQ(n, 0);
	free(v);
	CHECK_EQ(ctl_delete_tree(c, 7), -ENOENT);
	printf("delete missing: %s\n", ctl_conn_error(c));
	free(before);
	ctl_disconnect(c);

	/* A second client sees the same state; then the switch exits cleanly on SIGTERM. */
	c = connect_unix();
	CHECK_EQ(ctl_get_caps(c, &caps), 0);
	CHECK_EQ(caps.used_trees, 0);
	ctl_caps_free(&caps);
	ctl_disconnect(c);
	CHECK(switch_alive());
	{
		int stw;
		kill(g_pid, SIGTERM);
		CHECK(waitpid(g_pid, &stw, 0) == g_pid);
		g_pid = 0;
		CHECK(WIFEXITED(stw) && WEXITSTATUS(stw) == 0);
		CHECK(access(g_sock, F_OK) != 0); /* socket removed */
	}
	return 0;
}

/* ---------------------------------------------------------------- fuzz test */

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0);
	CHECK(strlen(g_sock) < sizeof sa.sun_path);
	memcpy(sa.sun_path, g_sock, strlen(g_sock) + 1);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	return fd;
}

/* Read until "]]>]]>" or timeout / EOF. Returns bytes read (0 on EOF before anything). */
static size_t read_msg(int fd, char *buf, size_t cap, int timeout_ms)
{
	size_t n = 0;

	while (n + 1 < cap) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, timeout_ms) <= 0)
			break;
		r = read(fd, buf + n, cap - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		buf[n] = 0;
		if (strstr(buf, "]]>]]>"))
			break;
	}
	buf[n] = 0;
	return n;
}

static void write_all(int fd, const char *s, size_t len)
{
	while (len) {
		ssize_t w = send(fd, s, len, MSG_NOSIGNAL);
		if (w <= 0)
			return; /* the server may have dropped us: fine */
		s += w;
		len -= (size_t)w;
	}
}

#define EDIT_HEAD                                                                             \
	"<rpc message-id=\"1\" xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\"><edit-config>" \
	"<target><running/></target><config>"
#define EDIT_TAIL "</config></edit-config></rpc>]]>]]>"
#define NS "urn:inca:yang:inca-switch"

/* One raw session: hello, one message, the reply (or the session closed). Returns the kind
 * of answer: 'o' ok, 'e' rpc-error, 'x' no answer (dropped). */
static char raw_exchange(const char *msg, size_t len)
{
	static char buf[1 << 16];
	int fd = raw_connect();
	char kind = 'x';

	CHECK(read_msg(fd, buf, sizeof buf, 5000) > 0 && strstr(buf, "<hello"));
	write_all(fd, HELLO, strlen(HELLO));
	write_all(fd, msg, len);
	if (read_msg(fd, buf, sizeof buf, 3000) > 0) {
		if (strstr(buf, "<rpc-error>"))
			kind = 'e';
		else if (strstr(buf, "<ok/>"))
			kind = 'o';
	}
	close(fd);
	return kind;
}

static int test_fuzz(void)
{
	static const char *const bodies[] = {
		/* broken XML */
		"<inca-switch xmlns=\"" NS "\"><trees><tree><id>1</id>",
		"<inca-switch xmlns=\"" NS "\"><trees><tree><id>1</id></trees></inca-switch>",
		"<inca-switch xmlns=\"" NS "\"><<<>>>&&&",
		"<inca-switch xmlns=\"" NS "\"><trees><tree><id>&#0;</id></tree></trees></inca-switch>",
		/* unknown namespace / element / attribute value */
		"<inca-switch xmlns=\"urn:nope\"><trees/></inca-switch>",
		"<inca-switch xmlns=\"" NS "\"><colour>blue</colour></inca-switch>",
		"<inca-switch xmlns=\"" NS "\"><trees><tree xmlns:nc=\"urn:ietf:params:xml:ns:"
		"netconf:base:1.0\" nc:operation=\"explode\"><id>1</id></tree></trees></inca-switch>",
		/* type and range violations */
		"<inca-switch xmlns=\"" NS "\"><trees><tree><id>70000</id><key>1</key><member><bfr-id>"
		"1</bfr-id><address>127.0.4.30</address></member></tree></trees></inca-switch>",
		"<inca-switch xmlns=\"" NS "\"><trees><tree><id>1</id><key>-1</key><member><bfr-id>1"
		"</bfr-id><address>127.0.4.30</address></member></tree></trees></inca-switch>",
		"<inca-switch xmlns=\"" NS "\"><trees><tree><id>1</id><key>1</key><member><bfr-id>1"
		"</bfr-id><address>999.1.1.1:1</address></member></tree></trees></inca-switch>",
		"<inca-switch xmlns=\"" NS "\"><trees><tree><id>1</id><key>1</key><member><bfr-id>0"
		"</bfr-id><address>127.0.4.30</address></member></tree></trees></inca-switch>",
		"<inca-switch xmlns=\"" NS "\"><trees><tree><id>1</id><key>1</key></tree></trees>"
		"</inca-switch>", /* no member: must */
		"<inca-switch xmlns=\"" NS "\"><trees><tree><id>1</id><member><bfr-id>1</bfr-id>"
		"<address>127.0.4.30</address></member></tree></trees></inca-switch>", /* no key */
		/* a tree with neither a data-plane key nor auth disabled */
		"<inca-switch xmlns=\"" NS "\"><trees><tree><id>4</id><key>4</key><member><bfr-id>1"
		"</bfr-id><address>127.0.4.33</address></member></tree></trees></inca-switch>",
		"<inca-switch xmlns=\"" NS "\"><statistics><rx-pkts>5</rx-pkts></statistics>"
		"</inca-switch>", /* state data in a config */
		/* delete of something missing, create of something existing */
		"<inca-switch xmlns=\"" NS "\"><trees><tree xmlns:nc=\"urn:ietf:params:xml:ns:netconf:"
		"base:1.0\" nc:operation=\"delete\"><id>4242</id></tree></trees></inca-switch>",
		"<inca-switch xmlns=\"" NS "\"><trees><tree xmlns:nc=\"urn:ietf:params:xml:ns:netconf:"
		"base:1.0\" nc:operation=\"create\"><id>3</id><key>1</key><member><bfr-id>1</bfr-id>"
		"<address>127.0.4.31</address></member></tree></trees></inca-switch>",
	};
	static const char valid[] =
		"<inca-switch xmlns=\"" NS "\"><trees><tree><id>3</id><key>3</key><slots>8</slots>"
		"<auth>disabled</auth>"
		"<member><bfr-id>1</bfr-id><address>127.0.4.31:4791</address></member>"
		"<member><bfr-id>2</bfr-id><address>127.0.4.32:4791</address></member></tree></trees>"
		"</inca-switch>";
	struct ctl_conn *c;
	char *before, *after, msg[8192];
	unsigned seed = 12345;
	int refused = 0, dropped = 0, accepted = 0;

	/* A known config first (tree 3), through a raw session too. */
	snprintf(msg, sizeof msg, "%s%s%s", EDIT_HEAD, valid, EDIT_TAIL);
	CHECK_EQ(raw_exchange(msg, strlen(msg)), 'o');
	c = connect_unix();
	before = trees_fingerprint(c);
	CHECK(strstr(before, "tree 3 "));

	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		char k;
		snprintf(msg, sizeof msg, "%s%s%s", EDIT_HEAD, bodies[i], EDIT_TAIL);
		k = raw_exchange(msg, strlen(msg));
		if (k == 'o')
			fprintf(stderr, "accepted: %s\n", bodies[i]);
		CHECK(k != 'o');
		refused += k == 'e';
		dropped += k == 'x';
		CHECK(switch_alive());
	}
	/* Random mutations of the valid edit (bytes flipped, cut short, duplicated ranges). */
	for (int i = 0; i < 150; i++) {
		size_t len = strlen(valid), mlen;
		char body[2048];
		char k;

		memcpy(body, valid, len + 1);
		for (int j = 0; j < 1 + (int)(rand_r(&seed) % 4); j++) {
			size_t pos = (size_t)rand_r(&seed) % len;
			switch (rand_r(&seed) % 4) {
			case 0:
				body[pos] = (char)(rand_r(&seed) % 256);
				break;
			case 1:
				body[pos] = "<>&/\"'=x0 "[rand_r(&seed) % 10];
				break;
			case 2:
				len = pos;
				body[len] = 0;
				break;
			default: {
				size_t l2 = (size_t)rand_r(&seed) % 40;
				if (pos + l2 < len && len + l2 < sizeof body - 1) {
					memmove(body + pos + l2, body + pos, len - pos + 1);
					len += l2;
				}
			}
			}
			if (!len)
				break;
		}
		body[len] = 0;
		mlen = (size_t)snprintf(msg, sizeof msg, "%s%.*s%s", EDIT_HEAD, (int)len, body,
					EDIT_TAIL);
		k = raw_exchange(msg, mlen);
		refused += k == 'e';
		dropped += k == 'x';
		accepted += k == 'o';
		CHECK(switch_alive());
		if (k == 'o') {
			/* A mutation can stay valid (e.g. a digit changed): put the reference back. */
			snprintf(msg, sizeof msg, "%s%s%s", EDIT_HEAD, valid, EDIT_TAIL);
			CHECK_EQ(raw_exchange(msg, strlen(msg)), 'o');
		}
	}
	/* Garbage that is not even a NETCONF message, and a hello-less session. */
	{
		static const char junk[] = "\x01\x02\x03 not xml at all ]]>]]>";
		CHECK(raw_exchange(junk, sizeof junk - 1) != 'o');
	}
	{
		int fd = raw_connect();
		write_all(fd, "<rpc><get/></rpc>]]>]]>", 23);
		close(fd);
	}
	CHECK(switch_alive());
	ctl_disconnect(c);
	c = connect_unix();
	{
		/* Trees possibly created by accepted mutations with another id: remove them. */
		struct ctl_tree *v = NULL;
		size_t n = 0;
		CHECK_EQ(ctl_get_trees(c, &v, &n), 0);
		for (size_t i = 0; i < n; i++)
			if (v[i].id != 3)
				CHECK_EQ(ctl_delete_tree(c, v[i].id), 0);
		free_trees(v, n);
	}
	after = trees_fingerprint(c);
	CHECK(!strcmp(before, after));
	printf("fuzz: %d refused with rpc-error, %d sessions dropped, %d mutations still valid; "
	       "switch alive, config unchanged\n",
	       refused, dropped, accepted);
	free(before);
	free(after);
	ctl_disconnect(c);
	return 0;
}

/* ---------------------------------------------------------------- stall test */

/* Everything a normal client does while handshakes are stalled must finish within this; the
 * server gives a stalled handshake several seconds (hello / auth timeouts, 10 s for the SSH
 * key exchange inside libnetconf2), so a server that serves one handshake at a time blows it. */
#define STALL_BOUND_MS 3000

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Session c answers <get-config> with the one tree; returns ms since t0 (checked by caller). */
static double served_after_ms(struct ctl_conn *c, double t0, const char *what)
{
	struct ctl_tree *v = NULL;
	size_t n = 0;
	double t;

	CHECK_EQ(ctl_get_trees(c, &v, &n), 0);
	t = now_ms() - t0;
	printf("stall: %s served after %.0f ms (bound %d ms)\n", what, t, STALL_BOUND_MS);
	CHECK_EQ(n, 1);
	free_trees(v, n);
	return t;
}

/* A TCP connection to the SSH endpoint that reads the server's identification string and then
 * sends nothing: the server sits in its SSH key exchange. */
static int ssh_stall(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	char ip[64], buf[512], *colon;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0);
	snprintf(ip, sizeof ip, "%s", g_ssh_addr);
	colon = strchr(ip, ':');
	CHECK(colon);
	*colon = 0;
	a.sin_port = htons((uint16_t)atoi(colon + 1));
	CHECK(inet_pton(AF_INET, ip, &a.sin_addr) == 1);
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
	/* The identification line ends with CR LF (RFC 4253 §4.2). */
	for (size_t n = 0; n + 1 < sizeof buf;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		buf[n] = 0;
		if (strchr(buf, '\n') || poll(&p, 1, STALL_BOUND_MS) <= 0)
			break;
		r = read(fd, buf + n, sizeof buf - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		buf[n] = 0;
	}
	if (strncmp(buf, "SSH-2.0-", 8))
		fprintf(stderr, "no SSH identification from the server (got '%.40s')\n", buf);
	CHECK(!strncmp(buf, "SSH-2.0-", 8));
	return fd;
}

/* True while the server keeps the connection open (no EOF, no reset). */
static bool still_open(int fd)
{
	char b[256];
	ssize_t r = recv(fd, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);

	return r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

static int test_stall(void)
{
	char target[128], key[320], buf[4096];
	struct ctl_conn *c0, *c1, *c2;
	struct ctl_tree *v = NULL;
	struct ctl_tree t = base_tree(5, 0x55);
	size_t n = 0;
	double t0, t_est, t_unix, t_ssh, t_stop;
	int s_ssh, s_unix, st;
	bool got_hello;

	snprintf(target, sizeof target, "ssh://inca@%s", g_ssh_addr);
	snprintf(key, sizeof key, "%s/client", g_dir);

	/* An established session (UNIX) and one over SSH first: both endpoints work. */
	c0 = connect_unix();
	CHECK_EQ(ctl_put_tree(c0, &t), 0);
	c1 = NULL;
	CHECK_EQ(ctl_connect(target, key, NULL, &c1), 0);
	CHECK_EQ(ctl_get_trees(c1, &v, &n), 0);
	CHECK_EQ(n, 1);
	free_trees(v, n);
	ctl_disconnect(c1);

	/* The stalls: SSH stopped after the banner, UNIX silent after the server's <hello>. */
	t0 = now_ms();
	s_ssh = ssh_stall();
	s_unix = raw_connect();
	/* A second handshake while the first is stuck: the server's <hello> must come. */
	got_hello = read_msg(s_unix, buf, sizeof buf, STALL_BOUND_MS) > 0 && strstr(buf, "<hello");

	printf("stall: second handshake %s\n", got_hello ? "ran" : "did NOT run");

	/* The established session is served. */
	t_est = served_after_ms(c0, t0, "established session");
	CHECK(t_est < STALL_BOUND_MS);
	CHECK(got_hello);

	/* A new UNIX session opens and is served. */
	c1 = connect_unix();
	t_unix = served_after_ms(c1, t0, "new UNIX session");
	CHECK(t_unix < STALL_BOUND_MS);

	/* A new SSH session too (a third handshake beside the two stuck ones). */
	c2 = NULL;
	CHECK_EQ(ctl_connect(target, key, NULL, &c2), 0);
	t_ssh = served_after_ms(c2, t0, "new SSH session");
	CHECK(t_ssh < STALL_BOUND_MS);
	/* The stalls were still pending all along (else the bound proves nothing). */
	CHECK(still_open(s_ssh));
	CHECK(still_open(s_unix));

	/* Sessions work and close normally while the stalls go on. */
	CHECK_EQ(ctl_delete_tree(c1, 5), 0);
	ctl_disconnect(c1);
	ctl_disconnect(c2);
	ctl_disconnect(c0);

	/* SIGTERM with both handshakes still stuck: the switch stops without waiting for them. */
	CHECK(still_open(s_ssh));
	CHECK(still_open(s_unix));
	t0 = now_ms();
	kill(g_pid, SIGTERM);
	while (waitpid(g_pid, &st, WNOHANG) == 0 && now_ms() - t0 < STALL_BOUND_MS)
		msleep(10);
	t_stop = now_ms() - t0;
	printf("stall: SIGTERM with 2 stalled handshakes: stopped in %.0f ms\n", t_stop);
	if (t_stop >= STALL_BOUND_MS) {
		fprintf(stderr, "switch did not stop within %d ms\n", STALL_BOUND_MS);
		CHECK(t_stop < STALL_BOUND_MS); /* cleanup() kills and reaps it */
	}
	g_pid = 0;
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(s_ssh);
	close(s_unix);
	return 0;
}

int main(int argc, char **argv)
{
	int rc;

	test_on_failure(cleanup);
	if (argc != 3) {
		fprintf(stderr, "usage: %s INCA-SWITCH ctl|fuzz|stall\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	alarm(240); /* bound the whole test in time */
	/* Each case its own data-plane address: the switch's SO_REUSEPORT sockets would let two
	 * switches of parallel test cases share one and take each other's packets. */
	if (!strcmp(argv[2], "stall"))
		start_switch(argv[1], "127.0.4.50:4791", "127.0.4.50");
	else if (!strcmp(argv[2], "fuzz"))
		start_switch(argv[1], "127.0.4.51:4791", NULL);
	else
		start_switch(argv[1], "127.0.4.1:4791", NULL);
	if (!strcmp(argv[2], "ctl"))
		rc = test_ctl();
	else if (!strcmp(argv[2], "fuzz"))
		rc = test_fuzz();
	else if (!strcmp(argv[2], "stall"))
		rc = test_stall();
	else
		rc = 2;
	cleanup();
	return rc;
}
