/* sim/sim_determinism_test.c: same seed -> byte-identical output files; another seed ->
 * different outputs; two simulations advanced alternately in one process give exactly the
 * results of one run alone (no hidden global state). */
#include <string.h>
#include <unistd.h>

#include "sim_test_util.h"

static char *slurp(const char *dir, const char *name, size_t *len)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	CHECK(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc((size_t)n + 1);
	CHECK(b && fread(b, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

static void run_to(const char *dir, const char *seed)
{
	const char *kv[] = { "topology.k=4", "switch.routing=spray_random", "host.transport=sr",
		"workload.type=permutation", "workload.size_bytes=300000", "output.timeseries_us=5",
		seed, NULL };
	struct sim_config c;
	test_config(&c, kv);
	snprintf(c.out_dir, sizeof(c.out_dir), "%s", dir);
	struct sim *s = test_sim(&c);
	sim_run(s, NULL, NULL);
	CHECK(sim_write_outputs(s, dir) == 0);
	sim_destroy(s);
}

struct outs { char *f[4]; size_t n[4]; };
static const char *const files[4] = { "fct.csv", "summary.json", "timeseries.csv", "params.ini" };

/* Runs into the same directory each time (the directory is itself a parameter written into
 * the outputs) and keeps the file contents. */
static void run_keep(const char *dir, const char *seed, struct outs *o)
{
	run_to(dir, seed);
	for (int i = 0; i < 4; i++)
		o->f[i] = slurp(dir, files[i], &o->n[i]);
}

static bool same(const struct outs *a, const struct outs *b, int i)
{
	return a->n[i] == b->n[i] && !memcmp(a->f[i], b->f[i], a->n[i]);
}

static void interleaved(void)
{
	const char *kv[] = { "topology.k=4", "switch.routing=adaptive", "host.transport=gbn",
		"workload.type=permutation", "workload.size_bytes=200000", "sim.seed=5", NULL };
	struct sim_config c;
	test_config(&c, kv);
	struct sim *solo = test_sim(&c), *a = test_sim(&c), *b;
	sim_run(solo, NULL, NULL);
	sim_config_set(&c, "sim.seed", "6");
	b = test_sim(&c);
	/* advance a and b in turns of 3 us until both are done */
	int da = 0, db = 0;
	for (sim_time_ps t = 0; !(da && db); t += sim_time_from_us(3)) {
		if (!da) da = sim_run_until(a, t);
		if (!db) db = sim_run_until(b, t);
	}
	CHECK_EQ(sim_flow_count(a), sim_flow_count(solo));
	for (uint32_t i = 0; i < sim_flow_count(a); i++) {
		struct sim_flow_result x, y;
		sim_flow_result(solo, i, &x);
		sim_flow_result(a, i, &y);
		CHECK(x.done && y.done);
		CHECK_EQ(x.finish_ps, y.finish_ps);
		CHECK_EQ(x.dst, y.dst);
	}
	struct sim_stats sa, ss;
	sim_get_stats(a, &sa);
	sim_get_stats(solo, &ss);
	CHECK_EQ(sa.events, ss.events);
	sim_destroy(solo);
	sim_destroy(a);
	sim_destroy(b);
}

int main(void)
{
	char base[] = "/tmp/inca-sim-det-XXXXXX";
	CHECK(mkdtemp(base));
	char d1[512];
	snprintf(d1, sizeof(d1), "%s/a", base);
	struct outs x, y, z;
	run_keep(d1, "sim.seed=11", &x);
	run_keep(d1, "sim.seed=11", &y);
	run_keep(d1, "sim.seed=12", &z);
	for (int i = 0; i < 4; i++)
		CHECK(same(&x, &y, i));
	CHECK(!same(&x, &z, 0));
	CHECK(!same(&x, &z, 1));
	CHECK(!same(&x, &z, 2));
	for (int i = 0; i < 4; i++) {
		free(x.f[i]);
		free(y.f[i]);
		free(z.f[i]);
	}
	interleaved();
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	CHECK(system(cmd) == 0);
	puts("sim_determinism_test: ok");
	return 0;
}
