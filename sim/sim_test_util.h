/* sim/sim_test_util.h: tiny assertion helpers shared by the simulator's tests (typed checks
 * that print both values), and a helper to build a configuration from "key=value" strings. */
#ifndef INCA_SIM_TEST_UTIL_H
#define INCA_SIM_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "sim.h"

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); exit(1); } } while (0)
#define CHECK_EQ_U(a, b) do { unsigned long long _a = (a), _b = (b); if (_a != _b) { \
	fprintf(stderr, "%s:%d: %s == %s failed: %llu != %llu\n", __FILE__, __LINE__, #a, #b, _a, _b); \
	exit(1); } } while (0)
#define CHECK_NEAR(a, b, rel) do { double _a = (a), _b = (b); \
	if (!(_a >= _b * (1 - (rel)) && _a <= _b * (1 + (rel)))) { \
	fprintf(stderr, "%s:%d: %s ~ %s failed: %.6f vs %.6f (rel %.4f)\n", __FILE__, __LINE__, #a, #b, \
		_a, _b, (double)(rel)); exit(1); } } while (0)

/* Defaults plus overrides, NULL-terminated. Exits on an unknown key (a broken test). */
static inline void test_config(struct sim_config *c, const char *const *kv)
{
	sim_config_defaults(c);
	c->progress_s = 0;
	for (; kv && *kv; kv++)
		if (sim_config_set_arg(c, *kv)) {
			fprintf(stderr, "bad test parameter %s\n", *kv);
			exit(1);
		}
}

static inline struct sim *test_sim(const struct sim_config *c)
{
	struct sim *s;
	char err[512];
	if (sim_create(c, &s, err, sizeof(err))) {
		fprintf(stderr, "sim_create: %s\n", err);
		exit(1);
	}
	return s;
}

#endif
