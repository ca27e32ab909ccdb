/* libinca host algorithms that reduce across all ranks: AllReduce by recursive doubling and by
 * Rabenseifner (both with the folding of non-power-of-two groups) and ReduceScatter by ring and
 * pairwise exchange. The ring AllReduce is ring.c; the engine is host_coll.c. */
#include "client/host_coll_int.h"

#include <errno.h>
#include <string.h>

#include "agg/agg.h"

/* ---------------------------------------------------------------- AllReduce */

struct fold hc_fold_of(int n, int me)
{
	struct fold f = { .p = pow2_floor(n) };

	f.r = n - f.p;
	if (me < 2 * f.r)
		f.newrank = (me & 1) ? me / 2 : -1;
	else
		f.newrank = me - f.r;
	return f;
}

int hc_fold_rank(const struct fold *f, int newrank)
{
	return newrank < f->r ? newrank * 2 + 1 : newrank + f->r;
}

static int fold_in(struct hc *h, const struct fold *f, uint8_t *buf, size_t bytes)
{
	int rc;

	if (h->me >= 2 * f->r)
		return 0;
	if (f->newrank < 0) {
		/* Sit out: our vector goes up, the result comes back on the same stream pair. */
		if ((rc = hc_xsend(h, h->me + 1, 0, buf, bytes, -1, 0)) < 0 ||
		    (rc = hc_xrecv(h, h->me + 1, HC_TAG_FINAL, buf, bytes, false)) < 0)
			return rc;
		return hc_batch_run(h);
	}
	if ((rc = hc_xrecv(h, h->me - 1, 0, buf, bytes, true)) < 0)
		return rc;
	return hc_batch_run(h);
}

int hc_fold_out(struct hc *h, const struct fold *f, const uint8_t *buf, size_t bytes)
{
	int rc;

	if (h->me >= 2 * f->r || f->newrank < 0)
		return 0;
	if ((rc = hc_xsend(h, h->me - 1, HC_TAG_FINAL, buf, bytes, -1, 0)) < 0)
		return rc;
	return hc_batch_run(h);
}

int hc_allreduce_recdbl(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t bytes = a->count * h->elem;
	uint8_t *buf = a->recvbuf, *tmp;
	struct fold f = hc_fold_of(h->n, h->me);
	int rc, step = 1;

	copy_block(buf, a->sendbuf, bytes);
	if ((rc = fold_in(h, &f, buf, bytes)) < 0 || f.newrank < 0)
		return rc;
	if (!(tmp = hc_scratch(h, 0, bytes)))
		return -ENOMEM;
	for (int mask = 1; mask < f.p; mask <<= 1, step++) {
		int peer = hc_fold_rank(&f, f.newrank ^ mask);
		/* Both partners compute a OP b from the same two vectors: the kernels are
		 * commutative, so every rank ends with bit-identical results. */
		if ((rc = hc_xsend(h, peer, (uint32_t)step, buf, bytes, -1, 0)) < 0 ||
		    (rc = hc_xrecv(h, peer, (uint32_t)step, tmp, bytes, false)) < 0 ||
		    (rc = hc_batch_run(h)) < 0)
			return rc;
		if ((rc = agg_reduce(buf, tmp, a->count, a->dt, a->op)) < 0)
			return rc;
	}
	return hc_fold_out(h, &f, buf, bytes);
}

int hc_allreduce_rabenseifner(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t bytes = a->count * h->elem, e = h->elem;
	uint8_t *buf = a->recvbuf;
	struct fold f = hc_fold_of(h->n, h->me);
	int rc, step = 1, lo = 0, hi;

	copy_block(buf, a->sendbuf, bytes);
	if ((rc = fold_in(h, &f, buf, bytes)) < 0 || f.newrank < 0)
		return rc;
	hi = f.p;
	/* Reduce-scatter by recursive halving: keep the half of the window our bit selects,
	 * send the other half; we end holding block newrank fully reduced. */
	for (int mask = f.p / 2; mask >= 1; mask >>= 1, step++) {
		int peer = hc_fold_rank(&f, f.newrank ^ mask), mid = lo + mask;
		int klo = (f.newrank & mask) ? mid : lo, khi = (f.newrank & mask) ? hi : mid;
		int slo = (f.newrank & mask) ? lo : mid, shi = (f.newrank & mask) ? mid : hi;
		size_t ks = blk_start(a->count, f.p, klo), ke = blk_start(a->count, f.p, khi);
		size_t ss = blk_start(a->count, f.p, slo), se = blk_start(a->count, f.p, shi);

		if ((rc = hc_xsend(h, peer, (uint32_t)step, buf + ss * e, (se - ss) * e, -1, 0)) < 0 ||
		    (rc = hc_xrecv(h, peer, (uint32_t)step, buf + ks * e, (ke - ks) * e, true)) < 0 ||
		    (rc = hc_batch_run(h)) < 0)
			return rc;
		lo = klo;
		hi = khi;
	}
	/* Allgather by recursive doubling: windows double back up. */
	for (int mask = 1; mask < f.p; mask <<= 1, step++) {
		int pnew = f.newrank ^ mask, peer = hc_fold_rank(&f, pnew);
		int mlo = f.newrank / mask * mask, plo = pnew / mask * mask;
		size_t ms = blk_start(a->count, f.p, mlo), me_ = blk_start(a->count, f.p, mlo + mask);
		size_t ps = blk_start(a->count, f.p, plo), pe = blk_start(a->count, f.p, plo + mask);

		if ((rc = hc_xsend(h, peer, (uint32_t)step, buf + ms * e, (me_ - ms) * e, -1, 0)) < 0 ||
		    (rc = hc_xrecv(h, peer, (uint32_t)step, buf + ps * e, (pe - ps) * e, false)) < 0 ||
		    (rc = hc_batch_run(h)) < 0)
			return rc;
	}
	return hc_fold_out(h, &f, buf, bytes);
}

/* ---------------------------------------------------------------- ReduceScatter */

/* Ring: step k sends our partial of block me-k-1 right and reduces block me-k-2 from the left
 * into ours; the send of step k+1 is exactly what step k reduced, forwarded as it is reduced. */
int hc_reduce_scatter_ring(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	int n = h->n, me = h->me, prev = -1, rc;
	uint8_t *w;

	if (!(w = hc_scratch(h, 0, (size_t)n * blk)))
		return -ENOMEM;
	memcpy(w, a->sendbuf, (size_t)n * blk);
	for (int k = 0; k < n - 1; k++) {
		int sb = mod(me - k - 1, n), rb = mod(me - k - 2, n);
		if ((rc = hc_xsend(h, mod(me + 1, n), (uint32_t)k, w + (size_t)sb * blk, blk, prev, 0)) < 0)
			return rc;
		if ((prev = hc_xrecv(h, mod(me - 1, n), (uint32_t)k, w + (size_t)rb * blk, blk, true)) < 0)
			return prev;
	}
	if ((rc = hc_batch_run(h)) < 0)
		return rc;
	memcpy(a->recvbuf, w + (size_t)me * blk, blk);
	return 0;
}

/* Pairwise: step k sends block me+k to rank me+k and reduces rank me-k's copy of our block. */
int hc_reduce_scatter_pairwise(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	const uint8_t *in = a->sendbuf;
	int n = h->n, me = h->me, rc;

	copy_block(a->recvbuf, in + (size_t)me * blk, blk);
	for (int k = 1; k < n; k++) {
		int to = mod(me + k, n);
		if ((rc = hc_xsend(h, to, (uint32_t)k, in + (size_t)to * blk, blk, -1, 0)) < 0 ||
		    (rc = hc_xrecv(h, mod(me - k, n), (uint32_t)k, a->recvbuf, blk, true)) < 0 ||
		    (rc = hc_batch_run(h)) < 0)
			return rc;
	}
	return 0;
}
