/* nccl/plugin.h: what the parts of libnccl-net-inca.so share: the logger NCCL gave init(),
 * environment helpers, errno -> NCCL result mapping, device properties, and the
 * version-neutral entry points that plugin.c wraps into NCCL's v7 and v8 structs.
 * Internal: nothing here is exported from the library (docs/nccl.md). */
#ifndef INCA_NCCL_PLUGIN_H
#define INCA_NCCL_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_plugin_abi.h"

#define NPLUG_NAME "INCA"       /* ncclNet / ncclCollNet name: NCCL_NET=INCA selects it */
#define NPLUG_DEV_NAME "inca0"  /* the one device */

/* Log through NCCL's logger (set by either init; silent before). Thread-safe. */
void nplug_set_logger(nccl_abi_logger log);
void nplug_log(nccl_abi_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* libinca's log sink (inca_log_fn) forwarding to nplug_log. */
void nplug_inca_log(void *ctx, int level, const char *msg);

/* Environment: the string (NULL if unset or empty), an unsigned number with a default. */
const char *nplug_env(const char *name);
unsigned long nplug_env_ul(const char *name, unsigned long dflt);
/* INCA_NCCL_HOST_IP, default 127.0.0.1: the IPv4 address of every TCP listener. */
const char *nplug_host_ip(void);

/* A negative errno from libinca or the kernel as an NCCL result. */
nccl_abi_result nplug_result(int err);

/* Device properties, filled version-neutrally; plugin.c copies them into v7/v8 structs. */
struct nplug_props {
	const char *name;
	uint64_t guid;
	int ptr_support;
	int speed_mbps;
	int port;
	float latency_us;
	int max_comms;
	int max_recvs;
};
nccl_abi_result nplug_devices(int *ndev);
nccl_abi_result nplug_properties(int dev, struct nplug_props *p);

/* Memory registration shared by the p2p and the collective side: host memory only. The
 * handle records the range so operations can check that their buffers lie inside it. */
struct nplug_mr {
	const char *base;
	size_t bytes;
};
nccl_abi_result nplug_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
nccl_abi_result nplug_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
nccl_abi_result nplug_dereg_mr(void *comm, void *mhandle);
/* 1 if [p, p + bytes) lies in the registration (NULL mhandle: no check), else 0. */
int nplug_mr_covers(const void *mhandle, const void *p, size_t bytes);

/* ---- point-to-point network over TCP (net_tcp.c) ---------------------------------------- */
nccl_abi_result nplug_net_init(nccl_abi_logger log);
nccl_abi_result nplug_net_listen(int dev, void *handle, void **listen_comm);
nccl_abi_result nplug_net_connect(int dev, void *handle, void **send_comm,
				  struct nccl_abi_device_handle **send_dev);
nccl_abi_result nplug_net_accept(void *listen_comm, void **recv_comm,
				 struct nccl_abi_device_handle **recv_dev);
nccl_abi_result nplug_net_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
				void **request);
nccl_abi_result nplug_net_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
				void **mhandles, void **request);
nccl_abi_result nplug_net_iflush(void *recv_comm, int n, void **data, int *sizes,
				 void **mhandles, void **request);
nccl_abi_result nplug_net_test(void *request, int *done, int *sizes);
nccl_abi_result nplug_net_close_send(void *send_comm);
nccl_abi_result nplug_net_close_recv(void *recv_comm);
nccl_abi_result nplug_net_close_listen(void *listen_comm);

/* ---- collective network over libinca (collnet.c) ---------------------------------------- */
nccl_abi_result nplug_coll_init(nccl_abi_logger log);
nccl_abi_result nplug_coll_devices(int *ndev);
nccl_abi_result nplug_coll_listen(int dev, void *handle, void **listen_comm);
nccl_abi_result nplug_coll_connect(void *handles[], int nranks, int rank, void *listen_comm,
				   void **coll_comm);
nccl_abi_result nplug_coll_reduce_support(nccl_abi_dtype dt, nccl_abi_redop op, int *supported);
nccl_abi_result nplug_coll_iallreduce(void *coll_comm, void *send_data, void *recv_data,
				      int count, nccl_abi_dtype dt, nccl_abi_redop op,
				      void *send_mhandle, void *recv_mhandle, void **request);
nccl_abi_result nplug_coll_iflush(void *coll_comm, void *data, int size, void *mhandle,
				  void **request);
nccl_abi_result nplug_coll_test(void *request, int *done, int *size);
nccl_abi_result nplug_coll_close(void *coll_comm);
nccl_abi_result nplug_coll_close_listen(void *listen_comm);

#endif
