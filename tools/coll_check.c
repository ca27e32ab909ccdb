/* tools/coll_check: buffer layouts, busbw factors, input data and exact verification for the
 * nine collectives, shared by inca-bench (libinca ranks) and ompi-coll-bench (MPI ranks) so
 * both are checked against the same reference. Reductions use check.h's exact-valued data;
 * data movement uses its per-block byte streams. */
#include "coll_check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

int cc_is_reduction(enum inca_coll coll)
{
	return coll == INCA_COLL_ALLREDUCE || coll == INCA_COLL_REDUCE ||
	       coll == INCA_COLL_REDUCE_SCATTER;
}

int cc_has_root(enum inca_coll coll)
{
	return coll == INCA_COLL_REDUCE || coll == INCA_COLL_BCAST || coll == INCA_COLL_GATHER ||
	       coll == INCA_COLL_SCATTER;
}

int cc_layout_for(enum inca_coll coll, uint64_t size_bytes, size_t es, int nranks,
		  struct cc_layout *out)
{
	memset(out, 0, sizeof(*out));
	if (!es || nranks < 1)
		return -EINVAL;
	size_t n = (size_t)nranks;
	switch (coll) {
	case INCA_COLL_ALLREDUCE:
	case INCA_COLL_REDUCE:
	case INCA_COLL_BCAST:
		out->count = size_bytes / es;
		out->total_count = out->count;
		out->send_bytes = out->recv_bytes = out->count * es;
		break;
	case INCA_COLL_ALLGATHER:
	case INCA_COLL_GATHER:
		out->count = size_bytes / (es * n);
		out->total_count = out->count * n;
		out->send_bytes = out->count * es;
		out->recv_bytes = out->total_count * es;
		break;
	case INCA_COLL_REDUCE_SCATTER:
	case INCA_COLL_SCATTER:
		out->count = size_bytes / (es * n);
		out->total_count = out->count * n;
		out->send_bytes = out->total_count * es;
		out->recv_bytes = out->count * es;
		break;
	case INCA_COLL_ALLTOALL:
		out->count = size_bytes / (es * n);
		out->total_count = out->count * n;
		out->send_bytes = out->recv_bytes = out->total_count * es;
		break;
	case INCA_COLL_BARRIER:
		return 0;
	default:
		return -EINVAL;
	}
	out->size_bytes = out->total_count * es;
	return out->count ? 0 : -EINVAL;
}

double cc_busbw_factor(enum inca_coll coll, int nranks)
{
	double n = nranks;
	switch (coll) {
	case INCA_COLL_ALLREDUCE:
		return 2.0 * (n - 1) / n;
	case INCA_COLL_ALLGATHER:
	case INCA_COLL_REDUCE_SCATTER:
	case INCA_COLL_ALLTOALL:
	case INCA_COLL_GATHER:
	case INCA_COLL_SCATTER:
		return (n - 1) / n;
	case INCA_COLL_REDUCE:
	case INCA_COLL_BCAST:
		return 1.0;
	default:
		return 0.0;
	}
}

double cc_link_factor(enum inca_coll coll, int nranks, bool inc)
{
	if (inc && (coll == INCA_COLL_ALLREDUCE || coll == INCA_COLL_REDUCE_SCATTER))
		return 1.0;
	return cc_busbw_factor(coll, nranks);
}

const char *cc_busbw_text(enum inca_coll coll)
{
	switch (coll) {
	case INCA_COLL_ALLREDUCE:
		return "2(n-1)/n";
	case INCA_COLL_REDUCE:
	case INCA_COLL_BCAST:
		return "1";
	case INCA_COLL_BARRIER:
		return "0 (no data)";
	default:
		return "(n-1)/n";
	}
}

static struct check_spec red_spec(const struct cc_call *c)
{
	struct check_spec s = {
		.dt = c->dt, .op = c->op, .mode = CHECK_EXACT, .nranks = c->nranks,
		.seed = c->seed, .iter = c->iter,
	};
	return s;
}

void cc_fill(const struct cc_call *c, void *sbuf, void *rbuf)
{
	size_t es = inca_dtype_size(c->dt);
	size_t blk = c->L.count * es;
	uint8_t *s = sbuf;
	if (c->L.recv_bytes && rbuf)
		memset(rbuf, 0xA5, c->L.recv_bytes); /* an untouched output cannot pass */
	switch (c->coll) {
	case INCA_COLL_ALLREDUCE:
	case INCA_COLL_REDUCE: {
		struct check_spec sp = red_spec(c);
		check_fill(&sp, c->rank, sbuf, 0, c->L.count);
		break;
	}
	case INCA_COLL_REDUCE_SCATTER: {
		struct check_spec sp = red_spec(c);
		check_fill(&sp, c->rank, sbuf, 0, c->L.total_count);
		break;
	}
	case INCA_COLL_BCAST:
		if (c->rank == c->root)
			check_fill_block(c->seed, c->iter, c->root, -1, rbuf, blk);
		break;
	case INCA_COLL_ALLGATHER:
	case INCA_COLL_GATHER:
		check_fill_block(c->seed, c->iter, c->rank, -1, sbuf, blk);
		break;
	case INCA_COLL_ALLTOALL:
		for (int d = 0; d < c->nranks; d++)
			check_fill_block(c->seed, c->iter, c->rank, d, s + (size_t)d * blk, blk);
		break;
	case INCA_COLL_SCATTER:
		if (c->rank == c->root)
			for (int d = 0; d < c->nranks; d++)
				check_fill_block(c->seed, c->iter, c->root, d, s + (size_t)d * blk,
						 blk);
		break;
	default:
		break;
	}
}

uint64_t cc_verify(const struct cc_call *c, const void *sbuf, const void *rbuf)
{
	size_t es = inca_dtype_size(c->dt);
	size_t blk = c->L.count * es;
	const uint8_t *r = rbuf;
	uint64_t wrong = 0;
	(void)sbuf;
	switch (c->coll) {
	case INCA_COLL_ALLREDUCE: {
		struct check_spec sp = red_spec(c);
		return check_verify(&sp, rbuf, 0, c->L.count, NULL);
	}
	case INCA_COLL_REDUCE: {
		struct check_spec sp = red_spec(c);
		return c->rank == c->root ? check_verify(&sp, rbuf, 0, c->L.count, NULL) : 0;
	}
	case INCA_COLL_REDUCE_SCATTER: {
		struct check_spec sp = red_spec(c);
		return check_verify(&sp, rbuf, (size_t)c->rank * c->L.count, c->L.count, NULL);
	}
	case INCA_COLL_BCAST:
		return check_verify_block(c->seed, c->iter, c->root, -1, rbuf, blk, es);
	case INCA_COLL_ALLGATHER:
		for (int s = 0; s < c->nranks; s++)
			wrong += check_verify_block(c->seed, c->iter, s, -1, r + (size_t)s * blk,
						    blk, es);
		return wrong;
	case INCA_COLL_GATHER:
		if (c->rank != c->root)
			return 0;
		for (int s = 0; s < c->nranks; s++)
			wrong += check_verify_block(c->seed, c->iter, s, -1, r + (size_t)s * blk,
						    blk, es);
		return wrong;
	case INCA_COLL_ALLTOALL:
		for (int s = 0; s < c->nranks; s++)
			wrong += check_verify_block(c->seed, c->iter, s, c->rank,
						    r + (size_t)s * blk, blk, es);
		return wrong;
	case INCA_COLL_SCATTER:
		return check_verify_block(c->seed, c->iter, c->root, c->rank, rbuf, blk, es);
	default:
		return 0;
	}
}

int cc_parse_colls(const char *list, enum inca_coll *out)
{
	char buf[512];
	int n = 0;
	snprintf(buf, sizeof(buf), "%s", list);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "all")) {
			for (int k = 0; k < INCA_COLL_COUNT; k++)
				out[k] = (enum inca_coll)k;
			return INCA_COLL_COUNT;
		}
		int k;
		for (k = 0; k < INCA_COLL_COUNT; k++)
			if (!strcmp(tok, inca_coll_name((enum inca_coll)k)))
				break;
		if (k == INCA_COLL_COUNT) {
			fprintf(stderr, "unknown collective '%s' (allreduce reduce bcast allgather "
					"reducescatter alltoall gather scatter barrier all)\n", tok);
			return -EINVAL;
		}
		bool dup = false;
		for (int i = 0; i < n; i++)
			dup |= out[i] == (enum inca_coll)k;
		if (!dup && n < INCA_COLL_COUNT)
			out[n++] = (enum inca_coll)k;
	}
	return n ? n : -EINVAL;
}

void cc_sched_init(struct cc_sched *s, int warmup, int iters, double budget_s, double now_s)
{
	memset(s, 0, sizeof(*s));
	s->warmup = warmup;
	s->iters = iters < CC_MAX_ITERS ? iters : CC_MAX_ITERS;
	s->budget_s = budget_s;
	s->phase = CC_WARM;
	s->phase_start_s = now_s;
}

int cc_sched_next(struct cc_sched *s, double now_s)
{
	if (s->phase == CC_WARM &&
	    (s->warm >= s->warmup ||
	     (s->budget_s > 0 && s->warm && now_s - s->phase_start_s > s->budget_s / 4))) {
		s->phase = CC_TIMED;
		s->phase_start_s = now_s;
	}
	if (s->phase == CC_TIMED &&
	    (s->iters <= 0 ||
	     (s->timed >= 1 && (s->timed >= s->iters ||
				(s->budget_s > 0 && now_s - s->phase_start_s > s->budget_s)))))
		return CC_STOP;
	return s->phase;
}

void cc_sched_done(struct cc_sched *s)
{
	if (s->phase == CC_WARM)
		s->warm++;
	else
		s->timed++;
}

double cc_latency_mean_s(const uint64_t *t0, const uint64_t *t1, int nranks, size_t stride,
			 int ncalls, double *skew_s)
{
	double sum = 0, skew = 0;
	if (skew_s)
		*skew_s = 0;
	if (ncalls <= 0 || nranks <= 0)
		return 0;
	for (int i = 0; i < ncalls; i++) {
		uint64_t start = UINT64_MAX, last_in = 0, end = 0;
		for (int r = 0; r < nranks; r++) {
			uint64_t in = t0[(size_t)r * stride + (size_t)i];
			uint64_t out = t1[(size_t)r * stride + (size_t)i];
			start = in < start ? in : start;
			last_in = in > last_in ? in : last_in;
			end = out > end ? out : end;
		}
		sum += end > start ? (double)(end - start) * 1e-9 : 0;
		skew += (double)(last_in - start) * 1e-9;
	}
	if (skew_s)
		*skew_s = skew / ncalls;
	return sum / ncalls;
}
