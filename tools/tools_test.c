/* Unit tests of the tools library: the JSON reader (on a switch-stats-shaped document), the
 * reference fp16/bf16 conversions (cross-checked with lib/agg over all 65536 patterns), the
 * test-data checker (catches one flipped bit, exact data really is exact in any order), size
 * parsing, the loopback address plan and inca-bench's timing and link-floor arithmetic. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/agg.h"
#include "check.h"
#include "coll_check.h"
#include "json.h"
#include "launch.h"
#include "util/test_check.h"

static void test_json(void)
{
	const char *doc =
		"{\"version\": 1, \"rx_pkts\": 100, \"drops\": {\"icrc\": 2, \"bad_qpn\": 1},\n"
		" \"drops_total\": 3, \"name\": \"a\\\"b\\u0041\", \"ok\": true, \"n\": null,\n"
		" \"trees\": [ {\"id\": 1, \"rx_pkts\": 40, \"aggregations\": 10, \"duplicates\": 2,\n"
		"   \"drops\": {\"stale\": 1}, \"qps\": [ {\"rx_pkts\": 20}, {\"rx_pkts\": 20} ]},\n"
		"  {\"id\": 2, \"rx_pkts\": 60, \"aggregations\": 15, \"contributions\": -1.5e1} ] }";
	size_t off = 0;
	struct json *j = json_parse(doc, &off);
	CHECK(j != NULL);
	if (!j)
		return;
	CHECK(json_num(json_get(j, "version"), 0) == 1);
	CHECK(!strcmp(json_get(j, "name")->str, "a\"b?"));
	CHECK(json_num(json_get(j, "ok"), 0) == 1);
	CHECK(json_get(j, "n")->type == JSON_NULL);
	CHECK(json_num(json_path(j, "trees.1.aggregations"), 0) == 15);
	CHECK(json_num(json_path(j, "trees.0.qps.1.rx_pkts"), 0) == 20);
	CHECK(json_path(j, "trees.2") == NULL);
	CHECK(json_sum_key(j, "aggregations") == 25);
	CHECK(json_sum_all(json_get(j, "drops")) == 3);
	struct launch_sw_summary s;
	launch_sw_summarize(j, &s);
	CHECK(s.rx_pkts == 100); /* trees only: the per-QP rx_pkts are not added again */
	CHECK(s.aggregations == 25);
	CHECK(s.duplicates == 2);
	CHECK(s.contributions == -15);
	CHECK(s.drops == 3);
	json_free(j);

	static const char *const bad[] = { "{", "{\"a\" 1}", "[1,]", "{\"a\":1}x", "\"abc", "tru" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct json *b = json_parse(bad[i], NULL);
		CHECK(b == NULL);
		json_free(b);
	}
}

static int same_float(float a, float b)
{
	return (isnan(a) && isnan(b)) || !memcmp(&a, &b, 4);
}

static void test_conversions(void)
{
	/* Every 16-bit pattern decodes like lib/agg, and re-encodes to itself (NaN: a NaN). */
	for (uint32_t h = 0; h < 65536; h++) {
		double d = check_fp16_to_double((uint16_t)h);
		CHECK(same_float((float)d, agg_fp16_to_fp32((uint16_t)h)));
		if (!isnan(d))
			CHECK(check_double_to_fp16(d) == h);
		d = check_bf16_to_double((uint16_t)h);
		CHECK(same_float((float)d, agg_bf16_to_fp32((uint16_t)h)));
		if (!isnan(d))
			CHECK(check_double_to_bf16(d) == h);
	}
	/* Rounding of float values between patterns agrees with lib/agg's fp32 -> 16 bit. */
	uint64_t x = 88172645463325252ull;
	for (int i = 0; i < 200000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		uint32_t bits = (uint32_t)x;
		float f;
		memcpy(&f, &bits, 4);
		if (isnan(f))
			continue;
		CHECK(check_double_to_fp16(f) == agg_fp32_to_fp16(f));
		CHECK(check_double_to_bf16(f) == agg_fp32_to_bf16(f));
	}
	CHECK(check_double_to_fp16(65520.0) == 0x7C00); /* rounds up to infinity */
	CHECK(check_double_to_fp16(65519.0) == 0x7BFF);
	CHECK(check_double_to_fp16(0x1p-25) == 0);      /* tie to even: 0 */
	CHECK(check_double_to_fp16(0x1.8p-25) == 1);
}

static void test_checker(void)
{
	for (int dt = 0; dt < INCA_DTYPE_COUNT; dt++) {
		for (int op = 0; op < INCA_OP_COUNT; op++) {
			if (!inca_op_valid((enum inca_dtype)dt, (enum inca_op)op))
				continue;
			for (int mode = 0; mode < 2; mode++) {
				size_t n = 3000, es = inca_dtype_size((enum inca_dtype)dt);
				struct check_spec s = { .dt = (enum inca_dtype)dt,
							.op = (enum inca_op)op,
							.mode = (enum check_mode)mode, .nranks = 4,
							.seed = 5, .iter = 9 };
				uint8_t *acc = malloc(n * es), *tmp = malloc(n * es);
				/* Rank-ordered reduction with lib/agg. */
				check_fill(&s, 0, acc, 0, n);
				for (int r = 1; r < 4; r++) {
					check_fill(&s, r, tmp, 0, n);
					agg_reduce(acc, tmp, n, s.dt, s.op);
				}
				CHECK(check_verify(&s, acc, 0, n, NULL) == 0);
				if (mode == CHECK_EXACT) {
					/* Exact data: reverse order gives the same bits. */
					check_fill(&s, 3, acc, 0, n);
					for (int r = 2; r >= 0; r--) {
						check_fill(&s, r, tmp, 0, n);
						agg_reduce(acc, tmp, n, s.dt, s.op);
					}
					CHECK(check_verify(&s, acc, 0, n, NULL) == 0);
				}
				/* One flipped bit is one wrong element, found where it is. */
				acc[1234 * es] ^= 1;
				size_t first = 0;
				CHECK(check_verify(&s, acc, 0, n, &first) == 1);
				CHECK(first == 1234);
				/* A sub-range verifies against the same global indexes. */
				CHECK(check_verify(&s, acc + 2000 * es, 2000, 1000, NULL) == 0);
				/* Another iteration's data does not pass. */
				s.iter++;
				CHECK(check_verify(&s, acc, 0, n, NULL) > n / 2 ||
				       (op == INCA_BAND || op == INCA_BOR) || es == 1);
				free(acc);
				free(tmp);
			}
		}
	}
}

static void test_misc(void)
{
	uint64_t v = 0;
	CHECK(launch_parse_bytes("4", &v) == 0 && v == 4);
	CHECK(launch_parse_bytes("64K", &v) == 0 && v == 65536);
	CHECK(launch_parse_bytes("1MiB", &v) == 0 && v == 1u << 20);
	CHECK(launch_parse_bytes("1G", &v) == 0 && v == 1u << 30);
	CHECK(launch_parse_bytes("1X", &v) != 0);
	CHECK(launch_parse_bytes("", &v) != 0);
	char b[32];
	CHECK(!strcmp(launch_fmt_bytes(64u << 20, b, sizeof(b)), "64 MiB"));
	CHECK(!strcmp(launch_fmt_bytes(1000, b, sizeof(b)), "1000 B"));
	struct launch_addrs a;
	char ip[LAUNCH_IP_LEN];
	CHECK(launch_addrs_init(&a, 0) == 0 && !strcmp(a.switch_ip, "127.0.0.1"));
	launch_rank_ip(&a, 3, ip);
	CHECK(!strcmp(ip, "127.0.0.13"));
	CHECK(launch_addrs_init(&a, 42) == 0 && !strcmp(a.switch_ip, "127.1.42.1"));
	launch_rank_ip(&a, 0, ip);
	CHECK(!strcmp(ip, "127.1.42.10"));
	CHECK(launch_addrs_init(&a, 256) != 0);
}

/* inca-bench's makespan and start skew over ranks' entry/return times, and the link floors. */
static void test_timing(void)
{
	/* 3 ranks, 2 calls; t0[r][i] entries, t1[r][i] returns (ns) */
	const uint64_t t0[3][2] = { { 1000, 5000 }, { 1400, 5100 }, { 1100, 5900 } };
	const uint64_t t1[3][2] = { { 3000, 8000 }, { 2500, 9000 }, { 2000, 7000 } };
	double skew = -1;
	double mk = cc_latency_mean_s(&t0[0][0], &t1[0][0], 3, 2, 2, &skew);
	/* call 0: 3000 - 1000 = 2000, skew 400; call 1: 9000 - 5000 = 4000, skew 900 */
	CHECK(fabs(mk - 3000e-9) < 1e-15);
	CHECK(fabs(skew - 650e-9) < 1e-15);
	CHECK(cc_latency_mean_s(&t0[0][0], &t1[0][0], 3, 2, 0, &skew) == 0 && skew == 0);
	/* host algorithms: the busbw factor; INC: what the offload moves per rank */
	CHECK(cc_link_factor(INCA_COLL_ALLREDUCE, 8, false) == 1.75);
	CHECK(cc_link_factor(INCA_COLL_ALLREDUCE, 8, true) == 1.0);
	CHECK(cc_link_factor(INCA_COLL_REDUCE_SCATTER, 8, true) == 1.0);
	CHECK(cc_link_factor(INCA_COLL_REDUCE_SCATTER, 8, false) == 0.875);
	CHECK(cc_link_factor(INCA_COLL_ALLGATHER, 8, true) == 0.875);
	CHECK(cc_link_factor(INCA_COLL_BCAST, 8, true) == 1.0);
	CHECK(cc_link_factor(INCA_COLL_BARRIER, 8, true) == 0.0);
}

/* Fabric plan files (tests/netns/fabric.py writes them): a good one parses into the options
 * every rank gets; a bad line is refused. */
static void test_plan(void)
{
	char path[] = "/tmp/inca-plan-test-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	const char *txt =
		"# plan\nname incaf1x2\ndesc two leaves, 1 Gbit/s\nbootstrap 198.18.1.10\n"
		"tree 3 key 0x33 slots 32 bsl 64\n"
		"rank 1 netns incaf1x2-h1 ip 198.18.2.10 switch 198.18.2.1:4791 bfr 9\n"
		"rank 0 netns incaf1x2-h0 ip 198.18.1.10 switch 198.18.1.1:4791 bfr 1\n"
		"switch spine1 role root netns incaf1x2-spine1 listen 198.19.255.1:4791 pid 42 "
		"stats /tmp/x.json\n";
	CHECK(write(fd, txt, strlen(txt)) == (ssize_t)strlen(txt));
	close(fd);
	static struct launch_plan p;
	CHECK(launch_plan_load(path, &p) == 0);
	CHECK(p.nranks == 2 && p.nswitches == 1 && p.tree_id == 3 && p.key == 0x33);
	CHECK(p.nslots == 32 && p.boot_port == 0 && !strcmp(p.boot_ip, "198.18.1.10"));
	CHECK(!strcmp(p.desc, "two leaves, 1 Gbit/s") && p.sw[0].pid == 42);
	struct launch_cfg c;
	launch_cfg_defaults(&c);
	launch_plan_apply(&p, &c);
	struct launch_addrs a;
	launch_addrs_init(&a, 0);
	struct inca_comm_opts o;
	char ipbuf[4][48];
	launch_comm_opts(&c, &a, 1, &o, ipbuf);
	CHECK(o.size == 2 && o.bfr_id == 9 && o.qpn == 0x1009 && o.tree_id == 3 && o.key == 0x33);
	CHECK(!strcmp(o.switch_addr, "198.18.2.1:4791") && !strcmp(o.host_ip, "198.18.2.10"));
	CHECK(!strcmp(o.data_addr, "198.18.2.10:4791") && o.nslots == 32);
	CHECK(!strncmp(o.bootstrap_addr, "198.18.1.10:", 12));

	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("bootstrap 198.18.1.10\nrank 0 ip 198.18.1.10 colour blue\n", f);
		fclose(f);
		fprintf(stderr, "(an error message about 'rank' is expected next)\n");
		CHECK(launch_plan_load(path, &p) == -EINVAL);
	}
	unlink(path);
}

int main(void)
{
	test_json();
	test_conversions();
	test_checker();
	test_misc();
	test_timing();
	test_plan();
	printf("tools: all passed\n");
	return 0;
}
