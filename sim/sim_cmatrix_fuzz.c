/* sim/sim_cmatrix_fuzz.c: libFuzzer harness for the htsim connection-matrix reader. Each input
 * is parsed on a fresh 16-host fat tree; an accepted matrix with modest flows is then run for
 * 30 simulated microseconds (triggers, go-back-N / selective repeat, ECMP / spraying, PFC,
 * drops, endless flows, failed links), so the parser's output is
 * exercised by the model too. Built by tests/fuzz/run_fuzz.sh with the simulator's sources. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sim_config c;
	struct sim *s;
	char err[256];
	sim_config_defaults(&c);
	c.progress_s = 0;
	c.k = 4;
	c.workload = SIM_WL_NONE;
	c.transport = data[0] & 1 ? SIM_TRANSPORT_SR : SIM_TRANSPORT_GBN;
	c.routing = data[0] & 2 ? SIM_ROUTE_SPRAY : SIM_ROUTE_ECMP;
	c.cm_start_unit = data[0] & 4 ? SIM_UNIT_US : SIM_UNIT_PS;
	c.pfc = data[0] & 8;
	c.buffer_bytes = 100000; /* small buffers: drops (lossy) or pauses (PFC) do happen */
	c.stop_us = 30;
	if (size == 0 || sim_create(&c, &s, err, sizeof(err)))
		return 0;
	FILE *f = fmemopen((void *)data, size, "r");
	if (!f) {
		sim_destroy(s);
		return 0;
	}
	int rc = sim_cmatrix_parse(s, f, "fuzz.cm");
	fclose(f);
	if (rc && !s->err[0])
		abort(); /* every rejection must say why */
	if (rc == 0) {
		bool small = true;
		for (uint32_t i = 0; i < s->nflows; i++)
			small &= s->flows[i].size_bytes <= 4000000;
		if (small) {
			for (uint32_t i = 0; i < s->nflows; i++) { /* as sim_create does */
				struct sim_flow *fl = &s->flows[i];
				sim_ev_init(&fl->start_ev, sim_flow_start_ev);
				sim_ev_init(&fl->rto_ev, NULL);
				sim_ev_init(&fl->rate_ev, NULL);
				if (!fl->trig_start)
					sim_schedule(s, &fl->start_ev, fl->start_ps);
			}
			sim_run(s, NULL, NULL);
			char *buf = NULL;
			size_t n = 0;
			FILE *o = open_memstream(&buf, &n);
			if (o) {
				sim_write_fct_csv(s, o);
				sim_write_summary(s, o);
				fclose(o);
				free(buf);
			}
		}
	}
	sim_destroy(s);
	return 0;
}
