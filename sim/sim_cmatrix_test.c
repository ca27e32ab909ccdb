/* sim/sim_cmatrix_test.c: htsim connection matrices: header counts, flow options, the three
 * trigger kinds (oneshot, multishot, barrier) with their htsim semantics, and rejection of
 * malformed files with a useful message. */
#include <errno.h>
#include <string.h>

#include "sim_int.h"
#include "sim_test_util.h"

static struct sim *sim_with(const char *text, int *rc)
{
	struct sim_config c;
	static const char *const kv[] = { "topology.k=4", "workload.type=none", "host.cc=none", NULL };
	test_config(&c, kv);
	struct sim *s = test_sim(&c);
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	CHECK(f);
	*rc = sim_cmatrix_parse(s, f, "test.cm");
	fclose(f);
	return s;
}

static const struct sim_flow *by_id(struct sim *s, uint32_t id)
{
	for (uint32_t i = 0; i < s->nflows; i++)
		if (s->flows[i].user_id == id)
			return &s->flows[i];
	CHECK(!"flow id not found");
	return NULL;
}

static void run(struct sim *s)
{
	for (uint32_t i = 0; i < s->nflows; i++) { /* as sim_create does for file workloads */
		struct sim_flow *f = &s->flows[i];
		sim_ev_init(&f->start_ev, sim_flow_start_ev);
		if (!f->trig_start)
			sim_schedule(s, &f->start_ev, f->start_ps);
	}
	sim_run(s, NULL, NULL);
	CHECK_EQ(s->flows_done, s->nflows);
}

int main(void)
{
	int rc;
	/* chain: 1 -> (send done) oneshot 1 -> flows 2 and 3; multishot 2 fed by 2 and 3 starts
	 * 4 then 5; barrier 3 (count 2) fed by 4 and 5 (recv done) starts 6. */
	const char *cm =
		"# comment\n"
		"Nodes 16\n"
		"Connections 6\n"
		"Triggers 3\n"
		"0->5 id 1 start 2500000 size 100000 send_done_trigger 1\n"
		"1->6 id 2 trigger 1 size 50000 recv_done_trigger 2 prio 3\n"
		"2->7 id 3 trigger 1 size 60000 recv_done_trigger 2\n"
		"3->8 id 4 trigger 2 size 40000 recv_done_trigger 3\n"
		"4->9 id 5 trigger 2 size 40000 recv_done_trigger 3\n"
		"10->11 id 6 trigger 3 size 1000\n"
		"trigger id 1 oneshot\n"
		"trigger id 2 multishot\n"
		"trigger id 3 barrier count 2\n";
	struct sim *s = sim_with(cm, &rc);
	if (rc)
		fprintf(stderr, "%s\n", s->err);
	CHECK(rc == 0);
	CHECK_EQ(s->nflows, 6);
	CHECK_EQ(by_id(s, 1)->start_ps, 2500000);
	CHECK_EQ(by_id(s, 2)->trig_start, 1);
	run(s);
	const struct sim_flow *f1 = by_id(s, 1), *f2 = by_id(s, 2), *f3 = by_id(s, 3), *f4 = by_id(s, 4),
		*f5 = by_id(s, 5), *f6 = by_id(s, 6);
	CHECK_EQ(f2->start_ps, f1->sender_done_ps); /* oneshot: both start together */
	CHECK_EQ(f3->start_ps, f1->sender_done_ps);
	/* multishot: the first completion starts 4, the second starts 5 */
	sim_time_ps first = f2->finish_ps < f3->finish_ps ? f2->finish_ps : f3->finish_ps;
	sim_time_ps second = f2->finish_ps < f3->finish_ps ? f3->finish_ps : f2->finish_ps;
	CHECK_EQ(f4->start_ps, first);
	CHECK_EQ(f5->start_ps, second);
	/* barrier: 6 starts when both 4 and 5 are received */
	CHECK_EQ(f6->start_ps, f4->finish_ps > f5->finish_ps ? f4->finish_ps : f5->finish_ps);
	sim_destroy(s);

	/* no header counts, flows without ids */
	s = sim_with("Nodes 16\n0->1 start 0 size 5000\n1->0 start 0 size 5000\n", &rc);
	CHECK(rc == 0);
	CHECK_EQ(s->nflows, 2);
	run(s);
	sim_destroy(s);

	/* Constructs of htsim's own files and generators (sim/datacenter/connection_matrices):
	 * fractional starts in picoseconds, "addon", "prio", blank lines, several blanks
	 * between tokens, tabs, CRLF line ends. */
	s = sim_with("Nodes 16\r\nConnections 3\r\nTriggers 1\r\n\r\n"
		     "5->2 id 7 start 1500000.000000 size 30000 send_done_trigger 9 prio 2\r\n"
		     "2->5  id 8\ttrigger 9 size 30000 addon\r\n"
		     "3->4 id 9 start 0 size 4096 prio 1000\r\n"
		     "trigger id 9 oneshot\r\n", &rc);
	if (rc)
		fprintf(stderr, "%s\n", s->err);
	CHECK(rc == 0);
	CHECK_EQ(by_id(s, 7)->start_ps, 1500000); /* 1.5 us */
	run(s);
	CHECK_EQ(by_id(s, 8)->start_ps, by_id(s, 7)->sender_done_ps);
	sim_destroy(s);

	/* older htsim: start in microseconds, selected by workload.cm_start_unit = us */
	{
		struct sim_config c;
		static const char *const kv[] = { "topology.k=4", "workload.type=none",
			"workload.cm_start_unit=us", NULL };
		test_config(&c, kv);
		s = test_sim(&c);
		const char *t = "Nodes 16\nConnections 1\n0->1 id 1 start 2.5 size 1000\n";
		FILE *f = fmemopen((void *)t, strlen(t), "r");
		CHECK(sim_cmatrix_parse(s, f, "test.cm") == 0);
		fclose(f);
		CHECK_EQ(by_id(s, 1)->start_ps, 2500000);
		sim_destroy(s);
	}

	/* size 0 (htsim: no flow size) sends until sim.stop_us, and needs it */
	{
		struct sim_config c;
		static const char *const kv[] = { "topology.k=4", "workload.type=none", "sim.stop_us=50",
			"host.cc=none", NULL };
		test_config(&c, kv);
		s = test_sim(&c);
		const char *t = "Nodes 16\nConnections 2\n0->5 start 0.000000 size 0\n1->5 start 0.000000 size 0\n";
		FILE *f = fmemopen((void *)t, strlen(t), "r");
		CHECK(sim_cmatrix_parse(s, f, "test.cm") == 0);
		fclose(f);
		for (uint32_t i = 0; i < s->nflows; i++) {
			sim_ev_init(&s->flows[i].start_ev, sim_flow_start_ev);
			sim_schedule(s, &s->flows[i].start_ev, 0);
		}
		sim_run(s, NULL, NULL);
		CHECK_EQ(s->flows_done, 0);
		CHECK_EQ(s->now, sim_time_from_us(50));
		/* two senders share the receiver's 100G link for 50 us (at most 625 kB on the wire) */
		uint64_t rx = s->flows[0].bytes_rx + s->flows[1].bytes_rx;
		CHECK(rx > 500000 && rx < 630000);
		sim_destroy(s);
		s = sim_with("Nodes 16\n0->5 start 0 size 0\n", &rc);
		CHECK(rc == -EINVAL && strstr(s->err, "stop_us"));
		sim_destroy(s);
	}

	/* Link failures as htsim models them: AGG switch S loses its uplink L to core
	 * (S mod k/2) * k/2 + L; routes avoid it. k = 4: agg 0 (pod 0) loses core 1. A flow from
	 * pod 0 to pod 1 then never crosses that link, and still completes. */
	s = sim_with("Nodes 16\nConnections 4\nFailures 1\n"
		     "0->4 id 1 start 0 size 400000\n1->5 id 2 start 0 size 400000\n"
		     "4->0 id 3 start 0 size 400000\n5->1 id 4 start 0 size 400000\n"
		     "failure switch_type AGG switch_id 0 link_id 1\n", &rc);
	if (rc)
		fprintf(stderr, "%s\n", s->err);
	CHECK(rc == 0);
	CHECK_EQ(s->cm_failures, 1);
	{
		struct sim_switch *agg0 = &s->sws[8]; /* 8 ToRs, then the aggregation switches */
		struct sim_node *core1 = &s->sws[8 + 8 + 1].n;
		struct sim_port *dead = NULL;
		for (uint32_t p = 0; p < agg0->n.nports; p++)
			if (agg0->n.ports[p].peer->node == core1)
				dead = &agg0->n.ports[p];
		CHECK(dead && dead->down && dead->peer->down);
		run(s);
		CHECK_EQ(dead->tx_pkts, 0);
		CHECK_EQ(dead->peer->tx_pkts, 0);
	}
	sim_destroy(s);

	static const char *const bad[] = {
		"Nodes 16\nConnections 2\n0->1 start 0 size 100\n",                 /* count mismatch */
		"Nodes 16\n0->1 start 0 size 100 colour red\n",                     /* unknown token */
		"Nodes 16\n0->1 id 1 trigger 4 size 100\n",                         /* undefined trigger */
		"Nodes 16\n0->1 id 1 size 100\n",                                   /* no start */
		"Nodes 16\n0->1 id 1 start 0 trigger 2 size 100\ntrigger id 2 oneshot\n", /* both */
		"Nodes 16\n0->99 start 0 size 100\n",                               /* node out of range */
		"Nodes 16\n0->1 id 3 start 0 size 100\n2->1 id 3 start 0 size 100\n", /* duplicate id */
		"Nodes 16\ntrigger id 1\n",                                         /* trigger type */
		"Nodes 16\nfailure switch_type TOR switch_id 0 link_id 0\n",        /* not modelled */
		"Nodes 16\nfailure switch_type AGG switch_id 0 link_id 2\n",        /* no such link */
		"Nodes 16\nfailure switch_type AGG switch_id 1 link_id 0\nfailure switch_type AGG switch_id 1 link_id 0\n",
		"Nodes 16\n0->1 start nan size 100\n",                              /* bad start */
		"Nodes 16\n0->1 start 0 size 2000000000000\n",                      /* > 1 TB */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s = sim_with(bad[i], &rc);
		if (rc == 0)
			fprintf(stderr, "accepted bad matrix %zu\n", i);
		CHECK(rc == -EINVAL);
		CHECK(strstr(s->err, "test.cm") != NULL);
		sim_destroy(s);
	}
	puts("sim_cmatrix_test: ok");
	return 0;
}
