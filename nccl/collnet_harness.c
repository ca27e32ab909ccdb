/* nccl/collnet_harness.c: drives libnccl-net-inca.so the way NCCL's proxy does, without NCCL:
 * dlopen, the ncclNetPlugin / ncclCollNetPlugin symbols of one ABI version, init, devices,
 * getProperties, listen on every rank, the handle exchange (this program's parent plays
 * NCCL's bootstrap allgather over socketpairs), p2p connect/accept and messages, CollNet
 * connect, regMr, batches of iallreduce polled with test(), results compared bit for bit
 * with a locally computed reference, deregMr, closeColl, closeListen.
 *   collnet_harness --plugin PATH [--ranks N] [--abi 7|8] [--no-switch | --switch PATH]
 *                   [--addr-index K] [--am]
 * With a switch: starts inca-switch (one tree for the N ranks) on loopback, every call must
 * go through it (INCA_TUNE=off) and the switch must report aggregations. --am: the caller
 * runs inca-am + inca-switch and passes INCA_AM_ADDR / INCA_JOB_ID / INCA_JOB_CREDENTIAL in
 * the environment (run_collnet_am_test.sh); every call must go in-network too.
 * Exit 0 pass, 1 fail, 77 skip. */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inca/inca.h"
#include "launch.h"
#include "nccl_plugin_abi.h"

#define HMAX NCCL_ABI_HANDLE_MAXSIZE
#define MAX_RANKS 8

/* One rank's view of the plugin, whichever ABI version was loaded. */
struct plug {
	int abi;
	const struct nccl_abi_net_v8 *net8;
	const struct nccl_abi_net_v7 *net7;
	const struct nccl_abi_collnet_v8 *coll8;
	const struct nccl_abi_collnet_v7 *coll7;
	int (*stats)(void *coll_comm, struct inca_comm_stats *out);
};

static int g_rank;
static int g_quiet; /* a warning is expected now: don't print it */

#define FAIL(...)                                                                             \
	do {                                                                                  \
		fprintf(stderr, "[rank %d] FAIL %s:%d: ", g_rank, __FILE__, __LINE__);        \
		fprintf(stderr, __VA_ARGS__);                                                 \
		fprintf(stderr, "\n");                                                        \
		return 1;                                                                     \
	} while (0)
#define CHECK_OK(call)                                                                        \
	do {                                                                                  \
		nccl_abi_result r_ = (call);                                                  \
		if (r_ != NCCL_ABI_SUCCESS)                                                   \
			FAIL("%s returned %d", #call, (int)r_);                               \
	} while (0)

/* NCCL's logger: warnings always, everything with HARNESS_VERBOSE=1. */
static void logger(nccl_abi_log_level level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	(void)flags;
	if (g_quiet || (level > NCCL_ABI_LOG_WARN && !getenv("HARNESS_VERBOSE")))
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "[rank %d] %s:%d ", g_rank, file, line);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

/* ---- the version-neutral calls the harness needs ------------------------------------------ */

#define NET(p, f) ((p)->abi == 8 ? (void *)(p)->net8->f : (void *)(p)->net7->f)
#define COLL(p, f) ((p)->abi == 8 ? (void *)(p)->coll8->f : (void *)(p)->coll7->f)

static nccl_abi_result coll_reg(const struct plug *p, void *cc, void *data, size_t n, int type,
				void **mh)
{
	if (p->abi == 8)
		return p->coll8->reg_mr(cc, data, n, type, mh);
	return p->coll7->reg_mr(cc, data, (int)n, type, mh);
}

static nccl_abi_result net_reg(const struct plug *p, void *c, void *data, size_t n, void **mh)
{
	if (p->abi == 8)
		return p->net8->reg_mr(c, data, n, NCCL_ABI_PTR_HOST, mh);
	return p->net7->reg_mr(c, data, (int)n, NCCL_ABI_PTR_HOST, mh);
}

static int check_props(const struct plug *p, int is_coll)
{
	int ptr, max_recvs;
	const char *name;
	if (p->abi == 8) {
		struct nccl_abi_props_v8 pr;
		memset(&pr, 0xa5, sizeof pr);
		CHECK_OK((is_coll ? p->coll8->get_properties : p->net8->get_properties)(0, &pr));
		ptr = pr.ptr_support, max_recvs = pr.max_recvs, name = pr.name;
		if (pr.pci_path != NULL || pr.reg_is_global != 0 || pr.speed_mbps <= 0)
			FAIL("v8 properties: pci_path %p reg_is_global %d speed %d",
			     (void *)pr.pci_path, pr.reg_is_global, pr.speed_mbps);
	} else {
		struct nccl_abi_props_v7 pr;
		memset(&pr, 0xa5, sizeof pr);
		CHECK_OK((is_coll ? p->coll7->get_properties : p->net7->get_properties)(0, &pr));
		ptr = pr.ptr_support, max_recvs = pr.max_recvs, name = pr.name;
		if (pr.pci_path != NULL || pr.speed_mbps <= 0)
			FAIL("v7 properties: pci_path %p speed %d", (void *)pr.pci_path,
			     pr.speed_mbps);
	}
	if (ptr != NCCL_ABI_PTR_HOST || max_recvs != 1 || !name || strcmp(name, "inca0"))
		FAIL("properties: ptr_support %#x max_recvs %d name %s", ptr, max_recvs,
		     name ? name : "(null)");
	return 0;
}

/* ---- test data ----------------------------------------------------------------------------- */

/* Small integers, so every reduction order gives the same bits (also in fp16 and bf16). */
static int64_t value(nccl_abi_redop op, bool is_signed, int rank, size_t i)
{
	if (op == NCCL_ABI_PROD) {
		int64_t v = (i + (size_t)rank) % 3 == 0 ? 2 : 1;
		return is_signed && (i * 5 + (size_t)rank) % 7 == 0 ? -v : v;
	}
	int64_t v = (int64_t)((i * 7 + (size_t)rank * 13 + i / 97) % 31);
	return is_signed ? v - 15 : v;
}

static size_t dt_size(nccl_abi_dtype dt)
{
	switch (dt) {
	case NCCL_ABI_INT8: case NCCL_ABI_UINT8: return 1;
	case NCCL_ABI_FLOAT16: case NCCL_ABI_BFLOAT16: return 2;
	case NCCL_ABI_INT32: case NCCL_ABI_UINT32: case NCCL_ABI_FLOAT32: return 4;
	default: return 8;
	}
}

static bool dt_signed(nccl_abi_dtype dt)
{
	return dt != NCCL_ABI_UINT8 && dt != NCCL_ABI_UINT32 && dt != NCCL_ABI_UINT64;
}

/* IEEE binary16 of an integer with |v| < 2048 (exact). */
static uint16_t fp16_of(int64_t v)
{
	uint16_t s = v < 0 ? 0x8000 : 0;
	uint64_t a = (uint64_t)(v < 0 ? -v : v);
	int e = 0;
	if (!a)
		return s;
	while ((a >> (e + 1)) != 0)
		e++;
	return (uint16_t)(s | (uint16_t)((e + 15) << 10) | (uint16_t)((a << (10 - e)) & 0x3ff));
}

static void store(void *buf, size_t i, nccl_abi_dtype dt, int64_t v)
{
	switch (dt) {
	case NCCL_ABI_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
	case NCCL_ABI_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case NCCL_ABI_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case NCCL_ABI_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	case NCCL_ABI_INT64: ((int64_t *)buf)[i] = v; break;
	case NCCL_ABI_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
	case NCCL_ABI_FLOAT16: ((uint16_t *)buf)[i] = fp16_of(v); break;
	case NCCL_ABI_BFLOAT16: {
		float f = (float)v;
		uint32_t b;
		memcpy(&b, &f, 4);
		((uint16_t *)buf)[i] = (uint16_t)(b >> 16); /* exact for small integers */
		break;
	}
	case NCCL_ABI_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case NCCL_ABI_FLOAT64: ((double *)buf)[i] = (double)v; break;
	default: break;
	}
}

static int64_t reduce2(nccl_abi_redop op, int64_t a, int64_t b)
{
	switch (op) {
	case NCCL_ABI_SUM: return a + b;
	case NCCL_ABI_PROD: return a * b;
	case NCCL_ABI_MAX: return a > b ? a : b;
	default: return a < b ? a : b;
	}
}

struct tcase {
	nccl_abi_dtype dt;
	nccl_abi_redop op;
	size_t count;
	bool inplace;
};

/* Sizes from 1 element to 3 MiB; every dtype INCA offers, every op it offers. */
static const struct tcase cases[] = {
	{ NCCL_ABI_FLOAT32, NCCL_ABI_SUM, 1, false },
	{ NCCL_ABI_FLOAT32, NCCL_ABI_SUM, 1000, true },
	{ NCCL_ABI_FLOAT32, NCCL_ABI_SUM, 262144, false },  /* 1 MiB */
	{ NCCL_ABI_FLOAT32, NCCL_ABI_SUM, 786432, true },   /* 3 MiB */
	{ NCCL_ABI_FLOAT64, NCCL_ABI_SUM, 4097, false },
	{ NCCL_ABI_FLOAT16, NCCL_ABI_SUM, 3001, true },
	{ NCCL_ABI_BFLOAT16, NCCL_ABI_SUM, 65536, false },
	{ NCCL_ABI_INT32, NCCL_ABI_SUM, 7, false },
	{ NCCL_ABI_INT32, NCCL_ABI_MAX, 100000, true },
	{ NCCL_ABI_UINT32, NCCL_ABI_MIN, 5000, false },
	{ NCCL_ABI_INT64, NCCL_ABI_SUM, 131072, false },    /* 1 MiB */
	{ NCCL_ABI_UINT64, NCCL_ABI_MAX, 33, true },
	{ NCCL_ABI_INT8, NCCL_ABI_SUM, 1023, false },
	{ NCCL_ABI_UINT8, NCCL_ABI_MIN, 4096, true },
	{ NCCL_ABI_FLOAT32, NCCL_ABI_PROD, 2000, false },
	{ NCCL_ABI_INT32, NCCL_ABI_PROD, 999, true },
	{ NCCL_ABI_FLOAT64, NCCL_ABI_MIN, 12345, true },
	{ NCCL_ABI_FLOAT32, NCCL_ABI_MAX, 0, false },       /* empty: completes at once */
};
#define NCASES (sizeof cases / sizeof cases[0])
#define BATCH 4 /* requests in flight at once, as NCCL's proxy keeps several steps going */

/* ---- rank ------------------------------------------------------------------------------- */

static int xfer(int fd, void *buf, size_t n, bool wr)
{
	char *p = buf;
	while (n) {
		ssize_t k = wr ? write(fd, p, n) : read(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int load(const char *path, int abi, struct plug *p)
{
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		FAIL("dlopen %s: %s", path, dlerror());
	p->abi = abi;
	if (abi == 8) {
		p->net8 = dlsym(lib, NCCL_ABI_SYM_NET_V8);
		p->coll8 = dlsym(lib, NCCL_ABI_SYM_COLLNET_V8);
		if (!p->net8 || !p->coll8)
			FAIL("v8 symbols missing");
		if (p->coll8->iallgather || p->coll8->ireducescatter)
			FAIL("v8 iallgather/ireducescatter offered but not expected");
	} else {
		p->net7 = dlsym(lib, NCCL_ABI_SYM_NET_V7);
		p->coll7 = dlsym(lib, NCCL_ABI_SYM_COLLNET_V7);
		if (!p->net7 || !p->coll7)
			FAIL("v7 symbols missing");
	}
	p->stats = (int (*)(void *, struct inca_comm_stats *))dlsym(lib, "inca_nccl_coll_stats");
	if (!p->stats)
		FAIL("inca_nccl_coll_stats missing");
	const char *n1 = abi == 8 ? p->net8->name : p->net7->name;
	const char *n2 = abi == 8 ? p->coll8->name : p->coll7->name;
	if (strcmp(n1, "INCA") || strcmp(n2, "INCA"))
		FAIL("plugin names %s / %s", n1, n2);
	return 0;
}

/* p2p: every rank sends to rank+1 and receives from rank-1: three messages posted back to
 * back (0 bytes, a few bytes, 4 MiB + 3), then all polled; contents checked. */
static int p2p_ring(const struct plug *p, void *send_comm, void *recv_comm, int rank, int n)
{
	static const size_t sizes[3] = { 0, 13, (4u << 20) + 3 };
	char *sb[3], *rb[3];
	void *smh[3], *rmh[3], *sreq[3] = { 0 }, *rreq[3] = { 0 };
	int left = (rank + n - 1) % n;
	nccl_abi_result (*isend)(void *, void *, int, int, void *, void **) = NET(p, isend);
	nccl_abi_result (*irecv)(void *, int, void **, int *, int *, void **, void **) =
		NET(p, irecv);
	nccl_abi_result (*test)(void *, int *, int *) = NET(p, test);
	nccl_abi_result (*dereg)(void *, void *) = NET(p, dereg_mr);

	for (int k = 0; k < 3; k++) {
		sb[k] = malloc(sizes[k] + 1);
		rb[k] = malloc(sizes[k] + 16);
		for (size_t i = 0; i < sizes[k]; i++)
			sb[k][i] = (char)(rank * 31 + k * 7 + (int)(i % 251));
		memset(rb[k], 0x5a, sizes[k] + 16);
		CHECK_OK(net_reg(p, send_comm, sb[k], sizes[k] + 1, &smh[k]));
		CHECK_OK(net_reg(p, recv_comm, rb[k], sizes[k] + 16, &rmh[k]));
	}
	for (int k = 0; k < 3; k++) {
		void *d = rb[k];
		int sz = (int)sizes[k] + 16, tag = k;
		while (!rreq[k])
			CHECK_OK(irecv(recv_comm, 1, &d, &sz, &tag, &rmh[k], &rreq[k]));
		while (!sreq[k])
			CHECK_OK(isend(send_comm, sb[k], (int)sizes[k], k, smh[k], &sreq[k]));
	}
	for (int pending = 6; pending;) {
		for (int k = 0; k < 3; k++) {
			int done, got;
			if (sreq[k]) {
				CHECK_OK(test(sreq[k], &done, &got));
				if (done) {
					if (got != (int)sizes[k])
						FAIL("send %d reported %d bytes", k, got);
					sreq[k] = NULL;
					pending--;
				}
			}
			if (rreq[k]) {
				CHECK_OK(test(rreq[k], &done, &got));
				if (done) {
					if (got != (int)sizes[k])
						FAIL("recv %d got %d bytes, expected %zu", k, got,
						     sizes[k]);
					rreq[k] = NULL;
					pending--;
				}
			}
		}
	}
	for (int k = 0; k < 3; k++) {
		for (size_t i = 0; i < sizes[k]; i++)
			if (rb[k][i] != (char)(left * 31 + k * 7 + (int)(i % 251)))
				FAIL("p2p message %d byte %zu wrong", k, i);
		if ((unsigned char)rb[k][sizes[k]] != 0x5a)
			FAIL("p2p message %d overran its size", k);
		CHECK_OK(dereg(send_comm, smh[k]));
		CHECK_OK(dereg(recv_comm, rmh[k]));
		free(sb[k]);
		free(rb[k]);
	}
	return 0;
}

static int reduce_support_checks(const struct plug *p)
{
	nccl_abi_result (*rs)(nccl_abi_dtype, nccl_abi_redop, int *) = COLL(p, reduce_support);
	static const struct { nccl_abi_dtype dt; nccl_abi_redop op; int want; } t[] = {
		{ NCCL_ABI_FLOAT32, NCCL_ABI_SUM, 1 },   { NCCL_ABI_FLOAT16, NCCL_ABI_SUM, 1 },
		{ NCCL_ABI_BFLOAT16, NCCL_ABI_MAX, 1 },  { NCCL_ABI_INT8, NCCL_ABI_PROD, 1 },
		{ NCCL_ABI_UINT64, NCCL_ABI_MIN, 1 },    { NCCL_ABI_FLOAT32, NCCL_ABI_AVG, 0 },
		{ NCCL_ABI_INT32, NCCL_ABI_AVG, 0 },     { NCCL_ABI_FP8_E4M3, NCCL_ABI_SUM, 0 },
		{ NCCL_ABI_FP8_E5M2, NCCL_ABI_MAX, 0 },  { NCCL_ABI_FLOAT32, NCCL_ABI_NUM_OPS, 0 },
		{ NCCL_ABI_FLOAT64, (nccl_abi_redop)7, 0 },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		int s = -1;
		CHECK_OK(rs(t[i].dt, t[i].op, &s));
		if (s != t[i].want)
			FAIL("reduceSupport(dtype %d, op %d) = %d, expected %d", t[i].dt, t[i].op,
			     s, t[i].want);
	}
	return 0;
}

struct slot {
	const struct tcase *tc;
	char *send, *recv;
	void *req;
};

static int verify(const struct slot *s, int nranks)
{
	const struct tcase *tc = s->tc;
	size_t es = dt_size(tc->dt);
	char want[8];
	for (size_t i = 0; i < tc->count; i++) {
		int64_t acc = value(tc->op, dt_signed(tc->dt), 0, i);
		for (int q = 1; q < nranks; q++)
			acc = reduce2(tc->op, acc, value(tc->op, dt_signed(tc->dt), q, i));
		store(want, 0, tc->dt, acc);
		if (memcmp(want, s->recv + i * es, es))
			FAIL("dtype %d op %d count %zu%s: element %zu differs", tc->dt, tc->op,
			     tc->count, tc->inplace ? " in place" : "", i);
	}
	return 0;
}

static int run_rank(const char *plugin, int abi, int rank, int nranks, int fd, bool expect_inc)
{
	struct plug p = { 0 };
	uint8_t mine[2 * HMAX], all[MAX_RANKS * 2 * HMAX];
	void *net_listen, *coll_listen, *send_comm = NULL, *recv_comm = NULL, *coll = NULL;
	int ndev;

	g_rank = rank;
	if (load(plugin, abi, &p))
		return 1;
	CHECK_OK(((nccl_abi_result(*)(nccl_abi_logger))NET(&p, init))(logger));
	CHECK_OK(((nccl_abi_result(*)(nccl_abi_logger))COLL(&p, init))(logger));
	CHECK_OK(((nccl_abi_result(*)(int *))NET(&p, devices))(&ndev));
	if (ndev != 1)
		FAIL("net devices %d", ndev);
	CHECK_OK(((nccl_abi_result(*)(int *))COLL(&p, devices))(&ndev));
	if (ndev != 1)
		FAIL("collnet devices %d", ndev);
	if (check_props(&p, 0) || check_props(&p, 1))
		return 1;

	/* listen on both sides; NCCL's bootstrap (our parent) gathers the handles */
	memset(mine, 0, sizeof mine);
	nccl_abi_result (*nlisten)(int, void *, void **) = NET(&p, listen);
	nccl_abi_result (*clisten)(int, void *, void **) = COLL(&p, listen);
	CHECK_OK(nlisten(0, mine, &net_listen));
	CHECK_OK(clisten(0, mine + HMAX, &coll_listen));
	if (xfer(fd, mine, sizeof mine, true) || xfer(fd, all, (size_t)nranks * 2 * HMAX, false))
		FAIL("handle exchange with the parent");

	/* p2p ring: connect to the right neighbour, accept the left one, both nonblocking */
	nccl_abi_result (*nconnect)(int, void *, void **, struct nccl_abi_device_handle **) =
		NET(&p, connect);
	nccl_abi_result (*naccept)(void *, void **, struct nccl_abi_device_handle **) =
		NET(&p, accept);
	uint8_t right[HMAX];
	memcpy(right, all + (size_t)((rank + 1) % nranks) * 2 * HMAX, HMAX);
	for (int spins = 0; !send_comm || !recv_comm; spins++) {
		struct nccl_abi_device_handle *dev = NULL;
		if (!send_comm)
			CHECK_OK(nconnect(0, right, &send_comm, &dev));
		if (!recv_comm)
			CHECK_OK(naccept(net_listen, &recv_comm, &dev));
		if (spins > 2000000)
			FAIL("p2p connect/accept did not complete");
		if (spins > 1000)
			usleep(100);
	}
	if (p2p_ring(&p, send_comm, recv_comm, rank, nranks))
		return 1;

	/* CollNet: connect with every rank's handle, then the listener is closed */
	void *handles[MAX_RANKS];
	for (int r = 0; r < nranks; r++)
		handles[r] = all + (size_t)r * 2 * HMAX + HMAX;
	nccl_abi_result (*cconnect)(void **, int, int, void *, void **) = COLL(&p, connect);
	/* a foreign handle (here: a p2p one) is refused before the listener is used */
	void *wrong[MAX_RANKS];
	memcpy(wrong, handles, sizeof wrong);
	wrong[(rank + 1) % nranks] = all + (size_t)((rank + 1) % nranks) * 2 * HMAX;
	g_quiet = 1;
	nccl_abi_result bad_conn = cconnect(wrong, nranks, rank, coll_listen, &coll);
	g_quiet = 0;
	if (bad_conn == NCCL_ABI_SUCCESS || coll)
		FAIL("CollNet connect accepted a p2p handle");
	CHECK_OK(cconnect(handles, nranks, rank, coll_listen, &coll));
	CHECK_OK(((nccl_abi_result(*)(void *))COLL(&p, close_listen))(coll_listen));
	if (reduce_support_checks(&p))
		return 1;

	/* one registration per buffer, as NCCL registers its staging buffers once */
	size_t max_bytes = 0;
	for (size_t c = 0; c < NCASES; c++)
		if (cases[c].count * dt_size(cases[c].dt) > max_bytes)
			max_bytes = cases[c].count * dt_size(cases[c].dt);
	max_bytes += 64;
	char *sendbuf = malloc(BATCH * max_bytes), *recvbuf = malloc(BATCH * max_bytes);
	void *smh, *rmh, *bad_mh = NULL;
	if (!sendbuf || !recvbuf)
		FAIL("out of memory");
	CHECK_OK(coll_reg(&p, coll, sendbuf, BATCH * max_bytes, NCCL_ABI_PTR_HOST, &smh));
	CHECK_OK(coll_reg(&p, coll, recvbuf, BATCH * max_bytes, NCCL_ABI_PTR_HOST, &rmh));
	g_quiet = 1;
	nccl_abi_result bad = coll_reg(&p, coll, sendbuf, 64, NCCL_ABI_PTR_CUDA, &bad_mh);
	g_quiet = 0;
	if (bad != NCCL_ABI_INVALID_USAGE || bad_mh)
		FAIL("regMr of NCCL_PTR_CUDA memory returned %d", (int)bad);

	nccl_abi_result (*iar)(void *, void *, void *, int, nccl_abi_dtype, nccl_abi_redop,
			       void *, void *, void **) = COLL(&p, iallreduce);
	nccl_abi_result (*ctest)(void *, int *, int *) = COLL(&p, test);
	uint64_t nonempty = 0;
	for (size_t c0 = 0; c0 < NCASES; c0 += BATCH) {
		struct slot sl[BATCH];
		size_t nb = NCASES - c0 < BATCH ? NCASES - c0 : BATCH;
		for (size_t b = 0; b < nb; b++) {
			const struct tcase *tc = &cases[c0 + b];
			struct slot *s = &sl[b];
			s->tc = tc;
			s->send = sendbuf + b * max_bytes;
			s->recv = tc->inplace ? s->send : recvbuf + b * max_bytes;
			s->req = NULL;
			for (size_t i = 0; i < tc->count; i++)
				store(s->send, i, tc->dt, value(tc->op, dt_signed(tc->dt), rank, i));
			if (!tc->inplace)
				memset(s->recv, 0xee, tc->count * dt_size(tc->dt));
			nonempty += tc->count > 0;
			while (!s->req)
				CHECK_OK(iar(coll, s->send, s->recv, (int)tc->count, tc->dt, tc->op,
					     smh, tc->inplace ? smh : rmh, &s->req));
		}
		for (size_t left = nb; left;) {
			for (size_t b = 0; b < nb; b++) {
				int done = 0, got = -1;
				if (!sl[b].req)
					continue;
				CHECK_OK(ctest(sl[b].req, &done, &got));
				if (!done)
					continue;
				sl[b].req = NULL;
				left--;
				if ((size_t)got != sl[b].tc->count * dt_size(sl[b].tc->dt))
					FAIL("test() size %d for %zu elements", got,
					     sl[b].tc->count);
				if (verify(&sl[b], nranks))
					return 1;
			}
		}
	}

	struct inca_comm_stats st;
	if (p.stats(coll, &st) < 0)
		FAIL("inca_nccl_coll_stats");
	fprintf(stderr, "[rank %d] %" PRIu64 " allreduce calls: inc %" PRIu64 ", host %" PRIu64
		", data-plane packets tx %" PRIu64 " rx %" PRIu64 "\n", rank, nonempty,
		st.inc_calls, st.ring_calls, st.tx_pkts, st.rx_pkts);
	if (expect_inc && (st.inc_calls != nonempty || st.ring_calls != 0 || st.rx_pkts == 0))
		FAIL("with a switch every call must go in-network");
	if (!expect_inc && (st.inc_calls != 0 || st.ring_calls != nonempty))
		FAIL("without a switch every call must use the host path");

	nccl_abi_result (*cdereg)(void *, void *) = COLL(&p, dereg_mr);
	CHECK_OK(cdereg(coll, smh));
	CHECK_OK(cdereg(coll, rmh));
	CHECK_OK(((nccl_abi_result(*)(void *))COLL(&p, close_coll))(coll));
	CHECK_OK(((nccl_abi_result(*)(void *))NET(&p, close_send))(send_comm));
	CHECK_OK(((nccl_abi_result(*)(void *))NET(&p, close_recv))(recv_comm));
	CHECK_OK(((nccl_abi_result(*)(void *))NET(&p, close_listen))(net_listen));
	free(sendbuf);
	free(recvbuf);
	return 0;
}

/* ---- parent: switch, fork, bootstrap -------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr, "usage: collnet_harness --plugin PATH [--ranks N] [--abi 7|8] "
		"[--no-switch | --switch PATH | --am] [--addr-index K]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *plugin = NULL, *switch_path = NULL;
	int nranks = 4, abi = 8, fds[MAX_RANKS], status, failed = 0;
	unsigned index = 130;
	pid_t pids[MAX_RANKS];
	struct launch_cfg cfg;
	struct launch_addrs a;
	struct launch_switch sw;
	bool with_switch = false, with_am = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--plugin") && i + 1 < argc)
			plugin = argv[++i];
		else if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
			nranks = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--abi") && i + 1 < argc)
			abi = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--switch") && i + 1 < argc)
			switch_path = argv[++i], with_switch = true;
		else if (!strcmp(argv[i], "--no-switch"))
			with_switch = false;
		else if (!strcmp(argv[i], "--am"))
			with_am = true;
		else if (!strcmp(argv[i], "--addr-index") && i + 1 < argc)
			index = (unsigned)atoi(argv[++i]);
		else
			usage();
	}
	if (!plugin || nranks < 1 || nranks > MAX_RANKS || (abi != 7 && abi != 8) ||
	    (with_am && with_switch))
		usage();
	if (with_am && !getenv("INCA_AM_ADDR")) {
		printf("SKIP: --am without INCA_AM_ADDR\n");
		return 77;
	}
	if (access(plugin, R_OK) != 0) {
		printf("SKIP: plugin %s not built\n", plugin);
		return 77;
	}

	launch_cfg_defaults(&cfg);
	cfg.nranks = nranks;
	cfg.addr_index = index;
	cfg.switch_path = switch_path;
	if (launch_addrs_pick(&a, index, nranks) < 0) {
		printf("SKIP: no free loopback block for index %u\n", index);
		return 77;
	}
	if (with_switch) {
		if (access(switch_path, X_OK) != 0) {
			printf("SKIP: %s not built\n", switch_path);
			return 77;
		}
		if (launch_switch_start(&cfg, &a, NULL, &sw) < 0) {
			fprintf(stderr, "FAIL: inca-switch did not start\n");
			return 1;
		}
	}

	fflush(NULL);
	for (int r = 0; r < nranks; r++) {
		int sp[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
			perror("socketpair");
			return 1;
		}
		pids[r] = fork();
		if (pids[r] == 0) {
			char ip[LAUNCH_IP_LEN], buf[128];
			close(sp[0]);
			launch_rank_ip(&a, r, ip);
			setenv("INCA_NCCL_HOST_IP", ip, 1);
			if (with_switch) {
				snprintf(buf, sizeof buf, "%s:%u", a.switch_ip, a.switch_port);
				setenv("INCA_SWITCH_ADDR", buf, 1);
				snprintf(buf, sizeof buf, "%u", cfg.tree_id);
				setenv("INCA_TREE_ID", buf, 1);
				snprintf(buf, sizeof buf, "%#x", cfg.key);
				setenv("INCA_TREE_KEY", buf, 1);
				snprintf(buf, sizeof buf, "%s:4791", ip);
				setenv("INCA_NCCL_DATA_ADDR", buf, 1);
				if (!cfg.no_auth) {
					for (int k = 0; k < 32; k++)
						snprintf(buf + 2 * k, 3, "%02x", cfg.auth_key[k]);
					setenv("INCA_AUTH_KEY", buf, 1);
					snprintf(buf, sizeof buf, "%u", cfg.auth_key_id);
					setenv("INCA_AUTH_KEY_ID", buf, 1);
				}
				setenv("INCA_TUNE", "off", 1); /* every call in-network */
			} else if (with_am) {
				unsetenv("INCA_SWITCH_ADDR");
				setenv("INCA_TUNE", "off", 1);
			} else {
				unsetenv("INCA_SWITCH_ADDR");
				unsetenv("INCA_AM_ADDR");
			}
			alarm(240);
			_exit(run_rank(plugin, abi, r, nranks, sp[1], with_switch || with_am));
		}
		close(sp[1]);
		fds[r] = sp[0];
	}

	/* NCCL's bootstrap allgather of the listen handles (net + collnet per rank) */
	uint8_t *table = calloc((size_t)nranks, 2 * HMAX);
	for (int r = 0; r < nranks; r++)
		if (xfer(fds[r], table + (size_t)r * 2 * HMAX, 2 * HMAX, false) < 0)
			failed = 1;
	for (int r = 0; r < nranks && !failed; r++)
		if (xfer(fds[r], table, (size_t)nranks * 2 * HMAX, true) < 0)
			failed = 1;
	for (int r = 0; r < nranks; r++)
		close(fds[r]);
	free(table);
	for (int r = 0; r < nranks; r++) {
		if (waitpid(pids[r], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "FAIL: rank %d %s %d\n", r,
				WIFSIGNALED(status) ? "killed by signal" : "exited with",
				WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			failed = 1;
		}
	}

	if (with_switch) {
		struct json *stats = NULL;
		struct launch_sw_summary s;
		int rc = launch_switch_stop(&sw, &stats);
		launch_sw_summarize(stats, &s);
		json_free(stats);
		printf("switch: %.0f packets in, %.0f out, %.0f aggregations, %.0f drops\n",
		       s.rx_pkts, s.tx_pkts, s.aggregations, s.drops);
		if (rc != 0 || s.aggregations <= 0) {
			fprintf(stderr, "FAIL: switch exit %d, %.0f aggregations\n", rc,
				s.aggregations);
			failed = 1;
		}
	}
	printf("%s: %d ranks, ABI v%d, %s, %zu allreduce cases + p2p ring\n",
	       failed ? "FAIL" : "PASS", nranks, abi, with_switch ? "standalone switch" :
	       with_am ? "Aggregation Manager" : "host algorithms", NCASES);
	return failed;
}
