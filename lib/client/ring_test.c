/* Unit tests for the host path over loopback TCP: ring AllReduce with 2-4 forked ranks for
 * every integer type and op (exact results checked against an independent reference), floats
 * with exactly representable data, sizes 0/1/odd/10 MB, in-place and out-of-place, barrier,
 * rank disagreement (-EPROTO), a dead peer, an idle timeout, ranks as threads of one process, and
 * a bootstrap whose hellos arrive seconds after their connections while strangers stay silent. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "agg/agg_ref.h"
#include "client/client_test_util.h"

#define PORT_BASE 21000

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static bool dt_signed(enum inca_dtype dt)
{
	return dt == INCA_INT8 || dt == INCA_INT16 || dt == INCA_INT32 || dt == INCA_INT64;
}

/* Integer lanes as 64-bit values: sign-extended for signed types. */
static uint64_t ld(const void *p, size_t i, enum inca_dtype dt)
{
	size_t w = inca_dtype_size(dt);
	uint64_t v = 0;

	memcpy(&v, (const uint8_t *)p + i * w, w); /* little-endian host */
	if (dt_signed(dt) && w < 8 && (v >> (w * 8 - 1)) & 1)
		v |= ~0ull << (w * 8);
	return v;
}

static void st(void *p, size_t i, enum inca_dtype dt, uint64_t v)
{
	memcpy((uint8_t *)p + i * inca_dtype_size(dt), &v, inca_dtype_size(dt));
}

static void fill(void *buf, size_t count, enum inca_dtype dt, enum inca_op op, int rank, uint64_t seed)
{
	for (size_t i = 0; i < count; i++) {
		uint64_t h = mix(seed ^ ((uint64_t)rank << 40) ^ i);
		if (dt == INCA_FP32) /* small integers: every order of summation is exact */
			((float *)buf)[i] = op == INCA_PROD ? (float)((int)(h % 3) - 1) * 2.0f
							    : (float)((int64_t)(h % 2001) - 1000);
		else if (dt == INCA_FP64)
			((double *)buf)[i] = op == INCA_PROD ? (double)((int)(h % 5) - 2)
							     : (double)((int64_t)(h % 200001) - 100000) / 4.0;
		else
			st(buf, i, dt, h);
	}
}

/* Independent reference: acc = acc OP other, integer arithmetic mod 2^width. */
static void ref_reduce(void *acc, const void *other, size_t count, enum inca_dtype dt, enum inca_op op)
{
	for (size_t i = 0; i < count; i++) {
		if (dt == INCA_FP32) {
			float *a = (float *)acc + i;
			*a = agg_ref_f32(op, *a, ((const float *)other)[i]);
			continue;
		}
		if (dt == INCA_FP64) {
			double *a = (double *)acc + i;
			*a = agg_ref_f64(op, *a, ((const double *)other)[i]);
			continue;
		}
		st(acc, i, dt, agg_ref_int(op, ld(acc, i, dt), ld(other, i, dt), dt_signed(dt)));
	}
}

/* One AllReduce on every rank; each rank recomputes the expected result locally. */
static int check_allreduce(struct inca_comm *c, int rank, int n, enum inca_dtype dt, enum inca_op op,
			   size_t count, bool inplace, uint64_t seed)
{
	size_t bytes = count * inca_dtype_size(dt) + 1;
	uint8_t *in = malloc(bytes), *out = malloc(bytes), *exp = malloc(bytes), *tmp = malloc(bytes);
	int rc, bad = 0;

	CHECK(in && out && exp && tmp);
	fill(in, count, dt, op, rank, seed);
	fill(exp, count, dt, op, 0, seed);
	for (int r = 1; r < n; r++) {
		fill(tmp, count, dt, op, r, seed);
		ref_reduce(exp, tmp, count, dt, op);
	}
	memset(out, 0xA5, bytes);
	if (inplace) {
		rc = inca_allreduce_algo(c, in, in, count, dt, op, INCA_ALGO_RING);
		memcpy(out, in, bytes - 1);
	} else {
		memcpy(tmp, in, bytes);
		rc = inca_allreduce_algo(c, in, out, count, dt, op, INCA_ALGO_RING);
		if (memcmp(tmp, in, bytes) != 0)
			bad = 1; /* sendbuf must be left alone */
		if (out[bytes - 1] != 0xA5)
			bad = 1; /* no write past the end */
	}
	if (rc != 0 || bad || memcmp(out, exp, bytes - 1) != 0) {
		fprintf(stderr, "rank %d: allreduce %s/%s count %zu inplace %d n %d: rc %d bad %d mismatch\n",
			rank, inca_dtype_name(dt), inca_op_name(op), count, (int)inplace, n, rc, bad);
		bad = 1;
	}
	free(in);
	free(out);
	free(exp);
	free(tmp);
	return bad;
}

static int rank_matrix(struct inca_comm *c, int rank, int n, void *arg)
{
	static const size_t counts[] = { 1, 2, 3, 5, 1000, 12345 };
	uint64_t seed = 1;

	(void)arg;
	CHECK_EQ(inca_comm_rank(c), rank);
	CHECK_EQ(inca_comm_size(c), n);
	CHECK_EQ(inca_allreduce_algo(c, NULL, NULL, 0, INCA_INT32, INCA_SUM, INCA_ALGO_RING), 0);
	for (int dt = 0; dt < INCA_DTYPE_COUNT; dt++) {
		if (dt == INCA_FP16 || dt == INCA_BF16)
			continue; /* rounding of 16-bit floats is lib/agg's test matter */
		for (int op = 0; op < INCA_OP_COUNT; op++) {
			if (!inca_op_valid((enum inca_dtype)dt, (enum inca_op)op))
				continue;
			for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
				if (check_allreduce(c, rank, n, (enum inca_dtype)dt, (enum inca_op)op, counts[k],
						    (k + (size_t)op) % 2 == 0, seed++))
					return 1;
		}
	}
	/* 10 MB, both forms. */
	if (check_allreduce(c, rank, n, INCA_INT32, INCA_SUM, (10u << 20) / 4, false, seed++) ||
	    check_allreduce(c, rank, n, INCA_UINT8, INCA_BXOR, (1u << 20) + 7, true, seed++))
		return 1;
	/* AUTO without a switch takes the ring. */
	int32_t v = rank + 1, s = 0;
	CHECK_EQ(inca_allreduce(c, &v, &s, 1, INCA_INT32, INCA_SUM), 0);
	CHECK_EQ(s, n * (n + 1) / 2);
	struct inca_comm_stats stt;
	CHECK_EQ(inca_comm_get_stats(c, &stt, sizeof stt), 0);
	CHECK(stt.ring_calls > 50 && stt.inc_calls == 0);
	return 0;
}

static int rank_barrier(struct inca_comm *c, int rank, int n, void *arg)
{
	atomic_int *entered = arg;

	for (int it = 0; it < 20; it++) {
		if (rank == it % n)
			usleep(20000); /* a late rank: everyone else must wait for it */
		atomic_fetch_add(&entered[it], 1);
		CHECK_EQ(inca_barrier(c), 0);
		CHECK_EQ(atomic_load(&entered[it]), n);
	}
	return 0;
}

static int rank_mismatch(struct inca_comm *c, int rank, int n, void *arg)
{
	int32_t buf[16] = { 0 };

	(void)n;
	(void)arg;
	CHECK_EQ(inca_allreduce_algo(c, buf, buf, 4, INCA_INT32, INCA_SUM, INCA_ALGO_RING), 0);
	/* Rank 0 reduces 10 elements, rank 1 eleven: both must refuse, not mix streams. */
	CHECK_EQ(inca_allreduce_algo(c, buf, buf, 10 + (size_t)rank, INCA_INT32, INCA_SUM, INCA_ALGO_RING),
		 -EPROTO);
	/* The host path stays broken: -EIO, or -ECONNRESET once the other rank has left. */
	int rc = inca_barrier(c);
	CHECK(rc == -EIO || rc == -ECONNRESET);
	return 0;
}

static int rank_dead_peer(struct inca_comm *c, int rank, int n, void *arg)
{
	int32_t buf[1000] = { 0 };
	int rc;

	(void)n;
	(void)arg;
	if (rank == 1)
		return 0; /* leaves: its sockets close */
	rc = inca_allreduce_algo(c, buf, buf, 1000, INCA_INT32, INCA_SUM, INCA_ALGO_RING);
	CHECK(rc == -ECONNRESET || rc == -EPIPE);
	return 0;
}

static int rank_idle(struct inca_comm *c, int rank, int n, void *arg)
{
	int32_t buf[4] = { 0 };

	(void)n;
	(void)arg;
	if (rank == 1) {
		usleep(2500 * 1000); /* alive but never joins the collective */
		return 0;
	}
	CHECK_EQ(inca_allreduce_algo(c, buf, buf, 4, INCA_INT32, INCA_SUM, INCA_ALGO_RING), -ETIMEDOUT);
	return 0;
}

/* Ranks as threads: communicators of one process share nothing. */
struct thr {
	int rank, n, rc;
	const char *addr;
};

static void *thr_main(void *p)
{
	struct thr *t = p;
	struct inca_comm_opts o = { .struct_size = sizeof o, .rank = t->rank, .size = t->n, .bootstrap_addr = t->addr, .timeout_ms = 10000 };
	struct inca_comm *c;
	int64_t buf[3001];

	t->rc = inca_comm_create(&o, &c);
	if (t->rc < 0)
		return NULL;
	for (int it = 0; it < 5 && t->rc == 0; it++) {
		for (int i = 0; i < 3001; i++)
			buf[i] = (int64_t)i * (t->rank + 1) - it;
		t->rc = inca_allreduce_algo(c, buf, buf, 3001, INCA_INT64, INCA_SUM, INCA_ALGO_RING);
		for (int i = 0; i < 3001 && t->rc == 0; i++)
			if (buf[i] != (int64_t)i * t->n * (t->n + 1) / 2 - (int64_t)it * t->n)
				t->rc = -EBADMSG;
	}
	if (t->rc == 0)
		t->rc = inca_barrier(c);
	inca_comm_destroy(c);
	return NULL;
}

static void test_threads(void)
{
	enum { N = 3 };
	for (int attempt = 0; attempt < 20; attempt++) {
		char addr[32];
		struct thr t[N];
		pthread_t th[N];

		snprintf(addr, sizeof addr, "127.0.0.1:%d", PORT_BASE + 500 + (int)((getpid() + attempt * 37) % 500));
		for (int r = 0; r < N; r++) {
			t[r] = (struct thr){ .rank = r, .n = N, .addr = addr };
			CHECK_EQ(pthread_create(&th[r], NULL, thr_main, &t[r]), 0);
		}
		for (int r = 0; r < N; r++)
			pthread_join(th[r], NULL);
		if (t[0].rc == -EADDRINUSE)
			continue; /* the others timed out waiting for a rank 0 that never listened */
		for (int r = 0; r < N; r++)
			CHECK_EQ(t[r].rc, 0);
		return;
	}
	CHECK(!"no free bootstrap port");
}

/* Slow hellos: rank 1 is played here by hand (the wire format is restated from
 * bootstrap.c), so each of its hellos can arrive 2.3 s after its connection, as when TCP
 * retransmits lost segments with backed-off RTOs. Meanwhile two strangers
 * hold connections to rank 0's listeners: one silent, one with half a hello. Rank 0 must
 * still complete the ring and mesh; the old bootstrap gave a hello 2 s and then dropped its
 * connection for good, so a 2% lossy fabric timed out now and then. */
static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static int connect_retry(const struct sockaddr_in *sa)
{
	for (int i = 0; i < 500; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(fd >= 0);
		if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0)
			return fd;
		close(fd);
		usleep(10000);
	}
	CHECK(!"cannot connect to rank 0");
	return -1;
}

static void send_slowly(int fd, const uint8_t *h, size_t len)
{
	CHECK_EQ(send(fd, h, 10, MSG_NOSIGNAL), 10);
	usleep(2300 * 1000);
	CHECK_EQ(send(fd, h + 10, len - 10, MSG_NOSIGNAL), (long long)(len - 10));
}

static void recv_exact(int fd, uint8_t *p, size_t len)
{
	while (len) {
		ssize_t k = recv(fd, p, len, 0);
		CHECK(k > 0);
		p += k;
		len -= (size_t)k;
	}
}

struct slow_rank0 {
	char addr[32];
	int rc;
	atomic_int done;
};

/* Bootstrap is what is tested: after it, rank 0's first ring exchange finds the fake rank 1
 * gone, so inca_comm_create fails there; the log says whether the ring and mesh came up. */
static atomic_int slow_ring_up;

static void slow_log(void *ctx, int level, const char *msg)
{
	(void)ctx;
	(void)level;
	if (strstr(msg, "bootstrap: ring up"))
		atomic_store(&slow_ring_up, 1);
}

static void *slow_rank0_main(void *p)
{
	struct slow_rank0 *t = p;
	struct inca_comm_opts o = { .struct_size = sizeof o, .rank = 0, .size = 2, .bootstrap_addr = t->addr, .timeout_ms = 15000,
				    .log_fn = slow_log, .log_level = 3 };
	struct inca_comm *c = NULL;

	t->rc = inca_comm_create(&o, &c);
	if (c)
		inca_comm_destroy(c);
	atomic_store(&t->done, 1);
	return NULL;
}

static void test_slow_hellos(void)
{
	struct slow_rank0 t;
	struct sockaddr_in boot = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in mine = boot, r0;
	socklen_t sl = sizeof mine;
	uint8_t h[24] = { 0 }, table[16 + 2 * 8], from0[24];
	pthread_t th;
	int lfd, bfd, silent, half, ring, mesh, acc, silent_ring;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(lfd >= 0);
	CHECK_EQ(bind(lfd, (struct sockaddr *)&mine, sizeof mine), 0);
	CHECK_EQ(listen(lfd, 8), 0);
	CHECK_EQ(getsockname(lfd, (struct sockaddr *)&mine, &sl), 0);
	for (int attempt = 0;; attempt++) {
		CHECK(attempt < 20);
		memset(&t, 0, sizeof t);
		boot.sin_port = htons((uint16_t)(PORT_BASE + 600 + (getpid() + attempt * 53) % 300));
		snprintf(t.addr, sizeof t.addr, "127.0.0.1:%d", ntohs(boot.sin_port));
		CHECK_EQ(pthread_create(&th, NULL, slow_rank0_main, &t), 0);
		for (int i = 0; i < 30 && !atomic_load(&t.done); i++)
			usleep(10000); /* rank 0 binds at once; a busy port ends it at once */
		if (!atomic_load(&t.done))
			break;
		pthread_join(th, NULL);
		CHECK_EQ(t.rc, -EADDRINUSE);
	}

	/* rank 0 accepts in this order: the slow hello first, then the strangers */
	bfd = connect_retry(&boot);
	silent = connect_retry(&boot);
	half = connect_retry(&boot);
	CHECK_EQ(send(half, "INCB", 4, MSG_NOSIGNAL), 4);
	put_be32(h, 0x494e4342u); /* INCB */
	put_be32(h + 4, 1);       /* version */
	put_be32(h + 8, 2);       /* size */
	put_be32(h + 12, 1);      /* rank */
	memcpy(h + 16, &mine.sin_addr.s_addr, 4);
	memcpy(h + 20, &mine.sin_port, 2);
	send_slowly(bfd, h, sizeof h);
	recv_exact(bfd, table, sizeof table);
	close(bfd);
	memset(&r0, 0, sizeof r0);
	r0.sin_family = AF_INET;
	memcpy(&r0.sin_addr.s_addr, table + 16, 4);
	memcpy(&r0.sin_port, table + 20, 2);

	memset(h, 0, sizeof h);
	put_be32(h, 0x494e4352u); /* INCR: rank 1's ring send side goes to rank 0 */
	put_be32(h + 4, 2);
	put_be32(h + 8, 1);
	memcpy(h + 16, table + 8, 8); /* the job's nonce */
	ring = connect_retry(&r0);
	silent_ring = connect_retry(&r0); /* a stranger on the ring listener too */
	send_slowly(ring, h, sizeof h);
	put_be32(h, 0x494e434du); /* INCM: the mesh connection to the lower rank 0 */
	mesh = connect_retry(&r0);
	CHECK_EQ(send(mesh, h, sizeof h, MSG_NOSIGNAL), (long long)sizeof h);
	acc = accept(lfd, NULL, NULL); /* rank 0's ring send side */
	CHECK(acc >= 0);
	recv_exact(acc, from0, sizeof from0);
	CHECK_EQ(from0[3], 'R');
	for (int i = 0; i < 1000 && !atomic_load(&slow_ring_up); i++)
		usleep(10000);
	close(acc);
	close(mesh);
	close(ring);
	pthread_join(th, NULL);
	CHECK_EQ(atomic_load(&slow_ring_up), 1);
	CHECK(t.rc < 0); /* the ring's first exchange met the closed fake, on time */
	close(silent_ring);
	close(half);
	close(silent);
	close(lfd);
}

int main(void)
{
	struct inca_comm_opts o;
	atomic_int *shared;

	inca_comm_opts_init(&o);
	o.timeout_ms = 20000;
	for (int n = 2; n <= 4; n++)
		CHECK_EQ(test_run_ranks(n, PORT_BASE, &o, rank_matrix, NULL), 0);

	shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(shared != MAP_FAILED);
	CHECK_EQ(test_run_ranks(3, PORT_BASE, &o, rank_barrier, shared), 0);
	munmap(shared, 4096);

	CHECK_EQ(test_run_ranks(2, PORT_BASE, &o, rank_mismatch, NULL), 0);
	CHECK_EQ(test_run_ranks(3, PORT_BASE, &o, rank_dead_peer, NULL), 0);
	o.timeout_ms = 1500;
	CHECK_EQ(test_run_ranks(2, PORT_BASE, &o, rank_idle, NULL), 0);
	test_threads();
	test_slow_hellos();
	printf("ring_test: ok\n");
	return 0;
}
