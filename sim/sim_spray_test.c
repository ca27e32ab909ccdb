/* sim/sim_spray_test.c: spraying at full size, on the 1024-host k=16 fat tree (non-oversubscribed,
 * 100G), a permutation of 2 MB flows with selective repeat: the idealised splitter
 * (spray_ideal) finishes every flow within 5% of its ideal FCT for several permutations, and
 * the switch behaviours (spray: round robin per switch, spray_random) show the queueing it
 * leaves out. (The k=8 version with the ECMP comparison is in sim_sanity_test.) */
#include <string.h>

#include "sim_test_util.h"

static double max_slowdown(const char *routing, int seed)
{
	char seedkv[32], rkv[48];
	snprintf(seedkv, sizeof(seedkv), "sim.seed=%d", seed);
	snprintf(rkv, sizeof(rkv), "switch.routing=%s", routing);
	const char *const kv[] = { "topology.k=16", rkv, "host.transport=sr",
		"workload.type=permutation", "workload.size_bytes=2000000", seedkv, NULL };
	struct sim_config c;
	test_config(&c, kv);
	struct sim *s = test_sim(&c);
	sim_run(s, NULL, NULL);
	struct sim_stats st;
	sim_get_stats(s, &st);
	CHECK_EQ(st.flows_done, 1024);
	double mx = 0;
	for (uint32_t i = 0; i < sim_flow_count(s); i++) {
		struct sim_flow_result r;
		sim_flow_result(s, i, &r);
		double sl = (double)(r.finish_ps - r.start_ps) / (double)r.ideal_ps;
		if (sl > mx)
			mx = sl;
	}
	printf("k=16 %s permutation seed %d: max slowdown %.4f, drops %llu, retx %llu\n", routing,
	       seed, mx, (unsigned long long)st.drops_total, (unsigned long long)st.retx_pkts);
	sim_destroy(s);
	return mx;
}

int main(void)
{
	double ideal = 0;
	for (int seed = 1; seed <= 2; seed++) {
		double mx = max_slowdown("spray_ideal", seed);
		CHECK(mx <= 1.05);
		if (seed == 1)
			ideal = mx;
	}
	/* Real spraying queues: its worst flow is clearly behind the idealised splitter's. */
	CHECK(max_slowdown("spray", 1) > ideal + 0.1);
	CHECK(max_slowdown("spray_random", 1) > ideal + 0.1);
	puts("sim_spray_test: ok");
	return 0;
}
