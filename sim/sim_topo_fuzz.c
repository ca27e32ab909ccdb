/* sim/sim_topo_fuzz.c: libFuzzer harness for the topology-file reader (sim_topo_file.c). Each
 * input is parsed with small size limits; a refusal must name the file and say why, an accepted
 * topology must satisfy what the builder relies on (single-homed hosts, no self-loops, ids and
 * speeds in range). Small accepted topologies are then built (routes by BFS), run for 20
 * simulated microseconds with a permutation, and written back with sim_write_topology, which
 * must read back to the same text. Built by tests/fuzz/run_fuzz.sh with the simulator's sources. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_topo_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *written(struct sim *s, size_t *n)
{
	char *buf = NULL;
	FILE *o = open_memstream(&buf, n);
	if (!o)
		abort();
	if (sim_write_topology(s, o))
		abort();
	fclose(o);
	return buf;
}

/* A simulation of the topology in text (kept in a memfd, read through /proc). */
static struct sim *build(const struct sim_config *base, const char *text, size_t n, int *fd_out)
{
	int fd = memfd_create("topo", 0);
	if (fd < 0)
		return NULL;
	if (write(fd, text, n) != (ssize_t)n) {
		close(fd);
		return NULL;
	}
	struct sim_config c = *base;
	snprintf(c.topo_file, sizeof(c.topo_file), "/proc/self/fd/%d", fd);
	struct sim *s;
	char err[512];
	if (sim_create(&c, &s, err, sizeof(err))) {
		fprintf(stderr, "accepted topology refused by sim_create: %s\n%.*s\n", err, (int)n, text);
		abort();
	}
	*fd_out = fd;
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct sim_topo_limits lim = { 256, 256, 4096, 512 };
	struct sim_config c;
	sim_config_defaults(&c);
	c.progress_s = 0;
	c.topo = SIM_TOPO_FILE;
	c.workload = SIM_WL_PERMUTATION;
	c.size_bytes = 20000;
	c.stop_us = 20;
	if (!size)
		return 0;
	c.routing = data[0] & 1 ? SIM_ROUTE_SPRAY : SIM_ROUTE_ECMP;
	c.transport = data[0] & 2 ? SIM_TRANSPORT_SR : SIM_TRANSPORT_GBN;
	FILE *f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	struct sim_topo_links l;
	struct sim_topo_nodes nd;
	char err[512] = "";
	int rc = sim_topo_file_parse(&c, f, "fuzz.txt", &lim, &l, &nd, err, sizeof(err));
	fclose(f);
	if (rc) {
		if (strncmp(err, "fuzz.txt", 8))
			abort(); /* every refusal names the file and says why */
		return 0;
	}
	uint32_t H = nd.nhosts, N = nd.nhosts + nd.nsw;
	uint32_t *hostlinks = calloc(H, sizeof(*hostlinks));
	if (!hostlinks)
		abort();
	for (uint32_t i = 0; i < l.n; i++) {
		const struct sim_topo_link *k = &l.v[i];
		if (k->a >= N || k->b >= N || k->a == k->b || (k->a < H && k->b < H))
			abort();
		if (k->rate_bps < 1000000000ull || k->rate_bps > 3200000000000ull ||
		    k->latency_ps > 1000000000000ull)
			abort();
		if (k->a < H)
			hostlinks[k->a]++;
		if (k->b < H)
			hostlinks[k->b]++;
	}
	for (uint32_t i = 0; i < H; i++)
		if (hostlinks[i] != 1)
			abort();
	free(hostlinks);
	bool small = H >= 2 && H <= 64 && nd.nsw <= 64 && l.n <= 1024;
	free(l.v);
	sim_topo_nodes_free(&nd);
	if (!small)
		return 0;
	int fd1, fd2;
	struct sim *s = build(&c, (const char *)data, size, &fd1);
	if (!s)
		return 0;
	sim_run(s, NULL, NULL);
	size_t n1, n2;
	char *t1 = written(s, &n1);
	sim_destroy(s);
	close(fd1);
	struct sim *s2 = build(&c, t1, n1, &fd2);
	if (s2) {
		char *t2 = written(s2, &n2);
		if (n1 != n2 || memcmp(t1, t2, n1)) {
			fprintf(stderr, "written topology changed on reload:\n%s\n---\n%s\n", t1, t2);
			abort();
		}
		free(t2);
		sim_destroy(s2);
		close(fd2);
	}
	free(t1);
	return 0;
}
