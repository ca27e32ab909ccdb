/* sim/sim_golden_test.c: golden-output regression test (htsim's habit): run the small
 * scenarios testdata/golden.ini (incast, ECMP, go-back-N) and testdata/golden_cc.ini (long
 * flows into one bottleneck under DCQCN) and compare fct.csv and summary.json byte for byte
 * with the stored copies. Set SIM_GOLDEN_UPDATE=1 to rewrite them after an intended model
 * change. */
#include <string.h>

#include "sim_test_util.h"

static char *render(struct sim *s, void (*fn)(const struct sim *, FILE *), size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	CHECK(f);
	fn(s, f);
	fclose(f);
	return buf;
}

static int compare(const char *dir, const char *name, const char *got, size_t len, bool update)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (update) {
		FILE *f = fopen(path, "w");
		CHECK(f && fwrite(got, 1, len, f) == len);
		fclose(f);
		return 0;
	}
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "missing %s (run with SIM_GOLDEN_UPDATE=1)\n", path);
		return 1;
	}
	char *want = malloc(len + 2);
	size_t n = fread(want, 1, len + 1, f);
	fclose(f);
	int bad = n != len || memcmp(want, got, len);
	if (bad) {
		size_t i = 0;
		while (i < n && i < len && want[i] == got[i])
			i++;
		fprintf(stderr, "%s differs from the golden copy at byte %zu\n", name, i);
		fprintf(stderr, "--- got (from there):\n%.200s\n", got + i);
	}
	free(want);
	return bad;
}

/* Runs testdata/NAME.ini and compares with NAME_fct.csv and NAME_summary.json. */
static int golden(const char *dir, const char *name, bool update)
{
	char ini[1024], err[512], f1[256], f2[256];
	snprintf(ini, sizeof(ini), "%s/%s.ini", dir, name);
	struct sim_config c;
	test_config(&c, NULL);
	if (sim_config_load(&c, ini, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct sim *s = test_sim(&c);
	sim_run(s, NULL, NULL);
	size_t l1, l2;
	char *fct = render(s, sim_write_fct_csv, &l1), *sum = render(s, sim_write_summary, &l2);
	snprintf(f1, sizeof(f1), "%s_fct.csv", name);
	snprintf(f2, sizeof(f2), "%s_summary.json", name);
	int bad = compare(dir, f1, fct, l1, update) + compare(dir, f2, sum, l2, update);
	free(fct);
	free(sum);
	sim_destroy(s);
	return bad;
}

int main(void)
{
	const char *dir = getenv("SIM_TESTDATA");
	bool update = getenv("SIM_GOLDEN_UPDATE") && !strcmp(getenv("SIM_GOLDEN_UPDATE"), "1");
	if (!dir) {
		fprintf(stderr, "SIM_TESTDATA not set\n");
		return 77;
	}
	int bad = golden(dir, "golden", update) + golden(dir, "golden_cc", update);
	if (!bad)
		puts(update ? "sim_golden_test: updated" : "sim_golden_test: ok");
	return bad ? 1 : 0;
}
