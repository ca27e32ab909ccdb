/* libinca <-> Aggregation Manager: join a group through inca-am (gRPC core API + protobuf-c),
 * wait for the group's verdict (TREE_READY or HOST_FALLBACK), keep the Session stream (the
 * heartbeat and the event channel) alive on a background thread, and apply DISMANTLED / REBUILT
 * at the next collective. Compiled to stubs without INCA_HAVE_GRPC. docs/am.md "Client". */
#include "client/client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef INCA_HAVE_GRPC

int client_am_start(struct inca_comm *c, const struct inca_comm_opts *o)
{
	client_log(&c->cfg, 0, "am: libinca was built without gRPC: cannot use am_addr");
	return -ENOTSUP;
}
void client_am_stop(struct inca_comm *c)
{
}
int client_am_data_fd(struct inca_comm *c)
{
	return -1;
}
int client_am_check(struct inca_comm *c)
{
	return 1;
}
int client_am_tree_current(struct inca_comm *c)
{
	return 1;
}
int inca_comm_am_info(const struct inca_comm *c, struct inca_am_info *out, size_t out_size)
{
	struct inca_am_info s = { 0 };
	int rc;

	if (!c)
		return -EINVAL;
	rc = client_out_copy(out, out_size, &s, sizeof s, CLIENT_END_OF(struct inca_am_info, reason));
	return rc < 0 ? rc : -ENOTSUP;
}
int client_am_report_failure(struct inca_comm *c, const char *reason)
{
	return 0;
}

#else

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "am_rpc.h"
#include "wire/wire.h"

enum am_cstate { AMC_WAITING, AMC_READY, AMC_FALLBACK, AMC_DISMANTLED };

struct client_am {
	grpc_channel *ch;
	int data_fd; /* bound data-plane socket: its address is what the AM knows */
	uint64_t group_id, token;
	uint32_t rank, heartbeat_ms;
	char data_addr[64];

	pthread_t thread;
	bool thread_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under mu */
	enum am_cstate state;
	bool have_tree;
	struct {
		uint16_t tree_id, bfr_id, slots, mtu, bsl_bits;
		uint32_t key, switch_qpn, qpn, generation;
		char switch_addr[64];
		/* data-plane authentication: auth_bad = the AM sent a key of the wrong length or
		 * without an id (the tree is then refused) */
		bool auth, auth_bad;
		uint8_t auth_key[WIRE_AUTH_KEY_LEN];
		uint32_t auth_key_id;
	} tree;
	char reason[128];
	grpc_call *call; /* current Session call, for cancel */
	bool stop;
	uint64_t reconnects, events;

	uint32_t applied_gen; /* caller thread: generation in c->cfg / c->inc */

	/* ReportFailure, caller thread only: at most one call in flight on its own
	 * queue, started without waiting and reaped later, so a failed collective's host-path
	 * completion never waits for the AM. */
	grpc_completion_queue *rcq;
	struct {
		grpc_call *call;
		grpc_byte_buffer *send, *recv;
		grpc_metadata_array md, trail;
		grpc_status_code status;
		grpc_slice details;
	} rep;
	bool rep_busy;
	uint32_t reported_gen; /* also under mu: this generation is known broken */
};

#define AM_REPORT_DEADLINE_MS 2000

static void report_reap(struct inca_comm *c, struct client_am *a, uint64_t wait_ms);

static void am_free(struct client_am *a)
{
	if (a->rcq) {
		grpc_completion_queue_shutdown(a->rcq);
		while (grpc_completion_queue_next(a->rcq, gpr_inf_future(GPR_CLOCK_REALTIME),
						  NULL).type != GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(a->rcq);
	}
	if (a->ch)
		grpc_channel_destroy(a->ch);
	if (a->data_fd >= 0)
		close(a->data_fd);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cv);
	explicit_bzero(a->tree.auth_key, sizeof a->tree.auth_key);
	free(a);
}

/* ---------------------------------------------------------------- session thread */

static void handle_event(struct client_am *a, const Inca__Am__V1__GroupEvent *ev)
{
	pthread_mutex_lock(&a->mu);
	a->events++;
	switch (ev->kind) {
	case INCA__AM__V1__GROUP_EVENT__KIND__TREE_READY:
	case INCA__AM__V1__GROUP_EVENT__KIND__REBUILT:
		if (ev->tree && ev->tree->switch_addr &&
		    strlen(ev->tree->switch_addr) < sizeof a->tree.switch_addr) {
			a->tree.tree_id = (uint16_t)ev->tree->tree_id;
			a->tree.bfr_id = (uint16_t)ev->tree->bfr_id;
			a->tree.slots = (uint16_t)ev->tree->slots;
			a->tree.mtu = (uint16_t)ev->tree->mtu;
			a->tree.bsl_bits = (uint16_t)ev->tree->bsl_bits;
			a->tree.key = ev->tree->key;
			a->tree.switch_qpn = ev->tree->switch_qpn;
			a->tree.qpn = ev->tree->qpn;
			a->tree.generation = ev->tree->generation;
			a->tree.auth = ev->tree->auth_key.len == WIRE_AUTH_KEY_LEN &&
				       ev->tree->auth_key_id != 0;
			a->tree.auth_bad = !a->tree.auth && (ev->tree->auth_key.len != 0 ||
							     ev->tree->auth_key_id != 0);
			if (a->tree.auth)
				memcpy(a->tree.auth_key, ev->tree->auth_key.data, WIRE_AUTH_KEY_LEN);
			else
				explicit_bzero(a->tree.auth_key, sizeof a->tree.auth_key);
			a->tree.auth_key_id = a->tree.auth ? ev->tree->auth_key_id : 0;
			snprintf(a->tree.switch_addr, sizeof a->tree.switch_addr, "%s",
				 ev->tree->switch_addr);
			a->have_tree = true;
			a->state = AMC_READY;
			a->reason[0] = '\0';
		}
		break;
	case INCA__AM__V1__GROUP_EVENT__KIND__HOST_FALLBACK:
		a->state = AMC_FALLBACK;
		snprintf(a->reason, sizeof a->reason, "%s", ev->reason ? ev->reason : "");
		break;
	case INCA__AM__V1__GROUP_EVENT__KIND__DISMANTLED:
		a->state = AMC_DISMANTLED;
		snprintf(a->reason, sizeof a->reason, "%s", ev->reason ? ev->reason : "");
		break;
	default:
		break;
	}
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

/* One Session call: open, ping every heartbeat, deliver events; returns when the stream ends
 * (AM gone, session refused, or stop). */
static grpc_status_code run_session(struct client_am *a, grpc_completion_queue *cq)
{
	enum { T_OPEN = 1, T_MD, T_STATUS, T_RECV, T_PING };
	grpc_metadata_array md, trail;
	grpc_byte_buffer *open_bb, *ping_bb = NULL, *recv_bb = NULL;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	grpc_slice method = grpc_slice_from_static_string(AM_RPC_SERVICE "Session");
	Inca__Am__V1__SessionMsg msg = INCA__AM__V1__SESSION_MSG__INIT;
	grpc_op ops[2];
	grpc_call *call;
	int inflight = 0;
	/* open_busy: the opening message is not sent yet (the call waits for the channel after an
	 * AM restart). No ping may be started before it completes: gRPC refuses a second
	 * SEND_MESSAGE while one is pending, and after such a refusal the call never accepts a
	 * send again, so the session would stay silent and the AM would drop the member. */
	bool open_busy = true, ping_busy = false, status_done = false, recv_done = false;
	uint64_t seq = 0;

	msg.group_id = a->group_id;
	msg.rank = a->rank;
	msg.member_token = a->token;
	open_bb = am_rpc_pack(&msg.base);
	grpc_metadata_array_init(&md);
	grpc_metadata_array_init(&trail);
	call = grpc_channel_create_call(a->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL,
					gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	pthread_mutex_lock(&a->mu);
	a->call = call;
	if (a->stop)
		grpc_call_cancel(call, NULL);
	pthread_mutex_unlock(&a->mu);

	memset(ops, 0, sizeof ops);
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = open_bb;
	inflight += grpc_call_start_batch(call, ops, 2, (void *)T_OPEN, NULL) == GRPC_CALL_OK;
	memset(ops, 0, sizeof ops);
	ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[0].data.recv_initial_metadata.recv_initial_metadata = &md;
	inflight += grpc_call_start_batch(call, ops, 1, (void *)T_MD, NULL) == GRPC_CALL_OK;
	memset(ops, 0, sizeof ops);
	ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[0].data.recv_status_on_client.trailing_metadata = &trail;
	ops[0].data.recv_status_on_client.status = &status;
	ops[0].data.recv_status_on_client.status_details = &details;
	inflight += grpc_call_start_batch(call, ops, 1, (void *)T_STATUS, NULL) == GRPC_CALL_OK;
	memset(ops, 0, sizeof ops);
	ops[0].op = GRPC_OP_RECV_MESSAGE;
	ops[0].data.recv_message.recv_message = &recv_bb;
	inflight += grpc_call_start_batch(call, ops, 1, (void *)T_RECV, NULL) == GRPC_CALL_OK;

	while (inflight > 0) {
		grpc_event ev = grpc_completion_queue_next(cq, am_rpc_deadline_ms(a->heartbeat_ms),
							   NULL);
		if (ev.type == GRPC_QUEUE_TIMEOUT) {
			if (!open_busy && !ping_busy && !status_done && !recv_done) {
				msg.seq = ++seq;
				ping_bb = am_rpc_pack(&msg.base);
				memset(ops, 0, sizeof ops);
				ops[0].op = GRPC_OP_SEND_MESSAGE;
				ops[0].data.send_message.send_message = ping_bb;
				if (grpc_call_start_batch(call, ops, 1, (void *)T_PING, NULL) ==
				    GRPC_CALL_OK) {
					inflight++;
					ping_busy = true;
				} else {
					grpc_byte_buffer_destroy(ping_bb);
					ping_bb = NULL;
				}
			}
			continue;
		}
		if (ev.type != GRPC_OP_COMPLETE)
			break;
		inflight--;
		switch ((intptr_t)ev.tag) {
		case T_OPEN:
			open_busy = false;
			break;
		case T_PING:
			grpc_byte_buffer_destroy(ping_bb);
			ping_bb = NULL;
			ping_busy = false;
			break;
		case T_STATUS:
			status_done = true;
			break;
		case T_RECV:
			if (!ev.success || !recv_bb) {
				recv_done = true;
				break;
			}
			{
				Inca__Am__V1__GroupEvent *ge = (Inca__Am__V1__GroupEvent *)am_rpc_unpack(
					&inca__am__v1__group_event__descriptor, recv_bb);
				grpc_byte_buffer_destroy(recv_bb);
				recv_bb = NULL;
				if (ge) {
					handle_event(a, ge);
					protobuf_c_message_free_unpacked(&ge->base, NULL);
				}
			}
			memset(ops, 0, sizeof ops);
			ops[0].op = GRPC_OP_RECV_MESSAGE;
			ops[0].data.recv_message.recv_message = &recv_bb;
			if (grpc_call_start_batch(call, ops, 1, (void *)T_RECV, NULL) == GRPC_CALL_OK)
				inflight++;
			break;
		default:
			break;
		}
		/* The server ended the stream: make sure nothing we started stays pending. */
		if (status_done && inflight > 0)
			grpc_call_cancel(call, NULL);
	}
	pthread_mutex_lock(&a->mu);
	a->call = NULL;
	pthread_mutex_unlock(&a->mu);
	grpc_call_unref(call);
	grpc_byte_buffer_destroy(open_bb);
	if (ping_bb)
		grpc_byte_buffer_destroy(ping_bb);
	if (recv_bb)
		grpc_byte_buffer_destroy(recv_bb);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md);
	grpc_metadata_array_destroy(&trail);
	return status;
}

static void *session_thread(void *arg)
{
	struct client_am *a = arg;
	grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);

	for (;;) {
		grpc_status_code st;
		bool stop;

		st = run_session(a, cq);
		pthread_mutex_lock(&a->mu);
		stop = a->stop;
		if (!stop && (st == GRPC_STATUS_PERMISSION_DENIED || st == GRPC_STATUS_OK)) {
			/* The AM no longer knows us (group removed) or ended the session: the
			 * tree may be gone, so the INC path is off. */
			if (a->state == AMC_READY || a->state == AMC_WAITING) {
				a->state = AMC_DISMANTLED;
				snprintf(a->reason, sizeof a->reason, "session ended by the AM");
			}
			pthread_cond_broadcast(&a->cv);
			stop = true;
		}
		if (!stop) {
			/* AM unreachable (restart?): the data plane does not need it; reconnect
			 * and resume the session with the same token. */
			struct timespec ts;
			a->reconnects++;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 200 * 1000 * 1000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			if (!a->stop)
				pthread_cond_timedwait(&a->cv, &a->mu, &ts);
			stop = a->stop;
		}
		pthread_mutex_unlock(&a->mu);
		if (stop)
			break;
	}
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	return NULL;
}

/* ---------------------------------------------------------------- caller side */

/* Bind the data-plane socket now: the AM must learn its real port. */
static int bind_data(struct inca_comm *c, struct client_am *a)
{
	struct sockaddr_in sa = c->cfg.data_sa;
	socklen_t sl = sizeof sa;
	char buf[64];

	a->data_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->data_fd < 0)
		return -errno;
	if (bind(a->data_fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    getsockname(a->data_fd, (struct sockaddr *)&sa, &sl) < 0)
		return -errno;
	c->cfg.data_sa = sa;
	snprintf(a->data_addr, sizeof a->data_addr, "%s", util_format_addr(&sa, buf, sizeof buf));
	return 0;
}

/* Copy the tree of the current generation into c->cfg. Caller holds a->mu. */
static int apply_tree(struct inca_comm *c, struct client_am *a)
{
	struct client_cfg *cfg = &c->cfg;
	struct sockaddr_in sw;
	uint8_t code = wire_bsl_code(a->tree.bsl_bits);

	if (util_parse_addr(a->tree.switch_addr, WIRE_ROCE_UDP_PORT, &sw) < 0 || !code ||
	    a->tree.bfr_id == 0 || a->tree.slots == 0 || a->tree.mtu < WIRE_MTU_MIN ||
	    a->tree.mtu > WIRE_MTU_MAX || a->tree.switch_qpn > WIRE_QPN_MAX || a->tree.qpn > WIRE_QPN_MAX ||
	    a->tree.auth_bad)
		return -EPROTO;
	cfg->have_switch = true;
	cfg->switch_sa = sw;
	cfg->tree_id = a->tree.tree_id;
	cfg->key = a->tree.key;
	cfg->auth = a->tree.auth;
	memcpy(cfg->auth_key, a->tree.auth_key, sizeof cfg->auth_key);
	cfg->auth_key_id = a->tree.auth_key_id;
	cfg->switch_qpn = a->tree.switch_qpn;
	cfg->qpn = a->tree.qpn;
	cfg->bfr_id = a->tree.bfr_id;
	cfg->bsl_bits = a->tree.bsl_bits;
	cfg->bsl_code = code;
	cfg->si = (uint8_t)((a->tree.bfr_id - 1u) / a->tree.bsl_bits);
	cfg->nslots = a->tree.slots;
	if (a->tree.mtu < cfg->mtu)
		cfg->mtu = a->tree.mtu;
	a->applied_gen = a->tree.generation;
	return 0;
}

int client_am_start(struct inca_comm *c, const struct inca_comm_opts *o)
{
	Inca__Am__V1__JoinRequest rq = INCA__AM__V1__JOIN_REQUEST__INIT;
	Inca__Am__V1__Capabilities caps = INCA__AM__V1__CAPABILITIES__INIT;
	Inca__Am__V1__JoinReply *rp = NULL;
	struct client_am *a;
	char host[64] = "", err[256];
	uint32_t wait_ms = o->am_timeout_ms ? o->am_timeout_ms : c->cfg.timeout_ms;
	struct timespec dl;
	const char *ca = o->am_tls_ca ? o->am_tls_ca : getenv("INCA_AM_CA");
	const char *ins = getenv("INCA_AM_INSECURE");
	bool insecure = o->am_insecure || (ins && ins[0] && strcmp(ins, "0") != 0);
	int rc;

	if (!o->job_id || !o->job_id[0])
		return -EINVAL;
	a = calloc(1, sizeof *a);
	if (!a)
		return -ENOMEM;
	a->data_fd = -1;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	rc = bind_data(c, a);
	if (rc < 0) {
		client_log(&c->cfg, 0, "am: cannot bind the data-plane socket: %s", inca_strerror(rc));
		am_free(a);
		return rc;
	}
	grpc_init();
	if (ca && !ca[0])
		ca = NULL;
	a->ch = am_rpc_channel(o->am_addr, ca, insecure, err, sizeof err);
	if (!a->ch) {
		client_log(&c->cfg, 0, "am: %s", err);
		am_free(a);
		grpc_shutdown();
		return -EINVAL;
	}
	a->rcq = grpc_completion_queue_create_for_next(NULL);
	if (o->host_name)
		snprintf(host, sizeof host, "%s", o->host_name);
	else
		gethostname(host, sizeof host - 1);
	rq.job_id = (char *)o->job_id;
	rq.job_credential = (char *)(o->job_credential ? o->job_credential : "");
	rq.group_name = (char *)(o->group_name ? o->group_name : "");
	rq.rank = (uint32_t)c->cfg.rank;
	rq.size = (uint32_t)c->cfg.size;
	rq.data_addr = a->data_addr;
	rq.qpn = 0;
	rq.host_name = host;
	rq.attach_hint = (char *)(o->am_attach_hint ? o->am_attach_hint : "");
	caps.inc = true;
	caps.max_mtu = c->cfg.mtu;
	caps.deterministic = o->deterministic != 0;
	rq.caps = &caps;
	rq.slots_wanted = o->nslots;
	rc = am_rpc_unary(a->ch, "Join", &rq.base, &inca__am__v1__join_reply__descriptor,
			  (ProtobufCMessage **)&rp, wait_ms < 10000 ? wait_ms : 10000, err, sizeof err);
	if (rc == -ETIMEDOUT &&
	    grpc_channel_check_connectivity_state(a->ch, 0) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
		/* Not a slow AM: no connection could be set up (down, or a TLS handshake that
		 * fails every time: wrong CA, plaintext against TLS or the reverse). */
		rc = -ECONNREFUSED;
		snprintf(err, sizeof err, "no connection to the AM%s",
			 insecure ? " (plaintext: does the AM require TLS?)" :
			 ca ? " (TLS: is the AM's certificate signed by am_tls_ca / INCA_AM_CA?)" :
			      " (TLS with the system's roots: set am_tls_ca or INCA_AM_CA to the CA "
			      "of the AM's certificate)");
	}
	if (rc < 0) {
		client_log(&c->cfg, 0, "am: join %s as rank %d failed: %s (%s)", o->am_addr,
			   c->cfg.rank, inca_strerror(rc), err);
		am_free(a);
		grpc_shutdown();
		return rc;
	}
	a->group_id = rp->group_id;
	a->token = rp->member_token;
	a->rank = (uint32_t)c->cfg.rank;
	a->heartbeat_ms = rp->heartbeat_ms ? rp->heartbeat_ms : 500;
	protobuf_c_message_free_unpacked(&rp->base, NULL);
	client_log(&c->cfg, 2, "am: rank %d joined group %llu", c->cfg.rank,
		   (unsigned long long)a->group_id);

	if (pthread_create(&a->thread, NULL, session_thread, a) != 0) {
		am_free(a);
		grpc_shutdown();
		return -EAGAIN;
	}
	a->thread_started = true;
	c->am = a;

	/* Wait for the verdict: every rank must have joined and the tree must be pushed. */
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += wait_ms / 1000;
	dl.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&a->mu);
	while (a->state == AMC_WAITING)
		if (pthread_cond_timedwait(&a->cv, &a->mu, &dl) == ETIMEDOUT)
			break;
	if (a->state == AMC_READY) {
		rc = apply_tree(c, a);
		if (rc < 0) {
			a->state = AMC_FALLBACK;
			snprintf(a->reason, sizeof a->reason, "AM sent an unusable tree");
		}
	}
	if (a->state != AMC_READY)
		client_log(&c->cfg, 1, "am: group %llu: INC off, host path: %s",
			   (unsigned long long)a->group_id,
			   a->state == AMC_WAITING ? "timed out waiting for the group" : a->reason);
	else
		client_log(&c->cfg, 2, "am: group %llu: tree %u via %s, %u slots",
			   (unsigned long long)a->group_id, a->tree.tree_id, a->tree.switch_addr,
			   a->tree.slots);
	pthread_mutex_unlock(&a->mu);
	return 0;
}

void client_am_stop(struct inca_comm *c)
{
	struct client_am *a = c->am;
	Inca__Am__V1__LeaveRequest rq = INCA__AM__V1__LEAVE_REQUEST__INIT;
	Inca__Am__V1__LeaveReply *rp = NULL;

	if (!a)
		return;
	/* A failure report still out gets a moment to arrive, then is cancelled. */
	report_reap(c, a, 500);
	if (a->rep_busy) {
		grpc_call_cancel(a->rep.call, NULL);
		report_reap(c, a, AM_REPORT_DEADLINE_MS + 1000);
	}
	rq.group_id = a->group_id;
	rq.rank = a->rank;
	rq.member_token = a->token;
	rq.reason = "communicator destroyed";
	if (am_rpc_unary(a->ch, "Leave", &rq.base, &inca__am__v1__leave_reply__descriptor,
			 (ProtobufCMessage **)&rp, 2000, NULL, 0) == 0)
		protobuf_c_message_free_unpacked(&rp->base, NULL);
	pthread_mutex_lock(&a->mu);
	a->stop = true;
	if (a->call)
		grpc_call_cancel(a->call, NULL);
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	if (a->thread_started)
		pthread_join(a->thread, NULL);
	am_free(a);
	c->am = NULL;
	grpc_shutdown();
}

/* Finish the in-flight ReportFailure call, waiting at most wait_ms for it. */
static void report_reap(struct inca_comm *c, struct client_am *a, uint64_t wait_ms)
{
	grpc_event ev;

	if (!a->rep_busy)
		return;
	ev = grpc_completion_queue_next(a->rcq, wait_ms ? am_rpc_deadline_ms(wait_ms) :
						gpr_time_0(GPR_CLOCK_MONOTONIC), NULL);
	if (ev.type != GRPC_OP_COMPLETE)
		return;
	if (a->rep.status == GRPC_STATUS_OK) {
		Inca__Am__V1__FailureReply *rp = a->rep.recv ?
			(Inca__Am__V1__FailureReply *)am_rpc_unpack(
				&inca__am__v1__failure_reply__descriptor, a->rep.recv) : NULL;
		if (rp) {
			client_log(&c->cfg, 1, "am: failure report %s (group %s, generation %u)",
				   rp->acted ? "accepted" : "already handled", rp->state,
				   rp->generation);
			protobuf_c_message_free_unpacked(&rp->base, NULL);
		}
	} else {
		char *d = grpc_slice_to_c_string(a->rep.details);
		client_log(&c->cfg, 1, "am: failure report not delivered: status %d (%s)",
			   (int)a->rep.status, d);
		gpr_free(d);
	}
	grpc_call_unref(a->rep.call);
	grpc_byte_buffer_destroy(a->rep.send);
	if (a->rep.recv)
		grpc_byte_buffer_destroy(a->rep.recv);
	grpc_slice_unref(a->rep.details);
	grpc_metadata_array_destroy(&a->rep.md);
	grpc_metadata_array_destroy(&a->rep.trail);
	memset(&a->rep, 0, sizeof a->rep);
	a->rep_busy = false;
}

/* Issue 4: the INC path failed mid-collective. Tell the AM (once per tree generation) and
 * stop using this generation; returns at once: the call completes in the background. */
int client_am_report_failure(struct inca_comm *c, const char *reason)
{
	struct client_am *a = c ? c->am : NULL;
	Inca__Am__V1__FailureReport rq = INCA__AM__V1__FAILURE_REPORT__INIT;
	grpc_slice method;
	grpc_op ops[6];
	uint32_t gen;

	if (!a)
		return 0;
	report_reap(c, a, 0);
	pthread_mutex_lock(&a->mu);
	/* The generation the failed call ran on (the AM may have sent a newer one since). */
	gen = a->have_tree ? a->applied_gen : 0;
	if (gen == 0 || gen == a->reported_gen) {
		pthread_mutex_unlock(&a->mu);
		return 0;
	}
	a->reported_gen = gen;
	pthread_mutex_unlock(&a->mu);
	if (a->rep_busy) /* the previous report is still out: the AM's polling covers us */
		return -EBUSY;
	rq.group_id = a->group_id;
	rq.rank = a->rank;
	rq.member_token = a->token;
	rq.generation = gen;
	rq.reason = (char *)(reason ? reason : "");
	a->rep.send = am_rpc_pack(&rq.base);
	if (!a->rep.send)
		return -ENOMEM;
	grpc_metadata_array_init(&a->rep.md);
	grpc_metadata_array_init(&a->rep.trail);
	a->rep.details = grpc_empty_slice();
	a->rep.status = GRPC_STATUS_UNKNOWN;
	method = grpc_slice_from_static_string(AM_RPC_SERVICE "ReportFailure");
	/* No wait-for-ready: an unreachable AM fails the call at once (its polling notices a
	 * dead switch anyway). */
	a->rep.call = grpc_channel_create_call(a->ch, NULL, GRPC_PROPAGATE_DEFAULTS, a->rcq, method,
					       NULL, am_rpc_deadline_ms(AM_REPORT_DEADLINE_MS),
					       NULL);
	memset(ops, 0, sizeof ops);
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = a->rep.send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &a->rep.md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &a->rep.recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &a->rep.trail;
	ops[5].data.recv_status_on_client.status = &a->rep.status;
	ops[5].data.recv_status_on_client.status_details = &a->rep.details;
	if (!a->rep.call || grpc_call_start_batch(a->rep.call, ops, 6, a, NULL) != GRPC_CALL_OK) {
		if (a->rep.call)
			grpc_call_unref(a->rep.call);
		grpc_byte_buffer_destroy(a->rep.send);
		grpc_metadata_array_destroy(&a->rep.md);
		grpc_metadata_array_destroy(&a->rep.trail);
		memset(&a->rep, 0, sizeof a->rep);
		return -EIO;
	}
	a->rep_busy = true;
	client_log(&c->cfg, 1, "am: reporting INC failure of group %llu generation %u: %s",
		   (unsigned long long)a->group_id, gen, rq.reason);
	return 0;
}

int client_am_data_fd(struct inca_comm *c)
{
	if (!c->am || c->am->data_fd < 0)
		return -1;
	return fcntl(c->am->data_fd, F_DUPFD_CLOEXEC, 0);
}

/* Caller thread, before a collective: 1 if INC may be used now, 0 if not. A new tree
 * generation (REBUILT) is adopted here by reopening the INC path on the same socket. */
int client_am_check(struct inca_comm *c)
{
	struct client_am *a = c->am;
	int ok = 0;

	if (!a)
		return 1;
	report_reap(c, a, 0);
	pthread_mutex_lock(&a->mu);
	/* A generation this rank reported as failed is never used again. */
	if (a->state == AMC_READY && a->have_tree && a->tree.generation != a->reported_gen) {
		if (a->tree.generation == a->applied_gen && c->inc) {
			ok = 1;
		} else if (apply_tree(c, a) == 0) {
			client_inc_close(c);
			c->inc_broken = false;
			ok = client_inc_open(c) == 0;
			if (!ok)
				client_inc_close(c);
		}
	}
	pthread_mutex_unlock(&a->mu);
	return ok;
}

int client_am_tree_current(struct inca_comm *c)
{
	struct client_am *a = c->am;
	int cur;

	if (!a)
		return 1;
	pthread_mutex_lock(&a->mu);
	cur = a->state == AMC_READY && a->tree.generation == a->applied_gen;
	pthread_mutex_unlock(&a->mu);
	return cur;
}

int inca_comm_am_info(const struct inca_comm *c, struct inca_am_info *out, size_t out_size)
{
	struct inca_am_info s;
	struct client_am *a;

	if (!c)
		return -EINVAL;
	a = c->am;
	memset(&s, 0, sizeof s);
	if (a) {
		pthread_mutex_lock(&a->mu);
		s.group_id = a->group_id;
		s.inc_enabled = a->state == AMC_READY && c->inc != NULL;
		s.state = (int)a->state;
		s.tree_id = a->tree.tree_id;
		s.generation = a->tree.generation;
		s.reconnects = a->reconnects;
		snprintf(s.reason, sizeof s.reason, "%s", a->reason);
		pthread_mutex_unlock(&a->mu);
	}
	if (client_out_copy(out, out_size, &s, sizeof s,
			    CLIENT_END_OF(struct inca_am_info, reason)) < 0)
		return -EINVAL;
	return a ? 0 : -ENOTSUP;
}

#endif
