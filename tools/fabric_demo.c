/* inca-fabric-demo: what `make fabric-demo` runs inside the netns fabric built by
 * tools/fabric_demo.sh (tests/netns/fabric.py): the inca-demo sweep with --fabric PLAN, sizes up
 * to 64 MiB and an INC/ring column. The ranks enter their host namespaces; the switches are the
 * harness's. Options: inca-fabric-demo --help (the same as inca-demo's). */
#include <stdio.h>
#include <string.h>

#include "demo_cli.h"

int main(int argc, char **argv)
{
	static const struct demo_defaults d = {
		.tool = "inca-fabric-demo",
		.minb = 4,
		.maxb = 64u << 20,
		.factor = 4,
		.extra = "int32:sum,fp16:sum,bf16:sum,int64:bxor,fp64:min,uint8:max",
		.extra_max = 1u << 20,
		.extra_factor = 16,
		.iters = 10,
		.warmup = 2,
		.budget = 2.0,
		.ratio = true,
		.addr_index = 0,
		/* Results queue behind a window of packets on every rate-limited hop and the
		 * switches share the CPUs with the ranks: a 20 ms minimum RTO fires spuriously
		 * there and each spurious retransmission adds traffic (docs/fabric.md). */
		.rto_us = 50000,
	};
	bool fabric = false;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--fabric") || !strncmp(argv[i], "--fabric=", 9) ||
		    !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help") ||
		    !strcmp(argv[i], "-V") || !strcmp(argv[i], "--version"))
			fabric = true;
	if (!fabric) {
		fprintf(stderr, "inca-fabric-demo: needs --fabric PLAN (run it through "
				"tools/fabric_demo.sh or tests/netns/fabric.py run)\n");
		return 2;
	}
	return demo_main(argc, argv, &d);
}
