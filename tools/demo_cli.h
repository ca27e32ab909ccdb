/* tools/demo_cli: the command line shared by inca-demo and bench-allreduce (same options,
 * different defaults). */
#ifndef INCA_TOOLS_DEMO_CLI_H
#define INCA_TOOLS_DEMO_CLI_H

#include <stdbool.h>
#include <stdint.h>

struct demo_defaults {
	const char *tool;              /* program name in messages and JSON */
	uint64_t minb, maxb, factor;   /* main fp32:sum range */
	const char *pre;               /* pairs with their own ranges listed first, or NULL */
	const char *extra;             /* pairs over [minb, min(maxb, extra_max)], or NULL */
	uint64_t extra_max, extra_factor;
	int iters, warmup;
	double budget;                 /* seconds, per row and algorithm */
	bool ratio;                    /* INC/ring column */
	unsigned addr_index;
	uint32_t rto_us;               /* clients' minimum RTO; 0 = libinca's default */
	bool switch_cpu_auto;          /* --switch-cpu auto by default (else none) */
};

/* inca-demo's defaults (`make demo`); inca-fabric-demo starts from them. */
extern const struct demo_defaults demo_inca_defaults;

/* Parse argv, run the job, print the table. Returns the process exit code. */
int demo_main(int argc, char **argv, const struct demo_defaults *d);
/* Run tools/plot_bench.py on json_path, writing png_path (skipped when python or the script
 * are missing). */
int demo_plot(const char *json_path, const char *png_path);
/* The same with another plot script of tools/ (e.g. "plot_coll.py"). */
int demo_plot_with(const char *script_name, const char *json_path, const char *png_path);

#endif
