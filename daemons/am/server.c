/* inca-am gRPC server on the core C API: one completion queue, generic calls only (dispatch by
 * method name, so an unknown method is answered UNIMPLEMENTED at once), unary handlers (one,
 * ReportFailure, may answer later), the caller's credentials from the call metadata, and the
 * streams: Session (bidirectional), grpc.health.v1 Watch and server reflection (one send in
 * flight, a queue behind). A call object lives until its RECV_CLOSE_ON_SERVER completed, no
 * batch is in flight and no handler keeps it. A pump thread waits on the completion queue and
 * hands each event to the main loop (am->wake_fd), which alone touches calls and groups: the
 * main loop thus sleeps on one fd for gRPC events and for the switch workers' answers alike. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "am.h"
#include "metrics.h"
#include "util/util.h"

enum tag_kind { T_NEW, T_INIT, T_RECV, T_SEND, T_STATUS, T_CLOSE };

struct am_call;
struct am_tag {
	struct am_call *c;
	enum tag_kind k;
};

#define SESS_QMAX 256
#define MD_MAX (AM_STR * 2)

#define HEALTH_SERVICE "/grpc.health.v1.Health/"
#define REFLECT_V1ALPHA "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
#define REFLECT_V1 "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"

enum stream_kind { S_UNARY, S_SESSION, S_REFLECT, S_WATCH };

struct am_call {
	struct am *am;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array md;
	char method[96];
	enum stream_kind stream;
	/* credentials from the metadata; md_bad: one was too long to be valid */
	char md_admin[MD_MAX], md_job[MD_MAX], md_cred[MD_MAX];
	bool md_bad;
	int pending;
	bool closed, status_sent, status_queued;
	bool kept;               /* a handler answers later (am_pending_answer) */
	struct am_call *kept_next;
	int cancelled;
	grpc_byte_buffer *recv_bb, *send_bb;
	grpc_slice status_details;
	struct am_tag t_new, t_init, t_recv, t_send, t_status, t_close;
	/* session */
	bool opened, finish_req;
	uint64_t gid;
	uint32_t rank;
	grpc_byte_buffer *q[SESS_QMAX];
	unsigned qh, qn;
};

/* The opaque handles of am.h are the call itself. */
struct am_session {
	struct am_call c;
};

struct am_pending {
	struct am_call c;
};

/* Completion-queue events on their way from the pump thread to the main loop. */
struct srv_ev {
	void *tag;
	bool ok;
};

struct am_srvq {
	pthread_t th;
	bool started;
	pthread_mutex_t mu;
	struct srv_ev *v;
	size_t n, cap;
	bool shutdown;           /* the queue was shut down and drained: the pump is gone */
	struct am_call *kept;    /* calls a handler still has to answer */
};

static int pump_start(struct am *am);

static void tags_init(struct am_call *c)
{
	c->t_new = (struct am_tag){ c, T_NEW };
	c->t_init = (struct am_tag){ c, T_INIT };
	c->t_recv = (struct am_tag){ c, T_RECV };
	c->t_send = (struct am_tag){ c, T_SEND };
	c->t_status = (struct am_tag){ c, T_STATUS };
	c->t_close = (struct am_tag){ c, T_CLOSE };
}

static void request_new(struct am *am)
{
	struct am_call *c;

	if (am->shutting_down)
		return;
	c = calloc(1, sizeof(struct am_session));
	if (!c)
		abort(); /* daemon: out of memory */
	c->am = am;
	tags_init(c);
	c->status_details = grpc_empty_slice();
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->md);
	if (grpc_server_request_call(am->server, &c->call, &c->details, &c->md, am->cq, am->cq,
				     &c->t_new) != GRPC_CALL_OK) {
		am_log(0, "grpc_server_request_call failed");
		free(c);
	}
}

static void call_free(struct am_call *c)
{
	if (c->call)
		grpc_call_unref(c->call);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->md);
	if (c->recv_bb)
		grpc_byte_buffer_destroy(c->recv_bb);
	if (c->send_bb)
		grpc_byte_buffer_destroy(c->send_bb);
	while (c->qn) {
		grpc_byte_buffer_destroy(c->q[c->qh]);
		c->qh = (c->qh + 1) % SESS_QMAX;
		c->qn--;
	}
	grpc_slice_unref(c->status_details);
	free(c);
}

static void maybe_free(struct am_call *c)
{
	if (c->pending == 0 && c->closed && !c->kept)
		call_free(c);
}

static bool start(struct am_call *c, grpc_op *ops, size_t n, struct am_tag *tag)
{
	grpc_call_error e = grpc_call_start_batch(c->call, ops, n, tag, NULL);

	if (e != GRPC_CALL_OK) {
		am_log(0, "grpc_call_start_batch(%s): error %d", c->method, (int)e);
		return false;
	}
	c->pending++;
	return true;
}

static void start_close_watch(struct am_call *c)
{
	grpc_op op;

	memset(&op, 0, sizeof op);
	op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	op.data.recv_close_on_server.cancelled = &c->cancelled;
	if (!start(c, &op, 1, &c->t_close))
		c->closed = true;
}

static void start_recv(struct am_call *c)
{
	grpc_op op;

	memset(&op, 0, sizeof op);
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &c->recv_bb;
	start(c, &op, 1, &c->t_recv);
}

/* Unary answer (reply may be NULL on error) or the final status of a stream. */
static void send_status(struct am_call *c, grpc_status_code st, const char *msg,
			const ProtobufCMessage *reply, bool with_initial_md)
{
	grpc_op ops[3];
	size_t n = 0;

	if (c->status_sent)
		return;
	c->status_sent = true;
	am_metrics_rpc_done(c->am->metrics, c->method, st);
	memset(ops, 0, sizeof ops);
	if (with_initial_md)
		ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (reply && st == GRPC_STATUS_OK) {
		c->send_bb = am_rpc_pack(reply);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = c->send_bb;
	}
	grpc_slice_unref(c->status_details);
	c->status_details = grpc_slice_from_copied_string(msg ? msg : "");
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = st;
	ops[n].data.send_status_from_server.status_details = &c->status_details;
	n++;
	start(c, ops, n, &c->t_status);
}

/* ---------------------------------------------------------------- unary dispatch */

/* Copy the credentials of the call's metadata. */
static void read_credentials(struct am_call *c)
{
	for (size_t i = 0; i < c->md.count; i++) {
		const grpc_metadata *e = &c->md.metadata[i];
		char *dst = NULL;
		size_t n = GRPC_SLICE_LENGTH(e->value);
		if (grpc_slice_str_cmp(e->key, AM_MD_ADMIN_TOKEN) == 0)
			dst = c->md_admin;
		else if (grpc_slice_str_cmp(e->key, AM_MD_JOB_ID) == 0)
			dst = c->md_job;
		else if (grpc_slice_str_cmp(e->key, AM_MD_JOB_CREDENTIAL) == 0)
			dst = c->md_cred;
		if (!dst)
			continue;
		if (n >= MD_MAX || memchr(GRPC_SLICE_START_PTR(e->value), 0, n)) {
			c->md_bad = true;
			continue;
		}
		memcpy(dst, GRPC_SLICE_START_PTR(e->value), n);
		dst[n] = '\0';
	}
}

/* The caller of a query or admin RPC. False when an answer (refusal) was sent. */
static bool caller(struct am_call *c, const char *m, bool query, struct am_auth *who)
{
	struct am *am = c->am;
	char msg[256] = "";
	grpc_status_code st;

	if (c->md_bad) {
		am->st.queries_denied++;
		am_log(0, "DENIED %s: credential in the metadata too long", m);
		send_status(c, GRPC_STATUS_PERMISSION_DENIED, "credential too long", NULL, true);
		return false;
	}
	st = am_auth_check(am, c->md_admin, c->md_job, c->md_cred, m, who, msg, sizeof msg);
	if (st != GRPC_STATUS_OK) {
		send_status(c, st, msg, NULL, true);
		return false;
	}
	if (query && who->who == AM_CALLER_ANON) {
		am->st.queries_denied++;
		am_log(0, "DENIED %s: anonymous caller", m);
		send_status(c, GRPC_STATUS_UNAUTHENTICATED,
			    "a credential is required: metadata " AM_MD_JOB_ID " + "
			    AM_MD_JOB_CREDENTIAL " (your job's groups; inca --job/--credential) or "
			    AM_MD_ADMIN_TOKEN " (everything; admin_token in the AM config, inca "
			    "--admin-token or INCA_ADMIN_TOKEN)", NULL, true);
		return false;
	}
	return true;
}

/* A unary OK answer whose reply is packed already (owned by the call from here on). */
static void send_packed(struct am_call *c, grpc_byte_buffer *bb)
{
	grpc_op ops[3];

	memset(ops, 0, sizeof ops);
	c->status_sent = true;
	c->send_bb = bb;
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = bb;
	ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[2].data.send_status_from_server.status = GRPC_STATUS_OK;
	ops[2].data.send_status_from_server.status_details = &c->status_details;
	start(c, ops, 3, &c->t_status);
}

static void handle_health_check(struct am_call *c)
{
	char msg[160] = "";
	grpc_status_code st;
	grpc_byte_buffer *bb = am_health(c->am, c->recv_bb, false, &st, msg, sizeof msg);

	if (bb)
		send_packed(c, bb);
	else
		send_status(c, st, msg, NULL, true);
}

static void handle_unary(struct am_call *c)
{
	struct am *am = c->am;
	const char *m = c->method + strlen(AM_RPC_SERVICE);
	char msg[256] = "";
	grpc_status_code st = GRPC_STATUS_OK;
	struct am_auth who;

	if (!c->recv_bb) {
		send_status(c, GRPC_STATUS_INVALID_ARGUMENT, "no request message", NULL, true);
		return;
	}
	if (strcmp(c->method, HEALTH_SERVICE "Check") == 0) {
		handle_health_check(c);
		return;
	}
	if (strcmp(m, "Join") == 0) {
		Inca__Am__V1__JoinRequest *rq = (Inca__Am__V1__JoinRequest *)am_rpc_unpack(
			&inca__am__v1__join_request__descriptor, c->recv_bb);
		Inca__Am__V1__JoinReply rp = INCA__AM__V1__JOIN_REPLY__INIT;
		st = rq ? am_join(am, rq, &rp, msg, sizeof msg) : GRPC_STATUS_INVALID_ARGUMENT;
		send_status(c, st, rq ? msg : "bad JoinRequest", &rp.base, true);
		if (rq)
			protobuf_c_message_free_unpacked(&rq->base, NULL);
	} else if (strcmp(m, "Leave") == 0) {
		Inca__Am__V1__LeaveRequest *rq = (Inca__Am__V1__LeaveRequest *)am_rpc_unpack(
			&inca__am__v1__leave_request__descriptor, c->recv_bb);
		Inca__Am__V1__LeaveReply rp = INCA__AM__V1__LEAVE_REPLY__INIT;
		st = rq ? am_leave(am, rq, msg, sizeof msg) : GRPC_STATUS_INVALID_ARGUMENT;
		send_status(c, st, rq ? msg : "bad LeaveRequest", &rp.base, true);
		if (rq)
			protobuf_c_message_free_unpacked(&rq->base, NULL);
	} else if (strcmp(m, "Dismantle") == 0) {
		Inca__Am__V1__DismantleRequest *rq;
		Inca__Am__V1__DismantleReply rp = INCA__AM__V1__DISMANTLE_REPLY__INIT;
		if (!caller(c, m, false, &who))
			return;
		rq = (Inca__Am__V1__DismantleRequest *)am_rpc_unpack(
			&inca__am__v1__dismantle_request__descriptor, c->recv_bb);
		st = rq ? am_dismantle_rpc(am, rq, &who, msg, sizeof msg) :
			  GRPC_STATUS_INVALID_ARGUMENT;
		send_status(c, st, rq ? msg : "bad DismantleRequest", &rp.base, true);
		if (rq)
			protobuf_c_message_free_unpacked(&rq->base, NULL);
	} else if (strcmp(m, "ReportFailure") == 0) {
		Inca__Am__V1__FailureReport *rq = (Inca__Am__V1__FailureReport *)am_rpc_unpack(
			&inca__am__v1__failure_report__descriptor, c->recv_bb);
		Inca__Am__V1__FailureReply rp = INCA__AM__V1__FAILURE_REPLY__INIT;
		st = rq ? am_report_failure(am, rq, &rp, (struct am_pending *)c, msg, sizeof msg) :
			  GRPC_STATUS_INVALID_ARGUMENT;
		if (st == AM_DEFERRED) {
			c->kept = true;
			c->kept_next = am->srvq->kept;
			am->srvq->kept = c;
		} else {
			send_status(c, st, rq ? msg : "bad FailureReport", &rp.base, true);
		}
		if (rq)
			protobuf_c_message_free_unpacked(&rq->base, NULL);
	} else {
		struct am_qreply *rp;
		if (!caller(c, m, true, &who))
			return;
		rp = am_query(am, m, &who);
		if (rp) {
			send_status(c, GRPC_STATUS_OK, "", am_qreply_msg(rp), true);
			am_qreply_free(rp);
		} else {
			send_status(c, GRPC_STATUS_INTERNAL, "query failed", NULL, true);
		}
	}
}

static bool known_unary(const char *m)
{
	static const char *const names[] = { "Join", "Leave", "Dismantle", "ListGroups",
					     "ListTrees", "ListSwitches", "ListLinks",
					     "GetStats", "ReportFailure", NULL };
	if (strcmp(m, HEALTH_SERVICE "Check") == 0)
		return true;
	if (strncmp(m, AM_RPC_SERVICE, strlen(AM_RPC_SERVICE)) != 0)
		return false;
	m += strlen(AM_RPC_SERVICE);
	for (int i = 0; names[i]; i++)
		if (strcmp(m, names[i]) == 0)
			return true;
	return false;
}

void am_pending_answer(struct am_pending *p, grpc_status_code st, const char *msg,
		       const ProtobufCMessage *reply)
{
	struct am_call *c = &p->c, **pp;

	if (!c->kept)
		return;
	for (pp = &c->am->srvq->kept; *pp && *pp != c; pp = &(*pp)->kept_next)
		;
	if (*pp)
		*pp = c->kept_next;
	c->kept = false;
	if (!c->closed)
		send_status(c, st, msg, reply, true);
	maybe_free(c);
}

/* ---------------------------------------------------------------- sessions */

static void sess_pump(struct am_call *c)
{
	grpc_op op;

	if (c->closed || c->send_bb || c->status_sent)
		return;
	if (c->qn) {
		c->send_bb = c->q[c->qh];
		c->qh = (c->qh + 1) % SESS_QMAX;
		c->qn--;
		memset(&op, 0, sizeof op);
		op.op = GRPC_OP_SEND_MESSAGE;
		op.data.send_message.send_message = c->send_bb;
		if (!start(c, &op, 1, &c->t_send)) {
			grpc_byte_buffer_destroy(c->send_bb);
			c->send_bb = NULL;
		}
		return;
	}
	if (c->finish_req)
		send_status(c, GRPC_STATUS_OK, "session finished", NULL, false);
}

/* Queue a message (owned) on a stream. */
static void stream_send(struct am_call *c, grpc_byte_buffer *bb)
{
	if (c->closed || c->status_sent || c->finish_req || !bb) {
		if (bb)
			grpc_byte_buffer_destroy(bb);
		return;
	}
	if (c->qn == SESS_QMAX) {
		/* A client that does not read its stream: drop it rather than grow. */
		am_log(0, "%s (group %llu rank %u): send queue full, closing", c->method,
		       (unsigned long long)c->gid, c->rank);
		grpc_byte_buffer_destroy(bb);
		c->finish_req = true;
		sess_pump(c);
		return;
	}
	c->q[(c->qh + c->qn) % SESS_QMAX] = bb;
	c->qn++;
	sess_pump(c);
}

void am_session_send(struct am_session *s, const Inca__Am__V1__GroupEvent *ev)
{
	stream_send(&s->c, am_rpc_pack(&ev->base));
}

void am_session_bind(struct am_session *s, uint64_t gid, uint32_t rank)
{
	s->c.gid = gid;
	s->c.rank = rank;
	s->c.opened = gid != 0;
}

uint64_t am_session_gid(const struct am_session *s)
{
	return s->c.gid;
}

uint32_t am_session_rank(const struct am_session *s)
{
	return s->c.rank;
}

void am_session_finish(struct am_session *s)
{
	s->c.finish_req = true;
	sess_pump(&s->c);
}

static void handle_session_msg(struct am_call *c)
{
	Inca__Am__V1__SessionMsg *msg;
	char err[256] = "";
	grpc_status_code st;

	if (!c->recv_bb) { /* the client half-closed: the session ends normally */
		if (c->opened)
			am_session_gone(c->am, (struct am_session *)c);
		c->opened = false;
		c->finish_req = true;
		sess_pump(c);
		return;
	}
	msg = (Inca__Am__V1__SessionMsg *)am_rpc_unpack(&inca__am__v1__session_msg__descriptor,
							 c->recv_bb);
	grpc_byte_buffer_destroy(c->recv_bb);
	c->recv_bb = NULL;
	if (!msg) {
		send_status(c, GRPC_STATUS_INVALID_ARGUMENT, "bad SessionMsg", NULL, false);
		return;
	}
	if (!c->opened) {
		st = am_session_open(c->am, (struct am_session *)c, msg, err, sizeof err);
		if (st != GRPC_STATUS_OK) {
			send_status(c, st, err, NULL, false);
			protobuf_c_message_free_unpacked(&msg->base, NULL);
			return;
		}
	} else {
		am_session_ping(c->am, (struct am_session *)c, msg);
	}
	protobuf_c_message_free_unpacked(&msg->base, NULL);
	if (!c->closed && !c->status_sent)
		start_recv(c);
}

/* Reflection: one response per request until the client half-closes. Health Watch: the
 * status once, then the stream stays open until the client cancels or the AM stops. */
static void handle_tool_msg(struct am_call *c)
{
	char msg[160] = "";
	grpc_status_code st = GRPC_STATUS_OK;
	grpc_byte_buffer *bb;

	if (!c->recv_bb) {
		if (c->stream == S_REFLECT) {
			c->finish_req = true;
			sess_pump(c);
		}
		return;
	}
	bb = c->stream == S_REFLECT ? am_reflect(c->recv_bb) :
				      am_health(c->am, c->recv_bb, true, &st, msg, sizeof msg);
	grpc_byte_buffer_destroy(c->recv_bb);
	c->recv_bb = NULL;
	if (!bb) {
		send_status(c, st != GRPC_STATUS_OK ? st : GRPC_STATUS_INVALID_ARGUMENT,
			    msg[0] ? msg : "bad request", NULL, false);
		return;
	}
	stream_send(c, bb);
	if (!c->closed && !c->status_sent)
		start_recv(c);
}

/* ---------------------------------------------------------------- events */

static void on_event(struct am *am, struct am_tag *t, bool ok)
{
	struct am_call *c = t->c;

	if (t->k == T_NEW) {
		char *m;
		if (!ok) { /* server shutting down */
			call_free(c);
			return;
		}
		request_new(am);
		m = grpc_slice_to_c_string(c->details.method);
		snprintf(c->method, sizeof c->method, "%s", m);
		gpr_free(m);
		am_log(2, "call %s", c->method);
		read_credentials(c);
		start_close_watch(c);
		if (strcmp(c->method, AM_RPC_SERVICE "Session") == 0)
			c->stream = S_SESSION;
		else if (strcmp(c->method, REFLECT_V1ALPHA) == 0 || strcmp(c->method, REFLECT_V1) == 0)
			c->stream = S_REFLECT;
		else if (strcmp(c->method, HEALTH_SERVICE "Watch") == 0)
			c->stream = S_WATCH;
		if (c->stream != S_UNARY) {
			grpc_op op;
			memset(&op, 0, sizeof op);
			op.op = GRPC_OP_SEND_INITIAL_METADATA;
			start(c, &op, 1, &c->t_init);
			start_recv(c);
		} else if (known_unary(c->method)) {
			start_recv(c);
		} else {
			am->st.rpc_unimplemented++;
			am_log(1, "unimplemented method %s", c->method);
			send_status(c, GRPC_STATUS_UNIMPLEMENTED, "method not implemented by inca-am",
				    NULL, true);
		}
		maybe_free(c);
		return;
	}
	c->pending--;
	switch (t->k) {
	case T_RECV:
		if (!ok) {
			if (c->recv_bb) {
				grpc_byte_buffer_destroy(c->recv_bb);
				c->recv_bb = NULL;
			}
			break;
		}
		if (c->stream == S_SESSION) {
			handle_session_msg(c);
		} else if (c->stream != S_UNARY) {
			handle_tool_msg(c);
		} else {
			handle_unary(c);
			if (c->recv_bb) {
				grpc_byte_buffer_destroy(c->recv_bb);
				c->recv_bb = NULL;
			}
		}
		break;
	case T_SEND:
		if (c->send_bb) {
			grpc_byte_buffer_destroy(c->send_bb);
			c->send_bb = NULL;
		}
		if (ok)
			sess_pump(c);
		break;
	case T_STATUS:
		if (c->send_bb) {
			grpc_byte_buffer_destroy(c->send_bb);
			c->send_bb = NULL;
		}
		break;
	case T_CLOSE:
		c->closed = true;
		if (c->stream == S_SESSION && c->opened) {
			c->opened = false;
			am_session_gone(am, (struct am_session *)c);
		}
		break;
	default:
		break;
	}
	maybe_free(c);
}

int am_server_start(struct am *am, char *err, size_t cap)
{
	grpc_arg arg;
	grpc_channel_args args;
	grpc_server_credentials *creds;
	int port;

	/* Two daemons on one port must not silently share it (FACTS: gRPC sets SO_REUSEPORT). */
	arg.type = GRPC_ARG_INTEGER;
	arg.key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
	arg.value.integer = 0;
	args.num_args = 1;
	args.args = &arg;
	am->cq = grpc_completion_queue_create_for_next(NULL);
	am->server = grpc_server_create(&args, NULL);
	grpc_server_register_completion_queue(am->server, am->cq, NULL);
	if (am->cfg.tls_cert[0]) {
		char *cert = am_rpc_read_file(am->cfg.tls_cert);
		char *key = am_rpc_read_file(am->cfg.tls_key);
		grpc_ssl_pem_key_cert_pair pair = { key, cert };
		if (!cert || !key) {
			snprintf(err, cap, "cannot read TLS certificate or key (%s, %s)",
				 am->cfg.tls_cert, am->cfg.tls_key);
			free(cert);
			free(key);
			return -EINVAL;
		}
		creds = grpc_ssl_server_credentials_create(NULL, &pair, 1, 0, NULL);
		free(cert);
		free(key);
	} else {
		creds = grpc_insecure_server_credentials_create();
	}
	port = grpc_server_add_http2_port(am->server, am->cfg.listen, creds);
	grpc_server_credentials_release(creds);
	if (port <= 0) {
		snprintf(err, cap, "cannot listen on %s (address in use or invalid)", am->cfg.listen);
		return -EADDRINUSE;
	}
	grpc_server_start(am->server);
	request_new(am);
	return pump_start(am);
}

/* ---------------------------------------------------------------- the pump thread */

static void *pump(void *arg)
{
	struct am *am = arg;
	struct am_srvq *q = am->srvq;
	uint64_t one = 1;

	for (;;) {
		grpc_event ev = grpc_completion_queue_next(am->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC),
							   NULL);
		if (ev.type == GRPC_QUEUE_TIMEOUT)
			continue;
		pthread_mutex_lock(&q->mu);
		if (ev.type == GRPC_QUEUE_SHUTDOWN) {
			q->shutdown = true;
		} else {
			if (q->n == q->cap) {
				size_t cap = q->cap ? q->cap * 2 : 64;
				struct srv_ev *v = realloc(q->v, cap * sizeof *v);
				if (!v)
					abort(); /* daemon: out of memory */
				q->v = v;
				q->cap = cap;
			}
			q->v[q->n++] = (struct srv_ev){ ev.tag, ev.success != 0 };
		}
		pthread_mutex_unlock(&q->mu);
		if (write(am->wake_fd, &one, sizeof one) < 0) {
		}
		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			return NULL;
	}
}

static int pump_start(struct am *am)
{
	struct am_srvq *q = calloc(1, sizeof *q);

	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->mu, NULL);
	am->srvq = q;
	if (pthread_create(&q->th, NULL, pump, am) != 0)
		return -EAGAIN;
	q->started = true;
	return 0;
}

/* Run the events the pump handed over. A tag equal to stop_tag is not run: returns true when
 * it was seen. Returns with *gone set once the pump saw the queue shut down. */
static bool serve_events(struct am *am, const void *stop_tag, bool *gone)
{
	struct am_srvq *q = am->srvq;
	struct srv_ev *v, buf[64];
	size_t n;
	bool seen = false;

	for (;;) {
		pthread_mutex_lock(&q->mu);
		n = q->n < 64 ? q->n : 64;
		if (n) {
			memcpy(buf, q->v, n * sizeof *buf);
			memmove(q->v, q->v + n, (q->n - n) * sizeof *buf);
			q->n -= n;
		}
		if (gone)
			*gone = q->shutdown && q->n == 0 && n == 0;
		pthread_mutex_unlock(&q->mu);
		if (!n)
			return seen;
		for (v = buf; v < buf + n; v++) {
			if (v->tag == stop_tag)
				seen = true;
			else
				on_event(am, v->tag, v->ok);
		}
	}
}

static void wait_wake(struct am *am, unsigned timeout_ms)
{
	struct pollfd pfd = { .fd = am->wake_fd, .events = POLLIN };
	uint64_t v;

	if (poll(&pfd, 1, (int)timeout_ms) > 0 && read(am->wake_fd, &v, sizeof v) < 0) {
	}
}

void am_server_run_once(struct am *am, unsigned timeout_ms)
{
	if (!am->srvq)
		return;
	wait_wake(am, timeout_ms);
	serve_events(am, NULL, NULL);
}

void am_server_stop(struct am *am)
{
	static int shutdown_tag;
	struct am_srvq *q = am->srvq;
	uint64_t until;
	bool gone = false;

	if (!am->server)
		return;
	am->shutting_down = true;
	/* Calls a handler kept are answered now: nothing will finish their work. */
	while (q && q->kept)
		am_pending_answer((struct am_pending *)q->kept, GRPC_STATUS_UNAVAILABLE,
				  "inca-am is stopping", NULL);
	grpc_server_shutdown_and_notify(am->server, am->cq, &shutdown_tag);
	grpc_server_cancel_all_calls(am->server);
	if (q && q->started) {
		until = util_now_ns() + 5000 * NS_PER_MS;
		while (!serve_events(am, &shutdown_tag, NULL) && util_now_ns() < until)
			wait_wake(am, 50);
	}
	grpc_server_destroy(am->server);
	am->server = NULL;
	grpc_completion_queue_shutdown(am->cq);
	if (!q || !q->started) { /* the server never ran: drain here */
		grpc_event ev;
		do
			ev = grpc_completion_queue_next(am->cq, am_rpc_deadline_ms(5000), NULL);
		while (ev.type == GRPC_OP_COMPLETE);
		gone = true;
	} else {
		/* The pump drains the queue to its end (GRPC_QUEUE_SHUTDOWN) and exits. */
		until = util_now_ns() + 5000 * NS_PER_MS;
		for (;;) {
			serve_events(am, &shutdown_tag, &gone);
			if (gone || util_now_ns() >= until)
				break;
			wait_wake(am, 50);
		}
		if (gone)
			pthread_join(q->th, NULL);
		else
			pthread_detach(q->th);
	}
	if (gone) {
		grpc_completion_queue_destroy(am->cq);
		am->cq = NULL;
	}
	if (q && gone) {
		pthread_mutex_destroy(&q->mu);
		free(q->v);
		free(q);
		am->srvq = NULL;
	}
}
