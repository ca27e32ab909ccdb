/* sim/sim_ccm_test.c: acceptance of coordinated congestion management (sim_ccm.c, draft-lyu)
 * on the scenarios of examples/sim/ccm_*.ini: in incast (and in the incast of the mixed
 * scenario) no path switch at all of an incast flow once the last hop has classified it
 * (uncoordinated AR makes many), same throughput; under imbalanced load CCM cuts rates less
 * and finishes the load sooner than DCQCN + uncoordinated AR; the §7 example's notifications
 * come in the draft's order; same seed, same event log and results. */
#include <string.h>

#include "sim_test_util.h"

static struct sim *run(const char *scen, const char *mode, int seed)
{
	const char *dir = getenv("SIM_EXAMPLES");
	char path[1024], err[512], sd[32];
	struct sim_config c;
	test_config(&c, NULL);
	snprintf(path, sizeof(path), "%s/%s", dir, scen);
	if (sim_config_load(&c, path, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	CHECK(sim_config_set(&c, "ccm.mode", mode) == 0);
	if (seed) {
		snprintf(sd, sizeof(sd), "%d", seed);
		CHECK(sim_config_set(&c, "sim.seed", sd) == 0);
	}
	c.progress_s = 0;
	struct sim *s = test_sim(&c);
	sim_run(s, NULL, NULL);
	struct sim_stats st;
	sim_get_stats(s, &st);
	CHECK_EQ(st.flows_done, st.flows);
	return s;
}

/* The load is done when the last byte of the last flow has arrived. */
static double completion_us(const struct sim *s)
{
	double mx = 0;
	for (uint32_t i = 0; i < sim_flow_count(s); i++) {
		struct sim_flow_result r;
		CHECK(sim_flow_result(s, i, &r) == 0 && r.done);
		if (sim_time_to_us(r.finish_ps) > mx)
			mx = sim_time_to_us(r.finish_ps);
	}
	return mx;
}

/* Every AR event of a flow records the emission number of the packet that caused it; every
 * tag_set / tag_clear the number of the flow's next packet. A switch decided on a packet sent
 * while the flow was tagged iff its number falls in a [set, clear) interval. */
static uint64_t ar_on_tagged_packets(const struct sim *s)
{
	uint64_t bad = 0;
	size_t n = sim_ccm_event_count(s);
	for (size_t i = 0; i < n; i++) {
		const struct sim_ccm_event *a = sim_ccm_event_get(s, i);
		if (a->kind != SIM_CCM_EV_AR_LOCAL && a->kind != SIM_CCM_EV_AR_UPSTREAM)
			continue;
		uint64_t set = UINT64_MAX;
		for (size_t j = 0; j < n; j++) {
			const struct sim_ccm_event *t = sim_ccm_event_get(s, j);
			if (t->flow != a->flow)
				continue;
			if (t->kind == SIM_CCM_EV_TAG_SET)
				set = t->seq;
			else if (t->kind == SIM_CCM_EV_TAG_CLEAR && set != UINT64_MAX) {
				if (a->seq >= set && a->seq < t->seq)
					bad++;
				set = UINT64_MAX;
			}
		}
		if (set != UINT64_MAX && a->seq >= set)
			bad++;
	}
	return bad;
}

/* Path switches of flows at or after their classification as incast flows, from the event
 * log (independent of the ar_incast_flows counter): the last hop classifies a flow when it
 * sends it its first type 1. */
static uint64_t ar_after_classification(const struct sim *s)
{
	uint64_t bad = 0;
	size_t n = sim_ccm_event_count(s);
	for (size_t i = 0; i < n; i++) {
		const struct sim_ccm_event *a = sim_ccm_event_get(s, i);
		if (a->kind != SIM_CCM_EV_AR_LOCAL && a->kind != SIM_CCM_EV_AR_UPSTREAM &&
		    a->kind != SIM_CCM_EV_HOST_AR)
			continue;
		for (size_t j = 0; j < n; j++) {
			const struct sim_ccm_event *t = sim_ccm_event_get(s, j);
			if (t->flow == a->flow && t->kind == SIM_CCM_EV_NOTIFY_SENT && t->ntype == 1) {
				bad += t->t_ps <= a->t_ps;
				break;
			}
		}
	}
	return bad;
}

static void incast(void)
{
	double tc = 0, tu = 0;
	uint64_t ac = 0, au = 0;
	for (int seed = 1; seed <= 4; seed++) {
		struct sim *c = run("ccm_incast.ini", "coordinated", seed);
		struct sim *u = run("ccm_incast.ini", "ar", seed);
		struct sim_ccm_stats sc, su;
		CHECK(sim_ccm_get_stats(c, &sc) == 0 && sim_ccm_get_stats(u, &su) == 0);
		CHECK_EQ(sc.incast_flows, 8);            /* every sender got a type 1 */
		CHECK_EQ(sc.notify_recv[1], sc.notify_sent[1]);
		CHECK_EQ(ar_on_tagged_packets(c), 0);
		for (uint32_t f = 0; f < 8; f++)
			CHECK(sim_ccm_flow_incast(c, f) && sim_ccm_flow_incast(u, f));
		CHECK_EQ(sc.ar_incast_flows, 0); /* not one path switch of an incast flow */
		CHECK_EQ(ar_after_classification(c), 0);
		CHECK(su.ar_incast_flows > 0); /* the metric does see them */
		ac += sc.ar_incast_flows;
		au += su.ar_incast_flows;
		tc += completion_us(c);
		tu += completion_us(u);
		sim_destroy(c);
		sim_destroy(u);
	}
	fprintf(stderr, "incast: AR switches of incast flows %llu vs %llu, completion %.1f vs %.1f us\n",
		(unsigned long long)ac, (unsigned long long)au, tc / 4, tu / 4);
	CHECK(au > 0 && ac == 0);
	CHECK(tc <= tu * 1.02);        /* throughput kept */
}

/* Incast + imbalance: flows 7-10 (indexes 6-9) are the 4 -> 1 incast. */
static void mixed(void)
{
	double tc = 0, tu = 0;
	uint64_t au = 0;
	for (int seed = 1; seed <= 4; seed++) {
		struct sim *c = run("ccm_mixed.ini", "coordinated", seed);
		struct sim *u = run("ccm_mixed.ini", "ar", seed);
		struct sim_ccm_stats sc, su;
		CHECK(sim_ccm_get_stats(c, &sc) == 0 && sim_ccm_get_stats(u, &su) == 0);
		for (uint32_t f = 6; f < 10; f++)
			CHECK(sim_ccm_flow_incast(c, f));
		CHECK_EQ(sc.ar_incast_flows, 0);
		CHECK_EQ(ar_after_classification(c), 0);
		CHECK(sc.ar_local + sc.ar_upstream > 0); /* AR still works for the other flows */
		au += su.ar_incast_flows;
		tc += completion_us(c);
		tu += completion_us(u);
		sim_destroy(c);
		sim_destroy(u);
	}
	fprintf(stderr, "mixed: AR switches of incast flows 0 vs %llu, completion %.1f vs %.1f us\n",
		(unsigned long long)au, tc / 4, tu / 4);
	CHECK(au > 0);
	CHECK(tc < tu * 0.9);
}

static void imbalance(void)
{
	double tc = 0, tu = 0;
	uint64_t cc = 0, cu = 0;
	for (int seed = 1; seed <= 8; seed++) {
		struct sim *c = run("ccm_imbalance.ini", "coordinated", seed);
		struct sim *u = run("ccm_imbalance.ini", "ar", seed);
		struct sim_stats stc, stu;
		struct sim_ccm_stats sc;
		sim_get_stats(c, &stc);
		sim_get_stats(u, &stu);
		CHECK(sim_ccm_get_stats(c, &sc) == 0);
		CHECK(sc.notify_sent[3] > 0 && sc.ar_upstream > 0); /* upstream AR did the work */
		cc += stc.cnps;
		cu += stu.cnps;
		tc += completion_us(c);
		tu += completion_us(u);
		sim_destroy(c);
		sim_destroy(u);
	}
	fprintf(stderr, "imbalance: rate cuts %llu vs %llu, completion %.1f vs %.1f us\n",
		(unsigned long long)cc, (unsigned long long)cu, tc / 8, tu / 8);
	CHECK(cc * 10 < cu * 8);       /* >= 20% fewer rate reductions */
	CHECK(tc < tu * 0.95);         /* the load finishes >= 5% sooner */
}

/* §7 with the scenario's own seed: F1 (flow index 0, h0 -> h8) first meets congestion at an
 * L4, which sends a type 3 to F1's AR point, an L2 of rack 1, which switches F1's path; once
 * the incast starts (150 us), L1-3-1 sends a type 1 to h0, h0 sets the CC indicator, and
 * DCQCN then cuts F1's rate. */
static void example7(void)
{
	struct sim *s = run("ccm_lyu7.ini", "coordinated", 0);
	int step = 0;
	uint32_t ar_point = UINT32_MAX;
	for (size_t i = 0; i < sim_ccm_event_count(s) && step < 6; i++) {
		const struct sim_ccm_event *e = sim_ccm_event_get(s, i);
		if (e->flow != 0)
			continue;
		const char *node = sim_node_name(s, e->node), *peer = sim_node_name(s, e->peer);
		switch (step) {
		case 0:
			CHECK(e->kind != SIM_CCM_EV_NOTIFY_SENT || e->ntype == 3); /* no type 1 before */
			if (e->kind == SIM_CCM_EV_NOTIFY_SENT) {
				CHECK(!strncmp(node, "L4-", 3) && !strncmp(peer, "L2-1-", 5));
				ar_point = e->peer;
				step++;
			}
			break;
		case 1:
			if (e->kind == SIM_CCM_EV_AR_UPSTREAM) {
				CHECK_EQ(e->node, ar_point);
				step++;
			}
			break;
		case 2:
			if (e->kind == SIM_CCM_EV_NOTIFY_SENT && e->ntype == 1) {
				CHECK(!strcmp(node, "L1-3-1") && !strcmp(peer, "h0"));
				CHECK(e->t_ps >= sim_time_from_us(150));
				step++;
			}
			break;
		case 3: step += e->kind == SIM_CCM_EV_NOTIFY_RECV && e->ntype == 1 && !strcmp(node, "h0"); break;
		case 4: step += e->kind == SIM_CCM_EV_TAG_SET; break;
		case 5: step += e->kind == SIM_CCM_EV_RATE_CUT; break;
		}
	}
	CHECK_EQ(step, 6);
	sim_destroy(s);
}

static void determinism(void)
{
	struct sim *a = run("ccm_mixed.ini", "coordinated", 3), *b = run("ccm_mixed.ini", "coordinated", 3);
	struct sim *o = run("ccm_mixed.ini", "coordinated", 4);
	CHECK_EQ(sim_ccm_event_count(a), sim_ccm_event_count(b));
	CHECK(sim_ccm_event_count(a) > 0);
	for (size_t i = 0; i < sim_ccm_event_count(a); i++) {
		const struct sim_ccm_event *x = sim_ccm_event_get(a, i), *y = sim_ccm_event_get(b, i);
		CHECK(x->t_ps == y->t_ps && x->kind == y->kind && x->ntype == y->ntype && x->node == y->node &&
		      x->peer == y->peer && x->flow == y->flow && x->value == y->value && x->seq == y->seq);
	}
	bool differs = sim_ccm_event_count(a) != sim_ccm_event_count(o);
	for (uint32_t i = 0; i < sim_flow_count(a); i++) {
		struct sim_flow_result x, y, z;
		sim_flow_result(a, i, &x);
		sim_flow_result(b, i, &y);
		sim_flow_result(o, i, &z);
		CHECK_EQ(x.finish_ps, y.finish_ps);
		differs = differs || x.finish_ps != z.finish_ps;
	}
	CHECK(differs); /* the seed matters */
	sim_destroy(a);
	sim_destroy(b);
	sim_destroy(o);
}

int main(void)
{
	if (!getenv("SIM_EXAMPLES")) {
		fprintf(stderr, "SIM_EXAMPLES not set\n");
		return 77;
	}
	incast();
	mixed();
	imbalance();
	example7();
	determinism();
	puts("sim_ccm_test: ok");
	return 0;
}
