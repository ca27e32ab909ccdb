/* sim/sim_fail_test.c: timed failures (sim_fail.c): event parsing and refusals, a dead link
 * without reconvergence strands ECMP flows, the slow control plane recovers them after its
 * delay, a rate-degraded link stretches a flow accordingly, a lossy link loses packets the
 * transport recovers, and a link that comes back up carries traffic again. */
#include <errno.h>
#include <string.h>

#include "sim_test_util.h"

static struct sim *make(const char *const *kv, int *rc)
{
	struct sim_config c;
	struct sim *s = NULL;
	char err[512];
	test_config(&c, kv);
	*rc = sim_create(&c, &s, err, sizeof(err));
	if (*rc)
		printf("refused as expected: %s\n", err);
	return s;
}

static double fct_us(struct sim *s, uint32_t i)
{
	struct sim_flow_result r;
	sim_flow_result(s, i, &r);
	return r.done ? sim_time_to_us(r.finish_ps - r.start_ps) : -1;
}

int main(void)
{
	int rc;
	struct sim_stats st;
	struct sim_fail_stats fs;

	/* Refusals: unknown link, host links, bad syntax. */
	const char *const bad1[] = { "failure.event1=10 leaf0-spine9 down", "topology.type=leafspine", NULL };
	const char *const bad2[] = { "failure.event1=10 h0-leaf0 down", "topology.type=leafspine", NULL };
	const char *const bad3[] = { "failure.event1=10 leaf0-spine0 degrade rate=2", "topology.type=leafspine", NULL };
	const char *const bad4[] = { "failure.event1=10 leaf0-spine0 explode", "topology.type=leafspine", NULL };
	CHECK(!make(bad1, &rc) && rc == -ENOENT);
	CHECK(!make(bad2, &rc) && rc == -ENOENT);
	CHECK(!make(bad3, &rc) && rc == -EINVAL);
	CHECK(!make(bad4, &rc) && rc == -EINVAL);
	struct sim_config c;
	test_config(&c, NULL);
	CHECK(sim_config_set(&c, "failure.event9", "1 a-b down") == -ENOENT);

	/* 2 leaves x 2 spines, one host each side: h0 -> h1 over one of two spines (ECMP). The
	 * flow's data spine is found by failing each in turn: with no reconvergence exactly one
	 * of the two runs strands its data. */
	int stranded = 0, dead_sp = -1;
	for (int sp = 0; sp < 2; sp++) {
		char ev[64];
		snprintf(ev, sizeof(ev), "failure.event1=5 leaf0-spine%d down", sp);
		const char *const kv[] = { "topology.type=leafspine", "topology.tors=2", "topology.spines=2",
			"topology.hosts_per_tor=1", "workload.type=none", "sim.stop_us=3000", "host.cc=none", ev, NULL };
		struct sim *s = make(kv, &rc);
		CHECK(s);
		CHECK(sim_flow_add(s, 0, 1, 1000000, 0) == 0);
		sim_run(s, NULL, NULL);
		sim_get_stats(s, &st);
		CHECK(sim_fail_get_stats(s, &fs) == 0);
		CHECK_EQ(fs.events_applied, 1);
		CHECK(fs.first_down_ps == sim_time_from_us(5));
		if (fct_us(s, 0) < 0) { /* data path dead (ACKs may be stranded in either case) */
			stranded++;
			dead_sp = sp;
			CHECK(fs.drops_down > 0);
		}
		sim_destroy(s);
	}
	CHECK_EQ(stranded, 1);

	/* Slow reconvergence: the same on both spines with routes recomputed after 200 us. The
	 * stranded flow finishes, only after the reroute. */
	for (int sp = 0; sp < 2; sp++) {
		char ev[64];
		snprintf(ev, sizeof(ev), "failure.event1=5 leaf0-spine%d down", sp);
		const char *const kv[] = { "topology.type=leafspine", "topology.tors=2", "topology.spines=2",
			"topology.hosts_per_tor=1", "workload.type=none", "sim.stop_us=3000", "host.cc=none",
			"host.rto_us=100", "failure.reroute_delay_us=200", ev, NULL };
		struct sim *s = make(kv, &rc);
		CHECK(s);
		CHECK(sim_flow_add(s, 0, 1, 1000000, 0) == 0);
		sim_run(s, NULL, NULL);
		sim_get_stats(s, &st);
		CHECK(sim_fail_get_stats(s, &fs) == 0);
		CHECK_EQ(st.flows_done, 1);
		CHECK_EQ(fs.reroutes, 1);
		CHECK(fs.last_reroute_ps == sim_time_from_us(205));
		if (sp == dead_sp)
			CHECK(fct_us(s, 0) > 205);
		else
			CHECK(fct_us(s, 0) < 205);
		printf("spine%d down, reroute after 200 us: FCT %.1f us, lost %llu\n", sp, fct_us(s, 0),
		       (unsigned long long)fs.drops_down);
		sim_destroy(s);
	}

	/* Rate degradation: one path (1 spine), the leaf-spine link at a quarter rate from t=0;
	 * lossless, so the FCT is the serialisation at the reduced rate. */
	double base = 0;
	for (int deg = 0; deg < 2; deg++) {
		const char *const kv[] = { "topology.type=leafspine", "topology.tors=2", "topology.spines=1",
			"topology.hosts_per_tor=1", "workload.type=none", "host.cc=none", "switch.pfc=true",
			deg ? "failure.event1=0 leaf0-spine0 degrade rate=0.25" : "sim.seed=1", NULL };
		struct sim *s = make(kv, &rc);
		CHECK(s);
		CHECK(sim_flow_add(s, 0, 1, 2000000, 0) == 0);
		sim_run(s, NULL, NULL);
		if (!deg)
			base = fct_us(s, 0);
		else {
			printf("degraded to 25%%: FCT %.1f us vs %.1f us\n", fct_us(s, 0), base);
			CHECK_NEAR(fct_us(s, 0), 4 * base, 0.05);
		}
		sim_destroy(s);
	}

	/* Random loss: 2% on the only path; selective repeat recovers every loss. */
	{
		const char *const kv[] = { "topology.type=leafspine", "topology.tors=2", "topology.spines=1",
			"topology.hosts_per_tor=1", "workload.type=none", "host.cc=none", "host.transport=sr",
			"host.rto_us=100", "failure.event1=0 leaf0-spine0 degrade loss=0.02", NULL };
		struct sim *s = make(kv, &rc);
		CHECK(s);
		CHECK(sim_flow_add(s, 0, 1, 2000000, 0) == 0);
		sim_run(s, NULL, NULL);
		sim_get_stats(s, &st);
		CHECK(sim_fail_get_stats(s, &fs) == 0);
		printf("2%% loss: lost %llu of %llu data packets, retransmitted %llu, FCT %.1f us\n",
		       (unsigned long long)fs.drops_loss, (unsigned long long)st.data_pkts_sent,
		       (unsigned long long)st.retx_pkts, fct_us(s, 0));
		CHECK_EQ(st.flows_done, 1);
		CHECK(fs.drops_loss > 2 && fs.drops_loss < st.data_pkts_sent / 10);
		CHECK(st.retx_pkts >= fs.drops_loss);
		sim_destroy(s);
	}

	/* Down then up on the only path, no reconvergence: traffic resumes when it is back. */
	{
		const char *const kv[] = { "topology.type=leafspine", "topology.tors=2", "topology.spines=1",
			"topology.hosts_per_tor=1", "workload.type=none", "host.cc=none", "host.rto_us=50",
			"failure.event1=20 leaf0-spine0 down", "failure.event2=120 leaf0-spine0 up", NULL };
		struct sim *s = make(kv, &rc);
		CHECK(s);
		CHECK(sim_flow_add(s, 0, 1, 2000000, 0) == 0);
		sim_run(s, NULL, NULL);
		sim_get_stats(s, &st);
		CHECK(sim_fail_get_stats(s, &fs) == 0);
		printf("down 20..120 us: FCT %.1f us, lost %llu\n", fct_us(s, 0), (unsigned long long)fs.drops_down);
		CHECK_EQ(fs.events_applied, 2);
		CHECK_EQ(st.flows_done, 1);
		CHECK(fs.drops_down > 0);
		CHECK(fct_us(s, 0) > 120);
		sim_destroy(s);
	}
	puts("sim_fail_test: ok");
	return 0;
}
