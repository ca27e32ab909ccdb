/* inca-am integration tests on loopback: the real inca-am (and inca-switch with its NETCONF
 * server when lib/ctl is built), libinca ranks as forked processes joining through the AM.
 * Usage: am_test CASE AM-PATH SWITCH-PATH INCA-CLI-PATH ctl|noctl
 *   fallback  no switch: the group gets HOST_FALLBACK, AllReduce exact on the ring, a wrong
 *             credential fails with -EACCES, leave removes the group
 *   inc       1 leaf: TREE_READY, INC AllReduce exact, AM restart keeps the group running;
 *             one rank asks for a deterministic tree: INC float sums are bitwise the
 *             rank-order chain, also after the restart (the journal keeps the request)
 *   full      1 leaf with too few slots: HOST_FALLBACK "slots exhausted", ring exact
 *   twolevel  2 leaves + 1 spine: 2-level tree, 4 ranks, exact, `inca status` shows it;
 *             leave -> dismantled, the switches' trees and slots are freed
 *   ssh       the AM manages inca-switch over NETCONF/SSH with a key pair made by ssh-keygen
 *             (host key checked against known_hosts): INC exact; a key the switch does not
 *             authorise and a wrong host key leave those switch entries down
 *   failover  2 spines + 2 leaves, 4 ranks; the root spine is killed mid-run: the ranks' INC
 *             calls fail, libinca reports it (ReportFailure), the AM rebuilds on the other
 *             spine (polling is slowed down so only the report can trigger it), every result
 *             exact and INC back on the new generation
 *   tls       ranks with the CA join (ring exact), a rank trusting another CA and a plaintext
 *             rank fail cleanly, `inca --ca` works, `inca` with a wrong CA prints one line
 * Every case runs the AM over TLS (a CA and a certificate for 127.0.0.1 made by openssl) with
 * an admin token, as a deployment would. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "am_rpc.h"
#include "client/client.h" /* struct inca_comm: the group key libinca adopted (cfg.auth_*) */
#include "inca/inca.h"

static const char *am_path, *sw_path, *cli_path;
static char tmpdir[128], am_addr[64], journal[256], am_conf[256];
static pid_t am_pid, sw_pids[4];
static int nsw;

static void cleanup(void)
{
	if (am_pid > 0) {
		kill(am_pid, SIGKILL);
		waitpid(am_pid, NULL, 0);
		am_pid = 0;
	}
	for (int i = 0; i < nsw; i++)
		if (sw_pids[i] > 0) {
			kill(sw_pids[i], SIGKILL);
			waitpid(sw_pids[i], NULL, 0);
			sw_pids[i] = 0;
		}
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	cleanup();
	exit(1);
}

static void on_alarm(int sig)
{
	(void)sig;
	cleanup();
	_exit(3);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		die("cannot write %s", path);
}

/* true once path exists; false if the daemon exited first. */
static bool wait_file_or_exit(const char *path, pid_t pid)
{
	for (int i = 0; i < 200; i++) {
		if (access(path, F_OK) == 0)
			return true;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return false;
		usleep(25000);
	}
	die("timeout waiting for %s", path);
	return false;
}

static void wait_file(const char *path, pid_t pid)
{
	if (!wait_file_or_exit(path, pid))
		die("daemon for %s exited early", path);
}

static pid_t spawn(char *const argv[])
{
	pid_t p = fork();
	if (p == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	return p;
}

static int free_tcp_port(void);
static bool am_addr_fixed;
static char ca_pem[300], wrong_ca_pem[300], am_crt[300], am_key[300];
#define ADMIN_TOKEN "am-test-admin" /* the AM has listened there: a restart must use the same address */

/* Start inca-am on am_addr. Before its first start the address is nobody's yet: if another
 * process took the port between free_tcp_port() and the AM's bind (the AM then exits at once
 * with "cannot listen"), take another port. */
static void start_am(void)
{
	char ready[300];
	snprintf(ready, sizeof ready, "%s/am.ready", tmpdir);
	for (int attempt = 0;; attempt++) {
		unlink(ready);
		am_pid = spawn((char *const[]){ (char *)am_path, "-c", am_conf, "-j", journal, "-l",
						am_addr, "--tls-cert", am_crt, "--tls-key", am_key,
						"--ready-file", ready, "-v", NULL });
		if (wait_file_or_exit(ready, am_pid))
			break;
		if (am_addr_fixed || attempt == 9)
			die("daemon for %s exited early", ready);
		snprintf(am_addr, sizeof am_addr, "127.0.0.1:%d", free_tcp_port());
	}
	am_addr_fixed = true;
}

static void stop_am(void)
{
	kill(am_pid, SIGTERM);
	waitpid(am_pid, NULL, 0);
	am_pid = 0;
}

static grpc_channel *chan;
/* Queries as the admin (the AM shows anonymous callers nothing). */
static int admin_unary(grpc_channel *ch, const char *method, const ProtobufCMessage *req,
		       const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **reply,
		       uint64_t timeout_ms, char *err, size_t cap)
{
	grpc_metadata md = { .key = grpc_slice_from_static_string(AM_MD_ADMIN_TOKEN),
			     .value = grpc_slice_from_static_string(ADMIN_TOKEN) };
	struct am_rpc_call_opts o = { &md, 1, false };
	return am_rpc_unary_opts(ch, method, &o, req, reply_desc, reply, timeout_ms, err, cap);
}

/* The AM's config: the case's text plus the admin token. */
static void write_am_conf(const char *text)
{
	char buf[4096];
	int n = snprintf(buf, sizeof buf, "%sadmin_token = %s\n", text, ADMIN_TOKEN);
	if (n < 0 || (size_t)n >= sizeof buf)
		die("AM config too long");
	write_file(am_conf, buf);
}

/* gRPC is started lazily, after the ranks were forked: gRPC state must not cross a fork. */
static void chan_open(void)
{
	if (chan)
		return;
	grpc_init();
	chan = am_rpc_channel(am_addr, ca_pem, false, NULL, 0);
	if (!chan)
		die("channel");
}

static Inca__Am__V1__StatsReply *stats(void)
{
	ProtobufCMessage *rp;
	Inca__Am__V1__Empty e = INCA__AM__V1__EMPTY__INIT;
	char err[128];
	chan_open();
	if (admin_unary(chan, "GetStats", &e.base, &inca__am__v1__stats_reply__descriptor, &rp, 3000,
			 err, sizeof err) < 0)
		die("GetStats: %s", err);
	return (Inca__Am__V1__StatsReply *)rp;
}

static Inca__Am__V1__ListGroupsReply *groups(void)
{
	ProtobufCMessage *rp;
	Inca__Am__V1__Empty e = INCA__AM__V1__EMPTY__INIT;
	char err[128];
	chan_open();
	if (admin_unary(chan, "ListGroups", &e.base, &inca__am__v1__list_groups_reply__descriptor,
			 &rp, 3000, err, sizeof err) < 0)
		die("ListGroups: %s", err);
	return (Inca__Am__V1__ListGroupsReply *)rp;
}

/* ---------------------------------------------------------------- ranks */

struct rank_plan {
	int size;
	const char *cred;
	int expect_state;  /* inca_am_info.state after create */
	int iters;         /* AllReduces */
	int sleep_us;      /* between iterations (AM restart window) */
	const char *restart_flag; /* wait for this file before the last half (or NULL) */
	const char *expect_reason; /* substring of inca_am_info.reason (or NULL) */
	const char *tls_ca;        /* am_tls_ca; NULL: the test CA */
	bool insecure;             /* am_insecure: a plaintext client */
	int fail_within_ms;        /* >0: inca_comm_create must fail, and within this time */
	int kill_at;               /* >0: failover case: the root dies before this iteration */
	bool det;                  /* rank 1 asks for a deterministic tree; every iteration also
				    * checks an INC float sum bitwise against the rank-order chain */
	bool write_keys;           /* each rank writes its adopted group key after create
				    * (keys.R.a) and at the end (keys.R.b) */
};

/* "<auth> <key id> <64 hex digits>" of the tree libinca adopted, into tmpdir/keys.R.W. */
static void write_key(const struct inca_comm *c, int rank, char which)
{
	char path[300], line[128];
	int n = snprintf(line, sizeof line, "%d %u ", c->cfg.auth ? 1 : 0, c->cfg.auth_key_id);

	for (int i = 0; i < WIRE_AUTH_KEY_LEN; i++)
		n += snprintf(line + n, sizeof line - (size_t)n, "%02x", c->cfg.auth_key[i]);
	snprintf(path, sizeof path, "%s/keys.%d.%c", tmpdir, rank, which);
	write_file(path, line);
}

static char *slurp(const char *path);

/* Every rank's key file `which` holds the same enabled key; returns it (owned) or dies. */
static char *same_key(int size, char which)
{
	char *first = NULL;

	for (int r = 0; r < size; r++) {
		char path[300];
		char *k;
		snprintf(path, sizeof path, "%s/keys.%d.%c", tmpdir, r, which);
		k = strdup(slurp(path));
		if (!k || strncmp(k, "1 ", 2) != 0 || strlen(k) < 2 + 2 + 2 * WIRE_AUTH_KEY_LEN ||
		    !strncmp(k, "1 0 ", 4))
			die("rank %d: no group key adopted (%s)", r, k ? k : "no file");
		if (!first) {
			first = k;
			continue;
		}
		if (strcmp(first, k) != 0)
			die("rank %d adopted another key than rank 0: %s vs %s", r, k, first);
		free(k);
	}
	return first;
}

/* Fractional float contribution of rank r (every addition rounds). */
static float fval(int r, int i, int it)
{
	uint32_t x = (uint32_t)r * 2654435761u ^ (uint32_t)i * 40503u ^ (uint32_t)it * 2246822519u;
	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return 0.5f + (float)(x >> 8) / 16777216.0f;
}

static char reached_flag[300], killed_flag[300];

/* Failover case: wait (up to a minute) until this rank's own AM session delivered tree
 * generation gen, READY. 0, or -1 with a message. */
static int wait_generation(struct inca_comm *c, int rank, uint32_t gen)
{
	struct inca_am_info info;

	memset(&info, 0, sizeof info);
	for (int w = 0; w < 2400; w++) {
		if (inca_comm_am_info(c, &info, sizeof info) == 0 && info.state == 1 && info.generation >= gen)
			return 0;
		usleep(25000);
	}
	fprintf(stderr, "rank %d: no tree generation %u from the AM after 60 s (generation %u, "
		"state %d: %s)\n", rank, gen, info.generation, info.state, info.reason);
	return -1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int run_rank(int rank, const struct rank_plan *p)
{
	struct inca_comm_opts o;
	struct inca_comm *c;
	struct inca_am_info info;
	struct inca_comm_stats st;
	char host_ip[32], data[32], boot[32], hname[16];
	int32_t buf[3000];
	int rc;

	inca_comm_opts_init(&o);
	snprintf(host_ip, sizeof host_ip, "127.0.0.%d", 21 + rank);
	snprintf(data, sizeof data, "127.0.0.%d:0", 21 + rank);
	snprintf(boot, sizeof boot, "127.0.0.21:%d", 20000 + (getppid() % 20000));
	snprintf(hname, sizeof hname, "h%d", rank);
	o.rank = rank;
	o.size = p->size;
	o.host_ip = host_ip;
	o.data_addr = data;
	o.bootstrap_addr = boot;
	o.am_addr = am_addr;
	o.job_id = "job1";
	o.job_credential = p->cred;
	o.host_name = hname;
	o.am_timeout_ms = 15000;
	o.timeout_ms = 20000;
	o.rto_us = 5000;
	o.am_tls_ca = p->tls_ca ? p->tls_ca : ca_pem;
	o.am_insecure = p->insecure;
	o.deterministic = p->det && rank == 1; /* one member asking is enough */
	if (p->kill_at) { /* fail fast once the root is gone */
		o.retx_limit = 5;
		o.rto_max_us = 20000;
	}
	if (p->fail_within_ms) {
		uint64_t t0 = now_ms(), dt;
		o.am_timeout_ms = 2000;
		rc = inca_comm_create(&o, &c);
		dt = now_ms() - t0;
		fprintf(stderr, "rank %d: create: %s after %llu ms (expected to fail)\n", rank,
			rc < 0 ? inca_strerror(rc) : "ok", (unsigned long long)dt);
		return rc < 0 && dt <= (uint64_t)p->fail_within_ms ? 0 : 17;
	}
	rc = inca_comm_create(&o, &c);
	if (strcmp(p->cred, "good") != 0)
		return rc == -EACCES ? 0 : 10;
	if (rc < 0) {
		fprintf(stderr, "rank %d: create: %s\n", rank, inca_strerror(rc));
		return 11;
	}
	if (inca_comm_am_info(c, &info, sizeof info) < 0 || info.state != p->expect_state ||
	    (p->expect_reason && !strstr(info.reason, p->expect_reason))) {
		fprintf(stderr, "rank %d: AM state %d (%s), expected %d\n", rank, info.state,
			info.reason, p->expect_state);
		return 12;
	}
	if (p->write_keys)
		write_key(c, rank, 'a');
	for (int it = 0; it < p->iters; it++) {
		int n = 1 + (it * 997) % 3000;
		if (p->kill_at && it == p->kill_at) {
			if (rank == 0)
				write_file(reached_flag, "go\n");
			for (int w = 0; w < 2400 && access(killed_flag, F_OK) != 0; w++)
				usleep(25000);
			if (access(killed_flag, F_OK) != 0) {
				fprintf(stderr, "rank %d: the root switch was not killed\n", rank);
				return 22;
			}
		}
		/* The call after the failed one: wait until this rank has the rebuilt tree, so
		 * that the remaining calls surely see INC come back. That the AM lists the group
		 * as rebuilt is not enough: each rank learns it from its own session, and on a
		 * slow machine one rank's event can come after the calls on which the ranks agree
		 * to turn INC back on, leaving that rank on the old tree. */
		if (p->kill_at && it == p->kill_at + 1 && wait_generation(c, rank, 2) < 0)
			return 23;
		if (p->restart_flag && it == p->iters / 2) {
			for (int w = 0; w < 2400 && access(p->restart_flag, F_OK) != 0; w++)
				usleep(25000);
			if (access(p->restart_flag, F_OK) != 0) {
				fprintf(stderr, "rank %d: the AM was not restarted\n", rank);
				return 24;
			}
		}
		for (int i = 0; i < n; i++)
			buf[i] = (rank + 1) * (i + it);
		rc = inca_allreduce(c, buf, buf, (size_t)n, INCA_INT32, INCA_SUM);
		if (rc < 0) {
			fprintf(stderr, "rank %d: allreduce %d: %s\n", rank, it, inca_strerror(rc));
			return 13;
		}
		for (int i = 0; i < n; i++)
			if (buf[i] != (p->size * (p->size + 1) / 2) * (i + it)) {
				fprintf(stderr, "rank %d: wrong result at %d/%d\n", rank, it, i);
				return 14;
			}
		if (p->det) {
			static float fb[3000];
			int nf = 1 + (it * 131) % 3000;
			for (int i = 0; i < nf; i++)
				fb[i] = fval(rank, i, it);
			rc = inca_allreduce_algo(c, fb, fb, (size_t)nf, INCA_FP32, INCA_SUM,
						 INCA_ALGO_INC);
			if (rc < 0) {
				fprintf(stderr, "rank %d: float allreduce %d: %s\n", rank, it,
					inca_strerror(rc));
				return 19;
			}
			for (int i = 0; i < nf; i++) {
				float want = fval(0, i, it);
				for (int q = 1; q < p->size; q++)
					want += fval(q, i, it);
				if (memcmp(&want, &fb[i], sizeof want) != 0) {
					fprintf(stderr, "rank %d: float sum %d/%d: %a, rank order %a\n",
						rank, it, i, (double)fb[i], (double)want);
					return 20;
				}
			}
		}
		if (p->sleep_us)
			usleep((useconds_t)p->sleep_us);
	}
	inca_comm_get_stats(c, &st, sizeof st);
	if (p->kill_at) {
		/* The tree was rebuilt (generation 2) and INC came back on it after the failover. */
		inca_comm_am_info(c, &info, sizeof info);
		fprintf(stderr, "rank %d: generation %u, %llu of %d calls on INC, %llu timeouts, "
			"inc %s (state %d: %s)\n", rank, info.generation,
			(unsigned long long)st.inc_calls, p->iters, (unsigned long long)st.timeouts,
			info.inc_enabled ? "on" : "off", info.state, info.reason);
		/* Every rank has read its state before any leaves (a leave dismantles the group). */
		buf[0] = 1;
		if (inca_allreduce_algo(c, buf, buf, 1, INCA_INT32, INCA_SUM, INCA_ALGO_RING) < 0)
			return 21;
		if (info.generation != 2 || !info.inc_enabled ||
		    st.inc_calls < (uint64_t)p->kill_at + 10 || st.inc_calls >= (uint64_t)p->iters)
			return 18;
	} else if (p->expect_state == 1 && st.inc_calls != (uint64_t)p->iters * (p->det ? 2 : 1)) {
		fprintf(stderr, "rank %d: %llu of %d calls on INC\n", rank,
			(unsigned long long)st.inc_calls, p->iters);
		return 15;
	}
	if (p->expect_state == 2 && st.inc_calls != 0)
		return 16;
	if (p->write_keys)
		write_key(c, rank, 'b');
	inca_comm_destroy(c);
	return 0;
}

static void run_ranks(const struct rank_plan *p, void (*during)(void))
{
	pid_t pids[8];
	int status, bad = 0;

	for (int r = 0; r < p->size; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			_exit(run_rank(r, p));
	}
	if (during)
		during();
	for (int r = 0; r < p->size; r++) {
		waitpid(pids[r], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "rank %d exit status %d\n", r,
				WIFEXITED(status) ? WEXITSTATUS(status) : -1);
			bad++;
		}
	}
	if (bad)
		die("%d rank(s) failed", bad);
}

static void wait_no_groups(void)
{
	for (int i = 0; i < 300; i++) {
		Inca__Am__V1__StatsReply *s = stats();
		uint64_t n = s->active_groups;
		protobuf_c_message_free_unpacked(&s->base, NULL);
		if (n == 0)
			return;
		usleep(50000);
	}
	die("groups still active after every rank left");
}

/* ---------------------------------------------------------------- cases */

static void case_fallback(void)
{
	struct rank_plan p = { .size = 3, .cred = "good", .expect_state = 2, .iters = 10 };
	struct rank_plan bad = { .size = 1, .cred = "bad" };
	Inca__Am__V1__StatsReply *s;

	write_am_conf( "heartbeat_ms = 200\npoll_ms = 200\njob job1 credential good\n");
	start_am();
	run_ranks(&bad, NULL);
	run_ranks(&p, NULL);
	wait_no_groups();
	s = stats();
	if (s->joins_denied != 1 || s->groups_fallback != 1 || s->joins != 3)
		die("stats: denied %llu fallback %llu joins %llu", (unsigned long long)s->joins_denied,
		    (unsigned long long)s->groups_fallback, (unsigned long long)s->joins);
	protobuf_c_message_free_unpacked(&s->base, NULL);
	{ /* the operator sees the denial too */
		char cmd[600], out[4096];
		FILE *f;
		size_t n;
		snprintf(cmd, sizeof cmd, "%s --am %s stats", cli_path, am_addr);
		f = popen(cmd, "r");
		n = f ? fread(out, 1, sizeof out - 1, f) : 0;
		out[n] = '\0';
		if (!f || pclose(f) != 0 || !strstr(out, "denials: 1 joins, 0 sessions/leaves"))
			die("inca stats does not show the denied join:\n%s", out);
	}
	stop_am();
}

static void start_switch(int i, const char *conf_text)
{
	char conf[300], sock[300], ready[300];
	snprintf(conf, sizeof conf, "%s/sw%d.conf", tmpdir, i);
	snprintf(sock, sizeof sock, "%s/sw%d.sock", tmpdir, i);
	snprintf(ready, sizeof ready, "%s/sw%d.ready", tmpdir, i);
	write_file(conf, conf_text);
	sw_pids[i] = spawn((char *const[]){ (char *)sw_path, "-c", conf, "--netconf-unix", sock,
					    "--ready-file", ready, NULL });
	nsw = i + 1;
	wait_file(ready, sw_pids[i]);
}

static char restart_flag[300];

/* Restart the AM while the ranks run on their tree: once every rank has its tree (it wrote
 * its key file after inca_comm_create), whatever the machine's speed. */
#define INC_RANKS 3

static void restart_am_during(void)
{
	for (int r = 0; r < INC_RANKS; r++) {
		char path[300];
		int w = 0;
		snprintf(path, sizeof path, "%s/keys.%d.a", tmpdir, r);
		for (; w < 2400 && access(path, F_OK) != 0; w++)
			usleep(25000);
		if (w == 2400)
			die("rank %d did not get its tree within a minute", r);
	}
	usleep(100000);
	stop_am(); /* the data plane keeps running */
	usleep(300000);
	start_am();
	write_file(restart_flag, "go\n");
}

static void case_inc(void)
{
	struct rank_plan p = { .size = INC_RANKS, .cred = "good", .expect_state = 1, .iters = 60,
			       .sleep_us = 20000, .restart_flag = restart_flag, .det = true,
			       .write_keys = true };
	char *ka, *kb, *jr, *kline = NULL, want[160];
	char text[1024];
	Inca__Am__V1__StatsReply *s;

	start_switch(0, "name = leaf0\nrole = leaf\nlisten = 127.0.0.11:4791\n"
			"max_slots = 1024\nmax_trees = 8\n");
	snprintf(text, sizeof text,
		 "heartbeat_ms = 200\npoll_ms = 200\ngrace_ms = 5000\njob job1 credential good\n"
		 "switch leaf0 unix:%s/sw0.sock\n"
		 "attach 127.0.0.21 leaf0\nattach 127.0.0.22 leaf0\nattach 127.0.0.23 leaf0\n",
		 tmpdir);
	write_am_conf( text);
	start_am();
	snprintf(restart_flag, sizeof restart_flag, "%s/restarted", tmpdir);
	run_ranks(&p, restart_am_during);
	s = stats();
	if (s->recovered_groups != 1)
		die("restarted AM recovered %llu groups", (unsigned long long)s->recovered_groups);
	protobuf_c_message_free_unpacked(&s->base, NULL);
	/* Every rank adopted the same key, kept it across the AM restart, and it is the key the
	 * AM journalled for the group (the last K record). */
	ka = same_key(p.size, 'a');
	kb = same_key(p.size, 'b');
	if (strcmp(ka, kb) != 0)
		die("the key changed across the AM restart: %s -> %s", ka, kb);
	{
		FILE *jf = fopen(journal, "r");
		size_t cap = 0;
		jr = NULL;
		if (!jf || getdelim(&jr, &cap, '\0', jf) < 0)
			die("cannot read the journal %s", journal);
		fclose(jf);
	}
	for (char *l = jr ? strstr(jr, "\nK ") : NULL; l; l = strstr(l + 1, "\nK "))
		kline = l + 1;
	if (!kline)
		die("no K record in the journal");
	{
		/* K GROUP KEY-ID KEY CRC: from after the group id to before the CRC */
		char *sp = strchr(kline + 2, ' ');
		char *nl = sp ? strchr(sp, '\n') : NULL;
		while (nl && nl > sp && nl[-1] != ' ')
			nl--;
		if (!sp || !nl || nl == sp)
			die("bad K record");
		nl--;
		snprintf(want, sizeof want, "1 %.*s", (int)(nl - sp - 1), sp + 1);
	}
	if (strcmp(want, ka) != 0)
		die("ranks' key %s is not the journalled %s", ka, want);
	fprintf(stderr, "3 ranks adopted the AM's group key (id %.*s), kept across the restart\n",
		(int)(strchr(ka + 2, ' ') - ka - 2), ka + 2);
	free(ka);
	free(kb);
	free(jr);
	wait_no_groups();
	stop_am();
}

/* While the 4 ranks run: `inca status` must show the 2-level tree rooted at the spine. */
static void status_during(void)
{
	char cmd[600], out[16384];
	size_t n = 0;
	FILE *f;

	usleep(700000);
	snprintf(cmd, sizeof cmd, "%s --am %s status", cli_path, am_addr);
	f = popen(cmd, "r");
	if (!f)
		die("popen");
	n = fread(out, 1, sizeof out - 1, f);
	out[n] = '\0';
	if (pclose(f) != 0)
		die("inca status failed:\n%s", out);
	fputs(out, stderr);
	if (!strstr(out, "2-level") || !strstr(out, "spine0 [root]") || !strstr(out, "leaf1 [leaf]") ||
	    !strstr(out, "A-BM 1-4") || !strstr(out, "running"))
		die("inca status does not show the 2-level tree");
}

/* Admission control end to end: a switch with fewer free slots than slots_min refuses the
 * group with a reason, and the collectives complete on the host path. */
static void case_full(void)
{
	struct rank_plan p = { .size = 3, .cred = "good", .expect_state = 2, .iters = 10,
			       .expect_reason = "slots exhausted" };
	char text[1024];
	Inca__Am__V1__StatsReply *s;

	start_switch(0, "name = leaf0\nrole = leaf\nlisten = 127.0.0.11:4791\nmax_slots = 8\n");
	snprintf(text, sizeof text,
		 "heartbeat_ms = 200\npoll_ms = 200\nslots_min = 16\njob job1 credential good\n"
		 "switch leaf0 unix:%s/sw0.sock\n"
		 "attach 127.0.0.21 leaf0\nattach 127.0.0.22 leaf0\nattach 127.0.0.23 leaf0\n",
		 tmpdir);
	write_am_conf( text);
	start_am();
	run_ranks(&p, NULL);
	wait_no_groups();
	s = stats();
	if (s->groups_fallback != 1 || s->groups_ready != 0)
		die("full: fallback %llu ready %llu", (unsigned long long)s->groups_fallback,
		    (unsigned long long)s->groups_ready);
	protobuf_c_message_free_unpacked(&s->base, NULL);
	stop_am();
}

static void case_twolevel(void)
{
	struct rank_plan p = { .size = 4, .cred = "good", .expect_state = 1, .iters = 40,
			       .sleep_us = 30000 };
	char text[1024];
	Inca__Am__V1__ListGroupsReply *g;

	start_switch(0, "name = spine0\nrole = spine\nlisten = 127.0.0.10:4791\n"
			"link = p1 peer leaf0\nlink = p2 peer leaf1\n");
	start_switch(1, "name = leaf0\nrole = leaf\nlisten = 127.0.0.11:4791\n"
			"link = up peer spine0\nlink = d1 peer h0 peer_addr 127.0.0.21\n"
			"link = d2 peer h1 peer_addr 127.0.0.22\n");
	start_switch(2, "name = leaf1\nrole = leaf\nlisten = 127.0.0.12:4791\n"
			"link = up peer spine0\nlink = d1 peer h2 peer_addr 127.0.0.23\n"
			"link = d2 peer h3 peer_addr 127.0.0.24\n");
	snprintf(text, sizeof text,
		 "heartbeat_ms = 200\npoll_ms = 200\njob job1 credential good\n"
		 "switch spine0 unix:%s/sw0.sock\nswitch leaf0 unix:%s/sw1.sock\n"
		 "switch leaf1 unix:%s/sw2.sock\n",
		 tmpdir, tmpdir, tmpdir);
	write_am_conf( text);
	start_am();
	run_ranks(&p, status_during);
	wait_no_groups();
	g = groups();
	if (g->n_groups != 0)
		die("groups left");
	protobuf_c_message_free_unpacked(&g->base, NULL);
	/* leave -> dismantled: the trees are gone from every switch (seen at the next poll) */
	for (int i = 0;; i++) {
		ProtobufCMessage *rp;
		Inca__Am__V1__Empty e = INCA__AM__V1__EMPTY__INIT;
		Inca__Am__V1__ListSwitchesReply *ls;
		uint32_t used = 0;
		if (admin_unary(chan, "ListSwitches", &e.base,
				 &inca__am__v1__list_switches_reply__descriptor, &rp, 3000, NULL, 0) < 0)
			die("ListSwitches");
		ls = (Inca__Am__V1__ListSwitchesReply *)rp;
		for (size_t k = 0; k < ls->n_switches; k++)
			used += ls->switches[k]->used_slots + ls->switches[k]->used_trees;
		protobuf_c_message_free_unpacked(rp, NULL);
		if (used == 0)
			break;
		if (i == 50)
			die("switches still hold trees after the group ended");
		usleep(100000);
	}
	stop_am();
}

static Inca__Am__V1__ListSwitchesReply *switches(void);

/* While the ranks run: kill the root spine once they reached kill_at. */
static void kill_root_during(void)
{
	for (int i = 0; i < 2400 && access(reached_flag, F_OK) != 0; i++)
		usleep(25000);
	kill(sw_pids[0], SIGKILL);
	waitpid(sw_pids[0], NULL, 0);
	sw_pids[0] = 0;
	write_file(killed_flag, "go\n");
}

static void case_failover(void)
{
	struct rank_plan p = { .size = 4, .cred = "good", .expect_state = 1, .iters = 100,
			       .sleep_us = 5000, .kill_at = 20, .write_keys = true };
	char text[2048], *ka, *kb;
	Inca__Am__V1__StatsReply *s;
	Inca__Am__V1__ListSwitchesReply *ls;

	/* spine0 has more slots: it is the root of the first tree */
	start_switch(0, "name = spine0\nrole = spine\nlisten = 127.0.7.10:4791\nmax_slots = 2048\n"
			"link = p1 peer leaf0\nlink = p2 peer leaf1\n");
	start_switch(1, "name = spine1\nrole = spine\nlisten = 127.0.7.13:4791\nmax_slots = 1024\n"
			"link = p1 peer leaf0\nlink = p2 peer leaf1\n");
	start_switch(2, "name = leaf0\nrole = leaf\nlisten = 127.0.7.11:4791\n"
			"link = up0 peer spine0\nlink = up1 peer spine1\n"
			"link = d1 peer h0 peer_addr 127.0.0.21\nlink = d2 peer h1 peer_addr 127.0.0.22\n");
	start_switch(3, "name = leaf1\nrole = leaf\nlisten = 127.0.7.12:4791\n"
			"link = up0 peer spine0\nlink = up1 peer spine1\n"
			"link = d1 peer h2 peer_addr 127.0.0.23\nlink = d2 peer h3 peer_addr 127.0.0.24\n");
	/* Polling every minute: only the ranks' failure reports can make the AM act. */
	snprintf(text, sizeof text,
		 "heartbeat_ms = 200\nheartbeat_misses = 10\npoll_ms = 60000\n"
		 "job job1 credential good\n"
		 "switch spine0 unix:%s/sw0.sock\nswitch spine1 unix:%s/sw1.sock\n"
		 "switch leaf0 unix:%s/sw2.sock\nswitch leaf1 unix:%s/sw3.sock\n",
		 tmpdir, tmpdir, tmpdir, tmpdir);
	write_am_conf( text);
	snprintf(reached_flag, sizeof reached_flag, "%s/reached", tmpdir);
	snprintf(killed_flag, sizeof killed_flag, "%s/killed", tmpdir);
	start_am();
	run_ranks(&p, kill_root_during);
	/* the rebuilt tree (generation 2) came with a new key and id, adopted by every rank */
	ka = same_key(p.size, 'a');
	kb = same_key(p.size, 'b');
	if (strcmp(strchr(ka + 2, ' '), strchr(kb + 2, ' ')) == 0 ||
	    strtoul(ka + 2, NULL, 10) == strtoul(kb + 2, NULL, 10))
		die("the rebuilt tree kept the key or its id: %s / %s", ka, kb);
	free(ka);
	free(kb);
	s = stats();
	fprintf(stderr, "failure reports: %llu acted on, %llu stale, %llu denied; rebuilds %llu\n",
		(unsigned long long)s->failure_reports, (unsigned long long)s->failure_reports_stale,
		(unsigned long long)s->failure_reports_denied, (unsigned long long)s->rebuilds);
	if (s->failure_reports != 1 || s->rebuilds != 1 || s->switch_failures != 1 ||
	    s->failure_reports + s->failure_reports_stale > 4 || s->failure_reports_denied != 0)
		die("failover: unexpected AM counters");
	protobuf_c_message_free_unpacked(&s->base, NULL);
	ls = switches();
	for (size_t i = 0; i < ls->n_switches; i++) {
		Inca__Am__V1__SwitchInfo *si = ls->switches[i];
		if (!strcmp(si->name, "spine0") && si->up)
			die("dead spine0 still up");
	}
	protobuf_c_message_free_unpacked(&ls->base, NULL);
	wait_no_groups();
	stop_am();
}

/* ---------------------------------------------------------------- security transports */

/* Run a shell command quietly; false if it failed. */
static bool sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	return system(cmd) == 0;
}

static int free_tcp_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0)
		die("free port");
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static char *slurp(const char *path)
{
	static char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;
	if (!f)
		die("cannot read %s", path);
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static Inca__Am__V1__ListSwitchesReply *switches(void)
{
	ProtobufCMessage *rp;
	Inca__Am__V1__Empty e = INCA__AM__V1__EMPTY__INIT;
	chan_open();
	if (admin_unary(chan, "ListSwitches", &e.base,
			 &inca__am__v1__list_switches_reply__descriptor, &rp, 3000, NULL, 0) < 0)
		die("ListSwitches");
	return (Inca__Am__V1__ListSwitchesReply *)rp;
}

/* The AM reaches inca-switch over NETCONF/SSH, public key only (lib/ctl ssh:// targets). */
static void case_ssh(void)
{
	struct rank_plan p = { .size = 3, .cred = "good", .expect_state = 1, .iters = 30 };
	char conf[300], ready[300], hostkey[300], authkeys[300], kh[300], badkh[300], text[2048];
	char listen[64];
	int port = free_tcp_port();
	Inca__Am__V1__ListSwitchesReply *ls;

	if (access("/usr/bin/ssh-keygen", X_OK) != 0) {
		printf("SKIP: ssh-keygen missing (openssh-client)\n");
		exit(77);
	}
	for (int i = 0; i < 3; i++) {
		static const char *const names[] = { "hostkey", "client", "stranger" };
		if (!sh("ssh-keygen -q -t ed25519 -N '' -C %s -f %s/%s </dev/null", names[i], tmpdir,
			names[i]))
			die("ssh-keygen");
	}
	snprintf(hostkey, sizeof hostkey, "%s/hostkey", tmpdir);
	snprintf(authkeys, sizeof authkeys, "%s/client.pub", tmpdir);
	/* known_hosts for a non-22 port: "[host]:port type key"; the bad one names the wrong key */
	snprintf(kh, sizeof kh, "%s/known_hosts", tmpdir);
	snprintf(badkh, sizeof badkh, "%s/bad_known_hosts", tmpdir);
	snprintf(conf, sizeof conf, "%s/hostkey.pub", tmpdir);
	snprintf(text, sizeof text, "[127.0.0.1]:%d %s", port, slurp(conf));
	write_file(kh, text);
	snprintf(conf, sizeof conf, "%s/stranger.pub", tmpdir);
	snprintf(text, sizeof text, "[127.0.0.1]:%d %s", port, slurp(conf));
	write_file(badkh, text);
	snprintf(conf, sizeof conf, "%s/sw0.conf", tmpdir);
	snprintf(ready, sizeof ready, "%s/sw0.ready", tmpdir);
	snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
	write_file(conf, "name = leaf0\nrole = leaf\nlisten = 127.0.6.11:4791\n"
			 "max_slots = 1024\nmax_trees = 8\n");
	sw_pids[0] = spawn((char *const[]){ (char *)sw_path, "-c", conf, "--netconf-ssh", listen,
					    "--netconf-hostkey", hostkey,
					    "--netconf-authorized-keys", authkeys, "--ready-file",
					    ready, NULL });
	nsw = 1;
	wait_file(ready, sw_pids[0]);
	snprintf(text, sizeof text,
		 "heartbeat_ms = 200\npoll_ms = 500\njob job1 credential good\n"
		 "switch leaf0 ssh://inca@127.0.0.1:%d key=%s/client known_hosts=%s\n"
		 "switch intruder ssh://inca@127.0.0.1:%d key=%s/stranger known_hosts=%s\n"
		 "switch spoofed ssh://inca@127.0.0.1:%d key=%s/client known_hosts=%s\n"
		 "attach 127.0.0.21 leaf0\nattach 127.0.0.22 leaf0\nattach 127.0.0.23 leaf0\n",
		 port, tmpdir, kh, port, tmpdir, kh, port, tmpdir, badkh);
	write_am_conf( text);
	start_am();
	run_ranks(&p, NULL);
	wait_no_groups();
	ls = switches();
	for (size_t i = 0; i < ls->n_switches; i++) {
		Inca__Am__V1__SwitchInfo *si = ls->switches[i];
		bool want_up = strcmp(si->name, "leaf0") == 0;
		fprintf(stderr, "switch %s: %s %s\n", si->name, si->up ? "up" : "down", si->last_error);
		if (si->up != want_up)
			die("switch %s is %s over SSH", si->name, si->up ? "up" : "down");
		if (!strcmp(si->name, "intruder") && !strstr(si->last_error, "refused the key"))
			die("intruder: '%s' does not say the key was refused", si->last_error);
		if (!strcmp(si->name, "spoofed") && !strstr(si->last_error, "host key"))
			die("spoofed: '%s' does not blame the host key", si->last_error);
		if (want_up && strcmp(si->data_addr, "127.0.6.11:4791") != 0)
			die("leaf0 over SSH: data address %s", si->data_addr);
	}
	if (ls->n_switches != 3)
		die("%zu switches", ls->n_switches);
	protobuf_c_message_free_unpacked(&ls->base, NULL);
	stop_am();
}

/* A CA, another CA and a certificate for 127.0.0.1 signed by the first, made by openssl. */
static void make_certs(void)
{
	char ext[300];
	const char *ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

	if (access("/usr/bin/openssl", X_OK) != 0) {
		printf("SKIP: openssl missing (the AM serves TLS only)\n");
		exit(77);
	}
	snprintf(ca_pem, sizeof ca_pem, "%s/ca.pem", tmpdir);
	snprintf(wrong_ca_pem, sizeof wrong_ca_pem, "%s/wrong_ca.pem", tmpdir);
	snprintf(am_crt, sizeof am_crt, "%s/am.crt", tmpdir);
	snprintf(am_key, sizeof am_key, "%s/am.key", tmpdir);
	snprintf(ext, sizeof ext, "%s/ext.cnf", tmpdir);
	write_file(ext, "subjectAltName = IP:127.0.0.1, DNS:localhost\n");
	if (!sh("cd %s && openssl req -x509 %s -keyout ca.key -out ca.pem -days 2 "
		"-subj '/CN=INCA test CA' 2>/dev/null && "
		"openssl req -x509 %s -keyout wrong_ca.key -out wrong_ca.pem -days 2 "
		"-subj '/CN=Another CA' 2>/dev/null && "
		"openssl req %s -keyout am.key -out am.csr -subj '/CN=127.0.0.1' 2>/dev/null && "
		"openssl x509 -req -in am.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
		"-extfile ext.cnf -out am.crt 2>/dev/null",
		tmpdir, ec, ec, ec))
		die("openssl could not make the certificates");
	/* the CLI children: the CA and the admin credential */
	setenv("INCA_AM_CA", ca_pem, 1);
	setenv("INCA_ADMIN_TOKEN", ADMIN_TOKEN, 1);
}

static void case_tls(void)
{
	struct rank_plan p = { .size = 2, .cred = "good", .expect_state = 2, .iters = 10 };
	struct rank_plan wrong = { .size = 1, .cred = "good", .fail_within_ms = 8000 };
	struct rank_plan plain = { .size = 1, .cred = "good", .fail_within_ms = 8000,
				   .insecure = true };
	char cmd[1024], out[4096];
	FILE *f;
	size_t n;

	write_am_conf("heartbeat_ms = 200\npoll_ms = 200\njob job1 credential good\n");
	start_am();
	run_ranks(&p, NULL); /* joined over TLS, HOST_FALLBACK (no switch), ring exact */
	wrong.tls_ca = wrong_ca_pem;
	run_ranks(&wrong, NULL); /* the AM's certificate is not signed by the CA it trusts */
	run_ranks(&plain, NULL); /* plaintext client against the TLS port */
	/* The CLI over TLS, and with the wrong CA: one clear line, at once */
	snprintf(cmd, sizeof cmd, "%s --am %s --ca %s --timeout-ms 3000 stats 2>&1", cli_path,
		 am_addr, ca_pem);
	f = popen(cmd, "r");
	n = f ? fread(out, 1, sizeof out - 1, f) : 0;
	out[n] = '\0';
	if (!f || pclose(f) != 0 || !strstr(out, "denials:"))
		die("inca --ca stats over TLS failed:\n%s", out);
	fputs(out, stderr);
	snprintf(cmd, sizeof cmd, "%s --am %s --ca %s --timeout-ms 2000 stats 2>&1 >/dev/null",
		 cli_path, am_addr, wrong_ca_pem);
	f = popen(cmd, "r");
	n = f ? fread(out, 1, sizeof out - 1, f) : 0;
	out[n] = '\0';
	if (!f || pclose(f) == 0)
		die("inca with the wrong CA succeeded");
	fprintf(stderr, "inca with the wrong CA: %s", out);
	if (!strstr(out, "not signed by the CA") || strchr(out, '\n') != out + n - 1)
		die("inca with the wrong CA: not one clear line:\n%s", out);
	wait_no_groups();
	stop_am();
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: am_test fallback|inc|twolevel AM SWITCH INCA-CLI ctl|noctl\n");
		return 2;
	}
	am_path = argv[2];
	sw_path = argv[3];
	cli_path = argv[4];
	if (strcmp(argv[1], "fallback") != 0 && strcmp(argv[1], "tls") != 0 &&
	    strcmp(argv[5], "ctl") != 0) {
		printf("SKIP: inca-am built without lib/ctl (NETCONF)\n");
		return 77;
	}
	/* These tests check the AM's trees: AUTO must take INC whenever it is on, not let the
	 * size tuner (coll.c) move some calls to the host ring. */
	setenv("INCA_TUNE", "off", 1);
	signal(SIGALRM, on_alarm);
	alarm(100);
	snprintf(tmpdir, sizeof tmpdir, "/tmp/inca-am-test.XXXXXX");
	if (!mkdtemp(tmpdir))
		die("mkdtemp");
	snprintf(am_addr, sizeof am_addr, "127.0.0.1:%d", free_tcp_port());
	snprintf(journal, sizeof journal, "%s/am.journal", tmpdir);
	snprintf(am_conf, sizeof am_conf, "%s/am.conf", tmpdir);
	make_certs();
	if (!strcmp(argv[1], "fallback"))
		case_fallback();
	else if (!strcmp(argv[1], "inc"))
		case_inc();
	else if (!strcmp(argv[1], "full"))
		case_full();
	else if (!strcmp(argv[1], "twolevel"))
		case_twolevel();
	else if (!strcmp(argv[1], "failover"))
		case_failover();
	else if (!strcmp(argv[1], "ssh"))
		case_ssh();
	else if (!strcmp(argv[1], "tls"))
		case_tls();
	else
		die("unknown case %s", argv[1]);
	if (chan) {
		grpc_channel_destroy(chan);
		grpc_shutdown();
	}
	cleanup();
	printf("am_test %s: ok\n", argv[1]);
	return 0;
}
