/* sim/sim_trace_test.c: traces (sim_trace.c). With every port traced, the rows of
 * trace_packets.csv add up to the counters of summary.json (drops, ECN marks, data packets,
 * ACKs, NACKs, CNPs) and per port to what it sent; trace_queues.csv has one row per sample and
 * port; trace.pcap holds one well-formed frame per packet the port sent, at the CSV's times;
 * tracing changes no result; ports are named as documented and bad names are refused. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "sim_test_util.h"
#include "sim_trace_int.h"
#include "wire/wire.h"

static char *render(struct sim *s, void (*fn)(const struct sim *, FILE *), size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	CHECK(f);
	fn(s, f);
	fclose(f);
	return buf;
}

static char *slurp(const char *dir, const char *name, size_t *len)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	CHECK_MSG(f, "%s missing", path);
	char *buf = NULL;
	size_t cap = 0, n = 0;
	for (;;) {
		if (n + 65536 > cap) {
			cap = cap ? cap * 2 : 1 << 20;
			buf = realloc(buf, cap);
			CHECK(buf);
		}
		size_t r = fread(buf + n, 1, cap - n - 1, f);
		n += r;
		if (!r)
			break;
	}
	fclose(f);
	buf[n] = 0;
	*len = n;
	return buf;
}

/* The number after "key": in summary.json (first occurrence after `after`). */
static uint64_t json_u64(const char *json, const char *after, const char *key)
{
	const char *p = strstr(json, after);
	CHECK(p);
	char k[64];
	snprintf(k, sizeof(k), "\"%s\": ", key);
	p = strstr(p, k);
	CHECK_MSG(p, "%s not in summary.json", key);
	return strtoull(p + strlen(k), NULL, 10);
}

struct row {
	unsigned long long t;
	char ev[16], node[32], peer[32], type[24], reason[32];
	unsigned port, bytes;
	unsigned long long q;
};

/* Splits one CSV line of trace_packets.csv (flow and psn may be empty). */
static bool parse_row(char *line, struct row *r)
{
	char *f[11];
	int n = 0;
	for (char *q = line; n < 11; n++) {
		f[n] = q;
		char *c = strchr(q, ',');
		if (!c) {
			n++;
			break;
		}
		*c = 0;
		q = c + 1;
	}
	if (n != 11)
		return false;
	r->t = strtoull(f[0], NULL, 10);
	snprintf(r->ev, sizeof(r->ev), "%s", f[1]);
	r->port = (unsigned)strtoul(f[2], NULL, 10);
	snprintf(r->node, sizeof(r->node), "%s", f[3]);
	snprintf(r->peer, sizeof(r->peer), "%s", f[4]);
	snprintf(r->type, sizeof(r->type), "%s", f[5]);
	r->bytes = (unsigned)strtoul(f[8], NULL, 10);
	r->q = strtoull(f[9], NULL, 10);
	snprintf(r->reason, sizeof(r->reason), "%s", f[10]);
	return true;
}

static const char *const base_kv[] = {
	"topology.type=leafspine", "topology.tors=4", "topology.spines=2", "topology.hosts_per_tor=3",
	"switch.buffer_bytes=150000", "switch.ecn_kmin_bytes=20000", "switch.ecn_kmax_bytes=100000",
	"host.transport=gbn", "host.cc=dcqcn", "workload.type=incast", "workload.incast_n=6",
	"workload.incast_dst=1", "workload.size_bytes=250000", NULL };

static void test_counts(const char *dir)
{
	struct sim_config c;
	test_config(&c, base_kv);
	snprintf(c.out_dir, sizeof(c.out_dir), "%s", dir);
	CHECK_EQ(sim_config_set(&c, "trace.links", "all"), 0);
	CHECK_EQ(sim_config_set(&c, "trace.queue_interval_us", "5"), 0);
	CHECK_EQ(sim_config_set(&c, "trace.pcap_link", "leaf0->h1"), 0);
	struct sim *s = test_sim(&c);
	sim_run(s, NULL, NULL);
	CHECK_EQ(sim_write_outputs(s, dir), 0);
	size_t n;
	char *sum = slurp(dir, "summary.json", &n);
	uint64_t drops = json_u64(sum, "\"drops\"", "total"), marks = json_u64(sum, "\"counters\"", "ecn_marks");
	uint64_t data = json_u64(sum, "\"counters\"", "data_pkts_sent"), acks = json_u64(sum, "\"counters\"", "acks");
	uint64_t nacks = json_u64(sum, "\"counters\"", "nacks"), cnps = json_u64(sum, "\"counters\"", "cnps");
	uint64_t done = json_u64(sum, "\"flows\"", "completed");
	free(sum);
	/* the scenario must show what is counted */
	CHECK(drops > 0 && marks > 0 && nacks > 0 && cnps > 0 && done == 6);

	char *csv = slurp(dir, "trace_packets.csv", &n);
	const char *hdr = "time_ps,event,port,node,peer,type,flow,psn,bytes,queue_bytes,reason\n";
	CHECK(!strncmp(csv, hdr, strlen(hdr)));
	uint64_t *deq = calloc(s->nports, sizeof(*deq)), *enq = calloc(s->nports, sizeof(*enq));
	uint64_t ndrop = 0, nmark = 0, hdata = 0, hack = 0, hnack = 0, hcnp = 0, rows = 0;
	unsigned long long last_t = 0;
	uint64_t pcap_max = 1;
	for (uint32_t i = 0; i < s->nports; i++)
		if (!strcmp(s->ports[i]->node->name, "leaf0") && !strcmp(s->ports[i]->peer->node->name, "h1"))
			pcap_max += s->ports[i]->tx_pkts;
	uint64_t *pcap_t = malloc(sizeof(uint64_t) * pcap_max);
	CHECK(pcap_t);
	size_t npcap = 0;
	char *save = NULL;
	for (char *line = strtok_r(strchr(csv, '\n') + 1, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct row r;
		CHECK_MSG(parse_row(line, &r), "bad row %s", line);
		CHECK(r.t >= last_t); /* in time order */
		last_t = r.t;
		CHECK(r.port < s->nports);
		const struct sim_port *p = s->ports[r.port];
		CHECK(!strcmp(r.node, p->node->name) && !strcmp(r.peer, p->peer->node->name));
		rows++;
		if (!strcmp(r.ev, "dequeue")) {
			deq[r.port]++;
			if (p->is_host) {
				hdata += !strcmp(r.type, "data");
				hack += !strcmp(r.type, "ack");
				hnack += !strcmp(r.type, "nack");
				hcnp += !strcmp(r.type, "cnp");
			}
			if (!strcmp(r.node, "leaf0") && !strcmp(r.peer, "h1")) {
				CHECK(npcap < pcap_max);
				pcap_t[npcap++] = r.t;
			}
		} else if (!strcmp(r.ev, "enqueue")) {
			enq[r.port]++;
		} else if (!strcmp(r.ev, "drop")) {
			ndrop++;
			CHECK(!strcmp(r.reason, "queue_full") && !strcmp(r.type, "data"));
			CHECK(r.q + r.bytes > c.buffer_bytes);
		} else {
			CHECK(!strcmp(r.ev, "mark"));
			nmark++;
		}
	}
	free(csv);
	CHECK_EQ(ndrop, drops);
	CHECK_EQ(nmark, marks);
	CHECK_EQ(hdata, data);
	CHECK_EQ(hack, acks);
	CHECK_EQ(hnack, nacks);
	CHECK_EQ(hcnp, cnps);
	for (uint32_t i = 0; i < s->nports; i++) {
		CHECK_EQ(deq[i], s->ports[i]->tx_pkts);
		if (!s->ports[i]->is_host)
			CHECK_EQ(enq[i], deq[i]); /* every admitted packet left: the run is over */
	}
	CHECK_EQ(rows, sim_trace_of(s)->rows);

	/* trace_queues.csv: every port at every sample, 5 us apart */
	char *q = slurp(dir, "trace_queues.csv", &n);
	uint64_t qrows = 0;
	unsigned long long t0 = 0;
	save = NULL;
	for (char *line = strtok_r(strchr(q, '\n') + 1, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long t = strtoull(line, NULL, 10);
		CHECK_EQ(t, 5000000ull * (qrows / s->nports + 1));
		CHECK_EQ(strtoul(strchr(line, ',') + 1, NULL, 10), (unsigned long)(qrows % s->nports));
		t0 = t;
		qrows++;
	}
	free(q);
	CHECK(qrows > 0);
	CHECK_EQ(qrows, sim_trace_of(s)->samples * s->nports);
	CHECK(t0 <= s->now + 5000000ull);

	/* trace.pcap: a frame per packet leaf0->h1 sent, at the CSV's times */
	char *pc = slurp(dir, "trace.pcap", &n);
	const uint8_t *b = (const uint8_t *)pc;
#define LE32(x) ((uint32_t)(x)[0] | (uint32_t)(x)[1] << 8 | (uint32_t)(x)[2] << 16 | (uint32_t)(x)[3] << 24)
#define BE16(x) ((uint16_t)((x)[0] << 8 | (x)[1]))
	CHECK(n >= 24);
	CHECK_EQ(LE32(b), 0xa1b23c4du);
	CHECK_EQ(LE32(b + 20), 1u);
	size_t off = 24, frames = 0;
	while (off < n) {
		CHECK(off + 16 <= n);
		uint64_t ns = (uint64_t)LE32(b + off) * 1000000000ull + LE32(b + off + 4);
		uint32_t incl = LE32(b + off + 8), orig = LE32(b + off + 12);
		CHECK_EQ(incl, orig); /* whole frames by default */
		CHECK(off + 16 + incl <= n);
		CHECK(frames < npcap);
		CHECK_EQ(ns, pcap_t[frames] / 1000);
		const uint8_t *fr = b + off + 16, *ip = fr + 14, *udp = ip + 20;
		CHECK_EQ(BE16(fr + 12), 0x0800);
		CHECK_EQ(BE16(ip + 2), orig - 14);
		uint32_t sum32 = 0;
		for (int i = 0; i < 20; i += 2)
			sum32 += BE16(ip + i);
		while (sum32 >> 16)
			sum32 = (sum32 & 0xFFFF) + (sum32 >> 16);
		CHECK_EQ(sum32, 0xFFFFu); /* header checksum */
		CHECK_EQ(BE16(udp + 2), 4791);
		CHECK_EQ(BE16(udp + 4), orig - 34);
		CHECK_EQ(ip[19], 2); /* to 198.18.0.2: host 1 */
		CHECK(udp[8] <= 0x04); /* RC SEND First / Middle / Last / Only */
		struct wire_ipinfo ii = { .src_ip = (uint32_t)BE16(ip + 12) << 16 | BE16(ip + 14),
			.dst_ip = (uint32_t)BE16(ip + 16) << 16 | BE16(ip + 18), .src_port = BE16(udp),
			.dst_port = 4791 };
		CHECK(wire_icrc_check(&ii, udp + 8, orig - 42));
		off += 16 + incl;
		frames++;
	}
	CHECK_EQ(frames, npcap);
	CHECK(frames > 0);
	free(pc);
	free(pcap_t);
	free(deq);
	free(enq);
	sim_destroy(s);
	printf("ok: trace rows = summary counters (%llu drops, %llu marks, %llu data, %llu ACKs, %llu NACKs, "
	       "%llu CNPs), %llu queue rows, %zu pcap frames\n", (unsigned long long)drops,
	       (unsigned long long)marks, (unsigned long long)data, (unsigned long long)acks,
	       (unsigned long long)nacks, (unsigned long long)cnps, (unsigned long long)qrows, frames);
}

/* Tracing changes no result. */
static void test_no_effect(const char *dir)
{
	struct sim_config c;
	test_config(&c, base_kv);
	struct sim *a = test_sim(&c);
	snprintf(c.out_dir, sizeof(c.out_dir), "%s", dir);
	CHECK_EQ(sim_config_set(&c, "trace.links", "all"), 0);
	CHECK_EQ(sim_config_set(&c, "trace.queue_interval_us", "0.5"), 0);
	CHECK_EQ(sim_config_set(&c, "trace.pcap_link", "leaf0->spine1"), 0);
	struct sim *b = test_sim(&c);
	sim_run(a, NULL, NULL);
	sim_run(b, NULL, NULL);
	size_t la, lb;
	char *fa = render(a, sim_write_fct_csv, &la), *fb = render(b, sim_write_fct_csv, &lb);
	CHECK(la == lb && !memcmp(fa, fb, la));
	free(fa);
	free(fb);
	sim_destroy(a);
	sim_destroy(b);
	puts("ok: fct.csv is the same with tracing on");
}

/* Which ports a trace.links value names; NULL err = must be accepted. */
static void names(const char *dir, const char *links, const char *pcap, const char *want_err,
		  const char *const *want_ports)
{
	struct sim_config c;
	static const char *const kv[] = { "topology.type=leafspine", "topology.tors=2", "topology.spines=2",
		"topology.parallel_links=2", "topology.hosts_per_tor=2", "workload.type=none", NULL };
	test_config(&c, kv);
	snprintf(c.out_dir, sizeof(c.out_dir), "%s", dir);
	if (links)
		CHECK_EQ(sim_config_set(&c, "trace.links", links), 0);
	if (pcap)
		CHECK_EQ(sim_config_set(&c, "trace.pcap_link", pcap), 0);
	struct sim *s;
	char err[512];
	int rc = sim_create(&c, &s, err, sizeof(err));
	if (want_err) {
		CHECK_MSG(rc != 0, "'%s' / '%s' accepted", links ? links : "", pcap ? pcap : "");
		CHECK_MSG(strstr(err, want_err), "got '%s', want '%s'", err, want_err);
		return;
	}
	CHECK_MSG(rc == 0, "%s", err);
	const struct sim_trace *t = sim_trace_of(s);
	size_t n = 0;
	for (; want_ports[n]; n++) {
		bool found = false;
		for (uint32_t i = 0; i < s->nports && !found; i++) {
			char name[80];
			snprintf(name, sizeof(name), "%s->%s:p%u", s->ports[i]->node->name,
				 s->ports[i]->peer->node->name, s->ports[i]->idx);
			found = !strcmp(name, want_ports[n]) && t->mask[i];
		}
		CHECK_MSG(found, "%s: port %s not traced", links ? links : pcap, want_ports[n]);
	}
	size_t marked = 0;
	for (uint32_t i = 0; i < s->nports; i++)
		marked += t->mask[i] != 0;
	CHECK_MSG(marked == n, "%s: %zu ports traced, want %zu", links ? links : pcap, marked, n);
	sim_destroy(s);
}

static void test_names(const char *dir)
{
	/* leaf0: ports 0-1 hosts h0 h1, 2-3 spine0 (parallel), 4-5 spine1 */
	static const char *const arrow[] = { "leaf0->spine1:p4", "leaf0->spine1:p5", NULL };
	static const char *const nth[] = { "leaf0->spine0:p3", NULL };
	static const char *const both[] = { "leaf0->spine0:p3", "spine0->leaf0:p1", NULL };
	static const char *const node[] = { "leaf1->h2:p0", "leaf1->h3:p1", "leaf1->spine0:p2",
		"leaf1->spine0:p3", "leaf1->spine1:p4", "leaf1->spine1:p5", NULL };
	static const char *const list[] = { "h0->leaf0:p0", "spine1->leaf1:p2", "h3->leaf1:p0", NULL };
	names(dir, "leaf0->spine1", NULL, NULL, arrow);
	names(dir, "leaf0->spine0#2", NULL, NULL, nth);
	names(dir, "leaf0-spine0#2", NULL, NULL, both);
	names(dir, "leaf1", NULL, NULL, node);
	names(dir, "h0, spine1:p2 h3", NULL, NULL, list);
	names(dir, NULL, "leaf0->spine0#2", NULL, nth);
	names(dir, "leaf9", NULL, "trace.links: 'leaf9' names no port", NULL);
	names(dir, "leaf0->spine0#3", NULL, "trace.links: 'leaf0->spine0#3' names no port", NULL);
	names(dir, "leaf0:p6", NULL, "trace.links: 'leaf0:p6' names no port", NULL);
	names(dir, "h0,,leaf0->", NULL, "trace.links: 'leaf0->' names no port", NULL);
	names(dir, NULL, "leaf0->spine0", "trace.pcap_link = leaf0->spine0 names 2 ports", NULL);
	names(dir, NULL, "leaf0", "trace.pcap_link = leaf0 names 6 ports", NULL);
	struct sim_config c;
	test_config(&c, NULL);
	CHECK_EQ(sim_config_set(&c, "trace.links", "all"), 0);
	struct sim *s;
	char err[512];
	CHECK(sim_create(&c, &s, err, sizeof(err)) != 0 && strstr(err, "set output.dir"));
	snprintf(c.out_dir, sizeof(c.out_dir), "%s", dir);
	CHECK_EQ(sim_config_set(&c, "trace.packets", "false"), 0);
	CHECK(sim_create(&c, &s, err, sizeof(err)) != 0 && strstr(err, "nothing to trace"));
	CHECK_EQ(sim_config_set(&c, "trace.pcap_snap_bytes", "20"), 0);
	CHECK_EQ(sim_config_set(&c, "trace.queue_interval_us", "1"), 0);
	CHECK(sim_create(&c, &s, err, sizeof(err)) != 0 && strstr(err, "trace.pcap_snap_bytes"));
	puts("ok: ports named as documented; bad names and settings refused with the reason");
}

int main(void)
{
	char dir[] = "/tmp/inca-sim-trace-XXXXXX";
	CHECK(mkdtemp(dir));
	test_names(dir);
	test_no_effect(dir);
	test_counts(dir);
	const char *files[] = { "trace_packets.csv", "trace_queues.csv", "trace.pcap", "fct.csv",
		"summary.json", "params.ini" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char p[600];
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		unlink(p);
	}
	rmdir(dir);
	return 0;
}
