/* sim/sim_spray_test.c: issue 5 acceptance at full size: on the 1024-host k=16 fat tree
 * (non-oversubscribed, 100G), a permutation of 2 MB flows with per-packet spraying and
 * selective repeat finishes every flow within 5% of its ideal FCT, for several seeds' worth of
 * permutations. (The k=8 version with the ECMP comparison is in sim_sanity_test.) */
#include "sim_test_util.h"

int main(void)
{
	for (int seed = 1; seed <= 2; seed++) {
		char seedkv[32];
		snprintf(seedkv, sizeof(seedkv), "sim.seed=%d", seed);
		const char *const kv[] = { "topology.k=16", "switch.routing=spray", "host.transport=sr",
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
		printf("k=16 spray permutation seed %d: max slowdown %.4f, drops %llu, retx %llu\n", seed, mx,
		       (unsigned long long)st.drops_total, (unsigned long long)st.retx_pkts);
		CHECK(mx <= 1.05);
		sim_destroy(s);
	}
	puts("sim_spray_test: ok");
	return 0;
}
