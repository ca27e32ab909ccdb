/* libinca host algorithms that exchange blocks among all ranks: AllGather (ring, recursive
 * doubling, Bruck), AllToAll (pairwise, Bruck) and Barrier (dissemination, binomial). The
 * engine is host_coll.c. */
#include "client/host_coll_int.h"

#include <errno.h>
#include <string.h>

#include "agg/agg.h"

/* ---------------------------------------------------------------- AllGather */

static int allgather_own(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;

	if (a->sendbuf != a->recvbuf)
		copy_block((uint8_t *)a->recvbuf + (size_t)h->me * blk, a->sendbuf, blk);
	return 0;
}

/* One pipelined batch: the block received from the left in step k is the one sent right in
 * step k+1, forwarded byte by byte as it arrives. */
int hc_allgather_ring(struct hc *h)
{
	size_t blk = h->a->count * h->elem;
	uint8_t *out = h->a->recvbuf;
	int n = h->n, me = h->me, right = mod(me + 1, n), left = mod(me - 1, n), prev = -1;

	allgather_own(h);
	for (int k = 0; k < n - 1; k++) {
		int sb = mod(me - k, n), rb = mod(me - k - 1, n), rc;
		if ((rc = hc_xsend(h, right, (uint32_t)k, out + (size_t)sb * blk, blk, prev, 0)) < 0)
			return rc;
		if ((prev = hc_xrecv(h, left, (uint32_t)k, out + (size_t)rb * blk, blk, false)) < 0)
			return prev;
	}
	return hc_batch_run(h);
}

/* Recursive doubling; non-powers of two fold like AllReduce: new rank j owns the contiguous
 * blocks [start(j), start(j+1)) with start(j) = 2j below r, j + r above. */
int hc_allgather_recdbl(struct hc *h)
{
	size_t blk = h->a->count * h->elem;
	uint8_t *out = h->a->recvbuf;
	int n = h->n, me = h->me, rc, step = 1;
	struct fold f = hc_fold_of(n, me);
#define FSTART(j) ((size_t)((j) < f.r ? 2 * (j) : (j) + f.r) * blk)

	allgather_own(h);
	if (me < 2 * f.r) {
		if (f.newrank < 0) {
			if ((rc = hc_xsend(h, me + 1, 0, out + (size_t)me * blk, blk, -1, 0)) < 0 ||
			    (rc = hc_xrecv(h, me + 1, HC_TAG_FINAL, out, (size_t)n * blk, false)) < 0)
				return rc;
			return hc_batch_run(h);
		}
		if ((rc = hc_xrecv(h, me - 1, 0, out + (size_t)(me - 1) * blk, blk, false)) < 0 ||
		    (rc = hc_batch_run(h)) < 0)
			return rc;
	}
	for (int mask = 1; mask < f.p; mask <<= 1, step++) {
		int pnew = f.newrank ^ mask, peer = hc_fold_rank(&f, pnew);
		int mlo = f.newrank / mask * mask, plo = pnew / mask * mask;

		if ((rc = hc_xsend(h, peer, (uint32_t)step, out + FSTART(mlo),
				FSTART(mlo + mask) - FSTART(mlo), -1, 0)) < 0 ||
		    (rc = hc_xrecv(h, peer, (uint32_t)step, out + FSTART(plo),
				FSTART(plo + mask) - FSTART(plo), false)) < 0 ||
		    (rc = hc_batch_run(h)) < 0)
			return rc;
	}
#undef FSTART
	return hc_fold_out(h, &f, out, (size_t)n * blk);
}

/* Bruck: ceil(log2 n) steps for any n; step k sends the first min(k, n-k) blocks we hold to
 * rank - k. Block i of tmp is rank me + i's; one rotation at the end. */
int hc_allgather_bruck(struct hc *h)
{
	size_t blk = h->a->count * h->elem;
	uint8_t *out = h->a->recvbuf, *tmp;
	int n = h->n, me = h->me, rc, step = 0;

	if (!(tmp = hc_scratch(h, 0, (size_t)n * blk)))
		return -ENOMEM;
	memcpy(tmp, h->a->sendbuf == h->a->recvbuf ? out + (size_t)me * blk : h->a->sendbuf, blk);
	for (int k = 1; k < n; k <<= 1, step++) {
		size_t cnt = (size_t)(k < n - k ? k : n - k);
		if ((rc = hc_xsend(h, mod(me - k, n), (uint32_t)step, tmp, cnt * blk, -1, 0)) < 0 ||
		    (rc = hc_xrecv(h, mod(me + k, n), (uint32_t)step, tmp + (size_t)k * blk, cnt * blk,
				false)) < 0 ||
		    (rc = hc_batch_run(h)) < 0)
			return rc;
	}
	memcpy(out + (size_t)me * blk, tmp, (size_t)(n - me) * blk);
	memcpy(out, tmp + (size_t)(n - me) * blk, (size_t)me * blk);
	return 0;
}

/* ---------------------------------------------------------------- AllToAll */

int hc_alltoall_pairwise(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	const uint8_t *in = a->sendbuf;
	uint8_t *out = a->recvbuf;
	int n = h->n, me = h->me, rc;

	copy_block(out + (size_t)me * blk, in + (size_t)me * blk, blk);
	for (int k = 1; k < n; k++) {
		int to = mod(me + k, n), from = mod(me - k, n);
		if ((rc = hc_xsend(h, to, (uint32_t)k, in + (size_t)to * blk, blk, -1, 0)) < 0 ||
		    (rc = hc_xrecv(h, from, (uint32_t)k, out + (size_t)from * blk, blk, false)) < 0 ||
		    (rc = hc_batch_run(h)) < 0)
			return rc;
	}
	return 0;
}

/* Bruck: rotate so block i goes to rank me + i; in the step for bit k every block whose index
 * has bit k moves k ranks on (packed into one message); unrotate at the end. log2 n messages
 * instead of n - 1, at the price of ~(n/2) log2 n blocks sent instead of n - 1. */
int hc_alltoall_bruck(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem, half = (size_t)(h->n / 2 + 1) * blk;
	const uint8_t *in = a->sendbuf;
	uint8_t *out = a->recvbuf, *tmp, *sp, *rp;
	int n = h->n, me = h->me, rc, step = 0;

	if (!(tmp = hc_scratch(h, 0, (size_t)n * blk)) || !(sp = hc_scratch(h, 1, half)) ||
	    !(rp = hc_scratch(h, 2, half)))
		return -ENOMEM;
	memcpy(tmp, in + (size_t)me * blk, (size_t)(n - me) * blk);
	memcpy(tmp + (size_t)(n - me) * blk, in, (size_t)me * blk);
	for (int k = 1; k < n; k <<= 1, step++) {
		size_t cnt = 0;
		for (int i = 0; i < n; i++)
			if (i & k)
				memcpy(sp + cnt++ * blk, tmp + (size_t)i * blk, blk);
		if ((rc = hc_xsend(h, mod(me + k, n), (uint32_t)step, sp, cnt * blk, -1, 0)) < 0 ||
		    (rc = hc_xrecv(h, mod(me - k, n), (uint32_t)step, rp, cnt * blk, false)) < 0 ||
		    (rc = hc_batch_run(h)) < 0)
			return rc;
		cnt = 0;
		for (int i = 0; i < n; i++)
			if (i & k)
				memcpy(tmp + (size_t)i * blk, rp + cnt++ * blk, blk);
	}
	/* At rank me, tmp[i] came from rank me - i. */
	for (int i = 0; i < n; i++)
		memcpy(out + (size_t)mod(me - i, n) * blk, tmp + (size_t)i * blk, blk);
	return 0;
}

/* ---------------------------------------------------------------- Barrier */

/* Dissemination: in round k everyone signals rank + 2^k and waits for rank - 2^k; after
 * ceil(log2 n) rounds every rank has heard, transitively, from all. */
int hc_barrier_dissemination(struct hc *h)
{
	int n = h->n, me = h->me, rc, step = 0;

	for (int k = 1; k < n; k <<= 1, step++) {
		if ((rc = hc_xsend(h, mod(me + k, n), (uint32_t)step, NULL, 0, -1, 0)) < 0 ||
		    (rc = hc_xrecv(h, mod(me - k, n), (uint32_t)step, NULL, 0, false)) < 0 ||
		    (rc = hc_batch_run(h)) < 0)
			return rc;
	}
	return 0;
}

/* Fan-in to rank 0 over the binomial tree, then fan-out. */
int hc_barrier_binomial(struct hc *h)
{
	int n = h->n, vr = h->me, lb = low_bit(vr, n), rc;

	for (int mask = 1; mask < lb && vr + mask < n; mask <<= 1)
		if ((rc = hc_xrecv(h, vr + mask, (uint32_t)ilog2((unsigned)mask), NULL, 0, false)) < 0)
			return rc;
	if ((rc = hc_batch_run(h)) < 0)
		return rc;
	if (vr != 0) {
		uint32_t t = (uint32_t)ilog2((unsigned)lb);
		if ((rc = hc_xsend(h, vr - lb, t, NULL, 0, -1, 0)) < 0 ||
		    (rc = hc_xrecv(h, vr - lb, 0x100 | t, NULL, 0, false)) < 0 ||
		    (rc = hc_batch_run(h)) < 0)
			return rc;
	}
	for (int mask = lb >> 1; mask >= 1; mask >>= 1)
		if (vr + mask < n &&
		    (rc = hc_xsend(h, vr + mask, 0x100 | (uint32_t)ilog2((unsigned)mask), NULL, 0, -1, 0)) < 0)
			return rc;
	return hc_batch_run(h);
}
