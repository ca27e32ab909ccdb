/* inca-am switches: one worker thread per configured switch owns its NETCONF connection
 * (lib/ctl) and runs that switch's requests (poll, put tree, delete tree) in order; the main
 * loop keeps the snapshots (caps, running trees, up/down) and the resource accounting. Group
 * logic is groups.c. A slow or stopped switch only ever delays its own worker: every connect
 * and request is bounded by switch_timeout_ms, and the main loop never waits for a worker. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_timedjoin_np (meson sets it for the daemon builds) */
#endif
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "am.h"
#include "util/util.h"

/* A request travels main loop -> worker queue -> answer queue -> main loop, which frees it. */
struct swreq {
	struct swreq *next;
	enum am_swreq_kind kind;
	size_t sw;
	uint64_t gid;
	uint32_t seq;
	int k;
	uint64_t queued_ns;
	struct ctl_tree tree; /* put: owned deep copy (holds the group key) */
	uint16_t tree_id;     /* delete */
	/* answer */
	int rc;
	char err[256];
	struct ctl_caps caps; /* poll */
	struct ctl_tree *trees;
	size_t ntrees;
};

#define DEFER_MAX 64

struct am_swq {
	struct am *am;
	const struct am_cfg_switch *cfg;
	size_t idx;
	unsigned timeout_ms;
	pthread_t th;
	bool started, stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct swreq *head, *tail;
	/* worker only */
	struct ctl_conn *conn;
	uint16_t deferred[DEFER_MAX]; /* deletes waiting for a connection */
	size_t ndeferred;
};

/* The answers of every worker, in the order they finished. */
struct am_swio {
	pthread_mutex_t mu;
	struct swreq *head, *tail;
};

static void swreq_free(struct swreq *r)
{
	ctl_tree_free(&r->tree);
	explicit_bzero(r->tree.auth_key, sizeof r->tree.auth_key);
	ctl_caps_free(&r->caps);
	for (size_t i = 0; i < r->ntrees; i++)
		ctl_tree_free(&r->trees[i]);
	free(r->trees);
	free(r);
}

static void wake(struct am *am)
{
	uint64_t one = 1;

	/* A full counter (never in practice) still leaves the fd readable. */
	if (write(am->wake_fd, &one, sizeof one) < 0) {
	}
}

/* ---------------------------------------------------------------- worker side */

static void answer(struct am_swq *q, struct swreq *r)
{
	struct am_swio *io = q->am->swio;

	r->next = NULL;
	pthread_mutex_lock(&io->mu);
	if (io->tail)
		io->tail->next = r;
	else
		io->head = r;
	io->tail = r;
	pthread_mutex_unlock(&io->mu);
	wake(q->am);
}

static void fail(struct swreq *r, int rc, const char *why)
{
	r->rc = rc;
	snprintf(r->err, sizeof r->err, "%.250s", why);
}

static void drop_conn(struct am_swq *q)
{
	ctl_disconnect(q->conn);
	q->conn = NULL;
}

static void defer_delete(struct am_swq *q, uint16_t id)
{
	for (size_t i = 0; i < q->ndeferred; i++)
		if (q->deferred[i] == id)
			return;
	if (q->ndeferred < DEFER_MAX)
		q->deferred[q->ndeferred++] = id;
}

/* Deletes that waited for this connection, before anything else on it: the poll that follows
 * then shows the switch without those trees. Their answers go to the main loop's log. */
static void run_deferred(struct am_swq *q)
{
	while (q->ndeferred && q->conn) {
		struct swreq *d = calloc(1, sizeof *d);
		uint16_t id = q->deferred[0];
		int rc = ctl_delete_tree(q->conn, id);
		if (rc < 0 && ctl_conn_broken(q->conn)) {
			free(d);
			drop_conn(q);
			return;
		}
		memmove(q->deferred, q->deferred + 1, --q->ndeferred * sizeof q->deferred[0]);
		if (!d)
			continue;
		d->kind = AM_SWREQ_DEL;
		d->sw = q->idx;
		d->tree_id = id;
		d->rc = rc;
		if (rc < 0)
			fail(d, rc, ctl_conn_error(q->conn));
		answer(q, d);
	}
}

static void run_poll(struct am_swq *q, struct swreq *r)
{
	int rc;

	if (!q->conn) {
		rc = ctl_connect_timeout(q->cfg->target, q->cfg->key_path[0] ? q->cfg->key_path : NULL,
					 q->cfg->known_hosts[0] ? q->cfg->known_hosts : NULL,
					 q->timeout_ms, &q->conn);
		if (rc < 0) {
			/* lib/ctl's message says why (key refused, host key mismatch, timeout ...) */
			q->conn = NULL;
			fail(r, rc, ctl_conn_error(NULL));
			return;
		}
		run_deferred(q);
		if (!q->conn) {
			fail(r, -ENOTCONN, "connection lost while deleting old trees");
			return;
		}
	}
	rc = ctl_get_caps(q->conn, &r->caps);
	if (rc == 0)
		rc = ctl_get_trees(q->conn, &r->trees, &r->ntrees);
	if (rc < 0) {
		fail(r, rc, ctl_conn_error(q->conn));
		drop_conn(q); /* the next poll connects again */
	}
}

static void run_req(struct am_swq *q, struct swreq *r)
{
	switch (r->kind) {
	case AM_SWREQ_POLL:
		run_poll(q, r);
		break;
	case AM_SWREQ_PUT:
		if (!q->conn) {
			fail(r, -ENOTCONN, "not connected");
			break;
		}
		r->rc = ctl_put_tree(q->conn, &r->tree);
		if (r->rc < 0) {
			fail(r, r->rc, ctl_conn_error(q->conn));
			if (ctl_conn_broken(q->conn))
				drop_conn(q);
		}
		break;
	case AM_SWREQ_DEL:
		if (!q->conn) {
			defer_delete(q, r->tree_id);
			fail(r, -ENOTCONN, "not connected (deleted at the next connect)");
			break;
		}
		r->rc = ctl_delete_tree(q->conn, r->tree_id);
		if (r->rc < 0) {
			fail(r, r->rc, ctl_conn_error(q->conn));
			if (ctl_conn_broken(q->conn)) {
				drop_conn(q);
				defer_delete(q, r->tree_id);
			}
		}
		break;
	}
}

static void *worker(void *arg)
{
	struct am_swq *q = arg;

	for (;;) {
		struct swreq *r;
		bool stopping;

		pthread_mutex_lock(&q->mu);
		while (!q->head && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		r = q->head;
		if (r) {
			q->head = r->next;
			if (!q->head)
				q->tail = NULL;
		}
		stopping = q->stop;
		pthread_mutex_unlock(&q->mu);
		if (!r)
			break;
		if (stopping) {
			/* Leave the trees clean where that is quick; nobody reads answers now. */
			if (r->kind == AM_SWREQ_DEL && q->conn)
				ctl_delete_tree(q->conn, r->tree_id);
			swreq_free(r);
			continue;
		}
		run_req(q, r);
		answer(q, r);
	}
	if (q->conn)
		drop_conn(q);
	return NULL;
}

/* ---------------------------------------------------------------- main loop side */

static void enqueue(struct am *am, size_t sw, struct swreq *r)
{
	struct am_swq *q = am->sw[sw].q;

	r->sw = sw;
	if (!q || !q->started) { /* no worker: the request fails at once */
		fail(r, -ENOTCONN, "no worker for this switch");
		answer(q ? q : &(struct am_swq){ .am = am }, r);
		return;
	}
	r->next = NULL;
	pthread_mutex_lock(&q->mu);
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

static struct swreq *req_new(enum am_swreq_kind kind, uint64_t gid, uint32_t seq, int k)
{
	struct swreq *r = calloc(1, sizeof *r);

	if (!r)
		abort(); /* daemon: out of memory */
	r->kind = kind;
	r->queued_ns = util_now_ns();
	r->gid = gid;
	r->seq = seq;
	r->k = k;
	return r;
}

void am_sw_poll(struct am *am, size_t sw, uint64_t gid, uint32_t seq)
{
	am->sw[sw].polls_pending++;
	enqueue(am, sw, req_new(AM_SWREQ_POLL, gid, seq, 0));
}

static void tree_dup(struct ctl_tree *dst, const struct ctl_tree *src)
{
	*dst = *src;
	dst->members = NULL;
	dst->children = NULL;
	dst->nmembers = dst->nchildren = 0;
	if (src->nmembers) {
		dst->members = calloc(src->nmembers, sizeof *dst->members);
		if (!dst->members)
			abort();
		memcpy(dst->members, src->members, src->nmembers * sizeof *dst->members);
		dst->nmembers = src->nmembers;
	}
	if (src->nchildren) {
		dst->children = calloc(src->nchildren, sizeof *dst->children);
		if (!dst->children)
			abort();
		dst->nchildren = src->nchildren;
		for (size_t i = 0; i < src->nchildren; i++) {
			dst->children[i] = src->children[i];
			dst->children[i].bfr_ids = NULL;
			if (!src->children[i].nbfr)
				continue;
			dst->children[i].bfr_ids = calloc(src->children[i].nbfr, sizeof(uint16_t));
			if (!dst->children[i].bfr_ids)
				abort();
			memcpy(dst->children[i].bfr_ids, src->children[i].bfr_ids,
			       src->children[i].nbfr * sizeof(uint16_t));
		}
	}
}

void am_sw_put(struct am *am, size_t sw, const struct ctl_tree *t, uint64_t gid, uint32_t seq,
	       int k)
{
	struct swreq *r = req_new(AM_SWREQ_PUT, gid, seq, k);

	tree_dup(&r->tree, t);
	enqueue(am, sw, r);
}

void am_sw_delete(struct am *am, size_t sw, uint16_t tree_id)
{
	struct swreq *r = req_new(AM_SWREQ_DEL, 0, 0, 0);

	r->tree_id = tree_id;
	enqueue(am, sw, r);
}

static void running_free(struct am_switch *s)
{
	for (size_t i = 0; i < s->nrunning; i++)
		ctl_tree_free(&s->running[i]);
	free(s->running);
	s->running = NULL;
	s->nrunning = 0;
}

const struct ctl_tree *am_running_find(const struct am_switch *s, uint16_t id)
{
	for (size_t i = 0; i < s->nrunning; i++)
		if (s->running[i].id == id)
			return &s->running[i];
	return NULL;
}

int am_sw_index(const struct am *am, const char *name)
{
	for (size_t i = 0; i < am->nsw; i++)
		if (strcmp(am->sw[i].cfg->name, name) == 0)
			return (int)i;
	return -1;
}

static void sw_down(struct am *am, struct am_switch *s, const char *why)
{
	if (s->up || !s->polled) {
		am_log(0, "switch %s unreachable: %s", s->cfg->name, why);
		if (s->up)
			am->st.switch_failures++;
	}
	snprintf(s->err, sizeof s->err, "%s", why);
	s->up = false;
	s->polled = true;
}

static void apply_poll(struct am *am, struct swreq *r)
{
	struct am_switch *s = &am->sw[r->sw];

	if (s->polls_pending)
		s->polls_pending--;
	am->sw_polled = true;
	if (r->rc < 0) {
		sw_down(am, s, r->err);
		return;
	}
	if (!s->up)
		am_log(1, "switch %s up (%s, %u/%u slots used)", s->cfg->name, r->caps.data_addr,
		       r->caps.used_slots, r->caps.max_slots);
	ctl_caps_free(&s->caps);
	s->caps = r->caps;
	memset(&r->caps, 0, sizeof r->caps);
	running_free(s);
	s->running = r->trees;
	s->nrunning = r->ntrees;
	r->trees = NULL;
	r->ntrees = 0;
	s->snap_ns = r->queued_ns;
	s->up = true;
	s->polled = true;
	s->err[0] = '\0';
}

void am_sw_drain(struct am *am)
{
	struct am_swio *io = am->swio;
	struct swreq *list, *r;

	if (!io)
		return;
	pthread_mutex_lock(&io->mu);
	list = io->head;
	io->head = io->tail = NULL;
	pthread_mutex_unlock(&io->mu);
	while ((r = list)) {
		struct am_sw_answer a = { r->kind, r->sw, r->gid, r->seq, r->k, r->rc, r->err };
		list = r->next;
		if (r->kind == AM_SWREQ_POLL) {
			apply_poll(am, r);
			am_account(am);
		} else if (r->kind == AM_SWREQ_DEL && r->rc < 0 && r->rc != -ENOENT) {
			am_log(r->rc == -ENOTCONN ? 1 : 0, "switch %s: delete tree %u: %s",
			       am->sw[r->sw].cfg->name, r->tree_id, r->err);
		}
		if (r->gid)
			am_group_sw_done(am, &a);
		swreq_free(r);
	}
}

/* Recompute per-switch resource accounting: this AM's holdings from its groups (also the
 * trees being pushed), foreign usage = what the switch reports minus this AM's trees that it
 * reports running. */
void am_account(struct am *am)
{
	for (size_t i = 0; i < am->nsw; i++)
		am->sw[i].am_slots = am->sw[i].am_trees = 0;
	for (struct am_group *g = am->groups; g; g = g->next)
		for (int j = 0; j < 2; j++) {
			const struct am_plan *p = j ? &g->push_plan : &g->plan;
			for (size_t k = 0; p->ok && k < p->nsw; k++) {
				am->sw[p->sws[k].sw].am_slots += p->sws[k].tree.slots;
				am->sw[p->sws[k].sw].am_trees++;
			}
		}
	for (size_t i = 0; i < am->nsw; i++) {
		struct am_switch *s = &am->sw[i];
		uint32_t mine_slots = 0, mine_trees = 0;
		for (struct am_group *g = am->groups; g; g = g->next)
			for (int j = 0; j < 2; j++) {
				const struct am_plan *p = j ? &g->push_plan : &g->plan;
				int k = p->ok ? am_plan_find(p, (int)i) : -1;
				if (k >= 0 && am_running_find(s, p->sws[k].tree.id)) {
					mine_slots += p->sws[k].tree.slots;
					mine_trees++;
				}
			}
		s->foreign_slots = s->caps.used_slots > mine_slots ? s->caps.used_slots - mine_slots : 0;
		s->foreign_trees = s->caps.used_trees > mine_trees ? s->caps.used_trees - mine_trees : 0;
	}
}

enum am_role am_sw_role(const struct am_switch *s)
{
	if (s->cfg->role != AM_ROLE_UNKNOWN)
		return s->cfg->role;
	if (strcmp(s->caps.role_hint, "spine") == 0)
		return AM_ROLE_SPINE;
	if (strcmp(s->caps.role_hint, "leaf") == 0)
		return AM_ROLE_LEAF;
	return AM_ROLE_UNKNOWN;
}

void am_build_views(struct am *am, struct am_sw_view *v)
{
	am_account(am);
	for (size_t i = 0; i < am->nsw; i++) {
		const struct am_switch *s = &am->sw[i];
		uint32_t used = s->foreign_slots + s->am_slots, usedt = s->foreign_trees + s->am_trees;
		memset(&v[i], 0, sizeof v[i]);
		v[i].name = s->cfg->name;
		v[i].data_addr = s->caps.data_addr;
		v[i].role = am_sw_role(s);
		v[i].up = s->up && s->caps.data_addr[0];
		v[i].free_slots = s->caps.max_slots > used ? s->caps.max_slots - used : 0;
		v[i].free_trees = s->caps.max_trees > usedt ? s->caps.max_trees - usedt : 0;
		v[i].max_slot_bytes = s->caps.max_slot_bytes;
		v[i].max_bsl_bits = s->caps.max_bsl_bits;
		v[i].dtype_mask = s->caps.dtype_mask;
		v[i].op_mask = s->caps.op_mask;
		v[i].links = s->caps.links;
		v[i].nlinks = s->caps.nlinks;
	}
}

/* ---------------------------------------------------------------- start / stop */

static bool polls_pending(const struct am *am)
{
	for (size_t i = 0; i < am->nsw; i++)
		if (am->sw[i].polls_pending)
			return true;
	return false;
}

int am_sw_start(struct am *am)
{
	uint64_t deadline;

	am->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (am->wake_fd < 0)
		return -errno;
	am->swio = calloc(1, sizeof *am->swio);
	if (!am->swio)
		return -ENOMEM;
	pthread_mutex_init(&am->swio->mu, NULL);
	am->nsw = am->cfg.nswitches;
	for (size_t i = 0; i < am->nsw; i++) {
		struct am_swq *q = calloc(1, sizeof *q);
		if (!q)
			return -ENOMEM;
		am->sw[i].cfg = &am->cfg.sw[i];
		am->sw[i].q = q;
		q->am = am;
		q->cfg = &am->cfg.sw[i];
		q->idx = i;
		q->timeout_ms = am->cfg.switch_timeout_ms;
		pthread_mutex_init(&q->mu, NULL);
		pthread_cond_init(&q->cv, NULL);
		q->started = pthread_create(&q->th, NULL, worker, q) == 0;
		if (!q->started)
			am_log(0, "switch %s: cannot start its worker thread", q->cfg->name);
		am_sw_poll(am, i, 0, 0);
	}
	/* Connect and poll every switch in parallel; a switch that does not answer in time is
	 * down (its answer still comes later). */
	deadline = util_now_ns() + (uint64_t)am->cfg.switch_timeout_ms * 2 * NS_PER_MS +
		   500 * NS_PER_MS;
	for (;;) {
		struct pollfd pfd = { .fd = am->wake_fd, .events = POLLIN };
		uint64_t now, v;
		am_sw_drain(am);
		now = util_now_ns();
		if (!polls_pending(am) || now >= deadline)
			break;
		poll(&pfd, 1, (int)((deadline - now) / NS_PER_MS) + 1);
		if (read(am->wake_fd, &v, sizeof v) < 0) {
		}
	}
	for (size_t i = 0; i < am->nsw; i++)
		if (!am->sw[i].polled)
			sw_down(am, &am->sw[i], "no answer to the first poll yet");
	return 0;
}

void am_sw_stop(struct am *am)
{
	struct timespec until;
	bool all_joined = true;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += am->cfg.switch_timeout_ms / 1000 + 1;
	for (size_t i = 0; i < am->nsw; i++) {
		struct am_swq *q = am->sw[i].q;
		if (!q || !q->started)
			continue;
		pthread_mutex_lock(&q->mu);
		q->stop = true;
		pthread_cond_signal(&q->cv);
		pthread_mutex_unlock(&q->mu);
	}
	for (size_t i = 0; i < am->nsw; i++) {
		struct am_swq *q = am->sw[i].q;
		if (!q)
			continue;
		ctl_caps_free(&am->sw[i].caps);
		running_free(&am->sw[i]);
		am->sw[i].q = NULL;
		if (q->started && pthread_timedjoin_np(q->th, NULL, &until) != 0) {
			/* Stuck on a hung switch: the process exits without it; q stays allocated
			 * for the thread. */
			am_log(0, "switch %s: worker still busy, not waiting for it", q->cfg->name);
			pthread_detach(q->th);
			all_joined = false;
			continue;
		}
		while (q->head) {
			struct swreq *r = q->head;
			q->head = r->next;
			swreq_free(r);
		}
		pthread_mutex_destroy(&q->mu);
		pthread_cond_destroy(&q->cv);
		free(q);
	}
	/* A worker or the gRPC pump (am->srvq still set) left running may still write to
	 * wake_fd: then it stays open, so that its number is never reused. */
	if (am->swio && all_joined && !am->srvq) {
		while (am->swio->head) {
			struct swreq *r = am->swio->head;
			am->swio->head = r->next;
			swreq_free(r);
		}
		pthread_mutex_destroy(&am->swio->mu);
		free(am->swio);
		am->swio = NULL;
		if (am->wake_fd >= 0)
			close(am->wake_fd);
		am->wake_fd = -1;
	}
}
