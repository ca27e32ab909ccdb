/* inca-demo: what `make demo` runs. Starts an inca-switch and 4 rank processes on loopback,
 * runs AllReduce 4 B .. 64 MiB for INC and the host ring side by side, verifies every result,
 * prints an nccl-tests-style table and the switch's counters. Options: inca-demo --help. */
#include "demo_cli.h"

int main(int argc, char **argv)
{
	static const struct demo_defaults d = {
		.tool = "inca-demo",
		.minb = 4,
		.maxb = 64u << 20,
		.factor = 4,
		.extra = "int32:max,fp16:sum,bf16:sum,int64:bxor,fp64:min,uint8:prod",
		.extra_max = 1u << 20,
		.extra_factor = 16,
		.iters = 20,
		.warmup = 5,
		.budget = 1.5,
		.addr_index = 0,
	};
	return demo_main(argc, argv, &d);
}
