/* proto/am_rpc: small helpers over the gRPC core C API shared by inca-am, the `inca` CLI, the
 * tests and libinca: protobuf-c <-> grpc_byte_buffer, channels (insecure or TLS) and a blocking
 * unary call. No globals; the caller runs grpc_init()/grpc_shutdown(). */
#ifndef INCA_AM_RPC_H
#define INCA_AM_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#include "inca_am.pb-c.h"

#define AM_RPC_SERVICE "/inca.am.v1.Am/"

/* Call credentials, sent as gRPC metadata (docs/am.md "Who sees what"): the admin token, or
 * a job id and its credential. The query RPCs need one of them; Dismantle the admin token. */
#define AM_MD_ADMIN_TOKEN "inca-admin-token"
#define AM_MD_JOB_ID "inca-job-id"
#define AM_MD_JOB_CREDENTIAL "inca-job-credential"

/* Pack m into a new byte buffer (owned by the caller; NULL on allocation failure). */
grpc_byte_buffer *am_rpc_pack(const ProtobufCMessage *m);
/* Unpack bb (borrowed) as a d message; NULL if it does not parse. Free with
 * protobuf_c_message_free_unpacked. */
ProtobufCMessage *am_rpc_unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *bb);

/* A channel to target ("host:port"): TLS with the PEM root certificate file ca_path (NULL: the
 * system's roots), or plaintext when insecure is set. Returns NULL with a message in err on
 * failure. */
grpc_channel *am_rpc_channel(const char *target, const char *ca_path, bool insecure, char *err,
			     size_t cap);

/* Milliseconds from now as a gRPC deadline. */
gpr_timespec am_rpc_deadline_ms(uint64_t ms);

/* -errno for a gRPC status (PERMISSION_DENIED -> -EACCES, UNAVAILABLE -> -ECONNREFUSED, ...). */
int am_rpc_status_errno(grpc_status_code st);

/* Blocking unary call of AM_RPC_SERVICE + method. On success returns 0 and an owned reply in
 * *reply; else -errno and, when err is non-NULL, the gRPC status details. */
int am_rpc_unary(grpc_channel *ch, const char *method, const ProtobufCMessage *req,
		 const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **reply,
		 uint64_t timeout_ms, char *err, size_t cap);

/* am_rpc_unary with call options: metadata (borrowed; e.g. the AM_MD_* credentials) and
 * fail_fast (no waiting for the channel to become ready: an AM that is down or a TLS
 * handshake that fails gives -ECONNREFUSED at once). */
struct am_rpc_call_opts {
	const grpc_metadata *md;
	size_t nmd;
	bool fail_fast;
};
int am_rpc_unary_opts(grpc_channel *ch, const char *method, const struct am_rpc_call_opts *o,
		      const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply_desc,
		      ProtobufCMessage **reply, uint64_t timeout_ms, char *err, size_t cap);

/* Read a whole small file into a NUL-terminated owned string (PEM files). NULL on failure. */
char *am_rpc_read_file(const char *path);

#endif
