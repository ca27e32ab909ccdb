/* nccl/plugin.c: the symbols NCCL looks up in libnccl-net-inca.so (ncclNetPlugin_v7/_v8,
 * ncclCollNetPlugin_v7/_v8), the thin v7/v8 adapters, and what both sides share: logging,
 * environment, result mapping, device properties, memory registration.
 * The p2p transport is in net_tcp.c, the collective side (libinca) in collnet.c. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

#define NPLUG_EXPORT __attribute__((visibility("default")))

/* ---- logging ----------------------------------------------------------------------------- */

static nccl_abi_logger g_log;
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;

void nplug_set_logger(nccl_abi_logger log)
{
	pthread_mutex_lock(&g_log_mu);
	if (log)
		g_log = log;
	pthread_mutex_unlock(&g_log_mu);
}

void nplug_log(nccl_abi_log_level level, const char *fmt, ...)
{
	nccl_abi_logger log;
	char msg[512];
	va_list ap;

	pthread_mutex_lock(&g_log_mu);
	log = g_log;
	pthread_mutex_unlock(&g_log_mu);
	if (!log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log(level, NCCL_ABI_SUBSYS_NET | NCCL_ABI_SUBSYS_COLL, __FILE__, __LINE__, "NET/INCA: %s",
	    msg);
}

void nplug_inca_log(void *ctx, int level, const char *msg)
{
	(void)ctx;
	nplug_log(level <= 1 ? NCCL_ABI_LOG_WARN : level == 2 ? NCCL_ABI_LOG_INFO :
		  NCCL_ABI_LOG_TRACE, "libinca: %s", msg);
}

/* ---- environment, results ---------------------------------------------------------------- */

const char *nplug_env(const char *name)
{
	const char *v = getenv(name);
	return v && v[0] ? v : NULL;
}

unsigned long nplug_env_ul(const char *name, unsigned long dflt)
{
	const char *v = nplug_env(name);
	char *end;
	unsigned long x;

	if (!v)
		return dflt;
	errno = 0;
	x = strtoul(v, &end, 0);
	if (errno || *end) {
		nplug_log(NCCL_ABI_LOG_WARN, "ignoring %s=%s (not a number)", name, v);
		return dflt;
	}
	return x;
}

const char *nplug_host_ip(void)
{
	const char *v = nplug_env("INCA_NCCL_HOST_IP");
	return v ? v : "127.0.0.1";
}

nccl_abi_result nplug_result(int err)
{
	switch (err) {
	case 0:
		return NCCL_ABI_SUCCESS;
	case -EINVAL:
	case -EBADF:
		return NCCL_ABI_INTERNAL_ERROR;
	case -ENOTSUP:
	case -EACCES:
	case -EADDRNOTAVAIL:
		return NCCL_ABI_INVALID_USAGE;
	case -ECONNRESET:
	case -ECONNREFUSED:
	case -EPIPE:
	case -EPROTO:
		return NCCL_ABI_REMOTE_ERROR;
	default:
		return NCCL_ABI_SYSTEM_ERROR;
	}
}

/* ---- device ------------------------------------------------------------------------------ */

nccl_abi_result nplug_devices(int *ndev)
{
	if (!ndev)
		return NCCL_ABI_INTERNAL_ERROR;
	*ndev = 1;
	return NCCL_ABI_SUCCESS;
}

nccl_abi_result nplug_properties(int dev, struct nplug_props *p)
{
	if (dev != 0 || !p)
		return NCCL_ABI_INTERNAL_ERROR;
	memset(p, 0, sizeof *p);
	p->name = NPLUG_DEV_NAME;
	p->guid = 0x494e4341; /* "INCA": one port to the fabric */
	/* Host memory only: there is no CUDA here, NCCL stages GPU data through host buffers. */
	p->ptr_support = NCCL_ABI_PTR_HOST;
	p->speed_mbps = (int)nplug_env_ul("INCA_NCCL_SPEED_MBPS", 10000);
	p->port = 1;
	p->latency_us = 0;
	p->max_comms = 65536;
	p->max_recvs = 1; /* no grouped receives */
	return NCCL_ABI_SUCCESS;
}

/* getProperties of either version, from the version-neutral properties. v8's reg_is_global
 * stays 0 (cleared with the rest): a registration belongs to one comm. */
#define NPLUG_GET_PROPS(V)                                                                         \
	static nccl_abi_result get_props_##V(int dev, struct nccl_abi_props_##V *o)                \
	{                                                                                          \
		struct nplug_props p;                                                              \
		nccl_abi_result r = nplug_properties(dev, &p);                                     \
		if (!o)                                                                            \
			return NCCL_ABI_INTERNAL_ERROR;                                            \
		if (r != NCCL_ABI_SUCCESS)                                                         \
			return r;                                                                  \
		memset(o, 0, sizeof *o);                                                           \
		o->name = (char *)p.name;                                                          \
		o->pci_path = NULL; /* virtual: no PCI device */                                   \
		o->guid = p.guid;                                                                  \
		o->ptr_support = p.ptr_support;                                                    \
		o->speed_mbps = p.speed_mbps;                                                      \
		o->port = p.port;                                                                  \
		o->latency_us = p.latency_us;                                                      \
		o->max_comms = p.max_comms;                                                        \
		o->max_recvs = p.max_recvs;                                                        \
		o->device_type = NCCL_ABI_DEVICE_HOST;                                             \
		o->device_version = NCCL_ABI_DEVICE_INVALID_VERSION;                               \
		return NCCL_ABI_SUCCESS;                                                           \
	}
NPLUG_GET_PROPS(v7)
NPLUG_GET_PROPS(v8)

/* ---- memory registration ----------------------------------------------------------------- */

nccl_abi_result nplug_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct nplug_mr *mr;

	if (!comm || !mhandle)
		return NCCL_ABI_INTERNAL_ERROR;
	*mhandle = NULL;
	if (type != NCCL_ABI_PTR_HOST) {
		nplug_log(NCCL_ABI_LOG_WARN, "regMr: memory type %d refused: host memory only "
			  "(no GPU support in this plugin)", type);
		return NCCL_ABI_INVALID_USAGE;
	}
	mr = malloc(sizeof *mr);
	if (!mr)
		return NCCL_ABI_SYSTEM_ERROR;
	mr->base = data;
	mr->bytes = size;
	*mhandle = mr;
	return NCCL_ABI_SUCCESS;
}

nccl_abi_result nplug_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle)
{
	(void)offset;
	(void)fd;
	/* NCCL only calls this when getProperties advertises NCCL_PTR_DMABUF, which we don't;
	 * a host buffer still registers. */
	return nplug_reg_mr(comm, data, size, type, mhandle);
}

nccl_abi_result nplug_dereg_mr(void *comm, void *mhandle)
{
	(void)comm;
	free(mhandle);
	return NCCL_ABI_SUCCESS;
}

int nplug_mr_covers(const void *mhandle, const void *p, size_t bytes)
{
	const struct nplug_mr *mr = mhandle;
	const char *c = p;

	if (!mr)
		return 1;
	return c >= mr->base && bytes <= mr->bytes && (size_t)(c - mr->base) <= mr->bytes - bytes;
}

static nccl_abi_result reg_mr_int(void *comm, void *data, int size, int type, void **mhandle)
{
	if (size < 0)
		return NCCL_ABI_INTERNAL_ERROR;
	return nplug_reg_mr(comm, data, (size_t)size, type, mhandle);
}

/* ---- the exported structs ---------------------------------------------------------------- */

/* One initializer per interface, instantiated per version: V picks the properties adapter,
 * REG_MR the regMr of that version's size type (v7: int, v8: size_t). */
#define NPLUG_NET(V, REG_MR)                                                                       \
	{                                                                                          \
		.name = NPLUG_NAME,                                                                \
		.init = nplug_net_init,                                                            \
		.devices = nplug_devices,                                                          \
		.get_properties = get_props_##V,                                                   \
		.listen = nplug_net_listen,                                                        \
		.connect = nplug_net_connect,                                                      \
		.accept = nplug_net_accept,                                                        \
		.reg_mr = REG_MR,                                                                  \
		.reg_mr_dmabuf = nplug_reg_mr_dmabuf,                                              \
		.dereg_mr = nplug_dereg_mr,                                                        \
		.isend = nplug_net_isend,                                                          \
		.irecv = nplug_net_irecv,                                                          \
		.iflush = nplug_net_iflush,                                                        \
		.test = nplug_net_test,                                                            \
		.close_send = nplug_net_close_send,                                                \
		.close_recv = nplug_net_close_recv,                                                \
		.close_listen = nplug_net_close_listen,                                            \
		.get_device_mr = NULL, /* no device offload */                                     \
		.irecv_consumed = NULL,                                                            \
	}

/* v8's iallgather / ireducescatter stay NULL: not offered, so NCCL keeps AllGather and
 * ReduceScatter off CollNet (its tuner disables them when these are NULL). libinca has no
 * nonblocking forms of them. */
#define NPLUG_COLLNET(V, REG_MR)                                                                   \
	{                                                                                          \
		.name = NPLUG_NAME,                                                                \
		.init = nplug_coll_init,                                                           \
		.devices = nplug_coll_devices,                                                     \
		.get_properties = get_props_##V,                                                   \
		.listen = nplug_coll_listen,                                                       \
		.connect = nplug_coll_connect,                                                     \
		.reduce_support = nplug_coll_reduce_support,                                       \
		.reg_mr = REG_MR,                                                                  \
		.reg_mr_dmabuf = nplug_reg_mr_dmabuf,                                              \
		.dereg_mr = nplug_dereg_mr,                                                        \
		.iallreduce = nplug_coll_iallreduce,                                               \
		.iflush = nplug_coll_iflush,                                                       \
		.test = nplug_coll_test,                                                           \
		.close_coll = nplug_coll_close,                                                    \
		.close_listen = nplug_coll_close_listen,                                           \
	}

NPLUG_EXPORT const struct nccl_abi_net_v8 ncclNetPlugin_v8 = NPLUG_NET(v8, nplug_reg_mr);
NPLUG_EXPORT const struct nccl_abi_net_v7 ncclNetPlugin_v7 = NPLUG_NET(v7, reg_mr_int);
NPLUG_EXPORT const struct nccl_abi_collnet_v8 ncclCollNetPlugin_v8 =
	NPLUG_COLLNET(v8, nplug_reg_mr);
NPLUG_EXPORT const struct nccl_abi_collnet_v7 ncclCollNetPlugin_v7 =
	NPLUG_COLLNET(v7, reg_mr_int);
