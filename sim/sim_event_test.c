/* sim/sim_event_test.c: the event heap and the simulator's queue (timing wheel + heaps) against
 * a brute-force reference: order by (time, insertion) including ties, cancellation from
 * anywhere, events pushed while running, beyond the wheel's horizon and after idle gaps,
 * growth; and the time converters. */
#include <string.h>

#include "sim_int.h"
#include "sim_test_util.h"

#define N 20000

static struct sim_event evs[N];
static sim_time_ps when[N];
static uint64_t order[N];
static bool live[N];

static struct sim_event qev[N];
static uint64_t qseq[N];

static sim_time_ps evq_delay(struct util_rng *r)
{
	switch (util_rng_below(r, 6)) {
	case 0: return 0;                                                   /* now */
	case 1: return util_rng_below(r, 1ull << SIM_EVQ_SHIFT);            /* same or next bucket */
	case 2: return util_rng_below(r, 4000000);                          /* a few us */
	case 3: return util_rng_below(r, (uint64_t)SIM_EVQ_NB << SIM_EVQ_SHIFT); /* within the wheel */
	case 4: return ((uint64_t)SIM_EVQ_NB << SIM_EVQ_SHIFT) + util_rng_below(r, 1ull << 40); /* beyond */
	default: return util_rng_below(r, 3) * (1ull << SIM_EVQ_SHIFT);   /* bucket edges */
	}
}

static void evq_run(uint64_t seed)
{
	struct sim_evq q;
	struct util_rng r;
	util_rng_seed(&r, seed);
	CHECK(sim_evq_init(&q) == 0);
	memset(live, 0, sizeof(live));
	uint32_t pending = 0, used = 0;
	sim_time_ps now = 0;
	/* start with a burst, then pop one and push up to two per step */
	for (; used < N / 4; used++) {
		sim_ev_init(&qev[used], NULL);
		qseq[used] = q.seq;
		bool canc = util_rng_below(&r, 4) == 0;
		CHECK(sim_evq_push(&q, &qev[used], now + evq_delay(&r), canc) == 0);
		live[used] = true;
		pending++;
	}
	while (pending) {
		/* reference: the pending event with the smallest (time, sequence) */
		int64_t best = -1;
		for (uint32_t i = 0; i < used; i++)
			if (live[i] && (best < 0 || qev[i].t < qev[best].t ||
					(qev[i].t == qev[best].t && qseq[i] < qseq[best])))
				best = i;
		CHECK(sim_evq_top_time(&q) == qev[best].t);
		struct sim_event *ev = sim_evq_pop(&q);
		CHECK(ev == &qev[best]);
		CHECK(!sim_ev_pending(ev));
		CHECK(ev->t >= now);
		now = ev->t;
		live[best] = false;
		pending--;
		CHECK_EQ(q.n, pending);
		for (unsigned k = util_rng_below(&r, 3); k > 0 && used < N; k--, used++) {
			sim_ev_init(&qev[used], NULL);
			qseq[used] = q.seq;
			bool canc = util_rng_below(&r, 4) == 0;
			sim_time_ps d = util_rng_below(&r, 50) == 0 ? (sim_time_ps)util_rng_below(&r, 1ull << 36) : evq_delay(&r);
			CHECK(sim_evq_push(&q, &qev[used], now + d, canc) == 0);
			live[used] = true;
			pending++;
		}
		if (util_rng_below(&r, 8) == 0) { /* cancel a random pending cancellable event */
			uint32_t i = (uint32_t)util_rng_below(&r, used);
			if (live[i] && sim_ev_pending(&qev[i])) {
				sim_evq_remove(&q, &qev[i]);
				CHECK(!sim_ev_pending(&qev[i]));
				live[i] = false;
				pending--;
			}
		}
	}
	CHECK(sim_evq_pop(&q) == NULL);
	CHECK(sim_evq_top_time(&q) == SIM_TIME_NEVER);
	sim_evq_free(&q);
}

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

	/* The queue: a run that pops the earliest event and schedules new ones at or after it
	 * (near: inside one bucket, within the wheel, beyond its horizon; some cancellable and
	 * cancelled later), checked against the smallest (time, sequence) among those pending. */
	evq_run(1);
	evq_run(2);

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
