/* tools/bench_cli: the shared options of inca-demo / bench-allreduce and inca-bench
 * (bench_cli.h): one parser for their values and the checks that follow, so both tools accept
 * and refuse the same values with the same messages (docs/cli.md). */
#include "bench_cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/cli.h"

/* Option c with value arg if it is a shared one: 1 taken, 0 not shared, -1 bad value. */
static int take(struct bench_cli *b, struct launch_cfg *cfg, int c, const char *arg)
{
	const char *tool = b->tool;
	long long ll;

	switch (c) {
	case 'r':
		if (util_cli_int(tool, "--ranks", arg, 1, LAUNCH_MAX_RANKS, &ll))
			return -1;
		cfg->nranks = (int)ll;
		return 1;
	case 'b':
		return util_cli_bytes(tool, "--minbytes", arg, 1, UINT64_MAX, &b->minb) ? -1 : 1;
	case 'e':
		return util_cli_bytes(tool, "--maxbytes", arg, 1, UINT64_MAX, &b->maxb) ? -1 : 1;
	case 'f':
		if (util_cli_int(tool, "--stepfactor", arg, 2, 1 << 30, &ll))
			return -1;
		b->factor = (uint64_t)ll;
		return 1;
	case 't':
		b->types = arg;
		return 1;
	case 'w':
		if (util_cli_int(tool, "--warmup", arg, 0, 1000000, &ll))
			return -1;
		b->warmup = (int)ll;
		return 1;
	case 'n':
	case 'i':
		if (util_cli_int(tool, "--iters", arg, b->iters_min, 1000000, &ll))
			return -1;
		b->iters = (int)ll;
		return 1;
	case 'v':
		b->verbose = true;
		return 1;
	case BENCH_OPT_BUDGET:
		return util_cli_double(tool, "--budget", arg, 0, 86400, false, &b->budget_s) ? -1 : 1;
	case BENCH_OPT_LINK:
		return util_cli_double(tool, "--link-rate", arg, 0, 1e15, false, &b->link_bps) ? -1 :
											      1;
	case BENCH_OPT_SWITCH:
		cfg->switch_path = arg;
		return 1;
	case BENCH_OPT_ADDR:
		if (util_cli_int(tool, "--addr-index", arg, 0, 255, &ll))
			return -1;
		cfg->addr_index = (unsigned)ll;
		return 1;
	case BENCH_OPT_JSON:
		b->json_path = arg;
		return 1;
	case BENCH_OPT_PLOT:
		b->plot_path = arg;
		return 1;
	case BENCH_OPT_FABRIC:
		b->fabric_path = arg;
		return 1;
	case BENCH_OPT_SEED:
		return util_cli_u64(tool, "--seed", arg, 0, UINT64_MAX, &b->seed) ? -1 : 1;
	default:
		return 0;
	}
}

int bench_cli_next(struct bench_cli *b, struct launch_cfg *cfg, int argc, char **argv,
		   const char *shortopts, const struct option *longopts)
{
	int c, taken;

	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		if (c == 'h')
			return BENCH_CLI_HELP;
		if (c == 'V') {
			util_cli_print_version(b->tool);
			return BENCH_CLI_VERSION;
		}
		taken = take(b, cfg, c, optarg);
		if (taken < 0)
			return BENCH_CLI_BAD;
		if (!taken)
			return c;
	}
	return BENCH_CLI_END;
}

int bench_cli_check(const struct bench_cli *b, int argc, char **argv)
{
	if (optind != argc) {
		util_cli_error(b->tool, "unexpected argument '%s'", argv[optind]);
		return -1;
	}
	if (b->minb > b->maxb) {
		util_cli_error(b->tool, "--minbytes %llu is larger than --maxbytes %llu",
			       (unsigned long long)b->minb, (unsigned long long)b->maxb);
		return -1;
	}
	if (b->plot_path && !b->json_path) {
		util_cli_error(b->tool, "--plot needs --json");
		return -1;
	}
	return 0;
}

int bench_cli_fabric(const struct bench_cli *b, struct launch_plan *plan, struct launch_cfg *cfg)
{
	if (b->fabric_path) {
		if (launch_plan_load(b->fabric_path, plan))
			return -1;
		launch_plan_apply(plan, cfg);
	}
	if (cfg->nranks < 1 || cfg->nranks > LAUNCH_MAX_RANKS) {
		util_cli_error(b->tool, "the fabric plan has %d ranks (1..%d)", cfg->nranks,
			       LAUNCH_MAX_RANKS);
		return -1;
	}
	return 0;
}

int bench_cli_pairs(const struct bench_cli *b, struct sweep_pair *pairs, int max)
{
	int n = sweep_parse_pairs(b->types, b->minb, b->maxb, b->factor, pairs, max);

	if (n <= 0) {
		util_cli_error(b->tool, "--types '%s': expected TYPE:OP[@MIN-MAX[/FACTOR]],... "
			       "(e.g. fp32:sum,int32:max@4-64K/16)", b->types);
		return -1;
	}
	return n;
}

int bench_cli_json_create(const struct bench_cli *b)
{
	FILE *f;

	if (!b->json_path)
		return 0;
	f = fopen(b->json_path, "w");
	if (!f) {
		fprintf(stderr, "%s: %s: %s\n", b->tool, b->json_path, strerror(errno));
		return -1;
	}
	fclose(f);
	return 0;
}
