/* nccl/nccl_plugin_abi.h: our own declarations of NCCL's external network plugin interface
 * (the "ext-net" ABI), as far as libnccl-net-inca.so implements it. No NCCL header is needed
 * to build the plugin, and none is included here.
 *
 * Followed: the versioned plugin structs v7 (NCCL 2.14 .. 2.18) and v8 (NCCL 2.19 .. 2.21;
 * later NCCL releases still load v8 plugins). NCCL dlopen()s libnccl-net-${NCCL_NET_PLUGIN}.so
 * and looks up the symbols ncclNetPlugin_vN and ncclCollNetPlugin_vN (newest first). Every
 * function returns an nccl_result; structs are plain C with the member order NCCL expects, so
 * the order below must never change. The enum values are NCCL's public ones (nccl.h). */
#ifndef INCA_NCCL_PLUGIN_ABI_H
#define INCA_NCCL_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

/* Result codes (ncclResult_t). */
typedef enum {
	NCCL_ABI_SUCCESS = 0,
	NCCL_ABI_UNHANDLED_CUDA_ERROR = 1,
	NCCL_ABI_SYSTEM_ERROR = 2,   /* a system call or the network failed */
	NCCL_ABI_INTERNAL_ERROR = 3, /* NCCL used the plugin in a way it must not */
	NCCL_ABI_INVALID_ARGUMENT = 4,
	NCCL_ABI_INVALID_USAGE = 5,  /* most likely the user's configuration */
	NCCL_ABI_REMOTE_ERROR = 6,   /* a peer failed */
	NCCL_ABI_IN_PROGRESS = 7,
} nccl_abi_result;

/* Element types (ncclDataType_t). The fp8 types exist from NCCL 2.24 on. */
typedef enum {
	NCCL_ABI_INT8 = 0,
	NCCL_ABI_UINT8 = 1,
	NCCL_ABI_INT32 = 2,
	NCCL_ABI_UINT32 = 3,
	NCCL_ABI_INT64 = 4,
	NCCL_ABI_UINT64 = 5,
	NCCL_ABI_FLOAT16 = 6,
	NCCL_ABI_FLOAT32 = 7,
	NCCL_ABI_FLOAT64 = 8,
	NCCL_ABI_BFLOAT16 = 9,
	NCCL_ABI_FP8_E4M3 = 10,
	NCCL_ABI_FP8_E5M2 = 11,
} nccl_abi_dtype;

/* Reduction operators (ncclRedOp_t). Values from NCCL_ABI_NUM_OPS up are user-defined
 * operators (ncclRedOpCreatePreMulSum), which no network can run. */
typedef enum {
	NCCL_ABI_SUM = 0,
	NCCL_ABI_PROD = 1,
	NCCL_ABI_MAX = 2,
	NCCL_ABI_MIN = 3,
	NCCL_ABI_AVG = 4,
	NCCL_ABI_NUM_OPS = 5,
} nccl_abi_redop;

/* Debug logger handed to init(). Levels and subsystem flags as NCCL defines them. */
typedef enum {
	NCCL_ABI_LOG_NONE = 0,
	NCCL_ABI_LOG_VERSION = 1,
	NCCL_ABI_LOG_WARN = 2,
	NCCL_ABI_LOG_INFO = 3,
	NCCL_ABI_LOG_ABORT = 4,
	NCCL_ABI_LOG_TRACE = 5,
} nccl_abi_log_level;
#define NCCL_ABI_SUBSYS_INIT 0x1UL
#define NCCL_ABI_SUBSYS_COLL 0x2UL
#define NCCL_ABI_SUBSYS_NET 0x10UL
typedef void (*nccl_abi_logger)(nccl_abi_log_level level, unsigned long flags, const char *file,
				int line, const char *fmt, ...);

/* Sizes and pointer kinds. NCCL hands listen() a handle buffer of this size and passes it to
 * the peers (connect) through its own bootstrap. */
#define NCCL_ABI_HANDLE_MAXSIZE 128
#define NCCL_ABI_PTR_HOST 0x1
#define NCCL_ABI_PTR_CUDA 0x2
#define NCCL_ABI_PTR_DMABUF 0x4
/* Requests NCCL may keep outstanding per p2p communicator (the larger of the values used by
 * the NCCL releases above). */
#define NCCL_ABI_MAX_REQUESTS 32

/* Device offload type of getProperties (only HOST: the plugin has no device code). */
typedef enum { NCCL_ABI_DEVICE_HOST = 0, NCCL_ABI_DEVICE_UNPACK = 1 } nccl_abi_device_type;
#define NCCL_ABI_DEVICE_INVALID_VERSION 0

/* Device handle of v7/v8 connect/accept (we never fill one: no device offload). */
struct nccl_abi_device_handle {
	nccl_abi_device_type type;
	int version;
	void *handle;
	size_t size;
	int needs_proxy_progress;
};

/* getProperties. v8 is v7 plus reg_is_global after ptr_support; the members around it are
 * spelled once (NCCL_ABI_PROPS_HEAD / _TAIL) so the two versions cannot drift apart. */
#define NCCL_ABI_PROPS_HEAD                                                                        \
	char *name;                                                                                \
	char *pci_path;  /* NULL: a virtual device without a place in the PCI topology */          \
	uint64_t guid;                                                                             \
	int ptr_support; /* NCCL_ABI_PTR_* */
#define NCCL_ABI_PROPS_TAIL                                                                        \
	int speed_mbps;                                                                            \
	int port;                                                                                  \
	float latency_us;                                                                          \
	int max_comms;                                                                             \
	int max_recvs; /* grouped receives per irecv */                                            \
	nccl_abi_device_type device_type;                                                          \
	int device_version;

struct nccl_abi_props_v7 {
	NCCL_ABI_PROPS_HEAD
	NCCL_ABI_PROPS_TAIL
};

struct nccl_abi_props_v8 {
	NCCL_ABI_PROPS_HEAD
	int reg_is_global; /* 1: a registration is valid for every comm of the device */
	NCCL_ABI_PROPS_TAIL
};

/* Point-to-point network, v7 (ncclNet_v7_t) and v8 (ncclNet_v8_t): they differ only in the
 * properties struct (PROPS) and regMr's size (REG_SIZE: int in v7, size_t in v8). */
#define NCCL_ABI_NET_MEMBERS(PROPS, REG_SIZE)                                                      \
	const char *name;                                                                          \
	nccl_abi_result (*init)(nccl_abi_logger log);                                              \
	nccl_abi_result (*devices)(int *ndev);                                                     \
	nccl_abi_result (*get_properties)(int dev, PROPS *props);                                  \
	nccl_abi_result (*listen)(int dev, void *handle, void **listen_comm);                      \
	nccl_abi_result (*connect)(int dev, void *handle, void **send_comm,                        \
				   struct nccl_abi_device_handle **send_dev);                      \
	nccl_abi_result (*accept)(void *listen_comm, void **recv_comm,                             \
				  struct nccl_abi_device_handle **recv_dev);                       \
	nccl_abi_result (*reg_mr)(void *comm, void *data, REG_SIZE size, int type,                 \
				  void **mhandle);                                                 \
	nccl_abi_result (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type,            \
					 uint64_t offset, int fd, void **mhandle);                 \
	nccl_abi_result (*dereg_mr)(void *comm, void *mhandle);                                    \
	nccl_abi_result (*isend)(void *send_comm, void *data, int size, int tag, void *mhandle,    \
				 void **request);                                                  \
	nccl_abi_result (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags,       \
				 void **mhandles, void **request);                                 \
	nccl_abi_result (*iflush)(void *recv_comm, int n, void **data, int *sizes,                 \
				  void **mhandles, void **request);                                \
	nccl_abi_result (*test)(void *request, int *done, int *sizes);                             \
	nccl_abi_result (*close_send)(void *send_comm);                                            \
	nccl_abi_result (*close_recv)(void *recv_comm);                                            \
	nccl_abi_result (*close_listen)(void *listen_comm);                                        \
	nccl_abi_result (*get_device_mr)(void *comm, void *mhandle, void **dptr_mhandle);          \
	nccl_abi_result (*irecv_consumed)(void *recv_comm, int n, void *request);

struct nccl_abi_net_v7 {
	NCCL_ABI_NET_MEMBERS(struct nccl_abi_props_v7, int)
};

struct nccl_abi_net_v8 {
	NCCL_ABI_NET_MEMBERS(struct nccl_abi_props_v8, size_t)
};

/* Scatter-gather element of the v8 collective AllGather / ReduceScatter. */
struct nccl_abi_sge_v8 {
	void *mhandle;
	void *address;
	uint32_t size;
};

/* Collective network, v7 (ncclCollNet_v7_t) and v8 (ncclCollNet_v8_t). connect() gets every
 * rank's listen() handle (handles[r] points at rank r's NCCL_ABI_HANDLE_MAXSIZE bytes) and
 * builds the group. v8 differs by the properties struct, a size_t regMr size, and the
 * AllGather / ReduceScatter entries between iallreduce and iflush; NCCL treats a NULL
 * iallgather / ireducescatter as "not offered" and keeps those collectives off CollNet. */
#define NCCL_ABI_COLLNET_HEAD(PROPS, REG_SIZE)                                                     \
	const char *name;                                                                          \
	nccl_abi_result (*init)(nccl_abi_logger log);                                              \
	nccl_abi_result (*devices)(int *ndev);                                                     \
	nccl_abi_result (*get_properties)(int dev, PROPS *props);                                  \
	nccl_abi_result (*listen)(int dev, void *handle, void **listen_comm);                      \
	nccl_abi_result (*connect)(void *handles[], int nranks, int rank, void *listen_comm,       \
				   void **coll_comm);                                              \
	nccl_abi_result (*reduce_support)(nccl_abi_dtype dt, nccl_abi_redop op,                    \
					  int *supported);                                         \
	nccl_abi_result (*reg_mr)(void *coll_comm, void *data, REG_SIZE size, int type,            \
				  void **mhandle);                                                 \
	nccl_abi_result (*reg_mr_dmabuf)(void *coll_comm, void *data, size_t size, int type,       \
					 uint64_t offset, int fd, void **mhandle);                 \
	nccl_abi_result (*dereg_mr)(void *coll_comm, void *mhandle);                               \
	nccl_abi_result (*iallreduce)(void *coll_comm, void *send_data, void *recv_data,           \
				      int count, nccl_abi_dtype dt, nccl_abi_redop op,             \
				      void *send_mhandle, void *recv_mhandle, void **request);
#define NCCL_ABI_COLLNET_TAIL                                                                      \
	nccl_abi_result (*iflush)(void *coll_comm, void *data, int size, void *mhandle,            \
				  void **request);                                                 \
	nccl_abi_result (*test)(void *request, int *done, int *size);                              \
	nccl_abi_result (*close_coll)(void *coll_comm);                                            \
	nccl_abi_result (*close_listen)(void *listen_comm);

struct nccl_abi_collnet_v7 {
	NCCL_ABI_COLLNET_HEAD(struct nccl_abi_props_v7, int)
	NCCL_ABI_COLLNET_TAIL
};

struct nccl_abi_collnet_v8 {
	NCCL_ABI_COLLNET_HEAD(struct nccl_abi_props_v8, size_t)
	nccl_abi_result (*iallgather)(void *coll_comm, void *send_data, int n_recv_parts,
				      struct nccl_abi_sge_v8 *recv_parts, size_t bytes_per_rank,
				      size_t window_offset, size_t window_bytes, void *send_mhandle,
				      void **request);
	nccl_abi_result (*ireducescatter)(void *coll_comm, int n_send_parts,
					  struct nccl_abi_sge_v8 *send_parts, void *recv_data,
					  size_t bytes_per_rank, size_t window_offset,
					  size_t window_bytes, nccl_abi_dtype dt, nccl_abi_redop op,
					  void *recv_mhandle, void **request);
	NCCL_ABI_COLLNET_TAIL
};

/* The symbols NCCL looks up in the plugin library. */
#define NCCL_ABI_SYM_NET_V7 "ncclNetPlugin_v7"
#define NCCL_ABI_SYM_NET_V8 "ncclNetPlugin_v8"
#define NCCL_ABI_SYM_COLLNET_V7 "ncclCollNetPlugin_v7"
#define NCCL_ABI_SYM_COLLNET_V8 "ncclCollNetPlugin_v8"

#endif
