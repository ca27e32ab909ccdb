/* libinca host algorithms with a root: Reduce, Broadcast (binomial tree, pipelined chain),
 * Gather and Scatter (binomial tree, linear). The engine is host_coll.c. */
#include "client/host_coll_int.h"

#include <errno.h>
#include <string.h>

#include "agg/agg.h"

/* ---------------------------------------------------------------- rooted trees */

int hc_reduce_binomial(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t bytes = a->count * h->elem;
	int n = h->n, vr = mod(h->me - a->root, n), lb = low_bit(vr, n), rc;
	bool has_child = 1 < lb && vr + 1 < n;
	const uint8_t *acc;
	uint8_t *wacc = NULL;

	if (vr == 0) {
		wacc = a->recvbuf;
		copy_block(wacc, a->sendbuf, bytes);
	} else if (has_child) {
		if (!(wacc = hc_scratch(h, 0, bytes)))
			return -ENOMEM;
		memcpy(wacc, a->sendbuf, bytes);
	}
	acc = wacc ? wacc : a->sendbuf;
	/* Children one at a time, in a fixed order: reproducible floating-point results. */
	for (int mask = 1; mask < lb && vr + mask < n; mask <<= 1) {
		int child = mod(vr + mask + a->root, n);
		if ((rc = hc_xrecv(h, child, (uint32_t)ilog2((unsigned)mask), wacc, bytes, true)) < 0 ||
		    (rc = hc_batch_run(h)) < 0)
			return rc;
	}
	if (vr == 0)
		return 0;
	if ((rc = hc_xsend(h, mod(vr - lb + a->root, n), (uint32_t)ilog2((unsigned)lb), acc, bytes,
			-1, 0)) < 0)
		return rc;
	return hc_batch_run(h);
}

/* Binomial broadcast, pipelined: every child send is gated on the bytes received from the
 * parent so far, so a large message streams down the tree instead of hopping whole. */
int hc_bcast_binomial(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t bytes = a->count * h->elem;
	int n = h->n, vr = mod(h->me - a->root, n), lb = low_bit(vr, n), gate = -1;

	if (vr != 0) {
		gate = hc_xrecv(h, mod(vr - lb + a->root, n), (uint32_t)ilog2((unsigned)lb), a->recvbuf,
			     bytes, false);
		if (gate < 0)
			return gate;
	}
	for (int mask = lb >> 1; mask >= 1; mask >>= 1) {
		if (vr + mask >= n)
			continue;
		int rc = hc_xsend(h, mod(vr + mask + a->root, n), (uint32_t)ilog2((unsigned)mask),
			       a->recvbuf, bytes, gate, 0);
		if (rc < 0)
			return rc;
	}
	return hc_batch_run(h);
}

/* Chain root -> root+1 -> ... -> root-1, forwarding bytes as they arrive. */
int hc_bcast_chain(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t bytes = a->count * h->elem;
	int n = h->n, vr = mod(h->me - a->root, n), gate = -1, rc;

	if (vr != 0 && (gate = hc_xrecv(h, mod(h->me - 1, n), 0, a->recvbuf, bytes, false)) < 0)
		return gate;
	if (vr != n - 1 && (rc = hc_xsend(h, mod(h->me + 1, n), 0, a->recvbuf, bytes, gate, 0)) < 0)
		return rc;
	return hc_batch_run(h);
}

/* Subtree of virtual rank vr in the binomial tree: vr .. vr + size - 1. */
static int subtree(int vr, int n)
{
	int lb = low_bit(vr, n);
	return vr + lb < n ? lb : n - vr;
}

int hc_gather_binomial(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	int n = h->n, root = a->root, vr = mod(h->me - root, n), sub = subtree(vr, n), rc;
	const uint8_t *own = a->sendbuf;
	uint8_t *tmp;

	if (vr == 0 && a->sendbuf == a->recvbuf)
		own = (const uint8_t *)a->recvbuf + (size_t)root * blk; /* in place */
	if (sub == 1) /* leaf */
		tmp = (uint8_t *)(uintptr_t)own;
	else if (vr == 0 && root == 0)
		tmp = a->recvbuf; /* virtual order is rank order */
	else if (!(tmp = hc_scratch(h, 0, (size_t)sub * blk)))
		return -ENOMEM;
	if (sub > 1)
		copy_block(tmp, own, blk);
	/* All children at once: their ranges are disjoint. */
	for (int mask = 1; mask < sub; mask <<= 1) {
		int cs = subtree(vr + mask, n);
		if ((rc = hc_xrecv(h, mod(vr + mask + root, n), (uint32_t)ilog2((unsigned)mask),
				tmp + (size_t)mask * blk, (size_t)cs * blk, false)) < 0)
			return rc;
	}
	if (vr != 0) {
		int lb = low_bit(vr, n);
		/* Up to the parent as soon as everything below us arrived. */
		if ((rc = hc_batch_run(h)) < 0 ||
		    (rc = hc_xsend(h, mod(vr - lb + root, n), (uint32_t)ilog2((unsigned)lb), tmp,
				(size_t)sub * blk, -1, 0)) < 0)
			return rc;
		return hc_batch_run(h);
	}
	if ((rc = hc_batch_run(h)) < 0)
		return rc;
	if (root != 0) { /* tmp[v] belongs to rank (v + root) % n */
		uint8_t *out = a->recvbuf;
		memcpy(out + (size_t)root * blk, tmp, (size_t)(n - root) * blk);
		memcpy(out, tmp + (size_t)(n - root) * blk, (size_t)root * blk);
	}
	return 0;
}

int hc_scatter_binomial(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	int n = h->n, root = a->root, vr = mod(h->me - root, n), sub = subtree(vr, n), gate = -1, rc;
	uint8_t *tmp;

	if (vr == 0) {
		if (root == 0) {
			tmp = (uint8_t *)(uintptr_t)a->sendbuf;
		} else {
			const uint8_t *in = a->sendbuf;
			if (!(tmp = hc_scratch(h, 0, (size_t)n * blk)))
				return -ENOMEM;
			memcpy(tmp, in + (size_t)root * blk, (size_t)(n - root) * blk);
			memcpy(tmp + (size_t)(n - root) * blk, in, (size_t)root * blk);
		}
	} else if (sub == 1) {
		tmp = a->recvbuf;
	} else if (!(tmp = hc_scratch(h, 0, (size_t)sub * blk))) {
		return -ENOMEM;
	}
	if (vr != 0) {
		int lb = low_bit(vr, n);
		gate = hc_xrecv(h, mod(vr - lb + root, n), (uint32_t)ilog2((unsigned)lb), tmp,
			     (size_t)sub * blk, false);
		if (gate < 0)
			return gate;
	}
	/* Children, largest subtree first, each forwarded as soon as its range arrived. */
	for (int mask = low_bit(vr, n) >> 1; mask >= 1; mask >>= 1) {
		if (vr + mask >= n)
			continue;
		if ((rc = hc_xsend(h, mod(vr + mask + root, n), (uint32_t)ilog2((unsigned)mask),
				tmp + (size_t)mask * blk, (size_t)subtree(vr + mask, n) * blk, gate,
				(size_t)mask * blk)) < 0)
			return rc;
	}
	if ((rc = hc_batch_run(h)) < 0)
		return rc;
	copy_block(a->recvbuf, tmp, blk);
	return 0;
}

int hc_gather_linear(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	int rc;

	if (h->me != a->root) {
		if ((rc = hc_xsend(h, a->root, 0, a->sendbuf, blk, -1, 0)) < 0)
			return rc;
		return hc_batch_run(h);
	}
	uint8_t *out = a->recvbuf;
	if (a->sendbuf != a->recvbuf)
		copy_block(out + (size_t)h->me * blk, a->sendbuf, blk);
	for (int i = 1; i < h->n; i++) {
		int r = mod(h->me + i, h->n);
		if ((rc = hc_xrecv(h, r, 0, out + (size_t)r * blk, blk, false)) < 0)
			return rc;
	}
	return hc_batch_run(h);
}

int hc_scatter_linear(struct hc *h)
{
	const struct inca_coll_args *a = h->a;
	size_t blk = a->count * h->elem;
	int rc;

	if (h->me != a->root) {
		if ((rc = hc_xrecv(h, a->root, 0, a->recvbuf, blk, false)) < 0)
			return rc;
		return hc_batch_run(h);
	}
	const uint8_t *in = a->sendbuf;
	for (int i = 1; i < h->n; i++) {
		int r = mod(h->me + i, h->n);
		if ((rc = hc_xsend(h, r, 0, in + (size_t)r * blk, blk, -1, 0)) < 0)
			return rc;
	}
	copy_block(a->recvbuf, in + (size_t)h->me * blk, blk);
	return hc_batch_run(h);
}
