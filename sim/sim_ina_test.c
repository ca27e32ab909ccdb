/* sim/sim_ina_test.c: in-network aggregation in the simulator (sim_ina.c): 1024-host fat tree
 * AllReduce through lib/agg engines (single and multi level), exact results checked by every
 * member, completion within 10% of the S/B + latency bound, ring baseline ratio close to
 * 2(n-1)/n when bandwidth-bound, concurrent jobs under slot limits, loss, determinism, the
 * members' RTO (libinca's SRTT + 4 RTTVAR rule). */
#include <errno.h>
#include <string.h>

#include "agg/agg.h"
#include "sim_test_util.h"

#define NJ 16

struct run {
	uint32_t njobs;
	struct sim_ina_job_result r[NJ];
	struct sim_ina_stats st;
	uint64_t events;
};

static void run(const char *const *kv, struct run *out)
{
	struct sim_config c;
	test_config(&c, kv);
	struct sim *s = test_sim(&c);
	sim_run(s, NULL, NULL);
	memset(out, 0, sizeof(*out));
	out->njobs = sim_ina_job_count(s);
	CHECK(out->njobs <= NJ);
	for (uint32_t j = 0; j < out->njobs; j++)
		CHECK(sim_ina_job_result(s, j, &out->r[j]) == 0);
	CHECK(sim_ina_get_stats(s, &out->st) == 0);
	struct sim_stats st;
	sim_get_stats(s, &st);
	out->events = st.events;
	sim_destroy(s);
}

static double t_us(const struct sim_ina_job_result *r)
{
	return sim_time_to_us(r->finish_ps - r->start_ps);
}

/* Every member got every chunk's result exactly once-checked and right. */
static void check_exact(const struct sim_ina_job_result *r)
{
	CHECK(r->done);
	uint64_t chunks = (r->size_bytes + 4095) / 4096;
	CHECK_EQ(r->results_bad, 0);
	CHECK_EQ(r->results_ok, chunks * r->hosts);
}

/* An ideal engine (no service time or latency) unless a test says otherwise: these check the
 * aggregation itself against its bound. */
#define BASE "topology.k=16", "workload.type=none", "host.mtu_bytes=4096", "ina.switch_ns_per_pkt=0", \
	"ina.switch_latency_ns=0"

static void test_1024_multilevel(void)
{
	struct run a;
	const char *kv[] = { BASE, "ina.mode=inc", "ina.jobs=1", "ina.size_bytes=262144", NULL };
	run(kv, &a);
	CHECK_EQ(a.njobs, 1);
	const struct sim_ina_job_result *r = &a.r[0];
	CHECK(r->inc);
	CHECK_EQ(r->hosts, 1024);
	CHECK_EQ(r->levels, 3);          /* ToR -> agg -> core */
	CHECK_EQ(r->tree_switches, 128 + 16 + 1);
	check_exact(r);
	for (int v = AGG_DROP_FIRST; v < AGG_VERDICT_COUNT; v++)
		CHECK_EQ(a.st.verdicts[v], 0); /* no engine drop without loss */
	CHECK_EQ(a.st.verdicts[AGG_ABSORBED] + a.st.verdicts[AGG_COMPLETED],
		   (1024 + 128 + 16) * 64); /* every contribution and aggregate, once */
	printf("1024 hosts, 256 KiB: %.2f us, bound %.2f us\n", t_us(r), sim_time_to_us(r->bound_ps));
	CHECK(r->finish_ps - r->start_ps >= r->bound_ps); /* it is a lower bound */
	CHECK_NEAR(t_us(r), sim_time_to_us(r->bound_ps), 0.10);
}

/* One ToR covers the job (single level) and one pod (two levels); both bandwidth-bound, so
 * ring / INC should be close to 2(n-1)/n (minus the INCA header's few percent). */
static void test_vs_ring(const char *hosts, const char *size, uint32_t want_levels)
{
	char h[64], sz[64];
	snprintf(h, sizeof(h), "ina.job_hosts=%s", hosts);
	snprintf(sz, sizeof(sz), "ina.size_bytes=%s", size);
	const char *kinc[] = { BASE, "ina.mode=inc", "ina.jobs=1", h, sz, NULL };
	const char *kring[] = { BASE, "ina.mode=ring", "ina.jobs=1", h, sz, NULL };
	struct run a, b;
	run(kinc, &a);
	run(kring, &b);
	const struct sim_ina_job_result *ri = &a.r[0], *rr = &b.r[0];
	CHECK(ri->inc && !rr->inc && rr->done);
	CHECK_EQ(ri->levels, want_levels);
	check_exact(ri);
	double n = ri->hosts, ratio = t_us(rr) / t_us(ri), want = 2 * (n - 1) / n;
	printf("%u hosts, %s B: INC %.1f us (bound %.1f), ring %.1f us, ratio %.3f (2(n-1)/n = %.3f)\n",
	       ri->hosts, size, t_us(ri), sim_time_to_us(ri->bound_ps), t_us(rr), ratio, want);
	CHECK_NEAR(t_us(ri), sim_time_to_us(ri->bound_ps), 0.10);
	CHECK_NEAR(ratio, want, 0.10);
}

static void test_slots(void)
{
	/* Strided: every job uses every ToR; 128 slots per switch fit two jobs of 64. */
	const char *kv[] = { BASE, "ina.mode=inc", "ina.jobs=4", "ina.job_hosts=64", "ina.placement=strided",
			     "ina.switch_slots=128", "ina.job_slots=64", "ina.size_bytes=131072", NULL };
	struct run a;
	run(kv, &a);
	CHECK_EQ(a.njobs, 4);
	CHECK_EQ(a.st.jobs_done, 4);
	for (uint32_t j = 0; j < 4; j++) {
		CHECK(a.r[j].done);
		CHECK_EQ(a.r[j].inc, j < 2);
		if (a.r[j].inc)
			check_exact(&a.r[j]);
	}
	/* all in the network when slots suffice */
	const char *kv2[] = { BASE, "ina.mode=inc", "ina.jobs=4", "ina.job_hosts=64", "ina.placement=strided",
			      "ina.switch_slots=256", "ina.job_slots=64", "ina.size_bytes=131072", NULL };
	run(kv2, &a);
	for (uint32_t j = 0; j < 4; j++) {
		CHECK(a.r[j].inc);
		check_exact(&a.r[j]);
	}
}

static void test_loss_and_determinism(void)
{
	const char *kv[] = { BASE, "ina.mode=inc", "ina.jobs=2", "ina.job_hosts=128", "ina.loss=0.01",
			     "ina.size_bytes=262144", "ina.dtype=fp32", NULL };
	struct run a, b, c;
	run(kv, &a);
	run(kv, &b);
	for (uint32_t j = 0; j < 2; j++) {
		check_exact(&a.r[j]);
		CHECK(a.r[j].retx_pkts > 0);
		CHECK_EQ(a.r[j].finish_ps, b.r[j].finish_ps);
		CHECK_EQ(a.r[j].retx_pkts, b.r[j].retx_pkts);
	}
	CHECK(a.st.lost_pkts > 0);
	CHECK_EQ(a.st.lost_pkts, b.st.lost_pkts);
	CHECK_EQ(a.events, b.events);
	CHECK(a.st.verdicts[AGG_DUP_RESENT] + a.st.verdicts[AGG_DUP_UP_RESENT] +
	      a.st.verdicts[AGG_DUP_IGNORED] > 0); /* the engines' dedup at work */
	/* Repair notices: switches noticed missing contributions, members resent on them, and a
	 * parent's notice reached a child switch (multi-level trees); never more notices than
	 * contributions absorbed. Deterministic too. */
	CHECK(a.st.notices > 0 && a.st.nack_resends > 0);
	CHECK(a.st.verdicts[AGG_NACK_DOWN] > 0);
	CHECK(a.st.notices <= a.st.verdicts[AGG_ABSORBED] + a.st.verdicts[AGG_COMPLETED] +
				  a.st.verdicts[AGG_RESULT_DOWN]);
	CHECK_EQ(a.st.notices, b.st.notices);
	CHECK_EQ(a.st.nack_resends, b.st.nack_resends);
	const char *kv2[] = { BASE, "ina.mode=inc", "ina.jobs=2", "ina.job_hosts=128", "ina.loss=0.01",
			      "ina.size_bytes=262144", "ina.dtype=fp32", "sim.seed=7", NULL };
	run(kv2, &c);
	check_exact(&c.r[0]);
	CHECK(c.st.lost_pkts != a.st.lost_pkts || c.events != a.events);
	printf("loss 1%%: %llu lost, %llu retx, job0 %.1f us\n", (unsigned long long)a.st.lost_pkts,
	       (unsigned long long)a.r[0].retx_pkts, t_us(&a.r[0]));
}

/* The switch engine model: a single-ToR job of 8 members is engine-bound once an input costs
 * more than the port's share (8 inputs per chunk at the ToR): time = inputs * ns_per_pkt.
 * The pipeline latency adds once per engine pass; an engine backlog over the port buffer drops
 * and the members' recovery still delivers exact results. */
static void test_engine(void)
{
	const char *kbound[] = { BASE, "ina.mode=inc", "ina.job_hosts=8", "ina.size_bytes=1048576",
				 "ina.switch_ns_per_pkt=1000", "switch.buffer_bytes=8000000",
				 "ina.rto_us=100000", NULL };
	struct run a;
	run(kbound, &a);
	const struct sim_ina_job_result *r = &a.r[0];
	check_exact(r);
	CHECK_EQ(r->levels, 1);
	double inputs = 8.0 * 256; /* 8 contributions per chunk, 256 chunks */
	/* (with the default ina.rto_us the members' timers fire while the engine lags, and their
	 * resends are inputs too) */
	CHECK_EQ(a.st.engine_pkts, (uint64_t)inputs);
	CHECK_EQ(a.st.engine_drops, 0);
	CHECK_EQ(a.st.engine_busy_max_ps, a.st.engine_pkts * 1000000ull);
	CHECK_NEAR(t_us(r), sim_time_to_us(a.st.engine_busy_max_ps), 0.05); /* engine-bound */
	CHECK(t_us(r) > 10 * sim_time_to_us(r->bound_ps));
	printf("engine 1000 ns/pkt: %.1f us for %llu inputs (%.0f contributions), bound %.1f us\n",
	       t_us(r), (unsigned long long)a.st.engine_pkts, inputs, sim_time_to_us(r->bound_ps));

	const char *klat0[] = { BASE, "ina.mode=inc", "ina.job_hosts=8", "ina.size_bytes=4096", NULL };
	const char *klat[] = { BASE, "ina.mode=inc", "ina.job_hosts=8", "ina.size_bytes=4096",
			       "ina.switch_latency_ns=5000", NULL };
	struct run b;
	run(klat0, &a);
	run(klat, &b);
	check_exact(&b.r[0]);
	CHECK_NEAR(t_us(&b.r[0]) - t_us(&a.r[0]), 5.0, 0.01);

	const char *kdrop[] = { BASE, "ina.mode=inc", "ina.job_hosts=8", "ina.size_bytes=1048576",
				"ina.switch_ns_per_pkt=1000", "switch.buffer_bytes=200000", NULL };
	run(kdrop, &a);
	check_exact(&a.r[0]);
	CHECK(a.st.engine_drops > 0);
	CHECK(a.st.engine_max_backlog_bytes <= 200000);
	printf("engine with a 200 KB backlog limit: %llu drops, %.1f us\n",
	       (unsigned long long)a.st.engine_drops, t_us(&a.r[0]));
}

/* Members' RTO follows libinca (util/rtt.h): 20 ms until the first RTT sample, then SRTT +
 * 4 RTTVAR, at least 2 ms. On an engine-bound job (results come back at the engine's pace,
 * a window of 64 chunks takes ~0.5 ms per round) no timer fires and the engine sees every
 * contribution exactly once; an RTO fixed below the engine's pace (ina.rto_us = 100: initial
 * and floor, as libinca's rto_us) fires for chunks merely queued, and the duplicates cost
 * engine time. */
static void test_rto(void)
{
	const char *kdef[] = { BASE, "ina.mode=inc", "ina.job_hosts=8", "ina.size_bytes=1048576",
			       "ina.switch_ns_per_pkt=1000", "switch.buffer_bytes=8000000", NULL };
	const char *kfix[] = { BASE, "ina.mode=inc", "ina.job_hosts=8", "ina.size_bytes=1048576",
			       "ina.switch_ns_per_pkt=1000", "switch.buffer_bytes=8000000",
			       "ina.rto_us=100", NULL };
	struct run a, b;
	run(kdef, &a);
	run(kfix, &b);
	check_exact(&a.r[0]);
	check_exact(&b.r[0]);
	CHECK_EQ(a.r[0].timeouts, 0);
	CHECK_EQ(a.r[0].retx_pkts, 0);
	CHECK_EQ(a.st.engine_pkts, 8ull * 256);
	CHECK(b.r[0].timeouts > 0);
	CHECK(b.st.engine_pkts > a.st.engine_pkts);
	CHECK(t_us(&b.r[0]) >= t_us(&a.r[0]));
	printf("engine-bound job: libinca RTO %.1f us, 0 timeouts; fixed 100 us RTO %.1f us, %llu "
	       "timeouts, %llu engine inputs for %llu contributions\n", t_us(&a.r[0]), t_us(&b.r[0]),
	       (unsigned long long)b.r[0].timeouts, (unsigned long long)b.st.engine_pkts, 8ull * 256);
}

/* Host baselines: hierarchical ring and double binary tree finish, above S/B, and on a wide
 * job the hierarchical ring beats the flat ring (its steps are per edge switch, not per rank). */
static void test_baselines(void)
{
	const char *kv[][12] = {
		{ BASE, "ina.mode=ring", "ina.job_hosts=256", "ina.size_bytes=1048576", NULL },
		{ BASE, "ina.mode=hring", "ina.job_hosts=256", "ina.size_bytes=1048576", NULL },
		{ BASE, "ina.mode=dbtree", "ina.job_hosts=256", "ina.size_bytes=1048576", NULL },
	};
	double t[3];
	for (int i = 0; i < 3; i++) {
		struct run a;
		run(kv[i], &a);
		CHECK(a.r[0].done && !a.r[0].inc);
		CHECK_EQ(a.r[0].algo, (unsigned)(SIM_INA_RING + i));
		t[i] = t_us(&a.r[0]);
		CHECK(t[i] > 1048576 * 8 / 100e3); /* S/B at 100 Gbit/s, in us */
	}
	printf("256 ranks, 1 MiB: ring %.1f us, hring %.1f us, dbtree %.1f us\n", t[0], t[1], t[2]);
	CHECK(t[1] < t[0]);
	/* 10 ranks over 8-host ToRs, strided: groups of 4, 4 and 2, refused with the reason */
	struct sim_config c;
	const char *bad[] = { BASE, "ina.mode=hring", "ina.jobs=2", "ina.job_hosts=10",
			      "ina.placement=strided", NULL };
	test_config(&c, bad);
	struct sim *s = NULL;
	char err[512];
	CHECK(sim_create(&c, &s, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "hring") != NULL);
}

int main(void)
{
	test_baselines();
	test_engine();
	test_rto();
	test_1024_multilevel();
	test_vs_ring("8", "4194304", 1);
	test_vs_ring("64", "33554432", 2);
	test_slots();
	test_loss_and_determinism();
	puts("sim_ina_test: ok");
	return 0;
}
