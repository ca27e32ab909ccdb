/* sim/sim_sanity_test.c: the simulator against first principles:
 * a lone flow's FCT, spraying vs ECMP on a permutation, incast N->1, two DCQCN flows sharing a
 * bottleneck, and PFC making a lossy incast lossless. */
#include <math.h>
#include <string.h>

#include "sim_test_util.h"

static double slowdown_max(struct sim *s, double *p99)
{
	uint32_t n = sim_flow_count(s);
	double *v = malloc(sizeof(double) * n), mx = 0;
	CHECK(v);
	for (uint32_t i = 0; i < n; i++) {
		struct sim_flow_result r;
		sim_flow_result(s, i, &r);
		CHECK(r.done);
		v[i] = (double)(r.finish_ps - r.start_ps) / (double)r.ideal_ps;
		if (v[i] > mx)
			mx = v[i];
	}
	for (uint32_t i = 1; i < n; i++) /* insertion sort: n is small */
		for (uint32_t j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t;
		}
	*p99 = v[(uint32_t)ceil(0.99 * n) - 1];
	free(v);
	return mx;
}

static void single_flow(void)
{
	static const char *const kv[] = { "topology.type=leafspine", "topology.tors=2", "topology.spines=1",
		"topology.hosts_per_tor=1", "workload.type=none", NULL };
	struct sim_config c;
	test_config(&c, kv);
	struct sim *s = test_sim(&c);
	const uint64_t S = 1000000;
	CHECK(sim_flow_add(s, 0, 1, S, sim_time_from_us(10)) == 0);
	sim_run(s, NULL, NULL);
	struct sim_flow_result r;
	sim_flow_result(s, 0, &r);
	CHECK(r.done);
	CHECK_EQ(r.bytes_received, S);
	/* By hand: 245 packets (244 x 4096 + 576), 64 B of headers each, 100 Gbit/s = 80 ps/B,
	 * 4 links of 500 ns. All but the last packet leave the NIC back to back; the penultimate
	 * (full) packet is stored and forwarded at 3 more hops; the short last packet catches up
	 * with it and follows it onto the last link. */
	double npk = 245, wire = S + npk * 64, last = 576 + 64, full = 4096 + 64;
	double expect_ps = (wire - last) * 80 + 3 * full * 80 + last * 80 + 4 * 500000;
	double fct_ps = (double)(r.finish_ps - r.start_ps);
	CHECK_NEAR(fct_ps, expect_ps, 0.01);
	CHECK_NEAR((double)r.ideal_ps, expect_ps, 0.0001);
	sim_destroy(s);
	printf("single flow: fct %.3f us, expected %.3f us\n", fct_ps / 1e6, expect_ps / 1e6);
}

static void permutation(void)
{
	static const char *const spray[] = { "topology.k=8", "switch.routing=spray_ideal", "host.transport=sr",
		"workload.type=permutation", "workload.size_bytes=2000000", NULL };
	static const char *const ecmp[] = { "topology.k=8", "switch.routing=ecmp", "host.transport=sr",
		"workload.type=permutation", "workload.size_bytes=2000000", "switch.pfc=true", NULL };
	struct sim_config c;
	double p99s, p99e;
	test_config(&c, spray);
	struct sim *s = test_sim(&c);
	sim_run(s, NULL, NULL);
	double mx = slowdown_max(s, &p99s);
	struct sim_stats st;
	sim_get_stats(s, &st);
	CHECK_EQ(st.flows_done, 128);
	CHECK(mx <= 1.05);
	sim_destroy(s);
	test_config(&c, ecmp);
	s = test_sim(&c);
	sim_run(s, NULL, NULL);
	double mxe = slowdown_max(s, &p99e);
	CHECK(p99e >= 1.5); /* hash collisions: at least two flows share a link somewhere */
	sim_destroy(s);
	printf("permutation k=8: spray_ideal max slowdown %.4f (p99 %.4f), ecmp p99 %.3f max %.3f\n",
	       mx, p99s, p99e, mxe);
}

static void incast(bool pfc)
{
	const char *kv[] = { "topology.k=4", "workload.type=incast", "workload.incast_n=8",
		"workload.size_bytes=500000", "host.cc=none", "switch.buffer_bytes=200000",
		pfc ? "switch.pfc=true" : "switch.pfc=false", NULL };
	struct sim_config c;
	test_config(&c, kv);
	struct sim *s = test_sim(&c);
	sim_run(s, NULL, NULL);
	struct sim_stats st;
	sim_get_stats(s, &st);
	CHECK_EQ(st.flows_done, 8);
	sim_time_ps last = 0;
	for (uint32_t i = 0; i < 8; i++) {
		struct sim_flow_result r;
		sim_flow_result(s, i, &r);
		if (r.finish_ps > last)
			last = r.finish_ps;
	}
	/* N*S on the wire through the receiver's 100G link. */
	double npk = ceil(500000.0 / 4096), bound_ps = 8 * (500000 + npk * 64) * 80.0;
	if (pfc) {
		CHECK_EQ(st.drops_total, 0);
		CHECK(st.pfc_pauses > 0);
		CHECK_NEAR((double)last, bound_ps, 0.05);
	} else {
		CHECK(st.drops_total > 0); /* the same incast without PFC overflows 200 kB */
	}
	printf("incast 8->1 pfc=%d: last finish %.2f us (N*S/rate %.2f us), drops %llu, pauses %llu\n",
	       pfc, sim_time_to_us(last), bound_ps / 1e6, (unsigned long long)st.drops_total,
	       (unsigned long long)st.pfc_pauses);
	sim_destroy(s);
}

static void dcqcn_fair(void)
{
	static const char *const kv[] = { "topology.type=leafspine", "topology.tors=2", "topology.spines=1",
		"topology.hosts_per_tor=2", "workload.type=none", "host.cc=dcqcn", "switch.ecn=true",
		"switch.buffer_bytes=4000000", NULL };
	struct sim_config c;
	test_config(&c, kv);
	struct sim *s = test_sim(&c);
	CHECK(sim_flow_add(s, 0, 2, 1000000000, 0) == 0);
	CHECK(sim_flow_add(s, 1, 3, 1000000000, sim_time_from_us(500)) == 1);
	/* B starts at 0.5 ms into A's full-rate flow; measure after convergence. */
	sim_time_ps t1 = sim_time_from_us(8000), t2 = sim_time_from_us(20000);
	struct sim_flow_result a1, b1, a2, b2;
	sim_run_until(s, t1);
	sim_flow_result(s, 0, &a1);
	sim_flow_result(s, 1, &b1);
	sim_run_until(s, t2);
	sim_flow_result(s, 0, &a2);
	sim_flow_result(s, 1, &b2);
	double ra = (double)(a2.bytes_received - a1.bytes_received) * 8 / sim_time_to_s(t2 - t1) / 1e9;
	double rb = (double)(b2.bytes_received - b1.bytes_received) * 8 / sim_time_to_s(t2 - t1) / 1e9;
	struct sim_stats st;
	sim_get_stats(s, &st);
	printf("dcqcn: flow A %.1f Gbit/s, flow B %.1f Gbit/s, CNPs %llu, drops %llu\n", ra, rb,
	       (unsigned long long)st.cnps, (unsigned long long)st.drops_total);
	CHECK(st.cnps > 0);
	CHECK(ra / rb > 0.8 && ra / rb < 1.25);
	CHECK(ra + rb > 85);
	sim_destroy(s);
}

int main(void)
{
	single_flow();
	incast(true);
	incast(false);
	dcqcn_fair();
	permutation();
	puts("sim_sanity_test: ok");
	return 0;
}
