/* sim/sim_topo_file_test.c: topology files (topology.type = file). The draft-lyu example file
 * gives the lyu4 generator's results byte for byte; every generator's topology written with
 * sim_write_topology and read back runs identically (fat tree, leaf-spine with parallel links,
 * lyu4); each malformed input is refused with file:line and its reason; defaults, derived tiers
 * and host numbering follow docs/sim.md. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "sim_test_util.h"
#include "sim_topo_int.h"

static char *render(struct sim *s, void (*fn)(const struct sim *, FILE *), size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	CHECK(f);
	fn(s, f);
	fclose(f);
	return buf;
}

/* Same fabric (tiers, speeds, latencies, port order), same flows, same counters. */
static void check_same_run(struct sim *a, struct sim *b)
{
	CHECK_EQ(a->nhosts, b->nhosts);
	CHECK_EQ(a->nsw, b->nsw);
	CHECK_EQ(a->nports, b->nports);
	for (uint32_t j = 0; j < a->nsw; j++) {
		CHECK_EQ(a->sws[j].n.tier, b->sws[j].n.tier);
		CHECK(!strcmp(a->sws[j].n.name, b->sws[j].n.name));
	}
	for (uint32_t i = 0; i < a->nports; i++) {
		const struct sim_port *p = a->ports[i], *q = b->ports[i];
		CHECK_EQ(p->node->id, q->node->id);
		CHECK_EQ(p->peer->node->id, q->peer->node->id);
		CHECK_EQ(p->idx, q->idx);
		CHECK_EQ(p->rate_bps, q->rate_bps);
		CHECK_EQ(p->latency_ps, q->latency_ps);
		CHECK_EQ(p->link_tier, q->link_tier);
		CHECK_EQ(p->headroom_bytes, q->headroom_bytes);
	}
	sim_run(a, NULL, NULL);
	sim_run(b, NULL, NULL);
	struct sim_stats sa, sb;
	sim_get_stats(a, &sa);
	sim_get_stats(b, &sb);
	CHECK_EQ(sa.flows_done, sa.flows);
	CHECK(sa.flows > 0);
	CHECK_EQ(sa.events, sb.events);
	CHECK(!memcmp(&sa, &sb, sizeof(sa)));
	size_t la, lb;
	char *fa = render(a, sim_write_fct_csv, &la), *fb = render(b, sim_write_fct_csv, &lb);
	CHECK_EQ(la, lb);
	CHECK(!memcmp(fa, fb, la));
	free(fa);
	free(fb);
}

/* examples/sim/lyu4_file.ini (the file) against examples/sim/ccm_lyu7.ini (the generator). */
static void test_lyu4_example(const char *ex)
{
	char path[1024], err[512];
	struct sim_config cg, cf;
	test_config(&cg, NULL);
	test_config(&cf, NULL);
	snprintf(path, sizeof(path), "%s/ccm_lyu7.ini", ex);
	CHECK_MSG(!sim_config_load(&cg, path, err, sizeof(err)), "%s", err);
	snprintf(path, sizeof(path), "%s/lyu4_file.ini", ex);
	CHECK_MSG(!sim_config_load(&cf, path, err, sizeof(err)), "%s", err);
	CHECK_EQ(cf.topo, SIM_TOPO_FILE);
	/* a relative topology.file is taken from the scenario's directory and made absolute */
	CHECK(cf.topo_file[0] == '/');
	CHECK(strstr(cf.topo_file, "/lyu4_topology.txt"));
	struct sim *a = test_sim(&cg), *b = test_sim(&cf);
	check_same_run(a, b);
	size_t n = sim_ccm_event_count(a);
	CHECK(n > 0);
	CHECK_EQ(n, sim_ccm_event_count(b));
	for (size_t i = 0; i < n; i++)
		CHECK(!memcmp(sim_ccm_event_get(a, i), sim_ccm_event_get(b, i), sizeof(struct sim_ccm_event)));
	sim_destroy(a);
	sim_destroy(b);
	puts("ok: examples/sim/lyu4_topology.txt = topology.type lyu4 (fct, counters, CCM events)");
}

/* A generated topology written as a file and read back runs exactly like the generator. */
static void roundtrip(const char *what, const char *const *kv)
{
	struct sim_config cg, cf;
	test_config(&cg, kv);
	struct sim *a = test_sim(&cg);
	char path[] = "/tmp/inca-sim-topo-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	FILE *f = fdopen(fd, "w");
	CHECK(f);
	CHECK_EQ(sim_write_topology(a, f), 0);
	CHECK_EQ(fclose(f), 0);
	cf = cg;
	CHECK_EQ(sim_config_set(&cf, "topology.type", "file"), 0);
	CHECK_EQ(sim_config_set(&cf, "topology.file", path), 0);
	struct sim *b = test_sim(&cf);
	/* writing the read topology gives the same text */
	size_t l1, l2;
	char *t1 = NULL, *t2 = NULL;
	FILE *m1 = open_memstream(&t1, &l1), *m2 = open_memstream(&t2, &l2);
	CHECK(m1 && m2);
	sim_write_topology(a, m1);
	sim_write_topology(b, m2);
	fclose(m1);
	fclose(m2);
	CHECK_EQ(l1, l2);
	CHECK(!memcmp(t1, t2, l1));
	free(t1);
	free(t2);
	check_same_run(a, b);
	sim_destroy(a);
	sim_destroy(b);
	unlink(path);
	printf("ok: %s written as a file runs identically\n", what);
}

static void test_roundtrips(void)
{
	static const char *const ft[] = { "topology.type=fattree", "topology.k=4", "switch.routing=spray",
		"host.transport=sr", "workload.type=permutation", "workload.size_bytes=300000", NULL };
	static const char *const ftecmp[] = { "topology.type=fattree", "topology.k=4",
		"topology.hosts_per_tor=3", "topology.tier2_gbps=200", "topology.tier2_latency_ns=700",
		"switch.routing=ecmp", "workload.type=alltoall", "workload.size_bytes=50000", NULL };
	static const char *const ls[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=2",
		"topology.parallel_links=2", "topology.hosts_per_tor=3", "switch.routing=spray_ideal",
		"host.transport=sr", "workload.type=alltoall", "workload.size_bytes=60000", NULL };
	static const char *const ly[] = { "topology.type=lyu4", "topology.racks=3", "topology.l3_per_srack=3",
		"topology.l4_per_srack=1", "topology.tier3_gbps=200", "switch.routing=adaptive",
		"host.transport=sr", "workload.type=allreduce", "workload.size_bytes=400000", NULL };
	roundtrip("fat tree k=4 (spray)", ft);
	roundtrip("fat tree k=4, 3 hosts per ToR, 200G core links (ECMP)", ftecmp);
	roundtrip("leaf-spine with 2 parallel links (spray_ideal)", ls);
	roundtrip("lyu4 3x2 (adaptive)", ly);
}

/* ---- refusals ------------------------------------------------------------------------------ */
struct bad { const char *text, *want; };

static void test_errors(void)
{
	static const struct bad cases[] = {
		{ "frob s0\n", "t.txt:1: unknown keyword 'frob' (expected switch, host or link)" },
		{ "switch\n", "t.txt:1: 'switch' needs a name" },
		{ "host\n", "t.txt:1: 'host' needs a name" },
		{ "switch s/0\n", "t.txt:1: bad name 's/0'" },
		{ "switch -s\n", "t.txt:1: bad name '-s'" },
		{ "switch abcdefghijabcdefghijabcdefghij12\n", "t.txt:1: bad name" },
		{ "switch all\n", "t.txt:1: the name 'all' is reserved" },
		{ "switch s0\nhost h0 tier=1\n", "t.txt:2: unexpected 'tier=1': a host line is 'host NAME'" },
		{ "switch s0 tier 2\n", "t.txt:1: unexpected 'tier'" },
		{ "switch s0 tier=0\n", "t.txt:1: bad tier '0'" },
		{ "switch s0 tier=256\n", "t.txt:1: bad tier '256'" },
		{ "switch s0 tier=2 tier=3\n", "t.txt:1: tier given twice" },
		{ "switch s0\n\n# c\nswitch s0\n", "t.txt:4: duplicate name 's0' (first declared at line 1)" },
		{ "switch x\nhost x\n", "t.txt:2: duplicate name 'x' (first declared at line 1)" },
		{ "switch s0\nhost h0\nlink h0\n", "t.txt:3: 'link' needs two nodes" },
		{ "switch s0\nhost h0\nlink h0 s1\n", "t.txt:3: unknown node 's1'" },
		{ "host h0\nlink h0 s0\nswitch s0\n", "t.txt:2: unknown node 's0'" },
		{ "switch s0\nlink s0 s0\n", "t.txt:2: self-loop: link from 's0' to itself" },
		{ "host a\nhost b\nlink a b\n", "t.txt:3: link between two hosts 'a' and 'b'" },
		{ "switch s\nswitch t\nhost a\nlink a s\nlink t a\n",
		  "t.txt:5: host 'a' already has a link (line 4): hosts are single-homed" },
		{ "switch s\nhost a\nlink a s count=2\n", "t.txt:3: count=2 on the link of host 'a'" },
		{ "switch s\nhost a\nlink a s gbps=0.5\n", "t.txt:3: bad gbps '0.5': a number from 1 to 3200" },
		{ "switch s\nhost a\nlink a s gbps=nan\n", "t.txt:3: bad gbps 'nan'" },
		{ "switch s\nhost a\nlink a s gbps=\n", "t.txt:3: bad gbps ''" },
		{ "switch s\nhost a\nlink a s gbps=100 gbps=100\n", "t.txt:3: gbps given twice" },
		{ "switch s\nhost a\nlink a s latency_ns=2e9\n", "t.txt:3: bad latency_ns '2e9'" },
		{ "switch s\nswitch t\nlink s t count=0\n", "t.txt:3: bad count '0'" },
		{ "switch s\nswitch t\nlink s t count=1x\n", "t.txt:3: bad count '1x'" },
		{ "switch s\nswitch t\nlink s t count=2 count=2\n", "t.txt:3: count given twice" },
		{ "switch s\nhost a\nlink a s speed=100\n", "t.txt:3: unknown option 'speed=100'" },
		{ "switch s\nhost a\nlink a s gbps=1 latency_ns=1 count=1 x y z\n", "t.txt:3: too many fields" },
		{ "# nothing\n\n", "t.txt: no hosts" },
		{ "", "t.txt: no hosts" },
		{ "switch s\nhost a\nhost b\nlink a s\n", "t.txt:3: host 'b' has no link" },
		{ "switch s\nswitch t\nswitch u\nhost a\nlink a s\nlink t u\n",
		  "t.txt:2: switch 't' is not connected to the rest of the fabric (no path to host 'a')" },
		{ "switch s\nswitch t\nhost a\nhost b\nlink a s\nlink b t\n",
		  "t.txt:2: switch 't' is not connected" },
		/* size limits (this test passes 4 hosts, 4 switches, 5 links, 3 ports per switch) */
		{ "host a\nhost b\nhost c\nhost d\nhost e\n", "t.txt:5: too many hosts (at most 4)" },
		{ "switch a\nswitch b\nswitch c\nswitch d\nswitch e\n", "t.txt:5: too many switches (at most 4)" },
		{ "switch s\nswitch t\nlink s t count=3\nlink s t\n", "t.txt:4: switch 's' would have more than 3 ports" },
		{ "switch s\nswitch t\nswitch u\nlink s t count=2\nlink t u\nlink t u\n",
		  "t.txt:6: switch 't' would have more than 3 ports" },
		{ "switch s\nswitch t\nswitch u\nswitch v\nlink s t count=2\nlink u v count=2\n"
		  "link s u\nlink t v\n", "t.txt:8: too many links (at most 5)" },
		{ "switch s\nswitch t\nlink s t count=4\n", "t.txt:3: bad count '4': an integer from 1 to 3" },
	};
	static const struct sim_topo_limits lim = { 4, 4, 5, 3 };
	struct sim_config c;
	test_config(&c, NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		FILE *f = fmemopen((void *)cases[i].text, strlen(cases[i].text), "r");
		if (!cases[i].text[0])
			f = fopen("/dev/null", "r");
		CHECK(f);
		struct sim_topo_links l;
		struct sim_topo_nodes nd;
		char err[512] = "";
		int rc = sim_topo_file_parse(&c, f, "t.txt", &lim, &l, &nd, err, sizeof(err));
		fclose(f);
		CHECK_MSG(rc == -EINVAL, "case %zu accepted (rc %d): %s", i, rc, cases[i].text);
		CHECK_MSG(strstr(err, cases[i].want), "case %zu: got '%s', want '%s'", i, err, cases[i].want);
		CHECK(!l.v && !nd.tier && !nd.names && !nd.hnames);
	}
	/* a line over 1023 characters, and a NUL byte */
	char longl[1100];
	memset(longl, ' ', sizeof(longl));
	memcpy(longl, "switch s", 8);
	longl[sizeof(longl) - 1] = '\n';
	char nul[] = "switch s\0t\n";
	const struct { const char *t; size_t n; const char *want; } raw[] = {
		{ longl, sizeof(longl), "t.txt:1: line longer than 1023 characters" },
		{ nul, sizeof(nul) - 1, "t.txt:1: NUL byte in the line" },
	};
	for (size_t i = 0; i < 2; i++) {
		FILE *f = fmemopen((void *)raw[i].t, raw[i].n, "r");
		struct sim_topo_links l;
		struct sim_topo_nodes nd;
		char err[512] = "";
		CHECK_EQ(sim_topo_file_parse(&c, f, "t.txt", NULL, &l, &nd, err, sizeof(err)), -EINVAL);
		fclose(f);
		CHECK_MSG(strstr(err, raw[i].want), "got '%s'", err);
	}
	/* through sim_create: the reason reaches the caller */
	struct sim *s;
	char err[512];
	CHECK_EQ(sim_config_set(&c, "topology.type", "file"), 0);
	CHECK(sim_create(&c, &s, err, sizeof(err)) != 0);
	CHECK(strstr(err, "topology.type = file needs topology.file"));
	CHECK_EQ(sim_config_set(&c, "topology.file", "/nonexistent/topo.txt"), 0);
	CHECK(sim_create(&c, &s, err, sizeof(err)) != 0);
	CHECK(strstr(err, "topology.file: cannot open /nonexistent/topo.txt"));
	puts("ok: malformed topology files are refused with file:line and the reason");
}

/* ---- defaults, tiers, numbering ----------------------------------------------------------- */
static struct sim *sim_from_text(const char *text, const char *const *kv, char *path, size_t len)
{
	snprintf(path, len, "/tmp/inca-sim-topo-XXXXXX");
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	struct sim_config c;
	test_config(&c, kv);
	CHECK_EQ(sim_config_set(&c, "topology.type", "file"), 0);
	CHECK_EQ(sim_config_set(&c, "topology.file", path), 0);
	return test_sim(&c);
}

static const struct sim_port *port_to(const struct sim *s, const char *a, const char *b, unsigned nth)
{
	for (uint32_t i = 0; i < s->nports; i++)
		if (!strcmp(s->ports[i]->node->name, a) && !strcmp(s->ports[i]->peer->node->name, b) && !nth--)
			return s->ports[i];
	return NULL;
}

static void test_defaults(void)
{
	/* A 3-tier tree without tiers or speeds: tiers from the distance to the hosts, link tier
	 * = the lower tier of its ends, speeds and latencies from the tier parameters. */
	static const char *text =
		"# tiny three-tier tree\n"
		"switch core\t\n"
		"switch agg0\r\n"
		"switch agg1\n"
		"switch tor0\n"
		"switch tor1\n"
		"host gpu0\nhost gpu1   # comment\nhost gpu2\nhost gpu3\n"
		"link gpu0 tor0\nlink tor0 gpu1\nlink gpu2 tor1\nlink gpu3 tor1 latency_ns=0\n"
		"link tor0 agg0\nlink tor1 agg1 gbps=400 count=2\n"
		"link agg0 core\nlink core agg1 latency_ns=1234.5\n";
	static const char *const kv[] = { "topology.host_gbps=25", "topology.tier1_gbps=50",
		"topology.tier2_gbps=75", "topology.host_latency_ns=100", "topology.tier1_latency_ns=200",
		"topology.tier2_latency_ns=300", "workload.type=alltoall", "workload.size_bytes=20000", NULL };
	char path[64];
	struct sim *s = sim_from_text(text, kv, path, sizeof(path));
	CHECK_EQ(s->nhosts, 4u);
	CHECK_EQ(s->nsw, 5u);
	CHECK_EQ(s->nlinks, 9u);
	CHECK(!strcmp(s->hosts[1].n.name, "gpu1"));
	CHECK(!strcmp(s->sws[0].n.name, "core"));
	CHECK_EQ(s->sws[0].n.tier, 3);
	CHECK_EQ(s->sws[1].n.tier, 2);
	CHECK_EQ(s->sws[3].n.tier, 1);
	const struct sim_port *p = port_to(s, "gpu0", "tor0", 0);
	CHECK(p && p->rate_bps == 25000000000ull && p->latency_ps == 100000 && p->link_tier == 0);
	p = port_to(s, "tor1", "gpu3", 0);
	CHECK(p && p->rate_bps == 25000000000ull && p->latency_ps == 0);
	p = port_to(s, "agg0", "tor0", 0);
	CHECK(p && p->rate_bps == 50000000000ull && p->latency_ps == 200000 && p->link_tier == 1);
	CHECK(port_to(s, "tor1", "agg1", 1) && !port_to(s, "tor1", "agg1", 2));
	p = port_to(s, "agg1", "tor1", 1);
	CHECK(p && p->rate_bps == 400000000000ull && p->latency_ps == 200000);
	p = port_to(s, "core", "agg1", 0);
	CHECK(p && p->rate_bps == 75000000000ull && p->latency_ps == 1234500 && p->link_tier == 2);
	/* oversubscription: the worst edge switch, tor0 (2 x 25G over one 50G uplink) */
	struct sim_stats st;
	sim_get_stats(s, &st);
	CHECK_NEAR(st.oversubscription, 1.0, 1e-12);
	sim_run(s, NULL, NULL);
	sim_get_stats(s, &st);
	CHECK_EQ(st.flows_done, 12u);
	sim_destroy(s);
	unlink(path);
	puts("ok: derived tiers, default speeds and latencies, names from the file");
}

static void test_numbering(void)
{
	/* Hosts are numbered in the order of their lines, whatever the order of their links,
	 * even when the hosts of one edge switch are not consecutive (h0 and h2 on s, h1 on t). */
	static const char *text =
		"switch s\nswitch t\nhost h0\nhost h1\nhost h2\nhost h3\n"
		"link h2 s\nlink s t count=2\nlink h3 t\nlink h1 t\nlink s h0\n";
	static const char *const kv[] = { "workload.type=alltoall", "workload.size_bytes=30000",
		"switch.routing=spray", "host.transport=sr", NULL };
	char path[64];
	struct sim *s = sim_from_text(text, kv, path, sizeof(path));
	CHECK(!strcmp(s->hosts[2].n.name, "h2"));
	CHECK(!strcmp(s->hosts[2].port.peer->node->name, "s"));
	CHECK(!strcmp(s->hosts[1].port.peer->node->name, "t"));
	for (uint32_t j = 0; j < s->nsw; j++)
		for (uint32_t h = 0; h < s->nhosts; h++) {
			const struct sim_rgroup *g = sim_route_group(&s->sws[j], h);
			CHECK(g);
			const struct sim_port *out = &s->sws[j].n.ports[s->sws[j].gports[g->off]];
			if (s->hosts[h].port.peer->node == &s->sws[j].n)
				CHECK(out->peer->node == &s->hosts[h].n);
			else
				CHECK_EQ(g->n, 2); /* both parallel links */
		}
	sim_run(s, NULL, NULL);
	struct sim_stats st;
	sim_get_stats(s, &st);
	CHECK_EQ(st.flows_done, 12u);
	for (uint32_t i = 0; i < sim_flow_count(s); i++) {
		struct sim_flow_result r;
		sim_flow_result(s, i, &r);
		CHECK(r.done && r.ideal_ps > 0 && r.finish_ps - r.start_ps >= r.ideal_ps);
	}
	sim_destroy(s);
	unlink(path);
	puts("ok: host ids follow the host lines; any link order and non-consecutive hosts route");
}

int main(void)
{
	const char *ex = getenv("SIM_EXAMPLES");
	test_errors();
	test_defaults();
	test_numbering();
	test_roundtrips();
	if (!ex) {
		fprintf(stderr, "SIM_EXAMPLES not set: example file not checked\n");
		return 77;
	}
	test_lyu4_example(ex);
	return 0;
}
