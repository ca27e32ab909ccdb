/* sim/sim_watchdog_test.c: the progress watchdog stops runs that cannot end (packets lost
 * forever, an event rescheduling itself at the same instant, nothing delivered for a long
 * simulated time) with a diagnosis naming what is stuck, and leaves healthy runs alone. */
#include <string.h>

#include "sim_int.h"
#include "sim_test_util.h"

#define CHECK_HAS(str, frag) do { const char *_s = (str); if (!_s || !strstr(_s, frag)) { \
	fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
		_s ? _s : "(null)", frag); exit(1); } } while (0)

static const char *const base[] = {
	"topology.type=leafspine", "topology.tors=2", "topology.spines=1", "topology.hosts_per_tor=2",
	"switch.routing=ecmp", "host.cc=none", "workload.type=permutation", "workload.size_bytes=200000",
	NULL,
};

static struct sim *make(const char *const *extra)
{
	struct sim_config c;
	test_config(&c, base);
	for (; extra && *extra; extra++)
		CHECK(sim_config_set_arg(&c, *extra) == 0);
	return test_sim(&c);
}

/* Every data packet over the only leaf-spine link is lost: the cross-leaf flows retransmit
 * forever while time advances. */
static void lost_forever(void)
{
	static const char *const kv[] = { "failure.event1=0 leaf0-spine0 degrade loss=1",
					  "sim.watchdog_events=300000", NULL };
	struct sim *s = make(kv);
	sim_run(s, NULL, NULL);
	const char *why = sim_run_error(s);
	CHECK_HAS(why, "watchdog: ");
	CHECK_HAS(why, "flows active, least advanced: flow");
	CHECK_HAS(why, "0 of 200000 bytes received");
	CHECK(s->flows_done < s->nflows);
	CHECK(s->events < 3000000); /* stopped within a few windows */
	printf("lost forever: %s\n", why);
	sim_destroy(s);
}

/* The same by simulated time alone: the event window is out of reach. */
static void idle_time(void)
{
	static const char *const kv[] = { "failure.event1=0 leaf0-spine0 degrade loss=1",
					  "sim.watchdog_events=1e12", "sim.watchdog_idle_us=50000",
					  "host.rto_us=100", NULL };
	struct sim *s = make(kv);
	sim_run(s, NULL, NULL);
	const char *why = sim_run_error(s);
	CHECK_HAS(why, "watchdog: nothing delivered for");
	CHECK(s->now <= sim_time_from_us(200000));
	printf("idle: %s\n", why);
	sim_destroy(s);
}

static void spin(struct sim *s, struct sim_event *ev)
{
	sim_schedule(s, ev, s->now);
}

/* An event that keeps rescheduling itself at the same instant: time stands still. */
static void time_stuck(void)
{
	static const char *const kv[] = { "sim.watchdog_events=100000", NULL };
	struct sim *s = make(kv);
	struct sim_event ev;
	sim_ev_init(&ev, spin);
	sim_schedule(s, &ev, sim_time_from_us(20));
	sim_run(s, NULL, NULL);
	const char *why = sim_run_error(s);
	CHECK_HAS(why, "watchdog: simulated time stuck at 20.000000 us");
	printf("stuck: %s\n", why);
	sim_destroy(s);
}

/* Healthy runs with a small window: never stopped. Incast with drops and retransmissions
 * (progress is slow but steady) and a permutation. */
static void healthy(void)
{
	static const char *const kv1[] = { "sim.watchdog_events=20000", "workload.type=incast",
					   "workload.incast_n=3", "switch.buffer_bytes=20000",
					   "workload.size_bytes=1000000", NULL };
	static const char *const kv2[] = { "sim.watchdog_events=20000", NULL };
	const char *const *kvs[] = { kv1, kv2 };
	for (unsigned i = 0; i < 2; i++) {
		struct sim *s = make(kvs[i]);
		sim_run(s, NULL, NULL);
		CHECK(sim_run_error(s) == NULL);
		CHECK_EQ(s->flows_done, s->nflows);
		sim_destroy(s);
	}
}

int main(void)
{
	lost_forever();
	idle_time();
	time_stuck();
	healthy();
	puts("sim_watchdog_test: ok");
	return 0;
}
