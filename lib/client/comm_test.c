/* Unit tests for the libinca communicator: option validation and defaults, argument checks
 * of the collectives, size-1 communicators (copy semantics), strerror, two communicators in
 * one process, data-plane socket binding, the external bootstrap (peer handles exchanged by
 * the caller: threads of this process), the struct sizes of the ABI rule. Public API only. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>

#include "client/client_test_util.h"

static int log_calls;

static void count_log(void *ctx, int level, const char *msg)
{
	(void)ctx;
	(void)level;
	(void)msg;
	log_calls++;
}

static int try_create(const struct inca_comm_opts *o)
{
	struct inca_comm *c = (struct inca_comm *)0x1;
	int rc = inca_comm_create(o, &c);

	if (rc == 0)
		inca_comm_destroy(c);
	else
		CHECK(c == NULL);
	return rc;
}

static struct inca_comm_opts base(void)
{
	struct inca_comm_opts o;

	inca_comm_opts_init(&o);
	o.size = 1;
	return o;
}

static void test_validation(void)
{
	struct inca_comm_opts o;
	struct inca_comm *c;

	CHECK_EQ(inca_comm_create(NULL, &c), -EINVAL);
	o = base();
	CHECK_EQ(inca_comm_create(&o, NULL), -EINVAL);
	CHECK_EQ(try_create(&o), 0);

#define BAD(stmt)                                       \
	do {                                            \
		o = base();                             \
		stmt;                                   \
		CHECK_EQ(try_create(&o), -EINVAL);      \
	} while (0)
	BAD(o.size = 0);
	BAD(o.size = -3);
	BAD(o.rank = -1);
	BAD(o.rank = 1);
	BAD((o.size = 2, o.rank = 0)); /* size > 1 needs bootstrap_addr */
	BAD((o.size = 2, o.bootstrap_addr = "127.0.0.1"));    /* port required */
	BAD((o.size = 2, o.bootstrap_addr = "127.0.0.1:0"));  /* port 0 */
	BAD((o.size = 2, o.bootstrap_addr = "0.0.0.0:1234")); /* not a concrete address */
	BAD(o.bootstrap_addr = "localhost:1234");
	BAD(o.host_ip = "nope");
	BAD(o.host_ip = "0.0.0.0");
	BAD(o.host_ip = "127.0.0.1:5");
	BAD(o.switch_addr = "1.2.3");
	BAD(o.switch_addr = "0.0.0.0:4791");
	BAD(o.switch_addr = "127.0.0.1:70000");
	BAD(o.data_addr = "0.0.0.0:0"); /* the ICRC needs our real source address */
	BAD(o.data_addr = "x:1");
	BAD(o.bsl_bits = 100);
	BAD(o.bsl_bits = 32);
	BAD(o.bsl_bits = 8192);
	BAD(o.mtu = 128);
	BAD(o.mtu = 5000);
	BAD((o.mtu = 256, o.bsl_bits = 4096)); /* header alone exceeds the MTU */
	BAD((o.rto_us = 1000, o.rto_max_us = 999));
	BAD(o.drop_rate = 1.0);
	BAD(o.drop_rate = -0.1);
	BAD(o.drop_rate = NAN);
	BAD(o.qpn = 0x1000000);
	BAD(o.switch_qpn = 0x1000000);
	BAD(o.bfr_id = 65535); /* SI = 65534 / 64 > 255 */
#undef BAD

	/* Valid corner values. */
	o = base();
	o.bsl_bits = 4096;
	o.mtu = 4096;
	o.bfr_id = 65535; /* SI 15 with BSL 4096 */
	o.qpn = 0xFFFFFF;
	o.rto_us = 5;
	CHECK_EQ(try_create(&o), 0);
	o = base();
	o.host_ip = "127.0.0.1";
	o.drop_rate = 0.5;
	o.log_fn = count_log;
	o.log_level = 3;
	CHECK_EQ(try_create(&o), 0);
}

/* An options struct exactly n bytes long on the heap (as an older binary's smaller struct
 * would be): under AddressSanitizer any read beyond n is caught. */
static int create_sized(const struct inca_comm_opts *full, size_t n)
{
	unsigned char *buf = malloc(n);
	int rc;

	CHECK(buf != NULL);
	memcpy(buf, full, n < sizeof *full ? n : sizeof *full);
	if (n > sizeof *full)
		memset(buf + sizeof *full, 0, n - sizeof *full);
	((struct inca_comm_opts *)(void *)buf)->struct_size = (uint32_t)n;
	rc = try_create((const struct inca_comm_opts *)(void *)buf);
	free(buf);
	return rc;
}

/* The whole struct in memory, fields past n set, but struct_size = n: they must be ignored. */
static int create_claiming(struct inca_comm_opts o, size_t n)
{
	o.struct_size = (uint32_t)n;
	return try_create(&o);
}

/* The ABI rule of inca.h: the library reads only struct_size bytes of the options and writes
 * only out_size bytes of every output struct. */
static void test_struct_sizes(void)
{
	struct inca_comm_opts o = base();
	struct inca_comm_opts lit = INCA_COMM_OPTS_INIT;
	struct inca_comm *c;
	const size_t before_am = offsetof(struct inca_comm_opts, am_addr);
	const size_t before_no_auth = offsetof(struct inca_comm_opts, no_auth);

	CHECK_EQ(lit.struct_size, sizeof lit);
	CHECK_EQ(o.struct_size, sizeof o);
	o.struct_size = 0; /* zero-initialised without the init function */
	CHECK_EQ(try_create(&o), -EINVAL);
	CHECK(strstr(inca_strerror(-EINVAL), "struct size") != NULL);
	o = base();
	CHECK_EQ(create_sized(&o, INCA_COMM_OPTS_SIZE_MIN - 1), -EINVAL);
	CHECK_EQ(create_sized(&o, INCA_COMM_OPTS_SIZE_MIN), 0);

	/* An older caller whose struct ends before am_addr: the AM fields take their defaults
	 * (no AM). Read, this am_addr without a job_id would fail the create. */
	o.am_addr = "127.0.0.1:1";
	CHECK_EQ(create_claiming(o, sizeof o), -EINVAL);
	CHECK_EQ(create_claiming(o, before_am), 0);
	CHECK_EQ(create_sized(&o, before_am), 0);
	o = base();

	/* A field beyond struct_size is not read even when the caller set it: no_auth. */
	o.switch_addr = "127.0.0.1:4791";
	o.data_addr = "127.0.0.1:0";
	o.no_auth = 1;
	CHECK_EQ(create_claiming(o, before_no_auth), -ENOKEY);
	CHECK_EQ(create_claiming(o, before_no_auth + sizeof o.no_auth), 0);
	o = base();

	/* A newer caller's larger struct: fine while the fields this library lacks are 0. */
	CHECK_EQ(create_sized(&o, sizeof o + 16), 0);
	{
		unsigned char big[sizeof o + 16];

		memset(big, 0, sizeof big);
		memcpy(big, &o, sizeof o);
		((struct inca_comm_opts *)(void *)big)->struct_size = sizeof big;
		big[sizeof o + 3] = 1;
		CHECK_EQ(try_create((const struct inca_comm_opts *)(void *)big), -E2BIG);
		CHECK(strstr(inca_strerror(-E2BIG), "newer") != NULL);
	}

	/* Output structs: out_size 0 or below the first fields is refused; an older (smaller)
	 * struct gets its prefix, bytes past out_size stay untouched. */
	o = base();
	CHECK_EQ(inca_comm_create(&o, &c), 0);
	{
		int32_t x = 5;
		struct inca_comm_stats st;
		struct inca_auth_stats as;
		struct inca_io_stats io[2];
		struct inca_coll_counts cc;
		struct inca_am_info ai;
		const size_t auth_old = offsetof(struct inca_auth_stats, rx_replay);

		CHECK_EQ(inca_allreduce_algo(c, &x, &x, 1, INCA_INT32, INCA_SUM, INCA_ALGO_RING), 0);
		CHECK_EQ(inca_comm_get_stats(c, &st, 0), -EINVAL);
		CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st - 8), -EINVAL);
		CHECK_EQ(inca_comm_get_stats(c, &st, sizeof st), 0);
		CHECK_EQ(st.ring_calls, 1);

		memset(&as, 0xab, sizeof as);
		CHECK_EQ(inca_comm_get_auth_stats(c, &as, 0), -EINVAL);
		CHECK_EQ(inca_comm_get_auth_stats(c, &as, auth_old - 1), -EINVAL);
		CHECK_EQ(inca_comm_get_auth_stats(c, &as, auth_old), 0);
		CHECK_EQ(as.enabled, 0);
		CHECK_EQ(as.rx_replay, 0xababababababababull); /* past out_size */
		CHECK_EQ(as.opted_out, (int)0xabababab);

		memset(io, 0xcd, sizeof io);
		CHECK_EQ(inca_comm_get_io_stats(c, &io[0], 0), -EINVAL);
		CHECK_EQ(inca_comm_get_io_stats(c, &io[0], sizeof io), 0); /* a newer, larger one */
		CHECK_EQ(io[0].tx_syscalls, 0);
		CHECK_EQ(io[1].gso, (int)0xcdcdcdcd);

		CHECK_EQ(inca_comm_get_coll_counts(c, &cc, 0), -EINVAL);
		CHECK_EQ(inca_comm_get_coll_counts(c, &cc, sizeof cc), 0);
		CHECK_EQ(cc.calls[INCA_COLL_ALLREDUCE][INCA_ALGO_RING], 1);
		CHECK_EQ(cc.calls[INCA_COLL_COUNT][0], 0); /* no such collective yet */

		CHECK_EQ(inca_comm_am_info(c, &ai, 0), -EINVAL);
		CHECK_EQ(inca_comm_am_info(c, &ai, sizeof ai), -ENOTSUP);
	}
	inca_comm_destroy(c);
}

static void test_size1(void)
{
	struct inca_comm_opts o = base();
	struct inca_comm *a, *b;
	struct inca_comm_stats st;
	int32_t in[5] = { 1, -2, 3, -4, 5 }, out[5] = { 0 }, inplace[5] = { 7, 8, 9, 10, 11 };
	double f[3] = { 1.5, -2.25, 3.0 }, fo[3];

	CHECK_EQ(inca_comm_create(&o, &a), 0);
	CHECK_EQ(inca_comm_create(&o, &b), 0); /* no global state: two in one process */
	CHECK_EQ(inca_comm_rank(a), 0);
	CHECK_EQ(inca_comm_size(a), 1);
	CHECK_EQ(inca_comm_rank(NULL), -EINVAL);

	CHECK_EQ(inca_allreduce(a, in, out, 5, INCA_INT32, INCA_SUM), 0);
	CHECK(memcmp(in, out, sizeof in) == 0);
	CHECK_EQ(inca_allreduce(b, inplace, inplace, 5, INCA_INT32, INCA_MAX), 0);
	CHECK_EQ(inplace[4], 11);
	CHECK_EQ(inca_allreduce_algo(a, f, fo, 3, INCA_FP64, INCA_PROD, INCA_ALGO_RING), 0);
	CHECK(memcmp(f, fo, sizeof f) == 0);
	CHECK_EQ(inca_barrier(a), 0);

	/* Argument checks. */
	CHECK_EQ(inca_allreduce(a, NULL, NULL, 0, INCA_INT32, INCA_SUM), 0);
	CHECK_EQ(inca_allreduce(NULL, in, out, 5, INCA_INT32, INCA_SUM), -EINVAL);
	CHECK_EQ(inca_allreduce(a, in, out, 5, (enum inca_dtype)INCA_DTYPE_COUNT, INCA_SUM), -EINVAL);
	CHECK_EQ(inca_allreduce(a, in, out, 5, (enum inca_dtype)-1, INCA_SUM), -EINVAL);
	CHECK_EQ(inca_allreduce(a, in, out, 5, INCA_INT32, (enum inca_op)INCA_OP_COUNT), -EINVAL);
	CHECK_EQ(inca_allreduce_algo(a, in, out, 5, INCA_INT32, INCA_SUM, (enum inca_algo)99), -EINVAL);
	CHECK_EQ(inca_allreduce(a, f, fo, 3, INCA_FP64, INCA_BXOR), -ENOTSUP);
	CHECK_EQ(inca_allreduce_algo(a, in, out, 5, INCA_INT32, INCA_SUM, INCA_ALGO_INC), -ENOTSUP);
	CHECK_EQ(inca_allreduce(a, NULL, out, 5, INCA_INT32, INCA_SUM), -EINVAL);
	CHECK_EQ(inca_allreduce(a, in, in + 1, 4, INCA_INT32, INCA_SUM), -EINVAL); /* overlap */
	CHECK_EQ(inca_allreduce(a, in, out, SIZE_MAX / 2, INCA_INT32, INCA_SUM), -EINVAL);

	CHECK_EQ(inca_comm_get_stats(a, NULL, sizeof(struct inca_comm_stats)), -EINVAL);
	CHECK_EQ(inca_comm_get_stats(a, &st, sizeof st), 0);
	CHECK_EQ(st.ring_calls, 2);
	CHECK_EQ(st.inc_calls, 0);
	CHECK_EQ(st.tx_pkts, 0);
	inca_comm_destroy(a);
	inca_comm_destroy(b);
	inca_comm_destroy(NULL);
}

static void test_data_socket(void)
{
	struct inca_comm_opts o = base();
	struct inca_comm *a, *b;
	char addr[32];
	int port = 23000 + (int)(getpid() % 1000);

	/* A switch address needs a data-plane key or an explicit opt-out. */
	o.switch_addr = "127.0.0.1:4791";
	o.data_addr = "127.0.0.1:0";
	CHECK_EQ(inca_comm_create(&o, &a), -ENOKEY);
	setenv("INCA_AUTH", "maybe", 1);
	CHECK_EQ(inca_comm_create(&o, &a), -EINVAL);
	setenv("INCA_AUTH", "on", 1);
	CHECK_EQ(inca_comm_create(&o, &a), -ENOKEY);
	setenv("INCA_AUTH", "off", 1);
	CHECK_EQ(inca_comm_create(&o, &a), 0);
	inca_comm_destroy(a);
	unsetenv("INCA_AUTH");
	{
		static const uint8_t k[INCA_AUTH_KEY_BYTES] = { 1, 2, 3 };
		struct inca_auth_stats st;

		o.auth_key = k;
		o.auth_key_id = 4;
		CHECK_EQ(inca_comm_create(&o, &a), 0);
		CHECK_EQ(inca_comm_get_auth_stats(a, &st, sizeof st), 0);
		CHECK(st.enabled == 1 && st.key_id == 4);
		inca_comm_destroy(a);
		o.auth_key = NULL;
		o.auth_key_id = 0;
	}
	CHECK(strstr(inca_strerror(-ENOKEY), "INCA_AUTH=off") != NULL);
	/* Opted out: port 0 means any. */
	o.no_auth = 1;
	CHECK_EQ(inca_comm_create(&o, &a), 0);
	{
		struct inca_auth_stats st;
		CHECK_EQ(inca_comm_get_auth_stats(a, &st, sizeof st), 0);
		CHECK_EQ(st.enabled, 0);
	}
	CHECK_EQ(inca_comm_create(&o, &b), 0);
	inca_comm_destroy(b);
	inca_comm_destroy(a);

	/* The same explicit port twice: the second fails with -EADDRINUSE. */
	for (int tries = 0; tries < 50; tries++, port++) {
		int rc;
		snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
		o.data_addr = addr;
		rc = inca_comm_create(&o, &a);
		if (rc == -EADDRINUSE)
			continue;
		CHECK_EQ(rc, 0);
		CHECK_EQ(inca_comm_create(&o, &b), -EADDRINUSE);
		inca_comm_destroy(a);
		return;
	}
	CHECK(!"no free port");
}

static void test_strerror(void)
{
	int errs[] = { 0, -EINVAL, -ENOTSUP, -ETIMEDOUT, -EIO, -EPROTO, -EADDRINUSE, -ENOMEM, -12345 };

	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
		const char *s = inca_strerror(errs[i]);
		CHECK(s != NULL && s[0] != 0);
	}
	CHECK(strcmp(inca_strerror(-EINVAL), inca_strerror(EINVAL)) == 0);
	CHECK(strcmp(inca_strerror(-ETIMEDOUT), inca_strerror(-EINVAL)) != 0);
}

static void test_dtype_exports(void)
{
	/* Implemented in lib/agg/dtype.c, exported by libinca. */
	CHECK_EQ(inca_dtype_size(INCA_FP16), 2);
	CHECK_EQ(inca_dtype_size(INCA_UINT64), 8);
	CHECK(strcmp(inca_dtype_name(INCA_FP32), "fp32") == 0);
	CHECK(strcmp(inca_op_name(INCA_SUM), "sum") == 0);
	CHECK_EQ(inca_dtype_parse("int16"), INCA_INT16);
	CHECK_EQ(inca_op_parse("max"), INCA_MAX);
	CHECK_EQ(inca_op_valid(INCA_FP32, INCA_BAND), 0);
	CHECK_EQ(inca_op_valid(INCA_INT8, INCA_BAND), 1);
	/* The version map hides everything that is not inca_*. */
	CHECK(dlsym(RTLD_DEFAULT, "inca_comm_create") != NULL);
	CHECK(dlsym(RTLD_DEFAULT, "agg_reduce") == NULL);
	CHECK(dlsym(RTLD_DEFAULT, "wire_encode_udp") == NULL);
	CHECK(dlsym(RTLD_DEFAULT, "client_cfg_resolve") == NULL);
	CHECK(dlsym(RTLD_DEFAULT, "util_now_ns") == NULL);
}

/* ---- external bootstrap */

#define PEERS 4

struct peer_rank {
	int rank;
	const uint8_t *table;
	struct inca_peer_listener *l;
	int rc;
	double sum;
};

static void *peer_main(void *arg)
{
	struct peer_rank *p = arg;
	struct inca_comm_opts o = base();
	struct inca_comm *c;
	double x[1000];

	o.rank = p->rank;
	o.size = PEERS;
	o.peer_table = p->table;
	o.peer_listener = p->l;
	o.timeout_ms = 20000;
	p->rc = inca_comm_create(&o, &c);
	if (p->rc < 0)
		return NULL;
	for (int i = 0; i < 1000; i++)
		x[i] = p->rank + i;
	p->rc = inca_allreduce(c, x, x, 1000, INCA_FP64, INCA_SUM);
	p->sum = x[999];
	if (p->rc == 0)
		p->rc = inca_barrier(c);
	inca_comm_destroy(c);
	return NULL;
}

static void test_peer_bootstrap(void)
{
	uint8_t table[PEERS * INCA_PEER_HANDLE_BYTES], bad[2 * INCA_PEER_HANDLE_BYTES];
	struct peer_rank pr[PEERS];
	pthread_t th[PEERS];
	struct inca_peer_listener *l, *l2;
	struct inca_comm_opts o;
	struct inca_comm *c;

	CHECK_EQ(inca_peer_listen("0.0.0.0", &l, table), -EINVAL);
	CHECK_EQ(inca_peer_listen("127.0.0.1:5", &l, table), -EINVAL);
	CHECK_EQ(inca_peer_listen(NULL, NULL, table), -EINVAL);
	inca_peer_listener_close(NULL);

	/* Every rank's handle gathered by the caller, in rank order. */
	for (int r = 0; r < PEERS; r++) {
		CHECK_EQ(inca_peer_listen("127.0.0.1", &pr[r].l, table + r * INCA_PEER_HANDLE_BYTES),
			 0);
		pr[r].rank = r;
		pr[r].table = table;
	}
	for (int r = 0; r < PEERS; r++)
		CHECK_EQ(pthread_create(&th[r], NULL, peer_main, &pr[r]), 0);
	for (int r = 0; r < PEERS; r++) {
		CHECK_EQ(pthread_join(th[r], NULL), 0);
		CHECK_EQ(pr[r].rc, 0);
		/* sum over ranks of (rank + 999) */
		CHECK(pr[r].sum == 0 + 1 + 2 + 3 + PEERS * 999.0);
	}

	/* Misuse: refused before any peer is contacted, the listener consumed each time. */
	o = base();
	o.size = 2;
	CHECK_EQ(inca_peer_listen("127.0.0.1", &l, bad), 0);
	CHECK_EQ(inca_peer_listen("127.0.0.1", &l2, bad + INCA_PEER_HANDLE_BYTES), 0);
	o.peer_table = bad; /* no listener */
	CHECK_EQ(inca_comm_create(&o, &c), -EINVAL);
	o.peer_table = NULL;
	o.peer_listener = l2; /* no table */
	CHECK_EQ(inca_comm_create(&o, &c), -EINVAL);
	o.peer_table = bad;
	o.peer_listener = l;
	o.bootstrap_addr = "127.0.0.1:1234"; /* both ways at once */
	CHECK_EQ(inca_comm_create(&o, &c), -EINVAL);
	o.bootstrap_addr = NULL;

	/* rank 1 with rank 0's listener */
	CHECK_EQ(inca_peer_listen("127.0.0.1", &l, bad), 0);
	CHECK_EQ(inca_peer_listen("127.0.0.1", &l2, bad + INCA_PEER_HANDLE_BYTES), 0);
	inca_peer_listener_close(l2);
	o.rank = 1;
	o.peer_listener = l;
	CHECK_EQ(inca_comm_create(&o, &c), -EINVAL);
	/* the same handle twice */
	CHECK_EQ(inca_peer_listen("127.0.0.1", &l, bad), 0);
	memcpy(bad + INCA_PEER_HANDLE_BYTES, bad, INCA_PEER_HANDLE_BYTES);
	o.rank = 0;
	o.peer_listener = l;
	CHECK_EQ(inca_comm_create(&o, &c), -EINVAL);
	/* not a handle */
	CHECK_EQ(inca_peer_listen("127.0.0.1", &l, bad), 0);
	memset(bad + INCA_PEER_HANDLE_BYTES, 0xa5, INCA_PEER_HANDLE_BYTES);
	o.peer_listener = l;
	CHECK_EQ(inca_comm_create(&o, &c), -EINVAL);
}

int main(void)
{
	test_validation();
	test_struct_sizes();
	test_size1();
	test_data_socket();
	test_strerror();
	test_dtype_exports();
	test_peer_bootstrap();
	CHECK_EQ(log_calls > 0, 1); /* the one create with a log_fn logged "ready" */
	printf("comm_test: ok\n");
	return 0;
}
