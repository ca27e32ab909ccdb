/* sim/sim_event.c: the event queue. A 4-ary indexed min-heap ordered by (time, sequence), and
 * the simulator's queue built from two of them and a timing wheel (struct sim_evq).
 * Layout is what makes a discrete-event simulator fast: keys are 128-bit integers
 * (time << 64 | sequence << 1 | cancellable) in their own array, aligned so the four children
 * of a node share one 64-byte cache line and the minimum of four is found without branches;
 * event pointers live in a parallel array. Cancel is O(log n) via heap_idx, for events
 * scheduled as cancellable. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

typedef unsigned __int128 hkey;

#define KEY_T(k) ((sim_time_ps)((k) >> 64))
#define KEY_TRACKED(k) ((uint64_t)(k) & 1u)

/* key[0] sits 3 slots into a 64-byte aligned block, so children 4i+1..4i+4 are aligned. */
static int heap_alloc(struct sim_heap *h, uint32_t cap)
{
	void *kb = NULL;
	if (posix_memalign(&kb, 64, sizeof(hkey) * ((size_t)cap + 4)))
		return -ENOMEM;
	struct sim_event **ev = malloc(sizeof(*ev) * cap);
	if (!ev) {
		free(kb);
		return -ENOMEM;
	}
	if (h->kbase) {
		memcpy((hkey *)kb + 3, h->key, sizeof(hkey) * h->n);
		memcpy(ev, h->ev, sizeof(*ev) * h->n);
		free(h->kbase);
		free(h->ev);
	}
	h->kbase = kb;
	h->key = (hkey *)kb + 3;
	h->ev = ev;
	h->cap = cap;
	return 0;
}

int sim_heap_init(struct sim_heap *h, uint32_t cap)
{
	memset(h, 0, sizeof(*h));
	return heap_alloc(h, cap < 64 ? 64 : cap);
}

void sim_heap_free(struct sim_heap *h)
{
	free(h->kbase);
	free(h->ev);
	memset(h, 0, sizeof(*h));
}

sim_time_ps sim_heap_top_time(struct sim_heap *h)
{
	return h->n ? KEY_T(h->key[0]) : SIM_TIME_NEVER;
}

static inline void place(struct sim_heap *h, uint32_t i, hkey k, struct sim_event *ev)
{
	h->key[i] = k;
	h->ev[i] = ev;
	if (KEY_TRACKED(k))
		ev->heap_idx = i;
}

static void sift_up(struct sim_heap *h, uint32_t i, hkey k, struct sim_event *ev)
{
	hkey *key = h->key;
	while (i > 0) {
		uint32_t parent = (i - 1) >> 2;
		if (k >= key[parent])
			break;
		place(h, i, key[parent], h->ev[parent]);
		i = parent;
	}
	place(h, i, k, ev);
}

static void sift_down(struct sim_heap *h, uint32_t i, hkey k, struct sim_event *ev)
{
	hkey *key = h->key;
	uint32_t n = h->n;
	for (;;) {
		uint32_t c = (i << 2) + 1, best;
		if (c + 3 < n) {
			uint32_t a = key[c + 1] < key[c] ? c + 1 : c;
			uint32_t b = key[c + 3] < key[c + 2] ? c + 3 : c + 2;
			best = key[b] < key[a] ? b : a;
		} else if (c < n) {
			best = c;
			for (uint32_t j = c + 1; j < n; j++)
				if (key[j] < key[best])
					best = j;
		} else {
			break;
		}
		if (key[best] >= k)
			break;
		place(h, i, key[best], h->ev[best]);
		i = best;
	}
	place(h, i, k, ev);
}

int sim_heap_push(struct sim_heap *h, struct sim_event *ev, sim_time_ps t, bool cancellable)
{
	if (h->n == h->cap && heap_alloc(h, h->cap * 2))
		return -ENOMEM;
	ev->t = t;
	/* Packets on a wire are never cancelled: not writing heap_idx into them on every sift
	 * step keeps sifting inside the heap arrays. */
	if (!cancellable)
		ev->heap_idx = SIM_EV_IDLE;
	hkey k = ((hkey)t << 64) | (hkey)((h->seq++ << 1) | (cancellable ? 1u : 0u));
	sift_up(h, h->n++, k, ev);
	return 0;
}

void sim_heap_remove(struct sim_heap *h, struct sim_event *ev)
{
	uint32_t i = ev->heap_idx;
	if (i == SIM_EV_IDLE)
		return;
	ev->heap_idx = SIM_EV_IDLE;
	h->n--;
	if (i == h->n)
		return;
	hkey last = h->key[h->n];
	struct sim_event *lev = h->ev[h->n];
	if (i > 0 && last < h->key[(i - 1) >> 2])
		sift_up(h, i, last, lev);
	else
		sift_down(h, i, last, lev);
}

struct sim_event *sim_heap_pop(struct sim_heap *h)
{
	if (h->n == 0)
		return NULL;
	struct sim_event *ev = h->ev[0];
	if (KEY_TRACKED(h->key[0]))
		ev->heap_idx = SIM_EV_IDLE;
	h->n--;
	if (h->n > 0)
		sift_down(h, 0, h->key[h->n], h->ev[h->n]);
	return ev;
}

/* ---- the simulator's queue: timing wheel + two heaps ------------------------------------
 * Invariants: every event in a bucket has a window w (time >> SIM_EVQ_SHIFT) with
 * cur_w < w < cur_w + SIM_EVQ_NB, so bucket w & (NB - 1) holds one window only; the current
 * window's events are in run[run_i .. run_n) (sorted) and, if pushed after the window became
 * current, in the heap cur; far holds cancellable events and those beyond the horizon. The
 * earliest event is the smallest of run's head, cur's top and far's top; when run and cur are
 * empty the next bucket with events becomes current, unless far's top comes first.
 * Sequence numbers grow with every push and a bucket is only ever appended to, so a bucket's
 * events are in sequence order: a stable sort on the time within the window (two counting
 * passes of 6 bits) orders them by (time, sequence) exactly. Buckets are lists of fixed-size
 * blocks from one pool, so memory follows the events pending. */
#define EVQ_BLK 21  /* entries per block: 21 * 24 + 8 = 512 bytes */
#define EVQ_DIGIT 6 /* radix digit: SIM_EVQ_SHIFT = 2 digits */
#define EVQ_SMALL 48 /* insertion sort below this */
_Static_assert(SIM_EVQ_SHIFT == 2 * EVQ_DIGIT, "the window sort takes two digits");

struct sim_evq_blk {
	uint32_t next, n;
	struct sim_evq_ent e[EVQ_BLK];
};

static inline hkey evq_key(sim_time_ps t, uint64_t seq, bool tracked)
{
	return ((hkey)t << 64) | (hkey)((seq << 1) | (tracked ? 1u : 0u));
}

/* Inserts a key without writing into an untracked event (it may be far out of the caches). */
static int heap_insert(struct sim_heap *h, struct sim_event *ev, hkey k)
{
	if (h->n == h->cap && heap_alloc(h, h->cap * 2))
		return -ENOMEM;
	sift_up(h, h->n++, k, ev);
	return 0;
}

int sim_evq_init(struct sim_evq *q)
{
	memset(q, 0, sizeof(*q));
	q->head = calloc(SIM_EVQ_NB, sizeof(*q->head));
	q->tail = calloc(SIM_EVQ_NB, sizeof(*q->tail));
	q->bits = calloc(SIM_EVQ_NB / 64, sizeof(*q->bits));
	q->capblk = 64;
	q->blk = malloc(sizeof(*q->blk) * q->capblk);
	q->nblk = 1; /* block 0 means "none" */
	q->run_cap = 256;
	q->run = malloc(sizeof(*q->run) * q->run_cap);
	q->tmp = malloc(sizeof(*q->tmp) * q->run_cap);
	if (!q->head || !q->tail || !q->bits || !q->blk || !q->run || !q->tmp ||
	    sim_heap_init(&q->cur, 64) || sim_heap_init(&q->far, 4096)) {
		sim_evq_free(q);
		return -ENOMEM;
	}
	return 0;
}

void sim_evq_free(struct sim_evq *q)
{
	sim_heap_free(&q->cur);
	sim_heap_free(&q->far);
	free(q->blk);
	free(q->head);
	free(q->tail);
	free(q->bits);
	free(q->run);
	free(q->tmp);
	memset(q, 0, sizeof(*q));
}

static uint32_t blk_get(struct sim_evq *q)
{
	uint32_t b = q->free_blk;
	if (b) {
		q->free_blk = q->blk[b].next;
	} else {
		if (q->nblk == q->capblk) {
			if (q->capblk > UINT32_MAX / 2)
				return 0;
			struct sim_evq_blk *v = realloc(q->blk, sizeof(*v) * q->capblk * 2);
			if (!v)
				return 0;
			q->blk = v;
			q->capblk *= 2;
		}
		b = q->nblk++;
	}
	q->blk[b].next = 0;
	q->blk[b].n = 0;
	return b;
}

int sim_evq_push(struct sim_evq *q, struct sim_event *ev, sim_time_ps t, bool cancellable)
{
	uint64_t seq = q->seq++, w = t >> SIM_EVQ_SHIFT;
	int rc;
	ev->t = t;
	if (cancellable) {
		rc = heap_insert(&q->far, ev, evq_key(t, seq, true));
	} else {
		ev->heap_idx = SIM_EV_IDLE;
		if (w <= q->cur_w) {
			rc = heap_insert(&q->cur, ev, evq_key(t, seq, false));
		} else if (w - q->cur_w >= SIM_EVQ_NB) {
			rc = heap_insert(&q->far, ev, evq_key(t, seq, false));
		} else {
			uint32_t i = (uint32_t)(w & (SIM_EVQ_NB - 1)), b = q->tail[i];
			rc = 0;
			if (!b || q->blk[b].n == EVQ_BLK) {
				uint32_t nb = blk_get(q);
				if (!nb)
					return -ENOMEM;
				if (b)
					q->blk[b].next = nb;
				else
					q->head[i] = nb;
				q->tail[i] = b = nb;
				q->bits[i >> 6] |= 1ull << (i & 63);
			}
			struct sim_evq_blk *bk = &q->blk[b];
			bk->e[bk->n++] = (struct sim_evq_ent){ t, seq, ev };
			q->wheel_n++;
		}
	}
	if (!rc)
		q->n++;
	return rc;
}

void sim_evq_remove(struct sim_evq *q, struct sim_event *ev)
{
	if (ev->heap_idx == SIM_EV_IDLE)
		return; /* not queued (only cancellable events are tracked, all of them in far) */
	sim_heap_remove(&q->far, ev);
	q->n--;
}

static inline bool ent_before(const struct sim_evq_ent *a, const struct sim_evq_ent *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

/* Sorts the m entries of tmp (in sequence order) into run by time, stably. */
static void window_sort(struct sim_evq *q, uint32_t m)
{
	struct sim_evq_ent *in = q->tmp, *out = q->run;
	if (m < EVQ_SMALL) {
		for (uint32_t i = 0; i < m; i++) {
			struct sim_evq_ent e = in[i];
			uint32_t j = i;
			for (; j > 0 && ent_before(&e, &out[j - 1]); j--)
				out[j] = out[j - 1];
			out[j] = e;
		}
		return;
	}
	const uint32_t R = 1u << EVQ_DIGIT, mask = R - 1;
	uint32_t c0[1u << EVQ_DIGIT] = { 0 }, c1[1u << EVQ_DIGIT] = { 0 };
	for (uint32_t i = 0; i < m; i++) {
		c0[in[i].t & mask]++;
		c1[(in[i].t >> EVQ_DIGIT) & mask]++;
	}
	for (uint32_t d = 0, a0 = 0, a1 = 0; d < R; d++) {
		uint32_t x0 = c0[d], x1 = c1[d];
		c0[d] = a0;
		c1[d] = a1;
		a0 += x0;
		a1 += x1;
	}
	for (uint32_t i = 0; i < m; i++) /* low digit: tmp -> run */
		out[c0[in[i].t & mask]++] = in[i];
	for (uint32_t i = 0; i < m; i++) /* high digit: run -> tmp */
		in[c1[(out[i].t >> EVQ_DIGIT) & mask]++] = out[i];
	memcpy(out, in, sizeof(*out) * m);
}

/* run and cur are exhausted: the next bucket holding events becomes the current window,
 * unless far's top comes before it. Returns -ENOMEM if the window cannot be held. */
static int evq_advance(struct sim_evq *q)
{
	if (!q->wheel_n)
		return 0;
	uint32_t i = (uint32_t)((q->cur_w + 1) & (SIM_EVQ_NB - 1));
	uint64_t dist = 0;
	for (;;) { /* next set bit at or after i, cyclically */
		uint64_t word = q->bits[i >> 6] & (~0ull << (i & 63));
		if (word) {
			dist += (i & ~63u) + (uint32_t)__builtin_ctzll(word) - i;
			break;
		}
		uint32_t next = ((i >> 6) + 1) * 64;
		dist += next - i;
		i = next & (SIM_EVQ_NB - 1);
	}
	uint64_t w = q->cur_w + 1 + dist;
	if (q->far.n && KEY_T(q->far.key[0]) < (w << SIM_EVQ_SHIFT))
		return 0;
	uint32_t bi = (uint32_t)(w & (SIM_EVQ_NB - 1)), m = 0;
	for (uint32_t b = q->head[bi]; b; b = q->blk[b].next)
		m += q->blk[b].n;
	if (m > q->run_cap) {
		uint32_t cap = q->run_cap;
		while (cap < m)
			cap *= 2;
		struct sim_evq_ent *r = realloc(q->run, sizeof(*r) * cap);
		if (!r)
			return -ENOMEM;
		q->run = r;
		struct sim_evq_ent *t = realloc(q->tmp, sizeof(*t) * cap);
		if (!t)
			return -ENOMEM;
		q->tmp = t;
		q->run_cap = cap;
	}
	m = 0;
	for (uint32_t b = q->head[bi]; b;) {
		struct sim_evq_blk *bk = &q->blk[b];
		memcpy(q->tmp + m, bk->e, sizeof(bk->e[0]) * bk->n);
		m += bk->n;
		uint32_t nx = bk->next;
		bk->next = q->free_blk;
		q->free_blk = b;
		b = nx;
	}
	q->head[bi] = q->tail[bi] = 0;
	q->bits[bi >> 6] &= ~(1ull << (bi & 63));
	q->wheel_n -= m;
	q->cur_w = w;
	window_sort(q, m);
	q->run_i = 0;
	q->run_n = m;
	return 0;
}

/* Where the earliest event is: 0 none, 1 run, 2 cur, 3 far. */
static int evq_first(struct sim_evq *q)
{
	if (q->run_i == q->run_n && !q->cur.n && evq_advance(q))
		return -ENOMEM;
	int where = 0;
	hkey best = 0;
	if (q->run_i < q->run_n) {
		best = evq_key(q->run[q->run_i].t, q->run[q->run_i].seq, false);
		where = 1;
	}
	if (q->cur.n && (!where || q->cur.key[0] < best)) {
		best = q->cur.key[0];
		where = 2;
	}
	if (q->far.n && (!where || q->far.key[0] < best))
		where = 3;
	return where;
}

sim_time_ps sim_evq_top_time(struct sim_evq *q)
{
	switch (evq_first(q)) {
	case 1: return q->run[q->run_i].t;
	case 2: return KEY_T(q->cur.key[0]);
	case 3: return KEY_T(q->far.key[0]);
	default: return SIM_TIME_NEVER;
	}
}

struct sim_event *sim_evq_pop(struct sim_evq *q)
{
	struct sim_event *ev;
	switch (evq_first(q)) {
	case 1:
		ev = q->run[q->run_i++].ev;
		break;
	case 2:
		ev = sim_heap_pop(&q->cur);
		break;
	case 3: {
		sim_time_ps t = KEY_T(q->far.key[0]);
		ev = sim_heap_pop(&q->far);
		/* Nothing else is near: move the wheel to the present, so that what this event
		 * schedules lands in buckets rather than in far. */
		if (q->run_i == q->run_n && !q->cur.n && !q->wheel_n && (t >> SIM_EVQ_SHIFT) > q->cur_w)
			q->cur_w = t >> SIM_EVQ_SHIFT;
		break;
	}
	default:
		return NULL; /* empty, or no memory to hold the next window (q->n stays > 0) */
	}
	q->n--;
	return ev;
}
