/* sim/sim_osf_test.c: acceptance of the OSF model (sim_osf.c, draft-hcl): with credits, incast
 * and permutation drop nothing and keep every switch queue within the credit window; the
 * OSF-Egress delivers in order although spraying reorders; after a mid-run link failure
 * ingresses stop using the dead paths once notified and flows finish close to the no-failure
 * time; runs are deterministic per seed; spraying without credits does drop under incast.
 * Cells (osf.cell_bytes): every byte is delivered exactly once and in order after reassembly,
 * with fragmentation and with aggregation, under spraying, credits, and a link failure; the
 * cell counts match the cut (ceil(packet / cell) per packet without aggregation, about
 * cell / packet packets per cell with it). */
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
	bool bytes_once;         /* every flow's transport took exactly size_bytes, in order */
	uint64_t stream_bytes;   /* sum over packets of payload + header (first transmissions) */
	uint64_t cut_cells;      /* sum over packets of ceil((payload + header) / cell_bytes) */
	uint64_t frag_expect;    /* packets larger than one cell */
	uint64_t min_cells;      /* sum over flows of ceil(stream / cell_bytes) */
	uint64_t npkts;
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
	r->bytes_once = true;
	uint32_t cell = c.osf_cell_bytes ? c.osf_cell_bytes : 1;
	for (uint32_t i = 0; i < s->nflows; i++) {
		const struct sim_flow *fl = &s->flows[i];
		r->bytes_once = r->bytes_once && fl->bytes_rx == fl->size_bytes;
		uint64_t fs = 0;
		for (uint32_t k = 0; k < fl->npkts; k++) {
			uint64_t pay = k + 1 < fl->npkts ? c.mtu_bytes : fl->size_bytes - (uint64_t)k * c.mtu_bytes;
			uint64_t sz = pay + c.header_bytes;
			fs += sz;
			r->cut_cells += (sz + cell - 1) / cell;
			r->frag_expect += sz > cell;
		}
		r->stream_bytes += fs;
		r->min_cells += (fs + cell - 1) / cell;
		r->npkts += fl->npkts;
	}
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
	CHECK_EQ(r->st.flows_done, r->st.flows);
	CHECK_EQ(r->st.drops_total, 0);
	CHECK_EQ(r->st.retx_pkts, 0);
	CHECK(r->os.max_queue_bytes <= window);
	CHECK(r->os.max_reserved_bytes <= window);
	CHECK(r->os.max_reserved_bytes > 0);
	CHECK_EQ(r->os.inorder_violations, 0);
	CHECK_EQ(r->os.orig_pkts_delivered, npkts);
	CHECK(r->os.credit_acks > 0);
	CHECK_EQ(r->os.reserved_now_bytes, 0); /* every reservation was returned */
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
	CHECK_EQ(a.os.inorder_violations, 0);
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
		CHECK_EQ(a.st.flows_done, a.st.flows);
		CHECK(fail > 99.9 && fail < 100.1);
		CHECK(notify > fail);
		CHECK(notify - fail <= 15);      /* detect 1 us + report flooding / TM round trip */
		CHECK(last <= notify);           /* flows moved within the notification latency */
		CHECK_EQ(a.os.late_stale_sends, 0);
		CHECK(a.max_fct_us <= 1.15 * b.max_fct_us);
		CHECK_EQ(a.os.reserved_now_bytes, 0); /* no credit leaked by the failure */
		CHECK_EQ(a.os.inorder_violations, 0);
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
		CHECK_EQ(fs.reroutes, 1);
		CHECK(mx > 1.5 * b.max_fct_us);
		sim_destroy(s);
	}

	/* ---- cells ---- */
	/* Fragmentation without aggregation: 9000-byte packets in 1024-byte cells, sprayed with
	 * credits over a 4x4 leaf-spine: each packet is cut into exactly ceil(9064 / 1024) cells,
	 * every byte arrives once and in order although cells are reordered. */
	const char *const frag[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=4",
		"topology.hosts_per_tor=4", "workload.type=permutation", "workload.size_bytes=300000",
		"host.cc=none", "host.mtu_bytes=9000", "osf.mode=credit", "osf.cell_bytes=1024",
		"osf.chunk_pkts=16", "osf.cell_aggregate=false", NULL };
	run(frag, &a);
	printf("cells, fragmentation: %llu packets -> %llu cells (expected %llu), %llu fragmented, "
	       "reordered %llu cells, max FCT %.1f us\n", (unsigned long long)a.npkts,
	       (unsigned long long)a.os.cells_sent, (unsigned long long)a.cut_cells,
	       (unsigned long long)a.os.frag_pkts, (unsigned long long)a.os.reorder_pkts, a.max_fct_us);
	check_credit("cells fragmentation", &a, 262144, a.npkts);
	CHECK(a.bytes_once);
	CHECK_EQ(a.os.cells_sent, a.cut_cells);
	CHECK_EQ(a.os.frag_pkts, a.frag_expect);
	CHECK_EQ(a.os.frag_pkts, a.npkts); /* 9064 > 1024: every packet, the short last ones too */
	CHECK_EQ(a.os.agg_cells, 0);
	CHECK_EQ(a.os.orig_pkts_sent, a.npkts);
	CHECK_EQ(a.os.cell_payload_bytes, a.stream_bytes);
	CHECK_EQ(a.os.cell_wire_bytes, a.stream_bytes + 32 * a.os.cells_sent);
	CHECK(a.os.reorder_pkts > 0);
	CHECK_EQ(a.os.cell_skips, 0);
	CHECK_EQ(a.os.orig_discarded, 0);
	free(a.fct);

	/* The same with aggregation: cells are filled across packet boundaries, so fewer cells
	 * (at least the stream's ceil(bytes / cell)); fixed-size (padded) cells on the wire. */
	const char *const frag_agg[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=4",
		"topology.hosts_per_tor=4", "workload.type=permutation", "workload.size_bytes=300000",
		"host.cc=none", "host.mtu_bytes=9000", "osf.mode=credit", "osf.cell_bytes=1024",
		"osf.chunk_pkts=16", "osf.cell_pad=true", NULL };
	run(frag_agg, &b);
	printf("cells, fragmentation + aggregation: %llu cells (stream minimum %llu, per packet %llu), "
	       "%llu carry two packets\n", (unsigned long long)b.os.cells_sent,
	       (unsigned long long)b.min_cells, (unsigned long long)b.cut_cells,
	       (unsigned long long)b.os.agg_cells);
	check_credit("cells fragmentation + aggregation", &b, 262144, b.npkts);
	CHECK(b.bytes_once);
	CHECK(b.os.cells_sent >= b.min_cells);
	CHECK(b.os.cells_sent < b.cut_cells);
	CHECK(b.os.agg_cells > 0);
	CHECK_EQ(b.os.cell_payload_bytes, b.stream_bytes);
	CHECK_EQ(b.os.cell_wire_bytes, (1024 + 32) * b.os.cells_sent); /* padded */
	free(b.fct);

	/* Aggregation of small packets (200 B payload, 264 B on the wire) into 4096-byte cells:
	 * about 15.5 packets per cell; a single flow at line rate fills every cell but its last. */
	const char *const agg1[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=4",
		"topology.hosts_per_tor=4", "workload.type=permutation", "workload.size_bytes=200000",
		"host.cc=none", "host.mtu_bytes=200", "osf.mode=spray", "osf.cell_bytes=4096", NULL };
	run(agg1, &a);
	printf("cells, aggregation (spray): %llu packets -> %llu cells (stream minimum %llu), "
	       "%.2f packets per cell, reordered %llu\n", (unsigned long long)a.npkts,
	       (unsigned long long)a.os.cells_sent, (unsigned long long)a.min_cells,
	       (double)a.npkts / (double)a.os.cells_sent, (unsigned long long)a.os.reorder_pkts);
	CHECK_EQ(a.st.flows_done, a.st.flows);
	CHECK(a.bytes_once);
	CHECK_EQ(a.os.cells_sent, a.min_cells);
	CHECK_EQ(a.os.agg_cells, a.os.cells_sent);
	CHECK(a.os.reorder_pkts > 0);
	CHECK_EQ(a.os.orig_pkts_delivered, a.npkts);
	CHECK_EQ(a.os.inorder_violations, 0);
	CHECK_EQ(a.st.retx_pkts, 0);
	free(a.fct);

	/* Aggregation with credits under incast (15 -> 1, lossy): no drop, queues within the
	 * window; many packets per cell. */
	const char *const agg_incast[] = { "topology.k=4", "workload.type=incast", "workload.incast_n=15",
		"workload.size_bytes=100000", "host.cc=none", "switch.pfc=false", "host.mtu_bytes=200",
		"osf.mode=credit", "osf.cell_bytes=2048", NULL };
	run(agg_incast, &a);
	printf("cells, aggregation incast credit: %llu packets -> %llu cells, %.2f packets per cell\n",
	       (unsigned long long)a.npkts, (unsigned long long)a.os.cells_sent,
	       (double)a.npkts / (double)a.os.cells_sent);
	check_credit("cells aggregation incast credit", &a, 262144, a.npkts);
	CHECK(a.bytes_once);
	CHECK(a.os.cells_sent >= a.min_cells);
	CHECK((double)a.npkts / (double)a.os.cells_sent > 0.8 * 2048 / 264.0);
	CHECK(a.os.credit_rejs > 0);
	free(a.fct);

	/* A mid-run link failure with cells: lost cells are given up at the egress, the packets
	 * they carried are resent by the transport, and still every byte arrives once, in order. */
	const char *const cfail[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=4",
		"topology.hosts_per_tor=4", "workload.type=permutation", "workload.size_bytes=2000000",
		"host.cc=none", "osf.mode=credit", "osf.cell_bytes=1024", "osf.chunk_pkts=16",
		"failure.event1=50 leaf0-spine1 down", NULL };
	run(cfail, &a);
	printf("cells, failure: %llu cells lost and skipped, %llu packets discarded incomplete, "
	       "retransmitted %llu, max FCT %.1f us\n", (unsigned long long)a.os.cell_skips,
	       (unsigned long long)a.os.orig_discarded, (unsigned long long)a.st.retx_pkts, a.max_fct_us);
	CHECK_EQ(a.st.flows_done, a.st.flows);
	CHECK(a.bytes_once);
	CHECK(a.os.cell_skips > 0);
	CHECK_EQ(a.os.inorder_violations, 0);
	CHECK_EQ(a.os.orig_pkts_delivered, a.npkts);
	CHECK_EQ(a.os.reserved_now_bytes, 0);
	{ /* recovery is not much slower than with one packet per unit: lost cells are found
	   * together (every hole older than the check), not one check period each */
		const char *kv[16];
		unsigned n = 0;
		for (; cfail[n]; n++)
			kv[n] = strncmp(cfail[n], "osf.cell_bytes=", 15) ? cfail[n] : "osf.cell_bytes=0";
		kv[n] = NULL;
		run(kv, &b);
		printf("same failure without cells: max FCT %.1f us\n", b.max_fct_us);
		CHECK(b.bytes_once);
		CHECK(a.max_fct_us <= 1.3 * b.max_fct_us);
		free(b.fct);
	}
	free(a.fct);

	/* Determinism per seed. */
	const char *const det[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=4",
		"topology.hosts_per_tor=4", "workload.type=permutation", "workload.size_bytes=500000",
		"host.cc=none", "osf.mode=credit", "failure.event1=20 leaf1-spine2 down",
		"failure.event2=60 leaf2-spine0 degrade rate=0.5 loss=0.001", "sim.seed=7", NULL };
	run(det, &a);
	run(det, &b);
	CHECK(a.fct_len == b.fct_len && !memcmp(a.fct, b.fct, a.fct_len));
	CHECK(!memcmp(&a.os, &b.os, sizeof(a.os)));
	CHECK_EQ(a.os.reserved_now_bytes, 0);
	CHECK_EQ(a.st.flows_done, a.st.flows);
	CHECK_EQ(a.st.events, b.st.events);
	free(a.fct);
	free(b.fct);
	/* ... with cells (fragmentation and aggregation) and losses too. */
	const char *const cdet[] = { "topology.type=leafspine", "topology.tors=4", "topology.spines=4",
		"topology.hosts_per_tor=4", "workload.type=permutation", "workload.size_bytes=500000",
		"host.cc=none", "osf.mode=credit", "osf.cell_bytes=1500", "osf.chunk_pkts=12",
		"failure.event1=20 leaf1-spine2 down",
		"failure.event2=60 leaf2-spine0 degrade rate=0.5 loss=0.001", "sim.seed=7", NULL };
	run(cdet, &a);
	run(cdet, &b);
	CHECK(a.fct_len == b.fct_len && !memcmp(a.fct, b.fct, a.fct_len));
	CHECK(!memcmp(&a.os, &b.os, sizeof(a.os)));
	CHECK_EQ(a.st.events, b.st.events);
	CHECK_EQ(a.st.flows_done, a.st.flows);
	CHECK(a.bytes_once);
	CHECK(a.os.agg_cells > 0 && a.os.frag_pkts > 0);
	free(a.fct);
	free(b.fct);
	puts("sim_osf_test: ok");
	return 0;
}
