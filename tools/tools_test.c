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

static int fails;

#define EXPECT(cond)                                                                              \
	do {                                                                                      \
		if (!(cond)) {                                                                    \
			fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);       \
			fails++;                                                                  \
		}                                                                                 \
	} while (0)

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
	EXPECT(j != NULL);
	if (!j)
		return;
	EXPECT(json_num(json_get(j, "version"), 0) == 1);
	EXPECT(!strcmp(json_get(j, "name")->str, "a\"b?"));
	EXPECT(json_num(json_get(j, "ok"), 0) == 1);
	EXPECT(json_get(j, "n")->type == JSON_NULL);
	EXPECT(json_num(json_path(j, "trees.1.aggregations"), 0) == 15);
	EXPECT(json_num(json_path(j, "trees.0.qps.1.rx_pkts"), 0) == 20);
	EXPECT(json_path(j, "trees.2") == NULL);
	EXPECT(json_sum_key(j, "aggregations") == 25);
	EXPECT(json_sum_all(json_get(j, "drops")) == 3);
	struct launch_sw_summary s;
	launch_sw_summarize(j, &s);
	EXPECT(s.rx_pkts == 100); /* trees only: the per-QP rx_pkts are not added again */
	EXPECT(s.aggregations == 25);
	EXPECT(s.duplicates == 2);
	EXPECT(s.contributions == -15);
	EXPECT(s.drops == 3);
	json_free(j);

	static const char *const bad[] = { "{", "{\"a\" 1}", "[1,]", "{\"a\":1}x", "\"abc", "tru" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct json *b = json_parse(bad[i], NULL);
		EXPECT(b == NULL);
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
		EXPECT(same_float((float)d, agg_fp16_to_fp32((uint16_t)h)));
		if (!isnan(d))
			EXPECT(check_double_to_fp16(d) == h);
		d = check_bf16_to_double((uint16_t)h);
		EXPECT(same_float((float)d, agg_bf16_to_fp32((uint16_t)h)));
		if (!isnan(d))
			EXPECT(check_double_to_bf16(d) == h);
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
		EXPECT(check_double_to_fp16(f) == agg_fp32_to_fp16(f));
		EXPECT(check_double_to_bf16(f) == agg_fp32_to_bf16(f));
	}
	EXPECT(check_double_to_fp16(65520.0) == 0x7C00); /* rounds up to infinity */
	EXPECT(check_double_to_fp16(65519.0) == 0x7BFF);
	EXPECT(check_double_to_fp16(0x1p-25) == 0);      /* tie to even: 0 */
	EXPECT(check_double_to_fp16(0x1.8p-25) == 1);
}

/* acc = the reduction of the ranks' data (lib/agg) in rank order, or in reverse order; tmp
 * scratch. */
static void reduce_ranks(const struct check_spec *s, uint8_t *acc, uint8_t *tmp, size_t n,
			 bool reverse)
{
	int nr = s->nranks;
	check_fill(s, reverse ? nr - 1 : 0, acc, 0, n);
	for (int k = 1; k < nr; k++) {
		check_fill(s, reverse ? nr - 1 - k : k, tmp, 0, n);
		agg_reduce(acc, tmp, n, s->dt, s->op);
	}
}

static void check_case(int nr, enum inca_dtype dt, enum inca_op op, enum check_mode mode)
{
	size_t n = 3000, es = inca_dtype_size(dt);
	struct check_spec s = { .dt = dt, .op = op, .mode = mode, .nranks = nr, .seed = 5, .iter = 9 };
	uint8_t *acc = malloc(n * es), *tmp = malloc(n * es), one[8];

	reduce_ranks(&s, acc, tmp, n, false);
	EXPECT(check_verify(&s, acc, 0, n, NULL) == 0);
	/* The one-element reference agrees with the whole-buffer check. */
	check_expected(&s, 777, one);
	EXPECT(memcmp(one, acc + 777 * es, es) == 0);
	if (mode == CHECK_EXACT) {
		/* Exact data: reverse order gives the same bits. */
		reduce_ranks(&s, acc, tmp, n, true);
		EXPECT(check_verify(&s, acc, 0, n, NULL) == 0);
	}
	if (nr > 1 && es > 1) {
		/* Ranks get different data: a switch that mixes them up is caught. */
		uint8_t *other = malloc(n * es);
		size_t same = 0;
		check_fill(&s, nr - 1, tmp, 0, n);
		check_fill(&s, nr - 2, other, 0, n);
		for (size_t i = 0; i < n; i++)
			same += memcmp(other + i * es, tmp + i * es, es) == 0;
		EXPECT(same < n / 4);
		free(other);
		reduce_ranks(&s, acc, tmp, n, false);
	}
	/* One flipped bit is one wrong element, found where it is. */
	acc[1234 * es] ^= 1;
	size_t first = 0;
	EXPECT(check_verify(&s, acc, 0, n, &first) == 1);
	EXPECT(first == 1234);
	/* A sub-range verifies against the same global indexes. */
	EXPECT(check_verify(&s, acc + 2000 * es, 2000, 1000, NULL) == 0);
	/* Another iteration's data does not pass. */
	s.iter++;
	EXPECT(check_verify(&s, acc, 0, n, NULL) > n / 2 || (op == INCA_BAND || op == INCA_BOR) ||
	       es == 1);
	free(acc);
	free(tmp);
}

static void test_checker(void)
{
	/* 1 to CHECK_EXACT_MAX_RANKS ranks: an exact float sum takes each rank's value from one
	 * byte of an 8-rank lane, so 8 and 9 ranks sit on either side of a lane's end. */
	static const int nranks[] = { 1, 4, 8, 9, CHECK_EXACT_MAX_RANKS };
	for (size_t i = 0; i < sizeof nranks / sizeof nranks[0]; i++)
		for (int dt = 0; dt < INCA_DTYPE_COUNT; dt++)
			for (int op = 0; op < INCA_OP_COUNT; op++)
				for (int mode = 0; mode < 2; mode++)
					if (inca_op_valid((enum inca_dtype)dt, (enum inca_op)op))
						check_case(nranks[i], (enum inca_dtype)dt,
							   (enum inca_op)op, (enum check_mode)mode);
}

static void test_misc(void)
{
	uint64_t v = 0;
	EXPECT(launch_parse_bytes("4", &v) == 0 && v == 4);
	EXPECT(launch_parse_bytes("64K", &v) == 0 && v == 65536);
	EXPECT(launch_parse_bytes("1MiB", &v) == 0 && v == 1u << 20);
	EXPECT(launch_parse_bytes("1G", &v) == 0 && v == 1u << 30);
	EXPECT(launch_parse_bytes("1X", &v) != 0);
	EXPECT(launch_parse_bytes("", &v) != 0);
	char b[32];
	EXPECT(!strcmp(launch_fmt_bytes(64u << 20, b, sizeof(b)), "64 MiB"));
	EXPECT(!strcmp(launch_fmt_bytes(1000, b, sizeof(b)), "1000 B"));
	struct launch_addrs a;
	char ip[LAUNCH_IP_LEN];
	EXPECT(launch_addrs_init(&a, 0) == 0 && !strcmp(a.switch_ip, "127.0.0.1"));
	launch_rank_ip(&a, 3, ip);
	EXPECT(!strcmp(ip, "127.0.0.13"));
	EXPECT(launch_addrs_init(&a, 42) == 0 && !strcmp(a.switch_ip, "127.1.42.1"));
	launch_rank_ip(&a, 0, ip);
	EXPECT(!strcmp(ip, "127.1.42.10"));
	EXPECT(launch_addrs_init(&a, 256) != 0);
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
	EXPECT(fabs(mk - 3000e-9) < 1e-15);
	EXPECT(fabs(skew - 650e-9) < 1e-15);
	EXPECT(cc_latency_mean_s(&t0[0][0], &t1[0][0], 3, 2, 0, &skew) == 0 && skew == 0);
	/* host algorithms: the busbw factor; INC: what the offload moves per rank */
	EXPECT(cc_link_factor(INCA_COLL_ALLREDUCE, 8, false) == 1.75);
	EXPECT(cc_link_factor(INCA_COLL_ALLREDUCE, 8, true) == 1.0);
	EXPECT(cc_link_factor(INCA_COLL_REDUCE_SCATTER, 8, true) == 1.0);
	EXPECT(cc_link_factor(INCA_COLL_REDUCE_SCATTER, 8, false) == 0.875);
	EXPECT(cc_link_factor(INCA_COLL_ALLGATHER, 8, true) == 0.875);
	EXPECT(cc_link_factor(INCA_COLL_BCAST, 8, true) == 1.0);
	EXPECT(cc_link_factor(INCA_COLL_BARRIER, 8, true) == 0.0);
}

/* Fabric plan files (tests/netns/fabric.py writes them): a good one parses into the options
 * every rank gets; a bad line is refused. */
static void test_plan(void)
{
	char path[] = "/tmp/inca-plan-test-XXXXXX";
	int fd = mkstemp(path);
	EXPECT(fd >= 0);
	if (fd < 0)
		return;
	const char *txt =
		"# plan\nname incaf1x2\ndesc two leaves, 1 Gbit/s\nbootstrap 198.18.1.10\n"
		"tree 3 key 0x33 slots 32 bsl 64 auth_key "
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff auth_key_id 7\n"
		"rank 1 netns incaf1x2-h1 ip 198.18.2.10 switch 198.18.2.1:4791 bfr 9\n"
		"rank 0 netns incaf1x2-h0 ip 198.18.1.10 switch 198.18.1.1:4791 bfr 1\n"
		"switch spine1 role root netns incaf1x2-spine1 listen 198.19.255.1:4791 pid 42 "
		"stats /tmp/x.json\n";
	EXPECT(write(fd, txt, strlen(txt)) == (ssize_t)strlen(txt));
	close(fd);
	static struct launch_plan p;
	EXPECT(launch_plan_load(path, &p) == 0);
	EXPECT(p.nranks == 2 && p.nswitches == 1 && p.tree_id == 3 && p.key == 0x33);
	EXPECT(p.nslots == 32 && p.boot_port == 0 && !strcmp(p.boot_ip, "198.18.1.10"));
	EXPECT(!strcmp(p.desc, "two leaves, 1 Gbit/s") && p.sw[0].pid == 42);
	struct launch_cfg c;
	launch_cfg_defaults(&c);
	launch_plan_apply(&p, &c);
	struct launch_addrs a;
	launch_addrs_init(&a, 0);
	struct inca_comm_opts o;
	char ipbuf[4][48];
	launch_comm_opts(&c, &a, 1, &o, ipbuf);
	EXPECT(o.size == 2 && o.bfr_id == 9 && o.qpn == 0x1009 && o.tree_id == 3 && o.key == 0x33);
	EXPECT(!strcmp(o.switch_addr, "198.18.2.1:4791") && !strcmp(o.host_ip, "198.18.2.10"));
	EXPECT(!strcmp(o.data_addr, "198.18.2.10:4791") && o.nslots == 32);
	EXPECT(!strncmp(o.bootstrap_addr, "198.18.1.10:", 12));
	EXPECT(o.auth_key && o.auth_key[0] == 0x00 && o.auth_key[1] == 0x11 &&
	       o.auth_key_id == 7 && !o.no_auth);

	/* A standalone plan says auth off explicitly, or the load fails. */
	{
		static const char *const heads[] = {
			"bootstrap 198.18.1.10\ntree 3 key 0x33 auth off\n",
			"bootstrap 198.18.1.10\ntree 3 key 0x33\n",
		};
		for (int i = 0; i < 2; i++) {
			FILE *g = fopen(path, "w");
			EXPECT(g != NULL);
			if (!g)
				break;
			fputs(heads[i], g);
			fputs("rank 0 ip 198.18.1.10 switch 198.18.1.1:4791 bfr 1\n", g);
			fclose(g);
			if (i == 1)
				fprintf(stderr, "(an error message about 'auth off' is expected next)\n");
			EXPECT(launch_plan_load(path, &p) == (i == 0 ? 0 : -EINVAL));
			if (i == 0) {
				launch_cfg_defaults(&c);
				launch_plan_apply(&p, &c);
				launch_comm_opts(&c, &a, 0, &o, ipbuf);
				EXPECT(o.no_auth == 1 && !o.auth_key);
			}
		}
	}

	FILE *f = fopen(path, "w");
	EXPECT(f != NULL);
	if (f) {
		fputs("bootstrap 198.18.1.10\nrank 0 ip 198.18.1.10 colour blue\n", f);
		fclose(f);
		fprintf(stderr, "(an error message about 'rank' is expected next)\n");
		EXPECT(launch_plan_load(path, &p) == -EINVAL);
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
	if (fails)
		fprintf(stderr, "%d failures\n", fails);
	else
		printf("tools: all passed\n");
	return fails ? 1 : 0;
}
