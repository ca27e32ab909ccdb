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
	CHECK_EQ_U(s->flows_done, s->nflows);
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
	CHECK_EQ_U(s->nflows, 6);
	CHECK_EQ_U(by_id(s, 1)->start_ps, 2500000);
	CHECK_EQ_U(by_id(s, 2)->trig_start, 1);
	run(s);
	const struct sim_flow *f1 = by_id(s, 1), *f2 = by_id(s, 2), *f3 = by_id(s, 3), *f4 = by_id(s, 4),
		*f5 = by_id(s, 5), *f6 = by_id(s, 6);
	CHECK_EQ_U(f2->start_ps, f1->sender_done_ps); /* oneshot: both start together */
	CHECK_EQ_U(f3->start_ps, f1->sender_done_ps);
	/* multishot: the first completion starts 4, the second starts 5 */
	sim_time_ps first = f2->finish_ps < f3->finish_ps ? f2->finish_ps : f3->finish_ps;
	sim_time_ps second = f2->finish_ps < f3->finish_ps ? f3->finish_ps : f2->finish_ps;
	CHECK_EQ_U(f4->start_ps, first);
	CHECK_EQ_U(f5->start_ps, second);
	/* barrier: 6 starts when both 4 and 5 are received */
	CHECK_EQ_U(f6->start_ps, f4->finish_ps > f5->finish_ps ? f4->finish_ps : f5->finish_ps);
	sim_destroy(s);

	/* no header counts, flows without ids, failure lines are read and counted */
	s = sim_with("Nodes 16\n0->1 start 0 size 5000\n1->0 start 0 size 5000\nfailure switch_type TOR switch_id 0 link_id 0\n", &rc);
	CHECK(rc == 0);
	CHECK_EQ_U(s->nflows, 2);
	CHECK_EQ_U(s->cm_failures, 1);
	run(s);
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
