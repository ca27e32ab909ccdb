/* inca-fabric-demo: what `make fabric-demo` runs inside the netns fabric built by
 * tools/fabric_demo.sh (tests/netns/fabric.py): the inca-demo sweep with --fabric PLAN, sizes up
 * to 64 MiB and an INC/ring column. The ranks enter their host namespaces; the switches are the
 * harness's. Options: inca-fabric-demo --help (the same as inca-demo's). */
#include <stdio.h>
#include <string.h>

#include "demo_cli.h"

int main(int argc, char **argv)
{
	/* inca-demo's sweep with other types next to fp32:sum, fewer iterations, more time per
	 * row and an INC/ring column. */
	struct demo_defaults d = demo_inca_defaults;
	d.tool = "inca-fabric-demo";
	d.extra = "int32:sum,fp16:sum,bf16:sum,int64:bxor,fp64:min,uint8:max";
	d.iters = 10;
	d.warmup = 2;
	d.budget = 2.0;
	d.ratio = true;
	/* Results queue behind a window of packets on every rate-limited hop and the switches
	 * share the CPUs with the ranks: a 20 ms minimum RTO fires spuriously there and each
	 * spurious retransmission adds traffic (docs/fabric.md). */
	d.rto_us = 50000;
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
