/* sim/sim_event_test.c: the event heap against a brute-force reference: order by (time,
 * insertion) including ties, cancellation from anywhere, growth; and the time converters. */
#include <string.h>

#include "sim_int.h"
#include "sim_test_util.h"

#define N 20000

static struct sim_event evs[N];
static sim_time_ps when[N];
static uint64_t order[N];
static bool live[N];

int main(void)
{
	struct sim_heap h;
	struct util_rng r;
	CHECK(sim_heap_init(&h, 4) == 0);
	util_rng_seed(&r, 7);
	for (uint32_t i = 0; i < N; i++) {
		sim_ev_init(&evs[i], NULL);
		when[i] = util_rng_below(&r, 500); /* many ties */
		order[i] = i;
		bool cancellable = i % 3 != 0;
		CHECK(sim_heap_push(&h, &evs[i], when[i], cancellable) == 0);
		live[i] = true;
	}
	/* cancel a third of the cancellable ones */
	uint32_t cancelled = 0;
	for (uint32_t i = 0; i < N; i++)
		if (i % 3 != 0 && util_rng_below(&r, 3) == 0) {
			CHECK(sim_ev_pending(&evs[i]));
			sim_heap_remove(&h, &evs[i]);
			CHECK(!sim_ev_pending(&evs[i]));
			live[i] = false;
			cancelled++;
		}
	CHECK_EQ(h.n, N - cancelled);
	sim_time_ps last_t = 0;
	int64_t last_i = -1;
	uint32_t popped = 0;
	struct sim_event *ev;
	while ((ev = sim_heap_pop(&h))) {
		uint32_t i = (uint32_t)(ev - evs);
		CHECK(live[i]);
		live[i] = false;
		CHECK(when[i] >= last_t);
		if (when[i] == last_t)
			CHECK((int64_t)i > last_i); /* ties in insertion order */
		last_t = when[i];
		last_i = i;
		popped++;
	}
	CHECK_EQ(popped, N - cancelled);
	for (uint32_t i = 0; i < N; i++)
		CHECK(!live[i]);
	sim_heap_free(&h);

	/* push_seq: an event pushed late with a sequence number taken earlier sorts exactly
	 * where it would have if pushed then (how wires keep only their head in the heap). */
	CHECK(sim_heap_init(&h, 4) == 0);
	uint64_t early = h.seq++; /* taken first ... */
	sim_ev_init(&evs[0], NULL);
	sim_ev_init(&evs[1], NULL);
	sim_ev_init(&evs[2], NULL);
	CHECK(sim_heap_push(&h, &evs[1], 100, false) == 0); /* same time, later seq */
	CHECK(sim_heap_push(&h, &evs[2], 99, true) == 0);
	CHECK(sim_heap_push_seq(&h, &evs[0], 100, early) == 0); /* ... pushed last */
	CHECK(sim_heap_top_time(&h) == 99);
	CHECK(sim_heap_pop(&h) == &evs[2]);
	CHECK(sim_heap_pop(&h) == &evs[0]);
	CHECK(sim_heap_pop(&h) == &evs[1]);
	CHECK(sim_heap_pop(&h) == NULL);
	sim_heap_free(&h);

	CHECK_EQ(sim_time_from_us(3), 3000000);
	CHECK_EQ(sim_time_from_ns(5), 5000);
	CHECK_EQ(sim_time_from_us_f(1.5), 1500000);
	CHECK_EQ(sim_time_serialize(4160, 100000000000ull), 332800); /* 80 ps/byte */
	CHECK_EQ(sim_time_serialize(1, 400000000000ull), 20);
	CHECK_EQ(sim_time_serialize(3, 3000000000ull), 8000); /* rounds up: 8000 exactly */
	CHECK_EQ(sim_time_serialize(1, 3000000000ull), 2667);
	puts("sim_event_test: ok");
	return 0;
}
