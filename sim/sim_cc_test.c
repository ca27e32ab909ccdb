/* sim/sim_cc_test.c: the congestion controls against their papers' headline behaviour, on the
 * scenario of examples/sim/dctcp.ini and hpcc.ini (8 long flows into one 100G receiver port,
 * lossy switches): DCTCP holds the bottleneck queue around K (for two values of K) at full rate
 * without drops; HPCC keeps it near empty, far below one BDP and below DCQCN's, at >= 90%
 * utilisation, and shares the link evenly with the paper's W_AI rule; window-based senders never wait for a coalesced ACK (no timeout in a 15-to-1
 * incast with windows of a few packets). DCQCN's outputs are checked byte for byte by
 * sim_golden_test (testdata/golden_cc.ini). */
#include <string.h>

#include "sim_int.h"
#include "sim_test_util.h"

struct measure {
	double mean_q_bytes, max_q_bytes, util;
	double jain;             /* Jain's index of the flows' throughput (1 = equal shares) */
	uint64_t drops, timeouts, retx;
	double t0_us, t1_us;
};

static struct sim *make(const char *scen, const char *const *kv)
{
	const char *dir = getenv("SIM_EXAMPLES");
	char path[1024], err[512];
	struct sim_config c;
	test_config(&c, NULL);
	snprintf(path, sizeof(path), "%s/%s", dir, scen);
	if (sim_config_load(&c, path, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	c.timeseries_us = 0;
	for (; kv && *kv; kv++)
		CHECK(sim_config_set_arg(&c, *kv) == 0);
	return test_sim(&c);
}

/* Runs the scenario and samples the receiver's leaf port every microsecond from warm_us on,
 * while every flow is still active (the steady state of N flows). */
static struct measure run(const char *scen, const char *const *kv, double warm_us)
{
	struct sim *s = make(scen, kv);
	uint32_t dst = s->cfg.incast_dst;
	const struct sim_port *bott = s->hosts[dst].port.peer;
	struct measure m = { 0 };
	double qsum = 0;
	uint64_t n = 0, tx0 = 0;
	sim_time_ps t = sim_time_from_us_f(warm_us), step = sim_time_from_us(1), t0 = 0;
	sim_run_until(s, t);
	uint64_t *ftx = calloc(s->nflows, sizeof(*ftx));
	CHECK(ftx);
	for (uint32_t i = 0; i < s->nflows; i++) /* one flow per sender */
		ftx[i] = s->hosts[s->flows[i].src].port.tx_bytes;
	tx0 = bott->tx_bytes;
	t0 = s->now;
	while (!s->finished && s->flows_done == 0) {
		t += step;
		if (sim_run_until(s, t))
			break;
		if (s->flows_done)
			break;
		qsum += (double)bott->q_bytes;
		if ((double)bott->q_bytes > m.max_q_bytes)
			m.max_q_bytes = (double)bott->q_bytes;
		n++;
	}
	sim_time_ps t1 = s->now;
	m.util = (double)(bott->tx_bytes - tx0) * 8e12 / ((double)bott->rate_bps * (double)(t1 - t0));
	m.mean_q_bytes = n ? qsum / (double)n : 0;
	double sum = 0, sq = 0;
	for (uint32_t i = 0; i < s->nflows; i++) {
		double x = (double)(s->hosts[s->flows[i].src].port.tx_bytes - ftx[i]);
		sum += x;
		sq += x * x;
	}
	m.jain = sq > 0 ? sum * sum / ((double)s->nflows * sq) : 0;
	free(ftx);
	m.t0_us = sim_time_to_us(t0);
	m.t1_us = sim_time_to_us(t1);
	sim_run(s, NULL, NULL);
	struct sim_stats st;
	sim_get_stats(s, &st);
	CHECK_EQ(st.flows_done, st.flows);
	m.drops = st.drops_total;
	m.timeouts = st.timeouts;
	m.retx = st.retx_pkts;
	sim_destroy(s);
	CHECK(n > 1000); /* at least a millisecond of steady state was sampled */
	return m;
}

static void show(const char *name, const struct measure *m)
{
	printf("%-22s %6.0f to %6.0f us: mean queue %7.0f B (max %7.0f), utilisation %.3f, Jain %.3f, "
	       "drops %llu, timeouts %llu, retransmissions %llu\n", name, m->t0_us, m->t1_us,
	       m->mean_q_bytes, m->max_q_bytes, m->util, m->jain, (unsigned long long)m->drops,
	       (unsigned long long)m->timeouts, (unsigned long long)m->retx);
}

/* DCTCP: the queue follows K, the link stays full, nothing is dropped. */
static void test_dctcp_queue_at_k(void)
{
	const double ks[] = { 50000, 150000 };
	double prev = 0;
	for (unsigned i = 0; i < 2; i++) {
		char k[64];
		snprintf(k, sizeof(k), "dctcp.k_bytes=%.0f", ks[i]);
		const char *kv[] = { k, NULL };
		struct measure m = run("dctcp.ini", kv, 500);
		show(k, &m);
		CHECK(m.mean_q_bytes >= 0.5 * ks[i]);
		CHECK(m.mean_q_bytes <= 2 * ks[i]);
		CHECK(m.util >= 0.9);
		CHECK_EQ(m.drops, 0);
		CHECK_EQ(m.timeouts, 0);
		CHECK(m.mean_q_bytes > prev); /* a larger K, a larger queue */
		prev = m.mean_q_bytes;
	}
}

/* HPCC: near-zero queue at high utilisation; DCQCN on the same inputs queues far more. */
static void test_hpcc_near_zero_queue(void)
{
	struct measure h = run("hpcc.ini", NULL, 500);
	show("hpcc", &h);
	const char *dcqcn[] = { "host.cc=dcqcn", NULL };
	struct measure d = run("hpcc.ini", dcqcn, 500);
	show("dcqcn (same inputs)", &d);
	const char *dctcp[] = { "host.cc=dctcp", NULL };
	struct measure t = run("hpcc.ini", dctcp, 500);
	show("dctcp (same inputs)", &t);
	/* One BDP of the bottleneck: 100 Gbit/s times the 5.35 us base RTT of a remote flow. */
	double bdp = 100e9 / 8 * 5.35e-6;
	CHECK(h.mean_q_bytes < 0.1 * bdp);
	CHECK(h.mean_q_bytes < 0.05 * d.mean_q_bytes);
	CHECK(h.mean_q_bytes < 0.1 * t.mean_q_bytes);
	CHECK(h.util >= 0.9);
	CHECK(h.util <= 0.97); /* eta = 0.95 is the target, not the line rate */
	CHECK_EQ(h.drops, 0);
	CHECK_EQ(h.timeouts, 0);
	/* With the paper's rule W_AI = W_init (1 - eta) / N (67 KB * 0.05 / 8 flows ~ 400 B) the
	 * additive increase evens the shares out; the queue stays near empty. */
	const char *wai[] = { "hpcc.wai_bytes=400", NULL };
	struct measure f = run("hpcc.ini", wai, 500);
	show("hpcc, W_AI = 400 B", &f);
	CHECK(f.jain >= 0.95);
	CHECK(f.jain > h.jain);
	CHECK(f.mean_q_bytes < 0.1 * bdp);
	CHECK(f.util >= 0.9);
	CHECK_EQ(f.drops, 0);
}

/* Window-based senders with coalesced ACKs (every 4 packets): windows of 2-3 packets per flow in a
 * 15-to-1 incast still get their ACKs (AckReq), so no flow ever waits for a timeout. */
static void test_small_windows_no_stall(void)
{
	const char *ccs[] = { "host.cc=dctcp", "host.cc=hpcc" };
	for (unsigned i = 0; i < 2; i++) {
		const char *kv[] = { ccs[i], "workload.incast_n=15", "workload.size_bytes=2000000", NULL };
		struct sim *s = make("dctcp.ini", kv);
		sim_run(s, NULL, NULL);
		struct sim_stats st;
		sim_get_stats(s, &st);
		printf("%s 15-to-1: %u/%u flows, timeouts %llu, drops %llu\n", ccs[i], st.flows_done,
		       st.flows, (unsigned long long)st.timeouts, (unsigned long long)st.drops_total);
		CHECK_EQ(st.flows_done, st.flows);
		CHECK_EQ(st.timeouts, 0);
		CHECK_EQ(st.drops_total, 0);
		sim_destroy(s);
	}
}

/* The same inputs give the same outputs (the modules keep no hidden state between runs). */
static void test_deterministic(void)
{
	const char *ccs[] = { "host.cc=dctcp", "host.cc=hpcc" };
	for (unsigned i = 0; i < 2; i++) {
		char *out[2] = { NULL, NULL };
		size_t len[2];
		for (unsigned r = 0; r < 2; r++) {
			const char *kv[] = { ccs[i], "workload.size_bytes=1000000", NULL };
			struct sim *s = make("dctcp.ini", kv);
			sim_run(s, NULL, NULL);
			FILE *f = open_memstream(&out[r], &len[r]);
			sim_write_fct_csv(s, f);
			sim_write_summary(s, f);
			fclose(f);
			sim_destroy(s);
		}
		CHECK(len[0] == len[1] && !memcmp(out[0], out[1], len[0]));
		free(out[0]);
		free(out[1]);
	}
}

int main(void)
{
	if (!getenv("SIM_EXAMPLES")) {
		fprintf(stderr, "SIM_EXAMPLES not set\n");
		return 77;
	}
	test_dctcp_queue_at_k();
	test_hpcc_near_zero_queue();
	test_small_windows_no_stall();
	test_deterministic();
	puts("sim_cc_test: ok");
	return 0;
}
