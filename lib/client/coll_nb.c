/* libinca nonblocking AllReduce: one progress thread per communicator runs requests in issue
 * order; blocking collectives drain it first (coll_nb_drain). */
#include "client/coll_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void *nb_thread(void *arg)
{
	struct inca_comm *c = arg;
	struct client_coll *k = c->coll;

	pthread_mutex_lock(&k->mu);
	for (;;) {
		while (!k->head && !k->stop)
			pthread_cond_wait(&k->cv, &k->mu);
		if (!k->head)
			break;
		struct inca_request *r = k->head->req;
		pthread_mutex_unlock(&k->mu);
		struct inca_coll_args a = { .coll = INCA_COLL_ALLREDUCE, .sendbuf = r->sendbuf,
					    .recvbuf = r->recvbuf, .count = r->count, .dt = r->dt,
					    .op = r->op };
		int rc = coll_run(c, &a);
		pthread_mutex_lock(&k->mu);
		k->head = k->head->next;
		if (!k->head)
			k->tail = NULL;
		k->pending--;
		r->status = rc;
		r->done = true;
		pthread_cond_broadcast(&k->cv);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

/* Blocking calls and destroy: wait until the progress thread has nothing queued. */
void coll_nb_drain(struct inca_comm *c)
{
	struct client_coll *k = c->coll;

	if (!k->thr_started)
		return;
	pthread_mutex_lock(&k->mu);
	while (k->pending)
		pthread_cond_wait(&k->cv, &k->mu);
	pthread_mutex_unlock(&k->mu);
}

void coll_nb_stop(struct inca_comm *c)
{
	struct client_coll *k = c->coll;

	if (!k->thr_started)
		return;
	coll_nb_drain(c);
	pthread_mutex_lock(&k->mu);
	k->stop = true;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	pthread_join(k->thr, NULL);
	k->thr_started = false;
}

int inca_iallreduce(struct inca_comm *c, const void *sendbuf, void *recvbuf, size_t count,
		    enum inca_dtype dt, enum inca_op op, struct inca_request **req)
{
	struct inca_coll_args a = { .coll = INCA_COLL_ALLREDUCE, .sendbuf = sendbuf,
				    .recvbuf = recvbuf, .count = count, .dt = dt, .op = op };
	struct client_coll *k;
	struct inca_request *r;
	int rc;

	if (!req)
		return -EINVAL;
	*req = NULL;
	if (!c || !c->coll)
		return -EINVAL;
	k = c->coll;
	if ((rc = coll_validate(c, &a)) < 0)
		return rc;
	r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	*r = (struct inca_request){ .comm = c, .sendbuf = sendbuf, .recvbuf = recvbuf,
				    .count = count, .dt = dt, .op = op };
	r->node.req = r;
	pthread_mutex_lock(&k->mu);
	if (!k->thr_started) {
		k->stop = false;
		if (pthread_create(&k->thr, NULL, nb_thread, c) != 0) {
			pthread_mutex_unlock(&k->mu);
			free(r);
			return -EAGAIN;
		}
		k->thr_started = true;
	}
	if (k->tail)
		k->tail->next = &r->node;
	else
		k->head = &r->node;
	k->tail = &r->node;
	k->pending++;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	*req = r;
	return 0;
}

int inca_test(struct inca_request **req, int *done)
{
	struct inca_request *r;
	struct client_coll *k;
	int rc = 0;

	if (!req || !*req || !done)
		return -EINVAL;
	r = *req;
	k = r->comm->coll;
	pthread_mutex_lock(&k->mu);
	*done = r->done;
	if (r->done)
		rc = r->status;
	pthread_mutex_unlock(&k->mu);
	if (*done) {
		free(r);
		*req = NULL;
	}
	return rc;
}

int inca_wait(struct inca_request **req)
{
	struct inca_request *r;
	struct client_coll *k;
	int rc;

	if (!req || !*req)
		return -EINVAL;
	r = *req;
	k = r->comm->coll;
	pthread_mutex_lock(&k->mu);
	while (!r->done)
		pthread_cond_wait(&k->cv, &k->mu);
	rc = r->status;
	pthread_mutex_unlock(&k->mu);
	free(r);
	*req = NULL;
	return rc;
}
