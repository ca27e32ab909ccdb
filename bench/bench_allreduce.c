/* bench-allreduce: INC vs the host ring on loopback, 4 ranks, in the same run: fp32 sum
 * latency at small sizes, then algbw from 1 MiB to 64 MiB (factor 2) with an INC/ring ratio
 * column. Every result is verified. --json FILE --plot PNG draw algbw vs size. */
#include "demo_cli.h"

int main(int argc, char **argv)
{
	static const struct demo_defaults d = {
		.tool = "bench-allreduce",
		.minb = 1u << 20,
		.maxb = 64u << 20,
		.factor = 2,
		.pre = "fp32:sum@4-64K/16",
		.iters = 20,
		.warmup = 3,
		.budget = 2.0,
		.ratio = true,
		.addr_index = 41,
		/* The switch stands for a device of its own: it gets a CPU to itself, and the
		 * ranks of INC rows of 64 KiB or more one CPU fewer than the ring's (sweep.c).
		 * --switch-cpu none shares. */
		.switch_cpu_auto = true,
	};
	return demo_main(argc, argv, &d);
}
