/* sim/sim_event.c: the event queue, a 4-ary indexed min-heap ordered by (time, sequence).
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

int sim_heap_push_seq(struct sim_heap *h, struct sim_event *ev, sim_time_ps t, uint64_t seq)
{
	if (h->n == h->cap && heap_alloc(h, h->cap * 2))
		return -ENOMEM;
	ev->t = t;
	ev->heap_idx = SIM_EV_IDLE;
	sift_up(h, h->n++, ((hkey)t << 64) | (hkey)(seq << 1), ev);
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
