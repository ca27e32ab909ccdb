/* sim/sim_tc_test.c: traffic classes (sim_tc.c). Strict priority lets a high-priority flow cross
 * a bottleneck near its ideal FCT while the bulk flow waits, and ECN (RED or DCTCP's) marks each
 * class on its own queue; DWRR weights 3:1 share a saturated link 3:1 (with packet-sized and smaller quanta); PFC
 * per class pauses the lossless class under incast while the lossy one drops, is never paused
 * and keeps sending while the other is paused; htsim's prio sets the class; an unused second
 * class changes nothing; bad values are refused with the parameter named. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "sim_int.h"
#include "sim_tc.h"
#include "sim_test_util.h"

/* 2 leaves x 1 spine, 2 hosts each: h0, h1 on leaf0, h2, h3 on leaf1; 100G everywhere. */
#define SMALL "topology.type=leafspine", "topology.tors=2", "topology.spines=1", \
	"topology.hosts_per_tor=2", "workload.type=none", "host.cc=none"

static struct sim *make(const char *const *kv, int *rc, char *err, size_t errlen)
{
	struct sim_config c;
	struct sim *s = NULL;
	test_config(&c, kv);
	*rc = sim_create(&c, &s, err, errlen);
	return s;
}

static struct sim *make_ok(const char *const *kv)
{
	char err[512];
	int rc;
	struct sim *s = make(kv, &rc, err, sizeof(err));
	if (rc)
		fprintf(stderr, "sim_create: %s\n", err);
	CHECK_EQ(rc, 0);
	return s;
}

static struct sim_flow_result result(struct sim *s, uint32_t i)
{
	struct sim_flow_result r;
	CHECK(sim_flow_result(s, i, &r) == 0);
	return r;
}

static double fct_us(struct sim *s, uint32_t i)
{
	struct sim_flow_result r = result(s, i);
	CHECK(r.done);
	return sim_time_to_us(r.finish_ps - r.start_ps);
}

/* Bulk h0 -> h2 (2 MB at 0, class 0) and a short h1 -> h2 (300 KB at 20 us, class `hi_class`):
 * they share leaf0's uplink, the spine's downlink and h2's link. */
static struct sim *sp_run(const char *classes, unsigned hi_class, const char *cc)
{
	const char *const kv[] = { SMALL, classes, "switch.ecn_kmin_bytes=100000",
		"switch.ecn_kmax_bytes=100000", cc, "dctcp.k_bytes=60000", NULL };
	struct sim *s = make_ok(kv);
	CHECK(sim_flow_add(s, 0, 2, 2000000, 0) == 0);
	CHECK(sim_flow_add(s, 1, 2, 300000, sim_time_from_us(20)) == 1);
	CHECK(sim_tc_flow_set_class(s, 1, hi_class) == 0);
	sim_run(s, NULL, NULL);
	return s;
}

static void test_strict_priority(void)
{
	struct sim *one = sp_run("switch.traffic_classes=1", 0, "host.cc=none");
	struct sim *s = sp_run("switch.traffic_classes=2", 1, "host.cc=none");
	CHECK_EQ(sim_tc_flow_class(s, 1), 1);
	struct sim_flow_result bulk = result(s, 0), hi = result(s, 1);
	double hi_fct = fct_us(s, 1), hi_ideal = sim_time_to_us(hi.ideal_ps);
	double bulk_fct = fct_us(s, 0), bulk_ideal = sim_time_to_us(bulk.ideal_ps);
	printf("strict priority: high %.2f us (ideal %.2f, one class %.2f), bulk %.2f us (ideal %.2f, "
	       "one class %.2f)\n", hi_fct, hi_ideal, fct_us(one, 1), bulk_fct, bulk_ideal, fct_us(one, 0));
	/* High: its ideal plus at most a low packet in service per hop (3 x 0.33 us). */
	CHECK(hi_fct <= hi_ideal + 1.1);
	CHECK(hi_fct < 0.6 * fct_us(one, 1)); /* one class: it shares the bottleneck */
	/* Bulk waits the whole time the high flow holds the links. */
	double hi_wire_us = 74 * 4160 * 8 / 1e5;
	CHECK(bulk_fct >= bulk_ideal + 0.95 * hi_wire_us);
	CHECK(bulk.finish_ps > hi.finish_ps);
	/* ECN per class queue: the bulk's queue passes 100 KB, the high class never queues. */
	struct sim_tc_stats st;
	CHECK(sim_tc_get_stats(s, &st) == 0);
	CHECK_EQ(st.classes, 2);
	CHECK(st.c[0].ecn_marks > 0);
	CHECK_EQ(st.c[1].ecn_marks, 0);
	CHECK_EQ(st.c[0].flows, 1);
	CHECK_EQ(st.c[1].flows_done, 1);
	CHECK_EQ(st.c[1].rx_bytes, 300000);
	CHECK(st.c[1].max_queue_bytes <= 2 * 4160);
	CHECK(st.c[0].max_queue_bytes > 200000);
	sim_destroy(one);
	sim_destroy(s);
	/* DCTCP's marking (its ecn_mark hook) also looks at the class's own queue. */
	s = sp_run("switch.traffic_classes=2", 1, "host.cc=dctcp");
	CHECK(sim_tc_get_stats(s, &st) == 0);
	printf("dctcp, strict priority: high %.2f us, marks %llu (bulk) and %llu (high)\n", fct_us(s, 1),
	       (unsigned long long)st.c[0].ecn_marks, (unsigned long long)st.c[1].ecn_marks);
	CHECK(st.c[0].ecn_marks > 0);
	CHECK_EQ(st.c[1].ecn_marks, 0);
	sim_destroy(s);
}

/* Two 4 MB flows h0 -> h2 (class 0) and h1 -> h2 (class 1), lossless; leaf0's uplink is the
 * bottleneck. Returns class 0's delivered bytes over class 1's between 100 and 300 us. */
static double dwrr_share(const char *weights, const char *quantum)
{
	const char *const kv[] = { SMALL, "switch.traffic_classes=2", "switch.scheduler=dwrr",
		weights, quantum, "switch.pfc=true", NULL };
	struct sim *s = make_ok(kv);
	CHECK(sim_flow_add(s, 0, 2, 4000000, 0) == 0);
	CHECK(sim_flow_add(s, 1, 2, 4000000, 0) == 1);
	CHECK(sim_tc_flow_set_class(s, 1, 1) == 0);
	sim_run_until(s, sim_time_from_us(100));
	uint64_t a0 = result(s, 0).bytes_received, b0 = result(s, 1).bytes_received;
	sim_run_until(s, sim_time_from_us(300));
	uint64_t a = result(s, 0).bytes_received - a0, b = result(s, 1).bytes_received - b0;
	CHECK(a && b);
	/* Saturated: the link's payload capacity over 200 us is 2.46 MB. */
	CHECK(a + b >= 0.97 * 200e-6 * 100e9 / 8 * 4096 / 4160);
	sim_run(s, NULL, NULL);
	struct sim_stats st;
	sim_get_stats(s, &st);
	CHECK_EQ(st.flows_done, 2);
	CHECK_EQ(st.drops_total, 0);
	CHECK(st.pfc_pauses > 0);
	sim_destroy(s);
	printf("dwrr %s %s: share %.3f (%llu / %llu bytes)\n", weights, quantum, (double)a / (double)b,
	       (unsigned long long)a, (unsigned long long)b);
	return (double)a / (double)b;
}

static void test_dwrr(void)
{
	double r31 = dwrr_share("switch.dwrr_weights=3,1", "switch.dwrr_quantum_bytes=0");
	CHECK_NEAR(r31, 3.0, 0.05);
	/* Quanta smaller than a packet: the rounds nobody can send in are skipped, same share. */
	double small = dwrr_share("switch.dwrr_weights=3,1", "switch.dwrr_quantum_bytes=1000");
	CHECK_NEAR(small, 3.0, 0.05);
	double r11 = dwrr_share("switch.dwrr_weights=1,1", "switch.dwrr_quantum_bytes=0");
	CHECK_NEAR(r11, 1.0, 0.05);
	double r13 = dwrr_share("switch.dwrr_weights=1,3", "switch.dwrr_quantum_bytes=4160");
	CHECK_NEAR(r13, 1.0 / 3, 0.05);
}

/* Incast into h4 of a 2 x 1 leaf-spine with 4 hosts per leaf: h0, h1, h2 each send one flow of
 * class 1 (lossless) and one of class 0 (lossy), DWRR 1:1. Leaf0's uplink is the bottleneck:
 * class 1 backs up into the NICs with PAUSE frames for class 1 only; class 0 is dropped there. */
static void test_pfc_per_class(void)
{
	const char *const kv[] = { "topology.type=leafspine", "topology.tors=2", "topology.spines=1",
		"topology.hosts_per_tor=4", "workload.type=none", "host.cc=none", "host.transport=sr",
		"host.rto_us=100", "switch.traffic_classes=2", "switch.scheduler=dwrr", "switch.pfc=true",
		"switch.pfc_classes=1", "switch.buffer_bytes=150000", NULL };
	struct sim *s = make_ok(kv);
	for (uint32_t h = 0; h < 3; h++) {
		CHECK(sim_flow_add(s, h, 4, 600000, 0) == (int)(2 * h));
		CHECK(sim_flow_add(s, h, 4, 1500000, 0) == (int)(2 * h + 1));
		CHECK(sim_tc_flow_set_class(s, 2 * h, 1) == 0);
	}
	/* Step through the run: over the steps in which class 1 is paused at a NIC at both ends,
	 * what did that NIC send of each class? */
	const sim_time_ps step = sim_time_from_us(1);
	uint64_t last[3][2] = { { 0 } }, paused_tx[2] = { 0, 0 };
	bool was_paused[3] = { false, false, false };
	sim_time_ps paused_steps = 0;
	for (sim_time_ps t = step; !sim_run_until(s, t); t += step) {
		for (uint32_t h = 0; h < 3; h++) {
			struct sim_tc_port_class pc[2];
			uint32_t port = s->hosts[h].port.id;
			CHECK(sim_tc_port_class(s, port, 0, &pc[0]) == 0);
			CHECK(sim_tc_port_class(s, port, 1, &pc[1]) == 0);
			CHECK(!pc[0].paused); /* the lossy class is never paused */
			bool sending0 = !result(s, 2 * h + 1).done && s->flows[2 * h + 1].in_active;
			if (was_paused[h] && pc[1].paused && sending0) {
				paused_steps += step;
				for (int c = 0; c < 2; c++)
					paused_tx[c] += pc[c].tx_bytes - last[h][c];
			}
			was_paused[h] = pc[1].paused;
			for (int c = 0; c < 2; c++)
				last[h][c] = pc[c].tx_bytes;
		}
		CHECK(t < sim_time_from_us(20000));
	}
	double line = sim_time_to_s(paused_steps) * 100e9 / 8;
	printf("pfc per class: class 1 paused at a NIC for %.1f us of steps; the NIC sent %llu bytes of "
	       "class 0 (%.0f%% of line rate) and %llu of class 1 meanwhile\n", sim_time_to_us(paused_steps),
	       (unsigned long long)paused_tx[0], 100 * paused_tx[0] / line, (unsigned long long)paused_tx[1]);
	CHECK(paused_steps >= sim_time_from_us(20));
	CHECK(paused_tx[0] >= 0.9 * line);        /* class 0 goes on at line rate */
	CHECK(paused_tx[1] <= 0.02 * line);       /* class 1 stops (a packet in service at most) */
	struct sim_tc_stats st;
	struct sim_stats all;
	CHECK(sim_tc_get_stats(s, &st) == 0);
	sim_get_stats(s, &all);
	CHECK_EQ(all.flows_done, 6);
	CHECK_EQ(st.lossless, 2);
	CHECK(st.c[1].pfc_pauses > 0);
	CHECK(st.c[1].paused_ps > 0);
	CHECK_EQ(st.c[1].drops_queue + st.c[1].drops_headroom + st.c[1].drops_shared, 0);
	CHECK(st.c[0].drops_queue > 0);
	CHECK_EQ(st.c[0].pfc_pauses, 0);
	CHECK_EQ(st.c[0].paused_ps, 0);
	CHECK_EQ(st.c[1].pfc_pauses, all.pfc_pauses);
	CHECK_EQ(st.c[0].drops_queue, all.drops_queue);
	CHECK(st.c[0].max_queue_bytes <= 150000);
	CHECK_EQ(st.c[1].rx_bytes, 3 * 600000);
	sim_destroy(s);
}

static char *write_cm(const char *dir, const char *name, const char *text)
{
	static char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	CHECK(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static void test_cmatrix_prio(void)
{
	char dir[] = "/tmp/sim_tc_test.XXXXXX";
	CHECK(mkdtemp(dir));
	char file[1100], err[512];
	int rc;
	snprintf(file, sizeof(file), "workload.file=%s", write_cm(dir, "prio.cm",
		"Nodes 4\nConnections 2\n0->2 id 1 start 0 size 2000000\n"
		"1->2 id 2 start 20000000 size 300000 prio 1\n"));
	const char *const kv[] = { SMALL, "workload.type=cmatrix", file, "switch.traffic_classes=2", NULL };
	struct sim *s = make_ok(kv);
	CHECK_EQ(sim_tc_flow_class(s, 0), 0);
	CHECK_EQ(sim_tc_flow_class(s, 1), 1);
	sim_run(s, NULL, NULL);
	CHECK(fct_us(s, 1) <= sim_time_to_us(result(s, 1).ideal_ps) + 1.1); /* as above: it goes first */
	sim_destroy(s);
	/* One class: prio is read and ignored. */
	const char *const one[] = { SMALL, "workload.type=cmatrix", file, NULL };
	s = make_ok(one);
	CHECK_EQ(sim_tc_flow_class(s, 1), 0);
	sim_destroy(s);
	/* prio >= classes: refused with file, line and the parameter. */
	snprintf(file, sizeof(file), "workload.file=%s", write_cm(dir, "bad.cm",
		"Nodes 4\nConnections 1\n0->2 id 1 start 0 size 2000 prio 2\n"));
	const char *const bad[] = { SMALL, "workload.type=cmatrix", file, "switch.traffic_classes=2", NULL };
	CHECK(!make(bad, &rc, err, sizeof(err)) && rc == -EINVAL);
	printf("refused: %s\n", err);
	CHECK(strstr(err, "bad.cm:3: prio 2 is not a traffic class: switch.traffic_classes = 2"));
	unlink(write_cm(dir, "prio.cm", ""));
	unlink(write_cm(dir, "bad.cm", ""));
	rmdir(dir);
}

/* Every flow in class 0 of two: the run is the one-class run, packet for packet (one flow per
 * host, so the NIC's choice is the same), lossy and lossless. */
static void test_unused_class(void)
{
	for (int pfc = 0; pfc < 2; pfc++) {
		char *out[2];
		size_t len[2];
		for (int n = 0; n < 2; n++) {
			const char *const kv[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=2",
				"topology.hosts_per_tor=3", "workload.type=incast", "workload.incast_n=6",
				"workload.incast_dst=1", "workload.size_bytes=250000", "switch.buffer_bytes=150000",
				"switch.ecn_kmin_bytes=20000", "switch.ecn_kmax_bytes=100000",
				pfc ? "switch.pfc=true" : "switch.pfc=false",
				n ? "switch.traffic_classes=2" : "switch.traffic_classes=1", NULL };
			struct sim *s = make_ok(kv);
			sim_run(s, NULL, NULL);
			FILE *f = open_memstream(&out[n], &len[n]);
			sim_write_fct_csv(s, f);
			fclose(f);
			struct sim_stats st;
			sim_get_stats(s, &st);
			CHECK(pfc ? st.pfc_pauses > 0 : st.drops_total > 0); /* the scenario exercises it */
			sim_destroy(s);
		}
		CHECK_EQ(len[0], len[1]);
		CHECK(!memcmp(out[0], out[1], len[0]));
		free(out[0]);
		free(out[1]);
	}
}

static void refused(const char *const *kv, const char *want)
{
	char err[512] = "";
	int rc;
	struct sim *s = make(kv, &rc, err, sizeof(err));
	printf("refused: %s\n", err);
	CHECK(!s && rc == -EINVAL);
	CHECK_MSG(strstr(err, want), "want '%s'", want);
}

static void test_refusals(void)
{
	const char *const c0[] = { SMALL, "switch.traffic_classes=0", NULL };
	refused(c0, "switch.traffic_classes = 0: must be 1 to 8");
	const char *const c9[] = { SMALL, "switch.traffic_classes=9", NULL };
	refused(c9, "switch.traffic_classes = 9: must be 1 to 8");
	const char *const w0[] = { SMALL, "switch.traffic_classes=2", "switch.scheduler=dwrr",
		"switch.dwrr_weights=3,0", NULL };
	refused(w0, "switch.dwrr_weights = '3,0': weight 0 of class 1 must be 1 to 1000");
	const char *const wn[] = { SMALL, "switch.traffic_classes=3", "switch.scheduler=dwrr",
		"switch.dwrr_weights=3,1", NULL };
	refused(wn, "switch.dwrr_weights = '3,1' gives 2 weights for 3 classes");
	const char *const wx[] = { SMALL, "switch.traffic_classes=2", "switch.scheduler=dwrr",
		"switch.dwrr_weights=3;1", NULL };
	refused(wx, "switch.dwrr_weights = '3;1': expected one weight per class");
	const char *const wsp[] = { SMALL, "switch.traffic_classes=2", "switch.dwrr_weights=0,1", NULL };
	refused(wsp, "weight 0 of class 0"); /* checked under strict priority too */
	const char *const pn[] = { SMALL, "switch.traffic_classes=2", "switch.pfc_classes=1", NULL };
	refused(pn, "switch.pfc_classes = '1' needs switch.pfc = true");
	const char *const pc[] = { SMALL, "switch.traffic_classes=2", "switch.pfc=true",
		"switch.pfc_classes=0,5", NULL };
	refused(pc, "switch.pfc_classes = '0,5': class 5 does not exist");
	const char *const wc[] = { "switch.traffic_classes=2", "workload.traffic_class=0,2", NULL };
	refused(wc, "workload.traffic_class = '0,2': class 2 does not exist");
	const char *const wcn[] = { SMALL, "switch.traffic_classes=2", "workload.traffic_class=1", NULL };
	refused(wcn, "workload.traffic_class applies to generated workloads");
	const char *const lossy[] = { SMALL, "switch.traffic_classes=2", "switch.pfc=true",
		"switch.pfc_classes=1", "switch.buffer_bytes=1000", NULL };
	refused(lossy, "switch.buffer_bytes = 1000 is below one data packet");
	const char *const ccm[] = { SMALL, "switch.traffic_classes=2", "ccm.mode=ar", NULL };
	refused(ccm, "switch.traffic_classes = 2 is not modelled with ccm.mode");
	/* sim_tc_flow_set_class: no such class, flow, started flow. */
	const char *const ok[] = { SMALL, "switch.traffic_classes=2", NULL };
	struct sim *s = make_ok(ok);
	CHECK(sim_flow_add(s, 0, 2, 10000, 0) == 0);
	CHECK_EQ(sim_tc_flow_set_class(s, 0, 2), -EINVAL);
	CHECK_EQ(sim_tc_flow_set_class(s, 1, 1), -EINVAL);
	sim_run(s, NULL, NULL);
	CHECK_EQ(sim_tc_flow_set_class(s, 0, 1), -EBUSY);
	struct sim_tc_port_class pcl;
	CHECK_EQ(sim_tc_port_class(s, 0, 2, &pcl), -EINVAL);
	sim_destroy(s);
	/* One class: the module is off, its other keys unused (scenarios compare with
	 * switch.traffic_classes=1 alone). */
	const char *const off[] = { SMALL, "switch.scheduler=dwrr", "switch.dwrr_weights=3,0",
		"switch.pfc_classes=1", NULL };
	s = make_ok(off);
	struct sim_tc_stats st;
	CHECK_EQ(sim_tc_get_stats(s, &st), -ENOENT);
	CHECK(sim_flow_add(s, 0, 2, 10000, 0) == 0);
	CHECK_EQ(sim_tc_flow_set_class(s, 0, 1), -EINVAL);
	CHECK_EQ(sim_tc_flow_set_class(s, 0, 0), 0);
	sim_destroy(s);
}

int main(void)
{
	test_refusals();
	test_strict_priority();
	test_dwrr();
	test_pfc_per_class();
	test_cmatrix_prio();
	test_unused_class();
	printf("ok\n");
	return 0;
}
