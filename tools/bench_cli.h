/* tools/bench_cli: the options that inca-demo / bench-allreduce (demo_cli.c) and inca-bench
 * share: their getopt_long rows, one parser for their values, and the checks and set-up steps
 * that follow parsing. Each tool keeps its own usage text and its own options. */
#ifndef INCA_TOOLS_BENCH_CLI_H
#define INCA_TOOLS_BENCH_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "launch.h"
#include "sweep.h"

/* Codes of the shared long options without a short form; a tool numbers its own options from
 * BENCH_OPT_TOOL on. */
enum {
	BENCH_OPT_BUDGET = 1000,
	BENCH_OPT_LINK,
	BENCH_OPT_SWITCH,
	BENCH_OPT_ADDR,
	BENCH_OPT_JSON,
	BENCH_OPT_PLOT,
	BENCH_OPT_FABRIC,
	BENCH_OPT_SEED,
	BENCH_OPT_TOOL,
};

/* The shared rows of a tool's struct option table (short forms: "r:b:e:f:t:w:n:i:vhV"). */
#define BENCH_CLI_LONGOPTS                                                                  \
	{ "ranks", required_argument, 0, 'r' }, { "minbytes", required_argument, 0, 'b' },  \
	{ "maxbytes", required_argument, 0, 'e' },                                          \
	{ "stepfactor", required_argument, 0, 'f' },                                        \
	{ "types", required_argument, 0, 't' }, { "warmup", required_argument, 0, 'w' },    \
	{ "iters", required_argument, 0, 'i' }, { "verbose", no_argument, 0, 'v' },         \
	{ "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' },                \
	{ "budget", required_argument, 0, BENCH_OPT_BUDGET },                               \
	{ "link-rate", required_argument, 0, BENCH_OPT_LINK },                              \
	{ "switch", required_argument, 0, BENCH_OPT_SWITCH },                               \
	{ "addr-index", required_argument, 0, BENCH_OPT_ADDR },                             \
	{ "json", required_argument, 0, BENCH_OPT_JSON },                                   \
	{ "plot", required_argument, 0, BENCH_OPT_PLOT },                                   \
	{ "fabric", required_argument, 0, BENCH_OPT_FABRIC },                               \
	{ "seed", required_argument, 0, BENCH_OPT_SEED }

/* The values of the shared options. A tool sets the defaults (and tool, iters_min) before
 * parsing. */
struct bench_cli {
	const char *tool;   /* program name in messages */
	int iters_min;      /* the smallest --iters accepted */
	uint64_t minb, maxb, factor;
	int iters, warmup;
	double budget_s, link_bps;
	uint64_t seed;
	bool verbose;
	const char *types, *json_path, *plot_path, *fabric_path;
};

/* What bench_cli_next returns besides the tool's own option codes. */
enum { BENCH_CLI_END = 0, BENCH_CLI_HELP = -1, BENCH_CLI_VERSION = -2, BENCH_CLI_BAD = -3 };

/* getopt_long(argc, argv, shortopts, longopts) that takes the shared options itself: returns
 * the next option that is the tool's own (getopt_long's '?' for an unknown one), END after
 * the last option, HELP for -h (the tool prints its usage, exit 0), VERSION for -V (printed,
 * exit 0), BAD for a bad value of a shared option (the message printed, exit 2). --ranks,
 * --switch and --addr-index go into cfg. */
int bench_cli_next(struct bench_cli *b, struct launch_cfg *cfg, int argc, char **argv,
		   const char *shortopts, const struct option *longopts);
/* After getopt_long: no operand left, --minbytes <= --maxbytes, --plot only with --json.
 * 0, or -1 with the message printed (exit 2). */
int bench_cli_check(const struct bench_cli *b, int argc, char **argv);
/* --fabric: load the plan into *plan and apply it to cfg (0), or -1 (printed). Without
 * --fabric, nothing (0). Then the rank count is checked against 1..LAUNCH_MAX_RANKS. */
int bench_cli_fabric(const struct bench_cli *b, struct launch_plan *plan, struct launch_cfg *cfg);
/* --types as pairs over [minb, maxb] (step factor) into pairs[max]: their count, or -1 with
 * the message printed. */
int bench_cli_pairs(const struct bench_cli *b, struct sweep_pair *pairs, int max);
/* Create (truncate) the --json file so a bad path fails before any rank starts: 0 or -1. */
int bench_cli_json_create(const struct bench_cli *b);

#endif
