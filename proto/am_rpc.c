/* proto/am_rpc: protobuf-c packing into gRPC byte buffers, channel creation and a blocking
 * unary call over the gRPC core C API (see am_rpc.h). Used by inca-am, `inca`, libinca. */
#include "am_rpc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

grpc_byte_buffer *am_rpc_pack(const ProtobufCMessage *m)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	grpc_slice s = grpc_slice_malloc(len);
	grpc_byte_buffer *bb;

	protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
	bb = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s);
	return bb;
}

ProtobufCMessage *am_rpc_unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *bb)
{
	grpc_byte_buffer_reader r;
	ProtobufCMessage *m;
	grpc_slice s;

	if (!bb || !grpc_byte_buffer_reader_init(&r, bb))
		return NULL;
	s = grpc_byte_buffer_reader_readall(&r);
	m = protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
	grpc_slice_unref(s);
	grpc_byte_buffer_reader_destroy(&r);
	return m;
}

char *am_rpc_read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (1 << 20) &&
	    fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		if (buf)
			buf[n] = '\0';
	}
	fclose(f);
	return buf;
}

grpc_channel *am_rpc_channel(const char *target, const char *ca_path, bool insecure, char *err,
			     size_t cap)
{
	grpc_channel_credentials *creds;
	grpc_channel *ch;

	if (insecure) {
		creds = grpc_insecure_credentials_create();
	} else if (ca_path) {
		char *ca = am_rpc_read_file(ca_path);
		if (!ca) {
			if (err)
				snprintf(err, cap, "cannot read CA file %s", ca_path);
			return NULL;
		}
		creds = grpc_ssl_credentials_create(ca, NULL, NULL, NULL);
		free(ca);
	} else {
		creds = grpc_ssl_credentials_create(NULL, NULL, NULL, NULL);
	}
	if (!creds) {
		if (err)
			snprintf(err, cap, "cannot create channel credentials");
		return NULL;
	}
	/* Reconnect quickly after an AM restart: gRPC's default backoff grows to minutes, and a
	 * client's session must come back within the AM's grace period. */
	{
		grpc_arg args[3];
		grpc_channel_args ca = { 3, args };
		args[0].type = args[1].type = args[2].type = GRPC_ARG_INTEGER;
		args[0].key = (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
		args[0].value.integer = 100;
		args[1].key = (char *)GRPC_ARG_MIN_RECONNECT_BACKOFF_MS;
		args[1].value.integer = 100;
		args[2].key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
		args[2].value.integer = 1000;
		ch = grpc_channel_create(target, creds, &ca);
	}
	grpc_channel_credentials_release(creds);
	if (!ch && err)
		snprintf(err, cap, "cannot create a channel to %s", target);
	return ch;
}

gpr_timespec am_rpc_deadline_ms(uint64_t ms)
{
	return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
			    gpr_time_from_millis((int64_t)ms, GPR_TIMESPAN));
}

int am_rpc_status_errno(grpc_status_code st)
{
	switch (st) {
	case GRPC_STATUS_OK:
		return 0;
	case GRPC_STATUS_PERMISSION_DENIED:
	case GRPC_STATUS_UNAUTHENTICATED:
		return -EACCES;
	case GRPC_STATUS_UNAVAILABLE:
		return -ECONNREFUSED;
	case GRPC_STATUS_DEADLINE_EXCEEDED:
		return -ETIMEDOUT;
	case GRPC_STATUS_INVALID_ARGUMENT:
	case GRPC_STATUS_OUT_OF_RANGE:
		return -EINVAL;
	case GRPC_STATUS_NOT_FOUND:
		return -ENOENT;
	case GRPC_STATUS_UNIMPLEMENTED:
		return -ENOSYS;
	case GRPC_STATUS_RESOURCE_EXHAUSTED:
		return -ENOSPC;
	case GRPC_STATUS_ALREADY_EXISTS:
		return -EEXIST;
	case GRPC_STATUS_FAILED_PRECONDITION:
	case GRPC_STATUS_ABORTED:
		return -EBUSY;
	case GRPC_STATUS_CANCELLED:
		return -ECANCELED;
	default:
		return -EIO;
	}
}

/* Drain and destroy a NEXT completion queue whose calls are all finished. */
static void cq_destroy(grpc_completion_queue *cq)
{
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
}

int am_rpc_unary(grpc_channel *ch, const char *method, const ProtobufCMessage *req,
		 const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **reply,
		 uint64_t timeout_ms, char *err, size_t cap)
{
	return am_rpc_unary_opts(ch, method, NULL, req, reply_desc, reply, timeout_ms, err, cap);
}

int am_rpc_unary_opts(grpc_channel *ch, const char *method, const struct am_rpc_call_opts *o,
		      const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply_desc,
		      ProtobufCMessage **reply, uint64_t timeout_ms, char *err, size_t cap)
{
	char path[128];
	grpc_completion_queue *cq;
	grpc_call *call;
	grpc_metadata_array md_init, md_trail;
	grpc_byte_buffer *send_bb, *recv_bb = NULL;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	grpc_slice mslice;
	grpc_op ops[6];
	grpc_event ev;
	int rc;

	*reply = NULL;
	if (err && cap)
		err[0] = '\0';
	snprintf(path, sizeof path, AM_RPC_SERVICE "%s", method);
	send_bb = am_rpc_pack(req);
	if (!send_bb)
		return -ENOMEM;
	cq = grpc_completion_queue_create_for_next(NULL);
	mslice = grpc_slice_from_copied_string(path);
	call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice, NULL,
					am_rpc_deadline_ms(timeout_ms), NULL);
	grpc_slice_unref(mslice);
	grpc_metadata_array_init(&md_init);
	grpc_metadata_array_init(&md_trail);
	memset(ops, 0, sizeof ops);
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (!o || !o->fail_fast)
		ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY; /* ride out an AM restart */
	if (o && o->nmd) {
		ops[0].data.send_initial_metadata.count = o->nmd;
		ops[0].data.send_initial_metadata.metadata = (grpc_metadata *)o->md;
	}
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send_bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &md_init;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recv_bb;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &md_trail;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	if (grpc_call_start_batch(call, ops, 6, (void *)1, NULL) != GRPC_CALL_OK) {
		rc = -EIO;
	} else {
		/* The call's own deadline ends it; the queue always delivers the tag. */
		ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		if (ev.type != GRPC_OP_COMPLETE) {
			rc = -EIO;
		} else if (status != GRPC_STATUS_OK) {
			rc = am_rpc_status_errno(status);
			if (err && cap) {
				char *d = grpc_slice_to_c_string(details);
				snprintf(err, cap, "%s", d);
				gpr_free(d);
			}
		} else {
			*reply = am_rpc_unpack(reply_desc, recv_bb);
			rc = *reply ? 0 : -EPROTO;
		}
	}
	grpc_call_unref(call);
	cq_destroy(cq);
	grpc_byte_buffer_destroy(send_bb);
	if (recv_bb)
		grpc_byte_buffer_destroy(recv_bb);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md_init);
	grpc_metadata_array_destroy(&md_trail);
	return rc;
}
