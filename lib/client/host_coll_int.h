/* Private to the host algorithms (host_coll*.c): the transfer engine's types and calls, the
 * index helpers every algorithm uses, and the algorithms host_coll.c dispatches to. The rest of
 * libinca sees client_host_coll and friends in client.h only. */
#ifndef INCA_CLIENT_HOST_COLL_INT_H
#define INCA_CLIENT_HOST_COLL_INT_H

#include "client/client.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HC_MAGIC 0x494e4348u /* "INCH" */
#define HC_HDR_LEN 48
/* Reduce-on-receive reads through this buffer and reduces at once, so one buffer serves every
 * concurrent receive (only a partial element, < 16 bytes, is carried per transfer). */
#define HC_STAGE_BYTES (256u << 10)
#define HC_TAG_FINAL 0xfffeu /* result back to a rank folded out of a power-of-two group */

/* ---------------------------------------------------------------- transfer engine */

/* One framed message to or from one peer: a 48-byte header then len payload bytes. Transfers
 * on the same (peer, direction) run in the order they were added (one TCP stream each). */
struct xop {
	int peer;
	bool is_send, reduce;
	int gate;          /* send only: recv op whose finished bytes bound ours, -1: none */
	size_t gate_off;   /* ... starting at this payload offset of the gate op */
	int prev;          /* previous op on the same (peer, direction) stream, -1: none */
	uint8_t *buf;      /* payload (send: read only) */
	size_t len;
	size_t off;        /* stream bytes moved, header included */
	size_t done;       /* payload bytes final (recv: received, or reduced when reduce) */
	uint8_t hdr[HC_HDR_LEN]; /* send: header to send; recv: the header we expect */
	uint8_t got[HC_HDR_LEN];
	uint8_t carry[16]; /* recv+reduce: bytes of a partial element */
	size_t ncarry;
};

/* One call of client_host_coll. */
struct hc {
	struct inca_comm *c;
	const struct inca_coll_args *a;
	enum inca_algo algo;
	int n, me;
	size_t elem;
	struct xop *ops;
	int nops, cap;
	int *tail_send, *tail_recv; /* per peer: last op index in this batch, -1 */
};

static inline void copy_block(void *dst, const void *src, size_t bytes)
{
	if (dst != src && bytes)
		memmove(dst, src, bytes);
}

static inline int mod(int a, int n)
{
	return ((a % n) + n) % n;
}

static inline int ilog2(unsigned v)
{
	int l = 0;
	while (v >>= 1)
		l++;
	return l;
}

static inline int pow2_floor(int n)
{
	int p = 1;
	while (p * 2 <= n)
		p *= 2;
	return p;
}

/* Lowest set bit of vr; for the tree root (vr 0) the first power of two >= n. */
static inline int low_bit(int vr, int n)
{
	int m = 1;
	if (vr == 0) {
		while (m < n)
			m <<= 1;
		return m;
	}
	return vr & -vr;
}

/* Elements of block i when count is split into parts blocks (the first count % parts get one
 * more): start offset in elements. */
static inline size_t blk_start(size_t count, int parts, int i)
{
	size_t q = count / (size_t)parts, r = count % (size_t)parts;
	return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}

/* Non-power-of-two groups (the usual folding): with p = 2^floor(log2 n) and r = n - p, each
 * even rank below 2r hands its vector to the odd rank above it and sits out; the p remaining
 * ranks run the power-of-two algorithm under new ranks 0..p-1; the odd ranks hand the result
 * back at the end. */
struct fold {
	int p, r, newrank; /* newrank -1: sits out */
};

/* host_coll.c */
int hc_batch_run(struct hc *h);
void *hc_scratch(struct hc *h, int slot, size_t bytes);
int hc_xrecv(struct hc *h, int peer, uint32_t tag, void *buf, size_t len, bool reduce);
int hc_xsend(struct hc *h, int peer, uint32_t tag, const void *buf, size_t len, int gate,
		 size_t gate_off);

/* host_coll_exchange.c */
int hc_allgather_bruck(struct hc *h);
int hc_allgather_recdbl(struct hc *h);
int hc_allgather_ring(struct hc *h);
int hc_alltoall_bruck(struct hc *h);
int hc_alltoall_pairwise(struct hc *h);
int hc_barrier_binomial(struct hc *h);
int hc_barrier_dissemination(struct hc *h);

/* host_coll_reduce.c */
int hc_allreduce_rabenseifner(struct hc *h);
int hc_allreduce_recdbl(struct hc *h);
struct fold hc_fold_of(int n, int me);
int hc_fold_out(struct hc *h, const struct fold *f, const uint8_t *buf, size_t bytes);
int hc_fold_rank(const struct fold *f, int newrank);
int hc_reduce_scatter_pairwise(struct hc *h);
int hc_reduce_scatter_ring(struct hc *h);

/* host_coll_rooted.c */
int hc_bcast_binomial(struct hc *h);
int hc_bcast_chain(struct hc *h);
int hc_gather_binomial(struct hc *h);
int hc_gather_linear(struct hc *h);
int hc_reduce_binomial(struct hc *h);
int hc_scatter_binomial(struct hc *h);
int hc_scatter_linear(struct hc *h);

#endif
