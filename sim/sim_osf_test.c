/* sim/sim_osf_test.c: acceptance of the OSF model (sim_osf.c, draft-hcl): with credits, incast
 * and permutation drop nothing and keep every switch queue within the credit window; the
 * OSF-Egress delivers in order although spraying reorders; after a mid-run link failure
 * ingresses stop using the dead paths once notified and flows finish close to the no-failure
 * time; runs are deterministic per seed; spraying without credits does drop under incast. */
#include <string.h>

#include "sim_int.h"
#include "sim_test_util.h"

struct run {
	struct sim_stats st;
	struct sim_osf_stats os;
	struct sim_fail_stats fs;
	bool has_fail;
	double max_fct_us;
	char *fct;
	size_t fct_len;
};

static void run(const char *const *kv, struct run *r)
{
	struct sim_config c;
	test_config(&c, kv);
	struct sim *s = test_sim(&c);
	sim_run(s, NULL, NULL);
	memset(r, 0, sizeof(*r));
	sim_get_stats(s, &r->st);
	CHECK(sim_osf_get_stats(s, &r->os) == 0);
	r->has_fail = sim_fail_get_stats(s, &r->fs) == 0;
	for (uint32_t i = 0; i < sim_flow_count(s); i++) {
		struct sim_flow_result fr;
		sim_flow_result(s, i, &fr);
		if (fr.done && sim_time_to_us(fr.finish_ps - fr.start_ps) > r->max_fct_us)
			r->max_fct_us = sim_time_to_us(fr.finish_ps - fr.start_ps);
	}
	FILE *f = open_memstream(&r->fct, &r->fct_len);
	CHECK(f);
	sim_write_fct_csv(s, f);
	fclose(f);
	sim_destroy(s);
}

/* Credits: no drop, queues and reservations within the window, in-order delivery. */
static void check_credit(const char *name, const struct run *r, uint64_t window, uint64_t npkts)
{
	printf("%s: flows %u/%u, drops %llu, max queue %llu (window %llu), max reserved %llu, "
	       "reordered %llu, rejections %llu/%llu requests, max FCT %.1f us\n", name,
	       r->st.flows_done, r->st.flows, (unsigned long long)r->st.drops_total,
	       (unsigned long long)r->os.max_queue_bytes, (unsigned long long)window,
	       (unsigned long long)r->os.max_reserved_bytes, (unsigned long long)r->os.reorder_pkts,
	       (unsigned long long)r->os.credit_rejs, (unsigned long long)r->os.credit_reqs, r->max_fct_us);
	CHECK_EQ_U(r->st.flows_done, r->st.flows);
	CHECK_EQ_U(r->st.drops_total, 0);
	CHECK_EQ_U(r->st.retx_pkts, 0);
	CHECK(r->os.max_queue_bytes <= window);
	CHECK(r->os.max_reserved_bytes <= window);
	CHECK(r->os.max_reserved_bytes > 0);
	CHECK_EQ_U(r->os.inorder_violations, 0);
	CHECK_EQ_U(r->os.orig_pkts_delivered, npkts);
	CHECK(r->os.credit_acks > 0);
	CHECK_EQ_U(r->os.reserved_now_bytes, 0); /* every reservation was returned */
}

int main(void)
{
	struct run a, b;

	/* Incast 15 -> 1 on a k=4 fat tree, lossy switches, no other CC. */
	const char *const incast[] = { "topology.k=4", "workload.type=incast", "workload.incast_n=15",
		"workload.size_bytes=400000", "host.cc=none", "switch.pfc=false", "osf.mode=credit", NULL };
	run(incast, &a);
	check_credit("incast credit", &a, 262144, 15 * ((400000 + 4095) / 4096));
	CHECK(a.os.credit_rejs > 0); /* the last hop did refuse credit: the window was binding */
	free(a.fct);

	/* The same without credits (spraying only) overflows the last hop: the test can fail. */
	const char *const incast_spray[] = { "topology.k=4", "workload.type=incast", "workload.incast_n=15",
		"workload.size_bytes=400000", "host.cc=none", "switch.pfc=false", "osf.mode=spray", NULL };
	run(incast_spray, &a);
	printf("incast spray (no credits): drops %llu, max queue %llu\n",
	       (unsigned long long)a.st.drops_total, (unsigned long long)a.os.max_queue_bytes);
	CHECK(a.st.drops_total > 0);
	CHECK_EQ_U(a.os.inorder_violations, 0);
	free(a.fct);

	/* Permutation on a 4x4 leaf-spine: spraying reorders, the egress restores order. */
	const char *const perm[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=4",
		"topology.hosts_per_tor=4", "workload.type=permutation", "workload.size_bytes=1000000",
		"host.cc=none", "osf.mode=credit", "osf.window_bytes=65536", NULL };
	run(perm, &a);
	check_credit("permutation credit", &a, 65536, 16 * ((1000000 + 4095) / 4096));
	CHECK(a.os.reorder_pkts > 0);
	free(a.fct);

	/* Mid-run failure of leaf0-spine1 at 100 us, for each topology manager mode. */
	const char *modes[] = { "osf.tm=distributed", "osf.tm=hybrid", "osf.tm=centralised" };
	const char *const nofail[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=4",
		"topology.hosts_per_tor=4", "workload.type=permutation", "workload.size_bytes=4000000",
		"host.cc=none", "osf.mode=credit", NULL };
	run(nofail, &b);
	printf("no failure: max FCT %.1f us\n", b.max_fct_us);
	free(b.fct);
	double notify_us[3];
	for (int m = 0; m < 3; m++) {
		const char *const kv[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=4",
			"topology.hosts_per_tor=4", "workload.type=permutation", "workload.size_bytes=4000000",
			"host.cc=none", "osf.mode=credit", "failure.event1=100 leaf0-spine1 down", modes[m], NULL };
		run(kv, &a);
		CHECK(a.has_fail);
		double fail = sim_time_to_us(a.os.fail_ps), notify = sim_time_to_us(a.os.notify_max_ps);
		double last = a.os.last_stale_ps ? sim_time_to_us(a.os.last_stale_ps) : fail;
		notify_us[m] = notify - fail;
		printf("%s: failure at %.1f us, every ingress notified after %.2f us, last send over the "
		       "dead link %.2f us after, late sends %llu, max FCT %.1f us (%.3fx no failure), "
		       "lost at the dead link %llu\n", modes[m], fail, notify - fail, last - fail,
		       (unsigned long long)a.os.late_stale_sends, a.max_fct_us, a.max_fct_us / b.max_fct_us,
		       (unsigned long long)a.fs.drops_down);
		CHECK_EQ_U(a.st.flows_done, a.st.flows);
		CHECK(fail > 99.9 && fail < 100.1);
		CHECK(notify > fail);
		CHECK(notify - fail <= 15);      /* detect 1 us + report flooding / TM round trip */
		CHECK(last <= notify);           /* flows moved within the notification latency */
		CHECK_EQ_U(a.os.late_stale_sends, 0);
		CHECK(a.max_fct_us <= 1.15 * b.max_fct_us);
		CHECK_EQ_U(a.os.reserved_now_bytes, 0); /* no credit leaked by the failure */
		CHECK_EQ_U(a.os.inorder_violations, 0);
		CHECK(a.os.max_queue_bytes <= 262144);
		free(a.fct);
	}
	/* The central TM adds a report leg, its compute time and a push leg. */
	CHECK(notify_us[2] > notify_us[0]);
	/* Baseline: the same failure with per-packet spraying (lossless, selective repeat) and a
	 * control plane that recomputes routes 1 ms later. OSF fails over far sooner. */
	{
		const char *const kv[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=4",
			"topology.hosts_per_tor=4", "workload.type=permutation", "workload.size_bytes=4000000",
			"switch.routing=spray", "host.transport=sr", "switch.pfc=true",
			"failure.event1=100 leaf0-spine1 down", "failure.reroute_delay_us=1000", NULL };
		struct sim_config c;
		test_config(&c, kv);
		struct sim *s = test_sim(&c);
		sim_run(s, NULL, NULL);
		struct sim_fail_stats fs;
		CHECK(sim_fail_get_stats(s, &fs) == 0);
		double mx = 0;
		for (uint32_t i = 0; i < sim_flow_count(s); i++) {
			struct sim_flow_result fr;
			sim_flow_result(s, i, &fr);
			CHECK(fr.done);
			if (sim_time_to_us(fr.finish_ps - fr.start_ps) > mx)
				mx = sim_time_to_us(fr.finish_ps - fr.start_ps);
		}
		printf("spray + slow reconvergence (1 ms): max FCT %.1f us, lost %llu, reroute at %.1f us\n",
		       mx, (unsigned long long)fs.drops_down, sim_time_to_us(fs.last_reroute_ps));
		CHECK_EQ_U(fs.reroutes, 1);
		CHECK(mx > 1.5 * b.max_fct_us);
		sim_destroy(s);
	}

	/* Determinism per seed. */
	const char *const det[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=4",
		"topology.hosts_per_tor=4", "workload.type=permutation", "workload.size_bytes=500000",
		"host.cc=none", "osf.mode=credit", "failure.event1=20 leaf1-spine2 down",
		"failure.event2=60 leaf2-spine0 degrade rate=0.5 loss=0.001", "sim.seed=7", NULL };
	run(det, &a);
	run(det, &b);
	CHECK(a.fct_len == b.fct_len && !memcmp(a.fct, b.fct, a.fct_len));
	CHECK(!memcmp(&a.os, &b.os, sizeof(a.os)));
	CHECK_EQ_U(a.os.reserved_now_bytes, 0);
	CHECK_EQ_U(a.st.flows_done, a.st.flows);
	CHECK_EQ_U(a.st.events, b.st.events);
	free(a.fct);
	free(b.fct);
	puts("sim_osf_test: ok");
	return 0;
}
