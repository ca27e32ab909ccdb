/* nccl/collnet.c: NCCL's collective network (CollNet) on libinca. listen() opens an INCA peer
 * listener and puts its handle into NCCL's handle; connect() gets every rank's handle from
 * NCCL's bootstrap and creates an inca_comm with that table (libinca's external bootstrap);
 * iallreduce/test map onto inca_iallreduce/inca_test. The switch (Aggregation Manager or a
 * standalone switch) comes from the environment; without one INCA's host algorithms serve.
 * Host memory only. The p2p transport NCCL also needs is in net_tcp.c. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inca/inca.h"
#include "plugin.h"

/* Our part of NCCL's 128-byte handle: magic, layout version, libinca's peer handle. */
#define COLL_MAGIC 0x4e434e49u /* "INCN" little-endian */
#define COLL_HANDLE_VERSION 1u
#define COLL_HANDLE_OFF 8
_Static_assert(COLL_HANDLE_OFF + INCA_PEER_HANDLE_BYTES <= NCCL_ABI_HANDLE_MAXSIZE,
	       "INCA's peer handle must fit NCCL's handle");

/* Outstanding iallreduce requests per collective comm before iallreduce answers "later"
 * (request NULL). NCCL's proxy keeps a few steps per channel in flight. */
#define COLL_MAX_REQS 64

struct coll_listen {
	struct inca_peer_listener *l; /* NULL once connect() handed it to inca_comm_create */
};

struct coll_comm {
	struct inca_comm *comm;
	int rank, nranks;
	atomic_int outstanding;
	int uses_switch; /* a standalone switch or an AM group (may still fall back to host) */
};

struct coll_req {
	struct coll_comm *cc;
	struct inca_request *r; /* NULL: completed at issue (count 0) */
	size_t bytes;
};

/* The standalone switch serves one communicator: the first collective comm this process
 * creates. NCCL creates its CollNet comms in the same order on every rank, so every rank
 * agrees on which one that is. */
static atomic_int g_switch_used;

nccl_abi_result nplug_coll_init(nccl_abi_logger log)
{
	nplug_set_logger(log);
	return NCCL_ABI_SUCCESS;
}

nccl_abi_result nplug_coll_devices(int *ndev)
{
	if (!ndev)
		return NCCL_ABI_INTERNAL_ERROR;
	/* INCA_NCCL_COLLNET=0 keeps the p2p transport but offers no collective device, so
	 * NCCL does not use CollNet (comparison runs). */
	*ndev = nplug_env_ul("INCA_NCCL_COLLNET", 1) ? 1 : 0;
	return NCCL_ABI_SUCCESS;
}

static int map_dtype(nccl_abi_dtype dt, enum inca_dtype *out)
{
	switch (dt) {
	case NCCL_ABI_INT8: *out = INCA_INT8; return 0;
	case NCCL_ABI_UINT8: *out = INCA_UINT8; return 0;
	case NCCL_ABI_INT32: *out = INCA_INT32; return 0;
	case NCCL_ABI_UINT32: *out = INCA_UINT32; return 0;
	case NCCL_ABI_INT64: *out = INCA_INT64; return 0;
	case NCCL_ABI_UINT64: *out = INCA_UINT64; return 0;
	case NCCL_ABI_FLOAT16: *out = INCA_FP16; return 0;
	case NCCL_ABI_FLOAT32: *out = INCA_FP32; return 0;
	case NCCL_ABI_FLOAT64: *out = INCA_FP64; return 0;
	case NCCL_ABI_BFLOAT16: *out = INCA_BF16; return 0;
	default: return -ENOTSUP; /* fp8 and anything newer */
	}
}

/* Avg (a sum divided by the rank count: rounding INCA does not do) and user-defined
 * (PreMulSum) operators are not offered. */
static int map_op(nccl_abi_redop op, enum inca_op *out)
{
	switch (op) {
	case NCCL_ABI_SUM: *out = INCA_SUM; return 0;
	case NCCL_ABI_PROD: *out = INCA_PROD; return 0;
	case NCCL_ABI_MAX: *out = INCA_MAX; return 0;
	case NCCL_ABI_MIN: *out = INCA_MIN; return 0;
	default: return -ENOTSUP;
	}
}

nccl_abi_result nplug_coll_reduce_support(nccl_abi_dtype dt, nccl_abi_redop op, int *supported)
{
	enum inca_dtype idt;
	enum inca_op iop;

	if (!supported)
		return NCCL_ABI_INTERNAL_ERROR;
	*supported = map_dtype(dt, &idt) == 0 && map_op(op, &iop) == 0 && inca_op_valid(idt, iop);
	return NCCL_ABI_SUCCESS;
}

nccl_abi_result nplug_coll_listen(int dev, void *handle, void **listen_comm)
{
	struct coll_listen *lc;
	uint8_t *h = handle;
	uint32_t magic = COLL_MAGIC, ver = COLL_HANDLE_VERSION;
	int rc;

	if (dev != 0 || !handle || !listen_comm)
		return NCCL_ABI_INTERNAL_ERROR;
	*listen_comm = NULL;
	lc = calloc(1, sizeof *lc);
	if (!lc)
		return NCCL_ABI_SYSTEM_ERROR;
	memset(h, 0, NCCL_ABI_HANDLE_MAXSIZE);
	memcpy(h, &magic, 4);
	memcpy(h + 4, &ver, 4);
	rc = inca_peer_listen(nplug_host_ip(), &lc->l, h + COLL_HANDLE_OFF);
	if (rc < 0) {
		nplug_log(NCCL_ABI_LOG_WARN, "listen on %s: %s", nplug_host_ip(), inca_strerror(rc));
		free(lc);
		return nplug_result(rc);
	}
	*listen_comm = lc;
	return NCCL_ABI_SUCCESS;
}

/* The same 64-bit value on every rank: FNV-1a over the handle table. Names the AM group of
 * this comm (and the job, when INCA_JOB_ID is not set). */
static uint64_t table_hash(const uint8_t *t, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= t[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

nccl_abi_result nplug_coll_connect(void *handles[], int nranks, int rank, void *listen_comm,
				   void **coll_comm)
{
	struct coll_listen *lc = listen_comm;
	struct coll_comm *cc = NULL;
	struct inca_comm_opts o;
	uint8_t *table = NULL;
	char data_addr[80], group[40], job[40];
	const char *am = nplug_env("INCA_AM_ADDR"), *sw = nplug_env("INCA_SWITCH_ADDR");
	const char *host_ip = nplug_host_ip();
	int rc;

	if (!coll_comm || !lc || !lc->l || !handles || nranks < 1 || rank < 0 || rank >= nranks)
		return NCCL_ABI_INTERNAL_ERROR;
	*coll_comm = NULL;
	table = malloc((size_t)nranks * INCA_PEER_HANDLE_BYTES);
	cc = calloc(1, sizeof *cc);
	if (!table || !cc) {
		rc = -ENOMEM;
		goto fail;
	}
	for (int r = 0; r < nranks; r++) {
		const uint8_t *h = handles[r];
		uint32_t magic, ver;
		if (!h) {
			rc = -EINVAL;
			goto fail;
		}
		memcpy(&magic, h, 4);
		memcpy(&ver, h + 4, 4);
		if (magic != COLL_MAGIC || ver != COLL_HANDLE_VERSION) {
			nplug_log(NCCL_ABI_LOG_WARN, "connect: handle of rank %d is not an INCA "
				  "handle (magic %#x version %u)", r, magic, ver);
			rc = -EINVAL;
			goto fail;
		}
		memcpy(table + (size_t)r * INCA_PEER_HANDLE_BYTES, h + COLL_HANDLE_OFF,
		       INCA_PEER_HANDLE_BYTES);
	}

	inca_comm_opts_init(&o);
	o.rank = rank;
	o.size = nranks;
	o.peer_table = table;
	o.peer_listener = lc->l;
	lc->l = NULL; /* inca_comm_create takes it over, also when it fails */
	o.host_ip = host_ip;
	o.timeout_ms = (uint32_t)nplug_env_ul("INCA_NCCL_TIMEOUT_MS", 30000);
	o.log_fn = nplug_inca_log;
	o.log_level = 1;
	uint64_t th = table_hash(table, (size_t)nranks * INCA_PEER_HANDLE_BYTES);
	snprintf(group, sizeof group, "nccl-%016" PRIx64, th);
	snprintf(job, sizeof job, "nccl-%016" PRIx64, th);
	const char *data = nplug_env("INCA_NCCL_DATA_ADDR");
	snprintf(data_addr, sizeof data_addr, "%s", data ? data : host_ip);
	if (!strchr(data_addr, ':'))
		snprintf(data_addr + strlen(data_addr), sizeof data_addr - strlen(data_addr), ":0");
	if (am) {
		o.am_addr = am;
		o.job_id = nplug_env("INCA_JOB_ID") ? nplug_env("INCA_JOB_ID") : job;
		o.job_credential = nplug_env("INCA_JOB_CREDENTIAL");
		o.group_name = group;
		o.am_timeout_ms = (uint32_t)nplug_env_ul("INCA_NCCL_AM_TIMEOUT_MS", 10000);
		/* floating-point sums added in BFR-id order: the same bits on every run */
		o.deterministic = nplug_env_ul("INCA_NCCL_DETERMINISTIC", 0) ? 1 : 0;
		o.data_addr = data_addr;
		cc->uses_switch = 1;
	} else if (sw && atomic_fetch_add(&g_switch_used, 1) == 0) {
		o.switch_addr = sw;
		o.tree_id = (uint16_t)nplug_env_ul("INCA_TREE_ID", 1);
		o.key = (uint32_t)nplug_env_ul("INCA_TREE_KEY", 0);
		o.data_addr = data_addr;
		cc->uses_switch = 1;
	}
	rc = inca_comm_create(&o, &cc->comm);
	if (rc < 0) {
		nplug_log(NCCL_ABI_LOG_WARN, "connect: rank %d of %d: %s", rank, nranks,
			  inca_strerror(rc));
		goto fail;
	}
	free(table);
	cc->rank = rank;
	cc->nranks = nranks;
	nplug_log(NCCL_ABI_LOG_INFO, "collective comm rank %d/%d: %s", rank, nranks,
		  am ? "Aggregation Manager" : cc->uses_switch ? "standalone switch" :
		  "host algorithms");
	*coll_comm = cc;
	return NCCL_ABI_SUCCESS;
fail:
	free(table);
	free(cc);
	return nplug_result(rc);
}

nccl_abi_result nplug_coll_iallreduce(void *coll_comm, void *send_data, void *recv_data,
				      int count, nccl_abi_dtype dt, nccl_abi_redop op,
				      void *send_mhandle, void *recv_mhandle, void **request)
{
	struct coll_comm *cc = coll_comm;
	struct coll_req *q;
	enum inca_dtype idt;
	enum inca_op iop;
	size_t bytes;
	int rc;

	if (!cc || !request || count < 0)
		return NCCL_ABI_INTERNAL_ERROR;
	*request = NULL;
	if (map_dtype(dt, &idt) < 0 || map_op(op, &iop) < 0 || !inca_op_valid(idt, iop))
		return NCCL_ABI_INVALID_USAGE; /* reduceSupport said no */
	bytes = (size_t)count * inca_dtype_size(idt);
	if (!nplug_mr_covers(send_mhandle, send_data, bytes) ||
	    !nplug_mr_covers(recv_mhandle, recv_data, bytes)) {
		nplug_log(NCCL_ABI_LOG_WARN, "iallreduce: buffer outside its registration");
		return NCCL_ABI_INTERNAL_ERROR;
	}
	if (atomic_load(&cc->outstanding) >= COLL_MAX_REQS)
		return NCCL_ABI_SUCCESS; /* request NULL: NCCL calls again later */
	q = calloc(1, sizeof *q);
	if (!q)
		return NCCL_ABI_SYSTEM_ERROR;
	q->cc = cc;
	q->bytes = bytes;
	if (count > 0) {
		rc = inca_iallreduce(cc->comm, send_data, recv_data, (size_t)count, idt, iop, &q->r);
		if (rc < 0) {
			nplug_log(NCCL_ABI_LOG_WARN, "iallreduce: %s", inca_strerror(rc));
			free(q);
			return nplug_result(rc);
		}
	}
	atomic_fetch_add(&cc->outstanding, 1);
	*request = q;
	return NCCL_ABI_SUCCESS;
}

nccl_abi_result nplug_coll_iflush(void *coll_comm, void *data, int size, void *mhandle,
				  void **request)
{
	(void)coll_comm;
	(void)data;
	(void)size;
	(void)mhandle;
	/* Host memory: results are visible when test() reports done; nothing to flush.
	 * A NULL request tells NCCL the flush is complete. */
	if (!request)
		return NCCL_ABI_INTERNAL_ERROR;
	*request = NULL;
	return NCCL_ABI_SUCCESS;
}

nccl_abi_result nplug_coll_test(void *request, int *done, int *size)
{
	struct coll_req *q = request;
	int rc = 0, d = 1;

	if (!q || !done)
		return NCCL_ABI_INTERNAL_ERROR;
	if (q->r)
		rc = inca_test(&q->r, &d);
	*done = d;
	if (!d)
		return NCCL_ABI_SUCCESS;
	if (size)
		*size = q->bytes > INT_MAX ? INT_MAX : (int)q->bytes;
	atomic_fetch_sub(&q->cc->outstanding, 1);
	free(q);
	if (rc < 0) {
		nplug_log(NCCL_ABI_LOG_WARN, "iallreduce failed: %s", inca_strerror(rc));
		return nplug_result(rc);
	}
	return NCCL_ABI_SUCCESS;
}

nccl_abi_result nplug_coll_close(void *coll_comm)
{
	struct coll_comm *cc = coll_comm;

	if (!cc)
		return NCCL_ABI_INTERNAL_ERROR;
	/* Waits for requests still queued (NCCL closes only after testing them all). */
	inca_comm_destroy(cc->comm);
	free(cc);
	return NCCL_ABI_SUCCESS;
}

nccl_abi_result nplug_coll_close_listen(void *listen_comm)
{
	struct coll_listen *lc = listen_comm;

	if (!lc)
		return NCCL_ABI_INTERNAL_ERROR;
	inca_peer_listener_close(lc->l);
	free(lc);
	return NCCL_ABI_SUCCESS;
}

/* Not part of NCCL's interface: the libinca counters of a collective comm, for tests and
 * tools that drive the plugin directly (the harness checks which path served the calls). */
__attribute__((visibility("default"))) int inca_nccl_coll_stats(void *coll_comm,
								struct inca_comm_stats *out);
int inca_nccl_coll_stats(void *coll_comm, struct inca_comm_stats *out)
{
	struct coll_comm *cc = coll_comm;
	if (!cc || !out)
		return -EINVAL;
	return inca_comm_get_stats(cc->comm, out, sizeof *out);
}
