/* sim/sim_config_fuzz.c: libFuzzer harness for the scenario (INI) reader. An input is loaded on
 * top of the defaults; an accepted scenario is dumped and the dump must load back to the very
 * same dump (the params.ini round trip that reruns an experiment). Scenarios whose topology
 * stays small are then created and run for a few simulated microseconds, which exercises the
 * validation of every parameter (workload.file, topology.file and output.dir are cleared: no
 * file access). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *dump(const struct sim_config *c, size_t *n)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, n);
	if (!f)
		abort();
	sim_config_dump(c, f);
	fclose(f);
	return buf;
}

static bool small(const struct sim_config *c)
{
	uint64_t hp = c->hosts_per_tor ? c->hosts_per_tor : 8;
	switch (c->topo) {
	case SIM_TOPO_FATTREE: return c->k <= 6 && hp <= 8;
	case SIM_TOPO_LEAFSPINE: return (uint64_t)c->tors * c->spines * (c->parallel_links + 1) <= 64 && hp <= 8;
	default: return (uint64_t)c->racks * c->l1_per_rack * c->l2_per_rack <= 32 && hp <= 4 &&
			(uint64_t)c->switching_racks * c->l3_per_srack * c->l4_per_srack <= 32 &&
			(uint64_t)c->racks * c->l2_per_rack * c->switching_racks <= 64;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sim_config c, c2;
	char err[600];
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	sim_config_defaults(&c);
	int rc = sim_config_load_string(&c, text, "dir/fuzz.ini", err, sizeof(err));
	free(text);
	if (rc)
		return 0;
	size_t n1, n2;
	char *d1 = dump(&c, &n1);
	sim_config_defaults(&c2);
	if (sim_config_load_string(&c2, d1, "/abs/dump.ini", err, sizeof(err))) {
		fprintf(stderr, "dump does not load back: %s\n", err);
		abort();
	}
	char *d2 = dump(&c2, &n2);
	if (n1 != n2 || memcmp(d1, d2, n1)) {
		fprintf(stderr, "dump changed on reload:\n%s\n---\n%s\n", d1, d2);
		abort();
	}
	free(d1);
	free(d2);

	c.progress_s = 0;
	c.out_dir[0] = 0;
	c.cmatrix[0] = 0;
	c.topo_file[0] = 0; /* type = file is refused with its reason (sim_topo_fuzz covers files) */
	if (c.workload == SIM_WL_CMATRIX)
		c.workload = SIM_WL_NONE;
	c.stop_us = 5;
	if (c.size_bytes > 1000000)
		c.size_bytes = 1000000;
	if (c.k == 0)
		c.k = 4;
	if (!small(&c) || c.mtu_bytes < 512)
		return 0;
	struct sim *s;
	if (sim_create(&c, &s, err, sizeof(err)) == 0) {
		if (sim_flow_count(s) <= 2000)
			sim_run(s, NULL, NULL);
		sim_destroy(s);
	} else if (!err[0]) {
		abort(); /* every rejection must say why */
	}
	return 0;
}
