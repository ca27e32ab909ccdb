/* nccl/net_tcp.c: the point-to-point transport NCCL needs next to CollNet (NCCL pairs a
 * CollNet with the net plugin of the same library, so a CollNet-only plugin is never used).
 * One TCP connection per NCCL connection, host memory, no grouped receives. Every call is
 * nonblocking: connect/accept advance a small state machine on each call, and isend/irecv
 * only queue; the bytes move when test() is called. Messages on a connection complete in the
 * order they were posted (TCP is a byte stream), each framed by a 16-byte header. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plugin.h"

#define NET_MAGIC 0x544e4e49u  /* "INNT": handle */
#define HELLO_MAGIC 0x4f4c4c48u /* "HLLO": first bytes of a connection */
#define MSG_MAGIC 0x4753474du   /* "MGSG": message header */

/* Our part of NCCL's 128-byte handle. NCCL passes the same handle buffer to every connect()
 * retry, so the connection in progress is remembered in it (stage). */
struct net_handle {
	uint32_t magic;
	uint32_t ip_be;   /* listener IPv4, network order */
	uint16_t port_be; /* listener port, network order */
	uint16_t pad;
	uint64_t nonce;   /* checked in the hello: a stale handle cannot reach a new listener */
	struct net_stage *stage; /* local connect state; NULL in a fresh handle */
};
_Static_assert(sizeof(struct net_handle) <= NCCL_ABI_HANDLE_MAXSIZE, "handle too large");

struct hello {
	uint32_t magic, pad;
	uint64_t nonce;
};

struct net_stage {
	int fd;
	bool connected;
	size_t sent; /* hello bytes sent */
	struct hello hello;
};

struct net_listen {
	int fd;
	uint64_t nonce;
	int pending_fd; /* accepted, hello not complete yet; -1: none */
	size_t got;
	struct hello hello;
};

enum req_state { REQ_FREE = 0, REQ_ACTIVE, REQ_DONE };

struct msg_hdr {
	uint32_t magic;
	int32_t tag;
	uint64_t bytes;
};

struct net_req {
	struct net_comm *c;
	enum req_state state;
	uint64_t seq;
	char *data;
	size_t cap;    /* send: message size; recv: posted buffer size */
	size_t bytes;  /* recv: size of the arriving message (from its header) */
	int tag;
	struct msg_hdr hdr;
	size_t hdr_done, data_done;
	nccl_abi_result result;
};

struct net_comm {
	int fd;
	bool is_send;
	bool broken;
	uint64_t next_seq; /* next request posted */
	uint64_t prog_seq; /* oldest request not complete */
	struct net_req reqs[NCCL_ABI_MAX_REQUESTS];
};

nccl_abi_result nplug_net_init(nccl_abi_logger log)
{
	nplug_set_logger(log);
	return NCCL_ABI_SUCCESS;
}

nccl_abi_result nplug_net_listen(int dev, void *handle, void **listen_comm)
{
	struct net_handle h = { .magic = NET_MAGIC };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof sa;
	struct net_listen *l;
	int fd, rc;

	if (dev != 0 || !handle || !listen_comm)
		return NCCL_ABI_INTERNAL_ERROR;
	*listen_comm = NULL;
	if (inet_pton(AF_INET, nplug_host_ip(), &sa.sin_addr) != 1) {
		nplug_log(NCCL_ABI_LOG_WARN, "INCA_NCCL_HOST_IP=%s is not an IPv4 address",
			  nplug_host_ip());
		return NCCL_ABI_INVALID_USAGE;
	}
	l = calloc(1, sizeof *l);
	if (!l)
		return NCCL_ABI_SYSTEM_ERROR;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		rc = -errno;
		nplug_log(NCCL_ABI_LOG_WARN, "listen on %s: %s", nplug_host_ip(), strerror(-rc));
		if (fd >= 0)
			close(fd);
		free(l);
		return nplug_result(rc);
	}
	if (getrandom(&l->nonce, sizeof l->nonce, 0) != sizeof l->nonce)
		l->nonce = (uint64_t)(uintptr_t)l ^ (uint64_t)getpid() << 32;
	l->fd = fd;
	l->pending_fd = -1;
	h.ip_be = sa.sin_addr.s_addr;
	h.port_be = sa.sin_port;
	h.nonce = l->nonce;
	memset(handle, 0, NCCL_ABI_HANDLE_MAXSIZE);
	memcpy(handle, &h, sizeof h);
	*listen_comm = l;
	return NCCL_ABI_SUCCESS;
}

static struct net_comm *comm_new(int fd, bool is_send)
{
	struct net_comm *c = calloc(1, sizeof *c);
	int one = 1;

	if (!c)
		return NULL;
	c->fd = fd;
	c->is_send = is_send;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	for (int i = 0; i < NCCL_ABI_MAX_REQUESTS; i++)
		c->reqs[i].c = c;
	return c;
}

nccl_abi_result nplug_net_connect(int dev, void *handle, void **send_comm,
				  struct nccl_abi_device_handle **send_dev)
{
	struct net_handle h;
	struct net_stage *st;
	int rc;

	(void)send_dev; /* no device offload: NCCL's device handle stays untouched */
	if (dev != 0 || !handle || !send_comm)
		return NCCL_ABI_INTERNAL_ERROR;
	*send_comm = NULL;
	memcpy(&h, handle, sizeof h);
	if (h.magic != NET_MAGIC)
		return NCCL_ABI_INTERNAL_ERROR;
	st = h.stage;
	if (!st) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = h.port_be };
		sa.sin_addr.s_addr = h.ip_be;
		st = calloc(1, sizeof *st);
		if (!st)
			return NCCL_ABI_SYSTEM_ERROR;
		st->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (st->fd < 0 || (connect(st->fd, (struct sockaddr *)&sa, sizeof sa) < 0 &&
				   errno != EINPROGRESS)) {
			rc = -errno;
			goto fail;
		}
		st->hello = (struct hello){ .magic = HELLO_MAGIC, .nonce = h.nonce };
		h.stage = st;
		memcpy(handle, &h, sizeof h);
	}
	if (!st->connected) {
		struct pollfd p = { .fd = st->fd, .events = POLLOUT };
		int err = 0;
		socklen_t len = sizeof err;
		if (poll(&p, 1, 0) == 0)
			return NCCL_ABI_SUCCESS; /* still connecting: NCCL calls again */
		if (getsockopt(st->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err) {
			rc = -err;
			goto fail;
		}
		st->connected = true;
	}
	while (st->sent < sizeof st->hello) {
		ssize_t n = send(st->fd, (char *)&st->hello + st->sent, sizeof st->hello - st->sent,
				 MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return NCCL_ABI_SUCCESS;
		if (n < 0) {
			rc = -errno;
			goto fail;
		}
		st->sent += (size_t)n;
	}
	struct net_comm *c = comm_new(st->fd, true);
	if (!c) {
		rc = -ENOMEM;
		goto fail;
	}
	free(st);
	h.stage = NULL;
	memcpy(handle, &h, sizeof h);
	*send_comm = c;
	return NCCL_ABI_SUCCESS;
fail:
	nplug_log(NCCL_ABI_LOG_WARN, "connect: %s", strerror(-rc));
	if (st->fd >= 0)
		close(st->fd);
	free(st);
	h.stage = NULL;
	memcpy(handle, &h, sizeof h);
	return nplug_result(rc);
}

nccl_abi_result nplug_net_accept(void *listen_comm, void **recv_comm,
				 struct nccl_abi_device_handle **recv_dev)
{
	struct net_listen *l = listen_comm;

	(void)recv_dev;
	if (!l || !recv_comm)
		return NCCL_ABI_INTERNAL_ERROR;
	*recv_comm = NULL;
	if (l->pending_fd < 0) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return errno == EAGAIN || errno == EINTR || errno == ECONNABORTED ?
			       NCCL_ABI_SUCCESS : nplug_result(-errno);
		l->pending_fd = fd;
		l->got = 0;
	}
	while (l->got < sizeof l->hello) {
		ssize_t n = recv(l->pending_fd, (char *)&l->hello + l->got, sizeof l->hello - l->got,
				 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return NCCL_ABI_SUCCESS;
		if (n <= 0)
			goto stranger;
		l->got += (size_t)n;
	}
	if (l->hello.magic != HELLO_MAGIC || l->hello.nonce != l->nonce)
		goto stranger;
	struct net_comm *c = comm_new(l->pending_fd, false);
	if (!c)
		return NCCL_ABI_SYSTEM_ERROR;
	l->pending_fd = -1;
	*recv_comm = c;
	return NCCL_ABI_SUCCESS;
stranger:
	/* Not one of ours (or it went away): drop it and wait for the real peer. */
	close(l->pending_fd);
	l->pending_fd = -1;
	return NCCL_ABI_SUCCESS;
}

static struct net_req *req_post(struct net_comm *c)
{
	struct net_req *r = &c->reqs[c->next_seq % NCCL_ABI_MAX_REQUESTS];

	if (r->state != REQ_FREE)
		return NULL; /* NCCL_ABI_MAX_REQUESTS outstanding */
	memset(&r->hdr, 0, sizeof *r - offsetof(struct net_req, hdr));
	r->state = REQ_ACTIVE;
	r->seq = c->next_seq++;
	r->hdr_done = r->data_done = 0;
	r->result = NCCL_ABI_SUCCESS;
	return r;
}

nccl_abi_result nplug_net_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
				void **request)
{
	struct net_comm *c = send_comm;
	struct net_req *r;

	if (!c || !c->is_send || !request || size < 0)
		return NCCL_ABI_INTERNAL_ERROR;
	*request = NULL;
	if (!nplug_mr_covers(mhandle, data, (size_t)size))
		return NCCL_ABI_INTERNAL_ERROR;
	if (c->broken)
		return NCCL_ABI_REMOTE_ERROR;
	if (!(r = req_post(c)))
		return NCCL_ABI_SUCCESS; /* request NULL: NCCL retries */
	r->data = data;
	r->cap = r->bytes = (size_t)size;
	r->tag = tag;
	r->hdr = (struct msg_hdr){ .magic = MSG_MAGIC, .tag = tag, .bytes = (uint64_t)size };
	*request = r;
	return NCCL_ABI_SUCCESS;
}

nccl_abi_result nplug_net_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
				void **mhandles, void **request)
{
	struct net_comm *c = recv_comm;
	struct net_req *r;

	if (!c || c->is_send || !request || n != 1 || !data || !sizes || sizes[0] < 0)
		return NCCL_ABI_INTERNAL_ERROR; /* maxRecvs is 1: never a grouped receive */
	*request = NULL;
	if (!nplug_mr_covers(mhandles ? mhandles[0] : NULL, data[0], (size_t)sizes[0]))
		return NCCL_ABI_INTERNAL_ERROR;
	if (c->broken)
		return NCCL_ABI_REMOTE_ERROR;
	if (!(r = req_post(c)))
		return NCCL_ABI_SUCCESS;
	r->data = data[0];
	r->cap = (size_t)sizes[0];
	r->tag = tags ? tags[0] : 0;
	*request = r;
	return NCCL_ABI_SUCCESS;
}

nccl_abi_result nplug_net_iflush(void *recv_comm, int n, void **data, int *sizes,
				 void **mhandles, void **request)
{
	(void)recv_comm;
	(void)n;
	(void)data;
	(void)sizes;
	(void)mhandles;
	/* Host memory: received bytes are in place when test() says done. NULL = complete. */
	if (!request)
		return NCCL_ABI_INTERNAL_ERROR;
	*request = NULL;
	return NCCL_ABI_SUCCESS;
}

/* Send or receive buf[*done, len) on fd: 1 when all of it moved, 0 would block, <0 -errno. */
static int io_step(int fd, int is_send, char *buf, size_t len, size_t *done)
{
	while (*done < len) {
		ssize_t n = is_send ? send(fd, buf + *done, len - *done, MSG_NOSIGNAL) :
				      recv(fd, buf + *done, len - *done, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		*done += (size_t)n;
	}
	return 1;
}

/* Move bytes of one request; 1 when it completed, 0 would block, <0 -errno (connection). */
static int req_step(struct net_req *r)
{
	int fd = r->c->fd, rc;

	if (r->hdr_done < sizeof r->hdr) {
		rc = io_step(fd, r->c->is_send, (char *)&r->hdr, sizeof r->hdr, &r->hdr_done);
		if (rc <= 0)
			return rc;
		if (!r->c->is_send) {
			if (r->hdr.magic != MSG_MAGIC)
				return -EPROTO;
			if (r->hdr.bytes > r->cap) {
				nplug_log(NCCL_ABI_LOG_WARN, "message of %llu bytes for a receive "
					  "of %zu", (unsigned long long)r->hdr.bytes, r->cap);
				return -EMSGSIZE;
			}
			r->bytes = (size_t)r->hdr.bytes;
		}
	}
	return io_step(fd, r->c->is_send, r->data, r->bytes, &r->data_done);
}

/* Advance the requests of a connection in order until one would block. A broken
 * connection fails every request in flight. */
static void comm_progress(struct net_comm *c)
{
	while (c->prog_seq < c->next_seq) {
		struct net_req *r = &c->reqs[c->prog_seq % NCCL_ABI_MAX_REQUESTS];
		int rc = c->broken ? -ECONNRESET : req_step(r);
		if (rc == 0)
			return;
		if (rc < 0) {
			if (!c->broken)
				nplug_log(NCCL_ABI_LOG_WARN, "%s: %s", c->is_send ? "send" : "recv",
					  strerror(-rc));
			c->broken = true;
			r->result = rc == -EMSGSIZE ? NCCL_ABI_INVALID_USAGE : nplug_result(rc);
		}
		r->state = REQ_DONE;
		c->prog_seq++;
	}
}

nccl_abi_result nplug_net_test(void *request, int *done, int *sizes)
{
	struct net_req *r = request;
	nccl_abi_result res;

	if (!r || !done || r->state == REQ_FREE)
		return NCCL_ABI_INTERNAL_ERROR;
	comm_progress(r->c);
	*done = r->state == REQ_DONE;
	if (!*done)
		return NCCL_ABI_SUCCESS;
	if (sizes)
		sizes[0] = (int)r->bytes;
	res = r->result;
	r->state = REQ_FREE;
	return res;
}

static nccl_abi_result comm_close(struct net_comm *c)
{
	if (!c)
		return NCCL_ABI_INTERNAL_ERROR;
	close(c->fd);
	free(c);
	return NCCL_ABI_SUCCESS;
}

nccl_abi_result nplug_net_close_send(void *send_comm)
{
	return comm_close(send_comm);
}

nccl_abi_result nplug_net_close_recv(void *recv_comm)
{
	return comm_close(recv_comm);
}

nccl_abi_result nplug_net_close_listen(void *listen_comm)
{
	struct net_listen *l = listen_comm;

	if (!l)
		return NCCL_ABI_INTERNAL_ERROR;
	if (l->pending_fd >= 0)
		close(l->pending_fd);
	close(l->fd);
	free(l);
	return NCCL_ABI_SUCCESS;
}
